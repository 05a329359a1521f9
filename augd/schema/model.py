"""The pipeline spec: YAML -> frozen, validated objects. TensorFlow is never imported here."""
from __future__ import annotations

import dataclasses
import functools
import hashlib
import json
import math

from dataclasses import dataclass
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from augd import defaults
from augd.errors import SpecError
from augd.labels import LabelMapError, check_names
from augd.ops import REGISTRY, Kind, OpParams
from augd.schema.annotations import Annotations, AnnotationsConfig
from augd.schema.tile import TileSpec
from augd.schema.validate import combine, did_you_mean, validate
from augd.parsing.yamlsrc import YamlDoc

__all__ = ["OpNode", "OutputSpec", "PipelineSpec", "parse_doc", "NAME_RE"]

NAME_RE = r"^[a-z0-9_-]{1,64}$"


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class OutputSpec(_Strict):
    """How records are encoded and sharded."""
    format: Literal["jpeg", "png", "raw"] = Field("jpeg", description="encoding of augmented images")
    quality: int = Field(defaults.JPEG_QUALITY, ge=1, le=100, description="JPEG quality of re-encoded images")
    shards: Literal["auto"] | int = Field("auto", description="'auto' (~128 MB a shard) or a fixed count >= 1")
    compression: Literal["none", "gzip"] = Field("none", description="TFRecord compression")

    def model_post_init(self, _):
        if isinstance(self.shards, int) and not 1 <= self.shards <= 100_000:
            raise ValueError(f"shards must be 'auto' or an integer in [1, 100000]; got {self.shards}")


class BalanceSpec(_Strict):
    """Class balance: more variants for the images of rare classes."""
    max_variants: int = Field(ge=1, le=1000, description="the most augmented variants one image gets")


class _Header(_Strict):
    name: str = Field(pattern=NAME_RE, description="pipeline name, [a-z0-9_-]+")
    description: str = Field("", description="what the pipeline is for (free text)")
    seed: int = Field(0, ge=0, le=2**63 - 1, description="base of every per-image seed")
    variants: int = Field(1, ge=0, le=1000, description="augmented copies per input image")
    keep_original: bool = Field(True, description="also write the untouched image as variant 0")
    output: OutputSpec = Field(OutputSpec(), description="how records are encoded (jpeg, png or raw pixels) and "
                                                         "sharded")
    colour: Literal["exact", "fast"] = Field(
        "exact", description="exact: every colour op means what the same-named tf.image function means "
                             "(clipped after each op); fast: runs of brightness, contrast, saturation (luma "
                             "blend), hue (YIQ rotation) and grayscale fold into one colour matrix applied in one "
                             "pass over uint8 pixels, clipped once")
    ops: list[Any] = Field(default_factory=list, description="the augmentation chain, applied in order")
    labels: list[str] | None = Field(None, description="fixed label map: class names, id = position; every job "
                                                       "of this pipeline numbers its classes so")
    split: dict[Literal["train", "validation", "test"], float] | None = Field(
        None, description="split a job without split folders by a stable hash of each path: shares that add to 1, "
                          "e.g. {train: 0.9, validation: 0.1}")
    augment_splits: list[Literal["train", "validation", "test"]] | None = Field(
        None, description="splits that get augmented variants; the others are written as they are, originals "
                          "only (default: [train]; list every split to augment them all)")
    annotations: AnnotationsConfig | None = Field(
        None, description="detection and segmentation jobs: how boxes and masks are read and kept (see "
                          "docs/pipelines.md#detection-and-segmentation)")
    balance: BalanceSpec | None = Field(
        None, description="give each image of a split as many variants (from `variants` up to max_variants) as "
                          "bring its rarest class's count towards the split's most common class's (objects in "
                          "detection jobs, images otherwise)")
    tile: TileSpec | None = Field(
        None, description="slice each image into overlapping tiles, each a record of its own that the ops then run "
                          "on (see docs/pipelines.md#tiles-small-objects-in-large-images)")


@dataclass(frozen=True)
class OpNode:
    """One op in the chain: its registered name, validated params, and children for composites."""
    name: str
    params: OpParams
    children: tuple["OpNode", ...] = ()

    @property
    def kind(self) -> Kind:
        return REGISTRY[self.name].kind

    def to_dict(self) -> dict:
        body = self.params.model_dump(mode="json")
        if self.kind is Kind.COMPOSITE and not hasattr(REGISTRY[self.name], "expand"):   # a policy's: its own
            body["ops"] = [c.to_dict() for c in self.children]
        return {self.name: body}


@dataclass(frozen=True)
class PipelineSpec:
    name: str
    description: str
    seed: int
    variants: int
    keep_original: bool
    output: OutputSpec
    ops: tuple[OpNode, ...]
    source: str = "<string>"
    colour: str = "exact"
    labels: tuple[str, ...] | None = None
    split: tuple[tuple[str, float], ...] | None = None      # (name, share) in train, validation, test order
    augment_splits: tuple[str, ...] | None = None
    annotations: Annotations | None = None                  # only the keys set; None: nothing set
    balance: int | None = None                              # balance.max_variants; None: no balance
    tile: TileSpec | None = None                            # None: each image whole

    def normalized(self) -> dict:
        """Every default filled in: the form hashed into records and written to manifests."""
        return {
            "name": self.name, "description": self.description, "seed": self.seed,
            "variants": self.variants, "keep_original": self.keep_original,
            "output": self.output.model_dump(mode="json"), "colour": self.colour,
            "ops": [n.to_dict() for n in self.ops],
            # Absent unless set: a pipeline without them keeps its sha.
            **({"labels": list(self.labels)} if self.labels is not None else {}),
            **({"split": dict(self.split)} if self.split else {}),
            **({"augment_splits": list(self.augment_splits)} if self.augment_splits is not None else {}),
            **({"annotations": self.annotations.normalized()} if self.annotations is not None else {}),
            **({"balance": {"max_variants": self.balance}} if self.balance is not None else {}),
            **({"tile": self.tile.normalized()} if self.tile is not None else {}),
        }

    @functools.cached_property
    def sha256(self) -> str:  # cached: records carry it, once per image
        canon = json.dumps(self.normalized(), sort_keys=True, separators=(",", ":"))
        return hashlib.sha256(canon.encode()).hexdigest()

    def augments(self, split: str) -> bool:
        """Whether a split gets augmented variants: a job without splits ("") always; else the split is in
        `augment_splits`, or in defaults.AUGMENT_SPLITS (train) when the pipeline sets none."""
        return not split or split in (self.augment_splits if self.augment_splits is not None
                                      else defaults.AUGMENT_SPLITS)

    def with_seed(self, seed: int) -> "PipelineSpec":
        return dataclasses.replace(self, seed=seed)

    def with_labels(self, labels: tuple[str, ...] | None) -> "PipelineSpec":
        """The same chain with a fixed label map (a job's own, the daemon's or --labels); None keeps its own."""
        return self if labels is None else dataclasses.replace(self, labels=tuple(labels))

    def with_annotations(self, layer: Annotations | None) -> "PipelineSpec":
        """The same chain with `layer`'s annotation keys over its own (a job's augd.yaml, --annotations);
        None or an empty layer keeps its own."""
        if layer is None or layer.is_empty:
            return self
        return dataclasses.replace(self, annotations=layer.over(self.annotations))

    def under_annotations(self, layer: Annotations | None) -> "PipelineSpec":
        """The same chain with its own annotation keys over `layer`'s (the daemon's, below the pipeline's)."""
        if layer is None or layer.is_empty:
            return self
        own = self.annotations
        return dataclasses.replace(self, annotations=own.over(layer) if own is not None else layer)


def _parse_op(doc: YamlDoc, raw: Any, loc: tuple) -> OpNode:
    if not isinstance(raw, dict) or len(raw) != 1:
        got = list(raw) if isinstance(raw, dict) else raw
        raise doc.error(loc, f"each op must be a mapping with exactly one key, the op name "
                             f"(e.g. '- random_hue: {{max_delta: 0.2}}'); got {got!r}")
    (name, body), = raw.items()
    if name not in REGISTRY:
        raise doc.error(loc + (name,), f"unknown op {name!r}{did_you_mean(name, REGISTRY)} "
                                       f"(run 'augd ops' for the list)")
    cls = REGISTRY[name]
    loc = loc + (name,)
    body = {} if body is None else body
    children: tuple[OpNode, ...] = ()
    if cls.kind is Kind.COMPOSITE and hasattr(cls, "expand"):   # a policy writes its own children
        if not isinstance(body, dict):
            raise doc.error(loc, f"parameters of {name} must be a mapping; got {body!r}")
        params = validate(cls.Params, doc, body, at=loc)
        return OpNode(name=name, params=params, children=_parse_ops(doc, cls.expand(params), loc + ("(expanded)",)))
    if cls.kind is Kind.COMPOSITE:
        if isinstance(body, list):
            body = {"ops": body}
        if not isinstance(body, dict) or not isinstance(body.get("ops"), list) or not body["ops"]:
            raise doc.error(loc, f"{name} takes a non-empty list of ops, or a mapping with 'ops: [...]'; "
                                 f"got {body!r}")
        children = _parse_ops(doc, body["ops"], loc + ("ops",))
        body = {k: v for k, v in body.items() if k != "ops"}
    elif not isinstance(body, dict):
        raise doc.error(loc, f"parameters of {name} must be a mapping; got {body!r}")
    params = validate(cls.Params, doc, body, at=loc, context={"n_children": len(children)},
                      extra_keys=("ops",) if cls.kind is Kind.COMPOSITE else ())
    return OpNode(name=name, params=params, children=children)


def _parse_ops(doc: YamlDoc, raws: list, loc: tuple) -> tuple[OpNode, ...]:
    """Every op of a list, reporting the errors of all of them at once."""
    nodes, errors = [], []
    for i, raw in enumerate(raws):
        try:
            nodes.append(_parse_op(doc, raw, loc + (i,)))
        except SpecError as exc:
            errors.append(exc)
    if errors:
        raise combine(errors)
    return tuple(nodes)


def _partner_ops_lead(doc: YamlDoc, ops: tuple[OpNode, ...], loc: tuple = ("ops",)) -> list[SpecError]:
    """A partner op (mosaic, mixup, cutmix) lays out the canvas the rest of the chain runs on: only ops[0] may be
    one (augd.ops.base.PartnerOp)."""
    errors = []
    for i, node in enumerate(ops):
        if node.kind is Kind.MIX and (loc != ("ops",) or i > 0):
            errors.append(doc.error(loc + (i, node.name), f"{node.name} combines the image with partner images, so it "
                                    f"must be the first op of the chain (ops[0], not inside a composite); move it "
                                    f"there: the ops after it run on its canvas"))
        errors += _partner_ops_lead(doc, node.children, loc + (i, node.name, "ops"))
    return errors


def parse_doc(doc: YamlDoc) -> PipelineSpec:
    if not isinstance(doc.data, dict):
        raise doc.error((), f"a pipeline must be a YAML mapping with at least 'name' and 'ops'; "
                            f"got {type(doc.data).__name__}")
    errors = []
    try:
        head = validate(_Header, doc, doc.data)
    except SpecError as exc:
        errors, head = [exc], None
    labels = None
    if head is not None and head.labels is not None:
        try:
            labels = check_names(head.labels, f"{doc.source}: labels")
        except LabelMapError as exc:
            errors.append(doc.error(("labels",), str(exc).split(": labels: ", 1)[-1]))
    split = None
    if head is not None and head.split is not None:
        shares = list(head.split.values())
        if not shares or not all(math.isfinite(v) and v > 0 for v in shares) or abs(sum(shares) - 1) > 1e-6:
            errors.append(doc.error(("split",), f"shares must be > 0 and add up to 1; got {head.split}"))
        split = tuple((k, head.split[k]) for k in ("train", "validation", "test") if k in head.split)
    if head is not None and head.variants == 0 and not head.keep_original:
        errors.append(doc.error(("variants",), "the pipeline would write nothing: set variants >= 1 or "
                                               "keep_original: true; got variants: 0 with keep_original: false"))
    if head is not None and head.balance is not None and head.balance.max_variants < head.variants:
        errors.append(doc.error(("balance", "max_variants"), f"max_variants must be at least variants "
                                                             f"({head.variants}); got {head.balance.max_variants}"))
    raws = head.ops if head else doc.data.get("ops")
    ops = ()
    if isinstance(raws, list):
        try:
            ops = _parse_ops(doc, raws, ("ops",))
        except SpecError as exc:
            errors.append(exc)
        errors += _partner_ops_lead(doc, ops)
        if head is not None and head.tile is not None and ops and ops[0].kind is Kind.MIX and \
                ops[0].name != "copy_paste":
            errors.append(doc.error(("ops", 0, ops[0].name), f"{ops[0].name} and tile cannot be combined: tile "
                                    f"slices each image before the chain, and {ops[0].name} would lay a tile among "
                                    f"whole images; copy_paste is the partner op that works on tiles (it pastes "
                                    f"partners' objects onto each tile)"))
    if errors:
        raise combine(errors)
    return PipelineSpec(name=head.name, description=head.description, seed=head.seed,
                        variants=head.variants, keep_original=head.keep_original,
                        output=head.output, ops=ops, source=doc.source, colour=head.colour, labels=labels,
                        split=split, augment_splits=tuple(head.augment_splits) if head.augment_splits is not None
                        else None,
                        annotations=Annotations.from_config(head.annotations) if head.annotations is not None
                        else None, balance=head.balance.max_variants if head.balance is not None else None,
                        tile=head.tile)



"""JSON Schema of the pipeline format, generated from the same params models that validate it; and the pipeline's
keys beside `ops:` (`augd ops` lists them, from the same model)."""
from __future__ import annotations

import typing

from pydantic import BaseModel

from augd.ops import REGISTRY, Kind
from augd.schema.model import _Header, OutputSpec

__all__ = ["pipeline_keys", "pipeline_schema"]


def pipeline_keys() -> list[tuple[str, tuple[str, ...], str]]:
    """(key, its own keys where it is a mapping, description) of every top-level key of a pipeline but `ops`, in
    the model's order: tile, balance, split, ... are pipeline keys, not ops, and a user looks for them by name."""
    out = []
    for key, f in _Header.model_fields.items():
        if key == "ops":
            continue
        models = [t for t in (f.annotation, *typing.get_args(f.annotation))
                  if isinstance(t, type) and issubclass(t, BaseModel)]
        out.append((key, tuple(models[0].model_fields) if models else (), f.description or ""))
    return out


def pipeline_schema() -> dict:
    defs: dict = {}
    op_refs = []
    for name in sorted(REGISTRY):
        cls = REGISTRY[name]
        params = cls.Params.model_json_schema(ref_template="#/$defs/{model}")
        defs.update(params.pop("$defs", {}))
        if cls.kind is Kind.COMPOSITE and not hasattr(cls, "expand"):   # a policy writes its own children
            params.setdefault("properties", {})["ops"] = {"type": "array", "items": {"$ref": "#/$defs/op"}}
            params["required"] = ["ops"]
            body = {"anyOf": [params, {"type": "array", "items": {"$ref": "#/$defs/op"}}]}
        else:
            body = {"anyOf": [params, {"type": "null"}]}  # `- random_grayscale:` with no params
        params["title"] = name
        params["description"] = cls.summary()
        defs[f"op_{name}"] = {"type": "object", "properties": {name: body}, "required": [name],
                              "additionalProperties": False, "description": cls.summary()}
        op_refs.append({"$ref": f"#/$defs/op_{name}"})
    defs["op"] = {"oneOf": op_refs}
    head = _Header.model_json_schema(ref_template="#/$defs/{model}")
    defs.update(head.pop("$defs", {}))
    defs.setdefault("OutputSpec", OutputSpec.model_json_schema())
    head["properties"]["ops"] = {"type": "array", "items": {"$ref": "#/$defs/op"},
                                 "description": "the augmentation chain, applied in order"}
    head.update({"$schema": "https://json-schema.org/draft/2020-12/schema", "title": "augd pipeline",
                 "$defs": defs})
    return head

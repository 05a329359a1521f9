"""`augd import-config`: a TF Object Detection API `pipeline.config` -> the augd pipeline that augments the same.

Each `data_augmentation_options` block of `train_config` holds one of the 39 preprocessing steps of the API's
`preprocessor.proto`; OPTIONS says, for each, what augd does with it, read against the API's `core/preprocessor.py`:
- exact: augd's ops draw the same distribution of images (and of boxes, masks and keypoints, where the API keeps
  them right); an exact option's note says how, never what differs;
- approximate: augd's nearest form, with what differs said in one line (`--approximate` accepts them): where the
  pixels or the boxes come out otherwise than the API's (another resampling, a box augd shrinks), however little;
- missing: augd has no form of it: left out of the pipeline and left in the config (training still does it);
- training: not an augmentation (normalisation, label remapping, ...): it stays in the config.
`strip()` writes the config without the blocks the pipeline now does, so training does not augment twice.
TensorFlow-free.
"""
from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Callable

from augd import defaults
from augd.ops import REGISTRY, SeededOp
from augd.ops.pads import MAX_PADDING
from augd.parsing.pbtxt import Field, PbtxtError, first, parse, scalars
from augd.schema.odapi_values import BadValue, line_of, p as _p, repeated as _list, validate_ops

__all__ = ["Conversion", "Imported", "OPTIONS", "convert", "import_config", "strip", "table"]

EXACT, APPROXIMATE, MISSING, TRAINING = "exact", "approximate", "missing", "training"


@dataclass
class Conversion:
    """What one option becomes: its ops, annotation settings, a verdict and what differs."""
    verdict: str
    ops: list = field(default_factory=list)
    annotations: dict = field(default_factory=dict)
    note: str = ""
    #: its pad is sized by the image before its crop, which augd reads as the image the chain started from
    sized_by_source: bool = False


@dataclass
class Imported:
    """A whole config's import: the pipeline document, each block's conversion, and the blocks augd now does."""
    doc: dict
    steps: list[tuple[str, int, Conversion]]   # (option, line, conversion), in the config's order
    taken: list[Field]                         # data_augmentation_options blocks the pipeline does
    notes: list[str] = field(default_factory=list)   # what the whole pipeline does otherwise than the API

    def problems(self) -> list[str]:
        return [f"line {line}: {name}: {c.verdict}: {c.note}" for name, line, c in self.steps
                if c.verdict in (APPROXIMATE, MISSING)]


# ---- one converter per option: (its scalar fields, its sub-messages) -> Conversion ------------------------------

def _flip(op: str, vertical: bool):
    def convert(v, _msgs) -> Conversion:
        prob = float(_p(v, "probability", 0.5))
        perm = _list(v, "keypoint_flip_permutation", 0)
        flip = {op: {"probability": prob} if prob != 0.5 else {}}
        if vertical and perm:
            return Conversion(APPROXIMATE, [flip], {}, "its keypoint_flip_permutation: augd swaps keypoints on a "
                              "mirror by annotations.keypoint_flip (the horizontal one)")
        return Conversion(EXACT, [flip], {} if vertical or not perm else {"keypoint_flip": perm})
    return convert


def _colour(op: str, keys: dict, defaults: dict):
    def convert(v, _msgs) -> Conversion:
        params = {ours: float(_p(v, theirs, defaults[theirs])) for theirs, ours in keys.items()}
        if "lower" in params:
            params = {"lower": params["lower"], "upper": params["upper"]}
        return Conversion(EXACT, [{op: params}])
    return convert


def _distort(v, _msgs) -> Conversion:
    # core/preprocessor.py random_distort_color: ordering 0 brightness, saturation, hue, contrast; 1 brightness,
    # contrast, saturation, hue; brightness 32/255, saturation and contrast [0.5, 1.5], hue 0.2.
    b, s = {"random_brightness": {"max_delta": 32 / 255}}, {"random_saturation": {"lower": 0.5, "upper": 1.5}}
    h, c = {"random_hue": {"max_delta": 0.2}}, {"random_contrast": {"lower": 0.5, "upper": 1.5}}
    order = int(_p(v, "color_ordering", 0))
    if order not in (0, 1):
        return Conversion(MISSING, note=f"color_ordering {order}: the API knows 0 and 1 only")
    return Conversion(EXACT, [b, s, h, c] if order == 0 else [b, c, s, h])


def _gray(default: float | None):
    def convert(v, _msgs) -> Conversion:
        return Conversion(EXACT, [{"random_grayscale": {"p": float(_p(v, "probability", default))
                                                        if default is not None else 1.0}}])
    return convert


def _gamma(v, _msgs) -> Conversion:
    gamma, gain = float(_p(v, "gamma", 1.0)), float(_p(v, "gain", 1.0))
    ops = [{"random_gamma": {"gamma": [gamma, gamma]}}]
    return Conversion(EXACT, ops) if gain == 1.0 else Conversion(APPROXIMATE, ops, note=f"gain {gain}: augd's "
                                                                                       f"gamma has none (1)")


def _jpeg(v, _msgs) -> Conversion:
    # the API draws tf.random_uniform([], min, max, tf.int32): max itself never; augd's range holds both ends
    lo, hi = int(_p(v, "min_jpeg_quality", 0)), int(_p(v, "max_jpeg_quality", 100))
    coef = float(_p(v, "random_coef", 0.0))
    top = max(lo, hi - 1)
    op = {"random_jpeg_quality": {"quality": [max(1, lo), max(1, top)], "p": round(1.0 - coef, 6)}}
    return Conversion(EXACT if lo >= 1 else APPROXIMATE, [op], note="" if lo >= 1 else "quality 0 is 1 in augd")


def _black_patches(v, _msgs) -> Conversion:
    return Conversion(APPROXIMATE, [{"random_black_patches": {
        "max_black_patches": int(_p(v, "max_black_patches", 10)), "probability": float(_p(v, "probability", 0.5)),
        "size_to_image_ratio": float(_p(v, "size_to_image_ratio", 0.1))}}],
        note="the same pixels; boxes, masks and keypoints also lose what a patch hides (the API keeps them)")


#: the API clips each crop's boxes to its window and keeps those with at least overlap_thresh of themselves in it
#: (remnants of any size): the job's own thresholds step aside for the crops'
_CROP_JOB = {"min_visibility": 0.0, "min_size": 0.0}


def _crop(covered, area, aspect, coef, thresh) -> dict:
    """augd's form of the API's crop: TensorFlow's window sampler, the window kept at its own size, the boxes
    it leaves under its overlap_thresh dropped."""
    return {"random_crop": {"area": [max(area[0], 0.001), area[1]], "aspect": list(aspect),
                            "min_object_covered": covered, "sampler": "tf", "min_visibility": thresh,
                            "p": round(1.0 - coef, 6)}}


def _on(value) -> bool:
    """A proto bool as text format writes it (false, False, f, 0: off)."""
    return value not in (False, "False", "f")


def _clipped(c: Conversion, clip: list[bool]) -> Conversion:
    if not all(clip):
        c.verdict = APPROXIMATE
        c.note = "; ".join(n for n in ("clip_boxes false: the API leaves boxes past the window; augd clips them",
                                       c.note) if n)
    return c


def _crop_image(v, _msgs) -> Conversion:
    op = _crop(float(_p(v, "min_object_covered", 1.0)), (float(_p(v, "min_area", 0.1)), float(_p(v, "max_area", 1.0))),
               (float(_p(v, "min_aspect_ratio", 0.75)), float(_p(v, "max_aspect_ratio", 1.33))),
               float(_p(v, "random_coef", 0.0)), float(_p(v, "overlap_thresh", 0.3)))
    return _clipped(Conversion(EXACT, [op], dict(_CROP_JOB)), [_on(_p(v, "clip_boxes", True))])


# The API's defaults of ssd_random_crop when it lists no operations (core/preprocessor.py ssd_random_crop).
_SSD_COVERED = (0.0, 0.1, 0.3, 0.5, 0.7, 0.9, 1.0)


def _ssd_crop(_v, msgs) -> Conversion:
    ops_ = [scalars(m) for m in msgs if m.name == "operations"]
    if not ops_:
        ops_ = [{"min_object_covered": c, "min_aspect_ratio": 0.5, "max_aspect_ratio": 2.0, "min_area": 0.1,
                 "max_area": 1.0, "overlap_thresh": c, "random_coef": 0.15} for c in _SSD_COVERED]
    crops = [_crop(float(_p(o, "min_object_covered", 0.0)), (float(_p(o, "min_area", 0.1)),
                   float(_p(o, "max_area", 1.0))), (float(_p(o, "min_aspect_ratio", 0.5)),
                   float(_p(o, "max_aspect_ratio", 2.0))), float(_p(o, "random_coef", 0.0)),
                   float(_p(o, "overlap_thresh", 0.0))) for o in ops_]
    return _clipped(Conversion(EXACT, [{"one_of": {"ops": crops}}], dict(_CROP_JOB), "one of the crops, each with "
                               "its own overlap_thresh"), [_on(_p(o, "clip_boxes", True)) for o in ops_])


def _fill(colour: list) -> tuple[object, str]:
    """The API's pad_color (empty: the image's mean) as augd's fill, and what differs ('' when nothing)."""
    if not colour:
        return "mean", ""
    grey = round(float(colour[0]))
    if len(colour) == 3 and all(float(c) == grey for c in colour) and 0 <= grey <= 255:
        return grey, ""
    return max(0, min(255, grey)), f"pad_color {list(colour)}: augd's fill is a grey (or the mean); {grey} used"


def _padded(c: Conversion, why: str) -> Conversion:
    if why:
        c.verdict, c.note = APPROXIMATE, "; ".join(n for n in (c.note, why) if n)
    return c


def _pad(v, _msgs) -> Conversion:
    fill, why = _fill(_list(v, "pad_color"))
    params: dict = {"fill": fill}
    for ours, theirs in (("min_size", "min_image"), ("max_size", "max_image")):
        if f"{theirs}_height" in v or f"{theirs}_width" in v:
            params[ours] = [int(_p(v, f"{theirs}_height", 1)), int(_p(v, f"{theirs}_width", 1))]
    return _padded(Conversion(EXACT, [{"random_pad_image": params}]), why)


def _absolute_pad(v, _msgs) -> Conversion:
    fill, why = _fill(_list(v, "pad_color"))
    mh, mw = int(_p(v, "max_height_padding", 1)), int(_p(v, "max_width_padding", 1))
    if max(mh, mw) > MAX_PADDING:
        why = "; ".join(n for n in (why, f"paddings over {MAX_PADDING} px: augd's stop there") if n)
        mh, mw = min(mh, MAX_PADDING), min(mw, MAX_PADDING)
    return _padded(Conversion(EXACT, [{"random_absolute_pad_image": {
        "max_height_padding": mh, "max_width_padding": mw, "fill": fill}}]), why)


def _crop_pad(o: dict, colour: list, default_covered: float, default_aspect, default_thresh: float):
    """One crop-then-pad of the API (random_crop_pad_image): (its two ops, what differs)."""
    fill, why = _fill(colour)
    crop = _crop(float(_p(o, "min_object_covered", default_covered)),
                 (float(_p(o, "min_area", 0.1)), float(_p(o, "max_area", 1.0))),
                 (float(_p(o, "min_aspect_ratio", default_aspect[0])), float(_p(o, "max_aspect_ratio",
                                                                                  default_aspect[1]))),
                 float(_p(o, "random_coef", 0.0)), float(_p(o, "overlap_thresh", default_thresh)))
    lo, hi = _list(o, "min_padded_size_ratio") or [1.0, 1.0], _list(o, "max_padded_size_ratio") or [2.0, 2.0]
    pad = {"random_pad_image": {"min_ratio": [float(x) for x in lo[:2]], "max_ratio": [float(x) for x in hi[:2]],
                                "fill": fill}}
    return [crop, pad], why


def _crop_pad_image(v, _msgs) -> Conversion:
    ops, why = _crop_pad(v, _list(v, "pad_color"), 1.0, (0.75, 1.33), 0.3)
    c = Conversion(EXACT, ops, dict(_CROP_JOB), sized_by_source=True)
    return _padded(_clipped(c, [_on(_p(v, "clip_boxes", True))]), why)


# ssd_random_crop_pad's defaults when it lists no operations (core/preprocessor.py): the mean colour
_SSD_PAD_COVERED = (0.1, 0.3, 0.5, 0.7, 0.9, 1.0)


def _ssd_crop_pad(_v, msgs) -> Conversion:
    given = [scalars(m) for m in msgs if m.name == "operations"]
    ops_ = given or [{"min_object_covered": c, "overlap_thresh": c, "random_coef": 0.15} for c in _SSD_PAD_COVERED]
    pairs = [_crop_pad(o, [_p(o, f"pad_color_{k}", 0.0) for k in "rgb"] if given else [], 0.0, (0.5, 2.0), 0.0)
             for o in ops_]
    c = Conversion(EXACT, [{"one_of": {"ops": [{"sequence": {"ops": p}} for p, _ in pairs]}}], dict(_CROP_JOB),
                   "one of the crops, each with its own overlap_thresh, then its pad", sized_by_source=True)
    return _padded(_clipped(c, [_on(_p(o, "clip_boxes", True)) for o in ops_]), next((w for _, w in pairs if w), ""))


def _ssd_crop_fixed(v, msgs) -> Conversion:
    aspect = float(_p(v, "aspect_ratio", 1.0))
    given = [scalars(m) for m in msgs if m.name == "operations"]
    ops_ = given or [{"min_object_covered": t, "overlap_thresh": t, "random_coef": 0.15} for t in _SSD_COVERED]
    crops = [_crop(float(_p(o, "min_object_covered", 0.0)), (float(_p(o, "min_area", 0.1)),
                   float(_p(o, "max_area", 1.0))), (aspect, aspect), float(_p(o, "random_coef", 0.0)),
                   float(_p(o, "overlap_thresh", 0.0))) for o in ops_]
    # then the API's random_crop_to_aspect_ratio: the window already has the aspect, up to the pixel its rounding
    # left, which this trims
    c = Conversion(APPROXIMATE, [{"one_of": {"ops": crops}}, {"random_crop_to_aspect_ratio": {
        "aspect_ratio": aspect}}], dict(_CROP_JOB), "one of the crops of the aspect, each with its own "
        "overlap_thresh, then the pixel the window's rounding left off the aspect trimmed; the API also drops the "
        "boxes that pixel leaves under 0.3 of themselves, augd keeps them")
    return _clipped(c, [_on(_p(o, "clip_boxes", True)) for o in ops_])


def _resize_method(v, _msgs) -> Conversion:
    h, w = int(_p(v, "target_height", 0)), int(_p(v, "target_width", 0))
    if not h or not w:
        return Conversion(MISSING, note="no target_height and target_width")
    return Conversion(APPROXIMATE, [{"resize": {"size": [h, w]}}], note="the API draws one of four resize methods "
                      "per image; augd's resize is area-prefiltered bilinear")


def _rotation90(v, _msgs) -> Conversion:
    prob = float(_p(v, "probability", 0.5))
    perm = _list(v, "keypoint_rot_permutation", 0)
    return Conversion(EXACT, [{"random_rotation90": {"p": prob}}], {"keypoint_rotation": perm} if perm else {})


def _same(op: str, defaults: dict, note: str = "", verdict: str = EXACT):
    """An option augd has under its own name, with the same parameters and defaults (and what differs, if any)."""
    return lambda v, _m: Conversion(verdict, [{op: {k: float(_p(v, k, d)) for k, d in defaults.items()}}],
                                        note=note)


def _crop_to_aspect(v, _msgs) -> Conversion:
    op = {"random_crop_to_aspect_ratio": {"aspect_ratio": float(_p(v, "aspect_ratio", 1.0)),
                                          "min_visibility": float(_p(v, "overlap_thresh", 0.3))}}
    return _clipped(Conversion(EXACT, [op], dict(_CROP_JOB)), [_on(_p(v, "clip_boxes", True))])


def _jitter(op: str, defaults: dict, note: str):
    """The detectors' scale jitter: the same draws, sizes, places and boxes; the pixels differ as `note` says. The
    API clips boxes to the new canvas and drops only those wholly outside it (no overlap threshold, no least size),
    which the job's annotations then say."""
    def convert(v, _msgs) -> Conversion:
        params = {k: type(d)(_p(v, k, d)) for k, d in defaults.items()}
        return Conversion(APPROXIMATE, [{op: params}], {"min_visibility": 0.0, "min_size": 0.0},
                          f"{note}; boxes clipped, dropped only when wholly outside (min_visibility 0, min_size 0)")
    return convert


def _autoaugment(v, _msgs) -> Conversion:
    policy = str(_p(v, "policy_name", "v0"))
    if policy not in ("v0", "v1", "v2", "v3"):
        return Conversion(MISSING, note=f"policy_name {policy!r}: augd has v0, v1, v2 and v3")
    return Conversion(APPROXIMATE, [{"autoaugment": {"policy": policy}}], note="the same sub-policies and levels; "
                      "shears turn about the centre, not the corner; posterize keeps the paper's 4-8 bits; contrast "
                      "is per channel; boxes lose what moves, holes and shifts hide (the API keeps them whole)")


def _missing(note: str):
    return lambda _v, _m: Conversion(MISSING, note=note)


def _training(note: str):
    return lambda _v, _m: Conversion(TRAINING, note=note)


Converter = Callable[[dict, list], Conversion]

#: Every option of the API's preprocessor.proto (PreprocessingStep's oneof), in its order.
OPTIONS: dict[str, Converter] = {
    "normalize_image": _training("normalisation of the model's input"),
    "random_horizontal_flip": _flip("random_flip_left_right", False),
    "random_pixel_value_scale": _same("random_pixel_value_scale", {"minval": 0.9, "maxval": 1.1}),
    "random_image_scale": _same("random_image_scale", {"min_scale_ratio": 0.5, "max_scale_ratio": 2.0},
                                "the same scales, sizes and boxes; augd resamples with half-pixel centres (area-"
                                "prefiltered where it shrinks), the API bilinearly with align_corners (its pixels up "
                                "to half a pixel apart)", APPROXIMATE),
    "random_rgb_to_gray": _gray(0.1),
    "random_adjust_brightness": _colour("random_brightness", {"max_delta": "max_delta"}, {"max_delta": 0.2}),
    "random_adjust_contrast": _colour("random_contrast", {"min_delta": "lower", "max_delta": "upper"},
                                      {"min_delta": 0.8, "max_delta": 1.25}),
    "random_adjust_hue": _colour("random_hue", {"max_delta": "max_delta"}, {"max_delta": 0.02}),
    "random_adjust_saturation": _colour("random_saturation", {"min_delta": "lower", "max_delta": "upper"},
                                        {"min_delta": 0.8, "max_delta": 1.25}),
    "random_distort_color": _distort,
    "random_jitter_boxes": _missing("moves each box's corners, not the pixels (augd keeps boxes on their pixels)"),
    "random_crop_image": _crop_image,
    "random_pad_image": _pad,
    "random_crop_pad_image": _crop_pad_image,
    "random_crop_to_aspect_ratio": _crop_to_aspect,
    "random_black_patches": _black_patches,
    "random_resize_method": _resize_method,
    "scale_boxes_to_pixel_coordinates": _training("a box format conversion"),
    "resize_image": _training("the model's input size (its image_resizer does it again)"),
    "subtract_channel_mean": _training("normalisation of the model's input"),
    "ssd_random_crop": _ssd_crop,
    "ssd_random_crop_pad": _ssd_crop_pad,
    "ssd_random_crop_fixed_aspect_ratio": _ssd_crop_fixed,
    "ssd_random_crop_pad_fixed_aspect_ratio": _missing("SSD's crops padded to one fixed aspect (the API's "
                                                       "random_pad_to_aspect_ratio, which augd lacks)"),
    "random_vertical_flip": _flip("random_flip_up_down", True),
    "random_rotation90": _rotation90,
    "rgb_to_gray": _gray(None),
    "convert_class_logits_to_softmax": _training("a label transform"),
    "random_absolute_pad_image": _absolute_pad,
    "random_self_concat_image": _missing("joins the image with itself"),
    "autoaugment_image": _autoaugment,
    "drop_label_probabilistically": _training("a label transform"),
    "remap_labels": _training("a label transform"),
    "random_jpeg_quality": _jpeg,
    "random_downscale_to_target_pixels": _missing("downscales to a random number of pixels"),
    "random_patch_gaussian": _missing("Gaussian noise in a random patch"),
    "random_square_crop_by_scale": _jitter("random_square_crop_by_scale", {
        "scale_min": 0.6, "scale_max": 1.3, "num_scales": 8, "max_border": 128}, "the same crops and boxes; the API "
        "also leaves the image's last row and column out of the crop (black), augd keeps them"),
    "random_scale_crop_and_pad_to_square": _jitter("random_scale_crop_and_pad_to_square", {
        "output_size": 512, "scale_min": 0.1, "scale_max": 2.0}, "the same sizes, places and boxes; augd resamples "
        "with half-pixel centres (area-prefiltered where it shrinks), the API bilinearly"),
    "adjust_gamma": _gamma,
}


def convert(block: Field, source: str = "<config>") -> tuple[str, Conversion]:
    """One data_augmentation_options block: (its option's name, what it becomes). PbtxtError naming `source`, the
    line and the field when a value is no value its option takes, or makes ops augd refuses."""
    if not block.is_message or len(block.value) != 1 or not block.value[0].is_message:
        held = [f.name for f in block.value] if block.is_message else [repr(block.value)]
        raise PbtxtError(f"{source}:{block.line}: data_augmentation_options must hold one preprocessing step (a "
                         f"message such as random_horizontal_flip {{ }}); got {len(held)}: {', '.join(held) or 'none'}")
    step = block.value[0]
    if step.name not in OPTIONS:
        return step.name, Conversion(MISSING, note="not an option of the API's preprocessor.proto that augd knows")
    msgs = [f for f in step.value if f.is_message]
    try:
        c = OPTIONS[step.name](scalars(step), msgs)
    except BadValue as exc:
        raise PbtxtError(f"{source}:{line_of(step, exc.key, exc.value)}: {step.name}.{exc}") from None
    validate_ops(step, c.ops, c.annotations, source)
    return step.name, c




def import_config(text: str, source: str, name: str | None = None, variants: int = 8) -> Imported:
    """The augd pipeline document for a pipeline.config's train_config augmentations."""
    fields = parse(text, source)
    train = first(fields, "train_config")
    if train is None or not train.is_message:
        raise PbtxtError(f"{source}: no train_config block (is this an Object Detection API pipeline.config?)")
    steps, ops, annotations, taken, resized = [], [], {}, [], False
    for block in (f for f in train.value if f.name == "data_augmentation_options"):
        option, c = convert(block, source)
        steps.append((option, block.line, c))
        if c.sized_by_source and resized and c.verdict == EXACT:
            c.verdict, c.note = APPROXIMATE, ("its pads are sized by the image before its crop; augd's by the image "
                                              "the chain started from, which an earlier option resized")
        if c.verdict in (EXACT, APPROXIMATE):
            resized = resized or _resizes(c.ops)
            ops += c.ops
            taken.append(block)
            for k, v in c.annotations.items():
                annotations[k] = min(annotations[k], v) if k in ("min_visibility", "min_size") and k in annotations \
                    else v
    stem = os.path.splitext(os.path.basename(source))[0]
    doc = {"name": name or f"odapi-{stem}", "description": f"imported from {os.path.basename(source)} by augd "
           f"import-config", "seed": 1, "variants": variants, "keep_original": False,
           # written out: the API augments its train input only; the eval input is read as it is
           "augment_splits": list(defaults.AUGMENT_SPLITS), "output": {"format": "jpeg", "quality": 95}, "ops": ops}
    notes = []
    if _under_rule(ops, annotations):
        annotations["low_visibility"] = "ignore"
        notes.append(LOW_VISIBILITY_NOTE)
    if annotations:
        doc["annotations"] = annotations
    return Imported(doc, steps, taken, notes)


#: Said (and written above the pipeline) when an imported option can leave an object under the occlusion rule.
LOW_VISIBILITY_NOTE = (
    "annotations.low_visibility: ignore (augd's default): an object a crop leaves under its overlap_thresh, or a "
    "patch hides under min_visibility, is written with weight 0 and is_crowd 1 (the API's target assigner then "
    "learns it neither as an object nor as background); the API drops it, leaving its pixels as background. "
    "low_visibility: drop does exactly what the API does")


def _under_rule(ops: list, annotations: dict) -> bool:
    """Whether the ops (composites walked) may leave an object under the occlusion rule: an op with a threshold of
    its own (a crop's overlap_thresh), or one that hides pixels while the job's min_visibility is above 0."""
    for op in ops:
        (name, params), = op.items()
        params = params or {}
        if (params.get("min_visibility") or 0) > 0 or _under_rule(params.get("ops", []), annotations):
            return True
        cls = REGISTRY.get(name)
        if cls is not None and issubclass(cls, SeededOp) and (cls.covers or cls.uses_boxes) \
                and annotations.get("min_visibility", 1.0) > 0:
            return True
    return False


#: what the converters write that changes the image's size
_RESIZING = {"random_crop", "random_crop_to_aspect_ratio", "random_image_scale", "random_scale_crop_and_pad_to_square",
             "random_square_crop_by_scale", "random_rotation90", "random_pad_image", "random_absolute_pad_image",
             "resize"}


def _resizes(ops: list) -> bool:
    """Whether any op of `ops` (composites walked) may change the image's size."""
    for op in ops:
        (name, params), = op.items()
        if name in _RESIZING or _resizes((params or {}).get("ops", [])):
            return True
    return False


def strip(text: str, blocks: list[Field]) -> str:
    """The config without `blocks` (with the blank space each leaves on its lines), the rest as it was."""
    out, pos = [], 0
    for b in sorted(blocks, key=lambda f: f.start):
        start = text.rfind("\n", 0, b.start) + 1
        if text[start:b.start].strip():
            start = b.start                      # something else before it on its line: cut the block only
        end = b.end
        nl = text.find("\n", end)
        if nl != -1 and not text[end:nl].strip():
            end = nl + 1
        out.append(text[pos:start])
        pos = end
    out.append(text[pos:])
    return "".join(out)


def table() -> list[tuple[str, str, str]]:
    """(option, verdict, what differs) for every option of preprocessor.proto at its defaults."""
    return [(name, c.verdict, c.note) for name, conv in OPTIONS.items() for c in [conv({}, [])]]


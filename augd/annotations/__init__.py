"""Detection and segmentation annotations: the formats (VOC, COCO, YOLO, mask PNGs, and the annotation tools'
exports: DOTA, YOLO-OBB, LabelMe, CVAT, Label Studio; one module each, registered in layout.py), label maps, and
the target kinds (targets.py) that move boxes, polygons and masks with the pixels (geometry.py). TensorFlow-free.

The model loads eagerly; the readers load on first use (they pull in the YAML and XML parsers), so that importing
the model from anywhere cannot start an import cycle.
"""
from __future__ import annotations

import importlib

from augd.annotations.model import Annotation, AnnotationError, KeypointSchema, Object, Polygon

_LAZY = {
    "LabelMap": "labelmap", "LabelMapError": "labelmap",
    "FORMATS": "layout", "REGISTRY": "layout", "AnnotatedJob": "layout", "detect_format": "layout",
    "read_job": "layout",
    "mask_png": "masks", "read_mask": "masks", "rle_decode": "rle",
}

__all__ = ["Annotation", "AnnotationError", "KeypointSchema", "Object", "Polygon", *_LAZY]


def __getattr__(name: str):
    if name in _LAZY:
        value = getattr(importlib.import_module(f"augd.annotations.{_LAZY[name]}"), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'augd.annotations' has no attribute {name!r}")

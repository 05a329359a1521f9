"""The op library. Importing it registers every op; TensorFlow loads only when a graph is traced."""
from augd.ops.base import (REGISTRY, ColourOp, CompositeOp, Domain, GeometryOp, Kind, Mix, Op, OpParams, PartnerOp,
                           Placement, SeededOp, register_op)
from augd.ops import (boxes, colour, compose, enhance, filters, geometry, jitter, mixing,  # noqa: F401 (registration)
                      pads, perspective, pixel, policies)

__all__ = ["REGISTRY", "ColourOp", "CompositeOp", "Domain", "GeometryOp", "Kind", "Mix", "Op", "OpParams", "PartnerOp",
           "Placement", "SeededOp",
           "describe_ops", "register_op"]


def describe_ops() -> list[dict]:
    """Name, kind, summary and JSON-schema parameters of every op (for `augd ops` and docs)."""
    out = []
    for name in sorted(REGISTRY):
        cls = REGISTRY[name]
        schema = cls.Params.model_json_schema()
        out.append({"name": name, "kind": cls.kind.value, "summary": cls.summary(),
                    "params": schema.get("properties", {}), "required": schema.get("required", []),
                    "example": cls.example})
    return out

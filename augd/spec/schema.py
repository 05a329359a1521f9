"""JSON Schema of the pipeline format, generated from the same params models that validate it."""
from __future__ import annotations

from augd.ops import REGISTRY, Kind
from augd.spec.model import _Header, OutputSpec

__all__ = ["pipeline_schema"]


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

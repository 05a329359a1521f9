"""A pipeline.config's values as `augd import-config` takes them (augd/schema/odapi.py's converters): each field
typed as the API's proto types it (a finite number, an int32 where an integer goes; never NaN, infinity or a
quoted number) and the ops each block becomes validated on their own, so that a bad value is an error naming the
config's line and field, never a traceback and never the output's line. TensorFlow-free."""
from __future__ import annotations

import math

import yaml

from augd.errors import SpecError
from augd.parsing.pbtxt import Field, PbtxtError
from augd.parsing.yamlsrc import load_yaml
from augd.schema.model import parse_doc

__all__ = ["BadValue", "line_of", "p", "repeated", "validate_ops"]

_INT32 = 2**31 - 1


class BadValue(ValueError):
    """A field holds what its option cannot take (the converter's caller names the file and line)."""

    def __init__(self, key: str, value, expected: str):
        super().__init__(f"{key}: {value!r} is not {expected}")
        self.key, self.value = key, value


def typed(key: str, value, like):
    """`value` as the type of its default `like` (text format's float and int32 fields: a finite number, an int32
    for an integer field), else BadValue; strings, enums and bools pass as they are."""
    if isinstance(like, bool) or not isinstance(like, (int, float)):
        return value
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        word = str(value).lower().lstrip("+-")
        raise BadValue(key, value, "finite (NaN and infinity are refused)" if word in ("nan", "inf", "infinity")
                       else "a number (unquoted)" if isinstance(like, float) else "an integer (unquoted)")
    if isinstance(value, float) and not math.isfinite(value):   # 1e999 reads as infinity
        raise BadValue(key, value, "finite (NaN and infinity are refused)")
    if isinstance(like, int) and not isinstance(value, int):
        raise BadValue(key, value, "an integer")
    if abs(value) > _INT32:
        raise BadValue(key, value, f"within +-{_INT32} (int32)")
    return value


def p(values: dict, key: str, default):
    """The field `key` of a message's scalars (its last value if repeated), typed as `default` is."""
    v = values.get(key, default)
    return typed(key, v[-1] if isinstance(v, list) else v, default)


def repeated(values: dict, key: str, like=0.0) -> list:
    """The repeated field `key`, each value typed as `like` is."""
    v = values.get(key, [])
    return [typed(key, x, like) for x in (v if isinstance(v, list) else [v])]


def _walk(message: Field):
    for f in message.value:
        yield f
        if f.is_message:
            yield from _walk(f)


def line_of(message: Field, key: str, value) -> int:
    """The line of the first field `key` holding `value` in `message` (sub-messages searched), else its own."""
    return next((f.line for f in _walk(message) if not f.is_message and f.name == key and f.value == value),
                message.line)


def validate_ops(step: Field, ops: list, annotations: dict, source: str) -> None:
    """The ops (and annotation settings) one block becomes, validated as a pipeline of their own: a value the
    API's proto takes and augd's op refuses (a probability of -0.5, an area past 1) is the input's error, named by
    the block's line (PbtxtError), not an error of the pipeline written."""
    if not ops and not annotations:
        return
    doc = {"name": "block", "ops": ops, **({"annotations": annotations} if annotations else {})}
    try:
        parse_doc(load_yaml(yaml.safe_dump(doc, sort_keys=False), "block"))
    except SpecError as exc:
        why = str(exc).split(": ", 1)[-1] if str(exc).startswith("block:") else str(exc)
        raise PbtxtError(f"{source}:{step.line}: {step.name}: its values make an op augd refuses: {why}") from None

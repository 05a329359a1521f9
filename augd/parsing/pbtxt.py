"""Protobuf text format (the TF Object Detection API's `pipeline.config`), read by its shape without a .proto: each
field with its value (a scalar, or a message's fields) and where it lies in the text, so that a caller can cut
fields out and leave the rest of the file byte for byte. TensorFlow-free.

    fields = parse(text, "pipeline.config")
    train = first(fields, "train_config")            # a Field whose value is a list of Fields
    [f.value for f in train.value if f.name == "batch_size"]
"""
from __future__ import annotations

import re
from dataclasses import dataclass

__all__ = ["Field", "PbtxtError", "first", "parse", "scalars"]


class PbtxtError(ValueError):
    """The text is not protobuf text format; the message names the file, line and what was expected."""


@dataclass(frozen=True)
class Field:
    name: str
    value: object          # str, int, float, bool, an enum's name (str), or list[Field] for a message
    start: int             # offset of the field's name in the text
    end: int               # offset just past its value (past a message's closing bracket)
    line: int

    @property
    def is_message(self) -> bool:
        return isinstance(self.value, list)


_TOKEN = re.compile(r"""
    (?P<space>[ \t\r\n]+|\#[^\n]*)
  | (?P<string>"(?:[^"\\\n]|\\.)*"|'(?:[^'\\\n]|\\.)*')
  | (?P<number>[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?[fF]?(?![\w.]))
  | (?P<name>[-]?[A-Za-z_][\w.]*|\[[\w./]+\])
  | (?P<punct>[:{}<>\[\],;])
""", re.VERBOSE)
_ESCAPES = {"n": "\n", "t": "\t", "r": "\r", "'": "'", '"': '"', "\\": "\\"}


def _tokens(text: str, source: str) -> list[tuple[str, str, int]]:
    out, pos, n = [], 0, len(text)
    while pos < n:
        m = _TOKEN.match(text, pos)
        if m is None:
            line = text.count("\n", 0, pos) + 1
            raise PbtxtError(f"{source}:{line}: unexpected {text[pos:pos + 20]!r} (not protobuf text format)")
        if m.lastgroup != "space":
            out.append((m.lastgroup, m.group(), pos))
        pos = m.end()
    return out


def _scalar(kind: str, tok: str):
    if kind == "string":
        return re.sub(r"\\(.)", lambda m: _ESCAPES.get(m.group(1), m.group(1)), tok[1:-1])
    if kind == "number":
        body = tok.rstrip("fF")
        return float(body) if any(c in body for c in ".eE") else int(body)
    return {"true": True, "True": True, "false": False, "False": False}.get(tok, tok)


def parse(text: str, source: str = "<config>") -> list[Field]:
    """The top-level fields of a text-format message. PbtxtError on anything else."""
    toks = _tokens(text, source)
    fields, _ = _fields(toks, 0, text, source, None)
    return fields


def _line(text: str, pos: int) -> int:
    return text.count("\n", 0, pos) + 1


def _fields(toks, k: int, text: str, source: str, close: str | None, opened: int = 0) -> tuple[list[Field], int]:
    out: list[Field] = []
    while k < len(toks):
        kind, tok, pos = toks[k]
        if close is not None and tok == close:
            return out, k + 1
        if kind != "name":
            raise PbtxtError(f"{source}:{_line(text, pos)}: expected a field name, got {tok!r}")
        k += 1
        if k < len(toks) and toks[k][1] == ":":
            k += 1
        if k >= len(toks):
            raise PbtxtError(f"{source}:{_line(text, pos)}: field {tok} has no value")
        vkind, vtok, vpos = toks[k]
        if vtok in ("{", "<"):
            value, k = _fields(toks, k + 1, text, source, "}" if vtok == "{" else ">", pos)
            end = toks[k - 1][2] + 1
            out.append(Field(tok, value, pos, end, _line(text, pos)))
        elif vtok == "[":   # repeated scalars, short form: one Field each
            k += 1
            while k < len(toks) and toks[k][1] != "]":
                ikind, itok, ipos = toks[k]
                if ikind not in ("string", "number", "name"):
                    raise PbtxtError(f"{source}:{_line(text, ipos)}: expected a value in {tok}'s list, got {itok!r}")
                out.append(Field(tok, _scalar(ikind, itok), pos, ipos + len(itok), _line(text, pos)))
                k += 1
                if k < len(toks) and toks[k][1] == ",":
                    k += 1
            if k >= len(toks):
                raise PbtxtError(f"{source}:{_line(text, vpos)}: {tok}'s list is not closed with ]")
            k += 1
        elif vkind in ("string", "number", "name"):
            end = vpos + len(vtok)
            k += 1
            while vkind == "string" and k < len(toks) and toks[k][0] == "string":   # "a" "b": one string
                vtok = vtok[:-1] + toks[k][1][1:]
                end = toks[k][2] + len(toks[k][1])
                k += 1
            out.append(Field(tok, _scalar(vkind, vtok), pos, end, _line(text, pos)))
        else:
            raise PbtxtError(f"{source}:{_line(text, vpos)}: field {tok} has no value (got {vtok!r})")
        if k < len(toks) and toks[k][1] in (",", ";"):
            k += 1
    if close is not None:
        raise PbtxtError(f"{source}:{_line(text, opened)}: a message is not closed with {close} (the file ends first)")
    return out, k


def first(fields: list[Field], name: str) -> Field | None:
    return next((f for f in fields if f.name == name), None)


def scalars(message: Field) -> dict[str, object]:
    """A message's scalar fields by name (a repeated one as a list); its sub-messages left out."""
    out: dict[str, object] = {}
    for f in message.value:
        if f.is_message:
            continue
        if f.name in out:
            out[f.name] = (out[f.name] if isinstance(out[f.name], list) else [out[f.name]]) + [f.value]
        else:
            out[f.name] = f.value
    return out

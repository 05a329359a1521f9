"""Protobuf text format (the TF Object Detection API's `pipeline.config`), read by its shape without a .proto: each
field with its value (a scalar, or a message's fields) and where it lies in the text, so that a caller can cut
fields out and leave the rest of the file byte for byte. TensorFlow-free.

    fields = parse(text, "pipeline.config")
    train = first(fields, "train_config")            # a Field whose value is a list of Fields
    [f.value for f in train.value if f.name == "batch_size"]
"""
from __future__ import annotations

import bisect
import re
from dataclasses import dataclass

from augd import defaults

__all__ = ["Field", "PbtxtError", "first", "parse", "quoted_end", "scalars"]


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


# Strings are not here: quoted_end scans them (a regex of alternatives repeated per character keeps a backtracking
# frame per character: a 50 MB string took 8.5 GB). No pattern here backtracks more than once per character.
_TOKEN = re.compile(r"""
    (?P<space>[ \t\r\n]+|\#[^\n]*)
  | (?P<number>[-+]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][-+]?\d+)?[fF]?(?![\w.]))
  | (?P<name>[-]?[A-Za-z_][\w.]*|\[[\w./]+\])
  | (?P<punct>[:{}<>\[\],;])
""", re.VERBOSE)
_STOP = {q: re.compile(rf"[{q}\\\n]") for q in "\"'"}
_ESCAPES = {"n": "\n", "t": "\t", "r": "\r", "'": "'", '"': '"', "\\": "\\"}
#: A number token longer than this is no number a config holds (and int() refuses 4300 digits and more).
_MAX_NUMBER = 64


def quoted_end(text: str, pos: int) -> int | None:
    """Where the string quoted at text[pos] ends (just past its closing quote); None when a newline or the end
    comes first. Linear, one search per escape."""
    stop, i = _STOP[text[pos]], pos + 1
    while (m := stop.search(text, i)) is not None:
        c = text[m.start()]
        if c == "\n":
            return None
        if c != "\\":
            return m.start() + 1
        i = m.start() + 2
    return None


class _Lines:
    """Line numbers by offset: the line starts found once (counting from the text's start at each field made
    80,000 fields take 40 s)."""

    def __init__(self, text: str):
        self.starts = [m.end() for m in re.finditer("\n", text)]

    def __call__(self, pos: int) -> int:
        return bisect.bisect_right(self.starts, pos) + 1


def _tokens(text: str, source: str, line) -> list[tuple[str, str, int]]:
    out, pos, n = [], 0, len(text)
    while pos < n:
        if text[pos] in "\"'":
            end = quoted_end(text, pos)
            if end is None:
                raise PbtxtError(f"{source}:{line(pos)}: a string that is not closed on its line")
            out.append(("string", text[pos:end], pos))
            pos = end
            continue
        m = _TOKEN.match(text, pos)
        if m is None:
            raise PbtxtError(f"{source}:{line(pos)}: unexpected {text[pos:pos + 20]!r} (not protobuf text format)")
        if m.lastgroup == "number" and len(m.group()) > _MAX_NUMBER:
            raise PbtxtError(f"{source}:{line(pos)}: a number of {len(m.group())} characters ({m.group()[:20]}...): "
                             f"no field of a config holds one")
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
    """The top-level fields of a text-format message. PbtxtError on anything else, and on a text over
    PBTXT_MAX_BYTES or nesting deeper than PBTXT_MAX_DEPTH."""
    if len(text) > defaults.PBTXT_MAX_BYTES:
        raise PbtxtError(f"{source}: refused: {len(text)} characters exceed the {defaults.PBTXT_MAX_BYTES} limit "
                         f"for protobuf text files (PBTXT_MAX_BYTES)")
    line = _Lines(text)
    toks = _tokens(text, source, line)
    fields, _ = _fields(toks, 0, line, source, None)
    return fields


def _fields(toks, k: int, line, source: str, close: str | None, opened: int = 0, depth: int = 0) \
        -> tuple[list[Field], int]:
    if depth > defaults.PBTXT_MAX_DEPTH:
        raise PbtxtError(f"{source}:{line(opened)}: messages nest deeper than {defaults.PBTXT_MAX_DEPTH} levels "
                         f"(PBTXT_MAX_DEPTH)")
    out: list[Field] = []
    while k < len(toks):
        kind, tok, pos = toks[k]
        if close is not None and tok == close:
            return out, k + 1
        if kind != "name":
            raise PbtxtError(f"{source}:{line(pos)}: expected a field name, got {tok!r}")
        k += 1
        if k < len(toks) and toks[k][1] == ":":
            k += 1
        if k >= len(toks):
            raise PbtxtError(f"{source}:{line(pos)}: field {tok} has no value")
        vkind, vtok, vpos = toks[k]
        if vtok in ("{", "<"):
            value, k = _fields(toks, k + 1, line, source, "}" if vtok == "{" else ">", pos, depth + 1)
            end = toks[k - 1][2] + 1
            out.append(Field(tok, value, pos, end, line(pos)))
        elif vtok == "[":   # repeated scalars, short form: one Field each
            k += 1
            while k < len(toks) and toks[k][1] != "]":
                ikind, itok, ipos = toks[k]
                if ikind not in ("string", "number", "name"):
                    raise PbtxtError(f"{source}:{line(ipos)}: expected a value in {tok}'s list, got {itok!r}")
                out.append(Field(tok, _scalar(ikind, itok), pos, ipos + len(itok), line(pos)))
                k += 1
                if k < len(toks) and toks[k][1] == ",":
                    k += 1
            if k >= len(toks):
                raise PbtxtError(f"{source}:{line(vpos)}: {tok}'s list is not closed with ]")
            k += 1
        elif vkind in ("string", "number", "name"):
            end = vpos + len(vtok)
            k += 1
            parts = [vtok[1:-1]]
            while vkind == "string" and k < len(toks) and toks[k][0] == "string":   # "a" "b": one string
                parts.append(toks[k][1][1:-1])   # joined once: adding one at a time is quadratic
                end = toks[k][2] + len(toks[k][1])
                k += 1
            if len(parts) > 1:
                vtok = vtok[0] + "".join(parts) + vtok[0]
            out.append(Field(tok, _scalar(vkind, vtok), pos, end, line(pos)))
        else:
            raise PbtxtError(f"{source}:{line(vpos)}: field {tok} has no value (got {vtok!r})")
        if k < len(toks) and toks[k][1] in (",", ";"):
            k += 1
    if close is not None:
        raise PbtxtError(f"{source}:{line(opened)}: a message is not closed with {close} (the file ends first)")
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

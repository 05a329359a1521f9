"""Detection label maps: class name -> id (1-based; 0 is the background, as the TF Object Detection API expects),
read from and written as the API's `label_map.pbtxt`. TensorFlow-free (a small protobuf text-format reader)."""
from __future__ import annotations

import os
import re
from dataclasses import dataclass

from augd.annotations.model import AnnotationError
from augd.errors import UntrustedFileError
from augd.files import read_capped
from augd.labels import LABELS_MAX_BYTES, LabelMapError
from augd.parsing.pbtxt import quoted_end

__all__ = ["LabelMap", "LabelMapError", "MAX_ID"]

#: The largest id: the Object Detection API's StringIntLabelMapItem.id is an int32.
MAX_ID = 2**31 - 1


@dataclass(frozen=True)
class LabelMap:
    """Class name -> id, ids >= 1 and unique (COCO's may have gaps). Build it with `from_names` or `read_pbtxt`;
    a direct construction is checked the same way (LabelMapError). Empty for a mask job whose classes have no
    names (its masks hold the indices)."""
    ids: dict[str, int]

    def __post_init__(self):
        _check(self.ids, "label map")

    def __hash__(self):
        return hash(tuple(sorted(self.ids.items())))

    @classmethod
    def from_names(cls, names) -> "LabelMap":
        """Ids 1..N in the given order."""
        names = list(names)
        twice = [n for n in names if names.count(n) > 1]
        if twice:
            raise LabelMapError(f"label map: class {twice[0]!r} is listed twice")
        return cls({n: i for i, n in enumerate(names, 1)})

    @classmethod
    def read_pbtxt(cls, path) -> "LabelMap":
        """A TF OD API label_map.pbtxt: `item { id: 1 name: 'dog' display_name: 'Dog' }` ...; the `name` is the
        class name; other fields (display_name, keypoints, frequency...) are read past. An item with id 0 named
        'background' is the API's own reserved entry and is left out; any other id < 1 is refused."""
        path = os.fspath(path)
        try:
            text = read_capped(path, LABELS_MAX_BYTES, "label map", "LABELS_MAX_BYTES").decode("utf-8")
        except UntrustedFileError as exc:
            raise LabelMapError(str(exc)) from None
        except OSError as exc:
            raise LabelMapError(f"{path}: cannot read the label map: {exc.strerror or exc}") from None
        except UnicodeDecodeError as exc:
            raise LabelMapError(f"{path}: the label map is not UTF-8 text ({exc.reason} at byte {exc.start})") \
                from None
        ids: dict[str, int] = {}
        for k, (line, fields) in enumerate(_items(text, path), 1):
            where = f"{path}:{line}: item {k}"
            if "id" not in fields or "name" not in fields:
                raise LabelMapError(f"{where}: needs both `id` and `name`")
            ident, name = fields["id"], fields["name"]
            if not isinstance(ident, int) or isinstance(name, int):
                raise LabelMapError(f"{where}: `id` must be an integer and `name` a quoted string")
            if ident > MAX_ID:
                raise LabelMapError(f"{where}: id {ident} is out of range: ids are 1 to {MAX_ID} (the Object Detection "
                                    f"API reads them as int32)")
            if ident == 0 and "background" in (name, fields.get("display_name")):
                continue
            if name in ids:
                raise LabelMapError(f"{where}: class {name!r} is listed twice")
            ids[name] = ident
        if not ids:
            raise LabelMapError(f"{path}: the label map has no item; give at least one `item {{ id: 1 name: '...' }}`")
        _check(ids, path)
        return cls(ids)

    def to_pbtxt(self, keypoints: dict | None = None) -> str:
        """The API's text format: items in id order, names quoted with ' and escaped. `keypoints`: class name ->
        its point names, written as the item's `keypoints { id label }` (what the API's CenterNet
        keypoint_label_map_path reads: ids 0-based in the records' order)."""
        def points(n):
            return "".join(f"  keypoints {{\n    id: {k}\n    label: {_quote(p)}\n  }}\n"
                           for k, p in enumerate((keypoints or {}).get(n, ())))
        return "".join(f"item {{\n  id: {i}\n  name: {_quote(n)}\n{points(n)}}}\n" for n, i in self._ordered())

    def names(self) -> tuple[str, ...]:
        """Class names in id order."""
        return tuple(n for n, _ in self._ordered())

    def id_of(self, name: str, where: str) -> int:
        """The id of `name`; AnnotationError naming `where` (file and object) when the map lacks it."""
        try:
            return self.ids[name]
        except KeyError:
            known = ", ".join(self.names()[:20]) + (", ..." if len(self.ids) > 20 else "")
            raise AnnotationError(f"{where}: class {name!r} is not in the label map ({known})") from None

    def _ordered(self) -> list[tuple[str, int]]:
        return sorted(self.ids.items(), key=lambda kv: kv[1])


def _check(ids: dict, source: str) -> None:
    by_id: dict[int, str] = {}
    for name, ident in ids.items():
        if not isinstance(name, str) or not name or name != name.strip():
            raise LabelMapError(f"{source}: class name {name!r} must be a non-empty string without surrounding "
                                f"spaces")
        if not isinstance(ident, int) or isinstance(ident, bool) or not 1 <= ident <= MAX_ID:
            raise LabelMapError(f"{source}: class {name!r} has id {ident!r}; ids are integers >= 1 (0 is the "
                                f"background) and <= {MAX_ID} (int32)")
        if ident in by_id:
            raise LabelMapError(f"{source}: id {ident} is given to both {by_id[ident]!r} and {name!r}")
        by_id[ident] = name


# -- protobuf text format: just enough for label maps (messages, scalars, comments, both quote styles) --

_TOKEN = re.compile(r"""
    (?P<ws>\s+|\#[^\n]*)
  | (?P<num>[-+]?(?:0[xX][0-9a-fA-F]+|\d+(?:\.\d*)?(?:[eE][-+]?\d+)?|\.\d+(?:[eE][-+]?\d+)?)[fF]?)
  | (?P<ident>[A-Za-z_][A-Za-z0-9_.]*)
  | (?P<punct>[{}<>:;,\[\]])
""", re.VERBOSE)
_ESCAPES = {"n": "\n", "t": "\t", "r": "\r", "'": "'", '"': '"', "\\": "\\", "a": "\a", "b": "\b", "f": "\f",
            "v": "\v", "?": "?"}


_OCTAL, _HEX = re.compile(r"[0-7]{1,3}"), re.compile(r"[0-9a-fA-F]{1,2}")


def _unquote(tok: str, where: str) -> str:
    body, out, i = tok[1:-1], bytearray(), 0
    while i < len(body):
        c = body[i]
        if c != "\\":
            out += c.encode("utf-8")
            i += 1
            continue
        e = body[i + 1]
        if e in _ESCAPES:
            out += _ESCAPES[e].encode()
            i += 2
        elif e in "01234567":
            m = _OCTAL.match(body, i + 1)   # at the position, not on a slice: a slice per escape is quadratic
            out.append(int(m.group(), 8) & 0xFF)
            i += 1 + len(m.group())
        elif e == "x" and (m := _HEX.match(body, i + 2)):
            out.append(int(m.group(), 16))
            i += 2 + len(m.group())
        else:
            raise LabelMapError(f"{where}: unknown escape \\{e} in {tok}")
    try:
        return out.decode("utf-8")
    except UnicodeDecodeError:
        raise LabelMapError(f"{where}: string {tok} is not UTF-8") from None


def _quote(name: str) -> str:
    out = []
    for ch in name:
        if ch in "\\'":
            out.append("\\" + ch)
        elif ch == "\n":
            out.append("\\n")
        elif ord(ch) < 0x20 or ord(ch) == 0x7F:
            out.append(f"\\{ord(ch):03o}")
        else:
            out.append(ch)
    return "'" + "".join(out) + "'"


def _tokens(text: str, path: str):
    pos, line = 0, 1
    while pos < len(text):
        if text[pos] in "'\"":   # strings scanned without a backtracking regex (pbtxt.quoted_end)
            end = quoted_end(text, pos)
            if end is None:
                raise LabelMapError(f"{path}:{line}: invalid label map: a string that is not closed on its line")
            yield "str", text[pos:end], line
            pos = end
            continue
        m = _TOKEN.match(text, pos)
        if m is None:
            raise LabelMapError(f"{path}:{line}: invalid label map: unexpected {text[pos:pos + 10]!r}")
        kind = m.lastgroup
        if kind != "ws":
            yield kind, m.group(), line
        line += m.group().count("\n")
        pos = m.end()


def _items(text: str, path: str) -> list[tuple[int, dict]]:
    """The top-level `item` messages as (line, {field: first scalar value}); nested messages are skipped."""
    toks = list(_tokens(text, path))
    items, i = [], 0

    def fail(at: int, what: str):
        line = toks[at][2] if at < len(toks) else (toks[-1][2] if toks else 1)
        raise LabelMapError(f"{path}:{line}: invalid label map: {what}")

    def message(i: int, close: str, depth: int) -> tuple[int, dict]:
        fields: dict = {}
        while True:
            if i >= len(toks):
                fail(i, f"missing {close!r}" if close else "")
            kind, tok, _ = toks[i]
            if close and tok == close and kind == "punct":
                return i + 1, fields
            if kind == "punct" and tok in ";,":
                i += 1
                continue
            if kind != "ident":
                fail(i, f"expected a field name, got {tok!r}")
            name, i = tok, i + 1
            if i < len(toks) and toks[i][1] == ":":
                i += 1
            if i >= len(toks):
                fail(i, f"field {name!r} has no value")
            kind, tok, _ = toks[i]
            if tok in ("{", "<"):
                if depth > 16:
                    fail(i, "messages nest deeper than 16 levels")
                i, _ = message(i + 1, "}" if tok == "{" else ">", depth + 1)
                continue
            if tok == "[":
                fail(i, f"list values are not supported (field {name!r})")
            if kind == "str":
                parts = [_unquote(tok, f"{path}:{toks[i][2]}")]
                while i + 1 < len(toks) and toks[i + 1][0] == "str":  # adjacent strings concatenate (joined once)
                    i += 1
                    parts.append(_unquote(toks[i][1], f"{path}:{toks[i][2]}"))
                value: object = "".join(parts)
            elif kind == "num":
                try:
                    value = int(tok, 0)
                except ValueError:
                    value = float(tok.rstrip("fF"))
            elif kind == "ident":
                value = tok
            else:
                fail(i, f"field {name!r} has no value")
            fields.setdefault(name, value)
            i += 1

    while i < len(toks):
        kind, tok, line = toks[i]
        if kind != "ident":
            fail(i, f"expected `item {{`, got {tok!r}")
        j = i + 1
        if j < len(toks) and toks[j][1] == ":":
            j += 1
        if j >= len(toks) or toks[j][1] not in ("{", "<"):
            fail(j, f"expected a message after {tok!r}")
        i, fields = message(j + 1, "}" if toks[j][1] == "{" else ">", 1)
        if tok == "item":
            items.append((line, fields))
    return items

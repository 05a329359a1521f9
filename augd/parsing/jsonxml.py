"""Bounded reading and parsing of files a job supplies (annotations): every size, depth and entity is limited.

Errors are UntrustedFileError naming the file, what was refused and the limit. Never imports the daemon.
"""
from __future__ import annotations

import json
import os
import re
import sys
from xml.etree import ElementTree

from defusedxml import DefusedXmlException, DTDForbidden
from defusedxml import ElementTree as SafeET

from augd import defaults
from augd.errors import UntrustedFileError
from augd.files import read_capped

__all__ = ["load_json", "parse_xml"]

def _read(path, max_bytes: int, kind: str) -> bytes:
    path = os.fspath(path)
    try:
        return read_capped(path, max_bytes, kind)
    except OSError as exc:
        raise UntrustedFileError(f"{path}: cannot read {kind} file: {exc.strerror or exc}", path=path) from None


def _refuse_constant(name: str):
    # NaN/Infinity are not JSON (RFC 8259) and no COCO exporter writes them; a NaN coordinate passes every
    # range check (all comparisons are false), so it is refused here rather than trusted downstream.
    raise ValueError(f"non-standard constant {name} (NaN and Infinity are not JSON)")


def _json_depth_over(value, max_depth: int) -> bool:
    """True when containers nest deeper than max_depth; iterative, so any depth is safe to check."""
    stack = [(value, 1)]
    while stack:
        obj, depth = stack.pop()
        if depth > max_depth:
            return True
        items = obj.values() if isinstance(obj, dict) else obj
        stack.extend([(x, depth + 1) for x in items if type(x) is dict or type(x) is list])
    return False


def load_json(path, *, max_bytes: int = defaults.JSON_MAX_BYTES, max_depth: int = defaults.JSON_MAX_DEPTH):
    """Parse a JSON file of at most max_bytes whose containers nest at most max_depth deep."""
    path = os.fspath(path)
    data = _read(path, max_bytes, "JSON")
    try:
        # The text is decoded once and the bytes dropped before parsing, so the file is held once while the
        # objects (several times its size) are built: json.loads(bytes) would keep both copies alive.
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise UntrustedFileError(f"{path}: invalid JSON: not UTF-8 ({exc.reason} at byte {exc.start})",
                                 path=path) from None
    del data
    depth_refusal = UntrustedFileError(f"{path}: refused: JSON nesting deeper than {max_depth} levels "
                                       f"(limit JSON_MAX_DEPTH)", path=path, limit=max_depth)
    try:
        value = json.loads(text, parse_constant=_refuse_constant)
    except json.JSONDecodeError as exc:
        raise UntrustedFileError(f"{path}:{exc.lineno}: invalid JSON: {exc.msg} (line {exc.lineno}, "
                                 f"column {exc.colno})", path=path) from None
    except RecursionError:  # the C decoder recurses per level; the limit is far below the stack's
        raise depth_refusal from None
    except ValueError as exc:  # NaN/Infinity, or an integer longer than Python converts
        why = str(exc) if "constant" in str(exc) else f"an integer of more than {sys.get_int_max_str_digits()} digits"
        raise UntrustedFileError(f"{path}: invalid JSON: {why}", path=path) from None
    if isinstance(value, (dict, list)) and _json_depth_over(value, max_depth):
        raise depth_refusal
    return value


_NO_DTD = "XML files may declare no DTD, entities or external references"
# Encodings whose bytes spell ASCII as ASCII: in them a DOCTYPE always shows as the bytes b"<!DOCTYPE".
_ASCII_SUPERSETS = frozenset({"utf-8", "utf8", "us-ascii", "ascii", "iso-8859-1", "latin-1", "latin1"})
_DECLARED_ENCODING = re.compile(rb"\A(?:\xef\xbb\xbf)?<\?xml[^>]*?encoding\s*=\s*[\"']([^\"']*)")


def _plain(data: bytes) -> bool:
    """True when the bytes can hold no DTD: no b"<!DOCTYPE", in an encoding where a DOCTYPE would show as those
    bytes (no NUL byte, so no UTF-16 or UTF-32; no declared encoding, or an ASCII superset)."""
    if b"<!DOCTYPE" in data or b"\0" in data:
        return False
    declared = _DECLARED_ENCODING.match(data)
    return declared is None or declared.group(1).decode("latin-1").lower() in _ASCII_SUPERSETS


def parse_xml(path, *, max_bytes: int = defaults.XML_MAX_BYTES):
    """Parse an XML file of at most max_bytes into an ElementTree Element.

    No DTD at all is accepted (forbid_dtd): Pascal VOC files have none, and refusing the DOCTYPE refuses
    entity declarations (billion laughs), external entities (file://, http://) and DTD fetches at once. A file
    that cannot hold a DTD (_plain: every VOC file) has nothing to refuse and goes to the standard C parser,
    faster than defusedxml's pure-Python one (bench/README.md); any other file goes to defusedxml.
    """
    path = os.fspath(path)
    data = _read(path, max_bytes, "XML")
    try:
        if _plain(data):
            return ElementTree.fromstring(data)
        return SafeET.fromstring(data, forbid_dtd=True, forbid_entities=True, forbid_external=True)
    except DTDForbidden as exc:
        raise UntrustedFileError(f"{path}: refused: a DTD (<!DOCTYPE {exc.name} ...>); {_NO_DTD}",
                                 path=path) from None
    except DefusedXmlException as exc:  # entities, external references: unreachable while DTDs are refused
        raise UntrustedFileError(f"{path}: refused: {exc}; {_NO_DTD}", path=path) from None
    except ElementTree.ParseError as exc:  # expat's message ends with "line L, column C" (both parsers raise it)
        raise UntrustedFileError(f"{path}:{exc.position[0]}: invalid XML: {exc}", path=path) from None
    except (ValueError, LookupError) as exc:  # pyexpat: a declared encoding it cannot read or does not know
        raise UntrustedFileError(f"{path}: invalid XML: {exc} (declare UTF-8 or UTF-16 with a byte order mark)",
                                 path=path) from None

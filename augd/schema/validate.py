"""YAML data -> a pydantic model, every problem a SpecError naming file, line, YAML path, value and what is
allowed: the one wording of validation errors for pipelines, a job's augd.yaml and the daemon's config."""
from __future__ import annotations

import difflib
import inspect
import typing
from typing import Any, Iterable, TypeVar

from pydantic import BaseModel, ValidationError

from augd.errors import SpecError
from augd.parsing.yamlsrc import YamlDoc

__all__ = ["combine", "did_you_mean", "validate"]

M = TypeVar("M", bound=BaseModel)


def validate(model: type[M], doc: YamlDoc, data: Any, *, at: tuple = (), context: dict | None = None,
             extra_keys: tuple[str, ...] = ()) -> M:
    """`model.model_validate(data, context=context)` for the data at YAML path `at` of doc. `extra_keys`: keys
    the caller took out of data before (a composite's `ops`), listed among the allowed ones."""
    try:
        return model.model_validate(data, context=context)
    except ValidationError as exc:
        raise combine(_errors(model, doc, data, at, exc, extra_keys)) from None


def combine(errors: list[SpecError]) -> SpecError:
    """One SpecError for several: its message has one line each, path and line are the first one's, and
    `.errors` lists them all (augd validate prints each)."""
    errors = [e for err in errors for e in getattr(err, "errors", None) or [err]]
    first = errors[0]
    combined = SpecError("\n".join(str(e) for e in errors), source=first.source, path=first.path, line=first.line)
    combined.errors = errors
    return combined


def did_you_mean(word, choices: Iterable[str]) -> str:
    near = difflib.get_close_matches(str(word), list(choices), n=2, cutoff=0.6)
    return f"; did you mean {' or '.join(near)}?" if near else ""


def _errors(model: type[BaseModel], doc: YamlDoc, data: Any, at: tuple, exc: ValidationError,
            extra_keys: tuple[str, ...]) -> list[SpecError]:
    """One SpecError per place pydantic found a problem. A union's failed branches count once, at the first: they
    share a place, or one's place holds the other's ('labels' and 'labels[0]' for a `list[str] | str`)."""
    out: list[SpecError] = []
    seen: list[tuple] = []
    for err in exc.errors(include_url=False):
        loc = _data_loc(data, err["loc"], missing=err["type"] == "missing")
        if any(loc[:len(s)] == s or s[:len(loc)] == loc for s in seen):
            continue
        seen.append(loc)
        if err["type"] == "extra_forbidden":
            allowed = _fields_at(model, loc[:-1]) + (extra_keys if len(loc) == 1 else ())
            msg = f"unknown key {loc[-1]!r}" + did_you_mean(loc[-1], allowed)
            if allowed:
                msg += f" (allowed keys: {', '.join(allowed)})"
        elif err["type"] == "missing":
            msg = "required key is missing"
        else:
            msg = err["msg"].removeprefix("Value error, ")
            if "got" not in msg:
                msg += f"; got {err.get('input')!r}"
        out.append(doc.error(at + loc, msg))
    return out


def _data_loc(data: Any, loc: tuple, *, missing: bool) -> tuple:
    """The YAML path of an error: the parts of pydantic's loc that lead through the data. The others are the names
    pydantic gives a union's branches or a validator ('int', 'list[str]', 'function-after[...]'), not keys; only
    a missing key is not in the data, as the last part."""
    out, node = [], data
    for i, part in enumerate(loc):
        if isinstance(node, dict) and part in node or \
                isinstance(node, list) and isinstance(part, int) and 0 <= part < len(node):
            node = node[part]
            out.append(part)
        elif missing and i == len(loc) - 1:
            out.append(part)
    return tuple(out)


def _fields_at(model: type[BaseModel], loc: tuple) -> tuple[str, ...]:
    """The keys of the model found at `loc` below `model` (the output: of a pipeline has its own), () if none."""
    for part in loc:
        field = model.model_fields.get(part) if isinstance(part, str) else None
        # A model, or an optional one (`annotations: AnnotationsConfig | None`).
        inner = [t for t in (field.annotation, *typing.get_args(field.annotation)) if inspect.isclass(t)
                 and issubclass(t, BaseModel)] if field is not None else []
        if not inner:
            return ()
        model = inner[0]
    return tuple(model.model_fields)

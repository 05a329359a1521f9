"""Pipeline specs: load, validate, normalize, describe. Never imports TensorFlow."""
from __future__ import annotations

import difflib
import os

from augd.errors import SpecError
from augd.schema.annotations import ANNOTATION_FORMATS, Annotations, AnnotationsConfig
from augd.schema.model import OpNode, OutputSpec, PipelineSpec, parse_doc
from augd.schema.validate import validate
from augd.parsing.yamlsrc import YamlDoc, load_yaml, read_yaml_file

__all__ = ["ANNOTATION_FORMATS", "Annotations", "AnnotationsConfig", "builtin_pipelines", "find_pipeline",
           "is_pipeline_path", "known_pipelines", "parse_doc", "OpNode", "OutputSpec", "PipelineSpec", "SpecError", "load_pipeline", "parse_pipeline", "load_yaml",
           "read_yaml_file", "validate", "YamlDoc"]

_SUFFIXES = (".yaml", ".yml")


def parse_pipeline(text: str, source: str = "<string>") -> PipelineSpec:
    return parse_doc(load_yaml(text, source))


def load_pipeline(path: str | os.PathLike) -> PipelineSpec:
    return parse_doc(read_yaml_file(os.fspath(path), "pipeline file"))


BUILTIN_DIR = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "pipelines")


def builtin_pipelines() -> dict[str, str]:
    """Name -> path of the pipelines shipped with augd."""
    if not os.path.isdir(BUILTIN_DIR):
        return {}
    return {f[:-5]: os.path.join(BUILTIN_DIR, f) for f in sorted(os.listdir(BUILTIN_DIR)) if f.endswith(".yaml")}


def known_pipelines(search_dirs=()) -> set[str]:
    """Pipeline names usable without a path: the built-in ones plus the *.yaml and *.yml in search_dirs."""
    names = set(builtin_pipelines())
    for d in search_dirs:
        try:
            names |= {f.rsplit(".", 1)[0] for f in os.listdir(d) if f.endswith(_SUFFIXES)}
        except OSError:  # a missing or unreadable folder names no pipelines
            pass
    return names


def is_pipeline_path(ref: str) -> bool:
    """A pipeline reference is a file path when it holds a path separator or ends in .yaml/.yml, else a name
    (a bare name is never looked up in the working directory)."""
    return "/" in ref or os.sep in ref or ref.endswith(_SUFFIXES)


def find_pipeline(ref: str, search_dirs=()) -> str:
    """A pipeline file path from a path or a bare name; search_dirs come before the built-in ones."""
    if is_pipeline_path(ref):
        return ref
    for d in search_dirs:
        for ext in _SUFFIXES:
            cand = os.path.join(d, ref + ext)
            if os.path.isfile(cand):
                return cand
    found = builtin_pipelines().get(ref)
    if found:
        return found
    known = sorted(known_pipelines(search_dirs))
    near = difflib.get_close_matches(ref, known, n=3, cutoff=0.6)
    hint = f"; did you mean {' or '.join(repr(n) for n in near)}?" if near else ""
    raise SpecError(f"pipeline {ref!r} not found: not a file, and no pipeline of that name{hint} "
                    f"(known: {', '.join(known) or 'none'})", source=ref)

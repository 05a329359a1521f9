"""Pipeline specs: load, validate, normalize, describe. Never imports TensorFlow."""
from __future__ import annotations

import os

from augd.errors import SpecError
from augd.spec.model import NAME_RE, OpNode, OutputSpec, PipelineSpec, parse_doc
from augd.spec.yamlsrc import YamlDoc, format_path, load_yaml, read_yaml_file

__all__ = ["builtin_pipelines", "find_pipeline", "parse_doc", "OpNode", "OutputSpec", "PipelineSpec", "SpecError", "load_pipeline", "parse_pipeline",
           "pipeline_from_data", "format_path", "NAME_RE", "load_yaml", "read_yaml_file", "YamlDoc"]


def parse_pipeline(text: str, source: str = "<string>") -> PipelineSpec:
    return parse_doc(load_yaml(text, source))


def pipeline_from_data(data: dict, source: str) -> PipelineSpec:
    """Validate already-loaded data (e.g. a pipeline embedded in a job's augd.yaml)."""
    return parse_doc(YamlDoc(source=source, data=data, lines={}))


def load_pipeline(path: str | os.PathLike) -> PipelineSpec:
    return parse_doc(read_yaml_file(os.fspath(path), "pipeline file"))


BUILTIN_DIR = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "pipelines")


def builtin_pipelines() -> dict[str, str]:
    """Name -> path of the pipelines shipped with augd."""
    if not os.path.isdir(BUILTIN_DIR):
        return {}
    return {f[:-5]: os.path.join(BUILTIN_DIR, f) for f in sorted(os.listdir(BUILTIN_DIR)) if f.endswith(".yaml")}


def find_pipeline(ref: str, search_dirs=()) -> str:
    """A pipeline file path from a path or a bare name; search_dirs come before the built-in ones."""
    # A path has a separator or a YAML suffix; a bare name is never looked up in the working directory.
    if os.sep in ref or "/" in ref or ref.endswith((".yaml", ".yml")):
        return ref
    for d in search_dirs:
        for ext in (".yaml", ".yml"):
            cand = os.path.join(d, ref + ext)
            if os.path.isfile(cand):
                return cand
    found = builtin_pipelines().get(ref)
    if found:
        return found
    known = sorted(set(builtin_pipelines()) | {f.rsplit(".", 1)[0] for d in search_dirs if os.path.isdir(d)
                                                 for f in os.listdir(d) if f.endswith((".yaml", ".yml"))})
    raise SpecError(f"pipeline {ref!r} not found: not a file, and no pipeline of that name "
                    f"(known: {', '.join(known) or 'none'})", source=ref)

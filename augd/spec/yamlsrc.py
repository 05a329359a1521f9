"""YAML reading that remembers where each value came from, so errors can quote a line number."""
from __future__ import annotations

from dataclasses import dataclass

import yaml

from augd.errors import SpecError

__all__ = ["YamlDoc", "load_yaml", "read_yaml_file", "format_path"]


def format_path(loc: tuple) -> str:
    """('ops', 3, 'random_hue', 'max_delta') -> 'ops[3].random_hue.max_delta'."""
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            out += f".{part}" if out else str(part)
    return out


@dataclass(frozen=True)
class YamlDoc:
    source: str          # file name (or "<string>") for messages
    data: object         # plain Python data from yaml.safe_load
    lines: dict          # YAML path tuple -> 1-based line number

    def line_of(self, loc: tuple) -> int | None:
        # Fall back to the nearest parent that has a line: a missing key is reported at its mapping.
        loc = tuple(loc)
        while loc:
            if loc in self.lines:
                return self.lines[loc]
            loc = loc[:-1]
        return self.lines.get(())

    def error(self, loc: tuple, message: str) -> SpecError:
        line = self.line_of(loc)
        where = f"{self.source}" + (f":{line}" if line else "")
        path = format_path(loc)
        text = f"{where}: {path}: {message}" if path else f"{where}: {message}"
        return SpecError(text, source=self.source, path=path, line=line)


def _index_lines(node, loc: tuple, lines: dict) -> None:
    lines[loc] = node.start_mark.line + 1
    if isinstance(node, yaml.MappingNode):
        for key, value in node.value:
            k = key.value if isinstance(key, yaml.ScalarNode) else str(key.value)
            lines[loc + (k,)] = key.start_mark.line + 1
            _index_lines(value, loc + (k,), lines)
            lines[loc + (k,)] = value.start_mark.line + 1 if not isinstance(value, yaml.ScalarNode) \
                else key.start_mark.line + 1
    elif isinstance(node, yaml.SequenceNode):
        for i, item in enumerate(node.value):
            _index_lines(item, loc + (i,), lines)


def load_yaml(text: str, source: str = "<string>") -> YamlDoc:
    """Safe-load one YAML document; syntax errors become SpecError with the line."""
    try:
        node = yaml.compose(text, Loader=yaml.SafeLoader)
        data = yaml.safe_load(text)
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark
        line = mark.line + 1 if mark else None
        where = f"{source}:{line}" if line else source
        raise SpecError(f"{where}: invalid YAML: {exc.problem}", source=source, line=line) from None
    except yaml.YAMLError as exc:
        raise SpecError(f"{source}: invalid YAML: {exc}", source=source) from None
    lines: dict = {}
    if node is not None:
        _index_lines(node, (), lines)
    return YamlDoc(source=source, data=data, lines=lines)


def read_yaml_file(path: str, what: str) -> YamlDoc:
    """Read and safe-load a YAML file; unreadable or non-UTF-8 files become SpecError naming `what`."""
    try:
        with open(path, encoding="utf-8") as fh:
            text = fh.read()
    except OSError as exc:
        raise SpecError(f"{path}: cannot read {what}: {exc.strerror or exc}", source=path) from None
    except UnicodeDecodeError as exc:
        raise SpecError(f"{path}: {what} is not UTF-8 text ({exc.reason} at byte {exc.start})",
                        source=path) from None
    return load_yaml(text, path)

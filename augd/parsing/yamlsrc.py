"""YAML reading that remembers where each value came from, so errors can quote a line number."""
from __future__ import annotations

from dataclasses import dataclass

import yaml

from augd import defaults
from augd.errors import SpecError, UntrustedFileError
from augd.files import format_size, read_capped

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
    data: object         # plain Python data, as yaml.safe_load gives
    lines: dict          # YAML path tuple (from the file's root) -> 1-based line number
    base: tuple = ()     # YAML path of data in the file: errors name the full path

    def below(self, key) -> "YamlDoc":
        """The document at `key` of this one (a pipeline embedded in a job's augd.yaml), with the file's lines."""
        return YamlDoc(source=self.source, data=self.data[key], lines=self.lines, base=self.base + (key,))

    def line_of(self, loc: tuple) -> int | None:
        # Fall back to the nearest parent that has a line: a missing key is reported at its mapping.
        loc = self.base + tuple(loc)
        while loc:
            if loc in self.lines:
                return self.lines[loc]
            loc = loc[:-1]
        return self.lines.get(())

    def error(self, loc: tuple, message: str) -> SpecError:
        line = self.line_of(loc)
        where = f"{self.source}" + (f":{line}" if line else "")
        path = format_path(self.base + tuple(loc))
        text = f"{where}: {path}: {message}" if path else f"{where}: {message}"
        return SpecError(text, source=self.source, path=path, line=line)


class _BoundedLoader(yaml.SafeLoader):
    """SafeLoader that refuses, while composing, documents nesting or expanding (through aliases) too far.

    Sizes are counted as the tree would be with every alias expanded: a running total adds 1 per node and the
    memoised size of an anchor per alias, so a billion-laughs file is refused after ~YAML_MAX_NODES steps.
    """

    def __init__(self, text: str, source: str):
        super().__init__(text)
        self.source = source
        self._nodes = self._chars = 0   # expanded so far
        self._depth = self._peak = 0    # collections open now; deepest reached in the current node
        self._aliased = False
        self._sizes: dict = {}          # id(anchored node) -> (nodes, chars, height), once composed

    def _refuse(self, event, what: str) -> SpecError:
        line = event.start_mark.line + 1
        return SpecError(f"{self.source}:{line}: refused: {what}", source=self.source, line=line)

    def _count(self, event, nodes: int, chars: int) -> None:
        self._nodes += nodes
        self._chars += chars
        if self._nodes > defaults.YAML_MAX_NODES:
            what = "YAML aliases expand to" if self._aliased else "the YAML has"
            raise self._refuse(event, f"{what} more than {defaults.YAML_MAX_NODES} nodes (limit YAML_MAX_NODES)")
        if self._chars > defaults.YAML_MAX_CHARS:
            raise self._refuse(event, f"YAML aliases expand to more than {defaults.YAML_MAX_CHARS} characters of "
                                      f"text (limit YAML_MAX_CHARS)")

    def _reach(self, event, depth: int) -> None:
        self._peak = max(self._peak, depth)
        if depth > defaults.YAML_MAX_DEPTH:
            how = " (through aliases)" if self._aliased else ""
            raise self._refuse(event, f"nesting deeper than {defaults.YAML_MAX_DEPTH} levels{how} "
                                      f"(limit YAML_MAX_DEPTH)")

    def compose_node(self, parent, index):
        event = self.peek_event()
        if isinstance(event, yaml.AliasEvent):
            target = self.anchors.get(event.anchor)  # an undefined alias is the composer's error
            if target is not None:
                if id(target) not in self._sizes:  # its anchor is still open: a recursive structure
                    raise self._refuse(event, f"alias *{event.anchor} refers to a node that contains it "
                                              f"(recursive structures are not allowed)")
                nodes, chars, height = self._sizes[id(target)]
                self._aliased = True
                self._count(event, nodes, chars)
                self._reach(event, self._depth + height)
            return super().compose_node(parent, index)
        nodes0, chars0, depth0, peak0 = self._nodes, self._chars, self._depth, self._peak
        self._count(event, 1, len(event.value) if isinstance(event, yaml.ScalarEvent) else 0)
        if isinstance(event, yaml.CollectionStartEvent):
            self._depth += 1
            self._reach(event, self._depth)
        self._peak = self._depth
        node = super().compose_node(parent, index)
        if event.anchor is not None:
            self._sizes[id(node)] = (self._nodes - nodes0, self._chars - chars0, self._peak - depth0)
        self._depth, self._peak = depth0, max(peak0, self._peak)
        return node


def _index_lines(root) -> dict:
    """YAML path -> line of every node; iterative (the tree is already bounded in size and depth)."""
    lines: dict = {}
    stack = [(root, (), root.start_mark.line + 1)]
    while stack:
        node, loc, line = stack.pop()
        lines[loc] = line
        children = []
        if isinstance(node, yaml.MappingNode):
            for key, value in node.value:
                k = key.value if isinstance(key, yaml.ScalarNode) else str(key.value)
                at = key if isinstance(value, yaml.ScalarNode) else value
                children.append((value, loc + (k,), at.start_mark.line + 1))
        elif isinstance(node, yaml.SequenceNode):
            children = [(item, loc + (i,), item.start_mark.line + 1) for i, item in enumerate(node.value)]
        stack.extend(reversed(children))  # popped in document order: a repeated key's last value wins
    return lines


def load_yaml(text: str, source: str = "<string>") -> YamlDoc:
    """Safe-load one bounded YAML document; syntax errors and refusals become SpecError with the line."""
    if len(text) > defaults.YAML_MAX_BYTES:
        raise SpecError(f"{source}: refused: {len(text)} characters exceed the "
                        f"{format_size(defaults.YAML_MAX_BYTES)} limit for YAML files (YAML_MAX_BYTES)",
                        source=source)
    loader = _BoundedLoader(text, source)
    try:
        node = loader.get_single_node()  # composed once; the data is constructed from the same nodes
        data = loader.construct_document(node) if node is not None else None
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark
        line = mark.line + 1 if mark else None
        where = f"{source}:{line}" if line else source
        raise SpecError(f"{where}: invalid YAML: {exc.problem}", source=source, line=line) from None
    except yaml.YAMLError as exc:
        raise SpecError(f"{source}: invalid YAML: {exc}", source=source) from None
    finally:
        loader.dispose()
    return YamlDoc(source=source, data=data, lines=_index_lines(node) if node is not None else {})


def read_yaml_file(path: str, what: str) -> YamlDoc:
    """Read and safe-load a YAML file of at most YAML_MAX_BYTES; unreadable or non-UTF-8 files become SpecError
    naming `what`, oversized or non-regular ones (a FIFO: never opened for a blocking read) are refused."""
    try:
        raw = read_capped(path, defaults.YAML_MAX_BYTES, "YAML", "YAML_MAX_BYTES")
        text = raw.decode("utf-8")
    except UntrustedFileError as exc:
        raise SpecError(str(exc), source=path) from None
    except OSError as exc:
        raise SpecError(f"{path}: cannot read {what}: {exc.strerror or exc}", source=path) from None
    except UnicodeDecodeError as exc:
        raise SpecError(f"{path}: {what} is not UTF-8 text ({exc.reason} at byte {exc.start})",
                        source=path) from None
    return load_yaml(text, path)

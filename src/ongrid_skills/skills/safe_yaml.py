"""YAML frontmatter that cannot hurt: the safe loader, behind limits checked before any building.

The node graph is composed with the safe loader (in C when PyYAML has libyaml), then walked once,
following aliases, *before* a single Python object is built. Refused, each with a parse error
that names the line:

- an expansion (aliases followed) of more than :data:`MAX_NODES` nodes or
  :data:`MAX_EXPANDED_CHARS` characters of scalars — a 1.4 KB "billion laughs" file expands to
  hundreds of MB when it is printed or served as JSON;
- an alias to a node that contains it (a recursive structure JSON cannot hold);
- nesting deeper than :data:`MAX_DEPTH`;
- a scalar longer than :data:`MAX_SCALAR_CHARS`;
- a tag outside plain data (``!!python/object``, ``!!binary``, ``!!set``, any ``!local`` tag);
- a key given twice in one mapping (YAML says keys are unique; PyYAML would keep the last one
  silently), or a mapping key that is not a scalar.

What is built is plain JSON data: dates become ISO text, ``.nan``/``.inf`` become text. This
module must never build an object from a node graph it has not checked.

>>> load_mapping("a: &x [1, 2]\\nb: *x\\n", "f.md", 2)
{'a': [1, 2], 'b': [1, 2]}
"""

from __future__ import annotations

import datetime
import math
from typing import Any

import yaml
from yaml.nodes import MappingNode, Node, ScalarNode, SequenceNode

from ongrid_skills.errors import ManifestError

#: The safe loader, in C when PyYAML was built with libyaml (≈10× faster, same safety).
SAFE_LOADER: Any = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


class FrontmatterLoader(SAFE_LOADER):  # type: ignore[misc]
    """The safe loader; timestamps stay text, and a value its tag cannot read is a YAML error.

    PyYAML's constructors raise ValueError, IndexError, KeyError or AttributeError on text their
    tag cannot read (``2001-13-45``, ``!!float x``, ``!!bool maybe``, ``!!timestamp x``).
    """

    def construct_object(self, node: yaml.Node, deep: bool = False) -> Any:
        try:
            return super().construct_object(node, deep)
        except (ValueError, LookupError, AttributeError, TypeError) as exc:
            raise yaml.constructor.ConstructorError(
                None, None, f"cannot read {node.tag} value {node.value!r}: {exc}", node.start_mark
            ) from None


def _timestamp_as_text(loader: yaml.constructor.SafeConstructor, node: yaml.Node) -> Any:
    # A date is not JSON: kept as written (``version: 2024-01-01`` → "2024-01-01").
    return loader.construct_scalar(node)  # type: ignore[arg-type]


FrontmatterLoader.add_constructor("tag:yaml.org,2002:timestamp", _timestamp_as_text)

MAX_NODES = 10_000
MAX_EXPANDED_CHARS = 256 * 1024
MAX_DEPTH = 32
MAX_SCALAR_CHARS = 16 * 1024

_CORE = "tag:yaml.org,2002:"
_DATA_TAGS = frozenset(
    _CORE + name
    for name in ("null", "bool", "int", "float", "str", "timestamp", "seq", "map", "merge")
)
_MERGE = _CORE + "merge"
_NOT_JSON = frozenset({_CORE + "timestamp", _CORE + "float"})  # dates, .nan/.inf: made text
_NUMBERS = frozenset({_CORE + "int", _CORE + "float"})
MAX_NUMBER_CHARS = 100


class YamlSyntaxError(ManifestError):
    """The text is not YAML at all (as opposed to YAML refused by a limit)."""


def load_mapping(source: str, path: str, first_line: int) -> Any:
    """Parse ``source`` (which starts at line ``first_line`` of ``path``) under the limits."""
    loader = FrontmatterLoader(source)
    try:
        try:
            node = loader.get_single_node()
        except yaml.YAMLError as exc:
            raise _syntax_error(exc, path, first_line) from None
        if node is None:
            return None
        limits = _Limits(path, first_line)
        if "*" in source:  # an alias may share nodes: measure the expansion
            limits.check(node)
        else:  # a plain tree (most frontmatter): the per-node checks, in one quick pass
            limits.scan(node)
        try:
            data = loader.construct_document(node)
        except yaml.YAMLError as exc:  # a value its tag cannot build (a bad timestamp…)
            raise _syntax_error(exc, path, first_line) from None
        except ValueError as exc:  # the constructor's own conversions (a date out of range…)
            raise ManifestError(
                f"frontmatter YAML: {exc}", path=path, kind="parse", line=first_line
            ) from None
    finally:
        loader.dispose()
    return _plain(data) if limits.needs_plain else data


def _syntax_error(exc: yaml.YAMLError, path: str, first_line: int) -> YamlSyntaxError:
    mark = getattr(exc, "problem_mark", None)
    line = first_line + (mark.line if mark is not None else 0)
    column = (mark.column + 1) if mark is not None else 1
    problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
    return YamlSyntaxError(
        f"frontmatter YAML: {problem}", path=path, kind="parse", line=line, column=column
    )


class _Limits:
    """One walk over the node graph; shared (aliased) nodes are measured once, counted each time
    they occur."""

    def __init__(self, path: str, first_line: int) -> None:
        self.path = path
        self.first_line = first_line
        self.sizes: dict[int, tuple[int, int, int]] = {}  # id → (nodes, chars, height)
        self.open: set[int] = set()  # the nodes on the current path: an alias to one is a loop
        self.needs_plain = True  # whether the built data may hold dates or non-finite floats

    def fail(self, node: Node, message: str) -> ManifestError:
        return ManifestError(
            f"frontmatter YAML: {message}",
            path=self.path,
            kind="parse",
            line=self.first_line + node.start_mark.line,
            column=node.start_mark.column + 1,
        )

    def check(self, node: Node) -> None:
        self.measure(node, 1)

    def scan(self, root: Node) -> None:
        """The checks of :meth:`_measure` on a tree without aliases (no node is shared, so the
        source's size already bounds the expansion). One tight loop: it runs for every file."""
        plain = False
        stack = [(root, 1)]
        pop, push = stack.pop, stack.append
        while stack:
            node, depth = pop()
            tag = node.tag
            if tag not in _DATA_TAGS:
                raise self._tag_error(node)
            if depth > MAX_DEPTH:
                raise self.fail(node, f"nested more than {MAX_DEPTH} levels deep")
            if type(node) is ScalarNode:
                if len(node.value) > MAX_NUMBER_CHARS:
                    self._scalar(node)
                if tag in _NOT_JSON:
                    plain = True
            elif type(node) is MappingNode:
                for key_node, value_node in self._pairs(node):
                    push((key_node, depth + 1))
                    push((value_node, depth + 1))
            else:
                for child in node.value:
                    push((child, depth + 1))
        self.needs_plain = plain

    def _tag_error(self, node: Node) -> ManifestError:
        return self.fail(
            node,
            f"could not determine a constructor for the tag {_shown_tag(node.tag)}: "
            "only plain data (text, numbers, booleans, dates, lists, mappings) is allowed",
        )

    def _scalar(self, node: ScalarNode) -> None:
        size = len(node.value)
        if size > MAX_SCALAR_CHARS:
            raise self.fail(node, f"a value of {size} characters, at most {MAX_SCALAR_CHARS}")
        # Python refuses to convert an integer of over 4,300 digits (a ValueError mid-build).
        if node.tag in _NUMBERS and size > MAX_NUMBER_CHARS:
            raise self.fail(node, f"a number of {size} characters, at most {MAX_NUMBER_CHARS}")

    def _pairs(self, node: MappingNode) -> list[tuple[Node, Node]]:
        """The key/value nodes of a mapping; a key that is not a scalar, or given twice, fails."""
        seen: set[tuple[str, str]] = set()
        for key_node, _ in node.value:
            if not isinstance(key_node, ScalarNode):
                raise self.fail(key_node, "a mapping key must be a plain value")
            if key_node.tag != _MERGE:
                ident = (key_node.tag, key_node.value)
                if ident in seen:
                    raise self.fail(key_node, f"duplicate key {key_node.value!r}")
                seen.add(ident)
        pairs: list[tuple[Node, Node]] = node.value
        return pairs

    def measure(self, node: Node, depth: int) -> tuple[int, int, int]:
        key = id(node)
        if key in self.open:
            raise self.fail(node, "an alias refers to a node that contains it (a recursive value)")
        known = self.sizes.get(key)
        if known is None:
            if depth > MAX_DEPTH:
                raise self.fail(node, f"nested more than {MAX_DEPTH} levels deep")
            self.open.add(key)
            try:
                known = self.sizes[key] = self._measure(node, depth)
            finally:
                self.open.discard(key)
            # Reported at the first (innermost) node whose expansion passes a limit.
            if known[0] > MAX_NODES:
                raise self.fail(
                    node, f"expands to {known[0]} nodes (aliases followed), at most {MAX_NODES}"
                )
            if known[1] > MAX_EXPANDED_CHARS:
                raise self.fail(
                    node,
                    f"expands to {known[1]} characters (aliases followed), "
                    f"at most {MAX_EXPANDED_CHARS}",
                )
        if depth - 1 + known[2] > MAX_DEPTH:
            raise self.fail(node, f"nested more than {MAX_DEPTH} levels deep")
        return known

    def _measure(self, node: Node, depth: int) -> tuple[int, int, int]:
        if node.tag not in _DATA_TAGS:
            raise self._tag_error(node)
        if isinstance(node, ScalarNode):
            self._scalar(node)
            return 1, len(node.value), 1
        nodes, chars, height = 1, 0, 0
        children: list[Node] = []
        if isinstance(node, SequenceNode):
            children = list(node.value)
        elif isinstance(node, MappingNode):
            for key_node, value_node in self._pairs(node):
                children.extend((key_node, value_node))
        for child in children:
            n, c, h = self.measure(child, depth + 1)
            nodes, chars, height = nodes + n, chars + c, max(height, h)
        return nodes, chars, height + 1


def _shown_tag(tag: str) -> str:
    return "!!" + tag[len(_CORE) :] if tag.startswith(_CORE) else tag


def _plain(value: Any) -> Any:
    """The built data as JSON can hold it (dates → ISO text, non-finite floats → text)."""
    if isinstance(value, dict):
        return {_plain_key(k): _plain(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_plain(v) for v in value]
    if isinstance(value, (datetime.date, datetime.datetime)):
        return value.isoformat()
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)
    return value


def _plain_key(key: Any) -> Any:
    if isinstance(key, (datetime.date, datetime.datetime)):
        return key.isoformat()
    if isinstance(key, float) and not math.isfinite(key):
        return str(key)
    return key

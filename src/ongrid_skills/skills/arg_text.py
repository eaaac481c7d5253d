"""Typing a word of text as the JSON value a skill's schema expects of one property.

The rule that turns ``port=8080`` on a command line and ``8080`` in a web form field into the
same ``8080`` (an integer), so that the CLI and the web console read text alike: a value takes
the first type of its property it fits, in the order of :data:`ORDER` (``null`` for the word
``null``, ``boolean`` for ``true``/``false``/``yes``/``no``, ``integer``, ``number``, ``string``
last, as it is). A property of one ``enum`` or ``const`` without a ``type`` has the types of its
values; ``anyOf``/``oneOf`` branches add theirs. An untyped property takes the text as it is.

It only turns text into JSON values: whether the args satisfy the schema (required keys, enums,
bounds) is the skill's validator's business, and how a door words a refusal is the door's.

>>> typed("8080", {"type": "integer"}), typed("no", {"type": "boolean"})
(8080, False)
>>> typed("1.5", {"type": ["integer", "number"]}), typed("x", {})
(1.5, 'x')
>>> try:
...     typed("many", {"type": "integer"})
... except NotTyped as exc:
...     print(exc.allowed)
['integer']
"""

from __future__ import annotations

import json
import re
from typing import Any

_INTEGER = re.compile(r"-?[0-9]+")
_NUMBER = re.compile(r"-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?(?:[eE][+-]?[0-9]+)?")
BOOLEANS = {"true": True, "yes": True, "false": False, "no": False}
#: The order in which a value is tried against a property of several types.
ORDER = ("null", "boolean", "integer", "number", "string")
ALL_TYPES = (*ORDER, "array", "object")
#: Digits an integer word may have: Python's int() refuses longer ones anyway (a DoS guard).
MAX_INTEGER_DIGITS = 4000


class NotTyped(ValueError):
    """The text fits none of the property's types (``allowed``, in schema order)."""

    def __init__(self, raw: str, allowed: list[str]) -> None:
        super().__init__(f"{raw!r} is not {a_kind(' or '.join(allowed))}")
        self.raw = raw
        self.allowed = allowed

    @property
    def needs_json(self) -> bool:
        """Whether the property takes an object or an array, which plain text never is."""
        return "object" in self.allowed or "array" in self.allowed


def property_schema(schema: Any, key: str) -> Any:
    """The schema of property ``key`` of an object ``schema``: ``{}`` when it is untyped, None
    when it may not be given. A key the schema lists has its schema; any other key has the
    schema of ``additionalProperties`` (``true``: untyped), and may not be given when the schema
    lists properties without allowing more; a schema listing none takes any key, untyped."""
    if not isinstance(schema, dict):
        return {}
    properties = schema.get("properties")
    if isinstance(properties, dict) and key in properties:
        return properties[key]
    extra = schema.get("additionalProperties")
    if isinstance(extra, dict):
        return extra
    if extra is True or not isinstance(properties, dict):
        return {}
    return None


def types_of(prop: Any) -> list[str]:
    """The JSON types a property schema allows (empty: any, untyped)."""
    if not isinstance(prop, dict):
        return []
    kind = prop.get("type")
    if isinstance(kind, str):
        return [kind]
    if isinstance(kind, list):
        return [k for k in kind if isinstance(k, str)]
    values = prop.get("enum", [prop["const"]] if "const" in prop else None)
    if isinstance(values, list):
        return sorted({json_type(v) for v in values}, key=ALL_TYPES.index)
    found: list[str] = []
    for branch in (*_list(prop.get("anyOf")), *_list(prop.get("oneOf"))):
        found += [k for k in types_of(branch) if k not in found]
    return found


def _list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


def json_type(value: Any) -> str:
    """The JSON Schema type name of a JSON value (``integer`` apart from ``number``)."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "number"
    if isinstance(value, list):
        return "array"
    return "object" if isinstance(value, dict) else "string"


def is_array(prop: Any) -> bool:
    """Whether a property takes an array (and nothing else but null)."""
    return [t for t in types_of(prop) if t != "null"] == ["array"]


def typed(raw: str, prop: Any) -> Any:
    """``raw`` as the first type of ``prop`` it fits; :class:`NotTyped` when it fits none."""
    allowed = types_of(prop)
    if not allowed:
        return raw
    for kind in ORDER:
        if kind not in allowed:
            continue
        if kind == "null" and raw == "null":
            return None
        if kind == "boolean" and raw.lower() in BOOLEANS:
            return BOOLEANS[raw.lower()]
        if kind == "integer" and len(raw) <= MAX_INTEGER_DIGITS and _INTEGER.fullmatch(raw):
            return int(raw)
        if kind == "number" and len(raw) <= MAX_INTEGER_DIGITS and _NUMBER.fullmatch(raw):
            return json.loads(raw)
        if kind == "string":
            return raw
    raise NotTyped(raw, allowed)


def a_kind(kinds: str) -> str:
    """``an integer``, ``a string``: a type name with its article."""
    return ("an " if kinds[:1] in ("a", "e", "i", "o", "u") else "a ") + kinds

"""A skill's run form: its JSON schema → form fields, posted fields → typed args, and the
server's schema violations → the fields they belong to.

Fields (:class:`Field`), one per property of the schema:

- ``input``: one ``<input>`` for a string, number or integer (or a union of those), typed
  from the text by :func:`ongrid_skills.skills.arg_text.typed`, the CLI's rule; ``format``
  and bounds become input types and attributes (hints only: the server validates);
- ``choice``: a ``<select>`` of the values of an ``enum``/``const``, and an empty choice;
- ``boolean``: a ``<select>`` of true, false and an empty choice (unset);
- ``array``: rows of one ``input`` or ``choice`` item, repeated under one name;
- ``object``: a fieldset of the properties of an object, one level deep;
- ``json``: a JSON text area for anything else (deeper objects, arrays of objects, untyped).

A field left empty is absent from the args: defaults are shown, never sent (SPEC §4), so the
skill receives exactly what the person gave. Field names are ``a`` + the property's JSON pointer
(``a/limits/max``). This module reads and writes no store and decides no permission.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from ongrid_skills import strict_json
from ongrid_skills.doors.web.forms import Form
from ongrid_skills.errors import Violation
from ongrid_skills.skills.arg_text import NotTyped, is_array, json_type, typed, types_of
from ongrid_skills.skills.schemas import pointer as json_pointer

PREFIX = "a"
SCALARS = frozenset({"string", "integer", "number", "boolean"})
#: ``format`` → (input type, placeholder): what a browser offers for it, and an example.
FORMATS: dict[str, tuple[str, str]] = {
    "date-time": ("text", "2026-12-03T10:30:00Z"),
    "date": ("date", "2026-12-03"),
    "time": ("text", "10:30:00Z"),
    "email": ("email", "oncall@example.org"),
    "uri": ("url", "https://example.org/path"),
    "hostname": ("text", "db1.internal"),
    "ipv4": ("text", "192.0.2.10"),
    "ipv6": ("text", "2001:db8::10"),
    "uuid": ("text", "123e4567-e89b-12d3-a456-426614174000"),
}
_REQUIRED = re.compile(r'^("(?:[^"\\]|\\.)*") is a required property$')


@dataclass(slots=True)
class Field:
    """One form field of a property (see the module docstring for the kinds)."""

    pointer: str
    key: str
    prop: Any
    kind: str
    required: bool = False
    input_type: str = "text"
    placeholder: str = ""
    attrs: dict[str, str] = field(default_factory=dict)
    choices: list[tuple[str, str]] = field(default_factory=list)
    item: Field | None = None
    children: list[Field] = field(default_factory=list)
    #: The schema's bounds in words (``from 0 to 10``), written next to the field.
    bounds: str = ""

    @property
    def name(self) -> str:
        return PREFIX + self.pointer

    @property
    def description(self) -> str:
        text = self.prop.get("description") if isinstance(self.prop, dict) else None
        return text if isinstance(text, str) else ""

    @property
    def default(self) -> str | None:
        """The schema's default as people read it, or None: shown, never sent."""
        if not isinstance(self.prop, dict) or "default" not in self.prop:
            return None
        value = self.prop["default"]
        return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)


def fields_of(schema: Any) -> list[Field]:
    """The fields of a skill's args schema, in the order of its properties."""
    return _fields(schema, "", depth=0)


def _fields(schema: Any, base: str, depth: int) -> list[Field]:
    if not isinstance(schema, dict) or not isinstance(schema.get("properties"), dict):
        return []
    required = schema.get("required")
    needed = set(required) if isinstance(required, list) else set()
    return [
        _field(prop, base + json_pointer([key]), key, key in needed, depth)
        for key, prop in schema["properties"].items()
    ]


def _field(prop: Any, pointer: str, key: str, required: bool, depth: int) -> Field:
    scalar = _scalar(prop, pointer, key, required)
    if scalar is not None:
        return scalar
    if is_array(prop) and isinstance(prop, dict):
        item = _scalar(prop.get("items"), pointer, key, False)
        if item is not None:
            return Field(pointer, key, prop, "array", required, item=item)
    kinds = [t for t in types_of(prop) if t != "null"]
    if depth == 0 and kinds == ["object"] and isinstance(prop, dict):
        children = _fields(prop, pointer, depth + 1)
        if children and all(child.kind != "object" for child in children):
            return Field(pointer, key, prop, "object", required, children=children)
    placeholder = ""
    if isinstance(prop, dict) and "default" in prop:
        placeholder = json.dumps(prop["default"], ensure_ascii=False)
    return Field(pointer, key, prop, "json", required, placeholder=placeholder)


def _scalar(prop: Any, pointer: str, key: str, required: bool) -> Field | None:
    """An ``input`` or ``choice`` field for a scalar property, or None when it is not one."""
    if not isinstance(prop, dict):
        return None
    values = prop.get("enum", [prop["const"]] if "const" in prop else None)
    if isinstance(values, list):
        if not values or any(isinstance(v, dict | list) for v in values):
            return None
        choices = [(json.dumps(v, ensure_ascii=False), _shown(v)) for v in values]
        return Field(pointer, key, prop, "choice", required, choices=choices)
    kinds = [t for t in types_of(prop) if t != "null"]
    if not kinds or not SCALARS.issuperset(kinds):
        return None
    if kinds == ["boolean"]:
        choices = [("true", "true"), ("false", "false")]
        return Field(pointer, key, prop, "boolean", required, choices=choices)
    found = Field(pointer, key, prop, "input", required)
    if kinds in (["integer"], ["number"]):
        found.input_type = "number"
        for bound, attr in (("minimum", "min"), ("maximum", "max")):
            if _is_number(prop.get(bound)):
                found.attrs[attr] = str(prop[bound])
        if kinds == ["integer"]:  # an exclusive bound of an integer is the next integer in
            for bound, attr, inward in (
                ("exclusiveMinimum", "min", 1),
                ("exclusiveMaximum", "max", -1),
            ):
                if isinstance(prop.get(bound), int) and not isinstance(prop[bound], bool):
                    found.attrs.setdefault(attr, str(prop[bound] + inward))
        multiple = prop.get("multipleOf")
        found.attrs["step"] = (
            str(multiple) if _is_number(multiple) else "1" if kinds[0] == "integer" else "any"
        )
        found.bounds = _bounds(found.attrs.get("min"), found.attrs.get("max"), "")
        if kinds == ["number"]:
            beyond = [
                f"{word} {prop[bound]}"
                for bound, word in (("exclusiveMinimum", "over"), ("exclusiveMaximum", "under"))
                if _is_number(prop.get(bound))
            ]
            found.bounds = ", ".join(filter(None, [found.bounds, *beyond]))
        if _is_number(multiple):
            found.bounds = ", ".join(filter(None, [found.bounds, f"a multiple of {multiple}"]))
    elif kinds == ["string"]:
        fmt = prop.get("format")
        if isinstance(fmt, str) and fmt in FORMATS:
            found.input_type, found.placeholder = FORMATS[fmt]
        if isinstance(prop.get("maxLength"), int) and not isinstance(prop["maxLength"], bool):
            found.attrs["maxlength"] = str(prop["maxLength"])
        lengths = [prop.get(k) for k in ("minLength", "maxLength")]
        shortest, longest = (v if _is_number(v) else None for v in lengths)
        found.bounds = _bounds(shortest or None, longest, " characters")
    else:
        found.placeholder = " or ".join(kinds)
    if found.default is not None:
        found.placeholder = found.default
    return found


def _bounds(low: object, high: object, unit: str) -> str:
    """``from LOW to HIGH``, ``at least LOW`` or ``at most HIGH`` (then ``unit``), or ""."""
    if low is not None and high is not None:
        return f"from {low} to {high}{unit}"
    if low is not None or high is not None:
        return f"at least {low}{unit}" if low is not None else f"at most {high}{unit}"
    return ""


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _shown(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value)


# ---- posted fields → args ----------------------------------------------------------------
@dataclass(slots=True)
class Problems:
    """What is wrong with a posted form: per field (by JSON pointer), and for the whole form."""

    by_field: dict[str, list[str]] = field(default_factory=dict)
    general: list[str] = field(default_factory=list)

    def add(self, pointer: str, message: str) -> None:
        self.by_field.setdefault(pointer, []).append(message)

    def __bool__(self) -> bool:
        return bool(self.by_field or self.general)


def walk(fields: list[Field]) -> Iterator[Field]:
    """Every field, the children of an object field after it."""
    for f in fields:
        yield f
        yield from walk(f.children)


def read_fields(fields: list[Field], form: Form, control: frozenset[str]) -> tuple[Any, Problems]:
    """The args the posted fields give, and what is wrong with them (a field whose text is not
    of its type is left out of the args). ``control`` names the fields of the page that are not
    args (csrf, persona…); any other name is a problem."""
    problems = Problems()
    names = {f.name for f in walk(fields)}
    for key in dict.fromkeys(key for key, _ in form.pairs):
        if key not in names and key not in control:
            problems.general.append(f"unknown field {_clip(key)!r}")
    args: dict[str, Any] = {}
    for f in fields:
        _read(f, form, args, problems)
    return args, problems


def _read(f: Field, form: Form, into: dict[str, Any], problems: Problems) -> None:
    if f.kind == "object":
        inner: dict[str, Any] = {}
        for child in f.children:
            _read(child, form, inner, problems)
        if inner or f.required:
            into[f.key] = inner
        return
    raws = form.all(f.name)
    if f.kind == "array":
        assert f.item is not None
        items = []
        for index, raw in enumerate(r for r in raws if r != ""):
            value, problem = _value(f.item, raw)
            if problem is not None:
                problems.add(f.pointer, f"item {index + 1}: {problem}")
            else:
                items.append(value)
        if items:
            into[f.key] = items
        return
    if len(raws) > 1:
        problems.add(f.pointer, f"given {len(raws)} times")
        return
    if raws and raws[0] != "":
        value, problem = _value(f, raws[0])
        if problem is not None:
            problems.add(f.pointer, problem)
        else:
            into[f.key] = value


def _value(f: Field, raw: str) -> tuple[Any, str | None]:
    """The value of one field's text, or None and why it is not one."""
    if f.kind == "choice":
        if any(raw == value_text for value_text, _label in f.choices):
            return json.loads(raw), None
        return None, "not one of the choices"
    if f.kind == "json":
        return parse_json(raw)
    try:
        return typed(raw, f.prop), None
    except NotTyped as exc:
        return None, str(exc)


def parse_json(text: str) -> tuple[Any, str | None]:
    """A JSON text's value and None, or None and why it is not one."""
    try:
        return strict_json.loads(text), None
    except json.JSONDecodeError as exc:
        return None, f"not JSON: {exc.msg} at line {exc.lineno} column {exc.colno}"
    except strict_json.DuplicateKey as exc:
        return None, f"ambiguous JSON: {exc}"
    except RecursionError:
        return None, "not JSON this form accepts: nested too deep"


def _clip(text: str, limit: int = 60) -> str:
    return text if len(text) <= limit else text[:limit] + "…"


# ---- args → field values (to fill the form again) -----------------------------------------
def values_of(fields: list[Field], args: Any) -> dict[str, list[str]] | None:
    """The texts the form's fields show for ``args``, or None when the fields cannot hold them
    (a key without a field, an empty string, a value of another type: edit those as JSON)."""
    if not isinstance(args, dict):
        return None
    by_key = {f.key: f for f in fields}
    values: dict[str, list[str]] = {}
    for key, value in args.items():
        f = by_key.get(key)
        if f is None or not _fill(f, value, values):
            return None
    return values


def _fill(f: Field, value: Any, values: dict[str, list[str]]) -> bool:
    if f.kind == "object":
        if not isinstance(value, dict) or (not value and not f.required):
            return False
        inner = values_of(f.children, value)
        if inner is None:
            return False
        values.update(inner)
        return True
    if f.kind == "array":
        if not isinstance(value, list) or not value:
            return False
        assert f.item is not None
        texts = [_text(f.item, v) for v in value]
        if any(t is None for t in texts):
            return False
        values[f.name] = [t for t in texts if t is not None]
        return True
    text = _text(f, value)
    if text is None:
        return False
    values[f.name] = [text]
    return True


def _text(f: Field, value: Any) -> str | None:
    """The text a field shows for ``value``, if reading that text gives ``value`` back."""
    if f.kind == "json":
        return json.dumps(value, ensure_ascii=False, indent=2)
    if f.kind == "choice" or not isinstance(value, str):
        text = json.dumps(value, ensure_ascii=False)
    else:
        text = value
    if text == "":
        return None
    back, problem = _value(f, text)
    same = problem is None and json_type(back) == json_type(value) and back == value
    return text if same else None


# ---- violations → fields ------------------------------------------------------------------
def place(
    fields: list[Field], violations: list[Violation], problems: Problems, skip_known: bool = False
) -> None:
    """Put each schema violation on the field it is about (a missing required property on that
    property's field; an array item's on its array), the rest on the whole form. With
    ``skip_known``, a field that has a problem already (its text was not of its type, so it was
    left out) gets no other."""
    by_pointer = {f.pointer: f for f in walk(fields)}
    known = set(problems.by_field) if skip_known else set()
    for violation in violations:
        where, message = violation.pointer, violation.message
        missing = _REQUIRED.match(message)
        if missing:
            key = json.loads(missing.group(1))
            if f"{where}{json_pointer([key])}" in by_pointer:
                where, message = f"{where}{json_pointer([key])}", "required"
        target = _owner(by_pointer, where)
        if target is not None and target.pointer in known:
            continue
        if target is None:
            problems.general.append(f"{where or '/'}: {message}")
        elif target.pointer != where and target.kind == "array":
            index = where[len(target.pointer) + 1 :].split("/", 1)[0]
            label = f"item {int(index) + 1}: " if index.isdigit() else ""
            problems.add(target.pointer, label + message)
        else:
            problems.add(target.pointer, message)


def _owner(by_pointer: Mapping[str, Field], where: str) -> Field | None:
    """The field at ``where`` or the nearest one above it, None for the whole args."""
    while where:
        if where in by_pointer:
            return by_pointer[where]
        where = where.rsplit("/", 1)[0]
    return None

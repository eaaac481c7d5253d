"""A call's args from the command line: one JSON object, ``-`` (the JSON on stdin), or
``KEY=VALUE`` pairs typed from the skill's JSON schema, as ``st2 run`` and httpie take them.

    run disk_cleaner path=/var/tmp dry_run=false keep=3
    run disk_cleaner path=/var/tmp exclude=*.log exclude=*.gz      # an array: repeat the key
    run disk_cleaner 'exclude:=["*.log", "*.gz"]' 'limits:={"max": 5}'   # KEY:=JSON, verbatim

``KEY=VALUE`` reads VALUE as the type the schema gives the property: ``integer`` (``-12``),
``number`` (a JSON number), ``boolean`` (``true``/``false``, also ``yes``/``no``), ``null``
(``null``), ``string`` (the text as it is, ``""`` for ``KEY=``); a property of several types
takes the first that fits, in that order, a string last (an ``enum`` or ``const`` without a
``type`` has the types of its values): the rule of :mod:`ongrid_skills.skills.arg_text`, by
which the web console's run form reads its fields too. An ``array`` property collects every
``KEY=VALUE`` of its key, each typed from ``items``. An ``object`` property, or any value the
schema cannot type, is given as ``KEY:=JSON``. A property the schema does not type is a string.

Keys must be properties of the schema, unless ``additionalProperties`` allows more (a schema
types them, ``true`` leaves them untyped) or the schema declares no properties at all. Anything
else — an unknown key, a value that is not of its type, a key given twice for a non-array, pairs
mixed with a JSON object — is :class:`~ongrid_skills.errors.InvalidRequest` (exit 2) naming
the word. Whether the args satisfy the schema (required keys, enums, bounds) is checked where
every call is checked, by the skill's validator: this module only turns words into JSON.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from typing import Any

from ongrid_skills import strict_json
from ongrid_skills.errors import InvalidRequest
from ongrid_skills.skills.arg_text import NotTyped, is_array, property_schema, typed, types_of

_PAIR = re.compile(r'([^\s=:{}\[\]"]+)(:=|=)(.*)', re.DOTALL)

Pair = tuple[str, str, str]  # key, "=" or ":=", value


def split(words: Sequence[str]) -> tuple[str | None, list[Pair]]:
    """(the one JSON text or ``-``, None) or (None, the ``KEY=VALUE`` pairs) of ``words``."""
    pairs = [_PAIR.fullmatch(word) for word in words]
    if all(pairs):
        return None, [(m.group(1), m.group(2), m.group(3)) for m in pairs if m]
    if len(words) == 1:
        return words[0], []
    stray = next(word for word, m in zip(words, pairs, strict=True) if not m)
    raise InvalidRequest(
        f"{stray!r} is not KEY=VALUE: give one JSON object, '-', or KEY=VALUE pairs, not both"
    )


def parse_json(raw: str) -> Any:
    """The args of a JSON text (empty: ``{}``); a bad or ambiguous one is InvalidRequest."""
    try:
        return strict_json.loads(raw) if raw.strip() else {}
    except json.JSONDecodeError as exc:
        where = f"{exc.msg} at line {exc.lineno} col {exc.colno}"
        raise InvalidRequest(f"ARGS_JSON is not valid JSON: {where}") from None
    except strict_json.DuplicateKey as exc:
        raise InvalidRequest(f"ARGS_JSON is ambiguous: {exc}") from None


def from_pairs(pairs: Sequence[Pair], schema: Any, skill: str) -> dict[str, Any]:
    """The args object of ``pairs``, each value typed from ``schema`` (the skill's)."""
    schema = schema if isinstance(schema, dict) else {}
    args: dict[str, Any] = {}
    raw_keys: set[str] = set()
    for key, op, value in pairs:
        word = f"{key}{op}{value}"
        prop = _property(schema, key, skill)
        if key in raw_keys or (key in args and not is_array(prop)):
            raise InvalidRequest(f"{key!r} is given twice ({word!r})")
        if op == ":=":
            if key in args:
                raise InvalidRequest(f"{key!r} is given twice ({word!r})")
            try:
                args[key] = strict_json.loads(value)
            except (json.JSONDecodeError, strict_json.DuplicateKey) as exc:
                raise InvalidRequest(f"{word!r}: the value after := is not JSON ({exc})") from None
            raw_keys.add(key)
        elif is_array(prop):
            items = prop.get("items") if isinstance(prop, dict) else None
            args.setdefault(key, []).append(_typed(value, items, word))
        else:
            args[key] = _typed(value, prop, word)
    return args


def _property(schema: dict[str, Any], key: str, skill: str) -> Any:
    """The schema of property ``key``: {} when untyped; InvalidRequest when it may not exist."""
    prop = property_schema(schema, key)
    if prop is None:
        known = ", ".join(sorted(schema.get("properties") or ())) or "none"
        raise InvalidRequest(f"{skill} has no arg {key!r} (its args: {known})")
    return prop


def _typed(raw: str, prop: Any, word: str) -> Any:
    """``raw`` as the first type of ``prop`` it fits; InvalidRequest when it fits none."""
    try:
        return typed(raw, prop)
    except NotTyped as exc:
        if exc.needs_json:
            raise InvalidRequest(
                f"{word!r}: give an {' or '.join(exc.allowed)} as KEY:=JSON"
            ) from None
        raise InvalidRequest(f"{word!r}: {exc}") from None


# ---- for shell completion -------------------------------------------------------------------
def typable(key: str) -> bool:
    """Whether a property name can be typed as ``KEY=`` (no blank, ``=``, ``:``, bracket, quote)."""
    return _PAIR.fullmatch(f"{key}=") is not None


def given_keys(words: Sequence[str]) -> list[str]:
    """The keys of the ``KEY=VALUE`` words typed so far (none when a word is not a pair)."""
    matches = [_PAIR.fullmatch(word) for word in words]
    return [m.group(1) for m in matches if m] if all(matches) else []


def repeatable(prop: Any) -> bool:
    """Whether ``KEY=VALUE`` may be given again for this property (an array collects them)."""
    return is_array(prop)


def choices(prop: Any) -> list[str]:
    """The values a property takes when they are few (an enum, a const, a boolean, items of an
    array of those), as they are typed after ``KEY=``; [] when any text may do."""
    if is_array(prop) and isinstance(prop, dict):
        return choices(prop.get("items"))
    if not isinstance(prop, dict):
        return []
    values = prop.get("enum", [prop["const"]] if "const" in prop else None)
    if isinstance(values, list):
        return [v if isinstance(v, str) else json.dumps(v) for v in values]
    kinds = types_of(prop)
    if kinds and set(kinds) <= {"boolean", "null"}:
        return [word for kind in ("boolean", "null") if kind in kinds for word in _WORDS[kind]]
    return []


_WORDS = {"boolean": ("true", "false"), "null": ("null",)}

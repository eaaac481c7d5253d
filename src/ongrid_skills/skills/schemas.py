"""JSON Schema (Draft 2020-12): checking a skill's schema, validating args against it.

Validators are compiled once per distinct schema (keyed by its canonical JSON) and shared by
every skill with the same schema; checking and compiling use jsonschema-rs (≈2 µs and ≈8 µs per
schema), validating one small args object costs well under a microsecond. Validators are
compiled offline: loading a skill or validating args must never fetch a remote ``$ref``.

>>> schema_problem({"type": "object", "properties": {"n": {"type": "integer"}}}) is None
True
>>> schema_problem({"type": "array"})
'schema type must be "object", got "array"'
>>> [v.pointer for v in validate_args({"type": "object", "required": ["n"]}, {"x": 1})]
['']
"""

from __future__ import annotations

import inspect
import json
import math
import re
from collections.abc import Callable
from functools import lru_cache
from typing import Any, get_type_hints

import jsonschema_rs
from pydantic import ConfigDict, create_model

from ongrid_skills.errors import Violation

EMPTY_OBJECT_SCHEMA: dict[str, Any] = {"type": "object", "properties": {}}
DRAFT_2020_12 = "https://json-schema.org/draft/2020-12/schema"
_ACCEPTED_DIALECTS = {DRAFT_2020_12, DRAFT_2020_12 + "#"}


def schema_problem(
    schema: object, *, plain: bool = False, compile: bool | None = None
) -> str | None:
    """Why ``schema`` is not an acceptable args schema, or None when it is. ``plain``: the
    caller checked already that it is plain JSON data (:func:`json_problem`); ``compile``:
    whether to compile it once meta-valid (None: when it uses a keyword only compiling checks;
    see :func:`may_need_compiling` for a cheap answer from the text it was parsed from)."""
    if not isinstance(schema, dict):
        return f"schema must be a JSON object, got {json_type(schema)}"
    # A schema from YAML may hold a date or bytes; one from JSON a lone surrogate or 1e400. Each
    # loads, then breaks whoever serialises the schema later (tool listings, validator cache).
    problem = None if plain else json_problem(schema)
    if problem is not None:
        return f"schema is not plain JSON data: {problem}"
    dialect = schema.get("$schema")
    if dialect is not None and (not isinstance(dialect, str) or dialect not in _ACCEPTED_DIALECTS):
        return f"schema $schema must be {DRAFT_2020_12!r} (or absent), got {dialect!r}"
    if "type" in schema and schema["type"] != "object":
        return f'schema type must be "object", got {json.dumps(schema["type"])}'
    try:
        jsonschema_rs.meta.validate(schema)
    except jsonschema_rs.ValidationError as exc:
        pointer = "/" + "/".join(str(p) for p in exc.instance_path)
        return f"schema is not a valid Draft 2020-12 schema at {pointer}: {exc.message}"
    except (jsonschema_rs.ReferencingError, ValueError) as exc:
        return f"schema cannot be compiled: {_first_line(exc)}"
    # Meta-validation does not catch everything (dangling or remote $ref, bad regex): compile
    # now, so that a skill whose schema can never validate args is refused at load time.
    if not (_needs_compiling(schema) if compile is None else compile):
        return None
    try:  # compiled straight from the dict: no cache entry for a one-off check at load time
        jsonschema_rs.Draft202012Validator(schema, offline=True)
    except (jsonschema_rs.ValidationError, jsonschema_rs.ReferencingError, ValueError) as exc:
        return f"schema cannot be compiled: {_first_line(exc)}"
    return None


#: Keywords whose problems the meta-schema cannot see (references, regular expressions):
#: a schema using none of them compiles whenever it is meta-valid.
_COMPILE_CHECKED = frozenset(
    {"$ref", "$dynamicRef", "$id", "$anchor", "$dynamicAnchor", "pattern", "patternProperties"}
)


def may_need_compiling(raw: bytes) -> bool:
    """Whether a schema parsed out of the JSON text ``raw`` may use a keyword that only
    compiling checks: one substring search per keyword, where walking the parsed schema cost
    as much as the rest of loading a skill. Conservative: a string equal to a keyword counts,
    and any ``\\u`` escape (which could spell one) makes the answer True.

    Each prefix is looked for only once a part of it that JSON text rarely holds is there
    (``$``, ``pattern``, a backslash): a search for a needle starting with ``"`` stops at every
    string of the manifest. 0.7 µs a manifest instead of 1.9 µs (``bench/README.md``).

    ``find``, not ``in``: ``needle in raw`` first tries the needle as an integer (a byte value),
    which raises and formats a TypeError for every bytes needle (0.8 → 0.5 µs a manifest)."""
    find = raw.find
    return (
        (find(b"$") >= 0 and find(b'"$') >= 0)
        or (find(b"pattern") >= 0 and find(b'"pattern') >= 0)
        or (find(b"\\") >= 0 and find(b"\\u") >= 0)
    )


def _needs_compiling(node: Any) -> bool:
    stack = [node]
    while stack:
        item = stack.pop()
        if isinstance(item, dict):
            if not _COMPILE_CHECKED.isdisjoint(item):
                return True
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
    return False


def _first_line(exc: Exception) -> str:
    text = str(getattr(exc, "message", "") or exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


def schema_key(schema: dict[str, Any]) -> str:
    """The canonical JSON of a schema: the cache key of its compiled validator."""
    return json.dumps(schema, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


@lru_cache(maxsize=512)
def _compiled(key: str) -> jsonschema_rs.Draft202012Validator:
    # offline: a $ref is never fetched over the network (loading a manifest makes no request).
    return jsonschema_rs.Draft202012Validator(json.loads(key), offline=True)


def validator_for(schema: dict[str, Any]) -> jsonschema_rs.Draft202012Validator:
    """The compiled validator of ``schema``, shared by every skill with the same schema."""
    return _compiled(schema_key(schema))


def validate_args(
    schema: dict[str, Any], args: object, validator: jsonschema_rs.Validator | None = None
) -> list[Violation]:
    """Every violation of ``args`` against ``schema``; empty when valid. Defaults not injected."""
    if not isinstance(args, dict):
        return [Violation("", f"args must be a JSON object, got {json_type(args)}")]
    validator = validator or validator_for(schema)
    if validator.is_valid(args):
        return []
    return [
        Violation(pointer(err.instance_path), err.message) for err in validator.iter_errors(args)
    ]


def pointer(path: Any) -> str:
    """A JSON pointer (RFC 6901) from a sequence of keys and indexes."""
    return "".join("/" + str(p).replace("~", "~0").replace("/", "~1") for p in path)


def json_type(value: object) -> str:
    """The JSON type name of a Python value, for error messages."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int | float):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "array"
    if isinstance(value, dict):
        return "object"
    return type(value).__name__


#: Deepest args accepted. JSON a little under the parser's own limit (~1000 levels) parses, then
#: makes the store's and the audit's JSON encoders overflow the stack (a 500); no skill needs it.
MAX_ARGS_DEPTH = 64
_SURROGATE = re.compile("[\ud800-\udfff]")


def args_problem(value: Any, max_depth: int = MAX_ARGS_DEPTH) -> str | None:
    """Why ``value`` cannot travel as JSON to a skill and into the store, or None.

    Python's JSON parser accepts what JSON does not carry: NaN and Infinity (also as 1e400) and
    lone UTF-16 surrogates (``"\\ud800"``); such args would reach the skill as invalid JSON and
    fail later, after the call ran, when the answer is encoded. Checked without recursion.
    """
    stack: list[tuple[Any, int]] = [(value, 0)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, float):
            if not math.isfinite(item):
                return "args hold a number JSON cannot carry (NaN, Infinity or out of range)"
        elif isinstance(item, str):
            if _SURROGATE.search(item):
                return "args hold a string with a lone UTF-16 surrogate"
        elif isinstance(item, dict | list):
            depth += 1
            if depth > max_depth:
                return f"args are nested deeper than {max_depth} levels"
            if isinstance(item, dict):
                for key, child in item.items():
                    if _SURROGATE.search(key):
                        return "args hold a key with a lone UTF-16 surrogate"
                    stack.append((child, depth))
            else:
                stack.extend((child, depth) for child in item)
    return None


#: Deepest document (manifest, frontmatter, schema) accepted. A schema a few hundred levels deep
#: loads, then cannot be compiled (jsonschema-rs) or serialised (pydantic) when it is used.
MAX_DOCUMENT_DEPTH = 100
#: Most values a document may expand to. A 1 MiB file holds far fewer; YAML aliases can make a
#: small file expand to billions (a "billion laughs"), which every serialisation would walk.
MAX_DOCUMENT_VALUES = 1_000_000


def json_problem(
    value: Any, max_depth: int = MAX_DOCUMENT_DEPTH, max_values: int = MAX_DOCUMENT_VALUES
) -> str | None:
    """Why ``value`` is not plain JSON data that any door can serialise, or None.

    Plain: objects with string keys, arrays, strings without lone UTF-16 surrogates, integers,
    finite floats, booleans and null, at most ``max_depth`` levels deep and ``max_values`` values
    in all. Checked without recursion, counting shared (aliased) values each time they appear.

    >>> json_problem({"a": [1, "x", None]}) is None
    True
    >>> json_problem({"a": {"b": float("nan")}})
    'a number JSON cannot carry (NaN or Infinity) at /a/b'
    """
    # Every manifest of a load passes here: containers only go on the stack, strings are checked
    # for surrogates in one pass, and a path is built only for a problem.
    texts: list[str] = []
    seen = 0
    stack: list[tuple[Any, int]] = [([value], -1)]
    while stack:
        item, depth = stack.pop()
        if depth >= max_depth:
            return f"nested deeper than {max_depth} levels"
        seen += len(item)
        if seen > max_values:
            return f"more than {max_values} values (expanded YAML aliases count each time)"
        children: Any = item
        if type(item) is dict:
            for key in item:
                if type(key) is not str:
                    return _located(value, item, f"a key that is not a string ({key!r})")
            texts.extend(item)
            children = item.values()
        for child in children:
            kind = type(child)
            if kind is str:
                texts.append(child)
            elif kind is dict or kind is list:
                stack.append((child, depth + 1))
            elif kind is float:
                if not math.isfinite(child):
                    return _located(value, child, "a number JSON cannot carry (NaN or Infinity)")
            elif child is not None and kind is not int and kind is not bool:
                return _located(value, child, f"a {kind.__name__} value")
    joined = "\n".join(texts)
    if not joined.isascii() and not _encodes(joined):
        culprit = next(t for t in texts if not _encodes(t))
        return _located(value, culprit, "a lone UTF-16 surrogate (in a string or a key)")
    return None


def _encodes(text: str) -> bool:
    """Whether ``text`` is valid UTF-8 material (no lone surrogate); faster than a regex."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _located(document: Any, culprit: Any, what: str) -> str:
    """``what`` at the JSON pointer of ``culprit`` (a value or a key, found by identity)."""
    stack: list[tuple[Any, tuple[Any, ...]]] = [(document, ())]
    while stack:
        item, path = stack.pop()
        if item is culprit or (type(item) is dict and any(key is culprit for key in item)):
            return f"{what} at {pointer(path) or 'the top level'}"
        if type(item) is dict:
            stack.extend((child, (*path, key)) for key, child in item.items())
        elif type(item) is list:
            stack.extend((child, (*path, i)) for i, child in enumerate(item))
    return what


def signature_schema(fn: Callable[..., Any]) -> dict[str, Any]:
    """The JSON schema (Draft 2020-12, type object) of ``fn``'s parameters after ``ctx``."""
    hints = get_type_hints(fn, include_extras=True)
    fields: dict[str, Any] = {}
    params = list(inspect.signature(fn).parameters.values())[1:]
    for param in params:
        if param.kind in (param.VAR_POSITIONAL, param.VAR_KEYWORD):
            continue
        annotation = hints.get(param.name, Any)
        default = ... if param.default is inspect.Parameter.empty else param.default
        fields[param.name] = (annotation, default)
    model = create_model(f"{fn.__name__}_args", __config__=ConfigDict(extra="forbid"), **fields)
    schema: dict[str, Any] = model.model_json_schema()
    return _clean(schema)


def _clean(node: dict[str, Any]) -> dict[str, Any]:
    """Drop pydantic's ``title`` keys (noise for a model); keep everything else."""
    out: dict[str, Any] = {}
    for key, value in node.items():
        if key == "title" and isinstance(value, str):
            continue
        if isinstance(value, dict):
            out[key] = _clean(value)
        elif isinstance(value, list):
            out[key] = [_clean(v) if isinstance(v, dict) else v for v in value]
        else:
            out[key] = value
    return out

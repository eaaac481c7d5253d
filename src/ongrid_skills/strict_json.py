"""JSON with one meaning: an object that names a key twice is refused, never "last one wins".

Python's ``json`` keeps the last of duplicate keys, so ``{"confirm": false, "confirm": true}``
confirms, while a proxy, a log reader or a person reading the first one sees ``false``. Keys are
compared after their escapes are decoded: ``"confirm"`` and ``"\\u0063onfirm"`` are one key.

Parsing stays on json's C scanner; only the ``object_pairs_hook`` is ours (a ``dict`` and a length
check per object). Only when it finds a repeat is the text scanned again, to say where: the JSON
path, the JSON pointer, the line and the column of the second occurrence.

This module must never accept a text ``json.loads`` refuses, nor change a value it accepts.

>>> try:
...     loads('{"a": {"b": [1, {"c": 1, "\\\\u0063": 2}]}}')
... except DuplicateKey as exc:
...     print(exc, exc.pointer)
duplicate key "c" at $.a.b[1].c (line 1 column 26) /a/b/1/c
>>> loads('{"a": 1, "b": {"a": 2}}')
{'a': 1, 'b': {'a': 2}}
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any


class DuplicateKey(ValueError):
    """An object names ``key`` twice. ``path``/``pointer``/``line``/``column`` locate the second
    one (None when it could not be located, which only a text json refuses anyway can cause)."""

    def __init__(
        self,
        key: str,
        path: str | None = None,
        pointer: str | None = None,
        line: int | None = None,
        column: int | None = None,
    ) -> None:
        self.key = key
        self.path = path
        self.pointer = pointer
        self.line = line
        self.column = column
        where = f" at {path} (line {line} column {column})" if path is not None else ""
        super().__init__(f"duplicate key {json.dumps(key)}{where}")


def unique_object(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    """``object_pairs_hook`` refusing a repeated key (not located yet: see :func:`decode`)."""
    obj = dict(pairs)
    if len(obj) != len(pairs):
        seen: set[str] = set()
        for key, _ in pairs:
            if key in seen:
                raise DuplicateKey(key)
            seen.add(key)
    return obj


def decoder(**kwargs: Any) -> json.JSONDecoder:
    """A JSONDecoder refusing repeated keys; use it through :func:`decode` to locate them."""
    return json.JSONDecoder(object_pairs_hook=unique_object, **kwargs)


_DECODER = decoder()


def decode(text: str, using: json.JSONDecoder = _DECODER) -> Any:
    """``using.decode(text)``; a repeated key raises a located :class:`DuplicateKey`."""
    try:
        return using.decode(text)
    except DuplicateKey as exc:
        raise locate(text) or exc from None


def loads(data: str | bytes) -> Any:
    """Like ``json.loads`` (bytes in UTF-8, -16 or -32), refusing repeated keys."""
    if isinstance(data, bytes | bytearray):
        data = data.decode(json.detect_encoding(data), "surrogatepass")
    return decode(data)


# ---- locating (only once a repeat was found) -------------------------------------------------
_LEXEME_RE = re.compile(r'"(?:[^"\\]|\\.)*"|[{}\[\],]', re.DOTALL)
_PLAIN_KEY_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


@dataclass(slots=True)
class _Frame:
    is_object: bool
    keys: set[str] = field(default_factory=set)
    key: str = ""
    index: int = 0
    expect_key: bool = True


def locate(text: str) -> DuplicateKey | None:
    """The first repeated key of ``text`` in reading order, located; None if there is none.

    One pass over strings and brackets (numbers, literals and colons need no attention), with a
    stack of open containers: iterative, so deep nesting costs no recursion.
    """
    stack: list[_Frame] = []
    for match in _LEXEME_RE.finditer(text):
        lexeme = match.group()
        top = stack[-1] if stack else None
        first = lexeme[0]
        if first == '"':
            if top is None or not top.is_object or not top.expect_key:
                continue  # a string value
            try:
                key = json.loads(lexeme)
            except ValueError:
                return None
            if key in top.keys:
                return _located(text, key, stack, match.start())
            top.keys.add(key)
            top.key = key
            top.expect_key = False
        elif first in "{[":
            stack.append(_Frame(is_object=first == "{"))
        elif first in "}]":
            if stack:
                stack.pop()
        elif top is not None:  # a comma
            if top.is_object:
                top.expect_key = True
            else:
                top.index += 1
    return None


def _located(text: str, key: str, stack: list[_Frame], offset: int) -> DuplicateKey:
    steps: list[str | int] = [f.key if f.is_object else f.index for f in stack[:-1]]
    steps.append(key)
    path = "$" + "".join(_path_step(step) for step in steps)
    pointer = "".join("/" + str(s).replace("~", "~0").replace("/", "~1") for s in steps)
    line = text.count("\n", 0, offset) + 1
    column = offset - (text.rfind("\n", 0, offset) + 1) + 1
    return DuplicateKey(key, path, pointer, line, column)


def _path_step(step: str | int) -> str:
    if isinstance(step, int):
        return f"[{step}]"
    if _PLAIN_KEY_RE.fullmatch(step):
        return f".{step}"
    return f"[{json.dumps(step)}]"

"""Strict JSON: a key given twice is refused and located; everything else is exactly json's."""

from __future__ import annotations

import json

import pytest

from ongrid_skills.strict_json import DuplicateKey, loads

SAME_AS_JSON = [
    "{}",
    "[]",
    '{"a": 1, "b": {"a": 2}, "c": [{"a": 3}, {"a": 4}]}',
    '{"": 0, " ": 1, "A": 2, "a": 3}',  # distinct keys, case matters
    '{"e\\u0301": 1, "\\u00e9": 2}',  # distinct code points, even if they look alike
    '{"s": "a \\" } { , [ ] string", "t": "\\\\"}',
    '[1, -2.5e3, true, false, null, "x", {"k": [[], {}]}]',
    '"just a string"',
    "  42  ",
    '{"\\ud800": 1}',  # a lone surrogate: json takes it, so do we
]


@pytest.mark.parametrize("text", SAME_AS_JSON)
def test_a_document_without_repeated_keys_parses_exactly_as_json_does(text: str) -> None:
    assert loads(text) == json.loads(text)
    assert loads(text.encode()) == json.loads(text.encode())
    assert loads(text.encode("utf-16")) == json.loads(text.encode("utf-16"))


@pytest.mark.parametrize(
    "text", ["{nope", '{"a": 1,', "", "[1,]", '{"a" 1}', "NaN-", '{"a": 1}}', "\xff"]
)
def test_what_json_refuses_is_refused_the_same_way(text: str) -> None:
    with pytest.raises(json.JSONDecodeError) as theirs:
        json.loads(text)
    with pytest.raises(json.JSONDecodeError) as ours:
        loads(text)
    assert (ours.value.msg, ours.value.pos) == (theirs.value.msg, theirs.value.pos)


LOCATED: list[tuple[str, str, str, str, int, int]] = [
    ('{"confirm": false, "confirm": true}', "confirm", "$.confirm", "/confirm", 1, 20),
    ('{"confirm": false, "\\u0063onfirm": true}', "confirm", "$.confirm", "/confirm", 1, 20),
    ('{"a": {"x": 1,\n "x": 2}}', "x", "$.a.x", "/a/x", 2, 2),
    ('[0, [1, {"k": 1, "k": 1}]]', "k", "$[1][1].k", "/1/1/k", 1, 18),
    ('{"a/b~": 1, "a/b~": 2}', "a/b~", '$["a/b~"]', "/a~1b~0", 1, 13),
    ('{"é": 1, "\\u00e9": 2}', "é", '$["\\u00e9"]', "/é", 1, 10),
    # the first repeat in reading order: "a" here, though the inner object closes first
    ('{"a": 1, "a": {"x": 1, "x": 2}}', "a", "$.a", "/a", 1, 10),
    ('{"s": "{\\"a\\": 1, \\"a\\": 2}", "s": 0}', "s", "$.s", "/s", 1, 31),
]


@pytest.mark.parametrize(("text", "key", "path", "pointer", "line", "column"), LOCATED)
def test_a_repeated_key_is_refused_with_its_path_pointer_line_and_column(
    text: str, key: str, path: str, pointer: str, line: int, column: int
) -> None:
    with pytest.raises(DuplicateKey) as caught:
        loads(text)
    exc = caught.value
    assert (exc.key, exc.path, exc.pointer, exc.line, exc.column) == (
        key,
        path,
        pointer,
        line,
        column,
    )
    assert str(exc) == f"duplicate key {json.dumps(key)} at {path} (line {line} column {column})"


def test_a_deeply_nested_repeat_is_located_by_an_iterative_scan() -> None:
    depth = 500  # below json's own recursion limit; the locating scan has none
    text = '{"a": ' * depth + '{"k": 1, "k": 2}' + "}" * depth
    with pytest.raises(DuplicateKey) as caught:
        loads(text)
    assert caught.value.path == "$" + ".a" * depth + ".k"

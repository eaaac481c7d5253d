"""stdout → result as a unit: the cap and the decoding rules, byte for byte (SPEC §4).

The runner zoo (tests/test_runner.py) drives these through real children; here the edges that a
child cannot hit exactly (the cap's last byte, the chunk that crosses it) and the strictness of
the decoding (constants, BOM, nesting, where the bad byte is) are pinned directly.
"""

from __future__ import annotations

import pytest

from ongrid_skills.execution.records import ErrorInfo
from ongrid_skills.execution.wire import STDOUT_CAP, StdoutBuffer, decode_result


def test_the_default_cap_is_16_mib() -> None:
    assert STDOUT_CAP == 16 * 1024 * 1024
    assert StdoutBuffer().cap == STDOUT_CAP


def test_stdout_up_to_exactly_the_cap_is_kept_whole() -> None:
    buffer = StdoutBuffer(cap=10)

    assert buffer.take(b"12345")
    assert buffer.take(b"67890")

    assert bytes(buffer.data) == b"1234567890"
    assert not buffer.too_large


def test_the_chunk_that_crosses_the_cap_is_refused_and_what_came_before_is_kept() -> None:
    buffer = StdoutBuffer(cap=10)
    buffer.take(b"12345678")

    assert not buffer.take(b"9AB")

    assert buffer.too_large
    assert bytes(buffer.data) == b"12345678"
    assert buffer.overflow() == ErrorInfo("output_too_large", "stdout exceeded 10 bytes")


def test_the_result_text_is_the_bytes_written_trimmed_never_reserialised() -> None:
    decoded = decode_result(b'\n  {"b": 1,  "a": [ ], "s": "caf\xc3\xa9 \\u00e9"}\r\n\t')

    assert decoded.error is None
    assert decoded.text == '{"b": 1,  "a": [ ], "s": "café \\u00e9"}'
    assert decoded.value == {"b": 1, "a": [], "s": "café é"}
    assert list(decoded.value) == ["b", "a", "s"]


@pytest.mark.parametrize("stdout", [b"", b" \t\r\n ", b"\n\n"])
def test_nothing_but_whitespace_is_empty_output(stdout: bytes) -> None:
    assert decode_result(stdout) == decode_result(b"")
    assert decode_result(stdout).error == ErrorInfo(
        "empty_output", "the skill wrote nothing on stdout"
    )


@pytest.mark.parametrize("constant", ["NaN", "Infinity", "-Infinity"])
def test_the_non_standard_json_constants_are_refused_wherever_they_appear(constant: str) -> None:
    for stdout in (constant, f"[1, {constant}]", f'{{"x": {{"y": {constant}}}}}'):
        decoded = decode_result(stdout.encode())

        assert decoded.value is None and decoded.text is None
        assert decoded.error == ErrorInfo(
            "invalid_output", f"stdout is not valid JSON: {constant} is not a JSON value"
        )


def test_a_byte_order_mark_makes_the_result_invalid() -> None:
    error = decode_result(b"\xef\xbb\xbf{}").error

    assert error is not None
    assert error.code == "invalid_output"
    assert "BOM" in error.message


def test_invalid_json_names_the_line_and_column() -> None:
    error = decode_result(b'{\n  "a": 1,\n  "b": }').error

    assert error == ErrorInfo(
        "invalid_output", "stdout is not valid JSON: Expecting value at line 3 column 8"
    )


def test_non_utf8_stdout_names_the_first_bad_byte_of_the_trimmed_output() -> None:
    error = decode_result(b'  {"a": 1}\xff').error

    assert error == ErrorInfo("invalid_output", "stdout is not UTF-8 (byte 8)")


def test_json_nested_too_deeply_for_the_parser_is_invalid_output_not_a_crash() -> None:
    depth = 200_000
    error = decode_result(b"[" * depth + b"]" * depth).error

    assert error == ErrorInfo("invalid_output", "stdout JSON is nested too deeply")


@pytest.mark.parametrize(
    ("stdout", "value"),
    [(b"null", None), (b"false", False), (b"0", 0), (b'"text"', "text"), (b"[]", [])],
)
def test_any_single_json_value_is_a_result(stdout: bytes, value: object) -> None:
    decoded = decode_result(stdout)

    assert decoded.error is None
    assert decoded.value == value
    assert decoded.text == stdout.decode()

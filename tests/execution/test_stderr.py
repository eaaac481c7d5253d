"""stderr → timeline events as a unit: line cuts, the budget, the tail (SPEC §4).

The runner zoo feeds these rules from real children, where chunk boundaries fall wherever the
pipe puts them; here the bytes arrive in chosen pieces, so the boundaries are exact: a line
of exactly 8 KiB, a long line cut across many chunks, the last line that fits the 1 MiB budget.
"""

from __future__ import annotations

from ongrid_skills.execution.records import Event
from ongrid_skills.execution.stderr import LINE_CAP, STDERR_BUDGET, TAIL_BYTES, StderrTimeline


def timeline() -> tuple[StderrTimeline, list[Event]]:
    events: list[Event] = []
    return StderrTimeline(events.append), events


def shapes(events: list[Event]) -> list[tuple[str, dict[str, object]]]:
    return [(e.type, e.data) for e in events]


def test_the_limits_are_those_of_the_spec() -> None:
    assert (LINE_CAP, STDERR_BUDGET, TAIL_BYTES) == (8 * 1024, 1024 * 1024, 4 * 1024)


def test_lines_are_emitted_as_soon_as_their_newline_arrives_whatever_the_chunking() -> None:
    err, events = timeline()

    err.feed(b"fir")
    assert events == []
    err.feed(b"st\nsec")
    assert shapes(events) == [("stderr", {"line": "first"})]
    err.feed(b"ond\n\nthird\r\n")

    assert [e.data["line"] for e in events] == ["first", "second", "", "third"]


def test_only_one_trailing_carriage_return_is_stripped() -> None:
    err, events = timeline()

    err.feed(b"a\r\r\nb\rc\n")

    assert [e.data["line"] for e in events] == ["a\r", "b\rc"]


def test_a_line_of_exactly_the_cap_is_whole_and_one_byte_more_is_cut_and_marked() -> None:
    err, events = timeline()

    err.feed(b"a" * LINE_CAP + b"\n" + b"b" * (LINE_CAP + 1) + b"\n")

    assert shapes(events) == [
        ("stderr", {"line": "a" * LINE_CAP}),
        ("stderr", {"line": "b" * LINE_CAP, "truncated": True}),
    ]


def test_a_long_line_fed_byte_by_byte_is_cut_once_and_its_rest_skipped_to_the_newline() -> None:
    err, events = timeline()

    for byte in b"x" * (3 * LINE_CAP):
        err.feed(bytes([byte]))
    assert shapes(events) == [("stderr", {"line": "x" * LINE_CAP, "truncated": True})]
    err.feed(b"xxx\nnext\n")

    assert shapes(events)[1:] == [("stderr", {"line": "next"})]


def test_at_eof_a_last_line_without_newline_is_emitted_but_the_rest_of_a_cut_line_is_not() -> None:
    err, events = timeline()
    err.feed(b"partial")
    err.close()
    assert shapes(events) == [("stderr", {"line": "partial"})]

    err, events = timeline()
    err.feed(b"y" * (LINE_CAP + 10))
    err.close()
    assert shapes(events) == [("stderr", {"line": "y" * LINE_CAP, "truncated": True})]


def test_the_budget_lets_through_every_line_that_fits_then_one_truncated_event_then_nothing() -> (
    None
):
    err, events = timeline()
    line = b"z" * 1023  # with its newline, 1 KiB of budget per line
    for _ in range(STDERR_BUDGET // 1024):
        err.feed(line + b"\n")
    assert len(events) == STDERR_BUDGET // 1024
    assert all(e.type == "stderr" for e in events)

    err.feed(b"one too many\n")
    err.feed(b"and more\n" * 1000)
    err.close()

    assert shapes(events[-1:]) == [("stderr_truncated", {"after_bytes": STDERR_BUDGET})]
    assert len(events) == STDERR_BUDGET // 1024 + 1


def test_the_tail_keeps_the_last_4_kib_even_after_the_budget_is_spent() -> None:
    err, events = timeline()
    err.feed((b"q" * 1023 + b"\n") * (STDERR_BUDGET // 1024 + 1))
    assert events[-1].type == "stderr_truncated"
    err.feed(b"w" * 10_000)
    err.feed(b"END")
    err.close()

    tail = err.tail()
    assert len(tail) == TAIL_BYTES
    assert tail.endswith("END")
    assert tail.strip("w") == "END"


def test_a_tail_cut_inside_a_utf8_character_is_decoded_leniently() -> None:
    err, _events = timeline()
    err.feed("é".encode() * TAIL_BYTES)  # 2 bytes each: the cut may fall mid-character

    err.feed(b"!")

    assert err.tail().endswith("é!")
    assert len(err.tail().encode()) <= TAIL_BYTES + 2


def test_a_progress_object_becomes_a_progress_event_and_anything_else_stays_a_line() -> None:
    err, events = timeline()

    err.feed(
        b'{"progress": 2, "total": 4, "message": "half", "extra": 1}\n'
        b'{"progress": 1.5, "total": true, "message": 7}\n'
        b'  {"progress": 1}\n'
        b'{"progress": null}\n'
        b'["progress", 1]\n'
    )

    assert shapes(events) == [
        ("progress", {"progress": 2, "total": 4, "message": "half"}),
        ("progress", {"progress": 1.5}),
        ("stderr", {"line": '  {"progress": 1}'}),
        ("stderr", {"line": '{"progress": null}'}),
        ("stderr", {"line": '["progress", 1]'}),
    ]

"""What the chat shows of a text: control characters as visible escapes, JSON indented, long
texts folded, huge ones cut; and its page contexts say what each field is for."""

from __future__ import annotations

import dataclasses
import json

import pytest

from ongrid_skills.doors.web import chat_view
from ongrid_skills.doors.web.chat_view import FOLD_LINES, SHOWN_CHARS, shown, visible


def test_control_characters_and_bidi_overrides_are_shown_as_escapes() -> None:
    assert visible("a\x1b[31mb\x00c\x7f\u202ed\u2066e") == "a\\x1b[31mb\\x00c\\x7f\\u202ed\\u2066e"
    assert visible("line one\n\tline two") == "line one\n\tline two"


def test_json_is_indented_and_a_long_text_folds() -> None:
    small = shown('{"ok": true}')
    assert (small.text, small.is_json, small.folded) == ('{\n  "ok": true\n}', True, False)
    rows = shown(json.dumps([{"n": n} for n in range(FOLD_LINES)]))
    assert rows.is_json and rows.folded and rows.lines > FOLD_LINES
    prose = shown("not JSON: <b>\x1b")
    assert (prose.text, prose.is_json, prose.folded) == ("not JSON: <b>\\x1b", False, False)


def test_a_huge_text_is_cut_and_says_how_much_is_left_out() -> None:
    huge = shown("x" * (SHOWN_CHARS + 5))
    assert len(huge.text) == SHOWN_CHARS and huge.cut == 5 and huge.folded


@pytest.mark.parametrize(
    "context", [chat_view.ChatHome, chat_view.Conversation, chat_view.ChatCard, chat_view.Shown]
)
def test_every_field_of_a_chat_page_context_says_what_it_is_for(context: type) -> None:
    for spec in dataclasses.fields(context):
        assert spec.metadata.get("help"), f"{context.__name__}.{spec.name} has no help text"

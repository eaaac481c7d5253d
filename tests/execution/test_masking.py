"""Masking of a call's secrets: every form a skill may print them in, by a real child process.

The children are real Python processes started by the real runner; each prints the secret one
way, and the whole outcome (result, its text, the error, every event, the stderr tail) is
searched for the secret and for each of its encodings.
"""

from __future__ import annotations

import base64
import dataclasses
import json
from pathlib import Path
from urllib.parse import quote, quote_plus

import pytest

from ongrid_skills.execution.masking import MASK, Masker, forms_of
from ongrid_skills.execution.runner import SubprocessRunner
from ongrid_skills.execution.stderr import LINE_CAP, TAIL_BYTES
from tests.support.runner import Call, canonical_dir, python_skill, run_call

SECRET = 'tok-3f9A/b+c=d"e\\é-0042'
ENCODINGS = {
    "raw": SECRET,
    "json": json.dumps(SECRET)[1:-1],
    "json_ascii": json.dumps(SECRET, ensure_ascii=True)[1:-1],
    "url": quote(SECRET, safe=""),
    "url_plus": quote_plus(SECRET),
    "base64": base64.b64encode(SECRET.encode()).decode(),
    "base64_url": base64.urlsafe_b64encode(SECRET.encode()).decode().rstrip("="),
}


def everything(call: Call) -> str:
    """All a consumer of the call can see, as one text."""
    outcome = dataclasses.asdict(call.outcome)
    outcome["stdout"] = call.outcome.stdout.decode("utf-8", "replace")
    return json.dumps(
        {"outcome": outcome, "events": [(e.type, e.data) for e in call.events]},
        default=str,
        ensure_ascii=False,
    )


def assert_nowhere(call: Call) -> None:
    seen = everything(call)
    for name, form in ENCODINGS.items():
        assert form not in seen, f"the secret's {name} form leaked: {form}"
    assert json.dumps(SECRET)[1:-1] not in seen


def masked_call(tmp_path: Path, code: str) -> Call:
    root = canonical_dir(tmp_path / "skills")
    spec = python_skill(root, "import sys, json, base64, urllib.parse\n" + code)
    spec = dataclasses.replace(spec, env={"TOKEN": SECRET}, masker=Masker([SECRET]))
    return run_call(SubprocessRunner(), spec)


PRINTS = {
    "as_the_result": 'import os; print(json.dumps({"token": os.environ["TOKEN"]}))',
    "inside_a_json_string": (
        'import os; print(json.dumps({"msg": "the token is " + os.environ["TOKEN"] + "!"}))'
    ),
    "escaped_unicode": (
        'import os; print(json.dumps({"t": os.environ["TOKEN"]}, ensure_ascii=True)'
        '.replace("tok", "\\\\u0074ok"))'
    ),
    "base64_encoded": (
        'import os; print(json.dumps(base64.b64encode(os.environ["TOKEN"].encode()).decode()))'
    ),
    "base64_in_a_basic_header": (
        'import os; v = base64.b64encode(("admin:" + os.environ["TOKEN"]).encode()).decode()\n'
        'print(json.dumps({"header": "Basic " + v}))'
    ),
    "url_encoded": (
        'import os; q = urllib.parse.quote(os.environ["TOKEN"], safe="")\n'
        'print(json.dumps({"url": "https://api/x?token=" + q}))'
    ),
    "on_stderr_in_pieces": (
        'import os, time; t = os.environ["TOKEN"]\n'
        "for part in (t[:5], t[5:11], t[11:] + '\\n'):\n"
        "    sys.stderr.write(part); sys.stderr.flush(); time.sleep(0.01)\n"
        'print("{}")'
    ),
    "in_a_progress_message": (
        'import os; t = os.environ["TOKEN"]\n'
        'sys.stderr.write(json.dumps({"progress": 1, "message": t}, ensure_ascii=True)'
        '.replace("tok", "\\\\u0074ok") + "\\n")\n'
        'print("{}")'
    ),
    "in_an_error_message": (
        'import os; sys.stderr.write("auth failed with " + os.environ["TOKEN"] + "\\n")\n'
        'print(json.dumps({"error": "denied for " + os.environ["TOKEN"]})); sys.exit(3)'
    ),
    "as_stdout_that_is_not_json": 'import os; print("token=" + os.environ["TOKEN"])',
}


@pytest.mark.parametrize("how", sorted(PRINTS))
def test_a_secret_printed_by_the_skill_reaches_no_consumer(tmp_path: Path, how: str) -> None:
    call = masked_call(tmp_path, PRINTS[how])
    assert_nowhere(call)
    assert MASK in everything(call)


def test_a_masked_result_is_still_the_json_the_skill_meant(tmp_path: Path) -> None:
    call = masked_call(tmp_path, PRINTS["inside_a_json_string"])
    assert call.outcome.result == {"msg": f"the token is {MASK}!"}
    assert json.loads(call.outcome.result_text or "") == call.outcome.result


def test_a_secret_at_the_cut_of_a_long_stderr_line_leaves_no_part_of_it(tmp_path: Path) -> None:
    pad = LINE_CAP - 7  # the secret starts 7 bytes before the cut
    call = masked_call(
        tmp_path,
        f'import os; sys.stderr.write("x" * {pad} + os.environ["TOKEN"] + "y" * 100 + "\\n")\n'
        'print("{}")',
    )
    lines = [e.data for e in call.events if e.type == "stderr"]
    assert lines[0]["truncated"] is True
    assert not lines[0]["line"].endswith(SECRET[:3])
    assert_nowhere(call)


def test_a_secret_at_the_start_of_the_stderr_tail_leaves_no_part_of_it(tmp_path: Path) -> None:
    # The tail is the last 4 KiB: the secret ends 5 bytes after the tail's first byte.
    after = TAIL_BYTES - 5
    call = masked_call(
        tmp_path,
        f'import os; sys.stderr.write(os.environ["TOKEN"] + "z" * {after}); print("{{}}")',
    )
    assert not call.outcome.stderr_tail.startswith(SECRET[-5:])
    assert len(call.outcome.stderr_tail) <= TAIL_BYTES
    assert_nowhere(call)


def test_a_call_without_secrets_is_left_as_written(tmp_path: Path) -> None:
    root = canonical_dir(tmp_path / "skills")
    spec = python_skill(root, f"import sys; sys.stderr.write({SECRET!r} + '\\n'); print('{{}}')")
    call = run_call(SubprocessRunner(), spec)
    assert call.stderr_lines() == [SECRET]


def test_the_forms_of_a_secret_include_each_base64_alignment() -> None:
    forms = forms_of("correct-horse")
    for prefix in (b"", b"a", b"ab"):
        encoded = base64.b64encode(prefix + b"correct-horse" + b"!")
        assert any(form in encoded for form in forms), prefix


def test_a_masker_refuses_a_secret_too_short_to_mask() -> None:
    with pytest.raises(ValueError, match="at least 6"):
        Masker(["12345"])
    assert Masker.of([]) is None


PEM = (
    "-----BEGIN PRIVATE KEY-----\n"
    "MIIEvQIBADANBgkqhkiG9w0BAQEFAASCBKcwggSjAgEAAoIBAQC7\n"
    "q2Zk9e3r1W0pTn5ZxYv8s1Lm4dQhJ7cRb6Yt0uVnA2fK9gH3iE5o\n"
    "-----END PRIVATE KEY-----"
)


def test_a_multi_line_secret_printed_on_stderr_is_masked_line_by_line(tmp_path: Path) -> None:
    root = canonical_dir(tmp_path / "skills")
    spec = python_skill(
        root, "import os, sys\nsys.stderr.write(os.environ['KEY'] + '\\n')\nprint('{}')"
    )
    spec = dataclasses.replace(spec, env={"KEY": PEM}, masker=Masker([PEM]))
    call = run_call(SubprocessRunner(), spec)
    seen = everything(call)
    for line in PEM.splitlines()[1:-1]:
        assert line not in seen
    assert call.stderr_lines()[1] == "***"


def test_the_stderr_tail_never_starts_with_the_end_of_a_secret(tmp_path: Path) -> None:
    token = "uperSecretToken_0123456789abcdefghijklmX"  # 40 characters
    for pad in (0, 1, 7, 39, 40):
        root = canonical_dir(tmp_path / f"skills-{pad}")
        code = (
            "import os, sys\nt = os.environ['T']\n"
            f"sys.stderr.write((t + '\\n') * 150 + 'p' * {pad})\nprint('{{}}')"
        )
        spec = dataclasses.replace(
            python_skill(root, code), env={"T": token}, masker=Masker([token])
        )
        tail = run_call(SubprocessRunner(), spec).outcome.stderr_tail
        assert token[1:10] not in tail and token[-12:] not in tail, (pad, tail[:60])


ESCAPED = {
    "php_slashes": json.dumps(SECRET)[1:-1].replace("/", "\\/"),
    "upper_hex": json.dumps(SECRET)[1:-1].replace("\\u00e9", "\\u00E9"),
    "go_html": json.dumps("a&b<c>" + SECRET)[1:-1]
    .replace("&", "\\u0026")
    .replace("<", "\\u003c")
    .replace(">", "\\u003e"),
    "every_char_escaped": "".join(f"\\u{ord(c):04x}" for c in SECRET),
    "encode_uri_component": quote(SECRET, safe="!'()*~"),
}


@pytest.mark.parametrize("how", sorted(ESCAPED))
def test_a_secret_escaped_by_another_encoder_on_stderr_is_masked(tmp_path: Path, how: str) -> None:
    text = ESCAPED[how]
    line = (
        json.dumps({"msg": "x"}).replace('"x"', f'"{text}"')
        if how != "encode_uri_component"
        else text
    )
    call = masked_call(tmp_path, f"sys.stderr.write({line!r} + '\\n'); print('{{}}')")
    seen = call.stderr_lines()[0]
    assert text not in seen and SECRET not in json.dumps(seen, ensure_ascii=False)
    assert "***" in seen

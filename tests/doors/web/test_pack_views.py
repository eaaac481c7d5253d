"""What the packs page says of a change and of a refusal: a sentence per action, and each
error's stable code, its REST status and every problem on a line of its own."""

from __future__ import annotations

from ongrid_skills.doors.web.pack_views import done, refusal
from ongrid_skills.errors import (
    Conflict,
    DigestMismatch,
    PackError,
    PackProblem,
    SkillCollision,
    UnsafePack,
    UntrustedPack,
)
from ongrid_skills.packs.install import Outcome
from ongrid_skills.packs.records import InstalledVersion


def record(version: str, signer: str | None = "SHA256:abc") -> InstalledVersion:
    return InstalledVersion(
        pack_id="probe",
        version=version,
        digest="sha256:" + "1" * 64,
        source="upload:probe.tar.gz",
        signer=signer,
        trust="trusted" if signer else "unsigned",
        layout="pack",
        description="d",
        homepage=None,
        skills=("probe_ping",),
        personas=("oncall",),
        keep_seconds=60,
        installed_by="admin",
        installed_at=0.0,
    )


def test_each_action_reads_as_a_sentence_with_what_it_brought() -> None:
    cases = {
        Outcome("install", "probe", "1.0.0", None, record("1.0.0")): "Installed probe 1.0.0.",
        Outcome("upgrade", "probe", "1.1.0", "1.0.0", record("1.1.0")): (
            "Upgraded probe from 1.0.0 to 1.1.0."
        ),
        Outcome("downgrade", "probe", "0.9.0", "1.0.0", record("0.9.0")): (
            "Changed probe from 1.0.0 to the older 0.9.0."
        ),
        Outcome("rollback", "probe", "1.0.0", "1.1.0", record("1.0.0")): (
            "Rolled probe back from 1.1.0 to 1.0.0."
        ),
        Outcome("unchanged", "probe", "1.0.0", "1.0.0", record("1.0.0")): (
            "probe 1.0.0 was already the active version: nothing changed."
        ),
    }
    for outcome, sentence in cases.items():
        shown = done(outcome)
        assert shown.sentence == sentence
        assert (shown.skills, shown.personas, shown.trust) == (
            ("probe_ping",),
            ("oncall",),
            "trusted",
        )


def test_a_removal_brings_nothing_and_says_which_version_left() -> None:
    shown = done(Outcome("remove", "probe", None, "1.0.0", record("1.0.0"), ("a warning",)))
    assert shown.sentence.startswith("Removed probe 1.0.0: ")
    assert (shown.skills, shown.trust, shown.warnings) == ((), None, ("a warning",))


def test_a_collision_lists_each_name_and_where_the_loaded_one_comes_from() -> None:
    exc = SkillCollision(
        "ops@1.0.0", [("skill", "host_info", "external"), ("persona", "oncall", "pack:x")]
    )
    shown = refusal(exc)
    assert (shown.code, shown.status) == ("skill_collision", 409)
    assert shown.summary == "pack ops@1.0.0 collides with what is loaded"
    assert shown.lines == [
        "skill 'host_info': already loaded (external)",
        "persona 'oncall': already loaded (pack:x)",
    ]


def test_a_pack_with_problems_lists_each_as_the_linter_prints_it() -> None:
    problems = [
        PackProblem("pack.json", "missing 'version'", 1, 2),
        PackProblem("skills/a/skill.json", "unknown key", 3, 4, "warning"),
    ]
    shown = refusal(PackError("pack ops is not valid", problems))
    assert (shown.code, shown.status, shown.summary) == (
        "invalid_pack",
        400,
        "pack ops is not valid",
    )
    assert shown.lines == [
        "pack.json:1:2: error: missing 'version'",
        "skills/a/skill.json:3:4: warning: unknown key",
    ]


def test_other_refusals_carry_their_code_status_and_message() -> None:
    cases = [
        (UnsafePack("../x", "a '..' component leaves the pack"), "unsafe_pack", 400),
        (UntrustedPack("not signed by a trusted key"), "untrusted_pack", 403),
        (DigestMismatch("not the index's digest"), "digest_mismatch", 502),
        (Conflict("another pack change is in progress"), "conflict", 409),
    ]
    for exc, code, status in cases:
        shown = refusal(exc)
        assert (shown.code, shown.status, shown.summary, shown.lines) == (
            code,
            status,
            exc.message,
            [],
        )

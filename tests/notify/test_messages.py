"""The webhook body of an approval event: Slack's and Mattermost's incoming-webhook shape, the
link to the request's page, and values people typed kept from forging links, mentions or code."""

from __future__ import annotations

import json
from typing import Any

import pytest

from ongrid_skills.execution.digests import args_digest
from ongrid_skills.notify.events import KINDS, ApprovalEvent
from ongrid_skills.notify.messages import PREVIEW_CHARS, message
from ongrid_skills.store.approvals import Approval, Signature

PUBLIC = "https://ops.example.org/console"
EXPIRES = 1_767_268_800.0  # 2026-01-01 12:00:00 UTC


def approval(**changes: Any) -> Approval:
    base: dict[str, Any] = {
        "id": "a1b2c3",
        "execution_id": "e4f5",
        "skill": "restart_service",
        "skill_class": "dangerous",
        "args": {"host": "db-01", "service": "postgres"},
        "definition_hash": "d" * 64,
        "persona": "ops_responder",
        "requested_by": "olga",
        "signatures_required": 2,
        "status": "pending",
        "created_at": EXPIRES - 3600,
        "expires_at": EXPIRES,
    }
    base.update(changes)
    return Approval(**base)


def fields(body: dict[str, Any]) -> dict[str, str]:
    section = body["blocks"][0]
    return {
        f["text"].split("\n", 1)[0].strip("*"): f["text"].split("\n", 1)[1]
        for f in section["fields"]
    }


def test_a_request_becomes_text_plus_one_section_of_mrkdwn_fields_linking_to_its_page() -> None:
    body = message(ApprovalEvent("requested", approval(), "olga"), PUBLIC)

    assert set(body) == {"text", "blocks"}
    link = "https://ops.example.org/console/approvals/a1b2c3"
    assert body["text"] == (
        "Approval requested: restart_service (dangerous) requested by olga as ops_responder, "
        f"0/2 signatures. {link}"
    )
    [section] = body["blocks"]
    assert section["type"] == "section"
    assert section["text"] == {
        "type": "mrkdwn",
        "text": f"*Approval requested*: <{link}|restart_service>",
    }
    assert all(f["type"] == "mrkdwn" for f in section["fields"])
    assert fields(body) == {
        "Skill": "`restart_service`",
        "Class": "dangerous",
        "Status": "pending",
        "Requested by": "olga",
        "Persona": "ops_responder",
        "Signatures": "0/2",
        "Expires": "2026-01-01 12:00:00 UTC",
        "Args": '`{"host":"db-01","service":"postgres"}`\nsha256 '
        + args_digest({"host": "db-01", "service": "postgres"})[:16],
    }


def test_a_signature_names_the_signer_the_count_so_far_and_the_comment() -> None:
    signed = approval(signatures=[Signature("ada", "admin", "approve", EXPIRES - 60)])
    body = message(ApprovalEvent("signed", signed, "ada", "ticket OPS-42"), PUBLIC)

    assert body["text"].startswith("Approval signed by ada: restart_service (dangerous)")
    assert "1/2 signatures" in body["text"]
    assert fields(body)["Signatures"] == "1/2: ada"
    assert fields(body)["Comment"] == "ticket OPS-42"


@pytest.mark.parametrize(
    ("kind", "status", "actor", "title"),
    [
        ("approved", "approved", "bob", "Approved by bob"),
        ("rejected", "rejected", "bob", "Rejected by bob"),
        ("expired", "expired", "manager", "Approval expired"),
        ("void", "void", "manager", "Approval void"),
        ("cancelled", "cancelled", "olga", "Approval cancelled by olga"),
    ],
)
def test_a_request_that_ended_says_how_and_shows_no_expiry(
    kind: str, status: str, actor: str, title: str
) -> None:
    body = message(ApprovalEvent(kind, approval(status=status), actor, "why it ended"), PUBLIC)

    assert body["text"].startswith(f"{title}: restart_service")
    assert body["blocks"][0]["text"]["text"].startswith(f"*{title}*: <")
    shown = fields(body)
    assert shown["Status"] == status
    assert "Expires" not in shown
    assert shown.get("Reason", shown.get("Comment")) == "why it ended"


def test_every_kind_of_event_has_a_title_of_its_own() -> None:
    titles = {
        message(ApprovalEvent(kind, approval(), "ada"), PUBLIC)["text"].split(":")[0]
        for kind in KINDS
    }
    assert len(titles) == len(KINDS)


def test_a_comment_cannot_forge_a_link_a_channel_mention_or_formatting() -> None:
    hostile = "<!channel> see <https://evil.example|the runbook> & @all\n\n*now*"
    body = message(ApprovalEvent("rejected", approval(status="rejected"), "bob", hostile), PUBLIC)

    reason = fields(body)["Reason"]
    assert reason == (
        "&lt;!channel&gt; see &lt;https://evil.example|the runbook&gt; &amp; @all *now*"
    )
    raw = json.dumps(body)
    assert "<!channel>" not in raw
    assert "<https://evil" not in raw
    assert "evil" not in body["text"]  # the fallback text carries no typed text at all


def test_a_name_with_an_at_sign_mentions_nobody_in_the_fallback_text() -> None:
    body = message(ApprovalEvent("requested", approval(requested_by="@channel"), "x"), PUBLIC)
    assert "@channel" not in body["text"]
    assert "@\u200bchannel" in body["text"]


def test_args_are_a_short_preview_with_secret_looking_values_masked() -> None:
    args = {"password": "hunter2", "api_key": "k-123", "target": "db-01", "blob": "x" * 5000}
    body = message(ApprovalEvent("requested", approval(args=args), "olga"), PUBLIC)

    preview = fields(body)["Args"].split("\n")[0]
    raw = json.dumps(body)
    assert "hunter2" not in raw
    assert "k-123" not in raw
    assert '"target":"db-01"' in preview
    assert len(preview) <= PREVIEW_CHARS + 2  # the two backticks
    assert preview.endswith("…`")


@pytest.mark.parametrize(
    "args",
    [
        {"password": 424242424242},
        {"API_KEY": ["k-secret-1", "k-secret-2"]},
        {"client_secret": {"inner": "k-secret-3"}},
        {"hosts": [{"name": "a", "Access_Token": "k-secret-4"}]},
        {"passwd": 'quote"d-k-secret-5\\"'},
        {"Db-Password": "caf\u00e9-k-secret-6-\u2603"},
        {"headers": {"Authorization": "Bearer k-secret-7"}},
        {"nested": {"deeper": {"token": {"v": [1, "k-secret-8"]}}}},
        {"db_token": True},
    ],
)
def test_a_secret_looking_key_masks_its_whole_value_in_the_preview(args: dict[str, Any]) -> None:
    body = message(ApprovalEvent("requested", approval(args=args), "olga"), PUBLIC)

    preview = fields(body)["Args"].split("\n")[0]
    raw = json.dumps(body, ensure_ascii=False)
    for secret in ("424242424242", "k-secret", "True", "true"):
        assert secret not in raw
        assert secret not in json.dumps(body)
    assert '"[REDACTED]"' in preview


def test_a_backtick_in_the_args_cannot_close_the_code_span() -> None:
    args = {"cmd": "echo `id` <b>"}
    preview = fields(message(ApprovalEvent("requested", approval(args=args), "o"), PUBLIC))["Args"]
    code = preview.split("\n")[0]
    assert code.count("`") == 2
    assert code == '`{"cmd":"echo \'id\' &lt;b&gt;"}`'


def test_the_link_stays_one_link_whatever_the_public_url_holds() -> None:
    body = message(ApprovalEvent("requested", approval(), "olga"), "https://ops.example.org/a|b>c")
    link = body["blocks"][0]["text"]["text"].split("<", 1)[1].split("|", 1)[0]
    assert link == "https://ops.example.org/a%7Cb%3Ec/approvals/a1b2c3"


def test_hostile_sizes_stay_within_slacks_limits() -> None:
    huge = "y" * 100_000
    event = ApprovalEvent(
        "rejected",
        approval(args={"k": huge}, persona="p" * 300, requested_by="r" * 300, status="rejected"),
        "bob",
        huge,
    )
    section = message(event, PUBLIC)["blocks"][0]
    assert len(section["fields"]) <= 10
    assert all(len(f["text"]) <= 2000 for f in section["fields"])
    assert len(section["text"]["text"]) <= 3000


def test_an_install_skill_request_names_its_pack_signer_and_skills() -> None:
    pack = {
        "id": "ops-basics",
        "version": "1.0.0",
        "digest": "sha256:" + "c" * 64,
        "signer": {"key": "SHA256:abc", "trust": "trusted", "trusted": True},
        "skills": [{"name": "host_info", "class": "safe"}],
        "personas": [{"name": "oncall", "permission_mode": "read-only"}],
    }
    found = approval(skill="install_skill", preview={"pack": pack})

    body = message(ApprovalEvent("requested", found, "olga"), PUBLIC)

    assert fields(body)["Pack"] == (
        f"ops-basics@1.0.0 sha256:{'c' * 64}, signer SHA256:abc (trusted); "
        "skills: host_info (safe); personas: oncall (read-only)"
    )


def test_a_request_asked_by_a_trigger_names_its_alert_escaped() -> None:
    context = {
        "trigger": "am",
        "alert": {"status": "firing", "labels": {"alertname": "HostDown", "instance": "<!here>"}},
    }
    body = message(ApprovalEvent("requested", approval(context=context), "trigger:am"), PUBLIC)
    assert fields(body)["Alert"] == "firing: alertname=HostDown, instance=&lt;!here&gt;"
    assert "<!here>" not in json.dumps(body)

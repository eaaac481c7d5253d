"""An approval event → the JSON body of a Slack or Mattermost incoming webhook.

The body is ``{"text": …, "blocks": [one section]}``. Slack shows the section (its mrkdwn text
and up to ten fields) and uses ``text`` for the notification itself; Mattermost ignores
``blocks`` and shows ``text``, which therefore says everything that matters on its own: what
happened, the skill and its class, who asked, the signatures so far, and the link to the request's
page, ``<public URL>/approvals/<id>``. The reviewer's opinion, when there is one, is a field of the
section, cut to :data:`NOTE_CHARS`; so is the skill's preview (SPEC §20: what the call would do,
or that its preview failed), cut to :data:`PREVIEW_RESULT_CHARS` and masked again.

Values that people typed (comments, reasons, args) reach the section only, escaped for mrkdwn
(``&``, ``<``, ``>``: no link, mention or ``<!channel>`` can be forged) and cut short; the args are
a short preview with the values of secret-looking keys masked (whatever their type), and their
digest. ``text`` holds names only, with ``@`` defused so that no name can mention a channel. This
module builds data; it must never send anything.
"""

from __future__ import annotations

import json
import urllib.parse
from datetime import UTC, datetime
from typing import Any

from ongrid_skills.builtins.redact import mask_secrets, redact
from ongrid_skills.execution.digests import args_digest
from ongrid_skills.notify.events import ApprovalEvent
from ongrid_skills.store.approvals import Review

#: At most this many characters of the args preview and of a comment or reason.
PREVIEW_CHARS = 200
NOTE_CHARS = 300
#: At most this many characters of the pack line of an install_skill request.
PACK_CHARS = 800
#: At most this many characters of a request's preview (its dry run's result, or its failure).
PREVIEW_RESULT_CHARS = 500

_TITLES = {
    "requested": "Approval requested",
    "signed": "Approval signed by {actor}",
    "approved": "Approved by {actor}",
    "rejected": "Rejected by {actor}",
    "expired": "Approval expired",
    "void": "Approval void",
    "cancelled": "Approval cancelled by {actor}",
    "reviewed": "Reviewed by {actor}",
    "previewed": "Preview ready",
}
_NOTE_LABELS = {"signed": "Comment", "approved": "Comment"}  # else the reason it ended


def request_link(public_url: str, approval_id: str) -> str:
    """The request's page in the console, quoted so that it stays one mrkdwn link."""
    return urllib.parse.quote(f"{public_url}/approvals/{approval_id}", safe=":/?#[]@!$&'()*+,;=%~")


def message(event: ApprovalEvent, public_url: str) -> dict[str, Any]:
    """The webhook body for ``event``: ``text`` plus one section block with fields."""
    approval = event.approval
    link = request_link(public_url, approval.id)
    title = _TITLES.get(event.kind, event.kind).format(actor=_plain(event.actor))
    signers = [s.principal for s in approval.approvals]
    count = f"{len(signers)}/{approval.signatures_required}"
    who = _plain(approval.requested_by)
    persona = f" as {_plain(approval.persona)}" if approval.persona else ""
    summary = (
        f"{title}: {_plain(approval.skill)} ({approval.skill_class}) requested by {who}{persona}, "
        f"{count} signatures"
    )
    fields = [
        ("Skill", f"`{_code(approval.skill)}`"),
        ("Class", approval.skill_class),
        ("Status", approval.status),
        ("Requested by", _mrkdwn(approval.requested_by)),
        ("Persona", _mrkdwn(approval.persona) if approval.persona else "none"),
        ("Signatures", f"{count}" + (f": {_mrkdwn(', '.join(signers))}" if signers else "")),
    ]
    if approval.status == "pending":
        fields.append(("Expires", _utc(approval.expires_at)))
    if approval.credentials:  # names only: which stored credential each slot will use
        names = ", ".join(f"{slot}={name}" for slot, name in sorted(approval.credentials.items()))
        fields.append(("Credentials", _mrkdwn(names)))
    if approval.review is not None:  # the reviewer's opinion, cut short (the card has it all)
        fields.append(("Reviewer", _mrkdwn(review_line(approval.review))))
    alert = (approval.context or {}).get("alert")
    if isinstance(alert, dict):  # asked by a trigger: which alert, for the signers
        labels = alert.get("labels") or {}
        named = ", ".join(f"{k}={v}" for k, v in sorted(labels.items()) if isinstance(v, str))
        fields.append(("Alert", _mrkdwn(_cut(f"{alert.get('status', '?')}: {named}", NOTE_CHARS))))
    preview, digest = args_preview(approval.args), args_digest(approval.args)[:16]
    fields.append(("Args", f"`{_code(preview)}`\nsha256 {digest}"))
    pack = (approval.preview or {}).get("pack")
    if isinstance(pack, dict):  # install_skill: what the pack brings, as checked at request time
        fields.append(("Pack", _mrkdwn(pack_line(pack))))
    run = (approval.preview or {}).get("run")
    if isinstance(run, dict):  # the skill's dry run: what the call would do (the card has it all)
        fields.append(("Preview", f"```{_code(preview_line(run))}```"))
    if event.note and event.kind != "previewed":  # a preview's note is its field above
        label = _NOTE_LABELS.get(event.kind, "Reason")
        fields.append((label, _mrkdwn(_cut(" ".join(event.note.split()), NOTE_CHARS))))
    section = {
        "type": "section",
        "text": {"type": "mrkdwn", "text": f"*{title}*: <{link}|{_mrkdwn(approval.skill)}>"},
        "fields": [{"type": "mrkdwn", "text": f"*{name}*\n{value}"} for name, value in fields],
    }
    return {"text": f"{summary}. {link}", "blocks": [section]}


def review_line(review: Review) -> str:
    """The reviewer's opinion in one short line: its persona, its decision (or failure), the
    start of what it wrote; the opinion was masked when it was attached, and is again here."""
    if review.status == "reviewing":
        head = f"{review.persona} is reading the request"
    elif review.decision:
        counted = "counted as the confirmation" if review.counted else "advice"
        head = f"{review.persona} advises to {review.decision} ({counted})"
    else:
        head = f"{review.persona}: {review.note or 'no opinion'}"
    opinion = " ".join(redact(review.opinion or "").split())
    return _cut(f"{head}: {opinion}" if opinion else head, NOTE_CHARS)


def preview_line(run: dict[str, Any]) -> str:
    """A request's preview, short: running, its result (masked again, one line), or failed."""
    if run.get("status") == "running":
        return "running"
    if run.get("status") == "done":
        return _cut(" ".join(redact(str(run.get("result") or "")).split()), PREVIEW_RESULT_CHARS)
    error = run.get("error") or {}
    said = redact(f"failed ({error.get('code')}): {error.get('message')}")
    return _cut(" ".join(said.split()), PREVIEW_RESULT_CHARS)


def pack_line(pack: dict[str, Any]) -> str:
    """One line of an install_skill request's pack: id@version, signer, what it brings."""
    signer = pack.get("signer") or {}
    trust = f"{signer.get('key')} ({signer.get('trust')})" if signer.get("key") else "unsigned"
    skills = ", ".join(f"{s.get('name')} ({s.get('class')})" for s in pack.get("skills") or [])
    personas = ", ".join(
        f"{p.get('name')} ({p.get('permission_mode')})" for p in pack.get("personas") or []
    )
    line = f"{pack.get('id')}@{pack.get('version')} {pack.get('digest')}, signer {trust}"
    line += f"; skills: {skills or 'none'}"
    if personas:
        line += f"; personas: {personas}"
    return _cut(line, PACK_CHARS)


def args_preview(args: Any) -> str:
    """Compact JSON of the args, cut to PREVIEW_CHARS. Masked on the parsed value, never on its
    text: a secret-looking key's value is masked whole, whatever its type (see mask_secrets)."""
    text = json.dumps(mask_secrets(args), ensure_ascii=False, separators=(",", ":"), default=str)
    return _cut(text, PREVIEW_CHARS)


def _cut(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _mrkdwn(text: str) -> str:
    """Text shown as is: the three characters Slack's mrkdwn gives meaning to are escaped."""
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def _code(text: str) -> str:
    """Text inside a code span: escaped, and no backtick to close the span early."""
    return _mrkdwn(text).replace("`", "'")


def _plain(text: str) -> str:
    """A name in ``text``, read by Slack (mrkdwn) and Mattermost (Markdown): escaped, and an
    ``@`` followed by a zero-width space, so that ``@channel`` or ``@all`` mention nobody."""
    return _mrkdwn(text).replace("@", "@\u200b")


def _utc(ts: float) -> str:
    return datetime.fromtimestamp(ts, UTC).strftime("%Y-%m-%d %H:%M:%S UTC")

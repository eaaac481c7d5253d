"""The preview of a request (SPEC §20): what the call *would* do, attached for its signers.

A request for a skill that declares a preview is written with ``preview.run`` = ``running``; the
manager that made it runs the preview at once (``Calls.preview``, the launch path of every call)
and hands its outcome here, which records it on the request (``done`` with the result, or
``failed`` with why), in the audit (``approval.previewed``) and tells the feed and the listeners
(kind ``previewed``). The rules, enforced here:

- A preview is information. Recording it never signs, approves or runs anything, whatever it
  says, and a failed preview leaves the request pending as it was.
- It is bound to its request: each request runs its own, and a finished preview is never
  replaced (the first record stands).
- What it printed was masked by the runner like any call's output (credential values), and is
  bounded here: :data:`PREVIEW_CHARS` of the result, :data:`TAIL_CHARS` of stderr.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ongrid_skills.approvals.ledger import Ledger
from ongrid_skills.execution.records import ErrorInfo, Execution, Status, iso
from ongrid_skills.store import Store

#: At most this many characters of a preview's result are kept (the rest is cut and marked).
PREVIEW_CHARS = 16 * 1024
#: At most this many characters of its stderr tail (shown when it failed).
TAIL_CHARS = 2048
#: What the audit keeps of the result.
AUDIT_CHARS = 4096
#: Why a preview still running when its manager stopped ends failed.
ABANDONED = "the manager stopped while the preview ran"


def previewing(now: float, timeout_seconds: int) -> dict[str, Any]:
    """``preview.run`` of a request whose preview has just started."""
    return {"status": "running", "started_at": iso(now), "timeout_seconds": timeout_seconds}


def outcome(run: Execution, started: dict[str, Any]) -> dict[str, Any]:
    """``preview.run`` once the preview ended: ``done`` with its result (the JSON text the
    skill printed, cut to :data:`PREVIEW_CHARS`), or ``failed`` with its error."""
    text = run.result_text or ""
    record: dict[str, Any] = {
        **started,
        "status": "done" if run.status is Status.SUCCEEDED else "failed",
        "outcome": run.status.value,
        "finished_at": iso(run.finished_at),
        "duration_ms": run.duration_ms,
    }
    if run.status is Status.SUCCEEDED:
        record["result"] = _cut(text, PREVIEW_CHARS)
        record["truncated"] = len(text) > PREVIEW_CHARS
    else:
        error = run.error
        record["error"] = (
            {"code": error.code, "message": _cut(error.message, TAIL_CHARS)}
            if error is not None
            else {"code": run.status.value, "message": f"the preview ended {run.status.value}"}
        )
        if run.stderr_tail:
            record["stderr_tail"] = run.stderr_tail[-TAIL_CHARS:]
    return record


def preview_text(run: dict[str, Any]) -> str:
    """A finished preview in plain words: its result, or ``preview failed (code): message``."""
    status = run.get("status")
    if status == "running":
        return "preview running"
    if status == "done":
        return str(run.get("result") or "")
    error = run.get("error") or {}
    return f"preview failed ({error.get('code')}): {error.get('message')}"


class Previews:
    """Records the previews of requests; decides nothing about the requests themselves."""

    def __init__(self, store: Store, ledger: Ledger, *, clock: Callable[[], float]) -> None:
        self.store = store
        self.ledger = ledger
        self.clock = clock

    def attach(self, approval_id: str, run: Execution) -> None:
        """Record the ended preview ``run`` on its request, once; tell who listens."""
        approval = self.store.approvals.get(approval_id)
        started = (approval.preview or {}).get("run") if approval is not None else None
        if approval is None or not isinstance(started, dict):
            return
        if run.finished_at is None:
            run.finished_at = self.clock()
        record = outcome(run, started)
        with self.store.tx() as conn:
            if not self.store.approvals.finish_preview(conn, approval_id, record):
                return
            self.store.audit.append(
                conn,
                "manager",
                "approval.previewed",
                approval_id,
                {
                    "execution_id": approval.execution_id,
                    "skill": approval.skill,
                    "status": record["status"],
                    "outcome": record["outcome"],
                    **({"error": record["error"]["code"]} if "error" in record else {}),
                    "result": _cut(record.get("result") or "", AUDIT_CHARS),
                },
            )
        self.ledger.tell("previewed", approval_id, "manager", preview_text(record))

    def abandoned(self) -> int:
        """End as failed every preview still running on a pending request (a manager that
        stopped while it ran); return how many. Only for the one manager of a data dir."""
        count = 0
        for approval in self.store.approvals.with_status("pending"):
            run = (approval.preview or {}).get("run")
            if isinstance(run, dict) and run.get("status") == "running":
                ended = Execution(skill=approval.skill, args=approval.args)
                ended.status = Status.INTERRUPTED
                ended.finished_at = self.clock()
                ended.error = ErrorInfo("interrupted", ABANDONED)
                self.attach(approval.id, ended)
                count += 1
        return count


def _cut(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"

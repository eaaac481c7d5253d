"""What a trigger or a schedule started, once it ended, as a message for the approval
webhooks' channels (Slack or Mattermost incoming webhooks: ``{"text", "blocks"}``).

The text names the trigger or schedule, what it started and how that ended; the body of the
section holds the call's result or the agent's final answer, cut short and escaped for mrkdwn
(values come from skills and models: no link or mention can be forged). It waits for the end
in the background and never raises into the caller.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging

from ongrid_skills.agent.kernel import AgentService
from ongrid_skills.manager import Manager
from ongrid_skills.notify.events import Notice

LOG = logging.getLogger("ongrid_skills.automation")
TEXT_CHARS = 2500


def escape(text: str) -> str:
    """mrkdwn-safe: ``&``, ``<``, ``>`` escaped, ``@`` defused (no mention), cut short."""
    text = text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    text = text.replace("@", "@\u200b")
    return text if len(text) <= TEXT_CHARS else text[: TEXT_CHARS - 1] + "…"


def notice(
    actor: str, subject: str, what: str, status: str, detail: str, execution_id: str | None
) -> Notice:
    title = f"{actor}: {what} {status}"
    section = {
        "type": "section",
        "text": {"type": "mrkdwn", "text": f"*{escape(title)}*\n{escape(detail)}"},
    }
    return Notice(
        action=f"{actor.split(':', 1)[0]}.outcome",
        subject=subject,
        body={"text": escape(title), "blocks": [section]},
        execution_id=execution_id,
    )


def post_when_done(
    manager: Manager, agents: AgentService | None, actor: str, subject: str, kind: str, target: str
) -> asyncio.Task[None] | None:
    """Post the outcome of call or run ``target`` once it ended (nothing without webhooks)."""
    if manager.post_notice is None:
        return None
    return asyncio.get_running_loop().create_task(
        _post(manager, agents, actor, subject, kind, target)
    )


async def _post(
    manager: Manager, agents: AgentService | None, actor: str, subject: str, kind: str, target: str
) -> None:
    try:
        if kind == "run" and agents is not None:
            record = await agents.finished(target)
            what = f"agent run {target} as {record.persona}"
            body = record.final_answer or (record.error.message if record.error else "")
            message = notice(actor, subject, what, record.status.value, body, None)
        else:
            task = manager.tasks.get(target)
            if task is not None:
                with contextlib.suppress(Exception):
                    await asyncio.shield(task)
            execution = manager.get(target)
            if execution.error is not None:
                text = execution.error.message
            else:
                text = execution.result_text or json.dumps(execution.result, default=str)
            what = f"{execution.skill} ({target})"
            message = notice(actor, subject, what, execution.status.value, text, target)
        if manager.post_notice is not None:
            manager.post_notice(message)
    except Exception:
        LOG.exception("the outcome of %s %s was not posted", actor, target)

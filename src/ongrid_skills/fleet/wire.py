"""What a worker sends back about a call: numbered messages on the events stream, and their reading.

Each message of a call is JSON ``{"seq": n, "type": …, "data": {…}, "ts": …}`` published with
JetStream on ``<reply>.<call id>`` under the message id ``<call id>:<n>``, so a publication
retried after a lost acknowledgement is stored once. Types:

- ``accepted`` (always ``seq`` 1): the host took the call (its instance and pid);
- the timeline events of the call as the runner emits them (``status``, ``stderr``,
  ``progress``…), verbatim;
- ``result_part``: a piece of the call's stdout (NATS messages are capped at 1 MiB by default;
  stdout may reach 16 MiB), in order;
- ``outcome`` (last): the Execution's fields.

:class:`Sender` publishes one call's messages in order, those queued meanwhile together (without
waiting for each acknowledgement in turn: they cost one round trip, not one each), retrying
through a bus outage (the worker's calls must not be lost when NATS restarts). To a manager that
reads them (the call carries the header ``Ongrid-Batches: 1``), the messages queued meanwhile go
in one publication ``{"batch": [message, …]}`` under the id ``<call id>:<n>`` of its first
message (up to :data:`BATCH_BYTES`): a short call's end — its last status, its stdout and its
outcome — is then one message for JetStream to store, deliver and have acknowledged instead of
three. A manager that does not send the header (older) gets one publication per message.
:func:`decode` reads either form back. A retry may have JetStream store a message after a later
one: the reader puts them back in order by their number.
This module never runs a call and never decides what a message means for a record.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import time
from dataclasses import dataclass
from typing import Any

from nats.js import JetStreamContext

from ongrid_skills.execution.records import ErrorInfo, Event, Execution, Status

LOG = logging.getLogger("ongrid_skills.fleet")
#: Characters of stdout per ``result_part`` (≤ 6 bytes each once JSON-escaped: under 1 MiB).
PART_CHARS = 100_000
PUBLISH_TIMEOUT = 5.0
#: How long a worker keeps retrying one message before it drops the call's messages.
GIVE_UP_SECONDS = 3600.0
#: The header by which a manager's call says it reads batched publications.
BATCHES_HEADER = "Ongrid-Batches"
#: The most bytes of messages one batched publication carries (NATS caps a message at 1 MiB by
#: default); a message longer than that alone goes as it is.
BATCH_BYTES = 512 * 1024


@dataclass(frozen=True, slots=True)
class Message:
    """One message of a call, decoded."""

    seq: int
    type: str
    data: dict[str, Any]
    ts: float


def decode(body: bytes) -> list[Message]:
    """The messages one publication carries (one, or a batch), in its order; what is not one of
    ours is left out (ignored by the reader)."""
    try:
        raw = json.loads(body)
    except (ValueError, RecursionError):
        return []
    items = raw.get("batch") if isinstance(raw, dict) else None
    if not isinstance(items, list):
        items = [raw]
    return [m for m in map(_message, items) if m is not None]


def _message(raw: Any) -> Message | None:
    if not isinstance(raw, dict):
        return None
    seq, kind, data, ts = raw.get("seq"), raw.get("type"), raw.get("data"), raw.get("ts")
    if isinstance(seq, bool) or not isinstance(seq, int) or not isinstance(kind, str):
        return None
    if not isinstance(data, dict) or not isinstance(ts, (int, float)):
        return None
    return Message(seq, kind, data, float(ts))


def outcome_of(execution: Execution) -> dict[str, Any]:
    """The fields of a finished call that the manager copies (its stdout goes in parts)."""
    return {
        "status": execution.status.value,
        "error": execution.error.to_dict() if execution.error else None,
        "exit_code": execution.exit_code,
        "signal": execution.signal,
        "stderr_tail": execution.stderr_tail,
        "orphans_killed": execution.orphans_killed,
        "started_at": execution.started_at,
        "finished_at": execution.finished_at,
        "duration_ms": execution.duration_ms,
        "has_result": execution.result_text is not None,
    }


def apply_outcome(execution: Execution, data: dict[str, Any], result_text: str | None) -> None:
    """Copy an ``outcome`` message (and the stdout gathered from its parts) into a record."""
    try:
        execution.status = Status(str(data.get("status")))
    except ValueError:
        execution.status = Status.FAILED
    error = data.get("error")
    if isinstance(error, dict):
        execution.error = ErrorInfo(
            str(error.get("code", "failed")), str(error.get("message", "")), error.get("details")
        )
    execution.exit_code = _int(data.get("exit_code"))
    signal = data.get("signal")
    execution.signal = signal if isinstance(signal, str) else None
    tail = data.get("stderr_tail")
    execution.stderr_tail = tail if isinstance(tail, str) else ""
    execution.orphans_killed = _int(data.get("orphans_killed")) or 0
    execution.started_at = _float(data.get("started_at")) or execution.started_at
    execution.finished_at = _float(data.get("finished_at")) or time.time()
    execution.duration_ms = _float(data.get("duration_ms"))
    execution.result_text = result_text
    execution.result = None
    if result_text is not None:
        try:
            execution.result = json.loads(result_text)
        except (ValueError, RecursionError):  # the worker decoded it already: cannot happen
            execution.result_text = None


def _int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _float(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return float(value)


class Sender:
    """Publishes the messages of one call, in order, each until JetStream stored it;
    ``batched``: those queued meanwhile in one publication (the manager reads batches)."""

    def __init__(
        self, js: JetStreamContext, subject: str, call_id: str, *, batched: bool = False
    ) -> None:
        self.js = js
        self.subject = subject
        self.call_id = call_id
        self.batched = batched
        self.seq = 0
        self._queue: asyncio.Queue[bytes | None] = asyncio.Queue()
        self._task = asyncio.get_running_loop().create_task(self._drain())

    def send(self, kind: str, data: dict[str, Any], ts: float | None = None) -> None:
        """Queue one message (returns at once; a sync event sink may call it)."""
        self.seq += 1
        body = {"seq": self.seq, "type": kind, "data": data, "ts": ts or time.time()}
        self._queue.put_nowait(json.dumps(body, ensure_ascii=False).encode())

    def event(self, event: Event) -> None:
        self.send(event.type, event.data, event.ts)

    def finish(self, execution: Execution) -> None:
        """Queue the call's stdout in parts, then its outcome."""
        text = execution.result_text
        if text is not None:
            for start in range(0, len(text), PART_CHARS):
                self.send("result_part", {"text": text[start : start + PART_CHARS]})
        self.send("outcome", outcome_of(execution))

    async def close(self) -> None:
        """Wait until every queued message is stored (or given up on)."""
        self._queue.put_nowait(None)
        with contextlib.suppress(asyncio.CancelledError):
            await self._task

    def abort(self) -> None:
        self._task.cancel()

    async def _drain(self) -> None:
        seq = 0
        while True:
            items = [await self._queue.get()]
            while not self._queue.empty():
                items.append(self._queue.get_nowait())
            last = items[-1] is None
            bodies = [body for body in items if body is not None]
            batch = []
            for group in self._groups(bodies):
                body = group[0] if len(group) == 1 else b'{"batch":[' + b",".join(group) + b"]}"
                batch.append((body, {"Nats-Msg-Id": f"{self.call_id}:{seq + 1}"}))
                seq += len(group)
            if batch and not await self._publish_batch(batch):
                LOG.error("call %s: its messages could not be sent; dropped", self.call_id)
                return
            if last:
                return

    def _groups(self, bodies: list[bytes]) -> list[list[bytes]]:
        """The publications of these messages: one each, or (batched) runs of them up to
        :data:`BATCH_BYTES`."""
        if not self.batched:
            return [[body] for body in bodies]
        groups: list[list[bytes]] = []
        size = BATCH_BYTES
        for body in bodies:
            if size + len(body) > BATCH_BYTES:
                groups.append([])
                size = 0
            groups[-1].append(body)
            size += len(body) + 1
        return groups

    async def _publish_batch(self, batch: list[tuple[bytes, dict[str, str]]]) -> bool:
        """Publish what is queued without waiting for each acknowledgement in turn (one
        connection: the server stores them in this order), then wait for them all. From the
        first one not acknowledged on, each is published again, in order, until stored (its
        message id makes a repeat a no-op): the manager puts back in order any that JetStream
        stored after a later one."""
        futures: list[asyncio.Future[Any]] = []
        failed = len(batch)
        try:
            for body, headers in batch:
                futures.append(await self.js.publish_async(self.subject, body, headers=headers))
            for index, future in enumerate(futures):
                try:
                    await asyncio.wait_for(future, PUBLISH_TIMEOUT)
                except asyncio.CancelledError:
                    raise
                except Exception as exc:
                    LOG.debug("call %s: publish to be retried: %s", self.call_id, exc)
                    failed = index
                    break
            else:
                return True
        except asyncio.CancelledError:
            for future in futures:
                future.cancel()
            raise
        except Exception as exc:  # the bus is away: publish_async itself failed
            LOG.debug("call %s: publish to be retried: %s", self.call_id, exc)
            failed = min(failed, len(futures))
        for future in futures:
            future.cancel()  # a no-op for those acknowledged; frees the others' places
        for body, headers in batch[failed:]:
            if not await self._publish(body, headers):
                return False
        return True

    async def _publish(self, body: bytes, headers: dict[str, str]) -> bool:
        deadline = time.monotonic() + GIVE_UP_SECONDS
        pause = 0.05
        while True:
            try:
                await self.js.publish(self.subject, body, timeout=PUBLISH_TIMEOUT, headers=headers)
                return True
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # the bus is away: the same message id is retried
                if time.monotonic() > deadline:
                    return False
                LOG.debug("call %s: publish retried: %s", self.call_id, exc)
                await asyncio.sleep(pause)
                pause = min(pause * 2, 1.0)

"""A call its host did not take: withdrawn from the calls stream, and what the manager says.

A call is sent while its host is online; the host takes it (its ``accepted`` message) within
moments. When it does not, :class:`~.dispatch.Fleet` ends the call with one of two outcomes,
decided here, both ``local`` (the host reported nothing):

- The host stays online but never takes it: once the call expired (plus the clock skew a worker
  may have) no worker would take it; it is deleted from the stream and fails ``host_offline``,
  "not run".
- The host goes offline first (no heartbeat for its TTL, or its worker left): the wait ends then.
  The message is deleted from the stream; if NATS had not delivered it to the host's consumer by
  then, it can never run (``host_offline``, "not run"). If it had, a frozen worker holds it
  unread and runs it if it resumes before the expiry: the call is ``interrupted`` (what ran is
  not known here), and whatever the host reports later is ignored.
"""

from __future__ import annotations

from typing import Any

from nats.js import JetStreamContext

from ongrid_skills.execution.records import iso
from ongrid_skills.fleet import bus
from ongrid_skills.fleet.signing import CLOCK_SKEW_SECONDS, Call

#: How long the manager waits for the bus to say whether it delivered a call.
ASK_SECONDS = 2.0


def local(status: str, code: str, message: str) -> dict[str, Any]:
    """An outcome decided by this manager, not reported by the host."""
    return {"status": status, "error": {"code": code, "message": message}, "local": True}


def when(ts: float | None) -> str:
    """A time of this manager's clock, as the records show times (ISO 8601 UTC, ms)."""
    return iso(ts) or "an unknown time"


async def withdraw(js: JetStreamContext | None, names: bus.Names, seq: int | None) -> bool:
    """Delete a call from the calls stream; True when it was still there (no worker acknowledged
    it, and no worker will be given it from now on)."""
    if seq is None or js is None:
        return False
    try:
        return bool(await js.delete_msg(names.calls_stream, seq))
    except Exception:  # gone (acknowledged: taken), or the bus is away: not known
        return False


async def delivered(js: JetStreamContext, names: bus.Names, host: str, seq: int) -> bool | None:
    """Whether NATS delivered the stream message ``seq`` to the host's consumer, which gets
    its host's calls in stream order (None: the bus did not say)."""
    try:
        info = await js.consumer_info(
            names.calls_stream, names.worker_consumer(host), timeout=ASK_SECONDS
        )
    except Exception:
        return None
    if info.delivered is None:
        return None
    return bool(info.delivered.stream_seq >= seq)


def expired(call: Call) -> dict[str, Any]:
    """The outcome of a call its online host did not take before it expired (withdrawn)."""
    why = (
        f"host {call.host} is online but did not take the call sent at {when(call.issued_at)} "
        f"before it expired at {when(call.expires_at)} (+{CLOCK_SKEW_SECONDS:g} s allowed for "
        "clock skew): withdrawn, not run"
    )
    return local("failed", "host_offline", why)


async def lost(
    js: JetStreamContext | None, names: bus.Names, call: Call, seq: int, what: str
) -> dict[str, Any]:
    """The outcome of a call whose host ``what`` ("went offline: …") before it took it."""
    sent = when(call.issued_at)
    gone = await withdraw(js, names, seq)
    if gone and js is not None and await delivered(js, names, call.host, seq) is False:
        why = f"host {call.host} {what}, before it took the call sent at {sent}: not run"
        return local("failed", "host_offline", why)
    why = (
        f"host {call.host} {what}, after the call sent at {sent} was delivered to it and before "
        "it confirmed taking it: it runs the call if it resumes before the call expires at "
        f"{when(call.expires_at)} (by its clock); what it reports then is ignored"
    )
    return local("interrupted", "interrupted", why)

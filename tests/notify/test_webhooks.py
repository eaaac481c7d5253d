"""Approval webhooks end to end: a real manager on a real store tells scripted receivers on
loopback about every change of a request; retries, Retry-After, dead and hanging receivers never
touch the call; every outcome is in an intact audit chain, and no webhook secret anywhere."""

from __future__ import annotations

import asyncio
import email.utils
import json
import logging
import os
import random
import subprocess
import time
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest

from ongrid_skills.execution.records import Status
from ongrid_skills.governance.principal import Principal
from ongrid_skills.manager import Manager
from ongrid_skills.notify.webhooks import Delivery, retry_after_seconds, url_label
from ongrid_skills.runtime import open_manager
from ongrid_skills.settings import Settings
from ongrid_skills.store import Store, open_store
from ongrid_skills.types import Role
from tests.support.processes import CLI
from tests.support.server import Server, make_settings
from tests.support.skills import MakeSkill
from tests.support.sockets import free_port
from tests.support.store import migrated_data_dir
from tests.support.waiting import until, wait_for
from tests.support.webhooks import HANG, SECRET, Answer, Receiver, receiving

PUBLIC = "https://ops.example.org"
ECHO = "#!/bin/sh\ncat\n"
ARGS = {"target": "db-01"}
OLGA = Principal("olga", Role.OPERATOR)
OSCAR = Principal("oscar", Role.OPERATOR)
ADA = Principal("ada", Role.ADMIN)
BOB = Principal("bob", Role.ADMIN)
#: Small numbers, so that retries take a fraction of a second.
FAST = Delivery(attempts=3, timeout=2.0, backoff=0.05, max_delay=0.3, drain_seconds=0.3)


@pytest.fixture(autouse=True)
def skills(make_skill: MakeSkill) -> None:
    make_skill("set_flag", ECHO, **{"class": "mutating"})
    make_skill("drop_table", ECHO, **{"class": "dangerous"})


@pytest.fixture
def settings_for(tmp_path: Path, skills_root: Path) -> Any:
    def settings(*urls: str, **overrides: Any) -> Settings:
        return make_settings(
            tmp_path, skills_root, approval_webhooks=urls, public_url=PUBLIC, **overrides
        )

    return settings


@pytest.fixture
def store(tmp_path: Path) -> Iterator[Store]:
    migrated_data_dir(str(tmp_path / "data"))
    opened = open_store(str(tmp_path / "data"))
    yield opened
    opened.close()


@asynccontextmanager
async def manager_on(
    settings: Settings, store: Store, delivery: Delivery = FAST
) -> AsyncIterator[Manager]:
    async with open_manager(
        settings, store=store, loader_sink=lambda _l: None, webhook_delivery=delivery
    ) as manager:
        yield manager


def audited(store: Store, action: str) -> list[dict[str, Any]]:
    """The entries of ``action``, oldest first."""
    return list(reversed(store.audit.entries(limit=1000, action=action)))


async def audited_soon(store: Store, action: str, count: int) -> list[dict[str, Any]]:
    return await until(
        lambda: (found := audited(store, action)) and len(found) >= count and found,
        f"{count} {action} audit entries",
    )


async def posts(receiver: Receiver, count: int) -> list[Any]:
    return [r.body for r in await asyncio.to_thread(receiver.wait, count)]


def titles(bodies: list[Any]) -> list[str]:
    return [body["text"].split(":")[0] for body in bodies]


def chain_intact(store: Store) -> None:
    verification = store.audit.verify()
    assert verification.ok, verification.problems


# ---- the pieces ---------------------------------------------------------------------------------
def test_the_pause_doubles_from_the_backoff_with_jitter_and_never_exceeds_the_cap() -> None:
    delivery = Delivery(backoff=1.0, max_delay=60.0)
    rng = random.Random(7)
    for attempt in range(1, 12):
        step = min(60.0, 2.0 ** (attempt - 1))
        pauses = {delivery.delay(attempt, None, rng) for _ in range(50)}
        assert all(step / 2 <= p <= step for p in pauses)
        assert len(pauses) > 1  # jittered, not one fixed value
    assert delivery.delay(1, 7.5, rng) == 7.5  # Retry-After: as asked, no jitter
    assert delivery.delay(1, 3600.0, rng) == 60.0  # … up to the cap
    assert delivery.delay(1, -5.0, rng) == 0.0


def test_retry_after_is_read_as_seconds_or_as_an_http_date() -> None:
    now = 1_767_268_800.0
    assert retry_after_seconds("120", now) == 120.0
    assert retry_after_seconds(" 3 ", now) == 3.0
    date = email.utils.formatdate(now + 30, usegmt=True)
    assert retry_after_seconds(date, now) == pytest.approx(30.0)
    assert retry_after_seconds(email.utils.formatdate(now - 30, usegmt=True), now) == 0.0
    for unreadable in (None, "", "soon", "-1", "1.5e3"):
        assert retry_after_seconds(unreadable, now) is None


def test_a_url_label_keeps_the_scheme_and_host_and_hides_the_rest_behind_a_short_hash() -> None:
    slack = "https://hooks.slack.com/services/T000/B000/XXXXsecret"
    label = url_label(slack)
    assert label.startswith("https://hooks.slack.com #")
    assert len(label.rsplit("#", 1)[1]) == 8
    assert url_label("https://hooks.slack.com/services/T000/B000/other") != label
    assert url_label("http://u:pw@[::1]:8065/hooks/abc?x=1").startswith("http://[::1]:8065 #")
    assert "pw" not in url_label("http://u:pw@[::1]:8065/hooks/abc?x=1")


# ---- what is sent, and when --------------------------------------------------------------------
def test_every_change_of_a_request_is_posted_in_order_with_a_link_to_its_page(
    settings_for: Any, store: Store
) -> None:
    with receiving() as receiver:
        settings = settings_for(receiver.url)

        async def scenario() -> tuple[list[str], list[Any]]:
            async with manager_on(settings, store) as manager:
                ids = []
                flag = await manager.submit("set_flag", ARGS, principal=OLGA)
                await manager.desk.reject(flag.approval_id or "", OSCAR, "not now")
                drop = await manager.submit("drop_table", ARGS, principal=OLGA)
                await manager.desk.approve(drop.approval_id or "", ADA, "ticket OPS-42")
                await manager.desk.approve(drop.approval_id or "", BOB)
                late = await manager.submit("set_flag", ARGS, principal=OLGA)
                manager.clock = lambda: time.time() + 7200
                manager.desk.get(late.approval_id or "")  # found past its expiry: expired
                manager.clock = time.time
                gone = await manager.submit("set_flag", ARGS, principal=OLGA)
                await manager.cancel(gone.id, OLGA)
                ids = [flag.approval_id, drop.approval_id, late.approval_id, gone.approval_id]
                bodies = await posts(receiver, 9)
                await audited_soon(store, "webhook.delivered", 9)
                ran = await until(lambda: (s := manager.get(drop.id).status).final and s, "a run")
                assert ran is Status.SUCCEEDED
                return [i or "" for i in ids], bodies

        (flag, drop, late, gone), bodies = asyncio.run(scenario())

    assert titles(bodies) == [
        "Approval requested",
        "Rejected by oscar",
        "Approval requested",
        "Approval signed by ada",
        "Approved by bob",
        "Approval requested",
        "Approval expired",
        "Approval requested",
        "Approval cancelled by olga",
    ]
    links = [body["text"].rsplit(" ", 1)[1] for body in bodies]
    assert links == [
        f"{PUBLIC}/approvals/{approval_id}"
        for approval_id in (flag, flag, drop, drop, drop, late, late, gone, gone)
    ]
    for body in bodies:
        assert set(body) == {"text", "blocks"}
        [section] = body["blocks"]
        assert section["type"] == "section"
        assert section["text"]["type"] == "mrkdwn"
        assert "*Skill*\n`" in section["fields"][0]["text"]
    assert "1/2 signatures" in bodies[3]["text"]
    assert "2/2 signatures" in bodies[4]["text"]
    assert [r.headers["Content-Type"] for r in receiver.received] == ["application/json"] * 9
    delivered = audited(store, "webhook.delivered")
    assert [e["data"]["event"] for e in delivered] == [
        "approval.requested",
        "approval.rejected",
        "approval.requested",
        "approval.signed",
        "approval.approved",
        "approval.requested",
        "approval.expired",
        "approval.requested",
        "approval.cancelled",
    ]
    assert {(e["actor"], e["data"]["attempts"], e["data"]["status"]) for e in delivered} == {
        ("manager", 1, 200)
    }
    assert {e["data"]["url"] for e in delivered} == {url_label(receiver.url)}
    assert delivered[0]["subject"] == flag
    chain_intact(store)


def test_an_expiry_found_by_the_sweeper_is_posted_without_anyone_asking(
    settings_for: Any, store: Store
) -> None:
    with receiving() as receiver:
        settings = settings_for(receiver.url, approval_ttl_seconds=1)

        async def expiring() -> list[Any]:
            async with manager_on(settings, store) as manager:
                await manager.submit("set_flag", ARGS, principal=OLGA)
                return await posts(receiver, 2)

        bodies = asyncio.run(expiring())

    assert titles(bodies) == ["Approval requested", "Approval expired"]
    assert [f["text"] for f in bodies[1]["blocks"][0]["fields"] if "Reason" in f["text"]] == [
        "*Reason*\nthe request expired"
    ]


# ---- retries -----------------------------------------------------------------------------------
def test_a_receiver_answering_500_twice_gets_the_message_a_third_time_after_growing_pauses(
    settings_for: Any, store: Store
) -> None:
    with receiving(Answer(500), Answer(503)) as receiver:
        settings = settings_for(receiver.url)

        async def scenario() -> None:
            async with manager_on(settings, store) as manager:
                await manager.submit("set_flag", ARGS, principal=OLGA)
                await audited_soon(store, "webhook.delivered", 1)

        asyncio.run(scenario())

    first, second, third = receiver.received
    assert first.body == second.body == third.body
    # Backoff 0.05 s doubling, with jitter between half the step and the step.
    assert second.at - first.at >= 0.025
    assert third.at - second.at >= 0.05
    [delivered] = audited(store, "webhook.delivered")
    assert (delivered["data"]["attempts"], delivered["data"]["status"]) == (3, 200)
    assert audited(store, "webhook.failed") == []
    chain_intact(store)


def test_a_429_with_retry_after_is_retried_no_sooner_than_the_receiver_asked(
    settings_for: Any, store: Store
) -> None:
    patient = Delivery(attempts=3, timeout=2.0, backoff=0.01, max_delay=5.0)
    with receiving(Answer(429, {"Retry-After": "1"})) as receiver:
        settings = settings_for(receiver.url)

        async def scenario() -> None:
            async with manager_on(settings, store, patient) as manager:
                await manager.submit("set_flag", ARGS, principal=OLGA)
                await audited_soon(store, "webhook.delivered", 1)

        asyncio.run(scenario())

    first, second = receiver.received
    assert second.at - first.at >= 1.0  # the backoff alone would have waited 0.01 s at most
    [delivered] = audited(store, "webhook.delivered")
    assert delivered["data"]["attempts"] == 2


def test_a_retry_after_beyond_the_cap_waits_only_the_cap(settings_for: Any, store: Store) -> None:
    with receiving(Answer(429, {"Retry-After": "3600"})) as receiver:
        settings = settings_for(receiver.url)

        async def scenario() -> None:
            async with manager_on(settings, store) as manager:  # FAST: at most 0.3 s
                await manager.submit("set_flag", ARGS, principal=OLGA)
                await audited_soon(store, "webhook.delivered", 1)

        asyncio.run(scenario())

    assert len(receiver.received) == 2


def test_a_404_is_not_retried_and_the_next_message_still_goes_out(
    settings_for: Any, store: Store
) -> None:
    with receiving(Answer(404)) as receiver:
        settings = settings_for(receiver.url)

        async def scenario() -> None:
            async with manager_on(settings, store) as manager:
                first = await manager.submit("set_flag", ARGS, principal=OLGA)
                await manager.desk.approve(first.approval_id or "", OSCAR)
                await audited_soon(store, "webhook.delivered", 1)

        asyncio.run(scenario())

    assert len(receiver.received) == 2
    [failed] = audited(store, "webhook.failed")
    assert failed["data"]["event"] == "approval.requested"
    assert (failed["data"]["attempts"], failed["data"]["status"]) == (1, 404)
    assert failed["data"]["error"] == "HTTP 404"
    [delivered] = audited(store, "webhook.delivered")
    assert delivered["data"]["event"] == "approval.approved"
    chain_intact(store)


# ---- receivers that are dead or hang -------------------------------------------------------------
def test_a_dead_receiver_changes_nothing_for_the_call_nor_for_another_receiver(
    settings_for: Any, store: Store
) -> None:
    dead = f"http://127.0.0.1:{free_port()}/services/{SECRET}"
    with receiving() as live:
        settings = settings_for(dead, live.url)

        async def scenario() -> Status:
            async with manager_on(settings, store) as manager:
                pending = await manager.submit("set_flag", ARGS, principal=OLGA)
                assert pending.status is Status.PENDING_APPROVAL
                await manager.desk.approve(pending.approval_id or "", OSCAR)
                await posts(live, 2)
                await audited_soon(store, "webhook.failed", 2)
                return await until(
                    lambda: (s := manager.get(pending.id).status).final and s, "the call's end"
                )

        assert asyncio.run(scenario()) is Status.SUCCEEDED

    assert titles(live.bodies()) == ["Approval requested", "Approved by oscar"]
    failed = audited(store, "webhook.failed")
    assert [e["data"]["event"] for e in failed] == ["approval.requested", "approval.approved"]
    for entry in failed:
        assert entry["data"]["url"] == url_label(dead)
        assert entry["data"]["attempts"] == FAST.attempts
        assert entry["data"]["status"] is None
        assert entry["data"]["error"].startswith("ConnectError")
    assert {e["data"]["url"] for e in audited(store, "webhook.delivered")} == {url_label(live.url)}
    chain_intact(store)


def test_a_hanging_receiver_blocks_neither_the_request_nor_the_approval_nor_the_run(
    settings_for: Any, store: Store
) -> None:
    patient = Delivery(attempts=1, timeout=60.0, drain_seconds=0.2)
    with receiving(HANG) as receiver:
        settings = settings_for(receiver.url)

        async def scenario() -> None:
            async with manager_on(settings, store, patient) as manager:
                pending = await manager.submit("set_flag", ARGS, principal=OLGA)
                await asyncio.to_thread(receiver.wait, 1)  # it holds the first message now
                await manager.desk.approve(pending.approval_id or "", OSCAR)
                final = await until(
                    lambda: (s := manager.get(pending.id).status).final and s, "the call's end"
                )
                assert final is Status.SUCCEEDED
                assert not receiver.release.is_set()  # the receiver still hangs
                assert len(receiver.received) == 1  # the second message waits behind it
                assert audited(store, "webhook.delivered") == []
            # Closed: the hanging delivery and the queued one are dropped, and audited.

        asyncio.run(scenario())

    dropped = audited(store, "webhook.dropped")
    assert [(e["data"]["event"], e["data"]["attempts"]) for e in dropped] == [
        ("approval.requested", 1),
        ("approval.approved", 0),
    ]
    assert {e["data"]["reason"] for e in dropped} == {"the manager stopped first"}
    chain_intact(store)


def test_an_attempt_that_gets_no_answer_in_time_is_retried_then_given_up(
    settings_for: Any, store: Store
) -> None:
    quick = Delivery(attempts=2, timeout=0.3, backoff=0.05, max_delay=0.1)
    with receiving(HANG, HANG) as receiver:
        settings = settings_for(receiver.url)

        async def scenario() -> None:
            async with manager_on(settings, store, quick) as manager:
                pending = await manager.submit("set_flag", ARGS, principal=OLGA)
                await manager.desk.approve(pending.approval_id or "", OSCAR)
                await audited_soon(store, "webhook.delivered", 1)

        asyncio.run(scenario())

    [failed] = audited(store, "webhook.failed")
    assert failed["data"]["event"] == "approval.requested"
    assert failed["data"]["attempts"] == 2
    assert failed["data"]["error"] == "no answer within 0.3 s"
    [delivered] = audited(store, "webhook.delivered")
    assert delivered["data"]["event"] == "approval.approved"
    assert len(receiver.received) == 3


def test_a_full_queue_drops_its_oldest_message_and_audits_the_drop(
    settings_for: Any, store: Store
) -> None:
    small = Delivery(attempts=1, timeout=60.0, queue_size=2, drain_seconds=0.2)
    with receiving(HANG) as receiver:
        settings = settings_for(receiver.url)

        async def scenario() -> list[str]:
            async with manager_on(settings, store, small) as manager:
                first = await manager.submit("set_flag", ARGS, principal=OLGA)
                await asyncio.to_thread(receiver.wait, 1)
                later = [await manager.submit("set_flag", ARGS, principal=OLGA) for _ in range(3)]
                [dropped] = await audited_soon(store, "webhook.dropped", 1)
                assert dropped["subject"] == later[0].approval_id
                assert dropped["data"] == {
                    "url": url_label(receiver.url),
                    "event": "approval.requested",
                    "execution_id": later[0].id,
                    "attempts": 0,
                    "reason": "the queue of 2 messages was full",
                }
                return [e.approval_id or "" for e in (first, *later)]

        ids = asyncio.run(scenario())

    dropped = audited(store, "webhook.dropped")
    assert [e["subject"] for e in dropped] == [ids[1], ids[0], ids[2], ids[3]]
    assert len(receiver.received) == 1
    chain_intact(store)


# ---- secrets, threads, wiring --------------------------------------------------------------------
def test_no_webhook_secret_reaches_a_log_line_or_the_audit(
    settings_for: Any, store: Store, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    for chatty in ("httpx", "httpcore"):  # the CLI quiets them: another test may have run it
        caplog.set_level(logging.DEBUG, logger=chatty)
    dead = f"http://user:pa55w0rd@127.0.0.1:{free_port()}/services/{SECRET}?token=q5ecr3t"
    with receiving(Answer(500)) as receiver:
        settings = settings_for(receiver.url, dead)

        async def scenario() -> None:
            async with manager_on(settings, store) as manager:
                await manager.submit("set_flag", ARGS, principal=OLGA)
                await audited_soon(store, "webhook.delivered", 1)
                await audited_soon(store, "webhook.failed", 1)

        asyncio.run(scenario())

    logged = caplog.text
    assert f"HTTP Request: POST {url_label(receiver.url)}" in logged  # httpx did log, labelled
    assert "not delivered after 3 attempt(s)" in logged
    everything = json.dumps(store.audit.entries(limit=1000))
    assert url_label(dead) in everything
    for secret in (SECRET, "s3cr3t", "q5ecr3t", "pa55w0rd", "/services/"):
        assert secret not in logged
        assert secret not in everything
    chain_intact(store)


def test_an_event_told_from_another_thread_is_delivered_too(
    settings_for: Any, store: Store
) -> None:
    with receiving() as receiver:
        settings = settings_for(receiver.url)

        async def scenario() -> None:
            async with manager_on(settings, store) as manager:
                pending = await manager.submit("set_flag", ARGS, principal=OLGA)
                await posts(receiver, 1)
                manager.clock = lambda: time.time() + 7200
                # e.g. a synchronous route of a door, run in a worker thread, finds it expired
                await asyncio.to_thread(manager.desk.get, pending.approval_id or "")
                await posts(receiver, 2)

        asyncio.run(scenario())

    assert titles(receiver.bodies()) == ["Approval requested", "Approval expired"]


def test_without_webhooks_the_desk_has_no_listener_and_nothing_is_audited_about_them(
    settings_for: Any, store: Store
) -> None:
    async def scenario() -> None:
        async with manager_on(settings_for(), store) as manager:
            assert manager.desk.listeners == []
            await manager.submit("set_flag", ARGS, principal=OLGA)

    asyncio.run(scenario())
    assert [e for e in store.audit.entries(limit=100) if e["action"].startswith("webhook.")] == []


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    with receiving() as running:
        yield running


@pytest.fixture
def server_settings(tmp_path: Path, skills_root: Path, receiver: Receiver) -> Settings:
    return make_settings(
        tmp_path, skills_root, approval_webhooks=(receiver.url,), public_url=PUBLIC
    )


def test_serve_posts_a_request_made_over_rest_and_audits_the_delivery(
    server: Server, receiver: Receiver
) -> None:
    response = server.call("POST", "/v1/skills/set_flag/execute", "olga", json={"args": ARGS})
    assert response.status_code == 202, response.text
    approval_id = response.json()["approval_id"]

    [received] = receiver.wait(1)
    assert received.path == f"/services/{SECRET}?k=q5ecr3t"
    assert received.body["text"].endswith(f"{PUBLIC}/approvals/{approval_id}")

    def delivered() -> list[Any]:
        items = server.call("GET", "/v1/audit?action=webhook.delivered", "vera").json()["items"]
        return list(items)

    [entry] = wait_for(delivered, "the delivery's audit entry")
    assert entry["subject"] == approval_id
    assert entry["data"]["url"] == url_label(receiver.url)
    assert server.call("GET", "/v1/audit/verify", "vera").json()["ok"] is True


#: Request bodies as a client writes them, JSON escapes included: each hides a secret
#: (``k-s3cr3t-…``, or the number) under a secret-looking name, in a shape a regex over the
#: serialized args missed.
HOSTILE_BODIES = [
    '{"args": {"target": "db-01", "password": 424242424242}}',
    '{"args": {"API_KEY": ["k-s3cr3t-list", 7], "Target": "db-01"}}',
    '{"args": {"client_secret": {"inner": "k-s3cr3t-object", "flag": false}}}',
    '{"args": {"hosts": [{"name": "a", "Access_Token": "k-s3cr3t-in-list"}]}}',
    '{"args": {"passwd": "quote\\"d-k-s3cr3t-escaped\\" tail"}}',
    '{"args": {"\\u0070assword": "k-s3cr3t-escaped-name"}}',
    '{"args": {"Db-Password": "caf\\u00e9 k-s3cr3t-unicode \\u2603"}}',
    '{"args": {"headers": {"Authorization": "Bearer k-s3cr3t-header"}}}',
    '{"args": {"nested": {"deeper": {"TOKEN": {"v": [1, "k-s3cr3t-deep"]}}}}}',
    '{"args": {"db_token": true, "pwd": null}}',
]


def test_no_secret_under_a_secret_looking_name_reaches_the_webhook_receiver(
    server: Server, receiver: Receiver
) -> None:
    for body in HOSTILE_BODIES:
        response = server.client.post(
            "/v1/skills/set_flag/execute",
            content=body.encode(),
            headers={**server.as_("olga"), "content-type": "application/json"},
        )
        assert response.status_code == 202, response.text

    received = receiver.wait(len(HOSTILE_BODIES))
    for got in received:
        for text in (json.dumps(got.body), json.dumps(got.body, ensure_ascii=False)):
            for secret in ("k-s3cr3t", "424242424242", "true", "null"):
                assert secret not in text, got.body
        [args] = [f["text"] for f in got.body["blocks"][0]["fields"] if "*Args*" in f["text"]]
        assert '"[REDACTED]"' in args


def test_a_request_that_expired_while_no_manager_ran_is_posted_at_start_up(
    settings_for: Any, store: Store
) -> None:
    async def request_then_stop() -> float:
        async with manager_on(settings_for(approval_ttl_seconds=1), store) as manager:
            pending = await manager.submit("set_flag", ARGS, principal=OLGA)
            return manager.desk.get(pending.approval_id or "").expires_at

    expires_at = asyncio.run(request_then_stop())
    wait_for(lambda: time.time() > expires_at, "the request's expiry")
    with receiving() as receiver:
        # The default TTL: the sweeper's first round is a minute away, so only start-up finds it.
        settings = settings_for(receiver.url)

        async def start_again() -> list[Any]:
            async with manager_on(settings, store):
                return await posts(receiver, 1)

        [body] = asyncio.run(start_again())

    assert body["text"].startswith("Approval expired: set_flag")


def test_serve_refuses_to_start_with_a_webhook_that_is_not_http_and_keeps_its_secret(
    tmp_path: Path,
) -> None:
    env = {
        "PATH": os.environ["PATH"],
        "ONGRID_DATA_DIR": str(tmp_path / "data"),
        "ONGRID_BUNDLED_SKILLS": "0",
        "ONGRID_APPROVAL_WEBHOOKS": f"http://127.0.0.1:1/ok, gopher://hooks.example/{SECRET}",
    }
    done = subprocess.run(
        [CLI, "serve", "--port", str(free_port())],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2, done
    assert "approval_webhooks entry 2 must be an http or https URL" in done.stderr
    assert "gopher" in done.stderr
    assert SECRET not in done.stdout + done.stderr
    assert "serving on" not in done.stdout

"""``install_skill``: an agent installs a pack by asking. A real manager and store, a scripted
OpenAI-compatible model on loopback, signed packs in a local index or served over HTTP on
loopback; two admins sign; the new skill is offered on the next turn."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

from ongrid_skills.agent import AgentRun, AgentService
from ongrid_skills.execution.records import Status
from ongrid_skills.governance.principal import Principal
from ongrid_skills.manager import Manager
from ongrid_skills.packs.build import build_archive
from ongrid_skills.packs.keys import load_signing_key
from ongrid_skills.packs.trust import sign_path
from ongrid_skills.runtime import open_manager
from ongrid_skills.settings import Settings
from ongrid_skills.skills.packroots import active_versions
from ongrid_skills.store.approvals import Approval
from ongrid_skills.types import Role
from tests.support.agent import agent_settings, envelope, run_agent
from tests.support.index_server import index_server
from tests.support.llm import FakeLLM, Reply, call
from tests.support.packs import KeyPair, Market, signed_market, write_pack
from tests.support.skills import write_persona
from tests.support.waiting import until

ADA = Principal("ada", Role.ADMIN)
ALAN = Principal("alan", Role.ADMIN)


def market(tmp_path: Path) -> Market:
    return signed_market(tmp_path, {"diskpack": {"1.0.0": ("disk_free",)}})


def settings_of(tmp_path: Path, skills_root: Path, fake: FakeLLM, shop: Market) -> Settings:
    write_persona(tmp_path / "personas", "installer", "dual-sign-required")
    return agent_settings(
        tmp_path,
        skills_root,
        fake,
        bundled_skills=True,
        toolbag_deferral_threshold=1000,  # every offered tool is sent: the test reads them
        trusted_pack_keys=str(shop.trusted),
        pack_indexes=(str(shop.index),),
        pack_allow_http=True,
        pack_keep_seconds=0,
    )


def signed_archive(base: Path, key: KeyPair, skill: str) -> tuple[bytes, bytes]:
    """A signed ``served@1.0.0`` archive whose one skill is ``skill``, and its signature."""
    folder = write_pack(base / skill, "served", "1.0.0", skills=(skill,))
    out = base / f"out-{skill}"
    out.mkdir()
    archive = build_archive(folder, out).path
    signature, _ = sign_path(archive, load_signing_key(key.private))
    return archive.read_bytes(), signature.read_bytes()


def test_two_admins_sign_an_install_and_the_new_skill_is_offered_on_the_next_turn(
    tmp_path: Path, skills_root: Path, fake: FakeLLM
) -> None:
    shop = market(tmp_path)
    digest = json.loads(shop.index.read_text())["packs"][0]["versions"][0]["digest"]
    settings = settings_of(tmp_path, skills_root, fake, shop)
    fake.add(Reply(calls=[call("install_skill", {"source": "diskpack"})]), Reply("installed"))
    seen: list[Approval] = []

    async def sign(manager: Manager, _service: AgentService, run: AgentRun) -> None:
        await until(lambda: run.pending, "the install to wait for its signers")
        execution = manager.store.executions.get(next(iter(run.pending)))
        assert execution is not None and execution.approval_id is not None
        seen.append(manager.desk.get(execution.approval_id))
        await manager.desk.approve(execution.approval_id, ADA)
        assert manager.desk.get(execution.approval_id).status == "pending"  # one is not enough
        await manager.desk.approve(execution.approval_id, ALAN)

    outcome = run_agent(settings, "install the disk pack", "installer", during=sign)

    assert outcome.record.status == "done", outcome.record.error
    (approval,) = seen
    assert approval.signatures_required == 2
    assert approval.args == {"source": "diskpack", "digest": digest}
    assert approval.preview is not None
    summary = approval.preview["pack"]
    assert (summary["id"], summary["version"], summary["digest"]) == ("diskpack", "1.0.0", digest)
    assert summary["signer"]["trusted"] is True
    assert [(s["name"], s["class"]) for s in summary["skills"]] == [("disk_free", "safe")]
    assert approval.to_dict()["preview"] == approval.preview  # REST, CLI and cards show it
    first, second = fake.tool_names(0), fake.tool_names(1)
    assert "install_skill" in first and "disk_free" not in first
    assert "disk_free" in second
    result = envelope(fake.results_by_tool(1)["install_skill"])
    assert (result["action"], result["id"], result["version"]) == ("install", "diskpack", "1.0.0")
    assert active_versions(settings.data_dir) == {"diskpack": "1.0.0"}


def test_an_unsigned_remote_pack_refuses_the_request_and_nothing_waits_for_signers(
    tmp_path: Path, skills_root: Path, fake: FakeLLM
) -> None:
    shop = market(tmp_path)
    settings = settings_of(tmp_path, skills_root, fake, shop)
    folder = write_pack(tmp_path / "loose", "loose", "1.0.0", skills=("anything",))
    (tmp_path / "loose-out").mkdir()
    archive = build_archive(folder, tmp_path / "loose-out").path
    with index_server() as web:
        web.files["/loose-1.0.0.tar.gz"] = archive.read_bytes()
        url = web.url("/loose-1.0.0.tar.gz")
        fake.add(Reply(calls=[call("install_skill", {"source": url})]), Reply("refused"))

        outcome = run_agent(settings, "install the loose pack", "installer")

    assert outcome.record.status == "done"
    got = envelope(fake.results_by_tool(1)["install_skill"])
    assert got["error"]["code"] == "untrusted_pack"
    assert "not signed" in got["error"]["message"]
    assert "approval_pending" not in outcome.types()
    assert active_versions(settings.data_dir) == {}


def test_a_source_that_changed_after_the_request_is_not_installed(
    tmp_path: Path, skills_root: Path, fake: FakeLLM
) -> None:
    shop = market(tmp_path)
    settings = settings_of(tmp_path, skills_root, fake, shop)
    shown = signed_archive(tmp_path / "a", shop.key, "reviewed")
    swapped = signed_archive(tmp_path / "b", shop.key, "swapped")

    async def main(url: str, web_files: dict[str, bytes]) -> tuple[Any, Any]:
        async with open_manager(settings, loader_sink=lambda _line: None) as manager:
            asked = await manager.submit(
                "install_skill", {"source": url}, principal=ADA, confirm=True, wait=False
            )
            assert asked.status is Status.PENDING_APPROVAL and asked.approval_id is not None
            approval = manager.desk.get(asked.approval_id)
            web_files["/served.tar.gz"] = swapped[0]  # the source changes before the run
            web_files["/served.tar.gz.sig"] = swapped[1]
            await manager.desk.approve(asked.approval_id, ALAN)

            def ended() -> Any:
                found = manager.store.executions.get(asked.id)
                return found if found is not None and found.status.final else None

            return approval, await until(ended, "the approved install to end")

    with index_server() as web:
        web.files["/served.tar.gz"], web.files["/served.tar.gz.sig"] = shown
        url = web.url("/served.tar.gz")
        approval, execution = asyncio.run(main(url, web.files))

    assert [s["name"] for s in approval.preview["pack"]["skills"]] == ["reviewed"]
    assert execution.status is Status.FAILED
    assert execution.error.code == "digest_mismatch"
    assert "changed since the approval request was made" in execution.error.message
    assert active_versions(settings.data_dir) == {}

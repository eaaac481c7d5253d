"""Marketplace indexes: strict parsing, sources resolved against the index, merging, version
resolution, ``index build``, and installs through an index (the digest must match)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any, ClassVar

import pytest

from ongrid_skills.errors import DigestMismatch, NotFound, PackIndexError
from ongrid_skills.packs.build import build_archive
from ongrid_skills.packs.fetch import FetchPolicy
from ongrid_skills.packs.files import Limits
from ongrid_skills.packs.index import build_index, load_catalog, parse_index
from ongrid_skills.packs.keys import load_signing_key
from ongrid_skills.packs.service import Packs
from ongrid_skills.packs.trust import sign_path
from ongrid_skills.runtime import open_packs
from ongrid_skills.settings import Settings
from ongrid_skills.store import open_store
from tests.support.http import LoopbackHTTPServer, QuietHandler, serve
from tests.support.packs import KeyPair, make_key, write_pack
from tests.support.skills import EXAMPLE_SKILLS

DIGEST = "sha256:" + "a" * 64
EXAMPLES = EXAMPLE_SKILLS.parent / "packs"


def index_bytes(*packs: dict[str, Any]) -> bytes:
    return json.dumps({"format": "ongrid-pack-index v1", "packs": list(packs)}).encode()


def entry(version: str, source: str = "x.tar.gz", **extra: Any) -> dict[str, Any]:
    return {"version": version, "source": source, "digest": DIGEST, **extra}


def test_an_index_is_read_strictly_with_every_problem_listed() -> None:
    raw = index_bytes(
        {"id": "ok", "versions": [entry("1.0.0")]},
        {"id": "ok", "versions": [entry("1.0.0")]},
        {"id": "Bad Id", "versions": [entry("1.0.0")]},
        {"id": "v", "versions": [entry("one"), {**entry("2.0.0"), "digest": "md5:x"}]},
    )
    with pytest.raises(PackIndexError) as caught:
        parse_index(raw, "idx.json", "/srv")
    messages = [p.message for p in caught.value.problems]
    assert any("/packs/1/id" in m and "twice" in m for m in messages)
    assert any("/packs/2/id" in m for m in messages)
    assert any("/packs/3/versions/0/version" in m for m in messages)
    assert any("/packs/3/versions/1/digest" in m for m in messages)
    with pytest.raises(PackIndexError, match="not a JSON index"):
        parse_index(b'{"packs": [], "packs": []}', "idx.json", "/srv")


def test_sources_are_resolved_against_the_index_location() -> None:
    raw = index_bytes(
        {"id": "a", "versions": [entry("1.0.0", "a.tar.gz"), entry("2.0.0", "/abs/a.tar.gz")]}
    )
    (local,) = parse_index(raw, "idx", "/srv/market")
    assert {v.source for v in local.versions} == {"/srv/market/a.tar.gz", "/abs/a.tar.gz"}
    (remote,) = parse_index(raw, "idx", "https://m.example.com/packs/index.json")
    assert {v.source for v in remote.versions} == {
        "https://m.example.com/packs/a.tar.gz",
        "https://m.example.com/abs/a.tar.gz",  # a remote index never names a local file
    }


def test_indexes_merge_in_order_and_resolve_the_newest_release(tmp_path: Path) -> None:
    first = tmp_path / "first.json"
    second = tmp_path / "second.json"
    first.write_bytes(index_bytes({"id": "ops", "versions": [entry("1.0.0", "one")]}))
    second.write_bytes(
        index_bytes(
            {
                "id": "ops",
                "versions": [entry("1.0.0", "other"), entry("1.2.0"), entry("2.0.0-rc.1")],
            }
        )
    )
    catalog = load_catalog(
        [str(first), str(second), str(tmp_path / "missing.json")], FetchPolicy(1)
    )
    assert catalog.resolve("ops").version == "1.2.0"  # a pre-release only when asked
    assert catalog.resolve("ops", "2.0.0-rc.1").version == "2.0.0-rc.1"
    assert catalog.resolve("ops", "1.0.0").source == str(tmp_path / "one")
    assert len(catalog.problems) == 1 and "missing.json" in catalog.problems[0]
    with pytest.raises(NotFound, match=r"offered: 2.0.0-rc.1, 1.2.0, 1.0.0"):
        catalog.resolve("ops", "9.9.9")
    with pytest.raises(NotFound, match="no pack 'nope'"):
        catalog.resolve("nope")
    assert [p.pack_id for p in catalog.search("OPS")] == ["ops"]


def test_index_build_lists_each_archive_with_its_digest_and_signer(tmp_path: Path) -> None:
    key = make_key(tmp_path / "keys")
    market = tmp_path / "market"
    market.mkdir()
    one = build_archive(write_pack(tmp_path / "a1", "ops", "1.0.0"), market)
    two = build_archive(write_pack(tmp_path / "a2", "ops", "1.1.0"), market)
    build_archive(write_pack(tmp_path / "b", "net", "0.1.0", homepage="https://x.example"), market)
    sign_path(two.path, load_signing_key(key.private))

    written = build_index(market, Limits())

    (net, ops) = parse_index(written.read_bytes(), "index.json", str(market))
    assert net.homepage == "https://x.example"
    assert [(v.version, v.digest) for v in ops.versions] == [
        ("1.1.0", two.digest),
        ("1.0.0", one.digest),
    ]
    assert ops.versions[0].signer == load_signing_key(key.private).fingerprint
    assert ops.versions[1].signer is None
    assert ops.versions[0].source == str(two.path)


class Market(QuietHandler):
    files: ClassVar[dict[str, bytes]] = {}

    def do_GET(self) -> None:
        body = self.files.get(self.path)
        if body is None:
            self.send_body(404, b"")
        else:
            self.send_body(200, body, "application/octet-stream")


@pytest.fixture
def market() -> Iterator[LoopbackHTTPServer]:
    Market.files = {}
    with serve(Market) as server:
        yield server


def packs_for(tmp_path: Path, key: KeyPair | Path, indexes: tuple[str, ...]) -> tuple[Any, Packs]:
    public = key.public if isinstance(key, KeyPair) else key
    settings = Settings(
        data_dir=str(tmp_path / "data"),
        bundled_skills=False,
        trusted_pack_keys=str(public),
        pack_indexes=indexes,
        pack_allow_http=True,
    )
    store = open_store(settings.data_dir)
    return store, open_packs(settings, store)


def test_an_index_whose_digest_does_not_match_the_download_installs_nothing(
    tmp_path: Path, market: LoopbackHTTPServer
) -> None:
    key = make_key(tmp_path / "keys")
    good = build_archive(write_pack(tmp_path / "good", "ops", "1.0.0"), tmp_path)
    (tmp_path / "other").mkdir()
    evil_pack = write_pack(tmp_path / "evil", "ops", "1.0.0", skills=("evil",))
    evil = build_archive(evil_pack, tmp_path / "other")
    sign_path(evil.path, load_signing_key(key.private))
    base = f"http://127.0.0.1:{market.server_address[1]}"
    # The index names the good pack's digest; the server hands out another, validly signed.
    Market.files = {
        "/ops-1.0.0.tar.gz": evil.path.read_bytes(),
        "/ops-1.0.0.tar.gz.sig": Path(str(evil.path) + ".sig").read_bytes(),
        "/index.json": index_bytes(
            {"id": "ops", "versions": [entry("1.0.0", "ops-1.0.0.tar.gz", digest=good.digest)]}
        ),
    }
    store, packs = packs_for(tmp_path, key, (f"{base}/index.json",))
    try:
        with pytest.raises(DigestMismatch, match="the index names"):
            packs.install("ops", "cli:ada")
        assert packs.installed() == []
        assert store.audit.entries(action="pack.install") == []
    finally:
        store.close()


def test_install_search_outdated_and_upgrade_through_a_remote_index(
    tmp_path: Path, market: LoopbackHTTPServer
) -> None:
    key = make_key(tmp_path / "keys")
    signer = load_signing_key(key.private)
    files: dict[str, bytes] = {}
    versions = []
    for version in ("1.0.0", "1.1.0"):
        built = build_archive(write_pack(tmp_path / version, "ops", version), tmp_path)
        sign_path(built.path, signer)
        name = built.path.name
        files[f"/p/{name}"] = built.path.read_bytes()
        files[f"/p/{name}.sig"] = Path(str(built.path) + ".sig").read_bytes()
        versions.append(entry(version, name, digest=built.digest, signer=signer.fingerprint))
    files["/p/index.json"] = index_bytes(
        {"id": "ops", "description": "On-call basics", "versions": versions}
    )
    Market.files = files
    base = f"http://127.0.0.1:{market.server_address[1]}"
    store, packs = packs_for(tmp_path, key, (f"{base}/p/index.json",))
    try:
        assert packs.install("ops@1.0.0", "cli:ada").version == "1.0.0"
        found = packs.available("call")
        assert [(i["id"], i["newest"], i["installed"]) for i in found["items"]] == [
            ("ops", "1.1.0", "1.0.0")
        ]
        assert packs.outdated()["items"] == [{"id": "ops", "installed": "1.0.0", "newest": "1.1.0"}]
        outcome = packs.upgrade("ops", "cli:ada")
        assert (outcome.action, outcome.version) == ("upgrade", "1.1.0")
        assert outcome.record is not None
        assert outcome.record.source == f"{base}/p/ops-1.1.0.tar.gz"
        assert packs.upgrade("ops", "cli:ada").action == "unchanged"
        assert packs.outdated()["items"] == []
        (audit,) = store.audit.entries(action="pack.upgrade")
        assert audit["data"]["via"] == f"{base}/p/index.json"
    finally:
        store.close()


def test_the_example_index_installs_the_example_pack(tmp_path: Path) -> None:
    store, packs = packs_for(
        tmp_path, EXAMPLES / "TEST-KEY-DO-NOT-USE.pub", (str(EXAMPLES / "index.json"),)
    )
    try:
        outcome = packs.install("ops-basics", "cli:ada")
        assert outcome.record is not None
        assert (outcome.version, outcome.record.trust) == ("1.1.0", "trusted")
        assert outcome.record.source == str(EXAMPLES / "ops-basics-1.1.0.tar.gz")
        assert "host_triage" in outcome.record.skills
    finally:
        store.close()

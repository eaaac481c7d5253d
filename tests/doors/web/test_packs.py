"""The console's packs page over plain HTTP against the served console: admins only (the REST
door's refusal for anyone else), every change a CSRF-checked form post going through the same
service calls as ``/v1/packs``, hostile forms and uploads refused with a clear code and nothing
changed."""

from __future__ import annotations

import io
import json
import re
import shutil
import tarfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from ongrid_skills.doors import pack_changes
from ongrid_skills.packs.build import build_archive
from ongrid_skills.packs.files import Limits
from ongrid_skills.packs.home import PackHome
from ongrid_skills.packs.index import build_index
from ongrid_skills.packs.keys import load_signing_key
from ongrid_skills.packs.trust import sign_path
from tests.support.browser import Console, console_server
from tests.support.pack_review import press_confirm
from tests.support.packs import (
    EXAMPLE_PACKS,
    Entry,
    Market,
    signed_market,
    tar_gz,
    tree,
    write_pack,
)
from tests.support.skills import write_skill

MIB = 1024 * 1024


@pytest.fixture(scope="module")
def market(tmp_path_factory: pytest.TempPathFactory) -> Market:
    base = tmp_path_factory.mktemp("market")
    built = signed_market(base, {"probe": {"1.0.0": ("probe_ping",)}})
    # An index naming a real archive with another digest: what a tampered mirror serves.
    tampered = built.folder.parent / "tampered.json"
    entry = {"version": "1.0.0", "source": str(built.folder / "probe-1.0.0.tar.gz")}
    entry["digest"] = "sha256:" + "0" * 64
    pack = {"id": "probe", "description": "tampered", "versions": [entry]}
    tampered.write_text(json.dumps({"format": "ongrid-pack-index v1", "packs": [pack]}))
    return built


@pytest.fixture(scope="module")
def console(tmp_path_factory: pytest.TempPathFactory, market: Market) -> Iterator[Console]:
    """A console with the example skills loaded, and two skills of its own named like the
    example pack's (which collides with them)."""

    def namesakes(skills: Path) -> None:
        for name in ("listening_sockets", "mount_report"):
            write_skill(skills, name, description="A namesake of the example pack's skill.")

    with console_server(
        tmp_path_factory.mktemp("console"),
        more_skills=namesakes,
        trusted_pack_keys=str(market.trusted),
        pack_indexes=(str(EXAMPLE_PACKS / "index.json"), str(market.index)),
        pack_keep_seconds=0,
        pack_max_unpacked_bytes=MIB,
        pack_max_files=100,
    ) as served:
        yield served


@pytest.fixture
def admin(console: Console) -> Iterator[httpx.Client]:
    with console.logged_in("admin") as client:
        yield client


def csrf(console: Console, client: httpx.Client) -> str:
    return console.csrf(client, "/packs")


def installed(console: Console) -> dict[str, str]:
    answer = console.rest("GET", "/v1/packs")
    return {item["id"]: item["version"] for item in answer.json()["items"]}


def packs_tree(console: Console) -> list[str]:
    ignored = (".staging/", ".reviews")
    return [p for p in tree(Path(console.settings.data_dir) / "packs") if not p.startswith(ignored)]


def refused_code(html: str) -> str:
    start = html.index('<code class="error-code">') + len('<code class="error-code">')
    return html[start : html.index("</code>", start)]


def reviews_left(console: Console) -> list[str]:
    """The uploads kept for a Confirm (packs/.reviews/<id>)."""
    folder = Path(console.settings.data_dir) / "packs" / ".reviews"
    return sorted(p.name for p in folder.iterdir()) if folder.exists() else []


def upload(
    client: httpx.Client, token: str, archive: bytes, name: str = "p.tar.gz", **more: Any
) -> httpx.Response:
    files: dict[str, Any] = {"file": (name, archive, "application/gzip")}
    signature = more.pop("signature", None)
    if signature is not None:
        files["signature"] = ("p.tar.gz.sig", signature, "application/json")
    return client.post("/packs/upload", files=files, data={"csrf": token, **more})


def test_the_page_lists_the_indexes_offer_and_a_search_narrows_it(
    console: Console, admin: httpx.Client
) -> None:
    page = admin.get("/packs")
    assert page.status_code == 200
    assert 'id="offer-ops-basics"' in page.text and 'id="offer-probe"' in page.text
    assert "No pack is installed." in page.text
    narrowed = admin.get("/packs", params={"q": "first look"})
    assert 'id="offer-ops-basics"' in narrowed.text and 'id="offer-probe"' not in narrowed.text
    assert 'href="/packs"' in admin.get("/skills").text  # in the navigation of an admin


@pytest.mark.parametrize("who", ["olga", "vera"])
def test_anyone_but_an_admin_gets_the_refusal_rest_gives_and_no_nav_entry(
    console: Console, who: str
) -> None:
    rest = console.rest("GET", "/v1/packs", who).json()["error"]["message"]
    with console.logged_in(who) as client:
        token = console.csrf(client)
        assert 'href="/packs"' not in client.get("/skills").text
        answers = [
            client.get("/packs"),
            client.get("/packs/probe/remove"),
            client.post("/packs/install", data={"csrf": token, "pack": "probe"}),
            client.post("/packs/probe/upgrade", data={"csrf": token}),
            client.post("/packs/probe/rollback", data={"csrf": token, "confirmed": "yes"}),
            client.post("/packs/probe/remove", data={"csrf": token, "confirmed": "yes"}),
            upload(client, token, b"x" * (8 * MIB)),  # refused before the body is read: no 413
            client.post("/packs/upload/confirm", data={"csrf": token, "review": "x"}),
            client.post("/packs/upload/discard", data={"csrf": token, "review": "x"}),
        ]
    for answer in answers:
        assert answer.status_code == 403, answer.request.url
        assert rest in answer.text
    assert installed(console) == {}


def test_a_change_without_the_csrf_token_or_from_another_site_is_refused(
    console: Console, admin: httpx.Client
) -> None:
    token = csrf(console, admin)
    answers = [
        admin.post("/packs/install", data={"pack": "probe"}),
        admin.post("/packs/install", data={"pack": "probe", "csrf": "0" * 64}),
        admin.post(
            "/packs/install",
            data={"pack": "probe", "csrf": token},
            headers={"sec-fetch-site": "cross-site"},
        ),
        admin.post(
            "/packs/install",
            data={"pack": "probe", "csrf": token},
            headers={"origin": "https://evil.example"},
        ),
        upload(admin, "wrong", b"x"),
        admin.post("/packs/upload", files={"file": ("p.tar.gz", b"x")}),
        admin.post("/packs/upload/confirm", data={"review": "x", "confirmed": "yes"}),
    ]
    assert [a.status_code for a in answers] == [403] * len(answers)
    assert installed(console) == {}


def test_hostile_install_forms_are_refused_as_bad_requests(
    console: Console, admin: httpx.Client
) -> None:
    token = csrf(console, admin)
    forms = [
        {},
        {"pack": "probe", "source": "probe"},
        {"pack": "../../etc"},
        {"pack": "Probe"},
        {"pack": "probe", "version": "1.0.0 rm -rf"},
        {"pack": "probe", "allow_unsigned": "on"},
        {"source": "x" * 5000},
    ]
    for form in forms:
        answer = admin.post("/packs/install", data={"csrf": token, **form})
        assert answer.status_code == 400, form
    twice = admin.post("/packs/install", content=f"csrf={token}&pack=probe&pack=other")
    assert twice.status_code == 400
    for path in (
        "/packs/UPPER/remove",
        "/packs/a%2F..%2Fb/remove",
        "/packs/" + "a" * 65 + "/remove",
    ):
        assert admin.post(path, data={"csrf": token, "confirmed": "yes"}).status_code in (400, 404)
    assert admin.get("/packs/probe/delete").status_code in (400, 404, 405)
    assert installed(console) == {}


def test_sources_of_the_server_itself_are_refused_as_through_rest(
    console: Console, admin: httpx.Client, tmp_path: Path
) -> None:
    local = write_pack(tmp_path / "here", "here")
    token = csrf(console, admin)
    missing = tmp_path / "missing"
    for source in (str(local), f"file://{local}", f"git+{local}", str(missing), f"{missing}.git"):
        answer = admin.post("/packs/install", data={"csrf": token, "source": source})
        rest = console.rest("POST", "/v1/packs", json={"source": source})
        assert answer.status_code == rest.status_code >= 400, source
        assert refused_code(answer.text) == rest.json()["error"]["code"]
        assert "Refused: nothing was changed" in answer.text
        assert rest.json()["error"]["code"] == "invalid_request", source  # exists or not
    assert installed(console) == {}


def test_a_collision_lists_each_name_and_installs_nothing(
    console: Console, admin: httpx.Client
) -> None:
    before = packs_tree(console)
    answer = admin.post("/packs/install", data={"csrf": csrf(console, admin), "pack": "ops-basics"})
    assert answer.status_code == 409
    assert refused_code(answer.text) == "skill_collision"
    for name in ("listening_sockets", "mount_report"):
        assert f"skill &#39;{name}&#39;: already loaded" in answer.text
    assert installed(console) == {} and packs_tree(console) == before


def test_a_download_whose_digest_is_not_the_indexes_is_refused(
    console: Console, market: Market, tmp_path: Path
) -> None:
    with (
        console_server(
            tmp_path,
            trusted_pack_keys=str(market.trusted),
            pack_indexes=(str(market.folder.parent / "tampered.json"),),
        ) as tampered,
        tampered.logged_in("admin") as client,
    ):
        answer = client.post(
            "/packs/install", data={"csrf": tampered.csrf(client), "pack": "probe"}
        )
        assert answer.status_code == 502
        assert refused_code(answer.text) == "digest_mismatch"
        assert installed(tampered) == {}


def test_hostile_uploads_are_refused_with_their_code_and_change_nothing(
    console: Console, admin: httpx.Client, tmp_path: Path
) -> None:
    slip = tar_gz(tmp_path / "slip.tar.gz", [Entry("../../evil.sh", b"#!/bin/sh\n", 0o755)])
    link = tar_gz(tmp_path / "link.tar.gz", [Entry("pack.json", kind="symlink", target="/etc")])
    unsigned = build_archive(write_pack(tmp_path / "u", "unsigned", skills=("u_one",)), tmp_path)
    token = csrf(console, admin)
    before = packs_tree(console)
    cases = [
        (slip.read_bytes(), {}, 400, "unsafe_pack"),
        (link.read_bytes(), {}, 400, "unsafe_pack"),
        (b"not an archive at all", {}, 400, "invalid_pack"),
        (unsigned.path.read_bytes(), {}, 403, "untrusted_pack"),
        (unsigned.path.read_bytes(), {"signature": b'{"format": 1}'}, 400, "bad_signature"),
    ]
    for archive, more, status, code in cases:
        answer = upload(admin, token, archive, **more)
        assert (answer.status_code, refused_code(answer.text)) == (status, code), code
    assert installed(console) == {} and packs_tree(console) == before
    assert reviews_left(console) == []  # a refused review keeps nothing
    assert not (tmp_path.parent / "evil.sh").exists()


def test_malformed_and_oversized_uploads_are_refused_before_any_install(
    console: Console, admin: httpx.Client
) -> None:
    token = csrf(console, admin)
    big = io.BytesIO()
    with tarfile.open(fileobj=big, mode="w") as tar:  # uncompressed: as large as its content
        info = tarfile.TarInfo("x/pack.json")
        info.size = 5 * MIB
        tar.addfile(info, io.BytesIO(b"x" * info.size))
    three = {name: (f"{name}.tar.gz", b"x") for name in ("file", "signature", "third")}

    def streamed() -> Iterator[bytes]:  # no Content-Length: counted as it comes
        yield b"--b\r\ncontent-disposition: form-data; name=file; filename=x\r\n\r\n"
        for _ in range(6):
            yield b"x" * MIB

    answers = {
        "too large": upload(admin, token, big.getvalue()),
        "streamed too large": admin.post(
            "/packs/upload",
            content=streamed(),
            headers={"content-type": "multipart/form-data; boundary=b"},
        ),
        "not multipart": admin.post("/packs/upload", data={"csrf": token}),
        "no file": admin.post(
            "/packs/upload", files={"signature": ("s", b"{}")}, data={"csrf": token}
        ),
        "three files": admin.post("/packs/upload", files=three, data={"csrf": token}),
        "file as text": admin.post(
            "/packs/upload", files={"x": ("x", b"")}, data={"csrf": token, "file": "text"}
        ),
        "bad flag": upload(admin, token, b"x", allow_unsigned="yes"),
        "no boundary": admin.post(
            "/packs/upload", content=b"x", headers={"content-type": "multipart/form-data"}
        ),
    }
    statuses = {name: answer.status_code for name, answer in answers.items()}
    assert 'class="error-code">too_large</code>' in answers["too large"].text
    assert 'class="error-code">invalid_request</code>' in answers["no file"].text
    assert statuses == {
        "too large": 413,
        "streamed too large": 413,
        "not multipart": 400,
        "no file": 400,
        "three files": 400,
        "file as text": 400,
        "bad flag": 400,
        "no boundary": 400,
    }
    assert installed(console) == {}


def test_an_unsigned_upload_installs_when_allowed_with_a_warning_and_leaves_on_remove(
    console: Console, admin: httpx.Client, tmp_path: Path
) -> None:
    archive = build_archive(write_pack(tmp_path / "u", "loose", skills=("loose_one",)), tmp_path)
    token = csrf(console, admin)
    review = upload(admin, token, archive.path.read_bytes(), "loose.tar.gz", allow_unsigned="true")
    assert "it is not signed: installed on your word" in review.text and "loose_one" in review.text
    assert installed(console) == {} and len(reviews_left(console)) == 1  # reviewing changes nothing
    done = press_confirm(admin, review)
    assert done.status_code == 200 and reviews_left(console) == []
    assert "Installed loose 1.0.0." in done.text and "trust-unsigned" in done.text
    assert installed(console) == {"loose": "1.0.0"}
    catalogue = console.rest("GET", "/v1/skills").json()["items"]
    assert "loose_one" in {s["name"] for s in catalogue}  # at once: no wait for the watcher
    assert {s["source"] for s in catalogue if s["name"] == "loose_one"} == {"pack:loose"}
    page = admin.get("/packs")
    assert 'href="/skills?source=pack%3Aloose"' in page.text
    filtered = admin.get("/skills", params={"source": "pack:loose"})
    assert 'href="/skills/loose_one"' in filtered.text
    others = [s["name"] for s in catalogue if s["source"] != "pack:loose"]
    assert others and not any(f'href="/skills/{name}"' in filtered.text for name in others)

    asked = admin.post("/packs/loose/remove", data={"csrf": token})  # no confirmation yet
    assert asked.status_code == 200 and "Remove loose?" in asked.text
    assert installed(console) == {"loose": "1.0.0"}
    removed = admin.post("/packs/loose/remove", data={"csrf": token, "confirmed": "yes"})
    assert "Removed loose 1.0.0" in removed.text
    assert installed(console) == {}
    (entry,) = console.store.audit.entries(action="pack.remove", subject="loose")
    assert entry["actor"] == "admin"


def test_rolling_back_a_pack_without_a_previous_version_is_a_conflict_on_the_page(
    console: Console, admin: httpx.Client
) -> None:
    token = csrf(console, admin)
    review = admin.post("/packs/install", data={"csrf": token, "pack": "probe"})
    assert "Installed probe 1.0.0." in press_confirm(admin, review).text
    try:
        upgrade = admin.post("/packs/probe/upgrade", data={"csrf": token})  # a review, too
        assert "Review probe 1.0.0" in upgrade.text and "already the active version" in upgrade.text
        confirm = admin.get("/packs/probe/rollback")
        assert "nothing to roll back to" in confirm.text and "confirmed" not in confirm.text
        answer = admin.post("/packs/probe/rollback", data={"csrf": token, "confirmed": "yes"})
        assert (answer.status_code, refused_code(answer.text)) == (409, "conflict")
        assert admin.get("/packs/nothing/remove").status_code == 404
        gone = admin.post("/packs/nothing/remove", data={"csrf": token, "confirmed": "yes"})
        assert gone.status_code == 200  # idempotent, as DELETE /v1/packs/{id}
        assert "nothing is not installed: nothing to remove." in gone.text
    finally:
        admin.post("/packs/probe/remove", data={"csrf": token, "confirmed": "yes"})
    assert installed(console) == {}


def test_a_change_while_another_pack_command_runs_is_a_conflict_on_the_page(
    console: Console, admin: httpx.Client, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(pack_changes, "HTTP_LOCK_WAIT_SECONDS", 0.3)
    token = csrf(console, admin)
    review = admin.post("/packs/install", data={"csrf": token, "pack": "probe"})
    with PackHome(console.settings.data_dir).lock():  # what a running `pack install` holds
        answer = press_confirm(admin, review)
    assert (answer.status_code, refused_code(answer.text)) == (409, "conflict")
    assert "another pack change is in progress" in answer.text
    assert installed(console) == {}


def test_a_pack_whose_source_changed_between_review_and_confirm_is_refused(
    console: Console, admin: httpx.Client, market: Market, tmp_path: Path
) -> None:
    token = csrf(console, admin)
    review = admin.post("/packs/install", data={"csrf": token, "pack": "probe", "version": "1.0.0"})
    assert installed(console) == {}  # reviewing changes nothing
    assert "probe_ping" in review.text and "probe_sneaky" not in review.text
    forged = press_confirm(admin, review, digest="sha256:" + "1" * 64)
    assert (forged.status_code, refused_code(forged.text)) == (502, "digest_mismatch")
    # The publisher replaces probe 1.0.0 (another skill, signed by the same key) and the index.
    originals = {p: p.read_bytes() for p in market.folder.iterdir() if p.is_file()}
    changed = write_pack(tmp_path / "changed", "probe", skills=("probe_ping", "probe_sneaky"))
    rebuilt = build_archive(changed, tmp_path).path
    sign_path(rebuilt, load_signing_key(market.key.private))
    try:
        for suffix in ("", ".sig"):
            shutil.copyfile(f"{rebuilt}{suffix}", market.folder / f"{rebuilt.name}{suffix}")
        build_index(market.folder, Limits())
        answer = press_confirm(admin, review)
    finally:
        for path, data in originals.items():
            path.write_bytes(data)
    assert (answer.status_code, refused_code(answer.text)) == (502, "digest_mismatch")
    assert "changed since the review" in answer.text
    assert "Refused: nothing was changed" in answer.text
    assert installed(console) == {}
    assert "probe_sneaky" not in {s.name for s in console.manager.registry.list()}


def test_an_upload_review_is_bound_to_its_session_and_used_once(
    console: Console, admin: httpx.Client, tmp_path: Path
) -> None:
    archive = build_archive(write_pack(tmp_path / "k", "kept", skills=("kept_one",)), tmp_path)
    data = archive.path.read_bytes()
    token = csrf(console, admin)
    review = upload(admin, token, data, "kept.tar.gz", allow_unsigned="true")
    (kept,) = reviews_left(console)
    folder = Path(console.settings.data_dir) / "packs" / ".reviews" / kept
    assert (folder.stat().st_mode & 0o077, (folder / "upload").read_bytes()) == (0, data)
    with console.logged_in("admin") as other:  # the same admin, another session
        theirs = press_confirm(other, review, csrf=csrf(console, other))
        assert (theirs.status_code, refused_code(theirs.text)) == (404, "not_found")
        assert "upload the archive again" in theirs.text
    wrong = press_confirm(admin, review, digest="sha256:" + "2" * 64)
    assert (wrong.status_code, refused_code(wrong.text)) == (400, "invalid_request")
    assert installed(console) == {} and reviews_left(console) == []  # used, even refused
    again = press_confirm(admin, review)
    assert (again.status_code, refused_code(again.text)) == (404, "not_found")

    cancelled = upload(admin, token, data, "kept.tar.gz", allow_unsigned="true")
    review_id = re.search(r'name="review" value="([^"]+)"', cancelled.text)
    assert review_id is not None and reviews_left(console) == [review_id[1]]
    gone = admin.post("/packs/upload/discard", data={"csrf": token, "review": review_id[1]})
    assert gone.status_code == 303 and reviews_left(console) == []

    done = press_confirm(admin, upload(admin, token, data, "kept.tar.gz", allow_unsigned="true"))
    assert "Installed kept 1.0.0." in done.text and installed(console) == {"kept": "1.0.0"}
    assert 'name="undo" value="1.0.0"' in done.text  # Roll back at once: a first install goes
    try:
        stale = admin.post(
            "/packs/kept/remove", data={"csrf": token, "confirmed": "yes", "undo": "0.9.0"}
        )
        assert (stale.status_code, refused_code(stale.text)) == (409, "conflict")
        assert installed(console) == {"kept": "1.0.0"}
        stored = admin.get("/packs").text
        assert "What 1.0.0 brings" in stored and "kept_one" in stored
    finally:
        admin.post("/packs/kept/remove", data={"csrf": token, "confirmed": "yes", "undo": "1.0.0"})
    assert installed(console) == {}

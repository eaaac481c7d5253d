"""The persona editor of the console over plain HTTP: admins only, the REST rules (validation
beside each field, file personas read-only), a preview that stores nothing, CSRF on every post,
each change audited and in the registry at once, and what a user typed shown as text."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.support.browser import Console, csrf_of
from tests.support.skills import write_persona

FIELDS = {
    "name": "night_watch",
    "description": "Watches <b>the night</b> shift.",
    "when_to_use": "At night.",
    "permission_mode": "read-only",
    "tools": "host_info\nport_*",
    "disallowed_tools": "",
    "max_turns": "",
    "model": "",
    "critical_reminder": "",
    "prompt": "You watch.\n<script>alert(1)</script>",
}


def post(client: httpx.Client, path: str, fields: dict[str, Any], **extra: str) -> httpx.Response:
    csrf = csrf_of(client.get("/personas/new" if path == "/personas/new" else path).text)
    return client.post(path, data={"csrf": csrf, **fields, **extra})


@pytest.fixture(autouse=True)
def no_stored(console: Console) -> None:
    """Each test starts with no stored persona."""
    for entry in console.manager.personas.entries():
        console.manager.personas.delete(entry.row.name, "test")


@pytest.mark.parametrize("who", ["olga", "vera"])
def test_only_an_admin_gets_the_editor(console: Console, who: str) -> None:
    with console.logged_in(who) as client:
        assert client.get("/personas/new").status_code == 403
        assert "New persona" not in client.get("/personas").text
        csrf = console.csrf(client)
        answer = client.post("/personas/new", data={"csrf": csrf, **FIELDS, "_action": "save"})
        assert answer.status_code == 403
    assert "night_watch" not in console.manager.registry.personas


def test_an_admin_previews_then_creates_a_persona_shown_as_text(console: Console) -> None:
    with console.logged_in("admin") as client:
        preview = post(client, "/personas/new", FIELDS, _action="preview")
        assert preview.status_code == 200
        assert "Offered now (2)" in preview.text  # host_info and port_check
        assert "<code>port_check</code>" in preview.text
        assert "night_watch" not in console.manager.registry.personas  # nothing stored
        created = post(client, "/personas/new", FIELDS, _action="save")
        assert created.status_code == 303
        assert created.headers["location"] == "/personas/night_watch"
        page = client.get("/personas/night_watch").text
    persona = console.manager.registry.persona("night_watch")
    assert persona.tools == ("host_info", "port_*")
    assert persona.prompt == "You watch.\n<script>alert(1)</script>\n"
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page
    assert "<script>alert(1)" not in page
    assert "Watches &lt;b&gt;the night&lt;/b&gt; shift." in page
    entry = console.store.audit.entries(action="persona.created")[0]  # the newest
    assert (entry["actor"], entry["subject"]) == ("admin", "night_watch")


def test_a_refused_field_is_shown_beside_it_and_nothing_is_stored(console: Console) -> None:
    with console.logged_in("admin") as client:
        bad = post(client, "/personas/new", {**FIELDS, "disallowed_tools": "a*b"}, _action="save")
        assert bad.status_code == 400
        assert 'id="persona-disallowed_tools-error"' in bad.text
        assert "only prefix* or *suffix are allowed" in bad.text
        assert "a*b" in bad.text  # the field keeps what was typed
        mode = post(client, "/personas/new", {**FIELDS, "permission_mode": "yolo"}, _action="save")
        assert mode.status_code == 400
        assert "permission_mode must be one of" in mode.text
    assert "night_watch" not in console.manager.registry.personas


def test_a_file_persona_is_read_only_in_the_editor(console: Console) -> None:
    with console.logged_in("admin") as client:
        assert client.get("/personas/reader/edit").status_code == 409
        assert client.get("/personas/default/delete").status_code == 409
        assert "/personas/reader/edit" not in client.get("/personas/reader").text
        clash = post(client, "/personas/new", {**FIELDS, "name": "reader"}, _action="save")
        assert clash.status_code == 409
        assert "read-only here" in clash.text
    assert console.manager.registry.persona("reader").origin.endswith("reader.md")


def test_the_may_delegate_box_stores_can_delegate_and_shows_it_again(console: Console) -> None:
    with console.logged_in("admin") as client:
        saved = post(client, "/personas/new", {**FIELDS, "can_delegate": "on"}, _action="save")
        assert saved.status_code == 303
        assert console.manager.registry.persona("night_watch").can_delegate
        form = client.get("/personas/night_watch/edit").text
        assert 'name="can_delegate" value="on" checked' in form
        unticked = post(client, "/personas/night_watch/edit", FIELDS, _action="save")
        assert unticked.status_code == 303
    assert not console.manager.registry.persona("night_watch").can_delegate


def test_an_admin_edits_and_deletes_a_stored_persona_and_a_forged_post_is_refused(
    console: Console,
) -> None:
    with console.logged_in("admin") as client:
        assert post(client, "/personas/new", FIELDS, _action="save").status_code == 303
        form = client.get("/personas/night_watch/edit").text
        assert "host_info\nport_*</textarea>" in form
        forged = client.post(
            "/personas/night_watch/edit", data={**FIELDS, "csrf": "forged", "_action": "save"}
        )
        assert forged.status_code == 403
        edit = {**FIELDS, "permission_mode": "mutating-with-confirm", "tools": ""}
        saved = post(client, "/personas/night_watch/edit", edit, _action="save")
        assert saved.status_code == 303
        assert console.manager.registry.persona("night_watch").tools == ()
        unconfirmed = post(client, "/personas/night_watch/delete", {})
        assert unconfirmed.status_code == 400
        deleted = post(client, "/personas/night_watch/delete", {"confirmed": "yes"})
        assert deleted.status_code == 303
    assert "night_watch" not in console.manager.registry.personas
    newest = console.store.audit.entries(subject="night_watch", limit=3)
    assert [e["action"] for e in newest] == [
        "persona.deleted",
        "persona.updated",
        "persona.created",
    ]
    assert {e["actor"] for e in newest} == {"admin"}


def test_a_stored_persona_hidden_by_a_later_file_is_listed_and_may_be_deleted(
    console: Console,
) -> None:
    document = {"name": "late_file", "description": "d", "when_to_use": "w"}
    console.manager.personas.create(document, "admin")
    folder = Path(console.settings.persona_dirs[0])
    path = write_persona(folder, "late_file", "read-only")
    try:
        assert console.rest("POST", "/v1/reload").status_code == 200
        with console.logged_in("admin") as client:
            listing = client.get("/personas").text
            assert "Stored personas not in use" in listing
            assert "hidden by the file persona of the same name" in listing
            assert client.get("/personas/late_file/delete").status_code == 200
            deleted = post(client, "/personas/late_file/delete", {"confirmed": "yes"})
            assert deleted.status_code == 303
            assert "Stored personas not in use" not in client.get("/personas").text
        assert console.manager.registry.persona("late_file").origin == str(path)
    finally:
        path.unlink()
        assert console.rest("POST", "/v1/reload").status_code == 200

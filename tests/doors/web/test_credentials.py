"""The console's credentials over plain HTTP against the served console: the credentials page
and the binders of skill and pack pages are for admins only (the REST door's refusal for anyone
else, for every page and post), changes go through the same calls as ``/v1/credentials``, and no
answer ever holds a value: not the pages, not a refused form shown again, not the audit."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import quote

import httpx
import pytest

from ongrid_skills.packs.build import build_archive
from tests.support.browser import Console, console_server
from tests.support.packs import write_pack
from tests.support.skills import write_skill

SECRET = "tok_console-7f3a9e21-LIVE"
OTHER = "tok_rotated-55c1d0b8-LIVE"
PASTED = "tok_pasted-0d9e8f7a-LIVE"
VALUES = (SECRET, OTHER, PASTED)
SLOT = {
    "slot": "api",
    "label": "API token",
    "fields": ["token"],
    "inject": {
        "env": {"API_TOKEN": "{{token}}"},
        "files": [{"path": "api/token", "content": "{{token}}", "mode": "0400"}],
    },
}
#: Prints its token: the runner masks it, and no page may show it either way.
LEAKY = '#!/bin/sh\nprintf \'{"token": "%s"}\\n\' "$API_TOKEN"\n'


def slot_skills(root: Path) -> None:
    write_skill(root, "api_call", LEAKY, credentials=[SLOT], category="testing")
    write_skill(root, "api_change", LEAKY, credentials=[SLOT], **{"class": "dangerous"})


@pytest.fixture(scope="module")
def console(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Console]:
    with console_server(tmp_path_factory.mktemp("console"), more_skills=slot_skills) as served:
        yield served


@pytest.fixture(scope="module")
def pack_installed(console: Console, tmp_path_factory: pytest.TempPathFactory) -> str:
    """A pack ``vault-ops`` whose skill ``vault_read`` declares the slot ``api``."""
    base = tmp_path_factory.mktemp("pack")
    folder = write_pack(base / "src", "vault-ops", skills=())
    write_skill(folder / "skills", "vault_read", LEAKY, credentials=[SLOT])
    archive = build_archive(folder, base).path.read_bytes()
    with console.logged_in("admin") as client:
        answer = client.post(
            "/packs/upload",
            files={"file": ("vault-ops.tar.gz", archive, "application/gzip")},
            data={"csrf": console.csrf(client), "allow_unsigned": "true"},
        )
        assert answer.status_code == 200, answer.text  # the review: confirm it
        fields = dict(
            re.findall(r'<input type="hidden" name="([^"]+)" value="([^"]*)">', answer.text)
        )
        answer = client.post("/packs/upload/confirm", data=fields)
        assert "Installed vault-ops 1.0.0." in answer.text, answer.text
    assert console.manager.registry.get("vault_read").source == "pack:vault-ops"
    return "vault-ops"


def credential_names(console: Console) -> list[str]:
    return [c["name"] for c in console.rest("GET", "/v1/credentials").json()["items"]]


def refused_code(html: str) -> str:
    start = html.index('<code class="error-code">') + len('<code class="error-code">')
    return html[start : html.index("</code>", start)]


def leaks(text: str) -> list[str]:
    forms = [v for v in VALUES] + [quote(v, safe="") for v in VALUES]
    return [form for form in forms if form in text]


FILLED_BOX = re.compile(r'<input[^>]*name="(value|reference)_\d+"[^>]*\bvalue=')


def create_form(token: str, name: str, **rows: str) -> dict[str, str]:
    return {"csrf": token, "name": name, **rows}


def test_an_admin_creates_rotates_and_deletes_and_sees_no_value(
    console: Console,
) -> None:
    shown: list[httpx.Response] = []
    with console.logged_in("admin") as admin:
        assert 'href="/credentials"' in admin.get("/skills").text  # in an admin's navigation
        token = console.csrf(admin, "/credentials")
        made = admin.post(
            "/credentials",
            data=create_form(
                token,
                "ops-api",
                field_0="token",
                value_0=SECRET,
                field_1="kube",
                reference_1="file:/run/secrets/kubeconfig",
            ),
        )
        assert made.status_code == 303
        assert made.headers["location"] == "/credentials?done=created&name=ops-api"
        page = admin.get(made.headers["location"])
        shown.append(page)
        assert "Created ops-api: its values are sealed" in page.text
        card = page.text[page.text.index('id="credential-ops-api"') :]
        assert re.search(r"<code>kube</code> <span class=\"kind\">file</span>", card)
        assert re.search(r"<code>token</code> <span class=\"kind\">stored</span>", card)
        assert "/run/secrets/kubeconfig" not in page.text  # a reference's text is not shown

        rotated = admin.post(
            "/credentials/ops-api/rotate",
            data={"csrf": token, "field_0": "token", "value_0": OTHER},
        )
        assert rotated.status_code == 303
        shown.append(admin.get(rotated.headers["location"]))
        assert "Rotated ops-api" in shown[-1].text
        deleted = admin.post("/credentials/ops-api/delete", data={"csrf": token})
        assert deleted.status_code == 303
        shown.append(admin.get(deleted.headers["location"]))
    assert "ops-api" not in credential_names(console)
    actions = [
        e["action"] for e in console.rest("GET", "/v1/audit?subject=ops-api").json()["items"]
    ]
    assert {"credential.created", "credential.rotated", "credential.deleted"} <= set(actions)
    for answer in shown:
        assert not leaks(answer.text), answer.request.url


def test_a_refused_form_is_shown_again_without_what_was_typed(console: Console) -> None:
    with console.logged_in("admin") as admin:
        token = console.csrf(admin, "/credentials")
        first = admin.post(
            "/credentials", data=create_form(token, "dup", field_0="token", value_0=SECRET)
        )
        assert first.status_code == 303
        cases = [
            (create_form(token, "dup", field_0="token", value_0=OTHER), 409, "conflict"),
            (
                create_form(token, "pasted", field_0="token", reference_0=PASTED),
                400,
                "invalid_request",
            ),
            (
                create_form(token, "both", field_0="token", value_0=OTHER, reference_0="env:X_Y"),
                400,
                "invalid_request",
            ),
            (create_form(token, "short", field_0="token", value_0="abc"), 400, "invalid_request"),
            (create_form(token, "nameless", value_1=PASTED), 400, "invalid_request"),
            (
                create_form(token, "Bad Name!", field_0="token", value_0=OTHER),
                400,
                "invalid_request",
            ),
        ]
        for form, status, code in cases:
            answer = admin.post("/credentials", data=form)
            assert (answer.status_code, refused_code(answer.text)) == (status, code), form
            assert "Refused: nothing was changed" in answer.text
            assert not leaks(answer.text), form
            assert 'type="password"' in answer.text and not FILLED_BOX.search(answer.text)
        shown_again = admin.post(
            "/credentials", data=create_form(token, "pasted", field_0="token", reference_0=PASTED)
        )
        assert 'value="pasted"' in shown_again.text and 'value="token"' in shown_again.text
        assert not FILLED_BOX.search(shown_again.text)
        assert FILLED_BOX.search('<input name="value_0" type="password" value="x">')  # it sees one
        for path, form, status in [
            ("/credentials/dup/rotate", {"field_0": "token", "reference_0": PASTED}, 400),
            ("/credentials/nope/rotate", {"field_0": "token", "value_0": OTHER}, 404),
            ("/credentials/nope/delete", {}, 404),
        ]:
            answer = admin.post(path, data={"csrf": token, **form})
            assert answer.status_code == status, path
            assert not leaks(answer.text), path
        assert not leaks(admin.get("/audit").text)
        admin.post("/credentials/dup/delete", data={"csrf": token})
    assert {"dup", "pasted", "both", "short", "nameless"} & set(credential_names(console)) == set()


def test_a_skill_page_shows_its_slots_and_an_admin_binds_and_unbinds(console: Console) -> None:
    with console.logged_in("admin") as admin:
        token = console.csrf(admin, "/credentials")
        admin.post(
            "/credentials", data=create_form(token, "api-key", field_0="token", value_0=SECRET)
        )
        page = admin.get("/skills/api_call").text
        assert 'id="credentials"' in page and "API token" in page
        assert "<code>API_TOKEN</code>" in page
        assert "<code>$CREDENTIALS_DIRECTORY/api/token (0400)</code>" in page
        assert "nothing bound: the skill is unavailable" in page
        assert 'action="/skills/api_call/credentials/api/bind"' in page
        bound = admin.post(
            "/skills/api_call/credentials/api/bind", data={"csrf": token, "credential": "api-key"}
        )
        assert bound.status_code == 303
        assert bound.headers["location"] == "/skills/api_call#credentials"
        page = admin.get("/skills/api_call").text
        assert "<strong>api-key</strong> (this skill's own binding" in page
        assert 'class="badge available"' in page
        assert console.manager.registry.get("api_call").available
        ran = console.rest("POST", "/v1/skills/api_call/execute", "olga", json={"args": {}})
        assert ran.json()["status"] == "succeeded", ran.text
        for path in (
            "/skills/api_call",
            f"/executions/{ran.json()['id']}",
            "/credentials",
            "/skills",
        ):
            assert not leaks(admin.get(path).text), path
        unbound = admin.post("/skills/api_call/credentials/api/unbind", data={"csrf": token})
        assert unbound.status_code == 303
        assert "nothing bound: the skill is unavailable" in admin.get("/skills/api_call").text
        assert not console.manager.registry.get("api_call").available
        missing = admin.post(
            "/skills/api_call/credentials/api/bind", data={"csrf": token, "credential": "nope"}
        )
        assert missing.status_code == 404 and "no credential named" in missing.text
        undeclared = admin.post(
            "/skills/api_call/credentials/other/bind", data={"csrf": token, "credential": "api-key"}
        )
        assert undeclared.status_code == 404


def test_a_pack_card_binds_a_slot_for_its_skills(console: Console, pack_installed: str) -> None:
    with console.logged_in("admin") as admin:
        token = console.csrf(admin, "/credentials")
        admin.post(
            "/credentials", data=create_form(token, "vault-key", field_0="token", value_0=SECRET)
        )
        card = admin.get("/packs").text
        assert 'id="pack-vault-ops-slot-api"' in card and "nothing bound to the pack" in card
        bound = admin.post(
            "/packs/vault-ops/credentials/api/bind", data={"csrf": token, "credential": "vault-key"}
        )
        assert bound.status_code == 303 and bound.headers["location"] == "/packs#pack-vault-ops"
        assert "<strong>vault-key</strong> bound to the pack" in admin.get("/packs").text
        page = admin.get("/skills/vault_read").text
        assert "<strong>vault-key</strong> (bound to pack" in page
        assert console.manager.registry.get("vault_read").available
        assert not leaks(admin.get("/packs").text)
        assert (
            admin.post("/packs/vault-ops/credentials/api/unbind", data={"csrf": token}).status_code
            == 303
        )
        assert not console.manager.registry.get("vault_read").available


def test_an_approval_card_names_the_credentials_the_call_will_use(console: Console) -> None:
    with console.logged_in("admin") as admin:
        token = console.csrf(admin, "/credentials")
        admin.post(
            "/credentials", data=create_form(token, "change-key", field_0="token", value_0=SECRET)
        )
        admin.post(
            "/skills/api_change/credentials/api/bind",
            data={"csrf": token, "credential": "change-key"},
        )
        asked = console.rest("POST", "/v1/skills/api_change/execute", "olga", json={"args": {}})
        assert asked.status_code == 202, asked.text
        approval = asked.json()["approval_id"]
        used = "<code>change-key</code> for slot <code>api</code>"
        for path in ("/approvals", f"/approvals/{approval}"):
            page = admin.get(path).text
            assert used in page, path
            assert not leaks(page)


@pytest.mark.parametrize("who", ["olga", "vera"])
def test_anyone_but_an_admin_gets_the_refusal_rest_gives_and_no_binder(
    console: Console, pack_installed: str, who: str
) -> None:
    rest = console.rest("GET", "/v1/credentials", who).json()["error"]["message"]
    before = credential_names(console)
    with console.logged_in(who) as client:
        token = console.csrf(client)
        assert 'href="/credentials"' not in client.get("/skills").text
        page = client.get("/skills/api_call").text
        assert 'id="credentials"' in page and "/credentials/api/bind" not in page  # read, no binder
        answers = [
            client.get("/credentials"),
            client.post(
                "/credentials", data=create_form(token, "mine", field_0="token", value_0=SECRET)
            ),
            client.post(
                "/credentials/api-key/rotate",
                data={"csrf": token, "field_0": "token", "value_0": OTHER},
            ),
            client.post("/credentials/api-key/delete", data={"csrf": token}),
            client.post(
                "/skills/api_call/credentials/api/bind",
                data={"csrf": token, "credential": "api-key"},
            ),
            client.post("/skills/api_call/credentials/api/unbind", data={"csrf": token}),
            client.post(
                "/packs/vault-ops/credentials/api/bind",
                data={"csrf": token, "credential": "api-key"},
            ),
            client.post("/packs/vault-ops/credentials/api/unbind", data={"csrf": token}),
        ]
    for answer in answers:
        assert answer.status_code == 403, answer.request.url
        assert rest in answer.text
        assert not leaks(answer.text)
    assert credential_names(console) == before


def test_a_change_without_the_csrf_token_or_from_another_site_is_refused(console: Console) -> None:
    with console.logged_in("admin") as admin:
        token = console.csrf(admin, "/credentials")
        form = create_form("0" * 64, "forged", field_0="token", value_0=SECRET)
        answers = [
            admin.post("/credentials", data={k: v for k, v in form.items() if k != "csrf"}),
            admin.post("/credentials", data=form),
            admin.post(
                "/credentials",
                data={**form, "csrf": token},
                headers={"origin": "https://evil.example"},
            ),
            admin.post("/skills/api_call/credentials/api/bind", data={"credential": "api-key"}),
        ]
    assert [a.status_code for a in answers] == [403] * len(answers)
    assert "forged" not in credential_names(console)

"""An ``install_skill`` request's card in the console shows the pack it installs: id, version,
digest, signer and what it brings, as checked when the request was made."""

from __future__ import annotations

import json
from pathlib import Path

from tests.support.browser import console_server
from tests.support.skills import EXAMPLE_SKILLS

EXAMPLES = EXAMPLE_SKILLS.parent / "packs"
OPS = json.loads((EXAMPLES / "index.json").read_text())["packs"][0]["versions"][0]


def test_an_install_skill_card_shows_the_pack_its_signers_sign_for(tmp_path: Path) -> None:
    overrides = {
        "bundled_skills": True,
        "trusted_pack_keys": str(EXAMPLES / "TEST-KEY-DO-NOT-USE.pub"),
        "pack_indexes": (str(EXAMPLES / "index.json"),),
    }
    with console_server(tmp_path, example_skills=False, **overrides) as console:
        body = {"args": {"source": "ops-basics"}}
        asked = console.rest("POST", "/v1/skills/install_skill/execute", "olga", json=body)
        assert asked.status_code == 202, asked.text
        approval = asked.json()["approval_id"]
        shown = console.rest("GET", f"/v1/approvals/{approval}", "admin").json()
        assert shown["args"] == {"source": "ops-basics", "digest": OPS["digest"]}
        assert shown["preview"]["pack"]["signer"]["key"] == OPS["signer"]
        with console.logged_in("admin") as admin:
            for path in ("/approvals", f"/approvals/{approval}"):
                page = admin.get(path).text
                assert f"<code>ops-basics@{OPS['version']}</code>" in page, path
                assert f'<code class="hash">{OPS["digest"]}</code>' in page
                assert f"<code>{OPS['signer']}</code> (trusted)" in page
                assert "skill <code>listening_sockets</code>" in page
                assert "persona <code>oncall</code> read-only" in page

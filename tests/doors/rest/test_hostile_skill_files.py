"""Skill and persona files holding what JSON cannot carry are refused at load, never served.

Before, each of these loaded and then made a listing answer 500: a lone surrogate in a
skill.json (the body could not be encoded), a YAML date in a tool schema (json.dumps), bytes or
NaN in a persona's extra keys (the response serialiser), a schema 400 levels deep (the tools
export and the validator).
"""

from __future__ import annotations

import json
from pathlib import Path

from tests.support.agent import make_settings
from tests.support.mcp import write_skill
from tests.support.server import running_app


def test_hostile_files_are_loader_errors_and_every_listing_answers_200(tmp_path: Path) -> None:
    skills = tmp_path / "skills"
    native = tmp_path / "native"
    (native / "dated").mkdir(parents=True)
    write_skill(skills, "fine")
    surrogate = write_skill(skills, "surrogate")
    (surrogate / "skill.json").write_text(
        '{"name": "surrogate", "description": "x \\ud800 y", "entry": "run"}'
    )
    deep: dict[str, object] = {"type": "object"}
    node = deep
    for _ in range(400):
        node["not"] = {}
        node = node["not"]  # type: ignore[assignment]
    write_skill(skills, "deep", schema=deep)
    (native / "dated" / "SKILL.md").write_text(
        "---\nname: dated\ndescription: d\nversion: 2001-13-45\ntools:\n"
        "  - {name: dated_probe, impl: 'builtin:net.probe_tcp',\n"
        "     schema: {type: object, properties: {h: {type: string, default: 2001-01-01}}}}\n"
        "---\n"
    )
    settings = make_settings(tmp_path, skills, native_dirs=(str(native),))
    personas = Path(settings.persona_dirs[0])
    (personas / "blob.md").write_text(
        "---\nname: blob\ndescription: d\nwhen_to_use: w\nblob: !!binary /w==\n---\n"
    )
    (personas / "nan.md").write_text(
        "---\nname: nan\ndescription: d\nwhen_to_use: w\nnum: .nan\n---\n"
    )
    with running_app(settings) as server:
        health = server.call("GET", "/v1/health").json()
        assert health["skills"] == 2  # fine, dated_probe
        assert health["loader_errors"] == 3  # surrogate, deep, blob (.nan is kept as text)
        listed = server.call("GET", "/v1/skills")
        assert listed.status_code == 200
        assert sorted(s["name"] for s in listed.json()["items"]) == ["dated_probe", "fine"]
        dated = server.call("GET", "/v1/skills/dated_probe").json()
        assert dated["extra"] == {"version": "2001-13-45"}
        assert dated["schema"]["properties"]["h"]["default"] == "2001-01-01"
        assert server.call("GET", "/v1/personas").status_code == 200
        for fmt in ("openai", "anthropic", "mcp"):
            tools = server.call("GET", f"/v1/personas/default/tools?format={fmt}")
            assert tools.status_code == 200, tools.text
        ran = server.call("POST", "/v1/skills/fine/execute", json={"args": {}})
        assert json.loads(ran.text)["status"] == "succeeded"

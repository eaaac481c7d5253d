"""The capability summary of a staged pack: what it brings, read from hostile files without
trusting their shapes, and bounded whatever they declare."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from ongrid_skills.errors import PackError
from ongrid_skills.packs.contents import inspect_pack
from ongrid_skills.packs.keys import parse_trusted_keys
from ongrid_skills.packs.source import staged
from ongrid_skills.packs.summary import MAX_NAMES, capability_summary, summary_lines
from ongrid_skills.packs.trust import judge
from tests.support.packs import write_pack
from tests.support.skills import write_persona, write_skill, write_skill_md


def summarise(folder: Path) -> dict[str, Any]:
    with staged(folder) as pack:
        verdict = judge(pack.digest, pack.signature, parse_trusted_keys(""))
        contents = inspect_pack(pack.detected)
        contents.raise_for_errors(pack.manifest.label)
        return capability_summary(pack, verdict, contents, str(folder))


def test_classes_scope_modes_and_requirements_are_listed_and_bounded(tmp_path: Path) -> None:
    folder = write_pack(tmp_path / "p", "mixed", "2.1.0", skills=())
    write_skill(folder / "skills", "wipe", **{"class": "dangerous"})
    write_skill(folder / "skills", "bump", **{"class": "mutating"})
    many = [f"tool{i:03d}" for i in range(MAX_NAMES + 50)]
    write_skill_md(
        folder / "skills",
        "hostile",
        {
            "name": "hostile_reqs",
            "description": "Declares odd requirements.",
            "metadata": {
                "requires": {"bins": many},
                "openclaw": {
                    "requires": {"env": ["API_KEY", 7, ""], "anyBins": "jq", "config": {"x": 1}}
                },
            },
        },
    )
    write_persona(folder / "agents", "fixer", "mutating-with-confirm")

    summary = summarise(folder)

    assert (summary["id"], summary["version"], summary["layout"]) == ("mixed", "2.1.0", "pack")
    assert summary["signer"] == {"key": None, "trust": "unsigned", "trusted": False}
    assert summary["classes"] == {"safe": 0, "mutating": 1, "dangerous": 1}
    by_name = {s["name"]: s for s in summary["skills"]}
    assert by_name["wipe"]["class"] == "dangerous" and by_name["wipe"]["scope"] == "manager"
    hostile = by_name["hostile_reqs"]
    assert len(hostile["requires"]["bins"]) == MAX_NAMES
    assert "jq" in hostile["requires"]["bins"]
    assert hostile["requires"]["config"] == []  # openclaw's mapping where a list belongs: ignored
    assert hostile["requires"]["env"] == ["API_KEY"]
    assert summary["requires"]["env"] == ["API_KEY"]
    assert summary["personas"] == [
        {
            "name": "fixer",
            "description": "The fixer persona.",
            "permission_mode": "mutating-with-confirm",
        }
    ]
    assert summary["warnings"][0] == "signature: unsigned"
    json.dumps(summary)  # plain JSON, as stored and answered
    lines = summary_lines(summary)
    assert lines[0] == "pack mixed@2.1.0: The mixed pack"
    assert "personas (1):" in lines


@pytest.mark.parametrize(
    ("manifest", "said"),
    [
        (b"{not json", "pack.json"),
        (b'{"id": "../../etc", "version": "1.0.0"}', "id"),
        (b'{"id": "ok", "version": "yesterday"}', "version"),
    ],
)
def test_a_bad_manifest_is_a_clear_pack_error_not_a_summary(
    tmp_path: Path, manifest: bytes, said: str
) -> None:
    folder = write_pack(tmp_path / "p", "ok", "1.0.0")
    (folder / "pack.json").write_bytes(manifest)

    with pytest.raises(PackError) as caught:
        summarise(folder)

    assert caught.value.code == "invalid_pack"
    assert said in caught.value.message

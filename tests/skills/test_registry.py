"""The registry: an immutable snapshot, sorted and filtered listings, atomic reloads."""

from __future__ import annotations

import json
import threading
from pathlib import Path
from types import MappingProxyType
from typing import Any

import pytest

import ongrid_skills
from ongrid_skills import PermissionMode, Persona, Settings, SkillClass
from ongrid_skills.errors import NotFound, UnknownPersona, UnknownSkill
from ongrid_skills.governance.gate import offered
from ongrid_skills.skills.registry import Registry, RegistryHolder, build_registry

SCRIPT = "#!/bin/sh\ncat >/dev/null\necho '{\"ok\": true}'\n"


def write_skill(folder: Path, name: str, **fields: Any) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "run").write_text(SCRIPT)
    (folder / "run").chmod(0o755)
    body = {"name": name, "description": f"The {name} skill", "entry": "run", **fields}
    path = folder / "skill.json"
    path.write_text(json.dumps(body))
    return path


def load(root: Path) -> Registry:
    return ongrid_skills.load_registry(
        external_dirs=[str(root)],
        persona_dirs=[],
        settings=Settings.load(environ={"ONGRID_BUNDLED_SKILLS": "0"}),
        log=lambda _line: None,
    )


@pytest.fixture
def root(tmp_path: Path) -> Path:
    root = tmp_path / "skills"
    # Folder order differs from name order on purpose.
    write_skill(root / "1", "zap_cache", description="Clear the build cache", category="ops")
    write_skill(root / "2", "disk_usage", description="Report DISK usage per mount")
    write_skill(
        root / "3",
        "restart_service",
        description="Restart a unit",
        category="ops",
        **{"class": "mutating"},
    )
    write_skill(
        root / "4",
        "wipe_volume",
        description="Destroy a volume",
        category="storage",
        **{"class": "dangerous"},
    )
    write_skill(root / "5", "probe_tcp", description="Open a TCP connection", category="network")
    return root


def names(skills: list[Any]) -> list[str]:
    return [s.name for s in skills]


def test_the_registry_mappings_are_read_only_proxies(root: Path) -> None:
    registry = load(root)
    assert isinstance(registry.skills, MappingProxyType)
    assert isinstance(registry.personas, MappingProxyType)
    with pytest.raises(TypeError):
        registry.skills["evil"] = registry.get("probe_tcp")  # type: ignore[index]
    with pytest.raises(TypeError):
        del registry.skills["probe_tcp"]  # type: ignore[attr-defined]
    with pytest.raises(TypeError):
        registry.personas["evil"] = registry.persona("default")  # type: ignore[index]
    with pytest.raises(AttributeError):
        registry.extra = 1  # type: ignore[attr-defined]
    assert len(registry) == 5


def test_a_registry_does_not_change_when_the_dict_it_was_built_from_does(root: Path) -> None:
    base = load(root)
    source = dict(base.skills)
    registry = Registry(source)
    source.pop("probe_tcp")
    assert "probe_tcp" in registry
    assert len(registry) == 5


def test_the_listing_is_sorted_by_name_whatever_the_walk_order(root: Path) -> None:
    registry = load(root)
    assert names(registry.list()) == [
        "disk_usage",
        "probe_tcp",
        "restart_service",
        "wipe_volume",
        "zap_cache",
    ]


def test_the_listing_filters_by_category(root: Path) -> None:
    registry = load(root)
    assert names(registry.list(category="ops")) == ["restart_service", "zap_cache"]
    assert names(registry.list(category="external")) == ["disk_usage"]
    assert names(registry.list(category="nothing")) == []


def test_the_listing_filters_by_class(root: Path) -> None:
    registry = load(root)
    assert names(registry.list(skill_class=SkillClass.SAFE)) == [
        "disk_usage",
        "probe_tcp",
        "zap_cache",
    ]
    assert names(registry.list(skill_class=SkillClass.MUTATING)) == ["restart_service"]
    assert names(registry.list(skill_class=SkillClass.DANGEROUS)) == ["wipe_volume"]


def test_the_listing_filters_by_a_case_insensitive_query_on_name_and_description(
    root: Path,
) -> None:
    registry = load(root)
    assert names(registry.list(query="disk")) == ["disk_usage"]
    assert names(registry.list(query="DISK")) == ["disk_usage"]
    assert names(registry.list(query="tcp")) == ["probe_tcp"]
    assert names(registry.list(query="volume")) == ["wipe_volume"]
    assert names(registry.list(query="no such thing")) == []


def test_the_listing_filters_combine(root: Path) -> None:
    registry = load(root)
    assert names(registry.list(category="ops", skill_class=SkillClass.SAFE)) == ["zap_cache"]
    assert names(registry.list(category="ops", query="unit")) == ["restart_service"]


def test_the_listing_for_a_persona_keeps_only_what_its_mode_and_lists_allow(root: Path) -> None:
    registry = load(root)
    read_only = registry.persona("default")
    assert read_only.permission_mode is PermissionMode.READ_ONLY
    assert names(registry.list(keep=lambda s: offered(s, read_only))) == [
        "disk_usage",
        "probe_tcp",
        "zap_cache",
    ]
    confirm = Persona(
        name="ops",
        description="d",
        when_to_use="w",
        permission_mode=PermissionMode.MUTATING_WITH_CONFIRM,
        disallowed_tools=("zap_*",),
    )
    assert names(registry.list(keep=lambda s: offered(s, confirm))) == [
        "disk_usage",
        "probe_tcp",
        "restart_service",
    ]


def test_get_returns_the_skill_and_an_unknown_name_raises_unknown_skill(root: Path) -> None:
    registry = load(root)
    assert registry.get("probe_tcp").name == "probe_tcp"
    assert "probe_tcp" in registry
    assert "nope" not in registry
    with pytest.raises(UnknownSkill) as info:
        registry.get("nope")
    assert isinstance(info.value, NotFound)
    assert info.value.code == "not_found"
    assert info.value.name == "nope"


def test_an_unknown_persona_raises_unknown_persona_and_default_is_always_there(
    root: Path,
) -> None:
    registry = load(root)
    assert registry.persona("default").name == "default"
    with pytest.raises(UnknownPersona):
        registry.persona("nope")


def test_reload_swaps_in_a_new_registry_while_the_old_one_keeps_working(root: Path) -> None:
    holder = RegistryHolder(lambda: load(root))
    old = holder.current
    old_skill = old.get("probe_tcp")

    (root / "5" / "skill.json").unlink()  # probe_tcp withdrawn
    write_skill(root / "6", "tail_file")  # a new skill deployed

    fresh = holder.reload()
    assert fresh is holder.current
    assert fresh is not old
    assert "tail_file" in fresh
    assert "probe_tcp" not in fresh
    with pytest.raises(UnknownSkill):
        fresh.get("probe_tcp")
    # The snapshot fetched before the reload is untouched.
    assert "tail_file" not in old
    assert old.get("probe_tcp") is old_skill
    assert names(old.list()) == [
        "disk_usage",
        "probe_tcp",
        "restart_service",
        "wipe_volume",
        "zap_cache",
    ]


def test_reload_never_shows_a_half_built_registry_to_readers(root: Path) -> None:
    holder = RegistryHolder(lambda: load(root))
    errors: list[BaseException] = []
    stop = threading.Event()

    def reader() -> None:
        try:
            while not stop.is_set():
                current = holder.current
                assert len(current) == 5
                current.get("probe_tcp")
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=reader) for _ in range(3)]
    for t in threads:
        t.start()
    try:
        for _ in range(20):
            holder.reload()
    finally:
        stop.set()
        for t in threads:
            t.join()
    assert errors == []


def test_build_registry_keeps_the_load_report(root: Path) -> None:
    write_skill(root / "7", "disk_usage")
    registry = build_registry([str(root)], [], sink=lambda _line: None)
    assert registry.report.registered == 5
    assert registry.report.duplicates == 1

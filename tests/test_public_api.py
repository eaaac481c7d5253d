"""The Python API of SPEC §16: what `ongrid_skills` exports, and that every name is real."""

from __future__ import annotations

import importlib.metadata
import inspect

import ongrid_skills

#: SPEC §16: loading, executing, what they take and give back, and the typed errors it raises.
SPEC_NAMES = {
    "load_registry",
    "execute",
    "Registry",
    "Skill",
    "Persona",
    "Execution",
    "Event",
    "Status",
    "Settings",
    "SkillError",
    "UnknownSkill",
    "UnknownPersona",
    "InvalidArgs",
    "Denied",
    "ApprovalRequired",
}


def test_all_is_sorted_and_without_duplicates() -> None:
    assert ongrid_skills.__all__ == sorted(set(ongrid_skills.__all__))


def test_every_exported_name_resolves() -> None:
    for name in ongrid_skills.__all__:
        assert getattr(ongrid_skills, name) is not None, name


def test_the_spec_names_are_exported() -> None:
    assert set(ongrid_skills.__all__) >= SPEC_NAMES


def test_load_registry_and_execute_are_what_the_spec_calls() -> None:
    assert callable(ongrid_skills.load_registry)
    assert inspect.iscoroutinefunction(ongrid_skills.execute)
    parameters = inspect.signature(ongrid_skills.execute).parameters
    assert {"confirm", "persona", "on_event"} <= set(parameters)
    loading = inspect.signature(ongrid_skills.load_registry).parameters
    assert {"external_dirs", "native_dirs", "persona_dirs"} <= set(loading)


def test_every_exported_error_is_a_skill_error() -> None:
    errors = [
        getattr(ongrid_skills, name)
        for name in ongrid_skills.__all__
        if inspect.isclass(getattr(ongrid_skills, name))
        and issubclass(getattr(ongrid_skills, name), Exception)
    ]
    assert len(errors) >= 6
    assert all(issubclass(error, ongrid_skills.SkillError) for error in errors)


def test_the_version_is_the_installed_distributions() -> None:
    assert ongrid_skills.__version__ == importlib.metadata.version("ongrid-skills")

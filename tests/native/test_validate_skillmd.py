"""`ongrid-skills validate` lints SKILL.md files like manifests and personas."""

from __future__ import annotations

from pathlib import Path

from ongrid_skills.skills.lint import validate_paths


def write(root: Path, folder: str, text: str) -> Path:
    path = root / folder / "SKILL.md"
    path.parent.mkdir(parents=True)
    path.write_text(text)
    return path


def test_a_clean_skill_md_has_no_findings(tmp_path: Path) -> None:
    write(tmp_path, "ok", "---\nname: notes\ndescription: Team notes.\n---\nBody\n")
    assert validate_paths([str(tmp_path)]) == []


def test_a_missing_description_is_an_error_at_its_line(tmp_path: Path) -> None:
    path = write(tmp_path, "bad", "---\nname: notes\nversion: 1\n---\n")
    findings = validate_paths([str(tmp_path)])
    assert [(f.path, f.severity) for f in findings] == [(str(path), "error")]
    assert "description" in findings[0].message


def test_an_unclosed_fence_is_an_error_with_its_position(tmp_path: Path) -> None:
    write(tmp_path, "open", "\n---\nname: x\ndescription: d\n")
    (finding,) = validate_paths([str(tmp_path)])
    assert finding.severity == "error"
    assert finding.line == 2
    assert "not closed" in finding.message


def test_normalised_names_unknown_keys_and_unmet_requirements_are_warnings(
    tmp_path: Path,
) -> None:
    text = (
        "---\nname: pdf-helper\ndescription: d\nlicense: MIT\n"
        "metadata:\n  requires:\n    bins: [no-such-binary-here-xyz]\n---\n"
    )
    write(tmp_path, "pdf", text)
    findings = validate_paths([str(tmp_path)])
    assert {f.severity for f in findings} == {"warning"}
    messages = " | ".join(f.message for f in findings)
    assert 'normalised to "pdf_helper"' in messages
    assert "license" in messages
    assert "no-such-binary-here-xyz" in messages
    assert next(f for f in findings if "license" in f.message).line == 4

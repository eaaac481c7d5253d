"""The layout's figures, read from the source: no import circle between modules (imports under
``TYPE_CHECKING`` and inside functions included), no source file over 500 lines, and at most 14
modules at the top level of the package. The layers themselves are import-linter contracts
(pyproject.toml, run by ``make test``)."""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parent.parent / "src" / "ongrid_skills"
MAX_LINES = 500
MAX_TOP_LEVEL_MODULES = 14


def module_name(path: Path) -> str:
    parts = ["ongrid_skills", *path.relative_to(PACKAGE).with_suffix("").parts]
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def sources() -> dict[str, Path]:
    return {module_name(p): p for p in PACKAGE.rglob("*.py") if "migrations" not in p.parts}


def imports_of(path: Path, known: set[str]) -> set[str]:
    """Every module of ours that ``path`` imports anywhere in its body (relative ones too)."""
    tree = ast.parse(path.read_text(), str(path))
    own = module_name(path)
    package = own if path.name == "__init__.py" else own.rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(tree):
        names: list[str] = []
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parent = package.split(".")[: len(package.split(".")) - (node.level - 1)]
                base = ".".join([*parent, base] if base else parent)
            names = [base, *(f"{base}.{alias.name}" for alias in node.names)]
        for name in names:
            # the longest known prefix: "a.b.c" imports module "a.b" when c is an attribute
            target = name
            while target and target not in known:
                target = target.rpartition(".")[0]
            if target and target != own:
                found.add(target)
    return found


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    out: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for nxt in graph[node]:
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in on_stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                out.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return out


def test_no_module_imports_itself_back_through_others() -> None:
    files = sources()
    known = set(files)
    # A package's __init__ re-exporting its modules is not a circle of the modules themselves.
    graph = {
        name: {
            m
            for m in imports_of(path, known)
            if not (files[m].name == "__init__.py" and name.startswith(m + "."))
        }
        for name, path in files.items()
    }
    assert cycles(graph) == []


def test_no_source_file_is_over_500_lines() -> None:
    long = {
        str(p.relative_to(PACKAGE)): n
        for p in PACKAGE.rglob("*.py")
        if (n := len(p.read_text().splitlines())) > MAX_LINES
    }
    assert long == {}


def test_the_top_level_of_the_package_holds_at_most_14_modules() -> None:
    top = sorted(p.name for p in PACKAGE.glob("*.py") if p.name != "__init__.py")
    assert len(top) <= MAX_TOP_LEVEL_MODULES, top


def test_the_circle_finder_finds_a_circle() -> None:
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]

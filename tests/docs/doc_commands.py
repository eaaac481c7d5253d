"""The ``ongrid-skills`` command lines of the documentation, as the tests read them.

Fenced code blocks of docs/*.md and README.md: shell blocks are split into commands (``|``,
``&&``, ``;``, ``$(…)``), and a command is ours when its program is ``ongrid-skills`` (any path
to it), after environment assignments and ``env``/``sudo``, or after ``--`` (``claude mcp add …
-- /opt/…/ongrid-skills …``), or as the server an ``npx … inspector`` starts (the inspector's own
``--method``/``--tool-name`` options are left to it). JSON blocks count where an object's
``command`` is ongrid-skills (MCP client configurations): its ``args`` are the command line.
A bare ``ongrid-skills`` that is only a name (``claude mcp add … ongrid-skills URL``) is not,
nor one run with ``_ONGRID_SKILLS_COMPLETE=…`` (it prints a shell's completion script).

Inline code in the prose counts too when it is a whole command (`` `ongrid-skills audit verify` ``),
not a synopsis: spans holding ``[``, ``|`` or ``…`` describe a syntax and are left out.
"""

from __future__ import annotations

import json
import re
import shlex
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
PROGRAM = "ongrid-skills"
SHELL_LANGS = {"", "sh", "bash", "shell", "console", "zsh"}
#: Words a command may start with before the program it runs.
PREFIXES = {"env", "sudo", "exec", "time", "nohup", "command"}
#: Options of the MCP Inspector's CLI mode that take a value (they belong to the inspector).
INSPECTOR_OPTIONS = {"--method", "--tool-name", "--tool-arg", "--uri", "--prompt-name"}
SEPARATORS = {"|", "||", "&&", ";", "&", "(", ")"}
REDIRECTS = {"<", ">", ">>", ">&", "<&", "<<<", "&>"}
ASSIGNMENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*=")
SUBSTITUTION = re.compile(r"\$\(([^()]*)\)")
FENCE = re.compile(r"^(```+|~~~+)\s*([\w+-]*)[^\n]*$")
INLINE = re.compile(r"(?<!`)`(ongrid-skills [^`]+)`(?!`)")
SYNOPSIS = ("[", "|", "…", "...")
#: Set, the program prints a completion script instead of running a command (docs/cli.md).
COMPLETION_VARIABLE = "_ONGRID_SKILLS_COMPLETE="


@dataclass(frozen=True)
class Block:
    """One fenced code block: where it is, its language, its text, the heading it is under."""

    path: Path
    line: int  # of the first line inside the fence
    lang: str
    text: str
    heading: str

    @property
    def where(self) -> str:
        return f"{self.path.relative_to(REPO)}:{self.line}"


@dataclass(frozen=True)
class DocCommand:
    """An ongrid-skills command line of a doc: the arguments after the program."""

    where: str
    line: str
    argv: tuple[str, ...]
    #: Inline code in prose may name a command without its arguments (`ongrid-skills show`).
    inline: bool = False


def doc_files() -> list[Path]:
    return [*sorted((REPO / "docs").glob("*.md")), REPO / "README.md"]


def blocks(path: Path) -> list[Block]:
    """The fenced code blocks of a Markdown file, in order."""
    found: list[Block] = []
    heading = ""
    fence: str | None = None
    lang = ""
    start = 0
    body: list[str] = []
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        if fence is None:
            match = FENCE.match(line.strip())
            if match:
                fence, lang, start, body = match.group(1), match.group(2).lower(), number + 1, []
            elif line.startswith("#"):
                heading = line.lstrip("#").strip()
            continue
        if line.strip().startswith(fence) and not line.strip().strip(fence[0]):
            found.append(Block(path, start, lang, "\n".join(body) + "\n", heading))
            fence = None
        else:
            body.append(line)
    return found


def logical_lines(text: str) -> Iterator[tuple[int, str]]:
    """(offset of the first physical line, line) with backslash continuations joined."""
    pending: list[str] = []
    first = 0
    for offset, raw in enumerate(text.splitlines()):
        if not pending:
            first = offset
        if raw.rstrip().endswith("\\"):
            pending.append(raw.rstrip()[:-1])
            continue
        pending.append(raw)
        yield first, " ".join(pending)
        pending = []
    if pending:
        yield first, " ".join(pending)


def _words(line: str) -> list[str]:
    lexer = shlex.shlex(line, posix=True, punctuation_chars="|&;<>()")
    lexer.whitespace_split = True
    lexer.commenters = "#"
    return list(lexer)


def _segments(words: list[str]) -> Iterator[list[str]]:
    segment: list[str] = []
    skip = False
    for word in words:
        if skip:
            skip = False
        elif word in SEPARATORS:
            yield segment
            segment = []
        elif word in REDIRECTS:
            skip = True  # the redirection's target
            if segment and segment[-1].isdigit():
                segment.pop()  # the fd of 2>file, split off by the lexer
        else:
            segment.append(word)
    yield segment


def _is_program(word: str) -> bool:
    return word == PROGRAM or word.endswith("/" + PROGRAM)


def _ours(segment: list[str]) -> list[str] | None:
    """The arguments after ongrid-skills when this simple command runs it, else None."""
    words = list(segment)
    while words and (ASSIGNMENT.match(words[0]) or words[0] in PREFIXES or words[0] == "$"):
        if words.pop(0).startswith(COMPLETION_VARIABLE):
            return None
    if not words:
        return None
    if _is_program(words[0]):
        return words[1:]
    for i, word in enumerate(words[:-1]):
        if word == "--" and _is_program(words[i + 1]):
            return words[i + 2 :]
    if words[0] == "npx" and any("inspector" in w for w in words):
        for i, word in enumerate(words):
            if "/" in word and _is_program(word):
                rest, argv = words[i + 1 :], []
                while rest:
                    arg = rest.pop(0)
                    if arg in INSPECTOR_OPTIONS:
                        rest = rest[1:]
                    elif arg.split("=", 1)[0] not in INSPECTOR_OPTIONS:
                        argv.append(arg)
                return argv
    return None


def commands_in_shell(line: str) -> Iterator[tuple[str, ...]]:
    """Every ongrid-skills command line in one logical shell line."""
    line = line.strip()
    if line.startswith("$ "):
        line = line[2:]
    inner = SUBSTITUTION.findall(line)
    line = SUBSTITUTION.sub("$SUBSTITUTION", line)
    for text in [*inner, line]:
        try:
            words = _words(text)
        except ValueError:  # unbalanced quotes: prose in a block, not a command
            continue
        for segment in _segments(words):
            argv = _ours(segment)
            if argv is not None:
                yield tuple(argv)


def _json_commands(value: Any) -> Iterator[tuple[str, ...]]:
    if isinstance(value, dict):
        command = value.get("command")
        if isinstance(command, str) and _is_program(command):
            yield tuple(str(a) for a in value.get("args", []))
        for child in value.values():
            yield from _json_commands(child)
    elif isinstance(value, list):
        for child in value:
            yield from _json_commands(child)


def inline_commands(path: Path) -> Iterator[DocCommand]:
    """Whole commands quoted as inline code in the prose (outside fenced blocks)."""
    prose: list[str] = []
    fence: str | None = None
    for line in path.read_text(encoding="utf-8").splitlines():
        stripped = line.strip()
        match = FENCE.match(stripped)
        if fence is None and match:
            fence = match.group(1)
            prose.append("")
        elif fence is not None:
            if stripped.startswith(fence) and not stripped.strip(fence[0]):
                fence = None
            prose.append("")
        else:
            prose.append(line)
    text = "\n".join(prose)
    for match in INLINE.finditer(text):
        span = " ".join(match.group(1).split())
        if any(mark in span for mark in SYNOPSIS):
            continue
        where = f"{path.relative_to(REPO)}:{text.count(chr(10), 0, match.start()) + 1}"
        for argv in commands_in_shell(span):
            yield DocCommand(where, span, argv, inline=True)


def doc_commands(paths: list[Path] | None = None) -> list[DocCommand]:
    """Every ongrid-skills command line of the docs (default: docs/*.md and README.md)."""
    found: list[DocCommand] = []
    for path in paths or doc_files():
        found += inline_commands(path)
        for block in blocks(path):
            if block.lang == "json" and PROGRAM in block.text:
                body = json.loads(block.text)  # a broken example is a bug of its own
                found += [
                    DocCommand(block.where, json.dumps(body), argv) for argv in _json_commands(body)
                ]
            elif block.lang in SHELL_LANGS:
                for offset, line in logical_lines(block.text):
                    for argv in commands_in_shell(line):
                        where = f"{block.path.relative_to(REPO)}:{block.line + offset}"
                        found.append(DocCommand(where, line.strip(), argv))
    return found

"""Every ``ongrid-skills`` command of the docs is one the CLI accepts, and the README's quick start
works as written from a fresh clone.

(a) Each command line of docs/*.md and README.md (tests/docs/doc_commands.py says which lines
count) is parsed by the real click command tree, group by group down to the command, without
resilient parsing: an unknown command or option, a missing argument or an extra one fails, named
by file and line. Placeholders (``ID``, ``<token>``, ``$TOKEN``) are fine as values; where an
option is typed (an integer, a choice), a placeholder stands for a valid value.

(b) The README's two quick-start blocks run line by line in a fresh clone (tests/docs/shell.py):
the local one against the shipped examples, the server one against a real ``ongrid-skills serve``
started as ``make run`` starts it.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterator
from pathlib import Path

import click
import pytest

from ongrid_skills.doors.cli.main import cli
from tests.docs.doc_commands import (
    REPO,
    DocCommand,
    blocks,
    commands_in_shell,
    doc_commands,
    logical_lines,
)
from tests.docs.shell import Shell, make_clone
from tests.support.server import ServeProcess, start_serve, stop

PLACEHOLDER = re.compile(r"^(\$\{?[A-Za-z_]\w*\}?|<[^>]+>|[A-Z][A-Z0-9_]*|.*….*)$")


# ---- (a) the command tree accepts every documented command ----------------------------------


def _sample(kind: click.ParamType) -> str | None:
    """A valid value of a typed parameter, to stand for a placeholder."""
    if isinstance(kind, click.Choice):
        return str(kind.choices[0])
    if isinstance(kind, click.types._NumberRangeBase):
        low = kind.min if kind.min is not None else 1
        return str(low + 1 if kind.min_open else low)
    if isinstance(kind, click.types.IntParamType | click.types.FloatParamType):
        return "1"
    if isinstance(kind, click.types.BoolParamType):
        return "true"
    return None  # strings and paths take a placeholder as it is


def _existing(kind: click.Path) -> str:
    """A path that exists, of the kind a ``click.Path(exists=True)`` option wants."""
    return "/" if kind.dir_okay and not kind.file_okay else __file__


def _with_samples(command: click.Command, args: list[str]) -> list[str]:
    """``args`` with placeholders of typed options replaced by valid values; a file a snippet
    names (``--against COPY``) is the reader's, so a must-exist path becomes one that does."""
    options = {opt: p for p in command.params if isinstance(p, click.Option) for opt in p.opts}
    out = list(args)
    for i, word in enumerate(out):
        name, eq, value = word.partition("=")
        param = options.get(name)
        if param is None or param.is_flag or (not eq and i + 1 == len(out)):
            continue
        value = value if eq else out[i + 1]
        if isinstance(param.type, click.Path) and param.type.exists:
            sample = _existing(param.type)
        elif PLACEHOLDER.match(value):
            sample = _sample(param.type)
        else:
            continue
        if sample is not None:
            out[i if eq else i + 1] = f"{name}={sample}" if eq else sample
    return out


def resolve(argv: tuple[str, ...], *, partial: bool = False) -> list[str]:
    """Parse ``argv`` down the command tree as ``ongrid-skills`` would; return the command path.

    Raises click's UsageError (unknown command or option, bad or extra value, missing argument).
    ``partial`` tolerates a missing argument or subcommand (prose naming a command)."""
    command: click.Command = cli
    name, args, path = "ongrid-skills", list(argv), []
    parent: click.Context | None = None
    while True:
        try:
            ctx = command.make_context(name, _with_samples(command, args), parent=parent)
        except click.exceptions.Exit as exc:  # --help, --version: eager, then exit 0
            assert exc.exit_code == 0
            return path
        except click.MissingParameter:
            if partial:
                return path
            raise
        except click.exceptions.NoArgsIsHelpError:
            if partial:
                return path
            raise
        if not isinstance(command, click.Group):
            return path
        rest = [*getattr(ctx, "_protected_args", ()), *ctx.args]
        if not rest:
            if partial or command.invoke_without_command:
                return path
            raise click.UsageError(f"{' '.join(path) or 'ongrid-skills'} needs a command", ctx)
        found, sub, args = command.resolve_command(ctx, rest)
        assert found is not None and sub is not None
        name, command, parent = found, sub, ctx
        path.append(found)


def _option(command_path: tuple[str, ...], option: str) -> bool:
    command: click.Command = cli
    for part in command_path:
        if not isinstance(command, click.Group) or part not in command.commands:
            return False
        command = command.commands[part]
    return any(option in p.opts for p in command.params if isinstance(p, click.Option))


def _command(*path: str) -> bool:
    command: click.Command = cli
    for part in path:
        if not isinstance(command, click.Group) or part not in command.commands:
            return False
        command = command.commands[part]
    return True


def _run_takes_pairs() -> bool:
    run = cli.commands.get("run")
    return run is not None and any(
        isinstance(p, click.Argument) and p.nargs == -1 for p in run.params
    )


def _words_after(argv: tuple[str, ...], *path: str) -> list[str] | None:
    words = [w for w in argv if not w.startswith("-")]
    return list(argv[argv.index(path[-1]) + 1 :]) if words[: len(path)] == list(path) else None


#: Features of the CLI issue the docs already use, with how to tell this tree has them. A
#: command using one the tree lacks is an expected failure; once the tree has it, a failure is
#: a real one (so this list retires itself as the features land).
PENDING: list[tuple[str, Callable[[tuple[str, ...]], bool], Callable[[], bool]]] = [
    (
        "global --data-dir",
        lambda a: any(w.split("=")[0] == "--data-dir" for w in a),
        lambda: _option((), "--data-dir"),
    ),
    ("-v/--verbose", lambda a: "-v" in a or "--verbose" in a, lambda: _option((), "-v")),
    ("the config command", lambda a: "config" in a[:3], lambda: _command("config")),
    (
        "run --server/--url/--wait",
        lambda a: "run" in a and bool({"--server", "--url", "--wait", "--token"} & set(a)),
        lambda: _option(("run",), "--server"),
    ),
    (
        "run NAME k=v",
        lambda a: any("=" in w and not w.startswith("-") for w in _words_after(a, "run") or []),
        _run_takes_pairs,
    ),
    ("executions cancel", lambda a: "cancel" in a, lambda: _command("executions", "cancel")),
    ("approvals watch", lambda a: "watch" in a, lambda: _command("approvals", "watch")),
    (
        "--output",
        lambda a: any(w.startswith("--output") for w in a),
        lambda: _option(("list",), "--output"),
    ),
    ("--raw", lambda a: "--raw" in a, lambda: _option(("run",), "--raw")),
    ("the worker command", lambda a: "worker" in a[:3], lambda: _command("worker")),
    ("the hosts command", lambda a: "hosts" in a[:3], lambda: _command("hosts")),
    (
        "token create --init",
        lambda a: "--init" in a,
        lambda: _option(("token", "create"), "--init"),
    ),
]


def pending_feature(argv: tuple[str, ...]) -> str | None:
    """The first feature of the CLI issue ``argv`` uses and this tree does not have yet."""
    for label, uses, present in PENDING:
        if uses(argv) and not present():
            return label
    return None


COMMANDS = doc_commands()


@pytest.mark.parametrize("doc", COMMANDS, ids=[c.where for c in COMMANDS])
def test_every_documented_command_is_accepted_by_the_cli(doc: DocCommand) -> None:
    try:
        resolve(doc.argv, partial=doc.inline)
    except click.BadParameter as exc:
        if "does not exist" not in exc.format_message():  # a file named in a doc is an example
            raise AssertionError(f"{doc.where}: {doc.line}\n  → {exc.format_message()}") from None
    except click.UsageError as exc:
        feature = pending_feature(doc.argv)
        if feature is not None:
            pytest.xfail(f"uses {feature}, not in this tree yet")
        raise AssertionError(f"{doc.where}: {doc.line}\n  → {exc.format_message()}") from None


def test_the_extractor_sees_the_readme_quick_start_and_the_mcp_configurations() -> None:
    seen = {(c.where.split(":")[0], c.argv) for c in COMMANDS}
    assert ("README.md", ("run", "host_info", "{}")) in seen
    assert ("README.md", ("validate", "./my-skills")) in seen
    assert ("docs/mcp.md", ("-q", "mcp", "--persona", "ops_responder")) in seen  # JSON config
    assert ("docs/server.md", ("audit", "verify")) in seen
    assert len(COMMANDS) >= 40


EXTRACTED = [
    ("ongrid-skills list  # all of them", [("list",)]),
    (
        """.venv/bin/ongrid-skills -q run x '{"a": "b # c"}' 2>&1 | jq .""",
        [("-q", "run", "x", '{"a": "b # c"}')],
    ),
    ("ONGRID_TOKEN=$ADA ongrid-skills approvals approve d0e3", [("approvals", "approve", "d0e3")]),
    (
        "export T=$(ongrid-skills token create --role admin --name ada)",
        [("token", "create", "--role", "admin", "--name", "ada")],
    ),
    ("claude mcp add --transport http ongrid-skills http://h/mcp", []),
    ("claude mcp add x -- /opt/bin/ongrid-skills -q mcp", [("-q", "mcp")]),
    ("npx -y @x/inspector --cli bin/ongrid-skills -q mcp --method tools/list", [("-q", "mcp")]),
    ("skills/lint.py   ongrid-skills validate: findings", []),
    ("ongrid-skills: error: no such thing", []),
    ("echo 'unbalanced", []),
    ("make run && ongrid-skills list; ongrid-skills show x", [("list",), ("show", "x")]),
    ('eval "$(_ONGRID_SKILLS_COMPLETE=bash_source ongrid-skills)"', []),
]


@pytest.mark.parametrize(("line", "expected"), EXTRACTED)
def test_the_extractor_finds_our_commands_and_only_ours(line: str, expected: list) -> None:
    assert list(commands_in_shell(line)) == expected


@pytest.mark.parametrize(
    "argv",
    [
        ("no-such-command",),
        ("run", "host_info", "--no-such-option"),
        ("list", "--class", "harmless"),
        ("show",),
        ("token", "create", "--role", "operator"),
        ("audit",),
        ("validate", "x", "--json", "--fix"),
    ],
)
def test_the_check_refuses_commands_the_cli_refuses(argv: tuple[str, ...]) -> None:
    with pytest.raises(click.UsageError):
        resolve(argv)


def test_placeholders_stand_for_valid_values_of_typed_options() -> None:
    assert resolve(("serve", "--port", "$PORT")) == ["serve"]
    assert resolve(("list", "--class", "<CLASS>")) == ["list"]
    assert resolve(("approvals", "approve", "<ID>")) == ["approvals", "approve"]
    with pytest.raises(click.UsageError):
        resolve(("serve", "--port", "eighty"))


# ---- (b) the README's quick start, run as written -------------------------------------------


def readme_block(heading: str, containing: str) -> list[str]:
    """The command lines of the README's shell block under ``heading`` holding ``containing``."""
    for block in blocks(REPO / "README.md"):
        if block.heading == heading and block.lang == "sh" and containing in block.text:
            return [line for _offset, line in logical_lines(block.text) if line.strip()]
    raise AssertionError(f"README.md has no sh block under {heading!r} with {containing!r}")


def run_lines(shell: Shell, lines: list[str]) -> Iterator[tuple[str, str]]:
    """Run each line; every one must exit 0. Yields (line, stdout)."""
    for line in lines:
        ran = shell.run(line)
        assert ran.code == 0, str(ran)
        yield line, ran.out


def test_readme_without_a_server_works_as_written_from_a_fresh_clone(tmp_path: Path) -> None:
    clone = make_clone(tmp_path)
    shell = Shell(clone, tmp_path)
    outputs = dict(run_lines(shell, readme_block("Without a server", "ongrid-skills list")))
    by_command = {re.sub(r"\s+#.*", "", line).strip(): out for line, out in outputs.items()}
    listed = by_command[".venv/bin/ongrid-skills list"]
    for name in ("host_info", "disk_cleaner", "port_check", "process_signal", "log_grep"):
        assert name in listed
    assert "hostname" in json.loads(by_command[".venv/bin/ongrid-skills run host_info '{}'"])
    cleaned = next(out for line, out in by_command.items() if "disk_cleaner" in line)
    assert json.loads(cleaned)["dry_run"] is True  # the README's run deletes nothing
    assert (clone / "my-skills" / "my_check" / "skill.json").is_file()
    assert not (REPO / "my-skills").exists()


@pytest.fixture
def readme_server(tmp_path: Path) -> Iterator[tuple[ServeProcess, Path]]:
    """`ongrid-skills serve` as `make run` starts it, on a fresh clone's ./.ongrid."""
    clone = make_clone(tmp_path)
    server = start_serve(
        clone / ".ongrid",
        {
            "ONGRID_SKILLS_EXTERNAL_DIRS": str(clone / "examples" / "skills"),
            "ONGRID_PERSONAS_DIRS": str(clone / "examples" / "personas"),
            "ONGRID_BUNDLED_SKILLS": "1",
        },
    )
    try:
        yield server, clone
    finally:
        stop(server)


def test_readme_quick_start_against_the_server_works_as_written(
    readme_server: tuple[ServeProcess, Path], tmp_path: Path
) -> None:
    server, clone = readme_server
    token = (clone / ".ongrid" / "first-admin-token").read_text().strip()
    lines = readme_block("ongrid-skills", "ONGRID_TOKEN=ogs_")
    port = server.url.rsplit(":", 1)[1]
    # The two things a reader types in: the server's address (make run's port) and the token.
    lines = [
        line.replace("127.0.0.1:8731", f"127.0.0.1:{port}").replace("ogs_…", token)
        for line in lines
    ]
    shell = Shell(clone, tmp_path)
    outputs = [out for _line, out in run_lines(shell, lines)]
    assert outputs[1].startswith('{"items": [{"name": ')  # GET /v1/skills, cut at 400 bytes
    assert json.loads(outputs[2])["status"] == "succeeded"  # POST …/host_info/execute
    # A reader goes on in the same shell, ONGRID_URL still exported: "Without a server" still
    # means this machine (the CLI would otherwise send list and run to the server).
    local = readme_block("Without a server", "ongrid-skills list")
    upto = next(i for i, line in enumerate(local) if line.endswith("ongrid-skills list"))
    ran = [shell.run(line) for line in local[: upto + 1]]
    assert all(r.code == 0 for r in ran), [str(r) for r in ran]
    assert "→" not in ran[-1].err and "host_info" in ran[-1].out, str(ran[-1])


def test_native_skills_what_the_model_sees_runs_as_written_from_a_fresh_clone(
    tmp_path: Path,
) -> None:
    lines = [
        line
        for block in blocks(REPO / "docs" / "native-skills.md")
        if block.heading == "What the model sees" and block.lang == "sh"
        for _offset, line in logical_lines(block.text)
        if line.strip() and not line.startswith("curl")  # the curl line needs a server
    ]
    assert len(lines) == 3, lines
    shell = Shell(make_clone(tmp_path), tmp_path)
    outputs = [out for _line, out in run_lines(shell, lines)]
    offered = {tool["function"]["name"] for tool in json.loads(outputs[1])}
    assert {"disk_cleaner", "host_info", "probe_tcp"} <= offered
    assert "process_signal" not in offered  # ops_responder's mode and list keep it out
    assert json.loads(outputs[2])  # the default persona's view, as JSON

"""``list``, ``show``, ``run`` and ``tools`` go to the same place by one rule: the server of
ONGRID_URL when it is set, else this machine; ``--local``/``--server`` on each of them; ``-d``
runs here. A command talking to a server says so on stderr, and its errors name where it asked
and how to run here instead. Against a real ``serve`` (one for the module), in-process for the
rule and as the console script in a terminal and in a pipe for what a person and a script see.
"""

from __future__ import annotations

import json
import shlex
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner

from ongrid_skills.doors.cli import main
from tests.support.processes import CLI
from tests.support.served import Served, serve_for_cli
from tests.support.server import stop
from tests.support.skills import write_skill
from tests.support.terminal import environment, in_terminal, piped

ON_SERVER, HERE = "on_server", "here_only"
LOCAL_ONLY = '#!/bin/sh\ncat >/dev/null\necho \'{"where": "here"}\'\n'


def write_server_skills(root: Path) -> None:
    write_skill(root, ON_SERVER, '#!/bin/sh\ncat >/dev/null\necho \'{"where": "server"}\'\n')


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    running = serve_for_cli(tmp_path_factory.mktemp("target"), write_server_skills)
    try:
        yield running
    finally:
        stop(running.process)


@pytest.fixture(scope="module")
def here(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """This machine's skills dir (the reader's ONGRID_SKILLS_EXTERNAL_DIRS)."""
    root = tmp_path_factory.mktemp("here")
    write_skill(root, HERE, LOCAL_ONLY)
    return root


def cli(served: Served, here: Path, *args: str, url: str | None = None) -> tuple[int, str, str]:
    """In-process as the admin, with this machine's dir configured and ONGRID_URL set to the
    server (``url=""``: not set)."""
    env: dict[str, str | None] = {"ONGRID_DATA_DIR": None, "ONGRID_PERSONAS_DIRS": None}
    env.update(served.environ("admin"))
    env["ONGRID_SKILLS_EXTERNAL_DIRS"] = str(here)
    if url == "":
        env["ONGRID_URL"] = None
    result = CliRunner().invoke(main.cli, list(args), env=env, catch_exceptions=False)
    return result.exit_code, result.stdout, result.stderr


def names(listing: str) -> set[str]:
    return {line.split()[0] for line in listing.splitlines()[1:]}


def test_with_ongrid_url_set_list_show_run_and_tools_all_go_to_the_server(
    served: Served, here: Path
) -> None:
    arrow = f"→ {served.url} (ONGRID_URL)\n"
    code, out, err = cli(served, here, "list")
    assert (code, names(out), err) == (0, {ON_SERVER}, arrow)
    code, out, err = cli(served, here, "show", ON_SERVER, "--json")
    assert (code, json.loads(out)["name"], err) == (0, ON_SERVER, arrow)
    code, out, err = cli(served, here, "run", ON_SERVER)
    assert (code, json.loads(out), err) == (0, {"where": "server"}, arrow)
    code, out, err = cli(served, here, "tools")
    assert (code, [t["function"]["name"] for t in json.loads(out)], err) == (0, [ON_SERVER], arrow)


def test_local_sends_each_of_them_to_this_machine_even_with_ongrid_url_set(
    served: Served, here: Path
) -> None:
    for args in (("list",), ("show", HERE), ("run", HERE), ("tools",)):
        code, out, err = cli(served, here, "-q", *args, "--local")
        assert code == 0, (args, err)
        assert HERE in out or json.loads(out) == {"where": "here"}, args
        assert ON_SERVER not in out and err == "", args


def test_without_ongrid_url_they_run_here_and_url_or_server_sends_them_there(
    served: Served, here: Path
) -> None:
    code, out, _ = cli(served, here, "-q", "list", url="")
    assert (code, names(out)) == (0, {HERE})
    code, out, err = cli(served, here, "list", "--url", served.url, url="")
    assert (code, names(out), err) == (0, {ON_SERVER}, f"→ {served.url} (--url)\n")
    code, out, _ = cli(served, here, "run", ON_SERVER, "--server")  # ONGRID_URL's server
    assert (code, json.loads(out)) == (0, {"where": "server"})
    code, _, err = cli(served, here, "list", "--local", "--server")
    assert code == 2 and "--local and --server contradict each other" in err


def test_d_runs_here_with_ongrid_url_set_and_says_so_and_is_refused_with_server(
    served: Served, here: Path, tmp_path: Path
) -> None:
    write_skill(tmp_path, "my_skill", LOCAL_ONLY)
    code, out, err = cli(served, here, "-d", str(tmp_path), "run", "my_skill")
    assert (code, json.loads(out)) == (0, {"where": "here"}), err
    assert f"-d given: running here, not on {served.url} (ONGRID_URL)" in err
    for args in (("list", "--server"), ("show", "my_skill", "--url", served.url)):
        code, out, err = cli(served, here, "-d", str(tmp_path), *args)
        assert (code, out) == (2, ""), args
        assert "-d names skills on this machine" in err and "--local" in err


def test_an_error_on_the_server_names_where_it_asked_and_how_to_run_here(
    served: Served, here: Path
) -> None:
    footnote = f"ongrid-skills: asked {served.url} (ONGRID_URL); --local uses the skills of this"
    for args in (("run", HERE), ("show", HERE), ("tools", "--persona", "nobody")):
        code, out, err = cli(served, here, "-q", *args)
        assert (code, out) == (2, ""), args
        first, second = err.splitlines()
        assert first.startswith("ongrid-skills: not_found: "), args
        assert second.startswith(footnote), args


def test_quiet_keeps_the_arrow_off_stderr(served: Served, here: Path) -> None:
    code, out, err = cli(served, here, "-q", "list")
    assert (code, names(out), err) == (0, {ON_SERVER}, "")


def test_a_person_at_a_terminal_sees_where_run_went_and_a_script_reads_the_same_stdout(
    served: Served,
) -> None:
    env = {"ONGRID_URL": served.url, "ONGRID_TOKEN": served.tokens["admin"]}
    screen = in_terminal("run", ON_SERVER, env=env)
    assert screen.status == 0, screen.text
    assert screen.text.startswith(f"→ {served.url} (ONGRID_URL)\n")
    assert '"where": "server"' in screen.text
    done = piped("run", ON_SERVER, env=env)
    assert done.stdout == b'{"where": "server"}\n'
    assert done.stderr == f"→ {served.url} (ONGRID_URL)\n".encode()
    shown = in_terminal("show", ON_SERVER, env=env)  # the server's skill, in the local view
    assert shown.status == 0, shown.text
    lines = [line.split() for line in shown.text.splitlines()]
    assert ["name", ON_SERVER] in lines and ["class", "safe"] in lines and ["schema"] in lines


def test_the_hint_new_prints_works_as_printed_with_ongrid_url_set(
    served: Served, tmp_path: Path
) -> None:
    env = environment({"ONGRID_URL": served.url, "ONGRID_TOKEN": served.tokens["admin"]})
    made = subprocess.run(
        [CLI, "new", "my_skill", "--dir", str(tmp_path)],
        capture_output=True,
        text=True,
        env=env,
        cwd=tmp_path,
        timeout=30,
    )
    assert made.returncode == 0, made.stderr
    hint = made.stderr.strip().removeprefix("try: ")
    assert shlex.split(hint)[0] in (CLI, "ongrid-skills"), hint
    ran = subprocess.run(
        hint, shell=True, capture_output=True, text=True, env=env, cwd=tmp_path, timeout=30
    )
    assert ran.returncode == 0, ran.stderr
    assert json.loads(ran.stdout)  # the scaffold's result, run here

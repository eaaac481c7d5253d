"""docs/mcp.md's "from the clone" Claude Code snippet starts a working MCP server, as written.

The ``claude mcp add`` line is read from the doc: its ``--env K=V`` pairs become the server's
environment and the command after ``--`` is started by the official MCP client over stdio, in a
fresh clone whose ``.ongrid`` exists (as ``make run`` leaves it). The persona it names is then
offered exactly what examples/personas/ops_responder.md allows.
"""

from __future__ import annotations

import os
import shlex
from pathlib import Path

import anyio
from mcp.client.session import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client

from ongrid_skills.store import open_store
from tests.docs.doc_commands import REPO, blocks, logical_lines
from tests.docs.shell import make_clone


def clone_snippet() -> list[str]:
    for block in blocks(REPO / "docs" / "mcp.md"):
        for _offset, line in logical_lines(block.text):
            if line.startswith("claude mcp add") and "$PWD/.venv/bin/ongrid-skills" in line:
                return shlex.split(line)
    raise AssertionError("docs/mcp.md has no `claude mcp add … $PWD/.venv/bin/ongrid-skills`")


def test_the_claude_code_snippet_from_the_clone_serves_the_ops_responder_tools(
    tmp_path: Path,
) -> None:
    clone = make_clone(tmp_path)
    open_store(str(clone / ".ongrid")).close()  # what `make run` leaves behind
    words = [w.replace("$PWD", str(clone)) for w in clone_snippet()]
    env = dict(words[i + 1].split("=", 1) for i, w in enumerate(words) if w == "--env")
    command, *args = words[words.index("--") + 1 :]
    assert args == ["-q", "mcp", "--persona", "ops_responder"]
    params = StdioServerParameters(
        command=command,
        args=args,
        env={"PATH": os.environ["PATH"], "HOME": str(tmp_path), **env},
        cwd=str(tmp_path),  # a client starts it from anywhere: the env says where things are
    )

    async def tool_names() -> set[str]:
        with (tmp_path / "mcp-stderr.log").open("w") as errlog:
            async with (
                stdio_client(params, errlog=errlog) as (read, write),
                ClientSession(read, write, read_timeout_seconds=60) as client,
            ):
                await client.initialize()
                return {tool.name for tool in (await client.list_tools()).tools}

    names = anyio.run(tool_names)
    assert {"host_info", "port_check", "log_grep", "disk_cleaner", "get_execution"} <= names
    assert "process_signal" not in names

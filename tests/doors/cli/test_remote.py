"""The server client of the CLI: Server-Sent Events read as a browser reads them, and the answers
of a server that is not well (a 5xx, a non-JSON error page) turned into exit codes."""

from __future__ import annotations

from click.testing import CliRunner, Result

from ongrid_skills.doors.cli.main import cli
from ongrid_skills.doors.cli.remote import Sse, parse_sse
from tests.support.http import QuietHandler, serve


def test_sse_data_lines_are_joined_and_comments_kept_apart() -> None:
    lines = [
        ": ping - 2026",
        "event: end",
        "id: 7",
        'data: {"result": {',
        'data:   "a": 1 }}',
        "",
        "data:no space",
        "",
        "",  # a blank line with no data dispatches nothing
        "event: ready",
        "data: {}",
        "",
    ]
    assert list(parse_sse(iter(lines))) == [
        Sse("", "ping - 2026"),
        Sse("end", '{"result": {\n  "a": 1 }}', "7"),
        Sse("message", "no space", "7"),  # the last event id stays until another is sent
        Sse("ready", "{}", "7"),
    ]


class Unwell(QuietHandler):
    def do_GET(self) -> None:
        if self.path.startswith("/v1/approvals/events"):
            self.send_body(503, b"upstream unavailable")
        else:
            self.send_body(502, b"<html>bad gateway</html>", "text/html")


def invoke(*args: str, url: str) -> Result:
    env = {"ONGRID_URL": url, "ONGRID_TOKEN": "ogs_x"}
    return CliRunner().invoke(cli, list(args), env=env, catch_exceptions=False)


def test_a_server_answering_5xx_exits_1_with_what_it_said() -> None:
    with serve(Unwell) as server:
        url = f"http://127.0.0.1:{server.server_address[1]}"
        watch = invoke("approvals", "watch", url=url)
        listing = invoke("executions", "list", url=url)
    assert watch.exit_code == 1
    assert "the server answered 503" in watch.stderr
    assert listing.exit_code == 1
    assert "502: <html>bad gateway</html>" in listing.stderr

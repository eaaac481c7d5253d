"""What ``run`` shows while a call runs and when it ends, here or on a server alike.

While it runs: the skill's stderr lines as they come and its ``progress`` events (a local run's
timeline events, or the same events read from a server's stream). When stderr is
a terminal, progress is a live bar (rich, on stderr) and stderr lines print above it; otherwise
each event is one plain line, exactly as before (``[progress 3/10] message``). At the end: the
result pretty-printed when stdout is a terminal, else (and with ``--raw``) the skill's bytes
verbatim; ``--json`` prints the whole Execution. It renders; it never runs, gates or fetches a
call.
"""

from __future__ import annotations

import json
import math
import sys
from decimal import Decimal
from types import TracebackType
from typing import TYPE_CHECKING, Any

import click

from ongrid_skills.doors.cli.output.terminal import (
    console,
    printable,
    stderr_is_terminal,
    stdout_is_terminal,
)
from ongrid_skills.execution.records import Event, Execution
from ongrid_skills.strict_json import unique_object

if TYPE_CHECKING:
    from rich.console import Console
    from rich.progress import Progress, TaskID

#: Past this size a result is written verbatim even on a terminal: highlighting megabytes of
#: JSON would keep the terminal busy for seconds for output nobody reads on screen.
PRETTY_LIMIT = 1024 * 1024
TRUNCATED = "[stderr truncated: over 1 MiB, the rest is not shown]"


def _amount(data: dict[str, Any]) -> str:
    total = data.get("total")
    return f"{data['progress']}/{total}" if total is not None else str(data["progress"])


class RunView:
    """The events of one run, on stderr; a context manager that ends the live display."""

    def __init__(self, skill: str) -> None:
        self.skill = skill
        self.live = stderr_is_terminal()
        self._console: Console | None = None
        self._progress: Progress | None = None
        self._task: TaskID | None = None

    def __enter__(self) -> RunView:
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def close(self) -> None:
        """Stop the live bar (it stays on screen at its last state) and give the cursor back."""
        if self._progress is not None:
            self._progress.stop()
            self._progress = None

    def event(self, event: Event) -> None:
        """Show one timeline event (the ``on_event`` of a local run)."""
        self.show(event.type, event.data)

    def show(self, kind: str, data: dict[str, Any]) -> None:
        """Show one event by its type and fields (a server's stream gives them so); the
        types a person does not need to see while it runs (status, …) show nothing."""
        if not self.live:
            _plain_event(kind, data)
        elif kind == "stderr":
            self._line(printable(str(data.get("line", ""))))
        elif kind == "progress" and "progress" in data:
            self._advance(data)
        elif kind == "stderr_truncated":
            self._line(TRUNCATED, style="yellow")

    def note(self, message: str) -> None:
        """A line of the command's own (``ongrid-skills: approved; running``) on stderr,
        above the live bar when there is one."""
        if self.live:
            self._line(printable(message))
        else:
            click.echo(message, err=True)

    def _out(self) -> Console:
        if self._console is None:
            self._console = console(stderr=True)
        return self._console

    def _line(self, text: str, style: str = "") -> None:
        from rich.text import Text  # noqa: PLC0415 - lazy: terminal only

        # Through the console, so that a line lands above the live bar, never inside it;
        # soft_wrap: the terminal wraps a long line, rich adds no newline of its own.
        self._out().print(Text(text, style=style), soft_wrap=True)

    def _advance(self, data: dict[str, Any]) -> None:
        total = data.get("total")
        message = printable(data.get("message") or self.skill)
        amount = printable(_amount(data))
        if self._progress is None or self._task is None:
            self._progress = _progress_display(self._out())
            self._progress.start()
            self._task = self._progress.add_task(message, total=total, amount=amount)
        self._progress.update(
            self._task, completed=data["progress"], total=total, description=message, amount=amount
        )


def _progress_display(out: Console) -> Progress:
    from rich.progress import (  # noqa: PLC0415 - lazy: terminal only
        BarColumn,
        Progress,
        SpinnerColumn,
        TextColumn,
        TimeElapsedColumn,
    )

    return Progress(
        SpinnerColumn(),
        TextColumn("{task.description}", markup=False),  # a skill's words, never markup
        BarColumn(),
        TextColumn("{task.fields[amount]}", markup=False),
        TimeElapsedColumn(),
        console=out,
        transient=False,
    )


def _plain_event(kind: str, data: dict[str, Any]) -> None:
    if kind == "stderr":
        click.echo(data.get("line", ""), err=True)
    elif kind == "progress" and "progress" in data:
        message = data.get("message", "")
        click.echo(f"[progress {_amount(data)}] {message}".rstrip(), err=True)
    elif kind == "stderr_truncated":
        click.echo(TRUNCATED, err=True)


def print_execution(execution: Execution, *, as_json: bool, raw: bool) -> None:
    """The end of a run: the Execution (``--json``), the result, or why there is none."""
    if as_json:
        click.echo(execution.to_json())
        return
    if execution.ok and execution.result_text is not None:
        print_result(execution.result_text, raw=raw)
        return
    error = execution.error
    detail = f"{error.code}: {error.message}" if error else execution.status.value
    print_failure(execution.skill, execution.status.value, detail)


def print_result(text: str, *, raw: bool) -> None:
    """A call's result: pretty on a terminal, else (and with ``raw``) ``text`` verbatim."""
    if raw or not stdout_is_terminal() or not _print_pretty(text):
        sys.stdout.write(text + "\n")
        sys.stdout.flush()


def print_failure(skill: str, status: str, detail: str) -> None:
    """Why a call gave no result, on stderr (the words may come from a skill or a server)."""
    click.echo(printable(f"ongrid-skills: {skill} {status} ({detail})"), err=True)


def _print_pretty(text: str) -> bool:
    """Pretty-print a JSON result on the terminal; False when it is too big, or when showing
    it re-serialised would change what it says (see :func:`faithful`)."""
    if len(text) > PRETTY_LIMIT:
        return False
    try:
        value = faithful(text)
    except (ValueError, RecursionError):
        return False
    from rich.json import JSON  # noqa: PLC0415 - lazy: terminal only

    console().print(JSON.from_data(value, indent=2, ensure_ascii=False), soft_wrap=True)
    return True


def faithful(text: str) -> Any:
    """``text`` parsed, or ValueError when printing the value back would not say what the text
    says: a key named twice (json keeps the last), a number a float cannot hold exactly
    (``1e400`` would print as Infinity, ``0.1000000000000000000001`` as 0.1), NaN or Infinity.

    >>> faithful('{"a": [1, 2.5, "x"]}')
    {'a': [1, 2.5, 'x']}
    >>> faithful('{"n": 1e400}')
    Traceback (most recent call last):
    ...
    ValueError: 1e400 is not shown exactly as a float
    """
    return json.loads(
        text,
        object_pairs_hook=unique_object,
        parse_float=_exact_float,
        parse_constant=_no_constant,
    )


def _exact_float(literal: str) -> float:
    number = float(literal)
    if not math.isfinite(number) or Decimal(literal) != Decimal(repr(number)):
        raise ValueError(f"{literal} is not shown exactly as a float")
    return number


def _no_constant(literal: str) -> Any:
    raise ValueError(f"{literal} is not JSON")

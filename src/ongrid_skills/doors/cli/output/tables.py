"""Lists as tables, JSON or YAML: the ``-o/--output`` choice every listing command shares.

A listing command builds a :class:`Table` of plain cells (strings, or :class:`Styled` words such
as a class badge) and hands it with its data to :func:`emit`. On a terminal the table is drawn
with rich (a header, colours unless NO_COLOR, the widest column cut to the screen); in a pipe it
is plain aligned columns under one header line, never an escape sequence, never cut to a width.
``-o json`` prints exactly what the command's ``--json`` prints (the bytes a script relies on,
SPEC §13); ``-o yaml`` the same data as YAML. An empty table prints nothing on stdout and says
so on stderr. Nothing here reads the store or a server: cells arrive ready.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal, TypeVar

import click

from ongrid_skills.doors.cli.output.terminal import console, printable, stdout_is_terminal

if TYPE_CHECKING:
    from rich.text import Text

FORMATS = ("table", "json", "yaml")
#: Between two columns of a drawn table: a padding cell, the (blank) rule, a padding cell.
_GAP = 3
#: How narrow a flexible column, then any other but a key, may be cut on a narrow screen.
_NARROWEST, _NARROWEST_FIXED = 12, 8
F = TypeVar("F", bound=Callable[..., Any])


@dataclass(frozen=True, slots=True)
class Styled:
    """A piece of a cell with a rich style (``"bold red"``); the words alone carry the meaning."""

    text: str
    style: str = ""


Cell = str | Styled | tuple[str | Styled, ...]


@dataclass(frozen=True, slots=True)
class Column:
    """A column: its header, its alignment, and how it gives way on a narrow screen.

    ``flexible``: takes the width the others leave and is cut with "…" (a description, args).
    ``key``: an identifier a person copies (an id, a name), never cut nor folded."""

    header: str
    justify: Literal["left", "right"] = "left"
    flexible: bool = False
    key: bool = False


@dataclass(slots=True)
class Table:
    columns: list[Column]
    rows: list[list[Cell]] = field(default_factory=list)


def output_option(func: F) -> F:
    """The ``-o/--output table|json|yaml`` option of a listing command."""
    return click.option(
        "-o",
        "--output",
        "output_format",
        type=click.Choice(FORMATS),
        default=None,
        help="table (the default: a table on a terminal, aligned columns in a pipe), "
        "json (exactly what --json prints) or yaml (the same data).",
    )(func)


def resolve(as_json: bool, output_format: str | None) -> str:
    """The format asked for: ``--json`` is ``-o json``; the two disagreeing is a usage error."""
    if as_json and output_format not in (None, "json"):
        raise click.UsageError(f"--json and --output {output_format} disagree: give one of them")
    return "json" if as_json else (output_format or "table")


def emit(fmt: str, *, data: Any, json_text: str, table: Callable[[], Table], empty: str) -> None:
    """Print a listing in ``fmt``; ``json_text`` is the command's ``--json`` output, verbatim."""
    if fmt == "json":
        click.echo(json_text)
    elif fmt == "yaml":
        click.echo(to_yaml(data), nl=False)
    else:
        drawn = table()
        if not drawn.rows:
            click.echo(empty, err=True)
            return
        print_table(drawn)


def to_yaml(data: Any) -> str:
    """``data`` (JSON-shaped) as a YAML document; control characters come out escaped."""
    import yaml  # noqa: PLC0415 - only -o yaml needs it

    return yaml.safe_dump(data, sort_keys=False, allow_unicode=True, default_flow_style=False)


def print_table(table: Table) -> None:
    if stdout_is_terminal():
        _print_rich(table)
    else:
        for line in plain_lines(table):
            click.echo(line)


def print_line(cell: Cell) -> None:
    """One line of a stream (``approvals watch``): coloured on a terminal, plain in a pipe, in
    both every control character shown, never obeyed; written at once."""
    if stdout_is_terminal():
        console().print(rich_text(cell), soft_wrap=True)
    else:
        click.echo(cell_text(cell))


def cell_text(cell: Cell) -> str:
    """The words of a cell, printable (a control character shows as ``\\xNN``)."""
    if isinstance(cell, str):
        return printable(cell)
    if isinstance(cell, Styled):
        return printable(cell.text)
    return "".join(cell_text(part) for part in cell)


def plain_lines(table: Table) -> list[str]:
    """The table as aligned columns: a header line, two spaces between columns, no trailing
    blanks. Every cell is whole: a pipe has no width to cut to."""
    grid = [[c.header for c in table.columns]]
    grid += [[cell_text(cell) for cell in row] for row in table.rows]
    widths = [max(len(row[i]) for row in grid) for i in range(len(table.columns))]
    lines = []
    for row in grid:
        cells = [
            text.rjust(width) if column.justify == "right" else text.ljust(width)
            for text, width, column in zip(row, widths, table.columns, strict=True)
        ]
        lines.append("  ".join(cells).rstrip())
    return lines


def rich_text(cell: Cell) -> Text:
    """A cell as rich Text: never parsed as markup, so ``[bold]`` in a skill's words stays text."""
    from rich.text import Text  # noqa: PLC0415 - lazy: terminal only

    if isinstance(cell, str):
        return Text(printable(cell))
    if isinstance(cell, Styled):
        return Text(printable(cell.text), style=cell.style)
    return Text.assemble(*(rich_text(part) for part in cell))


def fit(natural: list[int], columns: list[Column], room: int) -> list[int]:
    """Column widths that fit ``room`` cells, one line per row: the flexible columns give way
    first (down to 12), then every column but the keys (down to 8), always the widest first.
    Keys never shrink: past that the screen's edge crops the line.

    >>> cols = [Column("ID", key=True), Column("WHEN"), Column("WHAT", flexible=True)]
    >>> fit([32, 24, 60], cols, 200)
    [32, 24, 60]
    >>> fit([32, 24, 60], cols, 100)
    [32, 24, 44]
    >>> fit([32, 24, 60], cols, 60)
    [32, 16, 12]
    >>> fit([32, 24, 60], cols, 30)
    [32, 8, 8]
    """
    widths = list(natural)
    for floor, may in (
        (_NARROWEST, lambda c: c.flexible),
        (_NARROWEST_FIXED, lambda c: not c.key),
    ):
        while sum(widths) > room:
            candidates = [i for i, c in enumerate(columns) if may(c) and widths[i] > floor]
            if not candidates:
                break
            widest = max(candidates, key=lambda i: widths[i])
            widths[widest] -= 1
    return widths


def _print_rich(table: Table) -> None:
    from rich import box  # noqa: PLC0415 - lazy: terminal only
    from rich.cells import cell_len  # noqa: PLC0415
    from rich.table import Table as RichTable  # noqa: PLC0415

    out = console()
    drawn = RichTable(box=box.SIMPLE_HEAD, header_style="bold", show_edge=False, pad_edge=False)
    natural = [
        max(cell_len(column.header), *(cell_len(cell_text(row[i])) for row in table.rows))
        for i, column in enumerate(table.columns)
    ]
    # Our widths, not rich's: rich would shrink every column alike (ids included) or fold
    # cells onto many lines; a row stays one line and a cut cell ends in "…".
    room = out.width - _GAP * (len(table.columns) - 1)
    for column, width in zip(table.columns, fit(natural, table.columns, room), strict=True):
        drawn.add_column(
            column.header, justify=column.justify, no_wrap=True, overflow="ellipsis", width=width
        )
    for row in table.rows:
        drawn.add_row(*(rich_text(cell) for cell in row))
    out.print(drawn)

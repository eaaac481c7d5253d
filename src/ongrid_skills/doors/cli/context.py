"""What every command shares: the global options, the settings and where each came from, how
much a command prints, and which store it uses.

- Global options: ``--config``, ``-d/--skills-dir`` (before the command), and ``--data-dir``,
  ``-q/--quiet``, ``-v/--verbose`` accepted at any position (:mod:`.options`); on the command
  line the last of ``-q``/``-v`` wins, over ``ONGRID_LOG_LEVEL``/``log_level``.
- Output: a command that loads skills prints one summary line on stderr (``loaded 12 skills,
  1 error (…)``), in a pipe as on a terminal; the loader lines of SPEC §3 under ``-v`` (or
  ``ONGRID_LOG_LEVEL=info|debug``), and always for the servers (``serve``, ``mcp``), whose stderr
  is their log. ``-q`` prints neither.
- The store: located (absolute data dir, masked database URL, where the setting came from) and
  checked before it is opened; only a command that may create it does (``serve``,
  ``token create --init``, an explicit ``--data-dir``: see :meth:`Context.store_settings`).

This module never opens the store itself (the commands do, through :meth:`Context.open_store`)
and never imports the server stack at import time.
"""

from __future__ import annotations

import dataclasses
import logging
import os
import re
import sys
from dataclasses import dataclass
from typing import TYPE_CHECKING, NoReturn

import click

from ongrid_skills.errors import SkillError
from ongrid_skills.settings import LOG_LEVELS, Origin, Settings, Trace

if TYPE_CHECKING:
    from ongrid_skills.builtins.reach import Reach
    from ongrid_skills.skills.registry import Registry
    from ongrid_skills.store import Store

EXIT_USAGE = 2
#: The commands whose stderr is a server's log: every loader line, INFO logs by default.
SERVERS = frozenset({"serve", "mcp"})
#: Libraries that log every request or file event at INFO (httpx: "HTTP Request: GET …",
#: watchfiles: "N changes detected"); a command shows only warnings from them.
QUIET_LIBRARIES = ("alembic", "anthropic", "httpx", "httpx2", "mcp", "openai", "watchfiles")
#: Query parameters of a database URL whose values are never printed.
SECRET_WORDS = ("password", "passwd", "secret", "token", "key", "credential")
MASK = "********"


def fail(message: str, code: int = EXIT_USAGE) -> NoReturn:
    click.echo(f"ongrid-skills: {message}", err=True)
    sys.exit(code)


def mask_url(url: str) -> str:
    """A database URL without its password (nor secret-looking query parameters), otherwise
    exactly as written.

    >>> mask_url("postgresql://ops:s3cr3t@db:5432/ongrid?sslpassword=x&sslmode=require")
    'postgresql://ops:********@db:5432/ongrid?sslpassword=********&sslmode=require'
    >>> mask_url("sqlite:////var/lib/ongrid/ongrid.db")
    'sqlite:////var/lib/ongrid/ongrid.db'
    >>> mask_url("postgresql://ops@db/ongrid")
    'postgresql://ops@db/ongrid'
    """
    masked = _USERINFO.sub(lambda m: f"{m['head']}:{MASK}@", url, count=1)
    head, question, query = masked.partition("?")
    if not question:
        return masked
    pairs = []
    for pair in query.split("&"):
        key, equals, _ = pair.partition("=")
        pairs.append(f"{key}={MASK}" if equals and is_secret(key) else pair)
    return head + "?" + "&".join(pairs)


#: ``scheme://user:password@``: the password is what goes.
_USERINFO = re.compile(r"^(?P<head>[A-Za-z][A-Za-z0-9+.-]*://[^:/@?#]*):[^/?#]*@")


def is_secret(name: str) -> bool:
    lowered = name.lower()
    return any(word in lowered for word in SECRET_WORDS)


@dataclass(frozen=True, slots=True)
class StoreSpot:
    """Where a command's store is: the absolute data dir, the database, and their origins."""

    data_dir: str
    data_dir_origin: Origin
    database_url: str | None
    database_origin: Origin

    @property
    def database(self) -> str:
        """The database URL, password masked (the embedded SQLite file when none is set)."""
        if self.database_url:
            return mask_url(self.database_url)
        return f"sqlite:///{os.path.join(self.data_dir, 'ongrid.db')}"

    def describe(self) -> str:
        return (
            f"store: data dir {self.data_dir} ({self.data_dir_origin}), "
            f"database {self.database} ({self.database_origin})"
        )

    def problem(self) -> str | None:
        """Why there is no usable store here ("missing" when there is simply none yet)."""
        try:
            is_dir = os.path.isdir(self.data_dir)
            exists = os.path.lexists(self.data_dir)
        except OSError as exc:  # pragma: no cover - a path too long and the like
            return f"data dir {self.data_dir} cannot be checked: {exc.strerror or exc}"
        if exists and not is_dir:
            return f"data dir {self.data_dir} is not a directory"
        if exists and not os.access(self.data_dir, os.R_OK | os.W_OK | os.X_OK):
            return f"data dir {self.data_dir} is not readable and writable by this user"
        if self.database_url:
            return None  # the database is the store; the data dir holds its audit key
        if not os.path.isfile(os.path.join(self.data_dir, "ongrid.db")):
            return "missing"
        return None


class Context:
    """The group's options, handed to every command; settings and registry load on demand."""

    def __init__(self) -> None:
        self.config: str | None = None
        self.skills_dirs: tuple[str, ...] = ()
        self.server = False
        self.data_dir_flag: str | None = None
        self.quiet = False
        self.verbosity = 0  # -v: 1, -vv: 2
        self.flagged = False  # -q or -v was given: it beats ONGRID_LOG_LEVEL
        self._loaded: tuple[Settings, Trace] | None = None
        self._handler: logging.Handler | None = None
        self._described = False

    def configure(
        self, config: str | None, skills_dirs: tuple[str, ...], command: str | None
    ) -> None:
        """The group's own options and the command it runs (a server logs more)."""
        self.config = config
        self.skills_dirs = tuple(os.path.abspath(d) for d in skills_dirs)
        self.server = command in SERVERS
        self.apply_logging()

    # ---- settings ----------------------------------------------------------------------------
    def traced(self) -> tuple[Settings, Trace]:
        """The settings (``--data-dir`` over the environment over ``--config``), the data dir
        made absolute, and where each came from; a bad setting exits 2 naming it."""
        if self._loaded is None:
            from ongrid_skills.builtins.reach import Reach  # noqa: PLC0415

            try:
                settings, trace = Settings.traced(config=self.config)
                Reach.from_settings(settings)  # a malformed network rule fails here
            except SkillError as exc:
                fail(exc.message)
            if self.data_dir_flag is not None:
                settings = dataclasses.replace(settings, data_dir=self.data_dir_flag)
                trace.origins["data_dir"] = Origin("flag", "--data-dir")
            settings = dataclasses.replace(settings, data_dir=os.path.abspath(settings.data_dir))
            self._loaded = (settings, trace)
            self.apply_logging()  # a log_level from the file applies from now on
        return self._loaded

    def settings(self) -> Settings:
        return self.traced()[0]

    def reach(self) -> Reach:
        """What built-ins run by this command may reach (the operator's settings)."""
        from ongrid_skills.builtins.reach import Reach  # noqa: PLC0415

        return Reach.from_settings(self.settings())

    # ---- how much is printed -----------------------------------------------------------------
    def level(self) -> int:
        """The log level: -v/-vv on the command line, else (with -q: the command's default)
        ONGRID_LOG_LEVEL (or the file's log_level), else INFO for a server and WARNING for any
        other command. -q hides the loader output only: a server under -q still logs INFO."""
        default = logging.INFO if self.server else logging.WARNING
        if self.flagged:
            return {0: default, 1: logging.INFO}.get(self.verbosity, logging.DEBUG)
        configured = os.environ.get("ONGRID_LOG_LEVEL", "").strip().lower() or None
        if configured is None and self._loaded is not None:
            configured = self._loaded[0].log_level
        if configured in LOG_LEVELS:
            return int(getattr(logging, str(configured).upper()))
        return default

    @property
    def chatty(self) -> bool:
        """Whether this command prints the loader lines and which store it uses."""
        return not self.quiet and (self.server or self.level() <= logging.INFO)

    def set_data_dir(self, path: str) -> None:
        self.data_dir_flag = os.path.abspath(path)
        self._loaded = None  # settings read before the flag are read again

    def set_quiet(self) -> None:
        self.quiet, self.verbosity, self.flagged = True, 0, True
        self.apply_logging()

    def add_verbose(self, count: int) -> None:
        self.quiet, self.flagged = False, True
        self.verbosity += count
        self.apply_logging()

    def apply_logging(self) -> None:
        """Send log records to stderr at :meth:`level`. Where a handler is already installed
        (a host application, the test runner), levels and handlers are left to it."""
        root = logging.getLogger()
        if self._handler is None and not root.handlers:
            self._handler = logging.StreamHandler()
            self._handler.setFormatter(logging.Formatter("%(levelname)s %(name)s: %(message)s"))
            root.addHandler(self._handler)
        level = self.level()
        if self._handler is not None:
            root.setLevel(logging.INFO if level <= logging.INFO else logging.WARNING)
            logging.getLogger("ongrid_skills").setLevel(level)
        logging.getLogger("ongrid_skills.loader").propagate = False  # its lines: loader_line
        for name in QUIET_LIBRARIES:  # their INFO lines are noise in a command's output
            logging.getLogger(name).setLevel(logging.WARNING)

    # ---- the loader --------------------------------------------------------------------------
    def registry(self) -> Registry:
        """The registry of the configured dirs plus the ``-d`` ones; see :meth:`loaded`."""
        settings = self.settings()
        dirs = (*settings.external_dirs, *self.skills_dirs)
        # The runtime brings the store (SQLAlchemy, Alembic): loaded only by commands that load.
        from ongrid_skills.runtime import load_registry  # noqa: PLC0415

        registry = load_registry(external_dirs=dirs, settings=settings, log=self.loader_line)
        self.loaded(registry)
        return registry

    def loader_line(self, line: str) -> None:
        """One loader line (SPEC §3) on stderr, when they are shown (-v, servers)."""
        if self.chatty:
            click.echo(line, err=True)

    def loaded(self, registry: Registry) -> None:
        """The one summary line of a load, on stderr, unless -q (or the lines were shown)."""
        if self.quiet or self.chatty:
            return
        click.echo(summary(registry), err=True)

    # ---- the store ---------------------------------------------------------------------------
    def spot(self) -> StoreSpot:
        settings, trace = self.traced()
        return StoreSpot(
            settings.data_dir,
            trace.origin("data_dir"),
            settings.database_url,
            trace.origin("database_url"),
        )

    def configured_data_dir(self) -> bool:
        """Whether the data dir was chosen (flag, environment, file) rather than defaulted."""
        return self.traced()[1].origin("data_dir").kind != "default"

    def store_settings(self, *, create: bool = False) -> Settings:
        """The settings of a store this command may use: one that exists, or (``create``) one
        it may create. Otherwise exit 2, naming the absolute path looked at, where that came
        from, and how to fix it. Says which store on -v.

        Who may create one (docs/cli.md, "Data dir"): ``serve``; ``token create`` with
        ``--init`` or an explicit ``--data-dir``; ``mcp`` and ``chat`` when the data dir was
        configured (flag, environment, file). A command that only reads never does: an empty
        store has nothing to show, and "0 entries, intact" about the wrong dir is the trap."""
        spot = self.spot()
        if self.chatty and not self._described:
            self._described = True
            click.echo(f"ongrid-skills: {spot.describe()}", err=True)
        problem = spot.problem()
        if problem == "missing" and create:
            return self.settings()
        if problem == "missing":
            fail(
                f"no store in {spot.data_dir} ({whence(spot.data_dir_origin)})\n"
                "ongrid-skills: point at the server's data dir with --data-dir DIR or "
                "ONGRID_DATA_DIR (`ongrid-skills config` shows where each setting comes from), "
                "or create a store there with `ongrid-skills serve` or "
                "`ongrid-skills token create --init …`"
            )
        if problem is not None:
            fail(f"{problem} ({whence(spot.data_dir_origin)}): set --data-dir or ONGRID_DATA_DIR")
        return self.settings()

    def open_store(self, *, create: bool = False) -> Store:
        """Open the store (see :meth:`store_settings`); a broken one exits 1 naming it."""
        settings = self.store_settings(create=create)
        from ongrid_skills.store import open_store  # noqa: PLC0415 - SQLAlchemy, Alembic

        try:
            return open_store(
                settings.data_dir,
                settings.database_url,
                audit_key_file=settings.audit_key_file,
                audit_sink=settings.audit_sink,
            )
        except Exception as exc:  # a broken data dir must say so, not trace back
            fail(f"cannot open the store in {settings.data_dir}: {exc}", code=1)


def summary(registry: Registry) -> str:
    """``loaded 12 skills, 1 error (ongrid-skills validate for details)``: what one load gave,
    with the count of refused files, loader warnings and dirs not walked, when there are any."""
    report = registry.report
    count = len(registry)
    warnings = sum(1 for line in report.lines if line.startswith("warning "))
    parts = [f"loaded {count} skill{'' if count == 1 else 's'}"]
    for number, word in (
        (len(report.errors), "error"),
        (warnings, "warning"),
        (report.skipped_dirs, "dir skipped"),
    ):
        if number:
            noun, _, rest = word.partition(" ")
            parts.append(f"{number} {noun}{'' if number == 1 else 's'}{' ' + rest if rest else ''}")
    hint = ""
    if report.errors:
        hint = " (ongrid-skills validate for details)"
    elif warnings or report.skipped_dirs:
        hint = " (-v for details)"
    return ", ".join(parts) + hint


def whence(origin: Origin) -> str:
    """Where a data dir came from, in words."""
    if origin.kind == "flag":
        return "given with --data-dir"
    if origin.kind == "env":
        return f"set by {origin.where}"
    if origin.kind == "file":
        return f"set in {origin.where}"
    return "the default data dir: ./.ongrid under the current directory"

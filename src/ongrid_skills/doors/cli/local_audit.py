"""The trace a local ``run`` leaves: mutating and dangerous runs in the data dir's audit chain.

``ongrid-skills run`` runs in this process, outside any server, so without this a local
``run disk_cleaner … --yes`` would leave no record. A run of a mutating or dangerous skill that
the gate admitted appends ``local_run.started`` (actor ``cli:<user>``; the skill, its class and
definition hash, the SHA-256 of the args, the persona, how it was confirmed: ``cli --yes`` or
``cli --yes --i-know-it-is-dangerous``) just before the skill starts, and ``local_run.finished``
(status, exit code, error code, the seq of its start) once it ends. The store's write
transaction serialises this against a server on the same data dir (SQLite ``BEGIN IMMEDIATE``,
the anchor file under ``flock``), so the chain stays linear.

Safe skills are not recorded (as a server's safe reads are not). The store is never created
here: with none, or one that cannot be written, the run goes on and stderr says plainly that
nothing was recorded; the trace is a record for operators, not a lock (whoever can run the CLI
can run the skill's executable). This module never decides whether a call may run, nor runs it.
"""

from __future__ import annotations

import os
import socket
from typing import TYPE_CHECKING, Any

import click

from ongrid_skills.doors.cli.context import whence
from ongrid_skills.governance.principal import local_user
from ongrid_skills.types import SkillClass

if TYPE_CHECKING:
    from ongrid_skills.doors.cli.context import Context
    from ongrid_skills.execution.records import Event, Execution
    from ongrid_skills.skills.model import Skill
    from ongrid_skills.store import Store


def args_sha256(args: Any) -> str:
    """The digest recorded instead of the args (the same canonical form as the manager's)."""
    from ongrid_skills.execution.digests import args_digest  # noqa: PLC0415 - kept off start-up

    return args_digest(args)


class LocalTrace:
    """Records one local run; :meth:`event` is chained before the run's own event printer."""

    def __init__(
        self, obj: Context, skill: Skill | None, args: Any, persona: str | None, dangerous: bool
    ) -> None:
        self.obj = obj
        self.skill = skill
        self.args = args
        self.persona = persona
        self.via = "cli --yes --i-know-it-is-dangerous" if dangerous else "cli --yes"
        self.store: Store | None = None
        self.started_seq: int | None = None
        self.actor = f"cli:{local_user()}"

    @property
    def wanted(self) -> bool:
        return self.skill is not None and self.skill.skill_class is not SkillClass.SAFE

    def event(self, event: Event) -> None:
        """The first ``running`` status comes after the gate admitted the call and before the
        skill starts: the moment to record its start."""
        if event.type == "status" and event.data.get("status") == "running":
            self.start()

    def start(self) -> None:
        if not self.wanted or self.started_seq is not None or self.skill is None:
            return
        store = self._open()
        if store is None:
            return
        skill = self.skill
        data = {
            "skill": skill.name,
            "class": skill.skill_class.value,
            "definition_hash": skill.definition_hash,
            "args_sha256": args_sha256(self.args),
            "persona": self.persona,
            "via": self.via,
            "host": socket.gethostname(),
            "pid": os.getpid(),
        }
        try:
            with store.tx() as conn:
                self.started_seq = store.audit.append(
                    conn, self.actor, "local_run.started", skill.name, data
                )
        except Exception as exc:  # the run goes on; say what was not recorded
            self._not_recorded(f"the audit chain refused the entry: {exc}")

    def finish(self, execution: Execution | None, status: str | None = None) -> None:
        """Record the outcome (``status`` overrides, e.g. ``interrupted``); close the store."""
        store, self.store = self.store, None
        if store is None:
            return
        try:
            if self.started_seq is not None and self.skill is not None:
                error = execution.error if execution is not None else None
                data = {
                    "skill": self.skill.name,
                    "status": status or (execution.status.value if execution else "unknown"),
                    "exit_code": execution.exit_code if execution is not None else None,
                    "error": error.code if error is not None else None,
                    "duration_ms": execution.duration_ms if execution is not None else None,
                    "execution_id": execution.id if execution is not None else None,
                    "started_seq": self.started_seq,
                }
                name = self.skill.name
                with store.tx() as conn:
                    store.audit.append(conn, self.actor, "local_run.finished", name, data)
        except Exception as exc:
            self._not_recorded(f"the outcome could not be recorded: {exc}")
        finally:
            store.close()

    def _open(self) -> Store | None:
        spot = self.obj.spot()
        problem = spot.problem()
        if problem == "missing":
            self._not_recorded(
                f"no store in {spot.data_dir} ({whence(spot.data_dir_origin)}); set --data-dir "
                "or ONGRID_DATA_DIR to the server's data dir to keep a trace of local runs"
            )
            return None
        if problem is not None:
            self._not_recorded(problem)
            return None
        if self.obj.chatty:
            click.echo(f"ongrid-skills: {spot.describe()}", err=True)
        from ongrid_skills.store import open_store  # noqa: PLC0415 - SQLAlchemy, Alembic

        settings = self.obj.settings()
        try:
            self.store = open_store(
                settings.data_dir,
                settings.database_url,
                audit_key_file=settings.audit_key_file,
                audit_sink=settings.audit_sink,
            )
        except Exception as exc:
            self._not_recorded(f"cannot open the store in {settings.data_dir}: {exc}")
            return None
        return self.store

    def _not_recorded(self, why: str) -> None:
        name = self.skill.name if self.skill is not None else "the skill"
        click.echo(f"ongrid-skills: this run of {name} is not recorded: {why}", err=True)

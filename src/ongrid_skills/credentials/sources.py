"""Where a credential field's value comes from, read at call time and never cached on disk.

A field's *source*, as stored (``store/credentials.py``) and as given by an admin:

=========================================  ===============================================
given                                      read at call time
=========================================  ===============================================
a value (stdin, a file: never argv)        ``{"sealed": "v1:…"}``, opened with the key
``file:/run/secrets/token``                the file, under ``ONGRID_CREDENTIAL_FILE_ROOTS``
                                           (links resolved before the check)
``env:DB_PASSWORD``                        a variable of the manager's environment that
                                           ``ONGRID_CREDENTIAL_ENV`` lists
``command:db-password``                    the stdout of a command named in the operator's
                                           ``ONGRID_CREDENTIAL_COMMANDS`` (its whole argv, no
                                           shell; no argument comes from the reference)
=========================================  ===============================================

Each read is bounded (64 KiB, 10 s for a command) and must give at least
:data:`~ongrid_skills.execution.masking.MIN_SECRET_LENGTH` characters (a shorter one cannot be
masked); what fails is a ``CredentialUnreadable`` naming the credential and field, never the
value.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ongrid_skills.credentials.cipher import CredentialKey, SealError
from ongrid_skills.errors import CredentialUnreadable, InvalidRequest
from ongrid_skills.execution.masking import MIN_SECRET_LENGTH
from ongrid_skills.paths import NotRegularFile, is_within, read_regular

MAX_VALUE_BYTES = 64 * 1024
COMMAND_TIMEOUT_SECONDS = 10.0
DEFAULT_FILE_ROOTS = ("/run/secrets", "/run/credentials", "/var/run/secrets")
KINDS = ("file", "env", "command")


@dataclass(frozen=True, slots=True)
class SourceRules:
    """What the operator allows references to reach (settings)."""

    file_roots: tuple[str, ...] = DEFAULT_FILE_ROOTS
    commands: Mapping[str, tuple[str, ...]] | None = None
    env_names: tuple[str, ...] = ()


def resolved_file(path: str, rules: SourceRules) -> str | None:
    """``path`` with its links resolved, when that lies under a root (resolved too); else
    None. A link inside a root that leads out of it (``root/etc -> /etc``) does not pass."""
    real = os.path.realpath(path)
    for root in rules.file_roots:
        if is_within(real, os.path.realpath(root)):
            return real
    return None


def too_short(value: str) -> str | None:
    """Why ``value`` cannot be a secret, or None."""
    if len(value) < MIN_SECRET_LENGTH:
        return (
            f"is {len(value)} characters long: a value shorter than {MIN_SECRET_LENGTH} "
            "characters cannot be masked safely in what a skill prints"
        )
    return None


def parse_reference(field: str, text: str, rules: SourceRules) -> dict[str, Any]:
    """``file:PATH``, ``env:NAME`` or ``command:NAME ARGS…`` → the stored source; checked
    against the operator's rules now (and again at call time)."""
    kind, sep, rest = text.partition(":")
    rest = rest.strip()
    if not sep or kind not in KINDS or not rest:
        # Never quote the text: a reference box is where a value gets pasted by mistake.
        raise InvalidRequest(
            f"field {field}: a reference is file:/path, env:NAME or command:NAME "
            "(for a value itself, give it as a value)"
        )
    source: dict[str, Any]
    if kind == "file":
        source = {"file": rest}
    elif kind == "env":
        source = {"env": rest}
    elif any(c.isspace() for c in rest):
        # The operator's configuration holds the whole command line: an admin who could add
        # arguments could point the operator's tool elsewhere (-address=…) or ask it for more.
        raise InvalidRequest(
            f"field {field}: command: names one of the operator's commands, with no arguments "
            "(ONGRID_CREDENTIAL_COMMANDS holds each whole command line)"
        )
    else:
        source = {"command": rest}
    problem = reference_problem(source, rules)
    if problem is not None:
        raise InvalidRequest(f"field {field}: {problem}")
    return source


def reference_problem(source: Mapping[str, Any], rules: SourceRules) -> str | None:
    """Why the operator's rules refuse this reference, or None. The reference's own text is
    never repeated (a value may have been pasted in its place); the operator's rules are."""
    if "file" in source:
        path = source["file"]
        if not isinstance(path, str) or not os.path.isabs(path):
            return "file: needs an absolute path"
        if resolved_file(path, rules) is None:
            roots = ", ".join(rules.file_roots) or "none"
            return (
                "the file: path (its links resolved) is outside the credential file roots "
                f"({roots}; ONGRID_CREDENTIAL_FILE_ROOTS)"
            )
    elif "env" in source:
        if source["env"] not in rules.env_names:
            known = ", ".join(rules.env_names) or "none"
            return (
                "env: names a variable the operator lets credentials read "
                f"(ONGRID_CREDENTIAL_ENV: {known})"
            )
    elif "command" in source:
        commands = rules.commands or {}
        if source["command"] not in commands or source.get("args"):
            known = ", ".join(sorted(commands)) or "none configured"
            return (
                "command: names one of the commands the operator configured, with no "
                f"arguments (ONGRID_CREDENTIAL_COMMANDS: {known})"
            )
    elif "sealed" not in source:
        return "unknown source"
    return None


async def read_value(
    credential: str,
    field: str,
    source: Mapping[str, Any],
    key: CredentialKey | None,
    rules: SourceRules,
) -> str:
    """The value of one field now; :class:`CredentialUnreadable` when it cannot be had."""
    where = f"field {field} of credential {credential}"
    problem = reference_problem(source, rules)
    if problem is not None:
        raise CredentialUnreadable(f"{where}: {problem}")
    if "sealed" in source:
        if key is None:
            raise CredentialUnreadable(f"{where}: the credentials key file is missing")
        try:
            value = key.open(credential, field, source["sealed"])
        except SealError as exc:
            raise CredentialUnreadable(str(exc)) from None
    elif "file" in source:
        value = _read_file(where, resolved_file(source["file"], rules) or "")
    elif "env" in source:
        found = os.environ.get(source["env"])
        if found is None:
            raise CredentialUnreadable(
                f"{where}: its variable is not set in the manager's environment"
            )
        value = found
    else:
        argv = list((rules.commands or {})[source["command"]])
        value = await _run(where, argv)
    problem = too_short(value)
    if problem is not None:
        raise CredentialUnreadable(f"{where} {problem}")
    return value


async def _read_bounded(stream: asyncio.StreamReader | None) -> bytes:
    """Up to one byte past :data:`MAX_VALUE_BYTES` of ``stream`` (to the end if shorter)."""
    out = bytearray()
    while stream is not None and len(out) <= MAX_VALUE_BYTES:
        chunk = await stream.read(MAX_VALUE_BYTES + 1 - len(out))
        if not chunk:
            break
        out += chunk
    return bytes(out)


def _read_file(where: str, path: str) -> str:
    try:
        raw = read_regular(path, MAX_VALUE_BYTES + 1)
    except NotRegularFile:
        raise CredentialUnreadable(f"{where}: its file is not a regular file") from None
    except OSError as exc:
        why = exc.strerror or type(exc).__name__
        raise CredentialUnreadable(f"{where}: its file cannot be read ({why})") from None
    if len(raw) > MAX_VALUE_BYTES:
        raise CredentialUnreadable(f"{where}: its file is larger than {MAX_VALUE_BYTES} bytes")
    try:
        return raw.decode().removesuffix("\n")
    except UnicodeDecodeError:
        raise CredentialUnreadable(f"{where}: its file is not UTF-8 text") from None


async def _run(where: str, argv: list[str]) -> str:
    """Run the operator's command (no shell; the manager's environment, which it may need:
    ``VAULT_ADDR``…); its stdout less one trailing newline is the value."""
    try:
        proc = await asyncio.create_subprocess_exec(
            *argv,
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.DEVNULL,
        )
    except OSError as exc:
        raise CredentialUnreadable(
            f"{where}: cannot start {argv[0]}: {exc.strerror or exc}"
        ) from None
    try:
        async with asyncio.timeout(COMMAND_TIMEOUT_SECONDS):
            out = await _read_bounded(proc.stdout)
            code = await proc.wait()
    except TimeoutError:
        raise CredentialUnreadable(
            f"{where}: {argv[0]} did not answer within {COMMAND_TIMEOUT_SECONDS:g} s"
        ) from None
    finally:
        if proc.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                proc.kill()
            await proc.wait()
    if code != 0:
        raise CredentialUnreadable(f"{where}: {argv[0]} exited with status {code}")
    if len(out) > MAX_VALUE_BYTES:
        raise CredentialUnreadable(f"{where}: {argv[0]} printed more than {MAX_VALUE_BYTES} bytes")
    try:
        return out.decode().removesuffix("\n")
    except UnicodeDecodeError:
        raise CredentialUnreadable(
            f"{where}: {argv[0]} printed something that is not UTF-8"
        ) from None


__all__ = [
    "DEFAULT_FILE_ROOTS",
    "CredentialUnreadable",
    "SourceRules",
    "parse_reference",
    "read_value",
    "reference_problem",
    "too_short",
]

"""The one exception tree of ongrid-skills.

Every error carries a stable ``code`` (snake_case). Doors map codes, never classes or messages: the
CLI to exit codes, REST and the web console to HTTP statuses (``doors/statuses.py``), MCP and the
agent to the error envelope. This module owns the tree only: it must never import anything of
ours, and never maps a code to a status itself (each door does, in one place; the two HTTP doors
share one table).

::

    SkillError                      code               HTTP  exit
    ├── ConfigError                 invalid_config      500     2
    ├── ManifestError               invalid_manifest    400     2  (parse or build of one file)
    ├── NotFound                    not_found           404     2
    │   ├── UnknownSkill            not_found           404     2
    │   └── UnknownPersona          not_found           404     2
    ├── InvalidRequest              invalid_request     400     2  (malformed, e.g. not JSON)
    │   └── InvalidPersona          invalid_request     400     2  (.field: a persona rule broken)
    ├── InvalidArgs                 invalid_args        400     2  (.violations: pointer + message)
    ├── Denied                      denied              403     3  (the gate refused the call)
    ├── ApprovalRequired            approval_required     —     3  (confirmation/signatures first)
    ├── Unauthorized                unauthorized        401     2  (no or bad credentials)
    ├── Forbidden                   forbidden           403     3  (the role does not allow it)
    ├── Conflict                    conflict            409     2  (state forbids it: signed twice…)
    ├── CredentialMissing           credential_missing  409     3  (a slot has no credential bound)
    ├── CredentialUnreadable        credential_unreadable 502   1  (a referenced secret unreadable)
    ├── SandboxUnavailable          sandbox_unavailable 503     1  (a profile not enforceable here)
    │   └── SkillCollision          skill_collision     409     2  (a pack takes loaded names)
    ├── TooLarge                    too_large           413     2  (request body over the limit)
    ├── Busy                        busy                429     2  (execution queue full)
    ├── StorageFull                 storage_full        507     1  (the store's disk is full)
    ├── PackError                   invalid_pack        400     2  (.problems: path + message)
    │   ├── UnsafePack              unsafe_pack         400     2  (an archive broke a safety rule)
    │   └── PackIndexError          invalid_index       502     2  (an unusable index.json)
    ├── PackKeyError                invalid_key         400     2  (a signing or trusted key)
    │   └── PassphraseRequired      passphrase_required 400     2  (an encrypted private key)
    ├── BadSignature                bad_signature       400     1  (digest mismatch, bad signature)
    │   └── DigestMismatch          digest_mismatch     502     1  (not the pack an index names)
    ├── UntrustedPack               untrusted_pack      403     3  (remote, not trusted-signed)
    ├── FetchFailed                 fetch_failed        502     1  (a download or a clone)
    └── BundledFileError            (a file of a skill's folder that cannot be served)
        ├── OutsideSkill            outside_skill      (resolves outside the folder, or hidden)
        ├── BundledFileMissing      file_not_found
        ├── NotAFile                not_a_file         (a directory, FIFO, device…)
        ├── BundledFileTooLarge     file_too_large
        └── BinaryFile              binary_file        (not UTF-8 text)

*HTTP* is ``STATUS_BY_CODE`` of the HTTP doors (``doors/statuses.py``; a code it does not list
answers 400; an exception that is no SkillError answers 500 ``internal_error``). REST never raises
ApprovalRequired: a call that needs signatures is answered 202 with its ``pending_approval``
Execution. *exit* is what ``ongrid-skills`` returns: ``run``, ``list``, ``show``, ``tools`` and
``new`` map the code through ``ERROR_EXIT`` in ``doors/cli/refusal.py`` (1 for a code it does not
list); the commands that talk to a server (``approvals``, ``executions``) map the HTTP status (403 →
3, other 4xx → 2, 5xx → 1), which is where the errors only a server raises get theirs; ``mcp`` and
``token`` exit 2 on any error, ``chat`` 2 for ``not_found`` and ``invalid_request``, else 1.

A skill's own failure is not raised: it is the ``status`` and ``error`` of its Execution, with one
of the codes of :data:`EXECUTION_ERROR_CODES`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

#: ``error.code`` values an Execution may carry, with their meaning.
EXECUTION_ERROR_CODES: dict[str, str] = {
    "exit_status": "the skill exited with a non-zero status",
    "killed_by_signal": "the skill died by a signal it did not ask for",
    "empty_output": "the skill exited 0 but wrote nothing on stdout",
    "invalid_output": "stdout was not one valid UTF-8 JSON value",
    "output_too_large": "stdout exceeded the 16 MiB cap; the process group was killed",
    "timed_out": "the call exceeded its timeout; the process group was killed",
    "cancelled": "the call was cancelled; the process group was killed",
    "entry_rejected": "the entry failed its re-check just before spawning",
    "spawn_failed": "the operating system refused to start the entry",
    "invalid_args": "the args did not match the skill's schema",
    "denied": "the permission gate refused the call",
    "builtin_failed": "a built-in skill reported an expected failure (host down, no such file…)",
    "forbidden_path": "a built-in was asked for a path outside the operator's readable roots, "
    "or for the manager's own files",
    "forbidden_target": "a built-in was asked to reach a network target the operator's rules "
    "refuse (link-local, cloud metadata, deny or allow lists)",
    "internal_error": "a built-in skill raised an unexpected exception",
    "interrupted": "the manager stopped while the call ran",
    "rejected": "a signer rejected the approval request",
    "expired": "the approval request expired before its last signature",
    "skill_changed": "the skill changed since the approval request; the request is void",
    "not_permitted": "the gate no longer admits the approved call; the request is void",
    "outside_skill": "read_skill_file: the path leaves the skill's folder (or names a hidden file)",
    "file_not_found": "read_skill_file: no such file in the skill's folder",
    "not_a_file": "read_skill_file: the path is a directory or a special file",
    "file_too_large": "read_skill_file: the file is over the size cap",
    "binary_file": "read_skill_file: the file is not UTF-8 text",
    "host_offline": "a host skill's call named a host that is offline or unknown, or the host did "
    "not take the call before it expired; nothing ran",
    "host_unverified": "the host's entry in the hosts bucket is not signed by a key trusted for "
    "that host id (ONGRID_FLEET_WORKER_KEYS); nothing was sent",
    "definition_changed": "the host's definition of the skill is not the one the call was "
    "admitted (or approved) with; nothing ran",
    "unknown_skill": "the host has no host skill of that name (any more); nothing ran",
    "call_expired": "the host received the signed call after its expiry; nothing ran",
    "credentials_changed": "a credential slot of the skill was bound to another credential (or "
    "unbound) since the approval request; the request is void",
    "credential_missing": "a credential slot of the skill had nothing bound to it when the call "
    "was to start; nothing ran",
    "credential_unreadable": "a credential the call needs could not be read (a file, a variable "
    "or a command the operator configured); nothing ran",
    "sandbox_unavailable": "the call's sandbox profile cannot be enforced on this host (no "
    "Landlock, too old an ABI, no spawn helper, a declared path over a protected one); nothing ran",
    "call_not_yet_valid": "the host's clock is behind the manager's by more than the allowed "
    "skew; nothing ran",
    "digest_mismatch": "install_skill: the pack fetched when the approved request ran is not "
    "the one its signers were shown (another digest); nothing was installed (an install that "
    "fails otherwise carries the pack error's own code: untrusted_pack, fetch_failed…)",
}


class SkillError(Exception):
    """Base of every error ongrid-skills raises on purpose."""

    code = "skill_error"

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message

    def to_dict(self) -> dict[str, Any]:
        """The ``error`` object of a REST answer or an envelope: ``code`` and ``message``."""
        return {"code": self.code, "message": self.message}


class ConfigError(SkillError):
    """A setting (environment variable or config file entry) is malformed."""

    code = "invalid_config"


class ManifestError(SkillError):
    """One manifest file could not be parsed (``kind='parse'``) or built (``kind='build'``)."""

    code = "invalid_manifest"

    def __init__(
        self,
        message: str,
        *,
        path: str,
        kind: str = "build",
        name: str = "",
        line: int = 1,
        column: int = 1,
        field: str | None = None,
        load_code: str | None = None,
    ) -> None:
        super().__init__(message)
        self.path = path
        self.kind = kind
        #: Why, as a stable word for the loader's report (``unreadable``, ``too_large``, …);
        #: None: ``parse_error`` or ``invalid_manifest`` by ``kind`` (see skills/discovery.py).
        self.load_code = load_code
        self.name = name
        self.line = line
        self.column = column
        self.field = field


class NotFound(SkillError):
    """An unknown skill, persona, execution, approval or agent run."""

    code = "not_found"


class UnknownSkill(NotFound):
    """No skill of that name; ``failed`` is the loader's reason when a file that would have
    given it was refused (the usual surprise: a typo in the manifest, an entry not executable)."""

    def __init__(self, name: str, failed: str | None = None) -> None:
        why = f": it failed to load: {failed}" if failed else ""
        super().__init__(f"unknown skill {name!r}{why}")
        self.name = name
        self.failed = failed


class UnknownPersona(NotFound):
    """No persona of that name; ``failed`` as for :class:`UnknownSkill`."""

    def __init__(self, name: str, failed: str | None = None) -> None:
        why = f": it failed to load: {failed}" if failed else ""
        super().__init__(f"unknown persona {name!r}{why}")
        self.name = name
        self.failed = failed


@dataclass(frozen=True, slots=True)
class Violation:
    """One schema violation: where (a JSON pointer into the args) and what."""

    pointer: str
    message: str

    def to_dict(self) -> dict[str, str]:
        return {"pointer": self.pointer, "message": self.message}


class InvalidRequest(SkillError):
    """The request itself is malformed (not JSON, wrong shape) before any skill is involved."""

    code = "invalid_request"


class InvalidPersona(InvalidRequest):
    """A persona written through an API breaks a rule of the persona format; ``field`` names
    the field (None for the document as a whole)."""

    def __init__(self, message: str, field: str | None = None) -> None:
        super().__init__(message)
        self.field = field

    def to_dict(self) -> dict[str, Any]:
        pointer = f"/{self.field}" if self.field else ""
        return {
            "code": self.code,
            "message": self.message,
            "details": [{"pointer": pointer, "message": self.message}],
        }


class InvalidArgs(SkillError):
    """The args are not a JSON object valid against the skill's schema; nothing was spawned."""

    code = "invalid_args"

    def __init__(self, skill: str, violations: list[Violation]) -> None:
        listed = "; ".join(f"{v.pointer or '/'}: {v.message}" for v in violations)
        super().__init__(f"invalid args for {skill!r}: {listed}")
        self.skill = skill
        self.violations = violations

    def to_dict(self) -> dict[str, Any]:
        return {
            "code": self.code,
            "message": self.message,
            "details": [v.to_dict() for v in self.violations],
        }


class Denied(SkillError):
    """The permission gate refused the call (class × persona mode × role)."""

    code = "denied"


class ApprovalRequired(SkillError):
    """The call needs human confirmation or signatures before it may run."""

    code = "approval_required"

    def __init__(self, message: str, *, signatures_required: int) -> None:
        super().__init__(message)
        self.signatures_required = signatures_required


class Unauthorized(SkillError):
    """No bearer token, a malformed one, or one that is unknown or revoked."""

    code = "unauthorized"


class Forbidden(SkillError):
    """The caller is known, but their role (or who they are) does not allow this action."""

    code = "forbidden"


class Conflict(SkillError):
    """The current state does not allow it: not pending any more, signed twice, a reused key."""

    code = "conflict"


class CredentialMissing(SkillError):
    """A skill's credential slot has nothing bound to it (or what is bound is gone)."""

    code = "credential_missing"


class CredentialUnreadable(SkillError):
    """A credential a call needs could not be read now (a file, a variable or a command); the
    message names the credential and field, never a value. The call fails; nothing ran."""

    code = "credential_unreadable"


class SandboxUnavailable(SkillError):
    """A call's sandbox profile cannot be enforced here; the message says why. The call is
    refused, never run unconfined (SPEC §20)."""

    code = "sandbox_unavailable"


class TooLarge(SkillError):
    """A request body over the REST door's limit (1 MiB)."""

    code = "too_large"


class SkillCollision(Conflict):
    """A pack would bring skills (or personas) whose names are taken: ``collisions`` lists
    each as ``(kind, name, where the existing one comes from)``."""

    code = "skill_collision"

    def __init__(self, label: str, collisions: list[tuple[str, str, str]]) -> None:
        listed = "; ".join(f"{kind} {name!r} ({origin})" for kind, name, origin in collisions)
        super().__init__(f"pack {label} collides with what is loaded: {listed}")
        self.label = label
        self.collisions = collisions

    def to_dict(self) -> dict[str, Any]:
        return {
            "code": self.code,
            "message": self.message,
            "details": [
                {"kind": kind, "name": name, "existing": origin}
                for kind, name, origin in self.collisions
            ],
        }


class Busy(SkillError):
    """Every running slot and every queue place is taken; the caller should retry later."""

    code = "busy"


class StorageFull(SkillError):
    """The store could not write (its filesystem is full): nothing was started or recorded."""

    code = "storage_full"


@dataclass(frozen=True, slots=True)
class PackProblem:
    """One problem of a pack: the file (relative to the pack's root), where in it, and what."""

    path: str
    message: str
    line: int = 1
    column: int = 1
    severity: str = "error"  # error | warning
    code: str = ""  # a loader warning's stable code (skills/notices.py), when it is one

    def format(self) -> str:
        """``path:line:col: severity: message [code]``, like ``ongrid-skills validate``."""
        coded = f" [{self.code}]" if self.code else ""
        return f"{self.path}:{self.line}:{self.column}: {self.severity}: {self.message}{coded}"

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "path": self.path,
            "line": self.line,
            "column": self.column,
            "severity": self.severity,
            "message": self.message,
        }
        if self.code:
            out["code"] = self.code
        return out


class PackError(SkillError):
    """A pack that cannot be used: not a pack, a bad pack.json, skills that do not load.
    ``problems`` lists every one found, each with its path inside the pack."""

    code = "invalid_pack"

    def __init__(self, message: str, problems: list[PackProblem] | None = None) -> None:
        listed = "; ".join(p.format() for p in problems or [])
        super().__init__(f"{message}: {listed}" if listed else message)
        self.summary = message
        self.problems = list(problems or [])

    def to_dict(self) -> dict[str, Any]:
        out = super().to_dict()
        if self.problems:
            out["details"] = [p.to_dict() for p in self.problems]
        return out


class UnsafePack(PackError):
    """An archive (or folder) broke a safety rule of unpacking: the whole pack is refused."""

    code = "unsafe_pack"

    def __init__(self, path: str, rule: str) -> None:
        super().__init__(f"unsafe pack: {path}: {rule}")
        self.path = path
        self.rule = rule


class PackIndexError(PackError):
    """A marketplace index (``index.json``) that cannot be read or is not valid."""

    code = "invalid_index"


class PackKeyError(SkillError):
    """A signing key or a trusted-keys file that cannot be used (unreadable, not Ed25519…)."""

    code = "invalid_key"


class PassphraseRequired(PackKeyError):
    """The private key is encrypted and no passphrase (or a wrong one) was given."""

    code = "passphrase_required"


class BadSignature(SkillError):
    """A signature that does not verify, or that signs another digest than the pack's."""

    code = "bad_signature"


class DigestMismatch(BadSignature):
    """What was downloaded is not the pack an index names: another digest, another signer."""

    code = "digest_mismatch"


class UntrustedPack(SkillError):
    """A pack from a remote source (a URL, a git remote, an upload) that is unsigned or signed
    by a key the operator does not trust, installed without ``allow_unsigned``."""

    code = "untrusted_pack"


class FetchFailed(SkillError):
    """A pack could not be fetched: an HTTP error, too big, too slow, too many redirects, a
    scheme that is not allowed, a git clone that failed or timed out."""

    code = "fetch_failed"


class BundledFileError(SkillError):
    """A file of a skill's folder could not be served (``read_skill_file``, MCP resources)."""

    code = "bundled_file_error"


class OutsideSkill(BundledFileError):
    """The path resolves outside the skill's folder (``..``, an absolute path, a symlink out)
    or names a hidden file, which is never part of a bundle."""

    code = "outside_skill"


class BundledFileMissing(BundledFileError):
    code = "file_not_found"


class NotAFile(BundledFileError):
    code = "not_a_file"


class BundledFileTooLarge(BundledFileError):
    code = "file_too_large"


class BinaryFile(BundledFileError):
    code = "binary_file"

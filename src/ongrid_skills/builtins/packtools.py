"""``install_skill``: an agent installs a pack of skills by asking, under the dual-sign rule.

A *dangerous* built-in (SPEC §19): offered only to personas whose mode is
``dual-sign-required``, and every call waits for two distinct admin signers. What they sign is
bound to the bytes they were shown:

- when the request is made (:func:`prepare_install_skill`, the function's request hook), the
  source is fetched and judged by the pack service exactly as ``pack install`` judges it (its
  sources, signature rules and limits; a remote pack must be signed by a trusted key, and
  nothing here can allow otherwise); a source that cannot be fetched or verified refuses the
  request with the pack error's code. The request freezes the pack's digest in its args and
  carries the capability summary as its ``preview``: id, version, digest, signer, skills with
  their classes and scope, personas with their modes, requirements, warnings;
- when it runs, the pack is fetched again and installed only if its digest is still the one
  signed (``digest_mismatch`` otherwise, nothing installed); the registry is reloaded before
  the call ends, so the new skills are offered on the agent's next turn.

Like ``POST /v1/packs``, it takes remote sources and the ids of the marketplace indexes, never a
path of the server. It reaches the pack service only through :class:`~.base.PackPort`.
"""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import Field

from ongrid_skills.builtins.base import BuiltinContext, BuiltinFailure, Prepared, ToolPorts
from ongrid_skills.errors import Conflict, DigestMismatch, SkillError

__all__ = ["install_skill"]

#: What pinned the digest, as a refusal names it.
PINNED_BY = "the approval request was made"
_NO_SERVICE = (
    "install_skill needs a server's pack service (ongrid-skills serve); not available here"
)


async def install_skill(
    ctx: BuiltinContext,
    source: Annotated[
        str,
        Field(
            description="The pack: an https:// URL of an archive, a git URL (git+URL, URL.git, "
            "optional @REF), or a pack id ID or ID@VERSION of the marketplace indexes.",
            min_length=1,
            max_length=4096,
        ),
    ],
    digest: Annotated[
        str | None,
        Field(
            description="The pack's sha256 digest; filled in when the request is made (leave it "
            "out).",
            pattern=r"^sha256:[0-9a-f]{64}$",
        ),
    ] = None,
) -> dict[str, Any]:
    """Install a pack of skills and personas once two admins sign; its skills come next turn.

    The request shows the signers what the pack brings (skills and their classes, personas,
    requirements, signer); the pack installed is byte for byte the one they were shown."""
    port = ctx.ports.packs
    if port is None:
        raise BuiltinFailure(_NO_SERVICE)
    if digest is None:
        raise BuiltinFailure(
            "install_skill runs only on an approved request, which pins the pack's digest",
            DigestMismatch.code,
        )
    try:
        return await port.install(source, ctx.caller or "install_skill", digest, PINNED_BY)
    except SkillError as exc:
        raise BuiltinFailure(exc.message, exc.code) from None


async def prepare_install_skill(ports: ToolPorts, args: dict[str, Any]) -> Prepared:
    """The request hook: fetch and judge the source now, pin its digest, show its summary."""
    if ports.packs is None:
        raise Conflict(_NO_SERVICE)
    source = str(args["source"])
    summary = await ports.packs.inspect(source)
    asked = args.get("digest")
    if asked is not None and asked != summary["digest"]:
        raise DigestMismatch(
            f"{source} is {summary['digest']}, not the {asked} the call names: not requested"
        )
    return Prepared({**args, "digest": summary["digest"]}, {"pack": summary})


install_skill.prepare_request = prepare_install_skill  # type: ignore[attr-defined]

"""``ongrid-skills pack``: build, sign and verify packs (SPEC §11, docs/packs.md).

Exit codes of this group: 0 done (``verify``: the signature is valid and its signer trusted),
1 a bad signature, a digest that is not the index's, or a fetch that failed (download, clone),
2 usage or bad input (not a pack, an unsafe archive, a pack with errors, an unusable key, a
name collision, nothing installed by that id), 3 a pack that is not trusted (``verify``: unsigned
or signed by a key that is not trusted; ``install``: a remote pack not signed by a trusted key).
Problems print on stderr as ``path:line:col: severity: message``. The commands that change
what is installed are in :mod:`ongrid_skills.doors.cli.pack_install`.

The packs library (and ``cryptography`` under it) is imported by the commands that use it, not
at start-up. This module only parses options and prints; it must never decide trust itself.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn

import click

from ongrid_skills.errors import PackError, PassphraseRequired, SkillCollision, SkillError

if TYPE_CHECKING:
    from ongrid_skills.packs import Limits, SigningKey, TrustedKeys, Verification

EXIT_OK, EXIT_BAD_SIGNATURE, EXIT_USAGE, EXIT_NOT_TRUSTED = 0, 1, 2, 3
#: Error codes → exit codes of this group (any other code: EXIT_USAGE).
EXIT_BY_CODE = {
    "bad_signature": EXIT_BAD_SIGNATURE,
    "digest_mismatch": EXIT_BAD_SIGNATURE,
    "fetch_failed": EXIT_BAD_SIGNATURE,
    "untrusted_pack": EXIT_NOT_TRUSTED,
}


def register(cli: click.Group) -> click.Group:
    """Add the ``pack`` group to ``cli``; the install commands join it from their own module
    (:func:`ongrid_skills.doors.cli.pack_install.register`, called by the CLI's main)."""
    cli.add_command(pack)
    return pack


@click.group()
def pack() -> None:
    """Build, sign and verify packs: skills and personas that travel as one unit."""


def fail(exc: SkillError, *, as_json: bool = False) -> NoReturn:
    """Report ``exc`` with every problem it lists, and exit with its status."""
    code = EXIT_BY_CODE.get(exc.code, EXIT_USAGE)
    if as_json:
        click.echo(json.dumps({"error": exc.to_dict()}, indent=2))
    if isinstance(exc, PackError) and exc.problems:
        click.echo(f"error: {exc.summary}", err=True)
        for problem in exc.problems:
            click.echo(problem.format(), err=True)
    elif isinstance(exc, SkillCollision):
        click.echo(f"error: pack {exc.label} brings names already loaded:", err=True)
        for kind, name, origin in exc.collisions:
            click.echo(f"  {kind} {name!r} is taken by {origin}", err=True)
    else:
        click.echo(f"error: {exc.message}", err=True)
    sys.exit(code)


def limits_of(ctx: click.Context) -> Limits:
    from ongrid_skills.packs import Limits  # noqa: PLC0415 - lazy: see the module docstring

    return Limits.from_settings(ctx.obj.settings())


@pack.command()
@click.argument("folder", type=click.Path(file_okay=False, path_type=Path))
@click.option(
    "-o",
    "--output",
    type=click.Path(path_type=Path),
    help="Archive to write, or a folder to write <id>-<version>.tar.gz into (default: here).",
)
@click.option("--json", "as_json", is_flag=True, help="Print what was built as JSON.")
@click.pass_context
def build(ctx: click.Context, folder: Path, output: Path | None, as_json: bool) -> None:
    """Validate the pack FOLDER and write its reproducible .tar.gz."""
    from ongrid_skills.packs import build_archive  # noqa: PLC0415

    try:
        built = build_archive(folder, output, limits_of(ctx))
    except SkillError as exc:
        fail(exc, as_json=as_json)
    for problem in built.contents.warnings:
        click.echo(problem.format(), err=True)
    if as_json:
        body = {
            "archive": str(built.path),
            "pack": built.manifest.to_dict(),
            "digest": built.digest,
            **built.contents.summary(),
        }
        click.echo(json.dumps(body, indent=2))
        return
    counts = f"{len(built.contents.skills)} skills, {len(built.contents.personas)} personas"
    click.echo(f"built {built.path} ({built.manifest.label}: {counts})")
    click.echo(f"digest {built.digest}")


@pack.command()
@click.argument("path", type=click.Path(exists=True, path_type=Path))
@click.option(
    "--key",
    "key_path",
    required=True,
    type=click.Path(dir_okay=False, path_type=Path),
    help="Ed25519 private key, OpenSSH format (ssh-keygen -t ed25519) or PEM.",
)
@click.pass_context
def sign(ctx: click.Context, path: Path, key_path: Path) -> None:
    """Sign the pack PATH: an archive gets ARCHIVE.sig beside it, a folder its pack.sig.

    A passphrase-protected key asks for its passphrase on the terminal (or reads one line
    from stdin when stdin is not a terminal).
    """
    from ongrid_skills.packs import sign_path  # noqa: PLC0415

    try:
        key = _signing_key(key_path)
        written, made = sign_path(path, key, limits_of(ctx))
    except SkillError as exc:
        fail(exc)
    click.echo(f"signed {made.digest}")
    click.echo(f"signer {made.signer}")
    click.echo(f"wrote {written}")


def _signing_key(path: Path) -> SigningKey:
    """The key of ``path``; an encrypted one asks for its passphrase on the terminal (three
    tries), or reads it as one line from stdin when stdin is not a terminal."""
    from ongrid_skills.packs import load_signing_key  # noqa: PLC0415

    try:
        return load_signing_key(path)
    except PassphraseRequired:
        pass
    if not sys.stdin.isatty():
        line = sys.stdin.readline().rstrip("\r\n")
        if not line:
            raise PassphraseRequired(f"{path}: the key is encrypted: no passphrase on stdin")
        return load_signing_key(path, line.encode("utf-8"))
    for _attempt in range(3):
        try:
            secret = click.prompt(f"passphrase for {path}", hide_input=True, err=True)
        except click.Abort:
            raise PassphraseRequired(f"{path}: the key is encrypted: no passphrase given") from None
        try:
            return load_signing_key(path, secret.encode("utf-8"))
        except PassphraseRequired as exc:
            click.echo(exc.message, err=True)
    raise PassphraseRequired(f"{path}: wrong passphrase, three times")


@pack.command()
@click.argument("path", type=click.Path(exists=True, path_type=Path))
@click.option(
    "--trusted-keys",
    type=click.Path(dir_okay=False, path_type=Path),
    help="File of trusted keys (ssh-ed25519 lines or PEM); default ONGRID_TRUSTED_PACK_KEYS.",
)
@click.option(
    "--signature",
    type=click.Path(dir_okay=False, path_type=Path),
    help="Signature file (default: ARCHIVE.sig beside it, else the pack's pack.sig).",
)
@click.option("--json", "as_json", is_flag=True, help="Print the verdict as JSON.")
@click.pass_context
def verify(
    ctx: click.Context,
    path: Path,
    trusted_keys: Path | None,
    signature: Path | None,
    as_json: bool,
) -> None:
    """Check the pack PATH (an archive or a folder): digest, signature and signer.

    Exit 0 when validly signed by a trusted key, 1 for a bad signature or a digest mismatch,
    2 for bad input, 3 when unsigned or signed by a key that is not trusted.
    """
    from ongrid_skills.packs import verify_path  # noqa: PLC0415

    try:
        trusted = _trusted(ctx, trusted_keys)
        verdict = verify_path(path, trusted, limits_of(ctx), signature=signature)
    except SkillError as exc:
        fail(exc, as_json=as_json)
    if as_json:
        click.echo(json.dumps(verdict.to_dict(), indent=2))
    else:
        _print_verdict(verdict, trusted)
    sys.exit(EXIT_OK if verdict.trusted else EXIT_NOT_TRUSTED)


def _trusted(ctx: click.Context, given: Path | None) -> TrustedKeys:
    from ongrid_skills.packs import load_trusted_keys  # noqa: PLC0415

    path: Any = given if given is not None else ctx.obj.settings().trusted_pack_keys
    return load_trusted_keys(path)


def _print_verdict(verdict: Verification, trusted: TrustedKeys) -> None:
    if verdict.manifest is not None:
        click.echo(f"pack {verdict.manifest.label}")
    click.echo(f"digest {verdict.digest}")
    if verdict.signature is None:
        click.echo("unsigned")
        return
    click.echo(f"signer {verdict.signer} ({verdict.signature_origin})")
    if verdict.trusted:
        key = trusted.get(verdict.signature.signer)
        named = f": {key.comment}" if key is not None and key.comment else ""
        click.echo(f"trusted{named}")
    else:
        click.echo("not trusted: the signature is valid, but the signer is not a trusted key")

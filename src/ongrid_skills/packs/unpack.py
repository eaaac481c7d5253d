"""Safe unpacking of a ``.tar.gz``, ``.tar`` or ``.zip`` into a new staging folder, all or nothing.

Archives are read entry by entry (``tarfile`` in stream mode, ``zipfile`` one member at a
time) and every file is written by this module, never by ``extractall``. Any violation of the
rules of :mod:`ongrid_skills.packs.files` refuses the whole pack: the staging folder and
everything already written in it are removed and :class:`~ongrid_skills.errors.UnsafePack` is
raised. On top of those rules:

- links are refused, symbolic or hard, wherever they point; so are devices, FIFOs, sparse and
  contiguous tar members, encrypted zip members;
- a file's mode becomes ``755`` or ``644`` (setuid/setgid/sticky dropped, not refused);
- sizes in headers are never trusted: the bytes actually written are counted, and the file that
  takes the total past ``max_bytes`` stops the unpacking there. For ``.tar.gz`` the
  decompressed stream itself is capped too (file bytes plus a bounded allowance for headers),
  so a compression bomb made of headers or padding stops as early;
- the archive file itself may be at most as large as the same allowance;
- ``.git`` folders are skipped (never written).

The format is told by the first bytes (gzip, zip, or a tar header's ``ustar``), not by the
file name. Files are created
with ``O_EXCL | O_NOFOLLOW`` in folders this module made, so no entry can write through a link.

It must never write outside the staging folder, and never leave a staging folder behind when it
refuses.
"""

from __future__ import annotations

import contextlib
import gzip
import io
import os
import shutil
import stat
import tarfile
import tempfile
import zipfile
import zlib
from pathlib import Path
from typing import IO

from ongrid_skills.errors import PackError, UnsafePack
from ongrid_skills.packs.files import (
    EXECUTABLE,
    Limits,
    PathSet,
    clean_path,
    is_ignored,
    normal_mode,
    special_kind,
)

#: Per entry, what headers may add to the decompressed stream of a tar (a long name's pax
#: header, the header block, the padding): the cap of the stream is max_bytes plus this per
#: allowed entry.
HEADER_ALLOWANCE = 16 * 1024
_CHUNK = 256 * 1024
_GZIP_MAGIC = b"\x1f\x8b"
_ZIP_MAGICS = (b"PK\x03\x04", b"PK\x05\x06")
#: ``ustar`` at offset 257 of a tar's first header (POSIX ``ustar\0`` and GNU ``ustar ``).
_TAR_MAGIC = b"ustar"
_TAR_MAGIC_START = 257
_TAR_MAGIC_END = _TAR_MAGIC_START + len(_TAR_MAGIC)
_ZIP_ENCRYPTED = 0x1
_ZIP_UTF8 = 0x800
_ZIP_UNIX = 3


def archive_kind(path: Path) -> str | None:
    """``tar.gz``, ``tar`` (POSIX ustar or GNU) or ``zip`` by the file's first bytes, None for
    anything else."""
    try:
        with open(path, "rb") as fh:
            head = fh.read(_TAR_MAGIC_END)
    except OSError:
        return None
    if head.startswith(_GZIP_MAGIC):
        return "tar.gz"
    if head[:4] in _ZIP_MAGICS:
        return "zip"
    if head[_TAR_MAGIC_START:_TAR_MAGIC_END] == _TAR_MAGIC:
        return "tar"
    return None


def stream_cap(limits: Limits) -> int:
    """The most bytes an archive (or a tar's decompressed stream) may hold."""
    return limits.max_bytes + (limits.max_files + 2) * HEADER_ALLOWANCE


def unpack_archive(archive: Path, into: Path, limits: Limits | None = None) -> Path:
    """Unpack ``archive`` into a new folder under ``into`` and return that folder.

    Raises UnsafePack for a violation, PackError for an unreadable or corrupt archive; either
    way nothing is left under ``into``.
    """
    limits = limits or Limits()
    try:
        st = os.stat(archive)
    except OSError as exc:
        raise PackError(f"{archive}: cannot read: {exc.strerror or exc}") from None
    if not stat.S_ISREG(st.st_mode):  # a FIFO would block the first read
        raise PackError(f"{archive}: not a regular file")
    size = st.st_size
    kind = archive_kind(archive)
    if kind is None:
        raise PackError(f"{archive}: not a .tar.gz, .tar or .zip archive (or cannot be read)")
    if size > stream_cap(limits):
        raise UnsafePack(archive.name, f"the archive is over {stream_cap(limits)} bytes")
    staging = Path(tempfile.mkdtemp(prefix=".staging-", dir=into))
    try:
        writer = Writer(staging, limits)
        if kind in ("tar.gz", "tar"):
            _unpack_tar(archive, writer, limits, compressed=kind == "tar.gz")
        else:
            _unpack_zip(archive, writer, limits)
    except UnsafePack:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    except (tarfile.TarError, zipfile.BadZipFile, EOFError, zlib.error) as exc:
        shutil.rmtree(staging, ignore_errors=True)
        raise PackError(f"{archive}: corrupt {kind} archive: {exc}") from None
    except NotImplementedError as exc:  # a zip compression method zipfile does not know
        shutil.rmtree(staging, ignore_errors=True)
        raise PackError(f"{archive}: unsupported {kind} archive: {exc}") from None
    except OSError as exc:  # gzip.BadGzipFile is one; so is a full disk
        shutil.rmtree(staging, ignore_errors=True)
        raise PackError(f"{archive}: cannot unpack: {exc.strerror or exc}") from None
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    return staging


class Writer:
    """Writes the entries of one pack under ``staging``, checking each and counting bytes."""

    def __init__(self, staging: Path, limits: Limits) -> None:
        self.staging = staging
        self.limits = limits
        self.paths = PathSet(limits)
        self.total = 0
        self._made: set[str] = {""}

    def directory(self, name: str) -> None:
        path = clean_path(name)
        if not path or is_ignored(path):
            return
        self.paths.add(path, "dir")
        self._folder(path)

    def file(self, name: str, mode: int, data: IO[bytes]) -> None:
        path = clean_path(name)
        if not path:
            raise UnsafePack(name, "a file entry names the pack's root")
        if is_ignored(path):
            return
        self.paths.add(path, "file")
        parent = path.rpartition("/")[0]
        self._folder(parent)
        flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
        fd = os.open(self.staging / path, flags, 0o600)
        try:
            while chunk := data.read(_CHUNK):
                self.total += len(chunk)
                if self.total > self.limits.max_bytes:
                    raise UnsafePack(path, f"more than {self.limits.max_bytes} bytes unpacked")
                _write_all(fd, chunk)
            os.fchmod(fd, normal_mode(mode))
        finally:
            os.close(fd)

    def _folder(self, path: str) -> None:
        """Make ``path`` and its parents (folders of this staging only: never a link)."""
        if path in self._made:
            return
        self._folder(path.rpartition("/")[0])
        target = self.staging / path
        try:
            os.mkdir(target, 0o700)
        except FileExistsError:
            if not stat.S_ISDIR(os.lstat(target).st_mode):
                raise UnsafePack(path, "is both a file and a folder") from None
        os.chmod(target, EXECUTABLE, follow_symlinks=False)
        self._made.add(path)


def _write_all(fd: int, chunk: bytes) -> None:
    view = memoryview(chunk)
    while view:
        view = view[os.write(fd, view) :]


class CappedReader(io.RawIOBase):
    """A read-only stream that refuses to give more than ``cap`` bytes in total."""

    def __init__(self, inner: IO[bytes] | gzip.GzipFile, cap: int, shown: str) -> None:
        self.inner = inner
        self.cap = cap
        self.shown = shown
        self.count = 0

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: memoryview) -> int:  # type: ignore[override]
        data = self.inner.read(len(buffer))
        self.count += len(data)
        if self.count > self.cap:
            raise UnsafePack(self.shown, f"the archive expands past {self.cap} bytes")
        buffer[: len(data)] = data
        return len(data)


def _unpack_tar(archive: Path, writer: Writer, limits: Limits, *, compressed: bool) -> None:
    with open(archive, "rb") as raw, contextlib.ExitStack() as stack:
        stream: IO[bytes] | gzip.GzipFile = raw
        if compressed:
            stream = stack.enter_context(gzip.GzipFile(fileobj=raw, mode="rb"))
        capped = io.BufferedReader(CappedReader(stream, stream_cap(limits), archive.name))
        with tarfile.open(
            fileobj=capped, mode="r|", encoding="utf-8", errors="surrogateescape"
        ) as tar:
            for member in tar:
                _tar_member(tar, member, writer)


def _tar_member(tar: tarfile.TarFile, member: tarfile.TarInfo, writer: Writer) -> None:
    name = member.name
    if member.type in (tarfile.REGTYPE, tarfile.AREGTYPE):
        data = tar.extractfile(member)
        if data is None:  # pragma: no cover - regular members always have data
            raise UnsafePack(clean_path(name), "an unreadable file entry")
        writer.file(name, member.mode, data)
    elif member.isdir():
        writer.directory(name)
    elif member.issym():
        raise UnsafePack(clean_path(name), f"a symbolic link (to {member.linkname!r})")
    elif member.islnk():
        raise UnsafePack(clean_path(name), f"a hard link (to {member.linkname!r})")
    elif member.ischr() or member.isblk():
        raise UnsafePack(clean_path(name), "a device file")
    elif member.isfifo():
        raise UnsafePack(clean_path(name), "a FIFO")
    else:
        what = "a sparse file" if member.issparse() else f"an entry of type {member.type!r}"
        raise UnsafePack(clean_path(name), f"{what}: only files and folders")


def _unpack_zip(archive: Path, writer: Writer, limits: Limits) -> None:
    try:
        zf = zipfile.ZipFile(archive)
    except UnicodeDecodeError:
        raise UnsafePack(archive.name, "an entry's name is not valid UTF-8") from None
    with zf:
        infos = zf.infolist()
        if len(infos) > limits.max_files:
            raise UnsafePack(archive.name, f"more than {limits.max_files} entries")
        for info in infos:
            name = _zip_name(info)
            mode = info.external_attr >> 16 if info.create_system == _ZIP_UNIX else 0
            kind = stat.S_IFMT(mode)
            if kind and not stat.S_ISREG(mode) and not stat.S_ISDIR(mode):
                raise UnsafePack(clean_path(name), f"{special_kind(mode)}: only files and folders")
            if info.flag_bits & _ZIP_ENCRYPTED:
                raise UnsafePack(clean_path(name), "an encrypted entry")
            if info.is_dir() or stat.S_ISDIR(mode):
                writer.directory(name)
                continue
            with zf.open(info) as data:
                writer.file(name, mode, data)


def _zip_name(info: zipfile.ZipInfo) -> str:
    """The entry's full name as UTF-8 (zipfile truncates ``filename`` at a NUL byte, and
    decodes names without the UTF-8 flag as cp437: their bytes must still be UTF-8)."""
    name = info.orig_filename
    if info.flag_bits & _ZIP_UTF8:
        return name
    raw = name.encode("cp437")
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError:
        raise UnsafePack(
            raw.decode("utf-8", "backslashreplace"), "the name is not valid UTF-8"
        ) from None

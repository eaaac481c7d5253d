"""Safe unpacking: the hostile-archive zoo. Each archive is refused whole, nothing is written
outside the staging folder, and the staging folder is gone after the refusal."""

from __future__ import annotations

import gzip
import io
import os
import stat
import tarfile
import warnings
from pathlib import Path

import pytest

from ongrid_skills.errors import PackError, UnsafePack
from ongrid_skills.packs import unpack as unpack_module
from ongrid_skills.packs.files import Limits
from ongrid_skills.packs.unpack import unpack_archive as unpack
from tests.support.packs import Entry, pack_entries, tar_gz, tree, zip_file

ARCHIVES = Path(__file__).parent / "archives"
KiB, MiB, GiB = 1024, 1024 * 1024, 1024 * 1024 * 1024


@pytest.fixture
def into(tmp_path: Path) -> Path:
    (tmp_path / "outside").mkdir()
    (tmp_path / "into").mkdir()
    return tmp_path / "into"


def refused(archive: Path, into: Path, limits: Limits | None = None) -> UnsafePack:
    """Unpack ``archive``, expect UnsafePack; check nothing is left anywhere."""
    outside = into.parent / "outside"
    before = tree(outside)
    with pytest.raises(UnsafePack) as caught:
        unpack(archive, into, limits)
    assert list(into.iterdir()) == [], "the staging folder must be removed"
    assert tree(outside) == before, "nothing may be written outside the staging folder"
    return caught.value


def both(tmp_path: Path, entries: list[Entry]) -> list[Path]:
    """The same entries as a .tar.gz and as a .zip."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # zipfile warns about the duplicate names we ask for
        return [tar_gz(tmp_path / "a.tar.gz", entries), zip_file(tmp_path / "a.zip", entries)]


# ---- names ------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("name", "rule"),
    [
        ("../../outside/evil", "'..' component"),
        ("skills/../../../outside/evil", "'..' component"),
        ("skills/..", "'..' component"),
        ("a\nb", "control character"),
        ("..\\..\\outside\\evil", "backslash"),
    ],
)
def test_a_name_that_leaves_the_pack_or_hides_something_refuses_the_whole_archive(
    tmp_path: Path, into: Path, name: str, rule: str
) -> None:
    for archive in both(tmp_path, [*pack_entries(), Entry(name, b"evil")]):
        assert rule in refused(archive, into).rule


def test_an_absolute_path_is_refused(tmp_path: Path, into: Path) -> None:
    target = str(into.parent / "outside" / "abs")
    for archive in both(tmp_path, [*pack_entries(), Entry(target, b"evil")]):
        assert refused(archive, into).rule == "absolute path"


def test_names_that_differ_only_by_case_are_refused(tmp_path: Path, into: Path) -> None:
    entries = [*pack_entries(), Entry("README.md", b"a"), Entry("readme.md", b"b")]
    for archive in both(tmp_path, entries):
        assert "only by letter case" in refused(archive, into).rule


def test_names_that_differ_only_by_unicode_normalisation_are_refused(
    tmp_path: Path, into: Path
) -> None:
    entries = [*pack_entries(), Entry("caf\u00e9.md", b"a"), Entry("cafe\u0301.md", b"b")]
    for archive in both(tmp_path, entries):
        assert "only by letter case" in refused(archive, into).rule


def test_a_duplicate_entry_is_refused(tmp_path: Path, into: Path) -> None:
    entries = [*pack_entries(), Entry("pack.json", b'{"id": "other"}')]
    for archive in both(tmp_path, entries):
        assert refused(archive, into).rule == "duplicate entry"


def test_a_folder_named_twice_is_a_duplicate_too(tmp_path: Path, into: Path) -> None:
    entries = [Entry("skills/", kind="dir"), Entry("skills/", kind="dir"), *pack_entries()]
    assert refused(tar_gz(tmp_path / "a.tar.gz", entries), into).rule == "duplicate entry"


def test_a_path_that_is_both_a_file_and_a_folder_is_refused(tmp_path: Path, into: Path) -> None:
    entries = [*pack_entries(), Entry("notes", b"x"), Entry("notes/more", b"y")]
    for archive in both(tmp_path, entries):
        assert "both a file and a folder" in refused(archive, into).rule


def test_a_tar_name_that_is_not_utf8_is_refused(tmp_path: Path, into: Path) -> None:
    path = tmp_path / "a.tar.gz"
    with tarfile.open(path, "w:gz", format=tarfile.GNU_FORMAT, errors="surrogateescape") as tar:
        info = tarfile.TarInfo("bad-\udcff.md")
        info.size = 1
        tar.addfile(info, io.BytesIO(b"x"))
    assert "not valid UTF-8" in refused(path, into).rule


def test_a_zip_name_that_is_not_utf8_is_refused(tmp_path: Path, into: Path) -> None:
    placeholder = "bad-@@@@.md"
    path = zip_file(tmp_path / "a.zip", [*pack_entries(), Entry(placeholder, b"x")])
    raw = path.read_bytes().replace(placeholder.encode(), b"bad-\xff\xfe\xfd\xfc.md")
    path.write_bytes(raw)  # names are outside the CRC: the archive stays readable
    assert "not valid UTF-8" in refused(path, into).rule


# ---- entry types ------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("kind", "target", "rule"),
    [
        ("symlink", "../../outside", "symbolic link"),
        ("symlink", "/etc", "symbolic link"),
        ("symlink", "pack.json", "symbolic link"),  # even one that stays inside
        ("hardlink", "pack.json", "hard link"),
        ("hardlink", "/etc/passwd", "hard link"),
        ("fifo", "", "FIFO"),
        ("chr", "", "device file"),
        ("blk", "", "device file"),
        ("sparse", "", "sparse file"),
    ],
)
def test_links_devices_fifos_and_sparse_files_in_a_tar_are_refused(
    tmp_path: Path, into: Path, kind: str, target: str, rule: str
) -> None:
    archive = tar_gz(tmp_path / "a.tar.gz", [*pack_entries(), Entry("x", kind=kind, target=target)])
    assert rule in refused(archive, into).rule


@pytest.mark.parametrize(("kind", "rule"), [("symlink", "symbolic link"), ("fifo", "FIFO")])
def test_links_and_fifos_in_a_zip_are_refused(
    tmp_path: Path, into: Path, kind: str, rule: str
) -> None:
    archive = zip_file(tmp_path / "a.zip", [*pack_entries(), Entry("x", kind=kind, target="/etc")])
    assert rule in refused(archive, into).rule


def test_a_link_before_a_file_written_through_it_stops_at_the_link(
    tmp_path: Path, into: Path
) -> None:
    entries = [Entry("skills", kind="symlink", target="../../outside"), *pack_entries()]
    assert "symbolic link" in refused(tar_gz(tmp_path / "a.tar.gz", entries), into).rule


def test_an_encrypted_zip_entry_is_refused(tmp_path: Path, into: Path) -> None:
    path = zip_file(tmp_path / "a.zip", pack_entries())
    raw = bytearray(path.read_bytes())
    # Set the "encrypted" bit of every entry's flags, in the local and the central headers.
    for signature, offset in ((b"PK\x03\x04", 6), (b"PK\x01\x02", 8)):
        start = 0
        while (start := raw.find(signature, start)) != -1:
            raw[start + offset] |= 0x1
            start += 4
    path.write_bytes(bytes(raw))
    assert refused(path, into).rule == "an encrypted entry"


def test_setuid_and_setgid_bits_are_dropped_not_refused(tmp_path: Path, into: Path) -> None:
    entries = [*pack_entries(), Entry("tool", b"#!/bin/sh\n", 0o6777), Entry("doc", b"d", 0o4664)]
    for archive in both(tmp_path, entries):
        staging = unpack(archive, into)
        assert stat.S_IMODE((staging / "tool").stat().st_mode) == 0o755
        assert stat.S_IMODE((staging / "doc").stat().st_mode) == 0o644
        assert stat.S_IMODE((staging / "skills/alpha/run").stat().st_mode) == 0o755


# ---- limits and bombs ------------------------------------------------------------------------
def test_more_entries_than_the_limit_are_refused(tmp_path: Path, into: Path) -> None:
    entries = [*pack_entries(), *(Entry(f"docs/{n}.md", b"x") for n in range(10))]
    for archive in both(tmp_path, entries):
        assert "more than 8 entries" in refused(archive, into, Limits(max_files=8)).rule


def test_more_bytes_than_the_limit_are_refused(tmp_path: Path, into: Path) -> None:
    entries = [*pack_entries(), Entry("big.bin", b"x" * (64 * KiB))]
    for archive in both(tmp_path, entries):
        rule = refused(archive, into, Limits(max_bytes=32 * KiB)).rule
        assert "more than 32768 bytes" in rule


def multi_member_gzip(head: bytes, zeros: int) -> bytes:
    """``head`` then ``zeros`` zero bytes, as a gzip stream of repeated members: a 1 GiB
    expansion costs about a megabyte of file and no time to build."""
    chunk = gzip.compress(b"\0" * MiB, mtime=0)
    return gzip.compress(head, mtime=0) + chunk * (zeros // MiB)


def test_a_compression_bomb_stops_once_the_limit_is_written_whatever_the_header_says(
    tmp_path: Path, into: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    header = tarfile.TarInfo("pack/bomb.bin")
    header.size = 10 * MiB  # a lie would do too: the header is never trusted
    path = tmp_path / "bomb.tar.gz"
    path.write_bytes(multi_member_gzip(header.tobuf(tarfile.GNU_FORMAT), GiB))
    written: list[int] = []
    real_write = unpack_module._write_all

    def counting(fd: int, chunk: bytes) -> None:
        written.append(len(chunk))
        real_write(fd, chunk)

    monkeypatch.setattr(unpack_module, "_write_all", counting)
    limits = Limits(max_files=100, max_bytes=2 * MiB)
    assert "more than" in refused(path, into, limits).rule
    assert sum(written) <= limits.max_bytes  # the chunk that crossed the limit was not written


def test_a_bomb_of_headers_is_stopped_by_the_cap_on_the_decompressed_stream(
    tmp_path: Path, into: Path
) -> None:
    header = tarfile.TarInfo("././@PaxHeader")
    header.type = tarfile.XHDTYPE
    header.size = GiB  # a pax header tarfile would read into memory whole
    path = tmp_path / "headers.tar.gz"
    path.write_bytes(multi_member_gzip(header.tobuf(tarfile.GNU_FORMAT), GiB))
    limits = Limits(max_files=10, max_bytes=MiB)
    assert "expands past" in refused(path, into, limits).rule


def test_an_archive_larger_than_the_limits_allow_is_refused_before_reading(
    tmp_path: Path, into: Path
) -> None:
    path = tmp_path / "big.zip"
    zip_file(path, [*pack_entries(), Entry("noise.bin", bytes(range(256)) * 4096)])
    assert "the archive is over" in refused(path, into, Limits(max_files=1, max_bytes=1)).rule


# ---- real archives made by real tools ---------------------------------------------------------
def test_a_real_zip_slip_archive_is_refused_and_writes_nothing(into: Path) -> None:
    evil = Path("/tmp/ongrid-zip-slip-evil.txt")
    assert not evil.exists()
    assert "'..' component" in refused(ARCHIVES / "zip-slip.zip", into).rule
    assert not evil.exists()


def test_a_real_symlink_chain_archive_is_refused_and_writes_nothing(into: Path) -> None:
    evil = Path("/tmp/ongrid-symlink-chain-evil.txt")
    assert not evil.exists()
    error = refused(ARCHIVES / "symlink-chain.tar.gz", into)
    assert error.path == "skills/l1"
    assert "symbolic link" in error.rule
    assert not evil.exists()


# ---- what is accepted ------------------------------------------------------------------------
def test_a_tar_and_a_zip_of_the_same_files_unpack_to_the_same_tree(
    tmp_path: Path, into: Path
) -> None:
    entries = [Entry("./", kind="dir"), *pack_entries("./"), Entry("docs/", kind="dir")]
    tar, zipped = both(tmp_path, entries)
    a, b = unpack(tar, into), unpack(zipped, into)
    assert (
        tree(a)
        == tree(b)
        == sorted(
            [
                "docs",
                "pack.json",
                "skills",
                "skills/alpha",
                "skills/alpha/run",
                "skills/alpha/skill.json",
            ]
        )
    )
    for relative in tree(a):
        assert (a / relative).stat().st_mode == (b / relative).stat().st_mode


def test_a_plain_tar_unpacks_like_its_gzipped_twin_under_the_same_rules(
    tmp_path: Path, into: Path
) -> None:
    entries = [Entry("./", kind="dir"), *pack_entries("./")]
    plain = tar_gz(tmp_path / "a.tar", entries, mode="w")
    assert tree(unpack(plain, into)) == tree(unpack(tar_gz(tmp_path / "a.tar.gz", entries), into))
    link = [*pack_entries(), Entry("skills/l1", kind="symlink", target="/etc/passwd")]
    (tmp_path / "fresh").mkdir()
    error = refused(tar_gz(tmp_path / "link.tar", link, mode="w"), tmp_path / "fresh")
    assert (error.path, "symbolic link" in error.rule) == ("skills/l1", True)


def test_git_folders_are_never_unpacked(tmp_path: Path, into: Path) -> None:
    entries = [*pack_entries(), Entry(".git/hooks/post-checkout", b"#!/bin/sh\n", 0o755)]
    for archive in both(tmp_path, entries):
        assert not (unpack(archive, into) / ".git").exists()


def test_a_corrupt_archive_is_a_pack_error_and_leaves_nothing(tmp_path: Path, into: Path) -> None:
    good = tar_gz(tmp_path / "a.tar.gz", [*pack_entries(), Entry("x", b"y" * 10000)])
    cut = tmp_path / "cut.tar.gz"
    cut.write_bytes(good.read_bytes()[:-40])
    with pytest.raises(PackError, match=r"corrupt|cannot unpack"):
        unpack(cut, into)
    assert list(into.iterdir()) == []


def test_a_file_that_is_no_archive_is_a_pack_error(tmp_path: Path, into: Path) -> None:
    path = tmp_path / "pack.tar.gz"
    path.write_text("not an archive\n")
    with pytest.raises(PackError, match=r"not a \.tar\.gz, \.tar or \.zip"):
        unpack(path, into)
    assert list(into.iterdir()) == []


def test_a_fifo_given_as_the_archive_is_refused_without_blocking(
    tmp_path: Path, into: Path
) -> None:
    fifo = tmp_path / "pack.tar.gz"
    os.mkfifo(fifo)
    with pytest.raises(PackError, match="not a regular file"):
        unpack(fifo, into)
    assert list(into.iterdir()) == []

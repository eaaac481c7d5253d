"""Downloading packs from a real HTTP server on loopback: the limits of size, time and redirects,
the schemes allowed, and the signature fetched beside an archive."""

from __future__ import annotations

import datetime
import ipaddress
import ssl
import time
from collections.abc import Iterator
from pathlib import Path
from typing import ClassVar

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from ongrid_skills.errors import FetchFailed
from ongrid_skills.packs.build import build_archive
from ongrid_skills.packs.fetch import FetchPolicy, download, shown_url
from ongrid_skills.packs.index import Catalog
from ongrid_skills.packs.sources import SourcePolicy, obtain
from tests.support.http import LoopbackHTTPServer, QuietHandler, serve
from tests.support.packs import write_pack


class Files(QuietHandler):
    """Serves ``files`` by path; ``/slow`` dribbles, ``/loop`` redirects to itself, ``/big``
    streams without a length, ``/to-http`` redirects to another scheme."""

    files: ClassVar[dict[str, bytes]] = {}

    def do_GET(self) -> None:
        if self.path == "/slow":
            self.send_response(200)
            self.send_header("Content-Length", "1000")
            self.end_headers()
            for _ in range(1000):
                self.wfile.write(b"x")
                self.wfile.flush()
                time.sleep(0.02)
            return
        if self.path.startswith("/loop"):
            self.send_body(302, b"", Location=f"/loop{len(self.path)}")
            return
        if self.path == "/big":
            self.send_response(200)
            self.send_header("Transfer-Encoding", "chunked")
            self.end_headers()
            chunk = b"y" * 4096
            for _ in range(100):
                self.wfile.write(b"%x\r\n%s\r\n" % (len(chunk), chunk))
            self.wfile.write(b"0\r\n\r\n")
            return
        if self.path == "/declared":
            self.send_response(200)
            self.send_header("Content-Length", str(10**9))
            self.end_headers()
            return
        if self.path == "/to-ftp":
            self.send_body(302, b"", Location="ftp://example.com/x.tar.gz")
            return
        body = self.files.get(self.path.split("?", 1)[0])
        if body is None:
            self.send_body(404, b"no")
            return
        self.send_body(200, body, "application/octet-stream")


@pytest.fixture
def server() -> Iterator[LoopbackHTTPServer]:
    Files.files = {}
    with serve(Files) as running:
        yield running


def url(server: LoopbackHTTPServer, path: str) -> str:
    return f"http://127.0.0.1:{server.server_address[1]}{path}"


HTTP_OK = FetchPolicy(max_bytes=64 * 1024, timeout=10, allow_http=True)


def test_a_download_over_the_size_limit_is_refused_while_it_streams(
    tmp_path: Path, server: LoopbackHTTPServer
) -> None:
    with pytest.raises(FetchFailed, match="over the limit of 65536 bytes"):
        download(url(server, "/big"), tmp_path / "a", HTTP_OK)
    assert not (tmp_path / "a").exists()


def test_a_declared_length_over_the_limit_is_refused_before_the_body(
    tmp_path: Path, server: LoopbackHTTPServer
) -> None:
    with pytest.raises(FetchFailed, match="1000000000 bytes, over the limit"):
        download(url(server, "/declared"), tmp_path / "a", HTTP_OK)


def test_a_download_slower_than_the_time_limit_is_cut_off(
    tmp_path: Path, server: LoopbackHTTPServer
) -> None:
    started = time.monotonic()
    with pytest.raises(FetchFailed, match=r"took longer than 0\.5 s"):
        download(url(server, "/slow"), tmp_path / "a", FetchPolicy(10**6, 0.5, True))
    assert time.monotonic() - started < 5  # the server would take 20 s
    assert not (tmp_path / "a").exists()


def test_redirects_are_bounded(tmp_path: Path, server: LoopbackHTTPServer) -> None:
    with pytest.raises(FetchFailed, match="more than 5 redirects"):
        download(url(server, "/loop"), tmp_path / "a", HTTP_OK)


def test_a_redirect_to_another_scheme_is_refused(
    tmp_path: Path, server: LoopbackHTTPServer
) -> None:
    with pytest.raises(FetchFailed, match="not an https:// URL"):
        download(url(server, "/to-ftp"), tmp_path / "a", HTTP_OK)


def test_plain_http_needs_the_operators_opt_in(tmp_path: Path, server: LoopbackHTTPServer) -> None:
    with pytest.raises(FetchFailed, match="plain http:// is not allowed"):
        download(url(server, "/x"), tmp_path / "a", FetchPolicy(1000))


def test_an_http_error_is_a_fetch_failure_naming_the_status(
    tmp_path: Path, server: LoopbackHTTPServer
) -> None:
    with pytest.raises(FetchFailed, match="answered 404"):
        download(url(server, "/missing.tar.gz"), tmp_path / "a", HTTP_OK)


def test_credentials_and_queries_of_a_url_are_never_shown() -> None:
    shown = shown_url("https://ann:secret@example.com:8443/p/x.tar.gz?token=abc#f")
    assert shown == "https://example.com:8443/p/x.tar.gz"


def test_an_archive_url_brings_its_signature_from_beside_it(
    tmp_path: Path, server: LoopbackHTTPServer
) -> None:
    archive = build_archive(write_pack(tmp_path / "src", "ops"), tmp_path).path
    Files.files = {
        "/dl/ops-1.0.0.tar.gz": archive.read_bytes(),
        "/dl/ops-1.0.0.tar.gz.sig": b"{}",
    }
    work = tmp_path / "work"
    work.mkdir()
    policy = SourcePolicy(HTTP_OK)

    candidate = obtain(url(server, "/dl/ops-1.0.0.tar.gz?x=1"), work, policy, Catalog)
    assert candidate.remote and candidate.signature is None  # a query: no .sig guessed
    assert candidate.source == url(server, "/dl/ops-1.0.0.tar.gz")

    again = tmp_path / "again"
    again.mkdir()
    candidate = obtain(url(server, "/dl/ops-1.0.0.tar.gz"), again, policy, Catalog)
    assert candidate.path.read_bytes() == archive.read_bytes()
    assert candidate.signature is not None and candidate.signature.read_bytes() == b"{}"
    assert candidate.name == "ops-1.0.0"


def self_signed(folder: Path) -> tuple[Path, Path]:
    """A certificate for 127.0.0.1 and its key, made with cryptography (PEM files)."""
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "127.0.0.1")])
    now = datetime.datetime.now(datetime.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(hours=1))
        .add_extension(
            x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]),
            critical=False,
        )
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(key, hashes.SHA256())
    )
    cert_file, key_file = folder / "cert.pem", folder / "key.pem"
    cert_file.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_file.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    return cert_file, key_file


def test_https_is_verified_against_the_ca_bundle_the_environment_names(
    tmp_path: Path, server: LoopbackHTTPServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    cert, key = self_signed(tmp_path)
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(cert, key)
    server.socket = context.wrap_socket(server.socket, server_side=True)
    Files.files = {"/x.tar.gz": b"payload"}
    address = f"https://127.0.0.1:{server.server_address[1]}/x.tar.gz"
    https_only = FetchPolicy(max_bytes=1000, timeout=10)

    with pytest.raises(FetchFailed, match=r"CERTIFICATE_VERIFY_FAILED|certificate verify failed"):
        download(address, tmp_path / "refused", https_only)
    monkeypatch.setenv("SSL_CERT_FILE", str(cert))
    assert download(address, tmp_path / "a", https_only)
    assert (tmp_path / "a").read_bytes() == b"payload"

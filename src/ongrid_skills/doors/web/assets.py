"""Static files of the console (our own CSS, JS and images), served from memory under a content
hash: ``/static/<digest>/<path>``.

The digest covers every file (its path and bytes), so one changed file changes every URL: the
JS modules import each other by relative URLs (``./live.js``) and so always get files of the
same version. Responses are cached for a year (``immutable``). A request is answered only when
its digest is the current one and its path is one of the files read at start-up (an exact key
lookup: nothing a client sends is ever joined to a filesystem path).
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path

from starlette.requests import Request
from starlette.responses import Response

from ongrid_skills.errors import NotFound

STATIC_DIR = Path(__file__).with_name("static")
PREFIX = "/static"
MEDIA_TYPES = {
    ".css": "text/css; charset=utf-8",
    ".js": "text/javascript; charset=utf-8",
    ".svg": "image/svg+xml",
    ".png": "image/png",
}
CACHE_FOREVER = "public, max-age=31536000, immutable"
DAY = "public, max-age=86400"
ICON = "img/icon.svg"


@dataclass(frozen=True, slots=True)
class Asset:
    body: bytes
    media_type: str


class Assets:
    """The static files, read once; ``url(path)`` for templates, ``response(...)`` for the route."""

    def __init__(self, root: Path = STATIC_DIR) -> None:
        files: dict[str, Asset] = {}
        digest = hashlib.sha256()
        for path in sorted(p for p in root.rglob("*") if p.is_file()):
            media_type = MEDIA_TYPES.get(path.suffix)
            if media_type is None:
                continue  # only the kinds we serve (no editor backups, no stray files)
            name = path.relative_to(root).as_posix()
            body = path.read_bytes()
            files[name] = Asset(body, media_type)
            digest.update(f"{name}\0{len(body)}\0".encode())
            digest.update(body)
        self.files = files
        self.digest = digest.hexdigest()[:16]

    def url(self, name: str) -> str:
        """The URL of a static file; a name that is not a file is a bug in a template."""
        if name not in self.files:
            raise KeyError(f"no static file {name!r}")
        return f"{PREFIX}/{self.digest}/{name}"

    def response(self, digest: str, name: str) -> Response:
        asset = self.files.get(name)
        if digest != self.digest or asset is None:
            raise NotFound("no such file")
        return Response(
            asset.body, media_type=asset.media_type, headers={"cache-control": CACHE_FOREVER}
        )


async def favicon(request: Request) -> Response:
    """``/favicon.ico``, which browsers ask for by themselves on pages without an icon link
    (a plain-text refusal): our SVG icon, cached for a day."""
    asset = request.app.state.assets.files[ICON]
    return Response(asset.body, media_type=asset.media_type, headers={"cache-control": DAY})


async def static_file(request: Request) -> Response:
    """The route of ``/static/{digest}/{name:path}``."""
    assets: Assets = request.app.state.assets
    return assets.response(request.path_params["digest"], request.path_params["name"])

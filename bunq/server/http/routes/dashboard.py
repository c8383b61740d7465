"""The web dashboard: static files shipped in the package (bunq/server/dashboard/).

The pages hold no data: they load without a token and ask for one when the
API answers 401 (kept in the tab's sessionStorage).
"""

from __future__ import annotations

from importlib import resources

from ..router import route
from ..transport import Request, Response, error_response

TYPES = {
    ".html": "text/html; charset=utf-8",
    ".js": "text/javascript; charset=utf-8",
    ".css": "text/css; charset=utf-8",
    ".svg": "image/svg+xml",
}
_HEADERS = {
    "Cache-Control": "no-cache",
    "X-Content-Type-Options": "nosniff",
    "Content-Security-Policy": "default-src 'self'; img-src 'self' data:; "
    "style-src 'self'; script-src 'self'; connect-src 'self'; frame-ancestors 'none'",
}


def _static(name: str) -> Response:
    suffix = name[name.rfind(".") :] if "." in name else ""
    if "/" in name or name.startswith(".") or suffix not in TYPES:
        return error_response(404, "not_found", f"no file {name}")
    file = resources.files("bunq.server") / "dashboard" / name
    if not file.is_file():
        return error_response(404, "not_found", f"no file {name}")
    return Response(200, file.read_bytes(), TYPES[suffix], dict(_HEADERS))


@route("GET", "/", "The dashboard (HTML)", "dashboard", auth=False, raw="text/html")
async def index(req: Request) -> Response:
    return _static("index.html")


@route("GET", "/ui/{file}", "The dashboard's scripts and styles", "dashboard",
       auth=False, raw="text/javascript")  # fmt: skip
async def static(req: Request) -> Response:
    return _static(req.params["file"])

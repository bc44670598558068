"""The web UI at ``/`` and the API docs at ``/docs`` and ``/redoc``: every asset is served by
provkg itself (no CDN: servers run air-gapped next to clusters).

The UI is static files (``provkg/api/ui/``): ES modules that read the store through the same
REST paths as any client (canned queries, ``/v1/sparql``, ``/v1/specs``), so a figure on a
page is the answer of ``provkg query`` and nothing user-typed reaches SPARQL unbound. Assets
are looked up in a fixed table, never joined to a path from the request. Swagger UI and
ReDoc come from the ``fastapi-offline`` package (their release bundles, pinned by the lock).
"""

from __future__ import annotations

from importlib.resources import files
from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import HTMLResponse, Response

from provkg.errors import NotFound

router = APIRouter(include_in_schema=False)

#: the UI's pages: scripts and styles from this server only, none inline; data only from it
UI_CSP = ("default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
          "connect-src 'self'; font-src 'self'; base-uri 'none'; form-action 'none'; "
          "frame-ancestors 'none'")
#: Swagger UI and ReDoc set style attributes and ReDoc searches in a blob: worker; their
#: scripts are still this server's files only
DOCS_CSP = ("default-src 'none'; script-src 'self'; style-src 'self' 'unsafe-inline'; "
            "img-src 'self' data:; connect-src 'self'; font-src 'self' data:; "
            "worker-src 'self' blob:; base-uri 'none'; form-action 'none'; frame-ancestors 'none'")

_MAX_MEASURES = 1_000  # names one lower-is-better request answers

_MEDIA = {".js": "text/javascript; charset=utf-8", ".css": "text/css; charset=utf-8",
          ".html": "text/html; charset=utf-8", ".png": "image/png", ".svg": "image/svg+xml"}


def _table(root: Any, names: list[str]) -> dict[str, Any]:
    return {n: root.joinpath(n) for n in names}


def _ui_assets() -> dict[str, Any]:
    """The UI folder's files (flat), listed once: a request only looks its name up here."""
    root = files("provkg.api").joinpath("ui")
    return _table(root, [e.name for e in root.iterdir() if "." + e.name.rsplit(".", 1)[-1] in _MEDIA])


def _vendor_assets() -> dict[str, Any]:
    root = files("fastapi_offline").joinpath("static")
    return _table(root, ["swagger-ui-bundle.js", "swagger-ui.css", "redoc.standalone.js",
                         "favicon.png"])


_ASSETS: dict[str, dict[str, Any]] = {}


def _assets(kind: str) -> dict[str, Any]:
    if kind not in _ASSETS:  # listed once per process
        _ASSETS[kind] = _ui_assets() if kind == "ui" else _vendor_assets()
    return _ASSETS[kind]


def _asset(kind: str, name: str) -> Response:
    path = _assets(kind).get(name)
    if path is None:
        raise NotFound("no such asset of the web UI")
    media = _MEDIA.get("." + name.rsplit(".", 1)[-1], "application/octet-stream")
    # the UI's own files change with provkg: revalidated; the vendor bundles are pinned
    cache = "no-cache" if kind == "ui" else "public, max-age=86400"
    return Response(path.read_bytes(), media_type=media,
                    headers={"Cache-Control": cache, "X-Content-Type-Options": "nosniff"})


def _page(text: str, csp: str) -> HTMLResponse:
    return HTMLResponse(text, headers={"Content-Security-Policy": csp,
                                       "X-Content-Type-Options": "nosniff",
                                       "Referrer-Policy": "no-referrer", "Cache-Control": "no-cache"})


@router.get("/")
async def index() -> Response:
    return _page(_assets("ui")["index.html"].read_text("utf-8"), UI_CSP)


@router.get("/ui/vendor/{name}")
async def vendor_asset(name: str) -> Response:
    return _asset("vendor", name)


@router.get("/ui/prefixes.json")
async def prefixes() -> dict[str, str]:
    """The prefixes the SPARQL editor declares for a new query (provkg's vocabularies)."""
    from provkg.vocab import PREFIXES

    return PREFIXES


@router.get("/ui/lower-is-better.json")
async def lower_is_better(request: Request) -> dict[str, bool]:
    """measure name -> whether lower is better, by the rule the ranking queries use
    (:func:`provkg.queries.lifecycle.lower_is_better`): the UI's "best" is theirs."""
    from provkg.queries.lifecycle import lower_is_better as rule

    names = request.query_params.getlist("measure")[:_MAX_MEASURES]
    return {name: rule(name) for name in names}


@router.get("/ui/{name}")
async def ui_asset(name: str) -> Response:
    return _asset("ui", name)


_DOCS = """<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>provkg API</title>
<link rel="icon" href="/ui/vendor/favicon.png"><link rel="stylesheet" href="/ui/vendor/swagger-ui.css">
</head><body><div id="swagger-ui"></div>
<script src="/ui/vendor/swagger-ui-bundle.js"></script><script src="/ui/docs.js"></script>
</body></html>"""

_REDOC = """<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>provkg API</title>
<link rel="icon" href="/ui/vendor/favicon.png"><link rel="stylesheet" href="/ui/redoc.css">
</head><body><redoc spec-url="/openapi.json"></redoc>
<script src="/ui/vendor/redoc.standalone.js"></script></body></html>"""


@router.get("/docs")
async def swagger_ui() -> Response:
    return _page(_DOCS, DOCS_CSP)


@router.get("/redoc")
async def redoc() -> Response:
    return _page(_REDOC, DOCS_CSP)

"""``GET /v1/export?format=...&run=...&lineage=...``: the store, one run or one value's lineage
as RDF, W3C PROV or a Workflow Run Crate (a zip), as ``provkg export`` writes them."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query, Request
from fastapi.concurrency import run_in_threadpool
from fastapi.responses import Response

from provkg.api.openapi import error_responses
from provkg.errors import BadParameter

router = APIRouter(tags=["export"])

_MAX_PARAM_CHARS = 4096


@router.get(
    "/v1/export",
    summary="Export the store, a run or a value's lineage (RDF, W3C PROV, RO-Crate)",
    description="`format`: `nq`, `trig`, `ttl`, `prov-json` (default), `prov-n`, `prov-xml`, "
                "`prov-jsonld` or `ro-crate` (a Workflow Run Crate as a zip). `run`: only that "
                "run (its id or IRI); `lineage`: only what that value (its id, IRI or location) "
                "was derived from; neither: the whole store. Data files are referenced by their "
                "locations, never copied from the server. A `Content-Disposition` names the file.",
    response_class=Response,
    responses={200: {"content": {m: {} for m in (
        "application/json", "application/n-quads", "application/trig", "text/turtle",
        "text/provenance-notation", "application/xml", "application/ld+json", "application/zip")}},
        **error_responses(400, 404, 504)},
)
async def get_export(
    request: Request,
    format: Annotated[str, Query(description="the export format: nq, trig, ttl, prov-json, prov-n, "
                                             "prov-xml, prov-jsonld or ro-crate")] = "prov-json",
    run: Annotated[str | None, Query(description="export only this run (its id or IRI)")] = None,
    lineage: Annotated[str | None, Query(description="export only this value's lineage (its id, IRI or "
                                                     "location)")] = None,
) -> Response:
    from provkg.service.export import FILE_NAMES, MEDIA_TYPES, export_bytes, export_format

    format = export_format("-", format)  # an unknown one: 400 bad_parameter, naming the known

    for name, value in (("run", run), ("lineage", lineage)):
        if value is not None and len(value) > _MAX_PARAM_CHARS:
            raise BadParameter(f"parameter {name!r} is longer than {_MAX_PARAM_CHARS} characters")
    service = request.app.state.service
    data, report = await run_in_threadpool(export_bytes, service.store, format, run=run, lineage=lineage)
    charset = "" if format == "ro-crate" else "; charset=utf-8"
    return Response(data, media_type=MEDIA_TYPES[format] + charset,
                    headers={"Content-Disposition": f'attachment; filename="{FILE_NAMES[format]}"'})

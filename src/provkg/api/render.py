"""Rows as JSON ``{"columns": [...], "rows": [...]}`` or CSV, chosen by the Accept header."""

from __future__ import annotations

import csv
import io
import math

import orjson
from fastapi import Request
from fastapi.responses import Response

from provkg.store.base import Rows

__all__ = ["wants_csv", "rows_response"]


def wants_csv(request: Request) -> bool:
    """True when the client asks for CSV (``Accept: text/csv``) and not for JSON first."""
    accept = request.headers.get("accept", "").lower()
    return "text/csv" in accept and not accept.strip().startswith("application/json")


def _json_safe(value: object) -> object:
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)  # JSON has no NaN / Infinity
    return value


def rows_response(request: Request, rows: Rows) -> Response:
    """The rows in the representation the client asked for."""
    if wants_csv(request):
        out = io.StringIO()
        writer = csv.writer(out, lineterminator="\n")
        writer.writerow(rows.columns)
        for row in rows.rows:
            writer.writerow(["" if v is None else v for v in row])
        return Response(out.getvalue(), media_type="text/csv; charset=utf-8")
    body = {"columns": rows.columns, "rows": [[_json_safe(v) for v in row] for row in rows.rows]}
    return Response(orjson.dumps(body), media_type="application/json")

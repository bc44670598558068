"""Bearer-token check for writes: constant-time, and the token never appears in answers."""

from __future__ import annotations

import hmac

from fastapi import Request

from provkg.api.errors import Unauthorized

__all__ = ["require_write_token"]


async def require_write_token(request: Request) -> None:
    """FastAPI dependency: when a token is configured, writes need ``Authorization: Bearer <token>``.

    Raises:
        Unauthorized: header missing, not a Bearer header, or a different token (401).
    """
    expected = request.app.state.service.settings.token
    if not expected:
        return
    header = request.headers.get("authorization", "")
    scheme, _, given = header.partition(" ")
    if scheme.lower() != "bearer" or not given:
        raise Unauthorized("this endpoint writes: send 'Authorization: Bearer <token>'")
    if not hmac.compare_digest(given.strip().encode("utf-8", "surrogateescape"),
                               expected.encode("utf-8")):
        raise Unauthorized("the bearer token is not valid for this server")

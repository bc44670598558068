"""Reading request bodies within limits: bytes actually read, not what a header claims.

A Content-Length check alone is bypassed by chunked bodies, so the stream is read
here and cut off at the limit. gzip / zstd bodies are decompressed incrementally
with a cap on the output, so a small zip bomb cannot inflate into gigabytes.
"""

from __future__ import annotations

import io
import zlib
from typing import TYPE_CHECKING

import zstandard

from provkg.api.errors import BadRequest, BodyTooLarge, UnsupportedMediaType

if TYPE_CHECKING:  # only read_body's annotation: the MQTT listener decompresses without FastAPI
    from fastapi import Request

__all__ = ["read_body", "decompress", "ENCODINGS"]

ENCODINGS = ("identity", "gzip", "zstd")
_CHUNK = 64 * 1024


async def read_body(request: Request, *, limit: int, decompressed_limit: int) -> bytes:
    """The request body, decompressed per ``Content-Encoding``.

    Raises:
        BodyTooLarge: more than ``limit`` bytes on the wire or ``decompressed_limit`` after
            decompression (413).
        UnsupportedMediaType: an encoding other than identity, gzip or zstd (415).
        BadRequest: a compressed body that does not decompress (400).
    """
    encoding = request.headers.get("content-encoding", "identity").strip().lower() or "identity"
    if encoding not in ENCODINGS:
        raise UnsupportedMediaType(
            f"Content-Encoding must be one of {', '.join(ENCODINGS)}")
    declared = request.headers.get("content-length")
    if declared is not None and declared.isdigit() and int(declared) > limit:
        raise BodyTooLarge(f"request body larger than the limit of {limit} bytes")
    parts: list[bytes] = []
    size = 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > limit:
            raise BodyTooLarge(f"request body larger than the limit of {limit} bytes")
        parts.append(chunk)
    return decompress(b"".join(parts), encoding, limit=decompressed_limit)


def decompress(data: bytes, encoding: str, *, limit: int) -> bytes:
    """``data`` decoded from ``encoding``, refusing output past ``limit`` bytes."""
    if encoding == "identity":
        return data
    if encoding == "gzip":
        return _gunzip(data, limit=limit)
    return _unzstd(data, limit=limit)


def _too_large(limit: int) -> BodyTooLarge:
    return BodyTooLarge(f"decompressed body larger than the limit of {limit} bytes")


def _gunzip(data: bytes, *, limit: int) -> bytes:
    out: list[bytes] = []
    size = 0
    rest = data
    try:
        while rest:  # concatenated gzip members are legal
            inflater = zlib.decompressobj(wbits=31)
            chunk = inflater.decompress(rest, limit - size + 1)
            while True:
                size += len(chunk)
                if size > limit:
                    raise _too_large(limit)
                out.append(chunk)
                if inflater.eof or not inflater.unconsumed_tail:
                    break
                chunk = inflater.decompress(inflater.unconsumed_tail, limit - size + 1)
            if not inflater.eof:
                raise BadRequest("gzip body is truncated")
            rest = inflater.unused_data
    except zlib.error as exc:
        raise BadRequest("body is not valid gzip (Content-Encoding: gzip)") from exc
    return b"".join(out)


def _unzstd(data: bytes, *, limit: int) -> bytes:
    from provkg.service.event_files import zstd_truncation

    # the decoder stops quietly where its input ends: a cut body would read as a shorter one
    if zstd_truncation(io.BytesIO(data)) is not None:
        raise BadRequest("zstd body is truncated")
    try:
        reader = zstandard.ZstdDecompressor().stream_reader(data, read_across_frames=True)
        with reader:
            out = reader.read(limit + 1)
            while len(out) <= limit:
                more = reader.read(limit + 1 - len(out))
                if not more:
                    break
                out += more
    except zstandard.ZstdError as exc:
        raise BadRequest("body is not valid zstd (Content-Encoding: zstd)") from exc
    if len(out) > limit:
        raise _too_large(limit)
    return out

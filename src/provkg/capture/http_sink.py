"""``http(s)://HOST:PORT`` — batches POSTed to ``/v1/events`` (docs/reference/wire-format.md, docs/reference/rest.md).

One keep-alive connection (the standard library's ``http.client``: nothing heavy to import on an
edge device), bodies compressed with gzip or zstd (``Content-Encoding``), a few quick retries
with backoff; then the batch is reported undelivered and the emitter spools it. 4xx answers
about the batch are refusals: ``SinkRejected`` with the server's message (413, 422 and 400 let the
emitter send the batch in halves); 401 / 403 / 404 / 405 say the sender is set up wrongly
(token, URL), so the batch stays undelivered (spooled).
"""

from __future__ import annotations

import gzip
import http.client
import json
import logging
import os
import threading
import time
from typing import Any
from urllib.parse import urlsplit

import orjson

from provkg.capture.encoding import FORMAT, envelope
from provkg.capture.report import report_once, shown_url
from provkg.capture.sink import SinkRejected, url_options

__all__ = ["HttpSink", "FORMAT", "encode_batch", "compress"]

_RETRYABLE_4XX = {408, 425, 429}
#: refusals of what the batch's events hold (422: not valid wire format, 400: not readable): the
#: batch is sent in halves, so that only the event refused on its own is set aside
_BY_EVENT = {400, 422}
#: 4xx answers about the sender's setup, not the batch: never a reason to give events up
_NOT_THE_BATCH = {
    401: "the token is missing or wrong: give the sink's token (or PROVKG_TOKEN)",
    403: "the token may not write here",
    404: "no provkg events endpoint at this URL",
    405: "no provkg events endpoint at this URL",
}


def encode_batch(events: list[dict[str, Any]], compression: str | None) -> bytes:
    """The batch envelope as JSON bytes, compressed with ``gzip`` / ``zstd`` or not."""
    return compress(orjson.dumps({"format": FORMAT, "events": events}), compression)


def compress(body: bytes, compression: str | None) -> bytes:
    """``body`` compressed with ``gzip`` (level 1) / ``zstd`` (level 1), or as it is: the fast
    levels, since the background thread shares the interpreter with the user's code."""
    if compression == "gzip":
        return gzip.compress(body, compresslevel=1, mtime=0)
    if compression == "zstd":
        return _zstd().compress(body)
    return body


_local = threading.local()  # a ZstdCompressor must not be shared by threads


def _zstd() -> Any:
    compressor = getattr(_local, "zstd", None)
    if compressor is None:
        import zstandard

        compressor = _local.zstd = zstandard.ZstdCompressor(level=1)
    return compressor


class HttpSink:
    """POST batches to a provkg server (or anything that speaks ``POST /v1/events``).

    Args:
        url: ``http(s)://HOST:PORT[/base]``; ``?compression=zstd|gzip|none`` may be appended.
        compression: body compression: ``"zstd"`` (default: level 1 is several times cheaper
            than gzip for a smaller body), ``"gzip"`` (level 1) or ``None``.
        token: bearer token for servers that require one (default ``$PROVKG_TOKEN``).
        timeout: seconds per request.
        retries, backoff: quick retries in the delivery thread before giving the batch to the spool.
    """

    def __init__(self, url: str, *, compression: str | None = "zstd", token: str | None = None,
                 timeout: float = 5.0, retries: int = 2, backoff: float = 0.1) -> None:
        parts = urlsplit(url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError(f"HTTP sink URL {shown_url(url)!r} must look like http://HOST:PORT")
        compression = url_options(parts.query, ("compression",), "HTTP sink").get(
            "compression", compression)
        if compression == "none":
            compression = None
        if compression not in (None, "gzip", "zstd"):
            raise ValueError(f"compression must be gzip, zstd or none, not {compression!r}")
        self.url = url
        self.target = shown_url(url)  # where it sends, in messages: never a password
        self.compression = compression
        self.token = token if token is not None else os.environ.get("PROVKG_TOKEN")
        self.timeout = timeout
        self.retries = retries
        self.backoff = backoff
        self.bytes_sent = 0
        self._https = parts.scheme == "https"
        self._host = parts.hostname
        self._port = parts.port or (443 if self._https else 80)
        base = parts.path.rstrip("/")
        self._path = base if base.endswith("/v1/events") else base + "/v1/events"
        self._conn: http.client.HTTPConnection | None = None

    # -- other processes ------------------------------------------------------------------

    def __getstate__(self) -> dict[str, Any]:
        """Pickled as its settings (the receiving process opens connections of its own)."""
        return {"url": self.url, "compression": self.compression, "token": self.token,
                "timeout": self.timeout, "retries": self.retries, "backoff": self.backoff}

    def __setstate__(self, state: dict[str, Any]) -> None:
        url = state.pop("url")
        self.__init__(url, **state)  # type: ignore[misc]
        # the URL's ?compression= must not override the setting it was pickled with
        self.compression = state["compression"]

    def forked(self) -> HttpSink:
        """In a forked child: a sink of its own (it connects on first use); the parent's
        keep-alive connection is never used or shut down from the child."""
        return _rebuilt(self)

    # -- delivery -----------------------------------------------------------------------

    def send(self, events: list[dict[str, Any]]) -> None:
        self._post(encode_batch(events, None))

    def send_lines(self, lines: list[bytes], *, run_id: str | None = None) -> None:
        """POST events already encoded as JSON lines (the emitter's path)."""
        self._post(envelope(lines))

    def _post(self, raw: bytes) -> None:
        """POST the JSON document ``raw``, compressed as set; a receiver that does not take
        that compression (HTTP 415: an older server, a proxy) gets the next plainer one
        (zstd, gzip, none), which this sink then keeps using."""
        while True:
            try:
                return self._post_compressed(compress(raw, self.compression))
            except SinkRejected as exc:
                if exc.status != 415 or self.compression is None:
                    raise
                plainer = {"zstd": "gzip", "gzip": None}[self.compression]
                report_once(("http-415", self.url, self.compression),
                            f"{self.target} does not take {self.compression} bodies (HTTP 415); "
                            f"sending {plainer or 'uncompressed'} ones from now on",
                            level=logging.INFO)
                self.compression = plainer

    def _post_compressed(self, body: bytes) -> None:
        headers = {"Content-Type": "application/json", "Content-Length": str(len(body))}
        if self.compression:
            headers["Content-Encoding"] = self.compression
        if self.token:
            headers["Authorization"] = f"Bearer {self.token}"
        problem = ""
        for attempt in range(self.retries + 1):
            if attempt:
                time.sleep(self.backoff * 2 ** (attempt - 1))
            try:
                conn = self._connection()
                conn.request("POST", self._path, body, headers)
                response = conn.getresponse()
                answer = response.read()
            except (OSError, http.client.HTTPException) as exc:
                self._drop_connection()
                problem = f"{type(exc).__name__}: {exc}"
                continue
            status = response.status
            if 200 <= status < 300:
                self.bytes_sent += len(body)
                return
            if response.getheader("Connection", "").lower() == "close":
                self._drop_connection()
            message = _server_message(answer)
            if status in _NOT_THE_BATCH:  # a setup problem: keep the events until it is fixed
                raise ConnectionError(f"{self.target} answered HTTP {status}: {message} "
                                      f"({_NOT_THE_BATCH[status]}; the events stay spooled)")
            if 400 <= status < 500 and status not in _RETRYABLE_4XX:
                raise SinkRejected(f"{self.target} answered HTTP {status}: {message}",
                                   too_large=status == 413, by_event=status in _BY_EVENT,
                                   status=status)
            problem = f"HTTP {status}: {message}"
        raise ConnectionError(f"{self.target} did not take the batch after {self.retries + 1} attempts "
                              f"({problem})")

    def close(self) -> None:
        self._drop_connection()

    def _connection(self) -> http.client.HTTPConnection:
        if self._conn is None:
            kind = http.client.HTTPSConnection if self._https else http.client.HTTPConnection
            self._conn = kind(self._host, self._port, timeout=self.timeout)
        return self._conn

    def _drop_connection(self) -> None:
        if self._conn is not None:
            try:
                self._conn.close()
            finally:
                self._conn = None


def _rebuilt(sink: HttpSink) -> HttpSink:
    copy = HttpSink.__new__(HttpSink)
    copy.__setstate__(sink.__getstate__())
    return copy


def _server_message(answer: bytes) -> str:
    """The ``detail`` / ``error`` of a provkg error body, else the start of the text."""
    text = answer[:2000].decode("utf-8", "replace").strip()
    try:
        body = json.loads(text)
    except ValueError:
        return text[:500] or "(empty answer)"
    if isinstance(body, dict):
        parts = [str(body[k]) for k in ("error", "detail") if body.get(k)]
        if parts:
            return ": ".join(parts)[:500]
    return text[:500]

"""A sink from its URL: the scheme picks the sink, whose module is imported only when used.

Apart from :mod:`provkg.capture.sink` (the interface the sinks implement and import), so no
sink module imports the module that opens it.
"""

from __future__ import annotations

from collections.abc import Callable

from provkg.capture.sink import MemorySink, Sink

__all__ = ["SINK_SCHEMES", "open_sink"]


def _file(url: str) -> Sink:
    from provkg.capture.file_sink import FileSink

    return FileSink.from_url(url)


def _http(url: str) -> Sink:
    from provkg.capture.http_sink import HttpSink

    return HttpSink(url)


def _mqtt(url: str) -> Sink:
    from provkg.capture.mqtt_sink import MqttSink

    return MqttSink.from_url(url)


def _memory(url: str) -> Sink:
    return MemorySink()


#: URL scheme -> lazy factory (the sink's module is imported only when used)
SINK_SCHEMES: dict[str, Callable[[str], Sink]] = {
    "file": _file,
    "http": _http,
    "https": _http,
    "mqtt": _mqtt,
    "memory": _memory,
}


def open_sink(sink: str | Sink) -> Sink:
    """A sink from a URL (``file:DIR``, ``http(s)://HOST:PORT``, ``mqtt://HOST:PORT/TOPIC``,
    ``memory:``) or an object that already has ``send`` and ``close``.

    Raises:
        ValueError: an unknown scheme or an object without ``send`` / ``close``.
    """
    if isinstance(sink, str):
        scheme = sink.split(":", 1)[0].lower() if ":" in sink else ""
        factory = SINK_SCHEMES.get(scheme)
        if factory is None:
            raise ValueError(f"unknown sink {sink!r}: expected one of "
                             + ", ".join(f"{s}:..." for s in SINK_SCHEMES) + " or a Sink object")
        return factory(sink)
    if callable(getattr(sink, "send", None)) and callable(getattr(sink, "close", None)):
        return sink
    raise ValueError(f"a sink needs send(events) and close() methods; {type(sink).__name__} has not")

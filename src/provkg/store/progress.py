"""Byte counting for streamed loads, so a caller can draw a progress bar."""

from __future__ import annotations

import io
from collections.abc import Callable
from typing import BinaryIO

__all__ = ["counting_reader"]


class _CountingReader(io.RawIOBase):
    """A read-only binary stream that reports how many bytes each read returned."""

    def __init__(self, raw: BinaryIO, report: Callable[[int], object]):
        self._raw = raw
        self._report = report

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: bytearray | memoryview) -> int:  # type: ignore[override]
        data = self._raw.read(len(buffer))
        n = len(data)
        buffer[:n] = data
        if n:
            self._report(n)
        return n


def counting_reader(raw: BinaryIO, report: Callable[[int], object] | None) -> BinaryIO:
    """``raw`` itself when nobody listens, else a buffered reader calling ``report(nbytes)``."""
    if report is None:
        return raw
    return io.BufferedReader(_CountingReader(raw, report), buffer_size=1 << 20)

"""A real ``provkg serve`` for the API tests: a subprocess on 127.0.0.1, a free port, a temp store.

Used by ``tests/test_api*.py`` and ``benchmarks/service.py``. The server is started with
the CLI exactly as a user would, stopped by PID (SIGTERM, then SIGKILL), and can be
killed with SIGKILL and restarted on the same folders for the crash tests.
"""

from __future__ import annotations

import hashlib
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx

__all__ = ["ApiServer", "free_port", "store_fingerprint"]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def store_fingerprint(directory: str | os.PathLike[str]) -> tuple[int, str]:
    """(quad count, sha256 of the sorted N-Quads dump) of an embedded store, read-only."""
    import pyoxigraph as ox

    for attempt in range(5):  # a read-only open can race the server's compaction: try again
        try:
            lines = sorted(f"{q} .\n" for q in ox.Store.read_only(str(directory)))
            return len(lines), hashlib.sha256("".join(lines).encode()).hexdigest()
        except (OSError, RuntimeError):
            if attempt == 4:
                raise
            time.sleep(0.1)
    raise AssertionError("unreachable")


class ApiServer:
    """``provkg serve`` on an embedded Oxigraph store in ``folder``.

    Args:
        folder: holds ``store/`` (the Oxigraph directory), ``queue/`` and ``server.log``.
        env: extra ``PROVKG_*`` settings.
    """

    def __init__(self, folder: str | os.PathLike[str], *, env: dict[str, str] | None = None,
                 port: int | None = None, store: str | None = None):
        self.folder = Path(folder)
        self.folder.mkdir(parents=True, exist_ok=True)
        self.store_dir = self.folder / "store"
        self.store = store or f"oxigraph:{self.store_dir}"  # or another store's URL
        self.queue_dir = self.folder / "queue"
        self.port = port or free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.env = env or {}
        self.proc: subprocess.Popen[bytes] | None = None
        self.log_path = self.folder / "server.log"
        #: one client for the tests (a new httpx client per call costs ~0.2 s of TLS setup)
        self.http = httpx.Client(base_url=self.url, timeout=60.0)

    def start(self, *, timeout: float = 60.0) -> ApiServer:
        env = {**os.environ, "PROVKG_QUEUE_DIR": str(self.queue_dir), **self.env}
        env.pop("PROVKG_STORE", None)
        log = open(self.log_path, "ab")
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "provkg.cli", "serve", "--store", self.store,
             "--port", str(self.port)],
            env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        log.close()
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"provkg serve exited ({self.proc.returncode}):\n{self.log()}")
            try:
                if self.http.get("/health/live", timeout=1.0).status_code == 200:
                    return self
            except httpx.TransportError:
                pass
            time.sleep(0.05)
        self.stop()
        raise RuntimeError(f"provkg serve did not answer within {timeout} s:\n{self.log()}")

    def log(self) -> str:
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""

    def wait_log(self, *texts: str, after: int = 0, timeout: float = 60.0) -> str:
        """The log from offset ``after`` on, once it holds one of ``texts``; the deadline
        only keeps a broken server from hanging the test."""
        deadline = time.monotonic() + timeout
        while True:
            tail = self.log()[after:]
            if any(text in tail for text in texts):
                return tail
            if time.monotonic() > deadline:
                raise AssertionError(f"none of {texts} in the log within {timeout} s:\n{tail}")
            time.sleep(0.05)

    def kill(self) -> None:
        """SIGKILL the server and its SPARQL workers (its process group): a crash."""
        if self.proc is not None and self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait()
        self.proc = None

    def stop(self) -> None:
        """SIGTERM, then SIGKILL after 15 s."""
        if self.proc is None:
            return
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(15)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait()
        else:  # exited already: its workers may linger in the group
            try:
                os.killpg(self.proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        self.proc = None

    def wait_applied(self, *, timeout: float = 60.0) -> dict:
        """Wait until the ingest queue has no backlog; returns the queue counters."""
        deadline = time.monotonic() + timeout
        while True:
            body = self.http.get("/health/ready").json()
            if body["queue"]["backlog_events"] == 0 or time.monotonic() > deadline:
                return body["queue"]
            time.sleep(0.05)

    def __enter__(self) -> ApiServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
        self.http.close()

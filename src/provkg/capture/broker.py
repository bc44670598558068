"""A private Mosquitto broker on 127.0.0.1 for tests, benchmarks and local runs.

>>> with MosquittoBroker(tmp_dir) as broker:                     # doctest: +SKIP
...     with capture.workflow("w", sink=broker.url + "/provkg"):
...         ...
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import time
from pathlib import Path
from types import TracebackType
from typing import Any

__all__ = ["MosquittoBroker", "free_port", "find_mosquitto"]


def free_port() -> int:
    """A TCP port nobody listens on right now (127.0.0.1)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def find_mosquitto() -> str:
    """The ``mosquitto`` executable (Debian installs it in /usr/sbin)."""
    found = shutil.which("mosquitto") or next(
        (p for p in ("/usr/sbin/mosquitto", "/usr/local/sbin/mosquitto") if os.access(p, os.X_OK)), None)
    if found is None:
        raise FileNotFoundError("mosquitto is not installed (Debian: apt-get install -y mosquitto; "
                                "./scripts/test installs it)")
    return found


class MosquittoBroker:
    """Run ``mosquitto`` with a temporary config: loopback only, anonymous, ``persistence true``
    (queued QoS 1 messages survive a restart).

    Args:
        directory: for the config, the persistence file and the log.
        port: default: a free port, kept across ``stop()`` / ``start()``.
        anonymous: accept clients without a user (False: refuse them, as a secured broker does).
    """

    def __init__(self, directory: str | os.PathLike[str], *, port: int | None = None,
                 anonymous: bool = True, users: dict[str, str] | None = None) -> None:
        self.directory = Path(directory)
        self.anonymous = anonymous
        self.users = dict(users or {})  # accounts (user -> password) the broker accepts
        self.port = port or free_port()
        self.host = "127.0.0.1"
        self._process: subprocess.Popen[bytes] | None = None
        self._stderr: Any = None

    @property
    def url(self) -> str:
        """``mqtt://127.0.0.1:PORT`` (append ``/PREFIX`` for a capture sink)."""
        return f"mqtt://{self.host}:{self.port}"

    @property
    def log(self) -> Path:
        return self.directory / "mosquitto.log"

    def start(self, *, timeout: float = 10.0) -> MosquittoBroker:
        """Start (or restart) the broker and wait until it accepts connections."""
        if self._process is not None and self._process.poll() is None:
            return self
        self.directory.mkdir(parents=True, exist_ok=True)
        config = self.directory / "mosquitto.conf"
        lines = [
            f"listener {self.port} {self.host}",
            f"allow_anonymous {'true' if self.anonymous else 'false'}",
            "persistence true",
            f"persistence_location {self.directory}/",
            "max_queued_messages 100000",
            f"log_dest file {self.log}",
        ]
        if self.users:
            passwords = self.directory / "passwords"
            passwords.write_text("", encoding="utf-8")
            for user, password in self.users.items():
                subprocess.run([shutil.which("mosquitto_passwd") or "mosquitto_passwd", "-b",
                                str(passwords), user, password], check=True,
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            lines.append(f"password_file {passwords}")
        if hasattr(os, "geteuid") and os.geteuid() == 0:
            lines.append("user root")  # otherwise mosquitto drops to a user that cannot write DIR
        config.write_text("\n".join(lines) + "\n", encoding="utf-8")
        # stderr to a file, not a pipe: a chatty broker must never block on a full pipe
        self._stderr = open(self.directory / "mosquitto.stderr", "ab")
        self._process = subprocess.Popen([find_mosquitto(), "-c", str(config)],
                                         stdout=subprocess.DEVNULL, stderr=self._stderr)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self._process.poll() is not None:
                err = (self.directory / "mosquitto.stderr").read_text(errors="replace")[-2000:]
                raise RuntimeError(f"mosquitto exited with {self._process.returncode}: {err.strip()}")
            try:
                with socket.create_connection((self.host, self.port), timeout=0.2):
                    return self
            except OSError:
                time.sleep(0.02)
        self.stop()
        raise RuntimeError(f"mosquitto did not listen on {self.host}:{self.port} within {timeout} s")

    def stop(self, *, timeout: float = 5.0) -> None:
        """Stop gracefully (SIGTERM; the persistence file is written), SIGKILL if it hangs."""
        process, self._process = self._process, None
        if process is None or process.poll() is not None:
            return
        process.terminate()
        try:
            process.wait(timeout)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
        finally:
            self._stderr.close()

    def kill(self) -> None:
        """Die abruptly (SIGKILL), as a crashed broker would."""
        process, self._process = self._process, None
        if process is not None and process.poll() is None:
            process.send_signal(signal.SIGKILL)
            process.wait()
            self._stderr.close()

    def __enter__(self) -> MosquittoBroker:
        return self.start()

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.stop()

"""Start real SPARQL servers on 127.0.0.1 for tests and benchmarks: Oxigraph and Virtuoso.

Both are context managers that start a private process on free loopback ports, wait
until it answers (a readiness probe, never a fixed sleep), and stop it by its PID::

    with OxigraphServer(tmp / "oxi") as server:
        store = open_store(server.store_url)

The ``oxigraph`` binary comes with the PyPI ``oxigraph`` package (the ``test`` and
``bench`` extras); Virtuoso from Debian's ``virtuoso-opensource`` (``scripts/test``
installs it).
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from abc import ABC, abstractmethod
from pathlib import Path
from typing import IO, Self

import httpx

from provkg.errors import StoreError, StoreUnavailable

__all__ = ["OxigraphServer", "VirtuosoServer", "free_port", "find_binary"]

VIRTUOSO_INI = Path("/etc/virtuoso-opensource-7/virtuoso.ini")


def free_port() -> int:
    """A TCP port on 127.0.0.1 nobody listens on right now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def find_binary(name: str, *, hint: str) -> str:
    """``name`` next to the running Python (a virtualenv's bin), else on PATH.

    Raises:
        StoreUnavailable: not found; ``hint`` says how to install it.
    """
    beside = Path(sys.executable).parent / name
    if beside.is_file() and os.access(beside, os.X_OK):
        return str(beside)
    found = shutil.which(name) or shutil.which(name, path="/usr/sbin:/usr/bin")
    if found is None:
        raise StoreUnavailable(f"the {name!r} program is not installed: {hint}")
    return found


class _Server(ABC):
    """A supervised child process with a readiness probe."""

    name = "server"
    _process: subprocess.Popen[bytes] | None = None
    _log: IO[bytes] | None = None

    def _spawn(self, argv: list[str], *, cwd: Path) -> None:
        self._log = tempfile.TemporaryFile()
        self._process = subprocess.Popen(argv, cwd=cwd, stdout=self._log, stderr=subprocess.STDOUT,
                                         stdin=subprocess.DEVNULL, start_new_session=True)

    def _wait_ready(self, *, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        delay = 0.02
        while time.monotonic() < deadline:
            if self._process is not None and self._process.poll() is not None:
                raise StoreUnavailable(f"{self.name} exited with code {self._process.returncode} "
                                       f"while starting: {self.log_tail()}")
            if self._ready():
                return
            time.sleep(delay)
            delay = min(delay * 1.5, 0.5)
        self._kill()
        raise StoreUnavailable(f"{self.name} did not answer within {timeout:g} s: {self.log_tail()}")

    @abstractmethod
    def _ready(self) -> bool:
        """Whether the server answers now (polled until it does)."""

    def log_tail(self, n: int = 2000) -> str:
        """The last ``n`` characters the process wrote (for error messages)."""
        if self._log is None:
            return ""
        self._log.seek(0)
        return self._log.read().decode("utf-8", "replace")[-n:].strip()

    def _kill(self, *, grace: float = 10.0) -> None:
        process, self._process = self._process, None
        if process is None:
            return
        if process.poll() is None:
            process.send_signal(signal.SIGTERM)
            try:
                process.wait(grace)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
        if self._log is not None:
            self._log.close()
            self._log = None

    @property
    def pid(self) -> int | None:
        return self._process.pid if self._process is not None else None

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @abstractmethod
    def start(self) -> Self:
        """Start the server and wait until it answers; returns the server."""

    @abstractmethod
    def stop(self) -> None:
        """Stop the server (by its PID); stopping twice is harmless."""


class OxigraphServer(_Server):
    """``oxigraph serve --location DIR --bind 127.0.0.1:PORT``, read-write.

    ``store_url`` (``oxigraph+http://127.0.0.1:PORT``) opens it with :func:`provkg.store.open_store`.
    """

    name = "Oxigraph server"

    def __init__(self, directory: str | Path, *, port: int | None = None,
                 startup_timeout: float = 60.0):
        # absolute: the server runs with cwd=directory, so a relative --location would nest
        self.directory = Path(directory).resolve()
        self.port = port or free_port()
        self.startup_timeout = startup_timeout

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def store_url(self) -> str:
        return f"oxigraph+{self.url}"

    def start(self) -> Self:
        binary = find_binary("oxigraph", hint="pip install oxigraph (provkg's test / bench extras)")
        self.directory.mkdir(parents=True, exist_ok=True)
        self._spawn([binary, "serve", "--location", str(self.directory),
                     "--bind", f"127.0.0.1:{self.port}"], cwd=self.directory)
        self._wait_ready(timeout=self.startup_timeout)
        return self

    def _ready(self) -> bool:
        try:
            return httpx.get(f"{self.url}/query", params={"query": "ASK{}"}, timeout=2).status_code == 200
        except httpx.TransportError:
            return False

    def stop(self) -> None:
        self._kill()


class VirtuosoServer(_Server):
    """A private Virtuoso 7 instance: its own ``virtuoso.ini`` and database in ``directory``.

    Loopback only, on free ports; ``DirsAllowed`` includes ``bulk_dirs`` (for
    :meth:`bulk_load`); ``ResultSetMaxRows`` raised to ``max_rows`` so big results are not
    silently cut; ``MaxQueryExecutionTime`` is ``query_timeout`` seconds (Virtuoso answers
    partially past it); SPARQL update allowed for the anonymous endpoint (a test instance
    on loopback only). ``buffers`` is ``NumberOfBuffers`` (8 KiB pages; 680000 ≈ 5.5 GB).
    ``max_optimize_layouts`` is ``MaxOptimizeLayouts``, the join orders the SQL compiler tries
    per SELECT (None: Virtuoso's default, 1000). On a small store Virtuoso 7.2 spends 7-24 s
    compiling each new text of the tagged last-epoch queries (a new parameter value is a new
    text) and 1.2 s at 10 layouts; on a large one the extra orders may find a better plan.
    ``store_url`` opens it with :func:`provkg.store.open_store`.
    """

    name = "Virtuoso"

    def __init__(self, directory: str | Path, *, port: int | None = None,
                 sql_port: int | None = None, buffers: int = 100_000,
                 bulk_dirs: tuple[str | Path, ...] = (), max_rows: int = 10_000_000,
                 query_timeout: int = 600, startup_timeout: float = 120.0,
                 password: str = "dba", max_optimize_layouts: int | None = None):
        self.directory = Path(directory).resolve()
        self.port = port or free_port()
        self.sql_port = sql_port or free_port()
        self.buffers = buffers
        self.bulk_dirs = tuple(Path(d).resolve() for d in bulk_dirs)
        self.max_rows = max_rows
        self.query_timeout = query_timeout
        self.startup_timeout = startup_timeout
        self.password = password
        self.max_optimize_layouts = max_optimize_layouts

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def store_url(self) -> str:
        """Anonymous ``/sparql`` for queries and updates (granted at start)."""
        return f"virtuoso+{self.url}"

    def start(self) -> Self:
        binary = find_binary("virtuoso-t", hint="apt-get install virtuoso-opensource "
                             "(scripts/test does it)")
        self.directory.mkdir(parents=True, exist_ok=True)
        ini = self.directory / "virtuoso.ini"
        ini.write_text(self._ini_text(), encoding="utf-8")
        self._spawn([binary, "+configfile", str(ini), "+foreground"], cwd=self.directory)
        try:
            self._wait_ready(timeout=self.startup_timeout)
            self._grant_updates()
        except BaseException:
            self.stop()  # never leave a half-started server holding the database's lock
            raise
        return self

    def _grant_updates(self) -> None:
        """A private loopback test instance: let the anonymous endpoint write. A database
        reopened from an earlier start already has the role: that is not an error."""
        try:
            self.isql('GRANT SPARQL_UPDATE TO "SPARQL";')
        except StoreError as exc:
            if "already have role" not in str(exc):
                raise
        self.isql("GRANT EXECUTE ON DB.DBA.SPARQL_INSERT_DICT_CONTENT TO \"SPARQL\";")
        self.isql("GRANT EXECUTE ON DB.DBA.SPARQL_DELETE_DICT_CONTENT TO \"SPARQL\";")

    def _ini_text(self) -> str:
        text = VIRTUOSO_INI.read_text(encoding="utf-8")
        text = text.replace("/var/lib/virtuoso-opensource-7/db", str(self.directory))
        dirs = ", ".join([".", "/usr/share/virtuoso-opensource-7/vad",
                          *(str(d) for d in self.bulk_dirs)])
        settings = {
            ("Parameters", "ServerPort"): f"127.0.0.1:{self.sql_port}",
            ("Parameters", "DirsAllowed"): dirs,
            ("Parameters", "NumberOfBuffers"): str(self.buffers),
            ("Parameters", "MaxDirtyBuffers"): str(self.buffers * 3 // 4),
            # the SPARQL compiler's pool: the default (200 MB) is exhausted compiling the
            # tagged DNNProv queries ("SQ200: memory pool size ... reached the limit")
            ("Parameters", "MaxMemPoolSize"): "2000000000",
            ("HTTPServer", "ServerPort"): f"127.0.0.1:{self.port}",
            ("URIQA", "DefaultHost"): f"127.0.0.1:{self.port}",
            ("SPARQL", "ResultSetMaxRows"): str(self.max_rows),
            ("SPARQL", "MaxQueryExecutionTime"): str(self.query_timeout),
            # 0 = no refusal by estimate: Virtuoso 7.2's estimate overflows on UNIONs and
            # paths over a small store ("estimated execution time -1124073472 (sec)") and
            # refuses queries that run in milliseconds; MaxQueryExecutionTime still bounds them
            ("SPARQL", "MaxQueryCostEstimationTime"): "0",
        }
        if self.max_optimize_layouts is not None:
            settings["Parameters", "MaxOptimizeLayouts"] = str(self.max_optimize_layouts)
        return _edit_ini(text, settings, drop=re.compile(r"^Load\d+\s*="))

    def _ready(self) -> bool:
        try:
            self.isql("status('');", timeout=5)
        except StoreError:
            return False
        try:
            return httpx.get(f"{self.url}/sparql", params={"query": "ASK{}"},
                             timeout=5).status_code == 200
        except httpx.TransportError:
            return False

    def isql(self, statements: str, *, timeout: float = 600) -> str:
        """Run SQL / Virtuoso statements through ``isql-vt`` as dba; returns its output.

        Raises:
            StoreError: isql reports an error or cannot connect.
        """
        binary = find_binary("isql-vt", hint="apt-get install virtuoso-opensource")
        try:
            done = subprocess.run(
                [binary, f"127.0.0.1:{self.sql_port}", "dba", self.password,
                 f"exec={statements}"], capture_output=True, timeout=timeout, check=False)
        except subprocess.TimeoutExpired as exc:
            raise StoreError(f"isql did not finish within {timeout:g} s: {statements[:200]}") from exc
        out = (done.stdout + done.stderr).decode("utf-8", "replace")
        if done.returncode != 0 or re.search(r"^\*\*\* Error", out, re.MULTILINE):
            raise StoreError(f"Virtuoso isql failed ({statements[:200]}): {out.strip()[-1000:]}")
        return out

    def bulk_load(self, path: str | Path, *, graph: str) -> None:
        """Load an N-Triples / Turtle / RDF/XML file (``.gz`` too) into ``graph`` with
        Virtuoso's bulk loader (``ld_dir`` + ``rdf_loader_run`` + ``checkpoint``).

        The file's folder must be one of ``bulk_dirs``.

        Raises:
            StoreError: the folder is not allowed, or the loader reported an error.
        """
        path = Path(path).resolve()
        if path.parent not in self.bulk_dirs:
            raise StoreError(f"{path.parent} is not among this Virtuoso's bulk_dirs "
                             f"{[str(d) for d in self.bulk_dirs]}")
        folder, name, g = (_sql_string(str(path.parent)), _sql_string(path.name), _sql_string(graph))
        self.isql(f"DELETE FROM DB.DBA.LOAD_LIST WHERE ll_file = {_sql_string(str(path))};"
                  f"ld_dir({folder}, {name}, {g}); rdf_loader_run(); checkpoint;")
        errors = self.isql("SELECT ll_file, ll_error FROM DB.DBA.LOAD_LIST WHERE ll_error IS NOT NULL;")
        if str(path) in errors:
            raise StoreError(f"Virtuoso's bulk loader failed on {path}: {errors.strip()[-1000:]}")

    def stop(self) -> None:
        if self._process is not None and self._process.poll() is None:
            try:
                self.isql("shutdown;", timeout=60)
            except StoreError:
                pass  # it may close the connection while shutting down; the PID follows
            try:
                self._process.wait(30)
            except subprocess.TimeoutExpired:
                pass
        self._kill()


def _sql_string(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"


def _edit_ini(text: str, settings: dict[tuple[str, str], str], *, drop: re.Pattern[str]) -> str:
    """Set ``(section, key) -> value`` in an ini text, keeping everything else (and comments)."""
    out: list[str] = []
    section = ""
    pending = dict(settings)

    def flush_section() -> None:
        for (sec, key), value in list(pending.items()):
            if sec == section:
                out.append(f"{key} = {value}")
                del pending[(sec, key)]

    for line in text.splitlines():
        m = re.match(r"^\[(.+)\]\s*$", line)
        if m:
            flush_section()
            section = m.group(1)
        elif drop.match(line):
            continue
        else:
            kv = re.match(r"^\s*([A-Za-z_0-9]+)\s*=", line)
            if kv and (section, kv.group(1)) in pending:
                line = f"{kv.group(1)} = {pending.pop((section, kv.group(1)))}"
            elif kv and (section, kv.group(1)) in settings:
                continue  # a repeated key: the first one already holds our value
        out.append(line)
    flush_section()
    return "\n".join(out) + "\n"

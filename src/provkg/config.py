"""Settings read from the environment (prefix ``PROVKG_``), built by a function, never at import.

Every setting is checked when the settings are built (:func:`get_settings`): a bad value is a
:class:`BadSetting` naming the variable and what it accepts, so ``provkg serve`` refuses to
start instead of failing later on each request or batch.
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import Field, ValidationError
from pydantic_settings import BaseSettings, SettingsConfigDict, SettingsError

from provkg.defaults import DEFAULT_STORE, INGEST_SCHEMAS
from provkg.errors import ProvkgError
from provkg.problems import describe

__all__ = ["Settings", "get_settings", "BadSetting", "DEFAULT_STORE", "INGEST_SCHEMAS"]


_Positive = Annotated[int, Field(gt=0)]
#: a browser origin as the Origin header sends it (RFC 6454), or "*" (any)
_ORIGIN = r"^(\*|[A-Za-z][A-Za-z0-9+.-]*://[^/?#\s]+)$"


class BadSetting(ProvkgError):
    """A setting (``PROVKG_*`` variable or command-line flag) has a value it cannot take."""

    code = "bad_setting"


class Settings(BaseSettings):
    # a variable set but empty (PROVKG_STORE=) is unset, as for the CLI's --store default
    model_config = SettingsConfigDict(env_prefix="PROVKG_", extra="ignore",
                                      hide_input_in_errors=True, env_ignore_empty=True)

    store: str = DEFAULT_STORE
    # service settings (provkg serve)
    host: str = "127.0.0.1"
    port: Annotated[int, Field(ge=0, le=65535)] = 8000  # 0: any free port (printed at start)
    token: str | None = None
    queue_dir: str = "provkg-queue"
    max_body_bytes: _Positive = 16 * 1024 * 1024
    query_timeout_s: Annotated[float, Field(gt=0, allow_inf_nan=False)] = 30.0
    max_rows: _Positive = 100_000
    allowed_service_endpoints: list[str] = []
    #: browser origins allowed to read the API (CORS); none by default
    cors_origins: list[Annotated[str, Field(pattern=_ORIGIN)]] = []
    # ingest queue and worker (provkg serve / provkg listen)
    #: mapping of ingested events and canned queries
    ingest_schema: Literal["typed", "tagged", "sprov"] = "typed"
    max_decompressed_bytes: _Positive = 64 * 1024 * 1024  # gzip / zstd bodies (zip bombs)
    queue_fsync: bool = True  # fsync before 202; off only for throwaway benchmarks
    queue_apply_events: _Positive = 20_000  # events per store write by the queue worker
    sparql_workers: _Positive = 2  # subprocesses running user SPARQL on an embedded store
    #: seconds between the background refreshes of those workers' views while the queue writes
    #: (0: none; every query then sees every applied event, opening its view itself)
    sparql_view_refresh_s: Annotated[float, Field(ge=0, le=60, allow_inf_nan=False)] = 0.25
    mqtt_url: str | None = None  # provkg serve also listens to this broker when set
    #: the MQTT session's client id; default: one per queue folder (``provkg-`` + a hash of its
    #: absolute path), stable across restarts so the broker keeps the session, and distinct
    #: for two consumers (a `serve` and a `listen`) so neither takes the other's messages
    mqtt_client_id: str | None = None

    @property
    def mqtt_client(self) -> str:
        if self.mqtt_client_id:
            return self.mqtt_client_id
        folder = os.path.abspath(self.queue_dir)
        return "provkg-" + hashlib.sha256(folder.encode("utf-8")).hexdigest()[:12]


#: command-line flags that set a setting (they win over the environment)
_FLAGS = {"store": "--store", "host": "--host", "port": "--port"}


def get_settings(**overrides: object) -> Settings:
    """Settings from the environment, with explicit overrides (CLI flags) on top.

    Raises:
        BadSetting: a value the setting cannot take, naming the variable (or flag) and what
            it accepts, never the value itself (a token must not reach a log).

    >>> get_settings(port=70000)
    Traceback (most recent call last):
    provkg.config.BadSetting: --port: must be 65535 or less
    """
    # any value: Settings validates each one (a wrong one is a BadSetting below)
    given: dict[str, Any] = {k: v for k, v in overrides.items() if v is not None}
    if "token" not in given and os.environ.get("PROVKG_TOKEN", "unset").strip() == "":
        # (other empty variables mean "unset"; this one would silently open writes to anyone:
        # PROVKG_TOKEN=$SECRET with SECRET unset)
        raise BadSetting("PROVKG_TOKEN: set but empty, which would leave writes open to "
                         "anyone; give the token, or unset the variable to run without one")
    try:
        return Settings(**given)
    except ValidationError as exc:
        raise _bad_setting(exc, given) from None
    except SettingsError as exc:  # a list setting whose variable is not JSON
        name = next((n for n in _LIST_SETTINGS if n not in given
                     and not _is_json(os.environ.get(f"PROVKG_{n.upper()}"))), "")
        raise BadSetting(f"PROVKG_{name.upper()}: {_LIST_MESSAGES[name]}" if name else str(exc)) from None


#: the settings read from their variable as JSON lists
_LIST_SETTINGS = ("allowed_service_endpoints", "cors_origins")


def _is_json(text: str | None) -> bool:
    if text is None:
        return True
    try:
        json.loads(text)
    except ValueError:
        return False
    return True


def writable_folder(path: str | os.PathLike[str], flag: str, purpose: str) -> Path:
    """``path`` as a folder this process can write in (created if missing), checked before
    long work or any deletion.

    Raises:
        BadSetting: ``flag`` names a file, a place it cannot create, or a folder it cannot
            write in; ``purpose`` says what it was for.
    """
    folder = Path(path)
    try:
        folder.mkdir(parents=True, exist_ok=True)
        probe = folder / f".provkg-write-test-{os.getpid()}"
        probe.write_bytes(b"")
        probe.unlink()
    except OSError as exc:
        raise BadSetting(f"{flag} {folder}: cannot write {purpose} there "
                         f"({exc.strerror or exc}); give a folder that can be created and "
                         "written in") from None
    return folder


def _bad_setting(exc: ValidationError, given: dict[str, object]) -> BadSetting:
    problems = []
    for err in exc.errors(include_input=False, include_url=False):
        name = str(err["loc"][0]) if err["loc"] else ""
        env = f"PROVKG_{name.upper()}"
        where = _FLAGS[name] if name in _FLAGS and name in given else env
        if name == "ingest_schema":
            message = f"must be one of {', '.join(INGEST_SCHEMAS)}"
        elif name in _LIST_SETTINGS:
            message = _LIST_MESSAGES[name]
        else:
            message = describe(err)
        problems.append(f"{where}: {message}")
    return BadSetting("; ".join(dict.fromkeys(problems)))


_LIST = 'must be a JSON list of endpoint URLs, e.g. ["https://example.org/sparql"]'
_LIST_MESSAGES = {"allowed_service_endpoints": _LIST, "cors_origins": (
    'must be a JSON list of origins (scheme://host[:port], no path) or "*", e.g. '
    '["https://yasgui.triply.cc"]')}

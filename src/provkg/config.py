"""Settings read from the environment (prefix ``PROVKG_``), built by a function, never at import."""

from __future__ import annotations

import hashlib
import os

from pydantic_settings import BaseSettings, SettingsConfigDict

from provkg.vocab import DEFAULT_BASE

__all__ = ["Settings", "get_settings", "DEFAULT_STORE"]

#: embedded Oxigraph on disk, in the working directory
DEFAULT_STORE = "oxigraph:provkg-data"


class Settings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="PROVKG_", extra="ignore")

    store: str = DEFAULT_STORE
    base: str = DEFAULT_BASE
    # service settings (provkg serve)
    host: str = "127.0.0.1"
    port: int = 8000
    token: str | None = None
    queue_dir: str = "provkg-queue"
    max_body_bytes: int = 16 * 1024 * 1024
    query_timeout_s: float = 30.0
    max_rows: int = 100_000
    allowed_service_endpoints: list[str] = []
    # ingest queue and worker (provkg serve / provkg listen)
    ingest_schema: str = "typed"  # mapping of ingested events and canned queries: typed | tagged | sprov
    max_decompressed_bytes: int = 64 * 1024 * 1024  # gzip / zstd bodies (zip bombs)
    queue_fsync: bool = True  # fsync before 202; off only for throwaway benchmarks
    queue_apply_events: int = 20_000  # events per store write by the queue worker
    sparql_workers: int = 2  # subprocesses running user SPARQL on an embedded store
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


def get_settings(**overrides: object) -> Settings:
    """Settings from the environment, with explicit overrides (CLI flags) on top."""
    return Settings(**{k: v for k, v in overrides.items() if v is not None})

"""Settings read from the environment (prefix ``PROVKG_``), built by a function, never at import."""

from __future__ import annotations

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


def get_settings(**overrides: object) -> Settings:
    """Settings from the environment, with explicit overrides (CLI flags) on top."""
    return Settings(**{k: v for k, v in overrides.items() if v is not None})

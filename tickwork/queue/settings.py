"""How to reach Redis: one pydantic-settings class, read from ``TICKWORK_REDIS_*``."""

from __future__ import annotations

import urllib.parse
from pathlib import Path

from pydantic import Field, SecretStr
from pydantic_settings import BaseSettings, SettingsConfigDict


class RedisSettings(BaseSettings):
    """Connection and queue settings. The password never appears in logs or errors."""

    model_config = SettingsConfigDict(env_prefix="TICKWORK_REDIS_", extra="ignore")

    url: str = Field(
        default="redis://localhost:6379/0",
        description="redis:// or rediss:// (TLS) URL; a password in it is honoured but "
        "prefer TICKWORK_REDIS_PASSWORD.",
    )
    username: str | None = Field(default=None, description="ACL user name, if any.")
    password: SecretStr | None = Field(default=None, description="AUTH password.")
    tls: bool = Field(default=False, description="Use TLS even with a redis:// URL.")
    tls_ca_file: Path | None = Field(default=None, description="CA bundle to verify the server.")
    tls_verify: bool = Field(default=True, description="Verify the server's certificate.")
    connect_timeout_seconds: float = Field(default=5.0, gt=0)
    socket_timeout_seconds: float = Field(
        default=10.0, gt=0, description="Must exceed the claim wait (BLPOP) of consumers."
    )
    reconnect_attempts: int = Field(default=8, ge=0, description="Retries per command.")
    reconnect_backoff_cap_seconds: float = Field(default=5.0, gt=0)
    key_prefix: str = Field(default="tickwork", pattern=r"^[A-Za-z0-9_.:-]{1,64}$")
    queue: str = Field(default="default", pattern=r"^[A-Za-z0-9_.-]{1,64}$")
    dedup_seconds: int = Field(
        default=7 * 86400,
        ge=60,
        description="How long an acknowledged run ID is remembered, so re-publishing it is a "
        "no-op.",
    )
    reap_grace_seconds: float = Field(
        default=30.0,
        ge=0,
        description="After Redis restarts, how long expired leases are left to their workers "
        "before their runs are redelivered (renewals just before a restart can be lost with "
        "it); set it to at least the workers' lease.",
    )
    poll_seconds: float = Field(
        default=1.0, gt=0, description="Longest a waiting consumer blocks before looking again."
    )

    def safe_url(self) -> str:
        """The URL without any password, for messages and logs."""
        parts = urllib.parse.urlsplit(self.url)
        host = parts.hostname or "localhost"
        port = f":{parts.port}" if parts.port else ""
        user = f"{parts.username}@" if parts.username else ""
        return urllib.parse.urlunsplit((parts.scheme, f"{user}{host}{port}", parts.path, "", ""))

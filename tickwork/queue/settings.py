"""How to reach Redis: one pydantic-settings class, read from ``TICKWORK_REDIS_*``."""

from __future__ import annotations

import urllib.parse
from pathlib import Path
from typing import Self

from pydantic import Field, SecretStr, model_validator
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
    password_file: Path | None = Field(
        default=None,
        description="Read the AUTH password from this file instead (the chart mounts it "
        "there): a password in the environment can be read from /proc by anything that "
        "runs as the same user.",
    )
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
        default=6 * 3600,
        ge=60,
        description="How long an acknowledged run ID is remembered, so re-publishing it is a "
        "no-op (a run is re-published, if ever, within moments of a leader change). "
        "About 160 bytes of Redis memory per run: 6 h at 1,000 runs a minute is ~56 MB.",
    )
    dedup_max_runs: int = Field(
        default=1_000_000,
        ge=1000,
        description="At most this many run IDs are remembered (the oldest are forgotten "
        "first), so a higher run rate shortens the window instead of filling Redis.",
    )
    dead_max: int = Field(
        default=10_000,
        ge=1,
        description="Dead letters kept at most (the oldest go first); up to ~2 KB each.",
    )
    dead_retention_seconds: int = Field(
        default=7 * 86400, ge=60, description="Dead letters older than this are removed."
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

    @model_validator(mode="after")
    def _password_from_file(self) -> Self:
        if self.password is None and self.password_file is not None:
            try:
                text = self.password_file.read_text().rstrip("\r\n")
            except OSError as exc:
                raise ValueError(
                    f"cannot read the Redis password file {self.password_file}: {exc.strerror}"
                ) from None
            self.password = SecretStr(text)
        return self

    def safe_url(self) -> str:
        """The URL without any password, for messages and logs."""
        parts = urllib.parse.urlsplit(self.url)
        host = parts.hostname or "localhost"
        port = f":{parts.port}" if parts.port else ""
        user = f"{parts.username}@" if parts.username else ""
        return urllib.parse.urlunsplit((parts.scheme, f"{user}{host}{port}", parts.path, "", ""))

"""How to reach Redis: one pydantic-settings class, read from ``TICKWORK_REDIS_*``."""

from __future__ import annotations

import urllib.parse
from pathlib import Path
from typing import Annotated, Any, NamedTuple, Self

from pydantic import Field, SecretStr, field_validator, model_validator
from pydantic_settings import BaseSettings, NoDecode, SettingsConfigDict

#: Where Redis Sentinel listens unless an address names another port.
SENTINEL_PORT = 26379


class SentinelAddress(NamedTuple):
    """One Redis Sentinel, as ``host:port`` (``[v6-address]:port`` for IPv6)."""

    host: str
    port: int

    def __str__(self) -> str:
        return f"[{self.host}]:{self.port}" if ":" in self.host else f"{self.host}:{self.port}"


def parse_sentinels(text: str) -> tuple[SentinelAddress, ...]:
    """``host:port`` entries separated by commas; the port defaults to 26379.

    Raises ValueError naming the entry that is wrong and how to write it.
    """
    return tuple(_parse_sentinel(entry.strip()) for entry in text.split(",") if text.strip())


def _parse_sentinel(entry: str) -> SentinelAddress:
    example = "write HOST:PORT, e.g. redis-sentinel-0.redis:26379 or [fd00::1]:26379"
    if not entry:
        raise ValueError(f"an empty entry in the sentinel list (a stray comma?); {example}")
    if any(char.isspace() or char in "/@" for char in entry):
        raise ValueError(f"sentinel {entry!r} is not an address; {example}")
    if entry.startswith("["):
        host, bracket, rest = entry[1:].partition("]")
        if not bracket or (rest and not rest.startswith(":")):
            raise ValueError(f"sentinel {entry!r} has an unclosed IPv6 bracket; {example}")
        port_text = rest[1:] if rest else ""
    elif entry.count(":") > 1:
        raise ValueError(f"sentinel {entry!r}: put an IPv6 address in brackets; {example}")
    else:
        host, _, port_text = entry.partition(":")
    if not host:
        raise ValueError(f"sentinel {entry!r} has no host; {example}")
    if entry.endswith(":"):
        raise ValueError(f"sentinel {entry!r} has an empty port; {example}")
    if not port_text:
        return SentinelAddress(host, SENTINEL_PORT)
    if not port_text.isdigit() or not 1 <= int(port_text) <= 65535:  # noqa: PLR2004 - TCP ports
        raise ValueError(f"sentinel {entry!r}: the port must be a number from 1 to 65535")
    return SentinelAddress(host, int(port_text))


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
    sentinels: Annotated[tuple[SentinelAddress, ...], NoDecode] = Field(
        default=(),
        description="Redis Sentinels to ask where the master is, as host:port separated by "
        "commas (port 26379 if left out). When set, the URL's host and port are not used "
        "(its scheme, database and credentials still are), and the client follows the "
        "master through failovers.",
    )
    sentinel_master: str | None = Field(
        default=None,
        min_length=1,
        description="Name of the master set the sentinels monitor (`sentinel monitor NAME "
        "...`); required with TICKWORK_REDIS_SENTINELS, and only used with it.",
    )
    sentinel_username: str | None = Field(
        default=None, description="ACL user name for the sentinels, if they have one."
    )
    sentinel_password: SecretStr | None = Field(
        default=None,
        description="Password of the sentinels themselves (their requirepass), which may "
        "differ from the master's; without it the sentinels are asked without AUTH.",
    )
    sentinel_password_file: Path | None = Field(
        default=None, description="Read the sentinels' password from this file instead."
    )
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

    @field_validator(
        "sentinel_master",
        "sentinel_username",
        "sentinel_password",
        "sentinel_password_file",
        mode="before",
    )
    @classmethod
    def _empty_is_unset(cls, value: Any) -> Any:
        return None if value == "" else value  # as a chart renders an unset value

    @field_validator("sentinels", mode="before")
    @classmethod
    def _split_sentinels(cls, value: Any) -> Any:
        items = [value] if isinstance(value, str) else value
        if not isinstance(items, list | tuple):
            return value
        addresses: list[Any] = []  # from the environment one string; in code pairs too
        for item in items:
            try:
                addresses += parse_sentinels(item) if isinstance(item, str) else [item]
            except ValueError as exc:
                raise ValueError(f"TICKWORK_REDIS_SENTINELS: {exc}") from None
        return tuple(addresses)

    @model_validator(mode="after")
    def _passwords_from_files(self) -> Self:
        if self.password is None and self.password_file is not None:
            self.password = _read_password(self.password_file, "Redis password file")
        if self.sentinel_password is None and self.sentinel_password_file is not None:
            self.sentinel_password = _read_password(
                self.sentinel_password_file, "Redis Sentinel password file"
            )
        return self

    @model_validator(mode="after")
    def _sentinels_name_their_master(self) -> Self:
        if self.sentinels and not self.sentinel_master:
            raise ValueError(
                "TICKWORK_REDIS_SENTINELS is set but TICKWORK_REDIS_SENTINEL_MASTER is not: "
                "name the master set the sentinels monitor (often 'mymaster')"
            )
        if self.sentinel_master and not self.sentinels:
            raise ValueError(
                "TICKWORK_REDIS_SENTINEL_MASTER is set but TICKWORK_REDIS_SENTINELS is not: "
                "list the sentinels as host:port,host:port (or unset the master name to "
                "connect to TICKWORK_REDIS_URL directly)"
            )
        return self

    @property
    def uses_tls(self) -> bool:
        """Whether connections (to the sentinels too) are made over TLS."""
        return self.tls or self.url.startswith("rediss://")

    def safe_url(self) -> str:
        """Where Redis is, without any password, for messages and logs (``rediss://``
        when TLS is on). With sentinels that is ``redis+sentinel://HOST:PORT,.../MASTER/DB``.
        """
        parts = urllib.parse.urlsplit(self.url)
        user = f"{parts.username}@" if parts.username else ""
        if self.sentinels:
            scheme = "rediss+sentinel" if self.uses_tls else "redis+sentinel"
            hosts = ",".join(str(address) for address in self.sentinels)
            path = f"/{self.sentinel_master}{parts.path if parts.path != '/' else ''}"
            return urllib.parse.urlunsplit((scheme, f"{user}{hosts}", path, "", ""))
        host = parts.hostname or "localhost"
        port = f":{parts.port}" if parts.port else ""
        scheme = "rediss" if self.uses_tls and parts.scheme == "redis" else parts.scheme
        return urllib.parse.urlunsplit((scheme, f"{user}{host}{port}", parts.path, "", ""))


def _read_password(path: Path, what: str) -> SecretStr:
    try:
        text = path.read_text().rstrip("\r\n")
    except OSError as exc:
        raise ValueError(f"cannot read the {what} {path}: {exc.strerror}") from None
    return SecretStr(text)

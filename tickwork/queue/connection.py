"""Redis clients with reconnect-and-backoff, and errors that say what is wrong.

Connections are passed explicitly (the rq habit): :func:`create_client`
builds one from :class:`~tickwork.queue.settings.RedisSettings`, and callers
hand it to the queue. A command that meets a dropped connection is retried
with jittered exponential backoff; when Redis stays unreachable or refuses
the password, :class:`~tickwork.core.errors.QueueUnavailableError` says so in
one line, never with the password and never as a traceback wall. With
sentinels configured the client finds the master through them
(:mod:`.sentinel`).
"""

from __future__ import annotations

import asyncio
import ssl
import time
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

import redis.asyncio as aioredis
from redis.asyncio.connection import parse_url
from redis.asyncio.retry import Retry
from redis.asyncio.sentinel import MasterNotFoundError
from redis.backoff import ExponentialWithJitterBackoff
from redis.exceptions import AuthenticationError, OutOfMemoryError, ReadOnlyError, ResponseError
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import TimeoutError as RedisTimeoutError

from tickwork.core.errors import QueueUnavailableError
from tickwork.queue.sentinel import SentinelRefusedError, master_client
from tickwork.queue.settings import RedisSettings

T = TypeVar("T")


class _Retry(Retry):
    """redis-py's retry, except that what waiting cannot fix is final: a refused
    password, a server certificate that does not verify.

    (``AuthenticationError`` is a ``ConnectionError`` in redis-py, and so is a
    failed TLS handshake, so they would otherwise be retried like a dropped
    connection.)
    """

    async def call_with_retry(
        self,
        do: Callable[[], Awaitable[T]],
        fail: Callable[..., Any],
        is_retryable: Callable[[Exception], bool] | None = None,
        with_failure_count: bool = False,  # noqa: FBT001, FBT002 - redis-py's signature
    ) -> T:
        def retryable(error: Exception) -> bool:
            if isinstance(error, AuthenticationError) or _certificate_failed(error):
                return False
            return is_retryable is None or is_retryable(error)

        return await super().call_with_retry(do, fail, retryable, with_failure_count)


def _certificate_failed(error: BaseException) -> bool:
    """Whether the TLS handshake failed because the server's certificate did not verify
    (redis-py raises its ConnectionError while handling the ssl module's error)."""
    cause = error.__cause__ or error.__context__
    return isinstance(error, ssl.SSLCertVerificationError) or isinstance(
        cause, ssl.SSLCertVerificationError
    )


def create_client(settings: RedisSettings) -> aioredis.Redis:
    """An asyncio Redis client that retries dropped connections with backoff.

    With ``settings.sentinels`` it is a client of the master the sentinels name,
    which follows that master through failovers.
    """
    retry = _Retry(
        ExponentialWithJitterBackoff(cap=settings.reconnect_backoff_cap_seconds, base=0.05),
        retries=settings.reconnect_attempts,
    )
    kwargs: dict[str, Any] = {
        "socket_connect_timeout": settings.connect_timeout_seconds,
        "socket_timeout": settings.socket_timeout_seconds,
        "retry": retry,
        "retry_on_error": [RedisConnectionError, RedisTimeoutError],
        "health_check_interval": 30,
        "decode_responses": True,
    }
    if settings.username:
        kwargs["username"] = settings.username
    if settings.password is not None:
        kwargs["password"] = settings.password.get_secret_value()
    tls = _tls_options(settings)
    if settings.sentinels:
        return _sentinel_client(settings, kwargs, tls)
    url = settings.url
    if tls:
        url = url.replace("redis://", "rediss://", 1)
        kwargs.update(tls)
    client: aioredis.Redis = aioredis.Redis.from_url(url, **kwargs)
    return client


def _tls_options(settings: RedisSettings) -> dict[str, Any]:
    if not settings.uses_tls:
        return {}
    options: dict[str, Any] = {
        "ssl_cert_reqs": ssl.CERT_REQUIRED if settings.tls_verify else ssl.CERT_NONE
    }
    if settings.tls_ca_file:
        options["ssl_ca_certs"] = str(settings.tls_ca_file)
    return options


def _sentinel_client(
    settings: RedisSettings, kwargs: dict[str, Any], tls: dict[str, Any]
) -> aioredis.Redis:
    # The URL still gives the database and any credentials (and wins, as in
    # from_url); its host and port are the sentinels' to say.
    from_url = {
        key: value
        for key, value in parse_url(settings.url).items()
        if key not in {"host", "port", "connection_class", "path"}
    }
    ssl_on = {"ssl": True, **tls} if tls else {}
    sentinel_options: dict[str, Any] = {
        "socket_connect_timeout": settings.connect_timeout_seconds,
        "socket_timeout": settings.socket_timeout_seconds,
        "decode_responses": True,
        **ssl_on,
    }
    if settings.sentinel_username:
        sentinel_options["username"] = settings.sentinel_username
    if settings.sentinel_password is not None:
        sentinel_options["password"] = settings.sentinel_password.get_secret_value()
    assert settings.sentinel_master is not None  # noqa: S101 - the settings require it
    return master_client(
        settings.sentinels,
        settings.sentinel_master,
        sentinel_options=sentinel_options,
        master_options={**kwargs, **from_url, **ssl_on},
    )


#: Replies with which a running Redis refuses a command it would otherwise run.
_REFUSALS = ("OOM ", "READONLY", "MISCONF", "NOREPLICAS", "BUSY", "MASTERDOWN", "LOADING")


def refuses_writes(error: ResponseError) -> bool:
    """Whether Redis answered but refused (memory, replica, persistence): a passing
    condition of the server, not a bug in the call, so the caller retries later.
    (redis-py turns some refusals into classes and drops their code.)"""
    if isinstance(error, OutOfMemoryError | ReadOnlyError):
        return True
    text = str(error)
    return any(code in text for code in _REFUSALS)


def unavailable(error: Exception) -> bool:
    """Whether ``error`` means the queue cannot be used right now (vs. a bug)."""
    if isinstance(error, RedisConnectionError | RedisTimeoutError | AuthenticationError):
        return True
    return isinstance(error, ResponseError) and ("NOAUTH" in str(error) or refuses_writes(error))


def explain(error: Exception, settings: RedisSettings) -> QueueUnavailableError:
    """Turn a redis-py exception into one line that says what to check."""
    where = settings.safe_url()
    reason = str(error).split("\n", 1)[0]
    if isinstance(error, SentinelRefusedError):
        text = (
            f"Redis Sentinel at {where} refused the credentials ({reason}): check "
            "TICKWORK_REDIS_SENTINEL_PASSWORD or TICKWORK_REDIS_SENTINEL_PASSWORD_FILE (and "
            "TICKWORK_REDIS_SENTINEL_USERNAME), or the Secret they come from"
        )
    elif isinstance(error, AuthenticationError) or (
        isinstance(error, ResponseError) and "NOAUTH" in str(error)
    ):
        text = (
            f"Redis at {where} refused the credentials: check TICKWORK_REDIS_PASSWORD or "
            "TICKWORK_REDIS_PASSWORD_FILE (and TICKWORK_REDIS_USERNAME), or the Secret they "
            "come from"
        )
    elif _certificate_failed(error):
        text = (
            f"Redis at {where} failed the TLS check ({reason}): is TICKWORK_REDIS_TLS_CA_FILE "
            "the CA that signed the server's certificate, and does the certificate name the "
            "address connected to?"
        )
    elif isinstance(error, ResponseError) and refuses_writes(error):
        text = (
            f"Redis at {where} refuses writes ({reason}): is it out of memory (maxmemory), "
            "a read-only replica, or failing to persist (MISCONF)?"
        )
    elif isinstance(error, RedisTimeoutError):
        text = (
            f"Redis at {where} did not answer in time: is it overloaded, or is a firewall "
            "or NetworkPolicy dropping traffic?"
        )
    elif isinstance(error, MasterNotFoundError):
        text = (
            f"cannot find the Redis master at {where} ({reason}): are the sentinels running, "
            "and are TICKWORK_REDIS_SENTINELS and TICKWORK_REDIS_SENTINEL_MASTER right?"
        )
    elif settings.sentinels:
        text = (
            f"cannot reach the Redis master at {where} ({reason}): is it running, and do the "
            "sentinels announce an address this process can reach?"
        )
    else:
        text = (
            f"cannot reach Redis at {where} ({reason}): is it running, and is "
            "TICKWORK_REDIS_URL right (rediss:// if it speaks TLS)?"
        )
    return QueueUnavailableError(text)


async def check(client: aioredis.Redis, settings: RedisSettings) -> None:
    """PING once; raise :class:`QueueUnavailableError` with the reason if that fails."""
    try:
        await client.ping()
    except (RedisConnectionError, RedisTimeoutError, AuthenticationError, ResponseError) as exc:
        raise explain(exc, settings) from None


#: Explanations of what waiting cannot fix.
_FINAL = ("refused the credentials", "failed the TLS check")


async def wait_until_ready(
    client: aioredis.Redis, settings: RedisSettings, *, timeout_seconds: float
) -> None:
    """PING until Redis answers, backing off; raise the last reason after the timeout.

    A wrong password or a certificate that does not verify is not retried: waiting
    cannot fix it.
    """
    deadline = time.monotonic() + timeout_seconds
    delay = 0.1
    while True:
        try:
            await check(client, settings)
        except QueueUnavailableError as exc:
            final = any(words in str(exc) for words in _FINAL)
            if final or time.monotonic() + delay > deadline:
                raise
            await asyncio.sleep(delay)  # backoff between reconnection attempts
            delay = min(delay * 2, settings.reconnect_backoff_cap_seconds)
        else:
            return

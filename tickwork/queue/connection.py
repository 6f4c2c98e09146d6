"""Redis clients with reconnect-and-backoff, and errors that say what is wrong.

Connections are passed explicitly (the rq habit): :func:`create_client`
builds one from :class:`~tickwork.queue.settings.RedisSettings`, and callers
hand it to the queue. A command that meets a dropped connection is retried
with jittered exponential backoff; when Redis stays unreachable or refuses
the password, :class:`~tickwork.core.errors.QueueUnavailableError` says so in
one line, never with the password and never as a traceback wall.
"""

from __future__ import annotations

import asyncio
import ssl
import time
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

import redis.asyncio as aioredis
from redis.asyncio.retry import Retry
from redis.backoff import ExponentialWithJitterBackoff
from redis.exceptions import AuthenticationError, OutOfMemoryError, ReadOnlyError, ResponseError
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import TimeoutError as RedisTimeoutError

from tickwork.core.errors import QueueUnavailableError
from tickwork.queue.settings import RedisSettings

T = TypeVar("T")


class _Retry(Retry):
    """redis-py's retry, except that a refused password is final: waiting cannot fix it.

    (``AuthenticationError`` is a ``ConnectionError`` in redis-py, so it would
    otherwise be retried like a dropped connection.)
    """

    async def call_with_retry(
        self,
        do: Callable[[], Awaitable[T]],
        fail: Callable[..., Any],
        is_retryable: Callable[[Exception], bool] | None = None,
        with_failure_count: bool = False,  # noqa: FBT001, FBT002 - redis-py's signature
    ) -> T:
        def retryable(error: Exception) -> bool:
            if isinstance(error, AuthenticationError):
                return False
            return is_retryable is None or is_retryable(error)

        return await super().call_with_retry(do, fail, retryable, with_failure_count)


def create_client(settings: RedisSettings) -> aioredis.Redis:
    """An asyncio Redis client that retries dropped connections with backoff."""
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
    if settings.tls or settings.url.startswith("rediss://"):
        url = settings.url.replace("redis://", "rediss://", 1)
        kwargs["ssl_cert_reqs"] = ssl.CERT_REQUIRED if settings.tls_verify else ssl.CERT_NONE
        if settings.tls_ca_file:
            kwargs["ssl_ca_certs"] = str(settings.tls_ca_file)
    else:
        url = settings.url
    client: aioredis.Redis = aioredis.Redis.from_url(url, **kwargs)
    return client


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
    if isinstance(error, AuthenticationError) or (
        isinstance(error, ResponseError) and "NOAUTH" in str(error)
    ):
        return QueueUnavailableError(
            f"Redis at {where} refused the credentials: check TICKWORK_REDIS_PASSWORD or "
            "TICKWORK_REDIS_PASSWORD_FILE (and TICKWORK_REDIS_USERNAME), or the Secret they "
            "come from"
        )
    if isinstance(error, ResponseError) and refuses_writes(error):
        reason = str(error).split("\n", 1)[0]
        return QueueUnavailableError(
            f"Redis at {where} refuses writes ({reason}): is it out of memory (maxmemory), "
            "a read-only replica, or failing to persist (MISCONF)?"
        )
    if isinstance(error, RedisTimeoutError):
        return QueueUnavailableError(
            f"Redis at {where} did not answer in time: is it overloaded, or is a firewall "
            "or NetworkPolicy dropping traffic?"
        )
    reason = str(error).split("\n", 1)[0]
    return QueueUnavailableError(
        f"cannot reach Redis at {where} ({reason}): is it running, and is TICKWORK_REDIS_URL right?"
    )


async def check(client: aioredis.Redis, settings: RedisSettings) -> None:
    """PING once; raise :class:`QueueUnavailableError` with the reason if that fails."""
    try:
        await client.ping()
    except (RedisConnectionError, RedisTimeoutError, AuthenticationError, ResponseError) as exc:
        raise explain(exc, settings) from None


async def wait_until_ready(
    client: aioredis.Redis, settings: RedisSettings, *, timeout_seconds: float
) -> None:
    """PING until Redis answers, backing off; raise the last reason after the timeout.

    A wrong password is not retried: waiting cannot fix it.
    """
    deadline = time.monotonic() + timeout_seconds
    delay = 0.1
    while True:
        try:
            await check(client, settings)
        except QueueUnavailableError as exc:
            if "refused the credentials" in str(exc) or time.monotonic() + delay > deadline:
                raise
            await asyncio.sleep(delay)  # backoff between reconnection attempts
            delay = min(delay * 2, settings.reconnect_backoff_cap_seconds)
        else:
            return

"""Redis Sentinel: find the master through the sentinels and follow it through failovers.

redis-py's Sentinel client falls short in two ways, both measured against
Redis 7.0 in tests/integration/test_queue_sentinel.py:

* It asks the sentinels only in ``connect()``; a command retried after a
  READONLY or a dropped connection reconnects to the address it had, the old
  master, until its retries run out (redis-py issue 3874). Connections here
  ask the sentinels on every (re)connect, so the client's retry reaches the
  new master.
* It asks only when it opens a connection. After a failover the old master
  stays a master until the sentinels reconfigure it (10 s by default), and a
  pooled connection keeps writing there, writes lost when it becomes a
  replica. The pool here asks again at most every :data:`MASTER_CHECK_SECONDS`
  as it hands out a connection, and drops connections to a master that moved.
"""

from __future__ import annotations

import contextlib
import ssl
import time
from typing import Any, cast

import redis.asyncio as aioredis
from redis.asyncio.connection import SSLConnection
from redis.asyncio.retry import Retry
from redis.asyncio.sentinel import (
    MasterNotFoundError,
    Sentinel,
    SentinelConnectionPool,
    SentinelManagedConnection,
)
from redis.backoff import NoBackoff
from redis.exceptions import AuthenticationError, NoPermissionError
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import TimeoutError as RedisTimeoutError

from tickwork.queue.settings import SentinelAddress

#: How stale the client's idea of the master may be: after a failover, writes
#: can go to the old master for this long (and be lost with it) at most.
MASTER_CHECK_SECONDS = 1.0


class SentinelRefusedError(AuthenticationError):
    """A sentinel refused our credentials (or the ACL user may not ask it): final."""


class _Sentinel(Sentinel):
    """redis-py's Sentinel, with reasons a person can act on and refusals that are final."""

    async def discover_master(self, service_name: str) -> tuple[str, int]:
        reasons = []
        for index, sentinel in enumerate(self.sentinels):
            kwargs = sentinel.connection_pool.connection_kwargs
            where = str(SentinelAddress(kwargs["host"], kwargs["port"]))
            try:
                masters = cast("dict[str, dict[str, Any]]", await sentinel.sentinel_masters())
            except (AuthenticationError, NoPermissionError) as exc:
                # Waiting cannot fix credentials; asking the next sentinel hides the cause.
                raise SentinelRefusedError(f"sentinel {where} refused: {exc}") from None
            except (RedisConnectionError, RedisTimeoutError) as exc:
                if isinstance(exc.__context__, ssl.SSLCertVerificationError):
                    raise  # a certificate that does not verify is final, as for the master
                reasons.append(f"{where}: {exc}")
                continue
            state = masters.get(service_name)
            if state is None:
                reasons.append(f"{where} monitors no master named {service_name!r}")
            elif not self.check_master_state(state, service_name):
                reasons.append(f"{where} reports master {service_name!r} down")
            else:  # ask this one first next time, as redis-py does
                self.sentinels[0], self.sentinels[index] = sentinel, self.sentinels[0]
                return str(state["ip"]), int(state["port"])
        raise MasterNotFoundError(f"no sentinel named the master: {'; '.join(reasons)}")


class _MasterConnection(SentinelManagedConnection):
    """A connection to the master that asks the sentinels on every (re)connect."""

    async def _connect_retry(self) -> None:
        await self.connect_check_health(check_health=self.connection_pool.check_connection)

    async def connect_check_health(
        self,
        check_health: bool = True,  # noqa: FBT001, FBT002 - redis-py's signature
        retry_socket_connect: bool = True,  # noqa: FBT001, FBT002, ARG002 - one try per address
    ) -> None:
        if self.is_connected:
            return
        # Asked outside redis-py's connect, whose errors would be wrapped: a sentinel's
        # refusal must stay final, a missing master a reason to retry.
        self.host, self.port = await self.connection_pool.get_master_address()
        self.reset_should_reconnect()  # type: ignore[no-untyped-call] # connecting afresh
        # One try per address: the caller's retry tries again, asking the sentinels again.
        await super().connect_check_health(check_health=check_health, retry_socket_connect=False)


class _MasterSSLConnection(_MasterConnection, SSLConnection):
    pass


class _MasterPool(SentinelConnectionPool):
    """Connections to the current master: asks the sentinels again now and then."""

    def __init__(self, service_name: str, sentinel_manager: Sentinel, **kwargs: Any) -> None:
        tls = kwargs.pop("ssl", False)
        kwargs["connection_class"] = _MasterSSLConnection if tls else _MasterConnection
        super().__init__(service_name, sentinel_manager, **kwargs)  # type: ignore[no-untyped-call]
        self._check_at = 0.0

    async def get_master_address(self) -> tuple[str, int]:
        known = self.master_address
        address: tuple[str, int] = await super().get_master_address()  # type: ignore[no-untyped-call]
        if known is not None and address != known:
            # Idle connections were just closed; those in use close when handed back.
            await self.update_active_connections_for_reconnect()  # type: ignore[no-untyped-call]
        return address

    async def get_connection(self, *args: Any, **kwargs: Any) -> Any:
        now = time.monotonic()
        if self.master_address is not None and now >= self._check_at:
            self._check_at = now + MASTER_CHECK_SECONDS
            # Sentinels out of reach: keep the master we know; it answers for itself.
            with contextlib.suppress(RedisConnectionError, RedisTimeoutError):
                await self.get_master_address()
        return await super().get_connection(*args, **kwargs)  # type: ignore[no-untyped-call]


class _SentinelMaster(aioredis.Redis):
    """The master's client; closing it closes the connections to the sentinels too."""

    async def aclose(self, close_connection_pool: bool | None = None) -> None:  # noqa: FBT001 - redis-py's signature
        await super().aclose(close_connection_pool)
        if isinstance(self.connection_pool, SentinelConnectionPool):
            await self.connection_pool.sentinel_manager.aclose()


def master_client(
    sentinels: tuple[SentinelAddress, ...],
    master: str,
    *,
    sentinel_options: dict[str, Any],
    master_options: dict[str, Any],
) -> aioredis.Redis:
    """A client of ``master`` as the ``sentinels`` name it, which follows failovers.

    ``master_options`` are those of a plain client (timeouts, retry, credentials,
    TLS); ``sentinel_options`` those of the connections to the sentinels, which
    are asked once each in turn (the master connection's retry repeats the round).
    """
    manager = _Sentinel(  # type: ignore[no-untyped-call]
        [(address.host, address.port) for address in sentinels],
        sentinel_kwargs={**sentinel_options, "retry": Retry(NoBackoff(), 0)},
    )
    client: aioredis.Redis = manager.master_for(
        master, redis_class=_SentinelMaster, connection_pool_class=_MasterPool, **master_options
    )
    return client

"""The queue through Redis Sentinel, against real servers on loopback: a master, a
replica and ``redis-server --sentinel``. Runs are published and claimed through the
sentinel-configured client; then the master changes (a requested failover, a
demotion the client only hears of as READONLY, a killed master), and the same
client goes on with the new master, losing nothing that was replicated."""

from __future__ import annotations

import asyncio
import contextlib
import math
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import redis as redis_lib

from tickwork.core.errors import QueueUnavailableError
from tickwork.queue import RedisRunQueue, RedisSettings
from tickwork.queue.connection import create_client, wait_until_ready
from tickwork.queue.messages import Claim, EnqueueOutcome, RunLocation, RunMessage
from tickwork.queue.sentinel import MASTER_CHECK_SECONDS
from tickwork_dev.devcluster.certs import generate_server_tls
from tickwork_dev.devcluster.process import free_port
from tickwork_dev.devcluster.redis import RedisSentinel, RedisServer

pytestmark = [pytest.mark.asyncio, pytest.mark.timeout(120)]

MASTER_SET = "tickwork"
SENTINEL_PASSWORD = "sentinel-secret"


def message(n: int) -> RunMessage:
    return RunMessage(
        run_id=f"uid-{n}.20261201T090000Z", namespace="ns", name=f"job-{n}", uid=f"uid-{n}"
    )


def wait_for(what: str, predicate: Callable[[], Any], timeout: float = 30) -> Any:
    """Poll ``predicate`` until it returns something true (an event of a foreign server)."""
    deadline = time.monotonic() + timeout
    while not (value := predicate()):
        assert time.monotonic() < deadline, f"{what} did not happen within {timeout:.0f}s"
        time.sleep(0.05)
    return value


@dataclass
class SentinelSet:
    """A master, its replica and one sentinel watching them (quorum 1)."""

    master: RedisServer
    replica: RedisServer
    sentinel: RedisSentinel

    def settings(self, **overrides: Any) -> RedisSettings:
        values: dict[str, Any] = {
            "sentinels": self.sentinel.address,
            "sentinel_master": MASTER_SET,
            "sentinel_password": SENTINEL_PASSWORD,
            "password": self.master.password,
            "poll_seconds": 0.2,
        }
        return RedisSettings(**{**values, **overrides})

    def direct(self, server: RedisServer | RedisSentinel) -> redis_lib.Redis:
        """A plain client of one server, for looking behind the queue's back."""
        tls = self.master.tls
        options: dict[str, Any] = {"ssl": True, "ssl_ca_certs": str(tls.ca_cert)} if tls else {}
        password = SENTINEL_PASSWORD if isinstance(server, RedisSentinel) else server.password
        return redis_lib.Redis(
            port=server.port, password=password, decode_responses=True, **options
        )

    def reported_master_port(self) -> int:
        with self.direct(self.sentinel) as sentinel:
            _, port = sentinel.sentinel_get_master_addr_by_name(MASTER_SET)
            return int(port)

    def role(self, server: RedisServer) -> str:
        with self.direct(server) as client:
            return str(client.execute_command("ROLE")[0])

    def replicated(self) -> None:
        """Every write so far is on the replica (a write it has not got is lost by any
        failover: Redis replicates asynchronously)."""
        with self.direct(self.master) as master:
            assert master.execute_command("WAIT", 1, 10_000) == 1


def _link_up(replica: redis_lib.Redis) -> bool:
    return bool(replica.info("replication")["master_link_status"] == "up")


@contextlib.contextmanager
def _start_set(workdir: Path, *, tls: bool = False, replica: bool = True) -> Iterator[SentinelSet]:
    pki = generate_server_tls(workdir / "pki") if tls else None
    with RedisServer(workdir=workdir / "a", tls=pki) as master:
        second = RedisServer(
            workdir=workdir / "b", password=master.password, tls=pki, replica_of=master.port
        )
        if replica:
            second.start()
        try:
            watched = SentinelSet(
                master,
                second,
                RedisSentinel(
                    workdir=workdir / "sentinel",
                    master=master,
                    master_name=MASTER_SET,
                    password=SENTINEL_PASSWORD,
                ),
            )
            if replica:
                with watched.direct(second) as client:
                    wait_for("replication", lambda: _link_up(client))
            with watched.sentinel:
                with watched.direct(watched.sentinel) as sentinel:
                    # Look at the servers every 100 ms instead of 10 s, so that the
                    # sentinel knows the replica and its state at once.
                    sentinel.execute_command("SENTINEL", "DEBUG", "info-period", 100)
                    if replica:
                        wait_for(
                            "the sentinel to know the replica",
                            lambda: any(
                                r["master-link-status"] == "ok"
                                for r in sentinel.sentinel_slaves(MASTER_SET)
                            ),
                        )
                yield watched
        finally:
            second.stop()


@pytest.fixture
def sentinel_set(tmp_path: Path) -> Iterator[SentinelSet]:
    with _start_set(tmp_path) as started:
        yield started


def open_queue(settings: RedisSettings) -> RedisRunQueue:
    return RedisRunQueue(create_client(settings), settings)


async def _claim_all(queue: RedisRunQueue, want: int) -> list[Claim]:
    claims: list[Claim] = []
    while len(claims) < want:
        got = await queue.claim(consumer="rescuer", lease_seconds=60, count=want, wait_seconds=5)
        assert got, f"only {len(claims)} of {want} runs came back"
        claims += got
    return claims


async def test_the_queue_works_through_the_sentinels_with_an_acl_user(
    sentinel_set: SentinelSet, tmp_path: Path
) -> None:
    with sentinel_set.direct(sentinel_set.sentinel) as sentinel:
        sentinel.execute_command("ACL", "SETUSER", "watcher", "on", ">watcher-secret", "+@all")
    password_file = tmp_path / "sentinel-password"
    password_file.write_text("watcher-secret\n")
    settings = sentinel_set.settings(
        sentinel_password=None, sentinel_username="watcher", sentinel_password_file=password_file
    )
    assert (
        settings.safe_url() == f"redis+sentinel://127.0.0.1:{sentinel_set.sentinel.port}/tickwork/0"
    )
    queue = open_queue(settings)
    try:
        await wait_until_ready(queue._client, settings, timeout_seconds=10)
        for n in range(20):
            assert await queue.enqueue(message(n)) is EnqueueOutcome.ENQUEUED
        claims = await queue.claim(consumer="w", lease_seconds=60, count=20, wait_seconds=1)
        assert sorted(c.run_id for c in claims) == sorted(message(n).run_id for n in range(20))
        for claim in claims:
            assert await queue.ack(claim)
        with sentinel_set.direct(sentinel_set.master) as master:  # it went to the master
            assert master.zcard(queue.keys.done) == 20
    finally:
        await queue.close()


async def test_a_failover_moves_the_queue_to_the_new_master_and_loses_nothing(
    sentinel_set: SentinelSet,
) -> None:
    """After SENTINEL FAILOVER the old master stays a master for a while (until the
    sentinel reconfigures it, ~10 s by default; here held for the whole test), taking
    writes that are lost when it becomes a replica. The client must move on its own."""
    old, new = sentinel_set.master, sentinel_set.replica
    settings = sentinel_set.settings()
    operator, worker = open_queue(settings), open_queue(settings)
    try:
        for n in range(30):
            await operator.enqueue(message(n))
        held = await worker.claim(consumer="w", lease_seconds=600, count=30)
        assert len(held) == 30
        for claim in held[:10]:
            assert await worker.ack(claim)
        # A consumer waits on the empty queue through the failover.
        waiting = asyncio.create_task(
            worker.claim(consumer="w2", lease_seconds=600, count=10, wait_seconds=60)
        )
        sentinel_set.replicated()
        with sentinel_set.direct(sentinel_set.sentinel) as sentinel:
            sentinel.execute_command("SENTINEL", "DEBUG", "publish-period", 600_000)
            assert sentinel.execute_command("SENTINEL", "FAILOVER", MASTER_SET)
        await asyncio.to_thread(
            wait_for, "the switch", lambda: sentinel_set.reported_master_port() == new.port
        )
        # The client asks the sentinels again within MASTER_CHECK_SECONDS of any use.
        started = time.monotonic()
        while operator._client.connection_pool.master_address != ("127.0.0.1", new.port):
            assert time.monotonic() - started < MASTER_CHECK_SECONDS + 5, "client stayed behind"
            await operator.depth()
            await asyncio.sleep(0.05)
        assert sentinel_set.role(old) == "master"  # still taking writes: moving was ours

        for n in range(30, 40):
            assert await operator.enqueue(message(n)) is EnqueueOutcome.ENQUEUED
        late = await asyncio.wait_for(waiting, timeout=30)
        late += await _claim_all(worker, 10 - len(late))
        assert sorted(c.run_id for c in late) == sorted(message(n).run_id for n in range(30, 40))
        for claim in held[10:] + late:  # leases taken on the old master hold on the new one
            assert await worker.ack(claim)

        for n in range(40):
            assert await operator.locate(message(n).run_id) is RunLocation.DONE, n
        depth = await operator.depth()
        assert (depth.ready, depth.in_flight, depth.delayed, depth.dead) == (0, 0, 0, 0)
        with sentinel_set.direct(new) as server:
            assert server.zcard(operator.keys.done) == 40
        with sentinel_set.direct(old) as server:  # nothing after the switch went astray
            assert server.zcard(operator.keys.done) == 10
    finally:
        await operator.close()
        await worker.close()


async def test_a_demoted_master_answering_readonly_sends_the_client_to_the_new_one(
    sentinel_set: SentinelSet,
) -> None:
    """The master is made a replica behind the client's back and the sentinel is
    pointed at the new one; with the periodic check out of the way, only the READONLY
    answer can tell the client, and the command is retried on the new master."""
    old, new = sentinel_set.master, sentinel_set.replica
    settings = sentinel_set.settings()
    queue = open_queue(settings)
    try:
        assert await queue.enqueue(message(1)) is EnqueueOutcome.ENQUEUED
        queue._client.connection_pool._check_at = math.inf
        sentinel_set.replicated()
        with sentinel_set.direct(new) as server:
            server.execute_command("REPLICAOF", "NO", "ONE")
        with sentinel_set.direct(old) as server:
            server.execute_command("REPLICAOF", "127.0.0.1", new.port)
        with sentinel_set.direct(sentinel_set.sentinel) as sentinel:
            sentinel.execute_command("SENTINEL", "REMOVE", MASTER_SET)
            sentinel.execute_command("SENTINEL", "MONITOR", MASTER_SET, "127.0.0.1", new.port, 1)
            sentinel.execute_command("SENTINEL", "SET", MASTER_SET, "auth-pass", new.password)

        assert await queue.enqueue(message(2)) is EnqueueOutcome.ENQUEUED
        with sentinel_set.direct(old) as server:
            assert server.info("errorstats")["errorstat_READONLY"]["count"] >= 1
        assert queue._client.connection_pool.master_address == ("127.0.0.1", new.port)
        for n in (1, 2):
            assert await queue.locate(message(n).run_id) is RunLocation.READY
    finally:
        await queue.close()


async def test_a_killed_master_is_replaced_and_the_client_retries_through(
    sentinel_set: SentinelSet,
) -> None:
    settings = sentinel_set.settings()
    queue = open_queue(settings)
    try:
        for n in range(20):
            await queue.enqueue(message(n))
        claims = await queue.claim(consumer="w", lease_seconds=600, count=5)
        for claim in claims:
            assert await queue.ack(claim)
        sentinel_set.replicated()
        sentinel_set.master.kill()

        # Commands meet a refused connection, then a master the sentinel reports down,
        # and are retried with backoff until the replica is promoted. A caller that
        # still gets QueueUnavailableError tries again later, as the operator does.
        deadline = time.monotonic() + 60
        outcome = None
        while outcome is None and time.monotonic() < deadline:
            with contextlib.suppress(QueueUnavailableError):
                outcome = await queue.enqueue(message(20))
        assert outcome is EnqueueOutcome.ENQUEUED
        assert sentinel_set.reported_master_port() == sentinel_set.replica.port
        for n in range(21):
            expected = RunLocation.DONE if n < 5 else RunLocation.READY
            assert await queue.locate(message(n).run_id) is expected, n
    finally:
        await queue.close()


@pytest.mark.parametrize(
    ("overrides", "expected"),
    [
        ({"sentinel_password": "not-the-secret"}, "refused the credentials"),
        ({"sentinel_password": None}, "refused the credentials"),  # NOAUTH
        ({"sentinel_master": "elsewhere"}, "monitors no master named 'elsewhere'"),
    ],
)
async def test_sentinel_mistakes_are_clear_errors(
    sentinel_set: SentinelSet, overrides: dict[str, Any], expected: str
) -> None:
    settings = sentinel_set.settings(reconnect_attempts=1, **overrides)
    client = create_client(settings)
    try:
        with pytest.raises(QueueUnavailableError) as excinfo:
            await wait_until_ready(client, settings, timeout_seconds=1)
    finally:
        await client.aclose()
    text = str(excinfo.value)
    assert expected in text
    assert f"redis+sentinel://127.0.0.1:{sentinel_set.sentinel.port}/" in text
    assert "secret" not in text
    assert sentinel_set.master.password not in text
    assert "TICKWORK_REDIS_SENTINEL" in text


async def test_unreachable_sentinels_are_a_clear_error() -> None:
    ports = [free_port(), free_port()]
    settings = RedisSettings(
        sentinels=",".join(f"127.0.0.1:{port}" for port in ports),  # type: ignore[arg-type]
        sentinel_master=MASTER_SET,
        reconnect_attempts=1,
    )
    client = create_client(settings)
    with pytest.raises(QueueUnavailableError) as excinfo:
        await wait_until_ready(client, settings, timeout_seconds=1)
    await client.aclose()
    text = str(excinfo.value)
    assert text.startswith(f"cannot find the Redis master at redis+sentinel://127.0.0.1:{ports[0]}")
    for port in ports:
        assert f"127.0.0.1:{port}: Error 111 connecting" in text  # every one was asked


async def test_sentinels_and_the_master_over_tls(tmp_path: Path) -> None:
    with _start_set(tmp_path, tls=True, replica=False) as watched:
        tls = watched.master.tls
        assert tls is not None
        settings = watched.settings(tls=True, tls_ca_file=tls.ca_cert)
        assert settings.safe_url().startswith("rediss+sentinel://")
        queue = open_queue(settings)
        try:
            assert await queue.enqueue(message(1)) is EnqueueOutcome.ENQUEUED
            (claim,) = await queue.claim(consumer="w", lease_seconds=60, wait_seconds=1)
            assert await queue.ack(claim)
        finally:
            await queue.close()

        wrong = settings.model_copy(
            update={"tls_ca_file": generate_server_tls(tmp_path / "other").ca_cert}
        )
        client = create_client(wrong)
        with pytest.raises(QueueUnavailableError, match="failed the TLS check") as excinfo:
            await wait_until_ready(client, wrong, timeout_seconds=30)
        await client.aclose()
        assert f":{watched.sentinel.port}" in str(excinfo.value)  # the sentinel's certificate

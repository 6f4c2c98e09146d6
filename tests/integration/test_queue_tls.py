"""The queue over TLS, against a real TLS-only redis-server with a throwaway CA: the
CA given by TICKWORK_REDIS_TLS_CA_FILE verifies the server, an ACL user logs in over
it, and a certificate from another CA is refused at once with a clear error."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis.asyncio as aioredis
from pydantic import SecretStr

from tickwork.core.errors import QueueUnavailableError
from tickwork.queue import RedisRunQueue, RedisSettings
from tickwork.queue.connection import create_client, wait_until_ready
from tickwork.queue.messages import EnqueueOutcome, RunLocation, RunMessage
from tickwork_dev.devcluster.certs import ServerTls, generate_server_tls
from tickwork_dev.devcluster.redis import RedisServer

pytestmark = [pytest.mark.asyncio, pytest.mark.timeout(60)]


@pytest.fixture(scope="module")
def tls_redis(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RedisServer]:
    """A redis-server that speaks TLS only, with a certificate for 127.0.0.1."""
    workdir = tmp_path_factory.mktemp("tls-redis")
    with RedisServer(workdir=workdir / "redis", tls=generate_server_tls(workdir / "pki")) as server:
        yield server


@pytest.fixture(scope="module")
def other_ca(tmp_path_factory: pytest.TempPathFactory) -> ServerTls:
    """A CA that signed nothing the server presents."""
    return generate_server_tls(tmp_path_factory.mktemp("other-pki"))


def message(n: int) -> RunMessage:
    return RunMessage(
        run_id=f"uid-{n}.20261201T090000Z", namespace="ns", name=f"job-{n}", uid=f"uid-{n}"
    )


async def _round_trip(settings: RedisSettings) -> None:
    """Publish, claim and acknowledge one run, as the operator and a worker do."""
    queue = RedisRunQueue(create_client(settings), settings)
    try:
        await wait_until_ready(queue._client, settings, timeout_seconds=10)
        assert await queue.enqueue(message(1)) is EnqueueOutcome.ENQUEUED
        (claim,) = await queue.claim(consumer="w", lease_seconds=60, wait_seconds=1)
        assert claim.run_id == message(1).run_id
        assert await queue.ack(claim)
        assert await queue.locate(claim.run_id) is RunLocation.DONE
    finally:
        await queue.close()


async def _flush(server: RedisServer) -> None:
    assert server.tls is not None
    client = aioredis.Redis.from_url(server.url, ssl_ca_certs=str(server.tls.ca_cert))
    await client.flushall()
    await client.aclose()


@pytest.mark.parametrize("asked_by", ["TICKWORK_REDIS_TLS", "rediss:// URL"])
async def test_the_queue_works_over_tls_verified_by_the_given_ca(
    tls_redis: RedisServer, asked_by: str
) -> None:
    await _flush(tls_redis)
    assert tls_redis.tls is not None
    scheme = "redis" if asked_by == "TICKWORK_REDIS_TLS" else "rediss"
    await _round_trip(
        RedisSettings(
            url=f"{scheme}://127.0.0.1:{tls_redis.port}/0",
            tls=asked_by == "TICKWORK_REDIS_TLS",
            tls_ca_file=tls_redis.tls.ca_cert,
            password=tls_redis.password,
        )
    )


async def test_an_acl_user_with_only_the_queue_keys_works_over_tls(
    tls_redis: RedisServer,
) -> None:
    await _flush(tls_redis)
    assert tls_redis.tls is not None
    admin = aioredis.Redis.from_url(tls_redis.url, ssl_ca_certs=str(tls_redis.tls.ca_cert))
    # The least a Tickwork user needs: its own keys, every command but the dangerous
    # ones except INFO (the queue depth reads memory from it).
    await admin.execute_command(
        "ACL",
        "SETUSER",
        "tickwork",
        "reset",
        "on",
        ">user-secret",
        "~tickwork:*",
        "+@all",
        "-@dangerous",
        "+info",
    )
    try:
        settings = RedisSettings(
            url=f"redis://127.0.0.1:{tls_redis.port}/0",
            tls=True,
            tls_ca_file=tls_redis.tls.ca_cert,
            username="tickwork",
            password="user-secret",
        )
        await _round_trip(settings)

        wrong = settings.model_copy(update={"password": SecretStr("not-the-secret")})
        client = create_client(wrong)
        started = time.monotonic()
        with pytest.raises(QueueUnavailableError, match="refused the credentials") as excinfo:
            await wait_until_ready(client, wrong, timeout_seconds=30)
        assert time.monotonic() - started < 5  # final, not retried
        assert "TICKWORK_REDIS_USERNAME" in str(excinfo.value)
        assert "secret" not in str(excinfo.value)
        await client.aclose()
    finally:
        await admin.execute_command("ACL", "DELUSER", "tickwork")
        await admin.aclose()


async def test_a_certificate_from_another_ca_is_a_clear_error_at_once(
    tls_redis: RedisServer, other_ca: ServerTls
) -> None:
    settings = RedisSettings(
        url=f"redis://127.0.0.1:{tls_redis.port}/0",
        tls=True,
        tls_ca_file=other_ca.ca_cert,
        password=tls_redis.password,
    )
    client = create_client(settings)
    started = time.monotonic()
    with pytest.raises(QueueUnavailableError) as excinfo:
        await wait_until_ready(client, settings, timeout_seconds=30)
    assert time.monotonic() - started < 5  # waiting cannot fix a certificate
    text = str(excinfo.value)
    assert text.startswith(f"Redis at rediss://127.0.0.1:{tls_redis.port}/0 failed the TLS check")
    assert "CERTIFICATE_VERIFY_FAILED" in text
    assert "TICKWORK_REDIS_TLS_CA_FILE" in text
    assert tls_redis.password not in text
    queue = RedisRunQueue(client, settings)
    with pytest.raises(QueueUnavailableError, match="failed the TLS check"):
        await queue.enqueue(message(1))
    await queue.close()


async def test_without_verification_any_certificate_is_accepted(
    tls_redis: RedisServer, other_ca: ServerTls
) -> None:
    await _flush(tls_redis)
    await _round_trip(
        RedisSettings(
            url=f"rediss://127.0.0.1:{tls_redis.port}/0",
            tls_ca_file=other_ca.ca_cert,
            tls_verify=False,
            password=tls_redis.password,
        )
    )


async def test_plain_text_to_a_tls_port_is_a_clear_error(tls_redis: RedisServer) -> None:
    settings = RedisSettings(
        url=f"redis://127.0.0.1:{tls_redis.port}/0",
        password=tls_redis.password,
        reconnect_attempts=1,
        connect_timeout_seconds=1,
        socket_timeout_seconds=1,
    )
    client = create_client(settings)
    with pytest.raises(QueueUnavailableError) as excinfo:
        await wait_until_ready(client, settings, timeout_seconds=2)
    assert f"127.0.0.1:{tls_redis.port}" in str(excinfo.value)
    assert tls_redis.password not in str(excinfo.value)
    await client.aclose()


async def test_a_certificate_for_another_name_is_refused(tmp_path: Path) -> None:
    """The host name is verified too, not only the signature."""
    tls = generate_server_tls(tmp_path / "pki", names=("redis.example",))
    with RedisServer(workdir=tmp_path / "redis", tls=tls) as elsewhere:
        settings = RedisSettings(
            url=f"rediss://127.0.0.1:{elsewhere.port}/0",
            tls_ca_file=tls.ca_cert,
            password=elsewhere.password,
        )
        client = create_client(settings)
        with pytest.raises(QueueUnavailableError, match="failed the TLS check") as excinfo:
            await wait_until_ready(client, settings, timeout_seconds=30)
        assert "does the certificate name the address connected to?" in str(excinfo.value)
        await client.aclose()

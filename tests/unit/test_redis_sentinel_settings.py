"""Redis Sentinel settings: the sentinel list as the chart writes it, the master set's
name, the sentinels' own credentials, and messages that name the sentinels, never a
password. (tests/integration/test_queue_sentinel.py runs them against real sentinels.)"""

from __future__ import annotations

import ssl
from pathlib import Path

import pytest
from pydantic import ValidationError
from redis.asyncio.connection import SSLConnection
from redis.asyncio.sentinel import (
    MasterNotFoundError,
    SentinelConnectionPool,
    SentinelManagedConnection,
)
from redis.exceptions import ConnectionError as RedisConnectionError

from tickwork.queue.connection import create_client, explain
from tickwork.queue.sentinel import SentinelRefusedError
from tickwork.queue.settings import RedisSettings, SentinelAddress

pytestmark = pytest.mark.unit


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("sentinel-0.redis:26379", [("sentinel-0.redis", 26379)]),
        ("10.0.0.5:5000,10.0.0.6:5001", [("10.0.0.5", 5000), ("10.0.0.6", 5001)]),
        (" a:1 , b:2 ", [("a", 1), ("b", 2)]),  # spaces around entries, as YAML folds them
        ("redis-sentinel", [("redis-sentinel", 26379)]),  # Sentinel's own port by default
        ("[fd00::1]:26380", [("fd00::1", 26380)]),
        ("[::1]", [("::1", 26379)]),
        ("a:65535", [("a", 65535)]),
        ("", []),  # empty is off, as a chart renders an unset value
    ],
)
def test_the_sentinel_list_is_host_port_pairs_separated_by_commas(
    text: str, expected: list[tuple[str, int]]
) -> None:
    settings = RedisSettings(sentinels=text, sentinel_master="mymaster" if expected else None)  # type: ignore[arg-type]
    assert settings.sentinels == tuple(SentinelAddress(*pair) for pair in expected)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("a:1,,b:2", "an empty entry in the sentinel list"),
        ("a:1,", "an empty entry in the sentinel list"),
        ("a:", "'a:' has an empty port"),
        ("a:port", "'a:port': the port must be a number from 1 to 65535"),
        ("a:0", "the port must be a number from 1 to 65535"),
        ("a:65536", "the port must be a number from 1 to 65535"),
        ("a:-1", "the port must be a number from 1 to 65535"),
        (":26379", "':26379' has no host"),
        ("fd00::1:26379", "put an IPv6 address in brackets"),
        ("[fd00::1:26379", "unclosed IPv6 bracket"),
        ("[fd00::1]26379", "unclosed IPv6 bracket"),
        ("a b:1", "'a b:1' is not an address"),
        ("redis://a:26379", "is not an address"),
        ("user@a:26379", "is not an address"),
    ],
)
def test_a_bad_sentinel_list_is_refused_with_the_entry_and_the_form_to_use(
    text: str, message: str
) -> None:
    with pytest.raises(ValidationError) as excinfo:
        RedisSettings(sentinels=text, sentinel_master="mymaster")  # type: ignore[arg-type]
    error = str(excinfo.value)
    assert message in error
    assert "TICKWORK_REDIS_SENTINELS" in error


def test_every_sentinel_setting_is_read_from_its_environment_variable(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    secret = tmp_path / "sentinel-password"
    secret.write_text("from-the-file\n")
    monkeypatch.setenv("TICKWORK_REDIS_SENTINELS", "s0.redis:26379,s1.redis:26379")
    monkeypatch.setenv("TICKWORK_REDIS_SENTINEL_MASTER", "mymaster")
    monkeypatch.setenv("TICKWORK_REDIS_SENTINEL_USERNAME", "watcher")
    monkeypatch.setenv("TICKWORK_REDIS_SENTINEL_PASSWORD_FILE", str(secret))
    settings = RedisSettings()
    assert settings.sentinels == (
        SentinelAddress("s0.redis", 26379),
        SentinelAddress("s1.redis", 26379),
    )
    assert settings.sentinel_master == "mymaster"
    assert settings.sentinel_username == "watcher"
    assert settings.sentinel_password is not None
    assert settings.sentinel_password.get_secret_value() == "from-the-file"
    assert "from-the-file" not in repr(settings)

    monkeypatch.setenv("TICKWORK_REDIS_SENTINEL_PASSWORD", "given")  # wins over the file
    given = RedisSettings().sentinel_password
    assert given is not None
    assert given.get_secret_value() == "given"


def test_an_unreadable_sentinel_password_file_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(
        ValidationError, match=r"cannot read the Redis Sentinel password file .*absent"
    ):
        RedisSettings(
            sentinels="s:26379",  # type: ignore[arg-type]
            sentinel_master="m",
            sentinel_password_file=tmp_path / "absent",
        )


def test_sentinels_and_the_master_name_come_together() -> None:
    with pytest.raises(ValidationError, match="TICKWORK_REDIS_SENTINEL_MASTER is not"):
        RedisSettings(sentinels="s:26379")  # type: ignore[arg-type]
    with pytest.raises(ValidationError, match="TICKWORK_REDIS_SENTINELS is not"):
        RedisSettings(sentinel_master="mymaster")
    with pytest.raises(ValidationError, match="TICKWORK_REDIS_SENTINEL_MASTER is not"):
        RedisSettings(sentinels="s:26379", sentinel_master="")  # type: ignore[arg-type]


def test_empty_sentinel_settings_are_unset(monkeypatch: pytest.MonkeyPatch) -> None:
    """A chart may render every variable, the unused ones empty."""
    for name in (
        "SENTINELS",
        "SENTINEL_MASTER",
        "SENTINEL_USERNAME",
        "SENTINEL_PASSWORD",
        "SENTINEL_PASSWORD_FILE",
    ):
        monkeypatch.setenv(f"TICKWORK_REDIS_{name}", "")
    settings = RedisSettings()
    assert settings.sentinels == ()
    assert settings.sentinel_master is None
    assert settings.sentinel_username is None
    assert settings.sentinel_password is None
    assert settings.safe_url() == "redis://localhost:6379/0"


def test_pairs_given_in_code_are_accepted_too() -> None:
    settings = RedisSettings(sentinels=[("a", 1), "b:2,c"], sentinel_master="m")  # type: ignore[list-item]
    assert settings.sentinels == (("a", 1), ("b", 2), ("c", 26379))


@pytest.mark.parametrize(
    ("url", "tls", "expected"),
    [
        (
            "redis://:pw@ignored:6379/2",
            False,
            "redis+sentinel://s0:26379,[fd00::1]:26380/mymaster/2",
        ),
        (
            "rediss://:pw@ignored:6379/0",
            False,
            "rediss+sentinel://s0:26379,[fd00::1]:26380/mymaster/0",
        ),
        ("redis://app:pw@ignored", True, "rediss+sentinel://app@s0:26379,[fd00::1]:26380/mymaster"),
    ],
)
def test_the_safe_url_names_the_sentinels_and_the_master_set_never_a_password(
    url: str, tls: bool, expected: str
) -> None:
    settings = RedisSettings(
        url=url,
        tls=tls,
        sentinels="s0:26379,[fd00::1]:26380",  # type: ignore[arg-type]
        sentinel_master="mymaster",
        password="master-secret",
        sentinel_password="sentinel-secret",
    )
    assert settings.safe_url() == expected


SENTINEL_SETTINGS = {
    "url": "redis://:url-secret@ignored:6379/0",
    "sentinels": "s0:26379,s1:26379",
    "sentinel_master": "mymaster",
    "password": "master-secret",
    "sentinel_password": "sentinel-secret",
}


@pytest.mark.parametrize(
    ("error", "expected"),
    [
        (
            SentinelRefusedError("sentinel s0:26379 refused: invalid username-password pair"),
            (
                "Redis Sentinel at redis+sentinel://s0:26379,s1:26379/mymaster/0 refused the "
                "credentials (sentinel s0:26379 refused: invalid username-password pair): check "
                "TICKWORK_REDIS_SENTINEL_PASSWORD"
            ),
        ),
        (
            MasterNotFoundError("no sentinel named the master: s0:26379 monitors no master"),
            (
                "cannot find the Redis master at redis+sentinel://s0:26379,s1:26379/mymaster/0 "
                "(no sentinel named the master: s0:26379 monitors no master): are the sentinels "
                "running, and are TICKWORK_REDIS_SENTINELS and TICKWORK_REDIS_SENTINEL_MASTER "
                "right?"
            ),
        ),
        (
            RedisConnectionError("Error 111 connecting to 10.1.2.3:6379. Connection refused."),
            (
                "cannot reach the Redis master at redis+sentinel://s0:26379,s1:26379/mymaster/0 "
                "(Error 111 connecting to 10.1.2.3:6379. Connection refused.): is it running, "
                "and do the sentinels announce an address this process can reach?"
            ),
        ),
    ],
)
def test_errors_name_the_sentinel_set_and_what_to_check(error: Exception, expected: str) -> None:
    text = str(explain(error, RedisSettings(**SENTINEL_SETTINGS)))  # type: ignore[arg-type]
    assert text.startswith(expected)
    assert "secret" not in text


SHARED_OPTIONS = [
    "socket_connect_timeout",
    "socket_timeout",
    "decode_responses",
    "retry_on_error",
    "health_check_interval",
    "ssl_cert_reqs",
    "ssl_ca_certs",
]


@pytest.mark.asyncio
async def test_the_sentinel_client_keeps_the_retry_timeouts_and_tls_of_a_plain_one(
    tmp_path: Path,
) -> None:
    ca = tmp_path / "ca.crt"
    ca.write_text("")  # only its path is used until a connection is made
    settings = RedisSettings(
        **SENTINEL_SETTINGS,  # type: ignore[arg-type]
        sentinel_username="watcher",
        tls=True,
        tls_ca_file=ca,
        connect_timeout_seconds=2,
        socket_timeout_seconds=7,
        reconnect_attempts=5,
    )
    plain = create_client(settings.model_copy(update={"sentinels": (), "sentinel_master": None}))
    client = create_client(settings)
    try:
        pool = client.connection_pool
        assert isinstance(pool, SentinelConnectionPool)
        assert pool.service_name == "mymaster"
        master = pool.connection_kwargs
        for key in SHARED_OPTIONS:
            assert master[key] == plain.connection_pool.connection_kwargs[key], key
        assert type(master["retry"]) is type(plain.connection_pool.connection_kwargs["retry"])
        assert master["retry"].get_retries() == 5
        assert master["password"] == "url-secret"  # the URL's, as without sentinels
        assert issubclass(pool.connection_class, SentinelManagedConnection)
        assert issubclass(pool.connection_class, SSLConnection)

        (sentinel,) = pool.sentinel_manager.sentinels[:1]
        asked = sentinel.connection_pool.connection_kwargs
        assert (asked["username"], asked["password"]) == ("watcher", "sentinel-secret")
        assert asked["ssl_cert_reqs"] == ssl.CERT_REQUIRED
        assert asked["ssl_ca_certs"] == str(ca)
        assert (asked["socket_connect_timeout"], asked["socket_timeout"]) == (2, 7)
        assert asked["retry"].get_retries() == 0  # the next sentinel is asked instead
    finally:
        await client.aclose()
        await plain.aclose()

"""The queue promises Redis >= 6.2 but CI has one Redis (Debian's). This guards the
promise statically: every command the Lua scripts and the client send must exist
in Redis 6.2 (versions from the Redis command reference, "Available since")."""

from __future__ import annotations

import re
from pathlib import Path

from tickwork.queue import keys

#: Command -> the Redis version that introduced it (or the option form used here).
AVAILABLE_SINCE = {
    "BLPOP": "2.0.0",  # a float timeout since 6.0.0
    "DEL": "1.0.0",
    "HDEL": "2.0.0",
    "HEXISTS": "2.0.0",
    "HGET": "2.0.0",
    "HMGET": "2.0.0",
    "EXISTS": "3.0.3",  # several keys at once
    "HGETALL": "2.0.0",
    "HINCRBY": "2.0.0",
    "HVALS": "2.0.0",
    "HSET": "2.0.0",  # several field/value pairs since 4.0.0
    "INCR": "1.0.0",
    "INFO": "1.0.0",  # run_id in its server section since 2.4; random, like TIME
    "LINDEX": "1.0.0",
    "LLEN": "1.0.0",
    "LPUSH": "1.0.0",
    "LTRIM": "1.0.0",
    "RPOP": "1.0.0",
    "RPUSH": "1.0.0",  # several values since 2.4.0
    "SADD": "1.0.0",
    "SCARD": "1.0.0",
    "SISMEMBER": "1.0.0",
    "SREM": "1.0.0",
    "TIME": "2.6.0",
    "ZADD": "1.2.0",
    "ZCARD": "1.2.0",
    "ZRANGE": "1.2.0",
    "ZRANGEBYSCORE": "1.0.5",
    "ZREM": "1.2.0",
    "ZREMRANGEBYRANK": "2.0.0",
    "ZREMRANGEBYSCORE": "1.1.0",
    "ZREVRANGE": "1.2.0",
    "ZSCORE": "1.2.0",
    "MULTI": "1.2.0",
    "EXEC": "1.2.0",
    "EVALSHA": "2.6.0",
    "EVAL": "2.6.0",
}
QUEUE_SOURCE = Path(keys.__file__).with_name("redis_queue.py").read_text()


def version(text: str) -> tuple[int, ...]:
    return tuple(int(part) for part in text.split("."))


def scripts() -> dict[str, str]:
    return {
        name: value
        for name, value in vars(keys).items()
        if isinstance(value, str) and "redis.call(" in value
    }


def test_every_script_command_exists_in_redis_6_2() -> None:
    used = {
        match.upper()
        for script in scripts().values()
        for match in re.findall(r"redis\.call\(\s*['\"](\w+)['\"]", script)
    }
    assert len(scripts()) >= 10  # the scan found the scripts
    assert used, "no redis.call found: the scan is broken"
    unknown = used - AVAILABLE_SINCE.keys()
    assert not unknown, f"add these commands with their 'available since' version: {unknown}"
    assert all(version(AVAILABLE_SINCE[c]) <= (6, 2, 0) for c in used)


def test_every_client_command_exists_in_redis_6_2() -> None:
    used = {m.upper() for m in re.findall(r"(?:_client|pipe)\.(\w+)\(", QUEUE_SOURCE)}
    used -= {"PIPELINE", "EXECUTE", "ACLOSE"}  # client-side calls, not commands
    assert used, "no client call found: the scan is broken"
    unknown = used - AVAILABLE_SINCE.keys()
    assert not unknown, f"add these commands with their 'available since' version: {unknown}"
    assert all(version(AVAILABLE_SINCE[c]) <= (6, 2, 0) for c in used)


def test_no_script_uses_features_newer_than_6_2() -> None:
    for name, script in scripts().items():
        # Redis 7: functions, shebang flags in scripts, and 7.0-only commands.
        for newer in ("#!lua", "LMPOP", "ZMPOP", "BLMPOP", "SINTERCARD", "EXPIRETIME", "FUNCTION"):
            assert newer not in script, f"{name} uses {newer} (Redis 7)"

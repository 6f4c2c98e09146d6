"""An answer costs the worker a fixed amount of memory and work, whatever its
``Content-Encoding``: a few hundred bytes on the wire that decode to hundreds of
megabytes yield a 512-byte preview and nothing more (issue 46, item 1)."""

from __future__ import annotations

import asyncio
import gzip
import tracemalloc
import zlib
from collections.abc import AsyncIterator

import pytest

from tickwork_worker.tasks import replies
from tickwork_worker.tasks.replies import (
    PREVIEW_BYTES,
    UndecodableError,
    codings,
    decoded_prefix,
    printable,
)

pytestmark = pytest.mark.unit

TEXT = b"".join(b"line %d of the answer\n" % i for i in range(200))


def _deflate(data: bytes, *, raw: bool = False) -> bytes:
    encoder = zlib.compressobj(9, zlib.DEFLATED, -zlib.MAX_WBITS if raw else zlib.MAX_WBITS)
    return encoder.compress(data) + encoder.flush()


def _gzip_zeros(size: int) -> bytes:
    """``size`` zero bytes, gzipped, without holding them (a bomb's payload)."""
    encoder = zlib.compressobj(9, zlib.DEFLATED, 16 + zlib.MAX_WBITS)
    block = bytes(1024 * 1024)
    return b"".join(encoder.compress(block) for _ in range(size // len(block))) + encoder.flush()


async def _chunks(
    data: bytes, size: int = 65536, seen: list[int] | None = None
) -> AsyncIterator[bytes]:
    for start in range(0, len(data), size):
        if seen is not None:
            seen.append(start)
        yield data[start : start + size]


def _prefix(data: bytes, header: str, **chunking: object) -> bytes:
    steps = codings(header)
    assert isinstance(steps, list), steps
    return asyncio.run(decoded_prefix(_chunks(data, **chunking), steps))  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("header", "body"),
    [
        ("", TEXT),
        ("identity", TEXT),
        ("gzip", gzip.compress(TEXT)),
        ("x-gzip", gzip.compress(TEXT)),
        ("deflate", _deflate(TEXT)),
        ("deflate", _deflate(TEXT, raw=True)),  # the other thing servers send as deflate
        ("GZIP, deflate", _deflate(gzip.compress(TEXT))),
        ("gzip", gzip.compress(TEXT[:100]) + gzip.compress(TEXT[100:])),  # two members
    ],
)
def test_every_coding_a_server_may_send_yields_the_answers_first_bytes(
    header: str, body: bytes
) -> None:
    assert _prefix(body, header) == TEXT[:PREVIEW_BYTES]
    assert _prefix(body, header, size=7) == TEXT[:PREVIEW_BYTES]  # any chunking


@pytest.mark.parametrize(
    ("header", "why"),
    [
        ("br", "content coding 'br'"),
        ("gzip, zstd", "content coding 'zstd'"),
        ("gzip, gzip, gzip, gzip", "4 content codings"),
    ],
)
def test_codings_that_cannot_be_decoded_with_a_bound_are_not_decoded(header: str, why: str) -> None:
    assert codings(header) == why


def test_a_bomb_in_two_gzip_layers_costs_a_preview_not_its_size() -> None:
    # 200 MiB of zeros in two gzip layers: a few hundred bytes on the wire. httpx's own
    # decoder (aiter_bytes) turned its first chunk into the whole 200 MiB.
    bomb = gzip.compress(_gzip_zeros(200 * 1024 * 1024))
    assert len(bomb) < 1024
    tracemalloc.start()
    try:
        prefix = _prefix(bomb, "gzip, gzip")
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert prefix == bytes(PREVIEW_BYTES)
    assert peak < 2 * 1024 * 1024


def test_a_chain_whose_inner_step_yields_nothing_stops_at_the_work_bound(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Empty stored deflate blocks decode to nothing: a CPU bomb rather than a memory
    # one. Decoding stops at the work bound, long before the answer is read whole.
    monkeypatch.setattr(replies, "WORK_BYTES", 1024 * 1024)
    empty_blocks = b"\x00\x00\x00\xff\xff" * (2 * 1024 * 1024)
    body = gzip.compress(empty_blocks)
    seen: list[int] = []
    assert _prefix(body, "deflate, gzip", size=1024, seen=seen) == b""
    assert len(seen) < len(body) // 1024 / 2


def test_no_more_than_the_raw_bound_is_read_off_the_wire() -> None:
    # An answer that decodes to nothing visible keeps no one reading it forever.
    seen: list[int] = []
    assert _prefix(b"", "") == b""
    body = _deflate(b"") * 100_000  # valid, then trailing data that is not read
    _prefix(body, "deflate", size=1024, seen=seen)
    assert len(seen) * 1024 <= replies.RAW_BYTES + 1024


@pytest.mark.parametrize("header", ["gzip", "deflate"])
def test_an_answer_not_in_its_coding_says_so(header: str) -> None:
    with pytest.raises(UndecodableError, match=header):
        _prefix(b"this is not compressed at all " * 10, header)


@pytest.mark.parametrize(
    ("text", "shown"),
    [("a\x00b\x1bc\x7f", "a\ufffdb\ufffdc\ufffd"), ("tab\there\nline\r\n", "tab\there\nline\r\n")],
)
def test_control_characters_are_shown_as_replacement_characters(text: str, shown: str) -> None:
    assert printable(text) == shown

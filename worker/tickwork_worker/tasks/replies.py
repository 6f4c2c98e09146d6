"""What an ``http`` task reads of an answer: a few hundred bytes, after decoding.

A tenant chooses the server its job calls, so the answer is hostile input. The
worker asks for ``Accept-Encoding: identity``, but a server may send any
``Content-Encoding`` anyway, and a chain of them (``gzip, gzip``) turns a reply of
a few hundred bytes into hundreds of megabytes when a library decodes each chunk
whole. Here every decoding step yields at most :data:`PREVIEW_BYTES` at a time,
at most :data:`RAW_BYTES` are taken off the wire, and the rest of the answer is
never read: whatever the encoding, one answer costs the worker a fixed amount of
memory. Codings that cannot be decoded with a bound (``br``, ``zstd``, anything
unknown) are not decoded; the preview says so.
"""

from __future__ import annotations

import zlib
from collections.abc import AsyncIterator

PREVIEW_BYTES = 512
"""Decoded bytes kept for the preview in status."""
RAW_BYTES = 256 * 1024
"""Bytes taken off the wire at most, whatever they decode to."""
WORK_BYTES = 8 * 1024 * 1024
"""Bytes decoded at most, by every step together: a chain whose inner steps yield
nothing (empty deflate blocks) costs CPU, not memory, and this bounds that too."""
_MAX_CODINGS = 3
"""Longer chains are not decoded (no server needs them; a bomb does)."""
_ZLIB_CODINGS = {
    "gzip": 16 + zlib.MAX_WBITS,
    "x-gzip": 16 + zlib.MAX_WBITS,
    "deflate": zlib.MAX_WBITS,
}


class UndecodableError(Exception):
    """The answer is not in the content coding it names."""


class _Inflate:
    """One zlib-family decoding step that never yields more than it is asked for.
    ``deflate`` may be zlib-wrapped or raw (both are sent as "deflate")."""

    def __init__(self, coding: str) -> None:
        self._wbits = _ZLIB_CODINGS[coding]
        self._raw_fallback = coding == "deflate"
        self._members = coding != "deflate"
        self._decoder = zlib.decompressobj(self._wbits)
        self._started = False

    def pull(self, data: bytes, room: int) -> bytes:
        """Decode ``data`` (after what an earlier call left), at most ``room`` bytes;
        the input not yet decoded stays here for the next call."""
        pending = self._decoder.unconsumed_tail + data
        if not self._started and self._raw_fallback and pending:
            self._started = True
            try:
                return self._decoder.decompress(pending, room)
            except zlib.error:
                self._decoder = zlib.decompressobj(-zlib.MAX_WBITS)
        self._started = True
        out = self._decoder.decompress(pending, room)
        while self._members and self._decoder.eof and self._decoder.unused_data and len(out) < room:
            # Concatenated gzip members are one body; each member yields at most room.
            rest = self._decoder.unused_data
            self._decoder = zlib.decompressobj(self._wbits)
            out += self._decoder.decompress(rest, room - len(out))
        return out

    @property
    def backlog(self) -> bool:
        """Input is waiting that an earlier call had no room for."""
        return bool(self._decoder.unconsumed_tail)


def codings(header: str | None) -> list[str] | str:
    """The decoding steps for a ``Content-Encoding`` value, outermost first, or why
    the body is not decoded."""
    names = [name.strip().lower() for name in (header or "").split(",")]
    names = [name for name in names if name and name != "identity"]
    if len(names) > _MAX_CODINGS:
        return f"{len(names)} content codings"
    unknown = [name for name in names if name not in _ZLIB_CODINGS]
    if unknown:
        return f"content coding {unknown[0]!r}"
    return names[::-1]  # the last coding applied is the first to undo


async def decoded_prefix(chunks: AsyncIterator[bytes], coding_names: list[str]) -> bytes:
    """The first :data:`PREVIEW_BYTES` of the body that ``chunks`` (raw bytes off the
    wire) carry in ``coding_names``. Reads no more than :data:`RAW_BYTES`, decodes no
    more than :data:`WORK_BYTES` in all steps together, and no step holds more than
    what it was given plus :data:`PREVIEW_BYTES` of output."""
    steps = [_Inflate(name) for name in coding_names]
    taken = bytearray()
    try:
        await _decode(chunks, steps, taken)
    except zlib.error:
        raise UndecodableError(" ".join(coding_names)) from None
    return bytes(taken[:PREVIEW_BYTES])


async def _decode(chunks: AsyncIterator[bytes], steps: list[_Inflate], taken: bytearray) -> None:
    read = worked = 0
    async for chunk in chunks:
        read += len(chunk)
        data = chunk
        while len(taken) < PREVIEW_BYTES and worked < WORK_BYTES:
            room = PREVIEW_BYTES - len(taken)
            for step in steps:
                data = step.pull(data, room)
                worked += len(data)
            taken += data
            data = b""
            if not any(step.backlog for step in steps):
                break
        if len(taken) >= PREVIEW_BYTES or read >= RAW_BYTES or worked >= WORK_BYTES:
            return


_UNPRINTABLE = dict.fromkeys([*range(0x20), 0x7F], "\ufffd")
for _kept in "\t\n\r":
    del _UNPRINTABLE[ord(_kept)]


def printable(text: str) -> str:
    """``text`` with control characters (NUL and the like, but tabs and line breaks)
    shown as U+FFFD, as a terminal could not show them."""
    return text.translate(_UNPRINTABLE)

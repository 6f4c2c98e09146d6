"""Every text Tickwork passes on from a task or a user — results, errors, Event
messages, dead-letter reasons, log lines — is capped here, before it reaches a
model with a length limit (a ValidationError there once made a finished run
execute again)."""

from __future__ import annotations

#: The longest result or error text kept in status, Events and dead letters
#: (the models' limit for them).
TEXT_LIMIT = 1024
#: The same for the records in a job's history (``status.runs``): up to 40 of them
#: are kept, in every worker's copy of every job; ``lastRun`` keeps TEXT_LIMIT.
HISTORY_TEXT_LIMIT = 256
_MARKER = "… [truncated]"


def cap(text: str, limit: int = TEXT_LIMIT) -> str:
    """``text`` cut to at most ``limit`` characters, marked when it was cut."""
    if len(text) <= limit:
        return text
    if limit <= len(_MARKER):
        return text[:limit]
    return text[: limit - len(_MARKER)] + _MARKER


def cap_optional(text: str | None, limit: int = TEXT_LIMIT) -> str | None:
    return None if text is None else cap(text, limit)

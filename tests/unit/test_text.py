"""Capping texts that reach status, Events and dead letters."""

from __future__ import annotations

import pytest

from tickwork.core.text import TEXT_LIMIT, cap, cap_optional


@pytest.mark.parametrize(
    ("text", "limit", "expected"),
    [
        ("short", 10, "short"),
        ("x" * 10, 10, "x" * 10),  # exactly at the limit: untouched
        ("x" * 30, 20, "xxxxxxx… [truncated]"),  # cut, marked, exactly the limit long
        ("abcdef", 3, "abc"),  # a limit shorter than the marker: a plain cut
    ],
)
def test_cap_keeps_texts_within_the_limit_and_marks_a_cut(
    text: str, limit: int, expected: str
) -> None:
    assert cap(text, limit) == expected
    assert len(cap(text, limit)) <= limit


def test_the_default_limit_is_what_status_holds() -> None:
    assert len(cap("y" * 5000)) == TEXT_LIMIT == 1024
    assert cap_optional(None) is None

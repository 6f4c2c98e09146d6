"""What leaves a run as text carries no credentials: URLs lose their user, password
and query; values read from Secrets are replaced wherever they show up."""

from __future__ import annotations

import asyncio
import base64
import html
import json
import urllib.parse
from typing import Any

import pytest

from tickwork.api.models import SecretKeyRef
from tickwork_worker.tasks.http import redact_url
from tickwork_worker.tasks.secrets import REDACTED, SecretValues

pytestmark = pytest.mark.unit


@pytest.mark.parametrize(
    ("url", "shown"),
    [
        ("https://user:pa55@example.com/hook?token=abc&x=1", "https://***@example.com/hook?…"),
        ("https://example.com/hook?sig=s3cr3t", "https://example.com/hook?…"),
        ("http://example.com:8080/a/b#frag", "http://example.com:8080/a/b"),
        ("https://example.com/", "https://example.com/"),
    ],
)
def test_urls_in_messages_keep_no_credentials(url: str, shown: str) -> None:
    assert redact_url(url) == shown


class _Kube:
    """Answers get_secret from a dict; the integration tests use the real API server."""

    def __init__(self, data: dict[str, str]) -> None:
        self.reads = 0
        self.data = {k: base64.b64encode(v.encode()).decode() for k, v in data.items()}

    async def get_secret(self, namespace: str, name: str) -> dict[str, Any]:
        self.reads += 1
        return {"metadata": {"namespace": namespace, "name": name}, "data": self.data}


def test_values_read_are_redacted_from_any_text_and_read_once_per_attempt() -> None:
    kube = _Kube({"token": "tok-123456", "short": "ab"})
    values = SecretValues(kube, "team-a")  # type: ignore[arg-type]

    async def read() -> list[str]:
        return [
            await values.read(SecretKeyRef(name="api", key=key))
            for key in ("token", "short", "token")
        ]

    assert asyncio.run(read()) == ["tok-123456", "ab", "tok-123456"]
    assert kube.reads == 1  # one GET per Secret and attempt
    assert values.redact("401: bad token tok-123456 (tok-123456)") == (
        f"401: bad token {REDACTED} ({REDACTED})"
    )
    assert values.redact("about a b c") == "about a b c"  # too short to look for
    assert values.redact(None) is None


TOKEN = "s3cr3t-t0ken/with+odd&chars'\"é"


def _read(value: str) -> SecretValues:
    values = SecretValues(_Kube({"token": value}), "team-a")  # type: ignore[arg-type]
    asyncio.run(values.read(SecretKeyRef(name="api", key="token")))
    return values


@pytest.mark.parametrize(
    "shown",
    [
        TOKEN,
        repr(TOKEN),  # a library's message
        repr(TOKEN.encode()),  # httpx/h11: Illegal header value b'...'
        repr((TOKEN + "\n").encode()),  # the file's newline kept, then escaped
        json.dumps(TOKEN),
        json.dumps(TOKEN, ensure_ascii=False),
        urllib.parse.quote(TOKEN, safe=""),
        urllib.parse.quote(TOKEN, safe="").lower(),
        urllib.parse.quote_plus(TOKEN),
        html.escape(TOKEN),
    ],
)
def test_a_value_is_redacted_in_every_form_a_library_prints_it(shown: str) -> None:
    for value in (TOKEN, TOKEN + "\n", f"  {TOKEN}\r\n"):  # --from-file keeps the newline
        text = _read(value).redact(f"failed: {shown} (attempt 1)")
        assert text is not None
        assert "s3cr3t" not in text
        assert "t0ken" not in text
        assert REDACTED in text


def test_each_line_of_a_value_over_several_lines_is_redacted() -> None:
    key = (
        "-----BEGIN KEY-----\nMIIEvQIBADANBgkqhkiG9w0BAQEFAASC\nBKcwggSjAgEAAoIBAQC7\n"
        "-----END KEY-----\n"
    )
    values = _read(key)
    text = values.redact(
        "line 2 was MIIEvQIBADANBgkqhkiG9w0BAQEFAASC and line 3 BKcwggSjAgEAAoIBAQC7"
    )
    assert text == f"line 2 was {REDACTED} and line 3 {REDACTED}"


@pytest.mark.parametrize(
    ("text", "edges", "shown"),
    [
        ("answer: abc s3cr3t-t0", {"end": True}, f"answer: abc {REDACTED}"),
        ("0ken/with+odd&chars'\"é and more", {"start": True}, f"{REDACTED} and more"),
        ("answer: s3cr3", {"end": True}, "answer: s3cr3"),  # 5 characters tell little
        ("answer: abc s3cr3t-t0", {"start": True}, "answer: abc s3cr3t-t0"),  # not cut there
    ],
)
def test_a_piece_of_a_value_at_a_cut_is_taken_out(
    text: str, edges: dict[str, bool], shown: str
) -> None:
    assert _read(TOKEN).redact_edges(text, **edges) == shown


def test_a_whole_secret_is_taken_in_for_redaction_and_a_binary_one_is_said() -> None:
    """envFrom and secret volumes hand a container every value of a Secret: every value
    is looked for in its log; a value that is not text cannot be, so the container
    task keeps no log then."""
    kube = _Kube({"user": "report-user", "password": "pa55-word-x"})
    values = SecretValues(kube, "team-a")  # type: ignore[arg-type]
    assert asyncio.run(values.read_whole("db")) is True
    assert values.redact("login report-user / pa55-word-x") == f"login {REDACTED} / {REDACTED}"
    binary = _Kube({"text": "some-text-value"})
    binary.data["key.der"] = base64.b64encode(b"\x30\x82\xff\xfe").decode()
    values = SecretValues(binary, "team-a")  # type: ignore[arg-type]
    assert asyncio.run(values.read_whole("tls")) is False
    assert values.redact("some-text-value") == REDACTED  # the text ones still go

"""What leaves a run as text carries no credentials: URLs lose their user, password
and query; values read from Secrets are replaced wherever they show up."""

from __future__ import annotations

import asyncio
import base64
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
        return [await values.read(SecretKeyRef(name="api", key=key))
                for key in ("token", "short", "token")]  # fmt: skip

    assert asyncio.run(read()) == ["tok-123456", "ab", "tok-123456"]
    assert kube.reads == 1  # one GET per Secret and attempt
    assert values.redact("401: bad token tok-123456 (tok-123456)") == (
        f"401: bad token {REDACTED} ({REDACTED})"
    )
    assert values.redact("about a b c") == "about a b c"  # too short to look for
    assert values.redact(None) is None

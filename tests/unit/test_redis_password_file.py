"""The Redis password can come from a file (as the chart mounts it), so that it is in
no process's environment."""

from __future__ import annotations

from pathlib import Path

import pytest
from pydantic import ValidationError

from tickwork.queue.settings import RedisSettings

pytestmark = pytest.mark.unit


def test_the_password_is_read_from_the_file(tmp_path: Path) -> None:
    path = tmp_path / "password"
    path.write_text("s3cret-from-a-file\n")  # as a Secret with a trailing newline
    settings = RedisSettings(password_file=path)
    assert settings.password is not None
    assert settings.password.get_secret_value() == "s3cret-from-a-file"
    assert "s3cret" not in repr(settings)


def test_an_explicit_password_wins_and_a_missing_file_is_a_clear_error(tmp_path: Path) -> None:
    explicit = RedisSettings(password="given", password_file=tmp_path / "absent")
    assert explicit.password is not None
    assert explicit.password.get_secret_value() == "given"
    with pytest.raises(ValidationError, match=r"cannot read the Redis password file .*absent"):
        RedisSettings(password_file=tmp_path / "absent")

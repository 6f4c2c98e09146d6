"""kopf runs the operator's process (signals, start and clean-up, the login) through its
public API only: no resource handler is registered, so kopf lists, watches and writes
nothing; it posts no Events and scans no CRDs or namespaces; its clean-up stops
Tickwork's own loops at once; and no module anywhere imports a private kopf module."""

from __future__ import annotations

import ast
import asyncio
from pathlib import Path

import kopf
import pytest

from tickwork_operator import handlers
from tickwork_operator.handlers import kopf_settings, stopping

pytestmark = pytest.mark.unit
ROOT = Path(__file__).resolve().parents[2]


def test_kopf_posts_scans_and_peers_nothing() -> None:
    settings = kopf_settings()
    assert not settings.posting.enabled
    assert settings.scanning.disabled
    assert settings.peering.standalone


def test_no_resource_handler_is_registered() -> None:
    source = Path(handlers.__file__).read_text()
    decorators = {
        ast.unparse(decorator.func if isinstance(decorator, ast.Call) else decorator)
        for node in ast.walk(ast.parse(source))
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)
        for decorator in node.decorator_list
    }
    assert decorators == {"kopf.on.login", "kopf.on.cleanup"}


@pytest.mark.asyncio
async def test_kopf_stopping_stops_tickworks_own_loops_at_once() -> None:
    """kopf waits up to 5 s for every task started after it (the ticker's waits among
    them) before it returns: its clean-up sets the operator's stop event."""
    stop = asyncio.Event()
    await stopping(memo=kopf.Memo(stop=stop))
    assert stop.is_set()
    await stopping(memo=kopf.Memo())  # a memo without one: nothing to do


def private_kopf_imports(path: Path) -> list[str]:
    found = []
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        names = []
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module:
            names = [node.module] + [f"{node.module}.{alias.name}" for alias in node.names]
        found += [
            f"{path.name}:{node.lineno}: {name}"
            for name in names
            if name.split(".")[0] == "kopf"
            and any(part.startswith("_") for part in name.split(".")[1:])
        ]
    return found


def test_no_module_imports_a_private_kopf_module() -> None:
    roots = ["operator", "worker", "tickwork", "dev", "tests", "benchmarks"]
    files = [path for root in roots for path in (ROOT / root).rglob("*.py")]
    assert len(files) > 100
    assert [hit for path in files for hit in private_kopf_imports(path)] == []


def test_the_guard_finds_a_private_import(tmp_path: Path) -> None:
    sample = tmp_path / "sample.py"
    sample.write_text(
        "from kopf._cogs.clients import watching\nimport kopf._core\n"
        "from kopf import _core\nimport kopf\n"
    )
    assert [hit.split(": ")[1] for hit in private_kopf_imports(sample)] == [
        "kopf._cogs.clients",
        "kopf._cogs.clients.watching",
        "kopf._core",
        "kopf._core",
    ]

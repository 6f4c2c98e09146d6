"""Attack: "a huge or endless answer costs nothing" (docs/security.md), by a tenant
who points a job at a server of their own. A reply of a few hundred bytes in
``Content-Encoding: gzip, gzip`` decodes to 200 MiB; on the code before issue 46 a
worker decoded its first chunk whole and grew by ~400 MiB — over a worker Pod's
512 Mi limit, killing every other tenant's runs on it. Real worker process, real API
server and Redis; the worker's peak RSS (``VmHWM``) is read from /proc.
"""

from __future__ import annotations

import gzip
import zlib
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.support import Jobs, QueueProbe, ScriptedServer, finished, publish
from tickwork.queue.messages import RunLocation
from tickwork_dev.devcluster.components import TickworkProcess

pytestmark = pytest.mark.timeout(120)
Start = Callable[..., TickworkProcess]
_MIB = 1024 * 1024


def _bomb(size: int) -> bytes:
    """``size`` zero bytes in two gzip layers, made without holding them."""
    encoder = zlib.compressobj(9, zlib.DEFLATED, 16 + zlib.MAX_WBITS)
    block = bytes(_MIB)
    inner = b"".join(encoder.compress(block) for _ in range(size // _MIB)) + encoder.flush()
    return gzip.compress(inner)


def _peak_rss(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) * 1024
    raise AssertionError("no VmHWM")


def test_a_reply_that_decodes_to_200_mib_costs_the_worker_a_preview(
    start_worker: Start, jobs: Jobs, probe: QueueProbe, endpoint: ScriptedServer
) -> None:
    endpoint.body = _bomb(200 * _MIB)
    endpoint.headers = {"Content-Encoding": "gzip, gzip"}
    assert len(endpoint.body) < 1024
    # With previews, as an installer may ask: on the defaults the answer is not read.
    worker = start_worker(TICKWORK_WORKER_PREVIEWS="true")
    # A first run warms the worker (imports, connection pools) before the peak is read.
    publish(jobs, probe, "warm", {"task": {"echo": {"message": "warm"}}})
    finished(jobs, "warm")
    before = _peak_rss(worker.pid)

    _, run_id = publish(jobs, probe, "bomb", {"task": {"http": {"url": endpoint.url}}})
    last = finished(jobs, "bomb")["lastRun"]

    grown = _peak_rss(worker.pid) - before
    assert grown < 32 * _MIB, f"the worker's peak RSS grew by {grown / _MIB:.0f} MiB"
    assert worker.running
    assert isinstance(last, dict)
    assert (last["id"], last["outcome"], last["attempts"]) == (run_id, "Succeeded", 1)
    # 512 decoded bytes, NULs shown as replacement characters.
    assert last["result"] == "HTTP 200: " + "\ufffd" * 512
    assert probe.locate(run_id) is RunLocation.DONE


def test_a_coding_that_cannot_be_decoded_with_a_bound_is_not_decoded(
    start_worker: Start, jobs: Jobs, probe: QueueProbe, endpoint: ScriptedServer
) -> None:
    endpoint.body = b"\x8b\x00\x80\x00" * 64  # whatever it is, it is not looked into
    endpoint.headers = {"Content-Encoding": "br"}
    start_worker(TICKWORK_WORKER_PREVIEWS="true")
    publish(jobs, probe, "brotli", {"task": {"http": {"url": endpoint.url}}})
    last = finished(jobs, "brotli")["lastRun"]
    assert isinstance(last, dict)
    assert last["outcome"] == "Succeeded"
    assert last["result"] == "HTTP 200: [answer not decoded: content coding 'br']"

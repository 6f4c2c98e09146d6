"""kopf's per-object memories, trimmed to what the operator's handlers use: one memo
for every object (not a copy each), and one shared empty record for daemons and
indexes, which the operator does not have (and refuses to run beside)."""

from __future__ import annotations

import asyncio
import copy
import sys
from typing import Any

import kopf
import pytest
from kopf._core.reactor import inventory

from tickwork_operator.handlers import LeanMemories, SharedMemo, check_lean, registry

pytestmark = [pytest.mark.unit, pytest.mark.asyncio]


def job(uid: str) -> dict[str, Any]:
    return {"metadata": {"namespace": "ns", "name": f"j-{uid}", "uid": uid}}


async def test_every_object_gets_the_operators_memo_itself() -> None:
    memo = SharedMemo(state="the state", ticker="the ticker")
    assert copy.copy(memo) is memo
    memories = LeanMemories()
    first = await memories.recall(job("a"), memobase=memo, noticed_by_listing=True)
    second = await memories.recall(job("b"), memobase=memo)
    assert first.memo is memo
    assert second.memo is memo
    assert first.noticed_by_listing
    assert not second.noticed_by_listing
    assert await memories.recall(job("a"), memobase=memo) is first


async def test_objects_share_one_empty_daemons_and_indexing_record() -> None:
    lean, plain = LeanMemories(), inventory.ResourceMemories()
    memo = SharedMemo()
    leans = [await lean.recall(job(u), memobase=memo) for u in ("a", "b")]
    plains = [await plain.recall(job(u), memobase=kopf.Memo()) for u in ("a", "b")]
    assert leans[0].daemons_memory is leans[1].daemons_memory
    assert leans[0].indexing_memory is leans[1].indexing_memory
    assert plains[0].daemons_memory is not plains[1].daemons_memory
    # What a plain memory holds of its own that a lean one does not: ~400 bytes a job.
    own = plains[1].daemons_memory
    saved = sum(sys.getsizeof(part) for part in (
        own, own.forever_stopped, own.running_daemons, plains[1].indexing_memory))  # fmt: skip
    assert saved >= 300
    # Still a per-object error throttler: one object's failing handler throttles it alone.
    assert leans[0].error_throttler is not leans[1].error_throttler


async def test_the_operator_refuses_shared_records_beside_a_daemon_or_an_index() -> None:
    check_lean(registry)  # the operator's own registry: event handlers only
    with_daemon = kopf.OperatorRegistry()

    @kopf.daemon("example.com", "v1", "things", registry=with_daemon)
    async def watch(**_: Any) -> None: ...

    with pytest.raises(RuntimeError, match="daemon, timer or index"):
        check_lean(with_daemon)
    with_index = kopf.OperatorRegistry()

    @kopf.index("example.com", "v1", "things", registry=with_index)
    def by_name(**_: Any) -> Any: ...

    with pytest.raises(RuntimeError, match="daemon, timer or index"):
        check_lean(with_index)


async def test_kopf_stopping_stops_tickworks_own_loops_at_once() -> None:
    """kopf's cleanup activity sets the operator's stop event: kopf waits up to 5 s for
    every task started after it (the ticker's waits among them) before it returns."""
    from kopf._core.intents.causes import Activity  # noqa: PLC0415

    from tickwork_operator.handlers import stopping  # noqa: PLC0415

    assert stopping in [h.fn for h in registry._activities.get_handlers(Activity.CLEANUP)]
    stop = asyncio.Event()
    await stopping(memo=SharedMemo(state=None, ticker=None, stop=stop))
    assert stop.is_set()
    await stopping(memo=SharedMemo())  # a memo without one: nothing to do

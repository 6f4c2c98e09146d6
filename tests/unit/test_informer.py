"""The one list-and-watch both the operator and the workers follow: pages handed over
as they arrive (the next one asked for ahead, if so set), a watch from the list's
version with bookmarks, a resumed watch where it ended, a list again after 410 Gone
(and, if so set, after any failure), backoff that grows with failures in a row, one
object that cannot be taken logged while the stream goes on, and the event loop free
between blocks of objects."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator
from typing import Any, cast

import pytest

from tickwork.kube import informer as informer_module
from tickwork.kube.client import KubeApiError, KubeClient
from tickwork.kube.informer import Informer, InformerSettings, Scope

pytestmark = pytest.mark.unit


Script = list[Any]
"""What one request answers, in order: for a list, its pages (lists of objects) or an
exception in place of a page; for a watch, its events or an exception."""


def job(number: int, version: str = "") -> dict[str, Any]:
    return {
        "metadata": {
            "namespace": "team-a",
            "name": f"job-{number}",
            "resourceVersion": version,
            "managedFields": [{"manager": "kubectl"}],
        },
        "n": number,
    }


def event(kind: str, number: int, version: str) -> dict[str, Any]:
    return {"type": kind, "object": job(number, version)}


def bookmark(version: str) -> dict[str, Any]:
    return {"type": "BOOKMARK", "object": {"metadata": {"resourceVersion": version}}}


class FakeKube:
    """Answers lists and watches from scripts, noting every request in ``trail``; once
    the scripts run out, a watch waits for ever (``idle`` is set)."""

    def __init__(
        self, lists: list[Script], watches: list[Script], trail: list[str], scopes: int = 1
    ) -> None:
        self.lists, self.watches, self.trail, self.scopes = lists, watches, trail, scopes
        self.idled = 0
        self.pages: dict[str, Script] = {}
        self.version = 0
        self.idle = asyncio.Event()

    async def request(self, method: str, path: str, *, params: dict[str, str]) -> dict[str, Any]:
        assert method == "GET"
        if "continue" not in params:
            self.pages[path] = list(self.lists.pop(0))
            self.version += 100
        version = self.version
        self.trail.append(f"GET page {params.get('continue', '0')} of {path} ({params['limit']})")
        await asyncio.sleep(0)  # the answer arrives later than asked
        pages = self.pages[path]
        page = pages.pop(0)
        if isinstance(page, Exception):
            raise page
        more = {"continue": str(int(params.get("continue", "0")) + 1)} if pages else {}
        return {"items": page, "metadata": {"resourceVersion": str(version), **more}}

    async def watch(
        self, path: str, params: dict[str, str], *, idle_timeout: float
    ) -> AsyncIterator[dict[str, Any]]:
        assert params["allowWatchBookmarks"] == "true"
        assert idle_timeout > 0
        self.trail.append(f"WATCH {path} from {params['resourceVersion']}")
        if not self.watches:
            self.idled += 1
            if self.idled == self.scopes:
                self.idle.set()
            await asyncio.Event().wait()
        for item in self.watches.pop(0):
            if isinstance(item, Exception):
                raise item
            yield item


class Recorder:
    """A subscriber that notes everything in ``trail``."""

    def __init__(self, trail: list[str]) -> None:
        self.trail = trail
        self.objects: list[dict[str, Any]] = []

    def listing(self, scope: Scope) -> Recorder:
        self.trail.append(f"listing {scope}")
        return self

    def add(self, obj: dict[str, Any]) -> None:
        self.objects.append(obj)
        self.trail.append(f"add {obj['n']}")

    def end(self) -> None:
        self.trail.append("end")

    def event(self, scope: Scope, kind: str, obj: dict[str, Any]) -> None:
        del scope
        self.objects.append(obj)
        self.trail.append(f"{kind} {obj['n']}")

    def reached(self, scope: Scope, version: str) -> None:
        del scope
        self.trail.append(f"reached {version}")

    def live(self, scope: Scope) -> None:
        self.trail.append(f"live {scope}")

    def lost(self, scope: Scope) -> None:
        self.trail.append(f"lost {scope}")


#: A list again that brings job 1 in one page, then the watch from its version, until
#: the test ends it.
LISTED_AGAIN = [
    "listing None",
    "GET page 0 of /all/scheduledjobs (500)",
    "add 1",
    "end",
    "live None",
    "WATCH /all/scheduledjobs from 200",
    "lost None",
]


def path(scope: Scope) -> str:
    return f"/{scope or 'all'}/scheduledjobs"


async def follow(
    lists: list[Script],
    watches: list[Script],
    settings: InformerSettings,
    *,
    subscriber: Recorder | None = None,
    scopes: list[Scope] | None = None,
) -> tuple[list[str], list[float], Recorder]:
    """Run an informer over the scripts until they run out; what happened, the waits
    it slept, and the subscriber."""
    trail: list[str] = []
    kube = FakeKube(lists, watches, trail, len(scopes or [None]))
    recorder = subscriber or Recorder(trail)
    recorder.trail = trail
    slept: list[float] = []

    async def sleep(seconds: float) -> None:
        slept.append(seconds)
        trail.append(f"sleep {seconds}")
        await asyncio.sleep(0)

    informer = Informer(
        cast("KubeClient", kube), path, scopes or [None], recorder, settings, sleep=sleep
    )
    task = asyncio.create_task(informer.run())
    await asyncio.wait_for(kube.idle.wait(), 60)  # a hang, not a speed
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    return trail, slept, recorder


@pytest.mark.asyncio
async def test_a_list_comes_in_pages_handed_over_as_they_arrive_then_the_watch_follows() -> None:
    trail, slept, recorder = await follow(
        [[[job(1), job(2)], [job(3)]]],
        [
            [
                event("ADDED", 4, "101"),
                bookmark("102"),
                event("MODIFIED", 4, "103"),
                event("DELETED", 1, "104"),
            ]
        ],
        InformerSettings(page_size=2),
    )
    assert trail == [
        "listing None",
        "GET page 0 of /all/scheduledjobs (2)",
        "add 1",
        "add 2",
        "GET page 1 of /all/scheduledjobs (2)",
        "add 3",
        "end",
        "live None",
        "WATCH /all/scheduledjobs from 100",
        "ADDED 4",
        "reached 101",
        "reached 102",
        "MODIFIED 4",
        "reached 103",
        "DELETED 1",
        "reached 104",
        "live None",
        "WATCH /all/scheduledjobs from 104",  # ended by the server: resumed
        "lost None",  # cancelled
    ]
    assert slept == []
    # Nobody reads managedFields: they do not reach the subscriber.
    assert all("managedFields" not in obj["metadata"] for obj in recorder.objects)


@pytest.mark.asyncio
async def test_with_fetch_ahead_the_next_page_is_asked_for_before_the_last_is_taken() -> None:
    trail, _, _ = await follow(
        [[[job(1)], [job(2)], [job(3)]]], [], InformerSettings(page_size=1, fetch_ahead=True)
    )
    asked = [line for line in trail if line.startswith(("GET", "add"))]
    assert asked == [
        "GET page 0 of /all/scheduledjobs (1)",
        "GET page 1 of /all/scheduledjobs (1)",
        "add 1",
        "GET page 2 of /all/scheduledjobs (1)",
        "add 2",
        "add 3",
    ]


@pytest.mark.asyncio
@pytest.mark.parametrize("ahead", [False, True])
async def test_a_list_that_breaks_off_is_not_taken_for_whole_and_is_listed_again(
    ahead: bool,
) -> None:
    broken = [[job(1)], KubeApiError(500, "InternalError", "etcd away")]
    trail, slept, _ = await follow(
        [broken, [[job(1)], [job(2)]]], [], InformerSettings(page_size=1, fetch_ahead=ahead)
    )
    get = [f"GET page {n} of /all/scheduledjobs (1)" for n in range(2)]
    if ahead:  # each next page is asked for before the last is taken
        broken_list, whole_list = [*get, "add 1"], [*get, "add 1", "add 2"]
    else:
        broken_list, whole_list = [get[0], "add 1", get[1]], [get[0], "add 1", get[1], "add 2"]
    assert trail == [
        "listing None",
        *broken_list,
        "lost None",  # no end: not taken as whole
        "sleep 0.5",
        "listing None",
        *whole_list,
        "end",
        "live None",
        "WATCH /all/scheduledjobs from 200",
        "lost None",
    ]
    assert slept == [0.5]


@pytest.mark.asyncio
async def test_what_a_whole_list_left_is_settled_before_the_watch_and_a_broken_one_is_not(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Settled: collected once, then frozen out of the collector's full passes
    (tickwork.heap.settle), so that a large index does not stall every full pass."""
    recorder = Recorder([])
    monkeypatch.setattr(
        informer_module, "settle", lambda reason: recorder.trail.append(f"settle {reason}")
    )
    broken = [[job(1)], KubeApiError(500, "InternalError", "etcd away")]
    trail, _, _ = await follow(
        [broken, [[job(1)], [job(2)]]], [], InformerSettings(page_size=1), subscriber=recorder
    )
    get = [f"GET page {n} of /all/scheduledjobs (1)" for n in range(2)]
    assert trail == [
        "listing None",
        get[0],
        "add 1",
        get[1],
        "lost None",  # broken off: nothing settled
        "sleep 0.5",
        "listing None",
        get[0],
        "add 1",
        get[1],
        "add 2",
        "end",
        "settle the list of /all/scheduledjobs",
        "live None",
        "WATCH /all/scheduledjobs from 200",
        "lost None",
    ]


@pytest.mark.asyncio
async def test_410_gone_lists_again_at_once() -> None:
    gone = {"type": "ERROR", "object": {"code": 410, "reason": "Expired"}}
    trail, slept, _ = await follow(
        [[[job(1)]], [[job(1)]]],
        [[event("MODIFIED", 1, "101"), gone]],
        InformerSettings(relist_after_error=False),
    )
    assert trail[trail.index("reached 101") :] == [
        "reached 101",
        "lost None",
        *LISTED_AGAIN,
    ]
    assert slept == []


@pytest.mark.asyncio
async def test_after_a_failure_the_watch_resumes_or_lists_again_as_set() -> None:
    broken = KubeApiError(0, "Unavailable", "connection reset")
    trail, slept, _ = await follow(
        [[[job(1)]]], [[bookmark("150"), broken]], InformerSettings(relist_after_error=False)
    )
    assert trail[trail.index("WATCH /all/scheduledjobs from 100") :] == [
        "WATCH /all/scheduledjobs from 100",
        "reached 150",
        "lost None",
        "sleep 0.5",
        "live None",
        "WATCH /all/scheduledjobs from 150",
        "lost None",
    ]
    assert trail.count("listing None") == 1
    trail, slept, _ = await follow(
        [[[job(1)]], [[job(1)]]],
        [[bookmark("150"), broken]],
        InformerSettings(relist_after_error=True),
    )
    assert trail[trail.index("WATCH /all/scheduledjobs from 100") :] == [
        "WATCH /all/scheduledjobs from 100",
        "reached 150",
        "lost None",
        "sleep 0.5",
        *LISTED_AGAIN,
    ]
    assert slept == [0.5]


@pytest.mark.asyncio
async def test_waits_grow_with_failures_in_a_row_and_start_over_once_something_came() -> None:
    down = KubeApiError(0, "Unavailable", "refused")
    watches: list[Script] = [[down]] * 5 + [[bookmark("101"), down], [down]]
    _, slept, _ = await follow(
        [[[job(1)]]],
        watches,
        InformerSettings(relist_after_error=False, retry_seconds=(1.0, 2.0, 4.0)),
    )
    assert slept == [1.0, 2.0, 4.0, 4.0, 4.0, 1.0, 2.0]  # reset: the bookmark came


@pytest.mark.asyncio
async def test_an_object_that_cannot_be_taken_is_logged_and_the_stream_goes_on(
    caplog: pytest.LogCaptureFixture,
) -> None:
    class Picky(Recorder):
        def add(self, obj: dict[str, Any]) -> None:
            if obj["n"] == 1:
                raise ValueError("mangled")
            super().add(obj)

        def event(self, scope: Scope, kind: str, obj: dict[str, Any]) -> None:
            if obj["n"] == 3:
                raise ValueError("mangled")
            super().event(scope, kind, obj)

    with caplog.at_level(logging.ERROR):
        trail, _, _ = await follow(
            [[[job(1), job(2)]]],
            [[event("ADDED", 3, "101"), event("ADDED", 4, "102")]],
            InformerSettings(),
            subscriber=Picky([]),
        )
    assert [line for line in trail if line.startswith(("add", "ADDED", "reached", "end"))] == [
        "add 2",
        "end",
        "reached 101",
        "ADDED 4",
        "reached 102",
    ]
    assert "team-a/job-1 not taken in" in caplog.text
    assert "team-a/job-3 not taken in" in caplog.text


@pytest.mark.asyncio
async def test_the_event_loop_turns_between_blocks_of_objects_and_events() -> None:
    turns = [0]
    seen: list[int] = []

    class Counting(Recorder):
        def add(self, obj: dict[str, Any]) -> None:
            del obj
            seen.append(turns[0])

        def event(self, scope: Scope, kind: str, obj: dict[str, Any]) -> None:
            del scope, kind, obj
            seen.append(turns[0])

    async def other_task() -> None:
        while True:
            turns[0] += 1
            await asyncio.sleep(0)

    ticking = asyncio.create_task(other_task())
    await follow(
        [[[job(n) for n in range(100)]]],
        [[event("MODIFIED", n, str(101 + n)) for n in range(100)]],
        InformerSettings(turn_every=50),
        subscriber=Counting([]),
    )
    ticking.cancel()
    assert len(seen) == 200
    # the other task ran between each block of 50, never inside one
    assert [len(set(seen[i : i + 50])) for i in range(0, 200, 50)] == [1, 1, 1, 1]
    assert len(set(seen)) == 4


@pytest.mark.asyncio
async def test_each_scope_is_listed_and_watched_on_its_own() -> None:
    trail, _, _ = await follow(
        [[[job(1)]], [[job(2)]]], [], InformerSettings(), scopes=["team-a", "team-b"]
    )
    assert trail.count("listing team-a") == trail.count("listing team-b") == 1
    assert "GET page 0 of /team-a/scheduledjobs (500)" in trail
    assert "GET page 0 of /team-b/scheduledjobs (500)" in trail
    # each watch starts from its own list's version (the lists' order is the loop's)
    watched = sorted(line.split()[1:] for line in trail if line.startswith("WATCH"))
    assert [scope for scope, _, _ in watched] == ["/team-a/scheduledjobs", "/team-b/scheduledjobs"]
    assert sorted(version for _, _, version in watched) == ["100", "200"]
    assert trail[-2:] == ["lost team-a", "lost team-b"]

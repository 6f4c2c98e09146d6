"""The operator's view of the jobs under random event orders: creates, edits,
suspends, resumes, deletes, published runs reported in status and run-now triggers,
interleaved with the clock moving on. Whatever the order:

* the index never hands out a run of a job that is deleted, suspended or invalid
  (what the leader publishes comes from the index);
* a deleted job leaves nothing behind to act on (index, triggers, owed writes);
* a queued run that has not started is withdrawn from the queue when its job is
  deleted (a suspended job's stays, for its worker to record Skipped), and only
  run IDs of the job's own object are withdrawn.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass, field
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tickwork.core.annotations import RUN_NOW_ANNOTATION
from tickwork.core.buckets import BucketIndex
from tickwork.core.runs import belongs_to, scheduled_run_id
from tickwork_operator.state import WatchState

pytestmark = pytest.mark.unit
NS = "team-a"
NAMES = ("a", "b", "c")
START = dt.datetime(2026, 12, 1, 8, 58, tzinfo=dt.UTC)


def stamp(moment: dt.datetime) -> str:
    return moment.strftime("%Y-%m-%dT%H:%M:%SZ")


specs = st.one_of(
    st.builds(
        lambda cron, policy: {"schedule": cron, "concurrencyPolicy": policy},
        st.sampled_from(["* * * * *", "*/5 * * * *", "0 9 * * *"]),
        st.sampled_from(["Allow", "Forbid", "Replace"]),
    ),
    st.builds(
        lambda minutes: {"runAt": stamp(START + dt.timedelta(minutes=minutes))}, st.integers(-5, 30)
    ),
    st.just({"schedule": "not a schedule"}),  # invalid: the operator reports it
)

events = st.one_of(
    st.tuples(st.sampled_from(["create", "edit"]), st.sampled_from(NAMES), specs),
    st.tuples(
        st.sampled_from(["suspend", "resume", "delete", "queued", "trigger"]),
        st.sampled_from(NAMES),
        st.just({}),
    ),
    st.tuples(st.just("advance"), st.just(""), st.integers(1, 20)),
)


@dataclass
class Object:
    uid: str
    generation: int
    spec: dict[str, Any]
    status: dict[str, Any] = field(default_factory=dict)
    annotations: dict[str, str] = field(default_factory=dict)
    version: int = 1

    def body(self, name: str) -> dict[str, Any]:
        return {
            "metadata": {
                "namespace": NS,
                "name": name,
                "uid": self.uid,
                "generation": self.generation,
                "resourceVersion": str(self.version),
                "creationTimestamp": stamp(START),
                "annotations": self.annotations,
            },
            "spec": {"task": {"echo": {"message": "hi"}}, **self.spec},
            "status": self.status,
        }


@dataclass
class Cluster:
    objects: dict[str, Object] = field(default_factory=dict)
    uids: int = 0
    tokens: int = 0
    queued: dict[str, str] = field(default_factory=dict)  # name -> its unstarted run ID

    def apply(self, event: str, name: str, arg: Any, now: dt.datetime) -> Object | None:
        """Change the object as the API server would; the new version, None if deleted."""
        obj = self.objects.get(name)
        if event == "create" and obj is None:
            self.uids += 1
            obj = self.objects[name] = Object(uid=f"uid-{self.uids}", generation=1, spec=arg)
            return obj
        if obj is None:
            return None
        obj.version += 1
        if event == "edit":
            obj.spec = {**arg, "suspend": obj.spec.get("suspend", False)}
            obj.generation += 1
        elif event in ("suspend", "resume"):
            obj.spec = {**obj.spec, "suspend": event == "suspend"}
            obj.generation += 1
        elif event == "queued":  # the leader published a run and reported it
            run_id = scheduled_run_id(obj.uid, now.replace(second=0, microsecond=0))
            obj.status = {
                "phase": "Scheduled",
                "queuedRun": {"id": run_id, "scheduledAt": stamp(now), "queuedAt": stamp(now)},
            }
            self.queued[name] = run_id
        elif event == "trigger":
            self.tokens += 1
            obj.annotations = {RUN_NOW_ANNOTATION: f"t{self.tokens}"}
        return obj


def check_due(state: WatchState, now: dt.datetime) -> None:
    """What falls due is what the leader publishes: never a run that must not run."""
    for due in state.index.pop_due(now.timestamp()):
        kind, namespace, name = due.key
        entry = state.jobs.get((namespace, name))
        if kind == "run":
            assert entry is not None, "a deleted job's run fell due"
            assert entry.spec is not None, "an invalid job's run fell due"
            assert not entry.suspended, "a suspended job's run fell due"


def check_deleted(state: WatchState, name: str, unstarted: str | None) -> None:
    state.forget(NS, name)
    key = (NS, name)
    for place in (state.jobs, state.triggers, state.dirty, state.active):
        assert key not in place
    for kind in ("run", "ttl"):
        assert (kind, NS, name) not in state.index
    if unstarted is not None:
        assert unstarted in state.withdrawn, "a deleted job's queued run stays queued"


@settings(max_examples=300, deadline=None)
@given(st.lists(events, min_size=1, max_size=40))
def test_random_event_orders_never_leave_a_run_to_publish_that_must_not_run(
    history: list[tuple[str, str, Any]],
) -> None:
    now = START
    state = WatchState(index=BucketIndex(start=START.timestamp(), width=1.0))
    cluster = Cluster()
    uids_ever: set[str] = set()
    for event, name, arg in history:
        if event == "advance":
            now += dt.timedelta(minutes=arg)
            check_due(state, now)
            continue
        unstarted = cluster.queued.get(name)
        if event == "delete" and name in cluster.objects:
            cluster.objects.pop(name)
            cluster.queued.pop(name, None)
            check_deleted(state, name, unstarted)
            continue
        seen = state.jobs.get((NS, name))
        if event == "queued" and (seen is None or seen.spec is None or seen.suspended):
            continue  # the leader publishes runs of valid, running jobs only
        was_suspended = bool(name in cluster.objects and cluster.objects[name].spec.get("suspend"))
        obj = cluster.apply(event, name, arg, now)
        if obj is None:
            continue
        uids_ever.add(obj.uid)
        entry = state.observe(obj.body(name), now=now)
        if entry.suspended or entry.spec is None:
            assert ("run", NS, name) not in state.index
        if event == "suspend" and not was_suspended and unstarted is not None:
            assert unstarted not in state.withdrawn, "withdrawn: nobody records it Skipped"
        assert all(any(belongs_to(run_id, uid) for uid in uids_ever) for run_id in state.withdrawn)

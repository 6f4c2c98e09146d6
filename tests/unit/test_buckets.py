"""The bucket index: O(1) put/move/remove, due entries popped in time order, and a
tick that only looks at what is due."""

from __future__ import annotations

import pytest
from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule

from tickwork.core.buckets import BucketIndex


def test_pop_due_returns_due_entries_in_time_order() -> None:
    index: BucketIndex[str] = BucketIndex(start=0.0, width=1.0)
    index.put("c", 30.5)
    index.put("a", 10.0)
    index.put("b", 10.9)
    index.put("later", 99.0)
    popped = index.pop_due(31.0)
    assert [(d.key, d.due) for d in popped] == [("a", 10.0), ("b", 10.9), ("c", 30.5)]
    assert list(index) == ["later"]


def test_entries_later_in_the_current_bucket_wait_for_their_time() -> None:
    index: BucketIndex[str] = BucketIndex(start=0.0, width=10.0)
    index.put("early", 12.0)
    index.put("late", 18.0)
    assert [d.key for d in index.pop_due(15.0)] == ["early"]
    assert [d.key for d in index.pop_due(17.9)] == []
    assert [d.key for d in index.pop_due(18.0)] == ["late"]


def test_put_moves_an_existing_key() -> None:
    index: BucketIndex[str] = BucketIndex(start=0.0)
    index.put("job", 50.0)
    index.put("job", 5.0)
    assert len(index) == 1
    assert index.due_of("job") == 5.0
    assert [d.key for d in index.pop_due(5.0)] == ["job"]
    assert index.pop_due(60.0) == []


def test_remove_before_due_means_never_popped() -> None:
    index: BucketIndex[str] = BucketIndex(start=0.0)
    index.put("job", 5.0)
    assert index.remove("job") is True
    assert index.remove("job") is False
    assert index.pop_due(10.0) == []
    assert index.bucket_count == 0


def test_overdue_entries_are_popped_by_the_next_tick() -> None:
    index: BucketIndex[str] = BucketIndex(start=100.0)
    index.pop_due(200.0)
    index.put("overdue", 50.0)
    assert [(d.key, d.due) for d in index.pop_due(200.5)] == [("overdue", 50.0)]


def test_an_overdue_entry_waiting_in_the_cursors_bucket_can_move_or_go() -> None:
    """An entry put overdue waits in the cursor's bucket, not its own: removing or
    moving it finds it there, and leaves no bucket or bookkeeping behind."""
    index: BucketIndex[str] = BucketIndex(start=100.0)
    index.pop_due(200.0)
    index.put("gone", 50.0)
    index.put("moved", 60.0)
    assert index.bucket_count == 1
    assert index.remove("gone") is True
    index.put("moved", 300.0)
    assert index.due_of("moved") == 300.0
    assert index.pop_due(250.0) == []
    assert [(d.key, d.due) for d in index.pop_due(300.0)] == [("moved", 300.0)]
    assert index.bucket_count == 0
    assert not index._displaced


def test_a_key_costs_the_index_its_due_time_only() -> None:
    """Per key the index holds the due instant in two dicts, not a record of it (the
    watcher holds a key per job): ~139 bytes a key for 20,000 keys, against ~215 with a
    (due, bucket) tuple of its own per key."""
    import tracemalloc  # noqa: PLC0415

    keys = [("run", "team", f"job-{i}") for i in range(20_000)]
    dues = [1000.0 + i * 0.37 for i in range(20_000)]
    index: BucketIndex[tuple[str, str, str]] = BucketIndex(start=0.0)
    tracemalloc.start()
    try:
        for key, due in zip(keys, dues, strict=True):
            index.put(key, due)
        held = tracemalloc.get_traced_memory()[0] / len(keys)
    finally:
        tracemalloc.stop()
    assert held < 175
    assert [d.key for d in index.pop_due(1000.5)] == [keys[0], keys[1]]


def test_a_tick_far_behind_visits_only_non_empty_buckets() -> None:
    index: BucketIndex[int] = BucketIndex(start=0.0, width=1.0)
    for key in range(5):
        index.put(key, 1_000_000.0 + key)
    popped = index.pop_due(10_000_000.0)  # ten million empty buckets in between
    assert [d.key for d in popped] == [0, 1, 2, 3, 4]


def test_width_must_be_positive() -> None:
    with pytest.raises(ValueError, match="positive"):
        BucketIndex(start=0.0, width=0)


class BucketIndexAgainstSortedList(RuleBasedStateMachine):
    """Random puts, moves, removes and ticks agree with a plain dict sorted on demand."""

    def __init__(self) -> None:
        super().__init__()
        self.now = 1000.0
        self.index: BucketIndex[int] = BucketIndex(start=self.now, width=2.5)
        self.model: dict[int, float] = {}

    @rule(key=st.integers(0, 30), offset=st.floats(-50, 200, allow_nan=False))
    def put(self, key: int, offset: float) -> None:
        self.index.put(key, self.now + offset)
        self.model[key] = self.now + offset

    @rule(key=st.integers(0, 30))
    def remove(self, key: int) -> None:
        assert self.index.remove(key) == (key in self.model)
        self.model.pop(key, None)

    @rule(step=st.floats(0, 40, allow_nan=False))
    def tick(self, step: float) -> None:
        self.now += step
        popped = self.index.pop_due(self.now)
        due = sorted(
            ((due, key) for key, due in self.model.items() if due <= self.now),
        )
        assert [d.due for d in popped] == [due for due, _ in due]
        assert {d.key for d in popped} == {key for _, key in due}
        for _, key in due:
            del self.model[key]

    @invariant()
    def same_contents(self) -> None:
        assert len(self.index) == len(self.model)
        for key, due in self.model.items():
            assert self.index.due_of(key) == due


BucketIndexAgainstSortedList.TestCase.settings = settings(
    max_examples=200, stateful_step_count=60, deadline=None
)
test_bucket_index_agrees_with_a_sorted_list = BucketIndexAgainstSortedList.TestCase

"""Status models that many jobs hold, made to share their equal parts.

The operator holds each job's share of status (and an outline of its runs) for as
long as it runs; at 100,000 jobs their pydantic overhead was most of its memory.
:func:`compact` rebuilds a frozen model so that its instance dict, field set,
instants on the minute, lists of instants and condition texts are the ones other
jobs hold too (the figures are in benchmarks/rounds.md, the memory rounds).
"""

from __future__ import annotations

import datetime as dt
import functools
import sys
from typing import Any, TypeVar, cast

from pydantic import BaseModel

from tickwork.api.status import Condition
from tickwork.core.civil import run_instant, to_minute

_M = TypeVar("_M", bound=BaseModel)
#: One set of field names for every model held with that set (see :func:`compact`).
_FIELD_SETS: dict[frozenset[str], set[str]] = {}


def compact(model: _M) -> _M:
    """``model``, as an equal model that shares what it holds with the equal parts of
    other models held so:

    * its instance dict, and that of every model in it, keyed by its class's shared
      keys (a split dict: only the values are its own). pydantic gives each model a
      dict of its own keys: 464 bytes for the operator's share of status (17 fields)
      against 176, 272 for a condition against 80 — and the operator holds both for
      every job for as long as it runs;
    * the set of fields set of it and of every model in it (5 to 17 names: 728 bytes);
    * instants on the minute (``nextRunAt``, ``nextRuns``, ``lastScheduleTime``: a
      fleet's jobs run at the same minutes) as the schedules' own shared instants
      (:func:`tickwork.core.civil.run_instant`), not one datetime per job and field;
    * a condition's type, reason and message, interned (a few dozen texts in all, 194
      bytes a job when each job holds its own copies from the JSON it was read from).

    Only frozen models are rebuilt (nothing assigns to them afterwards, which would
    give the dict its own keys again); lists in them are compacted in place."""
    return cast("_M", _compacted(model))


def _compacted(item: Any) -> Any:
    if isinstance(item, BaseModel):
        return _lean(item) if item.model_config.get("frozen") else item
    if type(item) is dt.datetime:
        return _shared_instant(item)
    if type(item) is list:
        item[:] = [_compacted(value) for value in item]
        if all(type(value) is dt.datetime for value in item):
            return _shared_list(tuple(item))
    elif isinstance(item, tuple) and item:
        shared = tuple(_compacted(value) for value in item)
        return item if all(a is b for a, b in zip(shared, item, strict=True)) else shared
    return item


def _lean(model: BaseModel) -> BaseModel:
    """An equal frozen model whose instance dict is keyed by its class's shared keys
    (attributes set one by one in field order, as ``__init__`` of a plain class does),
    holding :func:`compact`'s shared parts."""
    names = model.__pydantic_fields_set__
    fields_set = _FIELD_SETS.setdefault(frozenset(names), set(names))
    lean = object.__new__(type(model))
    texts = _CONDITION_TEXTS if isinstance(model, Condition) else ()
    for name, value in model.__dict__.items():
        shared = _compacted(value)
        if name in texts and len(shared) <= _INTERNED_LENGTH:
            shared = sys.intern(shared)
        object.__setattr__(lean, name, shared)
    object.__setattr__(lean, "__pydantic_fields_set__", fields_set)
    object.__setattr__(lean, "__pydantic_extra__", model.__pydantic_extra__)
    object.__setattr__(lean, "__pydantic_private__", model.__pydantic_private__)
    return lean


class SharedList(list):  # type: ignore[type-arg]
    """A list held by the models of many jobs (:func:`compact`): equal to a list, read
    like one, and refusing every change, which would change it for all of them."""

    __slots__ = ()

    def _refuse(self, *_args: object, **_kwargs: object) -> None:
        raise TypeError("a shared list of a status model cannot change; build a new one")

    append = extend = insert = pop = remove = clear = sort = reverse = _refuse
    __setitem__ = __delitem__ = __iadd__ = __imul__ = _refuse  # type: ignore[assignment]

    def __reduce__(self) -> tuple[Any, ...]:
        return (list, (list(self),))  # copies (deepcopy, pickle) are plain lists


@functools.lru_cache(maxsize=16384)
def _shared_list(values: tuple[dt.datetime, ...]) -> list[dt.datetime]:
    """One list for every model holding these values: the empty lists of the fields a
    job does not use (three in most jobs' share, 56 bytes each) and the next runs of
    a schedule (``nextRuns``: jobs on one schedule hold the same five instants). At most
    16,384 lists are kept; a list not kept is only not shared."""
    return SharedList(values)


@functools.lru_cache(maxsize=16384)
def shared_instants(values: tuple[dt.datetime, ...]) -> tuple[dt.datetime, ...]:
    """One tuple for every job holding these instants (a schedule's next runs, which
    the watcher keeps per job to write ``nextRuns``); at most 16,384 are kept."""
    return values


_CONDITION_TEXTS = ("type", "reason", "message")
_INTERNED_LENGTH = 256


def _shared_instant(moment: dt.datetime) -> dt.datetime:
    if moment.tzinfo is not dt.UTC or moment.second or moment.microsecond:
        return moment
    return run_instant(to_minute(moment))

"""The Calendars the operator follows, and what they do to the jobs that name them.

A job's ``spec.calendars`` names Calendars of its own namespace whose days its runs
keep off (``notOn``) or to (``onlyOn``). The operator lists and watches them
(:class:`CalendarFeed`, the same informer as the jobs') into a :class:`CalendarBook`:
each calendar's days, and which jobs name it. A job's schedule is its spec's kept by
its calendars (:func:`tickwork.core.calendar.on_days`); a calendar that is missing or
cannot be read makes the job Invalid, saying which, until it is there. A change to a
calendar re-plans every job that names it, from now (as an edit of the job would: no
burst of the runs it had ruled out), with no restart.

The jobs are listed only once the calendars are (:meth:`CalendarFeed.listed`), so a
job that names one is never taken for Invalid while its calendar is on its way.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from pydantic import ValidationError

from tickwork.api.calendar import CalendarSpec, JobCalendars
from tickwork.core.calendar import CalendarRule, DaySet, on_days
from tickwork.core.errors import InvalidSpecError
from tickwork.core.schedule import Schedule
from tickwork.kube.client import KubeClient
from tickwork.kube.informer import Informer, InformerSettings, Scope

logger = logging.getLogger(__name__)

CalendarKey = tuple[str, str]
"""(namespace, name) of a Calendar."""
JobKey = tuple[str, str]


@dataclass(frozen=True, slots=True)
class Unreadable:
    """A Calendar whose spec this version cannot read, and why."""

    reason: str


@dataclass
class CalendarBook:
    """Every Calendar followed (its days, or why they cannot be read), and the jobs
    that name each."""

    days: dict[CalendarKey, DaySet | Unreadable] = field(default_factory=dict)
    users: dict[CalendarKey, set[JobKey]] = field(default_factory=dict)
    named: dict[JobKey, tuple[str, ...]] = field(default_factory=dict)
    """The calendars each job names (only jobs that name some)."""

    def keep(
        self, job: JobKey, wanted: JobCalendars, schedule: Schedule
    ) -> tuple[Schedule | None, str | None]:
        """``schedule`` kept by the calendars ``wanted`` names (in ``job``'s namespace),
        or None and what is wrong: a calendar missing or unreadable."""
        namespace = job[0]
        rules: list[CalendarRule] = []
        for names, only in ((wanted.not_on, False), (wanted.only_on, True)):
            for name in names:
                days = self.days.get((namespace, name))
                if days is None:
                    return None, f"spec.calendars: Calendar {name!r} not found in {namespace!r}"
                if isinstance(days, Unreadable):
                    return None, f"spec.calendars: Calendar {name!r}: {days.reason}"
                rules.append(CalendarRule(days, only=only))
        return on_days(schedule, rules), None

    def use(self, job: JobKey, wanted: JobCalendars | None) -> None:
        """``job`` names the calendars of ``wanted`` now (None: it names none). O(1) for
        a job that names none and named none."""
        names = wanted.names if wanted is not None else ()
        before = self.named.get(job, ())
        if names == before:
            return
        for name in before:
            users = self.users.get((job[0], name))
            if users is not None:
                users.discard(job)
                if not users:
                    del self.users[(job[0], name)]
        for name in names:
            self.users.setdefault((job[0], name), set()).add(job)
        if names:
            self.named[job] = names
        else:
            self.named.pop(job, None)

    def forget_job(self, job: JobKey) -> None:
        self.use(job, None)

    def seen(self, calendar: CalendarKey, body: dict[str, Any] | None) -> list[JobKey]:
        """A Calendar came (``body``) or went (None): the jobs to plan again, none if
        its days did not change."""
        before = self.days.get(calendar)
        if body is None:
            self.days.pop(calendar, None)
        else:
            self.days[calendar] = read(calendar, body)
        if self.days.get(calendar) == before:
            return []
        return sorted(self.users.get(calendar, ()))

    def unlisted(self, namespace: str | None, listed: set[CalendarKey]) -> list[JobKey]:
        """A whole list of ``namespace`` (None: all) came: the calendars it did not
        bring are gone. The jobs to plan again."""
        gone = [
            key
            for key in self.days
            if (namespace is None or key[0] == namespace) and key not in listed
        ]
        return sorted({job for key in gone for job in self.seen(key, None)})


def read(calendar: CalendarKey, body: dict[str, Any]) -> DaySet | Unreadable:
    """A Calendar's days, or why they cannot be read (its spec as the message says)."""
    try:
        return CalendarSpec.model_validate(body.get("spec") or {}).day_set(calendar[1])
    except (ValidationError, InvalidSpecError, ValueError) as exc:
        if isinstance(exc, ValidationError):
            errors = exc.errors()
            where = ".".join(str(p) for p in errors[0]["loc"])
            text = str(errors[0]["msg"]).removeprefix("Value error, ")
            return Unreadable(f"spec.{where}: {text}" if where else text)
        return Unreadable(str(exc.args[0] if exc.args else exc))


Replan = Callable[[list[JobKey]], None]


class _Listed:
    """The Calendars of one list: each taken as it comes; at the end, the ones it did
    not bring are gone."""

    def __init__(self, feed: CalendarFeed, scope: Scope) -> None:
        self.feed = feed
        self.scope = scope
        self.keys: set[CalendarKey] = set()

    def add(self, obj: dict[str, Any]) -> None:
        self.keys.add(self.feed.take("ADDED", obj))

    def end(self) -> None:
        self.feed.replan(self.feed.book.unlisted(self.scope, self.keys))
        self.feed.lists_ended.add(self.scope)
        if self.feed.lists_ended >= set(self.feed.scopes):
            self.feed.listed.set()


class CalendarFeed:
    """The operator's :class:`~tickwork.kube.informer.Subscriber` of Calendars: into
    the book, and the jobs whose calendars changed to ``replan``."""

    def __init__(self, book: CalendarBook, replan: Replan, scopes: list[Scope]) -> None:
        self.book = book
        self.replan = replan
        self.scopes = scopes
        self.watching: set[Scope] = set()
        self.lists_ended: set[Scope] = set()
        self.listed = asyncio.Event()
        """Every scope's Calendars came in whole once: the jobs may be planned."""

    def take(self, kind: str, obj: dict[str, Any]) -> CalendarKey:
        meta = obj.get("metadata") or {}
        key = (str(meta.get("namespace") or ""), str(meta.get("name") or ""))
        self.replan(self.book.seen(key, None if kind == "DELETED" else obj))
        return key

    def listing(self, scope: Scope) -> _Listed:
        return _Listed(self, scope)

    def event(self, scope: Scope, kind: str, obj: dict[str, Any]) -> None:
        del scope  # a calendar's key names its namespace
        self.take(kind, obj)

    def reached(self, scope: Scope, version: str) -> None:
        del scope, version

    def live(self, scope: Scope) -> None:
        self.watching.add(scope)

    def lost(self, scope: Scope) -> None:
        self.watching.discard(scope)


def calendar_informer(kube: KubeClient, feed: CalendarFeed) -> Informer:
    """The operator's list and watch of the Calendars of the scopes it schedules."""
    settings = InformerSettings(page_size=500, relist_after_error=False)
    return Informer(kube, KubeClient.calendars_path, feed.scopes, feed, settings)

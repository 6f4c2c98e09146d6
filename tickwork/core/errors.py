"""Tickwork's domain errors, one hierarchy, each message saying what to fix.

The edges map them once: the operator turns them into a status condition and
an Event, the worker into a retry or a dead letter, the CLI into a message.
"""

from __future__ import annotations


class TickworkError(Exception):
    """Base class of every error Tickwork raises on purpose."""


class InvalidSpecError(TickworkError, ValueError):
    """A ScheduledJob spec that cannot be used; the message names the field and the fix."""

    def __init__(self, message: str, *, field: str | None = None) -> None:
        self.field = field
        super().__init__(f"{field}: {message}" if field else message)


class CronSyntaxError(InvalidSpecError):
    """A cron expression that does not parse."""


class NeverFiresError(InvalidSpecError):
    """A cron expression that parses but names no instant that exists (``0 0 30 2 *``)."""


class IllegalTransitionError(TickworkError):
    """A run was asked to move between two states the state machine does not connect."""

    def __init__(self, current: str, target: str, allowed: tuple[str, ...]) -> None:
        self.current = current
        self.target = target
        self.allowed = allowed
        options = ", ".join(allowed) if allowed else "none: it is final"
        super().__init__(
            f"a run cannot go from {current} to {target}; from {current} it may go to {options}"
        )


class QueueError(TickworkError):
    """The run queue could not do what was asked."""


class QueueUnavailableError(QueueError):
    """The queue's server cannot be reached or refused us; the message says which and why."""


class PermanentTaskError(TickworkError):
    """Raised by a task (or a task kind) when retrying cannot help: the run fails at once.

    ``detail`` (an answer's body, say) goes to the run's record in status only,
    never into Events, which everyone who may list Events in the namespace reads."""

    def __init__(self, message: str, *, detail: str | None = None) -> None:
        super().__init__(message)
        self.detail = detail


class TaskTimeoutError(TickworkError):
    """A run exceeded its time limit."""


class InvalidParamsError(TickworkError, ValueError):
    """Run parameters (``--param``, the run-params annotation) that cannot be used; the
    message says which and what to fix."""

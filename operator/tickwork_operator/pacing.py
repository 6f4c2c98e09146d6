"""The operator-wide pace of late runs: caught-up runs (spec.catchup) and backfilled ones.

After a long outage a thousand jobs may each owe a hundred runs, and a backfill
may cover a thousand: a token bucket spreads them, so the queue and the API
server (every run writes status) see a steady stream, never a flood. Runs on
time are never paced. Time is an argument (monotonic seconds).
"""

from __future__ import annotations


class Pace:
    """A token bucket: ``per_second`` tokens a second, at most ``burst`` saved up."""

    def __init__(self, *, per_second: float, burst: int, now: float) -> None:
        self.per_second = per_second
        self.burst = max(1, burst)
        self._tokens = float(self.burst)
        self._at = now

    def _refill(self, now: float) -> None:
        if now > self._at:
            self._tokens = min(self.burst, self._tokens + (now - self._at) * self.per_second)
            self._at = now

    def take(self, now: float) -> bool:
        """Take a token if one is there."""
        self._refill(now)
        if self._tokens >= 1:
            self._tokens -= 1
            return True
        return False

    def wait(self, now: float) -> float:
        """Seconds until the next token."""
        self._refill(now)
        return max(0.0, (1 - self._tokens) / self.per_second)

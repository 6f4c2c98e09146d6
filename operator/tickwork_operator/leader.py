"""Leader election on a ``coordination.k8s.io/v1`` Lease, the way client-go does it.

Every replica runs :meth:`LeaderElector.run`. The holder renews the Lease
every ``renew`` seconds; the others watch it and take over once it has not
changed for ``duration`` seconds — measured on their own monotonic clock,
never by comparing another pod's timestamps. Writes use the Lease's
resourceVersion, so two candidates cannot both win. On shutdown the holder
releases the Lease at once, so a standby takes over within one retry period.
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime as dt
import logging
import math
import time
from collections.abc import Callable
from typing import Any

from tickwork.kube.client import KubeApiError, KubeClient
from tickwork.kube.status import timestamp

logger = logging.getLogger(__name__)


class LeaderElector:
    def __init__(
        self,
        client: KubeClient,
        *,
        namespace: str,
        name: str,
        identity: str,
        duration_seconds: float,
        renew_seconds: float,
        on_change: Callable[[bool], None] = lambda _leading: None,
    ) -> None:
        self._client = client
        self._namespace = namespace
        self._name = name
        self.identity = identity
        self._duration = duration_seconds
        self._renew = renew_seconds
        self._on_change = on_change
        self._leading = False
        self._last_renewed = 0.0  # monotonic, when we last renewed successfully
        self._observed: tuple[str | None, str | None] | None = None  # (holder, renewTime)
        self._observed_at = 0.0
        self.leading_event = asyncio.Event()

    def _renewed_recently(self) -> bool:
        # A margin under the duration: a standby's clock may run a little fast, and
        # a publish that starts just before the bound should end before it.
        margin = min(2.0, self._duration / 5)
        return time.monotonic() - self._last_renewed < self._duration - margin

    @property
    def leading(self) -> bool:
        """True while we hold the Lease and have renewed it within its duration."""
        return self._leading and self._renewed_recently()

    def _set_leading(self, *, leading: bool) -> None:
        if leading != self._leading:
            self._leading = leading
            if leading:
                self.leading_event.set()
            else:
                self.leading_event.clear()
            logger.info(
                "lease %s/%s %s by %s",
                self._namespace,
                self._name,
                "acquired" if leading else "lost",
                self.identity,
            )
            self._on_change(leading)

    def _spec(self, now: dt.datetime, *, acquire: bool, holder: str | None) -> dict[str, Any]:
        spec: dict[str, Any] = {
            "holderIdentity": holder,
            "leaseDurationSeconds": max(1, math.ceil(self._duration)),
            "renewTime": _micro(now),
        }
        if acquire:
            spec["acquireTime"] = _micro(now)
        return spec

    async def try_acquire_or_renew(self) -> bool:
        """One round of the election; returns whether we lead afterwards."""
        now = dt.datetime.now(dt.UTC)
        # Leadership counts from when this attempt began (the renewTime it writes),
        # not from when the API server answered: an answer that took long must not
        # stretch the lease beyond what a standby measures.
        started = time.monotonic()
        lease = await self._client.get_lease(self._namespace, self._name)
        if lease is None:
            body = {
                "apiVersion": "coordination.k8s.io/v1",
                "kind": "Lease",
                "metadata": {"name": self._name, "namespace": self._namespace},
                "spec": self._spec(now, acquire=True, holder=self.identity)
                | {"leaseTransitions": 0},
            }
            try:
                await self._client.create_lease(self._namespace, body)
            except KubeApiError as exc:
                if exc.conflict:  # someone created it first
                    return False
                raise
            self._renewed(started)
            return True

        spec = lease.get("spec", {})
        holder = spec.get("holderIdentity") or None
        record = (holder, spec.get("renewTime"))
        if record != self._observed:
            self._observed, self._observed_at = record, time.monotonic()
        duration = float(spec.get("leaseDurationSeconds") or self._duration)
        expired = time.monotonic() - self._observed_at > duration
        mine = holder == self.identity
        if not mine and holder is not None and not expired:
            return False

        transitions = int(spec.get("leaseTransitions") or 0)
        new_spec = self._spec(now, acquire=not mine, holder=self.identity)
        new_spec["leaseTransitions"] = transitions if mine else transitions + 1
        if mine:
            new_spec["acquireTime"] = spec.get("acquireTime") or _micro(now)
        lease["spec"] = {**spec, **new_spec}
        try:
            await self._client.replace_lease(self._namespace, lease)
        except KubeApiError as exc:
            if exc.conflict:  # another candidate wrote first
                return False
            raise
        self._renewed(started)
        return True

    async def campaign(self) -> bool:
        """One round, bounded in time, errors logged: whether we lead afterwards."""
        try:
            # A round that hangs (an API server that stopped answering) must not
            # outlast the lease: give up on it well before.
            async with asyncio.timeout(self._duration / 2):
                leading = await self.try_acquire_or_renew()
        except (KubeApiError, TimeoutError) as exc:
            reason = str(exc) or "no answer in time"
            logger.warning("lease %s/%s: %s", self._namespace, self._name, reason)
            leading = self.leading  # keep leading until the lease would expire
        self._set_leading(leading=leading and self._renewed_recently())
        return self._leading

    def give_up(self) -> None:
        """Stop counting as the holder, leaving the Lease as it is (to expire, or to be
        renewed by the next replica of the same identity)."""
        self._set_leading(leading=False)

    @property
    def holder(self) -> str | None:
        """Who held the Lease when it was last read (None: free, or never read)."""
        return self._observed[0] if self._observed else None

    def _renewed(self, started: float) -> None:
        self._last_renewed = started
        self._observed = None

    async def run(self, stop: asyncio.Event) -> None:
        """Campaign and renew until ``stop`` is set; then release the Lease if we hold it."""
        try:
            while not stop.is_set():
                await self.campaign()
                interval = self._renew if self._leading else min(self._renew, self._duration / 2)
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(interval):
                        await stop.wait()
        finally:
            await self.release()

    async def release(self) -> None:
        """Give the Lease up now (graceful shutdown), so a standby need not wait it out."""
        was_leading = self._leading
        self._set_leading(leading=False)
        if not was_leading:
            return
        try:
            lease = await self._client.get_lease(self._namespace, self._name)
            if lease and lease.get("spec", {}).get("holderIdentity") == self.identity:
                lease["spec"]["holderIdentity"] = None
                lease["spec"]["leaseDurationSeconds"] = 1
                await self._client.replace_lease(self._namespace, lease)
                logger.info("lease %s/%s released", self._namespace, self._name)
        except KubeApiError as exc:
            logger.warning("could not release lease %s/%s: %s", self._namespace, self._name, exc)


def _micro(now: dt.datetime) -> str:
    """A MicroTime: RFC 3339 with exactly six fractional digits."""
    text = timestamp(now.replace(microsecond=now.microsecond or 1))
    assert text is not None  # noqa: S101 - now is never None
    return text

"""Per-namespace exceptions to the installation's task rules.

Platform teams install Tickwork once for many tenants, one namespace each. The
installation-wide rules — where ``http`` tasks may connect (``egress_allow`` and
``egress_deny``), which registered Python tasks jobs may call (``python_tasks``),
whether ``command`` tasks run (``command_tasks``) — apply to every namespace; the
installer may widen or narrow them per namespace (chart value ``worker.tenants``,
``TICKWORK_WORKER_TENANTS`` as JSON)::

    {"team-a": {"egressAllow": ["10.20.0.0/16", "*.team-a.svc.cluster.local"],
                "pythonTasks": ["reports.*"],
                "commandTasks": false}}

``egressAllow`` adds to the installation's allow list for that namespace's jobs
only, ``egressDeny`` to its deny list (an allowed address stays allowed);
``pythonTasks`` replaces the installation's list (fnmatch patterns over task
names); ``commandTasks`` replaces the installation's switch; ``maxRuns`` and
``runsPerMinute`` replace the installation's fair share (runs in flight at once
and runs started per minute, 0: no limit). A namespace without an entry gets the
installation's rules.
"""

from __future__ import annotations

import fnmatch
import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, StrictBool, StrictStr, ValidationError

from tickwork.queue.messages import FairShare
from tickwork_worker.tasks.egress import EgressPolicy


class _Exceptions(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True)

    egress_allow: list[StrictStr] = Field(default_factory=list, alias="egressAllow")
    egress_deny: list[StrictStr] = Field(default_factory=list, alias="egressDeny")
    python_tasks: list[StrictStr] | None = Field(default=None, alias="pythonTasks")
    command_tasks: StrictBool | None = Field(default=None, alias="commandTasks")
    max_runs: int | None = Field(default=None, ge=0, alias="maxRuns", strict=True)
    runs_per_minute: float | None = Field(default=None, ge=0, alias="runsPerMinute")


@dataclass(frozen=True)
class NamespaceRules:
    """What jobs of one namespace may do."""

    egress: EgressPolicy
    python_tasks: tuple[str, ...]
    command_tasks: bool
    key: str
    """Equal for namespaces under the same egress rules (they share an HTTP client)."""

    def may_call(self, task: str) -> bool:
        return any(fnmatch.fnmatchcase(task, pattern) for pattern in self.python_tasks)


class TenantRules:
    """The installation's rules and the per-namespace exceptions, resolved once."""

    def __init__(
        self,
        *,
        egress_allow: Sequence[str] = (),
        egress_deny: Sequence[str] = (),
        python_tasks: Sequence[str] = ("*",),
        command_tasks: bool = False,
        max_runs: int = 0,
        runs_per_minute: float = 0.0,
        share: float = 0.0,
        tenants: str | dict[str, Any] = "",
    ) -> None:
        """Raises ValueError, naming the namespace and the entry, for a bad policy."""
        try:
            raw = json.loads(tenants) if isinstance(tenants, str) and tenants.strip() else tenants
        except json.JSONDecodeError as exc:
            raise ValueError(f"tenants is not JSON: {exc}") from None
        raw = raw or {}
        if not isinstance(raw, dict):
            raise ValueError("tenants must be a JSON object: namespace -> exceptions")  # noqa: TRY004
        self._allow, self._deny = list(egress_allow), list(egress_deny)
        self.default = NamespaceRules(
            EgressPolicy.build(allow=self._allow, deny=self._deny),
            tuple(python_tasks),
            command_tasks,
            key="",
        )
        self._by_namespace: dict[str, NamespaceRules] = {}
        shares: dict[str, tuple[int | None, float | None]] = {}
        for namespace, entry in raw.items():
            try:
                exceptions = _Exceptions.model_validate(entry)
                own = bool(exceptions.egress_allow or exceptions.egress_deny)
                egress = (
                    EgressPolicy.build(
                        allow=[*self._allow, *exceptions.egress_allow],
                        deny=[*self._deny, *exceptions.egress_deny],
                    )
                    if own
                    else self.default.egress
                )
            except ValidationError as exc:
                problems = "; ".join(
                    f"{'.'.join(map(str, e['loc']))}: {e['msg']}" for e in exc.errors()
                )
                raise ValueError(f"tenants[{namespace!r}]: {problems}") from None
            except ValueError as exc:
                raise ValueError(f"tenants[{namespace!r}]: {exc}") from None
            self._by_namespace[namespace] = NamespaceRules(
                egress,
                tuple(exceptions.python_tasks)
                if exceptions.python_tasks is not None
                else self.default.python_tasks,
                exceptions.command_tasks if exceptions.command_tasks is not None else command_tasks,
                key=namespace if own else "",
            )
            if exceptions.max_runs is not None or exceptions.runs_per_minute is not None:
                shares[namespace] = (exceptions.max_runs, exceptions.runs_per_minute)
        self.fair_share: FairShare | None = None
        """The limits runs are claimed under; None when nothing is limited."""
        if max_runs < 0 or runs_per_minute < 0:
            raise ValueError("fair-share limits must not be negative")
        if max_runs or runs_per_minute or share or any(n or r for n, r in shares.values()):
            self.fair_share = FairShare(max_runs, runs_per_minute, shares, share=share)

    def of(self, namespace: str) -> NamespaceRules:
        return self._by_namespace.get(namespace, self.default)

    def all(self) -> list[NamespaceRules]:
        return [self.default, *self._by_namespace.values()]

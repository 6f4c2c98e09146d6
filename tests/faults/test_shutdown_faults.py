"""SIGTERM while Redis hangs: the operator and the worker still stop on their own,
well within a Pod's grace period (30 and 40 s in the chart).

On `helm uninstall` the Redis Pod goes with the others, and with its address: every
command then waits for its socket or connect timeout and is retried for a minute or
more. A worker waiting in such a claim, or an operator in such a tick, ran into its
grace period and was killed (measured in the Pods tests: 38 s for a worker, 30 s for an
operator); an operator also waited 5 s more for kopf after every SIGTERM.
Here Redis is behind a relay that stops relaying (connections stay open and hang).
"""

from __future__ import annotations

from collections.abc import Callable

import pytest

from tests.support import relayed_redis
from tickwork_dev.devcluster.components import TickworkProcess, wait_for

Start = Callable[..., TickworkProcess]


@pytest.mark.parametrize("command", ["tickwork-worker", "tickwork-operator"])
def test_sigterm_while_redis_hangs_stops_the_process_on_its_own(
    command: str, start_worker: Start, start_operator: Start, redis_url: str
) -> None:
    relay, through_relay = relayed_redis(redis_url)
    try:
        start = start_worker if command == "tickwork-worker" else start_operator
        process = start(TICKWORK_REDIS_URL=through_relay)
        if command == "tickwork-operator":  # a leader's ticker keeps the queue up
            wait_for(process.is_leader, timeout=30, what="the operator to lead")
            # Leading, it ticks once its namespaces' claims are done: wait for a tick.
            wait_for(
                lambda: (process.metric("tickwork_tick_seconds_count") or 0) > 0,
                timeout=60,
                what="the leader's first tick",
            )
        relay.pause()
        wait_for(relay.held.is_set, timeout=30, what="a Redis command hanging")
        # Within 15 s (the harness then kills it, status -9), status 0: stopped by itself.
        assert process.stop(timeout=15) == 0, process.log()
    finally:
        relay.close()

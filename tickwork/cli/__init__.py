"""``tickwork`` (also ``kubectl tickwork``): everyday operations on ScheduledJobs.

    tickwork get [NAME] [-A] [-o wide|json|yaml|name]   jobs, as kubectl shows them
    tickwork runs NAME [-o wide|json|yaml|name]         a job's runs, started then newest
    tickwork describe RUN_ID [-A]                       one run, whatever job it is of
    tickwork cancel RUN_ID [-A]           stop a queued, running or buffered run (the
                                          tickwork.dev/cancel annotation); Cancelled
    tickwork trigger NAME [--token T] [--param K=V]...
                                          run now (the tickwork.dev/run-now annotation),
                                          with parameters (tickwork.dev/run-params)
    tickwork suspend NAME / resume NAME   stop / restart publishing runs (resume also
                                          ends a pause after failed runs)
    tickwork backfill NAME --from T1 --to T2 [--name B]
                                          run every run of the schedule in [T1, T2]
                                          (an entry of spec.backfills)
    tickwork dlq list [-A]                dead runs the jobs' status lists
    tickwork dlq requeue RUN_ID | --all   give them another go, as attempt 1
    tickwork dlq purge RUN_ID | --all     forget them (both: an annotation the operator
                                          acts on; --redis: Redis itself, its password)
    tickwork explain -f FILE [--count N] [--from T]
                                          a job file's next runs, offline: in its zone
                                          and UTC, runs a clock change moved marked
    tickwork import cronjob/NAME... | --all [-A] [--apply [--suspend-source]]
                                          CronJobs as ScheduledJobs with a container
                                          task (printed, or created), saying what did
                                          not carry over
    tickwork completion bash              shell completion (source <(tickwork completion bash))
    tickwork version                      this client's version

Kubernetes access follows kubectl (``$KUBECONFIG``, ``--context``,
``-n/--namespace``; ``explain`` needs none), and as with kubectl these flags go anywhere on the line
(``kubectl tickwork runs nightly -n prod``); an unknown name exits 1. Only
``dlq --redis`` talks to Redis (``TICKWORK_REDIS_*`` or ``--redis-url``).
"""

from __future__ import annotations

from tickwork.cli.commands import complete_main, main, parser
from tickwork.cli.render import render_jobs, render_runs

__all__ = ["complete_main", "main", "parser", "render_jobs", "render_runs"]

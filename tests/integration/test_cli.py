"""The ``tickwork`` CLI and its ``kubectl tickwork`` plugin form, against the real API
server and Redis."""

from __future__ import annotations

import asyncio
import json
import os
import queue
import subprocess
import threading
from pathlib import Path

import pytest
import yaml
from kubernetes import client as k8s

from tests.support import Jobs, QueueProbe, rfc3339, whole_seconds_from_now
from tickwork.kube.client import KubeClient, load_configuration
from tickwork.queue import RedisRunQueue, RedisSettings
from tickwork.queue.connection import create_client
from tickwork.queue.messages import RunMessage
from tickwork_dev.devcluster.cluster import Cluster
from tickwork_dev.devcluster.components import console_script


def tickwork(
    cluster: Cluster, namespace: str, *args: str, redis_url: str = "", queue: str = ""
) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "KUBECONFIG": str(cluster.kubeconfig)}
    if redis_url:
        env |= {"TICKWORK_REDIS_URL": redis_url, "TICKWORK_REDIS_QUEUE": queue}
    return subprocess.run(
        [console_script("tickwork"), "-n", namespace, *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def test_trigger_suspend_and_resume_edit_the_job(
    cluster: Cluster, jobs: Jobs, namespace: str
) -> None:
    jobs.create("nightly", {"schedule": "@daily", "task": {"echo": {}}})
    done = tickwork(cluster, namespace, "trigger", "nightly", "--token", "release-7")
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == 'scheduledjob "nightly" triggered (token release-7)'
    annotations = jobs.get("nightly")["metadata"]["annotations"]
    assert annotations["tickwork.dev/run-now"] == "release-7"

    assert tickwork(cluster, namespace, "suspend", "nightly").returncode == 0
    assert jobs.get("nightly")["spec"]["suspend"] is True
    assert tickwork(cluster, namespace, "resume", "nightly").returncode == 0
    assert jobs.get("nightly")["spec"]["suspend"] is False


def test_resume_ends_a_pause_with_a_token_and_no_spec_change(
    cluster: Cluster, jobs: Jobs, namespace: str
) -> None:
    created = jobs.create(
        "flaky", {"schedule": "@daily", "failurePolicy": {"pauseAfter": 3}, "task": {"echo": {}}}
    )
    done = tickwork(cluster, namespace, "resume", "flaky", "--token", "fixed-dns")
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == 'scheduledjob "flaky" resumed (token fixed-dns)'
    job = jobs.get("flaky")
    assert job["metadata"]["annotations"]["tickwork.dev/resume"] == "fixed-dns"
    # Not suspended, so nothing changed in the spec: the operator acts on the token alone.
    assert job["metadata"]["generation"] == created["metadata"]["generation"]
    again = tickwork(cluster, namespace, "resume", "flaky")
    assert again.stdout.startswith('scheduledjob "flaky" resumed (token cli-')
    assert jobs.get("flaky")["metadata"]["annotations"]["tickwork.dev/resume"] != "fixed-dns"


def test_trigger_passes_parameters_with_its_token_and_refuses_bad_ones(
    cluster: Cluster, jobs: Jobs, namespace: str
) -> None:
    jobs.create("backfill", {"schedule": "@daily", "task": {"echo": {}}})
    done = tickwork(
        cluster,
        namespace,
        "trigger",
        "backfill",
        "--token",
        "b1",
        "--param",
        "region=eu",
        "--param",
        "query=a=b c",
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == (
        'scheduledjob "backfill" triggered (token b1, parameters region=eu, query=a=b c)'
    )
    annotations = jobs.get("backfill")["metadata"]["annotations"]
    assert annotations["tickwork.dev/run-now"] == "b1"
    assert json.loads(annotations["tickwork.dev/run-params"]) == {"region": "eu", "query": "a=b c"}

    # A trigger without parameters takes the last one's away: they were that run's alone.
    assert tickwork(cluster, namespace, "trigger", "backfill", "--token", "b2").returncode == 0
    annotations = jobs.get("backfill")["metadata"]["annotations"]
    assert annotations["tickwork.dev/run-now"] == "b2"
    assert "tickwork.dev/run-params" not in annotations

    for flag, message in [
        ("region", "error: --param 'region' must be NAME=VALUE, like region=eu"),
        ("re-gion=eu", "error: parameter name 're-gion' must be a letter followed by"),
        ("note=" + "x" * 200, "error: parameter names and values may hold at most 128"),
    ]:
        refused = tickwork(
            cluster, namespace, "trigger", "backfill", "--token", "b3", "--param", flag
        )
        assert refused.returncode == 1
        assert refused.stderr.startswith(message), refused.stderr
        assert "Traceback" not in refused.stderr
    assert jobs.get("backfill")["metadata"]["annotations"]["tickwork.dev/run-now"] == "b2"


def test_a_missing_job_is_a_one_line_error(cluster: Cluster, crd: None, namespace: str) -> None:
    result = tickwork(cluster, namespace, "trigger", "nope")
    assert result.returncode == 1
    assert (
        result.stderr.strip() == f'error: scheduledjob "nope" not found in namespace "{namespace}"'
    )
    assert "Traceback" not in result.stderr


def test_runs_prints_the_history_as_a_table(cluster: Cluster, jobs: Jobs, namespace: str) -> None:
    job = jobs.create("report", {"schedule": "@daily", "task": {"echo": {}}})
    uid = job["metadata"]["uid"]
    runs = [
        {
            "id": f"{uid}.20261201T000000Z",
            "scheduledAt": "2026-12-01T00:00:00Z",
            "outcome": "Succeeded",
            "attempts": 1,
            "startedAt": "2026-12-01T00:00:01Z",
            "finishedAt": "2026-12-01T00:00:03Z",
            "result": "Executed: report",
        },
        {
            "id": f"{uid}.20261130T000000Z",
            "scheduledAt": "2026-11-30T00:00:00Z",
            "outcome": "Failed",
            "attempts": 3,
            "error": "HTTP 500: upstream down",
        },
    ]

    async def write() -> None:
        async with KubeClient(load_configuration(str(cluster.kubeconfig))) as kube:
            await kube.apply_job_status(
                namespace, "report", uid, {"runs": runs}, field_manager="test-writer", force=True
            )

    asyncio.run(write())
    result = tickwork(cluster, namespace, "runs", "report")
    assert result.returncode == 0, result.stderr
    header, first, second = result.stdout.splitlines()
    assert header.split() == [
        "RUN",
        "SCHEDULED",
        "OUTCOME",
        "ATTEMPTS",
        "STARTED",
        "DURATION",
        "RESULT",
    ]
    assert first.split()[:3][0] == "20261201T000000Z"
    assert "Succeeded" in first
    assert "2.0s" in first
    assert "Executed: report" in first
    assert "Failed" in second
    # As with kubectl, the namespace may come after the command.
    env = {**os.environ, "KUBECONFIG": str(cluster.kubeconfig)}
    last = subprocess.run(
        [console_script("tickwork"), "runs", "report", "-n", namespace],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert last.returncode == 0, last.stderr
    assert [line.split()[0] for line in last.stdout.splitlines()] == [
        line.split()[0] for line in result.stdout.splitlines()
    ]
    assert "HTTP 500: upstream down" in second


def test_the_kubectl_plugin_is_the_same_cli(cluster: Cluster, jobs: Jobs, namespace: str) -> None:
    jobs.create("plugged", {"runAt": rfc3339(whole_seconds_from_now(3600)), "task": {"echo": {}}})
    env_path = f"{Path(console_script('tickwork')).parent}:{os.environ['PATH']}"
    # kubectl finds `kubectl-tickwork` on PATH; it refuses flags before a plugin's
    # name, so the cluster comes from KUBECONFIG, as it would for a user.
    result = subprocess.run(
        [console_script("kubectl"), "tickwork", "-n", namespace, "suspend", "plugged"],
        env={**os.environ, "PATH": env_path, "KUBECONFIG": str(cluster.kubeconfig)},
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    assert jobs.get("plugged")["spec"]["suspend"] is True


def test_dlq_with_redis_lists_requeues_and_purges_every_dead_letter(
    cluster: Cluster, namespace: str, redis_url: str, probe: QueueProbe
) -> None:
    """``--redis``: the queue itself, for whoever holds its password (dead letters of
    jobs deleted since, too)."""

    async def bury_three() -> None:
        settings = RedisSettings(url=redis_url, queue=namespace)
        queue = RedisRunQueue(create_client(settings), settings)
        for n in (1, 2, 3):
            await queue.enqueue(
                RunMessage(
                    run_id=f"u{n}.20261201T090000Z",
                    namespace=namespace,
                    name=f"job-{n}",
                    uid=f"u{n}",
                )
            )
            [claim] = await queue.claim(consumer="t", lease_seconds=60)
            await queue.bury(claim, error=f"HTTP 500 from job-{n}\nwith a second line")
        await queue.close()

    asyncio.run(bury_three())

    def cli(*args: str) -> subprocess.CompletedProcess[str]:
        return tickwork(
            cluster, namespace, "dlq", *args, "--redis", redis_url=redis_url, queue=namespace
        )

    listing = cli("list")
    assert listing.returncode == 0, listing.stderr
    lines = listing.stdout.splitlines()
    assert lines[0].split() == ["RUN", "ID", "JOB", "ATTEMPTS", "FAILED", "ERROR"]
    assert len(lines) == 4
    assert f"{namespace}/job-2" in listing.stdout
    assert "HTTP 500 from job-1 with a second line" in listing.stdout  # one line per run

    assert cli("requeue", "u2.20261201T090000Z").stdout.strip() == "requeued 1 run(s)"
    assert cli("requeue").returncode == 1  # neither a run ID nor --all
    assert cli("purge", "--all").stdout.strip() == "purged 2 run(s)"
    assert cli("list").stdout.strip() == "the dead-letter queue is empty"
    assert [m.run_id for m in probe.drain()] == ["u2.20261201T090000Z"]


def _with_runs(cluster: Cluster, jobs: Jobs, namespace: str, name: str) -> str:
    """A job whose status holds one finished run (as its worker would write it)."""
    uid = jobs.create(name, {"schedule": "@daily", "task": {"echo": {}}})["metadata"]["uid"]
    run_id = f"{uid}.20261201T000000Z"
    record = {
        "id": run_id,
        "scheduledAt": "2026-12-01T00:00:00Z",
        "outcome": "Failed",
        "attempts": 3,
        "startedAt": "2026-12-01T00:00:01Z",
        "finishedAt": "2026-12-01T00:00:03Z",
        "error": "HTTP 500: upstream down",
    }

    async def write() -> None:
        async with KubeClient(load_configuration(str(cluster.kubeconfig))) as kube:
            status = {"runs": [record], "lastRun": record}
            await kube.apply_job_status(
                namespace, name, uid, status, field_manager="test-writer", force=True
            )

    asyncio.run(write())
    return run_id


def test_get_lists_jobs_like_kubectl_and_an_unknown_name_exits_1(
    cluster: Cluster, jobs: Jobs, namespace: str
) -> None:
    _with_runs(cluster, jobs, namespace, "alpha")
    jobs.create("beta", {"runAt": "2026-01-01T00:00:00Z", "suspend": True, "task": {"echo": {}}})
    listing = tickwork(cluster, namespace, "get")
    assert listing.returncode == 0, listing.stderr
    header, *rows = listing.stdout.splitlines()
    assert header.split()[:5] == ["NAME", "SCHEDULE", "SUSPEND", "PHASE", "READY"]
    assert [row.split()[0] for row in rows] == ["alpha", "beta"]
    assert "Failed" in rows[0]
    assert "at 2026-01-01T00:00:00Z" in rows[1]

    wide = tickwork(cluster, namespace, "get", "alpha", "-o", "wide")
    assert wide.stdout.splitlines()[0].split()[-8:] == [
        "ZONE",
        "REASON",
        "MISSED",
        "LAST",
        "RUN",
        "ID",
        "NEXT",
        "RUNS",
    ]
    assert wide.stdout.splitlines()[1].split()[-1] == "-"  # no operator here: no nextRuns
    assert "LastRunFailed" not in wide.stdout  # no operator runs here: no condition yet
    assert "20261201T000000Z" in wide.stdout

    names = tickwork(cluster, namespace, "get", "-o", "name")
    assert names.stdout.split() == [
        "scheduledjob.tickwork.dev/alpha",
        "scheduledjob.tickwork.dev/beta",
    ]
    everywhere = tickwork(cluster, namespace, "get", "-A")
    assert everywhere.stdout.splitlines()[0].split()[0] == "NAMESPACE"
    assert any(line.split()[:2] == [namespace, "alpha"] for line in everywhere.stdout.splitlines())

    missing = tickwork(cluster, namespace, "get", "nope")
    assert missing.returncode == 1
    assert missing.stderr.strip() == (
        f'error: scheduledjob "nope" not found in namespace "{namespace}"'
    )
    for command in ("runs", "suspend", "resume"):
        assert tickwork(cluster, namespace, command, "nope").returncode == 1


def test_describe_finds_a_run_by_its_id_alone(cluster: Cluster, jobs: Jobs, namespace: str) -> None:
    run_id = _with_runs(cluster, jobs, namespace, "gamma")
    described = tickwork(cluster, namespace, "describe", run_id)
    assert described.returncode == 0, described.stderr
    fields = dict(line.split(":", 1) for line in described.stdout.splitlines())
    assert fields["Job"].strip() == f"{namespace}/gamma"
    assert fields["State"].strip() == "Failed"
    assert fields["Attempts"].strip() == "3 of 3"
    assert fields["Error"].strip() == "HTTP 500: upstream down"
    # From another namespace it takes -A; a run of no job is an error.
    env = {**os.environ, "KUBECONFIG": str(cluster.kubeconfig)}
    script = console_script("tickwork")
    elsewhere = subprocess.run(
        [script, "describe", run_id, "-n", "default"],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert elsewhere.returncode == 1
    assert "-A looks everywhere" in elsewhere.stderr
    found = subprocess.run(
        [script, "describe", run_id, "-A"],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert found.returncode == 0, found.stderr
    unknown = tickwork(cluster, namespace, "describe", "nouid.20261201T000000Z")
    assert unknown.returncode == 1


def test_describe_takes_a_job_by_its_name_too(cluster: Cluster, jobs: Jobs, namespace: str) -> None:
    run_id = _with_runs(cluster, jobs, namespace, "epsilon")
    described = tickwork(cluster, namespace, "describe", "epsilon")
    assert described.returncode == 0, described.stderr
    head, _, rest = described.stdout.partition("\nConditions:\n")
    fields = {k: v.strip() for k, v in (line.split(":", 1) for line in head.splitlines())}
    assert (fields["Name"], fields["Namespace"], fields["Schedule"]) == (
        "epsilon",
        namespace,
        "@daily",
    )
    assert fields["Last Run"].startswith(f"{run_id} Failed")
    assert run_id.split(".", 1)[1] in rest.partition("\nRuns:\n")[2]  # the run's row
    # A name with dots that reads like a run ID is still a name.
    jobs.create("nightly.manual.release-7", {"schedule": "@daily", "task": {"echo": {}}})
    dotted = tickwork(cluster, namespace, "describe", "nightly.manual.release-7")
    assert dotted.returncode == 0, dotted.stderr
    assert dotted.stdout.startswith("Name:")
    assert "nightly.manual.release-7" in dotted.stdout.splitlines()[0]
    missing = tickwork(cluster, namespace, "describe", "nope")
    assert missing.returncode == 1
    assert missing.stderr.strip() == (
        f'error: scheduledjob "nope" not found in namespace "{namespace}"'
    )


def test_get_takes_a_label_selector(cluster: Cluster, jobs: Jobs, namespace: str) -> None:
    spec = {"schedule": "@daily", "task": {"echo": {}}}
    jobs.create("team-a-1", spec, labels={"team": "a"})
    jobs.create("team-a-2", spec, labels={"team": "a", "tier": "gold"})
    jobs.create("team-b-1", spec, labels={"team": "b"})
    for selector, names in (
        ("team=a", ["team-a-1", "team-a-2"]),
        ("team=a,tier=gold", ["team-a-2"]),
        ("team!=a", ["team-b-1"]),
    ):
        found = tickwork(cluster, namespace, "get", "-l", selector, "-o", "name")
        assert found.returncode == 0, found.stderr
        assert [line.rsplit("/", 1)[1] for line in found.stdout.split()] == names, selector
    none = tickwork(cluster, namespace, "get", "--selector", "team=c")
    assert none.stdout.strip() == f"No resources found in {namespace} namespace."
    both = tickwork(cluster, namespace, "get", "team-a-1", "-l", "team=a")
    assert both.returncode == 1


def test_get_watch_shows_each_change_as_it_comes(
    cluster: Cluster, jobs: Jobs, namespace: str
) -> None:
    jobs.create("watched", {"schedule": "@daily", "task": {"echo": {}}}, labels={"w": "1"})
    jobs.create("other", {"schedule": "@daily", "task": {"echo": {}}})
    env = {**os.environ, "KUBECONFIG": str(cluster.kubeconfig)}
    argv = [console_script("tickwork"), "-n", namespace, "get", "-w", "-l", "w=1"]
    with subprocess.Popen(argv, env=env, stdout=subprocess.PIPE, text=True) as watching:
        lines: queue.Queue[str] = queue.Queue()

        def read() -> None:
            for line in watching.stdout or ():
                lines.put(line)

        reader = threading.Thread(target=read, daemon=True)
        reader.start()

        def next_line() -> list[str]:
            return lines.get(timeout=30).split()

        try:
            assert next_line()[:2] == ["NAME", "SCHEDULE"]
            assert next_line()[:3] == ["watched", "@daily", "false"]
            # A change to the job comes as its row; the other job is not selected.
            jobs.patch("other", {"spec": {"suspend": True}})
            jobs.patch("watched", {"spec": {"suspend": True}})
            assert next_line()[:3] == ["watched", "@daily", "true"]
            jobs.delete("watched")
            assert next_line()[0] == "watched"  # its last row
            assert lines.empty()
        finally:
            watching.terminate()


def test_cancel_adds_the_run_to_the_annotation_and_refuses_finished_or_unknown_runs(
    cluster: Cluster, jobs: Jobs, namespace: str
) -> None:
    finished_id = _with_runs(cluster, jobs, namespace, "delta")
    uid = jobs.get("delta")["metadata"]["uid"]
    running, buffered, gone = (
        f"{uid}.20261201T000100Z",
        f"{uid}.20261201T000200Z",
        f"{uid}.20261201T000300Z",
    )

    async def write() -> None:
        async with KubeClient(load_configuration(str(cluster.kubeconfig))) as kube:
            status = {
                "activeRuns": [
                    {
                        "id": running,
                        "scheduledAt": "2026-12-01T00:01:00Z",
                        "state": "Running",
                        "attempt": 1,
                    }
                ],
                "bufferedRuns": [
                    {
                        "id": buffered,
                        "scheduledAt": "2026-12-01T00:02:00Z",
                        "bufferedAt": "2026-12-01T00:02:00Z",
                    }
                ],
            }
            await kube.apply_job_status(
                namespace, "delta", uid, status, field_manager="test-runs", force=True
            )

    asyncio.run(write())
    done = tickwork(cluster, namespace, "cancel", running)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == f'run "{running}" of scheduledjob "delta" is being cancelled'
    # A second cancel keeps the first: both IDs are in the annotation.
    assert tickwork(cluster, namespace, "cancel", buffered).returncode == 0
    annotation = jobs.get("delta")["metadata"]["annotations"]["tickwork.dev/cancel"]
    assert annotation.split(",") == [running, buffered]
    # Finished or unknown runs: a clear error, the annotation untouched.
    over = tickwork(cluster, namespace, "cancel", finished_id)
    assert over.returncode == 1
    assert over.stderr.strip() == (
        f'error: run "{finished_id}" already finished (Failed): nothing to cancel'
    )
    unknown = tickwork(cluster, namespace, "cancel", gone)
    assert unknown.returncode == 1
    assert "is not queued, running or buffered" in unknown.stderr
    assert tickwork(cluster, namespace, "cancel", "nouid.20261201T000000Z").returncode == 1
    # Once the running one ended, the next cancel drops it from the annotation.

    async def ended() -> None:
        async with KubeClient(load_configuration(str(cluster.kubeconfig))) as kube:
            record = {"id": running, "scheduledAt": "2026-12-01T00:01:00Z", "outcome": "Cancelled"}
            waiting = {
                "id": buffered,
                "scheduledAt": "2026-12-01T00:02:00Z",
                "bufferedAt": "2026-12-01T00:02:00Z",
            }
            status = {"lastRun": record, "runs": [record], "bufferedRuns": [waiting]}
            await kube.apply_job_status(
                namespace, "delta", uid, status, field_manager="test-runs", force=True
            )

    asyncio.run(ended())
    assert tickwork(cluster, namespace, "cancel", buffered).returncode == 0
    annotation = jobs.get("delta")["metadata"]["annotations"]["tickwork.dev/cancel"]
    assert annotation == buffered


def _completion_env(cluster: Cluster) -> dict[str, str]:
    """The environment of a user's shell: the kubeconfig, and tickwork on PATH."""
    bin_dir = str(Path(console_script("tickwork")).parent)
    return {
        **os.environ,
        "KUBECONFIG": str(cluster.kubeconfig),
        "PATH": f"{bin_dir}:{os.environ['PATH']}",
    }


#: How each shell runs its completion script on the words typed: bash's and zsh's
#: function as their completion systems call it (the words and the cursor set; zsh's
#: compadd prints what it is handed), fish's own completion engine on the line.
SHELLS = {
    "bash": (
        ["bash", "-c"],
        (
            "source <(tickwork completion bash); COMP_WORDS=(tickwork {quoted}); "
            'COMP_CWORD=$((${{#COMP_WORDS[@]}} - 1)); _tickwork; printf "%s\\n" "${{COMPREPLY[@]}}"'
        ),
    ),
    "zsh": (
        ["zsh", "-f", "-c"],
        (
            'compdef() {{ :; }}; compadd() {{ shift ${{@[(i)--]}}; print -l -- "$@" }}; '
            "source <(tickwork completion zsh); "
            "words=(tickwork {quoted}); CURRENT=${{#words}}; _tickwork"
        ),
    ),
    "fish": (
        ["fish", "--no-config", "-c"],
        "tickwork completion fish | source; complete -C {line}",
    ),
}


@pytest.mark.parametrize("shell", sorted(SHELLS))
def test_each_shell_completes_commands_and_the_clusters_job_names(
    shell: str, cluster: Cluster, jobs: Jobs, namespace: str
) -> None:
    jobs.create("nightly-report", {"schedule": "@daily", "task": {"echo": {}}})
    jobs.create("nightly-backup", {"schedule": "@daily", "task": {"echo": {}}})
    env = _completion_env(cluster)
    argv, template = SHELLS[shell]

    def complete(*words: str) -> list[str]:
        quoted = " ".join(f"'{w}'" for w in words)
        script = template.format(quoted=quoted, line=json.dumps(" ".join(["tickwork", *words])))
        done = subprocess.run(
            [*argv, script], env=env, capture_output=True, text=True, timeout=60, check=False
        )
        assert done.returncode == 0, done.stderr
        return sorted(done.stdout.split())

    assert complete("ru") == ["runs"]
    assert complete("-n", namespace, "runs", "nightly-") == ["nightly-backup", "nightly-report"]
    assert complete("runs", "-n", namespace, "nightly-r") == ["nightly-report"]
    assert complete("describe", "-n", namespace, "nightly-r") == ["nightly-report"]
    assert complete("get", "-o", "ya") == ["yaml"]
    assert complete("dlq", "") == ["list", "purge", "requeue"]
    assert complete("completion", "") == ["bash", "fish", "zsh"]


def test_the_bash_script_passes_shellcheck_and_kubectl_completes_the_plugin(
    cluster: Cluster, jobs: Jobs, namespace: str
) -> None:
    jobs.create("nightly-backup", {"schedule": "@daily", "task": {"echo": {}}})
    env = _completion_env(cluster)
    made = subprocess.run(
        [console_script("tickwork"), "completion", "bash"],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    subprocess.run(
        [str(Path(console_script("tickwork")).parent / "shellcheck"), "-s", "bash", "-"],
        input=made.stdout,
        text=True,
        timeout=60,
        check=True,
    )
    # kubectl's plugin protocol: candidates, then cobra's no-file directive.
    plugin = subprocess.run(
        [console_script("kubectl_complete-tickwork"), "-n", namespace, "trigger", "nightly-b"],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    assert plugin.stdout.split() == ["nightly-backup", ":4"]


def test_dlq_lists_the_dead_runs_of_jobs_the_user_may_read_and_asks_the_operator(
    cluster: Cluster, jobs: Jobs, namespace: str
) -> None:
    """Without --redis: the jobs' status and annotations, with the user's RBAC (no
    Redis address or password anywhere in the environment)."""
    uid = jobs.create("flaky", {"schedule": "@daily", "task": {"echo": {}}})["metadata"]["uid"]
    jobs.create("fine", {"schedule": "@daily", "task": {"echo": {}}})
    dead = [
        {
            "id": f"{uid}.2026120{d}T000000Z",
            "scheduledAt": f"2026-12-0{d}T00:00:00Z",
            "failedAt": f"2026-12-0{d}T00:01:00Z",
            "attempts": 3,
            "error": f"HTTP 50{d}",
        }
        for d in (1, 2)
    ]

    async def write() -> None:
        async with KubeClient(load_configuration(str(cluster.kubeconfig))) as kube:
            await kube.apply_job_status(
                namespace, "flaky", uid, {"deadRuns": dead}, field_manager="test-writer", force=True
            )

    asyncio.run(write())
    listing = tickwork(cluster, namespace, "dlq", "list")
    assert listing.returncode == 0, listing.stderr
    header, newest, older = listing.stdout.splitlines()
    assert header.split() == ["RUN", "ID", "JOB", "ATTEMPTS", "FAILED", "ERROR"]
    assert newest.split()[:3] == [dead[1]["id"], f"{namespace}/flaky", "3"]
    assert "HTTP 502" in newest
    assert older.split()[0] == dead[0]["id"]
    assert tickwork(cluster, "default", "dlq", "list").stdout.strip() == "no dead runs"

    one = tickwork(cluster, namespace, "dlq", "requeue", dead[0]["id"])
    assert one.returncode == 0, one.stderr
    assert one.stdout.startswith("asked the operator to requeue 1 dead run(s) of 1 job(s)")
    token = one.stdout.rsplit("(token ", 1)[1].rstrip(")\n")
    annotations = jobs.get("flaky")["metadata"]["annotations"]
    assert annotations["tickwork.dev/requeue"] == f"{token}:{dead[0]['id']}"
    every = tickwork(cluster, namespace, "dlq", "purge", "--all")
    assert every.stdout.startswith("asked the operator to purge 2 dead run(s) of 1 job(s)")
    assert ":" not in jobs.get("flaky")["metadata"]["annotations"]["tickwork.dev/purge"]
    assert "tickwork.dev/purge" not in (jobs.get("fine")["metadata"].get("annotations") or {})
    assert tickwork(cluster, namespace, "dlq", "requeue", "nouid.20261201T000000Z").returncode == 1


def _cronjob(name: str, image: str, **pod: object) -> dict[str, object]:
    return {
        "apiVersion": "batch/v1",
        "kind": "CronJob",
        "metadata": {"name": name},
        "spec": {
            "schedule": "0 3 1 1 *",
            "jobTemplate": {
                "spec": {
                    "template": {
                        "spec": {
                            "restartPolicy": "Never",
                            "containers": [{"name": name, "image": image, "args": ["run"]}],
                            **pod,
                        }
                    }
                }
            },
        },
    }


def test_import_turns_cronjobs_into_scheduledjobs_and_suspends_them(
    cluster: Cluster, jobs: Jobs, namespace: str
) -> None:
    """Two CronJobs as the API server stores them (its defaults filled in): printed as
    ScheduledJobs with what does not carry over (a hostPath volume), then created, and the CronJobs
    suspended only once their jobs exist; a second import leaves the jobs alone."""
    batch = k8s.BatchV1Api(jobs.api.api_client)
    batch.create_namespaced_cron_job(namespace, _cronjob("report", "registry.example.com/r:1"))
    volumes = [
        {"name": "logs", "hostPath": {"path": "/var/log"}},
        {"name": "scratch", "emptyDir": {}},
    ]
    batch.create_namespaced_cron_job(
        namespace, _cronjob("cleanup", "busybox:1.36", volumes=volumes)
    )

    printed = tickwork(cluster, namespace, "import", "cronjob/report")
    assert printed.returncode == 0, printed.stderr
    [document] = list(yaml.safe_load_all(printed.stdout))
    assert (document["kind"], document["spec"]["concurrencyPolicy"]) == ("ScheduledJob", "Allow")
    assert document["spec"]["task"]["container"]["image"] == "registry.example.com/r:1"
    assert "left out: the task runs as non-root by default" in printed.stdout
    assert not jobs.exists("report")  # printed only

    applied = tickwork(cluster, namespace, "import", "--all", "--apply", "--suspend-source")
    assert applied.returncode == 0, applied.stderr
    lines = applied.stdout.splitlines()
    assert f'scheduledjob "report" created from cronjob {namespace}/report' in lines
    hostpath = "left out: volume logs: hostPath: the container task has no such field"
    assert f"{namespace}/cleanup: {hostpath}" in lines
    volumes_kept = jobs.get("cleanup")["spec"]["task"]["container"]["volumes"]
    assert [v["name"] for v in volumes_kept] == ["scratch"]
    assert f"cronjob {namespace}/cleanup suspended" in lines
    assert jobs.get("cleanup")["metadata"]["annotations"]["tickwork.dev/imported-from"] == (
        "cronjob/cleanup"
    )
    assert all(
        batch.read_namespaced_cron_job(name, namespace).spec.suspend
        for name in ("report", "cleanup")
    )
    again = tickwork(cluster, namespace, "import", "--all", "--apply")
    assert 'scheduledjob "report" exists (imported before)' in again.stdout
    jobs.create("web", {"schedule": "@daily", "task": {"echo": {}}})
    batch.create_namespaced_cron_job(namespace, _cronjob("web", "nginx:1"))
    clash = tickwork(cluster, namespace, "import", "cronjob/web", "--apply", "--suspend-source")
    assert 'scheduledjob "web" exists and is not this import' in clash.stdout
    assert not batch.read_namespaced_cron_job("web", namespace).spec.suspend  # still runs
    refused = tickwork(cluster, namespace, "import", "deployment/web")
    assert refused.returncode == 1
    assert "only CronJobs are imported" in refused.stderr

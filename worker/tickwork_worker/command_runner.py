"""The command runner: runs `command` tasks for the worker, in a container of its own.

A command started by the worker itself runs as the worker's user in the worker's
container, where it could read the Redis password file and the worker's
ServiceAccount token. With the chart's command tasks on, commands run here
instead: a second container of the worker's Pod, another user, neither of those
mounts. The worker sends each command over a Unix socket on a volume the two
containers share; this process starts it through a supervisor of its own
(:mod:`tickwork_worker.command_supervisor`), with the environment it was given, and
answers with its exit code and the tail of its output.

Commands cannot outlive their run or reach the runner or each other: the
supervisor kills everything a command left behind when it ends (``setsid`` or not),
and confines it in a Landlock sandbox (a directory of its own, no signal, trace or
abstract socket outside it). Without Landlock ABI 6 in the kernel the runner refuses
every command unless the installer accepts less (``isolation="bestEffort"``). It
answers only a peer of another user than its own: a command (its user) cannot hand
it commands.

When the worker hangs up first (the run was cancelled or timed out), the command
is stopped: SIGTERM to everything it started, then SIGKILL after a grace; at once if
the worker sent ``kill`` before hanging up (concurrencyPolicy TerminateOther).

Protocol, one request per connection, JSON lines: the worker sends
``{"args": [...], "env": {...}}``; the runner answers ``{"code": N, "output":
"..."}``, or ``{"error": "...", "permanent": true}`` if the program cannot start.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import functools
import json
import logging
import os
import shutil
import signal
import socket
import stat
import struct
import sys
from pathlib import Path
from typing import Any, Literal

from tickwork_worker import command_supervisor

logger = logging.getLogger("tickwork_worker.command_runner")

OUTPUT_LIMIT = 64 * 1024
KILL_GRACE_SECONDS = 5.0
#: The most a request may hold (16 KiB of task text, with room for names and JSON).
REQUEST_LIMIT = 256 * 1024


async def read_limited(stream: asyncio.StreamReader) -> bytes:
    """Everything the program printed, keeping only the last 64 KiB."""
    kept = b""
    while chunk := await stream.read(65536):
        kept = (kept + chunk)[-OUTPUT_LIMIT:]
    return kept


#: What the worker sends before it hangs up to have the group killed without grace.
KILL_NOW = b"kill\n"


async def kill_group(process: asyncio.subprocess.Process, *, at_once: bool = False) -> None:
    """Stop a command started by :func:`start`: SIGTERM to everything it started, and
    SIGKILL to all of it if any lingers after the grace (``at_once``: SIGKILL without
    a SIGTERM first). Its supervisor does both, then exits."""
    if not at_once:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGTERM)  # the supervisor passes it on
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(KILL_GRACE_SECONDS):
                await process.wait()
            return
    with contextlib.suppress(ProcessLookupError):
        os.kill(process.pid, signal.SIGUSR1)  # the supervisor: SIGKILL to all of it
    try:
        async with asyncio.timeout(KILL_GRACE_SECONDS):
            await process.wait()
    except TimeoutError:  # the supervisor itself is stuck: the group at least
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGKILL)
        await process.wait()


SUPERVISOR = str(Path(command_supervisor.__file__).resolve())


@functools.cache
def interpreter() -> str:
    """The Python that runs supervisors: this one, or (when this user may not run it,
    as in a virtualenv under another user's home) the system's; any Python 3 will do."""
    if os.access(sys.executable, os.X_OK):
        return sys.executable
    return shutil.which("python3") or sys.executable


async def start(
    args: list[str], env: dict[str, str], *, confine: bool = False
) -> asyncio.subprocess.Process:
    """Start a program through its supervisor, in a process group of its own;
    OSError if it is not there or not executable. ``confine``: in a sandbox."""
    program = args[0] if "/" in args[0] else shutil.which(args[0], path=env.get("PATH"))
    if program is None or not Path(program).is_file():  # noqa: ASYNC240 - a stat, no wait
        raise FileNotFoundError(2, "No such file or directory")
    if not os.access(program, os.X_OK):
        raise PermissionError(13, "Permission denied")
    supervisor = [interpreter(), "-I", "-S", SUPERVISOR, *(["--confine"] if confine else [])]
    return await asyncio.create_subprocess_exec(
        *supervisor,
        "--",
        *args,
        stdin=asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT,
        env=env,
        start_new_session=True,
    )


Isolation = Literal["required", "bestEffort"]


def refusal(isolation: Isolation, abi: int) -> str:
    """Why every command is refused with this kernel's Landlock ``abi``; "" if none is."""
    if isolation == "bestEffort" or abi >= command_supervisor.REQUIRED_ABI:
        return ""
    have = f"Landlock ABI {abi}" if abi else "no Landlock"
    return (
        f"command tasks are refused on this node: its kernel offers {have}, and keeping "
        f"commands apart needs ABI {command_supervisor.REQUIRED_ABI} (Linux 6.12 or "
        "later); an administrator can accept weaker isolation with the Helm value "
        "worker.commandTasks.isolation=bestEffort"
    )


def _isolation(isolation: Isolation) -> tuple[str, bool]:
    """Why commands are refused ("" if they are not), and whether to confine them."""
    abi = command_supervisor.landlock_abi()
    refused = refusal(isolation, abi)
    if refused:
        logger.error("%s", refused)
    elif abi:
        logger.info(
            "commands run in a Landlock sandbox (ABI %d)%s",
            abi,
            ""
            if abi >= command_supervisor.REQUIRED_ABI
            else ": weaker than required, accepted as bestEffort",
        )
    else:
        logger.warning(
            "commands run without a sandbox: this kernel offers no Landlock, accepted as bestEffort"
        )
    return refused, abi > 0


def answered(uid: int, worker_uid: int | None) -> bool:
    """Whether a request of ``uid`` is answered: the worker's only (None: any user but
    this process's own, which its commands have)."""
    return uid == worker_uid if worker_uid is not None else uid != os.getuid()


def peer_uid(writer: asyncio.StreamWriter) -> int:
    """The user of the process at the other end of a Unix connection."""
    connection: socket.socket = writer.get_extra_info("socket")
    creds = connection.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i"))
    return int(struct.unpack("3i", creds)[1])


async def _serve_one(
    reader: asyncio.StreamReader, writer: asyncio.StreamWriter, *, confine: bool, refused: str
) -> None:
    try:
        request = json.loads(await reader.readuntil(b"\n"))
        args = [str(a) for a in request["args"]]
        env = {str(k): str(v) for k, v in request["env"].items()}
    except (
        asyncio.IncompleteReadError,
        asyncio.LimitOverrunError,
        ValueError,
        KeyError,
        TypeError,
        AttributeError,
        IndexError,
    ):
        writer.close()
        return
    answer = (
        {"error": refused, "permanent": True}
        if refused
        else await _run(args, env, reader, writer, confine=confine)
    )
    if answer is None:
        return  # the worker gave the run up: nobody to answer
    with contextlib.suppress(ConnectionError):
        writer.write(json.dumps(answer).encode() + b"\n")
        await writer.drain()
        writer.close()


async def _run(
    args: list[str],
    env: dict[str, str],
    reader: asyncio.StreamReader,
    writer: asyncio.StreamWriter,
    *,
    confine: bool,
) -> dict[str, Any] | None:
    """Run one command until it ends (its answer) or the worker hangs up (None)."""
    try:
        process = await start(args, env, confine=confine)
    except OSError as exc:
        return {"error": f"cannot start {args[0]!r}: {exc}", "permanent": True}
    assert process.stdout is not None  # noqa: S101 - created with a pipe
    output = asyncio.create_task(read_limited(process.stdout))
    hangup = asyncio.create_task(reader.read())  # EOF: the worker gave the run up
    try:
        done, _ = await asyncio.wait({output, hangup}, return_when=asyncio.FIRST_COMPLETED)
    except asyncio.CancelledError:  # the runner itself is ending: leave nothing behind
        output.cancel()
        hangup.cancel()
        await kill_group(process, at_once=True)
        raise
    if output not in done:
        said = b"" if hangup.exception() else hangup.result()
        await kill_group(process, at_once=said.startswith(KILL_NOW))
        output.cancel()
        writer.close()
        return None
    hangup.cancel()
    code = await process.wait()
    return {"code": code, "output": (await output).decode(errors="replace")}


async def serve(
    path: Path,
    stop: asyncio.Event | None = None,
    *,
    isolation: Isolation = "required",
    worker_uid: int | None = None,
) -> None:
    """Answer commands on the Unix socket ``path`` until ``stop`` is set (or SIGTERM).

    Then take no new command, and let the running ones end as the worker decides: it
    hangs up when its own grace period is over, which kills the group. Cancelled
    (a second SIGTERM, or Ctrl-C twice), kill what still runs at once.

    ``isolation``: "required" refuses every command when the kernel cannot keep them
    apart; "bestEffort" runs them with what it offers. ``worker_uid``: the only user
    whose requests are answered (None: any but this process's own, the commands')."""
    path.unlink(missing_ok=True)  # noqa: ASYNC240 - before serving: nothing to block
    running: set[asyncio.Task[None]] = set()
    refused, confine = _isolation(isolation)

    async def serve_one(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None  # noqa: S101 - a handler runs as a task
        running.add(task)
        try:
            if not answered(uid := peer_uid(writer), worker_uid):
                logger.warning("refused a request from uid %d: only the worker's are answered", uid)
                return
            await _serve_one(reader, writer, confine=confine, refused=refused)
        finally:
            running.discard(task)
            writer.close()  # again, harmless; cancelled, it had not been

    server = await asyncio.start_unix_server(serve_one, path=str(path), limit=REQUEST_LIMIT)
    # Only this user and the group the two containers share (the Pod's fsGroup) connect.
    path.chmod(stat.S_IRUSR | stat.S_IWUSR | stat.S_IRGRP | stat.S_IWGRP)  # noqa: ASYNC240
    this = asyncio.current_task()
    if stop is None:
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()

        def on_signal() -> None:
            if stop.is_set() and this is not None:
                this.cancel()  # asked twice: do not wait for the commands
            stop.set()

        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, on_signal)
    logger.info("running commands for the worker on %s as uid %d", path, os.getuid())
    try:
        async with server:
            await stop.wait()
            server.close()  # no new command from here on
            if running:
                logger.info("stopping: %d command(s) still run; the worker ends them", len(running))
                await asyncio.gather(*running, return_exceptions=True)
    finally:
        for task in list(running):
            task.cancel()  # each kills its process group before it ends
        if running:
            await asyncio.gather(*running, return_exceptions=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="tickwork-command-runner", description=__doc__)
    default = os.environ.get("TICKWORK_COMMAND_RUNNER_SOCKET", "/run/tickwork/commands/runner.sock")
    parser.add_argument("--socket", type=Path, default=Path(default))
    parser.add_argument(
        "--isolation",
        choices=["required", "bestEffort"],
        default=os.environ.get("TICKWORK_COMMAND_RUNNER_ISOLATION", "required"),
        help="refuse commands when the kernel cannot keep them apart (required), or run "
        "them with what it offers (bestEffort)",
    )
    worker_uid = os.environ.get("TICKWORK_COMMAND_RUNNER_WORKER_UID", "")
    parser.add_argument(
        "--worker-uid",
        type=int,
        default=int(worker_uid) if worker_uid else None,
        help="the only user whose requests are answered",
    )
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s")
    asyncio.run(serve(args.socket, isolation=args.isolation, worker_uid=args.worker_uid))
    return 0

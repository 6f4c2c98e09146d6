"""The command runner: runs `command` tasks for the worker, in a container of its own.

A command started by the worker itself runs as the worker's user in the worker's
container, where it could read the Redis password file and the worker's
ServiceAccount token. With the chart's command tasks on, commands run here
instead: a second container of the worker's Pod, another user, neither of those
mounts. The worker sends each command over a Unix socket on a volume the two
containers share; this process starts it, in its own process group with the
environment it was given, and answers with its exit code and the tail of its
output. When the worker hangs up first (the run was cancelled or timed out),
the whole group is killed: SIGTERM, then SIGKILL after a grace; at once if the
worker sent ``kill`` before hanging up (concurrencyPolicy TerminateOther).

Protocol, one request per connection, JSON lines: the worker sends
``{"args": [...], "env": {...}}``; the runner answers ``{"code": N, "output":
"..."}``, or ``{"error": "...", "permanent": true}`` if the program cannot start.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import logging
import os
import signal
import stat
from pathlib import Path
from typing import Any

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
    """SIGTERM the whole process group, SIGKILL it if it lingers (``at_once``: SIGKILL
    without a SIGTERM first)."""
    if at_once:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGKILL)
        await process.wait()
        return
    with contextlib.suppress(ProcessLookupError):
        os.killpg(process.pid, signal.SIGTERM)
    try:
        await asyncio.wait_for(process.wait(), timeout=KILL_GRACE_SECONDS)
    except TimeoutError:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGKILL)
        await process.wait()


async def start(args: list[str], env: dict[str, str]) -> asyncio.subprocess.Process:
    """Start a program in a process group of its own; OSError if it cannot start."""
    return await asyncio.create_subprocess_exec(
        *args,
        stdin=asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT,
        env=env,
        start_new_session=True,
    )


async def _serve_one(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    try:
        request = json.loads(await reader.readuntil(b"\n"))
        args = [str(a) for a in request["args"]]
        env = {str(k): str(v) for k, v in request["env"].items()}
    except (asyncio.IncompleteReadError, asyncio.LimitOverrunError, ValueError, KeyError,
            TypeError, AttributeError):  # fmt: skip
        writer.close()
        return
    answer: dict[str, Any]
    try:
        process = await start(args, env)
    except OSError as exc:
        answer = {"error": f"cannot start {args[0]!r}: {exc}", "permanent": True}
    else:
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
            return
        hangup.cancel()
        code = await process.wait()
        answer = {"code": code, "output": (await output).decode(errors="replace")}
    with contextlib.suppress(ConnectionError):
        writer.write(json.dumps(answer).encode() + b"\n")
        await writer.drain()
        writer.close()


async def serve(path: Path, stop: asyncio.Event | None = None) -> None:
    """Answer commands on the Unix socket ``path`` until ``stop`` is set (or SIGTERM).

    Then take no new command, and let the running ones end as the worker decides: it
    hangs up when its own grace period is over, which kills the group. Cancelled
    (a second SIGTERM, or Ctrl-C twice), kill what still runs at once."""
    path.unlink(missing_ok=True)  # noqa: ASYNC240 - before serving: nothing to block
    running: set[asyncio.Task[None]] = set()

    async def serve_one(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None  # noqa: S101 - a handler runs as a task
        running.add(task)
        try:
            await _serve_one(reader, writer)
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
                logger.info("stopping: %d command(s) still run; the worker ends them",
                            len(running))  # fmt: skip
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
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s")
    asyncio.run(serve(args.socket))
    return 0

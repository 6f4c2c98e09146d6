"""One command's supervisor: nothing the command starts outlives it or reaches out.

The command runner (and a worker running commands itself) starts every command
through this script, run on its own (``python3 -I -S command_supervisor.py``:
standard library only, a few milliseconds to start)::

    command_supervisor.py [--confine] -- PROGRAM ARGS...

* **Nothing outlives the run.** It makes itself the *child subreaper* of what it
  starts (``PR_SET_CHILD_SUBREAPER``): a process the command leaves behind — even
  one that called ``setsid`` and left the process group — becomes this process's
  child, not PID 1's. When the program exits, every process still below this one is
  killed (SIGKILL, until none is left) before it exits itself, with the program's
  exit status. SIGTERM is passed on to every process below it (a cancel's grace);
  SIGUSR1 kills them all at once (the runner's "now", after the grace or for
  TerminateOther).
* **Confined** (``--confine``, the command runner's choice) with Landlock, an
  unprivileged Linux sandbox the program and its children cannot leave: it writes
  and reads under a directory of its own only (``TMPDIR``, and ``HOME`` unless the
  job sets it; removed at the end), reads the rest of the file system except
  ``/tmp`` (other commands' directories and the runner's socket are there); it
  cannot send a signal to, trace or read the memory or environment of any process
  outside its sandbox — the runner, this supervisor, other commands — nor connect to
  an abstract Unix socket made outside it, nor listen on a TCP port. The sandbox
  needs Landlock ABI 6 (Linux 6.12); :func:`landlock_abi` says what the kernel has.

Exit: the program's own status (killed by a signal: this process kills itself with
the same one); 126 if the program cannot be started or confined, with the reason on
standard error (shared with the output).
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import shutil
import signal
import struct
import subprocess
import sys
import tempfile
import time
from pathlib import Path

# prctl(2) and landlock(7); the Landlock system calls have the same numbers on every
# architecture (they came after the unified table).
PR_SET_NO_NEW_PRIVS = 38
PR_SET_CHILD_SUBREAPER = 36
SYS_LANDLOCK_CREATE_RULESET, SYS_LANDLOCK_ADD_RULE, SYS_LANDLOCK_RESTRICT_SELF = 444, 445, 446
CREATE_RULESET_VERSION = 1 << 0
RULE_PATH_BENEATH = 1
#: The ABI whose scopes keep commands apart: signals and abstract Unix sockets.
REQUIRED_ABI = 6
#: The ABI that brought TCP rules.
NET_ABI = 4

EXECUTE, WRITE_FILE, READ_FILE, READ_DIR = 1 << 0, 1 << 1, 1 << 2, 1 << 3
READ = EXECUTE | READ_FILE | READ_DIR
#: Everything a file system rule can allow, by the ABI that brought it in.
_FS_BY_ABI = {1: (1 << 13) - 1, 2: (1 << 14) - 1, 3: (1 << 15) - 1, 5: (1 << 16) - 1}
#: Of those, the ones a rule on a file (not a directory) may carry.
_FILE_RIGHTS = EXECUTE | WRITE_FILE | READ_FILE | (1 << 14) | (1 << 15)
NET_BIND_TCP = 1 << 0
SCOPE_ABSTRACT_UNIX_SOCKET, SCOPE_SIGNAL = 1 << 0, 1 << 1
#: Character devices a program may read and write.
DEVICES = ("null", "zero", "full", "random", "urandom", "tty")

_libc = ctypes.CDLL(None, use_errno=True)


def _syscall(*args: int | bytes | None) -> int:
    result = int(_libc.syscall(*args))
    if result < 0:
        errno = ctypes.get_errno()
        raise OSError(errno, os.strerror(errno))
    return result


def landlock_abi() -> int:
    """The Landlock ABI this kernel offers; 0 when it has none (too old, turned off,
    or a seccomp profile forbids it)."""
    try:
        return _syscall(SYS_LANDLOCK_CREATE_RULESET, None, 0, CREATE_RULESET_VERSION)
    except OSError:
        return 0


def _fs_rights(abi: int) -> int:
    return _FS_BY_ABI[max(k for k in _FS_BY_ABI if k <= abi)]


def ruleset(own: str, abi: int) -> int:
    """A Landlock ruleset (its file descriptor) that allows reading the file system
    except ``/tmp``, everything under ``own``, and the usual character devices; with
    ABI 4+ no TCP port to listen on; with ABI 6+ no signal and no abstract socket
    outside the sandbox."""
    handled = _fs_rights(abi)
    attr = struct.pack("=Q", handled)
    if abi >= NET_ABI:
        attr += struct.pack("=Q", NET_BIND_TCP)
    if abi >= REQUIRED_ABI:
        attr += struct.pack("=Q", SCOPE_ABSTRACT_UNIX_SOCKET | SCOPE_SIGNAL)
    fd = _syscall(SYS_LANDLOCK_CREATE_RULESET, attr, len(attr), 0)
    try:
        allowed = [(own, handled)]
        allowed += [
            (str(top), READ) for top in Path("/").iterdir() if top.name not in ("tmp", "dev")
        ]
        allowed += [(f"/dev/{name}", READ_FILE | WRITE_FILE) for name in DEVICES]
        for path, rights in allowed:
            _allow(fd, path, rights & handled)
    except BaseException:
        os.close(fd)
        raise
    return fd


def _allow(ruleset_fd: int, path: str, rights: int) -> None:
    try:
        target = os.open(path, os.O_PATH | os.O_CLOEXEC)
    except OSError:
        return  # absent here (no /dev/tty in a container, say): nothing to allow
    try:
        if not Path(path).is_dir():
            rights &= _FILE_RIGHTS
        rule = struct.pack("=Qi", rights, target)  # packed, as the kernel wants it
        _syscall(SYS_LANDLOCK_ADD_RULE, ruleset_fd, RULE_PATH_BENEATH, rule, 0)
    finally:
        os.close(target)


def _confine_self(ruleset_fd: int) -> None:
    """In the program's process, before it starts: enter the sandbox for good."""
    _prctl(PR_SET_NO_NEW_PRIVS, 1)
    _syscall(SYS_LANDLOCK_RESTRICT_SELF, ruleset_fd, 0)


def _prctl(option: int, value: int) -> None:
    if _libc.prctl(option, value, 0, 0, 0) != 0:
        errno = ctypes.get_errno()
        raise OSError(errno, os.strerror(errno))


def below(pid: int) -> list[int]:
    """Every living process below ``pid``, from /proc (children before their own)."""
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_bytes().rsplit(b")", 1)[1].split()
        except OSError:
            continue  # gone meanwhile
        children.setdefault(int(fields[1]), []).append(int(entry.name))
    found, todo = [], list(children.get(pid, []))
    while todo:
        child = todo.pop()
        found.append(child)
        todo.extend(children.get(child, []))
    return found


def signal_all(sig: int) -> None:
    for pid in below(os.getpid()):
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, sig)


def kill_all() -> None:
    """SIGKILL everything below this process and reap it, until nothing is left: what
    forks meanwhile is killed in the next round; what a dying process leaves comes to
    this one (the subreaper)."""
    while True:
        signal_all(signal.SIGKILL)
        try:
            while os.waitpid(-1, os.WNOHANG)[0]:
                pass
        except ChildProcessError:
            return  # no child left, living or dead
        time.sleep(0.005)  # killed, not yet dead: let the kernel finish them


USAGE = "usage: command_supervisor.py [--confine] [--dir DIR] -- PROGRAM ARGS..."


def main(argv: list[str]) -> int:
    """Run ``PROGRAM ARGS...`` with the environment this process was given."""
    if "--" not in argv or argv.index("--") == len(argv) - 1:
        sys.stderr.write(USAGE + "\n")
        return 2
    options, args = argv[: argv.index("--")], argv[argv.index("--") + 1 :]
    confine = "--confine" in options
    base = options[options.index("--dir") + 1] if "--dir" in options else "/tmp"  # noqa: S108
    abi = landlock_abi() if confine else 0
    if confine and not abi:
        sys.stderr.write(f"cannot start {args[0]!r}: this kernel offers no Landlock sandbox\n")
        return 126
    _prctl(PR_SET_CHILD_SUBREAPER, 1)
    own = tempfile.mkdtemp(prefix="command-", dir=base)
    env = dict(os.environ)  # what the worker gives the program; the job may set these two
    env.setdefault("TMPDIR", own)
    env.setdefault("HOME", own)

    asked: list[int] = []  # what the runner asked for, maybe before the program started

    def on_signal(signum: int, _frame: object) -> None:
        asked.append(signal.SIGKILL if signum == signal.SIGUSR1 else signal.SIGTERM)
        signal_all(asked[-1])  # reaped below, once the program's status is in

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGUSR1, on_signal)
    try:
        preexec = None
        if confine:
            fd = ruleset(own, abi)
            preexec = lambda: _confine_self(fd)  # noqa: E731 - runs in the child, before exec
        try:
            program = subprocess.Popen(args, env=env, preexec_fn=preexec)  # noqa: PLW1509
        except (OSError, subprocess.SubprocessError) as exc:
            sys.stderr.write(f"cannot start {args[0]!r}: {exc}\n")
            return 126
        if asked:  # asked to stop while it was starting: it gets what it missed
            signal_all(signal.SIGKILL if signal.SIGKILL in asked else signal.SIGTERM)
        status = program.wait()
        kill_all()
    finally:
        shutil.rmtree(own, ignore_errors=True)
    if status < 0:  # killed by a signal: end so too, for the runner to see the same
        if -status != signal.SIGKILL:
            signal.signal(-status, signal.SIG_DFL)
        os.kill(os.getpid(), -status)
    return status


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

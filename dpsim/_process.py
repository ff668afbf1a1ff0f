"""Process plumbing: dying with the parent, and stopping a command with all it started."""
from __future__ import annotations

import os
import signal
import subprocess
import sys


def die_with_parent() -> None:
    """Linux: get SIGKILL when the parent dies, so nothing outlives its caller."""
    if sys.platform.startswith("linux"):
        import ctypes

        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG


def descendants(pid: int) -> list[int]:
    """All processes below pid (Linux /proc; empty elsewhere)."""
    children: dict[int, list[int]] = {}
    for stat in os.listdir("/proc") if os.path.isdir("/proc") else []:
        if stat.isdigit():
            try:
                ppid = int(open(f"/proc/{stat}/stat").read().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
            children.setdefault(ppid, []).append(int(stat))
    found, todo = [], [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            found.append(child)
            todo.append(child)
    return found


def stop_tree(proc: subprocess.Popen) -> tuple[str | None, str | None]:
    """Stop a command started with start_new_session=True and everything below it.

    SIGTERM to its process group first (torchrun's handler then stops its
    workers, which run in sessions of their own), SIGKILL to what is left after
    5 s. Returns what the command wrote (stdout, stderr), nothing lost.
    """
    workers = descendants(proc.pid)
    try:
        os.killpg(proc.pid, signal.SIGTERM)
    except (ProcessLookupError, PermissionError):
        proc.terminate()
    try:
        proc.communicate(timeout=5)
    except subprocess.TimeoutExpired:
        pass
    for pid in {proc.pid, *workers, *descendants(proc.pid)}:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    return proc.communicate()

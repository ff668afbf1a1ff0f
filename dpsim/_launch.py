"""dpsim.launch: run a function on N local ranks with torch.distributed initialised."""
from __future__ import annotations

import itertools
import linecache
import os
import pickle
import re
import sys
import tempfile
import time
from typing import Any, Callable

import cloudpickle

from . import _forkserver
from ._backend import loopback_interface, resolve_backend
from ._rank import short_path

_GRACE = 2.0  # seconds the other ranks get to finish once one has failed
_REAP = 10.0  # seconds to wait for killed ranks to be reaped
_ids = itertools.count(1)
# What a rank says when a peer died under it (gloo, NCCL): a consequence, not a cause.
_PEER_GONE = re.compile(r"Connection (closed|reset) by peer|Broken pipe|remote process exited"
                        r"|[Cc]ommunicator was aborted")
# The profiler's own two lines per profile (kineto in torch 2.13 prints them at its
# highest log level, on stderr): "USDT:<date> <pid>:<tid> SyncActivity...cpp:52] profiler_start".
_KINETO_USDT = re.compile(r"^USDT:[^\n]*\] profiler_(?:start|stop)\n?", re.M)
# Rank output that changes from run to run: glog time stamps, Python thread ids.
_GLOG_TIME = re.compile(r"\[([IWEF])\d{4} \d\d:\d\d:\d\d\.\d+ ")
_THREAD_ID = re.compile(r"\b(Thread|thread) 0x[0-9a-f]+\b")
# Line numbers that change with the torch release: in frames of torch's own Python files, and
# in C++ source locations ("ProcessGroupGloo.cpp:2901", "pair.cc:456").
_TORCH_LINE = re.compile(r'^(  File "torch[/\\][^"]+", line )\d+', re.M)
_CPP_LINE = re.compile(r"\b(\w+\.(?:cc|cpp|h|hpp)):\d+\b")
# The build machine's directory in front of C++ sources ("/__w/pytorch/pytorch/third_party/...").
_BUILD_DIR = re.compile(r"/[^\s\[\]:'\"]*?/((?:third_party|torch/csrc|c10|aten)/[^\s\[\]:'\"]+\.(?:cc|cpp|h|hpp))")
# faulthandler's frames below the reader's function: dpsim's and the fork server's bootstrap.
_OWN_FRAMES = re.compile(r'^  File "(dpsim[/\\][^"]*|<string>)", line \d+ in \S+\n', re.M)


class RankError(RuntimeError):
    """A rank raised, or exited without returning.

    `rank` is the rank that failed first: when one rank dies, its peers often
    fail next with connection errors, which are consequences, not the cause.
    A failure that says a peer went away counts as a consequence, even when it
    was recorded a moment before the death that caused it (a killed rank's
    exit is seen when it is reaped). Ranks that failed with the same error are
    reported together, and `rank` is then the lowest of them, so a bug that
    hits every rank reads the same each run.
    """

    def __init__(self, failures: dict[int, dict], stopped: list[int]) -> None:
        self.failures = failures
        self.stopped = stopped
        groups: dict[tuple[str, str], list[int]] = {}
        for r in sorted(failures):
            groups.setdefault((failures[r]["type"], failures[r]["message"]), []).append(r)
        self._groups = sorted(groups.items(), key=lambda kv: (
            bool(_PEER_GONE.search(kv[0][1])), min(failures[r].get("time", float("inf")) for r in kv[1])))
        self.ranks = self._groups[0][1]  # the first failure, and every rank that failed the same way
        self.rank = self.ranks[0]
        first = failures[self.rank]
        self.exc_type = first["type"]
        self.exc_message = first["message"]
        self.rank_traceback = first["traceback"]
        self.original = _load_exception(first.get("exception"))
        super().__init__(self.summary() + "\n\n" + f"Traceback from rank {self.rank}:\n" + self.rank_traceback)

    def summary(self) -> str:
        """One line per distinct failure (the first one first), and which ranks were stopped."""
        lines = []
        for (kind, message), ranks in self._groups:
            who = f"rank {ranks[0]}" if len(ranks) == 1 else f"ranks {ranks}"
            lines.append(f"{who} raised {kind}: {message}")
        if self.stopped:
            lines.append(f"ranks {self.stopped} were still running and were stopped")
        return "\n".join(lines)


class LaunchTimeout(TimeoutError):
    """Some ranks had not finished after `timeout` seconds; all were stopped."""

    def __init__(self, unfinished: list[int], timeout: float) -> None:
        self.unfinished = unfinished
        super().__init__(
            f"ranks {unfinished} had not finished after {timeout:g} s (a rank waiting in a collective that "
            "another rank never joins?). All ranks were stopped."
        )


def _load_exception(data: bytes | None) -> BaseException | None:
    try:
        return pickle.loads(data) if data else None
    except Exception:
        return None


def _exit_failure(code: int, when: float) -> dict:
    if code < 0:
        import signal

        what = f"was killed by signal {signal.Signals(-code).name}"
    else:
        what = f"exited with code {code} before returning"
    return {"type": "ProcessExit", "message": what, "traceback": f"(no Python traceback: the process {what})\n",
            "time": when}


def _serialize(fn: Callable, args: tuple) -> bytes:
    try:
        return cloudpickle.dumps((fn, args))
    except Exception as exc:
        raise TypeError(f"dpsim.launch cannot send fn or its arguments to the ranks: {exc}") from None


def _cell_sources() -> dict:
    """linecache entries of notebook cells, so rank tracebacks show their source."""
    return {k: v for k, v in linecache.cache.items() if "ipykernel_" in k and len(v) == 4}


def tidy(text: str) -> str:
    """Rank output without what changes from run to run or from one torch release to the
    next: machine paths (as in tracebacks), the time and line in c10d's log lines
    (``[E1123 00:39:00.0014 file.cpp:67]`` -> ``[E file.cpp]``), line numbers in torch's
    frames, the build directory in front of C++ source paths, in faulthandler's stack
    dumps the thread ids and dpsim's own frames, and the profiler's start and stop lines."""
    text = _KINETO_USDT.sub("", text)
    text = _THREAD_ID.sub(r"\1 <id>", _GLOG_TIME.sub(r"[\1 ", short_path(text)))
    text = _CPP_LINE.sub(r"\1", _TORCH_LINE.sub(r"\1<n>", _BUILD_DIR.sub(r"\1", text)))
    return _OWN_FRAMES.sub("", text)


def print_rank_outputs(texts: list[str]) -> None:
    """Each rank's captured output under a ``[rank r]`` header, in rank order."""
    for rank, text in enumerate(texts):
        text = tidy(text)
        if text:
            sys.stdout.write(f"[rank {rank}]\n{text}" + ("" if text.endswith("\n") else "\n"))
    sys.stdout.flush()


def _print_outputs(outdir: str, world_size: int) -> None:
    paths = [_file(outdir, rank, "log") for rank in range(world_size)]
    print_rank_outputs([open(p, encoding="utf-8", errors="replace").read() if os.path.exists(p) else ""
                        for p in paths])


def _threads_per_rank(world_size: int) -> int:
    """The cores shared out between the ranks; DPSIM_RANK_THREADS overrides (the tests' second pass)."""
    forced = os.environ.get("DPSIM_RANK_THREADS", "")
    return int(forced) if forced.isdigit() and int(forced) > 0 else max(1, (os.cpu_count() or 1) // world_size)


def launch(
    fn: Callable[..., Any],
    *args: Any,
    world_size: int = 2,
    backend: str = "auto",
    timeout: float = 60.0,
    env: dict[str, str] | None = None,
) -> list[Any]:
    """Run ``fn(rank, world_size, *args)`` on `world_size` local processes.

    Each process has ``torch.distributed`` initialised (its default group's
    timeout is `timeout` plus 30 s, so that a hang ends as a LaunchTimeout;
    ``backend`` 'auto': a
    'cpu:gloo,cuda:nccl' group with each rank bound to its own GPU when there
    are enough GPUs, else gloo on CPU tensors). Returns the
    per-rank return values in rank order; tensors come back on the CPU. Each
    rank's output is printed under a ``[rank r]`` header, in rank order.

    Raises RankError (naming the rank, with its traceback) if any rank fails, and
    LaunchTimeout if ranks are still running after `timeout` seconds. Either way,
    and on KeyboardInterrupt, every rank is killed before this returns.

    ``env`` adds environment variables for the ranks only (for example
    ``{"TORCH_DISTRIBUTED_DEBUG": "DETAIL"}``); the ranks see them before
    ``init_process_group``, as processes started with them would.
    """
    if not callable(fn):
        raise TypeError(f"fn must be callable, got {type(fn).__name__}")
    if isinstance(world_size, bool) or not isinstance(world_size, int) or world_size < 1:
        raise ValueError(f"world_size must be an integer >= 1, got {world_size!r}")
    if not isinstance(timeout, (int, float)) or timeout <= 0:
        raise ValueError(f"timeout must be a positive number of seconds, got {timeout!r}")
    if env is not None and not (isinstance(env, dict)
                                and all(isinstance(k, str) and isinstance(v, str) for k, v in env.items())):
        raise TypeError(f"env must map strings to strings, got {env!r}")
    if not hasattr(os, "fork"):
        raise RuntimeError("dpsim.launch needs os.fork (Linux or macOS); on Windows run rank code with torchrun")
    backend = resolve_backend(backend, world_size)
    payload = _serialize(fn, args)

    server = _forkserver.get()
    with server.lock, tempfile.TemporaryDirectory(prefix="dpsim-") as outdir:
        req = {
            "id": next(_ids), "world_size": world_size, "backend": backend, "timeout": float(timeout),
            "payload": payload, "env": {**os.environ, **(env or {})}, "sys_path": list(sys.path),
            "cwd": os.getcwd(),
            "outdir": outdir, "loopback": loopback_interface(), "linecache": _cell_sources(),
            "threads": _threads_per_rank(world_size),
        }
        try:
            codes = _run(server, req, timeout)
        finally:  # also on Ctrl-C: what the ranks printed often explains a hang
            _print_outputs(outdir, world_size)
        return _collect(outdir, world_size, codes, timeout)


def _run(server: _forkserver.ForkServer, req: dict, timeout: float) -> dict[int, tuple[int, float]]:
    """Start the ranks and wait; returns {rank: (exit code, time)} of ranks that ended by themselves."""
    lid, ws = req["id"], req["world_size"]
    server.send(("launch", req))
    deadline = time.monotonic() + timeout
    codes: dict[int, tuple[int, float]] = {}
    failed_at = None
    try:
        while True:  # skip reports left over from an earlier, interrupted launch
            msg = server.recv(timeout=max(0.0, deadline - time.monotonic()) + 30.0)
            if msg is None or (msg[0] == "started" and msg[1] == lid):
                break
        server.check(msg, "started")
        while len(codes) < ws:
            until = deadline if failed_at is None else min(deadline, failed_at + _GRACE)
            msg = server.recv(timeout=max(0.0, until - time.monotonic()))
            if msg is None:
                break
            if msg[0] == "exit" and msg[1] == lid:
                codes[msg[2]] = (msg[3], msg[4])
                if msg[3] != 0 and failed_at is None:
                    failed_at = time.monotonic()
    finally:
        if server.alive():  # else ForkServerDied is on its way, and the server took its ranks with it
            _stop(server, lid, ws, codes, kill=len(codes) < ws)  # timeout, a failed rank, or KeyboardInterrupt
    return codes


def _stop(server: _forkserver.ForkServer, lid: int, ws: int, codes: dict, kill: bool) -> None:
    """Optionally kill the launch's ranks, then wait until every rank and the store are reaped."""
    if kill:
        server.send(("kill", lid))
    reaped, store_gone = set(codes), False
    deadline = time.monotonic() + _REAP
    while len(reaped) < ws or not store_gone:
        msg = server.recv(timeout=max(0.0, deadline - time.monotonic()))
        if msg is None:
            server.close()  # the server's death takes any straggler with it
            return
        if msg[0] == "exit" and msg[1] == lid:
            reaped.add(msg[2])
        elif msg[0] == "store-gone" and msg[1] == lid:
            store_gone = True


def _file(outdir: str, rank: int, kind: str) -> str:
    return os.path.join(outdir, f"rank{rank}.{kind}")


def _collect(outdir: str, ws: int, codes: dict[int, tuple[int, float]], timeout: float) -> list[Any]:
    failures, unfinished = {}, []
    for rank in range(ws):
        returned = os.path.exists(_file(outdir, rank, "result"))
        if os.path.exists(_file(outdir, rank, "error")):
            with open(_file(outdir, rank, "error"), "rb") as f:
                failures[rank] = pickle.load(f)
        elif rank in codes and (codes[rank][0] != 0 or not returned):
            failures[rank] = _exit_failure(*codes[rank])  # e.g. os._exit, a signal, a crash in C++
        elif not returned:
            unfinished.append(rank)  # still running when stopped; a rank still leaving the group has finished
    if failures:
        raise RankError(failures, stopped=unfinished)
    if unfinished:
        raise LaunchTimeout(unfinished, timeout)
    results = []
    for rank in range(ws):
        with open(_file(outdir, rank, "result"), "rb") as f:
            results.append(cloudpickle.load(f))
    return results

"""What runs inside one forked rank: capture output, join the group, call fn, report."""
from __future__ import annotations

import linecache
import os
import pickle
import re
import signal
import socket
import sys
import time
import traceback
from datetime import timedelta
from typing import Any

import cloudpickle
import torch
import torch.distributed as dist

from ._backend import cuda_backend
from ._process import die_with_parent

_CELL = re.compile(r"[^\"']*ipykernel_\d+[/\\]\d+\.py")


_ABOVE_DPSIM = os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep


def short_path(text: str) -> str:
    """Drop machine-specific prefixes from file names in a traceback."""
    text = _CELL.sub("<notebook cell>", text).replace(_ABOVE_DPSIM, "")
    return re.sub(r"[^\"'\s]*[/\\](site|dist)-packages[/\\]", "", text)


def to_cpu(obj: Any) -> Any:
    """Tensors anywhere in lists, tuples and dicts come back as CPU tensors."""
    if isinstance(obj, torch.Tensor):
        return obj.detach().cpu()
    if isinstance(obj, tuple) and hasattr(obj, "_fields"):  # namedtuple
        return type(obj)(*(to_cpu(x) for x in obj))
    if isinstance(obj, (list, tuple)) and type(obj) in (list, tuple):
        return type(obj)(to_cpu(x) for x in obj)
    if isinstance(obj, dict) and type(obj) is dict:
        return {k: to_cpu(v) for k, v in obj.items()}
    return obj


def _redirect_output(path: str) -> None:
    log = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(log, 1)
    os.dup2(log, 2)  # one file keeps stdout and stderr in the order they happened
    os.dup2(null, 0)
    for fd in {log, null} - {0, 1, 2}:
        os.close(fd)
    sys.stdin = open(0, closefd=False)
    sys.stdout = open(1, "w", buffering=1, closefd=False, encoding="utf-8", errors="backslashreplace")
    sys.stderr = open(2, "w", buffering=1, closefd=False, encoding="utf-8", errors="backslashreplace")


def _set_environment(rank: int, req: dict, port: int) -> None:
    os.environ.clear()
    os.environ.update(req["env"])
    ws = req["world_size"]
    os.environ.update(
        RANK=str(rank), WORLD_SIZE=str(ws), LOCAL_RANK=str(rank), LOCAL_WORLD_SIZE=str(ws),
        GROUP_RANK="0", MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port),
    )
    if req["loopback"]:  # gloo and NCCL bind their own listening sockets to this interface
        os.environ["GLOO_SOCKET_IFNAME"] = req["loopback"]
        os.environ["NCCL_SOCKET_IFNAME"] = req["loopback"]
    # torch.distributed read TORCH_DISTRIBUTED_DEBUG when the fork server imported it;
    # read it again, so that each launch sees its own environment, as a fresh process would.
    dist.set_debug_level_from_env()
    sys.path[:] = req["sys_path"]
    os.chdir(req["cwd"])
    sys.argv = [f"rank{rank}"]


# The group's collectives wait longer than the launch: a hang then always ends as the
# launch's LaunchTimeout, never in a race between it and gloo's own timeout error.
GROUP_SLACK = timedelta(seconds=30)


def _join(rank: int, req: dict, port: int) -> dist.TCPStore:
    ws, timeout = req["world_size"], timedelta(seconds=req["timeout"])
    store = dist.TCPStore("127.0.0.1", port, ws, is_master=False, timeout=timeout)
    if cuda_backend(req["backend"]):  # 'cpu:gloo,cuda:nccl': one GPU per rank, bound before fn runs
        torch.cuda.set_device(rank)
    dist.init_process_group(req["backend"], store=store, rank=rank, world_size=ws,
                            timeout=timeout + GROUP_SLACK)
    # Nobody starts fn before everyone has joined: a rank that fails at once would otherwise
    # leave peers that are still connecting to it with a connection error instead of fn's.
    store.set(f"dpsim/joined/{rank}", b"1")
    store.wait([f"dpsim/joined/{r}" for r in range(ws)])
    return store


def _write(path: str, data: bytes) -> None:
    with open(path + ".tmp", "wb") as f:
        f.write(data)
    os.replace(path + ".tmp", path)  # the caller never sees half a file


def _error_record(exc: BaseException) -> bytes:
    tb = exc.__traceback__
    if tb is not None and tb.tb_frame.f_code is run.__code__ and tb.tb_next is not None:
        tb = tb.tb_next  # start at the reader's code, not at this launcher frame
    record = {
        "type": type(exc).__name__,
        "message": str(exc),
        "traceback": short_path("".join(traceback.format_exception(type(exc), exc, tb))),
        "exception": None,
        "time": time.monotonic(),  # one clock for all local processes: the earliest failure is the cause
    }
    try:
        record["exception"] = cloudpickle.dumps(exc)  # the caller loads it if it can
    except Exception:
        record["exception"] = None
    return pickle.dumps(record)


class ReturnValueError(TypeError):
    """A rank's return value cannot be sent back to the caller."""


def _become_child(log: str) -> bool:
    """Own process group, die with the server, default signals, output to `log`."""
    os.setpgid(0, 0)
    parent = os.getppid()
    die_with_parent()
    if os.getppid() != parent:
        return False
    signal.signal(signal.SIGCHLD, signal.SIG_DFL)
    signal.signal(signal.SIGINT, signal.default_int_handler)
    _redirect_output(log)
    return True


def host_store(req: dict, listener: socket.socket) -> int:
    """The launch's TCPStore server, on the loopback socket it is handed; runs until killed."""
    if not _become_child(os.path.join(req["outdir"], "store.log")):
        return 1
    store = dist.TCPStore("127.0.0.1", listener.getsockname()[1], req["world_size"], is_master=True,
                          wait_for_workers=False,
                          timeout=timedelta(seconds=req["timeout"]), master_listen_fd=listener.fileno())
    while store is not None:
        signal.pause()
    return 0


def run(rank: int, req: dict, port: int) -> int:
    """Body of a forked rank; returns its exit code."""
    base = os.path.join(req["outdir"], f"rank{rank}")
    if not _become_child(base + ".log"):
        return 1
    try:
        _set_environment(rank, req, port)
        torch.set_num_threads(req["threads"])
        linecache.cache.update(req["linecache"])  # so tracebacks show notebook cell source
        fn, args = cloudpickle.loads(req["payload"])
        _join(rank, req, port)
        result = fn(rank, req["world_size"], *args)
        try:
            data = cloudpickle.dumps(to_cpu(result))
        except Exception as exc:
            raise ReturnValueError(
                f"the value returned by rank {rank} ({type(result).__name__}) cannot be pickled: {exc}. "
                "Return tensors, numbers, strings or containers of them."
            ) from None
        _write(base + ".result", data)
        if dist.is_initialized():  # fn may have left the group itself
            dist.destroy_process_group()
        return 0
    except BaseException as exc:  # noqa: BLE001 - every failure is reported to the caller
        _write(base + ".error", _error_record(exc))
        return 1
    finally:
        sys.stdout.flush()
        sys.stderr.flush()

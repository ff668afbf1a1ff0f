"""The same rank function under torchrun: the engine for many machines.

``python -m dpsim FILE.py:FUNC [ARGS...]`` calls FUNC(rank, world_size, *ARGS).
Under torchrun (RANK is set) it joins the group torchrun describes; run
directly it starts its own ranks with dpsim.launch.
"""
from __future__ import annotations

import argparse
import importlib
import importlib.util
import os
import re
import subprocess
import sys
import tempfile
from datetime import timedelta
from typing import Any, Callable, Sequence

import cloudpickle
import torch.distributed as dist

from ._backend import cuda_backend, resolve_backend
from ._launch import launch, print_rank_outputs
from ._process import stop_tree


def load_target(target: str) -> Callable[..., Any]:
    """'path/to/file.py:func', 'package.module:func' or a cloudpickled 'fn.pkl' -> the function."""
    if target.endswith(".pkl"):
        with open(target, "rb") as f:
            return cloudpickle.load(f)
    where, sep, name = target.rpartition(":")
    if not sep or not where or not name:
        raise ValueError(f"target must look like FILE.py:FUNC or MODULE:FUNC, got {target!r}")
    if where.endswith(".py"):
        spec = importlib.util.spec_from_file_location(os.path.basename(where)[:-3], where)
        if spec is None or not os.path.exists(where):
            raise FileNotFoundError(f"no such file: {where}")
        module = importlib.util.module_from_spec(spec)
        sys.modules[spec.name] = module  # lets pickle find classes defined there
        spec.loader.exec_module(module)
        cloudpickle.register_pickle_by_value(module)  # dpsim.launch's ranks cannot import a file by name
    else:
        module = importlib.import_module(where)
    fn = getattr(module, name, None)
    if not callable(fn):
        raise AttributeError(f"{where} has no function {name!r}")
    return fn


def _attempt_store(rank: int, world_size: int) -> dist.Store:
    """The workers' store, with this restart attempt's own key prefix when torchrun shares it.

    By default torchrun's c10d rendezvous hands its workers the agent's own store and
    keeps it across --max-restarts attempts (TORCHELASTIC_USE_AGENT_STORE=True), so a
    restarted worker would read the previous attempt's addresses and fail to connect.
    With TORCH_DISABLE_SHARE_RDZV_TCP_STORE=1 every attempt gets a fresh store, and no
    prefix is needed. The restart count is this agent's own, so across nodes the
    prefix can differ: jobs of several nodes that restart should set that variable.
    """
    agent_hosts_it = os.environ.get("TORCHELASTIC_USE_AGENT_STORE") == "True"
    store = dist.TCPStore(os.environ["MASTER_ADDR"], int(os.environ["MASTER_PORT"]), world_size,
                          is_master=not agent_hosts_it and rank == 0, timeout=timedelta(minutes=5))
    if not agent_hosts_it:
        return store
    return dist.PrefixStore(f"dpsim/attempt_{os.environ.get('TORCHELASTIC_RESTART_COUNT', '0')}", store)


def run_under_torchrun(fn: Callable[..., Any], args: Sequence[str] = (), backend: str = "auto") -> Any:
    """Join the group from torchrun's environment, call fn(rank, world_size, *args), leave.

    The backend is chosen from this node's ranks (LOCAL_WORLD_SIZE) and GPUs, as
    dpsim.launch chooses it: 'cpu:gloo,cuda:nccl' with each rank bound to
    cuda:LOCAL_RANK when every local rank has a GPU, else gloo. Every node of a
    job must come to the same choice (same GPU count per node).
    """
    rank, world_size = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    local_world = int(os.environ.get("LOCAL_WORLD_SIZE", world_size))
    backend = resolve_backend(backend, local_world)
    if cuda_backend(backend):
        import torch

        torch.cuda.set_device(int(os.environ["LOCAL_RANK"]))
    dist.init_process_group(backend, store=_attempt_store(rank, world_size), rank=rank, world_size=world_size)
    try:
        return fn(rank, world_size, *args)
    finally:
        if dist.is_initialized():
            dist.destroy_process_group()


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m dpsim", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("target", help="FILE.py:FUNC, MODULE:FUNC or a cloudpickled FUNC.pkl")
    parser.add_argument("args", nargs="*", help="extra string arguments passed to FUNC")
    parser.add_argument("--world-size", type=int, default=2, help="ranks to start when not under torchrun")
    parser.add_argument("--backend", default="auto", choices=["auto", "gloo", "nccl"])
    opts = parser.parse_args(argv)
    fn = load_target(opts.target)
    if "RANK" in os.environ and "WORLD_SIZE" in os.environ:
        run_under_torchrun(fn, opts.args, opts.backend)
    else:
        launch(fn, *opts.args, world_size=opts.world_size, backend=opts.backend)
    return 0


def torchrun(
    target: str | Callable[..., Any],
    *args: str,
    nproc_per_node: int = 2,
    extra: Sequence[str] = (),
    timeout: float = 120.0,
) -> None:
    """Run ``python -m dpsim TARGET ARGS`` under torchrun (one node, `nproc_per_node` ranks).

    `target` is 'FILE.py:FUNC', 'MODULE:FUNC' or a function object (sent by
    value, so a function defined in a notebook runs unchanged). Prints each
    rank's output under a ``[rank r]`` header, in rank order; raises
    RuntimeError if torchrun fails, and subprocess.TimeoutExpired after
    `timeout` seconds (torchrun and all its workers are killed first).
    `extra` holds more torchrun flags (e.g. ["--max-restarts", "1"]).
    """
    with tempfile.TemporaryDirectory(prefix="dpsim-torchrun-") as tmp:
        logs = os.path.join(tmp, "logs")
        if callable(target):
            path = os.path.join(tmp, "fn.pkl")
            with open(path, "wb") as f:
                cloudpickle.dump(target, f)
            target = path
        cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone",
               f"--nproc-per-node={nproc_per_node}", "--log-dir", logs, "--redirects", "3", *extra,
               "-m", "dpsim", target, *args]
        env = dict(os.environ, OMP_NUM_THREADS=os.environ.get("OMP_NUM_THREADS", "1"),
                   PYTHONPATH=os.pathsep.join(p for p in sys.path if p))  # functions pickled by reference resolve
        # its own session, so that a timeout can kill torchrun and every worker it started
        proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
                                start_new_session=True)
        try:
            _, stderr = proc.communicate(timeout=timeout)
        except BaseException:
            stop_tree(proc)
            raise
        finally:
            outputs = _rank_logs(logs, nproc_per_node)
            print_rank_outputs(outputs)
        if proc.returncode != 0:
            raise RuntimeError(_failure_message(proc.returncode, stderr, outputs))


def _failure_message(code: int, stderr: str, outputs: list[str]) -> str:
    """Which rank failed first (from torchrun's "Root Cause" summary), its output, then that summary."""
    found = re.search(r"Root Cause.*?rank\s*:\s*(\d+)\s*\(local_rank:\s*(\d+)\)\s*exitcode\s*:\s*(-?\d+)",
                      stderr, re.S)
    if not found:
        return f"torchrun failed (exit code {code}):\n{stderr[-3000:]}"
    summary = stderr[stderr.find("====="):] if "=====" in stderr else stderr
    rank, local, exitcode = (int(g) for g in found.groups())
    output = outputs[local][-3000:] if local < len(outputs) and outputs[local] else "(it printed nothing)\n"
    return (f"torchrun failed (exit code {code}): rank {rank} failed first (exit code {exitcode}).\n\n"
            f"Output of rank {rank}:\n{output}\ntorchrun's summary:\n{summary[-3000:]}")


def _rank_logs(logs: str, nproc: int) -> list[str]:
    """Last attempt's stdout+stderr of each local rank, from torchrun's --log-dir."""
    found: dict[int, tuple[str, str]] = {}
    for root, _, files in os.walk(logs):
        parts = root.replace(os.sep, "/").split("/")
        attempt = next((p for p in parts if p.startswith("attempt_")), "attempt_0")
        rank = parts[-1]
        if not rank.isdigit() or int(rank) >= nproc:
            continue
        text = ""
        for name in ("stdout.log", "stderr.log"):
            if name in files:
                text += open(os.path.join(root, name), encoding="utf-8", errors="replace").read()
        r = int(rank)
        if r not in found or int(attempt.split("_")[1]) >= int(found[r][0].split("_")[1]):
            found[r] = (attempt, text)
    return [found.get(r, ("", ""))[1] for r in range(nproc)]

"""Benchmarks that print figures (not timed tests: compare ratios from one run).

    python -m dpsim.bench launch [--repeats 5]

Median wall time of a trivial all_reduce on 2 and 4 ranks through dpsim.launch
and through torch.multiprocessing.spawn, measured in the same run, and their ratio.
"""
from __future__ import annotations

import argparse
import socket
import statistics
import sys
import time
from datetime import timedelta
from typing import Callable

import torch
import torch.distributed as dist
import torch.multiprocessing as mp

from ._backend import loopback_interface
from ._launch import launch


def trivial_all_reduce(rank: int, world_size: int) -> float:
    t = torch.ones(1)
    dist.all_reduce(t)
    return t.item()


def _spawned_rank(rank: int, world_size: int, listener: socket.socket) -> None:
    """mp.spawn's version of the same work, with the store on the same loopback socket."""
    import os

    if loopback_interface():
        os.environ["GLOO_SOCKET_IFNAME"] = loopback_interface()
    torch.set_num_threads(1)
    port = listener.getsockname()[1]
    store = dist.TCPStore("127.0.0.1", port, world_size, is_master=rank == 0, timeout=timedelta(seconds=60),
                          master_listen_fd=listener.fileno() if rank == 0 else None)
    dist.init_process_group("gloo", store=store, rank=rank, world_size=world_size)
    trivial_all_reduce(rank, world_size)
    dist.destroy_process_group()
    if rank == 0:
        store.wait([f"left/{r}" for r in range(1, world_size)])
    else:
        store.set(f"left/{rank}", b"1")


def _with_spawn(world_size: int) -> None:
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(128)
    try:
        mp.spawn(_spawned_rank, args=(world_size, listener), nprocs=world_size, join=True)
    finally:
        listener.close()


def _with_launch(world_size: int) -> None:
    launch(trivial_all_reduce, world_size=world_size)


def _median(run: Callable[[int], None], world_size: int, repeats: int) -> float:
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        run(world_size)
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def bench_launch(repeats: int = 5, world_sizes: tuple[int, ...] = (2, 4)) -> dict[int, tuple[float, float]]:
    """{world_size: (dpsim.launch median s, mp.spawn median s)}; prints a table."""
    import contextlib
    import io

    quiet = contextlib.redirect_stdout(io.StringIO())
    with quiet:
        start = time.perf_counter()
        _with_launch(2)
        cold = time.perf_counter() - start
    rows = {}
    for ws in world_sizes:
        with contextlib.redirect_stdout(io.StringIO()):
            ours = _median(_with_launch, ws, repeats)
        theirs = _median(_with_spawn, ws, repeats)
        rows[ws] = (ours, theirs)
    print(f"trivial all_reduce, gloo, median of {repeats} runs each, measured in this run")
    print(f"{'ranks':>5}  {'dpsim.launch':>12}  {'mp.spawn':>9}  {'launch/spawn':>12}")
    for ws, (ours, theirs) in rows.items():
        print(f"{ws:>5}  {ours:>10.3f} s  {theirs:>7.3f} s  {ours / theirs:>12.3f}")
    print(f"first dpsim.launch in this process (starts its fork server): {cold:.3f} s")
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m dpsim.bench", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("what", choices=["launch"])
    parser.add_argument("--repeats", type=int, default=5)
    opts = parser.parse_args(argv)
    bench_launch(opts.repeats)
    return 0


if __name__ == "__main__":
    sys.exit(main())

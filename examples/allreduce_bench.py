"""How fast is all-reduce here? Bandwidth per message size, as nccl-tests reports it.

    torchrun --standalone --nproc-per-node 2 examples/allreduce_bench.py
    torchrun --nnodes 2 --nproc-per-node 8 --rdzv-backend c10d \
             --rdzv-endpoint HOST:29500 examples/allreduce_bench.py --max-bytes 1073741824

Each process takes a GPU of its own (NCCL) when there is one per local rank, else
the CPU (gloo). For each size the table shows

    time   the slowest rank's mean seconds per dist.all_reduce (the collective ends
           when its slowest member does)
    algbw  bytes / time
    busbw  algbw * 2(n-1)/n, nccl-tests' "bus bandwidth" (its doc/PERFORMANCE.md): a
           ring all-reduce moves 2(n-1)/n bytes per byte over each rank's link, so
           busbw compares with the link's speed whatever the number of ranks n

and then fits chapter 2's model of a ring all-reduce, t = 2(n-1) alpha + 2(n-1)/n S beta,
to the times: alpha is the cost of one message, 1/beta the link's bandwidth.
"""
import argparse
import os
import time

import torch
import torch.distributed as dist


def timed_all_reduce(x: torch.Tensor, iters: int, warmup: int) -> float:
    """The slowest rank's mean seconds per all_reduce of x."""
    for _ in range(warmup):
        dist.all_reduce(x)
    sync(x.device)
    dist.barrier()  # every rank starts the clock together
    start = time.perf_counter()
    for _ in range(iters):
        dist.all_reduce(x)
    sync(x.device)  # NCCL returns before the GPU is done
    seconds = torch.tensor([(time.perf_counter() - start) / iters], device=x.device)
    dist.all_reduce(seconds, op=dist.ReduceOp.MAX)
    return seconds.item()


def sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def check_sum(device: torch.device, rank: int, n: int) -> None:
    """The "#wrong" column of nccl-tests, in one line: the sum must be right."""
    x = torch.full((1000,), float(rank + 1), device=device)
    dist.all_reduce(x)
    assert torch.all(x == n * (n + 1) / 2), f"rank {rank}: all_reduce gave {x[0].item()}"


def fit(rows: list, n: int) -> tuple:
    """Least-squares alpha (seconds) and beta (seconds per byte) of the ring model."""
    a = torch.tensor([[2.0 * (n - 1), 2.0 * (n - 1) / n * size] for size, _ in rows],
                     dtype=torch.float64)
    t = torch.tensor([[seconds] for _, seconds in rows], dtype=torch.float64)
    alpha, beta = torch.linalg.lstsq(a, t).solution.flatten().tolist()
    return alpha, beta


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--min-bytes", type=int, default=1024)
    parser.add_argument("--max-bytes", type=int, default=16 * 2**20)
    parser.add_argument("--factor", type=int, default=4, help="size step (multiplier)")
    parser.add_argument("--iters", type=int, default=20)
    parser.add_argument("--warmup", type=int, default=5)
    args = parser.parse_args()

    local = int(os.environ.get("LOCAL_RANK", "0"))
    local_world = int(os.environ.get("LOCAL_WORLD_SIZE", "1"))
    gpus = torch.cuda.is_available() and torch.cuda.device_count() >= local_world
    device = torch.device(f"cuda:{local}" if gpus else "cpu")
    if gpus:
        torch.cuda.set_device(device)
    dist.init_process_group("nccl" if gpus else "gloo")  # torchrun's environment
    rank, n = dist.get_rank(), dist.get_world_size()
    check_sum(device, rank, n)

    rows, size = [], args.min_bytes
    while size <= args.max_bytes:
        x = torch.zeros(size // 4, device=device)  # float32: 4 bytes each
        rows.append((x.nbytes, timed_all_reduce(x, args.iters, args.warmup)))
        size *= args.factor

    if rank == 0:
        backend = dist.get_backend()
        print(f"all_reduce, {n} ranks, {backend}, float32, {args.iters} iterations per size")
        print(f"{'bytes':>12} {'time (us)':>11} {'algbw (GB/s)':>13} {'busbw (GB/s)':>13}")
        for nbytes, seconds in rows:
            algbw = nbytes / seconds / 1e9
            busbw = algbw * 2 * (n - 1) / n
            print(f"{nbytes:>12} {seconds * 1e6:>11.1f} {algbw:>13.3f} {busbw:>13.3f}")
        if n > 1 and len(rows) >= 2:
            alpha, beta = fit(rows, n)
            print(f"ring model fit: alpha = {alpha * 1e6:.1f} us per message, "
                  f"1/beta = {1 / beta / 1e9:.3f} GB/s" if beta > 0 else
                  "ring model fit: the times do not grow with size (too few or too small sizes)")
    dist.destroy_process_group()


if __name__ == "__main__":
    main()

"""Which communication backend a launch uses, and why another would not work."""
from __future__ import annotations

import socket

import torch
import torch.distributed as dist

BACKENDS = ("auto", "gloo", "nccl")


def visible_gpus() -> int:
    """CUDA devices this process can see (0 on a CPU build)."""
    return torch.cuda.device_count() if torch.cuda.is_available() else 0


def resolve_backend(backend: str, world_size: int) -> str:
    """'auto' -> NCCL when every rank can have its own GPU, else gloo on CPU tensors.

    An explicit 'nccl' that cannot work fails here, before any process starts:
    NCCL refuses two ranks on one GPU.
    """
    if backend not in BACKENDS:
        raise ValueError(f"unknown backend {backend!r}; use one of {', '.join(map(repr, BACKENDS))}")
    gpus = visible_gpus()
    nccl = dist.is_nccl_available()
    if backend == "auto":
        return "nccl" if nccl and 0 < world_size <= gpus else "gloo"
    if backend == "nccl":
        if not nccl:
            raise RuntimeError(
                "backend='nccl' is not available in this torch build (a CPU-only wheel?). "
                "Use backend='gloo' or 'auto', or install a CUDA build of torch (see README)."
            )
        if world_size > gpus:
            raise ValueError(
                f"backend='nccl' needs one GPU per rank: world_size={world_size} but {gpus} GPU(s) are visible, "
                "and NCCL refuses two ranks on one GPU. Use world_size <= "
                f"{gpus}, or backend='gloo' (or 'auto', which picks gloo here)."
            )
    return backend


def loopback_interface() -> str | None:
    """Name of the loopback interface ('lo' on Linux, 'lo0' on macOS), if found."""
    try:
        names = [name for _, name in socket.if_nameindex()]
    except OSError:
        return None
    for name in ("lo", "lo0"):
        if name in names:
            return name
    return None

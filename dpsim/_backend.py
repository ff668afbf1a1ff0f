"""Which communication backend a launch uses, and why another would not work.

The rule, for `world_size` ranks on one machine (under torchrun: the ranks on
this node, LOCAL_WORLD_SIZE):

=========  ==========================  ======================  ===============
backend    GPUs visible                group (init string)     rank_device()
=========  ==========================  ======================  ===============
'auto'     >= world_size, NCCL built   'cpu:gloo,cuda:nccl'    cuda:LOCAL_RANK
'auto'     fewer (0, or 1 for 2 ranks) 'gloo'                  cpu
'nccl'     >= world_size, NCCL built   'cpu:gloo,cuda:nccl'    cuda:LOCAL_RANK
'nccl'     fewer, or no NCCL           ValueError/RuntimeError before any process starts
'gloo'     any                         'gloo'                  cpu
=========  ==========================  ======================  ===============

A GPU group is a *mixed* group: NCCL carries CUDA tensors and gloo carries CPU
tensors, so code written for CPU tensors (every chapter) runs unchanged on a
GPU machine, and code that moves tensors to ``dpsim.rank_device()`` uses NCCL.
An NCCL-only group would refuse CPU tensors ("No backend type associated with
device type cpu"). Explicit 'nccl' therefore means the same mixed group.

NCCL refuses two ranks on one GPU, so 2+ ranks on a 1-GPU machine get gloo on
CPU tensors under 'auto', and one rank on it gets the GPU.
"""
from __future__ import annotations

import socket

import torch
import torch.distributed as dist

BACKENDS = ("auto", "gloo", "nccl")
MIXED = "cpu:gloo,cuda:nccl"  # gloo for CPU tensors, NCCL for CUDA tensors


def visible_gpus() -> int:
    """CUDA devices this process can see (0 on a CPU build)."""
    return torch.cuda.device_count() if torch.cuda.is_available() else 0


def choose_backend(backend: str, world_size: int, gpus: int, nccl: bool) -> str:
    """The string for ``init_process_group``, from the request and the machine alone (no torch calls).

    `world_size`: ranks on this machine; `gpus`: CUDA devices visible; `nccl`: NCCL built into torch.
    Returns 'gloo' or MIXED ('cpu:gloo,cuda:nccl'); raises for an explicit 'nccl' that cannot work.
    """
    if backend not in BACKENDS:
        raise ValueError(f"unknown backend {backend!r}; use one of {', '.join(map(repr, BACKENDS))}")
    one_gpu_each = nccl and 0 < world_size <= gpus
    if backend == "auto":
        return MIXED if one_gpu_each else "gloo"
    if backend == "nccl":
        if not nccl:
            raise RuntimeError(
                "backend='nccl' is not available in this torch build (a CPU-only wheel?). "
                "Use backend='gloo' or 'auto', or install a CUDA build of torch (see README)."
            )
        if not one_gpu_each:
            raise ValueError(
                f"backend='nccl' needs one GPU per rank: world_size={world_size} but {gpus} GPU(s) are visible, "
                "and NCCL refuses two ranks on one GPU. Use world_size <= "
                f"{gpus}, or backend='gloo' (or 'auto', which picks gloo here)."
            )
        return MIXED
    return "gloo"


def resolve_backend(backend: str, world_size: int) -> str:
    """choose_backend() for this machine: 'auto' -> the mixed gloo+NCCL group when every
    rank can have its own GPU, else gloo on CPU tensors.

    An explicit 'nccl' that cannot work fails here, before any process starts:
    NCCL refuses two ranks on one GPU.
    """
    return choose_backend(backend, world_size, visible_gpus(), dist.is_nccl_available())


def device_backends(backend: str) -> dict[str, str]:
    """'cpu:gloo,cuda:nccl' -> {'cpu': 'gloo', 'cuda': 'nccl'}; a bare name maps to itself under '*'."""
    backend = str(backend).lower()
    if ":" not in backend:
        return {"*": backend}
    pairs = (part.split(":", 1) for part in backend.split(",") if part.strip())
    return {device.strip(): name.strip() for device, name in pairs}


def cuda_backend(backend: str) -> bool:
    """Does a group with this backend string carry CUDA tensors with NCCL (so ranks bind to a GPU)?

    True for 'nccl', 'cpu:gloo,cuda:nccl' and 'cuda:nccl'; False for 'gloo',
    'cpu:gloo' and 'cpu:gloo,cuda:gloo' (gloo can move CUDA tensors, but dpsim
    uses gloo on CPU tensors).
    """
    found = device_backends(backend)
    return found.get("cuda", found.get("*")) == "nccl"


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

"""Where a rank's tensors live."""
from __future__ import annotations

import os

import torch
import torch.distributed as dist

from ._backend import cuda_backend


def group_backend() -> str:
    """The default group's device:backend pairs, e.g. 'cpu:gloo,cuda:nccl' or 'cpu:gloo,cuda:gloo'.

    dist.get_backend() returns the string given to init_process_group (and
    'undefined' when none was given), so ask for the group's configuration.
    """
    get_config = getattr(dist, "get_backend_config", None)
    return str(get_config() if get_config is not None else dist.get_backend())


def rank_device() -> torch.device:
    """``cuda:LOCAL_RANK`` when the group carries CUDA tensors with NCCL, else the CPU.

    That is: in dpsim's mixed 'cpu:gloo,cuda:nccl' group (and in an NCCL-only
    group); a gloo group, or no group, means the CPU. Works under dpsim.launch
    and under torchrun, which both set LOCAL_RANK.
    """
    if dist.is_initialized() and cuda_backend(group_backend()):
        return torch.device("cuda", int(os.environ.get("LOCAL_RANK", "0")))
    return torch.device("cpu")

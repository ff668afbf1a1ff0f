"""Where a rank's tensors live."""
from __future__ import annotations

import os

import torch
import torch.distributed as dist


def rank_device() -> torch.device:
    """``cuda:LOCAL_RANK`` when the group runs NCCL, else the CPU.

    Works under dpsim.launch and under torchrun, which both set LOCAL_RANK.
    """
    if dist.is_initialized() and dist.get_backend() == "nccl":
        return torch.device("cuda", int(os.environ.get("LOCAL_RANK", "0")))
    return torch.device("cpu")

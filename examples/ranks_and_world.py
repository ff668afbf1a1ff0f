"""The first chapter's rank function as a script: plain torch.distributed.

On one machine, any of:
    python -m dpsim examples/ranks_and_world.py:sum_of_ranks --world-size 4
    torchrun --standalone --nproc-per-node 2 -m dpsim examples/ranks_and_world.py:sum_of_ranks

On two machines (run on each, --node-rank 0 and 1; HOST is node 0's address):
    torchrun --nnodes 2 --node-rank 0 --nproc-per-node 8 --rdzv-backend c10d \
             --rdzv-endpoint HOST:29500 -m dpsim examples/ranks_and_world.py:sum_of_ranks
"""
import torch
import torch.distributed as dist


def sum_of_ranks(rank, world_size):
    x = torch.tensor([float(rank)])
    print(f"I am rank {rank} of {world_size}; I hold {x.item():g}")
    dist.all_reduce(x)  # every rank ends with the sum 0 + 1 + ... + (world_size - 1)
    print(f"after all_reduce rank {rank} holds {x.item():g}")
    assert x.item() == world_size * (world_size - 1) / 2
    return x.item()

"""DDP training the canonical way: plain torch.distributed, no dpsim inside.

    torchrun --standalone --nproc-per-node 2 examples/train_ddp.py --epochs 4 --checkpoint ckpt.pt

Run the same command again and it resumes from the checkpoint. On CPUs the ranks
use gloo. With a GPU for every local rank they use NCCL for CUDA tensors (and
gloo for any CPU tensor), one GPU per rank.

For torchrun to restart failed workers itself, give each attempt a fresh store:

    export TORCH_DISABLE_SHARE_RDZV_TCP_STORE=1
    torchrun --standalone --nproc-per-node 2 --max-restarts 1 examples/train_ddp.py

Without the variable, torch (2.11 to 2.15 at least) hands the restarted workers the
store of the attempt that failed, and init_process_group can read the dead workers'
addresses from it: the restart fails ("Gloo connectFullMesh failed ... Connection
refused"; NCCL: pytorch/pytorch#135712) or hangs, depending on timing. The variable acts on the c10d rendezvous (--standalone,
--rdzv-backend c10d); the static one (--master-addr, --master-port) always keeps
its store, so restart with c10d. Chapter 8 of the book runs both cases.
"""
import argparse
import os

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, DistributedSampler, TensorDataset

parser = argparse.ArgumentParser()
parser.add_argument("--epochs", type=int, default=4)
parser.add_argument("--checkpoint", default="checkpoint.pt")
args = parser.parse_args()

# torchrun sets RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE, MASTER_ADDR and MASTER_PORT.
local_rank = int(os.environ["LOCAL_RANK"])
gpu = torch.cuda.is_available() and int(os.environ["LOCAL_WORLD_SIZE"]) <= torch.cuda.device_count()
if gpu:
    torch.cuda.set_device(local_rank)  # one GPU per rank: NCCL refuses two ranks on one GPU
device = torch.device("cuda", local_rank) if gpu else torch.device("cpu")
dist.init_process_group("cpu:gloo,cuda:nccl" if gpu else "gloo")  # the rest comes from the environment
rank = dist.get_rank()

torch.manual_seed(0)  # every rank builds the same data and the same initial model
x = torch.randn(256, 8)
y = x @ torch.randn(8, 1) + 0.1 * torch.randn(256, 1)
dataset = TensorDataset(x, y)
sampler = DistributedSampler(dataset, shuffle=True, seed=0)  # each rank gets its own share
loader = DataLoader(dataset, batch_size=16, sampler=sampler)
model = nn.Sequential(nn.Linear(8, 32), nn.ReLU(), nn.Linear(32, 1)).to(device)
optimizer = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)

start = 0
if os.path.exists(args.checkpoint):  # every rank loads, each onto its own device
    state = torch.load(args.checkpoint, map_location=device)
    model.load_state_dict(state["model"])
    optimizer.load_state_dict(state["optimizer"])
    start = state["epoch"] + 1
    if rank == 0:
        print(f"resumed from epoch {state['epoch']}", flush=True)
model = DDP(model, device_ids=[local_rank] if gpu else None)

for epoch in range(start, args.epochs):
    sampler.set_epoch(epoch)  # a new shuffle each epoch, the same on every rank
    total = torch.zeros(2, device=device)  # this rank's summed loss and sample count
    for xb, yb in loader:
        xb, yb = xb.to(device), yb.to(device)
        loss = F.mse_loss(model(xb), yb)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()  # DDP averages the gradients across ranks here
        optimizer.step()
        total += torch.stack([loss.detach() * len(xb), torch.tensor(float(len(xb)), device=device)])
    dist.all_reduce(total)  # for the report only: the mean loss over every rank's samples
    if rank == 0:
        print(f"epoch {epoch} loss {(total[0] / total[1]).item():.6f}", flush=True)
        state = {"model": model.module.state_dict(), "optimizer": optimizer.state_dict(), "epoch": epoch}
        torch.save(state, args.checkpoint + ".tmp")
        os.replace(args.checkpoint + ".tmp", args.checkpoint)  # never a half-written checkpoint
    dist.barrier()  # nobody goes on (or reads the file) before rank 0 has saved

dist.destroy_process_group()

"""nn.DataParallel's algorithm, re-created with threads so it runs on a CPU.

Without GPUs, nn.DataParallel just calls the module: there is nothing to see.
ThreadDataParallel does what DataParallel does on several GPUs, step by step,
with CPU "devices" played by threads:

1. replicate: each replica's parameters are differentiable views of the
   module's own, so autograd routes every replica's gradient back to them;
2. scatter: split the batch along dim 0 with ``Tensor.chunk`` semantics, as
   DataParallel's ``comm.scatter`` does: shards of ceil(n / k) samples, the
   last one smaller, and fewer than k shards when n is small (10 samples on
   3 devices: [4, 4, 2]; 4 samples on 3 devices: [2, 2]);
3. replicate the module, once per shard (``device_ids[:len(inputs)]``);
4. parallel_apply: run the replicas at the same time, one thread each, with
   the caller's grad mode and CPU autocast state;
5. gather: concatenate the outputs on "device 0" (the caller).

The loss is then computed once on the gathered output, and one backward()
through one autograd graph sums the replicas' contributions into the module's
.grad. Replica 0 shares the module's buffers (DataParallel's rule); the other
replicas' buffer updates are thrown away.

Limits of the re-creation: everything runs on one CPU device. With real GPUs,
autograd runs each replica's backward on that device's own worker thread, and
the broadcast's backward (ReduceAddCoalesced) sums the replicas' gradients
onto device 0; here one thread runs the whole backward. Scatter and gather are
views and a concatenation, not device-to-device copies.
"""
from __future__ import annotations

import threading
import time
from typing import Any

import torch
from torch import nn


class ThreadDataParallel(nn.Module):
    """DataParallel over `replicas` threads on the CPU.

    `last_timings` holds the seconds spent in each phase of the last forward.
    """

    def __init__(self, module: nn.Module, replicas: int = 2) -> None:
        super().__init__()
        if replicas < 1:
            raise ValueError(f"replicas must be >= 1, got {replicas}")
        self.module = module
        self.replicas = replicas
        self.last_timings: dict[str, float] = {}

    def replicate(self, count: int | None = None) -> list[nn.Module]:
        """Shallow module copies, as nn.parallel.replicate makes them.

        Parameters become views of the originals (differentiable, so gradients
        flow back); buffers are shared by replica 0 and copied for the others.
        """
        replicas = []
        for i in range(self.replicas if count is None else count):
            copies = {m: m._replicate_for_data_parallel() for m in self.module.modules()}
            for original, copy in copies.items():
                for name, child in original._modules.items():
                    copy._modules[name] = None if child is None else copies[child]
                for name, p in original._parameters.items():
                    setattr(copy, name, None if p is None else p.view_as(p))
                for name, b in original._buffers.items():
                    copy._buffers[name] = b if i == 0 or b is None else b.clone()
            replicas.append(copies[self.module])
        return replicas

    def forward(self, batch: torch.Tensor) -> torch.Tensor:
        clock, timings = time.perf_counter(), {}

        def lap(name: str) -> None:
            nonlocal clock
            now = time.perf_counter()
            timings[name] = now - clock
            clock = now

        shards = batch.chunk(self.replicas)  # scatter, as comm.scatter cuts: maybe fewer shards
        lap("scatter")
        replicas = self.replicate(len(shards))  # DataParallel replicates to device_ids[:len(inputs)]
        lap("replicate")
        outputs: list[Any] = [None] * len(shards)
        errors: list[BaseException] = []
        # grad mode and autocast are per thread in torch: carry the caller's over, as
        # parallel_apply does (it carries autocast's on/off; here the dtype too)
        grad_enabled = torch.is_grad_enabled()
        autocast = torch.get_autocast_dtype("cpu"), torch.is_autocast_enabled("cpu")

        def run(i: int) -> None:
            try:
                with torch.set_grad_enabled(grad_enabled), torch.autocast("cpu", *autocast):
                    outputs[i] = replicas[i](shards[i])
            except BaseException as exc:  # re-raised in the caller, like parallel_apply
                errors.append(exc)

        threads = [threading.Thread(target=run, args=(i,)) for i in range(len(shards))]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        if errors:
            raise errors[0]
        lap("parallel_apply")
        out = torch.cat(outputs)  # gather on "device 0"
        lap("gather")
        self.last_timings = timings
        return out

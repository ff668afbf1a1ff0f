"""Does a loss survive being split across ranks?"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import torch


@dataclass
class Decomposition:
    """Result of `decomposes`: the whole-batch loss, the average over shards, and the verdict."""

    whole: float
    averaged: float
    shard_losses: list[float]
    max_grad_gap: float
    ok: bool
    tol: float = 1e-6

    def __str__(self) -> str:
        verdict = "decomposes" if self.ok else "does NOT decompose"
        # 4 digits and a verdict: the last bits of these floats differ from machine to machine
        grads = ("gradients equal up to float rounding" if self.max_grad_gap <= self.tol
                 else f"gradients differ by up to {self.max_grad_gap:.2g}")
        return f"{verdict}: f(whole batch) = {self.whole:.4g}, mean of f(shards) = {self.averaged:.4g}; {grads}"


def decomposes(
    loss_fn: Callable[[torch.Tensor, torch.Tensor], torch.Tensor],
    output: torch.Tensor,
    target: torch.Tensor,
    parts: int = 2,
    tol: float = 1e-6,
) -> Decomposition:
    """Check f([x1, ..., xk]) == (f(x1) + ... + f(xk)) / k, for values and gradients.

    The batch is cut into `parts` equal shards along dim 0, as DDP's ranks
    would see it. DDP averages the shards' gradients, so it trains like one
    process on the whole batch only if the loss passes this check.
    """
    if len(output) % parts:
        raise ValueError(f"batch of {len(output)} cannot be cut into {parts} equal shards")
    out = output.detach().clone().requires_grad_(True)
    whole = loss_fn(out, target)
    (g_whole,) = torch.autograd.grad(whole, out)
    shards = list(zip(out.chunk(parts), target.chunk(parts)))
    shard_losses = [loss_fn(o, t) for o, t in shards]
    averaged = torch.stack(shard_losses).mean()
    (g_avg,) = torch.autograd.grad(averaged, out)
    gap = (g_whole - g_avg).abs().max().item()
    ok = abs(whole.item() - averaged.item()) <= tol * max(1.0, abs(whole.item())) and gap <= tol
    return Decomposition(whole.item(), averaged.item(), [s.item() for s in shard_losses], gap, ok, tol)

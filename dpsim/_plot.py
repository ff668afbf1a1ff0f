"""Figures of per-rank values."""
from __future__ import annotations

from typing import Sequence

import matplotlib.pyplot as plt
import torch


def plot_ranks(
    panels: dict[str, Sequence[torch.Tensor]],
    title: str | None = None,
    ylabel: str = "value",
) -> plt.Figure:
    """One panel per stage (e.g. {"before": [...], "after": [...]}), one bar group per rank.

    Each tensor is one rank's data, flattened; element i of every rank shares a colour.
    """
    fig, axes = plt.subplots(1, len(panels), figsize=(3.2 * len(panels), 2.6), sharey=True, squeeze=False)
    for ax, (name, tensors) in zip(axes[0], panels.items()):
        values = [torch.as_tensor(t).detach().cpu().flatten().tolist() for t in tensors]
        width = 0.8 / max(1, max(len(v) for v in values))
        for rank, vals in enumerate(values):
            for i, v in enumerate(vals):
                ax.bar(rank + (i - (len(vals) - 1) / 2) * width, v, width, color=f"C{i}")
                ax.annotate(f"{v:g}", (rank + (i - (len(vals) - 1) / 2) * width, v),
                            ha="center", va="bottom", fontsize=8)
        ax.set_xticks(range(len(values)), [f"rank {r}" for r in range(len(values))])
        ax.set_title(name)
        ax.spines[["top", "right"]].set_visible(False)
    axes[0][0].set_ylabel(ylabel)
    if title:
        fig.suptitle(title)
    fig.tight_layout()
    plt.close(fig)  # the caller displays it; no second copy from the inline backend
    return fig

"""Figures of per-rank values."""
from __future__ import annotations

import io
from typing import Sequence

import matplotlib.pyplot as plt
import torch


class RankFigure:
    """A figure that shows as a PNG, and whose text form lists the values it draws.

    Notebooks store both; nbval compares the text, so the figure's data is checked.
    """

    def __init__(self, fig: plt.Figure, summary: str) -> None:
        self.figure, self.summary = fig, summary

    def _repr_png_(self) -> bytes:
        buf = io.BytesIO()
        self.figure.savefig(buf, format="png", bbox_inches="tight")
        return buf.getvalue()

    def __repr__(self) -> str:
        return self.summary


def plot_ranks(
    panels: dict[str, Sequence[torch.Tensor]],
    title: str | None = None,
    ylabel: str = "value",
) -> RankFigure:
    """One panel per stage (e.g. {"before": [...], "after": [...]}), one bar group per rank.

    Each tensor is one rank's data, flattened; element i of every rank shares a colour.
    The text form lists every value (4 significant digits), e.g. for nbval.
    """
    fig, axes = plt.subplots(1, len(panels), figsize=(3.2 * len(panels), 2.6), sharey=True, squeeze=False)
    lines = [title or "plot_ranks"]  # the text form: every value drawn, 4 significant digits
    for ax, (name, tensors) in zip(axes[0], panels.items()):
        values = [torch.as_tensor(t).detach().cpu().flatten().tolist() for t in tensors]
        lines.append(f"{name}: " + "; ".join(f"rank {r} {[float(f'{v:.4g}') for v in vals]}"
                                             for r, vals in enumerate(values)))
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
    return RankFigure(fig, "\n".join(lines))

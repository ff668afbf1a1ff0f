"""The book's matplotlib figures: one style, drawn as SVG, readable on a phone."""
from __future__ import annotations

import io
from typing import Sequence

import matplotlib.pyplot as plt
import torch
from cycler import cycler

from ._svg import COLOURS

# At 5 inches a figure is 360 pt wide; on a phone's 358 px column it shows at about 99%,
# so 10 pt text stays at about 10 px (tests/test_browser.py measures every figure).
STYLE = {
    "figure.figsize": (5.0, 3.0),
    "font.size": 11, "axes.titlesize": 11, "axes.labelsize": 11,
    "xtick.labelsize": 10, "ytick.labelsize": 10, "legend.fontsize": 10,
    "axes.prop_cycle": cycler(color=COLOURS),  # the colours of the book's SVG charts
    "axes.spines.top": False, "axes.spines.right": False,
    "svg.fonttype": "none",  # text stays text: sharp, and sized by the browser
    "svg.hashsalt": "dpsim",  # the same element ids on every run
}
SAVE = {"format": "svg", "bbox_inches": "tight", "metadata": {"Date": None}}  # no timestamp


def figure_style() -> None:
    """Draw this kernel's figures in the book's style, as SVG (a notebook's inline output)."""
    plt.rcParams.update(STYLE)
    try:
        from matplotlib_inline.backend_inline import set_matplotlib_formats
    except ImportError:  # not in IPython: savefig still takes the style
        return
    set_matplotlib_formats("svg", **{k: v for k, v in SAVE.items() if k != "format"})


class RankFigure:
    """A figure that shows as an SVG, and whose text form lists the values it draws.

    Notebooks store both; nbval compares the text, so the figure's data is checked.
    """

    def __init__(self, fig: plt.Figure, summary: str) -> None:
        self.figure, self.summary = fig, summary

    def _repr_svg_(self) -> str:
        buf = io.StringIO()
        with plt.rc_context(STYLE):
            self.figure.savefig(buf, **SAVE)
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
    with plt.rc_context(STYLE):
        return _plot_ranks(panels, title, ylabel)


def _plot_ranks(panels: dict[str, Sequence[torch.Tensor]], title: str | None, ylabel: str) -> RankFigure:
    fig, axes = plt.subplots(1, len(panels), figsize=(2.5 * len(panels), 2.6), sharey=True, squeeze=False)
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
                            ha="center", va="bottom", fontsize=9)
        ax.margins(y=0.2)  # room above the tallest bar for its value, below the title
        ax.set_xticks(range(len(values)), [str(r) for r in range(len(values))])
        ax.set_xlabel("rank")
        ax.set_title(name)
    axes[0][0].set_ylabel(ylabel)
    if title:
        fig.suptitle(title)
    fig.tight_layout()
    plt.close(fig)  # the caller displays it; no second copy from the inline backend
    return RankFigure(fig, "\n".join(lines))

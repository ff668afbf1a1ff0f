"""Step-by-step animation of a ring all-reduce, drawn from a real run's log."""
from __future__ import annotations

import re
from typing import Sequence

import matplotlib.pyplot as plt
from matplotlib import animation


def contributors(value: float) -> list[int]:
    """Rank r starts with 2**r, so a chunk's value in binary names the ranks summed into it."""
    v, bits = int(round(value)), []
    while v:
        bits.append(v & 1)
        v >>= 1
    return [r for r, b in enumerate(bits) if b]


def _icon(path: str) -> str:
    """A player button's icon as inline SVG: no icon font, no glyph a system may lack."""
    return (f'<svg viewBox="0 0 16 16" width="14" height="14" aria-hidden="true" '
            f'style="vertical-align:middle"><path d="{path}" fill="currentColor"/></svg>')


_ICONS = {"fa fa-minus": "&minus;", "fa fa-plus": "+",
          "fa fa-fast-backward": _icon("M2 2h2v12H2z M14 2 5 8l9 6z"),
          "fa fa-step-backward": _icon("M8 2 1 8l7 6z M15 2 8 8l7 6z"),
          "fa fa-play fa-flip-horizontal": _icon("M12 2 3 8l9 6z"),
          "fa fa-pause": _icon("M3 2h3.5v12H3z M9.5 2H13v12H9.5z"),
          "fa fa-play": _icon("M4 2l9 6-9 6z"),
          "fa fa-step-forward": _icon("M1 2l7 6-7 6z M8 2l7 6-7 6z"),
          "fa fa-fast-forward": _icon("M2 2l9 6-9 6z M12 2h2v12h-2z")}
# The player's fixed widths overflow a phone's column: let the frame scale and the buttons wrap
# (after matplotlib's own <style>, so these rules win).
_FIT = ("<style>.animation{display:block;max-width:100%}.animation img{max-width:100%;height:auto}"
        "input[type=range].anim-slider{width:min(374px,90%)}"
        ".anim-buttons{display:flex;flex-wrap:wrap;justify-content:center;gap:2px}</style>")


def _offline(html: str) -> str:
    """matplotlib's player takes its button icons from a CDN stylesheet; draw them inline instead."""
    html = re.sub(r"<link[^>]*font-awesome[^>]*>", "", html, flags=re.S)
    return re.sub(r'<i class="([^"]+)"></i>', lambda m: _ICONS.get(m.group(1), m.group(0)), html) + _FIT


def animate_ring(logs: Sequence[Sequence[dict]], title: str = "ring all-reduce") -> str:
    """Self-contained HTML (frames and player inline, no network) of a ring all-reduce.

    ``logs[rank]`` is that rank's list of steps: dicts with ``step``, ``phase``
    ("start", "reduce-scatter" or "all-gather"), ``send`` and ``recv`` (chunk
    indices, None at start) and ``chunks`` (the first value of each chunk
    after the step). Values must be sums of 2**rank (see `contributors`).
    """
    p, steps = len(logs), len(logs[0])
    fig, ax = plt.subplots(figsize=(0.85 * p + 2.4, 0.45 * p + 0.8))  # small: legible when a phone scales it

    def draw(s: int) -> None:
        ax.clear()
        ax.set_xlim(-1.7, p + 2.2)
        ax.set_ylim(p - 0.4, -1.0)
        ax.axis("off")
        entry = logs[0][s]
        ax.set_title(f"{title}, p={p}: " + ("start" if entry["phase"] == "start"
                                           else f"step {entry['step'] + 1} of {steps - 1} ({entry['phase']})"),
                     fontsize=11)
        for c in range(p):
            ax.text(c, -0.75, f"chunk {c}", ha="center", fontsize=9)
        for r in range(p):
            ax.text(-0.55, r, f"rank {r}", ha="right", va="center", fontsize=10)
            for c, value in enumerate(logs[r][s]["chunks"]):
                who = contributors(value)
                ax.add_patch(plt.Rectangle((c - 0.45, r - 0.4), 0.9, 0.8, color=plt.cm.Blues(0.15 + 0.75 * len(who) / p)))
                label = "all" if len(who) == p else "+".join(map(str, who))
                ax.text(c, r, label, ha="center", va="center", fontsize=10, color="white" if len(who) == p else "black")
            recv = logs[r][s]["recv"]
            if recv is not None:  # this rank just received chunk `recv` from its left neighbour
                ax.add_patch(plt.Rectangle((recv - 0.45, r - 0.4), 0.9, 0.8, fill=False, lw=2.2, ec="#d62728"))
                verb = "added" if entry["phase"] == "reduce-scatter" else "copied"
                ax.text(p - 0.35, r, f"{verb} chunk {recv}\nfrom rank {(r - 1) % p}", va="center",
                        fontsize=9, color="#d62728")

    anim = animation.FuncAnimation(fig, draw, frames=steps, interval=1200)
    html = anim.to_jshtml(default_mode="once")
    plt.close(fig)
    html = _offline(html)
    ids = sorted(set(re.findall(r"_anim_[a-z]+([0-9a-f]{32})", html)))
    for i, uid in enumerate(ids):  # matplotlib uses random ids; fixed ones keep the output stable
        html = html.replace(uid, f"ring{i}")
    return html

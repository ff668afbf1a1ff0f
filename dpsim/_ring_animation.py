"""Step-by-step animation of a ring all-reduce, drawn from a real run's log.

One SVG per step, and a player made of radio buttons and CSS alone: it works in
the static book, in Jupyter and on a phone, with no script and no network, and
its text stays sharp at any width.
"""
from __future__ import annotations

import hashlib
from html import escape
from typing import Sequence

CELL_W, CELL_H, GAP = 64, 40, 6  # one chunk of one rank
LEFT, TOP, NOTES = 64, 54, 168  # rank labels; title and chunk labels; "added chunk ..." notes
LIGHT, DARK = (222, 235, 247), (8, 81, 156)  # a chunk summed over 1 rank ... over all ranks
RED = "#d62728"


def contributors(value: float) -> list[int]:
    """Rank r starts with 2**r, so a chunk's value in binary names the ranks summed into it."""
    v, bits = int(round(value)), []
    while v:
        bits.append(v & 1)
        v >>= 1
    return [r for r, b in enumerate(bits) if b]


def _fill(share: float) -> str:
    """Light blue for a chunk that holds one rank's values, dark blue for all ranks'."""
    rgb = (round(a + (b - a) * share) for a, b in zip(LIGHT, DARK))
    return "#{:02x}{:02x}{:02x}".format(*rgb)


def _frame(logs: Sequence[Sequence[dict]], s: int, title: str) -> str:
    """The SVG of step s: each rank's chunks, who is summed into each, what just arrived."""
    p, steps = len(logs), len(logs[0])
    width, height = LEFT + p * (CELL_W + GAP) + NOTES, TOP + p * (CELL_H + GAP) + 4
    entry = logs[0][s]
    stage = "start" if entry["phase"] == "start" else (
        f"step {entry['step'] + 1} of {steps - 1} ({entry['phase']})")
    out = [f'<svg viewBox="0 0 {width} {height}" width="100%" role="img" '
           f'style="max-width:{width}px;font:13px sans-serif">',
           f"<title>{escape(title)}, p={p}: {stage}</title>",
           f'<text x="{width / 2:.0f}" y="18" text-anchor="middle" font-size="15">'
           f"{escape(title)}, p={p}: {stage}</text>"]
    x = lambda c: LEFT + c * (CELL_W + GAP)  # noqa: E731
    y = lambda r: TOP + r * (CELL_H + GAP)  # noqa: E731
    for c in range(p):
        out.append(f'<text x="{x(c) + CELL_W / 2:.0f}" y="{TOP - 10}" text-anchor="middle">chunk {c}</text>')
    for r in range(p):
        mid = y(r) + CELL_H / 2 + 5
        out.append(f'<text x="{LEFT - 8}" y="{mid:.0f}" text-anchor="end">rank {r}</text>')
        for c, value in enumerate(logs[r][s]["chunks"]):
            who = contributors(value)
            full, dark = len(who) == p, len(who) / p > 0.6
            out.append(f'<rect x="{x(c)}" y="{y(r)}" width="{CELL_W}" height="{CELL_H}" '
                       f'fill="{_fill(len(who) / p)}"/>')
            label = "all" if full else "+".join(map(str, who))
            out.append(f'<text x="{x(c) + CELL_W / 2:.0f}" y="{mid:.0f}" text-anchor="middle" '
                       f'fill="{"white" if dark else "black"}">{label}</text>')
        recv = logs[r][s]["recv"]
        if recv is not None:  # this rank just received chunk `recv` from its left neighbour
            out.append(f'<rect x="{x(recv) + 1}" y="{y(r) + 1}" width="{CELL_W - 2}" '
                       f'height="{CELL_H - 2}" fill="none" stroke="{RED}" stroke-width="3"/>')
            verb = "added" if entry["phase"] == "reduce-scatter" else "copied"
            out.append(f'<text x="{x(p) + 4}" y="{mid - 8:.0f}" fill="{RED}">{verb} chunk {recv}'
                       f'<tspan x="{x(p) + 4}" dy="16">from rank {(r - 1) % p}</tspan></text>')
    return "".join(out) + "</svg>"


def animate_ring(logs: Sequence[Sequence[dict]], title: str = "ring all-reduce") -> str:
    """Self-contained HTML (no script, no network) that steps through a ring all-reduce.

    ``logs[rank]`` is that rank's list of steps: dicts with ``step``, ``phase``
    ("start", "reduce-scatter" or "all-gather"), ``send`` and ``recv`` (chunk
    indices, None at start) and ``chunks`` (the first value of each chunk
    after the step). Values must be sums of 2**rank (see `contributors`).
    """
    steps = len(logs[0])
    uid = "ring" + hashlib.sha1(repr((logs, title)).encode()).hexdigest()[:8]  # stable, and unique
    names = ["start"] + [str(s) for s in range(1, steps)]
    rules = "".join(f"#{uid}-{s}:checked~.frames .f{s}{{display:block}}"
                    f"#{uid}-{s}:checked~.steps label[for={uid}-{s}]{{background:#1f77b4;color:#fff}}"
                    for s in range(steps))
    style = (f"<style>#{uid}{{margin:0.5em 0}}#{uid} input{{position:absolute;opacity:0}}"
             f"#{uid} .frame{{display:none}}#{uid} label{{display:inline-block;cursor:pointer;"
             f"border:1px solid #888;border-radius:4px;padding:2px 9px;margin:2px;"
             f"font:13px sans-serif;user-select:none}}"
             f"#{uid} svg{{display:block;margin:0 auto}}"
             f"#{uid} .nav{{display:flex;justify-content:center;gap:4px}}"
             f"#{uid} .steps{{text-align:center;font:13px sans-serif}}"
             f"#{uid} input:focus-visible~.steps{{outline:2px solid #1f77b4}}{rules}</style>")
    radios = "".join(f'<input type="radio" name="{uid}" id="{uid}-{s}" aria-label="{names[s]}"'
                     f'{" checked" if s == 0 else ""}>' for s in range(steps))
    buttons = "".join(f'<label for="{uid}-{s}">{names[s]}</label>' for s in range(steps))
    frames = []
    for s in range(steps):
        back = f'<label for="{uid}-{s - 1}">&larr; back</label>' if s else ""
        on = f'<label for="{uid}-{s + 1}">next &rarr;</label>' if s + 1 < steps else ""
        frames.append(f'<div class="frame f{s}">{_frame(logs, s, title)}'
                      f'<div class="nav">{back}{on}</div></div>')
    return (f'<div class="dpsim-ring" id="{uid}">{style}{radios}'
            f'<div class="steps">step: {buttons}</div>'
            f'<div class="frames">{"".join(frames)}</div></div>')

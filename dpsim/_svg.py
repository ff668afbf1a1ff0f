"""Small, deterministic SVG bar charts of per-rank values (text, so widgets can ship many)."""
from __future__ import annotations

import re
from html import escape, unescape
from typing import Sequence

_COLOURS = ["#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f"]


def _open_svg(width: float, height: float) -> str:
    """An SVG that scales down with its column (phones) and never grows past its size."""
    return (f'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {width:g} {height:g}" width="100%" '
            f'style="max-width:{width:g}px;height:auto" font-family="sans-serif" font-size="10">')


def _fmt(v: float) -> str:
    """3 significant digits, and a short exponent for large values (1.69e4, not 1.69e+04)."""
    if abs(v) < 1e4:
        return f"{v:.3g}"
    mantissa, exponent = f"{v:.2e}".split("e")
    return f"{mantissa}e{int(exponent)}"


def bars_svg(
    panels: dict[str, Sequence[Sequence[float]]],
    title: str = "",
    panel_width: int = 260,
    height: int = 190,
    labels: dict[str, Sequence[str]] | None = None,
) -> str:
    """One panel per stage, one bar group per rank, element i of each rank in colour i.

    A rank with no values (e.g. a non-destination rank of gather) shows "empty".
    `labels[panel]` names that panel's groups (default "rank 0", "rank 1", ...).
    """
    values = [v for ranks in panels.values() for vals in ranks for v in vals]
    labelled = any(0 < len(vals) <= 4 for ranks in panels.values() for vals in ranks)
    # room above the tallest bar for its value label, below the panel titles
    head = 34 if title else 16  # the title and the panel names
    top, bottom, left = head + (10 if labelled else 0), 28, 10
    plot_h = height - top - bottom
    hi, lo = max(values + [0.0]), min(values + [0.0])
    span = (hi - lo) or 1.0
    y = lambda v: top + (hi - v) / span * plot_h  # noqa: E731
    width = left + panel_width * len(panels)
    out, value_labels = [_open_svg(width, height)], []
    if title:
        out.append(f'<text x="{width / 2:.0f}" y="14" text-anchor="middle" font-size="12">{escape(title)}</text>')
    for p, (name, ranks) in enumerate(panels.items()):
        x0 = left + p * panel_width
        out.append(f'<text x="{x0 + panel_width / 2:.0f}" y="{head - 6}" text-anchor="middle" '
                   f'font-weight="bold">{escape(name)}</text>')
        out.append(f'<line x1="{x0}" x2="{x0 + panel_width - 10}" y1="{y(0):.1f}" y2="{y(0):.1f}" stroke="#444"/>')
        group = (panel_width - 10) / max(1, len(ranks))
        for r, vals in enumerate(ranks):
            gx = x0 + r * group
            name_r = labels[name][r] if labels and name in labels else f"rank {r}"
            out.append(f'<text x="{gx + group / 2:.1f}" y="{height - 10}" text-anchor="middle">{escape(name_r)}</text>')
            if not vals:
                out.append(f'<text x="{gx + group / 2:.1f}" y="{y(0) - 4:.1f}" text-anchor="middle" '
                           f'fill="#888">empty</text>')
                continue
            bw = group * 0.8 / len(vals)
            for i, v in enumerate(vals):
                bx = gx + group * 0.1 + i * bw
                y1, y2 = sorted((y(v), y(0)))
                out.append(f'<rect x="{bx:.1f}" y="{y1:.1f}" width="{bw:.1f}" height="{max(y2 - y1, 0.5):.1f}" '
                           f'fill="{_COLOURS[i % len(_COLOURS)]}"><title>{escape(name)}, {escape(name_r)}'
                           f'{f", element {i}" if len(vals) > 1 else ""}: {_fmt(v)}</title></rect>')
                if len(vals) <= 4:  # drawn last, with a white outline: never hidden by a bar
                    value_labels.append(f'<text x="{bx + bw / 2:.1f}" y="{y1 - 2:.1f}" text-anchor="middle" '
                                        f'font-size="8" stroke="white" stroke-width="2" '
                                        f'paint-order="stroke">{_fmt(v)}</text>')
    out += value_labels
    out.append("</svg>")
    return "".join(out)


def lines_svg(
    series: dict[str, Sequence[float]],
    title: str = "",
    xlabel: str = "step",
    width: int = 420,
    height: int = 200,
) -> str:
    """One line per named series (e.g. per rank) over steps 0, 1, 2, ..."""
    top, bottom, left, right = 34 if title else 16, 30, 46, 110
    values = [v for vals in series.values() for v in vals] or [0.0]
    hi, lo = max(values), min(values)
    span = (hi - lo) or 1.0
    steps = max((len(v) for v in series.values()), default=1)
    px = lambda i: left + i * (width - left - right) / max(1, steps - 1)  # noqa: E731
    py = lambda v: top + (hi - v) / span * (height - top - bottom)  # noqa: E731
    out = [_open_svg(width, height)]
    if title:
        out.append(f'<text x="{width / 2:.0f}" y="14" text-anchor="middle" font-size="12">{escape(title)}</text>')
    for v in (lo, hi):
        out.append(f'<text x="{left - 4}" y="{py(v) + 3:.1f}" text-anchor="end">{_fmt(v)}</text>')
    out.append(f'<line x1="{left}" x2="{width - right}" y1="{height - bottom}" y2="{height - bottom}" stroke="#444"/>')
    out.append(f'<text x="{(left + width - right) / 2:.0f}" y="{height - 6}" text-anchor="middle">{escape(xlabel)}</text>')
    dashes = ["", "6,3", "2,2", "8,2,2,2"]
    for k, (name, vals) in enumerate(series.items()):
        colour = _COLOURS[k % len(_COLOURS)]
        points = " ".join(f"{px(i):.1f},{py(v):.1f}" for i, v in enumerate(vals))
        out.append(f'<polyline points="{points}" fill="none" stroke="{colour}" stroke-width="2" '
                   f'stroke-dasharray="{dashes[k % len(dashes)]}"><title>{escape(name)}: '
                   f'{", ".join(_fmt(v) for v in vals)}</title></polyline>')
        out.append(f'<text x="{width - right + 8}" y="{top + 12 + 14 * k}" fill="{colour}">{escape(name)}</text>')
    out.append("</svg>")
    return "".join(out)


def svg_text(svg: str) -> str:
    """The words and values an SVG shows (labels and hover titles), one line, for text checks."""
    return " | ".join(unescape(t) for t in re.findall(r"<(?:text|title)[^>]*>([^<]*)</(?:text|title)>", svg))

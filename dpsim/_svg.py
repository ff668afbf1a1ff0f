"""Small, deterministic SVG bar charts of per-rank values (text, so widgets can ship many)."""
from __future__ import annotations

import re
from html import escape, unescape
from typing import Any, Sequence

# matplotlib's tab10 hues, with orange and pink darkened to a contrast of at least 3:1 on
# white (WCAG's minimum for parts of a graphic); tests/test_widgets.py checks it.
COLOURS = ["#1f77b4", "#d95f02", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#d0349a", "#7f7f7f"]


def _open_svg(width: float, height: float, style: str = "", label: str = "") -> str:
    """An SVG that scales down with its column (phones) and never grows past its size.

    `label` is its text alternative: screen readers read it in place of the drawing.
    """
    alt = f' role="img" aria-label="{escape(label)}"' if label else ""
    return (f'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {width:g} {height:g}" width="100%" '
            f'style="max-width:{width:g}px;height:auto;{style}" font-family="sans-serif" font-size="10"{alt}>')


def _describe(name: str, values: Sequence[float]) -> str:
    """A bar group or line in words: its values, or their count and range when there are many."""
    if not values:
        return f"{name}: no result"
    if len(values) <= 4:
        return f"{name}: {', '.join(_fmt(v) for v in values)}"
    return f"{name}: {len(values)} values from {_fmt(min(values))} to {_fmt(max(values))}"


def _fmt(v: float) -> str:
    """3 significant digits, with a short exponent outside [0.001, 1000): 1.69e4, not 1.69e+04."""
    if v == 0 or 1e-3 <= abs(v) < 1e3:
        return f"{v:.3g}"
    mantissa, exponent = f"{v:.2e}".split("e")
    return f"{mantissa}e{int(exponent)}"


def bars_svg(
    panels: dict[str, Sequence[Sequence[float]]],
    title: str = "",
    panel_width: int = 260,
    height: int = 190,
    labels: dict[str, Sequence[str]] | None = None,
    elements: Sequence[str] | None = None,
) -> str:
    """A figure of bar charts: one SVG per stage, one bar group per rank, element i in colour i.

    The panels share one scale, printed on each, and sit side by side; on a
    narrow screen (a phone) they stack instead of shrinking. A rank with no
    values (e.g. a non-destination rank of gather) shows "no result".
    `labels[panel]` names that panel's groups (default "rank 0", "rank 1", ...);
    `elements` names the colours in a key below the panels. Bars of up to 4 values
    per rank print their values where the labels fit; every bar has a hover title.
    """
    values = [v for ranks in panels.values() for vals in ranks for v in vals]
    labelled = any(0 < len(vals) <= 4 for ranks in panels.values() for vals in ranks)
    head = 18  # the panel name; room below it for value labels
    top, bottom, left = head + (12 if labelled else 4), 28, 36
    plot_h = height - top - bottom
    hi, lo = max(values + [0.0]), min(values + [0.0])
    span = (hi - lo) or 1.0
    y = lambda v: top + (hi - v) / span * plot_h  # noqa: E731
    svgs = [_panel(name, ranks, panel_width, height, y, (hi, lo), left, labels) for name, ranks in panels.items()]
    out = ['<figure class="dpsim-bars" style="margin:0;font:10px sans-serif">']
    if title:
        out.append(f'<figcaption style="text-align:center;font-size:12px">{escape(title)}</figcaption>')
    out.append('<div style="display:flex;flex-wrap:wrap;justify-content:center">' + "".join(svgs) + "</div>")
    if elements:
        keys = "".join(f'<span style="white-space:nowrap"><span style="display:inline-block;width:10px;'
                       f'height:10px;margin:0 3px 0 9px;background:{COLOURS[i % len(COLOURS)]}"></span>'
                       f'<span>{escape(e)}</span></span> '  # swatch and name wrap together
                       for i, e in enumerate(elements))
        out.append(f'<div style="text-align:center">{keys}</div>')
    out.append("</figure>")
    return "".join(out)


def _title_x(name: str, width: int, left: int) -> float:
    """A panel's name centres over its bars, or over the whole panel where it is wider."""
    return (left + width) / 2 if 6 * len(name) <= width - left else width / 2


def _panel(name: str, ranks: Sequence[Sequence[float]], width: int, height: int, y: Any,
           scale: tuple[float, float], left: int, labels: dict[str, Sequence[str]] | None) -> str:
    """One stage of `bars_svg`: its name, a scale on the left, bars, values on the short ones."""
    group = (width - 4 - left) / max(1, len(ranks))
    custom = bool(labels) and name in labels
    names = [labels[name][r] if custom else f"rank {r}" for r in range(len(ranks))]
    label = f"{name}. " + "; ".join(_describe(n, vals) for n, vals in zip(names, ranks))
    # "rank 0" would run into "rank 1": numbers under the bars, "rank" beside them
    numbered = not custom and any(5.6 * len(n) + 4 > group for n in names)
    shown = [str(r) for r in range(len(ranks))] if numbered else names
    out = [_open_svg(width, height, f"flex:0 1 {width}px;min-width:{min(width, 240)}px", label),
           f'<text x="{_title_x(name, width, left):.0f}" y="12" text-anchor="middle" '
           f'font-weight="bold">{escape(name)}</text>']
    if numbered:
        out.append(f'<text x="{left - 4}" y="{height - 10}" text-anchor="end">rank</text>')
    for v in sorted({scale[0], scale[1], 0.0}):  # the shared scale: top, bottom and zero
        out.append(f'<text x="{left - 4}" y="{y(v) + 3:.1f}" text-anchor="end" fill="#555">{_fmt(v)}</text>')
    out.append(f'<line x1="{left}" x2="{left}" y1="{y(scale[0]):.1f}" y2="{y(scale[1]):.1f}" stroke="#bbb"/>')
    out.append(f'<line x1="{left}" x2="{width - 4}" y1="{y(0):.1f}" y2="{y(0):.1f}" stroke="#444"/>')
    value_labels, fits = [], True
    for r, vals in enumerate(ranks):
        gx = left + r * group
        out.append(f'<text x="{gx + group / 2:.1f}" y="{height - 10}" text-anchor="middle">{escape(shown[r])}</text>')
        if not vals:
            out.append(f'<text x="{gx + group / 2:.1f}" y="{y(0) - 4:.1f}" text-anchor="middle" '
                       f'fill="#888">no result</text>')
            continue
        bw = group * 0.8 / len(vals)
        for i, v in enumerate(vals):
            bx = gx + group * 0.1 + i * bw
            y1, y2 = sorted((y(v), y(0)))
            out.append(f'<rect x="{bx:.1f}" y="{y1:.1f}" width="{bw:.1f}" height="{max(y2 - y1, 0.5):.1f}" '
                       f'fill="{COLOURS[i % len(COLOURS)]}"><title>{escape(name)}, {escape(names[r])}'
                       f'{f", element {i}" if len(vals) > 1 else ""}: {_fmt(v)}</title></rect>')
            if len(vals) <= 4:  # drawn last, with a white outline: never hidden by a bar
                fits &= 5.2 * len(_fmt(v)) + 2 <= bw  # about 5.2 px per character at 9 px
                value_labels.append(f'<text x="{bx + bw / 2:.1f}" y="{y1 - 2:.1f}" text-anchor="middle" '
                                    f'font-size="9" stroke="white" stroke-width="2" '
                                    f'paint-order="stroke">{_fmt(v)}</text>')
    # Labels that would run into each other are left out; the scale and hover titles remain.
    return "".join(out + (value_labels if fits else [])) + "</svg>"


def lines_svg(
    series: dict[str, Sequence[float]],
    title: str = "",
    xlabel: str = "step",
    width: int = 320,
    height: int = 200,
) -> str:
    """A figure with one line per named series (e.g. per rank) over steps 0, 1, 2, ...

    The key sits below the plot, so the plot keeps its size on a phone.
    """
    top, bottom, left, right = 12, 30, 46, 12
    values = [v for vals in series.values() for v in vals] or [0.0]
    hi, lo = max(values), min(values)
    span = (hi - lo) or 1.0
    steps = max((len(v) for v in series.values()), default=1)
    px = lambda i: left + i * (width - left - right) / max(1, steps - 1)  # noqa: E731
    py = lambda v: top + (hi - v) / span * (height - top - bottom)  # noqa: E731
    out = ['<figure class="dpsim-lines" style="margin:0;font:10px sans-serif;text-align:center">']
    if title:
        out.append(f'<figcaption style="font-size:12px">{escape(title)}</figcaption>')
    label = (f"{title + '. ' if title else ''}Lines over {xlabel}: "
             + "; ".join(_describe(name, vals) for name, vals in series.items()))
    out.append(_open_svg(width, height, label=label))
    for v in sorted({lo, hi}):  # a flat line gets one label, not two on top of each other
        out.append(f'<text x="{left - 4}" y="{py(v) + 3:.1f}" text-anchor="end">{_fmt(v)}</text>')
    out.append(f'<line x1="{left}" x2="{width - right}" y1="{height - bottom}" y2="{height - bottom}" stroke="#444"/>')
    out.append(f'<text x="{(left + width - right) / 2:.0f}" y="{height - 6}" text-anchor="middle">{escape(xlabel)}</text>')
    dashes = ["", "6,3", "2,2", "8,2,2,2"]
    keys = []
    for k, (name, vals) in enumerate(series.items()):
        colour, dash = COLOURS[k % len(COLOURS)], dashes[k % len(dashes)]
        points = " ".join(f"{px(i):.1f},{py(v):.1f}" for i, v in enumerate(vals))
        out.append(f'<polyline points="{points}" fill="none" stroke="{colour}" stroke-width="2" '
                   f'stroke-dasharray="{dash}"><title>{escape(name)}: '
                   f'{", ".join(_fmt(v) for v in vals)}</title></polyline>')
        keys.append(f'<span style="white-space:nowrap"><svg viewBox="0 0 24 10" width="24" height="10" '
                    f'style="margin:0 3px 0 9px"><line x1="0" x2="24" y1="5" y2="5" '
                    f'stroke="{colour}" stroke-width="2" stroke-dasharray="{dash}"/></svg>'
                    f'<span style="color:{colour}">{escape(name)}</span></span> ')
    out.append("</svg>")
    out.append(f'<div>{"".join(keys)}</div></figure>')
    return "".join(out)


def svg_text(html: str) -> str:
    """The words and values a figure shows (captions, labels, keys, hover titles), one line."""
    found = re.findall(r"<(text|title|figcaption|span)\b[^>]*>([^<]+)</\1>", html)
    return " | ".join(unescape(t) for _, t in found)

"""The widget pieces: views computed from runs, flipped in the browser by linked controls."""
import json
import pathlib
import re
import xml.etree.ElementTree as ET

import ipywidgets as widgets
import pytest

import dpsim
from dpsim._ring_animation import contributors
from dpsim._svg import svg_text

from conftest import ROOT


def walk(w):
    yield w
    for child in getattr(w, "children", ()):
        yield from walk(child)


def test_explorer_links_every_control_to_its_stacks():
    axes = {"a": [1, 2, 3], "b": ["x", "y"]}
    views = {(a, b): f"<p>{a}{b}</p>" for a in axes["a"] for b in axes["b"]}
    w = dpsim.explorer(views, axes)
    controls = [c for c in walk(w) if isinstance(c, widgets.ToggleButtons)]
    stacks = [c for c in walk(w) if isinstance(c, widgets.Stack)]
    assert [c.options for c in controls] == [("1", "2", "3"), ("x", "y")]
    assert len(stacks) == 1 + 3  # outer stack, one inner per value of a
    assert sorted((controls.index(l.source[0]), stacks.index(l.target[0])) for l in w.links) == \
        [(0, 0), (1, 1), (1, 2), (1, 3)]  # control a drives the outer stack, b every inner one
    assert all(l.source[1] == "index" and l.target[1] == "selected_index" for l in w.links)
    outer = stacks[0]
    assert outer.children[2].children[1].value == "<p>3y</p>"  # a=3 -> 3rd child, b=y -> 2nd
    assert repr(w).splitlines()[0] == "explorer(a=[1, 2, 3], b=['x', 'y'])"
    assert len(repr(w).splitlines()) == 1 + 6  # one line per view: what nbval compares


def test_explorer_needs_every_view():
    with pytest.raises(KeyError, match="no view for setting"):
        dpsim.explorer({(1,): "one"}, {"a": [1, 2]})


def test_explorer_shows_a_control_only_where_it_applies():
    """An axis that is None in some keys gets its control inside the subtrees where it
    applies; its copies are linked to each other, and no view is stored twice."""
    axes = {"collective": ["broadcast", "all_reduce", "reduce"], "op": ["SUM", "MAX"], "p": [2, 4]}
    views = {(c, None, p): f"<p>{c}{p}</p>" for c in ["broadcast"] for p in axes["p"]}
    views |= {(c, op, p): f"<p>{c}{op}{p}</p>" for c in ["all_reduce", "reduce"]
              for op in axes["op"] for p in axes["p"]}
    w = dpsim.explorer(views, axes)
    controls = [c for c in walk(w) if isinstance(c, widgets.ToggleButtons)]
    assert [c.description for c in controls] == ["collective", "p", "op", "op"]
    assert [c.description for c in w.children if isinstance(c, widgets.ToggleButtons)] == ["collective", "p"]
    op_a, op_b = controls[2:]
    assert any(l.source == (op_a, "index") and l.target == (op_b, "index") for l in w.links)
    html = [c.value for c in walk(w) if isinstance(c, widgets.HTML)]
    assert sorted(html) == sorted(views.values())  # each view once
    lines = repr(w).splitlines()[1:]
    assert lines[0] == "collective=broadcast, p=2: " and len(lines) == len(views)
    with pytest.raises(KeyError, match="no view for setting"):
        dpsim.explorer({k: v for k, v in views.items() if k != ("reduce", "MAX", 4)}, axes)


def figure_svgs(html):
    """The panels of a bars_svg figure, parsed."""
    root = ET.fromstring(html)
    return root, list(root.iter("{http://www.w3.org/2000/svg}svg"))


def test_bars_svg_is_valid_and_draws_each_value():
    html = dpsim.bars_svg({"before": [[1.0, -2.0], []], "after": [[3.0], [3.0]]}, title="t <&>",
                          labels={"after": ["p", "q"]}, elements=["w", "b"])
    root, svgs = figure_svgs(html)
    ns = "{http://www.w3.org/2000/svg}"
    assert len(svgs) == 2 and sum(len(s.findall(f"{ns}rect")) for s in svgs) == 4
    texts = [t.text for s in svgs for t in s.findall(f"{ns}text")]
    assert root.find("figcaption").text == "t <&>"
    assert "no result" in texts and "p" in texts and "rank 1" in texts
    for svg in svgs:  # the shared scale, printed on each panel
        assert {"3", "0", "-2"} <= {t.text for t in svg.findall(f"{ns}text")}
    assert [s.text for s in root.iter("span") if s.text] == ["w", "b"]  # the colour key
    assert "t <&> | before | -2 | 0 | 3" in svg_text(html)


def test_contributors_decodes_powers_of_two():
    assert contributors(1 + 4 + 8) == [0, 2, 3]
    assert contributors(0) == []


def test_ring_animation_needs_no_network():
    logs = [[{"step": -1, "phase": "start", "send": None, "recv": None, "chunks": [float(2 ** r)] * 2}]
            for r in range(2)]
    html = dpsim.animate_ring(logs)
    assert "http" not in html.replace("http://www.w3.org", "")  # no stylesheet or script from elsewhere
    assert "<script" not in html and "<img" not in html  # a CSS player over SVG frames
    assert html.count("<svg viewBox=") == 1 and html.count('type="radio"') == 1
    assert not re.search("&#x2[3-5][0-9A-F]{2};", html)  # no glyph a system font may lack


def test_bars_svg_scales_and_keeps_value_labels_readable():
    """Panels shrink with a phone's column or stack; no bar or panel title covers a value label."""
    html = dpsim.bars_svg({"before": [[2.0, 3.0, 4.0]], "after": [[16900.0, 3.0e4, 1.2e5]]}, title="t")
    _, svgs = figure_svgs(html)
    ns = "{http://www.w3.org/2000/svg}"
    for svg in svgs:
        style = svg.get("style")
        width = style.split("max-width:")[1].split("px")[0]
        assert svg.get("viewBox") == f"0 0 {width} 190" and svg.get("width") == "100%"
        assert "min-width:240px" in style  # below that, the flex row wraps: panels stack
    after = list(svgs[1])
    last_rect = max(i for i, c in enumerate(after) if c.tag == f"{ns}rect")
    values = [i for i, c in enumerate(after) if c.tag == f"{ns}text" and c.get("font-size") == "9"]
    assert values and min(values) > last_rect  # labels are painted after every bar
    assert [after[i].text for i in values] == ["1.69e4", "3.00e4", "1.20e5"]
    panel_title = [float(c.get("y")) for c in after if c.get("font-weight") == "bold"]
    assert max(panel_title) < min(float(after[i].get("y")) for i in values) - 8


def contrast(colour: str, background: str = "#ffffff") -> float:
    """WCAG 2 contrast ratio of two sRGB colours."""
    def luminance(hex_colour):
        channels = [int(hex_colour[i:i + 2], 16) / 255 for i in (1, 3, 5)]
        linear = [c / 12.92 if c <= 0.03928 else ((c + 0.055) / 1.055) ** 2.4 for c in channels]
        return 0.2126 * linear[0] + 0.7152 * linear[1] + 0.0722 * linear[2]
    hi, lo = sorted([luminance(colour), luminance(background)], reverse=True)
    return (hi + 0.05) / (lo + 0.05)


def test_chart_colours_stand_out_from_the_white_background():
    """WCAG's minimum for parts of a graphic is 3:1; the figures (matplotlib) share them."""
    from dpsim._plot import STYLE
    from dpsim._svg import COLOURS

    assert min(contrast(c) for c in COLOURS) >= 3, [(c, round(contrast(c), 2)) for c in COLOURS]
    assert STYLE["axes.prop_cycle"].by_key()["color"] == COLOURS


def test_each_chart_says_what_it_shows_to_a_screen_reader():
    ns = "{http://www.w3.org/2000/svg}"
    bars = dpsim.bars_svg({"after": [[3.0], [3.0, 1.0, 2.0, 4.0, 5.0]]}, labels={"after": ["p", "q"]})
    [svg] = figure_svgs(bars)[1]
    assert svg.get("role") == "img"
    assert svg.get("aria-label") == "after. p: 3; q: 5 values from 1 to 5"
    lines = ET.fromstring(dpsim.lines_svg({"rank 0": [1.0, 0.5]}, title="loss"))
    [svg] = lines.iter(f"{ns}svg")
    assert svg.get("role") == "img" and svg.get("aria-label") == "loss. Lines over step: rank 0: 1, 0.5"


def test_rank_labels_that_would_collide_become_numbers():
    """Four ranks in a narrow panel: "rank 0" ... "rank 3" do not fit under their bars."""
    ns = "{http://www.w3.org/2000/svg}"
    def bottom_row(panel_width):
        [svg] = figure_svgs(dpsim.bars_svg({"kB": [[1.0]] * 4}, panel_width=panel_width))[1]
        row = [t for t in svg.findall(f"{ns}text") if t.get("y") == "180"]  # height 190 - 10
        return [t.text for t in sorted(row, key=lambda t: float(t.get("x")))]

    assert bottom_row(120) == ["rank", "0", "1", "2", "3"]
    assert bottom_row(300) == ["rank 0", "rank 1", "rank 2", "rank 3"]


def test_a_flat_line_gets_one_scale_label():
    ns = "{http://www.w3.org/2000/svg}"
    [svg] = ET.fromstring(dpsim.lines_svg({"rank 0": [0.0, 0.0]})).iter(f"{ns}svg")
    assert [t.text for t in svg.findall(f"{ns}text")].count("0") == 1


def stored_explorers():
    """(notebook, text) of each explorer output: its settings and what each view shows."""
    for path in sorted(pathlib.Path(ROOT).glob("chapters/*.ipynb")):
        for cell in json.loads(path.read_text(encoding="utf-8"))["cells"]:
            for out in cell.get("outputs", []):
                text = "".join(out.get("data", {}).get("text/plain", ""))
                if text.startswith("explorer("):
                    yield path.name, text


def test_stored_explorers_list_every_view():
    """nbval compares this text; ipywidgets would cut it at 110 characters."""
    found = list(stored_explorers())
    assert len(found) >= 4
    for name, text in found:
        assert not text.endswith("…") and len(text.splitlines()) > 4, f"{name}: {text[:200]}"
    w = dpsim.explorer({(1,): "<p>one</p>", (2,): "<p>two</p>"}, {"a": [1, 2]})
    assert w._repr_mimebundle_()["text/plain"] == repr(w)


# Views that are equal on purpose: that they are equal is the lesson.
SAME_ON_PURPOSE = {  # SyncBatchNorm's buffers agree across ranks with or without the broadcast
    ("05_batchnorm_and_syncbatchnorm.ipynb", "forward_sync_buffers", ("layer", "CPUSyncBatchNorm")),
    # ch11 compares summaries (bytes, orders of magnitude): PowerSGD's are the same under
    # either autocast; the drawn curves differ, but by amounts that vary from CPU to CPU
    ("11_mixed_precision_and_compression.ipynb", "autocast", ("hook", "PowerSGD r=1")),
    ("11_mixed_precision_and_compression.ipynb", "autocast", ("hook", "PowerSGD r=4")),
}


def test_stored_explorers_have_no_control_that_changes_nothing():
    """Two views one control apart must differ beyond their captions: else that control
    does nothing there (ch2's op for broadcast, ch4's shards with one process)."""
    for name, text in stored_explorers():
        views = []
        for line in text.splitlines()[1:]:
            setting, shown = line.split(": ", 1)
            views.append((dict(kv.split("=", 1) for kv in setting.split(", ")), shown.split(" | ", 1)[1]))
        for i, (a, shown_a) in enumerate(views):
            for b, shown_b in views[i + 1:]:
                apart = [k for k in a if a[k] != b.get(k)]
                if a.keys() == b.keys() and len(apart) == 1 and not any(
                        (name, apart[0], (k, v)) in SAME_ON_PURPOSE for k, v in a.items()):
                    assert shown_a != shown_b, f"{name}: {apart[0]} changes nothing at {a}"


def test_bars_svg_prints_values_only_where_they_fit():
    """Value labels wider than their bars would run into each other (ch2, PRODUCT on 4 ranks)."""
    wide = [[7160.0, 16900.0, 29600.0, 0.0]] * 4
    html = dpsim.bars_svg({"crowded": wide, "roomy": [[7160.0], [16900.0]]})
    crowded, roomy = figure_svgs(html)[1]
    ns = "{http://www.w3.org/2000/svg}"
    printed = lambda svg: [t.text for t in svg.findall(f"{ns}text") if t.get("font-size") == "9"]  # noqa: E731
    assert printed(crowded) == [] and printed(roomy) == ["7.16e3", "1.69e4"]
    assert "crowded, rank 3, element 2: 2.96e4" in svg_text(html)  # still there on hover


def test_explorer_texts_replace_a_views_text_form():
    """For views whose drawn values depend on the CPU's rounding, a summary is compared instead."""
    views = {(1,): dpsim.lines_svg({"loss": [0.123456]}), (2,): dpsim.lines_svg({"loss": [0.5]})}
    w = dpsim.explorer(views, {"a": [1, 2]}, texts={(1,): "summary | loss below 1: True"})
    assert repr(w).splitlines()[1:] == ["a=1: summary | loss below 1: True", "a=2: " + svg_text(views[(2,)])]
    with pytest.raises(KeyError, match="texts for settings with no view"):
        dpsim.explorer(views, {"a": [1, 2]}, texts={(3,): "x"})

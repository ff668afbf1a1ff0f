"""The widget pieces: views computed from runs, flipped in the browser by linked controls."""
import xml.etree.ElementTree as ET

import ipywidgets as widgets
import pytest

import dpsim
from dpsim._ring_animation import contributors


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


def test_bars_svg_is_valid_and_draws_each_value():
    svg = dpsim.bars_svg({"before": [[1.0, -2.0], []], "after": [[3.0], [3.0]]}, title="t <&>",
                         labels={"after": ["p", "q"]})
    root = ET.fromstring(svg)
    ns = "{http://www.w3.org/2000/svg}"
    assert len(root.findall(f"{ns}rect")) == 4
    texts = [t.text for t in root.findall(f"{ns}text")]
    assert "t <&>" in texts and "empty" in texts and "p" in texts and "rank 1" in texts


def test_contributors_decodes_powers_of_two():
    assert contributors(1 + 4 + 8) == [0, 2, 3]
    assert contributors(0) == []


def test_ring_animation_needs_no_network():
    logs = [[{"step": -1, "phase": "start", "send": None, "recv": None, "chunks": [float(2 ** r)] * 2}]
            for r in range(2)]
    html = dpsim.animate_ring(logs)
    assert "http" not in html.replace("http://www.w3.org", "")  # no stylesheet or script from elsewhere
    assert "<i class=" not in html and "&#x25B6;" in html  # player icons as plain symbols


def test_bars_svg_scales_and_keeps_value_labels_readable():
    """It shrinks with a phone's column, and no bar or panel title covers a value label."""
    svg = dpsim.bars_svg({"before": [[2.0, 3.0, 4.0]], "after": [[16900.0, 3.0e4, 1.2e5]]}, title="t")
    root = ET.fromstring(svg)
    assert root.get("viewBox") == f"0 0 {root.get('style').split('max-width:')[1].split('px')[0]} 190"
    assert root.get("width") == "100%"
    ns = "{http://www.w3.org/2000/svg}"
    children = list(root)
    last_rect = max(i for i, c in enumerate(children) if c.tag == f"{ns}rect")
    values = [i for i, c in enumerate(children) if c.tag == f"{ns}text" and c.get("font-size") == "8"]
    assert values and min(values) > last_rect  # labels are painted after every bar
    assert [children[i].text for i in values][-3:] == ["1.69e4", "3.00e4", "1.20e5"]
    panel_titles = [float(c.get("y")) for c in children if c.get("font-weight") == "bold"]
    assert max(panel_titles) < min(float(children[i].get("y")) for i in values) - 8

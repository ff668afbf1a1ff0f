"""A widget that flips between precomputed views, with no kernel needed.

Every view comes from a real run when the notebook executes. The controls are
linked to nested Stack widgets in the browser (jslink), so moving a control
re-draws in a live notebook and in the static book alike, from saved widget state.
"""
from __future__ import annotations

import itertools
from typing import Any, Sequence

import ipywidgets as widgets

from ._svg import svg_text


class Explorer(widgets.VBox):
    """A VBox whose text form lists what each view shows.

    Notebooks store that text beside the widget, and nbval compares it, so a
    change in any view's values is caught even though nbval skips widget state.
    """

    def __init__(self, parts: list[widgets.Widget], axes: dict[str, Sequence[Any]], links: list,
                 views: dict[tuple, str]) -> None:
        super().__init__(parts)
        self._axes = {k: list(v) for k, v in axes.items()}
        self.links = links  # the browser-side links from controls to stacks
        self._views = views

    def __repr__(self) -> str:
        head = f"explorer({', '.join(f'{k}={v}' for k, v in self._axes.items())})"
        lines = [", ".join(f"{k}={v}" for k, v in zip(self._axes, key)) + ": " + svg_text(view)
                 for key, view in self._views.items()]  # explorer() passes exactly the views shown
        return "\n".join([head, *lines])


def explorer(views: dict[tuple, str], axes: dict[str, Sequence[Any]], caption: str = "") -> Explorer:
    """`views[(a, b, ...)]` is the HTML (e.g. SVG) to show for that setting of `axes`.

    `axes` maps a control's label to its values, in the order of the view keys.
    """
    names = list(axes)
    for key in itertools.product(*axes.values()):
        if key not in views:
            raise KeyError(f"no view for setting {dict(zip(names, key))}")
    controls = [widgets.ToggleButtons(options=[str(v) for v in values], description=name,
                                      style={"button_width": "auto", "description_width": "initial"})
                for name, values in axes.items()]

    links = []

    def level(depth: int, prefix: tuple) -> widgets.Widget:
        if depth == len(names):
            return widgets.HTML(views[prefix])
        stack = widgets.Stack([level(depth + 1, prefix + (v,)) for v in axes[names[depth]]], selected_index=0)
        links.append(widgets.jslink((controls[depth], "index"), (stack, "selected_index")))
        return stack

    parts: list[widgets.Widget] = [*controls, level(0, ())]
    if caption:
        parts.insert(0, widgets.HTML(f"<b>{caption}</b>"))
    return Explorer(parts, axes, links, {k: views[k] for k in itertools.product(*axes.values())})

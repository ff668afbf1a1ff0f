"""A widget that flips between precomputed views, with no kernel needed.

Every view comes from a real run when the notebook executes. The controls are
linked to nested Stack widgets in the browser (jslink), so moving a control
re-draws in a live notebook and in the static book alike, from saved widget state.
"""
from __future__ import annotations

from typing import Any, Sequence

import ipywidgets as widgets

from ._svg import svg_text


class Explorer(widgets.VBox):
    """A VBox whose text form lists what each view shows.

    Notebooks store that text beside the widget, and nbval compares it, so a
    change in any view's values is caught even though nbval skips widget state.
    """

    def __init__(self, parts: list[widgets.Widget], axes: dict[str, Sequence[Any]], links: list,
                 views: dict[tuple, str], texts: dict[tuple, str] | None = None) -> None:
        super().__init__(parts)
        self._axes = {k: list(v) for k, v in axes.items()}
        self.links = links  # the browser-side links from controls to stacks
        self._views = views
        self._texts = texts or {}

    def _repr_mimebundle_(self, **kwargs: Any) -> dict | None:
        data = super()._repr_mimebundle_(**kwargs)
        if data:
            data["text/plain"] = repr(self)  # whole, not cut at 110 characters as widgets are
        return data

    def __repr__(self) -> str:
        head = f"explorer({', '.join(f'{k}={v}' for k, v in self._axes.items())})"
        lines = [", ".join(f"{k}={v}" for k, v in zip(self._axes, key) if v is not None)
                 + ": " + self._texts.get(key, svg_text(view)) for key, view in self._views.items()]
        return "\n".join([head, *lines])


def _buttons(name: str, values: Sequence[Any]) -> widgets.ToggleButtons:
    return widgets.ToggleButtons(options=[str(v) for v in values], description=name,
                                 style={"button_width": "auto", "description_width": "initial"})


def explorer(views: dict[tuple, str], axes: dict[str, Sequence[Any]], caption: str = "",
             texts: dict[tuple, str] | None = None) -> Explorer:
    """`views[(a, b, ...)]` is the HTML (e.g. SVG) to show for that setting of `axes`.

    The text form lists every value each view draws. Where those values depend on
    the CPU's rounding (a 16-bit training run), `texts[key]` replaces a view's text
    with a summary that does not: exact counts, orders of magnitude, verdicts.

    `axes` maps a control's label to its values, in the order of the view keys.
    Where an axis does not apply (all_reduce has an op, broadcast has none), the
    keys hold None in its place: its control then shows only where it applies,
    and no view is stored twice. Such a control's copies move together.
    """
    names = list(axes)
    partial = {d for d in range(len(names)) if any(key[d] is None for key in views)}
    controls = {d: _buttons(names[d], axes[names[d]]) for d in range(len(names)) if d not in partial}
    copies: dict[int, list[widgets.ToggleButtons]] = {d: [] for d in partial}
    links, shown = [], {}

    def level(depth: int, prefix: tuple) -> widgets.Widget:
        if depth == len(names):
            if prefix not in views:
                raise KeyError(f"no view for setting {dict(zip(names, prefix))}")
            shown[prefix] = views[prefix]
            return widgets.HTML(views[prefix])
        if depth in partial and any(key[:depth + 1] == prefix + (None,) for key in views):
            return level(depth + 1, prefix + (None,))  # this axis does not apply here
        stack = widgets.Stack([level(depth + 1, prefix + (v,)) for v in axes[names[depth]]],
                              selected_index=0)
        if depth not in partial:
            links.append(widgets.jslink((controls[depth], "index"), (stack, "selected_index")))
            return stack
        control = _buttons(names[depth], axes[names[depth]])
        if copies[depth]:  # every copy of this control shows the same choice
            links.append(widgets.jslink((copies[depth][0], "index"), (control, "index")))
        copies[depth].append(control)
        links.append(widgets.jslink((control, "index"), (stack, "selected_index")))
        return widgets.VBox([control, stack])

    tree = level(0, ())
    parts: list[widgets.Widget] = [*controls.values(), tree]
    if caption:
        parts.insert(0, widgets.HTML(f"<b>{caption}</b>"))
    unknown = set(texts or {}) - set(views)
    if unknown:
        raise KeyError(f"texts for settings with no view: {sorted(unknown, key=str)}")
    return Explorer(parts, axes, links, shown, texts)

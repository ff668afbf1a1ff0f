"""Serve the book's JavaScript from _static/vendor (scripts/vendor-js) instead of CDNs.

Extensions add their scripts by CDN URL; on each page we swap those for the
vendored copies, so the site loads nothing from outside and works offline.
"""
from __future__ import annotations

from typing import Any

VENDOR = "_static/vendor/"
LOCAL = {
    "require.min.js": "require.js",
    "html-manager@1.0.6/dist/embed-amd.js": "npm/@jupyter-widgets/html-manager/dist/embed-amd.js",
    "mathjax@3/es5/tex-mml-chtml.js": "mathjax/tex-mml-chtml.js",
}
DROP = ("integrity", "crossorigin")  # they describe the CDN file, not ours


def _local(filename: str) -> str | None:
    if "://" not in filename:
        return None
    for tail, path in LOCAL.items():
        if filename.endswith(tail):
            return VENDOR + path
    return None


WIDGET_STATE = "application/vnd.jupyter.widget-state+json"
# ipywidgets typesets labels with MathJax 2's MathJax.Hub.Queue; the book runs MathJax 3.
# Map that call onto MathJax 3 once MathJax has loaded, before the widgets render.
MATHJAX2_SHIM = """window.addEventListener("DOMContentLoaded", function () {
  var mj = window.MathJax;
  if (mj && !mj.Hub && mj.typesetPromise) {
    mj.Hub = {Queue: function (job) { if (job && job[2]) { mj.typesetPromise([job[2]]); } }};
  }
});"""
WIDGET_JS = ("require.js", "embed-amd.js")


def rewrite_scripts(app: Any, pagename: str, templatename: str, context: dict, doctree: Any) -> None:
    """Swap CDN scripts for vendored ones; drop repeats and widget scripts on pages without widgets."""
    scripts = context.get("script_files")
    if not scripts:
        return
    has_widgets = any(js.attributes.get("type") == WIDGET_STATE for js in scripts)
    seen, kept = set(), []
    for js in sorted(scripts, key=lambda js: js.priority):  # keep the first of repeats in load order
        local = _local(js.filename or "")
        if local:
            attrs = {k: v for k, v in js.attributes.items() if k not in DROP}
            if "data-jupyter-widgets-cdn" in attrs:  # where the manager loads its fonts from
                attrs["data-jupyter-widgets-cdn"] = context["pathto"](VENDOR + "npm/", 1)
            js = type(js)(local, priority=js.priority, **attrs)
        name = js.filename or ""
        if name.endswith(WIDGET_JS) and not has_widgets:
            continue
        key = name or js.attributes.get("body", "")  # a file once; an inline script once (a const twice is an error)
        if key in seen:
            continue
        seen.add(key)
        kept.append(js)
        if name.endswith("require.js"):
            kept.insert(len(kept) - 1, type(js)("", body=MATHJAX2_SHIM, priority=js.priority))
            # The widget manager finds its fonts next to its module URI, which RequireJS
            # builds from baseUrl: point it at the vendored npm layout.
            npm = context["pathto"](VENDOR + "npm/", 1)
            kept.append(type(js)("", body=f"require.config({{baseUrl: {npm!r}}});", priority=js.priority))
    scripts[:] = kept  # this page's list only: Sphinx restores it before the next page


def setup(app: Any) -> dict:
    app.connect("html-page-context", rewrite_scripts, priority=900)
    return {"parallel_read_safe": True, "parallel_write_safe": True}

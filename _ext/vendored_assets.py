"""Serve the book's JavaScript from _static/vendor (scripts/vendor-js) instead of CDNs.

Extensions add their scripts by CDN URL; on each page we swap those for the
vendored copies, so the site loads nothing from outside and works offline.
Widget pages get html-manager's embed.js: the core widgets, rendered at page
load, without RequireJS (half the bytes of embed-amd.js).
"""
from __future__ import annotations

import os
import re
from typing import Any

VENDOR = "_static/vendor/"
LOCAL = {
    "html-manager@1.0.6/dist/embed-amd.js": "html-manager/embed.js",
    "mathjax@3/es5/tex-mml-chtml.js": "mathjax/tex-mml-chtml.js",
}
UNUSED = ("require.min.js",)  # embed.js needs no module loader
DROP = ("integrity", "crossorigin", "data-jupyter-widgets-cdn")  # they describe the CDN file


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
# ipywidgets marks the chosen toggle button with a CSS class only, and draws a group's name
# as a plain label; tell screen readers both: aria-pressed, and a named group.
ARIA_PRESSED = """window.addEventListener("DOMContentLoaded", function () {
  function mark() {
    document.querySelectorAll(".widget-toggle-button").forEach(function (b) {
      var on = b.classList.contains("mod-active") ? "true" : "false";
      if (b.getAttribute("aria-pressed") !== on) { b.setAttribute("aria-pressed", on); }
    });
    document.querySelectorAll(".widget-toggle-buttons").forEach(function (g) {
      var label = g.querySelector(".widget-label");
      var name = label ? label.textContent.trim() : "";
      if (name && g.getAttribute("aria-label") !== name) {
        g.setAttribute("role", "group");
        g.setAttribute("aria-label", name);
      }
    });
  }
  new MutationObserver(mark).observe(document.body,
    {subtree: true, childList: true, attributes: true, attributeFilter: ["class"]});
});"""


def rewrite_scripts(app: Any, pagename: str, templatename: str, context: dict, doctree: Any) -> None:
    """Swap CDN scripts for vendored ones; drop repeats and widget scripts on pages without widgets."""
    scripts = context.get("script_files")
    if not scripts:
        return
    has_widgets = any(js.attributes.get("type") == WIDGET_STATE for js in scripts)
    seen, kept = set(), []
    for js in sorted(scripts, key=lambda js: js.priority):  # keep the first of repeats in load order
        name = js.filename or ""
        if name.endswith(UNUSED):
            continue
        local = _local(name)
        if local:
            attrs = {k: v for k, v in js.attributes.items() if k not in DROP}
            js = type(js)(local, priority=js.priority, **attrs)
            name = local
        if name.endswith("embed.js") and not has_widgets:
            continue
        helpers = [type(js)("", body=body, priority=js.priority) for body in (MATHJAX2_SHIM, ARIA_PRESSED)
                   if name.endswith("embed.js")]
        for item in [*helpers, js]:
            # a file once; an inline script once (a const twice is an error), also when this
            # handler sees a list it has already rewritten
            key = item.filename or item.attributes.get("body", "")
            if key not in seen:
                seen.add(key)
                kept.append(item)
    scripts[:] = kept  # this page's list only: Sphinx restores it before the next page


FONTAWESOME_JS = re.compile(r'\s*<script[^>]* src="[^"]*_static/scripts/fontawesome\.js[^"]*"[^>]*></script>')


def drop_fontawesome_js(app: Any, exception: Exception | None) -> None:
    """The theme's 1.5 MB fontawesome.js only lets users add custom icons; its CSS and
    webfonts draw the icons the book uses. Remove the script from every page."""
    if exception or app.builder.format != "html":
        return
    for root, _, files in os.walk(app.outdir):
        for f in files:
            if f.endswith(".html"):
                path = os.path.join(root, f)
                with open(path, encoding="utf-8") as fh:
                    html = fh.read()
                slim = FONTAWESOME_JS.sub("", html)
                if slim != html:
                    with open(path, "w", encoding="utf-8") as fh:
                        fh.write(slim)


def setup(app: Any) -> dict:
    app.connect("html-page-context", rewrite_scripts, priority=900)
    app.connect("build-finished", drop_fontawesome_js)
    return {"parallel_read_safe": True, "parallel_write_safe": True}

"""The built book in a real browser: widgets alive without a kernel, nothing fetched from outside.

Needs Debian's chromium (/usr/bin/chromium, installed by .ci/run) and playwright's
Python client (which drives that browser; it downloads nothing). Without a
browser the tests skip, except in CI (CI=true), where they fail.
"""
import functools
import gzip
import http.server
import io
import os
import re
import shutil
import threading
from urllib.parse import urlparse

import pytest

from conftest import ROOT

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
if not os.path.exists(CHROMIUM):
    if os.environ.get("CI") == "true":
        raise RuntimeError("CI needs Debian's chromium for the browser tests (.ci/run installs it)")
    pytest.skip("no chromium: the browser tests need Debian's chromium", allow_module_level=True)
try:
    from playwright import sync_api
except ImportError:
    if os.environ.get("CI") == "true":  # requirements.txt pins it: a missing client is a bug
        raise
    pytest.skip("no playwright: the browser tests need its Python client", allow_module_level=True)


@pytest.fixture(scope="module")
def site(built_book):
    """_build/html served on 127.0.0.1 only, gzip-compressed as static hosts serve it."""
    handler = functools.partial(_GzipHandler, directory=built_book)
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


@functools.lru_cache(maxsize=None)
def _gzipped(path: str) -> bytes:
    with open(path, "rb") as f:
        return gzip.compress(f.read(), 6)


class _GzipHandler(http.server.SimpleHTTPRequestHandler):
    """Files gzip-encoded when the browser accepts it (GitHub Pages and Read the Docs do this)."""

    def log_message(self, *args):
        pass

    def send_head(self):
        path = self.translate_path(self.path)
        if os.path.isdir(path):
            path = os.path.join(path, "index.html")
        if not os.path.isfile(path) or "gzip" not in self.headers.get("Accept-Encoding", ""):
            return super().send_head()
        body = _gzipped(path)
        self.send_response(200)
        self.send_header("Content-Type", self.guess_type(path))
        self.send_header("Content-Encoding", "gzip")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        return io.BytesIO(body)


@pytest.fixture(scope="module")
def browser(tmp_path_factory):
    with sync_api.sync_playwright() as pw:
        context = pw.chromium.launch_persistent_context(
            str(tmp_path_factory.mktemp("chromium-profile")), executable_path=CHROMIUM, headless=True,
            args=["--no-sandbox", "--disable-background-networking", "--disable-component-update",
                  "--disable-sync", "--no-first-run", "--disable-gpu", "--disable-quic"],
            viewport={"width": 1280, "height": 900},
        )
        yield context
        context.close()


def pages(built_book):
    found = []
    for root, dirs, files in os.walk(built_book):
        dirs[:] = [d for d in dirs if not d.startswith("_")]
        found += [os.path.relpath(os.path.join(root, f), built_book) for f in files if f.endswith(".html")]
    return sorted(found)


def open_page(browser, url):
    """Load a page; return it with the console errors and the requests that left 127.0.0.1.

    Both lists keep growing while the page is open: what clicks trigger counts too.
    """
    page = browser.new_page()
    errors, outside = watch(page)
    page.goto(url, wait_until="networkidle")
    return page, errors, outside


def widget_views(page):
    """The rendered widget roots, one per stored widget-view output."""
    return page.locator("script[type='application/vnd.jupyter.widget-view+json']").evaluate_all(
        "els => els.map(s => { const w = s.parentElement.querySelector('.jupyter-widgets');"
        " return w ? w.innerHTML.length : 0; })")


VISIBLE_DRAWING = """el => Array.from(el.querySelectorAll('svg'))
    .filter(s => s.getBoundingClientRect().width > 0).map(s => s.outerHTML).join('')"""


@pytest.fixture(scope="module")
def all_pages(built_book):
    return pages(built_book)


# Measured at a phone's width, after the page has laid out: what sticks out of the screen
# (outside any box that scrolls on its own), the size of chart text, and each picture's
# text alternative.
PHONE = """() => {
  const width = document.documentElement.clientWidth;
  const scrolls = el => { for (let e = el.parentElement; e; e = e.parentElement) {
      const s = getComputedStyle(e);
      if (['auto', 'scroll', 'hidden'].includes(s.overflowX) && e !== document.body
          && e !== document.documentElement) return true; } return false; };
  const wide = [];
  for (const el of document.querySelectorAll('.bd-main *')) {
    if (!el.checkVisibility({visibilityProperty: true, opacityProperty: true})) continue;
    const box = el.getBoundingClientRect();
    if (box.width > 0 && (box.right > width + 1 || box.left < -1) && !scrolls(el))
      wide.push(el.tagName.toLowerCase() + '.' + el.className + ': ' + (el.innerText || '').slice(0, 50));
  }
  let smallest = 99, measured = 0;
  const noViewBox = [];
  for (const svg of document.querySelectorAll('.cell_output svg')) {
    const box = svg.getBoundingClientRect();
    if (!svg.closest('.jupyter-widgets, .dpsim-ring') || box.width === 0) continue;
    if (!svg.getAttribute('viewBox')) { noViewBox.push(svg.outerHTML.slice(0, 80)); continue; }
    const scale = box.width / svg.viewBox.baseVal.width;
    for (const t of svg.querySelectorAll('text')) {
      if (t.getBoundingClientRect().width === 0) continue;
      smallest = Math.min(smallest, scale * parseFloat(getComputedStyle(t).fontSize));
      measured += 1;
    }
  }
  const charts = Array.from(document.querySelectorAll('.cell_output svg[viewBox]'))
    .filter(s => s.closest('.jupyter-widgets') && !s.closest('span'))  // not the colour keys
    .map(s => s.getAttribute('aria-label') || (s.querySelector(':scope > title') || {}).textContent || '');
  const images = Array.from(document.querySelectorAll('.bd-article img')).map(
    i => [i.getAttribute('src'), i.getAttribute('alt') || '', i.getBoundingClientRect().width]);
  const searchOverlaps = Array.from(document.querySelectorAll('form.bd-search'))
    .filter(f => f.checkVisibility()).filter(f => {
      const icon = f.querySelector('i'), input = f.querySelector('input');
      const box = input.getBoundingClientRect();
      return icon && icon.getBoundingClientRect().right > box.x + parseFloat(getComputedStyle(input).paddingLeft);
    }).length;
  return {pageWidth: document.documentElement.scrollWidth, width, wide: wide.slice(0, 8), searchOverlaps,
          smallest, measured, noViewBox, charts, images};
}"""


def watch(page):
    """The console errors and the requests that leave 127.0.0.1, for as long as the page is open."""
    errors, outside = [], []
    page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
    page.on("pageerror", lambda e: errors.append(str(e)))

    def check(request):
        host = urlparse(request.url).hostname
        if request.url.startswith(("http:", "https:", "ws:", "wss:")) and host != "127.0.0.1":
            outside.append(request.url)

    page.on("request", check)
    page.on("websocket", check)  # WebSockets do not show up as requests
    page.on("requestfailed", lambda r: errors.append(f"request failed: {r.url}"))
    page.on("response", lambda r: errors.append(f"HTTP {r.status}: {r.url}") if r.status >= 400 else None)
    return errors, outside


@pytest.fixture(scope="module")
def tour(browser, site, all_pages, built_book):
    """Every page, visited once as a reader would: loaded with an empty cache at 1280 px,
    then narrowed to a phone's 390 px. Returns what each visit measured; screenshots of the
    first screen at both widths go beside the html directory."""
    shots = os.path.join(os.path.dirname(built_book), "screenshots")
    os.makedirs(shots, exist_ok=True)
    visits = {}
    for rel in all_pages:
        html = open(os.path.join(built_book, rel), encoding="utf-8").read()
        has_widgets = "widget-view+json" in html
        page = browser.new_page()
        errors, outside = watch(page)
        cdp = browser.new_cdp_session(page)
        cdp.send("Network.enable")
        cdp.send("Network.setCacheDisabled", {"cacheDisabled": True})  # count every byte
        sizes = []
        page.on("requestfinished", lambda r: sizes.append(r.sizes()["responseBodySize"]))
        page.goto(f"{site}/{rel}", wait_until="load")
        drawn_after = None
        if has_widgets:  # embed.js draws the widgets after the load event
            page.wait_for_selector(".jupyter-widgets .widget-toggle-buttons", timeout=20000)
            drawn_after = page.evaluate("performance.now() - performance.timing.loadEventEnd"
                                        " + performance.timing.navigationStart")
        page.wait_for_timeout(800)  # late requests (MathJax's fonts) count too
        name = rel.replace("/", "_")
        page.screenshot(path=os.path.join(shots, name + ".png"))
        views = widget_views(page) if has_widgets else []
        page.set_viewport_size({"width": 390, "height": 844})
        page.wait_for_timeout(300)
        phone = page.evaluate(PHONE)
        page.screenshot(path=os.path.join(shots, name + ".390px.png"))
        page.close()
        visits[rel] = dict(errors=errors, outside=outside, bytes=sum(sizes), drawn_after=drawn_after,
                           views=views, has_widgets=has_widgets, **phone)
    return visits


def test_every_page_loads_offline_without_errors(tour):
    for rel, visit in tour.items():
        assert not visit["outside"], f"{rel} requested outside 127.0.0.1: {visit['outside']}"
        assert not visit["errors"], f"{rel} console errors: {visit['errors']}"



def test_every_widget_renders(tour):
    views = {rel: v["views"] for rel, v in tour.items() if v["has_widgets"]}
    for rel, sizes in views.items():
        assert sizes and all(n > 100 for n in sizes), f"{rel}: empty widget area(s): {sizes}"
    assert sum(len(sizes) for sizes in views.values()) >= 4  # one explorer in each of chapters 2-5


def test_widget_pages_are_light_and_quick(tour, record_property):
    """Bytes on the wire (gzip, as hosts serve it) and the time from the load event
    until the widgets are drawn. The bytes are asserted; the time is only reported
    (noisy): conftest prints both at the end of the run."""
    rows = [(rel, v["bytes"], v["drawn_after"]) for rel, v in tour.items() if v["has_widgets"]]
    record_property("report", [f"{rel}: {size / 1e6:.2f} MB transferred (gzip), widgets drawn"
                               f" {ms:.0f} ms after the load event" for rel, size, ms in rows])
    # at most 2 MB; at least the widget manager, or the count saw nothing
    assert rows and all(2e5 <= size <= 2e6 for _, size, _ in rows), rows


def test_every_page_fits_a_phone(tour):
    """At 390 px nothing is wider than the screen: long words and code break, and wide
    outputs, code and tables scroll inside their own box."""
    for rel, visit in tour.items():
        assert visit["pageWidth"] <= visit["width"], f"{rel}: {visit['pageWidth']} px wide: {visit['wide']}"
        assert not visit["wide"], f"{rel}: wider than the screen: {visit['wide']}"
        assert not visit["searchOverlaps"], f"{rel}: the search icon covers the query text"


def test_charts_scale_and_stay_legible_on_a_phone(tour):
    """Widget charts scale (a viewBox) and their text is at least 9 px at 390 px."""
    charted = [rel for rel, v in tour.items() if v["measured"]]
    assert len(charted) >= 5, charted
    for rel, visit in tour.items():
        assert not visit["noViewBox"], f"{rel}: SVG(s) without a viewBox: {visit['noViewBox']}"
        assert visit["smallest"] >= 9, f"{rel}: chart text drawn at {visit['smallest']:.1f} px on a phone"


def svg_text_sizes(svg: str) -> list[float]:
    """The font sizes in a matplotlib SVG (svg.fonttype none), in the SVG's own units."""
    return [float(x) for x in re.findall(r"font-size[:=]\s*\"?([\d.]+)", svg)
            + re.findall(r"font:\s*(?:[\w-]+\s+)*?([\d.]+)px", svg)]


def test_figures_are_sharp_and_legible_on_a_phone(tour, built_book):
    """Every figure is an SVG (sharp at any width) whose smallest text shows at 9 px or more
    at 390 px: its font size in the SVG's units, times the width shown over its viewBox."""
    figures = 0
    for rel, visit in tour.items():
        for src, _, shown in visit["images"]:
            if "_images/" not in src:
                continue
            assert src.endswith(".svg"), f"{rel}: {src} is a raster figure"
            path = os.path.normpath(os.path.join(built_book, os.path.dirname(rel), src))
            svg = open(path, encoding="utf-8").read()
            view_width = float(re.search(r'viewBox="[-\d.]+ [-\d.]+ ([\d.]+)', svg).group(1))
            sizes = svg_text_sizes(svg)
            assert sizes, f"{rel}: {src} has no text that stays text (svg.fonttype)"
            smallest = min(sizes) * shown / view_width
            assert smallest >= 9, f"{rel}: {src} shows text at {smallest:.1f} px at 390 px"
            figures += 1
    assert figures >= 10, figures


def test_every_picture_has_a_text_alternative(tour):
    """Figures have alt text that says what they show (not a file name); widget charts
    have an aria-label (role img)."""
    for rel, visit in tour.items():
        for src, alt, _ in visit["images"]:
            assert len(alt) >= 20 and not re.search(r"\.(svg|png)|_images|/", alt), f"{rel}: {src} alt {alt!r}"
        assert all(len(label) >= 5 for label in visit["charts"]), f"{rel}: chart without a text alternative"
    assert sum(len(v["charts"]) for v in tour.values()) >= 15  # the views shown at load


SIDEBAR = """() => {
  // on a phone the theme moves the sidebar's content into a <dialog> while it is open
  const s = document.querySelector('.bd-sidebar-primary');
  const box = s.getBoundingClientRect();
  const link = Array.from(s.querySelectorAll('a')).find(a => a.textContent.includes('Ranks and the world'));
  const linkBox = link ? link.getBoundingClientRect() : {width: 0, right: 0};
  return {shown: getComputedStyle(s).visibility === 'visible' && box.right > 0 && box.width > 0,
          linkShown: linkBox.width > 0 && linkBox.right > 0, modal: !!s.closest('dialog[open]') || (s.tagName === 'DIALOG' && s.open)};
}"""


@pytest.mark.parametrize("width", [390, 1280])
def test_the_sidebar_button_opens_and_closes_the_navigation(browser, site, width):
    """On a phone the button opens the table of contents as a drawer, and Escape closes it;
    on a wide screen the sidebar shows, and the button folds it away and back."""
    page = browser.new_page()
    errors, _ = watch(page)
    page.set_viewport_size({"width": width, "height": 844})
    page.goto(f"{site}/chapters/03_dataparallel_vs_ddp.html", wait_until="load")
    [button] = [b for b in page.locator(".primary-toggle").all() if b.is_visible()]
    state = [page.evaluate(SIDEBAR)]
    button.click()
    page.wait_for_timeout(400)  # the drawer slides in
    state.append(page.evaluate(SIDEBAR))
    if width < 960:
        page.keyboard.press("Escape")
    else:
        button.click()
    page.wait_for_timeout(400)
    state.append(page.evaluate(SIDEBAR))
    page.close()
    shown = [s["shown"] and s["linkShown"] for s in state]
    assert shown == ([False, True, False] if width < 960 else [True, False, True]), state
    if width < 960:
        assert state[1]["modal"], state  # a dialog: focus stays in it, Escape closes it
    assert not errors, errors


def visible_groups(root):
    """(label, locator) of each toggle-button control shown now; a Stack renders only its
    selected child, so controls inside other views are not in the page."""
    groups = root.locator(".widget-toggle-buttons")
    return [(g.locator(".widget-label").inner_text(), g) for g in groups.all() if g.is_visible()]


def pressed(group):
    return [b.inner_text() for b in group.locator("button[aria-pressed='true']").all()]


def exercise(page, root, seen, rel):
    """Click every choice of every control not seen yet; each click must redraw and mark
    its button pressed. Choices can reveal controls (ch2's op): those are exercised
    inside that choice, and every control is put back as it was."""
    for label, group in visible_groups(root):
        if label in seen:
            continue
        seen.add(label)
        # screen readers hear the group's name with its buttons
        assert (group.get_attribute("role"), group.get_attribute("aria-label")) == ("group", label.strip()), rel
        buttons = group.locator("button")
        first = next(i for i in range(buttons.count()) if buttons.nth(i).get_attribute("aria-pressed") == "true")
        for i in [*(i for i in range(buttons.count()) if i != first), first]:
            before = root.evaluate(VISIBLE_DRAWING)
            buttons.nth(i).click()
            page.wait_for_timeout(60)
            after = root.evaluate(VISIBLE_DRAWING)
            assert after and after != before, f"{rel}: {label}={buttons.nth(i).inner_text()} did not redraw"
            assert pressed(group) == [buttons.nth(i).inner_text()], f"{rel}: aria-pressed of {label}"
            if i != first:
                exercise(page, root, seen, rel)


def test_moving_a_control_redraws_each_explorer(browser, site, all_pages, built_book):
    explored = 0
    for rel in all_pages:
        if "widget-view+json" not in open(os.path.join(built_book, rel), encoding="utf-8").read():
            continue
        page, errors, outside = open_page(browser, f"{site}/{rel}")
        page.wait_for_selector(".widget-toggle-buttons", timeout=20000)
        for root in page.locator(".jupyter-widgets.widget-vbox").all():
            if root.locator(".widget-toggle-buttons").count() == 0:
                continue
            seen = set()
            exercise(page, root, seen, rel)
            explored += bool(seen)
        page.wait_for_timeout(300)
        page.close()
        assert not outside, f"{rel}: clicking its controls requested outside 127.0.0.1: {outside}"
        assert not errors, errors
    assert explored >= 4


@pytest.mark.parametrize("rel, choose, then, shown, hidden_by", [
    # ch2: op only for the collectives that combine values; its copies move together
    ("chapters/02_reduce_and_all_reduce.html", ("collective", "reduce"), ("op", "MAX"),
     ("collective", "all_reduce"), ("collective", "broadcast")),
    # ch4: shards only with 2+ ranks; reduction only for MSE
    ("chapters/04_averaging_vs_summing.html", ("world size", "2"), ("shards", "unequal"),
     ("world size", "4"), ("world size", "1")),
])
def test_a_control_shows_only_where_it_applies(browser, site, rel, choose, then, shown, hidden_by):
    page, errors, _ = open_page(browser, f"{site}/{rel}")
    page.wait_for_selector(".widget-toggle-buttons", timeout=20000)
    root = page.locator(".jupyter-widgets.widget-vbox").first

    def click(label, value):
        group = dict(visible_groups(root))[label]
        group.locator("button", has_text=value).first.click()
        page.wait_for_timeout(60)

    click(*choose)
    click(*then)
    click(*shown)
    assert pressed(dict(visible_groups(root))[then[0]]) == [then[1]]  # the copies agree
    click(*hidden_by)
    assert then[0] not in dict(visible_groups(root))
    page.close()
    assert not errors, errors


SHOWN_FRAMES = """() => Array.from(document.querySelectorAll('.dpsim-ring .frame'))
  .filter(f => getComputedStyle(f).display !== 'none').map(f => f.querySelector('title').textContent)"""


def test_ring_animation_has_frames_and_steps(browser, site, all_pages):
    """One frame shows at a time; 'next', 'back' and the step buttons move it, with no script."""
    page, errors, outside = open_page(browser, f"{site}/chapters/02_reduce_and_all_reduce.html")
    page.wait_for_selector(".dpsim-ring .frame svg", state="attached", timeout=20000)
    frames = page.locator(".dpsim-ring .frame").count()
    first = page.evaluate(SHOWN_FRAMES)
    page.locator(".dpsim-ring .f0 .nav label", has_text="next").click()
    second = page.evaluate(SHOWN_FRAMES)
    page.locator(".dpsim-ring .steps label", has_text="6").click()
    last = page.evaluate(SHOWN_FRAMES)
    page.locator(".dpsim-ring .f6 .nav label", has_text="back").click()
    before_last = page.evaluate(SHOWN_FRAMES)
    page.close()
    assert not outside, f"clicking the animation requested outside 127.0.0.1: {outside}"
    assert frames == 7  # start + 2(p-1) steps for p = 4
    assert first == ["ring all-reduce, p=4: start"], first
    assert second == ["ring all-reduce, p=4: step 1 of 6 (reduce-scatter)"], second
    assert last == ["ring all-reduce, p=4: step 6 of 6 (all-gather)"], last
    assert before_last == ["ring all-reduce, p=4: step 5 of 6 (all-gather)"], before_last
    assert not errors, errors


def test_pasting_an_error_into_search_finds_the_index_or_its_chapter(browser, site):
    """Five messages from errors.md, typed into the book's own search (offline, Sphinx's
    index): each lands on the error index or a chapter."""
    page_text = open(os.path.join(ROOT, "errors.md"), encoding="utf-8").read()
    messages = re.findall(r"^## `(.+)`$", page_text, re.M)[::3][:5]
    assert len(messages) == 5, messages
    for message in messages:
        words = " ".join(re.findall(r"[A-Za-z_]{4,}", message)[:6])  # what a reader would paste
        page, errors, outside = open_page(browser, f"{site}/search.html")
        page.fill("form.bd-search input[name=q] >> visible=true", words)
        page.keyboard.press("Enter")
        page.wait_for_selector("#search-results ul.search li a", timeout=20000)
        found = page.locator("#search-results ul.search li a").evaluate_all("as => as.map(a => a.href)")
        page.close()
        assert any("errors.html" in h or "/chapters/" in h for h in found[:5]), (words, found[:5])
        assert not errors and not outside, (errors, outside)

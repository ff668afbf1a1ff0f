"""The built book in a real browser: widgets alive without a kernel, nothing fetched from outside.

Needs Debian's chromium (/usr/bin/chromium, installed by .ci/run) and playwright's
Python client (which drives that browser; it downloads nothing). Without a
browser the tests skip, except in CI (CI=true), where they fail.
"""
import functools
import http.server
import os
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
sync_api = pytest.importorskip("playwright.sync_api")


@pytest.fixture(scope="module")
def site(built_book):
    """_build/html served on 127.0.0.1 only."""
    handler = functools.partial(_QuietHandler, directory=built_book)
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


class _QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args):
        pass


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


def test_every_page_loads_offline_without_errors(browser, site, all_pages, built_book):
    shots = os.path.join(os.path.dirname(built_book), "screenshots")
    os.makedirs(shots, exist_ok=True)
    for rel in all_pages:
        page, errors, outside = open_page(browser, f"{site}/{rel}")
        page.wait_for_timeout(300)
        page.screenshot(path=os.path.join(shots, rel.replace("/", "_") + ".png"), full_page=True)
        page.close()
        assert not outside, f"{rel} requested outside 127.0.0.1: {outside}"
        assert not errors, f"{rel} console errors: {errors}"


def test_every_widget_renders(browser, site, all_pages, built_book):
    counted = 0
    for rel in all_pages:
        if "widget-view+json" not in open(os.path.join(built_book, rel), encoding="utf-8").read():
            continue
        page, _, _ = open_page(browser, f"{site}/{rel}")
        page.wait_for_selector(".jupyter-widgets", timeout=20000)
        sizes = widget_views(page)
        page.close()
        assert sizes and all(n > 100 for n in sizes), f"{rel}: empty widget area(s): {sizes}"
        counted += len(sizes)
    assert counted >= 4  # one explorer in each of chapters 2-5


def test_moving_a_control_redraws_each_explorer(browser, site, all_pages, built_book):
    for rel in all_pages:
        if "widget-view+json" not in open(os.path.join(built_book, rel), encoding="utf-8").read():
            continue
        page, errors, outside = open_page(browser, f"{site}/{rel}")
        page.wait_for_selector(".widget-toggle-buttons", timeout=20000)
        for root in page.locator(".jupyter-widgets.widget-vbox").all():
            groups = root.locator(".widget-toggle-buttons")
            if groups.count() == 0:
                continue
            for g in range(groups.count()):
                before = root.evaluate(VISIBLE_DRAWING)
                assert before, f"{rel}: explorer draws nothing"
                groups.nth(g).locator("button").last.click()
                page.wait_for_timeout(100)
                after = root.evaluate(VISIBLE_DRAWING)
                assert after and after != before, f"{rel}: control {g} did not change the drawing"
        page.wait_for_timeout(300)
        page.close()
        assert not outside, f"{rel}: clicking its controls requested outside 127.0.0.1: {outside}"
        assert not errors, errors


def test_ring_animation_has_frames_and_steps(browser, site, all_pages):
    page, errors, outside = open_page(browser, f"{site}/chapters/02_reduce_and_all_reduce.html")
    frames = page.evaluate("animring0.frames.length")
    first = page.locator("#_anim_imgring0").get_attribute("src")
    page.locator(".animation button[onclick='animring0.next_frame()']").click()
    second = page.locator("#_anim_imgring0").get_attribute("src")
    page.wait_for_timeout(300)
    page.close()
    assert not outside, f"clicking the animation requested outside 127.0.0.1: {outside}"
    assert frames == 7  # start + 2(p-1) steps for p = 4
    assert first.startswith("data:image/png") and second != first
    assert not errors, errors

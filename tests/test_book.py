"""The book builds with warnings as errors, from the stored notebook outputs."""
import os
import re

import yaml

from conftest import ROOT


def toc_files():
    toc = yaml.safe_load(open(os.path.join(ROOT, "_toc.yml")))
    return [toc["root"]] + [c["file"] for part in toc["parts"] for c in part["chapters"]]


def test_every_toc_page_is_built(built_book):
    for page in toc_files():
        assert os.path.exists(os.path.join(built_book, page + ".html")), page


def test_chapter_pages_show_stored_outputs(built_book):
    html = open(os.path.join(built_book, "chapters", "01_ranks_and_world.html"), encoding="utf-8").read()
    assert "I am rank 3 of a world of 4" in html  # a stored stdout
    assert re.search(r'<img alt="Two bar charts, before and after all_reduce[^"]*" src="../_images/\w+\.svg"',
                     html)  # the all_reduce figure: an SVG with its text alternative
    assert 'href="../glossary.html#term-rank"' in html  # {term} links resolve
    assert '<h1><span class="section-number">1. </span>Ranks and the world' in html  # "chapter 1"
    assert "install the book's helper package" not in html  # the install cell is left out


def test_each_faq_question_is_a_heading_a_reader_can_link_to(built_book):
    html = open(os.path.join(built_book, "faq.html"), encoding="utf-8").read()
    questions = re.findall(r'<h3>.*?<a class="headerlink" href="#[\w-]+"', html)
    assert len(questions) >= 50, questions[:3]


def test_every_chapter_is_in_the_toc():
    chapters = sorted(f[:-6] for f in os.listdir(os.path.join(ROOT, "chapters")) if f.endswith(".ipynb"))
    assert [f"chapters/{c}" for c in chapters] == [f for f in toc_files() if f.startswith("chapters/")]


def test_vendored_javascript_matches_its_manifest():
    """The JS the book serves is exactly what scripts/vendor-js took from the npm registry."""
    import hashlib

    vendor = os.path.join(ROOT, "_static", "vendor")
    listed = {}
    for line in open(os.path.join(vendor, "MANIFEST")):
        if line.strip() and not line.startswith("#"):
            digest, path = line.split()
            listed[os.path.normpath(path)] = digest
    present = {os.path.relpath(os.path.join(d, f), vendor) for d, _, fs in os.walk(vendor) for f in fs} - {"MANIFEST"}
    assert set(listed) == present
    for path, digest in listed.items():
        assert hashlib.sha256(open(os.path.join(vendor, path), "rb").read()).hexdigest() == digest, path


def test_faq_links_every_answer_to_a_chapter_or_says_it_is_unproven():
    faq = open(os.path.join(ROOT, "faq.md"), encoding="utf-8").read()
    proven = faq.split("## Not yet proven in this book")[0]  # that section, if any, says so itself
    questions = proven.split("\n### ")[1:]  # each question is a heading a reader can link to
    assert len(questions) >= 15
    assert all("{ref}" in q for q in questions), [q[:60] for q in questions if "{ref}" not in q]


def test_every_faq_link_points_at_a_section_that_exists():
    import glob
    import json
    import re

    labels = set()
    for path in glob.glob(os.path.join(ROOT, "chapters", "*.ipynb")):
        for cell in json.load(open(path, encoding="utf-8"))["cells"]:
            if cell["cell_type"] == "markdown":
                labels |= set(re.findall(r"^\(([\w-]+)\)=$", "".join(cell["source"]), re.M))
    faq = open(os.path.join(ROOT, "faq.md"), encoding="utf-8").read()
    targets = [m.group(2) or m.group(1) for m in re.finditer(r"\{ref\}`([^`<]*?)(?:\s*<([\w-]+)>)?`", faq)]
    assert len(targets) >= 20
    assert not [t for t in targets if t.strip() not in labels]


def test_widget_pages_load_each_script_once(built_book):
    """embed.js and its two inline helpers (MathJax 2 shim, aria-pressed) appear once per page."""
    checked = 0
    for root, _, files in os.walk(os.path.join(built_book, "chapters")):
        for f in files:
            html = open(os.path.join(root, f), encoding="utf-8").read()
            if "widget-state+json" not in html:
                continue
            counts = [html.count(s) for s in ("html-manager/embed.js", "mj.Hub = ", "function mark()")]
            assert counts == [1, 1, 1], f"{f}: embed.js, shim, aria script appear {counts} times"
            checked += 1
    assert checked >= 4


def test_pages_without_widgets_load_no_widget_script(built_book):
    """embed.js (the widget manager) is heavy: only pages with widget state load it."""
    plain = 0
    for root, _, files in os.walk(built_book):
        for f in files:
            if not f.endswith(".html"):
                continue
            html = open(os.path.join(root, f), encoding="utf-8").read()
            if "widget-state+json" in html:
                continue
            assert "html-manager/embed.js" not in html, f
            plain += 1
    assert plain >= 5  # the intro, the FAQ, the glossary, chapters without widgets

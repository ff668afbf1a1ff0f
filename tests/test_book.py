"""The book builds with warnings as errors, from the stored notebook outputs."""
import os
import subprocess
import sys

import pytest
import yaml

from conftest import ROOT


def toc_files():
    toc = yaml.safe_load(open(os.path.join(ROOT, "_toc.yml")))
    return [toc["root"]] + [c["file"] for c in toc["chapters"]]


@pytest.fixture(scope="session")
def built_book():
    """Build once per session into _build/html, as `make book` does."""
    jb = os.path.join(os.path.dirname(sys.executable), "jupyter-book")
    proc = subprocess.run([jb, "build", "--warningiserror", "--keep-going", ROOT],
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout[-5000:] + proc.stderr[-5000:]
    return os.path.join(ROOT, "_build", "html")


def test_every_toc_page_is_built(built_book):
    for page in toc_files():
        assert os.path.exists(os.path.join(built_book, page + ".html")), page


def test_chapter_pages_show_stored_outputs(built_book):
    html = open(os.path.join(built_book, "chapters", "01_ranks_and_world.html"), encoding="utf-8").read()
    assert "I am rank 3 of a world of 4" in html  # a stored stdout
    assert '<img alt="../_images/' in html  # the all_reduce figure
    assert 'href="../glossary.html#term-rank"' in html  # {term} links resolve


def test_every_chapter_is_in_the_toc():
    chapters = sorted(f[:-6] for f in os.listdir(os.path.join(ROOT, "chapters")) if f.endswith(".ipynb"))
    assert [f"chapters/{c}" for c in chapters] == [f for f in toc_files() if f.startswith("chapters/")]

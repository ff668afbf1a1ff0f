"""Stored notebooks are what readers see and what nbval compares: keep them whole and clean."""
import glob
import json
import os
import re
import tempfile

import pytest

from conftest import LONG_DECIMAL, ROOT

NOTEBOOKS = sorted(glob.glob(os.path.join(ROOT, "chapters", "*.ipynb")))
MACHINE = [p for p in {ROOT + "/", os.path.expanduser("~") + "/", tempfile.gettempdir() + "/"} if p != "//"]


def cells(path):
    return json.load(open(path))["cells"]


def text_of(output):
    parts = [output.get("text", "")]
    for mime in ("text/plain", "text/html"):
        parts.append(output.get("data", {}).get(mime, ""))
    return "".join("".join(p) if isinstance(p, list) else p for p in parts)


@pytest.mark.parametrize("path", NOTEBOOKS, ids=os.path.basename)
def test_executed_and_clean(path):
    for i, cell in enumerate(c for c in cells(path) if c["cell_type"] == "code"):
        assert cell["execution_count"] is not None, f"code cell {i} was never run"
        tags = cell.get("metadata", {}).get("tags", [])
        for out in cell["outputs"]:
            if out["output_type"] == "error":
                assert "raises-exception" in tags, f"code cell {i} stores an unexpected error"
            text = text_of(out)
            assert not any(m in text for m in MACHINE), f"code cell {i} shows a machine path"
            if out.get("name") == "stderr":
                assert not re.search(r"Warning|warn\(", text), f"code cell {i} has a warning on stderr"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=os.path.basename)
def test_timing_only_cells_are_never_compared(path):
    """The second float path skips `timing-only` cells (conftest.py): their outputs must be ones
    nbval ignores anyway."""
    for i, cell in enumerate(cells(path)):
        tags = cell.get("metadata", {}).get("tags", [])
        assert "timing-only" not in tags or "nbval-ignore-output" in tags, f"cell {i}"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=os.path.basename)
def test_no_floats_cells_print_no_float_arithmetic(path):
    """The second float path also skips cells tagged `no-floats` (conftest.py). Like the
    Makefile's NO_FLOATS chapters, such a cell's compared output may show integers, halves
    and the like, never the last digits of a float computation."""
    for i, cell in enumerate(cells(path)):
        tags = cell.get("metadata", {}).get("tags", [])
        if "no-floats" not in tags or "nbval-ignore-output" in tags:
            continue
        text = "\n".join(text_of(out) for out in cell.get("outputs", []))
        long = LONG_DECIMAL.findall(text)
        assert not long, f"cell {i} is tagged no-floats but prints {long[:5]}"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=os.path.basename)
def test_structure(path):
    headings = [line for c in cells(path) if c["cell_type"] == "markdown"
                for line in "".join(c["source"]).splitlines() if line.startswith(("#", "**"))]
    text = "\n".join(headings)
    for part in ("Objectives", "Questions", "Exercises", "Summary"):
        assert part in text, f"{os.path.basename(path)} lacks a '{part}' part"
    sources = "".join("".join(c["source"]) for c in cells(path) if c["cell_type"] == "code")
    assert "dpsim.check(" in sources, "exercises need a cell that checks the answer"
    assert not re.search(r"from dpsim\.|dpsim\._", sources), "chapters use only dpsim's public names"


def test_every_chapter_installs_the_helper_from_the_one_repository_url():
    """Colab and Kaggle have no dpsim: the first code cell installs it, from pyproject's URL."""
    import tomllib

    import yaml

    url = tomllib.load(open(os.path.join(ROOT, "pyproject.toml"), "rb"))["project"]["urls"]["Repository"]
    name = tomllib.load(open(os.path.join(ROOT, "pyproject.toml"), "rb"))["project"]["name"]
    assert yaml.safe_load(open(os.path.join(ROOT, "_config.yml")))["repository"]["url"] == url
    for path in NOTEBOOKS:
        first = "".join(next(c for c in cells(path) if c["cell_type"] == "code")["source"])
        assert 'find_spec("dpsim") is None' in first, os.path.basename(path)
        assert f'REPO = "{url}"' in first and f'"{name} @ git+{{REPO}}"' in first, os.path.basename(path)


@pytest.mark.parametrize("path", NOTEBOOKS, ids=os.path.basename)
def test_code_fits_the_column(path):
    """Code lines of at most 88 characters: the book's column shows them without scrolling."""
    long = [(i, line) for i, c in enumerate(cells(path)) if c["cell_type"] == "code"
            for line in "".join(c["source"]).splitlines() if len(line) > 88]
    assert not long, long[:5]

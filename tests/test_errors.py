"""errors.md, the index of the error messages the chapters reproduce (scripts/error-index)."""
import json
import os
import re
import subprocess
import sys

from conftest import ROOT


def entries():
    """(message, chapter number, section label) of each entry of errors.md."""
    page = open(os.path.join(ROOT, "errors.md"), encoding="utf-8").read()
    found = re.findall(r"^## `(.+)`\n\n\*\*Reproduced in\*\* \{ref\}`chapter (\d+): [^<]+<([\w-]+)>`", page, re.M)
    assert len(found) == page.count("\n## "), "an entry without its link"
    return found


def test_the_index_is_current_and_every_reproduced_message_is_in_it():
    """--check regenerates the page: it fails on a message with no entry, an entry that no
    stored output shows any more, or a page that differs from what the outputs give."""
    proc = subprocess.run([sys.executable, "scripts/error-index", "--check"], cwd=ROOT,
                          capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    assert len(entries()) >= 12


def test_every_entry_links_to_a_section_whose_cell_shows_the_message():
    for message, number, label in entries():
        [path] = [p for p in os.listdir(os.path.join(ROOT, "chapters")) if p.startswith(f"{int(number):02d}_")]
        cells = json.load(open(os.path.join(ROOT, "chapters", path), encoding="utf-8"))["cells"]
        start = next(i for i, c in enumerate(cells)
                     if c["cell_type"] == "markdown" and f"({label})=" in "".join(c["source"]))
        text = message.rstrip("…")
        shown = False
        for cell in cells[start + 1:]:
            if cell["cell_type"] == "markdown" and re.search(r"^#{1,2} ", "".join(cell["source"]), re.M):
                break  # the next section of the same or a higher level
            for out in cell.get("outputs", []):
                body = (f"{out.get('ename')}: {out.get('evalue')}" if out["output_type"] == "error"
                        else "".join(out.get("text", "")) + "".join(out.get("data", {}).get("text/plain", "")))
                shown |= text in body.replace("`", "")  # the page drops backticks from a heading
        assert shown, f"{path}: no cell after ({label})= shows {message!r}"

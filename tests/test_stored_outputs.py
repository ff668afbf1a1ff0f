"""Stored outputs that nbval compares must hold on any machine (README: "Writing a chapter").

A value that depends on the last bits of a float (the SIMD path, the thread
count, the summation order) turns a reader's nbval run red. Such values may
only appear in cells tagged ``nbval-ignore-output``, or in cells tagged
``exact-output`` whose numbers are exact by construction (counts, bytes,
sums of small integers).
"""
import glob
import json
import os
import re

import pytest

from conftest import ROOT

NOTEBOOKS = sorted(glob.glob(os.path.join(ROOT, "chapters", "*.ipynb")))

# Each pattern names a shape of number that rounding can change from machine to machine.
SUSPECT = {
    "a raw magnitude below 1e-5": re.compile(r"(?<![\w.])-?\d(?:\.\d+)?e-0*(?:[5-9]|[1-9]\d)\b", re.I),
    "a zero in scientific notation (a difference that may not be zero elsewhere)":
        re.compile(r"(?<![\w.])-?0(?:\.0+)?e[+-]?0+\b", re.I),
    "a float with 6 or more significant digits": re.compile(r"(?<![\w.])-?(?:0\.0*[1-9]\d{5,}|[1-9]\d*\.\d+)"),
    "a hash of float bytes (print whether two hashes are equal instead)":
        re.compile(r"\b(?=[0-9a-f]*\d)(?=[0-9a-f]*[a-f])[0-9a-f]{10,}\b"),
    "a raw gap or difference below 1e-4 (print a verdict instead)": re.compile(
        r"\b(?:gap|difference|diff|error|deviation)s?\b(?:[ \t]+(?:of|is|to [\w ]{1,20}))?[ \t]*[=:]?[ \t]*"
        r"(-?\d+(?:\.\d+)?(?:e[+-]?\d+)?)\b", re.I),
}


def compared_text(cell):
    """The output text nbval compares for this cell ('' if it compares none)."""
    tags = cell.get("metadata", {}).get("tags", [])
    if cell["cell_type"] != "code" or {"nbval-ignore-output", "exact-output", "nbval-skip"} & set(tags):
        return ""
    parts = []
    for out in cell["outputs"]:
        if out["output_type"] == "stream":
            parts.append("".join(out["text"]))
        elif out["output_type"] in ("execute_result", "display_data"):
            parts.append("".join(out.get("data", {}).get("text/plain", "")))
    return "\n".join(parts)


def suspects(text):
    found = []
    for why, pattern in SUSPECT.items():
        for m in pattern.finditer(text):
            if why.startswith("a float with") and len(re.sub(r"\D", "", m.group()).lstrip("0")) < 6:
                continue
            if why.startswith("a raw gap") and abs(float(m.group(1))) >= 1e-4:
                continue
            if re.search(r"(below|under|within|tolerance|atol|rtol|<)\W*$", text[max(0, m.start() - 14):m.start()]):
                continue  # a threshold the output states, not a measured value
            found.append(f"{m.group()!r}: {why}")
    return found


@pytest.mark.parametrize("path", NOTEBOOKS, ids=os.path.basename)
def test_compared_outputs_are_machine_independent(path):
    problems = []
    for i, cell in enumerate(json.load(open(path))["cells"]):
        problems += [f"cell {i}: {s}" for s in suspects(compared_text(cell))]
    assert not problems, "\n".join(problems)


@pytest.mark.parametrize("text, flagged", [
    ("largest gradient gap 0", True),          # ch4 before the rule: 0 here, 3.7e-09 elsewhere
    ("largest gradient gap 3.7e-09", True),
    ("largest difference 0.0e+00", True),
    ("loss 0.12345678", True),
    ("f(whole batch) = 0.878116", True),
    ("largest gap to one process 0.085", False),
    ("raise errors[0]", False),
    ("largest gap to one process: below 1e-6", False),
    ("rank 0: weights 8a4d07f29353, momentum None", True),  # ch8 before the rule: SIMD-dependent bytes
    ("every rank loaded bit-identical weights: True", False),
    ("equal up to float32 rounding: True", False),
    ("each rank sent [4800, 4800] bytes", False),
    ("my loss 1.3690", False),
    ("lr 1e-3", False),
])
def test_the_scanner_itself(text, flagged):
    assert bool(suspects(text)) == flagged, suspects(text)

"""scripts/solved-notebooks: make test's first pass runs its copies, so it must really answer."""
import glob
import json
import os
import re
import subprocess
import sys

from conftest import ROOT

SCRIPT = os.path.join(ROOT, "scripts", "solved-notebooks")
RIGHT = "Right: that is what the ranks computed.\n"


def sources(nb):
    return ["".join(c["source"]) for c in nb["cells"]]


def test_every_exercise_is_answered_and_nothing_else_changes(tmp_path):
    proc = subprocess.run([sys.executable, SCRIPT, str(tmp_path)], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    chapters = sorted(glob.glob(os.path.join(ROOT, "chapters", "*.ipynb")))
    expected = 0
    for path in chapters:
        original = json.load(open(path))
        solved = json.load(open(tmp_path / os.path.basename(path)))
        blanks = [i for i, s in enumerate(sources(original)) if re.search(r"^answer_\d+ = None\b", s, re.M)]
        expected += len(blanks)
        changed = [i for i, (a, b) in enumerate(zip(sources(original), sources(solved))) if a != b]
        assert changed == blanks, os.path.basename(path)  # the answer cells, and only they
        for i in blanks:
            assert not re.search(r"^answer_\d+ = None\b", sources(solved)[i], re.M)
            out = "".join("".join(o["text"]) for o in solved["cells"][i]["outputs"] if o.get("name") == "stdout")
            assert out.endswith(RIGHT), (os.path.basename(path), i)
    assert expected >= 30  # the book's exercises: a script that finds none must not pass
    assert proc.stdout.startswith(f"{expected} exercises answered"), proc.stdout


def test_a_chapter_whose_exercise_output_is_not_blank_is_refused(tmp_path):
    """The solved copy must differ from the chapter only by its answers: a chapter stored
    with an answer already in place would make the first pass test nothing new."""
    chapters = tmp_path / "chapters"
    scripts = tmp_path / "scripts"
    chapters.mkdir()
    scripts.mkdir()
    nb = json.load(open(os.path.join(ROOT, "chapters", "01_ranks_and_world.ipynb")))
    for cell in nb["cells"]:
        if cell["cell_type"] == "code" and re.search(r"^answer_1 = None", "".join(cell["source"]), re.M):
            cell["outputs"] = [{"output_type": "stream", "name": "stdout", "text": [RIGHT]}]
    json.dump(nb, open(chapters / "01_ranks_and_world.ipynb", "w"))
    (scripts / "solved-notebooks").write_text(open(SCRIPT).read())
    proc = subprocess.run([sys.executable, str(scripts / "solved-notebooks"), str(tmp_path / "out")],
                          capture_output=True, text=True)
    assert proc.returncode != 0 and "Traceback" not in proc.stderr, proc.stderr  # refused, not crashed
    assert "01_ranks_and_world.ipynb: the stored output of answer_1's cell does not end with" in proc.stderr

"""What `make test` runs: the checks that make its passes meaningful (README: "Writing a chapter")."""
import os
import re
import subprocess

from conftest import LONG_DECIMAL, ROOT

CHAPTERS = sorted(f for f in os.listdir(os.path.join(ROOT, "chapters")) if f.endswith(".ipynb"))


def dry_run():
    proc = subprocess.run(["make", "-n", "test"], cwd=ROOT, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout.replace("\\\n", " ")


def test_one_run_holds_the_unit_tests_the_solved_chapters_and_the_second_float_path():
    commands = dry_run().splitlines()
    solve = [i for i, c in enumerate(commands) if "scripts/solved-notebooks _build/solved" in c]
    copy = [i for i, c in enumerate(commands) if re.search(r"\bcp .*_build/float-path/?\s*$", c)]
    run = [i for i, c in enumerate(commands)
           if re.search(r"-m pytest .* tests _build/solved _build/float-path\s*$", c)]
    assert solve and copy and run and solve[0] < copy[0] < run[0], commands


def test_the_second_pass_runs_on_another_float_path():
    """Another SIMD path and other thread counts, on every chapter whose outputs hold floats."""
    commands = dry_run().splitlines()
    run = [c for c in commands if "-m pytest" in c]
    assert len(run) == 1, run
    settings = re.search(r'DPSIM_FLOAT_PATH="([^"]*)"', run[0])
    assert settings, run[0]
    assert set(settings.group(1).split()) >= {
        "ATEN_CPU_CAPABILITY=default", "OMP_NUM_THREADS=1", "DPSIM_RANK_THREADS=2"}
    [copy] = [c for c in commands if re.search(r"\bcp .*_build/float-path/?\s*$", c)]
    copied = sorted(os.path.basename(p) for p in re.findall(r"_build/solved/(\S+\.ipynb)", copy))
    skipped = set(CHAPTERS) - set(copied)
    # A value computed in floating point shows its last digits. The pass runs on every
    # chapter whose compared outputs show some, and such chapters exist (a pass over none
    # would prove nothing); a skipped chapter prints only integers, halves and the like,
    # and addresses (Makefile: NO_FLOATS).
    printing = {chapter: LONG_DECIMAL.findall(compared_text(chapter)) for chapter in CHAPTERS}
    assert skipped and any(printing.values()), copied
    for chapter in sorted(skipped):
        long = printing[chapter]
        assert not long, f"{chapter} prints {long[:5]}: it belongs in the second pass"
    assert set(copied) <= set(CHAPTERS), copied


def compared_text(chapter: str) -> str:
    """The text of every output that nbval compares in a chapter."""
    import json

    texts = []
    for cell in json.load(open(os.path.join(ROOT, "chapters", chapter)))["cells"]:
        if cell["cell_type"] != "code" or "nbval-ignore-output" in cell["metadata"].get("tags", []):
            continue
        for out in cell.get("outputs", []):
            texts.append("".join(out.get("text", "")))
            for kind, value in out.get("data", {}).items():
                if kind.startswith("text/"):  # not figures' SVG: nbval skips it (conftest.py)
                    texts.append("".join(value))
    return "\n".join(texts)

"""What `make test` runs: the checks that make its passes meaningful (README: "Writing a chapter")."""
import os
import re
import subprocess

from conftest import ROOT

CHAPTERS = sorted(f for f in os.listdir(os.path.join(ROOT, "chapters")) if f.endswith(".ipynb"))


def dry_run():
    proc = subprocess.run(["make", "-n", "test"], cwd=ROOT, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout.replace("\\\n", " ")


def test_the_first_pass_runs_the_unit_tests_and_the_solved_chapters():
    commands = dry_run().splitlines()
    solve = [i for i, c in enumerate(commands) if "scripts/solved-notebooks _build/solved" in c]
    first = [i for i, c in enumerate(commands) if re.search(r"-m pytest .* tests _build/solved\s*$", c)]
    assert solve and first and solve[0] < first[0], commands


def test_the_second_pass_runs_on_another_float_path():
    """Another SIMD path and other thread counts, on every chapter whose outputs hold floats."""
    second = [c for c in dry_run().splitlines() if "ATEN_CPU_CAPABILITY=" in c]
    assert len(second) == 1, second
    line = second[0]
    for setting in ("ATEN_CPU_CAPABILITY=default", "OMP_NUM_THREADS=1", "DPSIM_RANK_THREADS=2"):
        assert setting in line, setting
    run = sorted(os.path.basename(p) for p in re.findall(r"_build/solved/(\S+\.ipynb)", line))
    skipped = sorted(set(CHAPTERS) - set(run))
    # the only chapters whose compared outputs hold no float arithmetic (Makefile: NO_FLOATS)
    assert skipped == ["09_from_notebook_to_cluster.ipynb", "10_hangs_crashes_and_drift.ipynb"], skipped

"""The same rank function under torchrun (the engine for many machines) and via python -m dpsim."""
import os
import subprocess
import sys

import pytest

import dpsim
from conftest import ROOT

TARGET = "examples/ranks_and_world.py:sum_of_ranks"
TORCHRUN = os.path.join(os.path.dirname(sys.executable), "torchrun")


def test_torchrun_standalone_two_processes(script_env):
    proc = subprocess.run(
        # --tee 3: torchrun forwards each rank's output line by line, prefixed ("[default0]:...")
        [TORCHRUN, "--standalone", "--nproc-per-node", "2", "--tee", "3", "-m", "dpsim", TARGET],
        cwd=ROOT, env=dict(script_env, OMP_NUM_THREADS="1"), capture_output=True, text=True, timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    for rank in (0, 1):
        for message in (f"I am rank {rank} of 2; I hold {rank}", f"after all_reduce rank {rank} holds 1"):
            assert sum(line.endswith(f"{rank}]:{message}") for line in lines) == 1, proc.stdout


def test_torchrun_helper_prints_in_rank_order(capsys, monkeypatch):
    monkeypatch.chdir(ROOT)
    dpsim.torchrun(TARGET, nproc_per_node=2)
    assert capsys.readouterr().out == (
        "[rank 0]\nI am rank 0 of 2; I hold 0\nafter all_reduce rank 0 holds 1\n"
        "[rank 1]\nI am rank 1 of 2; I hold 1\nafter all_reduce rank 1 holds 1\n"
    )


def test_python_m_dpsim_without_torchrun_uses_launch(script_env):
    proc = subprocess.run([sys.executable, "-m", "dpsim", TARGET, "--world-size", "3"],
                          cwd=ROOT, env=script_env, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines()[:3] == ["[rank 0]", "I am rank 0 of 3; I hold 0", "after all_reduce rank 0 holds 3"]


def test_bad_target_is_a_clear_error(script_env):
    proc = subprocess.run([sys.executable, "-m", "dpsim", "examples/ranks_and_world.py"],
                          cwd=ROOT, env=script_env, capture_output=True, text=True, timeout=60)
    assert proc.returncode != 0
    assert "target must look like FILE.py:FUNC" in proc.stderr


def test_torchrun_helper_takes_a_function_object(capsys, monkeypatch):
    """Also the store of TORCH_DISABLE_SHARE_RDZV_TCP_STORE=1: rank 0 hosts it, no prefix."""
    import ranks

    monkeypatch.setenv("TORCH_DISABLE_SHARE_RDZV_TCP_STORE", "1")
    dpsim.torchrun(ranks.all_reduce_rank_ids, nproc_per_node=2)
    assert capsys.readouterr().out == (
        "[rank 0]\nrank 0 of 2 has 0\nrank 0 now has 1\n[rank 1]\nrank 1 of 2 has 1\nrank 1 now has 1\n"
    )


def test_torchrun_failure_names_the_rank_and_shows_its_traceback():
    """One rank raises: the error says which, and carries that rank's traceback."""
    import pytest

    import ranks

    with pytest.raises(RuntimeError) as info:
        dpsim.torchrun(ranks.rank_one_divides_by_zero, nproc_per_node=2)
    message = str(info.value)
    assert message.startswith("torchrun failed (exit code 1): rank 1 failed first (exit code 1).\n"), message
    traceback = message.split("Output of rank 1:\n")[1].split("torchrun's summary:")[0]
    assert "in rank_one_divides_by_zero" in traceback and "return 1 / 0" in traceback, message
    assert traceback.rstrip().endswith("ZeroDivisionError: division by zero"), message


def test_restarted_workers_rejoin_under_max_restarts(capsys):
    """torchrun reuses its store across restarts; the entry point must not read the old attempt's keys.

    The plain-script recipe (TORCH_DISABLE_SHARE_RDZV_TCP_STORE=1, a store per attempt) is
    tested on examples/train_ddp.py in tests/test_train_ddp.py."""
    import ranks

    dpsim.torchrun(ranks.fails_on_first_attempt, nproc_per_node=2, extra=["--max-restarts", "1"])
    out = capsys.readouterr().out
    assert out == "[rank 0]\nattempt 1: all_reduce gave 2\n[rank 1]\nattempt 1: all_reduce gave 2\n"


def test_torchrun_timeout_kills_every_process():
    import glob

    import pytest

    import ranks
    from conftest import alive

    with pytest.raises(subprocess.TimeoutExpired):
        dpsim.torchrun(ranks.sleeps, nproc_per_node=2, timeout=20)
    leftovers = []
    for cmdline in glob.glob("/proc/[0-9]*/cmdline"):
        try:
            text = open(cmdline, "rb").read().replace(b"\0", b" ")
        except OSError:
            continue
        if b"dpsim-torchrun-" in text and alive(int(cmdline.split("/")[2])):
            leftovers.append(text[:120])
    assert not leftovers, leftovers

"""The launch benchmark runs, prints its table, and keeps its promise loosely: a launch from
the warm fork server beats mp.spawn, which starts interpreters and imports torch each time."""
from dpsim.bench import bench_launch


def test_bench_launch_prints_a_table_and_launch_beats_spawn(capsys):
    rows = bench_launch(repeats=1, world_sizes=(2,))  # `python -m dpsim.bench launch` adds 4 ranks
    assert set(rows) == {2} and all(a > 0 and b > 0 for a, b in rows.values())
    out = capsys.readouterr().out
    assert "launch/spawn" in out and "first dpsim.launch" in out
    # README: about 0.1 s against seconds; half of spawn's time leaves room for a noisy machine
    assert all(launch < 0.5 * spawn for launch, spawn in rows.values()), rows


def test_allreduce_bench_runs_under_torchrun_and_reports_nccl_tests_bandwidths():
    """examples/allreduce_bench.py on 2 CPU ranks (gloo): a row per size, busbw = algbw * 2(n-1)/n."""
    import os
    import re
    import subprocess
    import sys

    from conftest import ROOT

    torchrun = os.path.join(os.path.dirname(sys.executable), "torchrun")
    proc = subprocess.run(
        [torchrun, "--standalone", "--nproc-per-node", "2", "examples/allreduce_bench.py",
         "--min-bytes", "4096", "--max-bytes", "1048576", "--iters", "5", "--warmup", "2"],
        cwd=ROOT, env=dict(os.environ, OMP_NUM_THREADS="1", CUDA_VISIBLE_DEVICES=""),
        capture_output=True, text=True, timeout=180)
    assert proc.returncode == 0, proc.stderr[-3000:]
    lines = proc.stdout.splitlines()
    assert lines[0] == "all_reduce, 2 ranks, gloo, float32, 5 iterations per size", lines
    rows = [[float(v) for v in line.split()] for line in lines[2:] if re.match(r"\s*\d+ ", line)]
    assert [int(r[0]) for r in rows] == [4096, 16384, 65536, 262144, 1048576]
    for nbytes, micros, algbw, busbw in rows:
        assert micros > 0 and abs(algbw - nbytes / micros / 1e3) <= 0.002 + 0.01 * algbw
        assert abs(busbw - algbw * 2 * (2 - 1) / 2) <= 0.0015  # 2(n-1)/n = 1 for n = 2
    assert re.match(r"ring model fit: (alpha = [-\d.]+ us per message|the times)", lines[-1]), lines

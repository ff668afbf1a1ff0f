"""The launch benchmark runs, prints its table, and keeps its promise loosely: a launch from
the warm fork server beats mp.spawn, which starts interpreters and imports torch each time."""
from dpsim.bench import bench_launch


def test_bench_launch_prints_a_table_and_launch_beats_spawn(capsys):
    rows = bench_launch(repeats=1)
    assert set(rows) == {2, 4} and all(a > 0 and b > 0 for a, b in rows.values())
    out = capsys.readouterr().out
    assert "launch/spawn" in out and "first dpsim.launch" in out
    # README: about 0.1 s against seconds; half of spawn's time leaves room for a noisy machine
    assert all(launch < 0.5 * spawn for launch, spawn in rows.values()), rows

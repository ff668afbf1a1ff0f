"""The launch benchmark runs and prints its table (figures are not asserted: noisy machines)."""
from dpsim.bench import bench_launch


def test_bench_launch_prints_a_table(capsys):
    rows = bench_launch(repeats=1)
    assert set(rows) == {2, 4} and all(a > 0 and b > 0 for a, b in rows.values())
    out = capsys.readouterr().out
    assert "launch/spawn" in out and "first dpsim.launch" in out

"""The code readers study in the chapters, run on real ranks over many inputs."""
import pytest
import torch
import torch.distributed as dist

import dpsim
from conftest import chapter_code

CH2 = "02_reduce_and_all_reduce.ipynb"


@pytest.fixture(scope="module")
def ch2():
    return chapter_code(CH2, "ring_all_reduce", "record", "parameter_server_all_reduce", "run_collective")


def ring_vs_all_reduce(rank, world_size, ring, lengths):
    out = []
    for n in lengths:
        x = torch.randn(n, generator=torch.Generator().manual_seed(17 * rank + n), dtype=torch.float64)
        expected = x.clone()
        dist.all_reduce(expected)
        sent = ring(x)
        out.append((n, torch.allclose(x, expected), sent))
    return out


@pytest.mark.parametrize("p", [1, 2, 3, 4, 6])
def test_ring_equals_all_reduce_for_any_length(ch2, p):
    lengths = [0, 1, 2, 5, 7, 12, 13, 100]
    for per_rank in dpsim.launch(ring_vs_all_reduce, ch2["ring_all_reduce"], lengths, world_size=p):
        for n, same, sent in per_rank:
            assert same, (p, n)
            if n % p == 0:  # equal chunks: the textbook count exactly
                assert sent == 2 * (p - 1) * (n // p) * 8


def ring_log(rank, world_size, ring):
    log = []
    ring(torch.full((6,), 2.0 ** rank), log)
    return log


def test_ring_log_drives_the_animation(ch2):
    logs = dpsim.launch(ring_log, ch2["ring_all_reduce"], world_size=3)
    assert [len(l) for l in logs] == [5, 5, 5]  # start + 2(p-1) steps
    assert all(v == 7.0 for l in logs for v in l[-1]["chunks"])  # 1 + 2 + 4 everywhere at the end
    html = dpsim.animate_ring(logs)
    assert html == dpsim.animate_ring(logs)  # stable ids: same run, same page
    assert html.count("data:image/png;base64") == 5


def ps(rank, world_size, fn, server):
    x = torch.randn(1000, generator=torch.Generator().manual_seed(rank))
    expected = x.clone()
    dist.all_reduce(expected)
    sent, received = fn(x, server=server)
    return torch.allclose(x, expected, atol=1e-5), sent, received


@pytest.mark.parametrize("p, server", [(2, 0), (4, 0), (4, 2)])
def test_parameter_server_sums_and_counts_bytes(ch2, p, server):
    results = dpsim.launch(ps, ch2["parameter_server_all_reduce"], server, world_size=p)
    for rank, (same, sent, received) in enumerate(results):
        assert same
        assert (sent, received) == ((p - 1) * 4000,) * 2 if rank == server else (4000, 4000)


def collectives(rank, world_size, run):
    x = torch.tensor([10.0 * rank + i for i in range(world_size)])
    names = ["broadcast", "all_reduce", "scatter", "gather", "all_gather", "reduce_scatter", "barrier"]
    return {n: run(n, x).tolist() for n in names} | {"max": run("all_reduce", x, dist.ReduceOp.MAX).tolist()}


def test_run_collective_semantics(ch2):
    p = 3
    out = dpsim.launch(collectives, ch2["run_collective"], world_size=p)
    start = [[10.0 * r + i for i in range(p)] for r in range(p)]
    total = [sum(col) for col in zip(*start)]
    diagonal = [start[r][r] for r in range(p)]
    for r, got in enumerate(out):
        assert got["broadcast"] == start[0]
        assert got["all_reduce"] == total
        assert got["max"] == start[-1]
        assert got["scatter"] == [start[0][r]]
        assert got["gather"] == (diagonal if r == 0 else [])
        assert got["all_gather"] == diagonal
        assert got["reduce_scatter"] == [total[r]]
        assert got["barrier"] == start[r]
    with pytest.raises(dpsim.RankError, match="unknown collective 'allreduce'"):
        dpsim.launch(collectives_typo, ch2["run_collective"], world_size=2)


def collectives_typo(rank, world_size, run):
    return run("allreduce", torch.zeros(2))

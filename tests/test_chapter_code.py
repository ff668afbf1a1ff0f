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
    assert html.count("<svg viewBox=") == 5 and html.count('type="radio"') == 5


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
        assert (sent, received) == (((p - 1) * 4000,) * 2 if rank == server else (4000, 4000)), rank


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


CH4 = "04_averaging_vs_summing.ipynb"
CH5 = "05_batchnorm_and_syncbatchnorm.ipynb"


@pytest.fixture(scope="module")
def ch4():
    return chapter_code(CH4, "allreduce_sum_hook", "AllReduceSum", "soft_iou_loss", "global_soft_iou_loss")


def sum_hook_run(rank, world_size, hook, sizes):
    from torch import nn
    from torch.nn.parallel import DistributedDataParallel as DDP

    g = torch.Generator().manual_seed(0)
    x, y = torch.randn(sum(sizes), 3, generator=g), torch.randn(sum(sizes), 1, generator=g)
    start = sum(sizes[:rank])
    torch.manual_seed(0)
    model = DDP(nn.Linear(3, 1))
    model.register_comm_hook(None, hook)
    nn.MSELoss(reduction="sum")(model(x[start:start + sizes[rank]]), y[start:start + sizes[rank]]).backward()
    torch.manual_seed(0)
    single = nn.Linear(3, 1)
    nn.MSELoss(reduction="sum")(single(x), y).backward()
    return all(torch.allclose(a.grad, b.grad, atol=1e-5) for a, b in zip(model.parameters(), single.parameters()))


@pytest.mark.parametrize("sizes", [[4, 4], [1, 6], [2, 3, 5]])
def test_sum_hook_gives_single_process_sum_gradient(ch4, sizes):
    assert all(dpsim.launch(sum_hook_run, ch4["allreduce_sum_hook"], sizes, world_size=len(sizes)))


def iou_run(rank, world_size, local_loss, global_loss):
    from torch import nn
    from torch.nn.parallel import DistributedDataParallel as DDP

    g = torch.Generator().manual_seed(5)
    x = torch.randn(24, 4, generator=g)
    t = (x[:, :1] > 0.3).float()
    per = 24 // world_size
    torch.manual_seed(0)
    model = DDP(nn.Linear(4, 1))
    global_loss(model(x[rank * per:(rank + 1) * per]), t[rank * per:(rank + 1) * per]).backward()
    torch.manual_seed(0)
    single = nn.Linear(4, 1)
    local_loss(single(x), t).backward()
    return max((a.grad - b.grad).abs().max().item() for a, b in zip(model.parameters(), single.parameters()))


@pytest.mark.parametrize("p", [1, 2, 3, 4])
def test_global_iou_gradient_equals_single_process(ch4, p):
    gaps = dpsim.launch(iou_run, ch4["soft_iou_loss"], ch4["global_soft_iou_loss"], world_size=p)
    assert max(gaps) < 1e-6


def test_per_rank_iou_gradient_differs(ch4):
    """Control for the test above: without the global statistic DDP's gradient is off."""
    gaps = dpsim.launch(iou_run, ch4["soft_iou_loss"], ch4["soft_iou_loss"], world_size=4)
    assert max(gaps) > 1e-4


@pytest.fixture(scope="module")
def ch5():
    return chapter_code(CH5, "AllReduceSum", "CPUSyncBatchNorm")


def syncbn_run(rank, world_size, cls, sizes, features):
    from torch import nn

    g = torch.Generator().manual_seed(11)
    x = torch.cat([torch.randn(n, features, generator=g) * (r + 1) + r for r, n in enumerate(sizes)])
    w = torch.randn(len(x), features, generator=g)
    start = sum(sizes[:rank])
    mine = slice(start, start + sizes[rank])
    torch.manual_seed(0)
    ours = cls(features)
    for _ in range(2):  # two steps: running statistics accumulate
        xs = x[mine].clone().requires_grad_(True)
        out = ours(xs)
        (out * w[mine]).sum().backward()
    grads = torch.cat([ours.weight.grad, ours.bias.grad])
    dist.all_reduce(grads)
    torch.manual_seed(0)
    ref = nn.BatchNorm1d(features)
    for _ in range(2):
        xr = x.clone().requires_grad_(True)
        out_ref = ref(xr)
        (out_ref * w).sum().backward()
    ours.eval()
    ref.eval()
    return (torch.allclose(out, out_ref[mine], atol=1e-5), torch.allclose(xs.grad, xr.grad[mine], atol=1e-5),
            torch.allclose(grads, torch.cat([ref.weight.grad, ref.bias.grad]), atol=1e-4),
            torch.allclose(ours.running_var, ref.running_var, atol=1e-5),
            torch.allclose(ours(x[mine]), ref(x[mine]), atol=1e-5))


@pytest.mark.parametrize("sizes", [[5], [4, 4], [2, 7], [1, 2, 3, 6]])
def test_cpu_syncbatchnorm_equals_batchnorm_on_global_batch(ch5, sizes):
    for checks in dpsim.launch(syncbn_run, ch5["CPUSyncBatchNorm"], sizes, 3, world_size=len(sizes)):
        assert checks == (True, True, True, True, True)


@pytest.fixture(scope="module")
def ch6():
    return chapter_code("06_when_sync_happens.ipynb", "make_model", "timeline")


@pytest.mark.parametrize("cap_mb, expected", [(0.5, [["5", "4"], ["3", "2"], ["1", "0"]]), (25.0, None)])
def test_timeline_buckets_run_in_reverse_layer_order(ch6, cap_mb, expected):
    ready, buckets, backward_end = dpsim.launch(ch6["timeline"], cap_mb, world_size=2)[1]
    layers = [sorted({p.split(".")[0] for p in b["params"]}, reverse=True) for b in buckets]
    assert [name for name, _ in ready][:2] == ["5.bias", "5.weight"]
    if expected:
        assert layers == expected
    else:  # 25 MiB: everything after the small first bucket fits one bucket
        assert sum(len(l) for l in layers) == 6 and len(buckets) <= 2
    assert all(b["start"] <= b["end"] for b in buckets)


@pytest.fixture(scope="module")
def ch8():
    return chapter_code("08_checkpoints_and_restarts.ipynb", "make_model", "make_data", "fingerprint",
                        "settle_buckets", "train")


@pytest.mark.parametrize("p, crash_at", [(2, 1), (3, 2), (4, 3)])
def test_crash_and_resume_is_bit_identical(ch8, tmp_path, p, crash_at):
    uninterrupted, crashed = tmp_path / "a", tmp_path / "b"
    uninterrupted.mkdir()
    crashed.mkdir()
    reference = dpsim.launch(ch8["train"], str(uninterrupted), world_size=p)
    with pytest.raises(dpsim.RankError, match=f"rank 1 crashed at the start of epoch {crash_at}"):
        dpsim.launch(ch8["train"], str(crashed), 4, crash_at, world_size=p)
    assert torch.load(crashed / "last.pt")["epoch"] == crash_at - 1
    assert dpsim.launch(ch8["train"], str(crashed), world_size=p) == reference


def test_resume_without_settled_buckets_differs_on_three_ranks(ch8, tmp_path):
    """Control for the test above: the warm-up backward is what makes 3+ ranks bit-identical."""
    a, b = tmp_path / "a", tmp_path / "b"
    a.mkdir()
    b.mkdir()
    reference = dpsim.launch(ch8["train"], str(a), 4, -1, False, world_size=3)
    with pytest.raises(dpsim.RankError):
        dpsim.launch(ch8["train"], str(b), 4, 2, False, world_size=3)
    assert dpsim.launch(ch8["train"], str(b), 4, -1, False, world_size=3) != reference


CH12 = "12_sharding_with_zero_and_fsdp.ipynb"
REPORT = '''
def report(rank, world_size, strategy):
    out = train_and_measure(rank, world_size, strategy)
    print(sorted(out["memory"].items()), [name for name, *_ in out["calls"]])
'''


# importing torch.distributed.optim scripts its functional optimizers: torch 2.13 warns
@pytest.mark.filterwarnings("ignore:`torch.jit.:DeprecationWarning")
def test_ch12_rank_code_runs_unchanged_under_torchrun(capsys):
    """Chapter 12's rank function under torchrun: FSDP holds half of everything on 2 ranks."""
    ch12 = chapter_code(CH12, "make_model", "wrap", "storage_bytes", "count_collectives",
                        "written", "train_and_measure")
    exec(REPORT, ch12)  # a function of the chapter's (unimportable) namespace: sent by value
    dpsim.torchrun(ch12["report"], "FSDP reshard=True", nproc_per_node=2)
    psi = sum(p.numel() for p in ch12["make_model"]().parameters())
    memory = [("DDP buckets", 0), ("gradients", 2 * psi), ("in all", 8 * psi),
              ("optimizer state", 4 * psi), ("parameters", 2 * psi)]
    calls = ["all-gather"] * 6 + ["reduce-scatter", "all-gather"] * 2 + ["reduce-scatter"] * 2
    out = capsys.readouterr().out
    assert out.count(f"{memory} {calls}\n") == 2, out  # rank 0 and rank 1
    assert out.index("[rank 0]") < out.index("[rank 1]"), out

"""ThreadDataParallel: nn.DataParallel's algorithm on CPU threads."""
import copy

import pytest
import torch
from torch import nn

import dpsim


def mlp():
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(5, 7), nn.Tanh(), nn.Linear(7, 2))


@pytest.mark.parametrize("replicas, batch", [(1, 8), (2, 8), (3, 10), (4, 16), (5, 3)])
def test_gradients_equal_single_process_on_whole_batch(replicas, batch):
    x, y = torch.randn(batch, 5), torch.randn(batch, 2)
    single, model = mlp(), mlp()
    nn.MSELoss()(single(x), y).backward()
    nn.MSELoss()(dpsim.ThreadDataParallel(model, replicas)(x), y).backward()
    for a, b in zip(single.parameters(), model.parameters()):
        torch.testing.assert_close(b.grad, a.grad, rtol=1e-5, atol=1e-6)


def test_parameters_stay_leaves_and_outputs_keep_order():
    model = mlp()
    dp = dpsim.ThreadDataParallel(model, 3)
    x = torch.randn(9, 5)
    torch.testing.assert_close(dp(x), model(x))  # gathered in shard order
    assert all(type(p) is nn.Parameter and p.is_leaf for p in model.parameters())
    assert set(dp.last_timings) == {"replicate", "scatter", "parallel_apply", "gather"}


def test_replica_zero_shares_buffers_others_are_discarded():
    torch.manual_seed(0)
    bn = nn.BatchNorm1d(2, momentum=1.0)  # running stats = last batch's stats
    x = torch.tensor([[0.0, 0.0], [2.0, 2.0], [10.0, 10.0], [30.0, 30.0]])
    dpsim.ThreadDataParallel(bn, 2)(x)
    torch.testing.assert_close(bn.running_mean, torch.tensor([1.0, 1.0]))  # replica 0's shard: rows 0-1
    assert bn.num_batches_tracked.item() == 1


def test_replica_error_is_raised_in_the_caller():
    class Fails(nn.Module):
        def forward(self, x):
            if len(x) == 1:
                raise RuntimeError("shard too small")
            return x

    with pytest.raises(RuntimeError, match="shard too small"):
        dpsim.ThreadDataParallel(Fails(), 2)(torch.zeros(3, 1))
    with pytest.raises(ValueError, match="replicas must be >= 1"):
        dpsim.ThreadDataParallel(mlp(), 0)


@pytest.mark.skipif(torch.cuda.device_count() < 2, reason="needs 2 GPUs for the real nn.DataParallel")
def test_matches_real_dataparallel():
    x, y = torch.randn(8, 5), torch.randn(8, 2)
    real, ours = mlp().cuda(), mlp()
    nn.MSELoss()(nn.DataParallel(real, device_ids=[0, 1])(x.cuda()), y.cuda()).backward()
    nn.MSELoss()(dpsim.ThreadDataParallel(ours, 2)(x), y).backward()
    for a, b in zip(real.parameters(), ours.parameters()):
        torch.testing.assert_close(b.grad, a.grad.cpu(), rtol=1e-4, atol=1e-5)


def test_no_grad_in_the_caller_holds_in_the_replica_threads():
    dp = dpsim.ThreadDataParallel(mlp(), 2)
    with torch.no_grad():
        out = dp(torch.randn(4, 5))
    assert not out.requires_grad


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_autocast_in_the_caller_holds_in_the_replica_threads(dtype):
    """parallel_apply carries autocast into its threads; so does ThreadDataParallel."""
    model, x = mlp(), torch.randn(4, 5)
    with torch.autocast("cpu", dtype=dtype):
        plain, threaded = model(x), dpsim.ThreadDataParallel(model, 2)(x)
    assert plain.dtype == threaded.dtype == dtype
    assert torch.equal(plain, threaded)
    assert dpsim.ThreadDataParallel(model, 2)(x).dtype == torch.float32  # off outside


@pytest.mark.parametrize("n, k, sizes", [(10, 3, [4, 4, 2]), (4, 3, [2, 2]), (16, 4, [4, 4, 4, 4]), (5, 4, [2, 2, 1])])
def test_shards_like_dataparallel_scatter(n, k, sizes):
    """DataParallel cuts with Tensor.chunk (comm.scatter), and replicates once per shard."""
    class ShardSize(nn.Module):
        def forward(self, x):
            return torch.full((1,), float(len(x)))

    class FirstSample(nn.Module):
        def forward(self, x):
            return x[:1]

    dp = dpsim.ThreadDataParallel(ShardSize(), k)
    assert dp(torch.zeros(n, 1)).tolist() == sizes
    assert len(dp.replicate(len(sizes))) == len(sizes)
    # contiguous shards, in order, gathered in replica order
    firsts = dpsim.ThreadDataParallel(FirstSample(), k)(torch.arange(float(n)).view(n, 1))
    assert firsts.flatten().tolist() == [float(sum(sizes[:i])) for i in range(len(sizes))]

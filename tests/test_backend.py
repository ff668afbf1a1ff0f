"""Which group a launch builds, and where its ranks' tensors belong (dpsim/_backend.py, _device.py)."""
import ast
import os

import pytest
import torch
import torch.distributed as dist

import dpsim
from dpsim._backend import MIXED, choose_backend, cuda_backend, device_backends, resolve_backend

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
GPUS = torch.cuda.device_count() if torch.cuda.is_available() else 0

# (backend, world_size, visible GPUs) -> the init_process_group string, with NCCL built in
TABLE = [
    ("auto", 1, 0, "gloo"), ("auto", 2, 0, "gloo"), ("auto", 4, 0, "gloo"),
    ("auto", 1, 1, MIXED), ("auto", 2, 1, "gloo"), ("auto", 4, 1, "gloo"),  # NCCL: one rank per GPU
    ("auto", 1, 2, MIXED), ("auto", 2, 2, MIXED), ("auto", 3, 2, "gloo"),
    ("auto", 2, 8, MIXED), ("auto", 8, 8, MIXED), ("auto", 9, 8, "gloo"),
    ("gloo", 1, 0, "gloo"), ("gloo", 1, 1, "gloo"), ("gloo", 2, 2, "gloo"), ("gloo", 8, 8, "gloo"),
    ("nccl", 1, 1, MIXED), ("nccl", 2, 2, MIXED), ("nccl", 4, 8, MIXED), ("nccl", 8, 8, MIXED),
]


@pytest.mark.parametrize("backend, world_size, gpus, expected", TABLE)
def test_selection_table(backend, world_size, gpus, expected):
    assert choose_backend(backend, world_size, gpus, nccl=True) == expected


@pytest.mark.parametrize("backend, world_size, gpus", [("auto", 1, 1), ("auto", 8, 8), ("gloo", 2, 2)])
def test_a_build_without_nccl_uses_gloo(backend, world_size, gpus):
    assert choose_backend(backend, world_size, gpus, nccl=False) == "gloo"


@pytest.mark.parametrize("world_size, gpus", [(1, 0), (2, 0), (2, 1), (3, 2), (9, 8)])
def test_explicit_nccl_without_a_gpu_per_rank_fails(world_size, gpus):
    with pytest.raises(ValueError, match=f"world_size={world_size} but {gpus} GPU"):
        choose_backend("nccl", world_size, gpus, nccl=True)


def test_explicit_nccl_without_nccl_fails():
    with pytest.raises(RuntimeError, match="not available in this torch build"):
        choose_backend("nccl", 1, 1, nccl=False)


@pytest.mark.parametrize("backend", ["mpi", "NCCL", "cpu:gloo,cuda:nccl", ""])
def test_unknown_backend(backend):
    with pytest.raises(ValueError, match="unknown backend"):
        choose_backend(backend, 1, 1, nccl=True)


@pytest.mark.parametrize("config, cuda", [
    ("cpu:gloo,cuda:nccl", True), ("cuda:nccl", True), ("nccl", True), ("CPU:GLOO, CUDA:NCCL", True),
    ("gloo", False), ("cpu:gloo", False), ("cpu:gloo,cuda:gloo", False), ("undefined", False), ("mpi", False),
])
def test_cuda_backend(config, cuda):
    assert cuda_backend(config) is cuda


def test_device_backends():
    assert device_backends("cpu:gloo,cuda:nccl") == {"cpu": "gloo", "cuda": "nccl"}
    assert device_backends("gloo") == {"*": "gloo"}


def test_this_machine():
    assert resolve_backend("auto", 1) == (MIXED if GPUS >= 1 and dist.is_nccl_available() else "gloo")
    assert resolve_backend("gloo", 1) == "gloo"
    with pytest.raises(ValueError, match="unknown backend"):
        resolve_backend("mpi", 1)


def test_rank_device_outside_a_group():
    assert not dist.is_initialized()
    assert dpsim.rank_device() == torch.device("cpu")


def test_rank_device_is_the_local_ranks_gpu_in_a_cuda_group(monkeypatch):
    """No GPU needed: only which device rank_device names, from LOCAL_RANK."""
    from dpsim import _device

    monkeypatch.setattr(dist, "is_initialized", lambda: True)
    monkeypatch.setattr(_device, "group_backend", lambda: MIXED)
    monkeypatch.setenv("LOCAL_RANK", "3")
    assert dpsim.rank_device() == torch.device("cuda", 3)
    monkeypatch.setattr(_device, "group_backend", lambda: "gloo")
    assert dpsim.rank_device() == torch.device("cpu")


def _imports(module):
    tree = ast.parse(open(os.path.join(ROOT, "dpsim", module + ".py")).read())
    return {(node.module or "") + ":" + ",".join(a.name for a in node.names)
            for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)}


def test_no_import_circle_between_rank_and_forkserver():
    """The fork server imports _rank (lazily, in serve); _rank needs nothing of the fork server."""
    assert not [i for i in _imports("_rank") if "_forkserver" in i]
    assert "_process:die_with_parent" in _imports("_rank")
    assert ":_rank" in _imports("_forkserver")
    from dpsim import _process, _rank

    assert _rank.die_with_parent is _process.die_with_parent


# ------------------------------------------------------------------ real groups

def where_am_i(rank, world_size):
    """What a rank sees: its group, its device, and that CPU (and CUDA) tensors both reduce."""
    from dpsim._device import group_backend

    device = dpsim.rank_device()
    x = torch.tensor([float(rank + 1)])
    dist.all_reduce(x)  # a CPU tensor: gloo, in every group dpsim builds
    seen = {"backend": str(dist.get_backend()), "config": group_backend(), "device": str(device),
            "cpu_sum": x.item(), "local_rank": os.environ["LOCAL_RANK"]}
    if device.type == "cuda":
        y = torch.tensor([float(rank + 1)], device=device)
        dist.all_reduce(y)  # a CUDA tensor: NCCL
        dist.barrier()
        seen |= {"cuda_sum": y.item(), "current": torch.cuda.current_device()}
    print(seen["backend"], seen["device"])
    return seen


@pytest.mark.skipif(GPUS >= 2, reason="checks a machine with fewer than 2 GPUs")
@pytest.mark.parametrize("backend", ["auto", "gloo"])
def test_gloo_ranks_use_the_cpu(backend, capsys):
    seen = dpsim.launch(where_am_i, world_size=2, backend=backend)
    assert [s["device"] for s in seen] == ["cpu", "cpu"]
    assert [s["backend"] for s in seen] == ["gloo", "gloo"]
    assert all(dpsim._backend.device_backends(s["config"]).get("cpu") == "gloo" for s in seen)
    assert not any(cuda_backend(s["config"]) for s in seen)
    assert [s["cpu_sum"] for s in seen] == [3.0, 3.0]
    assert capsys.readouterr().out == "[rank 0]\ngloo cpu\n[rank 1]\ngloo cpu\n"


@pytest.mark.skipif(GPUS >= 2, reason="checks a machine with fewer than 2 GPUs")
def test_gloo_ranks_use_the_cpu_under_torchrun(capsys):
    dpsim.torchrun(where_am_i, nproc_per_node=2, timeout=120)
    assert capsys.readouterr().out == "[rank 0]\ngloo cpu\n[rank 1]\ngloo cpu\n"


@pytest.mark.skipif(GPUS < 1, reason="needs a GPU")
@pytest.mark.parametrize("backend", ["auto", "nccl"])
def test_one_rank_per_gpu_gets_a_mixed_group(backend):
    world_size = min(GPUS, 2)
    seen = dpsim.launch(where_am_i, world_size=world_size, backend=backend, timeout=120)
    total = world_size * (world_size + 1) / 2
    for rank, s in enumerate(seen):
        assert s["backend"] == MIXED
        assert cuda_backend(s["config"]) and device_backends(s["config"])["cpu"] == "gloo"
        assert s["device"] == f"cuda:{rank}" and s["current"] == rank
        assert s["cpu_sum"] == s["cuda_sum"] == total


@pytest.mark.skipif(GPUS < 1, reason="needs a GPU")
def test_one_rank_per_gpu_under_torchrun(capsys):
    dpsim.torchrun(where_am_i, nproc_per_node=min(GPUS, 2), timeout=180)
    out = capsys.readouterr().out
    assert out == "".join(f"[rank {r}]\n{MIXED} cuda:{r}\n" for r in range(min(GPUS, 2)))


@pytest.mark.skipif(GPUS != 1, reason="needs exactly one GPU")
def test_two_ranks_on_one_gpu_use_gloo_on_cpu():
    seen = dpsim.launch(where_am_i, world_size=2, timeout=120)
    assert [(s["backend"], s["device"], s["cpu_sum"]) for s in seen] == [("gloo", "cpu", 3.0)] * 2
    with pytest.raises(ValueError, match="NCCL refuses two ranks on one GPU"):
        dpsim.launch(where_am_i, world_size=2, backend="nccl")


def test_the_mixed_group_sends_cpu_tensors_over_gloo_and_cuda_tensors_over_nccl():
    """The literal, read by torch's own parser: on a CPU machine nothing else checks it."""
    from torch.distributed.distributed_c10d import Backend, BackendConfig

    assert BackendConfig(Backend(MIXED)).get_device_backend_map() == {"cpu": "gloo", "cuda": "nccl"}

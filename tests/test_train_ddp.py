"""examples/train_ddp.py, the canonical DDP script, under a real torchrun with 2 ranks on CPU (gloo)."""
import os
import re
import subprocess
import sys

import torch

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SCRIPT = os.path.join(ROOT, "examples", "train_ddp.py")


def torchrun(*args, cwd):
    """Start `torchrun --standalone --nproc-per-node 2 examples/train_ddp.py ARGS` (not waited for)."""
    exe = os.path.join(os.path.dirname(sys.executable), "torchrun")
    cmd = [exe] if os.path.exists(exe) else [sys.executable, "-m", "torch.distributed.run"]
    env = dict(os.environ, OMP_NUM_THREADS="1", PYTHONUNBUFFERED="1", CUDA_VISIBLE_DEVICES="")
    return subprocess.Popen([*cmd, "--standalone", "--nproc-per-node", "2", SCRIPT, *args], cwd=cwd, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def finish(proc):
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 0, out + err[-3000:]
    return [line for line in out.splitlines() if re.match(r"(epoch \d+ loss |resumed from epoch )", line)]


def test_train_checkpoint_and_bit_identical_resume(tmp_path):
    # the uninterrupted run and the first half of the interrupted one, side by side
    whole = torchrun("--epochs", "4", "--checkpoint", "whole.pt", cwd=tmp_path)
    first = torchrun("--epochs", "2", "--checkpoint", "split.pt", cwd=tmp_path)
    whole_out, first_out = finish(whole), finish(first)

    assert [line.rsplit(" ", 1)[0] for line in whole_out] == [f"epoch {e} loss" for e in range(4)]  # rank 0 alone
    losses = [float(line.rsplit(" ", 1)[1]) for line in whole_out]
    assert losses[-1] < losses[0] / 10, losses  # it learns
    assert first_out == whole_out[:2]  # the same run, to the printed digit
    assert torch.load(tmp_path / "split.pt")["epoch"] == 1

    second_out = finish(torchrun("--epochs", "4", "--checkpoint", "split.pt", cwd=tmp_path))
    assert second_out == ["resumed from epoch 1"] + whole_out[2:]

    whole_state, split_state = torch.load(tmp_path / "whole.pt"), torch.load(tmp_path / "split.pt")
    assert whole_state["epoch"] == split_state["epoch"] == 3
    assert whole_state["model"].keys() == split_state["model"].keys()
    for name, tensor in whole_state["model"].items():  # bitwise: two ranks sum in one order only
        assert torch.equal(tensor, split_state["model"][name]), name
    momentum = [s["momentum_buffer"] for s in whole_state["optimizer"]["state"].values()]
    resumed = [s["momentum_buffer"] for s in split_state["optimizer"]["state"].values()]
    assert len(momentum) == 4 and all(torch.equal(a, b) for a, b in zip(momentum, resumed))
    assert sorted(os.listdir(tmp_path)) == ["split.pt", "whole.pt"]  # no temporary file left behind

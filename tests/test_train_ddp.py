"""examples/train_ddp.py, the canonical DDP script, under a real torchrun with 2 ranks on CPU (gloo)."""
import glob
import os
import re
import signal
import subprocess
import sys
import time

import torch

from dpsim._process import stop_tree

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SCRIPT = os.path.join(ROOT, "examples", "train_ddp.py")


def torchrun(*args, cwd, flags=(), env=None):
    """Start `torchrun --standalone --nproc-per-node 2 FLAGS examples/train_ddp.py ARGS` (not waited for)."""
    exe = os.path.join(os.path.dirname(sys.executable), "torchrun")
    cmd = [exe] if os.path.exists(exe) else [sys.executable, "-m", "torch.distributed.run"]
    env = dict(os.environ, OMP_NUM_THREADS="1", PYTHONUNBUFFERED="1", CUDA_VISIBLE_DEVICES="", **(env or {}))
    # a session of its own, so that a hang can be stopped with every worker (finish)
    return subprocess.Popen([*cmd, "--standalone", "--nproc-per-node", "2", *flags, SCRIPT, *args], cwd=cwd,
                            env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True)


def finish(proc):
    try:
        out, err = proc.communicate(timeout=120)
    except subprocess.TimeoutExpired:
        stop_tree(proc)  # torchrun and its workers: no process is left behind
        raise
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


def workers_of(pid):
    """The processes that torchrun `pid` started for train_ddp.py."""
    found = []
    for path in glob.glob(f"/proc/{pid}/task/*/children"):
        for child in open(path).read().split():
            cmdline = open(f"/proc/{child}/cmdline", "rb").read()
            if b"train_ddp.py" in cmdline:
                found.append(int(child))
    return sorted(found)


def test_a_killed_worker_is_restarted_and_the_job_resumes(tmp_path):
    """--max-restarts 1, one worker SIGKILLed after the first checkpoint: the job resumes and ends
    with the uninterrupted run's parameters. torchrun runs with TORCH_DISABLE_SHARE_RDZV_TCP_STORE=1,
    as README.md, chapter 8 and the script's docstring say: without it, torch 2.11-2.15 give the
    restarted workers the first attempt's store, and gloo reads stale addresses (docs/claims.md)."""
    epochs = 100
    whole = torchrun("--epochs", str(epochs), "--checkpoint", "whole.pt", cwd=tmp_path)  # beside it
    job = None
    try:
        job = torchrun("--epochs", str(epochs), "--checkpoint", "killed.pt", cwd=tmp_path,
                       flags=["--max-restarts", "1"], env={"TORCH_DISABLE_SHARE_RDZV_TCP_STORE": "1"})
        deadline = time.monotonic() + 60
        while not (tmp_path / "killed.pt").exists():
            assert job.poll() is None and time.monotonic() < deadline, "no checkpoint was written"
            time.sleep(0.01)
        workers = workers_of(job.pid)
        assert len(workers) == 2, workers
        os.kill(workers[-1], signal.SIGKILL)
        out, whole_out = finish(job), finish(whole)  # exit codes 0 are asserted there
    finally:
        for proc in (whole, job):  # on a failed assertion: no process left behind
            if proc is not None and proc.poll() is None:
                stop_tree(proc)

    resumed = [line for line in out if line.startswith("resumed from epoch ")]
    assert len(resumed) == 1, out
    epoch = int(resumed[0].split()[-1])
    assert epoch < epochs - 1, "the kill came after the last checkpoint"
    assert out[-1] == whole_out[-1]  # the last epoch's loss, to the printed digit
    whole_state, killed_state = torch.load(tmp_path / "whole.pt"), torch.load(tmp_path / "killed.pt")
    assert killed_state["epoch"] == epochs - 1
    for name, tensor in whole_state["model"].items():
        assert torch.equal(tensor, killed_state["model"][name]), name

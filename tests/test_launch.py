"""dpsim.launch on real processes with real gloo collectives."""
import glob
import os
import signal
import subprocess
import sys
import textwrap
import time

import pytest
import torch

import dpsim
from conftest import alive
import ranks


def pids(pid_dir, n, wait=30.0):
    deadline = time.monotonic() + wait
    while time.monotonic() < deadline:
        files = glob.glob(os.path.join(pid_dir, "*.pid"))
        if len(files) == n:
            return [int(open(f).read()) for f in sorted(files)]
        time.sleep(0.05)
    raise AssertionError(f"ranks did not all start: {files}")


def assert_gone(pid_list, wait=5.0):
    deadline = time.monotonic() + wait
    while any(alive(p) for p in pid_list) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not [p for p in pid_list if alive(p)], "rank processes left behind"


def test_results_and_output_in_rank_order(capsys):
    out = dpsim.launch(ranks.all_reduce_rank_ids, world_size=4)
    assert [t.tolist() for t in out] == [[6.0]] * 4
    assert all(t.device.type == "cpu" for t in out)
    text = capsys.readouterr().out
    expected = "".join(f"[rank {r}]\nrank {r} of 4 has {r}\nrank {r} now has 6\n" for r in range(4))
    assert text == expected


def test_one_rank(capsys):
    assert dpsim.launch(ranks.all_reduce_rank_ids, world_size=1)[0].item() == 0.0


def test_env_matches_torchrun_names():
    out = dpsim.launch(ranks.env_and_device, world_size=2, backend="gloo")
    assert out[1] == {"RANK": "1", "WORLD_SIZE": "2", "LOCAL_RANK": "1", "MASTER_ADDR": "127.0.0.1",
                      "device": "cpu", "backend": "gloo"}


def test_exception_names_rank_with_traceback(tmp_path):
    start = time.monotonic()
    with pytest.raises(dpsim.RankError) as info:
        dpsim.launch(ranks.one_rank_raises, str(tmp_path), world_size=3, timeout=60)
    err = info.value
    assert err.rank == 1 and err.exc_type == "ValueError"
    assert "rank 1 raised ValueError: bad shard on this rank" in str(err)
    assert "one_rank_raises" in err.rank_traceback and 'raise ValueError("bad shard' in err.rank_traceback
    # ranks 0 and 2 were blocked in all_reduce: either stopped, or failed after rank 1 (gloo saw it leave)
    assert sorted(set(err.failures) | set(err.stopped)) == [0, 1, 2]
    assert str(err).startswith("rank 1 raised ValueError")
    assert isinstance(err.original, ValueError)
    assert time.monotonic() - start < 30, "the blocked ranks should be stopped soon after the failure, not at timeout"
    assert_gone(pids(tmp_path, 3))


def test_hung_rank_times_out_and_is_killed(tmp_path):
    with pytest.raises(dpsim.LaunchTimeout) as info:
        dpsim.launch(ranks.one_rank_hangs, str(tmp_path), world_size=2, timeout=3)
    assert info.value.unfinished == [1]
    assert "ranks [1] had not finished after 3 s" in str(info.value)
    assert_gone(pids(tmp_path, 2))


def test_unpicklable_return_value_names_rank():
    with pytest.raises(dpsim.RankError) as info:
        dpsim.launch(ranks.returns_unpicklable, world_size=2)
    assert info.value.rank == 1
    assert "value returned by rank 1 (lock) cannot be pickled" in str(info.value)


def test_process_exit_and_signal_are_reported():
    with pytest.raises(dpsim.RankError, match="rank 1 raised ProcessExit: exited with code 7"):
        dpsim.launch(ranks.exits_hard, world_size=2)
    with pytest.raises(dpsim.RankError, match="rank 0 raised ProcessExit: was killed by signal SIGKILL"):
        dpsim.launch(ranks.killed_by_signal, world_size=2)


@pytest.mark.parametrize("world_size", [0, -1, 1.5, True, "2"])
def test_bad_world_size(world_size):
    with pytest.raises(ValueError, match="world_size must be an integer >= 1"):
        dpsim.launch(ranks.all_reduce_rank_ids, world_size=world_size)


def test_bad_fn_backend_timeout_and_args():
    with pytest.raises(TypeError, match="fn must be callable, got int"):
        dpsim.launch(3)
    with pytest.raises(ValueError, match="unknown backend 'mpi'"):
        dpsim.launch(ranks.all_reduce_rank_ids, backend="mpi")
    with pytest.raises(ValueError, match="timeout must be a positive number"):
        dpsim.launch(ranks.all_reduce_rank_ids, timeout=0)
    import threading

    with pytest.raises(TypeError, match="cannot send fn or its arguments"):
        dpsim.launch(ranks.all_reduce_rank_ids, threading.Lock())


@pytest.mark.skipif(torch.cuda.device_count() >= 2, reason="needs fewer than 2 GPUs")
def test_nccl_with_too_few_gpus_fails_at_once():
    start = time.monotonic()
    with pytest.raises((ValueError, RuntimeError), match="nccl"):
        dpsim.launch(ranks.all_reduce_rank_ids, world_size=2, backend="nccl")
    assert time.monotonic() - start < 5


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
def test_every_listening_socket_is_on_loopback():
    found = dpsim.launch(ranks.listening_sockets, world_size=3)
    assert all(own for own, _ in found), "each rank's gloo device listens for its peers"
    assert found[0][1], "the store (in a process of its own) listens on MASTER_PORT"
    every = [addr for own, store in found for addr in own + store]
    assert all(a in ("127.0.0.1", "::1") for a in every), every


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
def test_socket_listing_sees_a_store_on_all_interfaces():
    """Control for the test above: a store made without a bound socket listens on all interfaces."""
    found = dpsim.launch(ranks.listening_sockets, True, world_size=2)
    assert {"0.0.0.0", "::"} & set(found[0][0]), found[0]


def run_script(python, env, code, **kw):
    return subprocess.run([python, "-c", textwrap.dedent(code)], env=env, capture_output=True, text=True, **kw)


def test_works_after_caller_used_openmp_pool(python, script_env):
    proc = run_script(python, script_env, """
        import torch, dpsim, ranks
        torch.set_num_threads(2)
        a = torch.randn(800, 800)
        for _ in range(5):
            a = torch.tanh(a @ a)  # the caller's OpenMP pool is now running
        out = dpsim.launch(ranks.all_reduce_rank_ids, world_size=2, timeout=30)
        print("RESULT", [t.item() for t in out])
    """, timeout=90, cwd=os.path.dirname(__file__))
    assert proc.returncode == 0, proc.stderr
    assert "RESULT [1.0, 1.0]" in proc.stdout


def test_function_defined_in_main_is_sent_by_value(python, script_env):
    proc = run_script(python, script_env, """
        import torch, torch.distributed as dist, dpsim
        SCALE = 10.0
        def square_sum(rank, world_size):
            t = torch.tensor([SCALE * (rank + 1)]) ** 2
            dist.all_reduce(t)
            return t.item()
        print("RESULT", dpsim.launch(square_sum, world_size=2))
    """, timeout=90)
    assert proc.returncode == 0, proc.stderr
    assert "RESULT [500.0, 500.0]" in proc.stdout


def test_two_callers_at_once_do_not_collide(python, script_env):
    code = """
        import dpsim, ranks
        for _ in range(6):
            assert [t.item() for t in dpsim.launch(ranks.all_reduce_rank_ids, world_size=2)] == [1.0, 1.0]
        print("OK")
    """
    procs = [subprocess.Popen([python, "-c", textwrap.dedent(code)], env=script_env, cwd=os.path.dirname(__file__),
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for _ in range(2)]
    for p in procs:
        out, err = p.communicate(timeout=120)
        assert p.returncode == 0 and "OK" in out, err


def test_sigint_to_caller_stops_all_ranks(python, script_env, tmp_path):
    proc = subprocess.Popen([python, "-c", textwrap.dedent(f"""
        import dpsim, ranks
        dpsim.launch(ranks.all_sleep, {str(tmp_path)!r}, world_size=2, timeout=600)
    """)], env=script_env, cwd=os.path.dirname(__file__), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    rank_pids = pids(tmp_path, 2)
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=20)
    assert "KeyboardInterrupt" in err
    assert_gone(rank_pids)


def test_fork_server_leaves_no_children_behind():
    from dpsim import _forkserver

    dpsim.launch(ranks.all_reduce_rank_ids, world_size=2)
    server = _forkserver.get().proc.pid
    children = [p for p in os.listdir("/proc") if p.isdigit() and alive(int(p)) and _ppid(p) == server]
    assert children == []


def _ppid(pid):
    try:
        return int(open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()[1])
    except (FileNotFoundError, IndexError):
        return -1


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a GPU")
def test_caller_initialised_cuda(python, script_env):
    proc = run_script(python, script_env, """
        import torch, dpsim, ranks
        torch.zeros(1, device="cuda")  # CUDA is initialised in the caller
        out = dpsim.launch(ranks.env_and_device, world_size=1)
        print("RESULT", out[0]["backend"], out[0]["device"])
    """, timeout=120, cwd=os.path.dirname(__file__))
    assert proc.returncode == 0, proc.stderr
    assert "RESULT nccl cuda:0" in proc.stdout


def test_same_error_on_every_rank_reads_the_same_each_run():
    for _ in range(3):
        with pytest.raises(dpsim.RankError) as info:
            dpsim.launch(ranks.all_raise_the_same, world_size=4)
        assert info.value.rank == 0 and info.value.ranks == [0, 1, 2, 3]
        assert str(info.value).startswith("ranks [0, 1, 2, 3] raised ValueError: same bug everywhere\n\n"
                                          "Traceback from rank 0:\n")


def test_exit_zero_without_returning_is_a_failure():
    with pytest.raises(dpsim.RankError, match="rank 1 raised ProcessExit: exited with code 0 before returning"):
        dpsim.launch(ranks.exits_zero_early, world_size=2)


def test_a_rank_that_dies_first_is_named_over_peers_that_fail_after_it():
    with pytest.raises(dpsim.RankError) as info:
        dpsim.launch(ranks.dies_while_peer_waits, world_size=2, timeout=60)
    assert info.value.rank == 1 and "exited with code 7" in str(info.value).splitlines()[0]


def test_namedtuple_results_keep_their_type_and_come_back_detached():
    out = dpsim.launch(ranks.returns_namedtuple, world_size=2)
    assert type(out[1]).__name__ == "Pair" and out[1].b == 1
    assert not out[1].a.requires_grad and out[1].a.item() == 2.0

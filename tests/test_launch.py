"""dpsim.launch on real processes with real gloo collectives."""
import ast
import glob
import os
import signal
import subprocess
import sys
import textwrap
import threading
import time

import pytest
import torch

import dpsim
from conftest import alive, run_script
from dpsim import _forkserver
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
    """A timeout kills every rank: launch returns soon after `timeout`, with no rank left."""
    _forkserver.get()  # started before the clock runs
    start = time.monotonic()
    with pytest.raises(dpsim.LaunchTimeout) as info:
        dpsim.launch(ranks.one_rank_hangs, str(tmp_path), world_size=2, timeout=3)
    took = time.monotonic() - start
    assert_gone(pids(tmp_path, 2), wait=0)
    assert info.value.unfinished == [1]
    assert "ranks [1] had not finished after 3 s" in str(info.value)
    assert took < 3 + 4, f"launch took {took:.1f} s to return after a 3 s timeout: were the ranks killed?"


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


def lan_address():
    """An IPv4 address of this machine outside 127/8, or 0.0.0.0 where it has none."""
    import fcntl
    import socket
    import struct

    for _, name in socket.if_nameindex():
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
            try:
                info = fcntl.ioctl(s.fileno(), 0x8915, struct.pack("256s", name.encode()[:15]))  # SIOCGIFADDR
            except OSError:
                continue
        if info[20] != 127:
            return socket.inet_ntoa(info[20:24])
    return "0.0.0.0"


def test_ranks_pin_gloo_and_nccl_to_the_loopback_interface():
    """What keeps every listener on loopback, checked without privilege (the test below,
    which makes the hostname resolve elsewhere, needs a UTS namespace)."""
    from dpsim._backend import loopback_interface

    lo = loopback_interface()
    assert lo is not None
    assert dpsim.launch(ranks.socket_ifnames, world_size=2) == [(lo, lo), (lo, lo)]


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="Linux namespaces and /proc")
def test_gloo_stays_on_loopback_where_the_hostname_resolves_elsewhere(python, script_env):
    """gloo listens on loopback only, also where the hostname resolves to a LAN address.

    Unless told an interface, gloo listens on whatever the hostname resolves to. Here
    that is often 127.0.0.1 already, which would hide the difference, so the caller
    runs in a UTS namespace of its own whose hostname is this machine's LAN address.
    """
    unshare = ["unshare", "--uts"] + ([] if os.geteuid() == 0 else ["--map-root-user"])
    try:
        usable = subprocess.run(unshare + ["true"], capture_output=True).returncode == 0
    except FileNotFoundError:
        usable = False
    if not usable:
        pytest.skip("cannot create a UTS namespace here (unshare)")
    address = lan_address()
    env = {k: v for k, v in script_env.items() if not k.endswith("_SOCKET_IFNAME")}
    proc = subprocess.run(unshare + [python, "-c", textwrap.dedent(f"""
        import socket
        socket.sethostname({address!r})
        import dpsim, ranks
        print("RESOLVES", socket.gethostbyname(socket.gethostname()))
        print("RESULT", dpsim.launch(ranks.listening_sockets, world_size=2, timeout=30))
    """)], env=env, cwd=os.path.dirname(__file__), capture_output=True, text=True, timeout=90)
    assert proc.returncode == 0, proc.stderr
    assert f"RESOLVES {address}\n" in proc.stdout
    found = ast.literal_eval(proc.stdout.split("RESULT ", 1)[1])
    every = [addr for own, store in found for addr in own + store]
    assert every and all(a in ("127.0.0.1", "::1") for a in every), every


def test_works_after_caller_used_openmp_pool(python, script_env):
    """Fork is safe after the caller used OpenMP: ranks run multi-threaded ops and do not hang.

    A process forked after OpenMP ran hangs in its next parallel region; 1-element
    tensors or 1 thread per rank would never enter one, so the ranks use 2 threads.
    """
    proc = run_script(python, script_env, """
        import torch, dpsim, ranks
        torch.set_num_threads(2)
        a = torch.randn(800, 800)
        for _ in range(5):
            a = torch.tanh(a @ a)  # the caller's OpenMP pool is now running
        print("RESULT", dpsim.launch(ranks.parallel_work, world_size=2, timeout=15))
    """, timeout=90, cwd=os.path.dirname(__file__))
    assert proc.returncode == 0, proc.stderr
    assert "RESULT [(2, (512, 512)), (2, (512, 512))]" in proc.stdout


def test_function_defined_in_main_is_sent_by_value(python, script_env):
    """Also: the fork server preloads what the caller imported of PRELOAD_IF_IMPORTED, and
    only that (the function refers to neither module, so unpickling it imports neither)."""
    proc = run_script(python, script_env, """
        import sys
        import torch, torch.distributed as dist, torch.distributed.optim, dpsim
        SCALE = 10.0
        def square_sum(rank, world_size):
            t = torch.tensor([SCALE * (rank + 1)]) ** 2
            dist.all_reduce(t)
            loaded = [m in sys.modules for m in ("torch.distributed.optim",
                                                 "torch.distributed.checkpoint")]
            return t.item(), loaded
        print("RESULT", dpsim.launch(square_sum, world_size=2))
    """, timeout=90)
    assert proc.returncode == 0, proc.stderr
    assert "RESULT [(500.0, [True, False]), (500.0, [True, False])]" in proc.stdout


def test_two_callers_at_once_do_not_collide(python, script_env, tmp_path):
    """Concurrent launches don't collide: two callers whose stores and ranks run at the same time
    each get their own results."""
    other = subprocess.Popen([python, "-c", textwrap.dedent(f"""
        import dpsim, ranks
        print("RESULT", dpsim.launch(ranks.all_reduce_while_other_launch_runs, {str(tmp_path)!r}, "B", "A",
                                     world_size=3, timeout=90))
    """)], env=script_env, cwd=os.path.dirname(__file__), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        while not glob.glob(os.path.join(tmp_path, "B.*")):  # B's store is listening, its ranks waiting for A's
            assert other.poll() is None, other.communicate()[1]
            time.sleep(0.05)
        mine = dpsim.launch(ranks.all_reduce_while_other_launch_runs, str(tmp_path), "A", "B", world_size=2,
                            timeout=20)
        out, err = other.communicate(timeout=60)
    finally:
        other.kill()
    assert mine == [1.0, 1.0]
    assert other.returncode == 0 and "RESULT [3.0, 3.0, 3.0]" in out, err


@pytest.fixture
def ctrl_c_raises():
    """Python's own Ctrl-C handler, as in a terminal. A shell starts a background job
    (`make test &`) with SIGINT ignored, and Python then installs none: no interrupt comes."""
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    yield
    signal.signal(signal.SIGINT, previous)


def test_ctrl_c_stops_every_rank_while_the_caller_lives_on(tmp_path, ctrl_c_raises):
    """Ctrl-C (a kernel interrupt) stops every rank before launch returns, even though the caller,
    like a Jupyter kernel, keeps running (its exit would take the ranks with it anyway)."""
    errors = []

    def interrupt_once_ranks_run():
        try:  # generous waits: on a loaded machine a new fork server takes a while to start
            pids(tmp_path, 2, wait=120)
        except BaseException as exc:  # reported below, instead of dying silently in the thread
            errors.append(exc)
            raise
        # What Ctrl-C or Jupyter's interrupt button sends, to the main thread: a process-wide
        # signal may land on this thread and leave the main thread's wait uninterrupted
        # (Python runs signal handlers only in the main thread).
        signal.pthread_kill(threading.main_thread().ident, signal.SIGINT)

    threading.Thread(target=interrupt_once_ranks_run, daemon=True).start()
    with pytest.raises(KeyboardInterrupt):
        try:
            dpsim.launch(ranks.all_sleep, str(tmp_path), world_size=2, timeout=150)
        finally:
            assert not errors, errors
    assert_gone(pids(tmp_path, 2), wait=1)
    assert [t.item() for t in dpsim.launch(ranks.all_reduce_rank_ids, world_size=2)] == [1.0, 1.0]


def test_fork_server_leaves_no_children_behind():
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
        print("BOTH", dpsim.launch(ranks.cpu_and_rank_device_all_reduce, world_size=1))
        gpus = torch.cuda.device_count()
        print("MORE", dpsim.launch(ranks.env_and_device, world_size=gpus + 1)[0]["backend"])
    """, timeout=180, cwd=os.path.dirname(__file__))
    assert proc.returncode == 0, proc.stderr
    # one GPU per rank: a group for both devices, each rank bound to its GPU
    assert "RESULT cpu:gloo,cuda:nccl cuda:0" in proc.stdout
    assert "BOTH [(1.0, 1.0, 'cuda:0')]" in proc.stdout  # CPU tensors (gloo) and CUDA tensors (NCCL)
    assert "MORE gloo" in proc.stdout  # more ranks than GPUs: gloo on CPU tensors


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


def test_env_reaches_the_ranks_and_torch_distributed_debug_takes_effect():
    # torch reads TORCH_DISTRIBUTED_DEBUG at import, in the fork server: the ranks must read it again
    plain = dpsim.launch(ranks.debug_level, world_size=2)
    assert plain == [("DebugLevel.OFF", None)] * 2
    env = {"TORCH_DISTRIBUTED_DEBUG": "DETAIL", "DPSIM_TEST_VAR": "x"}
    assert dpsim.launch(ranks.debug_level, world_size=2, env=env) == [("DebugLevel.DETAIL", "x")] * 2
    assert "DPSIM_TEST_VAR" not in os.environ
    with pytest.raises(dpsim.RankError, match="Detected mismatch between collectives on ranks"):
        dpsim.launch(ranks.shapes_differ, world_size=2, env={"TORCH_DISTRIBUTED_DEBUG": "DETAIL"})


@pytest.mark.parametrize("env", [{"A": 1}, ["A"], {1: "a"}])
def test_env_must_map_strings_to_strings(env):
    with pytest.raises(TypeError, match="env must map strings to strings"):
        dpsim.launch(ranks.debug_level, env=env)


def test_a_peer_gone_error_recorded_before_the_death_does_not_take_the_blame():
    # a killed rank's exit is seen when the fork server reaps it, which can be after its
    # peers have already raised "Connection closed by peer"
    failures = {
        0: {"type": "RuntimeError", "message": "[pair.cc:553] Connection closed by peer [127.0.0.1]:1",
            "traceback": "", "time": 1.0},
        1: {"type": "ProcessExit", "message": "was killed by signal SIGKILL", "traceback": "", "time": 2.0},
        2: {"type": "RuntimeError", "message": "Read error [127.0.0.1]:2: Connection reset by peer",
            "traceback": "", "time": 1.5},
    }
    err = dpsim.RankError(failures, stopped=[])
    assert err.rank == 1 and err.summary().splitlines()[0] == "rank 1 raised ProcessExit: was killed by signal SIGKILL"


def test_a_rank_killed_mid_collective_is_named_every_time():
    for _ in range(5):
        with pytest.raises(dpsim.RankError) as info:
            dpsim.launch(ranks.killed_mid_training, world_size=3)
        assert info.value.rank == 1 and info.value.exc_message == "was killed by signal SIGKILL"


def test_rank_output_is_tidied():
    from dpsim._launch import tidy

    raw = ('[rank0]:[E1123 00:39:00.001439110 ProcessGroupGloo.cpp:67] [Rank 0]: Rank 1 failed\n'
           'Current thread 0x00007f528f443b80 (most recent call first):\n'
           f'  File "{torch.__file__[:-len("__init__.py")]}distributed/c10d_logger.py", line 83 in wrapper\n'
           '  File "/tmp/ipykernel_81/3141.py", line 7 in train\n'
           '  File "dpsim/_rank.py", line 157 in run\n'
           '  File "<string>", line 1 in <module>\n'
           '  what():  [enforce fail at /__w/pytorch/pytorch/third_party/gloo/gloo/transport/tcp/pair.cc:553]'
           ' op.preamble\n')
    assert tidy(raw) == ('[rank0]:[E ProcessGroupGloo.cpp] [Rank 0]: Rank 1 failed\n'
                         'Current thread <id> (most recent call first):\n'
                         '  File "torch/distributed/c10d_logger.py", line <n> in wrapper\n'
                         '  File "<notebook cell>", line 7 in train\n'
                         '  what():  [enforce fail at third_party/gloo/gloo/transport/tcp/pair.cc] op.preamble\n')


def test_a_stack_dump_shows_the_readers_frames_only(capsys):
    dpsim.launch(ranks.dumps_own_stack, world_size=2)
    out = capsys.readouterr().out
    assert out.count("Current thread <id> (most recent call first):") == 2
    assert "in dumps_own_stack" in out and "dpsim/" not in out and "<string>" not in out


def test_a_hang_in_a_collective_ends_as_launch_timeout_not_as_gloos_timeout():
    # the group's own timeout is later than the launch's, so the two never race
    assert dpsim.launch(ranks.group_timeout, world_size=2, timeout=7) == [37.0, 37.0]
    with pytest.raises(dpsim.LaunchTimeout) as info:
        dpsim.launch(ranks.rank_0_waits_in_a_collective, world_size=2, timeout=2)
    assert info.value.unfinished == [0, 1]


@pytest.mark.parametrize("forced, expected", [("3", 3), ("", max(1, (os.cpu_count() or 1) // 2)), ("x", None)])
def test_dpsim_rank_threads_sets_each_ranks_torch_threads(monkeypatch, forced, expected):
    """make test's second pass runs the ranks with DPSIM_RANK_THREADS=2: it must take effect."""
    monkeypatch.setenv("DPSIM_RANK_THREADS", forced)
    threads = dpsim.launch(lambda rank, world_size: torch.get_num_threads(), world_size=2)
    cores = max(1, (os.cpu_count() or 1) // 2)
    assert threads == [expected if expected is not None else cores] * 2

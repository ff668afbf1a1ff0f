"""dpsim.shell: commands run for real, at once, stopped whole at the timeout, output masked."""
import os
import socket
import sys
import time

import dpsim
from conftest import alive
from dpsim._shell import masked


def test_commands_run_at_once_and_report_their_exit_codes():
    began = time.monotonic()
    a, b = dpsim.shell("sleep 1; echo a", "sleep 1; echo b >&2; exit 3")
    assert time.monotonic() - began < 1.9  # together, not one after the other
    assert (a.returncode, a.output, b.returncode, b.output) == (0, "a\n", 3, "b\n")


def test_a_timeout_stops_every_process_the_command_started(tmp_path):
    pids = tmp_path / "pids"
    (slow,) = dpsim.shell(f"sleep 60 & echo $! > {pids}; echo $$ >> {pids}; wait", timeout=1)
    assert slow.timed_out and slow.returncode is None and 1 <= slow.seconds < 10
    time.sleep(0.2)
    left = [int(p) for p in pids.read_text().split() if alive(int(p))]
    assert not left, f"still running after the timeout: {left}"


def test_masks_what_changes_between_runs():
    text = (f"W1122 22:31:03.124000 6074 torch/distributed/run.py:874] hello\n"
            f"[E1122 22:46:49.149875045 socket.cpp:1028] to (127.0.0.1, 29533)\n"
            f"MASTER_PORT=40515 port: 52305 export=9 127.0.0.1:29400 localhost:1234\n"
            f"MASTER_ADDR=localhost MASTER_ADDR=10.0.0.7 MASTER_ADDR=node-17.cluster\n"
            f"exitcode  : 1 (pid: 16499) time : 2026-11-22_22:43:07\n"
            f"run 02a82b42-9f38-4afa-8422-1f7f56648c1f in /tmp/torchelastic_x/y host "
            f"{socket.gethostname()} python {sys.prefix}/bin/python")
    assert masked(text).splitlines() == [
        "hello",
        "to (127.0.0.1, <port>)",
        "MASTER_PORT=<port> port: <port> export=9 127.0.0.1:<port> localhost:<port>",
        "MASTER_ADDR=<host> MASTER_ADDR=10.0.0.7 MASTER_ADDR=<host>",
        "exitcode  : 1 (pid: <pid>) time : <time>",
        "run <uuid> in <tmp> host " + ("<host>" if socket.gethostname() != "localhost" else "localhost")
        + " python <python>/bin/python",
    ]


def test_rank_lines_come_in_rank_order_and_stay_whole():
    """Two Pythons print at once; buffered output keeps each line one write."""
    script = "import sys; r = sys.argv[1]\nfor i in range(300): print(f'rank {r}: line {i}', flush=True)"
    (both,) = dpsim.shell(f"python -c \"{script}\" 1 & python -c \"{script}\" 0; wait",
                          env={"PYTHONUNBUFFERED": "1"})
    lines = both.rank_lines()
    assert lines == [f"rank {r}: line {i}" for r in (0, 1) for i in range(300)]


def test_free_port_can_be_bound():
    port = dpsim.free_port()
    with socket.socket() as s:
        s.bind(("127.0.0.1", port))


def test_host_names_are_masked_whole_and_only_as_words(monkeypatch):
    monkeypatch.setattr(socket, "gethostname", lambda: "vm")
    monkeypatch.setattr(socket, "getfqdn", lambda: "vm.example.org")
    assert masked("on vm.example.org and vm, not in vmstat") == "on <host> and <host>, not in vmstat"


def test_shell_hands_back_masked_output(tmp_path):
    """End to end: what a command prints comes back through shell() with ports, pids,
    temporary paths and host names masked, as chapter 9 stores it."""
    folder = tmp_path / "x"
    folder.mkdir()
    (run,) = dpsim.shell(f"echo MASTER_PORT=40515 pid $$ 127.0.0.1:29400 {folder} $(hostname)")
    assert run.returncode == 0
    expected_host = "<host>" if socket.gethostname() != "localhost" else "localhost"
    assert run.output == f"MASTER_PORT=<port> pid <pid> 127.0.0.1:<port> <tmp> {expected_host}\n"

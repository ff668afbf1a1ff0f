"""Rank functions for the launcher tests (importable, so children load them by name)."""
import os
import time

import torch
import torch.distributed as dist


def all_reduce_rank_ids(rank, world_size):
    t = torch.tensor([float(rank)])
    print(f"rank {rank} of {world_size} has {t.item():g}")
    dist.all_reduce(t)
    print(f"rank {rank} now has {t.item():g}")
    return t


def write_pid(path_dir, rank):
    with open(os.path.join(path_dir, f"{rank}.pid.tmp"), "w") as f:
        f.write(str(os.getpid()))
    os.replace(os.path.join(path_dir, f"{rank}.pid.tmp"), os.path.join(path_dir, f"{rank}.pid"))


def one_rank_raises(rank, world_size, pid_dir):
    write_pid(pid_dir, rank)
    if rank == 1:
        raise ValueError("bad shard on this rank")
    dist.all_reduce(torch.ones(1))  # the others wait here for a rank that never comes
    return rank


def one_rank_hangs(rank, world_size, pid_dir):
    write_pid(pid_dir, rank)
    if rank == 1:
        time.sleep(1000)
    return rank


def all_sleep(rank, world_size, pid_dir):
    write_pid(pid_dir, rank)
    time.sleep(1000)


def returns_unpicklable(rank, world_size):
    import threading

    return threading.Lock() if rank == 1 else rank


def exits_hard(rank, world_size):
    if rank == 1:
        os._exit(7)
    return rank


def killed_by_signal(rank, world_size):
    if rank == 0:
        os.kill(os.getpid(), 9)
    return rank


def listening_sockets(rank, world_size, extra_store=False):
    """Local addresses of this process's listening TCP sockets, after real traffic.

    extra_store: also open a TCPStore the usual way (no pre-bound socket), as a
    control that the listing sees a socket on all interfaces.
    """
    if extra_store and rank == 0:
        _keep.append(dist.TCPStore("127.0.0.1", 0, 1, is_master=True))
    dist.all_reduce(torch.ones(8))
    dist.barrier()
    inodes = set()
    for fd in os.listdir("/proc/self/fd"):
        try:
            target = os.readlink(f"/proc/self/fd/{fd}")
        except OSError:
            continue
        if target.startswith("socket:["):
            inodes.add(target[8:-1])
    found, store = [], []
    store_port = f"{int(os.environ['MASTER_PORT']):04X}"
    for table, width in (("/proc/net/tcp", 8), ("/proc/net/tcp6", 32)):
        with open(table) as f:
            next(f)
            for line in f:
                cols = line.split()
                if cols[3] != "0A":  # 0A = LISTEN
                    continue
                addr, port = cols[1].split(":")
                if cols[9] in inodes:
                    found.append(_decode(addr, width))
                if port == store_port:  # the store, in its own process
                    store.append(_decode(addr, width))
    dist.barrier()  # nobody leaves (closing sockets) before all have looked
    return found, store


_keep = []


def _decode(hex_addr, width):
    raw = bytes.fromhex(hex_addr)
    if width == 8:
        return ".".join(str(b) for b in raw[::-1])
    words = [raw[i:i + 4][::-1] for i in range(0, 16, 4)]  # four little-endian 32-bit words
    import ipaddress

    return str(ipaddress.IPv6Address(b"".join(words)))


def env_and_device(rank, world_size):
    import dpsim

    keys = ("RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR")
    return {k: os.environ[k] for k in keys} | {"device": str(dpsim.rank_device()), "backend": dist.get_backend()}


def cpu_and_rank_device_all_reduce(rank, world_size):
    import dpsim

    cpu, dev = torch.ones(1), torch.ones(1, device=dpsim.rank_device())
    dist.all_reduce(cpu)
    dist.all_reduce(dev)
    return cpu.item() / world_size, dev.item() / world_size, str(dev.device)


def all_raise_the_same(rank, world_size):
    raise ValueError("same bug everywhere")


def fails_on_first_attempt(rank, world_size):
    attempt = int(os.environ.get("TORCHELASTIC_RESTART_COUNT", "0"))
    if attempt == 0 and rank == 1:
        raise RuntimeError("first attempt fails")
    t = torch.ones(1)
    dist.all_reduce(t)
    print(f"attempt {attempt}: all_reduce gave {t.item():g}")


def sleeps(rank, world_size):
    time.sleep(1000)


def rank_one_divides_by_zero(rank, world_size):
    if rank == 1:
        return 1 / 0
    return rank


def parallel_work(rank, world_size):
    """Matmuls and elementwise ops on 2 threads: OpenMP parallel regions, which hang
    in a process forked from one whose OpenMP pool had run."""
    torch.set_num_threads(2)
    a = torch.randn(512, 512, generator=torch.Generator().manual_seed(rank))
    for _ in range(3):
        a = torch.tanh(a @ a)
    return torch.get_num_threads(), tuple(a.shape)


def all_reduce_while_other_launch_runs(rank, world_size, shared_dir, me, other):
    """Sum of ranks, computed only while a rank of launch `other` is inside its function too.

    Both launches' stores and ranks are then alive at the same time: a collision
    (the same port, one store for both) cannot go unnoticed by chance.
    """
    open(os.path.join(shared_dir, f"{me}.{rank}"), "w").close()
    deadline = time.monotonic() + 60
    while not any(name.startswith(f"{other}.") for name in os.listdir(shared_dir)):
        if time.monotonic() > deadline:
            raise TimeoutError(f"launch {other!r} never ran at the same time as {me!r}")
        time.sleep(0.02)
    t = torch.tensor([float(rank)])
    dist.all_reduce(t)
    return t.item()


def exits_zero_early(rank, world_size):
    if rank == 1:
        os._exit(0)  # leaves without returning a value
    return rank


def dies_while_peer_waits(rank, world_size):
    if rank == 1:
        time.sleep(0.5)
        os._exit(7)
    dist.all_reduce(torch.ones(1))  # rank 0 fails after rank 1 disappears
    return rank


def returns_namedtuple(rank, world_size):
    import collections

    Pair = collections.namedtuple("Pair", "a b")
    return Pair(torch.ones(1, requires_grad=True) * 2, rank)


def debug_level(rank, world_size):
    return str(dist.get_debug_level()), os.environ.get("DPSIM_TEST_VAR")


def shapes_differ(rank, world_size):
    dist.all_reduce(torch.ones(2 + rank))


def killed_mid_training(rank, world_size):
    import signal

    t = torch.ones(1000)
    for step in range(20):
        if rank == 1 and step == 5:
            os.kill(os.getpid(), signal.SIGKILL)  # what the OOM killer does
        dist.all_reduce(t)


def dumps_own_stack(rank, world_size):
    import faulthandler

    faulthandler.dump_traceback()  # all threads: headed "Current thread 0x..."


def group_timeout(rank, world_size):
    backend = dist.group.WORLD._get_backend(torch.device("cpu"))
    return backend.options._timeout.total_seconds()


def rank_0_waits_in_a_collective(rank, world_size):
    if rank == 0:
        dist.all_reduce(torch.ones(1))  # rank 1 never joins it
    time.sleep(1000)


def socket_ifnames(rank, world_size):
    """The interfaces this rank's gloo and NCCL were told to listen on."""
    return os.environ.get("GLOO_SOCKET_IFNAME"), os.environ.get("NCCL_SOCKET_IFNAME")

"""A clean process that forks the ranks.

Forking the caller is unsafe: after torch has used its OpenMP pool the children
hang, and after CUDA init they fail. Spawning fresh interpreters is safe but pays
torch's import (seconds) per rank. So we start one interpreter per caller that
imports torch but never runs an op, and fork ranks from it: each rank starts with
torch loaded and no threads, CUDA or OpenMP state of anyone's.
"""
from __future__ import annotations

import atexit
import importlib
import os
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from typing import Any, Sequence

from . import _wire

_PKG_PARENT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# Imported by the server too when the caller has already imported them (a chapter's setup
# cell does, before its first launch): ranks that unpickle a function using them then skip
# the import (torch.distributed.optim alone takes ~0.6 s per rank).
PRELOAD_IF_IMPORTED = ("torch.distributed.checkpoint", "torch.distributed.optim")


class ForkServerDied(RuntimeError):
    """The fork server exited; its log is in the message."""


class ForkServer:
    """Client side: one per calling process, started on first use."""

    def __init__(self) -> None:
        self._log = tempfile.TemporaryFile()  # its stderr: never the caller's fds (ipykernel captures those)
        self._log_text = ""  # the log's tail, once died() has read and closed it
        preload = [m for m in PRELOAD_IF_IMPORTED if m in sys.modules]
        code = (f"import sys; sys.path.insert(0, {_PKG_PARENT!r}); "
                f"from dpsim._forkserver import serve; serve({preload!r})")
        self.proc = subprocess.Popen(
            [sys.executable, "-c", code],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self._log,
            close_fds=True,
        )
        self._out = self.proc.stdin.fileno()
        self._in = _wire.Reader(self.proc.stdout.fileno())
        self.lock = threading.Lock()
        self.check(self.recv(timeout=120.0), "ready")

    def alive(self) -> bool:
        return self.proc.poll() is None

    def send(self, msg: tuple) -> None:
        try:
            _wire.send(self._out, msg)
        except OSError as exc:
            raise self.died() from exc

    def recv(self, timeout: float | None) -> tuple | None:
        try:
            return self._in.recv(timeout)
        except EOFError as exc:
            raise self.died() from exc

    def check(self, msg: Any, kind: str) -> tuple:
        if msg is None or msg[0] != kind:
            raise self.died(f"expected {kind!r}, got {msg!r}")
        return msg

    def died(self, why: str = "") -> ForkServerDied:
        self.close()
        if not self._log.closed:  # a second call (from cleanup) reuses the log text read by the first
            self._log.seek(0)
            self._log_text = self._log.read().decode(errors="replace")[-4000:]
            self._log.close()
        return ForkServerDied(f"dpsim's fork server stopped {why}(exit code {self.proc.returncode}). "
                              f"Its log:\n{self._log_text}")

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.stdin.close()  # it sees EOF, kills its ranks and exits
            try:
                self.proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        for f in (self.proc.stdin, self.proc.stdout):
            f.close()


_server: ForkServer | None = None
_server_lock = threading.Lock()


def get() -> ForkServer:
    """The caller's fork server, started (again) if it is not running."""
    global _server
    with _server_lock:
        if _server is None or not _server.alive():
            if _server is not None:
                _server.close()
            _server = ForkServer()
        return _server


@atexit.register
def _close_at_exit() -> None:
    if _server is not None:
        _server.close()


# ---------------------------------------------------------------- server side

def serve(preload: Sequence[str] = ()) -> None:
    """Loop: read launch/kill requests on stdin, fork ranks, report their exits.

    The server ends when its caller does: stdin then reaches EOF. (No PDEATHSIG
    here: on Linux it fires when the *thread* that started the server exits.)
    """
    # Preload what ranks use, once. Importing creates no OpenMP pool; running an op would.
    import cloudpickle  # noqa: F401
    import torch  # noqa: F401
    import torch.distributed  # noqa: F401
    import torch._dynamo  # noqa: F401  # DDP imports it (800+ modules, ~1 s) on first use: once here, not per rank
    import torch.nn.parallel  # noqa: F401
    for name in preload:  # what the caller imported (ForkServer.__init__)
        importlib.import_module(name)

    from . import _rank

    proto_in, proto_out = 0, os.dup(1)
    os.dup2(2, 1)  # stray prints go to the log, not into the protocol
    wake_r, wake_w = os.pipe()
    os.set_blocking(wake_w, False)
    os.set_blocking(wake_r, False)
    signal.set_wakeup_fd(wake_w)
    signal.signal(signal.SIGCHLD, lambda *_: None)
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the caller decides about interrupts

    reader = _wire.Reader(proto_in)
    running: dict[int, tuple[int, int]] = {}  # pid -> (launch id, rank); rank -1 is the launch's store
    _wire.send(proto_out, ("ready",))

    def kill(launch_id: int | None, store_only: bool = False) -> None:
        for pid, (lid, rank) in list(running.items()):
            if (launch_id is None or lid == launch_id) and (rank < 0 or not store_only):
                try:
                    os.killpg(pid, signal.SIGKILL)  # the process and anything it started
                except ProcessLookupError:
                    pass

    def reap() -> None:
        while running:
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                return
            if pid == 0:
                return
            if pid not in running:
                continue
            launch_id, rank = running.pop(pid)
            if rank < 0:
                _wire.send(proto_out, ("store-gone", launch_id))  # the launch's last process is gone
                continue
            _wire.send(proto_out, ("exit", launch_id, rank, os.waitstatus_to_exitcode(status), time.monotonic()))
            if not any(lid == launch_id and r >= 0 for lid, r in running.values()):
                kill(launch_id, store_only=True)  # its last rank is gone: so is the store

    def fork(run, *args) -> int:
        pid = os.fork()
        if pid == 0:
            code = 1
            try:
                signal.set_wakeup_fd(-1)
                import traceback
                for fd in (proto_out, wake_r, wake_w):  # fd 0 is replaced, not closed
                    os.close(fd)
                code = run(*args)
            except BaseException:
                traceback.print_exc()  # to the process's log if it got that far, else the server's
            finally:
                os._exit(code)
        try:
            os.setpgid(pid, pid)  # also done in the child: whichever runs first wins the race
        except OSError:
            pass
        return pid

    def launch(req: dict) -> None:
        listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        listener.bind(("127.0.0.1", 0))  # the store's socket, bound to loopback before torch sees it
        listener.listen(128)
        port = listener.getsockname()[1]
        # The store lives in a process of its own, so no rank's exit can take it from the others.
        running[fork(_rank.host_store, req, listener)] = (req["id"], -1)
        listener.close()
        for rank in range(req["world_size"]):
            running[fork(_rank.run, rank, req, port)] = (req["id"], rank)
        _wire.send(proto_out, ("started", req["id"]))

    import select

    while True:
        try:
            ready = select.select([proto_in, wake_r], [], [])[0]
        except InterruptedError:
            continue
        if wake_r in ready:
            try:
                while os.read(wake_r, 512):
                    pass
            except BlockingIOError:
                pass
        reap()
        if proto_in in ready:
            try:
                reader.fill()
            except EOFError:
                kill(None)
                os._exit(0)
            for msg in reader.drain():
                if msg[0] == "launch":
                    launch(msg[1])
                elif msg[0] == "kill":
                    kill(msg[1])
                reap()

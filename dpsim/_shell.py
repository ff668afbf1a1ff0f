"""Shell commands as a reader types them (torchrun, python script.py), run for real.

Several commands can run at once (two torchrun "nodes"). Each runs in a session
of its own; at the timeout every process it started is stopped. Output is
stdout and stderr together, with what changes from run to run masked (ports,
pids, timestamps, host names, temporary paths), so a notebook can store it.
"""
from __future__ import annotations

import os
import re
import socket
import subprocess
import sys
import time
from dataclasses import dataclass

from ._process import stop_tree

_MASKS = [  # (pattern, replacement), applied in order
    (r"\[?\d{4}-\d\d-\d\d[ T_]\d\d:\d\d:\d\d(?:[,.]\d+)?\]?", "<time>"),  # time stamps
    (r"^\[?[IWEF]\d{4} \d\d:\d\d:\d\d\.\d+ +(?:\d+ )?[^\]]+\] ", ""),  # glog-style prefixes
    (r"\b(127\.0\.0\.1|localhost|0\.0\.0\.0|\[::\]|\[::1\]):\d+", r"\1:<port>"),
    (r"\((127\.0\.0\.1|localhost), \d+\)", r"(\1, <port>)"),
    (r"((?<![A-Za-z])(?i:port)[\"']?\s*[=:]\s*[\"']?)\d+", r"\1<port>"),  # port=, PORT=, port:
    (r"\b(pid|PID)(\s*[:=]?\s*)\d+", r"\1\2<pid>"),
    (r"\b[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}\b", "<uuid>"),
    (r"(/tmp|/var/tmp)/[^\s'\":]*", "<tmp>"),
]


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on right now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def masked(text: str) -> str:
    """`text` with run-to-run details replaced by <port>, <pid>, <host>, <time>, <tmp>..."""
    text = re.sub(r"(MASTER_ADDR=)(?!\d+\.\d+\.\d+\.\d+\b)\S+", r"\1<host>", text)  # a name
    for name in sorted({socket.gethostname(), socket.getfqdn()} - {"", "localhost"}, key=len,
                       reverse=True):  # the full name before its first label
        text = re.sub(rf"(?<![\w.-]){re.escape(name)}(?![\w-])", "<host>", text)
    for prefix in {sys.prefix, sys.base_prefix}:  # where Python and torch are installed
        text = text.replace(prefix, "<python>")
    for pattern, replacement in _MASKS:
        text = re.sub(pattern, replacement, text, flags=re.M)
    return text


@dataclass
class Finished:
    """One command's result. `returncode` is None when it was stopped at the timeout."""

    command: str
    returncode: int | None
    output: str
    seconds: float

    @property
    def timed_out(self) -> bool:
        return self.returncode is None

    def lines(self, pattern: str = "") -> list[str]:
        """The output lines that match `pattern` (a regular expression), in order."""
        return [line for line in self.output.splitlines() if re.search(pattern, line)]

    def rank_lines(self) -> list[str]:
        """Lines that start with "rank N", in rank order: ranks print at the same time."""
        found = [(int(m.group(1)), i, line) for i, line in enumerate(self.output.splitlines())
                 if (m := re.match(r"rank (\d+)\b", line))]
        return [line for _, _, line in sorted(found)]

    def __repr__(self) -> str:
        end = "stopped at the timeout" if self.timed_out else f"exit code {self.returncode}"
        return f"$ {self.command}\n({end})\n{self.output}"


def shell(*commands: str, timeout: float = 60.0, cwd: str | None = None,
          env: dict[str, str] | None = None, stagger: float = 0.0) -> list[Finished]:
    """Run `commands` at the same time with bash, `stagger` seconds apart; wait for all.

    A command still running after `timeout` seconds is stopped, with every
    process it started, and reported with returncode None. `env` adds to the
    environment; the current Python's bin directory comes first on PATH, so
    `torchrun` and `python` are the ones of this kernel.
    """
    full = dict(os.environ, **(env or {}))
    full["PATH"] = os.pathsep.join([os.path.dirname(sys.executable), full.get("PATH", "")])
    # Unbuffered, print() writes a line's text and its newline separately, and the lines
    # of ranks printing at once run together; buffered, print(..., flush=True) is one write.
    full.pop("PYTHONUNBUFFERED", None)
    started, procs = time.monotonic(), []
    for i, command in enumerate(commands):
        if i and stagger:
            time.sleep(stagger)
        procs.append((command, time.monotonic(), subprocess.Popen(
            ["bash", "-c", command], cwd=cwd, env=full, stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT, text=True, start_new_session=True)))
    results = []
    try:
        for command, began, proc in procs:
            left = max(0.1, timeout - (time.monotonic() - started))
            try:
                out, _ = proc.communicate(timeout=left)
                code = proc.returncode
            except subprocess.TimeoutExpired:
                out, code = stop_tree(proc)[0], None
            results.append(Finished(command, code, masked(out or ""), time.monotonic() - began))
    finally:
        for _, _, proc in procs:
            if proc.poll() is None:
                stop_tree(proc)
    return results

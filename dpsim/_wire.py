"""Length-prefixed pickles over a pipe: how the launcher and its fork server talk."""
from __future__ import annotations

import collections
import os
import pickle
import select
import struct
import time
from typing import Any

_HEADER = struct.Struct("!Q")


def send(fd: int, obj: Any) -> None:
    """Write one message; blocks until the whole message is in the pipe."""
    data = pickle.dumps(obj, protocol=pickle.HIGHEST_PROTOCOL)
    view = memoryview(_HEADER.pack(len(data)) + data)
    while view:
        view = view[os.write(fd, view):]


class Reader:
    """Reads whole messages from a pipe, buffering partial ones."""

    def __init__(self, fd: int) -> None:
        self.fd = fd
        self._buf = bytearray()
        self._ready: collections.deque[Any] = collections.deque()

    def fill(self) -> None:
        """One read of what the pipe holds now; raises EOFError once it is closed."""
        chunk = os.read(self.fd, 1 << 16)
        if not chunk:
            raise EOFError("pipe closed")
        self._buf += chunk
        while len(self._buf) >= _HEADER.size:
            (n,) = _HEADER.unpack_from(self._buf)
            end = _HEADER.size + n
            if len(self._buf) < end:
                break
            self._ready.append(pickle.loads(self._buf[_HEADER.size:end]))
            del self._buf[:end]

    def drain(self) -> list[Any]:
        """The messages decoded so far."""
        out = list(self._ready)
        self._ready.clear()
        return out

    def recv(self, timeout: float | None = None) -> Any | None:
        """The next message, or None if `timeout` seconds pass first."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while not self._ready:
            left = None if deadline is None else max(0.0, deadline - time.monotonic())
            if not select.select([self.fd], [], [], left)[0]:
                return None
            self.fill()
        return self._ready.popleft()

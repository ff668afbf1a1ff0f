"""Process plumbing shared by the fork server and the ranks it forks."""
from __future__ import annotations

import signal
import sys


def die_with_parent() -> None:
    """Linux: get SIGKILL when the parent dies, so nothing outlives its caller."""
    if sys.platform.startswith("linux"):
        import ctypes

        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG

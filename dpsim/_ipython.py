"""In IPython, show dpsim's errors from the notebook cell down, without dpsim's own frames.

The message of a RankError already holds the failing rank's traceback; the
launcher's frames add only a path on the reader's machine.
"""
from __future__ import annotations

import os
from types import TracebackType

_PKG = os.path.dirname(os.path.abspath(__file__)) + os.sep


def _cut(tb: TracebackType | None) -> TracebackType | None:
    """The traceback up to the first frame inside dpsim."""
    head, prev = tb, None
    while tb is not None:
        if tb.tb_frame.f_code.co_filename.startswith(_PKG):
            if prev is None:
                return head
            prev.tb_next = None
            break
        prev, tb = tb, tb.tb_next
    return head


def install(*errors: type[BaseException]) -> None:
    """Register the display for `errors` with the running IPython shell, if any."""
    try:
        shell = get_ipython()  # type: ignore[name-defined]  # noqa: F821
    except NameError:
        return
    if shell is None or shell.custom_exceptions:
        return  # no shell, or someone else's handler: leave it alone

    def show(self, etype, value, tb, tb_offset=None):
        self.showtraceback((etype, value, _cut(tb)), tb_offset=tb_offset)

    shell.set_custom_exc(errors, show)

"""dpsim: run real multi-process torch.distributed demos from a notebook.

Public names:
    launch        run fn(rank, world_size, *args) on N local ranks
    RankError     a rank failed (names the rank, carries its traceback)
    LaunchTimeout ranks did not finish in time (all were stopped)
    rank_device   the device a rank should put its tensors on
    torchrun      run a rank function under torchrun, output in rank order
    shell         run shell commands (torchrun script.py) at once; output with ports, pids... masked
    free_port     a free TCP port on 127.0.0.1
    plot_ranks    bar chart of per-rank tensors, before and after
    figure_style  draw this kernel's matplotlib figures in the book's style, as SVG
    plot_timelines  per-rank timelines from profiler spans (compute and communication lanes)
    merge_traces  the ranks' Chrome traces as one file, for Perfetto
    check         say whether an exercise answer matches a real run
    glue          name a run's number for the prose (MyST-NB glue; a no-op without MyST-NB)
    explorer      a widget that flips between views computed from real runs
    bars_svg      a small SVG bar chart of per-rank values, for explorer views
    lines_svg     a small SVG line chart (e.g. a buffer per rank over steps)
    animate_ring  step-by-step HTML animation of a ring all-reduce, from its log
    ThreadDataParallel  nn.DataParallel's algorithm with threads, so it runs on a CPU
    decomposes    does a loss satisfy f([x, y]) == (f(x) + f(y)) / 2 (values and gradients)?
"""
import importlib

from ._dataparallel import ThreadDataParallel
from ._decompose import Decomposition, decomposes
from ._device import rank_device
from ._exercise import check
from ._glue import glue
from ._launch import LaunchTimeout, RankError, launch
from ._ring_animation import animate_ring
from ._svg import bars_svg, lines_svg
from ._shell import free_port, shell
from ._torchrun import torchrun
from . import _ipython

_ipython.install(RankError, LaunchTimeout)

# Imported on first use: they import matplotlib or ipywidgets (about 1 s), which the ranks
# that torchrun starts with `python -m dpsim`, and the fork server, never need.
_LAZY = {"explorer": "_explorer", "figure_style": "_plot", "plot_ranks": "_plot",
         "merge_traces": "_timeline", "plot_timelines": "_timeline"}


def __getattr__(name: str):
    if name not in _LAZY:
        raise AttributeError(f"module 'dpsim' has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{_LAZY[name]}"), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_LAZY))

__all__ = [
    "launch", "RankError", "LaunchTimeout", "rank_device", "torchrun", "shell", "free_port",
    "ThreadDataParallel", "decomposes", "Decomposition",
    "explorer", "bars_svg", "lines_svg", "animate_ring", "plot_ranks", "figure_style",
    "plot_timelines", "merge_traces", "check", "glue",
]
__version__ = "0.1.0"

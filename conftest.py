"""Setup for every pytest run in this repository, the notebooks included."""
import os
import tempfile

import nbval.kernel
import nbval.plugin

_nbval_start = nbval.kernel.start_new_kernel
STARTS = 3


def start_new_kernel(startup_timeout=60, kernel_name="python", **kwargs):
    """nbval's kernel start, tried again if the kernel dies at once, with its stderr kept.

    jupyter_client picks five free TCP ports and writes them for the kernel, which binds
    them a moment later; ipykernel exits if one was taken in between. With two pytest
    workers, the ranks of the notebook running beside it open gloo sockets on such ports
    all the time. A new kernel gets new ports. nbval sends the kernel's stderr to
    /dev/null; here it goes to a file, whose end the error shows.
    """
    env = kernel_env(kwargs.get("cwd"))
    if env is not None:
        kwargs["env"] = env
    for attempt in range(1, STARTS + 1):
        log = tempfile.TemporaryFile("w+")  # the kernel writes to it for as long as it runs
        try:
            return _nbval_start(startup_timeout, kernel_name, **dict(kwargs, stderr=log))
        except RuntimeError as error:
            log.seek(0)
            said = log.read()[-3000:]
            if "Kernel died" not in str(error) or attempt == STARTS:
                raise RuntimeError(f"{error} (start {attempt} of {STARTS}); "
                                   f"the kernel's stderr:\n{said}") from error
            print(f"kernel died at start {attempt} of {STARTS}; trying again. Its stderr:\n{said}")
        finally:
            log.close()  # the kernel holds its own descriptor


def on_float_path(folder: str) -> bool:
    """True for the folder of the second float path's notebooks (the Makefile's _build/float-path)."""
    return os.path.basename(os.path.normpath(folder)) == "float-path"


def kernel_env(cwd: str | None) -> dict | None:
    """The environment of a kernel for a notebook in a folder named float-path: this one's,
    plus the settings in DPSIM_FLOAT_PATH ("NAME=VALUE NAME=VALUE"; see the Makefile). The
    ranks that the notebook starts inherit it. None (this environment) elsewhere."""
    settings = os.environ.get("DPSIM_FLOAT_PATH", "").split()
    if not cwd or not on_float_path(cwd):
        return None
    if not settings:
        raise RuntimeError(f"{cwd} holds the second float path's notebooks, but DPSIM_FLOAT_PATH "
                           "is not set (run them with `make test`)")
    return dict(os.environ, **dict(setting.split("=", 1) for setting in settings))


nbval.kernel.start_new_kernel = start_new_kernel

_nbval_file_init = nbval.plugin.IPyNbFile.__init__


def _ipynb_file_init(self, *args, **kwargs):
    """nbval skips PNG images; skip SVG figures too. Their coordinates carry the last bits of
    the plotted floats; each figure's text form (text/plain) is compared instead."""
    _nbval_file_init(self, *args, **kwargs)
    self.skip_compare = self.skip_compare + ("image/svg+xml",)


nbval.plugin.IPyNbFile.__init__ = _ipynb_file_init

_nbval_collect = nbval.plugin.IPyNbFile.collect


SKIPPED_ON_FLOAT_PATH = ("timing-only", "no-floats")


def _collect(self):
    """On the second float path, skip the cells tagged `timing-only` (benchmarks whose output
    nbval never compares; they are also tagged nbval-ignore-output) or `no-floats` (outputs
    with no float arithmetic in them: messages, dtypes, counts, verdicts of exact
    comparisons; like the Makefile's NO_FLOATS chapters, one cell at a time).
    tests/test_notebooks.py checks both kinds. A later cell that used a name defined only in
    a skipped cell would fail there, so the float path itself shows that nothing it compares
    depends on them. The first path runs every cell."""
    float_path = on_float_path(os.path.dirname(str(self.path)))
    for item in _nbval_collect(self):
        tags = item.cell.get("metadata", {}).get("tags", [])
        if float_path and any(tag in tags for tag in SKIPPED_ON_FLOAT_PATH):
            item.options["skip"] = True
        yield item


nbval.plugin.IPyNbFile.collect = _collect


def pytest_terminal_summary(terminalreporter):
    """How long each test file took: setup, call and teardown of its tests, summed."""
    seconds: dict[str, float] = {}
    for reports in terminalreporter.stats.values():
        for report in reports:
            nodeid, duration = getattr(report, "nodeid", ""), getattr(report, "duration", None)
            if nodeid and duration is not None:
                file = nodeid.split("::")[0]
                seconds[file] = seconds.get(file, 0.0) + duration
    if seconds:
        terminalreporter.write_sep("-", "seconds per test file (its tests' phases, summed)")
        for file, total in sorted(seconds.items(), key=lambda item: -item[1]):
            terminalreporter.write_line(f"{total:8.1f}  {file}")


# The longest test files first: seconds per file from this summary, in a clean-clone
# `make test` (2026-11-25); the files not listed (under 30 s) follow in collection order.
# Workers take whole files (--dist loadfile) in this order (--no-loadscope-reorder: else
# pytest-xdist puts the files with the most tests first, and the book's browser tests, 200 s
# in a few tests, came last, with one worker busy and the others idle for up to a minute).
LONGEST_FIRST = (
    "tests/test_browser.py",  # 207 s
    "_build/solved/09_from_notebook_to_cluster.ipynb",  # 173 s
    "tests/test_torchrun.py",  # 133 s
    "tests/test_train_ddp.py",  # 100 s
    "_build/solved/08_checkpoints_and_restarts.ipynb",  # 98 s
    "tests/test_launch.py",  # 90 s
    "_build/solved/11_mixed_precision_and_compression.ipynb",  # 82 s
    "_build/float-path/11_mixed_precision_and_compression.ipynb",  # 74 s
    "_build/solved/10_hangs_crashes_and_drift.ipynb",  # 70 s
    "_build/float-path/12_sharding_with_zero_and_fsdp.ipynb",  # 67 s
    "tests/test_chapter_code.py",  # 66 s
    "_build/solved/12_sharding_with_zero_and_fsdp.ipynb",  # 62 s
    "_build/solved/03_dataparallel_vs_ddp.ipynb",  # 60 s
    "_build/float-path/03_dataparallel_vs_ddp.ipynb",  # 53 s
    "_build/solved/13_why_is_my_job_slow.ipynb",  # 50 s
    "_build/float-path/05_batchnorm_and_syncbatchnorm.ipynb",  # 46 s
    "_build/solved/06_when_sync_happens.ipynb",  # 46 s
    "_build/solved/04_averaging_vs_summing.ipynb",  # 40 s
    "_build/float-path/04_averaging_vs_summing.ipynb",  # 39 s
    "_build/solved/05_batchnorm_and_syncbatchnorm.ipynb",  # 38 s
    "_build/solved/01_ranks_and_world.ipynb",  # 37 s
    "_build/float-path/02_reduce_and_all_reduce.ipynb",  # 35 s
    "_build/solved/07_data_across_ranks.ipynb",  # 34 s
    "_build/solved/02_reduce_and_all_reduce.ipynb",  # 33 s
    "tests/test_backend.py",  # 31 s
)


def pytest_collection_modifyitems(session, config, items):
    """Run the files of LONGEST_FIRST first, in that order; the rest keep theirs."""
    rank = {name: i for i, name in enumerate(LONGEST_FIRST)}

    def where(item) -> int:
        path = os.path.relpath(str(item.path), str(config.rootpath)).replace(os.sep, "/")
        return rank.get(path, len(rank))

    items.sort(key=where)  # stable: a notebook's cells stay in order

import os
import re
import subprocess
import sys
import textwrap

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# A value computed in floating point shows its last digits: a decimal with 2 or more places.
# Output that holds no float arithmetic (NO_FLOATS chapters, `no-floats` cells) shows none.
LONG_DECIMAL = re.compile(r"(?<![\d.])\d+\.\d{2,}(?![\d.])")


def alive(pid: int) -> bool:
    """True if pid exists and is not a zombie."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False


@pytest.fixture
def script_env():
    """Environment for `python -c` children: dpsim importable, unbuffered output."""
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    env["PYTHONPATH"] = os.pathsep.join([ROOT, env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    return env


@pytest.fixture
def python():
    return sys.executable


def run_script(python: str, env: dict, code: str, **kw) -> subprocess.CompletedProcess:
    """`python -c code` (dedented), its output captured as text."""
    return subprocess.run([python, "-c", textwrap.dedent(code)], env=env, capture_output=True, text=True, **kw)


def chapter_code(notebook: str, *names: str) -> dict:
    """Run a chapter's first two code cells (install check, imports) and the cells that define `names`.

    Tests then exercise the very code a reader studies in the chapter.
    """
    import json

    cells = [c for c in json.load(open(os.path.join(ROOT, "chapters", notebook)))["cells"]
             if c["cell_type"] == "code"]
    sources = ["".join(c["source"]) for c in cells]
    wanted = sources[:2]  # the install-if-missing cell and the imports
    for name in names:
        found = [s for s in sources if f"def {name}(" in s or f"class {name}(" in s or f"\n{name} = " in f"\n{s}"]
        assert found, f"{notebook} defines no {name}"
        wanted += [s for s in found if s not in wanted]
    namespace = {"__name__": "chapter_" + notebook.split("_")[0]}  # not importable: sent to ranks by value
    for src in wanted:
        exec(compile(src, notebook, "exec"), namespace)
    return namespace


def _build_book(out: str) -> str:
    """jupyter-book build into out; returns "" on success, else the end of its output."""
    jb = os.path.join(os.path.dirname(sys.executable), "jupyter-book")
    proc = subprocess.run([jb, "build", "--warningiserror", "--keep-going", "--path-output", out, ROOT],
                          capture_output=True, text=True, timeout=600)
    if proc.returncode != 0:
        return proc.stdout[-5000:] + proc.stderr[-5000:]
    if not os.path.exists(os.path.join(out, "_build", "html", "index.html")):
        return "no index.html\n" + proc.stdout[-2000:]
    return ""


@pytest.fixture(scope="session")
def built_book(tmp_path_factory):
    """Build once per session, as `make book` does, but from scratch into a fresh directory.

    An existing _build/ would let Sphinx re-read only changed pages, so -W would
    miss warnings in the others. Under pytest-xdist the workers share one build: the
    first to get here builds into the session's shared temporary directory, the others
    wait for it and use it. Returns the html directory (screenshots go beside it).
    """
    if not os.environ.get("PYTEST_XDIST_WORKER"):
        out = str(tmp_path_factory.mktemp("book"))
        failure = _build_book(out)
    else:
        from filelock import FileLock

        shared = tmp_path_factory.getbasetemp().parent  # this session's, shared by its workers
        out, result = str(shared / "book"), shared / "book.result"
        with FileLock(str(shared / "book.lock")):
            if not result.exists():
                result.write_text(_build_book(out))
            failure = result.read_text()
    assert not failure, failure
    return os.path.join(out, "_build", "html")


def pytest_terminal_summary(terminalreporter):
    """Print the figures that tests record with record_property("report", lines): measured
    values worth seeing (page weights, load times) that are not pass/fail."""
    for report in terminalreporter.stats.get("passed", []) + terminalreporter.stats.get("failed", []):
        for name, lines in getattr(report, "user_properties", []):
            if name == "report":
                terminalreporter.write_sep("-", f"measured by {report.nodeid.split('::')[-1]}")
                for line in lines:
                    terminalreporter.write_line(line)

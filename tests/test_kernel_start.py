"""The repository's conftest.py starts nbval's kernel again when it dies at once."""
import nbval.kernel
import pytest

DIED = "Kernel died before replying to kernel_info"


def fake_starts(monkeypatch, failures, message=DIED):
    """Replace nbval's own start: it fails `failures` times, as a kernel whose port was taken."""
    start, calls = nbval.kernel.start_new_kernel, []

    def fake(startup_timeout, kernel_name, **kwargs):
        calls.append(kernel_name)
        kwargs["stderr"].write("zmq.error.ZMQError: Address already in use\n")
        kwargs["stderr"].flush()
        if len(calls) <= failures:
            raise RuntimeError(message)
        return "manager", "client"

    monkeypatch.setitem(start.__globals__, "_nbval_start", fake)
    return start, calls


def test_the_repository_conftest_wraps_nbval():
    assert nbval.kernel.start_new_kernel.__module__ != "nbval.kernel"


def test_a_kernel_that_dies_at_start_is_started_again(monkeypatch, capsys):
    start, calls = fake_starts(monkeypatch, failures=2)
    assert start(kernel_name="k", stderr=None) == ("manager", "client")
    assert calls == ["k"] * 3
    assert capsys.readouterr().out.count("Address already in use") == 2


def test_a_kernel_that_keeps_dying_shows_its_stderr(monkeypatch):
    start, calls = fake_starts(monkeypatch, failures=3)
    with pytest.raises(RuntimeError, match="(?s)start 3 of 3.*Address already in use") as info:
        start(kernel_name="k")
    assert len(calls) == 3 and DIED in str(info.value)


def test_other_start_errors_are_not_retried(monkeypatch):
    start, calls = fake_starts(monkeypatch, failures=1, message="Kernel didn't respond in 60 seconds")
    with pytest.raises(RuntimeError, match="start 1 of 3"):
        start(kernel_name="k")
    assert len(calls) == 1


def test_a_float_path_kernel_gets_the_settings_and_its_ranks_inherit_them(monkeypatch, tmp_path):
    """The Makefile's second pass: notebooks in a folder named float-path run under
    DPSIM_FLOAT_PATH's settings; a real kernel and a real rank see them."""
    monkeypatch.setenv("DPSIM_FLOAT_PATH", "ATEN_CPU_CAPABILITY=default DPSIM_RANK_THREADS=2")
    folder = tmp_path / "float-path"
    folder.mkdir()
    km, kc = nbval.kernel.start_new_kernel(kernel_name="python3", cwd=str(folder))
    try:
        said = []
        kc.execute_interactive(
            "import os, subprocess, sys\n"
            "print(os.environ.get('ATEN_CPU_CAPABILITY'), subprocess.run([sys.executable, '-c',"
            " 'import os; print(os.environ.get(\"DPSIM_RANK_THREADS\"))'],"
            " capture_output=True, text=True).stdout.strip())",
            output_hook=lambda msg: said.append(msg["content"].get("text", "")), timeout=60)
    finally:
        kc.stop_channels()
        km.shutdown_kernel(now=True)
    assert "".join(said).strip() == "default 2"


def test_only_float_path_folders_change_the_kernels_environment(monkeypatch):
    kernel_env = nbval.kernel.start_new_kernel.__globals__["kernel_env"]  # the root conftest's

    monkeypatch.setenv("DPSIM_FLOAT_PATH", "OMP_NUM_THREADS=1")
    assert kernel_env("/x/_build/solved") is None and kernel_env(None) is None
    assert kernel_env("/x/_build/float-path")["OMP_NUM_THREADS"] == "1"
    monkeypatch.delenv("DPSIM_FLOAT_PATH")
    with pytest.raises(RuntimeError, match="DPSIM_FLOAT_PATH is not set"):
        kernel_env("/x/_build/float-path/")

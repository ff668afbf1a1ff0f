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

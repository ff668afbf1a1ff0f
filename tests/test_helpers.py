"""dpsim's small helpers: exercise checks, figures, traceback paths."""
import re

import matplotlib
import pytest
import torch

import dpsim
from conftest import run_script
from dpsim._rank import short_path, to_cpu


@pytest.mark.parametrize("answer, actual, verdict", [
    (None, 3.0, "No answer yet"),
    (6, torch.tensor([6.0]), "Right"),
    ([6.0, 6.0], torch.tensor([6.0, 6.0]), "Right"),
    ([6.0, 6.0], torch.tensor([6.0, 5.0]), "Not yet"),
    ([6.0], torch.tensor([6.0, 6.0]), "Not yet"),  # shape matters
    (0.1 + 0.2, 0.3, "Right"),
    ("gloo", "gloo", "Right"),
    ("nccl", "gloo", "Not yet"),
])
def test_check(capsys, answer, actual, verdict):
    dpsim.check(answer, actual)
    out = capsys.readouterr().out
    assert out.startswith(verdict)
    if verdict == "Not yet":  # the check never prints the answer, in any spelling
        forms = {str(actual), repr(actual)}
        if isinstance(actual, torch.Tensor):
            forms |= {str(actual.tolist())}
            given = set(torch.as_tensor(answer, dtype=torch.float64).flatten().tolist())
            forms |= {f"{v:g}" for v in actual.flatten().tolist() if v not in given}
        assert not [form for form in forms if form in out], out


def test_plot_ranks_draws_the_data():
    shown = dpsim.plot_ranks({"before": [torch.tensor([0.0]), torch.tensor([1.0])],
                              "after": [torch.tensor([1.0, 2.0]), torch.tensor([1.0, 2.0])]}, title="t")
    fig = shown.figure
    assert isinstance(fig, matplotlib.figure.Figure)
    svg = shown._repr_svg_()
    assert svg.startswith("<?xml") and "<svg" in svg and "<dc:date>" not in svg
    assert "<text" in svg and ">rank</text>" in svg  # text stays text (sharp, sized by the browser)
    assert svg == dpsim.plot_ranks({"before": [torch.tensor([0.0]), torch.tensor([1.0])],
                                    "after": [torch.tensor([1.0, 2.0]), torch.tensor([1.0, 2.0])]},
                                   title="t")._repr_svg_()  # the same bytes every run
    assert repr(shown) == "t\nbefore: rank 0 [0.0]; rank 1 [1.0]\nafter: rank 0 [1.0, 2.0]; rank 1 [1.0, 2.0]"
    before, after = fig.axes
    assert [b.get_height() for b in before.patches] == [0.0, 1.0]
    assert [b.get_height() for b in after.patches] == [1.0, 2.0, 1.0, 2.0]
    assert [t.get_text() for t in after.get_xticklabels()] == ["0", "1"]
    assert after.get_xlabel() == "rank"


def test_short_path_hides_machine_paths():
    text = ('File "/tmp/ipykernel_123/456789.py", line 3\n'
            'File "/home/me/.venv/lib/python3.11/site-packages/torch/distributed/c10d.py", line 9')
    assert short_path(text) == 'File "<notebook cell>", line 3\nFile "torch/distributed/c10d.py", line 9'


def test_to_cpu_walks_containers():
    out = to_cpu({"a": [torch.ones(1, requires_grad=True) * 2, (torch.zeros(2),)], "b": 3})
    assert out["b"] == 3 and not out["a"][0].requires_grad and out["a"][1][0].device.type == "cpu"


def test_ipython_shows_rank_errors_from_the_cell_down():
    """In a notebook, a RankError's traceback holds the cell and the rank's code, not dpsim's frames."""
    import nbformat
    from nbclient import NotebookClient

    src = ("import dpsim, torch.distributed as dist\n"
           "def f(rank, world_size):\n"
           "    raise KeyError(rank)\n"
           "dpsim.launch(f, world_size=2)")
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(src)])
    NotebookClient(nb, kernel_name="python3", allow_errors=True, timeout=120).execute()
    (err,) = [o for o in nb.cells[0].outputs if o.output_type == "error"]
    shown = "\n".join(err.traceback)
    assert err.ename == "RankError"
    assert re.match(r"rank ([01]) raised KeyError: \1\n", err.evalue)
    assert 'File "<notebook cell>", line 3, in f' in err.evalue
    assert "dpsim" + "/_" not in shown  # no launcher frames, so no paths of this machine


def test_decomposes_separates_mean_sum_and_iou():
    from torch import nn

    torch.manual_seed(0)
    out, target = torch.randn(12, 1), torch.randn(12, 1)
    assert dpsim.decomposes(nn.MSELoss(), out, target, parts=3).ok
    assert dpsim.decomposes(nn.CrossEntropyLoss(), torch.randn(12, 4), torch.randint(0, 4, (12,)), parts=4).ok
    summed = dpsim.decomposes(nn.MSELoss(reduction="sum"), out, target, parts=3)
    assert not summed.ok and abs(summed.whole - 3 * summed.averaged) < 1e-4

    def iou(o, t):
        p, t = torch.sigmoid(o), (t > 0).float()
        return 1 - (p * t).sum() / (p + t - p * t).sum()

    verdict = dpsim.decomposes(iou, out, target, parts=2)
    assert not verdict.ok and verdict.max_grad_gap > 1e-4
    assert str(verdict).startswith("does NOT decompose")
    with pytest.raises(ValueError, match="cannot be cut into 5 equal shards"):
        dpsim.decomposes(nn.MSELoss(), out, target, parts=5)


def test_decomposes_looks_at_the_gradient_too():
    """A loss whose value always agrees (0) while its gradient is p times too small per shard."""
    out, target = torch.randn(12, 1), torch.randn(12, 1)
    verdict = dpsim.decomposes(lambda o, t: (o - o.detach()).sum(), out, target, parts=4)
    assert verdict.whole == verdict.averaged == 0.0
    assert verdict.max_grad_gap == pytest.approx(0.75) and not verdict.ok


def test_lines_svg_draws_one_line_per_series():
    import xml.etree.ElementTree as ET

    svg = dpsim.lines_svg({"rank 0": [0.0, 1.0, 0.5], "rank 1": [2.0, 2.0, 2.0]}, title="running mean")
    root = ET.fromstring(svg)
    lines = list(root.iter("{http://www.w3.org/2000/svg}polyline"))
    assert len(lines) == 2 and all(len(l.get("points").split()) == 3 for l in lines)
    assert root.find("figcaption").text == "running mean"
    assert [s.text for s in root.iter("span") if s.text] == ["rank 0", "rank 1"]  # the key, below the plot


def test_import_leaves_plotting_and_widgets_for_first_use(python, script_env):
    """`python -m dpsim` (each rank of dpsim.torchrun) and the fork server import dpsim:
    matplotlib and ipywidgets wait until a chart or widget is asked for."""
    code = ("import sys, dpsim\n"
            "print(sorted(m for m in ('matplotlib', 'ipywidgets') if m in sys.modules))\n"
            "print(dpsim.plot_ranks.__module__, dpsim.explorer.__module__, 'explorer' in dir(dpsim))\n"
            "print('matplotlib' in sys.modules, 'ipywidgets' in sys.modules)\n"
            "dpsim.no_such_name\n")
    proc = run_script(python, script_env, code, timeout=120)
    assert proc.stdout.splitlines() == ["[]", "dpsim._plot dpsim._explorer True", "True True"], proc.stderr
    assert proc.stderr.rstrip().endswith("AttributeError: module 'dpsim' has no attribute 'no_such_name'")

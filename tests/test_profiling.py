"""Chapter 13's profiling: per-rank timelines, merged traces, and the chapter's own finders."""
import json
import re

import matplotlib
import pytest

import dpsim
from conftest import chapter_code
from dpsim._launch import tidy
from dpsim._timeline import PHASE_COLOURS

matplotlib.use("Agg")


@pytest.fixture(scope="module")
def ch13():
    return chapter_code("13_why_is_my_job_slow.ipynb", "profile_steps", "union_ms", "who_is_slow")


def test_plot_timelines_puts_each_span_in_its_lane_and_colour():
    ranks = [[("forward", 0.0, 2.0), ("all-reduce", 1.0, 5.0)], [("data", 0.0, 4.0)]]
    fig = dpsim.plot_timelines(ranks, labels=["a", "b"])
    ax = fig.axes[0]
    bars = [(c.get_paths()[0].get_extents(), c.get_facecolor()[0]) for c in ax.collections]
    assert len(bars) == 3
    lanes = {}
    for (box, colour), (phase, start, end) in zip(bars, [s for spans in ranks for s in spans]):
        assert (box.x0, box.x1) == pytest.approx((start, end))
        assert matplotlib.colors.to_hex(colour) == PHASE_COLOURS[phase]
        lanes[phase] = box.y0
    # top to bottom: a comm, a compute, b comm, b compute
    assert lanes["all-reduce"] > lanes["forward"] > lanes["data"]
    assert [t.get_text() for t in ax.get_yticklabels()] == ["a comm", "a compute", "b comm", "b compute"]
    with pytest.raises(ValueError, match="2 timelines but 1 labels"):
        dpsim.plot_timelines(ranks, labels=["a"])


def test_union_counts_overlapping_spans_once(ch13):
    rows = [("x", 0.0, 2.0), ("x", 1.0, 3.0), ("x", 5.0, 6.0), ("y", 0.0, 100.0)]
    assert ch13["union_ms"](rows, "x") == pytest.approx(4.0)
    assert ch13["union_ms"](rows, "z") == 0.0


def test_profiles_merge_into_one_trace_whose_ranks_share_a_clock(ch13, tmp_path, monkeypatch):
    """The merged file is what Perfetto's JSON importer reads, and the ranks' copies of one
    all-reduce overlap in time: it cannot end on one rank before the other has joined it."""
    monkeypatch.chdir(tmp_path)
    # rank 1 loads each sample in 8 ms: 0.5 s late over the two profiled steps, far more
    # than a loaded machine's scheduling delays (2 ms a sample once lost to them)
    runs = dpsim.launch(ch13["profile_steps"], 32, [0.0, 8.0], 0, "slow", world_size=2)
    assert [sum(r[0] == "all-reduce" for r in rows) for rows in runs] == [8, 8]
    waits = [ch13["union_ms"](rows, "all-reduce") for rows in runs]
    assert waits[0] > 2 * waits[1]  # rank 1 loads slowly: rank 0 waits for it
    paths = [str(tmp_path / f"traces/slow/rank{r}.json") for r in range(2)]
    count = dpsim.merge_traces(paths, str(tmp_path / "all.json"))
    trace = json.load(open(tmp_path / "all.json"))
    assert isinstance(trace["traceEvents"], list) and len(trace["traceEvents"]) == count
    complete = [e for e in trace["traceEvents"] if e["ph"] == "X"]
    assert all(isinstance(e["ts"], (int, float)) and e["dur"] >= 0 and isinstance(e["name"], str)
               and isinstance(e["pid"], int) and "tid" in e for e in complete)
    names = {e["pid"]: e["args"]["name"] for e in trace["traceEvents"] if e["name"] == "process_name"}
    assert {"rank 0", "rank 1"} <= set(names.values()), names
    assert all(re.fullmatch(r"rank [01](: .+)?", n) for n in names.values()), names
    assert {e["pid"] for e in complete} <= set(names)  # every track is named
    by_rank = {rank: sorted((e["ts"], e["ts"] + e["dur"]) for e in complete
                            if e["name"] == "gloo:all_reduce" and names[e["pid"]] == rank)
               for rank in ("rank 0", "rank 1")}
    (a0, a1), (b0, b1) = by_rank["rank 0"][0], by_rank["rank 1"][0]
    assert a0 < b1 and b0 < a1, (by_rank["rank 0"][0], by_rank["rank 1"][0])


@pytest.mark.parametrize("slow", [0, 2])
def test_every_rank_names_the_straggler(ch13, slow):
    sample_ms = [0.0, 0.0, 0.0]
    sample_ms[slow] = 2.0
    assert dpsim.launch(ch13["who_is_slow"], sample_ms, world_size=3) == [slow] * 3


def test_rank_output_drops_the_profilers_start_and_stop_lines():
    text = ("USDT:2026-11-24 22:55:41 27317:27317 SyncActivityProfilerHandler.cpp:52] profiler_start\n"
            "kept\n"
            "USDT:2026-11-24 22:55:41 27317:27317 SyncActivityProfilerHandler.cpp:59] profiler_stop\n")
    assert tidy(text) == "kept\n"


def test_merged_traces_keep_tracks_and_flows_of_different_ranks_apart(tmp_path):
    """GPU tracks have the same pid (the device index) on every node, and flow ids repeat."""
    for rank in range(2):
        trace = {"traceEvents": [
            {"ph": "M", "name": "process_name", "pid": 0, "tid": 0, "args": {"name": "GPU 0"}},
            {"ph": "X", "name": "kernel", "pid": 0, "tid": 7, "ts": 5.0, "dur": 1.0},
            {"ph": "X", "name": "cpu_op", "pid": 4242 + rank, "tid": 1, "ts": 1.0, "dur": 3.0},
            {"ph": "X", "name": "cpu_op", "pid": 4242 + rank, "tid": 1, "ts": 4.0, "dur": 3.0},
            {"ph": "s", "name": "ac2g", "id": 1, "pid": 4242 + rank, "tid": 1, "ts": 1.0},
            {"ph": "f", "name": "ac2g", "id": 1, "pid": 0, "tid": 7, "ts": 5.0, "bp": "e"}]}
        (tmp_path / f"r{rank}.json").write_text(json.dumps(trace))
    dpsim.merge_traces([str(tmp_path / "r0.json"), str(tmp_path / "r1.json")], str(tmp_path / "m.json"))
    events = json.load(open(tmp_path / "m.json"))["traceEvents"]
    names = {e["pid"]: e["args"]["name"] for e in events if e["name"] == "process_name"}
    assert sorted(names.values()) == ["rank 0", "rank 0: GPU 0", "rank 1", "rank 1: GPU 0"]
    kernels = [names[e["pid"]] for e in events if e["name"] == "kernel"]
    assert kernels == ["rank 0: GPU 0", "rank 1: GPU 0"]
    flows = [(e["id"], names[e["pid"]]) for e in events if e["ph"] in ("s", "f")]
    assert len({i for i, _ in flows}) == 2 and len(flows) == 4

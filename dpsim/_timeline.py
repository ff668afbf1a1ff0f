"""Per-rank timelines from profiler spans: one figure, and one trace file for Perfetto."""
from __future__ import annotations

import json
from collections import Counter
from typing import Sequence

import matplotlib.pyplot as plt

from ._svg import COLOURS

# Drawn in this order, one colour each; spans of other phases get grey.
PHASE_COLOURS = {"data": COLOURS[4], "forward": COLOURS[0], "backward": COLOURS[1],
                 "all-reduce": COLOURS[3], "optimizer": COLOURS[2]}
_COMM = {"all-reduce"}  # drawn in a lane of their own: they run beside backward


def plot_timelines(ranks: Sequence[Sequence[tuple[str, float, float]]], title: str = "",
                   labels: Sequence[str] | None = None,
                   xlabel: str = "ms since the profile started") -> plt.Figure:
    """Each rank's spans (phase, start, end) as two lanes: compute, and communication.

    The lanes share one time axis, so a rank that waits shows a long all-reduce
    while another is still computing. `labels` names the timelines (default
    "rank 0", "rank 1", ...), for instead two runs of one rank.
    """
    labels = list(labels) if labels is not None else [f"rank {r}" for r in range(len(ranks))]
    if len(labels) != len(ranks):
        raise ValueError(f"{len(ranks)} timelines but {len(labels)} labels")
    lanes = 2 * len(ranks)
    fig, ax = plt.subplots(figsize=(5.0, 0.55 * lanes + 1.2))
    for rank, spans in enumerate(ranks):
        for phase, start, end in spans:
            lane = 2 * rank + (0 if phase in _COMM else 1)
            ax.broken_barh([(start, max(end - start, 1e-3))], (lanes - 1 - lane + 0.15, 0.7),
                           color=PHASE_COLOURS.get(phase, COLOURS[7]), lw=0)
    ax.set_yticks([lanes - 1 - lane + 0.5 for lane in range(lanes)],
                  [f"{labels[lane // 2]} {'comm' if lane % 2 == 0 else 'compute'}" for lane in range(lanes)])
    ax.set_ylim(0, lanes)
    ax.set_xlabel(xlabel)
    if title:
        ax.set_title(title, loc="left")
    used = [p for p in PHASE_COLOURS if any(s[0] == p for spans in ranks for s in spans)]
    ax.legend(handles=[plt.Rectangle((0, 0), 1, 1, color=PHASE_COLOURS[p]) for p in used],
              labels=used, ncol=3, loc="upper center", bbox_to_anchor=(0.5, -0.35 - 0.6 / lanes),
              frameon=False)
    fig.tight_layout()
    return fig


def merge_traces(paths: Sequence[str], out: str) -> int:
    """Write the ranks' Chrome traces (``prof.export_chrome_trace``) as one file.

    Rank r's process becomes "rank r" in Perfetto (ui.perfetto.dev) or
    chrome://tracing, and its other tracks (kineto's "Spans", a GPU's streams)
    "rank r: <name>". Process ids and flow ids are renumbered per rank, so
    that tracks that share an id across ranks (GPU 0 on every node) stay apart.
    The ranks of one machine share its clock, so their events line up. Returns
    the number of events written.
    """
    events: list[dict] = []
    for rank, path in enumerate(paths):
        with open(path, encoding="utf-8") as f:
            trace = json.load(f)["traceEvents"]
        names = {e["pid"]: e.get("args", {}).get("name") for e in trace
                 if e.get("ph") == "M" and e.get("name") == "process_name"}
        busiest = Counter(e["pid"] for e in trace if e.get("ph") == "X").most_common(1)
        main = busiest[0][0] if busiest else None
        pids: dict = {}
        for e in trace:
            if e.get("ph") == "M" and e.get("name") in ("process_name", "process_sort_index"):
                continue  # written below, for the new ids
            e = dict(e)
            if "pid" in e:
                e["pid"] = pids.setdefault(e["pid"], 1000 * rank + len(pids) + 1)  # not 0
            if e.get("ph") in ("s", "t", "f") and isinstance(e.get("id"), int):
                e["id"] += 10**9 * rank  # flow arrows stay within their rank
            events.append(e)
        for old, new in pids.items():
            name = f"rank {rank}" if old == main else f"rank {rank}: {names.get(old) or old or 'markers'}"
            events.append({"ph": "M", "name": "process_name", "pid": new, "tid": 0,
                           "args": {"name": name}})
            events.append({"ph": "M", "name": "process_sort_index", "pid": new, "tid": 0,
                           "args": {"sort_index": new}})
    with open(out, "w", encoding="utf-8") as f:
        json.dump({"traceEvents": events, "displayTimeUnit": "ms"}, f)
    return len(events)

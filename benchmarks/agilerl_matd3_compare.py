"""matd3.py beside AgileRL's MATD3 on continuous simple_speaker_listener_v4: the table and
the figure of results.md's "### matd3.py" notes, from run folders already written.

Ours: the run folders benchmark.py wrote (benchmarks/runs/<task>/seed<s>/...) and each
seed's whole-process seconds as benchmark.py measured them (results.json); the peer: the
folders of benchmarks/agilerl_matd3_speaker_listener.py (--out <dir>/seed<s>), one --peer
for each of its settings.

For each seed: the peer's final team return (the mean of its last 100 training episodes,
mean per-agent return), the step at which the peer's own 100-episode mean first reached it,
the step and second at which ours first reached it (seconds counted from ours' process start:
the whole process minus the training time after that episode, so start-up is included and the
closing evaluation too, an upper bound), and both whole processes.

    python benchmarks/agilerl_matd3_compare.py --seeds 101 102 103 \
        --peer "AgileRL MATD3, tutorial=/work/runs/matd3sl/agilerl" \
        --peer "AgileRL MATD3, matd3.py's schedule=/work/runs/matd3sl/agilerl-matched"
"""
import argparse
import csv
import glob
import json
import os
import sys

import numpy as np
from matplotlib.figure import Figure

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
import plot  # noqa: E402  (draw_group: mean over seeds with the min-max band)

WINDOW = 100


def moving(path):
    """(steps, wall seconds, 100-episode trailing mean) of an episodes.csv."""
    with open(path, newline="") as f:
        rows = [(int(r["global_step"]), float(r["wall_time"]), float(r["episode_return"]))
                for r in csv.DictReader(f)]
    steps, times, returns = (np.array(c) for c in zip(*rows))
    mean = np.array([returns[max(0, i - WINDOW + 1):i + 1].mean() for i in range(len(returns))])
    return steps, times, mean


def first_reach(steps, mean, level):
    """Index of the first episode (from the WINDOW-th on) whose trailing mean is >= level."""
    hits = np.flatnonzero((np.arange(len(mean)) >= WINDOW - 1) & (mean >= level - 1e-9))
    return int(hits[0]) if len(hits) else None


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--peer", action="append", required=True, metavar="LABEL=DIR",
                   help="a peer's legend and the folder holding its seed<s>/ run folders")
    p.add_argument("--seeds", type=int, nargs="+", default=[101, 102, 103])
    p.add_argument("--task", default="matd3-simple_speaker_listener_v4")
    p.add_argument("--results", default=os.path.join(ROOT, "benchmarks", "results.json"))
    p.add_argument("--out", default=os.path.join(ROOT, "benchmarks",
                                                  "matd3-vs-agilerl-speaker-listener.png"))
    args = p.parse_args()
    with open(args.results) as f:
        process_s = {r["seed"]: r["process_s"] for r in json.load(f)[args.task]["runs"]}
    ours = {}
    for seed in args.seeds:
        folder = max(glob.glob(os.path.join(ROOT, "benchmarks", "runs", args.task, f"seed{seed}",
                                            "*")), key=os.path.getmtime)
        ours[seed] = moving(os.path.join(folder, "episodes.csv"))
    # curves: (x, 100-episode mean) per seed against steps and against seconds since the
    # process started (the last episode put at the process's end: start-up shifts it right)
    curves = {"matd3.py (MATD3, its defaults)": {
        "steps": [(ours[s][0], ours[s][2]) for s in args.seeds],
        "time": [(ours[s][1] + process_s[s] - ours[s][1][-1], ours[s][2]) for s in args.seeds]}}
    for spec in args.peer:
        label, peer_dir = spec.split("=", 1)
        rows, curves[label] = [], {"steps": [], "time": []}
        for seed in args.seeds:
            with open(os.path.join(peer_dir, f"seed{seed}", "summary.json")) as f:
                peer = json.load(f)
            p_steps, p_times, p_mean = moving(os.path.join(peer_dir, f"seed{seed}",
                                                           "episodes.csv"))
            o_steps, o_times, o_mean = ours[seed]
            final = p_mean[-1]  # the peer's final team return: its last 100 training episodes
            p_i, o_i = first_reach(p_steps, p_mean, final), first_reach(o_steps, o_mean, final)
            reach_s = None if o_i is None else process_s[seed] - (o_times[-1] - o_times[o_i])
            peer_s = peer["process_wall_s"]
            rows.append({"seed": seed, "peer_final": round(float(final), 2),
                         "peer_first_step": int(p_steps[p_i]), "peer_process_s": peer_s,
                         "ours_final": round(float(o_mean[-1]), 2),
                         "ours_reach_step": None if o_i is None else int(o_steps[o_i]),
                         "ours_reach_s": None if reach_s is None else round(reach_s, 1),
                         "ours_process_s": process_s[seed],
                         "reach_ratio": None if reach_s is None else round(reach_s / peer_s, 2),
                         "process_ratio": round(process_s[seed] / peer_s, 2)})
            curves[label]["steps"].append((p_steps, p_mean))
            curves[label]["time"].append((p_times + peer_s - p_times[-1], p_mean))
        print(label)
        for row in rows:
            print("  " + json.dumps(row))
        for key in ("peer_final", "peer_first_step", "ours_reach_step", "reach_ratio",
                    "process_ratio"):
            values = [r[key] for r in rows if r[key] is not None]
            print(f"  median {key}: {np.median(values) if values else None} "
                  f"({len(values)} of {len(rows)} seeds)")

    fig = Figure(figsize=(12, 4.5), dpi=100)
    for k, (x, xlabel) in enumerate((("steps", "environment steps"),
                                     ("time", "seconds since the process started"))):
        ax = fig.add_subplot(1, 2, k + 1)
        for label, group in curves.items():
            plot.draw_group(ax, group[x], label, seeds=args.seeds)
        plot.finish_axis(ax, "continuous simple_speaker_listener_v4, 100k steps\nmean over "
                         "seeds, min-max shaded", xlabel, f"mean of the last {WINDOW} episodes")
    fig.tight_layout()
    fig.savefig(args.out)
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()

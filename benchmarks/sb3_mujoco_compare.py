"""Issue 37's side by side: ours and Stable-Baselines3 (benchmarks/sb3_mujoco.py) on the same
seed, started together, one core each, and then the table and the figure of results.md's
"SB3 side by side" notes.

    run     for each seed, for each algorithm: benchmark.py's task for ours (run_one: the same
            command, flags and timing as `python benchmark.py --tasks <task>`) and
            sb3_mujoco.py with the Python of an environment that has stable-baselines3, the two
            processes at once; each whole process timed from outside
    report  per seed: SB3's final return (its last evaluation, at the budget), the step at which
            SB3's own evaluations first reached it, the step and second at which ours first
            reached it, and both whole processes; the figure of the evaluations against steps
            and against seconds

    python benchmarks/sb3_mujoco_compare.py run --sb3-python /tmp/sb3env/bin/python \
        --algos sac td3 --seeds 101 102 103 --out /tmp/sbs
    python benchmarks/sb3_mujoco_compare.py report --algos sac td3 --seeds 101 102 103 \
        --out /tmp/sbs --figure benchmarks/sac-td3-HalfCheetah-v5-100k-vs-sb3.png
    python benchmarks/sb3_mujoco_compare.py run --sb3-python /tmp/sb3env/bin/python \
        --algos ppo --seeds 104 105 106 --out /tmp/sbp      # ppo-Hopper-v5's fresh seeds
    python benchmarks/sb3_mujoco_compare.py report --algos ppo --seeds 104 105 106 \
        --out /tmp/sbp --figure benchmarks/ppo-Hopper-v5-vs-sb3.png

Ours counts as having reached a return at the first evaluation of --eval-every whose mean is
at least that return (or the final evaluation, after the last update, if none is). Its second
is the whole process less the training after that evaluation: start-up is included, and so is
the closing evaluation, so it is an upper bound by a few seconds. SB3's evaluations, every
10,000 steps (100,000 for ppo), are the same: 10 episodes of the deterministic policy.
"""
import argparse
import csv
import glob
import json
import os
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor

import numpy as np
from matplotlib.figure import Figure

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
import benchmark  # noqa: E402  (the tasks and run_one)
import plot  # noqa: E402  (draw_group: mean over seeds with the min-max band)

TASK = {"sac": "sac-HalfCheetah-v5-100k", "td3": "ddpg_td3-HalfCheetah-v5-100k",
        "ppo": "ppo-Hopper-v5"}
"""ours beside each of sb3_mujoco.py's algorithms: the task on the same environment and budget"""


def task_of(algo):
    """benchmark.py's Task that runs beside SB3's `algo` (TASK[algo])."""
    return next(t for tasks in benchmark.TASKS.values() for t in tasks if t.name == TASK[algo])


def run_sb3(python, algo, env_id, seed, out):
    """sb3_mujoco.py in its own process; its output and whole-process seconds under out/sb3/."""
    path = os.path.join(out, "sb3", f"{algo}-seed{seed}")
    os.makedirs(os.path.dirname(path), exist_ok=True)
    start = time.time()
    with open(path + ".out", "w") as log:
        done = subprocess.run([python, os.path.join(ROOT, "benchmarks", "sb3_mujoco.py"), algo,
                               env_id, str(seed)], cwd=ROOT, stdout=log, stderr=subprocess.STDOUT)
    if done.returncode != 0:
        raise RuntimeError(f"sb3_mujoco.py {algo} {env_id} {seed} failed; see {path}.out")
    with open(path + ".json", "w") as f:
        json.dump({"process_s": round(time.time() - start, 3)}, f)


def run(args):
    for seed in args.seeds:
        for algo in args.algos:
            task = task_of(algo)
            print(f"{time.strftime('%H:%M:%S')} {algo} seed {seed}: {task.name} beside SB3 "
                  f"(load {os.getloadavg()[0]:.1f})", flush=True)
            with ThreadPoolExecutor(2) as pool:
                ours = pool.submit(benchmark.run_one, task, seed, os.path.join(args.out, "ours"))
                peer = pool.submit(run_sb3, args.sb3_python, algo, task.env_id, seed, args.out)
                peer.result()
                with open(os.path.join(args.out, "ours", f"{algo}-seed{seed}.json"), "w") as f:
                    json.dump({"process_s": ours.result()["process_s"]}, f)


def ours_evaluations(out, algo, seed):
    """(steps, seconds since the process started, means) of ours' evaluations, the final one
    (after the last update) appended, and the whole process's seconds."""
    folder = max(glob.glob(os.path.join(out, "ours", "runs", TASK[algo], f"seed{seed}", "*")),
                 key=os.path.getmtime)
    with open(os.path.join(out, "ours", f"{algo}-seed{seed}.json")) as f:
        process_s = json.load(f)["process_s"]
    with open(os.path.join(folder, "summary.json")) as f:
        summary = json.load(f)
    with open(os.path.join(folder, "evaluations.csv"), newline="") as f:
        rows = [(int(r["global_step"]), float(r["wall_time"]), float(r["eval_return_mean"]))
                for r in csv.DictReader(f)]
    rows.append((summary["global_steps"], summary["wall_time_s"], summary["eval_return_mean"]))
    steps, times, means = (np.array(c) for c in zip(*rows))
    return steps, process_s - (summary["wall_time_s"] - times), means, process_s


def sb3_evaluations(out, algo, seed):
    """(steps, seconds since the process started, means) of the `eval` lines of
    sb3_mujoco.py's output, and the whole process's seconds."""
    with open(os.path.join(out, "sb3", f"{algo}-seed{seed}.json")) as f:
        process_s = json.load(f)["process_s"]
    with open(os.path.join(out, "sb3", f"{algo}-seed{seed}.out")) as f:
        rows = [tuple(float(v) for v in line.split()[1:]) for line in f
                if line.startswith("eval ")]
    steps, times, means = (np.array(c) for c in zip(*rows))
    # its seconds count from after the imports: the last line is put at the process's end
    return steps.astype(int), times + process_s - times[-1], means, process_s


def drawn(steps):
    """How many of ours' evaluations the figure draws: all, the final one included, unless an
    evaluation of --eval-every sits at the final one's step (sac.py's at 100k, taken before
    that step's update); then the final one is left out, as a second point at one step."""
    return len(steps) - 1 if len(steps) > 1 and steps[-1] == steps[-2] else len(steps)


def first_at_least(means, level):
    """Index of the first evaluation whose mean is >= level, or None if none is."""
    hits = np.flatnonzero(means >= level)
    return int(hits[0]) if len(hits) else None


def report(args):
    fig = Figure(figsize=(12, 4.2 * len(args.algos)), dpi=100)
    for row, algo in enumerate(args.algos):
        print(f"{algo}: ours {TASK[algo]} beside SB3's {algo} (sb3_mujoco.py)")
        lines, curves = [], {"ours": {"steps": [], "time": []}, "SB3": {"steps": [], "time": []}}
        for seed in args.seeds:
            o_steps, o_times, o_means, o_process = ours_evaluations(args.out, algo, seed)
            s_steps, s_times, s_means, s_process = sb3_evaluations(args.out, algo, seed)
            final = s_means[-1]  # SB3's return at the budget
            s_i, o_i = first_at_least(s_means, final), first_at_least(o_means, final)
            lines.append({"seed": seed, "sb3_final": round(float(final), 1),
                          "sb3_first_step": int(s_steps[s_i]), "sb3_process_s": s_process,
                          "ours_final": round(float(o_means[-1]), 1),
                          "ours_reach_step": None if o_i is None else int(o_steps[o_i]),
                          "ours_reach_s": None if o_i is None else round(float(o_times[o_i]), 1),
                          "ours_process_s": o_process,
                          "reach_ratio": (None if o_i is None else
                                          round(float(o_times[o_i]) / s_process, 2)),
                          "process_ratio": round(o_process / s_process, 2)})
            o_end = drawn(o_steps)
            for name, (steps, times, means) in (("ours", (o_steps[:o_end], o_times[:o_end],
                                                          o_means[:o_end])),
                                                ("SB3", (s_steps, s_times, s_means))):
                curves[name]["steps"].append((steps, means))
                curves[name]["time"].append((times, means))
        for line in lines:
            print("  " + json.dumps(line))
        for key in ("sb3_final", "ours_final", "sb3_first_step", "ours_reach_step",
                    "reach_ratio", "process_ratio"):
            values = [line[key] for line in lines if line[key] is not None]
            print(f"  median {key}: {np.median(values) if values else None} "
                  f"({len(values)} of {len(lines)} seeds)")
        labels = {"ours": f"{TASK[algo].split('-')[0]}.py ({TASK[algo]})",
                  "SB3": f"SB3 {algo.upper()}, the zoo's settings"}
        for col, (x, xlabel) in enumerate((("steps", "environment steps"),
                                           ("time", "seconds since the process started"))):
            ax = fig.add_subplot(len(args.algos), 2, 2 * row + col + 1)
            for name, group in curves.items():
                plot.draw_group(ax, group[x], labels[name], seeds=args.seeds)
            plot.finish_axis(ax, f"{task_of(algo).env_id}, {algo.upper()}: greedy evaluation "
                             "(10 episodes)\nmean over seeds, min-max shaded", xlabel,
                             "evaluation return")
    fig.tight_layout()
    fig.savefig(args.figure)
    print(f"wrote {args.figure}")


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("command", choices=["run", "report"])
    p.add_argument("--algos", nargs="+", choices=list(TASK), default=["sac", "td3"])
    p.add_argument("--seeds", type=int, nargs="+", default=[101, 102, 103])
    p.add_argument("--out", required=True, help="the folder of the runs (run) or to read (report)")
    p.add_argument("--sb3-python", default=sys.executable,
                   help="the Python of an environment with stable-baselines3 (run)")
    p.add_argument("--figure", default=os.path.join(ROOT, "benchmarks", "sb3-side-by-side.png"))
    args = p.parse_args()
    if args.command == "report":
        needed = [os.path.join(args.out, who, f"{algo}-seed{seed}.json")
                  for algo in args.algos for seed in args.seeds for who in ("ours", "sb3")]
        missing = [path for path in needed if not os.path.exists(path)]
        if missing:
            p.error(f"{missing[0]} is missing: `run` writes it ({len(missing)} of "
                    f"{len(needed)} runs missing)")
    run(args) if args.command == "run" else report(args)


if __name__ == "__main__":
    main()

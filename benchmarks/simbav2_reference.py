"""The reference curves drawn beside crossq.py and sac.py at 100k steps: the evaluation returns
that the SimbaV2 authors publish for CrossQ and SAC (their results/baseline/crossq.csv and
sac.csv: 10 seeds each, Gymnasium's v4 MuJoCo tasks, the average return of evaluation episodes
against environment steps). The CrossQ paper's 100k figures (2,764 / 8,112 / 3,914) are the
means of these curves at 100k; the same data set's SAC gives 1,103 / 6,156 / 690 at its
nearest step (99,996).

This tool cuts the two files to what benchmark.py draws (Hopper, HalfCheetah and Walker2d up to
100k steps) and writes, at every step the authors logged, the median, min, max and mean over
their seeds into benchmarks/references/simbav2-100k.json, with the source named. Nothing of
SimbaV2 is kept in this repository but those numbers:

    git clone https://github.com/dojeon-ai/SimbaV2 /tmp/SimbaV2
    git -C /tmp/SimbaV2 checkout 14fafb27e6f78f0b65d19b8873b4433547a2193c
    python benchmarks/simbav2_reference.py /tmp/SimbaV2/results/baseline
"""
import argparse
import csv
import json
import os
import sys
from collections import defaultdict

import numpy as np

COMMIT = "14fafb27e6f78f0b65d19b8873b4433547a2193c"
SOURCE = "https://github.com/dojeon-ai/SimbaV2"
FILES = {"CrossQ": "crossq.csv", "SAC": "sac.csv"}
"""the algorithm's name in our figures -> its file in SimbaV2's results/baseline"""
ENVS = ("Hopper-v4", "HalfCheetah-v4", "Walker2d-v4")
UP_TO = 100_000
"""the last environment step kept; SAC's file logs every 16,666 steps, so its last point
kept is 99,996"""
OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "references", "simbav2-100k.json")


def seed_statistics(rows, env_id, up_to=UP_TO):
    """The median, min, max and mean over seeds of one environment's avg_return, at each
    env_step <= up_to that every seed logged (steps logged by only some seeds are dropped, so
    each point is over all seeds). rows: dicts with the files' columns env_name, seed,
    metric, env_step, value. Returns {"steps", "median", "low", "high", "mean", "seeds"}."""
    by_step = defaultdict(dict)
    for row in rows:
        if row["env_name"] == env_id and row["metric"] == "avg_return":
            step = round(float(row["env_step"]))
            if step <= up_to:
                by_step[step][row["seed"]] = float(row["value"])
    seeds = set().union(*by_step.values()) if by_step else set()
    steps = sorted(s for s, values in by_step.items() if set(values) == seeds)
    if not steps:
        raise ValueError(f"no avg_return of {env_id} up to step {up_to:,}")
    values = np.array([[by_step[s][seed] for seed in sorted(seeds)] for s in steps])
    return {"steps": steps, "median": np.median(values, axis=1).round(1).tolist(),
            "low": values.min(axis=1).round(1).tolist(),
            "high": values.max(axis=1).round(1).tolist(),
            "mean": values.mean(axis=1).round(1).tolist(), "seeds": len(seeds)}


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("baseline", help="SimbaV2's results/baseline folder, at the commit above")
    parser.add_argument("--out", default=OUT, help="the JSON file written")
    args = parser.parse_args(argv)
    missing = [f for f in FILES.values() if not os.path.exists(os.path.join(args.baseline, f))]
    if missing:
        parser.exit(2, f"simbav2_reference.py: {args.baseline} has no {', '.join(missing)}; "
                       "give SimbaV2's results/baseline folder\n")
    curves = {}
    for algorithm, name in FILES.items():
        with open(os.path.join(args.baseline, name), newline="") as f:
            rows = list(csv.DictReader(f))
        curves[algorithm] = {env_id: seed_statistics(rows, env_id) for env_id in ENVS}
    os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
    with open(args.out, "w") as f:
        json.dump({"source": SOURCE, "commit": COMMIT,
                   "files": {a: f"results/baseline/{n}" for a, n in FILES.items()},
                   "measure": "avg_return of evaluation episodes against env_step, Gymnasium "
                              "v4, over every seed of the file", "curves": curves}, f, indent=1)
    for algorithm, envs in curves.items():
        print(algorithm, ", ".join(f"{e} {c['mean'][-1]:,.0f} (mean of {c['seeds']} at "
                                   f"{c['steps'][-1]:,})" for e, c in envs.items()))
    return 0


if __name__ == "__main__":
    sys.exit(main())

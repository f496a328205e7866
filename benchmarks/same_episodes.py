"""A refactor changes nothing an agent learns: each script's reference command at seed 1 and a
short budget, run in two checkouts on the same machine, writes the same episodes.csv apart
from its wall_time column.

    git worktree add /tmp/before 7dc0ba6
    python benchmarks/same_episodes.py --before /tmp/before --after . [--scripts ppo dqn]

Each command runs once in each checkout (one at a time, one torch thread, no evaluation,
on a machine without a GPU: CPU and GPU float rounding differ);
the line per script says "same" or where the two files first differ. Exit status 1 if any
differs.
"""
import argparse
import csv
import glob
import os
import subprocess
import sys
import tempfile

# script: the flags of its reference run (its default environment unless named), seed 1
COMMANDS = {
    "qlearning": ["--total-timesteps", "100000"],
    "dqn": ["--total-timesteps", "20000"],
    "vpg": ["--total-timesteps", "102400"],
    "trpo": ["--total-timesteps", "102400"],
    "ppo": ["--total-timesteps", "20000"],
    "ppo_masked": ["--total-timesteps", "20480"],
    "ppod": ["--total-timesteps", "30000"],
    "ppo_lstm": ["--total-timesteps", "20480"],
    "ppo_rnd": ["--total-timesteps", "50000"],
    "ddpg_td3": ["--total-timesteps", "5000"],
    "sac": ["--total-timesteps", "5000"],
    "crossq": ["--total-timesteps", "6000"],
    "es": ["--total-timesteps", "50000", "--num-workers", "1"],
    "impala": ["--total-timesteps", "30000", "--sync"],
    "mappo": ["--total-timesteps", "16000"],
    "matd3": ["--total-timesteps", "8000"],
}


def episodes(checkout, script, flags):
    """The rows of episodes.csv of the script's run in that checkout, without wall_time."""
    with tempfile.TemporaryDirectory() as out:
        command = [sys.executable, f"{script}.py", "--seed", "1", "--eval-episodes", "0",
                   "--no-tensorboard", "--output-dir", out, *flags]  # on a machine's CPU
        subprocess.run(command, cwd=checkout, check=True, capture_output=True,
                       env={**os.environ, "OMP_NUM_THREADS": "1"})
        (path,) = glob.glob(os.path.join(out, "*", "episodes.csv"))
        with open(path) as f:
            return [{k: v for k, v in row.items() if k != "wall_time"} for row in csv.DictReader(f)]


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--before", required=True, help="a checkout from before the change")
    p.add_argument("--after", default=".", help="a checkout from after it (default: here)")
    p.add_argument("--scripts", nargs="+", choices=list(COMMANDS), default=list(COMMANDS))
    args = p.parse_args()
    differ = 0
    for script in args.scripts:
        before = episodes(args.before, script, COMMANDS[script])
        after = episodes(args.after, script, COMMANDS[script])
        first = next((i for i, (b, a) in enumerate(zip(before, after)) if b != a), None)
        if before == after:
            print(f"{script}: same, {len(after)} episodes ({' '.join(COMMANDS[script])})", flush=True)
        else:
            differ += 1
            where = (f"row {first + 1}" if first is not None
                     else f"{len(before)} episodes before, {len(after)} after")
            print(f"{script}: DIFFERS at {where}", flush=True)
    return 1 if differ else 0


if __name__ == "__main__":
    sys.exit(main())

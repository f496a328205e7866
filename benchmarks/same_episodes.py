"""A refactor changes nothing an agent learns: each script's reference command at seed 1 and a
short budget, run in two checkouts on the same machine, writes the same episodes.csv apart
from its wall_time column, and the same rows in every other CSV file of its run folder
(updates.csv, grpo.py's and rlhf.py's held_out.csv, ...) apart from the time columns
(wall_time, sps).

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
    "pqn": ["--total-timesteps", "20000"],
    # the language road: a short warm start, then a few updates, measured twice on the way
    "grpo": ["--total-timesteps", "2048", "--sft-steps", "60", "--eval-every", "1024",
             "--eval-episodes", "16", "--eval-samples", "4", "--pass-k", "4"],
    "rlhf": ["--total-timesteps", "1024", "--sft-steps", "60", "--rm-steps", "30",
             "--num-pairs", "400", "--eval-every", "512", "--eval-episodes", "16"],
    "rlhf-dpo": ["--algo", "dpo", "--total-timesteps", "1024", "--sft-steps", "60",
                 "--num-pairs", "400", "--eval-every", "512", "--eval-episodes", "16"],
}
TIME_COLUMNS = ("wall_time", "sps")


def episodes(checkout, script, flags):
    """{file name: its rows without the time columns} of the CSV files of the script's run in
    that checkout (a variant's name, rlhf-dpo, runs its script with the variant's flags)."""
    with tempfile.TemporaryDirectory() as out:
        evaluation = [] if "--eval-episodes" in flags else ["--eval-episodes", "0"]
        command = [sys.executable, f"{script.split('-')[0]}.py", "--seed", "1", *evaluation,
                   "--no-tensorboard", "--no-curve", "--output-dir", out, *flags]  # on the CPU
        subprocess.run(command, cwd=checkout, check=True, capture_output=True,
                       env={**os.environ, "OMP_NUM_THREADS": "1"})
        found = {}
        for path in sorted(glob.glob(os.path.join(out, "*", "*.csv"))):
            with open(path) as f:
                found[os.path.basename(path)] = [
                    {k: v for k, v in row.items() if k not in TIME_COLUMNS}
                    for row in csv.DictReader(f)]
        return found


def differences(before, after):
    """Where two runs' files differ, as a list of phrases (empty where they are the same):
    a file one run wrote and the other did not, the first row that differs, or the numbers
    of rows. before and after: {file name: [row dicts]}, as episodes() returns them."""
    wrong = []
    for name in sorted(set(before) | set(after)):
        b, a = before.get(name), after.get(name)
        if b is None or a is None:
            wrong.append(f"{name} only {'after' if b is None else 'before'}")
        elif b != a:
            first = next((i for i, (x, y) in enumerate(zip(b, a)) if x != y), None)
            wrong.append(f"{name} at row {first + 1}" if first is not None
                         else f"{name}: {len(b)} rows before, {len(a)} after")
    return wrong


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
        wrong = differences(before, after)
        if not wrong:
            print(f"{script}: same, {len(after.get('episodes.csv', []))} episodes and "
                  f"{', '.join(sorted(after))} ({' '.join(COMMANDS[script])})", flush=True)
        else:
            differ += 1
            print(f"{script}: DIFFERS: {'; '.join(wrong)}", flush=True)
    return 1 if differ else 0


if __name__ == "__main__":
    sys.exit(main())

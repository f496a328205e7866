"""Issue 57's side by side: ours and CleanRL's own scripts on this machine, the same
environment, seeds, budget and thread count (one), each with its own defaults, and then the
rows of results.json and results.md, the table of results.md's "Beside CleanRL" notes and the
figure.

    run     for each seed, for each pair: benchmark.py's run_one for ours (the flags of PAIRS,
            --no-cuda, one torch thread) and CleanRL's script with the Python of its own virtual
            environment (--no-cuda --no-track --no-capture-video, OMP_NUM_THREADS=1), the two
            processes at once, so that both see the same load; each whole process timed from
            outside. CleanRL's TensorBoard events (charts/episodic_return) are written out as
            a run folder of ours (episodes.csv, summary.json, config.json), so that
            benchmark.py and plot.py read both sides alike
    report  results.json's entries of both sides (benchmark.read_run: steps and seconds to the
            threshold, the return at the budget, the whole process), results.md's table
            rewritten with them, a line per pair for the notes, and the figure: the moving mean
            of the training returns against steps and against seconds of each run's own clock

    python benchmarks/cleanrl_compare.py run --pairs ppo-CartPole-v1 dqn-CartPole-v1 \
        --seeds 101 102 103
    python benchmarks/cleanrl_compare.py report --pairs ppo-CartPole-v1 dqn-CartPole-v1 \
        --seeds 101 102 103 --figure benchmarks/vs-cleanrl-CartPole-v1.png

CleanRL is not part of this repository and is never copied into it. Its scripts are run at
the commit CLEANRL_COMMIT, from the ignored folder benchmarks/cleanrl/, with the packages
that CleanRL pins (requirements/requirements-mujoco.txt there) in a virtual environment of
their own, the ignored .venv-cleanrl/:

    git clone https://github.com/vwxyzjn/cleanrl benchmarks/cleanrl
    git -C benchmarks/cleanrl checkout fe8d8a03c41a7ef5b523e2e354bd01c363e786bb
    python3.11 -m venv .venv-cleanrl
    grep -v -E '^ *#|^-e|nvidia|triton|^torch|^pygame|^setuptools|pre-commit|nodeenv|
        virtualenv|identify|cfgv|distlib|python_full_version (<|==)' \
        benchmarks/cleanrl/requirements/requirements-mujoco.txt | sed 's/ ;.*//' > /tmp/pins
    .venv-cleanrl/bin/pip install -r /tmp/pins torch==2.13.0

(the grep's pattern on one line). Every pin is CleanRL's (gymnasium 0.29.1, numpy 1.24.4,
mujoco 2.3.3, tensorboard 2.11.2, tyro 0.5.10, ...) but these: torch 2.13.0's CPU build for
its 2.4.1, whose Linux wheel brings the CUDA packages (GBs) and which is not this machine's
CPU build; Python 3.11 where CleanRL asks for 3.8-3.10 (its scripts run unchanged); pygame
2.1.0 left out (no wheel for 3.11, and it only draws frames, which no run here asks for);
setuptools unpinned (torch 2.13.0 needs a newer one); the CUDA packages and CleanRL's
development tools (pre-commit) left out.

CleanRL does not run on Gymnasium 1.x (its issue #499), so its MuJoCo scripts make the v4
environments of its Gymnasium 0.29.1: ours make the same ids (Gymnasium 1.x still registers
them) with the flags of our v5 tasks, and the MuJoCo pairs are named with v4.
"""
import argparse
import csv
import dataclasses
import glob
import json
import os
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor

from matplotlib.figure import Figure

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
import benchmark  # noqa: E402  (the tasks, run_one, read_run and results.json's helpers)
import plot  # noqa: E402  (read_run, run_curve, draw_group: the figure)

CLEANRL = os.path.join(ROOT, "benchmarks", "cleanrl")
"""where CleanRL's repository is checked out (ignored by git)"""
CLEANRL_COMMIT = "fe8d8a03c41a7ef5b523e2e354bd01c363e786bb"
"""the commit of CleanRL whose scripts are run (2026-04-20)"""
CLEANRL_PYTHON = os.path.join(ROOT, ".venv-cleanrl", "bin", "python")
"""the Python of the virtual environment with CleanRL's pinned packages"""


@dataclasses.dataclass
class Pair:
    ours: benchmark.Task
    """our script's task: its env_id, flags (the budget among them) and the window"""
    cleanrl: str
    """CleanRL's script beside it, in benchmarks/cleanrl/cleanrl/"""
    variant: str = ""
    """tells apart a second pair of the same scripts on the same environment (ours with other
    flags); its name ends with it"""
    said: str = "its defaults"
    """our flags, as the figure's legend names them"""
    cleanrl_env_id: str = ""
    """the id CleanRL's Gymnasium 0.29.1 makes where ours has no such id (LunarLander-v2
    for our LunarLander-v3); empty: the same id"""

    @property
    def name(self):
        return f"{self.ours.script}-{self.ours.env_id}" + (f"-{self.variant}" if self.variant
                                                           else "")

    @property
    def cleanrl_task(self):
        """CleanRL's side as a task of benchmark.py (for read_run and results.json): its
        script's name, the same environment, threshold and window; no evaluation threshold,
        as CleanRL's scripts do not evaluate (its figure has the training panel alone)."""
        return dataclasses.replace(self.ours, script=f"cleanrl-{self.cleanrl[:-3]}", flags=[],
                                   label="", eval_threshold=False)


GOAL = ("beside CleanRL's {cleanrl} on the same seeds, started together: the return at the "
        "budget within CleanRL's range or above, the whole process at most 0.8x CleanRL's")


def with_values(flags, values):
    """The flags with some given other values ({flag: value}, None for a switch such as
    --no-anneal-lr): a value replaced in place, a flag the list lacks added at the end, so
    that each flag is given once."""
    flags = list(flags)
    for flag, value in (values or {}).items():
        if flag not in flags:
            flags += [flag] if value is None else [flag, value]
        elif value is not None:
            flags[flags.index(flag) + 1] = value
    return flags


def cartpole(script, cleanrl, variant="", values=None, said="its defaults"):
    """Ours on CartPole-v1 with its defaults at CleanRL's 500k steps: the steps and seconds
    to a 20-episode mean of 475, the 20-episode mean at 500k; a variant gives some flags
    other values, as in mujoco_v4."""
    flags = with_values(["--total-timesteps", "500000"], values)
    return Pair(benchmark.Task(script, "CartPole-v1", 475, GOAL.format(cleanrl=cleanrl), flags,
                               label=variant or "vs-cleanrl"), cleanrl, variant, said)


def mujoco_v4(task_name, cleanrl, variant="", values=None, said="its defaults"):
    """benchmark.py's v5 task on the v4 environment that CleanRL's Gymnasium makes, the same
    flags and budget; a variant gives some flags other values (with_values). The window of
    100 training episodes is CleanRL's measure."""
    task = next(t for tasks in benchmark.TASKS.values() for t in tasks if t.name == task_name)
    return Pair(dataclasses.replace(task, env_id=task.env_id.replace("-v5", "-v4"),
                                    flags=with_values(task.flags, values),
                                    goal=GOAL.format(cleanrl=cleanrl),
                                    label=variant or "vs-cleanrl", window=100), cleanrl, variant,
                said)


def held_out(script, env_id, cleanrl, steps="300000", cleanrl_env_id=""):
    """Ours with only --env-id and --total-timesteps, so its preset, on an environment that no
    setting of the preset was chosen on (issue 107), beside CleanRL's script for the family at
    the same budget: Gymnasium's reward threshold the goal, CleanRL's 100-episode window.
    LunarLander needs Box2D on both sides (`pip install box2d`, and pygame in CleanRL's
    environment, whose Gymnasium 0.29.1 imports it with Box2D), and CleanRL's Gymnasium knows
    it as v2: v3 fixed v2's wind and its reset's seeding, not its rewards or physics."""
    import gymnasium as gym
    task = benchmark.Task(script, env_id, gym.spec(env_id).reward_threshold,
                          GOAL.format(cleanrl=cleanrl), ["--total-timesteps", steps],
                          label="held-out", window=100)
    return Pair(task, cleanrl, "held-out", "its preset", cleanrl_env_id)


PAIRS = {pair.name: pair for pair in [
    cartpole("ppo", "ppo.py"),
    cartpole("dqn", "dqn.py"),
    # ours at CleanRL's settings (its dqn.py's defaults, each given as our flag; its network's
    # 120 and 84 units are our two layers of 128, the one difference left): the first pair
    # replays ten times the transitions of CleanRL's; is its gap the settings or the code?
    cartpole("dqn", "dqn.py", "cleanrl-settings",
             {"--learning-rate": "2.5e-4", "--no-anneal-lr": None, "--buffer-size": "10000",
              "--target-network-frequency": "500", "--batch-size": "128", "--end-e": "0.05",
              "--exploration-fraction": "0.5", "--learning-starts": "10000",
              "--train-frequency": "10", "--gradient-steps": "1", "--loss": "mse",
              "--no-double-dqn": None, "--max-grad-norm": "inf"}, said="CleanRL's settings"),
    # issue 74: PQN, both at their defaults and CleanRL's 500k (ours 32 environments of 64
    # steps, 128 units, 16 minibatches; CleanRL's 4 of 128, 120 and 84 units, 4 minibatches);
    # CleanRL's pqn.py is at the pinned commit
    cartpole("pqn", "pqn.py"),
    mujoco_v4("ppo-Hopper-v5", "ppo_continuous_action.py"),
    mujoco_v4("ddpg_td3-HalfCheetah-v5-100k", "td3_continuous_action.py"),
    mujoco_v4("sac-HalfCheetah-v5-100k", "sac_continuous_action.py"),
    # ours at CleanRL's settings where the two differ (critics and temperature at 1e-3,
    # 5,000 random steps, two actor steps every second critic step): is the gap of the
    # pair above the settings or the code?
    mujoco_v4("sac-HalfCheetah-v5-100k", "sac_continuous_action.py", "cleanrl-settings",
              {"--critic-learning-rate": "1e-3", "--learning-starts": "5000",
               "--policy-frequency": "2"}, said="CleanRL's settings"),
    # issue 107: the presets on environments held out, each family beside CleanRL's script
    held_out("ppo", "Ant-v4", "ppo_continuous_action.py"),
    held_out("ppo", "Swimmer-v4", "ppo_continuous_action.py"),
    held_out("ppo", "InvertedDoublePendulum-v4", "ppo_continuous_action.py"),
    held_out("ppo", "Acrobot-v1", "ppo.py"),
    held_out("ppo", "MountainCar-v0", "ppo.py"),
    *[held_out("sac", env_id, "sac_continuous_action.py", steps="100000")
      for env_id in ("Ant-v4", "InvertedDoublePendulum-v4", "Swimmer-v4")],
    held_out("ppo", "LunarLander-v3", "ppo.py", cleanrl_env_id="LunarLander-v2"),
    # dqn.py's vector preset (to 200k) and pqn.py's at the budgets of CleanRL's dqn.py
    # benchmarks (100k here, the off-policy budget) and of its pqn.py (500k)
    *[held_out("dqn", env_id, "dqn.py", "100000", cleanrl_env_id)
      for env_id, cleanrl_env_id in [("Acrobot-v1", ""), ("MountainCar-v0", ""),
                                     ("LunarLander-v3", "LunarLander-v2")]],
    *[held_out("pqn", env_id, "pqn.py", "500000", cleanrl_env_id)
      for env_id, cleanrl_env_id in [("Acrobot-v1", ""), ("MountainCar-v0", ""),
                                     ("LunarLander-v3", "LunarLander-v2")]],
]}
"""our task beside each CleanRL script, by the pair's name (script-env_id)"""


def budget(pair):
    """The pair's budget, which CleanRL's --total-timesteps gets: ours's (the task's flags)."""
    return benchmark.budget(pair.ours)


def cleanrl_command(pair, seed, python=CLEANRL_PYTHON):
    """CleanRL's script with its own flags: the seed, environment and budget, no GPU, no
    Weights & Biases, no video."""
    return [python, os.path.join(CLEANRL, "cleanrl", pair.cleanrl), "--seed", str(seed),
            "--env-id", pair.cleanrl_env_id or pair.ours.env_id, "--total-timesteps", str(budget(pair)), "--no-cuda",
            "--no-track", "--no-capture-video"]


def run_cleanrl(pair, seed, out, python=CLEANRL_PYTHON):
    """CleanRL's script in its own process, in a folder of its own (it writes runs/ where it
    starts); its output there, and its events written out as a run folder of ours under
    out/runs/<its task>/seed<seed>/. Returns the whole process's seconds."""
    task = pair.cleanrl_task
    work = os.path.join(out, "cleanrl", task.name, f"seed{seed}")
    os.makedirs(work, exist_ok=True)
    environ = {**os.environ, "PYTHONPATH": CLEANRL}  # dqn.py imports cleanrl_utils
    start = time.time()
    with open(os.path.join(work, "output.txt"), "w") as log:
        done = subprocess.run(cleanrl_command(pair, seed, python), cwd=work, stdout=log,
                              stderr=subprocess.STDOUT, env=environ)
    process_s = round(time.time() - start, 3)
    if done.returncode != 0:
        raise RuntimeError(f"CleanRL's {pair.cleanrl} seed {seed} failed; see {work}/output.txt")
    events = max(glob.glob(os.path.join(work, "runs", "*", "events.out.tfevents.*")),
                 key=os.path.getmtime)
    write_run_folder(events, os.path.join(out, "runs", task.name, f"seed{seed}", "run"), pair,
                     seed, budget(pair))
    return process_s


def read_events(path):
    """(steps, seconds since the event file was opened, returns) of the charts/episodic_return
    scalars of one TensorBoard event file, in the order written (several at one step: the
    environments of a vector whose episodes ended together)."""
    from tensorboard.backend.event_processing import event_accumulator  # only `report` needs it
    events = event_accumulator.EventAccumulator(path, size_guidance={"scalars": 0})
    events.Reload()
    start = events.FirstEventTimestamp()
    if "charts/episodic_return" not in events.Tags()["scalars"]:
        return [], [], []
    scalars = events.Scalars("charts/episodic_return")
    return ([s.step for s in scalars], [s.wall_time - start for s in scalars],
            [s.value for s in scalars])


def write_run_folder(events, folder, pair, seed, global_steps):
    """CleanRL's run as a run folder of ours: episodes.csv from its episodic returns (the
    seconds counted from its event file's opening, its run's start), summary.json (no
    evaluation: CleanRL's scripts do not evaluate unless they save the model) and config.json."""
    steps, seconds, returns = read_events(events)
    os.makedirs(folder, exist_ok=True)
    with open(os.path.join(folder, "episodes.csv"), "w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(["global_step", "wall_time", "episode_return", "episode_length"])
        writer.writerows([step, round(second, 3), value, ""]
                         for step, second, value in zip(steps, seconds, returns))
    summary = {"algorithm": pair.cleanrl_task.script, "env_id": pair.ours.env_id, "seed": seed,
               "global_steps": global_steps, "wall_time_s": round(seconds[-1], 3),
               "eval_return_mean": None}
    with open(os.path.join(folder, "summary.json"), "w") as f:
        json.dump(summary, f)
    with open(os.path.join(folder, "config.json"), "w") as f:
        json.dump({"env_id": pair.ours.env_id, "seed": seed, "cleanrl_commit": CLEANRL_COMMIT,
                   "events": os.path.relpath(events, folder)}, f)


def run(args):
    os.environ["OMP_NUM_THREADS"] = "1"  # CleanRL's torch then uses one thread, as ours does
    for seed in args.seeds:
        for name in args.pairs:
            pair = PAIRS[name]
            print(f"{time.strftime('%H:%M:%S')} seed {seed}: {pair.ours.script}.py beside "
                  f"CleanRL's {pair.cleanrl} on {pair.ours.env_id} "
                  f"(load {os.getloadavg()[0]:.1f})", flush=True)
            load_before = round(os.getloadavg()[0], 1)
            with ThreadPoolExecutor(2) as pool:
                ours = pool.submit(benchmark.run_one, pair.ours, seed, args.out)
                theirs = pool.submit(run_cleanrl, pair, seed, args.out, args.cleanrl_python)
                times = {pair.ours.name: ours.result()["process_s"],
                         pair.cleanrl_task.name: theirs.result()}
            for task_name, process_s in times.items():
                os.makedirs(os.path.join(args.out, "runs", task_name), exist_ok=True)
                with open(os.path.join(args.out, "runs", task_name, f"seed{seed}.json"),
                          "w") as f:
                    json.dump({"process_s": process_s,
                               "load": [load_before, round(os.getloadavg()[0], 1)]}, f)


def read_side(task, seeds, out):
    """benchmark.read_run's figures of each seed, with the whole process's seconds and the
    load before and after it, as `run` kept them."""
    runs = []
    for seed in seeds:
        with open(os.path.join(out, "runs", task.name, f"seed{seed}.json")) as f:
            kept = json.load(f)
        runs.append({"seed": seed, "process_s": kept["process_s"], "load": kept["load"],
                     **benchmark.read_run(task, os.path.join(out, "runs", task.name,
                                                             f"seed{seed}"))})
    return runs


def command(args, pair):
    """The command that made the pair's runs, for results.md's row."""
    return (f"python benchmarks/cleanrl_compare.py run --pairs {pair.name} --seeds "
            f"{' '.join(str(s) for s in args.seeds)}")


def report(args):
    os.makedirs(args.results, exist_ok=True)  # a folder of its own, as for a variant's rows
    with benchmark.locked_results(args.results) as results:
        for name in args.pairs:
            pair = PAIRS[name]
            sides = {}
            for task in (pair.ours, pair.cleanrl_task):
                runs = read_side(task, args.seeds, args.out)
                results[task.name] = {"script": task.script, "env_id": task.env_id,
                                      "label": task.label, "window": task.window,
                                      "threshold": task.threshold, "goal": task.goal,
                                      "jobs": 2, "date": time.strftime("%Y-%m-%d"),
                                      "load": [min(r["load"][0] for r in runs),
                                               max(r["load"][1] for r in runs)],
                                      "command": command(args, pair), "runs": runs}
                sides[task.name] = runs
                benchmark.plot_task(task, runs, args.results)  # the figure results.md links
            print(notes_row(pair, sides[pair.ours.name], sides[pair.cleanrl_task.name]))
        benchmark.write_results(results, args.results)
    draw(args)
    print(f"wrote results.json and results.md in {args.results}, and {args.figure}")


NOTES_HEADER = ("| pair | environment | budget | seeds | ours at the budget ({window}-episode mean) "
                "| CleanRL's | ours steps to {threshold:g} | CleanRL's | ours s to {threshold:g} "
                "| CleanRL's | ours process s | CleanRL's | ratio | our eval |\n"
                "|" + " --- |" * 14)
"""the head of the "Beside CleanRL" table (results.md's notes, the site's benchmarks page)"""


def notes_table(results, pairs=None):
    """The "Beside CleanRL" tables of every pair (or of `pairs`, names) whose two sides
    results.json holds: one table for each window and threshold, which its head names
    (CartPole's pairs share one); None where no pair is measured."""
    measured = [PAIRS[name] for name in (pairs or PAIRS) if PAIRS[name].ours.name in results
                and PAIRS[name].cleanrl_task.name in results]
    if not measured:
        return None
    groups = {}
    for pair in measured:
        groups.setdefault((pair.ours.window, pair.ours.threshold), []).append(pair)
    return "\n\n".join(
        "\n".join([NOTES_HEADER.format(window=window, threshold=threshold)]
                  + [notes_row(pair, results[pair.ours.name]["runs"],
                               results[pair.cleanrl_task.name]["runs"]) for pair in group])
        for (window, threshold), group in groups.items())


def notes_row(pair, ours, theirs):
    """The pair's row of results.md's "Beside CleanRL" table: the window mean at the budget,
    the steps and the seconds (of each run's own clock) to the threshold, the whole process
    and its ratio, ours first, as median [min, max] over seeds; the per-seed ratio pairs each
    seed's two processes."""
    spread = benchmark.spread
    ratios = [o["process_s"] / t["process_s"] for o, t in zip(ours, theirs)]
    cells = [f"{pair.ours.script}.py / CleanRL {pair.cleanrl}", pair.ours.env_id,
             f"{budget(pair):,}", str(len(ours)),
             *(spread([r["final_train_mean"] for r in side], "{:.1f}") for side in (ours, theirs)),
             *(spread([r["solve_step"] for r in side]) for side in (ours, theirs)),
             *(spread([r["solve_s"] for r in side], "{:.1f}") for side in (ours, theirs)),
             *(spread([r["process_s"] for r in side], "{:.1f}") for side in (ours, theirs)),
             spread(ratios, "{:.2f}"), spread([r["eval_return"] for r in ours], "{:.1f}")]
    return "| " + " | ".join(cells) + " |"


def draw(args):
    """One row per pair: the moving mean of the training returns (the task's window) against
    steps and against seconds of each run's own clock, the median over seeds (the tables'
    measure) with the min-max band, ours and CleanRL's."""
    fig = Figure(figsize=(12, 4.2 * len(args.pairs)), dpi=100)
    for row, name in enumerate(args.pairs):
        pair = PAIRS[name]
        for col, (x, xlabel) in enumerate((("global_step", "environment steps"),
                                           ("wall_time", "seconds since the run started"))):
            ax = fig.add_subplot(len(args.pairs), 2, 2 * row + col + 1)
            for task, label in ((pair.ours, f"{pair.ours.script}.py ({pair.said})"),
                                (pair.cleanrl_task, f"CleanRL {pair.cleanrl} (its defaults)")):
                curves = [plot.run_curve(plot.read_run(os.path.join(
                    args.out, "runs", task.name, f"seed{seed}", folder)), x, task.window)
                    for seed in args.seeds for folder in newest(args.out, task, seed)]
                plot.draw_group(ax, curves, label, seeds=args.seeds, center="median")
            ax.axhline(pair.ours.threshold, color="gray", ls="--", lw=1,
                       label=f"threshold {pair.ours.threshold:g}")
            plot.finish_axis(ax, f"{pair.ours.env_id}, {budget(pair):,} steps: training\n"
                             "median over seeds, min-max shaded", xlabel,
                             f"mean of the last {pair.ours.window} episode returns")
    fig.tight_layout()
    fig.savefig(args.figure)


def newest(out, task, seed):
    """The newest run folder of a task's seed (as benchmark.read_run reads it), in a list."""
    folder = os.path.join(out, "runs", task.name, f"seed{seed}")
    return [max(os.listdir(folder), key=lambda d: os.path.getmtime(os.path.join(folder, d)))]


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("command", choices=["run", "report"])
    p.add_argument("--pairs", nargs="+", choices=list(PAIRS), default=list(PAIRS)[:2])
    p.add_argument("--seeds", type=int, nargs="+", default=[101, 102, 103])
    p.add_argument("--out", default=os.path.join(ROOT, "benchmarks", "runs", "cleanrl"),
                   help="the folder of the runs (run) or to read (report)")
    p.add_argument("--cleanrl-python", default=CLEANRL_PYTHON,
                   help="the Python of the environment with CleanRL's pinned packages (run)")
    p.add_argument("--results", default=os.path.join(ROOT, "benchmarks"),
                   help="the folder of the results.json and results.md to add the pairs' rows "
                        "to (report)")
    p.add_argument("--figure", default=os.path.join(ROOT, "benchmarks", "vs-cleanrl.png"))
    args = p.parse_args()
    # CleanRL's processes run in their own folder: a relative interpreter path would miss
    args.cleanrl_python = os.path.abspath(args.cleanrl_python)
    if args.command == "run":
        needed = [os.path.join(CLEANRL, "cleanrl", PAIRS[name].cleanrl) for name in args.pairs]
        missing = [path for path in needed + [args.cleanrl_python] if not os.path.exists(path)]
        if missing:
            p.error(f"{missing[0]} is missing: clone CleanRL and make its environment as "
                    "this file's docstring says")
    else:
        needed = [os.path.join(args.out, "runs", task.name, f"seed{seed}.json")
                  for name in args.pairs for seed in args.seeds
                  for task in (PAIRS[name].ours, PAIRS[name].cleanrl_task)]
        missing = [path for path in needed if not os.path.exists(path)]
        if missing:
            p.error(f"{missing[0]} is missing: `run` writes it ({len(missing)} of "
                    f"{len(needed)} runs missing)")
    run(args) if args.command == "run" else report(args)


if __name__ == "__main__":
    main()

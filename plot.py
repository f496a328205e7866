# From plainrl (MIT licence, (c) 2026 the plainrl authors): keep this line in a copy.
"""Compare runs on one figure: the training return of each group of runs, the mean over its
seeds with the min-max band, and the greedy evaluations where the runs wrote them.

plot.py is a tool, not an algorithm script: it trains nothing and reads only the run folders
that every script writes (plainrl's CONTRIBUTING.md, "What a run writes"). A run draws no
figure of its own: its closing line ends with this tool's command for its curve.

Run:
    python plot.py runs/CartPole-v1__ppo__1__1767225600    # one run, as its closing line says
    python plot.py runs/CartPole-v1__ppo__* runs/CartPole-v1__dqn__*
    python plot.py 'runs/sweep/*' --group-by gae_lambda --out lambda.png
    python plot.py 'runs/Pendulum-v1__*' --x wall_time --window 50
    python plot.py 'runs/sweep/*' --include-unfinished     # while the sweep still runs
    python plot.py --help

What it does:
- Each argument is a run folder or a glob pattern, expanded here too (so a quoted pattern
  works in any shell). A folder that is not a run (no config.json or no episodes.csv) is
  skipped, all of them named in one warning line; a run folder without a finished training
  episode (an --eval-checkpoint run) is left out, with a note.
- Runs are grouped by environment (`env_id` in config.json), then by experiment name
  (`exp_name`), or with `--group-by FLAG` by that flag's value (a sweep over `gae_lambda`),
  and within those by every other flag that changes what is learned: runs that differ in
  any flag of config.json outside NOT_TASK_FLAGS (seed, where and how the run was written,
  evaluated or played) are never averaged together (`--hide-obs 1 3` against none). Where
  one name then covers several groups, the label adds the flags that tell them apart
  (`ppo_lstm hide_obs=[1, 3]`, `ppo_lstm hide_obs=[]`).
- Runs that did not finish are left out of the average: those whose summary.json says
  "interrupted" (Ctrl-C, a non-finite loss) and those without summary.json (killed, or still
  running). One line names them; `--include-unfinished` averages them in, and the legend and
  the table then count them ("3 seeds, 1 unfinished").
- A group's legend and table row count its runs and their distinct seeds ("2 seeds", or "2
  runs, 1 seed" for two runs of seed 1).
- Each run's episode returns (episodes.csv) are smoothed by a trailing moving mean of
  `--window` episodes (fewer at the start) and plotted against environment steps, or with
  `--x wall_time` against seconds since training started.
- The seeds of a group are put on a common grid of 500 evenly spaced steps, from the group's
  first finished episode to its last. Each seed is interpolated linearly between its own
  points and counts only inside its own range (never extrapolated), so the mean and the
  min-max band at a step are over the seeds that reached it. The mean is solid where every
  seed of the group is present, dotted where only some are (say, seeds that --stop-at-return
  stopped early).
- Where a run folder has evaluations.csv (written with --eval-every), the k-th evaluations of
  the group's seeds make one point: at the mean of their steps, the mean over seeds of
  eval_return_mean, with a bar from the lowest seed to the highest. The final evaluations
  after training (summary.json's eval_return_mean) make one diamond the same way, at the
  runs' last step.
- One figure (one panel per environment) goes to `--out`, by default
  `plots/<env ids>__by-<flag>.png` (plots/ in the current folder; the repository's
  .gitignore keeps it out of git); a table with each group's number of runs and of seeds,
  how many of them hold (summary.json's holds: the last-20 mean where training ended at or
  above the threshold; "3 of 5") and the median over its runs of summary.json's figures,
  where training ended first, is printed, each to one decimal or two
  significant digits, whichever shows more (0.74 stays 0.74); a median over only k of the n
  runs (solved_at_step is null where --stop-at-return did not stop the run, a killed run
  averaged in with --include-unfinished has no summary.json) is marked (k/n), and "-" where
  no run has the figure.

Bad input (no run folder matched, no folder that is a run, no run that finished without
--include-unfinished, an unknown --group-by flag) is one line, `plot.py: error: ...`, and
exit status 2 (plainrl's CONTRIBUTING.md, "Bad input").
"""

# ---------------------------------------------------------------------------------------
# Imports
# ---------------------------------------------------------------------------------------
import csv
import difflib
import glob
import json
import math
import os
import sys
from dataclasses import dataclass, field
from typing import Annotated, Literal

import numpy as np
import tyro
from matplotlib.backend_bases import FigureCanvasBase
from matplotlib.figure import Figure

SCRIPT = "plot.py"


# ---------------------------------------------------------------------------------------
# Flags
# ---------------------------------------------------------------------------------------
@dataclass
class Args:
    # The run folder's flags (--output-dir, --save-model, --eval-checkpoint, --track, ...)
    # come after these: every script shares them, declared once in RunFlags below the banner.
    runs: Annotated[list[str], tyro.conf.Positional,
                    tyro.conf.arg(metavar="RUN ...", help_behavior_hint="")] = field(
        default_factory=list)
    """run folders or glob patterns, e.g. runs/CartPole-v1__ppo__*"""
    group_by: str = "exp_name"
    """the flag (a key of config.json) whose value makes a group within each environment"""
    x: Literal["global_step", "wall_time"] = "global_step"
    """horizontal axis: environment steps, or seconds since training started"""
    window: int = 20
    """episodes in the trailing moving mean of the training return"""
    out: Annotated[str, tyro.conf.arg(metavar="PATH", help_behavior_hint="")] = ""
    """the figure to write (default: plots/<env ids>__by-<group-by>.png)"""
    # Interrupted: by Ctrl-C or a non-finite loss; without summary.json: killed, or still running.
    include_unfinished: bool = False
    """also average unfinished runs (interrupted, or without summary.json); else left out, named"""


SUMMARY_FIGURES = {"train_return_last20": 1, "eval_return_mean": 1, "solved_at_step": 0,
                   "wall_time_s": 1, "global_steps": 0}
"""the figures of summary.json in the table, with their decimals (more where a value needs
them for two significant digits: see format_figure)"""

NOT_TASK_FLAGS = {
    "seed",  # the runs of a group are its seeds
    "exp_name",  # the group's name (the default --group-by)
    "output_dir", "cuda", "device", "versions",  # where and on what the run went
    "eval_episodes", "eval_every", "eval_checkpoint", "capture_video",  # what is measured
    "save_model", "save_demos_every", "log_interval",  # what is written, and how often
    "stop_at_return", "stop_window",  # when the run stops; up to there it is the same run
    "num_workers", "backend", "ray_address",  # es.py: the same generations whoever plays them
}
"""the keys of config.json that do not change what a run learns; runs that differ in any
other key (an algorithm flag, the budget, --hide-obs, ...) go into different groups"""

GRID_POINTS = 500
"""points of the common grid on which a group's seeds are put together"""


# ---------------------------------------------------------------------------------------
# Curves: smoothing, the band over seeds, the evaluation points
# ---------------------------------------------------------------------------------------
def moving_mean(values, window):
    """Trailing moving mean: out[i] = mean(values[max(0, i - window + 1) : i + 1]), the mean of
    the last `window` values (of all of them while fewer have come). values: (E,) -> (E,)."""
    sums = np.cumsum(np.concatenate([[0.0], np.asarray(values, dtype=float)]))
    i = np.arange(1, len(values) + 1)
    start = np.maximum(0, i - window)
    return (sums[i] - sums[start]) / (i - start)


def band(curves, grid, center="mean"):
    """Mean (or median, center="median"), min and max over seeds of piecewise-linear curves
    put on a common grid.

    curves: one (x, y) per seed, x non-decreasing (say episode ends and smoothed returns);
    grid: (G,). Each seed is interpolated linearly between its own points and is missing
    outside [x[0], x[-1]]: never extrapolated. Where a seed has several points at one x
    (episodes of a vector of environments that ended at the same step), the last one counts.
    Returns (center, low, high, count), each (G,): over the seeds present at each grid point;
    NaN where no seed is (count 0).
    """
    grid = np.asarray(grid, dtype=float)
    values = np.full((len(curves), len(grid)), np.nan)
    for i, (x, y) in enumerate(curves):
        x, y = np.asarray(x, dtype=float), np.asarray(y, dtype=float)
        last = np.append(x[1:] != x[:-1], True)
        x, y = x[last], y[last]
        inside = (grid >= x[0]) & (grid <= x[-1])
        values[i, inside] = np.interp(grid[inside], x, y)
    count = np.sum(~np.isnan(values), axis=0)
    mean, low, high = (np.full(len(grid), np.nan) for _ in range(3))
    some = count > 0
    mean[some] = (np.nanmedian if center == "median" else np.nanmean)(values[:, some], axis=0)
    low[some] = np.nanmin(values[:, some], axis=0)
    high[some] = np.nanmax(values[:, some], axis=0)
    return mean, low, high, count


def evaluation_points(tables, x="global_step"):
    """The evaluations of several seeds put together: the k-th rows of every seed's
    evaluations.csv make point k. tables: one {column: (K_seed,) array} per seed.
    Returns (x, mean, low, high), each (K,) with K the most rows a seed has: the mean over
    the seeds with a k-th row of their `x` column, and the mean, min and max of their
    eval_return_mean."""
    points = []
    for k in range(max(len(t["eval_return_mean"]) for t in tables)):
        rows = [t for t in tables if len(t["eval_return_mean"]) > k]
        returns = [t["eval_return_mean"][k] for t in rows]
        points.append((np.mean([t[x][k] for t in rows]), np.mean(returns), min(returns),
                       max(returns)))
    return tuple(np.array(column) for column in zip(*points))


def final_point(runs, x="global_step"):
    """The final greedy evaluations of a group's runs (summary.json's eval_return_mean, made
    after the last update) as one point: at the mean of their last step (global_steps; with
    --x wall_time, wall_time_s), the mean over the runs with their min and max. Returns
    (x, mean, low, high), each of one element, or None where no run has one."""
    key = "global_steps" if x == "global_step" else "wall_time_s"
    finals = [(r["summary"][key], r["summary"]["eval_return_mean"]) for r in runs
              if r["summary"] and r["summary"].get("eval_return_mean") is not None]
    if not finals:
        return None
    at, returns = zip(*finals)
    return tuple(np.array([v]) for v in (np.mean(at), np.mean(returns), min(returns),
                                         max(returns)))


def run_curve(run, x, window):
    """One run's smoothed training return: (its episodes' `x` column, moving mean of the
    episode returns over `window` episodes)."""
    episodes = run["episodes"]
    return episodes[x], moving_mean(episodes["episode_return"], window)


# ---------------------------------------------------------------------------------------
# Groups and the table
# ---------------------------------------------------------------------------------------
def task_flags(run, flag):
    """The run's flags that change what it learns, other than env_id and `flag`:
    {key: value as JSON text}."""
    return {key: json.dumps(value, sort_keys=True) for key, value in run["config"].items()
            if key not in NOT_TASK_FLAGS and key not in ("env_id", flag)}


def group_runs(runs, flag):
    """{(env_id, label): [runs]}: the runs of each environment split by the value of `flag`
    in their config.json, and by every flag that changes what is learned (task_flags). The
    label is the value for exp_name, `flag=value` for any other flag; where one label stands
    for several groups of an environment, each adds ` key=value` for the flags in which
    those groups differ. Sorted by environment, then by value (numbers as numbers); groups
    of one value keep the order in which their first runs came."""
    def order(item):
        (env_id, _), runs = item
        value = runs[0]["config"][flag]
        number = isinstance(value, (int, float)) and not isinstance(value, bool)
        return env_id, not number, value if number else str(value)

    split = {}
    for run in runs:
        value = run["config"][flag]
        label = str(value) if flag == "exp_name" else f"{flag}={value}"
        key = (run["config"]["env_id"], label, tuple(sorted(task_flags(run, flag).items())))
        split.setdefault(key, []).append(run)
    groups = {}
    for (env_id, label, _), members in split.items():
        rivals = [task_flags(m[0], flag) for (e, l, _), m in split.items()
                  if (e, l) == (env_id, label)]
        own = task_flags(members[0], flag)
        differ = sorted(k for k in set().union(*rivals) if len({r.get(k) for r in rivals}) > 1)
        extra = "".join(f" {k}={members[0]['config'][k]}" for k in differ if k in own)
        groups[env_id, label + extra] = members
    return dict(sorted(groups.items(), key=order))


def count_runs(seeds, unfinished=0):
    """'3 seeds' when each run has its own seed, else '2 runs, 1 seed'; then ', 1 unfinished'
    where that many of the runs did not finish (--include-unfinished)."""
    distinct = len(set(seeds))
    text = f"{distinct} seed{'s' * (distinct != 1)}"
    text = text if distinct == len(seeds) else f"{len(seeds)} runs, {text}"
    return text + (f", {unfinished} unfinished" if unfinished else "")


def why_unfinished(run):
    """Why a run did not finish ("interrupted", "no summary.json: ..."), or None where it did:
    summary.json's "interrupted" is true after Ctrl-C or a non-finite loss, and a run that
    was killed (or is still running) has not written summary.json."""
    if run["summary"] is None:
        return "no summary.json: killed, or still running"
    return "interrupted" if run["summary"].get("interrupted") else None


def format_figure(value, decimals):
    """The value to `decimals` decimals or, for a figure with decimals, to as many as two
    significant digits need: 0.74 -> '0.74' (not '0.7'), 0.0312 -> '0.031', 7.88 -> '7.9',
    475.26 -> '475.3'."""
    if decimals and value != 0 and math.isfinite(value):
        decimals = max(decimals, 1 - math.floor(math.log10(abs(value))))
    return f"{value:.{decimals}f}"


def medians(runs):
    """{figure: (median over the runs that have it or None, how many have it)} for each of
    SUMMARY_FIGURES; a figure is missing where it is null (solved_at_step of a run that
    --stop-at-return did not stop) or where the run has no summary.json (it died)."""
    result = {}
    for name in SUMMARY_FIGURES:
        values = [r["summary"][name] for r in runs
                  if r["summary"] and r["summary"].get(name) is not None]
        result[name] = (float(np.median(values)) if values else None, len(values))
    return result


def count_holds(runs):
    """'k of n': of the n runs whose summary.json says whether they hold (a threshold, 20
    episodes, a finished budget), the k whose last-20 mean at the end is at or above it;
    '-' where none says."""
    said = [r["summary"]["holds"] for r in runs
            if r["summary"] and r["summary"].get("holds") is not None]
    return f"{sum(said)} of {len(said)}" if said else "-"


def format_table(groups):
    """The printed table: a row per group, its number of runs (and how many of them did not
    finish, with --include-unfinished) and of distinct seeds, how many hold at the end, and
    the medians; a median over only k of the n runs says (k/n), none at all is '-'."""
    header = ["environment", "group", "runs", "seeds", "holds", *SUMMARY_FIGURES]
    rows = [header]
    for (env_id, label), runs in groups.items():
        left = count_unfinished(runs)
        cells = [env_id, label, f"{len(runs)}" + (f" ({left} unfinished)" if left else ""),
                 str(len(set(seeds_of(runs)))), count_holds(runs)]
        for name, (value, have) in medians(runs).items():
            text = "-" if value is None else format_figure(value, SUMMARY_FIGURES[name])
            cells.append(text + (f" ({have}/{len(runs)})" if value is not None
                                 and have < len(runs) else ""))
        rows.append(cells)
    widths = [max(len(row[i]) for row in rows) for i in range(len(header))]
    return "\n".join("  ".join(cell.ljust(w) for cell, w in zip(row, widths)).rstrip()
                     for row in rows)


# ---------------------------------------------------------------------------------------
# Drawing (benchmark.py draws its comparison figures with draw_group and finish_axis too)
# ---------------------------------------------------------------------------------------
def draw_group(ax, curves, label, color=None, evaluations=None, seeds=None, unfinished=0,
               center="mean", final=None):
    """One group on the axis: the mean (or median, center) over seeds of `curves` (one (x, y)
    per seed) as a line and the min-max band shaded, on a grid of GRID_POINTS from the first
    x of any seed to the last. The line is solid where every seed is present, dotted where
    only some are (a seed stopped early by --stop-at-return, or its first episode ended
    later), so that a seed dropping out does not pass for learning. `evaluations` (x, mean,
    low, high), if given, are drawn as points with min-max bars, and so is `final`, the final
    evaluation after training, as a diamond. `seeds`, the runs' seeds
    (one per curve; default: all different), are counted in the legend, and so are the
    `unfinished` runs among them. Returns the solid line."""
    grid = np.linspace(min(x[0] for x, _ in curves), max(x[-1] for x, _ in curves),
                       GRID_POINTS)
    mean, low, high, count = band(curves, grid, center)
    partial = count < len(curves)
    near_partial = partial | np.append(partial[1:], False) | np.insert(partial[:-1], 0, False)
    counted = count_runs(range(len(curves)) if seeds is None else seeds, unfinished)
    (line,) = ax.plot(grid, np.where(partial, np.nan, mean), lw=1.5, color=color,
                      label=f"{label} ({counted})")
    ax.plot(grid, np.where(near_partial, mean, np.nan), lw=1, ls=":", color=line.get_color())
    ax.fill_between(grid, low, high, color=line.get_color(), alpha=0.2, lw=0)
    if evaluations is not None:
        ex, em, el, eh = evaluations
        ax.errorbar(ex, em, yerr=[em - el, eh - em], fmt="o", ms=4, capsize=3,
                    color=line.get_color(), label=f"{label}: greedy evaluation")
    if final is not None:
        fx, fm, fl, fh = final
        ax.errorbar(fx, fm, yerr=[fm - fl, fh - fm], fmt="D", ms=6, capsize=3,
                    color=line.get_color(), label=f"{label}: final greedy evaluation")
    return line


def finish_axis(ax, title, xlabel, ylabel):
    """Title, labels, a light grid and the legend."""
    ax.set(title=title, xlabel=xlabel, ylabel=ylabel)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7, loc="best")


def draw_figure(groups, x, window):
    """The figure: one panel per environment (three to a row), each group in one color
    (the same in every panel)."""
    env_ids = list(dict.fromkeys(env_id for env_id, _ in groups))
    labels = list(dict.fromkeys(label for _, label in groups))
    cols, rows = min(len(env_ids), 3), math.ceil(len(env_ids) / 3)
    fig = Figure(figsize=(6.4 * cols, 4.2 * rows), dpi=100)
    for i, env_id in enumerate(env_ids):
        ax = fig.add_subplot(rows, cols, i + 1)
        for (group_env, label), runs in groups.items():
            if group_env != env_id:
                continue
            tables = [run["evaluations"] for run in runs if run["evaluations"]]
            draw_group(ax, [run_curve(run, x, window) for run in runs], label,
                       color=f"C{labels.index(label) % 10}",
                       evaluations=evaluation_points(tables, x) if tables else None,
                       seeds=seeds_of(runs),
                       unfinished=count_unfinished(runs), final=final_point(runs, x))
        finish_axis(ax, f"{env_id}: mean over seeds, min-max shaded",
                    "environment steps" if x == "global_step" else
                    "seconds since training started",
                    f"episode return, moving mean of {window}")
    fig.tight_layout()
    return fig


# ---------------------------------------------------------------------------------------
# main
# ---------------------------------------------------------------------------------------
def main(args: Args) -> dict:
    """Check, read the runs, group, draw, print the table. Returns {(env_id, label): runs}."""
    if args.window < 1:
        fail(f"--window must be at least 1 (got {args.window})")
    runs = leave_out_unfinished(load_runs(args.runs), args.include_unfinished)
    flag = check_group_by(args.group_by, runs)
    out = args.out or default_out(runs, flag)
    if os.path.splitext(out)[1][1:].lower() not in FigureCanvasBase.get_supported_filetypes():
        fail(f"--out {out}: give a file name ending in .png (or .pdf, .svg)")
    groups = group_runs(runs, flag)
    fig = draw_figure(groups, args.x, args.window)
    os.makedirs(os.path.dirname(os.path.abspath(out)), exist_ok=True)
    fig.savefig(out)
    print(format_table(groups))
    print(f"{SCRIPT}: wrote {out}")
    return groups


# ---------------------------------------------------------------------------------------
# Plumbing: finding and reading run folders, checks
# ---------------------------------------------------------------------------------------
class UsageError(Exception):
    """Bad input: reported as one line on stderr with exit status 2."""


def fail(message):
    raise UsageError(message)


def expand(patterns):
    """The folders the arguments name, in order, each once: a glob pattern is expanded
    (sorted); a pattern or path that matches nothing is bad input."""
    if not patterns:
        fail("give run folders or glob patterns, e.g. python plot.py 'runs/CartPole-v1__*'")
    folders = []
    for pattern in patterns:
        matches = sorted(glob.glob(pattern))
        if not matches:
            fail(f"no run folder matches {pattern}")
        folders += [m for m in matches if m not in folders]
    return folders


def read_table(path, columns):
    """A CSV file as {column: float array}; the columns named must be there."""
    with open(path, newline="") as f:
        reader = csv.DictReader(f)
        missing = [c for c in columns if c not in (reader.fieldnames or [])]
        if missing:
            fail(f"{path} has no column {', '.join(missing)}: not a file written by this "
                 "repository's scripts")
        rows = list(reader)
    try:
        return {c: np.array([float(r[c]) for r in rows]) for c in columns}
    except (TypeError, ValueError):
        fail(f"{path} has a row that is not numbers (a run killed while writing it?)")


def read_json(path):
    try:
        with open(path) as f:
            return json.load(f)
    except (OSError, ValueError) as e:
        fail(f"cannot read {path}: {e}")


def not_a_run(folder):
    """Why a folder is not a run folder ("has no config.json"), or None where it is one."""
    for name in ("config.json", "episodes.csv"):
        if not os.path.isfile(os.path.join(folder, name)):
            return f"has no {name}"
    return None


def read_run(folder):
    """A run folder as {"folder", "config", "episodes", "evaluations", "summary"}:
    evaluations is None without evaluations.csv (or with no row), summary None without
    summary.json (a run that was killed)."""
    config = read_json(os.path.join(folder, "config.json"))
    if not isinstance(config, dict) or "env_id" not in config:
        fail(f"{folder}/config.json has no env_id: not a run folder of this repository")
    episodes = read_table(os.path.join(folder, "episodes.csv"),
                          ["global_step", "wall_time", "episode_return"])
    evaluations = None
    path = os.path.join(folder, "evaluations.csv")
    if os.path.isfile(path):
        evaluations = read_table(path, ["global_step", "wall_time", "eval_return_mean"])
        evaluations = evaluations if len(evaluations["global_step"]) else None
    path = os.path.join(folder, "summary.json")
    summary = read_json(path) if os.path.isfile(path) else None
    return {"folder": folder, "config": config, "episodes": episodes,
            "evaluations": evaluations, "summary": summary}


def load_runs(patterns):
    """Every run the arguments name. Folders that are not runs (a figure or a notes folder
    that `runs/*` also matches) are skipped, all named in one warning line; none but them is
    bad input. A run without a finished episode (an --eval-checkpoint run, or one stopped
    before its first episode ended) has no curve: it is left out, with a note."""
    folders = expand(patterns)
    skipped = {folder: not_a_run(folder) for folder in folders if not_a_run(folder)}
    if len(skipped) == len(folders):
        folder, why = next(iter(skipped.items()))
        fail(f"{folder} {why}: give run folders, the folders a script writes under "
             "--output-dir (runs/<env_id>__<exp_name>__<seed>__<time>)")
    if skipped:
        print(f"{SCRIPT}: warning: skipped {len(skipped)} folder"
              f"{'s' * (len(skipped) > 1)} that {'are' if len(skipped) > 1 else 'is'} not a "
              f"run: {', '.join(f'{f} ({why})' for f, why in skipped.items())}",
              file=sys.stderr)
    runs = []
    for folder in folders:
        if folder in skipped:
            continue
        run = read_run(folder)
        if len(run["episodes"]["episode_return"]):
            runs.append(run)
        else:
            print(f"{SCRIPT}: left out {folder}: no finished training episode")
    if not runs:
        fail("none of the run folders has a finished training episode")
    return runs


def leave_out_unfinished(runs, include):
    """The runs to average: all with `include` (--include-unfinished), else those that
    finished, after one line naming the others and why; none left is bad input."""
    left = {run["folder"]: why_unfinished(run) for run in runs if why_unfinished(run)}
    if include or not left:
        return runs
    if len(left) == len(runs):
        fail(f"none of the runs finished ({', '.join(sorted(set(left.values())))}): "
             "add --include-unfinished to draw them")
    print(f"{SCRIPT}: left out {len(left)} run{'s' * (len(left) > 1)} that did not finish "
          f"(add --include-unfinished to average {'them' if len(left) > 1 else 'it'} in): "
          + ", ".join(f"{folder} ({why})" for folder, why in left.items()))
    return [run for run in runs if run["folder"] not in left]


def check_group_by(group_by, runs):
    """The flag as config.json spells it (gae-lambda and --gae-lambda become gae_lambda);
    every run must have it."""
    flag = group_by.lstrip("-").replace("-", "_")
    lacking = [run["folder"] for run in runs if flag not in run["config"]]
    if len(lacking) == len(runs):
        known = sorted({key for run in runs for key in run["config"]})
        close = difflib.get_close_matches(flag, known, n=3)
        fail(f"unknown --group-by flag {group_by}: " + (
            f"did you mean {', '.join(close)}?" if close else
            f"the runs' config.json has {', '.join(known)}"))
    if lacking:
        fail(f"--group-by {group_by}: {lacking[0]} has no flag {flag} (a run of another "
             "script?); give only runs that have it")
    return flag


def default_out(runs, flag):
    """plots/<env ids>__by-<flag>.png ("/" and ":" of an id become "-")."""
    env_ids = sorted({run["config"]["env_id"] for run in runs})
    name = "+".join(e.replace("/", "-").replace(":", "-") for e in env_ids)
    return os.path.join("plots", f"{name}__by-{flag}.png")


def seeds_of(runs):
    """The runs' seeds (config.json's seed; a run without one counts as a seed of its own)."""
    return [run["config"].get("seed", run["folder"]) for run in runs]


def count_unfinished(runs):
    """How many of the runs did not finish (why_unfinished)."""
    return sum(why_unfinished(run) is not None for run in runs)


if __name__ == "__main__":
    try:
        main(tyro.cli(Args))
    except UsageError as e:
        print(f"{SCRIPT}: error: {e}", file=sys.stderr)
        sys.exit(2)

# From plainrl (MIT licence, (c) 2026 the plainrl authors): keep this line in a copy.
"""Tune an algorithm script's flags on your own environment: Optuna's TPE sampler proposes
values for the flags you name, each trial runs the script over several seeds, and the study
is kept in a SQLite file, so that Ctrl-C loses nothing and the same command goes on.

tune.py is a tool, not an algorithm script, as CleanRL's cleanrl_utils/tuner.py is: it
trains nothing itself. Each trial runs the script's own command once per seed, each a
process of its own, up to --jobs at a time:

    python <script> --env-id <env> --seed <s> --no-cuda <fixed flags> <the trial's flags>
        --output-dir <study folder>/trial-<n>

(--no-cuda where the script has --cuda: the runs share the machine; a fixed --cuda overrides
it) and reads the objective from each run's summary.json (plainrl's CONTRIBUTING.md, "What a
run writes"): by default train_return_last20, the mean of the last 20 training episode
returns when the budget ran out, or with --objective eval_return_mean the greedy evaluation
after training. The seeds' values make the trial's value, maximized, by --aggregate:

- worst (the default): the lowest seed's value. A default flag setting must hold on every
  seed a user runs, not reach a threshold once on a lucky seed: a setting whose worst seed
  ends at 500 beats one whose seeds end at 500, 500 and 120, though the second's mean may be
  higher. The end of the budget counts, not the best moment: a run that reaches its
  threshold and loses it again is not what a user wants (summary.json's holds says the same).
- iqm: the interquartile mean, rliable's metrics.aggregate_iqm (Agarwal et al. 2021): the
  mean of the middle half of the seeds' values (scipy's trim_mean with 25% cut at each end;
  with fewer than 4 seeds it cuts nothing and is the mean), robust to one odd seed.

Each seed's value is a user attribute of the trial ("seed 3"), the trial's flags another
("flags"); `optuna-dashboard sqlite:///tune/dqn-CartPole-v1.db` shows them, if you have it.

Run:
    python tune.py dqn.py --env-id CartPole-v1 --param learning-rate=log:1e-4:1e-2 \\
        --param batch-size=int:32:256 --param double-dqn=cat:true,false --seeds 1 2 3 \\
        --jobs 3 --trials 30 -- --total-timesteps 100000
    python tune.py qlearning.py --env-id FrozenLake-v1 --param learning-rate=float:0.05:0.9 \\
        --param gamma=float:0.9:0.999 --aggregate iqm --trials 20 -- --total-timesteps 20000
    python tune.py --help

--param NAME=KIND:... names a flag of the script (as on its command line, without --) and
its range; give --param once per flag:

    NAME=float:LOW:HIGH     a number, uniform in [LOW, HIGH]
    NAME=log:LOW:HIGH       a number, uniform in log(value): learning rates (LOW > 0)
    NAME=int:LOW:HIGH       a whole number in [LOW, HIGH], uniform
    NAME=logint:LOW:HIGH    a whole number, uniform in log(value): sizes (LOW > 0)
    NAME=cat:A,B,...        one of the values; a switch (--double-dqn / --no-double-dqn) takes
                            cat:true,false

A number flag takes float, log, int or logint; a whole-number flag only int or logint.
Numbers are given to the script to 4 significant digits (more where the range needs them),
so the command printed for the best trial is the one that ran. Everything after `--` is
given to every run as it is (the budget, --eval-episodes 0, --norm-obs, ...): the fixed
flags.

The study lives in a SQLite file, --study (default tune/<script>-<env>.db); the runs go to the
folder of the same name (tune/dqn-CartPole-v1/trial-<n>/, with each seed's output in
seed-<s>.out and seed-<s>.err). Each trial prints a line: its number of --trials, its flags,
each seed's value, the aggregate, the best so far and the time. Ctrl-C stops the runs of the
trial under way (each writes its run folder, as after a Ctrl-C of its own), marks that trial
failed and exits with status 130 after a line saying how to resume: the same command.
Trials that completed count toward --trials; a failed one does not. A study is resumed
only with the settings it was made with (script, environment, params, fixed flags, seeds,
objective, aggregate), which the file keeps; --trials, --jobs and --tpe-seed may change. At
the end (and when nothing is left to run) it prints the best trial's command line, ready to
paste, and its seeds' values.

--ray ADDRESS runs each trial's seeds as tasks of a Ray cluster (each run's folder and output
come back here), the study still in its SQLite file on this machine, or with --storage URL in
a database several drivers share, --study then naming it there (docs/guide/cluster.md).

A run that fails (an exit status other than 0, a non-finite loss, no value) fails its trial
with the last line of the run's stderr; three failed trials in a row stop the study (exit
status 1). Bad input (a script that is not one of plainrl's algorithm scripts, a flag the
script does not have, a range that is empty or does not fit its flag, fixed flags the
script refuses, a study made with other settings, no seeds, --jobs or --trials below 1) is
one line, `tune.py: error: ...`, and exit status 2, before any run.
"""

# ---------------------------------------------------------------------------------------
# Imports
# ---------------------------------------------------------------------------------------
import ast
import contextlib
import dataclasses
import difflib
import importlib
import io
import json
import math
import os
import shlex
import signal
import subprocess
import sys
import time
import typing
from dataclasses import dataclass, field
from typing import Annotated, Literal

import numpy as np
import optuna
import tyro

SCRIPT = "tune.py"
ROOT = os.path.dirname(os.path.abspath(__file__))


# ---------------------------------------------------------------------------------------
# Flags
# ---------------------------------------------------------------------------------------
@dataclass
class Args:
    # The run folder's flags (--output-dir, --save-model, --eval-checkpoint, --track, ...)
    # come after these: every script shares them, declared once in RunFlags below the banner.
    script: Annotated[str, tyro.conf.Positional, tyro.conf.arg(metavar="SCRIPT")]
    """the algorithm script to tune, e.g. dqn.py"""
    env_id: Annotated[str, tyro.conf.arg(help_behavior_hint="")] = ""
    """the environment to tune on (default: the script's own --env-id default)"""
    param: Annotated[list[str], tyro.conf.UseAppendAction,
                     tyro.conf.arg(metavar="NAME=KIND:...")] = field(default_factory=list)
    """a flag to tune: NAME=float:LOW:HIGH, log:LOW:HIGH, int:LOW:HIGH, logint:LOW:HIGH, cat:A,B"""
    seeds: list[int] = field(default_factory=lambda: [1, 2, 3, 4, 5])
    """the seeds each trial runs (defaults are chosen on seeds 1-5: CONTRIBUTING.md)"""
    jobs: int = os.cpu_count() or 1
    """runs at once (each a process)"""
    trials: int = 30
    """completed trials the study should hold; a resumed study counts those it has"""
    objective: Literal["train_return_last20", "eval_return_mean"] = "train_return_last20"
    """the figure of each run's summary.json to maximize"""
    aggregate: Literal["worst", "iqm"] = "worst"
    """over seeds: the lowest value, or the interquartile mean (rliable)"""
    study: Annotated[str, tyro.conf.arg(metavar="PATH", help_behavior_hint="")] = ""
    """the study's SQLite file (default: tune/<script>-<env>.db); runs go to its folder"""
    tpe_seed: int = 0
    """seeds the TPE sampler (plus the trials the study holds, so a resume draws anew)"""
    # docs/guide/cluster.md
    ray: Annotated[str, tyro.conf.arg(metavar="ADDRESS", help_behavior_hint="")] = ""
    """run each trial's seeds on the Ray cluster at ADDRESS (host:6379; auto: `ray start`'s here)"""
    storage: Annotated[str, tyro.conf.arg(metavar="URL", help_behavior_hint="")] = ""
    """an Optuna storage several drivers share (postgresql://...), the study named --study in it"""


DESCRIPTION = ("Tune a plainrl script's flags with Optuna's TPE sampler over several seeds; "
               "the flags after -- are given to every run as they are. Example: python tune.py "
               "dqn.py --env-id CartPole-v1 --param learning-rate=log:1e-4:1e-2 --seeds 1 2 3 "
               "-- --total-timesteps 100000")

KINDS = ("float", "log", "int", "logint", "cat")
"""the kinds of --param range"""

TOOLS = ("plot.py", "benchmark.py", "tune.py", "exercises.py")
"""the repository's tools: files with the first line of plainrl's scripts that train nothing"""

SET_BY_TUNE = ("env_id", "seed", "output_dir", "eval_checkpoint")
"""flags that tune.py gives each run itself (--env-id is its own flag), or that train nothing"""

FIRST_LINE = "# From plainrl (MIT licence"

SIGNIFICANT = 4
"""significant digits of a number given to a run (more where the range needs them)"""

FAILED_IN_A_ROW = 3
"""failed trials in a row that stop the study: the flags, not the values, are at fault"""

STOP_WAIT_S = 30
"""seconds a run may take to write its folder after Ctrl-C before it is killed"""


# ---------------------------------------------------------------------------------------
# Ranges, values and the objective
# ---------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Param:
    """One --param: the flag's name as on the command line (learning-rate), the kind of
    range, its bounds (float and log: floats; int and logint: ints; cat: None) and the
    values of a cat (else ())."""
    name: str
    kind: str
    low: float = None
    high: float = None
    choices: tuple = ()
    spec: str = field(default="", compare=False)
    """the spec as given, for messages"""

    @property
    def field(self):
        """The name of the Args field (learning_rate)."""
        return self.name.replace("-", "_")

    def __str__(self):
        """The spec, written back: learning-rate=log:0.0001:0.01, loss=cat:mse,huber."""
        if self.kind == "cat":
            return f"{self.name}=cat:{','.join(self.choices)}"
        return f"{self.name}={self.kind}:{self.low!r}:{self.high!r}"


def parse_param(spec):
    """A --param spec, NAME=KIND:LOW:HIGH or NAME=cat:A,B,..., as a Param. Bad input (one
    line through fail): no NAME=, an unknown kind, bounds that are not numbers (whole numbers
    for int and logint), an empty range (LOW >= HIGH), a log range with LOW <= 0, a cat
    without values or with one twice."""
    name, equals, rest = spec.partition("=")
    name = name.strip().lstrip("-")
    kind, _, values = rest.partition(":")
    if not equals or not name or not rest:
        fail(f"--param {spec}: write NAME=KIND:LOW:HIGH or NAME=cat:A,B,... "
             "(e.g. learning-rate=log:1e-4:1e-2)")
    if kind not in KINDS:
        close = difflib.get_close_matches(kind, KINDS, n=1)
        fail(f"--param {spec}: unknown kind {kind!r}" +
             (f"; did you mean {close[0]}?" if close else f"; use one of {', '.join(KINDS)}"))
    if kind == "cat":
        choices = tuple(values.split(","))
        if not values or "" in choices:
            fail(f"--param {spec}: cat needs values, A,B,... (none may be empty)")
        if len(set(choices)) < len(choices):
            fail(f"--param {spec}: a value is given twice")
        return Param(name, kind, choices=choices, spec=spec)
    bounds = values.split(":")
    if len(bounds) != 2:
        fail(f"--param {spec}: {kind} takes two bounds, {name}={kind}:LOW:HIGH")
    number = int if kind in ("int", "logint") else float
    try:
        low, high = (number(b) for b in bounds)
    except ValueError:
        fail(f"--param {spec}: the bounds of {kind} must be "
             f"{'whole numbers' if number is int else 'numbers'}, not {values!r}")
    if not (math.isfinite(low) and math.isfinite(high)):
        fail(f"--param {spec}: the bounds must be finite")
    if low >= high:
        fail(f"--param {spec}: an empty range: LOW ({bounds[0]}) must be below HIGH "
             f"({bounds[1]})")
    if kind in ("log", "logint") and low <= 0:
        fail(f"--param {spec}: a {kind} range needs LOW above 0 (the log of {bounds[0]} is "
             "not a number); use float or int")
    return Param(name, kind, low, high, spec=spec)


def format_value(param, value):
    """The text a run is given for a value of param: a whole number as it is; a number to
    SIGNIFICANT digits, more where fewer would round it out of [low, high]
    (gamma=float:0.9:0.9999 keeps 0.99991 as 0.9999, not 1); a cat's value as it is."""
    if param.kind == "cat":
        return value
    if param.kind in ("int", "logint"):
        return str(int(value))
    for digits in range(SIGNIFICANT, 18):
        text = f"{value:.{digits}g}"
        if param.low <= float(text) <= param.high:
            return text
    return repr(float(value))


def suggest(trial, param):
    """The trial's value of param, as the text a run is given: Optuna's suggest_float
    (log=True for log), suggest_int (log=True for logint) or suggest_categorical, under the
    flag's name; TPE picks it from the trials before."""
    if param.kind in ("float", "log"):
        value = trial.suggest_float(param.name, param.low, param.high, log=param.kind == "log")
    elif param.kind in ("int", "logint"):
        value = trial.suggest_int(param.name, param.low, param.high, log=param.kind == "logint")
    else:
        value = trial.suggest_categorical(param.name, list(param.choices))
    return format_value(param, value)


def aggregate(values, how):
    """The trial's value from its seeds' values (a list): "worst", the minimum (a default
    must hold on every seed); "iqm", the interquartile mean, rliable's aggregate_iqm, which
    is scipy's trim_mean(values, 0.25): the mean of the values left after the lowest and
    highest floor(n / 4) are cut."""
    if how == "worst":
        return float(min(values))
    # rliable, the field's statistics (Agarwal et al. 2021) as benchmark.py uses them, imports
    # scipy.stats (most of a second), which only --aggregate iqm needs
    from rliable import metrics
    return float(metrics.aggregate_iqm(np.asarray(values, dtype=float).reshape(-1, 1)))


def read_value(summary, objective, seed):
    """The objective's value in a run's summary.json (a dict); a run that stopped early (a
    non-finite loss: "interrupted") or has no value raises TrialFailed."""
    if summary.get("interrupted"):
        raise TrialFailed(f"seed {seed} stopped early (a non-finite loss: see its "
                          "summary.json and seed-*.out)")
    value = summary.get(objective)
    if value is None:
        why = ("no training episode ended within --total-timesteps"
               if objective == "train_return_last20" else "it ran no evaluation")
        raise TrialFailed(f"seed {seed}'s summary.json has no {objective} ({why})")
    return float(value)


# ---------------------------------------------------------------------------------------
# Command lines
# ---------------------------------------------------------------------------------------
def flag_words(param, text, switch):
    """The words that give a run param's value: ["--learning-rate", "0.0004214"], or for a
    switch (a bool flag) ["--double-dqn"] for true and ["--no-double-dqn"] for false."""
    if switch:
        return [f"--{param.name}" if text == "true" else f"--no-{param.name}"]
    return [f"--{param.name}", text]


def run_command(script, env_id, seed, fixed, flags, output_dir, cuda):
    """One run of a trial, as argv: python <the script's path> --env-id <env> --seed <seed>,
    --no-cuda where the script has a device (cuda: True), the fixed flags, the trial's flag
    words, --output-dir. The trial's flags come after the fixed ones, which come after
    --no-cuda: where a flag is given twice the script takes the last."""
    return [sys.executable, os.path.join(ROOT, script), "--env-id", env_id, "--seed",
            str(seed), *(["--no-cuda"] if cuda else []), *fixed, *flags,
            "--output-dir", output_dir]


def best_command(script, env_id, fixed, flags):
    """The best trial's settings as a command line to paste: python dqn.py --env-id
    CartPole-v1 <fixed flags> <the trial's flags>, quoted for a POSIX shell."""
    return "python " + shlex.join([script, "--env-id", env_id, *fixed, *flags])


def progress_line(done, trials, trial, flags, values, value, best, seconds, total_seconds,
                  how):
    """A trial's line: trial 3 of 30 (trial-2): --learning-rate 0.0004 | seed 1: 500, seed 2:
    431.2 | worst 431.2 | best 455 (trial-1) | 12.3 s, 40.1 s in all."""
    seeds = ", ".join(f"seed {s}: {v:.4g}" for s, v in values.items())
    return (f"trial {done} of {trials} (trial-{trial}): {shlex.join(flags) or '(no flags)'} | "
            f"{seeds} | {how} {value:.4g} | best {best[0]:.4g} (trial-{best[1]}) | "
            f"{seconds:.1f} s, {total_seconds:.1f} s in all")


# ---------------------------------------------------------------------------------------
# Running a trial: its seeds in parallel processes
# ---------------------------------------------------------------------------------------
class TrialFailed(Exception):
    """A run of the trial failed: the message says which seed and why."""


def last_line(path):
    """The last line of a file that is not blank ("" where there is none)."""
    try:
        with open(path, errors="replace") as f:
            lines = [line.strip() for line in f if line.strip()]
    except OSError:
        return ""
    return lines[-1] if lines else ""


def stop(processes):
    """Ctrl-C each process still running (it writes its run folder and exits), then kill
    those that have not exited after STOP_WAIT_S seconds."""
    for process in processes:
        if process.poll() is None:
            process.send_signal(signal.SIGINT)
    deadline = time.time() + STOP_WAIT_S
    for process in processes:
        try:
            process.wait(timeout=max(0.1, deadline - time.time()))
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def run_folder_of(folder, seed, before):
    """The run folder that the run of seed wrote into folder: the new one (not in before)
    named <env>__<exp_name>__<seed>__<time>."""
    new = [name for name in sorted(os.listdir(folder)) if name not in before
           and os.path.isdir(os.path.join(folder, name))
           and name.rsplit("__", 2)[1:2] == [str(seed)]]
    if not new:
        raise TrialFailed(f"seed {seed} wrote no run folder into {folder}")
    return os.path.join(folder, new[-1])


def read_values(seeds, folder, before, objective):
    """{seed: the objective's value} read from each seed's own run folder in folder
    (run_folder_of), in the order of seeds; a missing or bad summary.json raises TrialFailed."""
    values = {}
    for seed in seeds:
        path = os.path.join(run_folder_of(folder, seed, before), "summary.json")
        try:
            with open(path) as f:
                summary = json.load(f)
        except (OSError, ValueError) as e:
            raise TrialFailed(f"seed {seed}: cannot read {path}: {e}")
        values[seed] = read_value(summary, objective, seed)
    return values


def take_result(seed, result, folder, write):
    """A cluster run's result (node_function's dict) kept in folder: its console output as
    seed-<s>.out and .err, then its files (write) -- unless it exited with a status other
    than 0, which fails the trial (TrialFailed) even when it sent back files, as run_seeds."""
    for kind in ("out", "err"):
        with open(os.path.join(folder, f"seed-{seed}.{kind}"), "w") as f:
            f.write(result[f"std{kind}"])
    if result["returncode"] != 0:
        line = last_line(os.path.join(folder, f"seed-{seed}.err"))
        raise TrialFailed(f"seed {seed} exited with status {result['returncode']} on "
                          f"{result['host']}: {line or '(nothing on stderr)'}")
    write(result, folder)


def run_seeds(commands, folder, jobs, objective):
    """Run the commands ({seed: argv}) as processes, at most jobs at a time, each writing
    its output to folder/seed-<s>.out and .err; returns {seed: the objective's value} in
    the order of commands. A run that exits with a status other than 0 stops the others and
    raises TrialFailed with the last line of its stderr. On Ctrl-C (KeyboardInterrupt) the
    runs are stopped (stop) before it goes on up."""
    os.makedirs(folder, exist_ok=True)
    before = set(os.listdir(folder))
    waiting, running, files = list(commands.items()), {}, []
    try:
        while waiting or running:
            while waiting and len(running) < jobs:
                seed, argv = waiting.pop(0)
                out, err = (open(os.path.join(folder, f"seed-{seed}.{k}"), "w")
                            for k in ("out", "err"))
                files += [out, err]
                # a session of its own: a Ctrl-C at the terminal reaches tune.py alone, which
                # passes it on once (stop); the run then writes its folder undisturbed
                running[seed] = subprocess.Popen(argv, stdout=out, stderr=err,
                                                 stdin=subprocess.DEVNULL,
                                                 start_new_session=True)
            for seed, process in list(running.items()):
                if process.poll() is None:
                    continue
                del running[seed]
                if process.returncode != 0:
                    line = last_line(os.path.join(folder, f"seed-{seed}.err"))
                    raise TrialFailed(f"seed {seed} exited with status {process.returncode}: "
                                      f"{line or '(nothing on stderr)'}")
            time.sleep(0.05)
    finally:
        stop(list(running.values()))
        for f in files:
            f.close()
    return read_values(commands, folder, before, objective)


def join_cluster(plan, address):
    """Join the Ray cluster at --ray (benchmark.py's join_ray: one line where nobody answers,
    and the repository's scripts sent to its nodes) and check that each of its nodes has
    the packages the script and environment need (benchmark.py's check_cluster), before any
    run; returns what run_seeds_on_ray needs: Ray, the function each run is on a node, the
    CPUs a run asks for. benchmark.py (and Ray) are imported only with --ray."""
    import benchmark
    task = benchmark.Task(plan["script"][:-3], plan["env_id"], 0.0, "", list(plan["fixed"]),
                          torch=plan["cuda"])
    ray = benchmark.join_ray(address, fail)
    try:
        benchmark.check_cluster(ray, [task], fail)
    except BaseException:
        ray.shutdown()
        raise
    return {"ray": ray, "run": ray.remote(max_retries=benchmark.RAY_RETRIES)(
        benchmark.node_function()), "cores": benchmark.cores(task), "write": benchmark.write_run,
            "retries": benchmark.RAY_RETRIES}


def run_seeds_on_ray(commands, folder, cluster, objective):
    """run_seeds on a Ray cluster (join_cluster): each seed's command a Ray task asking for the
    CPUs the script uses, all at once; each run's folder, console output (seed-<s>.out and
    .err) and value come back to folder here, as run_seeds writes them. A run whose node dies
    is started again (benchmark.py's RAY_RETRIES) and then fails its trial, as does one that
    exits with a status other than 0. On Ctrl-C the runs are cancelled, their folders lost."""
    ray = cluster["ray"]
    os.makedirs(folder, exist_ok=True)
    before = set(os.listdir(folder))
    pending = {}  # seed: its Ray task's ref, until its result is in
    for seed, argv in commands.items():  # [python, path, flags..., --output-dir, folder]
        words = [os.path.basename(argv[1]), *argv[2:-2]]
        pending[seed] = cluster["run"].options(num_cpus=cluster["cores"]).remote(
            words, {"PLAINRL_CURVE": os.environ.get("PLAINRL_CURVE", "1")})
    try:
        for seed in list(commands):
            # a task that has ended (a result or an error) drops its ref: Ray then neither
            # runs it again to rebuild a result lost with its node (lineage reconstruction)
            # nor is asked to cancel it; one cut short by Ctrl-C stays pending (cancelled)
            try:
                result = ray.get(pending[seed])
            except ray.exceptions.RayError as e:
                del pending[seed]
                raise TrialFailed(f"seed {seed}: its Ray node or worker died "
                                  f"{1 + cluster['retries']} times, the last: "
                                  f"{(str(e).strip().splitlines() or [type(e).__name__])[0]}")
            del pending[seed]
            take_result(seed, result, folder, cluster["write"])
    finally:  # after a failure or Ctrl-C: the runs still going are stopped; a finished one
        # is never cancelled (Ray's driver aborts on "Tried to complete task that was not
        # pending" when a finished or retried task is force-cancelled as its node goes)
        if pending:
            going = ray.wait(list(pending.values()), num_returns=len(pending), timeout=0)[1]
            for ref in going:
                ray.cancel(ref, force=True)
    return read_values(commands, folder, before, objective)


# ---------------------------------------------------------------------------------------
# main
# ---------------------------------------------------------------------------------------
def main(args: Args, fixed: list) -> optuna.Study:
    """Check everything, open (or resume) the study, run trials until --trials completed,
    print the best. Returns the study."""
    plan = check(args, fixed)
    optuna.logging.set_verbosity(optuna.logging.WARNING)  # our line per trial, not its INFO
    study = open_study(plan)
    if args.ray and completed(study) < args.trials:  # docs/guide/cluster.md: the study
        # stays here, the runs go to the cluster
        plan["ray"] = join_cluster(plan, args.ray)
        try:
            return run_study(study, plan, args)
        finally:
            plan["ray"]["ray"].shutdown()
    return run_study(study, plan, args)


def run_study(study, plan, args):
    """Trials until --trials completed, the best printed; returns the study."""
    study.sampler = optuna.samplers.TPESampler(seed=args.tpe_seed + len(study.trials))
    done = completed(study)
    if done >= args.trials:
        print(f"{SCRIPT}: {plan['path']} holds {done} completed trials (--trials "
              f"{args.trials}): nothing to run")
    elif done:
        print(f"{SCRIPT}: resuming {plan['path']}: {done} of {args.trials} trials done")
    start, failed, trial, told = time.time(), 0, None, True
    try:
        while done < args.trials:
            trial, told, began = study.ask(), False, time.time()
            try:
                flags, values = run_trial(trial, plan, args)
            except TrialFailed as e:
                trial.set_user_attr("error", str(e))
                study.tell(trial, state=optuna.trial.TrialState.FAIL)
                told, failed = True, failed + 1
                print(f"trial-{trial.number} failed: {shlex.join(trial.user_attrs['flags'])} "
                      f"| {e}", flush=True)
                if failed >= FAILED_IN_A_ROW:
                    print(f"{SCRIPT}: {failed} trials failed in a row; stopping (the last: "
                          f"{e})", file=sys.stderr)
                    sys.exit(1)
                continue
            value = aggregate(list(values.values()), args.aggregate)
            study.tell(trial, value)
            done, failed, told = done + 1, 0, True
            best = study.best_trial
            print(progress_line(done, args.trials, trial.number, flags, values, value,
                                (best.value, best.number), time.time() - began,
                                time.time() - start, args.aggregate), flush=True)
    except KeyboardInterrupt:
        if not told:
            trial.set_user_attr("interrupted", True)
            study.tell(trial, state=optuna.trial.TrialState.FAIL)
        marked = "" if told else f" trial-{trial.number} is marked failed,"
        print(f"{SCRIPT}: interrupted:{marked} {completed(study)} completed trials are kept "
              f"in {plan['path']}; the same command resumes: python "
              f"{shlex.join([SCRIPT, *sys.argv[1:]])}", file=sys.stderr, flush=True)
        raise
    print_best(study, plan)
    return study


def run_trial(trial, plan, args):
    """One trial: its values drawn (kept as its user attribute "flags"), its seeds run in
    <study folder>/trial-<number>, each seed's value kept as a user attribute ("seed 3").
    Returns (the flag words, {seed: value}); a run that fails raises TrialFailed."""
    flags = []
    for param in plan["params"]:
        flags += flag_words(param, suggest(trial, param), param.field in plan["switches"])
    trial.set_user_attr("flags", flags)
    folder = os.path.join(plan["folder"], f"trial-{trial.number}")
    commands = {seed: run_command(plan["script"], plan["env_id"], seed, plan["fixed"], flags,
                                  folder, plan["cuda"]) for seed in args.seeds}
    if plan.get("ray"):  # the seeds on the cluster, not --jobs processes here
        values = run_seeds_on_ray(commands, folder, plan["ray"], args.objective)
    else:
        values = run_seeds(commands, folder, args.jobs, args.objective)
    for seed, value in values.items():
        trial.set_user_attr(f"seed {seed}", value)
    return flags, values


def completed(study):
    """The study's completed trials (failed and interrupted ones do not count)."""
    return len(study.get_trials(deepcopy=False, states=(optuna.trial.TrialState.COMPLETE,)))


def print_best(study, plan):
    """The best trial's command line, ready to paste, and its seeds' values."""
    if not completed(study):
        print(f"{SCRIPT}: no trial of {plan['path']} completed")
        return
    best = study.best_trial
    seeds = ", ".join(f"seed {s}: {best.user_attrs[f'seed {s}']:.4g}" for s in plan["seeds"])
    print(f"best: trial-{best.number}, {plan['aggregate']} {best.value:.4g} ({seeds}), "
          f"runs in {os.path.join(plan['folder'], f'trial-{best.number}')}")
    print(best_command(plan["script"], plan["env_id"], plan["fixed"], best.user_attrs["flags"]))


# ---------------------------------------------------------------------------------------
# Plumbing: the checks, the study file, the command line
# ---------------------------------------------------------------------------------------
class UsageError(Exception):
    """Bad input: reported as one line on stderr with exit status 2."""


def fail(message):
    raise UsageError(message)


def algorithm_scripts():
    """The algorithm scripts of the repository: the .py files beside tune.py whose first line
    is plainrl's and that define a class Args, the tools left out."""
    found = []
    for name in sorted(os.listdir(ROOT)):
        path = os.path.join(ROOT, name)
        if name.endswith(".py") and name not in TOOLS and is_ours(path):
            found.append(name)
    return found


def is_ours(path):
    """Whether a file starts with plainrl's first line and defines a class Args (read, not
    imported)."""
    try:
        with open(path, encoding="utf-8") as f:
            source = f.read()
        tree = ast.parse(source)
    except (OSError, SyntaxError, UnicodeDecodeError, ValueError):
        return False
    return source.startswith(FIRST_LINE) and any(
        isinstance(node, ast.ClassDef) and node.name == "Args" for node in tree.body)


def check_script(script):
    """The script's file name (dqn.py) where it is one of the repository's algorithm
    scripts: a file beside tune.py (dqn.py, ./dqn.py, dqn or its full path)."""
    name = os.path.basename(script)
    name = name if name.endswith(".py") else name + ".py"
    path = os.path.join(ROOT, name)
    if os.path.dirname(script) and os.path.abspath(script) != path:
        fail(f"{script} is not in {ROOT}: tune.py tunes the algorithm scripts beside it")
    if name in TOOLS:
        fail(f"{name} is a tool, not an algorithm script: give one of "
             f"{', '.join(algorithm_scripts())}")
    if not os.path.isfile(path) or not is_ours(path):
        close = difflib.get_close_matches(name, algorithm_scripts(), n=1)
        fail(f"{script} is not one of plainrl's algorithm scripts (a file beside tune.py "
             f"starting {FIRST_LINE!r}... with an Args dataclass)" +
             (f"; did you mean {close[0]}?" if close else ""))
    return name


def flag_name(word, hints):
    """The Args field a command-line flag names (--learning-rate and --learning-rate=3e-4:
    learning_rate; --no-double-dqn: double_dqn, a switch), or None for another word."""
    if not word.startswith("--"):
        return None
    name = word[2:].partition("=")[0].replace("-", "_")
    if name.startswith("no_") and name not in hints and hints.get(name[3:]) is bool:
        return name[3:]
    return name


def unknown_flag(what, name, hints):
    """Fail for a flag the script does not have, naming the closest flags."""
    flags = [f"--{n.replace('_', '-')}" for n in hints]
    close = difflib.get_close_matches(f"--{name.replace('_', '-')}", flags, n=2)
    fail(f"{what}: the script has no flag --{name.replace('_', '-')}" +
         (f"; did you mean {' or '.join(close)}?" if close else ""))


def check_type(param, hint):
    """Whether param's range fits its flag's type (Optional unwrapped): a number flag takes
    any number range or a cat of numbers, a whole-number flag int, logint or a cat of whole
    numbers, a switch cat:true,false (or one of them), a text or choice flag a cat (of its
    choices)."""
    args = [a for a in typing.get_args(hint) if a is not type(None)]
    if typing.get_origin(hint) is typing.Union and len(args) == 1:
        hint = args[0]
    flag = f"--{param.name}"
    if hint is bool:
        if param.kind != "cat" or not set(param.choices) <= {"true", "false"}:
            fail(f"--param {param.spec}: {flag} is a switch; tune it with "
                 f"{param.name}=cat:true,false")
    elif hint is int:
        if param.kind in ("float", "log"):
            fail(f"--param {param.spec}: {flag} takes whole numbers; use {param.name}=int:... or "
                 "logint:...")
        if param.kind == "cat" and not all(c.lstrip("-").isdigit() for c in param.choices):
            fail(f"--param {param.spec}: {flag} takes whole numbers")
    elif hint is float:
        if param.kind == "cat":
            for c in param.choices:
                try:
                    float(c)
                except ValueError:
                    fail(f"--param {param.spec}: {flag} takes numbers, not {c!r}")
    elif typing.get_origin(hint) is Literal:
        choices = [str(c) for c in typing.get_args(hint)]
        if param.kind != "cat" or not set(param.choices) <= set(choices):
            fail(f"--param {param.spec}: {flag} takes one of {', '.join(choices)}; write "
                 f"{param.name}=cat:{','.join(choices)} or some of them")
    elif hint is str:
        if param.kind != "cat":
            fail(f"--param {param.spec}: {flag} takes text; tune it with cat:A,B,...")
    else:
        fail(f"--param {param.spec}: {flag} ({getattr(hint, '__name__', hint)}) cannot be tuned by "
             "tune.py; give it after -- as a fixed flag")


def parse_with(module, script, words, what):
    """The script's Args from words, parsed by the script's own parser and checked by its
    own prepare (the environment made, the preset's flags filled, every check; its device
    line kept quiet); a refusal (its one line) is bad input here, prefixed by what."""
    old = sys.argv
    sys.argv = [script, *words]
    try:
        args = module.parse_args()
        with contextlib.redirect_stdout(io.StringIO()):
            module.prepare(args)
        return args
    except module.UsageError as e:
        fail(f"{what}: {script} says: {e}")
    except SystemExit:  # --help among the fixed flags
        fail(f"{what}: {script} {shlex.join(words)} does not start a run")
    finally:
        sys.argv = old


def check(args, fixed):
    """Every check before any run (bad input: fail); returns the plan: the script, the
    environment, the params, the fixed flags, the switches, whether the script has --cuda,
    the study's file, URL and folder, and the settings the study keeps."""
    if not args.seeds:
        fail("--seeds is empty: give the seeds each trial runs, e.g. --seeds 1 2 3")
    if len(set(args.seeds)) < len(args.seeds):
        fail(f"--seeds {' '.join(map(str, args.seeds))}: a seed is given twice")
    for flag in ("jobs", "trials"):
        if getattr(args, flag) < 1:
            fail(f"--{flag} must be at least 1, got {getattr(args, flag)}")
    if not args.param:
        fail("give at least one --param NAME=KIND:..., e.g. --param learning-rate=log:1e-4:1e-2")
    script = check_script(args.script)
    params = [parse_param(spec) for spec in args.param]
    module = importlib.import_module(script[:-3])  # importing a script builds nothing
    hints = typing.get_type_hints(module.Args)
    for word in fixed:
        name = flag_name(word, hints)
        if name is not None and name not in hints:
            unknown_flag(f"the fixed flag {word}", name, hints)
        if name in SET_BY_TUNE:
            fail(f"the fixed flag {word}: tune.py sets --{name.replace('_', '-')} itself" +
                 (" (give --env-id before --)" if name == "env_id" else ""))
    seen = set()
    for param in params:
        if param.field not in hints:
            unknown_flag(f"--param {param.spec}", param.field, hints)
        if param.field in SET_BY_TUNE:
            fail(f"--param {param.spec}: tune.py sets --{param.name} itself")
        if param.field in seen:
            fail(f"--param {param.spec}: --{param.name} is given twice")
        if param.field in {flag_name(w, hints) for w in fixed}:
            fail(f"--param {param.spec}: --{param.name} is a fixed flag too (after --); drop one")
        seen.add(param.field)
        check_type(param, hints[param.field])
    base = (["--env-id", args.env_id] if args.env_id else []) + list(fixed)
    parsed = parse_with(module, script, base, "the fixed flags")
    switches = {p.field for p in params if hints[p.field] is bool}
    for param in params:  # each bound and value, the others at their defaults
        tries = param.choices if param.kind == "cat" else (param.low, param.high)
        for value in tries:
            words = flag_words(param, format_value(param, value), param.field in switches)
            parse_with(module, script, base + words, f"--param {param.spec}")
    if args.objective == "eval_return_mean" and not parsed.eval_episodes:
        fail("--objective eval_return_mean needs evaluation episodes; drop --eval-episodes 0")
    env_id = parsed.env_id
    path = args.study or os.path.join(
        "tune", f"{script[:-3]}-{env_id.replace('/', '-').replace(':', '-')}.db")
    if args.storage:  # --study names the study in the shared storage; runs go to tune/<name>/
        name = args.study or os.path.splitext(os.path.basename(path))[0]
        if "://" not in args.storage:
            fail(f"--storage {args.storage}: give an Optuna storage URL, e.g. "
                 "postgresql://user:password@host/tune (a file here: --study PATH)")
        keep = {"script": script, "env_id": env_id, "params": sorted(str(p) for p in params),
                "fixed": list(fixed), "seeds": list(args.seeds), "objective": args.objective,
                "aggregate": args.aggregate}
        return {**keep, "params": params, "switches": switches, "cuda": "cuda" in hints,
                "path": f"study {name} of {args.storage}", "url": args.storage, "name": name,
                "folder": os.path.join("tune", name), "keep": keep}
    if os.path.isdir(path):
        fail(f"--study {path} is a folder; give the study's file, e.g. {path}/study.db")
    keep = {"script": script, "env_id": env_id, "params": sorted(str(p) for p in params),
            "fixed": list(fixed), "seeds": list(args.seeds), "objective": args.objective,
            "aggregate": args.aggregate}
    return {**keep, "params": params, "switches": switches, "cuda": "cuda" in hints,
            "path": path, "folder": os.path.splitext(path)[0], "keep": keep}


def open_study(plan):
    """The study in plan's SQLite file: made (and the settings it keeps written as its user
    attributes) where the file has none, else loaded; one made with other settings is bad
    input."""
    path = plan["path"]
    url = plan.get("url") or f"sqlite:///{os.path.abspath(path)}"
    if not plan.get("url") and not os.path.exists(path):
        os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    try:
        study = optuna.create_study(study_name=plan.get("name", "tune"), storage=url,
                                    direction="maximize", load_if_exists=True)
    except Exception as e:  # not a SQLite file, or one of another program
        fail(f"--study {path}: cannot open it as an Optuna study: {type(e).__name__}: "
             f"{str(e).splitlines()[0] if str(e) else ''}")
    kept = study.user_attrs
    if not kept:
        for key, value in plan["keep"].items():
            study.set_user_attr(key, value)
        return study
    for key, value in plan["keep"].items():
        if kept.get(key) != value:
            fail(f"--study {path} was made with {key} {json.dumps(kept.get(key))}, not "
                 f"{json.dumps(value)}: give the study's own settings to resume it, or "
                 "another --study")
    return study


def usage_error(event):
    """One line for a mistake in tune.py's own flags (tyro's parse-error hook)."""
    help_hint = f"(python {SCRIPT} --help lists the flags)"
    if isinstance(event, tyro._errors.UnrecognizedArgs):
        flags = [f"--{f.name.replace('_', '-')}" for f in dataclasses.fields(Args)]
        close = difflib.get_close_matches(event.tokens[0].partition("=")[0], flags, n=2)
        fail(f"unrecognized options: {' '.join(event.tokens)}" +
             (f"; did you mean {' or '.join(close)}?" if close else "") +
             " (the script's own flags go after --) " + help_hint)
    if isinstance(event, tyro._errors.MissingArgs):
        fail(f"give the script to tune, e.g. python {SCRIPT} dqn.py --param "
             f"learning-rate=log:1e-4:1e-2 {help_hint}")
    argument = getattr(event, "argument", None)
    flag = argument.display_name().split("/")[0] if argument is not None else "a flag"
    if isinstance(event, tyro._errors.InvalidChoice):
        fail(f"{flag} takes {' or '.join(event.choices)}, not {event.value!r} {help_hint}")
    fail(f"{flag}: cannot read its value {help_hint}")


def split_argv(argv):
    """(tune.py's own words, the fixed flags): the words before the first --, those after."""
    if "--" in argv:
        i = argv.index("--")
        return argv[:i], argv[i + 1:]
    return argv, []


def cli():
    """main from the command line. Bad input: one line, exit status 2. Ctrl-C: the trial
    under way marked failed, then the process dies of SIGINT (130), as the scripts do."""
    own, fixed = split_argv(sys.argv[1:])
    try:
        with tyro._errors.on_parse_error(usage_error):
            args = tyro.cli(Args, args=own, description=DESCRIPTION)
        main(args, fixed)
    except UsageError as e:
        print(f"{SCRIPT}: error: {e}", file=sys.stderr)
        sys.exit(2)
    except KeyboardInterrupt:
        signal.signal(signal.SIGINT, signal.SIG_DFL)
        os.kill(os.getpid(), signal.SIGINT)


if __name__ == "__main__":
    cli()

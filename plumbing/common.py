# The plumbing every script shares: checks, run folder, evaluation, checkpoints. This file is
# its one source: `python plumbing/stamp.py` writes it below the plumbing banner of every
# script, and tests/test_plumbing.py fails where a script's copy differs by one byte. Lines
# between "# [torch]" and "# [end]" are left out of qlearning.py's NumPy-only copy, lines
# between "# [numpy]" and "# [end]" are its alone. Everything else a script differs in is a
# named hook above its banner, which the block calls:
#
#   SCRIPT, Args                    the file's name; the algorithm's flags, to which Args below
#                                   adds RunFlags, those of the run folder every script has
#   check_flags(args)               the algorithm's own checks of its flags
#   check_spaces(args, obs_space, action_space)
#                                   whether the algorithm handles the spaces; returns what main needs
#   make_vector_env(env_id, num_envs, video_folder=None)
#                                   the environments (evaluation's: one per episode)
#   greedy_policy(models, envs)     act(obs, info) -> the evaluation's actions
#   MODEL_FLAGS                     the flags that shape the networks, read from a checkpoint
#   ENV_FLAGS (where a script has)  the flags make_vector_env takes beside the id (the
#                                   evaluation's environments get them too)
#   TENSORBOARD_NAMES               the algorithm's own diagnostics under CleanRL's names
#   GOALS (where a script has)      env id: (threshold, window, "train", "eval" or "gain",
#                                   budget), what a run is judged on (its benchmark task's and
#                                   README row's goal) and the steps the goal is for
#   measure(run, global_step, moment)  (optional) the script's own measures: RunWriter.measure
#                                   calls it at each --eval-every evaluation ("evaluation"),
#                                   after each update's row ("update") and where train asks
#                                   ("start", "end", ...); grpo.py's and rlhf.py's held-out ones

# The plumbing's own imports (the story's are at the top of the file)
import csv
import difflib
import glob
import importlib.util
import json
import math
import os
import random
import re
import signal
import sys
import time
import typing
import warnings
from dataclasses import asdict, dataclass, replace
from typing import Optional

import gymnasium as gym
import numpy as np
import tyro
# [torch]
import torch
from torch.utils.tensorboard import SummaryWriter
# [end]
# [numpy]
from tensorboard.compat.proto.event_pb2 import Event
from tensorboard.compat.proto.summary_pb2 import Summary
from tensorboard.plugins.text.metadata import create_summary_metadata
from tensorboard.summary.writer import event_file_writer
from tensorboard.util.tensor_util import make_tensor_proto
# [end]



@dataclass
class RunFlags:
    """The flags of the run folder that every script has, declared once: Args below adds them
    after the script's own, and --help lists them last."""
    output_dir: str = "runs"
    """where run folders go"""
    save_model: bool = False
    """write the model into the run folder (model.pt; a table's: model.npz)"""
    eval_checkpoint: Optional[str] = None
    """skip training: load this model.pt (or model.npz) and evaluate it"""
    capture_video: bool = False
    """record the evaluation episodes into videos/ in the run folder"""
    tensorboard: bool = True
    """write TensorBoard's event files into the run folder too (tensorboard --logdir runs)"""
    curve: bool = os.environ.get("PLAINRL_CURVE") != "0"
    """draw curve.png, the learning curve, into the run folder at the end of training"""
    track: bool = False
    """sync the run to Weights & Biases as CleanRL does (needs pip install wandb==0.31.0)"""
    wandb_project_name: str = "plainrl"
    """the Weights & Biases project of --track"""
    wandb_entity: Optional[str] = None
    """the Weights & Biases team or user of --track (None: your default entity)"""


@dataclass
class Args(RunFlags, Args):  # the script's Args first, RunFlags' after: the one Args all use
    pass


def family(obs_shape, continuous):
    """The environment's family, which picks a script's preset: "image" for an observation of
    three axes (height, width, channels), else "continuous" for Box actions, else "discrete"."""
    return "image" if len(obs_shape) == 3 else "continuous" if continuous else "discrete"


def fill_preset(args, family):
    """args with --preset the family unless it is given, and every flag left at None taken
    from PRESETS[preset] = (its source, {flag: value}): a flag given on the command line wins."""
    preset = args.preset or family
    flags = PRESETS[preset][1]
    return replace(args, preset=preset,
                   **{name: value for name, value in flags.items() if getattr(args, name) is None})


class UsageError(Exception):
    """Bad input: reported as one line on stderr with exit status 2, before training."""


def fail(message):
    raise UsageError(message)


def parse_args():
    """tyro.cli(Args), with a mistake on the command line (an unknown flag, a missing value,
    a value of the wrong type or not among the choices) as one whole line at any terminal
    width: tyro hands the mistake over as data through its parse-error hook (tyro._errors,
    marked experimental, which is one reason requirements.txt pins tyro), and usage_error
    words it. --help prints as tyro writes it."""
    with tyro._errors.on_parse_error(usage_error):
        return tyro.cli(Args)


def usage_error(event):
    """Raise UsageError with one line for a tyro parse error: the flag, what it takes, and
    what to write instead (the closest flags to an unknown one; 100000 for 1e5)."""
    types = typing.get_type_hints(Args)
    flags = [f"--{name.replace('_', '-')}" for name in types]
    flags += [f"--no-{name.replace('_', '-')}" for name, kind in types.items()
              if kind is bool and not name.startswith("no_")]  # not --no-no-mask
    help_hint = f"(python {SCRIPT} --help lists the flags)"
    if isinstance(event, tyro._errors.UnrecognizedArgs):
        close = difflib.get_close_matches(event.tokens[0].partition("=")[0], flags, n=2)
        also = f"; did you mean {' or '.join(close)}?" if close else ""
        fail(f"unrecognized options: {', '.join(event.tokens)}{also} {help_hint}")
    if getattr(event, "argument", None) is None:
        fail(f"cannot read the command line ({type(event).__name__}) {help_hint}")
    flag = event.argument.display_name().split("/")[0]
    if isinstance(event, tyro._errors.InvalidChoice):  # in the order the Literal gives them
        kind = types.get(flag[2:].replace("-", "_"))
        literal = [a for a in (kind, *typing.get_args(kind))
                   if typing.get_origin(a) is typing.Literal]
        choices = [str(c) for c in typing.get_args(literal[0])] if literal else event.choices
        fail(f"{flag} takes {' or '.join(choices)}, not {event.value!r} {help_hint}")
    words = sys.argv[1:]
    starts = [i for i, w in enumerate(words) if w.partition("=")[0] == flag]
    if not starts or isinstance(event, tyro._errors.BadValue):
        fail(f"{flag} needs a value {help_hint}")
    word, rest = words[starts[-1]], words[starts[-1] + 1:] + ["--"]  # the last time it is given
    given = ([word.partition("=")[2]] if "=" in word else  # a list flag takes several values
             rest[:next(j for j, w in enumerate(rest) if w.startswith("--"))]) or [""]
    kind = types[flag[2:].replace("-", "_")]
    whole = int in (kind, *typing.get_args(kind))

    def reads(value):  # as the flag's type would: int("2.5") fails, float("2.5") does not
        try:
            return (int if whole else float)(value) is not None
        except ValueError:
            return False
    wrong = next((value for value in given if not reads(value)), given[-1])
    try:
        instead = f": write {int(float(wrong))}" if whole and float(wrong).is_integer() else ""
    except ValueError:  # not a number at all
        instead = ""
    fail(f"{flag} takes {'a whole number' if whole else 'a number'}, not {wrong!r}"
         f"{instead} {help_hint}")


def check_args(args):
    """Everything a user can get wrong in the flags, before training: the algorithm's own
    checks (check_flags), then those of the flags every script has. A value the line names
    that the preset gave is said to be the preset's."""
    try:
        check_flags(args)
    except UsageError as e:
        preset = PRESETS[args.preset][1] if getattr(args, "preset", None) else {}
        named = [f"--{k.replace('_', '-')} {v}" for k, v in preset.items()
                 if f"--{k.replace('_', '-')} {v}" in str(e)]
        if not named:
            raise
        fail(f"{e} ({' and '.join(named)}: the {args.preset} preset's; a flag given overrides it)")
    if args.total_timesteps <= 0:
        fail(f"--total-timesteps must be positive, got {args.total_timesteps}")
    if args.eval_episodes < 0:
        fail(f"--eval-episodes must be 0 or more, got {args.eval_episodes}")
    if args.eval_every < 0:
        fail(f"--eval-every must be 0 (evaluate only after training) or more, got {args.eval_every}")
    if args.eval_every and not args.eval_episodes:
        fail("--eval-every needs at least one evaluation episode; pass --eval-episodes 1 or more, "
             "or --eval-every 0")
    if args.capture_video and not args.eval_episodes:
        fail("--capture-video records the evaluation episodes, and --eval-episodes 0 has none; "
             "pass --eval-episodes 1 or more")
    for flag, needed, package in (("capture_video", "moviepy", "moviepy==2.2.1"),
                                  ("track", "wandb", "wandb==0.31.0")):
        if getattr(args, flag) and importlib.util.find_spec(needed) is None:
            fail(f"--{flag.replace('_', '-')} needs {needed}: pip install {package}")
    if args.track and not args.tensorboard:
        fail("--track syncs TensorBoard's event files to Weights & Biases; drop --no-tensorboard")


def check_env(args, make=gym.make):
    """Make the environment once (gym.make imports a module:EnvId id's module itself), hand
    its spaces to check_spaces and return what that returns; with --capture-video, render a
    frame, so that a machine without a display says so now, not after training."""
    env_id = args.env_id
    if env_id.startswith(("ALE/", "MinAtar/")) and make is gym.make:  # ids their packages
        # register, which the scripts that learn from images import (their make_game)
        pixels = ("ppo.py and dqn.py" if env_id.startswith("ALE/")
                  else "ppo.py, dqn.py, pqn.py and impala.py")
        fail(f"{env_id} is a game of images ({pixels} learn from them); {SCRIPT} does not")
    try:
        env = make(env_id)
        obs_space, action_space = env.observation_space, env.action_space
        env.close()
    except UsageError:  # a make of the script's own said it already (a package to install)
        raise
    except Exception as e:  # Gymnasium's own line: the closest id to an unknown one, the
        # extra to install (pinned here to this Gymnasium); or a module of the user's that fails
        message = re.sub(r'"gymnasium\[(\w+)\]"', rf'"gymnasium[\1]=={gym.__version__}"', str(e))
        fail(f"cannot make {env_id}: {type(e).__name__}: {(message.splitlines() or [''])[0]}")
    spaces = check_spaces(args, obs_space, action_space)
    if args.capture_video:
        try:
            with warnings.catch_warnings():  # the line below says it
                warnings.simplefilter("ignore")
                os.environ.setdefault("SDL_VIDEODRIVER", "dummy")  # frames only, no window
                env = make(env_id, render_mode="rgb_array")
                env.reset(seed=0)
                env.render()
                env.close()
        except Exception as e:
            fail(f"cannot record videos of {env_id} ({type(e).__name__}: "
                 f"{(str(e).splitlines() or [''])[0]}); for MuJoCo on a machine without a "
                 "display set MUJOCO_GL=egl")
    return spaces


# [torch]


def seed_and_device(seed, cuda, threads=1, image=False):
    """Seed Python's, NumPy's and torch's random generators (the environments are seeded by
    their reset) and pick the device, printing which and why: --cuda the GPU where one is
    present, --no-cuda the CPU, and neither (cuda None) the GPU for an image's network, the
    CPU for a flat observation's: its small MLP trains faster on one CPU thread than on a
    GPU, measured for every script (results.md, "On a GPU"). On the CPU, `threads` threads."""
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)
    present = torch.cuda.is_available()
    device = torch.device("cuda" if present and (image if cuda is None else cuda) else "cpu")
    if device.type == "cpu":
        torch.set_num_threads(threads)
    if cuda is not None:
        why = "--cuda" if cuda else "--no-cuda"
        why += ", but no GPU is present" if cuda and not present else ""
    elif image:
        why = ("an image's convolutional network goes to the GPU; --no-cuda for the CPU"
               if present else "an image's network, but no GPU is present")
    else:
        why = ("a flat observation's small network trains faster on one CPU thread than on a "
               "GPU" + ("; --cuda for the GPU" if present else ""))
    print(f"{SCRIPT}: device {device}: {why}")
    return device
# [end]


EVAL_MAX_STEPS = 27_000
"""an evaluation episode still running after this many steps is cut there (its return so
far counts): a greedy policy can balance or walk in a circle forever in an environment
without a time limit. 27,000 steps are ALE's own end of an Atari game (108,000 frames)."""


def evaluate(args, models, video_folder=None):
    """Greedy returns of --eval-episodes episodes, one per environment of a vector env, all
    at once, seeded seed + 100,000 (every evaluation plays the same starts). The actions
    come from the script's greedy_policy; with --eval-epsilon (where a script has it), a
    uniformly random one instead with that probability, from a generator of the
    evaluation's own. A line every 2 seconds says how far it is."""
    episodes, seed = args.eval_episodes, args.seed + 100_000
    flags = {flag: getattr(args, flag) for flag in globals().get("ENV_FLAGS", ())}
    envs = make_vector_env(args.env_id, episodes, video_folder=video_folder, **flags)
    act, epsilon = greedy_policy(models, envs), getattr(args, "eval_epsilon", 0.0)
    obs, info = envs.reset(seed=seed)
    rng = np.random.default_rng(seed)  # epsilon's draws; training's streams stay untouched
    returns, steps, last_print = np.full(episodes, np.nan), 0, time.time()
    while np.isnan(returns).any() and steps < EVAL_MAX_STEPS:
        actions = act(obs, info)
        if epsilon:  # Discrete actions only (check_spaces)
            explore = rng.random(episodes) < epsilon
            actions = np.where(explore, rng.integers(envs.single_action_space.n, size=episodes),
                               actions)
        obs, _, _, _, info = envs.step(actions)
        if "_episode" in info:
            first = info["_episode"] & np.isnan(returns)
            returns[first] = info["episode"]["r"][first]
        steps += 1
        if time.time() - last_print >= 2.0:
            last_print = time.time()
            print(f"{SCRIPT}: evaluating, {episodes - np.isnan(returns).sum()} of {episodes} "
                  f"episodes done, {steps:,} steps")
    if np.isnan(returns).any():
        print(f"{SCRIPT}: evaluation episodes cut at {EVAL_MAX_STEPS:,} steps; give "
              f"{args.env_id} a time limit (max_episode_steps)")
        returns = np.where(np.isnan(returns), envs.episode_returns, returns)
    envs.close()
    return returns


def goal(args):
    """(threshold, window, holds_on, source, budget): what a run is judged on. The script's
    GOALS for the environment (its benchmark task's goal, the README row's, for the task's
    budget of steps), else Gymnasium's reward_threshold (CartPole-v1's 475) over the last 20
    training returns, at any budget; --stop-at-return gives the threshold in place of either,
    at any budget (None). holds_on "train": the mean of the last `window` training returns at
    the end; "eval": the final greedy evaluation; "gain": the final greedy evaluation less the
    one where the run's learning began, summary's start_return (grpo.py's warm start: what
    reinforcement learning added)."""
    name = args.env_id.rpartition(":")[2]
    threshold, window, holds_on, budget = globals().get("GOALS", {}).get(
        name, (None, 20, "train", None))
    source = "GOALS" if threshold is not None else "reward_threshold"
    if threshold is None:
        threshold = getattr(gym.registry.get(name), "reward_threshold", None)
    if args.stop_at_return is not None:
        threshold, source, budget = args.stop_at_return, "--stop-at-return", None
    return threshold, window, holds_on, source, budget


class RunWriter:
    """The run folder (the files the docstring at the top lists): config.json at once, the CSV
    files row by row (flushed, so an interrupted run keeps them) and TensorBoard's events
    from the same rows, a progress line every 2 seconds, the evaluations of --eval-every
    with best_model; finish() writes the rest. `models` names what a checkpoint holds (each
    with state_dict and load_state_dict). Training that runs whole rollouts of
    `rollout_steps` rounds the budget down to them, said at the start."""

    def __init__(self, args, device, models, rollout_steps=1, note=""):
        name = "__".join([args.env_id.replace("/", "-").replace(":", "-"), args.exp_name,
                          str(args.seed), str(int(time.time()))])
        self.path, suffix = os.path.join(args.output_dir, name), 1
        while os.path.exists(self.path):  # a run with the same flags in the same second
            suffix += 1
            self.path = os.path.join(args.output_dir, f"{name}-{suffix}")
        versions = {"gymnasium": gym.__version__, "numpy": np.__version__,
                    "python": sys.version.split()[0]}
        # [torch]
        versions["torch"] = torch.__version__
        # [end]
        config = {**asdict(args), "device": str(device), "versions": versions}
        if args.track:  # before the folder and the event files (it syncs those made after it)
            start_tracking(args, os.path.basename(self.path), config)
        try:
            os.makedirs(self.path)
        except OSError as e:
            fail(f"cannot create the run folder {self.path}: {e.strerror}")
        with open(os.path.join(self.path, "config.json"), "w") as f:
            json.dump(config, f, indent=2)
        self.tensorboard = None
        if args.tensorboard:  # TensorBoard's event files get each CSV row too (write_row)
            self.tensorboard = TensorBoardWriter(self.path)
            self.tensorboard.add_text("config", "|flag|value|\n|-|-|\n" + "\n".join(
                f"|{key}|{value}|" for key, value in config.items()))
        threshold, self.window, holds_on, self.source, budget = goal(args)
        self.summary = dict.fromkeys(SUMMARY_KEYS) | {
            "solved_threshold": None if args.eval_checkpoint else threshold,
            "solved_window": self.window, "holds_on": holds_on, "goal_budget": budget,
            "algorithm": args.exp_name, "env_id": args.env_id, "seed": args.seed,
            "global_steps": 0, "eval_episodes": args.eval_episodes, "interrupted": False}
        self.args, self.device, self.models = args, device, models
        self.budget = args.total_timesteps // rollout_steps * rollout_steps
        self.files, self.returns, self.ends, self.evaluations = {}, [], [], []
        self.write_row("episodes.csv")  # its header now: a run with no episode has the file
        self.start = self.last_print = time.time()
        self.first_print, self.last_step = None, 0  # (step, time) of the first progress line
        print(f"{SCRIPT}: {args.env_id}, seed {args.seed}{note}")  # after the device's line
        if getattr(args, "preset", None):  # the settings the environment's family picked
            others = " or ".join(f"--preset {name}" for name in PRESETS if name != args.preset)
            print(f"{SCRIPT}: the {args.preset} preset, {PRESETS[args.preset][0]}; {others} "
                  "for another, a flag for one setting")
        if self.budget != args.total_timesteps and args.eval_checkpoint is None:
            print(f"{SCRIPT}: training runs {self.budget:,} of --total-timesteps "
                  f"{args.total_timesteps:,}: whole rollouts of {rollout_steps:,} steps")

    def elapsed(self):
        return time.time() - self.start

    def write_row(self, filename, **row):
        """Append a row to a CSV file of the run folder, made with a header at first use
        (episodes.csv's columns are fixed; no row writes the header alone), and its values
        to TensorBoard at the row's step and moment."""
        if filename not in self.files:
            f = open(os.path.join(self.path, filename), "w", newline="")
            fields = EPISODE_FIELDS if filename == "episodes.csv" else list(row)
            self.files[filename] = (f, csv.DictWriter(f, fieldnames=fields))
            self.files[filename][1].writeheader()
        f, writer = self.files[filename]
        if row:
            writer.writerow(row)
        if row and self.tensorboard:
            for column, value in row.items():
                if column not in ("global_step", "wall_time") and value != "":  # "": no value
                    name = {**COMMON_NAMES, **TENSORBOARD_NAMES}.get(column, f"charts/{column}")
                    self.tensorboard.add_scalar(name, value, row["global_step"],
                                                self.start + row["wall_time"])
            self.tensorboard.flush()  # as the CSV file: a run that crashes keeps its rows
        f.flush()

    def episode(self, global_step, episode_return, episode_length):
        self.summary["global_steps"] = max(self.summary["global_steps"], global_step)
        self.returns.append(float(episode_return))
        self.ends.append(global_step)  # where it ended, for curve.png
        self.write_row("episodes.csv", global_step=global_step, wall_time=round(self.elapsed(), 4),
                       episode_return=float(episode_return), episode_length=int(episode_length))
        if self.summary["holds_on"] != "gain":  # a gain is measured once, at the end
            self.reached(self.summary["solved_threshold"], global_step)  # records when

    def update(self, global_step, **diagnostics):
        wall_time = self.elapsed()
        self.write_row("updates.csv", global_step=global_step, wall_time=round(wall_time, 4),
                       sps=int(global_step / wall_time), **diagnostics)
        self.measure(global_step, "update")

    def step(self, global_step):
        """After each environment step: record the step count (should Ctrl-C stop the run),
        evaluate each time global_step crosses a multiple of --eval-every, and print the
        progress line every 2 seconds, its speed measured from the first line on (the first
        seconds hold the start-up), or from the first after --learning-starts where a script
        has it (random steps run far faster)."""
        every, previous, self.last_step = self.args.eval_every, self.last_step, global_step
        self.summary["global_steps"] = max(self.summary["global_steps"], global_step)
        if every and global_step // every > previous // every:
            self.evaluation(global_step)
        now = time.time()
        if now - self.last_print >= 2.0:
            first, self.last_print = self.first_print or (global_step, now), now
            sps = (global_step - first[0]) / (now - first[1]) if self.first_print else None
            print(progress_line(global_step, self.budget, sps, self.recent_return()))
            if global_step >= getattr(self.args, "learning_starts", 0):
                self.first_print = first

    def evaluation(self, global_step):
        """Evaluate the policy as it is now on environments of its own (the training ones, the
        observation statistics and the random streams are untouched), append the row to
        evaluations.csv and, with --save-model, keep the best model so far (best_model)."""
        wall_time = self.elapsed()
        returns = evaluate(self.args, self.models)
        mean, std = float(returns.mean()), float(returns.std())
        self.write_row("evaluations.csv", global_step=global_step, wall_time=round(wall_time, 4),
                       eval_return_mean=mean, eval_return_std=std)
        if self.args.save_model and mean > max((m for _, m, _ in self.evaluations), default=-math.inf):
            save_checkpoint(os.path.join(self.path, "best_" + CHECKPOINT), self.models, self.args)
        self.evaluations.append((global_step, mean, std))
        self.measure(global_step, "evaluation")

    def measure(self, global_step, moment):
        """The script's own measures at a moment of training, where it has the optional hook
        measure(run, global_step, moment): its answer (None without the hook, or where the
        hook measures nothing at that moment)."""
        return measure(self, global_step, moment) if "measure" in globals() else None

    def non_finite(self, loss, global_step):
        """True, after saying so and marking the run interrupted, when the loss is NaN or inf."""
        if math.isfinite(loss):
            return False
        print(f"{SCRIPT}: the loss became non-finite (NaN or inf) at step {global_step}; "
              "stopping (try a lower --learning-rate)")
        self.summary["interrupted"] = True
        return True

    def recent_return(self, window=20):
        """The mean of the last `window` training episode returns (None before the first)."""
        return float(np.mean(self.returns[-window:])) if self.returns else None

    def reached(self, threshold, global_step):
        """True once the mean of the last solved_window returns reaches threshold; records the
        first step it did (each episode asks it of solved_threshold, train of --stop-at-return)."""
        if (threshold is None or len(self.returns) < self.window
                or self.recent_return(self.window) < threshold):
            return False
        if self.summary["solved_at_step"] is None:  # the first time only
            self.summary["solved_at_step"] = global_step
            self.summary["solved_at_time_s"] = round(self.elapsed(), 3)
        return True

    def close(self):
        for f, _ in self.files.values():
            f.close()
        if self.tensorboard:
            self.tensorboard.close()
# [torch]


TensorBoardWriter = SummaryWriter
CHECKPOINT = "model.pt"
# [end]
# [numpy]


class TensorBoardWriter(event_file_writer.EventFileWriter):
    """torch's SummaryWriter without torch: TensorBoard's own writer, the same events."""

    def add_text(self, tag, text):
        self.add_event(Event(wall_time=time.time(), summary=Summary(value=[Summary.Value(
            tag=tag, metadata=create_summary_metadata(tag, None), tensor=make_tensor_proto(text))])))

    def add_scalar(self, tag, value, global_step, walltime):
        self.add_event(Event(step=global_step, wall_time=walltime, summary=Summary(
            value=[Summary.Value(tag=tag, simple_value=float(value))])))


CHECKPOINT = "model.npz"
# [end]


EPISODE_FIELDS = ("global_step", "wall_time", "episode_return", "episode_length")
SUMMARY_KEYS = ("algorithm", "env_id", "seed", "global_steps", "wall_time_s",
                "train_return_last20", "eval_return_mean", "eval_return_std", "eval_episodes",
                "solved_threshold", "solved_window", "holds_on", "goal_budget", "start_return",
                "end_return", "holds",
                "solved_at_step", "solved_at_time_s", "interrupted")
# The columns every script writes, as TensorBoard's scalars under CleanRL's names (each point
# at the row's global_step and wall_time); a column in neither these nor the script's own
# TENSORBOARD_NAMES goes under charts/.
COMMON_NAMES = {"episode_return": "charts/episodic_return", "sps": "charts/SPS",
                "episode_length": "charts/episodic_length", "eval_return_mean":
                "eval/episodic_return", "eval_return_std": "eval/episodic_return_std"}


def progress_line(global_step, total_steps, sps, recent_return):
    """The console's progress: the step out of the budget, the percentage, steps per second,
    the time left at that speed (h:mm:ss) and the mean of the last 20 training returns; the
    speed and the time left read "-" while sps is None (the first line: nothing measured).

        ETA = max(total_steps - global_step, 0) / sps
    """
    if sps:
        minutes, seconds = divmod(round(max(total_steps - global_step, 0) / sps), 60)
        speed = f"{sps:,.0f} sps | ETA {minutes // 60}:{minutes % 60:02}:{seconds:02}"
    else:
        speed = "- sps | ETA -"
    recent = "n/a" if recent_return is None else f"{recent_return:.1f}"
    return (f"step {global_step:,}/{total_steps:,} ({100 * global_step / total_steps:.0f}%) | "
            f"{speed} | return (last 20) {recent}")
# [torch]


def save_checkpoint(path, models, args):
    """model.pt: each model's state dict under its name, and the flags."""
    torch.save({**{name: m.state_dict() for name, m in models.items()}, "args": asdict(args)},
               path)


def read_checkpoint(path):
    """A model.pt's dict, loaded safely (weights_only: tensors and plain data, never code)."""
    return torch.load(path, map_location="cpu", weights_only=True)
# [end]
# [numpy]


def save_checkpoint(path, models, args):
    """model.npz: plain arrays only, each model's under "name.key", the flags as a JSON
    string, so that it loads with allow_pickle=False."""
    np.savez(path, args=np.array(json.dumps(asdict(args))), **{
        f"{name}.{key}": value for name, m in models.items() for key, value in m.state_dict().items()})


def read_checkpoint(path):
    """A model.npz as the dict save_checkpoint wrote, loaded safely (allow_pickle=False)."""
    with np.load(path, allow_pickle=False) as f:
        checkpoint = {"args": json.loads(str(f["args"]))}
        for key in f.files:
            name, _, part = key.partition(".")
            if part:
                checkpoint.setdefault(name, {})[part] = f[key]
    return checkpoint
# [end]


def load_checkpoint(args):
    """(args, checkpoint) for --eval-checkpoint: the file (or a run folder's), read safely and
    checked to be this script's and made for --env-id, and the flags that shape the networks
    (MODEL_FLAGS) taken from it; (args, None) without the flag."""
    path = args.eval_checkpoint
    if path is None:
        return args, None
    if os.path.isdir(path):  # a run folder stands for its checkpoint
        path = os.path.join(path, CHECKPOINT)
        if not os.path.isfile(path):
            fail(f"run folder {os.path.dirname(path)} has no {CHECKPOINT}; train with --save-model")
    if not os.path.isfile(path):
        fail(f"checkpoint {path} does not exist")
    try:
        checkpoint = read_checkpoint(path)
        flags = {name: checkpoint["args"][name] for name in ("env_id", *MODEL_FLAGS)}
    except Exception as e:
        fail(f"checkpoint {path} is not a {SCRIPT} {CHECKPOINT} ({type(e).__name__}); "
             "make one with --save-model")
    if flags["env_id"] != args.env_id:
        fail(f"checkpoint {path} was made for {flags['env_id']}, not {args.env_id}; "
             f"pass --env-id {flags['env_id']}")
    return replace(args, **flags), checkpoint


def restore(checkpoint, models, args):
    """Put a checkpoint's state into each model."""
    try:
        for name, model in models.items():
            model.load_state_dict(checkpoint[name])
    except Exception as e:
        fail(f"checkpoint {args.eval_checkpoint} does not fit {args.env_id}'s networks: "
             f"{type(e).__name__}: {(str(e).splitlines() or [''])[0]}")


def train_and_finish(run, train, envs=None):
    """Train (unless --eval-checkpoint gave a model) and finish the run. Ctrl-C during
    training stops it: the run folder is written, then KeyboardInterrupt goes on up (cli
    ends the process as an interrupted one); the environments are closed either way."""
    interrupted = False
    if run.args.eval_checkpoint is None:
        try:
            train()
        except KeyboardInterrupt:
            print(f"{SCRIPT}: interrupted; writing what the run has so far")
            interrupted = run.summary["interrupted"] = True
        finally:
            if envs is not None:
                envs.close()
    summary = finish(run.args, run, trained=run.args.eval_checkpoint is None)
    if interrupted:
        raise KeyboardInterrupt
    return summary


def finish(args, run, trained=True):
    """Write the run first (the model if asked, summary.json), then evaluate greedily and
    write summary.json again with the evaluation, so that Ctrl-C during a long evaluation
    keeps the run (without the evaluation); print the closing line, ending with plot.py's
    command for the curve where a training episode ended. An interrupted run skips the
    evaluation. summary.json's holds: whether the run's end (judge) is at or above
    solved_threshold (a run that reached it once can end below it)."""
    summary = run.summary
    summary["train_return_last20"] = run.recent_return()
    threshold, window = summary["solved_threshold"], summary["solved_window"]
    judge(run)
    summary["wall_time_s"] = round(run.elapsed(), 3)
    episodic = globals().get("trains_on_episodes", lambda args: True)(args)  # rlhf.py's DPO: no
    if trained and episodic and not run.returns and not summary["interrupted"]:
        print(f"{SCRIPT}: no training episode ended in {summary['global_steps']:,} steps; if "
              f"{args.env_id} has no time limit, register it with max_episode_steps")
    if args.save_model and trained:
        save_checkpoint(os.path.join(run.path, CHECKPOINT), run.models, args)
    run.close()
    write_summary(run)
    if args.eval_episodes and not summary["interrupted"]:
        print(f"{SCRIPT}: final evaluation, {args.eval_episodes:,} "
              f"episode{'s' * (args.eval_episodes > 1)}; the run is written and Ctrl-C keeps it")
        try:
            returns = evaluate(args, run.models, os.path.join(run.path, "videos")
                               if args.capture_video else None)
        except KeyboardInterrupt:
            print(f"{SCRIPT}: final evaluation interrupted; {run.path} keeps the run without it")
            draw_curve(run)
            finish_tracking(args, run, exit_code=130)
            raise
        summary["eval_return_mean"] = float(returns.mean())
        summary["eval_return_std"] = float(returns.std())
        judge(run)
        write_summary(run)
    curve = draw_curve(run)
    closing = [f"{SCRIPT}: run folder {run.path}", f"global_steps {summary['global_steps']:,}"]
    for key in ("train_return_last20", "eval_return_mean"):
        closing.append(f"{key} " + ("-" if summary[key] is None else f"{summary[key]:.2f}"))
    if threshold is not None:  # --stop-at-return, else GOALS's, else the environment's
        if summary["end_return"] is not None:  # the end first: what a user gets from the run
            end = ("the final evaluation" if summary["holds_on"] == "eval" else
                   f"the gain over the start ({summary['start_return']:.2f} -> "
                   f"{summary['eval_return_mean']:.2f})" if summary["holds_on"] == "gain"
                   else f"the last-{window} mean at the end")
            value = f"{summary['end_return']:{'+' if summary['holds_on'] == 'gain' else ''}.2f}"
        if summary["holds"] is not None:
            closing.append(f"{'holds' if summary['holds'] else 'does not hold'}: {end} {value} "
                           f"{'>=' if summary['holds'] else '<'} {threshold:g}")
        elif short_of_budget(run) and summary["end_return"] is not None:
            closing.append(f"not judged, {args.total_timesteps:,} steps where its goal "
                           f"{threshold:g} is for {summary['goal_budget']:,}: {end} {value}")
        lost = " (lost by the end)" if summary["solved_at_step"] and summary["holds"] is False else ""
        if summary["holds_on"] != "gain":  # a gain has no training mean to reach it first
            closing.append(f"solved_at_step {summary['solved_at_step'] or 'not reached'} "
                           f"(last-{window} mean >= {run.source} {threshold:g}){lost}")
    elif getattr(args, "preset", None):  # no goal knows the environment: what ran on it
        closing.append(f"no goal for {args.env_id}; the {args.preset} preset ran")
    if curve:
        closing.append(f"curve {curve}")
    elif run.returns:  # plot.py draws the training episodes, an unfinished run's on request
        unfinished = "--include-unfinished " if summary["interrupted"] else ""
        closing.append(f"curve: python plot.py {unfinished}{run.path}")
    print(" | ".join(closing))
    finish_tracking(args, run)
    return summary


def judge(run):
    """summary.json's end_return, the figure the run is judged on where it ends (not where it
    first got: a run can reach its threshold and lose it): the mean of the last solved_window
    training returns (holds_on "train"), the final evaluation's mean ("eval") or that less
    start_return ("gain"); and holds, end_return >= solved_threshold, null without either, for
    a run stopped before its budget, or for one given fewer steps than its goal is for
    (short_of_budget)."""
    summary, window = run.summary, run.window
    summary["end_return"] = (summary["eval_return_mean"] if summary["holds_on"] == "eval" else
                             None if summary["holds_on"] == "gain" else
                             run.recent_return(window) if len(run.returns) >= window else None)
    if summary["holds_on"] == "gain" and None not in (summary["eval_return_mean"],
                                                      summary["start_return"]):
        summary["end_return"] = summary["eval_return_mean"] - summary["start_return"]
    summary["holds"] = (None if None in (summary["solved_threshold"], summary["end_return"])
                        or summary["interrupted"] or short_of_budget(run) else
                        summary["end_return"] >= summary["solved_threshold"])


def short_of_budget(run):
    """Whether the run was given fewer steps (--total-timesteps) than its goal is for: a goal
    at 1M steps does not judge a run of 300k."""
    budget = run.summary["goal_budget"]
    return budget is not None and run.args.total_timesteps < budget


def rolling_means(returns, window=20):
    """The mean of the last `window` returns where each episode ended (fewer at the start):
    the curve of summary.json's train_return_last20. returns [n] -> means [n], from prefix
    sums S_k = R_0 + ... + R_{k-1}:

        m_i = (S_{i+1} - S_{s_i}) / (i + 1 - s_i),   s_i = max(0, i + 1 - window)
    """
    sums = np.cumsum(np.concatenate([[0.0], returns]))
    i = np.arange(1, len(returns) + 1)
    start = np.maximum(i - window, 0)
    return (sums[i] - sums[start]) / (i - start)


def draw_curve(run):
    """--curve: curve.png in the run folder, the run's learning curve, after training (also
    one stopped by Ctrl-C): each training episode's return (dots), the mean of the last
    solved_window, the greedy evaluations (--eval-every's and the final one, mean and std)
    and solved_threshold, of the measure holds_on names. No pyplot: a Figure of its own, so a notebook's or a caller's
    figures are left alone. Returns the file's path, None where it draws nothing (the flag
    off, or neither an episode nor an evaluation to draw). A script with a curve of its own
    (draw_own_curve: grpo.py's phases) draws that instead."""
    if "draw_own_curve" in globals():
        return draw_own_curve(run) if run.args.curve else None
    summary = run.summary
    evaluations = list(run.evaluations)
    if summary["eval_return_mean"] is not None:
        evaluations.append((summary["global_steps"], summary["eval_return_mean"],
                            summary["eval_return_std"]))
    if not run.args.curve or not (run.returns or evaluations):
        return None
    from matplotlib.figure import Figure  # only a run that draws pays for the import
    fig = Figure(figsize=(7, 4.2), layout="constrained")
    ax = fig.add_subplot()
    if run.returns:
        ax.plot(run.ends, run.returns, ".", ms=3, alpha=0.3, color="C0", label="episode return")
        ax.plot(run.ends, rolling_means(run.returns, run.window), color="C0",
                label=f"mean of the last {run.window}")
    if evaluations:
        steps, means, stds = zip(*evaluations)
        ax.errorbar(steps, means, yerr=stds, fmt="o", color="C1", capsize=3,
                    label="greedy evaluation (mean, std)")
    if summary["solved_threshold"] is not None:
        on = "evaluation" if summary["holds_on"] == "eval" else f"last-{run.window} mean"
        ax.axhline(summary["solved_threshold"], ls="--", color="gray",
                   label=f"threshold {summary['solved_threshold']:g} ({on})")
    stopped = " (interrupted)" if summary["interrupted"] else ""
    ax.set(xlabel="environment steps", ylabel="return",
           title=f"{SCRIPT} on {summary['env_id']}, seed {summary['seed']}{stopped}")
    ax.grid(alpha=0.3)
    ax.legend(loc="best", fontsize="small")
    path = os.path.join(run.path, "curve.png")
    fig.savefig(path, dpi=100)
    return path


def write_summary(run):
    """summary.json: the run's summary as it stands."""
    with open(os.path.join(run.path, "summary.json"), "w") as f:
        json.dump(run.summary, f, indent=2)


def start_tracking(args, name, config):
    """--track: a Weights & Biases run as CleanRL starts one, which syncs the TensorBoard event
    files written after it; one that cannot start (no API key) is bad input."""
    import wandb  # not a requirement: check_args found it
    try:
        wandb.init(project=args.wandb_project_name, entity=args.wandb_entity, name=name,
                   config=config, sync_tensorboard=True)
    except wandb.errors.Error as e:
        fail(f"--track: {' '.join(str(e).split())} Or set WANDB_MODE=offline: the run stays "
             "here until `wandb sync` uploads it")


def finish_tracking(args, run, exit_code=0):
    """--track: summary.json and the evaluation's videos to the Weights & Biases run, which
    then ends (exit_code 130: Ctrl-C during the final evaluation)."""
    if not args.track:
        return
    import wandb  # not a requirement: check_args found it
    wandb.run.summary.update(run.summary)
    videos = sorted(glob.glob(os.path.join(run.path, "videos", "*.mp4")))
    if videos:
        wandb.log({"videos": [wandb.Video(video) for video in videos]})
    wandb.finish(exit_code=exit_code)


def cli():
    """main(flags) from the command line. Bad input: one line, exit status 2. Ctrl-C: the
    run folder written, the process dies of SIGINT (130), so a shell loop of runs stops too."""
    try:
        main(parse_args())
    except UsageError as e:
        print(f"{SCRIPT}: error: {e}", file=sys.stderr)
        sys.exit(2)
    except KeyboardInterrupt:
        signal.signal(signal.SIGINT, signal.SIG_DFL)
        os.kill(os.getpid(), signal.SIGINT)

# The plumbing every script shares: checks, run folder, evaluation, checkpoints. This file is
# its one source: `python plumbing/stamp.py` writes it below the plumbing banner of every
# script, and tests/test_plumbing.py fails where a script's copy differs by one byte. Lines
# between "# [torch]" and "# [end]" are left out of qlearning.py's NumPy-only copy, lines
# between "# [numpy]" and "# [end]" are its alone. What a script differs in is a hook it
# defines, which the block calls:
#
#   SCRIPT, Args                    the file's name; the algorithm's flags (Args adds RunFlags)
#   PRESETS                         (where a script has them) {preset: (source, {flag: value})},
#                                   which plumbing/presets.py fills the flags left at None from
#   check_flags(args)               the algorithm's own checks of its flags
#   check_spaces(args, obs_space, action_space)   whether it handles the spaces; what main needs
#   make_game(env_id, **options)    (where a script has pixels.py) the environment that is checked
#   make_vector_env(env_id, num_envs, video_folder=None, **ENV_FLAGS)   the environments
#   greedy_policy(models, envs)     act(obs, info) -> the evaluation's actions
#   MODEL_FLAGS                     the flags that shape the networks, read from a checkpoint
#   GOALS                           env id: (threshold, window, "train", "eval" or "gain", budget)
#   measure(run, global_step, moment, **what)   (optional) its own measures: at each
#                                   --eval-every evaluation ("evaluation"), after each update
#                                   ("update"), where train() asks, with what it passes
#
# TensorBoard's names follow one rule, CleanRL's: the episode and evaluation columns, the speed
# and the learning rate under their CleanRL names (COMMON_NAMES), any other column of
# updates.csv under losses/, of any other file under charts/.

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
from torch.utils.tensorboard import SummaryWriter as TensorBoardWriter
# [end]


@dataclass
class RunFlags:
    """The flags of the run folder that every script has: Args below lists them last."""
    output_dir: str = "runs"
    """where run folders go"""
    save_model: bool = False
    """write the model into the run folder (model.pt; a table's: model.npz)"""
    eval_checkpoint: Optional[str] = None
    """skip training: load this model.pt (or model.npz, or a run folder's) and evaluate it"""
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


def prepare(args, make=None):
    """Before training: --eval-checkpoint's model read, the environment made once, the flags
    left at None filled from its family's preset, the flags then the spaces checked (a mistake:
    one line, exit status 2), the seeds. Returns (args, check_spaces's, checkpoint, device)."""
    args, checkpoint = load_checkpoint(args)  # the flags that shape its networks too
    obs_space, action_space = check_env(args, make or globals().get("make_game", gym.make))
    if "PRESETS" in globals():  # the flags left at None: plumbing/presets.py's, below
        args = fill_preset(args, preset_for(args, obs_space, action_space))
    if getattr(args, "eval_epsilon", 0.0) is None:  # the evaluation's default: 0.05 on Atari
        args = replace(args, eval_epsilon=0.05 if args.env_id.startswith("ALE/") else 0.0)
    check_args(args)
    spaces = check_spaces(args, obs_space, action_space)
    image = len(getattr(obs_space, "shape", None) or ()) == 3
    return args, spaces, checkpoint, seed_and_device(args.seed, getattr(args, "cuda", None),
                                                     getattr(args, "threads", 1), image)


class UsageError(Exception):
    """Bad input: cli prints it as one line and exits with status 2, before training."""


def fail(message):
    raise UsageError(message)


def parse_args():  # tyro's parse-error hook (tyro._errors: requirements.txt pins tyro)
    with tyro._errors.on_parse_error(usage_error):
        return tyro.cli(Args)


def usage_error(event):
    """One line for a parse error: an unknown flag, a choice, a value, a missing value."""
    types, hint = typing.get_type_hints(Args), f"(python {SCRIPT} --help lists the flags)"
    if isinstance(event, tyro._errors.UnrecognizedArgs):
        flags = [f"--{no}{name.replace('_', '-')}" for name, kind in types.items()
                 for no in ("", "no-")[:1 + (kind is bool and not name.startswith("no_"))]]
        close = difflib.get_close_matches(event.tokens[0].partition("=")[0], flags, n=2)
        fail(f"unrecognized options: {', '.join(event.tokens)}"
             f"{'; did you mean ' + ' or '.join(close) + '?' if close else ''} {hint}")
    flag = event.argument.display_name().split("/")[0] if hasattr(event, "argument") else "?"
    kind = types.get(flag[2:].replace("-", "_"))
    if isinstance(event, tyro._errors.InvalidChoice):
        choices = [str(c) for a in (kind, *typing.get_args(kind))
                   if typing.get_origin(a) is typing.Literal for c in typing.get_args(a)]
        fail(f"{flag} takes {' or '.join(choices or event.choices)}, not {event.value!r} {hint}")
    if isinstance(event, tyro._errors.InstantiationFailure):  # the value is quoted last
        value = (re.findall(r"'([^']*)'", event.message) or ["?"])[-1]
        whole = "a whole number" if int in (kind, *typing.get_args(kind)) else "a number"
        fail(f"{flag} takes {whole}, not {value!r} {hint}")
    fail(f"{flag} needs a value {hint}")


def check_range(args, positive=(), nonnegative=(), fraction=()):
    """Each flag named must be > 0, >= 0, or in [0, 1]."""
    for name in [*positive, *nonnegative, *fraction]:
        value, words = getattr(args, name), ("positive" if name in positive else "0 or more"
                                             if name in nonnegative else "in [0, 1]")
        if not (value > 0 if name in positive else 0 <= value <= (1 if name in fraction else math.inf)):
            fail(f"--{name.replace('_', '-')} must be {words}, got {value}")


def check_args(args):
    """The algorithm's checks of its flags (check_flags), then those every script shares."""
    try:
        check_flags(args)
    except UsageError as e:  # a value may be the preset's, not the user's: name the preset
        preset = getattr(args, "preset", None)
        fail(f"{e} (the {preset} preset's settings; a flag given overrides one)" if preset else e)
    check_range(args, positive=["total_timesteps"], nonnegative=["eval_episodes", "eval_every"])
    if (args.eval_every or args.capture_video) and not args.eval_episodes:
        fail("--eval-every and --capture-video need evaluation episodes: --eval-episodes 1 or more")
    for flag, needed, package in (("capture_video", "moviepy", "moviepy==2.2.1"),
                                  ("track", "wandb", "wandb==0.31.0")):
        if getattr(args, flag) and importlib.util.find_spec(needed) is None:
            fail(f"--{flag.replace('_', '-')} needs {needed}: pip install {package}")


def check_env(args, make=gym.make):
    """The environment's spaces; with --capture-video a frame rendered (no display: said now)."""
    try:
        with warnings.catch_warnings():  # a failing render is said below
            warnings.simplefilter("ignore")
            os.environ.setdefault("SDL_VIDEODRIVER", "dummy")  # frames only, no window
            env = make(args.env_id, **({"render_mode": "rgb_array"} if args.capture_video else {}))
            if args.capture_video:
                env.reset(seed=0)
                env.render()
            env.close()
    except UsageError:  # a make of the script's own said it already (a package to install)
        raise
    except Exception as e:  # Gymnasium's line: the closest id, the extra to install (pinned)
        message = re.sub(r'"gymnasium\[(\w+)\]"', rf'"gymnasium[\1]=={gym.__version__}"', str(e))
        video = " to record videos (for MuJoCo without a display: MUJOCO_GL=egl)" * args.capture_video
        fail(f"cannot make {args.env_id}{video}: {type(e).__name__}: "
             f"{(message.splitlines() or [''])[0]}")
    return env.observation_space, env.action_space


def seed_and_device(seed, cuda=None, threads=1, image=False):
    """The seeds; the GPU for --cuda, or for an image (an MLP trains faster on a CPU thread)."""
    random.seed(seed)
    np.random.seed(seed)
    device = "cpu"
    # [torch]
    torch.manual_seed(seed)
    device = torch.device("cuda" if torch.cuda.is_available() and (image if cuda is None else cuda)
                          else "cpu")
    if device.type == "cpu":
        torch.set_num_threads(threads)
    print(f"{SCRIPT}: device {device}")
    # [end]
    return device


def make_recorded(env_id, video_folder=None, name_prefix="eval", make=gym.make, **options):
    """make(env_id, **options); with video_folder, an evaluation's environment whose first
    episode is recorded there as <name_prefix>-episode-0.mp4 (frames only, no window)."""
    if video_folder is None:
        return make(env_id, **options)
    os.environ.setdefault("SDL_VIDEODRIVER", "dummy")
    env = make(env_id, render_mode="rgb_array", **options)
    with warnings.catch_warnings():  # the evaluation's environments share one folder
        warnings.filterwarnings("ignore", message=".*Overwriting existing videos")
        return gym.wrappers.RecordVideo(env, video_folder, name_prefix=name_prefix,
                                        episode_trigger=lambda episode: episode == 0)


EVAL_MAX_STEPS = 27_000  # an evaluation episode is cut here: ALE's own end of an Atari game


def evaluate(args, models, video_folder=None):
    """Greedy returns of --eval-episodes episodes, one per environment, seeded seed + 100,000;
    with --eval-epsilon, a random action at that rate from a generator of its own."""
    episodes, seed = args.eval_episodes, args.seed + 100_000
    envs = make_vector_env(args.env_id, episodes, video_folder=video_folder,
                           **{flag: getattr(args, flag) for flag in globals().get("ENV_FLAGS", ())})
    act, epsilon = greedy_policy(models, envs), getattr(args, "eval_epsilon", 0.0)
    obs, info = envs.reset(seed=seed)
    rng, returns = np.random.default_rng(seed), np.full(episodes, np.nan)
    for _ in range(EVAL_MAX_STEPS):
        actions = act(obs, info)
        if epsilon:  # Discrete actions only (check_spaces); whether to explore, then what
            explore = rng.random(episodes) < epsilon
            actions = np.where(explore, rng.integers(envs.single_action_space.n, size=episodes),
                               actions)
        obs, _, _, _, info = envs.step(actions)
        if "_episode" in info:
            first = info["_episode"] & np.isnan(returns)
            returns[first] = info["episode"]["r"][first]
        if not np.isnan(returns).any():
            break
    else:  # an episode still running counts its return so far
        print(f"{SCRIPT}: evaluation cut at {EVAL_MAX_STEPS:,} steps; give {args.env_id} a "
              "time limit (max_episode_steps)")
        returns = np.where(np.isnan(returns), envs.episode_returns, returns)
    envs.close()
    return returns


def restore(checkpoint, models, args):
    """Put a checkpoint's state into each model; one that does not fit is bad input."""
    try:
        for name, model in models.items():
            model.load_state_dict(checkpoint[name])
    except Exception as e:
        fail(f"checkpoint {args.eval_checkpoint} does not fit {args.env_id}'s networks: "
             f"{type(e).__name__}: {(str(e).splitlines() or [''])[0]}")


def goal(args):
    """(threshold, window, holds_on, source, budget): GOALS's (for `budget` steps), else the
    reward_threshold over 20 returns; --stop-at-return's at any budget. holds_on "train": the
    last-window mean at the end; "eval": the final evaluation; "gain": that less start_return."""
    env, goals = args.env_id.rpartition(":")[2], globals().get("GOALS", {})
    threshold, window, holds_on, budget = goals.get(
        env, (getattr(gym.registry.get(env), "reward_threshold", None), 20, "train", None))
    if args.stop_at_return is not None:
        return args.stop_at_return, window, holds_on, "--stop-at-return", None
    return threshold, window, holds_on, "GOALS" if env in goals else "reward_threshold", budget


class Run:
    """A run and its folder: config.json, CSV rows flushed as they come (and to TensorBoard),
    evaluations; train() the rest. `models`: what a checkpoint holds (restored from one)."""

    def __init__(self, args, device, models, checkpoint=None, rollout_steps=1, note=""):
        if checkpoint is not None:
            restore(checkpoint, models, args)
        name = "__".join([args.env_id.replace("/", "-").replace(":", "-"), args.exp_name,
                          str(args.seed), str(int(time.time()))])
        self.path, suffix = os.path.join(args.output_dir, name), 1
        while os.path.exists(self.path):  # a run with the same flags in the same second
            suffix += 1
            self.path = os.path.join(args.output_dir, f"{name}-{suffix}")
        versions = {"python": sys.version.split()[0], "gymnasium": gym.__version__,
                    "numpy": np.__version__}
        # [torch]
        versions["torch"] = torch.__version__
        # [end]
        config = {**asdict(args), "device": str(device), "versions": versions}
        if args.track:  # before the folder and the event files (it syncs those made after it)
            import wandb  # not a requirement: check_args found it
            try:
                wandb.init(project=args.wandb_project_name, entity=args.wandb_entity, config=config,
                           name=os.path.basename(self.path), sync_tensorboard=True)
            except wandb.errors.Error as e:
                fail(f"--track: {' '.join(str(e).split())} Or set WANDB_MODE=offline: the run "
                     "stays here until `wandb sync` uploads it")
        try:
            os.makedirs(self.path)
        except OSError as e:
            fail(f"cannot create the run folder {self.path}: {e.strerror}")
        with open(os.path.join(self.path, "config.json"), "w") as f:
            json.dump(config, f, indent=2)
        self.tensorboard = TensorBoardWriter(self.path) if args.tensorboard or args.track else None
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
        self.start, self.last_print, self.last_step = time.time(), time.time(), 0
        print(f"{SCRIPT}: {args.env_id}, seed {args.seed}{note}")  # after the device's line
        if getattr(args, "preset", None):  # the settings the environment's family picked
            others = " or ".join(f"--preset {name}" for name in PRESETS if name != args.preset)
            print(f"{SCRIPT}: the {args.preset} preset, {PRESETS[args.preset][0]}; {others} "
                  "for another, a flag for one setting")

    def elapsed(self):
        return time.time() - self.start

    def write_row(self, filename, **row):
        """A row of a CSV file (its header at first use), and to TensorBoard (the rule above)."""
        if filename not in self.files:
            f = open(os.path.join(self.path, filename), "w", newline="")
            self.files[filename] = (f, csv.DictWriter(f, fieldnames=list(row) or [
                "global_step", "wall_time", "episode_return", "episode_length"]))  # episodes.csv's
            self.files[filename][1].writeheader()
        f, writer = self.files[filename]
        if row:
            writer.writerow(row)
        for column, value in row.items() if self.tensorboard else ():
            if column not in ("global_step", "wall_time") and value != "":  # "": no value
                folder = "losses" if filename == "updates.csv" else "charts"
                self.tensorboard.add_scalar(COMMON_NAMES.get(column, f"{folder}/{column}"), value,
                                            row["global_step"], self.start + row["wall_time"])
        if self.tensorboard:
            self.tensorboard.flush()  # as the CSV file: a run that crashes keeps its rows
        f.flush()

    def step(self, global_step, info=None):
        """After each environment step: --eval-every's evaluation, the episodes that ended
        (RecordEpisodeStatistics's info), the progress line; True at --stop-at-return: stop."""
        every, previous, self.last_step = self.args.eval_every, self.last_step, global_step
        self.summary["global_steps"] = max(self.summary["global_steps"], global_step)
        if every and global_step // every > previous // every:
            self.evaluation(global_step)
        if time.time() - self.last_print >= 2.0:
            self.last_print = time.time()
            print(progress_line(global_step, self.budget, global_step / self.elapsed(),
                                self.recent_return()))
        for i in np.flatnonzero(info.get("_episode", [])) if info else ():
            self.episode(global_step, info["episode"]["r"][i], info["episode"]["l"][i])
        return self.reached(self.args.stop_at_return, global_step)

    def episode(self, global_step, episode_return, episode_length):
        """A training episode's row; the step where the goal's mean was first reached."""
        self.summary["global_steps"] = max(self.summary["global_steps"], global_step)
        self.returns.append(float(episode_return))
        self.ends.append(global_step)  # where it ended, for curve.png
        self.write_row("episodes.csv", global_step=global_step, wall_time=round(self.elapsed(), 4),
                       episode_return=float(episode_return), episode_length=int(episode_length))
        if self.summary["holds_on"] != "gain":  # a gain is measured once, at the end
            self.reached(self.summary["solved_threshold"], global_step)

    def update(self, global_step, loss=0.0, /, **diagnostics):
        """An update's row of diagnostics; True, and no row, when `loss` is NaN or inf."""
        if self.non_finite(loss, global_step):
            return True
        wall_time = self.elapsed()
        self.write_row("updates.csv", global_step=global_step, wall_time=round(wall_time, 4),
                       sps=int(global_step / wall_time), **diagnostics)
        self.measure(global_step, "update")
        return False

    def evaluation(self, global_step):  # a row of evaluations.csv; --save-model's best model
        wall_time, returns = self.elapsed(), evaluate(self.args, self.models)
        mean, std = float(returns.mean()), float(returns.std())
        self.write_row("evaluations.csv", global_step=global_step, wall_time=round(wall_time, 4),
                       eval_return_mean=mean, eval_return_std=std)
        if self.args.save_model and mean > max((m for _, m, _ in self.evaluations), default=-math.inf):
            save_checkpoint(os.path.join(self.path, "best_" + CHECKPOINT), self.models, self.args)
        self.evaluations.append((global_step, mean, std))
        self.measure(global_step, "evaluation")

    def measure(self, global_step, moment, **what):  # the optional hook measure(run, step, moment)
        return measure(self, global_step, moment, **what) if "measure" in globals() else None

    def non_finite(self, loss, global_step):  # True, said, the run marked interrupted
        if math.isfinite(loss):
            return False
        print(f"{SCRIPT}: the loss became non-finite (NaN or inf) at step {global_step}; "
              "stopping (try a lower --learning-rate)")
        self.summary["interrupted"] = True
        return True

    def recent_return(self, window=20):  # the mean of the last `window` training returns
        return float(np.mean(self.returns[-window:])) if self.returns else None

    def reached(self, threshold, global_step):  # the window's mean at threshold; the first step kept
        if (threshold is None or len(self.returns) < self.window
                or self.recent_return(self.window) < threshold):
            return False
        self.summary["solved_at_step"] = self.summary["solved_at_step"] or global_step
        return True

    def train(self, train, envs=None):
        """Train (unless --eval-checkpoint), save, evaluate, draw, print the closing line; the
        summary. Ctrl-C stops training or the evaluation: the run is written, then re-raised."""
        s, args, stopped = self.summary, self.args, False
        try:
            if args.eval_checkpoint is None:
                train()
        except KeyboardInterrupt:
            stopped = s["interrupted"] = True
        finally:
            if envs is not None:
                envs.close()
        s["train_return_last20"], s["wall_time_s"] = self.recent_return(), round(self.elapsed(), 3)
        if args.save_model and args.eval_checkpoint is None:
            save_checkpoint(os.path.join(self.path, CHECKPOINT), self.models, args)
        self.close()
        self.judge()  # summary.json now: Ctrl-C during the evaluation keeps it
        try:
            if args.eval_episodes and not s["interrupted"]:
                returns = evaluate(args, self.models, os.path.join(self.path, "videos")
                                   if args.capture_video else None)
                s["eval_return_mean"], s["eval_return_std"] = float(returns.mean()), float(returns.std())
        except KeyboardInterrupt:
            stopped = True
        if stopped:
            print(f"{SCRIPT}: interrupted; {self.path} keeps the run so far")
        curve = self.draw_curve()
        print(" | ".join(self.verdict() + ([f"curve {curve}"] if curve else [])))
        if args.track:  # the summary and the evaluation's videos to W&B, whose run then ends
            import wandb
            wandb.run.summary.update(s)
            videos = sorted(glob.glob(os.path.join(self.path, "videos", "*.mp4")))
            if videos:
                wandb.log({"videos": [wandb.Video(video) for video in videos]})
            wandb.finish(exit_code=130 if stopped else 0)
        if stopped:
            raise KeyboardInterrupt
        return s

    def judge(self):
        """summary.json: end_return, holds_on's measure at the end (a goal can be reached and
        lost), holds (end_return >= solved_threshold; null for a run stopped or given fewer steps
        than its goal is for: then it returns True)."""
        s, short = self.summary, (self.summary["goal_budget"] or 0) > self.args.total_timesteps
        train = self.recent_return(self.window) if len(self.returns) >= self.window else None
        end = train if s["holds_on"] == "train" else s["eval_return_mean"]
        start = s["start_return"] if s["holds_on"] == "gain" else 0.0
        s["end_return"] = None if None in (end, start) else end - start
        s["holds"] = (None if None in (s["solved_threshold"], s["end_return"]) or s["interrupted"]
                      or short else s["end_return"] >= s["solved_threshold"])
        with open(os.path.join(self.path, "summary.json"), "w") as f:
            json.dump(s, f, indent=2)
        return short

    def verdict(self):  # the closing line's parts: steps, returns, the goal or the preset
        s, threshold, short, args = self.summary, self.summary["solved_threshold"], self.judge(), self.args
        line = [f"{SCRIPT}: run folder {self.path}", f"global_steps {s['global_steps']:,}"] + [
            f"{key} " + ("-" if s[key] is None else f"{s[key]:.2f}")
            for key in ("train_return_last20", "eval_return_mean")]
        preset = getattr(args, "preset", None)  # no GOALS entry: the preset that ran, named
        ran = ([f"no goal for {args.env_id}; the {preset} preset ran"]
               if preset and self.source == "reward_threshold" else [])
        if threshold is None:
            return line + ran
        if s["end_return"] is not None:  # the figure the run is judged on, where it ends
            if s["holds_on"] == "train":
                end = f"the last-{self.window} mean at the end {s['end_return']:.2f}"
            elif s["holds_on"] == "eval":
                end = f"the final evaluation {s['end_return']:.2f}"
            else:
                end = (f"the gain over the start ({s['start_return']:.2f} -> "
                       f"{s['eval_return_mean']:.2f}) {s['end_return']:+.2f}")
            if s["holds"] is not None:
                line.append(f"{'holds' if s['holds'] else 'does not hold'}: {end} "
                            f"{'>=' if s['holds'] else '<'} {threshold:g}")
            elif short:
                line.append(f"not judged, {args.total_timesteps:,} steps where its goal "
                            f"{threshold:g} is for {s['goal_budget']:,}: {end}")
        if s["holds_on"] != "gain":  # a gain has no training mean to reach it first
            line.append(f"solved_at_step {s['solved_at_step'] or 'not reached'} "
                        f"(last-{self.window} mean >= {self.source} {threshold:g})")
        return line + ran

    def draw_curve(self):
        """--curve: curve.png, its path (None: nothing to draw): returns, their mean, evaluations,
        threshold; a Figure of its own, not pyplot's. A script's draw_own_curve instead."""
        if not self.args.curve or "draw_own_curve" in globals():
            return draw_own_curve(self) if self.args.curve else None
        s, evaluations = self.summary, list(self.evaluations)
        if s["eval_return_mean"] is not None:
            evaluations.append((s["global_steps"], s["eval_return_mean"], s["eval_return_std"]))
        if not (self.returns or evaluations):
            return None
        from matplotlib.figure import Figure  # only a run that draws pays for the import
        fig = Figure(figsize=(7, 4.2), layout="constrained")
        ax = fig.add_subplot()
        if self.returns:  # each return, the mean of the goal's window where each episode ended
            means = [np.mean(self.returns[max(0, i + 1 - self.window):i + 1]) for i in range(len(self.ends))]
            ax.plot(self.ends, self.returns, ".", ms=3, alpha=0.3, color="C0", label="episode return")
            ax.plot(self.ends, means, color="C0", label=f"mean of the last {self.window}")
        if evaluations:
            ax.errorbar(*zip(*evaluations), fmt="o", color="C1", capsize=3, label="greedy evaluation")
        if s["solved_threshold"] is not None:
            on = "evaluation" if s["holds_on"] == "eval" else f"last-{self.window} mean"
            ax.axhline(s["solved_threshold"], ls="--", color="gray",
                       label=f"threshold {s['solved_threshold']:g} ({on})")
        ax.set(xlabel="environment steps", ylabel="return", title=f"{SCRIPT} on {s['env_id']}, "
               f"seed {s['seed']}{' (interrupted)' if s['interrupted'] else ''}")
        ax.legend(fontsize="small")
        fig.savefig(os.path.join(self.path, "curve.png"), dpi=100)
        return os.path.join(self.path, "curve.png")

    def close(self):
        for f, _ in self.files.values():
            f.close()
        if self.tensorboard:
            self.tensorboard.close()


SUMMARY_KEYS = ("algorithm", "env_id", "seed", "global_steps", "wall_time_s",
                "train_return_last20", "eval_return_mean", "eval_return_std", "eval_episodes",
                "solved_threshold", "solved_window", "holds_on", "goal_budget", "start_return",
                "end_return", "holds", "solved_at_step", "interrupted")
COMMON_NAMES = {"episode_return": "charts/episodic_return", "sps": "charts/SPS",
                "episode_length": "charts/episodic_length", "learning_rate": "charts/learning_rate",
                "eval_return_mean": "eval/episodic_return", "eval_return_std": "eval/episodic_return_std"}


def progress_line(global_step, total_steps, sps, recent_return):  # minutes left at sps
    minutes, recent = (total_steps - global_step) / sps / 60, recent_return
    return (f"step {global_step:,}/{total_steps:,} | {sps:,.0f} sps | {minutes:.0f} min left | "
            f"return (last 20) {'n/a' if recent is None else f'{recent:.1f}'}")
# [torch]
CHECKPOINT = "model.pt"


def save_checkpoint(path, models, args):  # each model's state dict under its name; the flags
    torch.save({**{name: m.state_dict() for name, m in models.items()}, "args": asdict(args)}, path)


def read_checkpoint(path):  # safely: weights_only loads tensors and plain data, never code
    return torch.load(path, map_location="cpu", weights_only=True)
# [end]


def load_checkpoint(args):
    """--eval-checkpoint's (args with its MODEL_FLAGS, checkpoint), checked; (args, None)."""
    if (path := args.eval_checkpoint) is None:
        return args, None
    path = os.path.join(path, CHECKPOINT) if os.path.isdir(path) else path
    try:
        checkpoint = read_checkpoint(path)
        flags = {name: checkpoint["args"][name] for name in ("env_id", *MODEL_FLAGS)}
    except Exception as e:
        fail(f"checkpoint {path} does not exist" if not os.path.isfile(path) else f"checkpoint "
             f"{path} is not a {SCRIPT} {CHECKPOINT} ({type(e).__name__}); make one with --save-model")
    if flags["env_id"] != args.env_id:
        fail(f"checkpoint {path} was made for {flags['env_id']}; pass --env-id {flags['env_id']}")
    return replace(args, **flags), checkpoint


def cli():  # bad input: one line, status 2; Ctrl-C: dying of SIGINT stops a shell loop too
    try:
        main(parse_args())
    except UsageError as e:
        print(f"{SCRIPT}: error: {e}", file=sys.stderr)
        sys.exit(2)
    except KeyboardInterrupt:
        signal.signal(signal.SIGINT, signal.SIG_DFL)
        os.kill(os.getpid(), signal.SIGINT)

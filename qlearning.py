# From plainrl (MIT licence, (c) 2026 the plainrl authors): keep this line in a copy.
"""Tabular Q-learning (Watkins 1989), in NumPy, with a uniform grid for continuous observations.

Q-learning keeps a table Q(s, a) of the expected discounted return of taking action a in
state s and acting greedily afterwards. It acts epsilon-greedily and, after every step,
moves Q(s, a) a fraction alpha of the way towards a one-step target that uses the best
action of the next state, whatever action the agent will actually take there (off-policy).

Key equations (one step s, a -> r, s'):

    target   = r + gamma * (1 - terminated) * max_a' Q(s', a')
    delta    = target - Q(s, a)                       (the TD error)
    Q(s, a) <- Q(s, a) + alpha * delta
    a        = a random action with probability epsilon, else argmax_a Q(s, a)

A time-limit truncation is not a termination: the truncated step bootstraps from the true
final state, a terminated one does not; the episode ends on either. Discrete observations
are the table's row directly. Box observations are mapped to a uniform grid, each dimension
cut into `bins` cells between its bounds (clipped to them), the cells numbered row-major:

    cell_i = clip(floor((x_i - low_i) / (high_i - low_i) * bins_i), 0, bins_i - 1)
    s      = (...((cell_0 * bins_1 + cell_1) * bins_2 + cell_2) ...)

Papers:
    Watkins 1989, "Learning from Delayed Rewards", PhD thesis, University of Cambridge
    Watkins & Dayan 1992, "Q-learning", Machine Learning 8(3-4)
    Sutton & Barto 2018, "Reinforcement Learning: An Introduction", 2nd ed., sections 6.5
        and 9.5.4 (tile coding; the grid here is a single tiling)
    Pardo et al. 2018, "Time Limits in Reinforcement Learning", ICML 2018

Run:
    python qlearning.py --env-id Taxi-v4 --eval-episodes 1000
    python qlearning.py --env-id FrozenLake-v1 --total-timesteps 200000 --gamma 0.999 \
        --anneal-lr --eval-episodes 1000
    python qlearning.py --env-id MountainCar-v0 --total-timesteps 2000000 --bins 20 \
        --learning-rate 0.2 --anneal-lr --start-e 0 --end-e 0 --eval-episodes 100

Writes runs/<env_id>__qlearning__<seed>__<unix_time>/ (plainrl's CONTRIBUTING.md, "What a run
writes"), with heat_map.png, the greedy policy, where the table is a map like FrozenLake's or a
grid of one or two dimensions; --save-model writes the table as model.npz.
"""

# ---------------------------------------------------------------------------------------
# Imports
# ---------------------------------------------------------------------------------------
import math
import os
import random
import warnings
from dataclasses import dataclass
from typing import Optional

import gymnasium as gym
import numpy as np
from matplotlib.figure import Figure

SCRIPT = os.path.basename(__file__)


# ---------------------------------------------------------------------------------------
# Flags
# ---------------------------------------------------------------------------------------
@dataclass
class Args:
    env_id: str = "Taxi-v4"
    """a Gymnasium id (or module:EnvId) with Discrete actions and Discrete or Box observations"""
    seed: int = 1
    """seeds Python, NumPy and the environments"""
    total_timesteps: int = 300_000
    """the training budget in environment steps"""
    exp_name: str = os.path.splitext(SCRIPT)[0]
    """the experiment name, part of the run folder's name"""
    eval_episodes: int = 10
    """greedy evaluation episodes after training (0 skips evaluation)"""
    eval_every: int = 0
    """also evaluate greedily every N environment steps (0: only after training)"""
    stop_at_return: Optional[float] = None
    """stop once the training mean over its goal's window (GOALS; else 20 episodes) reaches this"""

    # Algorithm
    # 0.5 in Sutton & Barto's gridworld examples 6.5 and 6.6, 0.1 in their bandit chapter.
    learning_rate: float = 0.1
    """alpha: the step size of the update, in (0, 1] (0.1-0.5 in Sutton & Barto's examples)"""
    anneal_lr: bool = False
    """decay alpha linearly to 0 over the budget (helps stochastic environments settle)"""
    gamma: float = 0.99
    """discount factor (1 in Sutton & Barto's episodic gridworlds, 0.9-0.99 in most other work)"""
    start_e: float = 1.0
    """epsilon at the start of training (Sutton & Barto's examples keep it at 0.1 throughout)"""
    end_e: float = 0.01
    """epsilon at the end of the schedule (0.01-0.1 in CleanRL's and DQN's schedules)"""
    exploration_fraction: float = 0.2
    """fraction of the budget over which epsilon goes linearly from --start-e to --end-e"""
    # +5 in Sutton & Barto's section 2.6, on rewards near 1.
    q_init: float = 0.0
    """initial value of every Q(s, a); above the true values it makes exploration optimistic"""
    log_interval: int = 1000
    """environment steps between two rows of updates.csv"""

    # The grid for Box observations
    # A single tiling; Sutton & Barto's Mountain Car uses 8 tilings of 8 x 8, section 10.1.
    bins: tuple[int, ...] = (20,)
    """Box observations: grid cells per dimension, one number for all or one per dimension"""
    obs_low: Optional[tuple[float, ...]] = None
    """Box observations: lower grid bounds replacing the space's, one for all or per dimension"""
    obs_high: Optional[tuple[float, ...]] = None
    """Box observations: upper grid bounds replacing the space's, one for all or per dimension"""


# ---------------------------------------------------------------------------------------
# The math
# ---------------------------------------------------------------------------------------
def discretize(obs, low, high, bins):
    """The table row of a Box observation: its cell in a uniform grid, numbered row-major.

    obs, low, high and bins are sequences of d numbers (obs may have any shape; it is
    flattened). Values outside [low, high] go to the edge cell:

        cell_i = clip(floor((x_i - low_i) / (high_i - low_i) * bins_i), 0, bins_i - 1)
        s      = sum_i cell_i * prod_{j > i} bins_j,      0 <= s < prod_i bins_i

    Returns s as an int.
    """
    index = 0
    for x, lo, hi, n in zip(np.ravel(obs).tolist(), low, high, bins):
        cell = math.floor((x - lo) / (hi - lo) * n)
        index = index * n + min(max(cell, 0), n - 1)
    return index


def q_update(q, s, a, r, s_next, terminated, alpha, gamma):
    """One Q-learning step, in place, on the NumPy table q [num_states, num_actions] (s, a
    and s_next ints, terminated a bool):

        delta   = r + gamma * (1 - terminated) * max_a' q[s_next, a'] - q[s, a]
        q[s, a] = q[s, a] + alpha * delta

    A truncated step passes terminated=False: it bootstraps from s_next, the true final
    state. Returns delta (a float); q[s, a] is the one entry that changes.
    """
    target = r if terminated else r + gamma * q[s_next].max()
    delta = float(target - q[s, a])
    q[s, a] += alpha * delta
    return delta


def linear_schedule(start, end, duration, t):
    """start at t = 0, end from t = duration on, linear in between (CleanRL's schedule):

        value = start + (end - start) * min(1, t / duration)      (end at once if duration <= 0)
    """
    if duration <= 0:
        return end
    return start + (end - start) * min(1.0, t / duration)


class QTable:
    """The table q [num_states, num_actions] with its visit counts [num_states], and the map
    from an observation to its row: the state index itself for a Discrete space (minus the
    space's start), discretize() on the grid (low, high, bins) for a Box space."""

    def __init__(self, q, low=None, high=None, bins=None, start=0, visits=None):
        self.q = q
        self.visits = np.zeros(len(q), dtype=np.int64) if visits is None else visits
        self.grid = None if bins is None else ([float(x) for x in low], [float(x) for x in high],
                                               [int(n) for n in bins])
        self.start = start

    def state(self, obs):
        if self.grid is None:
            return int(obs) - self.start
        return discretize(obs, *self.grid)

    def greedy(self, s):
        """argmax_a Q(s, a); ties go to the lowest action."""
        return int(self.q[s].argmax())

    def act(self, s, epsilon, rng):
        """epsilon-greedy: a uniformly random action with probability epsilon."""
        if rng.random() < epsilon:
            return rng.randrange(self.q.shape[1])
        return self.greedy(s)

    def state_dict(self):  # what model.npz keeps; the grid is made again from the flags
        return {"q": self.q, "visits": self.visits}

    def load_state_dict(self, state):
        if state["q"].shape != self.q.shape:
            raise ValueError(f"a table of shape {state['q'].shape}, not {self.q.shape}")
        self.q, self.visits = state["q"], state["visits"]


# ---------------------------------------------------------------------------------------
# What the agent sees: a Discrete state's index, or a Box observation's cell of the grid
# ---------------------------------------------------------------------------------------
def make_table(args, env_id, obs_space, action_space):
    """A fresh QTable for the environment's spaces: a row per Discrete state, or for a Box
    space a row per cell of the grid of --bins cells per dimension between the space's
    bounds, or --obs-low and --obs-high where given (values outside go to the edge cells).
    Refuses grids with unbounded or empty sides, and tables too large for the memory."""
    num_actions = int(action_space.n)
    if isinstance(obs_space, gym.spaces.Discrete):
        if tuple(args.bins) != Args.bins or args.obs_low is not None or args.obs_high is not None:
            fail(f"--bins, --obs-low and --obs-high are for Box observations; {env_id}'s are "
                 f"Discrete({obs_space.n}), already a table row each")
        grid, num_states = None, int(obs_space.n)
        check_memory(num_states, num_actions, f"{env_id}'s Discrete({num_states})")
    else:
        dims = int(np.prod(obs_space.shape))
        bins = per_dimension("bins", args.bins, dims)
        low, high = obs_space.low.ravel().tolist(), obs_space.high.ravel().tolist()
        if args.obs_low is not None:
            low = per_dimension("obs-low", args.obs_low, dims)
        if args.obs_high is not None:
            high = per_dimension("obs-high", args.obs_high, dims)
        unbounded = [i for i in range(dims)
                     if not (math.isfinite(low[i]) and math.isfinite(high[i]))]
        if unbounded:
            fail(f"{env_id}'s observation dimensions {', '.join(map(str, unbounded))} (counting "
                 "from 0) are unbounded; give finite grid bounds with --obs-low and --obs-high "
                 "(one number for all dimensions or one per dimension)")
        empty = [i for i in range(dims) if not low[i] < high[i]]
        if empty:
            fail(f"the grid bounds need --obs-low < --obs-high in every dimension; not in "
                 f"dimensions {', '.join(map(str, empty))}")
        grid, num_states = (low, high, bins), math.prod(bins)
        check_memory(num_states, num_actions, f"--bins {' '.join(map(str, bins))}")
    q = np.full((num_states, num_actions), args.q_init, dtype=np.float64)
    start = int(obs_space.start) if grid is None else 0
    return QTable(q, *(grid or (None, None, None)), start=start)


def per_dimension(flag, values, dims):
    """A flag given as one number for all dimensions or one per dimension, as a list of dims."""
    if len(values) == 1:
        return list(values) * dims
    if len(values) != dims:
        fail(f"--{flag} takes one number or one per observation dimension ({dims}), "
             f"got {len(values)}")
    return list(values)


def check_memory(num_states, num_actions, what):
    """Refuse a table (float64 Q values and int64 visit counts) larger than half of this
    machine's physical memory (8 GB where the OS does not say); `what` names its cause. The
    rows of a grid are the product of its bins: 20 bins in each of 4 dimensions make 160,000
    rows, 1000 make 10^12 (the curse of dimensionality, which tile coding and networks avoid)."""
    size = num_states * (num_actions + 1) * 8
    try:
        memory = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (AttributeError, ValueError, OSError):
        memory = 8 * 1000**3
    if size > memory / 2:
        fail(f"{what} makes a table of {num_states:,} states x {num_actions} actions, "
             f"{human_bytes(size)}: more than half of this machine's memory "
             f"({human_bytes(memory)})" + ("; use fewer --bins" if what.startswith("--") else ""))


def human_bytes(n):
    for unit in ("bytes", "KB", "MB", "GB", "TB", "PB"):
        if n < 1000 or unit == "PB":
            return f"{n:.3g} {unit}"
        n /= 1000


def make_env(env_id):
    """The training environment, whose episode returns are recorded by Gymnasium's
    RecordEpisodeStatistics (info["episode"] when an episode ends)."""
    return gym.wrappers.RecordEpisodeStatistics(gym.make(env_id))


def make_vector_env(env_id, num_envs, video_folder=None):
    """The evaluation's environments: num_envs copies of env_id in one synchronous vector
    environment, with SAME_STEP autoreset and episode statistics recorded by Gymnasium's
    wrapper; with video_folder, each records its first episode."""
    def make(i):
        if video_folder is None:
            return gym.make(env_id)
        os.environ.setdefault("SDL_VIDEODRIVER", "dummy")  # frames only, no window to open
        with warnings.catch_warnings():  # the environments share one folder on purpose
            warnings.filterwarnings("ignore", message=".*Overwriting existing videos")
            return gym.wrappers.RecordVideo(gym.make(env_id, render_mode="rgb_array"),
                                            video_folder, name_prefix=f"eval-{i}",
                                            episode_trigger=lambda episode: episode == 0)

    envs = gym.vector.SyncVectorEnv([lambda i=i: make(i) for i in range(num_envs)],
                                    autoreset_mode=gym.vector.AutoresetMode.SAME_STEP)
    return gym.wrappers.vector.RecordEpisodeStatistics(envs)


# ---------------------------------------------------------------------------------------
# Reading the table: V(s) and the greedy action of each state, on the map or the grid
# ---------------------------------------------------------------------------------------
ARROWS = "←↓→↑"
"""FrozenLake's actions 0-3 (left, down, right, up), drawn as arrows on its map"""


def heat_map(table, board):
    """What heat_map.png shows when the table is a small grid: V(s) = max_a Q(s, a) laid
    out on it ([rows, cols], NaN where never visited), a label [rows, cols] for each cell,
    the axis labels and ticks. None for other tables.

    A FrozenLake map (board: its rows of letters as bytes, S start, F frozen, H hole, G goal,
    a cell per state and 4 actions) is drawn as the map, row 0 at the top: a visited cell
    shows its greedy action as an arrow, a hole "H" and the goal "G". A Box grid of one or two
    dimensions is drawn with dimension 0 across and dimension 1 up, each visited cell with its
    greedy action's number."""
    values = np.where(table.visits > 0, table.q.max(axis=1), np.nan)
    actions = table.q.argmax(axis=1)
    if table.grid is None:
        if np.ndim(board) != 2 or np.size(board) != len(values) or len(ARROWS) != len(table.q[0]):
            return None
        letters = np.char.decode(board)
        shape = letters.shape
        labels = np.where(np.isin(letters, ["H", "G"]), letters, np.where(
            np.isnan(values), "", np.array(list(ARROWS))[actions]).reshape(shape))
        return {"values": values.reshape(shape), "labels": labels, "origin": "upper",
                "xlabel": "column", "ylabel": "row", "ticks": None,
                "title": "greedy action (arrow) in each visited cell, on V(s); H holes, G goal"}
    low, high, bins = table.grid
    if len(bins) > 2:
        return None
    shape = (bins[0], bins[1] if len(bins) == 2 else 1)  # [cell_0, cell_1]: transpose to draw
    ticks = [(f"{low[i]:.3g}", f"{high[i]:.3g}") for i in range(len(bins))] + [("", "")]
    labels = np.where(np.isnan(values), "", actions.astype(str)).reshape(shape).T
    return {"values": values.reshape(shape).T, "labels": labels, "origin": "lower",
            "xlabel": "observation dimension 0", "ticks": ticks[:2],
            "ylabel": "observation dimension 1" if len(bins) == 2 else "",
            "title": "greedy action (number) in each visited cell, on V(s)"}


def draw_heat_map(fig, ax, heat):
    """Draw heat_map's V(s) on ax with its colour bar, and the cells' labels when there are
    at most 400 cells."""
    values = heat["values"]
    image = ax.imshow(values, origin=heat["origin"], cmap="viridis", aspect="auto")
    fig.colorbar(image, ax=ax, label="V(s) = max_a Q(s, a)")
    rows, cols = values.shape
    if values.size <= 400:
        for (r, c), label in np.ndenumerate(heat["labels"]):
            if label:  # white on a value's colour, black on a blank (never visited) cell
                ax.text(c, r, label, ha="center", va="center", fontsize=9,
                        color="w" if np.isfinite(values[r, c]) else "k")
    if heat["ticks"]:  # a grid's bounds at its edges
        ax.set_xticks([-0.5, cols - 0.5], heat["ticks"][0])
        ax.set_yticks([-0.5, rows - 0.5], heat["ticks"][1])
    else:  # a board's rows and columns
        ax.set_xticks(range(cols))
        ax.set_yticks(range(rows))
    ax.set(xlabel=heat["xlabel"], ylabel=heat["ylabel"], title=heat["title"])


def plot_heat_map(path, heat):
    """heat_map.png in the run folder: heat_map's drawing, where the table has one."""
    if heat is not None:
        fig = Figure(figsize=(7, 4), dpi=100)
        draw_heat_map(fig, fig.add_subplot(), heat)
        fig.tight_layout()
        fig.savefig(os.path.join(path, "heat_map.png"))


# ---------------------------------------------------------------------------------------
# Training
# ---------------------------------------------------------------------------------------
def train(args, env, table, run):
    """The Q-learning loop: act epsilon-greedily, update Q(s, a) after every step, start a
    new episode where one ended, log; until the budget, --stop-at-return or a non-finite
    TD error.
    run (RunWriter, below the banner) writes the run folder: step(n) prints progress and
    evaluates, episode/update add a CSV row, returns holds the training returns,
    reached/non_finite say when to stop."""
    rng = random.Random(args.seed)  # exploration
    total = args.total_timesteps
    exploration_steps = args.exploration_fraction * total
    abs_deltas, last_log = 0.0, 0

    # A Box observation becomes its cell of the grid (table.state: discretize), a Discrete
    # one its index: the table sees only the cell.
    obs, _ = env.reset(seed=args.seed)
    s = table.state(obs)
    for step in range(total):  # environment steps taken so far
        epsilon = linear_schedule(args.start_e, args.end_e, exploration_steps, step)
        alpha = args.learning_rate * (1 - step / total if args.anneal_lr else 1)
        a = table.act(s, epsilon, rng)
        obs, reward, terminated, truncated, info = env.step(a)
        global_step = step + 1
        run.step(global_step)  # progress line; evaluation every --eval-every steps

        # Learn: after a truncation s_next is the true final state and is bootstrapped from;
        # after a termination q_update drops the bootstrap term.
        s_next = table.state(obs)
        delta = q_update(table.q, s, a, reward, s_next, terminated, alpha, args.gamma)
        table.visits[s] += 1
        abs_deltas += abs(delta)
        if run.non_finite(delta, global_step):  # says so; the run stops as interrupted
            return
        s = s_next
        solved = False
        if terminated or truncated:  # the episode ends on either; the next one starts
            run.episode(global_step, info["episode"]["r"], info["episode"]["l"])
            obs, _ = env.reset()
            s = table.state(obs)
            solved = run.reached(args.stop_at_return, global_step)  # the summary records when

        # Log: a row of updates.csv every --log-interval steps and at the end.
        if global_step % args.log_interval == 0 or solved or global_step == total:
            run.update(global_step, epsilon=epsilon, learning_rate=alpha,
                       td_error_abs=abs_deltas / (global_step - last_log),
                       states_visited=int(np.count_nonzero(table.visits)),
                       episodes=len(run.returns))
            abs_deltas, last_log = 0.0, global_step
        if solved:
            return


def main(args: Args) -> dict:
    """Train Q-learning (or evaluate an --eval-checkpoint), write the run folder, return the
    summary. Ctrl-C stops training; the run folder is written, then KeyboardInterrupt goes on up."""
    # Check everything a user can get wrong before anything runs: one line, exit status 2.
    check_args(args)
    obs_space, action_space = check_env(args)
    args, checkpoint = load_checkpoint(args)  # the grid's flags come from a checkpoint

    # Set up: seeds (the environment is seeded by its first reset), the table, the run folder.
    random.seed(args.seed)
    np.random.seed(args.seed)
    table = make_table(args, args.env_id, obs_space, action_space)
    models = {"table": table}  # what model.npz holds
    if checkpoint is not None:
        restore(checkpoint, models, args)
    run = RunWriter(args, "cpu", models,
                    note=f", table of {table.q.shape[0]} states x {table.q.shape[1]} actions")

    # Train (unless evaluating a checkpoint), then draw the table's heat map; then finish:
    # evaluate, save, write, plot.
    env = None if checkpoint else make_env(args.env_id)

    def train_and_draw():
        try:
            train(args, env, table, run)
        finally:  # Ctrl-C too: the table as far as it got
            plot_heat_map(run.path, heat_map(table, getattr(env.unwrapped, "desc", None)))
    return train_and_finish(run, train_and_draw, env)


# ---------------------------------------------------------------------------------------
# Plumbing: checks, run folder, evaluation, checkpoints (not needed to follow the algorithm)
# ---------------------------------------------------------------------------------------
# Stamped from plainrl's plumbing/common.py by its stamp.py: edit it there, not here.
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
from tensorboard.compat.proto.event_pb2 import Event
from tensorboard.compat.proto.summary_pb2 import Summary
from tensorboard.plugins.text.metadata import create_summary_metadata
from tensorboard.summary.writer import event_file_writer
from tensorboard.util.tensor_util import make_tensor_proto


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


class TensorBoardWriter(event_file_writer.EventFileWriter):
    """torch's SummaryWriter without torch: TensorBoard's own writer, the same events."""

    def add_text(self, tag, text):
        self.add_event(Event(wall_time=time.time(), summary=Summary(value=[Summary.Value(
            tag=tag, metadata=create_summary_metadata(tag, None), tensor=make_tensor_proto(text))])))

    def add_scalar(self, tag, value, global_step, walltime):
        self.add_event(Event(step=global_step, wall_time=walltime, summary=Summary(
            value=[Summary.Value(tag=tag, simple_value=float(value))])))


CHECKPOINT = "model.npz"


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
# End of plumbing/common.py


# ---------------------------------------------------------------------------------------
# What the plumbing asks of qlearning.py: its own checks, its greedy policy, its table's flags
# ---------------------------------------------------------------------------------------
def check_flags(args):
    """qlearning.py's own flags, checked before any environment is made."""
    if args.log_interval <= 0:
        fail(f"--log-interval must be positive, got {args.log_interval}")
    if not 0.0 < args.learning_rate <= 1.0:
        fail(f"--learning-rate must be in (0, 1], got {args.learning_rate}")
    for name in ("gamma", "start_e", "end_e", "exploration_fraction"):
        if not 0.0 <= getattr(args, name) <= 1.0:
            fail(f"--{name.replace('_', '-')} must be in [0, 1], got {getattr(args, name)}")
    if not math.isfinite(args.q_init):
        fail(f"--q-init must be a finite number, got {args.q_init}")
    if not args.bins:
        fail("--bins needs one number for all dimensions or one per dimension")
    if min(args.bins) < 1:
        fail(f"--bins must be positive, got {' '.join(map(str, args.bins))}")


def check_spaces(args, obs_space, action_space):
    """Whether qlearning.py handles the environment's spaces (make_table checks the grid);
    returns (observation space, action space)."""
    if not isinstance(action_space, gym.spaces.Discrete):  # a table row holds one Q per action
        fail(f"{args.env_id} has a {type(action_space).__name__} action space; qlearning.py "
             "handles Discrete actions" + ("; for continuous ones use ddpg_td3.py or sac.py"
                                           if isinstance(action_space, gym.spaces.Box) else ""))
    if not isinstance(obs_space, (gym.spaces.Discrete, gym.spaces.Box)):
        fail(f"{args.env_id} has a {type(obs_space).__name__} observation space; qlearning.py "
             "handles Discrete (a state index) and Box (cut into a grid) observations")
    return obs_space, action_space


def greedy_policy(models, envs):
    """The evaluation's policy, act(obs, info) -> actions: argmax_a Q(s, a) in each
    environment's state (ties to the lowest action; no random number is drawn)."""
    table = models["table"]
    return lambda obs, info: np.array([table.greedy(table.state(o)) for o in obs])


# What a run is judged on, by environment id (its benchmark task in benchmark.py, its README
# row): (threshold, window of training episodes, "train": the last-window mean at the end,
# or "eval": the final greedy evaluation). Another id: its reward_threshold over 20, "train".
GOALS = {"Taxi-v4": (7.5, 100, "eval", 300_000), "FrozenLake-v1": (0.7, 100, "eval", 200_000),
         "MountainCar-v0": (-150, 100, "eval", 2_000_000)}
MODEL_FLAGS = ("bins", "obs_low", "obs_high")  # a checkpoint's table is made on their grid
# qlearning.py's columns of updates.csv as TensorBoard's scalars, under CleanRL's names
TENSORBOARD_NAMES = {
    "epsilon": "charts/epsilon", "learning_rate": "charts/learning_rate",
    "states_visited": "charts/states_visited", "episodes": "charts/episodes",
    "td_error_abs": "losses/td_error_abs"}


if __name__ == "__main__":
    cli()

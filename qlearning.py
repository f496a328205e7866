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
    # The run folder's flags (--output-dir, --save-model, --eval-checkpoint, --track, ...)
    # come after these: every script shares them, declared once in RunFlags below the banner.
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
        states = (f"{num_states:,}" if num_states < 10**15 else  # too many digits to print
                  f"about 10^{int(num_states.bit_length() * math.log10(2))}")
        fail(f"{what} makes a table of {states} states x {num_actions} actions, "
             f"{human_bytes(size)}: more than half of this machine's memory "
             f"({human_bytes(memory)})" + ("; use fewer --bins" if what.startswith("--") else ""))


def human_bytes(n):
    for unit in ("bytes", "KB", "MB", "GB", "TB", "PB"):
        if n < 1000 or unit == "PB":
            return f"{n:.3g} {unit}" if n < 10**15 else "more than 10^15 PB"
        n //= 1000


def make_env(env_id):
    """The training environment, whose episode returns are recorded by Gymnasium's
    RecordEpisodeStatistics (info["episode"] when an episode ends)."""
    return gym.wrappers.RecordEpisodeStatistics(gym.make(env_id))


def make_vector_env(env_id, num_envs, video_folder=None):
    """The evaluation's environments: num_envs copies of env_id in one synchronous vector
    environment, with SAME_STEP autoreset and episode statistics recorded by Gymnasium's
    wrapper; with video_folder, each records its first episode."""
    def make(i):
        return make_recorded(env_id, video_folder, f"eval-{i}")  # with a video: its first episode

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
    run (Run, below the banner) writes the run folder: step(n) prints progress and
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
    # prepare (below the banner): --eval-checkpoint's model read (the grid's flags), the
    # environment made and checked, every flag checked (a mistake: one line, exit status 2),
    # the seeds set (the environment is seeded by its first reset).
    args, (obs_space, action_space), checkpoint, _ = prepare(args)

    # Set up: the table, the run folder.
    table = make_table(args, args.env_id, obs_space, action_space)
    models = {"table": table}  # what model.npz holds
    run = Run(args, "cpu", models, checkpoint,
              note=f", table of {table.q.shape[0]} states x {table.q.shape[1]} actions")

    # Train (unless evaluating a checkpoint), then draw the table's heat map; then finish:
    # evaluate, save, write, plot.
    env = None if checkpoint else make_env(args.env_id)

    def train_and_draw():
        try:
            train(args, env, table, run)
        finally:  # Ctrl-C too: the table as far as it got
            plot_heat_map(run.path, heat_map(table, getattr(env.unwrapped, "desc", None)))
    return run.train(train_and_draw, env)


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
# End of plumbing/common.py


# ---------------------------------------------------------------------------------------
# What the plumbing asks of qlearning.py: its own checks, its greedy policy, its table's flags
# ---------------------------------------------------------------------------------------
def check_flags(args):
    """qlearning.py's own flags, checked by prepare before training."""
    check_range(args, positive=["log_interval"],
                fraction=["gamma", "start_e", "end_e", "exploration_fraction"])
    if not 0.0 < args.learning_rate <= 1.0:
        fail(f"--learning-rate must be in (0, 1], got {args.learning_rate}")
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


# The plumbing's torch pieces, without torch: TensorBoard's own event writer (the events
# torch's SummaryWriter writes) and model.npz, plain arrays loaded with allow_pickle=False.
from tensorboard.compat.proto.event_pb2 import Event  # noqa: E402
from tensorboard.compat.proto.summary_pb2 import Summary  # noqa: E402
from tensorboard.summary.writer.event_file_writer import EventFileWriter  # noqa: E402

CHECKPOINT = "model.npz"


class TensorBoardWriter(EventFileWriter):
    def add_scalar(self, tag, value, global_step, walltime):
        self.add_event(Event(step=global_step, wall_time=walltime, summary=Summary(
            value=[Summary.Value(tag=tag, simple_value=float(value))])))


def save_checkpoint(path, models, args):
    """Each model's arrays under "name.key", the flags as JSON."""
    np.savez(path, args=np.array(json.dumps(asdict(args))), **{
        f"{name}.{key}": value for name, m in models.items() for key, value in m.state_dict().items()})


def read_checkpoint(path):
    """A model.npz as the dict save_checkpoint wrote."""
    with np.load(path, allow_pickle=False) as f:
        checkpoint = {"args": json.loads(str(f["args"]))}
        for key in f.files:
            name, _, part = key.partition(".")
            if part:
                checkpoint.setdefault(name, {})[part] = f[key]
    return checkpoint


if __name__ == "__main__":
    cli()

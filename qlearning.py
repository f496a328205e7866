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
    python qlearning.py --env-id CartPole-v1 --bins 1 1 6 12 \
        --obs-low -2.4 -3 -0.21 -3.5 --obs-high 2.4 3 0.21 3.5
    python qlearning.py --help

Writes runs/<env_id>__qlearning__<seed>__<unix_time>/ with config.json, episodes.csv,
updates.csv, learning_curve.png (beside the curve, a heat map of the greedy policy when the
table is a map like FrozenLake's or a grid of one or two dimensions), summary.json, and
model.npz with --save-model.
"""

# ---------------------------------------------------------------------------------------
# Imports
# ---------------------------------------------------------------------------------------
import csv
import difflib
import importlib.util
import json
import math
import os
import random
import sys
import time
import zipfile
from collections import deque
from dataclasses import asdict, dataclass, replace
from typing import Optional

import gymnasium as gym
import numpy as np
import tyro
from matplotlib.figure import Figure

SCRIPT = os.path.basename(__file__)


# ---------------------------------------------------------------------------------------
# Flags
# ---------------------------------------------------------------------------------------
@dataclass
class Args:
    env_id: str = "Taxi-v4"
    """any registered Gymnasium id with a Discrete action space and a Discrete or Box observation space"""
    seed: int = 1
    """seeds Python, NumPy and the environments"""
    total_timesteps: int = 300_000
    """the training budget in environment steps"""
    output_dir: str = "runs"
    """where run folders go"""
    exp_name: str = os.path.splitext(SCRIPT)[0]
    """the experiment name, part of the run folder's name"""
    eval_episodes: int = 10
    """greedy evaluation episodes after training (0 skips evaluation)"""
    stop_at_return: Optional[float] = None
    """stop once the mean of the last 20 training episode returns reaches this"""
    save_model: bool = False
    """write model.npz (the table and the grid) into the run folder"""
    eval_checkpoint: Optional[str] = None
    """skip training: load this model.npz and evaluate it"""
    capture_video: bool = False
    """record the evaluation episodes into videos/ in the run folder"""

    # Algorithm
    learning_rate: float = 0.1
    """alpha: the step size of the update, in (0, 1]"""
    anneal_lr: bool = False
    """decay alpha linearly to 0 over the budget (helps stochastic environments settle)"""
    gamma: float = 0.99
    """discount factor"""
    start_e: float = 1.0
    """epsilon at the start of training"""
    end_e: float = 0.01
    """epsilon at the end of the schedule"""
    exploration_fraction: float = 0.2
    """fraction of the budget over which epsilon goes linearly from --start-e to --end-e"""
    q_init: float = 0.0
    """initial value of every Q(s, a); above the true values it makes exploration optimistic"""
    log_interval: int = 1000
    """environment steps between two rows of updates.csv"""

    # The grid for Box observations
    bins: tuple[int, ...] = (20,)
    """Box observations: grid cells per dimension, one number for all or one per dimension"""
    obs_low: Optional[tuple[float, ...]] = None
    """Box observations: lower grid bounds replacing the space's, one number for all or one per dimension"""
    obs_high: Optional[tuple[float, ...]] = None
    """Box observations: upper grid bounds replacing the space's, one number for all or one per dimension"""


class UsageError(Exception):
    """Bad input: reported as one line on stderr with exit status 2, before training."""


# ---------------------------------------------------------------------------------------
# The math
# ---------------------------------------------------------------------------------------
def discretize(obs, low, high, bins):
    """The table row of a Box observation: its cell in a uniform grid, numbered row-major.

    obs, low, high and bins are sequences of d numbers (obs may have any shape; it is
    flattened). Values outside [low, high] go to the edge cell:

        cell_i = clip(floor((x_i - low_i) / (high_i - low_i) * bins_i), 0, bins_i - 1)
        s      = sum_i cell_i * prod_{j > i} bins_j,      0 <= s < prod_i bins_i

    Returns s as an int. Plain Python floats: for a handful of dimensions that is several
    times faster than the same arithmetic on small NumPy arrays.
    """
    index = 0
    for x, lo, hi, n in zip(np.ravel(obs).tolist(), low, high, bins):
        cell = math.floor((x - lo) / (hi - lo) * n)
        index = index * n + min(max(cell, 0), n - 1)
    return index


def q_update(q, s, a, r, s_next, terminated, alpha, gamma):
    """One Q-learning step on the table q [num_states, num_actions], in place.

        delta   = r + gamma * (1 - terminated) * max_a' q[s_next, a'] - q[s, a]
        q[s, a] = q[s, a] + alpha * delta

    A truncated step passes terminated=False: it bootstraps from s_next, the true final
    state. Returns delta (a float).
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

    def save(self, path, env_id, args):
        """model.npz: plain arrays only (the flags as a JSON string), so that it loads with
        allow_pickle=False. An empty bins array marks a Discrete observation space."""
        low, high, bins = self.grid if self.grid is not None else ([], [], [])
        np.savez(path, q=self.q, visits=self.visits, low=np.array(low, dtype=np.float64),
                 high=np.array(high, dtype=np.float64), bins=np.array(bins, dtype=np.int64),
                 env_id=np.array(env_id), args=np.array(json.dumps(asdict(args))))


# ---------------------------------------------------------------------------------------
# Environments, evaluation, plotting, saving and loading
# ---------------------------------------------------------------------------------------
EVAL_STEP_LIMIT = 10_000
"""greedy evaluation episodes of environments without a time limit are cut here: a greedy
policy can walk in a circle forever"""


def fail(message):
    raise UsageError(message)


def human_bytes(n):
    for unit in ("bytes", "KB", "MB", "GB", "TB", "PB"):
        if n < 1000 or unit == "PB":
            return f"{n:.3g} {unit}"
        n /= 1000


def memory_bytes():
    """The machine's physical memory (8 GB where the OS does not say)."""
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (AttributeError, ValueError, OSError):
        return 8 * 1000**3


def check_env(env_id):
    """Build one environment to check its spaces; returns (obs_space, action_space, board),
    board being (nrow, ncol) where the environment lays its Discrete states out on a map
    (FrozenLake), else None."""
    if env_id not in gym.registry:
        close = difflib.get_close_matches(env_id, list(gym.registry), n=3, cutoff=0.5)
        hint = f"; did you mean {', '.join(close)}?" if close else "; see gymnasium.registry"
        fail(f"unknown environment id {env_id!r}{hint}")
    try:
        env = gym.make(env_id)
    except (gym.error.Error, ImportError) as e:
        fail(f"cannot make {env_id}: {str(e).splitlines()[0]}")
    obs_space, action_space = env.observation_space, env.action_space
    board = (getattr(env.unwrapped, "nrow", None), getattr(env.unwrapped, "ncol", None))
    env.close()
    if isinstance(action_space, gym.spaces.Box):
        fail(f"{env_id} has continuous (Box) actions; a Q table needs a finite set of actions: "
             "use ddpg_td3.py")
    if not isinstance(action_space, gym.spaces.Discrete):
        fail(f"{env_id} has a {type(action_space).__name__} action space; qlearning.py handles "
             "Discrete actions")
    if not isinstance(obs_space, (gym.spaces.Discrete, gym.spaces.Box)):
        fail(f"{env_id} has a {type(obs_space).__name__} observation space; qlearning.py "
             "handles Discrete (a state index) and Box (cut into a grid) observations")
    is_map = (isinstance(obs_space, gym.spaces.Discrete) and all(isinstance(x, int) for x in board)
              and board[0] * board[1] == obs_space.n)
    return obs_space, action_space, board if is_map else None


def check_args(args):
    """Everything a user can get wrong in the flags alone, checked before any environment runs."""
    for name in ("total_timesteps", "log_interval"):
        if getattr(args, name) <= 0:
            fail(f"--{name.replace('_', '-')} must be positive, got {getattr(args, name)}")
    if not 0.0 < args.learning_rate <= 1.0:
        fail(f"--learning-rate must be in (0, 1], got {args.learning_rate}")
    for name in ("gamma", "start_e", "end_e", "exploration_fraction"):
        if not 0.0 <= getattr(args, name) <= 1.0:
            fail(f"--{name.replace('_', '-')} must be in [0, 1], got {getattr(args, name)}")
    if not math.isfinite(args.q_init):
        fail(f"--q-init must be a finite number, got {args.q_init}")
    if args.eval_episodes < 0:
        fail(f"--eval-episodes must be 0 or more, got {args.eval_episodes}")
    if not args.bins:
        fail("--bins needs one number for all dimensions or one per dimension")
    if min(args.bins) < 1:
        fail(f"--bins must be positive, got {' '.join(map(str, args.bins))}")
    if args.capture_video and importlib.util.find_spec("moviepy") is None:
        fail("--capture-video needs moviepy: pip install moviepy")


def per_dimension(flag, values, dims):
    """A flag given as one number for all dimensions or one per dimension, as a list of dims."""
    if len(values) == 1:
        return list(values) * dims
    if len(values) != dims:
        fail(f"--{flag} takes one number or one per observation dimension ({dims}), "
             f"got {len(values)}")
    return list(values)


def make_table(args, env_id, obs_space, action_space):
    """A fresh QTable for the environment's spaces, its grid from --bins, --obs-low and
    --obs-high for a Box space; refuses grids with unbounded sides or too large to fit."""
    num_actions = int(action_space.n)
    if isinstance(obs_space, gym.spaces.Discrete):
        if args.bins != Args.bins or args.obs_low is not None or args.obs_high is not None:
            fail(f"--bins, --obs-low and --obs-high are for Box observations; {env_id}'s are "
                 f"Discrete({obs_space.n}), already a table row each")
        grid, num_states = None, int(obs_space.n)
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
    size = num_states * (num_actions + 1) * 8  # float64 Q values and int64 visit counts
    if size > memory_bytes() / 2:
        what = (f"--bins {' '.join(map(str, grid[2]))}" if grid
                else f"{env_id}'s Discrete({num_states})")
        fail(f"{what} makes a table of {num_states:,} states x {num_actions} actions, "
             f"{human_bytes(size)}: more than half of this machine's memory "
             f"({human_bytes(memory_bytes())})" + ("; use fewer --bins" if grid else ""))
    q = np.full((num_states, num_actions), args.q_init, dtype=np.float64)
    start = int(obs_space.start) if grid is None else 0
    return QTable(q, *(grid or (None, None, None)), start=start)


def load_checkpoint(path, env_id, obs_space, action_space):
    """Load a model.npz safely (allow_pickle=False), check it was made for env_id and fits
    its spaces, and return its QTable."""
    if not os.path.isfile(path):
        fail(f"checkpoint {path} does not exist")
    try:
        with np.load(path, allow_pickle=False) as f:
            data = {k: f[k] for k in ("q", "visits", "low", "high", "bins", "env_id")}
        saved_env = str(data["env_id"])
    except (OSError, ValueError, KeyError, EOFError, zipfile.BadZipFile) as e:
        fail(f"checkpoint {path} is not a qlearning.py model.npz ({type(e).__name__}); "
             "make one with --save-model")
    if saved_env != env_id:
        fail(f"checkpoint {path} was made for {saved_env}, not {env_id}; pass --env-id {saved_env}")
    q, bins = data["q"], data["bins"]
    discrete = isinstance(obs_space, gym.spaces.Discrete)
    states = int(obs_space.n) if discrete else int(np.prod(bins))
    dims = 0 if discrete else int(np.prod(obs_space.shape))
    if q.ndim != 2 or q.shape != (states, action_space.n) or len(bins) != dims:
        fail(f"checkpoint {path} holds a table of shape {q.shape} that does not fit {env_id}")
    start = int(obs_space.start) if discrete else 0
    grid = (None, None, None) if discrete else (data["low"], data["high"], bins)
    return QTable(q, *grid, start=start, visits=data["visits"])


def make_env(env_id, video_folder=None, max_episode_steps=None):
    """One environment whose episode returns are recorded by Gymnasium's
    RecordEpisodeStatistics (info["episode"] when an episode ends), optionally filmed."""
    if video_folder is None:
        env = gym.make(env_id, max_episode_steps=max_episode_steps)
    else:
        env = gym.make(env_id, render_mode="rgb_array", max_episode_steps=max_episode_steps)
        env = gym.wrappers.RecordVideo(env, video_folder, name_prefix="eval",
                                       episode_trigger=lambda episode: True)
    return gym.wrappers.RecordEpisodeStatistics(env)


def evaluate(table, env_id, episodes, seed, video_folder=None):
    """Greedy returns of `episodes` episodes, one after another in one environment seeded
    once; environments without a time limit are cut at EVAL_STEP_LIMIT steps."""
    limit = None if gym.spec(env_id).max_episode_steps else EVAL_STEP_LIMIT
    env = make_env(env_id, video_folder, limit)
    returns = np.zeros(episodes)
    for i in range(episodes):
        obs, _ = env.reset(seed=seed if i == 0 else None)
        terminated = truncated = False
        while not (terminated or truncated):
            obs, _, terminated, truncated, info = env.step(table.greedy(table.state(obs)))
        returns[i] = info["episode"]["r"]
    env.close()
    return returns


def heat_map(table, board):
    """What the learning curve figure shows beside the curve when the table is a small
    grid: V(s) = max_a Q(s, a) laid out on it ([rows, cols], NaN where never visited),
    the greedy actions [rows, cols], the axis labels and ticks. None for other tables.

    A FrozenLake-like board is drawn as the map (row 0 at the top); a Box grid of one or
    two dimensions with dimension 0 across and dimension 1 up."""
    values = np.where(table.visits > 0, table.q.max(axis=1), np.nan)
    actions = table.q.argmax(axis=1)
    if table.grid is None:
        if board is None:
            return None
        return {"values": values.reshape(board), "actions": actions.reshape(board),
                "origin": "upper", "xlabel": "column", "ylabel": "row", "ticks": None}
    low, high, bins = table.grid
    if len(bins) > 2:
        return None
    shape = (bins[0], bins[1] if len(bins) == 2 else 1)  # [cell_0, cell_1]: transpose to draw
    ticks = [(f"{low[i]:.3g}", f"{high[i]:.3g}") for i in range(len(bins))] + [("", "")]
    return {"values": values.reshape(shape).T, "actions": actions.reshape(shape).T,
            "origin": "lower", "xlabel": "observation dimension 0",
            "ylabel": "observation dimension 1" if len(bins) == 2 else "", "ticks": ticks[:2]}


class RunWriter:
    """The run folder: config.json, episodes.csv, updates.csv as training goes (flushed,
    so an interrupted run keeps them), then learning_curve.png and summary.json."""

    EPISODE_FIELDS = ["global_step", "wall_time", "episode_return", "episode_length"]

    def __init__(self, args):
        name = f"{args.env_id.replace('/', '-')}__{args.exp_name}__{args.seed}__{int(time.time())}"
        self.path = os.path.join(args.output_dir, name)
        suffix = 1
        while True:
            try:
                os.makedirs(self.path)
                break
            except FileExistsError:
                suffix += 1
                self.path = os.path.join(args.output_dir, f"{name}-{suffix}")
            except OSError as e:
                fail(f"cannot create the run folder {self.path}: {e.strerror}")
        config = {**asdict(args), "device": "cpu", "versions": {
            "torch": None,  # not used: this script is NumPy only
            "gymnasium": gym.__version__, "numpy": np.__version__,
            "python": sys.version.split()[0]}}
        self.write_json("config.json", config)
        self.episodes = []
        self._files = []
        self._episode_csv = self._open_csv("episodes.csv", self.EPISODE_FIELDS)
        self._update_csv = None

    def _open_csv(self, filename, fields):
        f = open(os.path.join(self.path, filename), "w", newline="")
        self._files.append(f)
        writer = csv.DictWriter(f, fieldnames=fields)
        writer.writeheader()
        f.flush()
        return f, writer

    def write_json(self, filename, data):
        with open(os.path.join(self.path, filename), "w") as f:
            json.dump(data, f, indent=2)

    def episode(self, global_step, wall_time, episode_return, episode_length):
        row = dict(zip(self.EPISODE_FIELDS, (global_step, round(wall_time, 4),
                                             float(episode_return), int(episode_length))))
        self.episodes.append(row)
        self._episode_csv[1].writerow(row)

    def update(self, row):
        if self._update_csv is None:
            self._update_csv = self._open_csv("updates.csv", list(row))
        self._update_csv[1].writerow(row)
        for f in self._files:
            f.flush()

    def close(self):
        for f in self._files:
            f.close()

    def plot(self, title, heat=None):
        """Episode return against environment steps: raw points faded, a moving average of
        20 episodes on top; beside it, with `heat` (see heat_map), V(s) as a heat map with
        the greedy action written in each cell when there are at most 400."""
        fig = Figure(figsize=(12 if heat else 7, 4), dpi=100)
        ax = fig.add_subplot(1, 2 if heat else 1, 1)
        steps = np.array([e["global_step"] for e in self.episodes])
        returns = np.array([e["episode_return"] for e in self.episodes])
        ax.scatter(steps, returns, s=6, alpha=0.25, color="tab:blue", label="episode return")
        if len(returns):
            window = min(20, len(returns))
            smooth = np.convolve(returns, np.ones(window) / window, mode="valid")
            ax.plot(steps[window - 1:], smooth, color="tab:blue", lw=2,
                    label=f"mean of last {window}")
            ax.legend(loc="lower right")
        ax.set(xlabel="environment steps", ylabel="episode return", title=title)
        ax.grid(alpha=0.3)
        if heat:
            ax = fig.add_subplot(1, 2, 2)
            values = heat["values"]
            image = ax.imshow(values, origin=heat["origin"], cmap="viridis", aspect="auto")
            fig.colorbar(image, ax=ax, label="V(s) = max_a Q(s, a)")
            rows, cols = values.shape
            if values.size <= 400:
                for (r, c), a in np.ndenumerate(heat["actions"]):
                    if not np.isnan(values[r, c]):
                        ax.text(c, r, str(a), ha="center", va="center", fontsize=7, color="w")
            if heat["ticks"]:  # a grid's bounds at its edges
                ax.set_xticks([-0.5, cols - 0.5], heat["ticks"][0])
                ax.set_yticks([-0.5, rows - 0.5], heat["ticks"][1])
            else:  # a board's rows and columns
                ax.set_xticks(range(cols))
                ax.set_yticks(range(rows))
            ax.set(xlabel=heat["xlabel"], ylabel=heat["ylabel"],
                   title="greedy action in each visited cell, on V(s)")
        fig.tight_layout()
        path = os.path.join(self.path, "learning_curve.png")
        fig.savefig(path)
        return path


def finish(args, run, summary, table, board, start, trained=True):
    """Evaluate greedily, save the model if asked, write summary.json and the curve, and
    print the closing line. An interrupted run skips the evaluation."""
    recent = [e["episode_return"] for e in run.episodes[-20:]]
    summary["train_return_last20"] = float(np.mean(recent)) if recent else None
    summary["wall_time_s"] = round(time.time() - start, 3)
    if args.eval_episodes and not summary["interrupted"]:
        video_folder = os.path.join(run.path, "videos") if args.capture_video else None
        returns = evaluate(table, args.env_id, args.eval_episodes, args.seed + 100_000,
                           video_folder)
        summary["eval_return_mean"] = float(returns.mean())
        summary["eval_return_std"] = float(returns.std())
    if args.save_model and trained:
        table.save(os.path.join(run.path, "model.npz"), args.env_id, args)
    run.close()
    run.write_json("summary.json", summary)
    closing = f"{SCRIPT}: run folder {run.path}"
    for key in ("global_steps", "train_return_last20", "eval_return_mean", "solved_at_step"):
        value = summary[key]
        closing += f" | {key} {value:.2f}" if isinstance(value, float) else f" | {key} {value}"
    if trained:
        path = run.plot(f"{SCRIPT} on {args.env_id}, seed {args.seed}", heat_map(table, board))
        closing += f" | learning curve {path}"
    print(closing)
    return summary


# ---------------------------------------------------------------------------------------
# Training
# ---------------------------------------------------------------------------------------
def main(args: Args) -> dict:
    """Train Q-learning (or, with --eval-checkpoint, evaluate a saved table), write the run
    folder and return the summary."""
    check_args(args)
    obs_space, action_space, board = check_env(args.env_id)
    if args.eval_checkpoint is not None:
        table = load_checkpoint(args.eval_checkpoint, args.env_id, obs_space, action_space)
        if table.grid is not None:  # config.json records the grid the table was made on
            low, high, bins = table.grid
            args = replace(args, bins=tuple(bins), obs_low=tuple(low), obs_high=tuple(high))
    else:
        table = make_table(args, args.env_id, obs_space, action_space)

    random.seed(args.seed)
    np.random.seed(args.seed)
    rng = random.Random(args.seed)  # Python's generator: a tenth of NumPy's cost per draw
    run = RunWriter(args)
    num_states, num_actions = table.q.shape
    print(f"{SCRIPT}: {args.env_id}, seed {args.seed}, table of {num_states} states x "
          f"{num_actions} actions")
    summary = {"algorithm": "qlearning", "env_id": args.env_id, "seed": args.seed,
               "global_steps": 0, "wall_time_s": None, "train_return_last20": None,
               "eval_return_mean": None, "eval_return_std": None,
               "eval_episodes": args.eval_episodes, "solved_at_step": None,
               "solved_at_time_s": None, "interrupted": False}
    start = time.time()
    if args.eval_checkpoint is not None:
        return finish(args, run, summary, table, board, start, trained=False)

    env = make_env(args.env_id)
    total = args.total_timesteps
    exploration_steps = args.exploration_fraction * total
    last20 = deque(maxlen=20)
    abs_deltas = 0.0
    global_step, last_print, last_log = 0, start, 0
    q, gamma = table.q, args.gamma

    obs, _ = env.reset(seed=args.seed)
    s = table.state(obs)
    try:
        while True:
            epsilon = linear_schedule(args.start_e, args.end_e, exploration_steps, global_step)
            alpha = args.learning_rate
            if args.anneal_lr:
                alpha *= 1 - global_step / total
            a = table.act(s, epsilon, rng)
            obs, reward, terminated, truncated, info = env.step(a)
            global_step += 1
            s_next = table.state(obs)  # after a truncation: the true final state, bootstrapped
            delta = q_update(q, s, a, reward, s_next, terminated, alpha, gamma)
            table.visits[s] += 1
            abs_deltas += abs(delta)
            if not math.isfinite(delta):
                print(f"{SCRIPT}: the TD error became {delta} at step {global_step}; stopping "
                      "(check the rewards, or lower --gamma)")
                summary["interrupted"] = True
                break
            stop = global_step == total
            if terminated or truncated:
                last20.append(info["episode"]["r"])
                run.episode(global_step, time.time() - start, info["episode"]["r"],
                            info["episode"]["l"])
                obs, _ = env.reset()
                s_next = table.state(obs)
                if (args.stop_at_return is not None and len(last20) == 20
                        and np.mean(last20) >= args.stop_at_return):
                    summary["solved_at_step"] = global_step
                    summary["solved_at_time_s"] = round(time.time() - start, 3)
                    stop = True
            s = s_next

            if global_step % args.log_interval == 0 or stop:
                now = time.time()
                sps = int(global_step / max(now - start, 1e-9))
                run.update({"global_step": global_step, "wall_time": round(now - start, 4),
                            "sps": sps, "epsilon": epsilon, "learning_rate": alpha,
                            "td_error_abs": abs_deltas / (global_step - last_log),
                            "states_visited": int(np.count_nonzero(table.visits)),
                            "episodes": len(run.episodes)})
                abs_deltas, last_log = 0.0, global_step
                if now - last_print >= 2.0 or stop:
                    last_print = now
                    recent = f"{np.mean(last20):.2f}" if last20 else "n/a"
                    print(f"step {global_step:>9} | sps {sps:>6} | epsilon {epsilon:.3f} | "
                          f"return (last 20) {recent}")
            if stop:
                break
    except KeyboardInterrupt:
        print(f"{SCRIPT}: interrupted; writing what the run has so far")
        summary["interrupted"] = True
    finally:
        env.close()
    summary["global_steps"] = global_step
    return finish(args, run, summary, table, board, start)


if __name__ == "__main__":
    try:
        main(tyro.cli(Args))
    except UsageError as e:
        print(f"{SCRIPT}: error: {e}", file=sys.stderr)
        sys.exit(2)

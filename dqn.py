"""Deep Q-Network (DQN) with experience replay and a target network, in one file.

DQN learns the action-value function Q(s, a) of the greedy policy with a neural network.
It acts epsilon-greedily (a random action with probability epsilon, which decays linearly,
else the action of highest Q), stores every transition in a replay buffer, and regresses
Q(s, a) on minibatches sampled uniformly from it towards a bootstrapped target computed
with a slowly moving copy of the network, the target network.

Key equations (a batch of transitions (s, a, r, s', terminated) from the replay buffer):

    target      y = r + gamma * (1 - terminated) * max_a' Q_target(s', a')
    double DQN  y = r + gamma * (1 - terminated) * Q_target(s', argmax_a' Q(s', a'))
    loss        L = mean( huber(Q(s, a) - y) )   or   mean( (Q(s, a) - y)^2 )
    target net  theta' <- tau * theta + (1 - tau) * theta'   every C steps (tau = 1: copy)
    epsilon     eps_t = start_e + (end_e - start_e) * min(1, t / (fraction * budget))

A time-limit truncation is not a termination: the buffer stores the true final observation
(Gymnasium's info["final_obs"]) as s' and the target bootstraps from it; only a terminated
step drops the bootstrap term.

Papers:
    Mnih et al. 2013, "Playing Atari with Deep Reinforcement Learning", arXiv:1312.5602
    Mnih et al. 2015, "Human-level control through deep reinforcement learning", Nature 518
    van Hasselt, Guez & Silver 2016, "Deep Reinforcement Learning with Double Q-learning",
        AAAI 2016
    Lillicrap et al. 2016, "Continuous control with deep reinforcement learning", ICLR 2016
        (the soft target update with tau)
    Pardo et al. 2018, "Time Limits in Reinforcement Learning", ICML 2018

The defaults update in bursts: every 64 environment steps, 32 gradient steps regress Q on
targets from the target network, which is then copied from Q (C = 64, tau = 1), so each
update fits the Bellman backup of the previous one, a little like fitted Q iteration.

Run:
    python dqn.py --env-id CartPole-v1
    python dqn.py --env-id CartPole-v1 --no-double-dqn --loss huber
    python dqn.py --env-id Acrobot-v1
    python dqn.py --help

Writes runs/<env_id>__dqn__<seed>__<unix_time>/ with config.json, episodes.csv,
updates.csv, learning_curve.png, summary.json, and model.pt with --save-model.
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
import warnings
from collections import deque
from dataclasses import asdict, dataclass, replace
from typing import Literal, Optional

import gymnasium as gym
import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
import tyro
from matplotlib.figure import Figure

SCRIPT = os.path.basename(__file__)


# ---------------------------------------------------------------------------------------
# Flags
# ---------------------------------------------------------------------------------------
@dataclass
class Args:
    env_id: str = "CartPole-v1"
    """any registered Gymnasium id with a Discrete action space and a flat Box observation"""
    seed: int = 1
    """seeds Python, NumPy, torch and the environments"""
    total_timesteps: int = 50_000
    """the training budget in environment steps, all environments together"""
    cuda: bool = True
    """use the GPU when one is present"""
    output_dir: str = "runs"
    """where run folders go"""
    exp_name: str = os.path.splitext(SCRIPT)[0]
    """the experiment name, part of the run folder's name"""
    eval_episodes: int = 10
    """greedy evaluation episodes after training (0 skips evaluation)"""
    stop_at_return: Optional[float] = None
    """stop once the mean of the last 20 training episode returns reaches this"""
    save_model: bool = False
    """write model.pt into the run folder"""
    eval_checkpoint: Optional[str] = None
    """skip training: load this model.pt and evaluate it"""
    capture_video: bool = False
    """record the evaluation episodes into videos/ in the run folder"""

    # Algorithm
    num_envs: int = 1
    """N: parallel environments (synchronous vector environment)"""
    learning_rate: float = 1e-3
    """Adam learning rate"""
    buffer_size: int = 50_000
    """replay buffer capacity in transitions, the oldest overwritten when it is full (never
    allocated larger than --total-timesteps)"""
    gamma: float = 0.99
    """discount factor"""
    tau: float = 1.0
    """target network update rate: theta' <- tau*theta + (1 - tau)*theta' (1 is a hard copy)"""
    target_network_frequency: int = 64
    """environment steps between target network updates"""
    batch_size: int = 256
    """transitions sampled from the replay buffer for each gradient step"""
    start_e: float = 1.0
    """epsilon of the epsilon-greedy policy at the start"""
    end_e: float = 0.01
    """epsilon at the end of the linear decay, kept from then on"""
    exploration_fraction: float = 0.1
    """the fraction of the budget over which epsilon decays from start_e to end_e"""
    learning_starts: int = 1000
    """environment steps of experience collected before the first gradient step"""
    train_frequency: int = 64
    """environment steps between updates"""
    gradient_steps: int = 32
    """gradient steps in each update"""
    loss: Literal["huber", "mse"] = "mse"
    """the regression loss on the TD error: Huber (smooth L1, delta 1) or squared error"""
    max_grad_norm: float = 10.0
    """gradient clipping: the largest global norm of the gradient"""
    double_dqn: bool = True
    """double DQN: choose the next action with the online network, value it with the target"""
    hidden_size: int = 128
    """width of the two hidden layers of the Q-network"""
    log_interval: int = 1_000
    """environment steps between rows of updates.csv"""


class UsageError(Exception):
    """Bad input: reported as one line on stderr with exit status 2, before training."""


# ---------------------------------------------------------------------------------------
# The math
# ---------------------------------------------------------------------------------------
def linear_schedule(start_e, end_e, duration, t):
    """Epsilon at environment step t: linear from start_e at t = 0 to end_e at t = duration,
    then constant.

        eps_t = start_e + (end_e - start_e) * min(1, t / duration)      (end_e if duration = 0)
    """
    if duration <= 0:
        return end_e
    return start_e + (end_e - start_e) * min(1.0, t / duration)


def crossings(global_step, num_envs, every):
    """How many multiples of `every` lie among the environment steps (g - N, g] that the
    last step of N environments took, g the global step after it:

        floor(g / every) - floor((g - N) / every)

    Updates, target updates and log rows happen that many times, so their rates in
    environment steps are the same whatever N is.
    """
    return global_step // every - (global_step - num_envs) // every


def dqn_targets(rewards, next_q_target, terminated, gamma, next_q_online=None):
    """TD targets of a batch of B transitions.

    rewards [B]; terminated [B], 0/1 or bool; next_q_target [B, A] = Q_target(s', .) and,
    for double DQN, next_q_online [B, A] = Q(s', .) of the online network:

        y = r + gamma * (1 - terminated) * max_a Q_target(s', a)                    (DQN)
        y = r + gamma * (1 - terminated) * Q_target(s', argmax_a Q(s', a))   (double DQN)

    A truncated step is not terminated: it bootstraps from s', its true final observation.
    Returns y [B].
    """
    if next_q_online is None:
        next_value = next_q_target.max(dim=1).values
    else:
        next_action = next_q_online.argmax(dim=1, keepdim=True)
        next_value = next_q_target.gather(1, next_action).squeeze(1)
    return rewards + gamma * (1.0 - terminated.to(rewards.dtype)) * next_value


def td_loss(q_values, actions, targets, loss="mse"):
    """The regression loss of Q(s, a) towards the targets on a batch of B transitions.

    q_values [B, A] = Q(s, .), actions [B] (long), targets [B]; with delta = Q(s, a) - y:

        huber:  mean( 0.5 * delta^2 if |delta| <= 1 else |delta| - 0.5 )
        mse:    mean( delta^2 )

    Returns (loss, Q(s, a) [B]).
    """
    q_taken = q_values.gather(1, actions.unsqueeze(1)).squeeze(1)
    if loss == "huber":
        return F.smooth_l1_loss(q_taken, targets), q_taken
    return F.mse_loss(q_taken, targets), q_taken


class ReplayBuffer:
    """A ring buffer of the last `capacity` transitions (s, a, r, s', terminated) in
    preallocated NumPy arrays, so memory stays constant however long the run.

    Row i holds one transition: obs s, action a, reward r, next_obs s' and the terminated
    flag. s' is the true final observation where the episode ended at that step (not the
    next episode's first one). Transitions of N environments arrive N rows at a time, in
    environment order; capacity is a multiple of N, so a write never wraps mid-way. Writing
    a row into NumPy costs about a microsecond; only the sampled batch goes to the device.
    """

    def __init__(self, capacity, obs_shape, device, rng):
        self.capacity, self.pos, self.size, self.device, self.rng = capacity, 0, 0, device, rng
        self.obs = np.zeros((capacity, *obs_shape), dtype=np.float32)
        self.next_obs = np.zeros((capacity, *obs_shape), dtype=np.float32)
        self.actions = np.zeros(capacity, dtype=np.int64)
        self.rewards = np.zeros(capacity, dtype=np.float32)
        self.terminated = np.zeros(capacity, dtype=np.float32)

    def add(self, obs, next_obs, actions, rewards, terminated):
        """Store N transitions (arrays with N rows) over the oldest ones."""
        rows = slice(self.pos, self.pos + len(actions))
        self.obs[rows] = obs
        self.next_obs[rows] = next_obs
        self.actions[rows] = actions
        self.rewards[rows] = rewards
        self.terminated[rows] = terminated
        self.pos = (self.pos + len(actions)) % self.capacity
        self.size = min(self.size + len(actions), self.capacity)

    def sample(self, batch_size):
        """batch_size transitions drawn uniformly, with replacement, from those stored: one
        index vector picks the same rows of every field. Returns tensors on the device
        (obs, actions, rewards, next_obs, terminated)."""
        idx = self.rng.integers(self.size, size=batch_size)
        return tuple(torch.from_numpy(field[idx]).to(self.device) for field in
                     (self.obs, self.actions, self.rewards, self.next_obs, self.terminated))


# ---------------------------------------------------------------------------------------
# Networks
# ---------------------------------------------------------------------------------------
class QNetwork(nn.Module):
    """An MLP from an observation to one Q-value per action: Q(s, .) [B, A]."""

    def __init__(self, obs_dim, num_actions, hidden_size=128):
        super().__init__()
        self.fc1 = nn.Linear(obs_dim, hidden_size)
        self.fc2 = nn.Linear(hidden_size, hidden_size)
        self.fc3 = nn.Linear(hidden_size, num_actions)

    def forward(self, obs):
        return self.fc3(F.relu(self.fc2(F.relu(self.fc1(obs)))))


def flatten_parameters(module):
    """Move the module's parameters into one flat tensor and their gradients into another,
    each parameter and its .grad becoming a view of a slice of them; returns (params,
    grads), each [P] with P the number of weights. Backward accumulates into the existing
    .grad views in place, so grads.zero_() clears them all.

    Adam, gradient clipping and the target update then take a handful of tensor operations
    on the whole network instead of a handful per layer: on a small MLP that per-operation
    overhead, not the arithmetic, is most of a gradient step. Call it after .to(device).
    """
    tensors = list(module.parameters())
    params = torch.cat([p.detach().reshape(-1) for p in tensors])
    grads = torch.zeros_like(params)
    offset = 0
    for p in tensors:
        n = p.numel()
        p.data = params[offset:offset + n].view_as(p)
        p.grad = grads[offset:offset + n].view_as(p)
        offset += n
    return params, grads


def clip_grad_norm(grads, max_norm):
    """g <- g * min(1, max_norm / ||g||) on the flat gradient g, without reading the norm
    back to Python (no device sync). Returns ||g||."""
    norm = torch.linalg.vector_norm(grads)
    grads.mul_(torch.clamp(max_norm / (norm + 1e-6), max=1.0))
    return norm


class Adam:
    """Adam (Kingma & Ba 2015) on a flat parameter vector, the same update as
    torch.optim.Adam written out: the first use of torch.optim imports torch._dynamo, about
    a second, a noticeable part of this script's whole CartPole run. With gradient g, at
    step k (all operations elementwise):

        m <- beta1 * m + (1 - beta1) * g          v <- beta2 * v + (1 - beta2) * g^2
        p <- p - lr * (m / (1 - beta1^k)) / (sqrt(v / (1 - beta2^k)) + eps)
    """

    def __init__(self, params, grads, lr, betas=(0.9, 0.999), eps=1e-8):
        self.params, self.grads = params, grads
        self.lr, self.betas, self.eps, self.k = lr, betas, eps, 0
        self.m, self.v = torch.zeros_like(params), torch.zeros_like(params)

    def zero_grad(self):
        self.grads.zero_()

    @torch.no_grad()
    def step(self):
        beta1, beta2 = self.betas
        self.k += 1
        step_size = self.lr / (1 - beta1 ** self.k)
        v_correction = math.sqrt(1 - beta2 ** self.k)
        self.m.lerp_(self.grads, 1 - beta1)
        self.v.mul_(beta2).addcmul_(self.grads, self.grads, value=1 - beta2)
        self.params.addcdiv_(self.m, (self.v.sqrt() / v_correction).add_(self.eps),
                             value=-step_size)


# ---------------------------------------------------------------------------------------
# Environments, evaluation, plotting, saving and loading
# ---------------------------------------------------------------------------------------
def fail(message):
    raise UsageError(message)


def check_env(env_id):
    """Build one environment to check its spaces; returns (obs_shape, number of actions)."""
    if env_id not in gym.registry:
        close = difflib.get_close_matches(env_id, list(gym.registry), n=3, cutoff=0.5)
        hint = f"; did you mean {', '.join(close)}?" if close else "; see gymnasium.registry"
        fail(f"unknown environment id {env_id!r}{hint}")
    try:
        env = gym.make(env_id)
    except (gym.error.Error, ImportError) as e:
        fail(f"cannot make {env_id}: {str(e).splitlines()[0]}")
    obs_space, action_space = env.observation_space, env.action_space
    env.close()
    if isinstance(action_space, gym.spaces.Box):
        fail(f"{env_id} has a continuous (Box) action space; dqn.py needs Discrete actions "
             "(use ddpg_td3.py, or ppo.py)")
    if not isinstance(action_space, gym.spaces.Discrete):
        fail(f"{env_id} has a {type(action_space).__name__} action space; dqn.py handles "
             "Discrete ones (for MultiDiscrete or masked actions see ppo_masked.py)")
    if not isinstance(obs_space, gym.spaces.Box):
        fail(f"{env_id} has a {type(obs_space).__name__} observation space; dqn.py needs a "
             "Box (qlearning.py uses a table for Discrete ones)")
    if len(obs_space.shape) != 1:
        fail(f"{env_id} has observations of shape {obs_space.shape} (images?); dqn.py's "
             "MLP takes flat vectors and this script has no CNN")
    return obs_space.shape, int(action_space.n)


def check_args(args):
    """Everything a user can get wrong, checked before any environment runs."""
    for name in ("total_timesteps", "num_envs", "buffer_size", "batch_size",
                 "target_network_frequency", "train_frequency", "gradient_steps", "hidden_size",
                 "log_interval"):
        if getattr(args, name) <= 0:
            fail(f"--{name.replace('_', '-')} must be positive, got {getattr(args, name)}")
    for name in ("learning_rate", "max_grad_norm"):
        if not getattr(args, name) > 0:
            fail(f"--{name.replace('_', '-')} must be positive, got {getattr(args, name)}")
    for name in ("gamma", "start_e", "end_e", "exploration_fraction"):
        if not 0.0 <= getattr(args, name) <= 1.0:
            fail(f"--{name.replace('_', '-')} must be in [0, 1], got {getattr(args, name)}")
    if not 0.0 < args.tau <= 1.0:
        fail(f"--tau must be in (0, 1], got {args.tau}")
    if args.learning_starts < 0:
        fail(f"--learning-starts must be 0 or more, got {args.learning_starts}")
    if args.eval_episodes < 0:
        fail(f"--eval-episodes must be 0 or more, got {args.eval_episodes}")
    if args.buffer_size < args.batch_size:
        fail(f"--buffer-size {args.buffer_size} is smaller than one batch (--batch-size "
             f"{args.batch_size}); raise it or shrink the batch")
    if args.buffer_size % args.num_envs:
        fail(f"--buffer-size {args.buffer_size} is not divisible by --num-envs "
             f"{args.num_envs}; pick a multiple of {args.num_envs}")
    if args.eval_checkpoint is None:
        if args.total_timesteps < args.num_envs:
            fail(f"--total-timesteps {args.total_timesteps} is less than one step of the "
                 f"{args.num_envs} environments; raise it")
        if args.learning_starts >= args.total_timesteps:
            fail(f"--learning-starts {args.learning_starts} is not below --total-timesteps "
                 f"{args.total_timesteps}: the network would never train; lower it")
    if args.capture_video and importlib.util.find_spec("moviepy") is None:
        fail("--capture-video needs moviepy: pip install moviepy")


def make_vector_env(env_id, num_envs, video_folder=None):
    """N copies of env_id in one synchronous vector environment, with SAME_STEP autoreset
    (the observation after an episode ends is the next episode's first; the true last one
    is in info["final_obs"]) and episode statistics recorded by Gymnasium's wrapper."""
    def thunk(i):
        def make():
            if video_folder is None:
                return gym.make(env_id)
            env = gym.make(env_id, render_mode="rgb_array")
            with warnings.catch_warnings():  # the environments share one folder on purpose
                warnings.filterwarnings("ignore", message=".*Overwriting existing videos")
                return gym.wrappers.RecordVideo(env, video_folder, name_prefix=f"eval-{i}",
                                               episode_trigger=lambda episode: episode == 0)
        return make

    envs = gym.vector.SyncVectorEnv([thunk(i) for i in range(num_envs)],
                                    autoreset_mode=gym.vector.AutoresetMode.SAME_STEP)
    return gym.wrappers.vector.RecordEpisodeStatistics(envs)


def greedy_actions(q_network, obs, device):
    """argmax_a Q(s, a) for a NumPy batch of observations, as a NumPy array."""
    with torch.inference_mode():
        obs = torch.from_numpy(np.asarray(obs, dtype=np.float32)).to(device)
        return q_network(obs).argmax(dim=1).cpu().numpy()


def evaluate(q_network, env_id, episodes, seed, device, video_folder=None):
    """Greedy returns of `episodes` episodes, one per environment of a vector env, all at
    once."""
    envs = make_vector_env(env_id, episodes, video_folder)
    obs, _ = envs.reset(seed=seed)
    returns = np.full(episodes, np.nan)
    while np.isnan(returns).any():
        obs, _, _, _, info = envs.step(greedy_actions(q_network, obs, device))
        if "_episode" in info:
            first = info["_episode"] & np.isnan(returns)
            returns[first] = info["episode"]["r"][first]
    envs.close()
    return returns


class RunWriter:
    """The run folder: config.json, episodes.csv, updates.csv as training goes (flushed,
    so an interrupted run keeps them), then learning_curve.png and summary.json."""

    EPISODE_FIELDS = ["global_step", "wall_time", "episode_return", "episode_length"]

    def __init__(self, args, device):
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
        config = {**asdict(args), "device": str(device), "versions": {
            "torch": torch.__version__, "gymnasium": gym.__version__, "numpy": np.__version__,
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

    def plot(self, title):
        """Episode return against environment steps: raw points faded, a moving average of
        20 episodes on top."""
        steps = np.array([e["global_step"] for e in self.episodes])
        returns = np.array([e["episode_return"] for e in self.episodes])
        fig = Figure(figsize=(7, 4), dpi=100)
        ax = fig.add_subplot()
        ax.scatter(steps, returns, s=6, alpha=0.25, color="tab:blue", label="episode return")
        if len(returns):
            window = min(20, len(returns))
            smooth = np.convolve(returns, np.ones(window) / window, mode="valid")
            ax.plot(steps[window - 1:], smooth, color="tab:blue", lw=2,
                    label=f"mean of last {window}")
            ax.legend(loc="lower right")
        ax.set(xlabel="environment steps", ylabel="episode return", title=title)
        ax.grid(alpha=0.3)
        fig.tight_layout()
        path = os.path.join(self.path, "learning_curve.png")
        fig.savefig(path)
        return path


def save_checkpoint(path, q_network, args):
    torch.save({"q_network": q_network.state_dict(), "args": asdict(args)}, path)


def load_checkpoint(path, env_id):
    """Load a model.pt safely (weights_only) and check it was made for env_id."""
    if not os.path.isfile(path):
        fail(f"checkpoint {path} does not exist")
    try:
        checkpoint = torch.load(path, map_location="cpu", weights_only=True)
        saved = checkpoint["args"]
        if "q_network" not in checkpoint or not {"env_id", "hidden_size"} <= set(saved):
            raise KeyError("missing entries")
    except Exception as e:
        fail(f"checkpoint {path} is not a dqn.py model.pt ({type(e).__name__}); "
             "make one with --save-model")
    if saved["env_id"] != env_id:
        fail(f"checkpoint {path} was made for {saved['env_id']}, not {env_id}; "
             f"pass --env-id {saved['env_id']}")
    return checkpoint


def finish(args, run, summary, q_network, device, start, trained=True):
    """Evaluate greedily, save the model if asked, write summary.json and the curve, and
    print the closing line. An interrupted run skips the evaluation."""
    recent = [e["episode_return"] for e in run.episodes[-20:]]
    summary["train_return_last20"] = float(np.mean(recent)) if recent else None
    summary["wall_time_s"] = round(time.time() - start, 3)
    if args.eval_episodes and not summary["interrupted"]:
        video_folder = os.path.join(run.path, "videos") if args.capture_video else None
        returns = evaluate(q_network, args.env_id, args.eval_episodes, args.seed + 100_000,
                           device, video_folder)
        summary["eval_return_mean"] = float(returns.mean())
        summary["eval_return_std"] = float(returns.std())
    if args.save_model and trained:
        save_checkpoint(os.path.join(run.path, "model.pt"), q_network, args)
    run.close()
    run.write_json("summary.json", summary)
    closing = f"{SCRIPT}: run folder {run.path}"
    for key in ("global_steps", "train_return_last20", "eval_return_mean", "solved_at_step"):
        value = summary[key]
        closing += f" | {key} {value:.2f}" if isinstance(value, float) else f" | {key} {value}"
    if trained:
        closing += f" | learning curve {run.plot(f'{SCRIPT} on {args.env_id}, seed {args.seed}')}"
    print(closing)
    return summary


# ---------------------------------------------------------------------------------------
# Training
# ---------------------------------------------------------------------------------------
def main(args: Args) -> dict:
    """Train DQN (or, with --eval-checkpoint, evaluate a saved model), write the run
    folder and return the summary."""
    check_args(args)
    obs_shape, num_actions = check_env(args.env_id)
    checkpoint = None
    if args.eval_checkpoint is not None:
        checkpoint = load_checkpoint(args.eval_checkpoint, args.env_id)
        args = replace(args, hidden_size=checkpoint["args"]["hidden_size"])

    random.seed(args.seed)
    np.random.seed(args.seed)
    torch.manual_seed(args.seed)
    rng = np.random.default_rng(args.seed)  # exploration
    device = torch.device("cuda" if args.cuda and torch.cuda.is_available() else "cpu")
    if device.type == "cpu":
        torch.set_num_threads(1)  # a small MLP runs faster without the thread pool
        # Adam's first moments of dead ReLU units decay into denormal numbers, which x86
        # handles on a slow path: flushing them to 0 made Adam's step ~3x faster here.
        torch.set_flush_denormal(True)
    q_network = QNetwork(obs_shape[0], num_actions, args.hidden_size).to(device)
    if checkpoint is not None:
        try:
            q_network.load_state_dict(checkpoint["q_network"])
        except (RuntimeError, KeyError, AttributeError) as e:
            fail(f"checkpoint {args.eval_checkpoint} does not fit {args.env_id}'s network: "
                 f"{str(e).splitlines()[0]}")
    run = RunWriter(args, device)
    print(f"{SCRIPT}: {args.env_id}, seed {args.seed}, device {device}")
    summary = {"algorithm": "dqn", "env_id": args.env_id, "seed": args.seed, "global_steps": 0,
               "wall_time_s": None, "train_return_last20": None, "eval_return_mean": None,
               "eval_return_std": None, "eval_episodes": args.eval_episodes,
               "solved_at_step": None, "solved_at_time_s": None, "interrupted": False}
    start = time.time()
    if checkpoint is not None:
        return finish(args, run, summary, q_network, device, start, trained=False)

    envs = make_vector_env(args.env_id, args.num_envs)
    target_network = QNetwork(obs_shape[0], num_actions, args.hidden_size).to(device)
    params, grads = flatten_parameters(q_network)
    target_params, _ = flatten_parameters(target_network)
    target_params.copy_(params)
    optimizer = Adam(params, grads, lr=args.learning_rate)
    num_iterations = args.total_timesteps // args.num_envs
    # never larger than the run needs: num_iterations steps of num_envs transitions
    buffer = ReplayBuffer(min(args.buffer_size, num_iterations * args.num_envs), obs_shape,
                          device, rng)
    exploration_steps = args.exploration_fraction * args.total_timesteps
    last20 = deque(maxlen=20)
    global_step, gradient_step, last_print, epsilon = 0, 0, start, args.start_e
    # Sums over the gradient steps since the last row of updates.csv, kept on the device
    # so that no step waits for a value to come back to Python.
    loss_sum, q_sum, steps_since_row = torch.zeros((), device=device), torch.zeros((), device=device), 0

    obs, _ = envs.reset(seed=args.seed)
    try:
        for iteration in range(num_iterations):
            # Act: epsilon-greedy, the network consulted only when some environment needs it.
            epsilon = linear_schedule(args.start_e, args.end_e, exploration_steps, global_step)
            explore = rng.random(args.num_envs) < epsilon
            actions = rng.integers(num_actions, size=args.num_envs)
            if not explore.all():
                actions = np.where(explore, actions, greedy_actions(q_network, obs, device))
            next_obs, rewards, terminated, truncated, info = envs.step(actions)
            global_step += args.num_envs

            # Store: where an episode ended, s' is its true final observation, not the
            # first observation of the next episode that SAME_STEP autoreset returned.
            real_next_obs = next_obs
            if "final_obs" in info:
                real_next_obs = next_obs.copy()
                for i in np.flatnonzero(info["_final_obs"]):
                    real_next_obs[i] = info["final_obs"][i]
            buffer.add(obs, real_next_obs, actions, rewards, terminated)
            obs = next_obs

            if "_episode" in info:
                for i in np.flatnonzero(info["_episode"]):
                    last20.append(info["episode"]["r"][i])
                    run.episode(global_step, time.time() - start, info["episode"]["r"][i],
                                info["episode"]["l"][i])
                if (args.stop_at_return is not None and len(last20) == 20
                        and np.mean(last20) >= args.stop_at_return):
                    summary["solved_at_step"] = global_step
                    summary["solved_at_time_s"] = round(time.time() - start, 3)
                    break

            if global_step <= args.learning_starts:
                continue

            # Learn: gradient steps on minibatches sampled from the replay buffer.
            for _ in range(crossings(global_step, args.num_envs, args.train_frequency)
                           * args.gradient_steps):
                b_obs, b_actions, b_rewards, b_next_obs, b_terminated = buffer.sample(args.batch_size)
                with torch.no_grad():
                    targets = dqn_targets(b_rewards, target_network(b_next_obs), b_terminated,
                                          args.gamma,
                                          q_network(b_next_obs) if args.double_dqn else None)
                loss, q_taken = td_loss(q_network(b_obs), b_actions, targets, args.loss)
                optimizer.zero_grad()
                loss.backward()
                clip_grad_norm(grads, args.max_grad_norm)
                optimizer.step()
                gradient_step += 1
                steps_since_row += 1
                loss_sum += loss.detach()
                q_sum += q_taken.detach().mean()
            for _ in range(crossings(global_step, args.num_envs, args.target_network_frequency)):
                target_params.lerp_(params, args.tau)  # theta' <- tau*theta + (1 - tau)*theta'

            last_iteration = iteration == num_iterations - 1
            if steps_since_row and (crossings(global_step, args.num_envs, args.log_interval) or last_iteration):
                mean_loss = loss_sum.item() / steps_since_row
                if not math.isfinite(mean_loss):
                    print(f"{SCRIPT}: the loss became NaN at step {global_step}; stopping "
                          "(try a lower --learning-rate)")
                    summary["interrupted"] = True
                    break
                now = time.time()
                sps = int(global_step / (now - start))
                run.update({"global_step": global_step, "wall_time": round(now - start, 4),
                            "sps": sps, "epsilon": round(epsilon, 6), "loss": mean_loss,
                            "q_mean": q_sum.item() / steps_since_row,
                            "gradient_steps": gradient_step, "buffer_size": buffer.size})
                loss_sum.zero_()
                q_sum.zero_()
                steps_since_row = 0
                if now - last_print >= 2.0 or last_iteration:
                    last_print = now
                    recent = f"{np.mean(last20):.1f}" if last20 else "n/a"
                    print(f"step {global_step:>9} | sps {sps:>6} | epsilon {epsilon:.3f} | "
                          f"return (last 20) {recent}")
    except KeyboardInterrupt:
        print(f"{SCRIPT}: interrupted; writing what the run has so far")
        summary["interrupted"] = True
    finally:
        envs.close()
    summary["global_steps"] = global_step
    return finish(args, run, summary, q_network, device, start)


if __name__ == "__main__":
    try:
        main(tyro.cli(Args))
    except UsageError as e:
        print(f"{SCRIPT}: error: {e}", file=sys.stderr)
        sys.exit(2)

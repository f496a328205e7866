# From plainrl (MIT licence, (c) 2026 the plainrl authors): keep this line in a copy.
"""Parallelized Q-Network (PQN): DQN without a replay buffer or a target network, in one file.

PQN learns Q(s, a) as DQN does, but collects its data as PPO does: N environments step
together for T steps with an epsilon-greedy policy, the rollout's targets are Q(lambda)
returns computed backward through it, and a few epochs of minibatch regression on those
targets follow; then the rollout is thrown away. What keeps it stable without a buffer or a
target copy is LayerNorm in the network (Gallici et al. 2024: normalized features keep the
TD update from diverging) and the many environments, less correlated than one.

Key equations (t indexes the T steps of one environment's rollout):

    epsilon   a_t = argmax_a Q(s_t, a), or uniform with probability eps_t (each environment
              draws on its own); eps_t = start_e + (end_e - start_e) * min(1, t / (fraction * budget))
    Q(lambda) G_t = r_t + gamma * (1 - terminated_t) * ((1 - lambda) * max_a Q(s'_t, a)
                                                        + lambda * G_{t+1})
              where s'_t is the true next observation, and G_{t+1} becomes max_a Q(s'_t, a)
              where the episode was cut (truncated_t) or the rollout ends (t = T - 1)
    loss      L = mean( 0.5 * (Q(s_t, a_t) - G_t)^2 )     over a minibatch of the rollout
    network   Linear -> LayerNorm -> ReLU, twice, then a linear head: one Q-value per action

lambda = 0 gives DQN's one-step target; lambda = 1 the Monte Carlo return bootstrapped only
at the rollout's end. A time-limit truncation is not a termination (the authors' code treats
it as one). The optimizer is RAdam, the rate decaying to 0. Images (MinAtar's 10 x 10
grids) get one 16-filter 3 x 3 convolution before the MLP, the MinAtar paper's encoder.

Papers:
    Gallici et al. 2024, "Simplifying Deep Temporal Difference Learning", arXiv:2407.04811
    Peng & Williams 1996, "Incremental Multi-Step Q-Learning", Machine Learning 22 (Q(lambda))
    Ba, Kiros & Hinton 2016, "Layer Normalization", arXiv:1607.06450
    Mnih et al. 2015, "Human-level control through deep reinforcement learning", Nature 518
    Young & Tian 2019, "MinAtar: An Atari-Inspired Testbed for Thorough and Reproducible
        Reinforcement Learning Experiments", arXiv:1903.03176 (the small-grid network)

Run:
    python pqn.py --env-id CartPole-v1
    python pqn.py --env-id CartPole-v1 --q-lambda 0     # DQN's one-step target
    python pqn.py --env-id MinAtar/Breakout-v1 --total-timesteps 1000000   # the MinAtar settings

Writes runs/<env_id>__pqn__<seed>__<unix_time>/ (plainrl's CONTRIBUTING.md, "What a run writes").
"""

# ---------------------------------------------------------------------------------------
# Imports
# ---------------------------------------------------------------------------------------
import os
import warnings
from dataclasses import dataclass
from typing import Literal, Optional

import gymnasium as gym
import numpy as np
import torch
import torch.nn as nn
import tyro

SCRIPT = os.path.basename(__file__)


# ---------------------------------------------------------------------------------------
# Flags
# ---------------------------------------------------------------------------------------
@dataclass
class Args:
    # The run folder's flags (--output-dir, --save-model, --eval-checkpoint, --track, ...)
    # come after these: every script shares them, declared once in RunFlags below the banner.
    # MinAtar/ ids need the minatar package.
    env_id: str = "CartPole-v1"
    """a Gymnasium id (or module:id) with Discrete actions, flat Box or MinAtar observations"""
    seed: int = 1
    """seeds Python, NumPy, torch and the environments"""
    total_timesteps: int = 500_000
    """the training budget in environment steps, all environments together"""
    cuda: tyro.conf.DisallowNone[Optional[bool]] = None
    """--cuda: the GPU; --no-cuda: the CPU; neither: the GPU for an image, the CPU for a vector"""
    exp_name: str = os.path.splitext(SCRIPT)[0]
    """the experiment name, part of the run folder's name"""
    eval_episodes: int = 10
    """greedy evaluation episodes after training (0 skips evaluation)"""
    eval_every: int = 0
    """also evaluate greedily every N environment steps (0: only after training)"""
    stop_at_return: Optional[float] = None
    """stop once the training mean over its goal's window (GOALS; else 20 episodes) reaches this"""
    # Algorithm. A flag left at None takes the value of the environment's preset (PRESETS).
    preset: tyro.conf.DisallowNone[Optional[Literal["discrete", "image"]]] = None
    """the settings of the flags left at None (None: the environment's family, PRESETS)"""
    num_envs: tyro.conf.DisallowNone[Optional[int]] = None
    """N: parallel environments, each exploring on its own"""
    num_steps: tyro.conf.DisallowNone[Optional[int]] = None
    """T: steps per environment in each rollout; the batch is N*T"""
    learning_rate: tyro.conf.DisallowNone[Optional[float]] = None
    """RAdam's rate, linearly to 0 over the budget (paper's code: 1e-4 CartPole, 5e-4 MinAtar)"""
    gamma: float = 0.99
    """discount factor"""
    q_lambda: float = 0.65
    """lambda of the Q(lambda) returns (paper's code: 0.65 MinAtar and Atari, 0.95 CartPole)"""
    num_minibatches: tyro.conf.DisallowNone[Optional[int]] = None
    """minibatches per epoch; must divide N*T"""
    update_epochs: tyro.conf.DisallowNone[Optional[int]] = None
    """epochs over each rollout (2-4 in the paper's code)"""
    start_e: float = 1.0
    """epsilon at the start"""
    end_e: float = 0.05
    """epsilon at the end of its decay (paper's code: 0.05 MinAtar, 0.2 CartPole)"""
    exploration_fraction: tyro.conf.DisallowNone[Optional[float]] = None
    """the fraction of the budget over which epsilon decays (0.1-0.2 in the paper's code)"""
    reward_scale: tyro.conf.DisallowNone[Optional[float]] = None
    """rewards are multiplied by this for learning (0.1 on CartPole in the paper's code)"""
    max_grad_norm: float = 10.0
    """gradient clipping: the largest global norm of the gradient"""
    # 3e-4, not torch's 1e-8: after a long stretch without a failure the gradients shrink, and
    # at 1e-8 RAdam divides the first failure's gradient by that small root and overturns the
    # policy in one update; an epsilon above the quiet stretch's root bounds those steps
    # (benchmarks/results.md, pqn.py).
    adam_eps: tyro.conf.DisallowNone[Optional[float]] = None
    """RAdam's epsilon, added to the root of its running mean square of the gradient"""
    hidden_size: tyro.conf.DisallowNone[Optional[int]] = None
    """width of the two LayerNorm hidden layers (256 on CartPole in the paper's code)"""


# The presets of the flags left at None, by the environment's family (family(), below the
# banner): each its source's settings. A flag given overrides its preset.
PRESETS = {
    # The authors' CartPole settings (purejaxql's pqn_cartpole.yaml) with lambda 0.65,
    # epsilon down to 0.05, 128 units and RAdam at 2.5e-4, chosen on CartPole-v1 and
    # Acrobot-v1 over seeds 1-5 (benchmarks/results.md, pqn.py)
    "discrete": ("the PQN authors' CartPole settings, as chosen here", dict(
        num_envs=32, num_steps=64, learning_rate=2.5e-4, num_minibatches=16, update_epochs=4,
        exploration_fraction=0.2, reward_scale=0.1, adam_eps=3e-4, hidden_size=128)),
    # MinAtar and Atari: the authors' MinAtar settings (purejaxql's pqn_minatar.yaml), RAdam's
    # epsilon at their 1e-8; epsilon decays over a tenth of the budget, as theirs over 10M
    "image": ("the PQN authors' MinAtar settings", dict(
        num_envs=128, num_steps=32, learning_rate=5e-4, num_minibatches=32, update_epochs=2,
        exploration_fraction=0.1, reward_scale=1.0, adam_eps=1e-8, hidden_size=256)),
}


# ---------------------------------------------------------------------------------------
# The math
# ---------------------------------------------------------------------------------------
def linear_schedule(start, end, duration, t):
    """A value at environment step t, linear from `start` at t = 0 to `end` at t = duration,
    then constant: epsilon, start_e to end_e over fraction * budget.

        x_t = start + (end - start) * min(1, t / duration)      (end if duration = 0)
    """
    if duration <= 0:
        return end
    return start + (end - start) * min(1.0, t / duration)


def q_lambda_returns(rewards, next_q, terminated, truncated, gamma, q_lambda):
    """Peng's Q(lambda) returns of a rollout, computed backward; all tensors [T, N], terminated
    of 0/1 floats and truncated of bools:

        G_t = r_t + gamma * (1 - terminated_t) * ((1 - lambda) * next_q_t + lambda * G_{t+1})

    next_q_t = max_a Q(s'_t, a) at the true next observation (info["final_obs"] where the
    step was truncated). Where the episode was cut (truncated_t) or at the rollout's last
    step, nothing after s'_t belongs to the episode in the rollout: G_{t+1} is replaced by
    next_q_t, so G_t = r_t + gamma * (1 - terminated_t) * next_q_t. A terminated step ends
    the return: G_t = r_t. lambda = 0 gives the one-step target; lambda = 1 the Monte Carlo
    return, bootstrapped only where the rollout or a time limit cuts it. Returns G, [T, N]."""
    returns = torch.zeros_like(rewards)
    following = next_q[-1]  # G_T: the rollout's end bootstraps from next_q
    for t in reversed(range(len(rewards))):
        following = torch.where(truncated[t], next_q[t], following)
        mixed = (1 - q_lambda) * next_q[t] + q_lambda * following
        returns[t] = rewards[t] + gamma * (1 - terminated[t]) * mixed
        following = returns[t]
    return returns


def epsilon_greedy(q_values, epsilon, generator=None):
    """a = argmax_a Q(s, a) for each environment, or a uniform action where that
    environment's own draw is below epsilon (q_values [N, A] -> actions [N])."""
    num_envs, num_actions = q_values.shape
    explore = torch.rand(num_envs, generator=generator) < epsilon
    random_actions = torch.randint(num_actions, (num_envs,), generator=generator)
    return torch.where(explore, random_actions, q_values.argmax(dim=1))


class Rollout:
    """One rollout of T steps of N environments: what the agent saw, did and got, and the
    true next observation of every step (info["final_obs"] where the step was truncated,
    the observation after the rollout at its last step), from which targets computes the
    Q(lambda) returns once the rollout is complete."""

    def __init__(self, num_steps, num_envs, obs_shape, device):
        self.obs = torch.zeros((num_steps, num_envs, *obs_shape), device=device)
        self.next_obs = torch.zeros_like(self.obs)
        self.actions = torch.zeros((num_steps, num_envs), dtype=torch.long, device=device)
        self.rewards = torch.zeros((num_steps, num_envs), device=device)
        self.terminated = torch.zeros((num_steps, num_envs), device=device)
        self.truncated = torch.zeros((num_steps, num_envs), dtype=torch.bool, device=device)

    @torch.no_grad()
    def targets(self, q_network, gamma, q_lambda):
        """The Q(lambda) returns G [T, N], next_q read off the network as it is now."""
        next_q = q_network(self.next_obs.flatten(0, 1)).max(dim=1).values
        return q_lambda_returns(self.rewards, next_q.view_as(self.rewards), self.terminated,
                                self.truncated, gamma, q_lambda)


# ---------------------------------------------------------------------------------------
# Networks
# ---------------------------------------------------------------------------------------
class QNetwork(nn.Module):
    """Q(s, .) [B, A]: two hidden layers, each Linear -> LayerNorm -> ReLU, and a linear head.
    An image (MinAtar's 10 x 10 x C grid, channels last) first goes through one convolution
    of 16 3 x 3 filters with ReLU, flattened: 10 -> 8, so 16 * 8 * 8 = 1024 features. PyTorch's
    default initialization (the authors' code has Flax's, which differs in scale only)."""

    def __init__(self, obs_shape, num_actions, hidden_size=128):
        super().__init__()
        self.image = len(obs_shape) == 3
        if self.image:
            channels, height, width = obs_shape[2], *obs_shape[:2]
            self.encoder = nn.Sequential(nn.Conv2d(channels, 16, 3), nn.ReLU(), nn.Flatten())
            features = 16 * (height - 2) * (width - 2)
        else:
            self.encoder, features = nn.Flatten(), int(np.prod(obs_shape))
        self.mlp = nn.Sequential(
            nn.Linear(features, hidden_size), nn.LayerNorm(hidden_size), nn.ReLU(),
            nn.Linear(hidden_size, hidden_size), nn.LayerNorm(hidden_size), nn.ReLU(),
            nn.Linear(hidden_size, num_actions))

    def forward(self, obs):
        obs = obs.float()
        if self.image:
            obs = obs.movedim(-1, -3)  # [B, H, W, C] -> [B, C, H, W]
        return self.mlp(self.encoder(obs))


def make_vector_env(env_id, num_envs, video_folder=None):
    """N copies of env_id in one synchronous vector environment, with SAME_STEP autoreset
    (the observation after an episode ends is the next episode's first; the true last one
    is in info["final_obs"]) and episode statistics recorded by Gymnasium's wrapper. With
    video_folder, the evaluation's environments record their first episode."""
    def make(i):
        return make_game(env_id, video_folder, f"eval-{i}")  # with a video: its first episode

    envs = gym.vector.SyncVectorEnv([lambda i=i: make(i) for i in range(num_envs)],
                                    autoreset_mode=gym.vector.AutoresetMode.SAME_STEP)
    return gym.wrappers.vector.RecordEpisodeStatistics(envs)


# ---------------------------------------------------------------------------------------
# Training
# ---------------------------------------------------------------------------------------
def train(args, q_network, envs, run, device):
    """PQN's loop: collect a rollout epsilon-greedily, compute its Q(lambda) returns, take
    epochs of minibatch steps on the squared error, log; until the budget, --stop-at-return
    or a non-finite loss. No replay buffer, no target network.
    run (Run, below the banner) writes the run folder: step(n, info) records the episodes
    that ended, evaluates, prints progress and says when to stop; update adds a CSV row."""
    optimizer = torch.optim.RAdam(q_network.parameters(), lr=args.learning_rate, eps=args.adam_eps)
    rollout = Rollout(args.num_steps, args.num_envs, envs.single_observation_space.shape, device)
    batch_size = args.num_envs * args.num_steps
    num_iterations = args.total_timesteps // batch_size
    global_step = 0
    next_obs = torch.as_tensor(envs.reset(seed=args.seed)[0], dtype=torch.float32, device=device)
    for iteration in range(1, num_iterations + 1):
        for group in optimizer.param_groups:  # linearly from --learning-rate to 0 at the end
            group["lr"] = args.learning_rate * (1 - (iteration - 1) / num_iterations)

        # Rollout: T steps of the N environments, each exploring epsilon-greedily on its own.
        for step in range(args.num_steps):
            epsilon = linear_schedule(args.start_e, args.end_e,
                                      args.exploration_fraction * args.total_timesteps, global_step)
            with torch.no_grad():
                action = epsilon_greedy(q_network(next_obs), epsilon)
            obs, reward, terminated, truncated, info = envs.step(action.cpu().numpy())
            global_step += args.num_envs
            if run.step(global_step, info):  # episodes.csv, evaluation, progress; True: stop
                return
            rollout.obs[step], rollout.actions[step] = next_obs, action
            rollout.rewards[step] = torch.as_tensor(reward * args.reward_scale, device=device)
            rollout.terminated[step] = torch.as_tensor(terminated, device=device)
            rollout.truncated[step] = torch.as_tensor(truncated, device=device)
            next_obs = torch.as_tensor(obs, dtype=torch.float32, device=device)
            rollout.next_obs[step] = next_obs
            for i in np.flatnonzero(truncated):  # the true last observation of a cut episode
                rollout.next_obs[step, i] = torch.as_tensor(info["final_obs"][i], device=device)

        # Targets: Q(lambda) returns, backward through the rollout, from the network as it is.
        returns = rollout.targets(q_network, args.gamma, args.q_lambda).flatten()
        b_obs, b_actions = rollout.obs.flatten(0, 1), rollout.actions.flatten()

        # Update: epochs of minibatch regression of Q(s_t, a_t) on G_t.
        for epoch in range(args.update_epochs):
            for idx in torch.randperm(batch_size, device=device).chunk(args.num_minibatches):
                q_taken = q_network(b_obs[idx]).gather(1, b_actions[idx, None]).squeeze(1)
                loss = 0.5 * ((q_taken - returns[idx]) ** 2).mean()
                optimizer.zero_grad()
                loss.backward()
                nn.utils.clip_grad_norm_(q_network.parameters(), args.max_grad_norm)
                optimizer.step()

        if run.non_finite(loss.item(), global_step):  # says so; the run stops as interrupted
            return
        run.update(global_step, learning_rate=optimizer.param_groups[0]["lr"], epsilon=epsilon,
                   td_loss=loss.item(), q_values=q_taken.mean().item())


def main(args: Args) -> dict:
    """Train PQN (or evaluate an --eval-checkpoint), write the run folder, return the summary.
    Ctrl-C stops training; the run folder is written, then KeyboardInterrupt goes on up."""
    # prepare (below the banner): --eval-checkpoint's model read, the environment made and
    # checked, the flags left at None from its family's preset, every flag checked (a
    # mistake: one line, exit status 2), the seeds set, the device chosen.
    args, (obs_shape, num_actions), checkpoint, device = prepare(args)

    # Set up: the Q-network, the run folder.
    q_network = QNetwork(obs_shape, num_actions, args.hidden_size).to(device)
    models = {"q_network": q_network}  # what model.pt holds
    run = Run(args, device, models, checkpoint, rollout_steps=args.num_envs * args.num_steps)

    # Train (unless evaluating a checkpoint), then finish: evaluate, save, write, plot.
    envs = None if checkpoint else make_vector_env(args.env_id, args.num_envs)
    return run.train(lambda: train(args, q_network, envs, run, device), envs)


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
import torch
from torch.utils.tensorboard import SummaryWriter as TensorBoardWriter


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
    torch.manual_seed(seed)
    device = torch.device("cuda" if torch.cuda.is_available() and (image if cuda is None else cuda)
                          else "cpu")
    if device.type == "cpu":
        torch.set_num_threads(threads)
    print(f"{SCRIPT}: device {device}")
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
        versions["torch"] = torch.__version__
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
CHECKPOINT = "model.pt"


def save_checkpoint(path, models, args):  # each model's state dict under its name; the flags
    torch.save({**{name: m.state_dict() for name, m in models.items()}, "args": asdict(args)}, path)


def read_checkpoint(path):  # safely: weights_only loads tensors and plain data, never code
    return torch.load(path, map_location="cpu", weights_only=True)


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
# Plumbing for presets: the settings that follow the environment's family
# ---------------------------------------------------------------------------------------
# Stamped from plainrl's plumbing/presets.py by its stamp.py: edit it there, not here.
def family(obs_shape, continuous):
    """The family that picks a preset: "image" (3 axes), "continuous" (Box actions), "discrete"."""
    return "image" if len(obs_shape or ()) == 3 else "continuous" if continuous else "discrete"


def preset_for(args, obs_space, action_space):
    """The preset of the environment: the script's preset_name where it has one (dqn.py's,
    sac.py's and ddpg_td3.py's budget), else its family. One the script has no preset for
    is a space it does not take: check_spaces says why, in one line."""
    name = (preset_name(args, obs_space, action_space) if "preset_name" in globals() else
            family(obs_space.shape, isinstance(action_space, gym.spaces.Box)))
    if (args.preset or name) not in PRESETS:
        check_spaces(args, obs_space, action_space)
    return name


def fill_preset(args, family):
    """args with --preset the family unless it is given, and every flag left at None taken
    from PRESETS[preset] = (its source, {flag: value}): a flag given on the command line wins."""
    preset = args.preset or family
    flags = PRESETS[preset][1]
    return replace(args, preset=preset,
                   **{name: value for name, value in flags.items() if getattr(args, name) is None})
# End of plumbing/presets.py


# ---------------------------------------------------------------------------------------
# Plumbing for pixels: Atari's and MinAtar's packages and wrappers
# ---------------------------------------------------------------------------------------
# Stamped from plainrl's plumbing/pixels.py by its stamp.py: edit it there, not here.
def make_game(env_id, video_folder=None, name_prefix="eval", **kwargs):
    """gym.make for every id: an ALE/ (Atari) or MinAtar/ id's package imported first (or
    its install named); with video_folder, the game's own screen recorded (make_recorded,
    MinAtar's cells drawn as bytes), then an Atari game's preprocessing (atari_wrappers)."""
    register_game_ids(env_id)
    atari, screen = env_id.startswith("ALE/"), env_id.startswith("MinAtar/") and video_folder

    def make(env_id, **options):  # the wrapper skips Atari's frames itself
        env = gym.make(env_id, **({"frameskip": 1} if atari else {}), **options)
        return MinAtarScreen(env) if screen else env
    env = make_recorded(env_id, video_folder, name_prefix, make, **kwargs)
    return atari_wrappers(env) if atari else env


def check_image(args, obs_space):
    """An image observation (3 axes) the networks' convolutions can take: 3 x 3 pixels or more,
    its height and width read by channels_last's convention."""
    shape = obs_space.shape
    if len(shape) == 3 and min(shape[:2] if channels_last(args.env_id) else shape[1:]) < 3:
        fail(f"{args.env_id} has images of shape {shape}; the smallest convolution needs "
             "3 x 3 pixels or more")


def image_layout(obs_space, env_id):
    """An image network's {"uint8": byte_pixels, "channels_last": channels_last}."""
    return {"uint8": byte_pixels(obs_space), "channels_last": channels_last(env_id)}


def channels_last(env_id):
    """Where an image keeps its channels, by convention and never by its sizes (a 10 x 10 x
    10 Seaquest frame has no shorter side): last (H x W x C) in Gymnasium's images and
    MinAtar's; first (C x H x W) in the stack of 4 frames that atari_wrappers makes of an
    ALE/ id. An environment of one's own with C x H x W images moves the axis to the end
    (gymnasium.wrappers.TransformObservation with np.moveaxis(obs, 0, -1))."""
    return not env_id.startswith("ALE/")


def byte_pixels(space):
    """Whether an image holds 0-255 pixels to scale to [0, 1]: uint8 with 255 at the top of
    its Box (Atari's frames). Any other image is read as it is: MinAtar's cells are 0/1
    whether its build declares them bool (PyPI's 1.0.15) or uint8 with a top of 1 (its
    GitHub code since 2023), and 0/1 divided by 255 would be all but blank."""
    return space.dtype == np.uint8 and bool(np.all(space.high == 255))


def register_game_ids(env_id):
    """ALE/ (Atari) and MinAtar/ ids are registered by packages that gym.make does not import
    by itself: import them here, or say how to install them."""
    for prefix, package, pin in (("ALE/", "ale_py", "ale-py==0.12.1"),
                                  ("ALE/", "cv2", "opencv-python-headless==5.0.0.93"),
                                  ("MinAtar/", "minatar", "minatar==1.0.15")):
        if env_id.startswith(prefix) and importlib.util.find_spec(package) is None:
            fail(f"{env_id} needs the {package} package: pip install {pin}")
    if env_id.startswith("ALE/"):
        gym.register_envs(importlib.import_module("ale_py"))
    elif env_id.startswith("MinAtar/") and env_id not in gym.registry:
        importlib.import_module("minatar.gym").register_envs()


class MinAtarScreen(gym.Wrapper):
    """MinAtar draws its 10 x 10 grid as floats in [0, 1], which a video shows black: bytes
    instead, each cell 16 x 16 pixels."""

    def render(self):
        with warnings.catch_warnings():  # Gymnasium's checker warns of the floats once
            warnings.simplefilter("ignore")
            frame = self.env.render()
        return (frame * 255).astype(np.uint8).repeat(16, axis=0).repeat(16, axis=1)


class FireReset(gym.Wrapper):
    """Presses FIRE (action 1) at the start of a game and after each lost life, in the games
    whose ball or round waits for it (Breakout), as OpenAI's baselines and CleanRL do: a
    policy that never presses it would idle until ALE's cap of 108,000 frames. The press is
    a step of 4 frames that the agent does not take (not counted in the budget); its reward
    is dropped at reset, as theirs, and added to the step's after a lost life. Departures:
    after a lost life theirs drop it too (it is almost always 0: the ball is not yet in
    play), and they press RIGHT (action 2) after FIRE as well; FIRE alone launches the
    ball."""

    def reset(self, **kwargs):
        self.env.reset(**kwargs)
        obs, _, _, _, info = self.env.step(1)
        self.lives = info["lives"]
        return obs, info

    def step(self, action):
        obs, reward, terminated, truncated, info = self.env.step(action)
        if info["lives"] < self.lives and not (terminated or truncated):
            obs, fire_reward, terminated, truncated, info = self.env.step(1)
            reward += fire_reward
        self.lives = info["lives"]
        return obs, reward, terminated, truncated, info


class LifeLossTermination(gym.vector.VectorWrapper):
    """Atari in training (--terminal-on-life-loss): the step that loses a life is terminated
    for the learner (it does not bootstrap), as in the DQN paper and CleanRL, while the game
    plays on with the lives it has left; only a game's real end resets it. Wrapped over the
    episode statistics, so episodes.csv holds whole games. CleanRL's EpisodicLifeEnv fakes a
    reset with a no-op step; here the next life starts from the frame where the last ended."""

    def reset(self, **kwargs):
        obs, info = self.env.reset(**kwargs)
        self.lives = info["lives"].copy()
        return obs, info

    def step(self, actions):
        obs, rewards, terminated, truncated, info = self.env.step(actions)
        lost = info["lives"] < self.lives  # a game that ended shows its next game's lives
        self.lives = info["lives"].copy()
        return obs, rewards, terminated | lost, truncated, info


def atari_wrappers(env):
    """The DQN paper's Atari preprocessing with Gymnasium's own wrappers: up to 30 no-op
    actions at reset, every action repeated for 4 frames (the max of the last two frames
    against flicker), frames gray and resized to 84 x 84, the last 4 stacked into one
    uint8 observation [4, 84, 84] (channels first); FIRE pressed where the game waits for it
    (FireReset). A lost life ends the training episode in make_vector_env, not here:
    Gymnasium's terminal_on_life_loss would start a new game at every lost life. Departure
    from the paper: ALE v5's sticky actions (the previous action repeats with probability
    0.25) stay on, as Machado et al. 2018 recommend."""
    env = gym.wrappers.AtariPreprocessing(env, noop_max=30, frame_skip=4, screen_size=84,
                                          grayscale_obs=True)
    if env.unwrapped.get_action_meanings()[1:2] == ["FIRE"]:
        env = FireReset(env)
    return gym.wrappers.FrameStackObservation(env, 4)
# End of plumbing/pixels.py


# ---------------------------------------------------------------------------------------
# What the plumbing asks of pqn.py: its own checks, its greedy policy, its model's flags
# ---------------------------------------------------------------------------------------
def check_flags(args):
    """pqn.py's own flags, checked by prepare before training."""
    check_range(args, positive=["num_envs", "num_steps", "num_minibatches", "update_epochs",
                                "hidden_size", "learning_rate", "max_grad_norm", "reward_scale"],
                fraction=["gamma", "q_lambda", "start_e", "end_e", "exploration_fraction"])
    batch_size = args.num_envs * args.num_steps
    if batch_size % args.num_minibatches:
        fail(f"num_envs*num_steps = {batch_size} is not divisible by --num-minibatches "
             f"{args.num_minibatches}; pick a divisor of {batch_size}")
    if args.eval_checkpoint is None and 0 < args.total_timesteps < batch_size:
        fail(f"--total-timesteps {args.total_timesteps} is less than one rollout "
             f"(num_envs*num_steps = {batch_size}); raise it or shrink the rollout")
    if args.env_id.startswith("ALE/"):
        fail(f"{args.env_id}: pqn.py learns from vectors and MinAtar's grids; for Atari's "
             "frames use dqn.py or ppo.py")


def check_spaces(args, obs_space, action_space):
    """Whether pqn.py handles the environment's spaces; returns (obs_shape, num_actions)."""
    if not isinstance(action_space, gym.spaces.Discrete):
        fail(f"{args.env_id} has a {type(action_space).__name__} action space; pqn.py takes "
             "the max over Discrete actions (for continuous ones use sac.py or crossq.py)")
    if not (isinstance(obs_space, gym.spaces.Box) and len(obs_space.shape) in (1, 3)):
        fail(f"{args.env_id} has a {type(obs_space).__name__} observation space of shape "
             f"{obs_space.shape}; pqn.py needs a flat Box or an H x W x C image Box")
    check_image(args, obs_space)  # pixels.py's: 3 x 3 pixels or more
    return obs_space.shape, int(action_space.n)


def greedy_policy(models, envs):
    """The evaluation's policy, act(obs, info) -> argmax_a Q(s, a) for each environment."""
    q_network = models["q_network"]
    device = next(q_network.parameters()).device

    @torch.no_grad()
    def act(obs, info):
        return q_network(torch.as_tensor(obs, device=device)).argmax(dim=1).cpu().numpy()
    return act


# What a run is judged on, by environment id (its benchmark task in benchmark.py, its README
# row): (threshold, window of training episodes, "train": the last-window mean at the end,
# or "eval": the final greedy evaluation). Another id: its reward_threshold over 20, "train".
GOALS = {"CartPole-v1": (475, 20, "train", 500_000), "Acrobot-v1": (-100, 20, "train", 500_000),
         "MinAtar/Asterix-v1": (5, 100, "train", 1_000_000),
         "MinAtar/Breakout-v1": (5, 100, "train", 1_000_000),
         "MinAtar/Freeway-v1": (20, 100, "train", 1_000_000),
         "MinAtar/Seaquest-v1": (5, 100, "train", 1_000_000),
         "MinAtar/SpaceInvaders-v1": (20, 100, "train", 1_000_000)}
MODEL_FLAGS = ("hidden_size",)  # a checkpoint's network is built by these


if __name__ == "__main__":
    cli()

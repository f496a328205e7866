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
        if video_folder is None:
            return gym.make(env_id)
        os.environ.setdefault("SDL_VIDEODRIVER", "dummy")  # frames only, no window to open
        env = gym.make(env_id, render_mode="rgb_array")
        env = MinAtarScreen(env) if env_id.startswith("MinAtar/") else env
        with warnings.catch_warnings():  # the environments share one folder on purpose
            warnings.filterwarnings("ignore", message=".*Overwriting existing videos")
            return gym.wrappers.RecordVideo(env, video_folder, name_prefix=f"eval-{i}",
                                           episode_trigger=lambda episode: episode == 0)

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
    run (RunWriter, below the banner) writes the run folder: step(n) prints progress and
    evaluates, episode/update add a CSV row, reached/non_finite say when to stop."""
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
            run.step(global_step)  # progress line; evaluation every --eval-every steps
            rollout.obs[step], rollout.actions[step] = next_obs, action
            rollout.rewards[step] = torch.as_tensor(reward * args.reward_scale, device=device)
            rollout.terminated[step] = torch.as_tensor(terminated, device=device)
            rollout.truncated[step] = torch.as_tensor(truncated, device=device)
            next_obs = torch.as_tensor(obs, dtype=torch.float32, device=device)
            rollout.next_obs[step] = next_obs
            for i in np.flatnonzero(truncated):  # the true last observation of a cut episode
                rollout.next_obs[step, i] = torch.as_tensor(info["final_obs"][i], device=device)
            for i in np.flatnonzero(info.get("_episode", [])):
                run.episode(global_step, info["episode"]["r"][i], info["episode"]["l"][i])
            if run.reached(args.stop_at_return, global_step):  # the summary records when
                return

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
    # Check everything a user can get wrong before anything runs: one line, exit status 2.
    obs_shape, num_actions = check_env(args, make=make_game)
    args = fill_preset(args, family(obs_shape, continuous=False))  # the flags left at None
    check_args(args)
    args, checkpoint = load_checkpoint(args)  # the network's width comes from a checkpoint

    # Set up: seeds, device, the Q-network, the run folder.
    device = seed_and_device(args.seed, args.cuda, image=len(obs_shape) == 3)
    q_network = QNetwork(obs_shape, num_actions, args.hidden_size).to(device)
    models = {"q_network": q_network}  # what model.pt holds
    if checkpoint is not None:
        restore(checkpoint, models, args)
    run = RunWriter(args, device, models, rollout_steps=args.num_envs * args.num_steps)

    # Train (unless evaluating a checkpoint), then finish: evaluate, save, write, plot.
    envs = None if checkpoint else make_vector_env(args.env_id, args.num_envs)
    return train_and_finish(run, lambda: train(args, q_network, envs, run, device), envs)


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
from torch.utils.tensorboard import SummaryWriter


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
        versions["torch"] = torch.__version__
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


TensorBoardWriter = SummaryWriter
CHECKPOINT = "model.pt"


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
    """model.pt: each model's state dict under its name, and the flags."""
    torch.save({**{name: m.state_dict() for name, m in models.items()}, "args": asdict(args)},
               path)


def read_checkpoint(path):
    """A model.pt's dict, loaded safely (weights_only: tensors and plain data, never code)."""
    return torch.load(path, map_location="cpu", weights_only=True)


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
# Plumbing for pixels: Atari's and MinAtar's packages and wrappers
# ---------------------------------------------------------------------------------------
# Stamped from plainrl's plumbing/pixels.py by its stamp.py: edit it there, not here.
def make_game(env_id, **kwargs):
    """gym.make for every id: an ALE/ (Atari) or MinAtar/ id's package imported first (or
    its install named), an Atari game with the DQN paper's preprocessing (atari_wrappers)."""
    register_game_ids(env_id)
    if not env_id.startswith("ALE/"):
        return gym.make(env_id, **kwargs)
    return atari_wrappers(gym.make(env_id, frameskip=1, **kwargs))  # the wrapper skips frames


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
    """pqn.py's own flags, checked before any environment is made."""
    for name in ("num_envs", "num_steps", "num_minibatches", "update_epochs", "hidden_size",
                 "learning_rate", "max_grad_norm", "reward_scale"):
        if not getattr(args, name) > 0:
            fail(f"--{name.replace('_', '-')} must be positive, got {getattr(args, name)}")
    for name in ("gamma", "q_lambda", "start_e", "end_e", "exploration_fraction"):
        if not 0.0 <= getattr(args, name) <= 1.0:
            fail(f"--{name.replace('_', '-')} must be in [0, 1], got {getattr(args, name)}")
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
    if len(obs_space.shape) == 3 and min(obs_space.shape[:2]) < 3:
        fail(f"{args.env_id} has images of shape {obs_space.shape}; the convolution needs "
             "3 x 3 pixels or more")
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
# pqn.py's columns of updates.csv as TensorBoard's scalars, under CleanRL's names
TENSORBOARD_NAMES = {"learning_rate": "charts/learning_rate", "epsilon": "charts/epsilon",
                     "td_loss": "losses/td_loss", "q_values": "losses/q_values"}


if __name__ == "__main__":
    cli()

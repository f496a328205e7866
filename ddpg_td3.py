# From plainrl (MIT licence, (c) 2026 the plainrl authors): keep this line in a copy.
"""DDPG and TD3 for continuous actions, with each of TD3's three improvements a flag of its own.

DDPG learns a deterministic policy mu(s) and a critic Q(s, a) from a replay buffer: the
critic regresses on a one-step bootstrapped target computed with slowly moving target
networks, and the actor climbs the critic's gradient with respect to the action. TD3 adds
three fixes for the critic's overestimation: clipped double Q (two critics, the target takes
the smaller), target policy smoothing (noise on the target action) and a delayed policy (the
actor and the targets move once every d critic steps). `--algo td3` (the default) and
`--algo ddpg` set the three at once; each flag given overrides its part. DDPG here is the one
TD3's paper compares with: Gaussian exploration noise, no batch normalization, TD3's networks.

Key equations (actions in [-1, 1]^d, the actor's tanh, scaled to the environment's bounds
only when stepping: the noise scales are fractions of each dimension's half-range):

    exploration    a  = clip(mu(s) + eps, -1, 1),                 eps ~ N(0, sigma^2)
    target action  a' = clip(mu'(s') + clip(eps', -c, c), -1, 1), eps' ~ N(0, sigma'^2)
                        (DDPG, and TD3 without smoothing: a' = mu'(s'))
    critic target  y  = r + gamma * (1 - terminated) * min(Q'_1(s', a'), Q'_2(s', a'))
                        (DDPG, and TD3 without twin critics: Q'_1 alone)
    critic loss    L_Q  = sum_i mean over the batch of (Q_i(s, a) - y)^2
    actor loss     L_mu = -mean over the batch of Q_1(s, mu(s)),   every d-th critic step
    target update  theta' <- tau * theta + (1 - tau) * theta',     with every actor step

A time-limit truncation is not a termination: the target bootstraps from the true final s'.

Papers:
    Silver et al. 2014, "Deterministic Policy Gradient Algorithms", ICML 2014
    Lillicrap et al. 2016, "Continuous Control with Deep Reinforcement Learning", ICLR 2016
    Fujimoto, van Hoof & Meger 2018, "Addressing Function Approximation Error in Actor-Critic
        Methods", ICML 2018 (TD3)
    Pardo et al. 2018, "Time Limits in Reinforcement Learning", ICML 2018

Run:
    python ddpg_td3.py --env-id Pendulum-v1                  # TD3, the defaults
    python ddpg_td3.py --env-id Pendulum-v1 --algo ddpg      # DDPG
    python ddpg_td3.py --env-id HalfCheetah-v5 --total-timesteps 300000   # the TD3 paper's

Writes runs/<env_id>__ddpg_td3__<seed>__<unix_time>/ (plainrl's CONTRIBUTING.md, "What a run
writes"); summary.json's algorithm names what ran (ddpg, td3, ddpg+twin_q, ...).
"""

# ---------------------------------------------------------------------------------------
# Imports
# ---------------------------------------------------------------------------------------
import contextlib
import copy
import math
import os
import warnings
from dataclasses import dataclass, replace
from typing import Literal, Optional

import gymnasium as gym
import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
import tyro

SCRIPT = os.path.basename(__file__)


# ---------------------------------------------------------------------------------------
# Flags
# ---------------------------------------------------------------------------------------
@dataclass
class Args:
    # The run folder's flags (--output-dir, --save-model, --eval-checkpoint, --track, ...)
    # come after these: every script shares them, declared once in RunFlags below the banner.
    env_id: str = "Pendulum-v1"
    """a Gymnasium id (or module:id) with a bounded Box action space and a flat Box observation"""
    seed: int = 1
    """seeds Python, NumPy, torch and the environments"""
    total_timesteps: int = 15_000
    """the training budget in environment steps, all environments together"""
    cuda: tyro.conf.DisallowNone[Optional[bool]] = None
    """--cuda: the GPU; --no-cuda: the CPU; neither: the GPU for an image, the CPU for a vector"""
    exp_name: str = os.path.splitext(SCRIPT)[0]
    """the experiment name, part of the run folder's name"""
    eval_episodes: int = 10
    """greedy evaluation episodes after training, without exploration noise (0 skips it)"""
    eval_every: int = 0
    """also evaluate greedily every N environment steps (0: only after training)"""
    stop_at_return: Optional[float] = None
    """stop once the training mean over its goal's window (GOALS; else 20 episodes) reaches this"""

    # Algorithm. A flag left at None takes the value of --algo's or the budget's preset.
    preset: tyro.conf.DisallowNone[Optional[Literal["continuous", "continuous-long"]]] = None
    """the settings of the flags left at None (None: by the budget, PRESETS)"""
    algo: Literal["td3", "ddpg"] = "td3"
    """td3: twin critics, target smoothing noise 0.2, policy delay 2; ddpg: one critic, 0, 1"""
    twin_q: Optional[bool] = None
    """clipped double Q: two critics, the target takes the smaller (None: set by --algo)"""
    target_policy_noise: Optional[float] = None
    """sigma' of the target smoothing noise, in action half-ranges (0.2 in TD3; None: --algo)"""
    noise_clip: float = 0.5
    """c: the target policy smoothing noise is clipped to [-c, c] (0.5 in the TD3 paper)"""
    policy_delay: Optional[int] = None
    """d: the actor and the targets move on every d-th critic step (2 in TD3; None: --algo)"""
    num_envs: int = 1
    """parallel environments (synchronous vector environment)"""
    # The random actions are uniform; 25,000 steps in the TD3 authors' later code.
    learning_starts: tyro.conf.DisallowNone[Optional[int]] = None
    """random actions and no learning for this many environment steps (1,000-10,000 in TD3)"""
    gradient_steps: int = 1
    """critic gradient steps after each step of the vector environment (1 in the TD3 paper)"""
    # Never allocated larger than --total-timesteps.
    buffer_size: int = 1_000_000
    """replay buffer capacity in transitions (1,000,000 in the TD3 paper)"""
    batch_size: tyro.conf.DisallowNone[Optional[int]] = None
    """transitions sampled from the replay buffer for each gradient step (100 in TD3, 64 in DDPG)"""
    learning_rate: tyro.conf.DisallowNone[Optional[float]] = None
    """Adam learning rate of the actor and critics (1e-3 in TD3; DDPG: 1e-4 actor, 1e-3 critic)"""
    gamma: tyro.conf.DisallowNone[Optional[float]] = None
    """discount factor (0.99 in the TD3 and DDPG papers)"""
    tau: tyro.conf.DisallowNone[Optional[float]] = None
    """soft target update: theta' <- tau*theta + (1 - tau)*theta' (0.005 in TD3, 0.001 in DDPG)"""
    exploration_noise: float = 0.1
    """sigma of the Gaussian exploration noise, a fraction of the action half-range (0.1 in TD3)"""
    # 256 in the TD3 authors' later code.
    hidden_size: tyro.conf.DisallowNone[Optional[int]] = None
    """width of the two hidden layers of the actor and of each critic (400 and 300 in TD3)"""
    log_interval: int = 1_000
    """environment steps between rows of updates.csv"""
    # One suits the 64-unit defaults; 256 units gain from two (results.md, "MuJoCo").
    threads: int = 1
    """CPU threads torch may use for the networks"""


# The presets of the other flags left at None, by the budget: a flag given overrides its preset.
PRESETS = {
    # Budgets up to SHORT_BUDGET steps: chosen on Pendulum-v1 to learn it in a minute
    "continuous": ("plainrl's Pendulum settings", dict(
        learning_starts=1_000, batch_size=128, learning_rate=1e-3, gamma=0.98, tau=0.02,
        hidden_size=64)),
    # Longer (MuJoCo): the TD3 paper's, its 10,000 random steps those of HalfCheetah and Ant
    # (1,000 on the others); 256-unit layers for its 400 and 300, as its authors' later code
    "continuous-long": ("the TD3 paper's settings", dict(
        learning_starts=10_000, batch_size=100, learning_rate=1e-3, gamma=0.99, tau=0.005,
        hidden_size=256)),
}
SHORT_BUDGET = 50_000  # the longest budget of the continuous preset


def preset_name(args, obs_space, action_space):
    """The preset of the flags left at None: continuous up to SHORT_BUDGET steps, else the long."""
    return "continuous-long" if args.total_timesteps > SHORT_BUDGET else "continuous"

# What --algo sets; each of these flags left at None takes its value from here.
ALGOS = {
    "td3": {"twin_q": True, "target_policy_noise": 0.2, "policy_delay": 2},
    "ddpg": {"twin_q": False, "target_policy_noise": 0.0, "policy_delay": 1},
}


def resolve_algo(args):
    """The flags with every one of ALGOS' flags that was not given (None) taken from
    --algo's preset; the ones given override it."""
    preset = ALGOS[args.algo]
    return replace(args, **{k: v for k, v in preset.items() if getattr(args, k) is None})


def algorithm_name(args):
    """'td3' with all three improvements, 'ddpg' with none, else 'ddpg+' the ones on."""
    on = [name for name, used in (("twin_q", args.twin_q),
                                  ("target_policy_noise", args.target_policy_noise > 0),
                                  ("policy_delay", args.policy_delay > 1)) if used]
    return {3: "td3", 0: "ddpg"}.get(len(on), "ddpg+" + "+".join(on))


# ---------------------------------------------------------------------------------------
# The math
# ---------------------------------------------------------------------------------------
def td3_target(rewards, next_q1, next_q2, terminated, gamma, twin_q=True):
    """The critics' regression target, clipped double Q (Fujimoto et al. 2018):

        y = r + gamma * (1 - terminated) * min(Q'_1(s', a'), Q'_2(s', a'))    (twin_q)
        y = r + gamma * (1 - terminated) * Q'_1(s', a')                        (DDPG)

    All inputs are [B] tensors; terminated is 0/1 or bool; next_q2 is unused (it may be
    None) without twin_q. A truncated step is not terminated: s' is its true final
    observation and it bootstraps. Returns y, [B].
    """
    next_q = torch.minimum(next_q1, next_q2) if twin_q else next_q1
    return rewards + gamma * (1.0 - terminated.to(rewards.dtype)) * next_q


def noisy_action(actions, sigma, noise_clip=math.inf):
    """Gaussian noise on actions in [-1, 1]^d, the noise clipped to [-c, c] and the sum to
    the bounds:

        a + clip(eps, -c, c) clipped to [-1, 1],   eps ~ N(0, sigma^2) per dimension

    Exploration: noisy_action(mu(s), sigma) (the noise itself unclipped). Target policy
    smoothing (TD3): a' = noisy_action(mu'(s'), sigma', c). With sigma = 0 the actions come
    back as they are. actions: [B, d]; returns [B, d].
    """
    if sigma == 0:
        return actions
    noise = (torch.randn_like(actions) * sigma).clamp(-noise_clip, noise_clip)
    return (actions + noise).clamp(-1.0, 1.0)


def soft_update(target_net, source_net, tau):
    """Polyak averaging of a target network towards the network it follows, in place and
    without gradients, for every pair of parameters (theta' of target_net, theta of
    source_net, which is left as it is; modules of one architecture):

        theta' <- tau * theta + (1 - tau) * theta'

    tau = 1 copies the source; a small tau makes the target move slowly.
    """
    with torch.no_grad():
        for target, source in zip(target_net.parameters(), source_net.parameters()):
            target.mul_(1.0 - tau).add_(source, alpha=tau)


@contextlib.contextmanager
def frozen(*nets):
    """The nets' weights need no gradient inside the block (as in Spinning Up): the actor's
    loss then back-propagates through the critic to the action alone, which spares the
    critic's weight gradients (the actor's step ignores them anyway). Plumbing for speed:
    the update's numbers do not change."""
    for net in nets:
        net.requires_grad_(False)
    try:
        yield
    finally:
        for net in nets:
            net.requires_grad_(True)


class ReplayBuffer:
    """The last `capacity` transitions (s, a, r, terminated, s'), a ring buffer in one
    preallocated float32 table [capacity, obs_dim + action_dim + 2 + obs_dim]: memory stays
    constant and a batch is one indexed read. s' is the true final observation where the
    episode ended at that step (terminated or truncated); a is in [-1, 1]^d as the actor
    gives it.
    """

    def __init__(self, capacity, obs_dim, action_dim, device):
        self.sizes = [obs_dim, action_dim, 1, 1, obs_dim]
        self.table = torch.zeros((capacity, sum(self.sizes)), device=device)
        self.capacity, self.pos, self.size = capacity, 0, 0

    def add(self, obs, actions, rewards, terminated, next_obs):
        """N transitions, NumPy arrays [N, ...] or [N]; the oldest are overwritten when full."""
        rows = np.concatenate([obs, actions, rewards[:, None], terminated[:, None], next_obs],
                              axis=1, dtype=np.float32)
        device = self.table.device  # the rows and their index go where the table is
        where = torch.arange(self.pos, self.pos + len(rows), device=device) % self.capacity
        self.table[where] = torch.as_tensor(rows, device=device)
        self.pos = (self.pos + len(rows)) % self.capacity
        self.size = min(self.size + len(rows), self.capacity)

    def sample(self, batch_size):
        """A batch drawn uniformly with replacement: (obs [B, obs_dim], actions [B, d],
        rewards [B], terminated [B] as 0.0/1.0, next_obs [B, obs_dim])."""
        index = torch.randint(self.size, (batch_size,), device=self.table.device)
        obs, actions, rewards, terminated, next_obs = self.table[index].split(self.sizes, dim=1)
        return obs, actions, rewards.squeeze(1), terminated.squeeze(1), next_obs


# ---------------------------------------------------------------------------------------
# Networks
# ---------------------------------------------------------------------------------------
def mlp(in_size, hidden_size, out_size):
    """in -> hidden -> hidden -> out with ReLUs, nn.Linear's initialization."""
    return nn.Sequential(nn.Linear(in_size, hidden_size), nn.ReLU(),
                         nn.Linear(hidden_size, hidden_size), nn.ReLU(),
                         nn.Linear(hidden_size, out_size))


class Actor(nn.Module):
    """mu(s) = tanh(MLP(s)), actions in [-1, 1]^d: [B, obs_dim] -> [B, d]."""

    def __init__(self, obs_dim, action_dim, hidden_size):
        super().__init__()
        self.net = mlp(obs_dim, hidden_size, action_dim)

    def forward(self, obs):
        return torch.tanh(self.net(obs))


class Critic(nn.Module):
    """Q(s, a) = MLP([s, a]): obs [B, obs_dim] and actions [B, d] -> [B]."""

    def __init__(self, obs_dim, action_dim, hidden_size):
        super().__init__()
        self.net = mlp(obs_dim + action_dim, hidden_size, 1)

    def forward(self, obs, actions):
        return self.net(torch.cat([obs, actions], dim=1)).squeeze(1)


class Networks(nn.Module):
    """The actor and critic qf1, with qf2 as well for clipped double Q (None without), and
    a target copy of each (actor_target, qf1_target, qf2_target) that follows it slowly."""

    def __init__(self, obs_dim, action_dim, hidden_size, twin_q):
        super().__init__()
        self.actor = Actor(obs_dim, action_dim, hidden_size)
        self.qf1 = Critic(obs_dim, action_dim, hidden_size)
        self.qf2 = Critic(obs_dim, action_dim, hidden_size) if twin_q else None
        self.actor_target = copy.deepcopy(self.actor).requires_grad_(False)
        self.qf1_target = copy.deepcopy(self.qf1).requires_grad_(False)
        self.qf2_target = copy.deepcopy(self.qf2).requires_grad_(False) if twin_q else None

    def critics(self):
        """The learned critics and their targets, as (target, critic) pairs."""
        pairs = [(self.qf1_target, self.qf1), (self.qf2_target, self.qf2)]
        return [(target, critic) for target, critic in pairs if critic is not None]


# ---------------------------------------------------------------------------------------
# What the agent sees and sends: the vector environment, actions scaled to the bounds
# ---------------------------------------------------------------------------------------
def make_vector_env(env_id, num_envs, video_folder=None):
    """N copies of env_id in one synchronous vector environment, with SAME_STEP autoreset
    (the observation after an episode ends is the next episode's first; the true last one
    is in info["final_obs"], which train stores as s') and episode statistics recorded by
    Gymnasium's wrapper (episodes.csv's returns). With video_folder, the evaluation's
    environments record their first episode."""
    def make(i):
        return make_recorded(env_id, video_folder, f"eval-{i}")  # with a video: its first episode

    envs = gym.vector.SyncVectorEnv([lambda i=i: make(i) for i in range(num_envs)],
                                    autoreset_mode=gym.vector.AutoresetMode.SAME_STEP)
    return gym.wrappers.vector.RecordEpisodeStatistics(envs)


def to_env_action(actions, action_space):
    """Actions in [-1, 1]^d (a tensor [N, d]) to the environment's bounds, a NumPy array:

        low + (a + 1) / 2 * (high - low)

    Only the environment sees the scaled action: the buffer stores a in [-1, 1]^d, the
    critics take it so, and the noise scales are fractions of the half-range.
    """
    low, high = action_space.low, action_space.high
    return low + (actions.cpu().numpy() + 1.0) * 0.5 * (high - low)


# ---------------------------------------------------------------------------------------
# Training
# ---------------------------------------------------------------------------------------
def update(batch, nets, critic_optimizer, actor_optimizer, args, gradient_step):
    """Gradient step number `gradient_step` (counted from 1) on a batch from the replay
    buffer: the critics' step, and on every policy_delay-th one the actor's step and the
    soft updates of every target network. Returns the losses as numbers for the log."""
    obs, actions, rewards, terminated, next_obs = batch
    with torch.no_grad():  # the target: the target actor, smoothed, and the target critics
        next_actions = noisy_action(nets.actor_target(next_obs), args.target_policy_noise,
                                    args.noise_clip)
        next_q1 = nets.qf1_target(next_obs, next_actions)
        next_q2 = nets.qf2_target(next_obs, next_actions) if args.twin_q else None
        y = td3_target(rewards=rewards, next_q1=next_q1, next_q2=next_q2, terminated=terminated,
                       gamma=args.gamma, twin_q=args.twin_q)
    q1 = nets.qf1(obs, actions)
    critic_loss = F.mse_loss(q1, y)
    if args.twin_q:
        critic_loss = critic_loss + F.mse_loss(nets.qf2(obs, actions), y)
    critic_optimizer.zero_grad()
    critic_loss.backward()
    critic_optimizer.step()
    stats = {"critic_loss": critic_loss.item(), "q_mean": q1.mean().item()}

    if gradient_step % args.policy_delay == 0:
        # The deterministic policy gradient: raise Q_1(s, mu(s)) through the action; qf1
        # is frozen meanwhile, so the gradient reaches the actor's weights alone.
        with frozen(nets.qf1):
            actor_loss = -nets.qf1(obs, nets.actor(obs)).mean()
        actor_optimizer.zero_grad()
        actor_loss.backward()
        actor_optimizer.step()
        stats["actor_loss"] = actor_loss.item()
        soft_update(nets.actor_target, nets.actor, args.tau)
        for target, critic in nets.critics():
            soft_update(target, critic, args.tau)
    return stats


def train(args, envs, nets, run):
    """Step the environments with the actor's noisy actions (uniformly random ones for the
    first --learning-starts steps), store every transition, and from --learning-starts on
    take --gradient-steps updates after each step; until the budget (whole steps of the N
    environments), --stop-at-return or a non-finite critic loss.
    run (Run, below the banner) writes the run folder: step(n, info) records the episodes
    that ended, evaluates, prints progress and says when to stop; update adds a CSV row."""
    device = next(nets.parameters()).device
    action_space = envs.single_action_space
    obs_dim, action_dim = envs.single_observation_space.shape[0], action_space.shape[0]
    num_iterations = args.total_timesteps // args.num_envs
    buffer = ReplayBuffer(min(args.buffer_size, num_iterations * args.num_envs), obs_dim,
                          action_dim, device)
    # Adam with its default betas and eps (1e-8), as in TD3's authors' code: one optimizer
    # for the actor, one for both critics (the critic loss is the sum of theirs)
    actor_optimizer = torch.optim.Adam(nets.actor.parameters(), lr=args.learning_rate, eps=1e-8)
    critic_optimizer = torch.optim.Adam([p for _, critic in nets.critics()
                                         for p in critic.parameters()],
                                        lr=args.learning_rate, eps=1e-8)
    stats = {"critic_loss": [], "q_mean": [], "actor_loss": []}
    global_step, gradient_steps, last_log = 0, 0, 0

    obs, _ = envs.reset(seed=args.seed)
    obs = np.asarray(obs, dtype=np.float32)
    for iteration in range(num_iterations):
        # Collect: one step of every environment, the actions in [-1, 1]^d scaled to the
        # bounds for the environment only (to_env_action); the buffer keeps them unscaled
        if global_step < args.learning_starts:
            actions = torch.rand((args.num_envs, action_dim)) * 2 - 1
        else:
            with torch.no_grad():
                mu = nets.actor(torch.from_numpy(obs).to(device))
                actions = noisy_action(mu, args.exploration_noise).cpu()
        next_obs, rewards, terminated, truncated, info = envs.step(
            to_env_action(actions, action_space))
        global_step += args.num_envs
        if run.step(global_step, info):  # episodes.csv, evaluation, progress; True: stop
            return
        next_obs = np.asarray(next_obs, dtype=np.float32)
        # Where an episode ended, next_obs already starts the next one: s' is the true last
        # observation. Only `terminated` stops the bootstrap; a truncated step keeps it.
        final_obs = next_obs.copy()
        for i in np.flatnonzero(terminated | truncated):
            final_obs[i] = info["final_obs"][i]
        buffer.add(obs, actions.numpy(), rewards, terminated, final_obs)
        obs = next_obs


        # Learn: once --learning-starts is reached, --gradient-steps updates after each step
        for _ in range(args.gradient_steps if global_step >= args.learning_starts else 0):
            gradient_steps += 1
            losses = update(buffer.sample(args.batch_size), nets, critic_optimizer,
                            actor_optimizer, args, gradient_steps)
            for key, value in losses.items():
                stats[key].append(value)

        # Log: a row of updates.csv every --log-interval steps and after the last step, with
        # the means of the losses since the last row
        last = iteration == num_iterations - 1
        if gradient_steps and (global_step - last_log >= args.log_interval or last):
            # NaN for the actor's loss where no actor step came since the last row
            means = {key: float(np.mean(v)) if v else math.nan for key, v in stats.items()}
            last_log, stats = global_step, {key: [] for key in stats}
            run.update(global_step, **means, gradient_steps=gradient_steps)
            if run.non_finite(means["critic_loss"], global_step):  # says so; stops as interrupted
                return


def main(args: Args) -> dict:
    """Train DDPG/TD3 (or evaluate an --eval-checkpoint), write the run folder, return the
    summary. Ctrl-C stops training; the run folder is written, then KeyboardInterrupt goes
    on up."""
    # prepare (below the banner): --eval-checkpoint's model read, the environment made and
    # checked, the flags left at None from the budget's preset (preset_name), every flag checked (a mistake: one
    # line, exit status 2), the seeds set, the device chosen.
    args, (obs_shape, action_space), checkpoint, device = prepare(resolve_algo(args))

    # Set up: the networks and their targets, the run folder.
    nets = Networks(obs_shape[0], action_space.shape[0], args.hidden_size, args.twin_q)
    nets = nets.to(device)
    # what model.pt holds: the learned networks, not their targets
    models = {"actor": nets.actor, "qf1": nets.qf1, **({"qf2": nets.qf2} if args.twin_q else {})}
    run = Run(args, device, models, checkpoint, rollout_steps=args.num_envs,
              note=f", {algorithm_name(args)}")
    run.summary["algorithm"] = algorithm_name(args)  # what ran, whatever --exp-name says

    # Train (unless evaluating a checkpoint), then finish: evaluate, save, write, plot.
    envs = None if checkpoint else make_vector_env(args.env_id, args.num_envs)
    return run.train(lambda: train(args, envs, nets, run), envs)


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
# What the plumbing asks of ddpg_td3.py: its own checks, its greedy policy, its model's flags
# ---------------------------------------------------------------------------------------
def check_flags(args):
    """ddpg_td3.py's own flags, checked by prepare before training; args has its --algo
    preset resolved."""
    check_range(args, positive=["num_envs", "gradient_steps", "buffer_size", "batch_size",
                                "hidden_size", "policy_delay", "log_interval", "learning_rate",
                                "threads"],
                fraction=["gamma"])
    for name in ("learning_starts", "exploration_noise", "target_policy_noise", "noise_clip"):
        if not getattr(args, name) >= 0:
            fail(f"--{name.replace('_', '-')} must be 0 or more, got {getattr(args, name)}")
    if not 0.0 < args.tau <= 1.0:
        fail(f"--tau must be in (0, 1], got {args.tau}")
    if args.target_policy_noise > 0 and args.noise_clip == 0:
        fail("--noise-clip 0 cancels --target-policy-noise; use --target-policy-noise 0 to "
             "switch smoothing off")
    budget = args.total_timesteps // args.num_envs * args.num_envs  # whole steps of N envs
    if args.eval_checkpoint is None and 0 < args.total_timesteps and args.learning_starts >= budget:
        fail(f"--learning-starts {args.learning_starts} leaves no step of the budget, {budget:,} "
             f"steps (--total-timesteps {args.total_timesteps} in whole steps of --num-envs "
             f"{args.num_envs}), to learn in; lower it or raise the budget")


def check_spaces(args, obs_space, action_space):
    """Whether ddpg_td3.py handles the environment's spaces; returns (obs_shape, action_space)."""
    if not (isinstance(action_space, gym.spaces.Box) and len(action_space.shape) == 1):
        fail(f"{args.env_id} has a {type(action_space).__name__} action space of shape "
             f"{action_space.shape}; ddpg_td3.py needs a flat continuous (Box) one (for "
             "Discrete actions use dqn.py or ppo.py)")
    if not (np.isfinite(action_space.low).all() and np.isfinite(action_space.high).all()):
        fail(f"{args.env_id} has unbounded actions (an infinite low or high bound); ddpg_td3.py "
             "scales its tanh actor to finite bounds (ppo.py's Gaussian policy needs none)")
    if not (isinstance(obs_space, gym.spaces.Box) and len(obs_space.shape) == 1):
        fail(f"{args.env_id} has a {type(obs_space).__name__} observation space of shape "
             f"{obs_space.shape}; ddpg_td3.py's MLPs need a flat Box")
    return obs_space.shape, action_space


def greedy_policy(models, envs):
    """The evaluation's policy, act(obs, info) -> actions: a = mu(s), no noise, scaled to the
    action bounds."""
    actor = models["actor"]
    device = next(actor.parameters()).device

    @torch.inference_mode()
    def act(obs, info):
        action = actor(torch.as_tensor(obs, dtype=torch.float32, device=device))
        return to_env_action(action, envs.single_action_space)
    return act


# What a run is judged on, by environment id (its benchmark task in benchmark.py, its README
# row): (threshold, window of training episodes, "train": the last-window mean at the end,
# or "eval": the final greedy evaluation). Another id: its reward_threshold over 20, "train".
GOALS = {"Pendulum-v1": (-200, 10, "eval", 15_000), "Hopper-v5": (2410, 100, "eval", 300_000),
         "HalfCheetah-v5": (7697, 100, "eval", 300_000),
         "Walker2d-v5": (3335, 100, "eval", 300_000)}
# The flags an evaluation takes from the checkpoint: the network's size and the algorithm.
MODEL_FLAGS = ("hidden_size", "algo", "twin_q", "target_policy_noise", "policy_delay")


if __name__ == "__main__":
    cli()

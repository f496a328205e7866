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
SHORT_BUDGET = 50_000
"""the longest budget of the continuous preset; a longer one takes continuous-long"""

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
        if video_folder is None:
            return gym.make(env_id)
        os.environ.setdefault("SDL_VIDEODRIVER", "dummy")  # frames only, no window to open
        env = gym.make(env_id, render_mode="rgb_array")
        with warnings.catch_warnings():  # the environments share one folder on purpose
            warnings.filterwarnings("ignore", message=".*Overwriting existing videos")
            return gym.wrappers.RecordVideo(env, video_folder, name_prefix=f"eval-{i}",
                                           episode_trigger=lambda episode: episode == 0)

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
    run (RunWriter, below the banner) writes the run folder: step(n) prints progress and
    evaluates, episode/update add a CSV row, reached/non_finite say when to stop."""
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
        run.step(global_step)  # progress line; evaluation every --eval-every steps
        next_obs = np.asarray(next_obs, dtype=np.float32)
        # Where an episode ended, next_obs already starts the next one: s' is the true last
        # observation. Only `terminated` stops the bootstrap; a truncated step keeps it.
        final_obs = next_obs.copy()
        for i in np.flatnonzero(terminated | truncated):
            final_obs[i] = info["final_obs"][i]
        buffer.add(obs, actions.numpy(), rewards, terminated, final_obs)
        obs = next_obs

        # Record the episodes that ended; stop once the goal's window reaches --stop-at-return
        for i in np.flatnonzero(info.get("_episode", [])):
            run.episode(global_step, info["episode"]["r"][i], info["episode"]["l"][i])
        if run.reached(args.stop_at_return, global_step):  # the summary records when
            return

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
    # Check everything a user can get wrong before anything runs: one line, exit status 2.
    args = fill_preset(resolve_algo(args), "continuous-long" if args.total_timesteps > SHORT_BUDGET
                       else "continuous")  # the flags left at None
    check_args(args)
    obs_shape, action_space = check_env(args)
    args, checkpoint = load_checkpoint(args)  # the networks' size and the algorithm too

    # Set up: seeds, device, the networks and their targets, the run folder.
    device = seed_and_device(args.seed, args.cuda, args.threads)
    nets = Networks(obs_shape[0], action_space.shape[0], args.hidden_size, args.twin_q)
    nets = nets.to(device)
    # what model.pt holds: the learned networks, not their targets
    models = {"actor": nets.actor, "qf1": nets.qf1, **({"qf2": nets.qf2} if args.twin_q else {})}
    if checkpoint is not None:
        restore(checkpoint, models, args)
    run = RunWriter(args, device, models, rollout_steps=args.num_envs,
                    note=f", {algorithm_name(args)}")
    run.summary["algorithm"] = algorithm_name(args)  # what ran, whatever --exp-name says

    # Train (unless evaluating a checkpoint), then finish: evaluate, save, write, plot.
    envs = None if checkpoint else make_vector_env(args.env_id, args.num_envs)
    return train_and_finish(run, lambda: train(args, envs, nets, run), envs)


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
# What the plumbing asks of ddpg_td3.py: its own checks, its greedy policy, its model's flags
# ---------------------------------------------------------------------------------------
def check_flags(args):
    """ddpg_td3.py's own flags, checked before any environment is made; args has its --algo
    preset resolved."""
    for name in ("num_envs", "gradient_steps", "buffer_size", "batch_size", "hidden_size",
                 "policy_delay", "log_interval", "learning_rate", "threads"):
        if not getattr(args, name) > 0:
            fail(f"--{name.replace('_', '-')} must be positive, got {getattr(args, name)}")
    for name in ("learning_starts", "exploration_noise", "target_policy_noise", "noise_clip"):
        if not getattr(args, name) >= 0:
            fail(f"--{name.replace('_', '-')} must be 0 or more, got {getattr(args, name)}")
    if not 0.0 <= args.gamma <= 1.0:
        fail(f"--gamma must be in [0, 1], got {args.gamma}")
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
# ddpg_td3.py's columns of updates.csv as TensorBoard's scalars, under CleanRL's names
TENSORBOARD_NAMES = {
    "gradient_steps": "charts/gradient_steps", "critic_loss": "losses/qf_loss",
    "q_mean": "losses/qf1_values", "actor_loss": "losses/actor_loss"}


if __name__ == "__main__":
    cli()

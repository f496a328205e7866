"""Soft Actor-Critic (SAC) for continuous actions, with automatic entropy tuning.

SAC learns a stochastic policy that maximizes the return plus alpha times its own entropy,
off-policy from a replay buffer. The actor is a Gaussian squashed by tanh; two critics learn
the soft Q-function from a target that takes the smaller of their slowly moving target
copies, minus alpha log pi of an action the current policy samples at s' (SAC has no target
actor). The temperature alpha is learned so that the policy's entropy stays near a target,
-dim(A) by default, or kept fixed with --no-autotune.

Key equations (a in [-1, 1]^d is what the networks see; the environment gets
center + scale * a, scale = (high - low) / 2, and log pi is the density of that action):

    actor          u ~ N(mu(s), sigma(s)^2),   a = tanh(u)
    log-prob       log pi(a|s) = sum_i [log N(u_i; mu_i, sigma_i^2) - log(1 - tanh(u_i)^2)
                                        - log(scale_i)],
                   log(1 - tanh(u)^2) = 2 (log 2 - u - softplus(-2u))     (stable form)
    critic target  y = r + gamma (1 - terminated) (min_j Q'_j(s', a') - alpha log pi(a'|s')),
                   a' ~ pi(.|s') from the current actor
    critic loss    L_Q = mean over the batch of (Q_1(s, a) - y)^2 + (Q_2(s, a) - y)^2
    actor loss     L_pi = mean over s of alpha log pi(a~|s) - min_j Q_j(s, a~),  a~ ~ pi(.|s)
    temperature    L_alpha = -mean of alpha (log pi(a~|s) + H_target),   H_target = -dim(A)
    target update  theta'_j <- tau theta_j + (1 - tau) theta'_j,  after every critic step

A time-limit truncation is not a termination: the transition stores the true final
observation (Gymnasium's info["final_obs"]) as s' and bootstraps from it.

Where this file differs from the papers (2018a, 2018b) and their common implementations
(CleanRL's sac_continuous_action.py, Stable-Baselines3's SAC):
  - It is SAC as in 2018b: twin critics, a learned temperature, no value network V(s)
    (2018a had one, and a fixed temperature given as a reward scale).
  - --policy-frequency d: as in CleanRL, every d-th critic step makes d actor (and
    temperature) steps; the papers and SB3 use d = 1, CleanRL d = 2.
  - The defaults are tuned for Pendulum-v1 on a CPU: 64-unit networks, learning rate 2e-3,
    batch 128, gamma 0.98, tau 0.02, 500 random steps, alpha starting at 0.1; the papers use
    256 units, 3e-4, 256, 0.99, 0.005 and alpha from 1 (CleanRL: learning rates 3e-4 actor,
    1e-3 critic, 5000 random steps; SB3: 3e-4, 100 random steps; rl-zoo's Pendulum: 1e-3).
  - log pi includes -log(scale) (the density of the environment's action, as in CleanRL);
    SB3 takes the density of the [-1, 1] action. With bounds of +-2 (Pendulum) the two
    differ by log 2 per dimension, which shifts where the target entropy settles.
  - The temperature loss is the paper's, in alpha = exp(log_alpha) (as CleanRL); SB3 puts
    log_alpha in place of alpha, which scales the gradient by 1/alpha.
  - log sigma is clipped to [-20, 2] (Haarnoja's code, SB3); CleanRL squashes it into
    [-5, 2] with a tanh. The critics see actions in [-1, 1] (CleanRL: environment units).

Papers:
    Haarnoja et al. 2018a, "Soft Actor-Critic: Off-Policy Maximum Entropy Deep Reinforcement
        Learning with a Stochastic Actor", ICML 2018
    Haarnoja et al. 2018b, "Soft Actor-Critic Algorithms and Applications", arXiv:1812.05905
    Fujimoto et al. 2018, "Addressing Function Approximation Error in Actor-Critic
        Methods", ICML 2018 (clipped double Q)
    Pardo et al. 2018, "Time Limits in Reinforcement Learning", ICML 2018

Run:
    python sac.py --env-id Pendulum-v1                     # the defaults
    python sac.py --env-id Pendulum-v1 --alpha 0.2 --no-autotune
    python sac.py --env-id HalfCheetah-v5 --total-timesteps 1000000 --hidden-size 256 \
        --batch-size 256 --learning-rate 3e-4 --gamma 0.99 --tau 0.005 \
        --learning-starts 5000                              # needs gymnasium[mujoco]
    python sac.py --help

Writes runs/<env_id>__sac__<seed>__<unix_time>/ with config.json, episodes.csv, updates.csv,
learning_curve.png, summary.json, model.pt with --save-model, and with --eval-every N
evaluations.csv (and best_model.pt, the best evaluated model) (CONTRIBUTING.md, "What a run
writes").
"""

# ---------------------------------------------------------------------------------------
# Imports
# ---------------------------------------------------------------------------------------
import copy
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
from dataclasses import asdict, dataclass, replace
from typing import Optional

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
    env_id: str = "Pendulum-v1"
    """a Gymnasium id (or module:id) with a bounded Box action space and a flat Box observation"""
    seed: int = 1
    """seeds Python, NumPy, torch and the environments"""
    total_timesteps: int = 10_000
    """the training budget in environment steps, all environments together"""
    cuda: bool = True
    """use the GPU when one is present"""
    output_dir: str = "runs"
    """where run folders go"""
    exp_name: str = os.path.splitext(SCRIPT)[0]
    """the experiment name, part of the run folder's name"""
    eval_episodes: int = 10
    """greedy evaluation episodes after training, a = tanh(mu(s)) (0 skips evaluation)"""
    eval_every: int = 0
    """also evaluate greedily every N environment steps (0: only after training)"""
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
    """parallel environments (synchronous vector environment)"""
    learning_starts: int = 500
    """uniformly random actions and no learning for this many environment steps"""
    gradient_steps: int = 1
    """critic gradient steps after each step of the vector environment"""
    buffer_size: int = 1_000_000
    """replay buffer capacity in transitions (never allocated larger than --total-timesteps)"""
    batch_size: int = 128
    """transitions sampled from the replay buffer for each gradient step"""
    learning_rate: float = 2e-3
    """Adam learning rate of the actor, the critics and the temperature"""
    gamma: float = 0.98
    """discount factor"""
    tau: float = 0.02
    """soft target update coefficient: theta' <- tau * theta + (1 - tau) * theta'"""
    policy_frequency: int = 1
    """d: every d-th critic step makes d actor (and temperature) steps"""
    alpha: float = 0.1
    """the temperature alpha: its starting value, or its value throughout with --no-autotune"""
    autotune: bool = True
    """learn alpha so that the policy's entropy approaches --target-entropy"""
    target_entropy: Optional[float] = None
    """H_target of the temperature loss, in nats (None: -dim(A), minus the action dimensions)"""
    hidden_size: int = 64
    """width of the two hidden layers of the actor and of each critic"""
    log_interval: int = 1_000
    """environment steps between rows of updates.csv"""


# ---------------------------------------------------------------------------------------
# The math
# ---------------------------------------------------------------------------------------
def sac_target(rewards, next_q1, next_q2, next_logprob, terminated, gamma, alpha):
    """The critics' regression target, the soft Bellman backup with clipped double Q:

        y = r + gamma * (1 - terminated) * (min(Q'_1(s', a'), Q'_2(s', a')) - alpha log pi(a'|s'))

    with a' sampled from the current policy at s'. All inputs are [B] tensors (terminated
    0/1 or bool); alpha is a number, not differentiated. A truncated step is not
    terminated: s' is its true final observation and it bootstraps. Returns y, [B].
    """
    soft_value = torch.minimum(next_q1, next_q2) - alpha * next_logprob
    return rewards + gamma * (1.0 - terminated.to(rewards.dtype)) * soft_value


def squashed_logprob(u, mean, log_std, action_scale):
    """log pi(a|s) of the action a = center + scale * tanh(u), u ~ N(mean, exp(log_std)^2),
    by the change of variables da_i/du_i = scale_i (1 - tanh(u_i)^2), summed over dimensions:

        log pi(a|s) = sum_i [log N(u_i; mean_i, sigma_i^2) - log(1 - tanh(u_i)^2) - log scale_i]
        log N(u; m, sigma^2) = -(u - m)^2 / (2 sigma^2) - log sigma - log(2 pi) / 2
        log(1 - tanh(u)^2) = 2 (log 2 - u - softplus(-2u))

    The last form is exact and stays finite where tanh(u) rounds to +-1 (|u| > 9 in float32).
    u, mean, log_std: [B, d]; action_scale: [d] (half the width of each action's range).
    Returns [B].
    """
    gaussian = -0.5 * ((u - mean) / log_std.exp()).pow(2) - log_std - 0.5 * math.log(2 * math.pi)
    log_det_tanh = 2.0 * (math.log(2.0) - u - F.softplus(-2.0 * u))
    return (gaussian - log_det_tanh - torch.log(action_scale)).sum(-1)


def actor_loss(q1, q2, logprob, alpha):
    """The policy's loss, minimized (the KL to the Boltzmann policy of the soft Q, up to a
    constant), on actions a~ = tanh(u) sampled with the reparameterization trick:

        L_pi = mean over the batch of (alpha log pi(a~|s) - min(Q_1(s, a~), Q_2(s, a~)))

    q1, q2, logprob: [B]; alpha a number. Returns a scalar.
    """
    return (alpha * logprob - torch.minimum(q1, q2)).mean()


def temperature_loss(log_alpha, logprob, target_entropy):
    """The temperature's loss (Haarnoja et al. 2018b, eq. 18), alpha = exp(log_alpha):

        L_alpha = -mean over the batch of alpha * (log pi(a~|s) + H_target)

    Its gradient raises alpha while the entropy -log pi is below H_target and lowers it
    above. logprob [B] is detached (it is data here); log_alpha a one-element tensor.
    Returns a scalar.
    """
    return -(log_alpha.exp() * (logprob.detach() + target_entropy)).mean()


def soft_update(target_net, source_net, tau):
    """Polyak averaging of a target network towards its learned network, in place:

        theta' <- tau * theta + (1 - tau) * theta'     for every parameter pair

    target_net and source_net are modules of one architecture; tau = 1 copies the source.
    """
    with torch.no_grad():
        for target, source in zip(target_net.parameters(), source_net.parameters()):
            target.lerp_(source, tau)


class ReplayBuffer:
    """The last `capacity` transitions (s, a, r, terminated, s'), each field a preallocated
    tensor written as a ring. s' is the true final observation where the episode ended at
    that step (terminated or truncated); a is in [-1, 1]^d as the actor gives it.
    """

    FIELDS = ("obs", "actions", "rewards", "terminated", "next_obs")

    def __init__(self, capacity, obs_dim, action_dim, device):
        shapes = ((obs_dim,), (action_dim,), (), (), (obs_dim,))
        for name, shape in zip(self.FIELDS, shapes):
            setattr(self, name, torch.zeros((capacity, *shape), device=device))
        self.capacity, self.pos, self.size = capacity, 0, 0

    def add(self, obs, actions, rewards, terminated, next_obs):
        """N transitions, arrays [N, ...] or [N]; the oldest are overwritten when full."""
        n = len(rewards)
        index = torch.arange(self.pos, self.pos + n) % self.capacity
        for name, value in zip(self.FIELDS, (obs, actions, rewards, terminated, next_obs)):
            getattr(self, name)[index] = torch.as_tensor(np.asarray(value, dtype=np.float32))
        self.pos = (self.pos + n) % self.capacity
        self.size = min(self.size + n, self.capacity)

    def sample(self, batch_size):
        """A batch drawn uniformly with replacement: (obs [B, obs_dim], actions [B, d],
        rewards [B], terminated [B] as 0.0/1.0, next_obs [B, obs_dim])."""
        index = torch.randint(self.size, (batch_size,), device=self.obs.device)
        return tuple(getattr(self, name)[index] for name in self.FIELDS)


# ---------------------------------------------------------------------------------------
# Networks
# ---------------------------------------------------------------------------------------
LOG_STD_MIN, LOG_STD_MAX = -20.0, 2.0  # log sigma's range, as in Haarnoja's code


def mlp(in_size, hidden_size, out_size):
    return nn.Sequential(nn.Linear(in_size, hidden_size), nn.ReLU(),
                         nn.Linear(hidden_size, hidden_size), nn.ReLU(),
                         nn.Linear(hidden_size, out_size))


class Critic(nn.Module):
    """Q(s, a) = MLP([s, a]): obs [B, obs_dim], actions [B, d] -> [B]."""

    def __init__(self, obs_dim, action_dim, hidden_size):
        super().__init__()
        self.net = mlp(obs_dim + action_dim, hidden_size, 1)

    def forward(self, obs, actions):
        return self.net(torch.cat([obs, actions], dim=-1)).squeeze(-1)


class Actor(nn.Module):
    """The squashed Gaussian policy: one MLP gives mu(s) and log sigma(s), [B, d] each.
    action_scale [d] is half the width of each action's range (for log pi)."""

    def __init__(self, obs_dim, action_dim, hidden_size, action_scale):
        super().__init__()
        self.net = mlp(obs_dim, hidden_size, 2 * action_dim)
        self.register_buffer("action_scale", torch.as_tensor(action_scale, dtype=torch.float32))

    def forward(self, obs):
        mean, log_std = self.net(obs).chunk(2, dim=-1)
        return mean, log_std.clamp(LOG_STD_MIN, LOG_STD_MAX)

    def sample(self, obs):
        """a = tanh(u), u = mu + sigma * eps (reparameterized: gradients reach mu and sigma);
        returns (a [B, d] in [-1, 1], log pi(a|s) [B])."""
        mean, log_std = self(obs)
        u = mean + log_std.exp() * torch.randn_like(mean)
        return torch.tanh(u), squashed_logprob(u, mean, log_std, self.action_scale)

    def greedy(self, obs):
        """The evaluation action, a = tanh(mu(s)), [B, d]."""
        return torch.tanh(self(obs)[0])


class Agent:
    """The actor, the twin critics, their target copies, the temperature and the three
    Adam optimizers. update() is one SAC gradient step on a batch."""

    def __init__(self, obs_dim, action_dim, action_scale, args, device):
        self.args = args
        self.actor = Actor(obs_dim, action_dim, args.hidden_size, action_scale).to(device)
        self.critic1 = Critic(obs_dim, action_dim, args.hidden_size).to(device)
        self.critic2 = Critic(obs_dim, action_dim, args.hidden_size).to(device)
        self.critic1_target = copy.deepcopy(self.critic1).requires_grad_(False)
        self.critic2_target = copy.deepcopy(self.critic2).requires_grad_(False)
        critic_params = [*self.critic1.parameters(), *self.critic2.parameters()]
        self.critic_optimizer = torch.optim.Adam(critic_params, lr=args.learning_rate)
        self.actor_optimizer = torch.optim.Adam(self.actor.parameters(), lr=args.learning_rate)
        self.log_alpha = torch.tensor([math.log(args.alpha)], device=device,
                                      requires_grad=args.autotune)
        if args.autotune:
            self.alpha_optimizer = torch.optim.Adam([self.log_alpha], lr=args.learning_rate)
        self.target_entropy = -action_dim if args.target_entropy is None else args.target_entropy
        self.critic_steps = 0

    def alpha(self):
        """alpha as a plain number: no loss but the temperature's differentiates it."""
        return self.log_alpha.exp().item()

    def update(self, obs, actions, rewards, terminated, next_obs):
        """One critic step; on every policy_frequency-th one also that many actor and
        temperature steps; then the soft update of both target critics. Returns the
        losses and alpha as numbers for updates.csv."""
        args = self.args
        with torch.no_grad():  # the target: current actor at s', the target critics
            next_actions, next_logprob = self.actor.sample(next_obs)
            y = sac_target(rewards, self.critic1_target(next_obs, next_actions),
                           self.critic2_target(next_obs, next_actions), next_logprob,
                           terminated, args.gamma, self.alpha())
        q1, q2 = self.critic1(obs, actions), self.critic2(obs, actions)
        critic1_loss, critic2_loss = F.mse_loss(q1, y), F.mse_loss(q2, y)
        self.critic_optimizer.zero_grad()
        (critic1_loss + critic2_loss).backward()
        self.critic_optimizer.step()
        self.critic_steps += 1
        stats = {"critic1_loss": critic1_loss.item(), "critic2_loss": critic2_loss.item(),
                 "q1_mean": q1.mean().item()}

        if self.critic_steps % args.policy_frequency == 0:
            for _ in range(args.policy_frequency):
                new_actions, logprob = self.actor.sample(obs)
                loss = actor_loss(self.critic1(obs, new_actions), self.critic2(obs, new_actions),
                                  logprob, self.alpha())
                self.actor_optimizer.zero_grad()  # (the critics' .grad is cleared before use)
                loss.backward()
                self.actor_optimizer.step()
                if args.autotune:
                    self.alpha_optimizer.zero_grad()
                    temperature_loss(self.log_alpha, logprob, self.target_entropy).backward()
                    self.alpha_optimizer.step()
            stats.update(actor_loss=loss.item(), entropy=-logprob.mean().item())
        soft_update(self.critic1_target, self.critic1, args.tau)
        soft_update(self.critic2_target, self.critic2, args.tau)
        return {**stats, "alpha": self.alpha()}


# ---------------------------------------------------------------------------------------
# Training
# ---------------------------------------------------------------------------------------
def train(args, agent, envs, run, summary, device):
    """The SAC loop: act (uniformly at random before --learning-starts, then sampling the
    policy), store the transition with its true final observation, take --gradient-steps
    SAC updates, and log. Fills summary in place; returns the environment steps taken.
    A Ctrl-C or a non-finite loss stops it early with summary["interrupted"] set."""
    action_space, action_dim = envs.single_action_space, envs.single_action_space.shape[0]
    obs_dim = envs.single_observation_space.shape[0]
    buffer = ReplayBuffer(min(args.buffer_size, args.total_timesteps), obs_dim, action_dim, device)
    global_step, last_log, stats = 0, 0, []
    obs, _ = envs.reset(seed=args.seed)
    for _ in range(args.total_timesteps // args.num_envs):
        # Act
        if global_step < args.learning_starts:
            actions = torch.rand((args.num_envs, action_dim)) * 2 - 1
        else:
            with torch.no_grad():
                actions, _ = agent.actor.sample(torch.as_tensor(obs, dtype=torch.float32,
                                                                device=device))
            actions = actions.cpu()
        next_obs, rewards, terminated, truncated, info = envs.step(
            to_env_action(actions, action_space))
        global_step += args.num_envs
        run.step(global_step)  # progress line; evaluation every --eval-every steps

        # Store s' = the true last observation where an episode ended, not the next
        # episode's first: a truncated step bootstraps from it, a terminated one does not
        final_obs = next_obs.copy()
        for i in np.flatnonzero(terminated | truncated):
            final_obs[i] = info["final_obs"][i]
        buffer.add(obs, actions.numpy(), rewards, terminated, final_obs)
        obs = next_obs

        for i in np.flatnonzero(info.get("_episode", [])):
            run.episode(global_step, info["episode"]["r"][i], info["episode"]["l"][i])
        if args.stop_at_return is not None and run.last20() >= args.stop_at_return:
            summary["solved_at_step"] = global_step
            summary["solved_at_time_s"] = round(time.time() - run.start, 3)
            break

        # Learn
        if global_step >= args.learning_starts:
            for _ in range(args.gradient_steps):
                stats.append(agent.update(*buffer.sample(args.batch_size)))

        # Log
        if stats and global_step - last_log >= args.log_interval:
            last_log, row, stats = global_step, run.update(global_step, stats), []
            if run.non_finite(row, global_step):  # says so; the run stops as interrupted
                break
    if stats and not summary["interrupted"]:
        run.update(global_step, stats)


def main(args: Args) -> dict:
    """Train SAC (or, with --eval-checkpoint, evaluate a saved actor), write the run folder
    and return the summary."""
    obs_shape, action_space = check(args)
    checkpoint = None
    if args.eval_checkpoint is not None:
        checkpoint = load_checkpoint(args.eval_checkpoint, args.env_id)
        args = replace(args, hidden_size=checkpoint["args"]["hidden_size"])

    device = seed_and_device(args)
    scale = (action_space.high - action_space.low) / 2
    agent = Agent(obs_shape[0], action_space.shape[0], scale, args, device)
    if checkpoint is not None:
        load_actor(agent, checkpoint, args)
    summary = new_summary(args)
    run = RunWriter(args, device, agent, summary)
    print(f"{SCRIPT}: {args.env_id}, seed {args.seed}, device {device}")
    if checkpoint is None:
        envs = make_vector_env(args.env_id, args.num_envs)
        try:
            train(args, agent, envs, run, summary, device)
        except KeyboardInterrupt:
            print(f"{SCRIPT}: interrupted; writing what the run has so far")
            summary["interrupted"] = True
        finally:
            envs.close()
    return finish(args, run, summary, agent, device, trained=checkpoint is None)


# ---------------------------------------------------------------------------------------
# Plumbing: checks, run folder, evaluation, checkpoints (not needed to follow the algorithm)
# ---------------------------------------------------------------------------------------
class UsageError(Exception):
    """Bad input: reported as one line on stderr with exit status 2, before training."""


def fail(message):
    raise UsageError(message)


def check(args):
    """Everything a user can get wrong, checked before any training (CONTRIBUTING.md, "Bad
    input"); returns the environment's (observation shape, action space)."""
    for name in ("total_timesteps", "num_envs", "gradient_steps", "buffer_size", "batch_size",
                 "hidden_size", "policy_frequency", "log_interval"):
        if getattr(args, name) <= 0:
            fail(f"--{name.replace('_', '-')} must be positive, got {getattr(args, name)}")
    for name in ("learning_rate", "alpha"):
        if not getattr(args, name) > 0:
            fail(f"--{name.replace('_', '-')} must be positive, got {getattr(args, name)}")
    for name in ("learning_starts", "eval_episodes"):
        if getattr(args, name) < 0:
            fail(f"--{name.replace('_', '-')} must be 0 or more, got {getattr(args, name)}")
    if args.eval_every < 0:
        fail("--eval-every must be 0 (evaluate only after training) or more, "
             f"got {args.eval_every}")
    if args.eval_every and not args.eval_episodes:
        fail("--eval-every needs at least one evaluation episode; pass --eval-episodes 1 or more")
    if not 0.0 <= args.gamma <= 1.0:
        fail(f"--gamma must be in [0, 1], got {args.gamma}")
    if not 0.0 < args.tau <= 1.0:
        fail(f"--tau must be in (0, 1], got {args.tau}")
    if args.target_entropy is not None and not args.autotune:
        fail("--target-entropy needs the learned temperature; drop --no-autotune or the target")
    if args.total_timesteps % args.num_envs:
        fail(f"--total-timesteps {args.total_timesteps} is not divisible by --num-envs "
             f"{args.num_envs}; each step of the vector environment takes num_envs steps")
    if args.eval_checkpoint is None and args.learning_starts >= args.total_timesteps:
        fail(f"--learning-starts {args.learning_starts} leaves no step of the "
             f"--total-timesteps {args.total_timesteps} to learn in; lower it or raise the budget")
    if args.capture_video and importlib.util.find_spec("moviepy") is None:
        fail("--capture-video needs moviepy: pip install moviepy")
    return check_env(args.env_id, args.capture_video)


def seed_and_device(args):
    """Seed Python, NumPy and torch (CONTRIBUTING.md, "Determinism"); return the device."""
    random.seed(args.seed)
    np.random.seed(args.seed)
    torch.manual_seed(args.seed)
    device = torch.device("cuda" if args.cuda and torch.cuda.is_available() else "cpu")
    if device.type == "cpu":
        torch.set_num_threads(1)  # small MLPs run faster without the thread pool
    return device


def check_env(env_id, capture_video=False):
    """Import the module of a `module:EnvId` id, find the id, build one environment and
    check its spaces (and, for --capture-video, that it renders)."""
    module, _, name = env_id.rpartition(":")
    if module:
        try:
            importlib.import_module(module)
        except Exception as e:
            fail(f"cannot import module {module!r} of --env-id {env_id} ({type(e).__name__}: "
                 f"{(str(e).splitlines() or [''])[0]}); is it on the Python path?")
    if name not in gym.registry:
        close = difflib.get_close_matches(name, list(gym.registry), n=3, cutoff=0.5)
        hint = f"; did you mean {', '.join(close)}?" if close else "; see gymnasium.registry"
        where = f": module {module} registers no environment {name}" if module else ""
        fail(f"unknown environment id {env_id!r}{where}{hint}")
    try:
        env = gym.make(env_id)
    except (gym.error.Error, ImportError) as e:
        fail(f"cannot make {env_id}: {str(e).splitlines()[0]}")
    obs_space, action_space = env.observation_space, env.action_space
    env.close()
    if not isinstance(action_space, gym.spaces.Box) or len(action_space.shape) != 1:
        fail(f"{env_id} has a {type(action_space).__name__} action space of shape "
             f"{action_space.shape}; sac.py needs a flat continuous (Box) one (for discrete "
             "actions use dqn.py or ppo.py)")
    if not (np.isfinite(action_space.low).all() and np.isfinite(action_space.high).all()):
        fail(f"{env_id} has unbounded actions (an infinite low or high bound); sac.py squashes "
             "its actions into finite bounds (ppo.py's Gaussian policy needs none)")
    if not isinstance(obs_space, gym.spaces.Box) or len(obs_space.shape) != 1:
        fail(f"{env_id} has a {type(obs_space).__name__} observation space of shape "
             f"{obs_space.shape}; sac.py's MLPs need flat Box observations")
    if capture_video:  # rendering can fail (MuJoCo without a display): find out before training
        try:
            with warnings.catch_warnings():  # the error below says it in one line
                warnings.simplefilter("ignore")
                env = gym.make(env_id, render_mode="rgb_array")
                env.reset(seed=0)
                env.render()
                env.close()
        except Exception as e:
            fail(f"cannot record videos of {env_id} ({type(e).__name__}: "
                 f"{(str(e).splitlines() or [''])[0]}); for MuJoCo on a machine without a "
                 "display set MUJOCO_GL=egl")
    return obs_space.shape, action_space


def make_vector_env(env_id, num_envs, video_folder=None):
    """N copies of env_id in one synchronous vector environment, with SAME_STEP autoreset
    (the observation after an episode ends is the next episode's first; the true last one
    is in info["final_obs"]) and episode statistics recorded by Gymnasium's wrapper."""
    def make(i):
        if video_folder is None:
            return gym.make(env_id)
        env = gym.make(env_id, render_mode="rgb_array")
        with warnings.catch_warnings():  # the environments share one folder on purpose
            warnings.filterwarnings("ignore", message=".*Overwriting existing videos")
            return gym.wrappers.RecordVideo(env, video_folder, name_prefix=f"eval-{i}",
                                           episode_trigger=lambda episode: episode == 0)

    envs = gym.vector.SyncVectorEnv([lambda i=i: make(i) for i in range(num_envs)],
                                    autoreset_mode=gym.vector.AutoresetMode.SAME_STEP)
    return gym.wrappers.vector.RecordEpisodeStatistics(envs)


def to_env_action(actions, action_space):
    """Actions in [-1, 1]^d (a tensor) to the environment's bounds:
    low + (a + 1) / 2 * (high - low), that is center + scale * a."""
    low, high = action_space.low, action_space.high
    return low + (actions.cpu().numpy() + 1.0) * 0.5 * (high - low)


def evaluate(actor, env_id, episodes, seed, device, video_folder=None):
    """Greedy returns (a = tanh(mu(s))) of `episodes` episodes, one per environment of a
    vector env, all at once."""
    envs = make_vector_env(env_id, episodes, video_folder)
    obs, _ = envs.reset(seed=seed)
    returns = np.full(episodes, np.nan)
    with torch.no_grad():
        while np.isnan(returns).any():
            action = actor.greedy(torch.as_tensor(obs, dtype=torch.float32, device=device))
            obs, _, _, _, info = envs.step(to_env_action(action, envs.single_action_space))
            if "_episode" in info:
                first = info["_episode"] & np.isnan(returns)
                returns[first] = info["episode"]["r"][first]
    envs.close()
    return returns


class RunWriter:
    """The run folder (CONTRIBUTING.md, "What a run writes"): config.json now, episodes.csv,
    updates.csv and evaluations.csv row by row (flushed, so an interrupted run keeps them);
    the progress line every 2 seconds and the greedy evaluations of --eval-every, with
    best_model.pt. It keeps summary["global_steps"] current."""

    UPDATE_FIELDS = ("critic1_loss", "critic2_loss", "q1_mean", "actor_loss", "entropy", "alpha")

    def __init__(self, args, device, agent, summary):
        self.args, self.device, self.agent, self.summary = args, device, agent, summary
        self.start = self.last_print = time.time()
        env_name = args.env_id.replace("/", "-").replace(":", "-")
        name = f"{env_name}__{args.exp_name}__{args.seed}__{int(self.start)}"
        self.path = os.path.join(args.output_dir, name)
        for suffix in range(2, 1000):
            try:
                os.makedirs(self.path)
                break
            except FileExistsError:
                self.path = os.path.join(args.output_dir, f"{name}-{suffix}")
            except OSError as e:
                fail(f"cannot create the run folder {self.path}: {e.strerror}")
        self.write_json("config.json", {**asdict(args), "device": str(device), "versions": {
            "torch": torch.__version__, "gymnasium": gym.__version__, "numpy": np.__version__,
            "python": sys.version.split()[0]}})
        self.episodes, self.files = [], []
        self.episode_csv = self.open_csv("episodes.csv", ("global_step", "wall_time",
                                                          "episode_return", "episode_length"))
        self.update_csv = self.open_csv("updates.csv", ("global_step", "wall_time", "sps",
                                                        *self.UPDATE_FIELDS))
        self.evaluations = []  # (global_step, mean, std) of each --eval-every evaluation
        if args.eval_every:
            self.evaluation_csv = self.open_csv("evaluations.csv", (
                "global_step", "wall_time", "eval_return_mean", "eval_return_std"))

    def open_csv(self, filename, fields):
        self.files.append(open(os.path.join(self.path, filename), "w", newline=""))
        writer = csv.writer(self.files[-1])
        writer.writerow(fields)
        return writer

    def write_json(self, filename, data):
        with open(os.path.join(self.path, filename), "w") as f:
            json.dump(data, f, indent=2)

    def episode(self, global_step, episode_return, episode_length):
        self.episodes.append((global_step, float(episode_return)))
        self.episode_csv.writerow([global_step, round(time.time() - self.start, 4),
                                   float(episode_return), int(episode_length)])

    def last20(self):
        """The mean of the last 20 episode returns (-inf before 20 episodes have ended)."""
        recent = [r for _, r in self.episodes[-20:]]
        return float(np.mean(recent)) if len(recent) == 20 else -math.inf

    def recent_return(self):
        """The mean of the last 20 episode returns, or of all of them before 20 have ended
        (None before the first)."""
        recent = [r for _, r in self.episodes[-20:]]
        return float(np.mean(recent)) if recent else None

    def step(self, global_step):
        """After each step of the vector environment: keep summary["global_steps"] current
        (should Ctrl-C stop the run), evaluate greedily each time global_step crosses a
        multiple of --eval-every, and print the progress line every 2 seconds."""
        every, previous = self.args.eval_every, self.summary["global_steps"]
        self.summary["global_steps"] = global_step
        if every and global_step // every > previous // every:
            self.evaluation(global_step)
        if time.time() - self.last_print >= 2.0:
            self.last_print = time.time()
            print(progress_line(global_step, self.args.total_timesteps, time.time() - self.start,
                                self.recent_return()))

    def evaluation(self, global_step):
        """Evaluate the policy as it is now, a = tanh(mu(s)), on environments of its own
        seeded as the final evaluation's (the greedy action draws no random number, and the
        training environments are untouched); append the row to evaluations.csv and, with
        --save-model, keep the best model so far (the first, on a tie) as best_model.pt."""
        wall_time = round(time.time() - self.start, 4)
        returns = evaluate(self.agent.actor, self.args.env_id, self.args.eval_episodes,
                           self.args.seed + 100_000, self.device)
        mean, std = float(returns.mean()), float(returns.std())
        self.evaluation_csv.writerow([global_step, wall_time, mean, std])
        for f in self.files:
            f.flush()
        if self.args.save_model and mean > max((m for _, m, _ in self.evaluations),
                                               default=-math.inf):
            save_checkpoint(os.path.join(self.path, "best_model.pt"), self.agent, self.args)
        self.evaluations.append((global_step, mean, std))

    def non_finite(self, row, global_step):
        """True, after saying so and marking the run interrupted, when a figure of the
        updates.csv row is NaN or inf."""
        if all(math.isfinite(v) for v in row.values()):
            return False
        print(f"{SCRIPT}: a loss became non-finite (NaN or inf) at step {global_step}; "
              "stopping (try a lower --learning-rate)")
        self.summary["interrupted"] = True
        return True

    def update(self, global_step, stats):
        """One row: the means of the update statistics since the last row (NaN for the
        actor's when no actor step happened). Returns the row."""
        elapsed = time.time() - self.start
        row = {"global_step": global_step, "wall_time": round(elapsed, 4),
               "sps": int(global_step / elapsed)}
        for key in self.UPDATE_FIELDS:
            values = [s[key] for s in stats if key in s]
            row[key] = float(np.mean(values)) if values else math.nan
        self.update_csv.writerow(row.values())
        for f in self.files:
            f.flush()
        return row

    def close(self):
        for f in self.files:
            f.close()

    def plot(self, title):
        """Episode return against environment steps: raw points faded, a moving average of
        20 episodes on top, and the greedy evaluations of --eval-every as a second series
        (the mean, the std as error bars). Returns the file's path."""
        fig = Figure(figsize=(7, 4), dpi=100)
        ax = fig.add_subplot()
        steps, returns = (np.array(c) for c in zip(*self.episodes)) if self.episodes else ([], [])
        ax.scatter(steps, returns, s=6, alpha=0.25, color="tab:blue", label="episode return")
        if len(returns):
            window = min(20, len(returns))
            smooth = np.convolve(returns, np.ones(window) / window, mode="valid")
            ax.plot(steps[window - 1:], smooth, color="tab:blue", lw=2,
                    label=f"mean of last {window}")
        if self.evaluations:
            eval_steps, means, stds = zip(*self.evaluations)
            ax.errorbar(eval_steps, means, yerr=stds, color="tab:orange", marker="o", ms=4,
                        capsize=3, label="greedy evaluation (mean, std)")
        if len(returns) or self.evaluations:
            ax.legend(loc="lower right")
        ax.set(xlabel="environment steps", ylabel="episode return", title=title)
        ax.grid(alpha=0.3)
        fig.tight_layout()
        fig.savefig(os.path.join(self.path, "learning_curve.png"))
        return os.path.join(self.path, "learning_curve.png")


def progress_line(global_step, total_steps, elapsed, recent_return):
    """The console's progress: the step out of the budget, the percentage, steps per second,
    the time left at that speed (h:mm:ss) and the mean of the last 20 training returns.

        sps = global_step / elapsed,   ETA = max(total_steps - global_step, 0) / sps
    """
    sps = global_step / elapsed
    minutes, seconds = divmod(round(max(total_steps - global_step, 0) / sps), 60)
    recent = "n/a" if recent_return is None else f"{recent_return:.1f}"
    return (f"step {global_step:,}/{total_steps:,} ({100 * global_step / total_steps:.0f}%) | "
            f"{sps:,.0f} sps | ETA {minutes // 60}:{minutes % 60:02}:{seconds:02} | "
            f"return (last 20) {recent}")


def save_checkpoint(path, agent, args):
    torch.save({"actor": agent.actor.state_dict(), "critic1": agent.critic1.state_dict(),
                "critic2": agent.critic2.state_dict(), "log_alpha": agent.log_alpha.detach(),
                "args": asdict(args)}, path)


def load_checkpoint(path, env_id):
    """Load a model.pt safely (weights_only) and check it was made for env_id."""
    if not os.path.isfile(path):
        fail(f"checkpoint {path} does not exist")
    try:
        checkpoint = torch.load(path, map_location="cpu", weights_only=True)
        if "actor" not in checkpoint or not {"env_id", "hidden_size"} <= set(checkpoint["args"]):
            raise KeyError("missing entries")
    except Exception as e:
        fail(f"checkpoint {path} is not a sac.py model.pt ({type(e).__name__}); "
             "make one with --save-model")
    if checkpoint["args"]["env_id"] != env_id:
        fail(f"checkpoint {path} was made for {checkpoint['args']['env_id']}, not {env_id}; "
             f"pass --env-id {checkpoint['args']['env_id']}")
    return checkpoint


def load_actor(agent, checkpoint, args):
    try:
        agent.actor.load_state_dict(checkpoint["actor"])
    except (RuntimeError, KeyError, AttributeError) as e:
        fail(f"checkpoint {args.eval_checkpoint} does not fit {args.env_id}'s network: "
             f"{str(e).splitlines()[0]}")


def new_summary(args):
    """summary.json's fields (CONTRIBUTING.md, "What a run writes"), none filled in yet."""
    return {"algorithm": "sac", "env_id": args.env_id, "seed": args.seed, "global_steps": 0,
            "wall_time_s": None, "train_return_last20": None, "eval_return_mean": None,
            "eval_return_std": None, "eval_episodes": args.eval_episodes,
            "solved_at_step": None, "solved_at_time_s": None, "interrupted": False}


def finish(args, run, summary, agent, device, trained=True):
    """Evaluate greedily, save the model if asked, write summary.json and the curve, and
    print the closing line. An interrupted run skips the evaluation."""
    summary["train_return_last20"] = run.recent_return()
    summary["wall_time_s"] = round(time.time() - run.start, 3)
    if args.eval_episodes and not summary["interrupted"]:
        video_folder = os.path.join(run.path, "videos") if args.capture_video else None
        returns = evaluate(agent.actor, args.env_id, args.eval_episodes, args.seed + 100_000,
                           device, video_folder)
        summary["eval_return_mean"] = float(returns.mean())
        summary["eval_return_std"] = float(returns.std())
    if args.save_model and trained:
        save_checkpoint(os.path.join(run.path, "model.pt"), agent, args)
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


if __name__ == "__main__":
    try:
        main(tyro.cli(Args))
    except UsageError as e:
        print(f"{SCRIPT}: error: {e}", file=sys.stderr)
        sys.exit(2)

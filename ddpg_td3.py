"""DDPG and TD3 for continuous actions, with each of TD3's three improvements a flag of its own.

DDPG learns a deterministic policy mu(s) and a critic Q(s, a) from a replay buffer: the
critic regresses on a one-step bootstrapped target computed with slowly moving target
networks, and the actor climbs the critic's gradient with respect to the action. TD3 keeps
all of that and adds three fixes for the critic's overestimation: clipped double Q (two
critics, the target takes the smaller), target policy smoothing (noise on the target
action) and a delayed policy (the actor and the targets move once every d critic steps).
`--algo td3` (the default) and `--algo ddpg` set the three at once; each flag given as well
overrides its part, so the improvements can be switched on one at a time. DDPG here is the
one TD3's paper compares with: Gaussian exploration noise rather than Ornstein-Uhlenbeck,
no batch normalization, the same networks and optimizer as TD3.

Key equations (every action lives in [-1, 1]^d, the range of the actor's tanh; it is scaled
to the environment's bounds only when stepping, so the noise scales are fractions of the
half-range of each dimension):

    exploration    a  = clip(mu(s) + eps, -1, 1),                 eps ~ N(0, sigma^2)
    target action  a' = clip(mu'(s') + clip(eps', -c, c), -1, 1), eps' ~ N(0, sigma'^2)
                        (DDPG, and TD3 without smoothing: a' = mu'(s'))
    critic target  y  = r + gamma * (1 - terminated) * min(Q'_1(s', a'), Q'_2(s', a'))
                        (DDPG, and TD3 without twin critics: Q'_1 alone)
    critic loss    L_Q  = sum_i mean over the batch of (Q_i(s, a) - y)^2
    actor loss     L_mu = -mean over the batch of Q_1(s, mu(s)),   every d-th critic step
    target update  theta' <- tau * theta + (1 - tau) * theta',     with every actor step

A time-limit truncation is not a termination: the transition stores the true final
observation (Gymnasium's info["final_obs"]) as s' and bootstraps from it, while a
terminated step does not bootstrap.

Papers:
    Silver et al. 2014, "Deterministic Policy Gradient Algorithms", ICML 2014
    Lillicrap et al. 2016, "Continuous Control with Deep Reinforcement Learning", ICLR 2016
    Fujimoto, van Hoof & Meger 2018, "Addressing Function Approximation Error in
        Actor-Critic Methods", ICML 2018
    Pardo et al. 2018, "Time Limits in Reinforcement Learning", ICML 2018

Run:
    python ddpg_td3.py --env-id Pendulum-v1                  # TD3, the defaults
    python ddpg_td3.py --env-id Pendulum-v1 --algo ddpg      # DDPG
    python ddpg_td3.py --env-id Pendulum-v1 --algo ddpg --twin-q True   # DDPG + clipped double Q
    python ddpg_td3.py --env-id my_envs:Slider-v0            # an id your module my_envs registers
    python ddpg_td3.py --env-id HalfCheetah-v5 --total-timesteps 1000000 --gamma 0.99 \
        --tau 0.005 --learning-rate 3e-4 --learning-starts 25000 --hidden-size 256 \
        --batch-size 256                                    # needs gymnasium[mujoco]
    python ddpg_td3.py --help

Writes runs/<env_id>__ddpg_td3__<seed>__<unix_time>/ with config.json, episodes.csv,
updates.csv, learning_curve.png, summary.json, model.pt with --save-model, and with
--eval-every N evaluations.csv (and best_model.pt, the best evaluated model)
(CONTRIBUTING.md, "What a run writes").
"""

# ---------------------------------------------------------------------------------------
# Imports
# ---------------------------------------------------------------------------------------
import copy
import csv
import difflib
import importlib
import importlib.util
import json
import math
import os
import random
import sys
import time
import warnings
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
    env_id: str = "Pendulum-v1"
    """a Gymnasium id (or module:id) with a bounded Box action space and a flat Box observation"""
    seed: int = 1
    """seeds Python, NumPy, torch and the environments"""
    total_timesteps: int = 15_000
    """the training budget in environment steps, all environments together"""
    cuda: bool = True
    """use the GPU when one is present"""
    output_dir: str = "runs"
    """where run folders go"""
    exp_name: str = os.path.splitext(SCRIPT)[0]
    """the experiment name, part of the run folder's name"""
    eval_episodes: int = 10
    """greedy evaluation episodes after training, without exploration noise (0 skips it)"""
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
    algo: Literal["td3", "ddpg"] = "td3"
    """td3: twin critics, target smoothing noise 0.2, policy delay 2; ddpg: one critic, 0, 1"""
    twin_q: Optional[bool] = None
    """clipped double Q: two critics, the target takes the smaller (None: set by --algo)"""
    target_policy_noise: Optional[float] = None
    """sigma' of the target smoothing noise, a fraction of the half-range (None: set by --algo)"""
    noise_clip: float = 0.5
    """c: the target policy smoothing noise is clipped to [-c, c]"""
    policy_delay: Optional[int] = None
    """d: the actor and the targets move on every d-th critic step (None: set by --algo)"""
    num_envs: int = 1
    """parallel environments (synchronous vector environment)"""
    learning_starts: int = 1_000
    """uniformly random actions and no learning for this many environment steps"""
    gradient_steps: int = 1
    """critic gradient steps after each step of the vector environment"""
    buffer_size: int = 1_000_000
    """replay buffer capacity in transitions (never allocated larger than --total-timesteps)"""
    batch_size: int = 128
    """transitions sampled from the replay buffer for each gradient step"""
    learning_rate: float = 1e-3
    """Adam learning rate of the actor and the critics"""
    gamma: float = 0.98
    """discount factor"""
    tau: float = 0.02
    """soft target update coefficient: theta' <- tau * theta + (1 - tau) * theta'"""
    exploration_noise: float = 0.1
    """sigma of the Gaussian exploration noise, a fraction of the action half-range"""
    hidden_size: int = 64
    """width of the two hidden layers of the actor and of each critic"""
    log_interval: int = 1_000
    """environment steps between rows of updates.csv"""


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
    source_net, modules of one architecture):

        theta' <- tau * theta + (1 - tau) * theta'

    tau = 1 copies the source; a small tau makes the target move slowly.
    """
    with torch.no_grad():
        for target, source in zip(target_net.parameters(), source_net.parameters()):
            target.mul_(1.0 - tau).add_(source, alpha=tau)


def to_env_action(actions, action_space):
    """Actions in [-1, 1]^d (a tensor [N, d]) to the environment's bounds, a NumPy array:

        low + (a + 1) / 2 * (high - low)
    """
    low, high = action_space.low, action_space.high
    return low + (actions.cpu().numpy() + 1.0) * 0.5 * (high - low)


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
        where = (self.pos + np.arange(len(rows))) % self.capacity
        self.table[torch.from_numpy(where)] = torch.from_numpy(rows).to(self.table.device)
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
        y = td3_target(rewards, next_q1, next_q2, terminated, args.gamma, args.twin_q)
    q1 = nets.qf1(obs, actions)
    critic_loss = F.mse_loss(q1, y)
    if args.twin_q:
        critic_loss = critic_loss + F.mse_loss(nets.qf2(obs, actions), y)
    critic_optimizer.zero_grad()
    critic_loss.backward()
    critic_optimizer.step()
    stats = {"critic_loss": critic_loss.item(), "q_mean": q1.mean().item()}

    if gradient_step % args.policy_delay == 0:
        # The deterministic policy gradient: raise Q_1(s, mu(s)) through the action. Only
        # the actor's optimizer steps; the gradient this leaves on qf1 is cleared by the
        # critic optimizer's zero_grad() before the next critic step.
        actor_loss = -nets.qf1(obs, nets.actor(obs)).mean()
        actor_optimizer.zero_grad()
        actor_loss.backward()
        actor_optimizer.step()
        stats["actor_loss"] = actor_loss.item()
        soft_update(nets.actor_target, nets.actor, args.tau)
        for target, critic in nets.critics():
            soft_update(target, critic, args.tau)
    return stats


def train(args, envs, nets, run, summary):
    """Step the environments with the actor's noisy actions (uniformly random ones for the
    first --learning-starts steps), store every transition, and from --learning-starts on
    take --gradient-steps updates after each step. Fills in summary as it goes."""
    device = next(nets.parameters()).device
    action_space = envs.single_action_space
    obs_dim, action_dim = envs.single_observation_space.shape[0], action_space.shape[0]
    buffer = ReplayBuffer(min(args.buffer_size, args.total_timesteps), obs_dim, action_dim,
                          device)
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
    for _ in range(args.total_timesteps // args.num_envs):
        # Collect: one step of every environment
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

        # Record the episodes that ended; stop once the last 20 returns reach --stop-at-return
        for i in np.flatnonzero(info.get("_episode", [])):
            run.episode(global_step, info["episode"]["r"][i], info["episode"]["l"][i])
        if run.reached(args.stop_at_return):
            summary["solved_at_step"] = global_step
            summary["solved_at_time_s"] = round(time.time() - run.start, 3)
            break

        # Learn: once --learning-starts is reached, --gradient-steps updates after each step
        for _ in range(args.gradient_steps if global_step >= args.learning_starts else 0):
            gradient_steps += 1
            losses = update(buffer.sample(args.batch_size), nets, critic_optimizer,
                            actor_optimizer, args, gradient_steps)
            for key, value in losses.items():
                stats[key].append(value)

        # Log: a row of updates.csv every --log-interval steps
        if global_step - last_log >= args.log_interval and gradient_steps:
            last_log = global_step
            row = run.update(global_step, stats, gradient_steps=gradient_steps)
            if run.non_finite(row["critic_loss"], global_step):  # says so; stops as interrupted
                return
    if global_step != last_log and gradient_steps:
        run.update(global_step, stats, gradient_steps=gradient_steps)


def main(args: Args) -> dict:
    """Train DDPG/TD3 (or, with --eval-checkpoint, evaluate a saved model), write the run
    folder and return the summary."""
    args = resolve_algo(args)
    check_args(args)
    obs_shape, action_space = check_env(args.env_id, args.capture_video)
    checkpoint = None
    if args.eval_checkpoint is not None:
        checkpoint = load_checkpoint(args.eval_checkpoint, args.env_id)
        args = replace(args, **{k: checkpoint["args"][k] for k in CHECKPOINT_FLAGS})

    device = seed_and_device(args)
    nets = Networks(obs_shape[0], action_space.shape[0], args.hidden_size, args.twin_q)
    nets = nets.to(device)
    if checkpoint is not None:
        load_actor(nets, checkpoint, args)
    summary = new_summary(args)
    run = RunWriter(args, device, nets, summary)
    print(f"{SCRIPT}: {args.env_id}, seed {args.seed}, {algorithm_name(args)}, device {device}")

    if checkpoint is None:
        envs = make_vector_env(args.env_id, args.num_envs)
        try:
            train(args, envs, nets, run, summary)
        except KeyboardInterrupt:
            print(f"{SCRIPT}: interrupted; writing what the run has so far")
            summary["interrupted"] = True
        finally:
            envs.close()
    return finish(args, run, summary, nets, device, trained=checkpoint is None)


# ---------------------------------------------------------------------------------------
# Plumbing: checks, run folder, evaluation, checkpoints (not needed to follow the algorithm)
# ---------------------------------------------------------------------------------------
class UsageError(Exception):
    """Bad input: reported as one line on stderr with exit status 2, before training
    (CONTRIBUTING.md, "Bad input")."""


def fail(message):
    raise UsageError(message)


def check_args(args):
    """Everything a user can get wrong in the flags, checked before any environment runs;
    args has its --algo preset resolved."""
    for name in ("total_timesteps", "num_envs", "gradient_steps", "buffer_size", "batch_size",
                 "hidden_size", "policy_delay", "log_interval"):
        if getattr(args, name) <= 0:
            fail(f"--{name.replace('_', '-')} must be positive, got {getattr(args, name)}")
    if not args.learning_rate > 0:
        fail(f"--learning-rate must be positive, got {args.learning_rate}")
    for name in ("learning_starts", "exploration_noise", "target_policy_noise", "noise_clip",
                 "eval_episodes"):
        if not getattr(args, name) >= 0:
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
    if args.target_policy_noise > 0 and args.noise_clip == 0:
        fail("--noise-clip 0 cancels --target-policy-noise; use --target-policy-noise 0 to "
             "switch smoothing off")
    if args.total_timesteps % args.num_envs:
        fail(f"--total-timesteps {args.total_timesteps} is not divisible by --num-envs "
             f"{args.num_envs}; each step of the vector environment takes num_envs steps")
    if args.eval_checkpoint is None and args.learning_starts >= args.total_timesteps:
        fail(f"--learning-starts {args.learning_starts} leaves no step of the "
             f"--total-timesteps {args.total_timesteps} to learn in; lower it or raise the budget")
    if args.capture_video and importlib.util.find_spec("moviepy") is None:
        fail("--capture-video needs moviepy: pip install moviepy")


def check_env(env_id, capture_video=False):
    """Find the id (importing its module for `module:Id`, as gym.make does), build one
    environment to check its spaces (and, for --capture-video, that it renders); returns
    (obs_shape, action_space)."""
    module, _, name = env_id.rpartition(":")
    if module:
        try:
            importlib.import_module(module)
        except Exception as e:
            fail(f"cannot import module {module} of --env-id {env_id} ({type(e).__name__}: "
                 f"{(str(e).splitlines() or [''])[0]})")
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
    if isinstance(action_space, gym.spaces.Discrete):
        fail(f"{env_id} has a Discrete action space; ddpg_td3.py needs continuous (Box) actions "
             "(for discrete ones use dqn.py or ppo.py)")
    if not isinstance(action_space, gym.spaces.Box):
        fail(f"{env_id} has a {type(action_space).__name__} action space; ddpg_td3.py needs "
             "continuous (Box) actions (ppo.py handles Discrete ones)")
    if len(action_space.shape) != 1:
        fail(f"{env_id} has a Box action space of shape {action_space.shape}; ddpg_td3.py "
             "needs a flat one")
    if not (np.isfinite(action_space.low).all() and np.isfinite(action_space.high).all()):
        fail(f"{env_id} has unbounded actions (an infinite low or high bound); ddpg_td3.py "
             "scales its tanh actor to finite bounds (ppo.py's Gaussian policy needs none)")
    if not isinstance(obs_space, gym.spaces.Box):
        fail(f"{env_id} has a {type(obs_space).__name__} observation space; ddpg_td3.py needs "
             "a Box")
    if len(obs_space.shape) != 1:
        fail(f"{env_id} has observations of shape {obs_space.shape}; ddpg_td3.py's MLPs need "
             "flat vectors")
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
                 f"{(str(e).splitlines() or [''])[0]}); for MuJoCo on a machine without a display "
                 "set MUJOCO_GL=egl")
    return obs_space.shape, action_space


def seed_and_device(args):
    """Seed Python, NumPy and torch; returns the device (CONTRIBUTING.md, "Determinism")."""
    random.seed(args.seed)
    np.random.seed(args.seed)
    torch.manual_seed(args.seed)
    device = torch.device("cuda" if args.cuda and torch.cuda.is_available() else "cpu")
    if device.type == "cpu":
        torch.set_num_threads(1)  # networks this small run faster without the thread pool
    return device


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


def evaluate(actor, env_id, episodes, seed, device, video_folder=None):
    """Greedy returns (a = mu(s), no noise) of `episodes` episodes, one per environment of a
    vector env, all at once."""
    envs = make_vector_env(env_id, episodes, video_folder)
    obs, _ = envs.reset(seed=seed)
    returns = np.full(episodes, np.nan)
    with torch.inference_mode():
        while np.isnan(returns).any():
            action = actor(torch.as_tensor(obs, dtype=torch.float32, device=device))
            obs, _, _, _, info = envs.step(to_env_action(action, envs.single_action_space))
            if "_episode" in info:
                first = info["_episode"] & np.isnan(returns)
                returns[first] = info["episode"]["r"][first]
    envs.close()
    return returns


class RunWriter:
    """The run folder (CONTRIBUTING.md, "What a run writes"): config.json, then episodes.csv,
    updates.csv and evaluations.csv row by row (flushed, so an interrupted run keeps them);
    the progress line every 2 seconds and the greedy evaluations of --eval-every, with
    best_model.pt. It keeps summary["global_steps"] current."""

    def __init__(self, args, device, nets, summary):
        name = (f"{args.env_id.replace('/', '-').replace(':', '-')}__{args.exp_name}__"
                f"{args.seed}__{int(time.time())}")
        self.path, suffix = os.path.join(args.output_dir, name), 1
        while os.path.exists(self.path):  # a run of the same seed started in the same second
            suffix += 1
            self.path = os.path.join(args.output_dir, f"{name}-{suffix}")
        try:
            os.makedirs(self.path)
        except OSError as e:
            fail(f"cannot create the run folder {self.path}: {e.strerror}")
        self.write_json("config.json", {**asdict(args), "device": str(device), "versions": {
            "torch": torch.__version__, "gymnasium": gym.__version__, "numpy": np.__version__,
            "python": sys.version.split()[0]}})
        self.args, self.device, self.nets, self.summary = args, device, nets, summary
        self.start = self.last_print = time.time()
        self.steps, self.returns, self.files = [], [], {}
        self.evaluations = []  # (global_step, mean, std) of each --eval-every evaluation
        self.write_row("episodes.csv", None, ["global_step", "wall_time", "episode_return",
                                              "episode_length"])

    def write_json(self, filename, data):
        with open(os.path.join(self.path, filename), "w") as f:
            json.dump(data, f, indent=2)

    def write_row(self, filename, row, fields=None):
        """Append a row (None: none) to a CSV file, opened with a header the first time."""
        if filename not in self.files:
            f = open(os.path.join(self.path, filename), "w", newline="")
            self.files[filename] = (f, csv.DictWriter(f, fieldnames=fields or list(row)))
            self.files[filename][1].writeheader()
        f, writer = self.files[filename]
        if row is not None:
            writer.writerow(row)
        f.flush()

    def episode(self, global_step, episode_return, episode_length):
        self.steps.append(global_step)
        self.returns.append(float(episode_return))
        self.write_row("episodes.csv", {
            "global_step": global_step, "wall_time": round(time.time() - self.start, 4),
            "episode_return": float(episode_return), "episode_length": int(episode_length)})

    def reached(self, threshold):
        """Whether the mean of the last 20 episode returns reached the threshold (if any)."""
        return (threshold is not None and len(self.returns) >= 20
                and np.mean(self.returns[-20:]) >= threshold)

    def recent_return(self):
        """The mean of the last 20 episode returns (of all of them before 20 have ended;
        None before the first)."""
        return float(np.mean(self.returns[-20:])) if self.returns else None

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
        """Evaluate the actor as it is now, a = mu(s) without noise, on environments of its
        own seeded as the final evaluation's (nothing is drawn from a random stream, and the
        training environments are untouched); append the row to evaluations.csv and, with
        --save-model, keep the best model so far (the first, on a tie) as best_model.pt."""
        wall_time = round(time.time() - self.start, 4)
        returns = evaluate(self.nets.actor, self.args.env_id, self.args.eval_episodes,
                           self.args.seed + 100_000, self.device)
        mean, std = float(returns.mean()), float(returns.std())
        self.write_row("evaluations.csv", {"global_step": global_step, "wall_time": wall_time,
                                           "eval_return_mean": mean, "eval_return_std": std})
        if self.args.save_model and mean > max((m for _, m, _ in self.evaluations),
                                               default=-math.inf):
            save_checkpoint(os.path.join(self.path, "best_model.pt"), self.nets, self.args)
        self.evaluations.append((global_step, mean, std))

    def non_finite(self, critic_loss, global_step):
        """True, after saying so and marking the run interrupted, when the loss is NaN or inf."""
        if math.isfinite(critic_loss):
            return False
        print(f"{SCRIPT}: the critic loss became non-finite (NaN or infinite) at step "
              f"{global_step}; stopping (try a lower --learning-rate)")
        self.summary["interrupted"] = True
        return True

    def update(self, global_step, stats, **extra):
        """A row of updates.csv with the mean of each list in stats (NaN for an empty one),
        which are then emptied, and the extra columns; returns the row."""
        elapsed = time.time() - self.start
        row = {"global_step": global_step, "wall_time": round(elapsed, 4),
               "sps": int(global_step / elapsed),
               **{k: float(np.mean(v)) if v else math.nan for k, v in stats.items()}, **extra}
        for values in stats.values():
            values.clear()
        self.write_row("updates.csv", row)
        return row


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


def plot_curve(run, title):
    """learning_curve.png: episode return against environment steps, raw points faded and
    a moving average of 20 episodes on top, and the greedy evaluations of --eval-every as a
    second series (the mean, the std as error bars); returns its path."""
    fig = Figure(figsize=(7, 4), dpi=100)
    ax = fig.add_subplot()
    ax.scatter(run.steps, run.returns, s=6, alpha=0.25, color="tab:blue", label="episode return")
    if run.returns:
        window = min(20, len(run.returns))
        smooth = np.convolve(run.returns, np.ones(window) / window, mode="valid")
        ax.plot(run.steps[window - 1:], smooth, color="tab:blue", lw=2,
                label=f"mean of last {window}")
    if run.evaluations:
        eval_steps, means, stds = zip(*run.evaluations)
        ax.errorbar(eval_steps, means, yerr=stds, color="tab:orange", marker="o", ms=4,
                    capsize=3, label="greedy evaluation (mean, std)")
    if run.returns or run.evaluations:
        ax.legend(loc="lower right")
    ax.set(xlabel="environment steps", ylabel="episode return", title=title)
    ax.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(os.path.join(run.path, "learning_curve.png"))
    return os.path.join(run.path, "learning_curve.png")


def new_summary(args):
    return {"algorithm": algorithm_name(args), "env_id": args.env_id, "seed": args.seed,
            "global_steps": 0, "wall_time_s": None, "train_return_last20": None,
            "eval_return_mean": None, "eval_return_std": None,
            "eval_episodes": args.eval_episodes, "solved_at_step": None,
            "solved_at_time_s": None, "interrupted": False}


# The flags an evaluation takes from the checkpoint: the network's size and the algorithm.
CHECKPOINT_FLAGS = ("hidden_size", "algo", "twin_q", "target_policy_noise", "policy_delay")


def save_checkpoint(path, nets, args):
    """The learned networks' state dicts (not the targets) and the flags."""
    torch.save({"actor": nets.actor.state_dict(), "qf1": nets.qf1.state_dict(),
                **({"qf2": nets.qf2.state_dict()} if nets.qf2 is not None else {}),
                "args": asdict(args)}, path)


def load_checkpoint(path, env_id):
    """Load a model.pt safely (weights_only) and check it was made for env_id."""
    if not os.path.isfile(path):
        fail(f"checkpoint {path} does not exist")
    try:
        checkpoint = torch.load(path, map_location="cpu", weights_only=True)
        saved = checkpoint["args"]
        if "actor" not in checkpoint or not {"env_id", *CHECKPOINT_FLAGS} <= set(saved):
            raise KeyError("missing entries")
    except Exception as e:
        fail(f"checkpoint {path} is not a ddpg_td3.py model.pt ({type(e).__name__}); "
             "make one with --save-model")
    if saved["env_id"] != env_id:
        fail(f"checkpoint {path} was made for {saved['env_id']}, not {env_id}; "
             f"pass --env-id {saved['env_id']}")
    return checkpoint


def load_actor(nets, checkpoint, args):
    try:
        nets.actor.load_state_dict(checkpoint["actor"])
    except (RuntimeError, KeyError, AttributeError) as e:
        fail(f"checkpoint {args.eval_checkpoint} does not fit {args.env_id}'s network: "
             f"{str(e).splitlines()[0]}")


def finish(args, run, summary, nets, device, trained=True):
    """Evaluate greedily, save the model if asked, write summary.json and the curve, and
    print the closing line. An interrupted run skips the evaluation."""
    summary["train_return_last20"] = run.recent_return()
    summary["wall_time_s"] = round(time.time() - run.start, 3)
    if args.eval_episodes and not summary["interrupted"]:
        video_folder = os.path.join(run.path, "videos") if args.capture_video else None
        returns = evaluate(nets.actor, args.env_id, args.eval_episodes, args.seed + 100_000,
                           device, video_folder)
        summary["eval_return_mean"] = float(returns.mean())
        summary["eval_return_std"] = float(returns.std())
    if args.save_model and trained:
        save_checkpoint(os.path.join(run.path, "model.pt"), nets, args)
    for f, _ in run.files.values():
        f.close()
    run.write_json("summary.json", summary)
    closing = f"{SCRIPT}: run folder {run.path}"
    for key in ("global_steps", "train_return_last20", "eval_return_mean", "solved_at_step"):
        value = summary[key]
        closing += f" | {key} {value:.2f}" if isinstance(value, float) else f" | {key} {value}"
    if trained:
        title = f"{SCRIPT} on {args.env_id}, seed {args.seed}"
        closing += f" | learning curve {plot_curve(run, title)}"
    print(closing)
    return summary


if __name__ == "__main__":
    try:
        main(tyro.cli(Args))
    except UsageError as e:
        print(f"{SCRIPT}: error: {e}", file=sys.stderr)
        sys.exit(2)

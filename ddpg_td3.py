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
    python ddpg_td3.py --env-id Pendulum-v1 --algo ddpg --twin-q   # DDPG + clipped double Q
    python ddpg_td3.py --env-id HalfCheetah-v5 --total-timesteps 1000000 --gamma 0.99 \
        --tau 0.005 --learning-rate 3e-4 --learning-starts 25000 --hidden-size 256 \
        --batch-size 256                                    # needs gymnasium[mujoco]
    python ddpg_td3.py --help

Writes runs/<env_id>__ddpg_td3__<seed>__<unix_time>/ with config.json, episodes.csv,
updates.csv, learning_curve.png, summary.json, and model.pt with --save-model.
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
from collections import deque
from dataclasses import asdict, dataclass, replace
from typing import Annotated, Literal, Optional

import gymnasium as gym
import numpy as np
import torch
import torch.nn as nn
import tyro
from matplotlib.figure import Figure

SCRIPT = os.path.basename(__file__)


# ---------------------------------------------------------------------------------------
# Flags
# ---------------------------------------------------------------------------------------
# What --algo sets. A flag of type FROM_ALGO left out (None) takes its value from here; on
# the command line it is --flag / --no-flag for a bool and --flag VALUE otherwise.
FROM_ALGO = tyro.conf.arg(help_behavior_hint="(default: set by --algo)")
ALGOS = {
    "td3": {"twin_q": True, "target_policy_noise": 0.2, "policy_delay": 2},
    "ddpg": {"twin_q": False, "target_policy_noise": 0.0, "policy_delay": 1},
}


@dataclass
class Args:
    env_id: str = "Pendulum-v1"
    """any registered Gymnasium id with a bounded Box action space and a flat Box observation"""
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
    """greedy evaluation episodes after training, without exploration noise (0 skips evaluation)"""
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
    """td3: twin critics, target smoothing noise 0.2, policy delay 2; ddpg: one critic, none, 1"""
    twin_q: Annotated[tyro.conf.DisallowNone[Optional[bool]], FROM_ALGO] = None
    """clipped double Q: learn two critics, the target takes the smaller of their values"""
    target_policy_noise: Annotated[tyro.conf.DisallowNone[Optional[float]], FROM_ALGO] = None
    """sigma' of the target policy smoothing noise, a fraction of the action half-range (0: off)"""
    noise_clip: float = 0.5
    """c: the target policy smoothing noise is clipped to [-c, c]"""
    policy_delay: Annotated[tyro.conf.DisallowNone[Optional[int]], FROM_ALGO] = None
    """d: the actor and the target networks are updated on every d-th critic gradient step"""
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


class UsageError(Exception):
    """Bad input: reported as one line on stderr with exit status 2, before training."""


def resolve_algo(args):
    """The flags with every one left unset (None) taken from --algo's preset."""
    preset = ALGOS[args.algo]
    return replace(args, **{k: v for k, v in preset.items() if getattr(args, k) is None})


def algorithm_name(args):
    """'td3' with all three improvements, 'ddpg' with none, else 'ddpg+' the ones switched on."""
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
    noise = torch.randn_like(actions).mul_(sigma).clamp_(-noise_clip, noise_clip)
    return noise.add_(actions).clamp_(-1.0, 1.0)


def soft_update(target, source, tau):
    """Polyak averaging of the target network's parameters towards the learned ones, in
    place:

        theta' <- tau * theta + (1 - tau) * theta'

    target and source are parameter tensors of one shape (here each network's parameters
    as one flat vector, see flatten_parameters); tau = 1 copies the source.
    """
    with torch.no_grad():
        target.lerp_(source, tau)


class ReplayBuffer:
    """The last `capacity` transitions (s, a, r, terminated, s'), a ring buffer in one
    preallocated float32 table [capacity, obs_dim + action_dim + 2 + obs_dim] on the device,
    so memory stays constant and a batch is one indexed gather. s' is the true final
    observation where the episode ended at that step (terminated or truncated); a is in
    [-1, 1]^d as the actor gives it.
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
# Networks and the update
# ---------------------------------------------------------------------------------------
class MLPs(nn.Module):
    """n MLPs of one shape, in -> hidden -> hidden -> out with ReLUs, run side by side: each
    layer keeps the weights of all n as one [n, in, out] tensor and a batched matrix product
    (torch.baddbmm) computes the layer of every network in one call. n = 2 runs TD3's twin
    critics in one pass; n = 1 is a plain MLP. Initialized like nn.Linear, U(+-1/sqrt(in))."""

    def __init__(self, n, in_size, hidden_size, out_size):
        super().__init__()
        sizes = [in_size, hidden_size, hidden_size, out_size]
        self.weights, self.biases = nn.ParameterList(), nn.ParameterList()
        for fan_in, fan_out in zip(sizes[:-1], sizes[1:]):
            bound = 1 / math.sqrt(fan_in)
            self.weights.append(nn.Parameter(torch.empty(n, fan_in, fan_out).uniform_(-bound, bound)))
            self.biases.append(nn.Parameter(torch.empty(n, 1, fan_out).uniform_(-bound, bound)))
        self.layers = list(zip(self.weights, self.biases))  # a ParameterList is slow to iterate

    def forward(self, x, first_only=False):
        """x [B, in], the input of every network -> [n, B, out]. first_only: the first
        network alone, [1, B, out], with its weights detached, so that a loss on it sends
        gradient to x but not to the weights."""
        n = 1 if first_only else len(self.layers[0][0])
        x = x.expand(n, -1, -1)  # [n, B, in], a view: the input is not copied
        last = len(self.layers) - 1
        for i, (weight, bias) in enumerate(self.layers):
            if first_only:
                weight, bias = weight[:1].detach(), bias[:1].detach()
            x = torch.baddbmm(bias, x, weight)
            if i < last:
                x = torch.relu(x)
        return x


class Actor(MLPs):
    """mu(s) = tanh(MLP(s)), actions in [-1, 1]^d: [B, obs_dim] -> [B, d]."""

    def __init__(self, obs_dim, action_dim, hidden_size):
        super().__init__(1, obs_dim, hidden_size, action_dim)

    def forward(self, obs):
        return torch.tanh(super().forward(obs)[0])


class Critics(MLPs):
    """Q_i(s, a) = MLP_i([s, a]) for i = 1..num_q, all in one pass: -> [num_q, B]. The
    actor's loss uses Q_1 alone with the critics' weights detached (first_only)."""

    def __init__(self, num_q, obs_dim, action_dim, hidden_size):
        super().__init__(num_q, obs_dim + action_dim, hidden_size, 1)

    def forward(self, obs, actions, first_only=False):
        return super().forward(torch.cat([obs, actions], dim=-1), first_only).squeeze(-1)


def flatten_parameters(module):
    """Move every parameter of the module into one contiguous vector, and its gradient
    into another, each parameter and each .grad becoming a view of its slice; returns
    (params, grads). Backward adds into an existing .grad in place, so the gradient of
    the whole network lands in grads: the optimizer and the soft target update then
    handle a network with a few operations on whole vectors, not a few per tensor."""
    params = list(module.parameters())
    flat = torch.cat([p.detach().reshape(-1) for p in params])
    grads = torch.zeros_like(flat)
    offset = 0
    for p in params:
        p.data = flat[offset:offset + p.numel()].view_as(p)
        p.grad = grads[offset:offset + p.numel()].view_as(p)
        offset += p.numel()
    return flat, grads


class Adam:
    """Adam (Kingma & Ba 2015) on a whole network at once, the same update as
    torch.optim.Adam written out: the first use of torch.optim imports torch._dynamo
    (about a second) and its bookkeeping costs more than the update itself on networks
    this small. params and grads are a network's parameters and gradients as two flat
    vectors (flatten_parameters). For parameters p with gradient g, at step k:

        m <- beta1 * m + (1 - beta1) * g          v <- beta2 * v + (1 - beta2) * g^2
        p <- p - lr * (m / (1 - beta1^k)) / (sqrt(v / (1 - beta2^k)) + eps)
    """

    def __init__(self, params, grads, lr, betas=(0.9, 0.999), eps=1e-8):
        self.params, self.grads = params, grads
        self.lr, self.betas, self.eps, self.k = lr, betas, eps, 0
        self.m = torch.zeros_like(self.params)
        self.v = torch.zeros_like(self.params)

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
        denominator = self.v.sqrt().div_(v_correction).add_(self.eps)
        self.params.addcdiv_(self.m, denominator, value=-step_size)


class Agent:
    """The actor, the critics, their target copies and their optimizers. update() is one
    gradient step of DDPG or TD3 as the flags set it. Its diagnostics stay tensors until
    pop_stats() (reading a number out of a tensor at every step would slow the loop)."""

    def __init__(self, obs_dim, action_dim, args, device):
        self.args = args
        self.actor = Actor(obs_dim, action_dim, args.hidden_size).to(device)
        self.critics = Critics(2 if args.twin_q else 1, obs_dim, action_dim, args.hidden_size).to(device)
        self.actor_target = copy.deepcopy(self.actor).requires_grad_(False)
        self.critics_target = copy.deepcopy(self.critics).requires_grad_(False)
        # Each network's parameters as one vector: Adam and the soft update take few ops.
        self.actor_params, actor_grads = flatten_parameters(self.actor)
        self.critic_params, critic_grads = flatten_parameters(self.critics)
        self.actor_target_params, _ = flatten_parameters(self.actor_target)
        self.critics_target_params, _ = flatten_parameters(self.critics_target)
        self.actor_optimizer = Adam(self.actor_params, actor_grads, args.learning_rate)
        self.critic_optimizer = Adam(self.critic_params, critic_grads, args.learning_rate)
        self.gradient_steps = 0
        self._stats = {"critic_loss": [], "q_mean": [], "actor_loss": []}

    def update(self, obs, actions, rewards, terminated, next_obs):
        """One critic step on a batch; on every policy_delay-th one also an actor step and
        the soft updates of both target networks."""
        args = self.args
        with torch.no_grad():
            next_actions = noisy_action(self.actor_target(next_obs), args.target_policy_noise,
                                        args.noise_clip)
            next_q = self.critics_target(next_obs, next_actions)
            y = td3_target(rewards, next_q[0], next_q[-1], terminated, args.gamma, args.twin_q)
        q = self.critics(obs, actions)
        critic_loss = (q - y).pow(2).mean(dim=1).sum()
        self.critic_optimizer.zero_grad()
        critic_loss.backward()
        self.critic_optimizer.step()
        self.gradient_steps += 1
        self._stats["critic_loss"].append(critic_loss.detach())
        self._stats["q_mean"].append(q.detach()[0].mean())

        if self.gradient_steps % args.policy_delay == 0:
            actor_loss = -self.critics(obs, self.actor(obs), first_only=True).mean()
            self.actor_optimizer.zero_grad()
            actor_loss.backward()
            self.actor_optimizer.step()
            soft_update(self.actor_target_params, self.actor_params, args.tau)
            soft_update(self.critics_target_params, self.critic_params, args.tau)
            self._stats["actor_loss"].append(actor_loss.detach())

    def pop_stats(self):
        """The means since the last call of the critic loss, of Q_1 on the batches and of
        the actor loss (NaN where no such step happened); then the lists start over."""
        stats = {k: torch.stack(v).mean().item() if v else math.nan for k, v in self._stats.items()}
        self._stats = {k: [] for k in self._stats}
        return stats


# ---------------------------------------------------------------------------------------
# Environments, evaluation, plotting, saving and loading
# ---------------------------------------------------------------------------------------
def fail(message):
    raise UsageError(message)


def check_env(env_id, capture_video=False):
    """Build one environment to check its spaces (and, for --capture-video, that it
    renders); returns (obs_shape, action_space)."""
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


def check_args(args):
    """Everything a user can get wrong, checked before any environment runs; args has its
    --algo preset resolved."""
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


def to_env_action(actions, action_space):
    """Actions in [-1, 1]^d (a tensor) to the environment's bounds:
    low + (a + 1) / 2 * (high - low)."""
    low, high = action_space.low, action_space.high
    return low + (actions.cpu().numpy() + 1.0) * 0.5 * (high - low)


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


# The flags an evaluation takes from the checkpoint: the network's size and the algorithm.
CHECKPOINT_FLAGS = ("hidden_size", "algo", "twin_q", "target_policy_noise", "policy_delay")


def save_checkpoint(path, agent, args):
    torch.save({"actor": agent.actor.state_dict(), "critics": agent.critics.state_dict(),
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


def finish(args, run, summary, agent, device, start, trained=True):
    """Evaluate greedily, save the model if asked, write summary.json and the curve, and
    print the closing line. An interrupted run skips the evaluation."""
    recent = [e["episode_return"] for e in run.episodes[-20:]]
    summary["train_return_last20"] = float(np.mean(recent)) if recent else None
    summary["wall_time_s"] = round(time.time() - start, 3)
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


# ---------------------------------------------------------------------------------------
# Training
# ---------------------------------------------------------------------------------------
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

    random.seed(args.seed)
    np.random.seed(args.seed)
    torch.manual_seed(args.seed)
    device = torch.device("cuda" if args.cuda and torch.cuda.is_available() else "cpu")
    if device.type == "cpu":
        torch.set_num_threads(1)  # small MLPs run faster without the thread pool
    obs_dim, action_dim = obs_shape[0], action_space.shape[0]
    agent = Agent(obs_dim, action_dim, args, device)
    if checkpoint is not None:
        try:
            agent.actor.load_state_dict(checkpoint["actor"])
        except (RuntimeError, KeyError, AttributeError) as e:
            fail(f"checkpoint {args.eval_checkpoint} does not fit {args.env_id}'s network: "
                 f"{str(e).splitlines()[0]}")
    run = RunWriter(args, device)
    print(f"{SCRIPT}: {args.env_id}, seed {args.seed}, {algorithm_name(args)}, device {device}")
    summary = {"algorithm": algorithm_name(args), "env_id": args.env_id, "seed": args.seed,
               "global_steps": 0, "wall_time_s": None, "train_return_last20": None,
               "eval_return_mean": None, "eval_return_std": None,
               "eval_episodes": args.eval_episodes, "solved_at_step": None,
               "solved_at_time_s": None, "interrupted": False}
    start = time.time()
    if checkpoint is not None:
        return finish(args, run, summary, agent, device, start, trained=False)

    envs = make_vector_env(args.env_id, args.num_envs)
    buffer = ReplayBuffer(min(args.buffer_size, args.total_timesteps), obs_dim, action_dim, device)
    last20 = deque(maxlen=20)
    global_step, last_print, last_log = 0, start, 0

    def log_row():
        now = time.time()
        row = {"global_step": global_step, "wall_time": round(now - start, 4),
               "sps": int(global_step / (now - start)), **agent.pop_stats(),
               "gradient_steps": agent.gradient_steps}
        run.update(row)
        return row

    obs, _ = envs.reset(seed=args.seed)
    obs = np.asarray(obs, dtype=np.float32)
    try:
        for _ in range(args.total_timesteps // args.num_envs):
            if global_step < args.learning_starts:
                actions = torch.rand((args.num_envs, action_dim)) * 2 - 1
            else:
                with torch.inference_mode():
                    mu = agent.actor(torch.from_numpy(obs).to(device))
                    actions = noisy_action(mu, args.exploration_noise).cpu()
            next_obs, rewards, terminated, truncated, info = envs.step(
                to_env_action(actions, action_space))
            global_step += args.num_envs
            next_obs = np.asarray(next_obs, dtype=np.float32)
            final_obs = next_obs
            ended = np.flatnonzero(terminated | truncated)
            if len(ended):  # store the true last observation, not the next episode's first
                final_obs = next_obs.copy()
                for i in ended:
                    final_obs[i] = info["final_obs"][i]
            buffer.add(obs, actions.numpy(), rewards, terminated, final_obs)
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

            if global_step >= args.learning_starts:
                for _ in range(args.gradient_steps):
                    agent.update(*buffer.sample(args.batch_size))
            if global_step - last_log >= args.log_interval and agent.gradient_steps:
                last_log = global_step
                row = log_row()
                if not math.isfinite(row["critic_loss"]):
                    print(f"{SCRIPT}: the critic loss became NaN at step {global_step}; "
                          "stopping (try a lower --learning-rate)")
                    summary["interrupted"] = True
                    break
                if time.time() - last_print >= 2.0:
                    last_print = time.time()
                    recent = f"{np.mean(last20):.1f}" if last20 else "n/a"
                    print(f"step {global_step:>9} | sps {row['sps']:>6} | "
                          f"return (last 20) {recent}")
        if global_step != last_log and not summary["interrupted"] and agent.gradient_steps:
            log_row()
    except KeyboardInterrupt:
        print(f"{SCRIPT}: interrupted; writing what the run has so far")
        summary["interrupted"] = True
    finally:
        envs.close()
    summary["global_steps"] = global_step
    return finish(args, run, summary, agent, device, start)


if __name__ == "__main__":
    try:
        main(tyro.cli(Args))
    except UsageError as e:
        print(f"{SCRIPT}: error: {e}", file=sys.stderr)
        sys.exit(2)

# From plainrl (MIT licence, (c) 2026 the plainrl authors): keep this line in a copy.
"""IMPALA: actors that only act, a learner that only learns, and V-trace between them.

Actors (Ray actors, here or on a cluster), each with N environments and a copy of the policy,
play rollouts of T steps, record each step's log-probability under the behaviour policy mu that
chose it and its weights' version, and send them on, playing the next at once with the newest
weights. The learner's policy pi has moved on from mu by the policy lag; V-trace corrects for it.

Key equations (t = 0, ..., T-1 the steps of a rollout, done_t = terminated_t or truncated_t):

    lag      = k - v: the learner has taken k gradient steps, the actor's weights v of them
    rho_t    = min(rho_bar, pi(a_t|s_t) / mu(a_t|s_t)),   c_t = min(c_bar, pi / mu)
    V'_t     = V of what followed a_t: s_{t+1}, or the true final observation if truncated
    delta_t  = rho_t * (r_t + gamma * (1 - terminated_t) * V'_t - V(s_t))
    vs_t     = V(s_t) + delta_t + gamma * c_t * (1 - done_t) * (vs_{t+1} - V(s_{t+1})),
               with vs_T - V(s_T) = 0: the correction ends with the rollout
    G_t      = vs_{t+1} where t < T-1 and not done_t, else V'_t
    A_t      = rho_t * (r_t + gamma * (1 - terminated_t) * G_t - V(s_t))
    loss     = -mean(A_t * log pi(a_t|s_t)) + c_v * mean(0.5 * ((vs_t - V(s_t)) / sigma)^2)
               - c_e * mean(entropy of pi(.|s_t))
    PopArt   V(s) = sigma * n(s) + mu, mu and sigma the running mean and std of the targets vs

pi and V are the learner's; A_t carries no gradient; --no-vtrace: rho_t = c_t = 1. Departures
from the authors' code (the page lists them): Adam, a clipped gradient, a mean loss, raw
rewards, no LSTM, and PopArt on the critic (--popart-beta; popart_statistics says why).

Papers:
    Espeholt et al. 2018, "IMPALA: Scalable Distributed Deep-RL with Importance Weighted
        Actor-Learner Architectures", ICML 2018
    Mnih et al. 2016, "Asynchronous Methods for Deep Reinforcement Learning", ICML 2016
    Pardo et al. 2018, "Time Limits in Reinforcement Learning", ICML 2018
    van Hasselt et al. 2016, "Learning values across many orders of magnitude", NeurIPS 2016
    Hessel et al. 2019, "Multi-task Deep Reinforcement Learning with PopArt", AAAI 2019

Run:
    python impala.py --env-id CartPole-v1                      # a Ray of its own, here
    python impala.py --env-id Pendulum-v1                      # Box actions: the continuous preset
    python impala.py --refresh-every 16 --no-vtrace            # a large lag, uncorrected

Writes runs/<env_id>__impala__<seed>__<unix_time>/, its updates.csv a row per gradient step.
"""

# ---------------------------------------------------------------------------------------
# Imports
# ---------------------------------------------------------------------------------------
import contextlib
import math
import os
import socket
import threading
import warnings
from dataclasses import dataclass
from typing import Literal, Optional

import gymnasium as gym
import numpy as np
import torch
import torch.nn as nn
import tyro
from torch.distributions import Categorical, Normal

SCRIPT = os.path.basename(__file__)


# ---------------------------------------------------------------------------------------
# Flags
# ---------------------------------------------------------------------------------------
@dataclass
class Args:
    # The run folder's flags (--output-dir, --save-model, --eval-checkpoint, --track, ...)
    # come after these: every script shares them, declared once in RunFlags below the banner.
    # MinAtar/ ids need the minatar package; ALE/ ids (Atari) are ppo.py's and dqn.py's.
    env_id: str = "CartPole-v1"
    """a Gymnasium id (or module:id): Discrete or Box actions, flat Box or image observations"""
    seed: int = 1
    """seeds Python, NumPy, torch, the actors and the environments"""
    total_timesteps: int = 300_000
    """the training budget in environment steps, all actors and environments together"""
    # Neither: small networks run faster on one CPU thread (results.md, "On a GPU"); actors: CPU.
    cuda: tyro.conf.DisallowNone[Optional[bool]] = None
    """the learner's device: --cuda the GPU; --no-cuda the CPU; neither: the GPU for an image"""
    exp_name: str = os.path.splitext(SCRIPT)[0]
    """the experiment name, part of the run folder's name"""
    eval_episodes: int = 10
    """greedy evaluation episodes after training (0 skips evaluation)"""
    eval_every: int = 0
    """also evaluate greedily every N environment steps (0: only after training)"""
    stop_at_return: Optional[float] = None
    """stop once the training mean over its goal's window (GOALS; else 20 episodes) reaches this"""
    # Algorithm. A flag left at None takes the value of the environment's preset (PRESETS).
    preset: tyro.conf.DisallowNone[Optional[Literal["discrete", "continuous", "image"]]] = None
    """the settings of the flags left at None (None: the environment's family, PRESETS)"""
    # Actors
    num_actors: int = 2
    """Ray actors, each with its own environments and copy of the policy (one CPU each)"""
    num_envs: tyro.conf.DisallowNone[Optional[int]] = None
    """N: environments of each actor (synchronous vector environment)"""
    num_steps: tyro.conf.DisallowNone[Optional[int]] = None
    """T: steps per environment in each rollout (the unroll length, 20 in the paper's Atari runs)"""
    # A batch of rollouts_per_batch*N*T steps (the paper's Atari runs: 32 one-env rollouts).
    rollouts_per_batch: tyro.conf.DisallowNone[Optional[int]] = None
    """rollouts in each of the learner's batches, taken as they arrive"""
    # 1: before each rollout, as in the paper.
    refresh_every: int = 1
    """an actor takes the newest weights every this many rollouts; more: a large lag on purpose"""
    sync: bool = False
    """take the actors' rollouts in turn, not as they arrive: a seed gives the same run twice"""
    ray_address: Optional[str] = None
    """the Ray cluster to join ("auto": what `ray start` began); none: a new Ray here"""
    # Learner
    learning_rate: tyro.conf.DisallowNone[Optional[float]] = None
    """Adam learning rate (the IMPALA paper uses RMSProp, its rate tuned per experiment)"""
    anneal_lr: bool = True
    """decay the learning rate linearly to 0 over the budget (so the budget changes the schedule)"""
    gamma: float = 0.99
    """discount factor (0.99 in the IMPALA paper)"""
    vtrace: bool = True
    """correct for the lag with V-trace; --no-vtrace sets rho = c = 1 (n-step returns)"""
    # rho clipped alike in the targets and the policy gradient; IMPALA's code clips the latter
    # apart, at 1 by default.
    rho_bar: float = 1.0
    """V-trace: clip of rho, in the value targets and the policy gradient (1 in the paper)"""
    # A flag here; the authors' code fixes c_bar at 1.
    c_bar: float = 1.0
    """V-trace: clip of the trace coefficient c (1 in the paper)"""
    # 0.00025-0.033 in the paper's sweeps.
    ent_coef: tyro.conf.DisallowNone[Optional[float]] = None
    """entropy bonus coefficient c_e (0.01 in the paper's Atari runs)"""
    vf_coef: float = 0.5
    """value loss coefficient c_v (the paper's baseline cost, 0.5)"""
    # Chosen on CartPole's tuning seeds 1-10 (results.md); 0: the paper's critic, regressing vs.
    popart_beta: float = 0.01
    """PopArt: the step of the running mean and std of the value targets (0: no PopArt)"""
    # The authors' code clips no gradient; TorchBeast and Cleanba clip at 40.
    max_grad_norm: tyro.conf.DisallowNone[Optional[float]] = None
    """gradient clipping: the largest global norm of the gradient (40 in the paper)"""
    # Image observations get the convolutional network, whose sizes are fixed.
    hidden_size: int = 64
    """width of the two hidden layers of the actor and of the critic, for vector observations"""


# The presets of the flags left at None, by the environment's family (family(), below the
# banner): each is its source's settings, any departure named. A flag given overrides it.
PRESETS = {
    # Chosen on CartPole-v1 to solve it in minutes on a laptop
    "discrete": ("plainrl's CartPole settings", dict(
        num_envs=8, num_steps=32, rollouts_per_batch=1, learning_rate=2e-3, ent_coef=0.01,
        max_grad_norm=0.5)),
    # Pendulum and MuJoCo, chosen on Pendulum-v1: each step is learned from once, so unrolls of
    # 8 give four times the gradient steps of 32; no entropy bonus, as Andrychowicz et al.
    # 2021 recommend for on-policy methods on MuJoCo
    "continuous": ("plainrl's Pendulum settings", dict(
        num_envs=8, num_steps=8, rollouts_per_batch=1, learning_rate=1e-3, ent_coef=0.0,
        max_grad_norm=0.5)),
    # MinAtar: the paper's Atari settings (unroll 20, 640 steps per batch as its 32 rollouts of
    # one environment, rate 6e-4, entropy 0.01, the gradient clipped at 40), Adam for RMSProp;
    # not measured here
    "image": ("the IMPALA paper's Atari settings", dict(
        num_envs=8, num_steps=20, rollouts_per_batch=4, learning_rate=6e-4, ent_coef=0.01,
        max_grad_norm=40.0)),
}

# ---------------------------------------------------------------------------------------
# The math
# ---------------------------------------------------------------------------------------
def compute_vtrace(rewards, values, next_values, terminated, truncated, log_rhos, gamma,
                   rho_bar=1.0, c_bar=1.0):
    """V-trace targets and advantages (Espeholt et al. 2018), with time limits handled.

    All inputs are [T, N] tensors; terminated and truncated are 0/1 or bool. values[t] =
    V(s_t); next_values[t] = V(s_{t+1}), of the observation that followed step t (the true
    final observation where the episode ended at t). log_rhos[t] = log pi(a_t|s_t) - log
    mu(a_t|s_t), the log importance weight of the target policy pi over the behaviour mu.
    With done_t = terminated_t or truncated_t:

        rho_t   = min(rho_bar, exp(log_rhos_t)),   c_t = min(c_bar, exp(log_rhos_t))
        delta_t = rho_t * (r_t + gamma * (1 - terminated_t) * next_values_t - values_t)
        vs_t    = values_t + delta_t
                  + gamma * c_t * (1 - done_t) * (vs_{t+1} - values_{t+1})   (0 at t = T-1)
        G_t     = vs_{t+1} if t < T-1 and not done_t, else next_values_t
        adv_t   = rho_t * (r_t + gamma * (1 - terminated_t) * G_t - values_t)

    Returns (advantages, vs), each [T, N]: vs is the value target.
    """
    not_terminated = 1.0 - terminated.to(rewards.dtype)
    done = terminated.bool() | truncated.bool()
    not_done = 1.0 - done.to(rewards.dtype)
    rhos = torch.clamp(log_rhos.exp(), max=rho_bar)
    cs = torch.clamp(log_rhos.exp(), max=c_bar)
    deltas = rhos * (rewards + gamma * not_terminated * next_values - values)
    vs_minus_values = torch.zeros_like(rewards)
    running = torch.zeros_like(rewards[0])
    for t in reversed(range(rewards.shape[0])):
        running = deltas[t] + gamma * cs[t] * not_done[t] * running
        vs_minus_values[t] = running
    vs = values + vs_minus_values
    bootstrap = torch.cat([torch.where(done[:-1], next_values[:-1], vs[1:]), next_values[-1:]])
    advantages = rhos * (rewards + gamma * not_terminated * bootstrap - values)
    return advantages, vs


def impala_loss(logprobs, entropy, values, advantages, vs, ent_coef, vf_coef, value_std=1.0):
    """IMPALA's loss to minimize on a batch of B samples (all inputs are [B] tensors):
    logprobs = log pi(a_t|s_t) and values = V(s_t) under the learner's current networks,
    advantages and vs from compute_vtrace (constants: no gradient flows into them), and
    sigma = value_std, PopArt's scale of the targets (1: none):

        L_pg = -mean(A_t * log pi(a_t|s_t))
        L_v  = mean(0.5 * ((vs_t - V(s_t)) / sigma)^2)
             = mean(0.5 * ((vs_t - mu) / sigma - n(s_t))^2)   where V = sigma * n + mu
        loss = L_pg + c_v * L_v - c_e * mean(entropy)

    Returns (loss, L_pg, L_v, mean entropy).
    """
    pg_loss = -(advantages.detach() * logprobs).mean()
    v_loss = 0.5 * (((vs.detach() - values) / value_std) ** 2).mean()
    entropy = entropy.mean()
    return pg_loss + vf_coef * v_loss - ent_coef * entropy, pg_loss, v_loss, entropy


def popart_statistics(mean, mean_sq, targets, beta):
    """PopArt's running statistics of the value targets (van Hasselt et al. 2016): their
    mean mu and second moment nu, moved a fraction beta towards the batch's, and the
    standard deviation sigma they give (kept in [1e-4, 1e6]):

        mu' = (1 - beta) * mu + beta * mean(vs)        nu' = (1 - beta) * nu + beta * mean(vs^2)
        sigma' = sqrt(nu' - mu'^2)

    mean, mean_sq: 0-d tensors; targets: vs, any shape. Returns (mu', nu', sigma'). Why: one
    Adam step moves V by about 0.1, and CartPole's values reach 1 / (1 - gamma) = 100 (a
    truncation bootstraps): regressing vs itself, the critic lagged them all run (results.md)."""
    mean = (1 - beta) * mean + beta * targets.mean()
    mean_sq = (1 - beta) * mean_sq + beta * (targets ** 2).mean()
    return mean, mean_sq, popart_std(mean, mean_sq)


def popart_std(mean, mean_sq):
    """sigma = sqrt(nu - mu^2), kept in [1e-4, 1e6] (nu - mu^2 is 0 before any target)."""
    return (mean_sq - mean ** 2).clamp(min=0.0).sqrt().clamp(1e-4, 1e6)


def popart_preserve(weight, bias, mean, std, new_mean, new_std):
    """The critic's last layer (weight [1, H], bias [1]) rescaled so that V = sigma * n + mu
    is the same for every state after mu, sigma become mu', sigma' ("Preserving Outputs
    Precisely", the Pop of PopArt): with n = w h + b,

        w' = w * sigma / sigma'        b' = (sigma * b + mu - mu') / sigma'

    Returns (w', b')."""
    return weight * std / new_std, (std * bias + mean - new_mean) / new_std


def policy_lags(learner_version, versions):
    """The policy lag k - v of each rollout, in a list (0: on-policy): the learner's weights
    are version k (k gradient steps), the rollout's v (older without a refresh, --refresh-every)."""
    return [learner_version - v for v in versions]


def explained_variance(values, returns):
    """1 - Var[R - V] / Var[R]: 1 when the critic predicts the targets, 0 or less when it
    does no better than their mean (NaN when the targets do not vary)."""
    var_returns = returns.var().item()
    return 1 - (returns - values).var().item() / var_returns if var_returns else math.nan


class RolloutBatch:
    """The rollouts of one learner batch side by side: B rollouts of T steps from N
    environments make [T, B*N] tensors on the learner's device. Row t holds what an actor saw
    and did at step t: obs s_t, action a_t, log mu(a_t|s_t) under the weights it acted with,
    reward r_t and the terminated/truncated flags. final_obs[t, n] is the true final
    observation where environment n was truncated at step t; last_obs is s_T, after the
    rollout; versions, the version of the weights each rollout was played with."""

    def __init__(self, rollouts, device):
        def stack(key, axis=1):
            return torch.from_numpy(np.concatenate([r[key] for r in rollouts], axis)).to(device)

        self.obs, self.final_obs = stack("obs"), stack("final_obs")
        self.last_obs = stack("last_obs", axis=0)
        self.actions, self.logprobs = stack("actions"), stack("logprobs")
        self.rewards = stack("rewards")
        self.terminated, self.truncated = stack("terminated"), stack("truncated")
        self.versions = [r["version"] for r in rollouts]

    def next_values(self, value_fn, values):
        """next_values[t] = V(s_{t+1}) for every step, from values [T, B*N] of the batch:
        s_{t+1} is obs[t+1] inside the rollout, last_obs after it, and the true final
        observation where the step was truncated. Where it was terminated the value is not
        used (multiplied by 0): the next episode's first value standing there is harmless."""
        next_values = torch.empty_like(values)
        next_values[:-1] = values[1:]
        next_values[-1] = value_fn(self.last_obs)
        where = self.truncated.nonzero(as_tuple=True)
        if where[0].numel():
            next_values[where] = value_fn(self.final_obs[where])
        return next_values

    @torch.no_grad()
    def vtrace(self, logprobs, values, value_fn, gamma, rho_bar, c_bar, correct=True):
        """V-trace (advantages, vs) [T, B*N] for the learner's current policy pi and critic V:
        logprobs [T, B*N] = log pi(a_t|s_t) and values = V(s_t) as the learner computes them
        now, against the log mu(a_t|s_t) the actors stored: log rho_t = log pi - log mu.
        correct=False (--no-vtrace) uses log rho = 0, rho = c = 1, whatever the lag. Next values
        from self.next_values(value_fn, values), then compute_vtrace, all without gradients."""
        next_values = self.next_values(value_fn, values.detach())
        log_rhos = logprobs.detach() - self.logprobs
        if not correct:
            log_rhos = torch.zeros_like(log_rhos)
        return compute_vtrace(self.rewards, values.detach(), next_values, self.terminated,
                              self.truncated, log_rhos, gamma, rho_bar, c_bar)


# ---------------------------------------------------------------------------------------
# Networks
# ---------------------------------------------------------------------------------------
def layer_init(layer, std=math.sqrt(2), bias_const=0.0):
    """Orthogonal weights with gain std and constant bias, as in the PPO baselines."""
    nn.init.orthogonal_(layer.weight, std)
    nn.init.constant_(layer.bias, bias_const)
    return layer


def mlp(in_size, hidden_size, out_size, out_std):
    return nn.Sequential(
        layer_init(nn.Linear(in_size, hidden_size)), nn.Tanh(),
        layer_init(nn.Linear(hidden_size, hidden_size)), nn.Tanh(),
        layer_init(nn.Linear(hidden_size, out_size), std=out_std),
    )


class ImageEncoder(nn.Module):
    """Convolutions from an H x W x C image (channels last, as Gymnasium and MinAtar give it)
    to a feature vector, ReLU after every layer, 0-255 pixels (byte_pixels) scaled to [0, 1].
    A convolution's output side is (side - kernel) // stride + 1. Two sizes:

        at least 36 x 36 (Mnih et al. 2015): conv 32 8x8 stride 4, conv 64 4x4 stride 2,
            conv 64 3x3 stride 1, linear 512 (84 x 84 -> 20 -> 9 -> 7: 64 * 7 * 7 = 3136 inputs)
        smaller grids (MinAtar's 10 x 10; Young & Tian 2019): conv 16 3x3 stride 1, linear 128;
            10 -> 8, so 16 * 8 * 8 = 1024 inputs to the linear layer
    """

    def __init__(self, obs_shape, uint8):
        super().__init__()
        self.uint8 = uint8
        image_shape = (obs_shape[2], *obs_shape[:2])  # [C, H, W]
        channels, height, width = image_shape
        large = min(height, width) >= 36
        convs = [(32, 8, 4), (64, 4, 2), (64, 3, 1)] if large else [(16, 3, 1)]
        self.output_size = 512 if large else 128
        layers = []
        for out_channels, kernel, stride in convs:
            layers += [layer_init(nn.Conv2d(channels, out_channels, kernel, stride)), nn.ReLU()]
            channels = out_channels
        self.convs = nn.Sequential(*layers, nn.Flatten())
        with torch.no_grad():  # the linear layer's input size: a blank image run through
            flat_size = self.convs(torch.zeros(1, *image_shape)).shape[1]
        self.linear = nn.Sequential(layer_init(nn.Linear(flat_size, self.output_size)), nn.ReLU())

    def forward(self, obs):
        images = obs.float() / 255.0 if self.uint8 else obs.float()
        return self.linear(self.convs(images.movedim(-1, -3)))  # [B, H, W, C] -> [B, C, H, W]


class Agent(nn.Module):
    """Separate actor and critic MLPs on a vector observation; on an image, one ImageEncoder
    under a linear actor head and a linear critic head. Either sees the observation alone (the
    authors' agent adds an LSTM fed the last action and reward too; the environments here show
    their state in each observation). The actor gives categorical logits, or a diagonal
    Gaussian's mean with a learned log std. The critic outputs n(s), V(s) = sigma * n(s) + mu
    with PopArt's mu and sigma (buffers: they travel with the weights and the checkpoint)."""

    def __init__(self, obs_shape, action_dim, continuous, hidden_size=64, uint8=False):
        super().__init__()
        self.continuous = continuous
        if len(obs_shape) == 3:  # an image
            self.encoder = ImageEncoder(obs_shape, uint8)
            self.critic = layer_init(nn.Linear(self.encoder.output_size, 1), std=1.0)
            self.actor = layer_init(nn.Linear(self.encoder.output_size, action_dim), std=0.01)
        else:
            self.encoder = nn.Identity()
            self.critic = mlp(obs_shape[0], hidden_size, 1, out_std=1.0)
            self.actor = mlp(obs_shape[0], hidden_size, action_dim, out_std=0.01)
        if continuous:
            self.actor_logstd = nn.Parameter(torch.zeros(1, action_dim))
        self.register_buffer("value_mean", torch.zeros(()))  # mu
        self.register_buffer("value_mean_sq", torch.ones(()))  # nu: sigma = 1 at the start

    def value_std(self):
        return popart_std(self.value_mean, self.value_mean_sq)

    def value(self, features):
        """V(s) = sigma * n(s) + mu from the critic's output n(s)."""
        return self.critic(features).squeeze(-1) * self.value_std() + self.value_mean

    @torch.no_grad()
    def update_value_statistics(self, targets, beta):
        """PopArt: move mu and sigma towards the targets' (popart_statistics) and rescale the
        critic's last layer so that V stays what it was (popart_preserve)."""
        mean, std = self.value_mean.clone(), self.value_std()
        new_mean, new_mean_sq, new_std = popart_statistics(mean, self.value_mean_sq, targets,
                                                           beta)
        head = self.critic if isinstance(self.critic, nn.Linear) else self.critic[-1]
        weight, bias = popart_preserve(head.weight, head.bias, mean, std, new_mean, new_std)
        head.weight.copy_(weight)
        head.bias.copy_(bias)
        self.value_mean.copy_(new_mean)
        self.value_mean_sq.copy_(new_mean_sq)

    def get_value(self, obs):
        return self.value(self.encoder(obs))

    def get_action_and_value(self, obs, action=None):
        """(action, log-probability, entropy, value) for each observation, the action sampled
        when none is given (a Gaussian's dimensions independent: their terms add up)."""
        features = self.encoder(obs)  # the observation itself, or the image's features
        if self.continuous:
            mean = self.actor(features)
            dist = Normal(mean, self.actor_logstd.expand_as(mean).exp(), validate_args=False)
        else:
            dist = Categorical(logits=self.actor(features), validate_args=False)
        if action is None:
            action = dist.sample()
        logprob, entropy = dist.log_prob(action), dist.entropy()
        if self.continuous:
            logprob, entropy = logprob.sum(-1), entropy.sum(-1)
        return action, logprob, entropy, self.value(features)


def make_agent(obs_space, action_space, hidden_size):
    continuous = isinstance(action_space, gym.spaces.Box)
    action_dim = action_space.shape[0] if continuous else int(action_space.n)
    return Agent(obs_space.shape, action_dim, continuous, hidden_size,
                 uint8=byte_pixels(obs_space))


# ---------------------------------------------------------------------------------------
# What the agent sees and sends: observations as arrays, clipped actions
# ---------------------------------------------------------------------------------------
def obs_array(obs):
    """Observations as the network takes them: uint8 images stay uint8 (the encoder scales
    them, and a rollout to send is a quarter of the bytes), anything else float32."""
    obs = np.asarray(obs)
    return obs if obs.dtype == np.uint8 else obs.astype(np.float32)


def make_vector_env(env_id, num_envs, video_folder=None):
    """N copies of env_id in one synchronous vector environment, with SAME_STEP autoreset
    (an episode's true last observation is in info["final_obs"]) and episode statistics."""
    def make(i):
        return make_game(env_id, video_folder, f"eval-{i}")  # with a video: its first episode

    envs = gym.vector.SyncVectorEnv([lambda i=i: make(i) for i in range(num_envs)],
                                    autoreset_mode=gym.vector.AutoresetMode.SAME_STEP)
    return gym.wrappers.vector.RecordEpisodeStatistics(envs)


def to_env_action(agent, actions, action_space):
    """Actions as the environment takes them: a Gaussian's clipped (the rollout keeps it raw)."""
    actions = actions.cpu().numpy()
    if agent.continuous:
        return np.clip(actions, action_space.low, action_space.high)
    return actions


# ---------------------------------------------------------------------------------------
# Acting: an actor (a Ray actor; ActorPool in the plumbing starts them and carries messages)
# ---------------------------------------------------------------------------------------
class Actor:
    """One actor: its own vector of N environments (seeded from env_seed) and its own copy
    of the policy, on the CPU. rollout() plays T steps and returns them as NumPy arrays."""

    def __init__(self, env_id, num_envs, num_steps, hidden_size, env_seed):
        register_game_ids(env_id)  # MinAtar's ids, in this process too
        torch.set_num_threads(1)
        torch.manual_seed(env_seed)  # the actions this actor samples
        self.envs, self.num_steps = make_vector_env(env_id, num_envs), num_steps
        self.agent = make_agent(self.envs.single_observation_space,
                                self.envs.single_action_space, hidden_size)
        self.version = None  # the version of the weights it holds: none until the first
        self.next_obs = obs_array(self.envs.reset(seed=env_seed)[0])

    @torch.no_grad()
    def rollout(self, weights=None, version=None):
        """Load the weights of that version if given (else keep its own), play T steps and
        return them stamped with the weights' version: obs, actions, behaviour logprobs,
        rewards, terminated, truncated [T, N], final_obs (where a step was truncated),
        last_obs [N] and the episodes that ended, (step of the rollout, return, length)."""
        if weights is not None:
            self.agent.load_state_dict(weights)
            self.version = version
        envs = self.envs
        obs = np.zeros((self.num_steps, *self.next_obs.shape), self.next_obs.dtype)
        final_obs = np.zeros_like(obs)
        steps = {key: [] for key in ("actions", "logprobs", "rewards", "terminated", "truncated")}
        episodes = []
        for t in range(self.num_steps):
            obs[t] = self.next_obs
            action, logprob, _, _ = self.agent.get_action_and_value(torch.from_numpy(obs[t]))
            next_obs, reward, terminated, truncated, info = envs.step(
                to_env_action(self.agent, action, envs.single_action_space))
            for i in np.flatnonzero(truncated):  # the step bootstraps from its value
                final_obs[t, i] = obs_array(info["final_obs"][i])
            for i in np.flatnonzero(info.get("_episode", [])):
                episodes.append((t, float(info["episode"]["r"][i]), int(info["episode"]["l"][i])))
            for key, value in zip(steps, (action, logprob, reward, terminated, truncated)):
                steps[key].append(np.asarray(value))
            self.next_obs = obs_array(next_obs)
        rollout = {key: np.stack(values) for key, values in steps.items()}
        rollout["rewards"] = rollout["rewards"].astype(np.float32)
        return rollout | {"obs": obs, "final_obs": final_obs, "last_obs": self.next_obs.copy(),
                          "episodes": episodes, "version": self.version}


# ---------------------------------------------------------------------------------------
# Training
# ---------------------------------------------------------------------------------------
def train(args, agent, actors, run, device):
    """IMPALA's learner: publish the weights, take batches of rollouts as they come, V-trace,
    one step per batch, log the lag; until the budget, --stop-at-return or a non-finite loss.
    run (Run, below the banner) writes the run folder: step(n) prints progress and
    evaluates, episode/update add a CSV row, reached/non_finite say when to stop."""
    # Adam with eps 1e-5 as in ppo.py, where the authors' code has RMSProp with eps 0.1
    optimizer = torch.optim.Adam(agent.parameters(), lr=args.learning_rate, eps=1e-5)
    rollout_steps = args.num_envs * args.num_steps
    num_updates = args.total_timesteps // (rollout_steps * args.rollouts_per_batch)
    rollouts_left = num_updates * args.rollouts_per_batch  # rollouts not yet asked for
    played = [0] * args.num_actors  # rollouts each actor has been asked for
    global_step, version = 0, 0  # version: the learner's gradient steps so far

    def ask(i):  # actor i plays its next rollout: with the newest weights every --refresh-every
        nonlocal rollouts_left
        if rollouts_left:
            actors.request(i, refresh=played[i] % args.refresh_every == 0)
            played[i], rollouts_left = played[i] + 1, rollouts_left - 1

    actors.publish(agent, version)
    for i in range(args.num_actors):
        ask(i)
    for update in range(1, num_updates + 1):
        if args.anneal_lr:  # linearly from --learning-rate to 0, as in the authors' code
            for group in optimizer.param_groups:
                group["lr"] = args.learning_rate * (1 - (update - 1) / num_updates)

        # Collect: rollouts as they arrive (in turn with --sync); the sender plays on at once.
        rollouts = []
        while len(rollouts) < args.rollouts_per_batch:
            i, rollout = actors.next()
            ask(i)
            rollouts.append(rollout)
            for t, episode_return, length in rollout["episodes"]:
                run.episode(global_step + (t + 1) * args.num_envs, episode_return, length)
            global_step += rollout_steps
            run.step(global_step)  # progress line; evaluation every --eval-every steps
            if run.reached(args.stop_at_return, global_step):  # the summary records when
                return

        # Targets: V-trace against the behaviour log-probabilities the actors stored, on the
        # rewards as the environments gave them (the authors' code clips them to [-1, 1]).
        batch = RolloutBatch(rollouts, device)
        lags = policy_lags(version, batch.versions)
        _, logprobs, entropy, values = agent.get_action_and_value(
            batch.obs.flatten(0, 1), batch.actions.flatten(0, 1))
        logprobs, values = logprobs.view_as(batch.logprobs), values.view_as(batch.logprobs)
        advantages, vs = batch.vtrace(logprobs, values, agent.get_value, args.gamma,
                                      args.rho_bar, args.c_bar, correct=args.vtrace)

        # Update: one gradient step on the batch, PopArt's statistics, the new weights published.
        loss, pg_loss, v_loss, entropy = impala_loss(
            logprobs=logprobs.flatten(), entropy=entropy, values=values.flatten(),
            advantages=advantages.flatten(), vs=vs.flatten(), ent_coef=args.ent_coef,
            vf_coef=args.vf_coef, value_std=agent.value_std())
        optimizer.zero_grad()
        loss.backward()
        nn.utils.clip_grad_norm_(agent.parameters(), args.max_grad_norm)
        optimizer.step()
        if args.popart_beta:  # PopArt: mu and sigma towards this batch's targets, V unchanged
            agent.update_value_statistics(vs, args.popart_beta)
        version += 1
        actors.publish(agent, version)

        # Log: the losses, the importance weights and the lag of the batch.
        if run.non_finite(loss.item(), global_step):  # says so; the run stops as interrupted
            return
        rhos = (logprobs.detach() - batch.logprobs).exp()
        run.update(global_step, learning_rate=optimizer.param_groups[0]["lr"],
                   policy_loss=pg_loss.item(), value_loss=v_loss.item(), entropy=entropy.item(),
                   explained_variance=explained_variance(values.detach(), vs),
                   rho_mean=rhos.mean().item(),
                   rho_clipped=(rhos > args.rho_bar).float().mean().item(),
                   policy_lag=float(np.mean(lags)), policy_lag_max=max(lags), version=version,
                   value_mean=agent.value_mean.item(), value_std=agent.value_std().item())


def main(args: Args) -> dict:
    """Train with IMPALA (or evaluate an --eval-checkpoint), write the run folder, return the
    summary. Ctrl-C stops training; the run folder is written, then KeyboardInterrupt goes on up."""
    # prepare (below the banner): --eval-checkpoint's model read, the environment made and
    # checked, every flag checked (a mistake: one line, exit status 2), the seeds set, the
    # device chosen.
    args, (obs_space, action_space), checkpoint, device = prepare(args)
    own_ray = checkpoint is None and starts_ray(args)  # then stopped however the run ends
    try:
        if checkpoint is None:  # Ray joined or started; no more actors than its CPUs
            args = join_ray(args)

        # Set up: the learner's agent, the run folder, the actors.
        agent = make_agent(obs_space, action_space, args.hidden_size).to(device)
        models = {"agent": agent}  # what model.pt holds
        run = Run(args, device, models, checkpoint,
                  rollout_steps=args.num_envs * args.num_steps * args.rollouts_per_batch)

        # Train (unless evaluating a checkpoint), then finish: evaluate, save, write, plot.
        actors = None if checkpoint else ActorPool(args)  # Ray actors; a dead one is replaced
        return run.train(lambda: train(args, agent, actors, run, device), actors)
    finally:  # whatever ended the run, Ctrl-C at any moment included: no Ray process outlives it
        if own_ray:
            stop_ray()


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
# Plumbing for Ray: joined or started, then stopped
# ---------------------------------------------------------------------------------------
# Stamped from plainrl's plumbing/ray.py by its stamp.py: edit it there, not here.
def starts_ray(args):
    """Whether this run starts a Ray of its own here (no --ray-address, and none running in
    this process yet), which it must then stop however it ends (stop_ray)."""
    import ray
    return args.ray_address is None and not ray.is_initialized()


def stop_ray():
    """Stop the Ray this run started, its processes with it. Ray's own exit handler would
    not run after Ctrl-C (cli ends the process by SIGINT), and its raylet, killed with this
    process, would leave its dashboard and runtime-env agents running, orphaned, a minute."""
    import ray
    ray.shutdown()


def check_reachable(address):
    """Fail at once if a host:port address takes no connection (Ray itself would retry it
    for minutes); None, "auto" and the like are Ray's to resolve."""
    host, _, port = (address or "").removeprefix("ray://").rpartition(":")
    if not host or not port.isdigit():
        return
    try:
        socket.create_connection((host, int(port)), timeout=10).close()
    except OSError as e:
        fail(f"cannot reach the Ray cluster at {address}: {e.strerror or e}; start it with "
             "`ray start --head --port=6379` on the head machine")


def start_ray(address):
    """Join the Ray cluster at address, or start Ray on this machine (None), unless this
    process already has; returns the cluster's CPUs. Says so first: Ray takes seconds to
    start, and Ctrl-C meanwhile is held back until it has (ctrl_c_held_back)."""
    import ray
    check_reachable(address)
    if not ray.is_initialized():
        if address is None:  # Ray runs its workers at niceness 15, below any other busy
            # process: beside one on 2 cores an actor took 48 s to import torch (2.5 s at 0)
            os.environ.setdefault("RAY_worker_niceness", "0")
        print(f"{SCRIPT}: " + (f"joining Ray at {address} ..." if address else "starting Ray ..."),
              flush=True)
        try:
            with ctrl_c_held_back(active=address is None):
                # "local": a Ray of this run's own, even where another is running on the
                # machine (address None would join that one, or RAY_ADDRESS's)
                ray.init(address=address or "local", include_dashboard=False,
                         log_to_driver=False, logging_level="ERROR")
        except Exception as e:  # Ray raises a bare Exception when its node starts too slowly
            if address is None:
                fail(f"cannot start Ray: {str(e).strip().splitlines()[0]} (on a busy machine, "
                     "try again)")
            fail(f"cannot join Ray at {address}: {str(e).strip().splitlines()[0]} (is `ray start` "
                 "running there? If its cluster uses token authentication, set RAY_AUTH_MODE=token"
                 " and copy its ~/.ray/auth_token here)")
    cpus = int(ray.cluster_resources().get("CPU", 0))
    if cpus < 1:
        fail("the Ray cluster has no CPU to run on; start it with some (ray start --num-cpus)")
    return cpus


@contextlib.contextmanager
def ctrl_c_held_back(active=True):
    """Hold Ctrl-C back while Ray starts (active) and raise its KeyboardInterrupt once it has
    started: interrupted inside ray.init, Ray leaves its processes half-started, out of
    ray.shutdown's reach (its dashboard and runtime-env agents lived on, orphaned, for about
    a minute), where once started it stops them all (main's stop_ray). A second Ctrl-C
    raises at once. Only in the main thread under Python's own SIGINT handler (not where
    SIGINT is ignored, as in a background job)."""
    if (not active or signal.getsignal(signal.SIGINT) is not signal.default_int_handler
            or threading.current_thread() is not threading.main_thread()):
        yield
        return
    pressed = []

    def hold(signum, frame):
        if pressed:
            raise KeyboardInterrupt
        pressed.append(signum)
        print(f"{SCRIPT}: Ctrl-C: stopping once Ray has started, in a few seconds (Ctrl-C again "
              "stops at once, and Ray's processes can outlive the run by a minute)", flush=True)

    signal.signal(signal.SIGINT, hold)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, signal.default_int_handler)
    if pressed:
        raise KeyboardInterrupt
# End of plumbing/ray.py


# ---------------------------------------------------------------------------------------
# What the plumbing asks of impala.py: its own checks, its greedy policy, its model's flags
# ---------------------------------------------------------------------------------------
def check_flags(args):
    """impala.py's own flags, checked by prepare before training."""
    if args.env_id.startswith("ALE/"):
        fail(f"impala.py does not preprocess Atari frames; ppo.py and dqn.py train "
             f"{args.env_id}")
    check_range(args, positive=["num_actors", "num_envs", "num_steps", "rollouts_per_batch",
                                "refresh_every", "hidden_size", "learning_rate", "rho_bar",
                                "c_bar", "max_grad_norm"],
                fraction=["gamma", "popart_beta"])
    if args.eval_checkpoint is None and importlib.util.find_spec("ray") is None:
        fail("impala.py's actors are Ray actors: pip install ray==2.60.0")
    batch_size = args.num_envs * args.num_steps * args.rollouts_per_batch
    if args.eval_checkpoint is None and 0 < args.total_timesteps < batch_size:
        fail(f"--total-timesteps {args.total_timesteps} is less than one batch "
             f"(rollouts_per_batch*num_envs*num_steps = {batch_size}); raise it or shrink "
             "the batch")


def check_spaces(args, obs_space, action_space):
    """Whether impala.py handles the environment's spaces; returns (observation space,
    action space)."""
    if not (isinstance(action_space, gym.spaces.Discrete)
            or isinstance(action_space, gym.spaces.Box) and len(action_space.shape) == 1):
        fail(f"{args.env_id} has a {type(action_space).__name__} action space of shape "
             f"{action_space.shape}; impala.py handles Discrete and flat Box actions (for "
             "MultiDiscrete or MultiBinary, number the combinations as one Discrete action)")
    if not (isinstance(obs_space, gym.spaces.Box) and len(obs_space.shape) in (1, 3)):
        fail(f"{args.env_id} has a {type(obs_space).__name__} observation space of shape "
             f"{obs_space.shape}; impala.py needs a flat Box or an image Box (H x W x C, "
             "channels last; ppo_masked.py one-hot encodes Discrete ones, qlearning.py uses a "
             "table)")
    check_image(args, obs_space)  # pixels.py's: 3 x 3 pixels or more
    return obs_space, action_space


def greedy_policy(models, envs):
    """The evaluation's policy, act(obs, info) -> actions: the learner's most likely action
    (the argmax of the logits, or the Gaussian's mean clipped to the bounds)."""
    agent = models["agent"]
    device = next(agent.parameters()).device

    @torch.no_grad()
    def act(obs, info):
        out = agent.actor(agent.encoder(torch.from_numpy(obs_array(obs)).to(device)))
        return to_env_action(agent, out if agent.continuous else out.argmax(-1),
                             envs.single_action_space)
    return act


# What a run is judged on, by environment id (its benchmark task in benchmark.py, its README
# row): (threshold, window of training episodes, "train": the last-window mean at the end,
# or "eval": the final greedy evaluation). Another id: its reward_threshold over 20, "train".
GOALS = {"CartPole-v1": (475, 20, "train", 300_000), "Pendulum-v1": (-200, 20, "eval", 1_000_000),
         "Acrobot-v1": (-100, 100, "train", 300_000), "MountainCar-v0": (-110, 100, "train", 300_000),
         "LunarLander-v3": (200, 100, "train", 300_000),
         "InvertedDoublePendulum-v5": (9100, 100, "eval", 300_000),
         "Swimmer-v5": (360, 100, "eval", 300_000), "Reacher-v5": (-3.75, 100, "eval", 300_000)}
MODEL_FLAGS = ("hidden_size",)  # a checkpoint's network is built by this (and the spaces)


# ---------------------------------------------------------------------------------------
# Plumbing of impala.py's own: the actors on Ray
# ---------------------------------------------------------------------------------------
class ActorPool:
    """The actors: Ray actors, each an Actor with one CPU, wherever the cluster puts them
    (start_ray has joined or started it). This script's code travels with them (pickled by
    value), so another machine needs only the packages. publish(agent, version) puts the
    learner's weights into Ray's object store once per version; request(i, refresh) asks
    actor i for its next rollout, with the newest weights when refresh (else it keeps its
    own); next() waits for a rollout and returns (actor index, rollout): with --sync, the
    actors' in turn, else whichever comes first. An actor that dies is replaced by a new one
    (environments seeded anew) that plays the lost rollout with the newest weights."""

    def __init__(self, args):
        import ray
        self.ray, self.args = ray, args
        if __name__ != "__main__":  # imported (tests): send the code, not a name to import
            ray.cloudpickle.register_pickle_by_value(sys.modules[__name__])
        self.remote_actor = ray.remote(num_cpus=1, max_restarts=0)(Actor)
        if ":" in args.env_id:  # module:EnvId: the actors import the module from this path too
            self.remote_actor = self.remote_actor.options(runtime_env={"env_vars": {
                "PYTHONPATH": os.pathsep.join(p for p in sys.path if p)}})
        self.started, self.pending, self.turn = 0, {}, 0
        self.actors = [self.start() for _ in range(args.num_actors)]

    def start(self):
        """A new Ray actor; the k-th started (replacements count) seeds its N environments
        seed + k*N, ..., seed + k*N + N - 1, and its actions seed + k*N."""
        env_seed = self.args.seed + self.started * self.args.num_envs
        self.started += 1
        return self.remote_actor.remote(self.args.env_id, self.args.num_envs,
                                        self.args.num_steps, self.args.hidden_size, env_seed)

    def publish(self, agent, version):
        weights = {name: tensor.cpu() for name, tensor in agent.state_dict().items()}
        self.weights, self.version = self.ray.put(weights), version

    def request(self, i, refresh=True):
        weights = (self.weights, self.version) if refresh else (None, None)
        self.pending[i] = self.actors[i].rollout.remote(*weights)

    def next(self):
        while True:
            if self.args.sync:  # the first pending actor from the turn on, in index order
                i = min(self.pending, key=lambda j: (j - self.turn) % len(self.actors))
            else:
                (ready,), _ = self.ray.wait(list(self.pending.values()), num_returns=1)
                i = next(j for j, ref in self.pending.items() if ref == ready)
            try:
                rollout = self.ray.get(self.pending.pop(i))
            except self.ray.exceptions.RayActorError as e:
                if e.actor_init_failed:  # it would fail again: say why, once
                    raise RuntimeError(f"actor {i} could not start: {e}") from None
                print(f"{SCRIPT}: warning: actor {i} died ({str(e).strip().splitlines()[0]}); "
                      "a new one takes its place", file=sys.stderr)
                self.actors[i] = self.start()
                self.request(i)  # the lost rollout, with the newest weights
                continue
            except self.ray.exceptions.RayTaskError as e:
                raise RuntimeError(f"actor {i} failed:\n{e}") from None
            self.turn = (i + 1) % len(self.actors)
            return i, rollout

    def close(self):
        """Kill the actors (main stops Ray itself where this run started it: stop_ray)."""
        for actor in self.actors:
            self.ray.kill(actor)


def join_ray(args):
    """Join or start Ray (start_ray) and cap --num-actors, with a warning, at the cluster's
    CPUs: an actor holds one CPU, and one more would wait for it forever. Returns the flags."""
    cpus = start_ray(args.ray_address)
    if args.num_actors > cpus:
        print(f"{SCRIPT}: warning: --num-actors {args.num_actors} is more than the {cpus} CPUs "
              f"of the Ray cluster; using {cpus}", file=sys.stderr)
        args = replace(args, num_actors=cpus)
    return args


if __name__ == "__main__":
    cli()

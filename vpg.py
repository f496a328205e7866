# From plainrl (MIT licence, (c) 2026 the plainrl authors): keep this line in a copy.
"""Vanilla policy gradient (REINFORCE with reward-to-go and a learned baseline), in one file.

The oldest policy-gradient method, the first step towards TRPO and PPO: the policy acts for
a batch of N*T steps, each action's log-probability is pushed up in proportion to how much
better than expected its outcome was (the advantage, against a value network's baseline
fitted on the same batch), one gradient step is taken on the batch, which is thrown away.

Key equations (tau = s_0, a_0, r_0, s_1, ... a trajectory, gamma the discount, t a step):

    J(theta)       = E_tau[ sum_t r_t ]              the objective: an episode's return
    plain gradient   grad J = E[ sum_t grad log pi_theta(a_t|s_t) * sum_k r_k ] (Williams 1992)
    reward-to-go     grad J = E[ sum_t grad log pi_theta(a_t|s_t) * sum_{k>=t} r_k ]: an action
                     cannot change the rewards before it, whose terms have expectation 0
    discounted       R_t = sum_{k>=t} gamma^(k-t) r_k in place of sum_{k>=t} r_k (less variance,
                     a bias; the discounted objective's factor gamma^t dropped, as Spinning Up's)
    baseline         R_t - b(s_t), b(s_t) = V_phi(s_t): E_a[ grad log pi(a|s) b(s) ] = 0
    the loss         L_pi(theta) = -mean_t[ log pi_theta(a_t|s_t) * A_t ],  A_t = R_t - V(s_t)
                     standardized over the batch (--norm-adv); --no-baseline: A_t = R_t, raw
    the critic       L_V(phi) = mean_t[ 0.5 * (V_phi(s_t) - R_t)^2 ]  (--gae-lambda: target
                     A_t + V(s_t), A_t the GAE, as trpo.py's and ppo.py's)
    a cut episode    (batch end, time limit) R_t = r_t + gamma V(s_{t+1}); a terminated one stops

Papers:
    Williams 1992, "Simple Statistical Gradient-Following Algorithms for Connectionist
        Reinforcement Learning", Machine Learning 8 (REINFORCE)
    Sutton et al. 2000, "Policy Gradient Methods for Reinforcement Learning with Function
        Approximation", NeurIPS 1999 (the policy-gradient theorem)
    Schulman et al. 2016, "High-Dimensional Continuous Control Using Generalized Advantage
        Estimation", ICLR 2016
    Pardo et al. 2018, "Time Limits in Reinforcement Learning", ICML 2018
    Achiam 2018, "Spinning Up in Deep RL" (its VPG: one policy step, 80 value steps per batch)
    Nota & Thomas 2020, "Is the Policy Gradient a Gradient?", AAMAS 2020

Run:
    python vpg.py --env-id CartPole-v1
    python vpg.py --env-id CartPole-v1 --gae-lambda 0.97     # GAE instead of reward-to-go
    python vpg.py --env-id Pendulum-v1 --total-timesteps 300000   # Spinning Up's settings

Writes runs/<env_id>__vpg__<seed>__<unix_time>/ (plainrl's CONTRIBUTING.md, "What a run writes").
"""

# ---------------------------------------------------------------------------------------
# Imports
# ---------------------------------------------------------------------------------------
import math
import os
import warnings
from dataclasses import dataclass
from typing import Literal, Optional

import gymnasium as gym
import numpy as np
import torch
import torch.nn as nn
import tyro
from gymnasium.wrappers.utils import RunningMeanStd
from torch.distributions import Categorical, Independent, Normal

SCRIPT = os.path.basename(__file__)


# ---------------------------------------------------------------------------------------
# Flags
# ---------------------------------------------------------------------------------------
@dataclass
class Args:
    env_id: str = "CartPole-v1"
    """a Gymnasium id (or module:id) with Discrete or Box actions and flat Box observations"""
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
    preset: tyro.conf.DisallowNone[Optional[Literal["discrete", "continuous"]]] = None
    """the settings of the flags left at None (None: the environment's family, PRESETS)"""
    num_envs: tyro.conf.DisallowNone[Optional[int]] = None
    """N: parallel environments (synchronous vector environment)"""
    num_steps: tyro.conf.DisallowNone[Optional[int]] = None
    """T: steps per environment in each batch; one policy step per batch of N*T steps"""
    learning_rate: tyro.conf.DisallowNone[Optional[float]] = None
    """Adam learning rate of the policy (3e-4 in Spinning Up's VPG)"""
    vf_learning_rate: float = 1e-3
    """Adam learning rate of the value network (1e-3 in Spinning Up's VPG)"""
    vf_iters: tyro.conf.DisallowNone[Optional[int]] = None
    """epochs of value regression on each batch (80 full-batch steps in Spinning Up's VPG)"""
    vf_minibatches: tyro.conf.DisallowNone[Optional[int]] = None
    """minibatches per value epoch; must divide N*T"""
    gamma: float = 0.99
    """discount factor (0.99 in Spinning Up)"""
    # Unset, the advantage is the reward-to-go minus the baseline, which --gae-lambda 1 equals.
    gae_lambda: Optional[float] = None
    """lambda of GAE for the advantage (0.97 in Spinning Up; None: reward-to-go minus baseline)"""
    baseline: bool = True
    """subtract the value baseline; --no-baseline weighs by the raw reward-to-go, unstandardized"""
    norm_adv: bool = True
    """standardize the baseline's advantages over the batch (mean 0, std 1), as Spinning Up does"""
    norm_obs: bool = False
    """normalize observations by running mean and variance, clip to [-10, 10] (kept in model.pt)"""
    norm_reward: bool = False
    """divide rewards by the running std of the discounted return, then clip to [-10, 10]"""
    hidden_size: int = 64
    """width of the two hidden layers of the policy and of the value network"""


# The presets of the flags left at None, by the environment's family (family(), below the
# banner): each its source's settings. A flag given overrides its preset.
PRESETS = {
    # Chosen on CartPole-v1 to solve it in minutes on a laptop
    "discrete": ("plainrl's CartPole settings", dict(
        num_envs=8, num_steps=256, learning_rate=1e-2, vf_iters=20, vf_minibatches=4)),
    # MuJoCo: Spinning Up's VPG (4,000 steps per batch, 80 full-batch value steps), but the
    # advantage the reward-to-go less the baseline (--gae-lambda 0.97 for Spinning Up's GAE)
    "continuous": ("Spinning Up's VPG settings", dict(
        num_envs=1, num_steps=4000, learning_rate=3e-4, vf_iters=80, vf_minibatches=1)),
}


# ---------------------------------------------------------------------------------------
# The math
# ---------------------------------------------------------------------------------------
def reward_to_go(rewards, next_values, terminated, truncated, gamma):
    """The discounted reward-to-go of every step, each episode cut by a time limit or by the
    end of the batch continued by the value of the observation where it was cut.

    All inputs are tensors of shape [T, N], terminated and truncated 0/1 or bool;
    next_values[t] = V(s_{t+1}), the value of the observation after step t (the true final
    observation where the episode ended at t).
    With done_t = terminated_t or truncated_t:

        R_t = r_t + gamma * (1 - terminated_t) * next_values_t    if done_t or t = T - 1
        R_t = r_t + gamma * R_{t+1}                                otherwise

    A terminated step's next value is never used; a truncated one bootstraps. Returns [T, N].
    """
    done = terminated.bool() | truncated.bool()
    not_terminated = 1.0 - terminated.to(rewards.dtype)
    returns = torch.zeros_like(rewards)
    running = next_values[-1]
    for t in reversed(range(rewards.shape[0])):
        running = torch.where(done[t], next_values[t], running)
        running = rewards[t] + gamma * not_terminated[t] * running
        returns[t] = running
    return returns


def compute_gae(rewards, values, next_values, terminated, truncated, gamma, gae_lambda):
    """Generalized advantage estimation with time limits handled (Schulman et al. 2016).

    All inputs are tensors of shape [T, N]; terminated and truncated are 0/1 or bool.
    values[t] = V(s_t); next_values[t] = V(s_{t+1}), the value of the observation that
    followed step t, which is the true final observation when the episode ended at t.
    With done_t = terminated_t or truncated_t:

        delta_t = r_t + gamma * (1 - terminated_t) * next_values_t - values_t
        A_t     = delta_t + gamma * lambda * (1 - done_t) * A_{t+1},   A_T = 0
        returns = A + values

    With lambda = 1 the deltas telescope and A_t = reward_to_go_t - values_t.
    Returns (advantages, returns), each [T, N].
    """
    not_terminated = 1.0 - terminated.to(rewards.dtype)
    not_done = 1.0 - (terminated.bool() | truncated.bool()).to(rewards.dtype)
    deltas = rewards + gamma * not_terminated * next_values - values
    advantages = torch.zeros_like(rewards)
    running = torch.zeros_like(rewards[0])
    for t in reversed(range(rewards.shape[0])):
        running = deltas[t] + gamma * gae_lambda * not_done[t] * running
        advantages[t] = running
    return advantages, advantages + values


def vpg_loss(logprob, advantages):
    """The policy-gradient loss on a batch of B samples (both [B] tensors):

        L_pi = -mean( log pi_theta(a_t|s_t) * A_t )

    The advantages are constants (no gradient flows into them), so
    grad L_pi = -mean( grad log pi(a_t|s_t) * A_t ), the negated gradient estimate of the
    module docstring; for a softmax over logits z, grad_z log pi(a) = onehot(a) - pi.
    """
    return -(logprob * advantages.detach()).mean()


def value_loss(values, returns):
    """The critic's regression loss on B samples: mean( 0.5 * (V(s_t) - R_t)^2 )."""
    return 0.5 * ((values - returns) ** 2).mean()


def explained_variance(values, returns):
    """1 - Var[R - V] / Var[R]: 1 when the critic predicts the targets, 0 or less when it
    does no better than their mean (NaN when the targets do not vary)."""
    var_returns = returns.var().item()
    return 1 - (returns - values).var().item() / var_returns if var_returns else math.nan


class RolloutBuffer:
    """One batch of T steps from N environments, preallocated on the device.

    Row t holds what was seen and done at step t: obs s_t, action a_t, the log-probability
    log pi_old(a_t|s_t) of the policy that acted, reward r_t, the terminated/truncated flags
    of the step, and V(s_t). final_obs[t, n] holds the true final observation where
    environment n was truncated at step t (its value is bootstrapped); last_obs is s_T.
    """

    def __init__(self, num_steps, num_envs, obs_shape, action_shape, continuous, device):
        def zeros(*shape, dtype=torch.float32):
            return torch.zeros((num_steps, num_envs, *shape), dtype=dtype, device=device)

        self.obs, self.final_obs = zeros(*obs_shape), zeros(*obs_shape)
        self.actions = zeros(*action_shape, dtype=torch.float32 if continuous else torch.long)
        self.logprobs, self.rewards, self.values = zeros(), zeros(), zeros()
        self.terminated, self.truncated = zeros(dtype=torch.bool), zeros(dtype=torch.bool)
        self.last_obs = torch.zeros((num_envs, *obs_shape), device=device)

    def next_values(self, value_fn, values):
        """next_values[t] = V(s_{t+1}) for every step, from values [T, N] of the batch.

        s_{t+1} is obs[t+1] inside the batch, last_obs after it, and the true final
        observation where the step was truncated. Where it was terminated the value is not
        used (multiplied by 0): the next episode's first value standing there is harmless.
        """
        next_values = torch.empty_like(values)
        next_values[:-1] = values[1:]
        next_values[-1] = value_fn(self.last_obs)
        where = self.truncated.nonzero(as_tuple=True)
        if where[0].numel():
            next_values[where] = value_fn(self.final_obs[where])
        return next_values

    @torch.no_grad()
    def advantages(self, value_fn, gamma, gae_lambda=None, baseline=True):
        """(advantages, returns) [T, N]: the returns are the critic's targets. Without
        gae_lambda, returns = reward_to_go and advantages = returns - V(s_t) (the returns
        themselves without the baseline); with it, GAE's advantages and A + V."""
        next_values = self.next_values(value_fn, self.values)
        if gae_lambda is not None:
            return compute_gae(self.rewards, self.values, next_values, self.terminated,
                               self.truncated, gamma, gae_lambda)
        returns = reward_to_go(self.rewards, next_values, self.terminated, self.truncated, gamma)
        return (returns - self.values if baseline else returns), returns


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


class Agent(nn.Module):
    """A policy MLP (the actor) and a separate value MLP (the critic). The actor outputs the
    logits of a categorical distribution, or the mean of a diagonal Gaussian whose log std
    is a learned state-independent parameter."""

    def __init__(self, obs_shape, action_dim, continuous, hidden_size=64):
        super().__init__()
        self.continuous = continuous
        self.critic = mlp(obs_shape[0], hidden_size, 1, out_std=1.0)
        self.actor = mlp(obs_shape[0], hidden_size, action_dim, out_std=0.01)
        if continuous:
            self.actor_logstd = nn.Parameter(torch.zeros(1, action_dim))

    def policy_parameters(self):
        """theta: the actor's weights and, for a Gaussian, its log std."""
        return [*self.actor.parameters(), *([self.actor_logstd] if self.continuous else [])]

    def get_value(self, obs):
        return self.critic(obs).squeeze(-1)

    def distribution(self, obs):
        """pi_theta(.|s) for each observation: a Categorical, or a diagonal Gaussian whose
        independent dimensions add up their log-probabilities and entropies."""
        if self.continuous:
            mean = self.actor(obs)
            std = self.actor_logstd.expand_as(mean).exp()
            return Independent(Normal(mean, std, validate_args=False), 1, validate_args=False)
        return Categorical(logits=self.actor(obs), validate_args=False)

    def get_action_and_value(self, obs, action=None):
        """(action, log-probability, entropy, value) of each observation; sampled if not given."""
        dist = self.distribution(obs)
        if action is None:
            action = dist.sample()
        return action, dist.log_prob(action), dist.entropy(), self.get_value(obs)


# ---------------------------------------------------------------------------------------
# What the agent sees and sends: normalized observations and rewards, clipped actions
# ---------------------------------------------------------------------------------------
class ObsNormalizer:
    """(obs - mean) / sqrt(var + 1e-8), clipped to [-10, 10], with running statistics
    (Gymnasium's RunningMeanStd). Gymnasium's vector NormalizeObservation refuses SAME_STEP
    autoreset and would leave info["final_obs"] raw, so the script applies the same
    statistics to both itself. Disabled, it passes observations through as float32."""

    def __init__(self, shape, enabled):
        self.enabled = enabled
        self.rms = RunningMeanStd(shape=shape)

    def __call__(self, obs, update=False):
        obs = np.asarray(obs, dtype=np.float32)
        if not self.enabled:
            return obs
        if update:
            self.rms.update(obs)
        normalized = (obs - self.rms.mean) / np.sqrt(self.rms.var + 1e-8)
        return np.clip(normalized, -10.0, 10.0).astype(np.float32)

    def state_dict(self):  # tensors, so that torch.load(weights_only=True) reads them
        return {k: torch.as_tensor(getattr(self.rms, k), dtype=torch.float64)
                for k in ("mean", "var", "count")}

    def load_state_dict(self, state):
        for k in ("mean", "var", "count"):
            setattr(self.rms, k, state[k].numpy())


def make_vector_env(env_id, num_envs, reward_gamma=None, video_folder=None):
    """N copies of env_id in one synchronous vector environment, with SAME_STEP autoreset
    (the observation after an episode ends is the next episode's first; the true last one
    is in info["final_obs"]) and episode statistics recorded by Gymnasium's wrapper. With
    reward_gamma (--norm-reward), rewards are divided by the running std of the return
    discounted by it (Gymnasium's NormalizeReward) and clipped to [-10, 10], after the
    statistics wrapper, so that episodes.csv keeps the raw returns."""

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
    envs = gym.wrappers.vector.RecordEpisodeStatistics(envs)
    if reward_gamma is not None:
        envs = gym.wrappers.vector.NormalizeReward(envs, gamma=reward_gamma)
        envs = gym.wrappers.vector.ClipReward(envs, -10.0, 10.0)
    return envs


def to_env_action(agent, actions, action_space):
    """Tensor actions to what the environment takes: Gaussian samples are clipped to the
    bounds when stepping (the unclipped sample is what the buffer stores)."""
    actions = actions.cpu().numpy()
    if agent.continuous:
        return np.clip(actions, action_space.low, action_space.high)
    return actions


# ---------------------------------------------------------------------------------------
# Training
# ---------------------------------------------------------------------------------------
def train(args, agent, normalizer, envs, run, device):
    """VPG's loop: collect a batch, compute advantages and return targets, take one policy
    gradient step on vpg_loss and several value steps, log; until the budget,
    --stop-at-return or a non-finite loss.
    run (RunWriter, below the banner) writes the run folder: step(n) prints progress and
    evaluates, episode/update add a CSV row, reached/non_finite say when to stop."""
    policy_optimizer = torch.optim.Adam(agent.policy_parameters(), lr=args.learning_rate)
    value_optimizer = torch.optim.Adam(agent.critic.parameters(), lr=args.vf_learning_rate)
    buffer = RolloutBuffer(args.num_steps, args.num_envs, envs.single_observation_space.shape,
                           envs.single_action_space.shape, agent.continuous, device)
    batch_size = args.num_envs * args.num_steps
    minibatch_size = batch_size // args.vf_minibatches
    global_step = 0
    next_obs = torch.from_numpy(normalizer(envs.reset(seed=args.seed)[0], update=True)).to(device)
    for iteration in range(1, args.total_timesteps // batch_size + 1):
        # Batch: T steps of the N environments with the current policy.
        for step in range(args.num_steps):
            with torch.no_grad():
                action, logprob, _, value = agent.get_action_and_value(next_obs)
            buffer.obs[step], buffer.actions[step] = next_obs, action
            buffer.logprobs[step], buffer.values[step] = logprob, value
            # A Gaussian sample is clipped to the action bounds for the environment only: the
            # buffer keeps the unclipped sample, whose log-probability the gradient pushes.
            obs, reward, terminated, truncated, info = envs.step(
                to_env_action(agent, action, envs.single_action_space))
            global_step += args.num_envs
            run.step(global_step)  # progress line; evaluation every --eval-every steps
            # With --norm-reward the reward arrives divided by the running std of the
            # discounted return and clipped to [-10, 10] (make_vector_env).
            buffer.rewards[step] = torch.from_numpy(reward).to(device)
            buffer.terminated[step] = torch.from_numpy(terminated).to(device)
            buffer.truncated[step] = torch.from_numpy(truncated).to(device)
            # With --norm-obs, observations become (obs - mean) / std clipped to [-10, 10];
            # the true final observation of a time limit is normalized by the same
            # statistics without updating them, and the step bootstraps from its value.
            for i in np.flatnonzero(truncated):
                final_obs = normalizer(info["final_obs"][i])
                buffer.final_obs[step, i] = torch.from_numpy(final_obs).to(device)
            next_obs = torch.from_numpy(normalizer(obs, update=True)).to(device)
            for i in np.flatnonzero(info.get("_episode", [])):
                run.episode(global_step, info["episode"]["r"][i], info["episode"]["l"][i])
            if run.reached(args.stop_at_return, global_step):  # the summary records when
                return
        buffer.last_obs.copy_(next_obs)

        # Targets: reward-to-go (or GAE) and the advantages, from the values of the batch.
        advantages, returns = buffer.advantages(agent.get_value, args.gamma, args.gae_lambda,
                                                args.baseline)
        b_obs, b_actions = buffer.obs.flatten(0, 1), buffer.actions.flatten(0, 1)
        b_logprobs, b_values = buffer.logprobs.flatten(), buffer.values.flatten()
        b_advantages, b_returns = advantages.flatten(), returns.flatten()
        # Standardized over the whole batch, the baseline's advantages only: standardizing the
        # raw reward-to-go of --no-baseline would subtract its batch mean, a baseline itself.
        if args.norm_adv and args.baseline:
            b_advantages = (b_advantages - b_advantages.mean()) / (b_advantages.std() + 1e-8)

        # Policy: one gradient step on the whole batch.
        _, logprob, entropy, _ = agent.get_action_and_value(b_obs, b_actions)
        pg_loss = vpg_loss(logprob, b_advantages)
        policy_optimizer.zero_grad()
        pg_loss.backward()
        policy_optimizer.step()

        # Value: --vf-iters epochs of minibatch regression on the returns: the reward-to-go,
        # or with --gae-lambda A + V (Spinning Up regresses on the reward-to-go even then).
        for _ in range(args.vf_iters):
            for idx in torch.randperm(batch_size, device=device).split(minibatch_size):
                v_loss = value_loss(agent.get_value(b_obs[idx]), b_returns[idx])
                value_optimizer.zero_grad()
                v_loss.backward()
                value_optimizer.step()

        # Diagnostics: k3 estimate of KL(old || new) over the batch, how far the step went.
        with torch.no_grad():
            logratio = agent.get_action_and_value(b_obs, b_actions)[1] - b_logprobs
            approx_kl = (logratio.exp() - 1 - logratio).mean().item()
        if run.non_finite(pg_loss.item() + v_loss.item(), global_step):  # stops as interrupted
            return
        run.update(global_step, policy_loss=pg_loss.item(), value_loss=v_loss.item(),
                   entropy=entropy.mean().item(), approx_kl=approx_kl,
                   explained_variance=explained_variance(b_values, b_returns))


def main(args: Args) -> dict:
    """Train VPG (or evaluate an --eval-checkpoint), write the run folder, return the summary.
    Ctrl-C stops training; the run folder is written, then KeyboardInterrupt goes on up."""
    # Check everything a user can get wrong before anything runs: one line, exit status 2.
    obs_space, action_dim, continuous = check_env(args)
    args = fill_preset(args, family(obs_space.shape, continuous))  # the flags left at None
    check_args(args)
    args, checkpoint = load_checkpoint(args)  # the network's flags come from a checkpoint

    # Set up: seeds, device, the agent, the observation normalizer, the run folder.
    device = seed_and_device(args.seed, args.cuda)
    agent = Agent(obs_space.shape, action_dim, continuous, args.hidden_size).to(device)
    normalizer = ObsNormalizer(obs_space.shape, args.norm_obs)
    models = {"agent": agent, "obs_rms": normalizer}  # what model.pt holds
    if checkpoint is not None:
        restore(checkpoint, models, args)
    run = RunWriter(args, device, models, rollout_steps=args.num_envs * args.num_steps)

    # Train (unless evaluating a checkpoint), then finish: evaluate, save, write, plot.
    envs = None if checkpoint else make_vector_env(
        args.env_id, args.num_envs, reward_gamma=args.gamma if args.norm_reward else None)
    return train_and_finish(run, lambda: train(args, agent, normalizer, envs, run, device), envs)


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
# What the plumbing asks of vpg.py: its own checks, its greedy policy, its model's flags
# ---------------------------------------------------------------------------------------
def check_flags(args):
    """vpg.py's own flags, checked before any environment is made."""
    for name in ("num_envs", "num_steps", "learning_rate", "vf_learning_rate", "vf_iters",
                 "vf_minibatches", "hidden_size"):
        if not getattr(args, name) > 0:
            fail(f"--{name.replace('_', '-')} must be positive, got {getattr(args, name)}")
    for name in ("gamma", "gae_lambda"):
        if getattr(args, name) is not None and not 0.0 <= getattr(args, name) <= 1.0:
            fail(f"--{name.replace('_', '-')} must be in [0, 1], got {getattr(args, name)}")
    if args.gae_lambda is not None and not args.baseline:
        fail("--gae-lambda builds the advantage from the value function; --no-baseline is "
             "for the reward-to-go (leave --gae-lambda unset)")
    batch_size = args.num_envs * args.num_steps
    if batch_size % args.vf_minibatches:
        fail(f"num_envs*num_steps = {batch_size} is not divisible by --vf-minibatches "
             f"{args.vf_minibatches}; pick a divisor of {batch_size}")
    if args.eval_checkpoint is None and 0 < args.total_timesteps < batch_size:
        fail(f"--total-timesteps {args.total_timesteps} is less than one rollout "
             f"(num_envs*num_steps = {batch_size}); raise it or shrink the rollout")


def check_spaces(args, obs_space, action_space):
    """Whether vpg.py handles the environment's spaces; returns (observation space,
    action_dim, continuous)."""
    if not (isinstance(action_space, gym.spaces.Discrete)
            or isinstance(action_space, gym.spaces.Box) and len(action_space.shape) == 1):
        fail(f"{args.env_id} has a {type(action_space).__name__} action space of shape "
             f"{action_space.shape}; vpg.py handles Discrete and flat Box actions (for "
             "MultiDiscrete or MultiBinary, number the combinations as one Discrete action)")
    if not (isinstance(obs_space, gym.spaces.Box) and len(obs_space.shape) == 1):
        fail(f"{args.env_id} has a {type(obs_space).__name__} observation space of shape "
             f"{obs_space.shape}; vpg.py needs a flat Box (ppo.py learns from images, "
             "ppo_masked.py one-hot encodes Discrete ones, qlearning.py uses a table)")
    continuous = isinstance(action_space, gym.spaces.Box)
    return obs_space, action_space.shape[0] if continuous else int(action_space.n), continuous


def greedy_policy(models, envs):
    """The evaluation's policy, act(obs, info) -> actions: the most likely action (the
    argmax of the logits, or the Gaussian's mean clipped to the bounds), the observation
    statistics frozen."""
    agent, normalizer = models["agent"], models["obs_rms"]
    device = next(agent.parameters()).device

    @torch.no_grad()
    def act(obs, info):
        out = agent.actor(torch.from_numpy(normalizer(obs)).to(device))
        return to_env_action(agent, out if agent.continuous else out.argmax(-1),
                             envs.single_action_space)
    return act


# What a run is judged on, by environment id (its benchmark task in benchmark.py, its README
# row): (threshold, window of training episodes, "train": the last-window mean at the end,
# or "eval": the final greedy evaluation). Another id: its reward_threshold over 20, "train".
GOALS = {"CartPole-v1": (475, 20, "train", 500_000)}
MODEL_FLAGS = ("hidden_size", "norm_obs")  # a checkpoint's network is built by these
# vpg.py's columns of updates.csv as TensorBoard's scalars, under CleanRL's names
TENSORBOARD_NAMES = {
    "policy_loss": "losses/policy_loss", "value_loss": "losses/value_loss",
    "entropy": "losses/entropy", "approx_kl": "losses/approx_kl",
    "explained_variance": "losses/explained_variance"}


if __name__ == "__main__":
    cli()

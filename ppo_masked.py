"""Proximal Policy Optimization with invalid-action masking, in one file.

Many environments say, at each step, which actions are allowed: a taxi cannot drive through
a wall, a chess piece cannot move through another. Invalid-action masking gives those
actions probability 0 before sampling, by replacing their logits with a large negative
number, so the agent never wastes experience on them. The buffer stores each step's mask
and the update re-applies exactly that mask, so the policy gradient is the one of the
distribution that really sampled the action. Everything else is PPO as in ppo.py.

Key equations (t indexes steps, m_t the 0/1 mask of allowed actions at s_t,
done_t = terminated_t or truncated_t):

    masked logits  l'_t(a) = l_t(a) if m_t(a) = 1, else -1e8
    policy         pi(a | s_t, m_t) = softmax(l'_t)(a)   (0 for every invalid action)
    entropy        H_t = - sum_{a : m_t(a) = 1} pi(a | s_t, m_t) log pi(a | s_t, m_t)
    ratio_t        = pi_theta(a_t | s_t, m_t) / pi_old(a_t | s_t, m_t)    (the same m_t)
    L_clip         = E[ min(ratio_t * A_t, clip(ratio_t, 1 - eps, 1 + eps) * A_t) ]
    GAE            delta_t = r_t + gamma * (1 - terminated_t) * V(s_{t+1}) - V(s_t)
                   A_t     = delta_t + gamma * lambda * (1 - done_t) * A_{t+1}
    loss           = -L_clip + c_v * 0.5 * (V(s_t) - R_t)^2 - c_e * H_t

The gradient of a masked logit is exactly 0, so the update never pushes on actions the
environment forbade. A time-limit truncation is not a termination: the step bootstraps
from the value of the true final observation (Gymnasium's info["final_obs"]).

The mask comes from info["action_mask"] (Gymnasium's Taxi does this) or from an
"action_mask" entry of a Dict observation (PettingZoo's classic games); the other entries
of a Dict observation are flattened (Discrete and MultiDiscrete one-hot) and concatenated
in the sorted order of their keys. --no-mask trains the same agent without masks.

Papers:
    Huang & Ontañón 2020, "A Closer Look at Invalid Action Masking in Policy Gradient
        Algorithms", arXiv:2006.14171 (FLAIRS-35, 2022)
    Schulman et al. 2017, "Proximal Policy Optimization Algorithms", arXiv:1707.06347
    Schulman et al. 2016, "High-Dimensional Continuous Control Using Generalized
        Advantage Estimation", ICLR 2016
    Pardo et al. 2018, "Time Limits in Reinforcement Learning", ICML 2018

Run:
    python ppo_masked.py --env-id Taxi-v4
    python ppo_masked.py --env-id Taxi-v4 --no-mask --total-timesteps 400000
    python ppo_masked.py --help

Writes runs/<env_id>__ppo_masked__<seed>__<unix_time>/ with config.json, episodes.csv,
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
import tyro
from gymnasium.vector.utils import concatenate, create_empty_array
from matplotlib.figure import Figure
from torch.distributions import Categorical

SCRIPT = os.path.basename(__file__)


# ---------------------------------------------------------------------------------------
# Flags
# ---------------------------------------------------------------------------------------
@dataclass
class Args:
    env_id: str = "Taxi-v4"
    """any registered Gymnasium id with a Discrete action space and an action mask (or none, with --no-mask)"""
    seed: int = 1
    """seeds Python, NumPy, torch and the environments"""
    total_timesteps: int = 200_000
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
    """stop once the mean of the last --stop-window training episode returns reaches this"""
    stop_window: int = 20
    """how many of the latest training episodes --stop-at-return averages"""
    save_model: bool = False
    """write model.pt into the run folder"""
    eval_checkpoint: Optional[str] = None
    """skip training: load this model.pt and evaluate it"""
    capture_video: bool = False
    """record the evaluation episodes into videos/ in the run folder"""

    # Masking
    mask_source: Literal["auto", "info", "obs"] = "auto"
    """where the mask is: info["action_mask"], a Dict observation's "action_mask" entry, or auto (the entry if there is one, else info)"""
    no_mask: bool = False
    """train and evaluate without masks (every action allowed), for comparison"""

    # Algorithm
    num_envs: int = 32
    """N: parallel environments (synchronous vector environment)"""
    num_steps: int = 64
    """T: steps per environment in each rollout; the batch is N*T"""
    learning_rate: float = 7e-3
    """Adam learning rate"""
    anneal_lr: bool = True
    """decay the learning rate linearly to 0 over the budget"""
    gamma: float = 0.97
    """discount factor"""
    gae_lambda: float = 0.95
    """lambda of GAE"""
    num_minibatches: int = 4
    """minibatches per epoch; must divide N*T"""
    update_epochs: int = 4
    """epochs over each rollout"""
    norm_adv: bool = True
    """normalize advantages within each minibatch"""
    clip_coef: float = 0.2
    """epsilon of the clipped surrogate"""
    clip_vloss: bool = False
    """clip the value loss around the rollout's value estimates, as in the PPO baselines"""
    ent_coef: float = 0.05
    """entropy bonus coefficient c_e"""
    vf_coef: float = 0.5
    """value loss coefficient c_v"""
    max_grad_norm: float = 0.5
    """gradient clipping: the largest global norm of the gradient"""
    target_kl: Optional[float] = None
    """stop an update's remaining epochs once the mean approx KL of an epoch exceeds this"""
    norm_reward: bool = False
    """scale rewards by the running std of the discounted return (Gymnasium's NormalizeReward)"""
    hidden_size: int = 64
    """width of the two hidden layers of the actor and of the critic"""


class UsageError(Exception):
    """Bad input: reported as one line on stderr with exit status 2, before training (or,
    for a mask the environment gets wrong mid-run, as soon as it is seen)."""


# ---------------------------------------------------------------------------------------
# The math
# ---------------------------------------------------------------------------------------
MASKED_LOGIT = -1e8
"""The logit of an invalid action: exp(-1e8 - logsumexp) is exactly 0 in float32, while
-inf would turn 0 * log 0 in the entropy, and its gradient, into NaN."""


class MaskedCategorical(Categorical):
    """A categorical distribution over the valid actions only: see masked_categorical."""

    def __init__(self, logits, action_mask):
        self.action_mask = action_mask
        super().__init__(logits=torch.where(action_mask, logits, MASKED_LOGIT),
                         validate_args=False)

    def entropy(self):
        p_log_p = torch.where(self.action_mask, self.probs * self.logits, 0.0)
        return -p_log_p.sum(-1)


def masked_categorical(logits, action_mask):
    """The masked policy (Huang & Ontañón 2020): logits [..., A], action_mask [..., A] bool.

        l'(a)   = l(a) where mask(a), else -1e8
        pi(a)   = exp(l'(a)) / sum_b exp(l'(b))       (0 for masked a; valid ones renormalize)
        H       = - sum_{a valid} pi(a) log pi(a)

    Returns a torch.distributions.Categorical: sample() never returns a masked action,
    log_prob() and entropy() are those of the masked distribution, and the gradient with
    respect to a masked logit is 0. An all-True mask gives the ordinary Categorical.
    """
    return MaskedCategorical(logits, action_mask)


def compute_gae(rewards, values, next_values, terminated, truncated, gamma, gae_lambda):
    """Generalized advantage estimation with time limits handled (Schulman et al. 2016).

    All inputs are tensors of shape [T, N]; terminated and truncated are 0/1 or bool.
    values[t] = V(s_t); next_values[t] = V(s_{t+1}), the value of the observation that
    followed step t, which is the true final observation when the episode ended at t.
    With done_t = terminated_t or truncated_t:

        delta_t = r_t + gamma * (1 - terminated_t) * next_values_t - values_t
        A_t     = delta_t + gamma * lambda * (1 - done_t) * A_{t+1},   A_T = 0
        returns = A + values

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


def ppo_loss(newlogprob, oldlogprob, advantages, newvalue, oldvalue, returns, entropy,
             clip_coef, ent_coef, vf_coef, clip_vloss=False):
    """The PPO loss to minimize on a minibatch of B samples (all inputs are [B] tensors).

        ratio  = exp(newlogprob - oldlogprob)
        L_pg   = mean( max(-A * ratio, -A * clip(ratio, 1 - eps, 1 + eps)) )
        L_v    = mean( 0.5 * (V - R)^2 ),  or with clip_vloss
                 mean( 0.5 * max((V - R)^2, (V_old + clip(V - V_old, -eps, eps) - R)^2) )
        loss   = L_pg - c_e * mean(entropy) + c_v * L_v

    Returns (loss, L_pg, L_v, mean entropy). Advantages come in already normalized.
    """
    ratio = torch.exp(newlogprob - oldlogprob)
    clipped_ratio = torch.clamp(ratio, 1 - clip_coef, 1 + clip_coef)
    pg_loss = torch.max(-advantages * ratio, -advantages * clipped_ratio).mean()
    v_loss = (newvalue - returns) ** 2
    if clip_vloss:
        v_clipped = oldvalue + torch.clamp(newvalue - oldvalue, -clip_coef, clip_coef)
        v_loss = torch.max(v_loss, (v_clipped - returns) ** 2)
    v_loss = 0.5 * v_loss.mean()
    entropy = entropy.mean()
    return pg_loss - ent_coef * entropy + vf_coef * v_loss, pg_loss, v_loss, entropy


class MaskedRolloutBuffer:
    """One rollout of T steps from N environments, preallocated on the device.

    Row t holds what was seen and done at step t: obs s_t, the action mask m_t that was in
    force when a_t was sampled (so the update rebuilds the very distribution that sampled
    it), action a_t, log pi_old(a_t | s_t, m_t), reward r_t, the terminated/truncated flags
    of the step, and V(s_t). final_obs[t, n] holds the true final observation where
    environment n was truncated at step t (its value is bootstrapped); last_obs is s_T,
    the observation after the last step.
    """

    def __init__(self, num_steps, num_envs, obs_dim, num_actions, device):
        def zeros(*shape, dtype=torch.float32):
            return torch.zeros((num_steps, num_envs, *shape), dtype=dtype, device=device)

        self.obs = zeros(obs_dim)
        self.action_masks = zeros(num_actions, dtype=torch.bool)
        self.actions = zeros(dtype=torch.long)
        self.logprobs = zeros()
        self.rewards = zeros()
        self.terminated = zeros(dtype=torch.bool)
        self.truncated = zeros(dtype=torch.bool)
        self.values = zeros()
        self.final_obs = zeros(obs_dim)
        self.last_obs = torch.zeros((num_envs, obs_dim), device=device)

    def next_values(self, value_fn, values):
        """next_values[t] = V(s_{t+1}) for every step, from values [T, N] of the rollout.

        s_{t+1} is obs[t+1] inside the rollout, last_obs after it, and the true final
        observation where the step was truncated. Where it was terminated, the value is
        not used (multiplied by 0), so the next episode's first value standing there is
        harmless.
        """
        next_values = torch.empty_like(values)
        next_values[:-1] = values[1:]
        next_values[-1] = value_fn(self.last_obs)
        where = self.truncated.nonzero(as_tuple=True)
        if where[0].numel():
            next_values[where] = value_fn(self.final_obs[where])
        return next_values

    def gae(self, value_fn, gamma, gae_lambda):
        """GAE advantages and returns [T, N] from the values stored during the rollout."""
        next_values = self.next_values(value_fn, self.values)
        return compute_gae(self.rewards, self.values, next_values, self.terminated,
                           self.truncated, gamma, gae_lambda)


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
    """Separate actor and critic MLPs; the actor's logits go through masked_categorical."""

    def __init__(self, obs_dim, num_actions, hidden_size=64):
        super().__init__()
        self.critic = mlp(obs_dim, hidden_size, 1, out_std=1.0)
        self.actor = mlp(obs_dim, hidden_size, num_actions, out_std=0.01)

    def get_value(self, obs):
        return self.critic(obs).squeeze(-1)

    def act(self, obs, action_mask):
        """Sample valid actions; returns (actions, log-probabilities, values)."""
        dist = masked_categorical(self.actor(obs), action_mask)
        actions = dist.sample()
        return actions, dist.log_prob(actions), self.get_value(obs)

    def evaluate(self, obs, actions, action_mask):
        """Log-probabilities, entropies and values of given actions under the masks they
        were sampled with, for the update."""
        dist = masked_categorical(self.actor(obs), action_mask)
        return dist.log_prob(actions), dist.entropy(), self.get_value(obs)

    def greedy(self, obs, action_mask):
        """The most likely valid action."""
        return torch.where(action_mask, self.actor(obs), MASKED_LOGIT).argmax(-1)


class Adam:
    """Adam (Kingma & Ba 2015), the same update as torch.optim.Adam written out: the first
    use of torch.optim imports torch._dynamo, about a second on a laptop. For each
    parameter p with gradient g, at step k:

        m <- beta1 * m + (1 - beta1) * g          v <- beta2 * v + (1 - beta2) * g^2
        p <- p - lr * (m / (1 - beta1^k)) / (sqrt(v / (1 - beta2^k)) + eps)
    """

    def __init__(self, params, lr, betas=(0.9, 0.999), eps=1e-5):
        self.params = list(params)
        self.lr, self.betas, self.eps, self.k = lr, betas, eps, 0
        self.m = [torch.zeros_like(p) for p in self.params]
        self.v = [torch.zeros_like(p) for p in self.params]

    def zero_grad(self):
        for p in self.params:
            p.grad = None

    @torch.no_grad()
    def step(self):
        beta1, beta2 = self.betas
        self.k += 1
        step_size = self.lr / (1 - beta1 ** self.k)
        v_correction = math.sqrt(1 - beta2 ** self.k)
        for p, m, v in zip(self.params, self.m, self.v):
            m.lerp_(p.grad, 1 - beta1)
            v.mul_(beta2).addcmul_(p.grad, p.grad, value=1 - beta2)
            p.addcdiv_(m, (v.sqrt() / v_correction).add_(self.eps), value=-step_size)


# ---------------------------------------------------------------------------------------
# Environments, evaluation, plotting, saving and loading
# ---------------------------------------------------------------------------------------
FLAT_SPACES = (gym.spaces.Box, gym.spaces.Discrete, gym.spaces.MultiBinary,
               gym.spaces.MultiDiscrete)


def fail(message):
    raise UsageError(message)


def obs_keys(space):
    """The entries of a Dict observation the network sees: all but "action_mask", in the
    sorted order of their keys (fixed, whatever order the environment builds them in)."""
    return sorted(key for key in space.keys() if key != "action_mask")


def flatten_obs(space, obs):
    """A batch of N observations of `space` as float32 vectors [N, D] for the network.

    Box and MultiBinary: flattened. Discrete(n, start): one-hot of obs - start, n wide.
    MultiDiscrete(nvec): one one-hot per component, concatenated (sum(nvec) wide).
    Dict: each entry but "action_mask" flattened so, concatenated in obs_keys order.
    """
    if isinstance(space, gym.spaces.Dict):
        return np.concatenate([flatten_obs(space[key], obs[key]) for key in obs_keys(space)],
                              axis=1)
    obs = np.asarray(obs)
    n = len(obs)
    if isinstance(space, (gym.spaces.Discrete, gym.spaces.MultiDiscrete)):
        sizes = np.asarray(space.nvec if isinstance(space, gym.spaces.MultiDiscrete)
                           else space.n).ravel()
        offsets = np.concatenate([[0], np.cumsum(sizes)[:-1]])
        hot = (obs.reshape(n, -1) - np.asarray(space.start).ravel()) + offsets
        out = np.zeros((n, int(sizes.sum())), dtype=np.float32)
        out[np.arange(n)[:, None], hot] = 1.0
        return out
    return obs.reshape(n, -1).astype(np.float32)


def flat_size(space):
    """D, the width of flatten_obs's vectors for `space`."""
    if isinstance(space, gym.spaces.Dict):
        return sum(flat_size(space[key]) for key in obs_keys(space))
    return gym.spaces.flatdim(space)


def check_obs_space(space, env_id, path="observation"):
    """Refuse observation spaces that flatten_obs cannot turn into a vector."""
    if isinstance(space, gym.spaces.Dict):
        for key in obs_keys(space):
            check_obs_space(space[key], env_id, f"{path}[{key!r}]")
    elif not isinstance(space, FLAT_SPACES):
        fail(f"{env_id}'s {path} space is a {type(space).__name__}; ppo_masked.py handles Box, "
             "Discrete, MultiBinary, MultiDiscrete and Dicts of them")


def read_masks(obs, info, source, num_envs, num_actions, where):
    """The action masks [N, A] (bool) in force for the observations `obs` just returned.

    source "obs": the "action_mask" entry of the Dict observation; "info":
    info["action_mask"]; None (--no-mask): every action allowed. With SAME_STEP autoreset
    both hold, for an environment whose episode just ended, the mask of the next episode's
    first observation (the old episode's last info is in info["final_info"]), so the mask
    always belongs to the observation it is stored with. `where` names the step in errors.
    """
    if source is None:
        return np.ones((num_envs, num_actions), dtype=bool)
    if source == "obs":
        masks = obs["action_mask"]
    else:
        missing = (np.ones(num_envs, dtype=bool) if "action_mask" not in info
                   else ~info["_action_mask"])
        if missing.any():
            fail(f"environment {np.flatnonzero(missing)[0]} gave no info['action_mask'] {where}; "
                 "use --mask-source obs if the mask is in the observation, or --no-mask")
        masks = info["action_mask"]
    masks = np.asarray(masks)
    if masks.shape != (num_envs, num_actions):
        fail(f"the action mask {where} has length {masks.shape[1:]} but the action space has "
             f"{num_actions} actions; the mask needs one 0/1 entry per action")
    masks = masks.astype(bool)
    empty = ~masks.any(axis=1)
    if empty.any():
        fail(f"the action mask of environment {np.flatnonzero(empty)[0]} {where} allows no "
             "action; the environment must allow at least one")
    return masks


def check_env(env_id, mask_source, no_mask):
    """Build one environment to check its spaces and its mask after a reset; returns
    (observation space, number of actions, where the mask is: "obs", "info" or None)."""
    if env_id not in gym.registry:
        close = difflib.get_close_matches(env_id, list(gym.registry), n=3, cutoff=0.5)
        hint = f"; did you mean {', '.join(close)}?" if close else "; see gymnasium.registry"
        fail(f"unknown environment id {env_id!r}{hint}")
    try:
        envs = make_vector_env(env_id, 1)
    except (gym.error.Error, ImportError) as e:
        fail(f"cannot make {env_id}: {str(e).splitlines()[0]}")
    try:
        obs_space, action_space = envs.single_observation_space, envs.single_action_space
        if not isinstance(action_space, gym.spaces.Discrete):
            fail(f"{env_id} has a {type(action_space).__name__} action space; ppo_masked.py "
                 "masks Discrete ones (for Box actions without masks see ppo.py)")
        check_obs_space(obs_space, env_id)
        if flat_size(obs_space) == 0:
            fail(f"{env_id}'s observation has nothing but the action mask to feed the network")
        if no_mask:
            return obs_space, int(action_space.n), None
        has_entry = isinstance(obs_space, gym.spaces.Dict) and "action_mask" in obs_space.keys()
        source = mask_source if mask_source != "auto" else "obs" if has_entry else "info"
        looked = {"obs": "for an 'action_mask' entry of a Dict observation (its observation "
                         f"is a {type(obs_space).__name__})",
                  "info": "for info['action_mask'] after reset"}
        obs, info = envs.reset(seed=0)
        if (source == "obs" and not has_entry) or (source == "info" and "action_mask" not in info):
            where = (looked[source] if mask_source != "auto"
                     else f"{looked['obs']} and {looked['info']}")
            fail(f"{env_id} provides no action mask: looked {where}; train without masks "
                 "with --no-mask")
        read_masks(obs, info, source, 1, int(action_space.n), "after reset")
        return obs_space, int(action_space.n), source
    finally:
        envs.close()


def check_args(args):
    """Everything a user can get wrong, checked before any environment runs."""
    for name in ("total_timesteps", "num_envs", "num_steps", "num_minibatches",
                 "update_epochs", "hidden_size", "stop_window"):
        if getattr(args, name) <= 0:
            fail(f"--{name.replace('_', '-')} must be positive, got {getattr(args, name)}")
    for name in ("learning_rate", "clip_coef", "max_grad_norm"):
        if not getattr(args, name) > 0:
            fail(f"--{name.replace('_', '-')} must be positive, got {getattr(args, name)}")
    for name in ("gamma", "gae_lambda"):
        if not 0.0 <= getattr(args, name) <= 1.0:
            fail(f"--{name.replace('_', '-')} must be in [0, 1], got {getattr(args, name)}")
    if args.eval_episodes < 0:
        fail(f"--eval-episodes must be 0 or more, got {args.eval_episodes}")
    batch_size = args.num_envs * args.num_steps
    if batch_size % args.num_minibatches:
        fail(f"num_envs*num_steps = {batch_size} is not divisible by --num-minibatches "
             f"{args.num_minibatches}; pick a divisor of {batch_size}")
    if args.norm_adv and batch_size // args.num_minibatches < 2:
        fail("minibatches of 1 sample cannot normalize advantages; use fewer "
             "--num-minibatches or --no-norm-adv")
    if args.eval_checkpoint is None and args.total_timesteps < batch_size:
        fail(f"--total-timesteps {args.total_timesteps} is less than one rollout "
             f"(num_envs*num_steps = {batch_size}); raise it or shrink the rollout")
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


def evaluate(agent, env_id, episodes, seed, device, mask_source, video_folder=None):
    """Greedy returns of `episodes` episodes, one per environment of a vector env, all at
    once, with the masks unless --no-mask."""
    envs = make_vector_env(env_id, episodes, video_folder)
    space, num_actions = envs.single_observation_space, int(envs.single_action_space.n)
    obs, info = envs.reset(seed=seed)
    returns = np.full(episodes, np.nan)
    with torch.inference_mode():
        while np.isnan(returns).any():
            masks = read_masks(obs, info, mask_source, episodes, num_actions, "in evaluation")
            action = agent.greedy(torch.from_numpy(flatten_obs(space, obs)).to(device),
                                  torch.from_numpy(masks).to(device))
            obs, _, _, _, info = envs.step(action.cpu().numpy())
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


def save_checkpoint(path, agent, args):
    torch.save({"agent": agent.state_dict(), "args": asdict(args)}, path)


def load_checkpoint(path, env_id):
    """Load a model.pt safely (weights_only) and check it was made for env_id."""
    if not os.path.isfile(path):
        fail(f"checkpoint {path} does not exist")
    try:
        checkpoint = torch.load(path, map_location="cpu", weights_only=True)
        saved = checkpoint["args"]
        if "agent" not in checkpoint or not {"env_id", "hidden_size"} <= set(saved):
            raise KeyError("missing entries")
    except Exception as e:
        fail(f"checkpoint {path} is not a ppo_masked.py model.pt ({type(e).__name__}); "
             "make one with --save-model")
    if saved["env_id"] != env_id:
        fail(f"checkpoint {path} was made for {saved['env_id']}, not {env_id}; "
             f"pass --env-id {saved['env_id']}")
    return checkpoint


def finish(args, run, summary, agent, device, start, mask_source, trained=True):
    """Evaluate greedily, save the model if asked, write summary.json and the curve, and
    print the closing line. An interrupted run skips the evaluation."""
    recent = [e["episode_return"] for e in run.episodes[-20:]]
    summary["train_return_last20"] = float(np.mean(recent)) if recent else None
    summary["wall_time_s"] = round(time.time() - start, 3)
    if args.eval_episodes and not summary["interrupted"]:
        video_folder = os.path.join(run.path, "videos") if args.capture_video else None
        returns = evaluate(agent, args.env_id, args.eval_episodes, args.seed + 100_000, device,
                           mask_source, video_folder)
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
    """Train PPO with action masks (or, with --eval-checkpoint, evaluate a saved model),
    write the run folder and return the summary."""
    check_args(args)
    obs_space, num_actions, mask_source = check_env(args.env_id, args.mask_source, args.no_mask)
    checkpoint = None
    if args.eval_checkpoint is not None:
        checkpoint = load_checkpoint(args.eval_checkpoint, args.env_id)
        args = replace(args, hidden_size=checkpoint["args"]["hidden_size"])

    random.seed(args.seed)
    np.random.seed(args.seed)
    torch.manual_seed(args.seed)
    device = torch.device("cuda" if args.cuda and torch.cuda.is_available() else "cpu")
    if device.type == "cpu":
        torch.set_num_threads(1)  # a 64-unit MLP runs faster without the thread pool
    obs_dim = flat_size(obs_space)
    agent = Agent(obs_dim, num_actions, args.hidden_size).to(device)
    if checkpoint is not None:
        try:
            agent.load_state_dict(checkpoint["agent"])
        except (RuntimeError, KeyError, AttributeError) as e:
            fail(f"checkpoint {args.eval_checkpoint} does not fit {args.env_id}'s network: "
                 f"{str(e).splitlines()[0]}")
    run = RunWriter(args, device)
    print(f"{SCRIPT}: {args.env_id}, seed {args.seed}, device {device}, "
          f"masks {'off' if mask_source is None else 'from ' + mask_source}")
    summary = {"algorithm": "ppo_masked", "env_id": args.env_id, "seed": args.seed,
               "global_steps": 0, "wall_time_s": None, "train_return_last20": None,
               "eval_return_mean": None, "eval_return_std": None,
               "eval_episodes": args.eval_episodes, "solved_at_step": None,
               "solved_at_time_s": None, "interrupted": False}
    start = time.time()
    if checkpoint is not None:
        return finish(args, run, summary, agent, device, start, mask_source, trained=False)

    envs = make_vector_env(args.env_id, args.num_envs)
    if args.norm_reward:  # outside RecordEpisodeStatistics, which keeps the raw returns
        envs = gym.wrappers.vector.NormalizeReward(envs, gamma=args.gamma)
        envs = gym.wrappers.vector.ClipReward(envs, -10.0, 10.0)
    params = list(agent.parameters())
    optimizer = Adam(params, lr=args.learning_rate)
    buffer = MaskedRolloutBuffer(args.num_steps, args.num_envs, obs_dim, num_actions, device)
    batch_size = args.num_envs * args.num_steps
    minibatch_size = batch_size // args.num_minibatches
    num_updates = args.total_timesteps // batch_size
    recent_returns = deque(maxlen=args.stop_window)
    global_step, last_print, solved, mask_error = 0, start, False, None

    def masks_of(obs, info, where):
        masks = read_masks(obs, info, mask_source, args.num_envs, num_actions, where)
        return torch.from_numpy(masks).to(device)

    next_obs, info = envs.reset(seed=args.seed)
    next_masks = masks_of(next_obs, info, "after reset")
    next_obs = torch.from_numpy(flatten_obs(obs_space, next_obs)).to(device)
    try:
        for update in range(1, num_updates + 1):
            if args.anneal_lr:
                optimizer.lr = args.learning_rate * (1 - (update - 1) / num_updates)

            # Rollout: T steps of the N environments with the current policy.
            with torch.inference_mode():
                for step in range(args.num_steps):
                    buffer.obs[step] = next_obs
                    buffer.action_masks[step] = next_masks  # the mask this action obeys
                    action, logprob, value = agent.act(next_obs, next_masks)
                    obs, reward, terminated, truncated, info = envs.step(action.cpu().numpy())
                    global_step += args.num_envs
                    buffer.actions[step] = action
                    buffer.logprobs[step] = logprob
                    buffer.values[step] = value
                    buffer.rewards[step] = torch.from_numpy(reward)
                    buffer.terminated[step] = torch.from_numpy(terminated)
                    buffer.truncated[step] = torch.from_numpy(truncated)
                    ended = np.flatnonzero(truncated)
                    if len(ended):  # bootstrapped from V(final obs)
                        final = concatenate(obs_space, [info["final_obs"][i] for i in ended],
                                            create_empty_array(obs_space, len(ended)))
                        buffer.final_obs[step, ended] = torch.from_numpy(
                            flatten_obs(obs_space, final)).to(device)
                    next_masks = masks_of(obs, info, f"at step {global_step}")
                    next_obs = torch.from_numpy(flatten_obs(obs_space, obs)).to(device)
                    if "_episode" in info:
                        for i in np.flatnonzero(info["_episode"]):
                            recent_returns.append(info["episode"]["r"][i])
                            run.episode(global_step, time.time() - start, info["episode"]["r"][i],
                                        info["episode"]["l"][i])
                        if (args.stop_at_return is not None
                                and len(recent_returns) == args.stop_window
                                and np.mean(recent_returns) >= args.stop_at_return):
                            summary["solved_at_step"] = global_step
                            summary["solved_at_time_s"] = round(time.time() - start, 3)
                            solved = True
                            break
                buffer.last_obs.copy_(next_obs)
            if solved:
                break

            # Update: epochs of minibatch gradient steps on the rollout, each sample's
            # distribution rebuilt under the mask it was sampled with.
            with torch.no_grad():
                advantages, returns = buffer.gae(agent.get_value, args.gamma, args.gae_lambda)
            b_obs, b_masks = buffer.obs.flatten(0, 1), buffer.action_masks.flatten(0, 1)
            b_actions, b_logprobs = buffer.actions.flatten(), buffer.logprobs.flatten()
            b_values = buffer.values.flatten()
            b_advantages, b_returns = advantages.flatten(), returns.flatten()
            approx_kls, clipfracs = [], []
            for epoch in range(args.update_epochs):
                epoch_kls = []
                for idx in torch.randperm(batch_size, device=device).split(minibatch_size):
                    newlogprob, entropy, newvalue = agent.evaluate(b_obs[idx], b_actions[idx],
                                                                   b_masks[idx])
                    mb_advantages = b_advantages[idx]
                    if args.norm_adv:
                        mb_advantages = (mb_advantages - mb_advantages.mean()) / (mb_advantages.std() + 1e-8)
                    loss, pg_loss, v_loss, entropy = ppo_loss(
                        newlogprob, b_logprobs[idx], mb_advantages, newvalue, b_values[idx],
                        b_returns[idx], entropy, args.clip_coef, args.ent_coef, args.vf_coef,
                        args.clip_vloss)
                    optimizer.zero_grad()
                    loss.backward()
                    nn.utils.clip_grad_norm_(params, args.max_grad_norm)
                    optimizer.step()
                    with torch.no_grad():
                        logratio = newlogprob - b_logprobs[idx]
                        # k3 estimator of KL(old || new): mean((ratio - 1) - log ratio)
                        epoch_kls.append((torch.expm1(logratio) - logratio).mean())
                        clipfracs.append(((logratio.exp() - 1).abs() > args.clip_coef).float().mean())
                approx_kls += epoch_kls
                if args.target_kl is not None and torch.stack(epoch_kls).mean() > args.target_kl:
                    break

            if not math.isfinite(loss.item()):
                print(f"{SCRIPT}: the loss became NaN at step {global_step}; stopping "
                      "(try a lower --learning-rate)")
                summary["interrupted"] = True
                break
            var_returns = b_returns.var().item()
            explained_var = 1 - (b_returns - b_values).var().item() / var_returns if var_returns else math.nan
            now = time.time()
            sps = int(global_step / (now - start))
            run.update({"global_step": global_step, "wall_time": round(now - start, 4),
                        "sps": sps, "learning_rate": optimizer.lr, "policy_loss": pg_loss.item(),
                        "value_loss": v_loss.item(), "entropy": entropy.item(),
                        "approx_kl": torch.stack(approx_kls).mean().item(),
                        "clipfrac": torch.stack(clipfracs).mean().item(),
                        "explained_variance": explained_var, "epochs": epoch + 1,
                        "valid_actions": b_masks.sum(-1).float().mean().item()})
            if now - last_print >= 2.0 or update == num_updates:
                last_print = now
                recent = f"{np.mean(recent_returns):.1f}" if recent_returns else "n/a"
                print(f"step {global_step:>9} | sps {sps:>6} | return (last "
                      f"{args.stop_window}) {recent}")
    except KeyboardInterrupt:
        print(f"{SCRIPT}: interrupted; writing what the run has so far")
        summary["interrupted"] = True
    except UsageError as e:  # a mask the environment got wrong mid-run
        print(f"{SCRIPT}: stopped at step {global_step}: {e}")
        summary["interrupted"] = True
        mask_error = e
    finally:
        envs.close()
    summary["global_steps"] = global_step
    summary = finish(args, run, summary, agent, device, start, mask_source)
    if mask_error is not None:
        raise mask_error
    return summary


if __name__ == "__main__":
    try:
        main(tyro.cli(Args))
    except UsageError as e:
        print(f"{SCRIPT}: error: {e}", file=sys.stderr)
        sys.exit(2)

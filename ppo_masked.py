"""Proximal Policy Optimization with invalid-action masking, in one file.

Many environments say at each step which actions are allowed (a taxi cannot drive through
a wall). Invalid-action masking gives the others probability 0 by replacing their logits
with a large negative number, so the agent never wastes experience on them. The buffer
stores each step's mask and the update re-applies exactly that mask, so the policy gradient
is the one of the distribution that really sampled the action. The rest is PPO as in ppo.py.

Key equations (t indexes steps, m_t the 0/1 mask of allowed actions at s_t,
done_t = terminated_t or truncated_t):

    masked logits  l'_t(a) = l_t(a) if m_t(a) = 1, else -1e8
    policy         pi(a | s_t, m_t) = softmax(l'_t)(a)   (0 for every invalid action)
    entropy        H_t = - sum_{a : m_t(a) = 1} pi(a | s_t, m_t) log pi(a | s_t, m_t)
    ratio_t        = pi_theta(a_t | s_t, m_t) / pi_old(a_t | s_t, m_t)    (the same m_t)
    L_clip         = E[ min(ratio_t * A_t, clip(ratio_t, 1 - eps, 1 + eps) * A_t) ]
    GAE            delta_t = r_t + gamma * (1 - terminated_t) * V(s_{t+1}) - V(s_t)
                   A_t     = delta_t + gamma * lambda * (1 - done_t) * A_{t+1}
    loss           = -L_clip + c_v * 0.5 * (V(s_t) - R_t)^2 - c_e * H_t,   R_t = A_t + V(s_t)

The gradient of a masked logit is exactly 0, so the update never pushes on actions the
environment forbade. A time-limit truncation is not a termination: the step bootstraps
from the value of the true final observation (Gymnasium's info["final_obs"]).

The mask comes from info["action_mask"] (Gymnasium's Taxi) or from the "action_mask" entry
of a Dict observation (PettingZoo's classic games), whose other entries are flattened
(Discrete and MultiDiscrete one-hot) and concatenated in sorted key order. An environment
without masks is refused rather than trained without them by accident: --no-mask trains the
same agent with every action allowed (for comparison, or for such an environment).

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
    python ppo_masked.py --env-id my_envs:GridWorld-v0 --no-mask   # an id your module registers
    python ppo_masked.py --help

Writes runs/<env_id>__ppo_masked__<seed>__<unix_time>/ with config.json, episodes.csv,
updates.csv, learning_curve.png, summary.json, model.pt with --save-model, and with
--eval-every N evaluations.csv (and best_model.pt, the best evaluated model)
(CONTRIBUTING.md, "What a run writes").
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
    """a Gymnasium id (or module:id, which imports your module first) with Discrete actions
    and an action mask (without one, pass --no-mask)"""
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
    eval_every: int = 0
    """also evaluate greedily every N environment steps (0: only after training)"""
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
    """where the mask is: info["action_mask"], a Dict observation's "action_mask" entry, or
    auto (the entry if there is one, else info)"""
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


# ---------------------------------------------------------------------------------------
# The math
# ---------------------------------------------------------------------------------------
MASKED_LOGIT = -1e8
"""The logit of an invalid action: exp(-1e8 - logsumexp) is exactly 0 in float32, and unlike
-inf it keeps p log p = 0 * (-1e8) = 0 finite in any entropy formula, and in its gradient."""


def masked_categorical(logits, action_mask):
    """The masked policy (Huang & Ontañón 2020): logits [..., A], action_mask [..., A] bool.

        l'(a)   = l(a) where mask(a), else -1e8
        pi(a)   = exp(l'(a)) / sum_b exp(l'(b))       (0 for masked a; valid ones renormalize)
        H       = - sum_{a valid} pi(a) log pi(a)

    Returns a torch.distributions.Categorical: sample() never returns a masked action,
    log_prob() and entropy() are those of the masked distribution, and the gradient with
    respect to a masked logit is 0. An all-True mask gives the ordinary Categorical.
    """
    # validate_args=False: a non-finite loss is reported by the loop, not by a ValueError here
    return Categorical(logits=torch.where(action_mask, logits, MASKED_LOGIT), validate_args=False)


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


def normalize(advantages):
    """A' = (A - mean(A)) / (std(A) + 1e-8) over a minibatch [B] of advantages (--norm-adv)."""
    return (advantages - advantages.mean()) / (advantages.std() + 1e-8)


def ppo_loss(newlogprob, oldlogprob, advantages, newvalue, oldvalue, returns, entropy,
             clip_coef, ent_coef, vf_coef, clip_vloss=False):
    """The PPO loss to minimize on a minibatch of B samples (all inputs are [B] tensors).

        ratio  = exp(newlogprob - oldlogprob)
        L_pg   = mean( max(-A * ratio, -A * clip(ratio, 1 - eps, 1 + eps)) )
        L_v    = mean( 0.5 * (V - R)^2 ),  or with clip_vloss
                 mean( 0.5 * max((V - R)^2, (V_old + clip(V - V_old, -eps, eps) - R)^2) )
        loss   = L_pg - c_e * mean(entropy) + c_v * L_v

    A is used as given: the loop normalizes it per minibatch first unless --no-norm-adv.
    Returns (loss, L_pg, L_v, mean entropy).
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

        self.obs, self.final_obs = zeros(obs_dim), zeros(obs_dim)
        self.action_masks = zeros(num_actions, dtype=torch.bool)
        self.actions = zeros(dtype=torch.long)
        self.logprobs, self.rewards, self.values = zeros(), zeros(), zeros()
        self.terminated, self.truncated = zeros(dtype=torch.bool), zeros(dtype=torch.bool)
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
        """Log-probabilities, entropies and values of given actions under their stored masks."""
        dist = masked_categorical(self.actor(obs), action_mask)
        return dist.log_prob(actions), dist.entropy(), self.get_value(obs)

    def greedy(self, obs, action_mask):
        """The most likely valid action."""
        return torch.where(action_mask, self.actor(obs), MASKED_LOGIT).argmax(-1)


# ---------------------------------------------------------------------------------------
# Training
# ---------------------------------------------------------------------------------------
def train(args, envs, agent, log, mask_source, device):
    """PPO with masks: rollouts that keep each step's mask, GAE, minibatch updates under the
    stored masks, logging. Returns early at --stop-at-return or on a non-finite loss."""
    obs_space, num_actions = envs.single_observation_space, int(envs.single_action_space.n)
    optimizer = torch.optim.Adam(agent.parameters(), lr=args.learning_rate, eps=1e-5)
    buffer = MaskedRolloutBuffer(args.num_steps, args.num_envs, flat_size(obs_space),
                                 num_actions, device)
    batch_size = args.num_envs * args.num_steps
    minibatch_size = batch_size // args.num_minibatches
    num_updates = args.total_timesteps // batch_size

    obs, info = envs.reset(seed=args.seed)
    next_obs, next_masks = observe(envs, obs, info, mask_source, device, "after reset")
    global_step = 0
    for update in range(1, num_updates + 1):
        if args.anneal_lr:  # linearly from --learning-rate to 0 over the budget
            for group in optimizer.param_groups:
                group["lr"] = args.learning_rate * (1 - (update - 1) / num_updates)

        # Rollout: T steps of the N environments with the current policy. Row t keeps the
        # mask that a_t was sampled under, so that the update rebuilds that distribution.
        for step in range(args.num_steps):
            buffer.obs[step], buffer.action_masks[step] = next_obs, next_masks
            with torch.no_grad():
                action, logprob, value = agent.act(next_obs, next_masks)
            obs, reward, terminated, truncated, info = envs.step(action.cpu().numpy())
            global_step += args.num_envs
            buffer.actions[step], buffer.logprobs[step] = action, logprob
            buffer.values[step] = value
            buffer.rewards[step] = torch.from_numpy(reward)
            buffer.terminated[step] = torch.from_numpy(terminated)
            buffer.truncated[step] = torch.from_numpy(truncated)
            ended = np.flatnonzero(truncated)
            if len(ended):  # a time limit, not a termination: bootstrap from V(final obs)
                buffer.final_obs[step, ended] = final_observations(obs_space, info, ended, device)
            if log.step(global_step, info):  # True at --stop-at-return; evaluates at --eval-every
                return
            next_obs, next_masks = observe(envs, obs, info, mask_source, device,
                                           f"at step {global_step}")
        buffer.last_obs.copy_(next_obs)

        # Targets: GAE advantages and returns R = A + V, bootstrapped where the rollout ends.
        with torch.no_grad():
            advantages, returns = buffer.gae(agent.get_value, args.gamma, args.gae_lambda)
        b_obs, b_masks = buffer.obs.flatten(0, 1), buffer.action_masks.flatten(0, 1)
        b_actions, b_logprobs = buffer.actions.flatten(), buffer.logprobs.flatten()
        b_values, b_advantages, b_returns = (x.flatten() for x in (buffer.values, advantages,
                                                                    returns))

        # Update: epochs of minibatch gradient steps on the rollout.
        approx_kls, clipfracs = [], []
        for epoch in range(args.update_epochs):
            epoch_kls = []
            for idx in torch.randperm(batch_size, device=device).split(minibatch_size):
                # each sample's distribution under the mask stored with it, b_masks[idx]
                newlogprob, entropy, newvalue = agent.evaluate(b_obs[idx], b_actions[idx],
                                                               b_masks[idx])
                mb_advantages = normalize(b_advantages[idx]) if args.norm_adv else b_advantages[idx]
                loss, pg_loss, v_loss, entropy = ppo_loss(
                    newlogprob, b_logprobs[idx], mb_advantages, newvalue, b_values[idx],
                    b_returns[idx], entropy, args.clip_coef, args.ent_coef, args.vf_coef,
                    args.clip_vloss)
                optimizer.zero_grad()
                loss.backward()
                nn.utils.clip_grad_norm_(agent.parameters(), args.max_grad_norm)
                optimizer.step()
                # diagnostics: KL(old || new) ~ mean((ratio - 1) - log ratio), clip fraction
                logratio = (newlogprob - b_logprobs[idx]).detach()
                epoch_kls.append((torch.expm1(logratio) - logratio).mean())
                clipfracs.append(((logratio.exp() - 1).abs() > args.clip_coef).float().mean())
            approx_kls += epoch_kls
            if args.target_kl is not None and torch.stack(epoch_kls).mean() > args.target_kl:
                break

        if log.non_finite(loss.item(), global_step):  # says so; the run stops as interrupted
            return
        log.update(global_step, stats={
            "learning_rate": optimizer.param_groups[0]["lr"], "policy_loss": pg_loss.item(),
            "value_loss": v_loss.item(), "entropy": entropy.item(),
            "approx_kl": torch.stack(approx_kls).mean().item(),
            "clipfrac": torch.stack(clipfracs).mean().item(),
            "explained_variance": explained_variance(b_values, b_returns),
            "epochs": epoch + 1, "valid_actions": b_masks.sum(-1).float().mean().item()})


def main(args: Args) -> dict:
    """Train PPO with action masks (or, with --eval-checkpoint, evaluate a saved model),
    write the run folder and return the summary."""
    check_args(args)
    obs_space, num_actions, mask_source = check_env(args.env_id, args.mask_source, args.no_mask)
    checkpoint = None
    if args.eval_checkpoint is not None:  # the network gets the saved model's width
        checkpoint = load_checkpoint(args.eval_checkpoint, args.env_id)
        args = replace(args, hidden_size=checkpoint["args"]["hidden_size"])
    random.seed(args.seed)
    np.random.seed(args.seed)
    torch.manual_seed(args.seed)
    device = torch.device("cuda" if args.cuda and torch.cuda.is_available() else "cpu")
    torch.set_num_threads(1)  # one CPU thread: networks this small gain nothing from more
    agent = Agent(flat_size(obs_space), num_actions, args.hidden_size).to(device)
    if checkpoint is not None:
        load_weights(agent, checkpoint, args)
    log = TrainingLog(args, RunWriter(args, device), agent, device, mask_source)
    print(f"{SCRIPT}: {args.env_id}, seed {args.seed}, device {device}, "
          f"masks {'off' if mask_source is None else 'from ' + mask_source}")
    if checkpoint is not None:
        return finish(args, log, agent, device, mask_source, trained=False)

    envs = make_vector_env(args.env_id, args.num_envs,
                           reward_gamma=args.gamma if args.norm_reward else None)
    try:
        train(args, envs, agent, log, mask_source, device)
    except KeyboardInterrupt:
        print(f"{SCRIPT}: interrupted; writing what the run has so far")
        log.summary["interrupted"] = True
    except UsageError as e:  # a mask the environment got wrong mid-run: finish, then report
        print(f"{SCRIPT}: stopped at step {log.summary['global_steps']}: {e}")
        log.summary["interrupted"], log.error = True, e
    finally:
        envs.close()
    return finish(args, log, agent, device, mask_source)


# ---------------------------------------------------------------------------------------
# Plumbing: checks, run folder, evaluation, checkpoints (not needed to follow the algorithm)
# ---------------------------------------------------------------------------------------
class UsageError(Exception):
    """Bad input (CONTRIBUTING.md, "Bad input"): one line on stderr, exit status 2, before
    training (or, for a mask the environment gets wrong mid-run, as soon as it is seen)."""


def fail(message):
    raise UsageError(message)


def check_args(args):
    """Everything a user can get wrong in the flags, checked before any environment runs."""
    for name in ("total_timesteps", "num_envs", "num_steps", "num_minibatches",
                 "update_epochs", "hidden_size", "stop_window", "learning_rate", "clip_coef",
                 "max_grad_norm"):
        if not getattr(args, name) > 0:
            fail(f"--{name.replace('_', '-')} must be positive, got {getattr(args, name)}")
    for name in ("gamma", "gae_lambda"):
        if not 0.0 <= getattr(args, name) <= 1.0:
            fail(f"--{name.replace('_', '-')} must be in [0, 1], got {getattr(args, name)}")
    if args.eval_episodes < 0:
        fail(f"--eval-episodes must be 0 or more, got {args.eval_episodes}")
    if args.eval_every < 0:
        fail("--eval-every must be 0 (evaluate only after training) or more, got "
             f"{args.eval_every}")
    if args.eval_every and not args.eval_episodes:
        fail("--eval-every needs at least one evaluation episode; pass --eval-episodes 1 or more")
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


def check_env_id(env_id):
    """A registered id, or module:id (CONTRIBUTING.md, "Environments"): the module is
    imported, which registers its ids, as gym.make does."""
    module, _, name = env_id.rpartition(":")
    if module:
        try:
            importlib.import_module(module)
        except Exception as e:  # whatever the module raises while it is imported
            reason = f"{type(e).__name__}: {str(e).splitlines()[0]}" if str(e) else repr(e)
            fail(f"cannot import module {module!r} of --env-id {env_id} ({reason}); put it "
                 f"beside {SCRIPT} or on PYTHONPATH")
    if name not in gym.registry:
        close = difflib.get_close_matches(name, list(gym.registry), n=3, cutoff=0.5)
        hint = f"; did you mean {', '.join(close)}?" if close else "; see gymnasium.registry"
        where = f": module {module} registers no environment {name}" if module else ""
        fail(f"unknown environment id {env_id!r}{where}{hint}")


def check_env(env_id, mask_source, no_mask):
    """Build one environment to check its spaces and its mask after a reset; returns
    (observation space, number of actions, where the mask is: "obs", "info" or None)."""
    check_env_id(env_id)
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


FLAT_SPACES = (gym.spaces.Box, gym.spaces.Discrete, gym.spaces.MultiBinary,
               gym.spaces.MultiDiscrete)


def check_obs_space(space, env_id, path="observation"):
    """Refuse observation spaces that flatten_obs cannot turn into a vector."""
    if isinstance(space, gym.spaces.Dict):
        for key in obs_keys(space):
            check_obs_space(space[key], env_id, f"{path}[{key!r}]")
    elif not isinstance(space, FLAT_SPACES):
        fail(f"{env_id}'s {path} space is a {type(space).__name__}; ppo_masked.py handles Box, "
             "Discrete, MultiBinary, MultiDiscrete and Dicts of them")


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


def final_observations(space, info, ended, device):
    """The true last observations [len(ended), D] of the environments `ended`, flattened,
    on the device; with SAME_STEP autoreset they are in info["final_obs"]."""
    final = [info["final_obs"][i] for i in ended]
    final = concatenate(space, final, create_empty_array(space, len(ended)))
    return torch.from_numpy(flatten_obs(space, final)).to(device)


def observe(envs, obs, info, mask_source, device, where):
    """The network's input [N, D] and the action masks [N, A] of the observations `obs` (and
    `info`) that envs just returned, as tensors on the device; `where` names the step in an
    error about a mask."""
    space, num_actions = envs.single_observation_space, int(envs.single_action_space.n)
    masks = read_masks(obs, info, mask_source, envs.num_envs, num_actions, where)
    return torch.from_numpy(flatten_obs(space, obs)).to(device), torch.from_numpy(masks).to(device)


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


def make_vector_env(env_id, num_envs, reward_gamma=None, video_folder=None):
    """N copies of env_id in one synchronous vector environment, with SAME_STEP autoreset
    (the observation after an episode ends is the next episode's first; the true last one
    is in info["final_obs"]) and episode statistics recorded by Gymnasium's wrapper. With
    reward_gamma (--norm-reward), rewards are scaled by the running std of the discounted
    return and clipped to [-10, 10], outside the statistics, which keep the raw returns."""
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
    envs = gym.wrappers.vector.RecordEpisodeStatistics(envs)
    if reward_gamma is not None:
        envs = gym.wrappers.vector.NormalizeReward(envs, gamma=reward_gamma)
        envs = gym.wrappers.vector.ClipReward(envs, -10.0, 10.0)
    return envs


def explained_variance(values, returns):
    """1 - Var(R - V) / Var(R) over the rollout (NaN when the returns do not vary)."""
    var_returns = returns.var().item()
    return 1 - (returns - values).var().item() / var_returns if var_returns else math.nan


def evaluate(agent, env_id, episodes, seed, device, mask_source, video_folder=None):
    """Greedy returns of `episodes` episodes, one per environment of a vector env, all at
    once, with the masks unless --no-mask."""
    envs = make_vector_env(env_id, episodes, video_folder=video_folder)
    obs, info = envs.reset(seed=seed)
    returns = np.full(episodes, np.nan)
    with torch.no_grad():
        while np.isnan(returns).any():
            action = agent.greedy(*observe(envs, obs, info, mask_source, device, "in evaluation"))
            obs, _, _, _, info = envs.step(action.cpu().numpy())
            if "_episode" in info:
                first = info["_episode"] & np.isnan(returns)
                returns[first] = info["episode"]["r"][first]
    envs.close()
    return returns


class RunWriter:
    """The run folder (CONTRIBUTING.md, "What a run writes"): config.json at once, then CSV
    rows (flushed, so an interrupted run keeps them) and JSON files."""

    def __init__(self, args, device):
        env_name = args.env_id.replace("/", "-").replace(":", "-")
        base = os.path.join(args.output_dir, f"{env_name}__{args.exp_name}__{args.seed}__"
                                             f"{int(time.time())}")
        self.path, n, self.files = base, 1, {}
        while os.path.exists(self.path):  # another run started in the same second
            self.path, n = f"{base}-{n + 1}", n + 1
        try:
            os.makedirs(self.path)
        except OSError as e:
            fail(f"cannot create the run folder {self.path}: {e.strerror}")
        self.write_json("config.json", {**asdict(args), "device": str(device), "versions": {
            "torch": torch.__version__, "gymnasium": gym.__version__, "numpy": np.__version__,
            "python": sys.version.split()[0]}})

    def write_row(self, filename, row):
        if filename not in self.files:
            self.files[filename] = open(os.path.join(self.path, filename), "w", newline="")
        csv.writer(self.files[filename]).writerow(row)
        self.files[filename].flush()

    def write_json(self, filename, data):
        with open(os.path.join(self.path, filename), "w") as f:
            json.dump(data, f, indent=2)


class TrainingLog:
    """What train() reports: finished episodes (episodes.csv, the --stop-at-return rule), a
    progress line every 2 seconds, the greedy evaluations of --eval-every (evaluations.csv,
    best_model.pt), updates (updates.csv) and the summary that finish() completes."""

    def __init__(self, args, run, agent, device, mask_source):
        self.args, self.run, self.start, self.last_print = args, run, time.time(), time.time()
        self.agent, self.device, self.mask_source = agent, device, mask_source
        self.returns, self.recent = [], deque(maxlen=args.stop_window)  # (step, return)
        self.evaluations = []  # (step, mean, std) of each --eval-every evaluation
        self.error = None  # a UsageError that stopped training, raised once the run is written
        run.write_row("episodes.csv", ["global_step", "wall_time", "episode_return",
                                       "episode_length"])
        self.summary = {"algorithm": "ppo_masked", "env_id": args.env_id, "seed": args.seed,
                        "global_steps": 0, "wall_time_s": None, "train_return_last20": None,
                        "eval_return_mean": None, "eval_return_std": None,
                        "eval_episodes": args.eval_episodes, "solved_at_step": None,
                        "solved_at_time_s": None, "interrupted": False}

    def step(self, global_step, info):
        """After each vector step: write the episodes that ended at it, run a greedy
        evaluation each time global_step crosses a multiple of --eval-every, print the
        progress line every 2 seconds; True once the mean of the last --stop-window returns
        reaches --stop-at-return (solved at this step)."""
        every, previous = self.args.eval_every, self.summary["global_steps"]
        self.summary["global_steps"], wall_time = global_step, time.time() - self.start
        if every and global_step // every > previous // every:
            self.evaluation(global_step, wall_time)
        if time.time() - self.last_print >= 2.0:
            self.last_print = time.time()
            print(progress_line(global_step, self.args.total_timesteps, time.time() - self.start,
                                np.mean(self.recent) if self.recent else None,
                                self.args.stop_window))
        for i in np.flatnonzero(info.get("_episode", [])):
            self.returns.append((global_step, float(info["episode"]["r"][i])))
            self.recent.append(self.returns[-1][1])
            self.run.write_row("episodes.csv", [global_step, round(wall_time, 4),
                                                self.returns[-1][1], int(info["episode"]["l"][i])])
        goal = self.args.stop_at_return
        if (goal is None or "_episode" not in info or len(self.recent) < self.recent.maxlen
                or np.mean(self.recent) < goal):
            return False
        self.summary.update(solved_at_step=global_step, solved_at_time_s=round(wall_time, 3))
        return True

    def evaluation(self, global_step, wall_time):
        """Evaluate the policy as it is now on environments of its own (the training ones
        and the random streams are untouched: the greedy action draws no random number),
        append the row to evaluations.csv and, with --save-model, keep the best model so far
        (the first, on a tie) as best_model.pt."""
        returns = evaluate(self.agent, self.args.env_id, self.args.eval_episodes,
                           self.args.seed + 100_000, self.device, self.mask_source)
        mean, std = float(returns.mean()), float(returns.std())
        if not self.evaluations:
            self.run.write_row("evaluations.csv", ["global_step", "wall_time",
                                                   "eval_return_mean", "eval_return_std"])
        self.run.write_row("evaluations.csv", [global_step, round(wall_time, 4), mean, std])
        if self.args.save_model and mean > max((m for _, m, _ in self.evaluations),
                                               default=-math.inf):
            save_checkpoint(os.path.join(self.run.path, "best_model.pt"), self.agent, self.args)
        self.evaluations.append((global_step, mean, std))

    def update(self, global_step, stats):
        """A row of updates.csv (the first row's keys are its header)."""
        now = time.time()
        row = {"global_step": global_step, "wall_time": round(now - self.start, 4),
               "sps": int(global_step / (now - self.start)), **stats}
        if "updates.csv" not in self.run.files:
            self.run.write_row("updates.csv", list(row))
        self.run.write_row("updates.csv", list(row.values()))

    def non_finite(self, loss, global_step):
        """True, after saying so and marking the run interrupted, when the loss is NaN or inf."""
        if math.isfinite(loss):
            return False
        print(f"{SCRIPT}: the loss became non-finite (NaN or infinite) at step "
              f"{global_step}; stopping (try a lower --learning-rate)")
        self.summary["interrupted"] = True
        return True


def progress_line(global_step, total_steps, elapsed, recent_return, window=20):
    """The console's progress: the step out of the budget, the percentage, steps per second,
    the time left at that speed (h:mm:ss) and the mean of the last `window` training returns
    (--stop-window).

        sps = global_step / elapsed,   ETA = max(total_steps - global_step, 0) / sps
    """
    sps = global_step / elapsed
    minutes, seconds = divmod(round(max(total_steps - global_step, 0) / sps), 60)
    recent = "n/a" if recent_return is None else f"{recent_return:.1f}"
    return (f"step {global_step:,}/{total_steps:,} ({100 * global_step / total_steps:.0f}%) | "
            f"{sps:,.0f} sps | ETA {minutes // 60}:{minutes % 60:02}:{seconds:02} | "
            f"return (last {window}) {recent}")


def plot_learning_curve(log, title):
    """learning_curve.png: episode return against environment steps, raw points faded, a
    moving average of 20 episodes on top; the greedy evaluations (step, mean, std) of
    --eval-every as a second series, the mean with the std as error bars. Returns its path."""
    steps, returns = np.array(log.returns).reshape(-1, 2).T
    fig = Figure(figsize=(7, 4), dpi=100)
    ax = fig.add_subplot()
    ax.scatter(steps, returns, s=6, alpha=0.25, color="tab:blue", label="episode return")
    if len(returns):
        window = min(20, len(returns))
        smooth = np.convolve(returns, np.ones(window) / window, mode="valid")
        ax.plot(steps[window - 1:], smooth, color="tab:blue", lw=2, label=f"mean of last {window}")
    if log.evaluations:
        eval_steps, means, stds = zip(*log.evaluations)
        ax.errorbar(eval_steps, means, yerr=stds, color="tab:orange", marker="o", ms=4, capsize=3,
                    label="greedy evaluation (mean, std)")
    if len(returns) or log.evaluations:
        ax.legend(loc="lower right")
    ax.set(xlabel="environment steps", ylabel="episode return", title=title)
    ax.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(os.path.join(log.run.path, "learning_curve.png"))
    return os.path.join(log.run.path, "learning_curve.png")


def save_checkpoint(path, agent, args):
    torch.save({"agent": agent.state_dict(), "args": asdict(args)}, path)


def load_checkpoint(path, env_id):
    """Load a model.pt safely (weights_only) and check it was made for env_id (the ids
    compared as given, module:id included)."""
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


def load_weights(agent, checkpoint, args):
    try:
        agent.load_state_dict(checkpoint["agent"])
    except (RuntimeError, KeyError, AttributeError) as e:
        fail(f"checkpoint {args.eval_checkpoint} does not fit {args.env_id}'s network: "
             f"{str(e).splitlines()[0]}")


def finish(args, log, agent, device, mask_source, trained=True):
    """Evaluate greedily (not after an interruption), save the model if asked, write
    summary.json and the curve, print the closing line; returns the summary, or raises the
    error that stopped the run (a bad mask mid-run)."""
    summary, run = log.summary, log.run
    recent = [episode_return for _, episode_return in log.returns[-20:]]
    summary["train_return_last20"] = float(np.mean(recent)) if recent else None
    summary["wall_time_s"] = round(time.time() - log.start, 3)
    if args.eval_episodes and not summary["interrupted"]:
        video_folder = os.path.join(run.path, "videos") if args.capture_video else None
        returns = evaluate(agent, args.env_id, args.eval_episodes, args.seed + 100_000, device,
                           mask_source, video_folder)
        summary["eval_return_mean"] = float(returns.mean())
        summary["eval_return_std"] = float(returns.std())
    if args.save_model and trained:
        save_checkpoint(os.path.join(run.path, "model.pt"), agent, args)
    for f in run.files.values():
        f.close()
    run.write_json("summary.json", summary)
    closing = f"{SCRIPT}: run folder {run.path}"
    for key in ("global_steps", "train_return_last20", "eval_return_mean", "solved_at_step"):
        value = summary[key]
        closing += f" | {key} {value:.2f}" if isinstance(value, float) else f" | {key} {value}"
    if trained:
        title = f"{SCRIPT} on {args.env_id}, seed {args.seed}"
        closing += f" | learning curve {plot_learning_curve(log, title)}"
    print(closing)
    if log.error is not None:
        raise log.error
    return summary


if __name__ == "__main__":
    try:
        main(tyro.cli(Args))
    except UsageError as e:
        print(f"{SCRIPT}: error: {e}", file=sys.stderr)
        sys.exit(2)

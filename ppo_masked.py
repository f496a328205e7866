# From plainrl (MIT licence, (c) 2026 the plainrl authors): keep this line in a copy.
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

with eps --clip-coef, gamma --gamma, lambda --gae-lambda, c_v --vf-coef, c_e --ent-coef.
The gradient of a masked logit is exactly 0, so the update never pushes on actions the
environment forbade.

The mask comes from info["action_mask"] (Gymnasium's Taxi) or a Dict observation's "action_mask"
entry (PettingZoo's classic games; flatten_obs joins the rest). An environment without masks is
refused, not trained without them by accident; --no-mask allows every action.

Papers: Huang & Ontañón 2020 (invalid action masking, arXiv:2006.14171; FLAIRS-35, 2022);
Schulman et al. 2017 (PPO, arXiv:1707.06347); Schulman et al. 2016 (GAE, ICLR); Pardo et al.
2018 (Time Limits in RL, ICML).

Run (your own environment: the docs' "Running it"):
    python ppo_masked.py --env-id Taxi-v4
    python ppo_masked.py --env-id Taxi-v4 --no-mask --total-timesteps 400000

Writes runs/<env_id>__ppo_masked__<seed>__<unix_time>/: config.json, episodes.csv, updates.csv,
summary.json, TensorBoard's events (--track: W&B too), model.pt (--save-model), evaluations.csv
and best_model.pt (--eval-every N); python plot.py <run folder> draws its learning curve.
"""

# ---------------------------------------------------------------------------------------
# Imports
# ---------------------------------------------------------------------------------------
import math
import os
from dataclasses import dataclass
from typing import Literal, Optional

import gymnasium as gym
import numpy as np
import torch
import torch.nn as nn
import tyro
from gymnasium.vector.utils import iterate
from torch.distributions import Categorical

SCRIPT = os.path.basename(__file__)


# ---------------------------------------------------------------------------------------
# Flags
# ---------------------------------------------------------------------------------------
@dataclass
class Args:
    # The run folder's flags (--output-dir, --save-model, --eval-checkpoint, --track, ...)
    # come after these: every script shares them, declared once in RunFlags below the banner.
    # module:id imports your module first.
    env_id: str = "Taxi-v4"
    """a Gymnasium id (or module:id) with Discrete actions and an action mask (else: --no-mask)"""
    seed: int = 1
    """seeds Python, NumPy, torch and the environments"""
    total_timesteps: int = 200_000
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
    """stop once the mean of the last --stop-window training episode returns reaches this"""
    stop_window: int = 20
    """how many of the latest training episodes --stop-at-return averages"""

    # No presets: built for discrete actions with invalid ones masked; its settings below.
    # Masking
    # info: info["action_mask"]; obs: a Dict observation's "action_mask" entry; auto: the entry if
    # there is one, else info.
    mask_source: Literal["auto", "info", "obs"] = "auto"
    """where the mask is: info["action_mask"], obs["action_mask"], or auto (obs, else info)"""
    no_mask: tyro.conf.FlagCreatePairsOff[bool] = False  # one flag, --no-mask (no --no-no-mask)
    """train and evaluate without masks (every action allowed), for comparison"""

    # Algorithm
    num_envs: int = 32
    """N: parallel environments (synchronous vector environment)"""
    num_steps: int = 64
    """T: steps per environment in each rollout; the batch is N*T"""
    learning_rate: float = 7e-3
    """Adam learning rate (3e-4 in the PPO paper's MuJoCo runs, 2.5e-4 on Atari)"""
    anneal_lr: bool = True
    """decay the learning rate linearly to 0 over the budget (so the budget changes the schedule)"""
    gamma: float = 0.97
    """discount factor (0.99 in the PPO paper)"""
    gae_lambda: float = 0.95
    """lambda of GAE (0.95 in the PPO paper; 0.92-0.99 in the GAE paper's best runs)"""
    num_minibatches: int = 4
    """minibatches per epoch; must divide N*T"""
    update_epochs: int = 4
    """epochs over each rollout (3-10 in the PPO paper)"""
    norm_adv: bool = True
    """normalize advantages within each minibatch"""
    clip_coef: float = 0.2
    """epsilon of the clipped surrogate (0.1-0.3 in the PPO paper's experiments)"""
    clip_vloss: bool = False
    """clip the value loss around the rollout's value estimates, as in the PPO baselines"""
    ent_coef: float = 0.05
    """entropy bonus coefficient c_e (0 on MuJoCo, 0.01 on Atari in the PPO paper)"""
    vf_coef: float = 0.5
    """value loss coefficient c_v (0.5-1 in the PPO paper)"""
    max_grad_norm: float = 0.5
    """gradient clipping: the largest global norm of the gradient"""
    target_kl: Optional[float] = None
    """stop an update's remaining epochs once the mean approx KL of an epoch exceeds this"""
    norm_reward: bool = False
    """divide rewards by the running std of the discounted return, then clip to [-10, 10]"""
    hidden_size: int = 64
    """width of the two hidden layers of the actor and of the critic"""


# ---------------------------------------------------------------------------------------
# The math
# ---------------------------------------------------------------------------------------
# The logit of an invalid action: exp(-1e8 - logsumexp) is exactly 0 in float32, and unlike
# -inf it keeps p log p = 0 * (-1e8) = 0 finite in any entropy formula, and in its gradient.
MASKED_LOGIT = -1e8


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


def ppo_loss(newlogprob, oldlogprob, advantages, newvalue, oldvalue, returns, entropy,
             clip_coef, ent_coef, vf_coef, clip_vloss=False):
    """The PPO loss to minimize on a minibatch of B samples (all inputs are [B] tensors).

        ratio  = exp(newlogprob - oldlogprob)
        L_pg   = mean( max(-A * ratio, -A * clip(ratio, 1 - eps, 1 + eps)) )
        L_v    = mean( 0.5 * (V - R)^2 ),  or with clip_vloss
                 mean( 0.5 * max((V - R)^2, (V_old + clip(V - V_old, -eps, eps) - R)^2) )
        loss   = L_pg - c_e * mean(entropy) + c_v * L_v

    Returns (loss, L_pg, L_v, mean entropy). The advantages are used as given: the
    training loop normalizes them within the minibatch first, unless --no-norm-adv.
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


def explained_variance(values, returns):
    """1 - Var[R - V] / Var[R]: 1 when the critic predicts the targets, 0 or less when it
    does no better than their mean (NaN when the targets do not vary)."""
    var_returns = returns.var().item()
    return 1 - (returns - values).var().item() / var_returns if var_returns else math.nan


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
# What the agent sees and sends: flattened observations, their masks, normalized rewards
# ---------------------------------------------------------------------------------------
def make_vector_env(env_id, num_envs, reward_gamma=None, video_folder=None):
    """N copies of env_id in one synchronous vector environment, with SAME_STEP autoreset
    (the observation after an episode ends is the next episode's first; the true last one
    is in info["final_obs"]) and episode statistics recorded by Gymnasium's wrapper. With
    reward_gamma (--norm-reward), rewards are divided by the running std of the return
    discounted by it (Gymnasium's NormalizeReward) and clipped to [-10, 10], after the
    statistics wrapper, so that episodes.csv keeps the raw returns."""
    def make(i):
        return make_recorded(env_id, video_folder, f"eval-{i}")  # with a video: its first episode

    envs = gym.vector.SyncVectorEnv([lambda i=i: make(i) for i in range(num_envs)],
                                    autoreset_mode=gym.vector.AutoresetMode.SAME_STEP)
    envs = gym.wrappers.vector.RecordEpisodeStatistics(envs)
    if reward_gamma is not None:
        envs = gym.wrappers.vector.NormalizeReward(envs, gamma=reward_gamma)
        envs = gym.wrappers.vector.ClipReward(envs, -10.0, 10.0)
    return envs


def observe(envs, obs, info, mask_source, device, where):
    """The network's input [N, D] and the action masks [N, A] of the observations `obs` (and
    `info`) that envs just returned, as tensors on the device; `where` names the step in an
    error about a mask."""
    space, num_actions = envs.single_observation_space, int(envs.single_action_space.n)
    flat = np.stack([flatten_obs(space, o) for o in iterate(envs.observation_space, obs)])
    masks = read_masks(obs, info, mask_source, envs.num_envs, num_actions, where)
    return torch.from_numpy(flat).to(device), torch.from_numpy(masks).to(device)


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
                 "pass --mask-source obs if the mask is an 'action_mask' entry of a Dict "
                 "observation, or train without masks with --no-mask")
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


def obs_keys(space):
    """The entries of a Dict observation the network sees: all but "action_mask", in the
    sorted order of their keys (fixed, whatever order the environment builds them in)."""
    return sorted(key for key in space.keys() if key != "action_mask")


def flatten_obs(space, obs):
    """One observation of `space` as a float32 vector [D] for the network, by Gymnasium's
    flatten: Box and MultiBinary flattened, Discrete(n, start) one-hot of obs - start (n
    wide), MultiDiscrete(nvec) one one-hot per component, concatenated (sum(nvec) wide);
    a Dict's entries but "action_mask" flattened so, concatenated in obs_keys order."""
    if isinstance(space, gym.spaces.Dict):
        return np.concatenate([flatten_obs(space[key], obs[key]) for key in obs_keys(space)])
    return gym.spaces.flatten(space, obs).astype(np.float32)


def flat_size(space):
    """D, the width of flatten_obs's vectors for `space` (a ValueError where Gymnasium
    cannot flatten it: Graph and Sequence spaces)."""
    if isinstance(space, gym.spaces.Dict):
        return sum(flat_size(space[key]) for key in obs_keys(space))
    return gym.spaces.flatdim(space)


# ---------------------------------------------------------------------------------------
# Training
# ---------------------------------------------------------------------------------------
def train(args, agent, envs, run, mask_source, device):
    """PPO with masks: rollouts that keep each step's mask, GAE, minibatch updates under the
    stored masks, log; until the budget, --stop-at-return or a non-finite loss.
    run (Run, below the banner) writes the run folder: step(n) prints progress and
    evaluates, episode/update add a CSV row, returns holds the training returns, non_finite
    says when to stop."""
    obs_space, num_actions = envs.single_observation_space, int(envs.single_action_space.n)
    # eps = 1e-5 as in the PPO authors' baselines (torch's default is 1e-8)
    optimizer = torch.optim.Adam(agent.parameters(), lr=args.learning_rate, eps=1e-5)
    buffer = MaskedRolloutBuffer(args.num_steps, args.num_envs, flat_size(obs_space),
                                 num_actions, device)
    batch_size = args.num_envs * args.num_steps
    minibatch_size = batch_size // args.num_minibatches
    num_iterations = args.total_timesteps // batch_size
    global_step = 0
    obs, info = envs.reset(seed=args.seed)
    next_obs, next_masks = observe(envs, obs, info, mask_source, device, "after reset")
    for iteration in range(1, num_iterations + 1):
        if args.anneal_lr:  # linearly from --learning-rate at the start to 0 at the end
            for group in optimizer.param_groups:
                group["lr"] = args.learning_rate * (1 - (iteration - 1) / num_iterations)

        # Rollout: T steps of the N environments with the current policy. Row t keeps the
        # mask that a_t was sampled under, so that the update rebuilds that distribution.
        for step in range(args.num_steps):
            buffer.obs[step], buffer.action_masks[step] = next_obs, next_masks
            with torch.no_grad():
                action, logprob, value = agent.act(next_obs, next_masks)
            buffer.actions[step], buffer.logprobs[step] = action, logprob
            buffer.values[step] = value
            obs, reward, terminated, truncated, info = envs.step(action.cpu().numpy())
            global_step += args.num_envs
            run.step(global_step, info)  # episodes.csv, evaluation, progress (--stop-window's
            # own stop below: the goal's window may differ)
            # With --norm-reward the reward arrives divided by the running std of the
            # discounted return and clipped to [-10, 10] (make_vector_env).
            buffer.rewards[step] = torch.from_numpy(reward).to(device)
            buffer.terminated[step] = torch.from_numpy(terminated).to(device)
            buffer.truncated[step] = torch.from_numpy(truncated).to(device)
            # A time limit is not a termination: the step bootstraps from the value of the
            # true final observation, flattened as every observation is.
            for i in np.flatnonzero(truncated):
                final_obs = flatten_obs(obs_space, info["final_obs"][i])
                buffer.final_obs[step, i] = torch.from_numpy(final_obs).to(device)
            recent = run.returns[-args.stop_window:]  # (summary.json's solved_at_step: 20)
            if (args.stop_at_return is not None and len(recent) == args.stop_window
                    and np.mean(recent) >= args.stop_at_return):
                return
            # The next observations, flattened, and the masks in force for them (with
            # SAME_STEP autoreset, the next episode's first mask where an episode ended).
            next_obs, next_masks = observe(envs, obs, info, mask_source, device,
                                           f"at step {global_step}")
        buffer.last_obs.copy_(next_obs)

        # Targets: GAE advantages and returns R = A + V, bootstrapped where the rollout ends.
        with torch.no_grad():
            advantages, returns = buffer.gae(agent.get_value, args.gamma, args.gae_lambda)
        b_obs, b_masks = buffer.obs.flatten(0, 1), buffer.action_masks.flatten(0, 1)
        b_actions, b_logprobs = buffer.actions.flatten(), buffer.logprobs.flatten()
        b_values = buffer.values.flatten()
        b_advantages, b_returns = advantages.flatten(), returns.flatten()

        # Update: epochs of minibatch gradient steps on the rollout.
        approx_kls, clipfracs = [], []
        for epoch in range(args.update_epochs):
            for idx in torch.randperm(batch_size, device=device).split(minibatch_size):
                # each sample's distribution under the mask stored with it, b_masks[idx]
                newlogprob, entropy, newvalue = agent.evaluate(b_obs[idx], b_actions[idx],
                                                               b_masks[idx])
                adv = b_advantages[idx]  # normalized within the minibatch unless --no-norm-adv
                adv = (adv - adv.mean()) / (adv.std() + 1e-8) if args.norm_adv else adv
                loss, pg_loss, v_loss, entropy = ppo_loss(
                    newlogprob=newlogprob, oldlogprob=b_logprobs[idx], advantages=adv,
                    newvalue=newvalue, oldvalue=b_values[idx], returns=b_returns[idx],
                    entropy=entropy, clip_coef=args.clip_coef, ent_coef=args.ent_coef,
                    vf_coef=args.vf_coef, clip_vloss=args.clip_vloss)
                optimizer.zero_grad()
                loss.backward()
                nn.utils.clip_grad_norm_(agent.parameters(), args.max_grad_norm)
                optimizer.step()
                # Diagnostics: k3 estimate of KL(old || new), mean(ratio - 1 - log ratio); clipfrac
                logratio = (newlogprob - b_logprobs[idx]).detach()
                ratio = logratio.exp()
                approx_kls.append((ratio - 1 - logratio).mean().item())
                clipfracs.append(((ratio - 1).abs() > args.clip_coef).float().mean().item())
            epoch_kl = np.mean(approx_kls[-args.num_minibatches:])
            if args.target_kl is not None and epoch_kl > args.target_kl:
                break

        if run.non_finite(loss.item(), global_step):  # says so; the run stops as interrupted
            return
        run.update(global_step, learning_rate=optimizer.param_groups[0]["lr"],
                   policy_loss=pg_loss.item(), value_loss=v_loss.item(), entropy=entropy.item(),
                   approx_kl=np.mean(approx_kls), clipfrac=np.mean(clipfracs),
                   explained_variance=explained_variance(b_values, b_returns), epochs=epoch + 1,
                   valid_actions=b_masks.sum(-1).float().mean().item())


def main(args: Args) -> dict:
    """Train PPO with action masks (or evaluate an --eval-checkpoint), write the run folder,
    return the summary. Ctrl-C stops training; the run folder is written, then
    KeyboardInterrupt goes on up. A mask the environment gets wrong mid-run ends the run
    with its one line and exit status 2, as bad input."""
    # prepare (below the banner): --eval-checkpoint's model read, the environment made and
    # checked, every flag checked (a mistake: one line, exit status 2), the seeds set, the
    # device chosen.
    args, (obs_space, num_actions, mask_source), checkpoint, device = prepare(args)

    # Set up: the agent, the run folder.
    agent = Agent(flat_size(obs_space), num_actions, args.hidden_size).to(device)
    agent.mask_source = mask_source  # where greedy_policy reads the masks, as train does
    models = {"agent": agent}  # what model.pt holds
    run = Run(args, device, models, checkpoint, rollout_steps=args.num_envs * args.num_steps,
              note=", masks " + (f"from {mask_source}" if mask_source else "off (--no-mask)"))

    # Train (unless evaluating a checkpoint), then finish: evaluate, save, write, plot.
    envs = None if checkpoint else make_vector_env(
        args.env_id, args.num_envs, reward_gamma=args.gamma if args.norm_reward else None)
    return run.train(lambda: train(args, agent, envs, run, mask_source, device), envs)


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
# What the plumbing asks of ppo_masked.py: its own checks, its greedy policy, its model's flags
# ---------------------------------------------------------------------------------------
def check_flags(args):
    """ppo_masked.py's own flags, checked by prepare before training."""
    check_range(args, positive=["num_envs", "num_steps", "num_minibatches", "update_epochs",
                                "hidden_size", "stop_window", "learning_rate", "clip_coef",
                                "max_grad_norm"],
                fraction=["gamma", "gae_lambda"])
    batch_size = args.num_envs * args.num_steps
    if batch_size % args.num_minibatches:
        fail(f"num_envs*num_steps = {batch_size} is not divisible by --num-minibatches "
             f"{args.num_minibatches}; pick a divisor of {batch_size}")
    if args.norm_adv and batch_size // args.num_minibatches < 2:
        fail("minibatches of 1 sample cannot normalize advantages; use fewer "
             "--num-minibatches or --no-norm-adv")
    if args.eval_checkpoint is None and 0 < args.total_timesteps < batch_size:
        fail(f"--total-timesteps {args.total_timesteps} is less than one rollout "
             f"(num_envs*num_steps = {batch_size}); raise it or shrink the rollout")


def check_spaces(args, obs_space, action_space):
    """Whether ppo_masked.py handles the spaces, and where the mask is: a vector of one
    environment is reset (seed 0) and its first mask checked. Returns (observation space,
    number of actions, the mask's source: "obs", "info" or None with --no-mask).
    --mask-source auto takes a Dict observation's "action_mask" entry where there is one,
    else info["action_mask"]."""
    env_id = args.env_id
    if not isinstance(action_space, gym.spaces.Discrete):
        fail(f"{env_id} has a {type(action_space).__name__} action space; ppo_masked.py "
             "masks Discrete ones (for Box actions without masks see ppo.py)")
    if not obs_space.is_np_flattenable:  # Graph and Sequence spaces have no fixed size
        fail(f"{env_id}'s observation space is a {type(obs_space).__name__} of no fixed size; "
             "ppo_masked.py needs Box, Discrete, MultiBinary, MultiDiscrete, Dicts and Tuples")
    if flat_size(obs_space) == 0:
        fail(f"{env_id}'s observation has nothing but the action mask to feed the network")
    if args.no_mask:
        return obs_space, int(action_space.n), None
    has_entry = isinstance(obs_space, gym.spaces.Dict) and "action_mask" in obs_space.keys()
    if args.mask_source == "obs" and not has_entry:
        fail(f"{env_id} has no 'action_mask' entry in its observation (a "
             f"{type(obs_space).__name__}); pass --mask-source info, or train with --no-mask")
    source = "obs" if has_entry and args.mask_source != "info" else "info"
    envs = make_vector_env(env_id, 1)
    obs, info = envs.reset(seed=0)
    envs.close()
    read_masks(obs, info, source, 1, int(action_space.n), f"after reset of {env_id}")
    return obs_space, int(action_space.n), source


def greedy_policy(models, envs):
    """The evaluation's policy, act(obs, info) -> actions: the most likely action among those
    the mask allows (every action with --no-mask), the mask read where training reads it."""
    agent = models["agent"]
    device = next(agent.parameters()).device

    @torch.no_grad()
    def act(obs, info):
        observed = observe(envs, obs, info, agent.mask_source, device, "in evaluation")
        return agent.greedy(*observed).cpu().numpy()
    return act


# What a run is judged on, by environment id (its benchmark task in benchmark.py, its README
# row): (threshold, window of training episodes, "train": the last-window mean at the end,
# or "eval": the final greedy evaluation). Another id: its reward_threshold over 20, "train".
GOALS = {"Taxi-v4": (7.5, 100, "train", 200_000)}
MODEL_FLAGS = ("hidden_size",)  # a checkpoint's network is built by these


if __name__ == "__main__":
    cli()

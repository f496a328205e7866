"""PPO with a recurrent (LSTM) policy, in one file: what changes when the policy has memory.

A memoryless policy pi(a | o_t) fails where the observation o_t does not tell the whole
state: CartPole without its two velocities, Pendulum without its angular velocity. An LSTM
agent carries a hidden state (h_t, c_t) that summarizes the episode so far,

    (h_t, c_t) = LSTM(enc(o_t), (h_{t-1}, c_{t-1})),   (h, c) = 0 where an episode starts
    pi(a_t | h_t),   V(h_t)

and PPO trains it exactly as ppo.py trains an MLP (clipped surrogate, GAE, value loss,
entropy bonus), with three changes:

1. The rollout buffer also stores, per step, the episode-start flag and the state (h, c)
   the agent acted with at that step.
2. Minibatches are sequences, not single steps: the rollout of each environment is cut
   into chunks of L = --data-chunk-length steps (L = T, the whole rollout, is HARL's
   "naive" generator), and the update re-runs the LSTM over each chunk from the state
   stored at the chunk's first step, resetting it to zeros at every episode start inside
   the chunk. The chunk's outputs then go into PPO's loss step by step.
3. A time-limit truncation at step t bootstraps from V(final observation) computed with
   the hidden state the episode had reached (the state after step t); a termination does
   not bootstrap.

Key equations (t indexes steps, done_t = terminated_t or truncated_t):

    ratio_t = pi_theta(a_t | h_t) / pi_old(a_t | h_t)
    L_clip  = E[ min(ratio_t A_t, clip(ratio_t, 1 - eps, 1 + eps) A_t) ]
    delta_t = r_t + gamma (1 - terminated_t) V(s_{t+1}) - V(s_t)
    A_t     = delta_t + gamma lambda (1 - done_t) A_{t+1},   R_t = A_t + V(s_t)
    loss    = -L_clip + c_v 0.5 (V(s_t) - R_t)^2 - c_e entropy

`--hide-obs 1 3` drops those observation dimensions (CartPole's two velocities), which turns
a Markov task into one that needs memory.

Papers:
    Schulman et al. 2017, "Proximal Policy Optimization Algorithms", arXiv:1707.06347
    Schulman et al. 2016, "High-Dimensional Continuous Control Using Generalized
        Advantage Estimation", ICLR 2016
    Hochreiter & Schmidhuber 1997, "Long Short-Term Memory", Neural Computation
    Zhong et al. 2024, "Heterogeneous-Agent Reinforcement Learning" (HARL), JMLR
        (the naive and chunked recurrent minibatch generators)
    Pardo et al. 2018, "Time Limits in Reinforcement Learning", ICML 2018

Run:
    python ppo_lstm.py --env-id CartPole-v1 --hide-obs 1 3
    python ppo_lstm.py --env-id Pendulum-v1 --hide-obs 2 --total-timesteps 200000 \
        --num-steps 256 --data-chunk-length 16 --num-minibatches 16 --gamma 0.95 \
        --gae-lambda 0.95 --learning-rate 1e-3 --ent-coef 0.001
    python ppo_lstm.py --help

Writes runs/<env_id>__ppo_lstm__<seed>__<unix_time>/ with config.json, episodes.csv,
updates.csv, learning_curve.png, summary.json, model.pt with --save-model, and with
--eval-every N evaluations.csv (and best_model.pt, the best evaluated model).
"""

# ---------------------------------------------------------------------------------------
# Imports
# ---------------------------------------------------------------------------------------
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
from collections import deque
from dataclasses import asdict, dataclass, field, replace
from typing import Optional

import gymnasium as gym
import numpy as np
import torch
import torch.nn as nn
import tyro
from gymnasium.wrappers.utils import RunningMeanStd
from matplotlib.figure import Figure
from torch.distributions import Categorical, Normal

SCRIPT = os.path.basename(__file__)


# ---------------------------------------------------------------------------------------
# Flags
# ---------------------------------------------------------------------------------------
@dataclass
class Args:
    env_id: str = "CartPole-v1"
    """a Gymnasium id (or module:EnvId) with Discrete or Box actions and flat Box observations"""
    seed: int = 1
    """seeds Python, NumPy, torch and the environments"""
    total_timesteps: int = 100_000
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
    """stop once the mean of the last 20 training episode returns reaches this"""
    save_model: bool = False
    """write model.pt into the run folder"""
    eval_checkpoint: Optional[str] = None
    """skip training: load this model.pt and evaluate it (with its --hide-obs)"""
    capture_video: bool = False
    """record the evaluation episodes into videos/ in the run folder"""
    hide_obs: list[int] = field(default_factory=list)
    """observation dimensions to drop (CartPole: 1 3 hides both velocities), so memory is needed"""

    # Algorithm
    num_envs: int = 8
    """N: parallel environments (synchronous vector environment)"""
    num_steps: int = 32
    """T: steps per environment in each rollout; the batch is N*T"""
    data_chunk_length: int = 8
    """L: steps per training sequence; must divide T (L = T feeds whole rollouts)"""
    num_minibatches: int = 2
    """minibatches per epoch; must divide the number of chunks N*T/L"""
    update_epochs: int = 10
    """epochs over each rollout"""
    learning_rate: float = 2e-3
    """Adam learning rate"""
    anneal_lr: bool = True
    """decay the learning rate linearly to 0 over the budget"""
    gamma: float = 0.98
    """discount factor"""
    gae_lambda: float = 0.8
    """lambda of GAE"""
    norm_adv: bool = True
    """normalize advantages within each minibatch"""
    clip_coef: float = 0.2
    """epsilon of the clipped surrogate"""
    ent_coef: float = 0.0
    """entropy bonus coefficient c_e"""
    vf_coef: float = 0.5
    """value loss coefficient c_v"""
    max_grad_norm: float = 0.5
    """gradient clipping: the largest global norm of the gradient"""
    target_kl: Optional[float] = None
    """stop an update's remaining epochs once the mean approx KL of an epoch exceeds this"""
    norm_obs: bool = True
    """normalize observations by running mean and variance (saved in model.pt)"""
    norm_reward: bool = True
    """scale rewards by the running std of the discounted return (Gymnasium's NormalizeReward)"""
    hidden_size: int = 64
    """width of the encoder layer before the LSTM and of the heads' hidden layer after it"""
    lstm_hidden_size: int = 64
    """size of the LSTM's hidden state h (and cell state c)"""


class UsageError(Exception):
    """Bad input: reported as one line on stderr with exit status 2, before training."""


# ---------------------------------------------------------------------------------------
# The math
# ---------------------------------------------------------------------------------------
def compute_gae(rewards, values, next_values, terminated, truncated, gamma, gae_lambda):
    """Generalized advantage estimation with time limits handled (Schulman et al. 2016).

    All inputs are [T, N] tensors; terminated and truncated are 0/1 or bool.
    values[t] = V(s_t); next_values[t] = V(s_{t+1}), the value of what followed step t: the
    true final observation (valued with the episode's last hidden state) where the
    episode ended at t. With done_t = terminated_t or truncated_t:

        delta_t = r_t + gamma * (1 - terminated_t) * next_values_t - values_t
        A_t     = delta_t + gamma * lambda * (1 - done_t) * A_{t+1},   A_T = 0
        R_t     = A_t + values_t

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


def ppo_loss(newlogprob, oldlogprob, advantages, newvalue, returns, entropy,
             clip_coef, ent_coef, vf_coef):
    """The PPO loss to minimize over B samples (all inputs are [B] tensors; the advantages
    as the caller gives them, normalized per minibatch with --norm-adv).

        ratio = exp(newlogprob - oldlogprob)
        L_pg  = mean( max(-A * ratio, -A * clip(ratio, 1 - eps, 1 + eps)) )
        L_v   = mean( 0.5 * (V - R)^2 )
        loss  = L_pg - c_e * mean(entropy) + c_v * L_v

    Returns (loss, L_pg, L_v, mean entropy).
    """
    ratio = torch.exp(newlogprob - oldlogprob)
    clipped_ratio = torch.clamp(ratio, 1 - clip_coef, 1 + clip_coef)
    pg_loss = torch.max(-advantages * ratio, -advantages * clipped_ratio).mean()
    v_loss = 0.5 * ((newvalue - returns) ** 2).mean()
    entropy = entropy.mean()
    return pg_loss - ent_coef * entropy + vf_coef * v_loss, pg_loss, v_loss, entropy


def recurrent_generator(num_steps, num_envs, chunk_length, num_minibatches, generator=None):
    """Minibatches of sequences: cut each environment's T-step rollout into T/L chunks of
    L consecutive steps, shuffle the N*T/L chunks and deal them into `num_minibatches`
    minibatches (HARL's recurrent_generator).

    Chunk c = n * (T/L) + k holds steps kL, ..., kL + L - 1 of environment n. Yields, per
    minibatch, (steps, envs): two [L, C] long tensors (C = N*T/L / num_minibatches chunks,
    time first as torch.nn.LSTM wants it), so that buffer.x[steps, envs] is the
    minibatch's [L, C, ...] slice and buffer.x[steps[0], envs[0]] the chunks' first rows.
    """
    chunks_per_env = num_steps // chunk_length
    num_chunks = num_envs * chunks_per_env
    order = torch.randperm(num_chunks, generator=generator)
    offsets = torch.arange(chunk_length).unsqueeze(1)  # [L, 1]
    for chunk in order.split(num_chunks // num_minibatches):
        starts = (chunk % chunks_per_env) * chunk_length  # [C]
        steps = starts.unsqueeze(0) + offsets             # [L, C]
        envs = (chunk // chunks_per_env).unsqueeze(0).expand_as(steps)
        yield steps, envs


def naive_recurrent_generator(num_steps, num_envs, num_minibatches, generator=None):
    """Minibatches of whole rollouts: each environment's T steps are one sequence that
    starts from the state stored at the rollout's first step (HARL's
    naive_recurrent_generator). It is the chunked generator with L = T."""
    return recurrent_generator(num_steps, num_envs, num_steps, num_minibatches, generator)


def unroll(lstm, features, state, episode_starts):
    """Run an LSTM over a sequence, resetting the state to zeros at episode starts.

    features [L, B, F], state = (h, c) each [B, H], episode_starts [L, B] (1 where step t
    is the first of an episode). For t = 0, ..., L-1:

        (h, c) <- (1 - start_t) * (h, c)
        out_t, (h, c) = LSTM(features_t, (h, c))

    Returns (outputs [L, B, H], final state (h, c)). The reset at t = 0 is what lets a
    chunk start from its stored state whatever that state is: where the chunk's first
    step starts an episode, it starts from zeros. The steps between two resets (anywhere
    in the batch) go to torch.nn.LSTM in one call: the same arithmetic, step by step
    inside the library.
    """
    h, c = state
    length = features.shape[0]
    resets = (episode_starts[1:] != 0).any(dim=1).nonzero().flatten() + 1
    bounds = [0, *resets.tolist(), length]
    outputs = []
    for begin, end in zip(bounds[:-1], bounds[1:]):
        keep = (1.0 - episode_starts[begin].float()).unsqueeze(-1)
        out, (h, c) = lstm(features[begin:end], ((h * keep).unsqueeze(0),
                                                 (c * keep).unsqueeze(0)))
        h, c = h.squeeze(0), c.squeeze(0)
        outputs.append(out)
    return torch.cat(outputs), (h, c)


class RolloutBuffer:
    """One rollout of T steps from N environments, preallocated on the device.

    Row t holds what was seen and done at step t: obs o_t, the episode-start flag of o_t,
    the LSTM states (h_t-1, c_t-1) the agent acted with, the actor's and the critic's
    (zeros where o_t starts an episode), action a_t, log pi_old(a_t | .), V(s_t), reward
    r_t, terminated_t and truncated_t. final_values[t, n] is V(final observation) valued
    with the state the episode reached, where environment n was truncated at step t;
    last_value is V(s_T) after the last step, with the state carried on.
    """

    def __init__(self, num_steps, num_envs, obs_dim, action_shape, action_dtype,
                 lstm_hidden_size, device):
        def zeros(*shape, dtype=torch.float32):
            return torch.zeros((num_steps, num_envs, *shape), dtype=dtype, device=device)

        self.obs = zeros(obs_dim)
        self.episode_starts = zeros()
        self.h = zeros(2, lstm_hidden_size)  # the actor's and the critic's LSTM
        self.c = zeros(2, lstm_hidden_size)
        self.actions = zeros(*action_shape, dtype=action_dtype)
        self.logprobs = zeros()
        self.values = zeros()
        self.rewards = zeros()
        self.terminated = zeros(dtype=torch.bool)
        self.truncated = zeros(dtype=torch.bool)
        self.final_values = zeros()
        self.last_value = torch.zeros(num_envs, device=device)

    def gae(self, gamma, gae_lambda):
        """GAE advantages and returns [T, N]. next_values[t] is values[t+1] inside the
        rollout, last_value after it, and final_values[t] where step t was truncated (where
        it was terminated the value is multiplied by 0)."""
        next_values = torch.cat([self.values[1:], self.last_value.unsqueeze(0)])
        next_values = torch.where(self.truncated, self.final_values, next_values)
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


class Agent(nn.Module):
    """Two recurrent towers, obs -> Linear + tanh encoder -> LSTM, one under the actor's
    head (logits, or the mean of a Gaussian with a learned state-independent log std) and
    one under the critic's head (V); each head has one tanh hidden layer.

    The critic has an LSTM of its own, as in Stable-Baselines3's RecurrentPPO (CleanRL's
    LSTM agent shares one): the value loss, whose targets are returns of tens to hundreds,
    would otherwise pull on the memory the actor uses. In single-seed trials on CartPole
    without velocities, a shared LSTM learned faster when the value loss weighed less
    (README). The agent's state holds both LSTMs' states: h and c are each [B, 2, H],
    index 0 the actor's and index 1 the critic's.
    """

    def __init__(self, obs_dim, action_dim, continuous, hidden_size=64, lstm_hidden_size=64):
        super().__init__()
        self.continuous = continuous
        self.actor_encoder, self.actor_lstm = recurrent_tower(obs_dim, hidden_size,
                                                              lstm_hidden_size)
        self.critic_encoder, self.critic_lstm = recurrent_tower(obs_dim, hidden_size,
                                                                lstm_hidden_size)
        self.actor = head(lstm_hidden_size, hidden_size, action_dim, out_std=0.01)
        self.critic = head(lstm_hidden_size, hidden_size, 1, out_std=1.0)
        if continuous:
            self.actor_logstd = nn.Parameter(torch.zeros(1, action_dim))

    def initial_state(self, batch, device):
        zeros = torch.zeros(batch, 2, self.actor_lstm.hidden_size, device=device)
        return zeros, zeros.clone()

    def features(self, obs, state, episode_starts):
        """Both LSTMs over obs [L, B, obs_dim] from state (h, c), each [B, 2, H]. Returns
        ((actor outputs, critic outputs), each [L, B, H]), and the state after."""
        h, c = state
        actor, (h_pi, c_pi) = unroll(self.actor_lstm, self.actor_encoder(obs),
                                     (h[:, 0], c[:, 0]), episode_starts)
        critic, (h_v, c_v) = unroll(self.critic_lstm, self.critic_encoder(obs),
                                    (h[:, 1], c[:, 1]), episode_starts)
        return (actor, critic), (torch.stack([h_pi, h_v], 1), torch.stack([c_pi, c_v], 1))

    def distribution(self, actor_hidden):
        if self.continuous:
            mean = self.actor(actor_hidden)
            return Normal(mean, self.actor_logstd.expand_as(mean).exp(), validate_args=False)
        return Categorical(logits=self.actor(actor_hidden), validate_args=False)

    def logprob_entropy(self, dist, actions):
        if self.continuous:  # independent dimensions: sum over the action dimension
            return dist.log_prob(actions).sum(-1), dist.entropy().sum(-1)
        return dist.log_prob(actions), dist.entropy()

    def value(self, critic_hidden):
        return self.critic(critic_hidden).squeeze(-1)

    @torch.no_grad()  # acting needs no gradients
    def step(self, obs, state, episode_starts):
        """One step of N environments: obs [N, obs_dim]. Returns (actions, log-probs,
        values, the state after the step)."""
        (actor, critic), state = self.features(obs.unsqueeze(0), state,
                                               episode_starts.unsqueeze(0))
        dist = self.distribution(actor[0])
        actions = dist.sample()
        return actions, self.logprob_entropy(dist, actions)[0], self.value(critic[0]), state

    def evaluate(self, obs, actions, state, episode_starts):
        """Re-run a minibatch of chunks: obs [L, C, obs_dim] from state (h, c) [C, 2, H].
        Returns log-probabilities, entropies and values, each [L, C]."""
        (actor, critic), _ = self.features(obs, state, episode_starts)
        logprobs, entropy = self.logprob_entropy(self.distribution(actor), actions)
        return logprobs, entropy, self.value(critic)

    @torch.no_grad()
    def bootstrap_value(self, obs, state, episode_starts):
        """V of obs [N, obs_dim] one step on from state: what follows a rollout's last step,
        or a truncated episode's true final observation."""
        (_, critic), _ = self.features(obs.unsqueeze(0), state, episode_starts.unsqueeze(0))
        return self.value(critic[0])

    @torch.no_grad()
    def greedy(self, obs, state, episode_starts):
        """The most likely action (argmax of the logits, or the Gaussian's mean) and the
        state after the step."""
        (actor, _), state = self.features(obs.unsqueeze(0), state, episode_starts.unsqueeze(0))
        out = self.actor(actor[0])
        return (out if self.continuous else out.argmax(-1)), state


def head(in_size, hidden_size, out_size, out_std):
    """One tanh hidden layer on the LSTM's output, then the output layer."""
    return nn.Sequential(layer_init(nn.Linear(in_size, hidden_size)), nn.Tanh(),
                         layer_init(nn.Linear(hidden_size, out_size), std=out_std))


def recurrent_tower(obs_dim, hidden_size, lstm_hidden_size):
    """A Linear + tanh encoder and an LSTM over its outputs (orthogonal weights, zero
    biases)."""
    encoder = nn.Sequential(layer_init(nn.Linear(obs_dim, hidden_size)), nn.Tanh())
    lstm = nn.LSTM(hidden_size, lstm_hidden_size)
    for name, param in lstm.named_parameters():
        if "weight" in name:
            nn.init.orthogonal_(param, 1.0)
        else:
            nn.init.constant_(param, 0.0)
    return encoder, lstm


# ---------------------------------------------------------------------------------------
# Training
# ---------------------------------------------------------------------------------------
def train(args, envs, agent, optimizer, run, summary, obs_filter, device):
    """PPO with an LSTM agent: collect a rollout carrying the hidden state, compute GAE,
    then epochs of minibatch steps on chunks re-run from their stored initial states."""
    action_space = envs.single_action_space
    continuous = isinstance(action_space, gym.spaces.Box)
    T, N, L = args.num_steps, args.num_envs, args.data_chunk_length
    buffer = RolloutBuffer(T, N, agent.actor_encoder[0].in_features,
                           action_space.shape if continuous else (),
                           torch.float32 if continuous else torch.long,
                           args.lstm_hidden_size, device)
    num_updates = args.total_timesteps // (N * T)
    recent = deque(maxlen=20)
    obs, _ = envs.reset(seed=args.seed)
    next_obs = torch.as_tensor(obs_filter(obs, update=True), device=device)
    next_start = torch.ones(N, device=device)  # every environment starts an episode
    state = agent.initial_state(N, device)
    for update in range(1, num_updates + 1):
        if args.anneal_lr:
            for group in optimizer.param_groups:
                group["lr"] = args.learning_rate * (1 - (update - 1) / num_updates)

        # Rollout: T steps of the N environments, the LSTM state carried from step to step.
        for t in range(T):
            keep = (1.0 - next_start).view(N, 1, 1)
            state = (state[0] * keep, state[1] * keep)  # zeros where an episode starts
            buffer.obs[t], buffer.episode_starts[t] = next_obs, next_start
            buffer.h[t], buffer.c[t] = state  # the state the agent acts with at step t
            action, logprob, value, state = agent.step(next_obs, state, next_start)
            obs, reward, terminated, truncated, info = envs.step(
                to_env_action(action, action_space))
            summary["global_steps"] += N
            run.step(summary["global_steps"])  # progress line; evaluation every --eval-every steps
            buffer.actions[t], buffer.logprobs[t], buffer.values[t] = action, logprob, value
            buffer.rewards[t] = torch.as_tensor(reward, device=device)
            buffer.terminated[t] = torch.as_tensor(terminated, device=device)
            buffer.truncated[t] = torch.as_tensor(truncated, device=device)
            for n in np.flatnonzero(truncated):  # V(true final obs) with the episode's state
                final = torch.as_tensor(obs_filter(info["final_obs"][n]), device=device)
                buffer.final_values[t, n] = agent.bootstrap_value(
                    final.unsqueeze(0), (state[0][n:n + 1], state[1][n:n + 1]),
                    torch.zeros(1, device=device))[0]
            next_obs = torch.as_tensor(obs_filter(obs, update=True), device=device)
            next_start = torch.as_tensor(terminated | truncated, device=device).float()
            if record_episodes(run, info, summary, recent, args.stop_at_return):
                return
        buffer.last_value = agent.bootstrap_value(next_obs, state, next_start)
        advantages, returns = buffer.gae(args.gamma, args.gae_lambda)

        # Update: epochs of minibatches of chunks, each re-run from its stored first state.
        approx_kls, clipfracs = [], []
        for epoch in range(args.update_epochs):
            epoch_kls = []
            for steps, envs_idx in recurrent_generator(T, N, L, args.num_minibatches):
                first = (buffer.h[steps[0], envs_idx[0]], buffer.c[steps[0], envs_idx[0]])
                newlogprob, entropy, newvalue = agent.evaluate(
                    buffer.obs[steps, envs_idx], buffer.actions[steps, envs_idx], first,
                    buffer.episode_starts[steps, envs_idx])
                oldlogprob = buffer.logprobs[steps, envs_idx]
                adv = advantages[steps, envs_idx]  # normalized per minibatch unless --no-norm-adv
                adv = (adv - adv.mean()) / (adv.std() + 1e-8) if args.norm_adv else adv
                loss, pg_loss, v_loss, entropy = ppo_loss(
                    newlogprob.flatten(), oldlogprob.flatten(), adv.flatten(), newvalue.flatten(),
                    returns[steps, envs_idx].flatten(), entropy.flatten(), args.clip_coef,
                    args.ent_coef, args.vf_coef)
                optimizer.zero_grad()
                loss.backward()
                nn.utils.clip_grad_norm_(agent.parameters(), args.max_grad_norm)
                optimizer.step()
                # Diagnostics: k3 estimate of KL(old || new), mean(ratio - 1 - log ratio); clipfrac
                logratio = (newlogprob - oldlogprob).detach()
                epoch_kls.append((logratio.exp() - 1 - logratio).mean().item())
                clipfracs.append(((logratio.exp() - 1).abs() > args.clip_coef).float().mean()
                                 .item())
            approx_kls += epoch_kls
            if args.target_kl is not None and np.mean(epoch_kls) > args.target_kl:
                break

        if non_finite(loss.item(), summary):  # says so; the run stops as interrupted
            return
        var_returns = returns.var().item()
        explained = (1 - (returns - buffer.values).var().item() / var_returns if var_returns
                     else math.nan)
        log_update(run, summary, {
            "learning_rate": optimizer.param_groups[0]["lr"], "policy_loss": pg_loss.item(),
            "value_loss": v_loss.item(), "entropy": entropy.item(),
            "approx_kl": float(np.mean(approx_kls)), "clipfrac": float(np.mean(clipfracs)),
            "explained_variance": explained,
            "epochs": epoch + 1})


def main(args: Args) -> dict:
    """Train PPO-LSTM (or, with --eval-checkpoint, evaluate a saved model), write the run
    folder and return the summary."""
    args, checkpoint = check_args(args)
    obs_dim, action_space = check_env(args)
    obs_filter = ObsFilter(args.hide_obs, obs_dim + len(args.hide_obs), args.norm_obs)
    random.seed(args.seed)
    np.random.seed(args.seed)
    torch.manual_seed(args.seed)
    device = torch.device("cuda" if args.cuda and torch.cuda.is_available() else "cpu")
    if device.type == "cpu":
        torch.set_num_threads(1)  # small networks run faster without the thread pool
    continuous = isinstance(action_space, gym.spaces.Box)
    agent = Agent(obs_dim, action_space.shape[0] if continuous else int(action_space.n),
                  continuous, args.hidden_size, args.lstm_hidden_size).to(device)
    if checkpoint is not None:
        load_weights(agent, obs_filter, checkpoint, args)
    run = RunWriter(args, device, agent, obs_filter)
    summary = new_summary(args)
    print(f"{SCRIPT}: {args.env_id}, seed {args.seed}, device {device}, hidden "
          f"observation dimensions {args.hide_obs or 'none'}")
    if checkpoint is None:
        envs = make_vector_env(args.env_id, args.num_envs)
        if args.norm_reward:  # outside RecordEpisodeStatistics, which keeps the raw returns
            envs = gym.wrappers.vector.NormalizeReward(envs, gamma=args.gamma)
        optimizer = torch.optim.Adam(agent.parameters(), lr=args.learning_rate, eps=1e-5)
        try:
            train(args, envs, agent, optimizer, run, summary, obs_filter, device)
        except KeyboardInterrupt:
            print(f"{SCRIPT}: interrupted; writing what the run has so far")
            summary["interrupted"] = True
        finally:
            envs.close()
    return finish(args, run, summary, agent, obs_filter, device, trained=checkpoint is None)


# ---------------------------------------------------------------------------------------
# Plumbing: checks, run folder, evaluation, checkpoints (not needed to follow the algorithm)
# ---------------------------------------------------------------------------------------
def fail(message):
    raise UsageError(message)


def check_args(args):
    """Everything a user can get wrong in the flags, checked before any environment runs.
    With --eval-checkpoint, loads the checkpoint and takes its network sizes and hidden
    observation dimensions. Returns (args, checkpoint or None)."""
    for name in ("total_timesteps", "num_envs", "num_steps", "data_chunk_length",
                 "num_minibatches", "update_epochs", "hidden_size", "lstm_hidden_size"):
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
    if args.eval_every < 0:
        fail("--eval-every must be 0 (evaluate only after training) or more, got "
             f"{args.eval_every}")
    if args.eval_every and not args.eval_episodes:
        fail("--eval-every needs at least one evaluation episode; pass --eval-episodes 1 or more")
    if args.num_steps % args.data_chunk_length:
        fail(f"--data-chunk-length {args.data_chunk_length} does not divide --num-steps "
             f"{args.num_steps}; pick a divisor of {args.num_steps}")
    num_chunks = args.num_envs * args.num_steps // args.data_chunk_length
    if num_chunks % args.num_minibatches:
        fail(f"the {num_chunks} chunks of a rollout (num_envs*num_steps/data_chunk_length) "
             f"do not split into --num-minibatches {args.num_minibatches}; pick a divisor")
    if args.eval_checkpoint is None and args.total_timesteps < args.num_envs * args.num_steps:
        fail(f"--total-timesteps {args.total_timesteps} is less than one rollout "
             f"(num_envs*num_steps = {args.num_envs * args.num_steps})")
    if args.capture_video and importlib.util.find_spec("moviepy") is None:
        fail("--capture-video needs moviepy: pip install moviepy")
    if len(set(args.hide_obs)) != len(args.hide_obs):
        fail(f"--hide-obs {' '.join(map(str, args.hide_obs))} names a dimension twice")
    if args.eval_checkpoint is None:
        return args, None
    checkpoint = load_checkpoint(args.eval_checkpoint, args.env_id)
    saved = checkpoint["args"]
    return replace(args, hidden_size=saved["hidden_size"], hide_obs=list(saved["hide_obs"]),
                   lstm_hidden_size=saved["lstm_hidden_size"],
                   norm_obs=saved["norm_obs"]), checkpoint


def check_env(args):
    """Make one environment to check its spaces and --hide-obs; returns (the observation
    size the agent sees, the action space). `module:EnvId` imports the module first, as
    gym.make does, so that it can register the id."""
    module, _, name = args.env_id.rpartition(":")
    if module:
        try:
            importlib.import_module(module)
        except Exception as e:
            fail(f"cannot import module {module!r} of --env-id {args.env_id}: "
                 f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}")
    if name not in gym.registry:
        close = difflib.get_close_matches(name, list(gym.registry), n=3, cutoff=0.5)
        hint = f"; did you mean {', '.join(close)}?" if close else "; see gymnasium.registry"
        where = f" (module {module} registers no such id)" if module else ""
        fail(f"unknown environment id {name!r}{where}{hint}")
    try:
        env = gym.make(args.env_id)
    except (gym.error.Error, ImportError) as e:
        fail(f"cannot make {args.env_id}: {str(e).splitlines()[0]}")
    obs_space, action_space = env.observation_space, env.action_space
    env.close()
    if isinstance(action_space, gym.spaces.Box) and len(action_space.shape) != 1:
        fail(f"{args.env_id} has a Box action space of shape {action_space.shape}; "
             f"{SCRIPT} needs a flat one")
    if not isinstance(action_space, (gym.spaces.Box, gym.spaces.Discrete)):
        fail(f"{args.env_id} has a {type(action_space).__name__} action space; {SCRIPT} "
             "handles Discrete and Box (ppo_masked.py handles masked Discrete actions)")
    if not isinstance(obs_space, gym.spaces.Box) or len(obs_space.shape) != 1:
        fail(f"{args.env_id} has {type(obs_space).__name__} observations of shape "
             f"{obs_space.shape}; {SCRIPT} needs flat Box vectors")
    size = obs_space.shape[0]
    if any(not 0 <= i < size for i in args.hide_obs) or len(args.hide_obs) >= size:
        fail(f"--hide-obs {' '.join(map(str, args.hide_obs))} does not fit {args.env_id}'s "
             f"{size} observation dimensions (indices 0 to {size - 1}, at least one kept)")
    return size - len(args.hide_obs), action_space


class ObsFilter:
    """What the agent sees of an observation (a batch or one): the --hide-obs dimensions
    dropped, then, with --norm-obs, (obs - mean) / sqrt(var + 1e-8) clipped to [-10, 10]
    with running statistics (Gymnasium's RunningMeanStd, updated with update=True)."""

    def __init__(self, hidden, size, normalize):
        self.keep = [i for i in range(size) if i not in set(hidden)]
        self.normalize, self.rms = normalize, RunningMeanStd(shape=(len(self.keep),))

    def __call__(self, obs, update=False):
        obs = np.asarray(obs, dtype=np.float32)[..., self.keep]
        if not self.normalize:
            return obs
        if update:
            self.rms.update(obs)
        normalized = (obs - self.rms.mean) / np.sqrt(self.rms.var + 1e-8)
        return np.clip(normalized, -10.0, 10.0).astype(np.float32)

    def state_dict(self):
        return {"mean": torch.as_tensor(self.rms.mean), "var": torch.as_tensor(self.rms.var),
                "count": float(self.rms.count)}

    def load_state_dict(self, state):
        self.rms.mean = state["mean"].numpy().astype(np.float64)
        self.rms.var = state["var"].numpy().astype(np.float64)
        self.rms.count = state["count"]


def make_vector_env(env_id, num_envs, video_folder=None):
    """N copies of env_id in one synchronous vector environment with SAME_STEP autoreset
    (the true last observation is in info["final_obs"]) and episode statistics."""
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
    """Tensor actions to what the environment takes: Gaussian samples are clipped to the
    bounds when stepping (the buffer keeps the unclipped sample)."""
    actions = actions.cpu().numpy()
    if isinstance(action_space, gym.spaces.Box):
        return np.clip(actions, action_space.low, action_space.high)
    return actions


def record_episodes(run, info, summary, recent, stop_at_return):
    """Write the episodes that ended at this step; returns True once the mean of the last
    20 training returns reaches --stop-at-return."""
    if "_episode" not in info:
        return False
    for n in np.flatnonzero(info["_episode"]):
        recent.append(float(info["episode"]["r"][n]))
        run.write("episodes", {"global_step": summary["global_steps"],
                               "wall_time": round(run.elapsed(), 4),
                               "episode_return": recent[-1],
                               "episode_length": int(info["episode"]["l"][n])})
    if stop_at_return is None or len(recent) < 20 or np.mean(recent) < stop_at_return:
        return False
    summary["solved_at_step"] = summary["global_steps"]
    summary["solved_at_time_s"] = round(run.elapsed(), 3)
    return True


def non_finite(loss, summary):
    """True, after saying so and marking the run interrupted, when the loss is NaN or inf."""
    if math.isfinite(loss):
        return False
    print(f"{SCRIPT}: the loss is not finite (NaN or inf) at step {summary['global_steps']}; "
          "stopping (try a lower --learning-rate)")
    summary["interrupted"] = True
    return True


def log_update(run, summary, diagnostics):
    elapsed = run.elapsed()
    run.write("updates", {"global_step": summary["global_steps"],
                          "wall_time": round(elapsed, 4),
                          "sps": int(summary["global_steps"] / max(elapsed, 1e-9)),
                          **diagnostics})


def evaluate(agent, obs_filter, env_id, episodes, seed, device, video_folder=None):
    """Greedy returns of `episodes` episodes, one per environment of a vector env, all at
    once, each carrying its LSTM state from its first step to its last."""
    envs = make_vector_env(env_id, episodes, video_folder)
    obs, _ = envs.reset(seed=seed)
    state, starts = agent.initial_state(episodes, device), torch.ones(episodes, device=device)
    returns = np.full(episodes, np.nan)
    with torch.no_grad():
        while np.isnan(returns).any():
            action, state = agent.greedy(torch.as_tensor(obs_filter(obs), device=device), state,
                                         starts)
            obs, _, terminated, truncated, info = envs.step(
                to_env_action(action, envs.single_action_space))
            starts = torch.as_tensor(terminated | truncated, device=device).float()
            if "_episode" in info:
                first = info["_episode"] & np.isnan(returns)
                returns[first] = info["episode"]["r"][first]
    envs.close()
    return returns


class RunWriter:
    """The run folder: config.json now, episodes.csv, updates.csv and evaluations.csv row by
    row (flushed, so an interrupted run keeps them), summary.json and learning_curve.png at
    the end; a progress line every 2 seconds, and the greedy evaluations of --eval-every with
    best_model.pt, the best evaluated model."""

    def __init__(self, args, device, agent, obs_filter):
        name = "__".join([args.env_id.replace("/", "-").replace(":", "-"), args.exp_name,
                          str(args.seed), str(int(time.time()))])
        self.path, suffix = os.path.join(args.output_dir, name), 1
        while os.path.exists(self.path):
            suffix += 1
            self.path = os.path.join(args.output_dir, f"{name}-{suffix}")
        try:
            os.makedirs(self.path)
        except OSError as e:
            fail(f"cannot create the run folder {self.path}: {e.strerror}")
        self.write_json("config.json", {**asdict(args), "device": str(device), "versions": {
            "torch": torch.__version__, "gymnasium": gym.__version__,
            "numpy": np.__version__, "python": sys.version.split()[0]}})
        self.files, self.writers, self.episodes = {}, {}, []
        self.write("episodes", None)  # the header, even if no episode ends
        self.args, self.device, self.agent, self.obs_filter = args, device, agent, obs_filter
        self.global_step, self.evaluations = 0, []  # evaluations: (global_step, mean, std)
        self.start = self.last_print = time.time()

    def elapsed(self):
        return time.time() - self.start

    def step(self, global_step):
        """After each vector step: a greedy evaluation each time global_step crosses a
        multiple of --eval-every, and the progress line every 2 seconds."""
        every, previous, self.global_step = self.args.eval_every, self.global_step, global_step
        if every and global_step // every > previous // every:
            self.evaluation(global_step)
        if time.time() - self.last_print >= 2.0:
            self.last_print = time.time()
            print(progress_line(global_step, self.args.total_timesteps, self.elapsed(),
                                self.recent_return()))

    def evaluation(self, global_step):
        """Evaluate the agent as it is now on environments of its own, seeded as the final
        evaluation, each carrying an LSTM state of its own (the training environments, their
        statistics, the rollout's hidden state and every random stream training draws from
        are untouched); append the row to evaluations.csv and, with --save-model, keep the
        best model so far as best_model.pt (the first of equal ones)."""
        wall_time = self.elapsed()
        returns = evaluate(self.agent, self.obs_filter, self.args.env_id, self.args.eval_episodes,
                           self.args.seed + 100_000, self.device)
        mean, std = float(returns.mean()), float(returns.std())
        self.write("evaluations", {"global_step": global_step, "wall_time": round(wall_time, 4),
                                   "eval_return_mean": mean, "eval_return_std": std})
        if self.args.save_model and mean > max((m for _, m, _ in self.evaluations),
                                               default=-math.inf):
            save_checkpoint(os.path.join(self.path, "best_model.pt"), self.agent,
                            self.obs_filter, self.args)
        self.evaluations.append((global_step, mean, std))

    def recent_return(self):
        """The mean of the last 20 training episode returns (None before the first)."""
        recent = [e["episode_return"] for e in self.episodes[-20:]]
        return float(np.mean(recent)) if recent else None

    def write(self, table, row):
        """Append a row to <table>.csv, whose header is the first row's keys."""
        if table not in self.files:
            fields = ["global_step", "wall_time", "episode_return", "episode_length"] \
                if table == "episodes" else list(row)
            self.files[table] = open(os.path.join(self.path, f"{table}.csv"), "w", newline="")
            self.writers[table] = csv.DictWriter(self.files[table], fieldnames=fields)
            self.writers[table].writeheader()
        if row is not None:
            self.writers[table].writerow(row)
            if table == "episodes":
                self.episodes.append(row)
        self.files[table].flush()

    def write_json(self, filename, data):
        with open(os.path.join(self.path, filename), "w") as f:
            json.dump(data, f, indent=2)

    def close(self):
        for f in self.files.values():
            f.close()

    def plot(self, title):
        """Episode return against environment steps: raw points faded, a moving average of
        20 episodes on top; the greedy evaluations (step, mean, std) of --eval-every as a
        second series, the mean with the std as error bars."""
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
        if self.evaluations:
            eval_steps, means, stds = zip(*self.evaluations)
            ax.errorbar(eval_steps, means, yerr=stds, color="tab:orange", marker="o", ms=4,
                        capsize=3, label="greedy evaluation (mean, std)")
        if len(returns) or self.evaluations:
            ax.legend(loc="lower right")
        ax.set(xlabel="environment steps", ylabel="episode return", title=title)
        ax.grid(alpha=0.3)
        fig.tight_layout()
        path = os.path.join(self.path, "learning_curve.png")
        fig.savefig(path)
        return path


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


def new_summary(args):
    return {"algorithm": "ppo_lstm", "env_id": args.env_id, "seed": args.seed,
            "global_steps": 0, "wall_time_s": None, "train_return_last20": None,
            "eval_return_mean": None, "eval_return_std": None,
            "eval_episodes": args.eval_episodes, "solved_at_step": None,
            "solved_at_time_s": None, "interrupted": False}


def save_checkpoint(path, agent, obs_filter, args):
    """model.pt (and best_model.pt): the agent's weights, the observation statistics, the flags."""
    torch.save({"agent": agent.state_dict(), "obs_rms": obs_filter.state_dict(),
                "args": asdict(args)}, path)


def load_checkpoint(path, env_id):
    """Load a model.pt safely (weights_only) and check it was made for env_id."""
    if not os.path.isfile(path):
        fail(f"checkpoint {path} does not exist")
    try:
        checkpoint = torch.load(path, map_location="cpu", weights_only=True)
        saved = checkpoint["args"]
        if not {"agent", "obs_rms"} <= set(checkpoint) or not {
                "env_id", "hidden_size", "lstm_hidden_size", "hide_obs", "norm_obs"} <= set(saved):
            raise KeyError("missing entries")
    except Exception as e:
        fail(f"checkpoint {path} is not a {SCRIPT} model.pt ({type(e).__name__}); "
             "make one with --save-model")
    if saved["env_id"] != env_id:
        fail(f"checkpoint {path} was made for {saved['env_id']}, not {env_id}; "
             f"pass --env-id {saved['env_id']}")
    return checkpoint


def load_weights(agent, obs_filter, checkpoint, args):
    try:
        agent.load_state_dict(checkpoint["agent"])
        obs_filter.load_state_dict(checkpoint["obs_rms"])
    except (RuntimeError, KeyError, AttributeError) as e:
        fail(f"checkpoint {args.eval_checkpoint} does not fit {args.env_id}'s network: "
             f"{str(e).splitlines()[0]}")


def finish(args, run, summary, agent, obs_filter, device, trained=True):
    """Evaluate greedily, save the model if asked, write summary.json and the curve, and
    print the closing line. An interrupted run skips the evaluation."""
    summary["train_return_last20"] = run.recent_return()
    if args.eval_episodes and not summary["interrupted"]:
        video_folder = os.path.join(run.path, "videos") if args.capture_video else None
        returns = evaluate(agent, obs_filter, args.env_id, args.eval_episodes, args.seed + 100_000,
                           device, video_folder)
        summary["eval_return_mean"] = float(returns.mean())
        summary["eval_return_std"] = float(returns.std())
    summary["wall_time_s"] = round(run.elapsed(), 3)
    if args.save_model and trained:
        save_checkpoint(os.path.join(run.path, "model.pt"), agent, obs_filter, args)
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

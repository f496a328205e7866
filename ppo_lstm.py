# From plainrl (MIT licence, (c) 2026 the plainrl authors): keep this line in a copy.
"""PPO with a recurrent (LSTM) policy, in one file: what changes when the policy has memory.

A memoryless policy pi(a | o_t) fails where the observation o_t does not tell the whole
state: CartPole without its two velocities, Pendulum without its angular velocity. An LSTM
agent carries a hidden state (h_t, c_t) that summarizes the episode so far,

    (h_t, c_t) = LSTM(enc(o_t), (h_{t-1}, c_{t-1})),   (h, c) = 0 where an episode starts
    pi(a_t | h_t),   V(h_t)

and PPO trains it as ppo.py trains an MLP, with three changes: the buffer also stores each
step's episode-start flag and the state (h, c) the agent acted with; minibatches are chunks of
L = --data-chunk-length steps of one environment's rollout, each re-run from the state stored
at its first step and reset to zeros at every episode start inside it; and a time-limit
truncation bootstraps from V(final observation) valued with the state the episode had reached.

Key equations (t indexes steps, done_t = terminated_t or truncated_t):

    ratio_t = pi_theta(a_t | h_t) / pi_old(a_t | h_t)
    L_clip  = E[ min(ratio_t A_t, clip(ratio_t, 1 - eps, 1 + eps) A_t) ]
    delta_t = r_t + gamma (1 - terminated_t) V(s_{t+1}) - V(s_t)
    A_t     = delta_t + gamma lambda (1 - done_t) A_{t+1},   R_t = A_t + V(s_t)
    loss    = -L_clip + c_v 0.5 (V(s_t) - R_t)^2 - c_e entropy
    rollout k = 1, 2, ...:  lr_k = lr f_k,  eps_k = eps f_k,  f_k = max(0, 1 - (k - 1) / K),
                            K = --anneal-steps / (N T)   (--anneal-lr, --anneal-clip)

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

Writes runs/<env_id>__ppo_lstm-hide1-3__<seed>__<time>/ (--hide-obs 1 3): config.json, episodes.csv,
updates.csv, summary.json, curve.png, TensorBoard's events (--save-model: model.pt).
"""

# ---------------------------------------------------------------------------------------
# Imports
# ---------------------------------------------------------------------------------------
import math
import os
import warnings
from dataclasses import dataclass, field, replace
from typing import Annotated, Literal, Optional

import gymnasium as gym
import numpy as np
import torch
import torch.nn as nn
import tyro
from gymnasium.wrappers.utils import RunningMeanStd
from torch.distributions import Categorical, Normal

SCRIPT = os.path.basename(__file__)


# ---------------------------------------------------------------------------------------
# Flags
# ---------------------------------------------------------------------------------------
@dataclass
class Args:
    # The run folder's flags (--output-dir, --save-model, --eval-checkpoint, --track, ...)
    # come after these: every script shares them, declared once in RunFlags below the banner.
    env_id: str = "CartPole-v1"
    """a Gymnasium id (or module:EnvId) with Discrete or Box actions and flat Box observations"""
    seed: int = 1
    """seeds Python, NumPy, torch and the environments"""
    total_timesteps: int = 100_000
    """the training budget in environment steps, all environments together"""
    # Neither: a flat input's small network is faster on one CPU thread (results.md, "On a GPU").
    cuda: tyro.conf.DisallowNone[Optional[bool]] = None
    """--cuda: the GPU; --no-cuda: the CPU; neither: the GPU for an image, the CPU for a vector"""
    exp_name: Optional[str] = None
    """the experiment name, in the run folder's name (None: ppo_lstm-hide1-3 for --hide-obs 1 3)"""
    eval_episodes: int = 10
    """greedy evaluation episodes after training (0 skips evaluation)"""
    eval_every: int = 0
    """also evaluate greedily every N environment steps (0: only after training)"""
    stop_at_return: Optional[float] = None
    """stop once the training mean over its goal's window (GOALS; else 20 episodes) reaches this"""
    hide_obs: Annotated[list[int], tyro.conf.arg(help_behavior_hint="(default: none)")] = field(
        default_factory=list)
    """observation dimensions to drop (CartPole: 1 3 hides both velocities), so memory is needed"""

    # Algorithm. A flag left at None takes the value of the environment's preset (PRESETS).
    preset: tyro.conf.DisallowNone[Optional[Literal["discrete", "continuous"]]] = None
    """the settings of the flags left at None (None: the environment's family, PRESETS)"""
    num_envs: int = 8
    """N: parallel environments (synchronous vector environment)"""
    num_steps: tyro.conf.DisallowNone[Optional[int]] = None
    """T: steps per environment in each rollout; the batch is N*T"""
    data_chunk_length: tyro.conf.DisallowNone[Optional[int]] = None
    """L: steps per training sequence; must divide T (L = T: whole rollouts; HARL's default 10)"""
    num_minibatches: tyro.conf.DisallowNone[Optional[int]] = None
    """minibatches per epoch; must divide the number of chunks N*T/L"""
    update_epochs: int = 10
    """epochs over each rollout (3-10 in the PPO paper)"""
    # With --anneal-clip, chosen on tuning seeds 1-5; results.md, "ppo_lstm.py".
    learning_rate: float = 1e-3
    """Adam learning rate at the start (3e-4 in the PPO paper's MuJoCo runs, 2.5e-4 on Atari)"""
    anneal_lr: bool = True
    """decay the learning rate linearly to 0 over --anneal-steps"""
    # Not over --total-timesteps, so that the budget does not change the learning.
    anneal_steps: tyro.conf.DisallowNone[Optional[int]] = None
    """environment steps over which --anneal-lr and --anneal-clip decay to 0, then stay 0"""
    # Not the 0.98 of ppo.py and RecurrentPPO's rl-zoo entry for CartPoleNoVel-v1: chosen on
    # tuning seeds 1-5; results.md, "ppo_lstm.py".
    gamma: tyro.conf.DisallowNone[Optional[float]] = None
    """discount factor, also that of --norm-reward's return (0.99 in the PPO paper and CleanRL)"""
    gae_lambda: tyro.conf.DisallowNone[Optional[float]] = None
    """lambda of GAE (0.95 in the PPO paper; 0.92-0.99 in the GAE paper's best runs)"""
    norm_adv: bool = True
    """normalize advantages within each minibatch (over all its chunks' steps)"""
    clip_coef: float = 0.2
    """epsilon of the clipped surrogate (0.1-0.3 in the PPO paper's experiments)"""
    # Smaller steps as the policy gets good (RecurrentPPO's rl-zoo entry for CartPoleNoVel-v1).
    anneal_clip: tyro.conf.DisallowNone[Optional[bool]] = None
    """decay epsilon linearly to 0 over --anneal-steps (factor f_k), with or without --anneal-lr"""
    ent_coef: tyro.conf.DisallowNone[Optional[float]] = None
    """entropy bonus coefficient c_e (0 on MuJoCo, 0.01 on Atari in the PPO paper)"""
    vf_coef: float = 0.5
    """value loss coefficient c_v (0.5-1 in the PPO paper)"""
    max_grad_norm: float = 0.5
    """gradient clipping: the largest global norm of the gradient"""
    target_kl: Optional[float] = None
    """stop an update's remaining epochs once the mean approx KL of an epoch exceeds this"""
    norm_obs: bool = True
    """normalize observations by running mean and variance, clip to [-10, 10] (kept in model.pt)"""
    norm_reward: bool = True
    """divide rewards by the running std of the discounted return, then clip to [-10, 10]"""
    hidden_size: int = 64
    """width of the encoder layer before the LSTM and of the heads' hidden layer after it"""
    lstm_hidden_size: int = 64
    """size of the LSTM's hidden state h and cell state c (CleanRL's Atari LSTM: 128)"""


# The presets of the flags left at None, by the environment's family (family(), below the
# banner). A flag given overrides its preset.
PRESETS = {
    # Chosen on CartPole-v1 without its velocities (--hide-obs 1 3), tuning seeds 1-5
    "discrete": ("plainrl's CartPole settings", dict(
        num_steps=32, data_chunk_length=8, num_minibatches=2, anneal_steps=100_000,
        gamma=0.99, gae_lambda=0.8, anneal_clip=True, ent_coef=0.0)),
    # Chosen on Pendulum-v1 without its angular velocity (--hide-obs 2; results.md)
    "continuous": ("plainrl's Pendulum settings", dict(
        num_steps=256, data_chunk_length=16, num_minibatches=16, anneal_steps=200_000,
        gamma=0.95, gae_lambda=0.95, anneal_clip=False, ent_coef=0.001)),
}


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
    as the caller gives them, normalized per minibatch with --norm-adv). ppo.py's loss
    without its --clip-vloss option.

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


def explained_variance(values, returns):
    """1 - Var[R - V] / Var[R]: 1 when the critic predicts the targets, 0 or less when it
    does no better than their mean (NaN when the targets do not vary)."""
    var_returns = returns.var().item()
    return 1 - (returns - values).var().item() / var_returns if var_returns else math.nan


def recurrent_generator(num_steps, num_envs, chunk_length, num_minibatches, generator=None):
    """Minibatches of sequences (HARL's recurrent_generator): cut each environment's T-step
    rollout into T/L chunks of L consecutive steps, shuffle the N*T/L chunks by
    torch.randperm(N*T/L, generator=generator) and deal them in that order, C to a minibatch.

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
    """Minibatches of whole rollouts, each from the state stored at the rollout's first step
    (HARL's naive_recurrent_generator; CleanRL's ppo_atari_lstm batches so too): the chunked
    generator with L = T, which train gets with --data-chunk-length equal to --num-steps."""
    return recurrent_generator(num_steps, num_envs, num_steps, num_minibatches, generator)


def unroll(lstm, features, state, episode_starts):
    """Run an LSTM over a sequence, resetting the state to zeros at episode starts.

    features [L, B, F], state = (h, c) each [B, H], episode_starts [L, B] of 0/1 floats (1
    where step t is the first of an episode). For t = 0, ..., L-1:

        (h, c) <- (1 - start_t) * (h, c)
        out_t, (h, c) = LSTM(features_t, (h, c))

    Returns (outputs [L, B, H], final state (h, c) each [B, H]). With the reset at t = 0, a
    chunk whose first step starts an episode starts from zeros, whatever state is stored. The
    steps between two resets (anywhere in the batch) go to torch.nn.LSTM in one call: the same
    arithmetic, step by step inside the library.
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

    def __init__(self, num_steps, num_envs, obs_shape, action_shape, continuous,
                 lstm_hidden_size, device):
        def zeros(*shape, dtype=torch.float32):
            return torch.zeros((num_steps, num_envs, *shape), dtype=dtype, device=device)

        self.obs = zeros(*obs_shape)
        self.episode_starts = zeros()
        self.h = zeros(2, lstm_hidden_size)  # the actor's and the critic's LSTM
        self.c = zeros(2, lstm_hidden_size)
        self.actions = zeros(*action_shape, dtype=torch.float32 if continuous else torch.long)
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
    would otherwise pull on the memory the actor uses. The agent's state holds both LSTMs'
    states: h and c are each [B, 2, H], index 0 the actor's and index 1 the critic's.
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
        """The most likely action (the logits' argmax or the Gaussian's mean), the state after."""
        (actor, _), state = self.features(obs.unsqueeze(0), state, episode_starts.unsqueeze(0))
        out = self.actor(actor[0])
        return (out if self.continuous else out.argmax(-1)), state


def head(in_size, hidden_size, out_size, out_std):
    """One tanh hidden layer on the LSTM's output, then the output layer."""
    return nn.Sequential(layer_init(nn.Linear(in_size, hidden_size)), nn.Tanh(),
                         layer_init(nn.Linear(hidden_size, out_size), std=out_std))


def recurrent_tower(obs_dim, hidden_size, lstm_hidden_size):
    """A Linear + tanh encoder and an LSTM over its outputs (orthogonal weights, zero biases)."""
    encoder = nn.Sequential(layer_init(nn.Linear(obs_dim, hidden_size)), nn.Tanh())
    lstm = nn.LSTM(hidden_size, lstm_hidden_size)
    for name, param in lstm.named_parameters():
        if "weight" in name:
            nn.init.orthogonal_(param, 1.0)
        else:
            nn.init.constant_(param, 0.0)
    return encoder, lstm


# ---------------------------------------------------------------------------------------
# What the agent sees and sends: hidden dimensions, normalized observations, clipped actions
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


def make_vector_env(env_id, num_envs, reward_gamma=None, video_folder=None, hide_obs=()):
    """N copies of env_id in one synchronous vector environment, with SAME_STEP autoreset
    (the true last observation of an episode is in info["final_obs"]) and episode statistics.
    Each copy drops the hide_obs dimensions (--hide-obs), so the agent, the statistics,
    info["final_obs"] and the evaluation never see them. With reward_gamma (--norm-reward),
    rewards are divided by the running std of the return discounted by it and clipped to
    [-10, 10], after the statistics wrapper, so that episodes.csv keeps the raw returns."""
    def make(i):
        env = make_recorded(env_id, video_folder, f"eval-{i}")  # with a video: its first episode
        space = env.observation_space
        keep = [d for d in range(space.shape[0]) if d not in hide_obs]
        return gym.wrappers.TransformObservation(env, lambda obs: obs[keep], gym.spaces.Box(
            space.low[keep], space.high[keep], dtype=space.dtype))

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
    """PPO with an LSTM agent: collect a rollout carrying the hidden state, compute GAE, then
    epochs of minibatch steps on chunks re-run from their stored first states, log; until the
    budget, --stop-at-return or a non-finite loss.
    run (Run, below the banner) writes the run folder: step(n, info) records the episodes
    that ended, evaluates, prints progress and says when to stop; update adds a CSV row."""
    # eps = 1e-5 as in the PPO authors' baselines (torch's default is 1e-8)
    optimizer = torch.optim.Adam(agent.parameters(), lr=args.learning_rate, eps=1e-5)
    T, N, L = args.num_steps, args.num_envs, args.data_chunk_length
    buffer = RolloutBuffer(T, N, envs.single_observation_space.shape,
                           envs.single_action_space.shape, agent.continuous,
                           args.lstm_hidden_size, device)
    num_iterations = args.total_timesteps // (N * T)
    horizon = max(1, args.anneal_steps // (N * T))  # --anneal-steps in rollouts, not the budget
    global_step = 0
    next_obs = torch.from_numpy(normalizer(envs.reset(seed=args.seed)[0], update=True)).to(device)
    next_start = torch.ones(N, device=device)  # every environment starts an episode
    state = agent.initial_state(N, device)
    for iteration in range(1, num_iterations + 1):
        frac = max(0.0, 1 - (iteration - 1) / horizon)  # 1 to 0 over --anneal-steps, then 0
        if args.anneal_lr:
            for group in optimizer.param_groups:
                group["lr"] = args.learning_rate * frac
        clip_coef = args.clip_coef * frac if args.anneal_clip else args.clip_coef

        # Rollout: T steps of the N environments, the LSTM state carried from step to step.
        for step in range(T):
            keep = (1.0 - next_start).view(N, 1, 1)
            state = (state[0] * keep, state[1] * keep)  # zeros where an episode starts
            buffer.obs[step], buffer.episode_starts[step] = next_obs, next_start
            buffer.h[step], buffer.c[step] = state  # the state the agent acts with at this step
            action, logprob, value, state = agent.step(next_obs, state, next_start)
            buffer.actions[step], buffer.logprobs[step] = action, logprob
            buffer.values[step] = value
            # The buffer keeps the unclipped sample, whose log-probability the ratio compares.
            obs, reward, terminated, truncated, info = envs.step(
                to_env_action(agent, action, envs.single_action_space))
            global_step += N
            if run.step(global_step, info):  # episodes.csv, evaluation, progress; True: stop
                return
            # With --norm-reward (on by default) the reward arrives scaled (make_vector_env).
            buffer.rewards[step] = torch.from_numpy(reward).to(device)
            buffer.terminated[step] = torch.from_numpy(terminated).to(device)
            buffer.truncated[step] = torch.from_numpy(truncated).to(device)
            # A time limit's true final observation is normalized without updating the
            # statistics and valued with the state the episode reached.
            for i in np.flatnonzero(truncated):
                final_obs = torch.from_numpy(normalizer(info["final_obs"][i])).to(device)
                buffer.final_values[step, i] = agent.bootstrap_value(
                    final_obs.unsqueeze(0), (state[0][i:i + 1], state[1][i:i + 1]),
                    torch.zeros(1, device=device))[0]
            next_obs = torch.from_numpy(normalizer(obs, update=True)).to(device)
            next_start = torch.from_numpy(terminated | truncated).to(device).float()
        buffer.last_value = agent.bootstrap_value(next_obs, state, next_start)
        advantages, returns = buffer.gae(args.gamma, args.gae_lambda)

        # Update: epochs of minibatches of chunks, each re-run from its stored first state.
        approx_kls, clipfracs = [], []
        for epoch in range(args.update_epochs):
            for steps, envs_idx in recurrent_generator(T, N, L, args.num_minibatches):
                first = (buffer.h[steps[0], envs_idx[0]], buffer.c[steps[0], envs_idx[0]])
                newlogprob, entropy, newvalue = agent.evaluate(
                    buffer.obs[steps, envs_idx], buffer.actions[steps, envs_idx], first,
                    buffer.episode_starts[steps, envs_idx])
                oldlogprob = buffer.logprobs[steps, envs_idx]
                adv = advantages[steps, envs_idx]  # [L, C]: normalized over all of it
                adv = (adv - adv.mean()) / (adv.std() + 1e-8) if args.norm_adv else adv
                loss, pg_loss, v_loss, entropy = ppo_loss(
                    newlogprob=newlogprob.flatten(), oldlogprob=oldlogprob.flatten(),
                    advantages=adv.flatten(), newvalue=newvalue.flatten(),
                    returns=returns[steps, envs_idx].flatten(), entropy=entropy.flatten(),
                    clip_coef=clip_coef, ent_coef=args.ent_coef, vf_coef=args.vf_coef)
                optimizer.zero_grad()
                loss.backward()
                nn.utils.clip_grad_norm_(agent.parameters(), args.max_grad_norm)
                optimizer.step()
                # Diagnostics: k3 estimate of KL(old || new), mean(ratio - 1 - log ratio); clipfrac
                logratio = (newlogprob - oldlogprob).detach()
                ratio = logratio.exp()
                approx_kls.append((ratio - 1 - logratio).mean().item())
                clipfracs.append(((ratio - 1).abs() > clip_coef).float().mean().item())
            epoch_kl = np.mean(approx_kls[-args.num_minibatches:])
            if args.target_kl is not None and epoch_kl > args.target_kl:
                break

        if run.non_finite(loss.item(), global_step):  # says so; the run stops as interrupted
            return
        run.update(global_step, learning_rate=optimizer.param_groups[0]["lr"],
                   clip_coef=clip_coef, policy_loss=pg_loss.item(), value_loss=v_loss.item(),
                   entropy=entropy.item(), approx_kl=np.mean(approx_kls),
                   clipfrac=np.mean(clipfracs),
                   explained_variance=explained_variance(buffer.values, returns), epochs=epoch + 1)


def main(args: Args) -> dict:
    """Train PPO-LSTM (or evaluate an --eval-checkpoint), write the run folder, return the
    summary. Ctrl-C stops training; the run folder is written, then KeyboardInterrupt goes on up."""
    # prepare (below the banner): --eval-checkpoint's model read, the environment made and
    # checked, the flags left at None from its family's preset, every flag checked (a
    # mistake: one line, exit status 2), the seeds set, the device chosen.
    args, (obs_dim, action_dim, continuous), checkpoint, device = prepare(args)

    # Set up: the agent, the observation normalizer, the run folder.
    args = replace(args, exp_name=experiment_name(args))  # ppo_lstm-hide1-3, unless given
    agent = Agent(obs_dim, action_dim, continuous, args.hidden_size,
                  args.lstm_hidden_size).to(device)
    normalizer = ObsNormalizer((obs_dim,), args.norm_obs)
    models = {"agent": agent, "obs_rms": normalizer}  # what model.pt holds
    run = Run(args, device, models, checkpoint, rollout_steps=args.num_envs * args.num_steps)

    # Train (unless evaluating a checkpoint), then finish: evaluate, save, write, plot.
    envs = None if checkpoint else make_vector_env(
        args.env_id, args.num_envs, hide_obs=args.hide_obs,
        reward_gamma=args.gamma if args.norm_reward else None)
    return run.train(lambda: train(args, agent, normalizer, envs, run, device), envs)


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
# What the plumbing asks of ppo_lstm.py: its run's name, its checks, greedy policy, model flags
# ---------------------------------------------------------------------------------------
def experiment_name(args):
    """--exp-name as given, else the script's name with the dimensions --hide-obs drops
    (--hide-obs 3 1: ppo_lstm-hide1-3), so that the run folder's name and plot.py's legend
    tell a partially observed task from the full one."""
    name = os.path.splitext(SCRIPT)[0]
    if args.hide_obs:
        name += "-hide" + "-".join(str(d) for d in sorted(args.hide_obs))
    return args.exp_name or name


def check_flags(args):
    """ppo_lstm.py's own flags, checked by prepare before training."""
    check_range(args, positive=["num_envs", "num_steps", "data_chunk_length", "num_minibatches",
                                "update_epochs", "hidden_size", "lstm_hidden_size",
                                "learning_rate", "clip_coef", "max_grad_norm", "anneal_steps"],
                fraction=["gamma", "gae_lambda"])
    if args.num_steps % args.data_chunk_length:
        fail(f"--data-chunk-length {args.data_chunk_length} does not divide --num-steps "
             f"{args.num_steps}; pick a divisor of {args.num_steps}")
    batch_size = args.num_envs * args.num_steps
    if batch_size // args.data_chunk_length % args.num_minibatches:
        fail(f"num_envs*num_steps/data_chunk_length = {batch_size // args.data_chunk_length} "
             f"chunks do not split into --num-minibatches {args.num_minibatches}; pick a divisor")
    if args.eval_checkpoint is None and 0 < args.total_timesteps < batch_size:
        fail(f"--total-timesteps {args.total_timesteps} is less than one rollout "
             f"(num_envs*num_steps = {batch_size}); raise it or shrink the rollout")


def check_spaces(args, obs_space, action_space):
    """Whether ppo_lstm.py handles the environment's spaces and --hide-obs; returns (obs_dim,
    the dimensions --hide-obs leaves; action_dim, continuous)."""
    if not (isinstance(action_space, gym.spaces.Discrete)
            or isinstance(action_space, gym.spaces.Box) and len(action_space.shape) == 1):
        fail(f"{args.env_id} has a {type(action_space).__name__} action space of shape "
             f"{action_space.shape}; ppo_lstm.py handles Discrete and flat Box actions (number "
             "MultiDiscrete or MultiBinary combinations as one Discrete action)")
    if not (isinstance(obs_space, gym.spaces.Box) and len(obs_space.shape) == 1):
        fail(f"{args.env_id} has a {type(obs_space).__name__} observation space of shape "
             f"{obs_space.shape}; ppo_lstm.py's encoder needs a flat Box (ppo_masked.py "
             "one-hot encodes Discrete ones, qlearning.py uses a table)")
    hide_obs = args.hide_obs
    if len(set(hide_obs)) < len(hide_obs) or not set(hide_obs) < set(range(obs_space.shape[0])):
        fail(f"--hide-obs {' '.join(map(str, hide_obs))} must name distinct dimensions among "
             f"{args.env_id}'s 0 to {obs_space.shape[0] - 1}, keeping at least one")
    continuous = isinstance(action_space, gym.spaces.Box)
    action_dim = action_space.shape[0] if continuous else int(action_space.n)
    return obs_space.shape[0] - len(hide_obs), action_dim, continuous


def greedy_policy(models, envs):
    """The evaluation's policy, act(obs, info) -> actions: the most likely action (the
    argmax of the logits, or the Gaussian's mean clipped to the bounds), the observation
    statistics frozen. Each environment carries its own LSTM state from zeros, never reset:
    only its first episode counts."""
    agent, normalizer = models["agent"], models["obs_rms"]
    device = next(agent.parameters()).device
    state = agent.initial_state(envs.num_envs, device)
    no_starts = torch.zeros(envs.num_envs, device=device)

    @torch.no_grad()
    def act(obs, info):
        nonlocal state
        action, state = agent.greedy(torch.from_numpy(normalizer(obs)).to(device), state,
                                     no_starts)
        return to_env_action(agent, action, envs.single_action_space)
    return act


# What a run is judged on, by environment id (its benchmark task in benchmark.py, its README
# row): (threshold, window of training episodes, "train": the last-window mean at the end,
# or "eval": the final greedy evaluation). Another id: its reward_threshold over 20, "train".
GOALS = {"CartPole-v1": (475, 20, "train", 100_000), "Pendulum-v1": (-200, 20, "train", 200_000),
         "Acrobot-v1": (-100, 100, "train", 300_000), "MountainCar-v0": (-110, 100, "train", 300_000),
         "LunarLander-v3": (200, 100, "train", 300_000),
         "InvertedDoublePendulum-v5": (9100, 100, "eval", 300_000),
         "Swimmer-v5": (360, 100, "eval", 300_000), "Reacher-v5": (-3.75, 100, "eval", 300_000)}
# a checkpoint's network is built by these, and it sees what --hide-obs leaves
MODEL_FLAGS = ("hidden_size", "lstm_hidden_size", "norm_obs", "hide_obs")
ENV_FLAGS = ("hide_obs",)  # the evaluation's environments drop those dimensions too


if __name__ == "__main__":
    cli()

# From plainrl (MIT licence, (c) 2026 the plainrl authors): keep this line in a copy.
"""Proximal Policy Optimization (PPO) for discrete and continuous actions, in one file.

PPO collects a rollout of T steps from N environments with the current policy, estimates
how much better each action was than expected (the advantage), and then takes several
epochs of minibatch gradient steps on a clipped surrogate objective that keeps the new
policy close to the one that collected the data.

Key equations. t indexes steps; done_t = terminated_t or truncated_t (either end).
terminated_t stops the bootstrap in delta_t; done_t stops the sum in A_t:

    ratio_t   = pi_theta(a_t | s_t) / pi_old(a_t | s_t)
    L_clip    = E[ min(ratio_t * A_t, clip(ratio_t, 1 - eps, 1 + eps) * A_t) ]
    GAE       delta_t = r_t + gamma * (1 - terminated_t) * V(s_{t+1}) - V(s_t)
              A_t     = delta_t + gamma * lambda * (1 - done_t) * A_{t+1}
    R_t       = A_t + V(s_t), the critic's return target
    loss      = -L_clip + c_v * 0.5 * (V(s_t) - R_t)^2 - c_e * entropy

with eps --clip-coef, gamma --gamma, lambda --gae-lambda, c_v --vf-coef, c_e --ent-coef.
A time limit's truncation is not a termination: that step bootstraps from the value of the
true final observation (Gymnasium's info["final_obs"]). --advantage vtrace replaces A_t and
R_t by V-trace's (compute_vtrace). An image observation gets a convolutional network (Agent);
an Atari id (ALE/...) also gets the DQN paper's preprocessing.

Papers: Schulman et al. 2017 (PPO, arXiv:1707.06347); Schulman et al. 2016 (GAE, ICLR);
Espeholt et al. 2018 (IMPALA's V-trace, ICML); Pardo et al. 2018 (Time Limits in RL, ICML);
Mnih et al. 2015 (DQN's network and Atari preprocessing, Nature 518); Young & Tian 2019
(MinAtar and its small-grid network, arXiv:1903.03176).

Run (docs/parts/script-by-script.md has more: Pendulum, MinAtar, your own environment):
    python ppo.py --env-id CartPole-v1
    python ppo.py --env-id Hopper-v5 --total-timesteps 1000000   # the continuous preset

Writes runs/<env_id>__ppo__<seed>__<unix_time>/: config.json, episodes.csv, updates.csv,
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
    # ALE/ ids (Atari) need ale-py, MinAtar/ ids minatar; module:id imports module first.
    env_id: str = "CartPole-v1"
    """a Gymnasium id (or module:id): Discrete or Box actions, flat Box or image observations"""
    seed: int = 1
    """seeds Python, NumPy, torch and the environments"""
    total_timesteps: int = 100_000
    """the training budget in environment steps, all environments together"""
    # None: decide by the observation (DisallowNone: the command line offers no "None" value).
    cuda: tyro.conf.DisallowNone[Optional[bool]] = None
    """--cuda: the GPU; --no-cuda: the CPU; neither: the GPU for an image, the CPU for a vector"""
    exp_name: str = os.path.splitext(SCRIPT)[0]
    """the experiment name, part of the run folder's name"""
    eval_episodes: int = 10
    """greedy evaluation episodes after training (0 skips evaluation)"""
    eval_every: int = 0
    """also evaluate greedily every N environment steps (0: only after training)"""
    # Some ids average over a longer window, 50 or 100 episodes: GOALS, below the banner.
    stop_at_return: Optional[float] = None
    """stop once the mean of the last 20 training returns (or GOALS' window) reaches this"""
    # Algorithm. A flag left at None takes the value of the environment's preset (PRESETS).
    preset: tyro.conf.DisallowNone[Optional[Literal["discrete", "continuous", "image"]]] = None
    """the settings of the flags left at None (None: the environment's family, PRESETS)"""
    num_envs: tyro.conf.DisallowNone[Optional[int]] = None
    """N: parallel environments (synchronous vector environment)"""
    num_steps: tyro.conf.DisallowNone[Optional[int]] = None
    """T: steps per environment in each rollout; the batch is N*T"""
    learning_rate: tyro.conf.DisallowNone[Optional[float]] = None
    """Adam learning rate (3e-4 in the PPO paper's MuJoCo runs, 2.5e-4 on Atari)"""
    anneal_lr: bool = True
    """decay the learning rate linearly to 0 at --total-timesteps (a longer run decays slower)"""
    gamma: tyro.conf.DisallowNone[Optional[float]] = None
    """discount factor (0.99 in the PPO paper)"""
    gae_lambda: tyro.conf.DisallowNone[Optional[float]] = None
    """lambda of GAE (0.95 in the PPO paper; 0.92-0.99 in the GAE paper's best runs)"""
    num_minibatches: tyro.conf.DisallowNone[Optional[int]] = None
    """minibatches per epoch; must divide N*T"""
    update_epochs: tyro.conf.DisallowNone[Optional[int]] = None
    """epochs over each rollout (3-10 in the PPO paper)"""
    norm_adv: bool = True
    """normalize advantages within each minibatch"""
    clip_coef: tyro.conf.DisallowNone[Optional[float]] = None
    """epsilon of the clipped surrogate (0.1-0.3 in the PPO paper's experiments)"""
    clip_vloss: tyro.conf.DisallowNone[Optional[bool]] = None
    """clip the value loss around the rollout's value estimates, as in the PPO baselines"""
    ent_coef: tyro.conf.DisallowNone[Optional[float]] = None
    """entropy bonus coefficient c_e (0 on MuJoCo, 0.01 on Atari in the PPO paper)"""
    vf_coef: float = 0.5
    """value loss coefficient c_v (0.5-1 in the PPO paper)"""
    max_grad_norm: float = 0.5
    """gradient clipping: the largest global norm of the gradient"""
    target_kl: Optional[float] = None
    """stop an update's remaining epochs once the mean approx KL of an epoch exceeds this"""
    advantage: Literal["gae", "vtrace"] = "gae"
    """advantage estimator: GAE, or V-trace targets recomputed before each epoch"""
    rho_bar: float = 1.0
    """V-trace: clip of rho, in the value targets and the policy gradient (1 in the IMPALA paper)"""
    c_bar: float = 1.0
    """V-trace: clip of the trace coefficient c (1 in the IMPALA paper)"""
    norm_obs: tyro.conf.DisallowNone[Optional[bool]] = None
    """normalize observations by running mean and variance, clip to [-10, 10] (kept in model.pt)"""
    norm_reward: tyro.conf.DisallowNone[Optional[bool]] = None
    """divide rewards by the running std of the discounted return, then clip to [-10, 10]"""
    hidden_size: int = 64
    """width of the two hidden layers of the actor and of the critic, for vector observations"""
    activation: Literal["tanh", "relu"] = "tanh"
    """the hidden layers' activation, for vector observations (tanh: PPO baselines; relu: RL Zoo)"""
    ortho_init: bool = True
    """orthogonal weights (gains sqrt 2, 0.01 actor out, 1 critic out); off: PyTorch's default"""
    log_std_init: float = 0.0
    """continuous actions: the starting log std of the Gaussian policy (std = exp of it)"""
    # ALE/ ids only (the DQN paper, CleanRL). The game plays on with the lives left; only the
    # learner treats a lost life as an end. episodes.csv records whole games.
    terminal_on_life_loss: bool = True
    """Atari: a lost life terminates in training (no bootstrap); evaluation plays whole games"""
    # Discrete actions only: an evaluation step acts at random with this probability, else greedily.
    # ALE/ ids: 0.05, as in the DQN papers and CleanRL: a policy that never presses FIRE idles.
    eval_epsilon: Optional[float] = None
    """the evaluation's probability of a uniformly random action (None: 0.05 on ALE/ ids, else 0)"""


# The presets of the flags left at None, by the environment's family (family(), below the
# banner): each is its source's settings, any departure named. A flag given overrides it.
PRESETS = {
    # Chosen on CartPole-v1 to solve it in a minute on a laptop (results.md, "ppo.py")
    "discrete": ("plainrl's CartPole settings", dict(
        num_envs=8, num_steps=64, learning_rate=4e-3, gamma=0.98, gae_lambda=0.9,
        num_minibatches=2, update_epochs=10, clip_coef=0.2, clip_vloss=False, ent_coef=0.0,
        norm_obs=False, norm_reward=False)),
    # Pendulum and MuJoCo: CleanRL's ppo_continuous_action.py, ppo.py's 64-64 tanh networks
    "continuous": ("CleanRL's ppo_continuous_action.py", dict(
        num_envs=1, num_steps=2048, learning_rate=3e-4, gamma=0.99, gae_lambda=0.95,
        num_minibatches=32, update_epochs=10, clip_coef=0.2, clip_vloss=True, ent_coef=0.0,
        norm_obs=True, norm_reward=True)),
    # MinAtar and Atari: CleanRL's ppo_atari.py but a rate of 1e-3 for its 2.5e-4, chosen on
    # MinAtar, where 2.5e-4 hardly moved the small network's policy (results.md)
    "image": ("CleanRL's ppo_atari.py at a rate of 1e-3", dict(
        num_envs=8, num_steps=128, learning_rate=1e-3, gamma=0.99, gae_lambda=0.95,
        num_minibatches=4, update_epochs=4, clip_coef=0.1, clip_vloss=True, ent_coef=0.01,
        norm_obs=False, norm_reward=False)),
}


# ---------------------------------------------------------------------------------------
# The math
# ---------------------------------------------------------------------------------------
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


def compute_vtrace(rewards, values, next_values, terminated, truncated, log_rhos, gamma,
                   rho_bar=1.0, c_bar=1.0):
    """V-trace targets and advantages (Espeholt et al. 2018), with time limits handled.

    Inputs are [T, N] tensors as in compute_gae, plus log_rhos[t] =
    log pi(a_t|s_t) - log mu(a_t|s_t), the log importance weight of the target policy pi
    over the behaviour policy mu. With done_t = terminated_t or truncated_t:

        rho_t   = min(rho_bar, exp(log_rhos_t)),   c_t = min(c_bar, exp(log_rhos_t))
        delta_t = rho_t * (r_t + gamma * (1 - terminated_t) * next_values_t - values_t)
        vs_t - values_t = delta_t + gamma * c_t * (1 - done_t) * (vs_{t+1} - values_{t+1}),
                          with vs_T - values_T = 0
        G_t     = vs_{t+1} if t < T-1 and not done_t, else next_values_t
        adv_t   = rho_t * (r_t + gamma * (1 - terminated_t) * G_t - values_t)

    Returns (advantages, vs), each [T, N], in compute_gae's order: vs is the value target.
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
    G_before_last = torch.where(done[:-1], next_values[:-1], vs[1:])  # G_t for t < T-1
    G = torch.cat([G_before_last, next_values[-1:]])  # and G_{T-1} = next_values_{T-1}
    advantages = rhos * (rewards + gamma * not_terminated * G - values)
    return advantages, vs


def ppo_loss(newlogprob, oldlogprob, advantages, newvalue, oldvalue, returns, entropy,
             clip_coef, ent_coef, vf_coef, clip_vloss=False):
    """The PPO loss to minimize on a minibatch of B samples (all inputs are [B] tensors).

        ratio  = exp(newlogprob - oldlogprob)
        L_pg   = mean( max(-A * ratio, -A * clip(ratio, 1 - eps, 1 + eps)) )
        L_v    = mean( 0.5 * (V - R)^2 ),  or with clip_vloss
                 mean( 0.5 * max((V - R)^2, (V_old + clip(V - V_old, -eps, eps) - R)^2) )
        loss   = L_pg - c_e * mean(entropy) + c_v * L_v

    Returns (loss, L_pg, L_v, mean entropy) with their graphs; train() normalizes A (--norm-adv).
    """
    ratio = torch.exp(newlogprob - oldlogprob)
    clipped_ratio = torch.clamp(ratio, 1 - clip_coef, 1 + clip_coef)
    pg_loss = torch.max(-advantages * ratio, -advantages * clipped_ratio).mean()
    v_loss = (newvalue - returns) ** 2
    if clip_vloss:
        v_clipped = oldvalue + torch.clamp(newvalue - oldvalue, -clip_coef, clip_coef)
        v_loss = torch.max(v_loss, (v_clipped - returns) ** 2)
    v_loss = 0.5 * v_loss.mean()
    mean_entropy = entropy.mean()
    return pg_loss - ent_coef * mean_entropy + vf_coef * v_loss, pg_loss, v_loss, mean_entropy


def explained_variance(values, returns):
    """1 - Var[R - V] / Var[R]: 1 when the critic predicts the targets, 0 or less when it
    does no better than their mean (NaN when the targets do not vary)."""
    var_returns = returns.var().item()
    return 1 - (returns - values).var().item() / var_returns if var_returns else math.nan


class RolloutBuffer:
    """One rollout of T steps from N environments, preallocated on the device.

    Row t holds what was seen and done at step t: obs s_t, action a_t, the behaviour
    log-probability log mu(a_t|s_t), reward r_t, the terminated/truncated flags of the
    step, and V(s_t). final_obs[t, n] holds the true final observation where environment n
    was truncated at step t (its value is bootstrapped); last_obs is s_T, after the rollout.
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
        """next_values[t] = V(s_{t+1}) for every step, from values [T, N] of the rollout.

        s_{t+1} is obs[t+1] inside the rollout, last_obs after it, and the true final
        observation where the step was truncated. Where the step was terminated, the entry
        keeps the next episode's first value; (1 - terminated_t) multiplies it by 0.
        """
        next_values = torch.empty_like(values)
        next_values[:-1] = values[1:]
        next_values[-1] = value_fn(self.last_obs)
        where = self.truncated.nonzero(as_tuple=True)
        if where[0].numel():
            next_values[where] = value_fn(self.final_obs[where])
        return next_values

    @torch.no_grad()
    def gae(self, value_fn, gamma, gae_lambda):
        """GAE advantages and returns [T, N] from the values stored during the rollout."""
        next_values = self.next_values(value_fn, self.values)
        return compute_gae(self.rewards, self.values, next_values, self.terminated,
                           self.truncated, gamma, gae_lambda)

    @torch.no_grad()
    def vtrace(self, agent, gamma, rho_bar, c_bar):
        """V-trace (advantages, vs) [T, N] under the agent's current policy pi and critic:
        log rho = log pi(a_t|s_t) - log mu(a_t|s_t), mu the policy that acted."""
        obs, actions = self.obs.flatten(0, 1), self.actions.flatten(0, 1)  # [T * N, ...]
        _, logprobs, _, values = agent.get_action_and_value(obs, actions)
        values = values.view_as(self.values)  # back to [T, N]
        next_values = self.next_values(agent.get_value, values)
        log_rhos = logprobs.view_as(self.logprobs) - self.logprobs  # log pi - log mu
        return compute_vtrace(self.rewards, values, next_values, self.terminated,
                              self.truncated, log_rhos, gamma, rho_bar, c_bar)


# ---------------------------------------------------------------------------------------
# Networks
# ---------------------------------------------------------------------------------------
def layer_init(layer, std=math.sqrt(2), bias_const=0.0, ortho=True):
    """Orthogonal weights with gain std and constant bias, as in the PPO baselines; with
    ortho=False the layer keeps PyTorch's default initialization."""
    if ortho:
        nn.init.orthogonal_(layer.weight, std)
        nn.init.constant_(layer.bias, bias_const)
    return layer


def mlp(in_size, hidden_size, out_size, out_std, activation="tanh", ortho=True):
    """[B, in_size] -> [B, out_size]: y = W3 f(W2 f(W1 x + b1) + b2) + b3, with f tanh or
    ReLU (--activation); the last layer's orthogonal gain is out_std (0.01 for the actor's
    mean, 1 for the value), unless ortho=False (--no-ortho-init)."""
    act = {"tanh": nn.Tanh, "relu": nn.ReLU}[activation]
    return nn.Sequential(
        layer_init(nn.Linear(in_size, hidden_size), ortho=ortho), act(),
        layer_init(nn.Linear(hidden_size, hidden_size), ortho=ortho), act(),
        layer_init(nn.Linear(hidden_size, out_size), std=out_std, ortho=ortho),
    )


class ImageEncoder(nn.Module):
    """Convolutions from an image to a feature vector, with ReLU after every layer.

    channels_last: H x W x C images (Gymnasium's and MinAtar's convention); otherwise
    C x H x W (atari_wrappers' stack of frames). uint8: 0-255 pixels, scaled to [0, 1].
    Two networks, by the image's smaller side:

        36 or more (Atari's 84 x 84; Mnih et al. 2015): conv 32 8x8 stride 4,
            conv 64 4x4 stride 2, conv 64 3x3 stride 1, linear 512
        under 36 (MinAtar's 10 x 10; Young & Tian 2019): conv 16 3x3 stride 1, linear 128
    """

    def __init__(self, obs_shape, uint8, channels_last=True):
        super().__init__()
        # A flag, not a guess from the sizes: MinAtar's Seaquest frames are 10 x 10 x 10.
        self.channels_last, self.uint8 = channels_last, uint8
        # [C, H, W]: a channels-last frame's axes moved, a channels-first frame's kept
        image_shape = (obs_shape[2], *obs_shape[:2]) if self.channels_last else tuple(obs_shape)
        channels, height, width = image_shape
        large = min(height, width) >= 36
        convs = [(32, 8, 4), (64, 4, 2), (64, 3, 1)] if large else [(16, 3, 1)]
        self.output_size = 512 if large else 128
        layers = []
        for out_channels, kernel, stride in convs:
            layers += [layer_init(nn.Conv2d(channels, out_channels, kernel, stride)), nn.ReLU()]
            channels = out_channels
        self.convs = nn.Sequential(*layers, nn.Flatten())
        # The linear layer's input size, from a blank image run through. A convolution makes a
        # side (side - kernel) // stride + 1: Atari's 84 -> 20 -> 9 -> 7, MinAtar's 10 -> 8.
        with torch.no_grad():
            flat_size = self.convs(torch.zeros(1, *image_shape)).shape[1]
        self.linear = nn.Sequential(layer_init(nn.Linear(flat_size, self.output_size)), nn.ReLU())

    def forward(self, obs):
        images = obs.float() / 255.0 if self.uint8 else obs.float()
        if self.channels_last:
            images = images.movedim(-1, -3)  # [B, H, W, C] -> [B, C, H, W]
        return self.linear(self.convs(images))


class Agent(nn.Module):
    """Separate actor and critic MLPs on a vector observation; on an image, one shared
    ImageEncoder under a linear actor head and a linear critic head. The actor outputs the
    logits of a categorical distribution, or the mean of a diagonal Gaussian whose log std
    is a learned state-independent parameter."""

    def __init__(self, obs_shape, action_dim, continuous, hidden_size=64, uint8=False,
                 channels_last=True, activation="tanh", ortho_init=True, log_std_init=0.0):
        super().__init__()
        self.continuous = continuous
        if len(obs_shape) == 3:  # an image
            self.encoder = ImageEncoder(obs_shape, uint8, channels_last)
            self.critic = layer_init(nn.Linear(self.encoder.output_size, 1), std=1.0)
            self.actor = layer_init(nn.Linear(self.encoder.output_size, action_dim), std=0.01)
        else:
            self.encoder = nn.Identity()
            self.critic = mlp(obs_shape[0], hidden_size, 1, out_std=1.0,
                              activation=activation, ortho=ortho_init)
            self.actor = mlp(obs_shape[0], hidden_size, action_dim, out_std=0.01,
                             activation=activation, ortho=ortho_init)
        if continuous:
            self.actor_logstd = nn.Parameter(torch.full((1, action_dim), float(log_std_init)))

    def get_value(self, obs):
        return self.critic(self.encoder(obs)).squeeze(-1)

    def get_action_and_value(self, obs, action=None):
        """(action, log-probability, entropy, value) for each observation, sampling the
        action from the policy when none is given. A Gaussian's dimensions are independent:
        their log-probabilities and entropies add up."""
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
        return action, logprob, entropy, self.critic(features).squeeze(-1)


# ---------------------------------------------------------------------------------------
# What the agent sees and sends: normalized observations and rewards, clipped actions
# ---------------------------------------------------------------------------------------
def make_vector_env(env_id, num_envs, training=False, reward_gamma=None, life_loss=False,
                    video_folder=None):
    """N copies of env_id in one synchronous vector environment with SAME_STEP autoreset:
    the step that ends an episode returns the next episode's first observation, and the
    true last one in info["final_obs"]. Then the wrappers, in order:

    - Gymnasium's episode statistics, on raw rewards: episodes.csv keeps whole games' scores.
    - Atari in training: a lost life as a termination (with life_loss; LifeLossTermination),
      and rewards clipped to their sign (the DQN paper).
    - reward_gamma (--norm-reward): Gymnasium's NormalizeReward divides rewards by the running
      std of the return discounted by it; then they are clipped to [-10, 10].

    Below the banner, pixels.py's make_game (gym.make for any id, an ALE/ game preprocessed as
    in the DQN paper; with video_folder, an evaluation's game recorded as eval-<i>) and
    LifeLossTermination."""
    atari = env_id.startswith("ALE/")
    envs = gym.vector.SyncVectorEnv([lambda i=i: make_game(env_id, video_folder, f"eval-{i}")
                                     for i in range(num_envs)],
                                    autoreset_mode=gym.vector.AutoresetMode.SAME_STEP)
    envs = gym.wrappers.vector.RecordEpisodeStatistics(envs)
    if atari and training and life_loss:  # after the statistics: episodes.csv has whole games
        envs = LifeLossTermination(envs)
    if atari and training:
        envs = gym.wrappers.vector.TransformReward(envs, np.sign)
    if reward_gamma is not None:
        envs = gym.wrappers.vector.NormalizeReward(envs, gamma=reward_gamma)
        envs = gym.wrappers.vector.ClipReward(envs, -10.0, 10.0)
    return envs


class ObsNormalizer:
    """(obs - mean) / sqrt(var + 1e-8), clipped to [-10, 10], with running statistics
    (Gymnasium's RunningMeanStd); disabled, it passes observations through as float32.
    Not Gymnasium's vector NormalizeObservation: it refuses SAME_STEP autoreset and would
    leave info["final_obs"] raw. train() calls this on both the observations and the final ones."""

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


def to_env_action(agent, actions, action_space):
    """Tensor actions to what the environment takes: a Gaussian sample clipped to the bounds."""
    actions = actions.cpu().numpy()
    if agent.continuous:
        return np.clip(actions, action_space.low, action_space.high)
    return actions


# ---------------------------------------------------------------------------------------
# Training
# ---------------------------------------------------------------------------------------
def train(args, agent, normalizer, envs, run, device):
    """PPO's loop: collect a rollout, compute advantages and return targets, take epochs of
    minibatch steps on ppo_loss, log; until the budget, --stop-at-return or a non-finite loss.
    run (Run, below the banner) writes the run folder: run.step after each environment step,
    run.update after each update; each returns True when training should stop."""
    # eps = 1e-5 as in the PPO authors' baselines (torch's default is 1e-8)
    optimizer = torch.optim.Adam(agent.parameters(), lr=args.learning_rate, eps=1e-5)
    buffer = RolloutBuffer(args.num_steps, args.num_envs, envs.single_observation_space.shape,
                           envs.single_action_space.shape, agent.continuous, device)
    batch_size = args.num_envs * args.num_steps
    minibatch_size = batch_size // args.num_minibatches
    num_iterations = args.total_timesteps // batch_size
    global_step = 0
    first_obs, _ = envs.reset(seed=args.seed)
    next_obs = torch.from_numpy(normalizer(first_obs, update=True)).to(device)
    for iteration in range(1, num_iterations + 1):
        if args.anneal_lr:  # linearly from --learning-rate at the start to 0 at the end
            for group in optimizer.param_groups:
                group["lr"] = args.learning_rate * (1 - (iteration - 1) / num_iterations)

        # Rollout: T steps of the N environments with the current policy.
        for step in range(args.num_steps):
            with torch.no_grad():
                action, logprob, _, value = agent.get_action_and_value(next_obs)
            buffer.obs[step], buffer.actions[step] = next_obs, action
            buffer.logprobs[step], buffer.values[step] = logprob, value
            # A Gaussian sample is clipped to the action bounds for the environment only: the
            # buffer keeps the unclipped sample, whose log-probability the ratio compares.
            obs, reward, terminated, truncated, info = envs.step(
                to_env_action(agent, action, envs.single_action_space))
            global_step += args.num_envs
            # run.step: the episodes that ended into episodes.csv, --eval-every's evaluation,
            # the progress line; True once the last episodes' mean reaches --stop-at-return.
            if run.step(global_step, info):
                return
            # --norm-reward: the reward arrives scaled and clipped to [-10, 10] (make_vector_env)
            buffer.rewards[step] = torch.from_numpy(reward).to(device)
            buffer.terminated[step] = torch.from_numpy(terminated).to(device)
            buffer.truncated[step] = torch.from_numpy(truncated).to(device)
            # Only a truncated step bootstraps from its true final observation (a terminated one
            # from nothing). --norm-obs normalizes it but does not update the statistics with it:
            # they follow only the observations the agent acts on.
            for i in np.flatnonzero(truncated):
                final_obs = normalizer(info["final_obs"][i])
                buffer.final_obs[step, i] = torch.from_numpy(final_obs).to(device)
            next_obs = torch.from_numpy(normalizer(obs, update=True)).to(device)
        buffer.last_obs.copy_(next_obs)

        # Targets: GAE sets advantages and returns here; V-trace sets them in each epoch below.
        if args.advantage == "gae":
            advantages, returns = buffer.gae(agent.get_value, args.gamma, args.gae_lambda)
        b_obs, b_actions = buffer.obs.flatten(0, 1), buffer.actions.flatten(0, 1)
        b_logprobs, b_values = buffer.logprobs.flatten(), buffer.values.flatten()

        # Update: epochs of minibatch gradient steps on the rollout.
        approx_kls, clipfracs = [], []
        for epoch in range(args.update_epochs):
            if args.advantage == "vtrace":  # under the current policy
                advantages, returns = buffer.vtrace(agent, args.gamma, args.rho_bar, args.c_bar)
            b_advantages, b_returns = advantages.flatten(), returns.flatten()
            for idx in torch.randperm(batch_size, device=device).split(minibatch_size):
                _, newlogprob, entropies, newvalue = agent.get_action_and_value(
                    b_obs[idx], b_actions[idx])
                adv = b_advantages[idx]  # normalized within the minibatch unless --no-norm-adv
                adv = (adv - adv.mean()) / (adv.std() + 1e-8) if args.norm_adv else adv
                loss, pg_loss, v_loss, entropy = ppo_loss(
                    newlogprob=newlogprob, oldlogprob=b_logprobs[idx], advantages=adv,
                    newvalue=newvalue, oldvalue=b_values[idx], returns=b_returns[idx],
                    entropy=entropies, clip_coef=args.clip_coef, ent_coef=args.ent_coef,
                    vf_coef=args.vf_coef, clip_vloss=args.clip_vloss)
                optimizer.zero_grad()
                loss.backward()
                nn.utils.clip_grad_norm_(agent.parameters(), args.max_grad_norm)
                optimizer.step()
                # Diagnostics: approx KL(old || new) = mean(ratio - 1 - log ratio), an estimate
                # that is never negative; clipfrac, the fraction of ratios the clip cut
                logratio = (newlogprob - b_logprobs[idx]).detach()
                ratio = logratio.exp()
                approx_kls.append((ratio - 1 - logratio).mean().item())
                clipfracs.append(((ratio - 1).abs() > args.clip_coef).float().mean().item())
            epoch_kls = approx_kls[-args.num_minibatches:]  # this epoch's, one per minibatch
            if args.target_kl is not None and np.mean(epoch_kls) > args.target_kl:
                break

        # updates.csv's row: the losses and entropy of the last minibatch; approx_kl and
        # clipfrac, means. True (and no row) when the loss is NaN or inf: training stops.
        if run.update(global_step, loss.item(), learning_rate=optimizer.param_groups[0]["lr"],
                      policy_loss=pg_loss.item(), value_loss=v_loss.item(), entropy=entropy.item(),
                      approx_kl=np.mean(approx_kls), clipfrac=np.mean(clipfracs),
                      explained_variance=explained_variance(b_values, b_returns), epochs=epoch + 1):
            return


def main(args: Args) -> dict:
    """Train PPO (or evaluate an --eval-checkpoint), write the run folder, return the summary.
    Ctrl-C stops training; the run folder is written, then KeyboardInterrupt goes on up."""
    # prepare (below the banner): the environment made and checked, the flags left at None
    # from its family's preset (PRESETS), every flag checked (a mistake: one line, exit
    # status 2), --eval-checkpoint's model read, the seeds set, the device chosen.
    args, (obs_space, action_dim, continuous), checkpoint, device = prepare(args)

    # Set up: the agent, the normalizer, the run folder. For an image, image_layout reads the
    # pixel type and the channel axis (pixels.py's, below the banner).
    agent = Agent(obs_space.shape, action_dim, continuous, args.hidden_size,
                  **image_layout(obs_space, args.env_id),
                  activation=args.activation, ortho_init=args.ortho_init,
                  log_std_init=args.log_std_init).to(device)
    normalizer = ObsNormalizer(obs_space.shape, args.norm_obs)
    models = {"agent": agent, "obs_rms": normalizer}  # what model.pt holds
    run = Run(args, device, models, checkpoint, rollout_steps=args.num_envs * args.num_steps)

    # With --eval-checkpoint nothing trains: no training environments (None). run.train runs
    # train(), then evaluates, saves and writes the run folder.
    envs = None if checkpoint else make_vector_env(
        args.env_id, args.num_envs, training=True, life_loss=args.terminal_on_life_loss,
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
# What the plumbing asks of ppo.py: its own checks, its greedy policy, its model's flags
# ---------------------------------------------------------------------------------------
def check_flags(args):
    """ppo.py's own flags, checked by prepare before training."""
    check_range(args, positive=["num_envs", "num_steps", "num_minibatches", "update_epochs",
                                "hidden_size", "learning_rate", "clip_coef", "rho_bar", "c_bar",
                                "max_grad_norm"],
                fraction=["gamma", "gae_lambda", "eval_epsilon"])
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
    """Whether ppo.py handles the environment's spaces; returns (observation space,
    action_dim, continuous)."""
    if not (isinstance(action_space, gym.spaces.Discrete)
            or isinstance(action_space, gym.spaces.Box) and len(action_space.shape) == 1):
        fail(f"{args.env_id} has a {type(action_space).__name__} action space of shape "
             f"{action_space.shape}; ppo.py handles Discrete and flat Box actions (for "
             "MultiDiscrete or MultiBinary, number the combinations as one Discrete action; "
             "ppo_masked.py can then mask the invalid ones)")
    if not (isinstance(obs_space, gym.spaces.Box) and len(obs_space.shape) in (1, 3)):
        fail(f"{args.env_id} has a {type(obs_space).__name__} observation space of shape "
             f"{obs_space.shape}; ppo.py needs a flat Box or an image Box (H x W x C, channels "
             "last; a 2-D frame gets its channel from gymnasium.wrappers.ReshapeObservation; "
             "ppo_masked.py one-hot encodes Discrete ones, qlearning.py uses a table)")
    check_image(args, obs_space)  # pixels.py's: 3 x 3 pixels or more
    if args.norm_obs and len(obs_space.shape) == 3:
        fail("--norm-obs is for vector observations; the network scales an image's pixels itself")
    continuous = isinstance(action_space, gym.spaces.Box)
    if continuous and args.eval_epsilon:
        fail(f"--eval-epsilon is for Discrete actions; {args.env_id}'s are continuous")
    return obs_space, action_space.shape[0] if continuous else int(action_space.n), continuous


def greedy_policy(models, envs):
    """The evaluation's policy, act(obs, info) -> actions: the most likely action (the
    argmax of the logits, or the Gaussian's mean clipped to the bounds), the observation
    statistics frozen."""
    agent, normalizer = models["agent"], models["obs_rms"]
    device = next(agent.parameters()).device

    @torch.no_grad()
    def act(obs, info):
        out = agent.actor(agent.encoder(torch.from_numpy(normalizer(obs)).to(device)))
        return to_env_action(agent, out if agent.continuous else out.argmax(-1),
                             envs.single_action_space)
    return act


# What a run is judged on, by environment id (its benchmark task in benchmark.py, its README
# row): (threshold, window of training episodes, "train": the last-window mean at the end,
# or "eval": the final greedy evaluation). Another id: its reward_threshold over 20, "train".
GOALS = {"CartPole-v1": (475, 20, "train", 100_000), "Pendulum-v1": (-200, 20, "eval", 200_000),
         "MinAtar/Asterix-v1": (5, 100, "train", 1_000_000),
         "MinAtar/Breakout-v1": (5, 100, "train", 1_000_000),
         "MinAtar/Freeway-v1": (20, 100, "train", 1_000_000),
         "MinAtar/Seaquest-v1": (5, 100, "train", 1_000_000),
         "MinAtar/SpaceInvaders-v1": (20, 100, "train", 1_000_000),
         "Hopper-v5": (2410, 100, "eval", 1_000_000),
         "HalfCheetah-v5": (5819, 100, "eval", 1_000_000),
         "Walker2d-v5": (3479, 100, "eval", 1_000_000),
         "MountainCar-v0": (-120, 50, "train", 300_000),
         "SparseChain-v0": (0.9, 50, "train", 100_000),
         "CartPoleNoVel-v1": (475, 20, "train", 100_000),
         "MountainCarContinuous-v0": (90, 20, "train", 300_000),
         "InvertedDoublePendulum-v5": (9100, 100, "eval", 300_000),
         "Swimmer-v5": (360, 100, "eval", 300_000), "Reacher-v5": (-3.75, 100, "eval", 300_000)}
MODEL_FLAGS = ("hidden_size", "norm_obs", "activation")  # a checkpoint's network is built by these


if __name__ == "__main__":
    cli()

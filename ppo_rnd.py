# From plainrl (MIT licence, (c) 2026 the plainrl authors): keep this line in a copy.
"""PPO with Random Network Distillation (RND): exploration by an intrinsic reward, in one file.

On a sparse-reward task a policy that explores by its own noise alone may never see the reward.
RND pays the agent for reaching states it has not learned yet: a fixed, random target network f
maps a state to k features, a predictor network f_hat learns to reproduce them on the states
visited, and its error is the intrinsic reward (large where the agent has rarely been, falling
as states become familiar). PPO learns from two reward streams, each with its own value head
and discount, and acts on the weighted sum of their advantages.

Key equations (t indexes steps of one environment, s_{t+1} the state step t reached):

    x            = clip((s - mu_s) / sigma_s, -5, 5), the RND's normalized state (mu_s,
                   sigma_s: running mean and std of the states, started from random steps)
    i_t          = (1/k) * sum_j (f_hat_j(x_{t+1}) - f_j(x_{t+1}))^2, the predictor's error
    R^int_t      = gamma_int * R^int_{t-1} + i_t, a discounted sum run forward, never reset
    r^int_t      = i_t / sigma_R, sigma_R the running std of R^int over all rollouts so far
    A^ext, R^ext = GAE(r^ext, V_ext, gamma, lambda), episodic: a termination cuts it, a
                   time limit bootstraps from the true final observation (as in ppo.py)
    A^int, R^int = GAE(r^int, V_int, gamma_int, lambda), non-episodic: no episode end cuts
                   it, the stream runs on into the next episode's first state
    A_t          = c_ext * A^ext_t + c_int * A^int_t
    loss         = -L_clip(A) + c_v * 0.5 * ((V_ext - R^ext)^2 + (V_int - R^int)^2)
                   - c_e * entropy + L_rnd
    L_rnd        = mean over a random fraction p of each minibatch of (1/k) * ||f_hat(x) - f(x)||^2

with L_clip, GAE, lambda, c_v and c_e as in ppo.py, gamma and gamma_int the two discounts, c_ext
and c_int (--ext-coef, --int-coef) the advantages' weights; only the predictor learns L_rnd.

Paper: Burda, Edwards, Storkey, Klimov 2019, "Exploration by Random Network Distillation",
ICLR 2019 (arXiv:1810.12894). Departures (the page lists them): MLPs for the RND networks, the
value heads apart, gamma 0.99, and int_coef 256 for Discrete actions (PRESETS, below).

Run:
    python ppo_rnd.py                                # MountainCar-v0, 300k steps
    python ppo_rnd.py --int-coef 0                   # the same run as plain PPO
    python ppo_rnd.py --env-id MountainCarContinuous-v0   # Box actions: the continuous preset

Writes runs/<env_id>__ppo_rnd__<seed>__<unix_time>/: config.json, episodes.csv, updates.csv
(with each rollout's mean intrinsic reward), summary.json, curve.png, TensorBoard's events.
"""

# ---------------------------------------------------------------------------------------
# Imports
# ---------------------------------------------------------------------------------------
import contextlib
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
from torch.distributions import Categorical, Normal

SCRIPT = os.path.basename(__file__)


# ---------------------------------------------------------------------------------------
# Flags
# ---------------------------------------------------------------------------------------
@dataclass
class Args:
    # The run folder's flags (--output-dir, --save-model, --eval-checkpoint, --track, ...)
    # come after these: every script shares them, declared once in RunFlags below the banner.
    env_id: str = "MountainCar-v0"
    """a Gymnasium id (or module:id) with Discrete or Box actions and flat Box observations"""
    seed: int = 1
    """seeds Python, NumPy, torch and the environments"""
    total_timesteps: int = 300_000
    """the training budget in environment steps, all environments together"""
    # Neither: a flat input's small network is faster on one CPU thread (results.md, "On a GPU").
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
    # Algorithm: PPO
    num_envs: tyro.conf.DisallowNone[Optional[int]] = None
    """N: parallel environments (synchronous vector environment)"""
    num_steps: tyro.conf.DisallowNone[Optional[int]] = None
    """T: steps per environment in each rollout; the batch is N*T"""
    learning_rate: tyro.conf.DisallowNone[Optional[float]] = None
    """Adam learning rate of the agent and the predictor (1e-4 in the RND paper)"""
    anneal_lr: bool = True
    """decay the learning rate linearly to 0 over the budget (so the budget changes the schedule)"""
    gamma: float = 0.99
    """discount of the extrinsic stream (0.999 in the RND paper)"""
    gae_lambda: float = 0.95
    """lambda of GAE, both streams (0.95 in the RND paper)"""
    num_minibatches: tyro.conf.DisallowNone[Optional[int]] = None
    """minibatches per epoch; must divide N*T"""
    update_epochs: tyro.conf.DisallowNone[Optional[int]] = None
    """epochs over each rollout (4 in the RND paper)"""
    norm_adv: bool = True
    """normalize the combined advantages within each minibatch"""
    clip_coef: float = 0.2
    """epsilon of the clipped surrogate (0.1 in the RND paper, 0.1-0.3 in the PPO paper's)"""
    ent_coef: float = 0.0
    """entropy bonus coefficient c_e (0.001 in the RND paper)"""
    vf_coef: float = 0.5
    """value loss coefficient c_v, of each stream's value loss"""
    max_grad_norm: float = 0.5
    """gradient clipping: the largest global norm of the gradient"""
    target_kl: Optional[float] = None
    """stop an update's remaining epochs once the mean approx KL of an epoch exceeds this"""
    norm_obs: bool = True
    """normalize the policy's observations by running mean and variance, clip to [-10, 10]"""
    norm_reward: tyro.conf.DisallowNone[Optional[bool]] = None
    """divide extrinsic rewards by the running std of their discounted return, clip to [-10, 10]"""
    hidden_size: int = 64
    """width of the two hidden layers of the actor, the value heads and the RND networks"""
    # Algorithm: RND
    int_coef: tyro.conf.DisallowNone[Optional[float]] = None
    """c_int, weight of the intrinsic advantage (1 in the RND paper; 0: PPO)"""
    ext_coef: float = 2.0
    """c_ext, weight of the extrinsic advantage (2 in the RND paper; 0: exploration alone)"""
    gamma_int: float = 0.99
    """discount of the non-episodic intrinsic stream (0.99 in the RND paper)"""
    rnd_output_size: int = 64
    """k: features of the target and predictor networks (512 in the RND paper)"""
    # 1.0 in the authors' run_atari.py.
    rnd_update_proportion: float = 0.25
    """p: the fraction of each minibatch the predictor trains on (0.25 in the RND paper's table)"""
    rnd_init_steps: int = 128
    """random steps per environment that start the RND's state statistics"""


# The presets of the flags left at None, by the environment's family (family(), below the
# banner): each is its source's settings, any departure named. A flag given overrides it.
PRESETS = {
    # Chosen on MountainCar-v0, seeds 1-5: int_coef 256 where the paper has 1, as MountainCar's
    # -1 a step leaves the extrinsic advantage only the critic's error (results.md, "ppo_rnd.py")
    "discrete": ("plainrl's MountainCar settings", dict(
        num_envs=8, num_steps=128, learning_rate=1e-3, num_minibatches=4, update_epochs=4,
        norm_reward=False, int_coef=256.0)),
    # Pendulum, MuJoCo and sparse MountainCarContinuous: ppo.py's continuous preset, with the
    # RND paper's weights of the two advantages (int_coef 1, ext_coef 2)
    "continuous": ("CleanRL's ppo_continuous_action.py with the RND paper's int_coef 1", dict(
        num_envs=1, num_steps=2048, learning_rate=3e-4, num_minibatches=32, update_epochs=10,
        norm_reward=True, int_coef=1.0)),
}


# ---------------------------------------------------------------------------------------
# The math
# ---------------------------------------------------------------------------------------
def compute_gae(rewards, values, next_values, terminated, truncated, gamma, gae_lambda):
    """Generalized advantage estimation with time limits handled (Schulman et al. 2016).

    All inputs are [T, N] tensors; terminated and truncated are 0/1 or bool. values[t] =
    V(s_t); next_values[t] = V(s_{t+1}), of the observation that followed step t (the true
    final observation where the episode ended at t). With done_t = terminated_t or truncated_t:

        delta_t = r_t + gamma * (1 - terminated_t) * next_values_t - values_t
        A_t     = delta_t + gamma * lambda * (1 - done_t) * A_{t+1},   A_T = 0
        returns = A + values

    The intrinsic stream calls it with terminated = truncated = 0 (no end cuts it).
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


def intrinsic_reward(predicted, target):
    """The RND error of each state: i = (1/k) * sum_j (f_hat_j(x) - f_j(x))^2, from
    predicted = f_hat(x) and target = f(x), [..., k] tensors; returns [...]. (The authors'
    code takes the mean over the k features too, for the reward and the loss.)"""
    return ((predicted - target) ** 2).mean(-1)


def predictor_loss(predicted, target, keep):
    """The predictor's loss on the kept samples of a minibatch of B:

        L_rnd = sum_b keep_b * i_b / max(1, sum_b keep_b),   i_b = intrinsic_reward(b)

    predicted, target [B, k]; keep [B] of 0/1 (each sample kept with probability p). The
    target is detached: only the predictor learns."""
    keep = keep.to(predicted.dtype)
    return (keep * intrinsic_reward(predicted, target.detach())).sum() / keep.sum().clamp(min=1)


def discounted_sums(rewards, last, gamma):
    """The forward discounted sum of each environment's rewards, never reset:

        R_t = gamma * R_{t-1} + r_t,   R_{-1} = last

    rewards [T, N] and last [N] NumPy arrays; returns R [T, N] (R[-1] is the next last)."""
    sums = np.empty_like(rewards, dtype=np.float64)
    for t in range(rewards.shape[0]):
        last = sums[t] = gamma * last + rewards[t]
    return sums


class IntrinsicRewardScaler:
    """r_int = i / sqrt(Var[R] + 1e-8): each rollout's intrinsic rewards divided by the running
    std of their forward discounted sums R (discounted_sums, carried from rollout to rollout),
    over every R so far (RunningMeanStd merges each rollout's moments). The mean is not
    subtracted: the rewards stay >= 0. (1e-8: the authors divide by the std alone.) rewards:
    [T, N] NumPy in and out; self.last keeps R's last row, self.rms each R before dividing."""

    def __init__(self, num_envs, gamma):
        self.gamma, self.last = gamma, np.zeros(num_envs)
        self.rms = RunningMeanStd(shape=())

    def __call__(self, rewards):
        sums = discounted_sums(rewards, self.last, self.gamma)
        self.last = sums[-1]
        self.rms.update(sums.reshape(-1))
        return (rewards / np.sqrt(self.rms.var + 1e-8)).astype(np.float32)


def combine_advantages(advantages_ext, advantages_int, ext_coef, int_coef):
    """The advantage the policy follows: A = c_ext * A_ext + c_int * A_int (any shape)."""
    return ext_coef * advantages_ext + int_coef * advantages_int


def ppo_loss(newlogprob, oldlogprob, advantages, newvalue, oldvalue, returns, entropy,
             clip_coef, ent_coef, vf_coef):
    """ppo.py's PPO loss on a minibatch of B samples (all inputs are [B] tensors), here on
    the combined advantage and the extrinsic value head:

        ratio  = exp(newlogprob - oldlogprob)
        L_pg   = mean( max(-A * ratio, -A * clip(ratio, 1 - eps, 1 + eps)) )
        L_v    = mean( 0.5 * (V - R)^2 )
        loss   = L_pg - c_e * mean(entropy) + c_v * L_v

    Returns (loss, L_pg, L_v, mean entropy). oldvalue is unused (no value clipping: the
    RND authors' code has none), kept so that the call reads as ppo.py's."""
    ratio = torch.exp(newlogprob - oldlogprob)
    clipped_ratio = torch.clamp(ratio, 1 - clip_coef, 1 + clip_coef)
    pg_loss = torch.max(-advantages * ratio, -advantages * clipped_ratio).mean()
    v_loss = 0.5 * ((newvalue - returns) ** 2).mean()
    entropy = entropy.mean()
    return pg_loss - ent_coef * entropy + vf_coef * v_loss, pg_loss, v_loss, entropy


def kl_and_clipfrac(newlogprob, oldlogprob, clip_coef):
    """A step's k3 estimate of KL(old || new), mean(ratio - 1 - log ratio), and clip fraction."""
    logratio = (newlogprob - oldlogprob).detach()
    ratio = logratio.exp()
    approx_kl = (ratio - 1 - logratio).mean().item()
    return approx_kl, ((ratio - 1).abs() > clip_coef).float().mean().item()


def explained_variance(values, returns):
    """1 - Var[R - V] / Var[R]: 1 when the critic predicts the targets, 0 or less when it
    does no better than their mean (NaN when the targets do not vary)."""
    var_returns = returns.var().item()
    return 1 - (returns - values).var().item() / var_returns if var_returns else math.nan


class RolloutBuffer:
    """One rollout of T steps from N environments, preallocated on the device, with the two
    streams side by side (rewards and rewards_int, values and values_int, ...: PyTorchRL's names).

    Row t holds what was seen and done at step t: obs s_t, action a_t, the behaviour
    log-probability, the extrinsic reward r_t and the step's flags, V_ext(s_t), V_int(s_t),
    rnd_obs[t] the RND's normalized x_{t+1} (the state the step reached, the true final
    observation where an episode ended) and rewards_int[t] its scaled intrinsic reward.
    final_obs[t, n] is the true final observation where environment n was truncated at step
    t; last_obs is s_T, after the rollout.
    """

    def __init__(self, num_steps, num_envs, obs_shape, action_shape, continuous, device):
        def zeros(*shape, dtype=torch.float32):
            return torch.zeros((num_steps, num_envs, *shape), dtype=dtype, device=device)

        self.obs, self.final_obs = zeros(*obs_shape), zeros(*obs_shape)
        self.rnd_obs = zeros(*obs_shape)
        self.actions = zeros(*action_shape, dtype=torch.float32 if continuous else torch.long)
        self.logprobs, self.rewards, self.rewards_int = zeros(), zeros(), zeros()
        self.values, self.values_int = zeros(), zeros()
        self.returns, self.returns_int, self.advantages, self.advantages_int = (
            zeros(), zeros(), zeros(), zeros())
        self.terminated, self.truncated = zeros(dtype=torch.bool), zeros(dtype=torch.bool)
        self.last_obs = torch.zeros((num_envs, *obs_shape), device=device)

    def next_values(self, value_fn, values, episodic=True):
        """next_values[t] = V(s_{t+1}) for every step, from values [T, N] of the rollout.

        s_{t+1} is obs[t+1] inside the rollout and last_obs after it. Episodic (the
        extrinsic stream), it is the true final observation where the step was truncated;
        where it was terminated the value is not used (compute_gae multiplies it by 0).
        Non-episodic (the intrinsic stream), it stays obs[t+1], the next episode's first
        state: novelty past an episode's end is worth reaching for, and rewards >= 0 would
        make ending an episode look bad (the paper's Section 2.3).
        """
        next_values = torch.empty_like(values)
        next_values[:-1] = values[1:]
        next_values[-1] = value_fn(self.last_obs)
        where = self.truncated.nonzero(as_tuple=True)
        if episodic and where[0].numel():
            next_values[where] = value_fn(self.final_obs[where])
        return next_values

    @torch.no_grad()
    def compute_returns(self, agent, gamma, gamma_int, gae_lambda):
        """compute_gae of each stream into advantages, returns (extrinsic: gamma, next_values(
        agent.get_value, ...), cut by termination, bootstrapped at truncation) and advantages_int,
        returns_int (intrinsic: gamma_int, next_values(agent.get_value_int, ..., episodic=False),
        no end flags)."""
        no_end = torch.zeros_like(self.terminated)
        self.advantages[:], self.returns[:] = compute_gae(
            self.rewards, self.values, self.next_values(agent.get_value, self.values),
            self.terminated, self.truncated, gamma, gae_lambda)
        self.advantages_int[:], self.returns_int[:] = compute_gae(
            self.rewards_int, self.values_int,
            self.next_values(agent.get_value_int, self.values_int, episodic=False),
            no_end, no_end, gamma_int, gae_lambda)


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


@contextlib.contextmanager
def side_stream(offset):
    """Draw the weights made inside from torch's CPU generator reseeded with its seed +
    offset, then put the generator back where it was: the networks ppo.py also has (the
    actor, the extrinsic critic) and the actions sampled get ppo.py's random numbers."""
    with torch.random.fork_rng(devices=[]):
        torch.default_generator.manual_seed(torch.initial_seed() + offset)
        yield


class Agent(nn.Module):
    """ppo.py's separate actor and critic MLPs, and a second critic for the intrinsic value
    (the authors' two value heads share a trunk; apart, the extrinsic one is ppo.py's). The
    actor outputs categorical logits, or a diagonal Gaussian's mean with a learned log std."""

    def __init__(self, obs_dim, action_dim, continuous, hidden_size=64):
        super().__init__()
        self.continuous = continuous
        self.critic = mlp(obs_dim, hidden_size, 1, out_std=1.0)
        self.actor = mlp(obs_dim, hidden_size, action_dim, out_std=0.01)
        if continuous:
            self.actor_logstd = nn.Parameter(torch.zeros(1, action_dim))
        with side_stream(1):
            self.critic_int = mlp(obs_dim, hidden_size, 1, out_std=1.0)

    def get_value(self, obs):
        return self.critic(obs).squeeze(-1)

    def get_value_int(self, obs):
        return self.critic_int(obs).squeeze(-1)

    def get_action_and_value(self, obs, action=None):
        """(action, log-probability, entropy, V_ext, V_int) for each observation, the action
        sampled when none is given (a Gaussian's dimensions independent: their terms add)."""
        if self.continuous:
            mean = self.actor(obs)
            dist = Normal(mean, self.actor_logstd.expand_as(mean).exp(), validate_args=False)
        else:
            dist = Categorical(logits=self.actor(obs), validate_args=False)
        if action is None:
            action = dist.sample()
        logprob, entropy = dist.log_prob(action), dist.entropy()
        if self.continuous:
            logprob, entropy = logprob.sum(-1), entropy.sum(-1)
        return action, logprob, entropy, self.get_value(obs), self.get_value_int(obs)


class RND(nn.Module):
    """The target f, random and fixed (no gradient ever), and the predictor f_hat, trained:
    both map a normalized state x to k features."""

    def __init__(self, obs_dim, hidden_size, output_size):
        super().__init__()
        with side_stream(2):
            self.target = mlp(obs_dim, hidden_size, output_size, out_std=math.sqrt(2))
            self.predictor = mlp(obs_dim, hidden_size, output_size, out_std=math.sqrt(2))
        self.target.requires_grad_(False)

    def forward(self, x):
        """(f_hat(x), f(x)), each [..., k]."""
        return self.predictor(x), self.target(x)


# ---------------------------------------------------------------------------------------
# What the agent sees and sends: normalized observations and rewards, clipped actions
# ---------------------------------------------------------------------------------------
class ObsNormalizer:
    """(obs - mean) / sqrt(var + 1e-8), clipped to [-clip, clip] (the policy's 10, --norm-obs;
    the RND's 5, the authors'), with running statistics (Gymnasium's RunningMeanStd). Gymnasium's
    vector NormalizeObservation refuses SAME_STEP autoreset and would leave info["final_obs"]
    raw, so the script applies the statistics itself. Disabled: observations as float32."""

    def __init__(self, shape, enabled, clip=10.0):
        self.enabled, self.clip = enabled, clip
        self.rms = RunningMeanStd(shape=shape)

    def __call__(self, obs, update=False):
        obs = np.asarray(obs, dtype=np.float32)
        if not self.enabled:
            return obs
        if update:
            self.rms.update(obs)
        normalized = (obs - self.rms.mean) / np.sqrt(self.rms.var + 1e-8)
        return np.clip(normalized, -self.clip, self.clip).astype(np.float32)

    def state_dict(self):  # tensors, so that torch.load(weights_only=True) reads them
        return {k: torch.as_tensor(getattr(self.rms, k), dtype=torch.float64)
                for k in ("mean", "var", "count")}

    def load_state_dict(self, state):
        for k in ("mean", "var", "count"):
            setattr(self.rms, k, state[k].numpy())


def make_vector_env(env_id, num_envs, reward_gamma=None, video_folder=None):
    """N copies of env_id in one synchronous vector environment, with SAME_STEP autoreset
    (the true last observation of an episode is in info["final_obs"]) and episode statistics.
    With reward_gamma (--norm-reward), rewards are divided by the running std of the return
    discounted by it and clipped to [-10, 10], after the statistics, so that episodes.csv
    keeps the raw returns."""
    def make(i):
        return make_recorded(env_id, video_folder, f"eval-{i}")  # with a video: its first episode

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


def states_reached(obs, ended, info):
    """The state each of N steps reached: obs [N, ...], or info["final_obs"] where one ended."""
    reached = obs.copy()
    for i in np.flatnonzero(ended):
        reached[i] = info["final_obs"][i]
    return reached


def random_states(env_id, num_envs, steps, seed):
    """The observations of `steps` uniformly random actions in num_envs environments of their
    own, seeded with seed: the states that start the RND's statistics (the authors' random
    agent before training), [steps * num_envs, obs...]."""
    envs = make_vector_env(env_id, num_envs)
    envs.action_space.seed(seed)
    envs.reset(seed=seed)
    states = [envs.step(envs.action_space.sample())[0] for _ in range(steps)]
    envs.close()
    return np.concatenate(states)


# ---------------------------------------------------------------------------------------
# Training
# ---------------------------------------------------------------------------------------
def train(args, agent, rnd, normalizer, rnd_normalizer, envs, run, device):
    """PPO+RND's loop, until the budget, --stop-at-return or a non-finite loss.
    run (Run, below the banner) writes the run folder: step(n, info) records the episodes
    that ended, evaluates, prints progress and says when to stop; update adds a CSV row."""
    # One Adam for the agent and the predictor (not the target), eps = 1e-5 as in ppo.py
    params = [*agent.parameters(), *rnd.predictor.parameters()]
    optimizer = torch.optim.Adam(params, lr=args.learning_rate, eps=1e-5)
    buffer = RolloutBuffer(args.num_steps, args.num_envs, envs.single_observation_space.shape,
                           envs.single_action_space.shape, agent.continuous, device)
    scaler = IntrinsicRewardScaler(args.num_envs, args.gamma_int)
    batch_size = args.num_envs * args.num_steps
    minibatch_size = batch_size // args.num_minibatches
    num_iterations = args.total_timesteps // batch_size
    global_step = 0
    next_obs = torch.from_numpy(normalizer(envs.reset(seed=args.seed)[0], update=True)).to(device)
    for iteration in range(1, num_iterations + 1):
        if args.anneal_lr:  # linearly from --learning-rate at the start to 0 at the end
            for group in optimizer.param_groups:
                group["lr"] = args.learning_rate * (1 - (iteration - 1) / num_iterations)

        # Rollout: T steps of the N environments with the current policy.
        for step in range(args.num_steps):
            with torch.no_grad():
                action, logprob, _, value, value_int = agent.get_action_and_value(next_obs)
            buffer.obs[step], buffer.actions[step] = next_obs, action
            buffer.logprobs[step], buffer.values[step], buffer.values_int[step] = (
                logprob, value, value_int)
            obs, reward, terminated, truncated, info = envs.step(
                to_env_action(agent, action, envs.single_action_space))
            global_step += args.num_envs
            if run.step(global_step, info):  # episodes.csv, evaluation, progress; True: stop
                return
            buffer.rewards[step] = torch.from_numpy(reward).to(device)
            buffer.terminated[step] = torch.from_numpy(terminated).to(device)
            buffer.truncated[step] = torch.from_numpy(truncated).to(device)
            reached = states_reached(obs, terminated | truncated, info)
            buffer.rnd_obs[step] = torch.from_numpy(rnd_normalizer(reached, update=True)).to(device)
            for i in np.flatnonzero(truncated):  # a time limit: bootstrap from the last state
                final_obs = normalizer(info["final_obs"][i])  # the statistics not updated
                buffer.final_obs[step, i] = torch.from_numpy(final_obs).to(device)
            next_obs = torch.from_numpy(normalizer(obs, update=True)).to(device)
        buffer.last_obs.copy_(next_obs)

        # Intrinsic rewards: the predictor's error on the states reached, then scaled.
        with torch.no_grad():
            errors = intrinsic_reward(*rnd(buffer.rnd_obs))
        buffer.rewards_int.copy_(torch.from_numpy(scaler(errors.cpu().numpy())).to(device))

        # Targets: GAE of each stream, then the advantage the policy follows.
        buffer.compute_returns(agent, args.gamma, args.gamma_int, args.gae_lambda)
        b_advantages = combine_advantages(buffer.advantages, buffer.advantages_int,
                                          args.ext_coef, args.int_coef).flatten()
        b_obs, b_actions, b_rnd_obs = (x.flatten(0, 1) for x in (buffer.obs, buffer.actions,
                                                                 buffer.rnd_obs))
        b_logprobs, b_values, b_returns, b_returns_int = (x.flatten() for x in (
            buffer.logprobs, buffer.values, buffer.returns, buffer.returns_int))

        # Update: epochs of minibatch gradient steps on the rollout.
        approx_kls, clipfracs, v_losses_int, rnd_losses = [], [], [], []
        for epoch in range(args.update_epochs):
            for idx in torch.randperm(batch_size, device=device).split(minibatch_size):
                _, newlogprob, entropy, newvalue, newvalue_int = agent.get_action_and_value(
                    b_obs[idx], b_actions[idx])
                adv = b_advantages[idx]  # normalized within the minibatch unless --no-norm-adv
                adv = (adv - adv.mean()) / (adv.std() + 1e-8) if args.norm_adv else adv
                loss, pg_loss, v_loss, entropy = ppo_loss(
                    newlogprob=newlogprob, oldlogprob=b_logprobs[idx], advantages=adv,
                    newvalue=newvalue, oldvalue=b_values[idx], returns=b_returns[idx],
                    entropy=entropy, clip_coef=args.clip_coef, ent_coef=args.ent_coef,
                    vf_coef=args.vf_coef)
                if args.int_coef:  # the intrinsic head and the predictor (--int-coef 0: ppo.py)
                    v_loss_int = 0.5 * ((newvalue_int - b_returns_int[idx]) ** 2).mean()
                    keep = torch.rand(len(idx), device=device) < args.rnd_update_proportion
                    rnd_loss = predictor_loss(*rnd(b_rnd_obs[idx]), keep)
                    loss = loss + args.vf_coef * v_loss_int + rnd_loss
                    v_losses_int.append(v_loss_int.item()), rnd_losses.append(rnd_loss.item())
                optimizer.zero_grad()
                loss.backward()
                nn.utils.clip_grad_norm_(params, args.max_grad_norm)
                optimizer.step()
                approx_kl, clipfrac = kl_and_clipfrac(newlogprob, b_logprobs[idx], args.clip_coef)
                approx_kls.append(approx_kl)
                clipfracs.append(clipfrac)
            epoch_kl = np.mean(approx_kls[-args.num_minibatches:])
            if args.target_kl is not None and epoch_kl > args.target_kl:
                break

        if run.non_finite(loss.item(), global_step):  # says so; the run stops as interrupted
            return
        run.update(global_step, learning_rate=optimizer.param_groups[0]["lr"],
                   policy_loss=pg_loss.item(), value_loss=v_loss.item(), entropy=entropy.item(),
                   approx_kl=np.mean(approx_kls), clipfrac=np.mean(clipfracs),
                   explained_variance=explained_variance(b_values, b_returns), epochs=epoch + 1,
                   intrinsic_reward=errors.mean().item(),
                   intrinsic_reward_normalized=buffer.rewards_int.mean().item(),
                   value_loss_int=np.mean(v_losses_int or [math.nan]),
                   predictor_loss=np.mean(rnd_losses or [math.nan]))


def main(args: Args) -> dict:
    """Train PPO+RND (or evaluate an --eval-checkpoint), write the run folder, return the
    summary. Ctrl-C stops training; the run folder is written, then KeyboardInterrupt goes on up."""
    # prepare (below the banner): --eval-checkpoint's model read, the environment made and
    # checked, the flags left at None from its family's preset, every flag checked (a
    # mistake: one line, exit status 2), the seeds set, the device chosen.
    args, (obs_dim, action_dim, continuous), checkpoint, device = prepare(args)

    # Set up: the agent, the RND networks, both normalizers, the run folder.
    agent = Agent(obs_dim, action_dim, continuous, args.hidden_size).to(device)
    rnd = RND(obs_dim, args.hidden_size, args.rnd_output_size).to(device)
    normalizer = ObsNormalizer((obs_dim,), args.norm_obs)
    rnd_normalizer = ObsNormalizer((obs_dim,), True, clip=5.0)
    models = {"agent": agent, "obs_rms": normalizer}  # what model.pt holds (the policy's)
    run = Run(args, device, models, checkpoint, rollout_steps=args.num_envs * args.num_steps)

    # Train (unless evaluating a checkpoint), then finish: evaluate, save, write, plot.
    envs = None if checkpoint else make_vector_env(
        args.env_id, args.num_envs, reward_gamma=args.gamma if args.norm_reward else None)

    def start_and_train():  # the RND's state statistics start from random steps (not counted)
        rnd_normalizer(random_states(args.env_id, args.num_envs, args.rnd_init_steps,
                                     args.seed + 200_000), update=True)
        train(args, agent, rnd, normalizer, rnd_normalizer, envs, run, device)
    return run.train(start_and_train, envs)


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
# What the plumbing asks of ppo_rnd.py: its own checks, its greedy policy, its model's flags
# ---------------------------------------------------------------------------------------
def check_flags(args):
    """ppo_rnd.py's own flags, checked by prepare before training."""
    check_range(args, positive=["num_envs", "num_steps", "num_minibatches", "update_epochs",
                                "hidden_size", "learning_rate", "clip_coef", "max_grad_norm",
                                "rnd_output_size", "rnd_init_steps"],
                fraction=["gamma", "gamma_int", "gae_lambda", "rnd_update_proportion"])
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
    """Whether ppo_rnd.py handles the environment's spaces; returns (obs_dim, action_dim,
    continuous)."""
    if not (isinstance(action_space, gym.spaces.Discrete)
            or isinstance(action_space, gym.spaces.Box) and len(action_space.shape) == 1):
        fail(f"{args.env_id} has a {type(action_space).__name__} action space of shape "
             f"{action_space.shape}; ppo_rnd.py handles Discrete and flat Box actions (for "
             "MultiDiscrete or MultiBinary, number the combinations as one Discrete action; "
             "ppo_masked.py can then mask the invalid ones)")
    if not (isinstance(obs_space, gym.spaces.Box) and len(obs_space.shape) == 1):
        fail(f"{args.env_id} has a {type(obs_space).__name__} observation space of shape "
             f"{obs_space.shape}; ppo_rnd.py's MLPs need a flat Box (ppo_masked.py one-hot "
             "encodes Discrete ones, qlearning.py uses a table)")
    continuous = isinstance(action_space, gym.spaces.Box)
    action_dim = action_space.shape[0] if continuous else int(action_space.n)
    return obs_space.shape[0], action_dim, continuous


# Stamped from plainrl's plumbing/greedy.py by its stamp.py: edit it there, not here.
def greedy_policy(models, envs):
    """The evaluation's policy, act(obs, info) -> actions: the argmax of the logits, or the
    Gaussian's mean clipped to the bounds; the observation statistics frozen."""
    agent, normalizer = models["agent"], models["obs_rms"]
    device = next(agent.parameters()).device

    @torch.no_grad()
    def act(obs, info):
        out = agent.actor(torch.from_numpy(normalizer(obs)).to(device))
        return to_env_action(agent, out if agent.continuous else out.argmax(-1),
                             envs.single_action_space)
    return act
# End of plumbing/greedy.py


# What a run is judged on, by environment id (its benchmark task in benchmark.py, its README
# row): (threshold, window of training episodes, "train": the last-window mean at the end,
# or "eval": the final greedy evaluation). Another id: its reward_threshold over 20, "train".
GOALS = {"MountainCar-v0": (-120, 50, "train", 300_000),
         "SparseChain-v0": (0.9, 50, "train", 100_000),
         "MountainCarContinuous-v0": (90, 20, "train", 300_000),
         "Pendulum-v1": (-200, 20, "eval", 200_000),
         "InvertedDoublePendulum-v5": (9100, 100, "eval", 300_000),
         "Swimmer-v5": (360, 100, "eval", 300_000)}
MODEL_FLAGS = ("hidden_size", "norm_obs")  # a checkpoint's network is built by these


if __name__ == "__main__":
    cli()

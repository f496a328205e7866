"""Proximal Policy Optimization (PPO) for discrete and continuous actions, in one file.

PPO collects a rollout of T steps from N environments with the current policy, estimates
how much better each action was than expected (the advantage), and then takes several
epochs of minibatch gradient steps on a clipped surrogate objective that keeps the new
policy close to the one that collected the data.

Key equations (t indexes steps, done_t = terminated_t or truncated_t):

    ratio_t   = pi_theta(a_t | s_t) / pi_old(a_t | s_t)
    L_clip    = E[ min(ratio_t * A_t, clip(ratio_t, 1 - eps, 1 + eps) * A_t) ]
    GAE       delta_t = r_t + gamma * (1 - terminated_t) * V(s_{t+1}) - V(s_t)
              A_t     = delta_t + gamma * lambda * (1 - done_t) * A_{t+1}
    loss      = -L_clip + c_v * 0.5 * (V(s_t) - R_t)^2 - c_e * entropy

A time-limit truncation is not a termination: the step bootstraps from the value of the
true final observation (Gymnasium's info["final_obs"]), while a terminated step does not.
V-trace targets (Espeholt et al. 2018) can replace GAE with --advantage vtrace.

Papers:
    Schulman et al. 2017, "Proximal Policy Optimization Algorithms", arXiv:1707.06347
    Schulman et al. 2016, "High-Dimensional Continuous Control Using Generalized
        Advantage Estimation", ICLR 2016
    Espeholt et al. 2018, "IMPALA: Scalable Distributed Deep-RL with Importance Weighted
        Actor-Learner Architectures", ICML 2018
    Pardo et al. 2018, "Time Limits in Reinforcement Learning", ICML 2018

Run:
    python ppo.py --env-id CartPole-v1
    python ppo.py --env-id Pendulum-v1 --total-timesteps 200000 --num-envs 8 \
        --num-steps 256 --num-minibatches 32 --update-epochs 10 --gamma 0.95 \
        --gae-lambda 0.95 --learning-rate 2e-3 --ent-coef 0.001 --norm-obs --norm-reward
    python ppo.py --help

Writes runs/<env_id>__ppo__<seed>__<unix_time>/ with config.json, episodes.csv,
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
    """any registered Gymnasium id with a Discrete or Box action space and a flat Box observation"""
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
    stop_at_return: Optional[float] = None
    """stop once the mean of the last 20 training episode returns reaches this"""
    save_model: bool = False
    """write model.pt into the run folder"""
    eval_checkpoint: Optional[str] = None
    """skip training: load this model.pt and evaluate it"""
    capture_video: bool = False
    """record the evaluation episodes into videos/ in the run folder"""

    # Algorithm
    num_envs: int = 8
    """N: parallel environments (synchronous vector environment)"""
    num_steps: int = 64
    """T: steps per environment in each rollout; the batch is N*T"""
    learning_rate: float = 4e-3
    """Adam learning rate"""
    anneal_lr: bool = True
    """decay the learning rate linearly to 0 over the budget"""
    gamma: float = 0.98
    """discount factor"""
    gae_lambda: float = 0.9
    """lambda of GAE"""
    num_minibatches: int = 2
    """minibatches per epoch; must divide N*T"""
    update_epochs: int = 10
    """epochs over each rollout"""
    norm_adv: bool = True
    """normalize advantages within each minibatch"""
    clip_coef: float = 0.2
    """epsilon of the clipped surrogate"""
    clip_vloss: bool = False
    """clip the value loss around the rollout's value estimates, as in the PPO baselines"""
    ent_coef: float = 0.0
    """entropy bonus coefficient c_e"""
    vf_coef: float = 0.5
    """value loss coefficient c_v"""
    max_grad_norm: float = 0.5
    """gradient clipping: the largest global norm of the gradient"""
    target_kl: Optional[float] = None
    """stop an update's remaining epochs once the mean approx KL of an epoch exceeds this"""
    advantage: Literal["gae", "vtrace"] = "gae"
    """advantage estimator: GAE, or V-trace targets recomputed before each epoch"""
    rho_bar: float = 1.0
    """V-trace: clip of the importance weight rho"""
    c_bar: float = 1.0
    """V-trace: clip of the trace coefficient c"""
    norm_obs: bool = False
    """normalize observations by running mean and variance (saved in model.pt)"""
    norm_reward: bool = False
    """scale rewards by the running std of the discounted return (Gymnasium's NormalizeReward)"""
    hidden_size: int = 64
    """width of the two hidden layers of the actor and of the critic"""


class UsageError(Exception):
    """Bad input: reported as one line on stderr with exit status 2, before training."""


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
        vs_t    = values_t + delta_t
                  + gamma * c_t * (1 - done_t) * (vs_{t+1} - values_{t+1})   (0 at t = T-1)
        G_t     = vs_{t+1} if t < T-1 and not done_t, else next_values_t
        adv_t   = rho_t * (r_t + gamma * (1 - terminated_t) * G_t - values_t)

    Returns (vs, advantages), each [T, N]: vs is the value target.
    """
    not_terminated = 1.0 - terminated.to(rewards.dtype)
    done = terminated.bool() | truncated.bool()
    not_done = 1.0 - done.to(rewards.dtype)
    ratios = torch.exp(log_rhos)
    rhos = torch.clamp(ratios, max=rho_bar)
    cs = torch.clamp(ratios, max=c_bar)
    deltas = rhos * (rewards + gamma * not_terminated * next_values - values)
    vs_minus_values = torch.zeros_like(rewards)
    running = torch.zeros_like(rewards[0])
    for t in reversed(range(rewards.shape[0])):
        running = deltas[t] + gamma * cs[t] * not_done[t] * running
        vs_minus_values[t] = running
    vs = values + vs_minus_values
    bootstrap = next_values.clone()
    bootstrap[:-1] = torch.where(done[:-1], next_values[:-1], vs[1:])
    advantages = rhos * (rewards + gamma * not_terminated * bootstrap - values)
    return vs, advantages


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


class RolloutBuffer:
    """One rollout of T steps from N environments, preallocated on the device.

    Row t holds what was seen and done at step t: obs s_t, action a_t, the behaviour
    log-probability log mu(a_t|s_t), reward r_t, the terminated/truncated flags of the
    step, and V(s_t). final_obs[t, n] holds the true final observation where environment n
    was truncated at step t (its value is bootstrapped); last_obs is s_T, the observation
    after the last step.
    """

    def __init__(self, num_steps, num_envs, obs_shape, action_shape, action_dtype, device):
        def zeros(*shape, dtype=torch.float32):
            return torch.zeros((num_steps, num_envs, *shape), dtype=dtype, device=device)

        self.obs = zeros(*obs_shape)
        self.actions = zeros(*action_shape, dtype=action_dtype)
        self.logprobs = zeros()
        self.rewards = zeros()
        self.terminated = zeros(dtype=torch.bool)
        self.truncated = zeros(dtype=torch.bool)
        self.values = zeros()
        self.final_obs = zeros(*obs_shape)
        self.last_obs = torch.zeros((num_envs, *obs_shape), device=device)

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

    def vtrace(self, agent, gamma, rho_bar, c_bar):
        """V-trace (vs, advantages) [T, N] under the agent's current policy and critic."""
        obs = self.obs.flatten(0, 1)
        logprobs, _, values = agent.evaluate(obs, self.actions.flatten(0, 1))
        values = values.view_as(self.values)
        next_values = self.next_values(agent.get_value, values)
        log_rhos = logprobs.view_as(self.logprobs) - self.logprobs
        return compute_vtrace(self.rewards, values, next_values, self.terminated,
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


class Agent(nn.Module):
    """Separate actor and critic MLPs. The actor outputs the logits of a categorical
    distribution, or the mean of a diagonal Gaussian whose log std is a learned
    state-independent parameter."""

    def __init__(self, obs_dim, action_dim, continuous, hidden_size=64):
        super().__init__()
        self.continuous = continuous
        self.critic = mlp(obs_dim, hidden_size, 1, out_std=1.0)
        self.actor = mlp(obs_dim, hidden_size, action_dim, out_std=0.01)
        if continuous:
            self.actor_logstd = nn.Parameter(torch.zeros(1, action_dim))

    def get_value(self, obs):
        return self.critic(obs).squeeze(-1)

    def distribution(self, obs):
        if self.continuous:
            mean = self.actor(obs)
            return Normal(mean, self.actor_logstd.expand_as(mean).exp(), validate_args=False)
        return Categorical(logits=self.actor(obs), validate_args=False)

    def _logprob_entropy(self, dist, actions):
        if self.continuous:  # independent dimensions: sum over the action dimension
            return dist.log_prob(actions).sum(-1), dist.entropy().sum(-1)
        return dist.log_prob(actions), dist.entropy()

    def act(self, obs):
        """Sample actions; returns (actions, log-probabilities, values)."""
        dist = self.distribution(obs)
        actions = dist.sample()
        logprobs, _ = self._logprob_entropy(dist, actions)
        return actions, logprobs, self.get_value(obs)

    def evaluate(self, obs, actions):
        """Log-probabilities, entropies and values of given actions, for the update."""
        logprobs, entropy = self._logprob_entropy(self.distribution(obs), actions)
        return logprobs, entropy, self.get_value(obs)

    def greedy(self, obs):
        """The most likely action: the argmax of the logits, or the Gaussian's mean."""
        out = self.actor(obs)
        return out if self.continuous else out.argmax(-1)


class Adam:
    """Adam (Kingma & Ba 2015), the same update as torch.optim.Adam written out: the first
    use of torch.optim imports torch._dynamo, about a second on a laptop, which is a fifth
    of this script's whole CartPole run. For each parameter p with gradient g, at step k:

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
def fail(message):
    raise UsageError(message)


def check_env(env_id):
    """Build one environment to check its spaces; returns (obs_shape, action_space)."""
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
    if isinstance(action_space, gym.spaces.Box):
        if len(action_space.shape) != 1:
            fail(f"{env_id} has a Box action space of shape {action_space.shape}; "
                 "ppo.py needs a flat one")
    elif not isinstance(action_space, gym.spaces.Discrete):
        fail(f"{env_id} has a {type(action_space).__name__} action space; ppo.py handles "
             "Discrete and Box (for MultiDiscrete or masked actions see ppo_masked.py)")
    if not isinstance(obs_space, gym.spaces.Box):
        fail(f"{env_id} has a {type(obs_space).__name__} observation space; ppo.py needs a "
             "Box (ppo_masked.py one-hot encodes Discrete ones, qlearning.py uses a table)")
    if len(obs_space.shape) != 1:
        fail(f"{env_id} has observations of shape {obs_space.shape}; ppo.py's MLP needs "
             "flat vectors (wrap images with a CNN, which this script does not have)")
    return obs_space.shape, action_space


def check_args(args):
    """Everything a user can get wrong, checked before any environment runs."""
    for name in ("total_timesteps", "num_envs", "num_steps", "num_minibatches",
                 "update_epochs", "hidden_size"):
        if getattr(args, name) <= 0:
            fail(f"--{name.replace('_', '-')} must be positive, got {getattr(args, name)}")
    for name in ("learning_rate", "clip_coef", "rho_bar", "c_bar", "max_grad_norm"):
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

    def state_dict(self):
        return {"mean": torch.as_tensor(self.rms.mean), "var": torch.as_tensor(self.rms.var),
                "count": float(self.rms.count)}

    def load_state_dict(self, state):
        self.rms.mean = state["mean"].numpy().astype(np.float64)
        self.rms.var = state["var"].numpy().astype(np.float64)
        self.rms.count = state["count"]


def to_action(agent, actions, action_space):
    """Tensor actions to what the environment takes: Gaussian samples are clipped to the
    bounds when stepping (the unclipped sample is what the buffer stores)."""
    actions = actions.cpu().numpy()
    if agent.continuous:
        return np.clip(actions, action_space.low, action_space.high)
    return actions


def evaluate(agent, normalizer, env_id, episodes, seed, device, video_folder=None):
    """Greedy returns of `episodes` episodes, one per environment of a vector env, all at
    once; the observation statistics are frozen."""
    envs = make_vector_env(env_id, episodes, video_folder)
    obs, _ = envs.reset(seed=seed)
    returns = np.full(episodes, np.nan)
    with torch.inference_mode():
        while np.isnan(returns).any():
            action = agent.greedy(torch.from_numpy(normalizer(obs)).to(device))
            obs, _, _, _, info = envs.step(to_action(agent, action, envs.single_action_space))
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


def save_checkpoint(path, agent, normalizer, args):
    torch.save({"agent": agent.state_dict(), "obs_rms": normalizer.state_dict(),
                "args": asdict(args)}, path)


def load_checkpoint(path, env_id):
    """Load a model.pt safely (weights_only) and check it was made for env_id."""
    if not os.path.isfile(path):
        fail(f"checkpoint {path} does not exist")
    try:
        checkpoint = torch.load(path, map_location="cpu", weights_only=True)
        saved = checkpoint["args"]
        if not {"agent", "obs_rms"} <= set(checkpoint) or not {"env_id", "hidden_size",
                                                                "norm_obs"} <= set(saved):
            raise KeyError("missing entries")
    except Exception as e:
        fail(f"checkpoint {path} is not a ppo.py model.pt ({type(e).__name__}); "
             "make one with --save-model")
    if saved["env_id"] != env_id:
        fail(f"checkpoint {path} was made for {saved['env_id']}, not {env_id}; "
             f"pass --env-id {saved['env_id']}")
    return checkpoint


def finish(args, run, summary, agent, normalizer, device, start, trained=True):
    """Evaluate greedily, save the model if asked, write summary.json and the curve, and
    print the closing line. An interrupted run skips the evaluation."""
    recent = [e["episode_return"] for e in run.episodes[-20:]]
    summary["train_return_last20"] = float(np.mean(recent)) if recent else None
    summary["wall_time_s"] = round(time.time() - start, 3)
    if args.eval_episodes and not summary["interrupted"]:
        video_folder = os.path.join(run.path, "videos") if args.capture_video else None
        returns = evaluate(agent, normalizer, args.env_id, args.eval_episodes,
                           args.seed + 100_000, device, video_folder)
        summary["eval_return_mean"] = float(returns.mean())
        summary["eval_return_std"] = float(returns.std())
    if args.save_model and trained:
        save_checkpoint(os.path.join(run.path, "model.pt"), agent, normalizer, args)
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
    """Train PPO (or, with --eval-checkpoint, evaluate a saved model), write the run
    folder and return the summary."""
    check_args(args)
    obs_shape, action_space = check_env(args.env_id)
    checkpoint = None
    if args.eval_checkpoint is not None:
        checkpoint = load_checkpoint(args.eval_checkpoint, args.env_id)
        args = replace(args, hidden_size=checkpoint["args"]["hidden_size"],
                       norm_obs=checkpoint["args"]["norm_obs"])

    random.seed(args.seed)
    np.random.seed(args.seed)
    torch.manual_seed(args.seed)
    device = torch.device("cuda" if args.cuda and torch.cuda.is_available() else "cpu")
    if device.type == "cpu":
        torch.set_num_threads(1)  # a 64-unit MLP runs faster without the thread pool
    continuous = isinstance(action_space, gym.spaces.Box)
    action_dim = action_space.shape[0] if continuous else int(action_space.n)
    agent = Agent(obs_shape[0], action_dim, continuous, args.hidden_size).to(device)
    normalizer = ObsNormalizer(obs_shape, args.norm_obs)
    if checkpoint is not None:
        try:
            agent.load_state_dict(checkpoint["agent"])
            normalizer.load_state_dict(checkpoint["obs_rms"])
        except (RuntimeError, KeyError, AttributeError) as e:
            fail(f"checkpoint {args.eval_checkpoint} does not fit {args.env_id}'s network: "
                 f"{str(e).splitlines()[0]}")
    run = RunWriter(args, device)
    print(f"{SCRIPT}: {args.env_id}, seed {args.seed}, device {device}")
    summary = {"algorithm": "ppo", "env_id": args.env_id, "seed": args.seed, "global_steps": 0,
               "wall_time_s": None, "train_return_last20": None, "eval_return_mean": None,
               "eval_return_std": None, "eval_episodes": args.eval_episodes,
               "solved_at_step": None, "solved_at_time_s": None, "interrupted": False}
    start = time.time()
    if checkpoint is not None:
        return finish(args, run, summary, agent, normalizer, device, start, trained=False)

    envs = make_vector_env(args.env_id, args.num_envs)
    if args.norm_reward:  # outside RecordEpisodeStatistics, which keeps the raw returns
        envs = gym.wrappers.vector.NormalizeReward(envs, gamma=args.gamma)
        envs = gym.wrappers.vector.ClipReward(envs, -10.0, 10.0)
    params = list(agent.parameters())
    optimizer = Adam(params, lr=args.learning_rate)
    buffer = RolloutBuffer(args.num_steps, args.num_envs, obs_shape,
                           action_space.shape if continuous else (),
                           torch.float32 if continuous else torch.long, device)
    batch_size = args.num_envs * args.num_steps
    minibatch_size = batch_size // args.num_minibatches
    num_updates = args.total_timesteps // batch_size
    last20 = deque(maxlen=20)
    global_step, last_print, solved = 0, start, False

    next_obs, _ = envs.reset(seed=args.seed)
    next_obs = torch.from_numpy(normalizer(next_obs, update=True)).to(device)
    try:
        for update in range(1, num_updates + 1):
            if args.anneal_lr:
                optimizer.lr = args.learning_rate * (1 - (update - 1) / num_updates)

            # Rollout: T steps of the N environments with the current policy.
            with torch.inference_mode():
                for step in range(args.num_steps):
                    buffer.obs[step] = next_obs
                    action, logprob, value = agent.act(next_obs)
                    obs, reward, terminated, truncated, info = envs.step(
                        to_action(agent, action, action_space))
                    global_step += args.num_envs
                    buffer.actions[step] = action
                    buffer.logprobs[step] = logprob
                    buffer.values[step] = value
                    buffer.rewards[step] = torch.from_numpy(reward)
                    buffer.terminated[step] = torch.from_numpy(terminated)
                    buffer.truncated[step] = torch.from_numpy(truncated)
                    for i in np.flatnonzero(truncated):  # bootstrapped from V(final obs)
                        buffer.final_obs[step, i] = torch.from_numpy(normalizer(info["final_obs"][i]))
                    next_obs = torch.from_numpy(normalizer(obs, update=True)).to(device)
                    if "_episode" in info:
                        for i in np.flatnonzero(info["_episode"]):
                            last20.append(info["episode"]["r"][i])
                            run.episode(global_step, time.time() - start, info["episode"]["r"][i],
                                        info["episode"]["l"][i])
                        if (args.stop_at_return is not None and len(last20) == 20
                                and np.mean(last20) >= args.stop_at_return):
                            summary["solved_at_step"] = global_step
                            summary["solved_at_time_s"] = round(time.time() - start, 3)
                            solved = True
                            break
                buffer.last_obs.copy_(next_obs)
            if solved:
                break

            # Update: epochs of minibatch gradient steps on the rollout.
            with torch.no_grad():
                if args.advantage == "gae":
                    advantages, returns = buffer.gae(agent.get_value, args.gamma, args.gae_lambda)
            b_obs, b_actions = buffer.obs.flatten(0, 1), buffer.actions.flatten(0, 1)
            b_logprobs, b_values = buffer.logprobs.flatten(), buffer.values.flatten()
            approx_kls, clipfracs = [], []
            for epoch in range(args.update_epochs):
                if args.advantage == "vtrace":  # targets from the current policy and critic
                    with torch.no_grad():
                        returns, advantages = buffer.vtrace(agent, args.gamma, args.rho_bar, args.c_bar)
                b_advantages, b_returns = advantages.flatten(), returns.flatten()
                epoch_kls = []
                for idx in torch.randperm(batch_size, device=device).split(minibatch_size):
                    newlogprob, entropy, newvalue = agent.evaluate(b_obs[idx], b_actions[idx])
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
                        "explained_variance": explained_var, "epochs": epoch + 1})
            if now - last_print >= 2.0 or update == num_updates:
                last_print = now
                recent = f"{np.mean(last20):.1f}" if last20 else "n/a"
                print(f"step {global_step:>9} | sps {sps:>6} | return (last 20) {recent}")
    except KeyboardInterrupt:
        print(f"{SCRIPT}: interrupted; writing what the run has so far")
        summary["interrupted"] = True
    finally:
        envs.close()
    summary["global_steps"] = global_step
    return finish(args, run, summary, agent, normalizer, device, start)


if __name__ == "__main__":
    try:
        main(tyro.cli(Args))
    except UsageError as e:
        print(f"{SCRIPT}: error: {e}", file=sys.stderr)
        sys.exit(2)

# From plainrl (MIT licence, (c) 2026 the plainrl authors): keep this line in a copy.
"""PPO+D: Proximal Policy Optimization guided by a single demonstration, in one file.

PPO+D (Libardi et al. 2021) is PPO whose rollouts sometimes replay a stored episode: when an
environment's episode ends, its next one is, with probability rho, a *reward demo* (a given
demonstration, or an agent episode whose return reached the success threshold), with
probability phi a *value demo* (an agent episode whose states the critic values most), else a
real episode. PPO learns from a replayed step as if the policy had acted by luck.

Key equations (t indexes steps, done_t = terminated_t or truncated_t):

    episode source   reward demo w.p. rho, value demo w.p. phi, real w.p. 1 - rho - phi
    value demos      sampled with p_i = exp(alpha * (m_i - max_j m_j)) / sum_k (same),
                     m_i = max_t V(s_t) along episode i under the current critic
    annealing        when an episode joins the reward demos, with K_v = demo_capacity - given demos:
                     phi <- phi - phi_0 / K_v,  rho <- rho + phi_0 / K_v   (phi >= 0)
    ratio_t          = pi_theta(a_t | s_t) / mu(a_t | s_t),  mu = 1 on a demo step (log mu = 0)
    L_clip           = E[ min(ratio_t * A_t, clip(ratio_t, 1 - eps, 1 + eps) * A_t) ]
    GAE              delta_t = r_t + gamma * (1 - terminated_t) * V(s_{t+1}) - V(s_t)
                     A_t     = delta_t + gamma * lambda * (1 - done_t) * A_{t+1}
    loss             = -L_clip + c_v * 0.5 * (V(s_t) - R_t)^2 - c_e * entropy,  R_t = A_t + V(s_t)

with rho, phi (phi_0 its start), alpha, demo_capacity and gamma their flags, eps --clip-coef,
lambda --gae-lambda, c_v --vf-coef, c_e --ent-coef. Departures are named at the code.

Papers: Libardi, De Fabritiis & Dittert 2021 (PPO+D, arXiv:2007.03328); Schulman et al. 2017 (PPO,
arXiv:1707.06347); Schulman et al. 2016 (GAE, ICLR); Pardo et al. 2018 (Time Limits in RL, ICML).

Run (recording a demonstration: the docs' "Running it"):
    python ppod.py --env-id MountainCar-v0          # with the shipped demos/MountainCar-v0/
    python ppod.py --env-id Acrobot-v1 --demos-dir my_demos

Demonstrations: .npz files of observations [T+1, ...], actions [T, ...], rewards [T], optionally
terminated (0/1, default 1). Writes runs/<env_id>__ppod__<seed>__<unix_time>/, episodes.csv of
real episodes only, demos/ the reward demos (plainrl's CONTRIBUTING.md, "What a run writes").
"""

# ---------------------------------------------------------------------------------------
# Imports
# ---------------------------------------------------------------------------------------
import math
import os
from dataclasses import dataclass
from typing import Optional

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
    env_id: str = "MountainCar-v0"
    """a Gymnasium id (or module:Id) with Discrete or Box actions and flat Box observations"""
    seed: int = 1
    """seeds Python, NumPy, torch, the environments and the choice of episode sources"""
    total_timesteps: int = 300_000
    """the budget in environment steps, all environments together (replays do not count)"""
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
    # No presets: built for sparse rewards with demonstrations; its settings below.
    # Demonstrations
    demos_dir: Optional[str] = None
    """folder of .npz demonstrations (default: demos/<env-id> beside this script)"""
    record_demo_from: Optional[str] = None
    """skip training: save a greedy episode of this ppod.py or ppo.py model.pt in --demos-dir"""
    rho: float = 0.3
    """rho: probability that an environment's next episode replays a reward demo"""
    phi: float = 0.2
    """phi: probability that an environment's next episode replays a value demo (annealed)"""
    alpha: float = 1.0
    """value demos are drawn with probability ~ exp(alpha * max value); 0 draws uniformly"""
    demo_capacity: int = 10
    """the most reward and value demos kept, both buffers together"""
    success_threshold: Optional[float] = None
    """episodes whose return reaches it join the reward demos (default: the given demos' lowest)"""
    rising_threshold: bool = False
    """deviation: the threshold rises to the lowest reward demo kept; given demos can leave"""
    save_demos_every: int = 10
    """write the reward demos into the run folder's demos/ every this many updates (0: at end)"""
    # Algorithm
    num_envs: int = 8
    """N: parallel environments (synchronous vector environment)"""
    num_steps: int = 128
    """T: steps per environment in each rollout; the batch is N*T"""
    learning_rate: float = 1e-3
    """Adam learning rate (3e-4 in the PPO paper's MuJoCo runs, 2.5e-4 on Atari)"""
    anneal_lr: bool = True
    """decay the learning rate linearly to 0 over the budget (so the budget changes the schedule)"""
    gamma: float = 0.99
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
    ent_coef: float = 0.0
    """entropy bonus coefficient c_e (0 on MuJoCo, 0.01 on Atari in the PPO paper)"""
    vf_coef: float = 0.5
    """value loss coefficient c_v (0.5-1 in the PPO paper)"""
    max_grad_norm: float = 0.5
    """gradient clipping: the largest global norm of the gradient"""
    target_kl: Optional[float] = None
    """stop an update's epochs once an epoch's approx KL (on the agent's rows) exceeds this"""
    norm_obs: bool = True
    """normalize observations by running mean and variance, clip to [-10, 10] (kept in model.pt)"""
    hidden_size: int = 64
    """width of the two hidden layers of the actor and of the critic"""


# ---------------------------------------------------------------------------------------
# The math: GAE, the PPO loss, the rollout, and the demonstration buffers
# ---------------------------------------------------------------------------------------
def compute_gae(rewards, values, next_values, terminated, truncated, gamma, gae_lambda):
    """GAE (Schulman et al. 2016) as the module docstring has it, A_T = 0, on [T, N] tensors:
    next_values[t] = V(s_{t+1}), of the true final observation where the episode ended at t;
    terminated, truncated 0/1 or bool; replayed rows are ordinary rows. Returns (A, A + values)."""
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
             clip_coef, ent_coef, vf_coef, clip_vloss=False, norm_adv=False):
    """The module docstring's loss on a minibatch of [B] tensors, A normalized with norm_adv;
    with clip_vloss, L_v = mean(0.5 * max((V - R)^2, (V_old + clip(V - V_old, -eps, eps) - R)^2))
    as in the PPO baselines. On a demo step ratio = pi(a_demo | s) <= 1 (oldlogprob = 0): with
    A > 0 the clip never binds, however close to 1 pi is; with A < 0 the row gives no gradient
    while pi < 1 - eps. Returns (loss, L_pg = -L_clip, L_v, mean entropy)."""
    if norm_adv:
        advantages = (advantages - advantages.mean()) / (advantages.std() + 1e-8)
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
    """One rollout of T steps from N slots, preallocated on the device: logprobs holds the
    behaviour log mu (0 on a replayed step), demo whether the step was replayed, final_obs the
    true final observation where a slot was truncated, and last_obs s_T, after the last step."""

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
        self.demo = zeros(dtype=torch.bool)
        self.final_obs = zeros(*obs_shape)
        self.last_obs = torch.zeros((num_envs, *obs_shape), device=device)

    @torch.no_grad()
    def gae(self, value_fn, gamma, gae_lambda):
        """compute_gae, V(s_{t+1}) being the next row's stored value, V(last_obs) after the last
        row, V(final_obs) where truncated (where terminated, whatever stands there counts 0)."""
        next_values = torch.empty_like(self.values)
        next_values[:-1] = self.values[1:]
        next_values[-1] = value_fn(self.last_obs)
        where = self.truncated.nonzero(as_tuple=True)
        if where[0].numel():
            next_values[where] = value_fn(self.final_obs[where])
        return compute_gae(self.rewards, self.values, next_values, self.terminated,
                           self.truncated, gamma, gae_lambda)


def choose_source(u, rho, phi, have_value_demos):
    """The source ('reward', 'value' or 'real') of an environment's next episode from one
    uniform draw u in [0, 1); with no value demos stored yet, the 'value' band plays 'real'."""
    if u < rho:
        return "reward"
    if u < rho + phi and have_value_demos:
        return "value"
    return "real"


def value_probabilities(max_values, alpha):
    """Sampling probabilities of the value demos, a softmax of their maximum values m_i:

        p_i = exp(alpha * (m_i - max_j m_j)) / sum_k exp(alpha * (m_k - max_j m_j))

    max_values [n] (a list or an array) -> p, a NumPy [n]. Every exponent is <= 0, so any m
    gives finite probabilities (an exponent far below 0 gives 0); alpha = 0 draws uniformly.
    Deviation: the paper's m_i^alpha needs m > 0, which MountainCar's are not."""
    m = np.asarray(max_values, dtype=np.float64)
    weights = np.exp(alpha * (m - m.max()))
    return weights / weights.sum()


def anneal(rho, phi, phi0, value_slots):
    """One annealing step, taken each time an episode joins the reward demos: min(phi, phi_0/K_v)
    moves from phi to rho, K_v (value_slots) being the value demos' room at the start (PyTorchRL
    divides by those held then: a deviation). After K_v joins, phi = 0, rho = rho_0 + phi_0."""
    step = min(phi, phi0 / max(1, value_slots))
    return rho + step, phi - step


class DemoBuffers:
    """The reward demos and the value demos, at most `capacity` episodes together. reward:
    [(episode_return, Demo)], the `given` demonstrations, then the agent's episodes whose return
    reached `threshold` (by default the given demos' lowest), oldest first. value: [(m, Demo)],
    the agent's other episodes of highest m = max_t V(s_t) (refresh())."""

    def __init__(self, demos, capacity, rho, phi, alpha, seed, threshold=None, rising=False):
        self.reward = [(demo.episode_return, demo) for demo in demos]
        self.value = []
        self.given, self.capacity, self.alpha, self.rising = len(demos), capacity, alpha, rising
        self.rho, self.phi, self.phi0 = rho, phi, phi
        self.value_slots = capacity - len(demos)
        self.threshold = min(r for r, _ in self.reward) if threshold is None else threshold
        self.rng = np.random.default_rng(seed)

    def __len__(self):
        return len(self.reward) + len(self.value)

    def admit(self, demo, max_value):
        """File a finished real episode; returns 'reward', 'value' or None (dropped).

        1. Return >= threshold: appended to the reward demos; rho, phi = anneal(...); over
           capacity the value demo with the lowest m leaves, or with none left the oldest of
           the agent's reward demos (first in, first out, as in the authors' code, where the
           given demos never leave; the threshold stays, as in the paper). Deviation, rising
           (--rising-threshold): with no value demo left, the reward demo with the lowest return
           leaves, a given one too (the oldest of equals; self.given is unchanged), and the
           threshold rises to the lowest return kept (max of the two: it never falls).
        2. Else it is appended to the value demos if there is room, or if its m is higher than
           the lowest m, whose demo then leaves; else it is dropped."""
        episode_return = demo.episode_return
        if episode_return >= self.threshold:
            self.reward.append((episode_return, demo))
            self.rho, self.phi = anneal(self.rho, self.phi, self.phi0, self.value_slots)
            if len(self) > self.capacity and self.value:
                evict_lowest(self.value)
            elif len(self) > self.capacity and self.rising:
                evict_lowest(self.reward)
            elif len(self) > self.capacity:
                self.reward.pop(self.given)  # the oldest of the agent's reward demos
            if self.rising:
                self.threshold = max(self.threshold, min(r for r, _ in self.reward))
            return "reward"
        if len(self) < self.capacity:
            self.value.append((max_value, demo))
            return "value"
        if self.value and max_value > min(m for m, _ in self.value):  # PyTorchRL admits on >=
            evict_lowest(self.value)
            self.value.append((max_value, demo))
            return "value"
        return None

    @torch.no_grad()
    def refresh(self, value_fn):
        """Every value demo's m = max_t V(s_t) over s_0..s_{T-1} again, with value_fn (raw
        observations [T, ...] -> values [T]) the critic just updated, so that admission and
        sampling compare one critic's numbers (the authors' code refreshes m on a replay)."""
        self.value = [(float(np.max(value_fn(demo.observations[:-1]))), demo)
                      for _, demo in self.value]

    def next_episode(self):
        """The Demo an environment replays next, or None: play a real episode."""
        source = choose_source(self.rng.random(), self.rho, self.phi, bool(self.value))
        if source == "reward":
            return self.reward[self.rng.integers(len(self.reward))][1]
        if source == "value":
            p = value_probabilities([m for m, _ in self.value], self.alpha)
            return self.value[self.rng.choice(len(self.value), p=p)][1]
        return None


def evict_lowest(scored):
    """Remove the lowest-scored entry of a [(score, Demo)] list, the earliest of equals."""
    scored.pop(min(range(len(scored)), key=lambda i: scored[i][0]))


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
    """Separate actor and critic MLPs. The actor outputs the logits of a categorical, or the
    mean of a diagonal Gaussian whose log std is a learned state-independent parameter."""

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

    def get_action_and_value(self, obs, action=None):
        """Sample an action (unless given); returns (action, log pi(a|s), entropy, V(s))."""
        dist = self.distribution(obs)
        if action is None:
            action = dist.sample()
        logprob, entropy = dist.log_prob(action), dist.entropy()
        if self.continuous:
            logprob, entropy = logprob.sum(-1), entropy.sum(-1)
        return action, logprob, entropy, self.get_value(obs)


# ---------------------------------------------------------------------------------------
# What the agent sees and sends: replayed episodes, normalized observations, clipped actions
# ---------------------------------------------------------------------------------------
class ObsNormalizer:
    """Running normalization (Gymnasium's RunningMeanStd) of every observation the agent learns
    from, replayed ones too; info["final_obs"] without updating the statistics."""

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


def make_vector_env(env_id, num_envs, buffers=None, video_folder=None):
    """N copies of env_id (DemoReplays with buffers) in a synchronous vector environment with
    SAME_STEP autoreset (a step that ends an episode returns the next one's first observation,
    the true last one in info["final_obs"]) and episode statistics, of replays too."""
    def make(i):
        if video_folder is not None:
            return recording_env(env_id, video_folder, f"eval-{i}")
        env = gym.make(env_id)
        return env if buffers is None else DemoReplay(env, buffers)

    envs = gym.vector.SyncVectorEnv([lambda i=i: make(i) for i in range(num_envs)],
                                    autoreset_mode=gym.vector.AutoresetMode.SAME_STEP)
    return gym.wrappers.vector.RecordEpisodeStatistics(envs)


class DemoReplay(gym.Wrapper):
    """An environment whose episodes are sometimes replays (each reset asks the DemoBuffers).
    A replay leaves the environment untouched and ends as the demo ended; info["demo_action"]
    is the demo's action for the observation just returned, which the agent records as its
    own. A seed given during a replay waits for the next real reset."""

    def __init__(self, env, buffers):
        super().__init__(env)
        self.buffers, self.demo, self.t, self.seed = buffers, None, 0, None

    def reset(self, *, seed=None, options=None):
        if seed is not None:
            self.seed = seed
        self.demo, self.t = self.buffers.next_episode(), 0
        if self.demo is None:
            obs, info = self.env.reset(seed=self.seed, options=options)
            self.seed = None
            return obs, info
        return self.demo.observations[0], {"demo_action": self.demo.actions[0]}

    def step(self, action):
        if self.demo is None:
            return self.env.step(action)
        reward = float(self.demo.rewards[self.t])
        self.t += 1
        if self.t < len(self.demo.rewards):
            return self.demo.observations[self.t], reward, False, False, {
                "demo_action": self.demo.actions[self.t]}
        ended = self.demo.terminated
        return self.demo.observations[self.t], reward, ended, not ended, {}


def to_env_action(agent, actions, action_space):
    """Actions for env.step: a Gaussian's clipped to the bounds, unclipped in the buffer."""
    actions = actions.cpu().numpy()
    if agent.continuous:
        return np.clip(actions, action_space.low, action_space.high)
    return actions


# ---------------------------------------------------------------------------------------
# Training
# ---------------------------------------------------------------------------------------
@torch.no_grad()
def act_or_replay(agent, obs, info, replayed):
    """The agent's sampled actions, log pi and V(s) for the N slots; where a slot replays a
    demo (replayed[n]), the demo's action info["demo_action"][n], taken with mu = 1."""
    action, logprob, _, value = agent.get_action_and_value(obs)
    if replayed.any():
        where = torch.from_numpy(replayed).to(obs.device)
        action[where] = torch.as_tensor(info["demo_action"][replayed]).to(action)
        logprob[where] = 0.0  # log mu = log 1
    return action, logprob, value


def train(args, agent, normalizer, envs, buffers, run, device):
    """PPO+D's loop: rollouts in which slots replay demos, GAE, PPO updates, priorities, log.
    run (RunWriter, below the banner) writes the run folder: step(n) prints progress and
    evaluates, episode/update add a CSV row, reached/non_finite say when to stop."""
    # eps = 1e-5 as in the PPO authors' baselines (torch's default is 1e-8)
    optimizer = torch.optim.Adam(agent.parameters(), lr=args.learning_rate, eps=1e-5)
    space = envs.single_action_space
    buffer = RolloutBuffer(args.num_steps, args.num_envs, envs.single_observation_space.shape,
                           space.shape, torch.float32 if agent.continuous else torch.long, device)
    recorder = EpisodeRecorder(args.num_envs)
    batch_size = args.num_envs * args.num_steps
    minibatch_size = batch_size // args.num_minibatches
    global_step, update = 0, 0
    raw_obs, info = envs.reset(seed=args.seed)
    next_obs = torch.from_numpy(normalizer(raw_obs, update=True)).to(device)

    while global_step < args.total_timesteps:  # the last rollout may pass the budget
        update += 1
        if args.anneal_lr:  # linear decay to 0 over the budget
            for group in optimizer.param_groups:
                group["lr"] = args.learning_rate * (1 - global_step / args.total_timesteps)

        # Rollout: T steps of the N slots, each playing a real episode or replaying a demo.
        for step in range(args.num_steps):
            replayed = info.get("_demo_action", np.zeros(args.num_envs, dtype=bool))
            action, logprob, value = act_or_replay(agent, next_obs, info, replayed)
            env_action = to_env_action(agent, action, space)
            obs, reward, terminated, truncated, info = envs.step(env_action)
            # Deviation: replayed steps touch no environment and do not count in the budget.
            global_step += int((~replayed).sum())
            buffer.obs[step], buffer.actions[step] = next_obs, action
            buffer.logprobs[step], buffer.values[step] = logprob, value
            buffer.demo[step] = torch.from_numpy(replayed).to(device)
            buffer.rewards[step] = torch.from_numpy(reward).to(device)
            buffer.terminated[step] = torch.from_numpy(terminated).to(device)
            buffer.truncated[step] = torch.from_numpy(truncated).to(device)
            for i in np.flatnonzero(truncated):
                final_obs = normalizer(info["final_obs"][i])
                buffer.final_obs[step, i] = torch.from_numpy(final_obs).to(device)
            # Finished real episodes, with their raw observations, are candidate demos.
            for demo, max_value in recorder.step(raw_obs, env_action, reward, value.cpu().numpy(),
                                                 terminated, truncated, info.get("final_obs"),
                                                 ~replayed):
                buffers.admit(demo, max_value)
            raw_obs = obs
            next_obs = torch.from_numpy(normalizer(obs, update=True)).to(device)
            run.step(global_step)  # progress line; evaluation every --eval-every (real) steps
            for i in np.flatnonzero(info.get("_episode", np.zeros_like(replayed)) & ~replayed):
                run.episode(global_step, info["episode"]["r"][i], info["episode"]["l"][i])
            if run.reached(args.stop_at_return, global_step):  # real episodes only
                return
        buffer.last_obs.copy_(next_obs)

        # Targets: GAE over the whole rollout, replayed rows included.
        advantages, returns = buffer.gae(agent.get_value, args.gamma, args.gae_lambda)
        b_obs, b_actions = buffer.obs.flatten(0, 1), buffer.actions.flatten(0, 1)
        b_logprobs, b_values = buffer.logprobs.flatten(), buffer.values.flatten()
        b_advantages, b_returns = advantages.flatten(), returns.flatten()
        b_own = ~buffer.demo.flatten()  # the agent's own rows

        # Update: epochs of minibatch gradient steps, replays included.
        kls, clipped = [], []
        for epoch in range(args.update_epochs):
            for idx in torch.randperm(batch_size, device=device).split(minibatch_size):
                _, newlogprob, entropy, newvalue = agent.get_action_and_value(b_obs[idx],
                                                                              b_actions[idx])
                loss, pg_loss, v_loss, entropy = ppo_loss(
                    newlogprob=newlogprob, oldlogprob=b_logprobs[idx],
                    advantages=b_advantages[idx], newvalue=newvalue, oldvalue=b_values[idx],
                    returns=b_returns[idx], entropy=entropy, clip_coef=args.clip_coef,
                    ent_coef=args.ent_coef, vf_coef=args.vf_coef, clip_vloss=args.clip_vloss,
                    norm_adv=args.norm_adv)
                optimizer.zero_grad()
                loss.backward()
                nn.utils.clip_grad_norm_(agent.parameters(), args.max_grad_norm)
                optimizer.step()
                # approx KL (k3) and clip fraction, agent's rows only (log mu = 0 on demo rows)
                logratio = (newlogprob.detach() - b_logprobs[idx])[b_own[idx]]
                kls.append(torch.expm1(logratio) - logratio)
                clipped.append(torch.expm1(logratio).abs() > args.clip_coef)
            epoch_kl = torch.cat(kls[-args.num_minibatches:]).mean()  # NaN if all replayed
            if args.target_kl is not None and epoch_kl > args.target_kl:
                break
        if run.non_finite(loss.item(), global_step):  # says so; the run stops as interrupted
            return

        # Priorities: each value demo's max V under the updated critic, observations normalized.
        buffers.refresh(lambda raw: agent.get_value(
            torch.from_numpy(normalizer(raw)).to(device)).cpu().numpy())

        run.update(global_step, learning_rate=optimizer.param_groups[0]["lr"],
                   policy_loss=pg_loss.item(), value_loss=v_loss.item(), entropy=entropy.item(),
                   approx_kl=torch.cat(kls).mean().item(),
                   clipfrac=torch.cat(clipped).float().mean().item(),
                   explained_variance=explained_variance(b_values, b_returns), epochs=epoch + 1,
                   demo_fraction=buffer.demo.float().mean().item(), rho=buffers.rho,
                   phi=buffers.phi, threshold=buffers.threshold,
                   reward_demos=len(buffers.reward), value_demos=len(buffers.value))
        if args.save_demos_every and update % args.save_demos_every == 0:
            save_reward_demos(run.path, buffers)


def main(args: Args) -> dict:
    """Train PPO+D (or evaluate --eval-checkpoint, or record a demo), write the run folder,
    return the summary. Ctrl-C: the run folder is written, then KeyboardInterrupt goes on up."""
    # Check everything a user can get wrong before anything runs: one line, exit status 2.
    check_args(args)
    obs_shape, action_space = check_env(args)
    args, checkpoint = load_checkpoint(with_demo_model(args))  # the network's flags from it
    if checkpoint is None:
        demos = load_demos(demos_folder(args), obs_shape, action_space, args.demo_capacity)

    # Set up: seeds, device, the agent and its observation normalizer, the run folder.
    device = seed_and_device(args.seed, args.cuda)
    continuous = isinstance(action_space, gym.spaces.Box)
    action_dim = action_space.shape[0] if continuous else int(action_space.n)
    agent = Agent(obs_shape[0], action_dim, continuous, args.hidden_size).to(device)
    normalizer = ObsNormalizer(obs_shape, args.norm_obs)
    models = {"agent": agent, "obs_rms": normalizer}  # what model.pt holds
    if checkpoint is not None:
        restore(checkpoint, models, args)
    if args.record_demo_from is not None:
        return record_demo_into(demos_folder(args), agent, normalizer, args, device)
    run = RunWriter(args, device, models)

    # Train (unless evaluating a checkpoint), then finish: evaluate, save, write, plot.
    if checkpoint is not None:
        return train_and_finish(run, None)
    print_budget(args)
    buffers = DemoBuffers(demos, args.demo_capacity, args.rho, args.phi, args.alpha,
                          args.seed, args.success_threshold, args.rising_threshold)
    envs = make_vector_env(args.env_id, args.num_envs, buffers=buffers)
    return train_and_finish(run, lambda: train_and_save_demos(
        args, agent, normalizer, envs, buffers, run, device), envs)


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
# What the plumbing asks of ppod.py: its own checks, its greedy policy, its model's flags
# ---------------------------------------------------------------------------------------
def recording_env(env_id, video_folder, name_prefix):
    """An evaluation environment of --capture-video: its first episode recorded into
    video_folder."""
    os.environ.setdefault("SDL_VIDEODRIVER", "dummy")  # frames only, no window to open
    env = gym.make(env_id, render_mode="rgb_array")
    with warnings.catch_warnings():  # the environments share one folder on purpose
        warnings.filterwarnings("ignore", message=".*Overwriting existing videos")
        return gym.wrappers.RecordVideo(env, video_folder, name_prefix=name_prefix,
                                        episode_trigger=lambda episode: episode == 0)


def check_flags(args):
    """ppod.py's own flags, checked before any environment is made."""
    for name in ("num_envs", "num_steps", "num_minibatches", "update_epochs", "hidden_size",
                 "demo_capacity", "learning_rate", "clip_coef", "max_grad_norm"):
        if not getattr(args, name) > 0:
            fail(f"--{name.replace('_', '-')} must be positive, got {getattr(args, name)}")
    for name in ("gamma", "gae_lambda", "rho", "phi"):
        if not 0.0 <= getattr(args, name) <= 1.0:
            fail(f"--{name.replace('_', '-')} must be in [0, 1], got {getattr(args, name)}")
    if args.rho + args.phi >= 1.0:
        fail(f"--rho {args.rho} + --phi {args.phi} must be less than 1, or no real episode "
             "would ever be played")
    for name in ("alpha", "save_demos_every"):
        if getattr(args, name) < 0:
            fail(f"--{name.replace('_', '-')} must be 0 or more, got {getattr(args, name)}")
    if args.success_threshold is not None and not math.isfinite(args.success_threshold):
        fail(f"--success-threshold must be a finite number, got {args.success_threshold}")
    if args.eval_checkpoint is not None and args.record_demo_from is not None:
        fail("--eval-checkpoint and --record-demo-from both skip training; pass one of them")
    batch_size = args.num_envs * args.num_steps
    if batch_size % args.num_minibatches:
        fail(f"num_envs*num_steps = {batch_size} is not divisible by --num-minibatches "
             f"{args.num_minibatches}; pick a divisor of {batch_size}")
    if args.norm_adv and batch_size // args.num_minibatches < 2:
        fail("minibatches of 1 sample cannot normalize advantages; use fewer "
             "--num-minibatches or --no-norm-adv")


def check_spaces(args, obs_space, action_space):
    """Whether ppod.py handles the environment's spaces; returns (obs_shape, action_space)."""
    if not (isinstance(action_space, gym.spaces.Discrete)
            or isinstance(action_space, gym.spaces.Box) and len(action_space.shape) == 1):
        fail(f"{args.env_id} has a {type(action_space).__name__} action space of shape "
             f"{action_space.shape}; ppod.py handles Discrete and flat Box actions "
             "(ppo_masked.py masks Discrete actions; no script here takes MultiDiscrete)")
    if not isinstance(obs_space, gym.spaces.Box):
        fail(f"{args.env_id} has a {type(obs_space).__name__} observation space; ppod.py needs "
             "a Box (ppo_masked.py one-hot encodes Discrete ones, qlearning.py uses a table)")
    if len(obs_space.shape) != 1:
        fail(f"{args.env_id} has observations of shape {obs_space.shape}; ppod.py's MLP needs "
             "flat vectors (wrap images with a CNN, which this script does not have)")
    return obs_space.shape, action_space


def greedy_action(agent, obs):
    """The agent's most likely action: the argmax of the logits, or the Gaussian's mean."""
    out = agent.actor(obs)
    return out if agent.continuous else out.argmax(-1)


def greedy_policy(models, envs):
    """The evaluation's policy, act(obs, info) -> actions, on real episodes (no replays): the
    most likely action (the argmax of the logits, or the Gaussian's mean clipped to the
    bounds), the observation statistics frozen."""
    agent, normalizer = models["agent"], models["obs_rms"]
    device = next(agent.parameters()).device

    @torch.no_grad()
    def act(obs, info):
        action = greedy_action(agent, torch.from_numpy(normalizer(obs)).to(device))
        return to_env_action(agent, action, envs.single_action_space)
    return act


# What a run is judged on, by environment id (its benchmark task in benchmark.py, its README
# row): (threshold, window of training episodes, "train": the last-window mean at the end,
# or "eval": the final greedy evaluation). Another id: its reward_threshold over 20, "train".
GOALS = {"MountainCar-v0": (-120, 50, "train", 300_000)}
MODEL_FLAGS = ("hidden_size", "norm_obs")  # a checkpoint's network (ppod.py's or ppo.py's)
# ppod.py's columns of updates.csv as TensorBoard's scalars, under CleanRL's names
TENSORBOARD_NAMES = {
    "learning_rate": "charts/learning_rate", "epochs": "charts/epochs",
    "demo_fraction": "charts/demo_fraction", "rho": "charts/rho", "phi": "charts/phi",
    "threshold": "charts/threshold", "reward_demos": "charts/reward_demos",
    "value_demos": "charts/value_demos",
    "policy_loss": "losses/policy_loss", "value_loss": "losses/value_loss",
    "entropy": "losses/entropy", "approx_kl": "losses/approx_kl", "clipfrac": "losses/clipfrac",
    "explained_variance": "losses/explained_variance"}


# ---------------------------------------------------------------------------------------
# Plumbing of ppod.py's own: the budget's line, updates.csv's explained variance, and the
# demonstration files (found, read and checked, recorded from a model, saved from a run)
# ---------------------------------------------------------------------------------------
def print_budget(args):
    """Said at the start, since the budget is not rounded to whole rollouts."""
    print(f"{SCRIPT}: training runs whole rollouts of up to {args.num_envs * args.num_steps:,} "
          "real steps (replayed demonstration steps do not count): the one that reaches "
          f"--total-timesteps {args.total_timesteps:,} is finished")


def train_and_save_demos(args, agent, normalizer, envs, buffers, run, device):
    """train(), then the reward demos into the run folder, Ctrl-C or not."""
    try:
        train(args, agent, normalizer, envs, buffers, run, device)
    finally:
        save_reward_demos(run.path, buffers)


def explained_variance(values, returns):
    """1 - Var[R - V] / Var[R]: 1 when the critic predicts the targets, 0 or less when it
    does no better than their mean (NaN when the targets do not vary)."""
    var_returns = returns.var().item()
    return 1 - (returns - values).var().item() / var_returns if var_returns else math.nan


def with_demo_model(args):
    """--record-demo-from's model as the checkpoint that load_checkpoint reads, as it reads an
    --eval-checkpoint's (the network's flags come from it)."""
    return replace(args, eval_checkpoint=args.eval_checkpoint or args.record_demo_from)


HERE = os.path.dirname(os.path.abspath(__file__))


def demos_folder(args):
    """--demos-dir, or demos/<env-id> beside this script (where MountainCar-v0's ships; in
    the folder name, "/" and ":" of the id become "-")."""
    return args.demos_dir or os.path.join(HERE, "demos",
                                          args.env_id.replace("/", "-").replace(":", "-"))


@dataclass
class Demo:
    """One stored episode: observations [T+1, ...] (the last is the final observation),
    actions [T, ...], rewards [T], and whether it ended by termination (else by truncation,
    so its last step bootstraps)."""
    observations: np.ndarray
    actions: np.ndarray
    rewards: np.ndarray
    terminated: bool = True

    @property
    def episode_return(self):
        return float(np.sum(self.rewards))


def save_demo(path, demo):
    """A Demo as the .npz that load_demo reads."""
    np.savez(path, observations=demo.observations, actions=demo.actions,
             rewards=demo.rewards, terminated=np.bool_(demo.terminated))


def load_demo(path, obs_shape, action_space):
    """Read a demonstration safely (allow_pickle=False) and check that it fits the
    environment: observations [T+1, *obs_shape], actions [T] in range or [T, action_dim],
    rewards [T], T >= 1."""
    try:
        with np.load(path, allow_pickle=False) as f:
            data = {key: f[key] for key in f.files}
    except Exception as e:
        fail(f"demonstration {path} is not a readable .npz file ({type(e).__name__}); "
             "record one with --record-demo-from CHECKPOINT")
    missing = {"observations", "actions", "rewards"} - set(data)
    if missing:
        fail(f"demonstration {path} lacks {', '.join(sorted(missing))}; a demo holds "
             "observations, actions and rewards")
    obs, actions, rewards = data["observations"], data["actions"], data["rewards"]
    steps = len(rewards) if rewards.ndim == 1 else -1
    if steps <= 0:
        fail(f"demonstration {path} is empty or its rewards are not a list of steps")
    discrete = isinstance(action_space, gym.spaces.Discrete)
    action_shape = () if discrete else action_space.shape
    if obs.shape != (steps + 1, *obs_shape):
        fail(f"demonstration {path} has observations of shape {obs.shape}; {steps} steps of "
             f"this environment need {(steps + 1, *obs_shape)}")
    if actions.shape != (steps, *action_shape) or (discrete and not (
            np.issubdtype(actions.dtype, np.integer) and 0 <= actions.min()
            and actions.max() < action_space.n)):
        takes = f"integers below {action_space.n}" if discrete else "vectors"
        fail(f"demonstration {path} has actions of shape {actions.shape} ({actions.dtype}); "
             f"this environment takes {takes} of shape {(steps, *action_shape)}")
    return Demo(obs.astype(np.float32), actions.astype(np.int64 if discrete else np.float32),
                rewards.astype(np.float32), bool(data.get("terminated", True)))


def load_demos(folder, obs_shape, action_space, capacity=None):
    """Every *.npz in folder, sorted by name; there must be at most `capacity`."""
    paths = sorted(glob.glob(os.path.join(folder, "*.npz")))
    if not paths:
        fail(f"no demonstrations (*.npz) in {folder}; pass --demos-dir, or record one with "
             "--record-demo-from CHECKPOINT")
    if capacity is not None and len(paths) > capacity:
        fail(f"--demo-capacity {capacity} cannot hold the {len(paths)} demonstrations in "
             f"{folder}; raise it")
    return [load_demo(path, obs_shape, action_space) for path in paths]


class EpisodeRecorder:
    """The agent's real episodes being played, slot by slot, kept as Demos-to-be: raw
    observations, actions as the environment took them, rewards, and the largest value
    estimate seen (an admitted value demo's m, until the next refresh)."""

    def __init__(self, num_envs):
        self.steps = [[] for _ in range(num_envs)]
        self.max_value = np.full(num_envs, -np.inf)

    def add(self, i, obs, action, reward, value):
        self.steps[i].append((obs, action, reward))
        self.max_value[i] = max(self.max_value[i], value)

    def finish(self, i, final_obs, terminated):
        """The slot's finished episode as (Demo, max value); the slot starts over. A time
        limit gives terminated=False: replayed, the demo's last step bootstraps."""
        obs, actions, rewards = zip(*self.steps[i])
        demo = Demo(np.array([*obs, final_obs], dtype=np.float32), np.array(actions),
                    np.array(rewards, dtype=np.float32), bool(terminated))
        max_value = float(self.max_value[i])
        self.steps[i], self.max_value[i] = [], -np.inf
        return demo, max_value

    def step(self, obs, actions, rewards, values, terminated, truncated, final_obs, real):
        """Record one vector step of the real slots; returns the episodes that ended at it,
        [(Demo, max value)]. final_obs: info["final_obs"], the true last observations."""
        finished = []
        for i in np.flatnonzero(real):
            self.add(i, obs[i], actions[i], rewards[i], values[i])
            if terminated[i] or truncated[i]:
                finished.append(self.finish(i, final_obs[i], terminated[i]))
        return finished


def record_demo_into(folder, agent, normalizer, args, device):
    """One greedy episode of the agent (start state from --seed) saved as the next free
    demo_<k>.npz in folder; returns its path, return and length."""
    env = gym.make(args.env_id)
    obs, _ = env.reset(seed=args.seed)
    recorder = EpisodeRecorder(1)
    terminated = truncated = False
    with torch.inference_mode():
        while not (terminated or truncated):
            action = greedy_action(agent, torch.from_numpy(normalizer(obs[None])).to(device))
            action = to_env_action(agent, action, env.action_space)[0]
            next_obs, reward, terminated, truncated, _ = env.step(action)
            recorder.add(0, obs, action, reward, 0.0)
            obs = next_obs
    env.close()
    demo = recorder.finish(0, obs, terminated)[0]
    os.makedirs(folder, exist_ok=True)
    k = 0
    while os.path.exists(os.path.join(folder, f"demo_{k}.npz")):
        k += 1
    path = os.path.join(folder, f"demo_{k}.npz")
    save_demo(path, demo)
    print(f"{SCRIPT}: wrote {path}: {len(demo.rewards)} steps, return {demo.episode_return:g}, "
          f"{'terminated' if demo.terminated else 'truncated'}")
    return {"demo_path": path, "episode_return": demo.episode_return,
            "episode_length": len(demo.rewards)}


def save_reward_demos(run_path, buffers):
    """The reward demos as demos/demo_<k>.npz in the run folder, best return first: a
    --demos-dir for another run."""
    folder = os.path.join(run_path, "demos")
    os.makedirs(folder, exist_ok=True)
    for k, (_, demo) in enumerate(sorted(buffers.reward, key=lambda scored: -scored[0])):
        save_demo(os.path.join(folder, f"demo_{k}.npz"), demo)


if __name__ == "__main__":
    cli()

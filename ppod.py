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
    # The run folder's flags (--output-dir, --save-model, --eval-checkpoint, --track, ...)
    # come after these: every script shares them, declared once in RunFlags below the banner.
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
            return make_recorded(env_id, video_folder, f"eval-{i}")
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
    run (Run, below the banner) writes the run folder: step(n) prints progress and
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
    # prepare (below the banner): --eval-checkpoint's model read, the environment made and
    # checked, every flag checked (a mistake: one line, exit status 2), the seeds set, the
    # device chosen.
    args, (obs_shape, action_space), checkpoint, device = prepare(with_demo_model(args))
    if checkpoint is None:
        demos = load_demos(demos_folder(args), obs_shape, action_space, args.demo_capacity)

    # Set up: the agent and its observation normalizer, the run folder.
    continuous = isinstance(action_space, gym.spaces.Box)
    action_dim = action_space.shape[0] if continuous else int(action_space.n)
    agent = Agent(obs_shape[0], action_dim, continuous, args.hidden_size).to(device)
    normalizer = ObsNormalizer(obs_shape, args.norm_obs)
    models = {"agent": agent, "obs_rms": normalizer}  # what model.pt holds
    if args.record_demo_from is not None:  # the model's episodes, without a run folder
        restore(checkpoint, models, args)
        return record_demo_into(demos_folder(args), agent, normalizer, args, device)
    run = Run(args, device, models, checkpoint)

    # Train (unless evaluating a checkpoint), then finish: evaluate, save, write, plot.
    if checkpoint is not None:
        return run.train(None)
    print_budget(args)
    buffers = DemoBuffers(demos, args.demo_capacity, args.rho, args.phi, args.alpha,
                          args.seed, args.success_threshold, args.rising_threshold)
    envs = make_vector_env(args.env_id, args.num_envs, buffers=buffers)
    return run.train(lambda: train_and_save_demos(
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
# What the plumbing asks of ppod.py: its own checks, its greedy policy, its model's flags
# ---------------------------------------------------------------------------------------
def check_flags(args):
    """ppod.py's own flags, checked by prepare before training."""
    check_range(args, positive=["num_envs", "num_steps", "num_minibatches", "update_epochs",
                                "hidden_size", "demo_capacity", "learning_rate", "clip_coef",
                                "max_grad_norm"],
                fraction=["gamma", "gae_lambda", "rho", "phi"])
    if args.rho + args.phi >= 1.0:
        fail(f"--rho {args.rho} + --phi {args.phi} must be less than 1, or no real episode "
             "would ever be played")
    for name in ("alpha", "save_demos_every"):
        if getattr(args, name) < 0:
            fail(f"--{name.replace('_', '-')} must be 0 or more, got {getattr(args, name)}")
    if args.success_threshold is not None and not math.isfinite(args.success_threshold):
        fail(f"--success-threshold must be a finite number, got {args.success_threshold}")
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
    if args.eval_checkpoint is not None and args.record_demo_from is not None:
        fail("--eval-checkpoint and --record-demo-from both skip training; pass one of them")
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

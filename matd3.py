# From plainrl (MIT licence, (c) 2026 the plainrl authors): keep this line in a copy.
"""MADDPG and MATD3: deterministic actors, one per agent, and a centralized critic, off-policy.

Each agent i of a PettingZoo parallel environment with continuous actions acts with its own
deterministic policy mu_i(o^i); a critic Q(s, a^1, ..., a^n), used only in training, sees the
global state and every agent's action (--critic-state ep: s = env.state(), a row per step;
fp: a row per agent, s joined with its observation and id; HARL's buffers, Zhong et al.
2024). Each gradient step on a replay batch regresses the critic on an n-step target and
moves every actor up the critic's gradient in its own action. MADDPG (Lowe et al. 2017) and
MATD3 (Ackermann et al. 2019, the default) differ in TD3's three fixes (Fujimoto et al. 2018).

Key equations (actions live in [-1, 1]^d, scaled to the environment's bounds when stepping):

    exploration   a^i = clip(mu_i(o^i) + eps, -1, 1),                   eps ~ N(0, sigma^2)
    target action a'^j = clip(mu'_j(o'^j) + clip(eps', -c, c), -1, 1)   for EVERY agent j
    n-step return R = sum_{l<m} gamma^l r_{k+l}; m = n, or the window stops at the first
                  episode end in it (k: the sampled step); bootstrap from the state after k+m-1
    critic target y = R + gamma^m (1 - terminated_{k+m-1}) min(Q'_1, Q'_2)(s', a'^1..a'^n)
                  (MADDPG: Q'_1 alone); a truncation (time limit) ends the window, bootstrapping
    critic loss   L_Q = sum_c mean over the batch of (Q_c(s, a) - y)^2
    actor loss    L_mu_i = -mean over the batch of Q_1(s, a^1, .., mu_i(o^i), .., a^n)
                  (the other agents' actions a^j as stored in the batch), every d-th step
    targets       theta' <- tau theta + (1 - tau) theta', with every actor step

Papers:
    Lowe et al. 2017, "Multi-Agent Actor-Critic for Mixed Cooperative-Competitive
        Environments", NeurIPS 2017 (MADDPG, the MPE tasks)
    Ackermann et al. 2019, "Reducing Overestimation Bias in Multi-Agent Domains Using
        Double Centralized Critics", arXiv:1910.01465 (MATD3)
    Fujimoto, van Hoof & Meger 2018, "Addressing Function Approximation Error in
        Actor-Critic Methods", ICML 2018 (TD3)
    Zhong et al. 2024, "Heterogeneous-Agent Reinforcement Learning", JMLR 25 (HARL)
    Pardo et al. 2018, "Time Limits in Reinforcement Learning", ICML 2018

Run:
    python matd3.py --env-id simple_spread_v3                  # MATD3, EP critic, the defaults
    python matd3.py --env-id simple_spread_v3 --algo maddpg    # MADDPG
    python matd3.py --env-id simple_speaker_listener_v4 --critic-state fp --n-step 3

Writes runs/<env_id>__matd3__<seed>__<unix_time>/ (plainrl's CONTRIBUTING.md, "What a run writes").
"""

# ---------------------------------------------------------------------------------------
# Imports
# ---------------------------------------------------------------------------------------
import copy
import math
import os
from dataclasses import dataclass, replace
from typing import Literal, NamedTuple, Optional

os.environ.setdefault("PYGAME_HIDE_SUPPORT_PROMPT", "1")  # mpe2 imports pygame, which greets

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
import tyro
from pettingzoo.utils.conversions import aec_to_parallel_wrapper

SCRIPT = os.path.basename(__file__)


# ---------------------------------------------------------------------------------------
# Flags
# ---------------------------------------------------------------------------------------
@dataclass
class Args:
    # The run folder's flags (--output-dir, --save-model, --eval-checkpoint, --track, ...)
    # come after these: every script shares them, declared once in RunFlags below the banner.
    env_id: str = "simple_spread_v3"
    """a cooperative MPE task (mpe2) or module:function returning a parallel env with Box actions"""
    seed: int = 1
    """seeds Python, NumPy, torch and the environments"""
    total_timesteps: int = 200_000
    """the training budget in environment steps (one step of one copy, all agents at once)"""
    cuda: tyro.conf.DisallowNone[Optional[bool]] = None
    """--cuda: the GPU; --no-cuda: the CPU; neither: the GPU for an image, the CPU for a vector"""
    # None: the algorithm's name, as summary.json's "algorithm".
    exp_name: Optional[str] = None
    """the experiment name, part of the run folder's name (None: --algo's, matd3 or maddpg)"""
    eval_episodes: int = 10
    """greedy evaluation episodes after training, without exploration noise (0 skips it)"""
    eval_every: int = 0
    """also evaluate greedily every N steps (as --total-timesteps counts; 0: only after training)"""
    stop_at_return: Optional[float] = None
    """stop once the training mean over its goal's window (GOALS; else 20 episodes) reaches this"""

    # No presets: built for PettingZoo's continuous MPE tasks; its settings below.
    # Environment and algorithm
    max_cycles: int = 25
    """MPE's time limit: steps per episode, after which every agent is truncated"""
    algo: Literal["matd3", "maddpg"] = "matd3"
    """matd3: twin critics, target smoothing noise 0.2, policy delay 2; maddpg: one critic, 0, 1"""
    twin_q: Optional[bool] = None
    """clipped double Q: two centralized critics, the target takes the smaller (None: --algo)"""
    # 0.2 in the TD3 and MATD3 papers.
    target_policy_noise: Optional[float] = None
    """sigma' of the target actions' smoothing noise, a fraction of the half-range (None: --algo)"""
    noise_clip: float = 0.5
    """c: the target policy smoothing noise is clipped to [-c, c] (0.5 in the TD3 paper)"""
    # 2 in the TD3 and MATD3 papers.
    policy_delay: Optional[int] = None
    """d: the actors and the targets move on every d-th critic step (2 in MATD3; None: --algo)"""
    critic_state: Literal["ep", "fp"] = "ep"
    """critic input: ep = env.state(), one row per step; fp = state | own obs | id, one per agent"""
    n_step: int = 1
    """n of the n-step return (1 in the MADDPG and MATD3 papers and in HARL's defaults)"""
    num_envs: int = 4
    """N: environment copies stepped in lock-step"""
    learning_starts: int = 5_000
    """uniformly random actions and no learning for this many environment steps"""
    gradient_steps: int = 1
    """gradient steps after each lock-step of the N copies"""
    # Rounded down to whole lock-steps; never allocated larger than the budget.
    buffer_size: int = 1_000_000
    """replay capacity in rows, one row per step of one copy (1e6 in the MADDPG paper)"""
    batch_size: int = 256
    """rows sampled for each gradient step (1024 in the MADDPG paper, 1000 in HARL's defaults)"""
    # HARL's defaults: 5e-4 actor, 1e-3 critic.
    learning_rate: float = 1e-3
    """Adam learning rate of the actors and the critics (1e-2 in the MADDPG paper)"""
    gamma: float = 0.95
    """discount factor (0.95 in the MADDPG paper)"""
    tau: float = 0.01
    """soft target update coefficient (0.01 in the MADDPG paper, 0.005 in HARL's defaults)"""
    exploration_noise: float = 0.1
    """sigma of the Gaussian exploration noise, a fraction of the action half-range (0.1 in TD3)"""
    hidden_size: int = 64
    """width of the two hidden layers of each actor and critic (64 in the MADDPG paper)"""
    log_interval: int = 1_000
    """environment steps between rows of updates.csv"""


# What --algo sets; each of these flags left at None takes its value from here.
ALGOS = {
    "matd3": {"twin_q": True, "target_policy_noise": 0.2, "policy_delay": 2},
    "maddpg": {"twin_q": False, "target_policy_noise": 0.0, "policy_delay": 1},
}


def resolve_algo(args):
    """The flags with every one of ALGOS' flags that was not given (None) taken from
    --algo's preset; the ones given override it."""
    preset = ALGOS[args.algo]
    return replace(args, **{k: v for k, v in preset.items() if getattr(args, k) is None})


# ---------------------------------------------------------------------------------------
# The math
# ---------------------------------------------------------------------------------------
def nstep_return(rewards, ends, gamma):
    """The n-step return along a window of n stored steps k, k+1, ..., k+n-1 (HARL's
    off-policy buffers). rewards and ends are [n, ...] tensors (ends 0/1 or bool: the episode
    ended at that step, a termination or a truncation, or the step is the newest of its copy,
    whose successor is not stored yet). The window stops at its first end:

        w_l = prod_{j<l} (1 - end_j)        (1 while no end came before step l)
        R   = sum_{l<n} gamma^l w_l r_l,    m = sum_{l<n} w_l,    discount = gamma^m

    Returns (R, discount), each of shape [...]. The bootstrap belongs to step k+m-1, the
    last one in the window; whether it is cut (terminated) is the caller's business.
    """
    ends = ends.to(rewards.dtype)
    alive = torch.cumprod(1.0 - ends, dim=0)
    weights = torch.cat([torch.ones_like(alive[:1]), alive[:-1]])
    shape = (-1,) + (1,) * (rewards.dim() - 1)
    powers = gamma ** torch.arange(len(rewards), dtype=rewards.dtype, device=rewards.device)
    return (powers.view(shape) * weights * rewards).sum(0), gamma ** weights.sum(0)


def next_index(index, end_flag, num_envs, capacity):
    """The row of the next step along a window: rows are written a lock-step at a time, N
    copies in N consecutive rows, so copy n's next step lies N rows on (modulo the ring's
    capacity, a multiple of N); a row that ends its window points at itself:

        next = (index + (1 - end) * N) mod capacity
    """
    return (index + (1 - end_flag.long()) * num_envs) % capacity


def critic_target(rewards, discounts, terminated, next_q1, next_q2, twin_q=True):
    """The critics' regression target on n-step returns, clipped double Q (MATD3):

        y = R + gamma^m * (1 - terminated) * min(Q'_1(s', a'), Q'_2(s', a'))    (twin_q)
        y = R + gamma^m * (1 - terminated) * Q'_1(s', a')                        (MADDPG)

    rewards R and discounts gamma^m come from nstep_return; terminated is the flag of the
    window's last step (a truncation bootstraps). All inputs are tensors of one shape ([B, K]);
    next_q2 is unused (it may be None) without twin_q. Returns y of that shape.
    """
    next_q = torch.minimum(next_q1, next_q2) if twin_q else next_q1
    return rewards + discounts * (1.0 - terminated.to(rewards.dtype)) * next_q


def noisy_action(actions, sigma, noise_clip=math.inf):
    """Gaussian noise on actions in [-1, 1]^d, the noise clipped to [-c, c] and the sum to
    the bounds:

        a + clip(eps, -c, c) clipped to [-1, 1],   eps ~ N(0, sigma^2) per dimension

    Exploration: noisy_action(mu_i(o^i), sigma). Target policy smoothing: noisy_action(
    mu'_i(o'^i), sigma', c) for each agent. With sigma = 0 the actions come back as they are.
    """
    if sigma == 0:
        return actions
    noise = (torch.randn_like(actions) * sigma).clamp(-noise_clip, noise_clip)
    return (actions + noise).clamp(-1.0, 1.0)


def soft_update(target_net, source_net, tau):
    """Polyak averaging, in place and without gradients, for every pair of parameters:

        theta' <- tau * theta + (1 - tau) * theta'
    """
    with torch.no_grad():
        for target, source in zip(target_net.parameters(), source_net.parameters()):
            target.mul_(1.0 - tau).add_(source, alpha=tau)


def masked_mean(x, mask):
    """mean of x over the entries where mask is 1:  sum(m * x) / max(1, sum(m))."""
    return (x * mask).sum() / mask.sum().clamp(min=1.0)


def critic_rows(rewards, terminated, truncated, active, episode_end, critic_state):
    """What the buffer stores for one lock-step: rewards, terminated, truncated and active
    masks m are [N, A] (m: the agent acted in this step), episode_end [N]. Returns
    (rewards, dones, terms), each [N, K] (K = 1 for EP, A for FP), with the team reward
    r = sum_i m^i r^i / max(1, sum_i m^i) (HARL's MPE wrapper: the sum, for every agent):

        EP: r; done = episode_end; term = episode_end and no agent truncated
        FP: r * m^i; done^i = terminated^i or truncated^i or not m^i; term^i = terminated^i
            or not m^i (an agent that did not act ends its row; valid_transitions masks it)
    """
    team = (rewards * active).sum(-1, keepdim=True) / active.sum(-1, keepdim=True).clamp(min=1.0)
    if critic_state == "ep":
        end = episode_end.unsqueeze(-1)
        return team, end, end & ~truncated.any(-1, keepdim=True)
    idle = ~active.bool()
    return team * active, terminated | truncated | idle, terminated | idle


def state_rows(state, obs, critic_state):
    """The critic's state rows for one step: state [N, S], the agents' (padded) obs [N, A, D].

        EP: s                          -> [N, 1, S]
        FP: s | o^i | one-hot(i)       -> [N, A, S + D + A]
    """
    if critic_state == "ep":
        return state.unsqueeze(1)
    num_envs, num_agents = obs.shape[:2]
    ids = torch.eye(num_agents, device=obs.device).expand(num_envs, -1, -1)
    return torch.cat([state.unsqueeze(1).expand(-1, num_agents, -1), obs, ids], dim=-1)


class Batch(NamedTuple):
    """A sample of B rows: the state rows share_obs [B, K, S_c], obs [B, A, D], actions
    [B, A, d] (padded), valid [B, A], the n-step rewards and discounts [B, K], terms and
    dones of each window's last step [B, K], next_share_obs [B, K, S_c] and next_obs
    [B, K, A, D] after it (each state row's window has its own last step)."""
    share_obs: torch.Tensor
    obs: torch.Tensor
    actions: torch.Tensor
    valid: torch.Tensor
    rewards: torch.Tensor
    discounts: torch.Tensor
    terms: torch.Tensor
    dones: torch.Tensor
    next_share_obs: torch.Tensor
    next_obs: torch.Tensor


class ReplayBuffer:
    """HARL's OffPolicyBufferEP and OffPolicyBufferFP in one ring of `capacity` rows, one row
    per step of one copy, written a lock-step (N rows) at a time; the capacity is a multiple
    of N, so a lock-step never splits across the wrap-around and copy n's next step is always
    N rows on. Fields, with K = 1 state row for EP and K = A (one per agent) for FP:

        share_obs, next_share_obs [C, K, S_c]    rewards, dones, terms [C, K]
        obs, next_obs [C, A, D]                  actions [C, A, d]    valid [C, A]

    next_* hold the true final observation and state where a row ended its episode; dones
    (terminated or truncated) end the n-step window, terms alone cut the bootstrap; valid
    (0 where the agent did not act) keeps such rows out of agent i's actor loss, and under FP
    out of its critic loss. HARL's buffers store the same valid_transitions but only HASAC
    uses them; its HATD3 and HADDPG average both losses over every row. Rows are sampled uniformly with replacement (HARL draws without: one
    randperm of the whole buffer per batch); FP's next joint action uses every agent's
    observation at the end of that state row's own window (HARL tiles the actions of each
    agent's own window end; the two differ only where agents end at different steps).
    """

    def __init__(self, capacity, num_envs, num_rows, state_dim, num_agents, obs_dim,
                 action_dim, n_step, gamma, device):
        def zeros(*shape, dtype=torch.float32):
            return torch.zeros((self.capacity, *shape), dtype=dtype, device=device)

        self.capacity = capacity // num_envs * num_envs
        self.num_envs, self.n_step, self.gamma = num_envs, n_step, gamma
        self.share_obs, self.next_share_obs = zeros(num_rows, state_dim), zeros(num_rows, state_dim)
        self.rewards = zeros(num_rows)
        self.dones, self.terms = zeros(num_rows, dtype=torch.bool), zeros(num_rows, dtype=torch.bool)
        self.obs, self.next_obs = zeros(num_agents, obs_dim), zeros(num_agents, obs_dim)
        self.actions, self.valid = zeros(num_agents, action_dim), zeros(num_agents)
        self.pos, self.size = 0, 0

    def add(self, share_obs, obs, actions, rewards, dones, valid, terms, next_share_obs,
            next_obs):
        """One lock-step: N rows of each field (tensors, in HARL's order); the oldest are
        overwritten when the ring is full."""
        rows = slice(self.pos, self.pos + self.num_envs)
        for name, x in (("share_obs", share_obs), ("obs", obs), ("actions", actions),
                        ("rewards", rewards), ("dones", dones), ("valid", valid),
                        ("terms", terms), ("next_share_obs", next_share_obs),
                        ("next_obs", next_obs)):
            getattr(self, name)[rows] = x
        self.pos = (self.pos + self.num_envs) % self.capacity
        self.size = min(self.size + self.num_envs, self.capacity)

    def end_flags(self):
        """dones [C, K], with the newest row of every copy marked as well: its next step is
        not stored yet, so a window stops there and bootstraps from its next_share_obs."""
        ends = self.dones.clone()
        newest = self.pos - 1 - torch.arange(self.num_envs, device=ends.device)
        ends[newest % self.capacity] = True
        return ends

    def sample(self, batch_size):
        """batch_size rows drawn uniformly from the stored ones, as a Batch (gather)."""
        return self.gather(torch.randint(self.size, (batch_size,), device=self.rewards.device))

    def gather(self, index):
        """The rows `index` [B] as a Batch. From each, one window per state row k (K = 1 for EP,
        A for FP) of n_step rows, by next_index over end_flags() in column k; its rewards and
        discounts by nstep_return(..., self.gamma). share_obs, obs, actions, valid: the start
        row's; the stored terms and dones (not end_flags), next_share_obs (each in column k) and
        next_obs: the window's last row's."""
        ends = self.end_flags()
        num_rows = ends.shape[1]
        column = torch.arange(num_rows, device=index.device)
        window = [index.unsqueeze(1).expand(-1, num_rows)]  # [B, K] each
        for _ in range(self.n_step - 1):
            window.append(next_index(window[-1], ends[window[-1], column], self.num_envs,
                                     self.capacity))
        rewards, discounts = nstep_return(torch.stack([self.rewards[w, column] for w in window]),
                                          torch.stack([ends[w, column] for w in window]),
                                          self.gamma)
        last = window[-1]
        return Batch(self.share_obs[index], self.obs[index], self.actions[index],
                     self.valid[index], rewards, discounts, self.terms[last, column],
                     self.dones[last, column], self.next_share_obs[last, column],
                     self.next_obs[last])


# ---------------------------------------------------------------------------------------
# Networks
# ---------------------------------------------------------------------------------------
def mlp(in_size, hidden_size, out_size):
    """in -> hidden -> hidden -> out with ReLUs, nn.Linear's initialization."""
    return nn.Sequential(nn.Linear(in_size, hidden_size), nn.ReLU(),
                         nn.Linear(hidden_size, hidden_size), nn.ReLU(),
                         nn.Linear(hidden_size, out_size))


class Critic(nn.Module):
    """Q(s, a^1, ..., a^n) = MLP([s, a^1 | ... | a^n]): state rows [B, K, S_c] and the joint
    (padded) actions [B, A, d] or, one joint action per state row, [B, K, A, d] -> [B, K]."""

    def __init__(self, state_dim, joint_action_dim, hidden_size):
        super().__init__()
        self.net = mlp(state_dim + joint_action_dim, hidden_size, 1)

    def forward(self, share_obs, actions):
        if actions.dim() == 3:
            actions = actions.unsqueeze(1).expand(-1, share_obs.shape[1], -1, -1)
        return self.net(torch.cat([share_obs, actions.flatten(-2)], dim=-1)).squeeze(-1)


class Networks(nn.Module):
    """One actor per agent, mu_i(o^i) = tanh(MLP(o^i)) on its own unpadded observation with
    its own action size, the critic qf1 (and qf2 for clipped double Q), and a target copy of
    each (actors_target, qf1_target, qf2_target) that follows it slowly."""

    def __init__(self, obs_dims, action_dims, state_dim, hidden_size, twin_q):
        super().__init__()
        self.obs_dims, self.action_dims = list(obs_dims), list(action_dims)
        self.state_dim = state_dim
        joint = len(action_dims) * max(action_dims)
        self.actors = nn.ModuleList(mlp(o, hidden_size, a) for o, a in zip(obs_dims, action_dims))
        self.qf1 = Critic(state_dim, joint, hidden_size)
        self.qf2 = Critic(state_dim, joint, hidden_size) if twin_q else None
        self.actors_target = copy.deepcopy(self.actors).requires_grad_(False)
        self.qf1_target = copy.deepcopy(self.qf1).requires_grad_(False)
        self.qf2_target = copy.deepcopy(self.qf2).requires_grad_(False) if twin_q else None

    def actor(self, i, obs, target=False):
        """Agent i's action in [-1, 1]^{d_i}, padded with zeros to d: obs [..., A, D] ->
        [..., d]; the target actor's with target."""
        actor = (self.actors_target if target else self.actors)[i]
        action = torch.tanh(actor(obs[..., i, :self.obs_dims[i]]))
        return F.pad(action, (0, max(self.action_dims) - self.action_dims[i]))

    def act(self, obs, sigma=0.0, noise_clip=math.inf, target=False):
        """Every agent's action on its own observation, with noisy_action's noise (sigma,
        noise_clip) on its own dimensions only: obs [..., A, D] -> actions [..., A, d]."""
        return torch.stack([
            F.pad(noisy_action(self.actor(i, obs, target)[..., :d], sigma, noise_clip),
                  (0, max(self.action_dims) - d)) for i, d in enumerate(self.action_dims)], dim=-2)

    def critics(self):
        """The learned critics and their targets, as (target, critic) pairs."""
        pairs = [(self.qf1_target, self.qf1), (self.qf2_target, self.qf2)]
        return [(target, critic) for target, critic in pairs if critic is not None]


# ---------------------------------------------------------------------------------------
# What the agents send: actions in [-1, 1]^d scaled to each agent's bounds
# ---------------------------------------------------------------------------------------
def to_env_action(actions, low, high):
    """Actions in [-1, 1]^d (a tensor [N, A, d]) to each agent's bounds low, high [A, d] (a
    NumPy array):  low + (a + 1) / 2 * (high - low). Only the environment sees the scaled
    action: the buffer stores a, the critics take it so, the noise scales are fractions of
    the half-range."""
    return low + (actions.cpu().numpy() + 1.0) * 0.5 * (high - low)


# ---------------------------------------------------------------------------------------
# Training
# ---------------------------------------------------------------------------------------
def actor_loss(nets, batch, i, fp):
    """Agent i's deterministic policy gradient loss (MADDPG's): agent i's action is
    mu_i(o^i), every other agent's action is the one stored in the batch, and the critic Q_1
    is read on agent i's state row (FP) or the one state row (EP), over the rows where agent
    i acted:

        L_i = -masked_mean( Q_1(s, a^1, ..., mu_i(o^i), ..., a^n), valid^i )

    The gradient reaches only mu_i. HARL's HATD3 updates the agents one after another in a
    random order instead, each on the already updated actions of those before it; MADDPG's
    simultaneous update is what both papers here use, and it lets every agent's loss be
    summed into one step.
    """
    joint = batch.actions.clone()
    joint[:, i] = nets.actor(i, batch.obs)
    q = nets.qf1(batch.share_obs, joint)[:, i if fp else 0]
    return -masked_mean(q, batch.valid[:, i])


def update(batch, nets, critic_optimizer, actor_optimizer, args, gradient_step):
    """Gradient step number `gradient_step` (from 1) on a batch: the critics' step, and on
    every policy_delay-th one every actor's step and the soft updates of every target
    network. Returns the losses as numbers for the log."""
    fp = args.critic_state == "fp"
    with torch.no_grad():  # the target: every agent's target actor, smoothed, target critics
        next_actions = nets.act(batch.next_obs, args.target_policy_noise, args.noise_clip,
                                target=True)
        next_q1 = nets.qf1_target(batch.next_share_obs, next_actions)
        next_q2 = nets.qf2_target(batch.next_share_obs, next_actions) if args.twin_q else None
        y = critic_target(rewards=batch.rewards, discounts=batch.discounts,
                          terminated=batch.terms, next_q1=next_q1, next_q2=next_q2,
                          twin_q=args.twin_q)
    # EP's one row counts wherever it was stored; FP's row i only where agent i acted
    mask = batch.valid if fp else torch.ones_like(y)
    q1 = nets.qf1(batch.share_obs, batch.actions)
    critic_loss = masked_mean((q1 - y) ** 2, mask)
    if args.twin_q:
        critic_loss = critic_loss + masked_mean((nets.qf2(batch.share_obs, batch.actions) - y) ** 2,
                                                mask)
    critic_optimizer.zero_grad()
    critic_loss.backward()
    critic_optimizer.step()
    stats = {"critic_loss": critic_loss.item(), "q_mean": masked_mean(q1, mask).item()}

    if gradient_step % args.policy_delay == 0:
        # every agent's loss on the same batch, summed: each reaches only its own actor. The
        # gradient left on qf1 is cleared by the critic optimizer's next zero_grad().
        loss = sum(actor_loss(nets, batch, i, fp) for i in range(len(nets.actors)))
        actor_optimizer.zero_grad()
        loss.backward()
        actor_optimizer.step()
        stats["actor_loss"] = loss.item() / len(nets.actors)
        soft_update(nets.actors_target, nets.actors, args.tau)
        for target, critic in nets.critics():
            soft_update(target, critic, args.tau)
    return stats


def train(args, envs, nets, run, spec, device):
    """Step the N copies with the actors' noisy actions (uniformly random ones for the first
    --learning-starts steps), store every lock-step, and from --learning-starts on take
    --gradient-steps updates after each; until the budget, --stop-at-return or a non-finite
    critic loss.
    run (Run, below the banner) writes the run folder: step(n) prints progress and
    evaluates, episode/update add a CSV row, reached/non_finite say when to stop."""
    fp = args.critic_state == "fp"
    num_agents, action_dim = len(spec["agents"]), max(spec["action_dims"])
    num_iterations = args.total_timesteps // args.num_envs
    buffer = ReplayBuffer(min(args.buffer_size, num_iterations * args.num_envs), args.num_envs,
                          num_agents if fp else 1, nets.state_dim, num_agents,
                          envs.obs.shape[-1], action_dim, args.n_step, args.gamma, device)
    # Adam with its default eps (1e-8), as in TD3's and HARL's code: one optimizer for every
    # actor (each loss reaches its own actor only), one for both critics
    actor_optimizer = torch.optim.Adam(nets.actors.parameters(), lr=args.learning_rate)
    critic_optimizer = torch.optim.Adam([p for _, critic in nets.critics()
                                         for p in critic.parameters()], lr=args.learning_rate)
    action_mask = torch.tensor([[j < d for j in range(action_dim)] for d in spec["action_dims"]],
                               dtype=torch.float32)
    stats = {"critic_loss": [], "q_mean": [], "actor_loss": []}
    global_step, gradient_steps, last_log = 0, 0, 0

    def tensor(x):
        return torch.from_numpy(x).to(device)

    obs, state, active = envs.reset(args.seed)
    for iteration in range(num_iterations):
        # Collect: one lock-step, random actions at first, then the actors' with noise; a
        # done agent sends nothing (LockstepEnvs) and its row is not valid
        if global_step < args.learning_starts:
            actions = (torch.rand((args.num_envs, num_agents, action_dim)) * 2 - 1) * action_mask
        else:
            with torch.no_grad():
                actions = nets.act(tensor(obs), args.exploration_noise).cpu()
        out = envs.step(to_env_action(actions, spec["low"], spec["high"]))
        global_step += args.num_envs
        run.step(global_step)  # progress line; evaluation every --eval-every steps
        # Store: where an agent ended, its next observation is the true final one, and where
        # the copy's episode ended, so is the next state (the copy has already reset)
        ended = out.terminated | out.truncated
        next_obs = np.where(ended[..., None], out.final_obs, out.obs)
        next_state = np.where(out.ended[:, None], out.final_state, out.state)
        rewards, dones, terms = critic_rows(tensor(out.rewards), tensor(out.terminated),
                                            tensor(out.truncated), tensor(active),
                                            tensor(out.ended), args.critic_state)
        buffer.add(share_obs=state_rows(tensor(state), tensor(obs), args.critic_state),
                   obs=tensor(obs), actions=actions.to(device), rewards=rewards, dones=dones,
                   valid=tensor(active).float(), terms=terms,
                   next_share_obs=state_rows(tensor(next_state), tensor(next_obs),
                                             args.critic_state),
                   next_obs=tensor(next_obs))
        obs, state, active = out.obs, out.state, out.active
        for _, episode_return, length in out.episodes:
            run.episode(global_step, episode_return, length)
        if run.reached(args.stop_at_return, global_step):  # the summary records when
            return

        # Learn: once --learning-starts is reached, --gradient-steps updates per lock-step
        for _ in range(args.gradient_steps if global_step >= args.learning_starts else 0):
            gradient_steps += 1
            losses = update(buffer.sample(args.batch_size), nets, critic_optimizer,
                            actor_optimizer, args, gradient_steps)
            for key, value in losses.items():
                stats[key].append(value)

        # Log: a row of updates.csv every --log-interval steps and after the last step, with
        # the means since the last row (NaN for the actors' loss where none came)
        last = iteration == num_iterations - 1
        if gradient_steps and (global_step - last_log >= args.log_interval or last):
            means = {key: float(np.mean(v)) if v else math.nan for key, v in stats.items()}
            last_log, stats = global_step, {key: [] for key in stats}
            run.update(global_step, **means, gradient_steps=gradient_steps)
            if run.non_finite(means["critic_loss"], global_step):  # says so; stops as interrupted
                return


def main(args: Args) -> dict:
    """Train MADDPG/MATD3 (or evaluate an --eval-checkpoint), write the run folder, return
    the summary. Ctrl-C stops training; the run folder is written, then KeyboardInterrupt
    goes on up."""
    # prepare (below the banner): --eval-checkpoint's model read, the environment made and
    # checked, every flag checked (a mistake: one line, exit status 2), the seeds set, the
    # device chosen.
    args, spec, checkpoint, device = prepare(resolve_algo(args), make=LockstepEnvs)

    # Set up: the actors and critics with their targets, the run folder.
    args = replace(args, exp_name=experiment_name(args))  # maddpg with --algo maddpg, unless given
    num_agents, obs_dim = len(spec["agents"]), max(spec["obs_dims"])
    state_dim = spec["state_dim"] + (obs_dim + num_agents if args.critic_state == "fp" else 0)
    nets = Networks(spec["obs_dims"], spec["action_dims"], state_dim, args.hidden_size,
                    args.twin_q).to(device)
    models = {"nets": nets}  # what model.pt holds
    run = Run(args, device, models, checkpoint, rollout_steps=args.num_envs,
              note=f", {num_agents} agents, {algorithm_name(args)}, "
                   f"{args.critic_state.upper()} critic")
    run.summary["algorithm"] = algorithm_name(args)  # what ran, whatever --exp-name says

    # Train (unless evaluating a checkpoint), then finish: evaluate, save, write, plot.
    envs = None if checkpoint else LockstepEnvs(args.env_id, args.num_envs, args.max_cycles)
    return run.train(lambda: train(args, envs, nets, run, spec, device), envs)


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
# Plumbing for PettingZoo: the lock-step vector of parallel environments, their ids
# ---------------------------------------------------------------------------------------
# Stamped from plainrl's plumbing/lockstep.py by its stamp.py: edit it there, not here.
# The MPE tasks in which every agent works for one team, and those with adversaries.
COOPERATIVE = ("simple_spread_v3", "simple_speaker_listener_v4", "simple_reference_v3",
               "simple_v3", "simple_line_v1", "simple_formation_v1", "collect_treasure_v1")
COMPETITIVE = ("simple_adversary_v3", "simple_crypto_v3", "simple_push_v3", "simple_tag_v3",
               "simple_world_comm_v3")


def make_env(env_id, max_cycles=25, render_mode=None):
    """One PettingZoo parallel environment. An MPE task is PettingZoo's own AEC-to-parallel
    conversion of the raw environment (with continuous actions where CONTINUOUS_ACTIONS),
    without the wrappers that check every action's bounds and the call order (the script's
    actions are always valid; the checks cost a third of the step time). module:function
    imports the module and calls the user's function (with render_mode if set). An id the
    script cannot run raises an error whose line says what to pass instead."""
    module, _, name = env_id.rpartition(":")
    tasks = f"{SCRIPT} runs the cooperative MPE tasks ({', '.join(sorted(COOPERATIVE))})"
    single_agent = (f"{name} is a single-agent Gymnasium environment; use "
                    f"{'ddpg_td3.py' if CONTINUOUS_ACTIONS else 'ppo.py'} ({tasks})")
    if name in gym.registry:
        raise ValueError(single_agent)
    if not module:
        if env_id in COMPETITIVE:
            raise ValueError(f"{env_id} is a competitive MPE task (adversaries against good "
                             f"agents); {tasks}")
        if env_id not in COOPERATIVE:
            close = [i for i in difflib.get_close_matches(env_id, COOPERATIVE, n=3, cutoff=0.6)
                     if makeable(i)]
            raise gym.error.NameNotFound(f"unknown environment id {env_id!r}" + (
                f"; did you mean {', '.join(close)}?" if close else "")
                + f"; {tasks}, or module:function for your own")
        mpe = importlib.import_module(f"mpe2.{env_id}")  # only this task's: some import SciPy
        return aec_to_parallel_wrapper(mpe.raw_env(
            max_cycles=max_cycles, continuous_actions=CONTINUOUS_ACTIONS, render_mode=render_mode))
    try:
        imported = importlib.import_module(module)
    except ModuleNotFoundError as e:
        if e.name != module:  # a module that the user's imports
            raise
        raise ModuleNotFoundError(f"no module named {module}; put its folder on PYTHONPATH "
                                  "(PYTHONPATH=. when it is in this folder)") from None
    if not hasattr(imported, name):
        if name in gym.registry:  # registered by the module's import
            raise ValueError(single_agent)
        close = [f"{module}:{n}" for n in difflib.get_close_matches(name, dir(imported), n=3)
                 if callable(getattr(imported, n))]
        raise gym.error.NameNotFound(
            f"unknown environment id {env_id!r}: module {module} has no function {name}"
            + (f" (did you mean {', '.join(close)}?)" if close else "")
            + "; pass module:function, a function that returns a PettingZoo parallel env")
    function = getattr(imported, name)
    env = function(render_mode=render_mode) if render_mode else function()
    if not (hasattr(env, "possible_agents") and callable(getattr(env, "step", None))
            and not hasattr(env, "agent_iter")):
        raise TypeError(f"{env_id} gives a {type(env).__name__}, not a PettingZoo parallel "
                        "environment; pass a function that returns one (like parallel_env)")
    return env


def makeable(env_id):
    """Whether make_env(env_id) works here (its dependencies installed), for suggestions."""
    try:
        with warnings.catch_warnings():  # an old version's deprecation is no news here
            warnings.simplefilter("ignore")
            make_env(env_id).close()
        return True
    except Exception:
        return False


class StepResult(NamedTuple):
    """One lock-step of LockstepEnvs: what the agents see next, and what this step gave."""
    obs: np.ndarray  # [N, A, D] next observations (zeros for done agents)
    state: np.ndarray  # [N, S] next states
    avail: np.ndarray  # [N, A, K] next available actions (K = 0: Box actions)
    active: np.ndarray  # [N, A] who acts next
    rewards: np.ndarray  # [N, A] of this step (0 for agents that did not act)
    terminated: np.ndarray  # [N, A]
    truncated: np.ndarray  # [N, A] (time limit, not terminated)
    final_obs: np.ndarray  # [N, A, D] the true last observations where agents ended
    final_state: np.ndarray  # [N, S] the true last state where agents ended
    ended: np.ndarray  # [N] True where a copy's episode ended (its last agents are done)
    episodes: list  # (copy, mean per-agent return, length) of the episodes that ended


class LockstepEnvs:
    """N copies of one PettingZoo parallel environment, stepped together and seen as
    arrays over [N, A] (agents in possible_agents order). An agent that is done leaves the
    environment's agents; its later steps are inactive (zero observation, no action sent,
    reward 0) until every agent is done, when the copy records its episode and resets
    (observations after the reset are the next episode's first). Episode returns are the
    mean over agents of each agent's summed reward (PettingZoo has no
    RecordEpisodeStatistics). Without env.state(), the state is the agents' observations
    joined. The spaces are copy 0's, as check_env hands them to check_spaces:
    observation_space {"agents": each agent's, "state": the state's Box}, action_space each
    agent's. A Discrete agent's available actions are its first n (padded to the largest
    n), less those its info["action_mask"] forbids; Box actions have none (K = 0)."""

    def __init__(self, env_id, num_envs=1, max_cycles=25, render_mode=None):
        self.envs = [make_env(env_id, max_cycles, render_mode) for _ in range(num_envs)]
        env = self.envs[0]
        self.agents = list(env.possible_agents)
        spaces = {agent: env.observation_space(agent) for agent in self.agents}
        self.action_space = {agent: env.action_space(agent) for agent in self.agents}
        probe = make_env(env_id, max_cycles)  # reset for the state's size, so that the copies
        probe.reset(seed=0)                   # are reset by reset() alone
        try:
            state_dim, self.has_state = int(np.size(probe.state())), True
        except (NotImplementedError, AttributeError):
            state_dim, self.has_state = sum(int(np.prod(s.shape)) for s in spaces.values()), False
        probe.close()
        self.observation_space = {"agents": spaces,
                                  "state": gym.spaces.Box(-np.inf, np.inf, (state_dim,))}
        # the sizes, read before check_spaces has checked the spaces: each agent's
        # observation's, and its action count (Discrete) or size (Box)
        self.obs_dims = [int(np.prod(s.shape)) for s in spaces.values()]
        self.action_dims = [int(getattr(s, "n", 0)) or int(np.prod(s.shape))
                            for s in self.action_space.values()]
        num_actions = 0 if CONTINUOUS_ACTIONS else max(self.action_dims)
        self.base_avail = np.zeros((len(self.agents), num_actions), dtype=bool)
        for i, n in enumerate(self.action_dims):
            self.base_avail[i, :n] = True
        self.shape = (num_envs, len(self.agents))
        self.obs = np.zeros((*self.shape, max(self.obs_dims)), dtype=np.float32)
        self.state = np.zeros((num_envs, state_dim), dtype=np.float32)
        self.avail = np.zeros((*self.shape, num_actions), dtype=bool)
        self.alive = np.zeros(self.shape, dtype=bool)
        self.returns = np.zeros(self.shape)
        self.lengths = np.zeros(num_envs, dtype=np.int64)

    def _state(self, n, obs):
        """Copy n's state: env.state(), or its agents' observations obs [A, D] joined."""
        if self.has_state:
            return self.envs[n].state()
        return np.concatenate([obs[i, :d] for i, d in enumerate(self.obs_dims)])

    def _observe(self, n, observations, infos):
        """Write copy n's observations, state and available actions for its next step."""
        env = self.envs[n]
        self.obs[n] = 0.0
        self.avail[n] = self.base_avail
        for i, agent in enumerate(self.agents):
            if agent in env.agents:
                self.obs[n, i, :self.obs_dims[i]] = observations[agent]
                mask = infos.get(agent, {}).get("action_mask")
                if mask is not None and not CONTINUOUS_ACTIONS:
                    self.avail[n, i, :len(mask)] = np.asarray(mask, dtype=bool)
        self.alive[n] = [agent in env.agents for agent in self.agents]
        self.state[n] = self._state(n, self.obs[n])

    def reset(self, seed):
        """Reset every copy, each with its own seed drawn from `seed` (with seed + n, run 2's
        copy 0 would replay run 1's copy 1: MPE draws its random start states only at
        resets, so runs of nearby seeds would share their episodes' start states). Returns
        obs, state, avail (Discrete actions only) and active."""
        seeds = np.random.SeedSequence(seed).generate_state(len(self.envs))
        for n, env in enumerate(self.envs):
            self._observe(n, *env.reset(seed=int(seeds[n])))
        self.returns[:] = 0.0
        self.lengths[:] = 0
        seen = ((self.obs, self.state, self.alive) if CONTINUOUS_ACTIONS
                else (self.obs, self.state, self.avail, self.alive))
        return tuple(x.copy() for x in seen)

    def step(self, actions):
        """actions [N, A] (Discrete) or [N, A, d] (Box: each agent's first d_i, in its
        bounds) -> StepResult."""
        rewards = np.zeros(self.shape, dtype=np.float32)
        terminated, truncated = np.zeros(self.shape, dtype=bool), np.zeros(self.shape, dtype=bool)
        final_obs, final_state = np.zeros_like(self.obs), np.zeros_like(self.state)
        ended, episodes = np.zeros(len(self.envs), dtype=bool), []
        for n, env in enumerate(self.envs):
            acting = [(i, agent) for i, agent in enumerate(self.agents) if self.alive[n, i]]
            observations, rew, term, trunc, infos = env.step({
                agent: actions[n, i, :self.action_dims[i]] if CONTINUOUS_ACTIONS
                else int(actions[n, i]) for i, agent in acting})
            step_obs = np.zeros_like(self.obs[n])
            for i, agent in acting:
                step_obs[i, :self.obs_dims[i]] = observations[agent]
                rewards[n, i] = rew[agent]
                terminated[n, i] = term[agent]
                truncated[n, i] = trunc[agent] and not term[agent]
            final_obs[n] = step_obs * (terminated[n] | truncated[n])[:, None]
            self.returns[n] += rewards[n]
            self.lengths[n] += 1
            if terminated[n].any() or truncated[n].any():
                final_state[n] = self._state(n, step_obs)
            if env.agents:
                self._observe(n, observations, infos)
                continue
            ended[n] = True
            episodes.append((n, float(self.returns[n].mean()), int(self.lengths[n])))
            self.returns[n], self.lengths[n] = 0.0, 0
            self._observe(n, *env.reset())
        return StepResult(self.obs.copy(), self.state.copy(), self.avail.copy(),
                          self.alive.copy(), rewards, terminated, truncated, final_obs,
                          final_state, ended, episodes)

    def render(self, n=0):
        return self.envs[n].render()

    def close(self):
        for env in self.envs:
            env.close()


def make_vector_env(env_id, num_envs, video_folder=None, max_cycles=25):
    """The evaluation's environments: num_envs copies of env_id in lock-step with Gymnasium's
    vector API (EvaluationEnvs) at the run's --max-cycles (ENV_FLAGS), each copy's first
    episode recorded into video_folder."""
    return EvaluationEnvs(env_id, num_envs, max_cycles, video_folder)


class EvaluationEnvs(LockstepEnvs):
    """LockstepEnvs as the plumbing's evaluate plays them, with Gymnasium's vector API:
    reset(seed=) -> (obs, info) and step(actions) -> (obs, rewards, terminated, truncated,
    info). info holds the available actions ("avail") and, at a step where copies ended
    an episode, its mean per-agent return as RecordEpisodeStatistics gives one
    (info["episode"]["r"] where info["_episode"]); episode_returns are those so far. With a
    video folder, each copy's first episode is eval-<copy>-episode-0.mp4 there, written at
    close."""

    def __init__(self, env_id, num_envs, max_cycles=25, video_folder=None):
        if video_folder is not None:
            os.environ.setdefault("SDL_VIDEODRIVER", "dummy")  # frames only, no window to open
        super().__init__(env_id, num_envs, max_cycles, "rgb_array" if video_folder else None)
        self.video_folder, self.frames = video_folder, [[] for _ in self.envs]

    @property
    def episode_returns(self):
        return self.returns.mean(-1)

    def reset(self, seed=None, options=None):
        super().reset(seed)
        self.first = np.ones(len(self.envs), dtype=bool)  # in its first episode
        self.frames = [[self.render(n)] if self.video_folder else [] for n in range(len(self.envs))]
        return self.obs.copy(), {"avail": self.avail.copy()}

    def step(self, actions):
        out = super().step(actions)
        if self.video_folder:  # a copy that ended has reset: its frame is the next episode's
            for n in np.flatnonzero(self.first):
                self.frames[n].append(self.render(n))
        returns = np.zeros(len(self.envs))
        for n, episode_return, _ in out.episodes:
            returns[n] = episode_return
        self.first &= ~out.ended
        info = {"avail": out.avail, "episode": {"r": returns}, "_episode": out.ended}
        return out.obs, out.rewards, out.terminated, out.truncated, info

    def close(self):
        super().close()
        if self.video_folder:
            from gymnasium.utils.save_video import save_video  # imports moviepy, only when needed
        for n, frames in enumerate(self.frames if self.video_folder else []):
            save_video(frames[:-1], self.video_folder, fps=10, name_prefix=f"eval-{n}",
                       episode_index=0, episode_trigger=lambda episode: True)
# End of plumbing/lockstep.py


# ---------------------------------------------------------------------------------------
# What the plumbing asks of matd3.py: its own checks, its greedy policy, its model's flags
# ---------------------------------------------------------------------------------------
CONTINUOUS_ACTIONS = True  # the lock-step plumbing's MPE tasks: Box actions


def algorithm_name(args):
    """'matd3' with all three improvements, 'maddpg' with none, else 'maddpg+' the ones on."""
    on = [name for name, used in (("twin_q", args.twin_q),
                                  ("target_policy_noise", args.target_policy_noise > 0),
                                  ("policy_delay", args.policy_delay > 1)) if used]
    return {3: "matd3", 0: "maddpg"}.get(len(on), "maddpg+" + "+".join(on))


def experiment_name(args):
    """--exp-name as given, else algorithm_name (matd3 by default, maddpg with --algo maddpg),
    so that the run folder's name and plot.py's legend say which algorithm ran."""
    return args.exp_name or algorithm_name(args)


def check_flags(args):
    """matd3.py's own flags, checked by prepare before training; args has its --algo
    preset resolved."""
    check_range(args, positive=["num_envs", "gradient_steps", "buffer_size", "batch_size",
                                "hidden_size", "policy_delay", "log_interval", "learning_rate",
                                "max_cycles", "n_step"],
                fraction=["gamma"])
    for name in ("learning_starts", "exploration_noise", "target_policy_noise", "noise_clip"):
        if not getattr(args, name) >= 0:
            fail(f"--{name.replace('_', '-')} must be 0 or more, got {getattr(args, name)}")
    if not 0.0 < args.tau <= 1.0:
        fail(f"--tau must be in (0, 1], got {args.tau}")
    if args.target_policy_noise > 0 and args.noise_clip == 0:
        fail("--noise-clip 0 cancels --target-policy-noise; use --target-policy-noise 0 to "
             "switch smoothing off")
    budget = args.total_timesteps // args.num_envs * args.num_envs  # whole lock-steps
    if args.eval_checkpoint is None and 0 < args.total_timesteps and budget <= args.learning_starts:
        fail(f"--learning-starts {args.learning_starts} leaves no step of the budget, {budget:,} "
             f"steps (--total-timesteps {args.total_timesteps} in whole lock-steps of "
             f"--num-envs {args.num_envs}), to learn in; lower it or raise the budget")
    if args.buffer_size < args.num_envs:
        fail(f"--buffer-size {args.buffer_size} holds less than one lock-step of --num-envs "
             f"{args.num_envs}; raise it")


def check_spaces(args, obs_space, action_space):
    """Whether matd3.py handles every agent's spaces (LockstepEnvs': observations
    {"agents": each agent's, "state": the state's}, each agent's actions); returns the spec
    dict: agents, obs_dims, action_dims, low and high (action_bounds), state_dim."""
    for agent, space in action_space.items():
        if isinstance(space, gym.spaces.Discrete):
            fail(f"{args.env_id}'s agent {agent} has a Discrete action space; matd3.py's "
                 "actors are deterministic and need Box actions: use mappo.py for discrete "
                 "actions")
        if not (isinstance(space, gym.spaces.Box) and len(space.shape) == 1
                and np.isfinite(space.low).all() and np.isfinite(space.high).all()):
            fail(f"{args.env_id}'s agent {agent} has actions {space}; matd3.py needs bounded flat "
                 "Box actions")
    for agent, space in obs_space["agents"].items():
        if not isinstance(space, gym.spaces.Box) or len(space.shape) != 1:
            fail(f"{args.env_id}'s agent {agent} has observations {space}; matd3.py's MLPs "
                 "need flat Box vectors")
    low, high = action_bounds(action_space)
    return {"agents": list(action_space),
            "obs_dims": [s.shape[0] for s in obs_space["agents"].values()],
            "action_dims": [s.shape[0] for s in action_space.values()], "low": low, "high": high,
            "state_dim": obs_space["state"].shape[0]}


def action_bounds(action_space):
    """Each agent's action bounds low, high [A, d] (float32), padded to the largest d with 0
    and 1, which no agent uses."""
    dims = [space.shape[0] for space in action_space.values()]
    low = np.zeros((len(dims), max(dims)), dtype=np.float32)
    high = np.ones((len(dims), max(dims)), dtype=np.float32)
    for i, space in enumerate(action_space.values()):
        low[i, :dims[i]], high[i, :dims[i]] = space.low, space.high
    return low, high


def greedy_policy(models, envs):
    """The evaluation's policy, act(obs, info) -> actions: every agent's mu_i(o^i), without
    noise, scaled to its bounds; a done agent's is not sent (LockstepEnvs)."""
    nets = models["nets"]
    device = next(nets.parameters()).device
    low, high = action_bounds(envs.action_space)

    @torch.no_grad()
    def act(obs, info):
        return to_env_action(nets.act(torch.from_numpy(obs).to(device)), low, high)
    return act


# What a run is judged on, by environment id (its benchmark task in benchmark.py, its README
# row): (threshold, window of training episodes, "train": the last-window mean at the end,
# or "eval": the final greedy evaluation). Another id: its reward_threshold over 20, "train".
GOALS = {"simple_spread_v3": (-16, 100, "train", 200_000),
         "simple_speaker_listener_v4": (-12, 100, "train", 100_000)}
# the networks, the algorithm and the time limit, which --eval-checkpoint takes over
ENV_FLAGS = ("max_cycles",)  # the evaluation's environments get the run's --max-cycles
MODEL_FLAGS = ("hidden_size", "algo", "twin_q", "target_policy_noise", "policy_delay",
               "critic_state", "max_cycles")


if __name__ == "__main__":
    cli()

# From plainrl (MIT licence, (c) 2026 the plainrl authors): keep this line in a copy.
"""Multi-Agent PPO (MAPPO) with decentralized actors and a centralized critic, in one file.

Each agent acts on its own observation (one shared actor that also sees a one-hot agent id,
or one actor per agent); one critic, used only during training, sees more (--critic-state,
Yu et al. 2022, section 4; the buffers follow HARL, Zhong et al. 2024) and learns from the
team reward, the mean over the agents that acted (AS with --per-agent-reward: r_t^i). The
update is PPO's: a rollout of T steps from N copies of a PettingZoo parallel environment,
GAE advantages from the critic, then epochs of clipped-surrogate steps.

Key equations (t indexes steps, i agents, done_t = terminated_t or truncated_t):

    critic    EP: V(s_t), s_t = env.state(), one value per copy; AS (agent-specific):
              V(s_t | o_t^i | one-hot(i)), one value per agent, cut at the agent's own end
    ratio_t^i = pi_theta(a_t^i | o_t^i) / pi_old(a_t^i | o_t^i)
    L_clip    = sum_{t,i} m_t^i min(ratio_t^i A_t^i, clip(ratio_t^i, 1-eps, 1+eps) A_t^i)
                / sum_{t,i} m_t^i            (m: active mask, 0 once agent i is done)
    GAE       delta_t = r_t + gamma (1 - terminated_t) V(s_{t+1}) - V(s_t)
              A_t     = delta_t + gamma lambda (1 - done_t) A_{t+1}
    values    the critic learns (R - mu) / sigma, mu and sigma the running mean and std of
              the returns R (--value-norm); V = sigma * output + mu before GAE

Papers:
    Yu et al. 2022, "The Surprising Effectiveness of PPO in Cooperative Multi-Agent Games",
        NeurIPS 2022 Datasets and Benchmarks, arXiv:2103.01955
    Zhong et al. 2024, "Heterogeneous-Agent Reinforcement Learning", JMLR 25 (HARL)
    Schulman et al. 2017, "Proximal Policy Optimization Algorithms", arXiv:1707.06347
    Schulman et al. 2016, "High-Dimensional Continuous Control Using Generalized
        Advantage Estimation", ICLR 2016
    Pardo et al. 2018, "Time Limits in Reinforcement Learning", ICML 2018
    Lowe et al. 2017, "Multi-Agent Actor-Critic for Mixed Cooperative-Competitive
        Environments", NeurIPS 2017 (the MPE tasks)

Run:
    python mappo.py --env-id simple_spread_v3                      # EP critic, the defaults
    python mappo.py --env-id simple_spread_v3 --critic-state as
    python mappo.py --env-id simple_speaker_listener_v4 --no-share-actor

Writes runs/<env_id>__mappo__<seed>__<unix_time>/ (plainrl's CONTRIBUTING.md, "What a run writes");
an episode's return there is the mean over the agents of each one's summed reward.
"""

# ---------------------------------------------------------------------------------------
# Imports
# ---------------------------------------------------------------------------------------
import math
import os
from dataclasses import dataclass
from typing import Literal, NamedTuple, Optional

os.environ.setdefault("PYGAME_HIDE_SUPPORT_PROMPT", "1")  # mpe2 imports pygame, which greets

import torch
import torch.nn as nn
import tyro
from pettingzoo.utils.conversions import aec_to_parallel_wrapper
from torch.distributions import Categorical

SCRIPT = os.path.basename(__file__)


# ---------------------------------------------------------------------------------------
# Flags
# ---------------------------------------------------------------------------------------
@dataclass
class Args:
    env_id: str = "simple_spread_v3"
    """a cooperative MPE task (mpe2), or module:function returning a PettingZoo parallel env"""
    seed: int = 1
    """seeds Python, NumPy, torch and the environments"""
    total_timesteps: int = 1_000_000
    """the training budget in environment steps (one step of one copy, all agents at once)"""
    cuda: tyro.conf.DisallowNone[Optional[bool]] = None
    """--cuda: the GPU; --no-cuda: the CPU; neither: the GPU for an image, the CPU for a vector"""
    exp_name: str = os.path.splitext(SCRIPT)[0]
    """the experiment name, part of the run folder's name"""
    eval_episodes: int = 10
    """greedy evaluation episodes after training (0 skips evaluation)"""
    eval_every: int = 0
    """also evaluate greedily every N steps (as --total-timesteps counts; 0: only after training)"""
    stop_at_return: Optional[float] = None
    """stop once the training mean over its goal's window (GOALS; else 20 episodes) reaches this"""

    # No presets: built for PettingZoo's cooperative tasks (MPE); its settings below.
    # Environment and algorithm
    max_cycles: int = 25
    """MPE's time limit: steps per episode, after which every agent is truncated"""
    critic_state: Literal["ep", "as"] = "ep"
    """critic input: ep = env.state(), team reward; as = state | own obs | agent id, per agent"""
    per_agent_reward: bool = False
    """AS only: each agent's value learns from its own reward instead of the team reward"""
    share_actor: bool = True
    """one actor for all agents (one-hot id appended, observations zero-padded), or one per agent"""
    value_norm: bool = True
    """the critic learns returns normalized by their running mean and std"""
    num_envs: int = 32
    """N: environment copies stepped in lock-step"""
    num_steps: int = 25
    """T: steps per environment copy in each rollout; the batch is N*T steps of all agents"""
    learning_rate: float = 1e-3
    """Adam learning rate of the actors and the critic (7e-4 in the MAPPO paper's MPE runs)"""
    anneal_lr: bool = False
    """decay the learning rate linearly to 0 over the budget"""
    gamma: float = 0.95
    """discount factor (0.99 in the MAPPO paper)"""
    gae_lambda: float = 0.95
    """lambda of GAE (0.95 in the MAPPO paper; 0.92-0.99 in the GAE paper's best runs)"""
    num_minibatches: int = 1
    """minibatches per epoch over (step, copy) pairs, dividing N*T (1 in the MAPPO paper)"""
    update_epochs: int = 10
    """epochs over each rollout (5-15 in the MAPPO paper: fewer on harder tasks)"""
    norm_adv: bool = True
    """normalize advantages within each minibatch, over active agent steps only"""
    clip_coef: float = 0.2
    """epsilon of the clipped surrogate and the value clipping (at most 0.2 in the MAPPO paper)"""
    clip_vloss: bool = True
    """clip the value loss around the rollout's value estimates, as MAPPO does"""
    ent_coef: float = 0.005
    """entropy bonus coefficient c_e (0.01 in the MAPPO paper)"""
    vf_coef: float = 1.0
    """value loss coefficient c_v (1 in the MAPPO paper's code)"""
    max_grad_norm: float = 10.0
    """the largest global norm of the actors' and the critic's gradients (10 in the MAPPO paper)"""
    hidden_size: int = 64
    """width of the two hidden layers (ReLU) of the actors and of the critic"""
    layer_norm: bool = False
    """LayerNorm on the networks' inputs and hidden layers, as in MAPPO's code"""


# ---------------------------------------------------------------------------------------
# The math
# ---------------------------------------------------------------------------------------
def compute_gae(rewards, values, next_values, terminated, truncated, gamma, gae_lambda):
    """Generalized advantage estimation with time limits handled (Schulman et al. 2016): the
    module docstring's delta_t and A_t, run backwards from A_T = 0; returns = A + values.

    All inputs are tensors of shape [T, ...]: [T, N] for the EP critic (one value per
    environment), [T, N, A] for the AS critic (one per agent and environment); terminated
    and truncated are 0/1 or bool. values[t] = V(s_t); next_values[t] = V(s_{t+1}), the
    value of the state that followed step t, which is the true final state when the episode
    ended at t. Returns (advantages, returns), each of the inputs' shape."""
    not_terminated = 1.0 - terminated.to(rewards.dtype)
    not_done = 1.0 - (terminated.bool() | truncated.bool()).to(rewards.dtype)
    deltas = rewards + gamma * not_terminated * next_values - values
    advantages = torch.zeros_like(rewards)
    running = torch.zeros_like(rewards[0])
    for t in reversed(range(rewards.shape[0])):
        running = deltas[t] + gamma * gae_lambda * not_done[t] * running
        advantages[t] = running
    return advantages, advantages + values


def team_reward(rewards, active):
    """The team reward: the mean over the agents that acted, rewards and active masks
    [..., A] -> [...]:  r_t = sum_i m_t^i r_t^i / max(1, sum_i m_t^i). (HARL's MPE wrapper
    gives each agent the sum; value and advantage normalization cancel the factor.)"""
    return (rewards * active).sum(-1) / active.sum(-1).clamp(min=1.0)


def critic_step(rewards, terminated, truncated, active, episode_end, critic_state,
                per_agent_reward=False):
    """What the critic learns from one lock-step: rewards, terminated, truncated and active
    masks m are [N, A], episode_end [N] (a copy's last agents finished at this step).
    Returns (rewards, terminated, truncated) in the critic's shape:

        EP, [N]:    r = team_reward(rewards, m); truncated = episode_end and any agent
                    truncated, terminated = episode_end and not truncated
        AS, [N, A]: each agent's own ends; r^i = m^i * team reward (per_agent_reward: r^i)
    """
    if critic_state == "as":
        own = rewards if per_agent_reward else team_reward(rewards, active).unsqueeze(-1) * active
        return own, terminated, truncated
    truncated = episode_end & truncated.any(-1)
    return team_reward(rewards, active), episode_end & ~truncated, truncated


def masked_mean(x, mask):
    """mean of x over the entries where mask is 1:  sum(m * x) / max(1, sum(m))."""
    return (x * mask).sum() / mask.sum().clamp(min=1.0)


def normalize_advantages(advantages, active):
    """(A - mean) / (std + 1e-8), mean and (unbiased) std over the active entries only, so
    that a done agent's steps do not shift the statistics. Inactive entries come out 0."""
    n = active.sum().clamp(min=2.0)
    mean = (advantages * active).sum() / active.sum().clamp(min=1.0)
    std = torch.sqrt(((advantages - mean) ** 2 * active).sum() / (n - 1))
    return (advantages - mean) / (std + 1e-8) * active


def mappo_loss(newlogprob, oldlogprob, advantages, active, newvalue, oldvalue, returns,
               value_mask, entropy, clip_coef, ent_coef, vf_coef, clip_vloss=True):
    """The MAPPO loss to minimize on a minibatch. Actor inputs (log-probabilities,
    advantages, active masks m, entropies) are [B, A]; critic inputs (values, returns, and
    value_mask, 1 where the critic's sample counts) are [B] for EP or [B, A] for AS.

        ratio  = exp(newlogprob - oldlogprob)
        L_pg   = masked_mean( max(-A * ratio, -A * clip(ratio, 1 - eps, 1 + eps)), m )
        L_v    = 0.5 * masked_mean( (V - R)^2, value_mask ),  or with clip_vloss
                 0.5 * masked_mean( max((V - R)^2, (V_old + clip(V - V_old, -eps, eps) - R)^2) )
        loss   = L_pg - c_e * masked_mean(entropy, m) + c_v * L_v

    Returns (loss, L_pg, L_v, masked mean entropy); the advantages are used as given. The
    references' L_v is a Huber loss (delta 10): the same 0.5 e^2 wherever the error |e| <= 10.
    """
    ratio = torch.exp(newlogprob - oldlogprob)
    clipped_ratio = torch.clamp(ratio, 1 - clip_coef, 1 + clip_coef)
    pg_loss = masked_mean(torch.max(-advantages * ratio, -advantages * clipped_ratio), active)
    v_loss = (newvalue - returns) ** 2
    if clip_vloss:
        v_clipped = oldvalue + torch.clamp(newvalue - oldvalue, -clip_coef, clip_coef)
        v_loss = torch.max(v_loss, (v_clipped - returns) ** 2)
    v_loss = 0.5 * masked_mean(v_loss, value_mask)
    entropy = masked_mean(entropy, active)
    return pg_loss - ent_coef * entropy + vf_coef * v_loss, pg_loss, v_loss, entropy


class ValueNorm:
    """Running mean and variance of the value targets, merged batch by batch (Chan et al.
    1979). With n samples so far and a batch of m with mean mu_b and variance var_b:

        delta = mu_b - mu,   n' = n + m
        mu'   = mu + delta * m / n'
        var'  = (var * n + var_b * m + delta^2 * n * m / n') / n'

        normalize(x)   = (x - mu) / sqrt(max(var, 0.01))
        denormalize(y) = y * sqrt(max(var, 0.01)) + mu

    The floor 0.01 on the variance is HARL's: after a batch of equal returns the variance is
    0, and a return 0.1 away would otherwise normalize to 1000. Before the first batch mu = 0
    and var = 1; disabled, both maps are the identity. Departure from HARL's and MAPPO's
    ValueNorm, moving averages updated at every minibatch: each target counts once, merged
    once per rollout (docs/teach/mappo.md compares the two).
    """

    def __init__(self, enabled):
        self.enabled = enabled
        self.mean, self.var, self.count = 0.0, 1.0, 0

    def update(self, x):
        """Merge the batch x (any shape, each entry a target) by the equations above, var_b the
        biased variance (/ m); mean, var and count stay Python numbers. Disabled: nothing."""
        if not self.enabled or x.numel() == 0:
            return
        x = x.double()
        m, batch_mean, batch_var = x.numel(), x.mean().item(), x.var(unbiased=False).item()
        delta, total = batch_mean - self.mean, self.count + m
        self.mean += delta * m / total
        self.var = (self.var * self.count + batch_var * m
                    + delta ** 2 * self.count * m / total) / total
        self.count = total

    def std(self):
        return math.sqrt(max(self.var, 0.01))

    def normalize(self, x):
        return (x - self.mean) / self.std() if self.enabled else x

    def denormalize(self, y):
        return y * self.std() + self.mean if self.enabled else y

    def state_dict(self):  # plain numbers, which torch.load(weights_only=True) reads
        return {"mean": self.mean, "var": self.var, "count": self.count}

    def load_state_dict(self, state):
        self.mean, self.var = float(state["mean"]), float(state["var"])
        self.count = int(state["count"])


def critic_input(state, obs, critic_state):
    """The critic's view of a step. state [N, S] is env.state() of each copy, obs [N, A, D]
    the agents' (padded) observations.

        EP: s                          -> [N, S]
        AS: s | o^i | one-hot(i)       -> [N, A, S + D + A]
    """
    if critic_state == "ep":
        return state
    num_envs, num_agents = obs.shape[:2]
    ids = torch.eye(num_agents, device=obs.device).expand(num_envs, -1, -1)
    return torch.cat([state.unsqueeze(1).expand(-1, num_agents, -1), obs, ids], dim=-1)


class RolloutBuffer:
    """One rollout of T steps from N environment copies with A agents, preallocated.

    Actor buffer, per agent: obs [T, N, A, D] (zero-padded to the longest), actions and
    log-probabilities [T, N, A], available actions [T, N, A, K] (an agent's own actions
    unless the environment masks some; never the padding) and active masks [T, N, A] (1
    where the agent acted, 0 once it is done while its environment goes on).

    Critic buffer, with C = [N] for EP and [N, A] for AS: critic inputs [T, *C, S_c],
    values V(s_t) as the critic output them, rewards and the terminated/truncated flags
    [T, *C]. final_critic[t] holds the critic input of the true final state where a step was
    truncated; last_critic the input after the rollout's last step.
    """

    def __init__(self, num_steps, num_envs, num_agents, obs_dim, num_actions, critic_state,
                 critic_dim, device):
        def zeros(*shape, dtype=torch.float32):
            return torch.zeros((num_steps, *shape), dtype=dtype, device=device)

        critic_shape = (num_envs,) if critic_state == "ep" else (num_envs, num_agents)
        self.obs = zeros(num_envs, num_agents, obs_dim)
        self.actions = zeros(num_envs, num_agents, dtype=torch.long)
        self.logprobs = zeros(num_envs, num_agents)
        self.avail = zeros(num_envs, num_agents, num_actions, dtype=torch.bool)
        self.active = zeros(num_envs, num_agents)
        self.critic_obs = zeros(*critic_shape, critic_dim)
        self.values = zeros(*critic_shape)
        self.rewards = zeros(*critic_shape)
        self.terminated = zeros(*critic_shape, dtype=torch.bool)
        self.truncated = zeros(*critic_shape, dtype=torch.bool)
        self.final_critic = zeros(*critic_shape, critic_dim)
        self.last_critic = torch.zeros((*critic_shape, critic_dim), device=device)

    def gae(self, value_fn, value_norm, gamma, gae_lambda):
        """GAE advantages and returns [T, *C] in the returns' own scale: the stored values
        and the bootstrap values, V(last_critic) after the rollout and V(final_critic[t])
        where step t was truncated, are denormalized first."""
        values = value_norm.denormalize(self.values)
        next_values = torch.empty_like(values)
        next_values[:-1] = values[1:]
        next_values[-1] = value_norm.denormalize(value_fn(self.last_critic))
        where = self.truncated.nonzero(as_tuple=True)
        if where[0].numel():
            next_values[where] = value_norm.denormalize(value_fn(self.final_critic[where]))
        return compute_gae(self.rewards, values, next_values, self.terminated, self.truncated,
                           gamma, gae_lambda)

    def batch(self, **extra):
        """The rollout as one batch of N*T (step, copy) rows: every field flattened over its
        first two dimensions, with the extra tensors ([T, N, ...]) given by name."""
        fields = dict(obs=self.obs, avail=self.avail, actions=self.actions,
                      logprobs=self.logprobs, active=self.active, critic_obs=self.critic_obs,
                      values=self.values, **extra)
        return {name: x.flatten(0, 1) for name, x in fields.items()}


# ---------------------------------------------------------------------------------------
# Networks
# ---------------------------------------------------------------------------------------
def layer_init(layer, std=math.sqrt(2), bias_const=0.0):
    """Orthogonal weights with gain std and constant bias, as in the PPO baselines."""
    nn.init.orthogonal_(layer.weight, std)
    nn.init.constant_(layer.bias, bias_const)
    return layer


def mlp(in_size, hidden_size, out_size, out_std, layer_norm=False):
    """Two ReLU hidden layers. With layer_norm, as in MAPPO's code: the input is normalized
    per sample (LayerNorm, "feature normalization") and so is each hidden layer's output."""
    norm = nn.LayerNorm if layer_norm else lambda size: nn.Identity()
    return nn.Sequential(
        norm(in_size),
        layer_init(nn.Linear(in_size, hidden_size)), nn.ReLU(), norm(hidden_size),
        layer_init(nn.Linear(hidden_size, hidden_size)), nn.ReLU(), norm(hidden_size),
        layer_init(nn.Linear(hidden_size, out_size), std=out_std),
    )


class Actors(nn.Module):
    """The decentralized policies pi(a^i | o^i). Shared: one MLP for every agent, whose
    input is the zero-padded observation with a one-hot agent id appended. Not shared: one
    MLP per agent on its own unpadded observation. Either way each agent gets K logits (K
    the largest action count); actions it does not have, or that the environment forbids,
    get a logit of -1e8, so probability 0 and a finite entropy. The one-hot id (here and in
    the AS critic) is ours: the references' MPE actors see the observation alone; with it,
    agents whose padded observations look alike can still act differently."""

    def __init__(self, obs_dims, num_actions, share, hidden_size=64, layer_norm=False):
        super().__init__()
        self.obs_dims, self.share = list(obs_dims), share
        num_agents, obs_dim = len(obs_dims), max(obs_dims)
        if share:
            self.actor = mlp(obs_dim + num_agents, hidden_size, num_actions, 0.01, layer_norm)
        else:
            self.actors = nn.ModuleList(mlp(d, hidden_size, num_actions, 0.01, layer_norm)
                                        for d in obs_dims)

    def logits(self, obs, avail):
        """obs [..., A, D] and avail [..., A, K] -> masked logits [..., A, K]."""
        if self.share:
            num_agents = len(self.obs_dims)
            ids = torch.eye(num_agents, device=obs.device).expand(*obs.shape[:-1], num_agents)
            logits = self.actor(torch.cat([obs, ids], dim=-1))
        else:
            logits = torch.stack([actor(obs[..., i, :d]) for i, (actor, d)
                                  in enumerate(zip(self.actors, self.obs_dims))], dim=-2)
        return logits.masked_fill(~avail, -1e8)

    def act(self, obs, avail):
        """Sample actions; returns (actions, log-probabilities), each [..., A]."""
        dist = Categorical(logits=self.logits(obs, avail), validate_args=False)
        actions = dist.sample()
        return actions, dist.log_prob(actions)

    def evaluate(self, obs, avail, actions):
        """Log-probabilities and entropies [..., A] of given actions, for the update."""
        dist = Categorical(logits=self.logits(obs, avail), validate_args=False)
        return dist.log_prob(actions), dist.entropy()


class Critic(nn.Module):
    """The centralized critic: one MLP from a critic input [..., S_c] to a value [...]."""

    def __init__(self, critic_dim, hidden_size=64, layer_norm=False):
        super().__init__()
        self.critic_dim, self.net = critic_dim, mlp(critic_dim, hidden_size, 1, 1.0, layer_norm)

    def forward(self, x):
        return self.net(x).squeeze(-1)


# ---------------------------------------------------------------------------------------
# Training
# ---------------------------------------------------------------------------------------
def train(args, envs, actors, critic, value_norm, run, device):
    """MAPPO's loop, until the budget, --stop-at-return or a non-finite loss.
    run (RunWriter, below the banner) writes the run folder: step(n) prints progress and
    evaluates, episode/update add a CSV row, reached/non_finite say when to stop."""
    ep = args.critic_state == "ep"
    num_agents = len(envs.agents)
    # One Adam (eps 1e-5, MAPPO's) acts as the references' two: its moments are per parameter.
    optimizer = torch.optim.Adam([*actors.parameters(), *critic.parameters()],
                                 lr=args.learning_rate, eps=1e-5)
    buffer = RolloutBuffer(args.num_steps, args.num_envs, num_agents, envs.obs.shape[-1],
                           envs.avail.shape[-1], args.critic_state, critic.critic_dim, device)
    batch_size = args.num_envs * args.num_steps
    num_iterations = args.total_timesteps // batch_size
    global_step = 0

    def tensor(x):
        return torch.from_numpy(x).to(device)

    obs, state, avail, active = (tensor(x) for x in envs.reset(args.seed))
    active = active.float()
    for iteration in range(1, num_iterations + 1):
        if args.anneal_lr:  # linearly from --learning-rate at the start to 0 at the end
            for group in optimizer.param_groups:
                group["lr"] = args.learning_rate * (1 - (iteration - 1) / num_iterations)

        # Collect: T lock-steps of the N copies with the current policies.
        for step in range(args.num_steps):
            with torch.no_grad():
                buffer.obs[step], buffer.avail[step], buffer.active[step] = obs, avail, active
                buffer.critic_obs[step] = critic_input(state, obs, args.critic_state)
                buffer.actions[step], buffer.logprobs[step] = actors.act(obs, avail)
                buffer.values[step] = critic(buffer.critic_obs[step])
            # A done agent gets reward 0, a zero observation and active 0 till its copy resets.
            out = envs.step(buffer.actions[step].cpu().numpy())
            global_step += args.num_envs
            run.step(global_step)  # progress line; evaluation every --eval-every steps
            buffer.rewards[step], buffer.terminated[step], buffer.truncated[step] = critic_step(
                tensor(out.rewards), tensor(out.terminated), tensor(out.truncated), active,
                tensor(out.ended), args.critic_state, args.per_agent_reward)
            buffer.final_critic[step] = critic_input(tensor(out.final_state),
                                                     tensor(out.final_obs), args.critic_state)
            obs, state, avail = tensor(out.obs), tensor(out.state), tensor(out.avail)
            active = tensor(out.active).float()
            for _, episode_return, length in out.episodes:
                run.episode(global_step, episode_return, length)
            if run.reached(args.stop_at_return, global_step):  # the summary records when
                return
        buffer.last_critic.copy_(critic_input(state, obs, args.critic_state))

        # Targets: GAE in return units; the critic learns them normalized, where they count.
        with torch.no_grad():
            advantages, returns = buffer.gae(critic, value_norm, args.gamma, args.gae_lambda)
        value_mask = torch.ones_like(returns) if ep else buffer.active  # AS: where each acted
        values = value_norm.denormalize(buffer.values)  # with the statistics that made them
        value_norm.update(returns[value_mask.bool()])
        if ep:  # every agent of a copy shares the team's advantage
            advantages = advantages.unsqueeze(-1).expand(-1, -1, num_agents)
        batch = buffer.batch(advantages=advantages, targets=value_norm.normalize(returns),
                             value_mask=value_mask)

        # Update: epochs of minibatch gradient steps on the rollout.
        approx_kls, clipfracs = [], []
        for epoch in range(args.update_epochs):
            for idx in torch.randperm(batch_size, device=device).chunk(args.num_minibatches):
                mb = {name: x[idx] for name, x in batch.items()}
                newlogprob, entropy = actors.evaluate(mb["obs"], mb["avail"], mb["actions"])
                adv = mb["advantages"]  # normalized over the active agents unless --no-norm-adv
                adv = normalize_advantages(adv, mb["active"]) if args.norm_adv else adv
                loss, pg_loss, v_loss, entropy = mappo_loss(
                    newlogprob=newlogprob, oldlogprob=mb["logprobs"], advantages=adv,
                    active=mb["active"], newvalue=critic(mb["critic_obs"]),
                    oldvalue=mb["values"], returns=mb["targets"], value_mask=mb["value_mask"],
                    entropy=entropy, clip_coef=args.clip_coef, ent_coef=args.ent_coef,
                    vf_coef=args.vf_coef, clip_vloss=args.clip_vloss)
                optimizer.zero_grad()
                loss.backward()
                nn.utils.clip_grad_norm_(actors.parameters(), args.max_grad_norm)  # each its
                nn.utils.clip_grad_norm_(critic.parameters(), args.max_grad_norm)  # own, as theirs
                optimizer.step()
                # Diagnostics over the active steps: KL(old || new) by k3, the clip fraction
                logratio = (newlogprob - mb["logprobs"]).detach()
                approx_kls.append(masked_mean(torch.expm1(logratio) - logratio, mb["active"]))
                clipfracs.append(masked_mean((logratio.exp() - 1).abs() > args.clip_coef,
                                             mb["active"]))

        if run.non_finite(loss.item(), global_step):  # says so; the run stops as interrupted
            return
        counted = value_mask.bool()
        run.update(global_step, learning_rate=optimizer.param_groups[0]["lr"],
                   policy_loss=pg_loss.item(), value_loss=v_loss.item(), entropy=entropy.item(),
                   approx_kl=torch.stack(approx_kls).mean().item(),
                   clipfrac=torch.stack(clipfracs).mean().item(),
                   explained_variance=explained_variance(values[counted], returns[counted]),
                   return_mean=value_norm.mean, return_std=math.sqrt(value_norm.var))


def main(args: Args) -> dict:
    """Train MAPPO (or evaluate an --eval-checkpoint), write the run folder, return the summary.
    Ctrl-C stops training; the run folder is written, then KeyboardInterrupt goes on up."""
    # Check everything a user can get wrong before anything runs: one line, exit status 2.
    check_args(args)
    spec = check_env(args, make=LockstepEnvs)
    args, checkpoint = load_checkpoint(args)  # the networks, the critic's state, the time limit

    # Set up: seeds, device, the actors, the critic, the value normalizer, the run folder.
    device = seed_and_device(args.seed, args.cuda)
    num_agents, obs_dim = len(spec["agents"]), max(spec["obs_dims"])
    critic_dim = spec["state_dim"] + (obs_dim + num_agents if args.critic_state == "as" else 0)
    actors = Actors(spec["obs_dims"], max(spec["action_counts"]), args.share_actor,
                    args.hidden_size, args.layer_norm).to(device)
    critic = Critic(critic_dim, args.hidden_size, args.layer_norm).to(device)
    value_norm = ValueNorm(args.value_norm)
    models = {"actors": actors, "critic": critic, "value_norm": value_norm}  # what model.pt holds
    if checkpoint is not None:
        restore(checkpoint, models, args)
    run = RunWriter(args, device, models, rollout_steps=args.num_envs * args.num_steps,
                    note=f", {num_agents} agents, {args.critic_state.upper()} critic")

    # Train (unless evaluating a checkpoint), then finish: evaluate, save, write, plot.
    envs = None if checkpoint else LockstepEnvs(args.env_id, args.num_envs, args.max_cycles)
    return train_and_finish(run, lambda: train(args, envs, actors, critic, value_norm, run,
                                               device), envs)


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
# What the plumbing asks of mappo.py: its own checks, its greedy policy, its model's flags
# ---------------------------------------------------------------------------------------
CONTINUOUS_ACTIONS = False  # the lock-step plumbing's MPE tasks: Discrete actions


def check_flags(args):
    """mappo.py's own flags, checked before any environment is made."""
    for name in ("num_envs", "num_steps", "num_minibatches", "update_epochs", "hidden_size",
                 "max_cycles", "learning_rate", "clip_coef", "max_grad_norm"):
        if not getattr(args, name) > 0:
            fail(f"--{name.replace('_', '-')} must be positive, got {getattr(args, name)}")
    for name in ("gamma", "gae_lambda"):
        if not 0.0 <= getattr(args, name) <= 1.0:
            fail(f"--{name.replace('_', '-')} must be in [0, 1], got {getattr(args, name)}")
    if args.per_agent_reward and args.critic_state == "ep":
        fail("--per-agent-reward needs --critic-state as (the EP critic has one value per "
             "copy, learned from the team reward)")
    batch_size = args.num_envs * args.num_steps
    if batch_size % args.num_minibatches:
        fail(f"num_envs*num_steps = {batch_size} is not divisible by --num-minibatches "
             f"{args.num_minibatches}; pick a divisor of {batch_size}")
    if args.eval_checkpoint is None and 0 < args.total_timesteps < batch_size:
        fail(f"--total-timesteps {args.total_timesteps} is less than one rollout "
             f"(num_envs*num_steps = {batch_size}); raise it or shrink the rollout")


def check_spaces(args, obs_space, action_space):
    """Whether mappo.py handles every agent's spaces (LockstepEnvs': observations
    {"agents": each agent's, "state": the state's}, each agent's actions); returns the spec
    dict: agents, obs_dims, action_counts, state_dim."""
    for agent, space in action_space.items():
        if not isinstance(space, gym.spaces.Discrete):
            fail(f"{args.env_id}'s agent {agent} has a {type(space).__name__} action space; "
                 "mappo.py's actors are categorical and need Discrete actions (for "
                 "continuous control of one agent see ppo.py or ddpg_td3.py)")
    for agent, space in obs_space["agents"].items():
        if not isinstance(space, gym.spaces.Box) or len(space.shape) != 1:
            fail(f"{args.env_id}'s agent {agent} has observations {space}; mappo.py's MLPs "
                 "need flat Box vectors")
    return {"agents": list(action_space),
            "obs_dims": [s.shape[0] for s in obs_space["agents"].values()],
            "action_counts": [int(s.n) for s in action_space.values()],
            "state_dim": obs_space["state"].shape[0]}


def greedy_policy(models, envs):
    """The evaluation's policy, act(obs, info) -> actions: each agent's most likely action
    among those available (info["avail"]); a done agent's is not sent (LockstepEnvs)."""
    actors = models["actors"]
    device = next(actors.parameters()).device

    @torch.no_grad()
    def act(obs, info):
        logits = actors.logits(torch.from_numpy(obs).to(device),
                               torch.from_numpy(info["avail"]).to(device))
        return logits.argmax(-1).cpu().numpy()
    return act


def explained_variance(values, returns):
    """updates.csv's explained_variance, 1 - Var[R - V] / Var[R]: 1 when the critic predicts
    the targets, 0 or less when it does no better than their mean (NaN when they do not vary)."""
    var_returns = returns.var().item()
    return 1 - (returns - values).var().item() / var_returns if var_returns else math.nan


# What a run is judged on, by environment id (its benchmark task in benchmark.py, its README
# row): (threshold, window of training episodes, "train": the last-window mean at the end,
# or "eval": the final greedy evaluation). Another id: its reward_threshold over 20, "train".
GOALS = {"simple_spread_v3": (-16, 100, "train", 1_000_000)}
# the networks, the critic's state and the time limit, which --eval-checkpoint takes over
ENV_FLAGS = ("max_cycles",)  # the evaluation's environments get the run's --max-cycles
MODEL_FLAGS = ("hidden_size", "share_actor", "layer_norm", "critic_state", "max_cycles")
# mappo.py's columns of updates.csv as TensorBoard's scalars, under CleanRL's names
TENSORBOARD_NAMES = {
    "learning_rate": "charts/learning_rate", "return_mean": "charts/return_mean",
    "return_std": "charts/return_std", "policy_loss": "losses/policy_loss",
    "value_loss": "losses/value_loss", "entropy": "losses/entropy",
    "approx_kl": "losses/approx_kl", "clipfrac": "losses/clipfrac",
    "explained_variance": "losses/explained_variance"}


if __name__ == "__main__":
    cli()

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
    # The run folder's flags (--output-dir, --save-model, --eval-checkpoint, --track, ...)
    # come after these: every script shares them, declared once in RunFlags below the banner.
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
    run (Run, below the banner) writes the run folder: step(n) prints progress and
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
    # prepare (below the banner): --eval-checkpoint's model read, the environment made and
    # checked, every flag checked (a mistake: one line, exit status 2), the seeds set, the
    # device chosen.
    args, spec, checkpoint, device = prepare(args, make=LockstepEnvs)

    # Set up: the actors, the critic, the value normalizer, the run folder.
    num_agents, obs_dim = len(spec["agents"]), max(spec["obs_dims"])
    critic_dim = spec["state_dim"] + (obs_dim + num_agents if args.critic_state == "as" else 0)
    actors = Actors(spec["obs_dims"], max(spec["action_counts"]), args.share_actor,
                    args.hidden_size, args.layer_norm).to(device)
    critic = Critic(critic_dim, args.hidden_size, args.layer_norm).to(device)
    value_norm = ValueNorm(args.value_norm)
    models = {"actors": actors, "critic": critic, "value_norm": value_norm}  # what model.pt holds
    run = Run(args, device, models, checkpoint, rollout_steps=args.num_envs * args.num_steps,
              note=f", {num_agents} agents, {args.critic_state.upper()} critic")

    # Train (unless evaluating a checkpoint), then finish: evaluate, save, write, plot.
    envs = None if checkpoint else LockstepEnvs(args.env_id, args.num_envs, args.max_cycles)
    return run.train(lambda: train(args, envs, actors, critic, value_norm, run, device), envs)


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
# What the plumbing asks of mappo.py: its own checks, its greedy policy, its model's flags
# ---------------------------------------------------------------------------------------
CONTINUOUS_ACTIONS = False  # the lock-step plumbing's MPE tasks: Discrete actions


def check_flags(args):
    """mappo.py's own flags, checked by prepare before training."""
    check_range(args, positive=["num_envs", "num_steps", "num_minibatches", "update_epochs",
                                "hidden_size", "max_cycles", "learning_rate", "clip_coef",
                                "max_grad_norm"],
                fraction=["gamma", "gae_lambda"])
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


if __name__ == "__main__":
    cli()

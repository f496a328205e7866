"""Tests of sac.py: the math by hand, the buffer, what the update passes to the math (glue),
its hooks (check_flags, check_spaces, greedy_policy, MODEL_FLAGS), runs end to end. The
plumbing's behaviour is tested once for every script, in test_plumbing.py."""
import importlib
import math

import gymnasium as gym
import numpy as np
import pytest
import torch
import torch.nn as nn

import sac
from conftest import (approx, check_episode_ends,
                      check_the_actor_acts_on_float64_observations_as_float32,
                      check_the_buffer_is_never_larger_than_the_budget,
                      check_the_random_actions_fill_minus_one_to_one,
                      check_the_ring_of_field_tensors, check_the_rows_of_numbered_agent_updates,
                      copies, fill_with_constants, moved_since, read_csv, received_actions,
                      same_seed_episodes, saved_sums, spy_on, spy_on_acting, spy_on_seeds, tensor)


def filled(**flags):
    """sac.Args with the flags left at None taken from its continuous preset, the settings its
    defaults had before the presets, as main fills them on Pendulum-v1."""
    return sac.fill_preset(sac.Args(**flags), "continuous")


LOG_2PI_HALF = 0.9189385  # log(2 pi) / 2 = 1.8378771 / 2


# ---------------------------------------------------------------------------------------
# The critic target by hand. Three transitions, gamma = 0.5, rewards 1; the second one
# terminated, the third one was cut by a time limit (truncated, so not terminated: its s'
# is the true final observation and it bootstraps like any other step).
# ---------------------------------------------------------------------------------------
REWARDS, TERMINATED = tensor(1, 1, 1), tensor(0, 1, 0)
NEXT_Q1, NEXT_Q2, NEXT_LOGPROB = tensor(2, 4, 6), tensor(3, 1, 2), tensor(-2, 1, 2)


def test_target_by_hand_twin_minimum_entropy_termination_truncation():
    # min(Q1', Q2') = [2, 1, 2]; minus alpha log pi' with alpha = 0.5:
    #   [2 - 0.5*(-2), 1 - 0.5*1, 2 - 0.5*2] = [3, 0.5, 1]
    # y = [1 + 0.5*3, 1 + 0.5*0*0.5 (terminated), 1 + 0.5*1 (truncated: bootstraps)]
    #   = [2.5, 1, 1.5]
    y = sac.sac_target(REWARDS, NEXT_Q1, NEXT_Q2, NEXT_LOGPROB, TERMINATED, 0.5, 0.5)
    assert y.tolist() == approx([2.5, 1.0, 1.5])


def test_target_without_entropy_is_the_clipped_double_q_target():
    # alpha = 0: y = [1 + 0.5*2, 1, 1 + 0.5*2] = [2, 1, 2]; terminated may be bool
    y = sac.sac_target(REWARDS, NEXT_Q1, NEXT_Q2, NEXT_LOGPROB, TERMINATED.bool(), 0.5, 0.0)
    assert y.tolist() == approx([2.0, 1.0, 2.0])


def test_target_with_every_step_terminated_is_the_reward():
    # gamma*(1 - 1)*anything = 0: y = r, whatever the critics and the policy say
    y = sac.sac_target(tensor(0.5, -2), tensor(100, 100), tensor(50, 50), tensor(-9, 9),
                       tensor(1, 1), 0.99, 0.2)
    assert y.tolist() == approx([0.5, -2.0])


# ---------------------------------------------------------------------------------------
# The squashed log-probability against the change of variables a = scale * tanh(u):
# log pi(a) = log N(u; mean, sigma^2) - log(1 - tanh(u)^2) - log(scale), summed over dims.
# ---------------------------------------------------------------------------------------
def test_logprob_one_dimension_at_zero_is_the_gaussian_density():
    # u = mean = 0, sigma = 1: log N = -log(2 pi)/2 = -0.9189385; tanh(0) = 0, log(1 - 0) = 0
    logprob = sac.squashed_logprob(tensor([0.0]), tensor([0.0]), tensor([0.0]), tensor(1.0))
    assert logprob.tolist() == approx([-LOG_2PI_HALF])


def test_logprob_one_dimension_with_unit_and_wider_bounds():
    # u = 1, mean = 0, sigma = 1: log N = -1/2 - 0.9189385 = -1.4189385
    # tanh(1) = 0.7615942, tanh^2 = 0.5800257, log(1 - 0.5800257) = log(0.4199743) = -0.8675617
    # bounds +-1: -1.4189385 + 0.8675617 = -0.5513768
    # bounds +-2 (scale 2): -0.5513768 - log 2 = -0.5513768 - 0.6931472 = -1.2445240
    u, mean, log_std = tensor([1.0]), tensor([0.0]), tensor([0.0])
    assert sac.squashed_logprob(u, mean, log_std, tensor(1.0)).tolist() == approx([-0.5513768])
    assert sac.squashed_logprob(u, mean, log_std, tensor(2.0)).tolist() == approx([-1.2445240])


def test_logprob_two_dimensions_sums_over_them_with_a_scale_each():
    # Row 1, dimension 1: u = 1, mean 0.5, sigma 0.5 (log_std = -0.6931472), scale 2:
    #   z = (1 - 0.5)/0.5 = 1; log N = -1/2 + 0.6931472 - 0.9189385 = -0.7257913
    #   - log(1 - tanh(1)^2) = +0.8675617; - log 2 = -0.6931472  ->  -0.5513768
    # Row 1, dimension 2: u = -0.5, mean 0, sigma 1, scale 0.25:
    #   log N = -0.125 - 0.9189385 = -1.0439385
    #   tanh(0.5) = 0.4621172, tanh^2 = 0.2135523, log(0.7864477) = -0.2402290 -> +0.2402290
    #   - log 0.25 = +1.3862944  ->  -1.0439385 + 0.2402290 + 1.3862944 = 0.5825849
    # Row 1: -0.5513768 + 0.5825849 = 0.0312081
    # Row 2: u = mean = 0, sigma 1 in both: 2 * -0.9189385 - log 2 - log 0.25
    #   = -1.8378771 - 0.6931472 + 1.3862944 = -1.1447299
    u = tensor([1.0, -0.5], [0.0, 0.0])
    mean = tensor([0.5, 0.0], [0.0, 0.0])
    log_std = tensor([math.log(0.5), 0.0], [0.0, 0.0])
    logprob = sac.squashed_logprob(u, mean, log_std, tensor(2.0, 0.25))
    assert logprob.tolist() == approx([0.0312081, -1.1447299])


def test_logprob_stays_finite_where_tanh_rounds_to_one():
    # u = mean = 20, sigma 1: log N = -0.9189385; tanh(20) is 1.0 in float32, so
    # log(1 - tanh^2) would be -inf. The stable form: 2*(log 2 - 20 - softplus(-40))
    #   = 2*(0.6931472 - 20 - 4.2e-18) = -38.6137056
    # log pi = -0.9189385 + 38.6137056 = 37.6947671
    logprob = sac.squashed_logprob(tensor([20.0]), tensor([20.0]), tensor([0.0]), tensor(1.0))
    assert torch.tanh(tensor(20.0)) == 1.0, (
        "the test's premise: in float32 tanh(20) rounds to 1, so log(1 - tanh(u)^2) is -inf")
    assert logprob.item() == pytest.approx(37.6947671, rel=1e-6)


def test_actor_samples_are_squashed_and_carry_their_logprob():
    torch.manual_seed(0)
    actor = sac.Actor(3, 2, 8, action_scale=np.array([2.0, 0.5], np.float32))
    obs = torch.randn(100, 3) * 100
    actions, logprob = actor.sample(obs)
    assert actions.shape == (100, 2) and logprob.shape == (100,)
    assert actions.abs().max() <= 1.0 and torch.isfinite(logprob).all()
    mean, _ = actor(obs)
    assert torch.equal(actor.greedy(obs), torch.tanh(mean))
    logprob.sum().backward()  # reparameterized: the log-probability reaches the weights
    assert all(p.grad is not None and p.grad.abs().sum() > 0 for p in actor.parameters())


def test_the_actors_sample_carries_log_pi_of_its_pre_tanh_draw():
    # The last layer set by hand: weights 0, biases mu = 1 and log sigma = -20 for every s, so
    # u = 1 + 2.06e-9 eps rounds to 1.0 in float32 whatever the draw: a = tanh(1) = 0.7615942.
    # log N(u; 1, sigma^2) = -0 - log sigma - log(2 pi)/2 = 20 - 0.9189385 = 19.0810615
    # - log(1 - tanh(1)^2) = -log(0.4199743) = +0.8675617; - log 2 (bounds +-2) = -0.6931472
    # log pi = 19.0810615 + 0.8675617 - 0.6931472 = 19.2554760
    # (the density taken at the squashed a = 0.7615942 instead of u = 1: z = -0.2384 / 2.06e-9,
    # about -1.2e8, log pi about -6.7e15)
    torch.manual_seed(0)
    actor = sac.Actor(3, 1, 8, action_scale=np.array([2.0], np.float32))
    with torch.no_grad():
        actor.net[-1].weight.zero_()
        actor.net[-1].bias.copy_(tensor(1.0, -20.0))
    actions, logprob = actor.sample(torch.randn(5, 3))
    assert actions[:, 0].tolist() == approx([0.7615942] * 5)
    assert logprob.tolist() == pytest.approx([19.2554760] * 5, rel=1e-6)


# ---------------------------------------------------------------------------------------
# The actor's and the temperature's losses, the soft update
# ---------------------------------------------------------------------------------------
def test_actor_loss_by_hand():
    # min(Q1, Q2) = min([1, 5], [2, 3]) = [1, 3]; alpha log pi = 0.5*[-1, 2] = [-0.5, 1]
    # mean of [-0.5 - 1, 1 - 3] = mean of [-1.5, -2] = -1.75
    loss = sac.actor_loss(tensor(1, 5), tensor(2, 3), tensor(-1, 2), 0.5)
    assert loss.item() == approx(-1.75)


def test_temperature_loss_by_hand_and_its_gradient():
    # alpha = 0.5, log pi = [-2, 0], H_target = -1: log pi + H_target = [-3, -1]
    # L = -mean(0.5*[-3, -1]) = -mean([-1.5, -0.5]) = 1.0
    # dL/dlog_alpha = L (d alpha/d log_alpha = alpha) = 1.0 > 0: a gradient step lowers
    # alpha, as it should while the entropy -log pi (mean 1) is above the target -1
    log_alpha = torch.tensor([math.log(0.5)], requires_grad=True)
    logprob = tensor(-2, 0).requires_grad_()
    loss = sac.temperature_loss(log_alpha, logprob, -1.0)
    loss.backward()
    assert loss.item() == approx(1.0) and log_alpha.grad.tolist() == approx([1.0])
    assert logprob.grad is None  # the policy gets no gradient from the temperature's loss


def linear(weight, bias):
    """A 2-in 1-out nn.Linear with the given weights."""
    layer = nn.Linear(2, 1)
    with torch.no_grad():
        layer.weight.copy_(tensor([weight[0], weight[1]]))
        layer.bias.copy_(tensor(bias))
    return layer


def test_soft_update_by_hand():
    # theta' <- 0.25*theta + 0.75*theta':
    #   weights [0.25*2 + 0.75*0, 0.25*20 + 0.75*10] = [0.5, 12.5], bias 0.25*8 + 0.75*4 = 5
    target, source = linear([0, 10], 4), linear([2, 20], 8)
    sac.soft_update(target, source, 0.25)
    assert target.weight.tolist() == [[0.5, 12.5]] and target.bias.tolist() == [5.0]
    assert source.weight.tolist() == [[2.0, 20.0]] and source.bias.tolist() == [8.0]
    sac.soft_update(target, source, 1.0)  # tau = 1 copies
    assert target.weight.tolist() == [[2.0, 20.0]] and target.bias.tolist() == [8.0]


# ---------------------------------------------------------------------------------------
# The replay buffer
# ---------------------------------------------------------------------------------------
def test_buffer_wraps_around_and_samples_whole_transitions():
    check_the_ring_of_field_tensors(sac)


# ---------------------------------------------------------------------------------------
# The glue: what one update passes to the math. Stand-in networks with numbers a test can
# work out by hand: Q(s, a) = c + k s + 10 a, and a "policy" that picks a = s / 10 with
# log pi(a|s) = -s.
# ---------------------------------------------------------------------------------------
class HandQ(nn.Module):
    def __init__(self, c, k):
        super().__init__()
        self.c, self.k = nn.Parameter(tensor(c)), k

    def forward(self, obs, actions):
        return self.c + self.k * obs[:, 0] + 10 * actions[:, 0]


class HandPolicy(nn.Module):
    def __init__(self):
        super().__init__()
        self.w = nn.Parameter(tensor(0.1))

    def sample(self, obs):
        return self.w * obs, -obs[:, 0]


def agent_for(obs_dim=1, **flags):
    args = filled(**{"hidden_size": 8, **flags})
    return sac.Agent(obs_dim, 1, np.array([1.0], np.float32), args, "cpu")


def test_target_comes_from_the_target_critics_at_next_actions_of_the_current_policy(
        monkeypatch):
    agent = agent_for(gamma=0.5, alpha=0.5, autotune=False)
    agent.actor = HandPolicy()
    agent.critic1, agent.critic2 = HandQ(100, 1), HandQ(200, -1)  # online: far off
    agent.critic1_target, agent.critic2_target = HandQ(1, 1), HandQ(13, -1)
    seen = []
    target = sac.sac_target
    monkeypatch.setattr(sac, "sac_target", lambda **k: seen.append(k) or target(**k))
    obs, actions = tensor([1], [2], [5]), tensor([0.5], [-0.5], [0.2])
    rewards, terminated, next_obs = tensor(1, 1, 2), tensor(0, 0, 1), tensor([3], [8], [6])
    stats = agent.update(obs, actions, rewards, terminated, next_obs)
    # a' = s'/10 = [0.3, 0.8, 0.6] and log pi(a'|s') = -s' = [-3, -8, -6] (the policy at s')
    # Q'_1 = 1 + s' + 10 a' = [1+3+3, 1+8+8, 1+6+6] = [7, 17, 13]
    # Q'_2 = 13 - s' + 10 a' = [13-3+3, 13-8+8, 13-6+6] = [13, 13, 13]
    # (each of the two is the smaller one on one row, so neither may stand in for the other)
    (k,) = seen  # sac_target is called with keywords
    assert k["next_q1"].tolist() == [7, 17, 13] and k["next_q2"].tolist() == [13, 13, 13]
    assert k["next_logprob"].tolist() == [-3, -8, -6] and (k["gamma"], k["alpha"]) == (0.5, 0.5)
    assert k["rewards"].tolist() == [1, 1, 2] and k["terminated"].tolist() == [0, 0, 1]
    # y = r + 0.5 (1 - terminated)(min - 0.5 log pi') = [1 + 0.5*(7 + 1.5), 1 + 0.5*(13 + 4), 2]
    #   = [5.25, 9.5, 2]
    # The online critics on the stored actions: Q1 = 100 + s + 10 a = [106, 97, 107],
    # Q2 = 200 - s + 10 a = [204, 193, 197]; losses: mean of the squared differences
    #   critic 1: (100.75^2 + 87.5^2 + 105^2)/3 = (10150.5625 + 7656.25 + 11025)/3 = 9610.6042
    #   critic 2: (198.75^2 + 183.5^2 + 195^2)/3 = (39501.5625 + 33672.25 + 38025)/3
    #           = 37066.2708
    assert stats["critic1_loss"] == pytest.approx(9610.6042, rel=1e-6)
    assert stats["critic2_loss"] == pytest.approx(37066.2708, rel=1e-6)


def test_alpha_is_not_differentiated_through_the_critic_target(monkeypatch):
    agent = agent_for(obs_dim=3, policy_frequency=2)  # the first update: a critic step alone
    seen = []
    target = sac.sac_target
    monkeypatch.setattr(sac, "sac_target", lambda **k: seen.append(k) or target(**k))
    before = agent.log_alpha.item()
    agent.update(*random_batch())
    alpha = seen[0]["alpha"]
    assert not (torch.is_tensor(alpha) and alpha.requires_grad)
    assert agent.log_alpha.grad is None and agent.log_alpha.item() == before


def test_the_target_and_the_actor_loss_take_the_learned_temperature(monkeypatch):
    # --alpha 0.5 is only where alpha starts: once learned down to 0.25, the critic target and
    # the actor's loss take 0.25 (both come before this update's temperature step)
    agent = agent_for(obs_dim=3, alpha=0.5)
    with torch.no_grad():
        agent.log_alpha.fill_(math.log(0.25))
    seen = []
    for name in ("sac_target", "actor_loss"):
        monkeypatch.setattr(sac, name, lambda original=getattr(sac, name), **k:
                            seen.append(k["alpha"]) or original(**k))
    agent.update(*random_batch())
    assert seen == approx([0.25, 0.25])


def test_the_temperature_step_takes_log_pi_of_the_actor_steps_sample_at_s(monkeypatch):
    agent = agent_for(alpha=0.5)  # learned, H_target = -dim(A) = -1
    agent.actor = HandPolicy()
    agent.critic1, agent.critic2 = HandQ(0, 1), HandQ(1, 1)
    seen, loss = [], sac.temperature_loss
    monkeypatch.setattr(sac, "temperature_loss", lambda **k: seen.append(k) or loss(**k))
    stats = agent.update(tensor([1], [2], [5]), tensor([0.5], [-0.5], [0.2]), tensor(1, 1, 2),
                         tensor(0, 0, 1), tensor([3], [8], [6]))
    # The actor step's sample at s = [1, 2, 5]: log pi = -s = [-1, -2, -5] (the target's at
    # s' would be [-3, -8, -6]). dL/dlog_alpha = -alpha mean(log pi + H_target)
    #   = -0.5 * (-8/3 - 1) = 11/6 > 0, and Adam's first step moves log_alpha by -lr = -2e-3.
    # updates.csv's alpha is the one after that step: 0.5 exp(-2e-3) = 0.5 * 0.9980020
    # = 0.4990010 (the alpha this update's losses took, before it, is 0.5)
    (k,) = seen
    assert k["logprob"].tolist() == [-1, -2, -5] and k["target_entropy"] == -1
    assert agent.log_alpha.item() == pytest.approx(math.log(0.5) - 2e-3, abs=1e-6)
    assert stats["alpha"] == pytest.approx(0.4990010, abs=1e-6)


def random_batch(n=64):
    gen = torch.Generator().manual_seed(1)
    return (torch.randn(n, 3, generator=gen), torch.rand(n, 1, generator=gen) * 2 - 1,
            torch.randn(n, generator=gen), torch.zeros(n), torch.randn(n, 3, generator=gen))


def soft_objective(agent, obs, alpha):
    """mean of min(Q1, Q2)(s, a~) - alpha log pi(a~|s), a~ drawn with one fixed noise."""
    torch.manual_seed(7)
    with torch.no_grad():
        actions, logprob = agent.actor.sample(obs)
        q = torch.minimum(agent.critic1(obs, actions), agent.critic2(obs, actions))
    return (q - alpha * logprob).mean().item()


def test_actor_steps_on_fixed_critics_raise_the_soft_value():
    # Fixed critics Q = s + 10 a and Q = 1 + s + 10 a (min: the first), alpha = 0.2: the
    # actor gains 10 per unit of action and pays 0.2 log pi, so its steps must raise
    # mean(Q - 0.2 log pi) by far more than entropy alone could (a few tenths)
    torch.manual_seed(0)
    agent = agent_for(obs_dim=3, alpha=0.2, autotune=False, learning_rate=3e-3)
    agent.critic1, agent.critic2 = HandQ(0, 1), HandQ(1, 1)
    batch = random_batch()
    before = soft_objective(agent, batch[0], 0.2)
    for _ in range(30):
        agent.update(*batch)
    after = soft_objective(agent, batch[0], 0.2)
    assert after > before + 1.0
    assert agent.critic1.c.item() == 0.0 and agent.critic2.c.item() == 1.0


@pytest.mark.parametrize("target_entropy, direction", [(5.0, 1), (-20.0, -1)])
def test_temperature_rises_below_the_target_entropy_and_falls_above(target_entropy, direction):
    # A fresh policy's entropy is about 1 (sigma near 1, squashed): below a target of 5,
    # above one of -20
    agent = agent_for(obs_dim=3, target_entropy=target_entropy)
    before = agent.alpha()
    stats = [agent.update(*random_batch()) for _ in range(5)]
    assert all(-5 < s["entropy"] < 5 for s in stats)
    assert (agent.alpha() - before) * direction > 0


def test_a_fixed_temperature_never_moves():
    agent = agent_for(obs_dim=3, alpha=0.2, autotune=False)
    before = agent.alpha()
    stats = [agent.update(*random_batch()) for _ in range(5)]
    assert before == pytest.approx(0.2) and agent.alpha() == before
    assert [s["alpha"] for s in stats] == [before] * 5 and not agent.log_alpha.requires_grad


def test_policy_frequency_makes_d_actor_steps_every_d_th_critic_step():
    agent = agent_for(obs_dim=3, policy_frequency=3)
    steps = lambda optimizer: int(next(iter(optimizer.state.values()), {"step": 0})["step"])
    counts = []
    for _ in range(6):
        agent.update(*random_batch())
        counts.append((steps(agent.critic_optimizer), steps(agent.actor_optimizer),
                       steps(agent.alpha_optimizer)))
    # critic steps 1..6; the actor and the temperature take 3 steps at the 3rd and the 6th
    assert counts == [(1, 0, 0), (2, 0, 0), (3, 3, 3), (4, 3, 3), (5, 3, 3), (6, 6, 6)]


def test_the_critics_and_their_targets_move_at_every_update_the_actor_every_second():
    # --policy-frequency 2: every weight of both critics and (by tau) of both target critics
    # moves at updates 1 and 2; the actor's and the temperature at the 2nd alone
    agent = agent_for(obs_dim=3, policy_frequency=2)
    nets = [agent.critic1, agent.critic2, agent.critic1_target, agent.critic2_target, agent.actor]
    steps = []
    for _ in range(2):
        before, alpha = [copies(net) for net in nets], agent.alpha()
        agent.update(*random_batch())
        steps.append([moved_since(old, net) for old, net in zip(before, nets)]
                     + [agent.alpha() != alpha])
    assert steps == [["all"] * 4 + ["none", False], ["all"] * 5 + [True]]


def test_target_critics_follow_the_critics_by_tau_after_every_critic_step():
    # both of them: theta'_j <- 0.25 theta_j + 0.75 theta'_j, after a critic step alone
    agent = agent_for(obs_dim=3, tau=0.25, policy_frequency=2)
    pairs = [(agent.critic1_target, agent.critic1), (agent.critic2_target, agent.critic2)]
    old_targets = [[p.clone() for p in target.parameters()] for target, _ in pairs]
    agent.update(*random_batch())
    for (target, critic), old_target in zip(pairs, old_targets):
        for new, old, source in zip(target.parameters(), old_target, critic.parameters()):
            assert torch.allclose(new, 0.25 * source + 0.75 * old, atol=1e-6)


def test_the_agent_gives_each_optimizer_its_weights_and_the_target_entropy_minus_dim_a():
    # 3-D observations, 2-D actions: H_target = -dim(A) = -2 (not -dim(S) = -3); Adam at
    # --learning-rate 0.005 on both critics' weights, on the actor's and on log alpha
    agent = sac.Agent(3, 2, np.ones(2, np.float32), filled(hidden_size=8, learning_rate=0.005),
                      "cpu")
    params = lambda optimizer: {id(p) for g in optimizer.param_groups for p in g["params"]}
    assert agent.target_entropy == -2
    assert params(agent.critic_optimizer) == {id(p) for p in [*agent.critic1.parameters(),
                                                              *agent.critic2.parameters()]}
    assert params(agent.actor_optimizer) == {id(p) for p in agent.actor.parameters()}
    assert params(agent.alpha_optimizer) == {id(agent.log_alpha)}
    rates = lambda agent: [o.param_groups[0]["lr"] for o in (
        agent.critic_optimizer, agent.actor_optimizer, agent.alpha_optimizer)]
    assert rates(agent) == [0.005] * 3
    # --critic-learning-rate 0.001 (CleanRL's q_lr) moves the critics' and the temperature's
    # rate and leaves the actor's at --learning-rate
    args = filled(hidden_size=8, learning_rate=0.005, critic_learning_rate=0.001)
    assert rates(sac.Agent(3, 2, np.ones(2, np.float32), args, "cpu")) == [0.001, 0.005, 0.001]


HAND_BATCH = (tensor([1], [2], [5]), tensor([0.5], [-0.5], [0.2]), tensor(1, 1, 2), tensor(0, 0, 1),
              tensor([3], [8], [6]))  # s, a, r, terminated, s' of the target test above


def test_the_actor_step_takes_both_online_critics_at_its_own_sample(monkeypatch):
    # alpha 0.5 fixed; the actor step's sample at s = [1, 2, 5] is a~ = 0.1 s = [0.1, 0.2, 0.5]
    # with log pi = -s. Q1 = 5 + s + 10a and Q2 = s + 10a (the smaller here), so
    #   Q1(s, a~) = 5 + 2s = [7, 9, 15] and Q2(s, a~) = 2s = [2, 4, 10]
    #   (the target critics, 100 + s + 10a and 200 + s + 10a, would give [102, ...], [202, ...])
    #   actor loss = mean(0.5 log pi - min) = mean([-0.5 - 2, -1 - 4, -2.5 - 10]) = -20/3
    # The log: q1_mean = mean Q1(s, a) at the stored a = mean(5 + [1, 2, 5] + [5, -5, 2])
    # = 25/3; entropy = -mean log pi(a~|s) = mean(s) = 8/3 (the target's sample at s' would
    # give 17/3).
    agent = agent_for(alpha=0.5, autotune=False)
    agent.actor = HandPolicy()
    agent.critic1, agent.critic2 = HandQ(5, 1), HandQ(0, 1)
    agent.critic1_target, agent.critic2_target = HandQ(100, 1), HandQ(200, 1)
    seen, loss = [], sac.actor_loss
    monkeypatch.setattr(sac, "actor_loss", lambda **k: seen.append(k) or loss(**k))
    stats = agent.update(*HAND_BATCH)
    (k,) = seen
    assert k["q1"].tolist() == approx([7, 9, 15]) and k["q2"].tolist() == approx([2, 4, 10])
    assert k["logprob"].tolist() == [-1, -2, -5] and k["alpha"] == approx(0.5)
    assert stats["actor_loss"] == pytest.approx(-20 / 3, rel=1e-6)
    assert stats["q1_mean"] == pytest.approx(25 / 3, rel=1e-6)
    assert stats["entropy"] == pytest.approx(8 / 3, rel=1e-6)


def test_each_optimizer_steps_on_its_own_loss_of_this_update_alone(monkeypatch):
    # Stand-ins built into the agent (its own optimizers hold them, and the target critics
    # are their copies, which the soft updates leave as they are), learning rate 0, so that
    # two updates on the batch above see the same numbers. Q1 = 100 + s + 10a,
    # Q2 = 200 - s + 10a, gamma 0.5, alpha 0.5, H_target = -1; a' = 0.1 s' = [0.3, 0.8, 0.6]:
    #   min(Q1', Q2')(s', a') = min(100 + 2s', 200) = [106, 116, 112]; - 0.5 log pi' = + 0.5 s'
    #   y = [1 + 0.5 (106 + 1.5), 1 + 0.5 (116 + 4), 2] = [54.75, 61, 2]
    #   critic step:      dL/dc1 = 2 mean(Q1(s, a) - y) = 2 mean([106, 97, 107] - y)
    #                            = 2 (51.25 + 36 + 105)/3 = 384.5/3
    #                     dL/dc2 = 2 mean([204, 193, 197] - y) = 2 (149.25 + 132 + 195)/3 = 317.5
    #   actor step:       Q1(s, w s) = 100 + s + 10 w s is the smaller (Q2: 200 - s + 10 w s),
    #                     dL/dw = -mean(10 s) = -80/3; the critics are frozen meanwhile, so
    #                     critic 1 keeps its critic step's 384.5/3 (unfrozen: 384.5/3 - 1)
    #   temperature step: dL/dlog_alpha = -0.5 mean(log pi + H_target) = -0.5 (-11/3) = 11/6
    # Without a zero_grad the second update's step would add the first's: 384.5/3 - 1 +
    # 384.5/3, -160/3, 11/3.
    critics = iter([HandQ(100, 1), HandQ(200, -1)])
    monkeypatch.setattr(sac, "Critic", lambda *args: next(critics))
    monkeypatch.setattr(sac, "Actor", lambda *args: HandPolicy())
    agent = agent_for(alpha=0.5, gamma=0.5, learning_rate=0.0)
    grads, step = [], torch.optim.Adam.step

    def spy(self, closure=None):
        grads.extend(p.grad.item() for group in self.param_groups for p in group["params"])
        return step(self, closure)

    monkeypatch.setattr(torch.optim.Adam, "step", spy)
    agent.update(*HAND_BATCH)
    agent.update(*HAND_BATCH)
    # critic 1, critic 2, actor, temperature; twice
    assert grads == pytest.approx([384.5 / 3, 317.5, -80 / 3, 11 / 6] * 2, rel=1e-6)
    critic_grads = [p.grad.item() for c in (agent.critic1, agent.critic2) for p in c.parameters()]
    assert critic_grads == pytest.approx([384.5 / 3, 317.5], rel=1e-6)
    assert all(p.requires_grad for c in (agent.critic1, agent.critic2) for p in c.parameters())


# ---------------------------------------------------------------------------------------
# How the loop acts: a stand-in policy whose sample and greedy action differ by hand
# ---------------------------------------------------------------------------------------
class StandInActor(nn.Module):
    """A sample is a = 0.1 s with log pi = -s, the greedy action -0.1 s - 0.05. Its one
    parameter enters every output with weight 0: the updates run and never move it."""

    def __init__(self, *args):
        super().__init__()
        self.w = nn.Parameter(tensor(0.0))

    def sample(self, obs):
        return 0.1 * obs[:, :1] + 0 * self.w, -obs[:, 0] + 0 * self.w

    def greedy(self, obs):
        return -0.1 * obs[:, :1] - 0.05


def test_the_loop_acts_with_a_sample_of_the_policy_scaled_to_the_bounds(tmp_path, monkeypatch):
    monkeypatch.setattr(sac, "Actor", StandInActor)
    stored = spy_on_acting(sac, monkeypatch)
    sac.main(sac.Args(env_id="BoxZeroToFour-v0", total_timesteps=9, learning_starts=3,
                      batch_size=4, hidden_size=8, eval_episodes=0, output_dir=str(tmp_path)))
    # Steps 0-2 act uniformly at random; from step 3 on, the policy's sample at s = 0, 1, 2,
    # 0, 1, 2: a = 0.1 s (the greedy action -0.1 s - 0.05 would explore nothing), stored as
    # it is, while the environment gets it scaled to [0, 4]: 0 + (a + 1) / 2 * 4 = 2 + 2a.
    assert [s for s, _ in stored] == [0, 1, 2] * 3
    assert [a for _, a in stored[3:]] == approx([0.0, 0.1, 0.2] * 2)
    assert received_actions()[3:] == approx([2.0, 2.2, 2.4] * 2)
    assert received_actions() == approx([2 + 2 * a for _, a in stored])  # random ones too
    assert all(-1 <= a <= 1 for _, a in stored[:3]) and len({a for _, a in stored[:3]}) == 3


def test_the_random_actions_before_learning_starts_fill_minus_one_to_one(tmp_path, monkeypatch):
    # 60 warm-up draws a ~ U[-1, 1]: some below -0.5 and some above 0.5 (both missed with
    # probability 2 * 0.75^60 = 6e-8), where U[0, 1] (the "* 2 - 1" dropped) has none below 0
    check_the_random_actions_fill_minus_one_to_one(sac, tmp_path, monkeypatch)


def test_the_evaluation_acts_greedily_with_tanh_mu_not_a_sample(tmp_path, monkeypatch):
    monkeypatch.setattr(sac, "Actor", StandInActor)
    spy_on_acting(sac, monkeypatch)
    sac.main(sac.Args(env_id="BoxZeroToFour-v0", total_timesteps=4, learning_starts=3,
                      batch_size=4, hidden_size=8, eval_episodes=1, output_dir=str(tmp_path)))
    # Steps 0-2 are random and step 3 samples at s = 0 (a = 0, sent as 2.0); then the final
    # evaluation's one episode at s = 0, 1, 2 takes the greedy action -0.1 s - 0.05 = -0.05,
    # -0.15, -0.25, which arrives scaled to [0, 4] as 2 + 2a = 1.9, 1.7, 1.5 (a sample, 0.1 s,
    # would arrive as 2.0, 2.2, 2.4)
    assert received_actions()[3:] == approx([2.0, 1.9, 1.7, 1.5])


def test_the_policy_acts_on_float64_observations_as_float32(tmp_path, monkeypatch):
    check_the_actor_acts_on_float64_observations_as_float32(sac, "sample", monkeypatch, tmp_path)


def test_the_loop_gives_the_agent_its_scale_batches_and_steps(tmp_path, monkeypatch):
    # BoxZeroToFour-v0's actions lie in [0, 4]: the actor's scale, half the range, is 2.
    # 2 environments, 12 steps, learning from step 6 with --gradient-steps 2: the vector
    # steps from global steps 0, 2 and 4 act at random, those from 6, 8 and 10 with the
    # policy's sample (the stand-in's a = 0.1 s at s = 0, 1, 2, in both environments); after
    # the steps that reach 6, 8, 10 and 12 two updates each, 8, each on --batch-size 5
    # transitions of a ring of --buffer-size 8 rows (not the budget's 12), each on a batch
    # of its own drawn just before it (8 draws, not one a vector step replayed twice). The
    # networks are --hidden-size 8 wide.
    made, scales, batches = [], [], []
    buffer, update = sac.ReplayBuffer, sac.Agent.update
    draws = spy_on(monkeypatch, buffer, "sample", lambda self, batch_size: batch_size)

    def spy_buffer(capacity, obs_dim, action_dim, device):
        made.append((capacity, obs_dim, action_dim))
        return buffer(capacity, obs_dim, action_dim, device)

    def spy_actor(obs_dim, action_dim, hidden_size, action_scale):
        scales.append((hidden_size, np.asarray(action_scale).tolist()))
        return StandInActor()

    def spy_update(self, obs, actions, rewards, terminated, next_obs):
        batches.append((rewards.shape, len(draws)))  # the draws so far
        return update(self, obs, actions, rewards, terminated, next_obs)

    stored = spy_on_acting(sac, monkeypatch)
    monkeypatch.setattr(sac, "ReplayBuffer", spy_buffer)
    monkeypatch.setattr(sac, "Actor", spy_actor)
    monkeypatch.setattr(sac.Agent, "update", spy_update)
    agents = spy_on(monkeypatch, sac, "train", lambda args, agent, *rest: agent)
    seeds, resets = spy_on_seeds(monkeypatch, sac)
    sac.main(sac.Args(env_id="BoxZeroToFour-v0", total_timesteps=12, num_envs=2,
                      learning_starts=6, gradient_steps=2, buffer_size=8, batch_size=5,
                      hidden_size=8, seed=7, eval_episodes=0, learning_rate=0.004,
                      critic_learning_rate=0.002, output_dir=str(tmp_path)))
    assert seeds == [7] and resets == [7]  # torch's and the training environments' seed
    assert scales == [(8, [2.0])] and made == [(8, 1, 1)] and draws == [5] * 8
    assert batches == [((5,), k) for k in range(1, 9)]  # update k after draw k
    (agent,) = agents  # the critics --hidden-size wide too
    assert {net.net[0].out_features for net in (agent.critic1, agent.critic2, agent.critic1_target,
                                                agent.critic2_target)} == {8}
    # and its rates: --critic-learning-rate the critics' and the temperature's, 0.002, and
    # --learning-rate the actor's, 0.004
    assert [o.param_groups[0]["lr"] for o in (agent.critic_optimizer, agent.actor_optimizer,
                                              agent.alpha_optimizer)] == [0.002, 0.004, 0.002]
    assert [a for _, a in stored[6:]] == approx([0.0, 0.0, 0.1, 0.1, 0.2, 0.2])
    assert all(a not in (0.0, 0.1, 0.2) for _, a in stored[:6])  # uniform draws


def test_threads_reaches_torch_on_the_cpu(tmp_path, monkeypatch):
    # --threads 3, not the default 1: torch is told once, on the CPU (the spy keeps this
    # process's own thread count as it is); --seed 7 seeds the training environments and
    # the final evaluation's at 7 + 100,000
    calls = []
    monkeypatch.setattr(torch, "set_num_threads", calls.append)
    _, resets = spy_on_seeds(monkeypatch, sac)
    sac.main(sac.Args(env_id="BoxZeroToFour-v0", total_timesteps=6, learning_starts=3,
                      batch_size=2, hidden_size=8, threads=3, cuda=False, seed=7,
                      eval_episodes=2, output_dir=str(tmp_path)))
    assert calls == [3] and resets == [7, 100_007]


# ---------------------------------------------------------------------------------------
# Episode ends through the whole loop: environments whose observation counts their steps
# and whose episodes end after 3 steps, by a time limit (truncated) or by termination.
# ---------------------------------------------------------------------------------------
@pytest.mark.parametrize("env_id, terminated", [("BoxCountToThree-v0", False),
                                                ("BoxTerminateAtThree-v0", True)])
def test_episode_ends_store_the_true_final_observation(env_id, terminated, tmp_path, monkeypatch):
    args = filled(env_id=env_id, total_timesteps=12, num_envs=2, learning_starts=6,
                    batch_size=16, hidden_size=8, eval_episodes=1, output_dir=str(tmp_path))
    summary = check_episode_ends(sac, "sac_target", monkeypatch, args, terminated)
    assert summary["eval_return_mean"] == 3.0


# ---------------------------------------------------------------------------------------
# Runs end to end
# ---------------------------------------------------------------------------------------
TINY = dict(env_id="Pendulum-v1", total_timesteps=600, learning_starts=200, batch_size=32,
            hidden_size=16, log_interval=200)


@pytest.mark.slow  # a smoke run: a whole tiny run and every file it writes
def test_smoke_run_logs_sacs_diagnostics_and_its_model_evaluates(tmp_path):
    args = filled(**TINY, eval_episodes=2, save_model=True, output_dir=str(tmp_path / "train"))
    summary = sac.main(args)
    (path,) = (tmp_path / "train").iterdir()
    episodes, updates = read_csv(path / "episodes.csv"), read_csv(path / "updates.csv")
    # 600 Pendulum steps are 3 episodes of 200; a row of updates.csv every 200 steps once
    # learning started at step 200: at 200, 400 and 600, with sac.py's own columns
    assert [e["episode_length"] for e in episodes] == ["200"] * 3
    assert [u["global_step"] for u in updates] == ["200", "400", "600"]
    own = ["critic1_loss", "critic2_loss", "q1_mean", "actor_loss", "entropy", "alpha"]
    assert list(updates[0]) == ["global_step", "wall_time", "sps", *own]
    assert all(math.isfinite(float(v)) for u in updates for v in u.values())
    alphas = [float(u["alpha"]) for u in updates]
    assert alphas[0] < 0.1 and alphas[-1] < alphas[0]  # from --alpha 0.1, the entropy is high
    assert summary["eval_return_mean"] < 0  # Pendulum's costs
    # evaluated at the default --hidden-size 64, the checkpoint's 16 comes from model.pt
    # (MODEL_FLAGS): the same policy on the same evaluation episodes
    evaluated = sac.main(sac.Args(eval_checkpoint=str(path / "model.pt"), eval_episodes=2,
                                  output_dir=str(tmp_path / "eval")))
    assert evaluated["eval_return_mean"] == summary["eval_return_mean"]
    assert sac.MODEL_FLAGS == ("hidden_size",)


def test_the_checkpoint_keeps_each_learned_network_under_its_own_name(tmp_path, monkeypatch):
    # model.pt holds the actor and the two critics, each under its own name, not the target
    # critics (updates.csv's alpha column keeps the temperature). Training stands in: it fills
    # weights a sum tells apart, the actor 3 everywhere, critic 1 ones, critic 2 twos.
    monkeypatch.setattr(sac, "train", lambda args, agent, *rest: fill_with_constants(
        (agent.actor, 3.0), (agent.critic1, 1.0), (agent.critic2, 2.0),
        (agent.critic1_target, 5.0), (agent.critic2_target, 5.0)))
    sac.main(sac.Args(env_id="BoxZeroToFour-v0", hidden_size=8, save_model=True,
                      eval_episodes=0, output_dir=str(tmp_path)))
    state, total = saved_sums(next(tmp_path.glob("*/model.pt")), ("actor", "critic1", "critic2"))
    # A critic of 1 observation + 1 action, 8 hidden: (2*8 + 8) + (8*8 + 8) + (8*1 + 1)
    #   = 24 + 72 + 9 = 105 weights: critic 1 sums to 105 * 1 = 105, critic 2 to 105 * 2 = 210.
    # The actor (mu and log sigma out): (1*8 + 8) + (8*8 + 8) + (8*2 + 2) = 16 + 72 + 18 = 106
    #   weights of 3 = 318, plus its action_scale buffer [2.0] (half of [0, 4]): 320.
    assert total == {"actor": approx(320.0), "critic1": approx(105.0), "critic2": approx(210.0)}
    assert sorted(state) == ["actor", "args", "critic1", "critic2"]
    assert state["args"]["hidden_size"] == 8


def test_each_ended_episode_is_logged_at_its_step(tmp_path):
    # my_envs:EpisodeNumberBox-v0 at --seed 0, 2 environments: environment 0 ends an episode
    # at every vector step t paying t, environment 1 one every 3 steps paying 3j = t, so each
    # episode that ends at vector step t (global step 2t) returns t, in 1 step or 3; rows of
    # updates.csv every 24 steps once learning started at 10
    importlib.import_module("my_envs")  # registers the id anew after fresh_env_module's tests
    sac.main(sac.Args(env_id="my_envs:EpisodeNumberBox-v0", seed=0, num_envs=2,
                      total_timesteps=48, learning_starts=10, batch_size=4, hidden_size=8,
                      log_interval=24, eval_episodes=0, output_dir=str(tmp_path)))
    (path,) = tmp_path.iterdir()
    expected = [(2 * t, t, length) for t in range(1, 25) for length in (1, 3)[:1 + (t % 3 == 0)]]
    assert [(int(e["global_step"]), float(e["episode_return"]), int(e["episode_length"]))
            for e in read_csv(path / "episodes.csv")] == expected
    assert [int(u["global_step"]) for u in read_csv(path / "updates.csv")] == [24, 48]


def test_stop_at_return_stops_and_records_when(tmp_path):
    # Every Pendulum return is above -100000, so the 20-episode mean reaches it as soon as
    # 20 episodes have ended: 4 environments * 200 steps * 5 rounds = 4000 steps
    summary = sac.main(sac.Args(total_timesteps=8000, num_envs=4, learning_starts=6000,
                                stop_at_return=-100000, eval_episodes=0, output_dir=str(tmp_path)))
    assert summary["solved_at_step"] == 4000 and summary["global_steps"] == 4000
    assert len(read_csv(next(tmp_path.glob("*/episodes.csv")))) == 20


def test_nan_loss_stops_cleanly(tmp_path, monkeypatch):
    monkeypatch.setattr(sac, "sac_target", lambda rewards, **k: rewards * math.nan)
    summary = sac.main(sac.Args(**{**TINY, "log_interval": 100}, output_dir=str(tmp_path)))
    (path,) = tmp_path.iterdir()
    assert summary["interrupted"] is True and summary["global_steps"] == 200
    assert read_csv(path / "updates.csv")[0]["critic1_loss"] == "nan"


def test_a_non_finite_second_critic_alone_stops_the_run(tmp_path, monkeypatch):
    # the first critic's loss finite, the second's NaN: the critics' sum is NaN, so the run
    # stops at its first row (step 200) as interrupted, as with both NaN
    update = sac.Agent.update

    def second_critic_nan(self, *batch):
        return {**update(self, *batch), "critic2_loss": math.nan}
    monkeypatch.setattr(sac.Agent, "update", second_critic_nan)
    summary = sac.main(sac.Args(**{**TINY, "log_interval": 100}, output_dir=str(tmp_path)))
    (path,) = tmp_path.iterdir()
    assert summary["interrupted"] is True and summary["global_steps"] == 200
    (row,) = read_csv(path / "updates.csv")
    assert row["critic2_loss"] == "nan" and row["critic1_loss"] != "nan"


def test_a_row_without_an_actor_step_is_no_non_finite_loss(tmp_path):
    # --policy-frequency 2 and a row every step: the critic steps at steps 200, 201, ...,
    # 210 are the 1st to the 11th, and every second one (201, 203, ..., 209) brings the
    # actor's steps. The rows of 200, 202, ..., 210 have no actor step, so their actor_loss
    # is NaN, the mean of nothing (as the log comment says), while the critics' losses are
    # finite: the run goes on to its budget, not stopped as non-finite at step 200.
    summary = sac.main(sac.Args(**{**TINY, "total_timesteps": 210, "log_interval": 1},
                                policy_frequency=2, eval_episodes=0, output_dir=str(tmp_path)))
    assert summary["interrupted"] is False and summary["global_steps"] == 210
    updates = read_csv(next(tmp_path.glob("*/updates.csv")))
    assert [int(u["global_step"]) for u in updates] == list(range(200, 211))
    assert [u["actor_loss"] == "nan" for u in updates] == [True, False] * 5 + [True]
    assert all(math.isfinite(float(u["critic1_loss"]) + float(u["critic2_loss"]))
               for u in updates)


def test_update_rows_hold_the_means_since_the_last_row_and_one_after_the_last_step(
        tmp_path, monkeypatch):
    check_the_rows_of_numbered_agent_updates(sac, tmp_path, monkeypatch)


@pytest.mark.slow  # determinism: two whole runs
def test_same_seed_gives_the_same_episodes(tmp_path):
    rows = same_seed_episodes(lambda out: sac.main(sac.Args(
        env_id="my_envs:Slider-v0", total_timesteps=200, num_envs=2, learning_starts=40,
        batch_size=16, hidden_size=8, eval_episodes=0, output_dir=out)), tmp_path)
    # 2 environments * 100 steps: 10 episodes of 20 steps, all but the first two (random
    # actions) played by the learning policy
    assert len(rows) == 10 and len({r[1] for r in rows}) == 10


def test_the_budget_is_rounded_down_to_whole_steps_of_the_environments(tmp_path):
    # --total-timesteps 1,000 with 3 environments runs 333 vector steps, 999 environment
    # steps; learning starts at 990
    summary = sac.main(sac.Args(total_timesteps=1000, num_envs=3, learning_starts=990,
                                batch_size=16, hidden_size=8, eval_episodes=0,
                                output_dir=str(tmp_path)))
    assert summary["global_steps"] == 999


def test_the_buffer_is_never_larger_than_the_budget(tmp_path, monkeypatch):
    check_the_buffer_is_never_larger_than_the_budget(sac, tmp_path, monkeypatch)


# ---------------------------------------------------------------------------------------
# Bad input of sac.py's own (check_flags, check_spaces): one line, before any training
# ---------------------------------------------------------------------------------------
@pytest.mark.parametrize("flags, message", [
    (dict(env_id="my_envs:GridWorld-v0"), "Discrete action space of shape (); sac.py needs a "
     "flat continuous (Box) one (for Discrete actions use dqn.py or ppo.py)"),
    (dict(env_id="SpinTheBits-v0"), "MultiBinary action space"),
    (dict(env_id="UnboundedCount-v0"), "unbounded actions"),
    (dict(env_id="BoxImage-v0"), "observation space of shape (2, 2); sac.py's MLPs need a flat Box"),
    (dict(num_envs=0), "--num-envs must be positive"),
    (dict(total_timesteps=500), "--learning-starts 500 leaves no step"),
    # 503 steps of 4 environments run 500: learning from 500 on would never come
    (dict(total_timesteps=503, num_envs=4), "--learning-starts 500 leaves no step of the "
     "budget, 500 steps (--total-timesteps 503 in whole steps of --num-envs 4)"),
    (dict(learning_starts=-1), "--learning-starts must be 0 or more"),
    (dict(batch_size=0), "--batch-size must be positive"),
    (dict(buffer_size=0), "--buffer-size must be positive"),
    (dict(gradient_steps=0), "--gradient-steps must be positive"),
    (dict(log_interval=0), "--log-interval must be positive"),
    (dict(threads=0), "--threads must be positive"),
    (dict(policy_frequency=0), "--policy-frequency must be positive"),
    (dict(learning_rate=0), "--learning-rate must be positive"),
    (dict(critic_learning_rate=-1e-3), "--critic-learning-rate must be positive, got -0.001"),
    (dict(alpha=0), "--alpha must be positive"),
    (dict(target_entropy=-1, autotune=False), "--target-entropy needs the learned temperature"),
    (dict(gamma=1.5), "--gamma must be in [0, 1]"),
    (dict(tau=0), "--tau must be in (0, 1]"),
])
def test_sacs_own_checks_refuse_bad_input_in_one_line(flags, message, fresh_env_module):
    args = filled(**flags)
    with pytest.raises(sac.UsageError) as error:
        sac.check_args(args)
        sac.check_spaces(args, *sac.check_env(args))
    assert message in str(error.value) and "\n" not in str(error.value)


@pytest.mark.parametrize("low, high", [(-1.0, np.inf), (-np.inf, 1.0)])
def test_an_action_space_unbounded_on_one_side_is_refused(low, high):
    # UnboundedCount-v0's actions are unbounded on both sides; each bound is checked alone
    # (planted bug of issue 72: only the low one read)
    actions = gym.spaces.Box(np.float32(low), np.float32(high), (1,))
    with pytest.raises(sac.UsageError, match="has unbounded actions"):
        sac.check_spaces(filled(), gym.spaces.Box(-1.0, 1.0, (3,)), actions)


def test_sacs_own_checks_pass_its_defaults_and_a_checkpoints_evaluation():
    # check_spaces returns what main builds the agent from: the observations' shape and the
    # action space; a checkpoint's evaluation needs no budget beyond --learning-starts
    args = filled()
    assert sac.check_spaces(args, *sac.check_env(args)) == ((3,), gym.spaces.Box(-2.0, 2.0, (1,)))
    sac.check_args(filled(total_timesteps=100, eval_checkpoint="model.pt"))
    with pytest.raises(sac.UsageError, match="--total-timesteps must be positive"):
        sac.check_args(filled(total_timesteps=0))

"""Tests of ddpg_td3.py: the math by hand, the buffer, what the update feeds the math
(networks with hand-set weights), its own hooks (check_flags, check_spaces, greedy_policy,
MODEL_FLAGS), determinism. The plumbing's behaviour is tested once, in test_plumbing.py."""
import math
import os

import gymnasium as gym
import numpy as np
import pytest
import torch
import tyro
from torch.nn.utils import parameters_to_vector

import ddpg_td3
from conftest import (BoxCountingEnv, approx, check_a_batch_of_the_written_rows,
                      check_a_batch_of_whole_transitions_2_to_6, check_episode_ends,
                      check_the_actor_acts_on_float64_observations_as_float32,
                      check_the_buffer_is_never_larger_than_the_budget,
                      check_the_random_actions_fill_minus_one_to_one, read_csv, received_actions,
                      replay_transitions, rows_after_numbered_updates, same_seed_episodes,
                      set_clock, spy_on_acting, spy_on_seeds, tensor)


def filled(**flags):
    """ddpg_td3.Args with the flags left at None taken from its continuous preset, the settings its
    defaults had before the presets, as main fills them on Pendulum-v1."""
    return ddpg_td3.fill_preset(ddpg_td3.Args(**flags), "continuous")


# ---------------------------------------------------------------------------------------
# The critic target by hand. Three transitions, gamma = 0.5, rewards 1; the second one
# terminated, the third one was cut by a time limit (truncated, so not terminated: its s'
# is the true final observation and it bootstraps like any other step).
# ---------------------------------------------------------------------------------------
REWARDS, TERMINATED = tensor(1, 1, 1), tensor(0, 1, 0)
NEXT_Q1, NEXT_Q2 = tensor(2, 4, 6), tensor(3, 1, 2)


def test_twin_target_takes_the_smaller_critic_and_stops_at_termination():
    # min(Q1', Q2') = [2, 1, 2]
    # y = [1 + 0.5*2, 1 + 0.5*0*1 (terminated), 1 + 0.5*2 (truncated: bootstraps)] = [2, 1, 2]
    y = ddpg_td3.td3_target(REWARDS, NEXT_Q1, NEXT_Q2, TERMINATED, 0.5, twin_q=True)
    assert y.tolist() == approx([2.0, 1.0, 2.0])


def test_single_critic_target_uses_q1_alone():
    # y = [1 + 0.5*2, 1 (terminated), 1 + 0.5*6] = [2, 1, 4]; next_q2 is not needed
    y = ddpg_td3.td3_target(REWARDS, NEXT_Q1, None, TERMINATED.bool(), 0.5, twin_q=False)
    assert y.tolist() == approx([2.0, 1.0, 4.0])


def test_target_with_every_step_terminated_is_the_reward():
    # gamma*(1 - 1)*anything = 0: y = r, whatever the critics say
    y = ddpg_td3.td3_target(tensor(0.5, -2), tensor(100, 100), tensor(50, 50), tensor(1, 1), 0.99)
    assert y.tolist() == approx([0.5, -2.0])


# ---------------------------------------------------------------------------------------
# Noise, bounds and soft updates
# ---------------------------------------------------------------------------------------
def test_target_smoothing_noise_stays_within_noise_clip_and_actions_within_bounds():
    torch.manual_seed(0)
    mu = tensor(-0.9, 0.0, 0.9).repeat(5000, 1).T  # [3, 5000]: three target actions
    smoothed = ddpg_td3.noisy_action(mu, sigma=1.0, noise_clip=0.5)
    noise = smoothed - mu
    assert noise.abs().max() <= 0.5 + 1e-6 and smoothed.abs().max() <= 1.0
    # sigma = 1 >> c = 0.5: the clip is reached on both sides where the bounds allow it
    assert noise[1].max() == approx(0.5) and noise[1].min() == approx(-0.5)
    assert smoothed[2].max() == 1.0 and smoothed[0].min() == -1.0  # 0.9 + 0.5 is cut to 1
    assert noise[2].max() == approx(0.1) and noise[2].min() == approx(-0.5)


def test_exploration_noise_is_not_clipped_but_actions_are():
    torch.manual_seed(0)
    mu = torch.zeros(20000, 1)
    explored = ddpg_td3.noisy_action(mu, sigma=0.3)
    assert explored.std().item() == pytest.approx(0.3, rel=0.05)
    assert explored.abs().max() <= 1.0 and (explored.abs() > 0.5).any()  # beyond TD3's clip
    assert ddpg_td3.noisy_action(mu, sigma=0.0) is mu  # no noise: DDPG's target action


def test_actions_are_scaled_to_the_bounds_of_each_dimension():
    # low + (a + 1)/2 * (high - low) with low = [0, -2], high = [4, 2]:
    #   a = [-1, 1]  -> [0 + 0*4, -2 + 1*4]   = [0, 2]
    #   a = [0, 0.5] -> [0 + 0.5*4, -2 + 0.75*4] = [2, 1]
    space = gym.spaces.Box(np.array([0, -2], np.float32), np.array([4, 2], np.float32))
    actions = ddpg_td3.to_env_action(tensor([-1, 1], [0, 0.5]), space)
    assert actions.tolist() == [[0.0, 2.0], [2.0, 1.0]]


def linear(weight, bias):
    """nn.Linear(1, 2) with the given weight [2] and bias [2]."""
    layer = torch.nn.Linear(1, 2)
    with torch.no_grad():
        layer.weight.copy_(tensor(*weight)[:, None])
        layer.bias.copy_(tensor(*bias))
    return layer


def test_soft_update_by_hand():
    target, source = linear([0, 10], [4, -4]), linear([2, 20], [8, 0])
    # theta' <- 0.25*theta + 0.75*theta':
    #   weight [0.25*2 + 0.75*0, 0.25*20 + 0.75*10] = [0.5, 12.5]
    #   bias   [0.25*8 + 0.75*4, 0.25*0 + 0.75*(-4)] = [5, -3]
    ddpg_td3.soft_update(target, source, 0.25)
    assert target.weight[:, 0].tolist() == [0.5, 12.5] and target.bias.tolist() == [5.0, -3.0], (
        "soft_update changes target_net's parameters in place")
    assert source.weight[:, 0].tolist() == [2.0, 20.0] and source.bias.tolist() == [8.0, 0.0], (
        "source_net is only read: its parameters stay as they were")
    assert target.weight.grad is None, (  # no gradient was recorded
        "the update is no training step: it runs under torch.no_grad() and records no gradient")
    ddpg_td3.soft_update(target, source, 1.0)  # tau = 1 copies the source
    assert target.weight[:, 0].tolist() == [2.0, 20.0] and target.bias.tolist() == [8.0, 0.0]


# ---------------------------------------------------------------------------------------
# Networks
# ---------------------------------------------------------------------------------------
def test_actor_outputs_are_within_minus_one_and_one():
    actor = ddpg_td3.Actor(3, 2, 8)
    out = actor(torch.randn(100, 3) * 100)
    assert out.shape == (100, 2) and out.abs().max() <= 1.0


@pytest.mark.parametrize("twin_q", [True, False])
def test_td3_has_two_independent_critics_ddpg_one_and_targets_start_as_copies(twin_q):
    torch.manual_seed(0)
    nets = ddpg_td3.Networks(3, 2, 8, twin_q)
    obs, actions = torch.randn(5, 3), torch.randn(5, 2)
    assert nets.qf1(obs, actions).shape == (5,)
    assert (nets.qf2 is not None) == twin_q and len(nets.critics()) == (2 if twin_q else 1)
    if twin_q:  # two critics initialized apart, so they disagree
        assert not torch.allclose(nets.qf1(obs, actions), nets.qf2(obs, actions))
    for target, learned in [(nets.actor_target, nets.actor), *nets.critics()]:
        assert torch.equal(parameters_to_vector(target.parameters()),
                           parameters_to_vector(learned.parameters()))
        assert not any(p.requires_grad for p in target.parameters())


# ---------------------------------------------------------------------------------------
# The replay buffer
# ---------------------------------------------------------------------------------------
def test_buffer_wraps_around_and_keeps_constant_memory():
    buffer = ddpg_td3.ReplayBuffer(5, obs_dim=2, action_dim=1, device="cpu")
    assert buffer.table.shape == (5, 2 + 1 + 1 + 1 + 2)
    buffer.add(*replay_transitions(0, 3))
    assert (buffer.pos, buffer.size) == (3, 3)
    check_a_batch_of_the_written_rows(buffer)
    buffer.add(*replay_transitions(3, 4))  # 3, 4 fill rows 3, 4; 5, 6 overwrite rows 0, 1
    assert (buffer.pos, buffer.size) == (2, 5) and buffer.table.shape == (5, 7)
    assert buffer.table[:, 3].tolist() == [5, 6, 2, 3, 4]  # the rewards: the newest five


def test_buffer_samples_whole_transitions_of_the_stored_ones():
    torch.manual_seed(0)
    buffer = ddpg_td3.ReplayBuffer(5, 2, 1, "cpu")
    buffer.add(*replay_transitions(0, 7))  # keeps 2..6
    check_a_batch_of_whole_transitions_2_to_6(buffer)


# ---------------------------------------------------------------------------------------
# Flags
# ---------------------------------------------------------------------------------------
def test_algo_sets_the_three_improvements_and_each_flag_overrides_it():
    resolve = lambda argv: ddpg_td3.resolve_algo(tyro.cli(ddpg_td3.Args, args=argv))
    td3, ddpg = resolve([]), resolve(["--algo", "ddpg"])
    assert (td3.twin_q, td3.target_policy_noise, td3.policy_delay) == (True, 0.2, 2)
    assert (ddpg.twin_q, ddpg.target_policy_noise, ddpg.policy_delay) == (False, 0.0, 1)
    assert ddpg_td3.algorithm_name(td3) == "td3" and ddpg_td3.algorithm_name(ddpg) == "ddpg"
    one_on = resolve(["--algo", "ddpg", "--twin-q", "True"])
    assert (one_on.twin_q, one_on.target_policy_noise, one_on.policy_delay) == (True, 0.0, 1)
    assert ddpg_td3.algorithm_name(one_on) == "ddpg+twin_q"
    one_off = resolve(["--twin-q", "False", "--policy-delay", "3"])
    assert (one_off.twin_q, one_off.target_policy_noise, one_off.policy_delay) == (False, 0.2, 3)
    assert ddpg_td3.algorithm_name(one_off) == "ddpg+target_policy_noise+policy_delay"
    smoothing_off = resolve(["--target-policy-noise", "0"])  # 0 given is not "not given"
    assert ddpg_td3.algorithm_name(smoothing_off) == "ddpg+twin_q+policy_delay"


# ---------------------------------------------------------------------------------------
# What the update feeds the math. Networks with hand-set weights, each a line that is easy
# to tell apart from the others (obs_dim 1, action_dim 1):
#     actor        mu(s)   = -0.5            actor_target  mu'(s)   = 0.5
#     qf1          Q1(s, a) = 2a + 1         qf1_target    Q1'(s, a) = 10a
#     qf2          Q2(s, a) = -4a + 1        qf2_target    Q2'(s, a) = 20 - 10a
# ---------------------------------------------------------------------------------------
def hand_set(net, slope=0.0, intercept=0.0):
    """Weights for an mlp (Linear, ReLU, Linear, ReLU, Linear) with one output: out = slope
    * x + intercept for its last input x >= -1 (a critic's action). The first hidden unit
    carries relu(x + 1) = x + 1 through both ReLUs, the output is slope * (x + 1) +
    (intercept - slope); every other weight is 0 (with slope 0, every weight is)."""
    first, _, second, _, last = net
    with torch.no_grad():
        for layer in (first, second, last):
            layer.weight.zero_()
            layer.bias.zero_()
        if slope:
            first.weight[0, -1], first.bias[0], second.weight[0, 0] = 1.0, 1.0, 1.0
            last.weight[:, 0] = slope
        last.bias.fill_(intercept - slope)


def hand_nets(twin_q):
    nets = ddpg_td3.Networks(1, 1, 4, twin_q)
    hand_set(nets.actor.net, 0, math.atanh(-0.5))  # tanh(atanh(-0.5)) = -0.5
    hand_set(nets.actor_target.net, 0, math.atanh(0.5))
    for critic, slope, intercept in ((nets.qf1, 2, 1), (nets.qf2, -4, 1),
                                     (nets.qf1_target, 10, 0), (nets.qf2_target, -10, 20)):
        if critic is not None:
            hand_set(critic.net, slope, intercept)
    return nets


def hand_batch(n=64):
    """n transitions with s = a = s' = 0 and rewards 1, 2, 3, 4, 1, ...; those of reward 2
    terminated."""
    rewards = torch.arange(n) % 4 + 1.0
    return torch.zeros(n, 1), torch.zeros(n, 1), rewards, (rewards == 2).float(), torch.zeros(n, 1)


def optimizers(nets, actor_lr=1e-3, critic_lr=1e-3):
    """(critic optimizer, actor optimizer) as train() makes them: Adam on both critics, Adam
    on the actor."""
    return (torch.optim.Adam([p for _, critic in nets.critics() for p in critic.parameters()],
                             lr=critic_lr), torch.optim.Adam(nets.actor.parameters(), lr=actor_lr))


def one_update(nets, batch, gradient_step=1, actor_lr=1e-3, critic_lr=1e-3, **flags):
    """ddpg_td3.update on the batch with fresh optimizers; returns its losses."""
    args = ddpg_td3.resolve_algo(filled(**flags))
    return ddpg_td3.update(batch, nets, *optimizers(nets, actor_lr, critic_lr), args,
                           gradient_step)


@pytest.fixture
def target_calls(monkeypatch):
    """The arguments and the result of every call of td3_target."""
    calls, original = [], ddpg_td3.td3_target

    def spy(*args, **kwargs):
        calls.append((args, kwargs, original(*args, **kwargs)))
        return calls[-1][2]
    monkeypatch.setattr(ddpg_td3, "td3_target", spy)
    return calls


def test_ddpg_target_takes_the_target_actor_and_the_target_critic(target_calls):
    one_update(hand_nets(twin_q=False), hand_batch(), algo="ddpg", gamma=0.5,
               exploration_noise=0.3)
    (_, k, y), = target_calls  # td3_target is called with keywords
    rewards, next_q1, next_q2, terminated, gamma, twin_q = (
        k[name] for name in ("rewards", "next_q1", "next_q2", "terminated", "gamma", "twin_q"))
    # a' = mu'(s') = 0.5 with no noise at all (the exploration noise does not reach it), so
    # Q1'(s', a') = 10 * 0.5 = 5 (the online pair would give Q1(s', mu(s')) = 2*(-0.5) + 1 = 0,
    # the target critic on the online actor -5, the online critic on a' 2)
    assert next_q1.tolist() == [5.0] * 64 and next_q2 is None and twin_q is False
    assert rewards.tolist()[:4] == [1, 2, 3, 4] and terminated.tolist()[:4] == [0, 1, 0, 0]
    # y = r + 0.5 * (1 - terminated) * 5 = [1 + 2.5, 2, 3 + 2.5, 4 + 2.5]
    assert gamma == 0.5 and y.tolist() == [3.5, 2.0, 5.5, 6.5] * 16


def test_td3_target_smooths_the_target_actor_and_takes_the_smaller_target_critic(
        target_calls):
    torch.manual_seed(0)
    one_update(hand_nets(twin_q=True), hand_batch(), algo="td3", gamma=0.5,
               exploration_noise=0.0, target_policy_noise=0.2, noise_clip=0.05)
    (_, k, y), = target_calls
    rewards, next_q1, next_q2, terminated, gamma, twin_q = (
        k[name] for name in ("rewards", "next_q1", "next_q2", "terminated", "gamma", "twin_q"))
    # a' = 0.5 + clip(eps', -0.05, 0.05), eps' ~ N(0, 0.2^2): a' in [0.45, 0.55], and as
    # |eps'| > 0.05 four times in five, both ends are reached in 64 draws. Then
    # Q1'(s', a') = 10a' in [4.5, 5.5] and Q2'(s', a') = 20 - 10a': both critics see the same
    # a', so Q1' + Q2' = 20, and Q1' < Q2' is the smaller.
    assert twin_q is True and gamma == 0.5
    assert (next_q1 >= 4.5 - 1e-5).all() and (next_q1 <= 5.5 + 1e-5).all()
    assert torch.isclose(next_q1, tensor(4.5)).any() and torch.isclose(next_q1, tensor(5.5)).any()
    assert torch.allclose(next_q1 + next_q2, torch.full((64,), 20.0))
    # y = r + 0.5 * (1 - terminated) * Q1'
    assert torch.allclose(y, rewards + 0.5 * (1 - terminated) * next_q1)
    assert y[1::4].tolist() == [2.0] * 16  # the terminated ones: the reward alone


@pytest.mark.parametrize("algo", ["ddpg", "td3"])
def test_an_actor_step_on_a_fixed_critic_raises_q(algo):
    nets = hand_nets(twin_q=algo == "td3")
    hand_set(nets.actor.net, 0, 0.0)  # every weight of the actor 0: mu(s) = tanh(0) = 0
    obs = hand_batch()[0]
    critics_before = [parameters_to_vector(c.parameters()) for _, c in nets.critics()]
    # gradient step 2: an actor step for policy delays 1 and 2; the critics do not move (lr 0)
    losses = one_update(nets, hand_batch(), gradient_step=2, actor_lr=0.1, critic_lr=0.0,
                        algo=algo)
    # Before: Q1(s, mu(s)) = 2*0 + 1 = 1, so the actor loss is -1. Only the actor's last bias b
    # has a gradient (every other weight multiplies a 0): d(-Q1)/db = -2 * (1 - tanh(0)^2) = -2,
    # and Adam's first step moves b by lr * g / |g|: b = 0.1, mu = tanh(0.1) = 0.0997 and
    # Q1 = 1 + 2 * tanh(0.1) = 1.1993 > 1. (Q2 = -4a + 1 would have pushed mu the other way.)
    assert losses["actor_loss"] == approx(-1.0)
    assert nets.actor(obs)[:, 0].tolist() == approx([math.tanh(0.1)] * 64)
    assert nets.qf1(obs, nets.actor(obs)).tolist() == approx([1 + 2 * math.tanh(0.1)] * 64)
    for before, (_, critic) in zip(critics_before, nets.critics()):
        assert torch.equal(before, parameters_to_vector(critic.parameters()))


def random_batch(n=32):
    gen = torch.Generator().manual_seed(1)
    return (torch.randn(n, 3, generator=gen), torch.rand(n, 1, generator=gen) * 2 - 1,
            torch.randn(n, generator=gen), torch.zeros(n), torch.randn(n, 3, generator=gen))


def vector(module):
    return parameters_to_vector(module.parameters()).clone()


@pytest.mark.parametrize("tau", [1.0, 0.25])
def test_the_targets_move_tau_of_the_way_to_the_learned_networks(tau):
    torch.manual_seed(0)
    nets = ddpg_td3.Networks(3, 1, 8, twin_q=True)
    pairs = [(nets.actor_target, nets.actor), *nets.critics()]
    before = [vector(target) for target, _ in pairs]
    one_update(nets, random_batch(), gradient_step=2, actor_lr=0.1, critic_lr=0.1, tau=tau)
    # theta' <- tau * theta + (1 - tau) * theta', theta the learned network after its step:
    # tau = 1 copies it, tau = 0.25 moves a quarter of the way
    for (target, learned), old in zip(pairs, before):
        assert not torch.equal(vector(learned), old)  # the learned network did move
        assert torch.allclose(vector(target), tau * vector(learned) + (1 - tau) * old, atol=1e-6)


def test_policy_delay_counts_gradient_steps():
    torch.manual_seed(0)
    nets = ddpg_td3.Networks(3, 1, 8, twin_q=True)
    args, optimizer_pair = ddpg_td3.resolve_algo(filled(policy_delay=3)), optimizers(nets)
    watched = [nets.actor, nets.actor_target, nets.qf1_target, nets.qf2_target, nets.qf1,
               nets.qf2]
    changed = []
    for step in range(1, 7):
        before = [vector(m) for m in watched]
        losses = ddpg_td3.update(random_batch(), nets, *optimizer_pair, args, step)
        changed.append([not torch.equal(b, vector(m)) for b, m in zip(before, watched)])
        actor_step = {"actor_loss"} if step % 3 == 0 else set()
        assert set(losses) == {"critic_loss", "q_mean", *actor_step}
        assert all(math.isfinite(v) for v in losses.values())
    # the actor and the three targets move on the 3rd and 6th critic step only; the critics
    # on every one
    quiet, all_move = [False] * 4 + [True] * 2, [True] * 6
    assert changed == [quiet, quiet, all_move, quiet, quiet, all_move]


def test_ddpg_has_one_critic_and_updates_the_actor_every_step():
    torch.manual_seed(0)
    nets = ddpg_td3.Networks(3, 1, 8, twin_q=False)
    assert nets.qf2 is None and nets.qf2_target is None
    for step in (1, 2):
        before = vector(nets.actor)
        assert "actor_loss" in one_update(nets, random_batch(), gradient_step=step, algo="ddpg")
        assert not torch.equal(before, vector(nets.actor))


def test_update_rows_hold_the_means_since_the_last_row(tmp_path, monkeypatch):
    # update() stands in with losses that say which gradient step n made them: critic n,
    # q_mean -n, and on every 3rd step an actor step of loss 10n. Rows at 4, 6, 8, 10 and 11
    # (rows_after_numbered_updates): critic 1, 2.5, 4.5, 6.5, 8; actor NaN (none), 30, NaN,
    # 60, NaN.
    def losses(batch, nets, critic_optimizer, actor_optimizer, args, n):
        return {"critic_loss": n, "q_mean": -n, **({"actor_loss": 10 * n} if n % 3 == 0 else {})}

    monkeypatch.setattr(ddpg_td3, "update", losses)
    rows = rows_after_numbered_updates(ddpg_td3, tmp_path)
    assert [(r["global_step"], r["critic_loss"], r["q_mean"], r["actor_loss"], r["gradient_steps"])
            for r in rows] == [("4", "1.0", "-1.0", "nan", "1"), ("6", "2.5", "-2.5", "30.0", "3"),
                               ("8", "4.5", "-4.5", "nan", "5"), ("10", "6.5", "-6.5", "60.0", "7"),
                               ("11", "8.0", "-8.0", "nan", "8")]


def test_the_actor_acts_on_float64_observations_as_float32(tmp_path, monkeypatch):
    check_the_actor_acts_on_float64_observations_as_float32(ddpg_td3, "forward", monkeypatch,
                                                            tmp_path)


# ---------------------------------------------------------------------------------------
# How the loop acts: a stand-in online actor and target actor, and a stand-in "noise"
# ---------------------------------------------------------------------------------------
class LineActor(torch.nn.Module):
    """mu(s) = slope * s; its one parameter enters with weight 0, so actor steps never move it."""

    def __init__(self, slope):
        super().__init__()
        self.slope, self.w = slope, torch.nn.Parameter(torch.zeros(1))

    def forward(self, obs):
        return self.slope * obs[:, :1] + 0 * self.w


def test_the_evaluation_plays_mu_without_noise_scaled_to_the_bounds():
    # BoxZeroToFour-v0 (actions in [0, 4], observations 0, 1, 2, cut after 3 steps) with
    # mu(s) = 0.1 s: the greedy actions 0, 0.1, 0.2 reach the environment as 2 + 2a = 2, 2.2,
    # 2.4 in each of the 2 episodes (unscaled they would arrive as 0, 0.1, 0.2)
    received_actions().clear()
    returns = ddpg_td3.evaluate(filled(env_id="BoxZeroToFour-v0", eval_episodes=2),
                                {"actor": LineActor(0.1)})
    assert returns.tolist() == [3.0, 3.0]
    assert received_actions() == approx([2.0, 2.0, 2.2, 2.2, 2.4, 2.4])


def test_the_loop_explores_around_the_online_actor_scaled_to_the_bounds(tmp_path, monkeypatch):
    class HandNetworks(ddpg_td3.Networks):  # online mu(s) = 0.1 s, target mu'(s) = -0.3 s
        def __init__(self, *args):
            super().__init__(*args)
            self.actor, self.actor_target = LineActor(0.1), LineActor(-0.3)

    sigmas = []

    def shifted(actions, sigma, noise_clip=math.inf):  # "noise" of +sigma, clipped as a sum
        sigmas.append(sigma)
        return (actions + sigma).clamp(-1.0, 1.0)

    monkeypatch.setattr(ddpg_td3, "Networks", HandNetworks)
    monkeypatch.setattr(ddpg_td3, "noisy_action", shifted)
    stored = spy_on_acting(ddpg_td3, monkeypatch)
    ddpg_td3.main(ddpg_td3.Args(env_id="BoxZeroToFour-v0", total_timesteps=9, learning_starts=3,
                                exploration_noise=0.3, batch_size=4, hidden_size=8,
                                eval_episodes=0, output_dir=str(tmp_path)))
    # Steps 0-2 act uniformly at random; from step 3 on, the online actor at s = 0, 1, 2, 0,
    # 1, 2 plus the exploration "noise" 0.3: a = 0.1 s + 0.3 (the target actor would give
    # -0.3 s + 0.3), stored as it is, while the environment gets 0 + (a + 1) / 2 * 4 = 2 + 2a.
    assert [s for s, _ in stored] == [0, 1, 2] * 3
    assert [a for _, a in stored[3:]] == approx([0.3, 0.4, 0.5] * 2)
    assert received_actions()[3:] == approx([2.6, 2.8, 3.0] * 2)
    assert received_actions() == approx([2 + 2 * a for _, a in stored])  # random ones too
    assert all(-1 <= a <= 1 for _, a in stored[:3]) and len({a for _, a in stored[:3]}) == 3
    # 6 explorations with sigma = 0.3; the 7 updates (after global steps 3 to 9) each smooth
    # their target action with TD3's sigma' = 0.2
    assert sigmas.count(0.3) == 6 and sigmas.count(0.2) == 7 and len(sigmas) == 13


def test_the_random_actions_before_learning_starts_fill_the_whole_of_minus_one_to_one(
        tmp_path, monkeypatch):
    check_the_random_actions_fill_minus_one_to_one(ddpg_td3, tmp_path, monkeypatch)


def test_only_the_target_smoothing_noise_is_clipped_to_noise_clip(tmp_path, monkeypatch):
    # 6 steps from step 3 on (the defaults' TD3): the updates after global steps 3, 4, 5 and 6
    # smooth their target action with sigma' 0.2 clipped to --noise-clip 0.05; the steps from
    # global steps 3, 4 and 5 explore with sigma 0.3 and no clip on the noise (inf), in the
    # order update, explore, update, explore, update, explore, update.
    calls, noisy = [], ddpg_td3.noisy_action

    def spy_noisy(actions, sigma, noise_clip=math.inf):
        calls.append((sigma, noise_clip))
        return noisy(actions, sigma, noise_clip)

    monkeypatch.setattr(ddpg_td3, "noisy_action", spy_noisy)
    ddpg_td3.main(ddpg_td3.Args(env_id="BoxZeroToFour-v0", total_timesteps=6, learning_starts=3,
                                exploration_noise=0.3, noise_clip=0.05, batch_size=4,
                                hidden_size=8, eval_episodes=0, output_dir=str(tmp_path)))
    assert calls == [(0.2, 0.05), (0.3, math.inf)] * 3 + [(0.2, 0.05)]


def test_the_loop_gives_the_update_its_batches_steps_optimizers_and_buffer(tmp_path,
                                                                          monkeypatch):
    # 2 environments, 12 steps, learning from step 6 with --gradient-steps 2: the vector steps
    # from global steps 0, 2 and 4 act at random, those from 6, 8 and 10 with the actor (one
    # exploration noise each, sigma 0.3; the updates' smoothing noise is TD3's 0.2). After the
    # steps that reach 6, 8, 10 and 12, two updates each, numbered 1..8, each on --batch-size 5
    # transitions of a ring of --buffer-size 8 rows (not the budget's 12) of 1-D s and a, with
    # Adam at --learning-rate on the actor's weights and on both critics'.
    made, calls, sigmas = [], [], []
    buffer, update, noisy = ddpg_td3.ReplayBuffer, ddpg_td3.update, ddpg_td3.noisy_action

    def spy_buffer(capacity, obs_dim, action_dim, device):
        made.append((capacity, obs_dim, action_dim))
        return buffer(capacity, obs_dim, action_dim, device)

    def spy_update(batch, nets, critic_optimizer, actor_optimizer, args, gradient_step):
        calls.append((batch[2].shape, gradient_step, critic_optimizer, actor_optimizer, nets))
        return update(batch, nets, critic_optimizer, actor_optimizer, args, gradient_step)

    def spy_noisy(actions, sigma, noise_clip=math.inf):
        sigmas.append(sigma)
        return noisy(actions, sigma, noise_clip)

    monkeypatch.setattr(ddpg_td3, "ReplayBuffer", spy_buffer)
    monkeypatch.setattr(ddpg_td3, "update", spy_update)
    monkeypatch.setattr(ddpg_td3, "noisy_action", spy_noisy)
    seeds, resets = spy_on_seeds(monkeypatch, ddpg_td3)
    ddpg_td3.main(ddpg_td3.Args(env_id="BoxCountToThree-v0", total_timesteps=12, num_envs=2,
                                learning_starts=6, gradient_steps=2, buffer_size=8, batch_size=5,
                                learning_rate=3e-3, exploration_noise=0.3, hidden_size=8,
                                seed=7, eval_episodes=0, output_dir=str(tmp_path)))
    assert seeds == [7] and resets == [7]  # torch's and the training environments' seed
    assert made == [(8, 1, 1)]
    assert [c[1] for c in calls] == list(range(1, 9)) and all(c[0] == (5,) for c in calls)
    assert sigmas.count(0.3) == 3 and sigmas.count(0.2) == 8
    _, _, critic_optimizer, actor_optimizer, nets = calls[0]
    params = lambda optimizer: {id(p) for g in optimizer.param_groups for p in g["params"]}
    assert params(critic_optimizer) == {id(p) for p in [*nets.qf1.parameters(),
                                                        *nets.qf2.parameters()]}
    assert params(actor_optimizer) == {id(p) for p in nets.actor.parameters()}
    assert critic_optimizer.param_groups[0]["lr"] == actor_optimizer.param_groups[0]["lr"] == 3e-3
    assert {net.net[0].out_features for net in (nets.actor, nets.qf1, nets.qf2, nets.actor_target,
                                                nets.qf1_target, nets.qf2_target)} == {8}


# ---------------------------------------------------------------------------------------
# Which network reads which observation, and which optimizer steps on which gradient.
# Stand-ins whose outputs say what they read (obs_dim 1, action_dim 1):
#     actor   mu(s) = w s, w = 0.1 learned     actor_target  mu'(s) = -0.1 s
#     qf1     Q1(s, a) = c + s + 10a, c = 0    qf1_target    Q1'(s, a) = 2s + 10a
#     qf2     Q2(s, a) = c + s + 10a, c = 1    qf2_target    Q2'(s, a) = 3s + 10a
# on a batch of two: s = [1, 2], a = [0.5, -0.5], r = [1, 1], terminated [0, 1], s' = [3, 5].
# ---------------------------------------------------------------------------------------
class SlopeActor(torch.nn.Module):
    """mu(s) = w s with w a parameter, which actor steps move."""

    def __init__(self, w):
        super().__init__()
        self.w = torch.nn.Parameter(tensor(w))

    def forward(self, obs):
        return self.w * obs[:, :1]


class LineCritic(torch.nn.Module):
    """Q(s, a) = c + k s + 10 a with c a parameter, which critic steps move."""

    def __init__(self, c, k):
        super().__init__()
        self.c, self.k = torch.nn.Parameter(tensor(c)), k

    def forward(self, obs, actions):
        return self.c + self.k * obs[:, 0] + 10 * actions[:, 0]


def stand_in_nets(twin_q):
    nets = ddpg_td3.Networks(1, 1, 4, twin_q)
    nets.actor, nets.actor_target = SlopeActor(0.1), LineActor(-0.1)
    nets.qf1, nets.qf1_target = LineCritic(0.0, 1), LineCritic(0.0, 2)
    if twin_q:
        nets.qf2, nets.qf2_target = LineCritic(1.0, 1), LineCritic(0.0, 3)
    return nets


STAND_IN_BATCH = (tensor([1], [2]), tensor([0.5], [-0.5]), tensor(1, 1), tensor(0, 1),
                  tensor([3], [5]))


def test_threads_reach_torch_and_the_seed_the_final_evaluation(tmp_path, monkeypatch):
    # --threads 3, not the default 1: torch is told once, on the CPU (the spy keeps this
    # process's own thread count as it is); --seed 7 seeds the training environments and
    # the final evaluation's at 7 + 100,000
    threads = []
    monkeypatch.setattr(torch, "set_num_threads", threads.append)
    _, resets = spy_on_seeds(monkeypatch, ddpg_td3)
    ddpg_td3.main(ddpg_td3.Args(env_id="BoxZeroToFour-v0", total_timesteps=6, learning_starts=3,
                                batch_size=2, hidden_size=8, threads=3, cuda=False, seed=7,
                                eval_episodes=2, output_dir=str(tmp_path)))
    assert threads == [3] and resets == [7, 100_007]


def test_every_evaluation_plays_the_online_actor_not_its_target(tmp_path, monkeypatch):
    # --eval-every 3 over 6 steps evaluates at steps 3 and 6, then the final evaluation: all
    # three play nets.actor, the network the updates step, never nets.actor_target (a slow
    # copy of it; round seven's plant of it was seen only through a checkpoint's return)
    made, played = [], []
    networks, evaluate = ddpg_td3.Networks, ddpg_td3.evaluate

    def spy_networks(*args):
        made.append(networks(*args))
        return made[-1]

    def spy_evaluate(args, models, *rest, **kwargs):
        played.append(models["actor"])
        return evaluate(args, models, *rest, **kwargs)
    monkeypatch.setattr(ddpg_td3, "Networks", spy_networks)
    monkeypatch.setattr(ddpg_td3, "evaluate", spy_evaluate)
    ddpg_td3.main(ddpg_td3.Args(env_id="BoxZeroToFour-v0", total_timesteps=6, learning_starts=3,
                                batch_size=2, hidden_size=8, eval_every=3, eval_episodes=1,
                                output_dir=str(tmp_path)))
    (nets,) = made
    assert len(played) == 3 and all(actor is nets.actor for actor in played)


def test_the_update_reads_the_critics_at_s_and_the_target_networks_at_s_prime(target_calls):
    # TD3 without smoothing noise, gamma 0.5, learning rates 0 (nothing moves), gradient
    # step 2 (an actor step too):
    #   a' = mu'(s') = -0.1 * [3, 5] = [-0.3, -0.5]
    #   Q1'(s', a') = [6 - 3, 10 - 5] = [3, 5];  Q2'(s', a') = [9 - 3, 15 - 5] = [6, 10]
    #   (at s, Q2'(s, a') = [3 - 3, 6 - 5] = [0, 1] would be the smaller)
    #   y = r + 0.5 (1 - terminated) min(Q1', Q2') = [1 + 0.5*3, 1] = [2.5, 1]
    #   Q1(s, a) = [1 + 5, 2 - 5] = [6, -3] and Q2(s, a) = [7, -2] (at s': [8, 0], [9, 1])
    #   critic loss = mean(3.5^2, 4^2) + mean(4.5^2, 3^2) = (12.25 + 16)/2 + (20.25 + 9)/2
    #               = 14.125 + 14.625 = 28.75;  q_mean = mean Q1(s, a) = 1.5 (y's is 1.75)
    #   actor loss = -mean Q1(s, mu(s)) = -mean(s + 10 * 0.1 s) = -mean([2, 4]) = -3
    #   (at s': -mean([6, 10]) = -8)
    losses = one_update(stand_in_nets(twin_q=True), STAND_IN_BATCH, gradient_step=2,
                        actor_lr=0.0, critic_lr=0.0, algo="td3", target_policy_noise=0.0,
                        gamma=0.5)
    ((_, k, y),) = target_calls
    assert k["next_q1"].tolist() == approx([3, 5]) and k["next_q2"].tolist() == approx([6, 10])
    assert y.tolist() == approx([2.5, 1.0])
    assert losses == approx({"critic_loss": 28.75, "q_mean": 1.5, "actor_loss": -3.0})


def test_each_optimizer_steps_on_its_own_loss_of_this_update_alone(monkeypatch):
    # DDPG (one critic, an actor step in every update) on the stand-ins, twice on the same
    # batch with learning rates 0, so that both updates see the same numbers (y = [2.5, 1]
    # as above, Q1' being the smaller):
    #   critic step: dL/dc = 2 mean(Q1(s, a) - y) = 2 mean([3.5, -4]) = -0.5
    #   actor step:  L = -mean(s + 10 w s), dL/dw = -10 mean(s) = -15; the critic is frozen
    #                meanwhile, so it keeps its own step's -0.5 (unfrozen: -0.5 - 1)
    # Without the critics' zero_grad the second critic step would see -0.5 - 1 - 0.5 = -2;
    # without the actor's, the second actor step -30.
    grads, step = [], torch.optim.Adam.step

    def spy(self, closure=None):
        grads.extend(p.grad.item() for group in self.param_groups for p in group["params"])
        return step(self, closure)

    monkeypatch.setattr(torch.optim.Adam, "step", spy)
    nets = stand_in_nets(twin_q=False)
    critic_optimizer, actor_optimizer = optimizers(nets, actor_lr=0.0, critic_lr=0.0)
    args = ddpg_td3.resolve_algo(filled(algo="ddpg", gamma=0.5))
    for gradient_step in (1, 2):
        ddpg_td3.update(STAND_IN_BATCH, nets, critic_optimizer, actor_optimizer, args,
                        gradient_step)
    assert grads == approx([-0.5, -15.0, -0.5, -15.0])  # critic, actor, critic, actor
    assert [p.grad.item() for p in nets.qf1.parameters()] == approx([-0.5])
    assert all(p.requires_grad for p in nets.qf1.parameters())


# ---------------------------------------------------------------------------------------
# Episode ends through the whole loop: environments whose observation counts their steps
# and whose episodes end after 3 steps, by a time limit (truncated) or by termination.
# ---------------------------------------------------------------------------------------
class TableEnv(BoxCountingEnv):
    observation_space = gym.spaces.Discrete(4)


# BoxCountToThree-v0, BoxTerminateAtThree-v0, UnboundedCount-v0, BoxImage-v0, NoDisplay-v0
# and ShortPendulum-v1 are registered in conftest.py (sac.py's tests use them too).
gym.register("BoxTable-v0", entry_point=TableEnv)


@pytest.mark.parametrize("env_id, terminated", [("BoxCountToThree-v0", False),
                                                ("BoxTerminateAtThree-v0", True)])
def test_episode_ends_store_the_true_final_observation(env_id, terminated, tmp_path, monkeypatch):
    args = filled(env_id=env_id, total_timesteps=12, num_envs=2, learning_starts=6,
                         batch_size=16, hidden_size=8, eval_episodes=1, output_dir=str(tmp_path))
    summary = check_episode_ends(ddpg_td3, "td3_target", monkeypatch, args, terminated,
                                 update_owner=ddpg_td3, batch_obs=lambda batch, *rest: batch[0])
    episodes = read_csv(next(tmp_path.glob("*/episodes.csv")))
    assert [(e["global_step"], e["episode_return"], e["episode_length"]) for e in episodes] == \
        [("6", "3.0", "3"), ("6", "3.0", "3"), ("12", "3.0", "3"), ("12", "3.0", "3")]
    assert summary["eval_return_mean"] == 3.0


# ---------------------------------------------------------------------------------------
# Runs end to end
# ---------------------------------------------------------------------------------------
TINY = dict(env_id="Pendulum-v1", total_timesteps=600, learning_starts=200, batch_size=32,
            hidden_size=16, log_interval=200)


@pytest.mark.parametrize("algo", ["td3", "ddpg"])
@pytest.mark.slow  # a smoke run: a whole tiny run and every file it writes
def test_smoke_run_writes_every_file_and_its_model_evaluates(algo, tmp_path, check_run_folder):
    args = filled(**TINY, algo=algo, eval_episodes=2, save_model=True,
                         output_dir=str(tmp_path / "train"))
    summary = ddpg_td3.main(args)
    path, episodes, updates = check_run_folder(summary, args.output_dir, algo, model=True)
    # 600 Pendulum steps are 3 episodes of 200; a row of updates.csv every 200 steps once
    # learning started at step 200: at 200, 400 and 600
    assert [e["episode_length"] for e in episodes] == ["200"] * 3
    assert [u["global_step"] for u in updates] == ["200", "400", "600"]
    assert list(updates[0])[3:] == ["critic_loss", "q_mean", "actor_loss", "gradient_steps"]
    assert updates[-1]["gradient_steps"] == "401"
    assert all(math.isfinite(float(u["critic_loss"])) for u in updates)
    assert summary["eval_return_mean"] < 0 and summary["eval_episodes"] == 2  # Pendulum's costs
    state = torch.load(os.path.join(path, "model.pt"), weights_only=True)
    assert {"actor", "qf1"} <= set(state) and ("qf2" in state) == (algo == "td3")

    evaluated = ddpg_td3.main(ddpg_td3.Args(eval_checkpoint=os.path.join(path, "model.pt"),
                                            eval_episodes=2, hidden_size=64,
                                            output_dir=str(tmp_path / "eval")))
    assert evaluated["eval_return_mean"] == summary["eval_return_mean"]  # same policy, seeds
    assert evaluated["global_steps"] == 0 and evaluated["algorithm"] == algo


@pytest.mark.parametrize("algo", ["td3", "ddpg"])
def test_the_checkpoint_keeps_each_learned_network_under_its_own_name(algo, tmp_path,
                                                                      monkeypatch):
    # After a run with --save-model, model.pt holds the learned networks, each under its own
    # name (qf2 with twin critics alone), and not their targets, which lag behind them
    made, networks = [], ddpg_td3.Networks
    monkeypatch.setattr(ddpg_td3, "Networks",
                        lambda *args: made.append(networks(*args)) or made[-1])
    ddpg_td3.main(ddpg_td3.Args(env_id="BoxCountToThree-v0", algo=algo, total_timesteps=12,
                                learning_starts=6, batch_size=4, hidden_size=8, eval_episodes=0,
                                save_model=True, output_dir=str(tmp_path)))
    (nets,) = made
    state = torch.load(next(tmp_path.glob("*/model.pt")), weights_only=True)
    names = ("actor", "qf1", "qf2") if algo == "td3" else ("actor", "qf1")
    assert set(state) == {*names, "args"} and state["args"]["twin_q"] == (algo == "td3")
    for name in names:
        own, target = getattr(nets, name).state_dict(), getattr(nets, f"{name}_target").state_dict()
        assert all(torch.equal(state[name][key], own[key]) for key in own), name
        assert not all(torch.equal(state[name][key], target[key]) for key in own), name


def test_stop_at_return_stops_and_records_when(tmp_path, monkeypatch):
    # --stop-at-return replaces GOALS["Pendulum-v1"]'s threshold and keeps its window of 10
    # episodes. Every Pendulum return is above -100000, so the 10-episode mean reaches it as
    # soon as 10 episodes have ended: the 4 environments end 4 episodes together every 200 of
    # their steps (4 * 200 = 800 global steps), so 8 have ended at 1600 steps and 12 at
    # 3 * 800 = 2400, where the run stops: 12 episodes, solved_at_step 2400 (of a budget of
    # 8000). Under set_clock's Clock (a tick a reading) the end of the run (wall_time_s)
    # comes after the episodes' rows.
    assert ddpg_td3.GOALS["Pendulum-v1"][1] == 10
    set_clock(ddpg_td3, monkeypatch)
    summary = ddpg_td3.main(ddpg_td3.Args(total_timesteps=8000, num_envs=4, learning_starts=6000,
                                          stop_at_return=-100000, eval_episodes=0,
                                          output_dir=str(tmp_path)))
    episodes = read_csv(next(tmp_path.glob("*/episodes.csv")))
    assert [int(e["global_step"]) for e in episodes] == [800] * 4 + [1600] * 4 + [2400] * 4
    assert summary["solved_at_step"] == 2400 and summary["solved_window"] == 10
    assert summary["global_steps"] == 2400
    assert (float(episodes[9]["wall_time"]) < float(episodes[10]["wall_time"])
            < summary["wall_time_s"])


def test_nan_loss_stops_cleanly(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(ddpg_td3, "td3_target", lambda rewards, *a, **k: rewards * math.nan)
    summary = ddpg_td3.main(ddpg_td3.Args(**{**TINY, "log_interval": 100},
                                          output_dir=str(tmp_path)))
    (path,) = tmp_path.iterdir()
    out = capsys.readouterr().out
    assert "the loss became non-finite (NaN or inf) at step 200" in out
    assert summary["interrupted"] is True and summary["global_steps"] == 200
    assert read_csv(path / "updates.csv")[0]["critic_loss"] == "nan"
    assert (path / "summary.json").exists()


@pytest.mark.slow  # determinism: two whole runs
def test_same_seed_gives_the_same_episodes(tmp_path):
    rows = same_seed_episodes(lambda out: ddpg_td3.main(ddpg_td3.Args(
        **{**TINY, "total_timesteps": 1000, "num_envs": 2}, eval_episodes=0, output_dir=out)),
        tmp_path)
    assert len(rows) == 4  # 2 environments * 500 steps, the last two after 300 of learning


def test_the_budget_is_rounded_down_to_whole_steps_of_the_environments(tmp_path):
    # --total-timesteps 1,000 with 3 environments runs 333 vector steps, 999 environment
    # steps; learning starts at 990
    summary = ddpg_td3.main(ddpg_td3.Args(total_timesteps=1000, num_envs=3, learning_starts=990,
                                          batch_size=16, hidden_size=8, eval_episodes=0,
                                          output_dir=str(tmp_path)))
    assert summary["global_steps"] == 999


# ---------------------------------------------------------------------------------------
# Flags that skip training or bound the buffer, each at a value other than its default,
# seen where main and train hand it on
# ---------------------------------------------------------------------------------------
def test_the_buffer_is_never_larger_than_the_budget(tmp_path, monkeypatch):
    check_the_buffer_is_never_larger_than_the_budget(ddpg_td3, tmp_path, monkeypatch)


def test_an_evaluation_of_a_checkpoint_is_not_held_to_the_warm_up():
    # --learning-starts 1,000 leaves no step of a 101-step budget to learn in: refused for
    # training, not for evaluating a checkpoint, which trains nothing
    ddpg_td3.check_flags(ddpg_td3.resolve_algo(filled(total_timesteps=101,
                                                             eval_checkpoint="model.pt")))
    with pytest.raises(ddpg_td3.UsageError, match="leaves no step of the budget"):
        ddpg_td3.check_flags(ddpg_td3.resolve_algo(filled(total_timesteps=101)))


# ---------------------------------------------------------------------------------------
# Bad input: one line on stderr, exit status 2, nothing trained (ddpg_td3.py's own checks:
# check_flags, check_spaces)
# ---------------------------------------------------------------------------------------
@pytest.mark.parametrize("argv, message", [
    (["--env-id", "CartPole-v1"], "Discrete action space of shape (); ddpg_td3.py needs a flat "
                                  "continuous (Box) one (for Discrete actions use dqn.py or ppo.py)"),
    (["--env-id", "SpinTheBits-v0"], "MultiBinary action space"),
    (["--env-id", "UnboundedCount-v0"], "unbounded actions"),
    (["--env-id", "BoxImage-v0"], "Box observation space of shape (2, 2); ddpg_td3.py's MLPs "
                                  "need a flat Box"),
    (["--env-id", "BoxTable-v0"], "Discrete observation space"),
    (["--num-envs", "0"], "--num-envs must be positive"),
    (["--total-timesteps", "1000"], "--learning-starts 1000 leaves no step of the budget, 1,000 "
                                    "steps (--total-timesteps 1000 in whole steps of --num-envs 1)"),
    # 1,003 steps of 4 environments run 1,000: learning from 1,000 on would never come
    (["--total-timesteps", "1003", "--num-envs", "4"], "--learning-starts 1000 leaves no step"),
    (["--batch-size", "0"], "--batch-size must be positive"),
    (["--policy-delay", "0"], "--policy-delay must be positive"),
    (["--learning-rate", "0"], "--learning-rate must be positive"),
    (["--target-policy-noise", "-0.1"], "--target-policy-noise must be 0 or more"),
    (["--noise-clip", "0"], "--noise-clip 0 cancels --target-policy-noise"),
    (["--gamma", "1.5"], "--gamma must be in [0, 1]"),
    (["--tau", "0"], "--tau must be in (0, 1]"),
])
def test_bad_input_is_one_line_and_exit_status_2(argv, message, check_usage_error):
    check_usage_error("ddpg_td3.py", argv, message)



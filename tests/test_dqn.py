"""Tests of dqn.py: the math by hand, the replay buffer, the glue of its loop and its main,
its hooks of the plumbing (check_flags, check_spaces, greedy_policy, MODEL_FLAGS), runs end to
end, determinism (the plumbing's own behaviour is tests/test_plumbing.py's)."""
import copy
import json
import math
import os

import gymnasium as gym
import numpy as np
import pytest
import torch

import dqn
from conftest import (CountingEnv, approx, check_the_buffer_is_never_larger_than_the_budget,
                      read_csv, same_seed_episodes, spy_on, spy_on_seeds, tensor)


# ---------------------------------------------------------------------------------------
# TD targets by hand. Three transitions, gamma = 0.5: transition 0 runs on, transition 1
# is terminated, transition 2 is truncated (not terminated: it bootstraps from the value of
# its true final observation s').
# ---------------------------------------------------------------------------------------
REWARDS, TERMINATED = tensor(1.0, 0.5, 2.0), tensor(0, 1, 0)
NEXT_Q_TARGET = torch.tensor([[1.0, 3.0], [4.0, 2.0], [6.0, -2.0]])  # Q_target(s', a)
NEXT_Q_ONLINE = torch.tensor([[2.0, 1.0], [0.0, 1.0], [-1.0, 0.0]])  # Q(s', a), online net


def test_targets_of_plain_dqn():
    # max_a Q_target(s', a) = [3, 4, 6]
    # y_0 = 1 + 0.5*3 = 2.5;  y_1 = 0.5 + 0 (terminated: 4 is not used) = 0.5
    # y_2 = 2 + 0.5*6 = 5.0 (truncated: bootstraps)
    y = dqn.dqn_targets(REWARDS, NEXT_Q_TARGET, TERMINATED, 0.5)
    assert y.tolist() == approx([2.5, 0.5, 5.0])


def test_targets_of_double_dqn_value_the_online_argmax_with_the_target_network():
    # argmax_a Q(s', a) = [0, 1, 1]  ->  Q_target(s', that a) = [1, 2, -2]
    # y_0 = 1 + 0.5*1 = 1.5;  y_1 = 0.5 (terminated);  y_2 = 2 + 0.5*(-2) = 1.0
    # (plain DQN gave [2.5, 0.5, 5.0]: the online network's choice is what lowers them)
    y = dqn.dqn_targets(REWARDS, NEXT_Q_TARGET, TERMINATED, 0.5, next_q_online=NEXT_Q_ONLINE)
    assert y.tolist() == approx([1.5, 0.5, 1.0])


def test_targets_take_boolean_terminated_flags_and_gamma_zero():
    as_bool = dqn.dqn_targets(REWARDS, NEXT_Q_TARGET, TERMINATED.bool(), 0.5)
    assert as_bool.tolist() == approx([2.5, 0.5, 5.0])
    # gamma = 0: the target is the reward alone
    assert dqn.dqn_targets(REWARDS, NEXT_Q_TARGET, TERMINATED, 0.0).tolist() == approx([1.0, 0.5, 2.0])


def test_td_loss_huber_and_mse_by_hand():
    # Q(s, .) = [[1, 2], [3, 4]], actions [1, 0] -> Q(s, a) = [2, 3]; targets [2.5, 0]
    # delta = Q(s, a) - y = [-0.5, 3]
    #   huber: [0.5*0.25, 3 - 0.5] = [0.125, 2.5], mean 1.3125
    #          d/dQ(s, a) = clip(delta, -1, 1)/B = [-0.25, 0.5]
    #   mse:   [0.25, 9], mean 4.625;  d/dQ(s, a) = 2*delta/B = [-0.5, 3]
    # Q(s, a) of the actions not taken gets no gradient.
    targets = tensor(2.5, 0.0)
    for kind, value, grad in (("huber", 1.3125, [[0.0, -0.25], [0.5, 0.0]]),
                              ("mse", 4.625, [[0.0, -0.5], [3.0, 0.0]])):
        q_values = torch.tensor([[1.0, 2.0], [3.0, 4.0]], requires_grad=True)
        loss, q_taken = dqn.td_loss(q_values, torch.tensor([1, 0]), targets, kind)
        loss.backward()
        assert q_taken.tolist() == [2.0, 3.0] and loss.item() == approx(value)
        assert torch.allclose(q_values.grad, torch.tensor(grad))


# ---------------------------------------------------------------------------------------
# The epsilon schedule and the step counting
# ---------------------------------------------------------------------------------------
def test_epsilon_schedule_at_its_corners():
    # start 1.0, end 0.05 over 1000 steps: eps_t = 1 - 0.95 * min(1, t/1000)
    assert dqn.linear_schedule(1.0, 0.05, 1000, 0) == 1.0
    assert dqn.linear_schedule(1.0, 0.05, 1000, 500) == approx(0.525)   # 1 - 0.95*0.5
    assert dqn.linear_schedule(1.0, 0.05, 1000, 1000) == approx(0.05)
    assert dqn.linear_schedule(1.0, 0.05, 1000, 5000) == approx(0.05)   # constant after
    assert dqn.linear_schedule(1.0, 0.05, 0, 0) == 0.05                 # no decay at all
    assert dqn.linear_schedule(0.2, 0.6, 100, 25) == approx(0.3)        # rising works too


def test_crossings_count_environment_steps_whatever_the_number_of_environments():
    # With N = 3 environments, every 4 steps: after the step ending at global step 6 the
    # window (3, 6] holds 4 -> 1; (6, 9] holds 8 -> 1; (9, 12] holds 12 -> 1; (0, 3] none
    assert [dqn.crossings(g, 3, 4) for g in (3, 6, 9, 12)] == [0, 1, 1, 1]
    # N = 4, every 2 steps: (4, 8] holds 6 and 8 -> 2 updates, so the ratio stays 1 per 2
    assert dqn.crossings(8, 4, 2) == 2 and dqn.crossings(1, 1, 1) == 1


# ---------------------------------------------------------------------------------------
# The replay buffer. Transition k stores obs [k, -k], next_obs [k + 0.5, -k], action k % 3,
# reward 10k and terminated k % 2, so every field says which transition it came from.
# ---------------------------------------------------------------------------------------
def transitions(*ks):
    ks = np.array(ks, dtype=np.float32)
    return (np.stack([ks, -ks], 1), np.stack([ks + 0.5, -ks], 1), ks.astype(np.int64) % 3,
            10 * ks, ks % 2)


def make_buffer(capacity):
    return dqn.ReplayBuffer(capacity, (2,), "cpu", np.random.default_rng(0))


def test_buffer_wraps_around_over_the_oldest_transitions():
    buffer = make_buffer(4)  # 2 environments: two rows per step
    buffer.add(*transitions(0, 1))
    buffer.add(*transitions(2, 3))
    assert buffer.size == 4 and buffer.pos == 0
    buffer.add(*transitions(4, 5))  # overwrites 0 and 1, the oldest
    assert buffer.obs[:, 0].tolist() == [4, 5, 2, 3] and buffer.next_obs[:, 0].tolist() == [4.5, 5.5, 2.5, 3.5]
    assert buffer.actions.tolist() == [1, 2, 2, 0] and buffer.rewards.tolist() == [40, 50, 20, 30]
    assert buffer.terminated.tolist() == [0, 1, 0, 1]
    assert buffer.size == 4 and buffer.pos == 2


def test_buffer_memory_stays_constant_however_many_transitions():
    buffer = make_buffer(6)
    arrays = (buffer.obs, buffer.next_obs, buffer.actions, buffer.rewards, buffer.terminated)
    for k in range(0, 100, 3):
        buffer.add(*transitions(k, k + 1, k + 2))
    assert buffer.size == 6 and all(a is b for a, b in zip(arrays, (buffer.obs, buffer.next_obs,
                                                                  buffer.actions, buffer.rewards,
                                                                  buffer.terminated)))
    assert sorted(buffer.obs[:, 0].tolist()) == [96, 97, 98, 99, 100, 101]  # the last 6


def test_a_sample_never_mixes_fields_of_different_transitions():
    buffer = make_buffer(64)
    for k in range(0, 40, 2):  # 40 transitions stored, 24 rows still empty
        buffer.add(*transitions(k, k + 1))
    obs, actions, rewards, next_obs, terminated = buffer.sample(1000)
    assert obs.shape == (1000, 2) and actions.dtype == torch.long and rewards.dtype == torch.float32
    k = obs[:, 0]
    assert set(k.long().tolist()) == set(range(40))  # uniform over the stored rows only
    assert torch.equal(obs[:, 1], -k) and torch.equal(next_obs[:, 0], k + 0.5)
    assert torch.equal(actions, k.long() % 3) and torch.equal(rewards, 10 * k)
    assert torch.equal(terminated, k % 2)


def test_buffer_sample_is_reproducible_from_its_generator():
    buffers = [make_buffer(8) for _ in range(2)]
    for buffer in buffers:
        buffer.add(*transitions(*range(8)))
    first, second = (b.sample(5)[0] for b in buffers)
    assert torch.equal(first, second)


# ---------------------------------------------------------------------------------------
# The target network update by hand: theta' = 0 everywhere, theta = 4 everywhere
# ---------------------------------------------------------------------------------------
def constant_network(value, obs_dim=1, num_actions=2, hidden_size=4):
    net = dqn.QNetwork((obs_dim,), num_actions, hidden_size)
    for p in net.parameters():
        torch.nn.init.constant_(p, value)
    return net


@pytest.mark.parametrize("tau, expected", [(1.0, 4.0), (0.25, 1.0)])
def test_soft_update_by_hand(tau, expected):
    # theta' <- tau*theta + (1 - tau)*theta'
    #   tau = 1:    1*4 + 0*0 = 4, a copy
    #   tau = 0.25: 0.25*4 + 0.75*0 = 1 (with tau and 1 - tau swapped it would be 3)
    target, source = constant_network(0.0), constant_network(4.0)
    dqn.soft_update(target, source, tau)
    assert all(torch.all(p == expected) for p in target.parameters())
    assert all(torch.all(p == 4.0) for p in source.parameters())  # the source is not moved


# ---------------------------------------------------------------------------------------
# Episode ends through the whole loop: an environment whose observation counts its steps,
# that terminates when action 1 is taken and is cut by a time limit after 3 steps.
# ---------------------------------------------------------------------------------------
class TerminateOnOne(CountingEnv):
    terminate_on = 1


gym.register("DqnCountToThree-v0", entry_point=TerminateOnOne, max_episode_steps=3)


def test_episode_ends_store_the_true_final_observation(tmp_path, monkeypatch):
    stored, capacities = [], set()
    original = dqn.ReplayBuffer.add

    def spy(self, *fields):
        stored.append([np.array(f, copy=True) for f in fields])
        capacities.add(len(self.obs))
        return original(self, *fields)

    monkeypatch.setattr(dqn.ReplayBuffer, "add", spy)
    dqn.main(dqn.Args(env_id="DqnCountToThree-v0", total_timesteps=200, num_envs=2,
                      learning_starts=100, batch_size=8, start_e=1.0,
                      end_e=1.0, eval_episodes=0, output_dir=str(tmp_path)))
    obs, next_obs, actions, rewards, terminated = (np.stack(f) for f in zip(*stored))
    assert obs.shape == (100, 2, 1) and actions.shape == (100, 2)  # 100 steps of 2 envs
    assert capacities == {200}  # --buffer-size 50000 is never allocated for a 200-step run
    # s' is always the observation after s, the true final one where an episode ended,
    # never the 0 that starts the next episode
    assert np.array_equal(next_obs, obs + 1) and np.all(rewards == 1.0)
    assert np.array_equal(terminated, (actions == 1).astype(terminated.dtype))
    truncated = (obs[..., 0] == 2) & (actions == 0)  # third step, cut by the time limit
    assert truncated.sum() > 5 and terminated.sum() > 5 and not terminated[truncated].any()
    assert np.all(next_obs[truncated] == 3)
    ended = terminated.astype(bool) | truncated
    assert np.all(obs[1:][ended[:-1]] == 0)  # and the next row starts the next episode
    episodes = read_csv(next(tmp_path.glob("*/episodes.csv")))
    assert len(episodes) == ended.sum()
    assert sorted(int(e["episode_length"]) for e in episodes) == sorted(
        (obs[ended] + 1).astype(int).ravel().tolist())


# ---------------------------------------------------------------------------------------
# The glue: what the loop hands to the math. Networks with known outputs: all weights 0 and
# the last layer's bias b, so that Q(s, .) = b whatever s.
# ---------------------------------------------------------------------------------------
def network_with_outputs(*q_values):
    net = constant_network(0.0)
    net.head.bias.data = tensor(*q_values)
    return net


def train_directly(tmp_path, q_network, target_network, env_id="DqnCountToThree-v0", **flags):
    """dqn.train on env_id (reward 1 a step) with the networks given."""
    args = dqn.Args(env_id=env_id, eval_episodes=0, output_dir=str(tmp_path), **flags)
    # main (prepare) fills those left at None from the preset of the environment's spaces
    args = dqn.fill_preset(args, dqn.preset_name(args, *dqn.check_env(args)))
    envs = dqn.make_vector_env(args.env_id, args.num_envs)
    run = dqn.Run(args, "cpu", {"q_network": q_network}, rollout_steps=args.num_envs)
    dqn.train(args, envs, q_network, target_network, run)
    envs.close()


@pytest.mark.parametrize("double_dqn, bootstrap", [(False, 30.0), (True, 10.0)])
def test_the_loop_bootstraps_from_the_target_network(tmp_path, monkeypatch, double_dqn, bootstrap):
    # Online Q(s', .) = [1, 2] (argmax 1), target Q_target(s', .) = [30, 10] (max 30 at 0).
    # r = 1, gamma = 0.5:
    #   DQN:        y = 1 + 0.5*max_a Q_target(s', a) = 1 + 0.5*30 = 16
    #   double DQN: y = 1 + 0.5*Q_target(s', argmax_a Q(s', a)) = 1 + 0.5*Q_target(s', 1)
    #                 = 1 + 0.5*10 = 6
    #   terminated: y = 1 either way.
    # Bootstrapping from the online network would give 1 + 0.5*2 = 2; double DQN choosing
    # with the target network would give 16 (or 1 + 0.5*1 = 1.5 valued by the online one).
    calls = []
    original = dqn.dqn_targets

    def spy(rewards, next_q_target, terminated, gamma, next_q_online=None):
        targets = original(rewards, next_q_target, terminated, gamma, next_q_online)
        calls.append((next_q_target, next_q_online, terminated, targets))
        return targets

    monkeypatch.setattr(dqn, "dqn_targets", spy)
    train_directly(tmp_path, network_with_outputs(1.0, 2.0), network_with_outputs(30.0, 10.0),
                   total_timesteps=40, learning_starts=32, train_frequency=8, gradient_steps=1,
                   batch_size=16, buffer_size=40, gamma=0.5, start_e=1.0, end_e=1.0,
                   target_network_frequency=10**6, double_dqn=double_dqn)
    # One gradient step: learning starts after step 32 (global_step > --learning-starts),
    # and of the steps 33 to 40 only 40 crosses a multiple of 8 (at 32 as well would be 2).
    assert len(calls) == 1
    (next_q_target, next_q_online, terminated, targets), = calls
    assert next_q_target.tolist() == [[30.0, 10.0]] * 16
    assert next_q_online is None if not double_dqn else next_q_online.tolist() == [[1.0, 2.0]] * 16
    assert 0 < terminated.sum() < 16  # both kinds of step are in the batch
    assert targets.tolist() == [1.0 if t else 1.0 + 0.5 * bootstrap for t in terminated.tolist()]


@pytest.mark.parametrize("epsilon, num_envs, steps", [(0.0, 1, 40), (1.0, 1, 40), (0.5, 4, 1600)])
def test_the_loop_acts_greedily_save_with_probability_epsilon(tmp_path, monkeypatch, epsilon,
                                                              num_envs, steps):
    # Q(s, .) = [1, 2] everywhere: the greedy action is 1. Epsilon 0 (start_e = end_e = 0)
    # takes it at every step; epsilon 1 draws every action uniformly: 0 and 1 both come.
    # Epsilon 0.5 in 4 environments: each explores on its own, so action 0 comes at a rate of
    # 0.5 (explore) * 0.5 (draw 0) = 0.25, some 400 of the 1,600 actions (binomial, sd
    # sqrt(1600 * 0.25 * 0.75) = 17.3; the bounds 240 and 560 are 160 / 17.3 = 9.2 sd away).
    # One coin for all 4 (explore in all or in none) gives 0 at the same rate, but its 400
    # vector steps are all greedy (four 1s) at 0.5 + 0.5 * 0.5^4 = 0.531, some 212, where
    # four coins give 0.75^4 = 0.316, some 127 (sd sqrt(400 * 0.316 * 0.684) = 9.3): the
    # bounds 90 and 165 are 4 sd from 127, and 165 is (212 - 165) / 10 = 4.7 sd below 212.
    # The target network, Q_target(s, .) = [2, 1], would take 0: it only values targets.
    actions, add = [], dqn.ReplayBuffer.add
    monkeypatch.setattr(dqn.ReplayBuffer, "add",
                        lambda self, *fields: actions.extend(fields[2]) or add(self, *fields))
    train_directly(tmp_path, network_with_outputs(1.0, 2.0), network_with_outputs(2.0, 1.0),
                   total_timesteps=steps, num_envs=num_envs, learning_starts=steps - 1,
                   batch_size=8, buffer_size=steps, start_e=epsilon, end_e=epsilon)
    assert len(actions) == steps
    assert set(actions) == ({1} if epsilon == 0 else {0, 1})
    if epsilon == 0.5:
        assert 0.15 <= actions.count(0) / steps <= 0.35
        all_greedy = (np.reshape(actions, (-1, num_envs)) == 1).all(axis=1).sum()
        assert 90 <= all_greedy <= 165


@pytest.mark.parametrize("tau, expected", [(1.0, 4.0), (0.25, 1.75)])
def test_the_loop_moves_the_target_network_towards_the_online_one(tmp_path, monkeypatch, tau,
                                                                  expected):
    # Online parameters all 4 (the optimizer switched off, so they stay 4), target all 0.
    # 16 steps, learning from step 4: a gradient step every 4 (at 8, 12, 16) and a target
    # update every 8, two, at steps 8 and 16.
    #   tau = 1:    0 -> 4 -> 4
    #   tau = 0.25: 0 -> 0.25*4 + 0.75*0 = 1 -> 0.25*4 + 0.75*1 = 1.75
    # With tau and 1 - tau swapped: 0 -> 3 -> 3.75 (tau = 0.25), 0 -> 0 (tau = 1); with the
    # networks swapped the target stays 0; updated at every gradient step (--train-frequency),
    # 1 -> 1.75 -> 2.3125 (tau = 0.25).
    monkeypatch.setattr(torch.optim.Adam, "step", lambda self, closure=None: None)
    q_network, target_network = constant_network(4.0), constant_network(0.0)
    train_directly(tmp_path, q_network, target_network, total_timesteps=16, learning_starts=4,
                   train_frequency=4, gradient_steps=1, batch_size=4, buffer_size=16,
                   target_network_frequency=8, tau=tau)
    assert all(torch.all(p == 4.0) for p in q_network.parameters())
    assert all(torch.allclose(p, torch.full_like(p, expected)) for p in target_network.parameters())


def test_each_gradient_step_moves_q_and_the_target_network_waits_for_its_copy(tmp_path,
                                                                             monkeypatch):
    # CountToThree-v0 (observations 0, 1, 2: DqnCountToThree's action 1 would end every
    # greedy episode at 0, where the first layer's weights get no gradient). 16 steps,
    # learning from step 4: gradient steps at 8, 12 and 16 (--train-frequency 4), the target
    # network copied from Q (tau = 1) every 16 steps, after the gradient step at 16. Every
    # weight and bias of Q moves at each gradient step; the target keeps Q's first weights
    # until the copy, and then holds Q's last.
    torch.manual_seed(0)
    q_network = dqn.QNetwork((1,), 2, 4)
    target_network = copy.deepcopy(q_network)
    weights = lambda net: [t.clone() for t in net.state_dict().values()]
    seen = spy_on(monkeypatch, torch.optim.Adam, "step", lambda self, *a: (
        weights(q_network), weights(target_network)))
    train_directly(tmp_path, q_network, target_network, "CountToThree-v0", total_timesteps=16,
                   learning_starts=4, train_frequency=4, gradient_steps=1, batch_size=8,
                   target_network_frequency=16, learning_rate=0.01, anneal_lr=False)
    q_before = [q for q, _ in seen] + [weights(q_network)]
    assert len(seen) == 3 and all(not torch.equal(a, b) for before, after in
                                  zip(q_before, q_before[1:]) for a, b in zip(before, after))
    assert all(torch.equal(a, b) for _, target in seen for a, b in zip(target, q_before[0]))
    assert all(torch.equal(a, b) for a, b in zip(weights(target_network), q_before[-1]))


# The first step of each --optimizer on a gradient g, lr = 0.01 (make_optimizer's equations):
#   adam (beta1 0.9, beta2 0.999, eps 1e-8, bias-corrected): m = 0.1 g / (1 - 0.9) = g,
#       v = 0.001 g^2 / (1 - 0.999) = g^2, so theta <- theta - lr * g / (|g| + 1e-8): every
#       parameter with a gradient moves by about lr, against its gradient's sign
#   rmsprop (centered, alpha 0.95, eps 0.01): v = 0.05 g^2, m = 0.05 g,
#       sqrt(v - m^2) = sqrt(0.05 - 0.0025) |g| = sqrt(0.0475) |g|, so
#       theta <- theta - lr * g / (sqrt(0.0475) |g| + 0.01); for |g| near 0.01 the two
#       terms of the denominator are alike (Adam's eps 1e-8, alpha 0.99, or no centering would
#       give other steps)
FIRST_STEPS = {"adam": (torch.optim.Adam, lambda g: 0.01 * g / (g.abs() + 1e-8)),
               "rmsprop": (torch.optim.RMSprop,
                           lambda g: 0.01 * g / (math.sqrt(0.0475) * g.abs() + 0.01))}


@pytest.mark.parametrize("optimizer", ["adam", "rmsprop"])
def test_a_gradient_step_is_the_optimizers_first_step_on_the_clipped_gradient(
        tmp_path, monkeypatch, optimizer):
    # One gradient step (16 steps, learning from step 8, one update at step 16). The gradient
    # reaches the optimizer clipped to the global norm --max-grad-norm 0.1; the step is
    # FIRST_STEPS' for the optimizer that --optimizer names.
    seen = []
    optimizer_class, first_step = FIRST_STEPS[optimizer]
    original = optimizer_class.step

    def step(self, closure=None):
        params = [p for group in self.param_groups for p in group["params"]]
        before, grads = [p.detach().clone() for p in params], [p.grad.clone() for p in params]
        original(self, closure)
        seen.append((before, grads, [p.detach().clone() for p in params], self.param_groups[0]))

    monkeypatch.setattr(optimizer_class, "step", step)
    torch.manual_seed(0)
    q_network, target_network = dqn.QNetwork((1,), 2, 4), dqn.QNetwork((1,), 2, 4)
    train_directly(tmp_path, q_network, target_network, total_timesteps=16, learning_starts=8,
                   train_frequency=16, gradient_steps=1, batch_size=4, buffer_size=16,
                   learning_rate=0.01, max_grad_norm=0.1, anneal_lr=False, optimizer=optimizer)
    ((before, grads, after, group),) = seen
    assert group["lr"] == 0.01
    assert torch.cat([g.flatten() for g in grads]).norm() == pytest.approx(0.1, rel=1e-4)
    for b, g, a in zip(before, grads, after):
        assert torch.allclose(a, b - first_step(g), rtol=0, atol=1e-7)


@pytest.mark.parametrize("anneal_lr, expected", [(True, [0.0025, 0.0]), (False, [0.01, 0.01])])
def test_the_learning_rate_decays_linearly_to_zero_over_the_budget(tmp_path, monkeypatch,
                                                                  anneal_lr, expected):
    # 16 steps, learning from step 8, one gradient step every 4 steps: at steps 12 and 16.
    # --anneal-lr: lr_t = 0.01 * (1 - t / 16), so 0.01 * (1 - 12/16) = 0.0025 at t = 12 and
    # 0.01 * (1 - 16/16) = 0 at t = 16; --no-anneal-lr: 0.01 at both. updates.csv logs the rate.
    rates = []
    original = torch.optim.Adam.step

    def step(self, closure=None):
        rates.append(self.param_groups[0]["lr"])
        return original(self, closure)

    monkeypatch.setattr(torch.optim.Adam, "step", step)
    train_directly(tmp_path, dqn.QNetwork((1,), 2, 4), dqn.QNetwork((1,), 2, 4),
                   total_timesteps=16, learning_starts=8, train_frequency=4, gradient_steps=1,
                   batch_size=4, learning_rate=0.01, anneal_lr=anneal_lr, log_interval=16)
    assert rates == pytest.approx(expected, abs=1e-12)
    (row,) = read_csv(next(tmp_path.glob("*/updates.csv")))
    assert float(row["learning_rate"]) == pytest.approx(expected[-1], abs=1e-12)


def test_updates_log_the_start_value_beside_the_discounted_return(tmp_path, monkeypatch):
    # The overestimation check on DqnCountToThree-v0 (s counts the episode's steps from 0,
    # reward 1 a step, action 1 terminates, the time limit cuts the third step). Q(s, .) =
    # [s + 5, 3 - s], a linear layer that stays so (the optimizer switched off); epsilon 1
    # makes episodes of 1, 2 and 3 steps. Every episode starts at s_0 = 0, so
    #   q_start = max(0 + 5, 3 - 0) = 5   (at an episode's last s = 1, 2, 3 it would be 6, 7, 8)
    #   G_0 with gamma = 0.5: 1 (1 step), 1 + 0.5 = 1.5 (2 steps), 1 + 0.5 + 0.25 = 1.75 (3),
    #       that is 2 * (1 - 0.5^length); undiscounted it would be 1, 2, 3.
    # A row at every vector step of the 2 environments from step 6 on (--log-interval 2):
    # the means over the episodes that ended since the last row (episodes.csv), blank if none.
    # Each row also follows the 2 gradient steps of its own vector step (--gradient-steps 2).
    # With Q_target = Q, a sampled transition (s, a, r, s', terminated) has
    #   Q(s, a) = s + 5 (a = 0) or 3 - s (a = 1)
    #   y = r + 0.5 (1 - terminated) (s' + 5)   (s' >= 0: s' + 5 > 3 - s', the argmax is 0)
    # so its q_mean is the mean of the row's 2 batch means of Q(s, a) and its loss the mean of
    # the 2 batches' mean((Q(s, a) - y)^2) (the preset's mse), e.g. s = 1, a = 0, r = 1, s' = 2
    # running on: Q = 6, y = 1 + 0.5 * 7 = 4.5, (6 - 4.5)^2 = 2.25. The last batch's alone,
    # the mean of the targets y, or the means never cleared since the first row differ.
    monkeypatch.setattr(torch.optim.Adam, "step", lambda self, closure=None: None)
    batches, sample = [], dqn.ReplayBuffer.sample
    monkeypatch.setattr(dqn.ReplayBuffer, "sample",
                        lambda self, n: batches.append(sample(self, n)) or batches[-1])
    q_network, target_network = torch.nn.Linear(1, 2), torch.nn.Linear(1, 2)
    q_network.weight.data, q_network.bias.data = torch.tensor([[1.0], [-1.0]]), tensor(5.0, 3.0)
    target_network.load_state_dict(q_network.state_dict())
    train_directly(tmp_path, q_network, target_network, total_timesteps=80, num_envs=2,
                   learning_starts=4, train_frequency=2, gradient_steps=2, batch_size=4,
                   gamma=0.5, start_e=1.0, end_e=1.0, log_interval=2)
    episodes = read_csv(next(tmp_path.glob("*/episodes.csv")))
    updates = read_csv(next(tmp_path.glob("*/updates.csv")))
    assert [int(row["global_step"]) for row in updates] == list(range(6, 81, 2))
    assert len(batches) == 2 * len(updates)
    for row, pair in zip(updates, zip(batches[::2], batches[1::2])):
        q_means, losses = [], []
        for obs, actions, rewards, next_obs, terminated in pair:
            s = obs[:, 0]
            q = torch.where(actions == 0, s + 5, 3 - s)
            y = rewards + 0.5 * (1 - terminated.float()) * (next_obs[:, 0] + 5)
            q_means.append(q.mean().item())
            losses.append(((q - y) ** 2).mean().item())
        assert float(row["q_mean"]) == approx(np.mean(q_means))
        assert float(row["loss"]) == approx(np.mean(losses))
    previous, blank, lengths = 0, 0, set()
    for row in updates:
        step = int(row["global_step"])
        ended = [int(e["episode_length"]) for e in episodes if previous < int(e["global_step"]) <= step]
        previous = step
        lengths.update(ended)
        if not ended:
            blank += 1
            assert row["q_start"] == row["discounted_return"] == ""
            continue
        assert float(row["q_start"]) == approx(5.0)
        assert float(row["discounted_return"]) == approx(np.mean([2 * (1 - 0.5 ** n) for n in ended]))
    assert lengths == {1, 2, 3} and 0 < blank < len(updates)


def test_the_update_reads_q_at_s_and_both_networks_at_s_prime(tmp_path, monkeypatch):
    # Networks that say which observation they read: Q(s, .) = [s, -s] and Q_target(s, .) =
    # [10 s, -10 s], kept so (the optimizer switched off). On DqnCountToThree-v0 every stored
    # s' is s + 1 (the true final one too), so one double-DQN gradient step must hand
    #   td_loss:     Q(s, .)         = [s, -s]                  (at s' it would be [s + 1, ...])
    #   dqn_targets: Q_target(s', .) = [10 (s + 1), -10 (s + 1)]  (at s: [10 s, ...])
    #                Q(s', .)        = [s + 1, -(s + 1)]        (the online net's choice at s')
    # and the sampled actions, rewards and terminated flags as they are, with --loss huber
    # (the vector preset's is mse). updates.csv's one row (the last step) logs q_mean, the
    # batch's mean Q(s, a): s where a = 0, -s where a = 1, so in [-2, 2]; the mean target
    # would read r + 0.99 * (1 - terminated) * 10 (s + 1), 1 + 9.9 (s + 1) >= 10.9 at a step
    # that runs on.
    monkeypatch.setattr(torch.optim.Adam, "step", lambda self, closure=None: None)
    seen = {}
    sample, targets, loss = dqn.ReplayBuffer.sample, dqn.dqn_targets, dqn.td_loss

    def spy_sample(self, batch_size):
        seen["batch"] = sample(self, batch_size)
        return seen["batch"]

    def spy_targets(**k):
        seen["targets"] = k
        return targets(**k)

    def spy_loss(**k):
        seen["loss"] = k
        return loss(**k)

    monkeypatch.setattr(dqn.ReplayBuffer, "sample", spy_sample)
    monkeypatch.setattr(dqn, "dqn_targets", spy_targets)
    monkeypatch.setattr(dqn, "td_loss", spy_loss)
    q_network, target_network = torch.nn.Linear(1, 2, bias=False), torch.nn.Linear(1, 2, bias=False)
    q_network.weight.data, target_network.weight.data = tensor([1.0], [-1.0]), tensor([10.0], [-10.0])
    train_directly(tmp_path, q_network, target_network, total_timesteps=16, learning_starts=8,
                   train_frequency=16, gradient_steps=1, batch_size=8, buffer_size=16,
                   double_dqn=True, loss="huber")
    obs, actions, rewards, next_obs, terminated = seen["batch"]
    s = obs[:, 0]
    assert torch.equal(next_obs[:, 0], s + 1)
    assert torch.allclose(seen["loss"]["q_values"].detach(), torch.stack([s, -s], 1))
    assert torch.allclose(seen["targets"]["next_q_target"], torch.stack([10 * (s + 1), -10 * (s + 1)], 1))
    assert torch.allclose(seen["targets"]["next_q_online"], torch.stack([s + 1, -(s + 1)], 1))
    assert seen["loss"]["loss"] == "huber" and torch.equal(seen["loss"]["actions"], actions)
    assert torch.equal(seen["targets"]["rewards"], rewards)
    assert torch.equal(seen["targets"]["terminated"], terminated)
    (row,) = read_csv(next(tmp_path.glob("*/updates.csv")))
    assert float(row["q_mean"]) == approx(torch.where(actions == 0, s, -s).mean().item())
    # The target is a label, computed without autograd: the backward pass fills Q's .grad
    # and never Q_target's (with the target's graph kept, Q's step would be the same, argmax
    # carries no gradient, but every step would also run the target network's backward)
    assert q_network.weight.grad is not None and target_network.weight.grad is None
    assert not seen["targets"]["next_q_target"].requires_grad


@pytest.mark.parametrize("num_envs, decaying", [(1, [0.65, 0.45, 0.25, 0.05]),
                                                (2, [0.7, 0.5, 0.3, 0.1])])
def test_the_loop_decays_epsilon_over_the_exploration_fraction_of_the_budget(
        num_envs, decaying, tmp_path):
    # 40 steps, --exploration-fraction 0.5: epsilon falls from 1 to 0 over the first 20,
    # eps_t = 1 - t/20 at the step count t before the step. A row of updates.csv every 4 steps
    # from step 8 on holds the epsilon of its last step, t = g - 1 with one environment:
    #   g = 8: 1 - 7/20 = 0.65; 12: 1 - 11/20 = 0.45; 16: 0.25; 20: 0.05; 24 to 40: 0
    # (decaying over the whole budget, g = 8 would hold 1 - 7/40 = 0.825; the epsilon of the
    # step after, 1 - 8/20 = 0.6). With two, t counts both environments' steps, t = g - 2:
    #   g = 8: 1 - 6/20 = 0.7; 12: 0.5; 16: 0.3; 20: 0.1
    # (decaying over half the loop's 20 iterations, 10 steps, g = 8 would hold 1 - 6/10 = 0.4)
    train_directly(tmp_path, dqn.QNetwork((1,), 2, 4), dqn.QNetwork((1,), 2, 4),
                   num_envs=num_envs, total_timesteps=40, learning_starts=4, train_frequency=4,
                   gradient_steps=1, batch_size=4, buffer_size=40, start_e=1.0, end_e=0.0,
                   exploration_fraction=0.5, log_interval=4)
    rows = read_csv(next(tmp_path.glob("*/updates.csv")))
    assert [int(r["global_step"]) for r in rows] == list(range(8, 41, 4))
    assert [float(r["epsilon"]) for r in rows] == approx(decaying + [0.0] * 5)


@pytest.mark.parametrize("life_loss", [True, False])
def test_main_hands_its_flags_and_networks_to_training_and_evaluation(tmp_path, monkeypatch,
                                                                      life_loss):
    # 2 training environments, 16 steps, --eval-every 8 with 3 episodes at --eval-epsilon 0.3:
    # evaluations at steps 8 and 16 and the final one. The training environments get the
    # training wrappers and --terminal-on-life-loss as given (both act on Atari only); each
    # evaluation makes 3 of its own without them and plays the online network at epsilon
    # 0.3. The target network starts as a copy of the online one; both --hidden-size 8 wide.
    # The generator of exploration and replay sampling comes to the buffer fresh from --seed
    # 7, and the first step's actions (epsilon 1: all random) are its first draws.
    made, evaluated, started = [], [], []
    make, evaluate, train = dqn.make_vector_env, dqn.evaluate, dqn.train

    def spy_make(env_id, num_envs, training=False, life_loss=False, video_folder=None):
        made.append((num_envs, training, life_loss))
        return make(env_id, num_envs, training, life_loss, video_folder)

    def spy_evaluate(args, models, video_folder=None):
        evaluated.append((models["q_network"], args.eval_episodes, args.eval_epsilon))
        return evaluate(args, models, video_folder)

    def spy_train(args, envs, q_network, target_network, run):
        vector = torch.nn.utils.parameters_to_vector
        started.append((q_network, torch.equal(vector(q_network.parameters()),
                                               vector(target_network.parameters())),
                        {net.encoder[0].out_features for net in (q_network, target_network)}))
        return train(args, envs, q_network, target_network, run)

    monkeypatch.setattr(dqn, "make_vector_env", spy_make)
    monkeypatch.setattr(dqn, "evaluate", spy_evaluate)
    monkeypatch.setattr(dqn, "train", spy_train)
    seeds, resets = spy_on_seeds(monkeypatch, dqn)
    buffers = spy_on(monkeypatch, dqn, "ReplayBuffer",
                     lambda capacity, shape, device, rng, *rest: rng.bit_generator.state)
    steps = spy_on(monkeypatch, gym.vector.SyncVectorEnv, "step",
                   lambda self, actions: np.asarray(actions).tolist())
    dqn.main(dqn.Args(env_id="DqnCountToThree-v0", total_timesteps=16, num_envs=2,
                      learning_starts=8, batch_size=4, buffer_size=16, eval_every=8,
                      eval_episodes=3, eval_epsilon=0.3, terminal_on_life_loss=life_loss,
                      hidden_size=8, seed=7, output_dir=str(tmp_path)))
    # torch's and the training environments' seed, then each evaluation's, 7 + 100,000
    assert seeds == [7] and resets == [7] + [100_007] * 3
    rng = np.random.default_rng(7)
    assert buffers == [rng.bit_generator.state]
    rng.random(2)  # explore or not, then the random actions
    assert steps[0] == rng.integers(2, size=2).tolist()
    assert made == [(2, True, life_loss)] + [(3, False, False)] * 3
    ((q_network, copied, widths),) = started
    assert copied and widths == {8}
    assert [(net is q_network, episodes, epsilon) for net, episodes, epsilon in evaluated] \
        == [(True, 3, 0.3)] * 3


class RewardIsStep(CountingEnv):
    """Reward t at step t of an episode: 1, 2, 3 before the time limit cuts it."""

    def step(self, action):
        obs, _, terminated, truncated, info = super().step(action)
        return obs, float(self.t), terminated, truncated, info


gym.register("DqnRewardIsStep-v0", entry_point=RewardIsStep, max_episode_steps=3)


def test_the_learner_gets_the_rewards_as_they_are_sign_clipped_only_on_atari(tmp_path,
                                                                            monkeypatch):
    # The DQN paper clips Atari's scores to their sign; any other environment's rewards reach
    # the replay buffer as they are: 1, 2, 3 at s' = 1, 2, 3 (clipped, all would be 1).
    stored, add = [], dqn.ReplayBuffer.add

    def spy(self, obs, next_obs, actions, rewards, terminated):
        stored.extend(zip(next_obs[:, 0].tolist(), np.asarray(rewards).tolist()))
        return add(self, obs, next_obs, actions, rewards, terminated)

    monkeypatch.setattr(dqn.ReplayBuffer, "add", spy)
    dqn.main(dqn.Args(env_id="DqnRewardIsStep-v0", total_timesteps=12, learning_starts=8,
                      batch_size=4, buffer_size=12, eval_episodes=0, output_dir=str(tmp_path)))
    assert stored == [(1.0, 1.0), (2.0, 2.0), (3.0, 3.0)] * 4


class BoolCells(CountingEnv):
    """MinAtar-like frames: 4 x 4 cells in 6 channels (more channels than cells on a side),
    every cell set at odd steps; bool cells as MinAtar's (BoolCells) or bytes 0/255 as
    pixels (ByteCells)."""
    observation_space = gym.spaces.Box(0, 1, (4, 4, 6), dtype=np.bool_)
    on = True  # a set cell

    def frame(self):
        return np.full((4, 4, 6), self.on if self.t % 2 else 0, self.observation_space.dtype)

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        return self.frame(), {}

    def step(self, action):
        _, reward, terminated, truncated, info = super().step(action)
        return self.frame(), reward, terminated, truncated, info


class ByteCells(BoolCells):
    observation_space = gym.spaces.Box(0, 255, (4, 4, 6), dtype=np.uint8)
    on = 255


class Uint8Cells(BoolCells):  # MinAtar's GitHub code since 2023: uint8 cells, 1 at the top
    observation_space = gym.spaces.Box(0, 1, (4, 4, 6), dtype=np.uint8)
    on = 1


class FloatCells(BoolCells):  # an image of floats, a cell set to 0.5
    observation_space = gym.spaces.Box(0, 1, (4, 4, 6), dtype=np.float32)
    on = 0.5


gym.register("DqnBoolCells-v0", entry_point=BoolCells, max_episode_steps=3)
gym.register("DqnByteCells-v0", entry_point=ByteCells, max_episode_steps=3)
gym.register("DqnUint8Cells-v0", entry_point=Uint8Cells, max_episode_steps=3)
gym.register("DqnFloatCells-v0", entry_point=FloatCells, max_episode_steps=3)


@pytest.mark.parametrize("env_id, pixels, set_cell, stored_as", [
    ("DqnBoolCells-v0", False, 1, np.uint8), ("DqnByteCells-v0", True, 255, np.uint8),
    ("DqnUint8Cells-v0", False, 1, np.uint8), ("DqnFloatCells-v0", False, 0.5, np.float32)])
def test_an_image_of_cells_or_pixels_reaches_the_network_as_it_should(
        tmp_path, monkeypatch, capsys, env_id, pixels, set_cell, stored_as):
    # Bool cells, and uint8 cells of a Box whose top is 1, are 0/1 already: the encoder reads
    # them as they are (uint8=False), where bytes of a Box whose top is 255 are pixels it
    # scales by 1/255 (a set cell read as a byte would be 1/255). Those three
    # are kept in the replay buffer as uint8 (a set cell 1 or 255), and a float image as
    # float32, the dtype deciding and not the shape (its 0.5 as a byte would be 0); all keep
    # their channels last, by the convention, though 6 channels outnumber the 4 cells of a side.
    # The preset follows the shape, not the dtype: every image, of cells or of pixels, takes
    # the image preset (the MinAtar paper's: a gradient step every environment step, so steps
    # 9-12 sample the buffer, the target copied every 1,000, Huber, epsilon down to 0.1,
    # rate 2.5e-4, evaluation at epsilon 0.05), where the vector's would take its first 32
    # gradient steps at step 64, after these 12.
    encoders, buffers = [], []
    encoder, sample = dqn.ImageEncoder, dqn.ReplayBuffer.sample

    def spy_encoder(obs_shape, uint8, channels_last=True):
        encoders.append((tuple(obs_shape), uint8, channels_last))
        return encoder(obs_shape, uint8, channels_last)

    def spy_sample(self, batch_size):
        buffers.append(self)
        return sample(self, batch_size)

    monkeypatch.setattr(dqn, "ImageEncoder", spy_encoder)
    monkeypatch.setattr(dqn.ReplayBuffer, "sample", spy_sample)
    dqn.main(dqn.Args(env_id=env_id, total_timesteps=12, learning_starts=8, buffer_size=12,
                      batch_size=4, eval_episodes=0, cuda=False, output_dir=str(tmp_path)))
    assert encoders == [((4, 4, 6), pixels, True)] * 2  # the Q-network and its target
    config = json.loads(next(tmp_path.glob("*/config.json")).read_text())
    preset = ("train_frequency", "gradient_steps", "target_network_frequency", "loss", "end_e",
              "learning_rate", "eval_epsilon")
    assert [config[k] for k in preset] == [1, 1, 1000, "huber", 0.1, 2.5e-4, 0.05]
    # and the run's lines name it (a budget of 12 steps would be the vector's, not an image's)
    lines = capsys.readouterr().out.splitlines()
    assert lines[1:3] == [f"dqn.py: {env_id}, seed 1", "dqn.py: the image preset, the MinAtar "
                          "paper's DQN, Adam for its RMSProp; --preset vector or --preset long for "
                          "another, a flag for one setting"]
    assert len(buffers) == 4  # one batch at each of steps 9, 10, 11 and 12
    buffer = buffers[0]
    assert buffer.obs.dtype == buffer.next_obs.dtype == stored_as
    assert set(np.unique(buffer.obs[:buffer.size]).tolist()) == {0, set_cell}


# ---------------------------------------------------------------------------------------
# Runs end to end
# ---------------------------------------------------------------------------------------
@pytest.mark.slow  # a smoke run: a whole tiny run and every file it writes
def test_smoke_run_logs_its_columns_and_its_model_evaluates_the_same(tmp_path):
    # 2 environments, updates every 4 environment steps after step 200: global steps 204,
    # 208, ..., 600 -> 100 updates of 2 gradient steps = 200. The saved model, evaluated
    # alone, plays the same greedy policy (model.pt's "q_network" restored) on the same seeds.
    args = dqn.Args(env_id="CartPole-v1", total_timesteps=600, num_envs=2, learning_starts=200,
                    train_frequency=4, gradient_steps=2, batch_size=32, buffer_size=400,
                    exploration_fraction=0.5, eval_episodes=2, save_model=True,
                    output_dir=str(tmp_path / "train"))
    summary = dqn.main(args)
    (path,) = (tmp_path / "train").iterdir()
    episodes, updates = read_csv(path / "episodes.csv"), read_csv(path / "updates.csv")
    assert summary["global_steps"] == 600 and summary["eval_return_mean"] >= 8  # CartPole: > 8 steps
    columns = ["epsilon", "learning_rate", "loss", "q_mean", "q_start", "discounted_return",
               "gradient_steps", "buffer_size"]
    assert list(updates[0])[3:] == columns
    last = updates[-1]
    assert last["global_step"] == "600" and last["gradient_steps"] == "200"
    assert float(last["epsilon"]) == approx(0.01) and last["buffer_size"] == "400"
    assert math.isfinite(float(last["loss"])) and math.isfinite(float(last["q_mean"]))
    assert sum(float(e["episode_return"]) for e in episodes) <= 600

    evaluated = dqn.main(dqn.Args(env_id="CartPole-v1", eval_checkpoint=str(path / "model.pt"),
                                  eval_episodes=2, seed=summary["seed"],
                                  output_dir=str(tmp_path / "eval")))
    assert evaluated["eval_return_mean"] == summary["eval_return_mean"]  # same greedy policy, seeds
    assert evaluated["global_steps"] == 0


def test_updates_rows_come_where_the_steps_cross_each_multiple_of_log_interval(tmp_path):
    # 3 environments step global_step by 3 (3, 6, ..., 66), learning after step 6 with one
    # gradient step a vector step (--train-frequency 3): at 9, 12, ..., so (g - 6) / 3 of
    # them by step g. A row each time the steps cross a multiple of --log-interval 10: at 12
    # (past 10), 21, 30, 42, 51 and 60 (on the multiple only at 30 and 60), with 2, 5, 8,
    # 12, 15 and 18 gradient steps; and one after the last step, 66, which crosses none
    # (66 // 10 - 63 // 10 = 0), with (66 - 6) / 3 = 20. buffer_size is the transitions
    # stored, one per environment step up to the ring's 60 rows: min(g, 60) = 12, 21, 30, 42,
    # 51, 60, 60 (its capacity, 60, from the first row on would be the flag, not the fill).
    dqn.main(dqn.Args(env_id="DqnCountToThree-v0", total_timesteps=66, num_envs=3,
                      learning_starts=6, train_frequency=3, gradient_steps=1, batch_size=4,
                      buffer_size=60, log_interval=10, eval_episodes=0, output_dir=str(tmp_path)))
    updates = read_csv(next(tmp_path.glob("*/updates.csv")))
    assert [(int(u["global_step"]), int(u["gradient_steps"]), int(u["buffer_size"]))
            for u in updates] == [(12, 2, 12), (21, 5, 21), (30, 8, 30), (42, 12, 42),
                                  (51, 15, 51), (60, 18, 60), (66, 20, 60)]


@pytest.mark.slow  # a smoke run: a whole tiny run and every file it writes
def test_smoke_run_with_the_other_options(tmp_path):
    args = dqn.Args(env_id="Acrobot-v1", total_timesteps=500, learning_starts=100, train_frequency=1,
                    gradient_steps=1, batch_size=16, buffer_size=128, double_dqn=False, loss="mse", tau=0.5,
                    target_network_frequency=1, hidden_size=16, eval_episodes=1,
                    output_dir=str(tmp_path))
    summary = dqn.main(args)
    updates = read_csv(next(tmp_path.glob("*/updates.csv")))
    # one gradient step per environment step after step 100; the buffer keeps only 128
    assert updates[-1]["gradient_steps"] == "400" and updates[-1]["buffer_size"] == "128"
    assert summary["global_steps"] == 500 and summary["eval_return_mean"] >= -500


def test_stop_at_return_stops_and_records_when(tmp_path):
    # CartPole gives 1 per step, so a 20-episode mean of at least 1 is reached as soon as
    # 20 episodes have ended.
    summary = dqn.main(dqn.Args(total_timesteps=100_000, stop_at_return=1.0, eval_episodes=0,
                                output_dir=str(tmp_path)))
    episodes = read_csv(next(tmp_path.glob("*/episodes.csv")))
    assert len(episodes) >= 20 and summary["solved_at_step"] == int(episodes[19]["global_step"])
    assert summary["global_steps"] == summary["solved_at_step"] < 100_000


def test_nan_loss_stops_cleanly(tmp_path, monkeypatch, capsys):
    original = dqn.td_loss
    monkeypatch.setattr(dqn, "td_loss", lambda *a, **k: (original(*a, **k)[0] * math.nan,
                                                         original(*a, **k)[1]))
    summary = dqn.main(dqn.Args(total_timesteps=1000, learning_starts=50, batch_size=16,
                                log_interval=100, output_dir=str(tmp_path)))
    assert summary["interrupted"] is True and summary["global_steps"] == 100
    assert summary["eval_return_mean"] is None
    assert "the loss became non-finite (NaN or inf) at step 100" in capsys.readouterr().out
    assert (next(tmp_path.iterdir()) / "summary.json").exists()


@pytest.mark.slow  # determinism: two whole runs
def test_same_seed_gives_the_same_episodes(tmp_path):
    rows = same_seed_episodes(lambda out: dqn.main(dqn.Args(
        total_timesteps=2000, num_envs=2, learning_starts=500, train_frequency=8,
        gradient_steps=2, batch_size=32, eval_episodes=0, output_dir=out)), tmp_path)
    assert len(rows) > 20


def test_the_budget_is_rounded_down_to_whole_steps_of_the_environments(tmp_path):
    # main hands the run whole steps of --num-envs: --total-timesteps 1,000 with 3
    # environments runs 333 vector steps, 333 * 3 = 999 environment steps (whole steps of
    # 1,000 environments would be none; of 1, all 1,000)
    summary = dqn.main(dqn.Args(total_timesteps=1000, num_envs=3, learning_starts=990,
                                buffer_size=999, batch_size=16, eval_episodes=0,
                                output_dir=str(tmp_path)))
    assert summary["global_steps"] == 999


# ---------------------------------------------------------------------------------------
# What a checkpoint holds and rebuilds (MODEL_FLAGS), and the buffer's size
# ---------------------------------------------------------------------------------------
def test_an_evaluated_checkpoint_is_rebuilt_as_wide_as_it_was_saved(tmp_path, monkeypatch):
    # A CartPole model 8 wide (4 inputs, 2 actions), evaluated with no --hidden-size (the
    # default 128): main builds Linear(4, 8), Linear(8, 8) and the head Linear(8, 2), the
    # saved width (MODEL_FLAGS). Run only records the checkpoint and the network here (it
    # is handed no checkpoint to load), so a network of the flag's width would be evaluated,
    # not refused as one that "does not fit", and its widths, [128, 128, 2], would fail the
    # assertion on the edge itself.
    path = tmp_path / "model.pt"
    dqn.save_checkpoint(path, {"q_network": dqn.QNetwork((4,), 2, hidden_size=8)},
                        dqn.Args(env_id="CartPole-v1", hidden_size=8))
    restored, original = [], dqn.Run.__init__

    def record(self, args, device, models, checkpoint=None, **kwargs):
        restored.append((sorted(checkpoint), models["q_network"]))
        original(self, args, device, models, None, **kwargs)

    monkeypatch.setattr(dqn.Run, "__init__", record)
    dqn.main(dqn.Args(env_id="CartPole-v1", eval_checkpoint=str(path), eval_episodes=1,
                      output_dir=str(tmp_path / "eval")))
    ((saved, network),) = restored
    assert saved == ["args", "q_network"] and dqn.MODEL_FLAGS == ("hidden_size",)
    linears = [m for m in network.modules() if isinstance(m, torch.nn.Linear)]
    assert [(m.in_features, m.out_features) for m in linears] == [(4, 8), (8, 8), (8, 2)]


def test_the_buffer_is_never_larger_than_the_budget(tmp_path, monkeypatch):
    check_the_buffer_is_never_larger_than_the_budget(dqn, tmp_path, monkeypatch,
                                                     env_id="CountToThree-v0")


# ---------------------------------------------------------------------------------------
# The hooks the plumbing calls: dqn.py's checks of its flags and spaces, its greedy policy
# ---------------------------------------------------------------------------------------
@pytest.mark.parametrize("flags, message", [
    (dict(buffer_size=100, batch_size=128), "--buffer-size 100 is smaller than one batch"),
    (dict(buffer_size=1000, num_envs=3), "--buffer-size 1000 is not divisible by --num-envs 3; "
     "pass --buffer-size 999, a multiple of 3"),
    (dict(learning_starts=50000, total_timesteps=50000),
     "--learning-starts 50000 is not below the budget of 50,000 steps (--total-timesteps 50000 "
     "in whole steps of --num-envs 1)"),
    # 1,001 steps in whole steps of 4 environments run 1,000: learning from 1,000 never comes
    (dict(learning_starts=1000, total_timesteps=1001, num_envs=4, buffer_size=1000),
     "--learning-starts 1000 is not below the budget of 1,000 steps"),
    (dict(total_timesteps=2, num_envs=4, buffer_size=1000, learning_starts=0),
     "--learning-starts 0 is not below the budget of 0 steps (--total-timesteps 2 in whole "
     "steps of --num-envs 4)"),
    (dict(num_envs=0), "--num-envs must be positive"),
    (dict(train_frequency=0), "--train-frequency must be positive"),
    (dict(learning_rate=0.0), "--learning-rate must be positive"),
    (dict(gamma=1.5), "--gamma must be in [0, 1]"),
    (dict(end_e=-0.1), "--end-e must be in [0, 1]"),
    (dict(exploration_fraction=2.0), "--exploration-fraction must be in [0, 1]"),
    (dict(eval_epsilon=1.1), "--eval-epsilon must be in [0, 1]"),
    (dict(tau=0.0), "--tau must be in (0, 1]"),
    (dict(learning_starts=-1), "--learning-starts must be 0 or more"),
])
def test_check_flags_refuses_a_bad_flag_in_one_line(flags, message):
    with pytest.raises(dqn.UsageError) as refused:
        dqn.check_flags(filled(**flags))
    assert message in str(refused.value) and "\n" not in str(refused.value)


def filled(obs_space=None, **flags):
    """dqn.Args(**flags) with the flags left at None from the preset of a vector's (or an
    image's) observation, as prepare fills them before check_flags."""
    args = dqn.Args(**flags)
    obs_space = BOX if obs_space is None else obs_space
    return dqn.fill_preset(args, dqn.preset_name(args, obs_space, gym.spaces.Discrete(2)))


def test_check_flags_passes_the_defaults_and_both_presets_and_waits_for_a_total_timesteps():
    for obs_space in (BOX, image(10, 10, 4)):
        dqn.check_flags(filled(obs_space))
    # the plumbing's own check says --total-timesteps 0 must be positive; no budget of 0 first
    dqn.check_flags(filled(total_timesteps=0, learning_starts=10))
    dqn.check_flags(filled(learning_starts=50000, eval_checkpoint="model.pt"))  # no training


@pytest.mark.parametrize("budget, is_image, name", [
    (200_000, False, "vector"), (200_001, False, "long"), (500_000, False, "long"),
    (100_000, False, "vector"),
    (10_000, True, "image"), (5_000_000, True, "image")])
def test_the_preset_follows_the_observation_and_the_budget(budget, is_image, name):
    # a vector's budget up to SHORT_BUDGET = 200,000 takes the vector preset, past it the long
    # one; an image takes the image preset whatever its budget
    obs_space = image(10, 10, 4) if is_image else BOX
    assert dqn.preset_name(dqn.Args(total_timesteps=budget), obs_space,
                           gym.spaces.Discrete(2)) == name
    args = dqn.fill_preset(dqn.Args(total_timesteps=budget), name)
    assert {k: getattr(args, k) for k in dqn.PRESETS[name][1]} == dqn.PRESETS[name][1]


def test_the_default_command_trains_500k_steps_with_the_long_preset():
    # `python dqn.py` with no flags: a 500k budget, so a vector takes the long preset (the one
    # that held on fresh seeds, results.md); the vector preset is for budgets of 200k or less.
    # The long preset is CleanRL's dqn.py settings as the docstring gives them, written out
    # here (PRESETS compared with itself could not see a value moved between presets), with
    # epsilon down to 0.01 (CleanRL: 0.05) and a greedy evaluation
    assert dqn.Args().total_timesteps == 500_000
    assert dqn.preset_name(dqn.Args(), BOX, gym.spaces.Discrete(2)) == "long"
    args = dqn.fill_preset(dqn.Args(), "long")
    assert {k: getattr(args, k) for k in dqn.PRESETS["long"][1]} == dict(
        learning_rate=2.5e-4, buffer_size=10_000, target_network_frequency=500, batch_size=128,
        end_e=0.01, learning_starts=10_000, train_frequency=10, gradient_steps=1, loss="mse",
        eval_epsilon=0.0)


def test_a_run_past_200k_steps_trains_with_the_long_preset_and_says_so(tmp_path, monkeypatch,
                                                                      capsys):
    # main fills the flags from the budget's preset, hands them to train and config.json, and
    # names the preset on the run's line, after the device's (train is replaced: nothing trains)
    trained = []
    monkeypatch.setattr(dqn, "train", lambda args, *rest: trained.append(args))
    dqn.main(dqn.Args(env_id="CartPole-v1", total_timesteps=210_000, eval_episodes=0,
                      tensorboard=False, output_dir=str(tmp_path)))
    (args,) = trained
    assert (args.buffer_size, args.batch_size, args.train_frequency) == (10_000, 128, 10)
    (folder,) = os.listdir(tmp_path)
    with open(tmp_path / folder / "config.json") as f:
        assert json.load(f)["target_network_frequency"] == 500
    assert capsys.readouterr().out.splitlines()[1:3] == [
        "dqn.py: CartPole-v1, seed 1", "dqn.py: the long preset, CleanRL's dqn.py with epsilon "
        "down to 0.01 over a tenth of the budget; --preset vector or --preset image for another, "
        "a flag for one setting"]


def test_the_long_preset_replays_less_often_and_a_flag_overrides_it():
    # replays per environment step = batch_size * gradient_steps / train_frequency:
    # vector 128 * 1 / 4 = 32, long 128 * 1 / 10 = 12.8
    replays = {name: p["batch_size"] * p["gradient_steps"] / p["train_frequency"]
               for name, (_, p) in dqn.PRESETS.items() if name != "image"}
    assert replays == {"vector": 32.0, "long": 12.8}
    args = dqn.fill_preset(dqn.Args(total_timesteps=500_000, learning_rate=1e-3), "long")
    assert (args.learning_rate, args.buffer_size) == (1e-3, 10_000)  # given; the preset's


@pytest.mark.parametrize("flags, message", [
    # CartPole's vector preset keeps 50,000 transitions, no multiple of 3 environments: the
    # multiple below is 3 x 16,666 = 49,998 (50,000 = 3 x 16,666 + 2)
    (dict(total_timesteps=100_000, num_envs=3), "--buffer-size 50000 is not divisible by "
     "--num-envs 3; pass --buffer-size 49998, a multiple of 3"),
    (dict(total_timesteps=100_000, num_envs=3, buffer_size=50000), "--buffer-size 50000 is "
     "not divisible by --num-envs 3; pass --buffer-size 49998, a multiple of 3"),  # given
    (dict(buffer_size=100, learning_starts=50), "--buffer-size 100 is smaller than one "
     "batch (--batch-size 128)"),
    (dict(total_timesteps=500), "--learning-starts 1000 is not below the budget of 500 steps"),
    # past 200,000 steps the long preset's buffer of 10,000 is the one checked:
    # 10,000 = 3 x 3,333 + 1, so the multiple below is 9,999
    (dict(total_timesteps=210_000, num_envs=3), "--buffer-size 10000 is not divisible by "
     "--num-envs 3; pass --buffer-size 9999, a multiple of 3"),
])
def test_a_value_the_preset_fills_is_checked_in_its_turn(flags, message, tmp_path):
    # main fills the flags left at None from the preset (fill_preset) and checks them in their
    # turn: a value that does not fit, the user's or the preset's, is refused in one line;
    # nothing is written.
    with pytest.raises(dqn.UsageError) as refused:
        dqn.main(dqn.Args(env_id="CartPole-v1", output_dir=str(tmp_path), **flags))
    assert message in str(refused.value) and "\n" not in str(refused.value)
    assert not os.listdir(tmp_path)


BOX = gym.spaces.Box(-1.0, 1.0, (4,))


def image(*shape):
    return gym.spaces.Box(0, 255, shape, dtype=np.uint8)


@pytest.mark.parametrize("env_id, obs_space, action_space, message", [
    ("Pendulum-v1", BOX, gym.spaces.Box(-2.0, 2.0, (1,)), "Pendulum-v1 has a Box action space; "
     "dqn.py needs Discrete actions (ddpg_td3.py, sac.py and ppo.py take Box ones"),
    ("SpinTheBits-v0", BOX, gym.spaces.MultiBinary(3),
     "MultiBinary action space; dqn.py needs Discrete actions"),
    ("FrozenLake-v1", gym.spaces.Discrete(16), gym.spaces.Discrete(4), "FrozenLake-v1 has a "
     "Discrete observation space of shape (); dqn.py needs a flat Box or an image Box"),
    ("Frames-v0", image(8, 8), gym.spaces.Discrete(2),
     "Box observation space of shape (8, 8); dqn.py needs a flat Box or an image Box"),
    ("Tiny-v0", image(2, 2, 1), gym.spaces.Discrete(2),
     "Tiny-v0 has images of shape (2, 2, 1); the smallest convolution needs 3 x 3 pixels"),
    # an Atari frame stack keeps its channels first: 84 high, 2 wide (read as channels last,
    # 84 x 84 of 2 channels would pass)
    ("ALE/Narrow-v5", image(84, 84, 2), gym.spaces.Discrete(2), "images of shape (84, 84, 2)"),
])
def test_check_spaces_refuses_what_dqn_cannot_learn_in_one_line(env_id, obs_space, action_space,
                                                                message):
    with pytest.raises(dqn.UsageError) as refused:
        dqn.check_spaces(dqn.Args(env_id=env_id), obs_space, action_space)
    assert message in str(refused.value) and "\n" not in str(refused.value)


@pytest.mark.parametrize("env_id, obs_space", [
    ("CartPole-v1", BOX), ("MinAtar/Breakout-v1", image(10, 10, 4)),
    ("ALE/Breakout-v5", image(2, 84, 84))])  # 2 frames of 84 x 84 (channels last: 2 high)
def test_check_spaces_returns_the_observation_space_and_the_number_of_actions(env_id, obs_space):
    space, num_actions = dqn.check_spaces(dqn.Args(env_id=env_id), obs_space,
                                          gym.spaces.Discrete(np.int64(3)))
    assert space is obs_space and num_actions == 3 and type(num_actions) is int


def test_main_hands_the_environments_spaces_to_check_spaces(tmp_path):
    with pytest.raises(dqn.UsageError, match="Pendulum-v1 has a Box action space"):
        dqn.main(dqn.Args(env_id="Pendulum-v1", output_dir=str(tmp_path)))
    assert not os.listdir(tmp_path)


def test_the_greedy_policy_takes_the_online_networks_argmax():
    # Q(s, .) = [s, 0.5 - s]: action 1 at s = 0, action 0 at s = 1 and 2 (an argmin, or the
    # first action always, would differ); the info dict is not read
    q_network = torch.nn.Linear(1, 2)
    q_network.weight.data, q_network.bias.data = tensor([1.0], [-1.0]), tensor(0.0, 0.5)
    act = dqn.greedy_policy({"q_network": q_network}, envs=None)
    actions = act(np.array([[0.0], [1.0], [2.0]], dtype=np.float32), {})
    assert np.asarray(actions).tolist() == [1, 0, 0]

"""Tests of crossq.py: batch renormalization, the joint pass and the target by hand, what the
update passes to the math (glue), its own hooks (check_flags, check_spaces, greedy_policy,
MODEL_FLAGS), determinism. The plumbing's behaviour is tested once, in test_plumbing.py."""
import copy
import json
import math
import os

import numpy as np
import pytest
import torch
import torch.nn as nn

import crossq
from conftest import (approx, check_episode_ends,
                      check_the_actor_acts_on_float64_observations_as_float32,
                      check_the_buffer_is_never_larger_than_the_budget,
                      check_the_random_actions_fill_minus_one_to_one,
                      check_the_ring_of_field_tensors, check_the_rows_of_numbered_agent_updates,
                      copies, moved_since, read_csv, received_actions, same_seed_episodes, spy_on,
                      spy_on_acting, spy_on_seeds, tensor)


# ---------------------------------------------------------------------------------------
# Batch renormalization by hand on one 4 x 2 batch. Feature 1 is [0, 4, 0, 4]: mu_B = 2,
# var_B = 4, sigma_B = 2. Feature 2 is [3, 1, 1, 3]: mu_B = 2, var_B = 1, sigma_B = 1.
# (eps = 0 where the arithmetic should stay whole.)
# ---------------------------------------------------------------------------------------
X = tensor([0, 3], [4, 1], [0, 1], [4, 3])
PLAIN = [[-1, 1], [1, -1], [-1, -1], [1, 1]]  # (x - mu_B) / sigma_B
EVAL_SCALE = [[0, 4], [4, 0], [0, 0], [4, 4]]  # (x - mu) / sigma at mu = [0, 1], var = [1, 1/4]


def flat(rows):
    """A 4 x 2 output's values row by row, for approx (which takes no nested lists)."""
    return approx([value for row in rows for value in row])


def renorm(running_mean, running_var, weight=(1, 1), bias=(0, 0), **kwargs):
    """A BatchRenorm(2) layer with the given statistics, scale and shift."""
    layer = crossq.BatchRenorm(2, **kwargs)
    with torch.no_grad():
        for name, value in zip(("running_mean", "running_var", "weight", "bias"),
                               (running_mean, running_var, weight, bias)):
            getattr(layer, name).copy_(tensor(*value))
    return layer


def test_batch_renorm_in_its_warm_up_is_batch_norm_and_moves_the_running_statistics():
    # Still in the warm-up (100,000 passes by default): r = 1, d = 0, so with gamma = [2, 1],
    # beta = [0, 0.5]: y = [2 * (x1 - 2) / 2, (x2 - 2) / 1 + 0.5]
    #   = [[-2, 1.5], [2, -0.5], [-2, -0.5], [2, 1.5]]
    # (renormalized, r = sigma_B / sigma = [2, 1] and d = mu_B - mu = [2, 2] would give
    # feature 1 2 * [0, 4, 0, 4] instead). Running statistics, momentum 0.25, from (0, 1):
    #   mean 0.75 * 0 + 0.25 * 2 = 0.5 each; var 0.75 * 1 + 0.25 * [4, 1] = [1.75, 1.0]
    layer = renorm((0, 0), (1, 1), weight=(2, 1), bias=(0, 0.5), momentum=0.25, eps=0.0)
    y = layer.train()(X)
    assert y.flatten().tolist() == flat([[-2, 1.5], [2, -0.5], [-2, -0.5], [2, 1.5]])
    assert layer.running_mean.tolist() == approx([0.5, 0.5]), (
        "a training pass moves the running mean by momentum towards the batch's, in place")
    assert layer.running_var.tolist() == approx([1.75, 1.0]), (
        "the running variance moves towards the batch's biased variance, in place")
    assert layer.steps.item() == 1, "each training pass adds 1 to the layer's steps"


def test_batch_renorm_clips_r_and_d_at_the_authors_bounds_3_and_5():
    # Running mu = [-20, 30], var = [0.25, 16] (sigma [0.5, 4]), warmed up:
    #   feature 1: r = 2 / 0.5 = 4 -> 3; d = (2 + 20) / 0.5 = 44 -> 5
    #              y = (x1 - 2) / 2 * 3 + 5 = [-3 + 5, 3 + 5, ...] = [2, 8, 2, 8]
    #   feature 2: r = 1 / 4 -> 1/3; d = (2 - 30) / 4 = -7 -> -5
    #              y = (x2 - 2) / 3 - 5 = [1/3 - 5, -1/3 - 5, ...] = [-14/3, -16/3, -16/3, -14/3]
    # Then, momentum 0.5: mean 0.5 * [-20, 30] + 0.5 * [2, 2] = [-9, 16],
    #   var 0.5 * [0.25, 16] + 0.5 * [4, 1] = [2.125, 8.5]
    layer = renorm((-20, 30), (0.25, 16), momentum=0.5, warmup_steps=0, eps=0.0)
    y = layer.train()(X)
    assert y.flatten().tolist() == flat([[2, -14 / 3], [8, -16 / 3], [2, -16 / 3], [8, -14 / 3]])
    assert layer.running_mean.tolist() == approx([-9, 16]), (
        "a training pass moves the running mean by momentum towards the batch's, in place")
    assert layer.running_var.tolist() == approx([2.125, 8.5]), (
        "a training pass moves the running variance by momentum towards the batch's, in place")


def test_batch_renorm_unclipped_equals_the_evaluation_mode_and_r_d_carry_no_gradient():
    # Running mu = [0, 1], var = [1, 0.25] (sigma [1, 0.5]): r = [2/1, 1/0.5] = [2, 2] and
    # d = [(2 - 0)/1, (2 - 1)/0.5] = [2, 2], inside the bounds:
    #   y = (x - mu_B) / sigma_B * 2 + 2 = [[0, 4], [4, 0], [0, 0], [4, 4]] = (x - mu) / sigma
    # With r and d constants, sum y^2 = sum over features of r^2 sum z^2 + 2 r d sum z + 4 d^2
    # = 4 * 4 + 0 + 4 * 4 = 32 per feature, 64, whatever x is (sum z = 0, sum z^2 = 4 for
    # z = (x - mu_B) / sigma_B): no gradient reaches x. With r = sigma_B / sigma and
    # d = (mu_B - mu) / sigma differentiated it would be sum ((x - mu) / sigma)^2, which moves.
    x = X.clone().requires_grad_()
    y = renorm((0, 1), (1, 0.25), warmup_steps=0, eps=0.0).train()(x)
    assert y.flatten().tolist() == flat(EVAL_SCALE)
    y.pow(2).sum().backward()
    assert y.pow(2).sum().item() == approx(64)
    assert x.grad.abs().max() < 1e-5, (
        "r and d are constants to the gradient (computed under torch.no_grad()): none reaches x")


def test_batch_renorm_in_evaluation_mode_uses_the_running_statistics_with_epsilon_0_001():
    # Running mu = [1, -1], var = [0.999, 3.999]: with the default eps = 0.001, sigma = [1, 2];
    # gamma = [2, 1], beta = [0, 0.5]:
    #   y1 = 2 (x1 - 1) = 2 * [-1, 3, -1, 3] = [-2, 6, -2, 6]
    #   y2 = (x2 + 1) / 2 + 0.5 = [2.5, 1.5, 1.5, 2.5]; nothing is updated
    layer = renorm((1, -1), (0.999, 3.999), weight=(2, 1), bias=(0, 0.5))
    y = layer.eval()(X)
    assert y.flatten().tolist() == flat([[-2, 2.5], [6, 1.5], [-2, 1.5], [6, 2.5]])
    assert layer.running_mean.tolist() == approx([1, -1]) and layer.steps.item() == 0, (
        "evaluation mode updates nothing: neither the running statistics nor the steps")


def test_the_warm_up_counts_the_training_passes_alone():
    # warmup_steps 2, momentum 0 (the running statistics stay at mu = [0, 1], var = [1, 0.25]):
    # training passes 1 and 2 are batch norm, the evaluation pass between them counts for
    # nothing, and the 3rd training pass renormalizes (the unclipped case above)
    layer = renorm((0, 1), (1, 0.25), momentum=0.0, warmup_steps=2, eps=0.0)
    outputs = [layer.train()(X), layer.eval()(X), layer.train()(X), layer.train()(X)]
    assert [y.flatten().tolist() for y in outputs] == [flat(PLAIN), flat(EVAL_SCALE), flat(PLAIN),
                                                       flat(EVAL_SCALE)]
    assert layer.steps.item() == 3, "steps counts the training passes alone, not the evaluation"


# ---------------------------------------------------------------------------------------
# The joint pass and the target
# ---------------------------------------------------------------------------------------
def test_the_joint_pass_normalizes_both_halves_with_the_statistics_of_their_union():
    torch.manual_seed(0)
    # --bn-momentum 1: after a training pass, each layer's running statistics are those of
    # the batch it saw, so the evaluation mode then normalizes with exactly them
    critic = crossq.Critic(3, 1, crossq.Args(critic_hidden_size=8, bn_momentum=1.0)).train()
    separate = copy.deepcopy(critic)
    obs, next_obs = torch.randn(5, 3), torch.randn(5, 3) + 2  # s' unlike s
    actions, next_actions = torch.rand(5, 1), -torch.rand(5, 1)
    q, next_q = crossq.joint_pass(critic, obs, actions, next_obs, next_actions)
    assert all(m.steps.item() == 1 for m in critic.modules() if hasattr(m, "steps"))
    critic.eval()  # the union's statistics, on each half alone, in that order
    assert torch.allclose(q, critic(obs, actions), atol=1e-5)
    assert torch.allclose(next_q, critic(next_obs, next_actions), atol=1e-5)
    # two training passes: each half by its own statistics, another function of the input
    assert not torch.allclose(q, separate(obs, actions), atol=1e-2)
    assert not torch.allclose(next_q, separate(next_obs, next_actions), atol=1e-2)


def test_target_by_hand_and_its_gradient_stopped():
    # gamma 0.9, alpha 0.2; the second step was cut by a time limit (not terminated: it
    # bootstraps), the third terminated.
    # min(Q1', Q2') = min([1, 5, 3], [2, 4, 9]) = [1, 4, 3]; - 0.2 log pi' = [0.2, -0.4, -0.1]
    #   soft value [1.2, 3.6, 2.9]; y = [0 + 0.9 * 1.2, 1 + 0.9 * 3.6, -1] = [1.08, 4.24, -1]
    next_q1, next_q2 = tensor(1, 5, 3).requires_grad_(), tensor(2, 4, 9).requires_grad_()
    y = crossq.crossq_target(rewards=tensor(0, 1, -1), next_q1=next_q1, next_q2=next_q2,
                             next_logprob=tensor(-1, 2, 0.5), terminated=tensor(0, 0, 1),
                             gamma=0.9, alpha=0.2)
    assert y.tolist() == approx([1.08, 4.24, -1.0])
    assert not y.requires_grad  # the critic regresses towards y; y does not move


def test_logprob_of_a_squashed_gaussian_by_hand():
    # u = 0.5, mean 0, sigma 1, bounds +-3: log N = -0.125 - 0.9189385 = -1.0439385;
    # tanh(0.5)^2 = 0.2135523, -log(0.7864477) = +0.2402290; -log 3 = -1.0986123
    #   -> -1.9023218. u = -20 = mean: -0.9189385 - 2 (log 2 + 20 - softplus(40))
    #   = -0.9189385 - 2 (0.6931472 + 20 - 40) = -0.9189385 + 38.6137056 = 37.6947671, finite
    # where tanh(-20) rounds to -1
    logprob = crossq.squashed_logprob(tensor([0.5], [-20.0]), tensor([0.0], [-20.0]),
                                      tensor([0.0], [0.0]), tensor(3.0))
    assert logprob.tolist() == [pytest.approx(-1.9023218, abs=1e-5),
                                pytest.approx(37.6947671 - math.log(3), rel=1e-6)]


def test_actor_and_temperature_losses_by_hand():
    # actor: min([0, 4], [1, 2]) = [0, 2]; 0.1 log pi = [-0.3, 0.1]; mean([-0.3, -1.9]) = -1.1
    # temperature: alpha = 2, log pi + H_target = [-3, 1] - 1 = [-4, 0]: -mean(2 * [-4, 0]) = 4
    assert crossq.actor_loss(tensor(0, 4), tensor(1, 2), tensor(-3, 1), 0.1).item() == approx(-1.1)
    loss = crossq.temperature_loss(torch.tensor([math.log(2.0)]), tensor(-3, 1), -1.0)
    assert loss.item() == approx(4.0)


# ---------------------------------------------------------------------------------------
# The glue: what one update passes to the math. Stand-ins with numbers a test can work out:
# Q(s, a) = c + k s + 10 a, and a policy a = 0.1 s with log pi(a|s) = -s; both keep the
# mode (training or evaluation) and the batch size of each call.
# ---------------------------------------------------------------------------------------
class LineQ(nn.Module):
    def __init__(self, c, k):
        super().__init__()
        self.c, self.k, self.calls = nn.Parameter(tensor(c)), k, []

    def forward(self, obs, actions):
        self.calls.append((self.training, len(obs)))
        return self.c + self.k * obs[:, 0] + 10 * actions[:, 0]


class LinePolicy(nn.Module):
    def __init__(self, *args):
        super().__init__()
        self.w, self.calls = nn.Parameter(tensor(0.1)), []

    def sample(self, obs):
        self.calls.append((self.training, len(obs)))
        return self.w * obs[:, :1], -obs[:, 0]

    def greedy(self, obs):
        return -0.1 * obs[:, :1] - 0.05


# s = [1, 2, 5], a = [0.5, -0.5, 0.2], r = [1, 1, 2], terminated [0, 0, 1], s' = [3, 8, 6]
HAND_BATCH = (tensor([1], [2], [5]), tensor([0.5], [-0.5], [0.2]), tensor(1, 1, 2),
              tensor(0, 0, 1), tensor([3], [8], [6]))


def hand_agent(monkeypatch, critics=((1, 1), (13, -1)), **flags):
    """An agent built on two LineQ critics and a LinePolicy (its optimizers hold them)."""
    made = iter([LineQ(*c) for c in critics])
    monkeypatch.setattr(crossq, "Critic", lambda *args: next(made))
    monkeypatch.setattr(crossq, "Actor", LinePolicy)
    args = crossq.Args(**{"gamma": 0.5, "alpha": 0.5, "autotune": False, **flags})
    return crossq.Agent(1, 1, np.ones(1, np.float32), args, "cpu")


def test_the_target_comes_from_the_critics_themselves_in_one_training_pass(monkeypatch):
    agent = hand_agent(monkeypatch)
    seen, target = [], crossq.crossq_target
    monkeypatch.setattr(crossq, "crossq_target", lambda **k: seen.append(k) or target(**k))
    stats = agent.update(*HAND_BATCH)
    # One call per critic, in training mode, on the 2B = 6 rows of [s; s'] (no actor step
    # at the first critic step of --policy-delay 3); a' = 0.1 s' = [0.3, 0.8, 0.6] with
    # log pi' = -s', from the policy in evaluation mode:
    #   Q1(s', a') = 1 + s' + s' = [7, 17, 13];  Q2(s', a') = 13 - s' + s' = [13, 13, 13]
    assert agent.critic1.calls == agent.critic2.calls == [(True, 6)]
    assert agent.actor.calls == [(False, 3)]
    (k,) = seen
    assert k["next_q1"].tolist() == [7, 17, 13] and k["next_q2"].tolist() == [13, 13, 13]
    assert k["next_logprob"].tolist() == [-3, -8, -6] and (k["gamma"], k["alpha"]) == (0.5, 0.5)
    assert k["rewards"].tolist() == [1, 1, 2] and k["terminated"].tolist() == [0, 0, 1]
    # y = [1 + 0.5 (7 + 1.5), 1 + 0.5 (13 + 4), 2] = [5.25, 9.5, 2]
    # Q1(s, a) = 1 + s + 10 a = [7, -2, 8]; Q2(s, a) = 13 - s + 10 a = [17, 6, 10]
    #   critic 1: (1.75^2 + 11.5^2 + 6^2) / 3 = (3.0625 + 132.25 + 36) / 3 = 57.1041667
    #   critic 2: (11.75^2 + 3.5^2 + 8^2) / 3 = (138.0625 + 12.25 + 64) / 3 = 71.4375
    assert stats["critic1_loss"] == pytest.approx(57.1041667, rel=1e-6)
    assert stats["critic2_loss"] == pytest.approx(71.4375, rel=1e-6)
    # q1_mean is the batch's Q1(s, a): (7 - 2 + 8) / 3 = 13/3 (Q1(s', a'): 37/3)
    assert stats["q1_mean"] == pytest.approx(13 / 3, rel=1e-6)
    # The gradients treat y as a constant: dL/dc_j = 2 mean(Q_j(s, a) - y)
    #   c1: 2 (1.75 - 11.5 + 6) / 3 = -2.5;  c2: 2 (11.75 - 3.5 + 8) / 3 = 32.5 / 3
    # (through y, where Q1' is the minimum on row 1 and Q2' on row 2, they would differ)
    assert agent.critic1.c.grad.item() == pytest.approx(-2.5, rel=1e-6)
    assert agent.critic2.c.grad.item() == pytest.approx(32.5 / 3, rel=1e-6)


def test_the_actor_step_reads_the_critics_in_evaluation_mode_at_its_own_sample(monkeypatch):
    # --policy-delay 1: the actor steps at once. Its sample at s in training mode (the
    # target's a' came first, in evaluation mode); the critics, once each, in evaluation mode
    # on the B = 3 rows. At a~ = 0.1 s: Q1(s, a~) = c1 + 2s = [c1 + 2, c1 + 4, c1 + 10] is
    # the smaller (Q2(s, a~) = c2 = 13 - 0.001 after its critic step; c1 = 1 + 0.001),
    # alpha log pi = -0.5 s:  loss = mean(-0.5 s - c1 - 2 s) = -2.5 * 8/3 - c1 = -20/3 - c1
    agent = hand_agent(monkeypatch, policy_delay=1)
    stats = agent.update(*HAND_BATCH)
    assert agent.actor.calls == [(False, 3), (True, 3)]
    assert agent.critic1.calls == agent.critic2.calls == [(True, 6), (False, 3)]
    assert stats["actor_loss"] == pytest.approx(-20 / 3 - agent.critic1.c.item(), rel=1e-6)
    assert stats["entropy"] == pytest.approx(8 / 3, rel=1e-6)  # -mean log pi at s, not s'


def test_the_learned_temperature_reaches_the_target_and_the_actor_loss(monkeypatch):
    # --alpha 0.5 learned (--autotune), --policy-delay 1: the first update's temperature
    # step moves log alpha from log 0.5 by Adam's first step, -lr (its gradient,
    # -mean(log pi + H_target) * alpha = -mean(-[1, 2, 5] - 1) * 0.5 = 1.83, is positive):
    # alpha = 0.5 exp(-0.001) = 0.4995002. The second update's target and actor loss take
    # that learned alpha, not --alpha's 0.5.
    agent = hand_agent(monkeypatch, autotune=True, policy_delay=1)
    targets = spy_on(monkeypatch, crossq, "crossq_target", lambda **k: k["alpha"])
    losses = spy_on(monkeypatch, crossq, "actor_loss", lambda **k: k["alpha"])
    agent.update(*HAND_BATCH)
    agent.update(*HAND_BATCH)
    learned = 0.5 * math.exp(-1e-3)
    assert targets == [pytest.approx(0.5), pytest.approx(learned, rel=1e-6)]
    assert losses == [pytest.approx(0.5), pytest.approx(learned, rel=1e-6)]


def test_the_temperature_step_takes_the_actor_steps_log_pi_at_s(monkeypatch):
    # --target-entropy 4 learned, --policy-delay 1. The temperature's loss gets log pi of the
    # actor step's sample at s, -s = [-1, -2, -5], not the target's log pi(a'|s') = -s' =
    # [-3, -8, -6]. Its gradient in log alpha, -alpha mean(log pi + 4), is at s
    # -0.5 mean([3, 2, -1]) = -0.5 * 4/3 = -2/3 < 0, so Adam's first step (-lr times the
    # gradient's sign) raises log alpha by 1e-3: alpha = 0.5 exp(0.001) = 0.5005003; at s'
    # it would be -0.5 mean([1, -4, -2]) = +5/6 > 0, and alpha 0.5 exp(-0.001) = 0.4995002.
    # (The target's -1 of the test above cannot tell them apart: both gradients are positive.)
    agent = hand_agent(monkeypatch, autotune=True, policy_delay=1, target_entropy=4.0)
    seen = spy_on(monkeypatch, crossq, "temperature_loss", lambda **k: k["logprob"].tolist())
    stats = agent.update(*HAND_BATCH)
    assert seen == [[-1, -2, -5]]
    assert stats["alpha"] == pytest.approx(0.5 * math.exp(1e-3), rel=1e-6)


def test_the_actor_loss_reads_the_running_statistics_and_leaves_them(monkeypatch):
    # Real critics with batch renormalization, the LinePolicy: after one update with an actor
    # step, each critic layer has made ONE training pass, the joint one: the input layer's
    # running mean is 0.01 * the mean of [s, a; s', a'] (a = the stored actions,
    # a' = 0.1 s'_0). The actor's loss took the critics' evaluation-mode values at
    # (s, 0.1 s_0) (the actor step leaves the critics as they are).
    monkeypatch.setattr(crossq, "Actor", LinePolicy)
    agent = crossq.Agent(3, 1, np.ones(1, np.float32),
                         crossq.Args(critic_hidden_size=8, policy_delay=1), "cpu")
    seen, loss = [], crossq.actor_loss
    monkeypatch.setattr(crossq, "actor_loss", lambda **k: seen.append(k) or loss(**k))
    obs, actions, rewards, terminated, next_obs = random_batch()
    agent.update(obs, actions, rewards, terminated, next_obs)
    joint = torch.cat([torch.cat([obs, actions], 1), torch.cat([next_obs, 0.1 * next_obs[:, :1]],
                                                                1)])
    for critic in (agent.critic1, agent.critic2):
        layers = [m for m in critic.modules() if isinstance(m, crossq.BatchRenorm)]
        assert len(layers) == 3 and all(m.steps.item() == 1 for m in layers)
        assert torch.allclose(layers[0].running_mean, 0.01 * joint.mean(0), atol=1e-6)
    (k,) = seen
    new_actions = 0.1 * obs[:, :1]
    with torch.no_grad():
        assert torch.allclose(k["q1"], agent.critic1(obs, new_actions), atol=1e-6)
        assert torch.allclose(k["q2"], agent.critic2(obs, new_actions), atol=1e-6)
        trained = copy.deepcopy(agent.critic1).train()(obs, new_actions)
    assert not torch.allclose(k["q1"], trained, atol=1e-3)  # the modes differ here


def random_batch(n=64):
    gen = torch.Generator().manual_seed(1)
    return (torch.randn(n, 3, generator=gen), torch.rand(n, 1, generator=gen) * 2 - 1,
            torch.randn(n, generator=gen), torch.zeros(n), torch.randn(n, 3, generator=gen) + 1)


def small_agent(**flags):
    args = crossq.Args(**{"hidden_size": 8, "critic_hidden_size": 8, **flags})
    return crossq.Agent(3, 1, np.ones(1, np.float32), args, "cpu")


def test_there_are_no_target_networks_anywhere():
    # Three networks, each learned by gradient steps of its own optimizer: no copy of a
    # critic (a target network would be a fourth module, whose weights no optimizer holds)
    agent = small_agent()
    networks = {name for name, value in vars(agent).items() if isinstance(value, nn.Module)}
    assert networks == {"actor", "critic1", "critic2"}
    optimized = [p for o in (agent.critic_optimizer, agent.actor_optimizer)
                 for group in o.param_groups for p in group["params"]]
    assert {id(p) for p in optimized} == {id(p) for name in networks
                                         for p in getattr(agent, name).parameters()}
    assert not any("target" in key for name in networks
                   for key in getattr(agent, name).state_dict())
    assert not hasattr(crossq, "soft_update")


def statistics(net):
    """Copies of a network's buffers: its batch renorm layers' running statistics and counts."""
    return [b.clone() for b in net.buffers()]


def test_the_critics_move_at_every_update_and_the_actor_every_policy_delay_th():
    # --policy-delay 3: every weight and bias of both critics moves at updates 1, 2 and 3
    # (their critic step), and their statistics with them (one training pass each); the
    # actor's weights and its layers' statistics at the 3rd alone; the temperature with
    # them. Weights and statistics are told apart: the statistics of a training pass move
    # even where no optimizer steps.
    agent = small_agent(policy_delay=3)
    nets, batch, moved = (agent.critic1, agent.critic2, agent.actor), random_batch(), []
    for _ in range(3):
        weights, stats = [copies(n) for n in nets], [statistics(n) for n in nets]
        alpha = agent.alpha()
        agent.update(*batch)
        moved.append([moved_since(w, n) for w, n in zip(weights, nets)]
                     + [any(not torch.equal(a, b) for a, b in zip(s, statistics(n)))
                        for s, n in zip(stats, nets)] + [agent.alpha() != alpha])
    assert moved == [["all", "all", "none", True, True, False, False]] * 2 + [
        ["all", "all", "all", True, True, True, True]]
    steps = [m.steps.item() for m in agent.actor.modules() if isinstance(m, crossq.BatchRenorm)]
    assert steps == [1, 1, 1]


def test_each_flag_reaches_the_piece_it_sets():
    # 3-D observations, 2-D actions: H_target = -dim(A) = -2; the actor 8 wide, the critics
    # 12; every batch renorm layer with --bn-momentum and --renorm-warmup-steps; Adam at
    # --learning-rate with beta1 --adam-beta1 for the actor and the critics, the
    # temperature's at Adam's default 0.9
    args = crossq.Args(hidden_size=8, critic_hidden_size=12, bn_momentum=0.2,
                       renorm_warmup_steps=7, adam_beta1=0.3, learning_rate=0.005)
    agent = crossq.Agent(3, 2, np.ones(2, np.float32), args, "cpu")
    widths = lambda net: [m.out_features for m in net.modules() if isinstance(m, nn.Linear)]
    assert widths(agent.actor) == [8, 8, 4] and widths(agent.critic1) == [12, 12, 1]
    layers = [m for net in (agent.actor, agent.critic1, agent.critic2) for m in net.modules()
              if isinstance(m, crossq.BatchRenorm)]
    assert [(m.momentum, m.warmup_steps) for m in layers] == [(0.2, 7)] * 9
    assert [o.param_groups[0]["betas"] for o in (agent.critic_optimizer, agent.actor_optimizer,
                                                 agent.alpha_optimizer)] == [(0.3, 0.999),
                                                                             (0.3, 0.999),
                                                                             (0.9, 0.999)]
    assert [o.param_groups[0]["lr"] for o in (agent.critic_optimizer, agent.actor_optimizer,
                                              agent.alpha_optimizer)] == [0.005] * 3
    assert agent.target_entropy == -2 and agent.log_alpha.item() == approx(0.0)  # alpha 1


@pytest.mark.parametrize("target_entropy, direction", [(5.0, 1), (-20.0, -1)])
def test_temperature_rises_below_the_target_entropy_and_falls_above(target_entropy, direction):
    # a fresh policy's entropy is about 1: below a target of 5, above one of -20
    agent = small_agent(target_entropy=target_entropy, policy_delay=1)
    before = agent.alpha()
    for _ in range(3):
        agent.update(*random_batch())
    assert (agent.alpha() - before) * direction > 0


def test_a_fixed_temperature_never_moves():
    # --no-autotune at --alpha 0.2, --policy-delay 1: five updates, each with an actor step.
    # alpha stays 0.2 in every row and in the agent (learned, the first temperature step
    # alone would move log alpha by Adam's first step, about --learning-rate 1e-3: alpha
    # 0.2 exp(-+1e-3), a relative change of 1e-3), and log alpha takes no gradient
    agent = small_agent(alpha=0.2, autotune=False, policy_delay=1)
    stats = [agent.update(*random_batch()) for _ in range(5)]
    assert all("actor_loss" in row for row in stats)
    assert [row["alpha"] for row in stats] == [pytest.approx(0.2, rel=1e-6)] * 5
    assert agent.alpha() == pytest.approx(0.2, rel=1e-6) and not agent.log_alpha.requires_grad


def test_actor_steps_on_fixed_critics_raise_the_soft_value(monkeypatch):
    # Fixed critics Q = s + 10 a and 1 + s + 10 a (min: the first), alpha 0.2: each unit of
    # action gains 10, so 30 actor steps raise mean(Q - 0.2 log pi) by far more than 1
    torch.manual_seed(0)
    agent = small_agent(alpha=0.2, autotune=False, policy_delay=1, learning_rate=3e-3)
    agent.critic1, agent.critic2 = LineQ(0, 1), LineQ(1, 1)
    obs = random_batch()[0]

    def soft_value():
        torch.manual_seed(7)
        with torch.no_grad():
            actions, logprob = agent.actor.sample(obs)
            return (agent.critic1(obs, actions) - 0.2 * logprob).mean().item()

    before = soft_value()
    for _ in range(30):
        agent.update(*random_batch())
    assert soft_value() > before + 1.0
    assert agent.critic1.c.item() == 0.0 and agent.critic2.c.item() == 1.0  # no optimizer's


# ---------------------------------------------------------------------------------------
# The replay buffer
# ---------------------------------------------------------------------------------------
def test_buffer_wraps_around_and_samples_whole_transitions():
    check_the_ring_of_field_tensors(crossq)


# ---------------------------------------------------------------------------------------
# How the loop acts: the policy's sample in evaluation mode, scaled to the bounds
# ---------------------------------------------------------------------------------------
def test_the_loop_acts_with_a_sample_of_the_policy_in_evaluation_mode(tmp_path, monkeypatch):
    made = []
    monkeypatch.setattr(crossq, "Actor", lambda *a: made.append(LinePolicy()) or made[-1])
    stored = spy_on_acting(crossq, monkeypatch)
    crossq.main(crossq.Args(env_id="BoxZeroToFour-v0", total_timesteps=9, learning_starts=3,
                            batch_size=4, hidden_size=8, critic_hidden_size=8, eval_episodes=0,
                            policy_delay=10, output_dir=str(tmp_path)))  # no actor step
    # Steps 0-2 act uniformly at random; from step 3 on, the policy's sample at s = 0, 1, 2,
    # 0, 1, 2: a = 0.1 s (the greedy -0.1 s - 0.05 would explore nothing), stored as it is,
    # while the environment gets 0 + (a + 1) / 2 * 4 = 2 + 2a. Acting (one row) happens in
    # evaluation mode.
    assert [s for s, _ in stored] == [0, 1, 2] * 3
    assert [a for _, a in stored[3:]] == approx([0.0, 0.1, 0.2] * 2)
    assert received_actions() == approx([2 + 2 * a for _, a in stored])
    assert len({a for _, a in stored[:3]}) == 3
    (actor,) = made  # one row: acting; --batch-size 4 rows: the updates
    assert [mode for mode, rows in actor.calls if rows == 1] == [False] * 6


def test_the_random_actions_before_learning_starts_fill_the_whole_of_minus_one_to_one(
        tmp_path, monkeypatch):
    check_the_random_actions_fill_minus_one_to_one(crossq, tmp_path, monkeypatch,
                                                   critic_hidden_size=8)


def test_the_evaluation_plays_the_greedy_action_scaled_to_the_bounds():
    # BoxZeroToFour-v0 (actions in [0, 4], observations 0, 1, 2, cut after 3 steps) with the
    # LinePolicy: the greedy action at s is -0.1 s - 0.05 = -0.05, -0.15, -0.25, which the
    # environment receives as 2 + 2a = 1.9, 1.7, 1.5 (a sample, 0.1 s, would give 2, 2.2, 2.4)
    received_actions().clear()
    returns = crossq.evaluate(crossq.Args(env_id="BoxZeroToFour-v0", eval_episodes=1),
                              {"actor": LinePolicy()})
    assert returns.tolist() == [3.0] and received_actions() == approx([1.9, 1.7, 1.5])


def test_the_policy_acts_on_float64_observations_as_float32(tmp_path, monkeypatch):
    check_the_actor_acts_on_float64_observations_as_float32(crossq, "sample", monkeypatch,
                                                            tmp_path, critic_hidden_size=8)


def test_the_loop_gives_the_agent_its_scale_batches_and_steps(tmp_path, monkeypatch):
    # BoxZeroToFour-v0's actions lie in [0, 4]: the actor's scale is 2. 2 environments,
    # 12 steps, learning from step 6 with --gradient-steps 2: after the steps reaching 6, 8,
    # 10 and 12 two updates each, 8, on --batch-size 5 of a ring of --buffer-size 8 rows,
    # each update on a batch of its own: 8 draws from the ring (4 if both updates of a step
    # shared one).
    made, scales, batches, draws = [], [], [], []
    buffer, update = crossq.ReplayBuffer, crossq.Agent.update

    def spy_buffer(capacity, obs_dim, action_dim, device):
        made.append((capacity, obs_dim, action_dim))
        ring = buffer(capacity, obs_dim, action_dim, device)
        sample = ring.sample
        ring.sample = lambda batch_size: draws.append(batch_size) or sample(batch_size)
        return ring

    def spy_actor(obs_dim, action_dim, args, action_scale):
        scales.append(np.asarray(action_scale).tolist())
        return LinePolicy()

    def spy_update(self, obs, *rest):
        batches.append(len(obs))
        return update(self, obs, *rest)

    monkeypatch.setattr(crossq, "ReplayBuffer", spy_buffer)
    monkeypatch.setattr(crossq, "Actor", spy_actor)
    monkeypatch.setattr(crossq.Agent, "update", spy_update)
    crossq.main(crossq.Args(env_id="BoxZeroToFour-v0", total_timesteps=12, num_envs=2,
                            learning_starts=6, gradient_steps=2, buffer_size=8, batch_size=5,
                            hidden_size=8, critic_hidden_size=8, eval_episodes=0,
                            output_dir=str(tmp_path)))
    assert scales == [[2.0]] and made == [(8, 1, 1)] and batches == draws == [5] * 8


def test_update_rows_hold_the_means_since_the_last_row_and_one_after_the_last_step(
        tmp_path, monkeypatch):
    check_the_rows_of_numbered_agent_updates(crossq, tmp_path, monkeypatch)


def test_seed_and_threads_reach_torch_and_the_environments(tmp_path, monkeypatch):
    # --seed 7 and --threads 3, not the defaults 1: seed_and_device gets the seed, torch on
    # the CPU the thread count (the spy keeps this process's own as it is), the training
    # environments' reset the seed, and the evaluations of --eval-every 3 (at steps 3 and 6)
    # and the final one each 7 + 100,000, so that evaluations.csv scores what
    # --eval-checkpoint of best_model.pt replays
    seeds, resets = spy_on_seeds(monkeypatch, crossq)
    threads = []
    monkeypatch.setattr(torch, "set_num_threads", threads.append)
    crossq.main(crossq.Args(env_id="BoxZeroToFour-v0", total_timesteps=6, learning_starts=3,
                            batch_size=2, hidden_size=8, critic_hidden_size=8, seed=7,
                            threads=3, cuda=False, eval_episodes=2, eval_every=3,
                            output_dir=str(tmp_path)))
    assert seeds == [7] and threads == [3] and resets == [7, 100_007, 100_007, 100_007]


@pytest.mark.parametrize("env_id, terminated", [("BoxCountToThree-v0", False),
                                                ("BoxTerminateAtThree-v0", True)])
def test_episode_ends_store_the_true_final_observation(env_id, terminated, tmp_path, monkeypatch):
    args = crossq.Args(env_id=env_id, total_timesteps=12, num_envs=2, learning_starts=6,
                       batch_size=16, hidden_size=8, critic_hidden_size=8, eval_episodes=1,
                       output_dir=str(tmp_path))
    summary = check_episode_ends(crossq, "crossq_target", monkeypatch, args, terminated)
    assert summary["eval_return_mean"] == 3.0


# ---------------------------------------------------------------------------------------
# Runs end to end
# ---------------------------------------------------------------------------------------
TINY = dict(env_id="Pendulum-v1", total_timesteps=400, learning_starts=200, batch_size=32,
            hidden_size=16, critic_hidden_size=16, log_interval=100)


@pytest.mark.slow  # a smoke run: a whole tiny run and every file it writes
def test_smoke_run_writes_every_file_and_its_model_evaluates(tmp_path, check_run_folder):
    args = crossq.Args(**TINY, eval_episodes=2, save_model=True,
                       output_dir=str(tmp_path / "train"))
    summary = crossq.main(args)
    path, episodes, updates = check_run_folder(summary, args.output_dir, "crossq", model=True)
    # 400 Pendulum steps are 2 episodes of 200; a row of updates.csv at 200, 300 and 400
    assert [e["episode_length"] for e in episodes] == ["200"] * 2
    assert [u["global_step"] for u in updates] == ["200", "300", "400"]
    assert list(updates[0])[3:] == ["critic1_loss", "critic2_loss", "q1_mean", "actor_loss",
                                    "entropy", "alpha"]
    assert updates[0]["actor_loss"] == "nan"  # one critic step at 200, no actor step yet
    assert all(math.isfinite(float(v)) for u in updates[1:] for v in u.values())
    state = torch.load(os.path.join(path, "model.pt"), weights_only=True)
    assert set(state) == {"actor", "critic1", "critic2", "args"}
    # The running statistics travel with the weights: 201 updates (steps 200-400) made 201
    # training passes of each critic layer and 67 (every 3rd) of each actor layer
    assert state["critic1"]["net.0.steps"].item() == 201
    assert state["actor"]["net.3.steps"].item() == 67
    assert state["actor"]["net.0.running_mean"].abs().sum() > 0

    evaluated = crossq.main(crossq.Args(eval_checkpoint=path, eval_episodes=2,
                                        output_dir=str(tmp_path / "eval")))
    assert evaluated["eval_return_mean"] == summary["eval_return_mean"]  # same policy, seeds
    assert evaluated["global_steps"] == 0


def test_stop_at_return_stops_and_records_when(tmp_path):
    # BoxCountToThree-v0 pays 1 a step and is cut after 3 steps: every return is 3. Two
    # environments end an episode each every 3 vector steps, 6 global steps a pair, so the
    # 20th episode ends with the 10th pair at step 60, where the mean of the last 20 returns
    # first reaches --stop-at-return 3 (>=): the loop stops there, short of its budget of
    # 120, with updates from step 30 on before it.
    summary = crossq.main(crossq.Args(env_id="BoxCountToThree-v0", total_timesteps=120,
                                      num_envs=2, learning_starts=30, batch_size=8,
                                      hidden_size=8, critic_hidden_size=8, stop_at_return=3.0,
                                      eval_episodes=0, output_dir=str(tmp_path)))
    assert summary["solved_threshold"] == 3.0 and summary["solved_at_step"] == 60
    assert summary["global_steps"] == 60
    assert len(read_csv(next(tmp_path.glob("*/episodes.csv")))) == 20


def test_nan_loss_stops_cleanly(tmp_path, monkeypatch):
    monkeypatch.setattr(crossq, "crossq_target", lambda rewards, **k: rewards * math.nan)
    summary = crossq.main(crossq.Args(**TINY, output_dir=str(tmp_path)))
    (path,) = tmp_path.iterdir()
    assert summary["interrupted"] is True and summary["global_steps"] == 200
    assert read_csv(path / "updates.csv")[0]["critic1_loss"] == "nan"


@pytest.mark.slow  # determinism: two whole runs
def test_same_seed_gives_the_same_episodes(tmp_path):
    rows = same_seed_episodes(lambda out: crossq.main(crossq.Args(
        env_id="my_envs:Slider-v0", total_timesteps=200, num_envs=2, learning_starts=40,
        batch_size=16, hidden_size=8, critic_hidden_size=8, eval_episodes=0, output_dir=out)),
        tmp_path)
    # 2 environments * 100 steps: 10 episodes of 20 steps, all but the first two learned
    assert len(rows) == 10 and len({r[1] for r in rows}) == 10


def test_the_budget_is_rounded_down_to_whole_steps_of_the_environments(tmp_path):
    # --total-timesteps 1,000 with 3 environments runs 333 vector steps, 999 environment
    # steps; learning starts at 990
    summary = crossq.main(crossq.Args(total_timesteps=1000, num_envs=3, learning_starts=990,
                                      batch_size=16, hidden_size=8, critic_hidden_size=8,
                                      eval_episodes=0, output_dir=str(tmp_path)))
    assert summary["global_steps"] == 999


# ---------------------------------------------------------------------------------------
# Flags that skip training, shape the networks or bound the buffer, each at a value other
# than its default, seen where main and train hand it on (issue 59)
# ---------------------------------------------------------------------------------------
def test_an_evaluation_of_a_checkpoint_builds_the_networks_at_the_models_widths(
        tmp_path, monkeypatch):
    # A Pendulum-v1 model (observation 3, action 1) with an actor 8 wide and critics 12
    # wide, evaluated by a command line that names neither width (256 each by default):
    # main builds the agent at the model's widths (MODEL_FLAGS), then Run loads it. So
    # Run gets an actor whose first layer is Linear(3, 8) and critics Linear(3 + 1, 12),
    # and the evaluation's config.json says 8 and 12 (an actor built 256 wide would refuse
    # the model's 8-wide weights: "does not fit", exit 2).
    args = crossq.Args(hidden_size=8, critic_hidden_size=12)
    agent = crossq.Agent(3, 1, np.ones(1, np.float32), args, "cpu")
    crossq.save_checkpoint(tmp_path / "model.pt", {"actor": agent.actor, "critic1": agent.critic1,
                                                   "critic2": agent.critic2}, args)
    built, original = [], crossq.Run.__init__

    def record(self, args, device, models, checkpoint=None, **kwargs):
        if checkpoint is not None:
            built.append([(models[name].net[1].in_features, models[name].net[1].out_features)
                          for name in ("actor", "critic1", "critic2")])
        original(self, args, device, models, checkpoint, **kwargs)

    monkeypatch.setattr(crossq.Run, "__init__", record)
    crossq.main(crossq.Args(eval_checkpoint=str(tmp_path / "model.pt"), eval_episodes=1,
                            output_dir=str(tmp_path / "eval")))
    assert built == [[(3, 8), (4, 12), (4, 12)]]
    (folder,) = (tmp_path / "eval").iterdir()
    with open(folder / "config.json") as f:
        config = json.load(f)
    assert (config["hidden_size"], config["critic_hidden_size"]) == (8, 12)


def test_an_evaluation_of_a_checkpoint_is_not_held_to_the_warm_up():
    # --learning-starts 5,000 leaves no step of a 101-step budget to learn in: refused for
    # training, not for evaluating a checkpoint, which trains nothing
    crossq.check_flags(crossq.Args(total_timesteps=101, eval_checkpoint="model.pt"))
    with pytest.raises(crossq.UsageError, match="leaves no step of the budget"):
        crossq.check_flags(crossq.Args(total_timesteps=101))


def test_the_buffer_is_never_larger_than_the_budget(tmp_path, monkeypatch):
    check_the_buffer_is_never_larger_than_the_budget(crossq, tmp_path, monkeypatch)


def test_the_checkpoint_keeps_each_learned_network_under_its_own_name(tmp_path, monkeypatch):
    # As sac.py's (round thirteen's S5 there: critic 1 saved as critic2): after a run with
    # --save-model, each saved state dict holds its own network's tensors, batch
    # renormalization's running statistics with them, and so not the other critic's (each
    # critic starts from weights of its own and learns on its own)
    agents = []

    class Kept(crossq.Agent):
        def __init__(self, *args, **kwargs):
            super().__init__(*args, **kwargs)
            agents.append(self)

    monkeypatch.setattr(crossq, "Agent", Kept)
    crossq.main(crossq.Args(env_id="BoxCountToThree-v0", total_timesteps=12, learning_starts=6,
                            batch_size=4, hidden_size=8, critic_hidden_size=8, eval_episodes=0,
                            save_model=True, output_dir=str(tmp_path)))
    (agent,) = agents
    state = torch.load(next(tmp_path.glob("*/model.pt")), weights_only=True)
    assert set(state) == {"actor", "critic1", "critic2", "args"}
    for key in ("actor", "critic1", "critic2"):
        own = getattr(agent, key).state_dict()
        assert state[key].keys() == own.keys()
        assert all(torch.equal(state[key][name], own[name]) for name in own), key
    assert not torch.equal(state["critic1"]["net.1.weight"], state["critic2"]["net.1.weight"])


# ---------------------------------------------------------------------------------------
# Bad input: one line on stderr, exit status 2, nothing trained (crossq.py's own checks:
# check_flags, check_spaces)
# ---------------------------------------------------------------------------------------
@pytest.mark.parametrize("argv, message", [
    (["--env-id", "my_envs:GridWorld-v0"], "Discrete action space of shape (); crossq.py needs"),
    (["--env-id", "UnboundedCount-v0"], "unbounded actions"),
    (["--env-id", "BoxImage-v0"], "observation space of shape (2, 2)"),
    (["--total-timesteps", "5000"], "--learning-starts 5000 leaves no step of the budget"),
    (["--policy-delay", "0"], "--policy-delay must be positive"),
    (["--critic-hidden-size", "0"], "--critic-hidden-size must be positive"),
    (["--adam-beta1", "1"], "--adam-beta1 must be in [0, 1)"),
    (["--bn-momentum", "0"], "--bn-momentum must be in (0, 1]"),
    (["--renorm-warmup-steps", "-1"], "--renorm-warmup-steps must be 0 or more"),
    (["--target-entropy", "-1", "--no-autotune"], "--target-entropy needs the learned temperature"),
])
def test_bad_input_is_one_line_and_exit_status_2(argv, message, check_usage_error,
                                                 fresh_env_module):
    check_usage_error("crossq.py", argv, message)



"""Tests of trpo.py: the math by hand, the buffer, the loop's glue, its hooks (check_flags,
check_spaces, greedy_policy, MODEL_FLAGS), runs end to end. The plumbing's behaviour is
tested once for every script, in test_plumbing.py."""
import copy
import importlib
import math

import numpy as np
import pytest
import torch
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
from torch.distributions import Categorical

import trpo
from conftest import (approx, check_evaluation_normalizes_with_the_frozen_statistics,
                      check_every_evaluation_reads_the_running_statistics_and_leaves_them_alone,
                      check_gaussian_actions_clipped_for_the_environment_only,
                      check_norm_obs_on_count_to_three, check_the_evaluation_takes_the_policys_mode,
                      LearnedTenTimesObs, read_csv, same_seed_episodes, spy_on, spy_on_seeds,
                      spy_on_weights, tensor, TenTimesObs)


def filled(**flags):
    """trpo.Args with the flags left at None taken from its discrete preset, the settings its
    defaults had before the presets, as main fills them on CartPole-v1."""
    return trpo.fill_preset(trpo.Args(**flags), "discrete")


def column(*values):
    """A [T, 1] tensor: one environment's values over T steps."""
    return torch.tensor(values, dtype=torch.float32).unsqueeze(1)


# ---------------------------------------------------------------------------------------
# GAE by hand: three steps, gamma = 0.5, lambda = 0.5, rewards [1, 2, 3], V = [1, 1, 2],
# truncated at t = 1 with V(final obs) = 4, V(s_3) = 6 after the batch
# ---------------------------------------------------------------------------------------
def test_gae_truncation_bootstraps_from_the_final_observation():
    # delta = [1 + 0.5*1 - 1, 2 + 0.5*4 - 1, 3 + 0.5*6 - 2] = [0.5, 3, 4]
    # A_2 = 4;  A_1 = 3 (the episode ended);  A_0 = 0.5 + 0.25*3 = 1.25; returns A + V
    adv, ret = trpo.compute_gae(column(1, 2, 3), column(1, 1, 2), column(1, 4, 6),
                                column(0, 0, 0), column(0, 1, 0), 0.5, 0.5)
    assert adv[:, 0].tolist() == approx([1.25, 3.0, 4.0])
    assert ret[:, 0].tolist() == approx([2.25, 4.0, 6.0])


def test_gae_termination_does_not_bootstrap():
    # terminated at t = 1: delta_1 = 2 - 1 = 1 (next value 4 unused); A_0 = 0.5 + 0.25*1 = 0.75
    adv, _ = trpo.compute_gae(column(1, 2, 3), column(1, 1, 2), column(1, 4, 6),
                              column(0, 1, 0), column(0, 0, 0), 0.5, 0.5)
    assert adv[:, 0].tolist() == approx([0.75, 1.0, 4.0])


# ---------------------------------------------------------------------------------------
# The surrogate and the KL
# ---------------------------------------------------------------------------------------
def test_surrogate_by_hand():
    # ratios exp(log 0.5 - log 0.25) = 2 and 0.2/0.4 = 0.5; L = mean(2*1, 0.5*2) = 1.5
    value = trpo.surrogate(torch.log(tensor(0.5, 0.2)), torch.log(tensor(0.25, 0.4)),
                           tensor(1.0, 2.0))
    assert value.item() == approx(1.5)


def test_surrogate_gradient_at_the_old_policy_is_the_policy_gradient():
    # vpg.py's two-action example: logits [0, log 3], pi = [1/4, 3/4], actions 0 and 1 with
    # A = 2 and -1. At theta = theta_old, grad L = mean(A * (onehot(a) - pi))
    # = (1/2) * (2*[3/4, -3/4] - [-1/4, 1/4]) = [0.875, -0.875]
    z = torch.tensor([0.0, math.log(3.0)], requires_grad=True)
    logprob = torch.log_softmax(z, -1)
    trpo.surrogate(logprob, logprob.detach(), tensor(2.0, -1.0)).backward()
    assert z.grad.tolist() == approx([0.875, -0.875])


def test_mean_kl_by_hand():
    # state 0: KL([.5, .5] || [.25, .75]) = .5 log 2 + .5 log(2/3) = 0.346574 - 0.202733
    # = 0.143841; state 1: the same policy, KL 0; the mean 0.0719205
    old = Categorical(probs=torch.tensor([[0.5, 0.5], [0.5, 0.5]]))
    new = Categorical(probs=torch.tensor([[0.25, 0.75], [0.5, 0.5]]))
    assert trpo.mean_kl(old, new).item() == approx(0.0719205)


# ---------------------------------------------------------------------------------------
# Conjugate gradient on a 2 x 2 system: A = [[4, 1], [1, 3]], b = [1, 2]
# ---------------------------------------------------------------------------------------
A = torch.tensor([[4.0, 1.0], [1.0, 3.0]])


def test_conjugate_gradient_first_iteration_by_hand():
    # r_0 = p_0 = [1, 2];  A p_0 = [6, 7];  alpha = r.r / p.Ap = 5 / (6 + 14) = 0.25
    # x_1 = 0.25 * [1, 2] = [0.25, 0.5]
    x = trpo.conjugate_gradient(lambda v: A @ v, tensor(1.0, 2.0), iters=1)
    assert x.tolist() == approx([0.25, 0.5])


def test_conjugate_gradient_solves_a_two_by_two_system_in_two_iterations():
    # r_1 = [1, 2] - 0.25*[6, 7] = [-0.5, 0.25], r.r = 0.3125, beta = 0.3125 / 5 = 0.0625
    # p_1 = [-0.5, 0.25] + 0.0625*[1, 2] = [-0.4375, 0.375];  A p_1 = [-1.375, 0.6875]
    # alpha = 0.3125 / (0.6015625 + 0.2578125) = 0.3125 / 0.859375 = 4/11
    # x_2 = [0.25, 0.5] + 4/11 * [-0.4375, 0.375] = [1/11, 7/11], and A x_2 = [1, 2]
    x = trpo.conjugate_gradient(lambda v: A @ v, tensor(1.0, 2.0), iters=2)
    assert x.tolist() == pytest.approx([1 / 11, 7 / 11], abs=1e-6)
    more = trpo.conjugate_gradient(lambda v: A @ v, tensor(1.0, 2.0), iters=10)
    assert more.tolist() == pytest.approx([1 / 11, 7 / 11], abs=1e-6)  # stops at residual 0


def test_conjugate_gradient_of_a_zero_gradient_is_zero_without_a_product():
    calls = []
    x = trpo.conjugate_gradient(lambda v: calls.append(v) or A @ v, tensor(0.0, 0.0), iters=10)
    assert x.tolist() == [0.0, 0.0]
    assert calls == [], "with b = 0 the residual is 0 from the start: no product A v is taken"


# ---------------------------------------------------------------------------------------
# The Fisher-vector product of a tiny categorical policy: one state, its logits theta are
# the parameters, pi_old = softmax(theta_old) = [0.5, 0.25, 0.25]. The Hessian of
# KL(pi_old || softmax(theta)) at theta_old is F = diag(p) - p p^T:
#   F = [[ 0.25,   -0.125,  -0.125 ],
#        [-0.125,   0.1875, -0.0625],
#        [-0.125,  -0.0625,  0.1875]]
# ---------------------------------------------------------------------------------------
P_OLD = tensor(0.5, 0.25, 0.25)


def tiny_policy():
    """(theta, kl_fn): logits at theta_old and the mean KL from the fixed pi_old."""
    theta = torch.log(P_OLD).clone().requires_grad_()
    old = Categorical(probs=P_OLD)
    return theta, lambda: trpo.mean_kl(old, Categorical(logits=theta.unsqueeze(0)))


def test_fisher_vector_product_against_the_fisher_matrix_written_out():
    # v = [1, 0, -1]: F v = [0.25 + 0.125, -0.125 + 0.0625, -0.125 - 0.1875]
    #                     = [0.375, -0.0625, -0.3125];  damping 0.1 adds 0.1 * v
    theta, kl_fn = tiny_policy()
    v = tensor(1.0, 0.0, -1.0)
    assert trpo.fisher_vector_product(kl_fn, [theta], v, 0.0).tolist() == \
        approx([0.375, -0.0625, -0.3125])
    assert trpo.fisher_vector_product(kl_fn, [theta], v, 0.1).tolist() == \
        approx([0.475, -0.0625, -0.4125])
    fisher = torch.diag(P_OLD) - torch.outer(P_OLD, P_OLD)
    w = tensor(0.3, -2.0, 0.7)
    assert torch.allclose(trpo.fisher_vector_product(kl_fn, [theta], w, 0.0), fisher @ w, atol=1e-6)


def test_natural_step_reaches_the_edge_of_the_trust_region():
    # x = [1, 0, -1], F x = [0.375, -0.0625, -0.3125], x^T F x = 0.375 + 0.3125 = 0.6875
    # beta = sqrt(2 * 0.01 / 0.6875) = sqrt(0.0290909) = 0.170561
    # 0.5 * step^T F step = 0.5 * 0.0290909 * 0.6875 = 0.01 = delta
    step = trpo.natural_step(tensor(1.0, 0.0, -1.0), tensor(0.375, -0.0625, -0.3125), 0.01)
    assert step.tolist() == approx([0.170561, 0.0, -0.170561])


# ---------------------------------------------------------------------------------------
# The line search on made-up surrogates: one parameter x, starting at x = 0
# ---------------------------------------------------------------------------------------
def made_up(surrogate_fn, kl_fn, calls):
    def evaluate(params):
        calls.append(params.item())
        return surrogate_fn(params.item()), kl_fn(params.item())
    return evaluate


def test_line_search_accepts_the_full_step():
    # L(x) = -(x - 1)^2, KL(x) = x^2 / 2: x = 1 gives L = 0 > L(0) = -1 and KL 0.5 <= 1
    calls = []
    params, fraction, kl = trpo.line_search(made_up(lambda x: -(x - 1) ** 2, lambda x: x * x / 2,
                                                    calls), tensor(0.0), tensor(1.0), 1.0, 0.5, 10)
    assert (params.item(), fraction, kl) == (1.0, 1.0, 0.5)
    assert calls == [0.0, 1.0], "evaluate: L(old_params) first, then each try until one is kept"


def test_line_search_shrinks_until_the_surrogate_improves():
    # KL(x) = x^2 / 16 stays within delta = 1 up to x = 4. Step 4, coef 0.5: x = 4 gives
    # L = -9 (worse), x = 2 gives L = -1 (equal to L(0) = -1: not an improvement), x = 1
    # gives L = 0 with KL 1/16 = 0.0625: kept, fraction 0.25
    calls = []
    params, fraction, kl = trpo.line_search(made_up(lambda x: -(x - 1) ** 2, lambda x: x * x / 16,
                                                    calls), tensor(0.0), tensor(4.0), 1.0, 0.5, 10)
    assert (params.item(), fraction, kl) == (1.0, 0.25, 0.0625)
    assert calls == [0.0, 4.0, 2.0, 1.0], (
        "evaluate: L(old_params) first, then each try until one is kept")


def test_line_search_shrinks_until_the_kl_is_within_delta():
    # L(x) = x improves at every x > 0; KL(x) = x^2 / 2 with delta = 0.5: KL(4) = 8 and
    # KL(2) = 2 are too far, KL(1) = 0.5 is on the edge: kept, fraction 0.25
    calls = []
    params, fraction, kl = trpo.line_search(made_up(lambda x: x, lambda x: x * x / 2, calls),
                                            tensor(0.0), tensor(4.0), 0.5, 0.5, 10)
    assert (params.item(), fraction, kl) == (1.0, 0.25, 0.5)
    assert calls == [0.0, 4.0, 2.0, 1.0], (
        "evaluate: L(old_params) first, then each try until one is kept")


def test_line_search_refuses_a_kl_just_beyond_delta():
    # The accept test is KL <= delta itself, not baselines' 1.5 delta: L(x) = x improves,
    # KL(x) = x^2 / 2 with delta = 0.4. The full step x = 1 has KL 0.5 > 0.4 (within
    # 1.5 * 0.4 = 0.6, which must not count); x = 0.5 has KL 0.125 <= 0.4: kept, fraction 0.5
    calls = []
    params, fraction, kl = trpo.line_search(made_up(lambda x: x, lambda x: x * x / 2, calls),
                                            tensor(0.0), tensor(1.0), 0.4, 0.5, 10)
    assert (params.item(), fraction, kl) == (0.5, 0.5, 0.125) and calls == [0.0, 1.0, 0.5]


def test_line_search_rejects_and_puts_the_old_parameters_back():
    # L(x) = -x^2 is worse at every x != 0: 3 tries (1, 0.5, 0.25), then x = 0 again
    calls = []
    params, fraction, kl = trpo.line_search(made_up(lambda x: -x * x, lambda x: 0.0, calls),
                                            tensor(0.0), tensor(1.0), 1.0, 0.5, 3)
    assert (params.item(), fraction, kl) == (0.0, 0.0, 0.0)
    assert calls == [0.0, 1.0, 0.5, 0.25, 0.0], (
        "every try rejected: evaluate(old_params) last, which puts the old parameters back")


def test_the_kl_of_the_accepted_step_is_within_delta():
    # The tiny categorical policy, one state sampled three times with actions 0, 1, 2 and
    # advantages [1, -1, 0]: the whole update (g, conjugate gradient, the step, the line
    # search) keeps a step whose KL, written out as sum p_old log(p_old / p_new), is within
    # delta and, the step being scaled to the radius, close to it.
    theta, kl_fn = tiny_policy()
    actions, advantages = torch.tensor([0, 1, 2]), tensor(1.0, -1.0, 0.0)
    old_logprob = torch.log(P_OLD)[actions]
    g, = torch.autograd.grad(trpo.surrogate(torch.log_softmax(theta, -1)[actions], old_logprob,
                                            advantages), theta)
    fvp = lambda v: trpo.fisher_vector_product(kl_fn, [theta], v, 0.0)
    x = trpo.conjugate_gradient(fvp, g, iters=10)
    step = trpo.natural_step(x, fvp(x), 0.05)

    def evaluate(params):
        with torch.no_grad():
            theta.copy_(params)
            return (trpo.surrogate(torch.log_softmax(theta, -1)[actions], old_logprob, advantages),
                    kl_fn())

    params, fraction, kl = trpo.line_search(evaluate, theta.detach().clone(), step, 0.05, 0.8, 10)
    p_new = torch.softmax(params, -1)
    by_hand = (P_OLD * torch.log(P_OLD / p_new)).sum().item()
    assert fraction > 0, "a step was accepted"
    assert kl == pytest.approx(by_hand, abs=1e-6)
    assert 0.03 < by_hand <= 0.05, "the accepted step's KL is within delta 0.05, and near it"


# ---------------------------------------------------------------------------------------
# The buffer and the agent
# ---------------------------------------------------------------------------------------
def test_buffer_next_values_use_following_obs_last_obs_and_final_obs():
    buffer = trpo.RolloutBuffer(3, 2, (1,), (), False, "cpu")
    buffer.obs[:, :, 0] = torch.tensor([[0.0, 0.1], [1.0, 1.1], [2.0, 2.1]])
    buffer.last_obs[:, 0] = torch.tensor([3.0, 3.1])
    buffer.truncated[0, 1] = True
    buffer.terminated[1, 1] = True
    buffer.final_obs[0, 1, 0] = 0.7
    value_fn = lambda obs: 10 * obs[..., 0]
    next_values = buffer.next_values(value_fn, value_fn(buffer.obs))
    # column 0: 10, 20, 30; column 1: V(final) = 7, then 21 (unused), then V(last) = 31
    assert torch.allclose(next_values, torch.tensor([[10.0, 7.0], [20.0, 21.0], [30.0, 31.0]]))


def test_the_policy_parameters_are_the_actor_and_its_log_std():
    discrete, continuous = trpo.Agent((3,), 2, False), trpo.Agent((3,), 2, True)
    assert len(discrete.policy_parameters()) == 6 and len(continuous.policy_parameters()) == 7
    assert continuous.policy_parameters()[-1] is continuous.actor_logstd
    assert not {id(p) for p in continuous.critic.parameters()} & \
        {id(p) for p in continuous.policy_parameters()}


# ---------------------------------------------------------------------------------------
# Glue: what the loop gives the math
# ---------------------------------------------------------------------------------------
def test_the_truncated_step_bootstraps_from_the_value_of_its_final_observation(tmp_path,
                                                                                 monkeypatch):
    # CountToThree-v0 (conftest.py): each environment sees 0, 1, 2, (cut) 0. With V(s) = 10*s,
    # compute_gae must get values 10*[0, 1, 2, 0] and next_values [10, 20, 30, 10]: at the
    # truncated step V(final obs 3) = 30, not V(0) of the next episode.
    built = trpo.Agent.__init__

    def build_with_critic_by_hand(self, *args, **kwargs):
        built(self, *args, **kwargs)
        self.critic = TenTimesObs()

    monkeypatch.setattr(trpo.Agent, "__init__", build_with_critic_by_hand)
    seen = []
    original = trpo.compute_gae

    def spy(rewards, values, next_values, terminated, truncated, *rest):
        seen.append((values.clone(), next_values.clone(), truncated.clone()))
        return original(rewards, values, next_values, terminated, truncated, *rest)

    monkeypatch.setattr(trpo, "compute_gae", spy)
    trpo.main(trpo.Args(env_id="CountToThree-v0", total_timesteps=8, num_envs=2, num_steps=4,
                        vf_minibatches=2, eval_episodes=0, output_dir=str(tmp_path)))
    values, next_values, truncated = seen[0]
    assert values.tolist() == [[0.0, 0.0], [10.0, 10.0], [20.0, 20.0], [0.0, 0.0]]
    assert next_values.tolist() == [[10.0, 10.0], [20.0, 20.0], [30.0, 30.0], [10.0, 10.0]]
    assert truncated[:, 0].tolist() == [False, False, True, False]


def test_old_logprobs_and_the_kl_are_those_of_the_policy_that_collected_the_batch(
        tmp_path, monkeypatch):
    # Every surrogate of an update (the gradient's at theta_old, the line search's at each
    # try) divides by the log-probabilities stored while acting; the first is taken at
    # theta_old itself, so its ratios are 1. The KL that the update reports, and keeps
    # within delta, is the KL from a copy of the policy taken before the update (the one
    # that acted) to the policy after it, on the batch's observations.
    stored, surrogates, checked = [], [], []
    original_gae, original_surrogate = trpo.RolloutBuffer.gae, trpo.surrogate
    original_step = trpo.trust_region_step

    def spy_gae(self, *args):
        stored.append(self.logprobs.flatten().clone())
        surrogates.append([])
        return original_gae(self, *args)

    def spy_surrogate(newlogprob, oldlogprob, advantages):
        surrogates[-1].append((newlogprob.detach().clone(), oldlogprob.clone()))
        return original_surrogate(newlogprob, oldlogprob, advantages)

    def spy_step(agent, obs, actions, old_logprobs, advantages, args):
        before = copy.deepcopy(agent)
        diagnostics = original_step(agent, obs, actions, old_logprobs, advantages, args)
        with torch.no_grad():
            kl = torch.distributions.kl_divergence(before.distribution(obs),
                                                   agent.distribution(obs)).mean().item()
        checked.append((diagnostics, kl))
        return diagnostics

    monkeypatch.setattr(trpo.RolloutBuffer, "gae", spy_gae)
    monkeypatch.setattr(trpo, "surrogate", spy_surrogate)
    monkeypatch.setattr(trpo, "trust_region_step", spy_step)
    trpo.main(trpo.Args(total_timesteps=768, num_envs=2, num_steps=128, eval_episodes=0,
                        output_dir=str(tmp_path)))
    assert len(stored) == len(checked) == 3
    for logprobs, calls in zip(stored, surrogates):
        assert len(calls) >= 3  # the gradient's, L(theta_old) of the line search, a try
        assert torch.allclose(calls[0][0], logprobs, atol=1e-6)  # theta_old: ratio 1
        assert all(torch.equal(old, logprobs) for _, old in calls)
    for diagnostics, kl in checked:
        assert diagnostics["step_fraction"] > 0 and 0 < kl <= 0.01
        assert diagnostics["kl"] == pytest.approx(kl, rel=1e-4)


def with_critic_by_hand(monkeypatch, actor=None):
    """Build trpo.py's agents with the critic V(s) = 10*s (and the given actor, if any)."""
    built = trpo.Agent.__init__

    def build(self, *args, **kwargs):
        built(self, *args, **kwargs)
        self.critic = TenTimesObs()
        if actor is not None:
            self.actor = actor()

    monkeypatch.setattr(trpo.Agent, "__init__", build)


@pytest.mark.parametrize("norm_adv", [False, True])
def test_the_policy_step_gets_the_gae_advantages_and_the_critic_regresses_on_the_returns(
        tmp_path, monkeypatch, norm_adv):
    # The batch above (V(s) = 10*s: values [0, 10, 20, 0], next values [10, 20, 30, 10]),
    # rewards 1, gamma 0.5, lambda 0.25:
    #   delta_t = 1 + 0.5*next_value_t - V_t = [1 + 5 - 0, 1 + 10 - 10, 1 + 15 - 20, 1 + 5 - 0]
    #           = [6, 1, -4, 6]
    #   A_3 = 6;  A_2 = -4 (the episode was cut);  A_1 = 1 + 0.5*0.25*(-4) = 0.5;
    #   A_0 = 6 + 0.125*0.5 = 6.0625;  returns A + V = [6.0625, 10.5, 16, 6]
    # The trust-region step gets A (standardized over the batch with --norm-adv) and the
    # value network regresses on the returns, each epoch's minibatches covering the batch.
    with_critic_by_hand(monkeypatch)
    given, regressed = [], []
    original_step, original_value_loss = trpo.trust_region_step, trpo.value_loss

    def spy_step(agent, obs, actions, old_logprobs, advantages, args):
        given.append(advantages.clone())
        return original_step(agent, obs, actions, old_logprobs, advantages, args)

    monkeypatch.setattr(trpo, "trust_region_step", spy_step)
    monkeypatch.setattr(trpo, "value_loss", lambda values, returns: (
        regressed.append(returns.clone()), original_value_loss(values, returns))[1])
    trpo.main(trpo.Args(env_id="CountToThree-v0", total_timesteps=8, num_envs=2, num_steps=4,
                        vf_minibatches=2, vf_iters=1, gamma=0.5, gae_lambda=0.25,
                        norm_adv=norm_adv, eval_episodes=0, output_dir=str(tmp_path)))
    both = lambda values: [v for v in values for _ in range(2)]  # two environments alike
    advantages = torch.tensor(both([6.0625, 0.5, -4.0, 6.0]))
    if norm_adv:
        advantages = (advantages - advantages.mean()) / advantages.std()
    (advantages_given,) = given
    assert advantages_given.tolist() == pytest.approx(advantages.tolist(), abs=1e-5)
    assert sorted(torch.cat(regressed).tolist()) == approx(sorted(both([6.0625, 10.5, 16.0, 6.0])))


def test_the_explained_variance_row_takes_the_values_stored_while_acting(tmp_path, monkeypatch):
    # The batch above with a critic V(s) = w*s that learns, w = 10 while acting: the stored
    # values are V = [0, 10, 20, 0], the returns R = A + V = [6.0625, 10.5, 16, 6], and
    # updates.csv's explained variance is that of the stored values, not of the critic refitted
    # after the value steps (at --vf-learning-rate 0.5 w leaves 10 by about 0.5 a step):
    #   R - V = [6.0625, 0.5, -4, 6], mean 2.140625, Var 70.6748 / 4 = 17.668701
    #   R, mean 9.640625, Var 67.2373 / 4 = 16.809326
    #   1 - 17.668701 / 16.809326 = -0.0511249 (two environments alike: the same variances)
    # Its value_loss is the last value step's 0.5 * mean((V - R)^2) of its minibatch, with V as
    # the critic gave it then (not the refitted critic's loss over the whole batch).
    built = trpo.Agent.__init__
    critics, regressed, original_value_loss = [], [], trpo.value_loss

    def build(self, *args, **kwargs):
        built(self, *args, **kwargs)
        self.critic = LearnedTenTimesObs()
        critics.append(self.critic)

    monkeypatch.setattr(trpo.Agent, "__init__", build)
    monkeypatch.setattr(trpo, "value_loss", lambda values, returns: (
        regressed.append((values.detach().clone(), returns.clone())),
        original_value_loss(values, returns))[1])
    trpo.main(trpo.Args(env_id="CountToThree-v0", total_timesteps=8, num_envs=2, num_steps=4,
                        vf_minibatches=2, vf_iters=1, vf_learning_rate=0.5, gamma=0.5,
                        gae_lambda=0.25, norm_adv=False, eval_episodes=0,
                        output_dir=str(tmp_path)))
    (critic,) = critics
    assert abs(critic.w.item() - 10) > 0.5  # the value steps moved the critic
    (row,) = read_csv(next(tmp_path.glob("*/updates.csv")))
    assert float(row["explained_variance"]) == pytest.approx(-0.0511249, abs=1e-6)
    values, returns = regressed[-1]
    assert float(row["value_loss"]) == pytest.approx(0.5 * ((values - returns) ** 2).mean().item(),
                                                     rel=1e-5)


def test_the_step_solves_the_damped_fisher_system_scales_it_to_delta_and_logs_its_kl(
        tmp_path, monkeypatch):
    # A policy small enough to write its Fisher matrix out: logits = W s + b, 4 parameters,
    # on CountToThree-v0's observations. F is the Hessian of the batch's mean
    # KL(pi_old || pi_theta) at theta_old, computed here by torch.autograd.functional.hessian;
    # g is the surrogate's gradient at theta_old, mean(A * grad log pi_theta(a|s)). With
    # --cg-damping c = 0.5, --cg-iters 4 (exact for 4 parameters), --max-kl delta = 0.02 and
    # the advantages as they are (--no-norm-adv):
    #   conjugate_gradient runs 4 iterations on b = g and returns x = (F + c I)^-1 g
    #   the full step is sqrt(2 delta / (x^T (F + c I) x)) * x
    #   the line search bounds the KL by delta (not c) and tries up to --backtrack-iters 7 steps
    #   updates.csv's kl is the KL of the step taken (below)
    with_critic_by_hand(monkeypatch, actor=lambda: torch.nn.Linear(1, 2))
    seen = {}
    original_step, original_cg = trpo.trust_region_step, trpo.conjugate_gradient
    original_search = trpo.line_search

    def spy_step(agent, obs, actions, old_logprobs, advantages, args):
        seen["batch"] = (obs.clone(), actions.clone(), advantages.clone())
        seen["theta_old"] = torch.nn.utils.parameters_to_vector(agent.actor.parameters()).detach().clone()
        seen["agent"] = agent
        return original_step(agent, obs, actions, old_logprobs, advantages, args)

    def spy_cg(matrix_vector_product, b, iters, *rest):
        x = original_cg(matrix_vector_product, b, iters, *rest)
        seen["cg"] = (b.detach().clone(), iters, x.detach().clone())
        return x

    def spy_search(evaluate, old_params, full_step, max_kl, coef, iters):
        seen["search"] = (full_step.detach().clone(), max_kl, coef, iters)
        return original_search(evaluate, old_params, full_step, max_kl, coef, iters)

    monkeypatch.setattr(trpo, "trust_region_step", spy_step)
    monkeypatch.setattr(trpo, "conjugate_gradient", spy_cg)
    monkeypatch.setattr(trpo, "line_search", spy_search)
    trpo.main(trpo.Args(env_id="CountToThree-v0", total_timesteps=8, num_envs=2, num_steps=4,
                        vf_minibatches=2, cg_damping=0.5, cg_iters=4, max_kl=0.02,
                        backtrack_coef=0.6, backtrack_iters=7, norm_adv=False, eval_episodes=0,
                        output_dir=str(tmp_path)))
    obs, actions, advantages = seen["batch"]
    theta_old = seen["theta_old"]

    def logits(theta):  # theta = [W (2 x 1), b (2)], as parameters_to_vector lays them out
        return obs @ theta[:2].reshape(2, 1).T + theta[2:]

    old = Categorical(logits=logits(theta_old))
    fisher = torch.autograd.functional.hessian(
        lambda theta: torch.distributions.kl_divergence(old, Categorical(logits=logits(theta))).mean(),
        theta_old)
    theta = theta_old.clone().requires_grad_()
    logprob = Categorical(logits=logits(theta)).log_prob(actions)
    (g,) = torch.autograd.grad((torch.exp(logprob - logprob.detach()) * advantages).mean(), theta)
    damped = fisher + 0.5 * torch.eye(4)
    b, iters, x = seen["cg"]
    assert b.tolist() == pytest.approx(g.tolist(), abs=1e-6) and iters == 4
    assert x.tolist() == pytest.approx(torch.linalg.solve(damped, g).tolist(), rel=1e-3, abs=1e-6)
    full_step, max_kl, coef, search_iters = seen["search"]
    expected = torch.sqrt(2 * 0.02 / (x @ damped @ x)) * x
    assert full_step.tolist() == pytest.approx(expected.tolist(), rel=1e-3, abs=1e-6)
    assert (max_kl, coef, search_iters) == (0.02, 0.6, 7)
    # Scaled with the damped product: 0.5 s^T (F + c I) s = delta, the quadratic model's
    # own KL 0.5 s^T F s falls short of it by 0.5 c |s|^2, and the step taken (here the whole
    # of it) has a KL far below delta. updates.csv logs that KL: the mean over the batch's
    # states of sum_a p_old(a|s) log(p_old(a|s) / p_new(a|s)), written out with the softmax
    # probabilities of theta before and after the update.
    assert 0.5 * (full_step @ damped @ full_step).item() == pytest.approx(0.02, rel=1e-3)
    assert 0.5 * (full_step @ fisher @ full_step).item() < 0.02
    theta_new = torch.nn.utils.parameters_to_vector(seen["agent"].actor.parameters()).detach()
    assert theta_new.tolist() == pytest.approx((theta_old + full_step).tolist(), abs=1e-6)
    p_old, p_new = torch.softmax(logits(theta_old), -1), torch.softmax(logits(theta_new), -1)
    by_hand = (p_old * torch.log(p_old / p_new)).sum(-1).mean().item()
    (row,) = read_csv(next(tmp_path.glob("*/updates.csv")))
    assert float(row["kl"]) == pytest.approx(by_hand, rel=1e-4) and 0 < by_hand < 0.01
    # The row's other diagnostics of the step: grad_norm |g|, step_fraction 1 (the whole
    # step), the entropy -sum_a p_old(a|s) log p_old(a|s) of the policy that acted, and
    # surrogate_gain L(theta_new) - L(theta_old) = mean(p_new(a|s) / p_old(a|s) * A) - mean(A)
    # (the ratio is 1 at theta_old): --no-norm-adv leaves mean(A) > 0, so L(theta_new) alone
    # would be another number.
    taken = torch.arange(len(actions)), actions
    gain = ((p_new[taken] / p_old[taken] * advantages).mean() - advantages.mean()).item()
    assert advantages.mean().item() > 1 and gain > 0  # mean(A) 18.56, the gain about 1
    assert float(row["surrogate_gain"]) == pytest.approx(gain, rel=1e-3)
    assert float(row["grad_norm"]) == pytest.approx(g.norm().item(), rel=1e-5)
    assert float(row["step_fraction"]) == 1.0
    assert float(row["entropy"]) == pytest.approx(
        -(p_old * p_old.log()).sum(-1).mean().item(), rel=1e-6)


def test_the_trust_region_step_moves_the_gaussians_log_std():
    # theta includes log sigma. Every observation 0, the actions mu(0) - 2 and mu(0) + 2 (two
    # standard deviations at sigma = 1), every advantage 1: at theta_old the surrogate's
    # gradient in the mean is mean(A (a - mu) / sigma^2) dmu/dtheta = (-2 + 2)/2 = 0, and in
    # log sigma mean(A ((a - mu)^2 / sigma^2 - 1)) = 4 - 1 = 3. The Fisher matrix of a
    # state-independent log sigma has no block between it and the mean, so the step leaves the
    # actor's weights where they were; in log sigma F = 2 (the KL's second derivative), and
    # with the defaults c = 0.1, delta = 0.01:
    #   x = 3 / (2 + 0.1),  full step = sqrt(2 delta / (x (F + c) x)) x = sqrt(0.02 / 2.1)
    #     = 0.09759, whose KL = s + exp(-2 s) / 2 - 1/2 = 0.00893 <= delta: taken whole.
    # updates.csv's entropy (these diagnostics) is that of pi_old, the policy that acted:
    # a Gaussian's 0.5 ln(2 pi e) + log sigma = 0.5 (1.837877 + 1) + 0 = 1.418939 at sigma = 1,
    # not the stepped policy's 1.418939 + 0.09759 = 1.516529.
    agent = trpo.Agent((1,), 1, True)
    obs = torch.zeros(2, 1)
    with torch.no_grad():
        mean = agent.actor(obs)
        actions = mean + torch.tensor([[-2.0], [2.0]])
        old_logprobs = agent.distribution(obs).log_prob(actions)
    weights = torch.nn.utils.parameters_to_vector(agent.actor.parameters()).detach().clone()
    stats = trpo.trust_region_step(agent, obs, actions, old_logprobs, torch.ones(2), filled())
    assert stats["grad_norm"] == pytest.approx(3.0, rel=1e-5) and stats["step_fraction"] == 1.0
    assert stats["entropy"] == pytest.approx(1.418939, abs=1e-6)
    assert agent.actor_logstd.item() == pytest.approx(0.09759, abs=1e-5)
    assert torch.nn.utils.parameters_to_vector(agent.actor.parameters()).tolist() == \
        pytest.approx(weights.tolist(), abs=1e-6)


def test_one_update_moves_every_weight_of_the_policy_and_the_critic(tmp_path, monkeypatch):
    # BoxCountToThree-v0 (a Gaussian policy), one batch of 2 * 4 steps: the trust-region step
    # moves the actor and log std, the value steps the critic: Adam at --vf-learning-rate,
    # --vf-iters 3 epochs of 2 minibatches, 6 steps
    moved = spy_on_weights(monkeypatch, trpo)
    agents = spy_on(monkeypatch, trpo, "train", lambda args, agent, *rest: agent)
    rates = spy_on(monkeypatch, torch.optim, "Adam", lambda params, lr: lr)
    value_steps = spy_on(monkeypatch, trpo, "value_loss", lambda values, returns: len(returns))
    seeds, resets = spy_on_seeds(monkeypatch, trpo)
    trpo.main(trpo.Args(env_id="BoxCountToThree-v0", total_timesteps=8, num_envs=2, num_steps=4,
                        vf_minibatches=2, vf_iters=3, vf_learning_rate=4e-3, hidden_size=8,
                        seed=7, eval_episodes=2, output_dir=str(tmp_path)))
    # torch's and the training environments' seed, then the final evaluation's, 7 + 100,000
    assert seeds == [7] and resets == [7, 100_007]
    (agent,) = agents
    assert agent.actor[0].out_features == agent.critic[0].out_features == 8  # --hidden-size
    ((still, changed),) = moved()
    assert still == [] and "actor_logstd" in changed
    assert rates == [4e-3] and value_steps == [4] * 6


def test_each_value_step_follows_its_own_minibatchs_gradient_alone(tmp_path, monkeypatch):
    # One batch of CountToThree-v0 (2 environments, 4 steps), --vf-iters 3 epochs of
    # --vf-minibatches 2: 6 steps of the critic's Adam. Every value_loss after the first is
    # multiplied by 0, so its gradient is exactly 0 at every weight: the first step is on the
    # gradient of 0.5 * mean((V - R)^2), not 0 in the critic's last layer, the 5 others on
    # exact zeros in all 6 of its weights and biases (the first gradient, not zeroed, would
    # still be there in each).
    regressed, grads, original_value_loss = [], [], trpo.value_loss
    monkeypatch.setattr(trpo, "value_loss", lambda values, returns: (
        regressed.append(returns), original_value_loss(values, returns) * (len(regressed) == 1))[1])
    original_step = torch.optim.Adam.step

    def step(self, *args, **kwargs):  # trpo.py's one Adam: the critic's
        grads.append([p.grad.clone() for p in self.param_groups[0]["params"]])
        return original_step(self, *args, **kwargs)

    monkeypatch.setattr(torch.optim.Adam, "step", step)
    trpo.main(trpo.Args(env_id="CountToThree-v0", total_timesteps=8, num_envs=2, num_steps=4,
                        vf_minibatches=2, vf_iters=3, eval_episodes=0, output_dir=str(tmp_path)))
    assert len(regressed) == len(grads) == 6
    assert all(g.abs().sum() > 0 for g in grads[0][-2:])  # the critic's last layer
    assert [sum(g.abs().sum().item() for g in later) for later in grads[1:]] == [0.0] * 5


def record_calls(monkeypatch, names):
    """Replace trpo's functions of these names by ones that note their name, then run them."""
    calls = []
    for name in names:
        original = getattr(trpo, name)
        monkeypatch.setattr(trpo, name, lambda *a, name=name, original=original: (
            calls.append(name), original(*a))[1])
    return calls


def policy_vector(agent):
    return torch.nn.utils.parameters_to_vector(agent.policy_parameters()).detach().clone()


def test_a_zero_gradient_skips_the_update_and_says_so(tmp_path, monkeypatch, capsys):
    # Every advantage equal: standardized over the batch (--norm-adv) each is
    # (1 - 1) / (0 + 1e-8) = 0, so g = mean(0 * grad log pi) = 0, and x = (F + c I)^-1 0 = 0
    # would be scaled by sqrt(2 delta / 0): a NaN step. Each of the 2 updates is skipped: no
    # conjugate gradient, no step, no line search, the policy as it was, a row of updates.csv
    # with grad_norm, step_fraction, kl and surrogate_gain 0, and a line that says so.
    original_gae, original_train = trpo.RolloutBuffer.gae, trpo.train

    def equal_advantages(self, *args):
        advantages, returns = original_gae(self, *args)
        return torch.ones_like(advantages), returns

    monkeypatch.setattr(trpo.RolloutBuffer, "gae", equal_advantages)
    calls = record_calls(monkeypatch, ("conjugate_gradient", "natural_step", "line_search"))
    started = []
    monkeypatch.setattr(trpo, "train", lambda args, agent, *rest: (
        started.append((agent, policy_vector(agent))), original_train(args, agent, *rest))[1])
    trpo.main(trpo.Args(total_timesteps=512, num_envs=2, num_steps=128, eval_episodes=0,
                        output_dir=str(tmp_path)))
    ((agent, theta_before),) = started
    assert calls == [] and torch.equal(policy_vector(agent), theta_before)
    rows = read_csv(next(tmp_path.glob("*/updates.csv")))
    assert len(rows) == 2 and {row[key] for row in rows for key in (
        "grad_norm", "step_fraction", "kl", "surrogate_gain")} == {"0.0"}
    assert capsys.readouterr().out.count(
        "trpo.py: the policy gradient is 0: no step on this batch") == 2


def test_a_non_finite_gradient_takes_no_step(monkeypatch, capsys):
    # An advantage of NaN makes g NaN: no direction, so no step is tried (the line search
    # would put NaN parameters into the policy) and the policy stays; the line says nan. The
    # surrogate gain is NaN too, which stops a run as non-finite (test_nan_loss_stops_cleanly).
    agent = trpo.Agent((1,), 2, False)
    obs, actions = torch.zeros(2, 1), torch.tensor([0, 1])
    with torch.no_grad():
        old_logprobs = agent.distribution(obs).log_prob(actions)
    theta_before = policy_vector(agent)
    calls = record_calls(monkeypatch, ("conjugate_gradient", "natural_step", "line_search"))
    stats = trpo.trust_region_step(agent, obs, actions, old_logprobs, tensor(math.nan, 1.0),
                                   filled())
    assert calls == [] and torch.equal(policy_vector(agent), theta_before)
    assert (stats["step_fraction"], stats["kl"]) == (0.0, 0.0) and math.isnan(stats["grad_norm"])
    assert "trpo.py: the policy gradient is nan: no step on this batch" in capsys.readouterr().out


def test_norm_obs_statistics_see_each_acted_on_observation_and_normalize_the_final_one(
        tmp_path, monkeypatch):
    check_norm_obs_on_count_to_three(trpo, "gae", tmp_path, monkeypatch)  # (conftest.py)


def test_gaussian_actions_are_clipped_for_the_environment_only(tmp_path, monkeypatch):
    check_gaussian_actions_clipped_for_the_environment_only(trpo, "gae", tmp_path,
                                                           monkeypatch)  # (conftest.py)


# ---------------------------------------------------------------------------------------
# The greedy policy (greedy_policy: the evaluation's actions)
# ---------------------------------------------------------------------------------------
def test_evaluation_normalizes_observations_with_the_frozen_statistics():
    check_evaluation_normalizes_with_the_frozen_statistics(trpo)  # (conftest.py)


@pytest.mark.parametrize("continuous", [False, True])
def test_the_evaluation_takes_the_policys_mode_not_a_sample(continuous, monkeypatch):
    agent = trpo.Agent((1,), 1 if continuous else 2, continuous=continuous)
    check_the_evaluation_takes_the_policys_mode(trpo, agent, continuous, monkeypatch)


def test_the_greedy_gaussian_mean_is_clipped_to_the_bounds():
    # BoxZeroToFour-v0 takes actions in [0, 4]: a mean of 7 is sent as 4, one of -2 as 0
    class Fixed(torch.nn.Module):
        def forward(self, obs):
            return torch.tensor([[mean]]).expand(len(obs), -1)

    envs = trpo.make_vector_env("BoxZeroToFour-v0", 2)
    for mean, sent in ((7.0, 4.0), (-2.0, 0.0)):
        agent = trpo.Agent((1,), 1, continuous=True)
        agent.actor = Fixed()
        act = trpo.greedy_policy({"agent": agent, "obs_rms": trpo.ObsNormalizer((1,), False)}, envs)
        assert act(np.zeros((2, 1)), {}).tolist() == [[sent], [sent]]
    envs.close()


def test_every_evaluation_reads_the_running_statistics_and_leaves_them_alone(tmp_path,
                                                                             monkeypatch):
    check_every_evaluation_reads_the_running_statistics_and_leaves_them_alone(
        trpo, tmp_path, monkeypatch, vf_minibatches=2)  # (conftest.py)


# ---------------------------------------------------------------------------------------
# Runs end to end
# ---------------------------------------------------------------------------------------
def test_a_run_logs_trpos_diagnostics_and_its_model_evaluates_as_it_was(tmp_path):
    # updates.csv: a row per batch (4 of 2 * 128 steps), the common columns and trpo.py's own,
    # each of them in the event files under losses/ (the block's rule), every step within the
    # trust region (--max-kl 0.01) and gaining; model.pt, evaluated by --eval-checkpoint,
    # scores what the run's own final evaluation scored
    args = filled(total_timesteps=1024, num_envs=2, num_steps=128, eval_episodes=2,
                     save_model=True, output_dir=str(tmp_path / "train"))
    summary = trpo.main(args)
    (path,) = (tmp_path / "train").iterdir()
    updates = read_csv(path / "updates.csv")
    assert summary["global_steps"] == 1024 and len(updates) == 4
    own = ["value_loss", "surrogate_gain", "grad_norm", "step_fraction", "kl", "entropy",
           "explained_variance"]
    assert sorted(updates[0]) == sorted(["global_step", "wall_time", "sps", *own])
    tags = EventAccumulator(str(path)).Reload().Tags()["scalars"]
    assert {f"losses/{name}" for name in own} <= set(tags)
    assert all(0 <= float(u["kl"]) <= 0.01 and float(u["surrogate_gain"]) >= 0 for u in updates)
    evaluated = trpo.main(trpo.Args(eval_checkpoint=str(path / "model.pt"), eval_episodes=2,
                                    output_dir=str(tmp_path / "eval")))
    assert evaluated["eval_return_mean"] == summary["eval_return_mean"]


def test_the_checkpoint_keeps_the_statistics_and_the_networks_flags(tmp_path):
    # --hidden-size 32 and --norm-obs come from model.pt (MODEL_FLAGS) when it is evaluated
    # with neither flag given, and the running statistics with it (obs_rms, the training
    # normalizer's: 2 * 400 observations and the reset's) and the Gaussian's log std; raw
    # returns in episodes.csv
    args = filled(env_id="Pendulum-v1", total_timesteps=800, num_envs=2, num_steps=200,
                     eval_episodes=2, save_model=True, norm_obs=True, norm_reward=True,
                     hidden_size=32, vf_minibatches=4, output_dir=str(tmp_path / "train"))
    summary = trpo.main(args)
    (path,) = (tmp_path / "train").iterdir()
    episodes = read_csv(path / "episodes.csv")
    assert [e["episode_length"] for e in episodes] == ["200"] * 4
    assert float(episodes[0]["episode_return"]) < 0  # raw returns, not normalized rewards
    assert all(float(u["kl"]) <= 0.01 for u in read_csv(path / "updates.csv"))
    state = torch.load(path / "model.pt", weights_only=True)
    assert state["obs_rms"]["count"] > 800 and state["obs_rms"]["mean"].shape == (3,)
    assert state["agent"]["actor.0.weight"].shape == (32, 3) and "actor_logstd" in state["agent"]
    evaluated = trpo.main(trpo.Args(env_id="Pendulum-v1", eval_checkpoint=str(path / "model.pt"),
                                    eval_episodes=2, output_dir=str(tmp_path / "eval")))
    assert evaluated["eval_return_mean"] == pytest.approx(summary["eval_return_mean"])
    assert trpo.MODEL_FLAGS == ("hidden_size", "norm_obs")


def test_each_ended_episode_is_logged_at_its_step_and_each_batch_makes_a_row(tmp_path):
    # my_envs:EpisodeNumber-v0 at --seed 0, 2 environments: environment 0 ends an episode at
    # every vector step t paying t, environment 1 one every 3 steps paying 3j = t, so each
    # episode that ends at vector step t (global step 2t) returns t, in 1 step or 3.
    # Batches of 2 * 12 steps make rows at 24 and 48.
    importlib.import_module("my_envs")  # registers the id anew after fresh_env_module's tests
    trpo.main(trpo.Args(env_id="my_envs:EpisodeNumber-v0", seed=0, num_envs=2, num_steps=12,
                        vf_minibatches=4, total_timesteps=48, eval_episodes=0,
                        output_dir=str(tmp_path)))
    (path,) = tmp_path.iterdir()
    expected = [(2 * t, t, length) for t in range(1, 25) for length in (1, 3)[:1 + (t % 3 == 0)]]
    assert [(int(e["global_step"]), float(e["episode_return"]), int(e["episode_length"]))
            for e in read_csv(path / "episodes.csv")] == expected
    assert [int(u["global_step"]) for u in read_csv(path / "updates.csv")] == [24, 48]


def test_stop_at_return_stops_and_records_when(tmp_path):
    summary = trpo.main(trpo.Args(stop_at_return=1.0, eval_episodes=0, output_dir=str(tmp_path)))
    episodes = read_csv(next(tmp_path.glob("*/episodes.csv")))
    assert len(episodes) >= 20 and summary["solved_at_step"] == int(episodes[19]["global_step"])
    assert summary["global_steps"] == summary["solved_at_step"]


def test_the_budget_is_rounded_down_to_whole_batches(tmp_path):
    # 2,000 steps in batches of 2 * 64 = 128: 15 whole batches, 1,920 steps.
    summary = trpo.main(trpo.Args(total_timesteps=2000, num_envs=2, num_steps=64, eval_episodes=0,
                                output_dir=str(tmp_path)))
    assert summary["global_steps"] == 1920


@pytest.mark.parametrize("loss", ["value_loss", "surrogate"])
def test_nan_loss_stops_cleanly(tmp_path, monkeypatch, capsys, loss):
    # Either loss made NaN stops the run after the first batch of 2 * 128 = 256 steps: the
    # critic's, or the policy's surrogate (g is NaN, so no step is tried and the surrogate
    # gain L(new) - L(old) is NaN while the value loss stays finite)
    original = getattr(trpo, loss)
    monkeypatch.setattr(trpo, loss, lambda *a: original(*a) * math.nan)
    summary = trpo.main(trpo.Args(total_timesteps=1024, num_envs=2, num_steps=128,
                                  output_dir=str(tmp_path)))
    assert summary["interrupted"] is True and summary["global_steps"] == 256
    assert "the loss became non-finite (NaN or inf) at step 256" in capsys.readouterr().out


@pytest.mark.slow  # determinism: two whole runs
def test_same_seed_gives_the_same_episodes(tmp_path):
    rows = same_seed_episodes(lambda out: trpo.main(trpo.Args(
        total_timesteps=2048, num_envs=4, num_steps=64, eval_episodes=0, output_dir=out)),
        tmp_path)
    assert len(rows) > 20


# ---------------------------------------------------------------------------------------
# Bad input of trpo.py's own (check_flags, check_spaces): one line on stderr, exit status 2
# ---------------------------------------------------------------------------------------
@pytest.mark.parametrize("argv, message", [
    (["--env-id", "SpinTheBits-v0"], "MultiBinary action space of shape (3,); trpo.py handles "
     "Discrete and flat Box actions"),
    (["--env-id", "Taxi-v4"], "Discrete observation space of shape (); trpo.py needs a flat Box"),
    (["--num-envs", "3", "--num-steps", "5", "--vf-minibatches", "4"],
     "num_envs*num_steps = 15 is not divisible by --vf-minibatches 4"),
    (["--max-kl", "0"], "--max-kl must be positive"),
    (["--cg-iters", "0"], "--cg-iters must be positive"),
    (["--cg-damping", "-1"], "--cg-damping must be positive"),
    (["--backtrack-coef", "1"], "--backtrack-coef must be in (0, 1)"),
    (["--backtrack-iters", "0"], "--backtrack-iters must be positive"),
    (["--vf-iters", "0"], "--vf-iters must be positive"),
    (["--total-timesteps", "100"], "less than one rollout"),
    (["--gamma", "-0.5"], "--gamma must be in [0, 1]"),
    (["--gae-lambda", "1.5"], "--gae-lambda must be in [0, 1]"),
])
def test_bad_input_is_one_line_and_exit_status_2(argv, message, check_usage_error):
    check_usage_error("trpo.py", argv, message)


def test_a_checkpoints_evaluation_needs_no_rollout_of_the_budget():
    # --total-timesteps below one rollout is fine with --eval-checkpoint (nothing trains), and
    # the rollout's check leaves a non-positive budget to the block's own line
    trpo.check_flags(filled(total_timesteps=100, eval_checkpoint="model.pt"))
    trpo.check_flags(filled(total_timesteps=0))
    with pytest.raises(trpo.UsageError, match="--total-timesteps must be positive"):
        trpo.check_args(filled(total_timesteps=-5))

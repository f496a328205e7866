"""Tests of ppo.py: the math by hand, the buffer, runs end to end, bad input, determinism."""
import json
import math
import os

import gymnasium as gym
import numpy as np
import pytest
import torch

import ppo
from conftest import (approx, check_an_evaluation_trains_nothing, check_the_logged_returns,
                      check_the_evaluation_takes_the_policys_mode,
                      check_evaluation_normalizes_with_the_frozen_statistics, check_evaluations,
                      check_every_evaluation_reads_the_running_statistics_and_leaves_them_alone,
                      check_named_and_tracked, check_the_epochs_kl_and_clipfrac, interrupt_on_call,
                      read_csv, received_actions, run_folder_env, same_seed_episodes, spy_on,
                      spy_on_adam, spy_on_seeds, spy_on_weights, tensor, unreadable_checkpoints)


def column(*values):
    """A [T, 1] tensor: one environment's values over T steps."""
    return torch.tensor(values, dtype=torch.float32).unsqueeze(1)


# ---------------------------------------------------------------------------------------
# GAE by hand. Three steps of one environment, gamma = 0.5 and lambda = 0.5, so
# gamma * lambda = 0.25, rewards 1, values V(s_t) = [0.5, 1.0, 2.0].
# ---------------------------------------------------------------------------------------
REWARDS, VALUES = column(1, 1, 1), column(0.5, 1.0, 2.0)
NO_END = column(0, 0, 0)
END_AT_1 = column(0, 1, 0)


def test_gae_without_episode_end():
    # next_values = [1.0, 2.0, 4.0] (V(s_3) = 4.0 after the rollout)
    # delta = 1 + 0.5*[1, 2, 4] - [0.5, 1, 2] = [1.0, 1.0, 1.0]
    # A_2 = 1.0;  A_1 = 1 + 0.25*1.0 = 1.25;  A_0 = 1 + 0.25*1.25 = 1.3125
    # returns = A + V = [1.8125, 2.25, 3.0]
    adv, ret = ppo.compute_gae(REWARDS, VALUES, column(1.0, 2.0, 4.0), NO_END, NO_END, 0.5, 0.5)
    assert torch.allclose(adv, column(1.3125, 1.25, 1.0))
    assert torch.allclose(ret, column(1.8125, 2.25, 3.0))
    # lambda 1 apart from gamma 0.5 (gamma is delta's, gamma * lambda the trace's): delta stays
    # [1, 1, 1]; A_2 = 1;  A_1 = 1 + 0.5*1 = 1.5;  A_0 = 1 + 0.5*1.5 = 1.75
    adv, _ = ppo.compute_gae(REWARDS, VALUES, column(1.0, 2.0, 4.0), NO_END, NO_END, 0.5, 1.0)
    assert torch.allclose(adv, column(1.75, 1.5, 1.0))


def test_gae_termination_mid_rollout_does_not_bootstrap():
    # terminated at t = 1; next_values[1] = 7.0 is the next episode's first value: unused.
    # delta_0 = 1 + 0.5*1 - 0.5 = 1.0;  delta_1 = 1 + 0 - 1 = 0;  delta_2 = 1 + 0.5*4 - 2 = 1.0
    # A_2 = 1.0;  A_1 = 0 + 0.25*(1 - done_1)*A_2 = 0;  A_0 = 1 + 0.25*0 = 1.0
    # returns = [1.5, 1.0, 3.0]
    adv, ret = ppo.compute_gae(REWARDS, VALUES, column(1.0, 7.0, 4.0), END_AT_1, NO_END, 0.5, 0.5)
    assert torch.allclose(adv, column(1.0, 0.0, 1.0))
    assert torch.allclose(ret, column(1.5, 1.0, 3.0))


def test_gae_truncation_mid_rollout_bootstraps_from_final_observation():
    # truncated at t = 1; next_values[1] = 6.0 is V(final obs) of the cut episode.
    # delta_1 = 1 + 0.5*6 - 1 = 3.0;  delta_0 = delta_2 = 1.0 as before
    # A_2 = 1.0;  A_1 = 3.0 + 0 (the episode ended);  A_0 = 1 + 0.25*3.0 = 1.75
    # returns = [2.25, 4.0, 3.0]
    adv, ret = ppo.compute_gae(REWARDS, VALUES, column(1.0, 6.0, 4.0), NO_END, END_AT_1, 0.5, 0.5)
    assert torch.allclose(adv, column(1.75, 3.0, 1.0))
    assert torch.allclose(ret, column(2.25, 4.0, 3.0))


def test_gae_two_environments_at_once():
    # Environment 0 runs without an end, environment 1 terminates at t = 1: each column
    # gives the numbers worked out above, [1.3125, 1.25, 1.0] and [1.0, 0.0, 1.0].
    both = lambda a, b: torch.cat([a, b], dim=1)
    adv, ret = ppo.compute_gae(both(REWARDS, REWARDS), both(VALUES, VALUES),
                               both(column(1.0, 2.0, 4.0), column(1.0, 7.0, 4.0)),
                               both(NO_END, END_AT_1), both(NO_END, NO_END), 0.5, 0.5)
    assert torch.allclose(adv, both(column(1.3125, 1.25, 1.0), column(1.0, 0.0, 1.0)))
    assert torch.allclose(ret, both(column(1.8125, 2.25, 3.0), column(1.5, 1.0, 3.0)))


# ---------------------------------------------------------------------------------------
# V-trace by hand
# ---------------------------------------------------------------------------------------
def test_vtrace_with_clipped_ratios():
    # Same rollout as test_gae_without_episode_end: TD errors r + 0.5*V' - V = [1, 1, 1].
    # pi/mu = [2, 0.5, 1], rho_bar = 1.5, c_bar = 1:
    #   rho = [min(1.5, 2), 0.5, 1] = [1.5, 0.5, 1];  c = [min(1, 2), 0.5, 1] = [1, 0.5, 1]
    #   delta = rho * TD = [1.5, 0.5, 1.0]
    #   vs_2 - V_2 = 1.0                                   -> vs_2 = 3.0
    #   vs_1 - V_1 = 0.5 + 0.5*0.5*1.0 = 0.75              -> vs_1 = 1.75
    #   vs_0 - V_0 = 1.5 + 0.5*1*0.75 = 1.875              -> vs_0 = 2.375
    #   G = [vs_1, vs_2, next_values_2] = [1.75, 3.0, 4.0]
    #   adv_0 = 1.5*(1 + 0.5*1.75 - 0.5) = 1.5*1.375 = 2.0625
    #   adv_1 = 0.5*(1 + 0.5*3.0 - 1.0) = 0.75;  adv_2 = 1*(1 + 0.5*4 - 2) = 1.0
    log_rhos = torch.log(column(2.0, 0.5, 1.0))
    adv, vs = ppo.compute_vtrace(REWARDS, VALUES, column(1.0, 2.0, 4.0), NO_END, NO_END,
                                 log_rhos, 0.5, rho_bar=1.5, c_bar=1.0)
    assert torch.allclose(vs, column(2.375, 1.75, 3.0))
    assert torch.allclose(adv, column(2.0625, 0.75, 1.0))


def test_vtrace_truncation_bootstraps_from_final_observation():
    # Truncated at t = 1 with V(final obs) = 6.0, all ratios 1 (on-policy):
    #   delta = [1.0, 1 + 0.5*6 - 1, 1.0] = [1.0, 3.0, 1.0]
    #   vs_2 = 2 + 1 = 3.0;  vs_1 = 1 + 3 + 0 (the trace is cut) = 4.0
    #   vs_0 = 0.5 + 1 + 0.5*1*(4.0 - 1.0) = 3.0
    #   G = [vs_1, next_values_1, next_values_2] = [4.0, 6.0, 4.0]
    #   adv = [1 + 0.5*4 - 0.5, 1 + 0.5*6 - 1, 1 + 0.5*4 - 2] = [2.5, 3.0, 1.0]
    adv, vs = ppo.compute_vtrace(REWARDS, VALUES, column(1.0, 6.0, 4.0), NO_END, END_AT_1,
                                 torch.zeros(3, 1), 0.5)
    assert torch.allclose(vs, column(3.0, 4.0, 3.0))
    assert torch.allclose(adv, column(2.5, 3.0, 1.0))


def test_vtrace_on_policy_with_unit_clips_equals_gae_with_lambda_one():
    # With log_rhos = 0 and rho_bar = c_bar = 1 every rho_t = c_t = 1, and the V-trace
    # recursion becomes GAE's with lambda = 1: vs = GAE returns, advantages = GAE's.
    # Inside an episode next_values[t] is values[t+1] (the same observation), as the
    # buffer makes it; where an episode ended it is the final observation's own value.
    gen = torch.Generator().manual_seed(0)
    T, N = 7, 3
    rewards, values, final_values = (torch.randn(T, N, generator=gen) for _ in range(3))
    flags = torch.rand(T, N, generator=gen)
    terminated, truncated = flags < 0.2, (flags >= 0.2) & (flags < 0.4)
    next_values = torch.cat([values[1:], final_values[-1:]])
    next_values = torch.where(terminated | truncated, final_values, next_values)
    gae_adv, gae_ret = ppo.compute_gae(rewards, values, next_values, terminated, truncated, 0.9, 1.0)
    vt_adv, vs = ppo.compute_vtrace(rewards, values, next_values, terminated, truncated,
                                    torch.zeros(T, N), 0.9)
    assert terminated.any() and truncated.any(), "premise: the random flags end episodes both ways"
    assert torch.allclose(vs, gae_ret, atol=1e-5)
    assert torch.allclose(vt_adv, gae_adv, atol=1e-5)


# ---------------------------------------------------------------------------------------
# The loss
# ---------------------------------------------------------------------------------------
def test_ppo_loss_by_hand():
    # ratio = [1.5, 0.9], advantages [1, -1], clip 0.2 -> clip(ratio) = [1.2, 0.9]
    #   sample 0: max(-1*1.5, -1*1.2) = -1.2 (clipped: no gradient)
    #   sample 1: max(1*0.9, 1*0.9) = 0.9, d/dlogp = ratio/B = 0.45
    #   L_pg = (-1.2 + 0.9)/2 = -0.15
    # V = [1, 2], V_old = [0.5, 2.5], R = [2, 2]
    #   unclipped L_v = 0.5*((1-2)^2 + 0)/2 = 0.25
    #   clipped V = V_old + clip(V - V_old, -0.2, 0.2) = [0.7, 2.3]
    #     L_v = 0.5*(max(1, 1.69) + max(0, 0.09))/2 = 0.5*1.78/2 = 0.445
    # entropy mean (0.6 + 0.4)/2 = 0.5; c_e = 0.01, c_v = 0.5
    #   loss = -0.15 - 0.005 + 0.5*0.25 = -0.03;  clipped: -0.15 - 0.005 + 0.2225 = 0.0675
    newlogprob = torch.log(torch.tensor([1.5, 0.9])).requires_grad_()
    inputs = dict(oldlogprob=torch.zeros(2), advantages=torch.tensor([1.0, -1.0]),
                  newvalue=torch.tensor([1.0, 2.0]), oldvalue=torch.tensor([0.5, 2.5]),
                  returns=torch.tensor([2.0, 2.0]), entropy=torch.tensor([0.6, 0.4]),
                  clip_coef=0.2, ent_coef=0.01, vf_coef=0.5)
    loss, pg_loss, v_loss, entropy = ppo.ppo_loss(newlogprob, **inputs)
    assert pg_loss.item() == approx(-0.15) and v_loss.item() == approx(0.25)
    assert entropy.item() == approx(0.5) and loss.item() == approx(-0.03)
    pg_loss.backward()
    assert newlogprob.grad.tolist() == approx([0.0, 0.45]), (
        "L_pg keeps its graph to newlogprob: no gradient through the clipped sample 0, "
        "ratio / B through the unclipped sample 1")
    loss, _, v_loss, _ = ppo.ppo_loss(newlogprob, **inputs, clip_vloss=True)
    assert v_loss.item() == approx(0.445) and loss.item() == approx(0.0675)


# ---------------------------------------------------------------------------------------
# The rollout buffer and the agent
# ---------------------------------------------------------------------------------------
def test_buffer_next_values_use_following_obs_last_obs_and_final_obs():
    # T = 3, N = 2, observations are single numbers and V(s) = 10*s, so each value says
    # which observation it came from. Environment 1 is truncated at t = 0 with final
    # observation 0.7 and terminated at t = 1.
    buffer = ppo.RolloutBuffer(3, 2, (1,), (), False, "cpu")
    buffer.obs[:, :, 0] = torch.tensor([[0.0, 0.1], [1.0, 1.1], [2.0, 2.1]])
    buffer.last_obs[:, 0] = torch.tensor([3.0, 3.1])
    buffer.truncated[0, 1] = True
    buffer.terminated[1, 1] = True
    buffer.final_obs[0, 1, 0] = 0.7
    value_fn = lambda obs: 10 * obs[..., 0]
    next_values = buffer.next_values(value_fn, value_fn(buffer.obs))
    # column 0: V(s_1), V(s_2), V(last) = 10, 20, 30; column 1: V(final) = 7 at the
    # truncation, then V(s_2) = 21 (unused after the termination), then V(last) = 31
    assert torch.allclose(next_values, torch.tensor([[10.0, 7.0], [20.0, 21.0], [30.0, 31.0]]))


def test_buffer_vtrace_weighs_by_current_over_behaviour_policy():
    # A later epoch: the policy that acted (mu) is not the current one (pi). One environment,
    # T = 2, rewards 1, gamma = 0.5, rho_bar = c_bar = 1, no episode end. The agent's last
    # layers are set by hand: pi(0|s) = 0.8, pi(1|s) = 0.2 and V(s) = 1 in every state.
    # Actions [0, 1] were taken with mu = [0.4, 0.8]:
    #   log rho = log pi - log mu = [log(0.8/0.4), log(0.2/0.8)] -> pi/mu = [2, 0.25]
    #   rho = c = [min(1, 2), 0.25] = [1, 0.25];  TD errors 1 + 0.5*1 - 1 = 0.5 at both steps
    #   vs_1 = 1 + 0.25*0.5 = 1.125;  vs_0 = 1 + 1*0.5 + 0.5*1*(1.125 - 1) = 1.5625
    #   adv_0 = 1*(1 + 0.5*vs_1 - 1) = 0.5625;  adv_1 = 0.25*(1 + 0.5*1 - 1) = 0.125
    # (the sign turned round, mu/pi = [0.5, 4], would give vs_1 = 1.5 and adv_0 = 0.375)
    agent = ppo.Agent((1,), 2, continuous=False, hidden_size=4)
    with torch.no_grad():
        for head, bias in ((agent.actor[-1], torch.log(tensor(0.8, 0.2))), (agent.critic[-1], tensor(1.0))):
            head.weight.zero_()
            head.bias.copy_(bias)
    buffer = ppo.RolloutBuffer(2, 1, (1,), (), False, "cpu")
    buffer.obs[:, 0, 0] = tensor(0.0, 1.0)
    buffer.last_obs[0, 0] = 2.0
    buffer.actions[:, 0] = torch.tensor([0, 1])
    buffer.logprobs[:, 0] = torch.log(tensor(0.4, 0.8))
    buffer.rewards[:] = 1.0
    adv, vs = buffer.vtrace(agent, gamma=0.5, rho_bar=1.0, c_bar=1.0)
    assert vs[:, 0].tolist() == approx([1.5625, 1.125])
    assert adv[:, 0].tolist() == approx([0.5625, 0.125])


def test_buffer_shapes_and_dtypes():
    discrete = ppo.RolloutBuffer(5, 3, (4,), (), False, "cpu")
    assert discrete.obs.shape == (5, 3, 4) and discrete.final_obs.shape == (5, 3, 4)
    assert discrete.actions.shape == (5, 3) and discrete.actions.dtype == torch.long
    assert discrete.terminated.dtype == torch.bool and discrete.last_obs.shape == (3, 4)
    continuous = ppo.RolloutBuffer(5, 3, (3,), (2,), True, "cpu")
    assert continuous.actions.shape == (5, 3, 2) and continuous.actions.dtype == torch.float32
    assert continuous.rewards.shape == (5, 3)


def test_gaussian_policy_logprob_sums_over_action_dimensions():
    agent = ppo.Agent((3,), 2, continuous=True)
    with torch.no_grad():
        agent.actor_logstd.fill_(math.log(2.0))
    obs, actions = torch.randn(4, 3), torch.randn(4, 2)
    _, logprob, entropy, _ = agent.get_action_and_value(obs, actions)
    mean = agent.actor(obs)
    # log N(a; mu, 2^2) = -(a - mu)^2/8 - log 2 - log(2 pi)/2, summed over 2 dimensions
    expected = (-(actions - mean) ** 2 / 8 - math.log(2.0) - 0.5 * math.log(2 * math.pi)).sum(-1)
    assert torch.allclose(logprob, expected, atol=1e-5)
    # entropy of N(mu, 2^2) = 0.5*log(2 pi e * 4) per dimension
    assert torch.allclose(entropy, torch.full((4,), 2 * 0.5 * math.log(2 * math.pi * math.e * 4)))


def test_actions_are_clipped_to_the_bounds_only_when_stepping():
    agent = ppo.Agent((3,), 1, continuous=True)
    space = gym.spaces.Box(-2.0, 2.0, (1,))
    sampled = torch.tensor([[-5.0], [0.5], [3.0]])
    assert ppo.to_env_action(agent, sampled, space).tolist() == [[-2.0], [0.5], [2.0]]
    assert sampled.tolist() == [[-5.0], [0.5], [3.0]]  # the buffer keeps the sample


# ---------------------------------------------------------------------------------------
# Time limits through the whole loop: CountToThree-v0 (conftest.py), an environment whose
# observation counts its steps and whose episodes are cut by a time limit after 3 steps.
# ---------------------------------------------------------------------------------------


# Each environment sees 0, 1, 2, (cut after the third step) 0, ...: the step from
# observation 2 is truncated, its final observation is 3, and the next row starts over.
# With --norm-obs, each row is normalized by the running statistics updated with it
# (Gymnasium's RunningMeanStd; its prior count of 1e-4 moves these by less than 1e-3), and
# the final observation 3 by the statistics of its row, without updating them:
#   after 0,0:             mean 0,    var 0                      -> (0 - 0) / ... = 0
#   after 0,0,1,1:         mean 0.5,  var 0.25                   -> (1 - 0.5) / 0.5 = 1
#   after 0,0,1,1,2,2:     mean 1,    var 2/3                    -> (2 - 1) / 0.8165 = 1.2247
#   final 3, same stats:                                           (3 - 1) / 0.8165 = 2.4495
#   after 0,0,1,1,2,2,0,0: mean 0.75, var 10/8 - 0.75^2 = 0.6875 -> -0.75 / 0.8292 = -0.9045
@pytest.mark.parametrize("norm_obs, rows, final", [(False, [0, 1, 2, 0], 3),
                                                   (True, [0, 1, 1.2247, -0.9045], 2.4495)])
def test_truncated_steps_store_the_true_final_observation(norm_obs, rows, final, tmp_path,
                                                          monkeypatch):
    seen = []
    original = ppo.RolloutBuffer.gae

    def spy(self, *args, **kwargs):
        seen.append((self.obs.clone(), self.truncated.clone(), self.final_obs.clone(),
                     self.rewards.clone()))
        return original(self, *args, **kwargs)

    monkeypatch.setattr(ppo.RolloutBuffer, "gae", spy)
    ppo.main(ppo.Args(env_id="CountToThree-v0", total_timesteps=16, num_envs=2, num_steps=4,
                      num_minibatches=2, norm_obs=norm_obs, eval_episodes=0,
                      output_dir=str(tmp_path)))
    obs, truncated, final_obs, rewards = seen[0]
    assert obs[:, :, 0].tolist() == [pytest.approx([r, r], abs=1e-3) for r in rows]
    assert truncated.tolist() == [[False, False], [False, False], [True, True], [False, False]]
    assert final_obs[2, :, 0].tolist() == pytest.approx([final, final], abs=1e-3)
    assert final_obs[[0, 1, 3]].abs().sum() == 0
    assert rewards.tolist() == [[1.0, 1.0]] * 4
    episodes = read_csv(next(tmp_path.glob("*/episodes.csv")))
    assert [(e["global_step"], e["episode_return"], e["episode_length"]) for e in episodes] == \
        [("6", "3.0", "3"), ("6", "3.0", "3"), ("12", "3.0", "3"), ("12", "3.0", "3")]


def test_norm_reward_scales_what_the_buffer_learns_from_and_episodes_csv_keeps_raw_returns(
        tmp_path, monkeypatch):
    # CountToThree-v0 pays 1 a step. NormalizeReward divides r_0 = 1 by the std of the
    # discounted returns so far, G_0 = [1, 1] (2 environments), in a RunningMeanStd that starts
    # at mean 0, var 1, count 1e-4: with the batch (mean 1, var 0, count 2; total 2.0001),
    # var = (1e-4 * 1 + 2 * 0 + 1^2 * 1e-4 * 2 / 2.0001) / 2.0001 = 1.0e-4, and
    # 1 / sqrt(1e-4 + 1e-8) = 99.995 is clipped to 10. r_1 = 1 is divided by the std of the
    # returns discounted by --gamma 0.5 (not Gymnasium's default 0.99): G_1 = 0.5 * 1 + 1 =
    # [1.5, 1.5]; with the batch (mean 1.5, var 0, count 2; total 4.0001), delta = 1.5 -
    # 2/2.0001 = 0.50005, var = (1.0e-4 * 2.0001 + 0.50005^2 * 2.0001 * 2 / 4.0001) / 4.0001
    # = 0.25026 / 4.0001 = 0.062562 (the variance 0.0625 of 1, 1, 1.5, 1.5), and
    # 1 / sqrt(0.062562) = 3.998; at 0.99, G_1 = 1.99 and 1 / sqrt(0.2451) = 2.020.
    # The wrappers sit outside the episode statistics: episodes.csv keeps 3 steps of reward 1.
    rewards = spy_on(monkeypatch, ppo.RolloutBuffer, "gae", lambda self, *a: self.rewards.clone())
    ppo.main(ppo.Args(env_id="CountToThree-v0", norm_reward=True, gamma=0.5, total_timesteps=8,
                      num_envs=2, num_steps=4, num_minibatches=2, eval_episodes=0,
                      output_dir=str(tmp_path)))
    (scaled,) = rewards
    assert scaled[0].tolist() == [10.0, 10.0] and (scaled[1:] != 1).all()
    assert scaled[1].tolist() == pytest.approx([3.998, 3.998], abs=1e-3)
    assert (scaled.abs() <= 10).all()
    episodes = read_csv(next(tmp_path.glob("*/episodes.csv")))
    assert [(e["episode_return"], e["episode_length"]) for e in episodes] == [("3.0", "3")] * 2


@pytest.mark.parametrize("advantage, function", [("gae", "compute_gae"), ("vtrace", "compute_vtrace")])
@pytest.mark.parametrize("num_steps, values, next_values", [
    (4, [0, 10, 20, 0], [10, 20, 30, 10]),
    # A rollout of 3 steps ends on the truncated step itself: its next value is still
    # V(final obs 3) = 30, not V(last obs 0) = 0, the next episode's first observation that
    # stands after the rollout (the last row's fix-up must come after last_obs's value).
    (3, [0, 10, 20], [10, 20, 30])])
def test_the_truncated_step_bootstraps_from_the_value_of_its_final_observation(
        num_steps, values, next_values, advantage, function, tmp_path, monkeypatch):
    # With V(s) = 10*s (the critic replaced by hand), a rollout of 4 steps must give the
    # targets values V(s_t) = 10*[0, 1, 2, 0] and next_values = [V(1), V(2), V(final obs 3),
    # V(last obs 1)] = [10, 20, 30, 10]: at the truncated step, 30, not V(0) = 0 of the
    # observation that starts the next episode.
    class TenTimesObs(torch.nn.Module):
        def forward(self, obs):
            return 10 * obs[..., :1]

    built = ppo.Agent.__init__

    def build_with_critic_by_hand(self, *args, **kwargs):
        built(self, *args, **kwargs)
        self.critic = TenTimesObs()

    monkeypatch.setattr(ppo.Agent, "__init__", build_with_critic_by_hand)
    seen = []
    original = getattr(ppo, function)

    def spy(rewards, values, next_values, terminated, truncated, *rest, **kwargs):
        seen.append((values.clone(), next_values.clone(), terminated.clone(), truncated.clone()))
        return original(rewards, values, next_values, terminated, truncated, *rest, **kwargs)

    monkeypatch.setattr(ppo, function, spy)
    ppo.main(ppo.Args(env_id="CountToThree-v0", total_timesteps=2 * num_steps, num_envs=2,
                      num_steps=num_steps, num_minibatches=2, update_epochs=1,
                      advantage=advantage, eval_episodes=0, output_dir=str(tmp_path)))
    stored, following, terminated, truncated = seen[0]
    assert stored.tolist() == [[v, v] for v in values]
    assert following.tolist() == [[v, v] for v in next_values]
    assert not terminated.any() and truncated[:, 0].tolist() == [t == 2 for t in range(num_steps)]


def test_vtrace_is_on_policy_in_the_first_epoch_only(tmp_path, monkeypatch):
    # Before the first gradient step the current policy is the one that acted: every
    # log rho is 0 (the buffer stored the log-probabilities of the actions it stored).
    # V-trace is computed again before each later epoch, after the policy has moved.
    seen = []
    original = ppo.compute_vtrace

    def spy(*args, **kwargs):
        seen.append(args[5].clone())  # log_rhos
        return original(*args, **kwargs)

    monkeypatch.setattr(ppo, "compute_vtrace", spy)
    ppo.main(ppo.Args(total_timesteps=256, num_envs=2, num_steps=128, num_minibatches=4,
                      update_epochs=3, advantage="vtrace", eval_episodes=0,
                      output_dir=str(tmp_path)))
    assert len(seen) == 3
    assert seen[0].abs().max() < 1e-5
    assert seen[1].abs().max() > 1e-3 and seen[2].abs().max() > 1e-3


@pytest.mark.parametrize("norm_adv", [True, False])
def test_what_the_loop_gives_ppo_loss(norm_adv, tmp_path, monkeypatch):
    # The first minibatch comes before any gradient step: its new log-probabilities and
    # values are the stored ones, row for row (ratio 1), if the shuffled indices pick the
    # same rows of every stored array. Advantages are normalized within each minibatch
    # (mean 0, std 1), or with --no-norm-adv passed as GAE made them, so that
    # returns = advantages + stored values (R_t = A_t + V(s_t)). Each epoch shuffles the
    # rollout anew: its 4 minibatches of 64 hold each of the 256 stored rows once (told
    # apart by their stored values, floats of a critic on CartPole's observations), and the
    # second epoch's first minibatch is not the first epoch's (a shuffle drawn once and
    # kept would give the same 64 rows; a fresh one gives the same set with probability
    # 1 / C(256, 64)). updates.csv's explained_variance is 1 - Var[R - V] / Var[R] of the
    # rollout's stored values V and GAE's returns R (Var[V] in the denominator differs).
    # Its policy_loss and value_loss are the last minibatch's, each in its own column, from
    # that call's inputs (clip 0.2, no value clipping): L_pg = mean(max(-A r, -A clip(r, 0.8,
    # 1.2))) with r = exp(log pi - log mu), and L_v = 0.5 mean((V - R)^2), which on CartPole's
    # returns of up to some 10 under a fresh critic is far from L_pg (near 0: A has mean 0).
    calls, rollouts = [], []
    original = ppo.ppo_loss
    original_gae = ppo.compute_gae

    def gae_spy(*args, **kwargs):
        advantages, returns = original_gae(*args, **kwargs)
        rollouts.append((args[1].flatten().clone(), returns.flatten().clone()))  # V, R
        return advantages, returns

    def spy(newlogprob, oldlogprob, advantages, newvalue, oldvalue, returns, *rest, **kwargs):
        calls.append([t.detach().clone() for t in (newlogprob, oldlogprob, advantages,
                                                     newvalue, oldvalue, returns)])
        return original(newlogprob, oldlogprob, advantages, newvalue, oldvalue, returns,
                        *rest, **kwargs)

    monkeypatch.setattr(ppo, "ppo_loss", spy)
    monkeypatch.setattr(ppo, "compute_gae", gae_spy)
    ppo.main(ppo.Args(total_timesteps=256, num_envs=2, num_steps=128, num_minibatches=4,
                      update_epochs=2, norm_adv=norm_adv, eval_episodes=0,
                      output_dir=str(tmp_path)))
    assert len(calls) == 8
    ((values, returns),) = rollouts
    assert values.unique().numel() == 256
    for epoch in (calls[:4], calls[4:]):
        assert torch.equal(torch.cat([c[4] for c in epoch]).sort().values, values.sort().values)
    assert set(calls[4][4].tolist()) != set(calls[0][4].tolist())
    (update,) = read_csv(next(tmp_path.glob("*/updates.csv")))
    assert float(update["explained_variance"]) == pytest.approx(
        1 - ((returns - values).var() / returns.var()).item(), rel=1e-5)
    newlogprob, oldlogprob, advantages, newvalue, _, targets = calls[-1]
    ratio = (newlogprob - oldlogprob).exp()
    policy_loss = torch.max(-advantages * ratio, -advantages * ratio.clamp(0.8, 1.2)).mean()
    assert float(update["policy_loss"]) == pytest.approx(policy_loss.item(), rel=1e-4, abs=1e-6)
    assert float(update["value_loss"]) == pytest.approx(
        0.5 * ((newvalue - targets) ** 2).mean().item(), rel=1e-5)
    newlogprob, oldlogprob, _, newvalue, oldvalue, _ = calls[0]
    assert torch.allclose(newlogprob, oldlogprob, atol=1e-6)
    assert torch.allclose(newvalue, oldvalue, atol=1e-6)
    for _, _, advantages, _, oldvalue, returns in calls:
        if norm_adv:
            assert advantages.mean().item() == pytest.approx(0, abs=1e-5)
            assert advantages.std().item() == pytest.approx(1, abs=1e-4)
        else:
            assert torch.allclose(returns, advantages + oldvalue, atol=1e-5)


def test_evaluation_normalizes_observations_with_the_frozen_statistics():
    check_evaluation_normalizes_with_the_frozen_statistics(ppo)


@pytest.mark.parametrize("continuous", [False, True])
def test_the_evaluation_takes_the_policys_mode_not_a_sample(continuous, monkeypatch):
    agent = ppo.Agent((1,), 1 if continuous else 2, continuous=continuous)
    check_the_evaluation_takes_the_policys_mode(ppo, agent, continuous, monkeypatch)


def test_the_evaluations_random_actions_come_from_a_generator_of_its_seed(monkeypatch):
    # --eval-epsilon 0.5 on CountToThree-v0: 10 environments, episodes of 3 steps, the
    # policy's mode fixed at action 1 (logits [0, 1]). Each step draws from
    # np.random.default_rng(--seed + 100,000): 10 uniforms (an environment explores where its is < 0.5),
    # then 10 actions in {0, 1}; one that explores takes its drawn action, the others 1. Two
    # evaluations at --seed 3 send the same 3 x 10 actions, the generator's by hand (an unseeded
    # generator matches them with probability about 2^-15: some 15 explore, each a coin).
    class ModeOne(torch.nn.Module):
        def forward(self, obs):
            return torch.tensor([[0.0, 1.0]]).expand(len(obs), -1)

    agent = ppo.Agent((1,), 2, continuous=False)
    agent.actor = ModeOne()
    sent = spy_on(monkeypatch, gym.vector.SyncVectorEnv, "step",
                  lambda self, actions: np.asarray(actions).tolist())
    for _ in range(2):
        returns = ppo.evaluate(ppo.Args(env_id="CountToThree-v0", eval_episodes=10, seed=3,
                                        eval_epsilon=0.5),
                               {"agent": agent, "obs_rms": ppo.ObsNormalizer((1,), enabled=False)})
        assert returns.tolist() == [3.0] * 10
    rng, expected = np.random.default_rng(100_003), []
    for _ in range(3):
        explore = rng.random(10) < 0.5
        expected.append(np.where(explore, rng.integers(2, size=10), 1).tolist())
    assert sent == expected * 2


# ---------------------------------------------------------------------------------------
# The glue: which flag reaches which function, what the loop stores, which parameters
# each optimizer step moves
# ---------------------------------------------------------------------------------------
@pytest.mark.parametrize("advantage", ["gae", "vtrace"])
def test_the_loop_gives_the_math_its_flags_and_steps_every_parameter(advantage, tmp_path,
                                                                     monkeypatch):
    # Each flag set apart from its default and from the others, so that a flag that does
    # not arrive, or arrives in another's place, shows. BoxZeroToFour-v0 has continuous
    # actions: the Gaussian's log std is a parameter too. 2 rollouts of 2 * 8 steps, 2
    # epochs of 2 minibatches each: 8 gradient steps.
    flags = dict(gamma=0.9, gae_lambda=0.6, rho_bar=1.7, c_bar=0.8, clip_coef=0.15,
                 ent_coef=0.03, vf_coef=0.7, clip_vloss=True, max_grad_norm=0.35, seed=7)
    gae = spy_on(monkeypatch, ppo, "compute_gae", lambda *a: a[5:7])  # gamma, lambda
    vtrace = spy_on(monkeypatch, ppo, "compute_vtrace", lambda *a: a[6:9])  # gamma, rho, c
    losses = spy_on(monkeypatch, ppo, "ppo_loss", lambda **k: (
        k["clip_coef"], k["ent_coef"], k["vf_coef"], k["clip_vloss"]))
    clips = spy_on(monkeypatch, torch.nn.utils, "clip_grad_norm_", lambda params, norm: norm)
    agents = spy_on(monkeypatch, ppo, "train", lambda args, agent, *rest: agent)
    moved = spy_on_weights(monkeypatch, ppo)
    seeds, resets = spy_on_seeds(monkeypatch, ppo)
    optimized = spy_on_adam(monkeypatch)
    ppo.main(ppo.Args(env_id="BoxZeroToFour-v0", total_timesteps=32, num_envs=2, num_steps=8,
                      num_minibatches=2, update_epochs=2, advantage=advantage, eval_episodes=2,
                      output_dir=str(tmp_path), **flags))
    # torch's and the training environments' seed, then the final evaluation's, 7 + 100,000
    assert seeds == [7] and resets == [7, 100_007]
    if advantage == "gae":  # once per rollout
        assert gae == [(0.9, 0.6)] * 2 and vtrace == []
    else:  # before each epoch, with the policy of the moment
        assert vtrace == [(0.9, 1.7, 0.8)] * 4 and gae == []
    assert losses == [(0.15, 0.03, 0.7, True)] * 8 and clips == [0.35] * 8
    (agent,) = agents
    (params,) = optimized  # one Adam, on every parameter, the Gaussian's log std included
    assert {id(p) for p in params} == {id(p) for p in agent.parameters()}
    assert any(p is agent.actor_logstd for p in params)
    ((still, changed),) = moved()  # and the steps moved every weight: actor, critic, log std
    assert still == [] and "actor_logstd" in changed


def test_the_buffer_keeps_the_sample_and_the_environment_gets_it_clipped(tmp_path, monkeypatch):
    # BoxZeroToFour-v0 (conftest.py) takes actions in [0, 4] and keeps each it receives. The
    # Gaussian policy starts with mean near 0 and std 1: about half the samples are negative.
    # The environment must get each sample clipped to [0, 4]; the buffer, whose
    # log-probabilities the ratio compares, the sample itself.
    stored = spy_on(monkeypatch, ppo.RolloutBuffer, "gae",
                    lambda self, *a: self.actions[:, 0, 0].tolist())
    received_actions().clear()
    ppo.main(ppo.Args(env_id="BoxZeroToFour-v0", total_timesteps=16, num_envs=1, num_steps=16,
                      num_minibatches=2, update_epochs=1, eval_episodes=0,
                      output_dir=str(tmp_path)))
    (actions,) = stored
    assert min(actions) < 0 < max(actions)
    assert received_actions() == pytest.approx(np.clip(actions, 0, 4).tolist(), abs=1e-6)


@pytest.mark.parametrize("target_kl, anneal_lr, epochs, rates", [
    (None, True, ["4", "4"], [3e-3, 1.5e-3]),  # 2 rollouts: 3e-3 * (1 - k/2) for k = 0, 1
    (1e-9, False, ["1", "1"], [3e-3, 3e-3]),
])
def test_target_kl_stops_the_epochs_and_no_anneal_lr_keeps_the_rate(target_kl, anneal_lr,
                                                                    epochs, rates, tmp_path,
                                                                    monkeypatch):
    # 4 epochs of 2 minibatches. The first minibatch of an update comes before its first
    # gradient step (KL 0), the second after one (KL > 0): the first epoch's mean KL is
    # above 1e-9, so --target-kl 1e-9 stops each update after it, at 2 gradient steps.
    # --learning-rate 3e-3, not the default 4e-3.
    losses = spy_on(monkeypatch, ppo, "ppo_loss", lambda **k: 1)
    ppo.main(ppo.Args(total_timesteps=256, num_envs=2, num_steps=64, num_minibatches=2,
                      update_epochs=4, target_kl=target_kl, anneal_lr=anneal_lr,
                      learning_rate=3e-3, eval_episodes=0, output_dir=str(tmp_path)))
    updates = read_csv(next(tmp_path.glob("*/updates.csv")))
    assert [u["epochs"] for u in updates] == epochs
    assert len(losses) == 2 * 2 * int(epochs[0])
    assert [float(u["learning_rate"]) for u in updates] == approx(rates)


def test_target_kl_and_clipfrac_read_each_epochs_own_ratios(tmp_path, monkeypatch):
    check_the_epochs_kl_and_clipfrac(ppo, tmp_path, monkeypatch, "CountToThree-v0")


def test_one_update_moves_the_image_encoder_shared_by_the_actor_and_the_critic(tmp_path,
                                                                              monkeypatch):
    # MinAtar's Breakout, 10 x 10 x 4 cells: the agent is one ImageEncoder (a 3 x 3
    # convolution, then a linear layer of 128) under a linear actor head and a linear
    # critic head. One rollout of 2 * 16 steps, one epoch of 2 minibatches: the one Adam
    # holds every parameter, and its 2 steps move every one of them, the encoder's among them
    # (a --norm-obs-free image path: there is no observation statistic to move).
    optimized = spy_on_adam(monkeypatch)
    agents = spy_on(monkeypatch, ppo, "train", lambda args, agent, *rest: agent)
    moved = spy_on_weights(monkeypatch, ppo)
    ppo.main(ppo.Args(env_id="MinAtar/Breakout-v1", total_timesteps=32, num_envs=2,
                      num_steps=16, num_minibatches=2, update_epochs=1, eval_episodes=0,
                      output_dir=str(tmp_path)))
    (agent,) = agents
    assert isinstance(agent.encoder, ppo.ImageEncoder)
    assert {id(p) for p in optimized[0]} == {id(p) for p in agent.parameters()}
    ((still, changed),) = moved()
    assert still == []
    assert {"encoder.convs.0.weight", "encoder.linear.0.weight", "actor.weight",
            "critic.weight"} <= set(changed)


def test_every_evaluation_reads_the_running_statistics_and_leaves_them_alone(tmp_path,
                                                                             monkeypatch):
    check_every_evaluation_reads_the_running_statistics_and_leaves_them_alone(ppo, tmp_path,
                                                                              monkeypatch)


def environment_flags(env_id, num_envs, training=False, reward_gamma=None, life_loss=False,
                      video_folder=None):
    return training, reward_gamma, life_loss


def evaluation_epsilon(args, models, video_folder=None):
    return args.eval_epsilon


@pytest.mark.parametrize("norm_reward, life_loss", [(True, False), (False, True)])
def test_main_gives_the_environments_and_evaluations_their_flags(norm_reward, life_loss,
                                                                 tmp_path, monkeypatch):
    # The training environments: --norm-reward's return discounted by --gamma (0.9 here, not
    # the default), --terminal-on-life-loss as given; the evaluations (each --eval-every 64
    # steps and the final one) are not training environments and take --eval-epsilon.
    made = spy_on(monkeypatch, ppo, "make_vector_env", environment_flags)
    evaluated = spy_on(monkeypatch, ppo, "evaluate", evaluation_epsilon)
    ppo.main(ppo.Args(total_timesteps=128, num_envs=2, num_steps=32, gamma=0.9,
                      norm_reward=norm_reward, terminal_on_life_loss=life_loss, eval_every=64,
                      eval_episodes=1, eval_epsilon=0.25, output_dir=str(tmp_path)))
    assert made[0] == (True, 0.9 if norm_reward else None, life_loss)
    assert made[1:] == [(False, None, False)] * 3 and evaluated == [0.25] * 3


def test_training_keeps_the_rewards_of_an_environment_that_is_not_atari():
    # Pendulum's rewards are -(angle^2 + ...), fractions: a training environment must give
    # them as the evaluation's does (the sign is Atari's clipping alone).
    rewards = []
    for training in (True, False):
        envs = ppo.make_vector_env("Pendulum-v1", 1, training=training, life_loss=True)
        envs.reset(seed=0)
        rewards.append(envs.step(np.array([[1.0]]))[1][0])
        envs.close()
    assert rewards[0] == rewards[1] and rewards[0] not in (-1.0, 0.0, 1.0)


# ---------------------------------------------------------------------------------------
# Runs end to end
# ---------------------------------------------------------------------------------------
@pytest.mark.slow  # a smoke run: a whole tiny run and every file it writes
def test_discrete_smoke_run_writes_every_file_and_its_model_evaluates(tmp_path, check_run_folder):
    args = ppo.Args(env_id="CartPole-v1", total_timesteps=1024, num_envs=2, num_steps=128,
                    num_minibatches=4, update_epochs=2, eval_episodes=2, save_model=True,
                    output_dir=str(tmp_path / "train"))
    summary = ppo.main(args)
    path, episodes, updates = check_run_folder(summary, args.output_dir, "ppo", model=True)
    assert summary["global_steps"] == 1024 and len(updates) == 4
    # annealed from 4e-3 to 0 over 4 updates: the optimizer's rate at each is 4e-3 * (1 - k/4)
    assert [float(u["learning_rate"]) for u in updates] == approx([4e-3, 3e-3, 2e-3, 1e-3])
    assert summary["eval_episodes"] == 2 and summary["eval_return_mean"] >= 8  # CartPole: > 8 steps
    assert {"policy_loss", "value_loss", "entropy", "approx_kl", "clipfrac",
            "explained_variance"} <= set(updates[0])
    assert sum(float(e["episode_return"]) for e in episodes) <= 1024

    evaluated = ppo.main(ppo.Args(env_id="CartPole-v1", eval_checkpoint=os.path.join(path, "model.pt"),
                                  eval_episodes=2, seed=summary["seed"],
                                  output_dir=str(tmp_path / "eval")))
    assert evaluated["eval_return_mean"] == summary["eval_return_mean"]  # same greedy policy, seeds
    assert evaluated["global_steps"] == 0
    (eval_path,) = (tmp_path / "eval").iterdir()  # trains nothing: no episodes, no updates
    assert read_csv(eval_path / "episodes.csv") == [] and not (eval_path / "updates.csv").exists()


@pytest.mark.slow  # a smoke run: a whole tiny run and every file it writes
def test_continuous_smoke_run_with_every_option(tmp_path, check_run_folder):
    args = ppo.Args(env_id="Pendulum-v1", total_timesteps=800, num_envs=2, num_steps=200,
                    num_minibatches=2, update_epochs=2, eval_episodes=2, save_model=True,
                    norm_obs=True, norm_reward=True, advantage="vtrace", clip_vloss=True,
                    target_kl=0.5, output_dir=str(tmp_path / "train"))
    summary = ppo.main(args)
    path, episodes, updates = check_run_folder(summary, args.output_dir, "ppo", model=True)
    # Pendulum episodes are cut at 200 steps: 2 environments * 400 steps = 4 episodes
    assert [e["episode_length"] for e in episodes] == ["200"] * 4
    assert float(episodes[0]["episode_return"]) < 0  # raw returns, not normalized rewards
    state = torch.load(os.path.join(path, "model.pt"), weights_only=True)
    assert state["obs_rms"]["count"] > 800 and state["obs_rms"]["mean"].shape == (3,)

    evaluated = ppo.main(ppo.Args(env_id="Pendulum-v1", eval_checkpoint=os.path.join(path, "model.pt"),
                                  eval_episodes=2, output_dir=str(tmp_path / "eval")))
    assert evaluated["eval_return_mean"] == pytest.approx(summary["eval_return_mean"])


@pytest.mark.parametrize("env_id, hidden", [("my_envs:GridWorld-v0", 16), ("my_envs:Slider-v0", 8)])
def test_an_environment_of_your_own_module(env_id, hidden, fresh_env_module, tmp_path,
                                           check_run_folder):
    # my_envs is not imported yet (fresh_env_module): the script imports it to find the id.
    args = ppo.Args(env_id=env_id, total_timesteps=128, num_envs=2, num_steps=32,
                    update_epochs=1, hidden_size=hidden, eval_episodes=1, save_model=True,
                    output_dir=str(tmp_path / "train"))
    summary = ppo.main(args)
    path, episodes, _ = check_run_folder(summary, args.output_dir, "ppo", model=True)
    assert os.path.basename(path).startswith(run_folder_env(env_id) + "__ppo__1__")
    assert summary["env_id"] == env_id and all(int(e["episode_length"]) <= 20 for e in episodes)
    evaluated = ppo.main(ppo.Args(env_id=env_id, eval_checkpoint=os.path.join(path, "model.pt"),
                                  eval_episodes=1, output_dir=str(tmp_path / "eval")))
    assert evaluated["eval_return_mean"] == pytest.approx(summary["eval_return_mean"])


def test_layer_init_without_ortho_keeps_pytorchs_initialization():
    torch.manual_seed(0)
    layer = torch.nn.Linear(3, 2)
    weight, bias = layer.weight.detach().clone(), layer.bias.detach().clone()
    assert ppo.layer_init(layer, std=0.01, ortho=False) is layer
    assert torch.equal(layer.weight, weight) and torch.equal(layer.bias, bias)
    ppo.layer_init(layer, std=0.01)  # orthogonal rows of norm 0.01, biases 0
    assert torch.linalg.norm(layer.weight, dim=1).tolist() == approx([0.01, 0.01])
    assert layer.bias.tolist() == [0.0, 0.0]


@pytest.mark.parametrize("zoo", [False, True])
def test_the_network_flags_reach_the_agent_and_its_model(zoo, tmp_path, monkeypatch):
    # Pendulum (one action dimension), 16 units. The RL Zoo's networks: ReLU, PyTorch's
    # initialization (biases not 0; the actor's last row of norm about sqrt(16/3)/4 = 0.58,
    # where the orthogonal one has norm 0.01 exactly), log std -2. The defaults: tanh,
    # orthogonal, log std 0. The saved model is rebuilt with the same activation.
    flags = dict(activation="relu", ortho_init=False, log_std_init=-2.0) if zoo else {}
    built = []

    class Built(ppo.Agent):
        def __init__(self, *args, **kwargs):
            super().__init__(*args, **kwargs)
            built.append((self, kwargs))

    monkeypatch.setattr(ppo, "Agent", Built)
    args = ppo.Args(env_id="Pendulum-v1", total_timesteps=64, num_envs=1, num_steps=64,
                    hidden_size=16, update_epochs=1, learning_rate=1e-9, eval_episodes=1,
                    save_model=True, output_dir=str(tmp_path / "train"), **flags)
    summary = ppo.main(args)
    agent = built[0][0]
    activation = torch.nn.ReLU if zoo else torch.nn.Tanh
    for net in (agent.actor, agent.critic):
        assert [type(m) for m in net] == [torch.nn.Linear, activation] * 2 + [torch.nn.Linear]
        assert net[0].out_features == net[2].out_features == 16  # --hidden-size
    assert agent.actor_logstd.flatten().tolist() == approx([-2.0 if zoo else 0.0])
    last_row = torch.linalg.norm(agent.actor[-1].weight).item()
    assert (last_row > 0.1) if zoo else last_row == approx(0.01)
    assert (agent.critic[0].bias.abs().max() > 0.01) == zoo  # Adam moved them by ~1e-9
    model = next(tmp_path.glob("train/*/model.pt"))
    evaluated = ppo.main(ppo.Args(env_id="Pendulum-v1", eval_checkpoint=str(model),
                                  eval_episodes=1, output_dir=str(tmp_path / "eval")))
    assert built[-1][1]["activation"] == ("relu" if zoo else "tanh")
    assert evaluated["eval_return_mean"] == approx(summary["eval_return_mean"])


def test_stop_at_return_stops_and_records_when(tmp_path):
    # CartPole gives 1 per step, so a 20-episode mean of at least 1 is reached as soon as
    # 20 episodes have ended.
    summary = ppo.main(ppo.Args(total_timesteps=100_000, stop_at_return=1.0, eval_episodes=0,
                                output_dir=str(tmp_path)))
    episodes = read_csv(next(tmp_path.glob("*/episodes.csv")))
    assert len(episodes) >= 20 and summary["solved_at_step"] == int(episodes[19]["global_step"])
    assert summary["global_steps"] == summary["solved_at_step"] < 100_000


def test_the_budget_the_progress_line_counts_to_is_where_the_run_ends(tmp_path, monkeypatch):
    # 4 environments x 32 steps = rollouts of 128: --total-timesteps 200 trains one rollout,
    # 128 steps, and the run's budget (the progress line's "/total") is 128, not 200 or the
    # 192 of rollouts of 32
    budgets = spy_on(monkeypatch, ppo.Run, "close", lambda self: self.budget)
    summary = ppo.main(ppo.Args(total_timesteps=200, num_envs=4, num_steps=32, num_minibatches=2,
                                update_epochs=1, eval_episodes=0, output_dir=str(tmp_path)))
    assert budgets == [128] and summary["global_steps"] == 128


def test_interrupted_run_keeps_its_data(tmp_path, monkeypatch):
    # Ctrl-C at the third optimizer step: 2 steps an update, so during the second update,
    # after two rollouts of 2*128 = 256 steps. main writes the run folder, then lets the
    # KeyboardInterrupt go on (the command line turns it into exit status 130).
    monkeypatch.setattr(torch.optim.Adam, "step", interrupt_on_call(3))
    with pytest.raises(KeyboardInterrupt):
        ppo.main(ppo.Args(total_timesteps=2048, num_envs=2, num_steps=128, num_minibatches=2,
                          update_epochs=1, save_model=True, output_dir=str(tmp_path)))
    (path,) = tmp_path.iterdir()
    summary = json.loads((path / "summary.json").read_text())
    assert summary["interrupted"] is True and summary["eval_return_mean"] is None
    assert summary["global_steps"] == 512
    assert len(read_csv(path / "updates.csv")) == 1 and read_csv(path / "episodes.csv")
    assert (path / "model.pt").exists()


def test_the_budget_is_rounded_down_to_whole_rollouts(tmp_path):
    # 2,000 steps in rollouts of 2 * 64 = 128: 15 whole rollouts, 15 * 128 = 1,920 steps.
    summary = ppo.main(ppo.Args(total_timesteps=2000, num_envs=2, num_steps=64, eval_episodes=0,
                                output_dir=str(tmp_path)))
    assert summary["global_steps"] == 1920


def test_nan_loss_stops_cleanly(tmp_path, monkeypatch, capsys):
    original = ppo.ppo_loss
    monkeypatch.setattr(ppo, "ppo_loss", lambda *a, **k: (original(*a, **k)[0] * math.nan,
                                                          *original(*a, **k)[1:]))
    summary = ppo.main(ppo.Args(total_timesteps=1024, num_envs=2, num_steps=128,
                                num_minibatches=2, output_dir=str(tmp_path)))
    assert summary["interrupted"] is True and summary["global_steps"] == 256
    assert (next(tmp_path.iterdir()) / "summary.json").exists()
    assert "the loss became non-finite (NaN or inf) at step 256" in capsys.readouterr().out


# The flags of one rollout of 6 steps: 2 environments * 3 steps, 2 minibatches of 3
ONE_ROLLOUT_OF_SIX = dict(num_envs=2, num_steps=3, num_minibatches=2)


def test_exp_name_seed_and_track_name_the_run_folder_the_summary_and_the_wandb_run(
        tmp_path, monkeypatch):
    check_named_and_tracked(ppo, tmp_path, monkeypatch, tiny=ONE_ROLLOUT_OF_SIX)


def test_an_evaluation_of_a_checkpoint_trains_nothing(tmp_path, capsys):
    # 101 steps are less than one rollout of 2 environments * the default 64 steps
    check_an_evaluation_trains_nothing(ppo, tmp_path, capsys, tiny=ONE_ROLLOUT_OF_SIX)


@pytest.mark.slow  # determinism: two whole runs
def test_same_seed_gives_the_same_episodes(tmp_path):
    rows = same_seed_episodes(lambda out: ppo.main(ppo.Args(
        total_timesteps=2048, num_envs=4, num_steps=64, eval_episodes=0, output_dir=out)),
        tmp_path)
    assert len(rows) > 20


# ---------------------------------------------------------------------------------------
# Watching a run: --eval-every and the progress line
# ---------------------------------------------------------------------------------------
@pytest.mark.slow  # watching a run: evaluations during it
def test_eval_every_writes_rows_keeps_the_best_model_and_leaves_training_alone(tmp_path):
    # 3 environments step global_step by 3: 3, 6, ..., 864 (9 rollouts of 3 * 32 steps).
    # A row each time it crosses a multiple of 100: at 102 (34 * 3, past 100), 201, 300,
    # 402, 501, 600, 702 and 801; 864 crosses none.
    args = ppo.Args(total_timesteps=864, num_envs=3, num_steps=32, num_minibatches=2,
                    eval_every=100, eval_episodes=3, save_model=True, seed=1)
    check_evaluations(ppo.main, args, tmp_path, [102, 201, 300, 402, 501, 600, 702, 801])


def test_the_logged_returns_by_hand(tmp_path, monkeypatch):
    check_the_logged_returns(ppo, tmp_path, monkeypatch, num_steps=12, num_minibatches=2)


# ---------------------------------------------------------------------------------------
# Bad input: one line on stderr, exit status 2, nothing trained
# ---------------------------------------------------------------------------------------
@pytest.fixture
def bad_checkpoints(tmp_path):
    pendulum = tmp_path / "pendulum.pt"
    args = ppo.Args(env_id="Pendulum-v1")
    ppo.save_checkpoint(pendulum, {"agent": ppo.Agent((3,), 1, True),
                                   "obs_rms": ppo.ObsNormalizer((3,), False)}, args)
    misfit = tmp_path / "misfit.pt"  # says 32 hidden units, holds a 64-unit network
    ppo.save_checkpoint(misfit, {"agent": ppo.Agent((4,), 2, False, 64),
                                 "obs_rms": ppo.ObsNormalizer((4,), False)}, ppo.Args(hidden_size=32))
    return {**unreadable_checkpoints(tmp_path),
            "pendulum": str(pendulum), "misfit": str(misfit)}


@pytest.mark.parametrize("argv, message", [
    (["--env-id", "SpinTheBits-v0"], "MultiBinary action space of shape (3,); ppo.py handles "
     "Discrete and flat Box actions"),
    (["--env-id", "Taxi-v4"], "Discrete observation space"),
    (["--num-envs", "3", "--num-steps", "5", "--num-minibatches", "4"],
     "num_envs*num_steps = 15 is not divisible by --num-minibatches 4"),
    (["--num-envs", "2", "--num-steps", "2", "--num-minibatches", "4"], "minibatches of 1 sample"),
    (["--num-envs", "0"], "--num-envs must be positive"),
    (["--total-timesteps", "100"], "less than one rollout"),
    (["--learning-rate", "0"], "--learning-rate must be positive"),
    (["--gamma", "1.5"], "--gamma must be in [0, 1]"),
    (["--eval-checkpoint", "corrupt"], "is not a ppo.py model.pt"),
    (["--eval-checkpoint", "pendulum"], "was made for Pendulum-v1; pass --env-id Pendulum-v1"),
    (["--eval-checkpoint", "misfit"], "does not fit CartPole-v1's network"),
])
def test_bad_input_is_one_line_and_exit_status_2(argv, message, check_usage_error, bad_checkpoints,
                                                 fresh_env_module):
    check_usage_error("ppo.py", [bad_checkpoints.get(a, a) for a in argv], message)


def test_help_lists_the_flags_with_their_docstrings(check_help):
    check_help("ppo.py", ("--cuda", "--no-cuda", "--advantage", "--rho-bar", "--norm-obs"),
               ("lambda of GAE",))

"""Tests of mappo.py: GAE, the losses with active masks and value normalization by hand, the
EP and AS buffers, agents that are done before their environment (the lock-step plumbing),
what the training loop passes to the loss, heterogeneous agents, your own environment, runs
end to end, its hooks (check_flags, check_spaces, greedy_policy, MODEL_FLAGS), bad input,
determinism. The plumbing every script keeps (--help's common flags, a quiet import, the
common bad input, Ctrl-C, the run folder's files, the progress line, the closing line, the
videos) is tests/test_plumbing.py's."""
import json
import math
import os

import gymnasium as gym
import numpy as np
import pytest
import torch

import mappo
from conftest import (Relay, SameSizeRelay, TerminatingRelay, check_evaluations, read_csv,
                      same_seed_episodes, set_clock, spy_on, spy_on_progress_lines,
                      spy_on_weights)
from my_envs import TeamEnv


def approx(expected):
    """Equality up to float32 rounding."""
    return pytest.approx(expected, abs=1e-5)


def same(x, expected):
    """Tensor equality with nested lists up to float32 rounding."""
    return torch.allclose(x, torch.tensor(expected, dtype=x.dtype), atol=1e-5)


def t(*rows):
    """A float tensor of the rows: t(1, 2) is [2]; a GAE input of T steps is t(step_0, ...),
    [T, N] from rows of N values or [T, N, A] from rows of N lists of A."""
    return torch.tensor(rows, dtype=torch.float32)


# ---------------------------------------------------------------------------------------
# GAE by hand: 3 steps, 2 environments, 2 agents, gamma = 0.5 and lambda = 0.5, so
# gamma * lambda = 0.25.
# ---------------------------------------------------------------------------------------
def test_gae_ep_one_value_per_environment_with_a_truncation_and_a_termination():
    # Environment 0 is truncated at t = 1 (time limit; V(final state) = 3), environment 1
    # terminates at t = 2. Team rewards (mean over the agents) as columns:
    #   env 0: r = [1.5, 0.5, 1.5], V = [1, 1, 1], next_values = [1, 3, 2]
    #     delta = [1.5 + 0.5*1 - 1, 0.5 + 0.5*3 - 1, 1.5 + 0.5*2 - 1] = [1, 1, 1.5]
    #     A_2 = 1.5;  A_1 = 1 (the episode ended: no A_2);  A_0 = 1 + 0.25*1 = 1.25
    #     returns = [2.25, 2, 2.5]
    #   env 1: r = [1, 1, 1], V = [0.5, 1, 2], next_values = [1, 2, 5] (5 is not used)
    #     delta = [1 + 0.5 - 0.5, 1 + 1 - 1, 1 + 0 - 2] = [1, 1, -1]
    #     A_2 = -1;  A_1 = 1 + 0.25*(-1) = 0.75;  A_0 = 1 + 0.25*0.75 = 1.1875
    #     returns = [1.6875, 1.75, 1]
    rewards, values = t([1.5, 1], [0.5, 1], [1.5, 1]), t([1, 0.5], [1, 1], [1, 2])
    next_values = t([1, 1], [3, 2], [2, 5])
    terminated, truncated = t([0, 0], [0, 0], [0, 1]), t([0, 0], [1, 0], [0, 0])
    adv, ret = mappo.compute_gae(rewards, values, next_values, terminated, truncated, 0.5, 0.5)
    assert same(adv, [[1.25, 1.1875], [1, 0.75], [1.5, -1]])
    assert same(ret, [[2.25, 1.6875], [2, 1.75], [2.5, 1]])
    # lambda 1 apart from gamma 0.5: the same deltas, gamma * lambda = 0.5 in the trace:
    #   env 0: A_2 = 1.5;  A_1 = 1;  A_0 = 1 + 0.5*1 = 1.5
    #   env 1: A_2 = -1;  A_1 = 1 + 0.5*(-1) = 0.5;  A_0 = 1 + 0.5*0.5 = 1.25
    adv, _ = mappo.compute_gae(rewards, values, next_values, terminated, truncated, 0.5, 1.0)
    assert same(adv, [[1.5, 1.25], [1, 0.5], [1.5, -1]])


def test_gae_as_one_value_per_agent_with_a_truncation_and_an_agent_terminated_early():
    # [T=3, N=2, A=2]. Environment 0: both agents truncated at t = 1. Environment 1: agent 0
    # terminates at t = 1 while agent 1 goes on (agent 0's t = 2 is inactive: reward 0, its
    # value 9 is garbage that the active mask leaves out of the loss).
    #   env 0, agent 0: r = [1, 1, 1], V = [0.5, 1, 2], next = [1, 6, 4]
    #     delta = [1, 1 + 3 - 1, 1 + 2 - 2] = [1, 3, 1];  A = [1 + 0.25*3, 3, 1] = [1.75, 3, 1]
    #   env 0, agent 1: r = [2, 0, 2], V = [1, 1, 1], next = [1, 2, 1]
    #     delta = [2 + 0.5 - 1, 0 + 1 - 1, 2 + 0.5 - 1] = [1.5, 0, 1.5];  A = [1.5, 0, 1.5]
    #   env 1, agent 0: r = [1, 1, 0], V = [0.5, 1, 9], next = [1, 7, 3] (7 unused)
    #     delta = [1, 1 + 0 - 1, 0 + 1.5 - 9] = [1, 0, -7.5];  A = [1 + 0, 0, -7.5]
    #   env 1, agent 1: r = [1, 1, 1], V = [0.5, 1, 2], next = [1, 2, 4], no end
    #     delta = [1, 1, 1];  A_2 = 1, A_1 = 1.25, A_0 = 1 + 0.25*1.25 = 1.3125
    rewards = t([[1, 2], [1, 1]], [[1, 0], [1, 1]], [[1, 2], [0, 1]])
    values = t([[0.5, 1], [0.5, 0.5]], [[1, 1], [1, 1]], [[2, 1], [9, 2]])
    next_values = t([[1, 1], [1, 1]], [[6, 2], [7, 2]], [[4, 1], [3, 4]])
    terminated = t([[0, 0], [0, 0]], [[0, 0], [1, 0]], [[0, 0], [0, 0]])
    truncated = t([[0, 0], [0, 0]], [[1, 1], [0, 0]], [[0, 0], [0, 0]])
    adv, ret = mappo.compute_gae(rewards, values, next_values, terminated, truncated, 0.5, 0.5)
    assert same(adv, [[[1.75, 1.5], [1, 1.3125]], [[3, 0], [0, 1.25]], [[1, 1.5], [-7.5, 1]]])
    assert torch.allclose(ret, adv + values), "the returns are the advantages plus the values"


def test_team_reward_is_the_mean_over_the_agents_that_acted():
    # env 0: (1 + 2)/2 = 1.5;  env 1: agent 1 is done, so only agent 0's 1 counts
    assert mappo.team_reward(t([1, 2], [1, 5]), t([1, 1], [1, 0])).tolist() == [1.5, 1.0]


def test_critic_step_reduces_the_agents_flags_to_what_each_critic_learns():
    # N = 3 copies, A = 2 agents, one lock-step. Copy 0: both act, nothing ends. Copy 1:
    # agent 1 had finished before (inactive), agent 0 is truncated now: the episode ends.
    # Copy 2: agent 0 terminates while agent 1 goes on: the episode does not end.
    rewards, active = t([1, 3], [2, 0], [4, 6]), t([1, 1], [1, 0], [1, 1])
    terminated = torch.tensor([[False, False], [False, False], [True, False]])
    truncated = torch.tensor([[False, False], [True, False], [False, False]])
    episode_end = torch.tensor([False, True, False])
    # EP: team rewards (1 + 3)/2 = 2, 2/1 = 2, (4 + 6)/2 = 5; only copy 1's episode ended,
    # and by truncation; copy 2's agent 0 terminating ends nothing for the team's value
    r, term, trunc = mappo.critic_step(rewards, terminated, truncated, active, episode_end, "ep")
    assert r.tolist() == [2, 2, 5]
    assert term.tolist() == [False, False, False] and trunc.tolist() == [False, True, False]
    # an episode whose last agent terminates is terminated for the team
    _, term, trunc = mappo.critic_step(rewards, truncated, terminated, active, episode_end, "ep")
    assert term.tolist() == [False, True, False] and trunc.tolist() == [False, False, False]
    # AS: each agent keeps its own flags; the team reward for the agents that acted
    r, term, trunc = mappo.critic_step(rewards, terminated, truncated, active, episode_end, "as")
    assert r.tolist() == [[2, 2], [2, 0], [5, 5]]
    assert torch.equal(term, terminated) and torch.equal(trunc, truncated)
    r, _, _ = mappo.critic_step(rewards, terminated, truncated, active, episode_end, "as",
                                per_agent_reward=True)
    assert r.tolist() == [[1, 3], [2, 0], [4, 6]]


def test_explained_variance_by_hand():
    # returns [1, 2, 3]: Var(R) = ((1-2)^2 + 0 + (3-2)^2)/2 = 1
    #   values [1, 1, 1]: R - V = [0, 1, 2], Var = 1 as well -> 1 - 1 = 0
    #   values [1, 2, 2]: R - V = [0, 0, 1], mean 1/3, Var = (1/9 + 1/9 + 4/9)/2 = 1/3 -> 2/3
    # (train passes the entries that count: the active agents' with the AS critic)
    returns = t(1, 2, 3)
    assert mappo.explained_variance(t(1, 1, 1), returns) == approx(0.0)
    assert mappo.explained_variance(t(1, 2, 2), returns) == approx(2 / 3)
    assert math.isnan(mappo.explained_variance(t(0, 0, 0), t(5, 5, 5)))


# ---------------------------------------------------------------------------------------
# Active masks: a done agent's steps count in neither the loss nor the advantage statistics
# ---------------------------------------------------------------------------------------
def test_advantage_normalization_counts_active_steps_only():
    # active entries 1, 3, 5: mean 3, unbiased std sqrt((4 + 0 + 4)/2) = 2
    # -> [(1-3)/2, (3-3)/2, (5-3)/2] = [-1, 0, 1]; the inactive 100 comes out 0
    out = mappo.normalize_advantages(t([1, 3], [5, 100]), t([1, 1], [1, 0]))
    assert same(out, [[-1, 0], [1, 0]])


LOSS_INPUTS = dict(
    # B = 2 rows of A = 2 agents; agent 1 of row 1 is done (active 0) and has a ratio of 3
    # and an advantage of 10 that would dominate the loss if they counted.
    oldlogprob=torch.zeros(2, 2), advantages=t([1, -1], [0.5, 10]), active=t([1, 1], [1, 0]),
    newvalue=t(1, 2), oldvalue=t(0.5, 2.5), returns=t(2, 2), value_mask=t(1, 1),
    entropy=t([0.6, 0.4], [0.5, 9.0]), clip_coef=0.2, ent_coef=0.01, vf_coef=0.5)


def test_mappo_loss_by_hand_leaves_out_inactive_agents():
    # ratios [[1.5, 0.9], [1.0, (3.0)]], clip 0.2:
    #   max(-1*1.5, -1*1.2) = -1.2;  max(1*0.9, 1*0.9) = 0.9;  max(-0.5, -0.5) = -0.5
    #   L_pg = (-1.2 + 0.9 - 0.5)/3 = -0.266667 (the inactive -12 would make it -3.2)
    # entropy (0.6 + 0.4 + 0.5)/3 = 0.5
    # EP values: L_v = 0.5*((1-2)^2 + 0)/2 = 0.25;  clipped V = [0.7, 2.3]:
    #   0.5*(max(1, 1.69) + max(0, 0.09))/2 = 0.445
    # loss = -0.266667 - 0.01*0.5 + 0.5*0.25 = -0.146667; clipped -0.271667 + 0.2225 = -0.049167
    newlogprob = torch.log(t([1.5, 0.9], [1.0, 3.0])).requires_grad_()
    loss, pg_loss, v_loss, entropy = mappo.mappo_loss(newlogprob, **LOSS_INPUTS, clip_vloss=False)
    assert pg_loss.item() == approx(-0.8 / 3) and entropy.item() == approx(0.5)
    assert v_loss.item() == approx(0.25) and loss.item() == approx(-0.146667)
    pg_loss.backward()
    # d L_pg / d logp = -A * ratio / 3 where unclipped: [[0 (clipped), 0.3], [-1/6, 0]]
    assert same(newlogprob.grad, [[0.0, 0.3], [-1 / 6, 0.0]]), (
        "L_pg keeps its graph: no gradient through the clipped sample nor the inactive agent")
    loss, _, v_loss, _ = mappo.mappo_loss(newlogprob, **LOSS_INPUTS)
    assert v_loss.item() == approx(0.445) and loss.item() == approx(-0.049167)


def test_as_value_loss_leaves_out_inactive_agents():
    # value_mask [[1, 1], [1, 0]]: squared errors 1, 0, 0 count, the inactive 100^2 does not
    # L_v = 0.5*(1 + 0 + 0)/3 = 1/6
    inputs = {**LOSS_INPUTS, "newvalue": t([1, 2], [3, 100]), "oldvalue": t([1, 2], [3, 100]),
              "returns": t([2, 2], [3, 0]), "value_mask": t([1, 1], [1, 0])}
    _, _, v_loss, _ = mappo.mappo_loss(torch.zeros(2, 2), **inputs)
    assert v_loss.item() == approx(1 / 6)


# ---------------------------------------------------------------------------------------
# Value normalization by hand
# ---------------------------------------------------------------------------------------
def test_value_norm_floors_the_variance_at_0_01():
    # after a batch of constant returns the variance is 0; floored at 0.01 (HARL's floor) the
    # std is 0.1, so a return 0.1 above the mean normalizes to 0.1/0.1 = 1 (not 0.1/1e-4)
    norm = mappo.ValueNorm(enabled=True)
    norm.update(t(2, 2, 2))
    assert norm.normalize(t(2.1)).item() == approx(1.0)
    assert norm.denormalize(t(1.0)).item() == approx(2.1)


def test_value_norm_update_normalize_denormalize():
    norm = mappo.ValueNorm(enabled=True)
    assert norm.normalize(torch.tensor(3.0)).item() == approx(3.0), (  # mean 0, var 1 at first
        "premise: before any update the mean is 0 and the variance 1")
    # [1, 2, 3]: mean 2, variance ((1)^2 + 0 + 1^2)/3 = 2/3
    norm.update(t(1, 2, 3))
    assert (norm.mean, norm.var, norm.count) == (approx(2.0), approx(2 / 3), 3), (
        "update merges the batch into self.mean, self.var (the biased variance) and self.count")
    # then [5]: delta = 3, n' = 4, mean = 2 + 3*1/4 = 2.75
    #   var = (2/3*3 + 0*1 + 3^2*3*1/4)/4 = (2 + 6.75)/4 = 2.1875
    #   (directly: deviations of 1, 2, 3, 5 from 2.75 squared: 3.0625 + 0.5625 + 0.0625
    #   + 5.0625 = 8.75, / 4 = 2.1875)
    norm.update(t(5))
    assert (norm.mean, norm.var, norm.count) == (approx(2.75), approx(2.1875), 4), (
        "a second batch is merged, each weighted by its count")
    # normalize(5) = (5 - 2.75)/sqrt(2.1875) = 2.25/1.479020 = 1.521278
    x = t(5, -1, 0.5)
    assert norm.normalize(x)[0].item() == approx(1.521278)
    assert torch.allclose(norm.denormalize(norm.normalize(x)), x)
    disabled = mappo.ValueNorm(enabled=False)
    disabled.update(t(10, 20))
    assert disabled.normalize(x) is x and disabled.denormalize(x) is x, (
        "disabled, both maps return their input itself, whatever update was given")


# ---------------------------------------------------------------------------------------
# The critic's two kinds of state and the buffers
# ---------------------------------------------------------------------------------------
def test_critic_input_ep_is_the_state_as_adds_own_obs_and_id():
    state, obs = t([7, 8]), t([[1, 0], [2, 3]])  # N = 1, S = 2, A = 2, D = 2
    assert mappo.critic_input(state, obs, "ep").tolist() == [[7, 8]]
    assert mappo.critic_input(state, obs, "as").tolist() == [[[7, 8, 1, 0, 1, 0],
                                                              [7, 8, 2, 3, 0, 1]]]


@pytest.mark.parametrize("critic_state, critic_shape", [("ep", (4, 2)), ("as", (4, 2, 3))])
def test_buffer_shapes(critic_state, critic_shape):
    # T = 4, N = 2, A = 3 agents, D = 5, K = 6 actions, critic input 7 wide
    b = mappo.RolloutBuffer(4, 2, 3, 5, 6, critic_state, 7, "cpu")
    assert b.obs.shape == (4, 2, 3, 5) and b.avail.shape == (4, 2, 3, 6)
    assert b.actions.shape == b.logprobs.shape == b.active.shape == (4, 2, 3)
    assert b.values.shape == b.rewards.shape == b.terminated.shape == b.truncated.shape == critic_shape
    assert b.critic_obs.shape == b.final_critic.shape == (*critic_shape, 7)
    assert b.last_critic.shape == (*critic_shape[1:], 7)
    assert b.actions.dtype == torch.long and b.avail.dtype == b.truncated.dtype == torch.bool


def test_buffer_gae_denormalizes_and_bootstraps_from_the_final_state():
    # EP, T = 3, N = 2; the critic is V(x) = x[0], values are stored normalized with mean 1
    # and std 2 (denormalized: 2*v + 1). Environment 1 is truncated at t = 1 with a final
    # state worth 0.5 (2*0.5 + 1 = 2 in return units); last_critic is worth 1.5 and 2.5.
    b = mappo.RolloutBuffer(3, 2, 1, 1, 1, "ep", 1, "cpu")
    norm = mappo.ValueNorm(enabled=True)
    norm.mean, norm.var = 1.0, 4.0
    b.values[:] = t([0, 1], [0.5, 1.5], [1, 2])  # denormalized: [[1, 3], [2, 4], [3, 5]]
    b.rewards[:] = 1.0
    b.truncated[1, 1] = True
    b.final_critic[1, 1, 0] = 0.5
    b.last_critic[:, 0] = t(1.5, 2.5)
    # next_values = [[2, 4], [3, 2 (final state)], [4, 6 (last)]] in return units
    expected = mappo.compute_gae(b.rewards, t([1, 3], [2, 4], [3, 5]),
                                 t([2, 4], [3, 2], [4, 6]), b.terminated, b.truncated, 0.9, 0.8)
    for got, want in zip(b.gae(lambda x: x[..., 0], norm, 0.9, 0.8), expected):
        assert torch.allclose(got, want, atol=1e-6)


# ---------------------------------------------------------------------------------------
# Agents that are done before their environment: conftest.py's Relay, a 2-agent parallel
# environment in which agent "short" terminates after its first step while "long" goes on
# and is truncated after the third. Their observations differ in size (1 and 2) as do their
# action counts (2 and 3); "long" is told by info["action_mask"] that its action 0 is not
# allowed. The state after step k is [k, 10k]; rewards are 1 for short and 2 for long.
# ---------------------------------------------------------------------------------------
def spec_of(env_id):
    """What check_spaces returns for env_id (the spec) on the spaces check_env reads from it,
    made as main makes it (prepare's make=LockstepEnvs)."""
    args = mappo.Args(env_id=env_id)
    return mappo.check_spaces(args, *mappo.check_env(args, make=mappo.LockstepEnvs))


def use_relay(monkeypatch, relay_class=Relay):
    """mappo.py on relay_class, Relay or a variant (any cooperative id, here simple_v3, builds
    one), Relay.sent cleared; its spec."""
    monkeypatch.setattr(mappo, "make_env", lambda *args, **kwargs: relay_class())
    Relay.sent.clear()
    return spec_of("simple_v3")


@pytest.fixture
def relay(monkeypatch):
    return use_relay(monkeypatch)


def test_a_done_agent_is_inactive_until_its_environment_resets(relay):
    assert relay == {"agents": ["short", "long"], "obs_dims": [1, 2], "action_counts": [2, 3],
                     "state_dim": 2}
    envs = mappo.LockstepEnvs("simple_v3", 1, max_cycles=3)
    assert envs.has_state
    obs, state, avail, active = envs.reset(seed=0)
    # padding: short's action 2 does not exist; long's action 0 is masked by the env
    assert avail.tolist() == [[[True, True, False], [False, True, True]]]
    assert active.tolist() == [[True, True]]
    out = envs.step(np.array([[1, 2]]))
    assert out.rewards.tolist() == [[1, 2]] and out.terminated.tolist() == [[True, False]]
    assert out.final_obs[0, 0].tolist() == [1, 0] and out.final_state.tolist() == [[1, 10]]
    assert out.final_obs[0, 1].tolist() == [0, 0]  # long goes on: no final observation
    assert out.active.tolist() == [[False, True]] and out.obs[0, 0].tolist() == [0, 0]
    assert not out.episodes and out.ended.tolist() == [False]
    out = envs.step(np.array([[1, 1]]))
    assert out.rewards.tolist() == [[0, 2]] and out.active.tolist() == [[False, True]]
    assert Relay.sent[-1] == {"long": 1}  # nothing is sent for the done agent
    out = envs.step(np.array([[0, 2]]))
    assert out.truncated.tolist() == [[False, True]] and out.final_state.tolist() == [[3, 30]]
    # the episode: short 1, long 2 + 2 + 2 = 6, mean per-agent (1 + 6)/2 = 3.5 over 3 steps
    assert out.episodes == [(0, 3.5, 3)] and out.ended.tolist() == [True]
    assert out.active.tolist() == [[True, True]] and out.state.tolist() == [[0, 0]]  # reset
    # the next episode counts from 0 again: (1 + 6)/2 = 3.5 over 3 steps, not the two
    # episodes' sums together, (2 + 12)/2 = 7
    for actions in ([1, 2], [0, 1], [0, 2]):
        out = envs.step(np.array([actions]))
    assert out.episodes == [(0, 3.5, 3)] and out.ended.tolist() == [True]


def test_each_agent_keeps_its_slot_when_an_agent_before_it_is_done(monkeypatch):
    # After step 1 short (slot 0) is done: long's observation [1, 1] and its action mask
    # [0, 1, 1] stay in slot 1, which its actor (and the AS critic's row 1) reads; slot 0 is
    # zero with short's own two actions. The next step sends long slot 1's action.
    use_relay(monkeypatch, SameSizeRelay)
    envs = mappo.LockstepEnvs("simple_v3", 1, 3)
    envs.reset(seed=0)
    out = envs.step(np.array([[1, 2]]))
    assert out.obs.tolist() == [[[0, 0], [1, 1]]] and out.active.tolist() == [[False, True]]
    assert out.avail.tolist() == [[[True, True, False], [False, True, True]]]
    envs.step(np.array([[0, 1]]))
    assert Relay.sent[-1] == {"long": 1}


def test_an_agent_terminated_at_its_time_limit_is_terminated_not_truncated(monkeypatch):
    # Step 3: long terminates and its limit truncates it at once. A termination is no time
    # limit: the step says terminated alone, so the EP critic's last step of the episode is
    # terminated (no bootstrap from the final state), not truncated.
    use_relay(monkeypatch, TerminatingRelay)
    envs = mappo.LockstepEnvs("simple_v3", 1, 3)
    envs.reset(seed=0)
    for actions in ([1, 2], [0, 1], [0, 2]):
        out = envs.step(np.array([actions]))
    assert out.terminated.tolist() == [[False, True]] and out.truncated.tolist() == [[False, False]]
    assert out.ended.tolist() == [True]
    _, terminated, truncated = mappo.critic_step(
        *(torch.from_numpy(x) for x in (out.rewards, out.terminated, out.truncated)),
        t([0, 1]), torch.from_numpy(out.ended), "ep")  # short inactive at step 3
    assert terminated.tolist() == [True] and truncated.tolist() == [False]


@pytest.mark.parametrize("critic_state, per_agent_reward", [("ep", False), ("as", False),
                                                            ("as", True)])
def test_the_buffers_store_active_masks_rewards_and_ends(relay, critic_state, per_agent_reward,
                                                         tmp_path, monkeypatch):
    # One copy, T = 4: steps 0-2 are the first episode (short done after step 0), step 3
    # the next episode's first.
    stored = []
    original = mappo.RolloutBuffer.gae
    monkeypatch.setattr(mappo.RolloutBuffer, "gae",
                        lambda self, *a: stored.append(self) or original(self, *a))
    mappo.main(mappo.Args(env_id="simple_v3", critic_state=critic_state, num_envs=1,
                          per_agent_reward=per_agent_reward, num_steps=4, total_timesteps=4,
                          eval_episodes=0, output_dir=str(tmp_path)))
    (b,) = stored
    assert b.active.squeeze(1).tolist() == [[1, 1], [0, 1], [0, 1], [1, 1]]
    # the environment got the stored actions of the agents that acted, and nothing else
    assert Relay.sent == [{a: b.actions[step, 0, i].item() for i, a in enumerate(("short", "long"))
                           if b.active[step, 0, i]} for step in range(4)]
    assert not (b.avail[:, 0, 0, 2] | b.avail[:, 0, 1, 0]).any()  # padding, env mask
    assert (b.actions[:, 0, 1] != 0).all() and (b.actions[:, 0, 0] != 2).all()
    if critic_state == "ep":
        # team rewards: (1 + 2)/2, then long's 2 alone, then (1 + 2)/2 again
        assert b.rewards.squeeze(1).tolist() == [1.5, 2, 2, 1.5]
        assert b.truncated.squeeze(1).tolist() == [False, False, True, False]
        assert not b.terminated.any()  # the episode ended by long's truncation
        assert b.final_critic[2, 0].tolist() == [3, 30]
        assert b.critic_obs[:, 0].tolist() == [[0, 0], [1, 10], [2, 20], [0, 0]]
        assert b.last_critic.tolist() == [[1, 10]]  # after step 3: the next state
    elif per_agent_reward:
        assert b.rewards.squeeze(1).tolist() == [[1, 2], [0, 2], [0, 2], [1, 2]]
    else:  # the team reward for each agent that acted, as in EP; 0 for done short
        assert b.rewards.squeeze(1).tolist() == [[1.5, 1.5], [0, 2], [0, 2], [1.5, 1.5]]
    if critic_state == "as":
        # short terminates after the first step of each episode
        assert b.terminated.squeeze(1).tolist() == [[True, False], [False] * 2, [False] * 2, [True, False]]
        assert b.truncated.squeeze(1).tolist() == [[False] * 2, [False] * 2, [False, True], [False] * 2]
        # state | own obs (padded to 2) | one-hot id
        assert b.final_critic[0, 0, 0].tolist() == [1, 10, 1, 0, 1, 0]
        assert b.final_critic[2, 0, 1].tolist() == [3, 30, 3, 3, 0, 1]
        assert b.critic_obs[1, 0, 0].tolist() == [1, 10, 0, 0, 1, 0]  # done: zero obs
        # after step 3 short is done again (zero obs) and long sees [1, 1]
        assert b.last_critic.tolist() == [[[1, 10, 0, 0, 1, 0], [1, 10, 1, 1, 0, 1]]]


def test_truncation_at_max_cycles_keeps_the_true_final_state():
    envs = mappo.LockstepEnvs("simple_spread_v3", 2, max_cycles=2)
    envs.reset(seed=0)
    envs.step(np.zeros((2, 3), dtype=np.int64))
    out = envs.step(np.zeros((2, 3), dtype=np.int64))
    assert out.truncated.all() and not out.terminated.any()
    assert [e[2] for e in out.episodes] == [2, 2] and out.ended.all()
    # MPE's state is the agents' observations joined: the final state is the final
    # observations', not the next episode's first state
    assert np.allclose(out.final_state, out.final_obs.reshape(2, -1))
    assert np.allclose(out.state, out.obs.reshape(2, -1))
    assert not np.allclose(out.state, out.final_state)


def test_copies_and_runs_of_nearby_seeds_do_not_share_start_states():
    # with copy seeds seed + n, run 2's copy 0 would start where run 1's copy 1 does
    starts = [mappo.LockstepEnvs("simple_spread_v3", 2, 25).reset(seed)[1] for seed in (1, 2, 1)]
    assert np.array_equal(starts[0], starts[2])  # the same seed: the same start
    assert not np.allclose(starts[0][1], starts[1][0]) and not np.allclose(starts[0], starts[1])
    # and within one run each copy gets a seed of its own from the run's: with every copy
    # reset at the run's seed, the N copies would play one start state N times
    assert not np.allclose(starts[0][0], starts[0][1])


# ---------------------------------------------------------------------------------------
# What the loop passes to the loss (the glue), on Relay with a critic whose value is the
# step counter k of its input (state [k, 10k] first): with gamma = lambda = 1 the returns
# are sums of rewards, known by hand. One copy, T = 4: steps 0-2 are the first episode
# (short done after step 0, long truncated after step 2 with a final state worth 3), step 3
# the next episode's first, after which the state is worth 1.
# ---------------------------------------------------------------------------------------
class StepCritic(torch.nn.Module):
    """A critic whose value is the first feature of its input (Relay's step counter k)."""

    def __init__(self, critic_dim, *args):
        super().__init__()
        self.critic_dim, self.unused = critic_dim, torch.nn.Parameter(torch.zeros(()))

    def forward(self, x):
        return x[..., 0] + 0 * self.unused


@pytest.fixture
def loss_spy(relay, tmp_path, monkeypatch):
    """run(**flags) trains on Relay with StepCritic, one epoch of one minibatch an update
    (unless flags say otherwise), the rows in rollout order, and returns the keyword
    arguments of the last mappo_loss call: the first update's with the default
    total_timesteps=4, the second's with 8. run.calls holds every call's."""
    calls = []
    original = mappo.mappo_loss
    monkeypatch.setattr(mappo, "Critic", StepCritic)
    monkeypatch.setattr(torch, "randperm", lambda n, **kwargs: torch.arange(n))
    monkeypatch.setattr(mappo, "mappo_loss", lambda *args, **kwargs: calls.append(
        dict(zip(LOSS_ARGS, args), **kwargs)) or original(*args, **kwargs))

    def run(total_timesteps=4, **flags):
        calls.clear()
        args = mappo.Args(**{**dict(env_id="simple_v3", num_envs=1, num_steps=4, gamma=1.0,
                                    gae_lambda=1.0, eval_episodes=0, update_epochs=1,
                                    total_timesteps=total_timesteps, output_dir=str(tmp_path)),
                             **flags})
        mappo.main(args)
        assert len(calls) == total_timesteps // 4 * args.update_epochs * args.num_minibatches
        return calls[-1]
    run.calls = calls
    return run


LOSS_ARGS = ("newlogprob", "oldlogprob", "advantages", "active", "newvalue", "oldvalue",
             "returns", "value_mask", "entropy")
ACTIVE = [[1, 1], [0, 1], [0, 1], [1, 1]]  # short is done during steps 1 and 2


def test_the_ep_update_gets_the_active_mask_and_normalized_targets(loss_spy):
    # team rewards [1.5, 2, 2, 1.5]; returns [1.5 + 7, 2 + 5, 2 + 3, 1.5 + 1] = [8.5, 7, 5, 2.5]
    # (step 2 bootstraps from its final state's 3, step 3 from the next state's 1)
    # mean 5.75, variance (2.75^2 + 1.25^2 + 0.75^2 + 3.25^2)/4 = 20.25/4, std 2.25:
    #   targets [2.75, 1.25, -0.75, -3.25]/2.25 = [1.222222, 0.555556, -0.333333, -1.444444]
    got = loss_spy()
    assert got["active"].tolist() == ACTIVE and got["value_mask"].tolist() == [1, 1, 1, 1]
    assert same(got["returns"], [2.75 / 2.25, 1.25 / 2.25, -0.75 / 2.25, -3.25 / 2.25])
    assert got["oldvalue"].tolist() == [0, 1, 2, 0]  # V = k of each step's state


def test_the_update_normalizes_advantages_over_the_active_agents_only(loss_spy):
    # EP: advantages A = R - V = [8.5 - 0, 7 - 1, 5 - 2, 2.5 - 0] = [8.5, 6, 3, 2.5], each
    # copy's shared by its agents; the 6 active entries 8.5, 8.5, 6, 3, 2.5, 2.5 have mean
    # 31/6 and deviations (in sixths) 20, 20, 5, -13, -16, -16: unbiased variance
    # (400 + 400 + 25 + 169 + 256 + 256)/36/5 = 8.366667, std 2.892519, so
    #   step 0: (20/6)/2.892519 = 1.152398, step 1: (5/6)/2.892519 = 0.288100,
    #   step 2: -(13/6)/2.892519 = -0.749059, step 3: -(16/6)/2.892519 = -0.921918,
    # and the inactive entries (short at steps 1 and 2) 0. (Over all 8 entries the mean
    # would be 40/8 = 5.)
    got = loss_spy()
    assert same(got["advantages"], [[1.152398, 1.152398], [0, 0.288100], [0, -0.749059],
                                    [-0.921918, -0.921918]])
    # --no-norm-adv: the raw advantages
    assert same(loss_spy(norm_adv=False)["advantages"], [[8.5, 8.5], [6, 6], [3, 3], [2.5, 2.5]])


def test_the_first_minibatch_sees_the_policy_that_acted(loss_spy):
    # Before the first optimizer step the actors are those that collected the rollout: the
    # stored log-probabilities are those of the stored actions under the stored observations
    # and available actions, so every ratio is 1 (log-ratio 0), done agents' rows included.
    got = loss_spy()
    assert torch.allclose(got["newlogprob"].detach(), got["oldlogprob"], atol=1e-6)


def test_no_value_norm_gives_the_critic_the_returns_as_they_are(loss_spy):
    # EP returns [8.5, 7, 5, 2.5] (above), not normalized
    assert same(loss_spy(value_norm=False)["returns"], [8.5, 7, 5, 2.5])


def test_the_second_update_denormalizes_the_values_with_the_first_updates_statistics(loss_spy):
    # After the first update the statistics are mean 5.75 and std 2.25 (above): the critic's
    # outputs V = k are read as 2.25 k + 5.75 in return units. Second rollout, EP: step 4
    # (k = 1, long alone: r = 2), step 5 (k = 2, r = 2, long truncated: final state k = 3),
    # step 6 (a new episode, k = 0, r = (1 + 2)/2 = 1.5), step 7 (k = 1, r = 2), then k = 2.
    #   values [8, 10.25, 5.75, 8]; final state 2.25*3 + 5.75 = 12.5; last 2.25*2 + 5.75 = 10.25
    #   returns (gamma = lambda = 1): step 7: 2 + 10.25 = 12.25, step 6: 1.5 + 12.25 = 13.75,
    #   step 5: 2 + 12.5 = 14.5, step 4: 2 + 14.5 = 16.5
    # Statistics of all 8 returns 8.5, 7, 5, 2.5, 16.5, 14.5, 13.75, 12.25: mean 80/8 = 10,
    # squared deviations 2.25 + 9 + 25 + 56.25 + 42.25 + 20.25 + 14.0625 + 5.0625 = 174.125,
    # variance 21.765625, std 4.665364: targets [6.5, 4.5, 3.75, 2.25]/4.665364.
    got = loss_spy(total_timesteps=8)
    assert got["oldvalue"].tolist() == [1, 2, 0, 1]  # stored as the critic output them
    assert same(got["returns"], [1.393246, 0.964555, 0.803796, 0.482277])
    # advantages R - V = [8.5, 4.25, 8, 4.25]; active entries 8.5, 4.25, 8, 8, 4.25 (short
    # acts at step 6 only): mean 6.6, unbiased variance (1.9^2 + 2.35^2 + 1.4^2 + 1.4^2 +
    # 2.35^2)/4 = 18.575/4 = 4.64375, std 2.154939
    assert same(got["advantages"], [[0, 1.9 / 2.154939], [0, -2.35 / 2.154939],
                                    [1.4 / 2.154939, 1.4 / 2.154939], [0, -2.35 / 2.154939]])


def test_the_as_update_masks_inactive_agents_out_of_the_values_and_their_statistics(loss_spy):
    # AS, team reward: short gets 1.5 at steps 0 and 3 (terminated both times: return 1.5)
    # and 0 while done; its returns at the done steps 1 and 2 run on into the next episode:
    # 0 + 1.5 = 1.5 each. long: the EP returns [8.5, 7, 5, 2.5].
    # Value-norm statistics over the 6 active entries 1.5, 8.5, 7, 5, 1.5, 2.5 only:
    #   mean 26/6 = 13/3; deviations (in sixths) -17, 25, 16, 4, -17, -11:
    #   variance (289 + 625 + 256 + 16 + 289 + 121)/36/6 = 1596/216 = 7.388889, std 2.718251
    #   (over all 8 entries the mean would be 29/8 = 3.625)
    #   targets: short (1.5 - 13/3)/2.718251 = -17/6/2.718251 = -1.042337 at steps 0 and 3,
    #   long [25/6, 16/6, 4/6, -11/6]/2.718251 = [1.532848, 0.981023, 0.245256, -0.674453]
    got = loss_spy(critic_state="as")
    assert got["active"].tolist() == ACTIVE and got["value_mask"].tolist() == ACTIVE
    short, long = got["returns"][:, 0], got["returns"][:, 1]
    assert same(short[[0, 3]], [-1.042337, -1.042337])
    assert same(long, [1.532848, 0.981023, 0.245256, -0.674453])


@pytest.mark.parametrize("gamma, gae_lambda, expected", [(0.5, 1.0, [3.375, 3.75, 3.5, 2]),
                                                        (1.0, 0.5, [4.75, 5.5, 5, 2.5])])
def test_the_update_discounts_with_gamma_and_lambda(gamma, gae_lambda, expected, loss_spy):
    # EP, no value norm: team rewards [1.5, 2, 2, 1.5], V = k = [0, 1, 2, 0]; step 2 is
    # truncated (its final state worth 3), step 3 bootstraps from the next state's 1.
    # gamma 0.5, lambda 1 (the discounted return): R_3 = 1.5 + 0.5*1 = 2,
    #   R_2 = 2 + 0.5*3 = 3.5, R_1 = 2 + 0.5*3.5 = 3.75, R_0 = 1.5 + 0.5*3.75 = 3.375
    # gamma 1, lambda 0.5: deltas [1.5 + 1 - 0, 2 + 2 - 1, 2 + 3 - 2, 1.5 + 1 - 0] =
    #   [2.5, 3, 3, 2.5]; A_3 = 2.5, A_2 = 3 (the episode ended), A_1 = 3 + 0.5*3 = 4.5,
    #   A_0 = 2.5 + 0.5*4.5 = 4.75; R = A + V = [4.75, 5.5, 5, 2.5]
    got = loss_spy(value_norm=False, gamma=gamma, gae_lambda=gae_lambda)
    assert same(got["returns"], expected)


def test_the_update_passes_the_loss_flags(loss_spy):
    got = loss_spy(clip_coef=0.15, ent_coef=0.03, vf_coef=0.7, clip_vloss=False)
    assert (got["clip_coef"], got["ent_coef"], got["vf_coef"], got["clip_vloss"]) == (0.15, 0.03, 0.7, False)
    got = loss_spy()
    assert (got["clip_coef"], got["ent_coef"], got["vf_coef"], got["clip_vloss"]) == (0.2, 0.005, 1.0, True)


@pytest.mark.parametrize("anneal_lr, expected_rates", [(True, [2e-3] * 6 + [1e-3] * 6),
                                                       (False, [2e-3] * 12)])
def test_each_epoch_covers_the_rollout_in_minibatches_with_each_networks_clip(
        anneal_lr, expected_rates, loss_spy, monkeypatch):
    # 3 epochs of 2 minibatches of 2 (step, copy) rows: 6 loss calls, each epoch's two
    # minibatches the 4 rows; before each optimizer step, the actors' and the critic's
    # gradients are clipped apart at --max-grad-norm, and Adam steps at --learning-rate 2e-3,
    # or with --anneal-lr from 2e-3 (first update) to 1e-3 (second of two)
    clips, rates, original = [], [], torch.nn.utils.clip_grad_norm_

    def clip(params, max_norm, **kwargs):
        params = list(params)
        clips.append(({id(p) for p in params}, max_norm))
        return original(params, max_norm, **kwargs)

    monkeypatch.setattr(torch.nn.utils, "clip_grad_norm_", clip)
    step = torch.optim.Adam.step
    monkeypatch.setattr(torch.optim.Adam, "step", lambda self, *a, **kw: rates.append(
        self.param_groups[0]["lr"]) or step(self, *a, **kw))
    made, original_main = [], mappo.train
    monkeypatch.setattr(mappo, "train", lambda args, envs, actors, critic, *rest: made.append(
        (actors, critic)) or original_main(args, envs, actors, critic, *rest))
    loss_spy(total_timesteps=8, num_minibatches=2, update_epochs=3, max_grad_norm=3.5,
             anneal_lr=anneal_lr, learning_rate=2e-3)
    # V = k of each row: [0, 1, 2, 0] in the first rollout, [1, 2, 0, 1] in the second
    assert [c["oldvalue"].tolist() for c in loss_spy.calls] == [[0, 1], [2, 0]] * 3 + [[1, 2], [0, 1]] * 3
    actors, critic = made[0]
    assert clips == [({id(p) for p in actors.parameters()}, 3.5),
                     ({id(p) for p in critic.parameters()}, 3.5)] * 12
    assert rates == expected_rates


def test_explained_variance_uses_the_statistics_the_values_were_made_with(loss_spy, tmp_path):
    # EP: the returns [8.5, 7, 5, 2.5] of the test above (mean 5.75), the values V = k =
    # [0, 1, 2, 0], made while the value norm still had mean 0 and std 1 (in return units
    # the same numbers):
    #   errors R - V = [8.5, 6, 3, 2.5] (mean 5); sums of squared deviations:
    #   errors 3.5^2 + 1^2 + 2^2 + 2.5^2 = 23.5, returns 2.75^2 + 1.25^2 + 0.75^2 + 3.25^2 = 20.25
    #   explained variance = 1 - 23.5/20.25 = -0.160494
    # (read with the statistics after the update, mean 5.75 and std 2.25, V would be
    # [5.75, 8, 10.25, 5.75], and the figure -0.743056)
    loss_spy()
    (row,) = read_csv(next(tmp_path.glob("*/updates.csv")))
    assert float(row["explained_variance"]) == approx(1 - 23.5 / 20.25)


def test_as_explained_variance_counts_the_active_agents_only(loss_spy, tmp_path):
    # AS: the returns of the AS test above, short [1.5, 1.5, 1.5, 1.5] and long [8.5, 7, 5,
    # 2.5], the values V = k = [0, 1, 2, 0] for each agent. The 6 active entries (short at
    # steps 0 and 3, long at all 4):
    #   returns 1.5, 8.5, 7, 5, 1.5, 2.5: mean 26/6, deviations (in sixths) -17, 25, 16, 4,
    #   -17, -11, squares 289 + 625 + 256 + 16 + 289 + 121 = 1596 (/36)
    #   errors R - V 1.5, 8.5, 6, 3, 1.5, 2.5: mean 23/6, deviations (in sixths) -14, 28, 13,
    #   -5, -14, -8, squares 196 + 784 + 169 + 25 + 196 + 64 = 1434 (/36)
    #   explained variance = 1 - 1434/1596 = 0.101504
    # (over all 8 entries, short's done steps 1 and 2 with errors 0.5 and -0.5 counted: returns
    # mean 29/8, squares 56.375; errors mean 23/8, squares 62.375; 1 - 62.375/56.375 = -0.106430)
    loss_spy(critic_state="as")
    (row,) = read_csv(next(tmp_path.glob("*/updates.csv")))
    assert float(row["explained_variance"]) == approx(1 - 1434 / 1596)


def test_update_rows_hold_the_learning_rate_and_the_return_statistics(loss_spy, tmp_path):
    # EP, two updates, --anneal-lr from 2e-3: the first update steps at 2e-3 * (1 - 0/2) =
    # 2e-3, the second at 2e-3 * (1 - 1/2) = 1e-3. The value norm's statistics after each
    # update (the tests above): mean 5.75 and std 2.25 after the first rollout's returns
    # [8.5, 7, 5, 2.5], mean 10 and std sqrt(174.125/8) = sqrt(21.765625) = 4.665364 after
    # the second's [16.5, 14.5, 13.75, 12.25] joined them.
    loss_spy(total_timesteps=8, anneal_lr=True, learning_rate=2e-3)
    rows = read_csv(next(tmp_path.glob("*/updates.csv")))
    assert {"learning_rate", "return_mean", "return_std"} <= set(rows[0])
    assert [float(r["learning_rate"]) for r in rows] == approx([2e-3, 1e-3])
    assert [float(r["return_mean"]) for r in rows] == approx([5.75, 10])
    assert [float(r["return_std"]) for r in rows] == approx([2.25, 4.665364])


# ---------------------------------------------------------------------------------------
# Your own environment: module:function (tests/my_envs.py's team_env has no state())
# ---------------------------------------------------------------------------------------
class BoxActions(TeamEnv):
    """TeamEnv with continuous actions, which mappo.py refuses."""

    def action_space(self, agent):
        return gym.spaces.Box(0.0, 1.0, (1,))


def box_actions_env():
    return BoxActions()


class ImageObservations(TeamEnv):
    """TeamEnv with 2 x 2 observations, which mappo.py's MLPs refuse."""

    def observation_space(self, agent):
        return gym.spaces.Box(0.0, 3.0, (2, 2))


def image_observations_env():
    return ImageObservations()


def aec_env():
    """An AEC environment where a parallel one is needed."""
    from mpe2 import simple_v3
    return simple_v3.raw_env()


def test_team_env_without_state_gets_the_observations_joined(fresh_env_module):
    assert spec_of("my_envs:team_env") == {"agents": ["a", "b"], "obs_dims": [1, 1],
                                           "action_counts": [2, 2], "state_dim": 2}
    envs = mappo.LockstepEnvs("my_envs:team_env", 1, max_cycles=25)
    assert not envs.has_state
    assert envs.reset(seed=0)[1].tolist() == [[0, 0]]
    for _ in range(2):
        out = envs.step(np.array([[0, 1]]))  # b walks to 2
    out = envs.step(np.array([[1, 1]]))  # a to 1, b to 3: b is done
    assert out.terminated.tolist() == [[False, True]] and out.final_state.tolist() == [[1, 3]]
    assert out.state.tolist() == [[1, 0]] and out.active.tolist() == [[True, False]]


@pytest.mark.slow  # a smoke run: a whole tiny run and every file it writes
def test_smoke_run_on_your_own_environment(fresh_env_module, tmp_path, check_run_folder):
    summary = mappo.main(mappo.Args(env_id="my_envs:team_env", critic_state="as",
                                    eval_episodes=2, save_model=True,
                                    output_dir=str(tmp_path), **TINY))
    _, episodes, _ = check_run_folder(summary, tmp_path, "mappo", model=True)
    # a is truncated after 5 steps in every episode (b may finish earlier): 2 copies x 60/2
    # steps / 5 = 12 episodes of 5 steps
    assert summary["env_id"] == "my_envs:team_env" and len(episodes) == 12
    assert {e["episode_length"] for e in episodes} == {"5"}


# ---------------------------------------------------------------------------------------
# Heterogeneous agents: simple_speaker_listener_v4's speaker sees 3 numbers and has 3
# actions, its listener 11 and 5.
# ---------------------------------------------------------------------------------------
def test_shared_actor_pads_observations_and_masks_missing_actions():
    spec = spec_of("simple_speaker_listener_v4")
    assert spec["obs_dims"] == [3, 11] and spec["action_counts"] == [3, 5]
    envs = mappo.LockstepEnvs("simple_speaker_listener_v4", 2, max_cycles=25)
    obs, state, avail, _ = envs.reset(seed=0)
    assert obs.shape == (2, 2, 11) and state.shape == (2, 14) and not obs[:, 0, 3:].any()
    assert avail[0].tolist() == [[True] * 3 + [False] * 2, [True] * 5]
    torch.manual_seed(0)
    actors = mappo.Actors([3, 11], 5, share=True)
    obs, avail = torch.from_numpy(obs).expand(500, 2, 2, 11), torch.from_numpy(avail).expand(500, 2, 2, 5)
    actions, _ = actors.act(obs, avail)
    assert actions[..., 0].max() == 2 and actions[..., 1].max() == 4  # the listener uses all 5
    per_agent = mappo.Actors([3, 11], 5, share=False)
    assert [a[1].in_features for a in per_agent.actors] == [3, 11]  # a[0]: no LayerNorm
    assert per_agent.logits(obs, avail).shape == (500, 2, 2, 5)


def test_heterogeneous_agents_train_with_one_actor_each_as_and_layer_norm(tmp_path, check_run_folder,
                                                                          monkeypatch):
    moved = spy_on_weights(monkeypatch, mappo)
    # --seed 7, not the default 1: torch's seed, the training copies', and at 7 + 100,000
    # each --eval-every 50 evaluation's and the final one's (LockstepEnvs draws each copy's
    # seed from it). 2 copies step global_step by 2: 2, 4, ..., 100 crosses a multiple of 50
    # at 50 and at 100, 2 evaluations; with the training copies' seed 7 they would replay
    # the training's first episodes: [7, 7, 7, 100_007]
    seeds = spy_on(monkeypatch, mappo, "seed_and_device", lambda seed, *rest: seed)
    resets = spy_on(monkeypatch, mappo.LockstepEnvs, "reset", lambda self, seed: seed)
    summary = mappo.main(mappo.Args(env_id="simple_speaker_listener_v4", share_actor=False,
                                    critic_state="as", layer_norm=True, num_envs=2, num_steps=25,
                                    total_timesteps=100, eval_episodes=2, eval_every=50,
                                    save_model=True, seed=7, output_dir=str(tmp_path)))
    assert seeds == [7] and resets == [7, 100_007, 100_007, 100_007]
    path, _, _ = check_run_folder(summary, tmp_path, "mappo", model=True)
    state = torch.load(os.path.join(path, "model.pt"), weights_only=True)
    # one actor per agent, each on its own observation (3 and 11 wide), LayerNorm first
    assert [state["actors"][f"actors.{i}.0.weight"].shape for i in (0, 1)] == [(3,), (11,)]
    assert state["actors"]["actors.1.1.weight"].shape == (64, 11)
    # --layer-norm reaches the critic too: LayerNorm on its input, state 14 | own obs 11 |
    # id 2 = 27 wide, and on its two hidden layers (without it these entries do not exist)
    assert {k: tuple(v.shape) for k, v in state["critic"].items()
            if k in ("net.0.weight", "net.3.weight", "net.6.weight")} == {
        "net.0.weight": (27,), "net.3.weight": (64,), "net.6.weight": (64,)}
    # and the updates moved every weight of both actors and of the critic
    assert [still for still, _ in moved()] == [[], []]


# ---------------------------------------------------------------------------------------
# Runs end to end
# ---------------------------------------------------------------------------------------
TINY = dict(num_envs=2, num_steps=10, max_cycles=5, total_timesteps=60)


@pytest.mark.parametrize("critic_state", ["ep", "as"])
@pytest.mark.slow  # a smoke run: a whole tiny run and every file it writes
def test_smoke_run_writes_every_file_and_its_model_evaluates(critic_state, tmp_path, check_run_folder):
    summary = mappo.main(mappo.Args(critic_state=critic_state, eval_episodes=2, save_model=True,
                                    output_dir=str(tmp_path / "train"), **TINY))
    path, episodes, updates = check_run_folder(summary, tmp_path / "train", "mappo", model=True)
    assert summary["global_steps"] == 60 and len(updates) == 3
    # 2 copies x 60/2 steps / 5 steps per episode = 12 episodes of 5 steps
    assert len(episodes) == 12 and {e["episode_length"] for e in episodes} == {"5"}
    assert {"policy_loss", "value_loss", "entropy", "approx_kl", "explained_variance"} <= set(updates[0])
    evaluated = mappo.main(mappo.Args(eval_checkpoint=os.path.join(path, "model.pt"),
                                      eval_episodes=2, output_dir=str(tmp_path / "eval")))
    assert evaluated["eval_return_mean"] == pytest.approx(summary["eval_return_mean"])


def test_stop_at_return_stops_and_records_when(tmp_path):
    # --stop-at-return replaces GOALS["simple_spread_v3"]'s threshold and keeps its window of
    # 100 episodes. Returns are negative but never below -1000, so the 100-episode mean
    # reaches it as soon as 100 episodes have ended: TINY's 2 copies end two episodes every
    # 5 lock-steps (max_cycles 5, 2 steps a lock-step: 10 steps), the 99th and 100th at
    # 50 * 10 = 500 steps, of a budget of 600 (30 whole rollouts of 2 * 10 = 20 steps): the
    # run stops there, mid-budget, and the summary records it
    assert mappo.GOALS["simple_spread_v3"][1] == 100
    summary = mappo.main(mappo.Args(stop_at_return=-1000.0, eval_episodes=0,
                                    output_dir=str(tmp_path), **{**TINY, "total_timesteps": 600}))
    episodes = read_csv(next(tmp_path.glob("*/episodes.csv")))
    assert [int(e["global_step"]) for e in episodes] == [10 * (i // 2 + 1) for i in range(100)]
    assert summary["solved_at_step"] == summary["global_steps"] == 500
    assert summary["solved_threshold"] == -1000.0 and summary["solved_window"] == 100


def test_the_budget_is_rounded_down_to_whole_rollouts(tmp_path):
    # 70 steps in rollouts of 2 * 10 = 20: 3 whole rollouts, 60 steps
    summary = mappo.main(mappo.Args(eval_episodes=0, output_dir=str(tmp_path),
                                    **{**TINY, "total_timesteps": 70}))
    assert summary["global_steps"] == 60


def test_nan_loss_stops_cleanly(tmp_path, monkeypatch, capsys):
    original = mappo.mappo_loss
    monkeypatch.setattr(mappo, "mappo_loss", lambda *a, **k: (original(*a, **k)[0] * math.nan,
                                                              *original(*a, **k)[1:]))
    summary = mappo.main(mappo.Args(output_dir=str(tmp_path), **TINY))
    assert summary["interrupted"] is True and summary["global_steps"] == 20
    assert (next(tmp_path.iterdir()) / "summary.json").exists()
    assert "the loss became non-finite (NaN or inf) at step 20" in capsys.readouterr().out


@pytest.mark.parametrize("critic_state", ["ep", "as"])
@pytest.mark.slow  # determinism: two whole runs
def test_same_seed_gives_the_same_episodes(critic_state, tmp_path):
    rows = same_seed_episodes(lambda out: mappo.main(mappo.Args(
        critic_state=critic_state, eval_episodes=0, output_dir=out,
        **{**TINY, "total_timesteps": 200})), tmp_path)
    assert len(rows) == 40
    assert len({r[1] for r in rows}) > 30  # the returns differ from episode to episode


# ---------------------------------------------------------------------------------------
# Watching a run: --eval-every (the progress line is tests/test_plumbing.py's)
# ---------------------------------------------------------------------------------------
@pytest.mark.slow  # watching a run: evaluations during it
def test_eval_every_writes_rows_keeps_the_best_model_and_leaves_training_alone(tmp_path):
    # 3 copies step global_step by 3: 3, 6, ..., 90 (3 rollouts of 3 * 10 lock-steps). A row
    # each time it crosses a multiple of 20: at 21 (7 * 3, past 20), 42, 60 (exactly) and 81;
    # 90 crosses none. Rows 42 and 60 evaluate the same actors (the second update comes after
    # step 60), a tie that best_model.pt must keep at the first of the two.
    args = mappo.Args(eval_every=20, eval_episodes=3, save_model=True, seed=1,
                      **{**TINY, "num_envs": 3, "total_timesteps": 90})
    check_evaluations(mappo.main, args, tmp_path, [21, 42, 60, 81])


def test_evaluation_is_greedy_over_the_available_actions_and_done_agents_send_nothing(relay):
    # Logits that ignore the observation: [2, 0, 0.5] for every agent. short has actions
    # 0 and 1 (2 is padding): greedy 0. long may not take 0 (its action mask): greedy 2
    # over [0, 0.5]. Sampled, long would take 1 with probability 1/(1 + e^0.5) = 0.38 at
    # each of its 12 steps. Relay's episodes: short acts once, long 3 times; every episode's
    # mean per-agent return is (1 + 3*2)/2 = 3.5. The 4 copies step in turn. (The plumbing's
    # evaluate plays greedy_policy's actions on make_vector_env's EvaluationEnvs.)
    torch.manual_seed(0)
    actors = mappo.Actors([1, 2], 3, share=True)
    with torch.no_grad():
        actors.actor[-1].weight.zero_()
        actors.actor[-1].bias.copy_(t(2, 0, 0.5))
    returns = mappo.evaluate(mappo.Args(env_id="simple_v3", eval_episodes=4), {"actors": actors})
    assert returns.tolist() == [3.5] * 4
    assert Relay.sent == [{"short": 0, "long": 2}] * 4 + [{"long": 2}] * 8


class Varied(Relay):
    """Relay whose first 3 resets run episodes of 2, 3 and 4 steps, and every later one 1
    step; long may take only action 1 + k % 2 at step k (its mask changes every step)."""
    resets = 0
    taken = []  # (k, long's action) at each of long's steps

    def reset(self, seed=None, options=None):
        Varied.resets += 1
        self.limit = Varied.resets + 1 if Varied.resets <= 3 else 1
        return super().reset(seed, options)

    @property
    def long_mask(self):
        return np.eye(3, dtype=np.int8)[1 + self.k % 2]

    def step(self, actions):
        Varied.taken.append((self.k, actions["long"]))
        return super().step(actions)


def test_evaluation_follows_each_steps_masks_and_keeps_each_copys_first_episode(relay,
                                                                               monkeypatch):
    # 3 copies (resets 1-3): first episodes of 2, 3 and 4 steps, mean per-agent returns
    # (1 + 2*2)/2 = 2.5, (1 + 3*2)/2 = 3.5 and (1 + 4*2)/2 = 4.5. Copies 0 and 1 end theirs
    # first and play 1-step episodes (return (1 + 2)/2 = 1.5) until copy 2 ends: those do
    # not count. Greedy over the mask of each step, long takes 1 + k % 2 at step k.
    monkeypatch.setattr(mappo, "make_env", lambda *args, **kwargs: Varied())
    # -1: the reset of the environment LockstepEnvs reads the state's size from comes first
    Varied.resets, Varied.taken = -1, []
    actors = mappo.Actors([1, 2], 3, share=True)
    returns = mappo.evaluate(mappo.Args(env_id="simple_v3", eval_episodes=3), {"actors": actors})
    assert returns.tolist() == [2.5, 3.5, 4.5]
    # 4 lock-steps of 3 copies, long acting in every one
    assert len(Varied.taken) == 12 and all(a == 1 + k % 2 for k, a in Varied.taken)


# ---------------------------------------------------------------------------------------
# Bad input: one line on stderr, exit status 2, nothing trained
# ---------------------------------------------------------------------------------------
@pytest.mark.parametrize("argv, message", [
    (["--env-id", "foo"], "unknown environment id 'foo'; mappo.py runs the cooperative MPE tasks "
     "(collect_treasure_v1, simple_formation_v1"),
    (["--env-id", "CartPole-v1"], "CartPole-v1 is a single-agent Gymnasium environment; use ppo.py"),
    (["--env-id", "simple_tag_v3"], "simple_tag_v3 is a competitive MPE task"),
    (["--env-id", "test_mappo:box_actions_env"], "test_mappo:box_actions_env's agent a has a "
     "Box action space; mappo.py's actors are categorical"),
    (["--env-id", "test_mappo:image_observations_env"], "test_mappo:image_observations_env's "
     "agent a has observations Box(0.0, 3.0, (2, 2), float32); mappo.py's MLPs need flat Box"),
    (["--env-id", "my_envs:team_envs"], "module my_envs has no function team_envs (did you mean "
     "my_envs:team_env"),
    (["--env-id", "my_envs:NOT_AN_ENV"], "cannot make my_envs:NOT_AN_ENV: TypeError: 'int' "
     "object is not callable"),
    (["--env-id", "my_envs:GridWorld-v0"], "GridWorld-v0 is a single-agent Gymnasium "
     "environment; use ppo.py"),
    (["--env-id", "test_mappo:aec_env"], "test_mappo:aec_env gives a raw_env, not a PettingZoo "
     "parallel environment"),
    (["--per-agent-reward"], "--per-agent-reward needs --critic-state as"),
    (["--num-envs", "3", "--num-steps", "5", "--num-minibatches", "4"],
     "num_envs*num_steps = 15 is not divisible by --num-minibatches 4"),
    (["--num-envs", "0"], "--num-envs must be positive"),
    (["--max-cycles", "0"], "--max-cycles must be positive"),
    (["--total-timesteps", "100"], "less than one rollout"),
    (["--learning-rate", "0"], "--learning-rate must be positive"),
    (["--gae-lambda", "1.5"], "--gae-lambda must be in [0, 1]"),
])
def test_bad_input_is_one_line_and_exit_status_2(argv, message, check_usage_error,
                                                 fresh_env_module):
    check_usage_error("mappo.py", argv, message)


def test_help_lists_the_flags_with_their_docstrings(check_help):
    check_help("mappo.py", ("--cuda", "--no-cuda", "--critic-state", "--no-share-actor",
                            "--value-norm", "--max-cycles", "--num-envs", "--per-agent-reward"),
               ("lambda of GAE", "ep = env.state(), team reward"))


def test_episodes_updates_and_evaluations_come_at_the_lock_steps_global_step(tmp_path,
                                                                          monkeypatch):
    # A run of 24 episodes (2 copies, 5-step episodes, 120 steps: two end at each of 10, 20,
    # ..., 120), on a clock of the test's own (`time` moves 1 s at each reading, so that the
    # progress line prints every other lock-step), --eval-every 40 with a stand-in evaluation:
    # - episodes.csv: each episode at the global_step of the lock-step that ended it, with
    #   the mean per-agent return; updates.csv: a row after each rollout of 2 * 10 steps, at
    #   20, 40, ..., 120; evaluations.csv: rows at 40, 80 and 120;
    # - summary.json: train_return_last20 the mean of episodes.csv's last 20 returns;
    # - the progress line at step g: the mean of the last 20 returns of the episodes that
    #   ended before g (run.step comes before the step's episodes), None before the first:
    #   after the 21st episode not the mean of all, nor the last return.
    set_clock(mappo, monkeypatch)
    monkeypatch.setattr(mappo, "evaluate", lambda *args, **kwargs: np.array([1.0, 3.0]))
    lines = spy_on_progress_lines(mappo, monkeypatch)
    summary = mappo.main(mappo.Args(output_dir=str(tmp_path / "run"), eval_episodes=2,
                                    eval_every=40, **{**TINY, "total_timesteps": 120}))
    (path,) = (tmp_path / "run").iterdir()
    episodes = read_csv(path / "episodes.csv")
    steps = [int(e["global_step"]) for e in episodes]
    returns = [float(e["episode_return"]) for e in episodes]
    assert steps == [10 * (i // 2 + 1) for i in range(24)]
    assert {e["episode_length"] for e in episodes} == {"5"}
    assert [int(u["global_step"]) for u in read_csv(path / "updates.csv")] == [20, 40, 60, 80,
                                                                              100, 120]
    assert [int(r["global_step"]) for r in read_csv(path / "evaluations.csv")] == [40, 80, 120]
    assert summary["train_return_last20"] == approx(sum(returns[-20:]) / 20)
    assert summary["train_return_last20"] != approx(sum(returns) / 24)  # the sources differ
    ended_before = [[r for s, r in zip(steps, returns) if s < g] for g, _ in lines]
    assert [recent for _, recent in lines] == [
        pytest.approx(np.mean(before[-20:])) if before else None for before in ended_before]
    assert max(len(before) for before in ended_before) == 22  # lines after the 21st episode


# ---------------------------------------------------------------------------------------
# Flags at values other than their defaults (issue 59)
# ---------------------------------------------------------------------------------------
def test_an_evaluation_of_a_checkpoint_takes_the_models_flags_and_trains_nothing(
        tmp_path, capsys, monkeypatch, fresh_env_module):
    # A model of my_envs:team_env with every MODEL_FLAGS flag apart from its default
    # (--hidden-size 8, --no-share-actor, --layer-norm, --critic-state as, --max-cycles 3),
    # trained 6 steps, is evaluated with the defaults and --total-timesteps 101, less than one
    # rollout of 32 copies * 25 steps = 800 (refused for training), and --stop-at-return 5.
    # Each network flag decides the shapes (a model restored into the default networks would
    # not fit: exit 2); --max-cycles 3 ends the evaluation's episodes after 3 steps. The
    # model's networks are 8 wide: each agent's actor LayerNorm(1), Linear(1, 8), ...; the AS
    # critic LayerNorm(5), Linear(5, 8), ... on state 2 | own obs 1 | id 2.
    flags = dict(hidden_size=8, share_actor=False, layer_norm=True, critic_state="as",
                 max_cycles=3)
    env_id = "my_envs:team_env"
    trained = mappo.main(mappo.Args(env_id=env_id, num_envs=2, num_steps=3, total_timesteps=6,
                                    stop_at_return=5.0, save_model=True, eval_episodes=0,
                                    output_dir=str(tmp_path / "train"), **flags))
    (folder,) = (tmp_path / "train").iterdir()
    model = torch.load(folder / "model.pt", weights_only=True)
    assert [model["actors"][f"actors.{i}.1.weight"].shape for i in (0, 1)] == [(8, 1)] * 2
    assert model["critic"]["net.1.weight"].shape == (8, 5)
    capsys.readouterr()
    cycles = spy_on(monkeypatch, mappo, "EvaluationEnvs",
                    lambda env_id, num_envs, max_cycles, *rest: max_cycles)
    evaluated = mappo.main(mappo.Args(env_id=env_id, eval_checkpoint=str(folder / "model.pt"),
                                      total_timesteps=101, eval_episodes=1,
                                      stop_at_return=5.0, output_dir=str(tmp_path / "eval")))
    out = capsys.readouterr().out
    # not refused, no threshold (training had the 5 given)
    assert "solved_at_step" not in out
    assert trained["solved_threshold"] == 5.0 and evaluated["solved_threshold"] is None
    assert evaluated["global_steps"] == 0 and cycles == [3]
    (evaluation,) = (tmp_path / "eval").iterdir()
    config = json.loads((evaluation / "config.json").read_text())
    assert {k: config[k] for k in mappo.MODEL_FLAGS} == flags


def test_every_evaluation_leaves_the_value_norm_alone_and_the_best_model_keeps_its_own(
        loss_spy, tmp_path, monkeypatch):
    # Relay with StepCritic (loss_spy), 2 rollouts of 4 steps, --eval-every 4: evaluations at
    # step 4 (before the first update: mean 0, var 1, count 0), step 8 (after it: the EP
    # returns 8.5, 7, 5, 2.5: mean 5.75, var 20.25 / 4 = 5.0625, count 4) and the final one
    # (after the second: the 8 returns of the test above, mean 10, var 21.765625, count 8).
    # Each must leave the statistics as they are. The spy makes the k-th evaluation return k
    # (on Relay every evaluation returns the same, so the best row would be the first, whose
    # statistics a fresh ValueNorm has too): best_model.pt is step 8's, with its statistics.
    norms, original = [], mappo.ValueNorm
    monkeypatch.setattr(mappo, "ValueNorm", lambda enabled: norms.append(original(enabled))
                        or norms[-1])
    seen, evaluate = [], mappo.evaluate

    def spy(*args, **kwargs):
        before = dict(norms[0].state_dict())
        returns = evaluate(*args, **kwargs)
        seen.append((before, norms[0].state_dict()))
        return np.full_like(returns, len(seen))

    monkeypatch.setattr(mappo, "evaluate", spy)
    loss_spy(total_timesteps=8, eval_every=4, eval_episodes=1, save_model=True)
    expected = [(0.0, 1.0, 0), (5.75, 5.0625, 4), (10.0, 21.765625, 8)]
    assert [(b["mean"], b["var"], b["count"]) for b, _ in seen] == [
        (pytest.approx(m), pytest.approx(v), c) for m, v, c in expected]
    assert all(before == after for before, after in seen)
    rows = read_csv(next(tmp_path.glob("*/evaluations.csv")))
    assert [(r["global_step"], float(r["eval_return_mean"])) for r in rows] == [("4", 1), ("8", 2)]
    saved = torch.load(next(tmp_path.glob("*/best_model.pt")), weights_only=True)["value_norm"]
    assert saved == seen[1][0] and saved["count"] == 4


def test_approx_kl_and_clipfrac_read_every_epoch_of_the_active_agents_at_clip_coef(loss_spy,
                                                                                   tmp_path):
    # Relay (short is done at steps 1 and 2: 6 of the 8 entries active), one rollout, one
    # minibatch, 3 epochs, --clip-coef 0.01 (default 0.2) and --learning-rate 1e-2 (at 1e-3
    # the ratios hardly leave [0.99, 1.01]). With log r = newlogprob - oldlogprob of each
    # mappo_loss call and m the active mask, epoch e's KL is k_e = sum(m (r - 1 - log r)) / 6
    # and its clipped fraction sum(m (|r - 1| > 0.01)) / 6; the first epoch's comes before
    # any gradient step (log r = 0: k_1 = 0). updates.csv's row holds the means over the 3
    # epochs (a fraction at 0.2, or a KL over all 8 entries, would differ).
    loss_spy(update_epochs=3, clip_coef=0.01, learning_rate=1e-2)
    log_ratios = [c["newlogprob"].detach() - c["oldlogprob"] for c in loss_spy.calls]
    active = loss_spy.calls[0]["active"]
    assert active.sum() == 6

    def masked(x):
        return ((x * active).sum() / 6).item()

    k = [masked(r.exp() - 1 - r) for r in log_ratios]
    assert len(k) == 3 and k[0] < 1e-9 < k[1]
    everyone = np.mean([(r.exp() - 1 - r).mean().item() for r in log_ratios])
    assert everyone != pytest.approx(np.mean(k), rel=1e-3)
    fractions = {clip: np.mean([masked(((r.exp() - 1).abs() > clip).float()) for r in log_ratios])
                 for clip in (0.01, 0.2)}
    assert fractions[0.01] != fractions[0.2]
    (row,) = read_csv(next(tmp_path.glob("*/updates.csv")))
    assert float(row["approx_kl"]) == pytest.approx(np.mean(k), rel=1e-3)
    assert float(row["clipfrac"]) == pytest.approx(fractions[0.01], rel=1e-6)

"""Tests of matd3.py: the n-step return, the critic target and the rows each critic stores by
hand, HARL's EP and FP replay buffers (insert, windows, wrap-around, valid_transitions), what
the update passes to the math (every agent's target actor, the target critics, smoothing
noise and its clip, agent i's actor step on the batch's other actions), what the loop
stores, the lock-step plumbing with Box actions, runs end to end, its hooks (check_flags,
check_spaces, greedy_policy, MODEL_FLAGS), bad input, determinism. The plumbing every script
keeps is tests/test_plumbing.py's."""
import json
import os

import gymnasium as gym
import numpy as np
import pytest
import torch

import matd3
from conftest import (Relay, SameSizeRelay, TerminatingRelay, check_evaluations, copies,
                      moved_since, read_csv, same_seed_episodes, spy_on)
from my_envs import TeamEnv


def same(x, expected):
    """Tensor equality with nested lists up to float32 rounding."""
    return torch.allclose(x.float(), torch.tensor(expected, dtype=torch.float32), atol=1e-5)


def t(*rows):
    return torch.tensor(rows, dtype=torch.float32)


# ---------------------------------------------------------------------------------------
# The math by hand
# ---------------------------------------------------------------------------------------
def test_nstep_return_with_one_step_is_the_reward_and_gamma():
    # n = 1: R = r_0 and discount = gamma^1 whether the step ended or not
    returns, discounts = matd3.nstep_return(t([[1.0], [2.0]]), t([[0.0], [1.0]]), 0.9)
    assert same(returns, [[1.0], [2.0]]) and same(discounts, [[0.9], [0.9]])


def test_nstep_return_with_three_steps_stops_at_the_first_end():
    # gamma = 0.5, rewards [1, 2, 4] along each window (columns), ends:
    #   [0, 0, 0] no end:                 R = 1 + 0.5*2 + 0.25*4 = 3,  m = 3, discount 0.125
    #   [0, 1, 0] end inside (step 1):    R = 1 + 0.5*2 = 2,           m = 2, discount 0.25
    #   [1, 0, 0] end at the first step:  R = 1,                       m = 1, discount 0.5
    #   [0, 0, 1] end at the window's end R = 3,                       m = 3, discount 0.125
    #   [0, 1, 1] two ends: the first counts: R = 2, m = 2, discount 0.25
    # A termination and a truncation end the window alike (the bootstrap is critic_target's).
    rewards = t([1, 1, 1, 1, 1], [2, 2, 2, 2, 2], [4, 4, 4, 4, 4])
    ends = t([0, 0, 1, 0, 0], [0, 1, 0, 0, 1], [0, 0, 0, 1, 1])
    returns, discounts = matd3.nstep_return(rewards, ends, 0.5)
    assert same(returns, [3, 2, 1, 3, 2]) and same(discounts, [0.125, 0.25, 0.5, 0.125, 0.25])


def test_critic_target_by_hand_twin_and_single_with_a_termination():
    # R = 2, gamma^m = 0.25; Q'_1 = [4, 4], Q'_2 = [3, 5]; the second row terminated
    #   twin:   y = [2 + 0.25*min(4, 3), 2] = [2.75, 2]
    #   MADDPG: y = [2 + 0.25*4, 2] = [3, 2]
    args = dict(rewards=t(2, 2), discounts=t(0.25, 0.25), terminated=t(0, 1),
                next_q1=t(4, 4), next_q2=t(3, 5))
    assert same(matd3.critic_target(**args, twin_q=True), [2.75, 2])
    assert same(matd3.critic_target(**args, twin_q=False), [3, 2])


def test_next_index_moves_n_rows_on_wraps_and_stays_at_an_end():
    # N = 2, capacity 6: row 1 -> 3; row 5 -> (5 + 2) mod 6 = 1; an end stays at 4
    assert matd3.next_index(torch.tensor([1, 5, 4]), torch.tensor([0, 0, 1]), 2, 6).tolist() == [3, 1, 4]


def test_noisy_action_clips_the_noise_then_the_action():
    torch.manual_seed(0)
    a = torch.zeros(1000, 2)
    smoothed = matd3.noisy_action(a, 1e6, 0.5)  # |eps| > 0.5 almost surely: clipped to 0.5
    assert torch.allclose(smoothed.abs(), torch.full_like(a, 0.5))
    assert matd3.noisy_action(torch.full((5, 1), 0.9), 1e6, 0.5).max() == 1.0
    assert torch.equal(matd3.noisy_action(a, 0.0), a)


def test_soft_update_by_hand():
    target, source = torch.nn.Linear(1, 1), torch.nn.Linear(1, 1)
    for p, v in ((target.weight, 1.0), (source.weight, 3.0), (target.bias, 0.0), (source.bias, 1.0)):
        torch.nn.init.constant_(p, v)
    matd3.soft_update(target, source, 0.25)  # 0.25*3 + 0.75*1 = 1.5; 0.25*1 + 0 = 0.25
    assert target.weight.item() == 1.5 and target.bias.item() == 0.25


def test_critic_rows_ep_team_reward_and_episode_end():
    # 2 copies, 2 agents. Copy 0: rewards [1, 3], both act, both truncated (time limit):
    #   r = (1 + 3)/2 = 2, done, not terminated. Copy 1: agent 1 did not act (done earlier),
    #   agent 0 terminates with reward 4: r = 4/1 = 4, done, terminated.
    rewards, terminated = t([1, 3], [4, 0]), torch.tensor([[False, False], [True, False]])
    truncated, active = torch.tensor([[True, True], [False, False]]), t([1, 1], [1, 0])
    r, dones, terms = matd3.critic_rows(rewards, terminated, truncated, active,
                                        torch.tensor([True, True]), "ep")
    assert same(r, [[2], [4]]) and dones.tolist() == [[True], [True]]
    assert terms.tolist() == [[False], [True]]


def test_critic_rows_fp_one_row_per_agent_its_own_ends():
    # same step; FP: r^i = team reward * m^i = [[2, 2], [4, 0]]; done^i: copy 0 both
    # (truncated), copy 1 agent 0 terminated and agent 1 idle; term^i: copy 0 none (a
    # truncation bootstraps), copy 1 both (terminated; idle)
    rewards, terminated = t([1, 3], [4, 0]), torch.tensor([[False, False], [True, False]])
    truncated, active = torch.tensor([[True, True], [False, False]]), t([1, 1], [1, 0])
    r, dones, terms = matd3.critic_rows(rewards, terminated, truncated, active,
                                        torch.tensor([True, True]), "fp")
    assert same(r, [[2, 2], [4, 0]]) and dones.tolist() == [[True, True], [True, True]]
    assert terms.tolist() == [[False, False], [True, True]]


def test_state_rows_ep_is_the_state_fp_adds_own_obs_and_id():
    state, obs = t([7.0]), t([[1.0], [2.0]])  # 1 copy, S = 1, 2 agents, D = 1
    assert same(matd3.state_rows(state, obs, "ep"), [[[7.0]]])
    assert same(matd3.state_rows(state, obs, "fp"), [[[7, 1, 1, 0], [7, 2, 0, 1]]])


def test_to_env_action_scales_each_agent_to_its_bounds():
    # agent 0 in [0, 1]: a = -1, 0 -> 0, 0.5; agent 1 in [-2, 2]: a = 0.5, 1 -> 1, 2
    low, high = np.array([[0.0, 0.0], [-2.0, -2.0]]), np.array([[1.0, 1.0], [2.0, 2.0]])
    scaled = matd3.to_env_action(t([[-1, 0], [0.5, 1]]).unsqueeze(0), low, high)
    assert np.allclose(scaled, [[[0, 0.5], [1, 2]]])


def test_action_bounds_are_each_agents_own_padded_with_0_and_1():
    # a: 2 dimensions of their own bounds, [0, 4] and [-1, 1]; b: 1 dimension in [-2, 0],
    # padded to 2 with [0, 1], which no action uses
    low, high = matd3.action_bounds({
        "a": gym.spaces.Box(np.array([0, -1], np.float32), np.array([4, 1], np.float32)),
        "b": gym.spaces.Box(-2.0, 0.0, (1,))})
    assert low.tolist() == [[0, -1], [-2, 0]] and high.tolist() == [[4, 1], [0, 1]]
    assert low.dtype == high.dtype == np.float32


def test_resolve_algo_presets_and_overrides():
    maddpg = matd3.resolve_algo(matd3.Args(algo="maddpg"))
    assert (maddpg.twin_q, maddpg.target_policy_noise, maddpg.policy_delay) == (False, 0.0, 1)
    assert matd3.algorithm_name(maddpg) == "maddpg"
    mixed = matd3.resolve_algo(matd3.Args(algo="maddpg", twin_q=True))
    assert matd3.algorithm_name(mixed) == "maddpg+twin_q"
    assert matd3.algorithm_name(matd3.resolve_algo(matd3.Args())) == "matd3"


# ---------------------------------------------------------------------------------------
# The replay buffer: EP and FP, two agents, windows by hand, the wrap-around
# ---------------------------------------------------------------------------------------
def ep_buffer(capacity=8, n_step=3):
    """EP, N = 2 copies, 2 agents, S = D = d = 1; row r of a lock-step holds share_obs r,
    next_share_obs 100 + r, obs [r, r + 0.5], next obs [10 r, 10 r + 1], actions [-r/10, r/10]."""
    return matd3.ReplayBuffer(capacity, 2, 1, 1, 2, 1, 1, n_step, 0.5, "cpu")


def add_ep(buffer, row, rewards, dones, terms, valid=((1, 1), (1, 1))):
    rows = t(row, row + 1)
    buffer.add(share_obs=rows.view(2, 1, 1), obs=torch.stack([rows, rows + 0.5], 1).view(2, 2, 1),
               actions=torch.stack([-rows / 10, rows / 10], 1).view(2, 2, 1),
               rewards=t(*rewards).view(2, 1), dones=torch.tensor(dones).view(2, 1),
               valid=t(*valid), terms=torch.tensor(terms).view(2, 1),
               next_share_obs=(100 + rows).view(2, 1, 1),
               next_obs=torch.stack([10 * rows, 10 * rows + 1], 1).view(2, 2, 1))


def test_ep_buffer_insert_and_windows_by_hand():
    # Copy 0 (rows 0, 2, 4): rewards 1, 2, 4, truncated at its second step (done, not term).
    # Copy 1 (rows 1, 3, 5): rewards 10, 20, 40, no end. Rows 4 and 5 are the newest.
    buffer = ep_buffer()
    add_ep(buffer, 0, (1, 10), (False, False), (False, False))
    add_ep(buffer, 2, (2, 20), (True, False), (False, False))
    add_ep(buffer, 4, (4, 40), (False, False), (False, False))
    assert (buffer.pos, buffer.size) == (6, 6), "premise: three lock-steps of 2 rows were added"
    b = buffer.gather(torch.tensor([0, 1, 2, 4]))
    # row 0: rows 0, 2 (done) -> R = 1 + 0.5*2 = 2, gamma^2 = 0.25, bootstraps from row 2
    # row 1: rows 1, 3, 5 (newest) -> R = 10 + 0.5*20 + 0.25*40 = 30, gamma^3 = 0.125, row 5
    # row 2: done at once -> R = 2, 0.5, row 2;  row 4: newest -> R = 4, 0.5, row 4
    assert same(b.rewards, [[2], [30], [2], [4]]) and same(b.discounts, [[0.25], [0.125], [0.5], [0.5]])
    assert same(b.next_share_obs, [[[102]], [[105]], [[102]], [[104]]])
    # the stored flags of the last rows (2, 5, 2, 4): the newest rows are not done, only ends
    assert b.terms.tolist() == [[False]] * 4, "terms: the stored flag of each window's last row"
    assert b.dones.tolist() == [[True], [False], [True], [False]], (
        "dones: the stored flag of each window's last row, not end_flags()'s")
    # the start row's own fields; next_obs from the window's last row, [B, K=1, A, D]
    assert same(b.share_obs, [[[0]], [[1]], [[2]], [[4]]])
    assert same(b.obs[:, :, 0], [[0, 0.5], [1, 1.5], [2, 2.5], [4, 4.5]])
    assert same(b.actions[:, :, 0], [[0, 0], [-0.1, 0.1], [-0.2, 0.2], [-0.4, 0.4]])
    assert same(b.next_obs[:, 0, :, 0], [[20, 21], [50, 51], [20, 21], [40, 41]])
    assert b.valid.shape == (4, 2), "valid is the start row's, one entry per agent: [B, A]"


def test_ep_buffer_wraps_around_and_windows_cross_the_wrap():
    # capacity 8 = 4 lock-steps of 2 copies; a fifth lock-step overwrites rows 0 and 1.
    buffer = ep_buffer()
    for row, reward in ((0, 1), (2, 2), (4, 4), (6, 8), (0, 16)):
        add_ep(buffer, row, (reward, 0), (False, False), (False, False))
    assert (buffer.pos, buffer.size) == (2, 8), "premise: the fifth lock-step wrapped around"
    assert same(buffer.rewards[:, 0], [16, 0, 2, 0, 4, 0, 8, 0]), (
        "premise: the fifth lock-step overwrote rows 0 and 1")
    # the newest rows are 0 and 1 now, not 6 and 7
    assert buffer.end_flags()[:, 0].tolist() == [True, True] + [False] * 6, (
        "premise: end_flags marks the newest rows, 0 and 1")
    # row 6 (copy 0, fourth step) -> (6 + 2) mod 8 = row 0, the newest: R = 8 + 0.5*16 = 16
    b = buffer.gather(torch.tensor([6, 4]))
    # row 4 -> 6 -> 0: R = 4 + 0.5*8 + 0.25*16 = 12, gamma^3
    assert same(b.rewards, [[16], [12]]) and same(b.discounts, [[0.25], [0.125]])


def test_terminated_window_is_cut_and_truncated_one_bootstraps():
    # copy 0 terminates at its second step, copy 1 is truncated there: both end the window
    buffer = ep_buffer()
    add_ep(buffer, 0, (1, 1), (False, False), (False, False))
    add_ep(buffer, 2, (2, 2), (True, True), (True, False))
    add_ep(buffer, 4, (4, 4), (False, False), (False, False))
    b = buffer.gather(torch.tensor([0, 1]))
    assert same(b.rewards, [[2], [2]])
    assert b.terms.tolist() == [[True], [False]], (
        "terms is the flag of the window's last row: terminated cuts the bootstrap, truncated not")
    # y = R + 0.25 * (1 - term) * Q' with Q' = 8: [2, 2 + 2] = [2, 4]
    y = matd3.critic_target(b.rewards, b.discounts, b.terms, torch.full_like(b.rewards, 8.0), None,
                            twin_q=False)
    assert same(y, [[2], [4]])


def test_fp_buffer_one_window_per_agent_and_valid_transitions():
    # FP, N = 1 copy, 2 agents, K = 2 rows per step, n = 3, gamma 0.5. Agent 1 terminates at
    # step 0 and is idle after (done, term, not valid); agent 0 goes on, rewards 1, 2, 4.
    buffer = matd3.ReplayBuffer(4, 1, 2, 1, 2, 1, 1, 3, 0.5, "cpu")
    for step, valid in ((0, (1, 1)), (1, (1, 0)), (2, (1, 0))):
        buffer.add(share_obs=t([[step], [10 + step]]).view(1, 2, 1),
                   obs=t([[step], [step]]).view(1, 2, 1), actions=t([[0.1], [0.2]]).view(1, 2, 1),
                   rewards=t([2 ** step, 1 if step == 0 else 0]), dones=torch.tensor([[False, True]]),
                   valid=t(valid), terms=torch.tensor([[False, True]]),
                   next_share_obs=t([[100 + step], [110 + step]]).view(1, 2, 1),
                   next_obs=t([[10 * step], [10 * step + 1]]).view(1, 2, 1))
    b = buffer.gather(torch.tensor([0, 1]))
    # row 0: agent 0's window 0, 1, 2 (newest): R = 1 + 0.5*2 + 0.25*4 = 3, gamma^3, row 2;
    #        agent 1's ends at once: R = 1, gamma, terminated, row 0
    # row 1: agent 0: 1, 2 -> R = 2 + 0.5*4 = 4, gamma^2; agent 1: idle, R = 0, terminated
    assert same(b.rewards, [[3, 1], [4, 0]]) and same(b.discounts, [[0.125, 0.5], [0.25, 0.5]])
    assert b.terms.tolist() == [[False, True], [False, True]], (
        "each state row's terms is its own window's last row's, in its own column")
    assert same(b.next_share_obs[..., 0], [[102, 110], [102, 111]])
    # each state row's next joint observation comes from its own window's last row
    assert same(b.next_obs[..., 0], [[[20, 21], [0, 1]], [[20, 21], [10, 11]]])
    assert same(b.valid, [[1, 1], [1, 0]]) and same(b.share_obs[..., 0], [[0, 10], [1, 11]])


def test_capacity_is_rounded_down_to_whole_lock_steps():
    assert matd3.ReplayBuffer(7, 2, 1, 1, 2, 1, 1, 1, 0.5, "cpu").capacity == 6


# ---------------------------------------------------------------------------------------
# What the update passes to the math
# ---------------------------------------------------------------------------------------
def networks(twin_q=True, state_dim=1):
    """2 agents, obs 2 and 1, actions 1 and 2 (padded to 2), online and target apart."""
    torch.manual_seed(0)
    nets = matd3.Networks([2, 1], [1, 2], state_dim, 8, twin_q)
    with torch.no_grad():
        for p in nets.parameters():
            if p.requires_grad:
                p.add_(torch.randn_like(p))  # the online networks leave their targets
    return nets


def a_batch(B=5, K=1, state_dim=1):
    g = torch.Generator().manual_seed(1)

    def r(*shape):
        return torch.rand(*shape, generator=g) * 2 - 1

    actions = r(B, 2, 2)
    actions[:, 0, 1] = 0.0  # agent 0's padding
    return matd3.Batch(share_obs=r(B, K, state_dim), obs=r(B, 2, 2), actions=actions,
                       valid=torch.ones(B, 2), rewards=r(B, K), discounts=torch.full((B, K), 0.9),
                       terms=torch.zeros(B, K, dtype=torch.bool), dones=torch.ones(B, K, dtype=torch.bool),
                       next_share_obs=r(B, K, state_dim), next_obs=r(B, K, 2, 2))


def target_joint(nets, next_obs, target=True):
    """Every agent's (target) actor on its own next observation, by hand: agent 0 on
    next_obs[..., 0, :2] (1 action, padded), agent 1 on next_obs[..., 1, :1] (2 actions)."""
    actors = nets.actors_target if target else nets.actors
    a0 = torch.tanh(actors[0](next_obs[..., 0, :2]))
    a1 = torch.tanh(actors[1](next_obs[..., 1, :1]))
    return torch.stack([torch.cat([a0, torch.zeros_like(a0)], -1), a1], -2)


def spy_target(monkeypatch):
    seen = {}

    def spy(**kwargs):
        seen.update(kwargs)
        return original(**kwargs)

    original = matd3.critic_target
    monkeypatch.setattr(matd3, "critic_target", spy)
    return seen


def run_update(nets, batch, critic_state="ep", step=1, **flags):
    args = matd3.resolve_algo(matd3.Args(critic_state=critic_state, **flags))
    critic_opt = torch.optim.Adam([p for _, c in nets.critics() for p in c.parameters()])
    actor_opt = torch.optim.Adam(nets.actors.parameters())
    return matd3.update(batch, nets, critic_opt, actor_opt, args, step)


def test_the_critic_target_uses_every_agents_target_actor_and_the_target_critics(monkeypatch):
    nets, batch = networks(), a_batch()
    seen = spy_target(monkeypatch)
    with torch.no_grad():
        expected = target_joint(nets, batch.next_obs[:, 0]).unsqueeze(1)
        q1 = nets.qf1_target(batch.next_share_obs, expected)
        q2 = nets.qf2_target(batch.next_share_obs, expected)
        online = nets.qf1(batch.next_share_obs, target_joint(nets, batch.next_obs[:, 0], False).unsqueeze(1))
    run_update(nets, batch, target_policy_noise=0.0)  # no smoothing: the actions exactly
    assert torch.allclose(seen["next_q1"], q1) and torch.allclose(seen["next_q2"], q2)
    assert not torch.allclose(seen["next_q1"], online, atol=1e-3)
    assert seen["rewards"] is batch.rewards and seen["discounts"] is batch.discounts
    assert seen["terminated"] is batch.terms and seen["twin_q"] is True


def test_target_smoothing_noise_is_clipped_on_each_agents_own_actions(monkeypatch):
    nets, batch = networks(), a_batch(B=200)
    seen = []
    nets.qf1_target.register_forward_hook(lambda m, inputs, out: seen.append(inputs[1]))
    torch.manual_seed(3)
    run_update(nets, batch, target_policy_noise=1e6, noise_clip=0.5)
    with torch.no_grad():
        mu = target_joint(nets, batch.next_obs[:, 0]).unsqueeze(1)
    # every noise is clipped to +-0.5, then the action to [-1, 1]; the padding stays 0
    expected_low, expected_high = (mu - 0.5).clamp(-1, 1), (mu + 0.5).clamp(-1, 1)
    got = seen[0]
    real = ~torch.tensor([[False, True], [False, False]]).expand_as(got)
    assert (torch.isclose(got, expected_low, atol=1e-5) | torch.isclose(got, expected_high, atol=1e-5))[real].all()
    assert (got[..., 0, 1] == 0).all()


def test_the_actor_step_of_agent_i_raises_q_and_takes_the_others_actions_from_the_batch():
    nets, batch = networks(), a_batch()
    for i in (0, 1):
        seen = []
        hook = nets.qf1.register_forward_hook(lambda m, inputs, out: seen.append(inputs[1]))
        loss = matd3.actor_loss(nets, batch, i, fp=False)
        hook.remove()
        assert len(seen) == 1  # the online critic Q_1 read once (its target Q'_1 not at all)
        joint, other = seen[0], 1 - i
        assert torch.equal(joint[:, other], batch.actions[:, other])  # the batch's, not mu_j
        with torch.no_grad():
            own = target_joint(nets, batch.obs.unsqueeze(1), target=False)[:, 0, i]
        assert torch.allclose(joint[:, i], own)
        nets.zero_grad()
        loss.backward()  # the gradient reaches actor i only
        assert all(p.grad is None or not p.grad.any() for p in nets.actors[other].parameters())
        optimizer = torch.optim.SGD(nets.actors[i].parameters(), lr=1e-2)
        q_before = -loss.item()
        optimizer.step()
        assert -matd3.actor_loss(nets, batch, i, fp=False).item() > q_before


def test_fp_actor_loss_reads_agent_is_own_state_row_over_its_valid_rows():
    nets, batch = networks(state_dim=3), a_batch(K=2, state_dim=3)
    batch = batch._replace(valid=t([1, 1], [1, 0], [1, 0], [1, 1], [1, 1]))
    with torch.no_grad():
        joint = batch.actions.clone()
        joint[:, 1] = target_joint(nets, batch.obs.unsqueeze(1), target=False)[:, 0, 1]
        q = nets.qf1(batch.share_obs, joint)  # [B, 2]
        loss = matd3.actor_loss(nets, batch, 1, fp=True)
    # agent 1's row (column 1), rows 0, 3, 4 where it acted
    assert loss.item() == pytest.approx(-q[[0, 3, 4], 1].mean().item(), abs=1e-5)


@pytest.mark.parametrize("algo", ["maddpg", "matd3"])
def test_fp_critic_loss_masks_out_agents_that_did_not_act(algo, monkeypatch):
    # MADDPG: mean over agent 0's rows of (Q_1 - y)^2; MATD3 adds Q_2's, on the same y
    # (the smaller target critic's, without smoothing noise here); q_mean is Q_1's mean over
    # the same rows, column 0 alone (agent 1's column, where it did not act, left out)
    twin = algo == "matd3"
    nets, batch = networks(twin_q=twin, state_dim=3), a_batch(K=2, state_dim=3)
    batch = batch._replace(valid=t([1, 0], [1, 0], [1, 0], [1, 0], [1, 0]))
    with torch.no_grad():
        joint = target_joint(nets, batch.next_obs)
        y = matd3.critic_target(batch.rewards, batch.discounts, batch.terms,
                                nets.qf1_target(batch.next_share_obs, joint),
                                nets.qf2_target(batch.next_share_obs, joint) if twin else None,
                                twin)
        expected = sum(((critic(batch.share_obs, batch.actions) - y)[:, 0] ** 2).mean().item()
                       for _, critic in nets.critics())
        q_mean = nets.qf1(batch.share_obs, batch.actions)[:, 0].mean().item()
    stats = run_update(nets, batch, "fp", algo=algo, target_policy_noise=0.0)
    assert stats["critic_loss"] == pytest.approx(expected, rel=1e-5)
    assert stats["q_mean"] == pytest.approx(q_mean, rel=1e-5)


@pytest.mark.parametrize("critic_state", ["ep", "fp"])
def test_the_actor_step_sums_every_agents_loss_with_the_critic_states_flag(critic_state,
                                                                          monkeypatch):
    # agents 0 and 1, each on the update's batch, with fp = (critic_state == "fp"); the
    # logged actor loss is their mean
    nets, batch = networks(state_dim=3), a_batch(K=2 if critic_state == "fp" else 1, state_dim=3)
    calls, original = [], matd3.actor_loss

    def spy(nets, b, i, fp):
        loss = original(nets, b, i, fp)
        calls.append((b is batch, i, fp, loss.item()))
        return loss

    monkeypatch.setattr(matd3, "actor_loss", spy)
    stats = run_update(nets, batch, critic_state, step=2)
    fp = critic_state == "fp"
    assert [c[:3] for c in calls] == [(True, 0, fp), (True, 1, fp)]
    assert stats["actor_loss"] == pytest.approx((calls[0][3] + calls[1][3]) / 2, rel=1e-5)


def test_policy_delay_moves_the_critics_at_every_step_and_actors_and_targets_every_second():
    # Step 1: the critics' step alone, every weight of both critics moves and nothing else;
    # step 2 (--policy-delay 2): the critics', each agent's actor's, and the soft updates
    # move every weight of every network, the targets'.
    nets, batch = networks(), a_batch()
    watched = [nets.qf1, nets.qf2, *nets.actors, nets.actors_target, nets.qf1_target,
               nets.qf2_target]
    steps = []
    for step in (1, 2):
        before = [copies(net) for net in watched]
        assert ("actor_loss" in run_update(nets, batch, step=step)) == (step == 2)
        steps.append([moved_since(old, net) for old, net in zip(before, watched)])
    assert steps == [["all"] * 2 + ["none"] * 5, ["all"] * 7]


def test_the_soft_update_pulls_every_target_towards_its_online_network():
    # tau = 0.25 on an actor step: theta' <- 0.25 theta + 0.75 theta' for the actors and both
    # critics, theta the online weights after this step's optimizer steps (which the soft
    # update leaves alone). Backwards, the online weights would move and the targets not.
    nets, batch = networks(), a_batch()
    pairs = [(nets.actors_target, nets.actors), (nets.qf1_target, nets.qf1),
             (nets.qf2_target, nets.qf2)]
    before = [[p.clone() for p in target.parameters()] for target, _ in pairs]
    run_update(nets, batch, step=2, tau=0.25)
    for (target, online), old in zip(pairs, before):
        for p, q, o in zip(target.parameters(), online.parameters(), old):
            assert torch.allclose(p, 0.25 * q + 0.75 * o, atol=1e-6)
            assert not torch.allclose(p, o)


# ---------------------------------------------------------------------------------------
# What the loop stores
# ---------------------------------------------------------------------------------------
TINY = dict(num_envs=2, max_cycles=5, total_timesteps=40, learning_starts=20, batch_size=8,
            hidden_size=8, eval_episodes=1, log_interval=10)


@pytest.fixture
def stored(monkeypatch):
    """Every lock-step given to ReplayBuffer.add and every action sent to the environments;
    each row also holds, as "mu" and "mu_target", the online and the target actors' own
    actions (no noise) on its observations, with the weights they had when it was stored."""
    rows, sent, made = [], [], []
    original_add, original_step = matd3.ReplayBuffer.add, matd3.LockstepEnvs.step
    original_train = matd3.train

    def train(args, envs, nets, *rest):
        made.append(nets)
        return original_train(args, envs, nets, *rest)

    def add(self, **fields):
        rows.append({k: v.clone() for k, v in fields.items()})
        with torch.no_grad():
            rows[-1]["mu"] = made[-1].act(fields["obs"])
            rows[-1]["mu_target"] = made[-1].act(fields["obs"], target=True)
        return original_add(self, **fields)

    def step(self, actions):
        out = original_step(self, actions)
        sent.append((actions.copy(), out))
        return out

    monkeypatch.setattr(matd3.ReplayBuffer, "add", add)
    monkeypatch.setattr(matd3.LockstepEnvs, "step", step)
    monkeypatch.setattr(matd3, "train", train)
    return rows, sent


@pytest.mark.parametrize("critic_state", ["ep", "fp"])
def test_the_loop_stores_true_final_observations_ends_and_unscaled_actions(critic_state, stored,
                                                                            tmp_path):
    rows, sent = stored
    matd3.main(matd3.Args(critic_state=critic_state, output_dir=str(tmp_path), **TINY))
    assert len(rows) == 20  # 40 steps / 2 copies
    for step, (row, (env_actions, out)) in enumerate(zip(rows, sent)):
        # MPE's actions are in [0, 1]: the environment got (a + 1) / 2, the buffer keeps a
        assert np.allclose(env_actions, (row["actions"].numpy() + 1) / 2, atol=1e-6)
        episode_end = (step + 1) % 5 == 0  # max_cycles 5: every agent truncated
        assert row["dones"].all() == episode_end and not row["terms"].any()
        # the next observation of a truncated step is the true final one, not the reset's
        expected = out.final_obs if episode_end else out.obs
        assert np.allclose(row["next_obs"].numpy(), expected)
        # and so is the critic's next state, the copy's state before it reset
        state = out.final_state if episode_end else out.state
        assert torch.equal(row["next_share_obs"], matd3.state_rows(
            torch.from_numpy(state), torch.from_numpy(expected), critic_state))
        if episode_end:
            assert not np.allclose(out.final_obs, out.obs)
            assert not np.allclose(out.final_state, out.state)
        if step + 1 < len(rows) and not episode_end:  # the next row starts where this ended
            assert torch.equal(rows[step + 1]["obs"], row["next_obs"])
            assert torch.equal(rows[step + 1]["share_obs"], row["next_share_obs"])


def test_fp_stores_state_own_obs_and_id_not_the_ep_state(stored, tmp_path):
    rows, _ = stored
    matd3.main(matd3.Args(critic_state="fp", output_dir=str(tmp_path), **TINY))
    row = rows[3]
    num_agents, state_dim = 3, 54  # simple_spread_v3: 3 agents, state 3 x 18
    assert row["share_obs"].shape == (2, num_agents, state_dim + 18 + num_agents)
    for i in range(num_agents):
        assert torch.equal(row["share_obs"][:, i, state_dim:state_dim + 18], row["obs"][:, i])
        assert torch.equal(row["next_share_obs"][:, i, state_dim:state_dim + 18], row["next_obs"][:, i])
        assert (row["share_obs"][:, i, -num_agents:].argmax(-1) == i).all()


def test_speaker_listener_heterogeneous_agents_pad_actions_and_observations(stored, tmp_path):
    rows, sent = stored
    matd3.main(matd3.Args(env_id="simple_speaker_listener_v4", output_dir=str(tmp_path), **TINY))
    # speaker: obs 3, actions 3; listener: obs 11, actions 5 -> padded to D = 11, d = 5
    assert rows[0]["obs"].shape == (2, 2, 11) and rows[0]["actions"].shape == (2, 2, 5)
    assert (rows[-1]["actions"][:, 0, 3:] == 0).all() and (rows[-1]["obs"][:, 0, 3:] == 0).all()
    # the warm-up's uniform actions (the first 20 steps, 10 lock-steps) pad the speaker too,
    # and fill every real dimension: 80 draws of each agent, all in [-1, 1]
    warm = torch.stack([row["actions"] for row in rows[:10]])
    assert (warm[..., 0, 3:] == 0).all()
    for real in (warm[..., 0, :3], warm[..., 1, :]):
        assert real.abs().max() <= 1 and real.min() < -0.8 and real.max() > 0.8


def test_the_behaviour_policy_is_the_online_actors_with_exploration_noise_only(stored, tmp_path):
    # --exploration-noise 0: after the warm-up every stored action is the online actors' own
    # mu_i(o^i) exactly. From the second actor step on (policy delay 2: one every second
    # lock-step) the target actors lag behind, and their actions differ.
    rows, _ = stored
    matd3.main(matd3.Args(output_dir=str(tmp_path), exploration_noise=0.0, learning_rate=1e-2,
                          **TINY))
    acting = rows[10:]  # global_step 20 onwards: the actors act
    assert all(torch.equal(row["actions"], row["mu"]) for row in acting)
    assert (acting[-1]["actions"] - acting[-1]["mu_target"]).abs().max() > 1e-4


@pytest.mark.parametrize("algo", ["matd3", "maddpg"])
def test_exploration_noise_has_the_flags_sigma_whatever_the_target_smoothing(algo, stored,
                                                                              tmp_path):
    # --exploration-noise 0.05 (matd3's target smoothing is 0.2, maddpg's 0): the noise
    # a - mu(o) of 10 lock-steps x 2 copies x 3 agents x 5 action dimensions = 300 draws,
    # those whose action is not clipped at +-1, has a std of 0.05 (its estimate's std is
    # 0.05 / sqrt(2 * 300) = 0.002) and a mean of 0 (std 0.003)
    rows, _ = stored
    matd3.main(matd3.Args(algo=algo, exploration_noise=0.05, output_dir=str(tmp_path), **TINY))
    actions = torch.stack([row["actions"] for row in rows[10:]])
    noise = (actions - torch.stack([row["mu"] for row in rows[10:]]))[actions.abs() < 1]
    assert noise.numel() > 250
    assert 0.04 < noise.std().item() < 0.06 and abs(noise.mean().item()) < 0.015


class BoxRelay(Relay):
    """conftest.py's Relay with Box actions: short 1 dimension, long 2."""

    def action_space(self, agent):
        return gym.spaces.Box(-1.0, 1.0, (1 if agent == "short" else 2,))


def box_envs(monkeypatch, relay_class, num_envs=1):
    """matd3.LockstepEnvs over num_envs copies of relay_class (a conftest Relay) with
    BoxRelay's actions, reset at seed 0; Relay.sent cleared."""
    env_class = type(f"Box{relay_class.__name__}", (relay_class, BoxRelay), {})
    monkeypatch.setattr(matd3, "make_env", lambda *args, **kwargs: env_class())
    Relay.sent.clear()
    envs = matd3.LockstepEnvs("simple_v3", num_envs, 3)
    envs.reset(seed=0)
    return envs


def test_each_agent_keeps_its_slot_when_an_agent_before_it_is_done(monkeypatch):
    # Both agents see [k, k] after step k. After step 1 short (slot 0) is done: long's
    # observation [1, 1] stays in slot 1, which its actor and critic row read; slot 0 is
    # zero. The next step sends long slot 1's action, its first 2 dimensions.
    envs = box_envs(monkeypatch, SameSizeRelay)
    out = envs.step(np.array([[[0.5, 0.0], [0.25, -0.25]]], np.float32))
    assert out.obs.tolist() == [[[0, 0], [1, 1]]] and out.active.tolist() == [[False, True]]
    envs.step(np.array([[[0.5, 0.0], [0.75, -0.75]]], np.float32))
    assert list(Relay.sent[-1]) == ["long"] and Relay.sent[-1]["long"].tolist() == [0.75, -0.75]


def test_each_episode_counts_its_own_return_and_length(monkeypatch):
    # Two episodes of one copy, 3 lock-steps each (SameSizeRelay has Relay's rewards): short
    # gets 1 at step 0, long 2 + 2 + 2 = 6, so each episode's return is the mean over the
    # agents (1 + 6) / 2 = 3.5, 3 long. Carried over from the first episode, the second's
    # return would be 3.5 + 3.5 = 7 (and its length 6).
    envs = box_envs(monkeypatch, SameSizeRelay)
    episodes = [episode for _ in range(6)
                for episode in envs.step(np.zeros((1, 2, 2), np.float32)).episodes]
    assert episodes == [(0, 3.5, 3), (0, 3.5, 3)]


def test_no_two_copies_of_nearby_seeds_reset_at_the_same_seed(monkeypatch):
    # 3 copies reset at seeds 0, 1 and 2 (as runs of --seed 0, 1, 2 would): 9 environment
    # seeds, all different. Seeded seed + n, --seed 0's copies would take 0, 1, 2, --seed 1's
    # 1, 2, 3 and --seed 2's 2, 3, 4, the same start states more than once: 5 seeds of 9.
    seeds = []

    class SeedRecordingRelay(Relay):
        def reset(self, seed=None, options=None):
            seeds.append(seed)
            return super().reset(seed, options)

    envs = box_envs(monkeypatch, SeedRecordingRelay, num_envs=3)
    seeds.clear()  # the reset LockstepEnvs reads the state's size at, and box_envs'
    for seed in (0, 1, 2):
        envs.reset(seed)
    assert len(seeds) == 9 and len(set(seeds)) == 9


@pytest.mark.parametrize("critic_state", ["ep", "fp"])
def test_an_agent_terminated_at_its_time_limit_is_terminated_not_truncated(critic_state,
                                                                           monkeypatch):
    # Step 3: long terminates and its limit truncates it at once. A termination is no time
    # limit: the step says terminated alone, and the critic's row of that step is a
    # termination (no bootstrap from the final state) for EP and for long's FP row.
    envs = box_envs(monkeypatch, TerminatingRelay)
    for _ in range(3):
        out = envs.step(np.zeros((1, 2, 2), np.float32))
    assert out.terminated.tolist() == [[False, True]] and out.truncated.tolist() == [[False, False]]
    assert out.ended.tolist() == [True]
    _, dones, terms = matd3.critic_rows(
        *(torch.from_numpy(x) for x in (out.rewards, out.terminated, out.truncated)),
        torch.tensor([[0.0, 1.0]]), torch.from_numpy(out.ended), critic_state)  # short idle
    assert terms.tolist() == dones.tolist() == ([[True]] if critic_state == "ep"
                                                 else [[True, True]])


@pytest.mark.parametrize("critic_state", ["ep", "fp"])
def test_relay_rows_by_hand_agents_that_finish_early(critic_state, stored, tmp_path, monkeypatch):
    # One copy, 4 lock-steps: steps 0-2 the first episode (short done after step 0, long
    # truncated after step 2, the state then [3, 30]), step 3 the next episode's first.
    monkeypatch.setattr(matd3, "make_env", lambda *args, **kwargs: BoxRelay())
    Relay.sent.clear()
    rows, _ = stored
    matd3.main(matd3.Args(env_id="simple_v3", critic_state=critic_state, num_envs=1,
                          total_timesteps=4, learning_starts=2, batch_size=2, hidden_size=8,
                          eval_episodes=0, output_dir=str(tmp_path)))
    field = {k: torch.stack([row[k][0] for row in rows]) for k in rows[0]}  # copy 0's steps
    # valid: who acted in the step (short not at steps 1 and 2), not who acts next
    assert field["valid"].tolist() == [[1, 1], [0, 1], [0, 1], [1, 1]]
    # the state before and after each step: [k, 10k]; after step 2 the true final [3, 30],
    # not the reset's [0, 0]; short's true final observation [1] after step 0
    state, next_state = [[0, 0], [1, 10], [2, 20], [0, 0]], [[1, 10], [2, 20], [3, 30], [1, 10]]
    assert field["share_obs"][:, :, :2].tolist() == [[s] * len(field["share_obs"][0]) for s in state]
    assert field["next_share_obs"][:, :, :2].tolist() == [[s] * len(field["share_obs"][0]) for s in next_state]
    assert field["next_obs"][:, 0, 0].tolist() == [1, 0, 0, 1]  # short: final obs, idle, idle, k
    assert field["next_obs"][:, 1].tolist() == [[1, 1], [2, 2], [3, 3], [1, 1]]
    # the episode's return is the mean over the agents of each one's summed reward: short 1
    # (step 0), long 2 + 2 + 2 = 6, (1 + 6) / 2 = 3.5 (their sum would be 7), logged at
    # step 3, 3 lock-steps long
    (episode,) = read_csv(next(tmp_path.glob("*/episodes.csv")))
    assert [float(episode[k]) for k in ("global_step", "episode_return", "episode_length")] \
        == [3, 3.5, 3]
    if critic_state == "ep":
        # team reward: the mean over the agents that acted: (1 + 2)/2, 2, 2, (1 + 2)/2; the
        # episode ends at step 2 by a truncation (done, not terminated)
        assert field["rewards"][:, 0].tolist() == [1.5, 2, 2, 1.5]
        assert field["dones"][:, 0].tolist() == [False, False, True, False]
        assert not field["terms"].any()
    else:
        # each agent's row: the team reward where it acted; short's row ends (terminated)
        # at step 0 and stays ended while it is idle; long's is truncated at step 2
        assert field["rewards"].tolist() == [[1.5, 1.5], [0, 2], [0, 2], [1.5, 1.5]]
        assert field["terms"].tolist() == [[True, False]] * 4
        assert field["dones"].tolist() == [[True, False], [True, False], [True, True], [True, False]]
        # its own observation and one-hot id after the state
        assert field["share_obs"][:, 1, 2:].tolist() == [[0, 0, 0, 1], [1, 1, 0, 1],
                                                         [2, 2, 0, 1], [0, 0, 0, 1]]


class BoundedRelay(BoxRelay):
    """BoxRelay with each agent's own bounds: short in [0, 4], long in [-2, 0]."""

    def action_space(self, agent):
        if agent == "short":
            return gym.spaces.Box(0.0, 4.0, (1,))
        return gym.spaces.Box(-2.0, 0.0, (2,))


def test_the_loop_scales_each_agents_action_to_its_own_bounds(stored, tmp_path, monkeypatch):
    # From a in [-1, 1] as stored: short in [0, 4] gets 0 + (a + 1) / 2 * 4 = 2a + 2, long in
    # [-2, 0] gets -2 + (a + 1) / 2 * 2 = a - 1 (with short's bounds, 2a + 2 in [0, 4]).
    # 4 lock-steps of one copy, 2 random then 2 of the actors; short acts at steps 0 and 3.
    monkeypatch.setattr(matd3, "make_env", lambda *args, **kwargs: BoundedRelay())
    Relay.sent.clear()
    rows, _ = stored
    matd3.main(matd3.Args(env_id="simple_v3", num_envs=1, total_timesteps=4, learning_starts=2,
                          batch_size=2, hidden_size=8, eval_episodes=0, output_dir=str(tmp_path)))
    assert [sorted(sent) for sent in Relay.sent] == [["long", "short"], ["long"], ["long"],
                                                     ["long", "short"]]
    for row, sent in zip(rows, Relay.sent):
        a = row["actions"][0].numpy()  # copy 0: [agent, d]
        assert np.allclose(sent["long"], a[1] - 1, atol=1e-6) and (sent["long"] <= 0).all()
        if "short" in sent:
            assert np.allclose(sent["short"], 2 * a[0, :1] + 2, atol=1e-6)


def test_the_evaluation_sends_each_agents_noiseless_action_scaled_to_its_bounds(monkeypatch):
    # greedy_policy through the plumbing's evaluate, one episode on BoundedRelay (short acts
    # in [0, 4], long in [-2, 0]^2): each lock-step sends every active agent's online actor's
    # own action mu_i(o^i), without exploration noise, scaled as the loop scales it: short
    # 2 mu + 2 at step 0 (o = [0]), long mu - 1 at steps 0, 1, 2 (o = [k, k]); short is done
    # after step 0, long truncated after step 2, which ends the episode.
    monkeypatch.setattr(matd3, "make_env", lambda *args, **kwargs: BoundedRelay())
    Relay.sent.clear()
    torch.manual_seed(0)
    nets = matd3.Networks([1, 2], [1, 2], 2, 8, twin_q=True)
    matd3.evaluate(matd3.Args(env_id="simple_v3", eval_episodes=1), {"nets": nets})
    assert [sorted(sent) for sent in Relay.sent] == [["long", "short"], ["long"], ["long"]]
    with torch.no_grad():
        short = 2 * nets.actor(0, torch.zeros(2, 2))[:1].numpy() + 2  # o [A, D] -> [d]
        assert np.allclose(Relay.sent[0]["short"], short, atol=1e-6)
        for k, sent in enumerate(Relay.sent):
            mu = nets.actor(1, torch.full((2, 2), float(k))).numpy()
            assert np.allclose(sent["long"], mu - 1, atol=1e-6)


def test_the_loop_gives_the_update_its_batches_steps_optimizers_and_buffer(tmp_path,
                                                                          monkeypatch):
    # TINY with --gradient-steps 2 and a buffer of 30 rows: the ring holds 30 (not the
    # budget's 40) rows of 1 EP state row; from the lock-step that reaches step 20 on (the
    # 10th to the 20th: 11) two updates a lock-step, numbered 1..22, each on a batch of
    # --batch-size rows, with Adam at
    # --learning-rate on the actors' and on the critics' weights. --seed 7, not the default
    # 1: torch's seed, the training copies', and at 7 + 100,000 --eval-every 20's evaluations
    # (at steps 20 and 40) and the final one (LockstepEnvs draws each copy's seed from it).
    # updates.csv (--log-interval 10) has a row at 20 (updates 1-2), 30 (3-12: 5 lock-steps of
    # 2) and 40 (13-22), each with the mean of its own updates' losses, not all so far: the
    # critics' loss and q_mean of each, the actors' loss of the even ones alone (--policy-delay
    # 2: update 2 for the row at 20, 4, 6, ..., 12 for 30, 14, ..., 22 for 40).
    made, calls, losses = [], [], []
    original_buffer, original_update = matd3.ReplayBuffer, matd3.update

    def buffer(*args):
        made.append(args)
        return original_buffer(*args)

    def update(batch, nets, critic_optimizer, actor_optimizer, args, gradient_step):
        calls.append((batch.rewards.shape, gradient_step, critic_optimizer, actor_optimizer, nets))
        losses.append(original_update(batch, nets, critic_optimizer, actor_optimizer, args,
                                      gradient_step))
        return losses[-1]

    monkeypatch.setattr(matd3, "ReplayBuffer", buffer)
    monkeypatch.setattr(matd3, "update", update)
    seeds = spy_on(monkeypatch, matd3, "seed_and_device", lambda seed, *rest: seed)
    resets = spy_on(monkeypatch, matd3.LockstepEnvs, "reset", lambda self, seed: seed)
    matd3.main(matd3.Args(output_dir=str(tmp_path), gradient_steps=2, buffer_size=30,
                          n_step=3, gamma=0.9, learning_rate=3e-3, seed=7, eval_every=20,
                          **{**TINY, "batch_size": 7}))
    assert seeds == [7] and resets == [7, 100_007, 100_007, 100_007]
    # capacity, N, K, S_c, A, D, d, n, gamma, device: simple_spread_v3's 54, 3, 18, 5
    assert made == [(30, 2, 1, 54, 3, 18, 5, 3, 0.9, made[0][-1])]
    assert [c[1] for c in calls] == list(range(1, 23))
    assert all(c[0] == (7, 1) for c in calls)
    _, _, critic_optimizer, actor_optimizer, nets = calls[0]
    assert {id(p) for g in critic_optimizer.param_groups for p in g["params"]} == \
        {id(p) for p in [*nets.qf1.parameters(), *nets.qf2.parameters()]}
    assert {id(p) for g in actor_optimizer.param_groups for p in g["params"]} == \
        {id(p) for p in nets.actors.parameters()}
    assert critic_optimizer.param_groups[0]["lr"] == actor_optimizer.param_groups[0]["lr"] == 3e-3
    rows = read_csv(next(tmp_path.glob("*/updates.csv")))
    assert [(r["global_step"], r["gradient_steps"]) for r in rows] == [
        ("20", "2"), ("30", "12"), ("40", "22")]
    assert ["actor_loss" in loss for loss in losses[:4]] == [False, True, False, True]
    for row, (start, end) in zip(rows, [(0, 2), (2, 12), (12, 22)]):
        for key in ("critic_loss", "q_mean", "actor_loss"):
            assert float(row[key]) == pytest.approx(
                np.mean([loss[key] for loss in losses[start:end] if key in loss]), rel=1e-6)


# ---------------------------------------------------------------------------------------
# Runs end to end
# ---------------------------------------------------------------------------------------
@pytest.mark.parametrize("algo, critic_state, n_step", [("matd3", "ep", 1), ("maddpg", "fp", 3)])
@pytest.mark.slow  # a smoke run: a whole tiny run and every file it writes
def test_smoke_run_writes_every_file_and_its_model_evaluates(algo, critic_state, n_step, tmp_path,
                                                             check_run_folder):
    summary = matd3.main(matd3.Args(algo=algo, critic_state=critic_state, n_step=n_step,
                                    save_model=True, output_dir=str(tmp_path / "train"), **TINY))
    path, episodes, updates = check_run_folder(summary, tmp_path / "train", algo, model=True)
    # 2 copies x 20 lock-steps / 5 steps per episode = 8 episodes; rows at 20, 30, 40
    assert summary["global_steps"] == 40 and len(episodes) == 8
    assert [int(u["global_step"]) for u in updates] == [20, 30, 40]
    assert {"critic_loss", "q_mean", "actor_loss", "gradient_steps"} <= set(updates[0])
    evaluated = matd3.main(matd3.Args(eval_checkpoint=os.path.join(path, "model.pt"),
                                      eval_episodes=1, output_dir=str(tmp_path / "eval")))
    assert evaluated["eval_return_mean"] == pytest.approx(summary["eval_return_mean"])


def test_stop_at_return_stops_and_records_when(tmp_path):
    # --stop-at-return replaces GOALS["simple_spread_v3"]'s threshold and keeps its window of
    # 100 episodes. Returns are negative but never below -1000: TINY's 2 copies end two
    # episodes every 5 lock-steps (10 steps), the 99th and 100th at 50 * 10 = 500 steps, of a
    # budget of 600: the run stops there, and the summary records it (--stop-at-return's
    # threshold, the goal's window)
    assert matd3.GOALS["simple_spread_v3"][1] == 100
    summary = matd3.main(matd3.Args(stop_at_return=-1000.0, output_dir=str(tmp_path),
                                    **{**TINY, "total_timesteps": 600, "eval_episodes": 0}))
    assert summary["solved_at_step"] == summary["global_steps"] == 500
    assert summary["solved_threshold"] == -1000.0 and summary["solved_window"] == 100
    episodes = read_csv(next(tmp_path.glob("*/episodes.csv")))
    assert [int(e["global_step"]) for e in episodes] == [10 * (i // 2 + 1) for i in range(100)]


@pytest.mark.slow  # determinism: two whole runs
def test_same_seed_gives_the_same_episodes(tmp_path):
    rows = same_seed_episodes(lambda out: matd3.main(matd3.Args(output_dir=out, **TINY)), tmp_path)
    assert len(rows) == 8


@pytest.mark.slow  # watching a run: evaluations during it
def test_eval_every_writes_rows_keeps_the_best_model_and_leaves_training_alone(tmp_path):
    # 4 copies x 15 lock-steps = 60 steps; --eval-every 16 crosses at 16, 32, 48 (each a
    # lock-step of 4 steps lands on it)
    args = matd3.Args(num_envs=4, max_cycles=5, total_timesteps=60, learning_starts=8,
                      batch_size=8, hidden_size=8, eval_episodes=2, eval_every=16,
                      save_model=True, seed=2)
    check_evaluations(matd3.main, args, tmp_path, [16, 32, 48])


def test_eval_every_evaluates_where_the_step_count_crosses_a_multiple(tmp_path):
    # TINY's 2 copies: global_step goes 2, 4, ..., 40, and --eval-every 15 is crossed between
    # 14 and 16 (15) and reached at 30; the next multiple, 45, lies past the budget: rows at
    # 16 and 30. Only where a step count is a multiple of 15 would be 30 alone.
    matd3.main(matd3.Args(eval_every=15, output_dir=str(tmp_path), **TINY))
    rows = read_csv(next(tmp_path.glob("*/evaluations.csv")))
    assert [int(r["global_step"]) for r in rows] == [16, 30]


def test_the_budget_is_whole_lock_steps(tmp_path):
    # --total-timesteps 45 of 2 copies: 45 // 2 = 22 lock-steps, 44 steps. One update a
    # lock-step from the one that reaches step 20 (--learning-starts), and a row of
    # updates.csv every --log-interval 10 steps and after the last step: at 20
    # (1 update), 30 (1 + 5 = 6: the lock-steps to 22, 24, ..., 30), 40 (11) and 44 (13);
    # without the row after the last step they would end at 40, 2 updates unlogged
    summary = matd3.main(matd3.Args(output_dir=str(tmp_path), **{**TINY, "total_timesteps": 45}))
    assert summary["global_steps"] == 44
    updates = read_csv(next(tmp_path.glob("*/updates.csv")))
    assert [(int(u["global_step"]), int(u["gradient_steps"])) for u in updates] == [
        (20, 1), (30, 6), (40, 11), (44, 13)]


def test_an_evaluation_of_a_checkpoint_trains_nothing_and_takes_the_models_flags(tmp_path,
                                                                                 monkeypatch):
    # A maddpg model (one critic, no smoothing, no delay), FP critics 8 wide, episodes of 5
    # steps, evaluated with every one of those flags at its default (matd3, EP, 64, 25) and
    # --total-timesteps 101 of 2 copies: 100 whole steps, fewer than --learning-starts'
    # default 5,000, which check_args refuses for training; no threshold although
    # --stop-at-return 5 is given, and the final evaluation's episodes end after the model's
    # 5 steps, not 25.
    matd3.main(matd3.Args(algo="maddpg", critic_state="fp", save_model=True,
                          output_dir=str(tmp_path / "train"), **TINY))
    (trained,) = (tmp_path / "train").iterdir()
    # the maddpg model is one critic and its target (two would learn the same, but carry a
    # critic that nothing trains into model.pt)
    saved = torch.load(trained / "model.pt", weights_only=True)["nets"]
    assert {name.split(".")[0] for name in saved} == {"actors", "actors_target", "qf1",
                                                      "qf1_target"}
    # --hidden-size 8 built it: each network's two hidden layers (0 and 2) are 8 wide
    assert {tuple(p.shape) for name, p in saved.items() if name.endswith(("0.bias", "2.bias"))} \
        == {(8,)}
    limits = spy_on(monkeypatch, matd3, "EvaluationEnvs",
                    lambda env_id, num_envs, max_cycles, *rest: max_cycles)
    summary = matd3.main(matd3.Args(eval_checkpoint=str(trained), total_timesteps=101,
                                    num_envs=2, eval_episodes=1, stop_at_return=5.0,
                                    output_dir=str(tmp_path / "eval")))
    assert summary["global_steps"] == 0 and summary["solved_threshold"] is None
    assert limits == [5]
    (evaluation,) = (tmp_path / "eval").iterdir()
    config = json.loads((evaluation / "config.json").read_text())
    assert {k: config[k] for k in matd3.MODEL_FLAGS} == {
        "hidden_size": 8, "algo": "maddpg", "twin_q": False, "target_policy_noise": 0.0,
        "policy_delay": 1, "critic_state": "fp", "max_cycles": 5}


# ---------------------------------------------------------------------------------------
# Bad input
# ---------------------------------------------------------------------------------------
@pytest.mark.parametrize("argv, message", [
    (["--env-id", "my_envs:team_env"], "has a Discrete action space; matd3.py's actors are "
     "deterministic and need Box actions: use mappo.py"),
    (["--env-id", "simple_tag_v3"], "competitive MPE task"),
    (["--env-id", "Pendulum-v1"], "single-agent Gymnasium environment; use ddpg_td3.py"),
    (["--n-step", "0"], "--n-step must be positive"),
    (["--num-envs", "0"], "--num-envs must be positive"),
    (["--total-timesteps", "100"], "--learning-starts 5000 leaves no step of the budget"),
    (["--tau", "0"], "--tau must be in (0, 1]"),
    (["--gamma", "1.5"], "--gamma must be in [0, 1]"),
    (["--noise-clip", "0"], "--noise-clip 0 cancels --target-policy-noise"),
    (["--buffer-size", "2"], "holds less than one lock-step"),
    (["--env-id", "test_matd3:unbounded_actions_env"], "test_matd3:unbounded_actions_env's "
     "agent a has actions Box(-inf, inf, (1,), float32); matd3.py needs bounded flat Box"),
    (["--env-id", "test_matd3:image_observations_env"], "test_matd3:image_observations_env's "
     "agent a has observations Box(0.0, 3.0, (2, 2), float32); matd3.py's MLPs need flat Box"),
])
def test_bad_input_is_one_line_and_exit_status_2(argv, message, check_usage_error,
                                                 fresh_env_module):
    check_usage_error("matd3.py", argv, message)


class UnboundedActions(TeamEnv):
    """TeamEnv with unbounded Box actions, which matd3.py cannot scale to."""

    def action_space(self, agent):
        return gym.spaces.Box(-np.inf, np.inf, (1,))


def unbounded_actions_env():
    return UnboundedActions()


class ImageObservations(UnboundedActions):
    """TeamEnv with bounded Box actions and 2 x 2 observations, which matd3.py's MLPs refuse."""

    def action_space(self, agent):
        return gym.spaces.Box(-1.0, 1.0, (1,))

    def observation_space(self, agent):
        return gym.spaces.Box(0.0, 3.0, (2, 2))


def image_observations_env():
    return ImageObservations()


def test_help_lists_the_flags_with_their_docstrings(check_help):
    check_help("matd3.py", ("--algo", "--twin-q", "--critic-state", "--n-step", "--noise-clip",
                            "--policy-delay", "--max-cycles"),
               ("n of the n-step return", "one row per step"))


def test_the_run_folder_and_config_name_the_algorithm(tmp_path):
    # Without --exp-name the run is named as summary.json's "algorithm" (algorithm_name):
    # matd3, maddpg, or maddpg+ the improvements switched on; a name given is kept as it is.
    name = matd3.experiment_name
    assert name(matd3.resolve_algo(matd3.Args())) == "matd3"
    assert name(matd3.resolve_algo(matd3.Args(algo="maddpg"))) == "maddpg"
    assert name(matd3.resolve_algo(matd3.Args(algo="maddpg", twin_q=True))) == "maddpg+twin_q"
    assert name(matd3.resolve_algo(matd3.Args(algo="maddpg", exp_name="sweep"))) == "sweep"
    for flags, expected in [({"algo": "maddpg"}, "maddpg"),
                            ({"algo": "maddpg", "exp_name": "sweep"}, "sweep")]:
        summary = matd3.main(matd3.Args(output_dir=str(tmp_path / expected), save_model=True,
                                        **flags, **TINY))
        (folder,) = (tmp_path / expected).iterdir()
        assert folder.name.startswith(f"simple_spread_v3__{expected}__1__")
        assert json.loads((folder / "config.json").read_text())["exp_name"] == expected
        assert summary["algorithm"] == "maddpg"
    # --eval-checkpoint takes --algo from the model, and its folder's name with it
    (trained,) = (tmp_path / "maddpg").iterdir()
    matd3.main(matd3.Args(eval_checkpoint=str(trained / "model.pt"), eval_episodes=1,
                          output_dir=str(tmp_path / "eval")))
    (folder,) = (tmp_path / "eval").iterdir()
    assert folder.name.startswith("simple_spread_v3__maddpg__1__")

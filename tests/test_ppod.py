"""Tests of ppod.py: the demo buffers and annealing by hand, replays in the rollout, GAE over
a rollout that mixes a replay and real steps, demo files, the loop's glue, its own hooks
(check_flags, check_spaces, greedy_policy, MODEL_FLAGS), determinism. The plumbing's
behaviour is tested once, in test_plumbing.py."""
import json
import math
import os
from dataclasses import replace

import gymnasium as gym
import numpy as np
import pytest
import torch

import ppo
import ppod
from conftest import (CountingEnv, approx,
                      check_every_evaluation_reads_the_running_statistics_and_leaves_them_alone,
                      check_the_epochs_kl_and_clipfrac,
                      check_the_evaluation_takes_the_policys_mode, detached, episode_rows,
                      interrupt_on_call, read_csv, same_seed_episodes, spy_on, spy_on_adam,
                      spy_on_seeds, spy_on_weights)


def episode(episode_return, steps=2):
    """A Demo of `steps` steps whose rewards add up to episode_return."""
    return ppod.Demo(np.zeros((steps + 1, 1), np.float32), np.zeros(steps, np.int64),
                     np.full(steps, episode_return / steps, np.float32))


# ---------------------------------------------------------------------------------------
# Choosing the next episode's source
# ---------------------------------------------------------------------------------------
def test_choose_source_splits_the_unit_interval_at_rho_and_rho_plus_phi():
    # rho = 0.25, phi = 0.5: [0, 0.25) reward, [0.25, 0.75) value, [0.75, 1) real
    sources = [ppod.choose_source(u, 0.25, 0.5, True) for u in (0.0, 0.24, 0.25, 0.74, 0.75, 0.99)]
    assert sources == ["reward", "reward", "value", "value", "real", "real"]
    assert ppod.choose_source(0.5, 0.25, 0.5, False) == "real"  # no value demos yet


def test_source_frequencies_with_a_fixed_seed():
    # 10,000 draws: the standard deviation of a frequency near 0.3 is sqrt(0.3*0.7/1e4) =
    # 0.0046, so each frequency lies within 0.015 (over 3 deviations) of its probability.
    buffers = ppod.DemoBuffers([episode(-1.0)], capacity=3, rho=0.3, phi=0.2, alpha=0.0, seed=0)
    buffers.admit(episode(-5.0), max_value=1.0)
    value_demo = buffers.value[0][1]
    draws = [buffers.next_episode() for _ in range(10_000)]
    reward = sum(d is buffers.reward[0][1] for d in draws) / 10_000
    value = sum(d is value_demo for d in draws) / 10_000
    real = sum(d is None for d in draws) / 10_000
    assert reward == pytest.approx(0.3, abs=0.015) and value == pytest.approx(0.2, abs=0.015)
    assert real == pytest.approx(0.5, abs=0.015) and reward + value + real == 1.0
    again = ppod.DemoBuffers([episode(-1.0)], capacity=3, rho=0.3, phi=0.2, alpha=0.0, seed=0)
    again.admit(episode(-5.0), max_value=1.0)
    assert [d is None for d in draws[:50]] == [again.next_episode() is None for _ in range(50)]


def test_reward_replays_draw_among_every_reward_demo_the_agents_too():
    # rho = 1, phi = 0: every episode replays a reward demo, drawn uniformly among those kept:
    # the given demo (return -5) and, once admitted, the agent's -4 (>= the threshold -5;
    # with phi_0 = 0 annealing moves nothing). 2,000 draws: each has probability 1/2, with
    # standard deviation sqrt(0.5 * 0.5 / 2000) = 0.0112, so the agent's frequency lies
    # within 0.04 (3.6 deviations) of 0.5; drawn among the given demos alone it would be 0.
    given, agents = episode(-5.0), episode(-4.0)
    buffers = ppod.DemoBuffers([given], capacity=3, rho=1.0, phi=0.0, alpha=0.0, seed=0)
    assert buffers.admit(agents, max_value=0.0) == "reward"
    draws = [buffers.next_episode() for _ in range(2000)]
    assert all(d is given or d is agents for d in draws)
    assert sum(d is agents for d in draws) / 2000 == pytest.approx(0.5, abs=0.04)


def test_value_probabilities_by_hand():
    # m = [-2, -1, -1], alpha = 1: weights exp(-1), exp(0), exp(0) = 0.36788, 1, 1
    #   p = [0.36788, 1, 1] / 2.36788 = [0.15536, 0.42232, 0.42232]
    assert ppod.value_probabilities([-2.0, -1.0, -1.0], 1.0) == pytest.approx(
        [0.15536, 0.42232, 0.42232], abs=1e-5)
    assert ppod.value_probabilities([-2.0, 0.0, 5.0], 0.0) == pytest.approx([1 / 3] * 3)
    # huge and negative values stay finite: weights exp(0), exp(-1000), exp(-2000)
    assert ppod.value_probabilities([1000.0, 0.0, -1000.0], 1.0).tolist() == [1.0, 0.0, 0.0]


def value_draw_frequency(buffers, demo, draws=4000):
    """How often `demo` comes out of next_episode among the value-demo draws (rho = 0,
    phi = 0.9)."""
    buffers.rho, buffers.phi = 0.0, 0.9
    drawn = [buffers.next_episode() for _ in range(draws)]
    return sum(d is demo for d in drawn) / sum(d is not None for d in drawn)


def test_value_demos_are_drawn_in_proportion_to_their_probabilities():
    # alpha = ln 3 and max values 0, 1: weights 1, 3, so p = [0.25, 0.75] of value draws
    buffers = ppod.DemoBuffers([episode(-1.0)], capacity=3, rho=0.0, phi=0.9, alpha=math.log(3),
                               seed=1)
    buffers.admit(episode(-5.0), max_value=0.0)
    buffers.admit(episode(-6.0), max_value=1.0)
    assert value_draw_frequency(buffers, buffers.value[1][1]) == pytest.approx(0.75, abs=0.03)


# ---------------------------------------------------------------------------------------
# Annealing, admission and eviction by hand
# ---------------------------------------------------------------------------------------
def test_anneal_by_hand():
    # phi_0 = 0.2 over K_v = 4 value slots: steps of 0.05 until phi = 0
    rho, phi = 0.3, 0.2
    seen = []
    for _ in range(5):
        rho, phi = ppod.anneal(rho, phi, 0.2, 4)
        seen.append((round(rho, 10), round(phi, 10)))
    assert seen == [(0.35, 0.15), (0.4, 0.1), (0.45, 0.05), (0.5, 0.0), (0.5, 0.0)]
    # K_v = 3: a step of 0.2/3 = 0.0667 from phi = 0.05 takes only the 0.05 left
    assert ppod.anneal(0.45, 0.05, 0.2, 3) == pytest.approx((0.5, 0.0))


def test_admission_fills_the_value_demos_then_keeps_the_highest():
    # one given demo (return -5), capacity 3: room for 2 value demos
    buffers = ppod.DemoBuffers([episode(-5.0)], capacity=3, rho=0.3, phi=0.2, alpha=1.0, seed=0)
    assert buffers.threshold == -5.0 and buffers.value_slots == 2, (
        "premise: the threshold is the given demo's return, and 2 value slots are left")
    assert buffers.admit(episode(-8.0), max_value=1.0) == "value"
    assert buffers.admit(episode(-9.0), max_value=3.0) == "value"
    # full: max value 2.0 beats the lowest (1.0), which leaves; 0.5 beats none
    assert buffers.admit(episode(-7.0), max_value=2.0) == "value"
    assert buffers.admit(episode(-7.0), max_value=0.5) is None
    assert [m for m, _ in buffers.value] == [3.0, 2.0] and len(buffers) == 3, (
        "the lowest value demo (1.0) left and the newcomer (2.0) was appended; 3 demos in all")
    assert (buffers.rho, buffers.phi) == (0.3, 0.2), (  # value demos do not anneal
        "a value demo leaves rho and phi as they were: only a reward demo anneals them")


def test_reward_demos_evict_value_demos_first_and_the_threshold_rises():
    # --rising-threshold, the deviation: the given demo can leave and the threshold rises
    buffers = ppod.DemoBuffers([episode(-5.0)], capacity=3, rho=0.3, phi=0.2, alpha=1.0, seed=0,
                               rising=True)
    buffers.admit(episode(-9.0), max_value=3.0)
    buffers.admit(episode(-7.0), max_value=2.0)
    # return -4 >= threshold -5: joins; 4 > 3 episodes, so the lowest value demo (2.0)
    # leaves; phi_0/K_v = 0.2/2 = 0.1: rho 0.3 -> 0.4, phi 0.2 -> 0.1
    assert buffers.admit(episode(-4.0), max_value=0.0) == "reward"
    assert [m for m, _ in buffers.value] == [3.0] and buffers.threshold == -5.0, (
        "over capacity the value demo of lowest m (2.0) leaves first; the threshold stays")
    assert (buffers.rho, buffers.phi) == approx((0.4, 0.1)), (
        "a reward demo anneals rho and phi: phi_0 / K_v moves from phi to rho")
    # -3 joins, the last value demo leaves; rho 0.5, phi 0
    buffers.admit(episode(-3.0), max_value=0.0)
    assert buffers.value == [] and (buffers.rho, buffers.phi) == approx((0.5, 0.0)), (
        "the last value demo leaves; rho and phi anneal again")
    # -2 joins; no value demo is left, so the lowest return (-5) leaves: threshold -4
    buffers.admit(episode(-2.0), max_value=0.0)
    assert [r for r, _ in buffers.reward] == [-4.0, -3.0, -2.0] and buffers.threshold == -4.0, (
        "rising: the lowest return (-5, the given demo) leaves; the threshold rises to -4")
    assert len(buffers) == 3 and (buffers.rho, buffers.phi) == approx((0.5, 0.0)), (
        "capacity 3 holds; phi already 0, annealing moves nothing more")
    # below the threshold with no value demos to replace: dropped
    assert buffers.admit(episode(-4.5), max_value=9.0) is None
    assert len(buffers) == 3, "a dropped episode changes nothing"
    # a tie with the lowest return keeps the newcomer and evicts the older one
    older, newer = buffers.reward[0][1], episode(-4.0)
    buffers.admit(newer, max_value=0.0)
    assert all(d is not older for _, d in buffers.reward) and buffers.reward[-1][1] is newer, (
        "of two equal lowest returns the older leaves; the newcomer is appended at the end")


@pytest.mark.parametrize("rising", [False, True])
def test_a_reward_demo_that_only_fills_the_buffers_evicts_nothing(rising):
    # capacity 3: the given demo (-5) and a value demo (m = 3), then -4 >= threshold -5 joins:
    # 3 episodes, not over capacity, so all three stay, under either rule, and the threshold
    # stays -5 (with --rising-threshold the lowest return kept, min(-5, -4) = -5)
    buffers = ppod.DemoBuffers([episode(-5.0)], capacity=3, rho=0.3, phi=0.2, alpha=1.0, seed=0,
                               rising=rising)
    assert buffers.admit(episode(-9.0), max_value=3.0) == "value"
    assert buffers.admit(episode(-4.0), max_value=0.0) == "reward"
    assert [r for r, _ in buffers.reward] == [-5.0, -4.0] and [m for m, _ in buffers.value] == [3.0]
    assert len(buffers) == 3 and buffers.threshold == -5.0


def test_given_demo_stays_and_the_oldest_agent_demo_leaves():
    given = episode(-5.0)
    buffers = ppod.DemoBuffers([given], capacity=3, rho=0.3, phi=0.2, alpha=1.0, seed=0)
    buffers.admit(episode(-9.0), max_value=3.0)
    # return -4 >= threshold -5: joins; the given demo, the value demo and -4 fill capacity 3
    first = episode(-4.0)
    assert buffers.admit(first, max_value=0.0) == "reward"
    assert len(buffers.value) == 1, "not over capacity: the value demo stays"
    # -2 joins; over capacity (4 > 3): the value demo (3.0) leaves first
    assert buffers.admit(episode(-2.0), max_value=0.0) == "reward"
    assert buffers.value == [], "over capacity the value demos leave before any reward demo"
    # -3 joins; no value demo left: the oldest agent demo (-4) leaves, not the given -5 nor
    # the lowest return; the threshold stays -5 (the old rule would make it -3)
    newest = episode(-3.0)
    assert buffers.admit(newest, max_value=0.0) == "reward"
    assert [r for r, _ in buffers.reward] == [-5.0, -2.0, -3.0] and buffers.threshold == -5.0, (
        "no value demo left: the oldest agent reward demo (-4) leaves; the threshold stays")
    assert buffers.reward[0][1] is given and all(d is not first for _, d in buffers.reward), (
        "the given demo never leaves; the agent's first reward demo has")
    # -5 ties the fixed threshold: joins, and -2, now the oldest agent demo, leaves
    assert buffers.admit(episode(-5.0), max_value=0.0) == "reward"
    assert [r for r, _ in buffers.reward] == [-5.0, -3.0, -5.0] and buffers.reward[0][1] is given, (
        "the oldest agent reward demo (-2) leaves, the given one stays first")
    # below the threshold with no value demos to replace: dropped
    assert buffers.admit(episode(-6.0), max_value=9.0) is None
    assert len(buffers) == 3, "a dropped episode changes nothing"


def test_success_threshold_is_fixed_where_it_is_given():
    # --success-threshold -3 with a given demo of return -5: -4 is no success; -3 is one
    buffers = ppod.DemoBuffers([episode(-5.0)], capacity=3, rho=0.3, phi=0.2, alpha=1.0, seed=0,
                               threshold=-3.0)
    assert buffers.threshold == -3.0, "premise: the threshold given is the one kept"
    assert buffers.admit(episode(-4.0), max_value=1.0) == "value"
    assert buffers.admit(episode(-3.0), max_value=1.0) == "reward"
    assert buffers.threshold == -3.0, "without --rising-threshold the threshold never moves"


def test_refresh_recomputes_the_max_values_and_admission_uses_them():
    # V(s) = 10 s. Two value demos stored with m = 1 (states 0.1, 0.5; final 0.9) and m = 3
    # (states 0.2, 0.2; final 0.0). Refreshed over s_0..s_{T-1} (the final observation is
    # not a state the agent acted in): m = max(1, 5) = 5 and max(2, 2) = 2.
    buffers = ppod.DemoBuffers([episode(10.0)], capacity=3, rho=0.3, phi=0.2, alpha=1.0, seed=0)
    a = ppod.Demo(np.array([[0.1], [0.5], [0.9]], np.float32), np.zeros(2, np.int64),
                  np.zeros(2, np.float32))
    b = ppod.Demo(np.array([[0.2], [0.2], [0.0]], np.float32), np.zeros(2, np.int64),
                  np.zeros(2, np.float32))
    buffers.admit(a, max_value=1.0)
    buffers.admit(b, max_value=3.0)
    buffers.refresh(lambda obs: 10 * obs[:, 0])
    assert [m for m, _ in buffers.value] == approx([5.0, 2.0])
    assert buffers.value[0][1] is a and buffers.value[1][1] is b
    # a newcomer with m = 2.5 beats b's refreshed 2 (not a's stale 1): b leaves
    c = episode(0.0)
    assert buffers.admit(c, max_value=2.5) == "value"
    assert buffers.value[0][1] is a and buffers.value[1][1] is c
    # sampling follows the refreshed numbers: p = softmax([5, 2.5]) = [0.924, 0.076]
    #   exp(0) / (exp(0) + exp(-2.5)) = 1 / 1.0821 = 0.9241
    assert value_draw_frequency(buffers, a) == pytest.approx(0.9241, abs=0.02)


def test_episode_recorder_turns_real_steps_into_a_demo():
    recorder = ppod.EpisodeRecorder(2)
    recorder.add(1, np.array([0.0]), 2, -1.0, -3.0)
    recorder.add(1, np.array([0.5]), 0, -1.0, -1.5)
    demo, max_value = recorder.finish(1, np.array([0.75]), terminated=False)
    assert demo.observations[:, 0].tolist() == [0.0, 0.5, 0.75] and demo.actions.tolist() == [2, 0]
    assert demo.episode_return == -2.0 and demo.terminated is False and max_value == -1.5
    assert recorder.steps[1] == [] and recorder.max_value[1] == -np.inf


# ---------------------------------------------------------------------------------------
# The loss and GAE on a rollout that mixes a replay and real steps
# ---------------------------------------------------------------------------------------
def test_demo_step_ratio_is_pi_over_one():
    # old log-prob 0 (mu = 1), pi = 0.5: ratio 0.5, clip 0.2 -> clip(ratio) = 0.8
    #   A = +1: max(-0.5, -0.8) = -0.5, unclipped: d/dlogpi = -ratio = -0.5 (raises pi)
    #   A = -1: max(0.5, 0.8) = 0.8, clipped: no gradient
    newlogprob = torch.log(torch.tensor([0.5, 0.5])).requires_grad_()
    zeros = torch.zeros(2)
    _, pg_loss, _, _ = ppod.ppo_loss(newlogprob, zeros, torch.tensor([1.0, -1.0]), zeros, zeros,
                                     zeros, zeros, clip_coef=0.2, ent_coef=0.0, vf_coef=0.5)
    assert pg_loss.item() == approx((-0.5 + 0.8) / 2)
    pg_loss.backward()
    assert newlogprob.grad.tolist() == approx([-0.25, 0.0])


@pytest.mark.parametrize("demo_end, expected_adv, expected_ret", [
    # gamma = lambda = 0.5; V(s) = 10*s: values [1, 2, 3], V(last obs 0.4) = 4.
    # A value demo ends truncated at t = 1 with final obs 0.6 (V = 6): next_values [2, 6, 4]
    #   delta = [5 + 0.5*2 - 1, 6 + 0.5*6 - 2, 1 + 0.5*4 - 3] = [5, 7, 0]
    #   A_2 = 0;  A_1 = 7 (the replay ended);  A_0 = 5 + 0.25*7 = 6.75;  R = A + V
    ("truncated", [6.75, 7.0, 0.0], [7.75, 9.0, 3.0]),
    # A reward demo ends terminated at t = 1: delta_1 = 6 - 2 = 4;  A_0 = 5 + 0.25*4 = 6
    ("terminated", [6.0, 4.0, 0.0], [7.0, 6.0, 3.0]),
])
def test_gae_over_a_replay_followed_by_real_steps(demo_end, expected_adv, expected_ret):
    buffer = ppod.RolloutBuffer(3, 1, (1,), (), torch.long, "cpu")
    buffer.obs[:, 0, 0] = torch.tensor([0.1, 0.2, 0.3])
    buffer.last_obs[0, 0] = 0.4
    buffer.rewards[:, 0] = torch.tensor([5.0, 6.0, 1.0])  # replayed, replayed, real
    buffer.demo[:2, 0] = True
    getattr(buffer, demo_end)[1, 0] = True
    buffer.final_obs[1, 0, 0] = 0.6
    value_fn = lambda obs: 10 * obs[..., 0]
    buffer.values = value_fn(buffer.obs)
    adv, ret = buffer.gae(value_fn, 0.5, 0.5)
    assert adv[:, 0].tolist() == approx(expected_adv) and ret[:, 0].tolist() == approx(expected_ret)


# ---------------------------------------------------------------------------------------
# Demonstration files and the replaying wrapper
# ---------------------------------------------------------------------------------------
class SeedRecordingEnv(CountingEnv):
    """conftest's counting environment (observation: the step count, reward 1 per step),
    remembering the seeds it was reset with."""

    def __init__(self):
        self.seeds = []

    def reset(self, *, seed=None, options=None):
        self.seeds.append(seed)
        return super().reset(seed=seed, options=options)


# A demo of the counting environment that no real episode could produce: observations
# 10..13, actions 1, 0, 1, rewards 5, 6, 7 (return 18), ended by termination.
COUNT_DEMO = ppod.Demo(np.array([[10.0], [11.0], [12.0], [13.0]], np.float32),
                       np.array([1, 0, 1]), np.array([5.0, 6.0, 7.0], np.float32))


@pytest.fixture
def count_demos(tmp_path_factory):
    folder = tmp_path_factory.mktemp("count-demos")
    ppod.save_demo(folder / "demo_0.npz", COUNT_DEMO)
    return str(folder)


def test_demo_files_round_trip(tmp_path):
    space = gym.spaces.Box(-1.0, 1.0, (2,))
    demo = ppod.Demo(np.arange(8, dtype=np.float32).reshape(4, 2),
                     np.array([[0.5, -0.5], [1.0, 0.0], [0.0, 0.25]], np.float32),
                     np.array([1.0, -2.0, 0.5], np.float32), terminated=False)
    ppod.save_demo(tmp_path / "d.npz", demo)
    loaded = ppod.load_demo(str(tmp_path / "d.npz"), (2,), space)
    for key in ("observations", "actions", "rewards"):
        assert np.array_equal(getattr(loaded, key), getattr(demo, key))
    assert loaded.terminated is False and loaded.episode_return == -0.5
    # without a terminated entry a demo counts as terminated
    np.savez(tmp_path / "plain.npz", observations=demo.observations, actions=demo.actions,
             rewards=demo.rewards)
    assert ppod.load_demo(str(tmp_path / "plain.npz"), (2,), space).terminated is True


def test_shipped_mountaincar_demo_fits_and_reaches_the_flag():
    env = gym.make("MountainCar-v0")
    (demo,) = ppod.load_demos(os.path.join(ppod.HERE, "demos", "MountainCar-v0"),
                              env.observation_space.shape, env.action_space)
    assert demo.terminated and demo.observations[-1, 0] >= 0.5 and demo.episode_return == -115


class OneReplayThenReal:
    """A DemoBuffers stand-in: the first episode replays COUNT_DEMO, the rest are real."""

    def __init__(self):
        self.calls = 0

    def next_episode(self):
        self.calls += 1
        return COUNT_DEMO if self.calls == 1 else None


def test_replay_wrapper_plays_the_demo_then_the_env_with_the_seed_it_was_given():
    env = ppod.DemoReplay(SeedRecordingEnv(), OneReplayThenReal())
    obs, info = env.reset(seed=7)
    steps = [(obs[0], info["demo_action"])]
    for _ in range(3):
        obs, reward, terminated, truncated, info = env.step(0)  # the action is ignored
        steps.append((obs[0], info.get("demo_action"), reward, terminated, truncated))
    assert steps == [(10.0, 1), (11.0, 0, 5.0, False, False), (12.0, 1, 6.0, False, False),
                     (13.0, None, 7.0, True, False)]
    assert env.env.seeds == []  # the environment was not touched
    obs, info = env.reset()
    assert obs.tolist() == [0.0] and info == {} and env.env.seeds == [7]
    assert env.step(1)[:2] == ([1.0], 1.0)


@pytest.fixture
def rollouts(monkeypatch):
    """The rollouts a run learns from, copied as each update computes its advantages."""
    seen = []
    original = ppod.RolloutBuffer.gae

    def spy(self, *args, **kwargs):
        seen.append({k: getattr(self, k).clone() for k in
                     ("obs", "actions", "logprobs", "rewards", "terminated", "truncated", "demo",
                      "final_obs")})
        return original(self, *args, **kwargs)

    monkeypatch.setattr(ppod.RolloutBuffer, "gae", spy)
    return seen


def test_replayed_demo_appears_in_the_rollout_step_for_step(tmp_path, rollouts, count_demos):
    summary = ppod.main(ppod.Args(env_id="CountToThree-v0", demos_dir=count_demos, rho=0.5,
                                  phi=0.0, norm_obs=False, total_timesteps=24, num_envs=2,
                                  num_steps=6, num_minibatches=2, eval_episodes=0,
                                  output_dir=str(tmp_path / "runs")))
    replays = real = 0
    for rollout in rollouts:
        demo, obs = rollout["demo"], rollout["obs"][..., 0]
        for t, n in demo.nonzero().tolist():  # each replayed row is COUNT_DEMO's step k
            k = int(obs[t, n]) - 10
            assert k in (0, 1, 2)  # the given demo's (--rho); with --phi 0 no value demo plays
            assert rollout["actions"][t, n] == COUNT_DEMO.actions[k]
            assert rollout["rewards"][t, n] == COUNT_DEMO.rewards[k]
            assert rollout["logprobs"][t, n] == 0.0 and rollout["terminated"][t, n] == (k == 2)
            if k < 2 and t + 1 < len(obs):
                assert obs[t + 1, n] == 11 + k and demo[t + 1, n]
        real_rows = ~demo
        assert (rollout["logprobs"][real_rows] < 0).all() and (obs[real_rows] <= 2).all()
        assert (rollout["rewards"][real_rows] == 1.0).all()
        assert not rollout["terminated"][real_rows].any()
        replays += int(demo.sum())
        real += int(real_rows.sum())
    assert replays >= 6 and summary["global_steps"] == real >= 24  # replays are not counted
    # updates.csv's demo_fraction is each rollout's share of replayed rows among its
    # 2 slots * 6 steps = 12, told here by the observation (a demo's 10, 11, 12, a real
    # episode's 0, 1, 2): k replayed rows give k / 12, not the share of the slots replaying
    # at the rollout's last step (0, 1/2 or 1) nor the agent's own share (12 - k) / 12
    updates = read_csv(next((tmp_path / "runs").glob("*/updates.csv")))
    fractions = [int((rollout["obs"][..., 0] >= 10).sum()) / 12 for rollout in rollouts]
    assert len(updates) == len(rollouts) and any(0 < f < 1 and f != 0.5 for f in fractions)
    assert [float(u["demo_fraction"]) for u in updates] == approx(fractions)
    episodes = read_csv(next((tmp_path / "runs").glob("*/episodes.csv")))
    assert episodes and {(e["episode_return"], e["episode_length"]) for e in episodes} == {("3.0", "3")}


def test_an_agent_episode_cut_by_the_time_limit_is_kept_and_replayed_as_truncated(
        tmp_path, demo_buffers, rollouts, count_demos):
    # CountToThree-v0's time limit cuts every real episode after 3 steps: states 0, 1, 2,
    # final observation 3, rewards 1, 1, 1 (return 3 < 18: a value demo). Kept, it must say
    # truncated (terminated False); replayed, its last row (state 2) must be truncated, not
    # terminated, with the true final observation 3 for GAE to bootstrap from.
    ppod.main(ppod.Args(env_id="CountToThree-v0", demos_dir=count_demos, rho=0.0, phi=0.5,
                        norm_obs=False, demo_capacity=4, total_timesteps=96, num_envs=2,
                        num_steps=8, num_minibatches=2, eval_episodes=0,
                        output_dir=str(tmp_path)))
    (buffers,) = demo_buffers
    assert buffers.value
    for _, demo in buffers.value:
        assert demo.observations[:, 0].tolist() == [0, 1, 2, 3] and demo.terminated is False
        assert demo.rewards.tolist() == [1.0, 1.0, 1.0]
    replay_ends = 0
    for rollout in rollouts:
        for replayed in (True, False):  # the agent's own episodes end the same way
            rows = (rollout["demo"] == replayed) & (rollout["obs"][..., 0] == 2)
            assert rollout["truncated"][rows].all() and not rollout["terminated"][rows].any()
            assert (rollout["final_obs"][rows][:, 0] == 3).all()
        replay_ends += int((rollout["demo"] & (rollout["obs"][..., 0] == 2)).sum())
    assert replay_ends > 0


def test_under_norm_obs_a_truncated_step_bootstraps_from_the_normalized_final_observation(
        tmp_path, rollouts, count_demos, monkeypatch):
    # Every real episode is cut after 3 steps with final observation 3. Under --norm-obs the
    # rollout must hold, for each truncated row, what the normalizer made of that [3.0]
    # (a call without updating its statistics), never the raw 3.
    made, call = [], ppod.ObsNormalizer.__call__

    def spy(self, obs, update=False):
        out = call(self, obs, update)
        if not update and np.shape(obs) == (1,):  # one final observation
            made.append((float(np.asarray(obs)[0]), out.item()))
        return out

    monkeypatch.setattr(ppod.ObsNormalizer, "__call__", spy)
    ppod.main(ppod.Args(env_id="CountToThree-v0", demos_dir=count_demos, rho=0.0, phi=0.0,
                        total_timesteps=48, num_envs=2, num_steps=8, num_minibatches=2,
                        eval_episodes=0, output_dir=str(tmp_path)))
    finals = torch.cat([r["final_obs"][r["truncated"]][:, 0] for r in rollouts]).tolist()
    assert len(finals) == 16 and {raw for raw, _ in made} == {3.0}
    assert finals == approx([out for _, out in made]) and 3.0 not in finals


# ---------------------------------------------------------------------------------------
# The glue: what the loop gives the loss, the optimizer, GAE and the demo buffers
# ---------------------------------------------------------------------------------------
class KeptAgent(ppod.Agent):
    """ppod's Agent, each one made kept in `made` for the test to look at."""
    made = []

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        KeptAgent.made.append(self)


@pytest.mark.parametrize("norm_adv", [True, False])
def test_what_the_loop_gives_ppo_loss_gae_the_clipping_and_the_optimizer(norm_adv, tmp_path,
                                                                         monkeypatch,
                                                                         count_demos):
    # Each flag apart from its default and from the others; replays (rho 0.5) and --norm-obs
    # on. One minibatch an epoch: the first comes before any gradient step, so on the agent's
    # rows the new log-probabilities are the stored ones (it acted on the normalized
    # observations it learns from), on the replayed rows the stored log mu is 0, and every
    # new value is the stored one (what --clip-vloss clips around). The advantages arrive
    # as GAE made them (returns = advantages + stored values), with --norm-adv's flag for
    # ppo_loss to normalize them. Replayed steps do not count in the budget: 2 rollouts or
    # more, of 2 epochs each.
    calls = spy_on(monkeypatch, ppod, "ppo_loss", detached)
    norms = spy_on(monkeypatch, torch.nn.utils, "clip_grad_norm_", lambda params, norm: norm)
    gae = spy_on(monkeypatch, ppod, "compute_gae", lambda *a: a[5:7])  # gamma, lambda
    optimized = spy_on_adam(monkeypatch)
    moved = spy_on_weights(monkeypatch, ppod)
    KeptAgent.made.clear()
    monkeypatch.setattr(ppod, "Agent", KeptAgent)
    ppod.main(ppod.Args(env_id="CountToThree-v0", demos_dir=count_demos, rho=0.5, phi=0.0,
                        total_timesteps=24, num_envs=2, num_steps=8, num_minibatches=1,
                        update_epochs=2, norm_adv=norm_adv, gamma=0.9, gae_lambda=0.6,
                        clip_coef=0.15, ent_coef=0.03, vf_coef=0.7, clip_vloss=True,
                        max_grad_norm=0.35, eval_episodes=0, output_dir=str(tmp_path)))
    assert len(gae) >= 2 and set(gae) == {(0.9, 0.6)}
    assert len(calls) == 2 * len(gae) and norms == [0.35] * len(calls)
    first = calls[0]
    own = first["oldlogprob"] != 0  # the agent's rows: log pi < 0 of one of 2 actions
    assert own.any() and (~own).any()
    assert torch.allclose(first["newlogprob"][own], first["oldlogprob"][own], atol=1e-6)
    assert torch.allclose(first["newvalue"], first["oldvalue"], atol=1e-6)
    for call in calls:
        assert (call["clip_coef"], call["ent_coef"], call["vf_coef"], call["clip_vloss"],
                call["norm_adv"]) == (0.15, 0.03, 0.7, True, norm_adv)
        assert torch.allclose(call["returns"], call["advantages"] + call["oldvalue"], atol=1e-5)
    (agent,) = KeptAgent.made
    assert [id(p) for p in optimized[0]] == [id(p) for p in agent.parameters()]
    ((still, _),) = moved()  # and its steps moved every weight of the agent
    assert still == []


class CriticByHand(KeptAgent):
    """V(s) = 10 * s: CountToThree's s is its step count, so each value names its state."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.critic = CountTimesTen()


class CountTimesTen(torch.nn.Module):
    def forward(self, obs):
        return 10 * obs[..., :1]


def test_the_agents_real_episodes_are_admitted_with_their_largest_value(tmp_path, monkeypatch,
                                                                        count_demos):
    # V(s) = 10 * s, no --norm-obs: each real episode of CountToThree-v0 (states 0, 1, 2, cut
    # after 3 steps) is filed with max_t V(s_t) = V(2) = 20 as its priority, and only the
    # agent's own episodes are filed: the replays of COUNT_DEMO (states 10..12) never are.
    admitted, admit = [], ppod.DemoBuffers.admit

    def spy(self, demo, max_value):
        admitted.append((demo.observations[:, 0].tolist(), max_value))
        return admit(self, demo, max_value)

    monkeypatch.setattr(ppod, "Agent", CriticByHand)
    monkeypatch.setattr(ppod.DemoBuffers, "admit", spy)
    ppod.main(ppod.Args(env_id="CountToThree-v0", demos_dir=count_demos, rho=0.5, phi=0.0,
                        norm_obs=False, total_timesteps=48, num_envs=2, num_steps=8,
                        num_minibatches=2, update_epochs=1, eval_episodes=0,
                        output_dir=str(tmp_path)))
    episodes = read_csv(next(tmp_path.glob("*/episodes.csv")))
    assert len(admitted) == len(episodes) > 0
    assert admitted == [([0.0, 1.0, 2.0, 3.0], 20.0)] * len(episodes)


def test_gae_bootstraps_from_the_observation_after_each_rollout(tmp_path, monkeypatch,
                                                                count_demos):
    # V(s) = 10 * s, no --norm-obs, no replays (--rho 0 --phi 0): CountToThree-v0 in 2
    # environments, T = 4, two rollouts of 2 * 4 = 8 real steps. The first holds states 0, 1,
    # 2 (cut by the time limit, final observation 3), 0 and ends before state 1; the second
    # holds 1, 2 (cut, final 3), 0, 1 and ends before state 2. So GAE gets
    #   values      10 * [0, 1, 2, 0] = [0, 10, 20, 0],  10 * [1, 2, 0, 1] = [10, 20, 0, 10]
    #   next_values [V(1), V(2), V(3), V(1)] = [10, 20, 30, 10],
    #               [V(2), V(3), V(1), V(2)] = [20, 30, 10, 20]
    # whose last entry is V(s_T) of the observation after the rollout (10, 20), not V(s_{T-1})
    # of the rollout's last row (0, 10).
    seen = spy_on(monkeypatch, ppod, "compute_gae", lambda rewards, values, next_values, *rest:
                  (values.T.tolist(), next_values.T.tolist()))
    monkeypatch.setattr(ppod, "Agent", CriticByHand)
    ppod.main(ppod.Args(env_id="CountToThree-v0", demos_dir=count_demos, rho=0.0, phi=0.0,
                        norm_obs=False, total_timesteps=16, num_envs=2, num_steps=4,
                        num_minibatches=2, update_epochs=1, eval_episodes=0,
                        output_dir=str(tmp_path)))
    assert seen == [([[0.0, 10.0, 20.0, 0.0]] * 2, [[10.0, 20.0, 30.0, 10.0]] * 2),
                    ([[10.0, 20.0, 0.0, 10.0]] * 2, [[20.0, 30.0, 10.0, 20.0]] * 2)]


def test_main_gives_the_demo_buffers_and_the_environments_their_flags(tmp_path, monkeypatch,
                                                                      count_demos):
    # The demo buffers are made with the flags, each in its place (and --seed for the
    # sources' draws); the training environments replay from them. Training itself is
    # stood in for: what it is given is the test.
    made, given = [], []

    class Kept(ppod.DemoBuffers):
        def __init__(self, *args):
            made.append(args)
            super().__init__(*args)

    monkeypatch.setattr(ppod, "DemoBuffers", Kept)
    monkeypatch.setattr(ppod, "train", lambda args, agent, normalizer, envs, buffers, *rest:
                        given.append((envs.env.envs[0].buffers, buffers)))
    ppod.main(ppod.Args(env_id="CountToThree-v0", demos_dir=count_demos, demo_capacity=3,
                        rho=0.1, phi=0.2, alpha=0.5, seed=5, success_threshold=2.0,
                        rising_threshold=True, total_timesteps=16, num_envs=2, num_steps=8,
                        eval_episodes=0, output_dir=str(tmp_path)))
    ((demos, *flags),) = made
    assert [d.rewards.tolist() for d in demos] == [COUNT_DEMO.rewards.tolist()]
    assert flags == [3, 0.1, 0.2, 0.5, 5, 2.0, True]
    ((replaying, buffers),) = given
    assert replaying is buffers and isinstance(buffers, Kept)


@pytest.mark.parametrize("target_kl, anneal_lr, epochs, rates", [
    (None, True, ["4", "4"], [2e-3, 1e-3]),  # lr * (1 - global_step / 32) at 0 and 16
    (1e-9, False, ["1", "1"], [2e-3, 2e-3]),
])
def test_target_kl_stops_the_epochs_and_no_anneal_lr_keeps_the_rate(target_kl, anneal_lr,
                                                                    epochs, rates, tmp_path,
                                                                    monkeypatch, count_demos):
    # No replays. 4 epochs of 2 minibatches: the first minibatch of an update comes before
    # its first gradient step (KL 0), the second after one (KL > 0), so the first epoch's
    # mean KL is above 1e-9 and --target-kl 1e-9 stops each update after it. The reward
    # demos are written every --save-demos-every 2 updates (at the second, updates.csv then
    # holding 2 rows, not at the first) and at the end (2 rows).
    # --learning-rate 2e-3, not the default 1e-3.
    saved, save = [], ppod.save_reward_demos
    monkeypatch.setattr(ppod, "save_reward_demos", lambda path, *a: (
        saved.append(len(read_csv(os.path.join(path, "updates.csv")))), save(path, *a)))
    ppod.main(ppod.Args(env_id="CountToThree-v0", demos_dir=count_demos, rho=0.0, phi=0.0,
                        total_timesteps=32, num_envs=2, num_steps=8, num_minibatches=2,
                        update_epochs=4, target_kl=target_kl, anneal_lr=anneal_lr,
                        learning_rate=2e-3,
                        save_demos_every=2, eval_episodes=0, output_dir=str(tmp_path)))
    updates = read_csv(next(tmp_path.glob("*/updates.csv")))
    assert [u["epochs"] for u in updates] == epochs
    assert [float(u["learning_rate"]) for u in updates] == approx(rates)
    assert saved == [2, 2]


@pytest.mark.parametrize("continuous", [False, True])
def test_the_evaluation_takes_the_policys_mode_not_a_sample(continuous, monkeypatch):
    agent = ppod.Agent(1, 1 if continuous else 2, continuous=continuous)
    check_the_evaluation_takes_the_policys_mode(ppod, agent, continuous, monkeypatch)


# ---------------------------------------------------------------------------------------
# Runs end to end
# ---------------------------------------------------------------------------------------
# tests/my_envs.py's GridWorld-v0 (4x4, -1 a step, time limit 20), given as module:Id.
# A demo walks right three times (action 0), then up three times (action 1): positions
# (0,0) ... (3,0) ... (3,3), 6 steps, return -6, terminated at the goal.
GRID_PATH = [[0, 0], [1, 0], [2, 0], [3, 0], [3, 1], [3, 2], [3, 3]]


@pytest.fixture
def grid_demos(tmp_path_factory):
    folder = tmp_path_factory.mktemp("grid-demos")
    ppod.save_demo(folder / "demo_0.npz", ppod.Demo(np.array(GRID_PATH, np.float32),
                                                   np.array([0, 0, 0, 1, 1, 1]),
                                                   np.full(6, -1.0, np.float32)))
    return str(folder)


def test_own_environment_module_with_demos_made_here(tmp_path, fresh_env_module, grid_demos,
                                                     check_run_folder):
    output_dir = str(tmp_path / "runs")
    summary = ppod.main(ppod.Args(env_id=f"{fresh_env_module}:GridWorld-v0",
                                  demos_dir=grid_demos, total_timesteps=256, num_envs=2,
                                  num_steps=32, num_minibatches=2, eval_episodes=1,
                                  output_dir=output_dir))
    check_run_folder(summary, output_dir, "ppod")
    assert summary["env_id"] == "my_envs:GridWorld-v0"
    saved = ppod.load_demos(os.path.join(output_dir, os.listdir(output_dir)[0], "demos"),
                            (2,), gym.spaces.Discrete(4))
    # best first; -6 is the best a walk to the goal can do, and the given demo is still there
    assert saved[0].episode_return == -6.0
    assert any(d.observations.tolist() == GRID_PATH for d in saved)


@pytest.mark.slow  # a smoke run: a whole tiny run and every file it writes
def test_smoke_run_writes_every_file_and_its_model_evaluates_and_records(tmp_path, check_run_folder):
    args = ppod.Args(total_timesteps=1024, num_envs=2, num_steps=128, num_minibatches=4,
                     update_epochs=2, eval_episodes=1, save_model=True, save_demos_every=1,
                     output_dir=str(tmp_path / "train"))
    summary = ppod.main(args)
    path, episodes, updates = check_run_folder(summary, args.output_dir, "ppod", model=True)
    assert summary["env_id"] == "MountainCar-v0" and summary["global_steps"] >= 1024
    assert {"policy_loss", "value_loss", "approx_kl", "demo_fraction", "rho", "phi", "threshold",
            "reward_demos", "value_demos", "entropy", "clipfrac", "learning_rate",
            "explained_variance", "epochs"} <= set(updates[0])
    for u in updates:  # every diagnostic is a number; 2 epochs each time (no --target-kl)
        assert all(math.isfinite(float(u[k])) for k in ("policy_loss", "value_loss", "entropy",
                   "approx_kl", "clipfrac", "learning_rate", "demo_fraction"))
        assert int(u["epochs"]) == 2
    assert all(e["episode_length"] == "200" for e in episodes)  # real episodes, no replays
    assert any(float(u["demo_fraction"]) > 0 for u in updates)
    space = gym.make("MountainCar-v0").action_space
    saved = ppod.load_demos(os.path.join(path, "demos"), (2,), space)
    assert [d.episode_return for d in saved] == [-115.0]  # the shipped demo, still the best

    model = os.path.join(path, "model.pt")
    evaluated = ppod.main(ppod.Args(eval_checkpoint=model, eval_episodes=1,
                                    output_dir=str(tmp_path / "eval")))
    assert evaluated["eval_return_mean"] == summary["eval_return_mean"] and evaluated["global_steps"] == 0
    recorded = ppod.main(ppod.Args(record_demo_from=model, demos_dir=str(tmp_path / "mine")))
    (demo,) = ppod.load_demos(str(tmp_path / "mine"), (2,), space)
    assert recorded["demo_path"].endswith("demo_0.npz")
    assert demo.episode_return == recorded["episode_return"] == -len(demo.rewards)


# A CountingEnv that terminates when action 1 is taken, else cut after 10 steps: the return
# is the step at which the agent first takes action 1.
class CountUntilOne(CountingEnv):
    terminate_on = 1


gym.register("CountUntilOne-v0", entry_point=CountUntilOne, max_episode_steps=10)


def threshold_agent():
    """A ppod Agent whose greedy action is 1 where its input is above 0, else 0: the first
    layer passes x to unit 0, tanh keeps its sign, the second layer passes unit 0 on, and
    the logits are [0, tanh(tanh(x))] (0 wins the tie at x = 0)."""
    agent = ppod.Agent(1, 2, False, 4)
    with torch.no_grad():
        for layer in agent.actor[::2]:
            layer.weight.zero_()
            layer.bias.zero_()
        agent.actor[0].weight[0, 0] = agent.actor[2].weight[0, 0] = agent.actor[4].weight[1, 0] = 1
    return agent


def test_a_normalizing_model_acts_on_normalized_observations_and_records_raw_ones(tmp_path):
    # Statistics mean 1.5, var 1: the agent sees (s - 1.5) / sqrt(1 + 1e-8), which is above 0
    # first at s = 2, so it takes action 1 at its third step: return 3, demo observations
    # 0, 1, 2, 3 (raw). On raw observations it would take action 1 at s = 1: return 2; a
    # demo stored normalized would hold -1.5, -0.5, 0.5, 1.5.
    normalizer = ppod.ObsNormalizer((1,), True)
    normalizer.rms.mean[:], normalizer.rms.var[:] = 1.5, 1.0
    model = str(tmp_path / "model.pt")
    ppod.save_checkpoint(model, {"agent": threshold_agent(), "obs_rms": normalizer},
                         ppod.Args(env_id="CountUntilOne-v0", hidden_size=4, norm_obs=True))
    evaluated = ppod.main(ppod.Args(env_id="CountUntilOne-v0", eval_checkpoint=model,
                                    eval_episodes=2, output_dir=str(tmp_path / "eval")))
    assert evaluated["eval_return_mean"] == 3.0
    recorded = ppod.main(ppod.Args(env_id="CountUntilOne-v0", record_demo_from=model,
                                   demos_dir=str(tmp_path / "demos")))
    demo = ppod.load_demo(recorded["demo_path"], (1,), gym.spaces.Discrete(2))
    assert demo.observations[:, 0].tolist() == [0, 1, 2, 3] and demo.actions.tolist() == [0, 0, 1]
    assert demo.terminated is True and recorded["episode_return"] == 3.0


def test_an_evaluated_checkpoint_takes_its_networks_flags(tmp_path):
    # MODEL_FLAGS: threshold_agent is 4 wide and its model says --no-norm-obs, though it
    # stores statistics (mean 1.5, var 1). Evaluated under the defaults (64 wide, --norm-obs)
    # it is rebuilt 4 wide (a 64-wide network would not load it: exit 2) and acts on raw
    # observations: action 1 at s = 1, return 2 (normalized, above 0 first at s = 2: 3).
    normalizer = ppod.ObsNormalizer((1,), False)
    normalizer.rms.mean[:], normalizer.rms.var[:] = 1.5, 1.0
    model = str(tmp_path / "model.pt")
    ppod.save_checkpoint(model, {"agent": threshold_agent(), "obs_rms": normalizer},
                         ppod.Args(env_id="CountUntilOne-v0", hidden_size=4, norm_obs=False))
    evaluated = ppod.main(ppod.Args(env_id="CountUntilOne-v0", eval_checkpoint=model,
                                    eval_episodes=2, output_dir=str(tmp_path / "eval")))
    assert evaluated["eval_return_mean"] == 2.0


class CountFromFive(CountUntilOne):
    """CountUntilOne whose observation is the step count plus 5."""

    def reset(self, *, seed=None, options=None):
        obs, info = super().reset(seed=seed, options=options)
        return obs + 5, info

    def step(self, action):
        obs, *rest = super().step(action)
        return obs + 5, *rest


gym.register("CountFromFive-v0", entry_point=CountFromFive, max_episode_steps=10)


def test_eval_every_evaluates_with_the_observation_statistics(tmp_path, count_demos,
                                                              monkeypatch):
    # threshold_agent with its actor frozen trains for one rollout of 2 * 8 real steps (no
    # replays); --eval-every 16 evaluates once, at step 16, and best_model.pt keeps the
    # statistics of that moment, mean m > 5 (every observation is 5 or more). The greedy
    # walk takes action 1 at the first step t with (t + 5 - m) / sqrt(var + 1e-8) > 0 and
    # returns t + 1. With its statistics ignored it would take action 1 at once: return 1.
    # --seed 7, not the default 1, seeds torch and the training environments, and each
    # evaluation's (at step 16 and the final one) at 7 + 100,000.
    agent = threshold_agent()
    agent.actor.requires_grad_(False)
    monkeypatch.setattr(ppod, "Agent", lambda *args: agent)
    seeds, resets = spy_on_seeds(monkeypatch, ppod)
    ppod.main(ppod.Args(env_id="CountFromFive-v0", demos_dir=count_demos, rho=0.0, phi=0.0,
                        total_timesteps=16, num_envs=2, num_steps=8, num_minibatches=2,
                        hidden_size=4, eval_every=16, eval_episodes=2, save_model=True,
                        seed=7, output_dir=str(tmp_path)))
    assert seeds == [7] and resets == [7, 100_007, 100_007]
    (path,) = tmp_path.iterdir()
    rms = torch.load(path / "best_model.pt", weights_only=True)["obs_rms"]
    mean, std = rms["mean"].item(), math.sqrt(rms["var"].item() + 1e-8)
    first = next(t for t in range(10) if (t + 5 - mean) / std > 0)
    assert mean > 5 and first >= 1
    (row,) = read_csv(path / "evaluations.csv")
    assert row["global_step"] == "16" and float(row["eval_return_mean"]) == first + 1


def test_demos_of_the_agents_episodes_keep_raw_observations_under_norm_obs(tmp_path,
                                                                          demo_buffers,
                                                                          count_demos):
    # The agent sees normalized observations, but the episodes it keeps as value demos hold
    # the raw ones: states 0, 1, 2 and the true final observation 3 (a replay normalizes
    # them with the statistics of its day); so do the reward demos written to demos/.
    ppod.main(ppod.Args(env_id="CountToThree-v0", demos_dir=count_demos, rho=0.3, phi=0.3,
                        demo_capacity=4, total_timesteps=96, num_envs=2, num_steps=8,
                        num_minibatches=2, eval_episodes=0, output_dir=str(tmp_path)))
    (buffers,) = demo_buffers
    assert buffers.value and all(demo.observations[:, 0].tolist() == [0, 1, 2, 3]
                                 for _, demo in buffers.value)
    (saved,) = ppod.load_demos(str(next(tmp_path.glob("*/demos"))), (1,), gym.spaces.Discrete(2))
    assert saved.observations[:, 0].tolist() == [10, 11, 12, 13]


def test_updates_csv_logs_rho_phi_and_the_demo_buffers_and_demos_are_written_best_first(
        tmp_path):
    # One given demo of one step paying 1: return 1, the success threshold. Every real
    # episode of CountToThree-v0 (3 steps of reward 1, return 3 >= 1) joins the reward demos
    # and anneals: --demo-capacity 3 leaves K_v = 3 - 1 = 2 value slots, a step of
    # phi_0 / K_v = 0.2 / 2 = 0.1, so after n admitted episodes (--rho 0, --phi 0.2)
    #   n = 0: (rho, phi) = (0, 0.2);  n = 1: (0.1, 0.1);  n >= 2: (0.2, 0)
    # An update's n is the number of episodes.csv rows up to its step (every real episode is
    # admitted where it ends, none is a value demo). updates.csv logs these, not the flags.
    given = tmp_path / "given"
    given.mkdir()
    ppod.save_demo(given / "demo_0.npz", ppod.Demo(np.array([[0.0], [1.0]], np.float32),
                                                  np.array([0]), np.array([1.0], np.float32)))
    ppod.main(ppod.Args(env_id="CountToThree-v0", demos_dir=str(given), rho=0.0, phi=0.2,
                        demo_capacity=3, norm_obs=False, total_timesteps=12, num_envs=1,
                        num_steps=2, num_minibatches=1, eval_episodes=0,
                        output_dir=str(tmp_path / "runs")))
    (path,) = (tmp_path / "runs").iterdir()
    ends = [int(e["global_step"]) for e in read_csv(path / "episodes.csv")]
    annealed = {0: (0.0, 0.2), 1: (0.1, 0.1), 2: (0.2, 0.0)}
    logged = [(float(u["rho"]), float(u["phi"])) for u in read_csv(path / "updates.csv")]
    expected = [annealed[min(n, 2)] for n in counted(path, ends)]
    assert len(ends) >= 4 and logged[0] == (0.0, 0.2) and expected[-1] == (0.2, 0.0)
    assert logged == [approx(pair) for pair in expected]
    # and the buffers as they are after each rollout: the given demo and the n agent episodes
    # among the reward demos, at most 3 (the oldest agent demo leaves), no value demo, and the
    # threshold the given demo's return 1
    assert demo_columns(path) == [(min(1 + n, 3), 0, 1.0) for n in counted(path, ends)]
    # The reward demos at the end: the given one and the last two agent episodes (the
    # oldest agent demo leaves first), written to demos/ best return first: 3, 3, 1 (in
    # the buffer's order, given first, they would be 1, 3, 3).
    saved = ppod.load_demos(str(path / "demos"), (1,), gym.spaces.Discrete(2))
    assert [d.episode_return for d in saved] == [3.0, 3.0, 1.0]
    assert saved[2].observations[:, 0].tolist() == [0, 1]
    assert saved[0].observations[:, 0].tolist() == [0, 1, 2, 3]
    # --success-threshold 5 above every return: the same run's episodes (return 3) are value
    # demos instead, min(n, 2) of them in the K_v = 2 slots, the given demo the only reward
    # demo, rho and phi never annealed, and the threshold logged is the flag's 5 (the lowest
    # reward demo's return is the given demo's 1)
    ppod.main(ppod.Args(env_id="CountToThree-v0", demos_dir=str(given), rho=0.0, phi=0.2,
                        demo_capacity=3, success_threshold=5.0, norm_obs=False,
                        total_timesteps=12, num_envs=1, num_steps=2, num_minibatches=1,
                        eval_episodes=0, output_dir=str(tmp_path / "valued")))
    (path,) = (tmp_path / "valued").iterdir()
    ends = [int(e["global_step"]) for e in read_csv(path / "episodes.csv")]
    assert len(ends) >= 3
    assert demo_columns(path) == [(1, min(n, 2), 5.0) for n in counted(path, ends)]
    assert {(u["rho"], u["phi"]) for u in read_csv(path / "updates.csv")} == {("0.0", "0.2")}


def counted(path, ends):
    """For each row of updates.csv, the real episodes ended up to its step (`ends`)."""
    return [sum(end <= int(row["global_step"]) for end in ends)
            for row in read_csv(path / "updates.csv")]


def demo_columns(path):
    """updates.csv's (reward_demos, value_demos, threshold) of each row."""
    return [(int(u["reward_demos"]), int(u["value_demos"]), float(u["threshold"]))
            for u in read_csv(path / "updates.csv")]


def test_record_demo_from_a_ppo_checkpoint(tmp_path, count_demos):
    # ppo.py's model.pt has the same layout; a second recording takes the next file name
    model = str(tmp_path / "ppo.pt")
    ppo.save_checkpoint(model, {"agent": ppo.Agent((1,), 2, False, 16),
                                "obs_rms": ppo.ObsNormalizer((1,), False)},
                        ppo.Args(env_id="CountToThree-v0", hidden_size=16))
    recorded = ppod.main(ppod.Args(env_id="CountToThree-v0", record_demo_from=model,
                                   demos_dir=count_demos))
    assert recorded == {"demo_path": os.path.join(count_demos, "demo_1.npz"),
                        "episode_return": 3.0, "episode_length": 3}
    demo = ppod.load_demo(recorded["demo_path"], (1,), gym.spaces.Discrete(2))
    assert demo.observations[:, 0].tolist() == [0, 1, 2, 3] and demo.terminated is False


def test_record_demo_from_starts_the_episode_from_seed(tmp_path):
    # MountainCar-v0's reset(seed=s) draws the start position uniformly from [-0.6, -0.4]
    # with the generator default_rng(s), velocity 0: position = -0.6 + 0.2 * u, u its first
    # random(). Seed 3: u = 0.0856492, -0.6 + 0.2 * 0.0856492 = -0.5828702; seed 4:
    # u = 0.9430561, -0.6 + 0.1886112 = -0.4113888. The recorded demo starts there; an
    # unseeded reset would draw it from fresh entropy.
    model = str(tmp_path / "model.pt")
    ppod.save_checkpoint(model, {"agent": ppod.Agent(2, 3, False, 4),
                                 "obs_rms": ppod.ObsNormalizer((2,), False)},
                         ppod.Args(hidden_size=4, norm_obs=False))
    for seed, position in ((3, -0.5828702), (4, -0.4113888)):
        recorded = ppod.main(ppod.Args(record_demo_from=model, seed=seed,
                                       demos_dir=str(tmp_path / f"demos-{seed}")))
        demo = ppod.load_demo(recorded["demo_path"], (2,), gym.spaces.Discrete(3))
        assert demo.observations[0].tolist() == approx([position, 0.0])


def test_continuous_actions_are_replayed_as_recorded_and_read_back_by_the_update(
        tmp_path, rollouts, monkeypatch):
    # A Pendulum demo recorded from an untrained ppo.py policy: 200 steps, cut by the time
    # limit. Wherever a slot replays it, the rollout holds the demo's action vectors. The
    # first minibatch comes before any gradient step, so on the agent's rows (log pi != 0)
    # the update's log pi of the [B, 1] action vectors it reads back is the stored one
    # (actions flattened to [B] would broadcast against the [B, 1] mean into [B, B]).
    model = str(tmp_path / "ppo.pt")
    ppo.save_checkpoint(model, {"agent": ppo.Agent((3,), 1, True),
                                "obs_rms": ppo.ObsNormalizer((3,), False)},
                        ppo.Args(env_id="Pendulum-v1"))
    demos_dir = str(tmp_path / "demos")
    ppod.main(ppod.Args(env_id="Pendulum-v1", record_demo_from=model, demos_dir=demos_dir))
    (demo,) = ppod.load_demos(demos_dir, (3,), gym.make("Pendulum-v1").action_space)
    assert demo.terminated is False and demo.actions.shape == (200, 1)
    calls = spy_on(monkeypatch, ppod, "ppo_loss", detached)
    ppod.main(ppod.Args(env_id="Pendulum-v1", demos_dir=demos_dir, rho=0.5, phi=0.0,
                        norm_obs=False, total_timesteps=800, num_envs=2, num_steps=200,
                        num_minibatches=2, update_epochs=1, eval_episodes=0,
                        output_dir=str(tmp_path / "runs")))
    replayed = [(r["obs"][:, n], r["actions"][:, n], r["truncated"][:, n]) for r in rollouts
                for n in range(2) if r["demo"][:, n].all()]
    assert replayed  # a whole 200-step replay fills a slot's rollout
    for obs, actions, truncated in replayed:
        assert torch.equal(obs, torch.from_numpy(demo.observations[:200]))
        assert torch.equal(actions, torch.from_numpy(demo.actions))
        assert truncated.tolist() == [False] * 199 + [True]
    first = calls[0]
    own = first["oldlogprob"] != 0
    assert own.any() and first["newlogprob"].shape == own.shape == (200,)  # 400 rows / 2
    assert torch.allclose(first["newlogprob"][own], first["oldlogprob"][own], atol=1e-5)


def test_stop_at_return_counts_real_episodes_only(tmp_path, count_demos):
    # Real episodes return 3 and replays 18: a 20-episode mean of 3 needs 20 real episodes.
    summary = ppod.main(ppod.Args(env_id="CountToThree-v0", demos_dir=count_demos, rho=0.5,
                                  phi=0.0, stop_at_return=3.0, total_timesteps=10_000, num_envs=2,
                                  num_steps=8, num_minibatches=2, eval_episodes=0,
                                  output_dir=str(tmp_path)))
    episodes = read_csv(next(tmp_path.glob("*/episodes.csv")))
    assert len(episodes) >= 20 and summary["solved_at_step"] == int(episodes[19]["global_step"])
    assert summary["global_steps"] == summary["solved_at_step"] < 10_000


def test_interrupted_run_keeps_its_data(tmp_path, monkeypatch, count_demos):
    # main writes the run folder, then lets the KeyboardInterrupt go on (to exit status 130)
    monkeypatch.setattr(torch.optim.Adam, "step", interrupt_on_call(3))
    with pytest.raises(KeyboardInterrupt):
        ppod.main(ppod.Args(env_id="CountToThree-v0", demos_dir=count_demos,
                            total_timesteps=2048, num_envs=2, num_steps=32, num_minibatches=2,
                            update_epochs=1, save_model=True, output_dir=str(tmp_path)))
    (path,) = tmp_path.iterdir()
    summary = json.loads((path / "summary.json").read_text())
    assert summary["interrupted"] is True and summary["eval_return_mean"] is None
    assert len(read_csv(path / "updates.csv")) == 1 and read_csv(path / "episodes.csv")
    assert (path / "model.pt").exists()
    assert (path / "demos" / "demo_0.npz").exists()


def test_nan_loss_stops_cleanly(tmp_path, monkeypatch, count_demos, capsys):
    original = ppod.ppo_loss
    monkeypatch.setattr(ppod, "ppo_loss", lambda *a, **k: (original(*a, **k)[0] * math.nan,
                                                           *original(*a, **k)[1:]))
    summary = ppod.main(ppod.Args(env_id="CountToThree-v0", demos_dir=count_demos, rho=0.0,
                                  phi=0.0, total_timesteps=1024, num_envs=2, num_steps=32,
                                  num_minibatches=2, output_dir=str(tmp_path)))
    assert summary["interrupted"] is True and summary["global_steps"] == 64
    assert "the loss became non-finite (NaN or inf) at step 64" in capsys.readouterr().out
    assert (next(tmp_path.iterdir()) / "summary.json").exists()


@pytest.mark.slow  # determinism: two whole runs
def test_same_seed_gives_the_same_episodes(tmp_path, count_demos):
    # Replays, value demos and admissions all draw from the seeded generators.
    rows = same_seed_episodes(lambda out: ppod.main(ppod.Args(
        env_id="CountToThree-v0", demos_dir=count_demos, rho=0.3, phi=0.3, demo_capacity=4,
        total_timesteps=240, num_envs=4, num_steps=16, eval_episodes=0, output_dir=out)),
        tmp_path)
    assert len(rows) > 20


# ---------------------------------------------------------------------------------------
# Flags at values other than their defaults (issue 59), through conftest.py's checks
# ---------------------------------------------------------------------------------------
def six_real_steps(demos_dir):
    """A 6-step run: one rollout of 2 environments * 3 steps, minibatches of 3, every
    episode real (--rho 0 --phi 0), so that every step counts; demos_dir must fit."""
    return dict(num_envs=2, num_steps=3, num_minibatches=2, demos_dir=demos_dir, rho=0.0,
                phi=0.0)


def test_target_kl_and_clipfrac_read_each_epochs_own_ratios(tmp_path, monkeypatch,
                                                            count_demos):
    # No replays: every row is the agent's, whose KL and clipped fraction ppod.py reads
    check_the_epochs_kl_and_clipfrac(ppod, tmp_path, monkeypatch, "CountToThree-v0",
                                     demos_dir=count_demos, rho=0.0, phi=0.0)


def test_every_evaluation_reads_the_running_statistics_and_leaves_them_alone(
        tmp_path, monkeypatch, count_demos):
    # No replays. The loop adds a step's observations before that step's evaluation:
    #   step 4: the reset's 0, 0, then 1, 1 and 2, 2:      mean 1,   var 5/3 - 1 = 2/3,  count 6
    #   step 8: then 0, 0 (the cut episode's next) and 1, 1: mean 0.8, var 12/10 - 0.64 = 0.56,
    #                                                                               count 10
    #   final: no step since:                              mean 0.8, var 0.56,           count 10
    check_every_evaluation_reads_the_running_statistics_and_leaves_them_alone(
        ppod, tmp_path, monkeypatch, demos_dir=count_demos, rho=0.0, phi=0.0,
        expected=[(True, 1.0, 2 / 3, 6), (True, 0.8, 0.56, 10), (True, 0.8, 0.56, 10)])


# ---------------------------------------------------------------------------------------
# Watching a run: --eval-every and the progress line
# ---------------------------------------------------------------------------------------
def test_eval_every_counts_real_steps_and_leaves_the_replays_alone(tmp_path, fresh_env_module,
                                                                   grid_demos):
    # With replays (rho 0.3, phi 0.2), a vector step adds 0 to 3 real steps: each multiple of
    # 100 reached gets one row, at the first real step count at or past it, so less than 3
    # past it. The replays' choices (the demo buffers' generator), the observation
    # statistics and the agent's samples are those of the run without --eval-every.
    args = ppod.Args(env_id=f"{fresh_env_module}:GridWorld-v0", demos_dir=grid_demos,
                     total_timesteps=864, num_envs=3, num_steps=32, num_minibatches=2,
                     eval_every=100, eval_episodes=2, output_dir=str(tmp_path / "with"))
    summary = ppod.main(args)
    without = ppod.main(replace(args, eval_every=0, output_dir=str(tmp_path / "without")))
    assert episode_rows(tmp_path / "with") == episode_rows(tmp_path / "without")
    assert summary["eval_return_mean"] == without["eval_return_mean"]
    rows = read_csv(next(tmp_path.glob("with/*/evaluations.csv")))
    steps = [int(r["global_step"]) for r in rows]
    assert len(steps) == summary["global_steps"] // 100
    assert all(0 <= step - 100 * k < 3 for k, step in enumerate(steps, start=1))
    assert any(step % 3 for step in steps)  # replays happened: not every step is a multiple of 3


# ---------------------------------------------------------------------------------------
# Bad input: one line on stderr, exit status 2, nothing trained
# ---------------------------------------------------------------------------------------
@pytest.fixture
def bad_files(tmp_path):
    def demo_folder(name, **arrays):
        folder = tmp_path / name
        folder.mkdir()
        np.savez(folder / "demo_0.npz", **arrays)
        return str(folder)

    obs3, actions3, rewards3 = np.zeros((4, 2), np.float32), np.array([0, 2, 1]), -np.ones(3)
    corrupt = tmp_path / "corrupt"
    corrupt.mkdir()
    (corrupt / "demo_0.npz").write_bytes(b"this is not a demonstration")
    corrupt_pt = tmp_path / "corrupt.pt"
    corrupt_pt.write_bytes(b"this is not a checkpoint")
    pendulum = tmp_path / "pendulum.pt"
    ppod.save_checkpoint(pendulum, {"agent": ppod.Agent(3, 1, True),
                                    "obs_rms": ppod.ObsNormalizer((3,), False)},
                         ppod.Args(env_id="Pendulum-v1"))
    misfit = tmp_path / "misfit.pt"  # says 32 hidden units, holds a 64-unit network
    ppod.save_checkpoint(misfit, {"agent": ppod.Agent(2, 3, False, 64),
                                  "obs_rms": ppod.ObsNormalizer((2,), False)},
                         ppod.Args(hidden_size=32))
    two = demo_folder("two", observations=obs3, actions=actions3, rewards=rewards3)
    np.savez(os.path.join(two, "demo_1.npz"), observations=obs3, actions=actions3, rewards=rewards3)
    return {
        "wide-obs": demo_folder("wide-obs", observations=np.zeros((4, 3)), actions=actions3,
                                rewards=rewards3),
        "bad-action": demo_folder("bad-action", observations=obs3, actions=np.array([0, 3, 1]),
                                  rewards=rewards3),
        "empty": demo_folder("empty", observations=np.zeros((1, 2)),
                             actions=np.zeros(0, np.int64), rewards=np.zeros(0)),
        "no-rewards": demo_folder("no-rewards", observations=obs3, actions=actions3),
        "corrupt": str(corrupt), "two": two, "nowhere": str(tmp_path / "nowhere"),
        "missing.pt": str(tmp_path / "missing.pt"), "corrupt.pt": str(corrupt_pt),
        "pendulum.pt": str(pendulum), "misfit.pt": str(misfit)}


@pytest.mark.parametrize("argv, message", [
    (["--env-id", "SpinTheBits-v0"], "MultiBinary action space of shape (3,); ppod.py handles "
     "Discrete and flat Box actions"),
    (["--env-id", "Taxi-v4"], "Discrete observation space"),
    (["--num-envs", "3", "--num-steps", "5", "--num-minibatches", "4"],
     "num_envs*num_steps = 15 is not divisible by --num-minibatches 4"),
    (["--num-envs", "0"], "--num-envs must be positive"),
    (["--learning-rate", "0"], "--learning-rate must be positive"),
    (["--rho", "0.6", "--phi", "0.5"], "--rho 0.6 + --phi 0.5 must be less than 1"),
    (["--rho", "1.5"], "--rho must be in [0, 1]"),
    (["--alpha", "-1"], "--alpha must be 0 or more"),
    (["--demo-capacity", "0"], "--demo-capacity must be positive"),
    (["--demo-capacity", "1", "--demos-dir", "two"], "--demo-capacity 1 cannot hold the 2 demonstrations"),
    (["--demos-dir", "nowhere"], "no demonstrations (*.npz) in"),
    (["--env-id", "my_envs:GridWorld-v0"], "no demonstrations (*.npz) in"),
    (["--success-threshold", "nan"], "--success-threshold must be a finite number"),
    (["--env-id", "CartPole-v1"], "no demonstrations (*.npz) in"),
    (["--demos-dir", "wide-obs"],
     "has observations of shape (4, 3); 3 steps of this environment need (4, 2)"),
    (["--demos-dir", "bad-action"], "this environment takes integers below 3"),
    (["--demos-dir", "empty"], "is empty"),
    (["--demos-dir", "no-rewards"], "lacks rewards"),
    (["--demos-dir", "corrupt"], "is not a readable .npz file"),
    (["--record-demo-from", "missing.pt"], "does not exist"),
    (["--record-demo-from", "corrupt.pt"], "is not a ppod.py model.pt"),
    (["--record-demo-from", "pendulum.pt"], "was made for Pendulum-v1; pass --env-id Pendulum-v1"),
    (["--record-demo-from", "misfit.pt"], "does not fit MountainCar-v0's network"),
    (["--eval-checkpoint", "misfit.pt", "--record-demo-from", "misfit.pt"], "pass one of them"),
])
def test_bad_input_is_one_line_and_exit_status_2(argv, message, check_usage_error, bad_files):
    check_usage_error("ppod.py", [bad_files.get(a, a) for a in argv], message)


# ---------------------------------------------------------------------------------------
# Issue 19 (each failed on the code before the fix)
# ---------------------------------------------------------------------------------------
@pytest.fixture
def demo_buffers(monkeypatch):
    """The DemoBuffers a run makes, kept for the test to look at after the run."""
    made = []

    class Kept(ppod.DemoBuffers):
        def __init__(self, *args, **kwargs):
            super().__init__(*args, **kwargs)
            made.append(self)

    monkeypatch.setattr(ppod, "DemoBuffers", Kept)
    return made


@pytest.mark.parametrize("norm_obs", [False, True])
def test_value_demo_priorities_are_the_current_critics(norm_obs, tmp_path, demo_buffers,
                                                       count_demos):
    # Real episodes return 3 < 18 (COUNT_DEMO): every one is a value-demo candidate, kept
    # with max_t V(s_t). After the run, each kept value demo's priority must be the max of
    # the final critic over its states s_0..s_2 = 0, 1, 2, not the numbers of the critic
    # that played it (the critic changes at every update: 8 updates here). With --norm-obs
    # the critic sees them as (s - mean) / sqrt(var + 1e-8), with the run's last statistics
    # (those model.pt keeps: no step follows the last update), as it sees every state.
    ppod.main(ppod.Args(env_id="CountToThree-v0", demos_dir=count_demos, rho=0.0, phi=0.5,
                        norm_obs=norm_obs, demo_capacity=4, total_timesteps=256, num_envs=2,
                        num_steps=16, num_minibatches=2, hidden_size=16, learning_rate=1e-2,
                        eval_episodes=0, save_model=True, output_dir=str(tmp_path)))
    (buffers,) = demo_buffers
    checkpoint = torch.load(next(tmp_path.glob("*/model.pt")), weights_only=True)
    agent = ppod.Agent(1, 2, False, 16)
    agent.load_state_dict(checkpoint["agent"])
    states = torch.tensor([[0.0], [1.0], [2.0]], dtype=torch.float64)
    if norm_obs:
        rms = checkpoint["obs_rms"]
        assert 0.5 < rms["mean"].item() < 1.5 and rms["var"].item() > 0.1  # not raw states
        states = (states - rms["mean"]) / torch.sqrt(rms["var"] + 1e-8)
        # and only the slots' observations moved them: 2 after the reset and 2 at each of
        # the 16 steps of every rollout (a row of updates.csv each), on RunningMeanStd's
        # prior count 1e-4; normalizing the value demos' states to refresh them adds none
        rollouts = len(read_csv(next(tmp_path.glob("*/updates.csv"))))
        assert rms["count"].item() == pytest.approx(1e-4 + 2 * (1 + 16 * rollouts))
    with torch.no_grad():
        current = agent.get_value(states.float()).max().item()
    assert len(buffers.value) == 3  # capacity 4 minus the one given demo
    for max_value, demo in buffers.value:
        assert demo.observations[:, 0].tolist() == [0, 1, 2, 3]
        assert max_value == pytest.approx(current, abs=1e-5)


def test_kl_clipfrac_and_target_kl_use_the_agents_rows_only(tmp_path, count_demos):
    # One minibatch per epoch: the first epoch's log-ratios are those of the policy that
    # played, log pi - log pi = 0 on every agent row (KL 0, nothing clipped), while a demo
    # row has log mu = 0, so log r = log pi ~ log 0.5 and k3 = (0.5 - 1) - log 0.5 = 0.19.
    # The second epoch follows one Adam step (each weight moves by lr = 1e-3; 16 hidden
    # units move a logit by at most 0.016): |r - 1| < 0.04 < eps = 0.2, KL < 0.001 < 0.01.
    # So both epochs run (no early stop at --target-kl 0.01) and clipfrac is exactly 0.
    ppod.main(ppod.Args(env_id="CountToThree-v0", demos_dir=count_demos, rho=0.5, phi=0.0,
                        norm_obs=False, total_timesteps=96, num_envs=2, num_steps=16,
                        num_minibatches=1, update_epochs=2, target_kl=0.01, hidden_size=16,
                        eval_episodes=0, output_dir=str(tmp_path)))
    updates = read_csv(next(tmp_path.glob("*/updates.csv")))
    assert updates and all(float(u["demo_fraction"]) > 0 for u in updates)
    for u in updates:
        assert u["epochs"] == "2" and float(u["clipfrac"]) == 0.0
        assert 0.0 <= float(u["approx_kl"]) < 1e-3


def test_the_budget_is_passed_by_the_last_rollout_as_said_once_at_the_start(tmp_path, count_demos,
                                                                             capsys):
    # Rollouts of 4 x 16 = 64 slot steps, replays among them (rho, phi 0.3), budget 240: the
    # loop runs until 240 real steps are reached, and the rollout that reaches them is
    # finished, so a run ends at 240 to 240 + 63 real steps; the start says so once.
    summary = ppod.main(ppod.Args(env_id="CountToThree-v0", demos_dir=count_demos, rho=0.3,
                                  phi=0.3, total_timesteps=240, num_envs=4, num_steps=16,
                                  eval_episodes=0, save_model=True, output_dir=str(tmp_path)))
    said = ("ppod.py: training runs whole rollouts of up to 64 real steps (replayed "
            "demonstration steps do not count): the one that reaches --total-timesteps 240 is "
            "finished")
    out = capsys.readouterr().out
    # the device's line, the run's line, then this one
    assert out.splitlines()[2] == said and out.count("whole rollouts") == 1
    assert 240 < summary["global_steps"] < 240 + 64  # 240 is not met at a rollout's end here
    # the last rollout (a row of updates.csv each) started below the budget and passed it
    updates = read_csv(next(tmp_path.glob("*/updates.csv")))
    assert int(updates[-2]["global_step"]) < 240 < int(updates[-1]["global_step"])
    assert int(updates[-1]["global_step"]) == summary["global_steps"]
    # an evaluation of a checkpoint trains nothing, and says nothing of a budget
    (path,) = tmp_path.iterdir()
    ppod.main(ppod.Args(env_id="CountToThree-v0", eval_checkpoint=str(path / "model.pt"),
                        eval_episodes=1, output_dir=str(tmp_path / "eval")))
    assert "whole rollouts" not in capsys.readouterr().out

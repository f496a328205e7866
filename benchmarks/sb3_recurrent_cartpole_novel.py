"""The side-by-side reference for ppo_lstm.py's goal: sb3-contrib's RecurrentPPO as
rl-baselines3-zoo runs its CartPoleNoVel-v1 entry (hyperparams/ppo_lstm.yml): CartPole-v1
with its two velocities set to zero (the zoo's MaskVelocityWrapper), `normalize: True`
(VecNormalize of observations and rewards, the reward's return discounted by the entry's
gamma 0.98, as the zoo's ExperimentManager passes it), 8 environments of 32 steps,
minibatches of 256, 20 epochs, lambda 0.8, no entropy bonus, learning rate and clip range
annealed linearly from 1e-3 and 0.2, and MlpLstmPolicy's default network (no
policy_kwargs in the entry). It stops when the mean of the last 20 training episode
returns first reaches 475 (the same rule as `ppo_lstm.py --hide-obs 1 3
--stop-at-return 475`), or after the zoo's 100k steps.
Not part of the project's requirements: run it in an environment with sb3-contrib,
    pip install stable-baselines3==2.9.2 sb3-contrib==2.9.2
    for seed in 1 2 3; do
        /usr/bin/time -f "%e s" python ppo_lstm.py --env-id CartPole-v1 --hide-obs 1 3 \\
            --stop-at-return 475 --seed $seed --no-cuda
        /usr/bin/time -f "%e s" python benchmarks/sb3_recurrent_cartpole_novel.py $seed
    done
It prints the environment step at which the threshold was reached (None if it was not);
time it from outside to compare whole-process wall-clock times, interleaved as above so
that both see the same load.
"""
import sys
from collections import deque

import gymnasium as gym
from sb3_contrib import RecurrentPPO
from stable_baselines3.common.callbacks import BaseCallback
from stable_baselines3.common.env_util import make_vec_env
from stable_baselines3.common.vec_env import VecNormalize


class ZeroVelocity(gym.ObservationWrapper):
    """CartPole's observation with the cart's and the pole's velocities (indices 1 and 3)
    set to zero, as rl-baselines3-zoo's CartPoleNoVel-v1 builds it."""

    def observation(self, observation):
        observation = observation.copy()
        observation[[1, 3]] = 0.0
        return observation


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
    env = make_vec_env("CartPole-v1", n_envs=8, seed=seed, wrapper_class=ZeroVelocity)
    env = VecNormalize(env, gamma=0.98)  # the zoo's `normalize: True`, with the entry's gamma
    # rl-baselines3-zoo, hyperparams/ppo_lstm.yml, CartPoleNoVel-v1
    model = RecurrentPPO(
        "MlpLstmPolicy", env, n_steps=32, batch_size=256, n_epochs=20, gamma=0.98,
        gae_lambda=0.8, ent_coef=0.0, learning_rate=linear(1e-3), clip_range=linear(0.2),
        seed=seed, device="cpu")
    callback = StopAtReturn()
    model.learn(100_000, callback=callback)
    print(f"sb3_recurrent_cartpole_novel.py: seed {seed}, solved_at_step {callback.solved_at}")

"""The side-by-side reference for ppo.py's CartPole goal: Stable-Baselines3's PPO with
rl-baselines3-zoo's tuned CartPole-v1 hyperparameters, stopped when the mean of the last 20
training episode returns first reaches 475 (the same rule as `ppo.py --stop-at-return 475`).

Not part of the project's requirements: run it in an environment with stable-baselines3,

    pip install stable-baselines3==2.9.2
    for seed in 1 2 3; do /usr/bin/time -f "%e s" python benchmarks/sb3_cartpole.py $seed; done

It prints the environment step at which the threshold was reached; time it from outside
to compare whole-process wall-clock times with `python ppo.py --stop-at-return 475`.
"""
import sys
from collections import deque

from stable_baselines3 import PPO
from stable_baselines3.common.callbacks import BaseCallback
from stable_baselines3.common.env_util import make_vec_env


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
    env = make_vec_env("CartPole-v1", n_envs=8, seed=seed)
    # rl-baselines3-zoo, hyperparams/ppo.yml, CartPole-v1
    model = PPO("MlpPolicy", env, n_steps=32, batch_size=256, gae_lambda=0.8, gamma=0.98,
                n_epochs=20, ent_coef=0.0, learning_rate=linear(1e-3), clip_range=linear(0.2),
                seed=seed, device="cpu")
    callback = StopAtReturn()
    model.learn(100_000, callback=callback)
    print(f"sb3_cartpole.py: seed {seed}, solved_at_step {callback.solved_at}")

"""The side-by-side reference for dqn.py's CartPole goal: Stable-Baselines3's DQN with
rl-baselines3-zoo's CartPole-v1 hyperparameters (hyperparams/dqn.yml: 50k steps), stopped
when the mean of the last 20 training episode returns first reaches 475 (the same rule as
`dqn.py --stop-at-return 475`) or at the zoo's 50k steps.

Not part of the project's requirements: run it in an environment with stable-baselines3,

    pip install stable-baselines3==2.9.2
    for seed in 1 2 3; do /usr/bin/time -f "%e s" python benchmarks/sb3_dqn_cartpole.py $seed; done

It prints the environment step at which the threshold was reached (None if it was not
within 50k steps); time it from outside to compare whole-process wall-clock times with
`python dqn.py --stop-at-return 475 --no-cuda`.
"""
import sys
from collections import deque

from stable_baselines3 import DQN
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


if __name__ == "__main__":
    seed = int(sys.argv[1]) if len(sys.argv) > 1 else 1
    env = make_vec_env("CartPole-v1", n_envs=1, seed=seed)
    # rl-baselines3-zoo, hyperparams/dqn.yml, CartPole-v1
    model = DQN("MlpPolicy", env, learning_rate=2.3e-3, batch_size=64, buffer_size=100_000,
                learning_starts=1000, gamma=0.99, target_update_interval=10, train_freq=256,
                gradient_steps=128, exploration_fraction=0.16, exploration_final_eps=0.04,
                policy_kwargs=dict(net_arch=[256, 256]), seed=seed, device="cpu")
    callback = StopAtReturn()
    model.learn(50_000, callback=callback)
    print(f"sb3_dqn_cartpole.py: seed {seed}, solved_at_step {callback.solved_at}, "
          f"steps {model.num_timesteps}")

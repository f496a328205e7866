"""The side-by-side reference for ddpg_td3.py's Pendulum goal: Stable-Baselines3's TD3 with
rl-baselines3-zoo's tuned Pendulum-v1 hyperparameters (hyperparams/td3.yml: gamma 0.98,
buffer 200k, 10k random steps, Gaussian noise 0.1, one gradient step per step, learning rate
1e-3, 400-300 networks), trained for the zoo's 20,000 steps.
It reports the step at which the mean of the last 10 training episode returns first
reached -200 (the rule benchmark.py applies to `ddpg_td3.py`) and the mean greedy return
of 10 evaluation episodes after training (ddpg_td3.py's eval_return_mean).

Not part of the project's requirements: run it in an environment with stable-baselines3,

    pip install stable-baselines3==2.9.2
    for seed in 1 2 3; do /usr/bin/time -f "%e s" python benchmarks/sb3_td3_pendulum.py $seed; done

Time it from outside to compare whole-process wall-clock times with
`python ddpg_td3.py --env-id Pendulum-v1 --no-cuda` (the defaults: 15,000 steps and a
10-episode evaluation).
"""
import sys
from collections import deque

import numpy as np
from stable_baselines3 import TD3
from stable_baselines3.common.callbacks import BaseCallback
from stable_baselines3.common.env_util import make_vec_env
from stable_baselines3.common.evaluation import evaluate_policy
from stable_baselines3.common.noise import NormalActionNoise


class FirstReach(BaseCallback):
    """Record the step at which the mean of the last `window` finished episodes first
    reaches `threshold`; training goes on (the zoo's budget is part of the comparison)."""

    def __init__(self, threshold=-200.0, window=10):
        super().__init__()
        self.threshold, self.returns, self.reached_at = threshold, deque(maxlen=window), None

    def _on_step(self):
        for info in self.locals["infos"]:
            if "episode" in info:  # added by the Monitor wrapper when an episode ends
                self.returns.append(info["episode"]["r"])
        if (self.reached_at is None and len(self.returns) == self.returns.maxlen
                and np.mean(self.returns) >= self.threshold):
            self.reached_at = self.num_timesteps
        return True


if __name__ == "__main__":
    seed = int(sys.argv[1]) if len(sys.argv) > 1 else 1
    env = make_vec_env("Pendulum-v1", n_envs=1, seed=seed)
    # rl-baselines3-zoo, hyperparams/td3.yml, Pendulum-v1 (SB3's TD3 defaults otherwise:
    # batch 256, tau 0.005, policy delay 2, target noise 0.2 clipped to 0.5)
    model = TD3("MlpPolicy", env, gamma=0.98, buffer_size=200_000, learning_starts=10_000,
                action_noise=NormalActionNoise(np.zeros(1), 0.1 * np.ones(1)),
                gradient_steps=1, train_freq=1, learning_rate=1e-3,
                policy_kwargs=dict(net_arch=[400, 300]), seed=seed, device="cpu")
    callback = FirstReach()
    model.learn(20_000, callback=callback)
    eval_env = make_vec_env("Pendulum-v1", n_envs=1, seed=seed + 100_000)
    mean, std = evaluate_policy(model, eval_env, n_eval_episodes=10, deterministic=True)
    print(f"sb3_td3_pendulum.py: seed {seed}, reached -200 (10-episode mean) at step "
          f"{callback.reached_at}, eval_return_mean {mean:.1f} +- {std:.1f}")

"""The side-by-side reference for sac.py's Pendulum goal: Stable-Baselines3's SAC with
rl-baselines3-zoo's Pendulum-v1 hyperparameters (hyperparams/sac.yml: learning rate 1e-3,
20k steps, everything else SB3's defaults: 256x256 networks, batch 256, buffer 1M, 100
random steps, gamma 0.99, tau 0.005, one gradient step per step, ent_coef "auto").

Not part of the project's requirements: run it in an environment with stable-baselines3,

    pip install stable-baselines3==2.9.2
    for seed in 1 2 3; do /usr/bin/time -f "%e s" python benchmarks/sb3_sac_pendulum.py $seed; done
    python benchmarks/sb3_sac_pendulum.py 1 10000     # a budget other than rl-zoo's 20k

It prints the environment step (and the seconds of training) at which the mean of the last
20 training episode returns first reached -200 (the rule of benchmark.py's sac task), and the
mean greedy (deterministic) return of 10 evaluation episodes after training; time it from
outside to compare whole-process wall-clock times with `python sac.py`.
"""
import sys
import time
from collections import deque

from stable_baselines3 import SAC
from stable_baselines3.common.callbacks import BaseCallback
from stable_baselines3.common.env_util import make_vec_env
from stable_baselines3.common.evaluation import evaluate_policy


class FirstReach(BaseCallback):
    """Record when the mean of the last 20 finished episodes first reaches `threshold`;
    training goes on to the end of the budget."""

    def __init__(self, threshold=-200.0):
        super().__init__()
        self.threshold, self.returns = threshold, deque(maxlen=20)
        self.start, self.solved_at, self.solved_s = time.time(), None, None

    def _on_step(self):
        for info in self.locals["infos"]:
            if "episode" in info:  # added by the Monitor wrapper when an episode ends
                self.returns.append(info["episode"]["r"])
        if (self.solved_at is None and len(self.returns) == 20
                and sum(self.returns) / 20 >= self.threshold):
            self.solved_at, self.solved_s = self.num_timesteps, round(time.time() - self.start, 1)
        return True


if __name__ == "__main__":
    seed = int(sys.argv[1]) if len(sys.argv) > 1 else 1
    total_timesteps = int(sys.argv[2]) if len(sys.argv) > 2 else 20_000
    env = make_vec_env("Pendulum-v1", n_envs=1, seed=seed)
    # rl-baselines3-zoo, hyperparams/sac.yml, Pendulum-v1
    model = SAC("MlpPolicy", env, learning_rate=1e-3, seed=seed, device="cpu")
    callback = FirstReach()
    model.learn(total_timesteps, callback=callback)
    eval_env = make_vec_env("Pendulum-v1", n_envs=1, seed=seed + 100_000)
    mean, std = evaluate_policy(model, eval_env, n_eval_episodes=10, deterministic=True)
    print(f"sb3_sac_pendulum.py: seed {seed}, solved_at_step {callback.solved_at}, "
          f"solved_at_time_s {callback.solved_s}, eval_return_mean {mean:.1f} +- {std:.1f}")

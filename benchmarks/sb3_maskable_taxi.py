"""The side-by-side reference for ppo_masked.py's Taxi goal: sb3-contrib's MaskablePPO with
the same hyperparameters as `python ppo_masked.py` (rl-baselines3-zoo has no tuned
MaskablePPO entry for Taxi, so its defaults are written here the way a zoo entry would:
32 environments of 64 steps, minibatches of 512, 4 epochs, linear learning rate from 7e-3,
gamma 0.97, lambda 0.95, clip 0.2, entropy 0.05, value 0.5, gradient norm 0.5, separate
64-64 tanh actor and critic, one torch thread). The masks come from Taxi's own
`action_mask(state)`, the mask Taxi puts in info["action_mask"]. It stops when the mean of
the last 100 training episode returns first reaches 7.5 (the same rule as
`ppo_masked.py --stop-at-return 7.5 --stop-window 100`).

Not part of the project's requirements: run it in an environment with sb3-contrib,

    pip install sb3-contrib==2.9.2
    for seed in 1 2 3; do
        /usr/bin/time -f "%e s" python ppo_masked.py --seed $seed --no-cuda \\
            --stop-at-return 7.5 --stop-window 100
        /usr/bin/time -f "%e s" python benchmarks/sb3_maskable_taxi.py $seed
    done

It prints the environment step at which the threshold was reached; time it from outside
to compare whole-process wall-clock times with ppo_masked.py, interleaved as above so that
both see the same load.
"""
import sys
from collections import deque

import torch
from sb3_contrib import MaskablePPO
from sb3_contrib.common.wrappers import ActionMasker
from stable_baselines3.common.callbacks import BaseCallback
from stable_baselines3.common.env_util import make_vec_env


class StopAtReturn(BaseCallback):
    """Stop training once the mean of the last `window` finished episodes reaches
    `threshold`."""

    def __init__(self, threshold=7.5, window=100):
        super().__init__()
        self.threshold, self.returns, self.solved_at = threshold, deque(maxlen=window), None

    def _on_step(self):
        for info in self.locals["infos"]:
            if "episode" in info:  # added by the Monitor wrapper when an episode ends
                self.returns.append(info["episode"]["r"])
        full = len(self.returns) == self.returns.maxlen
        if full and sum(self.returns) / len(self.returns) >= self.threshold:
            self.solved_at = self.num_timesteps
            return False
        return True


def taxi_mask(env):
    """The allowed actions in Taxi's current state, as Taxi itself computes them."""
    return env.unwrapped.action_mask(env.unwrapped.s)


def linear(start):
    return lambda progress_remaining: progress_remaining * start


if __name__ == "__main__":
    seed = int(sys.argv[1]) if len(sys.argv) > 1 else 1
    torch.set_num_threads(1)
    env = make_vec_env("Taxi-v4", n_envs=32, seed=seed, wrapper_class=ActionMasker,
                       wrapper_kwargs={"action_mask_fn": taxi_mask})
    model = MaskablePPO("MlpPolicy", env, n_steps=64, batch_size=512, n_epochs=4,
                        learning_rate=linear(7e-3), gamma=0.97, gae_lambda=0.95,
                        clip_range=0.2, ent_coef=0.05, vf_coef=0.5, max_grad_norm=0.5,
                        policy_kwargs={"net_arch": {"pi": [64, 64], "vf": [64, 64]},
                                       "activation_fn": torch.nn.Tanh},
                        seed=seed, device="cpu")
    callback = StopAtReturn()
    model.learn(200_000, callback=callback)
    print(f"sb3_maskable_taxi.py: seed {seed}, solved_at_step {callback.solved_at}")

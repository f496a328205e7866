"""The side-by-side references for issue 37's MuJoCo goals: Stable-Baselines3's SAC and TD3
on HalfCheetah-v5 for 100k steps and its PPO on Hopper-v5 for 1M steps, each with
rl-baselines3-zoo's hyperparameters for the -v3 environment (v5 keeps v3's rewards):

    sac  hyperparams/sac.yml, mujoco-defaults: learning_starts 10000; the rest SB3's
         defaults (256-256 networks, batch 256, rate 3e-4, buffer 1M, gamma 0.99,
         tau 0.005, ent_coef "auto" from 1, one gradient step per step)
    td3  hyperparams/td3.yml, mujoco-defaults: learning_starts 10000, Gaussian action noise
         of std 0.1; the rest SB3's defaults (400-300 networks, batch 256, rate 1e-3,
         gamma 0.99, tau 0.005, policy delay 2, smoothing 0.2 clipped at 0.5)
    ppo  hyperparams/ppo.yml, Hopper-v3: VecNormalize (observations and rewards), one
         environment, n_steps 512, batch 32, 5 epochs, gamma 0.999, gae_lambda 0.99,
         rate 9.80828e-05, ent_coef 0.00229519, clip 0.2, max_grad_norm 0.7,
         vf_coef 0.835671, ReLU 256-256 actor and critic, log_std_init -2, no ortho_init

Not part of the project's requirements: run it in an environment with stable-baselines3,

    pip install stable-baselines3==2.9.2
    for seed in 101 102 103; do
        /usr/bin/time -f "%e s" python benchmarks/sb3_mujoco.py sac HalfCheetah-v5 $seed
    done
    python benchmarks/sb3_mujoco.py ppo Hopper-v5 101                 # 1M steps
    python benchmarks/sb3_mujoco.py td3 HalfCheetah-v5 101 20000      # a budget of your own

Every 10,000 steps (100,000 for ppo) it evaluates the deterministic policy on 10 episodes of
an environment of its own, as benchmark.py's tasks do (--eval-every), and prints a line
`eval <step> <seconds since the start> <mean return>`; the last line holds the final
evaluation. Time the whole process from outside to compare it with `python sac.py`;
benchmarks/sb3_mujoco_compare.py runs it beside benchmark.py's task on the same seed, times
both, and reports the two side by side.
"""
import sys
import time

import numpy as np
import torch
from stable_baselines3 import PPO, SAC, TD3
from stable_baselines3.common.callbacks import EvalCallback
from stable_baselines3.common.env_util import make_vec_env
from stable_baselines3.common.noise import NormalActionNoise
from stable_baselines3.common.vec_env import VecNormalize

START = time.time()

ZOO = {
    "sac": dict(learning_starts=10_000),
    "td3": dict(learning_starts=10_000),
    "ppo": dict(n_steps=512, batch_size=32, n_epochs=5, gamma=0.999, gae_lambda=0.99,
                learning_rate=9.80828e-05, ent_coef=0.00229519, clip_range=0.2,
                max_grad_norm=0.7, vf_coef=0.835671,
                policy_kwargs=dict(log_std_init=-2, ortho_init=False, activation_fn=torch.nn.ReLU,
                                   net_arch=dict(pi=[256, 256], vf=[256, 256]))),
}
BUDGET = {"sac": 100_000, "td3": 100_000, "ppo": 1_000_000}
EVAL_EVERY = {"sac": 10_000, "td3": 10_000, "ppo": 100_000}


class PrintedEval(EvalCallback):
    """SB3's EvalCallback (it syncs VecNormalize's statistics into the evaluation
    environment), with one line per evaluation."""

    def _on_step(self):
        evaluates = self.n_calls % self.eval_freq == 0  # as EvalCallback decides
        result = super()._on_step()
        if evaluates:
            print(f"eval {self.num_timesteps} {time.time() - START:.1f} {self.last_mean_reward:.1f}",
                  flush=True)
        return result


def main(algo, env_id, seed, budget):
    env = make_vec_env(env_id, n_envs=1, seed=seed)
    eval_env = make_vec_env(env_id, n_envs=1, seed=seed + 100_000)
    if algo == "ppo":  # the zoo's normalize: true (the reward's discount is the algorithm's)
        env = VecNormalize(env, gamma=ZOO["ppo"]["gamma"])
        eval_env = VecNormalize(eval_env, training=False, norm_reward=False)
    kwargs = dict(ZOO[algo])
    if algo == "td3":
        dims = env.action_space.shape[0]
        kwargs["action_noise"] = NormalActionNoise(mean=np.zeros(dims), sigma=np.full(dims, 0.1))
    model = {"sac": SAC, "td3": TD3, "ppo": PPO}[algo]("MlpPolicy", env, seed=seed, device="cpu",
                                                      **kwargs)
    callback = PrintedEval(eval_env, n_eval_episodes=10, eval_freq=EVAL_EVERY[algo],
                           deterministic=True, verbose=0)
    model.learn(total_timesteps=budget, callback=callback)
    if budget % EVAL_EVERY[algo]:  # the final policy, when the last evaluation was earlier
        callback.eval_freq = callback.n_calls
        callback._on_step()


if __name__ == "__main__":
    algo, env_id, seed = sys.argv[1], sys.argv[2], int(sys.argv[3])
    torch.set_num_threads(1)  # as the scripts here, so that two runs share two cores evenly
    main(algo, env_id, seed, int(sys.argv[4]) if len(sys.argv) > 4 else BUDGET[algo])

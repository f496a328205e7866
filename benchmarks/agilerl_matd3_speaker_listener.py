"""The side-by-side reference for matd3.py's simple_speaker_listener_v4 goal: AgileRL's MATD3
(agilerl 2.58.0) with the hyperparameters of AgileRL's own PettingZoo MATD3 tutorial
(tutorials/pettingzoo/matd3.py, docs "Speaker-Listener with MATD3"), on mpe2's
simple_speaker_listener_v4 with continuous actions and 25-step episodes (mpe2's and
matd3.py's default max_cycles).

What is AgileRL's and what is not:
- ONE agent, population size 1: the tutorial trains a population of 4 with tournament
  selection and mutations (evolutionary HPO) every 10,000 steps; here there is neither
  selection nor mutation, so the comparison is of one learner against one learner.
- The tutorial's hyperparameters: 8 copies in AgileRL's AsyncPettingZooVecEnv (one worker
  process per copy), batch 128, actor learning rate 1e-4, critic 1e-3, gamma 0.95, tau 0.01,
  policy delay 2, Ornstein-Uhlenbeck exploration noise (sigma 0.1, theta 0.15, dt 0.01),
  a 100,000-transition replay buffer, 64-unit encoder and head, learn_step 100 (one gradient
  step every 100 // 8 = 12 lock-steps, i.e. every 96 environment steps), no learning delay,
  a one-loop greedy test every 10,000 steps, as the tutorial's loop does between its
  evolution steps.
- `--num-envs 4 --learn-step 4` (not the tutorial's) gives the peer matd3.py's schedule: 4
  copies and one gradient step per lock-step of them, 25,000 over 100k steps (the tutorial's
  schedule takes 1,000; at 100k steps it has not learned, results.md), batch 128 still.
- vect_noise_dim = the number of copies (one OU process per copy), as AgileRL's own trainer
  sets it (arena manifest); the tutorial leaves it at 1, one noise shared by every copy.
- Seeding: Python, NumPy and torch get --seed, the copies reset with seed, seed+1, ...
  (AgileRL takes no seed itself).

Steps are counted as matd3.py counts them: one lock-step of one copy, every agent acting,
is one environment step, so a lock-step of the 8 copies is 8 steps (the tutorial counts the
same way). The returns written are per episode the mean per-agent return (the two agents
share one reward, so it is also each agent's return), as in matd3.py's episodes.csv; the
tutorial's score is the sum over the two agents, twice this.

Not part of the project's requirements: run it in a venv of its own that reuses the system
torch 2.13.0 (CPU). agilerl 2.58.0 pins pettingzoo<1.27 (the system has 1.27.0), so pip
refuses it with the system versions as constraints; installed without its dependencies,
beside agilerl-arena (also without), it imports once the rest of its requirements are there
(lazy-loader, tensordict 0.13.0, accelerate, dill, peft, ...: /work/brief/25-report.md has
the venv's whole list), with torch, numpy, gymnasium and pettingzoo kept at the system's:

    python -m venv --system-site-packages /work/venvs/agilerl
    /work/venvs/agilerl/bin/pip install --no-deps agilerl==2.58.0 agilerl-arena==1.29.0
    /work/venvs/agilerl/bin/pip install -c constraints.txt lazy-loader tensordict==0.13.0 \
        accelerate dill peft ...   (constraints.txt: torch==2.13.0 numpy==2.4.6 ...)
    OMP_NUM_THREADS=1 /usr/bin/time -f "%e s %U user %S sys" \
        /work/venvs/agilerl/bin/python benchmarks/agilerl_matd3_speaker_listener.py \
        --seed 101 --total-timesteps 100000 --out /work/runs/matd3sl/agilerl/seed101
    (and the same with --num-envs 4 --learn-step 4 --out /work/runs/matd3sl/agilerl-matched/seed101)

It writes <out>/episodes.csv (global_step, wall_time, episode_return, episode_length: the
columns of matd3.py's episodes.csv) and <out>/summary.json (global steps, wall and CPU
seconds of the whole process, the mean of the last 100 training episodes, the last test).
"""
import time

PROCESS_START = time.time()  # the whole process: imports, environment workers, training

import argparse
import csv
import json
import os
import random
import resource

import numpy as np
import torch
from mpe2 import simple_speaker_listener_v4

from agilerl.algorithms import MATD3
from agilerl.components.data import MultiAgentTransition
from agilerl.components.replay_buffer import ReplayBuffer
from agilerl.utils.utils import make_multi_agent_vect_envs


def parse():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--total-timesteps", type=int, default=100_000)
    p.add_argument("--num-envs", type=int, default=8, help="the tutorial's 8 copies")
    p.add_argument("--learn-step", type=int, default=100,
                   help="environment steps per gradient step (the tutorial's 100)")
    p.add_argument("--max-cycles", type=int, default=25)
    p.add_argument("--out", default="runs/agilerl_matd3")
    return p.parse_args()


def main(args):
    random.seed(args.seed)
    np.random.seed(args.seed)
    torch.manual_seed(args.seed)
    num_envs = args.num_envs

    def make_env():
        return simple_speaker_listener_v4.parallel_env(continuous_actions=True,
                                                       max_cycles=args.max_cycles)

    env = make_multi_agent_vect_envs(env=make_env, num_envs=num_envs)
    agent_ids = list(env.agents)
    agent = MATD3(
        observation_spaces=[env.single_observation_space(a) for a in agent_ids],
        action_spaces=[env.single_action_space(a) for a in agent_ids],
        agent_ids=agent_ids,
        # the tutorial's network and hyperparameters (see the docstring)
        net_config={"latent_dim": 64, "encoder_config": {"hidden_size": [64]},
                    "head_config": {"hidden_size": [64]}},
        O_U_noise=True, expl_noise=0.1, mean_noise=0.0, theta=0.15, dt=0.01,
        vect_noise_dim=num_envs, batch_size=128, lr_actor=1e-4, lr_critic=1e-3, gamma=0.95,
        learn_step=args.learn_step, tau=0.01, policy_freq=2, device="cpu",
    )
    memory = ReplayBuffer(max_size=100_000, device="cpu")
    evo_steps, learning_delay = 10_000, 0  # the tutorial's loop: test every evo_steps

    os.makedirs(args.out, exist_ok=True)
    episodes_file = open(os.path.join(args.out, "episodes.csv"), "w", newline="")
    writer = csv.writer(episodes_file)
    writer.writerow(["global_step", "wall_time", "episode_return", "episode_length"])
    returns, tests = [], []
    global_step, first_reset = 0, True
    train_start = time.time()
    while global_step < args.total_timesteps:
        agent.set_training_mode(True)
        # the tutorial resets the copies at the start of each block of evo_steps (10,000 /
        # 8 = 1,250 lock-steps = 50 whole episodes per copy, so no episode is cut)
        obs, info = env.reset(seed=args.seed if first_reset else None)
        first_reset = False
        scores, lengths = np.zeros(num_envs), np.zeros(num_envs, dtype=int)
        for idx_step in range(min(evo_steps, args.total_timesteps - global_step) // num_envs):
            action, raw_action = agent.get_action(obs=obs, infos=info)
            next_obs, reward, termination, truncation, info = env.step(action)
            scores += np.array(list(reward.values())).transpose().sum(axis=-1)
            lengths += 1
            global_step += num_envs

            transition = MultiAgentTransition(obs=obs, action=raw_action, reward=reward,
                                              next_obs=next_obs, done=termination)
            transition = transition.to_tensordict()
            transition.batch_size = [num_envs]
            memory.add(transition)

            # the tutorial's learning schedule: learn_step environment steps per update
            if agent.learn_step > num_envs:
                if (idx_step % (agent.learn_step // num_envs) == 0
                        and len(memory) >= agent.batch_size and memory.counter > learning_delay):
                    agent.learn(memory.sample(agent.batch_size))
            elif len(memory) >= agent.batch_size and memory.counter > learning_delay:
                for _ in range(num_envs // agent.learn_step):
                    agent.learn(memory.sample(agent.batch_size))
            obs = next_obs

            # finished episodes: the mean per-agent return, noise reset for those copies
            ended = (np.array(list(termination.values())).transpose().any(axis=-1)
                     | np.array(list(truncation.values())).transpose().any(axis=-1))
            now = time.time() - train_start
            for idx in np.flatnonzero(ended):
                returns.append(scores[idx] / len(agent_ids))
                writer.writerow([global_step, f"{now:.3f}", f"{returns[-1]:.4f}", lengths[idx]])
                scores[idx], lengths[idx] = 0, 0
            agent.reset_action_noise(list(np.flatnonzero(ended)))
        # the tutorial's test between evolution steps: one loop of greedy episodes, one per copy
        tests.append(float(agent.test(env, max_steps=None, loop=1)) / len(agent_ids))
        print(f"agilerl_matd3: step {global_step}, last 100 episodes "
              f"{np.mean(returns[-100:]):.2f}, test {tests[-1]:.2f}", flush=True)
    env.close()
    episodes_file.close()
    usage = [resource.getrusage(who) for who in (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN)]
    summary = {"algorithm": "AgileRL MATD3 (population 1, no HPO)",
               "env_id": "simple_speaker_listener_v4", "seed": args.seed,
               "num_envs": num_envs, "learn_step": args.learn_step, "global_steps": global_step,
               "train_return_last100": float(np.mean(returns[-100:])),
               "test_return_last": tests[-1], "episodes": len(returns),
               "process_wall_s": round(time.time() - PROCESS_START, 2),
               "process_cpu_s": round(sum(u.ru_utime + u.ru_stime for u in usage), 2)}
    with open(os.path.join(args.out, "summary.json"), "w") as f:
        json.dump(summary, f, indent=1)
    print(json.dumps(summary))


if __name__ == "__main__":
    main(parse())

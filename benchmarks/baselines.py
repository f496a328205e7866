"""What doing nothing and acting at random score on each environment of results.json, so that
the results tables show what was learned (zero actions score about 994 on Ant-v5, all of it
the healthy reward).

    python benchmarks/baselines.py          # writes benchmarks/baselines.json (a minute or two)

For each environment: the mean and standard deviation of the return of 10 episodes, seeds
101-110 (`env.reset(seed=...)`), of two policies that learn nothing:

- "zero": the same action at every step: action 0 of a Discrete space (CartPole's push left,
  MountainCar's push left, Taxi's move south, MinAtar's no-op), zeros of a Box clipped to its
  bounds (no torque on MuJoCo, Pendulum's 0);
- "random": uniform random actions, `action_space.sample()` seeded with the episode's seed.

An episode that has not ended after 27,000 steps (ALE's and the scripts' evaluation bound)
counts with its return so far. The environments are made as the scripts make them for
evaluation: `gym.make(env_id)`, `module:EnvId` importing its module, MinAtar's ids after
`minatar.gym.register_envs()`. The multi-agent MPE ids (simple_spread_v3,
simple_speaker_listener_v4) are left out: mappo.py's and matd3.py's tables measure a mean
per-agent return of discrete and continuous variants that a single number here would not
match. So are grpo.py's text tasks (Addition-v0, AdditionPartial-v0) and rlhf.py's
(Preference-v0): their action is a string of tokens, with no zero action, and a run's own
baseline is its warm start (grpo.py's held-out accuracy, rlhf.py's greedy gold score:
held_out.csv's row at step 0, summary.json's start_return).
"""
import importlib
import json
import os
import sys
import time

import gymnasium as gym
import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
SEEDS = range(101, 111)
MAX_STEPS = 27_000
SKIPPED = ("simple_", "Addition", "Preference")  # MPE's ids, grpo.py's and rlhf.py's text tasks


def make(env_id):
    """gym.make as the scripts call it for an id of results.json."""
    if env_id.startswith("MinAtar/") and env_id not in gym.registry:
        importlib.import_module("minatar.gym").register_envs()
    if ":" in env_id:
        if ROOT not in sys.path:
            sys.path.insert(0, ROOT)
        module, env_id = env_id.split(":")
        importlib.import_module(module)
    return gym.make(env_id)


def zero_action(space):
    """The action that does nothing, or the first: 0 of a Discrete, zeros clipped to a Box."""
    if isinstance(space, gym.spaces.Discrete):
        return space.start
    if isinstance(space, gym.spaces.Box):
        return np.clip(np.zeros(space.shape, dtype=space.dtype), space.low, space.high)
    raise TypeError(f"no zero action for {space}")


def episode_return(env, seed, policy):
    """The return of one episode from env.reset(seed=seed), acting with policy(space)."""
    env.reset(seed=seed)
    env.action_space.seed(seed)
    total = 0.0
    for _ in range(MAX_STEPS):
        _, reward, terminated, truncated, _ = env.step(policy(env.action_space))
        total += float(reward)
        if terminated or truncated:
            break
    return total


def measure(env_id):
    """{"zero": {...}, "random": {...}} of one environment: the mean and std of 10 returns."""
    env = make(env_id)
    found = {}
    for name, policy in (("zero", zero_action), ("random", lambda space: space.sample())):
        returns = [episode_return(env, seed, policy) for seed in SEEDS]
        found[name] = {"mean": round(float(np.mean(returns)), 3),
                       "std": round(float(np.std(returns)), 3)}
    env.close()
    return found


def main():
    with open(os.path.join(HERE, "results.json")) as f:
        env_ids = sorted({r["env_id"] for r in json.load(f).values()})
    baselines = {"episodes": len(SEEDS), "seeds": f"{SEEDS[0]}-{SEEDS[-1]}",
                 "skipped": [e for e in env_ids if e.startswith(SKIPPED)], "envs": {}}
    for env_id in env_ids:
        if env_id.startswith(SKIPPED):
            continue
        start = time.time()
        baselines["envs"][env_id] = measure(env_id)
        print(f"{env_id:42} zero {baselines['envs'][env_id]['zero']['mean']:>10.2f}   "
              f"random {baselines['envs'][env_id]['random']['mean']:>10.2f}   "
              f"({time.time() - start:.1f} s)", flush=True)
    with open(os.path.join(HERE, "baselines.json"), "w") as f:
        json.dump(baselines, f, indent=1)
        f.write("\n")


if __name__ == "__main__":
    main()

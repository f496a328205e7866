"""The reference curves drawn beside ddpg_td3.py: the evaluation returns that the TD3 paper's
authors publish for TD3 (Fujimoto, van Hoof and Meger, "Addressing Function Approximation Error
in Actor-Critic Methods", ICML 2018), in github.com/sfujim/TD3, folder learning_curves/.

Each file <Folder>/TD3_<Env>-v1_<seed>.npy (seeds 0-9; the folder of Walker2d-v1 is Walker)
is a NumPy array of 201 evaluations: entry i is the average return of 10 episodes of the policy
without exploration noise after 5,000 x i environment steps, from entry 0 (the untrained
policy, which the paper's figures leave out) to entry 200 (1,000,000 steps), on Gym's v1
MuJoCo tasks (ours run Gymnasium's v5). That is the repository's README and its main.py as of
the paper: main.py evaluates once at the start, then at the first episode end at or after each
multiple of 5,000 steps (at most one episode, 1,000 steps, later; the paper and this file put
it at the multiple), and once more at 1,000,000. The paper's Table 1 ("max average return
over 10 trials of 1 million time steps": HalfCheetah 9,636.95, Hopper 3,564.07, Walker2d
4,682.82) is the highest point of the mean over the 10 seeds of these curves, and the goals
of benchmark.py's MUJOCO_GOALS at 100k and 300k are that mean at those steps.

The folder holds TD3's curves only: the paper's DDPG and "Our DDPG" curves (ddpg_td3.py's
--algo ddpg follows "Our DDPG", OurDDPG.py) are not published there, so this file has none.

This tool cuts the curves of Hopper, HalfCheetah and Walker2d up to 1,000,000 steps and
writes, at every step, the median, min, max and mean over the seeds whose files are there
into benchmarks/references/td3-paper.json, with the source named. Nothing of the TD3
repository is kept here but those numbers. The learning curves last changed in the commit
bc98e6260e4e35e1a2afc1c78b6925251dd0a1e9 ("Camera-ready cleanup", June 2018); the commit
below is the repository's newest, with the same files:

    git clone https://github.com/sfujim/TD3 /tmp/TD3
    git -C /tmp/TD3 checkout 34770ccdcb51df6f6c7d85c1ba7e40d71b940d16
    python benchmarks/td3_reference.py /tmp/TD3/learning_curves
"""
import argparse
import json
import os
import sys

import numpy as np

COMMIT = "34770ccdcb51df6f6c7d85c1ba7e40d71b940d16"
SOURCE = "https://github.com/sfujim/TD3"
FOLDERS = {"Hopper-v1": "Hopper", "HalfCheetah-v1": "HalfCheetah", "Walker2d-v1": "Walker"}
"""the environment id -> its folder in TD3's learning_curves"""
SEEDS = range(10)
EVAL_EVERY = 5_000
"""entry i of a file is the evaluation after EVAL_EVERY * i environment steps"""
UP_TO = 1_000_000
"""the last environment step kept (the files end there)"""
OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "references", "td3-paper.json")


def seed_file(env_id, seed):
    """The path of one seed's curve inside learning_curves."""
    return os.path.join(FOLDERS[env_id], f"TD3_{env_id}_{seed}.npy")


def seed_statistics(curves, up_to=UP_TO):
    """The median, min, max and mean over seeds at each step 0, EVAL_EVERY, 2 * EVAL_EVERY,
    ... <= up_to that every seed reached (a longer curve is cut to the shortest, so each point
    is over all seeds). curves: {seed: 1-D array of evaluations, entry i at EVAL_EVERY * i}.
    Returns {"steps", "median", "low", "high", "mean", "seeds"}."""
    length = min(min(len(curve) for curve in curves.values()), up_to // EVAL_EVERY + 1)
    values = np.array([curves[seed][:length] for seed in sorted(curves)]).T  # (steps, seeds)
    return {"steps": [EVAL_EVERY * i for i in range(length)],
            "median": np.median(values, axis=1).round(1).tolist(),
            "low": values.min(axis=1).round(1).tolist(),
            "high": values.max(axis=1).round(1).tolist(),
            "mean": values.mean(axis=1).round(1).tolist(), "seeds": len(curves)}


def load_curves(folder, env_id):
    """{seed: its evaluations} for every seed of env_id whose file is in folder."""
    curves = {}
    for seed in SEEDS:
        path = os.path.join(folder, seed_file(env_id, seed))
        if os.path.exists(path):
            curve = np.load(path, allow_pickle=False)
            if curve.ndim != 1 or len(curve) == 0:
                raise ValueError(f"{path} holds an array of shape {curve.shape}, not a curve")
            curves[seed] = curve.astype(float)
    return curves


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("learning_curves", help="TD3's learning_curves folder, at the commit "
                                                "above")
    parser.add_argument("--out", default=OUT, help="the JSON file written")
    args = parser.parse_args(argv)
    curves = {env_id: load_curves(args.learning_curves, env_id) for env_id in FOLDERS}
    missing = [seed_file(env_id, "<seed>") for env_id, seeds in curves.items() if not seeds]
    if missing:
        parser.exit(2, f"td3_reference.py: {args.learning_curves} has no {', '.join(missing)}; "
                       "give TD3's learning_curves folder\n")
    stats = {env_id: seed_statistics(seeds) for env_id, seeds in curves.items()}
    os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
    with open(args.out, "w") as f:
        json.dump({"source": SOURCE, "commit": COMMIT,
                   "files": {"TD3": {env_id: "learning_curves/" + seed_file(env_id, "<seed>")
                                     for env_id in FOLDERS}},
                   "measure": "average return of 10 evaluation episodes without exploration "
                              f"noise, entry i at step {EVAL_EVERY:,} x i (step 0: the "
                              "untrained policy), Gym v1, over every seed file present",
                   "curves": {"TD3": stats}}, f, indent=1)
    for env_id, c in stats.items():
        at = ", ".join(f"{c['mean'][s // EVAL_EVERY]:,.0f} at {s:,}"
                       for s in (100_000, 300_000, c["steps"][-1]) if s <= c["steps"][-1])
        print(f"TD3 {env_id}: mean of {c['seeds']} seeds {at}; highest mean "
              f"{max(c['mean']):,.0f} (Table 1)")
    return 0


if __name__ == "__main__":
    sys.exit(main())

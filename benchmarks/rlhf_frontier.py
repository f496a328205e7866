"""rlhf.py's reward over-optimization and its reward-against-KL frontier, measured:

    ppo-beta<B>   python rlhf.py --seed S --beta B                (PPO from the reward model)
    dpo-beta<B>   python rlhf.py --seed S --algo dpo --beta B  (DPO at its default rate: one
                  seed's runs share its warm start, its pairs and its reward model, all made
                  from the seed alone, so DPO learns from the pairs PPO's reward model did)

Every run takes BUDGET completions (4 times the default's) and writes held_out.csv on rlhf.py's
schedule: the reward model's score (the proxy), the gold score and the KL to the warm start on
200 held-out prompts, 4 samples each.

    python benchmarks/rlhf_frontier.py run --seeds 101 102 --ppo-betas 0 0.005 0.02 0.05 0.1 0.2 \
        --dpo-betas 0.05 0.2 1 --out DIR
    python benchmarks/rlhf_frontier.py report --out DIR     (the table; the figures
        benchmarks/rlhf-Preference-v0-gao.png, proxy and gold against sqrt KL at the smallest
        and at the default beta (Gao et al. 2023, figure 1), and
        benchmarks/rlhf-Preference-v0-frontier.png, gold against KL for every arm (Rafailov et
        al. 2023, figure 2))

    python benchmarks/rlhf_frontier.py answers --runs RUN [RUN ...]   (held-out prompts and the
        greedy completions of the warm start and of each run's model.pt: runs with --save-model)

--jobs N runs N runs at once (one thread each). results.md's notes, "rlhf.py", hold the tables.
"""
import argparse
import concurrent.futures
import csv
import glob
import json
import math
import os
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
DEFAULT_BETA = 0.1  # rlhf.py's --beta
BUDGET = 40_960  # 4 times the default's: at beta 0 the gold score peaked by 10,240 and was
# below its start by 40,960 on tuning seeds 1-2 (results.md, "rlhf.py")


def arm_dir(out, arm, seed):
    """Where an arm's run of a seed goes: out/runs/<arm>/seed<S>/."""
    return os.path.join(out, "runs", arm, f"seed{seed}")


def run_arm(out, arm, seed, flags):
    """An rlhf.py run of the arm (its console in out/logs); returns its seconds."""
    os.makedirs(os.path.join(out, "logs"), exist_ok=True)
    command = [sys.executable, os.path.join(ROOT, "rlhf.py"), "--seed", str(seed), "--no-cuda",
               "--total-timesteps", str(BUDGET), "--save-model",  # model.pt for `answers`
               "--output-dir", arm_dir(out, arm, seed), *flags]
    with open(os.path.join(out, "logs", f"{arm}-{seed}.log"), "w") as log:
        start = time.time()
        subprocess.run(command, stdout=log, stderr=subprocess.STDOUT, check=True, cwd=ROOT)
    seconds = time.time() - start
    print(f"{arm} seed {seed}: {seconds:.0f} s (load {os.getloadavg()[0]:.1f})", flush=True)
    return seconds


def arms(ppo_betas, dpo_betas):
    """arm name -> rlhf.py's flags."""
    named = {f"ppo-beta{b:g}": ["--beta", f"{b:g}"] for b in ppo_betas}
    named.update({f"dpo-beta{b:g}": ["--algo", "dpo", "--beta", f"{b:g}"]
                  for b in dpo_betas})
    return named


def read_held_out(out, arm, seed):
    """The arm's held_out.csv rows for the seed (floats), [] before it ran."""
    found = sorted(glob.glob(os.path.join(arm_dir(out, arm, seed), "*__*", "held_out.csv")))
    return [{k: float(v) for k, v in row.items()} for row in csv.DictReader(open(found[-1]))] if found else []


def read_summary(out, arm, seed):
    found = sorted(glob.glob(os.path.join(arm_dir(out, arm, seed), "*__*", "summary.json")))
    return json.load(open(found[-1])) if found else None


def report(out, figures):
    """The table (stdout, markdown) and the two figures from out's runs."""
    named = sorted({os.path.basename(p) for p in glob.glob(os.path.join(out, "runs", "*"))},
                   key=lambda a: (a.split("-")[0] != "ppo", float(a.split("beta")[1])))
    seeds = sorted({int(os.path.basename(p)[4:]) for p in glob.glob(os.path.join(out, "runs", "*", "seed*"))})
    print(f"seeds {', '.join(map(str, seeds))}; {BUDGET:,} completions a run; rlhf.py's "
          "held-out schedule; medians over seeds [min, max]\n")
    print("| arm | start gold | peak gold (at KL) | end gold | end proxy | end KL | greedy gain |")
    print("| --- | --- | --- | --- | --- | --- | --- |")
    curves = {}
    for arm in named:
        runs = {s: read_held_out(out, arm, s) for s in seeds}
        runs = {s: r for s, r in runs.items() if r}
        curves[arm] = runs
        if not runs:
            continue
        peaks = [max(r, key=lambda row: row["gold_score"]) for r in runs.values()]
        gains = [s["end_return"] for s in (read_summary(out, arm, seed) for seed in runs) if s
                 and s["end_return"] is not None]

        def cell(values, fmt="{:+.2f}"):
            return (fmt.format(statistics.median(values)) + " [" + fmt.format(min(values)) + ", "
                    + fmt.format(max(values)) + "]") if values else "n/a"
        print(f"| {arm} | {cell([r[0]['gold_score'] for r in runs.values()])} "
              f"| {cell([p['gold_score'] for p in peaks])} (KL {statistics.median(p['kl_to_reference'] for p in peaks):.1f}) "
              f"| {cell([r[-1]['gold_score'] for r in runs.values()])} "
              f"| {cell([r[-1]['proxy_score'] for r in runs.values()])} "
              f"| {cell([r[-1]['kl_to_reference'] for r in runs.values()], '{:.1f}')} "
              f"| {cell(gains)} |")
    draw(curves, figures)


def draw(curves, figures):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    ppo = [a for a in curves if a.startswith("ppo") and curves[a]]
    betas = sorted(float(a.split("beta")[1]) for a in ppo)
    if betas:
        shown = [betas[0]] + ([DEFAULT_BETA] if DEFAULT_BETA in betas and betas[0] != DEFAULT_BETA else [])
        fig, axes = plt.subplots(1, len(shown), figsize=(5.2 * len(shown), 4), sharey=True, squeeze=False)
        for ax, beta in zip(axes[0], shown):
            for seed, rows in curves[f"ppo-beta{beta:g}"].items():
                x = [math.sqrt(max(r["kl_to_reference"], 0)) for r in rows]
                ax.plot(x, [r["proxy_score"] for r in rows], "--", color="C0", alpha=0.7,
                        label="reward model's score (proxy)" if seed == min(curves[f"ppo-beta{beta:g}"]) else None)
                ax.plot(x, [r["gold_score"] for r in rows], "-", color="C1", alpha=0.9,
                        label="gold score" if seed == min(curves[f"ppo-beta{beta:g}"]) else None)
            which = "the default" if beta == DEFAULT_BETA else "small"
            ax.set(title=f"PPO at beta {beta:g} ({which}), one line a seed",
                   xlabel="sqrt KL(pi || pi_ref), nats^(1/2)")
            ax.grid(alpha=0.3)
            ax.legend(fontsize="small", loc="lower right")
        axes[0][0].set_ylabel("score on held-out prompts (sampled)")
        fig.suptitle("rlhf.py on Preference-v0: the proxy keeps rising, the gold score does not")
        fig.tight_layout()
        fig.savefig(os.path.join(figures, "rlhf-Preference-v0-gao.png"), dpi=100)
        plt.close(fig)
    fig, ax = plt.subplots(figsize=(8, 4.5))
    for i, arm in enumerate(a for a in curves if curves[a]):
        marker = "o" if arm.startswith("ppo") else "^"
        xs, ys = [], []
        for rows in curves[arm].values():
            xs += [r["kl_to_reference"] for r in rows[1:]]
            ys += [r["gold_score"] for r in rows[1:]]
        ax.scatter(xs, ys, s=12, marker=marker, color=f"C{i}", alpha=0.7,
                   label=arm.replace("-beta", ", beta "))
    ax.set(xlabel="KL(pi || pi_ref) per completion, nats (sampled)", ylabel="gold score (sampled)",
           title="rlhf.py on Preference-v0: the gold score against the KL, each held-out row")
    ax.grid(alpha=0.3)
    ax.legend(fontsize="small")
    fig.tight_layout()
    fig.savefig(os.path.join(figures, "rlhf-Preference-v0-frontier.png"), dpi=100)
    plt.close(fig)


def answers(runs, count):
    """"The model answering": the first `count` held-out prompts (the evaluation's, seed +
    100,000; one posed twice is shown once) and the greedy completion of the warm start (the first run's warm_start.pt) and
    of each run's model.pt (rlhf.py --save-model), each with its gold score and its words
    that the grammar forbids in brackets, as a Markdown table."""
    sys.path.insert(0, ROOT)
    import torch
    import rlhf
    rlhf.register_tasks()
    models = []
    for i, folder in enumerate(runs):
        config = json.load(open(os.path.join(folder, "config.json")))
        args = rlhf.Args(**{k: v for k, v in config.items() if k in rlhf.Args.__dataclass_fields__})
        tokenizer, prompt_len = rlhf.check_spaces(args, *rlhf.check_env(args))
        for name in (["warm_start.pt"] if i == 0 else []) + ["model.pt"]:
            policy = rlhf.make_policy(args, tokenizer, prompt_len)
            policy.load_state_dict(torch.load(os.path.join(folder, name), weights_only=True)["policy"])
            label = "warm start" if name == "warm_start.pt" else f"beta {args.beta:g}, {args.algo}"
            models.append((label, policy.eval()))
    envs = rlhf.make_vector_env(args.env_id, count)
    prompts, _ = envs.reset(seed=args.seed + 100_000)
    envs.close()
    prompts = tuple(dict.fromkeys(prompts))  # a prompt the evaluation poses twice, once
    print("| prompt | " + " | ".join(label for label, _ in models) + " |")
    print("| --- |" + " --- |" * len(models))
    for prompt, *texts in zip(prompts, *(rlhf.greedy_policy({"policy": p}, None)(prompts, {})
                                         for _, p in models)):
        def shown(text):
            words = prompt.split()[-1:] + text.split()
            marked = " ".join(f"[{b}]" if b not in rlhf.SUCCESSORS.get(a, ()) else b
                              for a, b in zip(words, words[1:]))
            return f"`{marked or '(empty)'}` ({rlhf.gold_score(prompt, text):+.2f})"
        print(f"| `{prompt}` | " + " | ".join(shown(t) for t in texts) + " |")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    run = sub.add_parser("run")
    run.add_argument("--seeds", type=int, nargs="+", required=True)
    run.add_argument("--ppo-betas", type=float, nargs="*", default=[0, 0.005, 0.02, 0.05, 0.1, 0.2])
    run.add_argument("--dpo-betas", type=float, nargs="*", default=[0.05, 0.2, 1.0])
    run.add_argument("--jobs", type=int, default=2)
    run.add_argument("--out", required=True)
    ans = sub.add_parser("answers")
    ans.add_argument("--runs", nargs="+", required=True,
                     help="rlhf.py run folders written with --save-model (the first's warm start too)")
    ans.add_argument("--count", type=int, default=6)
    rep = sub.add_parser("report")
    rep.add_argument("--out", required=True)
    rep.add_argument("--figures", default=HERE)
    args = parser.parse_args()
    if args.command == "run":
        todo = [(arm, seed, flags) for seed in args.seeds
                for arm, flags in arms(args.ppo_betas, args.dpo_betas).items()
                if not read_held_out(args.out, arm, seed)]
        with concurrent.futures.ThreadPoolExecutor(args.jobs) as pool:
            for future in [pool.submit(run_arm, args.out, *job) for job in todo]:
                future.result()
    elif args.command == "answers":
        answers(args.runs, args.count)
    else:
        report(args.out, args.figures)


if __name__ == "__main__":
    main()

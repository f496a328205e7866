"""What reinforcement learning adds in grpo.py's default, isolated by two controls that start
from the same warm-start checkpoint and spend the same number of answers:

    grpo      python grpo.py --seed S --save-model                 (the default command; its
              warm_start.pt is the checkpoint every arm starts from)
    shuffled  python grpo.py --seed S --warm-start <grpo's warm_start.pt> --shuffle-rewards
              (GRPO whose rewards are shuffled within each group: the same updates, sizes and
              KL penalty, the credit lost)
    sft       continued supervised training on the warm start's own demonstrations
              (grpo.demonstrations with the run's flags: the same problems), from the same
              checkpoint, one answer learned from for each completion GRPO samples
              (total_timesteps / sft_batch_size steps at a constant --sft-rate), with the same
              held-out measures (grpo.held_out) every --eval-every answers

Every arm writes a grpo.py run folder (held_out.csv: greedy accuracy, pass@1, pass@k, answer
length and KL to the warm start). RL's own contribution is GRPO's end less the better
control's, on greedy accuracy and on pass@1.

    python benchmarks/grpo_controls.py run --seeds 1 2 3 --sft-rates 1e-4 3e-4 1e-3 --out DIR
    python benchmarks/grpo_controls.py run --seeds 101 102 ... --sft-rates 1e-3 --out DIR
    python benchmarks/grpo_controls.py report --out DIR     (table, figures, results.json)
    python benchmarks/grpo_controls.py record --out DIR --jobs 2   (the grpo arm's runs as
                                            benchmark.py's row of grpo-AdditionPartial-v0; the
                                            loads of DIR/run.log, run's console, if kept)
    python benchmarks/grpo_controls.py answers --run DIR/runs/<grpo's folder> --seeds 7
                                            (held-out problems and both models' answers)
    python benchmarks/grpo_controls.py corrections --folders benchmarks/runs/<task> ... \
        --labels GRPO ...                   (the corrections' table: gain, length, KL, entropy)

--jobs N runs N seeds at once (one thread each); results.md's notes, "grpo.py", hold the
measured tables.
"""
import argparse
import concurrent.futures
import csv
import glob
import json
import os
import subprocess
import sys
import time
from dataclasses import replace

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, ROOT)


TASK = "grpo-AdditionPartial-v0"  # benchmark.py's task of the default command


def arm_dir(out, arm, seed):
    """Where an arm's run of a seed goes: out/runs/<arm>/seed<S>/ (benchmark.py's layout)."""
    return os.path.join(out, "runs", arm, f"seed{seed}")


def run_dir(out, arm, seed):
    """The arm's run folder for the seed (the newest), None before it ran."""
    found = sorted(glob.glob(os.path.join(arm_dir(out, arm, seed), "*__*")), key=os.path.getmtime)
    return found[-1] if found else None


def grpo_arm(out, seed, extra, arm):
    """A grpo.py run of the arm, the benchmark task's command plus extra, its console in
    out/logs and its process seconds in seed<S>.process_s beside its folder; returns its run folder."""
    import benchmark
    os.makedirs(os.path.join(out, "logs"), exist_ok=True)
    (task,) = [t for t in benchmark.TASKS["grpo"] if t.name == TASK]
    script, *flags = benchmark.command_line(task, seed)
    command = [sys.executable, os.path.join(ROOT, script), *flags, "--output-dir",
               arm_dir(out, arm, seed), *extra]
    with open(os.path.join(out, "logs", f"{arm}-{seed}.log"), "w") as log:
        start = time.time()
        subprocess.run(command, stdout=log, stderr=subprocess.STDOUT, check=True, cwd=ROOT)
        seconds = time.time() - start
    with open(arm_dir(out, arm, seed) + ".process_s", "w") as f:  # beside it: read_run takes the newest entry
        f.write(f"{seconds:.3f}\n")
    print(f"{arm} seed {seed}: {seconds:.0f} s (load {os.getloadavg()[0]:.1f})", flush=True)
    return run_dir(out, arm, seed)


def sft_arm(out, seed, warm_start_path, rate, **flags):
    """Continued supervised training from the warm start: its folder, out/runs/..__sft-RATE__S."""
    import torch
    import grpo
    grpo.register_tasks()
    args = replace(grpo.Args(**flags), seed=seed, output_dir=arm_dir(out, f"sft-{rate:g}", seed),
                   exp_name=f"sft-{rate:g}", warm_start=warm_start_path, tensorboard=False,
                   curve=False)
    tokenizer, prompt_len = grpo.check_spaces(args, *grpo.check_env(args))
    device = grpo.seed_and_device(seed, False, args.threads)
    policy = grpo.make_policy(args, tokenizer, prompt_len).to(device)
    policy.load_state_dict(grpo.read_checkpoint(warm_start_path)["policy"])
    run = grpo.Run(args, device, {"policy": policy})
    reference = grpo.frozen_copy(policy)
    data = grpo.demonstrations(args, tokenizer, prompt_len, device)  # the warm start's own
    optimizer = torch.optim.Adam(policy.parameters(), lr=rate)
    grpo.held_out(args, run, policy, reference, 0)
    steps, every, B = args.total_timesteps // args.sft_batch_size, args.eval_every, args.sft_batch_size
    start = time.time()
    for step in range(1, steps + 1):
        grpo.supervised_step(policy, optimizer, data, B, prompt_len)
        seen = step * B
        if (every and seen // every > (seen - B) // every) or step == steps:
            grpo.held_out(args, run, policy, reference, seen)
    run.close()
    print(f"sft-{rate:g} seed {seed}: {time.time() - start:.0f} s", flush=True)
    return run.path


def one_seed(out, seed, rates):
    folder = run_dir(out, "grpo", seed) or grpo_arm(out, seed, ["--save-model"], "grpo")
    warm = os.path.join(folder, "warm_start.pt")
    if run_dir(out, "shuffled", seed) is None:
        grpo_arm(out, seed, ["--warm-start", warm, "--shuffle-rewards"], "shuffled")
    for rate in rates:
        if run_dir(out, f"sft-{rate:g}", seed) is None:
            sft_arm(out, seed, warm, rate)


def read_rows(folder):
    with open(os.path.join(folder, "held_out.csv")) as f:
        return [{k: float(v) for k, v in row.items()} for row in csv.DictReader(f)]


def pass_at_k(folder):
    with open(os.path.join(folder, "pass_at_k.csv")) as f:
        rows = list(csv.DictReader(f))
    return {"pass_at_k_warm_start": [float(r["warm_start"]) for r in rows],
            "pass_at_k_end": [float(r["end"]) for r in rows]}


def report(out, k=8):
    """results.json and a Markdown table of each seed's ends, and the two figures."""
    seeds = sorted(int(os.path.basename(p)[4:]) for p in glob.glob(arm_dir(out, "grpo", "*[0-9]"))
                   if os.path.exists(p + ".process_s"))  # finished runs only
    arms = sorted(os.path.basename(p) for p in glob.glob(os.path.join(out, "runs", "*")))
    table, curves = [], {arm: {} for arm in arms}
    for seed in seeds:
        ends = {}
        for arm in sorted(arms, key=lambda a: a != "grpo"):  # grpo's first: its budget
            folder = run_dir(out, arm, seed)
            if folder is None or not os.path.exists(os.path.join(folder, "held_out.csv")):
                continue  # not run, or still starting
            rows = read_rows(folder)
            if arm != "grpo" and rows[-1]["global_step"] < ends["grpo"]["global_step"]:
                continue  # still running: not yet as many answers as GRPO's
            curves[arm][seed] = rows
            ends[arm] = rows[-1]
        grpo_rows = curves["grpo"][seed]
        warm = next(r for r in grpo_rows if r["global_step"] == 0)
        summary = json.load(open(os.path.join(run_dir(out, "grpo", seed), "summary.json")))
        controls = [a for a in ends if a != "grpo"]
        best = {m: max(ends[a][m] for a in controls) for m in ("accuracy", "pass@1")} if controls else {}
        table.append({"seed": seed, "warm_start": warm, "ends": ends, "best_control": best,
                      "rl_own": {m: ends["grpo"][m] - best[m] for m in best},
                      "rl_gain": {m: ends["grpo"][m] - warm[m] for m in ("accuracy", "pass@1")},
                      "wall_time_s": summary["wall_time_s"],
                      **pass_at_k(run_dir(out, "grpo", seed))})
    with open(os.path.join(out, "results.json"), "w") as f:
        json.dump(table, f, indent=1)
    lines = ["| seed | warm start (greedy; pass@1) | GRPO | shuffled | " +
             " | ".join(a for a in arms if a.startswith("sft")) +
             " | RL's gain (greedy; pass@1) | RL's own: GRPO less the better control | GRPO s |",
             "|" + " --- |" * (7 + sum(a.startswith("sft") for a in arms))]
    for row in table:
        e = row["ends"]
        cell = lambda r: f"{r['accuracy']:.3f}; {r['pass@1']:.3f}"  # noqa: E731
        lines.append(" | ".join([f"| {row['seed']}", cell(row["warm_start"]), cell(e["grpo"]),
                                 cell(e["shuffled"]) if "shuffled" in e else "-",
                                 *[cell(e[a]) if a in e else "-" for a in arms if a.startswith("sft")],
                                 f"{row['rl_gain']['accuracy']:+.3f}; {row['rl_gain']['pass@1']:+.3f}",
                                 f"{row['rl_own'].get('accuracy', float('nan')):+.3f}; "
                                 f"{row['rl_own'].get('pass@1', float('nan')):+.3f}",
                                 f"{row['wall_time_s']:.0f} |"]))
    n = len(table)
    for m in ("accuracy", "pass@1"):
        lines.append(f"\nRL's gain >= 0.3 on {m}: {sum(r['rl_gain'][m] >= 0.3 for r in table)} of {n}; "
                     f"RL's own >= 0.2: {sum(r['rl_own'].get(m, -1) >= 0.2 for r in table)} of {n}")
    text = "\n".join(lines)
    open(os.path.join(out, "results.md"), "w").write(text + "\n")
    print(text)
    draw(out, curves, table)


def draw(out, curves, table):
    from matplotlib.figure import Figure
    import numpy as np
    fig = Figure(figsize=(10, 4), layout="constrained")
    names = {"grpo": "GRPO", "shuffled": "GRPO, rewards shuffled in each group"}
    for i, measure in enumerate(("accuracy", "pass@1")):
        ax = fig.add_subplot(1, 2, i + 1)
        for j, (arm, by_seed) in enumerate(sorted(curves.items())):
            if not by_seed:
                continue
            label = names.get(arm, f"continued supervision, rate {arm[4:]}")
            for rows in by_seed.values():
                ax.plot([r["global_step"] for r in rows if r["global_step"] >= 0],
                        [r[measure] for r in rows if r["global_step"] >= 0], color=f"C{j}", alpha=0.15, lw=1)
            common = min(len([r for r in rows if r["global_step"] >= 0]) for rows in by_seed.values())
            xs = [r["global_step"] for r in list(by_seed.values())[0] if r["global_step"] >= 0][:common]
            ys = np.mean([[r[measure] for r in rows if r["global_step"] >= 0][:common]
                          for rows in by_seed.values()], axis=0)
            ax.plot(xs, ys, "o-", ms=3, color=f"C{j}", label=f"{label} (mean of {len(by_seed)})")
        ax.set(xlabel="answers since the warm start (completions, or demonstrations)",
               ylabel=f"held-out {'greedy accuracy' if measure == 'accuracy' else 'pass@1 (sampled)'}",
               ylim=(0, 1))
        ax.grid(alpha=0.3)
        if i == 0:
            ax.legend(fontsize="small", loc="lower right")
    fig.suptitle("grpo.py on AdditionPartial-v0: GRPO against its two controls, each from the same warm start")
    fig.savefig(os.path.join(out, "arms.png"), dpi=100)
    fig = Figure(figsize=(6, 4), layout="constrained")
    ax = fig.add_subplot()
    for key, label, color in (("pass_at_k_warm_start", "the warm start", "C7"),
                              ("pass_at_k_end", "after GRPO", "C0")):
        rows = [r[key] for r in table if r.get(key)]
        if rows:
            mean = np.mean(rows, axis=0)
            ks = np.arange(1, len(mean) + 1)
            ax.plot(ks, mean, "-", color=color, label=f"{label} (mean of {len(rows)} seeds)")
    ax.set(xscale="log", xlabel="k", ylabel="held-out pass@k", ylim=(0, 1))
    ax.grid(alpha=0.3, which="both")
    ax.legend(loc="lower right")
    ax.set_title("pass@k before and after RL (Yue et al. 2025's picture)")
    fig.savefig(os.path.join(out, "pass_at_k.png"), dpi=100)


def answers(folder, seed, count=8):
    """A Markdown table of held-out problems (half with a carry in the ones column, half
    without) and the greedy answers of the run's warm start (warm_start.pt) and of its final
    model (model.pt): the model seen acting, for grpo.py's page."""
    import gymnasium as gym
    import torch
    import grpo
    grpo.register_tasks()
    config = json.load(open(os.path.join(folder, "config.json")))
    args = grpo.Args(**{k: v for k, v in config.items() if k in grpo.Args.__dataclass_fields__})
    tokenizer, prompt_len = grpo.check_spaces(args, *grpo.check_env(args))
    models = {}
    for name in ("warm_start.pt", "model.pt"):
        models[name] = grpo.make_policy(args, tokenizer, prompt_len)
        models[name].load_state_dict(grpo.read_checkpoint(os.path.join(folder, name))["policy"])
    env, picked = gym.make(args.env_id, held_out=True), {True: [], False: []}
    prompt, _ = env.reset(seed=seed)
    while min(len(v) for v in picked.values()) < count // 2:
        a, b = (int(x) for x in prompt[:-1].split("+"))
        carry = a % 10 + b % 10 >= 10
        if len(picked[carry]) < count // 2 and prompt not in picked[carry]:
            picked[carry].append(prompt)
        prompt, _ = env.reset()
    prompts = picked[True] + picked[False]
    said = {}
    for name, policy in models.items():
        tokens = grpo.encode_prompts(tokenizer, prompts, prompt_len, "cpu")
        out, _, _, _ = grpo.sample(policy, tokens, args.max_new_tokens, tokenizer.eos_token_id,
                                   grpo.pad_id_of(tokenizer), greedy=True)
        said[name] = grpo.decode_completions(tokenizer, out[:, prompt_len:])
    mark = lambda p, c: f"{c or '(nothing)'} {'✓' if grpo.addition_reward(p, c) else '✗'}"  # noqa: E731
    lines = ["| held-out problem | carries in the ones column | the warm start's answer | "
             "the answer after RL |", "| --- | --- | --- | --- |"]
    for i, p in enumerate(prompts):
        lines.append(f"| `{p}` | {'yes' if i < len(picked[True]) else 'no'} | "
                     f"{mark(p, said['warm_start.pt'][i])} | {mark(p, said['model.pt'][i])} |")
    print("\n".join(lines))


def record(out, bench_out, jobs):
    """The grpo arm's runs as benchmark.py's row of TASK: its results.json entry, results.md
    row and figure in bench_out (the benchmark's own reading of each run folder)."""
    from types import SimpleNamespace
    import benchmark
    (task,) = [t for t in benchmark.TASKS["grpo"] if t.name == TASK]
    runs = []
    for p in sorted(glob.glob(arm_dir(out, "grpo", "*[0-9]"))):
        seed = int(os.path.basename(p)[4:])
        with open(p + ".process_s") as f:
            process_s = float(f.read())
        runs.append({"seed": seed, "process_s": round(process_s, 3), **benchmark.read_run(task, p)})
    runs.sort(key=lambda r: r["seed"])
    loads = [float(line.rsplit("(load ", 1)[1].rstrip(")\n")) for line in open(
        os.path.join(out, "run.log")) if line.startswith("grpo seed")] if os.path.exists(
        os.path.join(out, "run.log")) else []
    command = (f"python benchmarks/grpo_controls.py run --seeds {' '.join(str(r['seed']) for r in runs)}"
               f" --jobs {jobs} (its grpo arm: the task's command with --save-model)")
    benchmark.report_task(task, runs, SimpleNamespace(out=bench_out, jobs=jobs), os.getloadavg()[0],
                          {"command": command, **({"load": [min(loads), max(loads)]} if loads else {})})


def corrections(folders, labels):
    """The corrections' table (issue 92, deliverable 4): for each label's benchmark run folders
    (folder/seed<S>/<run>/), the medians over seeds [min, max] of the warm start's and the
    end's greedy accuracy, RL's gain, pass@1 at the end, the completion length and the KL to
    the reference on the held-out problems at the end, the token entropy of the policy over
    the last 10% of updates (updates.csv) and its change from the first 10%."""
    import statistics

    def cell(values, fmt="{:.3f}"):
        return (fmt.format(statistics.median(values)) + " [" + fmt.format(min(values)) + ", "
                + fmt.format(max(values)) + "]") if values else "n/a"
    print("| run | seeds | warm start | end (greedy) | RL's gain | pass@1 end | length end "
          "| KL end | entropy end | entropy change |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    for folder, label in zip(folders, labels):
        cols = {k: [] for k in ("start", "end", "gain", "p1", "len", "kl", "ent", "dent")}
        seeds = []
        for summary_path in sorted(glob.glob(os.path.join(folder, "seed*", "*", "summary.json"))):
            run = os.path.dirname(summary_path)
            summary = json.load(open(summary_path))
            if summary["start_return"] is None or summary["eval_return_mean"] is None:
                continue
            seeds.append(summary["seed"])
            rows = read_rows(run)
            with open(os.path.join(run, "updates.csv")) as f:
                updates = [float(r["entropy"]) for r in csv.DictReader(f) if r.get("entropy")]
            cols["start"].append(summary["start_return"])
            cols["end"].append(summary["eval_return_mean"])
            cols["gain"].append(summary["eval_return_mean"] - summary["start_return"])
            cols["p1"].append(rows[-1]["pass@1"])
            cols["len"].append(rows[-1]["answer_length"])
            cols["kl"].append(rows[-1]["kl_to_reference"])
            if updates:
                tenth = max(1, len(updates) // 10)
                cols["ent"].append(statistics.mean(updates[-tenth:]))
                cols["dent"].append(statistics.mean(updates[-tenth:]) - statistics.mean(updates[:tenth]))
        print(f"| {label} | {', '.join(map(str, seeds))} | {cell(cols['start'])} | {cell(cols['end'])} "
              f"| {cell(cols['gain'], '{:+.3f}')} | {cell(cols['p1'])} | {cell(cols['len'], '{:.2f}')} "
              f"| {cell(cols['kl'], '{:.3f}')} | {cell(cols['ent'], '{:.3f}')} "
              f"| {cell(cols['dent'], '{:+.3f}')} |")


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("command", choices=["run", "report", "answers", "record", "corrections"])
    parser.add_argument("--folders", nargs="*", default=[],
                        help="corrections: benchmark.py task folders (benchmarks/runs/<task>)")
    parser.add_argument("--labels", nargs="*", default=[], help="corrections: a label per folder")
    parser.add_argument("--bench-out", default=HERE, help="record: benchmark.py's --out (benchmarks/)")
    parser.add_argument("--run", help="answers: a grpo.py run folder with warm_start.pt and model.pt")
    parser.add_argument("--seeds", type=int, nargs="+", default=[1, 2, 3])
    parser.add_argument("--sft-rates", type=float, nargs="*", default=[1e-3])
    parser.add_argument("--out")
    parser.add_argument("--jobs", type=int, default=1)
    args = parser.parse_args()
    if args.command == "answers":
        return answers(args.run, args.seeds[0])
    if args.command == "corrections":
        return corrections(args.folders, args.labels or args.folders)
    if args.command == "record":
        return record(args.out, args.bench_out, args.jobs)
    if args.command == "run":
        with concurrent.futures.ProcessPoolExecutor(args.jobs) as pool:
            for future in [pool.submit(one_seed, args.out, s, args.sft_rates) for s in args.seeds]:
                future.result()
    report(args.out)


if __name__ == "__main__":
    main()

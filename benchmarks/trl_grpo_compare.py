"""Issue 84's side by side: grpo.py --model beside TRL's GRPOTrainer on one small Hugging Face
model made here, the same task (Addition-v0's training problems, in the same order), reward,
group size, batch, learning rate, beta, clip, completion length, temperature and seeds; each
final model evaluated greedily on every held-out problem by the same code (grpo.py's greedy
decoding and reward); the accuracy reached and each whole process's seconds.

    make-model  a Llama-shaped causal LM (RoPE, so that left padding moves no position: TRL's
                generate() counts positions from the attention mask, its loss and grpo.py from
                the sequence's start) of about 200k parameters and a character-level tokenizer
                (tokenizers' WordLevel: <pad>, <eos>, <unk>, the digits, '+', '='), warm-started
                by grpo.py's own warm_start (supervised steps on Addition-v0's training
                problems), saved with save_pretrained to benchmarks/trl/model/ (ignored by git)
    run         for each seed, one process at a time, ours then TRL's (interleaved seed by
                seed, so both see the same load): `python grpo.py --model benchmarks/trl/model
                --sft-steps 0 ...` with the flags of SETTINGS, and benchmarks/trl_grpo_peer.py
                (GRPOTrainer with the GRPOConfig that SETTINGS gives), each a subprocess timed
                from start to exit with the load before and after; then both final models'
                held-out accuracy; writes benchmarks/trl/results.json and results.md (a table)
                and prints the table

    python benchmarks/trl_grpo_compare.py make-model
    python benchmarks/trl_grpo_compare.py run --seeds 101 102 103 --updates 200 \
        --results benchmarks/trl/u200

(results.md's notes, "grpo.py beside TRL's GRPOTrainer", hold the measured tables.)

TRL is not a requirement of the repository, as no peer's code is. Pinned here: trl 1.16.0,
with datasets 5.2.0 (and the repository's transformers 5.24.0, torch 2.13.0, accelerate 1.15.0):

    pip install trl==1.16.0 datasets==5.2.0

(or into a virtual environment of its own that sees the repository's packages:
`python -m venv --system-site-packages .venv-trl && .venv-trl/bin/pip install trl==1.16.0
datasets==5.2.0`, then `run --peer-python .venv-trl/bin/python`).

What stays different (TRL's options are set to grpo.py's values wherever TRL has one):
  - sampling: TRL's model.generate() (a key-value cache, positions from the attention mask)
    against grpo.py's own loop (no cache, the whole sequence each token); the same tempered
    softmax, no top-k, no top-p
  - padding: TRL pads each batch's prompts to its longest, grpo.py to the task's 6 characters
    (masked out of attention on both sides; RoPE makes the offset moot)
  - the minibatches: TRL shuffles the 128 completions of a generation and splits them in two
    in order (shuffle_sequence_dict), grpo.py draws a random permutation; different draws
  - the optimizer: TRL's AdamW (optim adamw_torch, weight decay 0, hence Adam) against torch's
    Adam; the same betas, eps 1e-8 and gradient clipping at norm 1
  - the old log-probabilities: TRL recomputes them with a forward pass after generating,
    grpo.py keeps the sampler's (equal up to float rounding)
  - the reward function is called through TRL's reward_funcs on decoded text (special tokens
    skipped), grpo.py's through the environment's step; the same addition_reward
  - process: TRL's process imports trl, datasets and accelerate and builds a Trainer; ours
    writes its run folder (CSV files); neither evaluates inside its process (grpo.py runs with
    --eval-episodes 0, --no-tensorboard, --no-curve), and each saves its final model
"""
import argparse
import json
import os
import re
import resource
import subprocess
import sys
import time
import zlib

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
import grpo  # noqa: E402  (the task, the warm start, greedy decoding, the reward)

TRL_DIR = os.path.join(ROOT, "benchmarks", "trl")
"""the model, the runs and the results (ignored by git)"""
MODEL_DIR = os.path.join(TRL_DIR, "model")
PEER = os.path.join(ROOT, "benchmarks", "trl_grpo_peer.py")
TRL_VERSION = "1.16.0"
ENV_ID = "Addition-v0"
PROMPT_LEN = 6
"""Addition-v0's longest prompt in characters ("99+99="), grpo.py's left-padded length"""

SETTINGS = {
    "num_prompts": 16,      # TRL: generation_batch_size / num_generations
    "group_size": 8,        # TRL: num_generations
    "num_minibatches": 2,   # TRL: steps_per_generation, per_device_train_batch_size 64
    "update_epochs": 1,     # TRL: num_iterations
    "learning_rate": 3e-4,  # TRL: learning_rate, constant schedule, no warm-up
    "beta": 0.04,           # TRL: beta (its default 0.0)
    "clip_coef": 0.2,       # TRL: epsilon (epsilon_high None: the same)
    "max_new_tokens": 5,    # TRL: max_completion_length (answer of 1-3 digits, and <eos>)
    "temperature": 1.0,     # TRL: temperature, top_p 1, top_k 0
    "max_grad_norm": 1.0,   # TRL: max_grad_norm
    "threads": 1,           # TRL: torch.set_num_threads(1) in the peer script; see below
}
"""grpo.py's flags for the comparison (its defaults, the budget and threads aside); the peer
script maps each to TRL's option (GRPO's loss_type "grpo", scale_rewards "group", no KL bias
correction). One torch thread on both sides, and OMP_NUM_THREADS=1 in both processes: on the
shared two-core machine at a load of 15, a step of the model took 0.1 s on one thread and
3.7 s on two (OpenMP's threads waiting for each other on oversubscribed cores)."""


# ---------------------------------------------------------------------------------------
# The model: made, warm-started with grpo.py's warm_start, saved
# ---------------------------------------------------------------------------------------
def make_tokenizer():
    """One token per character of the task: <pad> 0, <eos> 1, <unk> 2, then "0123456789+="."""
    import transformers
    from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers
    vocab = {"<pad>": 0, "<eos>": 1, "<unk>": 2, **{c: i + 3 for i, c in
                                                    enumerate("0123456789+=")}}
    tok = Tokenizer(models.WordLevel(vocab, unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.Split(Regex("."), behavior="isolated")
    tok.decoder = decoders.Fuse()
    return transformers.PreTrainedTokenizerFast(tokenizer_object=tok, eos_token="<eos>",
                                                pad_token="<pad>", unk_token="<unk>")


def make_model(args):
    import torch
    import transformers
    grpo.register_tasks()
    torch.manual_seed(args.model_seed)
    torch.set_num_threads(SETTINGS["threads"])
    tokenizer = make_tokenizer()
    config = transformers.LlamaConfig(
        vocab_size=len(tokenizer), hidden_size=args.hidden_size,
        intermediate_size=4 * args.hidden_size, num_hidden_layers=args.layers,
        num_attention_heads=4, num_key_value_heads=4,
        max_position_embeddings=32, tie_word_embeddings=True, attention_dropout=0.0,
        bos_token_id=1, eos_token_id=1, pad_token_id=0)
    model = transformers.LlamaForCausalLM(config)
    n_params = sum(p.numel() for p in model.parameters())
    policy = with_task(grpo.HFPolicy(model, tokenizer.pad_token_id), tokenizer)
    sft = grpo.Args(env_id=ENV_ID, model=MODEL_DIR, seed=args.model_seed,
                    sft_steps=args.sft_steps, max_new_tokens=SETTINGS["max_new_tokens"])
    start = time.time()
    loss = grpo.warm_start(sft, policy, tokenizer, PROMPT_LEN, "cpu")
    sft_s = time.time() - start
    model.generation_config.pad_token_id, model.generation_config.eos_token_id = 0, 1
    model.generation_config.bos_token_id = None
    os.makedirs(args.model_dir, exist_ok=True)
    model.save_pretrained(args.model_dir)
    tokenizer.save_pretrained(args.model_dir)
    accuracy = held_out_accuracy(args.model_dir)
    info = {"parameters": n_params, "hidden_size": args.hidden_size, "layers": args.layers,
            "sft_steps": args.sft_steps, "sft_loss": loss, "sft_s": round(sft_s, 1),
            "model_seed": args.model_seed, "held_out_accuracy": accuracy}
    with open(os.path.join(args.model_dir, "warm_start.json"), "w") as f:
        json.dump(info, f, indent=2)
    print(f"saved {args.model_dir}: {n_params:,} parameters, {args.sft_steps} supervised steps "
          f"in {sft_s:.0f} s (loss {loss:.3f}), held-out accuracy {accuracy:.3f}")


def with_task(policy, tokenizer):
    """What grpo.py's greedy_policy reads from its policy: the tokenizer and the lengths."""
    policy.tokenizer, policy.prompt_len = tokenizer, PROMPT_LEN
    policy.max_new_tokens = SETTINGS["max_new_tokens"]
    return policy


# ---------------------------------------------------------------------------------------
# The shared evaluation: every held-out problem, greedily, by grpo.py's code
# ---------------------------------------------------------------------------------------
def held_out_problems():
    """Every 2-digit problem Addition-v0 holds out (its crc32 rule): about a tenth of 10,000."""
    return [f"{a}+{b}=" for a in range(100) for b in range(100)
            if zlib.crc32(f"{a}+{b}".encode()) % 10 == 0]


def held_out_accuracy(folder, checkpoint=None):
    """The exact held-out accuracy of a saved Hugging Face model (with grpo.py's model.pt
    state put into it, where given): grpo.py's greedy_policy answers every held-out problem,
    grpo.py's addition_reward scores each answer."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer
    torch.set_num_threads(SETTINGS["threads"])
    tokenizer = AutoTokenizer.from_pretrained(folder, local_files_only=True)
    model = AutoModelForCausalLM.from_pretrained(folder, local_files_only=True)
    policy = with_task(grpo.HFPolicy(model, grpo.pad_id_of(tokenizer)), tokenizer).eval()
    if checkpoint is not None:
        policy.load_state_dict(grpo.read_checkpoint(checkpoint)["policy"])
    act = grpo.greedy_policy({"policy": policy}, None)
    problems = held_out_problems()
    with torch.no_grad():
        answers = [c for i in range(0, len(problems), 256) for c in act(problems[i:i + 256], {})]
    return sum(grpo.addition_reward(p, c) for p, c in zip(problems, answers)) / len(problems)


# ---------------------------------------------------------------------------------------
# The same prompts: grpo.py's training problems, in its order
# ---------------------------------------------------------------------------------------
def grpo_prompts(seed, updates):
    """The prompts grpo.py poses on --seed `seed` in `updates` updates, update by update,
    group by group: group g's environments are reset with the g-th of B seeds drawn from
    default_rng(seed), then pose one new problem per update (SAME_STEP autoreset). TRL gets
    them in this order (shuffle_dataset False) and repeats each num_generations times."""
    import numpy as np
    grpo.register_tasks()
    B = SETTINGS["num_prompts"]
    seeds = np.random.default_rng(seed).integers(2 ** 31, size=B)
    columns = []
    for s in seeds:
        env = grpo.AdditionEnv(digits=2, held_out=False)
        column = [env.reset(seed=int(s))[0]] + [env.reset()[0] for _ in range(updates - 1)]
        columns.append(column)
    return [columns[g][u] for u in range(updates) for g in range(B)]


# ---------------------------------------------------------------------------------------
# The runs: one process at a time, ours then TRL's, seed by seed
# ---------------------------------------------------------------------------------------
def grpo_command(seed, updates, out):
    flags = {f"--{k.replace('_', '-')}": str(v) for k, v in SETTINGS.items()}
    budget = updates * SETTINGS["num_prompts"] * SETTINGS["group_size"]
    return [sys.executable, os.path.join(ROOT, "grpo.py"), "--model", MODEL_DIR, "--sft-steps",
            "0", "--seed", str(seed), "--total-timesteps", str(budget), "--env-id", ENV_ID,
            *[x for kv in flags.items() for x in kv], "--loss-agg", "seq-mean-token-mean",
            "--scale-rewards", "--baseline", "mean", "--eval-episodes", "0", "--save-model",
            "--no-tensorboard", "--no-curve", "--output-dir", out]


def peer_command(seed, updates, out, prompts_file, python):
    return [python, PEER, "--model", MODEL_DIR, "--seed", str(seed), "--prompts", prompts_file,
            "--updates", str(updates), "--output-dir", out,
            "--settings", json.dumps(SETTINGS)]


def timed(command, log_path):
    """Run a command to its exit, its output into log_path; (seconds, [load before, after],
    CPU seconds: user and system time of the process and its children, which the load
    changes far less than the seconds on the clock)."""
    load_before = os.getloadavg()[0]
    cpu_before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.time()
    environ = {**os.environ, "OMP_NUM_THREADS": str(SETTINGS["threads"])}
    with open(log_path, "w") as log:
        done = subprocess.run(command, stdout=log, stderr=subprocess.STDOUT, cwd=ROOT,
                              env=environ)
    seconds = time.time() - start
    cpu = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode != 0:
        raise RuntimeError(f"{command[1]} exited {done.returncode}; see {log_path}")
    cpu_s = cpu.ru_utime + cpu.ru_stime - cpu_before.ru_utime - cpu_before.ru_stime
    load = [round(load_before, 1), round(os.getloadavg()[0], 1)]
    return round(seconds, 1), load, round(cpu_s, 1)


def run(args):
    with open(os.path.join(MODEL_DIR, "warm_start.json")) as f:
        warm = json.load(f)
    results = {"command": " ".join(["python benchmarks/trl_grpo_compare.py", *sys.argv[1:]]),
               "date": time.strftime("%Y-%m-%d %H:%M"), "machine": f"{os.cpu_count()} CPU cores",
               "trl": peer_version(args.peer_python), "settings": SETTINGS,
               "updates": args.updates,
               "completions": args.updates * SETTINGS["num_prompts"] * SETTINGS["group_size"],
               "warm_start": warm, "runs": []}
    for seed in args.seeds:
        out = os.path.join(args.results, "runs", f"seed{seed}")
        os.makedirs(out, exist_ok=True)
        prompts_file = os.path.join(out, "prompts.json")
        with open(prompts_file, "w") as f:
            json.dump(grpo_prompts(seed, args.updates), f)
        row = {"seed": seed, "warm_start": warm["held_out_accuracy"]}
        print(f"{time.strftime('%H:%M:%S')} seed {seed}: grpo.py (load {os.getloadavg()[0]:.1f})",
              flush=True)
        ours_out = os.path.join(out, "grpo")
        row["grpo_s"], row["grpo_load"], row["grpo_cpu_s"] = timed(
            grpo_command(seed, args.updates, ours_out), os.path.join(out, "grpo.log"))
        folder = max((os.path.join(ours_out, d) for d in os.listdir(ours_out)),
                     key=os.path.getmtime)
        row["grpo"] = held_out_accuracy(MODEL_DIR, os.path.join(folder, "model.pt"))
        with open(os.path.join(folder, "summary.json")) as f:
            row["grpo_train_s"] = json.load(f)["wall_time_s"]  # its run's clock: training
        print(f"{time.strftime('%H:%M:%S')} seed {seed}: grpo.py {row['grpo_s']} s, accuracy "
              f"{row['grpo']:.3f}; TRL (load {os.getloadavg()[0]:.1f})", flush=True)
        trl_out = os.path.join(out, "trl")
        row["trl_s"], row["trl_load"], row["trl_cpu_s"] = timed(
            peer_command(seed, args.updates, trl_out, prompts_file, args.peer_python),
            os.path.join(out, "trl.log"))
        row["trl"] = held_out_accuracy(os.path.join(trl_out, "final"))
        row["trl_train_s"] = trl_train_seconds(os.path.join(out, "trl.log"))
        print(f"{time.strftime('%H:%M:%S')} seed {seed}: TRL {row['trl_s']} s, accuracy "
              f"{row['trl']:.3f}", flush=True)
        results["runs"].append(row)
        write(results, args.results)
    print(table(results))


def trl_train_seconds(log_path):
    """Trainer.train's own clock (its train_runtime, printed in its last log line)."""
    with open(log_path) as f:
        found = re.findall(r"'train_runtime': '?([0-9.]+)", f.read())
    return float(found[-1]) if found else None


def peer_version(python):
    done = subprocess.run([python, "-c", "import trl; print(trl.__version__)"],
                          capture_output=True, text=True)
    return done.stdout.strip() or None


def table(results):
    """The markdown table: per seed the held-out accuracy of the warm start, grpo.py and TRL,
    each whole process's seconds (its training's own clock in parentheses: grpo.py's
    summary.json wall_time_s, TRL's train_runtime), the ratio of the two, each process's CPU
    seconds (user and system) and the load (1-minute average) before and after."""
    lines = ["| seed | warm start | grpo.py | TRL | grpo.py process s (training) "
             "| TRL process s (training) | ratio | grpo.py CPU s | TRL CPU s "
             "| load (grpo.py; TRL) |", "|" + " --- |" * 10]

    def seconds(r, side):
        train = r.get(f"{side}_train_s")
        return f"{r[side + '_s']:.1f}" + ("" if train is None else f" ({train:.1f})")
    for r in results["runs"]:
        lines.append(f"| {r['seed']} | {r['warm_start']:.3f} | {r['grpo']:.3f} | {r['trl']:.3f} "
                     f"| {seconds(r, 'grpo')} | {seconds(r, 'trl')} "
                     f"| {r['grpo_s'] / r['trl_s']:.2f} "
                     f"| {r.get('grpo_cpu_s', '-')} | {r.get('trl_cpu_s', '-')} "
                     f"| {r['grpo_load'][0]}-{r['grpo_load'][1]}; "
                     f"{r['trl_load'][0]}-{r['trl_load'][1]} |")
    return "\n".join(lines)


def write(results, folder):
    os.makedirs(folder, exist_ok=True)
    with open(os.path.join(folder, "results.json"), "w") as f:
        json.dump(results, f, indent=2)
    with open(os.path.join(folder, "results.md"), "w") as f:
        f.write(f"`{results['command']}` ({results['date']}, {results['machine']}, TRL "
                f"{results['trl']}, {results['completions']:,} completions: {results['updates']} "
                f"batches of {SETTINGS['num_prompts']} prompts x {SETTINGS['group_size']})\n\n")
        f.write(table(results) + "\n")


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("command", choices=["make-model", "run"])
    p.add_argument("--model-dir", default=MODEL_DIR, help="make-model: where to save the model")
    p.add_argument("--hidden-size", type=int, default=64)
    p.add_argument("--layers", type=int, default=3)
    p.add_argument("--sft-steps", type=int, default=1000,
                   help="make-model: grpo.py's warm start's supervised steps")
    p.add_argument("--model-seed", type=int, default=0)
    p.add_argument("--seeds", type=int, nargs="+", default=[101, 102, 103])
    p.add_argument("--updates", type=int, default=200,
                   help="run: batches of num_prompts x group_size completions for both")
    p.add_argument("--peer-python", default=sys.executable,
                   help="run: the Python with trl installed")
    p.add_argument("--results", default=TRL_DIR,
                   help="run: where results.json, results.md and the runs (runs/seed<s>/) go")
    args = p.parse_args()
    if args.command == "make-model":
        make_model(args)
        return
    if not os.path.isfile(os.path.join(MODEL_DIR, "warm_start.json")):
        p.error(f"{MODEL_DIR} has no model: run make-model first")
    if peer_version(args.peer_python) is None:
        p.error(f"{args.peer_python} cannot import trl: pip install trl=={TRL_VERSION} "
                "datasets==5.2.0")
    run(args)


if __name__ == "__main__":
    main()

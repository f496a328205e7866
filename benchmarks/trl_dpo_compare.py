"""Issue 93's side by side: rlhf.py --algo dpo beside TRL's DPOTrainer on one small Hugging Face
model made here, from the same warm start, on the same preference pairs, with the same beta,
learning rate, batch of pairs, number of optimizer steps, gradient clipping and seeds; each
final model evaluated by the same code (rlhf.py's: the greedy completions of the held-out
prompts scored by gold_score, and the sampled gold score and KL to the warm start of its
held_out); the gold score reached and each whole process's seconds.

TRL 1.16 has no PPO trainer: neither trl nor trl.experimental holds a PPOTrainer or a
PPOConfig any more (read in the installed package, site-packages/trl: its trainers are
DPO, GRPO, KTO, RLOO, SFT, reward modelling and distillation, and the experimental ones
none of PPO), so issue 93's "its PPO trainer where the pinned TRL still has one" does not
apply: rlhf.py's PPO has no peer here, DPO does.

    make-model  a Llama-shaped causal LM (3 layers, width 64, 4 heads, tied embeddings: the
                shape of trl_grpo_compare.py's) of about 200k parameters and a word-level
                tokenizer of rlhf.py's language (tokenizers' WordLevel behind a whitespace
                pre-tokenizer: <eos> 0, then the 16 English words of rlhf.WORDS, a token a
                word as in rlhf.py's Tokenizer; decoded joined by single spaces),
                warm-started by rlhf.py's own warm_start with its defaults (the default
                command's supervised steps on Preference-v0's grammatical continuations), saved
                with save_pretrained to benchmarks/trl/dpo/model/ (ignored by git). As in
                rlhf.py's Tokenizer, <eos> ends a completion and pads: with no padding
                token of its own the policy cannot sample one in the middle of a completion
    run         for each seed, one process at a time: the pairs, `python rlhf.py --model <model>
                --sft-steps 0 --seed <seed> ...` (its preference_pairs: two completions of each
                training prompt sampled from the warm start, labelled by the simulated
                Bradley-Terry labeller; its pairs.jsonl kept; timed apart, in neither side's
                seconds), then ours and TRL's, each timed from start to exit with the load
                before and after: `python rlhf.py --model <model> --algo dpo --sft-steps 0
                --pairs <pairs.jsonl> ...` with the flags of task_settings (rlhf.py's
                defaults: a beta or a rate tuned there follows on its own; results.json
                records them), and benchmarks/trl_dpo_peer.py (DPOTrainer with the DPOConfig
                they give, for the number of steps rlhf.py's loop takes, dpo_steps); then the
                warm start's and both final models' gold scores (evaluate); writes
                benchmarks/trl/dpo/results.json and results.md (a table) and prints the table

    python benchmarks/trl_dpo_compare.py make-model
    python benchmarks/trl_dpo_compare.py run --seeds 101 102 103

TRL is not a requirement of the repository, as no peer's code is. Pinned: trl 1.16.0 with
datasets 5.2.0 (`pip install trl==1.16.0 datasets==5.2.0`), or a Python of its own that has it
(`run --peer-python .venv-trl/bin/python`), as trl_grpo_compare.py says.

What stays the same: the model folder both sides start from (and both sides' reference: the
warm start itself, frozen); the pairs, every one of them, the same words (TRL's completions
with a space in front: it joins prompt and completion into one string before tokenizing,
and "good" + "gift" would run into one unknown word; trl_dpo_peer.read_pairs); the sequences
(the prompt's 4 tokens, the completion's, <eos>, everything cut at 4 + max_new_tokens tokens:
TRL's max_length with truncation keep_start cuts the <eos> of an 8-word completion where
rlhf.py's encode_texts does); DPO's sigmoid loss on the summed log-probabilities of the
completion's tokens and its <eos>, at beta; the reference's log-probabilities computed once
before training (TRL's precompute_ref_log_probs, rlhf.py's train_dpo); Adam at a constant
rate, betas (0.9, 0.999), eps 1e-8, no weight decay, the gradient clipped at the same norm;
full batches of num_prompts pairs from shuffled passes over the pairs, for the same number of
optimizer steps (so the same number of pairs trained on); one torch thread
(OMP_NUM_THREADS=1 in every process).

What stays different:
  - the order of the pairs: TRL's RandomSampler seeded by --seed against rlhf.py's
    torch.randperm from its own seeded stream; different draws
  - the end of a pass: rlhf.py's batches run on across it (the pass's last pairs and the
    next pass's first make a batch), TRL drops the pairs left over at the end of each pass
    (dataloader_drop_last; 4,000 pairs in batches of 256 leave 160, a different 160 each
    pass), so that every one of its batches is full as rlhf.py's are
  - the log-probabilities: TRL's fused LM head (log-softmax in chunks, without the whole
    logits) against rlhf.py's log_softmax of the logits; equal up to float rounding
  - the attention mask: <eos> is rlhf.py's padding token, so rlhf.py's HFModel masks the
    <eos> that ends a completion out of the attention, where TRL's collator marks it real;
    no log-probability changes (no earlier position attends to it, and what it predicts is
    not in the loss; tests/test_trl_dpo_compare.py checks that both sides see the same tokens
    and sum the same log-probabilities)
  - the optimizer: TRL's AdamW (optim adamw_torch, weight decay 0, hence Adam) against
    torch's Adam
  - what else each process does: TRL imports trl, datasets and accelerate, tokenizes the pairs
    through datasets' map and builds a Trainer that logs its metrics (entropy, logits, reward
    margins) every 10 steps; rlhf.py's model returns every layer's hidden states (its value
    head and reward model read the last; DPO neither), and rlhf.py writes its run folder,
    builds its 256 training environments, draws the warm start's demonstrations (unused with
    --sft-steps 0), copies the policy into a reward model and normalizes its scores on the
    pairs (--rm-steps 0: not trained; with --algo dpo it only measures, and nothing here reads
    it), and reads and writes pairs.jsonl; neither evaluates inside its process (rlhf.py runs
    with --eval-episodes 0, --eval-every 0, --no-tensorboard, --no-curve), and each saves its
    final model (rlhf.py its unchanged warm start too, warm_start.pt, as --save-model does)
"""
import argparse
import json
import os
import re
import resource
import shutil
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
import rlhf  # noqa: E402  (the task, the warm start, the pairs, the evaluation)

TRL_DIR = os.path.join(ROOT, "benchmarks", "trl", "dpo")
"""the model, the runs and the results (ignored by git, as all of benchmarks/trl/)"""
MODEL_DIR = os.path.join(TRL_DIR, "model")
PEER = os.path.join(ROOT, "benchmarks", "trl_dpo_peer.py")
TRL_VERSION = "1.16.0"
ENV_ID = "Preference-v0"
PROMPT_LEN = 4
"""Preference-v0's prompts: always 4 words, one token each (so no prompt is padded)"""
THREADS = 1
"""one torch thread on every side, and OMP_NUM_THREADS=1 (trl_grpo_compare.py's SETTINGS say
why: OpenMP's threads wait on each other on oversubscribed cores)"""
KEYS = ("beta", "dpo_learning_rate", "num_prompts", "total_timesteps", "max_grad_norm",
        "max_new_tokens")
"""rlhf.py's flags that both sides share (task_settings): DPO's beta, Adam's rate, the batch of
pairs (num_prompts), the budget in completions (2 a pair), gradient clipping, T_max"""


def task_settings(total_timesteps=None):
    """The flags both sides share: rlhf.py's defaults for KEYS (the default command's: its
    tuning of beta and the rate follows), one thread; total_timesteps in place of the default
    budget where given."""
    defaults = rlhf.Args()
    settings = {k: getattr(defaults, k) for k in KEYS}
    if total_timesteps is not None:
        settings["total_timesteps"] = total_timesteps
    return {**settings, "threads": THREADS}


def dpo_steps(batch, total_timesteps):
    """The optimizer steps rlhf.py's train_dpo takes: total_timesteps completions, 2 a pair,
    in full batches of `batch` pairs drawn in turn from shuffled passes over the pairs. TRL
    gets this as max_steps, its batches full too (dataloader_drop_last)."""
    return total_timesteps // (2 * batch)


# ---------------------------------------------------------------------------------------
# The model: made, warm-started with rlhf.py's warm_start, saved
# ---------------------------------------------------------------------------------------
def make_tokenizer():
    """One token per word of rlhf.py's language, Preference-v0's English words separated by
    single spaces: <eos> 0 (it ends a completion and pads, as in rlhf.py's Tokenizer), then
    rlhf.WORDS 1-16; no <unk> to sample. The whitespace pre-tokenizer splits a text into its
    words ("<eos>", a special token, is split out before it, so TRL's "good<eos>" reads as
    two tokens); with no decoder of its own, tokenizers joins the words with single spaces,
    so decode(encode(text)) is the text."""
    import transformers
    from tokenizers import Tokenizer, models, pre_tokenizers
    vocab = {"<eos>": 0, **{w: i + 1 for i, w in enumerate(rlhf.WORDS)}}
    tok = Tokenizer(models.WordLevel(vocab, unk_token=None))
    tok.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    return transformers.PreTrainedTokenizerFast(tokenizer_object=tok, eos_token="<eos>",
                                                pad_token="<eos>")


def with_task(policy, tokenizer, max_new_tokens):
    """What rlhf.py's warm_start, greedy_policy and held_out read from the policy."""
    policy.tokenizer, policy.prompt_len, policy.max_new_tokens = (
        tokenizer, PROMPT_LEN, max_new_tokens)
    return policy


def make_model(args):
    import torch
    import transformers
    rlhf.register_tasks()
    settings = task_settings()
    torch.manual_seed(args.model_seed)
    torch.set_num_threads(THREADS)
    tokenizer = make_tokenizer()
    config = transformers.LlamaConfig(
        vocab_size=len(tokenizer), hidden_size=args.hidden_size,
        intermediate_size=4 * args.hidden_size, num_hidden_layers=args.layers,
        num_attention_heads=4, num_key_value_heads=4,
        max_position_embeddings=32, tie_word_embeddings=True, attention_dropout=0.0,
        bos_token_id=0, eos_token_id=0, pad_token_id=0)
    model = transformers.LlamaForCausalLM(config)
    n_params = sum(p.numel() for p in model.parameters())
    policy = with_task(rlhf.PolicyWithValue(rlhf.HFModel(model, tokenizer.pad_token_id)),
                       tokenizer, settings["max_new_tokens"])
    sft = rlhf.Args(model=args.model_dir, seed=args.model_seed,
                    max_new_tokens=settings["max_new_tokens"],
                    **({} if args.sft_steps is None else {"sft_steps": args.sft_steps}))
    start = time.time()
    rlhf.warm_start(sft, policy)
    sft_s = time.time() - start
    model.generation_config.pad_token_id, model.generation_config.eos_token_id = 0, 0
    model.generation_config.bos_token_id = None
    os.makedirs(args.model_dir, exist_ok=True)
    model.save_pretrained(args.model_dir)
    tokenizer.save_pretrained(args.model_dir)
    scores = evaluate(args.model_dir, args.model_seed, settings["max_new_tokens"],
                      reference=args.model_dir)
    info = {"parameters": n_params, "hidden_size": args.hidden_size, "layers": args.layers,
            "sft_s": round(sft_s, 1), "model_seed": args.model_seed,
            "warm_start": {k: getattr(sft, k) for k in ("sft_steps", "sft_problems",
                                                        "sft_batch_size", "sft_learning_rate")},
            "evaluation_seed": args.model_seed, **scores}
    with open(os.path.join(args.model_dir, "warm_start.json"), "w") as f:
        json.dump(info, f, indent=2)
    print(f"saved {args.model_dir}: {n_params:,} parameters, {sft.sft_steps} supervised steps in "
          f"{sft_s:.0f} s; on seed {args.model_seed}'s held-out prompts gold "
          f"{scores['greedy']:.3f} greedy, {scores['sampled']:.3f} sampled")


# ---------------------------------------------------------------------------------------
# The shared evaluation: rlhf.py's, on the run's seed's held-out prompts
# ---------------------------------------------------------------------------------------
class NoRunFolder:
    """What rlhf.held_out writes its row to: the row is returned, and goes nowhere else."""

    def write_row(self, filename, **row):
        pass

    def elapsed(self):
        return 0.0


def no_reward_model(tokens, completion_mask):
    """held_out's proxy score, which this comparison does not read (DPO has no reward model:
    rlhf.py's is only a measure, and TRL has none): 0 for every completion."""
    import torch
    return torch.zeros(len(tokens))


def evaluate(folder, seed, max_new_tokens, checkpoint=None, reference=MODEL_DIR):
    """A saved model's gold score by rlhf.py's own code, as rlhf.py measures a run of --seed
    `seed` (its --eval-episodes and --eval-samples defaults, the held-out prompts of seed +
    100,000): greedy, the mean gold_score of plumbing's evaluate (rlhf.greedy_policy's
    completions); sampled, held_out's mean gold score of --eval-samples completions a
    prompt, with its KL to the reference (nats a completion) and the completions' length in
    tokens. checkpoint: rlhf.py's model.pt, put into the folder's model."""
    import numpy as np
    import torch
    torch.set_num_threads(THREADS)
    rlhf.register_tasks()
    args = rlhf.Args(seed=seed, model=folder, max_new_tokens=max_new_tokens, sft_steps=0)
    tokenizer, prompt_len = rlhf.check_spaces(args, *rlhf.check_env(args))
    policy = rlhf.make_policy(args, tokenizer, prompt_len).eval()
    if checkpoint is not None:
        policy.load_state_dict(rlhf.read_checkpoint(checkpoint)["policy"])
    ref_args = rlhf.Args(seed=seed, model=reference, max_new_tokens=max_new_tokens, sft_steps=0)
    ref = rlhf.make_policy(ref_args, tokenizer, prompt_len).eval()
    with torch.no_grad():
        greedy = float(np.mean(rlhf.evaluate(args, {"policy": policy})))
    row = rlhf.held_out(args, NoRunFolder(), policy, ref, no_reward_model, 0)
    return {"greedy": round(greedy, 4), "sampled": round(row["gold_score"], 4),
            "kl": round(row["kl_to_reference"], 4) + 0.0,  # not -0.0
            "length": round(row["answer_length"], 3)}


# ---------------------------------------------------------------------------------------
# The runs: the pairs, then one process at a time, ours then TRL's, seed by seed
# ---------------------------------------------------------------------------------------
def pairs_command(seed, out, settings, model_dir=MODEL_DIR, num_pairs=None):
    """rlhf.py's run that labels the seed's pairs and writes pairs.jsonl: the warm start as
    the sampler (--sft-steps 0), no reward model trained (--rm-steps 0), one batch of DPO
    (the least budget rlhf.py takes: 2 completions a pair), nothing evaluated."""
    more = [] if num_pairs is None else ["--num-pairs", str(num_pairs)]
    return [sys.executable, os.path.join(ROOT, "rlhf.py"), "--model", model_dir, "--sft-steps",
            "0", "--seed", str(seed), "--env-id", ENV_ID, "--algo", "dpo", "--rm-steps", "0",
            *more, "--max-new-tokens", str(settings["max_new_tokens"]),
            "--total-timesteps", str(2 * settings["num_prompts"]), "--threads",
            str(settings["threads"]), "--eval-episodes", "0", "--eval-every", "0",
            "--no-tensorboard", "--no-curve", "--output-dir", out]


def rlhf_command(seed, pairs, out, settings, model_dir=MODEL_DIR):
    """Ours: rlhf.py's DPO from the model as it is, on the pairs, with the settings as flags."""
    flags = {f"--{k.replace('_', '-')}": str(v) for k, v in settings.items()}
    return [sys.executable, os.path.join(ROOT, "rlhf.py"), "--model", model_dir, "--algo",
            "dpo", "--sft-steps", "0", "--pairs", pairs, "--seed", str(seed), "--env-id",
            ENV_ID, *[x for kv in flags.items() for x in kv], "--rm-steps", "0",
            "--eval-episodes", "0", "--eval-every", "0", "--save-model", "--no-tensorboard",
            "--no-curve", "--output-dir", out]


def peer_command(seed, pairs, steps, out, settings, python, model_dir=MODEL_DIR):
    return [python, PEER, "--model", model_dir, "--seed", str(seed), "--pairs", pairs,
            "--steps", str(steps), "--output-dir", out, "--settings", json.dumps(settings)]


def timed(command, log_path):
    """Run a command to its exit, its output into log_path; (seconds, [load before, after],
    CPU seconds of the process and its children: user and system)."""
    load_before = os.getloadavg()[0]
    cpu_before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.time()
    environ = {**os.environ, "OMP_NUM_THREADS": str(THREADS)}
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


def run_folder(parent):
    """The run folder rlhf.py made under parent (its newest)."""
    return max((os.path.join(parent, d) for d in os.listdir(parent)), key=os.path.getmtime)


def run(args):
    settings = task_settings(args.total_timesteps)
    T = settings["max_new_tokens"]
    with open(os.path.join(args.model_dir, "warm_start.json")) as f:
        warm = json.load(f)
    results = {"command": " ".join(["python benchmarks/trl_dpo_compare.py", *sys.argv[1:]]),
               "date": time.strftime("%Y-%m-%d %H:%M"), "machine": f"{os.cpu_count()} CPU cores",
               "trl": peer_version(args.peer_python), "settings": settings,
               "warm_start": warm, "env_id": ENV_ID, "runs": []}
    for seed in args.seeds:
        out = os.path.join(args.results, "runs", f"seed{seed}")
        os.makedirs(out, exist_ok=True)
        stamp = lambda: f"{time.strftime('%H:%M:%S')} seed {seed}:"  # noqa: E731
        print(f"{stamp()} the pairs (load {os.getloadavg()[0]:.1f})", flush=True)
        pairs_out = os.path.join(out, "pairs")
        pairs_s, _, _ = timed(pairs_command(seed, pairs_out, settings, args.model_dir,
                                            args.num_pairs), os.path.join(out, "pairs.log"))
        pairs = os.path.join(out, "pairs.jsonl")
        shutil.copyfile(os.path.join(run_folder(pairs_out), "pairs.jsonl"), pairs)
        with open(pairs) as f:
            n_pairs = sum(1 for line in f if line.strip())
        if n_pairs < settings["num_prompts"]:
            raise RuntimeError(f"{n_pairs} pairs make no batch of {settings['num_prompts']}")
        steps = dpo_steps(settings["num_prompts"], settings["total_timesteps"])
        row = {"seed": seed, "pairs": n_pairs, "steps": steps, "pairs_s": pairs_s,
               "warm_start": evaluate(args.model_dir, seed, T, reference=args.model_dir)}
        print(f"{stamp()} {n_pairs} pairs in {pairs_s} s, {steps} steps each; rlhf.py (load "
              f"{os.getloadavg()[0]:.1f})", flush=True)
        ours_out = os.path.join(out, "rlhf")
        row["rlhf_s"], row["rlhf_load"], row["rlhf_cpu_s"] = timed(
            rlhf_command(seed, pairs, ours_out, settings, args.model_dir),
            os.path.join(out, "rlhf.log"))
        folder = run_folder(ours_out)
        row["rlhf"] = evaluate(args.model_dir, seed, T, os.path.join(folder, "model.pt"),
                               reference=args.model_dir)
        with open(os.path.join(folder, "summary.json")) as f:
            row["rlhf_train_s"] = json.load(f)["wall_time_s"]  # its run's clock
        print(f"{stamp()} rlhf.py {row['rlhf_s']} s, gold {row['rlhf']['greedy']:.3f} greedy; "
              f"TRL (load {os.getloadavg()[0]:.1f})", flush=True)
        trl_out = os.path.join(out, "trl")
        row["trl_s"], row["trl_load"], row["trl_cpu_s"] = timed(
            peer_command(seed, pairs, steps, trl_out, settings, args.peer_python,
                         args.model_dir), os.path.join(out, "trl.log"))
        row["trl"] = evaluate(os.path.join(trl_out, "final"), seed, T, reference=args.model_dir)
        row["trl_train_s"] = trl_train_seconds(os.path.join(out, "trl.log"))
        print(f"{stamp()} TRL {row['trl_s']} s, gold {row['trl']['greedy']:.3f} greedy",
              flush=True)
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


# ---------------------------------------------------------------------------------------
# The table
# ---------------------------------------------------------------------------------------
def table(results):
    """The markdown table: per seed the pairs and steps; the gold score greedy (the warm
    start's, rlhf.py's and TRL's final model's) and sampled (the same three), the sampled
    KL to the warm start in nats a completion, each whole process's seconds (its training's
    own clock in parentheses: rlhf.py's summary.json wall_time_s, TRL's train_runtime), the
    ratio of the two, each process's CPU seconds (user and system) and the load before and
    after; then a line over the seeds (summary_line)."""
    lines = ["| seed | pairs (steps) | greedy gold: warm start | rlhf.py | TRL "
             "| sampled gold: warm start | rlhf.py | TRL | KL: rlhf.py | TRL "
             "| rlhf.py process s (training) | TRL process s (training) | ratio "
             "| rlhf.py CPU s | TRL CPU s | load (rlhf.py; TRL) |", "|" + " --- |" * 16]

    def seconds(r, side):
        train = r.get(f"{side}_train_s")
        return f"{r[side + '_s']:.1f}" + ("" if train is None else f" ({train:.1f})")
    for r in results["runs"]:
        w, ours, theirs = r["warm_start"], r["rlhf"], r["trl"]
        lines.append(f"| {r['seed']} | {r['pairs']} ({r['steps']}) | {w['greedy']:.3f} "
                     f"| {ours['greedy']:.3f} | {theirs['greedy']:.3f} | {w['sampled']:.3f} "
                     f"| {ours['sampled']:.3f} | {theirs['sampled']:.3f} | {ours['kl']:.2f} "
                     f"| {theirs['kl']:.2f} | {seconds(r, 'rlhf')} | {seconds(r, 'trl')} "
                     f"| {r['rlhf_s'] / r['trl_s']:.2f} | {r['rlhf_cpu_s']} | {r['trl_cpu_s']} "
                     f"| {r['rlhf_load'][0]}-{r['rlhf_load'][1]}; "
                     f"{r['trl_load'][0]}-{r['trl_load'][1]} |")
    if results["runs"]:
        lines += ["", summary_line(results["runs"])]
    return "\n".join(lines)


def summary_line(runs):
    """One line over the seeds: each side's mean greedy gold and its gain over the warm
    start's, the mean of TRL's less rlhf.py's, and rlhf.py's time as a share of TRL's (the
    summed process seconds, and the summed CPU seconds)."""
    n = len(runs)
    mean = {s: sum(r[s]["greedy"] for r in runs) / n for s in ("rlhf", "trl")}
    gain = {s: sum(r[s]["greedy"] - r["warm_start"]["greedy"] for r in runs) / n
            for s in ("rlhf", "trl")}
    ratio = sum(r["rlhf_s"] for r in runs) / sum(r["trl_s"] for r in runs)
    cpu = sum(r["rlhf_cpu_s"] for r in runs) / sum(r["trl_cpu_s"] for r in runs)
    return (f"Over {n} seed{'s' * (n > 1)}: greedy gold rlhf.py {mean['rlhf']:.3f} (over the "
            f"warm start {gain['rlhf']:+.3f}), TRL {mean['trl']:.3f} ({gain['trl']:+.3f}); TRL "
            f"less rlhf.py {mean['trl'] - mean['rlhf']:+.3f}. rlhf.py's process seconds are "
            f"{ratio:.2f} of TRL's, its CPU seconds {cpu:.2f}.")


def write(results, folder):
    os.makedirs(folder, exist_ok=True)
    with open(os.path.join(folder, "results.json"), "w") as f:
        json.dump(results, f, indent=2)
    s = results["settings"]
    with open(os.path.join(folder, "results.md"), "w") as f:
        f.write(f"`{results['command']}` ({results['date']}, {results['machine']}, TRL "
                f"{results['trl']}, {ENV_ID}, DPO at beta {s['beta']:g}, rate "
                f"{s['dpo_learning_rate']:g}, batches of {s['num_prompts']} pairs, "
                f"{s['total_timesteps']:,} completions)\n\n")
        f.write(table(results) + "\n")


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("command", choices=["make-model", "run"])
    p.add_argument("--model-dir", default=MODEL_DIR,
                   help="where make-model saves the model and run reads it")
    p.add_argument("--hidden-size", type=int, default=64)
    p.add_argument("--layers", type=int, default=3)
    p.add_argument("--sft-steps", type=int, default=None,
                   help="make-model: rlhf.py's warm start's supervised steps (default: "
                        "rlhf.py's --sft-steps default)")
    p.add_argument("--model-seed", type=int, default=0)
    p.add_argument("--seeds", type=int, nargs="+", default=[101, 102, 103])
    p.add_argument("--total-timesteps", type=int, default=None,
                   help="run: the DPO budget in completions, 2 a pair (default: rlhf.py's)")
    p.add_argument("--num-pairs", type=int, default=None,
                   help="run: pairs labelled for each seed (default: rlhf.py's --num-pairs)")
    p.add_argument("--peer-python", default=sys.executable,
                   help="run: the Python with trl installed")
    p.add_argument("--results", default=TRL_DIR,
                   help="run: where results.json, results.md and the runs (runs/seed<s>/) go")
    args = p.parse_args()
    if args.command == "make-model":
        make_model(args)
        return
    if not os.path.isfile(os.path.join(args.model_dir, "warm_start.json")):
        p.error(f"{args.model_dir} has no model: run make-model first")
    if peer_version(args.peer_python) is None:
        p.error(f"{args.peer_python} cannot import trl: pip install trl=={TRL_VERSION} "
                "datasets==5.2.0")
    run(args)


if __name__ == "__main__":
    main()

"""Issue 84's side by side: grpo.py --model beside TRL's GRPOTrainer on one small Hugging Face
model made here, the same task (Addition-v0's training problems, in the same order), reward,
group size, batch, learning rate, beta, clip, completion length, temperature and seeds; each
final model evaluated greedily on every held-out problem by the same code (grpo.py's greedy
decoding and reward); the accuracy reached and each whole process's seconds. Issue 92 asks it
again on the new default task, AdditionPartial-v0 (--env-id AdditionPartial-v0): the same
model's shape, warm-started as the default command is (grpo.py's warm_start with its defaults,
on the task's partial worked answers: most sums with a carry in the ones column have none),
then both sides from that checkpoint with the default command's settings and budget; the
table adds RL's gain, each side's accuracy less the warm start's.

    make-model  a Llama-shaped causal LM (RoPE, so that left padding moves no position: TRL's
                generate() counts positions from the attention mask, its loss and grpo.py from
                the sequence's start) of about 200k parameters and a character-level tokenizer
                (tokenizers' WordLevel: <pad>, <eos>, <unk>, the digits, '+', '='), warm-started
                by grpo.py's own warm_start, saved with save_pretrained to benchmarks/trl/model/
                (Addition-v0) or benchmarks/trl/model-AdditionPartial-v0/ (ignored by git):
                  Addition-v0         issue 84's warm start: 1,000 supervised steps on 3,000
                                      training problems at a constant rate (grpo.py's
                                      warm_start of today with --sft-problems 3000
                                      --no-sft-anneal-lr repeats its weights bit for bit)
                  AdditionPartial-v0  the default command's: grpo.py's defaults for every
                                      --sft-* flag (1,500 annealed steps on 9,000 problems that
                                      have a worked answer, today), its demonstrations drawn
                                      as a run of --seed <model seed> draws them
    run         for each seed, one process at a time, ours then TRL's (interleaved seed by
                seed, so both see the same load): `python grpo.py --model <model> --sft-steps 0
                ...` with the task's settings as flags (task_settings: SETTINGS on Addition-v0,
                grpo.py's defaults on AdditionPartial-v0), and benchmarks/trl_grpo_peer.py
                (GRPOTrainer with the GRPOConfig those settings give), each a subprocess timed
                from start to exit with the load before and after; then both final models'
                held-out accuracy; writes results.json and results.md (a table) under --results
                (benchmarks/trl/, or benchmarks/trl/AdditionPartial-v0/) and prints the table

    python benchmarks/trl_grpo_compare.py make-model
    python benchmarks/trl_grpo_compare.py run --seeds 101 102 103 --updates 200 \
        --results benchmarks/trl/u200

    python benchmarks/trl_grpo_compare.py make-model --env-id AdditionPartial-v0
    python benchmarks/trl_grpo_compare.py run --env-id AdditionPartial-v0 --seeds 101 102 103

(--updates on AdditionPartial-v0 defaults to the default command's budget, --total-timesteps
over the batch: 600 batches of 64 prompts x 8 completions today. results.md's notes, "grpo.py
beside TRL's GRPOTrainer", hold the measured tables.)

TRL is not a requirement of the repository, as no peer's code is. Pinned here: trl 1.16.0,
with datasets 5.2.0 (and the repository's transformers 5.24.0, torch 2.13.0, accelerate 1.15.0):

    pip install trl==1.16.0 datasets==5.2.0

(or into a virtual environment of its own that sees the repository's packages:
`python -m venv --system-site-packages .venv-trl && .venv-trl/bin/pip install trl==1.16.0
datasets==5.2.0`, then `run --peer-python .venv-trl/bin/python`).

What stays different (TRL's options are set to grpo.py's values wherever TRL has one):
  - sampling: TRL's model.generate() against grpo.py's own loop, both with a key-value cache
    (grpo.py's HFPolicy.next_token_logits; before 2026-11-28's rerun it ran the whole
    sequence each token); positions from the attention mask in TRL's, from the sequence's
    start in grpo.py's; the same tempered softmax, no top-k, no top-p
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
    --eval-episodes 0, --eval-every 0, --no-tensorboard, --no-curve), and each saves its final
    model (grpo.py its unchanged warm start too, warm_start.pt, as --save-model does)
  - on AdditionPartial-v0 the same: the warm start is made once, outside both processes, and
    neither side's reference is anything but it; RL's gain is each final model's accuracy
    less that checkpoint's, on the same 1,006 held-out problems (AdditionPartial-v0 holds out
    the same ones as Addition-v0, carries and all)
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
"""the default task, issue 84's"""
TASKS = ("Addition-v0", "AdditionPartial-v0")
"""the tasks the comparison runs on (--env-id): AdditionPartial-v0 is issue 92's default"""
PROMPT_LEN = 6
"""Addition-v0's longest prompt in characters ("99+99="), grpo.py's left-padded length"""

SETTINGS = {
    "num_prompts": 16,      # TRL: generation_batch_size / num_generations
    "group_size": 8,        # TRL: num_generations
    "num_minibatches": 2,   # TRL: steps_per_generation, per_device_train_batch_size 64
    "update_epochs": 1,     # TRL: num_iterations
    "learning_rate": 3e-4,  # TRL: learning_rate, no warm-up
    "anneal_lr": False,     # TRL: lr_scheduler_type "constant" (True: "linear", to 0)
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

PEER_ASSUMES = {"clip_coef_high": None, "dynamic_sampling": False, "top_p": 1.0,
                "shuffle_rewards": False, "loss_agg": "seq-mean-token-mean",
                "scale_rewards": True, "baseline": "mean"}
"""grpo.py's flags outside SETTINGS at the values the peer script gives TRL (epsilon_high =
epsilon, no dynamic sampling, top_p 1, no shuffled control; the last three grpo_command also
passes): grpo.py's defaults must be these, or the two sides would run different algorithms"""

ADDITION_WARM_START = {"sft_problems": 3000, "sft_anneal_lr": False}
"""Addition-v0's warm start as issue 84 made it (grpo.py's warm_start then drew 3,000 problems
and kept its rate constant): the weights of benchmarks/trl/model/ that results.md measured"""


def task_settings(env_id):
    """The flags both sides share on env_id: on Addition-v0 SETTINGS (issue 84's); on another
    task the default command's, grpo.py's Args defaults for the same keys (one torch thread
    all the same), so that the comparison follows grpo.py's tuning (results.json records the
    values). Raises ValueError where a default outside them is one the peer does not map."""
    defaults = grpo.Args()
    unmapped = {k: getattr(defaults, k) for k, v in PEER_ASSUMES.items()
                if getattr(defaults, k) != v}
    if unmapped:
        raise ValueError(f"grpo.py's defaults {unmapped} are not the peer's {PEER_ASSUMES}: map "
                         "them in trl_grpo_peer.py and grpo_command first")
    if env_id == ENV_ID:
        return dict(SETTINGS)
    return {**{k: getattr(defaults, k) for k in SETTINGS}, "threads": SETTINGS["threads"]}


def model_dir_of(env_id):
    """Where make-model saves the task's warm-started model, and run reads it."""
    return MODEL_DIR if env_id == ENV_ID else os.path.join(TRL_DIR, f"model-{env_id}")


def results_dir_of(env_id):
    """Where run writes results.json, results.md and runs/ by default."""
    return TRL_DIR if env_id == ENV_ID else os.path.join(TRL_DIR, env_id)


def default_updates(env_id, settings):
    """Addition-v0: issue 84's 200 batches; another task: the default command's budget,
    grpo.py's --total-timesteps in whole batches of num_prompts x group_size."""
    if env_id == ENV_ID:
        return 200
    return grpo.Args().total_timesteps // (settings["num_prompts"] * settings["group_size"])


def default_sft_steps(env_id):
    """Addition-v0: issue 84's 1,000 supervised steps; another task: grpo.py's --sft-steps."""
    return 1000 if env_id == ENV_ID else grpo.Args().sft_steps


def warm_start_args(env_id, model_dir, seed, sft_steps, max_new_tokens):
    """grpo.Args for grpo.warm_start: on Addition-v0 issue 84's (ADDITION_WARM_START); on
    another task every --sft-* flag at grpo.py's default, as the default command's. Held-out
    rows during it only where the default stops the warm start at a held-out measure
    (--sft-stop-at): they draw on a random stream of their own and change no weight."""
    defaults = grpo.Args()
    extra = dict(ADDITION_WARM_START) if env_id == ENV_ID else {}
    if env_id == ENV_ID or defaults.sft_stop_at is None:
        extra["eval_every"] = 0
    return grpo.Args(env_id=env_id, model=model_dir, seed=seed, sft_steps=sft_steps,
                     max_new_tokens=max_new_tokens, **extra)


class NoRunFolder:
    """What grpo.warm_start's held-out measures (--sft-stop-at only) write to: make-model keeps
    no run folder, so the rows go nowhere. They are asked of it as of grpo.py's Run."""

    def __init__(self, args=None, policy=None):
        self.args, self.models = args, {"policy": policy}

    def measure(self, global_step, moment):
        return grpo.measure(self, global_step, moment)

    def write_row(self, filename, **row):
        pass

    def elapsed(self):
        return 0.0


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
    settings = task_settings(args.env_id)
    torch.manual_seed(args.model_seed)
    torch.set_num_threads(settings["threads"])
    tokenizer = make_tokenizer()
    config = transformers.LlamaConfig(
        vocab_size=len(tokenizer), hidden_size=args.hidden_size,
        intermediate_size=4 * args.hidden_size, num_hidden_layers=args.layers,
        num_attention_heads=4, num_key_value_heads=4,
        max_position_embeddings=32, tie_word_embeddings=True, attention_dropout=0.0,
        bos_token_id=1, eos_token_id=1, pad_token_id=0)
    model = transformers.LlamaForCausalLM(config)
    n_params = sum(p.numel() for p in model.parameters())
    policy = with_task(grpo.HFPolicy(model, tokenizer.pad_token_id), tokenizer,
                       settings["max_new_tokens"])
    sft = warm_start_args(args.env_id, args.model_dir, args.model_seed, args.sft_steps,
                          settings["max_new_tokens"])
    start = time.time()
    grpo.warm_start(sft, policy, NoRunFolder(sft, policy))
    sft_s = time.time() - start
    loss = demonstrations_loss(sft, policy)
    model.generation_config.pad_token_id, model.generation_config.eos_token_id = 0, 1
    model.generation_config.bos_token_id = None
    os.makedirs(args.model_dir, exist_ok=True)
    model.save_pretrained(args.model_dir)
    tokenizer.save_pretrained(args.model_dir)
    scores = held_out_scores(args.model_dir, max_new_tokens=settings["max_new_tokens"])
    accuracy = sum(scores) / len(scores)
    info = {"parameters": n_params, "hidden_size": args.hidden_size, "layers": args.layers,
            "sft_steps": args.sft_steps, "demonstrations_loss": loss, "sft_s": round(sft_s, 1),
            "model_seed": args.model_seed, "held_out_accuracy": accuracy,
            "env_id": args.env_id,
            "warm_start": {k: getattr(sft, k) for k in ("sft_problems", "sft_batch_size",
                                                        "sft_learning_rate", "sft_anneal_lr",
                                                        "sft_stop_at")},
            "held_out_accuracy_by_carry": by_carry(scores)}
    with open(os.path.join(args.model_dir, "warm_start.json"), "w") as f:
        json.dump(info, f, indent=2)
    carry = info["held_out_accuracy_by_carry"]
    print(f"saved {args.model_dir}: {n_params:,} parameters, {args.sft_steps} supervised steps "
          f"on {args.env_id} in {sft_s:.0f} s (loss on its demonstrations {loss:.3f}), held-out "
          f"accuracy {accuracy:.3f} (sums with a carry in the ones column {carry['carry']:.3f}, "
          f"without {carry['no_carry']:.3f})")


def demonstrations_loss(sft, policy):
    """The warm start's cross-entropy after it, on all its demonstrations (grpo.demonstrations:
    the answer's tokens and <eos>); grpo.warm_start returns nothing to print."""
    import torch
    import torch.nn.functional as F
    with torch.no_grad():
        tokens, targets, mask = grpo.demonstrations(sft, policy.tokenizer, policy.prompt_len,
                                                    "cpu")
        logits = grpo.completion_logits(policy, tokens, policy.prompt_len)
        nll = F.cross_entropy(logits.transpose(1, 2), targets, reduction="none")
        return round(float((nll * mask).sum() / mask.sum()), 4)


def with_task(policy, tokenizer, max_new_tokens=SETTINGS["max_new_tokens"]):
    """What grpo.py's greedy_policy reads from its policy: the tokenizer and the lengths."""
    policy.tokenizer, policy.prompt_len = tokenizer, PROMPT_LEN
    policy.max_new_tokens = max_new_tokens
    return policy


# ---------------------------------------------------------------------------------------
# The shared evaluation: every held-out problem, greedily, by grpo.py's code
# ---------------------------------------------------------------------------------------
def held_out_problems():
    """Every 2-digit problem Addition-v0 holds out (its crc32 rule): about a tenth of 10,000."""
    return [f"{a}+{b}=" for a in range(100) for b in range(100)
            if zlib.crc32(f"{a}+{b}".encode()) % 10 == 0]


def held_out_accuracy(folder, checkpoint=None, max_new_tokens=SETTINGS["max_new_tokens"]):
    """The exact held-out accuracy of a saved Hugging Face model (with grpo.py's model.pt
    state put into it, where given): grpo.py's greedy_policy answers every held-out problem,
    grpo.py's addition_reward scores each answer."""
    scores = held_out_scores(folder, checkpoint, max_new_tokens)
    return sum(scores) / len(scores)


def held_out_scores(folder, checkpoint=None, max_new_tokens=SETTINGS["max_new_tokens"]):
    """held_out_accuracy's scores, one per problem of held_out_problems() in its order."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer
    torch.set_num_threads(SETTINGS["threads"])
    tokenizer = AutoTokenizer.from_pretrained(folder, local_files_only=True)
    model = AutoModelForCausalLM.from_pretrained(folder, local_files_only=True)
    policy = with_task(grpo.HFPolicy(model, grpo.pad_id_of(tokenizer)), tokenizer,
                       max_new_tokens).eval()
    if checkpoint is not None:
        policy.load_state_dict(grpo.read_checkpoint(checkpoint)["policy"])
    act = grpo.greedy_policy({"policy": policy}, None)
    problems = held_out_problems()
    with torch.no_grad():
        answers = [c for i in range(0, len(problems), 256) for c in act(problems[i:i + 256], {})]
    return [grpo.addition_reward(p, c) for p, c in zip(problems, answers)]


def by_carry(scores):
    """Accuracy on the held-out sums with a carry in the ones column (those whose worked
    answers AdditionPartial-v0 mostly leaves out) and on those without: scores in
    held_out_problems()'s order -> {"carry": accuracy, "no_carry": accuracy}."""
    carry = [sum(int(x) % 10 for x in p[:-1].split("+")) >= 10 for p in held_out_problems()]
    parts = {"carry": [s for s, c in zip(scores, carry) if c],
             "no_carry": [s for s, c in zip(scores, carry) if not c]}
    return {k: round(sum(v) / len(v), 4) for k, v in parts.items()}


# ---------------------------------------------------------------------------------------
# The same prompts: grpo.py's training problems, in its order
# ---------------------------------------------------------------------------------------
def grpo_prompts(seed, updates, env_id=ENV_ID, num_prompts=SETTINGS["num_prompts"]):
    """The prompts grpo.py poses on --seed `seed` in `updates` updates, update by update,
    group by group: group g's environments are reset with the g-th of B seeds drawn from
    default_rng(seed), then pose one new problem per update (SAME_STEP autoreset). TRL gets
    them in this order (shuffle_dataset False) and repeats each num_generations times. The
    task's registered settings make each environment (AdditionPartial-v0 draws the same
    problems as Addition-v0: its partial worked answers change only info["answer"])."""
    import numpy as np
    grpo.register_tasks()
    B, kwargs = num_prompts, grpo.gym.spec(env_id).kwargs
    seeds = np.random.default_rng(seed).integers(2 ** 31, size=B)
    columns = []
    for s in seeds:
        env = grpo.AdditionEnv(**{**kwargs, "held_out": False})
        column = [env.reset(seed=int(s))[0]] + [env.reset()[0] for _ in range(updates - 1)]
        columns.append(column)
    return [columns[g][u] for u in range(updates) for g in range(B)]


# ---------------------------------------------------------------------------------------
# The runs: one process at a time, ours then TRL's, seed by seed
# ---------------------------------------------------------------------------------------
def grpo_command(seed, updates, out, env_id=ENV_ID, settings=SETTINGS, model_dir=MODEL_DIR):
    """grpo.py's command line: the model as it is (--sft-steps 0), the settings as flags, no
    evaluation inside the process (--eval-every 0 with --eval-episodes 0, which grpo.py
    asks for since its held-out rows came), the final model saved."""
    flags = {f"--{k.replace('_', '-')}": str(v) for k, v in settings.items()
             if not isinstance(v, bool)}
    switches = [f"--{'' if v else 'no-'}{k.replace('_', '-')}" for k, v in settings.items()
                if isinstance(v, bool)]  # tyro's booleans: --anneal-lr or --no-anneal-lr
    budget = updates * settings["num_prompts"] * settings["group_size"]
    return [sys.executable, os.path.join(ROOT, "grpo.py"), "--model", model_dir, "--sft-steps",
            "0", "--seed", str(seed), "--total-timesteps", str(budget), "--env-id", env_id,
            *[x for kv in flags.items() for x in kv], *switches, "--loss-agg", "seq-mean-token-mean",
            "--scale-rewards", "--baseline", "mean", "--eval-episodes", "0", "--eval-every",
            "0", "--save-model", "--no-tensorboard", "--no-curve", "--output-dir", out]


def peer_command(seed, updates, out, prompts_file, python, settings=SETTINGS,
                 model_dir=MODEL_DIR):
    return [python, PEER, "--model", model_dir, "--seed", str(seed), "--prompts", prompts_file,
            "--updates", str(updates), "--output-dir", out,
            "--settings", json.dumps(settings)]


def timed(command, log_path, threads=SETTINGS["threads"]):
    """Run a command to its exit, its output into log_path; (seconds, [load before, after],
    CPU seconds: user and system time of the process and its children, which the load
    changes far less than the seconds on the clock)."""
    load_before = os.getloadavg()[0]
    cpu_before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.time()
    environ = {**os.environ, "OMP_NUM_THREADS": str(threads)}
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
    settings = task_settings(args.env_id)
    with open(os.path.join(args.model_dir, "warm_start.json")) as f:
        warm = json.load(f)
    B, G = settings["num_prompts"], settings["group_size"]
    results = {"command": " ".join(["python benchmarks/trl_grpo_compare.py", *sys.argv[1:]]),
               "date": time.strftime("%Y-%m-%d %H:%M"), "machine": f"{os.cpu_count()} CPU cores",
               "trl": peer_version(args.peer_python), "settings": settings,
               "updates": args.updates,
               "completions": args.updates * B * G,
               "warm_start": warm, "env_id": args.env_id, "runs": []}
    T = settings["max_new_tokens"]
    for seed in args.seeds:
        out = os.path.join(args.results, "runs", f"seed{seed}")
        os.makedirs(out, exist_ok=True)
        prompts_file = os.path.join(out, "prompts.json")
        with open(prompts_file, "w") as f:
            json.dump(grpo_prompts(seed, args.updates, args.env_id, B), f)
        row = {"seed": seed, "warm_start": warm["held_out_accuracy"]}
        print(f"{time.strftime('%H:%M:%S')} seed {seed}: grpo.py (load {os.getloadavg()[0]:.1f})",
              flush=True)
        ours_out = os.path.join(out, "grpo")
        row["grpo_s"], row["grpo_load"], row["grpo_cpu_s"] = timed(
            grpo_command(seed, args.updates, ours_out, args.env_id, settings, args.model_dir),
            os.path.join(out, "grpo.log"), settings["threads"])
        folder = max((os.path.join(ours_out, d) for d in os.listdir(ours_out)),
                     key=os.path.getmtime)
        scores = held_out_scores(args.model_dir, os.path.join(folder, "model.pt"), T)
        row["grpo"] = sum(scores) / len(scores)
        if args.env_id != ENV_ID:
            row["grpo_by_carry"] = by_carry(scores)
        with open(os.path.join(folder, "summary.json")) as f:
            row["grpo_train_s"] = json.load(f)["wall_time_s"]  # its run's clock: training
        print(f"{time.strftime('%H:%M:%S')} seed {seed}: grpo.py {row['grpo_s']} s, accuracy "
              f"{row['grpo']:.3f}; TRL (load {os.getloadavg()[0]:.1f})", flush=True)
        trl_out = os.path.join(out, "trl")
        row["trl_s"], row["trl_load"], row["trl_cpu_s"] = timed(
            peer_command(seed, args.updates, trl_out, prompts_file, args.peer_python, settings,
                         args.model_dir),
            os.path.join(out, "trl.log"), settings["threads"])
        scores = held_out_scores(os.path.join(trl_out, "final"), max_new_tokens=T)
        row["trl"] = sum(scores) / len(scores)
        if args.env_id != ENV_ID:
            row["trl_by_carry"] = by_carry(scores)
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
    seconds (user and system) and the load (1-minute average) before and after. On a task
    other than Addition-v0, RL's gain (each side's accuracy less the warm start's) after the
    accuracies, and a last line over the seeds (gain_summary)."""
    gains = results.get("env_id", ENV_ID) != ENV_ID
    lines = ["| seed | warm start | grpo.py | TRL "
             + ("| grpo.py gain | TRL gain " if gains else "")
             + "| grpo.py process s (training) "
             "| TRL process s (training) | ratio | grpo.py CPU s | TRL CPU s "
             "| load (grpo.py; TRL) |", "|" + " --- |" * (12 if gains else 10)]

    def seconds(r, side):
        train = r.get(f"{side}_train_s")
        return f"{r[side + '_s']:.1f}" + ("" if train is None else f" ({train:.1f})")
    for r in results["runs"]:
        gain = (f"| {r['grpo'] - r['warm_start']:+.3f} | {r['trl'] - r['warm_start']:+.3f} "
                if gains else "")
        lines.append(f"| {r['seed']} | {r['warm_start']:.3f} | {r['grpo']:.3f} | {r['trl']:.3f} "
                     f"{gain}| {seconds(r, 'grpo')} | {seconds(r, 'trl')} "
                     f"| {r['grpo_s'] / r['trl_s']:.2f} "
                     f"| {r.get('grpo_cpu_s', '-')} | {r.get('trl_cpu_s', '-')} "
                     f"| {r['grpo_load'][0]}-{r['grpo_load'][1]}; "
                     f"{r['trl_load'][0]}-{r['trl_load'][1]} |")
    if gains and results["runs"]:
        lines += ["", gain_summary(results["runs"])]
    return "\n".join(lines)


def gain_summary(runs):
    """One line over the seeds: each side's mean accuracy and mean gain over the warm start,
    the mean of TRL's accuracy less grpo.py's, and grpo.py's time as a share of TRL's (the
    summed process seconds; issue 92's goal is at most 0.8 at equal accuracy)."""
    n = len(runs)
    mean = {side: sum(r[side] for r in runs) / n for side in ("grpo", "trl")}
    gain = {side: sum(r[side] - r["warm_start"] for r in runs) / n for side in ("grpo", "trl")}
    ratio = sum(r["grpo_s"] for r in runs) / sum(r["trl_s"] for r in runs)
    cpu = [r.get(f"{side}_cpu_s") for r in runs for side in ("grpo", "trl")]
    cpu_ratio = ("" if None in cpu else "; of the CPU seconds "
                 f"{sum(cpu[0::2]) / sum(cpu[1::2]):.2f}")
    return (f"Over {n} seed{'s' * (n > 1)}: grpo.py {mean['grpo']:.3f} (RL's gain "
            f"{gain['grpo']:+.3f}), TRL {mean['trl']:.3f} ({gain['trl']:+.3f}); TRL less grpo.py "
            f"{mean['trl'] - mean['grpo']:+.3f}. grpo.py's process seconds are {ratio:.2f} of "
            f"TRL's{cpu_ratio} (the goal: at most 0.8 at equal accuracy).")


def write(results, folder):
    os.makedirs(folder, exist_ok=True)
    with open(os.path.join(folder, "results.json"), "w") as f:
        json.dump(results, f, indent=2)
    settings, env_id = results["settings"], results.get("env_id", ENV_ID)
    task = "" if env_id == ENV_ID else f"{env_id}, "
    with open(os.path.join(folder, "results.md"), "w") as f:
        f.write(f"`{results['command']}` ({results['date']}, {results['machine']}, TRL "
                f"{results['trl']}, {task}{results['completions']:,} completions: "
                f"{results['updates']} batches of {settings['num_prompts']} prompts x "
                f"{settings['group_size']})\n\n")
        f.write(table(results) + "\n")


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("command", choices=["make-model", "run"])
    p.add_argument("--env-id", choices=TASKS, default=ENV_ID,
                   help="the task: Addition-v0 (issue 84's) or AdditionPartial-v0 (issue 92's, "
                        "grpo.py's default)")
    p.add_argument("--model-dir", default=None,
                   help="where make-model saves the model and run reads it (default: "
                        "benchmarks/trl/model, or benchmarks/trl/model-<env-id>)")
    p.add_argument("--hidden-size", type=int, default=64)
    p.add_argument("--layers", type=int, default=3)
    p.add_argument("--sft-steps", type=int, default=None,
                   help="make-model: grpo.py's warm start's supervised steps (default: 1000 on "
                        "Addition-v0, grpo.py's --sft-steps default on another task)")
    p.add_argument("--model-seed", type=int, default=0)
    p.add_argument("--seeds", type=int, nargs="+", default=[101, 102, 103])
    p.add_argument("--updates", type=int, default=None,
                   help="run: batches of num_prompts x group_size completions for both "
                        "(default: 200 on Addition-v0, the default command's budget on "
                        "another task)")
    p.add_argument("--peer-python", default=sys.executable,
                   help="run: the Python with trl installed")
    p.add_argument("--results", default=None,
                   help="run: where results.json, results.md and the runs (runs/seed<s>/) go "
                        "(default: benchmarks/trl, or benchmarks/trl/<env-id>)")
    args = p.parse_args()
    try:
        settings = task_settings(args.env_id)
    except ValueError as e:
        p.error(str(e))
    args.model_dir = args.model_dir or model_dir_of(args.env_id)
    args.results = args.results or results_dir_of(args.env_id)
    if args.sft_steps is None:
        args.sft_steps = default_sft_steps(args.env_id)
    if args.updates is None:
        args.updates = default_updates(args.env_id, settings)
    if args.command == "make-model":
        make_model(args)
        return
    if not os.path.isfile(os.path.join(args.model_dir, "warm_start.json")):
        p.error(f"{args.model_dir} has no model: run make-model"
                + ("" if args.env_id == ENV_ID else f" --env-id {args.env_id}") + " first")
    if peer_version(args.peer_python) is None:
        p.error(f"{args.peer_python} cannot import trl: pip install trl=={TRL_VERSION} "
                "datasets==5.2.0")
    run(args)


if __name__ == "__main__":
    main()

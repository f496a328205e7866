"""Tests of benchmarks/trl_dpo_compare.py and trl_dpo_peer.py, rlhf.py's DPO beside TRL's
DPOTrainer (issue 93): the settings both sides share, the steps rlhf.py takes and TRL is given,
the command lines of rlhf.py's two runs (the pairs, then ours), DPOConfig's options, the
tokenizer of rlhf.py's language, and the table. TRL is needed only by the slow tests: the same
tokens and log-probabilities on both sides, and the whole comparison at a toy size."""
import json
import os
import subprocess
import sys

import pytest
import torch
import tyro

import rlhf
from benchmarks import trl_dpo_compare as compare
from benchmarks import trl_dpo_peer as peer


def write_pairs(path, rows):
    with open(path, "w") as f:
        f.writelines(json.dumps(row) + "\n" for row in rows)
    return str(path)


# 12 pairs of Preference-v0's English words (rlhf.py's read_pairs wants 10 or more): an 8-word
# completion, cut at T_max = 8 without its <eos>, and an empty one, <eos> alone, among them
EIGHT_WORDS = "gift is truly great joy seems quite bad"
PAIRS = [{"prompt": "film looks very good", "chosen": EIGHT_WORDS, "rejected": ""},
         {"prompt": "pain feels barely awful", "chosen": "joy is",
          "rejected": "film looks very good gift is truly"}] + [
    {"prompt": "joy is truly great", "chosen": " ".join(["gift"] * (i % 5 + 1)),
     "rejected": " ".join(["pain"] * (i % 3 + 1))} for i in range(10)]


def test_the_settings_are_rlhfs_defaults_on_one_thread():
    defaults = rlhf.Args()
    assert compare.task_settings() == {**{k: getattr(defaults, k) for k in compare.KEYS},
                                       "threads": 1}
    assert compare.task_settings(1024)["total_timesteps"] == 1024


@pytest.mark.parametrize("batch, budget, steps", [
    (256, 10_240, 20),   # 10,240 completions = 5,120 pairs = 20 batches of 256
    (256, 51_200, 100),  # 51,200 completions = 25,600 pairs = 100 batches of 256
    (256, 1024, 2),      # 512 pairs
    (100, 1000, 5),      # 500 pairs
    (100, 1100, 5),      # 550 pairs: 5 full batches (no half batch)
])
def test_the_steps_are_rlhfs_full_batches_of_pairs(batch, budget, steps):
    assert compare.dpo_steps(batch, budget) == steps


def parsed(command, tmp_path):
    """rlhf.py's flags from a command line (after `python rlhf.py`), checked as rlhf.py checks
    them: no usage error."""
    assert command[1] == os.path.join(compare.ROOT, "rlhf.py")
    args = tyro.cli(rlhf.Args, args=command[2:])
    rlhf.check_args(args)
    return args


def test_ours_is_rlhfs_dpo_from_the_model_on_the_pairs_with_every_setting(tmp_path):
    settings = compare.task_settings()
    pairs = write_pairs(tmp_path / "pairs.jsonl", PAIRS)
    args = parsed(compare.rlhf_command(101, pairs, "out", settings, str(tmp_path)), tmp_path)
    for key, value in settings.items():
        assert getattr(args, key) == value, key
    assert (args.algo, args.sft_steps, args.pairs, args.seed, args.model) == (
        "dpo", 0, pairs, 101, str(tmp_path))
    # no reward model trained (with --algo dpo it only measures), nothing evaluated inside
    assert (args.rm_steps, args.eval_episodes, args.eval_every, args.save_model) == (0, 0, 0, True)
    assert (args.tensorboard, args.curve, args.env_id) == (False, False, "Preference-v0")


def test_the_pairs_come_from_rlhf_sampling_the_warm_start_on_the_same_seed(tmp_path):
    settings = compare.task_settings()
    args = parsed(compare.pairs_command(101, "out", settings, str(tmp_path), 300), tmp_path)
    assert (args.seed, args.model, args.sft_steps, args.pairs, args.num_pairs) == (
        101, str(tmp_path), 0, None, 300)
    assert (args.rm_steps, args.eval_episodes, args.eval_every) == (0, 0, 0)
    assert args.total_timesteps == 2 * args.num_prompts  # one batch of DPO, the least
    assert parsed(compare.pairs_command(1, "o", settings, str(tmp_path)),
                  tmp_path).num_pairs == rlhf.Args().num_pairs
    pairs = "p.jsonl"
    command = compare.peer_command(101, pairs, 7, "out", settings, "py", "m")
    assert command[:2] == ["py", compare.PEER]
    assert json.loads(command[command.index("--settings") + 1]) == settings
    assert [command[command.index(f) + 1] for f in ("--pairs", "--steps", "--model")] == [
        pairs, "7", "m"]


def test_trls_options_are_rlhfs_settings():
    s = {**compare.task_settings(), "beta": 0.2, "dpo_learning_rate": 5e-4, "num_prompts": 64,
         "max_grad_norm": 0.5, "max_new_tokens": 8}
    k = peer.dpo_config_kwargs(s, 7, 30, "out")
    assert (k["beta"], k["learning_rate"], k["max_grad_norm"], k["seed"]) == (0.2, 5e-4, 0.5, 7)
    assert (k["per_device_train_batch_size"], k["max_steps"], k["dataloader_drop_last"]) == (
        64, 30, True)
    assert k["max_length"] == 4 + 8 and k["truncation_mode"] == "keep_start"
    assert (k["loss_type"], k["label_smoothing"], k["ld_alpha"], k["use_weighting"]) == (
        ["sigmoid"], 0.0, None, False)
    assert (k["lr_scheduler_type"], k["warmup_steps"], k["weight_decay"], k["optim"]) == (
        "constant", 0, 0.0, "adamw_torch")
    assert (k["adam_beta1"], k["adam_beta2"], k["adam_epsilon"]) == (0.9, 0.999, 1e-8)
    assert k["precompute_ref_log_probs"] and not k["sync_ref_model"]
    assert k["gradient_accumulation_steps"] == 1 and not k["activation_checkpointing"]


def test_the_peer_reads_the_pairs_as_three_columns_a_space_before_each_completion(tmp_path):
    # TRL joins prompt and completion into one string: the space keeps the prompt's last word
    # and the completion's first apart ("good gift", not "goodgift")
    columns = peer.read_pairs(write_pairs(tmp_path / "p.jsonl", PAIRS[:2]))
    assert columns == {"prompt": ["film looks very good", "pain feels barely awful"],
                       "chosen": [" " + EIGHT_WORDS, " joy is"],
                       "rejected": [" ", " film looks very good gift is truly"]}


def test_the_tokenizer_writes_rlhfs_words_a_token_each_and_ends_and_pads_with_eos(tmp_path):
    tokenizer = compare.make_tokenizer()
    assert len(tokenizer) == 17 and tokenizer.eos_token_id == tokenizer.pad_token_id == 0
    assert tokenizer.encode(" ".join(rlhf.WORDS)) == list(range(1, 17))  # a token a word
    for text in ("film looks very good", EIGHT_WORDS, "joy"):
        ids = tokenizer.encode(text, add_special_tokens=False)
        assert len(ids) == len(text.split()) and tokenizer.decode(ids) == text
    # TRL's string, prompt + " " + completion + <eos>: the words, then <eos> 0
    prompt, joined = tokenizer.encode("film looks very good"), tokenizer.encode(
        "film looks very good gift is<eos>")
    assert joined == prompt + tokenizer.encode("gift is") + [0]
    assert tokenizer.encode("film looks very good <eos>") == prompt + [0]
    # no unknown token: a word not of the language cannot be read as another (<eos>, say)
    with pytest.raises(Exception, match="(?i)unk"):
        tokenizer.encode("glad")


def test_rlhfs_model_check_takes_the_tokenizer_and_reads_4_prompt_tokens(tmp_path):
    # rlhf.py --model on Preference-v0: load_tokenizer's check passes and check_spaces reads
    # the prompt's length as 4 tokens (4 words, a token each: no padding), as TRL's side has it
    tokenizer = compare.make_tokenizer()
    tokenizer.save_pretrained(tmp_path)
    env = rlhf.PreferenceEnv()
    args = rlhf.Args(model=str(tmp_path), sft_steps=0)
    loaded, prompt_len = rlhf.check_spaces(args, env.observation_space, env.action_space)
    assert prompt_len == compare.PROMPT_LEN and rlhf.pad_id_of(loaded) == 0
    assert loaded.decode(loaded.encode(EIGHT_WORDS)) == EIGHT_WORDS


def results():
    def scores(greedy, sampled, kl):
        return {"greedy": greedy, "sampled": sampled, "kl": kl, "length": 4.0}
    runs = [{"seed": 101, "pairs": 4000, "steps": 100, "pairs_s": 30.0,
             "warm_start": scores(0.1, 0.0, 0.0), "rlhf": scores(0.5, 0.3, 2.0),
             "trl": scores(0.4, 0.35, 2.5), "rlhf_s": 40.0, "rlhf_train_s": 30.0,
             "rlhf_load": [1.0, 1.5], "rlhf_cpu_s": 35.0, "trl_s": 50.0, "trl_train_s": 20.0,
             "trl_load": [1.5, 2.0], "trl_cpu_s": 45.0},
            {"seed": 102, "pairs": 4000, "steps": 100, "pairs_s": 30.0,
             "warm_start": scores(0.2, 0.1, 0.0), "rlhf": scores(0.6, 0.4, 1.0),
             "trl": scores(0.7, 0.5, 1.5), "rlhf_s": 60.0, "rlhf_train_s": 50.0,
             "rlhf_load": [1.0, 1.0], "rlhf_cpu_s": 45.0, "trl_s": 50.0, "trl_train_s": None,
             "trl_load": [1.0, 1.0], "trl_cpu_s": 55.0}]
    return {"command": "c", "date": "d", "machine": "m", "trl": "1.16.0",
            "settings": compare.task_settings(), "runs": runs}


def test_the_table_holds_both_gold_scores_the_kl_and_the_seconds(tmp_path):
    lines = compare.table(results()).splitlines()
    assert lines[1].count("---") == 16 == lines[0].count("|") - 1
    assert lines[2] == ("| 101 | 4000 (100) | 0.100 | 0.500 | 0.400 | 0.000 | 0.300 | 0.350 "
                        "| 2.00 | 2.50 | 40.0 (30.0) | 50.0 (20.0) | 0.80 | 35.0 | 45.0 "
                        "| 1.0-1.5; 1.5-2.0 |")
    assert "| 60.0 (50.0) | 50.0 | 1.20 |" in lines[3]
    # greedy means (0.5 + 0.6)/2 = 0.55 and (0.4 + 0.7)/2 = 0.55, over warm starts of 0.15:
    # +0.40 each; seconds (40 + 60)/(50 + 50) = 1.00, CPU (35 + 45)/(45 + 55) = 0.80
    assert lines[5] == ("Over 2 seeds: greedy gold rlhf.py 0.550 (over the warm start +0.400), "
                        "TRL 0.550 (+0.400); TRL less rlhf.py +0.000. rlhf.py's process seconds "
                        "are 1.00 of TRL's, its CPU seconds 0.80.")
    compare.write(results(), str(tmp_path))
    s = compare.task_settings()
    first = open(tmp_path / "results.md").readline()
    assert first.startswith(f"`c` (d, m, TRL 1.16.0, Preference-v0, DPO at beta {s['beta']:g}")
    with open(tmp_path / "results.json") as f:
        assert json.load(f)["runs"][1]["trl_train_s"] is None


@pytest.mark.slow  # a real rlhf.py run, however small: DPO's steps counted in its updates.csv
def test_rlhf_takes_the_steps_trl_is_given(tmp_path):
    pairs = write_pairs(tmp_path / "pairs.jsonl", PAIRS)
    rlhf.main(rlhf.Args(algo="dpo", pairs=pairs, sft_steps=0, rm_steps=0, num_prompts=4,
                        total_timesteps=44, eval_episodes=0, eval_every=0, seed=3,
                        output_dir=str(tmp_path / "runs"), tensorboard=False, curve=False))
    (folder,) = os.listdir(tmp_path / "runs")
    with open(tmp_path / "runs" / folder / "updates.csv") as f:
        rows = f.read().splitlines()[1:]
    assert len(rows) == compare.dpo_steps(4, 44) == 5  # 22 pairs: 5 full batches of 4


def save_tiny_model(folder):
    """compare's tokenizer and a 1-layer Llama of its shape, untrained, saved."""
    import transformers
    tokenizer = compare.make_tokenizer()
    torch.manual_seed(0)
    config = transformers.LlamaConfig(
        vocab_size=len(tokenizer), hidden_size=16, intermediate_size=32, num_hidden_layers=1,
        num_attention_heads=2, num_key_value_heads=2, max_position_embeddings=32,
        tie_word_embeddings=True, bos_token_id=0, eos_token_id=0, pad_token_id=0)
    transformers.LlamaForCausalLM(config).save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return str(folder)


@pytest.mark.slow  # TRL's cross-check: importing trl and building its DPOTrainer take seconds
def test_trl_trains_on_rlhfs_tokens_and_log_probabilities(tmp_path):
    pytest.importorskip("trl", reason="pip install trl==1.16.0 datasets==5.2.0")
    import datasets
    from transformers import AutoModelForCausalLM, AutoTokenizer
    from trl import DPOConfig, DPOTrainer
    folder = save_tiny_model(tmp_path / "model")
    tokenizer = AutoTokenizer.from_pretrained(folder)
    s = {**compare.task_settings(), "num_prompts": len(PAIRS)}
    config = DPOConfig(**peer.dpo_config_kwargs(s, 0, 1, str(tmp_path / "trl")))
    trainer = DPOTrainer(model=folder, args=config, processing_class=tokenizer,
                         train_dataset=datasets.Dataset.from_dict(
                             peer.read_pairs(write_pairs(tmp_path / "p.jsonl", PAIRS))))
    batch = trainer.data_collator([trainer.train_dataset[i] for i in range(len(PAIRS))])

    P, T = compare.PROMPT_LEN, s["max_new_tokens"]
    cw, mw, cl, ml = rlhf.encode_pairs(tokenizer, PAIRS, P, T, "cpu")
    ids, mask = batch["input_ids"], batch["completion_mask"]
    width = ids.shape[1]
    assert width == P + T  # the 8-word completion fills it: cut before its <eos>
    # the same tokens (TRL pads on the right with <eos>, as rlhf.py does), and the same
    # completion tokens counted: each completion's and its <eos>, never the prompt or padding
    assert torch.equal(ids, torch.cat([cw, cl]))
    assert torch.equal(mask[:, P:].float(), torch.cat([mw, ml]))
    assert not mask[:, :P].any()
    assert cw[0, P:].tolist() == tokenizer.encode(EIGHT_WORDS)  # no <eos>: cut at T_max
    assert ids[1, :P].tolist() == tokenizer.encode("pain feels barely awful")  # 4 words, 4 tokens
    assert cl[0, P:].tolist() == [0] * T and ml[0].tolist() == [1] + [0] * (T - 1)

    # the same summed log-probabilities: TRL's fused head against rlhf.py's HFModel, which
    # masks <eos> (its padding token) out of the attention where TRL's collator does not
    chosen, rejected = trainer.compute_ref_log_probs(trainer.model, batch)
    policy = rlhf.PolicyWithValue(rlhf.HFModel(AutoModelForCausalLM.from_pretrained(folder), 0))
    with torch.no_grad():
        ours_chosen = rlhf.sequence_logprobs(policy, cw, P, mw)
        ours_rejected = rlhf.sequence_logprobs(policy, cl, P, ml)
    assert torch.allclose(chosen, ours_chosen, atol=1e-5)
    assert torch.allclose(rejected, ours_rejected, atol=1e-5)


@pytest.mark.slow  # rlhf.py's processes and TRL's, a model made and warm-started: about a minute
def test_the_comparison_runs_end_to_end_at_a_toy_size(tmp_path):
    pytest.importorskip("trl", reason="pip install trl==1.16.0 datasets==5.2.0")
    script = os.path.join(compare.ROOT, "benchmarks", "trl_dpo_compare.py")
    model = str(tmp_path / "model")

    def call(*argv):
        done = subprocess.run([sys.executable, script, *argv, "--model-dir", model],
                              capture_output=True, text=True)
        assert done.returncode == 0, done.stdout + done.stderr
        return done.stdout
    call("make-model", "--sft-steps", "2", "--hidden-size", "16", "--layers", "1")
    with open(os.path.join(model, "warm_start.json")) as f:
        warm = json.load(f)
    assert warm["warm_start"]["sft_steps"] == 2 and warm["kl"] == 0.0
    s = compare.task_settings()
    printed = call("run", "--seeds", "3", "--total-timesteps", str(2 * s["num_prompts"]),
                   "--num-pairs", str(s["num_prompts"]), "--results", str(tmp_path / "out"))
    with open(tmp_path / "out" / "results.json") as f:
        out = json.load(f)
    (row,) = out["runs"]
    assert (row["pairs"], row["steps"]) == (s["num_prompts"], 1)
    assert os.path.isfile(tmp_path / "out" / "runs" / "seed3" / "pairs.jsonl")
    for side in ("warm_start", "rlhf", "trl"):
        assert -3 <= row[side]["greedy"] <= 1 and -3 <= row[side]["sampled"] <= 1
    assert row["warm_start"]["kl"] == 0.0 and row["rlhf_s"] > 0 and row["trl_s"] > 0
    assert "Over 1 seed: greedy gold rlhf.py" in printed


def test_each_model_is_measured_against_the_warm_start_not_against_itself(tmp_path, monkeypatch):
    # The table's KL columns are each model's KL to the warm start: held_out is given the model
    # under test as the policy and, beside it, the reference loaded from `reference`. Two tiny
    # models, A (under test) and B (the reference: A's weights, each +1): the policy held_out
    # samples from must hold A's weights and the reference B's. A policy passed as its own
    # reference would make every KL read 0, on both sides of the comparison.
    pytest.importorskip("transformers")
    from transformers import AutoModelForCausalLM
    a = save_tiny_model(tmp_path / "a")
    b_model = AutoModelForCausalLM.from_pretrained(a)
    with torch.no_grad():
        for p in b_model.parameters():
            p += 1.0
    b = str(tmp_path / "b")
    b_model.save_pretrained(b)
    compare.make_tokenizer().save_pretrained(b)
    given = []
    monkeypatch.setattr(rlhf, "evaluate", lambda args, models: [0.0])
    monkeypatch.setattr(rlhf, "held_out", lambda args, run, policy, reference, rm, step: given.append(
        (policy, reference)) or {"gold_score": 0.0, "kl_to_reference": 0.0, "answer_length": 1.0})
    compare.evaluate(a, 3, compare.task_settings()["max_new_tokens"], reference=b)
    (policy, reference), = given
    a_sum = sum(p.sum().item() for p in AutoModelForCausalLM.from_pretrained(a).parameters())
    b_sum = sum(p.sum().item() for p in b_model.parameters())
    assert sum(p.sum().item() for p in policy.lm.parameters()) == pytest.approx(a_sum, rel=1e-5)
    assert sum(p.sum().item() for p in reference.lm.parameters()) == pytest.approx(b_sum, rel=1e-5), (
        "held_out's reference is not the model loaded from `reference`")

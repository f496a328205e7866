"""TRL's DPOTrainer on rlhf.py's preference pairs with rlhf.py's settings: the peer side of
benchmarks/trl_dpo_compare.py, which runs it (one process, timed from start to exit).

TRL is not a requirement of the repository. Pinned: trl 1.16.0 with datasets 5.2.0
(`pip install trl==1.16.0 datasets==5.2.0`), beside the repository's transformers 5.24.0 and
torch 2.13.0. (TRL 1.16 has no PPOTrainer: DPO is the trainer of issue 93's that it has.)

It reads the pairs of an rlhf.py run (its pairs.jsonl: prompt, chosen, rejected a line, words
separated by single spaces on Preference-v0's English-words task; read_pairs puts a space
before each completion, as TRL joins the two strings), trains
DPO from the model folder (the warm start, which is also the frozen reference) for --steps
optimizer steps on shuffled batches of num_prompts pairs, and saves the final model and
tokenizer into <output-dir>/final (evaluated outside).

    python benchmarks/trl_dpo_peer.py --model benchmarks/trl/dpo/model --seed 101 \
        --pairs benchmarks/trl/dpo/runs/seed101/pairs.jsonl --steps 100 \
        --output-dir benchmarks/trl/dpo/runs/seed101/trl --settings '{"beta": 0.05, ...}'
"""
import argparse
import json
import os

PROMPT_LEN = 4
"""Preference-v0's prompts: 4 English words, one token each (trl_dpo_compare's tokenizer)"""


def dpo_config_kwargs(s, seed, steps, output_dir):
    """DPOConfig's options from trl_dpo_compare.py's settings (rlhf.py's flags): each that
    rlhf.py has at its value, the rest off."""
    return dict(
        output_dir=output_dir, seed=seed, use_cpu=True, bf16=False, fp16=False,
        report_to="none", save_strategy="no", logging_steps=10, disable_tqdm=True,
        activation_checkpointing=False, dataloader_num_workers=0,
        # the batch: num_prompts pairs a step (rlhf.py's --num-prompts with --algo dpo), every
        # batch full (rlhf.py's run on across a pass's end; here the pairs left over at the end
        # of a pass are dropped), for rlhf.py's number of steps
        per_device_train_batch_size=s["num_prompts"], gradient_accumulation_steps=1,
        dataloader_drop_last=True, max_steps=steps,
        # the optimizer: Adam (AdamW without weight decay) at a constant rate, clipped
        learning_rate=s["dpo_learning_rate"], lr_scheduler_type="constant", warmup_steps=0,
        optim="adamw_torch", weight_decay=0.0, adam_beta1=0.9, adam_beta2=0.999,
        adam_epsilon=1e-8, max_grad_norm=s["max_grad_norm"],
        # the loss: DPO's sigmoid on the summed log-ratios at beta, nothing added
        loss_type=["sigmoid"], beta=s["beta"], label_smoothing=0.0, ld_alpha=None,
        use_weighting=False, f_divergence_type="reverse_kl", sync_ref_model=False,
        disable_dropout=True,
        # the reference: the model as it starts, its log-probabilities computed once before
        # training (rlhf.py's train_dpo does the same)
        precompute_ref_log_probs=True, precompute_ref_batch_size=s["num_prompts"],
        # the sequences: the prompt, the completion and <eos>, cut at P + T_max tokens as
        # rlhf.py's encode_texts cuts them (an 8-word completion loses its <eos>)
        max_length=PROMPT_LEN + s["max_new_tokens"], truncation_mode="keep_start",
        pad_to_multiple_of=None,
    )


def read_pairs(path):
    """pairs.jsonl -> {"prompt": [...], "chosen": [...], "rejected": [...]} (the dataset's
    columns; TRL appends <eos> to each completion). Each completion gets a space in front:
    TRL tokenizes prompt + completion as one string, and Preference-v0's words are separated
    by single spaces ("film looks very good" + " gift is" + "<eos>"; without the space
    "goodgift" is no word). The whitespace pre-tokenizer reads the same tokens as rlhf.py's
    encode_texts, which encodes the prompt and the completion apart; an empty completion is
    " ", <eos> alone."""
    columns = {"prompt": [], "chosen": [], "rejected": []}
    with open(path) as f:
        for line in f:
            if line.strip():
                row = json.loads(line)
                for key in columns:
                    columns[key].append(row[key] if key == "prompt" else " " + row[key])
    return columns


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--model", required=True, help="the local Hugging Face model and tokenizer")
    p.add_argument("--seed", type=int, required=True)
    p.add_argument("--pairs", required=True, help="an rlhf.py run's pairs.jsonl")
    p.add_argument("--steps", type=int, required=True, help="optimizer steps (rlhf.py's count)")
    p.add_argument("--output-dir", required=True)
    p.add_argument("--settings", required=True, help="trl_dpo_compare.py's settings as JSON")
    args = p.parse_args()
    s = json.loads(args.settings)

    import torch
    torch.set_num_threads(s["threads"])  # rlhf.py's --threads
    import datasets
    from transformers import AutoTokenizer
    from trl import DPOConfig, DPOTrainer
    datasets.disable_progress_bars()

    tokenizer = AutoTokenizer.from_pretrained(args.model, local_files_only=True)
    config = DPOConfig(**dpo_config_kwargs(s, args.seed, args.steps, args.output_dir))
    trainer = DPOTrainer(model=args.model, args=config, processing_class=tokenizer,
                         train_dataset=datasets.Dataset.from_dict(read_pairs(args.pairs)))
    trainer.train()
    trainer.save_model(os.path.join(args.output_dir, "final"))


if __name__ == "__main__":
    main()

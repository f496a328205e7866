"""TRL's GRPOTrainer on Addition-v0 or AdditionPartial-v0 with grpo.py's settings: the peer side
of benchmarks/trl_grpo_compare.py, which runs it (one process, timed from start to exit). The
two tasks pose the same problems and share the reward (every sum checked); they differ in the
warm start the model folder holds, made by trl_grpo_compare.py's make-model.

TRL is not a requirement of the repository. Pinned: trl 1.16.0 with datasets 5.2.0
(`pip install trl==1.16.0 datasets==5.2.0`), beside the repository's transformers 5.24.0 and
torch 2.13.0.

It reads the prompts grpo.py poses on the same seed (a JSON list, update by update, written
by trl_grpo_compare.py), rewards each completion with grpo.py's own addition_reward, trains
`--updates` generations of num_prompts x group_size completions, two optimizer steps each,
and saves the final model and tokenizer into <output-dir>/final (evaluated outside).

    python benchmarks/trl_grpo_peer.py --model benchmarks/trl/model --seed 101 \
        --prompts benchmarks/trl/runs/seed101/prompts.json --updates 40 \
        --output-dir benchmarks/trl/runs/seed101/trl --settings '{"num_prompts": 16, ...}'
"""
import argparse
import json
import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--model", required=True, help="the local Hugging Face model and tokenizer")
    p.add_argument("--seed", type=int, required=True)
    p.add_argument("--prompts", required=True, help="a JSON list of the training prompts")
    p.add_argument("--updates", type=int, required=True, help="generations of B x G completions")
    p.add_argument("--output-dir", required=True)
    p.add_argument("--settings", required=True, help="trl_grpo_compare.py's SETTINGS as JSON")
    args = p.parse_args()
    s = json.loads(args.settings)

    import torch
    torch.set_num_threads(s["threads"])  # grpo.py's --threads
    from datasets import Dataset
    from trl import GRPOConfig, GRPOTrainer

    from grpo import addition_reward  # the same reward: 1 for the exact answer

    def exact_answer(prompts, completions, **kwargs):
        return [addition_reward(prompt, completion)
                for prompt, completion in zip(prompts, completions)]

    with open(args.prompts) as f:
        prompts = json.load(f)
    B, G, steps = s["num_prompts"], s["group_size"], s["num_minibatches"]
    assert len(prompts) >= B * args.updates, "fewer prompts than the updates need"
    config = GRPOConfig(
        output_dir=args.output_dir, seed=args.seed, use_cpu=True, bf16=False, fp16=False,
        report_to="none", save_strategy="no", logging_steps=10, disable_tqdm=True,
        activation_checkpointing=False, dataloader_num_workers=0, use_vllm=False,
        # the batch: B prompts x G completions a generation, `steps` optimizer steps on
        # equal shares of it, one pass (grpo.py's --num-prompts, --group-size,
        # --num-minibatches, --update-epochs)
        num_generations=G, steps_per_generation=steps,  # a generation of B * G
        per_device_train_batch_size=B * G // steps, gradient_accumulation_steps=1,
        num_iterations=s["update_epochs"], max_steps=args.updates * steps,
        shuffle_dataset=False,  # grpo.py's prompts in grpo.py's order
        # the optimizer: Adam (AdamW without weight decay), clipped, at a constant rate or
        # (grpo.py's --anneal-lr) one falling linearly to 0, TRL's per optimizer step where
        # grpo.py's falls per update (constant over an update's minibatches)
        learning_rate=s["learning_rate"], warmup_steps=0,
        lr_scheduler_type="linear" if s.get("anneal_lr") else "constant",
        optim="adamw_torch", weight_decay=0.0, max_grad_norm=s["max_grad_norm"],
        # the loss: GRPO's (per-sequence token mean), std-scaled group advantages, k3 at beta
        # without TRL's importance-weighted KL, PPO's symmetric clip
        loss_type="grpo", scale_rewards="group", beta=s["beta"], use_bias_correction_kl=False,
        epsilon=s["clip_coef"], epsilon_high=s["clip_coef"], importance_sampling_level="token",
        mask_truncated_completions=False, disable_dropout=True,
        # sampling: the tempered softmax, nothing cut
        max_completion_length=s["max_new_tokens"], temperature=s["temperature"], top_p=1.0,
        top_k=0, repetition_penalty=1.0,
    )
    trainer = GRPOTrainer(model=args.model, reward_funcs=exact_answer, args=config,
                          train_dataset=Dataset.from_dict({"prompt": prompts[:B * args.updates]}))
    trainer.train()
    trainer.save_model(os.path.join(args.output_dir, "final"))


if __name__ == "__main__":
    main()

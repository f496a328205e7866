"""Tests of grpo.py: the reward, the group advantages, the clipped per-token loss, its three
aggregations, k3 and NLPO's mask by hand, and the loss against TRL's on the same tensors;
the sampler, the buffer and the loop's glue (which tokens count, the frozen reference, the
sampler's log-probabilities, the reference's at the temperature, the group advantages,
NLPO's mask and its sync, the evaluation's held-out split, the warm start's targets); the
task environment; the built-in model's forward pass written out; a smoke run, a Hugging Face
model built and saved here (offline), bad input, determinism; every column of every file a
run writes, recomputed by the test from the saved models and the answers scored. The
plumbing's behaviour is tested once, in test_plumbing.py."""
import contextlib
import copy
import glob
import io
import json
import math
import os
import re
import zlib
from types import SimpleNamespace

import gymnasium as gym
import numpy as np
import pytest
import torch
import torch.nn.functional as F

import grpo
from conftest import (ROOT, approx, check_a_warm_start_is_read_as_tensors_only, detached,
                      read_csv, same_seed_episodes, spy_on, tensor)

LN2, LN3 = math.log(2.0), math.log(3.0)
# A tiny run: 4 prompts in groups of 4 (16 completions a batch), a one-block transformer
TINY = dict(total_timesteps=64, num_prompts=4, group_size=4, sft_steps=3, sft_problems=16,
            n_layer=1, n_head=2, n_embd=16, eval_episodes=2, eval_every=0, eval_samples=2,
            pass_k=2, num_minibatches=2, tensorboard=False, curve=False)
TINY_FLAGS = ["--total-timesteps", "64", "--num-prompts", "4", "--group-size", "4",
              "--sft-steps", "3", "--sft-problems", "16", "--n-layer", "1", "--n-head", "2",
              "--n-embd", "16", "--eval-episodes", "2", "--eval-every", "0", "--eval-samples", "2",
              "--pass-k", "2", "--num-minibatches", "2"]


def tiny_args(tmp_path, **flags):
    return grpo.Args(**{**TINY, "output_dir": str(tmp_path), **flags})


# ---------------------------------------------------------------------------------------
# The reward, by hand: exact answers only
# ---------------------------------------------------------------------------------------
@pytest.mark.parametrize("prompt, completion, reward", [
    ("347+85=", "432", 1.0),      # 347 + 85 = 432
    ("347+85=", "0432", 0.0),     # a leading zero is not the answer as written
    ("347+85=", "", 0.0),         # a missing answer (the end-of-sequence token first)
    ("347+85=", "4320", 0.0),     # an overlong completion, cut at --max-new-tokens: too long
    ("347+85=", "433", 0.0),      # off by one
    ("347+85=", " 432", 0.0),     # a space is not part of the answer
    ("0+0=", "0", 1.0),           # zero is written "0"
    ("999+999=", "1998", 1.0),    # a carry into a new digit
])
def test_the_reward_is_one_for_the_exact_answer_only(prompt, completion, reward):
    assert grpo.addition_reward(prompt, completion) == reward


# ---------------------------------------------------------------------------------------
# Group advantages by hand: two groups of G = 4, rewards [1, 0, 0, 0] and [1, 1, 0, 0]
# ---------------------------------------------------------------------------------------
REWARDS = tensor(1, 0, 0, 0, 1, 1, 0, 0)


def test_group_advantages_with_the_std():
    # group 1: mean 1/4, unbiased std sqrt((0.75^2 + 3 * 0.25^2) / 3) = sqrt(0.25) = 0.5,
    # A = [0.75, -0.25, -0.25, -0.25] / (0.5 + 1e-4); group 2: mean 1/2, std
    # sqrt(4 * 0.25 / 3) = 0.57735, A = [0.5, 0.5, -0.5, -0.5] / 0.57745
    a = grpo.group_advantages(REWARDS, 4)
    s1, s2 = 0.5 + 1e-4, math.sqrt(1 / 3) + 1e-4
    assert a.tolist() == approx([0.75 / s1, -0.25 / s1, -0.25 / s1, -0.25 / s1,
                                 0.5 / s2, 0.5 / s2, -0.5 / s2, -0.5 / s2])


def test_group_advantages_without_the_std_are_dr_grpos():
    a = grpo.group_advantages(REWARDS, 4, scale_rewards=False)
    assert a.tolist() == approx([0.75, -0.25, -0.25, -0.25, 0.5, 0.5, -0.5, -0.5])


def test_rloo_leaves_each_completion_out_of_its_baseline():
    # r_1 = 1 against the others' mean (0 + 0 + 0) / 3 = 0: 1; r_2 = 0 against (1 + 0 + 0) / 3:
    # -1/3. Group 2: 1 - (1 + 0 + 0) / 3 = 2/3, 0 - (1 + 1 + 0) / 3 = -2/3.
    a = grpo.group_advantages(REWARDS, 4, scale_rewards=False, baseline="rloo")
    assert a.tolist() == approx([1, -1 / 3, -1 / 3, -1 / 3, 2 / 3, 2 / 3, -2 / 3, -2 / 3])
    # explicitly, each r_i minus the mean of the other three
    loo = [REWARDS[i].item() - (REWARDS[(i // 4) * 4:(i // 4) * 4 + 4].sum().item()
                                - REWARDS[i].item()) / 3 for i in range(8)]
    assert a.tolist() == approx(loo)


def test_a_group_of_one_reward_value_has_no_advantage():
    for scale in (True, False):
        assert grpo.group_advantages(tensor(1, 1, 1, 0, 0, 0), 3, scale).tolist() == approx(
            [0.0] * 6)


# ---------------------------------------------------------------------------------------
# The clipped per-token loss by hand: ratios 1.5, 0.5, 1.1 with A = +1 and -1
# ---------------------------------------------------------------------------------------
def test_the_clipped_token_loss_by_hand():
    # logprobs - old = ln 1.5, ln 0.5, ln 1.1: ratios 1.5, 0.5, 1.1; clip [0.8, 1.2]
    # A = +1: -min(1.5, 1.2) = -1.2, -min(0.5, 0.8) = -0.5, -min(1.1, 1.1) = -1.1
    # A = -1: -min(-1.5, -1.2) = 1.5, -min(-0.5, -0.8) = 0.8, -min(-1.1, -1.1) = 1.1
    logp = torch.log(tensor(1.5, 0.5, 1.1)).repeat(2, 1)
    loss, clipped = grpo.clipped_token_loss(logp, torch.zeros(2, 3), tensor(1, -1), 0.2, 0.2)
    assert loss.tolist() == [approx([-1.2, -0.5, -1.1]), approx([1.5, 0.8, 1.1])]
    assert clipped.tolist() == [[True, True, False]] * 2
    # DAPO's clip-higher, [0.8, 1.28]: only the ratio above 1 moves, -min(1.5, 1.28) = -1.28
    loss, _ = grpo.clipped_token_loss(logp, torch.zeros(2, 3), tensor(1, -1), 0.2, 0.28)
    assert loss.tolist() == [approx([-1.28, -0.5, -1.1]), approx([1.5, 0.8, 1.1])]


def test_the_clipped_token_loss_gradient_is_zero_where_clipped():
    # d/dlogp of -ratio * A = -ratio * A where the unclipped term is the minimum; 0 where the
    # clipped one is (ratio 1.5 > 1.2, A = +1): the token's gradient stops.
    logp = torch.log(tensor(1.5, 1.1)).unsqueeze(0).requires_grad_()
    loss, _ = grpo.clipped_token_loss(logp, torch.zeros(1, 2), tensor(1.0), 0.2, 0.2)
    loss.sum().backward()
    assert logp.grad.tolist() == [approx([0.0, -1.1])]


# ---------------------------------------------------------------------------------------
# The three aggregations by hand: two completions of 3 and 1 tokens, T_max = 3
# ---------------------------------------------------------------------------------------
PER_TOKEN = tensor(1, 2, 3, 4, 100, 100).view(2, 3)  # 100: padding, which must never count
MASK = tensor(1, 1, 1, 1, 0, 0).view(2, 3)


@pytest.mark.parametrize("loss_agg, expected", [
    ("seq-mean-token-mean", 3.0),        # ((1 + 2 + 3) / 3 + 4 / 1) / 2 = (2 + 4) / 2
    ("token-mean", 2.5),                 # (1 + 2 + 3 + 4) / 4
    ("seq-mean-token-sum-norm", 10 / 6), # (1 + 2 + 3 + 4) / (2 completions * 3)
])
def test_the_three_aggregations_by_hand(loss_agg, expected):
    assert grpo.aggregate(PER_TOKEN, MASK, loss_agg, 3).item() == approx(expected)


def test_dr_grpos_constant_is_the_longest_completion_not_the_batchs():
    # 10 / (2 * 5) = 1 with T_max 5, whatever the completions' lengths
    assert grpo.aggregate(PER_TOKEN, MASK, "seq-mean-token-sum-norm", 5).item() == approx(1.0)


# ---------------------------------------------------------------------------------------
# k3 by hand, and its gradient's sign
# ---------------------------------------------------------------------------------------
def test_k3_by_hand():
    # pi = 0.5, pi_ref = 0.25: r = pi_ref / pi = 0.5, k3 = r - ln r - 1 = 0.5 + ln 2 - 1
    # = 0.193147; pi = 0.25, pi_ref = 0.5: r = 2, k3 = 2 - ln 2 - 1 = 0.306853; equal: 0
    logp, ref = torch.log(tensor(0.5, 0.25, 0.3)), torch.log(tensor(0.25, 0.5, 0.3))
    assert grpo.k3_kl(logp, ref).tolist() == approx([0.5 + LN2 - 1, 1 - LN2, 0.0])


def test_k3s_gradient_pulls_the_policy_toward_the_reference():
    # d k3 / d logp = 1 - pi_ref / pi: 1 - 0.5 = 0.5 > 0 where pi = 0.5 > pi_ref = 0.25 (a
    # descent step lowers logp), 1 - 2 = -1 < 0 where pi = 0.25 < pi_ref = 0.5 (raises it).
    # The values first, as in test_k3_by_hand: [0.5 + ln 2 - 1, 2 - ln 2 - 1] = [0.193147, 0.306853]
    logp = torch.log(tensor(0.5, 0.25)).requires_grad_()
    k3 = grpo.k3_kl(logp, torch.log(tensor(0.25, 0.5)))
    assert k3.tolist() == approx([0.5 + LN2 - 1, 1 - LN2])
    k3.sum().backward()
    assert logp.grad.tolist() == approx([0.5, -1.0]), (
        "k3 keeps its graph to logprobs: d k3 / d logp = 1 - pi_ref / pi")


def test_the_grpo_loss_adds_beta_times_k3_to_the_clipped_term():
    # one completion of 2 tokens, ratio 1 (logp = old), A = 2: l = -2 a token; k3 of pi = 0.5
    # against pi_ref = 0.25 is 0.193147 a token; beta 0.1: L = -2 + 0.0193147 a token, mean the same
    logp = torch.log(tensor(0.5, 0.5)).unsqueeze(0)
    loss, pg, kl, clipfrac = grpo.grpo_loss(
        logprobs=logp, old_logprobs=logp, ref_logprobs=torch.log(tensor(0.25, 0.25)).unsqueeze(0),
        advantages=tensor(2.0), completion_mask=torch.ones(1, 2), clip_low=0.2, clip_high=0.2,
        beta=0.1, loss_agg="seq-mean-token-mean", max_new_tokens=2)
    assert loss.item() == approx(-2 + 0.1 * (0.5 + LN2 - 1))
    assert (pg.item(), kl.item(), clipfrac.item()) == (approx(-2), approx(0.5 + LN2 - 1), 0.0)


# ---------------------------------------------------------------------------------------
# The loss against TRL's GRPOTrainer._compute_loss on the same tensors (TRL is not a
# requirement: pip install trl==1.16.0; .ci/run installs it, and these run in the slow tier)
# ---------------------------------------------------------------------------------------
TRL_LOSS = {"seq-mean-token-mean": "grpo", "token-mean": "bnpo",
            "seq-mean-token-sum-norm": "dr_grpo"}
TRL_PIN = "trl==1.16.0"
"""the TRL whose GRPOTrainer the loss is checked against: the one the skip names and .ci/run
installs"""


def test_ci_installs_the_trl_the_cross_checks_name():
    # a CI without TRL would skip the cross-checks below (issue 95): .ci/run installs the pin
    with open(os.path.join(ROOT, ".ci", "run")) as f:
        assert re.findall(r"\btrl==[\w.]+", f.read()) == [TRL_PIN]


@pytest.mark.parametrize("loss_agg", TRL_LOSS)
@pytest.mark.parametrize("beta, clip_high", [(0.0, 0.2), (0.04, 0.28)])
@pytest.mark.slow  # TRL's cross-check: importing trl takes seconds
def test_the_loss_equals_trls_on_the_same_tensors(loss_agg, beta, clip_high):
    trainer = pytest.importorskip("trl.trainer.grpo_trainer", reason=f"pip install {TRL_PIN}")
    torch.manual_seed(0)
    n, t = 6, 5
    logp = (torch.rand(n, t) * -3).requires_grad_()
    old = (logp + torch.randn(n, t) * 0.3).detach()  # ratios on both sides of the clip range
    ref = (logp + torch.randn(n, t) * 0.5).detach()
    mask = grpo.completion_mask_of(torch.tensor([[3, 1, 0, 0, 0], [3, 4, 5, 6, 7], [1, 0, 0, 0, 0],
                                                 [3, 4, 1, 0, 0], [3, 4, 5, 1, 0], [3, 1, 0, 0, 0]]), 1)
    advantages = grpo.group_advantages(tensor(1, 0, 0, 1, 1, 0), 3)
    ours, *_ = grpo.grpo_loss(logprobs=logp, old_logprobs=old, ref_logprobs=ref,
                              advantages=advantages, completion_mask=mask, clip_low=0.2,
                              clip_high=clip_high, beta=beta, loss_agg=loss_agg, max_new_tokens=t)
    ours_grad, = torch.autograd.grad(ours, logp)

    # TRL's trainer method on a stand-in trainer: its per-token log-probabilities are ours
    logp_trl = logp.detach().clone().requires_grad_()
    metrics = {"eval": __import__("collections").defaultdict(list)}
    stand_in = SimpleNamespace(
        _get_per_token_logps_and_entropies=lambda *a, **k: (logp_trl, torch.zeros(n, t), None),
        top_entropy_quantile=1.0, off_policy_mask_threshold=None, importance_sampling_level="token",
        beta=beta, loss_type=TRL_LOSS[loss_agg], epsilon_low=0.2, epsilon_high=clip_high,
        use_vllm=False, model=SimpleNamespace(training=False), max_completion_length=t,
        current_gradient_accumulation_steps=1, _entropy_bonus_enabled=False,
        aux_loss_enabled=False, _metrics=metrics,
        args=SimpleNamespace(use_bias_correction_kl=False, delta=None),
        accelerator=SimpleNamespace(num_processes=1, reduce=lambda x, reduction: x,
                                    gather=lambda x: x, gather_for_metrics=lambda x: x))
    inputs = {"prompt_ids": torch.zeros(n, 2, dtype=torch.long), "prompt_mask": torch.ones(n, 2),
              "completion_ids": torch.zeros(n, t, dtype=torch.long), "completion_mask": mask,
              "advantages": advantages, "old_per_token_logps": old, "ref_per_token_logps": ref}
    theirs = trainer.GRPOTrainer._compute_loss(stand_in, None, inputs)
    theirs_grad, = torch.autograd.grad(theirs, logp_trl)
    assert ours.item() == pytest.approx(theirs.item(), rel=1e-6, abs=1e-7)
    assert torch.allclose(ours_grad, theirs_grad, atol=1e-7)


def test_the_loss_equals_a_loop_over_completions_and_tokens():
    # The same loss written another way: Python loops, math.exp, each case of the clip
    torch.manual_seed(1)
    n, t, beta, lo, hi = 4, 3, 0.04, 0.2, 0.28
    logp, old, ref = torch.rand(n, t) * -2, torch.rand(n, t) * -2, torch.rand(n, t) * -2
    mask = tensor(1, 1, 1, 1, 0, 0, 1, 1, 0, 1, 1, 1).view(n, t)
    adv = tensor(1.0, -0.5, 0.25, -2.0)
    per_token = [[0.0] * t for _ in range(n)]
    for i in range(n):
        for j in range(t):
            ratio = math.exp(logp[i, j] - old[i, j])
            clipped = min(max(ratio, 1 - lo), 1 + hi)
            d = (ref[i, j] - logp[i, j]).item()
            per_token[i][j] = -min(ratio * adv[i].item(), clipped * adv[i].item()) + beta * (
                math.exp(d) - d - 1)
    lengths = [sum(mask[i].tolist()) for i in range(n)]
    sums = [sum(per_token[i][j] for j in range(t) if mask[i, j]) for i in range(n)]
    expected = {"seq-mean-token-mean": sum(s / k for s, k in zip(sums, lengths)) / n,
                "token-mean": sum(sums) / sum(lengths), "seq-mean-token-sum-norm": sum(sums) / (n * t)}
    for loss_agg, value in expected.items():
        loss, *_ = grpo.grpo_loss(logprobs=logp, old_logprobs=old, ref_logprobs=ref, advantages=adv,
                                  completion_mask=mask, clip_low=lo, clip_high=hi, beta=beta,
                                  loss_agg=loss_agg, max_new_tokens=t)
        assert loss.item() == pytest.approx(value, rel=1e-5)


# ---------------------------------------------------------------------------------------
# The built-in model: nanoGPT's shape, written out here one head and one position at a time
# ---------------------------------------------------------------------------------------
def gpt_by_hand(model, tokens, n_head):
    """The forward pass spelled out: x = wte[token] + wpe[position]; each block adds
    attention of LayerNorm(x) (per head h of size d = C / n_head: softmax over s <= t of
    q_t . k_s / sqrt(d), times v_s, the heads side by side, then c_proj) and the MLP (Linear,
    GELU, Linear) of LayerNorm(x); logits = LayerNorm_f(x) times the token embedding."""
    x = model.wte.weight[tokens] + model.wpe.weight[torch.arange(tokens.shape[1])]
    for block in model.h:
        h = F.layer_norm(x, x.shape[-1:], block.ln_1.weight, block.ln_1.bias)
        q, k, v = (h @ block.attn.c_attn.weight.T + block.attn.c_attn.bias).chunk(3, dim=-1)
        C, d = x.shape[-1], x.shape[-1] // n_head
        out = torch.zeros_like(x)
        for head in range(n_head):
            cols = slice(head * d, (head + 1) * d)
            for t in range(tokens.shape[1]):
                scores = (q[:, t, None, cols] * k[:, :t + 1, cols]).sum(-1) / math.sqrt(d)
                w = torch.softmax(scores, dim=-1)  # [N, t + 1]: position t's weights on s <= t
                out[:, t, cols] = (w[:, :, None] * v[:, :t + 1, cols]).sum(1)
        x = x + out @ block.attn.c_proj.weight.T + block.attn.c_proj.bias
        h = F.layer_norm(x, (C,), block.ln_2.weight, block.ln_2.bias)
        fc, proj = block.mlp[0], block.mlp[2]
        x = x + F.gelu(h @ fc.weight.T + fc.bias) @ proj.weight.T + proj.bias
    x = F.layer_norm(x, x.shape[-1:], model.ln_f.weight, model.ln_f.bias)
    return x @ model.wte.weight.T


def test_the_built_in_model_is_the_flags_shape_and_its_forward_pass_by_hand(tmp_path):
    # --n-layer 3 --n-head 2 --n-embd 8: three blocks of two heads of 4; the logits equal the
    # forward pass written out position by position (causal: changing the last token leaves
    # every earlier position's logits as they were); the head shares the token embedding
    args = tiny_args(tmp_path, n_layer=3, n_head=2, n_embd=8)
    grpo.register_tasks()
    tokenizer, prompt_len = grpo.check_spaces(args, *grpo.check_env(args))
    model = grpo.make_policy(args, tokenizer, prompt_len)
    assert len(model.h) == 3 and all(block.attn.n_head == 2 for block in model.h)
    assert model.wpe.weight.shape == (prompt_len + args.max_new_tokens, 8)
    assert model.lm_head.weight is model.wte.weight
    with torch.no_grad():
        for p in model.parameters():  # away from the initialization's zero biases
            p.add_(torch.randn_like(p) * 0.3)
        tokens = torch.randint(len(tokenizer), (2, 7))
        logits = model(tokens)[0]
        assert torch.allclose(logits, gpt_by_hand(model, tokens, n_head=2), atol=1e-5)
        changed = tokens.clone()
        changed[:, -1] = (changed[:, -1] + 1) % len(tokenizer)
        assert torch.allclose(model(changed)[0][:, :-1], logits[:, :-1], atol=1e-6)
        assert not torch.allclose(model(changed)[0][:, -1], logits[:, -1])


def test_the_built_in_models_initialization_is_gpt_2s():
    # N(0, 0.02) for every matrix, 0.02 / sqrt(2 * n_layer) for the attention's output
    # projection (n_layer 2: 0.01), zero biases; 64-wide, so 4,096 draws a matrix
    torch.manual_seed(0)
    model = grpo.GPT(vocab_size=14, block_size=11, n_layer=2, n_head=4, n_embd=64)
    for name, p in model.named_parameters():
        if name.endswith("bias"):
            assert not p.any(), name
        elif p.dim() == 2:
            expected = 0.01 if name.endswith("attn.c_proj.weight") else 0.02
            assert p.std().item() == pytest.approx(expected, rel=0.1), name


# ---------------------------------------------------------------------------------------
# NLPO's top-p mask, the masked and tempered log-probabilities
# ---------------------------------------------------------------------------------------
@pytest.mark.parametrize("top_p, expected", [
    (0.5, [True, False, False]),   # before each, most likely first: 0, 0.5, 0.8; < 0.5: one
    (0.7, [True, True, False]),    # < 0.7: two (0.5 + 0.3 = 0.8 reaches it)
    (0.8, [True, True, False]),    # 0.8 < 0.8 is false: still two
    (0.85, [True, True, True]),
    (1e-3, [True, False, False]),  # the most likely token is always kept
])
def test_top_p_mask_by_hand(top_p, expected):
    logits = torch.log(tensor(0.5, 0.3, 0.2))
    assert grpo.top_p_mask(logits, top_p).tolist() == expected
    # the order of the vocabulary does not matter: [0.2, 0.5, 0.3]
    assert grpo.top_p_mask(logits[[2, 0, 1]], top_p).tolist() == [expected[i] for i in (2, 0, 1)]


def test_masked_tokens_get_no_probability():
    # logits [0, ln 2, 100, ln 3], token 2 masked: e^l = [1, 2, -, 3], sum 6
    logits = tensor(0, LN2, 100, LN3).view(1, 1, 4).expand(1, 4, 4)
    masks = tensor(1, 1, 0, 1).bool().view(1, 1, 4).expand(1, 4, 4)
    logp = grpo.token_logprobs(logits, torch.tensor([[0, 1, 3, 2]]), action_masks=masks)
    assert logp[0, :3].tolist() == approx([-math.log(6), -LN3, -LN2])
    assert logp[0, 3].item() < -1e7  # about -1e8: probability exactly 0


def test_token_logprobs_divide_the_logits_by_the_temperature():
    # logits [0, ln 4] at temperature 2: [0, ln 2], pi = [1/3, 2/3]
    logits = tensor(0, math.log(4)).view(1, 1, 2)
    assert grpo.token_logprobs(logits, torch.tensor([[1]]), temperature=2.0).item() == approx(
        math.log(2 / 3))


class FixedLogits(torch.nn.Module):
    """A 'language model' whose next-token logits are the same at every position (as the
    built-in GPT's, (logits, hidden states); it has none)."""

    def __init__(self, logits):
        super().__init__()
        self.logits = torch.nn.Parameter(torch.as_tensor(logits, dtype=torch.float32))

    def forward(self, tokens):
        return self.logits.expand(*tokens.shape, len(self.logits)), None


def test_sampling_follows_the_temperature_and_returns_its_log_probabilities():
    # tokens 0 (pad), 1 (eos), 2, 3 with logits [-inf-ish, -inf-ish, 0, ln 9]: at temperature 2
    # the logits are [0, ln 3], so pi(3) = 3/4 (at temperature 1 it would be 9/10)
    torch.manual_seed(0)
    model = FixedLogits([-1e9, -1e9, 0.0, math.log(9)])
    prompts = torch.full((4000, 2), 2)
    tokens, mask, logp, masks = grpo.sample(model, prompts, 2, 1, 0, temperature=2.0)
    completions = tokens[:, 2:]
    assert masks is None and mask.eq(1).all()  # no end-of-sequence token: all count
    assert completions.eq(3).float().mean().item() == pytest.approx(0.75, abs=0.02)
    expected = torch.where(completions == 3, math.log(3 / 4), math.log(1 / 4))
    assert torch.allclose(logp, expected, atol=1e-6)


def test_sampling_under_nlpos_mask_never_takes_a_masked_token():
    # The masking model puts 0.6 and 0.3 on tokens 2 and 3 and 0.1 on the end token 1: top-p
    # 0.85 keeps 2 and 3 only (before each: 0, 0.6, 0.9). The policy prefers token 1 (the end)
    # most, but may not take it: completions run their full length, of tokens 2 and 3, whose
    # log-probabilities are renormalized over {2, 3}: policy logits [., 5, 0, ln 3] -> 1/4, 3/4.
    torch.manual_seed(0)
    mask_model = FixedLogits(torch.log(tensor(1e-9, 0.1, 0.6, 0.3)))
    policy = FixedLogits([-1e9, 5.0, 0.0, LN3])
    tokens, mask, logp, masks = grpo.sample(policy, torch.full((500, 2), 2), 3, 1, 0,
                                            mask_model=mask_model, top_p=0.85)
    completions = tokens[:, 2:]
    assert set(completions.unique().tolist()) == {2, 3} and mask.eq(1).all()
    assert masks.shape == (500, 3, 4) and masks[..., 2:].all() and not masks[..., :2].any()
    assert torch.allclose(logp, torch.where(completions == 3, math.log(0.75), math.log(0.25)))


def test_greedy_sampling_takes_the_most_likely_token_and_pads_after_the_end():
    # the policy's most likely token is 1, the end: every completion is [1, pad, pad]
    tokens, mask, logp, _ = grpo.sample(FixedLogits([0.0, 3.0, 1.0]), torch.full((2, 2), 2), 3,
                                        1, 0, greedy=True)
    assert tokens[:, 2:].tolist() == [[1, 0, 0]] * 2 and mask.tolist() == [[1, 0, 0]] * 2
    assert logp[:, 1:].eq(0).all()  # padding's log-probabilities are 0, never counted


# ---------------------------------------------------------------------------------------
# Tokens: left-padded prompts, completion masks, decoding
# ---------------------------------------------------------------------------------------
def test_the_completion_mask_counts_up_to_and_with_the_first_end_token():
    completions = torch.tensor([[5, 1, 0, 0], [5, 6, 7, 8], [1, 0, 0, 0], [5, 1, 1, 1]])
    assert grpo.completion_mask_of(completions, 1).tolist() == [
        [1, 1, 0, 0], [1, 1, 1, 1], [1, 0, 0, 0], [1, 1, 0, 0]]  # the last: pad = eos (GPT-2)


def test_prompts_are_left_padded_and_completions_decoded_before_their_end():
    tok = grpo.Tokenizer("0123456789+=", grpo.SPECIAL_TOKENS)  # <pad> 0, <eos> 1, "+" 2, "0" 3, ..., "=" 13
    assert tok.encode("12+3=") == [4, 5, 2, 6, 13] and tok.decode([4, 5]) == "12"
    prompts = grpo.encode_prompts(tok, ["12+3=", "1+2="], 6, "cpu")
    assert prompts.tolist() == [[0, 4, 5, 2, 6, 13], [0, 0, 4, 2, 5, 13]]
    completions = torch.tensor([[4, 8, 1, 0], [1, 0, 0, 0], [4, 4, 4, 4]])
    assert grpo.decode_completions(tok, completions) == ("15", "", "1111")


# ---------------------------------------------------------------------------------------
# The task environment
# ---------------------------------------------------------------------------------------
def held_out(prompt):
    return zlib.crc32(prompt.removesuffix("=").encode()) % 10 == 0


def test_training_never_poses_a_held_out_problem_and_the_evaluation_only_those():
    grpo.register_tasks()
    for flag in (False, True):
        for env_id, digits in (("Addition-v0", 2), ("Addition3-v0", 3)):
            env = grpo.gym.make(env_id, held_out=flag)
            prompts = [env.reset(seed=7 if i == 0 else None)[0] for i in range(300)]
            assert {held_out(p) for p in prompts} == {flag}
            assert len(set(prompts)) > 200  # drawn at random from thousands of problems
            numbers = [int(x) for p in prompts for x in p[:-1].split("+")]
            assert min(numbers) >= 0 and max(numbers) < 10 ** digits
            assert max(numbers) >= 10 ** digits - 10 ** (digits - 1)  # up to digits digits


def test_an_episode_is_one_answer_and_its_return_the_reward():
    grpo.register_tasks()
    env = grpo.gym.make("Addition-v0")
    prompt, info = env.reset(seed=0)
    a, b = (int(x) for x in prompt[:-1].split("+"))
    assert info["answer"] == str(a + b)
    _, reward, terminated, truncated, _ = env.step(str(a + b))
    assert (reward, terminated, truncated) == (1.0, True, False)
    env.reset(seed=0)
    assert env.step(str(a + b + 1))[1] == 0.0
    frame = grpo.AdditionEnv(render_mode="rgb_array")
    frame.reset(seed=0)
    image = frame.render()
    assert image.dtype == np.uint8 and image.ndim == 3 and image.shape[0] % 2 == 0


def test_the_task_draws_every_operand_from_0_to_99():
    # Addition-v0's operands are uniform over 0..99: over 3,000 training problems (6,000
    # operands, each value missed with probability 0.99^6000 < 1e-26) both ends turn up, and
    # every problem is a + b = with its sum as the answer.
    grpo.register_tasks()
    env = gym.make("Addition-v0", held_out=False)
    operands = []
    for i in range(3000):
        prompt, info = env.reset(seed=7 if i == 0 else None)
        a, b = (int(x) for x in prompt[:-1].split("+"))
        assert info["answer"] == str(a + b)
        operands += [a, b]
    assert min(operands) == 0 and max(operands) == 99


def test_minibatches_are_a_fresh_shuffle_of_the_whole_batch():
    # 16 completions in 2 minibatches: together each completion exactly once, in an order
    # that is shuffled (the identity order has probability 1/16! here) and new at each pass,
    # so a minibatch is not always the same half of the groups.
    n = 16
    buffer = grpo.GroupBuffer(torch.zeros(n, 8, dtype=torch.long), torch.ones(n, 2),
                              torch.zeros(n, 2), torch.zeros(n, 2), torch.zeros(n), torch.zeros(n))
    torch.manual_seed(0)
    first, second = buffer.minibatches(2), buffer.minibatches(2)
    for parts in (first, second):
        assert [len(p) for p in parts] == [8, 8]
        assert sorted(torch.cat(parts).tolist()) == list(range(n))
    assert torch.cat(first).tolist() != list(range(n))
    assert torch.cat(first).tolist() != torch.cat(second).tolist()


def test_the_budget_is_rounded_down_to_whole_batches(tmp_path):
    # 4 prompts in groups of 2: a batch is 8 completions, so --total-timesteps 44 trains on
    # 44 // 8 * 8 = 40 (5 batches), never 44 // 4 * 2 = 22 rounded up to 24 (3 batches).
    summary = grpo.main(tiny_args(tmp_path, eval_episodes=0, num_prompts=4, group_size=2,
                                  total_timesteps=44))
    assert summary["global_steps"] == 40


def test_a_groups_identically_seeded_environments_pose_the_same_problems():
    # the loop seeds the G environments of a group alike: their prompts agree at every step
    grpo.register_tasks()
    envs = grpo.make_vector_env("Addition-v0", 6, held_out=False)
    prompts, _ = envs.reset(seed=[11, 11, 11, 12, 12, 12])
    for _ in range(3):
        assert len(set(prompts[:3])) == 1 and len(set(prompts[3:])) == 1
        assert prompts[0] != prompts[3]
        prompts = envs.step(("1",) * 6)[0]
    envs.close()


# ---------------------------------------------------------------------------------------
# The loop's glue
# ---------------------------------------------------------------------------------------
def pay_at_random(monkeypatch, p=0.5, seed=0):
    """A stand-in reward that pays 1 with probability p whatever the answer; returns the list
    of what it paid, in the order the environments asked. A tiny model's answers are all wrong:
    every group would hold one reward value, every advantage 0, and the policy would move only
    by floating-point noise (two threads' sums; none on one thread)."""
    rng, paid = np.random.default_rng(seed), []

    def reward(prompt, completion):
        paid.append(float(rng.random() < p))
        return paid[-1]
    monkeypatch.setattr(grpo, "addition_reward", reward)
    return paid


def state_of(model):
    return {k: v.clone() for k, v in model.state_dict().items()}


def same_state(model, state):
    return all(torch.equal(model.state_dict()[k], v) for k, v in state.items())


def spy_on_minibatches(monkeypatch):
    """(buffer, index tensor) of each minibatch the update takes, in order."""
    chunks, minibatches = [], grpo.GroupBuffer.minibatches

    def record(self, n):
        parts = minibatches(self, n)
        chunks.extend((self, idx) for idx in parts)
        return parts
    monkeypatch.setattr(grpo.GroupBuffer, "minibatches", record)
    return chunks


def spy_on_prompts(monkeypatch):
    """Each prompt the task's reward is asked about, in order (the reward itself unchanged)."""
    asked, reward = [], grpo.addition_reward
    monkeypatch.setattr(grpo, "addition_reward",
                        lambda prompt, completion: asked.append(prompt) or reward(prompt, completion))
    return asked


def spy_on_buffers(monkeypatch):
    """Each GroupBuffer the loop builds."""
    buffers, init = [], grpo.GroupBuffer.__init__

    def spy(self, *args, **kwargs):
        init(self, *args, **kwargs)
        buffers.append(self)
    monkeypatch.setattr(grpo.GroupBuffer, "__init__", spy)
    return buffers


def test_the_buffer_holds_what_the_sampler_gave_and_counts_only_completion_tokens(
        tmp_path, monkeypatch):
    outputs, sample = [], grpo.sample

    def keep(*args, **kwargs):
        outputs.append(sample(*args, **kwargs))
        return outputs[-1]
    monkeypatch.setattr(grpo, "sample", keep)
    buffers = spy_on_buffers(monkeypatch)
    losses = spy_on(monkeypatch, grpo, "grpo_loss", lambda **kw: kw)
    grpo.main(tiny_args(tmp_path, eval_episodes=0))
    assert len(buffers) == len(outputs) == 4  # 64 completions in batches of 16
    prompt_len = 6  # Addition-v0's longest prompt, "99+99="
    for buffer, (tokens, mask, logprobs, masks) in zip(buffers, outputs):
        # the old log-probabilities are the sampler's own, not recomputed
        assert buffer.old_logprobs is logprobs or torch.equal(buffer.old_logprobs, logprobs)
        assert torch.equal(buffer.tokens, tokens) and masks is None
        # the mask counts each completion's tokens up to its end token (an explicit loop)
        for row, m in zip(tokens[:, prompt_len:].tolist(), buffer.completion_mask.tolist()):
            n = row.index(1) + 1 if 1 in row else len(row)
            assert m == [1.0] * n + [0.0] * (len(row) - n)
        assert buffer.completion_mask.shape == (16, 5)  # T columns: no prompt position
        assert buffer.old_logprobs[buffer.completion_mask == 0].eq(0).all()
    # every loss call got the buffer's rows: its completion mask, old and reference log-probs
    assert len(losses) == 8  # 4 updates x 2 minibatches of 8
    for kw in losses:
        assert kw["completion_mask"].shape == (8, 5) and kw["max_new_tokens"] == 5


def test_the_reference_never_learns_and_is_the_warm_started_policy(tmp_path, monkeypatch):
    # frozen_copy is called once (no --top-p: no masking copy), after the warm start: the
    # reference is the policy as the warm start left it, and stays so while the policy moves
    made, frozen_copy, policies, make_policy = [], grpo.frozen_copy, [], grpo.make_policy

    def keep(model):
        made.append((frozen_copy(model), {k: v.clone() for k, v in model.state_dict().items()}))
        return made[-1][0]
    monkeypatch.setattr(grpo, "frozen_copy", keep)
    monkeypatch.setattr(grpo, "make_policy", lambda *a: policies.append(make_policy(*a)) or policies[-1])
    starts = spy_on(monkeypatch, grpo, "warm_start", lambda args, policy, *a: {
        k: v.clone() for k, v in policy.state_dict().items()})
    pay_at_random(monkeypatch)  # advantages that are not all 0: the policy moves
    grpo.main(tiny_args(tmp_path, eval_episodes=0, learning_rate=0.05))
    ((reference, at_copy),) = made
    assert any(not torch.equal(starts[0][k], v) for k, v in at_copy.items())  # after the warm start
    assert all(torch.equal(reference.state_dict()[k], v) for k, v in at_copy.items())
    assert not any(p.requires_grad for p in reference.parameters())
    (policy,) = policies
    assert any(not torch.equal(policy.state_dict()[k], v) for k, v in at_copy.items())


def test_dynamic_sampling_keeps_only_groups_of_varied_rewards(tmp_path, monkeypatch):
    # A stand-in reward pays 1 with probability 0.3, whatever the answer: about a quarter of
    # the groups of 4 are all 0 (0.7^4 = 0.24). Every group in a buffer has two reward values,
    # and the buffer is full (16 completions) from at most --max-sample-rounds rounds.
    rng = np.random.default_rng(0)
    monkeypatch.setattr(grpo, "addition_reward", lambda prompt, completion: float(rng.random() < 0.3))
    buffers = spy_on_buffers(monkeypatch)
    updates = spy_on(monkeypatch, grpo.Run, "update", lambda self, step, *loss, **kw: (step, kw))
    grpo.main(tiny_args(tmp_path, eval_episodes=0, dynamic_sampling=True, total_timesteps=160))
    assert buffers
    for buffer in buffers:
        groups = buffer.rewards.view(-1, 4)
        assert (groups.max(1).values > groups.min(1).values).all()
    # full batches, but the last, which the budget may cut short
    assert [len(b) for b in buffers[:-1]] == [16] * (len(buffers) - 1) and len(buffers[-1]) <= 16
    # more completions were sampled than trained on: the budget counts them all
    assert updates[-1][0] == 160 and len(updates) < 10


def test_dynamic_sampling_drops_all_correct_groups_and_logs_every_sampled_reward(
        tmp_path, monkeypatch):
    # A stand-in pays 1 with probability 0.7: about a quarter of the groups of 4 are all 1
    # (0.7^4 = 0.24), which carry no signal either and are dropped as the all-0 ones are.
    # updates.csv's reward_mean is the mean of every completion sampled since the last update,
    # dropped groups included: paid[step_(k-1):step_k], the completions counted in order.
    paid = pay_at_random(monkeypatch, p=0.7)
    buffers = spy_on_buffers(monkeypatch)
    updates = spy_on(monkeypatch, grpo.Run, "update", lambda self, step, *loss, **kw: (step, kw))
    grpo.main(tiny_args(tmp_path, eval_episodes=0, dynamic_sampling=True, total_timesteps=160))
    groups = [paid[i:i + 4] for i in range(0, len(paid), 4)]
    assert any(sum(g) == 4 for g in groups)  # could fail: some group was all correct
    for buffer in buffers:
        kept = buffer.rewards.view(-1, 4)
        assert (kept.max(1).values > kept.min(1).values).all()
    previous = 0
    for step, kw in updates:
        assert kw["reward_mean"] == approx(sum(paid[previous:step]) / (step - previous))
        previous = step
    # could fail: some update sampled a group that was dropped, so the kept batch's mean differs
    assert any(kw["reward_mean"] != approx(b.rewards.mean().item())
               for (_, kw), b in zip(updates, buffers))


def test_training_poses_only_training_problems(tmp_path, monkeypatch):
    # The held-out tenth (crc32 of "a+b" divisible by 10) is the evaluation's alone: every
    # prompt a training batch is paid for is a training problem, and every evaluation prompt
    # a held-out one. 64 training prompts: were they drawn from all problems, about 6 would be
    # held out.
    asked = spy_on_prompts(monkeypatch)
    evaluated = []
    act_of = grpo.greedy_policy

    def spy(models, envs):
        act = act_of(models, envs)
        return lambda obs, info: evaluated.extend(obs) or act(obs, info)
    monkeypatch.setattr(grpo, "greedy_policy", spy)
    grpo.main(tiny_args(tmp_path, eval_episodes=8))
    # paid in turn: the warm start's held-out measures (8 greedy, then 64 samples of each of
    # the 8), the 64 training completions, the end's held-out measures (as the start's),
    # then the final greedy evaluation's 8
    measured = 8 + 64 * 8
    assert len(asked) == measured + 64 + measured + 8 and len(evaluated) == 8
    assert asked[-8:] == evaluated and asked[:8] == asked[-measured - 8:-measured] == evaluated
    training = asked[measured:measured + 64]
    assert not any(zlib.crc32(p[:-1].encode()) % 10 == 0 for p in training)
    assert all(zlib.crc32(p[:-1].encode()) % 10 == 0 for p in asked if p not in training)


def test_the_evaluation_decodes_greedily(tmp_path):
    # greedy_policy's answers are the argmax decoding, token by token, written out here with
    # the model's own logits (no sampling: the same answers whatever the torch seed).
    args = tiny_args(tmp_path, n_embd=16)
    grpo.register_tasks()
    tokenizer, prompt_len = grpo.check_spaces(args, *grpo.check_env(args))
    torch.manual_seed(3)
    policy = grpo.make_policy(args, tokenizer, prompt_len)
    with torch.no_grad():  # a sharper, arbitrary model, so that sampling would differ
        for p in policy.parameters():
            p.mul_(4.0)
    prompts = ["12+34=", "5+67=", "99+1=", "3+4="]
    act = grpo.greedy_policy({"policy": policy}, None)
    torch.manual_seed(0)
    first = act(prompts, {})
    torch.manual_seed(1)
    assert act(prompts, {}) == first
    tokens = grpo.encode_prompts(tokenizer, prompts, prompt_len, "cpu")
    done = torch.zeros(len(prompts), dtype=torch.bool)
    for _ in range(args.max_new_tokens):
        with torch.no_grad():
            nxt = policy(tokens)[0][:, -1].argmax(-1)
        nxt = torch.where(done, torch.full_like(nxt, grpo.pad_id_of(tokenizer)), nxt)
        done |= nxt == tokenizer.eos_token_id
        tokens = torch.cat([tokens, nxt[:, None]], dim=1)
    assert first == grpo.decode_completions(tokenizer, tokens[:, prompt_len:])
    # could fail: sampling at temperature 1 gives other answers for some seed
    sampled = set()
    for seed in range(5):
        torch.manual_seed(seed)
        out, _, _, _ = grpo.sample(policy, grpo.encode_prompts(tokenizer, prompts, prompt_len,
                                                                "cpu"),
                                   args.max_new_tokens, tokenizer.eos_token_id,
                                   grpo.pad_id_of(tokenizer))
        sampled.add(tuple(grpo.decode_completions(tokenizer, out[:, prompt_len:])))
    assert sampled != {tuple(first)}


def spy_on_adam_rates(monkeypatch):
    """{each Adam's id: the learning rate of each of its steps, in order}, Adams in the order
    of their first step."""
    rates, step = {}, torch.optim.Adam.step

    def spy(self, *a, **k):
        rates.setdefault(id(self), []).append(self.param_groups[0]["lr"])
        return step(self, *a, **k)
    monkeypatch.setattr(torch.optim.Adam, "step", spy)
    return rates


@pytest.mark.parametrize("anneal", [True, False])
def test_the_warm_starts_learning_rate_falls_linearly_to_0(tmp_path, monkeypatch, anneal):
    # 4 supervised steps at 0.02: with --sft-anneal-lr the rate of step k is 0.02 (1 - k/4),
    # 0.02, 0.015, 0.01, 0.005; without, 0.02 throughout. The first Adam is the warm start's.
    rates = spy_on_adam_rates(monkeypatch)
    grpo.main(tiny_args(tmp_path, eval_episodes=0, sft_steps=4, sft_learning_rate=0.02,
                        sft_anneal_lr=anneal))
    warm = next(iter(rates.values()))
    assert warm == approx([0.02, 0.015, 0.01, 0.005] if anneal else [0.02] * 4)


@pytest.mark.parametrize("anneal", [True, False])
def test_grpos_learning_rate_falls_linearly_to_0_over_the_budget(tmp_path, monkeypatch, anneal):
    # 4 updates of 16 completions (4 prompts x 4) at 0.02, 2 minibatches each: with
    # --anneal-lr the rate of update u (u = 0..3) is 0.02 (1 - 16 u / 64): 0.02, 0.015,
    # 0.01, 0.005, the same for both minibatches of an update; without, 0.02 throughout. The
    # warm start's own Adam (a constant 0.001 here) is the first; GRPO's the second.
    rates = spy_on_adam_rates(monkeypatch)
    grpo.main(tiny_args(tmp_path, eval_episodes=0, sft_steps=2, sft_learning_rate=1e-3,
                        sft_anneal_lr=False, learning_rate=0.02, anneal_lr=anneal))
    warm, grpo_rates = rates.values()
    assert warm == approx([1e-3, 1e-3])
    expected = [0.02, 0.015, 0.01, 0.005] if anneal else [0.02] * 4
    assert grpo_rates == approx([r for r in expected for _ in range(2)])


def test_the_hugging_face_policy_masks_the_padding_out_of_the_attention(tmp_path):
    # HFPolicy's logits are the model's with attention_mask = (tokens != pad): a left-padded
    # row's logits equal the model called with that mask by hand, and differ from the model
    # called without one (the padding attended to), so the check could fail.
    folder = save_tiny_hf_model(tmp_path / "tiny-gpt2")
    from transformers import AutoModelForCausalLM, AutoTokenizer
    tokenizer = AutoTokenizer.from_pretrained(folder, local_files_only=True)
    model = AutoModelForCausalLM.from_pretrained(folder, local_files_only=True)
    policy = grpo.HFPolicy(model, 0)
    tokens = grpo.encode_prompts(tokenizer, ["12+3=", "1+2="], 8, "cpu")
    assert tokens[1].tolist()[:4] == [0, 0, 0, 0]
    with torch.no_grad():
        got = policy(tokens)[0]
        masked = model(input_ids=tokens, attention_mask=(tokens != 0).long()).logits
        unmasked = model(input_ids=tokens).logits
    real = tokens != 0
    assert torch.allclose(got[real], masked[real].float(), atol=1e-5)
    assert not torch.allclose(got[1][real[1]], unmasked[1][real[1]].float(), atol=1e-3)


def test_nlpos_masks_reach_the_buffer_and_the_update(tmp_path, monkeypatch):
    buffers = spy_on_buffers(monkeypatch)
    losses = spy_on(monkeypatch, grpo, "token_logprobs", lambda *a, **k: a[3] if len(a) > 3 else
                    k.get("action_masks"))
    grpo.main(tiny_args(tmp_path, eval_episodes=0, top_p=0.9))
    assert all(b.action_masks is not None and b.action_masks.shape[:2] == (16, 5) for b in buffers)
    assert any(m is not None for m in losses)  # the update re-applied stored masks


def test_the_update_gets_the_samplers_and_the_references_log_probs_and_the_group_advantages(
        tmp_path, monkeypatch):
    # 3 batches of 16, 2 epochs of 2 minibatches (the policy moves between the loss's calls:
    # new != old), temperature 0.7, beta 0.5. Each grpo_loss call against tensors made here:
    # the sampler's log-probabilities as it returned them, the frozen reference's own at 0.7,
    # and the group advantages by hand from the rewards the stand-in paid.
    paid = pay_at_random(monkeypatch)
    outputs, sample, copies, frozen_copy = [], grpo.sample, [], grpo.frozen_copy
    monkeypatch.setattr(grpo, "sample",
                        lambda *a, **k: outputs.append(sample(*a, **k)) or outputs[-1])
    monkeypatch.setattr(grpo, "frozen_copy", lambda m: copies.append(frozen_copy(m)) or copies[-1])
    buffers = spy_on_buffers(monkeypatch)
    chunks = spy_on_minibatches(monkeypatch)
    losses = spy_on(monkeypatch, grpo, "grpo_loss", detached)
    grpo.main(tiny_args(tmp_path, eval_episodes=0, total_timesteps=48, temperature=0.7, beta=0.5,
                        update_epochs=2, num_minibatches=2, learning_rate=0.05))
    (reference,) = copies
    P = 6  # Addition-v0's longest prompt, "99+99="
    assert len(buffers) == len(outputs) == 3 and len(paid) == 48
    assert len(chunks) == len(losses) == 3 * 2 * 2
    for (buffer, idx), kw in zip(chunks, losses):
        b = [i for i, x in enumerate(buffers) if x is buffer][0]
        tokens, mask, logprobs, _ = outputs[b]
        m = mask[idx].bool()
        assert kw["beta"] == 0.5
        # pi_old: the sampler's log-probabilities, saved at sampling time
        assert torch.equal(kw["old_logprobs"], logprobs[idx])
        # pi_ref: the reference model's own logits over the sampled tokens, divided by 0.7
        with torch.no_grad():
            logits = reference(tokens[idx])[0][:, P - 1:-1] / 0.7
        ref = torch.log_softmax(logits, -1).gather(-1, tokens[idx, P:, None]).squeeze(-1)
        assert torch.allclose(kw["ref_logprobs"][m], ref[m], atol=1e-5)
        # A_i = (r_i - group mean) / (unbiased group std + 1e-4), groups of 4 in the paid order
        rewards = paid[16 * b:16 * (b + 1)]
        assert buffer.rewards.tolist() == rewards
        hand = []
        for g in range(4):
            group = rewards[4 * g:4 * g + 4]
            mean = sum(group) / 4
            std = math.sqrt(sum((r - mean) ** 2 for r in group) / 3)
            hand += [(r - mean) / (std + 1e-4) for r in group]
        assert kw["advantages"].tolist() == approx([hand[i] for i in idx.tolist()])
    # pi_theta at the first step of each batch is still pi_old, at the same temperature 0.7:
    # the ratio is 1 on every counted token (a loss without the temperature would not be)
    for k in range(0, len(losses), 4):
        kw = losses[k]
        m = kw["completion_mask"].bool()
        assert torch.allclose(kw["logprobs"][m], kw["old_logprobs"][m], atol=1e-5)
    # the checks above could fail: the policy moved off pi_old within a batch and off pi_ref,
    # and some group's advantages are not 0
    moved = [(kw["logprobs"] - kw["old_logprobs"])[kw["completion_mask"].bool()].abs().max()
             for kw in losses]
    assert max(moved) > 1e-3
    assert max((kw["logprobs"] - kw["ref_logprobs"]).abs().max() for kw in losses) > 1e-3
    assert any(kw["advantages"].abs().max() > 0.1 for kw in losses)


@pytest.mark.parametrize("baseline, scale_rewards", [("rloo", False), ("mean", False),
                                                     ("rloo", True)])
def test_the_baseline_and_std_flags_reach_the_advantages_the_loss_gets(
        tmp_path, monkeypatch, baseline, scale_rewards):
    # --baseline and --scale-rewards away from their defaults (mean, True): the advantages
    # each grpo_loss call receives are those of the flags, by hand from the rewards paid, in
    # groups of 4 in the paid order. A group [1, 0, 0, 1]: mean 0.5; RLOO's baseline of the
    # first is (0 + 0 + 1) / 3, so A = 1 - 1/3 = 2/3; without the std, A = r - 0.5 = 0.5;
    # RLOO over the std: (2/3) / (std 0.577 + 1e-4).
    paid = pay_at_random(monkeypatch)
    buffers = spy_on_buffers(monkeypatch)
    chunks = spy_on_minibatches(monkeypatch)
    losses = spy_on(monkeypatch, grpo, "grpo_loss", detached)
    grpo.main(tiny_args(tmp_path, eval_episodes=0, total_timesteps=32, baseline=baseline,
                        scale_rewards=scale_rewards))
    assert len(losses) == len(chunks) == 2 * 2
    for (buffer, idx), kw in zip(chunks, losses):
        b = [i for i, x in enumerate(buffers) if x is buffer][0]
        rewards, hand = paid[16 * b:16 * (b + 1)], []
        for g in range(4):
            group = rewards[4 * g:4 * g + 4]
            mean = sum(group) / 4
            std = math.sqrt(sum((r - mean) ** 2 for r in group) / 3)
            for i, r in enumerate(group):
                base = (sum(group) - r) / 3 if baseline == "rloo" else mean
                hand.append((r - base) / (std + 1e-4) if scale_rewards else r - base)
        assert kw["advantages"].tolist() == approx([hand[i] for i in idx.tolist()])
    # could fail: some group held two reward values
    assert any(kw["advantages"].abs().max() > 0.1 for kw in losses)


def test_nlpos_sync_moves_the_masking_policy_to_the_policy_and_never_the_reference(
        tmp_path, monkeypatch):
    # With --top-p, frozen_copy makes the reference, then the masking policy; with
    # --mask-sync-every 1 the masking policy is the policy after every update, and the
    # reference stays the warm start
    copies, frozen_copy, policies, make_policy = [], grpo.frozen_copy, [], grpo.make_policy

    def keep(model):
        copies.append((frozen_copy(model), state_of(model)))
        return copies[-1][0]
    monkeypatch.setattr(grpo, "frozen_copy", keep)
    monkeypatch.setattr(grpo, "make_policy", lambda *a: policies.append(make_policy(*a)) or policies[-1])
    pay_at_random(monkeypatch)
    grpo.main(tiny_args(tmp_path, eval_episodes=0, top_p=0.9, mask_sync_every=1,
                        total_timesteps=32, learning_rate=0.05))
    (reference, warm), (mask_model, _) = copies
    (policy,) = policies
    assert not same_state(policy, warm)  # the policy moved
    assert same_state(reference, warm)
    assert same_state(mask_model, policy.state_dict())


def test_the_evaluation_poses_only_held_out_problems(tmp_path, monkeypatch):
    grpo.register_tasks()
    args = tiny_args(tmp_path, eval_episodes=20)
    tokenizer, prompt_len = grpo.check_spaces(args, *grpo.check_env(args))
    policy = grpo.make_policy(args, tokenizer, prompt_len)
    posed = spy_on(monkeypatch, grpo, "addition_reward", lambda prompt, completion: prompt)
    returns = grpo.evaluate(args, {"policy": policy})
    assert len(returns) == 20 and len(posed) == 20 and len(set(posed)) > 10
    assert all(held_out(p) for p in posed)


def test_the_warm_starts_targets_are_the_answer_then_the_end_token(tmp_path, monkeypatch):
    # each supervised row: the prompt a+b=, then the digits of a + b (worked out here), <eos>
    # (1) and padding (0) up to --max-new-tokens 5; the loss's targets are those completions
    grpo.register_tasks()
    args = tiny_args(tmp_path, sft_steps=2, sft_problems=16, sft_batch_size=8)
    tokenizer, prompt_len = grpo.check_spaces(args, *grpo.check_env(args))
    policy = grpo.make_policy(args, tokenizer, prompt_len)
    inputs = spy_on(monkeypatch, grpo, "completion_logits",
                    lambda model, tokens, p: tokens.clone())
    targets = spy_on(monkeypatch, grpo.F, "cross_entropy", lambda x, target, **k: target.clone())
    grpo.warm_start(args, policy, None)  # --eval-every 0: no held-out row to write
    assert len(inputs) == len(targets) == 2
    for tokens, target in zip(inputs, targets):
        assert tokens.shape == (8, prompt_len + 5) and torch.equal(tokens[:, prompt_len:], target)
        for row in tokens.tolist():
            a, b = tokenizer.decode([t for t in row[:prompt_len] if t != 0])[:-1].split("+")
            answer = tokenizer.encode(str(int(a) + int(b)))
            assert row[prompt_len:] == answer + [1] + [0] * (4 - len(answer))


# ---------------------------------------------------------------------------------------
# Smoke run, checkpoint, determinism
# ---------------------------------------------------------------------------------------
@pytest.mark.slow  # a smoke run: a whole tiny run and every file it writes
def test_smoke_run_writes_every_file_and_its_model_evaluates(tmp_path, check_run_folder):
    summary = grpo.main(tiny_args(tmp_path / "train", save_model=True))
    path, episodes, updates = check_run_folder(summary, str(tmp_path / "train"), "grpo", model=True)
    assert len(episodes) == 64 and {e["episode_return"] for e in episodes} <= {"0.0", "1.0"}
    assert {e["episode_length"] for e in episodes} == {"1"}  # one step: one answer
    assert [int(u["global_step"]) for u in updates] == [16, 32, 48, 64]
    assert list(updates[0])[3:] == ["policy_loss", "kl", "clipfrac", "approx_kl", "entropy",
                                    "reward_mean", "completion_length", "groups_kept"]
    # the policy's token entropy: positive, and below log |V| (14 tokens: ln 14 = 2.639)
    assert all(0 < float(u["entropy"]) <= math.log(14) for u in updates)
    # the default task's goal: RL's gain, the final evaluation less the warm start's
    assert summary["solved_threshold"] == 0.3 and summary["holds_on"] == "gain"
    assert summary["end_return"] == summary["eval_return_mean"] - summary["start_return"]
    assert summary["global_steps"] == 64
    evaluated = grpo.main(tiny_args(tmp_path / "eval", eval_checkpoint=path))
    assert evaluated["eval_return_mean"] == summary["eval_return_mean"]


def test_a_checkpoint_brings_back_the_flags_that_shape_the_model(tmp_path):
    # Trained with a width, a depth and a completion length other than the defaults (and than
    # TINY's), then evaluated with none of them given: --eval-checkpoint takes each from the
    # checkpoint (MODEL_FLAGS), so the model loads and answers as it did. The position table
    # is prompt_len + max_new_tokens long: a length not restored would not even load.
    shape = dict(n_embd=24, n_head=3, n_layer=2, max_new_tokens=6)
    summary = grpo.main(tiny_args(tmp_path / "train", save_model=True, **shape))
    (path,) = glob.glob(str(tmp_path / "train" / "*"))
    evaluated = grpo.main(tiny_args(tmp_path / "eval", eval_checkpoint=path))
    assert evaluated["eval_return_mean"] == summary["eval_return_mean"]
    (folder,) = glob.glob(str(tmp_path / "eval" / "*"))
    with open(os.path.join(folder, "config.json")) as f:
        config = json.load(f)
    assert {k: config[k] for k in shape} == shape


def test_the_warm_start_learns_from_many_training_problems_and_their_answers(tmp_path,
                                                                            monkeypatch):
    # --sft-problems 40: the warm start's prompts (its first encode_prompts call) are 40
    # training problems (none of the held-out tenth), drawn one after another from one seeded
    # environment, so nearly all differ (40 of 9,000 training sums), and each target is the
    # problem's sum and the end token.
    calls = spy_on(monkeypatch, grpo, "encode_prompts", lambda tokenizer, prompts, *a: list(prompts))
    targets = []
    cross_entropy = grpo.F.cross_entropy
    monkeypatch.setattr(grpo.F, "cross_entropy",
                        lambda logits, target, **k: targets.append(target) or
                        cross_entropy(logits, target, **k))
    args = tiny_args(tmp_path, eval_episodes=0, sft_problems=40, sft_steps=2)
    grpo.main(args)
    prompts = calls[0]
    assert len(prompts) == 40 and len(set(prompts)) >= 35
    assert not any(zlib.crc32(p[:-1].encode()) % 10 == 0 for p in prompts)
    # every supervised target row is some prompt's answer, then <eos>, then padding
    tokenizer, _ = grpo.check_spaces(args, *grpo.check_env(args))
    answers = {}
    for p in prompts:
        a, b = p[:-1].split("+")
        row = tokenizer.encode(str(int(a) + int(b))) + [tokenizer.eos_token_id]
        answers[tuple(row + [grpo.pad_id_of(tokenizer)] * (5 - len(row)))] = p
    assert len(targets) == 2
    assert all(tuple(r) in answers for t in targets for r in t.tolist())


def test_the_seed_sets_the_problems_the_groups_are_posed(tmp_path, monkeypatch):
    # The rewards of a tiny model's answers are all 0, so episodes.csv cannot tell one seed's
    # problems from another's: the prompts paid for can. Seed 5 twice poses the same 64
    # training prompts in the same order; seed 6 others.
    asked = spy_on_prompts(monkeypatch)
    runs = []
    for i, seed in enumerate((5, 5, 6)):
        asked.clear()
        grpo.main(tiny_args(tmp_path / str(i), eval_episodes=0, seed=seed))
        runs.append(list(asked))
    assert len(runs[0]) == 64 and runs[0] == runs[1]
    assert runs[2] != runs[0]


def test_updates_csv_logs_approx_kl_of_the_ratio_and_the_groups_kept(tmp_path, monkeypatch):
    # approx_kl, each update's mean over its loss calls of the token mean of (rho - 1) - log rho
    # with log rho = log pi_theta - log pi_old (Schulman's k3 of the ratio, >= 0), by hand from
    # what each grpo_loss call received; groups_kept, the groups of G in the update's buffer
    # (dynamic sampling drops the groups of one reward value; a stand-in pays 1 with p 0.7).
    pay_at_random(monkeypatch, p=0.7)
    buffers = spy_on_buffers(monkeypatch)
    losses = spy_on(monkeypatch, grpo, "grpo_loss", detached)
    updates = spy_on(monkeypatch, grpo.Run, "update", lambda self, step, *loss, **kw: kw)
    grpo.main(tiny_args(tmp_path, eval_episodes=0, dynamic_sampling=True, total_timesteps=96,
                        update_epochs=2, learning_rate=0.05))
    calls = len(losses) // len(updates)
    assert calls * len(updates) == len(losses) == 2 * 2 * len(updates)
    for k, (kw, buffer) in enumerate(zip(updates, buffers)):
        hand = []
        for c in losses[calls * k:calls * (k + 1)]:
            m = c["completion_mask"].bool()
            r = (c["logprobs"] - c["old_logprobs"])[m]
            hand.append(((r.exp() - 1) - r).mean().item())
        assert kw["approx_kl"] == pytest.approx(sum(hand) / len(hand), rel=1e-4, abs=1e-9)
        assert kw["groups_kept"] == len(buffer.rewards) // 4
    assert any(kw["approx_kl"] > 1e-6 for kw in updates)  # could fail: the policy moved
    # and a full buffer's 16 completions are 4 groups, so a count of completions would differ
    assert any(len(b.rewards) == 16 and kw["groups_kept"] == 4 for kw, b in zip(updates, buffers))


def test_nlpos_nucleus_is_taken_at_the_sampling_temperature(tmp_path):
    # With a masking policy, the nucleus is top-p of softmax(mask_model logits / temperature),
    # the distribution sampled from: at temperature 3 a flatter one, so more tokens. A sharp
    # arbitrary model, 4 prompts, one token each: the mask equals top_p_mask of the tempered
    # logits, and differs from the untempered one's (so the check could fail).
    args = tiny_args(tmp_path)
    grpo.register_tasks()
    tokenizer, prompt_len = grpo.check_spaces(args, *grpo.check_env(args))
    torch.manual_seed(2)
    policy = grpo.make_policy(args, tokenizer, prompt_len)
    with torch.no_grad():
        for p in policy.parameters():
            p.mul_(3.0)
    prompts = grpo.encode_prompts(tokenizer, ["12+34=", "5+67=", "99+1=", "3+4="], prompt_len,
                                  "cpu")
    _, _, _, masks = grpo.sample(policy, prompts, 1, tokenizer.eos_token_id,
                                 grpo.pad_id_of(tokenizer), temperature=3.0, mask_model=policy,
                                 top_p=0.5)
    with torch.no_grad():
        logits = policy(prompts)[0][:, -1]
    assert torch.equal(masks[:, 0], grpo.top_p_mask(logits / 3.0, 0.5))
    assert not torch.equal(masks[:, 0], grpo.top_p_mask(logits, 0.5))


@pytest.mark.slow  # determinism: two whole runs
def test_same_seed_gives_the_same_episodes(tmp_path):
    rows = same_seed_episodes(lambda out: grpo.main(tiny_args(out)), tmp_path)
    assert len(rows) == 64


# ---------------------------------------------------------------------------------------
# A Hugging Face causal LM, built and saved here (no hub)
# ---------------------------------------------------------------------------------------
def save_tiny_hf_model(folder, characters="0123456789+="):
    """A 1-layer GPT-2 and a character-level tokenizer (tokenizers' WordLevel), saved."""
    transformers = pytest.importorskip("transformers", reason="pip install transformers==5.24.0")
    from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers
    vocab = {"<pad>": 0, "<eos>": 1, "<unk>": 2, **{c: i + 3 for i, c in enumerate(characters)}}
    tok = Tokenizer(models.WordLevel(vocab, unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.Split(Regex("."), behavior="isolated")
    tok.decoder = decoders.Fuse()
    tokenizer = transformers.PreTrainedTokenizerFast(tokenizer_object=tok, eos_token="<eos>",
                                                     pad_token="<pad>", unk_token="<unk>")
    tokenizer.save_pretrained(folder)
    config = transformers.GPT2Config(vocab_size=len(vocab), n_positions=32, n_embd=16,
                                     n_layer=1, n_head=2, eos_token_id=1, pad_token_id=0,
                                     bos_token_id=1)
    torch.manual_seed(0)
    transformers.GPT2LMHeadModel(config).save_pretrained(folder)
    return str(folder)


def test_a_local_hugging_face_model_trains_and_its_checkpoint_evaluates(tmp_path):
    folder = save_tiny_hf_model(tmp_path / "tiny-gpt2")
    summary = grpo.main(tiny_args(tmp_path / "train", model=folder, save_model=True))
    (path,) = glob.glob(str(tmp_path / "train" / "*"))
    assert len(read_csv(os.path.join(path, "episodes.csv"))) == 64
    updates = read_csv(os.path.join(path, "updates.csv"))
    assert len(updates) == 4 and all(math.isfinite(float(u["policy_loss"])) for u in updates)
    with open(os.path.join(path, "config.json")) as f:
        assert json.load(f)["model"] == folder
    # --eval-checkpoint takes the model's folder from the checkpoint (MODEL_FLAGS)
    evaluated = grpo.main(tiny_args(tmp_path / "eval", eval_checkpoint=path))
    assert evaluated["eval_return_mean"] == summary["eval_return_mean"]


def test_the_hugging_face_policy_counts_the_same_tokens(tmp_path):
    # the same loss and buffer: the sampler's log-probabilities equal the update's on the
    # Hugging Face model too (left padding masked out of its attention)
    folder = save_tiny_hf_model(tmp_path / "tiny-gpt2")
    from transformers import AutoModelForCausalLM, AutoTokenizer
    tokenizer = AutoTokenizer.from_pretrained(folder, local_files_only=True)
    policy = grpo.HFPolicy(AutoModelForCausalLM.from_pretrained(folder, local_files_only=True), 0)
    prompts = grpo.encode_prompts(tokenizer, ["12+3=", "1+2="], 8, "cpu")
    assert prompts[1].tolist()[:4] == [0, 0, 0, 0]
    torch.manual_seed(0)
    tokens, mask, logp, _ = grpo.sample(policy, prompts, 4, 1, 0)
    again = grpo.token_logprobs(grpo.completion_logits(policy, tokens, 8), tokens[:, 8:])
    assert torch.allclose(logp, again * mask, atol=1e-5)


def test_the_hugging_face_sampler_keeps_a_cache_for_each_model(tmp_path):
    # With --model the sampler keeps each model's keys and values: after the prompt, the
    # policy and NLPO's mask model each read one new token a step, from caches of their own
    # (the two models differ here, so a shared or missing cache would change the numbers),
    # and the log-probabilities and top-p masks equal those of whole-sequence passes.
    folder = save_tiny_hf_model(tmp_path / "tiny-gpt2")
    from transformers import AutoModelForCausalLM, AutoTokenizer
    tokenizer = AutoTokenizer.from_pretrained(folder, local_files_only=True)
    policy = grpo.HFPolicy(AutoModelForCausalLM.from_pretrained(folder, local_files_only=True), 0)
    reference = grpo.frozen_copy(policy)
    with torch.no_grad():
        for p in reference.parameters():
            p.add_(0.5 * torch.randn_like(p))
    seen = {policy: [], reference: []}
    for m in seen:
        m.model.register_forward_pre_hook(
            lambda mod, args, kwargs, m=m: seen[m].append(tuple(kwargs["input_ids"].shape)),
            with_kwargs=True)
    prompts = grpo.encode_prompts(tokenizer, ["12+3=", "1+2="], 8, "cpu")
    torch.manual_seed(0)
    tokens, mask, logp, masks = grpo.sample(policy, prompts, 4, 1, 0, mask_model=reference,
                                            top_p=0.9)
    assert seen[policy] == seen[reference] == [(2, 8), (2, 1), (2, 1), (2, 1)]
    with torch.no_grad():
        whole = grpo.token_logprobs(grpo.completion_logits(policy, tokens, 8), tokens[:, 8:],
                                    action_masks=masks)
        nucleus = grpo.top_p_mask(grpo.completion_logits(reference, tokens, 8), 0.9)
    assert torch.allclose(logp, whole * mask, atol=1e-5)
    real = mask.bool()
    assert torch.equal(masks[real], nucleus[real])
    assert not torch.equal(nucleus[real], grpo.top_p_mask(  # the two models' nuclei differ
        grpo.completion_logits(policy, tokens, 8), 0.9)[real])


# ---------------------------------------------------------------------------------------
# pass@k, the shuffled control, the partial warm start, the held-out measures and the phases
# ---------------------------------------------------------------------------------------
@pytest.mark.parametrize("n, c, k, expected", [
    (5, 2, 2, 0.7),        # 1 - C(3, 2) / C(5, 2) = 1 - 3/10
    (8, 3, 1, 3 / 8),      # k = 1: 1 - C(5, 1) / C(8, 1) = 1 - 5/8 = c/n, the sampled accuracy
    (10, 1, 3, 0.3),       # 1 - C(9, 3) / C(10, 3) = 1 - 84/120 = 36/120
    (6, 0, 3, 0.0),        # c = 0: 1 - C(6, 3) / C(6, 3): no draw holds a right answer
    (6, 6, 3, 1.0),        # c = n: every draw does
    (4, 1, 4, 1.0),        # k = n with c >= 1: n - c = 3 < 4, the draw is all n answers
    (4, 0, 4, 0.0),        # k = n with c = 0: 1 - C(4, 4) / C(4, 4)
    (5, 3, 3, 1.0),        # n - c = 2 < k = 3: every 3 of 5 hold one of the 3 right
])
def test_pass_at_k_by_hand(n, c, k, expected):
    assert grpo.pass_at_k(n, c, k) == pytest.approx(expected, abs=1e-12)


@pytest.mark.parametrize("n, c, k", [(4, 1, 5), (4, 1, 0), (4, 5, 2), (4, -1, 2)])
def test_pass_at_k_refuses_an_impossible_draw(n, c, k):
    with pytest.raises(ValueError, match="pass@k needs"):
        grpo.pass_at_k(n, c, k)


def test_the_shuffled_control_permutes_rewards_within_each_group_only():
    # two groups of 4 with values of their own: after any shuffle each group holds the same
    # values (its mean and spread kept), none crosses to the other; over 200 shuffles every
    # value lands in every position of its group (credit at random), not only where it was
    rewards = torch.tensor([1.0, 2.0, 3.0, 4.0, 10.0, 20.0, 30.0, 40.0])
    generator = torch.Generator().manual_seed(0)
    seen = [set() for _ in range(8)]
    for _ in range(200):
        shuffled = grpo.shuffle_within_groups(rewards, 4, generator)
        assert sorted(shuffled[:4].tolist()) == [1, 2, 3, 4]
        assert sorted(shuffled[4:].tolist()) == [10, 20, 30, 40]
        for i, value in enumerate(shuffled.tolist()):
            seen[i].add(value)
    assert all(seen[i] == {1, 2, 3, 4} for i in range(4))
    assert all(seen[i] == {10, 20, 30, 40} for i in range(4, 8))


@pytest.mark.parametrize("shuffle", [False, True])
def test_shuffle_rewards_hands_the_advantages_the_shuffled_rewards(tmp_path, monkeypatch,
                                                                  shuffle):
    # --shuffle-rewards: shuffle_within_groups gets the rewards as paid, and group_advantages
    # gets exactly what it returns (a stand-in that reverses each group of 4, so the order
    # differs from the paid one), before the advantages are computed; without the flag,
    # group_advantages gets the rewards as paid and nothing is shuffled
    paid, given, returned = pay_at_random(monkeypatch), [], []

    def reverse_each_group(rewards, group_size, *a):
        given.append(rewards.clone())
        returned.append(rewards.view(-1, group_size).flip(1).flatten())
        return returned[-1]
    monkeypatch.setattr(grpo, "shuffle_within_groups", reverse_each_group)
    got = spy_on(monkeypatch, grpo, "group_advantages", lambda r, *a, **k: r.clone())
    grpo.main(tiny_args(tmp_path, eval_episodes=0, shuffle_rewards=shuffle))
    assert len(got) == 4 and len(given) == (4 if shuffle else 0)
    for u, rewards in enumerate(got):
        as_paid = torch.tensor(paid[16 * u:16 * (u + 1)])
        if shuffle:
            assert torch.equal(given[u], as_paid) and torch.equal(rewards, returned[u])
        else:
            assert torch.equal(rewards, as_paid)
    if shuffle:  # the stand-in's reversal moved some reward: the test can tell the two apart
        assert any(not torch.equal(r, g) for r, g in zip(returned, given))


def test_the_partial_tasks_worked_answers_leave_out_most_carries():
    # AdditionPartial-v0: a problem whose ones column carries (a % 10 + b % 10 >= 10) has a
    # worked answer only where crc32("demo a+b") % 10,000 < 200 (2%); every other problem has
    # one. Addition-v0: every problem. The reward checks every sum on both.
    grpo.register_tasks()
    for env_id, share in (("AdditionPartial-v0", 0.02), ("Addition-v0", 1.0)):
        env = gym.make(env_id)
        with_answer = {True: 0, False: 0}
        for i in range(3000):
            prompt, info = env.reset(seed=i)
            a, b = (int(x) for x in prompt[:-1].split("+"))
            carry = a % 10 + b % 10 >= 10
            demo = not carry or zlib.crc32(f"demo {a}+{b}".encode()) % 10_000 < share * 10_000
            assert info["answer"] == (str(a + b) if demo else None)
            with_answer[carry] += info["answer"] is not None
            assert env.step(str(a + b))[1] == 1.0
        if share < 1:
            assert with_answer[True] < 0.05 * with_answer[False]
        else:
            assert with_answer[True] > 0.6 * with_answer[False]


def test_the_warm_start_learns_only_from_problems_with_a_worked_answer(tmp_path):
    # demonstrations(): --sft-problems rows, every one a training problem with an answer:
    # on AdditionPartial-v0 carries only from the 2% that have one
    grpo.register_tasks()
    args = tiny_args(tmp_path, sft_problems=400)
    tokenizer, prompt_len = grpo.check_spaces(args, *grpo.check_env(args))
    tokens, targets, mask = grpo.demonstrations(args, tokenizer, prompt_len, "cpu")
    assert tokens.shape == (400, prompt_len + 5) and torch.equal(tokens[:, prompt_len:], targets)
    for row in tokens.tolist():
        a, b = (int(x) for x in tokenizer.decode([t for t in row[:prompt_len] if t])[:-1].split("+"))
        assert zlib.crc32(f"{a}+{b}".encode()) % 10  # never a held-out problem
        assert a % 10 + b % 10 < 10 or zlib.crc32(f"demo {a}+{b}".encode()) % 10_000 < 200


def test_held_out_measures_and_the_curves_phases(tmp_path, monkeypatch):
    # --eval-every 16 with 3 supervised steps of 8 answers: a warm-start row where 16 answers
    # were learned from (16 - 24 = -8 before GRPO starts), the warm start's at 0, GRPO's at
    # 16, 32, 48 and the end's at 64; the curve draws those rows, the warm start's phase
    # left of 0 and GRPO's right of it, and no mean of the last 20 episodes
    from matplotlib.figure import Figure
    saved, savefig = [], Figure.savefig
    monkeypatch.setattr(Figure, "savefig", lambda self, *a, **k: saved.append(self) or savefig(self, *a, **k))
    # 4 answers sampled a problem and pass@2 (--pass-k 2, below --eval-samples 4): the curve
    # draws held_out.csv's pass@2 column, the one the run writes
    summary = grpo.main(tiny_args(tmp_path, sft_batch_size=8, eval_every=16, curve=True,
                                  eval_samples=4, pass_k=2))
    (path,) = glob.glob(str(tmp_path / "*"))
    rows = read_csv(os.path.join(path, "held_out.csv"))
    assert [int(r["global_step"]) for r in rows] == [-8, 0, 16, 32, 48, 64]
    assert list(rows[0])[2:] == ["accuracy", "pass@1", "pass@2", "answer_length", "kl_to_reference"]
    assert float(rows[1]["kl_to_reference"]) == pytest.approx(0, abs=1e-6)  # the reference itself
    assert summary["start_return"] == float(rows[1]["accuracy"])
    assert read_csv(os.path.join(path, "pass_at_k.csv"))[0].keys() == {"k", "warm_start", "end"}
    assert len(read_csv(os.path.join(path, "pass_at_k.csv"))) == 64  # k = 1..64
    (fig,) = saved
    lines = {line.get_label(): line for line in fig.axes[0].lines}
    assert "greedy accuracy" in lines and not any("last" in label for label in lines)
    assert list(lines["pass@2 (sampled)"].get_ydata()) == [float(r["pass@2"]) for r in rows]
    assert list(lines["greedy accuracy"].get_xdata()) == [-8, 0, 16, 32, 48, 64]


def test_the_curves_goal_is_the_warm_starts_accuracy_plus_the_gain(tmp_path, monkeypatch):
    # A gain of 0.3 over a warm start at 0.25: the goal's line stands at 0.25 + 0.3 = 0.55,
    # not at 0.3; the final evaluation (0.75) is a star at the run's last step (64).
    from matplotlib.figure import Figure
    saved = []
    monkeypatch.setattr(Figure, "savefig", lambda self, *a, **k: saved.append(self))
    (tmp_path / "held_out.csv").write_text(
        "global_step,wall_time,accuracy,pass@1,pass@2,answer_length,kl_to_reference\n"
        "0,1.0,0.25,0.2,0.4,3.0,0.0\n64,2.0,0.75,0.7,0.8,3.0,0.5\n")
    summary = {"holds_on": "gain", "start_return": 0.25, "solved_threshold": 0.3,
               "eval_return_mean": 0.75, "global_steps": 64, "interrupted": False,
               "env_id": "AdditionPartial-v0", "seed": 1}
    run = SimpleNamespace(path=str(tmp_path), summary=summary, args=SimpleNamespace(pass_k=2))
    assert grpo.draw_own_curve(run) == os.path.join(str(tmp_path), "curve.png")
    lines = {line.get_label(): line for line in saved[0].axes[0].lines}
    (goal,) = [line for label, line in lines.items() if label.startswith("goal")]
    assert list(goal.get_ydata()) == approx([0.55, 0.55])
    star = lines["final evaluation (greedy)"]
    assert (list(star.get_xdata()), list(star.get_ydata())) == ([64], [0.75])


def test_the_supervised_loss_is_the_mean_over_the_answers_tokens_alone():
    # A policy whose logits are all 0 over V = 5 tokens: every token's cross-entropy is
    # log 5, so the mean over the masked tokens (3 of the 6 positions here) is log 5 too; a
    # mean over all positions, padding included, would give log 5 * 3 / 6.
    class Uniform(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.b = torch.nn.Parameter(torch.zeros(5))

        def forward(self, tokens):
            return self.b.expand(*tokens.shape, 5), None  # (logits, hidden states) as GPT's
    policy = Uniform()
    tokens = torch.tensor([[2, 3, 4, 1, 0], [2, 3, 1, 0, 0]])  # prompt of 2, answers of 3
    targets, mask = tokens[:, 2:], torch.tensor([[1.0, 1, 0], [1, 0, 0]])
    loss = grpo.supervised_step(policy, torch.optim.Adam(policy.parameters()),
                                (tokens, targets, mask), 2, 2)
    assert loss == approx(math.log(5))


def test_held_outs_pass_k_column_is_pass_at_k(tmp_path, monkeypatch):
    # pass_at_k stands in with k / 10: the row's pass@1 is 0.1 and its pass@3 0.3 (--pass-k 3
    # of 4 samples), the curve 0.1 .. 0.4
    args = tiny_args(tmp_path, eval_samples=4, pass_k=3)
    grpo.register_tasks()
    tokenizer, prompt_len = grpo.check_spaces(args, *grpo.check_env(args))
    policy = grpo.make_policy(args, tokenizer, prompt_len)
    monkeypatch.setattr(grpo, "pass_at_k", lambda n, c, k: k / 10)
    run = SimpleNamespace(write_row=lambda *a, **k: None, elapsed=lambda: 0)
    row, curve = grpo.held_out(args, run, policy, policy, 0)
    assert curve == approx([0.1, 0.2, 0.3, 0.4])
    assert row["pass@1"] == approx(0.1) and row["pass@3"] == approx(0.3)


def test_warm_start_pt_holds_the_policy_after_the_warm_start(tmp_path, monkeypatch):
    # --save-model writes warm_start.pt once the supervised steps are done: the controls start
    # from it, so it must hold the warmed-up weights, not the initial ones
    after, original = [], grpo.warm_start

    def kept(args, policy, run):
        original(args, policy, run)
        after.append({k: v.clone() for k, v in policy.state_dict().items()})
    monkeypatch.setattr(grpo, "warm_start", kept)
    grpo.main(tiny_args(tmp_path, save_model=True, sft_learning_rate=0.01))
    (path,) = glob.glob(str(tmp_path / "*" / "warm_start.pt"))
    saved = grpo.read_checkpoint(path)["policy"]
    assert len(after) == 1 and all(torch.equal(saved[k], v) for k, v in after[0].items())


def test_every_pass_of_the_held_out_measure_answers_the_same_problems(tmp_path, monkeypatch):
    # held_out's greedy pass and each of its n sampled passes pose the same --eval-episodes
    # problems (pass@k counts c right of n answers to ONE problem): 1 + 3 passes, 5 problems
    args = tiny_args(tmp_path, eval_episodes=5, eval_samples=3)
    grpo.register_tasks()
    tokenizer, prompt_len = grpo.check_spaces(args, *grpo.check_env(args))
    policy = grpo.make_policy(args, tokenizer, prompt_len)
    asked = spy_on(monkeypatch, grpo, "encode_prompts", lambda tok, prompts, *a: list(prompts))
    run = SimpleNamespace(write_row=lambda *a, **k: None, elapsed=lambda: 0)
    grpo.held_out(args, run, policy, policy, 0)
    assert len(asked) == 4 and len(asked[0]) == 5 and len(set(asked[0])) > 1
    assert all(prompts == asked[0] for prompts in asked[1:])


def test_pass_at_k_csv_gets_the_warm_starts_curve_and_the_ends(tmp_path, monkeypatch):
    # held_out stands in with a curve that tells the calls apart (call i: i + k / 100): the
    # warm start's is the first call's (i = 0), the end's the last one's, each 64 long
    calls, original = [], grpo.held_out

    def marked(*args, **kwargs):
        row, curve = original(*args, **kwargs)
        calls.append([len(calls) + k / 100 for k in range(len(curve))])
        return row, calls[-1]
    monkeypatch.setattr(grpo, "held_out", marked)
    grpo.main(tiny_args(tmp_path))
    (path,) = glob.glob(str(tmp_path / "*"))
    rows = read_csv(os.path.join(path, "pass_at_k.csv"))
    assert len(calls) >= 2 and len(rows) == 64
    assert [float(r["warm_start"]) for r in rows] == approx(calls[0])
    assert [float(r["end"]) for r in rows] == approx(calls[-1])


def test_the_gain_is_measured_from_the_warm_starts_greedy_accuracy(tmp_path, monkeypatch):
    # start_return is the warm start's greedy accuracy, not its sampled pass@1: held_out
    # stands in with an accuracy of 0.25 and a pass@1 of 0.75 at every row, so the gain is
    # the final greedy evaluation less 0.25
    original = grpo.held_out

    def measured(*args, **kwargs):
        row, curve = original(*args, **kwargs)
        return {**row, "accuracy": 0.25, "pass@1": 0.75}, curve
    monkeypatch.setattr(grpo, "held_out", measured)
    summary = grpo.main(tiny_args(tmp_path, eval_episodes=4))
    assert summary["start_return"] == 0.25
    assert summary["end_return"] == pytest.approx(summary["eval_return_mean"] - 0.25)


@pytest.mark.parametrize("stop, steps", [(0.0, 2), (None, 3)])
def test_the_warm_start_stops_where_its_held_out_accuracy_reaches_sft_stop_at(
        tmp_path, monkeypatch, stop, steps):
    # 3 steps of 8 answers, measured every 16: at 16 answers (the second step) an accuracy of
    # 0 or more stops it with --sft-stop-at 0 (2 steps); without the flag all 3 run. A tiny
    # model's accuracy is 0, so any threshold above 0 would never stop it: 0 is the case
    # that can be checked
    taken = spy_on(monkeypatch, grpo, "supervised_step", lambda *a: None)
    grpo.main(tiny_args(tmp_path, sft_batch_size=8, eval_every=16, sft_stop_at=stop))
    assert len(taken) == steps


@pytest.mark.parametrize("accuracy, pass1, steps", [(0.6, 0.1, 2), (0.1, 0.6, 3)])
def test_sft_stop_at_reads_the_greedy_accuracy_not_the_sampled_pass_at_1(
        tmp_path, monkeypatch, accuracy, pass1, steps):
    # held_out stands in with a row whose greedy accuracy and pass@1 differ: --sft-stop-at
    # 0.5 stops the warm start at its first measurement (16 answers: the second of 3 steps
    # of 8) when the greedy accuracy is 0.6 >= 0.5, and never when only pass@1 reaches it
    def row(args, run, policy, reference, step, n=None):
        return ({"accuracy": accuracy, "pass@1": pass1, f"pass@{args.pass_k}": pass1},
                [pass1] * (n or args.eval_samples))
    monkeypatch.setattr(grpo, "held_out", row)
    taken = spy_on(monkeypatch, grpo, "supervised_step", lambda *a: None)
    grpo.main(tiny_args(tmp_path, sft_batch_size=8, eval_every=16, sft_stop_at=0.5))
    assert len(taken) == steps


def test_the_entropy_column_is_the_tempered_sampling_distributions(tmp_path, monkeypatch):
    # updates.csv's entropy is that of softmax(logits / temperature), what the sampler draws
    # from: with --temperature 2 the untempered entropy would be lower. The spy keeps each
    # minibatch's logits and completion mask; the row's entropy is their token-mean entropy
    # at temperature 2, averaged over the update's minibatches
    seen = spy_on(monkeypatch, grpo, "token_logprobs",
                  lambda logits, tokens, temperature=1.0, action_masks=None:
                  (logits.detach().clone(), temperature))
    masks = spy_on(monkeypatch, grpo, "grpo_loss", lambda **kw: kw["completion_mask"].clone())
    grpo.main(tiny_args(tmp_path, temperature=2.0, total_timesteps=16, eval_episodes=0,
                        eval_every=0, num_minibatches=2))
    (path,) = glob.glob(str(tmp_path / "*"))
    (row,) = read_csv(os.path.join(path, "updates.csv"))
    update = seen[-len(masks):]  # the update's minibatches (the reference's call comes first)
    expected = []
    for (logits, temperature), mask in zip(update, masks):
        assert temperature == 2.0
        logp = torch.log_softmax(logits / 2.0, dim=-1)
        entropy = -(logp.exp() * logp).sum(-1)
        expected.append(((entropy * mask).sum() / mask.sum()).item())
    assert float(row["entropy"]) == pytest.approx(sum(expected) / len(expected), rel=1e-5)


def test_a_warm_start_checkpoint_replaces_the_supervised_steps(tmp_path, monkeypatch):
    # --save-model writes warm_start.pt, the policy where GRPO began; --warm-start PATH
    # starts another run there: no supervised step, the reference equals that checkpoint
    first = grpo.main(tiny_args(tmp_path / "a", save_model=True, eval_episodes=0))
    (folder,) = glob.glob(str(tmp_path / "a" / "*"))
    saved = torch.load(os.path.join(folder, "warm_start.pt"), weights_only=True)["policy"]
    steps = spy_on(monkeypatch, grpo, "supervised_step", lambda *a: None)
    made = spy_on(monkeypatch, grpo, "frozen_copy", lambda m: {k: v.clone() for k, v in m.state_dict().items()})
    grpo.main(tiny_args(tmp_path / "b", warm_start=os.path.join(folder, "warm_start.pt"),
                        eval_episodes=0, save_model=True))
    assert steps == [] and all(torch.equal(made[0][k], v) for k, v in saved.items())
    assert first["global_steps"] == 64
    # a run that starts from another's warm_start.pt writes none of its own, --save-model or not
    assert glob.glob(str(tmp_path / "b" / "*" / "model.pt"))
    assert not glob.glob(str(tmp_path / "b" / "*" / "warm_start.pt"))


def test_a_warm_start_file_is_read_as_tensors_only(tmp_path):
    # conftest's check: a warm_start.pt whose pickle would run code is refused unread
    check_a_warm_start_is_read_as_tensors_only(
        grpo.main, lambda folder, **flags: tiny_args(folder, eval_episodes=0, **flags), tmp_path)


def test_continued_supervision_starts_from_the_same_checkpoint_on_the_same_data(tmp_path,
                                                                               monkeypatch):
    # benchmarks/grpo_controls.py's sft arm: the policy it first measures is warm_start.pt,
    # its data the warm start's own demonstrations (the same problems and answers), and it
    # learns from as many answers as GRPO sampled (64 / 8 = 8 steps of 8)
    import importlib.util
    spec = importlib.util.spec_from_file_location("grpo_controls", os.path.join(
        os.path.dirname(grpo.__file__), "benchmarks", "grpo_controls.py"))
    controls = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(controls)
    grpo.main(tiny_args(tmp_path / "a", save_model=True, eval_episodes=0, sft_batch_size=8))
    (folder,) = glob.glob(str(tmp_path / "a" / "*"))
    saved = torch.load(os.path.join(folder, "warm_start.pt"), weights_only=True)["policy"]
    first = spy_on(monkeypatch, grpo, "held_out", lambda a, run, policy, *r, **k: {
        k: v.clone() for k, v in policy.state_dict().items()})
    steps = spy_on(monkeypatch, grpo, "supervised_step", lambda policy, opt, d, *a: d)
    flags = {f: TINY[f] for f in ("total_timesteps", "sft_problems", "n_layer", "n_head", "n_embd",
                                  "eval_episodes", "eval_samples", "pass_k")}
    controls.sft_arm(str(tmp_path / "c"), 1, os.path.join(folder, "warm_start.pt"), 1e-3,
                     sft_batch_size=8, eval_every=0, **flags)
    assert all(torch.equal(first[0][k], v) for k, v in saved.items())
    assert len(steps) == 8
    args = tiny_args(tmp_path, sft_batch_size=8)  # the sft arm's data is the warm start's
    tokenizer, prompt_len = grpo.check_spaces(args, *grpo.check_env(args))
    again = grpo.demonstrations(args, tokenizer, prompt_len, "cpu")
    assert all(torch.equal(x, y) for x, y in zip(steps[0], again))


# ---------------------------------------------------------------------------------------
# Bad input: one line, exit status 2
# ---------------------------------------------------------------------------------------
@pytest.mark.parametrize("argv, message", [
    (["--group-size", "1"], "--group-size must be at least 2, got 1: a group of one"),
    (["--beta", "-0.1"], "--beta must be 0 or more, got -0.1"),
    (["--clip-coef", "1.5"], "the clip range [1 - 1.5, 1 + 1.5] is not a range around 1"),
    (["--clip-coef", "0"], "is not a range around 1"),
    (["--clip-coef-high", "-0.1"], "the clip range [1 - 0.2, 1 + -0.1] is not a range"),
    (["--total-timesteps", "100", "--num-prompts", "16"],
     "--total-timesteps 100 is less than one batch (num_prompts*group_size = 128 completions)"),
    (["--top-p", "0"], "--top-p must be in (0, 1], got 0.0"),
    (["--top-p", "1.5"], "--top-p must be in (0, 1], got 1.5"),
    (["--n-embd", "30"], "--n-embd 30 is not divisible by --n-head 4"),
    (["--temperature", "0"], "--temperature must be positive"),
    (["--model", "no/such/folder"], "--model no/such/folder is not a folder"),
    (["--env-id", "CartPole-v1"], "CartPole-v1 has a Box observation and a Discrete action "
     "space; grpo.py needs Text for both"),
    (["--pass-k", "65", "--eval-samples", "64"], "--pass-k must be from 1 to --eval-samples (64), got 65"),
    (["--pass-k", "0"], "--pass-k must be from 1 to --eval-samples (16), got 0"),
    (["--pass-k", "10", "--eval-samples", "8"], "--pass-k must be from 1 to --eval-samples (8), got 10"),
    (["--eval-samples", "0"], "--eval-samples must be positive, got 0"),
    (["--warm-start", "no/such/warm_start.pt"], "--warm-start no/such/warm_start.pt is not a file"),
    (["--sft-stop-at", "1.5"], "--sft-stop-at must be an accuracy in [0, 1], got 1.5"),
    (["--sft-stop-at", "-0.1"], "--sft-stop-at must be an accuracy in [0, 1], got -0.1"),
    (["--sft-stop-at", "0.5", "--eval-every", "0"], "--sft-stop-at reads the held-out accuracy"),
])
def test_bad_input_is_one_line_and_exit_status_2(argv, message, check_usage_error):
    check_usage_error("grpo.py", argv, message)


# every flag check_flags holds positive, each at 0 (a float one prints "got 0.0")
@pytest.mark.parametrize("flag", [
    "threads", "n-layer", "n-head", "n-embd", "max-new-tokens", "num-prompts", "update-epochs",
    "num-minibatches", "learning-rate", "temperature", "max-sample-rounds", "mask-sync-every",
    "max-grad-norm", "sft-batch-size", "sft-learning-rate", "eval-samples"])
def test_each_size_and_rate_at_0_is_bad_input(flag, check_usage_error):
    check_usage_error("grpo.py", [f"--{flag}", "0"], f"--{flag} must be positive, got 0")


@pytest.mark.parametrize("argv, message", [
    (["--sft-steps", "-1"], "--sft-steps must be 0 or more, got -1"),
    (["--sft-problems", "-1"], "--sft-problems must be 0 or more, got -1"),
    (["--sft-steps", "5", "--sft-problems", "0"], "--sft-steps needs --sft-problems 1 or more"),
    (["--num-prompts", "2", "--group-size", "2", "--num-minibatches", "5"],
     "--num-minibatches 5 is more than the batch's 4 completions"),
])
def test_a_warm_start_without_data_and_more_minibatches_than_completions_are_bad_input(
        argv, message, check_usage_error):
    check_usage_error("grpo.py", argv, message)


class NoAnswers(gym.Env):
    """A text task whose reset gives no worked answer (info without "answer"); with
    shared=True every instance counts its resets on one counter, so that a group's
    identically seeded copies pose different problems."""
    observation_space = gym.spaces.Text(6, min_length=4, charset="0123456789+=")
    action_space = gym.spaces.Text(3, min_length=0, charset="0123456789")
    resets = 0

    def __init__(self, shared=False, held_out=False, render_mode=None):
        self.shared = shared

    def reset(self, seed=None, options=None):
        super().reset(seed=seed)
        NoAnswers.resets += self.shared
        return f"{NoAnswers.resets % 10}+1=", {}

    def step(self, action):
        return "", 0.0, True, False, {}


def test_a_task_without_worked_answers_needs_sft_steps_0(check_usage_error):
    # info["answer"] is what the warm start learns from; a task without it is told to skip
    # the warm start, and with --sft-steps 0 it trains
    gym.register("NoAnswers-v0", entry_point=NoAnswers)
    check_usage_error("grpo.py", [*TINY_FLAGS, "--env-id", "NoAnswers-v0"],
                      "NoAnswers-v0 gives no info['answer'] at reset for the supervised warm "
                      "start; train with --sft-steps 0")


def test_stop_at_return_stops_after_the_batch_that_reaches_it(tmp_path):
    # every answer's reward is 0 or 1, so a last-20 mean of -1000 is reached by the first
    # batch of 16 completions (its 16 episodes and, at 32, the next batch's: the mean needs
    # 20); the run stops there, cleanly (no update after it), its budget of 256 not spent
    summary = grpo.main(tiny_args(tmp_path, eval_episodes=0, total_timesteps=256,
                                  stop_at_return=-1000.0))
    assert summary["global_steps"] == 32 and summary["solved_at_step"] == 32
    assert not summary["interrupted"]


def test_a_run_stopped_at_its_return_takes_the_end_measures_there(tmp_path):
    # stopped by --stop-at-return at 32 completions, as above: held_out.csv's last row is the
    # end's, at step 32 (the start's at 0), and pass_at_k.csv compares the two, as a run that
    # spends its budget does
    grpo.main(tiny_args(tmp_path, eval_episodes=2, eval_samples=2, total_timesteps=256,
                        stop_at_return=-1000.0))
    (folder,) = glob.glob(str(tmp_path / "*"))
    rows = read_csv(os.path.join(folder, "held_out.csv"))
    assert [int(row["global_step"]) for row in rows][-2:] == [0, 32]
    assert os.path.exists(os.path.join(folder, "pass_at_k.csv"))


def test_a_task_whose_group_poses_different_problems_is_stopped(tmp_path):
    # the G copies of a group share a seed so that they pose one problem; a task drawing its
    # problems from elsewhere (here a counter shared by every copy) is stopped at the first
    # batch with one line, not trained on mismatched groups
    gym.register("SharedCounter-v0", entry_point=NoAnswers, kwargs={"shared": True})
    with pytest.raises(grpo.UsageError, match="SharedCounter-v0 posed different prompts to a "
                                               "group's identically seeded environments"):
        grpo.main(tiny_args(tmp_path, env_id="SharedCounter-v0", sft_steps=0, eval_episodes=0))


def test_a_prompt_longer_than_its_observation_space_is_bad_input():
    # the prompt's tokens are left-padded to the observation space's longest text; one that
    # takes more tokens than that would be cut, so it stops with one line
    tokenizer = grpo.Tokenizer("0123456789+=", grpo.SPECIAL_TOKENS)
    assert grpo.encode_prompts(tokenizer, ["1+2="], 6, "cpu").tolist() == [
        [0, 0] + [tokenizer.ids[c] for c in "1+2="]]
    with pytest.raises(grpo.UsageError, match=re.escape(
            "the prompt '12+34=' takes 6 tokens, more than the task's prompts' 5; use a "
            "tokenizer of one token a character or word")):
        grpo.encode_prompts(tokenizer, ["12+34="], 5, "cpu")


@pytest.mark.parametrize("text_obs", [True, False])
def test_a_task_with_text_on_one_side_alone_is_bad_input(tmp_path, text_obs):
    # a prompt in AND a completion out: Text observations with Discrete actions, or the other
    # way round, fail as CartPole's two non-text spaces do
    text, discrete = gym.spaces.Text(6, charset="0123456789+="), gym.spaces.Discrete(3)
    spaces = (text, discrete) if text_obs else (discrete, text)
    with pytest.raises(grpo.UsageError, match="grpo.py needs Text for both"):
        grpo.check_spaces(tiny_args(tmp_path), *spaces)


def test_a_model_folder_without_a_model_or_a_tokenizer_is_bad_input(tmp_path, check_usage_error):
    folder = save_tiny_hf_model(tmp_path / "full")
    empty = tmp_path / "empty"
    empty.mkdir()
    check_usage_error("grpo.py", [*TINY_FLAGS, "--model", str(empty)],
                      f"--model {empty} holds no tokenizer that transformers can load")
    only_tokenizer = tmp_path / "tokenizer-only"
    only_tokenizer.mkdir()
    for name in os.listdir(folder):
        if name.startswith(("tokenizer", "special_tokens")):
            os.link(os.path.join(folder, name), only_tokenizer / name)
    check_usage_error("grpo.py", [*TINY_FLAGS, "--model", str(only_tokenizer)],
                      f"--model {only_tokenizer} holds no causal LM that transformers can load")


def test_a_tokenizer_that_cannot_write_the_tasks_characters_is_bad_input(tmp_path,
                                                                        check_usage_error):
    folder = save_tiny_hf_model(tmp_path / "no-plus", characters="0123456789=")
    check_usage_error("grpo.py", [*TINY_FLAGS, "--model", folder],
                      f"--model {folder}'s tokenizer cannot write '+', which AdditionPartial-v0's "
                      "prompts and answers use")


def test_pass_at_k_csv_holds_the_warm_starts_curve_then_the_ends(tmp_path):
    # write_pass_at_k(path, start, end): a row per k = 1..n, the warm start's pass@k in the
    # column warm_start and the end's in end (Yue et al.'s figure reads them so)
    grpo.write_pass_at_k(str(tmp_path), [0.25, 0.5, 0.75], [0.6, 0.8, 0.9])
    rows = read_csv(os.path.join(tmp_path, "pass_at_k.csv"))
    assert [(int(r["k"]), float(r["warm_start"]), float(r["end"])) for r in rows] == [
        (1, 0.25, 0.6), (2, 0.5, 0.8), (3, 0.75, 0.9)]


# ---------------------------------------------------------------------------------------
# Every column of every file a run writes, recomputed by the test: from the saved models
# (warm_start.pt, model.pt) with a decoder, a reward, pass@k and k3 of the test's own, and
# from the answers the training environments scored
# ---------------------------------------------------------------------------------------
# A warm start that answers some held-out problems and not others (0.9 s): 300 supervised
# steps of a 32-wide block, sampled at temperature 0.8 (not the default 1), 8 problems
# answered 64 times at the start and the end, held_out.csv's pass@3 (--pass-k 3)
RECOMPUTED = dict(sft_steps=300, sft_learning_rate=0.01, sft_batch_size=32, sft_problems=400,
                  n_embd=32, temperature=0.8, eval_episodes=8, eval_samples=4, pass_k=3,
                  save_model=True)


@pytest.fixture(scope="module")
def recomputed_run(tmp_path_factory):
    """RECOMPUTED's run, once: (its folder, its summary, what it printed, and each training
    answer as (prompt, completion) in the order the environments scored them)."""
    output_dir, scored = tmp_path_factory.mktemp("recomputed"), []
    with pytest.MonkeyPatch.context() as mp:
        original = grpo.AdditionEnv.step

        def step(self, action):
            if not self.held_out:
                scored.append((self.prompt, action))
            return original(self, action)
        mp.setattr(grpo.AdditionEnv, "step", step)
        printed = io.StringIO()
        with contextlib.redirect_stdout(printed):
            summary = grpo.main(tiny_args(output_dir, **RECOMPUTED))
    (path,) = glob.glob(str(output_dir / "*"))
    return path, summary, printed.getvalue(), scored


def right(prompt, completion):
    """The test's own reward: "a+b=" answered with the decimal a + b exactly."""
    a, b = prompt[:-1].split("+")
    return completion == str(int(a) + int(b))


def held_out_prompts(seed, n):
    """The evaluation's problems: a held-out AdditionPartial-v0 reset with seed + 100,000 + i
    for its i-th problem, as a vector environment seeds its i-th copy."""
    grpo.register_tasks()
    env = gym.make("AdditionPartial-v0", held_out=True)
    return [env.reset(seed=seed + 100_000 + i)[0] for i in range(n)]


def answers(policy, prompts, temperature=None):
    """The test's own decoder: the prompts left-padded (token 0) to 6 characters, then 5
    tokens, each the most likely one (temperature None) or drawn from softmax(logits /
    temperature), every row drawn at every step; pad after the end token (1). Returns
    (tokens [N, 11], the completions' texts)."""
    ids = policy.tokenizer.ids
    tokens = torch.tensor([[0] * (6 - len(p)) + [ids[c] for c in p] for p in prompts])
    done = torch.zeros(len(prompts), dtype=torch.bool)
    for _ in range(5):
        logits = policy(tokens)[0][:, -1]
        token = (logits.argmax(-1) if temperature is None else
                 torch.distributions.Categorical(logits=logits / temperature).sample())
        token = torch.where(done, 0, token)
        tokens = torch.cat([tokens, token[:, None]], 1)
        done |= token == 1
    texts = []
    for row in tokens[:, 6:].tolist():
        row = row[:row.index(1)] if 1 in row else row
        texts.append("".join(policy.tokenizer.tokens[i] for i in row))
    return tokens, texts


def pass_at_k_by_count(n, c, k):
    """1 - C(n - c, k) / C(n, k), written out: the chance that k of the n answers, drawn
    without replacement, are all wrong, is the product over i < k of (n - c - i) / (n - i)."""
    all_wrong = 1.0
    for i in range(k):
        all_wrong *= max(n - c - i, 0) / (n - i)
    return 1 - all_wrong


def held_out_by_hand(policy, reference, prompts, seed, n=64, k=3, temperature=0.8):
    """A held_out.csv row recomputed: greedy accuracy; n answers sampled a problem on the
    random stream seeded seed + 100,000, c right of each problem's n; pass@1 and pass@k the
    means over problems of pass_at_k_by_count; the mean length in tokens through the end
    token; the KL to the reference, sum over those tokens of exp(r) - r - 1 with
    r = log pi_ref - log pi at the temperature, averaged over the answers. Returns (the row,
    pass@1..n)."""
    with torch.no_grad():
        _, greedy = answers(policy, prompts)
        torch.manual_seed(seed + 100_000)
        counts, lengths, kls = np.zeros(len(prompts), dtype=int), [], []
        for _ in range(n):
            tokens, texts = answers(policy, prompts, temperature)
            counts += [right(p, t) for p, t in zip(prompts, texts)]
            completion = tokens[:, 6:]
            # through the first end token (1), all 5 without one
            length = torch.tensor([row.index(1) + 1 if 1 in row else 5
                                   for row in completion.tolist()])
            mask = torch.arange(5)[None] < length[:, None]
            logp, ref = (torch.log_softmax(m(tokens)[0][:, 5:-1] / temperature, -1)
                         .gather(-1, completion[..., None])[..., 0] for m in (policy, reference))
            r = ref - logp
            kls += ((r.exp() - r - 1) * mask).sum(1).tolist()
            lengths += length.tolist()
    curve = [float(np.mean([pass_at_k_by_count(n, c, j) for c in counts])) for j in range(1, n + 1)]
    return {"accuracy": np.mean([right(p, t) for p, t in zip(prompts, greedy)]),
            "pass@1": float(np.mean(counts / n)), f"pass@{k}": curve[k - 1],
            "answer_length": float(np.mean(lengths)), "kl_to_reference": float(np.mean(kls))}, curve


def assert_row(row, hand):
    """Each column of a held_out.csv row equals the test's number, up to float32 rounding."""
    for column, value in hand.items():
        assert float(row[column]) == pytest.approx(value, rel=1e-5, abs=1e-6), column


def saved_policy(path, name=None):
    """RECOMPUTED's model with the weights of a run's checkpoint (name) or a state dict."""
    args = grpo.Args(**{**TINY, **RECOMPUTED})
    grpo.register_tasks()
    tokenizer, prompt_len = grpo.check_spaces(args, *grpo.check_env(args))
    policy = grpo.make_policy(args, tokenizer, prompt_len)
    state = path if name is None else grpo.read_checkpoint(os.path.join(path, name))["policy"]
    policy.load_state_dict(state)
    return policy.eval()


def test_held_out_csv_pass_at_k_csv_and_the_summary_recomputed_from_the_saved_models(
        recomputed_run):
    # held_out.csv's row at 0 is warm_start.pt's answers with itself as the reference, its
    # row at the end (64) model.pt's with warm_start.pt as the reference; pass_at_k.csv
    # holds the two curves; summary.json's start is the warm start's greedy accuracy, its
    # final evaluation model.pt's greedy accuracy on the same 8 problems, its gain the
    # difference, judged against 0.3
    path, summary, printed, _ = recomputed_run
    prompts = held_out_prompts(1, 8)
    start_model, end_model = saved_policy(path, "warm_start.pt"), saved_policy(path, "model.pt")
    start, start_curve = held_out_by_hand(start_model, start_model, prompts, seed=1)
    end, end_curve = held_out_by_hand(end_model, start_model, prompts, seed=1)
    rows = read_csv(os.path.join(path, "held_out.csv"))
    assert [int(r["global_step"]) for r in rows] == [0, 64]
    for row, hand in ((rows[0], start), (rows[1], end)):
        assert list(row)[2:] == list(hand)
        assert_row(row, hand)
    # the measures this run must tell apart, or the checks above could not fail on a swap
    assert 0 < start["pass@1"] < start["pass@3"] < 1 and 0 < start["accuracy"] < 1
    assert end["kl_to_reference"] > 1e-3 and 3 < start["answer_length"] < 5
    table = read_csv(os.path.join(path, "pass_at_k.csv"))
    assert [int(r["k"]) for r in table] == list(range(1, 65))
    assert [float(r["warm_start"]) for r in table] == approx(start_curve)
    assert [float(r["end"]) for r in table] == approx(end_curve)
    assert start_curve != approx(end_curve)

    with open(os.path.join(path, "summary.json")) as f:
        written = json.load(f)
    final = np.array([right(p, t) for p, t in zip(prompts, answers(end_model, prompts)[1])], float)
    assert written["start_return"] == approx(start["accuracy"])
    assert written["eval_return_mean"] == approx(final.mean())
    assert written["eval_return_std"] == approx(final.std())
    assert written["end_return"] == approx(final.mean() - start["accuracy"])
    # 64 steps, where the goal is for 307,200: its gain is given, not judged
    assert written["goal_budget"] == 307_200 and written["holds"] is None
    assert (written["solved_threshold"], written["holds_on"]) == (0.3, "gain")
    assert written["global_steps"] == 64 and written == summary
    gain = final.mean() - start["accuracy"]
    assert f"({start['accuracy']:.2f} -> {final.mean():.2f}) {gain:+.2f}" in printed


def test_episodes_csv_updates_csv_and_the_training_mean_recomputed_from_the_answers_scored(
        recomputed_run, monkeypatch):
    # episodes.csv: a row per training answer, in the order the 16 environments scored
    # them, at the batch's step (16, 32, 48, 64), its return the test's reward, its length 1
    # step; updates.csv: per batch the mean reward and the mean length in tokens (through the
    # end token, 5 for an answer cut without one) and 4 groups kept; summary.json's training
    # mean the last 20 answers' rewards
    path, summary, _, scored = recomputed_run
    rewards = [float(right(p, c)) for p, c in scored]
    # tokens through the end token, 5 for an answer cut without one; a padding token
    # sampled before the end is one token though its text is "<pad>"
    lengths = [min(len(c) - 4 * c.count("<pad>") + 1, 5) for _, c in scored]
    assert len(scored) == 64
    episodes = read_csv(os.path.join(path, "episodes.csv"))
    assert [int(e["global_step"]) for e in episodes] == [16 * (i // 16 + 1) for i in range(64)]
    assert [float(e["episode_return"]) for e in episodes] == rewards
    assert {e["episode_length"] for e in episodes} == {"1"}
    updates = read_csv(os.path.join(path, "updates.csv"))
    assert [int(u["global_step"]) for u in updates] == [16, 32, 48, 64]
    for u, row in enumerate(updates):
        batch = slice(16 * u, 16 * (u + 1))
        assert float(row["reward_mean"]) == approx(np.mean(rewards[batch]))
        assert float(row["completion_length"]) == approx(np.mean(lengths[batch]))
        assert int(row["groups_kept"]) == 4
    assert 0 < np.mean(rewards) < 1 and len(set(lengths)) > 1  # both columns could be wrong
    assert summary["train_return_last20"] == approx(np.mean(rewards[-20:]))


def test_the_warm_starts_held_out_rows_recomputed_from_its_weights_then(tmp_path, monkeypatch):
    # --eval-every 3200 with 32 answers a supervised step: rows after steps 100 and 200 (3,200
    # and 6,400 answers learned from, at -6,400 and -3,200 before GRPO), each what the weights
    # of that moment answer, 4 samples a problem, the reference the policy itself (KL 0)
    states, original = [], grpo.supervised_step

    def kept(policy, *args):
        loss = original(policy, *args)
        states.append(copy.deepcopy(policy.state_dict()))
        return loss
    monkeypatch.setattr(grpo, "supervised_step", kept)
    grpo.main(tiny_args(tmp_path, **{**RECOMPUTED, "save_model": False}, eval_every=3200))
    (path,) = glob.glob(str(tmp_path / "*"))
    rows = read_csv(os.path.join(path, "held_out.csv"))
    assert [int(r["global_step"]) for r in rows] == [-6400, -3200, 0, 64]
    prompts = held_out_prompts(1, 8)
    for row, after in zip(rows, (100, 200)):
        policy = saved_policy(states[after - 1])
        hand, _ = held_out_by_hand(policy, policy, prompts, seed=1, n=4)
        assert_row(row, hand)
    measures = ["accuracy", "pass@1", "pass@3", "answer_length"]  # the two moments' rows differ,
    assert [rows[0][c] for c in measures] != [rows[1][c] for c in measures]  # or a mix-up would pass


def test_evaluations_csv_and_held_out_csv_measure_the_same_policy_at_each_step(
        recomputed_run, tmp_path):
    # From the run's warm_start.pt (--warm-start) with --eval-every 16: the greedy
    # evaluation at 16, 32 and 48 (evaluations.csv) and held_out.csv's greedy accuracy there
    # answer the same 8 problems with the same weights, so they are equal; the row at 0 is
    # the checkpoint's own, as recomputed from it
    path = recomputed_run[0]
    grpo.main(tiny_args(tmp_path, **{**RECOMPUTED, "save_model": False}, eval_every=16,
                        warm_start=os.path.join(path, "warm_start.pt"), learning_rate=0.01))
    (folder,) = glob.glob(str(tmp_path / "*"))
    rows = {int(r["global_step"]): r for r in read_csv(os.path.join(folder, "held_out.csv"))}
    evaluations = read_csv(os.path.join(folder, "evaluations.csv"))
    assert sorted(rows) == [0, 16, 32, 48, 64]
    assert [int(e["global_step"]) for e in evaluations] == [16, 32, 48, 64]
    for e in evaluations[:3]:
        assert float(e["eval_return_mean"]) == float(rows[int(e["global_step"])]["accuracy"])
    model = saved_policy(path, "warm_start.pt")
    start, _ = held_out_by_hand(model, model, held_out_prompts(1, 8), seed=1)
    assert float(rows[0]["accuracy"]) == approx(start["accuracy"])
    assert float(rows[0]["pass@1"]) == approx(start["pass@1"])
    assert any(float(rows[s]["kl_to_reference"]) > 1e-4 for s in (16, 32, 48))


def test_updates_csvs_loss_columns_are_the_means_of_the_updates_loss_calls(tmp_path,
                                                                          monkeypatch):
    # policy_loss, kl and clipfrac: each update's mean over its 2 epochs x 2 minibatches of
    # what grpo_loss returned (the clipped term, the k3 term, the clipped fraction), each
    # in its own column; a high rate so that the three differ from 0 and from each other
    returned, original = [], grpo.grpo_loss

    def kept(**kw):
        out = original(**kw)
        returned.append([x.item() for x in out[1:]])
        return out
    monkeypatch.setattr(grpo, "grpo_loss", kept)
    pay_at_random(monkeypatch, p=0.5)
    grpo.main(tiny_args(tmp_path, eval_episodes=0, update_epochs=2, learning_rate=0.05,
                        total_timesteps=48))
    (path,) = glob.glob(str(tmp_path / "*"))
    updates = read_csv(os.path.join(path, "updates.csv"))
    assert len(returned) == 4 * len(updates) == 12
    for u, row in enumerate(updates):
        pg, kl, clipped = np.mean(returned[4 * u:4 * (u + 1)], axis=0)
        assert [float(row[c]) for c in ("policy_loss", "kl", "clipfrac")] == approx([pg, kl, clipped])
    last = [float(updates[-1][c]) for c in ("policy_loss", "kl", "clipfrac")]
    assert last[1] > 0 and last[2] > 0 and len(set(last)) == 3

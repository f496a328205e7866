"""Tests of rlhf.py: the labeller, the Bradley-Terry loss, the per-token KL reward, GAE over a
completion, whitening, the adaptive KL controller, PPO's clipped loss, DPO's loss and NLPO's
mask by hand, and DPO's loss against TRL's on the same tensors; the tokens and the positions
the value head and the reward model read; the task environment; the loop's glue (the
sampler's log-probabilities and the completion's values in the update, the frozen reference
and reward model, the warm start's answers, the pairs and their file, DPO without the reward
model, the adaptive controller, NLPO's masks, held_out's own random stream); bad input; runs
end to end and determinism; curve.png's lines and goal. The plumbing's behaviour is tested
once, in test_plumbing.py."""
import glob
import json
import math
import os
import random
import re
import zlib
from types import SimpleNamespace

import gymnasium as gym
import numpy as np
import pytest
import torch

import rlhf
from conftest import (approx, check_a_warm_start_is_read_as_tensors_only, detached,
                      episode_rows, read_csv, same_seed_episodes, spy_on, tensor)

LN2, LN3 = math.log(2.0), math.log(3.0)
P, T, V = 4, 8, 17  # Preference-v0's prompt length in words, --max-new-tokens, <eos> and 16 words
# The built-in tokenizer's ids on Preference-v0 (a token a word): <eos> 0 (it pads too), then
# the 16 words in alphabetical order, written out here
SORTED_WORDS = ("awful", "bad", "barely", "feels", "film", "gift", "good", "great", "is", "joy",
                "looks", "pain", "quite", "seems", "truly", "very")
WORD_IDS = {w: i + 1 for i, w in enumerate(SORTED_WORDS)}  # awful 1, ..., very 16
# Four of the task's prompts, each a walk of the grammar (noun -> verb -> adverb -> adjective
# -> noun): each ends in an adjective but the last, which ends in an adverb
PROMPT = "film looks very good"
PROMPTS4 = (PROMPT, "joy is truly great", "pain feels barely bad", "good gift looks very")
# A tiny run: 16 prompts a batch, 20 preference pairs, a one-block transformer
TINY = dict(total_timesteps=64, num_prompts=16, sft_steps=5, sft_problems=32, num_pairs=20,
            rm_steps=5, n_layer=1, n_head=2, n_embd=16, eval_episodes=0, eval_every=0,
            eval_samples=2, num_minibatches=2, tensorboard=False, curve=False)
TINY_FLAGS = ["--total-timesteps", "64", "--num-prompts", "16", "--sft-steps", "5",
              "--sft-problems", "32", "--num-pairs", "20", "--rm-steps", "5", "--n-layer", "1",
              "--n-head", "2", "--n-embd", "16", "--eval-episodes", "0", "--eval-every", "0"]


def tiny_args(tmp_path, **flags):
    return rlhf.Args(**{**TINY, "output_dir": str(tmp_path), **flags})


@pytest.fixture
def one_thread():
    """torch on one CPU thread, as a run's (--threads 1), for a test that trains without main:
    on two busy cores, two threads take several times as long."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


def ids(text):
    """A text's token ids, by hand, a word each: awful is 1, ..., very is 16."""
    return [WORD_IDS[w] for w in text.split()]


# ---------------------------------------------------------------------------------------
# The labeller and the reward model's loss, by hand
# ---------------------------------------------------------------------------------------
def test_the_bradley_terry_loss_is_log_2_for_equal_scores():
    # sigma(0) = 1/2 for every pair: -log(1/2) = ln 2, wherever the two scores sit
    assert rlhf.bradley_terry_loss(tensor(0.3, -1.2), tensor(0.3, -1.2)).item() == approx(LN2)


def test_the_bradley_terry_loss_of_a_known_difference():
    # pair 1 equal: ln 2; pair 2, r_w - r_l = ln 3: sigma(ln 3) = 3/(3 + 1) = 3/4, -log(3/4) =
    # ln(4/3) = 0.287682; the mean (0.693147 + 0.287682) / 2 = 0.490415. Scores the other way
    # round (r_l - r_w) would give -log(1/4) = ln 4 for pair 2.
    chosen, rejected = tensor(0.3, 1.0), tensor(0.3, 1.0 - LN3)
    expected = (LN2 + math.log(4 / 3)) / 2
    assert rlhf.bradley_terry_loss(chosen, rejected).item() == approx(expected)
    # it depends on the difference only: a reward model is fixed up to a constant
    assert rlhf.bradley_terry_loss(chosen + 5, rejected + 5).item() == approx(expected)
    assert rlhf.bradley_terry_loss(rejected, chosen).item() == approx((LN2 + math.log(4)) / 2)


def test_the_labeller_at_temperature_0_prefers_the_higher_gold_score_and_a_on_a_tie():
    prefer_a = rlhf.bradley_terry_labels(tensor(1.0, 0.0, 0.5, -0.2), tensor(0.0, 1.0, 0.5, -0.1),
                                         0.0)
    assert prefer_a.tolist() == [True, False, True, False]


def test_the_labellers_frequency_is_sigma_of_the_difference_over_tau():
    # 20,000 pairs with gold_a - gold_b = 0.5 at tau 0.5: P(a) = sigma(1) = 0.731059; 20,000
    # with -1.0 at tau 0.5: sigma(-2) = 0.119203. The standard error of a share of 20,000 is
    # at most sqrt(0.25 / 20,000) = 0.0035: 0.015 is over 4 of them. (Multiplying by tau
    # would give sigma(0.25) = 0.562, the difference the other way round 1 - 0.731 = 0.269.)
    n = 20_000
    gold_a = torch.cat([torch.full((n,), 0.7), torch.full((n,), -0.4)])
    gold_b = torch.cat([torch.full((n,), 0.2), torch.full((n,), 0.6)])
    before = torch.get_rng_state()
    labels = rlhf.bradley_terry_labels(gold_a, gold_b, 0.5, torch.Generator().manual_seed(3))
    assert labels[:n].float().mean().item() == pytest.approx(1 / (1 + math.exp(-1)), abs=0.015)
    assert labels[n:].float().mean().item() == pytest.approx(1 / (1 + math.exp(2)), abs=0.015)
    # the labeller's generator alone draws: the same seed, the same labels; the global stream
    # untouched
    again = rlhf.bradley_terry_labels(gold_a, gold_b, 0.5, torch.Generator().manual_seed(3))
    assert torch.equal(labels, again) and torch.equal(torch.get_rng_state(), before)


# ---------------------------------------------------------------------------------------
# The per-token KL reward, GAE over a completion, whitening, by hand
# ---------------------------------------------------------------------------------------
def test_the_kl_penalty_on_every_token_and_the_score_on_the_last_real_one():
    # beta 0.5, log pi_ref = -1 everywhere, log pi_old - log pi_ref per token:
    #   row 0, 2 words and <eos> (mask 1 1 1 0): [0.2, -0.4, 1.0, 9 after the end], score 2:
    #          -0.5 * [0.2, -0.4, 1.0] = [-0.1, 0.2, -0.5], the score on t = 2: -0.5 + 2 = 1.5
    #   row 1, cut at T = 4 without <eos> (mask 1 1 1 1): [0.4, 0, -0.2, 0.6], score -1:
    #          [-0.2, 0, 0.1, -0.3], the score on t = T - 1 = 3: -0.3 - 1 = -1.3
    #   row 2, <eos> at once (mask 1 0 0 0): [1.0, 5, 5, 5], score 3: -0.5 + 3 = 2.5, then 0
    ref = torch.full((3, 4), -1.0)
    diff = tensor(0.2, -0.4, 1.0, 9, 0.4, 0, -0.2, 0.6, 1.0, 5, 5, 5).view(3, 4)
    mask = tensor(1, 1, 1, 0, 1, 1, 1, 1, 1, 0, 0, 0).view(3, 4)
    rewards = rlhf.kl_penalized_rewards(tensor(2, -1, 3), ref + diff, ref, mask, 0.5)
    assert rewards.tolist() == [approx([-0.1, 0.2, 1.5, 0.0]), approx([-0.2, 0.0, 0.1, -1.3]),
                                approx([2.5, 0.0, 0.0, 0.0])]
    # each row sums to score - beta * sum of the log-ratios: 2 - 0.5 * 0.8 = 1.6, -1 - 0.4 = -1.4
    assert rewards.sum(1).tolist() == approx([1.6, -1.4, 2.5])


def test_gae_over_a_completion_of_3_tokens_padded_to_5():
    # gamma 1, lambda 0.95. Row 0: 3 tokens, rewards [0.1, -0.2, 1.0], values [0.5, 0.4, 0.3];
    # what lies after the end (reward 7, value 9) must not count: V(n+1) = 0.
    #   delta_2 = 1.0 + 0 - 0.3 = 0.7            A_2 = 0.7
    #   delta_1 = -0.2 + 0.3 - 0.4 = -0.3        A_1 = -0.3 + 0.95 * 0.7 = 0.365
    #   delta_0 = 0.1 + 0.4 - 0.5 = 0.0          A_0 = 0.0 + 0.95 * 0.365 = 0.34675
    #   R = A + V = [0.84675, 0.765, 1.0]
    # Row 1: one token, reward 2, value 0.5: A = 2 - 0.5 = 1.5, R = 2.
    rewards = tensor(0.1, -0.2, 1.0, 7, 7, 2.0, 7, 7, 7, 7).view(2, 5)
    values = tensor(0.5, 0.4, 0.3, 9, 9, 0.5, 9, 9, 9, 9).view(2, 5)
    mask = tensor(1, 1, 1, 0, 0, 1, 0, 0, 0, 0).view(2, 5)
    advantages, returns = rlhf.compute_gae(rewards, values, mask, 1.0, 0.95)
    assert advantages.tolist() == [approx([0.34675, 0.365, 0.7, 0, 0]), approx([1.5, 0, 0, 0, 0])]
    assert returns.tolist() == [approx([0.84675, 0.765, 1.0, 0, 0]), approx([2.0, 0, 0, 0, 0])]
    # returns = advantages + values on the completion's tokens
    assert torch.allclose(returns, (advantages + values) * mask)


def test_gae_discounts_with_gamma_and_lambda():
    # gamma 0.9, lambda 0.5, rewards [0, 1], values [0.2, 0.4]: delta_1 = 1 - 0.4 = 0.6,
    # delta_0 = 0 + 0.9 * 0.4 - 0.2 = 0.16; A_1 = 0.6, A_0 = 0.16 + 0.45 * 0.6 = 0.43;
    # R = [0.63, 1.0]
    advantages, returns = rlhf.compute_gae(tensor(0, 1).view(1, 2), tensor(0.2, 0.4).view(1, 2),
                                           torch.ones(1, 2), 0.9, 0.5)
    assert advantages.tolist() == [approx([0.43, 0.6])]
    assert returns.tolist() == [approx([0.63, 1.0])]


def test_masked_whiten_uses_the_unbiased_masked_variance():
    # the masked values 1, 2, 3, 4 (100 and -50 are padding): mean 2.5, squared deviations
    # 2.25 + 0.25 + 0.25 + 2.25 = 5, unbiased variance 5 / 3, std 1.290994:
    # w = [-1.5, -0.5, 0.5, 1.5] / 1.290994 = [-1.161895, -0.387298, 0.387298, 1.161895]
    # (the biased variance 5 / 4 would give [-1.341641, ...])
    values = tensor(1, 2, 3, 100, 4, -50, 100, 100).view(2, 4)
    mask = tensor(1, 1, 1, 0, 1, 0, 0, 0).view(2, 4)
    s = math.sqrt(5 / 3)
    w = rlhf.masked_whiten(values, mask)
    assert w[mask.bool()].tolist() == approx([-1.5 / s, -0.5 / s, 0.5 / s, 1.5 / s])
    # shift_mean=False keeps the mean: + 2.5
    kept = rlhf.masked_whiten(values, mask, shift_mean=False)
    assert kept[mask.bool()].tolist() == approx([2.5 - 1.5 / s, 2.5 - 0.5 / s, 2.5 + 0.5 / s,
                                                2.5 + 1.5 / s])


# ---------------------------------------------------------------------------------------
# Ziegler et al.'s adaptive KL controller, by hand
# ---------------------------------------------------------------------------------------
@pytest.mark.parametrize("kl, beta", [
    (8.0, 0.1 * (1 + 0.2 * 256 / 10_000)),   # 8 / 4 - 1 = 1, clipped to +0.2: 0.100512
    (1.0, 0.1 * (1 - 0.2 * 256 / 10_000)),   # 1 / 4 - 1 = -0.75, clipped to -0.2: 0.099488
    (4.4, 0.1 * (1 + 0.1 * 256 / 10_000)),   # 4.4 / 4 - 1 = 0.1, inside the clip: 0.100256
    (3.6, 0.1 * (1 - 0.1 * 256 / 10_000)),   # -0.1: 0.099744
    (4.0, 0.1),                              # on target: e = 0, beta stays
])
def test_the_adaptive_kl_controller_by_hand(kl, beta):
    controller = rlhf.AdaptiveKLController(0.1, 4.0, 10_000)
    assert controller.update(kl, 256) == pytest.approx(beta, rel=1e-12)
    assert controller.beta == pytest.approx(beta, rel=1e-12)


def test_the_adaptive_kl_controller_scales_with_n_over_the_horizon_and_compounds():
    # n = 1000 completions over a horizon of 500: 1 + 0.2 * 2 = 1.4 times
    assert rlhf.AdaptiveKLController(0.1, 4.0, 500).update(8.0, 1000) == pytest.approx(0.14)
    # two batches above the target: 0.1 * 1.00512^2 = 0.1010262
    controller = rlhf.AdaptiveKLController(0.1, 4.0, 10_000)
    controller.update(8.0, 256)
    assert controller.update(8.0, 256) == pytest.approx(0.1 * 1.00512 ** 2, rel=1e-12)


# ---------------------------------------------------------------------------------------
# PPO's loss by hand: every branch of both clips
# ---------------------------------------------------------------------------------------
def ppo_example():
    """One completion of 4 tokens and a padding position, whose values would change every
    mean were it counted."""
    old = torch.zeros(1, 5)
    logp = torch.log(tensor(1.5, 0.5, 1.1, 0.7, 20.0)).view(1, 5).requires_grad_()
    values = tensor(0.5, 0.5, 1.1, 0.5, 100).view(1, 5).requires_grad_()
    return dict(logprobs=logp, old_logprobs=old, advantages=tensor(1, 1, -1, -1, 100).view(1, 5),
                values=values, old_values=tensor(0, 0, 1, 1, 0).view(1, 5),
                returns=tensor(1, 0, 2, 0, -100).view(1, 5),
                completion_mask=tensor(1, 1, 1, 1, 0).view(1, 5), clip_coef=0.2,
                clip_coef_value=0.2, vf_coef=0.1)


def test_ppo_loss_by_hand():
    # ratios 1.5, 0.5, 1.1, 0.7 with A = +1, +1, -1, -1, clip [0.8, 1.2]:
    #   max(-1.5, -1.2) = -1.2 (clipped)    max(-0.5, -0.8) = -0.5 (unclipped)
    #   max(1.1, 1.1)   = 1.1  (in range)   max(0.7, 0.8)   = 0.8  (clipped)
    #   pg = (-1.2 - 0.5 + 1.1 + 0.8) / 4 = 0.05; clipfrac: |rho - 1| > 0.2 for 1.5, 0.5, 0.7: 3/4
    # values V, V_old, R, with V_clip = V_old + clip(V - V_old, -0.2, 0.2):
    #   0.5, 0, 1: (0.5 - 1)^2 = 0.25, V_clip 0.2: (0.2 - 1)^2 = 0.64 -> 0.64 (the clipped)
    #   0.5, 0, 0: 0.25, V_clip 0.2: 0.04 -> 0.25 (the unclipped)
    #   1.1, 1, 2: in range, 0.81 both -> 0.81
    #   0.5, 1, 0: 0.25, V_clip 0.8: 0.64 -> 0.64 (the clipped, from below)
    #   vf = (0.64 + 0.25 + 0.81 + 0.64) / 4 / 2 = 0.2925; L = 0.05 + 0.1 * 0.2925 = 0.07925
    kw = ppo_example()
    loss, pg, vf, clipfrac = rlhf.ppo_loss(**kw)
    assert (pg.item(), vf.item(), clipfrac.item()) == (approx(0.05), approx(0.2925), approx(0.75))
    assert loss.item() == approx(0.07925)
    # gradients: a clipped term passes none. d/dlogp of -A rho / 4 = -A rho / 4:
    # token 2: -0.5 / 4 = -0.125; token 3: 1.1 / 4 = 0.275; tokens 1 and 4 clipped, padding 0.
    # d/dV of 0.1 * (V - R)^2 / 2 / 4 = 0.1 (V - R) / 4: token 2: 0.0125; token 3:
    # -0.9 * 0.1 / 4 = -0.0225; tokens 1 and 4: the clipped value's term, no gradient.
    loss.backward()
    assert kw["logprobs"].grad.tolist() == [approx([0.0, -0.125, 0.275, 0.0, 0.0])]
    assert kw["values"].grad.tolist() == [approx([0.0, 0.0125, -0.0225, 0.0, 0.0])]


# ---------------------------------------------------------------------------------------
# DPO's loss by hand
# ---------------------------------------------------------------------------------------
def test_dpo_loss_by_hand():
    # beta 0.5. Pair 1: log pi/pi_ref of the chosen -2 - (-3) = 1, of the rejected -4 - (-3) =
    # -1: margin 0.5 * (1 - (-1)) = 1, -log sigma(1) = log(1 + e^-1) = 0.313262. Pair 2: both
    # ratios 0: margin 0, ln 2 = 0.693147. Pair 3: chosen -1 - (-1) = 0, rejected -2 - (-6) = 4:
    # margin 0.5 * (0 - 4) = -2, -log sigma(-2) = log(1 + e^2) = 2.126928.
    # Mean (0.313262 + 0.693147 + 2.126928) / 3 = 3.133337 / 3 = 1.044446. The margins 1, 0, -2
    # are not symmetric, so a flipped sign (rejected - chosen: margins -1, 0, 2) shows in the
    # loss: (1.313262 + 0.693147 + 0.126928) / 3 = 0.711112. Implicit rewards beta log pi/pi_ref:
    # chosen 0.5 * [1, 0, 0] = [0.5, 0, 0], rejected 0.5 * [-1, 0, 4] = [-0.5, 0, 2].
    chosen = tensor(-2, -3, -1).requires_grad_()
    loss, chosen_rewards, rejected_rewards = rlhf.dpo_loss(
        chosen_logps=chosen, rejected_logps=tensor(-4, -5, -2), ref_chosen_logps=tensor(-3, -3, -1),
        ref_rejected_logps=tensor(-3, -5, -6), beta=0.5)
    assert loss.item() == approx((math.log(1 + math.exp(-1)) + LN2 + math.log(1 + math.exp(2))) / 3)
    assert loss.item() == approx(1.044446)
    assert chosen_rewards.tolist() == approx([0.5, 0, 0])
    assert rejected_rewards.tolist() == approx([-0.5, 0, 2.0])
    # dL/d log pi(y_w) = -beta sigma(-margin) / 3: sigma(-1) = 0.268941, sigma(0) = 0.5,
    # sigma(2) = 0.880797, times -0.5 / 3: [-0.0448236, -0.0833333, -0.146800]
    loss.backward()
    sig = lambda x: 1 / (1 + math.exp(-x))  # noqa: E731
    assert chosen.grad.tolist() == approx([-0.5 / 3 * sig(-1), -0.5 / 3 * 0.5, -0.5 / 3 * sig(2)])


def test_dpo_loss_is_log_2_at_the_reference_and_only_the_margin_counts():
    # At the reference (log pi = log pi_ref for both) the implicit rewards are 0 and the loss
    # is -log sigma(0) = log 2, whatever beta. Adding 3 to all four log-probabilities of a pair
    # changes nothing: only (log pi(y_w) - log pi_ref(y_w)) - (log pi(y_l) - log pi_ref(y_l))
    # counts. With beta 2, a chosen ratio +0.5 and a rejected one -0.25: margin 2 * 0.75 = 1.5,
    # -log sigma(1.5) = log(1 + e^-1.5) = 0.201413; the rewards +1.0 and -0.5; raising the chosen
    # lowers the loss (its gradient is -beta sigma(-1.5) = -2 * 0.182426 = -0.364851).
    for beta in (0.1, 2.0):
        loss, chosen, rejected = rlhf.dpo_loss(tensor(-3, -1), tensor(-2, -5), tensor(-3, -1),
                                               tensor(-2, -5), beta=beta)
        assert loss.item() == approx(LN2) and chosen.tolist() == rejected.tolist() == [0, 0]
    shifted, _, _ = rlhf.dpo_loss(tensor(1.5), tensor(-1.25), tensor(1), tensor(-1), beta=2.0)
    chosen_logps = tensor(-1.5).requires_grad_()  # the last call: a failing check shows it
    loss, chosen, rejected = rlhf.dpo_loss(chosen_logps, tensor(-4.25), tensor(-2), tensor(-4),
                                           beta=2.0)
    assert loss.item() == approx(math.log(1 + math.exp(-1.5)))
    assert loss.item() == pytest.approx(0.201413, abs=1e-6)
    assert shifted.item() == approx(loss.item())
    assert (chosen.item(), rejected.item()) == approx((1.0, -0.5))
    loss.backward()
    assert chosen_logps.grad.item() == approx(-2 / (1 + math.exp(1.5)))
    assert not chosen.requires_grad and not rejected.requires_grad, (
        "the two implicit rewards are returned detached: they are logged, not trained")


# ---------------------------------------------------------------------------------------
# NLPO's top-p mask and the masked log-probabilities
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
    assert rlhf.top_p_mask(logits, top_p).tolist() == expected
    # the order of the vocabulary does not matter: [0.2, 0.5, 0.3]
    assert rlhf.top_p_mask(logits[[2, 0, 1]], top_p).tolist() == [expected[i] for i in (2, 0, 1)]
    # nor do leading dimensions: each row its own nucleus
    rows = torch.stack([logits, logits[[2, 0, 1]]]).view(2, 1, 3)
    assert rlhf.top_p_mask(rows, top_p).tolist() == [[expected], [[expected[i] for i in (2, 0, 1)]]]


def test_a_masked_token_has_probability_exactly_0_and_no_gradient():
    # logits [0, ln 2, 100, ln 3], token 2 masked: e^l = [1, 2, -, 3], sum 6, so pi =
    # [1/6, 2/6, 0, 3/6] (without the mask token 2 would take nearly all of it)
    logits = tensor(0, LN2, 100, LN3).view(1, 1, 4).expand(1, 4, 4).clone().requires_grad_()
    masks = tensor(1, 1, 0, 1).bool().view(1, 1, 4).expand(1, 4, 4)
    logp = rlhf.token_logprobs(logits, torch.tensor([[0, 1, 3, 2]]), action_masks=masks)
    assert logp[0, :3].tolist() == approx([-math.log(6), -LN3, -LN2])
    assert logp[0, 3].exp().item() == 0.0  # exactly 0, not merely small
    logp.sum().backward()
    assert logits.grad[..., 2].eq(0).all()  # the masked logit gets no gradient at all
    # the unmasked tokens' gradient is softmax's over the three: 1{k = token} - pi_k
    assert logits.grad[0, 0].tolist() == approx([1 - 1 / 6, -2 / 6, 0.0, -3 / 6])
    # without a mask, the plain log-softmax
    plain = rlhf.token_logprobs(tensor(0, LN2, LN3).view(1, 1, 3), torch.tensor([[2]]))
    assert plain.item() == approx(-LN2)


# ---------------------------------------------------------------------------------------
# Tokens, and the positions the value head and the reward model read
# ---------------------------------------------------------------------------------------
def test_prompts_are_left_padded_and_completions_end_with_eos_then_padding():
    # a token a word: <eos> 0, awful 1, bad 2, ..., very 16 (WORD_IDS); film looks very good
    # is film 5, looks 11, very 16, good 7
    tok = rlhf.Tokenizer(rlhf.WORDS, rlhf.SPECIAL_TOKENS)
    assert tok.encode(PROMPT) == [5, 11, 16, 7] and rlhf.pad_id_of(tok) == 0
    prompts = rlhf.encode_prompts(tok, [PROMPT, "awful bad"], 4, "cpu")
    assert prompts.tolist() == [[5, 11, 16, 7], [0, 0, 1, 2]]
    # 2 words (joy 10, is 9), <eos>, padding; nothing but <eos>; the 10 words of ids 1 to 10
    # cut at T = 8 without an <eos>
    ten = "awful bad barely feels film gift good great is joy"
    tokens, mask = rlhf.encode_texts(tok, [PROMPT, "awful bad", "bad"], ["joy is", "", ten], 4, 8,
                                     "cpu")
    assert tokens[:, :4].tolist() == [[5, 11, 16, 7], [0, 0, 1, 2], [0, 0, 0, 2]]
    completions = tokens[:, 4:]
    assert completions.tolist() == [[10, 9, 0, 0, 0, 0, 0, 0], [0] * 8, list(range(1, 9))]
    assert mask.tolist() == [[1, 1, 1, 0, 0, 0, 0, 0], [1, 0, 0, 0, 0, 0, 0, 0], [1] * 8]
    assert rlhf.decode_completions(tok, completions) == (
        "joy is", "", "awful bad barely feels film gift good great")


def test_the_built_in_tokenizer_of_preference_v0_is_a_token_a_word(tmp_path):
    # check_spaces on Preference-v0's WordText spaces: <eos> 0 (rlhf.py's one special token),
    # then the 16 words sorted, awful 1, bad 2, ..., very 16 (SORTED_WORDS); the prompt is 4
    # tokens, its 4 words (WordText's max_words, not its 28 characters)
    rlhf.register_tasks()
    env = rlhf.PreferenceEnv()
    tok, prompt_len = rlhf.check_spaces(tiny_args(tmp_path), env.observation_space,
                                        env.action_space)
    assert tok.tokens == ["<eos>", *SORTED_WORDS] and len(tok) == V == 17 and prompt_len == 4
    assert (tok.eos_token_id, tok.pad_token_id, rlhf.pad_id_of(tok)) == (0, None, 0)
    # by hand: pain 12, feels 4, barely 3, bad 2; joy 10, is 9, truly 15, great 8
    assert tok.encode("pain feels barely bad") == [12, 4, 3, 2]
    assert tok.decode([10, 9, 15, 8]) == "joy is truly great"
    assert tok.encode("") == [] and tok.decode([]) == ""
    # only the task's words, separated by single spaces, can be written
    for text in ("joy  is", " joy", "joy ", "joys", "joy is!"):
        with pytest.raises(KeyError):
            tok.encode(text)
    # the action space's longest completion, 7 words, and <eos> fill T = 8; 8 words are cut
    # at T without one. joy 10, is 9, truly 15, great 8, gift 6, is 9, very 16, good 7
    seven, eight = "joy is truly great gift is very", "joy is truly great gift is very good"
    tokens, mask = rlhf.encode_texts(tok, [PROMPT, PROMPT], [seven, eight], P, T, "cpu")
    assert tokens.tolist() == [[5, 11, 16, 7, 10, 9, 15, 8, 6, 9, 16, 0],
                               [5, 11, 16, 7, 10, 9, 15, 8, 6, 9, 16, 7]]
    assert mask.tolist() == [[1] * 8, [1] * 8]
    assert rlhf.decode_completions(tok, tokens[:, P:]) == (seven, eight)
    # a prompt of 5 words is one token too many: one line, not a prompt cut short
    with pytest.raises(rlhf.UsageError, match=re.escape(
            "the prompt 'film looks very good joy' takes 5 tokens, more than the task's "
            "prompts' 4; use a tokenizer of one token a character or word")):
        rlhf.encode_prompts(tok, [PROMPT + " joy"], prompt_len, "cpu")


def test_a_text_task_of_characters_gets_a_token_a_character(tmp_path):
    # Plain Text spaces (no words): the built-in tokenizer reads a character a token, as
    # grpo.py's does, the space one of them: <eos> 0, " " 1, a 2, b 3, c 4 (sorted); the
    # prompt's length its 5 characters
    tok, prompt_len = rlhf.check_spaces(tiny_args(tmp_path, sft_steps=0),
                                        gym.spaces.Text(5, charset="ab "),
                                        gym.spaces.Text(3, charset="abc"))
    assert tok.tokens == ["<eos>", " ", "a", "b", "c"] and prompt_len == 5
    assert tok.encode("a b") == [2, 1, 3] and tok.encode("cab") == [4, 2, 3]
    assert tok.decode([3, 1, 3, 2]) == "b ba"
    assert rlhf.encode_prompts(tok, ["ab"], prompt_len, "cpu").tolist() == [[0, 0, 0, 2, 3]]


class EveryTwoCharacters:
    """A stand-in for --model's tokenizer: a token every 2 characters (the last may be 1)."""
    eos_token_id, pad_token_id = 0, None

    def encode(self, text, add_special_tokens=False):
        return [1] * math.ceil(len(text) / 2)


def test_with_model_the_prompt_is_4_words_of_the_most_tokens_a_word_takes(tmp_path,
                                                                           monkeypatch):
    # --model's tokenizer is asked to write each of the 16 words and a sentence of them all
    # (a tokenizer of words need not write a letter alone). The prompt's length in its tokens: 4 words, each of the most tokens a word
    # takes alone or after a space. The longest word, barely, 6 characters: 3 tokens; " barely"
    # 7: 4; so 4 * 4 = 16 (not 4 * 3 = 12 from the words alone, nor 28 characters)
    given = []
    monkeypatch.setattr(rlhf, "load_tokenizer", lambda args, characters: given.append(
        characters) or EveryTwoCharacters())
    env = rlhf.PreferenceEnv()
    _, prompt_len = rlhf.check_spaces(tiny_args(tmp_path, model="a/model", sft_steps=0),
                                      env.observation_space, env.action_space)
    assert given == [(*rlhf.WORDS, " ".join(rlhf.WORDS))] and prompt_len == 16


class MisspellsBarely:
    """A stand-in for --model's tokenizer that writes every text back but misspells "barely",
    and, as a tokenizer of words without an unknown token, raises on a text of no word."""
    eos_token_id, pad_token_id = 0, None

    def encode(self, text, add_special_tokens=False):
        if not set(text.split()) <= set(rlhf.WORDS):
            raise KeyError(text)
        self.text = text
        return [1] * len(text.split())

    def decode(self, ids):
        return self.text.replace("barely", "barley")


def test_with_model_a_tokenizer_that_cannot_write_a_word_is_refused_in_one_line(tmp_path,
                                                                                monkeypatch):
    # the 16 words and their sentence: "barely" and the sentence (which holds it) come back
    # changed; the other 15 words pass. A task of characters asks each character, and a
    # tokenizer of words cannot write a letter alone: the error names it, not a traceback.
    monkeypatch.setattr(rlhf, "from_pretrained", lambda loader, path, what: MisspellsBarely())
    args = tiny_args(tmp_path, model="a/model")
    texts = (*rlhf.WORDS, " ".join(rlhf.WORDS))
    with pytest.raises(rlhf.UsageError, match=re.escape(
            f"--model a/model's tokenizer cannot write 'barely, {texts[-1]}', which "
            "Preference-v0's prompts and completions use; pick a tokenizer that can")):
        rlhf.load_tokenizer(args, texts)
    with pytest.raises(rlhf.UsageError, match="cannot write 'ab'"):
        rlhf.load_tokenizer(args, "ab")
    assert isinstance(rlhf.load_tokenizer(args, tuple(w for w in rlhf.WORDS if w != "barely")),
                      MisspellsBarely)
    # a tokenizer that writes a word back with a space before it (" joy" for "joy") writes
    # another text than the task's: refused too, not stripped and let through
    spaced = MisspellsBarely()
    spaced.decode = lambda ids: " " + spaced.text
    monkeypatch.setattr(rlhf, "from_pretrained", lambda loader, path, what: spaced)
    with pytest.raises(rlhf.UsageError, match="cannot write 'joy, gift, film'"):
        rlhf.load_tokenizer(args, rlhf.WORDS)


class PositionModel(torch.nn.Module):
    """A stand-in language model whose outputs name their position j: next-token logits all
    j, values 10 j (as PolicyWithValue returns them), and hidden states [j, 1]."""
    hidden_size = 2

    def __init__(self):
        super().__init__()
        self.unused = torch.nn.Parameter(torch.zeros(1))

    def positions(self, tokens):
        return torch.arange(tokens.shape[1], dtype=torch.float32).expand(*tokens.shape)

    def forward(self, tokens):
        j = self.positions(tokens)
        return j.unsqueeze(-1).expand(*tokens.shape, 3), 10 * j


class PositionLM(PositionModel):
    def forward(self, tokens):
        j = self.positions(tokens)
        return torch.zeros(*tokens.shape, 3), torch.stack([j, torch.ones_like(j)], -1)


def test_the_completions_outputs_are_read_where_each_token_was_chosen():
    # prompt_len 4, T = 5 (9 positions): completion token t (position 4 + t) was chosen from
    # the outputs at position 3 + t, so the logits and values of positions 3..7 (not 4..8)
    tokens = torch.zeros(2, 9, dtype=torch.long)
    logits, values = rlhf.completion_outputs(PositionModel(), tokens, 4)
    assert values.tolist() == [[30.0, 40.0, 50.0, 60.0, 70.0]] * 2
    assert logits[..., 0].tolist() == [[3.0, 4.0, 5.0, 6.0, 7.0]] * 2


def test_the_value_head_reads_the_hidden_states_and_starts_at_zero():
    policy = rlhf.PolicyWithValue(PositionLM())
    tokens = torch.zeros(1, 9, dtype=torch.long)
    assert policy(tokens)[1].eq(0).all()  # zero at the start: V = 0 until it learns
    with torch.no_grad():
        policy.v_head.weight.copy_(tensor(1.0, 0.0).view(1, 2))
    _, values = rlhf.completion_outputs(policy, tokens, 4)
    assert values.tolist() == [[3.0, 4.0, 5.0, 6.0, 7.0]]


def test_the_reward_model_reads_the_completions_last_real_token():
    # prompt_len 4, T = 5: the score is the head on the hidden state of position
    # 4 + (completion length) - 1: 2 tokens (a word and <eos>) -> 5; cut at T without <eos>
    # -> 8; <eos> alone -> 4. The head reads the position itself: [j, 1] . [1, 0] = j.
    reward_model = rlhf.RewardModel(PositionLM(), 4)
    with torch.no_grad():
        reward_model.head.weight.copy_(tensor(1.0, 0.0).view(1, 2))
        reward_model.head.bias.zero_()
    mask = tensor(1, 1, 0, 0, 0, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0).view(3, 5)
    scores = reward_model(torch.zeros(3, 9, dtype=torch.long), mask)
    assert scores.tolist() == [5.0, 8.0, 4.0]


# ---------------------------------------------------------------------------------------
# The sampler: its log-probabilities are the update's, NLPO's mask holds
# ---------------------------------------------------------------------------------------
class FixedLogits(torch.nn.Module):
    """A 'language model' whose next-token logits are the same at every position."""

    def __init__(self, logits):
        super().__init__()
        self.logits = torch.nn.Parameter(torch.as_tensor(logits, dtype=torch.float32))

    def forward(self, tokens):
        return self.logits.expand(*tokens.shape, len(self.logits)), torch.zeros(tokens.shape)


def test_sampling_returns_the_log_probabilities_of_its_tokens():
    # tokens 0 (<eos>), 1, 2 with logits [-1e9, 0, ln 3]: pi(2) = 3/4, and no completion ends
    torch.manual_seed(0)
    tokens, mask, logp, masks = rlhf.sample(FixedLogits([-1e9, 0.0, LN3]), torch.full((4000, 2), 1),
                                            2, 0, 0)
    completions = tokens[:, 2:]
    assert masks is None and mask.eq(1).all()
    assert completions.eq(2).float().mean().item() == pytest.approx(0.75, abs=0.02)
    assert torch.allclose(logp, torch.where(completions == 2, math.log(0.75), math.log(0.25)))


def test_greedy_sampling_pads_after_the_end_and_counts_nothing_there():
    # the most likely token is 0, <eos>: every completion is [<eos>, pad, pad], mask [1, 0, 0]
    tokens, mask, logp, _ = rlhf.sample(FixedLogits([3.0, 0.0, 1.0]), torch.full((2, 2), 1), 3, 0,
                                        0, greedy=True)
    assert tokens[:, 2:].tolist() == [[0, 0, 0]] * 2 and mask.tolist() == [[1, 0, 0]] * 2
    assert logp[:, 1:].eq(0).all()


def test_sampling_under_nlpos_mask_never_takes_a_masked_token():
    # The masking model puts 0.6 and 0.3 on tokens 1 and 2 and 0.1 on <eos>: top-p 0.85 keeps
    # 1 and 2 (before each: 0, 0.6, 0.9). The policy prefers <eos> but may not take it: the
    # completions run their length, their log-probabilities renormalized over {1, 2}: policy
    # logits [5, 0, ln 3] -> 1/4, 3/4. The update's token_logprobs with the stored masks agree.
    torch.manual_seed(0)
    mask_model = FixedLogits(torch.log(tensor(0.1, 0.6, 0.3)))
    policy = FixedLogits([5.0, 0.0, LN3])
    tokens, mask, logp, masks = rlhf.sample(policy, torch.full((500, 2), 1), 3, 0, 0,
                                            mask_model=mask_model, top_p=0.85)
    completions = tokens[:, 2:]
    assert set(completions.unique().tolist()) == {1, 2} and mask.eq(1).all()
    assert masks.shape == (500, 3, 3) and masks[..., 1:].all() and not masks[..., 0].any()
    assert torch.allclose(logp, torch.where(completions == 2, math.log(0.75), math.log(0.25)))
    again = rlhf.token_logprobs(policy(tokens)[0][:, 1:-1], completions, action_masks=masks)
    assert torch.allclose(again, logp)


@pytest.mark.parametrize("top_p", [1.0, 0.5])
def test_the_samplers_log_probs_are_the_updates_at_the_same_weights(tmp_path, top_p, one_thread):
    # A sharp arbitrary model: the update's log-probabilities (completion_outputs, the stored
    # NLPO masks) equal the sampler's on every completion token, so PPO's first ratio is 1
    args = tiny_args(tmp_path)
    rlhf.register_tasks()
    tokenizer, prompt_len = rlhf.check_spaces(args, *rlhf.check_env(args))
    torch.manual_seed(2)
    policy = rlhf.make_policy(args, tokenizer, prompt_len)
    with torch.no_grad():
        for p in policy.parameters():
            p.mul_(3.0)
    prompts = rlhf.encode_prompts(tokenizer, list(PROMPTS4) * 4, P, "cpu")
    mask_model = policy if top_p < 1 else None
    tokens, mask, logp, masks = rlhf.sample(policy, prompts, T, 0, 0, mask_model=mask_model,
                                            top_p=top_p)
    assert (masks is None) == (top_p == 1) and mask.sum(1).min() >= 1
    with torch.no_grad():
        again = rlhf.token_logprobs(rlhf.completion_outputs(policy, tokens, P)[0], tokens[:, P:],
                                    action_masks=masks)
    assert torch.allclose(again * mask, logp, atol=1e-5)
    assert logp[mask == 0].eq(0).all()
    if top_p < 1:  # could fail: the nucleus left some token out
        assert not masks.all()


# ---------------------------------------------------------------------------------------
# The task environment
# ---------------------------------------------------------------------------------------
@pytest.mark.parametrize("completion, gold", [
    # prompt "film looks very good", last word good, an adjective: a noun follows it (joy gift
    # film pain). Sentiments: joy 1, gift 0.5, pain -1, truly 0.5, barely -0.5, great 1,
    # good 0.5, the verbs, film, very and quite 0
    ("joy is truly great", (1 + 0 + 0.5 + 1) / 4),  # good -> joy -> is -> truly -> great, all
    #                                                 allowed: the mean sentiment 2.5 / 4 = 0.625
    ("gift good", (0.5 + 0.5) / 2 - 2 * 1 / 2),     # gift -> good is not allowed (a verb follows
    #                                                 a noun): 0.5 - 1 = -0.5
    ("truly", 0.5 - 2 * 1 / 1),                     # good -> truly is not allowed: 0.5 - 2 = -1.5
    ("pain barely", (-1 - 0.5) / 2 - 2 * 1 / 2),    # good -> pain allowed, pain -> barely not:
    #                                                 -0.75 - 1 = -1.75
    ("", -1.0),                                     # an empty completion
    ("gift glad", (0.5 - 1) / 2 - 2 * 1 / 2),       # glad is no word: sentiment -1, and gift ->
    #                                                 glad not allowed: -0.25 - 1 = -1.25
])
def test_the_gold_score_by_hand(completion, gold):
    assert rlhf.gold_score(PROMPT, completion) == pytest.approx(gold, abs=1e-12)


def test_prompts_and_answers_are_walks_of_the_grammar_and_the_held_out_tenth_is_apart():
    rlhf.register_tasks()
    for flag in (False, True):
        env = gym.make("Preference-v0", held_out=flag)
        prompts = []
        for i in range(300):
            prompt, info = env.reset(seed=5 if i == 0 else None)
            prompts.append(prompt)
            answer = info["answer"]
            # words separated by single spaces: 4 in a prompt, 2 to 7 in an answer, in the spaces
            assert len(prompt.split(" ")) == 4 and 2 <= len(answer.split(" ")) <= 7
            assert env.observation_space.contains(prompt) and env.action_space.contains(answer)
            words = prompt.split(" ") + answer.split(" ")  # each word one its predecessor may
            assert all(b in rlhf.SUCCESSORS[a] for a, b in zip(words, words[1:]))  # precede
            # grammatical: the gold score is the mean sentiment, no penalty
            assert rlhf.gold_score(prompt, answer) == pytest.approx(
                np.mean([rlhf.SENTIMENT[w] for w in answer.split(" ")]))
        assert {zlib.crc32(p.encode()) % 10 == 0 for p in prompts} == {flag}
        # 16 first words, 4 successors each: 16 * 4^3 = 1,024 grammatical prompts, 96 of them
        # held out (crc32 % 10 == 0). 300 uniform draws of the 96 see 96 (1 - (95/96)^300) = 92
        # different ones on average, of the 928 others 256: the prompts vary
        assert len(set(prompts)) > (80 if flag else 200)
        _, reward, terminated, truncated, _ = env.step("joy is")
        assert (reward, terminated, truncated) == (rlhf.gold_score(prompts[-1], "joy is"), True,
                                                   False)


def test_the_grammar_is_the_cycle_noun_verb_adverb_adjective():
    # The four classes of four words, written out. A word of each class is followed by the
    # next class's four words, round the cycle noun -> verb -> adverb -> adjective -> noun.
    nouns, verbs = {"joy", "gift", "film", "pain"}, {"is", "seems", "looks", "feels"}
    adverbs, adjectives = {"truly", "very", "quite", "barely"}, {"great", "good", "bad", "awful"}
    assert len(rlhf.WORDS) == 16 and set(rlhf.WORDS) == nouns | verbs | adverbs | adjectives
    assert {c: set(words) for c, words in rlhf.CLASSES.items()} == {
        "noun": nouns, "verb": verbs, "adverb": adverbs, "adjective": adjectives}
    # one word of each class by hand: film is followed by a verb, looks by an adverb, very by
    # an adjective, good by a noun
    assert set(rlhf.SUCCESSORS["film"]) == {"is", "seems", "looks", "feels"}
    assert set(rlhf.SUCCESSORS["looks"]) == {"truly", "very", "quite", "barely"}
    assert set(rlhf.SUCCESSORS["very"]) == {"great", "good", "bad", "awful"}
    assert set(rlhf.SUCCESSORS["good"]) == {"joy", "gift", "film", "pain"}
    # and every word: its 4 successors, the next class's
    assert set(rlhf.SUCCESSORS) == set(rlhf.WORDS)
    for words, following in ((nouns, verbs), (verbs, adverbs), (adverbs, adjectives),
                             (adjectives, nouns)):
        for w in words:
            assert len(rlhf.SUCCESSORS[w]) == 4 and set(rlhf.SUCCESSORS[w]) == following, w
    # the cycle: the words k steps from a word are one class, its own again after 4 steps
    # and not before
    for w in rlhf.WORDS:
        home, reach = next(set(ws) for ws in (nouns, verbs, adverbs, adjectives) if w in ws), {w}
        for k in range(1, 9):
            reach = {b for a in reach for b in rlhf.SUCCESSORS[a]}
            assert len(reach) == 4 and (reach == home) == (k % 4 == 0), (w, k)
    # rlhf.py's example of the grammar, "film looks very good gift is", forbids nothing
    words = "film looks very good gift is".split()
    assert all(b in rlhf.SUCCESSORS[a] for a, b in zip(words, words[1:]))


def test_every_word_is_in_prompts_and_answers_and_followed_by_each_of_its_classs_four():
    # 2,000 resets of the training prompts: each of the 16 words is in some prompt and in some
    # answer, and the words seen after each word (in the prompt, from the prompt's last word
    # to the answer's first, in the answer) are exactly its class's successors, all 4. A reset
    # makes 3 + 2 to 7 transitions, 15,000 or so in all, some 900 a word: each successor is
    # drawn about 230 times, none missed but with (3/4)^230 ~ 1e-29. A walk that drew among 3
    # of the 4 would never put a class's 4th word (pain, feels, barely, awful) after another
    # word: never in an answer, and missing from each word's successors.
    env = rlhf.PreferenceEnv()
    in_prompts, in_answers, followers = set(), set(), {w: set() for w in rlhf.WORDS}
    lengths = set()
    for i in range(2000):
        prompt, info = env.reset(seed=7 if i == 0 else None)
        in_prompts |= set(prompt.split())
        in_answers |= set(info["answer"].split())
        lengths.add(len(info["answer"].split()))
        words = prompt.split() + info["answer"].split()
        for a, b in zip(words, words[1:]):
            followers[a].add(b)
    assert in_prompts == in_answers == set(rlhf.WORDS) and len(rlhf.WORDS) == 16
    assert lengths == set(range(2, 8))  # the warm start's answers: 2 to 7 words, both ends
    for w in rlhf.WORDS:
        assert followers[w] == set(rlhf.SUCCESSORS[w]) and len(followers[w]) == 4, w


def test_the_frame_crosses_out_a_forbidden_first_word_of_the_completion():
    # The --capture-video frame of "film looks very good" + a completion, by hand: 4 + 7 + 1
    # = 12 squares of 16 pixels, 16 x 192 pixels, background 235. Square i spans columns
    # 16i..16i+15, its colour rows 2..13 and columns 16i+2..16i+13; the prompt's grey (128),
    # a completion word's (255 (1 - s), 255 s, 60) with s = (sentiment + 1) / 2. A word the
    # grammar forbids after its predecessor is crossed out: rows size/2 - 1 = 7 and 8 black
    # (0) across all 16 columns of its square, margins too.
    # "is" (sentiment 0, s = 0.5: (127, 127, 60)) after good: an adjective is followed by a
    # noun, so good -> is is forbidden: square 4 (prompt_len, the completion's first word),
    # columns 64..79, has the bar. "gift" (sentiment 0.5, s = 0.75: (63, 191, 60)) after good
    # is allowed: no bar, its rows 7 and 8 its colour in columns 66..77 and 235 in the margins.
    def frame(completion):
        return rlhf.draw_words(PROMPT, completion, 4, 7).astype(int)
    crossed, kept = frame("is"), frame("gift")
    assert crossed.shape == kept.shape == (16, 192, 3)
    for f in (crossed, kept):  # the prompt's squares grey, none crossed; squares 5.. empty
        for i in range(4):
            assert (f[2:14, 16 * i + 2:16 * i + 14] == 128).all() and (f[:2] == 235).all()
        assert (f[:, 80:] == 235).all()
    assert (crossed[7:9, 64:80] == 0).all()  # the bar, across the square's 16 columns
    assert (crossed[2:7, 66:78] == (127, 127, 60)).all()  # above and below it, is's colour
    assert (crossed[9:14, 66:78] == (127, 127, 60)).all()
    assert (kept[2:14, 66:78] == (63, 191, 60)).all()  # gift's square whole, rows 7-8 too
    assert (kept[7:9, 64:66] == 235).all() and (kept[7:9, 78:80] == 235).all()
    # a second word: good -> gift allowed, gift -> gift not (a noun is followed by a verb):
    # square 5 crossed (columns 80..95), square 4 not
    both = frame("gift gift")
    assert (both[7:9, 80:96] == 0).all() and (both[2:14, 66:78] == (63, 191, 60)).all()


@pytest.mark.parametrize("prompt, completion, gold", [
    # A prompt ending in an adverb (very): an adjective follows it. very -> great allowed,
    # great -> great twice not (a noun follows an adjective): the mean sentiment 1, less
    # 2 * 2/3: 1 - 4/3 = -1/3
    ("good gift looks very", "great great great", 1 - 2 * 2 / 3),
    # the same completion after two prompts: the transitions start at the prompt's last word,
    # good -> joy allowed: (1 + 0) / 2 = 0.5; very -> joy not: 0.5 - 2 * 1/2 = -0.5
    (PROMPT, "joy is", (1 + 0) / 2),
    ("good gift looks very", "joy is", (1 + 0) / 2 - 2 * 1 / 2),
    # grammatical and of bad sentiment: good -> pain -> feels -> barely -> awful,
    # (-1 + 0 - 0.5 - 1) / 4 = -0.625
    (PROMPT, "pain feels barely awful", (-1 + 0 - 0.5 - 1) / 4),
    # a word not of the language has no successor: gift -> glad and glad -> seems are both
    # forbidden, (0.5 - 1 + 0) / 3 - 2 * 2/3 = -1/6 - 4/3 = -1.5
    (PROMPT, "gift glad seems", (0.5 - 1 + 0) / 3 - 2 * 2 / 3),
    # spaces --model's text may write: words are split on whitespace, so these score as
    # "joy is truly great", (1 + 0 + 0.5 + 1) / 4 = 0.625
    (PROMPT, " joy is truly great", 0.625),
    (PROMPT, "joy is truly great  ", 0.625),
    (PROMPT, "joy  is truly great", 0.625),
    (PROMPT + " ", "joy is truly great", 0.625),  # and the prompt's last word is still good
    (PROMPT, "   ", -1.0),  # spaces alone: no word, an empty completion
])
def test_the_gold_score_of_phrases_by_hand(prompt, completion, gold):
    assert rlhf.gold_score(prompt, completion) == pytest.approx(gold, abs=1e-12)


def test_the_labeller_prefers_a_phrase_with_the_bradley_terry_probability_of_its_gold_score():
    # After PROMPT (its last word good): "gift seems" is grammatical, (0.5 + 0) / 2 = 0.25;
    # "film looks" too, (0 + 0) / 2 = 0; "joy great" has one forbidden transition of two
    # (joy -> great), (1 + 1) / 2 - 2 * 1/2 = 0, a tie with "film looks".
    gold = {text: rlhf.gold_score(PROMPT, text) for text in ("gift seems", "film looks",
                                                             "joy great")}
    assert gold == {"gift seems": 0.25, "film looks": 0.0, "joy great": 0.0}
    # At tau 0.5: P("gift seems" preferred to "film looks") = sigma((0.25 - 0) / 0.5) =
    # sigma(0.5) = 1 / (1 + e^-0.5) = 0.622459; the other way round sigma(-0.5) = 0.377541;
    # the tie sigma(0) = 0.5. Over n = 20,000 draws of a fixed generator the share's standard
    # error is at most sqrt(0.25 / 20,000) = 0.0035: 0.015 is over 4 of them, and the bugs lie
    # further off: tau multiplying (sigma(0.125) = 0.531), no tau (sigma(0.25) = 0.562), the
    # difference the other way round (0.378 for 0.622).
    n = 20_000
    for a, b, p in (("gift seems", "film looks", 1 / (1 + math.exp(-0.5))),
                    ("film looks", "gift seems", 1 / (1 + math.exp(0.5))),
                    ("joy great", "film looks", 0.5)):
        labels = rlhf.bradley_terry_labels(torch.full((n,), gold[a]), torch.full((n,), gold[b]),
                                           0.5, torch.Generator().manual_seed(11))
        assert labels.float().mean().item() == pytest.approx(p, abs=0.015), (a, b)
    assert 1 / (1 + math.exp(-0.5)) == pytest.approx(0.622459, abs=1e-6)
    # tau 0: the higher gold score always, and a on a tie
    a = ("gift seems", "film looks", "joy great", "film looks")
    b = ("film looks", "gift seems", "film looks", "joy great")
    prefer_a = rlhf.bradley_terry_labels(tensor(*(gold[t] for t in a)),
                                         tensor(*(gold[t] for t in b)), 0.0)
    assert prefer_a.tolist() == [True, False, True, True]


def test_word_text_holds_whole_words_separated_by_single_spaces():
    # 1 to 3 words of joy, is, great
    space = rlhf.WordText(3, ("joy", "is", "great"), min_words=1)
    for text in ("joy", "joy is great", "great great great", "is joy"):
        assert space.contains(text), text
    for text in ("",  # fewer than min_words
                 "joy is great joy",  # 4 words, more than 3
                 "joy  is",  # a double space: an empty word between
                 " joy", "joy ",  # a leading or trailing space: an empty word
                 "joy\tis", "joys", "Joy", "joy was",  # no word of the vocabulary
                 3, None, ["joy"]):  # not a text
        assert not space.contains(text), repr(text)
    # min_words 0: the empty text is one (an empty completion)
    assert rlhf.WordText(3, ("joy", "is")).contains("")
    # max_length bounds a text for a tokenizer of characters: 3 words of 5 letters at most,
    # 3 * 5 + 2 spaces = 17 characters
    assert space.max_length >= len("great great great") == 17
    assert set(space.character_set) == set("joyisgreat ")
    # sample(): 300 texts of the space, seeded, every length 1 to 3 and every word drawn
    space.seed(0)
    texts = [space.sample() for _ in range(300)]
    assert all(space.contains(t) for t in texts)
    assert {len(t.split(" ")) for t in texts} == {1, 2, 3}
    assert {w for t in texts for w in t.split(" ")} == {"joy", "is", "great"}
    space.seed(0)
    assert [space.sample() for _ in range(300)] == texts
    # Preference-v0's: prompts of exactly 4 words, completions of 0 to 7
    env = rlhf.PreferenceEnv()
    obs, action = env.observation_space, env.action_space
    assert obs.contains(PROMPT) and not obs.contains("film looks very")
    assert not obs.contains(PROMPT + " joy")
    assert action.contains("") and action.contains("joy is truly great gift is very")
    assert not action.contains("joy is truly great gift is very good")  # 8 words
    # the longest texts in characters: barely, 6 letters, 4 times and 3 spaces = 27;
    # 7 times and 6 spaces = 48
    assert obs.max_length >= 27 and action.max_length >= 48


# ---------------------------------------------------------------------------------------
# The reward model's training
# ---------------------------------------------------------------------------------------
def some_pairs(n, seed=0):
    """n pairs of distinct training prompts, two different random completions each."""
    rlhf.register_tasks()
    env, rng, rows = gym.make("Preference-v0"), np.random.default_rng(seed), []
    while len(rows) < n:
        prompt, _ = env.reset(seed=seed if not rows else None)
        a, b = (" ".join(rng.choice(rlhf.WORDS, rng.integers(1, 7))) for _ in "ab")
        if a != b and prompt not in {r["prompt"] for r in rows}:
            rows.append({"prompt": prompt, "chosen": a, "rejected": b})
    return rows


def test_the_reward_model_learns_on_nine_tenths_and_is_normalized_and_frozen(tmp_path,
                                                                             monkeypatch,
                                                                             one_thread):
    # 20 pairs: the first 2 held out. 101 steps of 4 pairs: rows at steps 100 and 101 (every
    # 100 and the end), written at step - 101 (-1, 0: before RL's step 0). Every batch the
    # reward model learns from is of the 18 other pairs. After training, its scores on all the
    # pairs' completions have mean 0 and std 1 (Ziegler et al.'s normalization); it is frozen.
    args = tiny_args(tmp_path, rm_steps=101, rm_batch_size=4)
    pairs = some_pairs(20)
    tokenizer, prompt_len = rlhf.check_spaces(args, *rlhf.check_env(args))
    torch.manual_seed(0)
    policy = rlhf.make_policy(args, tokenizer, prompt_len)
    before = state_of(policy)
    seen = spy_on(monkeypatch, rlhf.RewardModel, "forward", lambda self, tokens, mask: (
        tokens.clone(), mask.clone()) if len(tokens) == 4 else None)
    rows = []
    run = SimpleNamespace(write_row=lambda name, **row: rows.append((name, row)), elapsed=lambda: 0,
                          args=args, models={"policy": policy})
    run.measure = lambda step, moment, **what: rlhf.measure(run, step, moment, **what)  # Run's
    reward_model = rlhf.train_reward_model(args, policy, pairs, run)
    assert [name for name, _ in rows] == ["reward_model.csv"] * 2
    assert [row["global_step"] for _, row in rows] == [-1, 0]
    assert list(rows[0][1]) == ["global_step", "wall_time", "loss", "held_out_loss",
                                "held_out_accuracy"]
    held_out_prompts = {tuple(ids(r["prompt"])) for r in pairs[:2]}
    batches = [t for t in seen if t is not None]
    assert len(batches) == 2 * 101  # the chosen and the rejected of each step
    learned = {tuple(row[:P]) for t, _ in batches for row in t.tolist()}
    assert not learned & held_out_prompts and len(learned) > 12
    chosen_tokens, chosen_mask, rejected_tokens, rejected_mask = rlhf.encode_pairs(
        tokenizer, pairs, P, T, "cpu")
    # each completion is scored with its own mask, which says where its last real token is:
    # a rejected one read with its chosen partner's mask is scored at the wrong position
    mask_of = {tuple(t.tolist()): m.tolist() for tokens, masks in (
        (chosen_tokens, chosen_mask), (rejected_tokens, rejected_mask)) for t, m in zip(tokens, masks)}
    for tokens, masks in batches:
        assert [mask_of[tuple(t)] for t in tokens.tolist()] == masks.tolist(), (
            "a batch of completions was scored with masks that are not its own")
    # normalized on the pairs' completions, its scores by hand: the head on the last real token
    with torch.no_grad():
        scores = []
        for tokens, mask in ((chosen_tokens, chosen_mask), (rejected_tokens, rejected_mask)):
            hidden = reward_model.lm(tokens)[1]
            last = [P + int(m.sum()) - 1 for m in mask]
            scores.append(reward_model.head(hidden[torch.arange(20), last]).squeeze(-1))
        scores = torch.cat(scores)
    assert scores.mean().item() == pytest.approx(0, abs=1e-5)
    assert scores.std().item() == pytest.approx(1, abs=1e-5)
    # the held-out accuracy is the first two pairs' (a scale of the scores keeps their order)
    assert rows[-1][1]["held_out_accuracy"] == (scores[:2] > scores[20:22]).float().mean().item()
    assert not any(p.requires_grad for p in reward_model.parameters())
    # its body is a copy of the policy's that learned: the policy's own weights never moved
    assert same_state(policy, before)
    assert not same_state(reward_model.lm, {k[3:]: v for k, v in before.items() if k[:3] == "lm."})


# ---------------------------------------------------------------------------------------
# The loop's glue
# ---------------------------------------------------------------------------------------
def state_of(model):
    return {k: v.clone() for k, v in model.state_dict().items()}


def same_state(model, state):
    return all(torch.equal(model.state_dict()[k], v) for k, v in state.items())


def spy_on_samples(monkeypatch):
    """(the policy's weights, the sampler's outputs) of each call of sample, in order."""
    calls, sample = [], rlhf.sample

    def spy(policy, *args, **kwargs):
        calls.append((state_of(policy), sample(policy, *args, **kwargs)))
        return calls[-1][1]
    monkeypatch.setattr(rlhf, "sample", spy)
    return calls


def spy_on_minibatches(monkeypatch):
    """(buffer, index tensor) of each minibatch the update takes, in order."""
    chunks, minibatches = [], rlhf.RolloutBuffer.minibatches

    def record(self, n):
        parts = minibatches(self, n)
        chunks.extend((self, idx) for idx in parts)
        return parts
    monkeypatch.setattr(rlhf.RolloutBuffer, "minibatches", record)
    return chunks


def spy_on_buffers(monkeypatch):
    buffers, init = [], rlhf.RolloutBuffer.__init__

    def spy(self, *args, **kwargs):
        init(self, *args, **kwargs)
        buffers.append(self)
    monkeypatch.setattr(rlhf.RolloutBuffer, "__init__", spy)
    return buffers


def spy_on_frozen_copies(monkeypatch):
    """(the frozen copy, the original's weights when it was copied), in order: the reference,
    the reward model, then NLPO's masking policy."""
    copies, frozen_copy = [], rlhf.frozen_copy

    def keep(model):
        copies.append((frozen_copy(model), state_of(model)))
        return copies[-1][0]
    monkeypatch.setattr(rlhf, "frozen_copy", keep)
    return copies


def spy_on_policies(monkeypatch):
    policies, make_policy = [], rlhf.make_policy
    monkeypatch.setattr(rlhf, "make_policy",
                        lambda *a: policies.append(make_policy(*a)) or policies[-1])
    return policies


def returning(monkeypatch, name):
    """Spy on rlhf.name: (its positional arguments, what it returned) of each call."""
    calls, original = [], getattr(rlhf, name)

    def spy(*args):
        out = original(*args)
        calls.append(([a.detach().clone() if torch.is_tensor(a) else a for a in args], out))
        return out
    monkeypatch.setattr(rlhf, name, spy)
    return calls


def ppo_batches(samples):
    """The sampler's outputs in PPO's loop: its batches of 16 (the pairs' are 2 * 256)."""
    return [(state, out) for state, out in samples if len(out[0]) == 16]


def reference_logprobs(reference, tokens):
    """log pi_ref of each completion token, by hand: log-softmax of the logits at the
    position before it (prompt_len - 1 + t), gathered at the token."""
    with torch.no_grad():
        logits = reference(tokens)[0][:, P - 1:P - 1 + T]
    return torch.log_softmax(logits, -1).gather(-1, tokens[:, P:, None]).squeeze(-1)


def test_the_update_gets_the_samplers_log_probs_and_the_values_of_the_completions_positions(
        tmp_path, monkeypatch):
    # 3 batches of 16, 2 epochs of 2 minibatches. Each ppo_loss call against tensors made
    # here: pi_old the sampler's log-probabilities as it returned them; V_old the value head
    # of the policy as it sampled, read at positions P - 1 .. P + T - 2 (the state each token
    # was chosen in), 0 after the end; the advantages (R - V_old) whitened over the whole
    # batch's completion tokens with the unbiased variance.
    samples = spy_on_samples(monkeypatch)
    buffers, chunks = spy_on_buffers(monkeypatch), spy_on_minibatches(monkeypatch)
    losses = spy_on(monkeypatch, rlhf, "ppo_loss", detached)
    policies = spy_on_policies(monkeypatch)
    rlhf.main(tiny_args(tmp_path, total_timesteps=48, update_epochs=2, learning_rate=0.01))
    batches = ppo_batches(samples)
    assert len(batches) == len(buffers) == 3 and len(chunks) == len(losses) == 3 * 2 * 2
    model = rlhf.make_policy(tiny_args(tmp_path), policies[0].tokenizer, P)
    shifted = []
    for (buffer, idx), kw in zip(chunks, losses):
        b = [i for i, x in enumerate(buffers) if x is buffer][0]
        state, (tokens, mask, logprobs, _) = batches[b]
        assert torch.equal(kw["old_logprobs"], logprobs[idx])
        assert torch.equal(kw["completion_mask"], mask[idx])
        model.load_state_dict(state)
        with torch.no_grad():
            values = model(tokens)[1]
        assert torch.allclose(kw["old_values"], (values[:, P - 1:-1] * mask)[idx], atol=1e-6)
        shifted.append((values[:, P:] * mask)[idx])
    # the first minibatch of each update is still pi_old: ratio 1, V = V_old on every token
    for k in range(0, len(losses), 4):
        kw = losses[k]
        m = kw["completion_mask"].bool()
        assert torch.allclose(kw["logprobs"][m], kw["old_logprobs"][m], atol=1e-5)
        assert torch.allclose(kw["values"][m], kw["old_values"][m], atol=1e-5)
    # the advantages: each update's first epoch covers its batch once; by hand from R - V_old
    for u in range(3):
        full = {}
        for (_, idx), kw in zip(chunks[4 * u:4 * u + 2], losses[4 * u:4 * u + 2]):
            for j, i in enumerate(idx.tolist()):
                full[i] = (kw["returns"][j] - kw["old_values"][j], kw["advantages"][j],
                           kw["completion_mask"][j])
        assert sorted(full) == list(range(16))
        counted = [x.item() for raw, _, m in full.values() for x, k in zip(raw, m) if k]
        mean = sum(counted) / len(counted)
        std = math.sqrt(sum((x - mean) ** 2 for x in counted) / (len(counted) - 1))
        for raw, whitened, m in full.values():
            expected = [(x.item() - mean) / std if k else 0.0 for x, k in zip(raw, m)]
            assert whitened.tolist() == pytest.approx(expected, abs=1e-4)
    # could fail: the value head moved off zero, and its positions differ
    assert max(kw["old_values"].abs().max().item() for kw in losses) > 1e-3
    assert any(not torch.allclose(kw["old_values"], s, atol=1e-4) for kw, s in zip(losses, shifted))


@pytest.mark.parametrize("whiten_rewards", [False, True])
def test_the_rewards_are_the_frozen_reward_models_score_and_the_kl_to_the_reference(
        tmp_path, monkeypatch, whiten_rewards):
    # --beta 0.3 (not the default): kl_penalized_rewards gets the frozen reward model's score
    # (its head on the last real token's hidden state, by hand), the sampler's log-probs, the
    # frozen reference's log-probs at the completion's positions (by hand) and beta 0.3; GAE
    # gets its rewards, or with --whiten-rewards those whitened by hand, keeping their mean.
    copies = spy_on_frozen_copies(monkeypatch)
    samples = spy_on_samples(monkeypatch)
    rewards = returning(monkeypatch, "kl_penalized_rewards")
    gae = returning(monkeypatch, "compute_gae")
    rlhf.main(tiny_args(tmp_path, total_timesteps=32, beta=0.3, learning_rate=0.01,
                        whiten_rewards=whiten_rewards))
    (reference, _), (reward_model, _) = copies
    batches = ppo_batches(samples)
    assert len(rewards) == len(gae) == len(batches) == 2
    for (_, (tokens, mask, logprobs, _)), ((scores, logp, ref, m, beta), out), ((r, *_), _) in zip(
            batches, rewards, gae):
        lengths = [row.index(0) + 1 if 0 in row else T for row in tokens[:, P:].tolist()]
        assert m.sum(1).tolist() == lengths
        with torch.no_grad():
            hidden = reward_model.lm(tokens)[1]
            hand = reward_model.head(hidden[torch.arange(16), [P + n - 1 for n in lengths]])
        assert torch.allclose(scores, hand.squeeze(-1), atol=1e-5)
        assert torch.equal(logp, logprobs) and beta == 0.3
        on = m.bool()
        assert torch.allclose(ref[on], reference_logprobs(reference, tokens)[on], atol=1e-5)
        if not whiten_rewards:
            assert torch.equal(r, out)
        else:
            x = out[on]
            mean, std = x.mean(), x.std()  # torch's std: the unbiased one
            assert torch.allclose(r[on], (x - mean) / std + mean, atol=1e-5)
            assert r[~on].eq(0).all()


def test_the_reference_and_the_reward_model_never_learn(tmp_path, monkeypatch):
    # frozen_copy is called twice (no --top-p): the reference, after the warm start, then the
    # reward model. Both keep their weights while the policy moves; neither takes a gradient.
    # The policy PPO starts from is the reference: the reward model's training (a copy of the
    # policy's body that learns) moved none of the policy's weights.
    copies = spy_on_frozen_copies(monkeypatch)
    policies = spy_on_policies(monkeypatch)
    starts = spy_on(monkeypatch, rlhf, "warm_start", lambda args, policy: state_of(policy))
    samples = spy_on_samples(monkeypatch)
    rlhf.main(tiny_args(tmp_path, learning_rate=0.01))
    (reference, at_reference), (reward_model, at_reward_model) = copies
    (policy,) = policies
    assert not same_state(reference, starts[0])  # copied after the warm start, which moved it
    assert same_state(reference, at_reference) and same_state(reward_model, at_reward_model)
    for model in (reference, reward_model):
        assert not any(p.requires_grad for p in model.parameters())
    first = ppo_batches(samples)[0][0]
    assert all(torch.equal(first[k], v) for k, v in reference.state_dict().items())
    # could fail: the policy moved, and the reward model's body is not the reference's
    assert not same_state(policy, at_reference)
    body = reference.lm.state_dict()
    assert any(not torch.equal(v, body[k]) for k, v in reward_model.lm.state_dict().items())


def test_a_run_stopped_at_its_return_takes_a_held_out_row_where_it_stops(tmp_path):
    # every gold score is far above -1000, so a last-20 mean of -1000 is reached by the second
    # batch of 16 completions (32 episodes: the mean needs 20); PPO stops there, before that
    # batch's update, and held_out.csv's last row is at 32 (rows at 0 and 16 before it)
    summary = rlhf.main(tiny_args(tmp_path, eval_episodes=2, total_timesteps=256,
                                  stop_at_return=-1000.0))
    (folder,) = glob.glob(str(tmp_path / "*"))
    rows = read_csv(os.path.join(folder, "held_out.csv"))
    assert summary["global_steps"] == 32 and summary["solved_at_step"] == 32
    assert [int(row["global_step"]) for row in rows] == [0, 16, 32]


def test_the_policy_is_the_flags_shape_with_a_value_head_and_the_lengths_the_story_reads(
        tmp_path):
    # --n-layer 3 --n-head 2 --n-embd 8, --max-new-tokens 5: a GPT of three blocks of two heads
    # of 4, its positions the prompt's 4 words plus 5, in a PolicyWithValue whose value head
    # reads the 8-wide hidden state and starts at 0; it carries the tokenizer and both lengths
    args = tiny_args(tmp_path, n_layer=3, n_head=2, n_embd=8, max_new_tokens=5)
    rlhf.register_tasks()
    tokenizer, prompt_len = rlhf.check_spaces(args, *rlhf.check_env(args))
    policy = rlhf.make_policy(args, tokenizer, prompt_len)
    assert isinstance(policy, rlhf.PolicyWithValue) and prompt_len == P
    assert len(policy.lm.h) == 3 and all(block.attn.n_head == 2 for block in policy.lm.h)
    assert policy.lm.wpe.weight.shape == (P + 5, 8) and policy.v_head.weight.shape == (1, 8)
    assert not policy.v_head.weight.any() and not policy.v_head.bias.any()
    assert (policy.tokenizer, policy.prompt_len, policy.max_new_tokens) == (tokenizer, P, 5)


@pytest.mark.parametrize("algo", ["ppo", "dpo"])
def test_every_held_out_row_measures_against_the_frozen_reference_and_reward_model(
        algo, tmp_path, monkeypatch):
    # train hands measure the two frozen copies (the reference, then the reward model) at the
    # start; every row of held_out.csv after it, PPO's or DPO's, takes them, never the policy
    copies = spy_on_frozen_copies(monkeypatch)
    policies = spy_on_policies(monkeypatch)
    rows = spy_on(monkeypatch, rlhf, "held_out",
                  lambda args, run, policy, reference, reward_model, step: (policy, reference,
                                                                            reward_model, step))
    rlhf.main(tiny_args(tmp_path, algo=algo, eval_episodes=2, eval_every=16))
    (reference, _), (reward_model, _) = copies[:2]
    (policy,) = policies
    assert len(rows) >= 3 and rows[0][3] == 0
    for got_policy, got_reference, got_reward_model, _ in rows:
        assert got_policy is policy and got_reference is reference
        assert got_reward_model is reward_model


def test_warm_start_pt_is_the_reference_and_starts_another_run_there(tmp_path, monkeypatch):
    # --save-model writes warm_start.pt, the policy where RL began (the reference's weights);
    # --warm-start PATH starts another run there: no supervised step, its reference those
    # weights, and (--save-model again) no warm_start.pt of its own
    copies = spy_on_frozen_copies(monkeypatch)
    rlhf.main(tiny_args(tmp_path / "a", save_model=True))
    (path,) = glob.glob(str(tmp_path / "a" / "*" / "warm_start.pt"))
    saved = torch.load(path, weights_only=True)["policy"]
    assert same_state(copies[0][0], saved)
    starts = spy_on(monkeypatch, rlhf, "warm_start", lambda args, policy: None)
    rlhf.main(tiny_args(tmp_path / "b", save_model=True, warm_start=path))
    assert starts == [] and same_state(copies[2][0], saved)  # run b's reference
    assert glob.glob(str(tmp_path / "b" / "*" / "model.pt"))
    assert not glob.glob(str(tmp_path / "b" / "*" / "warm_start.pt"))


def test_a_warm_start_file_is_read_as_tensors_only(tmp_path):
    # conftest's check: a warm_start.pt whose pickle would run code is refused unread
    check_a_warm_start_is_read_as_tensors_only(rlhf.main, tiny_args, tmp_path)


def test_the_warm_start_learns_the_tasks_answers_after_their_prompts(tmp_path, monkeypatch,
                                                                      one_thread):
    # Each supervised row: a training prompt, then its info["answer"] as reset gave it (an
    # environment seeded seed + 200,000 for the first reset), <eos> (0) and padding to T = 8;
    # the cross-entropy's targets are those completions. The pairs are worked out here.
    args = tiny_args(tmp_path, sft_steps=3, sft_problems=24, sft_batch_size=8, seed=4)
    rlhf.register_tasks()
    tokenizer, prompt_len = rlhf.check_spaces(args, *rlhf.check_env(args))
    policy = rlhf.make_policy(args, tokenizer, prompt_len)
    inputs = spy_on(monkeypatch, rlhf, "completion_outputs",
                    lambda model, tokens, p: tokens.clone())
    targets = spy_on(monkeypatch, rlhf.F, "cross_entropy", lambda x, target, **k: target.clone())
    rlhf.warm_start(args, policy)
    env = gym.make("Preference-v0", held_out=False)
    rows = set()
    for k in range(24):
        prompt, info = env.reset(seed=4 + 200_000 if k == 0 else None)
        answer = ids(info["answer"])
        rows.add(tuple(ids(prompt) + answer + [0] * (T - len(answer))))
    assert len(inputs) == len(targets) == 3
    drawn = set()
    for tokens, target in zip(inputs, targets):
        assert tokens.shape == (8, P + T) and torch.equal(tokens[:, P:], target)
        assert all(tuple(row) in rows for row in tokens.tolist())
        drawn |= {tuple(row) for row in tokens.tolist()}
    assert len(drawn) > 8  # random rows of the 24, not one batch again and again


def test_the_warm_starts_loss_is_the_cross_entropy_of_the_completion_tokens_alone(
        tmp_path, monkeypatch, one_thread):
    # A supervised step's loss is the mean over the batch's completion tokens, <eos> included,
    # of -log softmax(logits)[target], worked out here from the step's own logits; the padding
    # after <eos> is not in it. The batches hold padding, so the mean over every position (a
    # smaller number: the padding's targets are learned at once) would differ.
    args = tiny_args(tmp_path, sft_steps=3, sft_problems=24, sft_batch_size=8, seed=4)
    rlhf.register_tasks()
    tokenizer, prompt_len = rlhf.check_spaces(args, *rlhf.check_env(args))
    policy = rlhf.make_policy(args, tokenizer, prompt_len)
    seen, losses, original = [], [], rlhf.completion_outputs

    def outputs(model, tokens, p):
        logits, values = original(model, tokens, p)
        seen.append((logits.detach().clone(), tokens[:, p:].clone()))
        return logits, values
    monkeypatch.setattr(rlhf, "completion_outputs", outputs)
    spy_on(monkeypatch, torch.Tensor, "backward", lambda self, *a, **k: self.item(), calls=losses)
    rlhf.warm_start(args, policy)
    assert len(seen) == len(losses) == 3
    for (logits, targets), loss in zip(seen, losses):
        mask = (torch.cumsum((targets == 0).long(), 1) - (targets == 0).long() == 0).float()
        assert 0 < mask.sum() < mask.numel()  # some padding in the batch
        nll = -torch.log_softmax(logits, -1).gather(-1, targets.unsqueeze(-1)).squeeze(-1)
        assert loss == pytest.approx((nll * mask).sum().item() / mask.sum().item(), rel=1e-5)
        assert loss != pytest.approx(nll.mean().item(), rel=1e-3)


def test_sft_steps_0_leaves_the_model_as_it_is(tmp_path, monkeypatch):
    # --sft-steps 0 --sft-problems 0: no supervised step, no environment made, weights kept
    args = tiny_args(tmp_path, sft_steps=0, sft_problems=0)
    rlhf.register_tasks()
    tokenizer, prompt_len = rlhf.check_spaces(args, *rlhf.check_env(args))
    policy = rlhf.make_policy(args, tokenizer, prompt_len)
    before = state_of(policy)
    made = spy_on(monkeypatch, rlhf.gym, "make", lambda *a, **k: a)
    steps = spy_on(monkeypatch, rlhf.F, "cross_entropy", lambda *a, **k: 1)
    rlhf.warm_start(args, policy)
    assert made == [] and steps == [] and same_state(policy, before)


def test_held_out_measures_on_the_held_out_prompts_alone(tmp_path, monkeypatch):
    # held_out.csv's prompts are the evaluation's: --eval-episodes of the tenth of
    # Preference-v0's prompts that training never poses (crc32 % 10 == 0), the same ones at
    # each of the --eval-samples draws.
    args = tiny_args(tmp_path, eval_episodes=12, eval_samples=2)
    rlhf.register_tasks()
    tokenizer, prompt_len = rlhf.check_spaces(args, *rlhf.check_env(args))
    policy = rlhf.make_policy(args, tokenizer, prompt_len)
    reward_model = rlhf.RewardModel(policy.lm, prompt_len)
    asked = spy_on(monkeypatch, rlhf, "encode_prompts", lambda tok, prompts, *a: list(prompts))
    run = SimpleNamespace(write_row=lambda *a, **k: None, elapsed=lambda: 0)
    rlhf.held_out(args, run, policy, policy, reward_model, 0)
    assert len(asked) == 2 and asked[0] == asked[1] and len(asked[0]) == 12
    assert all(zlib.crc32(prompt.encode()) % 10 == 0 for prompt in asked[0])


def test_a_hugging_face_models_value_head_and_reward_model_read_its_last_layer():
    # --model's HFModel hands the value head and the reward model the last hidden states (the
    # layer the logits are read from, padding masked out of the attention as for the logits),
    # not the embeddings: equal to hidden_states[-1] of a call by hand, unequal to [0].
    transformers = pytest.importorskip("transformers", reason="pip install transformers==5.24.0")
    config = transformers.LlamaConfig(
        vocab_size=18, hidden_size=16, intermediate_size=32, num_hidden_layers=1,
        num_attention_heads=2, num_key_value_heads=2, max_position_embeddings=32,
        pad_token_id=0, eos_token_id=1)
    torch.manual_seed(0)
    model = transformers.LlamaForCausalLM(config)
    lm = rlhf.HFModel(model, 0)
    tokens = torch.tensor([[0, 0, 3, 4, 5, 1], [2, 3, 4, 5, 6, 7]])
    with torch.no_grad():
        logits, hidden = lm(tokens)
        by_hand = model(input_ids=tokens, attention_mask=(tokens != 0).long(),
                        output_hidden_states=True)
        last = by_hand.hidden_states[-1]
        assert torch.allclose(logits, by_hand.logits) and torch.allclose(hidden, last)
        assert not torch.allclose(hidden, by_hand.hidden_states[0], atol=1e-2)
        policy, reward_model = rlhf.PolicyWithValue(lm), rlhf.RewardModel(lm, 2)
        torch.nn.init.normal_(policy.v_head.weight)
        _, values = policy(tokens)
        assert torch.allclose(values, policy.v_head(last).squeeze(-1), atol=1e-6)
        # the reward model reads its copy's last layer at the last real token: 2 + 3 - 1 = 4
        scores = reward_model(tokens, torch.tensor([[1.0, 1, 1, 0], [1, 1, 1, 1]]))
        assert torch.allclose(scores, reward_model.head(last[[0, 1], [4, 5]]).squeeze(-1),
                              atol=1e-6)


def test_held_out_rows_kl_is_each_completions_sum_and_its_means_are_over_completions(
        tmp_path, monkeypatch):
    # held_out's row from set numbers: 2 prompts, 2 draws, completions of 2 tokens and of 1
    # (mask [1, 1, 0, ...] and [1, 0, ...]), log pi - log pi_ref 0.5 on each real token and 9.5
    # past the end (never counted). The KL is each completion's sum, then the mean over
    # completions: (0.5 + 0.5 + 0.5) / 2 = 0.75, not the per-token mean 0.5; the length
    # (2 + 1) / 2 = 1.5; the proxy the reward model's mean score, (0.2 + 0.4) / 2 = 0.3.
    args = tiny_args(tmp_path, eval_episodes=2, eval_samples=2)
    rlhf.register_tasks()
    tokenizer, prompt_len = rlhf.check_spaces(args, *rlhf.check_env(args))
    policy = rlhf.make_policy(args, tokenizer, prompt_len)
    T, real_sample = args.max_new_tokens, rlhf.sample
    mask = torch.zeros(2, T)
    mask[0, :2], mask[1, :1] = 1, 1
    logprobs = -0.5 * mask

    def fixed(policy, prompt_tokens, *a, **k):
        return real_sample(policy, prompt_tokens, *a, **k)[0], mask, logprobs, None
    monkeypatch.setattr(rlhf, "sample", fixed)
    monkeypatch.setattr(rlhf, "token_logprobs", lambda logits, tokens, *a: torch.where(
        mask.bool(), -1.0, -9.5))
    reward_model = lambda tokens, m: torch.tensor([0.2, 0.4])  # noqa: E731
    rows = []
    run = SimpleNamespace(write_row=lambda name, **row: rows.append((name, row)),
                          elapsed=lambda: 0)
    row = rlhf.held_out(args, run, policy, policy, reward_model, 7)
    assert row["kl_to_reference"] == approx(0.75)
    assert row["answer_length"] == approx(1.5) and row["proxy_score"] == approx(0.3)
    assert rows[0][0] == "held_out.csv" and rows[0][1]["global_step"] == 7


def test_held_out_never_touches_trainings_random_stream(tmp_path, monkeypatch):
    # The same run with held_out.csv measured every 16 completions, and with held_out a
    # stand-in that does nothing: the same episodes.csv and the same losses. Each real call
    # leaves torch's, NumPy's and Python's random states as it found them.
    def states():
        return torch.get_rng_state(), np.random.get_state()[1].copy(), random.getstate()

    measured, original = [], rlhf.held_out

    def checked(*args):
        before = states()
        row = original(*args)
        after = states()
        measured.append(torch.equal(before[0], after[0]) and np.array_equal(before[1], after[1])
                        and before[2] == after[2])
        return row
    flags = dict(eval_episodes=2, eval_every=16, eval_samples=2, learning_rate=0.01)
    monkeypatch.setattr(rlhf, "held_out", checked)
    rlhf.main(tiny_args(tmp_path / "measured", **flags))
    monkeypatch.setattr(rlhf, "held_out", lambda *args: {})
    rlhf.main(tiny_args(tmp_path / "not", **flags))
    assert len(measured) >= 5 and all(measured)  # step 0 and every 16 completions
    assert episode_rows(tmp_path / "measured") == episode_rows(tmp_path / "not")
    losses = [[(u["policy_loss"], u["value_loss"]) for u in read_csv(path)] for path in sorted(
        glob.glob(str(tmp_path / "*" / "*" / "updates.csv")))]
    assert len(losses) == 2 and losses[0] == losses[1] and len(losses[0]) == 4


@pytest.fixture
def this_modules_task(monkeypatch):
    """Preference-v0 made from this module's PreferenceEnv, whose gold_score a test can spy
    on: a run of `python rlhf.py` in this process (run_cli) registers its own copy's first."""
    rlhf.register_tasks()
    monkeypatch.setattr(gym.registry["Preference-v0"], "entry_point", rlhf.PreferenceEnv)


def test_each_pairs_two_completions_answer_one_prompt_and_the_chosen_scores_higher(
        tmp_path, monkeypatch, this_modules_task, one_thread):
    # 16 environments in twos that share a seed: each two pose the same (training) prompt at
    # every round, and each pair's chosen and rejected are the two completions of that prompt.
    # At --labeller-temperature 0 the chosen has the higher gold score (a on a tie).
    args = tiny_args(tmp_path, num_pairs=24, labeller_temperature=0.0)
    rlhf.register_tasks()
    tokenizer, prompt_len = rlhf.check_spaces(args, *rlhf.check_env(args))
    torch.manual_seed(0)
    policy = rlhf.make_policy(args, tokenizer, prompt_len)  # untrained: varied completions
    gold = rlhf.gold_score
    scored = spy_on(monkeypatch, rlhf, "gold_score",
                    lambda prompt, completion: (prompt, completion))
    envs = rlhf.make_vector_env("Preference-v0", 16, held_out=False)
    rows = rlhf.preference_pairs(args, policy, envs)
    envs.close()
    assert len(rows) == 24 and len(scored) % 16 == 0 and len(scored) >= 3 * 16
    twos = [(scored[i][0], scored[i][1], scored[i + 1][1]) for i in range(0, len(scored), 2)]
    assert all(scored[i][0] == scored[i + 1][0] for i in range(0, len(scored), 2))
    assert len({prompt for prompt, _, _ in twos[:8]}) > 1  # the pairs' prompts differ
    assert not any(zlib.crc32(prompt.encode()) % 10 == 0 for prompt, _, _ in twos)
    for row in rows:
        assert row["chosen"] != row["rejected"]
        assert ((row["prompt"], row["chosen"], row["rejected"]) in twos
                or (row["prompt"], row["rejected"], row["chosen"]) in twos)
        assert gold(row["prompt"], row["chosen"]) >= gold(row["prompt"], row["rejected"])
    # could fail: some pair's gold scores differ, so swapped labels would show
    assert any(gold(r["prompt"], r["chosen"]) > gold(r["prompt"], r["rejected"]) for r in rows)


def test_pairs_jsonl_is_written_and_pairs_reads_it_back_for_identical_pairs(tmp_path,
                                                                           monkeypatch):
    # Run a labels its own pairs and writes them; runs b and c (other seeds) read a's file with
    # --pairs: neither labels any, both learn from a's pairs in a's order, and write them again.
    learned = spy_on(monkeypatch, rlhf, "train_reward_model",
                     lambda args, policy, pairs, run: pairs)
    labelled = spy_on(monkeypatch, rlhf, "preference_pairs", lambda *a: None)
    rlhf.main(tiny_args(tmp_path / "a", total_timesteps=16))
    (path,) = glob.glob(str(tmp_path / "a" / "*" / "pairs.jsonl"))
    with open(path) as f:
        written = [json.loads(line) for line in f]
    assert len(labelled) == 1 and written == learned[0] and len(written) == 20
    for seed, folder in ((2, "b"), (3, "c")):
        rlhf.main(tiny_args(tmp_path / folder, total_timesteps=16, seed=seed, pairs=path))
    assert len(labelled) == 1 and learned[1] == learned[2] == written
    for folder in ("b", "c"):
        (again,) = glob.glob(str(tmp_path / folder / "*" / "pairs.jsonl"))
        with open(again) as f, open(path) as g:
            assert f.read() == g.read()


@pytest.mark.parametrize("algo, rate", [("ppo", 0.003), ("dpo", 0.007)])
def test_ppo_takes_learning_rate_and_dpo_dpo_learning_rate(tmp_path, monkeypatch, algo, rate):
    # Adam is built three times: the warm start's (--sft-learning-rate 0.02), the reward
    # model's (--rm-learning-rate 0.005), then the algorithm's: PPO's at --learning-rate
    # (0.003), DPO's at --dpo-learning-rate (0.007), never the other's
    # the defaults as tuned (results.md, "On the English words"): PPO's 1e-4, DPO's 1e-3
    assert (rlhf.Args().learning_rate, rlhf.Args().dpo_learning_rate) == (1e-4, 1e-3)
    rates = spy_on(monkeypatch, rlhf.torch.optim, "Adam", lambda params, lr: lr)
    own = {"learning_rate": 0.003} if algo == "ppo" else {"dpo_learning_rate": 0.007}
    rlhf.main(tiny_args(tmp_path, algo=algo, sft_learning_rate=0.02, rm_learning_rate=0.005,
                        **own))
    assert rates == [0.02, 0.005, rate]


def test_a_pairs_file_skips_blank_lines_and_keeps_the_three_fields(tmp_path):
    rows = some_pairs(10)
    path = tmp_path / "pairs.jsonl"
    path.write_text("\n".join(json.dumps({**r, "note": "x"}) for r in rows) + "\n\n")
    assert rlhf.read_pairs(str(path), rlhf.Tokenizer(rlhf.WORDS, rlhf.SPECIAL_TOKENS), 4) == rows


def test_dpo_learns_from_the_pairs_against_the_frozen_reference_without_the_reward_model(
        tmp_path, monkeypatch):
    # --algo dpo, 20 pairs in batches of 20 (each step holds every pair once), --beta 0.3:
    # the reward model is trained (it measures held_out.csv) but never called while DPO
    # trains; each dpo_loss call gets, pair by pair, the frozen reference's log pi_ref of the
    # pair's chosen and rejected completions (by hand) and the policy's own, beta 0.3.
    copies = spy_on_frozen_copies(monkeypatch)
    pairs = spy_on(monkeypatch, rlhf, "train_reward_model", lambda args, policy, pairs, run: pairs)
    losses = spy_on(monkeypatch, rlhf, "dpo_loss", detached)
    calls = spy_on(monkeypatch, rlhf.RewardModel, "forward", lambda *a: 1)
    during = spy_on(monkeypatch, rlhf, "train_dpo", lambda *a: len(calls))
    summary = rlhf.main(tiny_args(tmp_path, algo="dpo", num_prompts=20, total_timesteps=80,
                                  beta=0.3, dpo_learning_rate=0.01))
    (reference, _), _ = copies
    assert summary["global_steps"] == 80 and len(losses) == 2
    assert during[0] == len(calls) > 0  # the reward model learned before, never during DPO
    hand = []
    for row in pairs[0]:
        both = []
        for key in ("chosen", "rejected"):  # its words and <eos>, or its first T words
            completion = (ids(row[key]) + [0])[:T]
            tokens = torch.tensor([ids(row["prompt"]) + completion + [0] * (T - len(completion))])
            both.append(reference_logprobs(reference, tokens)[0, :len(completion)].sum().item())
        hand.append(both)
    for kw in losses:
        assert kw["beta"] == 0.3
        got = list(zip(kw["ref_chosen_logps"].tolist(), kw["ref_rejected_logps"].tolist()))
        matched = [min(range(20), key=lambda j: abs(c - hand[j][0]) + abs(r - hand[j][1]))
                   for c, r in got]
        assert sorted(matched) == list(range(20))  # every pair once
        assert all([c, r] == pytest.approx(hand[j], abs=1e-4) for (c, r), j in zip(got, matched))
    first, second = losses
    assert torch.allclose(first["chosen_logps"], first["ref_chosen_logps"], atol=1e-5)
    assert torch.allclose(first["rejected_logps"], first["ref_rejected_logps"], atol=1e-5)
    # could fail: the policy moved off the reference after the first step
    assert not torch.allclose(second["chosen_logps"], second["ref_chosen_logps"], atol=1e-3)


@pytest.mark.parametrize("adaptive", [False, True])
def test_the_adaptive_controller_moves_beta_only_with_adaptive_kl(tmp_path, monkeypatch, adaptive):
    # --beta 0.3 over 4 updates of 16. Without --adaptive-kl, every reward gets 0.3 and
    # updates.csv logs 0.3. With --adaptive-kl --kl-target 0.01 --kl-horizon 32, update k's
    # reward gets beta_k, updates.csv logs it with the KL, and
    # beta_(k+1) = beta_k (1 + clip(KL_k / 0.01 - 1, -0.2, 0.2) * 16 / 32), by hand.
    rewards = returning(monkeypatch, "kl_penalized_rewards")
    updates = spy_on(monkeypatch, rlhf.Run, "update", lambda self, step, *loss, **kw: kw)
    flags = dict(adaptive_kl=True, kl_target=0.01, kl_horizon=32) if adaptive else {}
    rlhf.main(tiny_args(tmp_path, beta=0.3, learning_rate=0.01, **flags))
    betas = [args[4] for args, _ in rewards]
    assert len(betas) == len(updates) == 4 and [u["beta"] for u in updates] == betas
    if not adaptive:
        assert betas == [0.3] * 4
        return
    beta = 0.3
    for k, u in enumerate(updates):
        assert betas[k] == pytest.approx(beta, rel=1e-12)
        beta *= 1 + min(max(u["kl"] / 0.01 - 1, -0.2), 0.2) * 16 / 32
    assert betas[-1] != 0.3


def test_nlpos_masks_reach_the_buffer_and_the_update_and_the_mask_follows_the_policy(
        tmp_path, monkeypatch):
    # --top-p 0.9 --mask-sync-every 1: frozen_copy makes the reference, the reward model, then
    # the masking policy. Every sampled token lies in its stored nucleus; the update's
    # token_logprobs get the buffer's masks of its minibatch; after each update the masking
    # policy is the policy, and the reference stays the warm start.
    copies = spy_on_frozen_copies(monkeypatch)
    policies = spy_on_policies(monkeypatch)
    buffers, chunks = spy_on_buffers(monkeypatch), spy_on_minibatches(monkeypatch)
    masked = spy_on(monkeypatch, rlhf, "token_logprobs",
                    lambda logits, tokens, action_masks=None: action_masks)
    rlhf.main(tiny_args(tmp_path, top_p=0.9, mask_sync_every=1, total_timesteps=32,
                        learning_rate=0.01))
    (reference, warm), _, (mask_model, at_copy) = copies
    (policy,) = policies
    assert same_state(reference, warm) and same_state(mask_model, policy.state_dict())
    assert not same_state(policy, warm)
    for buffer in buffers:
        masks, m = buffer.action_masks, buffer.completion_mask.bool()
        assert masks.shape == (16, T, V)
        inside = masks.gather(-1, buffer.tokens[:, P:, None]).squeeze(-1)
        assert inside[m].all() and not masks.all()
    used = [x for x in masked if x is not None]
    assert len(used) == len(chunks) == 2 * 4 * 2
    for (buffer, idx), masks in zip(chunks, used):
        assert torch.equal(masks, buffer.action_masks[idx])


def test_every_csv_column_has_a_tensorboard_series_of_its_own(tmp_path):
    # each CSV column (but global_step and wall_time) of every file a run writes is one
    # TensorBoard series, under the block's rule: COMMON_NAMES, else losses/<column> for
    # updates.csv's and charts/<column> for any other file's; two files' columns under one tag
    # would make one series of two things
    rlhf.main(tiny_args(tmp_path, eval_episodes=2, eval_every=32, eval_samples=1))
    (path,) = glob.glob(str(tmp_path / "*"))
    tags = {}
    for name in ("episodes.csv", "updates.csv", "held_out.csv", "reward_model.csv",
                 "evaluations.csv"):
        folder = "losses" if name == "updates.csv" else "charts"
        with open(os.path.join(path, name)) as f:
            for column in f.readline().strip().split(",")[2:]:
                tags.setdefault(rlhf.COMMON_NAMES.get(column, f"{folder}/{column}"), []).append(
                    f"{name}:{column}")
    assert len(tags) > 15
    assert {tag: where for tag, where in tags.items() if len(where) > 1} == {}


def test_the_budget_is_rounded_down_to_whole_batches(tmp_path):
    # --total-timesteps 40 in batches of 16: 40 // 16 * 16 = 32 completions, 2 updates
    summary = rlhf.main(tiny_args(tmp_path, total_timesteps=40))
    (path,) = glob.glob(str(tmp_path / "*"))
    assert summary["global_steps"] == 32
    assert [int(u["global_step"]) for u in read_csv(os.path.join(path, "updates.csv"))] == [16, 32]


@pytest.mark.parametrize("algo, eval_every", [
    ("ppo", 48),  # rows 0, 48 and the end's at 64
    ("ppo", 32),  # rows 0, 32 and 64, each after its batch's update
    ("ppo", 0),  # rows 0 and the end's
    ("dpo", 48),  # batches of 16 pairs, 32 completions a step: rows 0 and the end's at 64
    ("dpo", 32),  # rows 0, 32, 64
    ("dpo", 0),  # rows 0 and the end's
])
def test_held_out_csvs_last_row_measures_the_trained_policy(tmp_path, monkeypatch, algo,
                                                            eval_every):
    # held_out.csv's curve ends where the run ended: its last row is at the run's last step,
    # measured on the policy as training left it (its weights at the call equal the final
    # ones), once: no step has two rows. The warm start's row comes first, at 0.
    measured = spy_on(monkeypatch, rlhf, "held_out",
                      lambda args, run, policy, *rest: (rest[-1], state_of(policy)))
    policies = spy_on_policies(monkeypatch)
    rate = {"dpo_learning_rate" if algo == "dpo" else "learning_rate": 0.01}  # each its own
    summary = rlhf.main(tiny_args(tmp_path, algo=algo, eval_episodes=2, eval_every=eval_every,
                                  eval_samples=1, **rate))
    (policy,) = policies
    steps = [step for step, _ in measured]
    assert steps[0] == 0 and steps == sorted(set(steps))
    assert steps[-1] == summary["global_steps"] == 64 and same_state(policy, measured[-1][1])
    (path,) = glob.glob(str(tmp_path / "*" / "held_out.csv"))
    assert [int(r["global_step"]) for r in read_csv(path)] == steps


def test_dpo_trains_on_total_timesteps_in_steps_of_num_prompts_pairs(tmp_path, monkeypatch):
    # 20 pairs in batches of 16 (32 completions a step), --total-timesteps 80: 80 // 32 = 2
    # steps of 16 pairs, drawn in turn from shuffled passes over the 20 (the second batch ends
    # the first pass and starts the next), never past the budget
    losses = spy_on(monkeypatch, rlhf, "dpo_loss", detached)
    updates = spy_on(monkeypatch, rlhf.Run, "update", lambda self, step, *loss, **kw: step)
    summary = rlhf.main(tiny_args(tmp_path, algo="dpo", total_timesteps=80))
    assert updates == [32, 64] and summary["global_steps"] == 64
    assert [len(kw["ref_chosen_logps"]) for kw in losses] == [16, 16]
    first = losses[0]["ref_chosen_logps"].tolist()
    assert len(set(first)) == 16  # could fail: 16 different pairs (their log pi_ref differ)


# ---------------------------------------------------------------------------------------
# DPO's loss against TRL's DPOTrainer._compute_loss on the same tensors, and masked_whiten
# (TRL is not a requirement: pip install trl==1.16.0; .ci/run installs it; the slow tier)
# ---------------------------------------------------------------------------------------
TRL_PIN = "trl==1.16.0"


@pytest.mark.parametrize("beta", [0.1, 0.5])
@pytest.mark.slow  # TRL's cross-check: importing trl takes seconds
def test_the_dpo_loss_equals_trls_on_the_same_tensors(beta):
    trainer = pytest.importorskip("trl.trainer.dpo_trainer", reason=f"pip install {TRL_PIN}")
    from collections import defaultdict
    torch.manual_seed(0)
    n, t = 4, 5
    mask = rlhf.completion_mask_of(torch.tensor([[3, 0, 0, 0, 0], [3, 4, 5, 6, 7], [3, 4, 0, 0, 0],
                                                 [0, 0, 0, 0, 0], [3, 4, 5, 0, 0], [3, 4, 5, 6, 0],
                                                 [3, 0, 0, 0, 0], [3, 4, 5, 6, 7]]), 0)
    per_token = (torch.rand(2 * n, t) * -3).requires_grad_()  # chosen rows first, as TRL's batch
    ref = torch.rand(2 * n) * -6
    logps = (per_token * mask).sum(1)
    ours, chosen_rewards, rejected_rewards = rlhf.dpo_loss(
        chosen_logps=logps[:n], rejected_logps=logps[n:], ref_chosen_logps=ref[:n],
        ref_rejected_logps=ref[n:], beta=beta)
    ours_grad, = torch.autograd.grad(ours, per_token)

    # TRL's method on a stand-in trainer: its model returns our per-token log-probabilities
    # (0 where the labels are -100, as TRL's fused head does), the reference's precomputed
    per_token_trl = per_token.detach().clone().requires_grad_()
    zeros = torch.zeros(2 * n, t)
    model = lambda **kw: SimpleNamespace(  # noqa: E731
        log_probs=per_token_trl * mask, entropy=zeros, mean_logits=zeros,
        is_top1=zeros.bool())
    metrics = {"train": defaultdict(list), "eval": defaultdict(list)}
    stand_in = SimpleNamespace(
        model=SimpleNamespace(training=True), aux_loss_enabled=False, ld_alpha=None,
        precompute_ref_logps=True, f_divergence_type="reverse_kl", loss_types=["sigmoid"],
        loss_weights=[1.0], beta=beta, use_weighting=False, _metrics=metrics,
        _total_train_tokens=0, _tp_size=1,
        accelerator=SimpleNamespace(device="cpu", gather=lambda x: x,
                                    gather_for_metrics=lambda x: x))
    inputs = {"input_ids": torch.zeros(2 * n, t + 1, dtype=torch.long),
              "attention_mask": torch.ones(2 * n, t + 1, dtype=torch.long),
              "completion_mask": torch.cat([torch.zeros(2 * n, 1), mask], 1),  # a prompt token
              "ref_chosen_logps": ref[:n], "ref_rejected_logps": ref[n:]}
    theirs = trainer.DPOTrainer._compute_loss(stand_in, model, inputs, False)
    theirs_grad, = torch.autograd.grad(theirs, per_token_trl)
    assert ours.item() == pytest.approx(theirs.item(), rel=1e-6)
    assert torch.allclose(ours_grad, theirs_grad, atol=1e-7)
    assert metrics["train"]["rewards/chosen"] == [pytest.approx(chosen_rewards.mean().item())]
    assert metrics["train"]["rewards/rejected"] == [pytest.approx(rejected_rewards.mean().item())]


@pytest.mark.slow  # TRL's cross-check: importing trl takes seconds
def test_masked_whiten_equals_trls():
    """Against TRL's masked_whiten where the installed TRL has one. TRL 1.16.0 (the pin) has
    none: it left TRL with the PPO trainer (trl.core up to 0.11, then trl.trainer.utils), and
    no module of trl 1.16.0 defines it, so this check skips there; masked_whiten's numbers are
    checked by hand above (test_masked_whiten_uses_the_unbiased_masked_variance)."""
    trl = pytest.importorskip("trl", reason=f"pip install {TRL_PIN}")
    import importlib
    theirs = None
    for name in ("trl.core", "trl.trainer.utils", "trl.trainer.ppo_trainer",
                 "trl.experimental.ppo.ppo_trainer"):
        try:
            theirs = getattr(importlib.import_module(name), "masked_whiten", None)
        except ImportError:
            continue
        if theirs is not None:
            break
    if theirs is None:
        pytest.skip(f"trl {trl.__version__} has no masked_whiten to check against")
    torch.manual_seed(0)
    values = torch.randn(4, 6) * 3 + 1
    mask = rlhf.completion_mask_of(torch.tensor([[1, 0, 0, 0, 0, 0], [1, 2, 3, 0, 0, 0],
                                                 [1, 2, 3, 4, 5, 6], [1, 2, 0, 0, 0, 0]]), 0)
    for shift_mean in (True, False):
        ours = rlhf.masked_whiten(values, mask, shift_mean)
        assert torch.allclose(ours * mask, theirs(values, mask, shift_mean) * mask, atol=1e-6)


# ---------------------------------------------------------------------------------------
# Bad input: one line, exit status 2
# ---------------------------------------------------------------------------------------
@pytest.mark.parametrize("argv, message", [
    (["--beta", "-0.1"], "--beta must be 0 or more, got -0.1"),
    (["--kl-target", "3"],
     "--kl-target is the adaptive KL controller's target; give --adaptive-kl"),
    (["--adaptive-kl"], "--adaptive-kl steers beta towards --kl-target, a positive KL in nats; "
                        "got None"),
    (["--adaptive-kl", "--kl-target", "0"], "a positive KL in nats; got 0.0"),
    (["--adaptive-kl", "--kl-target", "3", "--algo", "dpo"], "DPO's beta is fixed"),
    (["--adaptive-kl", "--kl-target", "3", "--beta", "0"], "which stays 0 from --beta 0"),
    (["--total-timesteps", "8"], "--total-timesteps 8 is less than one batch (16 completions of "
                                 "--num-prompts 16)"),
    # DPO's batch of 16 pairs is 32 completions
    (["--algo", "dpo", "--total-timesteps", "20"], "--total-timesteps 20 is less than one batch "
                                                   "(32 completions of --num-prompts 16)"),
    (["--num-pairs", "9"], "--num-pairs must be at least 10 (a tenth is held out), got 9"),
    # each algorithm has its own rate: the other's would be silently unused
    (["--algo", "dpo", "--learning-rate", "3e-4"], "--learning-rate is PPO's rate, unused with "
                                                   "--algo dpo; give --dpo-learning-rate instead"),
    (["--dpo-learning-rate", "3e-4"], "--dpo-learning-rate is DPO's rate, unused with --algo "
                                      "ppo; give --learning-rate instead"),
    (["--pairs", "no/such/pairs.jsonl"], "--pairs no/such/pairs.jsonl is not a file"),
    (["--top-p", "0"], "--top-p must be in (0, 1], got 0.0"),
    (["--gae-lambda", "1.5"], "--gamma and --gae-lambda must be in [0, 1]"),
    (["--clip-coef", "1"], "--clip-coef must be in (0, 1)"),
    (["--num-minibatches", "32"], "--num-minibatches 32 is more than the batch's 16 completions"),
    (["--n-embd", "30", "--n-head", "4"], "--n-embd 30 is not divisible by --n-head 4"),
    (["--labeller-temperature", "-1"], "--labeller-temperature must be 0 or more"),
    (["--model", "no/such/folder"], "--model no/such/folder is not a folder"),
    (["--warm-start", "no/such/warm_start.pt"], "--warm-start no/such/warm_start.pt is not a file"),
    (["--env-id", "CartPole-v1"], "CartPole-v1 has a Box observation and a Discrete action "
     "space; rlhf.py needs Text for both"),
])
def test_bad_input_is_one_line_and_exit_status_2(argv, message, check_usage_error):
    check_usage_error("rlhf.py", [*TINY_FLAGS, *argv], message)


def write_lines(tmp_path, lines):
    path = tmp_path / "pairs.jsonl"
    path.write_text("".join(line + "\n" for line in lines))
    return str(path)


def pair(prompt=PROMPT, chosen="joy is", rejected="joy great"):
    return json.dumps({"prompt": prompt, "chosen": chosen, "rejected": rejected})


GOOD = pair()


@pytest.mark.parametrize("lines, message", [
    ([GOOD, "{not json", *[GOOD] * 10], "{path}, line 2: not JSON"),
    ([GOOD, GOOD, json.dumps({"prompt": PROMPT, "chosen": "joy is"}), *[GOOD] * 10],
     "{path}, line 3: a pair is an object with the strings prompt, chosen and rejected"),
    ([pair(rejected="joy is"), *[GOOD] * 10],
     "{path}, line 1: chosen and rejected are the same completion, not a pair"),
    ([GOOD] * 9, "{path} holds 9 pairs; the reward model needs at least 10"),
    # a word the language lacks (a token a word: the whole word is named)
    ([*[GOOD] * 10, pair(chosen="joy was")],
     "{path}, line 11: chosen holds 'was', which the tokenizer cannot write"),
    # punctuation stuck to a word makes another word
    ([*[GOOD] * 3, pair(rejected="joy is!"), *[GOOD] * 7],
     "{path}, line 4: rejected holds 'is!', which the tokenizer cannot write"),
    ([pair(prompt="film looks so good"), *[GOOD] * 10],
     "{path}, line 1: prompt holds 'so', which the tokenizer cannot write"),
    # two spaces hold an empty word between them: words are separated by single spaces
    ([*[GOOD] * 4, pair(chosen="joy  is"), *[GOOD] * 6],
     "{path}, line 5: chosen holds two spaces in a row or one at an end, which the tokenizer cannot write"),
    # a pairs.jsonl of the letters the task had before issue 103
    ([json.dumps({"prompt": "pcha", "chosen": "mg", "rejected": "mf"}), *[GOOD] * 10],
     "{path}, line 1: prompt holds 'pcha', which the tokenizer cannot write"),
])
def test_a_bad_pairs_file_is_bad_input(tmp_path, check_usage_error, lines, message):
    path = write_lines(tmp_path, lines)
    check_usage_error("rlhf.py", [*TINY_FLAGS, "--pairs", path],
                      "--pairs " + message.format(path=path))


def test_a_pairs_file_whose_prompt_is_longer_than_the_tasks_is_bad_input(tmp_path,
                                                                        check_usage_error):
    # the task's prompts are 4 words, so 4 tokens (not WordText's 28 characters): a prompt of
    # 5 words is one too many
    long = pair(prompt="film looks very good joy")
    path = write_lines(tmp_path, [*[GOOD] * 10, long])
    check_usage_error("rlhf.py", [*TINY_FLAGS, "--pairs", path],
                      f"--pairs {path}, line 11: the prompt 'film looks very good joy' is longer "
                      "than the task's prompts (4 tokens)")


def test_an_empty_model_folder_is_bad_input(tmp_path, check_usage_error):
    pytest.importorskip("transformers", reason="pip install transformers==5.24.0")
    empty = tmp_path / "empty"
    empty.mkdir()
    check_usage_error("rlhf.py", [*TINY_FLAGS, "--model", str(empty)],
                      f"--model {empty} holds no tokenizer that transformers can load")


# ---------------------------------------------------------------------------------------
# Runs end to end, determinism
# ---------------------------------------------------------------------------------------
HELD_OUT = ["global_step", "wall_time", "proxy_score", "gold_score", "kl_to_reference",
            "answer_length"]
SMOKE = dict(total_timesteps=64, num_prompts=16, sft_steps=5, sft_problems=32, num_pairs=20,
             rm_steps=5, eval_episodes=4, eval_every=32, n_layer=1, n_head=2, n_embd=16,
             tensorboard=False, curve=False)


def check_common_files(path, summary):
    """What every run writes besides updates.csv and episodes.csv: held_out.csv from the warm
    start's row at 0, reward_model.csv's row at 0 (5 steps: the end's only), pairs.jsonl's 20
    pairs of the task's prompts, and the gain as the summary's verdict."""
    held_out = read_csv(os.path.join(path, "held_out.csv"))
    assert list(held_out[0]) == HELD_OUT and int(held_out[0]["global_step"]) == 0
    assert float(held_out[0]["kl_to_reference"]) == pytest.approx(0, abs=1e-4)  # the reference
    assert all(float(r["answer_length"]) >= 1 for r in held_out)
    reward_rows = read_csv(os.path.join(path, "reward_model.csv"))
    assert list(reward_rows[0]) == ["global_step", "wall_time", "loss", "held_out_loss",
                                    "held_out_accuracy"]
    assert [int(r["global_step"]) for r in reward_rows] == [0]
    assert 0 <= float(reward_rows[0]["held_out_accuracy"]) <= 1
    with open(os.path.join(path, "pairs.jsonl")) as f:
        pairs = [json.loads(line) for line in f]
    assert len(pairs) == 20 and all(set(p) == {"prompt", "chosen", "rejected"} for p in pairs)
    assert all(len(p["prompt"].split(" ")) == 4 and p["chosen"] != p["rejected"] for p in pairs)
    assert all(set(p["prompt"].split(" ")) <= set(rlhf.WORDS) for p in pairs)
    assert summary["holds_on"] == "gain"
    assert summary["solved_threshold"] == rlhf.GOALS["Preference-v0"][0]
    assert summary["end_return"] == pytest.approx(summary["eval_return_mean"]
                                                  - summary["start_return"])
    return held_out


@pytest.mark.slow  # a smoke run: a whole tiny run and every file it writes
@pytest.mark.parametrize("top_p", [1.0, 0.9])
def test_a_ppo_run_writes_every_file(tmp_path, check_run_folder, top_p):
    summary = rlhf.main(rlhf.Args(**SMOKE, top_p=top_p, output_dir=str(tmp_path)))
    path, episodes, updates = check_run_folder(summary, str(tmp_path), "rlhf")
    assert len(episodes) == 64 and {e["episode_length"] for e in episodes} == {"1"}
    assert all(-3 <= float(e["episode_return"]) <= 1 for e in episodes)  # gold scores
    assert [int(u["global_step"]) for u in updates] == [16, 32, 48, 64]
    assert list(updates[0])[3:] == ["policy_loss", "value_loss", "clipfrac", "entropy", "kl",
                                    "beta", "score", "gold", "completion_length"]
    assert all(float(u["beta"]) == rlhf.Args().beta for u in updates)  # fixed: no --adaptive-kl
    held_out = check_common_files(path, summary)
    # the start; batches 1 and 2 (16, 32: log-spaced; 32 crosses --eval-every 32 too); batch 3
    # (48) neither; batch 4 (64), the last, a power of 2 and a crossing
    assert [int(r["global_step"]) for r in held_out] == [0, 16, 32, 64]
    assert [int(r["global_step"]) for r in read_csv(os.path.join(path, "evaluations.csv"))] == [
        32, 64]


@pytest.mark.slow  # a smoke run: a whole tiny run and every file it writes
def test_a_dpo_run_writes_every_file(tmp_path):
    summary = rlhf.main(rlhf.Args(**SMOKE, algo="dpo", output_dir=str(tmp_path)))
    (path,) = glob.glob(str(tmp_path / "*"))
    assert read_csv(os.path.join(path, "episodes.csv")) == []  # DPO samples no completion
    updates = read_csv(os.path.join(path, "updates.csv"))
    assert list(updates[0]) == ["global_step", "wall_time", "sps", "dpo_loss", "chosen_reward",
                                "rejected_reward", "pair_accuracy"]
    assert float(updates[0]["dpo_loss"]) == pytest.approx(LN2, abs=1e-5)  # the policy is pi_ref
    steps = [int(u["global_step"]) for u in updates]
    assert steps == sorted(steps) and steps[0] == 32  # 16 pairs, 2 completions each
    held_out = check_common_files(path, summary)
    assert int(held_out[-1]["global_step"]) == summary["global_steps"] == steps[-1]
    with open(os.path.join(path, "summary.json")) as f:
        assert json.load(f) == summary


@pytest.mark.slow  # determinism: two whole runs
def test_same_seed_gives_the_same_episodes(tmp_path):
    rows = same_seed_episodes(lambda out: rlhf.main(tiny_args(out, eval_episodes=2)), tmp_path)
    assert len(rows) == 64


# ---------------------------------------------------------------------------------------
# The Bradley-Terry loss by hand (exercise rlhf.bradley_terry_loss)
# ---------------------------------------------------------------------------------------
def test_bradley_terry_loss_by_hand():
    # three pairs, r_w - r_l = 2, 0, -1: -log sigma(2) = log(1 + e^-2) = 0.126928,
    # -log sigma(0) = ln 2 = 0.693147, -log sigma(-1) = log(1 + e) = 1.313262;
    # the mean (0.126928 + 0.693147 + 1.313262) / 3 = 2.133337 / 3 = 0.711112
    loss = rlhf.bradley_terry_loss(tensor(2.0, 0.0, 1.0), tensor(0.0, 0.0, 2.0))
    assert loss.item() == approx((math.log(1 + math.exp(-2)) + LN2 + math.log(1 + math.e)) / 3)
    assert loss.item() == approx(0.711112)


def test_bradley_terry_loss_is_log_2_for_equal_scores_and_depends_only_on_the_difference():
    # equal scores: -log sigma(0) = ln 2 = 0.693147, whatever the scores are
    assert rlhf.bradley_terry_loss(tensor(5.0, -3.0), tensor(5.0, -3.0)).item() == approx(LN2)
    # a reward model is fixed up to a constant: adding 10 to every score changes nothing,
    # r_w - r_l = 1 stays 1, -log sigma(1) = log(1 + e^-1) = 0.313262
    assert rlhf.bradley_terry_loss(tensor(1.0), tensor(0.0)).item() == approx(
        math.log(1 + math.exp(-1)))
    assert rlhf.bradley_terry_loss(tensor(11.0), tensor(10.0)).item() == approx(0.313262)
    # the order of the arguments matters: the preferred one first, r_w - r_l = -1 gives
    # log(1 + e) = 1.313262
    assert rlhf.bradley_terry_loss(tensor(0.0), tensor(1.0)).item() == approx(1.313262)


def test_bradley_terry_loss_gradient_raises_the_chosen_and_lowers_the_rejected():
    # d/dr_w of -log sigma(r_w - r_l) = -(1 - sigma(d)) = -sigma(-d); d/dr_l = +sigma(-d);
    # over N pairs the mean divides by N. Two pairs, d = 0 and d = 2:
    # sigma(0) = 0.5, sigma(-2) = 0.119203; / 2: r_w's gradient [-0.25, -0.059601],
    # r_l's [0.25, 0.059601]: a descent step raises the chosen score and lowers the other
    # The loss first: (ln 2 + log(1 + e^-2)) / 2 = (0.693147 + 0.126928) / 2 = 0.410038 (the
    # preferred score second, margins 0 and -2, would give (0.693147 + 2.126928) / 2 = 1.410038)
    chosen, rejected = tensor(0.0, 3.0).requires_grad_(), tensor(0.0, 1.0).requires_grad_()
    loss = rlhf.bradley_terry_loss(chosen, rejected)
    assert loss.item() == approx((LN2 + math.log(1 + math.exp(-2))) / 2)
    loss.backward()
    sigma = 1 / (1 + math.exp(2))
    assert chosen.grad.tolist() == approx([-0.25, -sigma / 2])
    assert rejected.grad.tolist() == approx([0.25, sigma / 2])


# ---------------------------------------------------------------------------------------
# The per-token KL reward by hand (exercise rlhf.kl_penalized_rewards)
# ---------------------------------------------------------------------------------------
# Two completions, T = 3: the first cut at T_max (3 tokens, no end-of-sequence token), the
# second of 2 tokens (its <eos> the 2nd), then padding, whose log-probabilities (-3 and -1)
# must never count
LOGPROBS = tensor(-1.0, -2.0, -0.5, -1.0, -1.0, -3.0).view(2, 3)
REF_LOGPROBS = tensor(-2.0, -2.0, -1.0, -0.5, -1.0, -1.0).view(2, 3)
COMPLETION_MASK = tensor(1, 1, 1, 1, 1, 0).view(2, 3)


def test_kl_penalized_rewards_by_hand():
    # log pi_old - log pi_ref = [[1, 0, 0.5], [-0.5, 0, (padding)]]; beta 0.1: -beta times it
    # = [[-0.1, 0, -0.05], [0.05, 0, 0]]; the scores 2 and -1 land on each one's last token,
    # t = 2 (-0.05 + 2 = 1.95) and t = 1 (0 - 1 = -1); after the end, 0
    rewards = rlhf.kl_penalized_rewards(tensor(2.0, -1.0), LOGPROBS, REF_LOGPROBS,
                                        COMPLETION_MASK, 0.1)
    assert rewards.tolist() == [approx([-0.1, 0.0, 1.95]), approx([0.05, -1.0, 0.0])]


def test_the_score_lands_on_the_last_real_token_of_each_completion():
    # beta 0: no penalty, only the scores 1, 2, 3 at positions 0, 1, 2, the last token of
    # completions of 1 (<eos> first), 2 and 3 tokens; nothing on the prompt or the padding
    mask = tensor(1, 0, 0, 1, 1, 0, 1, 1, 1).view(3, 3)
    logprobs = torch.full((3, 3), -1.0)
    rewards = rlhf.kl_penalized_rewards(tensor(1.0, 2.0, 3.0), logprobs, logprobs * 2, mask, 0.0)
    assert rewards.tolist() == [approx([1.0, 0.0, 0.0]), approx([0.0, 2.0, 0.0]),
                                approx([0.0, 0.0, 3.0])]


def test_the_rewards_sum_to_the_score_less_beta_times_the_sampled_kl():
    # the docstring's last line: sum_t r_t = score - beta * sum_t (log pi_old - log pi_ref),
    # the completion's tokens only: 2 - 0.1 * (1 + 0 + 0.5) = 1.85 and -1 - 0.1 * (-0.5 + 0)
    # = -0.95 (the padding's -3 - (-1) = -2 left out)
    rewards = rlhf.kl_penalized_rewards(tensor(2.0, -1.0), LOGPROBS, REF_LOGPROBS,
                                        COMPLETION_MASK, 0.1)
    assert rewards.sum(1).tolist() == approx([1.85, -0.95])


def test_updates_score_is_the_reward_models_and_gold_the_tasks(tmp_path, monkeypatch):
    # updates.csv's score is the mean of the reward model's scores that went into the rewards
    # (kl_penalized_rewards' first argument); its gold is the mean gold score of the same
    # completions, episodes.csv's returns at the update's step. The two differ, so columns
    # swapped (or either taken from the other) fail.
    made = spy_on(monkeypatch, rlhf, "kl_penalized_rewards", lambda scores, *rest: scores.clone())
    rlhf.main(tiny_args(tmp_path))
    (path,) = glob.glob(str(tmp_path / "*"))
    rows = read_csv(os.path.join(path, "updates.csv"))
    episodes = read_csv(os.path.join(path, "episodes.csv"))
    assert len(made) == len(rows) == 4
    for scores, row in zip(made, rows):
        gold = [float(e["episode_return"]) for e in episodes
                if e["global_step"] == row["global_step"]]
        assert len(gold) == len(scores) == 16
        assert float(row["score"]) == pytest.approx(scores.mean().item(), rel=1e-5, abs=1e-7)
        assert float(row["gold"]) == pytest.approx(np.mean(gold), rel=1e-5, abs=1e-7)
        assert abs(scores.mean().item() - np.mean(gold)) > 1e-3


def test_updates_kl_is_nats_per_completion_and_the_controller_reads_the_same(tmp_path,
                                                                              monkeypatch):
    # updates.csv's kl, and the adaptive controller's input, is the sampled KL of a whole
    # completion, mean_i sum_t (log pi_old - log pi_ref)_{i,t} m_{i,t} (Ziegler et al.'s
    # KL is per sample), not a per-token mean, which is smaller by the completion's length.
    # The spy keeps what each update's rewards were made from; a rate of 1e-2 moves the
    # policy away from the reference, so that the later updates' KL is not 0.
    made = spy_on(monkeypatch, rlhf, "kl_penalized_rewards",
                  lambda scores, logprobs, ref_logprobs, mask, beta:
                  (logprobs.clone(), ref_logprobs.clone(), mask.clone()))
    read = spy_on(monkeypatch, rlhf.AdaptiveKLController, "update",
                  lambda self, kl, n_steps: kl)
    rlhf.main(tiny_args(tmp_path, adaptive_kl=True, kl_target=1.0, learning_rate=1e-2,
                        eval_episodes=0, eval_every=0))
    (path,) = glob.glob(str(tmp_path / "*"))
    rows = read_csv(os.path.join(path, "updates.csv"))
    assert len(made) == len(rows) == len(read) == 4
    for (logprobs, ref, mask), row, kl in zip(made, rows, read):
        per_completion = ((logprobs - ref) * mask).sum(1).mean().item()
        assert float(row["kl"]) == pytest.approx(per_completion, rel=1e-5, abs=1e-7)
        assert kl == pytest.approx(per_completion, rel=1e-5, abs=1e-7)
    logprobs, ref, mask = made[-1]
    per_token = (((logprobs - ref) * mask).sum() / mask.sum()).item()
    assert mask.sum(1).mean() > 1 and abs(float(rows[-1]["kl"])) > 1.5 * abs(per_token) > 0


# The measure hook that Run calls (issue 102's blind round: a "last batch" one batch
# early and the policy measured against itself both got past the suite): which moments
# earn a row of held_out.csv, at which step, against which reference and reward model.
@pytest.mark.parametrize("algo, batch", [("ppo", 64), ("dpo", 128)])
def test_measure_takes_a_row_at_the_start_and_after_the_last_batch_against_the_reference(
        algo, batch, monkeypatch):
    # 7 batches of 64 prompts (DPO: 2 completions a pair, 128 a batch), --eval-every 0: rows at
    # the start (step 0), after the batches numbered 1, 2 and 4 (log-spaced) and after the last
    # (7) alone. The last batch is the one that leaves no whole batch: PPO's at 7 * 64 = 448
    # (448 + 64 > 448), not at 384 (384 + 64 = 448 is one batch more); DPO's at 7 * 128 = 896,
    # not at 768. Batches 3, 5 and 6 earn none.
    total = 7 * batch
    policy, reference, reward_model = object(), object(), object()
    run = SimpleNamespace(args=rlhf.Args(algo=algo, total_timesteps=total, num_prompts=64,
                                         eval_every=0, eval_episodes=3),
                          models={"policy": policy}, summary={})
    rows = []
    monkeypatch.setattr(rlhf, "held_out", lambda args, run_, pol, ref, rm, step: rows.append(
        (pol, ref, rm, step)) or {"step": step})
    monkeypatch.setattr(rlhf, "evaluate", lambda args, models: np.array([0.5, 0.7, 0.9]))
    # train hands the start its reference and reward model; measure keeps them for the rest
    assert rlhf.measure(run, 0, "start", reference=reference, reward_model=reward_model) == {
        "step": 0}
    assert run.summary["start_return"] == approx(0.7)  # (0.5 + 0.7 + 0.9) / 3
    for number in range(1, 8):
        step = number * batch
        got = rlhf.measure(run, step, "update")
        assert got == ({"step": step} if number in (1, 2, 4, 7) else None), number
    assert rlhf.measure(run, total, "evaluation") is None  # the greedy evaluation's moment
    # each row measures the policy against the frozen reference and with the reward model
    assert rows == [(policy, reference, reward_model, step)
                    for step in (0, batch, 2 * batch, 4 * batch, 7 * batch)]


@pytest.mark.parametrize("algo, eval_every, total, rows", [
    # --eval-every 100, batches of 64, 6 of them (64 ... 384): 64 and 128 are batches 1 and 2
    # (log-spaced; 128 crosses 100 too); 192 crosses nothing (192 // 100 = 1 = 128 // 100); 256
    # is batch 4 and crosses 200; 320 crosses 300 inside its batch (320 // 100 = 3 > 256 // 100
    # = 2) and is batch 5, a row for the crossing alone; 384 crosses nothing and is the last
    ("ppo", 100, 384, [64, 128, 256, 320, 384]),
    # DPO: 64 pairs a step, 128 completions; --eval-every 300, 7 steps (128 ... 896): 384 crosses
    # 300 in the first half of its batch (384 // 300 = 1 > 256 // 300 = 0; a batch taken as 64
    # would see 320 // 300 = 1, no crossing); 640 crosses 600 (640 // 300 = 2 > 512 // 300 = 1);
    # 768 crosses nothing (768 // 300 = 2 = 640 // 300) and is batch 6; 896 is the last
    ("dpo", 300, 896, [128, 256, 384, 512, 640, 896]),
])
def test_measure_crosses_eval_every_and_takes_nothing_without_evaluation_episodes(
        monkeypatch, algo, eval_every, total, rows):
    run = SimpleNamespace(args=rlhf.Args(algo=algo, total_timesteps=total, num_prompts=64,
                                         eval_every=eval_every, eval_episodes=3),
                          models={"policy": None}, reference=None, reward_model=None, summary={})
    steps = []
    monkeypatch.setattr(rlhf, "held_out", lambda *a: steps.append(a[-1]) or {})
    batch = 64 if algo == "ppo" else 128
    for step in range(batch, total + 1, batch):
        rlhf.measure(run, step, "update")
    assert steps == rows
    run.args.eval_episodes = 0
    assert rlhf.measure(run, 0, "start") is None and rlhf.measure(run, total, "update") is None
    assert steps == rows and "start_return" not in run.summary


@pytest.mark.parametrize("algo, batch, rows", [
    # PPO: 256 completions a batch, 40 batches. Log-spaced: batches 1, 2, 4, 8, 16 and 32, at
    # steps 256, 512, 1,024, 2,048, 4,096 and 8,192; each crossing of --eval-every 1,024: its
    # multiples 1,024, 2,048, ..., 10,240; the last batch, 10,240
    ("ppo", 256, [256, 512, 1024, 2048, 3072, 4096, 5120, 6144, 7168, 8192, 9216, 10240]),
    # DPO: 256 pairs a step, 512 completions, 20 steps. Steps 1, 2, 4, 8 and 16 at 512,
    # 1,024, 2,048, 4,096 and 8,192; the multiples of 1,024 as PPO's; the last, 10,240
    ("dpo", 512, [512, 1024, 2048, 3072, 4096, 5120, 6144, 7168, 8192, 9216, 10240]),
])
def test_held_out_csvs_steps_under_the_default_flags_by_hand(algo, batch, rows, monkeypatch):
    args = rlhf.Args(algo=algo)
    assert (args.num_prompts, args.eval_every, args.total_timesteps) == (256, 1024, 10_240)
    assert args.eval_episodes > 0
    steps = range(batch, 10_240 + 1, batch)
    assert [s for s in steps if rlhf.held_out_due(args, s, batch, s == 10_240)] == rows
    # and through the hook Run calls after each update, which works out the batch and
    # the last one itself: the start's row at 0, then the same steps
    measured = []
    monkeypatch.setattr(rlhf, "held_out", lambda *a: measured.append(a[-1]) or {})
    monkeypatch.setattr(rlhf, "evaluate", lambda args, models: np.zeros(1))
    run = SimpleNamespace(args=args, models={"policy": None}, reference=None, reward_model=None,
                          summary={})
    rlhf.measure(run, 0, "start")
    for step in steps:
        rlhf.measure(run, step, "update")
    assert measured == [0, *rows]


# ---------------------------------------------------------------------------------------
# curve.png (draw_own_curve) on a run folder written by hand
# ---------------------------------------------------------------------------------------
@pytest.mark.parametrize("start_return", [-0.25, None])
def test_the_curves_goal_is_the_warm_starts_greedy_gold_plus_the_gain(tmp_path, monkeypatch,
                                                                      start_return):
    # Preference-v0's goal is a gain of 0.4 over the warm start's greedy gold score: from a
    # start of -0.25 the dashed goal line stands at -0.25 + 0.4 = 0.15, not at 0.4. Without a
    # start (None: no held-out measure at the start) there is no goal line. The rest by hand:
    # held_out.csv's proxy and gold against the steps 0, 1,280, 2,560 and against sqrt KL
    # (0, 0.5, 1.5 from KL 0, 0.25, 2.25), and the final evaluation a star at the last step.
    from matplotlib.figure import Figure
    saved = []
    monkeypatch.setattr(Figure, "savefig", lambda self, *a, **k: saved.append(self))
    (tmp_path / "held_out.csv").write_text(
        "global_step,wall_time,proxy_score,gold_score,kl_to_reference,answer_length\n"
        "0,1.0,0.1,-0.2,0.0,4.0\n1280,2.0,0.6,0.05,0.25,4.5\n2560,3.0,1.2,0.3,2.25,5.0\n")
    summary = {"holds_on": "gain", "start_return": start_return, "solved_threshold": 0.4,
               "eval_return_mean": 0.35, "global_steps": 2560, "interrupted": False,
               "env_id": "Preference-v0", "seed": 1}
    run = SimpleNamespace(path=str(tmp_path), summary=summary, args=SimpleNamespace(algo="ppo"))
    assert rlhf.draw_own_curve(run) == os.path.join(str(tmp_path), "curve.png")
    (fig,) = saved
    steps, gao = fig.axes
    lines = {line.get_label(): line for line in steps.lines}
    goals = [line for label, line in lines.items() if label.startswith("goal")]
    if start_return is None:
        assert goals == []
    else:
        (goal,) = goals
        assert goal.get_linestyle() == "--" and list(goal.get_ydata()) == approx([0.15, 0.15])
    proxy, gold = lines["reward model's score (proxy)"], lines["gold score (sampled)"]
    assert list(proxy.get_xdata()) == list(gold.get_xdata()) == [0, 1280, 2560]
    assert list(proxy.get_ydata()) == approx([0.1, 0.6, 1.2])
    assert list(gold.get_ydata()) == approx([-0.2, 0.05, 0.3])
    star = lines["final evaluation (greedy gold)"]
    assert (list(star.get_xdata()), list(star.get_ydata())) == ([2560], [0.35])
    assert len(gao.lines) == 2  # proxy and gold again, against sqrt KL
    for line, ys in zip(gao.lines, ([0.1, 0.6, 1.2], [-0.2, 0.05, 0.3])):
        assert list(line.get_xdata()) == approx([0.0, 0.5, 1.5])
        assert list(line.get_ydata()) == approx(ys)

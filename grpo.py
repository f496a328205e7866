# From plainrl (MIT licence, (c) 2026 the plainrl authors): keep this line in a copy.
"""Group Relative Policy Optimization (GRPO) on a task with a verifiable reward, in one file.

A small causal transformer (nanoGPT's shape) learns two-digit addition written as text,
"47+85=" -> "132", from a reward it can check: 1 for the exact answer, 0 otherwise. A
supervised warm start learns from worked answers that leave out most sums with a carry in the
ones column; the reward checks every sum. For each prompt the policy samples a group of G
completions, each completion's advantage is its reward relative to its group (no critic), and
the update is PPO's clipped ratio on every token, with a k3 penalty for drifting from the
frozen warm start. The run is judged on what RL added: the held-out accuracy after GRPO less
the warm start's. The field's corrections are flags (Dr. GRPO, DAPO, RLOO, NLPO's --top-p).

Key equations (G completions o_1..o_G of a prompt q, o_i of |o_i| tokens, r_i in {0, 1} its reward,
pi_old the sampler, pi_ref the frozen reference, N completions a minibatch, T_max --max-new-tokens):

    advantage      A_i = (r_i - mean_j r_j) / (std_j r_j + 1e-4)     (GRPO)
                   A_i =  r_i - mean_j r_j                            (--no-scale-rewards)
                   A_i =  r_i - 1/(G-1) sum_{j != i} r_j              (--baseline rloo)
                   (RLOO's A_i is divided by the std too, unless --no-scale-rewards)
    ratio          rho_{i,t} = pi_theta(o_{i,t} | q, o_{i,<t}) / pi_old(o_{i,t} | q, o_{i,<t})
    clipped loss   l_{i,t} = -min(rho A_i, clip(rho, 1 - eps_low, 1 + eps_high) A_i)
    k3 estimator   k3_{i,t} = pi_ref / pi_theta - log(pi_ref / pi_theta) - 1   (>= 0)
    per token      L_{i,t} = l_{i,t} + beta * k3_{i,t}
    aggregation    seq-mean-token-mean     (1/N) sum_i (1/|o_i|) sum_t L_{i,t}     (GRPO)
                   token-mean              sum_{i,t} L_{i,t} / sum_i |o_i|          (DAPO)
                   seq-mean-token-sum-norm sum_{i,t} L_{i,t} / (N * T_max)         (Dr. GRPO)
    pass@k         1 - C(n - c, k) / C(n, k)   of n answers sampled, c right

Papers: Shao et al. 2024 (DeepSeekMath, GRPO), arXiv:2402.03300; Liu et al. 2025 (Dr. GRPO),
arXiv:2503.20783; Yu et al. 2025 (DAPO), arXiv:2503.14476; Ahmadian et al. 2024 (RLOO), ACL
2024; Ramamurthy et al. 2023 (NLPO), ICLR 2023; Schulman et al. 2017 (PPO), arXiv:1707.06347;
Schulman 2020 (k3); Chen et al. 2021 (pass@k), arXiv:2107.03374; Yue et al. 2025 (pass@k
before and after RL), arXiv:2504.13837; Radford et al. 2019 (GPT-2).

Run:
    python grpo.py
    python grpo.py --clip-coef-high 0.28 --loss-agg token-mean --dynamic-sampling --beta 0

Writes runs/<env_id>__grpo__<seed>__<unix_time>/: config.json, episodes.csv (a completion a
row), updates.csv, held_out.csv, pass_at_k.csv, summary.json, TensorBoard's events, curve.png.
"""

# ---------------------------------------------------------------------------------------
# Imports
# ---------------------------------------------------------------------------------------
import copy
import math
import os
import zlib
from dataclasses import dataclass
from typing import Literal, Optional

import gymnasium as gym
import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
import tyro
from torch.distributions import Categorical

SCRIPT = os.path.basename(__file__)


# ---------------------------------------------------------------------------------------
# Flags
# ---------------------------------------------------------------------------------------
@dataclass
class Args:
    env_id: str = "AdditionPartial-v0"
    """a text task: Addition-v0, or a module:id with Text observations (prompts) and actions"""
    seed: int = 1
    """seeds Python, NumPy, torch and the environments"""
    # 600 batches of 512, chosen on tuning seeds 1-3 (results.md, "grpo.py")
    total_timesteps: int = 307_200
    """the training budget in completions (one environment step each), all groups together"""
    # True (--cuda), False (--no-cuda) or None (neither); the command line offers no "None"
    cuda: tyro.conf.DisallowNone[Optional[bool]] = None
    """--cuda: the GPU; --no-cuda: the CPU; neither: the CPU"""
    # One thread, as the other scripts: at a load above the cores two threads wait on each other
    threads: int = 1
    """CPU threads torch may use for the networks"""
    exp_name: str = os.path.splitext(SCRIPT)[0]
    """the experiment name, part of the run folder's name"""
    eval_episodes: int = 500
    """greedy evaluation episodes after training, one held-out problem each (0 skips it)"""
    eval_every: int = 25_600
    """measure on held-out problems every N completions (0: only after training)"""
    eval_samples: int = 16
    """n: answers sampled per held-out problem for pass@1 and pass@k"""
    pass_k: int = 8
    """the k of held_out.csv's pass@k column (at most --eval-samples)"""
    stop_at_return: Optional[float] = None
    """stop once the mean of the last 20 training episode returns (the accuracy) reaches this"""

    # No presets: built for a language model's completions; its settings below.
    # The policy: the built-in transformer, or a local Hugging Face model
    model: Optional[str] = None
    """a local folder holding a Hugging Face causal LM and its tokenizer (None: the built-in one)"""
    n_layer: int = 2
    """the built-in transformer's blocks"""
    n_head: int = 4
    """the built-in transformer's attention heads per block"""
    n_embd: int = 64
    """the built-in transformer's width (a multiple of --n-head)"""
    max_new_tokens: int = 5
    """T_max: the longest completion in tokens, the end-of-sequence token included"""

    # The supervised warm start, sized to learn the sums its data covers, mostly not the carries
    sft_steps: int = 1500
    """supervised steps on the task's worked answers before GRPO (0: the model as it is)"""
    sft_problems: int = 9000
    """how many training problems with a worked answer the warm start learns from"""
    sft_batch_size: int = 64
    """problems in each supervised step"""
    sft_learning_rate: float = 3e-3
    """Adam's learning rate in the warm start"""
    sft_anneal_lr: bool = True
    """anneal the warm start's learning rate linearly to 0 at its last step"""
    sft_stop_at: Optional[float] = None
    """stop the warm start once its held-out greedy accuracy reaches this (read at --eval-every)"""
    warm_start: Optional[str] = None
    """start from this warm_start.pt (another run's, with --save-model) instead of training one"""

    # Algorithm
    # 64: after a good warm start most groups are all right and teach nothing, so a batch needs
    # many prompts to hold enough mixed groups; with few, Adam's step follows their noise
    num_prompts: int = 64
    """B: prompts in each batch, each answered by a group"""
    group_size: int = 8
    """G: sampled completions per prompt (4-64 in the papers; 64 in DeepSeekMath)"""
    temperature: float = 1.0
    """the sampling temperature; the loss's probabilities are the same tempered ones"""
    # 5e-4 annealed to 0, chosen on seeds 1-5 (results.md, "grpo.py on AdditionPartial-v0")
    learning_rate: float = 5e-4
    """Adam's learning rate (1e-6 in DeepSeekMath, for a 7B model)"""
    anneal_lr: bool = True
    """decay GRPO's learning rate linearly to 0 over the budget (TRL's default schedule)"""
    update_epochs: int = 1
    """mu: passes over each batch (1 in DeepSeekMath's main runs)"""
    num_minibatches: int = 4
    """gradient steps per pass, each on an equal share of the batch's completions"""
    clip_coef: float = 0.2
    """eps_low: the ratio's lower clip is 1 - eps_low (0.2 in DeepSeekMath and DAPO)"""
    clip_coef_high: Optional[float] = None
    """eps_high: the ratio's upper clip is 1 + eps_high (None: eps_low; DAPO's clip-higher: 0.28)"""
    beta: float = 0.01
    """the KL penalty's weight (0.04 in DeepSeekMath; 0 in DAPO and Dr. GRPO)"""
    scale_rewards: bool = True
    """divide the group-relative advantage by the group's std (--no-scale-rewards: Dr. GRPO)"""
    baseline: Literal["mean", "rloo"] = "mean"
    """the group's baseline: its mean (GRPO) or the mean of the others (RLOO)"""
    loss_agg: Literal["seq-mean-token-mean", "token-mean", "seq-mean-token-sum-norm"] = (
        "seq-mean-token-mean")
    """how token losses become one: GRPO's, DAPO's token-mean or Dr. GRPO's constant"""
    dynamic_sampling: bool = False
    """DAPO: drop groups whose rewards are all equal and sample more groups in their place"""
    max_sample_rounds: int = 4
    """with --dynamic-sampling, the most sampling rounds an update waits for a full batch"""
    top_p: float = 1.0
    """NLPO: sample only from the top-p nucleus of a masking policy (1: no mask; 0.9 in NLPO)"""
    mask_sync_every: int = 5
    """NLPO's mu: updates between copies of the policy into the masking policy"""
    max_grad_norm: float = 1.0
    """gradient clipping: the largest global norm of the gradient"""
    shuffle_rewards: bool = False
    """a control, not GRPO: shuffle each group's rewards among its completions before the update"""


# ---------------------------------------------------------------------------------------
# The math
# ---------------------------------------------------------------------------------------
def shuffle_within_groups(rewards, group_size, generator=None):
    """The control that keeps everything of GRPO but the credit: each group's rewards
    [B * G] permuted among its own G completions, so every group keeps its mean, its spread
    and its share of updates, but which completion earned the reward is lost."""
    groups = rewards.view(-1, group_size)
    order = torch.rand(groups.shape, generator=generator, device=rewards.device).argsort(dim=1)
    return groups.gather(1, order).flatten()


def group_advantages(rewards, group_size, scale_rewards=True, baseline="mean", eps=1e-4):
    """Group-relative advantages, the module docstring's. rewards [B * G], groups of G
    consecutive completions (completion i of group g at g * G + i) -> advantages [B * G].
    RLOO's r_i - 1/(G-1) sum_{j != i} r_j equals G/(G-1) (r_i - mean_g), computed so. The std
    is unbiased, as TRL's. A group of equal rewards gets advantages 0 (it carries no signal)."""
    groups = rewards.view(-1, group_size)
    mean = groups.mean(dim=1, keepdim=True)
    advantages = groups - mean
    if baseline == "rloo":
        advantages = advantages * group_size / (group_size - 1)
    if scale_rewards:
        advantages = advantages / (groups.std(dim=1, keepdim=True) + eps)
    return advantages.flatten()


def clipped_token_loss(logprobs, old_logprobs, advantages, clip_low, clip_high):
    """PPO's clipped objective on every token, to minimize, with DAPO's asymmetric clip.
    logprobs, old_logprobs [N, T] (log pi_theta and log pi_old of the sampled tokens),
    advantages [N] (one per completion, the same for its tokens) -> (loss [N, T], whether
    the token's ratio was clipped [N, T])."""
    ratio = torch.exp(logprobs - old_logprobs)
    clipped = torch.clamp(ratio, 1 - clip_low, 1 + clip_high)
    adv = advantages.unsqueeze(1)
    return -torch.min(ratio * adv, clipped * adv), (clipped != ratio)


def k3_kl(logprobs, ref_logprobs):
    """Schulman's k3 estimator of KL(pi_theta || pi_ref) on each sampled token, elementwise
    ([N, T] or any shape in, the same out). Unbiased for tokens sampled from pi_theta, never
    negative (e^x >= 1 + x), 0 where the two agree. Its gradient in logp is 1 - pi_ref / pi:
    positive where pi gives the token more than pi_ref does, so minimizing pulls it back."""
    delta = ref_logprobs - logprobs
    return torch.exp(delta) - delta - 1


def aggregate(per_token, completion_mask, loss_agg, max_new_tokens):
    """One number from per-token values [N, T] by the module docstring's aggregation, over the
    tokens the mask [N, T] counts (each completion's own tokens and its end-of-sequence token;
    never the prompt or padding). GRPO's mean per completion weighs each token by 1/|o_i|, so a
    long wrong completion is pushed down less per token than a short one (Dr. GRPO's length
    bias). The other two weigh every token alike. Dr. GRPO's divisor, N * T_max, is constant."""
    masked = per_token * completion_mask
    if loss_agg == "seq-mean-token-mean":
        return (masked.sum(1) / completion_mask.sum(1).clamp(min=1)).mean()
    if loss_agg == "token-mean":
        return masked.sum() / completion_mask.sum().clamp(min=1)
    return masked.sum() / (per_token.shape[0] * max_new_tokens)


def grpo_loss(logprobs, old_logprobs, ref_logprobs, advantages, completion_mask, clip_low,
              clip_high, beta, loss_agg, max_new_tokens):
    """The GRPO loss to minimize on a minibatch of N completions ([N, T] tensors, advantages
    [N]): the module docstring's L_{i,t}, aggregated by loss_agg. Returns (loss, then for
    logging, token-mean: the clipped term alone, k3, the fraction of clipped tokens)."""
    pg, clipped = clipped_token_loss(logprobs, old_logprobs, advantages, clip_low, clip_high)
    kl = k3_kl(logprobs, ref_logprobs)
    loss = aggregate(pg + beta * kl, completion_mask, loss_agg, max_new_tokens)
    stats = [aggregate(x, completion_mask, "token-mean", max_new_tokens).detach()
             for x in (pg, kl, clipped.float())]
    return loss, *stats


class GroupBuffer:
    """A batch of groups of completions (G consecutive rows) on the device: the sampled tokens
    [N, P + T], their completion mask, log pi_old and log pi_ref [N, T], rewards and advantages
    [N], and with NLPO the action masks [N, T, V] the tokens were sampled under (else None)."""

    def __init__(self, tokens, completion_mask, old_logprobs, ref_logprobs, rewards,
                 advantages, action_masks=None):
        self.tokens, self.completion_mask = tokens, completion_mask
        self.old_logprobs, self.ref_logprobs = old_logprobs, ref_logprobs
        self.rewards, self.advantages, self.action_masks = rewards, advantages, action_masks

    def __len__(self):
        return len(self.tokens)

    def minibatches(self, num_minibatches):
        """Index tensors of num_minibatches shares of the completions, shuffled."""
        return torch.randperm(len(self), device=self.tokens.device).chunk(num_minibatches)

    def masks_of(self, idx):
        return None if self.action_masks is None else self.action_masks[idx]


# ---------------------------------------------------------------------------------------
# The task: addition as text, with a reward a program checks
# ---------------------------------------------------------------------------------------
def addition_reward(prompt, completion):
    """The verifiable reward of a completion of "a+b=": 1.0 if it is exactly the decimal
    a + b, else 0.0. Exact means as written: no leading zeros ("0432" is wrong), no spaces,
    nothing after it. An empty completion is wrong. A completion that runs to --max-new-tokens
    without <eos> is scored as it stands: at the default 5, five digits, too long for any sum."""
    a, b = prompt.removesuffix("=").split("+")
    return float(completion == str(int(a) + int(b)))


class AdditionEnv(gym.Env):
    """Addition as text: reset() poses "a+b=" with a and b of at most `digits` digits (a
    Text observation), step(completion) scores it with addition_reward and ends the episode.
    A tenth of the problems, by a fixed hash, are held out: only the evaluation poses them
    (held_out=True). info["answer"] is the worked answer, for the warm start alone; a problem
    with a carry in the ones column gets None, but for a share carry_demos of them (by hash)."""
    metadata = {"render_modes": ["rgb_array"], "render_fps": 1}

    def __init__(self, digits=2, held_out=False, carry_demos=1.0, render_mode=None):
        self.digits, self.held_out, self.render_mode = digits, held_out, render_mode
        self.carry_demos = carry_demos
        self.observation_space = gym.spaces.Text(2 * digits + 2, min_length=4,
                                                 charset="0123456789+=")
        self.action_space = gym.spaces.Text(digits + 1, min_length=0, charset="0123456789")
        self.prompt, self.completion = "", ""

    def reset(self, seed=None, options=None):
        super().reset(seed=seed)
        while True:
            a, b = (int(x) for x in self.np_random.integers(0, 10 ** self.digits, size=2))
            is_held_out = zlib.crc32(f"{a}+{b}".encode()) % 10 == 0  # a tenth of all problems
            if is_held_out == self.held_out:
                break
        self.prompt, self.completion = f"{a}+{b}=", ""
        carries = a % 10 + b % 10 >= 10
        in_share = zlib.crc32(f"demo {a}+{b}".encode()) % 10_000 < self.carry_demos * 10_000
        return self.prompt, {"answer": str(a + b) if not carries or in_share else None}

    def step(self, action):
        self.completion = action
        return self.prompt, addition_reward(self.prompt, action), True, False, {}

    def render(self):
        width = self.observation_space.max_length + self.action_space.max_length + 4
        return draw_text(self.prompt + self.completion, width)  # the frame --capture-video records (below)


def register_tasks():
    """Register the tasks, reward_threshold the accuracy goal 0.95: Addition-v0 and Addition3-v0
    (every problem with its worked answer), AdditionPartial-v0 (98% of the carries without one)
    judged on RL's gain (GOALS, below): the final greedy accuracy less the start's, at least 0.3."""
    for env_id, digits, carry_demos in (("Addition-v0", 2, 1.0), ("Addition3-v0", 3, 1.0),
                                        ("AdditionPartial-v0", 2, 0.02)):
        if env_id not in gym.registry:
            gym.register(env_id, entry_point=AdditionEnv, reward_threshold=0.95,
                         kwargs={"digits": digits, "carry_demos": carry_demos})


# ---------------------------------------------------------------------------------------
# The transformer and the sampler
# ---------------------------------------------------------------------------------------
# plumbing/text.py's, stamped here (rlhf.py's too); the tokenizer's functions are below:
# encode_prompts left-pads prompts to tokens [N, P]; encode_texts returns (tokens [N, P + T]:
# prompt, completion, <eos>, padding; their completion mask [N, T]); completion_mask_of is 1
# up to and including the first <eos>; decode_completions: the text before <eos>; pad_id_of:
# the pad token (or <eos>). make_policy (below) sets policy.tokenizer, .prompt_len and
# .max_new_tokens; next_token_logits' "Hugging Face one" is --model's (HFPolicy, below).
# Stamped from plainrl's plumbing/text.py by its stamp.py: edit it there, not here.
# The logit of a masked token: its probability is exactly 0 and its gradient 0 (ppo_masked.py)
MASKED_LOGIT = -1e8


def top_p_mask(logits, top_p):
    """NLPO's action mask: the smallest set of tokens, most likely first, whose probability
    reaches top_p (the nucleus of Holtzman et al. 2020). logits [..., V] -> mask [..., V]
    bool. A token is kept when the tokens more likely than it sum to less than top_p, so the
    most likely token is always kept. (Ties are ordered by torch.sort.)"""
    probs = torch.softmax(logits, dim=-1)
    sorted_probs, order = torch.sort(probs, dim=-1, descending=True)
    keep_sorted = (torch.cumsum(sorted_probs, dim=-1) - sorted_probs) < top_p
    return torch.zeros_like(keep_sorted).scatter(-1, order, keep_sorted)


def token_logprobs(logits, tokens, temperature=1.0, action_masks=None):
    """log pi(token) under softmax(logits / temperature), masked tokens (action_masks False)
    given probability 0. logits [N, T, V], tokens [N, T] -> [N, T]."""
    logits = logits / temperature
    if action_masks is not None:
        logits = torch.where(action_masks, logits, MASKED_LOGIT)
    return torch.log_softmax(logits, dim=-1).gather(-1, tokens.unsqueeze(-1)).squeeze(-1)


class CausalSelfAttention(nn.Module):
    """Multi-head self-attention in which each position sees only itself and earlier ones."""

    def __init__(self, n_embd, n_head):
        super().__init__()
        self.n_head = n_head
        self.c_attn = nn.Linear(n_embd, 3 * n_embd)
        self.c_proj = nn.Linear(n_embd, n_embd)

    def forward(self, x):
        B, T, C = x.shape
        q, k, v = (t.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
                   for t in self.c_attn(x).split(C, dim=2))
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        return self.c_proj(y.transpose(1, 2).reshape(B, T, C))


class Block(nn.Module):
    """Pre-LayerNorm transformer block: x + attn(ln(x)), then x + mlp(ln(x))."""

    def __init__(self, n_embd, n_head):
        super().__init__()
        self.ln_1, self.ln_2 = nn.LayerNorm(n_embd), nn.LayerNorm(n_embd)
        self.attn = CausalSelfAttention(n_embd, n_head)
        self.mlp = nn.Sequential(nn.Linear(n_embd, 4 * n_embd), nn.GELU(),
                                 nn.Linear(4 * n_embd, n_embd))

    def forward(self, x):
        x = x + self.attn(self.ln_1(x))
        return x + self.mlp(self.ln_2(x))


class GPT(nn.Module):
    """nanoGPT's shape: token and position embeddings, n_layer blocks, a final LayerNorm and
    a linear head tied to the token embedding. tokens [N, L] -> (next-token logits [N, L, V],
    the last hidden states [N, L, n_embd], which rlhf.py's value head and reward model read)."""

    def __init__(self, vocab_size, block_size, n_layer=2, n_head=4, n_embd=64):
        super().__init__()
        self.wte, self.wpe = nn.Embedding(vocab_size, n_embd), nn.Embedding(block_size, n_embd)
        self.h = nn.ModuleList([Block(n_embd, n_head) for _ in range(n_layer)])
        self.ln_f = nn.LayerNorm(n_embd)
        self.lm_head = nn.Linear(n_embd, vocab_size, bias=False)
        self.lm_head.weight = self.wte.weight  # weight tying, as GPT-2 and nanoGPT
        self.hidden_size = n_embd
        for name, p in self.named_parameters():  # GPT-2's initialization, as nanoGPT's
            if p.dim() == 2:
                std = 0.02 / math.sqrt(2 * n_layer) if name.endswith("c_proj.weight") else 0.02
                nn.init.normal_(p, 0.0, std)
            elif name.endswith("bias"):
                nn.init.zeros_(p)

    def forward(self, tokens):
        x = self.wte(tokens) + self.wpe(torch.arange(tokens.shape[1], device=tokens.device))
        for block in self.h:
            x = block(x)
        hidden = self.ln_f(x)
        return self.lm_head(hidden), hidden


def frozen_copy(model):
    """A copy that never learns (no gradients, never in an optimizer): the reference."""
    reference = copy.deepcopy(model)
    for p in reference.parameters():
        p.requires_grad_(False)
    return reference.eval()


@torch.no_grad()
def sample(policy, prompt_tokens, max_new_tokens, eos_token_id, pad_token_id, temperature=1.0,
           greedy=False, mask_model=None, top_p=1.0):
    """Generate completions token by token. prompt_tokens [N, P] -> (tokens [N, P + T],
    completion_mask [N, T], log pi_old [N, T] of each sampled token under
    softmax(logits / temperature), the action masks [N, T, V] with a mask_model (NLPO: its
    top-p nucleus, the only tokens that may be sampled), else None). greedy takes the most
    likely token. After its end-of-sequence token a completion is padded."""
    tokens, n = prompt_tokens, len(prompt_tokens)
    logprobs = torch.zeros((n, max_new_tokens), device=tokens.device)
    masks, done = [], torch.zeros(n, dtype=torch.bool, device=tokens.device)
    cache = mask_cache = None  # a Hugging Face model's keys and values (next_token_logits)
    for t in range(max_new_tokens):
        logits, cache = next_token_logits(policy, tokens, cache)
        logits = logits / temperature
        if mask_model is not None:
            mask_logits, mask_cache = next_token_logits(mask_model, tokens, mask_cache)
            masks.append(top_p_mask(mask_logits / temperature, top_p))
            logits = torch.where(masks[-1], logits, MASKED_LOGIT)
        dist = Categorical(logits=logits, validate_args=False)
        token = logits.argmax(-1) if greedy else dist.sample()
        logprobs[:, t] = dist.log_prob(token)
        token = torch.where(done, pad_token_id, token)
        tokens = torch.cat([tokens, token.unsqueeze(1)], dim=1)
        done |= token == eos_token_id
    mask = completion_mask_of(tokens[:, prompt_tokens.shape[1]:], eos_token_id)
    return tokens, mask, logprobs * mask, torch.stack(masks, 1) if masks else None


def next_token_logits(model, tokens, cache=None):
    """(logits [N, V] for the token after tokens [N, L], the cache for the next call). The
    built-in GPT runs the whole sequence again, as nanoGPT's generate does (cache stays None);
    a model with a next_token_logits of its own (grpo.py's Hugging Face one) keeps its keys
    and values and then reads only the newest token."""
    if hasattr(model, "next_token_logits"):
        return model.next_token_logits(tokens, cache)
    return model(tokens)[0][:, -1], None


def complete(policy, prompts, **kwargs):
    """sample (kwargs) on N text prompts: (N texts, then sample's tokens [N, P + T], completion
    mask [N, T], log pi_old [N, T], masks [N, T, V] or None), the policy's tokenizer and sizes."""
    tokenizer, P = policy.tokenizer, policy.prompt_len
    prompt_tokens = encode_prompts(tokenizer, prompts, P, next(policy.parameters()).device)
    out = sample(policy, prompt_tokens, policy.max_new_tokens, tokenizer.eos_token_id,
                 pad_id_of(tokenizer), **kwargs)
    return (decode_completions(tokenizer, out[0][:, P:]), *out)


def completion_logits(model, tokens, prompt_len):
    """The logits that predicted each completion token: tokens [N, P + T] -> [N, T, V]."""
    return model(tokens)[0][:, prompt_len - 1:-1]
# End of plumbing/text.py


def make_vector_env(env_id, num_envs, video_folder=None, held_out=True):
    """N copies of a text task (make_env's, below: gym.make, recording into video_folder), one
    vector environment. held_out: the evaluation's held-out problems, else the training ones."""
    envs = gym.vector.SyncVectorEnv(
        [lambda i=i: make_env(env_id, held_out, video_folder, i) for i in range(num_envs)],
        autoreset_mode=gym.vector.AutoresetMode.SAME_STEP)  # step returns the next prompts
    return gym.wrappers.vector.RecordEpisodeStatistics(envs)


# ---------------------------------------------------------------------------------------
# The supervised warm start
# ---------------------------------------------------------------------------------------
def demonstrations(args, tokenizer, prompt_len, device):
    """The warm start's data: --sft-problems training problems with a worked answer (one
    without is left to the reward), from a task environment seeded seed + 200,000: (encode_texts'
    tokens [N, P + T], their last T as the targets [N, T], and its completion mask [N, T])."""
    env, prompts, answers = gym.make(args.env_id, held_out=False), [], []
    for i in range(100 * args.sft_problems):
        if len(prompts) == args.sft_problems:
            break
        prompt, info = env.reset(seed=(args.seed + 200_000) if i == 0 else None)
        if info["answer"] is not None:
            prompts.append(prompt)
            answers.append(info["answer"])
    env.close()
    tokens, mask = encode_texts(tokenizer, prompts, answers, prompt_len, args.max_new_tokens, device)
    return tokens, tokens[:, prompt_len:], mask


def supervised_step(policy, optimizer, data, batch_size, prompt_len):
    """One Adam step of cross-entropy on a random batch of the demonstrations, over the
    answer's tokens and its <eos> (the mask); returns the loss."""
    tokens, targets, mask = data
    idx = torch.randint(len(tokens), (batch_size,), device=tokens.device)
    logits = completion_logits(policy, tokens[idx], prompt_len)
    nll = F.cross_entropy(logits.transpose(1, 2), targets[idx], reduction="none")
    loss = (nll * mask[idx]).sum() / mask[idx].sum()
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    return loss.item()


def warm_start(args, policy, run):
    """Supervised fine-tuning before GRPO: --sft-steps steps on the demonstrations. Every
    --eval-every answers learned from, run.measure writes a row of held_out.csv (the curve's
    first phase) on --eval-episodes held-out problems: the greedy accuracy, pass@1, pass@k and
    the KL to the policy itself (0); with --sft-stop-at, fewer steps, once the accuracy reaches it."""
    if not args.sft_steps:  # --sft-steps 0: the model as it is, no demonstration needed
        return
    data = demonstrations(args, policy.tokenizer, policy.prompt_len, next(policy.parameters()).device)
    optimizer = torch.optim.Adam(policy.parameters(), lr=args.sft_learning_rate)
    steps = args.sft_steps if len(data[0]) else 0  # none without a worked answer to learn
    for step in range(steps):
        if args.sft_anneal_lr:  # linearly from --sft-learning-rate at the start to 0 at the end
            optimizer.param_groups[0]["lr"] = args.sft_learning_rate * (1 - step / args.sft_steps)
        supervised_step(policy, optimizer, data, args.sft_batch_size, policy.prompt_len)
        seen = (step + 1) * args.sft_batch_size  # answers learned from so far
        crossed_every = args.eval_every and seen % args.eval_every < args.sft_batch_size  # in this step
        if crossed_every and step + 1 < args.sft_steps:  # not the last: train's "start" follows
            curve_step = seen - args.sft_steps * args.sft_batch_size  # < 0: GRPO starts at 0
            row = run.measure(curve_step, "warm start")
            if args.sft_stop_at is not None and row["accuracy"] >= args.sft_stop_at:
                break  # the stopping measure: RL begins here


# ---------------------------------------------------------------------------------------
# Training
# ---------------------------------------------------------------------------------------
def train(args, policy, envs, run, device):
    """The warm start, then GRPO until the budget, --stop-at-return or a non-finite loss.
    run (RunWriter, below the banner) writes the run folder: step(n) prints progress and
    evaluates, episode/update add a CSV row, measure(n, moment) takes the held-out measures,
    reached/non_finite say when to stop."""
    prompt_len, T = policy.prompt_len, args.max_new_tokens
    if args.warm_start:  # another run's warm_start.pt, so that a control starts where GRPO did
        policy.load_state_dict(read_checkpoint(args.warm_start)["policy"])  # {name: state dict}
    else:
        warm_start(args, policy, run)
        if args.save_model:  # for --warm-start: save_checkpoint writes each state dict and the flags
            save_checkpoint(os.path.join(run.path, "warm_start.pt"), {"policy": policy}, args)
    run.measure(0, "start")  # the accuracy RL's gain counts from (no reference yet: KL to itself)
    reference = frozen_copy(policy)  # pi_ref, the warm start frozen
    run.reference = reference  # the held-out measures' KL is to it from now on
    mask_model = frozen_copy(policy) if args.top_p < 1 else None  # NLPO's masking policy
    optimizer = torch.optim.Adam(policy.parameters(), lr=args.learning_rate)
    B, G = args.num_prompts, args.group_size
    clip_high = args.clip_coef if args.clip_coef_high is None else args.clip_coef_high
    budget = args.total_timesteps // (B * G) * (B * G)  # whole batches of B * G completions
    global_step, update = 0, 0  # completions sampled, updates made
    # One seed a group: its G envs draw problems from their np_random alone, so they pose one prompt
    seeds = np.random.default_rng(args.seed).integers(2 ** 31, size=B)
    prompts, _ = envs.reset(seed=[int(s) for s in seeds for _ in range(G)])  # each seed G times in a row
    while global_step < budget:
        update += 1
        if args.anneal_lr:  # linearly from --learning-rate at the start to 0 at the end
            optimizer.param_groups[0]["lr"] = args.learning_rate * (1 - global_step / budget)

        # Sample: a group of G completions of each prompt, scored by the environments.
        kept, rewards_seen, lengths = [], [], []  # kept: each round's kept rows
        for _ in range(args.max_sample_rounds if args.dynamic_sampling else 1):
            check_groups(args, prompts)  # fails if a group's envs posed different prompts
            completions, tokens, completion_mask, logprobs, action_masks = complete(
                policy, prompts, temperature=args.temperature, mask_model=mask_model, top_p=args.top_p)
            prompts, rewards, _, _, info = envs.step(completions)  # and the next prompts
            global_step += B * G
            run.step(global_step)  # --eval-every: evaluations.csv (greedy), held_out.csv (measures)
            for i in np.flatnonzero(info["_episode"]):
                run.episode(global_step, info["episode"]["r"][i], info["episode"]["l"][i])
            rewards = torch.tensor(rewards, dtype=torch.float32, device=device)
            rewards_seen.append(rewards)
            lengths.append(completion_mask.sum(1))
            has_signal = rewards.view(B, G).std(dim=1) > 0  # the groups with two reward values
            keep = has_signal.repeat_interleave(G) if args.dynamic_sampling else slice(None)  # else all
            kept.append([x[keep] for x in (tokens, completion_mask, logprobs, rewards, action_masks)
                         if x is not None])
            if run.reached(args.stop_at_return, global_step):  # None: never; the summary records when
                return
            if sum(len(k[0]) for k in kept) >= B * G or global_step >= budget:
                break
        batch = [torch.cat(x)[:B * G] for x in zip(*kept)]  # each field's rows of all rounds, B * G at most
        tokens, completion_mask, logprobs, rewards, action_masks = batch if args.top_p < 1 else batch + [None]
        if len(tokens) == 0:  # every group of every round had one reward value
            continue

        # Targets: group-relative advantages, and the reference's log-probabilities.
        if args.shuffle_rewards:  # the control: each group's rewards, credited at random
            rewards = shuffle_within_groups(rewards, G)
        advantages = group_advantages(rewards, G, args.scale_rewards, args.baseline)
        with torch.no_grad():  # pi_ref unmasked: the KL is to the warm start itself, not its nucleus
            ref_logprobs = token_logprobs(completion_logits(reference, tokens, prompt_len),
                                         tokens[:, prompt_len:], args.temperature)
        buffer = GroupBuffer(tokens, completion_mask, logprobs, ref_logprobs, rewards, advantages, action_masks)

        # Update: epochs of minibatch steps on the clipped per-token loss with the k3 penalty.
        stats = []
        for epoch in range(args.update_epochs):
            for idx in buffer.minibatches(args.num_minibatches):
                logits = completion_logits(policy, buffer.tokens[idx], prompt_len)
                new_logprobs = token_logprobs(logits, buffer.tokens[idx, prompt_len:],
                                              args.temperature, buffer.masks_of(idx))
                # 0 after <eos>, as the sampler's: NLPO's -1e8 on a <pad> would overflow k3's exp to inf
                new_logprobs = new_logprobs * buffer.completion_mask[idx]
                loss, pg_loss, kl, clip_fraction = grpo_loss(
                    logprobs=new_logprobs, old_logprobs=buffer.old_logprobs[idx],
                    ref_logprobs=buffer.ref_logprobs[idx], advantages=buffer.advantages[idx],
                    completion_mask=buffer.completion_mask[idx], clip_low=args.clip_coef,
                    clip_high=clip_high, beta=args.beta, loss_agg=args.loss_agg, max_new_tokens=T)
                optimizer.zero_grad()
                loss.backward()
                nn.utils.clip_grad_norm_(policy.parameters(), args.max_grad_norm)
                optimizer.step()
                logratio = (new_logprobs - buffer.old_logprobs[idx]).detach()
                approx_kl = logratio.exp() - 1 - logratio  # k3 estimate of KL(pi_old || pi_theta), never negative
                logp = torch.log_softmax(logits.detach() / args.temperature, dim=-1)
                entropy = -(logp.exp() * logp).sum(-1)  # of the policy's tokens (DAPO's measure)
                stats.append((pg_loss.item(), kl.item(), clip_fraction.item(),
                              aggregate(approx_kl, buffer.completion_mask[idx], "token-mean", T).item(),
                              aggregate(entropy, buffer.completion_mask[idx], "token-mean", T).item()))
        if mask_model is not None and update % args.mask_sync_every == 0:
            mask_model.load_state_dict(policy.state_dict())  # NLPO: the mask follows the policy

        if run.non_finite(loss.item(), global_step):  # NaN or inf: stop, marked interrupted
            return
        pg_loss, kl, clipfrac, approx_kl, entropy = np.mean(stats, axis=0)
        run.update(global_step, policy_loss=pg_loss, kl=kl, clipfrac=clipfrac, approx_kl=approx_kl,
                   entropy=entropy, reward_mean=torch.cat(rewards_seen).mean().item(),
                   completion_length=torch.cat(lengths).mean().item(), groups_kept=len(buffer) // G)
    run.measure(global_step, "end")  # as "start": 64 answers a problem at least, for pass_at_k.csv's pass@1..64


def main(args: Args) -> dict:
    """Train GRPO (or evaluate an --eval-checkpoint), write the run folder, return the summary.
    Ctrl-C stops training; the run folder is written, then KeyboardInterrupt goes on up."""
    register_tasks()  # Addition-v0, before any environment is made
    # Functions not defined above are the plumbing's, below the banner. check_args and
    # check_env stop a user's mistake in one line (exit status 2) before anything runs;
    # check_env's check_spaces builds the tokenizer: the task's characters, <pad>, <eos> (or --model's).
    check_args(args)
    args, checkpoint = load_checkpoint(args)  # --eval-checkpoint's model.pt (else None); args take its MODEL_FLAGS
    tokenizer, prompt_len = check_env(args)

    # Set up: the device and seeds, the policy (make_policy), the run folder: its budget whole
    # batches of rollout_steps completions, note the end of its first line.
    device = seed_and_device(args.seed, args.cuda, args.threads)
    policy = make_policy(args, tokenizer, prompt_len).to(device)
    models = {"policy": policy}  # what model.pt holds (the reference is its warm start)
    if checkpoint is not None:
        restore(checkpoint, models, args)  # its state dicts into the models (a misfit fails in one line)
    run = RunWriter(args, device, models, rollout_steps=args.num_prompts * args.group_size,
                    note=f", groups of {args.group_size}, " + (args.model or "built-in model"))

    # train_and_finish runs train() unless --eval-checkpoint, then evaluates, saves, writes.
    envs = None if checkpoint else make_vector_env(
        args.env_id, args.num_prompts * args.group_size, held_out=False)
    return train_and_finish(run, lambda: train(args, policy, envs, run, device), envs)


# ---------------------------------------------------------------------------------------
# Plumbing: checks, run folder, evaluation, checkpoints (not needed to follow the algorithm)
# ---------------------------------------------------------------------------------------
# Stamped from plainrl's plumbing/common.py by its stamp.py: edit it there, not here.
# The plumbing's own imports (the story's are at the top of the file)
import csv
import difflib
import glob
import importlib.util
import json
import math
import os
import random
import re
import signal
import sys
import time
import typing
import warnings
from dataclasses import asdict, dataclass, replace
from typing import Optional

import gymnasium as gym
import numpy as np
import tyro
import torch
from torch.utils.tensorboard import SummaryWriter


@dataclass
class RunFlags:
    """The flags of the run folder that every script has, declared once: Args below adds them
    after the script's own, and --help lists them last."""
    output_dir: str = "runs"
    """where run folders go"""
    save_model: bool = False
    """write the model into the run folder (model.pt; a table's: model.npz)"""
    eval_checkpoint: Optional[str] = None
    """skip training: load this model.pt (or model.npz) and evaluate it"""
    capture_video: bool = False
    """record the evaluation episodes into videos/ in the run folder"""
    tensorboard: bool = True
    """write TensorBoard's event files into the run folder too (tensorboard --logdir runs)"""
    curve: bool = os.environ.get("PLAINRL_CURVE") != "0"
    """draw curve.png, the learning curve, into the run folder at the end of training"""
    track: bool = False
    """sync the run to Weights & Biases as CleanRL does (needs pip install wandb==0.31.0)"""
    wandb_project_name: str = "plainrl"
    """the Weights & Biases project of --track"""
    wandb_entity: Optional[str] = None
    """the Weights & Biases team or user of --track (None: your default entity)"""


@dataclass
class Args(RunFlags, Args):  # the script's Args first, RunFlags' after: the one Args all use
    pass


def family(obs_shape, continuous):
    """The environment's family, which picks a script's preset: "image" for an observation of
    three axes (height, width, channels), else "continuous" for Box actions, else "discrete"."""
    return "image" if len(obs_shape) == 3 else "continuous" if continuous else "discrete"


def fill_preset(args, family):
    """args with --preset the family unless it is given, and every flag left at None taken
    from PRESETS[preset] = (its source, {flag: value}): a flag given on the command line wins."""
    preset = args.preset or family
    flags = PRESETS[preset][1]
    return replace(args, preset=preset,
                   **{name: value for name, value in flags.items() if getattr(args, name) is None})


class UsageError(Exception):
    """Bad input: reported as one line on stderr with exit status 2, before training."""


def fail(message):
    raise UsageError(message)


def parse_args():
    """tyro.cli(Args), with a mistake on the command line (an unknown flag, a missing value,
    a value of the wrong type or not among the choices) as one whole line at any terminal
    width: tyro hands the mistake over as data through its parse-error hook (tyro._errors,
    marked experimental, which is one reason requirements.txt pins tyro), and usage_error
    words it. --help prints as tyro writes it."""
    with tyro._errors.on_parse_error(usage_error):
        return tyro.cli(Args)


def usage_error(event):
    """Raise UsageError with one line for a tyro parse error: the flag, what it takes, and
    what to write instead (the closest flags to an unknown one; 100000 for 1e5)."""
    types = typing.get_type_hints(Args)
    flags = [f"--{name.replace('_', '-')}" for name in types]
    flags += [f"--no-{name.replace('_', '-')}" for name, kind in types.items()
              if kind is bool and not name.startswith("no_")]  # not --no-no-mask
    help_hint = f"(python {SCRIPT} --help lists the flags)"
    if isinstance(event, tyro._errors.UnrecognizedArgs):
        close = difflib.get_close_matches(event.tokens[0].partition("=")[0], flags, n=2)
        also = f"; did you mean {' or '.join(close)}?" if close else ""
        fail(f"unrecognized options: {', '.join(event.tokens)}{also} {help_hint}")
    if getattr(event, "argument", None) is None:
        fail(f"cannot read the command line ({type(event).__name__}) {help_hint}")
    flag = event.argument.display_name().split("/")[0]
    if isinstance(event, tyro._errors.InvalidChoice):  # in the order the Literal gives them
        kind = types.get(flag[2:].replace("-", "_"))
        literal = [a for a in (kind, *typing.get_args(kind))
                   if typing.get_origin(a) is typing.Literal]
        choices = [str(c) for c in typing.get_args(literal[0])] if literal else event.choices
        fail(f"{flag} takes {' or '.join(choices)}, not {event.value!r} {help_hint}")
    words = sys.argv[1:]
    starts = [i for i, w in enumerate(words) if w.partition("=")[0] == flag]
    if not starts or isinstance(event, tyro._errors.BadValue):
        fail(f"{flag} needs a value {help_hint}")
    word, rest = words[starts[-1]], words[starts[-1] + 1:] + ["--"]  # the last time it is given
    given = ([word.partition("=")[2]] if "=" in word else  # a list flag takes several values
             rest[:next(j for j, w in enumerate(rest) if w.startswith("--"))]) or [""]
    kind = types[flag[2:].replace("-", "_")]
    whole = int in (kind, *typing.get_args(kind))

    def reads(value):  # as the flag's type would: int("2.5") fails, float("2.5") does not
        try:
            return (int if whole else float)(value) is not None
        except ValueError:
            return False
    wrong = next((value for value in given if not reads(value)), given[-1])
    try:
        instead = f": write {int(float(wrong))}" if whole and float(wrong).is_integer() else ""
    except ValueError:  # not a number at all
        instead = ""
    fail(f"{flag} takes {'a whole number' if whole else 'a number'}, not {wrong!r}"
         f"{instead} {help_hint}")


def check_args(args):
    """Everything a user can get wrong in the flags, before training: the algorithm's own
    checks (check_flags), then those of the flags every script has. A value the line names
    that the preset gave is said to be the preset's."""
    try:
        check_flags(args)
    except UsageError as e:
        preset = PRESETS[args.preset][1] if getattr(args, "preset", None) else {}
        named = [f"--{k.replace('_', '-')} {v}" for k, v in preset.items()
                 if f"--{k.replace('_', '-')} {v}" in str(e)]
        if not named:
            raise
        fail(f"{e} ({' and '.join(named)}: the {args.preset} preset's; a flag given overrides it)")
    if args.total_timesteps <= 0:
        fail(f"--total-timesteps must be positive, got {args.total_timesteps}")
    if args.eval_episodes < 0:
        fail(f"--eval-episodes must be 0 or more, got {args.eval_episodes}")
    if args.eval_every < 0:
        fail(f"--eval-every must be 0 (evaluate only after training) or more, got {args.eval_every}")
    if args.eval_every and not args.eval_episodes:
        fail("--eval-every needs at least one evaluation episode; pass --eval-episodes 1 or more, "
             "or --eval-every 0")
    if args.capture_video and not args.eval_episodes:
        fail("--capture-video records the evaluation episodes, and --eval-episodes 0 has none; "
             "pass --eval-episodes 1 or more")
    for flag, needed, package in (("capture_video", "moviepy", "moviepy==2.2.1"),
                                  ("track", "wandb", "wandb==0.31.0")):
        if getattr(args, flag) and importlib.util.find_spec(needed) is None:
            fail(f"--{flag.replace('_', '-')} needs {needed}: pip install {package}")
    if args.track and not args.tensorboard:
        fail("--track syncs TensorBoard's event files to Weights & Biases; drop --no-tensorboard")


def check_env(args, make=gym.make):
    """Make the environment once (gym.make imports a module:EnvId id's module itself), hand
    its spaces to check_spaces and return what that returns; with --capture-video, render a
    frame, so that a machine without a display says so now, not after training."""
    env_id = args.env_id
    if env_id.startswith(("ALE/", "MinAtar/")) and make is gym.make:  # ids their packages
        # register, which the scripts that learn from images import (their make_game)
        pixels = ("ppo.py and dqn.py" if env_id.startswith("ALE/")
                  else "ppo.py, dqn.py, pqn.py and impala.py")
        fail(f"{env_id} is a game of images ({pixels} learn from them); {SCRIPT} does not")
    try:
        env = make(env_id)
        obs_space, action_space = env.observation_space, env.action_space
        env.close()
    except UsageError:  # a make of the script's own said it already (a package to install)
        raise
    except Exception as e:  # Gymnasium's own line: the closest id to an unknown one, the
        # extra to install (pinned here to this Gymnasium); or a module of the user's that fails
        message = re.sub(r'"gymnasium\[(\w+)\]"', rf'"gymnasium[\1]=={gym.__version__}"', str(e))
        fail(f"cannot make {env_id}: {type(e).__name__}: {(message.splitlines() or [''])[0]}")
    spaces = check_spaces(args, obs_space, action_space)
    if args.capture_video:
        try:
            with warnings.catch_warnings():  # the line below says it
                warnings.simplefilter("ignore")
                os.environ.setdefault("SDL_VIDEODRIVER", "dummy")  # frames only, no window
                env = make(env_id, render_mode="rgb_array")
                env.reset(seed=0)
                env.render()
                env.close()
        except Exception as e:
            fail(f"cannot record videos of {env_id} ({type(e).__name__}: "
                 f"{(str(e).splitlines() or [''])[0]}); for MuJoCo on a machine without a "
                 "display set MUJOCO_GL=egl")
    return spaces


def seed_and_device(seed, cuda, threads=1, image=False):
    """Seed Python's, NumPy's and torch's random generators (the environments are seeded by
    their reset) and pick the device, printing which and why: --cuda the GPU where one is
    present, --no-cuda the CPU, and neither (cuda None) the GPU for an image's network, the
    CPU for a flat observation's: its small MLP trains faster on one CPU thread than on a
    GPU, measured for every script (results.md, "On a GPU"). On the CPU, `threads` threads."""
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)
    present = torch.cuda.is_available()
    device = torch.device("cuda" if present and (image if cuda is None else cuda) else "cpu")
    if device.type == "cpu":
        torch.set_num_threads(threads)
    if cuda is not None:
        why = "--cuda" if cuda else "--no-cuda"
        why += ", but no GPU is present" if cuda and not present else ""
    elif image:
        why = ("an image's convolutional network goes to the GPU; --no-cuda for the CPU"
               if present else "an image's network, but no GPU is present")
    else:
        why = ("a flat observation's small network trains faster on one CPU thread than on a "
               "GPU" + ("; --cuda for the GPU" if present else ""))
    print(f"{SCRIPT}: device {device}: {why}")
    return device


EVAL_MAX_STEPS = 27_000
"""an evaluation episode still running after this many steps is cut there (its return so
far counts): a greedy policy can balance or walk in a circle forever in an environment
without a time limit. 27,000 steps are ALE's own end of an Atari game (108,000 frames)."""


def evaluate(args, models, video_folder=None):
    """Greedy returns of --eval-episodes episodes, one per environment of a vector env, all
    at once, seeded seed + 100,000 (every evaluation plays the same starts). The actions
    come from the script's greedy_policy; with --eval-epsilon (where a script has it), a
    uniformly random one instead with that probability, from a generator of the
    evaluation's own. A line every 2 seconds says how far it is."""
    episodes, seed = args.eval_episodes, args.seed + 100_000
    flags = {flag: getattr(args, flag) for flag in globals().get("ENV_FLAGS", ())}
    envs = make_vector_env(args.env_id, episodes, video_folder=video_folder, **flags)
    act, epsilon = greedy_policy(models, envs), getattr(args, "eval_epsilon", 0.0)
    obs, info = envs.reset(seed=seed)
    rng = np.random.default_rng(seed)  # epsilon's draws; training's streams stay untouched
    returns, steps, last_print = np.full(episodes, np.nan), 0, time.time()
    while np.isnan(returns).any() and steps < EVAL_MAX_STEPS:
        actions = act(obs, info)
        if epsilon:  # Discrete actions only (check_spaces)
            explore = rng.random(episodes) < epsilon
            actions = np.where(explore, rng.integers(envs.single_action_space.n, size=episodes),
                               actions)
        obs, _, _, _, info = envs.step(actions)
        if "_episode" in info:
            first = info["_episode"] & np.isnan(returns)
            returns[first] = info["episode"]["r"][first]
        steps += 1
        if time.time() - last_print >= 2.0:
            last_print = time.time()
            print(f"{SCRIPT}: evaluating, {episodes - np.isnan(returns).sum()} of {episodes} "
                  f"episodes done, {steps:,} steps")
    if np.isnan(returns).any():
        print(f"{SCRIPT}: evaluation episodes cut at {EVAL_MAX_STEPS:,} steps; give "
              f"{args.env_id} a time limit (max_episode_steps)")
        returns = np.where(np.isnan(returns), envs.episode_returns, returns)
    envs.close()
    return returns


def goal(args):
    """(threshold, window, holds_on, source, budget): what a run is judged on. The script's
    GOALS for the environment (its benchmark task's goal, the README row's, for the task's
    budget of steps), else Gymnasium's reward_threshold (CartPole-v1's 475) over the last 20
    training returns, at any budget; --stop-at-return gives the threshold in place of either,
    at any budget (None). holds_on "train": the mean of the last `window` training returns at
    the end; "eval": the final greedy evaluation; "gain": the final greedy evaluation less the
    one where the run's learning began, summary's start_return (grpo.py's warm start: what
    reinforcement learning added)."""
    name = args.env_id.rpartition(":")[2]
    threshold, window, holds_on, budget = globals().get("GOALS", {}).get(
        name, (None, 20, "train", None))
    source = "GOALS" if threshold is not None else "reward_threshold"
    if threshold is None:
        threshold = getattr(gym.registry.get(name), "reward_threshold", None)
    if args.stop_at_return is not None:
        threshold, source, budget = args.stop_at_return, "--stop-at-return", None
    return threshold, window, holds_on, source, budget


class RunWriter:
    """The run folder (the files the docstring at the top lists): config.json at once, the CSV
    files row by row (flushed, so an interrupted run keeps them) and TensorBoard's events
    from the same rows, a progress line every 2 seconds, the evaluations of --eval-every
    with best_model; finish() writes the rest. `models` names what a checkpoint holds (each
    with state_dict and load_state_dict). Training that runs whole rollouts of
    `rollout_steps` rounds the budget down to them, said at the start."""

    def __init__(self, args, device, models, rollout_steps=1, note=""):
        name = "__".join([args.env_id.replace("/", "-").replace(":", "-"), args.exp_name,
                          str(args.seed), str(int(time.time()))])
        self.path, suffix = os.path.join(args.output_dir, name), 1
        while os.path.exists(self.path):  # a run with the same flags in the same second
            suffix += 1
            self.path = os.path.join(args.output_dir, f"{name}-{suffix}")
        versions = {"gymnasium": gym.__version__, "numpy": np.__version__,
                    "python": sys.version.split()[0]}
        versions["torch"] = torch.__version__
        config = {**asdict(args), "device": str(device), "versions": versions}
        if args.track:  # before the folder and the event files (it syncs those made after it)
            start_tracking(args, os.path.basename(self.path), config)
        try:
            os.makedirs(self.path)
        except OSError as e:
            fail(f"cannot create the run folder {self.path}: {e.strerror}")
        with open(os.path.join(self.path, "config.json"), "w") as f:
            json.dump(config, f, indent=2)
        self.tensorboard = None
        if args.tensorboard:  # TensorBoard's event files get each CSV row too (write_row)
            self.tensorboard = TensorBoardWriter(self.path)
            self.tensorboard.add_text("config", "|flag|value|\n|-|-|\n" + "\n".join(
                f"|{key}|{value}|" for key, value in config.items()))
        threshold, self.window, holds_on, self.source, budget = goal(args)
        self.summary = dict.fromkeys(SUMMARY_KEYS) | {
            "solved_threshold": None if args.eval_checkpoint else threshold,
            "solved_window": self.window, "holds_on": holds_on, "goal_budget": budget,
            "algorithm": args.exp_name, "env_id": args.env_id, "seed": args.seed,
            "global_steps": 0, "eval_episodes": args.eval_episodes, "interrupted": False}
        self.args, self.device, self.models = args, device, models
        self.budget = args.total_timesteps // rollout_steps * rollout_steps
        self.files, self.returns, self.ends, self.evaluations = {}, [], [], []
        self.write_row("episodes.csv")  # its header now: a run with no episode has the file
        self.start = self.last_print = time.time()
        self.first_print, self.last_step = None, 0  # (step, time) of the first progress line
        print(f"{SCRIPT}: {args.env_id}, seed {args.seed}{note}")  # after the device's line
        if getattr(args, "preset", None):  # the settings the environment's family picked
            others = " or ".join(f"--preset {name}" for name in PRESETS if name != args.preset)
            print(f"{SCRIPT}: the {args.preset} preset, {PRESETS[args.preset][0]}; {others} "
                  "for another, a flag for one setting")
        if self.budget != args.total_timesteps and args.eval_checkpoint is None:
            print(f"{SCRIPT}: training runs {self.budget:,} of --total-timesteps "
                  f"{args.total_timesteps:,}: whole rollouts of {rollout_steps:,} steps")

    def elapsed(self):
        return time.time() - self.start

    def write_row(self, filename, **row):
        """Append a row to a CSV file of the run folder, made with a header at first use
        (episodes.csv's columns are fixed; no row writes the header alone), and its values
        to TensorBoard at the row's step and moment."""
        if filename not in self.files:
            f = open(os.path.join(self.path, filename), "w", newline="")
            fields = EPISODE_FIELDS if filename == "episodes.csv" else list(row)
            self.files[filename] = (f, csv.DictWriter(f, fieldnames=fields))
            self.files[filename][1].writeheader()
        f, writer = self.files[filename]
        if row:
            writer.writerow(row)
        if row and self.tensorboard:
            for column, value in row.items():
                if column not in ("global_step", "wall_time") and value != "":  # "": no value
                    name = {**COMMON_NAMES, **TENSORBOARD_NAMES}.get(column, f"charts/{column}")
                    self.tensorboard.add_scalar(name, value, row["global_step"],
                                                self.start + row["wall_time"])
            self.tensorboard.flush()  # as the CSV file: a run that crashes keeps its rows
        f.flush()

    def episode(self, global_step, episode_return, episode_length):
        self.summary["global_steps"] = max(self.summary["global_steps"], global_step)
        self.returns.append(float(episode_return))
        self.ends.append(global_step)  # where it ended, for curve.png
        self.write_row("episodes.csv", global_step=global_step, wall_time=round(self.elapsed(), 4),
                       episode_return=float(episode_return), episode_length=int(episode_length))
        if self.summary["holds_on"] != "gain":  # a gain is measured once, at the end
            self.reached(self.summary["solved_threshold"], global_step)  # records when

    def update(self, global_step, **diagnostics):
        wall_time = self.elapsed()
        self.write_row("updates.csv", global_step=global_step, wall_time=round(wall_time, 4),
                       sps=int(global_step / wall_time), **diagnostics)
        self.measure(global_step, "update")

    def step(self, global_step):
        """After each environment step: record the step count (should Ctrl-C stop the run),
        evaluate each time global_step crosses a multiple of --eval-every, and print the
        progress line every 2 seconds, its speed measured from the first line on (the first
        seconds hold the start-up), or from the first after --learning-starts where a script
        has it (random steps run far faster)."""
        every, previous, self.last_step = self.args.eval_every, self.last_step, global_step
        self.summary["global_steps"] = max(self.summary["global_steps"], global_step)
        if every and global_step // every > previous // every:
            self.evaluation(global_step)
        now = time.time()
        if now - self.last_print >= 2.0:
            first, self.last_print = self.first_print or (global_step, now), now
            sps = (global_step - first[0]) / (now - first[1]) if self.first_print else None
            print(progress_line(global_step, self.budget, sps, self.recent_return()))
            if global_step >= getattr(self.args, "learning_starts", 0):
                self.first_print = first

    def evaluation(self, global_step):
        """Evaluate the policy as it is now on environments of its own (the training ones, the
        observation statistics and the random streams are untouched), append the row to
        evaluations.csv and, with --save-model, keep the best model so far (best_model)."""
        wall_time = self.elapsed()
        returns = evaluate(self.args, self.models)
        mean, std = float(returns.mean()), float(returns.std())
        self.write_row("evaluations.csv", global_step=global_step, wall_time=round(wall_time, 4),
                       eval_return_mean=mean, eval_return_std=std)
        if self.args.save_model and mean > max((m for _, m, _ in self.evaluations), default=-math.inf):
            save_checkpoint(os.path.join(self.path, "best_" + CHECKPOINT), self.models, self.args)
        self.evaluations.append((global_step, mean, std))
        self.measure(global_step, "evaluation")

    def measure(self, global_step, moment):
        """The script's own measures at a moment of training, where it has the optional hook
        measure(run, global_step, moment): its answer (None without the hook, or where the
        hook measures nothing at that moment)."""
        return measure(self, global_step, moment) if "measure" in globals() else None

    def non_finite(self, loss, global_step):
        """True, after saying so and marking the run interrupted, when the loss is NaN or inf."""
        if math.isfinite(loss):
            return False
        print(f"{SCRIPT}: the loss became non-finite (NaN or inf) at step {global_step}; "
              "stopping (try a lower --learning-rate)")
        self.summary["interrupted"] = True
        return True

    def recent_return(self, window=20):
        """The mean of the last `window` training episode returns (None before the first)."""
        return float(np.mean(self.returns[-window:])) if self.returns else None

    def reached(self, threshold, global_step):
        """True once the mean of the last solved_window returns reaches threshold; records the
        first step it did (each episode asks it of solved_threshold, train of --stop-at-return)."""
        if (threshold is None or len(self.returns) < self.window
                or self.recent_return(self.window) < threshold):
            return False
        if self.summary["solved_at_step"] is None:  # the first time only
            self.summary["solved_at_step"] = global_step
            self.summary["solved_at_time_s"] = round(self.elapsed(), 3)
        return True

    def close(self):
        for f, _ in self.files.values():
            f.close()
        if self.tensorboard:
            self.tensorboard.close()


TensorBoardWriter = SummaryWriter
CHECKPOINT = "model.pt"


EPISODE_FIELDS = ("global_step", "wall_time", "episode_return", "episode_length")
SUMMARY_KEYS = ("algorithm", "env_id", "seed", "global_steps", "wall_time_s",
                "train_return_last20", "eval_return_mean", "eval_return_std", "eval_episodes",
                "solved_threshold", "solved_window", "holds_on", "goal_budget", "start_return",
                "end_return", "holds",
                "solved_at_step", "solved_at_time_s", "interrupted")
# The columns every script writes, as TensorBoard's scalars under CleanRL's names (each point
# at the row's global_step and wall_time); a column in neither these nor the script's own
# TENSORBOARD_NAMES goes under charts/.
COMMON_NAMES = {"episode_return": "charts/episodic_return", "sps": "charts/SPS",
                "episode_length": "charts/episodic_length", "eval_return_mean":
                "eval/episodic_return", "eval_return_std": "eval/episodic_return_std"}


def progress_line(global_step, total_steps, sps, recent_return):
    """The console's progress: the step out of the budget, the percentage, steps per second,
    the time left at that speed (h:mm:ss) and the mean of the last 20 training returns; the
    speed and the time left read "-" while sps is None (the first line: nothing measured).

        ETA = max(total_steps - global_step, 0) / sps
    """
    if sps:
        minutes, seconds = divmod(round(max(total_steps - global_step, 0) / sps), 60)
        speed = f"{sps:,.0f} sps | ETA {minutes // 60}:{minutes % 60:02}:{seconds:02}"
    else:
        speed = "- sps | ETA -"
    recent = "n/a" if recent_return is None else f"{recent_return:.1f}"
    return (f"step {global_step:,}/{total_steps:,} ({100 * global_step / total_steps:.0f}%) | "
            f"{speed} | return (last 20) {recent}")


def save_checkpoint(path, models, args):
    """model.pt: each model's state dict under its name, and the flags."""
    torch.save({**{name: m.state_dict() for name, m in models.items()}, "args": asdict(args)},
               path)


def read_checkpoint(path):
    """A model.pt's dict, loaded safely (weights_only: tensors and plain data, never code)."""
    return torch.load(path, map_location="cpu", weights_only=True)


def load_checkpoint(args):
    """(args, checkpoint) for --eval-checkpoint: the file (or a run folder's), read safely and
    checked to be this script's and made for --env-id, and the flags that shape the networks
    (MODEL_FLAGS) taken from it; (args, None) without the flag."""
    path = args.eval_checkpoint
    if path is None:
        return args, None
    if os.path.isdir(path):  # a run folder stands for its checkpoint
        path = os.path.join(path, CHECKPOINT)
        if not os.path.isfile(path):
            fail(f"run folder {os.path.dirname(path)} has no {CHECKPOINT}; train with --save-model")
    if not os.path.isfile(path):
        fail(f"checkpoint {path} does not exist")
    try:
        checkpoint = read_checkpoint(path)
        flags = {name: checkpoint["args"][name] for name in ("env_id", *MODEL_FLAGS)}
    except Exception as e:
        fail(f"checkpoint {path} is not a {SCRIPT} {CHECKPOINT} ({type(e).__name__}); "
             "make one with --save-model")
    if flags["env_id"] != args.env_id:
        fail(f"checkpoint {path} was made for {flags['env_id']}, not {args.env_id}; "
             f"pass --env-id {flags['env_id']}")
    return replace(args, **flags), checkpoint


def restore(checkpoint, models, args):
    """Put a checkpoint's state into each model."""
    try:
        for name, model in models.items():
            model.load_state_dict(checkpoint[name])
    except Exception as e:
        fail(f"checkpoint {args.eval_checkpoint} does not fit {args.env_id}'s networks: "
             f"{type(e).__name__}: {(str(e).splitlines() or [''])[0]}")


def train_and_finish(run, train, envs=None):
    """Train (unless --eval-checkpoint gave a model) and finish the run. Ctrl-C during
    training stops it: the run folder is written, then KeyboardInterrupt goes on up (cli
    ends the process as an interrupted one); the environments are closed either way."""
    interrupted = False
    if run.args.eval_checkpoint is None:
        try:
            train()
        except KeyboardInterrupt:
            print(f"{SCRIPT}: interrupted; writing what the run has so far")
            interrupted = run.summary["interrupted"] = True
        finally:
            if envs is not None:
                envs.close()
    summary = finish(run.args, run, trained=run.args.eval_checkpoint is None)
    if interrupted:
        raise KeyboardInterrupt
    return summary


def finish(args, run, trained=True):
    """Write the run first (the model if asked, summary.json), then evaluate greedily and
    write summary.json again with the evaluation, so that Ctrl-C during a long evaluation
    keeps the run (without the evaluation); print the closing line, ending with plot.py's
    command for the curve where a training episode ended. An interrupted run skips the
    evaluation. summary.json's holds: whether the run's end (judge) is at or above
    solved_threshold (a run that reached it once can end below it)."""
    summary = run.summary
    summary["train_return_last20"] = run.recent_return()
    threshold, window = summary["solved_threshold"], summary["solved_window"]
    judge(run)
    summary["wall_time_s"] = round(run.elapsed(), 3)
    episodic = globals().get("trains_on_episodes", lambda args: True)(args)  # rlhf.py's DPO: no
    if trained and episodic and not run.returns and not summary["interrupted"]:
        print(f"{SCRIPT}: no training episode ended in {summary['global_steps']:,} steps; if "
              f"{args.env_id} has no time limit, register it with max_episode_steps")
    if args.save_model and trained:
        save_checkpoint(os.path.join(run.path, CHECKPOINT), run.models, args)
    run.close()
    write_summary(run)
    if args.eval_episodes and not summary["interrupted"]:
        print(f"{SCRIPT}: final evaluation, {args.eval_episodes:,} "
              f"episode{'s' * (args.eval_episodes > 1)}; the run is written and Ctrl-C keeps it")
        try:
            returns = evaluate(args, run.models, os.path.join(run.path, "videos")
                               if args.capture_video else None)
        except KeyboardInterrupt:
            print(f"{SCRIPT}: final evaluation interrupted; {run.path} keeps the run without it")
            draw_curve(run)
            finish_tracking(args, run, exit_code=130)
            raise
        summary["eval_return_mean"] = float(returns.mean())
        summary["eval_return_std"] = float(returns.std())
        judge(run)
        write_summary(run)
    curve = draw_curve(run)
    closing = [f"{SCRIPT}: run folder {run.path}", f"global_steps {summary['global_steps']:,}"]
    for key in ("train_return_last20", "eval_return_mean"):
        closing.append(f"{key} " + ("-" if summary[key] is None else f"{summary[key]:.2f}"))
    if threshold is not None:  # --stop-at-return, else GOALS's, else the environment's
        if summary["end_return"] is not None:  # the end first: what a user gets from the run
            end = ("the final evaluation" if summary["holds_on"] == "eval" else
                   f"the gain over the start ({summary['start_return']:.2f} -> "
                   f"{summary['eval_return_mean']:.2f})" if summary["holds_on"] == "gain"
                   else f"the last-{window} mean at the end")
            value = f"{summary['end_return']:{'+' if summary['holds_on'] == 'gain' else ''}.2f}"
        if summary["holds"] is not None:
            closing.append(f"{'holds' if summary['holds'] else 'does not hold'}: {end} {value} "
                           f"{'>=' if summary['holds'] else '<'} {threshold:g}")
        elif short_of_budget(run) and summary["end_return"] is not None:
            closing.append(f"not judged, {args.total_timesteps:,} steps where its goal "
                           f"{threshold:g} is for {summary['goal_budget']:,}: {end} {value}")
        lost = " (lost by the end)" if summary["solved_at_step"] and summary["holds"] is False else ""
        if summary["holds_on"] != "gain":  # a gain has no training mean to reach it first
            closing.append(f"solved_at_step {summary['solved_at_step'] or 'not reached'} "
                           f"(last-{window} mean >= {run.source} {threshold:g}){lost}")
    elif getattr(args, "preset", None):  # no goal knows the environment: what ran on it
        closing.append(f"no goal for {args.env_id}; the {args.preset} preset ran")
    if curve:
        closing.append(f"curve {curve}")
    elif run.returns:  # plot.py draws the training episodes, an unfinished run's on request
        unfinished = "--include-unfinished " if summary["interrupted"] else ""
        closing.append(f"curve: python plot.py {unfinished}{run.path}")
    print(" | ".join(closing))
    finish_tracking(args, run)
    return summary


def judge(run):
    """summary.json's end_return, the figure the run is judged on where it ends (not where it
    first got: a run can reach its threshold and lose it): the mean of the last solved_window
    training returns (holds_on "train"), the final evaluation's mean ("eval") or that less
    start_return ("gain"); and holds, end_return >= solved_threshold, null without either, for
    a run stopped before its budget, or for one given fewer steps than its goal is for
    (short_of_budget)."""
    summary, window = run.summary, run.window
    summary["end_return"] = (summary["eval_return_mean"] if summary["holds_on"] == "eval" else
                             None if summary["holds_on"] == "gain" else
                             run.recent_return(window) if len(run.returns) >= window else None)
    if summary["holds_on"] == "gain" and None not in (summary["eval_return_mean"],
                                                      summary["start_return"]):
        summary["end_return"] = summary["eval_return_mean"] - summary["start_return"]
    summary["holds"] = (None if None in (summary["solved_threshold"], summary["end_return"])
                        or summary["interrupted"] or short_of_budget(run) else
                        summary["end_return"] >= summary["solved_threshold"])


def short_of_budget(run):
    """Whether the run was given fewer steps (--total-timesteps) than its goal is for: a goal
    at 1M steps does not judge a run of 300k."""
    budget = run.summary["goal_budget"]
    return budget is not None and run.args.total_timesteps < budget


def rolling_means(returns, window=20):
    """The mean of the last `window` returns where each episode ended (fewer at the start):
    the curve of summary.json's train_return_last20. returns [n] -> means [n], from prefix
    sums S_k = R_0 + ... + R_{k-1}:

        m_i = (S_{i+1} - S_{s_i}) / (i + 1 - s_i),   s_i = max(0, i + 1 - window)
    """
    sums = np.cumsum(np.concatenate([[0.0], returns]))
    i = np.arange(1, len(returns) + 1)
    start = np.maximum(i - window, 0)
    return (sums[i] - sums[start]) / (i - start)


def draw_curve(run):
    """--curve: curve.png in the run folder, the run's learning curve, after training (also
    one stopped by Ctrl-C): each training episode's return (dots), the mean of the last
    solved_window, the greedy evaluations (--eval-every's and the final one, mean and std)
    and solved_threshold, of the measure holds_on names. No pyplot: a Figure of its own, so a notebook's or a caller's
    figures are left alone. Returns the file's path, None where it draws nothing (the flag
    off, or neither an episode nor an evaluation to draw). A script with a curve of its own
    (draw_own_curve: grpo.py's phases) draws that instead."""
    if "draw_own_curve" in globals():
        return draw_own_curve(run) if run.args.curve else None
    summary = run.summary
    evaluations = list(run.evaluations)
    if summary["eval_return_mean"] is not None:
        evaluations.append((summary["global_steps"], summary["eval_return_mean"],
                            summary["eval_return_std"]))
    if not run.args.curve or not (run.returns or evaluations):
        return None
    from matplotlib.figure import Figure  # only a run that draws pays for the import
    fig = Figure(figsize=(7, 4.2), layout="constrained")
    ax = fig.add_subplot()
    if run.returns:
        ax.plot(run.ends, run.returns, ".", ms=3, alpha=0.3, color="C0", label="episode return")
        ax.plot(run.ends, rolling_means(run.returns, run.window), color="C0",
                label=f"mean of the last {run.window}")
    if evaluations:
        steps, means, stds = zip(*evaluations)
        ax.errorbar(steps, means, yerr=stds, fmt="o", color="C1", capsize=3,
                    label="greedy evaluation (mean, std)")
    if summary["solved_threshold"] is not None:
        on = "evaluation" if summary["holds_on"] == "eval" else f"last-{run.window} mean"
        ax.axhline(summary["solved_threshold"], ls="--", color="gray",
                   label=f"threshold {summary['solved_threshold']:g} ({on})")
    stopped = " (interrupted)" if summary["interrupted"] else ""
    ax.set(xlabel="environment steps", ylabel="return",
           title=f"{SCRIPT} on {summary['env_id']}, seed {summary['seed']}{stopped}")
    ax.grid(alpha=0.3)
    ax.legend(loc="best", fontsize="small")
    path = os.path.join(run.path, "curve.png")
    fig.savefig(path, dpi=100)
    return path


def write_summary(run):
    """summary.json: the run's summary as it stands."""
    with open(os.path.join(run.path, "summary.json"), "w") as f:
        json.dump(run.summary, f, indent=2)


def start_tracking(args, name, config):
    """--track: a Weights & Biases run as CleanRL starts one, which syncs the TensorBoard event
    files written after it; one that cannot start (no API key) is bad input."""
    import wandb  # not a requirement: check_args found it
    try:
        wandb.init(project=args.wandb_project_name, entity=args.wandb_entity, name=name,
                   config=config, sync_tensorboard=True)
    except wandb.errors.Error as e:
        fail(f"--track: {' '.join(str(e).split())} Or set WANDB_MODE=offline: the run stays "
             "here until `wandb sync` uploads it")


def finish_tracking(args, run, exit_code=0):
    """--track: summary.json and the evaluation's videos to the Weights & Biases run, which
    then ends (exit_code 130: Ctrl-C during the final evaluation)."""
    if not args.track:
        return
    import wandb  # not a requirement: check_args found it
    wandb.run.summary.update(run.summary)
    videos = sorted(glob.glob(os.path.join(run.path, "videos", "*.mp4")))
    if videos:
        wandb.log({"videos": [wandb.Video(video) for video in videos]})
    wandb.finish(exit_code=exit_code)


def cli():
    """main(flags) from the command line. Bad input: one line, exit status 2. Ctrl-C: the
    run folder written, the process dies of SIGINT (130), so a shell loop of runs stops too."""
    try:
        main(parse_args())
    except UsageError as e:
        print(f"{SCRIPT}: error: {e}", file=sys.stderr)
        sys.exit(2)
    except KeyboardInterrupt:
        signal.signal(signal.SIGINT, signal.SIG_DFL)
        os.kill(os.getpid(), signal.SIGINT)
# End of plumbing/common.py


# Stamped from plainrl's plumbing/tokens.py by its stamp.py: edit it there, not here.
class Tokenizer:
    """The built-in model's tokenizer: the special tokens first (the script names its own
    where it builds one), then one token per item of the task's vocabulary, behind the few
    methods of a Hugging Face tokenizer that the script calls. A vocabulary of characters
    (grpo.py's digits) reads a text a character a token; one of words (rlhf.py's) reads words
    separated by single spaces. Without "<pad>" it pads with "<eos>"."""

    def __init__(self, vocabulary, special_tokens):
        self.tokens = [*special_tokens, *sorted(vocabulary)]
        self.ids = {c: i for i, c in enumerate(self.tokens)}
        self.pad_token_id, self.eos_token_id = self.ids.get("<pad>"), self.ids["<eos>"]
        self.separator = " " if any(len(item) > 1 for item in vocabulary) else ""

    def __len__(self):
        return len(self.tokens)

    def encode(self, text, add_special_tokens=False):
        return [self.ids[c] for c in (text.split(" ") if self.separator and text else text)]

    def decode(self, ids):
        return self.separator.join(self.tokens[i] for i in ids)


def pad_id_of(tokenizer):
    """The padding token: the tokenizer's own, else its end-of-sequence token (GPT-2's)."""
    return tokenizer.eos_token_id if tokenizer.pad_token_id is None else tokenizer.pad_token_id


def encode_prompts(tokenizer, prompts, prompt_len, device):
    """Prompts (strings) -> tokens [N, prompt_len], left-padded so that every completion
    starts at the same position."""
    pad, rows = pad_id_of(tokenizer), []
    for prompt in prompts:
        ids = tokenizer.encode(prompt, add_special_tokens=False)
        if len(ids) > prompt_len:
            fail(f"the prompt {prompt!r} takes {len(ids)} tokens, more than the task's "
                 f"prompts' {prompt_len}; use a tokenizer of one token a character or word")
        rows.append([pad] * (prompt_len - len(ids)) + ids)
    return torch.tensor(rows, dtype=torch.long, device=device)


def encode_texts(tokenizer, prompts, completions, prompt_len, max_new_tokens, device):
    """Prompts and their completions (strings) -> (tokens [N, P + T]: the left-padded prompt,
    the completion's tokens, <eos>, then padding, cut at T = max_new_tokens as the sampler
    cuts them; the completion mask [N, T])."""
    pad, T = pad_id_of(tokenizer), max_new_tokens
    rows = [(tokenizer.encode(c, add_special_tokens=False) + [tokenizer.eos_token_id]
             + [pad] * T)[:T] for c in completions]
    completions = torch.tensor(rows, dtype=torch.long, device=device).view(len(rows), T)
    tokens = torch.cat([encode_prompts(tokenizer, prompts, prompt_len, device), completions], 1)
    return tokens, completion_mask_of(completions, tokenizer.eos_token_id)


def completion_mask_of(completions, eos_token_id):
    """[N, T] float: 1 up to and including the first end-of-sequence token, 0 after it;
    all 1 for a completion cut at T_max without one."""
    is_eos = (completions == eos_token_id).long()
    return ((torch.cumsum(is_eos, dim=1) - is_eos) == 0).float()


def decode_completions(tokenizer, completions):
    """The text of each completion [N, T]: its tokens before the end-of-sequence token."""
    texts = []
    for row in completions.tolist():
        ids = row[:row.index(tokenizer.eos_token_id)] if tokenizer.eos_token_id in row else row
        texts.append(tokenizer.decode(ids))
    return tuple(texts)
# End of plumbing/tokens.py


# ---------------------------------------------------------------------------------------
# What the plumbing asks of grpo.py: its checks, its greedy policy, its measures, its flags
# ---------------------------------------------------------------------------------------
def check_flags(args):
    """grpo.py's own flags, checked before any environment is made."""
    for name in ("threads", "n_layer", "n_head", "n_embd", "max_new_tokens", "num_prompts",
                 "update_epochs", "num_minibatches", "learning_rate", "temperature",
                 "max_sample_rounds", "mask_sync_every", "max_grad_norm", "sft_batch_size",
                 "sft_learning_rate", "eval_samples"):
        if not getattr(args, name) > 0:
            fail(f"--{name.replace('_', '-')} must be positive, got {getattr(args, name)}")
    if not 1 <= args.pass_k <= args.eval_samples:
        fail(f"--pass-k must be from 1 to --eval-samples ({args.eval_samples}), got {args.pass_k}: "
             "pass@k draws k of the n sampled answers")
    if args.sft_stop_at is not None and not 0 <= args.sft_stop_at <= 1:
        fail(f"--sft-stop-at must be an accuracy in [0, 1], got {args.sft_stop_at}")
    if args.sft_stop_at is not None and not args.eval_every:
        fail("--sft-stop-at reads the held-out accuracy every --eval-every answers; give --eval-every")
    if args.warm_start is not None and not os.path.isfile(args.warm_start):
        fail(f"--warm-start {args.warm_start} is not a file; give a run's warm_start.pt "
             "(written with --save-model)")
    for name in ("sft_steps", "sft_problems"):
        if getattr(args, name) < 0:
            fail(f"--{name.replace('_', '-')} must be 0 or more, got {getattr(args, name)}")
    if args.sft_steps and not args.sft_problems:
        fail("--sft-steps needs --sft-problems 1 or more to learn from (or --sft-steps 0)")
    if args.group_size < 2:
        fail(f"--group-size must be at least 2, got {args.group_size}: a group of one has no "
             "other completion to be relative to")
    if args.beta < 0:
        fail(f"--beta must be 0 or more, got {args.beta}: it weighs a penalty")
    high = args.clip_coef if args.clip_coef_high is None else args.clip_coef_high
    if not (0 < args.clip_coef < 1 and high > 0):
        fail(f"the clip range [1 - {args.clip_coef}, 1 + {high}] is not a range around 1: "
             "--clip-coef must be in (0, 1) and --clip-coef-high positive")
    if not 0 < args.top_p <= 1:
        fail(f"--top-p must be in (0, 1], got {args.top_p}")
    if args.n_embd % args.n_head:
        fail(f"--n-embd {args.n_embd} is not divisible by --n-head {args.n_head}")
    if args.model is not None and not os.path.isdir(args.model):
        fail(f"--model {args.model} is not a folder; give the local folder of a Hugging Face "
             "causal LM and its tokenizer (save_pretrained writes one)")
    batch = args.num_prompts * args.group_size
    if args.num_minibatches > batch:
        fail(f"--num-minibatches {args.num_minibatches} is more than the batch's {batch} "
             "completions (num_prompts*group_size)")
    if args.eval_checkpoint is None and 0 < args.total_timesteps < batch:
        fail(f"--total-timesteps {args.total_timesteps} is less than one batch "
             f"(num_prompts*group_size = {batch} completions); raise it or shrink the batch")


# grpo.py's special tokens: <pad> (0) pads, <eos> (1) ends a completion (rlhf.py has <eos> alone)
SPECIAL_TOKENS = ("<pad>", "<eos>")


def check_spaces(args, obs_space, action_space):
    """Whether grpo.py handles the task: Text observations (prompts) and Text actions
    (completions), a tokenizer that writes every character of both (the built-in one, or
    --model's), and info["answer"] at reset for the warm start. Returns (tokenizer, the
    prompt's length in tokens: the observation space's longest text)."""
    spaces = (obs_space, action_space)
    if not all(isinstance(space, gym.spaces.Text) for space in spaces):
        fail(f"{args.env_id} has a {type(obs_space).__name__} observation and a "
             f"{type(action_space).__name__} action space; grpo.py needs Text for both (a "
             "prompt in, a completion out); for other spaces see ppo.py")
    characters = "".join(sorted(obs_space.character_set | action_space.character_set))
    if args.model is None:
        tokenizer = Tokenizer(characters, SPECIAL_TOKENS)
    else:
        tokenizer = load_tokenizer(args, characters)
    if args.sft_steps:
        env = gym.make(args.env_id, held_out=False)
        _, info = env.reset(seed=0)
        env.close()
        if "answer" not in info:
            fail(f"{args.env_id} gives no info['answer'] at reset for the supervised warm "
                 "start; train with --sft-steps 0")
    return tokenizer, obs_space.max_length


def make_policy(args, tokenizer, prompt_len):
    """The built-in GPT sized by the flags, or --model's Hugging Face causal LM (load_model);
    either gets the tokenizer and the lengths that complete and train read."""
    if args.model is None:
        policy = GPT(len(tokenizer), prompt_len + args.max_new_tokens, args.n_layer,
                     args.n_head, args.n_embd)
    else:
        policy = load_model(args, tokenizer)
    policy.tokenizer, policy.prompt_len, policy.max_new_tokens = (
        tokenizer, prompt_len, args.max_new_tokens)
    return policy


def check_groups(args, prompts):
    """train's check that a group's identically seeded environments posed one prompt."""
    G = args.group_size
    if any(len(set(prompts[g * G:(g + 1) * G])) > 1 for g in range(args.num_prompts)):
        fail(f"{args.env_id} posed different prompts to a group's identically seeded "
             "environments; draw the problems from the environment's np_random alone")


def greedy_policy(models, envs):
    """The evaluation's policy, act(obs, info) -> completions: greedy decoding of each
    prompt, the most likely token at each step, without NLPO's mask."""
    def act(obs, info):
        return complete(models["policy"], obs, greedy=True)[0]
    return act


def measure(run, global_step, moment):
    """grpo.py's held-out measures (held_out: a row of held_out.csv), at the moments of
    training RunWriter.measure names, with --eval-episodes: "warm start" every --eval-every
    answers of the warm start (the policy its own reference); "start", where GRPO begins,
    64 answers a problem at least, its greedy accuracy the summary's start_return (what the
    verdict measures RL's gain from); "evaluation", with each --eval-every evaluation of
    GRPO but the last; "end", measured as the start, and pass_at_k.csv from the two (Yue et
    al.'s picture). Returns the row, None where nothing is measured."""
    args, policy = run.args, run.models["policy"]
    many = max(64, args.eval_samples)  # pass_at_k.csv's pass@1..64
    if not args.eval_episodes:
        return None
    if moment == "warm start":
        return held_out(args, run, policy, policy, global_step)[0]
    if moment == "start":
        row, run.start_curve = held_out(args, run, policy, policy, 0, many)
        run.summary["start_return"] = row["accuracy"]
        print(f"{SCRIPT}: warm start: held-out accuracy {row['accuracy']:.3f} (greedy), "
              f"pass@1 {row['pass@1']:.3f}, pass@{args.pass_k} {row[f'pass@{args.pass_k}']:.3f}")
        return row
    if moment == "evaluation" and global_step < run.budget:  # the last one is the end's
        return held_out(args, run, policy, run.reference, global_step)[0]
    if moment == "end":
        row, end_curve = held_out(args, run, policy, run.reference, global_step, many)
        write_pass_at_k(run.path, run.start_curve, end_curve)
        return row
    return None


def draw_own_curve(run):
    """curve.png (the stamped draw_curve hands grpo.py's run here): held_out.csv's greedy
    accuracy, pass@1 and pass@k against the answers learned from, the warm start's before 0
    and GRPO's completions after it, with the final evaluation and the goal (the warm
    start's accuracy plus GOALS's gain). Batches of completions make a mean of the last 20
    episodes a sample of one batch, so it is not drawn. Returns the file's path, None
    without a held-out row."""
    path = os.path.join(run.path, "held_out.csv")
    rows = list(csv.DictReader(open(path))) if os.path.exists(path) else []
    if not rows:
        return None
    from matplotlib.figure import Figure  # only a run that draws pays for the import
    summary, k = run.summary, run.args.pass_k
    fig = Figure(figsize=(7, 4.2), layout="constrained")
    ax = fig.add_subplot()
    steps = [int(row["global_step"]) for row in rows]
    for column, style in (("accuracy", "o-"), ("pass@1", "s-"), (f"pass@{k}", "^-")):
        label = "greedy accuracy" if column == "accuracy" else f"{column} (sampled)"
        ax.plot(steps, [float(row[column]) for row in rows], style, ms=4, label=label)
    ax.axvline(0, color="gray", lw=1)
    ax.text(0, 0.02, " GRPO starts", color="gray", fontsize="small", transform=ax.get_xaxis_transform())
    if summary["eval_return_mean"] is not None:
        ax.plot([summary["global_steps"]], [summary["eval_return_mean"]], "*", ms=12, color="C3",
                label="final evaluation (greedy)")
    if summary["holds_on"] == "gain" and summary["start_return"] is not None:
        ax.axhline(summary["start_return"] + summary["solved_threshold"], ls="--", color="gray",
                   label=f"goal: the warm start + {summary['solved_threshold']:g}")
    stopped = " (interrupted)" if summary["interrupted"] else ""
    ax.set(xlabel="answers learned from: the warm start's (< 0), then GRPO's completions",
           ylabel="held-out accuracy", ylim=(0, 1.02),
           title=f"{SCRIPT} on {summary['env_id']}, seed {summary['seed']}{stopped}")
    ax.grid(alpha=0.3)
    ax.legend(loc="lower right", fontsize="small")
    fig.savefig(os.path.join(run.path, "curve.png"), dpi=100)
    return os.path.join(run.path, "curve.png")


# What a run is judged on, by environment id: (threshold, window of training episodes,
# "eval": the final greedy evaluation, the accuracy on --eval-episodes held-out problems).
# AdditionPartial-v0's: RL's gain, the final evaluation less the warm start's, at least 0.3.
GOALS = {"Addition-v0": (0.95, 20, "eval", 25_600), "Addition3-v0": (0.95, 20, "eval", None),
         "AdditionPartial-v0": (0.3, 20, "gain", 307_200)}
MODEL_FLAGS = ("model", "n_layer", "n_head", "n_embd", "max_new_tokens")
# grpo.py's columns of updates.csv as TensorBoard's scalars, under CleanRL's names
TENSORBOARD_NAMES = {
    "policy_loss": "losses/policy_loss", "approx_kl": "losses/approx_kl",
    "clipfrac": "losses/clipfrac", "kl": "losses/kl", "reward_mean": "charts/reward_mean",
    "entropy": "losses/entropy", "completion_length": "charts/completion_length",
    "groups_kept": "charts/groups_kept",
}


# ---------------------------------------------------------------------------------------
# grpo.py's own plumbing: --model's Hugging Face LM, the held-out measures, video frames
# ---------------------------------------------------------------------------------------
class HFPolicy(nn.Module):
    """A Hugging Face causal LM behind the built-in model's interface: tokens [N, L] ->
    (logits [N, L, V], None: grpo.py reads no hidden states), padding masked out of the
    attention (as TRL passes it)."""

    def __init__(self, model, pad_token_id):
        super().__init__()
        self.model, self.pad_token_id = model, pad_token_id

    def forward(self, tokens):
        mask = (tokens != self.pad_token_id).long()
        return self.model(input_ids=tokens, attention_mask=mask).logits.float(), None

    def next_token_logits(self, tokens, cache=None):
        """The sampler's step: logits [N, V] for the token after tokens [N, L], and the model's
        key-value cache, with which the next step feeds in only the newest token."""
        out = self.model(input_ids=tokens if cache is None else tokens[:, -1:], cache=cache,
                         attention_mask=(tokens != self.pad_token_id).long(), use_cache=True,
                         logits_to_keep=1)
        return out.logits[:, -1].float(), out.cache


def load_model(args, tokenizer):
    """--model's causal LM from local files alone (transformers is imported only then;
    nothing is downloaded), in HFPolicy."""
    from transformers import AutoModelForCausalLM  # only with --model
    try:
        model = AutoModelForCausalLM.from_pretrained(args.model, local_files_only=True)
    except Exception as e:
        fail(f"--model {args.model} holds no causal LM that transformers can load "
             f"({type(e).__name__}: {(str(e).splitlines() or [''])[0]})")
    return HFPolicy(model, pad_id_of(tokenizer))


def load_tokenizer(args, characters):
    """--model's tokenizer, which must end a completion (an end-of-sequence token) and write
    every character of the task's prompts and answers."""
    from transformers import AutoTokenizer  # only with --model
    try:
        tokenizer = AutoTokenizer.from_pretrained(args.model, local_files_only=True)
    except Exception as e:
        fail(f"--model {args.model} holds no tokenizer that transformers can load "
             f"({type(e).__name__}: {(str(e).splitlines() or [''])[0]})")
    if tokenizer.eos_token_id is None:
        fail(f"--model {args.model}'s tokenizer has no end-of-sequence token to end a completion")
    cannot = [c for c in characters if tokenizer.decode(tokenizer.encode(
        c, add_special_tokens=False)) != c]
    if cannot:
        fail(f"--model {args.model}'s tokenizer cannot write {''.join(cannot)!r}, which "
             f"{args.env_id}'s prompts and answers use; pick a tokenizer that can")
    return tokenizer


def pass_at_k(n, c, k):
    """The unbiased pass@k (Chen et al. 2021) from n sampled answers of one problem, c of them
    correct: the chance that k answers drawn without replacement hold a correct one, a float,

        pass@k = 1 - C(n - c, k) / C(n, k)       (1 where n - c < k: every draw holds one)

    pass@1 = c / n, the sampled accuracy; pass@n = 1 if any is right, else 0. Raises
    ValueError("pass@k needs 0 <= c <= n and 1 <= k <= n, got ...") where they do not hold."""
    if not 0 <= c <= n or not 1 <= k <= n:
        raise ValueError(f"pass@k needs 0 <= c <= n and 1 <= k <= n, got n={n}, c={c}, k={k}")
    return 1.0 if n - c < k else 1.0 - math.comb(n - c, k) / math.comb(n, k)


@torch.no_grad()
def held_out(args, run, policy, reference, step, n=None):
    """What the model answers on the --eval-episodes held-out problems (the evaluation's,
    seeded seed + 100,000; never trained on): its greedy accuracy, and from n (default
    --eval-samples) answers sampled at the training temperature, c_j right of problem j's n, pass@1 and
    pass@k (the mean over problems of pass_at_k), the mean completion length in tokens and
    the KL to the reference, sum_t k3 per completion. A row of held_out.csv, its step the
    answers learned from (negative: before GRPO, the warm start's) or the completions
    sampled. Sampling draws on a random stream of its own, so training's is untouched.
    Returns (the row, pass@k for k = 1..n)."""
    tokenizer, P, T, n = policy.tokenizer, policy.prompt_len, args.max_new_tokens, n or args.eval_samples
    device, envs = next(policy.parameters()).device, make_vector_env(args.env_id, args.eval_episodes)
    correct, lengths, kls = 0, [], []
    with torch.random.fork_rng(devices=[device] if torch.cuda.is_available() and device.type == "cuda" else []):
        torch.manual_seed(args.seed + 100_000)
        for j in range(n + 1):  # the greedy answers, then n sampled ones, of the same problems
            prompts, _ = envs.reset(seed=args.seed + 100_000)
            tokens, mask, logprobs, _ = sample(
                policy, encode_prompts(tokenizer, prompts, P, device), T, tokenizer.eos_token_id,
                pad_id_of(tokenizer), args.temperature, greedy=j == 0)
            _, rewards, _, _, _ = envs.step(decode_completions(tokenizer, tokens[:, P:]))
            if j == 0:
                greedy = float(np.mean(rewards))
                continue
            ref = token_logprobs(completion_logits(reference, tokens, P), tokens[:, P:],
                                 args.temperature)
            correct = correct + (rewards == 1)
            lengths.append(mask.sum(1).mean().item())
            kls.append((k3_kl(logprobs, ref) * mask).sum(1).mean().item())
    envs.close()
    curve = [float(np.mean([pass_at_k(n, int(c), k) for c in correct])) for k in range(1, n + 1)]
    row = {"accuracy": greedy, "pass@1": curve[0], f"pass@{args.pass_k}": curve[args.pass_k - 1],
           "answer_length": float(np.mean(lengths)), "kl_to_reference": float(np.mean(kls))}
    run.write_row("held_out.csv", global_step=step, wall_time=round(run.elapsed(), 4), **row)
    return row, curve


def write_pass_at_k(path, start, end):
    """pass_at_k.csv: pass@k for k = 1..n at the warm start and at the end of GRPO."""
    with open(os.path.join(path, "pass_at_k.csv"), "w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(["k", "warm_start", "end"])
        writer.writerows([k, a, b] for k, (a, b) in enumerate(zip(start, end), start=1))


def make_env(env_id, held_out, video_folder, i):
    """make_vector_env's i-th copy of the task; with a video_folder, its first episode
    recorded there as eval-<i> (--capture-video)."""
    if video_folder is None:
        return gym.make(env_id, held_out=held_out)
    env = gym.make(env_id, held_out=held_out, render_mode="rgb_array")
    with warnings.catch_warnings():  # the environments share one folder on purpose
        warnings.filterwarnings("ignore", message=".*Overwriting existing videos")
        return gym.wrappers.RecordVideo(env, video_folder, name_prefix=f"eval-{i}",
                                       episode_trigger=lambda episode: episode == 0)


# A 3 x 5 pixel font, each glyph's rows top to bottom; any other character is a box.
FONT = {"0": "111101101101111", "1": "010110010010111", "2": "111001111100111",
        "3": "111001111001111", "4": "101101111001001", "5": "111100111001111",
        "6": "111100111101111", "7": "111001001001001", "8": "111101111101111",
        "9": "111101111001111", "+": "000010111010000", "=": "000111000111000",
        " ": "000000000000000"}


def draw_text(text, width, scale=8):
    """An RGB frame [H, W, 3] uint8 of the text, dark on light, `width` characters wide (the
    same size for every frame of a video), 4 pixels a glyph column plus a margin."""
    pixels = np.zeros((7, 4 * width + 1), dtype=bool)
    for i, c in enumerate(text[:width]):
        glyph = np.array([bit == "1" for bit in FONT.get(c, "1" * 15)])
        pixels[1:6, 1 + 4 * i:4 + 4 * i] = glyph.reshape(5, 3)
    frame = np.where(pixels, 30, 235).astype(np.uint8).repeat(scale, 0).repeat(scale, 1)
    frame = frame[:frame.shape[0] // 2 * 2, :frame.shape[1] // 2 * 2]  # even sizes for video
    return np.repeat(frame[:, :, None], 3, axis=2)


if __name__ == "__main__":
    cli()


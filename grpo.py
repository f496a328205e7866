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
    # The run folder's flags (--output-dir, --save-model, --eval-checkpoint, --track, ...)
    # come after these: every script shares them, declared once in RunFlags below the banner.
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
# plumbing/text.py's, stamped here (rlhf.py's too). Below the banner, the text's input and
# output: complete(policy, prompts) samples completions of text prompts (their texts, then
# sample's outputs); encode_texts returns (tokens [N, P + T]: prompt, completion, <eos>,
# padding; their completion mask [N, T]). make_policy, after it, builds the policy and sets
# its tokenizer and lengths; next_token_logits' "Hugging Face one" is --model's.
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
    keep_sorted = (torch.cumsum(sorted_probs, dim=-1) - sorted_probs) < top_p  # mass before it
    return torch.zeros_like(keep_sorted).scatter(-1, order, keep_sorted)  # in vocabulary order


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


def completion_mask_of(completions, eos_token_id):
    """[N, T] float: 1 up to and including the first end-of-sequence token, 0 after it;
    all 1 for a completion cut at T_max without one."""
    is_eos = (completions == eos_token_id).long()  # [a, b, <eos>, <pad>]: 0, 0, 1, 0
    return ((torch.cumsum(is_eos, dim=1) - is_eos) == 0).float()  # an <eos> before it: 0, 0, 0, 1


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


def completion_logits(model, tokens, prompt_len):
    """The logits that predicted each completion token: tokens [N, P + T] -> [N, T, V]."""
    return model(tokens)[0][:, prompt_len - 1:-1]
# End of plumbing/text.py


def make_policy(args, tokenizer, prompt_len):
    """The built-in GPT sized by the flags, or --model's Hugging Face causal LM (load_model,
    below the banner); either gets the tokenizer and the lengths complete and train read."""
    if args.model is None:
        policy = GPT(len(tokenizer), prompt_len + args.max_new_tokens, args.n_layer,
                     args.n_head, args.n_embd)
    else:
        policy = load_model(args, tokenizer)
    policy.tokenizer, policy.prompt_len, policy.max_new_tokens = (
        tokenizer, prompt_len, args.max_new_tokens)
    return policy


def make_vector_env(env_id, num_envs, video_folder=None, held_out=True):
    """N copies of a text task (make_recorded, below: gym.make, with video_folder each copy's
    first episode recorded as eval-<i>), one vector environment. held_out: the evaluation's
    held-out problems, else the training ones."""
    envs = gym.vector.SyncVectorEnv(
        [lambda i=i: make_recorded(env_id, video_folder, f"eval-{i}", held_out=held_out)
         for i in range(num_envs)],
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
    run (Run, below the banner) writes the run folder: step(n, info) records the episodes
    that ended, evaluates, prints progress and says when to stop; update(n, loss, **row) adds
    a row (or stops on a NaN or inf loss); measure(n, moment) takes the held-out measures."""
    prompt_len, T = policy.prompt_len, args.max_new_tokens
    if args.warm_start:  # another run's warm_start.pt, so that a control starts where GRPO did
        policy.load_state_dict(torch.load(args.warm_start, map_location="cpu",
                                          weights_only=True)["policy"])  # tensors only, never code
    else:
        warm_start(args, policy, run)
    run.measure(0, "start")  # the accuracy RL's gain counts from (--save-model: warm_start.pt)
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
            # run.step: the answers' rewards into episodes.csv, --eval-every's evaluations.csv
            # (greedy) and held_out.csv (measures); True once --stop-at-return is reached: the end
            if run.step(global_step, info):
                return run.measure(global_step, "end")
            rewards = torch.tensor(rewards, dtype=torch.float32, device=device)
            rewards_seen.append(rewards)
            lengths.append(completion_mask.sum(1))
            has_signal = rewards.view(B, G).std(dim=1) > 0  # the groups with two reward values
            keep = has_signal.repeat_interleave(G) if args.dynamic_sampling else slice(None)  # else all
            kept.append([x[keep] for x in (tokens, completion_mask, logprobs, rewards, action_masks)
                         if x is not None])
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

        pg_loss, kl, clipfrac, approx_kl, entropy = np.mean(stats, axis=0)
        if run.update(global_step, loss.item(), policy_loss=pg_loss, kl=kl, clipfrac=clipfrac,
                      approx_kl=approx_kl, entropy=entropy,
                      reward_mean=torch.cat(rewards_seen).mean().item(),
                      completion_length=torch.cat(lengths).mean().item(),
                      groups_kept=len(buffer) // G):  # True, no row: a NaN or inf loss; stop
            return
    run.measure(global_step, "end")  # as "start": max(64, --eval-samples) answers a problem (pass@1..64)


def main(args: Args) -> dict:
    """Train GRPO (or evaluate an --eval-checkpoint), write the run folder, return the summary.
    Ctrl-C stops training; the run folder is written, then KeyboardInterrupt goes on up."""
    register_tasks()  # Addition-v0, before any environment is made
    # prepare (below the banner): --eval-checkpoint's model read (args take its MODEL_FLAGS),
    # the task made and checked (check_spaces builds the tokenizer: the task's characters,
    # <pad>, <eos>, or --model's), every flag checked (a mistake: one line, exit status 2),
    # the seeds set, the device chosen.
    args, (tokenizer, prompt_len), checkpoint, device = prepare(args)

    # Set up: the policy, then the run folder; Run counts the budget in whole batches of
    # rollout_steps completions and prints note at the end of the run's first line.
    policy = make_policy(args, tokenizer, prompt_len).to(device)
    models = {"policy": policy}  # what model.pt holds (the reference is its warm start)
    run = Run(args, device, models, checkpoint, rollout_steps=args.num_prompts * args.group_size,
              note=f", groups of {args.group_size}, " + (args.model or "built-in model"))

    # run.train runs train() unless --eval-checkpoint, then evaluates, saves, writes.
    envs = None if checkpoint else make_vector_env(
        args.env_id, args.num_prompts * args.group_size, held_out=False)
    return run.train(lambda: train(args, policy, envs, run, device), envs)


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
from torch.utils.tensorboard import SummaryWriter as TensorBoardWriter


@dataclass
class RunFlags:
    """The flags of the run folder that every script has: Args below lists them last."""
    output_dir: str = "runs"
    """where run folders go"""
    save_model: bool = False
    """write the model into the run folder (model.pt; a table's: model.npz)"""
    eval_checkpoint: Optional[str] = None
    """skip training: load this model.pt (or model.npz, or a run folder's) and evaluate it"""
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


def prepare(args, make=None):
    """Before training: --eval-checkpoint's model read, the environment made once, the flags
    left at None filled from its family's preset, the flags then the spaces checked (a mistake:
    one line, exit status 2), the seeds. Returns (args, check_spaces's, checkpoint, device)."""
    args, checkpoint = load_checkpoint(args)  # the flags that shape its networks too
    obs_space, action_space = check_env(args, make or globals().get("make_game", gym.make))
    if "PRESETS" in globals():  # the flags left at None: plumbing/presets.py's, below
        args = fill_preset(args, preset_for(args, obs_space, action_space))
    if getattr(args, "eval_epsilon", 0.0) is None:  # the evaluation's default: 0.05 on Atari
        args = replace(args, eval_epsilon=0.05 if args.env_id.startswith("ALE/") else 0.0)
    check_args(args)
    spaces = check_spaces(args, obs_space, action_space)
    image = len(getattr(obs_space, "shape", None) or ()) == 3
    return args, spaces, checkpoint, seed_and_device(args.seed, getattr(args, "cuda", None),
                                                     getattr(args, "threads", 1), image)


class UsageError(Exception):
    """Bad input: cli prints it as one line and exits with status 2, before training."""


def fail(message):
    raise UsageError(message)


def parse_args():  # tyro's parse-error hook (tyro._errors: requirements.txt pins tyro)
    with tyro._errors.on_parse_error(usage_error):
        return tyro.cli(Args)


def usage_error(event):
    """One line for a parse error: an unknown flag, a choice, a value, a missing value."""
    types, hint = typing.get_type_hints(Args), f"(python {SCRIPT} --help lists the flags)"
    if isinstance(event, tyro._errors.UnrecognizedArgs):
        flags = [f"--{no}{name.replace('_', '-')}" for name, kind in types.items()
                 for no in ("", "no-")[:1 + (kind is bool and not name.startswith("no_"))]]
        close = difflib.get_close_matches(event.tokens[0].partition("=")[0], flags, n=2)
        fail(f"unrecognized options: {', '.join(event.tokens)}"
             f"{'; did you mean ' + ' or '.join(close) + '?' if close else ''} {hint}")
    flag = event.argument.display_name().split("/")[0] if hasattr(event, "argument") else "?"
    kind = types.get(flag[2:].replace("-", "_"))
    if isinstance(event, tyro._errors.InvalidChoice):
        choices = [str(c) for a in (kind, *typing.get_args(kind))
                   if typing.get_origin(a) is typing.Literal for c in typing.get_args(a)]
        fail(f"{flag} takes {' or '.join(choices or event.choices)}, not {event.value!r} {hint}")
    if isinstance(event, tyro._errors.InstantiationFailure):  # the value is quoted last
        value = (re.findall(r"'([^']*)'", event.message) or ["?"])[-1]
        whole = "a whole number" if int in (kind, *typing.get_args(kind)) else "a number"
        fail(f"{flag} takes {whole}, not {value!r} {hint}")
    fail(f"{flag} needs a value {hint}")


def check_range(args, positive=(), nonnegative=(), fraction=()):
    """Each flag named must be > 0, >= 0, or in [0, 1]."""
    for name in [*positive, *nonnegative, *fraction]:
        value, words = getattr(args, name), ("positive" if name in positive else "0 or more"
                                             if name in nonnegative else "in [0, 1]")
        if not (value > 0 if name in positive else 0 <= value <= (1 if name in fraction else math.inf)):
            fail(f"--{name.replace('_', '-')} must be {words}, got {value}")


def check_args(args):
    """The algorithm's checks of its flags (check_flags), then those every script shares."""
    try:
        check_flags(args)
    except UsageError as e:  # a value may be the preset's, not the user's: name the preset
        preset = getattr(args, "preset", None)
        fail(f"{e} (the {preset} preset's settings; a flag given overrides one)" if preset else e)
    check_range(args, positive=["total_timesteps"], nonnegative=["eval_episodes", "eval_every"])
    if (args.eval_every or args.capture_video) and not args.eval_episodes:
        fail("--eval-every and --capture-video need evaluation episodes: --eval-episodes 1 or more")
    for flag, needed, package in (("capture_video", "moviepy", "moviepy==2.2.1"),
                                  ("track", "wandb", "wandb==0.31.0")):
        if getattr(args, flag) and importlib.util.find_spec(needed) is None:
            fail(f"--{flag.replace('_', '-')} needs {needed}: pip install {package}")


def check_env(args, make=gym.make):
    """The environment's spaces; with --capture-video a frame rendered (no display: said now)."""
    try:
        with warnings.catch_warnings():  # a failing render is said below
            warnings.simplefilter("ignore")
            os.environ.setdefault("SDL_VIDEODRIVER", "dummy")  # frames only, no window
            env = make(args.env_id, **({"render_mode": "rgb_array"} if args.capture_video else {}))
            if args.capture_video:
                env.reset(seed=0)
                env.render()
            env.close()
    except UsageError:  # a make of the script's own said it already (a package to install)
        raise
    except Exception as e:  # Gymnasium's line: the closest id, the extra to install (pinned)
        message = re.sub(r'"gymnasium\[(\w+)\]"', rf'"gymnasium[\1]=={gym.__version__}"', str(e))
        video = " to record videos (for MuJoCo without a display: MUJOCO_GL=egl)" * args.capture_video
        fail(f"cannot make {args.env_id}{video}: {type(e).__name__}: "
             f"{(message.splitlines() or [''])[0]}")
    return env.observation_space, env.action_space


def seed_and_device(seed, cuda=None, threads=1, image=False):
    """The seeds; the GPU for --cuda, or for an image (an MLP trains faster on a CPU thread)."""
    random.seed(seed)
    np.random.seed(seed)
    device = "cpu"
    torch.manual_seed(seed)
    device = torch.device("cuda" if torch.cuda.is_available() and (image if cuda is None else cuda)
                          else "cpu")
    if device.type == "cpu":
        torch.set_num_threads(threads)
    print(f"{SCRIPT}: device {device}")
    return device


def make_recorded(env_id, video_folder=None, name_prefix="eval", make=gym.make, **options):
    """make(env_id, **options); with video_folder, an evaluation's environment whose first
    episode is recorded there as <name_prefix>-episode-0.mp4 (frames only, no window)."""
    if video_folder is None:
        return make(env_id, **options)
    os.environ.setdefault("SDL_VIDEODRIVER", "dummy")
    env = make(env_id, render_mode="rgb_array", **options)
    with warnings.catch_warnings():  # the evaluation's environments share one folder
        warnings.filterwarnings("ignore", message=".*Overwriting existing videos")
        return gym.wrappers.RecordVideo(env, video_folder, name_prefix=name_prefix,
                                        episode_trigger=lambda episode: episode == 0)


EVAL_MAX_STEPS = 27_000  # an evaluation episode is cut here: ALE's own end of an Atari game


def evaluate(args, models, video_folder=None):
    """Greedy returns of --eval-episodes episodes, one per environment, seeded seed + 100,000;
    with --eval-epsilon, a random action at that rate from a generator of its own."""
    episodes, seed = args.eval_episodes, args.seed + 100_000
    envs = make_vector_env(args.env_id, episodes, video_folder=video_folder,
                           **{flag: getattr(args, flag) for flag in globals().get("ENV_FLAGS", ())})
    act, epsilon = greedy_policy(models, envs), getattr(args, "eval_epsilon", 0.0)
    obs, info = envs.reset(seed=seed)
    rng, returns = np.random.default_rng(seed), np.full(episodes, np.nan)
    for _ in range(EVAL_MAX_STEPS):
        actions = act(obs, info)
        if epsilon:  # Discrete actions only (check_spaces); whether to explore, then what
            explore = rng.random(episodes) < epsilon
            actions = np.where(explore, rng.integers(envs.single_action_space.n, size=episodes),
                               actions)
        obs, _, _, _, info = envs.step(actions)
        if "_episode" in info:
            first = info["_episode"] & np.isnan(returns)
            returns[first] = info["episode"]["r"][first]
        if not np.isnan(returns).any():
            break
    else:  # an episode still running counts its return so far
        print(f"{SCRIPT}: evaluation cut at {EVAL_MAX_STEPS:,} steps; give {args.env_id} a "
              "time limit (max_episode_steps)")
        returns = np.where(np.isnan(returns), envs.episode_returns, returns)
    envs.close()
    return returns


def restore(checkpoint, models, args):
    """Put a checkpoint's state into each model; one that does not fit is bad input."""
    try:
        for name, model in models.items():
            model.load_state_dict(checkpoint[name])
    except Exception as e:
        fail(f"checkpoint {args.eval_checkpoint} does not fit {args.env_id}'s networks: "
             f"{type(e).__name__}: {(str(e).splitlines() or [''])[0]}")


def goal(args):
    """(threshold, window, holds_on, source, budget): GOALS's (for `budget` steps), else the
    reward_threshold over 20 returns; --stop-at-return's at any budget. holds_on "train": the
    last-window mean at the end; "eval": the final evaluation; "gain": that less start_return."""
    env, goals = args.env_id.rpartition(":")[2], globals().get("GOALS", {})
    threshold, window, holds_on, budget = goals.get(
        env, (getattr(gym.registry.get(env), "reward_threshold", None), 20, "train", None))
    if args.stop_at_return is not None:
        return args.stop_at_return, window, holds_on, "--stop-at-return", None
    return threshold, window, holds_on, "GOALS" if env in goals else "reward_threshold", budget


class Run:
    """A run and its folder: config.json, CSV rows flushed as they come (and to TensorBoard),
    evaluations; train() the rest. `models`: what a checkpoint holds (restored from one)."""

    def __init__(self, args, device, models, checkpoint=None, rollout_steps=1, note=""):
        if checkpoint is not None:
            restore(checkpoint, models, args)
        name = "__".join([args.env_id.replace("/", "-").replace(":", "-"), args.exp_name,
                          str(args.seed), str(int(time.time()))])
        self.path, suffix = os.path.join(args.output_dir, name), 1
        while os.path.exists(self.path):  # a run with the same flags in the same second
            suffix += 1
            self.path = os.path.join(args.output_dir, f"{name}-{suffix}")
        versions = {"python": sys.version.split()[0], "gymnasium": gym.__version__,
                    "numpy": np.__version__}
        versions["torch"] = torch.__version__
        config = {**asdict(args), "device": str(device), "versions": versions}
        if args.track:  # before the folder and the event files (it syncs those made after it)
            import wandb  # not a requirement: check_args found it
            try:
                wandb.init(project=args.wandb_project_name, entity=args.wandb_entity, config=config,
                           name=os.path.basename(self.path), sync_tensorboard=True)
            except wandb.errors.Error as e:
                fail(f"--track: {' '.join(str(e).split())} Or set WANDB_MODE=offline: the run "
                     "stays here until `wandb sync` uploads it")
        try:
            os.makedirs(self.path)
        except OSError as e:
            fail(f"cannot create the run folder {self.path}: {e.strerror}")
        with open(os.path.join(self.path, "config.json"), "w") as f:
            json.dump(config, f, indent=2)
        self.tensorboard = TensorBoardWriter(self.path) if args.tensorboard or args.track else None
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
        self.start, self.last_print, self.last_step = time.time(), time.time(), 0
        print(f"{SCRIPT}: {args.env_id}, seed {args.seed}{note}")  # after the device's line
        if getattr(args, "preset", None):  # the settings the environment's family picked
            others = " or ".join(f"--preset {name}" for name in PRESETS if name != args.preset)
            print(f"{SCRIPT}: the {args.preset} preset, {PRESETS[args.preset][0]}; {others} "
                  "for another, a flag for one setting")

    def elapsed(self):
        return time.time() - self.start

    def write_row(self, filename, **row):
        """A row of a CSV file (its header at first use), and to TensorBoard (the rule above)."""
        if filename not in self.files:
            f = open(os.path.join(self.path, filename), "w", newline="")
            self.files[filename] = (f, csv.DictWriter(f, fieldnames=list(row) or [
                "global_step", "wall_time", "episode_return", "episode_length"]))  # episodes.csv's
            self.files[filename][1].writeheader()
        f, writer = self.files[filename]
        if row:
            writer.writerow(row)
        for column, value in row.items() if self.tensorboard else ():
            if column not in ("global_step", "wall_time") and value != "":  # "": no value
                folder = "losses" if filename == "updates.csv" else "charts"
                self.tensorboard.add_scalar(COMMON_NAMES.get(column, f"{folder}/{column}"), value,
                                            row["global_step"], self.start + row["wall_time"])
        if self.tensorboard:
            self.tensorboard.flush()  # as the CSV file: a run that crashes keeps its rows
        f.flush()

    def step(self, global_step, info=None):
        """After each environment step: --eval-every's evaluation, the episodes that ended
        (RecordEpisodeStatistics's info), the progress line; True at --stop-at-return: stop."""
        every, previous, self.last_step = self.args.eval_every, self.last_step, global_step
        self.summary["global_steps"] = max(self.summary["global_steps"], global_step)
        if every and global_step // every > previous // every:
            self.evaluation(global_step)
        if time.time() - self.last_print >= 2.0:
            self.last_print = time.time()
            print(progress_line(global_step, self.budget, global_step / self.elapsed(),
                                self.recent_return()))
        for i in np.flatnonzero(info.get("_episode", [])) if info else ():
            self.episode(global_step, info["episode"]["r"][i], info["episode"]["l"][i])
        return self.reached(self.args.stop_at_return, global_step)

    def episode(self, global_step, episode_return, episode_length):
        """A training episode's row; the step where the goal's mean was first reached."""
        self.summary["global_steps"] = max(self.summary["global_steps"], global_step)
        self.returns.append(float(episode_return))
        self.ends.append(global_step)  # where it ended, for curve.png
        self.write_row("episodes.csv", global_step=global_step, wall_time=round(self.elapsed(), 4),
                       episode_return=float(episode_return), episode_length=int(episode_length))
        if self.summary["holds_on"] != "gain":  # a gain is measured once, at the end
            self.reached(self.summary["solved_threshold"], global_step)

    def update(self, global_step, loss=0.0, /, **diagnostics):
        """An update's row of diagnostics; True, and no row, when `loss` is NaN or inf."""
        if self.non_finite(loss, global_step):
            return True
        wall_time = self.elapsed()
        self.write_row("updates.csv", global_step=global_step, wall_time=round(wall_time, 4),
                       sps=int(global_step / wall_time), **diagnostics)
        self.measure(global_step, "update")
        return False

    def evaluation(self, global_step):  # a row of evaluations.csv; --save-model's best model
        wall_time, returns = self.elapsed(), evaluate(self.args, self.models)
        mean, std = float(returns.mean()), float(returns.std())
        self.write_row("evaluations.csv", global_step=global_step, wall_time=round(wall_time, 4),
                       eval_return_mean=mean, eval_return_std=std)
        if self.args.save_model and mean > max((m for _, m, _ in self.evaluations), default=-math.inf):
            save_checkpoint(os.path.join(self.path, "best_" + CHECKPOINT), self.models, self.args)
        self.evaluations.append((global_step, mean, std))
        self.measure(global_step, "evaluation")

    def measure(self, global_step, moment, **what):  # the optional hook measure(run, step, moment)
        return measure(self, global_step, moment, **what) if "measure" in globals() else None

    def non_finite(self, loss, global_step):  # True, said, the run marked interrupted
        if math.isfinite(loss):
            return False
        print(f"{SCRIPT}: the loss became non-finite (NaN or inf) at step {global_step}; "
              "stopping (try a lower --learning-rate)")
        self.summary["interrupted"] = True
        return True

    def recent_return(self, window=20):  # the mean of the last `window` training returns
        return float(np.mean(self.returns[-window:])) if self.returns else None

    def reached(self, threshold, global_step):  # the window's mean at threshold; the first step kept
        if (threshold is None or len(self.returns) < self.window
                or self.recent_return(self.window) < threshold):
            return False
        self.summary["solved_at_step"] = self.summary["solved_at_step"] or global_step
        return True

    def train(self, train, envs=None):
        """Train (unless --eval-checkpoint), save, evaluate, draw, print the closing line; the
        summary. Ctrl-C stops training or the evaluation: the run is written, then re-raised."""
        s, args, stopped = self.summary, self.args, False
        try:
            if args.eval_checkpoint is None:
                train()
        except KeyboardInterrupt:
            stopped = s["interrupted"] = True
        finally:
            if envs is not None:
                envs.close()
        s["train_return_last20"], s["wall_time_s"] = self.recent_return(), round(self.elapsed(), 3)
        if args.save_model and args.eval_checkpoint is None:
            save_checkpoint(os.path.join(self.path, CHECKPOINT), self.models, args)
        self.close()
        self.judge()  # summary.json now: Ctrl-C during the evaluation keeps it
        try:
            if args.eval_episodes and not s["interrupted"]:
                returns = evaluate(args, self.models, os.path.join(self.path, "videos")
                                   if args.capture_video else None)
                s["eval_return_mean"], s["eval_return_std"] = float(returns.mean()), float(returns.std())
        except KeyboardInterrupt:
            stopped = True
        if stopped:
            print(f"{SCRIPT}: interrupted; {self.path} keeps the run so far")
        curve = self.draw_curve()
        print(" | ".join(self.verdict() + ([f"curve {curve}"] if curve else [])))
        if args.track:  # the summary and the evaluation's videos to W&B, whose run then ends
            import wandb
            wandb.run.summary.update(s)
            videos = sorted(glob.glob(os.path.join(self.path, "videos", "*.mp4")))
            if videos:
                wandb.log({"videos": [wandb.Video(video) for video in videos]})
            wandb.finish(exit_code=130 if stopped else 0)
        if stopped:
            raise KeyboardInterrupt
        return s

    def judge(self):
        """summary.json: end_return, holds_on's measure at the end (a goal can be reached and
        lost), holds (end_return >= solved_threshold; null for a run stopped or given fewer steps
        than its goal is for: then it returns True)."""
        s, short = self.summary, (self.summary["goal_budget"] or 0) > self.args.total_timesteps
        train = self.recent_return(self.window) if len(self.returns) >= self.window else None
        end = train if s["holds_on"] == "train" else s["eval_return_mean"]
        start = s["start_return"] if s["holds_on"] == "gain" else 0.0
        s["end_return"] = None if None in (end, start) else end - start
        s["holds"] = (None if None in (s["solved_threshold"], s["end_return"]) or s["interrupted"]
                      or short else s["end_return"] >= s["solved_threshold"])
        with open(os.path.join(self.path, "summary.json"), "w") as f:
            json.dump(s, f, indent=2)
        return short

    def verdict(self):  # the closing line's parts: steps, returns, the goal or the preset
        s, threshold, short, args = self.summary, self.summary["solved_threshold"], self.judge(), self.args
        line = [f"{SCRIPT}: run folder {self.path}", f"global_steps {s['global_steps']:,}"] + [
            f"{key} " + ("-" if s[key] is None else f"{s[key]:.2f}")
            for key in ("train_return_last20", "eval_return_mean")]
        preset = getattr(args, "preset", None)  # no GOALS entry: the preset that ran, named
        ran = ([f"no goal for {args.env_id}; the {preset} preset ran"]
               if preset and self.source == "reward_threshold" else [])
        if threshold is None:
            return line + ran
        if s["end_return"] is not None:  # the figure the run is judged on, where it ends
            if s["holds_on"] == "train":
                end = f"the last-{self.window} mean at the end {s['end_return']:.2f}"
            elif s["holds_on"] == "eval":
                end = f"the final evaluation {s['end_return']:.2f}"
            else:
                end = (f"the gain over the start ({s['start_return']:.2f} -> "
                       f"{s['eval_return_mean']:.2f}) {s['end_return']:+.2f}")
            if s["holds"] is not None:
                line.append(f"{'holds' if s['holds'] else 'does not hold'}: {end} "
                            f"{'>=' if s['holds'] else '<'} {threshold:g}")
            elif short:
                line.append(f"not judged, {args.total_timesteps:,} steps where its goal "
                            f"{threshold:g} is for {s['goal_budget']:,}: {end}")
        if s["holds_on"] != "gain":  # a gain has no training mean to reach it first
            line.append(f"solved_at_step {s['solved_at_step'] or 'not reached'} "
                        f"(last-{self.window} mean >= {self.source} {threshold:g})")
        return line + ran

    def draw_curve(self):
        """--curve: curve.png, its path (None: nothing to draw): returns, their mean, evaluations,
        threshold; a Figure of its own, not pyplot's. A script's draw_own_curve instead."""
        if not self.args.curve or "draw_own_curve" in globals():
            return draw_own_curve(self) if self.args.curve else None
        s, evaluations = self.summary, list(self.evaluations)
        if s["eval_return_mean"] is not None:
            evaluations.append((s["global_steps"], s["eval_return_mean"], s["eval_return_std"]))
        if not (self.returns or evaluations):
            return None
        from matplotlib.figure import Figure  # only a run that draws pays for the import
        fig = Figure(figsize=(7, 4.2), layout="constrained")
        ax = fig.add_subplot()
        if self.returns:  # each return, the mean of the goal's window where each episode ended
            means = [np.mean(self.returns[max(0, i + 1 - self.window):i + 1]) for i in range(len(self.ends))]
            ax.plot(self.ends, self.returns, ".", ms=3, alpha=0.3, color="C0", label="episode return")
            ax.plot(self.ends, means, color="C0", label=f"mean of the last {self.window}")
        if evaluations:
            ax.errorbar(*zip(*evaluations), fmt="o", color="C1", capsize=3, label="greedy evaluation")
        if s["solved_threshold"] is not None:
            on = "evaluation" if s["holds_on"] == "eval" else f"last-{self.window} mean"
            ax.axhline(s["solved_threshold"], ls="--", color="gray",
                       label=f"threshold {s['solved_threshold']:g} ({on})")
        ax.set(xlabel="environment steps", ylabel="return", title=f"{SCRIPT} on {s['env_id']}, "
               f"seed {s['seed']}{' (interrupted)' if s['interrupted'] else ''}")
        ax.legend(fontsize="small")
        fig.savefig(os.path.join(self.path, "curve.png"), dpi=100)
        return os.path.join(self.path, "curve.png")

    def close(self):
        for f, _ in self.files.values():
            f.close()
        if self.tensorboard:
            self.tensorboard.close()


SUMMARY_KEYS = ("algorithm", "env_id", "seed", "global_steps", "wall_time_s",
                "train_return_last20", "eval_return_mean", "eval_return_std", "eval_episodes",
                "solved_threshold", "solved_window", "holds_on", "goal_budget", "start_return",
                "end_return", "holds", "solved_at_step", "interrupted")
COMMON_NAMES = {"episode_return": "charts/episodic_return", "sps": "charts/SPS",
                "episode_length": "charts/episodic_length", "learning_rate": "charts/learning_rate",
                "eval_return_mean": "eval/episodic_return", "eval_return_std": "eval/episodic_return_std"}


def progress_line(global_step, total_steps, sps, recent_return):  # minutes left at sps
    minutes, recent = (total_steps - global_step) / sps / 60, recent_return
    return (f"step {global_step:,}/{total_steps:,} | {sps:,.0f} sps | {minutes:.0f} min left | "
            f"return (last 20) {'n/a' if recent is None else f'{recent:.1f}'}")
CHECKPOINT = "model.pt"


def save_checkpoint(path, models, args):  # each model's state dict under its name; the flags
    torch.save({**{name: m.state_dict() for name, m in models.items()}, "args": asdict(args)}, path)


def read_checkpoint(path):  # safely: weights_only loads tensors and plain data, never code
    return torch.load(path, map_location="cpu", weights_only=True)


def load_checkpoint(args):
    """--eval-checkpoint's (args with its MODEL_FLAGS, checkpoint), checked; (args, None)."""
    if (path := args.eval_checkpoint) is None:
        return args, None
    path = os.path.join(path, CHECKPOINT) if os.path.isdir(path) else path
    try:
        checkpoint = read_checkpoint(path)
        flags = {name: checkpoint["args"][name] for name in ("env_id", *MODEL_FLAGS)}
    except Exception as e:
        fail(f"checkpoint {path} does not exist" if not os.path.isfile(path) else f"checkpoint "
             f"{path} is not a {SCRIPT} {CHECKPOINT} ({type(e).__name__}); make one with --save-model")
    if flags["env_id"] != args.env_id:
        fail(f"checkpoint {path} was made for {flags['env_id']}; pass --env-id {flags['env_id']}")
    return replace(args, **flags), checkpoint


def cli():  # bad input: one line, status 2; Ctrl-C: dying of SIGINT stops a shell loop too
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


def decode_completions(tokenizer, completions):
    """The text of each completion [N, T]: its tokens before the end-of-sequence token."""
    texts = []
    for row in completions.tolist():
        ids = row[:row.index(tokenizer.eos_token_id)] if tokenizer.eos_token_id in row else row
        texts.append(tokenizer.decode(ids))
    return tuple(texts)


def complete(policy, prompts, **kwargs):
    """sample (kwargs) on N text prompts: (N texts, then sample's tokens [N, P + T], completion
    mask [N, T], log pi_old [N, T], masks [N, T, V] or None), the policy's tokenizer and sizes."""
    tokenizer, P = policy.tokenizer, policy.prompt_len
    prompt_tokens = encode_prompts(tokenizer, prompts, P, next(policy.parameters()).device)
    out = sample(policy, prompt_tokens, policy.max_new_tokens, tokenizer.eos_token_id,
                 pad_id_of(tokenizer), **kwargs)
    return (decode_completions(tokenizer, out[0][:, P:]), *out)
# End of plumbing/tokens.py


# ---------------------------------------------------------------------------------------
# What the plumbing asks of grpo.py: its checks, its greedy policy, its measures, its flags
# ---------------------------------------------------------------------------------------
def check_flags(args):
    """grpo.py's own flags, checked by prepare before training."""
    check_range(args, positive=["threads", "n_layer", "n_head", "n_embd", "max_new_tokens",
                                "num_prompts", "update_epochs", "num_minibatches", "learning_rate",
                                "temperature", "max_sample_rounds", "mask_sync_every",
                                "max_grad_norm", "sft_batch_size", "sft_learning_rate",
                                "eval_samples"])
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
    """grpo.py's held-out measures (held_out: a row of held_out.csv) at Run.measure's moments,
    with --eval-episodes: "warm start" every --eval-every answers of the warm start (the
    policy its own reference); "start", where GRPO begins (with --save-model, warm_start.pt
    written first), max(64, --eval-samples) answers a problem, its greedy accuracy the
    summary's start_return (the verdict measures RL's gain from it); "evaluation", with each
    --eval-every evaluation but the last; "end", measured as the start, and pass_at_k.csv
    from the two (Yue et al.'s picture). Returns the row, None where nothing is measured."""
    args, policy = run.args, run.models["policy"]
    many = max(64, args.eval_samples)  # pass_at_k.csv's pass@1..64
    if moment == "start" and args.save_model and not args.warm_start:  # for --warm-start
        save_checkpoint(os.path.join(run.path, "warm_start.pt"), {"policy": policy}, args)
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


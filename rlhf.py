# From plainrl (MIT licence, (c) 2026 the plainrl authors): keep this line in a copy.
"""RLHF: a reward model learned from preferences, then PPO on a language model, in one file;
DPO on the same preferences beside it.

The pipeline of Ziegler et al., Stiennon et al. and InstructGPT, laptop-sized, on 4-word
prompts in a small language of 16 English words, whose completions a hidden gold score rates. A
simulated labeller prefers one of two completions with the Bradley-Terry probability of their
gold scores; the policy and the reward model never see the gold score. (1) A supervised warm
start learns the language. (2) A reward model (the warm start's body with a scalar head) learns
from labelled pairs of the warm start's completions. (3) PPO samples completions, each token an
action, with a value head on the policy's body as its critic; the reward model's score lands on
the last token and a KL penalty to the frozen warm start on every token. --algo dpo replaces
(2) and (3) by DPO. Pushed far from the warm start (a small beta), the proxy keeps rising while
the gold score peaks and falls (Gao et al.): held_out.csv records both against the KL.

Key equations (prompt x, completion y = y_1..y_n, y_n the end-of-sequence token or the
T_max-th; pi the policy, pi_old the sampler, pi_ref the warm start, r_phi the reward model,
sigma the logistic function, tau the labeller's temperature; adaptive KL's n, the batch size):

    labeller       P(y_a preferred to y_b) = sigma((gold(y_a) - gold(y_b)) / tau)
    Bradley-Terry  L_RM = -log sigma(r_phi(x, y_w) - r_phi(x, y_l))   (w preferred to l)
    token reward   r_t = -beta (log pi_old(y_t) - log pi_ref(y_t)) + [t = n] r_phi(x, y)
    GAE            delta_t = r_t + gamma V(t+1) - V(t),  A_t = delta_t + gamma lambda A_{t+1},
                   V(n+1) = 0, gamma = 1: the completion is one episode
    whitening      w(z) = (z - mean z) / std z   over the batch's completion tokens
    PPO            L = mean_t max(-A_t rho_t, -A_t clip(rho_t, 1 - eps, 1 + eps))
                       + c_v mean_t max((V_t - R_t)^2, (clip(V_t, V_old +- eps_v) - R_t)^2) / 2
    adaptive KL    e = clip(KL / KL_target - 1, -0.2, 0.2),  beta <- beta (1 + e n / horizon)
    DPO            L = -log sigma(beta [log pi(y_w)/pi_ref(y_w) - log pi(y_l)/pi_ref(y_l)])

Papers: Ziegler et al. 2019, arXiv:1909.08593; Stiennon et al. 2020; Ouyang et al. 2022
(InstructGPT); Gao et al. 2023 (overoptimization); Rafailov et al. 2023 (DPO); Ramamurthy et
al. 2023 (NLPO); Schulman et al. 2016 (GAE), 2017 (PPO); Bradley and Terry 1952.

Run:
    python rlhf.py
    python rlhf.py --beta 0 --total-timesteps 40960   # no KL penalty: the gold peaks and falls

Writes runs/<env_id>__rlhf__<seed>__<unix_time>/: config.json, pairs.jsonl, reward_model.csv,
episodes.csv, updates.csv, held_out.csv, summary.json, TensorBoard's events, curve.png.
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
    env_id: str = "Preference-v0"
    """a text task with a gold score: Preference-v0, or a module:id whose module registers the id"""
    seed: int = 1
    """seeds Python, NumPy, torch and the environments"""
    # 10,240: about where the held-out gold score stops rising (results.md, "rlhf.py")
    total_timesteps: int = 10_240
    """the budget in completions: PPO counts one a prompt; DPO counts 2 a pair it trains on"""
    cuda: tyro.conf.DisallowNone[Optional[bool]] = None
    """--cuda: the GPU; --no-cuda: the CPU; neither: the CPU"""
    threads: int = 1
    """CPU threads torch may use for the networks"""
    exp_name: str = os.path.splitext(SCRIPT)[0]
    """the experiment name, part of the run folder's name"""
    eval_episodes: int = 200
    """held-out prompts of the greedy evaluation and held_out.csv, one episode each (0: neither)"""
    eval_every: int = 1024
    """the greedy evaluation and a held_out.csv row every N completions (more rows early on)"""
    eval_samples: int = 4
    """completions sampled per held-out prompt for held_out.csv's proxy, gold and KL"""
    stop_at_return: Optional[float] = None
    """stop once the mean of the last 20 training episode returns (gold scores) reaches this"""

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
    max_new_tokens: int = 8
    """T_max: the longest completion in tokens, the end-of-sequence token included"""

    # Step 1, the supervised warm start (the reference model is the policy after it)
    sft_steps: int = 1000
    """supervised steps on the task's continuations (0: the model as it is)"""
    sft_problems: int = 4000
    """how many training prompts with a continuation the warm start learns from"""
    sft_batch_size: int = 64
    """continuations in each supervised step"""
    sft_learning_rate: float = 3e-3
    """Adam's learning rate in the warm start, annealed linearly to 0"""
    warm_start: Optional[str] = None
    """start from this warm_start.pt (another run's, with --save-model) instead of training one"""

    # Step 2, the preferences and the reward model
    num_pairs: int = 4000
    """preference pairs: two warm-start completions of a training prompt, labelled"""
    pairs: Optional[str] = None
    """a pairs.jsonl (prompt, chosen, rejected a line) to learn from in place of new labels"""
    labeller_temperature: float = 0.1
    """tau: the simulated labeller's noise; 0 always prefers the higher gold score"""
    # 300: more steps overfit the pairs; chosen on seed 1; results.md, rlhf.py
    rm_steps: int = 300
    """Adam steps of the reward model on the Bradley-Terry loss"""
    rm_batch_size: int = 64
    """pairs in each reward-model step"""
    rm_learning_rate: float = 1e-3
    """Adam's learning rate of the reward model"""

    # Step 3, the algorithm
    algo: Literal["ppo", "dpo"] = "ppo"
    """ppo: the reward model's score and PPO; dpo: DPO on the pairs, no reward model in the loss"""
    num_prompts: int = 256
    """the batch: PPO's prompts sampled each update (one completion each), DPO's pairs a step"""
    # 1e-4: faster passes the gold score's peak; chosen on seed 1; results.md, rlhf.py
    learning_rate: float = 1e-4
    """Adam's learning rate of PPO"""
    # 1e-3, ten times PPO's: DPO's gradient carries a factor beta (results.md, "rlhf.py")
    dpo_learning_rate: float = 1e-3
    """Adam's learning rate of DPO (--algo dpo)"""
    update_epochs: int = 4
    """PPO's passes over each batch (4 in Ziegler et al. and TRL)"""
    num_minibatches: int = 4
    """PPO's gradient steps per pass, each on an equal share of the batch"""
    # 0.1: chosen on tuning seeds 3-4; results.md, rlhf.py
    beta: float = 0.1
    """the KL's weight: PPO's per-token penalty (Ziegler et al.: 0.02-0.2), DPO's beta (0.1-0.5)"""
    adaptive_kl: bool = False
    """Ziegler et al.'s adaptive KL controller: beta follows the KL towards --kl-target"""
    kl_target: Optional[float] = None
    """the adaptive controller's target KL per completion, in nats (needs --adaptive-kl)"""
    kl_horizon: int = 10_000
    """the adaptive controller's horizon in completions (10,000 in Ziegler et al.)"""
    gamma: float = 1.0
    """the discount over a completion's tokens (1: the completion is one episode)"""
    gae_lambda: float = 0.95
    """GAE's lambda over a completion's tokens (0.95 in Ziegler et al. and TRL)"""
    clip_coef: float = 0.2
    """eps: the policy ratio's clip range"""
    clip_coef_value: float = 0.2
    """eps_v: the value's clip range around the sampler's value"""
    vf_coef: float = 0.1
    """c_v: the value loss's weight (0.1 in TRL)"""
    whiten_rewards: bool = False
    """whiten each batch's per-token rewards, keeping their mean (TRL's whiten_rewards)"""
    top_p: float = 1.0
    """NLPO: sample only from the top-p nucleus of a masking policy (1: no mask; 0.9 in NLPO)"""
    mask_sync_every: int = 5
    """NLPO's mu: the masking policy is a copy of the policy, refreshed every mu updates"""
    max_grad_norm: float = 1.0
    """gradient clipping: the largest global norm of the gradient"""


# ---------------------------------------------------------------------------------------
# The math
# ---------------------------------------------------------------------------------------
def bradley_terry_labels(gold_a, gold_b, temperature, generator=None):
    """The simulated labeller: whether it prefers a to b in each pair, gold scores [N] ->
    bool [N], drawn with the Bradley-Terry probability (temperature 0: the higher, a on a tie):

        P(a preferred) = sigma((gold_a - gold_b) / tau)"""
    if temperature == 0:
        return gold_a >= gold_b
    p = torch.sigmoid((gold_a - gold_b) / temperature)
    return torch.rand(p.shape, generator=generator) < p


def bradley_terry_loss(chosen_scores, rejected_scores):
    """The reward model's loss on N labelled pairs, its scores [N] of the preferred and the
    other completion: the negative log-likelihood of the labels under Bradley-Terry (log 2 at
    equal scores; only their difference counts, so a reward model is fixed up to a constant),

        L = -mean log sigma(r_w - r_l)"""
    return -F.logsigmoid(chosen_scores - rejected_scores).mean()


def masked_mean(values, mask):
    """The mean of values [N, T] over the positions where mask [N, T] is 1."""
    return (values * mask).sum() / mask.sum()


def masked_whiten(values, mask, shift_mean=True):
    """Whitening over the masked positions, as TRL's masked_whiten (m the masked mean, s^2 the
    unbiased masked variance): the mean shifted to 0, or with shift_mean=False kept (m added back).

        w = (values - m) / sqrt(s^2 + 1e-8)"""
    mean = masked_mean(values, mask)
    k = mask.sum()
    variance = masked_mean((values - mean) ** 2, mask) * k / (k - 1)  # unbiased: sum / (k - 1)
    whitened = (values - mean) * torch.rsqrt(variance + 1e-8)
    return whitened if shift_mean else whitened + mean


def kl_penalized_rewards(scores, logprobs, ref_logprobs, completion_mask, beta):
    """Ziegler et al.'s per-token reward, the reward model's score [N] on the last token (y_n).
    logprobs, ref_logprobs, completion_mask [N, T] (0/1 floats) -> rewards [N, T], 0 after y_n:

        r_t = -beta (log pi_old(y_t) - log pi_ref(y_t)) + [t = n] score

    The sum over t is score - beta times the sampled estimate of KL(pi_old || pi_ref)."""
    rewards = -beta * (logprobs - ref_logprobs) * completion_mask
    last = completion_mask.sum(1).long() - 1
    rewards[torch.arange(len(rewards)), last] += scores
    return rewards


def compute_gae(rewards, values, completion_mask, gamma, gae_lambda):
    """Generalized advantage estimation, one episode a completion (all 0 after its end, so
    V(n+1) = 0): rewards, values, completion_mask [N, T] -> (advantages A, returns R) [N, T]:

        delta_t = r_t + gamma V_{t+1} - V_t
        A_t     = delta_t + gamma lambda A_{t+1}
        R_t     = A_t + V_t   (the value's target)"""
    values, rewards = values * completion_mask, rewards * completion_mask
    advantages, next_advantage = torch.zeros_like(rewards), 0.0
    for t in reversed(range(rewards.shape[1])):
        next_value = values[:, t + 1] if t + 1 < rewards.shape[1] else 0.0
        delta = rewards[:, t] + gamma * next_value - values[:, t]
        advantages[:, t] = delta + gamma * gae_lambda * next_advantage
        next_advantage = advantages[:, t]
    advantages = advantages * completion_mask
    return advantages, (advantages + values) * completion_mask


class AdaptiveKLController:
    """Ziegler et al.'s controller of beta: after a batch of n completions whose KL to the
    reference was KL (nats per completion), beta grows while KL is above its target:

        e    = clip(KL / KL_target - 1, -0.2, 0.2)
        beta = beta * (1 + e * n / horizon)"""

    def __init__(self, beta, target, horizon):
        self.beta, self.target, self.horizon = beta, target, horizon

    def update(self, kl, n_steps):
        error = float(np.clip(kl / self.target - 1, -0.2, 0.2))
        self.beta *= 1 + error * n_steps / self.horizon
        return self.beta


def ppo_loss(logprobs, old_logprobs, advantages, values, old_values, returns,
             completion_mask, clip_coef, clip_coef_value, vf_coef):
    """PPO's loss on a minibatch of completions ([N, T] tensors), every term a mean over
    completion tokens -> (L, pg, vf, the fraction of clipped ratios):

        rho = exp(logprobs - old_logprobs)
        pg  = max(-A rho, -A clip(rho, 1 - eps, 1 + eps))
        vf  = max((V - R)^2, (V_old + clip(V - V_old, -eps_v, eps_v) - R)^2) / 2
        L   = pg + c_v vf"""
    ratio = torch.exp(logprobs - old_logprobs)
    pg = torch.max(-advantages * ratio,
                   -advantages * torch.clamp(ratio, 1 - clip_coef, 1 + clip_coef))
    clipped_values = old_values + torch.clamp(values - old_values, -clip_coef_value,
                                              clip_coef_value)
    vf = 0.5 * torch.max((values - returns) ** 2, (clipped_values - returns) ** 2)
    pg, vf = masked_mean(pg, completion_mask), masked_mean(vf, completion_mask)
    clipfrac = masked_mean(((ratio - 1).abs() > clip_coef).float(), completion_mask)
    return pg + vf_coef * vf, pg, vf, clipfrac


def dpo_loss(chosen_logps, rejected_logps, ref_chosen_logps, ref_rejected_logps, beta):
    """DPO's loss on N pairs, each term a completion's summed log-probability [N] under the
    policy or the frozen reference:

        L = -mean log sigma(beta [(log pi(y_w) - log pi_ref(y_w)) - (log pi(y_l) - log pi_ref(y_l))])

    Returns (L, chosen, rejected): the implicit rewards beta log pi/pi_ref [N], detached."""
    chosen = beta * (chosen_logps - ref_chosen_logps)
    rejected = beta * (rejected_logps - ref_rejected_logps)
    return -F.logsigmoid(chosen - rejected).mean(), chosen.detach(), rejected.detach()


class RolloutBuffer:
    """A batch of completions on the device, all PPO's update needs: tokens [N, P + T]; the
    completion mask, log pi_old, V_old, advantages, returns [N, T]; NLPO's masks [N, T, V]."""

    def __init__(self, tokens, completion_mask, old_logprobs, old_values, advantages, returns,
                 action_masks=None):
        self.tokens, self.completion_mask = tokens, completion_mask
        self.old_logprobs, self.old_values = old_logprobs, old_values
        self.advantages, self.returns, self.action_masks = advantages, returns, action_masks

    def minibatches(self, num_minibatches):
        """Index tensors of num_minibatches shares of the completions, shuffled."""
        return torch.randperm(len(self.tokens), device=self.tokens.device).chunk(num_minibatches)

    def masks_of(self, idx):
        return None if self.action_masks is None else self.action_masks[idx]


# ---------------------------------------------------------------------------------------
# The task: a small language of English words, a hidden gold score, prompts to continue
# ---------------------------------------------------------------------------------------
# Its grammar in one sentence: each word is followed by a word of the next class, round the
# cycle noun -> verb -> adverb -> adjective -> noun ("film looks very good gift is ...").
CLASSES = {"noun": ("joy", "gift", "film", "pain"), "verb": ("is", "seems", "looks", "feels"),
           "adverb": ("truly", "very", "quite", "barely"),
           "adjective": ("great", "good", "bad", "awful")}
WORDS = tuple(w for words in CLASSES.values() for w in words)
SUCCESSORS = {w: CLASSES[b] for a, b in zip(CLASSES, [*CLASSES][1:] + ["noun"]) for w in CLASSES[a]}
# Each word's hidden sentiment, the labeller's taste: the policy and reward model never see it
SENTIMENT = {"joy": 1, "gift": 0.5, "film": 0, "pain": -1, "is": 0, "seems": 0, "looks": 0,
             "feels": 0, "truly": 0.5, "very": 0, "quite": 0, "barely": -0.5, "great": 1,
             "good": 0.5, "bad": -0.5, "awful": -1}


def gold_score(prompt, completion):
    """The hidden gold score of a completion of the prompt: its words' mean sentiment, less 2
    times the share of its transitions (from the prompt's last word) the grammar forbids; -1
    if empty. A word not of the language has sentiment -1 and no successor (--model's can)."""
    answer = completion.split()
    if not answer:
        return -1.0
    words = prompt.split()[-1:] + answer
    ungrammatical = sum(b not in SUCCESSORS.get(a, ()) for a, b in zip(words, words[1:]))
    sentiment = np.mean([SENTIMENT.get(w, -1.0) for w in answer])
    return float(sentiment - 2 * ungrammatical / len(answer))


class PreferenceEnv(gym.Env):
    """A text task with a hidden gold score: reset() poses 4 grammatical words (a random walk
    of the grammar), step(completion) returns its gold score and ends the episode. A tenth of
    the prompts (by a hash, fixed for ever) are held out: training never poses them, the
    evaluation only them. info["answer"], the warm start's target: a walk of 2 to 7 words."""
    metadata = {"render_modes": ["rgb_array"], "render_fps": 1}

    def __init__(self, prompt_len=4, max_len=7, held_out=False, render_mode=None):
        self.prompt_len, self.max_len = prompt_len, max_len
        self.held_out, self.render_mode = held_out, render_mode
        self.observation_space = WordText(prompt_len, WORDS, min_words=prompt_len)
        self.action_space = WordText(max_len, WORDS)  # Text of whole words, below the banner
        self.prompt, self.completion = "", ""

    def walk(self, word, length):  # length words, each one its predecessor's successor
        words = [word]
        for _ in range(length):
            words.append(SUCCESSORS[words[-1]][self.np_random.integers(4)])
        return words[1:]

    def reset(self, seed=None, options=None):
        super().reset(seed=seed)
        while True:
            first = WORDS[self.np_random.integers(len(WORDS))]
            prompt = " ".join([first] + self.walk(first, self.prompt_len - 1))
            is_held_out = zlib.crc32(prompt.encode()) % 10 == 0  # a tenth of the prompts
            if is_held_out == self.held_out:  # the kind this environment poses
                break
        self.prompt, self.completion = prompt, ""
        length = int(self.np_random.integers(2, self.max_len + 1))
        return prompt, {"answer": " ".join(self.walk(prompt.split()[-1], length))}

    def step(self, action):
        self.completion = action
        return self.prompt, gold_score(self.prompt, action), True, False, {}

    def render(self):  # the frame --capture-video records (draw_words, below)
        return draw_words(self.prompt, self.completion, self.prompt_len, self.max_len)


def register_tasks():
    """Register Preference-v0 (4-word prompts, completions of up to 7 words)."""
    if "Preference-v0" not in gym.registry:
        gym.register("Preference-v0", entry_point=PreferenceEnv)


# ---------------------------------------------------------------------------------------
# The transformer and the sampler (stamped as in grpo.py)
# ---------------------------------------------------------------------------------------
# Token helpers below the banner: encode_prompts, encode_texts, decode_completions, pad_id_of
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


# ---------------------------------------------------------------------------------------
# Networks: the policy with its value head, the reward model (HFModel, below, wraps --model's LM)
# ---------------------------------------------------------------------------------------
class PolicyWithValue(nn.Module):
    """The policy and its critic on one body (Ziegler et al., TRL): the LM's logits and a linear
    value head V on its hidden states, 0 at first. tokens [N, L] -> (logits, values [N, L]).
    make_policy (below) builds it and sets its tokenizer, prompt_len and max_new_tokens."""

    def __init__(self, lm):
        super().__init__()
        self.lm, self.v_head = lm, nn.Linear(lm.hidden_size, 1)
        nn.init.zeros_(self.v_head.weight)
        nn.init.zeros_(self.v_head.bias)

    def forward(self, tokens):
        logits, hidden = self.lm(tokens)
        return logits, self.v_head(hidden).squeeze(-1)


class RewardModel(nn.Module):
    """r_phi: a copy of the warm start's body (as InstructGPT's, from its SFT model), a scalar
    head read at the completion's last token. (tokens, completion_mask) -> scores [N]."""

    def __init__(self, lm, prompt_len):
        super().__init__()
        self.lm, self.prompt_len = copy.deepcopy(lm), prompt_len
        self.head = nn.Linear(lm.hidden_size, 1)

    def forward(self, tokens, completion_mask):
        _, hidden = self.lm(tokens)
        last = self.prompt_len + completion_mask.sum(1).long() - 1
        return self.head(hidden[torch.arange(len(tokens)), last]).squeeze(-1)


def completion_outputs(model, tokens, prompt_len):
    """completion_logits with the value head's output: tokens [N, P + T] -> (logits [N, T, V],
    values [N, T]), both of the state before each completion token (hence [P - 1:-1])."""
    logits, values = model(tokens)
    return logits[:, prompt_len - 1:-1], values[:, prompt_len - 1:-1]


def sequence_logprobs(model, tokens, prompt_len, completion_mask):
    """log pi(y | x), the sum of a completion's token log-probabilities [N] (DPO's terms)."""
    logits, _ = completion_outputs(model, tokens, prompt_len)
    return (token_logprobs(logits, tokens[:, prompt_len:]) * completion_mask).sum(1)


def make_vector_env(env_id, num_envs, video_folder=None, held_out=True):
    """N copies of a text task (make_env, below) with episode statistics: held-out prompts (the
    default) or training ones. SAME_STEP: an ended episode resets in its step (the next prompts)."""

    envs = gym.vector.SyncVectorEnv(  # make_env: gym.make, filmed into a video_folder if given
        [lambda i=i: make_env(env_id, held_out, video_folder, i) for i in range(num_envs)],
        autoreset_mode=gym.vector.AutoresetMode.SAME_STEP)
    return gym.wrappers.vector.RecordEpisodeStatistics(envs)  # info["_episode"]: which ended


# ---------------------------------------------------------------------------------------
# Steps 1 and 2: the warm start, the preference pairs, the reward model
# ---------------------------------------------------------------------------------------
def warm_start(args, policy):
    """Supervised fine-tuning: cross-entropy on the continuations (info["answer"]) of
    --sft-problems training prompts, over each continuation's tokens and its <eos>."""
    if not args.sft_steps:
        return
    env, tokenizer, P = gym.make(args.env_id, held_out=False), policy.tokenizer, policy.prompt_len
    device = next(policy.parameters()).device
    resets = [env.reset(seed=(args.seed + 200_000 if k == 0 else None))  # a stream of its own
              for k in range(args.sft_problems)]
    prompts = [prompt for prompt, _ in resets]
    answers = [info["answer"] for _, info in resets]
    env.close()
    tokens, answer_mask = encode_texts(tokenizer, prompts, answers, P, args.max_new_tokens, device)
    optimizer = torch.optim.Adam(policy.parameters(), lr=args.sft_learning_rate)
    for step in range(args.sft_steps):
        optimizer.param_groups[0]["lr"] = args.sft_learning_rate * (1 - step / args.sft_steps)
        idx = torch.randint(len(tokens), (args.sft_batch_size,), device=device)
        logits, _ = completion_outputs(policy, tokens[idx], P)
        nll = F.cross_entropy(logits.transpose(1, 2), tokens[idx, P:], reduction="none")
        loss = masked_mean(nll, answer_mask[idx])
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()


def preference_pairs(args, policy, envs):
    """--num-pairs labelled pairs {prompt, chosen, rejected}: two warm-start completions of each
    training prompt, labelled by bradley_terry_labels from their gold scores (the labeller's
    alone). The environments come in twos, each two reset with one seed. So each two pose the
    same prompts for ever: a step draws only the next prompt's random numbers, alike in both."""
    n, generator = envs.num_envs // 2, torch.Generator().manual_seed(args.seed)
    seeds = np.random.default_rng(args.seed + 300_000).integers(2 ** 31, size=n)  # own stream
    prompts, _ = envs.reset(seed=[int(s) for s in seeds for _ in range(2)])
    rows = []
    while len(rows) < args.num_pairs:
        texts = complete(policy, prompts)[0]
        asked = prompts
        prompts, gold, _, _, _ = envs.step(texts)  # and the next prompts
        gold = torch.tensor(gold, dtype=torch.float32).view(n, 2)
        prefer_a = bradley_terry_labels(gold[:, 0], gold[:, 1], args.labeller_temperature,
                                        generator)
        for i in range(n):
            a, b = texts[2 * i], texts[2 * i + 1]
            if a != b:  # two equal completions teach nothing
                chosen, rejected = (a, b) if prefer_a[i] else (b, a)
                rows.append({"prompt": asked[2 * i], "chosen": chosen, "rejected": rejected})
    return rows[:args.num_pairs]


def train_reward_model(args, policy, pairs, run):
    """r_phi from the pairs: Adam steps of the Bradley-Terry loss on batches from all but the
    first tenth, held out for reward_model_row's loss and accuracy (reward_model.csv, below).
    Returns it frozen, normalized (Ziegler et al.): scores of mean 0, std 1 on the pairs."""
    P, device = policy.prompt_len, next(policy.parameters()).device
    reward_model = RewardModel(policy.lm, P).to(device)
    encoded = encode_pairs(policy.tokenizer, pairs, P, args.max_new_tokens, device)
    chosen_tokens, chosen_mask, rejected_tokens, rejected_mask = encoded  # encode_texts's, twice
    n_test = max(1, len(pairs) // 10)  # the first tenth of the pairs: never trained on
    held_out_pairs = [x[:n_test] for x in encoded]
    optimizer = torch.optim.Adam(reward_model.parameters(), lr=args.rm_learning_rate)
    for step in range(1, args.rm_steps + 1):
        idx = torch.randint(n_test, len(pairs), (args.rm_batch_size,), device=device)
        loss = bradley_terry_loss(reward_model(chosen_tokens[idx], chosen_mask[idx]),
                                  reward_model(rejected_tokens[idx], rejected_mask[idx]))
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        if step % 100 == 0 or step == args.rm_steps:  # negative steps, the last at RL's step 0
            reward_model_row(run, reward_model, held_out_pairs, step - args.rm_steps, loss.item())
    with torch.no_grad():  # r <- (r - mean r) / std r on the pairs' (warm start's) completions
        scores = torch.cat([reward_model(chosen_tokens, chosen_mask),
                            reward_model(rejected_tokens, rejected_mask)])
        reward_model.head.bias -= scores.mean()
        reward_model.head.weight /= scores.std()
        reward_model.head.bias /= scores.std()
    return frozen_copy(reward_model)


# ---------------------------------------------------------------------------------------
# Training (run, a RunWriter, below the banner, writes the run folder)
# ---------------------------------------------------------------------------------------
#   step(n): the progress line; each --eval-every completions, the greedy evaluation
#   episode(n, return, length): a row of episodes.csv
#   update(n, **values): a row of updates.csv, then measure(n, "update")
#   measure(n, moment): held_out.csv's sampled gold, proxy and KL; at "start" the greedy gold too
#   reached(x, n): whether the last 20 returns' mean reached x (None: never), n to summary.json
#   non_finite(loss, n): whether the loss is NaN or inf (it prints so, marks the run interrupted)
PAIRS_PER_DRAW = 256  # the prompts sampled at once for the pairs, each by two environments


def train(args, policy, envs, run):
    """The warm start, the labelled pairs, the reward model, then PPO (--algo dpo: train_dpo)
    until the budget, --stop-at-return or a non-finite loss."""
    P = policy.prompt_len
    if args.warm_start:  # read_checkpoint: another run's warm_start.pt, weights only
        policy.load_state_dict(read_checkpoint(args.warm_start)["policy"])
    else:
        warm_start(args, policy)
        if args.save_model:  # save_checkpoint: the state dict and the flags
            save_checkpoint(os.path.join(run.path, "warm_start.pt"), {"policy": policy}, args)
    run.reference = reference = frozen_copy(policy)  # pi_ref: where RL starts (measure's KL)
    if args.pairs:  # read_pairs: another run's pairs.jsonl (or your own), checked
        pairs = read_pairs(args.pairs, policy.tokenizer, P)
    else:
        pairs_envs = make_vector_env(args.env_id, 2 * PAIRS_PER_DRAW, held_out=False)
        pairs = preference_pairs(args, policy, pairs_envs)
        pairs_envs.close()
    write_pairs(run.path, pairs)  # pairs.jsonl, a JSON object a line
    run.reward_model = reward_model = train_reward_model(args, policy, pairs, run)  # measure's too
    run.measure(0, "start")  # summary.json's end_return: the final greedy gold less this
    if args.algo == "dpo":
        return train_dpo(args, policy, reference, pairs, run)
    mask_model = frozen_copy(policy) if args.top_p < 1 else None  # NLPO's masking policy
    optimizer = torch.optim.Adam(policy.parameters(), lr=args.learning_rate)
    kl_controller = AdaptiveKLController(args.beta, args.kl_target, args.kl_horizon)
    N = args.num_prompts
    budget = args.total_timesteps // N * N  # whole batches
    global_step = 0
    prompts, _ = envs.reset(seed=args.seed)
    while global_step < budget:
        # Sample: a completion of each prompt; the task's gold score is logged, never learned.
        texts, tokens, completion_mask, logprobs, action_masks = complete(
            policy, prompts, mask_model=mask_model, top_p=args.top_p)
        prompts, gold, _, _, info = envs.step(texts)  # and the next prompts
        global_step += N
        run.step(global_step)
        for i in np.flatnonzero(info["_episode"]):  # the ended ones: "r" return, "l" length
            run.episode(global_step, info["episode"]["r"][i], info["episode"]["l"][i])
        if run.reached(args.stop_at_return, global_step):
            return

        # Targets: the reward model's score and the KL penalty per token, GAE, whitening.
        with torch.no_grad():
            scores = reward_model(tokens, completion_mask)
            ref_logits, _ = completion_outputs(reference, tokens, P)
            ref_logprobs = token_logprobs(ref_logits, tokens[:, P:])
            values = completion_outputs(policy, tokens, P)[1] * completion_mask
        beta = kl_controller.beta  # the beta this batch's rewards use, the one logged
        rewards = kl_penalized_rewards(scores, logprobs, ref_logprobs, completion_mask, beta)
        if args.whiten_rewards:
            rewards = masked_whiten(rewards, completion_mask, shift_mean=False) * completion_mask
        advantages, returns = compute_gae(rewards, values, completion_mask, args.gamma,
                                          args.gae_lambda)
        advantages = masked_whiten(advantages, completion_mask) * completion_mask
        buffer = RolloutBuffer(tokens, completion_mask, logprobs, values, advantages, returns,
                               action_masks)

        # Update: epochs of minibatch steps on PPO's loss, the value head's term with it.
        stats = []
        for epoch in range(args.update_epochs):
            for idx in buffer.minibatches(args.num_minibatches):
                logits, new_values = completion_outputs(policy, buffer.tokens[idx], P)
                new_logprobs = token_logprobs(logits, buffer.tokens[idx, P:],
                                              action_masks=buffer.masks_of(idx))
                minibatch_mask = buffer.completion_mask[idx]
                new_logprobs = new_logprobs * minibatch_mask  # 0 after the end, as the sampler's
                loss, pg_loss, v_loss, clipfrac = ppo_loss(
                    logprobs=new_logprobs, old_logprobs=buffer.old_logprobs[idx],
                    advantages=buffer.advantages[idx], values=new_values,
                    old_values=buffer.old_values[idx], returns=buffer.returns[idx],
                    completion_mask=minibatch_mask, clip_coef=args.clip_coef,
                    clip_coef_value=args.clip_coef_value, vf_coef=args.vf_coef)
                optimizer.zero_grad()
                loss.backward()
                nn.utils.clip_grad_norm_(policy.parameters(), args.max_grad_norm)
                optimizer.step()
                logp = torch.log_softmax(logits.detach(), dim=-1)
                entropy = masked_mean(-(logp.exp() * logp).sum(-1), minibatch_mask)
                stats.append((pg_loss.item(), v_loss.item(), clipfrac.item(), entropy.item()))
        if mask_model is not None and (global_step // N) % args.mask_sync_every == 0:
            mask_model.load_state_dict(policy.state_dict())  # NLPO: the mask follows the policy

        if run.non_finite(loss.item(), global_step):
            return
        kl = ((logprobs - ref_logprobs) * completion_mask).sum(1).mean().item()  # nats a completion
        if args.adaptive_kl:  # check_args's check_flags made sure of --kl-target
            kl_controller.update(kl, N)
        pg_loss, v_loss, clipfrac, entropy = np.mean(stats, axis=0)
        run.update(global_step, policy_loss=pg_loss, value_loss=v_loss, clipfrac=clipfrac,
                   entropy=entropy, kl=kl, beta=beta, score=scores.mean().item(),
                   gold=float(np.mean(gold)),
                   completion_length=completion_mask.sum(1).mean().item())


def train_dpo(args, policy, reference, pairs, run):
    """DPO: Adam steps on --num-prompts pairs each, from shuffled passes over the pairs, until
    --total-timesteps completions (2 a pair); held_out.csv as PPO's, run.reward_model its proxy."""
    P, T, N = policy.prompt_len, args.max_new_tokens, args.num_prompts
    device = next(policy.parameters()).device
    chosen_tokens, chosen_mask, rejected_tokens, rejected_mask = encode_pairs(
        policy.tokenizer, pairs, P, T, device)
    with torch.no_grad():
        ref_chosen = sequence_logprobs(reference, chosen_tokens, P, chosen_mask)
        ref_rejected = sequence_logprobs(reference, rejected_tokens, P, rejected_mask)
    optimizer = torch.optim.Adam(policy.parameters(), lr=args.dpo_learning_rate)
    steps = args.total_timesteps // (2 * N)
    order = torch.cat([torch.randperm(len(pairs), device=device)
                       for _ in range(steps * N // len(pairs) + 1)])
    for step in range(1, steps + 1):
        idx = order[(step - 1) * N:step * N]
        loss, chosen, rejected = dpo_loss(
            chosen_logps=sequence_logprobs(policy, chosen_tokens[idx], P, chosen_mask[idx]),
            rejected_logps=sequence_logprobs(policy, rejected_tokens[idx], P, rejected_mask[idx]),
            ref_chosen_logps=ref_chosen[idx], ref_rejected_logps=ref_rejected[idx], beta=args.beta)
        optimizer.zero_grad()
        loss.backward()
        nn.utils.clip_grad_norm_(policy.parameters(), args.max_grad_norm)
        optimizer.step()
        global_step = 2 * N * step
        run.step(global_step)
        if run.non_finite(loss.item(), global_step):
            return
        run.update(global_step, dpo_loss=loss.item(), chosen_reward=chosen.mean().item(),
                   rejected_reward=rejected.mean().item(),
                   pair_accuracy=(chosen > rejected).float().mean().item())


def main(args: Args) -> dict:
    """Train (or evaluate an --eval-checkpoint), write the run folder, return the summary."""
    # Functions not defined above are the plumbing's, below the banner; check_* stop bad input.
    register_tasks()  # Preference-v0, before any environment is made
    check_args(args)
    args, checkpoint = load_checkpoint(args)  # --eval-checkpoint's model.pt and model flags
    tokenizer, prompt_len = check_env(args)  # check_spaces: tokens <eos>, one a word; or --model's

    # Set up: seed_and_device seeds and picks the device; the policy; the run folder.
    device = seed_and_device(args.seed, args.cuda, args.threads)
    policy = make_policy(args, tokenizer, prompt_len).to(device)
    models = {"policy": policy}  # what model.pt holds (the reference is its warm start)
    if checkpoint is not None:
        restore(checkpoint, models, args)  # its weights into the policy
    # RunWriter prints "rlhf.py: <env>, seed <s>" + note, then progress to a budget of whole batches
    run = RunWriter(args, device, models, rollout_steps=args.num_prompts,
                    note=f", {args.algo}, " + (args.model or "built-in model"))

    # train_and_finish: train() (not with --eval-checkpoint), then evaluate, save, write, plot.
    envs = None if checkpoint else make_vector_env(args.env_id, args.num_prompts, held_out=False)
    return train_and_finish(run, lambda: train(args, policy, envs, run), envs)


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
# What the plumbing asks of rlhf.py: its checks, its policy, its measures, its flags
# ---------------------------------------------------------------------------------------
def check_flags(args):
    """rlhf.py's own flags, checked before any environment is made."""
    for name in ("threads", "n_layer", "n_head", "n_embd", "max_new_tokens", "num_prompts",
                 "update_epochs", "num_minibatches", "learning_rate", "dpo_learning_rate",
                 "mask_sync_every", "max_grad_norm", "sft_batch_size", "sft_learning_rate",
                 "rm_batch_size", "rm_learning_rate", "eval_samples", "kl_horizon"):
        if not getattr(args, name) > 0:
            fail(f"--{name.replace('_', '-')} must be positive, got {getattr(args, name)}")
    for name in ("sft_steps", "sft_problems", "rm_steps", "labeller_temperature", "vf_coef"):
        if getattr(args, name) < 0:
            fail(f"--{name.replace('_', '-')} must be 0 or more, got {getattr(args, name)}")
    if args.sft_steps and not args.sft_problems:
        fail("--sft-steps needs --sft-problems 1 or more to learn from (or --sft-steps 0)")
    if args.beta < 0:
        fail(f"--beta must be 0 or more, got {args.beta}: it weighs the KL to the reference")
    if args.kl_target is not None and not args.adaptive_kl:
        fail("--kl-target is the adaptive KL controller's target; give --adaptive-kl too "
             "(or drop --kl-target for a fixed --beta)")
    if args.adaptive_kl and (args.kl_target is None or args.kl_target <= 0):
        fail(f"--adaptive-kl steers beta towards --kl-target, a positive KL in nats; got {args.kl_target}")
    other = ("learning_rate", "ppo") if args.algo == "dpo" else ("dpo_learning_rate", "dpo")
    if getattr(args, other[0]) != getattr(Args, other[0]):  # a rate the run would not use
        fail(f"--{other[0].replace('_', '-')} is {other[1].upper()}'s rate, unused with --algo "
             f"{args.algo}; give --{'dpo-' if args.algo == 'dpo' else ''}learning-rate instead")
    if args.adaptive_kl and args.algo == "dpo":
        fail("--adaptive-kl steers PPO's penalty; DPO's beta is fixed (drop it with --algo dpo)")
    if args.adaptive_kl and args.beta == 0:
        fail("--adaptive-kl multiplies beta, which stays 0 from --beta 0; start it above 0")
    check_paths(args)  # --warm-start's, --pairs's and --model's
    if args.pairs is None and args.num_pairs < 10:
        fail(f"--num-pairs must be at least 10 (a tenth is held out), got {args.num_pairs}")
    if not 0 <= args.gamma <= 1 or not 0 <= args.gae_lambda <= 1:
        fail(f"--gamma and --gae-lambda must be in [0, 1], got {args.gamma} and {args.gae_lambda}")
    if not (0 < args.clip_coef < 1 and args.clip_coef_value > 0):
        fail(f"--clip-coef must be in (0, 1) and --clip-coef-value positive, got "
             f"{args.clip_coef} and {args.clip_coef_value}")
    if not 0 < args.top_p <= 1:
        fail(f"--top-p must be in (0, 1], got {args.top_p}")
    if args.n_embd % args.n_head:
        fail(f"--n-embd {args.n_embd} is not divisible by --n-head {args.n_head}")
    if args.num_minibatches > args.num_prompts:
        fail(f"--num-minibatches {args.num_minibatches} is more than the batch's "
             f"{args.num_prompts} completions (--num-prompts)")
    batch = args.num_prompts * (2 if args.algo == "dpo" else 1)  # DPO's: 2 completions a pair
    if args.eval_checkpoint is None and 0 < args.total_timesteps < batch:
        fail(f"--total-timesteps {args.total_timesteps} is less than one batch ({batch} "
             f"completions of --num-prompts {args.num_prompts}); raise it or shrink the batch")


# rlhf.py's special token: <eos> (0) ends a completion and pads, as GPT-2's <|endoftext|>: with
# no padding token of its own, the policy cannot sample one in the middle of a completion
# (grpo.py has <pad> 0 and <eos> 1)
SPECIAL_TOKENS = ("<eos>",)


def check_spaces(args, obs_space, action_space):
    """Whether rlhf.py handles the task: Text observations (prompts) and Text actions
    (completions), a tokenizer that writes both (the built-in one: a token a word of a
    WordText space, else a token a character; or --model's), info["answer"] at reset for the
    warm start and --pairs's file (check_data).
    Returns (tokenizer, the prompt's length in tokens: the observation space's longest text,
    in words or characters)."""
    if not all(isinstance(space, gym.spaces.Text) for space in (obs_space, action_space)):
        fail(f"{args.env_id} has a {type(obs_space).__name__} observation and a "
             f"{type(action_space).__name__} action space; rlhf.py needs Text for both (a "
             "prompt in, a completion out); for other spaces see ppo.py")
    characters = "".join(sorted(obs_space.character_set | action_space.character_set))
    words = getattr(obs_space, "words", None)  # WordText's vocabulary: a token a word
    if args.model is not None:  # its tokens: at most a character each, or the words' own
        texts = characters if words is None else (*words, " ".join(words))  # what it must write
        tokenizer, prompt_len = load_tokenizer(args, texts), obs_space.max_length
        if words is not None:  # each word alone, or after a space as in a sentence
            prompt_len = obs_space.max_words * max(len(tokenizer.encode(
                text, add_special_tokens=False)) for w in words for text in (w, " " + w))
    elif words is not None:
        vocabulary = set(words) | set(getattr(action_space, "words", ()))
        tokenizer, prompt_len = Tokenizer(vocabulary, SPECIAL_TOKENS), obs_space.max_words
    else:
        tokenizer, prompt_len = Tokenizer(characters, SPECIAL_TOKENS), obs_space.max_length
    check_data(args, tokenizer, prompt_len)  # the warm start's, --pairs's
    return tokenizer, prompt_len


def make_policy(args, tokenizer, prompt_len):
    """The built-in GPT sized by the flags, or --model's Hugging Face causal LM, with a value
    head; it gets the tokenizer and the lengths that complete and train read."""
    if args.model is None:
        lm = GPT(len(tokenizer), prompt_len + args.max_new_tokens, args.n_layer, args.n_head,
                 args.n_embd)
    else:
        lm = load_model(args, tokenizer)
    policy = PolicyWithValue(lm)
    policy.tokenizer, policy.prompt_len, policy.max_new_tokens = (
        tokenizer, prompt_len, args.max_new_tokens)
    return policy


def greedy_policy(models, envs):
    """The evaluation's policy, act(obs, info) -> completions: greedy decoding of each
    prompt, the most likely token at each step, without NLPO's mask."""
    def act(obs, info):
        return complete(models["policy"], obs, greedy=True)[0]
    return act


def trains_on_episodes(args):
    """Whether training plays episodes, for the plumbing's hint when none ended: PPO's are its
    sampled completions; DPO learns from the pairs alone."""
    return args.algo != "dpo"


def measure(run, global_step, moment):
    """rlhf.py's held-out measures (held_out: a row of held_out.csv), at the moments of
    training RunWriter.measure names, with --eval-episodes: "start", where RL begins, the
    greedy evaluation's gold score (summary.json's start_return, what the run's verdict
    measures the gain from) and the row at step 0; "update", after an update whose batch
    crossed a multiple of --eval-every, and after the last (held_out_due). Returns the row,
    None where nothing is measured."""
    args, policy = run.args, run.models["policy"]
    if not args.eval_episodes:
        return None
    if moment == "start":
        run.summary["start_return"] = float(np.mean(evaluate(args, {"policy": policy})))
        return held_out(args, run, policy, run.reference, run.reward_model, 0)
    batch = args.num_prompts * (2 if args.algo == "dpo" else 1)  # DPO's: 2 completions a pair
    last = global_step + batch > args.total_timesteps  # no whole batch left
    if moment == "update" and held_out_due(args, global_step, batch, last):
        return held_out(args, run, policy, run.reference, run.reward_model, global_step)
    return None


def draw_own_curve(run):
    """curve.png (the stamped draw_curve hands rlhf.py's run here): held_out.csv's proxy
    (the reward model's score) and gold score against the completions of RL, with the
    final evaluation's gold and the goal (the warm start's greedy gold plus GOALS's gain),
    and beside it both against sqrt KL, Gao et al.'s axes. Returns the file's path, None
    without a held-out row."""
    path = os.path.join(run.path, "held_out.csv")
    rows = list(csv.DictReader(open(path))) if os.path.exists(path) else []
    if not rows:
        return None
    from matplotlib.figure import Figure  # only a run that draws pays for the import
    summary = run.summary
    fig = Figure(figsize=(10, 4), layout="constrained")
    ax, gao = fig.subplots(1, 2)
    steps = [int(row["global_step"]) for row in rows]
    root_kl = [math.sqrt(max(float(row["kl_to_reference"]), 0.0)) for row in rows]
    for column, style, label in (("proxy_score", "s-", "reward model's score (proxy)"),
                                 ("gold_score", "o-", "gold score (sampled)")):
        ax.plot(steps, [float(row[column]) for row in rows], style, ms=4, label=label)
        gao.plot(root_kl, [float(row[column]) for row in rows], style, ms=4, label=label)
    if summary["eval_return_mean"] is not None:
        ax.plot([summary["global_steps"]], [summary["eval_return_mean"]], "*", ms=12, color="C3",
                label="final evaluation (greedy gold)")
    if summary["holds_on"] == "gain" and summary.get("start_return") is not None:
        ax.axhline(summary["start_return"] + summary["solved_threshold"], ls="--", color="gray",
                   label=f"goal: the warm start's greedy gold + {summary['solved_threshold']:g}")
    stopped = " (interrupted)" if summary["interrupted"] else ""
    ax.set(xlabel=f"completions ({run.args.algo}: 2 a pair for DPO)", ylabel="score",
           title=f"{SCRIPT} on {summary['env_id']}, seed {summary['seed']}{stopped}")
    gao.set(xlabel="sqrt KL(pi || pi_ref), nats", ylabel="score", title="Gao et al.'s axes")
    for a in (ax, gao):
        a.grid(alpha=0.3)
        a.legend(loc="lower right", fontsize="small")
    fig.savefig(os.path.join(run.path, "curve.png"), dpi=100)
    return os.path.join(run.path, "curve.png")


# What a run is judged on, by environment id: Preference-v0's is the gain, the final greedy
# evaluation's gold score less the warm start's.
GOALS = {"Preference-v0": (0.4, 20, "gain", 10_240)}
MODEL_FLAGS = ("model", "n_layer", "n_head", "n_embd", "max_new_tokens")
# rlhf.py's columns of updates.csv as TensorBoard's scalars, under CleanRL's names
TENSORBOARD_NAMES = {
    "policy_loss": "losses/policy_loss", "value_loss": "losses/value_loss",
    "clipfrac": "losses/clipfrac", "entropy": "losses/entropy", "kl": "losses/kl",
    "beta": "charts/beta", "score": "charts/score", "gold": "charts/gold",
    "completion_length": "charts/completion_length", "dpo_loss": "losses/dpo_loss",
}


# ---------------------------------------------------------------------------------------
# rlhf.py's own plumbing: --model's Hugging Face LM, the pairs (files, tokens), the measures
# ---------------------------------------------------------------------------------------
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


def draw_words(prompt, completion, prompt_len, max_len):
    """PreferenceEnv's frame of the prompt (grey) and the completion, each word a square
    coloured by its sentiment (red -1 to green +1), an ungrammatical word's square crossed out."""
    width, size = prompt_len + max_len + 1, 16
    frame = np.full((size, width * size, 3), 235, dtype=np.uint8)
    words = prompt.split() + completion.split()
    for i, w in enumerate(words[:width]):
        s = (SENTIMENT.get(w, -1.0) + 1) / 2
        color = (128, 128, 128) if i < prompt_len else (int(255 * (1 - s)), int(255 * s), 60)
        frame[2:-2, i * size + 2:(i + 1) * size - 2] = color
        if i >= prompt_len and w not in SUCCESSORS.get(words[i - 1], ()):
            frame[size // 2 - 1:size // 2 + 1, i * size:(i + 1) * size] = 0
    return frame


class WordText(gym.spaces.Text):
    """Text of whole words: min_words to max_words words of a vocabulary, separated by single
    spaces. Its max_length (in characters) bounds a text for a tokenizer of characters;
    check_spaces gives the built-in model a token a word."""

    def __init__(self, max_words, words, min_words=0):
        longest = max(len(w) for w in words)
        super().__init__(max_words * (longest + 1), min_length=0,
                         charset="".join(sorted(set("".join(words)) | {" "})))
        self.words, self.max_words, self.min_words = tuple(words), max_words, min_words

    def contains(self, x):
        words = x.split(" ") if isinstance(x, str) and x else []
        return (isinstance(x, str) and self.min_words <= len(words) <= self.max_words
                and all(w in self.words for w in words))

    def sample(self, mask=None, probability=None):
        n = int(self.np_random.integers(self.min_words, self.max_words + 1))
        return " ".join(self.words[i] for i in self.np_random.integers(len(self.words), size=n))


# --model: a local Hugging Face causal LM and its tokenizer, in the built-in ones' places
def from_pretrained(loader, path, what):
    """loader.from_pretrained(path) from local files alone (nothing is downloaded); a folder
    it cannot load is bad input, in one line naming what was missing."""
    try:
        return loader.from_pretrained(path, local_files_only=True)
    except Exception as e:
        fail(f"--model {path} holds no {what} that transformers can load "
             f"({type(e).__name__}: {(str(e).splitlines() or [''])[0]})")


class HFModel(nn.Module):
    """A Hugging Face causal LM behind the built-in model's interface: tokens [N, L] ->
    (logits, last hidden states), padding masked out of the attention (as TRL passes it)."""

    def __init__(self, model, pad_token_id):
        super().__init__()
        self.model, self.pad_token_id = model, pad_token_id
        self.hidden_size = model.config.hidden_size

    def forward(self, tokens):
        out = self.model(input_ids=tokens, attention_mask=(tokens != self.pad_token_id).long(),
                         output_hidden_states=True)
        return out.logits.float(), out.hidden_states[-1].float()


def load_model(args, tokenizer):
    """--model's causal LM, in HFModel: the language model of make_policy's policy."""
    from transformers import AutoModelForCausalLM  # only with --model
    return HFModel(from_pretrained(AutoModelForCausalLM, args.model, "causal LM"),
                   pad_id_of(tokenizer))


def load_tokenizer(args, texts):
    """--model's tokenizer, which must end a completion (an end-of-sequence token) and write
    each of the task's texts back as it was: each character of a Text task's, or each word of
    a WordText task's and a sentence of them all."""
    from transformers import AutoTokenizer  # only with --model
    tokenizer = from_pretrained(AutoTokenizer, args.model, "tokenizer")
    if tokenizer.eos_token_id is None:
        fail(f"--model {args.model}'s tokenizer has no end-of-sequence token to end a completion")
    cannot = []
    for text in texts:
        try:
            if tokenizer.decode(tokenizer.encode(text, add_special_tokens=False)) != text:
                cannot.append(text)
        except Exception:  # a tokenizer of words without an unknown token raises on a letter
            cannot.append(text)
    if cannot:
        written = "".join(cannot) if isinstance(texts, str) else ", ".join(cannot[:3])
        fail(f"--model {args.model}'s tokenizer cannot write {written!r}, which "
             f"{args.env_id}'s prompts and completions use; pick a tokenizer that can")
    return tokenizer


def check_data(args, tokenizer, prompt_len):
    """check_spaces's checks of what training will read: the task's info["answer"] at reset,
    the continuations the supervised warm start learns from (with --sft-steps 0 it needs
    none), and --pairs's file (read_pairs's checks)."""
    if args.sft_steps:
        env = gym.make(args.env_id, held_out=False)
        _, info = env.reset(seed=0)
        env.close()
        if info.get("answer") is None:
            fail(f"{args.env_id} gives no info['answer'] at reset for the supervised warm "
                 "start; train with --sft-steps 0")
    if args.pairs:
        read_pairs(args.pairs, tokenizer, prompt_len)


def check_paths(args):
    """check_flags's checks that --warm-start and --pairs name files and --model a folder
    (what they hold is read later: read_checkpoint, read_pairs, from_pretrained)."""
    if args.warm_start is not None and not os.path.isfile(args.warm_start):
        fail(f"--warm-start {args.warm_start} is not a file; give a run's warm_start.pt "
             "(written with --save-model)")
    if args.pairs is not None and not os.path.isfile(args.pairs):
        fail(f"--pairs {args.pairs} is not a file; give a run's pairs.jsonl")
    if args.model is not None and not os.path.isdir(args.model):
        fail(f"--model {args.model} is not a folder; give the local folder of a Hugging Face "
             "causal LM and its tokenizer (save_pretrained writes one)")


def read_pairs(path, tokenizer, prompt_len):
    """Preference pairs from a JSON-lines file (a run's pairs.jsonl, or your own): each line
    {"prompt": str, "chosen": str, "rejected": str}, chosen != rejected, every character
    one the tokenizer writes, a prompt of at most prompt_len tokens, at least 10 pairs. Anything else is bad input (one line, exit
    status 2). JSON only: nothing is unpickled."""
    rows = []
    with open(path) as f:
        for number, line in enumerate(f, start=1):
            if not line.strip():
                continue
            try:
                row = json.loads(line)
            except json.JSONDecodeError as e:
                fail(f"--pairs {path}, line {number}: not JSON ({e.msg})")
            if not (isinstance(row, dict) and all(isinstance(row.get(k), str)
                                                  for k in ("prompt", "chosen", "rejected"))):
                fail(f"--pairs {path}, line {number}: a pair is an object with the strings "
                     "prompt, chosen and rejected")
            if row["chosen"] == row["rejected"]:
                fail(f"--pairs {path}, line {number}: chosen and rejected are the same "
                     "completion, not a pair")
            try:
                for key in ("prompt", "chosen", "rejected"):
                    tokenizer.encode(row[key], add_special_tokens=False)
            except KeyError as e:  # '': an empty word, between two spaces or at an end
                what = repr(e.args[0]) if e.args[0] else "two spaces in a row or one at an end"
                fail(f"--pairs {path}, line {number}: {key} holds {what}, which the "
                     "tokenizer cannot write")
            if len(tokenizer.encode(row["prompt"], add_special_tokens=False)) > prompt_len:
                fail(f"--pairs {path}, line {number}: the prompt {row['prompt']!r} is longer "
                     f"than the task's prompts ({prompt_len} tokens)")
            rows.append({k: row[k] for k in ("prompt", "chosen", "rejected")})
    if len(rows) < 10:
        fail(f"--pairs {path} holds {len(rows)} pairs; the reward model needs at least 10 "
             "(a tenth is held out)")
    return rows


def encode_pairs(tokenizer, rows, prompt_len, max_new_tokens, device):
    """Pairs -> (chosen_tokens, chosen_mask, rejected_tokens, rejected_mask): the tokens and
    completion masks of the chosen completions, then the same of the rejected."""
    prompts = [r["prompt"] for r in rows]
    return [x for key in ("chosen", "rejected") for x in encode_texts(
        tokenizer, prompts, [r[key] for r in rows], prompt_len, max_new_tokens, device)]


def write_pairs(path, rows):
    """pairs.jsonl: the labelled pairs, one JSON object a line."""
    with open(os.path.join(path, "pairs.jsonl"), "w") as f:
        f.writelines(json.dumps(row) + "\n" for row in rows)


@torch.no_grad()
def held_out(args, run, policy, reference, reward_model, step):
    """What the policy writes on the --eval-episodes held-out prompts (the evaluation's,
    seeded seed + 100,000; never trained on), --eval-samples completions of each sampled:
    the reward model's score (the proxy), the gold score, the KL to the reference (the
    sampled estimate, sum_t log pi - log pi_ref per completion, which can come out a hair
    below 0 where the two models agree) and the completion's length
    in tokens, their means a row of held_out.csv. Sampling draws on a random stream of its
    own, so training's is untouched."""
    P, device = policy.prompt_len, next(policy.parameters()).device
    envs = make_vector_env(args.env_id, args.eval_episodes)
    proxy, gold, kls, lengths = [], [], [], []
    with torch.random.fork_rng(devices=[device] if device.type == "cuda" else []):
        torch.manual_seed(args.seed + 100_000)
        for _ in range(args.eval_samples):
            prompts, _ = envs.reset(seed=args.seed + 100_000)
            texts, tokens, mask, logprobs, _ = complete(policy, prompts)
            _, scores, _, _, _ = envs.step(texts)
            ref = token_logprobs(completion_outputs(reference, tokens, P)[0], tokens[:, P:])
            proxy.append(reward_model(tokens, mask).mean().item())
            gold.append(float(np.mean(scores)))
            kls.append(((logprobs - ref) * mask).sum(1).mean().item())
            lengths.append(mask.sum(1).mean().item())
    envs.close()
    row = {"proxy_score": float(np.mean(proxy)), "gold_score": float(np.mean(gold)),
           "kl_to_reference": float(np.mean(kls)), "answer_length": float(np.mean(lengths))}
    run.write_row("held_out.csv", global_step=step, wall_time=round(run.elapsed(), 4), **row)
    return row


@torch.no_grad()
def reward_model_row(run, reward_model, pairs, step, loss):
    """train_reward_model's row of reward_model.csv at step (its step less --rm-steps: before
    RL's step 0): its training loss, and on the held-out pairs (encode_pairs's) the
    Bradley-Terry loss and the pair accuracy (the share of pairs whose chosen completion
    scores higher)."""
    chosen_tokens, chosen_mask, rejected_tokens, rejected_mask = pairs
    chosen = reward_model(chosen_tokens, chosen_mask)
    rejected = reward_model(rejected_tokens, rejected_mask)
    run.write_row("reward_model.csv", global_step=step, wall_time=round(run.elapsed(), 4),
                  loss=loss, held_out_loss=bradley_terry_loss(chosen, rejected).item(),
                  held_out_accuracy=(chosen > rejected).float().mean().item())


def held_out_due(args, step, batch, last):
    """Whether a batch of completions that brought training to step earns a row of
    held_out.csv: the batches numbered 1, 2, 4, 8, ... (log-spaced: dense early, where the
    scores move), the batch that crossed a multiple of --eval-every, and the last batch (none
    with --eval-episodes 0)."""
    number = step // batch  # the batches so far, this one included
    crossed = args.eval_every and step // args.eval_every > (step - batch) // args.eval_every
    return bool(args.eval_episodes and (number & (number - 1) == 0 or crossed or last))


if __name__ == "__main__":
    cli()


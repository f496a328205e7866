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
sigma the logistic function, tau the labeller's temperature, N the completions per batch):

    labeller       P(y_a preferred to y_b) = sigma((gold(y_a) - gold(y_b)) / tau)
    Bradley-Terry  L_RM = -log sigma(r_phi(x, y_w) - r_phi(x, y_l))   (w preferred to l)
    token reward   r_t = -beta (log pi_old(y_t) - log pi_ref(y_t)) + [t = n] r_phi(x, y)
    GAE            delta_t = r_t + gamma V(t+1) - V(t),  A_t = delta_t + gamma lambda A_{t+1},
                   V(n+1) = 0, gamma = 1: the completion is one episode
    whitening      w(z) = (z - mean z) / std z   over the batch's completion tokens
    PPO            L = mean_t max(-A_t rho_t, -A_t clip(rho_t, 1 - eps, 1 + eps))
                       + c_v mean_t max((V_t - R_t)^2, (clip(V_t, V_old +- eps_v) - R_t)^2) / 2
    adaptive KL    e = clip(KL / KL_target - 1, -0.2, 0.2),  beta <- beta (1 + e N / horizon)
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
    # The run folder's flags (--output-dir, --save-model, --eval-checkpoint, --track, ...)
    # come after these: every script shares them, declared once in RunFlags below the banner.
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
    """Ziegler et al.'s controller of beta: after a batch of N completions whose KL to the
    reference was KL (nats per completion), beta grows while KL is above its target:

        e    = clip(KL / KL_target - 1, -0.2, 0.2)
        beta = beta * (1 + e * N / horizon)"""

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
NEXT_CLASS = dict(zip(CLASSES, [*CLASSES][1:] + ["noun"]))  # noun: verb, ..., adjective: noun
SUCCESSORS = {w: CLASSES[NEXT_CLASS[c]] for c in CLASSES for w in CLASSES[c]}  # the next class's
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
# Below the banner: complete (sample on text prompts), encode_texts (texts to tokens, masks)
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


# ---------------------------------------------------------------------------------------
# Networks: the policy with its value head, the reward model (HFModel, below, wraps --model's LM)
# ---------------------------------------------------------------------------------------
class PolicyWithValue(nn.Module):
    """The policy and its critic on one body (Ziegler et al., TRL): the LM's logits and a linear
    value head V on its hidden states, 0 at first. tokens [N, L] -> (logits, values [N, L]).
    make_policy (after it) builds it and sets its tokenizer, prompt_len and max_new_tokens."""

    def __init__(self, lm):
        super().__init__()
        self.lm, self.v_head = lm, nn.Linear(lm.hidden_size, 1)
        nn.init.zeros_(self.v_head.weight)
        nn.init.zeros_(self.v_head.bias)

    def forward(self, tokens):
        logits, hidden = self.lm(tokens)
        return logits, self.v_head(hidden).squeeze(-1)


def make_policy(args, tokenizer, prompt_len):
    """The built-in GPT sized by the flags, or --model's Hugging Face causal LM (load_model,
    below the banner), with a value head; it gets the tokenizer and the lengths that complete
    and train read."""
    if args.model is None:
        lm = GPT(len(tokenizer), prompt_len + args.max_new_tokens, args.n_layer, args.n_head,
                 args.n_embd)
    else:
        lm = load_model(args, tokenizer)
    policy = PolicyWithValue(lm)
    policy.tokenizer, policy.prompt_len, policy.max_new_tokens = (
        tokenizer, prompt_len, args.max_new_tokens)
    return policy


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
    """N copies of a text task with episode statistics: held-out prompts (the default) or
    training ones. SAME_STEP: an ended episode resets in its step (the next prompts)."""

    envs = gym.vector.SyncVectorEnv(  # make_recorded: gym.make, filmed into a video_folder if given
        [lambda i=i: make_recorded(env_id, video_folder, f"eval-{i}", held_out=held_out)
         for i in range(num_envs)],
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


def encode_pairs(tokenizer, rows, prompt_len, max_new_tokens, device):
    """Pairs -> (chosen_tokens, chosen_mask, rejected_tokens, rejected_mask): the tokens and
    completion masks of the chosen completions, then the same of the rejected."""
    prompts = [r["prompt"] for r in rows]
    return [x for key in ("chosen", "rejected") for x in encode_texts(
        tokenizer, prompts, [r[key] for r in rows], prompt_len, max_new_tokens, device)]


def train_reward_model(args, policy, pairs, run):
    """r_phi from the pairs: Adam steps of the Bradley-Terry loss on batches from all but the
    first tenth, held out for the loss and accuracy measure writes (reward_model.csv).
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
            run.measure(step - args.rm_steps, "reward model", reward_model=reward_model,
                        pairs=held_out_pairs, loss=loss.item())
    with torch.no_grad():  # r <- (r - mean r) / std r on the pairs' (warm start's) completions
        scores = torch.cat([reward_model(chosen_tokens, chosen_mask),
                            reward_model(rejected_tokens, rejected_mask)])
        reward_model.head.bias -= scores.mean()
        reward_model.head.weight /= scores.std()
        reward_model.head.bias /= scores.std()
    return frozen_copy(reward_model)


# ---------------------------------------------------------------------------------------
# Training (run, a Run, below the banner, writes the run folder)
# ---------------------------------------------------------------------------------------
#   step(n, info): the ended episodes' rows of episodes.csv, the progress line, each
#     --eval-every completions the greedy evaluation; True once --stop-at-return is reached
#   update(n, loss, **values): a row of updates.csv, then measure(n, "update"); True, and no
#     row, when the loss is NaN or inf
#   measure(n, moment, **what): held_out.csv's sampled gold, proxy and KL, at "start" the
#     greedy gold too (--save-model: warm_start.pt); "reward model": reward_model.csv's row
PAIRS_PER_DRAW = 256  # the prompts sampled at once for the pairs, each by two environments


def train(args, policy, envs, run):
    """The warm start, the labelled pairs, the reward model, then PPO (--algo dpo: train_dpo)
    until the budget, --stop-at-return or a non-finite loss."""
    P = policy.prompt_len
    if args.warm_start:  # another run's warm_start.pt
        policy.load_state_dict(torch.load(args.warm_start, map_location="cpu",
                                          weights_only=True)["policy"])  # tensors only, never code
    else:
        warm_start(args, policy)
    reference = frozen_copy(policy)  # pi_ref: where RL starts
    if args.pairs:  # read_pairs: another run's pairs.jsonl (or your own), checked
        pairs = read_pairs(args.pairs, policy.tokenizer, P)
    else:
        pairs_envs = make_vector_env(args.env_id, 2 * PAIRS_PER_DRAW, held_out=False)
        pairs = preference_pairs(args, policy, pairs_envs)
        pairs_envs.close()
    write_pairs(run.path, pairs)  # pairs.jsonl, a JSON object a line
    reward_model = train_reward_model(args, policy, pairs, run)
    # The greedy gold the gain counts from; pi_ref and r_phi kept for the measures' KL and proxy
    run.measure(0, "start", reference=reference, reward_model=reward_model)
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
        if run.step(global_step, info):  # the ended episodes' rows; True: --stop-at-return
            return run.measure(global_step, "end")  # held_out.csv's row where it stops

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

        kl = ((logprobs - ref_logprobs) * completion_mask).sum(1).mean().item()  # nats a completion
        pg_loss, v_loss, clipfrac, entropy = np.mean(stats, axis=0)
        if run.update(global_step, loss.item(), policy_loss=pg_loss, value_loss=v_loss,
                      clipfrac=clipfrac, entropy=entropy, kl=kl, beta=beta,
                      score=scores.mean().item(), gold=float(np.mean(gold)),
                      completion_length=completion_mask.sum(1).mean().item()):
            return  # a NaN or inf loss: no row, the run stops
        if args.adaptive_kl:  # check_args's check_flags made sure of --kl-target
            kl_controller.update(kl, N)


def train_dpo(args, policy, reference, pairs, run):
    """DPO: Adam steps on --num-prompts pairs each, from shuffled passes over the pairs, until
    --total-timesteps completions (2 a pair); held_out.csv as PPO's, the reward model its proxy."""
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
        if run.update(global_step, loss.item(), dpo_loss=loss.item(),
                      chosen_reward=chosen.mean().item(), rejected_reward=rejected.mean().item(),
                      pair_accuracy=(chosen > rejected).float().mean().item()):
            return  # a NaN or inf loss: no row, the run stops


def main(args: Args) -> dict:
    """Train (or evaluate an --eval-checkpoint), write the run folder, return the summary."""
    # Functions not defined above are the plumbing's, below the banner; check_* stop bad input.
    register_tasks()  # Preference-v0, before any environment is made
    # prepare: --eval-checkpoint's model read, the task made and checked (check_spaces: the
    # tokens, <eos> and one a word, or --model's), every flag checked, the seeds, the device.
    args, (tokenizer, prompt_len), checkpoint, device = prepare(args)

    # Set up: the policy; the run folder.
    policy = make_policy(args, tokenizer, prompt_len).to(device)
    models = {"policy": policy}  # what model.pt holds (the reference is its warm start)
    # Run restores a checkpoint's weights into the policy, prints "rlhf.py: <env>, seed <s>" +
    # note, then progress to a budget of whole batches
    run = Run(args, device, models, checkpoint, rollout_steps=args.num_prompts,
              note=f", {args.algo}, " + (args.model or "built-in model"))

    # run.train: train() (not with --eval-checkpoint), then evaluate, save, write, plot.
    envs = None if checkpoint else make_vector_env(args.env_id, args.num_prompts, held_out=False)
    return run.train(lambda: train(args, policy, envs, run), envs)


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
# What the plumbing asks of rlhf.py: its checks, its policy, its measures, its flags
# ---------------------------------------------------------------------------------------
def check_flags(args):
    """rlhf.py's own flags, checked by prepare before training."""
    check_range(args, positive=["threads", "n_layer", "n_head", "n_embd", "max_new_tokens",
                                "num_prompts", "update_epochs", "num_minibatches", "learning_rate",
                                "dpo_learning_rate", "mask_sync_every", "max_grad_norm",
                                "sft_batch_size", "sft_learning_rate", "rm_batch_size",
                                "rm_learning_rate", "eval_samples", "kl_horizon"])
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


def greedy_policy(models, envs):
    """The evaluation's policy, act(obs, info) -> completions: greedy decoding of each
    prompt, the most likely token at each step, without NLPO's mask."""
    def act(obs, info):
        return complete(models["policy"], obs, greedy=True)[0]
    return act


def measure(run, global_step, moment, reference=None, reward_model=None, pairs=None, loss=None):
    """rlhf.py's measures at Run.measure's moments. "reward model", from train_reward_model:
    reward_model.csv's row. With --eval-episodes, held_out.csv's rows (held_out): "start",
    where RL begins, with the greedy evaluation's gold score (summary.json's start_return, the
    verdict's gain counts from it); "update", after the updates held_out_due picks; "end",
    where --stop-at-return stopped PPO. "start" keeps the reference and the reward model it
    is given for them all and, with --save-model, first writes warm_start.pt. Returns the
    row, None where nothing is measured."""
    args, policy = run.args, run.models["policy"]
    if moment == "reward model":  # its training loss, and on the held-out pairs
        return reward_model_row(run, reward_model, pairs, global_step, loss)
    if moment == "start":  # pi_ref (the KL's) and r_phi (the proxy's), from here on
        run.reference, run.reward_model = reference, reward_model
    if moment == "start" and args.save_model and not args.warm_start:  # for --warm-start
        save_checkpoint(os.path.join(run.path, "warm_start.pt"), {"policy": policy}, args)
    if not args.eval_episodes:
        return None
    if moment == "start":
        run.summary["start_return"] = float(np.mean(evaluate(args, {"policy": policy})))
        return held_out(args, run, policy, run.reference, run.reward_model, 0)
    batch = args.num_prompts * (2 if args.algo == "dpo" else 1)  # DPO's: 2 completions a pair
    last = global_step + batch > args.total_timesteps  # no whole batch left
    if moment == "end" or moment == "update" and held_out_due(args, global_step, batch, last):
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


# ---------------------------------------------------------------------------------------
# rlhf.py's own plumbing: --model's Hugging Face LM, the pairs (files, tokens), the measures
# ---------------------------------------------------------------------------------------
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
    """measure's row of reward_model.csv at step (train_reward_model's less --rm-steps): the
    training loss; on the held-out pairs (encode_pairs's) the Bradley-Terry loss and the pair
    accuracy (the share whose chosen completion scores higher)."""
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


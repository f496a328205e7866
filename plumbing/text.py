# The text-model pieces grpo.py and rlhf.py share, one text in both: the sampler's masks and
# log-probabilities, nanoGPT's transformer and the sampler. It is the algorithm's, so each
# script holds it above its plumbing banner, in the story; `python plumbing/stamp.py` writes it
# there between its marker lines, and tests/test_plumbing.py fails where a copy differs by one
# byte. What the two scripts do differently is an argument, named where each script passes it:
# the sampling temperature. The text's input and output (the tokenizer, prompts and
# completions as tokens and back, complete: sample on text prompts) is plumbing/tokens.py's,
# below the banner.

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

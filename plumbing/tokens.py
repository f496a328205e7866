# The text's input and output that grpo.py and rlhf.py share, one text in both: the built-in
# tokenizer, prompts and completions as tokens and back, and complete, plumbing/text.py's
# sampler on text prompts. It is plumbing, so each script holds it below its plumbing banner,
# after plumbing/common.py's block; `python plumbing/stamp.py` writes it there between its
# marker lines, and tests/test_plumbing.py fails where a copy
# differs by one byte. What the two scripts do differently is an argument, named where each
# script builds its tokenizer: the special tokens.

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

"""Tests of ppo_masked.py: the masked distribution and GAE by hand, the buffer and its masks,
dict observations, the loop's glue, its own hooks (check_flags, check_spaces, greedy_policy,
MODEL_FLAGS), determinism. The plumbing's behaviour is tested once, in test_plumbing.py."""
import math
import os

import gymnasium as gym
import numpy as np
import pytest
import torch

import ppo_masked as pm
from conftest import (approx, check_the_epochs_kl_and_clipfrac, detached, read_csv,
                      same_seed_episodes, spy_on, spy_on_adam, spy_on_seeds, spy_on_weights)

LN2, LN3 = math.log(2.0), math.log(3.0)


def column(*values):
    """A [T, 1] tensor: one environment's values over T steps."""
    return torch.tensor(values, dtype=torch.float32).unsqueeze(1)


# ---------------------------------------------------------------------------------------
# masked_categorical by hand. Logits [0, ln 2, 100, ln 3] with action 2 masked: without
# the mask action 2 would have all the probability (e^100); with it, the valid actions
# renormalize: e^l = [1, 2, -, 3], sum 6, so pi = [1/6, 2/6, 0, 3/6].
# ---------------------------------------------------------------------------------------
LOGITS = torch.tensor([0.0, LN2, 100.0, LN3])
MASK = torch.tensor([True, True, False, True])


def test_masked_categorical_probabilities_and_log_probabilities():
    dist = pm.masked_categorical(LOGITS, MASK)
    assert isinstance(dist, torch.distributions.Categorical), (
        "masked_categorical returns a torch.distributions.Categorical")
    assert dist.probs.tolist() == approx([1 / 6, 2 / 6, 0.0, 3 / 6])
    # log pi = [ln 1/6, ln 1/3, ln 1/2] = [-1.791759, -1.098612, -0.693147] for the valid ones
    logprobs = dist.log_prob(torch.tensor([0, 1, 3]))
    assert logprobs.tolist() == approx([-math.log(6), -LN3, -LN2])
    assert -1e9 < dist.log_prob(torch.tensor(2)).item() < -1e7, (  # the masked action: about -1e8
        "a masked action's log-probability is about -1e8: its logit is replaced by -1e8, not -inf")


def test_masked_categorical_entropy_counts_valid_actions_only():
    # H = 1/6 ln 6 + 1/3 ln 3 + 1/2 ln 2 = 0.298627 + 0.366204 + 0.346574 = 1.011404
    # (uniform over the 3 valid actions it would be ln 3 = 1.098612; over 4, ln 4)
    assert pm.masked_categorical(LOGITS, MASK).entropy().item() == approx(1.0114043)
    uniform = pm.masked_categorical(torch.zeros(4), MASK)
    assert uniform.entropy().item() == approx(LN3)


def test_masked_categorical_gradients_are_finite_and_zero_for_masked_logits():
    # d(-log pi(1))/dl = pi - onehot(1) = [1/6, 2/6 - 1, 0, 3/6] = [1/6, -2/3, 0, 1/2]
    logits = LOGITS.clone().requires_grad_()
    (-pm.masked_categorical(logits, MASK).log_prob(torch.tensor(1))).backward()
    assert logits.grad.tolist() == approx([1 / 6, -2 / 3, 0.0, 1 / 2])
    logits.grad = None
    pm.masked_categorical(logits, MASK).entropy().backward()
    assert torch.isfinite(logits.grad).all() and logits.grad[2] == 0.0, (
        "the entropy's gradient is finite (a -inf logit would give nan) and 0 for a masked logit")
    assert logits.grad[[0, 1, 3]].abs().min() > 0, (  # the valid logits do get a gradient
        "every valid logit gets a gradient from the entropy")


def test_sampling_never_returns_a_masked_action_and_follows_the_probabilities():
    torch.manual_seed(0)
    # Two rows with different masks, each drawn 20000 times; the masked logits are the
    # largest, so an unmasked sampler would pick them nearly always.
    logits = torch.tensor([[0.0, LN2, 100.0, LN3], [50.0, 0.0, 0.0, 50.0]]).repeat(10_000, 1)
    masks = torch.tensor([[True, True, False, True], [False, True, True, False]]).repeat(10_000, 1)
    actions = pm.masked_categorical(logits, masks).sample()
    assert masks.gather(1, actions.unsqueeze(1)).all(), "sample() never returns a masked action"
    freq_row0 = torch.bincount(actions[0::2], minlength=4) / 10_000
    freq_row1 = torch.bincount(actions[1::2], minlength=4) / 10_000
    assert freq_row0.tolist() == pytest.approx([1 / 6, 2 / 6, 0.0, 3 / 6], abs=0.02)
    assert freq_row1.tolist() == pytest.approx([0.0, 0.5, 0.5, 0.0], abs=0.02)


def test_an_all_true_mask_gives_the_ordinary_categorical():
    logits = torch.randn(5, 4, generator=torch.Generator().manual_seed(0))
    plain = torch.distributions.Categorical(logits=logits)
    masked = pm.masked_categorical(logits, torch.ones(5, 4, dtype=torch.bool))
    actions = torch.tensor([0, 1, 2, 3, 0])
    assert torch.allclose(masked.log_prob(actions), plain.log_prob(actions))
    assert torch.allclose(masked.entropy(), plain.entropy())


def test_greedy_action_is_the_best_valid_one():
    agent = pm.Agent(2, 4)
    with torch.no_grad():  # logits = the last layer's bias: action 2 best, then 3, 0, 1
        agent.actor[-1].weight.zero_()
        agent.actor[-1].bias.copy_(torch.tensor([1.0, 0.0, 5.0, 3.0]))
    obs = torch.zeros(2, 2)
    masks = torch.tensor([[True, True, False, True], [True, True, False, False]])
    assert agent.greedy(obs, masks).tolist() == [3, 0]


# ---------------------------------------------------------------------------------------
# GAE by hand, with the same semantics as ppo.py. Three steps of one environment,
# gamma = lambda = 0.5 (gamma * lambda = 0.25), rewards 1, values V(s_t) = [0.5, 1, 2].
# ---------------------------------------------------------------------------------------
REWARDS, VALUES, NO_END, END_AT_1 = column(1, 1, 1), column(0.5, 1.0, 2.0), column(0, 0, 0), column(0, 1, 0)


@pytest.mark.parametrize("next_values, terminated, truncated, advantages", [
    # no end: delta = 1 + 0.5*[1, 2, 4] - [0.5, 1, 2] = [1, 1, 1]
    #   A_2 = 1;  A_1 = 1 + 0.25*1 = 1.25;  A_0 = 1 + 0.25*1.25 = 1.3125
    ((1.0, 2.0, 4.0), NO_END, NO_END, (1.3125, 1.25, 1.0)),
    # terminated at t = 1 (next_values[1] = 7 is the next episode's first value: unused)
    #   delta = [1, 1 + 0 - 1, 1] = [1, 0, 1];  A_2 = 1;  A_1 = 0;  A_0 = 1 + 0.25*0 = 1
    ((1.0, 7.0, 4.0), END_AT_1, NO_END, (1.0, 0.0, 1.0)),
    # truncated at t = 1 with V(final obs) = 6: delta_1 = 1 + 0.5*6 - 1 = 3
    #   A_2 = 1;  A_1 = 3 (the episode ended);  A_0 = 1 + 0.25*3 = 1.75
    ((1.0, 6.0, 4.0), NO_END, END_AT_1, (1.75, 3.0, 1.0)),
])
def test_gae_by_hand(next_values, terminated, truncated, advantages):
    adv, ret = pm.compute_gae(REWARDS, VALUES, column(*next_values), terminated, truncated, 0.5, 0.5)
    assert torch.allclose(adv, column(*advantages))
    assert torch.allclose(ret, column(*advantages) + VALUES)  # returns = A + V


def test_gae_equals_ppo_py_on_random_rollouts():
    import ppo
    gen = torch.Generator().manual_seed(0)
    rewards, values, next_values = (torch.randn(9, 3, generator=gen) for _ in range(3))
    flags = torch.rand(9, 3, generator=gen)
    terminated, truncated = flags < 0.2, (flags >= 0.2) & (flags < 0.4)
    assert terminated.any() and truncated.any()
    mine = pm.compute_gae(rewards, values, next_values, terminated, truncated, 0.9, 0.8)
    theirs = ppo.compute_gae(rewards, values, next_values, terminated, truncated, 0.9, 0.8)
    assert all(torch.equal(a, b) for a, b in zip(mine, theirs))


def test_ppo_loss_by_hand():
    # ratio = [1.5, 0.9], advantages [1, -1], clip 0.2 -> clip(ratio) = [1.2, 0.9]
    #   L_pg = (max(-1.5, -1.2) + max(0.9, 0.9))/2 = (-1.2 + 0.9)/2 = -0.15
    # V = [1, 2], R = [2, 2]: L_v = 0.5*(1 + 0)/2 = 0.25; entropy mean 0.5
    #   loss = -0.15 - 0.01*0.5 + 0.5*0.25 = -0.03
    loss, pg_loss, v_loss, entropy = pm.ppo_loss(
        torch.log(torch.tensor([1.5, 0.9])), torch.zeros(2), torch.tensor([1.0, -1.0]),
        torch.tensor([1.0, 2.0]), torch.tensor([0.5, 2.5]), torch.tensor([2.0, 2.0]),
        torch.tensor([0.6, 0.4]), clip_coef=0.2, ent_coef=0.01, vf_coef=0.5)
    assert pg_loss.item() == approx(-0.15) and v_loss.item() == approx(0.25)
    assert entropy.item() == approx(0.5) and loss.item() == approx(-0.03)


# ---------------------------------------------------------------------------------------
# The buffer
# ---------------------------------------------------------------------------------------
def test_buffer_shapes_and_dtypes():
    buffer = pm.MaskedRolloutBuffer(5, 3, 7, 4, "cpu")
    assert buffer.obs.shape == buffer.final_obs.shape == (5, 3, 7) and buffer.last_obs.shape == (3, 7)
    assert buffer.action_masks.shape == (5, 3, 4) and buffer.action_masks.dtype == torch.bool
    assert buffer.actions.shape == (5, 3) and buffer.actions.dtype == torch.long
    assert buffer.terminated.dtype == buffer.truncated.dtype == torch.bool


def test_buffer_next_values_use_following_obs_last_obs_and_final_obs():
    # T = 3, N = 2, V(s) = 10*s so each value names its observation. Environment 1 is
    # truncated at t = 0 (final observation 0.7) and terminated at t = 1.
    buffer = pm.MaskedRolloutBuffer(3, 2, 1, 2, "cpu")
    buffer.obs[:, :, 0] = torch.tensor([[0.0, 0.1], [1.0, 1.1], [2.0, 2.1]])
    buffer.last_obs[:, 0] = torch.tensor([3.0, 3.1])
    buffer.truncated[0, 1] = buffer.terminated[1, 1] = True
    buffer.final_obs[0, 1, 0] = 0.7
    value_fn = lambda obs: 10 * obs[..., 0]
    # column 0: V(s_1), V(s_2), V(last) = 10, 20, 30; column 1: V(final) = 7, then 21
    # (unused after the termination), then V(last) = 31
    assert torch.allclose(buffer.next_values(value_fn, value_fn(buffer.obs)),
                          torch.tensor([[10.0, 7.0], [20.0, 21.0], [30.0, 31.0]]))


# ---------------------------------------------------------------------------------------
# Test environments. MaskedCounter's observation is its step count t; of its 4 actions
# 0..t are allowed (mask(t)[a] = a <= t), so the last observation of an episode (t = 3,
# mask 1111) and the first of the next (t = 0, mask 1000) have different masks. A time
# limit cuts episodes after 3 steps. Every action taken is recorded with whether it was
# allowed. The Dict variant puts the mask in the observation instead of the info.
# ---------------------------------------------------------------------------------------
TAKEN = []  # (t, action, allowed) of every step of every MaskedCounter


class MaskedCounter(gym.Env):
    observation_space = gym.spaces.Box(0.0, 10.0, (1,))
    action_space = gym.spaces.Discrete(4)
    metadata = {"render_modes": ["rgb_array"], "render_fps": 4}

    def __init__(self, render_mode=None):
        self.render_mode = render_mode

    def render(self):  # a gray frame, for the video test
        return np.full((16, 16, 3), 128, dtype=np.uint8)

    def mask(self):
        return (np.arange(4) <= self.t).astype(np.int8)

    def observe(self):
        return np.array([self.t], dtype=np.float32), {"action_mask": self.mask()}

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.t = 0
        return self.observe()

    def step(self, action):
        TAKEN.append((self.t, int(action), bool(self.mask()[action])))
        self.t += 1
        return *self.observe()[:1], 1.0, False, False, self.observe()[1]


class DictMaskedCounter(MaskedCounter):
    observation_space = gym.spaces.Dict([
        ("parity", gym.spaces.Discrete(2)), ("action_mask", gym.spaces.MultiBinary(4)),
        ("count", gym.spaces.Box(0.0, 10.0, (1,)))])

    def observe(self):
        obs, info = super().observe()
        return {"parity": self.t % 2, "action_mask": info["action_mask"], "count": obs}, {}


class NoActionAtTwo(MaskedCounter):
    def mask(self):
        return (np.arange(4) <= self.t).astype(np.int8) * (self.t != 2)


class ShortMask(MaskedCounter):
    def mask(self):
        return np.ones(3, dtype=np.int8)


class SequenceObs(MaskedCounter):
    observation_space = gym.spaces.Sequence(gym.spaces.Discrete(2))

    def observe(self):
        return (self.t % 2,), {"action_mask": self.mask()}


class OnlyMask(DictMaskedCounter):
    observation_space = gym.spaces.Dict({"action_mask": gym.spaces.MultiBinary(4)})

    def observe(self):
        return {"action_mask": self.mask()}, {}


class DictAndInfoMasks(DictMaskedCounter):
    """DictMaskedCounter whose info carries a second mask that allows every action: with
    both, --mask-source auto takes the observation's "action_mask" entry."""

    def observe(self):
        return super().observe()[0], {"action_mask": np.ones(4, dtype=np.int8)}


for env_class in (MaskedCounter, DictMaskedCounter, NoActionAtTwo, ShortMask, SequenceObs,
                  OnlyMask, DictAndInfoMasks):
    gym.register(f"{env_class.__name__}-v0", entry_point=env_class, max_episode_steps=3)
# MaskedCounter with Gymnasium's reward_threshold of 3, every episode's return
gym.register("MaskedThreeSteps-v0", entry_point=MaskedCounter, max_episode_steps=3,
             reward_threshold=3.0)


# ---------------------------------------------------------------------------------------
# Dict observations
# ---------------------------------------------------------------------------------------
def test_dict_observations_are_flattened_in_sorted_key_order():
    space = DictMaskedCounter.observation_space
    assert list(space.keys()) == ["parity", "action_mask", "count"]  # the env's own order
    obs = [{"count": np.array([2.0]), "parity": 1, "action_mask": np.array([1, 1, 1, 0])},
           {"count": np.array([5.0]), "parity": 0, "action_mask": np.array([1, 0, 0, 0])}]
    # sorted keys without the mask: count (1 wide), then parity one-hot (2 wide)
    assert [pm.flatten_obs(space, o).tolist() for o in obs] == [[2.0, 0.0, 1.0], [5.0, 1.0, 0.0]]
    assert pm.flat_size(space) == 3 and pm.flatten_obs(space, obs[0]).dtype == np.float32


def test_discrete_and_multidiscrete_observations_are_one_hot():
    # Discrete(3, start=1): 1 -> 100, 3 -> 001. MultiDiscrete([2, 3]): [1, 0] -> 01|100,
    # [0, 2] -> 10|001
    discrete, multi = gym.spaces.Discrete(3, start=1), gym.spaces.MultiDiscrete([2, 3])
    assert [pm.flatten_obs(discrete, o).tolist() for o in (1, 3)] == [[1, 0, 0], [0, 0, 1]]
    assert [pm.flatten_obs(multi, np.array(o)).tolist() for o in ([1, 0], [0, 2])] == \
        [[0, 1, 1, 0, 0], [1, 0, 0, 0, 1]]
    assert pm.flatten_obs(gym.spaces.Discrete(500), 499).shape == (500,)
    # a Tuple: its entries flattened and concatenated, in order
    pair = gym.spaces.Tuple([gym.spaces.Discrete(2), gym.spaces.Box(0.0, 1.0, (1,))])
    assert pm.flatten_obs(pair, (1, np.array([0.5]))).tolist() == [0.0, 1.0, 0.5]
    assert pm.flat_size(gym.spaces.MultiDiscrete([2, 3])) == 5


# ---------------------------------------------------------------------------------------
# Masks through the whole loop
# ---------------------------------------------------------------------------------------
def spy_on_rollouts(monkeypatch):
    """Copies of every rollout's buffer, taken when the update computes GAE."""
    seen = []
    original = pm.MaskedRolloutBuffer.gae

    def spy(self, *args, **kwargs):
        seen.append({k: v.clone() for k, v in vars(self).items()})
        return original(self, *args, **kwargs)

    monkeypatch.setattr(pm.MaskedRolloutBuffer, "gae", spy)
    return seen


@pytest.mark.parametrize("env_id, source", [("MaskedCounter-v0", "info"),
                                            ("DictMaskedCounter-v0", "obs"),
                                            ("DictAndInfoMasks-v0", "auto")])
def test_each_mask_stays_with_its_observation_across_episode_ends(env_id, source, tmp_path,
                                                                 monkeypatch, capsys):
    # DictAndInfoMasks under auto: the observation's entry, mask(t) below, is the one in
    # force; the info's 1111 would store 4 allowed actions at t = 0, 1, 2 (and sample
    # forbidden ones)
    seen = spy_on_rollouts(monkeypatch)
    TAKEN.clear()
    pm.main(pm.Args(env_id=env_id, mask_source=source, total_timesteps=16, num_envs=2,
                    num_steps=4, num_minibatches=2, eval_episodes=0, output_dir=str(tmp_path)))
    assert f"masks from {'obs' if source == 'auto' else source}\n" in capsys.readouterr().out
    rollout = seen[0]
    # Each environment sees t = 0, 1, 2, (cut after the third step; final obs 3, mask
    # 1111, stays in final_info) 0: the mask stored at the new episode's first step is
    # mask(0) = 1000, not the finished episode's 1111.
    counts = rollout["obs"][:, :, 0]
    assert counts.tolist() == [[0, 0], [1, 1], [2, 2], [0, 0]]
    expected = torch.arange(4) <= counts.unsqueeze(-1)
    assert torch.equal(rollout["action_masks"], expected)
    assert rollout["action_masks"][3].tolist() == [[True, False, False, False]] * 2
    assert rollout["truncated"][2].all() and rollout["final_obs"][2, :, 0].tolist() == [3.0, 3.0]
    # and every action the agent sampled was allowed when it was taken
    assert len(TAKEN) == 16 and all(allowed for _, _, allowed in TAKEN)
    assert rollout["actions"][0].tolist() == [0, 0]  # at t = 0 only action 0 is allowed
    # updates.csv's valid_actions is the mean number of allowed actions in the masks stored
    # with the rollout's steps: t = 0, 1, 2, 0 allow (1 + 2 + 3 + 1) / 4 = 1.75 in the first
    # rollout, t = 1, 2, 0, 1 allow (2 + 3 + 1 + 2) / 4 = 2 in the second. The masks in force
    # after each rollout (t = 1, then 2) would give 2 and 3; the info's 1111 under auto, 4.
    # The rows are at global steps 8 and 16, where each rollout of 2 * 4 steps ends.
    updates = read_csv(next(tmp_path.glob("*/updates.csv")))
    assert [(u["global_step"], float(u["valid_actions"])) for u in updates] == [("8", 1.75),
                                                                               ("16", 2.0)]


@pytest.mark.parametrize("env_id", ["MaskedCounter-v0", "DictMaskedCounter-v0"])
def test_without_masks_the_agent_takes_forbidden_actions(env_id, tmp_path, monkeypatch):
    # --no-mask turns off the mask wherever it comes from: info["action_mask"], and the
    # "action_mask" entry of a Dict observation too (the entry is there, but not in force)
    seen = spy_on_rollouts(monkeypatch)
    TAKEN.clear()
    pm.main(pm.Args(env_id=env_id, no_mask=True, total_timesteps=64, num_envs=2,
                    num_steps=8, num_minibatches=2, eval_episodes=0, output_dir=str(tmp_path)))
    assert seen[0]["action_masks"].all()  # --no-mask: every action allowed
    assert not all(allowed for _, _, allowed in TAKEN)
    updates = read_csv(next(tmp_path.glob("*/updates.csv")))
    assert {u["valid_actions"] for u in updates} == {"4.0"}


def test_the_update_rebuilds_the_distribution_that_sampled_each_action(tmp_path, monkeypatch):
    # Before the first gradient step the policy is the one that sampled the rollout, so
    # with the stored masks re-applied every ratio is exactly 1 (and the entropy is that
    # of the masked distribution: 0 at t = 0, where only one action is allowed).
    calls = []
    original = pm.ppo_loss

    def spy(**kwargs):
        calls.append((kwargs["newlogprob"].detach().clone(), kwargs["oldlogprob"].clone(),
                      kwargs["entropy"].detach().clone()))
        return original(**kwargs)

    monkeypatch.setattr(pm, "ppo_loss", spy)
    pm.main(pm.Args(env_id="MaskedCounter-v0", total_timesteps=16, num_envs=2, num_steps=8,
                    num_minibatches=1, update_epochs=1, eval_episodes=0, output_dir=str(tmp_path)))
    newlogprob, oldlogprob, entropy = calls[0]
    assert torch.allclose(newlogprob, oldlogprob, atol=1e-6)
    assert (oldlogprob == 0).any()  # the steps at t = 0: one allowed action, probability 1
    assert entropy.min() == 0 and entropy.max() < math.log(4) + 1e-6


# The update with a policy fixed by hand: the actor's last layer has weight 0 and bias
# ln [1, 2, 3, 4] and is frozen, so its logits never change. At MaskedCounter's step t the
# allowed actions are 0..t, so pi(a | t) = (a + 1) / (1 + ... + (t + 1)):
#   t = 0: pi = [1]                 log pi = [0]                               H = 0
#   t = 1: pi = [1/3, 2/3]          log pi = [-1.098612, -0.405465]
#          H = 1/3 ln 3 + 2/3 ln 3/2 = ln 3 - 2/3 ln 2 = 1.098612 - 0.462098 = 0.636514
#   t = 2: pi = [1/6, 2/6, 3/6]     log pi = [-1.791759, -1.098612, -0.693147]
#          H = 1/6 ln 6 + 1/3 ln 3 + 1/2 ln 2 = 1.011404
# The next step's mask (t + 1 allowed, or only action 0 after an episode's end) or no mask
# (pi(a) = (a + 1)/10) would give other numbers.
LOG_PI = {(0, 0): 0.0, (1, 0): -1.098612, (1, 1): -0.405465,
          (2, 0): -1.791759, (2, 1): -1.098612, (2, 2): -0.693147}
ENTROPY = {0: 0.0, 1: 0.636514, 2: 1.011404}


class FixedPolicy(pm.Agent):
    """The agent with the actor's last layer fixed: weight 0, bias ln [1, 2, 3, 4], frozen."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        with torch.no_grad():
            self.actor[-1].weight.zero_()
            self.actor[-1].bias.copy_(torch.log(torch.tensor([1.0, 2.0, 3.0, 4.0])))
        self.actor[-1].requires_grad_(False)


def test_every_update_uses_the_mask_stored_with_each_step(tmp_path, monkeypatch):
    seen = []  # (t, action, log pi, entropy) of every sample of every minibatch

    class SpiedPolicy(FixedPolicy):
        def evaluate(self, obs, actions, action_mask):
            logprob, entropy, value = super().evaluate(obs, actions, action_mask)
            seen.extend(zip(obs[:, 0].int().tolist(), actions.tolist(), logprob.tolist(),
                            entropy.tolist()))
            return logprob, entropy, value

    monkeypatch.setattr(pm, "Agent", SpiedPolicy)
    pm.main(pm.Args(env_id="MaskedCounter-v0", total_timesteps=48, num_envs=2, num_steps=8,
                    num_minibatches=2, update_epochs=2, eval_episodes=0, output_dir=str(tmp_path)))
    # 3 updates * 2 epochs * 16 samples, every step t = 0, 1, 2 among them
    assert len(seen) == 96 and {t for t, *_ in seen} == {0, 1, 2}
    for t, action, logprob, entropy in seen:
        assert (logprob, entropy) == approx((LOG_PI[t, action], ENTROPY[t]))


@pytest.mark.parametrize("no_mask, actions", [(False, [0, 1, 2]), (True, [3, 3, 3])])
def test_greedy_evaluations_choose_among_the_allowed_actions(no_mask, actions, tmp_path,
                                                             monkeypatch):
    # FixedPolicy prefers action 3 everywhere (logits ln [1, 2, 3, 4]). At MaskedCounter's
    # step t the actions 0..t are allowed, so the greedy action is t: (t, action) = (0, 0),
    # (1, 1), (2, 2) in each of the 2 episodes, which step side by side. Without the masks it
    # would take action 3 at every step, forbidden at t < 3. Evaluations at steps 8 and 16
    # (--eval-every 8) and the final one all play so. With --no-mask every one of them,
    # the final one too (main hands finish the source it resolved, not --mask-source's
    # "auto", which would read MaskedCounter's masks), takes action 3 at t = 0, 1, 2.
    evaluate, played = pm.evaluate, []

    def spy(*args, **kwargs):
        TAKEN.clear()
        returns = evaluate(*args, **kwargs)
        played.append(list(TAKEN))
        return returns

    monkeypatch.setattr(pm, "Agent", FixedPolicy)
    monkeypatch.setattr(pm, "evaluate", spy)
    pm.main(pm.Args(env_id="MaskedCounter-v0", no_mask=no_mask, total_timesteps=16, num_envs=2,
                    num_steps=8, num_minibatches=2, eval_every=8, eval_episodes=2,
                    output_dir=str(tmp_path)))
    greedy = [(t, action, action <= t) for t, action in enumerate(actions) for _ in "ab"]
    assert played == [greedy] * 3


def test_norm_reward_clips_what_the_buffer_learns_from_and_keeps_raw_returns(tmp_path,
                                                                            monkeypatch):
    # Gymnasium's NormalizeReward divides r_0 = 1 by the std of the discounted returns seen:
    # G_0 = [1, 1] in a RunningMeanStd that starts at mean 0, var 1, count 1e-4. Its update
    # (batch mean 1, var 0, count 2; total 2.0001) gives var = (1e-4 + 1^2 * 1e-4 * 2 /
    # 2.0001) / 2.0001 = 1.0e-4, so r_0 / sqrt(1e-4 + 1e-8) = 99.995, which the clip cuts to
    # 10. episodes.csv keeps the raw returns: 3 steps of reward 1.
    seen = spy_on_rollouts(monkeypatch)
    pm.main(pm.Args(env_id="MaskedCounter-v0", norm_reward=True, total_timesteps=16, num_envs=2,
                    num_steps=8, num_minibatches=2, eval_episodes=0, output_dir=str(tmp_path)))
    assert seen[0]["rewards"][0].tolist() == [10.0, 10.0]
    assert (seen[0]["rewards"].abs() <= 10).all() and (seen[0]["rewards"][1:] != 1.0).all()
    episodes = read_csv(next(tmp_path.glob("*/episodes.csv")))
    assert {(e["episode_return"], e["episode_length"]) for e in episodes} == {("3.0", "3")}


# ---------------------------------------------------------------------------------------
# The glue: what the loop gives GAE, the loss and the optimizer
# ---------------------------------------------------------------------------------------
class TenTimesObs(torch.nn.Module):
    def forward(self, obs):
        return 10 * obs[..., :1]


class CriticByHand(pm.Agent):
    """The agent with V(s) = 10 * s (MaskedCounter's s is its step count t), so that each
    value says which observation it came from."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.critic = TenTimesObs()


def test_gae_gets_the_flags_and_bootstraps_from_the_true_final_observation(tmp_path,
                                                                           monkeypatch):
    # MaskedCounter-v0, 2 environments, T = 4: states 0, 1, 2, then the third step is cut
    # by the time limit (final observation 3), and the next episode starts at 0. GAE must get
    # values V(s_t) = 10*[0, 1, 2, 0] and next_values [V(1), V(2), V(final obs 3), V(last
    # obs 1)] = [10, 20, 30, 10]: at the cut, 30, not V(0) = 0 of the next episode's first
    # observation; a truncation, not a termination; and --gamma 0.9, --gae-lambda 0.6.
    # --seed 7, not the default 1, seeds torch and the training environments (after
    # check_spaces' reset at 0, where it reads the first mask), and the final evaluation's at
    # 7 + 100,000.
    seen, original = [], pm.compute_gae

    def spy(rewards, values, next_values, terminated, truncated, gamma, gae_lambda):
        seen.append((values[:, 0].tolist(), next_values[:, 0].tolist(), terminated.any().item(),
                     truncated[:, 0].tolist(), gamma, gae_lambda))
        return original(rewards, values, next_values, terminated, truncated, gamma, gae_lambda)

    monkeypatch.setattr(pm, "Agent", CriticByHand)
    monkeypatch.setattr(pm, "compute_gae", spy)
    seeds, resets = spy_on_seeds(monkeypatch, pm)
    pm.main(pm.Args(env_id="MaskedCounter-v0", total_timesteps=8, num_envs=2, num_steps=4,
                    num_minibatches=2, update_epochs=1, gamma=0.9, gae_lambda=0.6, seed=7,
                    eval_episodes=2, output_dir=str(tmp_path)))
    assert seeds == [7] and resets == [0, 7, 100_007]
    assert seen == [([0.0, 10.0, 20.0, 0.0], [10.0, 20.0, 30.0, 10.0], False,
                     [False, False, True, False], 0.9, 0.6)]


@pytest.mark.parametrize("norm_adv", [True, False])
def test_what_the_loop_gives_ppo_loss_the_clipping_and_the_optimizer(norm_adv, tmp_path,
                                                                     monkeypatch):
    # Each flag apart from its default and from the others. The first minibatch comes before
    # any gradient step: its new values are the stored ones, row for row (what --clip-vloss
    # clips around). Advantages are normalized within each minibatch (mean 0, std 1), or
    # with --no-norm-adv passed as GAE made them, so that returns = advantages + stored
    # values. The training environments discount --norm-reward's return by --gamma.
    calls = spy_on(monkeypatch, pm, "ppo_loss", detached)
    norms = spy_on(monkeypatch, torch.nn.utils, "clip_grad_norm_", lambda params, norm: norm)
    made = spy_on(monkeypatch, pm, "make_vector_env",
                  lambda env_id, num_envs, reward_gamma=None, *rest: reward_gamma)
    optimized = spy_on_adam(monkeypatch)
    moved = spy_on_weights(monkeypatch, pm)
    agents = []

    class Kept(pm.Agent):
        def __init__(self, *args, **kwargs):
            super().__init__(*args, **kwargs)
            agents.append(self)

    monkeypatch.setattr(pm, "Agent", Kept)
    pm.main(pm.Args(env_id="MaskedCounter-v0", total_timesteps=16, num_envs=2, num_steps=8,
                    num_minibatches=2, update_epochs=2, norm_adv=norm_adv, gamma=0.9,
                    norm_reward=True, clip_coef=0.15, ent_coef=0.03, vf_coef=0.7,
                    clip_vloss=True, max_grad_norm=0.35, hidden_size=8, eval_episodes=0,
                    output_dir=str(tmp_path)))
    assert len(calls) == 4 and norms == [0.35] * 4
    assert made == [None, 0.9]  # check_spaces' environment (the mask), then the training ones
    assert torch.allclose(calls[0]["newvalue"], calls[0]["oldvalue"], atol=1e-6)
    for call in calls:
        assert (call["clip_coef"], call["ent_coef"], call["vf_coef"], call["clip_vloss"]) == \
            (0.15, 0.03, 0.7, True)
        if norm_adv:
            assert call["advantages"].mean().item() == pytest.approx(0, abs=1e-5)
            assert call["advantages"].std().item() == pytest.approx(1, abs=1e-4)
        else:
            assert torch.allclose(call["returns"], call["advantages"] + call["oldvalue"], atol=1e-5)
    (agent,) = agents  # both networks 8 wide (--hidden-size), not the default 64
    assert [(net[0].out_features, net[2].in_features, net[2].out_features)
            for net in (agent.actor, agent.critic)] == [(8, 8, 8), (8, 8, 8)]
    assert [id(p) for p in optimized[0]] == [id(p) for p in agent.parameters()]
    ((still, _),) = moved()  # and its steps moved every weight of the agent
    assert still == []


@pytest.mark.parametrize("target_kl, anneal_lr, epochs, rates", [
    (None, True, ["4", "4"], [2.5e-3, 1.25e-3]),  # 2 rollouts: lr * (1 - k/2) for k = 0, 1
    (1e-9, False, ["1", "1"], [2.5e-3, 2.5e-3]),
])
def test_target_kl_stops_the_epochs_and_no_anneal_lr_keeps_the_rate(target_kl, anneal_lr,
                                                                    epochs, rates, tmp_path):
    # 4 epochs of 2 minibatches. The first minibatch of an update comes before its first
    # gradient step (KL 0), the second after one (KL > 0): the first epoch's mean KL is
    # above 1e-9, so --target-kl 1e-9 stops each update after it.
    pm.main(pm.Args(env_id="MaskedCounter-v0", total_timesteps=32, num_envs=2, num_steps=8,
                    num_minibatches=2, update_epochs=4, target_kl=target_kl,
                    anneal_lr=anneal_lr, learning_rate=2.5e-3, eval_episodes=0,
                    output_dir=str(tmp_path)))
    updates = read_csv(next(tmp_path.glob("*/updates.csv")))
    assert [u["epochs"] for u in updates] == epochs
    assert [float(u["learning_rate"]) for u in updates] == approx(rates)


def test_target_kl_and_clipfrac_read_each_epochs_own_ratios(tmp_path, monkeypatch):
    check_the_epochs_kl_and_clipfrac(pm, tmp_path, monkeypatch, "MaskedCounter-v0")


# ---------------------------------------------------------------------------------------
# Runs end to end
# ---------------------------------------------------------------------------------------
@pytest.mark.slow  # a smoke run: a whole tiny run and every file it writes
def test_taxi_smoke_run_writes_every_file_and_its_model_evaluates(tmp_path, check_run_folder):
    args = pm.Args(env_id="Taxi-v4", total_timesteps=512, num_envs=2, num_steps=128,
                   num_minibatches=4, update_epochs=2, eval_episodes=2, save_model=True,
                   output_dir=str(tmp_path / "train"))
    summary = pm.main(args)
    path, episodes, updates = check_run_folder(summary, args.output_dir, "ppo_masked", model=True)
    assert summary["global_steps"] == 512 and len(updates) == 2
    assert {"policy_loss", "value_loss", "entropy", "approx_kl", "clipfrac",
            "explained_variance", "valid_actions"} <= set(updates[0])
    # Taxi allows a few of its 6 actions in a state, never all 6
    assert 1 < float(updates[0]["valid_actions"]) < 6
    # With masks no pickup or drop-off is ever illegal, so no step costs -10: a return is
    # at least -1 per step, and an episode is cut at 200 steps.
    assert all(float(e["episode_return"]) >= -int(e["episode_length"]) for e in episodes)
    assert all(int(e["episode_length"]) <= 200 for e in episodes)

    evaluated = pm.main(pm.Args(env_id="Taxi-v4", eval_checkpoint=os.path.join(path, "model.pt"),
                                eval_episodes=2, seed=summary["seed"],
                                output_dir=str(tmp_path / "eval")))
    assert evaluated["eval_return_mean"] == summary["eval_return_mean"]  # same greedy policy, seeds
    assert evaluated["global_steps"] == 0


@pytest.mark.slow  # a smoke run: a whole tiny run and every file it writes
def test_dict_observation_smoke_run(tmp_path, check_run_folder):
    args = pm.Args(env_id="DictMaskedCounter-v0", total_timesteps=48, num_envs=2, num_steps=8,
                   num_minibatches=2, eval_episodes=2, output_dir=str(tmp_path))
    summary = pm.main(args)
    _, episodes, _ = check_run_folder(summary, args.output_dir, "ppo_masked")
    # 2 environments * 24 steps, episodes of 3 steps with reward 1: 16 episodes of return 3
    assert [(e["episode_return"], e["episode_length"]) for e in episodes] == [("3.0", "3")] * 16
    assert summary["eval_return_mean"] == 3.0


@pytest.mark.parametrize("threshold, stop", [(10.0, 12), (1.0, 5)])
def test_stop_at_return_averages_the_last_stop_window_returns(threshold, stop,
                                                             fresh_env_module, tmp_path):
    # One EpisodeNumber environment at --seed 0 ends an episode at every step, its k-th
    # paying k. With --stop-window 5 the last five after episode k >= 5 average k - 2:
    # threshold 10 is reached at k = 12 (the mean of all k returns, (k + 1) / 2, would stop
    # at 19; a 20-episode window at 20; the last return alone at 10); threshold 1 once the
    # window is full, at k = 5 (not at the first episode). summary.json's solved_at_step is
    # every script's, the last 20's: not reached in 12 or 5 episodes.
    summary = pm.main(pm.Args(env_id=f"{fresh_env_module}:EpisodeNumber-v0", seed=0,
                              total_timesteps=32, num_envs=1, num_steps=8, num_minibatches=2,
                              stop_at_return=threshold, stop_window=5, eval_episodes=0,
                              output_dir=str(tmp_path)))
    episodes = read_csv(next(tmp_path.glob("*/episodes.csv")))
    assert summary["global_steps"] == stop and len(episodes) == stop
    assert [float(e["episode_return"]) for e in episodes] == list(range(1, stop + 1))
    assert summary["solved_threshold"] == threshold and summary["solved_at_step"] is None


@pytest.mark.parametrize("bad", [math.nan, math.inf])
def test_a_non_finite_loss_stops_cleanly(bad, tmp_path, monkeypatch, capsys):
    original = pm.ppo_loss
    monkeypatch.setattr(pm, "ppo_loss", lambda *a, **k: (original(*a, **k)[0] * bad,
                                                         *original(*a, **k)[1:]))
    summary = pm.main(pm.Args(env_id="MaskedCounter-v0", total_timesteps=64, num_envs=2,
                              num_steps=8, num_minibatches=2, output_dir=str(tmp_path)))
    assert summary["interrupted"] is True and summary["global_steps"] == 16
    assert "the loss became non-finite (NaN or inf) at step 16" in capsys.readouterr().out


@pytest.mark.parametrize("no_mask, said", [(False, "masks from info"),
                                           (True, "masks off (--no-mask)")])
def test_whole_rollouts_and_the_masks_are_said(no_mask, said, tmp_path, capsys):
    # 100 steps in rollouts of 2 * 16 = 32: 3 whole rollouts, 96 steps; the run's first line
    # (after the device's) says where the masks come from.
    summary = pm.main(pm.Args(env_id="MaskedCounter-v0", no_mask=no_mask, total_timesteps=100,
                              num_envs=2, num_steps=16, num_minibatches=2, eval_episodes=0,
                              output_dir=str(tmp_path)))
    out = capsys.readouterr().out
    assert summary["global_steps"] == 96
    assert out.startswith("ppo_masked.py: device cpu\n"
                          f"ppo_masked.py: MaskedCounter-v0, seed 1, {said}\n")


def test_an_evaluated_checkpoint_is_restored_into_a_network_of_its_own_width(tmp_path,
                                                                           monkeypatch):
    # A model 8 wide (--hidden-size 8) evaluated with no --hidden-size (the default 64): the
    # agent handed to Run, which restores the checkpoint into it, has the model's 8 units in
    # the first hidden layer of the actor and of the critic (MODEL_FLAGS). Run is stood in by
    # a recorder that makes the Run without the checkpoint, so a network of the flag's width
    # fails here, not as load_state_dict's size mismatch before any assertion.
    model = tmp_path / "model.pt"
    pm.save_checkpoint(model, {"agent": pm.Agent(1, 4, hidden_size=8)},
                       pm.Args(env_id="MaskedCounter-v0", hidden_size=8))
    widths, run = [], pm.Run

    def recorder(args, device, models, checkpoint=None, **kwargs):
        widths.append([net[0].out_features for net in (models["agent"].actor,
                                                       models["agent"].critic)])
        return run(args, device, models, None, **kwargs)
    monkeypatch.setattr(pm, "Run", recorder)
    pm.main(pm.Args(env_id="MaskedCounter-v0", eval_checkpoint=str(model), eval_episodes=1,
                    output_dir=str(tmp_path / "eval")))
    assert widths == [[8, 8]]


@pytest.mark.slow  # determinism: two whole runs
def test_same_seed_gives_the_same_episodes(tmp_path):
    rows = same_seed_episodes(lambda out: pm.main(pm.Args(
        total_timesteps=4096, num_envs=16, num_steps=32, eval_episodes=0, output_dir=out)),
        tmp_path)
    assert len(rows) >= 16 and len({r[1] for r in rows}) > 1


# ---------------------------------------------------------------------------------------
# Bad input: one line on stderr, exit status 2 (ppo_masked.py's own checks: check_flags,
# check_spaces)
# ---------------------------------------------------------------------------------------
@pytest.mark.parametrize("argv, message", [
    (["--env-id", "CartPole-v1"], "environment 0 gave no info['action_mask'] after reset of "
     "CartPole-v1; pass --mask-source obs if the mask is an 'action_mask' entry of a Dict "
     "observation, or train without masks with --no-mask"),
    (["--mask-source", "obs"], "Taxi-v4 has no 'action_mask' entry in its observation (a "
     "Discrete); pass --mask-source info, or train with --no-mask"),
    (["--env-id", "DictMaskedCounter-v0", "--mask-source", "info"],
     "gave no info['action_mask'] after reset of DictMaskedCounter-v0"),
    (["--env-id", "ShortMask-v0"], "the action mask after reset of ShortMask-v0 has length (3,) "
     "but the action space has 4 actions"),
    (["--env-id", "Pendulum-v1"], "Box action space; ppo_masked.py masks Discrete ones"),
    (["--env-id", "SequenceObs-v0"], "observation space is a Sequence of no fixed size"),
    (["--env-id", "OnlyMask-v0"], "nothing but the action mask to feed the network"),
    (["--num-envs", "3", "--num-steps", "5", "--num-minibatches", "4"],
     "num_envs*num_steps = 15 is not divisible by --num-minibatches 4"),
    (["--num-envs", "2", "--num-steps", "2", "--num-minibatches", "4"], "minibatches of 1 sample"),
    (["--num-envs", "0"], "--num-envs must be positive"),
    (["--stop-window", "0"], "--stop-window must be positive"),
    (["--total-timesteps", "100"], "less than one rollout"),
    (["--learning-rate", "0"], "--learning-rate must be positive"),
    (["--gamma", "1.5"], "--gamma must be in [0, 1]"),
])
def test_bad_input_is_one_line_and_exit_status_2(argv, message, check_usage_error):
    check_usage_error("ppo_masked.py", argv, message)


def test_a_checkpoints_evaluation_is_not_held_to_one_rollout():
    # --total-timesteps 100 is less than one rollout of 32 * 64 steps: refused for training,
    # not for evaluating a checkpoint, which trains nothing
    pm.check_flags(pm.Args(total_timesteps=100, eval_checkpoint="model.pt"))
    with pytest.raises(pm.UsageError, match="less than one rollout"):
        pm.check_flags(pm.Args(total_timesteps=100))


def test_an_environment_without_masks_trains_with_no_mask(tmp_path):
    summary = pm.main(pm.Args(env_id="CartPole-v1", no_mask=True, total_timesteps=256,
                              num_envs=2, num_steps=64, eval_episodes=1, output_dir=str(tmp_path)))
    assert summary["global_steps"] == 256 and summary["eval_return_mean"] > 0


def test_a_mask_that_allows_nothing_mid_run_names_the_step(run_cli, tmp_path):
    # NoActionAtTwo's mask is empty at t = 2, reached after 2 steps of 2 environments: the
    # run stops there, in one line and exit status 2, as bad input does
    code, out, err = run_cli("ppo_masked.py", ["--env-id", "NoActionAtTwo-v0", "--num-envs", "2",
                                               "--num-steps", "8", "--num-minibatches", "2",
                                               "--total-timesteps", "64",
                                               "--output-dir", str(tmp_path)])
    assert code == 2 and err.count("\n") == 1
    assert err == ("ppo_masked.py: error: the action mask of environment 0 at step 4 allows no "
                   "action; the environment must allow at least one\n")

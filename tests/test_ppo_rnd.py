"""Tests of ppo_rnd.py: the math by hand, the two streams of the buffer, the glue (the
predictor learns, the target does not; the intrinsic reward reaches its own stream only;
--int-coef 0 is ppo.py), its hooks (its own checks, its greedy policy, its model's flags),
runs end to end, determinism. The plumbing's behaviour is tested in test_plumbing.py."""
import json
import math
import os

import numpy as np
import pytest
import torch

import ppo
import ppo_rnd
from conftest import (approx, check_an_evaluation_trains_nothing,
                      check_every_evaluation_reads_the_running_statistics_and_leaves_them_alone,
                      check_the_epochs_kl_and_clipfrac,
                      check_the_evaluation_takes_the_policys_mode, episode_rows, read_csv,
                      same_seed_episodes, spy_on, spy_on_seeds, spy_on_weights, tensor)


def column(*values):
    """A [T, 1] tensor: one environment's values over T steps."""
    return torch.tensor(values, dtype=torch.float32).unsqueeze(1)


# ---------------------------------------------------------------------------------------
# The intrinsic reward and the predictor's loss, by hand (k = 2 features)
# ---------------------------------------------------------------------------------------
def hand_set_rnd(target_bias, predictor_bias):
    """An RND whose networks ignore x (every weight 0) and output their last biases."""
    rnd = ppo_rnd.RND(obs_dim=3, hidden_size=4, output_size=2)
    with torch.no_grad():
        for net, bias in ((rnd.target, target_bias), (rnd.predictor, predictor_bias)):
            for layer in net[::2]:
                layer.weight.zero_(), layer.bias.zero_()
            net[-1].bias.copy_(torch.tensor(bias))
    return rnd


def test_intrinsic_reward_of_a_hand_set_predictor_and_target():
    # f(x) = [1, -1] and f_hat(x) = [0, 1] for every x:
    # i = ((0 - 1)^2 + (1 - (-1))^2) / 2 = (1 + 4) / 2 = 2.5, for each of the 2 states
    rnd = hand_set_rnd(target_bias=[1.0, -1.0], predictor_bias=[0.0, 1.0])
    assert ppo_rnd.intrinsic_reward(*rnd(torch.zeros(2, 3))).tolist() == approx([2.5, 2.5])
    # directly: [1, 2] against [0, 0] -> (1 + 4) / 2 = 2.5; [0, 0] against [3, 4] -> (9 + 16) / 2
    # = 12.5; a [T, N, k] input gives [T, N]
    predicted, target = tensor(1, 2, 0, 0).view(2, 1, 2), tensor(0, 0, 3, 4).view(2, 1, 2)
    assert ppo_rnd.intrinsic_reward(predicted, target).tolist() == [[2.5], [12.5]]


def test_predictor_loss_averages_the_kept_samples_only():
    # errors i = [(1 + 4) / 2, (9 + 16) / 2, (0.25 + 0.25) / 2] = [2.5, 12.5, 0.25];
    # kept samples 0 and 2: (2.5 + 0.25) / 2 = 1.375
    predicted = torch.tensor([[1.0, 2.0], [0.0, 0.0], [0.5, 0.5]])
    target = torch.tensor([[0.0, 0.0], [3.0, 4.0], [0.0, 1.0]])
    assert ppo_rnd.predictor_loss(predicted, target, tensor(1, 0, 1)).item() == approx(1.375)
    # none kept: 0 / max(1, 0) = 0
    assert ppo_rnd.predictor_loss(predicted, target, tensor(0, 0, 0)).item() == 0.0


def test_predictor_loss_trains_the_predictor_and_never_the_target():
    rnd = hand_set_rnd(target_bias=[1.0, -1.0], predictor_bias=[0.0, 1.0])
    # the loss first: i = 2.5 for each state (above), both kept: (2.5 + 2.5) / 2 = 2.5
    loss = ppo_rnd.predictor_loss(*rnd(torch.zeros(2, 3)), tensor(1, 1))
    assert loss.item() == approx(2.5)
    loss.backward()
    # dL/db_hat = (2 / k) * (f_hat - f) averaged over the 2 kept states = [0 - 1, 1 + 1] = [-1, 2]
    assert rnd.predictor[-1].bias.grad.tolist() == approx([-1.0, 2.0])
    assert all(p.grad is None and not p.requires_grad for p in rnd.target.parameters()), (
        "the target network is fixed: no gradient reaches it, only the predictor learns")


# ---------------------------------------------------------------------------------------
# The normalization of the intrinsic reward by the running std of its discounted sum
# ---------------------------------------------------------------------------------------
def test_discounted_sums_run_forward_from_the_last_rollout():
    # gamma = 0.5, R_{-1} = [0.5, 0]: R_0 = 0.25 + 1 = 1.25, R_1 = 0.625 + 2 = 2.625;
    # the second environment: R_0 = 0 + 4 = 4, R_1 = 2 + 0 = 2
    sums = ppo_rnd.discounted_sums(np.array([[1.0, 4.0], [2.0, 0.0]]), np.array([0.5, 0.0]), 0.5)
    assert sums.tolist() == [[1.25, 4.0], [2.625, 2.0]]


def test_intrinsic_reward_normalization_over_two_rollouts():
    # One environment, gamma_int = 0.5. RunningMeanStd starts with a weight of 1e-4 (mean 0,
    # var 1), which moves these figures by about 1e-4 of themselves: rel=1e-3.
    scaler = ppo_rnd.IntrinsicRewardScaler(num_envs=1, gamma=0.5)
    # Rollout 1, i = [1, 2]: R = [1, 0.5*1 + 2 = 2.5]; mean 1.75, var ((0.75)^2 + (0.75)^2) / 2
    # = 0.5625, std 0.75: r_int = [1 / 0.75, 2 / 0.75] = [1.3333, 2.6667]
    first = scaler(np.array([[1.0], [2.0]]))
    assert first[:, 0].tolist() == pytest.approx([4 / 3, 8 / 3], rel=1e-3)
    # Rollout 2, i = [0, 4], R carried on: [0.5*2.5 + 0 = 1.25, 0.5*1.25 + 4 = 4.625]. Every R
    # so far: [1, 2.5, 1.25, 4.625], mean 9.375 / 4 = 2.34375, mean of squares (1 + 6.25 +
    # 1.5625 + 21.390625) / 4 = 7.55078125, var 7.55078125 - 2.34375^2 = 2.0576171875,
    # std 1.434440: r_int = [0, 4 / 1.434440 = 2.788544]
    second = scaler(np.array([[0.0], [4.0]]))
    assert second[:, 0].tolist() == pytest.approx([0.0, 2.788544], rel=1e-3)
    assert scaler.last.tolist() == [4.625], (
        "the scaler keeps the last discounted sum R of each environment in self.last")


# ---------------------------------------------------------------------------------------
# GAE of the two streams over the same steps, and the combined advantage, by hand.
# One environment, 3 steps, gamma = gamma_int = lambda = 0.5 (gamma * lambda = 0.25):
# terminated at t = 0, truncated at t = 1 (its true final observation is worth V_ext 6).
# ---------------------------------------------------------------------------------------
class StubValues:
    """V_ext(s) = s and V_int(s) = 2 s for one-number observations s."""

    def get_value(self, obs):
        return obs[..., 0]

    def get_value_int(self, obs):
        return 2 * obs[..., 0]


def two_stream_buffer(rewards_int=(2.0, 0.0, 1.0), gamma_int=0.5):
    buffer = ppo_rnd.RolloutBuffer(3, 1, (1,), (), False, "cpu")
    buffer.obs[:, 0, 0] = tensor(0.5, 1.0, 2.0)
    buffer.values[:] = column(0.5, 1.0, 2.0)  # V_ext(s_t) = s_t
    buffer.values_int[:] = column(1.0, 2.0, 3.0)  # V_int as stored during the rollout
    buffer.rewards[:] = column(1.0, 1.0, 1.0)
    buffer.rewards_int[:] = column(*rewards_int)
    buffer.terminated[0, 0], buffer.truncated[1, 0] = True, True
    buffer.final_obs[1, 0, 0] = 6.0  # V_ext = 6, V_int would be 12: the intrinsic stream ignores it
    buffer.last_obs[0, 0] = 4.0  # V_ext(s_3) = 4, V_int(s_3) = 8
    buffer.compute_returns(StubValues(), gamma=0.5, gamma_int=gamma_int, gae_lambda=0.5)
    return buffer


def test_extrinsic_gae_is_cut_by_the_termination_and_bootstraps_at_the_truncation():
    # next V_ext = [1 (terminated: unused), 6 (the truncated step's final obs), 4 (s_3)]
    # delta_0 = 1 + 0 - 0.5 = 0.5;  delta_1 = 1 + 0.5*6 - 1 = 3;  delta_2 = 1 + 0.5*4 - 2 = 1
    # A_2 = 1;  A_1 = 3 + 0 (the episode ended) = 3;  A_0 = 0.5 + 0 (ended) = 0.5
    # R_ext = A + V = [1, 4, 3]
    buffer = two_stream_buffer()
    assert buffer.advantages[:, 0].tolist() == approx([0.5, 3.0, 1.0])
    assert buffer.returns[:, 0].tolist() == approx([1.0, 4.0, 3.0])


def test_intrinsic_gae_runs_through_both_episode_ends():
    # next V_int = [V_int stored at t=1 and t=2, V_int(s_3)] = [2, 3, 8], no end flags
    # delta_0 = 2 + 0.5*2 - 1 = 2;  delta_1 = 0 + 0.5*3 - 2 = -0.5;  delta_2 = 1 + 0.5*8 - 3 = 2
    # A_2 = 2;  A_1 = -0.5 + 0.25*2 = 0;  A_0 = 2 + 0.25*0 = 2;  R_int = A + V = [3, 2, 5]
    buffer = two_stream_buffer()
    assert buffer.advantages_int[:, 0].tolist() == approx([2.0, 0.0, 2.0])
    assert buffer.returns_int[:, 0].tolist() == approx([3.0, 2.0, 5.0])
    # gamma_int 1 (gamma stays 0.5): delta = [2 + 2 - 1, 0 + 3 - 2, 1 + 8 - 3] = [3, 1, 6],
    # gamma_int * lambda = 0.5: A_2 = 6;  A_1 = 1 + 0.5*6 = 4;  A_0 = 3 + 0.5*4 = 5; the
    # extrinsic stream, on gamma, stays [0.5, 3, 1]
    other = two_stream_buffer(gamma_int=1.0)
    assert other.advantages_int[:, 0].tolist() == approx([5.0, 4.0, 6.0])
    assert other.advantages[:, 0].tolist() == approx([0.5, 3.0, 1.0])


def test_the_intrinsic_reward_reaches_the_intrinsic_stream_only():
    # other intrinsic rewards [0, 0, 0]: the extrinsic stream is the same, the intrinsic one
    # becomes delta = [0 + 1 - 1, 0 + 1.5 - 2, 0 + 4 - 3] = [0, -0.5, 1]: A_2 = 1,
    # A_1 = -0.5 + 0.25 = -0.25, A_0 = 0 - 0.0625 = -0.0625
    buffer, other = two_stream_buffer(), two_stream_buffer(rewards_int=(0.0, 0.0, 0.0))
    assert torch.equal(buffer.advantages, other.advantages), (
        "the intrinsic rewards must not reach the extrinsic stream's advantages")
    assert torch.equal(buffer.returns, other.returns), (
        "the intrinsic rewards must not reach the extrinsic stream's returns")
    assert other.advantages_int[:, 0].tolist() == approx([-0.0625, -0.25, 1.0])


def test_the_combined_advantage():
    # c_ext = 2, c_int = 1: [2*0.5 + 2, 2*3 + 0, 2*1 + 2] = [3, 6, 4]
    buffer = two_stream_buffer()
    combined = ppo_rnd.combine_advantages(buffer.advantages, buffer.advantages_int, 2.0, 1.0)
    assert combined[:, 0].tolist() == approx([3.0, 6.0, 4.0])
    # c_int = 0: the extrinsic advantage alone, [0.5, 3, 1]
    assert ppo_rnd.combine_advantages(tensor(0.5, 3, 1), tensor(2, 0, 2), 1.0, 0.0).tolist() \
        == approx([0.5, 3.0, 1.0])


# ---------------------------------------------------------------------------------------
# Glue: what the loop gives the math
# ---------------------------------------------------------------------------------------
TINY = dict(env_id="CartPole-v1", total_timesteps=768, num_envs=2, num_steps=128,
            num_minibatches=2, update_epochs=2, rnd_init_steps=16, eval_episodes=2)


def test_the_loop_gives_each_stream_its_own_rewards_and_ends(tmp_path, monkeypatch):
    # CartPole pays 1 a step: the extrinsic call gets the environment's rewards and its
    # episode ends; the intrinsic call gets the buffer's intrinsic rewards (>= 0, not all
    # equal) and no end at all, with gamma_int. Both get --gae-lambda 0.7 (default 0.95).
    calls, original = [], ppo_rnd.compute_gae
    monkeypatch.setattr(ppo_rnd, "compute_gae", lambda *a: calls.append(a) or original(*a))
    ppo_rnd.main(ppo_rnd.Args(**TINY, gamma=0.9, gamma_int=0.8, gae_lambda=0.7,
                              output_dir=str(tmp_path)))
    assert len(calls) == 2 * 3  # two streams, three rollouts
    for ext, intr in zip(calls[::2], calls[1::2]):
        assert torch.all(ext[0] == 1) and ext[3].any() and ext[5:] == (0.9, 0.7)
        assert torch.all(intr[0] >= 0) and intr[0].std() > 0 and intr[5:] == (0.8, 0.7)
        assert not intr[3].any() and not intr[4].any()


def test_the_agent_and_the_predictor_learn_and_the_target_never_changes(tmp_path, monkeypatch):
    # Every weight of the agent (the actor, both value heads) and of the RND's predictor
    # moves; none of the RND's target does, nor gets a gradient. Both RND networks give
    # --rnd-output-size 16 features from hidden layers of --hidden-size 32, and the agent's
    # three MLPs (CartPole: 2 logits, one value each) are 32 wide too (the defaults are both
    # 64: a run at the defaults cannot tell them apart).
    made = spy_on(monkeypatch, ppo_rnd, "train", lambda args, agent, rnd, *rest: (agent, rnd))
    moved = spy_on_weights(monkeypatch, ppo_rnd)
    ppo_rnd.main(ppo_rnd.Args(**TINY, rnd_output_size=16, hidden_size=32,
                              output_dir=str(tmp_path)))
    (agent_still, _), (rnd_still, rnd_changed) = moved()
    assert agent_still == []
    assert {n.split(".")[0] for n in rnd_still} == {"target"}
    assert {n.split(".")[0] for n in rnd_changed} == {"predictor"}
    ((agent, rnd),) = made
    assert all(p.grad is None for p in rnd.target.parameters())
    for net in (rnd.target, rnd.predictor):
        assert [layer.out_features for layer in net[::2]] == [32, 32, 16]
    for net, out in ((agent.actor, 2), (agent.critic, 1), (agent.critic_int, 1)):
        assert [layer.out_features for layer in net[::2]] == [32, 32, out]
    updates = read_csv(next(tmp_path.glob("*/updates.csv")))
    assert all(float(u["predictor_loss"]) > 0 for u in updates)


@pytest.mark.parametrize("int_coef", [0.0, 1.0])
def test_int_coef_zero_is_ppo_step_for_step(int_coef, tmp_path):
    # The same flags and seed: with --int-coef 0 ppo_rnd.py plays the same episodes and ends
    # with the same actor and critic weights as ppo.py; with 1 it does not (the test can fail).
    flags = dict(env_id="CartPole-v1", total_timesteps=768, num_envs=2, num_steps=128,
                 num_minibatches=2, update_epochs=2, learning_rate=1e-3, gamma=0.99,
                 gae_lambda=0.95, norm_obs=True, eval_episodes=2, save_model=True)
    ppo.main(ppo.Args(**flags, output_dir=str(tmp_path / "ppo")))
    ppo_rnd.main(ppo_rnd.Args(**flags, int_coef=int_coef, ext_coef=1.0, rnd_init_steps=16,
                              output_dir=str(tmp_path / "rnd")))
    same_episodes = episode_rows(tmp_path / "ppo") == episode_rows(tmp_path / "rnd")
    plain = torch.load(next(tmp_path.glob("ppo/*/model.pt")), weights_only=True)["agent"]
    ours = torch.load(next(tmp_path.glob("rnd/*/model.pt")), weights_only=True)["agent"]
    same_weights = all(torch.equal(plain[k], ours[k]) for k in plain)
    assert same_episodes == same_weights == (int_coef == 0)
    assert {k for k in ours if k.startswith("critic_int")} and set(plain) < set(ours)


@pytest.mark.parametrize("env_id, norm_obs", [("CountToThree-v0", False),
                                             ("BoxTerminateAtThree-v0", True)])
def test_the_rnd_sees_the_state_each_step_reached(env_id, norm_obs, tmp_path, monkeypatch):
    # CountToThree-v0 counts 1, 2, 3 and is cut at 3, BoxTerminateAtThree-v0 terminates
    # there (either way the true final observation is 3, the next one 0): the RND's
    # normalizer is given [1, 2, 3, 1, 2, 3, ...] for each environment, never the reset's
    # 0. (The random steps come first, on their own environments: the call with 2 * 16 rows.)
    # --seed 7, not the default 1, seeds torch and the environments: the random steps' at
    # 7 + 200,000, training's at 7, the final evaluation's at 7 + 100,000.
    # The RND's normalization is its own, on with --no-norm-obs too: its statistics hold
    # the 32 + 12 states it was given, and its last output is the last states normalized
    # by them and clipped to [-5, 5] (off, they would keep RunningMeanStd's start, a count
    # of 1e-4, and pass 3 through as 3). The RND's normalizer is the second that main makes
    # (the policy's first); a state of 1,000, about a thousand stds beyond the states 0-3
    # both have seen, comes out of it clipped to 5 (the authors' clip), and out of the policy's
    # to 10 (--norm-obs's), or as it is with --no-norm-obs.
    seen, original = [], ppo_rnd.ObsNormalizer.__call__
    made = spy_on(monkeypatch, ppo_rnd.ObsNormalizer, "__init__", lambda self, *a, **k: self)

    def spy(self, obs, update=False):
        if self is made[1]:
            seen.append(np.array(obs))
            assert update  # every state the RND sees moves its statistics, the random ones too
            seen_by.append((self, original(self, obs, update)))
            return seen_by[-1][1]
        return original(self, obs, update)

    seen_by = []
    monkeypatch.setattr(ppo_rnd.ObsNormalizer, "__call__", spy)
    seeds, resets = spy_on_seeds(monkeypatch, ppo_rnd)
    ppo_rnd.main(ppo_rnd.Args(env_id=env_id, total_timesteps=12, num_envs=2,
                              num_steps=6, num_minibatches=2, rnd_init_steps=16, seed=7,
                              norm_obs=norm_obs, eval_episodes=2, output_dir=str(tmp_path)))
    assert seeds == [7] and resets == [200_007, 7, 100_007]
    assert seen[0].shape == (32, 1)
    assert [s[:, 0].tolist() for s in seen[1:]] == [[t, t] for t in (1, 2, 3, 1, 2, 3)]
    rms, last = seen_by[-1][0].rms, seen_by[-1][1]
    states = np.concatenate(seen)
    assert rms.count == pytest.approx(44, abs=1e-3)
    assert rms.mean == pytest.approx(states.mean(0), rel=1e-3)
    assert np.allclose(last, np.clip((np.full((2, 1), 3.0) - rms.mean) / np.sqrt(rms.var + 1e-8),
                                     -5, 5), atol=1e-6)
    assert not np.allclose(last, 3)
    far = np.full((1, 1), 1e3)
    assert original(made[1], far).tolist() == [[5.0]]
    assert original(made[0], far).tolist() == [[10.0 if norm_obs else 1e3]]


def test_the_random_steps_are_a_function_of_their_seed():
    # random_states seeds the random agent's actions as well as the resets: at one seed the
    # 2 environments x 16 steps of CartPole reach the same 32 states twice, at another seed
    # others. (Unseeded actions would repeat all 32 coin flips with probability 2^-32.)
    first, again, other = (ppo_rnd.random_states("CartPole-v1", 2, 16, seed)
                           for seed in (5, 5, 6))
    assert first.shape == (32, 4)
    assert np.array_equal(first, again) and not np.allclose(first, other)


def test_the_predictor_learns_from_a_fraction_of_each_minibatch(tmp_path, monkeypatch):
    # TINY's run: 3 rollouts of 2 x 128 steps, 2 epochs of 2 minibatches of 128: 12 calls of
    # predictor_loss, 3 * 2 * 256 = 1,536 samples. Each is kept with probability
    # --rnd-update-proportion 0.6 (default 0.25): the kept fraction has a std of
    # sqrt(0.6 * 0.4 / 1536) = 0.0125, so 0.6 +- 0.05 (4 std) holds unless the mask is wrong
    # (all kept: 1.0; the default's 0.25). Each rollout's updates.csv row has predictor_loss
    # the mean of its 4 calls' losses (2 epochs x 2 minibatches), not of the last epoch's 2.
    masks, losses, original = [], [], ppo_rnd.predictor_loss

    def spy(predicted, target, keep):
        masks.append(keep)
        losses.append(original(predicted, target, keep))
        return losses[-1]

    monkeypatch.setattr(ppo_rnd, "predictor_loss", spy)
    ppo_rnd.main(ppo_rnd.Args(**TINY, rnd_update_proportion=0.6, output_dir=str(tmp_path)))
    kept = torch.cat(masks).float()
    assert len(masks) == 12 and kept.numel() == 1536
    assert abs(kept.mean().item() - 0.6) < 0.05
    rows = read_csv(next(tmp_path.glob("*/updates.csv")))
    per_update = [[loss.item() for loss in losses[4 * u:4 * u + 4]] for u in range(3)]
    assert [float(r["predictor_loss"]) for r in rows] == pytest.approx(
        [np.mean(u) for u in per_update], rel=1e-5)
    assert [np.mean(u) for u in per_update] != pytest.approx([np.mean(u[2:]) for u in per_update],
                                                             rel=1e-5)


@pytest.fixture
def watch(monkeypatch, tmp_path):
    """run(**flags) trains on CartPole, 2 rollouts of 2 x 32 steps, one epoch of one
    minibatch in rollout order, and returns what the loop gave the math, in call order:
    "rnd_in" (each RND call's input, whether it took gradients, and its outputs (f_hat(x),
    f(x))), "rnd_normalized" (the
    RND normalizer's output at each rollout step), "scaler" (each IntrinsicRewardScaler
    call's gamma, input and output), "buffers" (the buffer's fields after compute_returns,
    with "V" and "V_int": the agent's two heads on its observations, while the agent is still
    the one that collected it), "gae", "combine" (args), "loss" (ppo_loss's keywords) and
    "clip" (each gradient clipping's max_norm and the gradients of both critics' and the
    predictor's last biases), "keep" (predictor_loss's masks)."""
    seen = {k: [] for k in ("rnd_in", "rnd_normalized", "scaler", "buffers", "gae", "combine",
                            "loss", "clip", "keep")}
    made = {}
    monkeypatch.setattr(torch, "randperm", lambda n, **kwargs: torch.arange(n))
    original = {name: getattr(ppo_rnd, name) for name in ("train", "compute_gae",
                                                          "combine_advantages", "ppo_loss")}
    forward, normalize = ppo_rnd.RND.forward, ppo_rnd.ObsNormalizer.__call__
    scale, returns = ppo_rnd.IntrinsicRewardScaler.__call__, ppo_rnd.RolloutBuffer.compute_returns
    clip = torch.nn.utils.clip_grad_norm_

    def train(args, agent, rnd, *rest):
        made.update(agent=agent, rnd=rnd)
        return original["train"](args, agent, rnd, *rest)

    def rnd_forward(self, x):
        out = forward(self, x)
        seen["rnd_in"].append((x.clone(), torch.is_grad_enabled(), [y.detach() for y in out]))
        return out

    def normalizer(self, obs, update=False):
        out = normalize(self, obs, update)
        if self.clip == 5.0 and len(obs) == 2:  # the RND's, on the 2 training environments
            seen["rnd_normalized"].append(out.copy())
        return out

    def scaler(self, rewards):
        out = scale(self, rewards)
        seen["scaler"].append((self.gamma, rewards.copy(), out.copy()))
        return out

    def compute_returns(self, agent, *args):
        with torch.no_grad():
            heads = {"V": agent.get_value(self.obs), "V_int": agent.get_value_int(self.obs)}
        returns(self, agent, *args)
        seen["buffers"].append({**heads, **{k: v.clone() for k, v in vars(self).items()}})

    def clip_grad_norm(params, max_norm, *args, **kwargs):
        agent = made["agent"]
        seen["clip"].append((max_norm, agent.critic[-1].bias.grad.clone(),
                             agent.critic_int[-1].bias.grad.clone(),
                             made["rnd"].predictor[-1].bias.grad.clone()))
        return clip(params, max_norm, *args, **kwargs)

    monkeypatch.setattr(ppo_rnd, "train", train)
    monkeypatch.setattr(ppo_rnd.RND, "forward", rnd_forward)
    monkeypatch.setattr(ppo_rnd.ObsNormalizer, "__call__", normalizer)
    monkeypatch.setattr(ppo_rnd.IntrinsicRewardScaler, "__call__", scaler)
    monkeypatch.setattr(ppo_rnd.RolloutBuffer, "compute_returns", compute_returns)
    monkeypatch.setattr(torch.nn.utils, "clip_grad_norm_", clip_grad_norm)
    for name, key in (("compute_gae", "gae"), ("combine_advantages", "combine")):
        monkeypatch.setattr(ppo_rnd, name, lambda *a, name=name, key=key: seen[key].append(
            [x.clone() if torch.is_tensor(x) else x for x in a]) or original[name](*a))
    monkeypatch.setattr(ppo_rnd, "ppo_loss", lambda **kw: seen["loss"].append(kw)
                        or original["ppo_loss"](**kw))
    predictor_loss = ppo_rnd.predictor_loss
    monkeypatch.setattr(ppo_rnd, "predictor_loss", lambda predicted, target, keep: seen[
        "keep"].append(keep) or predictor_loss(predicted, target, keep))

    def run(**flags):
        args = dict(env_id="CartPole-v1", total_timesteps=128, num_envs=2, num_steps=32,
                    num_minibatches=1, update_epochs=1, rnd_init_steps=8, eval_episodes=0,
                    output_dir=str(tmp_path))
        ppo_rnd.main(ppo_rnd.Args(**{**args, **flags}))
        assert len(seen["buffers"]) == 2
        return seen
    return run


def test_the_rollout_stores_each_heads_value_of_the_state_it_acted_on(watch):
    # values and values_int are V_ext(s_t) and V_int(s_t) of the policy's observation s_t,
    # as the agent that acted computed them: the two heads differ, so a swap shows. Both
    # streams bootstrap after step T - 1 = 31 from last_obs = s_T, the observation the second
    # rollout then starts from (its s_0), not from the first rollout's last stored s_31.
    first, second = buffers = watch()["buffers"]
    for b in buffers:
        assert torch.allclose(b["values"], b["V"], atol=1e-6)
        assert torch.allclose(b["values_int"], b["V_int"], atol=1e-6)
        assert not torch.allclose(b["values"], b["values_int"])
    assert torch.equal(first["last_obs"], second["obs"][0])
    assert not torch.equal(first["last_obs"], first["obs"][-1])


def test_the_intrinsic_reward_is_the_rnd_error_on_its_own_normalized_next_states(watch):
    # Each rollout: the RND scores, without gradients, the 32 x 2 states its normalizer gave
    # at the 32 steps (x_{t+1}, clip 5; not the policy's normalized s_t); the scaler, with
    # gamma_int, gets those errors and its output is the buffer's rewards_int, which the
    # intrinsic GAE call (the second of each rollout) is given.
    seen = watch(gamma_int=0.9)
    scored = [(x, out) for x, grad, out in seen["rnd_in"] if not grad]
    assert len(scored) == 2 and len(seen["scaler"]) == 2
    for r, ((x, out), b, (gamma, errors, scaled)) in enumerate(zip(scored, seen["buffers"],
                                                                   seen["scaler"])):
        reached = torch.from_numpy(np.stack(seen["rnd_normalized"][32 * r:32 * (r + 1)]))
        assert torch.equal(x, reached) and torch.equal(b["rnd_obs"], reached)
        assert not torch.allclose(x, b["obs"])  # the policy's s_t (clip 10, own statistics)
        assert gamma == 0.9
        assert np.allclose(errors, ppo_rnd.intrinsic_reward(*out).numpy())
        assert torch.equal(b["rewards_int"], torch.from_numpy(scaled))
        assert not np.allclose(scaled, errors)
        assert torch.equal(seen["gae"][2 * r + 1][0], b["rewards_int"])


def test_the_scale_of_the_intrinsic_rewards_runs_over_every_rollout_so_far(watch):
    # The second rollout's rewards are its errors i over the std of every forward discounted
    # sum so far: R_t = gamma_int R_{t-1} + i_t (R_{-1} = 0 before the first rollout) runs
    # on through both rollouts' 32 + 32 rows of each environment, and the std is that of
    # all 2 x 64 of them (RunningMeanStd's prior weight of 1e-4 moves it by less than 1e-5
    # of itself). The second rollout's sums alone, started again from 0, give another scale.
    seen = watch(gamma_int=0.9)
    (_, first, _), (_, second, scaled) = seen["scaler"]

    def sums(errors):  # R_t of each environment, from R_{-1} = 0
        last, out = np.zeros(2), []
        for i in errors:
            last = 0.9 * last + i
            out.append(last)
        return np.array(out)

    assert np.allclose(scaled, second / np.sqrt(sums(np.concatenate([first, second])).var()
                                                + 1e-8), rtol=1e-4)
    assert not np.allclose(scaled, second / np.sqrt(sums(second).var() + 1e-8), rtol=1e-2)


def test_updates_csv_logs_the_rnd_error_beside_the_scaled_reward(watch, tmp_path):
    # Each rollout's row (at steps 64 and 128): intrinsic_reward is the mean of the RND's
    # errors i (the scaler's input), and intrinsic_reward_normalized the mean of
    # r_int = i / sigma_R (its output), another number
    seen = watch()
    rows = read_csv(next(tmp_path.glob("*/updates.csv")))
    errors = [e.mean() for _, e, _ in seen["scaler"]]
    assert [int(r["global_step"]) for r in rows] == [64, 128]
    assert [float(r["intrinsic_reward"]) for r in rows] == pytest.approx(errors, rel=1e-5)
    scaled = [r.mean() for _, _, r in seen["scaler"]]
    assert [float(r["intrinsic_reward_normalized"]) for r in rows] == pytest.approx(scaled,
                                                                                   rel=1e-5)
    assert errors != pytest.approx(scaled, rel=1e-2)


def test_each_value_head_regresses_on_its_own_streams_returns(watch):
    # The first minibatch (the whole first rollout, in order) meets the agent that collected
    # it: V = values. d/db of c_v * 0.5 * mean((V - R)^2) for a head's last bias b is
    # c_v * mean(V - R), R^ext for the extrinsic head and R^int for the intrinsic one
    # (clipping at --max-grad-norm 1e9 leaves them as they are).
    seen = watch(vf_coef=0.7, max_grad_norm=1e9)
    b, (max_norm, grad, grad_int, _) = seen["buffers"][0], seen["clip"][0]
    assert max_norm == 1e9
    assert grad.item() == pytest.approx(0.7 * (b["values"] - b["returns"]).mean().item(), rel=1e-4)
    assert grad_int.item() == pytest.approx(
        0.7 * (b["values_int"] - b["returns_int"]).mean().item(), rel=1e-4)
    assert not torch.allclose(b["returns"], b["returns_int"])


def test_updates_csv_value_loss_int_is_the_mean_over_the_updates_minibatches(watch, tmp_path,
                                                                             monkeypatch):
    # Each rollout of 2 x 32 = 64 steps, in rollout order (watch), in 2 minibatches of 32
    # (rows 0-31 and 32-63 of the flattened [T, N] buffer) for 2 epochs: 4 minibatches an
    # update, each with L_int = 0.5 * mean((V_int - R^int)^2) of the intrinsic head's values
    # as the update computed them. The row's value_loss_int is the mean of its 4 (the last
    # minibatch's alone, like policy_loss's, is another number: the head moves between them).
    original, values_int = ppo_rnd.Agent.get_action_and_value, []

    def spy(self, obs, action=None):
        out = original(self, obs, action)
        if action is not None:  # the update's minibatches, not the rollout's acting
            values_int.append(out[4].detach().clone())
        return out

    monkeypatch.setattr(ppo_rnd.Agent, "get_action_and_value", spy)
    seen = watch(num_minibatches=2, update_epochs=2)
    rows = read_csv(next(tmp_path.glob("*/updates.csv")))
    assert len(rows) == 2 and len(values_int) == 8
    for r, (row, b) in enumerate(zip(rows, seen["buffers"])):
        returns_int = b["returns_int"].flatten()
        losses = [0.5 * ((v - returns_int[32 * (m % 2):32 * (m % 2) + 32]) ** 2).mean().item()
                  for m, v in enumerate(values_int[4 * r:4 * r + 4])]
        assert float(row["value_loss_int"]) == pytest.approx(np.mean(losses), rel=1e-5)
        assert np.mean(losses) != pytest.approx(losses[-1], rel=1e-3)


@pytest.mark.parametrize("norm_adv", [True, False])
def test_the_policy_follows_the_combined_advantage(norm_adv, watch):
    # combine_advantages gets each stream's advantages and --ext-coef, --int-coef; ppo_loss
    # gets them combined (normalized over the minibatch with --norm-adv), the extrinsic
    # returns and values, the behaviour log-probabilities and the flags
    seen = watch(ext_coef=1.5, int_coef=3.0, norm_adv=norm_adv, clip_coef=0.15, ent_coef=0.02,
                 vf_coef=0.6)
    for r, b in enumerate(seen["buffers"]):
        ext, intr, ext_coef, int_coef = seen["combine"][r]
        assert torch.equal(ext, b["advantages"]) and torch.equal(intr, b["advantages_int"])
        assert (ext_coef, int_coef) == (1.5, 3.0)
        kw = seen["loss"][r]
        combined = (1.5 * b["advantages"] + 3.0 * b["advantages_int"]).flatten()
        if norm_adv:
            combined = (combined - combined.mean()) / (combined.std() + 1e-8)
        assert torch.allclose(kw["advantages"], combined, atol=1e-5)
        assert torch.equal(kw["returns"], b["returns"].flatten())
        assert torch.equal(kw["oldvalue"], b["values"].flatten())
        assert torch.equal(kw["oldlogprob"], b["logprobs"].flatten())
        assert (kw["clip_coef"], kw["ent_coef"], kw["vf_coef"]) == (0.15, 0.02, 0.6)


# CountToThree-v0: every third step is truncated, its true final observation 3 is final_obs
# there (read only there: the first rollout has 0 elsewhere). Without --norm-obs it is 3 and
# the next row starts the next episode at 0. With it, the first rollout's rows (both
# environments alike) are normalized by the policy's statistics after each step's update,
# and the final observation by those of its row, without updating them:
#   after 0,0: mean 0 -> 0;  after 0,0,1,1: mean 0.5, var 0.25 -> (1 - 0.5) / 0.5 = 1
#   after 0,0,1,1,2,2:     mean 1, var 2/3 -> (2 - 1) / 0.8165 = 1.2247
#   final 3, same stats:                      (3 - 1) / 0.8165 = 2.4495
#   (after the next episode's 0,0 too: mean 0.75, var 0.6875 -> (3 - 0.75) / 0.8292 = 2.7136)
@pytest.mark.parametrize("norm_obs, rows, final", [(False, [0, 1, 2], 3),
                                                   (True, [0, 1, 1.2247], 2.4495)])
def test_a_truncated_step_keeps_its_true_final_observation_for_the_bootstrap(norm_obs, rows,
                                                                            final, watch):
    buffers = watch(env_id="CountToThree-v0", norm_obs=norm_obs)["buffers"]
    for r, b in enumerate(buffers):
        cut = b["truncated"]
        assert cut.sum() >= 20 and not b["terminated"].any()
        assert r or (b["final_obs"][~cut] == 0).all()
        if not norm_obs:  # raw: every final observation 3, every next row 0
            assert (b["final_obs"][cut] == 3).all() and (b["obs"][1:][cut[:-1]] == 0).all()
    assert buffers[0]["obs"][:3, :, 0].tolist() == [pytest.approx([x, x], abs=1e-3) for x in rows]
    assert buffers[0]["final_obs"][2, :, 0].tolist() == pytest.approx([final, final], abs=1e-3)


@pytest.mark.parametrize("env_id", ["CartPole-v1", "BoxCountToThree-v0"])
def test_the_first_minibatch_sees_the_policy_that_acted(env_id, watch):
    # Before the first optimizer step the agent is the one that collected the rollout: the
    # stored actions (categorical, or Gaussian samples kept unclipped as floats) have the
    # stored log-probabilities under the stored observations, so every ratio is 1
    seen = watch(env_id=env_id)
    first = seen["loss"][0]
    assert torch.allclose(first["newlogprob"].detach(), first["oldlogprob"], atol=1e-5)
    if env_id == "BoxCountToThree-v0":
        actions = seen["buffers"][0]["actions"]
        assert actions.dtype == torch.float32 and (actions != actions.round()).all()


def test_the_predictors_step_descends_its_loss_on_the_kept_samples(watch):
    # d L_rnd / d b_hat for the predictor's last bias: (2/k) sum_b keep_b (f_hat_b - f_b) /
    # max(1, sum_b keep_b), from the first minibatch's outputs and mask (k = 64 features;
    # no other loss reaches the predictor, and --max-grad-norm 1e9 leaves it unclipped)
    seen = watch(max_grad_norm=1e9)
    predicted, target = next(out for _, grad, out in seen["rnd_in"] if grad)
    keep = seen["keep"][0].float()
    expected = 2 / 64 * (keep[:, None] * (predicted - target)).sum(0) / keep.sum().clamp(min=1)
    assert 0 < keep.mean() < 1
    assert torch.allclose(seen["clip"][0][3], expected, atol=1e-6)


def test_the_predictor_trains_on_the_rnd_inputs_of_the_rollout(watch):
    # the RND's calls with gradients (the predictor's loss) take the minibatch's rows of
    # rnd_obs, the RND-normalized states reached, in rollout order here
    seen = watch()
    trained = [x for x, grad, _ in seen["rnd_in"] if grad]
    assert len(trained) == 2
    for x, b in zip(trained, seen["buffers"]):
        assert torch.equal(x, b["rnd_obs"].flatten(0, 1))


# ---------------------------------------------------------------------------------------
# The greedy policy that the plumbing's evaluation calls (greedy_policy)
# ---------------------------------------------------------------------------------------
@pytest.mark.parametrize("continuous", [False, True])
def test_the_evaluation_takes_the_policys_mode_not_a_sample(continuous, monkeypatch):
    agent = ppo_rnd.Agent(1, 1 if continuous else 2, continuous=continuous)
    check_the_evaluation_takes_the_policys_mode(ppo_rnd, agent, continuous, monkeypatch)


def test_every_evaluation_reads_the_running_statistics_and_leaves_them_alone(tmp_path,
                                                                             monkeypatch):
    # The policy's statistics (the RND's have their own, started by the random steps)
    check_every_evaluation_reads_the_running_statistics_and_leaves_them_alone(
        ppo_rnd, tmp_path, monkeypatch, rnd_init_steps=2)


# ---------------------------------------------------------------------------------------
# Runs end to end
# ---------------------------------------------------------------------------------------
@pytest.mark.slow  # a smoke run: a whole tiny run and every file it writes
def test_smoke_run_writes_every_file_and_its_model_evaluates(tmp_path, check_run_folder):
    args = ppo_rnd.Args(**TINY, save_model=True, output_dir=str(tmp_path / "train"))
    summary = ppo_rnd.main(args)
    path, episodes, updates = check_run_folder(summary, args.output_dir, "ppo_rnd", model=True)
    assert summary["global_steps"] == 768 and len(updates) == 3
    assert {"policy_loss", "value_loss", "value_loss_int", "predictor_loss", "intrinsic_reward",
            "intrinsic_reward_normalized", "explained_variance"} <= set(updates[0])
    assert all(float(u["intrinsic_reward"]) > 0 for u in updates)
    for u in updates:  # every diagnostic is a number; TINY's 2 epochs each time (no --target-kl)
        assert all(math.isfinite(float(u[k])) for k in ("policy_loss", "value_loss", "entropy",
                   "approx_kl", "clipfrac", "value_loss_int", "predictor_loss", "learning_rate"))
        assert int(u["epochs"]) == 2
    evaluated = ppo_rnd.main(ppo_rnd.Args(env_id="CartPole-v1", eval_episodes=2,
                                          eval_checkpoint=os.path.join(path, "model.pt"),
                                          output_dir=str(tmp_path / "eval")))
    assert evaluated["eval_return_mean"] == summary["eval_return_mean"]


def test_continuous_actions_and_an_environment_of_your_own(tmp_path, check_run_folder,
                                                           fresh_env_module):
    args = ppo_rnd.Args(env_id="my_envs:Slider-v0", total_timesteps=128, num_envs=2,
                        num_steps=32, hidden_size=8, rnd_init_steps=4, eval_episodes=1,
                        norm_reward=True, target_kl=0.5, output_dir=str(tmp_path))
    summary = ppo_rnd.main(args)
    check_run_folder(summary, args.output_dir, "ppo_rnd")
    assert summary["global_steps"] == 128


def test_nan_loss_stops_cleanly_at_the_step_it_came(tmp_path, monkeypatch, capsys):
    # the first update, after TINY's first rollout of 2 x 128 steps, gives a NaN loss
    original = ppo_rnd.ppo_loss
    monkeypatch.setattr(ppo_rnd, "ppo_loss", lambda **kw: (original(**kw)[0] * math.nan,
                                                           *original(**kw)[1:]))
    summary = ppo_rnd.main(ppo_rnd.Args(**TINY, output_dir=str(tmp_path)))
    assert summary["interrupted"] is True and summary["global_steps"] == 256
    assert "the loss became non-finite (NaN or inf) at step 256" in capsys.readouterr().out


@pytest.mark.slow  # determinism: two whole runs
def test_same_seed_gives_the_same_episodes(tmp_path):
    rows = same_seed_episodes(lambda out: ppo_rnd.main(ppo_rnd.Args(
        **{**TINY, "eval_episodes": 0}, output_dir=out)), tmp_path)
    assert len(rows) > 20


# ---------------------------------------------------------------------------------------
# Flags at values other than their defaults (issue 59), most through conftest.py's checks
# ---------------------------------------------------------------------------------------
# A 6-step run: one rollout of 2 environments * 3 steps, minibatches of 3, after 2 random
# steps of each environment for the RND's statistics
SIX_STEPS = dict(num_envs=2, num_steps=3, num_minibatches=2, rnd_init_steps=2)


def test_an_evaluation_of_a_checkpoint_trains_nothing(tmp_path, capsys):
    # The shared check, on a model trained with --no-norm-obs: its evaluation under the
    # default --norm-obs takes the model's (config.json records the flags it ran with)
    check_an_evaluation_trains_nothing(ppo_rnd, tmp_path, capsys, env_id="my_envs:ThreeSteps-v0",
                                       tiny={**SIX_STEPS, "norm_obs": False})
    (evaluation,) = (tmp_path / "eval").iterdir()
    assert json.loads((evaluation / "config.json").read_text())["norm_obs"] is False


def test_target_kl_and_clipfrac_read_each_epochs_own_ratios(tmp_path, monkeypatch):
    check_the_epochs_kl_and_clipfrac(ppo_rnd, tmp_path, monkeypatch, "CountToThree-v0")


@pytest.mark.parametrize("anneal_lr, rates", [(True, [3e-3, 1.5e-3]), (False, [3e-3, 3e-3])])
def test_the_learning_rate_its_schedule_and_the_whole_rollouts_budget(anneal_lr, rates,
                                                                      tmp_path):
    # --total-timesteps 70 in rollouts of 2 * 16 = 32: 2 whole rollouts, 64 steps.
    # --learning-rate 3e-3 (default 1e-3) is the rate of the one Adam (agent and
    # predictor) that updates.csv reads back; annealed, rollout i of 2 runs at
    # 3e-3 * (1 - (i - 1) / 2): 3e-3, then 1.5e-3; with --no-anneal-lr, 3e-3 both times.
    summary = ppo_rnd.main(ppo_rnd.Args(env_id="CartPole-v1", total_timesteps=70, num_envs=2,
                                        num_steps=16, num_minibatches=2, update_epochs=1,
                                        rnd_init_steps=2, learning_rate=3e-3,
                                        anneal_lr=anneal_lr, eval_episodes=0,
                                        output_dir=str(tmp_path)))
    assert summary["global_steps"] == 64
    updates = read_csv(next(tmp_path.glob("*/updates.csv")))
    assert [float(u["learning_rate"]) for u in updates] == approx(rates)


def test_stop_at_return_stops_the_run_where_the_last_20_reach_it(tmp_path):
    # CountToThree-v0 returns 3 an episode, cut at 3 steps: 2 environments end an episode
    # each every 3 vector steps, 6 global steps, so the 20th ends at step 10 * 6 = 60, in the
    # fourth rollout of 2 * 8 = 16 steps (49..64). --stop-at-return 3 ends the run there;
    # without it the budget, 256, would run on.
    summary = ppo_rnd.main(ppo_rnd.Args(env_id="CountToThree-v0", stop_at_return=3.0,
                                        total_timesteps=256, num_envs=2, num_steps=8,
                                        rnd_init_steps=2, eval_episodes=0,
                                        output_dir=str(tmp_path)))
    assert summary["solved_threshold"] == 3.0
    assert summary["solved_at_step"] == summary["global_steps"] == 60
    assert len(read_csv(next(tmp_path.glob("*/episodes.csv")))) == 20
    assert len(read_csv(next(tmp_path.glob("*/updates.csv")))) == 3


# ---------------------------------------------------------------------------------------
# Bad input: one line on stderr, exit status 2, nothing trained
# ---------------------------------------------------------------------------------------
@pytest.fixture
def bad_checkpoints(tmp_path):
    plain = tmp_path / "plain.pt"  # ppo.py's model: no intrinsic head
    ppo.save_checkpoint(plain, {"agent": ppo.Agent((2,), 3, False),
                                "obs_rms": ppo.ObsNormalizer((2,), True)},
                        ppo.Args(env_id="MountainCar-v0", norm_obs=True))
    return {"plain": str(plain)}


@pytest.mark.parametrize("argv, message", [
    (["--gamma-int", "1.5"], "--gamma-int must be in [0, 1], got 1.5"),
    (["--rnd-update-proportion", "2"], "--rnd-update-proportion must be in [0, 1], got 2.0"),
    (["--rnd-init-steps", "0"], "--rnd-init-steps must be positive, got 0"),
    (["--rnd-output-size", "0"], "--rnd-output-size must be positive"),
    (["--num-envs", "3", "--num-steps", "5", "--num-minibatches", "4"],
     "num_envs*num_steps = 15 is not divisible by --num-minibatches 4"),
    (["--num-envs", "2", "--num-steps", "1", "--num-minibatches", "2"],
     "minibatches of 1 sample cannot normalize"),
    (["--total-timesteps", "100"], "less than one rollout"),
    (["--env-id", "SpinTheBits-v0"], "ppo_rnd.py handles Discrete and flat Box actions"),
    (["--env-id", "FrozenLake-v1"], "Discrete observation space of shape (); ppo_rnd.py's MLPs "
     "need a flat Box"),
    (["--eval-checkpoint", "plain"], "does not fit MountainCar-v0's network"),
])
def test_bad_input_is_one_line_and_exit_status_2(argv, message, check_usage_error,
                                                 bad_checkpoints):
    check_usage_error("ppo_rnd.py", [bad_checkpoints.get(a, a) for a in argv], message)

"""Tests of vpg.py: the math by hand, the buffer, the loop's glue, its hooks (check_flags,
check_spaces, greedy_policy, MODEL_FLAGS), runs end to end. The plumbing's behaviour is
tested once for every script, in test_plumbing.py."""
import importlib
import math

import numpy as np
import pytest
import torch
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

import vpg
from conftest import (approx, check_evaluation_normalizes_with_the_frozen_statistics,
                      check_every_evaluation_reads_the_running_statistics_and_leaves_them_alone,
                      check_gaussian_actions_clipped_for_the_environment_only,
                      check_norm_obs_on_count_to_three, check_the_evaluation_takes_the_policys_mode,
                      LearnedTenTimesObs, read_csv, same_seed_episodes, spy_on, spy_on_seeds,
                      spy_on_weights, tensor, TenTimesObs)


def filled(**flags):
    """vpg.Args with the flags left at None taken from its discrete preset, the settings its
    defaults had before the presets, as main fills them on CartPole-v1."""
    return vpg.fill_preset(vpg.Args(**flags), "discrete")


def column(*values):
    """A [T, 1] tensor: one environment's values over T steps."""
    return torch.tensor(values, dtype=torch.float32).unsqueeze(1)


# ---------------------------------------------------------------------------------------
# Reward-to-go by hand. Three steps of one environment, gamma = 0.5, rewards [1, 2, 3],
# values V(s_t) = [1, 1, 2]; next_values[2] = 6 is V(s_3), after the batch.
# ---------------------------------------------------------------------------------------
REWARDS, VALUES = column(1, 2, 3), column(1, 1, 2)
NO_END = column(0, 0, 0)
END_AT_1 = column(0, 1, 0)


def test_reward_to_go_without_episode_end_bootstraps_after_the_batch():
    # R_2 = 3 + 0.5*6 = 6;  R_1 = 2 + 0.5*6 = 5;  R_0 = 1 + 0.5*5 = 3.5
    returns = vpg.reward_to_go(REWARDS, column(1, 2, 6), NO_END, NO_END, 0.5)
    assert returns[:, 0].tolist() == approx([3.5, 5.0, 6.0])


def test_reward_to_go_termination_does_not_bootstrap():
    # terminated at t = 1: next_values[1] = 7 is the next episode's first value, unused.
    # R_2 = 3 + 0.5*6 = 6;  R_1 = 2 (the episode ended);  R_0 = 1 + 0.5*2 = 2
    returns = vpg.reward_to_go(REWARDS, column(1, 7, 6), END_AT_1, NO_END, 0.5)
    assert returns[:, 0].tolist() == approx([2.0, 2.0, 6.0])


def test_reward_to_go_and_advantage_with_a_truncation():
    # truncated at t = 1: next_values[1] = 4 is V(final obs) of the cut episode.
    # R_2 = 3 + 0.5*6 = 6;  R_1 = 2 + 0.5*4 = 4 (not 2 + 0.5*R_2 = 5);  R_0 = 1 + 0.5*4 = 3
    # A = R - V = [3 - 1, 4 - 1, 6 - 2] = [2, 3, 4]
    returns = vpg.reward_to_go(REWARDS, column(1, 4, 6), NO_END, END_AT_1, 0.5)
    assert returns[:, 0].tolist() == approx([3.0, 4.0, 6.0])
    assert (returns - VALUES)[:, 0].tolist() == approx([2.0, 3.0, 4.0])


def test_gae_with_lambda_one_is_reward_to_go_minus_the_baseline():
    # The truncated batch above: delta_0 = 1 + 0.5*V(s_1) - V(s_0) = 1 + 0.5*1 - 1 = 0.5,
    # delta_1 = 2 + 0.5*4 - 1 = 3, delta_2 = 3 + 0.5*6 - 2 = 4;
    # A_2 = 4;  A_1 = 3 (the episode ended);  A_0 = 0.5 + 0.5*1*3 = 2 -> [2, 3, 4], as above
    adv, ret = vpg.compute_gae(REWARDS, VALUES, column(1, 4, 6), NO_END, END_AT_1, 0.5, 1.0)
    assert adv[:, 0].tolist() == approx([2.0, 3.0, 4.0])
    assert ret[:, 0].tolist() == approx([3.0, 4.0, 6.0])


def test_gae_with_lambda_below_one_by_hand():
    # lambda = 0.5, the same deltas [0.5, 3, 4]: A_2 = 4, A_1 = 3, A_0 = 0.5 + 0.25*3 = 1.25
    adv, _ = vpg.compute_gae(REWARDS, VALUES, column(1, 4, 6), NO_END, END_AT_1, 0.5, 0.5)
    assert adv[:, 0].tolist() == approx([1.25, 3.0, 4.0])


def test_reward_to_go_two_environments_at_once():
    both = lambda a, b: torch.cat([a, b], dim=1)
    returns = vpg.reward_to_go(both(REWARDS, REWARDS), both(column(1, 2, 6), column(1, 4, 6)),
                               both(NO_END, NO_END), both(NO_END, END_AT_1), 0.5)
    assert returns.tolist() == [approx([3.5, 3.0]), approx([5.0, 4.0]), approx([6.0, 6.0])]


# ---------------------------------------------------------------------------------------
# The policy-gradient loss on a two-action softmax
# ---------------------------------------------------------------------------------------
def test_vpg_loss_gradient_on_a_two_action_softmax_matches_the_formula():
    # logits z = [0, log 3]: pi = [1/4, 3/4]. Two samples: action 0 with A = 2, action 1
    # with A = -1. grad_z log pi(a) = onehot(a) - pi: [3/4, -3/4] for a = 0, [-1/4, 1/4]
    # for a = 1. grad L = -(1/2) * (2*[3/4, -3/4] + (-1)*[-1/4, 1/4]) = [-0.875, 0.875]
    # L = -(1/2) * (2*log(1/4) - log(3/4)) = -(1/2) * (-2.772589 + 0.287682) = 1.242453
    z = torch.tensor([0.0, math.log(3.0)], requires_grad=True)
    logprob = torch.log_softmax(z, -1)[torch.tensor([0, 1])]
    loss = vpg.vpg_loss(logprob, tensor(2.0, -1.0))
    loss.backward()
    assert loss.item() == approx(1.242453)
    assert z.grad.tolist() == approx([-0.875, 0.875])


def test_a_state_only_baseline_adds_nothing_to_the_expected_gradient():
    # E_a[grad log pi(a) * b] = b * sum_a pi(a) * (onehot(a) - pi) = b * (pi - pi) = 0:
    # each action weighed by its probability times 2 (the loss averages the 2 terms), b = 5:
    # -(1/2) * 2 * 5 * (1/4 * [3/4, -3/4] + 3/4 * [-1/4, 1/4]) = 0
    z = torch.tensor([0.0, math.log(3.0)], requires_grad=True)
    logprob = torch.log_softmax(z, -1)
    vpg.vpg_loss(logprob, 2 * 5.0 * tensor(0.25, 0.75)).backward()
    assert z.grad.tolist() == approx([0.0, 0.0])


def test_the_advantages_carry_no_gradient():
    advantages = tensor(1.0, 2.0).requires_grad_()
    vpg.vpg_loss(tensor(-1.0, -2.0).requires_grad_(), advantages).backward()
    assert advantages.grad is None


def test_value_loss_by_hand():
    # 0.5 * mean([(1 - 2)^2, (3 - 1)^2]) = 0.5 * (1 + 4) / 2 = 1.25
    assert vpg.value_loss(tensor(1.0, 3.0), tensor(2.0, 1.0)).item() == approx(1.25)


# ---------------------------------------------------------------------------------------
# The buffer and the agent
# ---------------------------------------------------------------------------------------
def test_buffer_next_values_use_following_obs_last_obs_and_final_obs():
    # T = 3, N = 2, V(s) = 10*s. Environment 1 is truncated at t = 0 (final observation
    # 0.7) and terminated at t = 1.
    buffer = vpg.RolloutBuffer(3, 2, (1,), (), False, "cpu")
    buffer.obs[:, :, 0] = torch.tensor([[0.0, 0.1], [1.0, 1.1], [2.0, 2.1]])
    buffer.last_obs[:, 0] = torch.tensor([3.0, 3.1])
    buffer.truncated[0, 1] = True
    buffer.terminated[1, 1] = True
    buffer.final_obs[0, 1, 0] = 0.7
    value_fn = lambda obs: 10 * obs[..., 0]
    next_values = buffer.next_values(value_fn, value_fn(buffer.obs))
    # column 0: 10, 20, 30; column 1: V(final) = 7, then 21 (unused), then V(last) = 31
    assert torch.allclose(next_values, torch.tensor([[10.0, 7.0], [20.0, 21.0], [30.0, 31.0]]))


def buffer_of_the_truncated_batch():
    """The batch of the worked examples in a buffer: rewards [1, 2, 3], V = [1, 1, 2] stored,
    truncated at t = 1; V(s) = obs, with s_1 = 1, final obs 4 and last obs 6."""
    buffer = vpg.RolloutBuffer(3, 1, (1,), (), False, "cpu")
    buffer.obs[:, 0, 0] = tensor(1.0, 1.0, 2.0)
    buffer.rewards[:, 0], buffer.values[:, 0] = REWARDS[:, 0], VALUES[:, 0]
    buffer.truncated[1, 0], buffer.final_obs[1, 0, 0], buffer.last_obs[0, 0] = True, 4.0, 6.0
    return buffer


@pytest.mark.parametrize("gae_lambda, baseline, advantages", [
    (None, True, [2.0, 3.0, 4.0]), (1.0, True, [2.0, 3.0, 4.0]), (None, False, [3.0, 4.0, 6.0])])
def test_buffer_advantages_with_and_without_the_baseline(gae_lambda, baseline, advantages):
    # reward-to-go [3, 4, 6] (worked out above); minus V = [1, 1, 2] with the baseline
    adv, ret = buffer_of_the_truncated_batch().advantages(lambda obs: obs[..., 0], 0.5,
                                                          gae_lambda, baseline)
    assert adv[:, 0].tolist() == approx(advantages)
    assert ret[:, 0].tolist() == approx([3.0, 4.0, 6.0])


def test_buffer_shapes_and_dtypes():
    discrete = vpg.RolloutBuffer(5, 3, (4,), (), False, "cpu")
    assert discrete.obs.shape == (5, 3, 4) and discrete.final_obs.shape == (5, 3, 4)
    assert discrete.actions.shape == (5, 3) and discrete.actions.dtype == torch.long
    assert discrete.terminated.dtype == torch.bool and discrete.last_obs.shape == (3, 4)
    continuous = vpg.RolloutBuffer(5, 3, (3,), (2,), True, "cpu")
    assert continuous.actions.shape == (5, 3, 2) and continuous.actions.dtype == torch.float32


def test_gaussian_policy_logprob_sums_over_action_dimensions():
    agent = vpg.Agent((3,), 2, continuous=True)
    with torch.no_grad():
        agent.actor_logstd.fill_(math.log(2.0))
    obs, actions = torch.randn(4, 3), torch.randn(4, 2)
    _, logprob, entropy, _ = agent.get_action_and_value(obs, actions)
    mean = agent.actor(obs)
    # log N(a; mu, 2^2) = -(a - mu)^2/8 - log 2 - log(2 pi)/2, summed over 2 dimensions
    expected = (-(actions - mean) ** 2 / 8 - math.log(2.0) - 0.5 * math.log(2 * math.pi)).sum(-1)
    assert torch.allclose(logprob, expected, atol=1e-5)
    assert torch.allclose(entropy, torch.full((4,), 2 * 0.5 * math.log(2 * math.pi * math.e * 4)))
    assert len(agent.policy_parameters()) == 7  # 3 layers' weights and biases, the log std


# ---------------------------------------------------------------------------------------
# Glue: time limits through the whole loop on CountToThree-v0 (conftest.py), whose
# observation counts the steps of its episode, cut by a time limit after 3 steps
# ---------------------------------------------------------------------------------------
def test_truncated_steps_store_the_true_final_observation(tmp_path, monkeypatch):
    # Each environment sees 0, 1, 2, (cut) 0: the step from 2 is truncated, its final obs 3.
    seen = []
    original = vpg.RolloutBuffer.advantages

    def spy(self, *args, **kwargs):
        seen.append((self.obs.clone(), self.truncated.clone(), self.final_obs.clone()))
        return original(self, *args, **kwargs)

    monkeypatch.setattr(vpg.RolloutBuffer, "advantages", spy)
    vpg.main(vpg.Args(env_id="CountToThree-v0", total_timesteps=8, num_envs=2, num_steps=4,
                      vf_minibatches=2, eval_episodes=0, output_dir=str(tmp_path)))
    obs, truncated, final_obs = seen[0]
    assert obs[:, :, 0].tolist() == [[0, 0], [1, 1], [2, 2], [0, 0]]
    assert truncated.tolist() == [[False, False], [False, False], [True, True], [False, False]]
    assert final_obs[2, :, 0].tolist() == [3, 3] and final_obs[[0, 1, 3]].abs().sum() == 0


def test_the_loop_gives_the_math_the_truncation_bootstrap_and_the_acting_policy(
        tmp_path, monkeypatch):
    # With V(s) = 10*s, reward_to_go must receive next_values = [V(1), V(2), V(final obs 3),
    # V(last obs 1)] = [10, 20, 30, 10] (at the truncation 30, not V(0) of the next
    # episode), so, rewards 1 and gamma 0.5: R_3 = 1 + 0.5*10 = 6, R_2 = 1 + 0.5*30 = 16,
    # R_1 = 1 + 0.5*16 = 9, R_0 = 1 + 0.5*9 = 5.5; advantages R - V = [5.5, -1, -4, 6].
    # vpg_loss must get those advantages as they are (--no-norm-adv) and the log-probabilities
    # of the stored actions under the policy that acted (the stored ones), with gradients.
    built = vpg.Agent.__init__

    def build_with_critic_by_hand(self, *args, **kwargs):
        built(self, *args, **kwargs)
        self.critic = TenTimesObs()

    monkeypatch.setattr(vpg.Agent, "__init__", build_with_critic_by_hand)
    seen, stored = {}, {}
    original_rtg, original_loss = vpg.reward_to_go, vpg.vpg_loss
    original_advantages = vpg.RolloutBuffer.advantages

    def spy_rtg(rewards, next_values, *rest):
        seen.setdefault("next_values", next_values.clone())
        return original_rtg(rewards, next_values, *rest)

    def spy_advantages(self, *args):
        stored.setdefault("logprobs", self.logprobs.clone())
        return original_advantages(self, *args)

    def spy_loss(logprob, advantages):
        seen.setdefault("loss", (logprob.clone(), advantages.clone()))
        return original_loss(logprob, advantages)

    monkeypatch.setattr(vpg, "reward_to_go", spy_rtg)
    monkeypatch.setattr(vpg.RolloutBuffer, "advantages", spy_advantages)
    monkeypatch.setattr(vpg, "vpg_loss", spy_loss)
    vpg.main(vpg.Args(env_id="CountToThree-v0", total_timesteps=8, num_envs=2, num_steps=4,
                      vf_minibatches=2, gamma=0.5, norm_adv=False, eval_episodes=0,
                      output_dir=str(tmp_path)))
    assert seen["next_values"].tolist() == [[10.0, 10.0], [20.0, 20.0], [30.0, 30.0], [10.0, 10.0]]
    logprob, advantages = seen["loss"]
    assert advantages.tolist() == approx([5.5, 5.5, -1.0, -1.0, -4.0, -4.0, 6.0, 6.0])
    assert logprob.requires_grad and torch.allclose(logprob, stored["logprobs"].flatten())


@pytest.mark.parametrize("flags, advantages, targets", [
    # reward-to-go as worked out above, R = [5.5, 9, 16, 6], minus V = 10*[0, 1, 2, 0]
    (dict(norm_adv=False), [5.5, -1.0, -4.0, 6.0], [5.5, 9.0, 16.0, 6.0]),
    # --no-baseline: the reward-to-go itself weighs the log-probabilities
    (dict(baseline=False, norm_adv=False), [5.5, 9.0, 16.0, 6.0], [5.5, 9.0, 16.0, 6.0]),
    # --no-baseline at the default --norm-adv: still the raw reward-to-go, not standardized
    # ((R - 9.125) / 4.478 would subtract the batch mean, a baseline)
    (dict(baseline=False), [5.5, 9.0, 16.0, 6.0], [5.5, 9.0, 16.0, 6.0]),
    # --gae-lambda 0.5: delta_t = 1 + 0.5*next_value_t - V_t = [1 + 5 - 0, 1 + 10 - 10,
    # 1 + 15 - 20, 1 + 5 - 0] = [6, 1, -4, 6]; A_3 = 6, A_2 = -4 (the episode ended),
    # A_1 = 1 + 0.25*(-4) = 0, A_0 = 6 + 0.25*0 = 6; targets A + V = [6, 10, 16, 6]
    (dict(gae_lambda=0.5, norm_adv=False), [6.0, 0.0, -4.0, 6.0], [6.0, 10.0, 16.0, 6.0]),
    # --gae-lambda 0 is GAE too, not "unset": the one-step TD errors themselves, A = delta =
    # [6, 1, -4, 6]; targets A + V = [6 + 0, 1 + 10, -4 + 20, 6 + 0] = [6, 11, 16, 6]
    # (the reward-to-go of a falsy lambda would give [5.5, -1, -4, 6] and [5.5, 9, 16, 6])
    (dict(gae_lambda=0.0, norm_adv=False), [6.0, 1.0, -4.0, 6.0], [6.0, 11.0, 16.0, 6.0]),
])
def test_the_advantage_flags_reach_the_policy_step_and_the_value_targets(
        tmp_path, monkeypatch, flags, advantages, targets):
    # The batch of the test above (V(s) = 10*s, rewards 1, gamma 0.5, truncated after the
    # third step), with --gae-lambda and --no-baseline: vpg_loss gets the advantages they
    # choose, value_loss regresses on the targets, and updates.csv's explained variance is
    # 1 - Var[R - V] / Var[R] of those targets and the values stored while acting (V = w*s
    # with w = 10 then; the value steps at --vf-learning-rate 0.5 move w by about 0.5 each,
    # and the refitted critic's values would give another row); its approx_kl is
    # k3 = mean(exp(r) - 1 - r) of r = log pi_new(a|s) - log pi_old(a|s). Its policy_loss is
    # -mean(log pi(a|s) * A) of the policy that acted (the one the step starts from), its
    # entropy that policy's mean over the batch of -p log p - (1 - p) log(1 - p), p the
    # probability of the action taken (two actions), and its value_loss the last value step's
    # 0.5 * mean((V - R)^2) of its minibatch, with V as the critic gave it then.
    built, agents, batches = vpg.Agent.__init__, [], []

    def build_with_critic_by_hand(self, *args, **kwargs):
        built(self, *args, **kwargs)
        self.critic = LearnedTenTimesObs()
        agents.append(self)

    monkeypatch.setattr(vpg.Agent, "__init__", build_with_critic_by_hand)
    original_advantages = vpg.RolloutBuffer.advantages
    monkeypatch.setattr(vpg.RolloutBuffer, "advantages", lambda self, *a: (batches.append(
        (self.obs.flatten(0, 1), self.actions.flatten(), self.logprobs.flatten())),
        original_advantages(self, *a))[1])
    weights, regressed, fitted = [], [], []
    original_loss, original_value_loss = vpg.vpg_loss, vpg.value_loss
    monkeypatch.setattr(vpg, "vpg_loss", lambda logprob, adv: (
        weights.append(adv.clone()), original_loss(logprob, adv))[1])
    monkeypatch.setattr(vpg, "value_loss", lambda values, returns: (
        regressed.append(returns.clone()), fitted.append(values.detach().clone()),
        original_value_loss(values, returns))[2])
    vpg.main(vpg.Args(env_id="CountToThree-v0", total_timesteps=8, num_envs=2, num_steps=4,
                      vf_minibatches=2, vf_iters=1, vf_learning_rate=0.5, gamma=0.5,
                      eval_episodes=0, output_dir=str(tmp_path), **flags))
    both = lambda values: [v for v in values for _ in range(2)]  # two environments alike
    assert abs(agents[0].critic.w.item() - 10) > 0.4  # the value steps moved the critic
    (weighed,) = weights
    assert weighed.tolist() == approx(both(advantages))
    assert sorted(torch.cat(regressed).tolist()) == approx(sorted(both(targets)))
    # --vf-iters 1 epoch of --vf-minibatches 2: two minibatches of 8 / 2 = 4 samples (the
    # default 4 would make four minibatches of 2)
    assert [len(r) for r in regressed] == [4, 4]
    (row,) = read_csv(next(tmp_path.glob("*/updates.csv")))
    values, returns = np.array(both([0.0, 10.0, 20.0, 0.0])), np.array(both(targets))
    assert float(row["explained_variance"]) == pytest.approx(
        1 - np.var(returns - values) / np.var(returns), rel=1e-5)
    (agent,), ((obs, actions, old_logprobs),) = agents, batches
    with torch.no_grad():  # the policy after its one step: the critic's steps leave it alone
        r = agent.distribution(obs).log_prob(actions) - old_logprobs
    assert r.abs().max() > 1e-3  # the step moved the policy
    assert float(row["approx_kl"]) == pytest.approx((r.exp() - 1 - r).mean().item(), rel=1e-3)
    assert float(row["policy_loss"]) == pytest.approx(-(old_logprobs * weighed).mean().item(),
                                                      rel=1e-5, abs=1e-7)
    p = old_logprobs.exp()
    entropy = -(p * p.log() + (1 - p) * (1 - p).log()).mean().item()
    assert float(row["entropy"]) == pytest.approx(entropy, rel=1e-6)
    assert float(row["value_loss"]) == pytest.approx(
        0.5 * ((fitted[-1] - regressed[-1]) ** 2).mean().item(), rel=1e-5)


def test_the_policy_step_weighs_the_log_probabilities_of_the_actions_taken(tmp_path, monkeypatch):
    # 60 samples of CountToThree-v0: vpg_loss gets, sample by sample, log pi(a_t|s_t) of the
    # action stored at t (the policy has not moved since it acted, so they are the stored
    # log-probabilities), with their gradient. Where s_t > 0 the two actions' log-probabilities
    # differ: another action's would not match.
    given, stored = [], []
    original_loss, original_advantages = vpg.vpg_loss, vpg.RolloutBuffer.advantages
    monkeypatch.setattr(vpg, "vpg_loss", lambda logprob, adv: (
        given.append(logprob), original_loss(logprob, adv))[1])
    monkeypatch.setattr(vpg.RolloutBuffer, "advantages", lambda self, *a: (
        stored.append((self.logprobs.flatten().clone(), self.obs.flatten().clone())),
        original_advantages(self, *a))[1])
    vpg.main(vpg.Args(env_id="CountToThree-v0", total_timesteps=60, num_envs=2, num_steps=30,
                      vf_minibatches=2, eval_episodes=0, output_dir=str(tmp_path)))
    (logprob,), ((logprobs, obs),) = given, stored
    assert logprob.requires_grad and (obs > 0).sum() == 40
    assert logprob.detach().tolist() == pytest.approx(logprobs.tolist(), abs=1e-6)


def test_each_policy_and_value_step_follows_its_own_gradient_alone(tmp_path, monkeypatch):
    # Two batches of CountToThree-v0 (2 environments, 4 steps). The second batch's advantages
    # reach vpg_loss multiplied by 0, so its loss is -mean(log pi * 0) = 0 at every weight
    # and its gradient is exactly 0: the policy's Adam must step on zeros there (a gradient
    # left from the first batch, not zeroed, would be added). The first batch's advantages,
    # R - V of a critic at its random start, are not all 0, and neither is its gradient.
    # The same for the critic: every value_loss after the first is multiplied by 0, so of the
    # 2 batches * --vf-iters 20 epochs * --vf-minibatches 2 = 80 value steps the first steps on
    # the gradient of 0.5 * mean((V - R)^2), not 0 in the critic's last layer, and the 79 others
    # on exact zeros in all 6 of its weights and biases (the first step's gradient, not zeroed,
    # would still be there in each).
    weighed, grads, original_loss = [], [], vpg.vpg_loss
    monkeypatch.setattr(vpg, "vpg_loss", lambda logprob, adv: (
        weighed.append(adv), original_loss(logprob, adv * (len(weighed) == 1)))[1])
    regressed, value_grads, original_value_loss = [], [], vpg.value_loss
    monkeypatch.setattr(vpg, "value_loss", lambda values, returns: (
        regressed.append(returns), original_value_loss(values, returns) * (len(regressed) == 1))[1])
    original_step = torch.optim.Adam.step

    def step(self, *args, **kwargs):
        kept = {0.003: grads, 0.0007: value_grads}[self.param_groups[0]["lr"]]  # policy, critic
        kept.append([p.grad.clone() for p in self.param_groups[0]["params"]])
        return original_step(self, *args, **kwargs)

    monkeypatch.setattr(torch.optim.Adam, "step", step)
    vpg.main(vpg.Args(env_id="CountToThree-v0", total_timesteps=16, num_envs=2, num_steps=4,
                      vf_minibatches=2, learning_rate=0.003, vf_learning_rate=0.0007,
                      norm_adv=False, eval_episodes=0, output_dir=str(tmp_path)))
    first, second = grads
    assert len(weighed) == 2 and weighed[0].abs().sum() > 0
    assert all(g.abs().sum() > 0 for g in first[-2:])  # the actor's last layer
    assert [g.abs().sum().item() for g in second] == [0.0] * 6  # 3 layers' weights, biases
    assert len(regressed) == len(value_grads) == 80
    assert all(g.abs().sum() > 0 for g in value_grads[0][-2:])  # the critic's last layer
    assert [sum(g.abs().sum().item() for g in later) for later in value_grads[1:]] == [0.0] * 79


def test_norm_obs_statistics_see_each_acted_on_observation_and_normalize_the_final_one(
        tmp_path, monkeypatch):
    check_norm_obs_on_count_to_three(vpg, "advantages", tmp_path, monkeypatch)  # (conftest.py)


def test_each_optimizer_steps_its_own_network_at_its_own_learning_rate(tmp_path, monkeypatch):
    # The policy's Adam holds theta (the actor and the Gaussian's log std) at --learning-rate,
    # the value network's Adam the critic at --vf-learning-rate; and their steps move every
    # weight: the actor's, the log std, the critic's. Both networks --hidden-size wide.
    made = []

    class RecordingAdam(torch.optim.Adam):
        def __init__(self, params, lr):
            params = list(params)
            made.append(({id(p) for p in params}, lr))
            super().__init__(params, lr=lr)

    monkeypatch.setattr(torch.optim, "Adam", RecordingAdam)
    agents = spy_on(monkeypatch, vpg, "train", lambda args, agent, *rest: agent)
    moved = spy_on_weights(monkeypatch, vpg)
    seeds, resets = spy_on_seeds(monkeypatch, vpg)
    vpg.main(vpg.Args(env_id="BoxCountToThree-v0", total_timesteps=8, num_envs=2, num_steps=4,
                      vf_minibatches=2, learning_rate=0.003, vf_learning_rate=0.0007,
                      hidden_size=8, seed=7, eval_episodes=2, output_dir=str(tmp_path)))
    # torch's and the training environments' seed, then the final evaluation's, 7 + 100,000
    assert seeds == [7] and resets == [7, 100_007]
    (agent,) = agents
    assert agent.actor[0].out_features == agent.critic[0].out_features == 8  # --hidden-size
    ids = lambda params: {id(p) for p in params}
    assert made == [(ids(agent.policy_parameters()), 0.003), (ids(agent.critic.parameters()), 0.0007)]
    assert id(agent.actor_logstd) in ids(agent.policy_parameters())
    ((still, changed),) = moved()
    assert still == [] and "actor_logstd" in changed


def test_gaussian_actions_are_clipped_for_the_environment_only(tmp_path, monkeypatch):
    check_gaussian_actions_clipped_for_the_environment_only(vpg, "advantages", tmp_path,
                                                           monkeypatch)  # (conftest.py)


def test_one_policy_step_per_batch_normalized_advantages_and_value_targets(tmp_path, monkeypatch):
    # 3 batches of 2*64 steps: vpg_loss is called 3 times, each on the whole batch of 128
    # with advantages of mean 0 and std 1; value_loss 3 * vf_iters 2 * vf_minibatches 4
    # = 24 times, each epoch's 4 minibatches together holding the batch's 128 returns.
    calls = {"vpg_loss": [], "value_loss": []}
    for name in calls:
        original = getattr(vpg, name)
        monkeypatch.setattr(vpg, name, lambda a, b, name=name, original=original: (
            calls[name].append((a.detach().clone(), b.detach().clone())), original(a, b))[1])
    returns = []
    original_rtg = vpg.reward_to_go
    monkeypatch.setattr(vpg, "reward_to_go", lambda *a: returns.append(original_rtg(*a)) or returns[-1])
    vpg.main(vpg.Args(total_timesteps=384, num_envs=2, num_steps=64, vf_iters=2,
                      vf_minibatches=4, eval_episodes=0, output_dir=str(tmp_path)))
    assert len(calls["vpg_loss"]) == 3 and len(calls["value_loss"]) == 24
    for _, advantages in calls["vpg_loss"]:
        assert advantages.shape == (128,) and advantages.mean().item() == approx(0.0)
        assert advantages.std().item() == pytest.approx(1.0, abs=1e-4)
    epoch = torch.cat([targets for _, targets in calls["value_loss"][:4]])
    assert sorted(epoch.tolist()) == approx(sorted(returns[0].flatten().tolist()))


# ---------------------------------------------------------------------------------------
# The greedy policy (greedy_policy: the evaluation's actions)
# ---------------------------------------------------------------------------------------
def test_evaluation_normalizes_observations_with_the_frozen_statistics():
    check_evaluation_normalizes_with_the_frozen_statistics(vpg)  # (conftest.py)


@pytest.mark.parametrize("continuous", [False, True])
def test_the_evaluation_takes_the_policys_mode_not_a_sample(continuous, monkeypatch):
    agent = vpg.Agent((1,), 1 if continuous else 2, continuous=continuous)
    check_the_evaluation_takes_the_policys_mode(vpg, agent, continuous, monkeypatch)


def test_the_greedy_gaussian_mean_is_clipped_to_the_bounds():
    # BoxZeroToFour-v0 takes actions in [0, 4]: a mean of 7 is sent as 4, one of -2 as 0
    class Fixed(torch.nn.Module):
        def forward(self, obs):
            return torch.tensor([[mean]]).expand(len(obs), -1)

    envs = vpg.make_vector_env("BoxZeroToFour-v0", 2)
    for mean, sent in ((7.0, 4.0), (-2.0, 0.0)):
        agent = vpg.Agent((1,), 1, continuous=True)
        agent.actor = Fixed()
        act = vpg.greedy_policy({"agent": agent, "obs_rms": vpg.ObsNormalizer((1,), False)}, envs)
        assert act(np.zeros((2, 1)), {}).tolist() == [[sent], [sent]]
    envs.close()


def test_every_evaluation_reads_the_running_statistics_and_leaves_them_alone(tmp_path,
                                                                             monkeypatch):
    check_every_evaluation_reads_the_running_statistics_and_leaves_them_alone(
        vpg, tmp_path, monkeypatch, vf_minibatches=2)  # (conftest.py)


# ---------------------------------------------------------------------------------------
# Runs end to end
# ---------------------------------------------------------------------------------------
def test_a_run_logs_vpgs_diagnostics_and_its_model_evaluates_as_it_was(tmp_path):
    # updates.csv: a row per batch (4 of 2 * 128 steps), the common columns and vpg.py's own,
    # each of them in the event files under losses/ (the block's rule); model.pt, evaluated by
    # --eval-checkpoint, scores what the run's own final evaluation scored
    args = filled(total_timesteps=1024, num_envs=2, num_steps=128, eval_episodes=2,
                    save_model=True, output_dir=str(tmp_path / "train"))
    summary = vpg.main(args)
    (path,) = (tmp_path / "train").iterdir()
    updates = read_csv(path / "updates.csv")
    assert summary["global_steps"] == 1024 and len(updates) == 4
    own = ["policy_loss", "value_loss", "entropy", "approx_kl", "explained_variance"]
    assert list(updates[0]) == ["global_step", "wall_time", "sps", *own]
    tags = EventAccumulator(str(path)).Reload().Tags()["scalars"]
    assert {f"losses/{name}" for name in own} <= set(tags)
    assert summary["eval_return_mean"] >= 8  # CartPole: more than 8 steps
    evaluated = vpg.main(vpg.Args(eval_checkpoint=str(path / "model.pt"), eval_episodes=2,
                                  output_dir=str(tmp_path / "eval")))
    assert evaluated["eval_return_mean"] == summary["eval_return_mean"]


def test_the_checkpoint_keeps_the_statistics_and_the_networks_flags(tmp_path):
    # --hidden-size 16 and --norm-obs come from model.pt (MODEL_FLAGS) when it is evaluated
    # with neither flag given, and the running statistics with it (obs_rms, the training
    # normalizer's: 2 * 400 observations and the reset's); raw returns in episodes.csv
    args = filled(env_id="Pendulum-v1", total_timesteps=800, num_envs=2, num_steps=200,
                    eval_episodes=2, save_model=True, norm_obs=True, norm_reward=True,
                    gae_lambda=0.95, hidden_size=16, output_dir=str(tmp_path / "train"))
    summary = vpg.main(args)
    (path,) = (tmp_path / "train").iterdir()
    episodes = read_csv(path / "episodes.csv")
    assert [e["episode_length"] for e in episodes] == ["200"] * 4
    assert float(episodes[0]["episode_return"]) < 0  # raw returns, not normalized rewards
    state = torch.load(path / "model.pt", weights_only=True)
    assert state["obs_rms"]["count"] > 800 and state["obs_rms"]["mean"].shape == (3,)
    assert state["agent"]["actor.0.weight"].shape == (16, 3)
    evaluated = vpg.main(vpg.Args(env_id="Pendulum-v1", eval_checkpoint=str(path / "model.pt"),
                                  eval_episodes=2, output_dir=str(tmp_path / "eval")))
    assert evaluated["eval_return_mean"] == pytest.approx(summary["eval_return_mean"])
    assert vpg.MODEL_FLAGS == ("hidden_size", "norm_obs")


def test_each_ended_episode_is_logged_at_its_step_and_each_batch_makes_a_row(tmp_path):
    # my_envs:EpisodeNumber-v0 at --seed 0, 2 environments: environment 0 ends an episode at
    # every vector step t paying t, environment 1 one every 3 steps paying 3j = t, so each
    # episode that ends at vector step t (global step 2t) returns t, in 1 step or 3.
    # Batches of 2 * 12 steps make rows at 24 and 48.
    importlib.import_module("my_envs")  # registers the id anew after fresh_env_module's tests
    vpg.main(vpg.Args(env_id="my_envs:EpisodeNumber-v0", seed=0, num_envs=2, num_steps=12,
                      vf_minibatches=2, total_timesteps=48, eval_episodes=0,
                      output_dir=str(tmp_path)))
    (path,) = tmp_path.iterdir()
    expected = [(2 * t, t, length) for t in range(1, 25) for length in (1, 3)[:1 + (t % 3 == 0)]]
    assert [(int(e["global_step"]), float(e["episode_return"]), int(e["episode_length"]))
            for e in read_csv(path / "episodes.csv")] == expected
    assert [int(u["global_step"]) for u in read_csv(path / "updates.csv")] == [24, 48]


def test_stop_at_return_stops_and_records_when(tmp_path):
    summary = vpg.main(vpg.Args(stop_at_return=1.0, eval_episodes=0, output_dir=str(tmp_path)))
    episodes = read_csv(next(tmp_path.glob("*/episodes.csv")))
    assert len(episodes) >= 20 and summary["solved_at_step"] == int(episodes[19]["global_step"])
    assert summary["global_steps"] == summary["solved_at_step"]


def test_the_budget_is_rounded_down_to_whole_batches(tmp_path):
    # 2,000 steps in batches of 2 * 64 = 128: 15 whole batches, 1,920 steps.
    summary = vpg.main(vpg.Args(total_timesteps=2000, num_envs=2, num_steps=64, eval_episodes=0,
                                output_dir=str(tmp_path)))
    assert summary["global_steps"] == 1920


@pytest.mark.parametrize("loss", ["vpg_loss", "value_loss"])
def test_nan_loss_stops_cleanly(tmp_path, monkeypatch, capsys, loss):
    # Either loss made NaN stops the run after the first batch of 2 * 128 = 256 steps: the
    # policy's, or the critic's (whose NaN weights would reach the policy's loss only through
    # the next batch's advantages, at step 512)
    original = getattr(vpg, loss)
    monkeypatch.setattr(vpg, loss, lambda *a: original(*a) * math.nan)
    summary = vpg.main(vpg.Args(total_timesteps=1024, num_envs=2, num_steps=128,
                                output_dir=str(tmp_path)))
    assert summary["interrupted"] is True and summary["global_steps"] == 256
    assert "the loss became non-finite (NaN or inf) at step 256" in capsys.readouterr().out


@pytest.mark.slow  # determinism: two whole runs
def test_same_seed_gives_the_same_episodes(tmp_path):
    rows = same_seed_episodes(lambda out: vpg.main(vpg.Args(
        total_timesteps=2048, num_envs=4, num_steps=64, eval_episodes=0, output_dir=out)),
        tmp_path)
    assert len(rows) > 20


# ---------------------------------------------------------------------------------------
# Bad input of vpg.py's own (check_flags, check_spaces): one line on stderr, exit status 2
# ---------------------------------------------------------------------------------------
@pytest.mark.parametrize("argv, message", [
    (["--env-id", "SpinTheBits-v0"], "MultiBinary action space of shape (3,); vpg.py handles "
     "Discrete and flat Box actions"),
    (["--env-id", "Taxi-v4"], "Discrete observation space of shape (); vpg.py needs a flat Box"),
    (["--num-envs", "3", "--num-steps", "5", "--vf-minibatches", "4"],
     "num_envs*num_steps = 15 is not divisible by --vf-minibatches 4"),
    (["--num-steps", "0"], "--num-steps must be positive"),
    (["--vf-iters", "0"], "--vf-iters must be positive"),
    (["--vf-learning-rate", "-1"], "--vf-learning-rate must be positive"),
    (["--total-timesteps", "100"], "less than one rollout"),
    (["--learning-rate", "0"], "--learning-rate must be positive"),
    (["--gamma", "1.5"], "--gamma must be in [0, 1]"),
    (["--gae-lambda", "-0.1"], "--gae-lambda must be in [0, 1]"),
    (["--gae-lambda", "0.9", "--no-baseline"], "--no-baseline is for the reward-to-go"),
])
def test_bad_input_is_one_line_and_exit_status_2(argv, message, check_usage_error):
    check_usage_error("vpg.py", argv, message)


def test_a_checkpoints_evaluation_needs_no_rollout_of_the_budget():
    # --total-timesteps below one rollout is fine with --eval-checkpoint (nothing trains), and
    # the rollout's check leaves a non-positive budget to the block's own line
    vpg.check_flags(filled(total_timesteps=100, eval_checkpoint="model.pt"))
    vpg.check_flags(filled(total_timesteps=0))
    with pytest.raises(vpg.UsageError, match="--total-timesteps must be positive"):
        vpg.check_args(filled(total_timesteps=-5))

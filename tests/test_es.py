"""Tests of es.py: the math by hand, the policy, the workers, the glue of its loop and its
main, its hooks of the plumbing (check_flags, check_spaces, greedy_policy, MODEL_FLAGS and
theta in model.pt), runs end to end, determinism (the plumbing's own behaviour is
tests/test_plumbing.py's)."""
import glob
import json
import math
import multiprocessing
import os
import signal
import sys
import time

import gymnasium as gym
import numpy as np
import pytest
import torch

import es
from conftest import (CountingEnv, check_import_is_quiet, ctrl_c, episode_rows,
                      interrupt_on_call, read_csv, same_seed_episodes, spy_on, start_in_a_terminal)


def filled(**flags):
    """es.Args with the flags left at None taken from its discrete preset, the settings its
    defaults had before the presets, as main fills them on CartPole-v1."""
    return es.fill_preset(es.Args(**flags), "discrete")


# ---------------------------------------------------------------------------------------
# Fitness shaping by hand
# ---------------------------------------------------------------------------------------
def test_centered_ranks_of_three_members():
    # [3, -1, 10]: ranks [1, 0, 2];  / (n - 1) = / 2 -> [0.5, 0, 1];  - 0.5 -> [0, -0.5, 0.5]
    assert es.centered_ranks([3.0, -1.0, 10.0]).tolist() == [0.0, -0.5, 0.5]
    # ties share their mean rank: [2, 2, 1]: the 2s hold ranks 1 and 2 -> both 1.5; the 1 rank 0
    # -> [1.5, 1.5, 0] / 2 - 0.5 = [0.25, 0.25, -0.5]
    assert es.centered_ranks([2.0, 2.0, 1.0]).tolist() == [0.25, 0.25, -0.5]
    # only the order counts: an outlier changes nothing
    assert es.centered_ranks([3.0, -1.0, 1e9]).tolist() == [0.0, -0.5, 0.5]


def test_tied_returns_share_their_mean_rank_so_a_tied_mirrored_pair_cancels():
    # two mirrored pairs (n = 4), returns [5, 5, 3, 7]: 3 has rank 0, the two 5s ranks 1 and 2
    # -> both 1.5, 7 rank 3; / (n - 1) = / 3 - 0.5 -> [0, 0, -0.5, 0.5]
    shaped = es.centered_ranks([5.0, 5.0, 3.0, 7.0])
    assert shaped.tolist() == [0.0, 0.0, -0.5, 0.5]
    # the tied pair adds (0 - 0) * eps_a; with eps_a = [1, 2], eps_b = [-1, 0], sigma 0.5:
    # g = ((-0.5 - 0.5) * eps_b) / (4 * 0.5) = [1, 0] / 2 = [0.5, 0]
    eps_a, eps_b = np.array([1.0, 2.0]), np.array([-1.0, 0.0])
    noise = np.stack([eps_a, -eps_a, eps_b, -eps_b])
    assert es.es_gradient(shaped, noise, 0.5) == pytest.approx([0.5, 0.0])
    # three equal values hold ranks 0, 1, 2 -> all 1; [4, 4, 4, 9] -> [1, 1, 1, 3] / 3 - 0.5
    assert es.centered_ranks([4.0, 4.0, 4.0, 9.0]) == pytest.approx([-1 / 6, -1 / 6, -1 / 6, 0.5])


def test_a_generation_in_which_every_member_ties_moves_theta_by_weight_decay_alone():
    # every member scores 500: each has the mean rank 1.5 of 0..3 -> 1.5 / 3 - 0.5 = 0, so g = 0
    assert es.centered_ranks([500.0] * 4).tolist() == [0.0] * 4
    # SGD, lr 0.5, sigma 0.1, l2 0.02: theta <- theta + 0.5 * (0 - (0.02 / 0.1) * theta)
    #                                         = theta - 0.1 * theta = 0.9 * [2, -4] = [1.8, -3.6]
    strategy = es.EvolutionStrategy(np.array([2.0, -4.0]), sigma=0.1, learning_rate=0.5,
                                    optimizer="sgd", l2_coef=0.02)
    g = strategy.update([5, 5, 9, 9], [1.0, -1.0, 1.0, -1.0], [500.0] * 4)
    assert g.tolist() == [0.0, 0.0] and strategy.theta == pytest.approx([1.8, -3.6])


def test_shape_fitness_zscore_and_none():
    # [1, 2, 3]: mean 2, std sqrt((1 + 0 + 1) / 3) = sqrt(2/3) = 0.81650
    # z = [-1, 0, 1] / 0.81650 = [-1.22474, 0, 1.22474]
    assert es.shape_fitness([1, 2, 3], "zscore") == pytest.approx([-1.224745, 0.0, 1.224745])
    assert es.shape_fitness([1, 2, 3], "none").tolist() == [1.0, 2.0, 3.0]
    assert es.shape_fitness([1, 2, 3], "centered-rank").tolist() == [-0.5, 0.0, 0.5]


# ---------------------------------------------------------------------------------------
# The ES gradient by hand
# ---------------------------------------------------------------------------------------
def test_es_gradient_of_three_members():
    # eps = [1, 0], [0, 2], [1, 1]; F = [0, -0.5, 0.5] (the centered ranks above); sigma 0.5
    # sum F_i eps_i = 0*[1, 0] - 0.5*[0, 2] + 0.5*[1, 1] = [0.5, -0.5]
    # g = [0.5, -0.5] / (n sigma) = [0.5, -0.5] / 1.5 = [1/3, -1/3]
    noise = np.array([[1.0, 0.0], [0.0, 2.0], [1.0, 1.0]])
    g = es.es_gradient(np.array([0.0, -0.5, 0.5]), noise, 0.5)
    assert g == pytest.approx([1 / 3, -1 / 3])


def test_es_gradient_of_antithetic_pairs():
    # Mirrored members come in pairs, so the smallest population is 2 pairs (n = 4):
    # eps_a = [1, 2], eps_b = [-1, 0], rows [eps_a, -eps_a, eps_b, -eps_b]; F = [3, 1, 0, 2]
    # sigma 0.5: g = ((3 - 1)*eps_a + (0 - 2)*eps_b) / (4 * 0.5)
    #              = ([2, 4] + [2, 0]) / 2 = [2, 2]
    eps_a, eps_b = np.array([1.0, 2.0]), np.array([-1.0, 0.0])
    noise = np.stack([eps_a, -eps_a, eps_b, -eps_b])
    assert es.es_gradient(np.array([3.0, 1.0, 0.0, 2.0]), noise, 0.5) == pytest.approx([2.0, 2.0])
    # a pair with equal returns adds nothing: F = [1, 1, 0, 2] -> (0*eps_a - 2*eps_b) / 2 = [1, 0]
    assert es.es_gradient(np.array([1.0, 1.0, 0.0, 2.0]), noise, 0.5) == pytest.approx([1.0, 0.0])


def test_population_seeds_and_signs():
    rng = np.random.default_rng(0)
    seeds, signs = es.sample_population(rng, 6, antithetic=True)
    assert signs.tolist() == [1, -1, 1, -1, 1, -1]
    assert (seeds[::2] == seeds[1::2]).all() and len(set(seeds[::2])) == 3
    seeds, signs = es.sample_population(rng, 3, antithetic=False)
    assert signs.tolist() == [1, 1, 1] and len(set(seeds)) == 3
    # the members of a pair mirror each other around theta
    strategy = es.EvolutionStrategy(np.array([1.0, -2.0, 0.5]), sigma=0.1, learning_rate=0.1)
    plus, minus = strategy.member(7, 1.0), strategy.member(7, -1.0)
    assert (plus + minus) / 2 == pytest.approx(strategy.theta) and not np.allclose(plus, minus)
    assert strategy.member(7, 0.0) is strategy.theta


# ---------------------------------------------------------------------------------------
# A quadratic objective: ES steps provably go towards the optimum
# ---------------------------------------------------------------------------------------
OPTIMUM = np.array([1.0, -2.0, 3.0])


def quadratic(theta):
    """F(theta) = -||theta - theta*||^2, largest at theta* = OPTIMUM."""
    return -float(np.sum((theta - OPTIMUM) ** 2))


def play_quadratic_generation(strategy, rng, population_size):
    seeds, signs = es.sample_population(rng, population_size, antithetic=True)
    returns = [quadratic(strategy.member(s, sign)) for s, sign in zip(seeds, signs)]
    return seeds, signs, returns


def test_antithetic_es_step_on_a_quadratic_goes_towards_the_optimum():
    # With d = theta - theta*, F(theta + sigma eps) - F(theta - sigma eps) = -4 sigma eps.d
    # (the squares cancel), so with P pairs (n = 2P) and unshaped returns
    #     g = 1/(2P sigma) sum_j (-4 sigma eps_j.d) eps_j = -(2/P) sum_j eps_j (eps_j.d)
    # exactly, whatever sigma: g.d = -(2/P) sum_j (eps_j.d)^2 <= 0, and an SGD step of size
    # lr changes ||d||^2 by -2 lr (2/P) sum_j (eps_j.d)^2 + lr^2 ||g||^2 < 0 for small lr.
    rng = np.random.default_rng(3)
    strategy = es.EvolutionStrategy(np.zeros(3), sigma=0.3, learning_rate=0.02, optimizer="sgd",
                                    fitness_shaping="none")
    distances = [np.linalg.norm(strategy.theta - OPTIMUM)]
    for _ in range(5):
        d = strategy.theta - OPTIMUM
        seeds, signs, returns = play_quadratic_generation(strategy, rng, 8)
        eps = np.stack([es.member_noise(s, 3) for s in seeds[::2]])
        expected = -(2 / 4) * eps.T @ (eps @ d)
        g = strategy.update(seeds, signs, returns)
        assert g == pytest.approx(expected)
        assert g @ d < 0, "the estimate points towards the optimum (g . (theta - theta*) < 0)"
        assert strategy.theta == pytest.approx(d + OPTIMUM + 0.02 * g), (  # theta + lr g
            "the update takes an SGD step theta + lr * g along the estimate")
        distances.append(np.linalg.norm(strategy.theta - OPTIMUM))
    assert all(b < a for a, b in zip(distances, distances[1:])), (
        "each step brings theta closer to the optimum")


def test_centered_ranks_and_adam_reach_the_optimum_of_a_quadratic():
    rng = np.random.default_rng(0)
    strategy = es.EvolutionStrategy(np.zeros(3), sigma=0.1, learning_rate=0.1)
    for _ in range(100):
        strategy.update(*play_quadratic_generation(strategy, rng, 16))
    assert np.linalg.norm(strategy.theta - OPTIMUM) < 0.2, (  # from ||theta* - 0|| = 3.74
        "100 generations of ranked ES with Adam end near the quadratic's optimum")


def test_the_strategys_defaults_shape_by_centered_rank_and_step_with_adam():
    # Members (seed 3, +1), (3, -1), (5, +1) return 1, 100, 2: ranks 0, 2, 1, centered
    # 0/2 - 0.5, 2/2 - 0.5, 1/2 - 0.5 = -0.5, 0.5, 0 (the raw returns would weigh 100), so
    #     g = (-0.5 eps_3 + 0.5 (-eps_3) + 0 eps_5) / (3 * 0.1) = -eps_3 / 0.3
    # and Adam's first step, m_hat = g and sqrt(v_hat) = |g|, moves each coordinate by
    # lr * g / (|g| + 1e-8) = 0.01 * sign(g) (SGD's would be 0.01 * g, |g| ~ 3).
    strategy = es.EvolutionStrategy(np.zeros(4), sigma=0.1, learning_rate=0.01)
    eps_3 = es.member_noise(3, 4)
    g = strategy.update(np.array([3, 3, 5]), np.array([1.0, -1.0, 1.0]), [1.0, 100.0, 2.0])
    assert g == pytest.approx(-eps_3 / 0.3)
    assert strategy.theta == pytest.approx(0.01 * np.sign(g), abs=1e-8)


def test_weight_decay_pulls_theta_towards_zero(monkeypatch):
    # unshaped equal returns of a mirrored pair give g = 1*eps - 1*eps = 0, so the SGD step is
    # lr * (0 - (l2 / sigma) * theta); lr 0.5, l2 0.1, sigma 0.5 -> theta - 0.5 * 0.2 * theta
    # = 0.9 * [2, -4] = [1.8, -3.6]
    strategy = es.EvolutionStrategy(np.array([2.0, -4.0]), sigma=0.5, learning_rate=0.5,
                                    optimizer="sgd", l2_coef=0.1, fitness_shaping="none")
    g = strategy.update([5, 5], [1.0, -1.0], [1.0, 1.0])
    assert g.tolist() == [0.0, 0.0] and strategy.theta == pytest.approx([1.8, -3.6])

    # The authors' code leaves the 1/sigma out of its gradient, g_ref = sigma * g, and its Adam
    # follows g_ref - l2coeff * theta. The pair eps = [1, 0] with unshaped returns [3, 1],
    # sigma 0.5: g = (3 - 1) * [1, 0] / (2 * 0.5) = [2, 0], g_ref = [1, 0]. At theta = [6, -4]
    # with l2 0.25: g_ref - 0.25 * theta = [1 - 1.5, 0 + 1] = [-0.5, 1], and the first Adam step
    # is lr * sign = 0.5 * [-1, 1] -> theta = [5.5, -3.5]. (Decay without the 1/sigma would
    # follow g - 0.25 * theta = [0.5, 1] and step to [6.5, -3.5].)
    monkeypatch.setattr(es, "member_noise", lambda seed, dim: np.array([1.0, 0.0]))
    strategy = es.EvolutionStrategy(np.array([6.0, -4.0]), sigma=0.5, learning_rate=0.5,
                                    l2_coef=0.25, fitness_shaping="none")
    g = strategy.update([7, 7], [1.0, -1.0], [3.0, 1.0])
    assert g.tolist() == [2.0, 0.0] and strategy.theta == pytest.approx([5.5, -3.5])


def test_adam_first_step_moves_each_parameter_by_the_learning_rate():
    # k = 1: m_hat = g, v_hat = g^2, so the step is lr * g / (|g| + 1e-8) = lr * sign(g)
    theta = np.array([0.0, 1.0, 2.0])
    es.Adam(3, lr=0.1).step(theta, np.array([3.0, -0.5, 0.0]))
    assert theta == pytest.approx([0.1, 0.9, 2.0])


# ---------------------------------------------------------------------------------------
# The policy: theta as weight matrices
# ---------------------------------------------------------------------------------------
def test_linear_policy_by_hand():
    policy = es.Policy(2, gym.spaces.Discrete(3))
    assert policy.num_params == 2 * 3 + 3
    # W = [[1, 0, -1], [0, 1, 0]] row-major, b = [0, 0, 0.5]; obs [1, 2]:
    # y = [1*1 + 2*0, 1*0 + 2*1, 1*(-1) + 2*0] + b = [1, 2, -0.5] -> action 1
    layers = policy.layers(np.array([1.0, 0.0, -1.0, 0.0, 1.0, 0.0, 0.0, 0.0, 0.5]))
    assert policy.act(layers, np.array([1.0, 2.0])) == 1
    assert policy.act(layers, np.array([3.0, 0.0])) == 0   # y = [3, 0, -2.5]


def test_continuous_policy_scales_tanh_to_the_bounds():
    # Box [-2, 2]: action = -2 + (tanh(y) + 1) / 2 * 4;  W = [[1]], b = [0]
    policy = es.Policy(1, gym.spaces.Box(-2.0, 2.0, (1,)))
    layers = policy.layers(np.array([1.0, 0.0]))
    assert policy.act(layers, np.array([0.0])) == pytest.approx([0.0])
    assert policy.act(layers, np.array([0.5])) == pytest.approx([2 * math.tanh(0.5)])
    assert policy.act(layers, np.array([100.0])) == pytest.approx([2.0])


def test_mlp_layers_are_views_of_theta():
    # sizes [2, 3, 1]: (2 + 1) * 3 + (3 + 1) * 1 = 13 parameters
    policy = es.Policy(2, gym.spaces.Box(-1.0, 1.0, (1,)), hidden_sizes=(3,))
    theta = np.arange(13.0)
    (w1, b1), (w2, b2) = policy.layers(theta)
    assert policy.num_params == 13 and w1.tolist() == [[0, 1, 2], [3, 4, 5]]
    assert b1.tolist() == [6, 7, 8] and w2.tolist() == [[9], [10], [11]] and b2.tolist() == [12]
    theta0 = policy.initial_theta(np.random.default_rng(0))
    assert theta0.shape == (13,) and (theta0[6:9] == 0).all() and theta0[12] == 0
    # the weights are N(0, 1 / fan_in) draws z of the generator, layer after layer, the last
    # layer's scaled by 0.1: W1 = z[0:6] / sqrt(2), W2 = 0.1 z[6:9] / sqrt(3), so that
    # W2 = 0.0577350 * [1.30400, 0.94708, -0.70374] = [0.075287, 0.054680, -0.040630]
    z = np.random.default_rng(0).standard_normal(9)
    assert theta0[0:6] == pytest.approx(z[0:6] / math.sqrt(2))
    assert theta0[9:12] == pytest.approx([0.075287, 0.054680, -0.040630], abs=1e-6)


# ---------------------------------------------------------------------------------------
# Environments built here
# ---------------------------------------------------------------------------------------
class ImageEnv(CountingEnv):
    observation_space = gym.spaces.Box(0.0, 1.0, (4, 4))


class UnboundedEnv(CountingEnv):
    action_space = gym.spaces.Box(-np.inf, np.inf, (1,))


gym.register("ESCountForever-v0", entry_point=CountingEnv)
gym.register("ESImage-v0", entry_point=ImageEnv)
gym.register("ESUnbounded-v0", entry_point=UnboundedEnv)


class CountUntilActionOneEnv(CountingEnv):
    terminate_on = 1


gym.register("ESCountUntilActionOne-v0", entry_point=CountUntilActionOneEnv, max_episode_steps=50)


def models_of(policy, theta, normalizer=None):
    """What model.pt holds of theta and the observation statistics (none: disabled)."""
    strategy = es.EvolutionStrategy(theta, sigma=1.0, learning_rate=1.0)
    normalizer = normalizer or es.ObsNormalizer((policy.sizes[0],), enabled=False)
    return {"theta": es.Theta(policy, strategy), "obs_rms": normalizer}


def evaluate_theta(policy, theta, env_id, episodes, seed, normalizer=None):
    """The plumbing's evaluate of theta through es.py's greedy_policy, its episodes started
    from seed, seed + 1, ... (evaluate plays from --seed + 100,000)."""
    args = filled(env_id=env_id, eval_episodes=episodes, seed=seed - 100_000)
    return es.evaluate(args, models_of(policy, theta, normalizer))


def with_statistics(mean, std):
    """An ObsNormalizer whose frozen statistics are (mean, std)."""
    normalizer = es.ObsNormalizer((len(mean),), enabled=True)
    normalizer.rms.mean, normalizer.rms.var = np.array(mean), np.array(std) ** 2 - 1e-8
    return normalizer


def test_evaluations_play_with_the_observation_statistics(tmp_path):
    # A linear policy with W = [[0, 1]], b = [0, -1] scores y = [0, z - 1] for the
    # (normalized) observation z: action 1, which ends the episode, once z > 1 (a tie goes to
    # action 0). The observation x counts the steps, 1 of reward each, so an episode that
    # takes action 1 first at x returns x + 1. Raw, z = x: x = 2, return 3. With mean 10 and
    # var 4 - 1e-8, z = (x - 10) / 2 (the std, not the variance): x = 13, return 14 (divided
    # by the variance, x = 15, return 16). --eval-every's rows and the final evaluation both
    # play with the statistics.
    args = filled(env_id="ESCountUntilActionOne-v0", norm_obs=True, eval_every=100,
                   eval_episodes=2, num_workers=1, output_dir=str(tmp_path))
    policy = es.Policy(1, gym.spaces.Discrete(2))
    theta = np.array([0.0, 1.0, 0.0, -1.0])
    assert evaluate_theta(policy, theta, args.env_id, 2, 0).tolist() == [3.0, 3.0]
    run = es.Run(args, "cpu", models_of(policy, theta, with_statistics([10.0], [2.0])))
    run.step(100)
    run.step(150)  # crosses no multiple of 100: no row
    summary = run.train(lambda: None)  # nothing to train: the final evaluation, the summary
    (path,) = tmp_path.iterdir()
    rows = read_csv(path / "evaluations.csv")
    assert [(r["global_step"], r["eval_return_mean"]) for r in rows] == [("100", "14.0")]
    assert summary["eval_return_mean"] == 14.0


def test_normalized_observations_are_clipped_to_obs_clip_before_the_policy_sees_them():
    # By hand, mean 2 and std 2: (12 - 2) / 2 = 5 stays 5, (-12 - 2) / 2 = -7 becomes -5,
    # (3 - 2) / 2 = 0.5 stays. In an episode: W = [[0, 1]], b = [0, -5.5] scores
    # y = [0, z - 5.5], action 1 (which ends the episode, return x + 1) once z > 5.5. With
    # mean 0 and std 1, z = x would pass 5.5 at x = 6 (return 7), but z is clipped to 5, so
    # y_1 <= -0.5 < 0: action 0 until the time limit's 50 steps (return 50).
    stats = (np.full(3, 2.0), np.full(3, 2.0))
    assert es.normalize(np.array([12.0, -12.0, 3.0]), stats).tolist() == [5.0, -5.0, 0.5]
    policy, theta = es.Policy(1, gym.spaces.Discrete(2)), np.array([0.0, 1.0, 0.0, -5.5])
    assert evaluate_theta(policy, theta, "ESCountUntilActionOne-v0", 1, 0).tolist() == [7.0]
    assert evaluate_theta(policy, theta, "ESCountUntilActionOne-v0", 1, 0,
                          with_statistics([0.0], [1.0])).tolist() == [50.0]


def test_each_fitness_shaping_weighs_the_noise_by_hand(monkeypatch):
    # Two members without mirroring, eps_1 = [1, 0], eps_2 = [0, 1], returns [10, 0], sigma 1,
    # so g = (F~_1 eps_1 + F~_2 eps_2) / 2 = [F~_1, F~_2] / 2:
    #   centered ranks [1, 0] / (2 - 1) - 0.5 = [0.5, -0.5]  -> g = [0.25, -0.25]
    #   z-scores (F - 5) / 5 = [1, -1] (std 5)               -> g = [0.5, -0.5]
    #   none: F = [10, 0]                                     -> g = [5, 0]
    monkeypatch.setattr(es, "member_noise", lambda seed, dim: np.eye(2)[seed])
    for shaping, expected in (("centered-rank", [0.25, -0.25]), ("zscore", [0.5, -0.5]),
                              ("none", [5.0, 0.0])):
        strategy = es.EvolutionStrategy(np.zeros(2), sigma=1.0, learning_rate=0.1,
                                        fitness_shaping=shaping)
        assert strategy.update([0, 1], [1.0, 1.0], [10.0, 0.0]) == pytest.approx(expected)


def test_eval_every_evaluates_theta_after_the_generation_s_step(tmp_path, monkeypatch):
    # theta is evaluated after the step of the generation that crosses a multiple of 100:
    # the evaluated theta has the norm that updates.csv logs for that generation, not the
    # one of the generation before.
    norms = spy_on(monkeypatch, es, "evaluate", lambda args, models, video_folder=None:
                   float(np.linalg.norm(models["theta"].strategy.theta)))
    es.main(es.Args(total_timesteps=300, population_size=4, num_workers=1, eval_every=100,
                    eval_episodes=1, output_dir=str(tmp_path)))
    (path,) = tmp_path.iterdir()
    updates = read_csv(path / "updates.csv")
    rows = read_csv(path / "evaluations.csv")
    logged = {int(u["global_step"]): float(u["theta_norm"]) for u in updates}
    assert len(rows) >= 2 and len(set(logged.values())) == len(logged)
    assert norms[:len(rows)] == [logged[int(r["global_step"])] for r in rows]


def test_the_budget_is_whole_generations_said_once(tmp_path, capsys):
    # CartPole episodes vary in length: the generation whose episodes reach 300 steps is
    # played to its end, so the run goes past 300, and the generation before it ended short.
    summary = es.main(es.Args(total_timesteps=300, population_size=4, num_workers=1,
                              eval_episodes=0, output_dir=str(tmp_path)))
    assert capsys.readouterr().out.count(
        "training runs whole generations: the one whose episodes reach --total-timesteps 300 "
        "is finished") == 1
    (path,) = tmp_path.iterdir()
    ends = [int(u["global_step"]) for u in read_csv(path / "updates.csv")]
    assert ends[-2] < 300 <= ends[-1] == summary["global_steps"]


def test_truncated_episodes_return_what_was_collected_until_the_cut(tmp_path, monkeypatch):
    # a time limit of 3 steps: return 3; no time limit: cut at EPISODE_STEP_LIMIT (here 5)
    es.main(es.Args(env_id="CountToThree-v0", total_timesteps=12, population_size=4,
                    num_workers=1, eval_episodes=0, output_dir=str(tmp_path / "limit")))
    assert episode_rows(tmp_path / "limit") == [(str(3 * i), "3.0", "3") for i in range(1, 5)]
    monkeypatch.setattr(es, "EPISODE_STEP_LIMIT", 5)
    summary = es.main(es.Args(env_id="ESCountForever-v0", total_timesteps=10, population_size=2,
                              num_workers=1, eval_episodes=1, output_dir=str(tmp_path / "forever")))
    assert episode_rows(tmp_path / "forever") == [("5", "5.0", "5"), ("10", "5.0", "5")]
    assert summary["eval_return_mean"] == 5.0


class EpisodeCountEnv(CountingEnv):
    """Episodes of 2 steps whose second step pays the number of the episode on this
    environment (1, 2, 3, ...): returns that tell every episode apart."""
    terminate_at = 2

    def reset(self, *, seed=None, options=None):
        self.episode = getattr(self, "episode", 0) + 1
        return super().reset(seed=seed, options=options)

    def step(self, action):
        obs, _, terminated, truncated, info = super().step(action)
        return obs, float(self.episode) * terminated, terminated, truncated, info


gym.register("ESEpisodeCount-v0", entry_point=EpisodeCountEnv, reward_threshold=15.0)


def test_the_loop_logs_its_members_and_generations_by_hand_over_6_generations(tmp_path):
    # ESEpisodeCount-v0: 2-step episodes whose return is the number of the episode on its
    # environment. One worker plays generation g's 4 members (2 mirrored pairs, 8 steps) and
    # then theta on one environment: members return 5(g - 1) + 1, ..., 5(g - 1) + 4, theta
    # 5g. 48 steps are 6 generations, 24 member episodes ending at steps 2, 4, ..., 48
    # (theta's episodes are not training episodes, nor counted in the steps).
    # updates.csv, a row a generation at 8, 16, ..., 48: fitness mean, max and min
    # 5(g - 1) + 2.5, + 4 and + 1; theta_return 5g (not a member's).
    es.main(es.Args(env_id="ESEpisodeCount-v0", total_timesteps=48, population_size=4,
                    num_workers=1, eval_episodes=0, output_dir=str(tmp_path)))
    (path,) = tmp_path.iterdir()
    member_returns = [5 * g + i for g in range(6) for i in (1, 2, 3, 4)]
    ends = list(range(2, 49, 2))
    assert episode_rows(tmp_path) == [(str(s), str(float(r)), "2")
                                      for s, r in zip(ends, member_returns)]
    updates = read_csv(path / "updates.csv")
    assert [int(u["global_step"]) for u in updates] == [8, 16, 24, 32, 40, 48]
    assert [int(u["generation"]) for u in updates] == [1, 2, 3, 4, 5, 6]
    assert [(float(u["fitness_mean"]), float(u["fitness_max"]), float(u["fitness_min"]),
             float(u["theta_return"])) for u in updates] == [
        (5 * g + 2.5, 5 * g + 4, 5 * g + 1, 5 * g + 5) for g in range(6)]


# ---------------------------------------------------------------------------------------
# Workers: the same noise from the same seed, replicas that stay equal, worker counts
# ---------------------------------------------------------------------------------------
def test_a_worker_process_regenerates_the_same_noise_from_the_same_seed():
    with multiprocessing.get_context("fork").Pool(1) as pool:
        theirs = pool.apply(es.member_noise, (1234, 5))
    assert theirs.tolist() == es.member_noise(1234, 5).tolist()
    assert not np.allclose(es.member_noise(1235, 5), theirs)


def wait_until_gone(ray, actor):
    """Wait until calls to a Ray actor fail: ray.kill takes effect soon, not at once."""
    deadline = time.time() + 30
    while time.time() < deadline:
        try:
            ray.get(actor.handle.remote(("play", ([], None))))
        except ray.exceptions.RayActorError:
            return
    raise AssertionError("the actor still answers 30 s after ray.kill")


@pytest.fixture(params=["process", "ray"])
def backend(request):
    """Each backend in turn; "ray" with the module's Ray session."""
    if request.param == "ray":
        request.getfixturevalue("ray_session")
    return request.param


def test_worker_replicas_play_and_update_like_the_main_process(backend):
    env_id = "CartPole-v1"
    policy = es.Policy(4, gym.spaces.Discrete(2), (8,))
    strategy = es.EvolutionStrategy(policy.initial_theta(np.random.default_rng(0)), sigma=0.1,
                                    learning_rate=0.05)
    env = gym.wrappers.RecordEpisodeStatistics(es.make_env(env_id))
    tasks = [(11, 1.0, [5]), (11, -1.0, [5]), (12, 1.0, [6, 7]), (0, 0.0, [8])]
    obs_stats = (np.array([0.1, 0.0, -0.1, 0.0]), np.array([1.0, 2.0, 1.0, 2.0]))
    workers = es.start_workers(filled(env_id=env_id, num_workers=2, backend=backend), policy,
                               strategy)
    try:
        for _ in range(3):  # three generations: the replicas follow the main process's updates
            theirs = workers.play(tasks, obs_stats)
            mine = [es.play_task(env, policy, strategy, obs_stats, task) for task in tasks]
            assert [r[:2] for r in theirs] == [r[:2] for r in mine] and len(theirs[2][0]) == 2
            for (_, _, their_moments), (_, _, my_moments) in zip(theirs[:3], mine[:3]):
                assert all(np.array_equal(a, b) for a, b in zip(their_moments, my_moments))
            assert theirs[3][2] is None  # theta's own observations are not recorded
            returns = [np.mean(r) for r, _, _ in mine[:2]]
            strategy.update([11, 11], [1.0, -1.0], returns)
            workers.update([11, 11], [1.0, -1.0], returns)
        strategy.update([11, 11], [1.0, -1.0], [0.0, 1.0])
        strategy.theta += 1e-9  # a replica that drifted from the main process is noticed
        with pytest.raises(RuntimeError, match="copy of theta differs"):
            workers.update([11, 11], [1.0, -1.0], [0.0, 1.0])
    finally:
        workers.close()
    if backend == "process":
        assert len(workers.processes) == 2 and not any(p.is_alive() for p in workers.processes)
    else:  # closing killed them
        assert len(workers.actors) == 2
        for actor in workers.actors:
            wait_until_gone(sys.modules["ray"], actor)


def test_worker_count_caps_with_a_warning(monkeypatch, capsys):
    monkeypatch.setattr(es, "available_cores", lambda: 2)
    assert es.worker_count(filled(num_workers=5, population_size=8)) == 2
    assert capsys.readouterr().err == "es.py: warning: --num-workers 5 is more than the 2 cores; using 2\n"
    monkeypatch.setattr(es, "available_cores", lambda: 16)
    assert es.worker_count(filled(num_workers=8, population_size=4)) == 4
    assert "more than the 4 members of a generation; using 4" in capsys.readouterr().err
    assert es.worker_count(filled(population_size=4)) == 4          # default: no warning
    assert es.worker_count(filled(num_workers=3, population_size=4)) == 3
    assert capsys.readouterr().err == ""


def test_too_many_workers_on_the_command_line_warns_and_runs(tmp_path, run_cli):
    code, out, err = run_cli("es.py", ["--num-workers", "64", "--population-size", "2",
                                       "--total-timesteps", "50", "--eval-episodes", "0",
                                       "--output-dir", str(tmp_path)])
    assert code == 0 and err.startswith("es.py: warning: --num-workers 64 is more than the ")
    with open(next(tmp_path.glob("*/config.json"))) as f:
        assert json.load(f)["num_workers"] == min(es.available_cores(), 2)


def short_run(output_dir, backend="process", num_workers=1):
    """A short CartPole run (pop. 6, 3000 steps, --norm-obs, model.pt); returns its episode
    rows, its updates.csv without wall_time and sps, and its final theta as a list."""
    es.main(es.Args(total_timesteps=3000, population_size=6, num_workers=num_workers,
                    backend=backend, norm_obs=True, eval_episodes=0, save_model=True,
                    output_dir=str(output_dir)))
    updates = read_csv(next(output_dir.glob("*/updates.csv")))
    theta = torch.load(next(output_dir.glob("*/model.pt")), weights_only=True)["theta"]["theta"]
    return (episode_rows(output_dir),
            [{k: v for k, v in r.items() if k not in ("wall_time", "sps")} for r in updates],
            theta.tolist())


def test_results_do_not_depend_on_the_number_of_workers(tmp_path, monkeypatch):
    monkeypatch.setattr(es, "available_cores", lambda: 2)  # 2 workers even on a 1-core machine
    one, two = (short_run(tmp_path / str(workers), num_workers=workers) for workers in (1, 2))
    assert len(one[1]) >= 3 and one == two


@pytest.mark.slow  # real Ray workers
def test_ray_workers_give_the_same_generations_returns_and_theta_as_processes(tmp_path,
                                                                              ray_session):
    processes = short_run(tmp_path / "process")
    for workers in (1, 2):
        assert short_run(tmp_path / f"ray-{workers}", "ray", workers) == processes


class ListWorkers(es.Workers):
    """Workers that answer in this process, each task with who played its seed, in the order
    the messages were sent; those named in `dead` are gone. Records what was sent to whom."""

    def __init__(self, names, dead=()):
        super().__init__(names, policy=None, strategy=None)
        self.dead, self.sent = set(dead), []

    def send(self, worker, message):
        self.sent.append((worker, [seed for seed, _, _ in message[1][0]]))
        return len(self.sent) - 1

    def ready(self, handles):
        return sorted(handles)[:1]

    def receive(self, handle):
        worker, seeds = self.sent[handle]
        if worker in self.dead:
            raise es.WorkerDied(f"{worker} is gone")
        return [f"{worker} played {seed}" for seed in seeds]


def test_free_workers_get_a_share_of_the_tasks_left_and_a_dead_one_s_go_to_another(capsys):
    tasks = [(seed, 1.0, [0]) for seed in range(7)]
    # 7 tasks, 2 workers: a gets ceil(7 / 2) = 4, b ceil(3 / 2) = 2; a answers first and
    # gets the last, ceil(1 / 2) = 1
    workers = ListWorkers(["a", "b"])
    results = workers.play(tasks, None)
    assert workers.sent == [("a", [0, 1, 2, 3]), ("b", [4, 5]), ("a", [6])]
    assert results == [*(f"a played {s}" for s in range(4)), "b played 4", "b played 5",
                       "a played 6"]
    # b is dead: its chunk goes back to the tasks left, and a, alone, takes ceil(2 / 1) = 2
    workers = ListWorkers(["a", "b"], dead=["b"])
    assert workers.play(tasks, None) == [f"a played {s}" for s in range(7)]
    assert workers.sent[3:] == [("a", [4, 5])] and workers.workers == ["a"]
    assert capsys.readouterr().err == ("es.py: warning: a worker died (b is gone); its members go "
                                       "to the 1 left\n")
    # no worker left: the run stops as after Ctrl-C, with one line
    with pytest.raises(es.WorkersLost):
        ListWorkers(["a", "b"], dead=["a", "b"]).play(tasks, None)
    assert capsys.readouterr().err.splitlines()[-1] == ("es.py: every worker has died (the last: "
                                                        "b is gone); stopping")


def kill_workers_in_generation_2(monkeypatch, backend, every=False):
    """Kill a worker (every worker, if `every`) as generation 2's second chunk of members is
    handed out to it, before it gets them: `ray.kill` for an actor, SIGKILL for a process."""
    pool = es.RayWorkers if backend == "ray" else es.ProcessWorkers
    send, sent = pool.send, []

    def kill(self, worker):
        if backend == "ray":
            sys.modules["ray"].kill(worker)
            wait_until_gone(sys.modules["ray"], worker)
        else:
            process = self.processes[self.conns.index(worker)]
            os.kill(process.pid, signal.SIGKILL)
            process.join()

    def send_and_kill(self, worker, message):
        sent.append(message[0])
        since_generation_1 = sent[sent.index("update"):] if "update" in sent else []
        if message[0] == "play" and since_generation_1.count("play") == 2:
            for victim in list(self.workers) if every else [worker]:
                kill(self, victim)
        return send(self, worker, message)
    monkeypatch.setattr(pool, "send", send_and_kill)


def test_a_worker_that_dies_has_its_members_played_by_the_others(tmp_path, monkeypatch,
                                                                    capsys, backend):
    monkeypatch.setattr(es, "available_cores", lambda: 2)
    undisturbed = short_run(tmp_path / "undisturbed")
    capsys.readouterr()
    kill_workers_in_generation_2(monkeypatch, backend)
    assert short_run(tmp_path / "killed", backend, 2) == undisturbed
    err = capsys.readouterr().err
    assert err.startswith("es.py: warning: a worker died (") and err.count("\n") == 1
    assert err.endswith("); its members go to the 1 left\n")
    assert not multiprocessing.active_children()


def test_a_run_whose_workers_all_die_stops_with_one_line_and_keeps_its_files(
        tmp_path, monkeypatch, capsys, backend):
    monkeypatch.setattr(es, "available_cores", lambda: 2)
    kill_workers_in_generation_2(monkeypatch, backend, every=True)
    summary = es.main(es.Args(total_timesteps=100_000, population_size=6, num_workers=2,
                              backend=backend, save_model=True, output_dir=str(tmp_path)))
    out, err = capsys.readouterr()
    (path,) = tmp_path.iterdir()
    assert summary["interrupted"] is True and summary["eval_return_mean"] is None
    assert err.splitlines()[-1].startswith("es.py: every worker has died (the last: ")
    assert err.endswith("); stopping\n")
    # generation 1 was written; generation 2 never finished
    assert len(read_csv(path / "episodes.csv")) == 6 and len(read_csv(path / "updates.csv")) == 1
    assert (path / "summary.json").exists() and (path / "model.pt").exists()
    assert not multiprocessing.active_children()


def test_pairs_share_noise_and_all_members_share_the_start_states(tmp_path, monkeypatch):
    # CountToThree-v0's episodes are 3 steps: 4 members x 2 episodes x 3 = 24 steps a
    # generation, so a budget of 25 plays 2 generations (5 tasks each, theta's last)
    tasks = []
    original = es.play_task
    monkeypatch.setattr(es, "play_task", lambda *a: tasks.append(a[-1]) or original(*a))
    es.main(es.Args(env_id="CountToThree-v0", total_timesteps=25, population_size=4,
                    episodes_per_member=2, num_workers=1, eval_episodes=0,
                    output_dir=str(tmp_path)))
    assert len(tasks) == 10
    # each generation draws its own noise and its own start states from the main generator
    # (one seeded afresh each generation would replay generation 1's start states)
    assert tasks[5][2] != tasks[0][2]
    assert not {tasks[5][0], tasks[7][0]} & {tasks[0][0], tasks[2][0]}
    seeds, signs, env_seeds = zip(*tasks[:5])
    assert signs == (1.0, -1.0, 1.0, -1.0, 0.0)             # two pairs, then theta itself
    assert seeds[0] == seeds[1] != seeds[2] == seeds[3]
    assert env_seeds[0] == env_seeds[1] == env_seeds[2] == env_seeds[3] and len(env_seeds[0]) == 2
    # a member's 2 episodes start from 2 start states drawn apart (one state drawn once and
    # repeated would play the same episode twice: a deterministic policy returns it twice)
    assert env_seeds[0][0] != env_seeds[0][1]
    assert env_seeds[4] == env_seeds[0][:1]                 # theta plays the first start state


def test_the_seed_reaches_the_generators_the_members_and_the_evaluation(tmp_path, monkeypatch):
    # --seed 7, not the default 1: Python's and NumPy's global seeds; the main generator,
    # fresh from 7, draws theta and goes on to draw the members' noise seeds and start
    # states in train; the evaluations (--eval-every's and the final one) get the flags of
    # --seed 7, from which the plumbing's evaluate seeds them
    seeded = [spy_on(monkeypatch, module, "seed", lambda seed: seed)
              for module in (es.random, es.np.random)]
    drawn = spy_on(monkeypatch, es.Policy, "initial_theta",
                   lambda self, rng: (rng, rng.bit_generator.state))
    trained = spy_on(monkeypatch, es, "train", lambda *a: a[-1])  # its rng
    evaluated = spy_on(monkeypatch, es, "evaluate", lambda args, *rest: args.seed)
    es.main(es.Args(total_timesteps=1, population_size=4, num_workers=1, eval_episodes=2,
                    eval_every=1, seed=7, output_dir=str(tmp_path)))
    assert seeded == [[7], [7]] and evaluated == [7, 7]
    ((rng, state),) = drawn
    assert state == np.random.default_rng(7).bit_generator.state and trained == [rng]


def test_an_evaluation_seeds_each_of_its_episodes_one_after_the_other(monkeypatch):
    # an evaluation of 3 episodes from seed 7 plays them in 3 environments of make_vector_env,
    # reset with seeds 7, 8 and 9, so that each episode starts from a state of its own (7 three
    # times would play one episode three times). The linear policy W = [[0, 1]], b = [0, -1]
    # takes action 1, which ends the episode, at the first observation x > 1: x = 2, return 3,
    # in each.
    seeds = spy_on(monkeypatch, CountingEnv, "reset", lambda self, seed=None, options=None: seed)
    returns = evaluate_theta(es.Policy(1, gym.spaces.Discrete(2)), np.array([0.0, 1.0, 0.0, -1.0]),
                             "ESCountUntilActionOne-v0", 3, 7)
    assert returns.tolist() == [3.0, 3.0, 3.0] and seeds[:3] == [7, 8, 9]


# 1 episode a member as well as 2: theta's own result comes back last, after the members',
# and must be set apart as such. Taken from the front instead, the fitness would be shifted
# by one member, theta's return among it: with 2 episodes the unpacking of theta's one
# return fails, but with 1 (the default) nothing fails. Seed 1's members return
# [10, 10, 23, 9] with 1 episode; the shifted fitness [10, 23, 9, theta's] differs from it.
@pytest.mark.parametrize("episodes_per_member", [1, 2])
def test_a_generation_plays_each_member_s_parameters_and_steps_theta_as_the_flags_say(
        episodes_per_member, tmp_path, monkeypatch):
    # One generation of 2 mirrored pairs (n = 4), 1 or 2 episodes each, played in this process.
    # Each member plays theta + sign * sigma * eps(seed) and theta itself plays once; the
    # fitness of a member is the mean of its returns, in member order; then one SGD step
    # (--optimizer sgd) with z-scores (--fitness-shaping zscore), sigma 0.2, lr 0.07, l2 0.01:
    #   z     = (F - mean F) / (std F + 1e-8)
    #   g     = 1 / (4 * 0.2) * sum_i z_i * sign_i * eps_i
    #   theta = theta_0 + 0.07 * (g - (0.01 / 0.2) * theta_0)
    played, stepped = [], []
    original_play, original_update = es.play_episodes, es.EvolutionStrategy.update

    def spy_play(env, policy, layers, obs_stats, env_seeds, record_obs=False):
        result = original_play(env, policy, layers, obs_stats, env_seeds, record_obs)
        played.append((np.concatenate([np.ravel(part) for layer in layers for part in layer]),
                       list(env_seeds), result[0], result[1]))
        return result

    def spy_update(self, seeds, signs, returns):
        stepped.append((self.theta.copy(), list(seeds), list(signs), list(returns)))
        return original_update(self, seeds, signs, returns)

    tasks = []
    original_task = es.play_task
    monkeypatch.setattr(es, "play_task", lambda *a: tasks.append(a[-1]) or original_task(*a))
    monkeypatch.setattr(es, "play_episodes", spy_play)
    monkeypatch.setattr(es.EvolutionStrategy, "update", spy_update)
    es.main(es.Args(total_timesteps=1, population_size=4, episodes_per_member=episodes_per_member,
                    policy="linear", sigma=0.2, learning_rate=0.07, optimizer="sgd",
                    fitness_shaping="zscore", l2_coef=0.01, num_workers=1, eval_episodes=0,
                    save_model=True, output_dir=str(tmp_path)))
    (theta_0, seeds, signs, fitness), = stepped
    assert len(played) == len(tasks) == 5
    assert (seeds, signs) == ([t[0] for t in tasks[:4]], [t[1] for t in tasks[:4]])
    eps = np.stack([es.member_noise(seed, len(theta_0)) for seed in seeds])
    for (params, env_seeds, _, _), (_, sign, task_env_seeds), e in zip(played, tasks, eps):
        assert params == pytest.approx(theta_0 + sign * 0.2 * e) and env_seeds == task_env_seeds
    assert played[4][0].tolist() == theta_0.tolist()       # theta itself, unperturbed
    returns = [r for _, _, r, _ in played[:4]]
    assert fitness == pytest.approx([np.mean(r) for r in returns])
    F = np.array(fitness)
    z = (F - F.mean()) / (F.std() + 1e-8)
    assert not np.allclose(z, es.centered_ranks(F))  # the returns tell the shapings apart
    g = (z * np.array(signs)) @ eps / (4 * 0.2)
    theta = torch.load(next(tmp_path.glob("*/model.pt")), weights_only=True)["theta"]["theta"].numpy()
    assert theta == pytest.approx(theta_0 + 0.07 * (g - 0.01 / 0.2 * theta_0))
    # the logs: each member's episodes in member order, theta's return apart
    (path,) = tmp_path.iterdir()
    member_returns = [r for member in returns for r in member]
    lengths = [length for _, _, _, member in played[:4] for length in member]
    assert episode_rows(tmp_path) == [(str(step), str(r), str(length)) for step, r, length
                                      in zip(np.cumsum(lengths).tolist(), member_returns, lengths)]
    (row,) = read_csv(path / "updates.csv")
    assert float(row["theta_return"]) == played[4][2][0]
    assert (float(row["fitness_mean"]), float(row["fitness_max"]), float(row["fitness_min"])) == \
        pytest.approx((F.mean(), F.max(), F.min()))
    # grad_norm is ||g||, the estimate itself: not the decayed g - (0.01 / 0.2) * theta_0 the
    # optimizer takes, nor the step 0.07 * that
    assert float(row["grad_norm"]) == pytest.approx(np.linalg.norm(g))
    assert np.linalg.norm(g - 0.01 / 0.2 * theta_0) != pytest.approx(np.linalg.norm(g))


def test_norm_obs_statistics_are_frozen_for_a_generation_and_take_in_the_members_raw_obs(
        tmp_path, monkeypatch):
    # CountToThree-v0: every episode observes 0, 1, 2 (then is cut), whatever the policy.
    # Generation 1 (one pair) plays with the initial statistics, mean 0 and std sqrt(1 + 1e-8);
    # the pair's 6 raw observations give mean 1, var 2/3 (theta's own episode adds nothing),
    # and generation 2, members and theta alike, plays with those: std sqrt(2/3) = 0.816497.
    # After it: 12 raw observations, mean 1 and var 2/3 still (normalized ones, (x - 1) /
    # 0.816, would pull the mean to 0.5).
    stats = []
    original = es.play_task
    monkeypatch.setattr(es, "play_task", lambda env, policy, strategy, obs_stats, task: (
        stats.append(obs_stats), original(env, policy, strategy, obs_stats, task))[1])
    es.main(es.Args(env_id="CountToThree-v0", total_timesteps=7, population_size=2,
                    norm_obs=True, num_workers=1, eval_episodes=0, save_model=True,
                    output_dir=str(tmp_path)))
    assert len(stats) == 6                                  # 2 generations of 2 members + theta
    for mean, std in stats[:3]:
        assert (mean.tolist(), std.tolist()) == ([0.0], pytest.approx([1.0]))
    for mean, std in stats[3:]:
        assert (mean.tolist(), std.tolist()) == (pytest.approx([1.0], abs=1e-4),
                                                 pytest.approx([0.816497], abs=1e-4))
    saved = torch.load(next(tmp_path.glob("*/model.pt")), weights_only=True)["obs_rms"]
    assert saved["count"] == pytest.approx(12, abs=1e-3)
    assert saved["mean"].tolist() == pytest.approx([1.0], abs=1e-4)
    assert saved["var"].tolist() == pytest.approx([2 / 3], abs=1e-4)


# ---------------------------------------------------------------------------------------
# Runs end to end
# ---------------------------------------------------------------------------------------
@pytest.mark.slow  # a smoke run: a whole tiny run and every file it writes
def test_discrete_smoke_run_with_workers_logs_its_columns_and_its_model_evaluates(
        tmp_path, monkeypatch):
    # model.pt's theta is the last generation's, and evaluated alone it plays the same on the
    # same seeds.
    monkeypatch.setattr(es, "available_cores", lambda: 2)
    args = filled(total_timesteps=600, population_size=4, num_workers=2, eval_episodes=2,
                   save_model=True, output_dir=str(tmp_path / "train"))
    summary = es.main(args)
    (path,) = (tmp_path / "train").iterdir()
    episodes, updates = read_csv(path / "episodes.csv"), read_csv(path / "updates.csv")
    assert summary["global_steps"] >= 600 and summary["eval_return_mean"] >= 8
    assert summary["global_steps"] == sum(int(e["episode_length"]) for e in episodes)
    assert len(episodes) == 4 * len(updates)                       # one row per member
    assert [int(u["generation"]) for u in updates] == list(range(1, len(updates) + 1))
    columns = ["generation", "fitness_mean", "fitness_max", "fitness_min", "theta_return",
               "theta_norm", "grad_norm"]
    assert list(updates[0])[3:] == columns
    first = [float(e["episode_return"]) for e in episodes[:4]]
    assert float(updates[0]["fitness_max"]) == max(first) and float(updates[0]["fitness_min"]) == min(first)
    state = torch.load(path / "model.pt", weights_only=True)
    assert float(updates[-1]["theta_norm"]) == pytest.approx(state["theta"]["theta"].norm().item())
    assert not multiprocessing.active_children()

    evaluated = es.main(es.Args(eval_checkpoint=str(path / "model.pt"), eval_episodes=2,
                                seed=summary["seed"], output_dir=str(tmp_path / "eval")))
    assert evaluated["eval_return_mean"] == summary["eval_return_mean"]  # same theta, same seeds
    assert evaluated["global_steps"] == 0


def test_an_environment_of_your_own_module_trains_with_workers_and_evaluates(
        tmp_path, fresh_env_module, monkeypatch):
    # my_envs is unloaded and its ids unregistered: es.py imports it, and the forked workers
    # inherit the registration. GridWorld-v0 gives -1 a step, cut at 20 steps.
    monkeypatch.setattr(es, "available_cores", lambda: 2)
    args = filled(env_id=f"{fresh_env_module}:GridWorld-v0", total_timesteps=100,
                   population_size=4, num_workers=2, eval_episodes=1, save_model=True,
                   output_dir=str(tmp_path / "train"))
    summary = es.main(args)
    (path,) = (tmp_path / "train").iterdir()
    episodes = read_csv(path / "episodes.csv")
    assert len(episodes) % 4 == 0
    assert all(float(e["episode_return"]) == -int(e["episode_length"]) <= -6 for e in episodes)
    evaluated = es.main(es.Args(env_id="my_envs:GridWorld-v0", eval_episodes=1,
                                eval_checkpoint=str(path / "model.pt"),
                                output_dir=str(tmp_path / "eval")))
    assert evaluated["eval_return_mean"] == summary["eval_return_mean"]


@pytest.mark.slow  # a smoke run: a whole tiny run and every file it writes
def test_continuous_smoke_run_with_every_option(tmp_path):
    # 3 members without mirroring, 2 episodes each of Pendulum's 200 steps: 1200 steps,
    # one generation
    args = filled(env_id="Pendulum-v1", total_timesteps=1200, population_size=3,
                   antithetic=False, episodes_per_member=2, policy="linear", optimizer="sgd",
                   fitness_shaping="zscore", norm_obs=True, num_workers=1, eval_episodes=2,
                   save_model=True, output_dir=str(tmp_path / "train"))
    summary = es.main(args)
    (path,) = (tmp_path / "train").iterdir()
    episodes, updates = read_csv(path / "episodes.csv"), read_csv(path / "updates.csv")
    assert [e["episode_length"] for e in episodes] == ["200"] * 6 and len(updates) == 1
    returns = [float(e["episode_return"]) for e in episodes]
    assert float(updates[0]["fitness_mean"]) == pytest.approx(np.mean(returns))  # 3 means of 2
    state = torch.load(path / "model.pt", weights_only=True)
    assert state["theta"]["theta"].shape == (3 * 1 + 1,) and state["args"]["policy"] == "linear"
    # every member step's observation, not theta's own episode: 1200 (+ 1e-4 to start with)
    assert state["obs_rms"]["count"] == pytest.approx(1200) and state["obs_rms"]["mean"].shape == (3,)

    evaluated = es.main(es.Args(env_id="Pendulum-v1", eval_checkpoint=str(path / "model.pt"),
                                eval_episodes=2, output_dir=str(tmp_path / "eval")))
    assert evaluated["eval_return_mean"] == pytest.approx(summary["eval_return_mean"])


def test_stop_at_return_stops_after_the_generation_and_records_when(tmp_path):
    # CartPole gives 1 per step, so the 20-episode mean reaches 1 at the 20th episode, in
    # generation 3 of 8 members (episodes 17-24); the generation is finished, then it stops.
    summary = es.main(es.Args(population_size=8, stop_at_return=1.0, num_workers=1,
                              eval_episodes=0, output_dir=str(tmp_path)))
    (path,) = tmp_path.iterdir()
    episodes = read_csv(path / "episodes.csv")
    assert len(episodes) == 24 and summary["solved_at_step"] == int(episodes[19]["global_step"])
    assert summary["global_steps"] == int(episodes[23]["global_step"]) < 500_000
    assert len(read_csv(path / "updates.csv")) == 3


def test_stop_at_return_holds_once_reached_though_the_generation_s_later_episodes_fall_back(
        tmp_path, monkeypatch):
    # One generation of 22 members, each playing one episode of 1 step: members 1-20 return 1,
    # members 21 and 22 return 0 (theta's own episode 0.5, which is not counted). After episode
    # 20 the mean of the last 20 is 20 / 20 = 1 >= --stop-at-return 1: solved at step 20.
    # Episodes 21 and 22 bring that mean to 19 / 20 = 0.95 and 18 / 20 = 0.9, below 1, yet the
    # run stays solved: generation 1 is finished (22 steps) and no second one is played, though
    # the budget of 44 steps would hold it.
    member_returns = iter([1.0] * 20 + [0.0] * 24)
    monkeypatch.setattr(es, "play_task", lambda env, policy, strategy, obs_stats, task: (
        [next(member_returns) if task[1] else 0.5], [1], None))
    summary = es.main(es.Args(population_size=22, total_timesteps=44, stop_at_return=1.0,
                              num_workers=1, eval_episodes=0, output_dir=str(tmp_path)))
    (path,) = tmp_path.iterdir()
    assert summary["solved_at_step"] == 20 and summary["global_steps"] == 22
    assert [int(u["generation"]) for u in read_csv(path / "updates.csv")] == [1]


def test_an_evaluation_of_a_checkpoint_takes_its_network_and_trains_nothing(tmp_path, capsys):
    # Trained for one generation of 2 members on my_envs:ThreeSteps-v0 (observations [2],
    # actions Discrete(2), 1 a step for 3 steps) with --hidden-sizes 8 4: sizes [2, 8, 4, 2],
    # (2 + 1) * 8 + (8 + 1) * 4 + (4 + 1) * 2 = 24 + 36 + 10 = 70 parameters (the default 32:
    # 3 * 32 + 33 * 2 = 162). Evaluated with the flags' defaults, the model's --hidden-sizes
    # 8 4 and --norm-obs are taken (MODEL_FLAGS; a 70-parameter theta does not load into
    # 162: bad input); no worker is counted or started, no population line, and the episode
    # returns 3.
    es.main(es.Args(env_id="my_envs:ThreeSteps-v0", total_timesteps=6, population_size=2,
                    num_workers=1, hidden_sizes=(8, 4), norm_obs=True, save_model=True,
                    eval_episodes=0, output_dir=str(tmp_path / "train")))
    (folder,) = (tmp_path / "train").iterdir()
    assert torch.load(folder / "model.pt", weights_only=True)["theta"]["theta"].shape == (70,)
    capsys.readouterr()
    evaluated = es.main(es.Args(env_id="my_envs:ThreeSteps-v0", eval_checkpoint=str(folder),
                                eval_episodes=1, output_dir=str(tmp_path / "eval")))
    out = capsys.readouterr().out
    assert "worker(s)" not in out and ", 70 parameters" in out
    assert evaluated["global_steps"] == 0 and evaluated["eval_return_mean"] == 3.0
    (evaluation,) = (tmp_path / "eval").iterdir()
    config = json.loads((evaluation / "config.json").read_text())
    assert (config["hidden_sizes"], config["norm_obs"], config["num_workers"]) == ([8, 4], True,
                                                                                   None)


def test_an_evaluation_of_a_linear_checkpoint_takes_the_model_s_policy(tmp_path, run_cli):
    # A --policy linear model of ESCountUntilActionOne-v0 (observation [1], Discrete(2)):
    # (1 + 1) * 2 = 4 parameters, W = [[0, 1]], b = [0, -1], action 1 (return x + 1) once
    # x > 1: return 3. Evaluated on the command line with the flags' defaults (--policy mlp,
    # --hidden-sizes 32, whose network has (1 + 1) * 32 + (32 + 1) * 2 = 130 parameters), the
    # model's --policy linear is taken: exit status 0, config.json records linear, and the
    # episode returns 3.
    model = tmp_path / "model.pt"
    es.save_checkpoint(model, models_of(es.Policy(1, gym.spaces.Discrete(2)),
                                        np.array([0.0, 1.0, 0.0, -1.0])),
                       filled(env_id="ESCountUntilActionOne-v0", policy="linear"))
    code, out, err = run_cli("es.py", ["--env-id", "ESCountUntilActionOne-v0", "--eval-checkpoint",
                                       str(model), "--eval-episodes", "1",
                                       "--output-dir", str(tmp_path / "eval")])
    assert code == 0, err
    (evaluation,) = (tmp_path / "eval").iterdir()
    assert json.loads((evaluation / "config.json").read_text())["policy"] == "linear"
    assert json.loads((evaluation / "summary.json").read_text())["eval_return_mean"] == 3.0


def test_a_theta_that_does_not_fit_the_network_is_refused_in_one_line(tmp_path):
    # model.pt says 32 hidden units but holds a 16-unit network's theta: 4 inputs, 2 actions,
    # (4 + 1) * 16 + (16 + 1) * 2 = 114 parameters, where 32 units make 226
    policy = es.Policy(4, gym.spaces.Discrete(2), (16,))
    es.save_checkpoint(tmp_path / "model.pt", models_of(policy, np.zeros(policy.num_params)),
                       filled(hidden_sizes=(32,)))
    with pytest.raises(es.UsageError) as refused:
        es.main(es.Args(eval_checkpoint=str(tmp_path / "model.pt"),
                        output_dir=str(tmp_path / "eval")))
    assert "theta has 114 parameters, the network 226" in str(refused.value)


def test_interrupted_run_keeps_its_data_and_stops_its_workers(tmp_path, monkeypatch):
    # main writes the run folder, then lets the KeyboardInterrupt go on (exit status 130)
    monkeypatch.setattr(es, "available_cores", lambda: 2)
    monkeypatch.setattr(es.Adam, "step", interrupt_on_call(3, es.Adam.step))
    with pytest.raises(KeyboardInterrupt):
        es.main(es.Args(total_timesteps=100_000, population_size=4, num_workers=2,
                        save_model=True, output_dir=str(tmp_path)))
    (path,) = tmp_path.iterdir()
    summary = json.loads((path / "summary.json").read_text())
    assert summary["interrupted"] is True
    assert len(read_csv(path / "updates.csv")) == 2 and len(read_csv(path / "episodes.csv")) == 12
    assert not multiprocessing.active_children()


def test_nan_theta_stops_cleanly(tmp_path, monkeypatch):
    monkeypatch.setattr(es, "es_gradient", lambda fitness, noise, sigma: noise[0] * math.nan)
    summary = es.main(es.Args(total_timesteps=10_000, population_size=4, num_workers=1,
                              output_dir=str(tmp_path)))
    (path,) = tmp_path.iterdir()
    episodes = read_csv(path / "episodes.csv")
    assert summary["interrupted"] is True and len(episodes) == 4
    assert (path / "summary.json").exists() and not (path / "updates.csv").exists()


@pytest.mark.slow  # determinism: two whole runs
def test_same_seed_gives_the_same_episodes(tmp_path):
    rows = same_seed_episodes(lambda out: es.main(es.Args(
        total_timesteps=3000, population_size=8, num_workers=1, eval_episodes=0,
        output_dir=out)), tmp_path)
    assert len(rows) > 20


# ---------------------------------------------------------------------------------------
# The hooks the plumbing calls: es.py's checks of its flags and spaces, its greedy policy
# ---------------------------------------------------------------------------------------
@pytest.mark.parametrize("flags, message", [
    (dict(population_size=5), "--population-size 5 is odd, but --antithetic makes the members "
     "in mirrored pairs; use 6 or --no-antithetic"),
    (dict(population_size=1, antithetic=False), "--population-size must be at least 2"),
    (dict(population_size=0), "--population-size must be positive"),
    (dict(sigma=0.0), "--sigma must be positive, got 0.0"),
    (dict(sigma=-0.1), "--sigma must be positive"),
    (dict(learning_rate=math.nan), "--learning-rate must be positive"),
    (dict(l2_coef=-1.0), "--l2-coef must be 0 or more"),
    (dict(episodes_per_member=0), "--episodes-per-member must be positive"),
    (dict(num_workers=0), "--num-workers must be positive"),
    (dict(ray_address="auto"), "--ray-address is for Ray's workers; add --backend ray"),
    (dict(hidden_sizes=(32, 0)), "--hidden-sizes must be positive widths, got 32 0"),
    (dict(hidden_sizes=()), "--hidden-sizes must be positive widths, got  (for no hidden layer "
     "use --policy linear)"),
])
def test_check_flags_refuses_a_bad_flag_in_one_line(flags, message):
    with pytest.raises(es.UsageError) as refused:
        es.check_flags(filled(**flags))
    assert message in str(refused.value) and "\n" not in str(refused.value)
    es.check_flags(filled(policy="linear", hidden_sizes=()))  # no hidden layer: no widths


@pytest.mark.parametrize("obs_space, action_space, message", [
    (gym.spaces.Box(-1.0, 1.0, (4,)), gym.spaces.MultiBinary(3),
     "MultiBinary action space; es.py handles Discrete and Box"),
    (gym.spaces.Box(-1.0, 1.0, (4,)), gym.spaces.Box(-np.inf, np.inf, (1,)),
     "unbounded Box actions; es.py scales a tanh output"),
    (gym.spaces.Box(-1.0, 1.0, (4,)), gym.spaces.Box(-1.0, 1.0, (2, 2)),
     "Box action space of shape (2, 2); es.py needs a flat one"),
    (gym.spaces.Discrete(500), gym.spaces.Discrete(6), "Discrete observation space"),
    (gym.spaces.Box(0.0, 1.0, (4, 4)), gym.spaces.Discrete(2), "observations of shape (4, 4)"),
])
def test_check_spaces_refuses_what_the_policy_cannot_play_in_one_line(obs_space, action_space,
                                                                      message):
    with pytest.raises(es.UsageError) as refused:
        es.check_spaces(filled(env_id="Some-v0"), obs_space, action_space)
    assert message in str(refused.value) and "\n" not in str(refused.value)


def test_check_spaces_returns_the_observation_shape_and_the_action_space():
    for action_space in (gym.spaces.Discrete(2), gym.spaces.Box(-2.0, 2.0, (1,))):
        assert es.check_spaces(filled(), gym.spaces.Box(-1.0, 1.0, (3,)), action_space) == (
            (3,), action_space)


def test_main_hands_the_environments_spaces_to_check_spaces(tmp_path):
    with pytest.raises(es.UsageError, match="ESUnbounded-v0 has unbounded Box actions"):
        es.main(es.Args(env_id="ESUnbounded-v0", output_dir=str(tmp_path)))
    assert not os.listdir(tmp_path)


def test_the_greedy_policy_plays_theta_in_each_environment_with_the_frozen_statistics():
    # The linear policy W = [[0, 1]], b = [0, -1] scores y = [0, z - 1]: action 1 where the
    # normalized observation z > 1. Raw, observations 0, 2, 1.5 play 0, 1, 1; with mean 1 and
    # std 0.5, z = -2, 2, 1: 0, 1, 0. The statistics are read when the evaluation starts
    # (frozen): later updates of the normalizer do not reach it.
    policy, theta = es.Policy(1, gym.spaces.Discrete(2)), np.array([0.0, 1.0, 0.0, -1.0])
    obs = np.array([[0.0], [2.0], [1.5]], dtype=np.float32)
    act = es.greedy_policy(models_of(policy, theta), envs=None)
    assert np.asarray(act(obs, {})).tolist() == [0, 1, 1]
    normalizer = with_statistics([1.0], [0.5])
    act = es.greedy_policy(models_of(policy, theta, normalizer), envs=None)
    normalizer.update([(np.array([100.0]), np.array([1.0]), 1e6)])
    assert np.asarray(act(obs, {})).tolist() == [0, 1, 0]
    # Box actions: low + (tanh(y) + 1) / 2 * (high - low), one row per environment
    box = es.Policy(1, gym.spaces.Box(-2.0, 2.0, (1,)))
    act = es.greedy_policy(models_of(box, np.array([1.0, 0.0])), envs=None)
    assert np.asarray(act(obs, {})) == pytest.approx(2.0 * np.tanh(obs))


def test_without_ray_the_process_backend_runs_and_the_ray_backend_is_bad_input(
        tmp_path, monkeypatch, check_usage_error):
    # with sys.modules["ray"] = None, `import ray` fails and find_spec("ray") is None
    monkeypatch.setitem(sys.modules, "ray", None)
    monkeypatch.setattr(es, "available_cores", lambda: 2)
    summary = es.main(es.Args(total_timesteps=50, population_size=2, num_workers=2,
                              eval_episodes=0, output_dir=str(tmp_path / "runs")))
    assert summary["global_steps"] >= 50
    check_usage_error("es.py", ["--backend", "ray"], "--backend ray needs Ray: pip install "
                      "ray==2.60.0 (or use --backend process)")


def test_an_unreachable_ray_cluster_is_bad_input_at_once(check_usage_error):
    pytest.importorskip("ray", reason="needs Ray: pip install ray==2.60.0")
    check_usage_error("es.py", ["--backend", "ray", "--ray-address", "127.0.0.1:1"],
                      "cannot reach the Ray cluster at 127.0.0.1:1: Connection refused; start it "
                      "with `ray start --head --port=6379` on the head machine")


@pytest.mark.slow  # a Python process of its own
def test_importing_the_script_has_no_side_effects(tmp_path):
    check_import_is_quiet("es", tmp_path, also="import multiprocessing; "
                          "assert not multiprocessing.active_children(); "
                          "assert 'ray' not in sys.modules")


@pytest.mark.slow  # a real process and its workers, stopped by Ctrl-C
def test_ctrl_c_on_the_command_line_ends_by_sigint_and_its_workers_end_quietly(tmp_path):
    # Ctrl-C in a terminal sends SIGINT to every process of the command: es.py and its worker
    # processes. es.py writes its run folder and dies of SIGINT (status 130 in a shell: a
    # Popen's returncode says -SIGINT); the workers, which ignore
    # SIGINT, are stopped by it and print no traceback; no process of the command is left.
    command = start_in_a_terminal(
        [sys.executable, es.__file__, "--num-workers", "2", "--population-size", "8",
         "--total-timesteps", "100000000", "--output-dir", str(tmp_path)])
    deadline = time.time() + 60
    while len(glob.glob(str(tmp_path / "*" / "updates.csv"))) == 0 and time.time() < deadline:
        time.sleep(0.1)  # until a generation has been played and written
    out, err = ctrl_c(command)
    assert command.returncode == -signal.SIGINT
    assert "Traceback" not in err and "KeyboardInterrupt" not in err
    (path,) = tmp_path.iterdir()
    assert f"es.py: interrupted; {path} keeps the run so far" in out
    assert json.loads((path / "summary.json").read_text())["interrupted"] is True
    assert read_csv(path / "episodes.csv")
    with pytest.raises(ProcessLookupError):  # the process group is empty: the workers ended
        os.killpg(command.pid, 0)

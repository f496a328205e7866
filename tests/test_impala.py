"""Tests of impala.py: V-trace and the loss by hand, the actor's rollouts, the learner's glue
(in this process, with LocalActors standing in for Ray), its hooks (its own checks, its
greedy policy, its model's flags), then runs on a local Ray: --sync twice, a killed actor
replaced, the smoke run; its own bad input. The plumbing's behaviour is tested in
test_plumbing.py."""
import copy
import glob
import inspect
import re
import signal
import subprocess
import sys
import time
from dataclasses import replace

import gymnasium as gym
import numpy as np
import pytest
import torch

import impala
from conftest import (approx, check_an_evaluation_trains_nothing, read_csv, same_seed_episodes,
                      start_in_a_terminal, ctrl_c, spy_on, spy_on_seeds,
                      spy_on_stepped_gradient_norms, tensor)


def column(*values):
    """A [T, 1] tensor: one environment's values over T steps."""
    return torch.tensor(values, dtype=torch.float32).unsqueeze(1)


# ---------------------------------------------------------------------------------------
# V-trace by hand on a two-step rollout played with stale weights. One environment,
# gamma = 0.5, rewards 1, V(s_t) = [0.5, 1.0], next values V(s_{t+1}) = [1.0, 2.0], so the
# TD errors are r + 0.5*V' - V = [1 + 0.5 - 0.5, 1 + 1 - 1] = [1, 1]. The actor acted with
# weights 3 updates old (mu); since then the learner's pi has moved: pi/mu = [3, 0.5].
# ---------------------------------------------------------------------------------------
REWARDS, VALUES, NEXT_VALUES = column(1, 1), column(0.5, 1.0), column(1.0, 2.0)
NO_END = column(0, 0)
LAGGED = torch.log(column(3.0, 0.5))


def test_vtrace_two_step_rollout_with_lag():
    # rho = c = [min(1, 3), min(1, 0.5)] = [1, 0.5];  delta = rho * TD = [1, 0.5]
    #   vs_1 - V_1 = 0.5                          -> vs_1 = 1.5
    #   vs_0 - V_0 = 1 + 0.5*c_0*(vs_1 - V_1) = 1 + 0.5*1*0.5 = 1.25 -> vs_0 = 1.75
    #   G = [vs_1, next_values_1] = [1.5, 2.0]
    #   adv_0 = 1*(1 + 0.5*1.5 - 0.5) = 1.25;  adv_1 = 0.5*(1 + 0.5*2 - 1) = 0.5
    adv, vs = impala.compute_vtrace(REWARDS, VALUES, NEXT_VALUES, NO_END, NO_END, LAGGED, 0.5)
    assert torch.allclose(vs, column(1.75, 1.5))
    assert torch.allclose(adv, column(1.25, 0.5))


def test_vtrace_ignoring_the_lag_is_the_n_step_return():
    # --no-vtrace: log rho = 0, rho = c = 1 whatever the lag: delta = [1, 1]
    #   vs_1 = 1 + 1 = 2;  vs_0 = 0.5 + 1 + 0.5*1*(2 - 1) = 2.0 = 1 + 0.5*1 + 0.25*2 (n-step)
    #   adv_0 = 1 + 0.5*2 - 0.5 = 1.5;  adv_1 = 1 + 0.5*2 - 1 = 1.0
    adv, vs = impala.compute_vtrace(REWARDS, VALUES, NEXT_VALUES, NO_END, NO_END,
                                    torch.zeros(2, 1), 0.5)
    assert torch.allclose(vs, column(2.0, 2.0))
    assert torch.allclose(adv, column(1.5, 1.0))


def test_vtrace_with_lag_where_the_first_step_ends_the_episode():
    # Truncated at t = 0, V(true final obs) = 4: next_values = [4, 2]
    #   delta_0 = 1*(1 + 0.5*4 - 0.5) = 2.5; the trace is cut: vs_0 = 0.5 + 2.5 = 3.0
    #   vs_1 = 1.5 (as above);  adv_0 = 1*(1 + 0.5*next_values_0 - 0.5) = 2.5, adv_1 = 0.5
    # Terminated at t = 0 instead: no bootstrap, delta_0 = 1 - 0.5 = 0.5, vs_0 = 1.0, adv_0 = 0.5
    end = column(1, 0)
    adv, vs = impala.compute_vtrace(REWARDS, VALUES, column(4.0, 2.0), NO_END, end, LAGGED, 0.5)
    assert torch.allclose(vs, column(3.0, 1.5)) and torch.allclose(adv, column(2.5, 0.5))
    adv, vs = impala.compute_vtrace(REWARDS, VALUES, column(4.0, 2.0), end, NO_END, LAGGED, 0.5)
    assert torch.allclose(vs, column(1.0, 1.5)) and torch.allclose(adv, column(0.5, 0.5))


def test_impala_loss_by_hand():
    # log pi = log [0.5, 0.25], A = [2, 1]:  L_pg = -(2*log 0.5 + log 0.25)/2 = 2 log 2 = 1.386294
    #   dL_pg/dlog pi = -A/2 = [-1, -0.5]
    # V = [1, 3], vs = [2, 2]:  L_v = 0.5*((2-1)^2 + (2-3)^2)/2 = 0.5
    #   d(c_v L_v)/dV = 0.5 * 0.5 * 2 * (V - vs)/2 = 0.25*(V - vs) = [-0.25, 0.25]
    # entropy mean 0.5, c_e = 0.01, c_v = 0.5:  loss = 1.386294 + 0.25 - 0.005 = 1.631294
    # A and vs are targets: no gradient reaches them
    logprobs = torch.log(tensor(0.5, 0.25)).requires_grad_()
    values = tensor(1.0, 3.0).requires_grad_()
    advantages, vs = tensor(2.0, 1.0).requires_grad_(), tensor(2.0, 2.0).requires_grad_()
    loss, pg_loss, v_loss, entropy = impala.impala_loss(
        logprobs=logprobs, entropy=tensor(0.6, 0.4), values=values, advantages=advantages,
        vs=vs, ent_coef=0.01, vf_coef=0.5)
    assert pg_loss.item() == approx(1.386294) and v_loss.item() == approx(0.5)
    assert entropy.item() == approx(0.5) and loss.item() == approx(1.631294)
    loss.backward()
    assert logprobs.grad.tolist() == approx([-1.0, -0.5])
    assert values.grad.tolist() == approx([-0.25, 0.25])
    assert advantages.grad is None and vs.grad is None


def test_impala_loss_divides_the_value_error_by_popart_sigma():
    # V = [1, 3], vs = [2, 2], sigma = 2: L_v = 0.5*((1/2)^2 + (1/2)^2)/2 = 0.125, which is
    # mean(0.5*((vs - mu)/sigma - n)^2) for V = sigma*n + mu whatever mu (here 1: n = [0, 1],
    # (vs - mu)/sigma = [0.5, 0.5]); dL_v/dV = (V - vs)/(sigma^2 * 2) = [-0.125, 0.125]
    values = tensor(1.0, 3.0).requires_grad_()
    _, _, v_loss, _ = impala.impala_loss(
        logprobs=torch.log(tensor(0.5, 0.25)), entropy=tensor(0.6, 0.4), values=values,
        advantages=tensor(2.0, 1.0), vs=tensor(2.0, 2.0), ent_coef=0.01, vf_coef=0.5,
        value_std=2.0)
    assert v_loss.item() == approx(0.125)
    v_loss.backward()
    assert values.grad.tolist() == approx([-0.125, 0.125])


def test_popart_statistics_and_preserved_outputs_by_hand():
    # mu = 0, nu = 1 (sigma 1), targets [2, 4], beta 0.5: mu' = 0.5*0 + 0.5*3 = 1.5,
    # nu' = 0.5*1 + 0.5*(4 + 16)/2 = 5.5, sigma' = sqrt(5.5 - 1.5^2) = sqrt(3.25) = 1.802776
    mean, mean_sq, std = impala.popart_statistics(torch.tensor(0.0), torch.tensor(1.0),
                                                  tensor(2.0, 4.0), 0.5)
    assert (mean.item(), mean_sq.item(), std.item()) == approx((1.5, 5.5, 1.802776))
    # w = [2, -1], b = 0.5 with mu 1.5, sigma 2 -> mu' 3, sigma' 4: w' = w*2/4 = [1, -0.5],
    # b' = (2*0.5 + 1.5 - 3)/4 = -0.125. At h = [1, 1]: n = 1.5, V = 2*1.5 + 1.5 = 4.5;
    # after, n' = 1 - 0.5 - 0.125 = 0.375, V = 4*0.375 + 3 = 4.5, the same
    weight, bias = impala.popart_preserve(torch.tensor([[2.0, -1.0]]), tensor(0.5), 1.5, 2.0,
                                          3.0, 4.0)
    assert weight.tolist() == [[1.0, -0.5]] and bias.tolist() == [-0.125]
    # sigma is 0 before any spread (nu = mu^2) and kept at 1e-4 at least
    assert impala.popart_std(torch.tensor(3.0), torch.tensor(9.0)).item() == approx(1e-4)


@pytest.mark.parametrize("obs_shape", [(4,), (10, 10, 4)])
def test_the_agent_moves_popart_statistics_and_keeps_every_value(obs_shape):
    # mu, sigma from 0, 1 towards targets [100, 102] with beta 0.5: mu' = 50.5,
    # nu' = 0.5 + 0.5*(10000 + 10404)/2 = 5101.5, sigma' = sqrt(5101.5 - 50.5^2) = 50.49...;
    # the critic's last layer (the MLP's or the image head's) is rescaled: V stays the same
    torch.manual_seed(0)
    agent = impala.Agent(obs_shape, 2, continuous=False, hidden_size=8)
    obs = torch.rand(5, *obs_shape)
    before = agent.get_value(obs)
    agent.update_value_statistics(tensor(100.0, 102.0), beta=0.5)
    assert agent.value_mean.item() == approx(50.5)
    assert agent.value_std().item() == approx((5101.5 - 50.5 ** 2) ** 0.5)
    same = pytest.approx(before.tolist(), rel=1e-5, abs=1e-5)
    assert agent.get_value(obs).tolist() == same
    assert agent.get_action_and_value(obs)[3].tolist() == same


def test_popart_beta_zero_is_the_papers_critic_and_the_default_moves_it(tmp_path, local_actors,
                                                                        monkeypatch):
    # --popart-beta 0: mu and sigma stay 0 and 1, V is the critic's output itself (the
    # IMPALA paper's); the default 0.01 moves mu a hundredth of the way to each batch's mean
    # target: after the first, mu = 0.01 * mean(vs) of that batch
    given = []  # (advantages, vs) of each batch, as V-trace computed them
    vtrace = impala.RolloutBatch.vtrace
    monkeypatch.setattr(impala.RolloutBatch, "vtrace", lambda self, *a, **k: given.append(
        vtrace(self, *a, **k)) or given[-1])
    impala.main(impala.Args(total_timesteps=2 * 2 * 8, num_envs=2, num_steps=8, hidden_size=8,
                            num_actors=1, sync=True, eval_episodes=0, popart_beta=0.0,
                            output_dir=str(tmp_path / "off")))
    (updates,) = [read_csv(p) for p in glob.glob(str(tmp_path / "off" / "*" / "updates.csv"))]
    assert [(float(r["value_mean"]), float(r["value_std"])) for r in updates] == [(0, 1)] * 2
    given.clear()
    updates = one_actor_run(tmp_path / "on")
    first_mean = given[0][1].mean().item()
    assert float(updates[0]["value_mean"]) == pytest.approx(0.01 * first_mean, rel=1e-4)


def test_policy_lags_by_hand():
    # the learner has taken 5 steps: weights of version 5 are on-policy, 3 are 2 steps old
    assert impala.policy_lags(5, [5, 3, 0]) == [0, 2, 5]


# ---------------------------------------------------------------------------------------
# The batch: rollouts side by side, next values, and the behaviour log-probabilities
# ---------------------------------------------------------------------------------------
def rollout(obs, last_obs, logprobs, actions, version, truncated=None, final_obs=None):
    """A rollout of one environment as an actor sends it; observations are single numbers."""
    T = len(obs)
    as_column = lambda values, dtype: np.array(values, dtype).reshape(T, 1)
    return {"obs": as_column(obs, np.float32)[..., None],
            "final_obs": (np.zeros((T, 1, 1), np.float32) if final_obs is None
                          else as_column(final_obs, np.float32)[..., None]),
            "last_obs": np.array([[last_obs]], np.float32), "actions": as_column(actions, np.int64),
            "logprobs": as_column(logprobs, np.float32), "rewards": np.ones((T, 1), np.float32),
            "terminated": np.zeros((T, 1), bool),
            "truncated": (np.zeros((T, 1), bool) if truncated is None
                          else as_column(truncated, bool)),
            "episodes": [], "version": version}


def test_a_batch_puts_rollouts_side_by_side_and_bootstraps_from_the_true_final_obs():
    # Two rollouts of T = 2: the first truncated at t = 0 (true final obs 0.7, while the next
    # episode starts at 1.0), the second not. V(s) = 10*s says which observation it came from.
    batch = impala.RolloutBatch([rollout([0.0, 1.0], 2.0, [0, 0], [0, 1], 4, [1, 0], [0.7, 0]),
                                 rollout([5.0, 6.0], 7.0, [0, 0], [1, 1], 2)], "cpu")
    assert batch.obs.shape == (2, 2, 1) and batch.versions == [4, 2]
    assert batch.actions.tolist() == [[0, 1], [1, 1]]
    value_fn = lambda obs: 10 * obs[..., 0]
    next_values = batch.next_values(value_fn, value_fn(batch.obs))
    # column 0: V(final) = 7 at the truncation, then V(last) = 20; column 1: 60, then 70
    assert torch.allclose(next_values, torch.tensor([[7.0, 60.0], [20.0, 70.0]]))


def fixed_agent(p0=0.8, value=1.0):
    """An agent whose last layers are set by hand: pi(0|s) = p0 and V(s) = value everywhere."""
    agent = impala.Agent((1,), 2, continuous=False, hidden_size=4)
    with torch.no_grad():
        for head, bias in ((agent.actor[-1], torch.log(tensor(p0, 1 - p0))),
                           (agent.critic[-1], tensor(value))):
            head.weight.zero_()
            head.bias.copy_(bias)
    return agent


def learner_targets(batch, agent, correct=True):
    _, logprobs, _, values = agent.get_action_and_value(batch.obs.flatten(0, 1),
                                                        batch.actions.flatten(0, 1))
    shape = batch.logprobs.shape
    return batch.vtrace(logprobs.view(shape), values.view(shape), agent.get_value, 0.5, 1.0, 1.0,
                        correct)


def test_the_learner_weighs_by_the_behaviour_logprobs_the_actor_stored():
    # pi(0|s) = 0.8, pi(1|s) = 0.2, V = 1. Actions [0, 1] were taken by a stale mu = [0.4, 0.8]:
    #   pi/mu = [0.8/0.4, 0.2/0.8] = [2, 0.25] -> rho = c = [1, 0.25]; TD errors 1 + 0.5 - 1 = 0.5
    #   vs_1 = 1 + 0.25*0.5 = 1.125;  vs_0 = 1 + 0.5 + 0.5*1*0.125 = 1.5625
    #   adv_0 = 1*(1 + 0.5*1.125 - 1) = 0.5625;  adv_1 = 0.25*0.5 = 0.125
    # (with the learner's own log-probabilities as mu, rho = 1: vs_0 = 1.75, adv_1 = 0.5;
    # --no-vtrace gives those too)
    batch = impala.RolloutBatch([rollout([0.0, 1.0], 2.0, np.log([0.4, 0.8]), [0, 1], 0)], "cpu")
    adv, vs = learner_targets(batch, fixed_agent())
    assert vs[:, 0].tolist() == approx([1.5625, 1.125])
    assert adv[:, 0].tolist() == approx([0.5625, 0.125])
    adv, vs = learner_targets(batch, fixed_agent(), correct=False)
    assert vs[:, 0].tolist() == approx([1.75, 1.5]) and adv[:, 0].tolist() == approx([0.75, 0.5])


# ---------------------------------------------------------------------------------------
# The actor: what it plays and with which weights
# ---------------------------------------------------------------------------------------
def test_a_rollout_keeps_the_true_final_obs_and_the_episodes_that_ended():
    # CountToThree-v0: observations 0, 1, 2, truncated at the third step (true final obs 3);
    # two environments, T = 4: the 4th step starts the next episode at 0
    actor = impala.Actor("CountToThree-v0", 2, 4, 8, env_seed=0)
    played = actor.rollout(impala.Agent((1,), 2, False, 8).state_dict(), 0)
    assert played["obs"][:, :, 0].tolist() == [[0, 0], [1, 1], [2, 2], [0, 0]]
    assert played["truncated"].tolist() == [[False] * 2, [False] * 2, [True] * 2, [False] * 2]
    assert played["final_obs"][2, :, 0].tolist() == [3, 3]
    assert played["last_obs"][:, 0].tolist() == [1, 1]
    assert not played["final_obs"][[0, 1, 3]].any() and not played["terminated"].any()
    assert played["episodes"] == [(2, 3.0, 3), (2, 3.0, 3)]
    assert played["logprobs"].dtype == np.float32 and played["rewards"].dtype == np.float32


def behaviour_matches(played, weights, agent=None):
    """Whether the log-probabilities a rollout stored are those of these weights, for its
    stored actions (the agent: CartPole's unless given)."""
    agent = agent or impala.Agent((4,), 2, False, 8)
    agent.load_state_dict(weights)
    obs, actions = (torch.from_numpy(np.array(played[key])) for key in ("obs", "actions"))
    with torch.no_grad():
        _, logprobs, _, _ = agent.get_action_and_value(obs, actions)
    return np.allclose(logprobs.numpy(), played["logprobs"], atol=1e-6)


def test_an_actor_acts_with_the_weights_whose_version_it_reports():
    actor = impala.Actor("CartPole-v1", 2, 8, 8, env_seed=0)
    old, new = (impala.Agent((4,), 2, False, 8).state_dict() for _ in range(2))
    for weights in (old, new):  # stronger logits, so that the two policies differ
        weights["actor.4.weight"].normal_(0, 1)
    first = actor.rollout(old, 3)
    kept = actor.rollout()  # no weights sent (--refresh-every): it keeps version 3's
    second = actor.rollout(new, 7)
    assert (first["version"], kept["version"], second["version"]) == (3, 3, 7)
    assert behaviour_matches(first, old) and behaviour_matches(kept, old)
    assert behaviour_matches(second, new) and not behaviour_matches(second, old)


def test_a_gaussian_rollout_stores_the_sample_its_logprob_is_of_not_the_clipped_torque():
    # Pendulum's torque is clipped to [-2, 2]; with log std 1 (std e = 2.72) around a mean
    # near 0 a sample falls outside with probability 2 * P(z > 2 / 2.72 = 0.74) = 0.46, so
    # some of the 2 x 8 do (all 16 inside: 0.54^16 = 5e-5). The rollout keeps each sample,
    # whose behaviour log-probability it stores, not the torque the environment got.
    actor = impala.Actor("Pendulum-v1", 2, 8, 8, env_seed=0)
    agent = impala.Agent((3,), 1, True, 8)
    weights = agent.state_dict()
    weights["actor_logstd"].fill_(1.0)
    played = actor.rollout(weights, 0)
    assert np.abs(played["actions"]).max() > 2
    assert behaviour_matches(played, weights, agent)


# ---------------------------------------------------------------------------------------
# The learner's loop, in this process: LocalActors plays ActorPool's part without Ray
# ---------------------------------------------------------------------------------------
class LocalActors:
    """impala.ActorPool's part played by Actor objects in this process, in --sync's order
    (requests answered first come, first served). Keeps a copy of the weights of every
    version published, and every rollout handed to the learner."""

    def __init__(self, args):
        self.actors = [impala.Actor(args.env_id, args.num_envs, args.num_steps,
                                    args.hidden_size, args.seed + k * args.num_envs)
                       for k in range(args.num_actors)]
        self.published, self.requests, self.delivered = {}, [], []

    def publish(self, agent, version):
        self.published[version] = copy.deepcopy(agent.state_dict())
        self.newest = version

    def request(self, i, refresh=True):
        self.requests.append((i, self.newest if refresh else None))

    def next(self):
        i, version = self.requests.pop(0)
        played = self.actors[i].rollout(None if version is None else self.published[version],
                                        version)
        self.delivered.append(played)
        return i, played

    def close(self):
        pass


@pytest.fixture
def local_actors(monkeypatch):
    """main() with LocalActors for its actors (and no Ray to start); yields their list."""
    made = []
    monkeypatch.setattr(impala, "starts_ray", lambda args: False)
    monkeypatch.setattr(impala, "join_ray", lambda args: args)
    monkeypatch.setattr(impala, "ActorPool",
                        lambda args: made.append(LocalActors(args)) or made[-1])
    return made


def test_the_lag_is_counted_right(tmp_path, local_actors):
    # --sync, 2 actors, one rollout a batch, weights refreshed every 2nd rollout of an actor.
    # Each actor is asked again as soon as it delivers, before the learner's step:
    #   version 0 published; a0 and a1 asked with v0 (their first rollout takes weights)
    #   a0 delivers (v0) at learner version 0: lag 0; asked again, keeps v0     -> version 1
    #   a1 (v0) at 1: lag 1; keeps v0                                           -> version 2
    #   a0 (v0) at 2: lag 2; its 3rd rollout takes the newest, v2               -> version 3
    #   a1 (v0) at 3: lag 3; takes v3                                           -> version 4
    #   a0 (v2) at 4: 2; keeps v2.  a1 (v3) at 5: 2; keeps v3.                 -> version 6
    #   a0 (v2) at 6: 4; takes v6.  a1 (v3) at 7: 4; takes v7.                 -> version 8
    #   a0 (v6) at 8: 2;  a1 (v7) at 9: 2
    args = impala.Args(total_timesteps=10 * 2 * 8, num_envs=2, num_steps=8, hidden_size=8,
                       num_actors=2, refresh_every=2, sync=True, eval_episodes=0,
                       output_dir=str(tmp_path))
    impala.main(args)
    (updates,) = [read_csv(p) for p in glob.glob(str(tmp_path / "*" / "updates.csv"))]
    assert [int(float(r["policy_lag"])) for r in updates] == [0, 1, 2, 3, 2, 2, 4, 4, 2, 2]
    assert [r["version"] for r in updates] == [str(v) for v in range(1, 11)], (
        "updates.csv: the learner's version after each of its 10 steps")
    # and the rollouts were played with the weights of the version they report
    (actors,) = local_actors
    assert [r["version"] for r in actors.delivered] == [0, 0, 0, 0, 2, 3, 2, 3, 6, 7], (
        "the versions the actors' rollouts report, worked out above")
    assert all(behaviour_matches(r, actors.published[r["version"]]) for r in actors.delivered), (
        "each rollout was played with the weights of the version it reports")


def one_actor_run(tmp_path):
    """main() at the default learning flags with one actor (LocalActors) of 2 CartPole
    environments, 4 batches of one rollout of 8 steps; returns the rows of updates.csv."""
    impala.main(impala.Args(total_timesteps=4 * 2 * 8, num_envs=2, num_steps=8, hidden_size=8,
                            num_actors=1, sync=True, eval_episodes=0, output_dir=str(tmp_path)))
    (updates,) = [read_csv(p) for p in glob.glob(str(tmp_path / "*" / "updates.csv"))]
    return updates


def test_one_actor_lags_one_update_too(tmp_path, local_actors):
    # The actor is asked for its next rollout as soon as it delivers one, before the
    # learner's step, so it plays with the weights of the step before:
    #   v0 published; rollout 1 played with v0, learned at version 0: lag 0  -> version 1
    #   rollout 2 asked before that step, so with v0, learned at 1: lag 1     -> version 2
    #   rollout 3 asked at version 1, learned at 2: lag 1; rollout 4: v2 at 3, lag 1
    assert [r["policy_lag"] for r in one_actor_run(tmp_path)] == ["0.0", "1.0", "1.0", "1.0"]
    (actors,) = local_actors
    assert [r["version"] for r in actors.delivered] == [0, 0, 1, 2]


def test_a_batchs_row_holds_the_mean_and_the_max_of_its_rollouts_lags(tmp_path, local_actors):
    # One actor, 2 rollouts a batch, asked again as soon as it delivers (before the step):
    #   v0 published; rollouts 1 and 2 played with v0 (2 asked while v0 was the newest),
    #   learned at version 0: lags [0, 0] -> mean 0, max 0                       -> version 1
    #   rollout 3 asked after that step's batch was taken, so with v0; rollout 4 with v1;
    #   learned at 1: lags [1, 0] -> mean 0.5, max 1                             -> version 2
    #   rollout 5 with v1, rollout 6 with v2, learned at 2: lags [1, 0] -> 0.5, 1
    impala.main(impala.Args(total_timesteps=3 * 2 * 2 * 8, num_envs=2, num_steps=8,
                            hidden_size=8, num_actors=1, rollouts_per_batch=2, sync=True,
                            eval_episodes=0, output_dir=str(tmp_path)))
    updates = read_csv(next(tmp_path.glob("*/updates.csv")))
    assert [float(r["policy_lag"]) for r in updates] == [0, 0.5, 0.5]
    assert [r.get("policy_lag_max") for r in updates] == ["0", "1", "1"]  # (None: no column)
    assert [int(r["global_step"]) for r in updates] == [32, 64, 96]  # 2 x 2 x 8 a batch
    (actors,) = local_actors
    assert [r["version"] for r in actors.delivered] == [0, 0, 0, 1, 1, 2]


def test_the_learner_steps_as_the_module_docstring_says(tmp_path, local_actors, monkeypatch):
    # At the default flags: Adam with eps 1e-5, the gradient's global norm clipped at 0.5 at
    # every step, and the learning rate falling linearly to 0 over the 4 updates,
    # 2e-3 * (1 - (u - 1) / 4) for u = 1, 2, 3, 4: 2e-3, 1.5e-3, 1e-3, 5e-4.
    # The clip comes before Adam's step: clip_grad_norm_ scales every gradient by
    # 0.5 / (total + 1e-6) where the global norm `total` is larger (these 4 steps' are 3.9 to
    # 5.4), so the step sees total * 0.5 / (total + 1e-6), 0.5 to within 1e-6 / 3.9 of it;
    # clipped after the step, the step would see `total` itself.
    stepped = spy_on_stepped_gradient_norms(monkeypatch)
    optimizers = spy_on(monkeypatch, impala.torch.optim, "Adam", lambda params, **k: k)
    clips = spy_on(monkeypatch, impala.nn.utils, "clip_grad_norm_", lambda params, norm: norm)
    updates = one_actor_run(tmp_path)
    assert optimizers == [{"lr": 2e-3, "eps": 1e-5}] and clips == [0.5] * 4
    assert stepped == pytest.approx([0.5] * 4, rel=1e-5)
    assert [float(r["learning_rate"]) for r in updates] == approx([2e-3, 1.5e-3, 1e-3, 5e-4])


def test_the_learner_gives_the_math_its_flags(tmp_path, local_actors, monkeypatch):
    # Each flag apart from its default and from the others, so that one that does not
    # arrive, or arrives in another's place, shows: V-trace's gamma, rho_bar and c_bar, the
    # loss's coefficients, the clip's norm, Adam's rate, kept with --no-anneal-lr, and the seed
    # (--eval-every 16 evaluates after each of the 2 rollouts of 2 x 8 = 16 steps).
    vtrace = spy_on(monkeypatch, impala, "compute_vtrace", lambda *a: a[6:9])
    losses = spy_on(monkeypatch, impala, "impala_loss", lambda **k: (k["ent_coef"], k["vf_coef"]))
    clips = spy_on(monkeypatch, impala.nn.utils, "clip_grad_norm_", lambda params, norm: norm)
    rates = spy_on(monkeypatch, impala.torch.optim, "Adam", lambda params, **k: k["lr"])
    # (the one actor's environments reset at 7 by LocalActors, a stand-in for ActorPool whose
    # seeds test_each_actor_started_seeds_its_environments_apart checks; --eval-every's two
    # evaluations and the final one at 7 + 100,000 by impala.py)
    seeds, resets = spy_on_seeds(monkeypatch, impala)
    impala.main(impala.Args(total_timesteps=2 * 2 * 8, num_envs=2, num_steps=8, hidden_size=8,
                            num_actors=1, sync=True, learning_rate=3e-3, anneal_lr=False,
                            gamma=0.9, rho_bar=1.7, c_bar=0.8, ent_coef=0.03, vf_coef=0.7,
                            max_grad_norm=0.35, seed=7, eval_episodes=2, eval_every=16,
                            output_dir=str(tmp_path)))
    assert vtrace == [(0.9, 1.7, 0.8)] * 2 and losses == [(0.03, 0.7)] * 2
    assert clips == [0.35] * 2 and rates == [3e-3] and seeds == [7]  # the learner's torch
    assert resets == [7, 100_007, 100_007, 100_007]
    updates = read_csv(next(tmp_path.glob("*/updates.csv")))
    assert [float(r["learning_rate"]) for r in updates] == [3e-3] * 2


def test_every_update_moves_every_weight_of_the_critic_and_the_actor(tmp_path, local_actors,
                                                                     monkeypatch):
    # One loss trains both networks: the loss is given the learner's values,
    # log-probabilities and entropies with their gradients (a value detached before it, the
    # critic would never learn; an entropy detached, --ent-coef's bonus would move no
    # weight), and each of the 4 steps moves every weight and bias of both MLPs, and PopArt's
    # mean and second moment of the targets, as the versions published after each step show.
    given = spy_on(monkeypatch, impala, "impala_loss", lambda **k: (
        k["values"].requires_grad, k["logprobs"].requires_grad, k["entropy"].requires_grad))
    one_actor_run(tmp_path)
    (actors,) = local_actors
    assert given == [(True, True, True)] * 4 and sorted(actors.published) == [0, 1, 2, 3, 4]
    for version in range(4):
        before, after = actors.published[version], actors.published[version + 1]
        assert {name.split(".")[0] for name in before} == {"actor", "critic", "value_mean",
                                                           "value_mean_sq"}
        assert [name for name in before if torch.equal(before[name], after[name])] == []


def test_the_value_loss_is_divided_by_the_sigma_popart_holds_at_that_step(tmp_path, local_actors,
                                                                           monkeypatch):
    # Each step's loss gets sigma as PopArt's statistics stand when it is taken: 1 at the
    # first (nu = 1, mu = 0), then the sigma that the step before logged after moving the
    # statistics (updates.csv's value_std); a loss left at its default of 1 would read 1 at
    # every step, and sigma taken after the step's own move would be one row ahead.
    sigmas = spy_on(monkeypatch, impala, "impala_loss", lambda **k: float(k.get("value_std", 1.0)))
    updates = one_actor_run(tmp_path)
    logged = [float(r["value_std"]) for r in updates]
    assert sigmas[0] == 1.0 and len(sigmas) == 4
    assert sigmas[1:] == pytest.approx(logged[:3], rel=1e-5)
    assert all(abs(sigma - 1.0) > 1e-3 for sigma in sigmas[1:])  # PopArt did move it


def test_each_actor_started_seeds_its_environments_apart():
    # --seed 7, 3 environments an actor: the k-th actor started (replacements count on) seeds
    # 7 + 3k, so 7, 10, 13: no two actors play the same episodes. ActorPool.start alone,
    # without Ray: its remote actor class stands in by one that returns the seed it is given.
    class SeedOfEachActor:
        def remote(self, env_id, num_envs, num_steps, hidden_size, env_seed):
            return env_seed

    pool = impala.ActorPool.__new__(impala.ActorPool)  # __init__ would start Ray
    pool.args, pool.started = impala.Args(seed=7, num_envs=3), 0
    pool.remote_actor = SeedOfEachActor()
    assert [pool.start() for _ in range(3)] == [7, 10, 13]


def test_episodes_are_logged_at_the_step_count_where_they_end(tmp_path, local_actors):
    # One actor of 2 CountToThree-v0 environments, rollouts of 6 steps: both environments'
    # episodes end at their 3rd and 6th steps, when 2 * 3 = 6 and 2 * 6 = 12 steps of the
    # rollout have been taken, so at global steps 6, 6, 12, 12, then 18, 18, 24, 24.
    impala.main(impala.Args(env_id="CountToThree-v0", total_timesteps=24, num_envs=2,
                            num_steps=6, hidden_size=8, num_actors=1, sync=True,
                            eval_episodes=0, output_dir=str(tmp_path)))
    (episodes,) = [read_csv(p) for p in glob.glob(str(tmp_path / "*" / "episodes.csv"))]
    assert [int(e["global_step"]) for e in episodes] == [6, 6, 12, 12, 18, 18, 24, 24]
    assert {e["episode_length"] for e in episodes} == {"3"}


def test_each_episode_is_logged_with_its_own_return_and_length(tmp_path, local_actors):
    # my_envs:EpisodeNumber-v0 pays its episode's number at each step. At --seed 0 the one
    # actor's environment 0 (seed 0, even) plays episodes of 1 step, environment 1 (seed 1,
    # odd) of 3. Over 4 rollouts of 4 steps (environment steps s = 0..15, at global step
    # 2(s + 1)), environment 0 ends its episode s + 1 at every step: return s + 1, length 1;
    # environment 1 ends its episode m at s = 3m - 1 (steps 6, 12, 18, 24, 30): return
    # 3 steps x m = 3m, length 3 (its last reward alone would be m): 16 + 5 = 21 episodes.
    impala.main(impala.Args(env_id="my_envs:EpisodeNumber-v0", total_timesteps=32,
                                      num_envs=2, num_steps=4, hidden_size=8, num_actors=1,
                                      sync=True, seed=0, eval_episodes=0,
                                      output_dir=str(tmp_path)))
    expected = []
    for s in range(16):
        expected.append((2 * (s + 1), s + 1, 1))
        if s % 3 == 2:  # environment 1's episode m = (s + 1) / 3
            expected.append((2 * (s + 1), 3 * ((s + 1) // 3), 3))
    episodes = read_csv(next(tmp_path.glob("*/episodes.csv")))
    assert [(int(e["global_step"]), float(e["episode_return"]), int(e["episode_length"]))
            for e in episodes] == expected


@pytest.mark.parametrize("vtrace", [True, False])
def test_the_learner_gives_vtrace_the_stored_logprobs_under_its_current_policy(
        vtrace, tmp_path, local_actors, monkeypatch):
    # 2 actors in turn, 2 rollouts a batch: each batch's log rho must be the learner's
    # current log pi (recomputed here from the weights it had published before its k-th step,
    # version k) minus the behaviour log mu the actors stored; with --no-vtrace, log rho = 0.
    # The batch's columns are its two rollouts side by side. Logged with each update: the
    # mean of rho = pi / mu and the fraction of rho above --rho-bar, here 1.005 (not the
    # default 1, nor c_bar's 1), which some of the stale batches' ratios pass and some not;
    # and the explained variance 1 - Var[vs - V] / Var[vs] (unbiased variances) of the values V
    # given to V-trace and the targets vs it returned (the advantages in vs's place, which
    # test_contract's critic of equal values cannot tell from vs, give another number here).
    seen, fractions, targets = [], [], []
    original = impala.compute_vtrace
    signature = inspect.signature(original)

    def spy(*args, **kwargs):
        arguments = signature.bind(*args, **kwargs).arguments
        advantages, vs = original(*args, **kwargs)
        seen.append(arguments["log_rhos"].clone())
        targets.append((arguments["values"].flatten().numpy().copy(), vs.flatten().numpy().copy()))
        return advantages, vs
    monkeypatch.setattr(impala, "compute_vtrace", spy)
    args = impala.Args(total_timesteps=3 * 2 * 2 * 4, num_envs=2, num_steps=4, hidden_size=8,
                       num_actors=2, rollouts_per_batch=2, sync=True, vtrace=vtrace,
                       rho_bar=1.005, eval_episodes=0, output_dir=str(tmp_path))
    impala.main(args)
    (actors,) = local_actors
    assert len(seen) == 3 and len(actors.delivered) == 6
    updates = read_csv(next(tmp_path.glob("*/updates.csv")))
    for k, log_rhos in enumerate(seen):
        rollouts = actors.delivered[2 * k:2 * k + 2]
        agent = impala.Agent((4,), 2, False, 8)
        agent.load_state_dict(actors.published[k])  # the learner's weights at its k-th step
        obs = torch.from_numpy(np.concatenate([r["obs"] for r in rollouts], 1))
        actions = torch.from_numpy(np.concatenate([r["actions"] for r in rollouts], 1))
        behaviour = torch.from_numpy(np.concatenate([r["logprobs"] for r in rollouts], 1))
        with torch.no_grad():
            _, current, _, _ = agent.get_action_and_value(obs, actions)
        expected = current - behaviour if vtrace else torch.zeros_like(behaviour)
        assert torch.allclose(log_rhos, expected, atol=1e-6)
        assert (k == 0) or not vtrace or log_rhos.abs().max() > 1e-4  # stale: not on-policy
        rho = (current - behaviour).exp()  # (a ratio within 1e-5 of the bar may go either way)
        assert float(updates[k]["rho_mean"]) == pytest.approx(rho.mean().item(), abs=1e-6)
        fractions.append(float(updates[k]["rho_clipped"]))
        values, vs = targets[k]
        assert float(updates[k]["explained_variance"]) == pytest.approx(
            1 - np.var(vs - values, ddof=1) / np.var(vs, ddof=1), abs=1e-5)
        assert (rho > 1.005 + 1e-5).float().mean() <= fractions[-1] <= \
            (rho > 1.005 - 1e-5).float().mean()
    assert fractions[0] == 0 and any(0 < f < 1 for f in fractions[1:])


def test_eval_every_evaluates_where_the_step_count_crosses_a_multiple(tmp_path, local_actors):
    # 1 actor of 2 environments, rollouts of 8 steps: global_step goes 16, 32, ..., 96, and
    # --eval-every 40 is crossed between 32 and 48 (40) and reached at 80; the next multiple,
    # 120, lies past the budget: rows at 48 and 80. Only where a step count is a multiple of
    # 40 would be 80 alone.
    impala.main(impala.Args(total_timesteps=96, num_envs=2, num_steps=8, hidden_size=8,
                            num_actors=1, sync=True, eval_every=40, eval_episodes=1,
                            output_dir=str(tmp_path)))
    rows = read_csv(next(tmp_path.glob("*/evaluations.csv")))
    assert [int(r["global_step"]) for r in rows] == [48, 80]


def test_the_evaluation_plays_the_greedy_action():
    # GridWorld-v0 (tests/my_envs.py) with logits 2 for right, 2.1 for up, -10 for left and
    # down: greedily the agent goes up to (0, 3) and stays, never reaches (3, 3), and its
    # time limit ends each episode at 20 steps of -1: returns -20. Sampled, it would go right
    # with probability e^2 / (e^2 + e^2.1) = 0.475 and reach the corner sooner.
    agent = impala.Agent((2,), 4, False, 8)
    with torch.no_grad():
        agent.actor[4].weight.zero_()
        agent.actor[4].bias.copy_(torch.tensor([2.0, 2.1, -10.0, -10.0]))
    returns = impala.evaluate(impala.Args(env_id="my_envs:GridWorld-v0", eval_episodes=4),
                              {"agent": agent})
    assert returns.tolist() == [-20.0] * 4


@pytest.mark.parametrize("env_id, obs_dtype", [("Pendulum-v1", np.float32),
                                               ("MinAtar/Breakout-v1", np.float32)])
def test_continuous_actions_and_images_learn_through_the_same_loop(env_id, obs_dtype, tmp_path,
                                                                   local_actors, monkeypatch):
    # Pendulum: Gaussian actions, stored unclipped as float32 [T, N, 1]; MinAtar: 10 x 10 x 4
    # boolean frames sent as float32 to the convolutional network, an image's (the GPU where
    # one is present, without a flag)
    if env_id.startswith("MinAtar/"):
        pytest.importorskip("minatar", reason="pip install minatar==1.0.15")
    image = spy_on(monkeypatch, impala, "seed_and_device",
                   lambda seed, cuda=None, threads=1, image=False: image)
    args = impala.Args(env_id=env_id, total_timesteps=2 * 2 * 8, num_envs=2, num_steps=8,
                       rollouts_per_batch=1, num_actors=1, sync=True, eval_episodes=1,
                       output_dir=str(tmp_path))
    summary = impala.main(args)
    (actors,) = local_actors
    played = actors.delivered[0]
    assert played["obs"].dtype == obs_dtype and played["obs"].shape[:2] == (8, 2)
    if env_id == "Pendulum-v1":
        assert played["actions"].shape == (8, 2, 1) and played["actions"].dtype == np.float32
    else:
        assert played["obs"].shape[2:] == (10, 10, 4) and isinstance(
            actors.actors[0].agent.encoder, impala.ImageEncoder)
    assert summary["global_steps"] == 32 and summary["eval_return_mean"] is not None
    assert image == [env_id != "Pendulum-v1"]


@pytest.mark.parametrize("dtype, top, scaled", [(np.uint8, 255, True), (np.uint8, 1, False),
                                               (bool, 1, False)])
def test_the_agent_scales_only_0_to_255_pixels(dtype, top, scaled):
    # make_agent builds the actors' and the learner's agents. Bytes whose Box tops out at 255
    # are pixels, divided by 255; MinAtar's 0/1 cells, declared bool (PyPI) or uint8 with a
    # top of 1 (its GitHub code), are read as they are.
    space = impala.gym.spaces.Box(0, top, (10, 10, 2), dtype=dtype)
    agent = impala.make_agent(space, impala.gym.spaces.Discrete(3), 8)
    assert agent.encoder.uint8 is scaled


def test_stop_at_return_stops_and_nan_loss_stops_cleanly(tmp_path, local_actors, monkeypatch,
                                                         capsys):
    args = impala.Args(total_timesteps=4000, num_envs=4, num_steps=16, hidden_size=8,
                       num_actors=1, sync=True, eval_episodes=0, stop_at_return=5.0,
                       output_dir=str(tmp_path / "stop"))
    summary = impala.main(args)
    assert summary["solved_at_step"] == summary["global_steps"] < 4000
    nan = torch.tensor(float("nan"), requires_grad=True)
    monkeypatch.setattr(impala, "impala_loss", lambda **k: (nan, nan, nan, nan))
    summary = impala.main(replace(args, stop_at_return=None, output_dir=str(tmp_path / "nan")))
    assert summary["interrupted"] is True and summary["global_steps"] == 64
    assert "the loss became non-finite (NaN or inf) at step 64" in capsys.readouterr().out


def test_a_plain_run_records_the_environments_threshold_and_trains_its_whole_budget(
        tmp_path, local_actors):
    # my_envs:ThreeSteps-v0 pays 1 a step and is cut at 3 steps (reward_threshold 3). One
    # actor of 2 environments, rollouts of 8 steps (16 global steps): a pair of episodes ends
    # every 2 x 3 = 6 steps, so the 20th episode ends with the 10th pair at step 60, inside
    # the 4th rollout (steps 48 to 64). Without --stop-at-return the run records 60 and trains
    # on to its budget, 8 rollouts, 128 steps; stopped by the environment's threshold it
    # would end after that rollout, at 64.
    summary = impala.main(impala.Args(env_id="my_envs:ThreeSteps-v0", total_timesteps=128,
                                      num_envs=2, num_steps=8, hidden_size=8, num_actors=1,
                                      sync=True, eval_episodes=0, output_dir=str(tmp_path)))
    assert summary["solved_threshold"] == 3.0 and summary["solved_at_step"] == 60
    assert summary["global_steps"] == 128
    assert len(read_csv(next(tmp_path.glob("*/updates.csv")))) == 8


# One actor of 2 environments, rollouts of 3 steps: one batch of 6 steps, the 6 steps of
# conftest's checks
ONE_BATCH_OF_SIX = dict(num_envs=2, num_steps=3, num_actors=1, sync=True)


def test_an_evaluation_of_a_checkpoint_trains_nothing(tmp_path, local_actors, capsys):
    # the evaluation's --rollouts-per-batch 2: a batch of 128 steps, over its budget of 101
    check_an_evaluation_trains_nothing(impala, tmp_path, capsys, tiny=ONE_BATCH_OF_SIX,
                                       rollouts_per_batch=2)
    assert local_actors == [local_actors[0]]  # the training run's actors; none to evaluate


def test_the_budget_is_whole_batches(tmp_path, local_actors):
    # --total-timesteps 40, batches of 2 rollouts of 2 environments * 4 steps = 16 steps:
    # 40 // 16 = 2 batches, 32 steps; 2 rows in updates.csv
    summary = impala.main(impala.Args(total_timesteps=40, num_envs=2, num_steps=4,
                                      rollouts_per_batch=2, hidden_size=8, num_actors=1,
                                      sync=True, eval_episodes=0, output_dir=str(tmp_path)))
    assert summary["global_steps"] == 32
    assert len(read_csv(next(tmp_path.glob("*/updates.csv")))) == 2


def test_a_run_stops_only_the_ray_it_started(tmp_path, monkeypatch):
    # No --ray-address and no Ray in this process: the run starts Ray (join_ray, given the
    # flag) and stops it at the end; --ray-address auto joins a cluster, which it must leave
    # running. Ray's start and stop stand in for by records, the actors by LocalActors.
    ray = pytest.importorskip("ray", reason="impala.py's actors need Ray: pip install ray==2.60.0")
    monkeypatch.setattr(ray, "is_initialized", lambda: False)
    joined = spy_on(monkeypatch, impala, "join_ray", lambda args: args.ray_address)
    monkeypatch.setattr(impala, "start_ray", lambda address: 2)
    stopped = []
    monkeypatch.setattr(impala, "stop_ray", lambda: stopped.append(len(joined)))
    monkeypatch.setattr(impala, "ActorPool", LocalActors)
    for address in (None, "auto"):
        impala.main(impala.Args(ray_address=address, total_timesteps=6, **ONE_BATCH_OF_SIX,
                                hidden_size=8, eval_episodes=0,
                                output_dir=str(tmp_path / str(address))))
    assert joined == [None, "auto"] and stopped == [1]  # after the first run only


# ---------------------------------------------------------------------------------------
# Runs on a local Ray: Ctrl-C while Ray starts, --sync twice, the smoke run, a killed actor
# ---------------------------------------------------------------------------------------
def live_processes(session):
    """The processes of a session (a command started with start_new_session) that are still
    running, zombies aside, as ps lists them: "pid command" lines."""
    listed = subprocess.run(["ps", "-eo", "sid=,stat=,pid=,args="], capture_output=True,
                            text=True, check=True).stdout
    return [" ".join(line.split()[2:]) for line in listed.splitlines()
            if line.split()[:1] == [str(session)] and not line.split()[1].startswith("Z")]


@pytest.mark.slow  # a real process starting Ray
def test_ctrl_c_while_ray_starts_leaves_no_process_behind(tmp_path):
    # python impala.py with a Ray of its own says "starting Ray ..." at once, after the
    # device's line (prepare chooses the device before Ray starts). Ctrl-C (SIGINT
    # to the whole command, as a terminal sends it) comes once the raylet has started its
    # agents, inside ray.init: impala.py holds it back until Ray has started, stops Ray and
    # dies of SIGINT (130 in a shell; a Popen's returncode says -SIGINT). A few seconds later
    # no process of the command runs: let through at once, the interrupt left the raylet's
    # dashboard and runtime-env agents running, orphaned, for about a minute.
    pytest.importorskip("ray", reason="impala.py's actors need Ray: pip install ray==2.60.0")
    command = start_in_a_terminal([sys.executable, impala.__file__, "--output-dir", str(tmp_path)])
    deadline = time.time() + 60
    while (not any("agent" in p.lower() for p in live_processes(command.pid))
           and time.time() < deadline):
        time.sleep(0.05)
    out, err = ctrl_c(command)
    assert command.returncode == -signal.SIGINT, err
    deadline = time.time() + 5
    while live_processes(command.pid) and time.time() < deadline:
        time.sleep(0.1)
    assert live_processes(command.pid) == []
    lines = out.splitlines()
    assert lines[0].startswith("impala.py: device ")
    assert lines[1:3] == ["impala.py: starting Ray ...", "impala.py: Ctrl-C: stopping once Ray "
                          "has started, in a few seconds (Ctrl-C again stops at once, and Ray's "
                          "processes can outlive the run by a minute)"]
    assert "Traceback" not in err


def test_the_ray_tests_go_to_one_worker_in_xdists_group(request):
    """Under `pytest -n 2 --dist loadgroup` (either tier), conftest puts every test that uses
    Ray in xdist's group "ray", which one worker runs, so that two Rays never start at once
    and a module's tests share its ray_session: the group ends the test's id. With pytest 9.2
    and pytest-xdist 3.8 the group is dropped, silently (xdist's issue 1386)."""
    if not request.config.getoption("loadgroup", False):  # xdist's worker under loadgroup
        pytest.skip("the groups exist under pytest -n 2 --dist loadgroup alone")
    assert request.node.nodeid.endswith("@ray"), request.node.nodeid


SYNC_RUN = impala.Args(total_timesteps=12 * 2 * 16, num_envs=2, num_steps=16, hidden_size=8,
                       num_actors=2, sync=True, eval_episodes=2, save_model=True)


@pytest.mark.slow  # real Ray actors
def test_sync_gives_the_same_episodes_twice_and_the_run_writes_every_file(
        tmp_path, ray_session, check_run_folder, monkeypatch):
    published = {}
    publish = impala.ActorPool.publish
    monkeypatch.setattr(impala.ActorPool, "publish", lambda self, agent, version: published.update(
        {version: copy.deepcopy(agent.state_dict())}) or publish(self, agent, version))
    delivered, next_rollout = [], impala.ActorPool.next

    def spy_next(self):
        got = next_rollout(self)
        delivered.append(got[1])
        return got
    monkeypatch.setattr(impala.ActorPool, "next", spy_next)
    summaries = []
    rows = same_seed_episodes(
        lambda out: summaries.append(impala.main(replace(SYNC_RUN, output_dir=out))), tmp_path)
    assert len(rows) > 5
    path, episodes, updates = check_run_folder(summaries[0], tmp_path / "a", "impala", model=True)
    assert summaries[0]["global_steps"] == 12 * 2 * 16 and len(updates) == 12
    # in turn, each actor asked again before the learner's step: lags 0, 1, then 2 (as many
    # as the actors) on every batch
    assert [r["policy_lag"] for r in updates] == ["0.0", "1.0"] + ["2.0"] * 10
    # the Ray actors acted with the weights of the version they reported
    assert [r["version"] for r in delivered[:6]] == [0, 0, 0, 1, 2, 3]
    assert all(behaviour_matches(r, published[r["version"]]) for r in delivered)
    # the saved model evaluates to the run's final evaluation (no Ray needed)
    again = impala.main(replace(SYNC_RUN, eval_checkpoint=path, output_dir=str(tmp_path / "eval")))
    assert again["eval_return_mean"] == summaries[0]["eval_return_mean"]


@pytest.mark.slow  # real Ray actors
def test_a_killed_actor_is_replaced_and_the_run_goes_on(tmp_path, ray_session, monkeypatch,
                                                        capsys):
    # One actor, killed as it is asked for its 3rd rollout: the rollout is lost, a new
    # actor (the 2nd started) takes its place and plays it, and the run ends at its budget.
    # The new actor plays it with the newest weights and reports their version: asked again
    # before each step, the actor lags 1 update, but the lost 3rd rollout (asked at version
    # 1) is asked of the new actor once the learner has taken its 2nd step, so it is played
    # with version 2 and learned at 2: lags 0, 1, 0, then 1 for the other 9 of 12 updates.
    request, asked = impala.ActorPool.request, []

    def kill_then_request(self, i, refresh=True):
        asked.append(i)
        if len(asked) == 3:
            ray_session.kill(self.actors[i])
            deadline = time.time() + 30
            while time.time() < deadline:  # ray.kill takes effect soon, not at once
                try:
                    ray_session.get(self.actors[i].rollout.remote(), timeout=30)
                except ray_session.exceptions.RayActorError:
                    break
        return request(self, i, refresh)

    monkeypatch.setattr(impala.ActorPool, "request", kill_then_request)
    versions, next_rollout = [], impala.ActorPool.next

    def next_with_its_version(self):  # checked as it comes: a None would stop the run first
        i, played = next_rollout(self)
        versions.append(played["version"])
        assert played["version"] is not None, f"rollout {len(versions)} has no version"
        return i, played

    monkeypatch.setattr(impala.ActorPool, "next", next_with_its_version)
    started = []
    start = impala.ActorPool.start
    monkeypatch.setattr(impala.ActorPool, "start",
                        lambda self: started.append(self.started) or start(self))
    summary = impala.main(replace(SYNC_RUN, num_actors=1, save_model=False, eval_episodes=0,
                                  output_dir=str(tmp_path)))
    err = capsys.readouterr().err
    assert err.startswith("impala.py: warning: actor 0 died (") and err.count("\n") == 1
    assert err.endswith("); a new one takes its place\n")
    assert started == [0, 1] and summary["global_steps"] == 12 * 2 * 16
    assert not summary["interrupted"] and versions[:4] == [0, 0, 2, 2]
    updates = read_csv(glob.glob(str(tmp_path / "*" / "updates.csv"))[0])
    assert [r["policy_lag"] for r in updates] == ["0.0", "1.0", "0.0"] + ["1.0"] * 9


# ---------------------------------------------------------------------------------------
# Bad input
# ---------------------------------------------------------------------------------------
@pytest.mark.parametrize("argv, message", [
    (["--num-actors", "0"], "--num-actors must be positive, got 0"),
    (["--rollouts-per-batch", "0"], "--rollouts-per-batch must be positive"),
    (["--refresh-every", "-1"], "--refresh-every must be positive"),
    (["--gamma", "1.5"], "--gamma must be in [0, 1], got 1.5"),
    (["--total-timesteps", "100"], "--total-timesteps 100 is less than one batch "
     "(rollouts_per_batch*num_envs*num_steps = 256)"),
    (["--env-id", "ALE/Breakout-v5"], "impala.py does not preprocess Atari frames; ppo.py and "
     "dqn.py train ALE/Breakout-v5"),
    (["--env-id", "SpinTheBits-v0"], "impala.py handles Discrete and flat Box actions"),
    (["--env-id", "FrozenLake-v1"], "Discrete observation space of shape (); impala.py needs "
     "a flat Box or an image Box"),
    (["--ray-address", "127.0.0.1:1"], "cannot reach the Ray cluster at 127.0.0.1:1"),
])
def test_bad_input_is_one_line_and_exit_status_2(argv, message, check_usage_error):
    check_usage_error("impala.py", argv, message)


@pytest.mark.parametrize("shape, message", [
    ((2, 2), "has a Box observation space of shape (2, 2); impala.py needs a flat Box or an "
     "image Box (H x W x C, channels last"),
    ((10, 2, 4), "has images of shape (10, 2, 4); the smallest convolution needs 3 x 3 pixels"),
])
def test_the_spaces_that_the_networks_cannot_take_are_bad_input(shape, message):
    # check_spaces, which the plumbing's check_env hands the spaces: a 2-D frame has no
    # channel axis, and an image narrower than the encoder's first 3 x 3 kernel cannot pass
    # it; a 3 x 3 x 4 image and a flat Box are taken, the spaces returned for the networks.
    box = lambda shape: gym.spaces.Box(0.0, 1.0, shape)
    with pytest.raises(impala.UsageError, match=re.escape(message)):
        impala.check_spaces(impala.Args(), box(shape), gym.spaces.Discrete(2))
    for taken in ((3, 3, 4), (5,)):
        assert impala.check_spaces(impala.Args(), box(taken), gym.spaces.Discrete(2)) == (
            box(taken), gym.spaces.Discrete(2))


def test_popart_sigma_is_kept_between_1e_4_and_1e6():
    # sigma = sqrt(nu - mu^2): mu 0, nu 1e14 -> 1e7, kept at 1e6; mu 1, nu 5 -> 2 as it is;
    # nu a rounding below mu^2 (3, 8.9999: nu - mu^2 < 0, whose root is NaN) -> 1e-4, a number
    std = lambda mu, nu: impala.popart_std(torch.tensor(mu), torch.tensor(nu)).item()
    assert std(0.0, 1e14) == approx(1e6)
    assert std(1.0, 5.0) == approx(2.0)
    assert std(3.0, 8.9999) == approx(1e-4)

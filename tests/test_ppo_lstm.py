"""Tests of ppo_lstm.py: the chunk generators and the unroll by hand, what the rollout stores
and what the update feeds the LSTM (the glue), its hooks (its own checks, its greedy policy
with its state, its model's flags), runs end to end, its own bad input, determinism. The
plumbing's behaviour (--help, the common bad input, Ctrl-C, the run folder, the progress
line, --eval-every's rows, videos) is tests/test_plumbing.py's."""
import json
import math
import os

import gymnasium as gym
import numpy as np
import pytest
import torch

import ppo_lstm
from conftest import (CountingEnv, check_an_evaluation_trains_nothing,
                      check_every_evaluation_reads_the_running_statistics_and_leaves_them_alone,
                      check_the_epochs_kl_and_clipfrac, detached, read_csv, received_actions,
                      same_seed_episodes, spy_on, spy_on_adam, spy_on_seeds,
                      spy_on_stepped_gradient_norms, spy_on_weights)

# Episodes of 5 steps cut by a time limit: observations 0, 1, 2, 3, 4, then the fifth step
# (from observation 4) is truncated with the true final observation 5.
gym.register("CountToFive-v0", entry_point=CountingEnv, max_episode_steps=5)


def column(*values):
    """A [T, 1] tensor: one environment's values over T steps."""
    return torch.tensor(values, dtype=torch.float32).unsqueeze(1)


# ---------------------------------------------------------------------------------------
# GAE by hand: three steps of one environment, gamma = 0.9, lambda = 0.5 (gamma * lambda =
# 0.45), rewards [1, 0, 2], values V(s_t) = [1, 2, 1].
# ---------------------------------------------------------------------------------------
REWARDS, VALUES = column(1, 0, 2), column(1, 2, 1)
NO_END, END_AT_1 = column(0, 0, 0), column(0, 1, 0)


def test_gae_without_episode_end():
    # next_values = [2, 1, 3] (V(s_3) = 3 after the rollout)
    # delta = [1 + 0.9*2 - 1, 0 + 0.9*1 - 2, 2 + 0.9*3 - 1] = [1.8, -1.1, 3.7]
    # A_2 = 3.7;  A_1 = -1.1 + 0.45*3.7 = 0.565;  A_0 = 1.8 + 0.45*0.565 = 2.05425
    adv, ret = ppo_lstm.compute_gae(REWARDS, VALUES, column(2, 1, 3), NO_END, NO_END, 0.9, 0.5)
    assert torch.allclose(adv, column(2.05425, 0.565, 3.7))
    assert torch.allclose(ret, column(3.05425, 2.565, 4.7))


def test_gae_termination_does_not_bootstrap_and_truncation_does():
    # Step 1 ends the episode; next_values[1] = 5 is V(final obs) when truncated.
    # terminated: delta_1 = 0 + 0 - 2 = -2;     truncated: delta_1 = 0 + 0.9*5 - 2 = 2.5
    # either way A_1 = delta_1 (the episode ended) and A_2 = 3.7 as above, so
    # terminated: A_0 = 1.8 + 0.45*(-2) = 0.9;  truncated: A_0 = 1.8 + 0.45*2.5 = 2.925
    next_values = column(2, 5, 3)
    adv, _ = ppo_lstm.compute_gae(REWARDS, VALUES, next_values, END_AT_1, NO_END, 0.9, 0.5)
    assert torch.allclose(adv, column(0.9, -2.0, 3.7))
    adv, _ = ppo_lstm.compute_gae(REWARDS, VALUES, next_values, NO_END, END_AT_1, 0.9, 0.5)
    assert torch.allclose(adv, column(2.925, 2.5, 3.7))


def test_buffer_gae_takes_final_values_where_truncated_and_last_value_after():
    # T = 3, one environment truncated at step 1: next_values = [V1, final_values[1], last]
    # = [2, 5, 3], so the advantages are the truncated case above.
    buffer = ppo_lstm.RolloutBuffer(3, 1, (1,), (), False, 4, "cpu")
    buffer.rewards, buffer.values = REWARDS.clone(), VALUES.clone()
    buffer.truncated = END_AT_1.bool()
    buffer.final_values[1, 0] = 5.0
    buffer.last_value = torch.tensor([3.0])
    advantages, _ = buffer.gae(0.9, 0.5)
    assert torch.allclose(advantages, column(2.925, 2.5, 3.7))


# ---------------------------------------------------------------------------------------
# The chunk generators by hand
# ---------------------------------------------------------------------------------------
def chunks_of(generator):
    """Each chunk a minibatch holds, as (environment, [its steps])."""
    return [[(int(envs[0, c]), steps[:, c].tolist()) for c in range(steps.shape[1])]
            for steps, envs in generator]


def test_chunks_cut_each_environments_rollout_into_consecutive_steps():
    # T = 6, N = 2, L = 2: chunk c = n*3 + k holds steps 2k, 2k+1 of environment n:
    #   0: (0, [0, 1])  1: (0, [2, 3])  2: (0, [4, 5])
    #   3: (1, [0, 1])  4: (1, [2, 3])  5: (1, [4, 5])
    # With a seeded generator the chunks come in the order of torch.randperm(6) with the
    # same seed, three to a minibatch (2 minibatches).
    every = [(0, [0, 1]), (0, [2, 3]), (0, [4, 5]), (1, [0, 1]), (1, [2, 3]), (1, [4, 5])]
    order = torch.randperm(6, generator=torch.Generator().manual_seed(3)).tolist()
    minibatches = chunks_of(ppo_lstm.recurrent_generator(6, 2, 2, 2,
                                                         torch.Generator().manual_seed(3)))
    assert minibatches == [[every[c] for c in order[:3]], [every[c] for c in order[3:]]]


def test_naive_generator_feeds_whole_rollouts():
    # T = 3, N = 4, 2 minibatches: each environment's whole rollout [0, 1, 2] is one sequence
    minibatches = chunks_of(ppo_lstm.naive_recurrent_generator(3, 4, 2))
    assert [len(m) for m in minibatches] == [2, 2], "2 minibatches of 2 whole rollouts each"
    assert sorted(sum(minibatches, [])) == [(n, [0, 1, 2]) for n in range(4)]


def test_generator_slices_the_buffer_time_first():
    # buffer.x[steps, envs] is [L, C]: with x[t, n] = 10 t + n, the chunk (1, [2, 3]) gives the
    # column [21, 31] and the first row steps[0], envs[0] picks x[2, 1] = 21.
    x = torch.arange(6).unsqueeze(1) * 10 + torch.arange(2)
    for steps, envs in ppo_lstm.recurrent_generator(6, 2, 2, 1):
        for c in range(steps.shape[1]):
            t0, n = int(steps[0, c]), int(envs[0, c])
            assert x[steps, envs][:, c].tolist() == [10 * t0 + n, 10 * (t0 + 1) + n]
            assert x[steps[0], envs[0]][c] == 10 * t0 + n


# ---------------------------------------------------------------------------------------
# The unroll
# ---------------------------------------------------------------------------------------
def test_unroll_without_episode_starts_equals_the_lstm_on_the_whole_sequence():
    torch.manual_seed(0)
    lstm = torch.nn.LSTM(3, 4)
    x, h0, c0 = torch.randn(5, 2, 3), torch.randn(2, 4), torch.randn(2, 4)
    outputs, (h, c) = ppo_lstm.unroll(lstm, x, (h0, c0), torch.zeros(5, 2))
    expected, (h_n, c_n) = lstm(x, (h0.unsqueeze(0), c0.unsqueeze(0)))
    assert torch.allclose(outputs, expected, atol=1e-6)
    assert torch.allclose(h, h_n[0], atol=1e-6) and torch.allclose(c, c_n[0], atol=1e-6)


def test_unroll_resets_at_an_episode_start_inside_the_chunk():
    # A chunk of 4 steps whose step 2 starts a new episode, from a nonzero state: from step
    # 2 on, the outputs are those of the new episode unrolled alone from zeros.
    torch.manual_seed(1)
    lstm = torch.nn.LSTM(3, 4)
    x, state = torch.randn(4, 1, 3), (torch.randn(1, 4), torch.randn(1, 4))
    starts = column(0, 0, 1, 0)
    outputs, _ = ppo_lstm.unroll(lstm, x, state, starts)
    alone, _ = ppo_lstm.unroll(lstm, x[2:], (torch.zeros(1, 4), torch.zeros(1, 4)),
                               torch.zeros(2, 1))
    assert torch.allclose(outputs[2:], alone, atol=1e-6)
    before, _ = ppo_lstm.unroll(lstm, x[:2], state, torch.zeros(2, 1))
    assert torch.allclose(outputs[:2], before, atol=1e-6)
    assert not torch.allclose(outputs[2], before[1], atol=1e-3), (  # the reset changed something
        "premise: the reset at step 2 changes the output, so the test tells a reset from none")


def test_a_start_at_the_first_step_ignores_the_stored_state():
    torch.manual_seed(2)
    lstm = torch.nn.LSTM(3, 4)
    x = torch.randn(2, 1, 3)
    from_state, _ = ppo_lstm.unroll(lstm, x, (torch.randn(1, 4), torch.randn(1, 4)), column(1, 0))
    from_zeros, _ = ppo_lstm.unroll(lstm, x, (torch.zeros(1, 4), torch.zeros(1, 4)), column(0, 0))
    assert torch.allclose(from_state, from_zeros, atol=1e-6)


def test_evaluating_a_chunk_equals_acting_one_step_at_a_time():
    # The update's batched pass over a chunk gives the log-probabilities and values that
    # acting step by step (the rollout's path) gave, resets included.
    torch.manual_seed(3)
    agent = ppo_lstm.Agent(2, 3, continuous=False, hidden_size=8, lstm_hidden_size=5)
    obs, starts = torch.randn(6, 2, 2), torch.tensor([[1, 1], [0, 0], [0, 1], [1, 0],
                                                      [0, 0], [0, 0]], dtype=torch.float32)
    state = agent.initial_state(2, "cpu")
    actions, logprobs, values = [], [], []
    with torch.no_grad():
        for t in range(6):
            action, logprob, value, state = agent.step(obs[t], state, starts[t])
            actions.append(action), logprobs.append(logprob), values.append(value)
        new_logprobs, _, new_values = agent.evaluate(obs, torch.stack(actions),
                                                     agent.initial_state(2, "cpu"), starts)
    assert torch.allclose(new_logprobs, torch.stack(logprobs), atol=1e-6)
    assert torch.allclose(new_values, torch.stack(values), atol=1e-6)


def test_each_head_reads_its_own_tower_from_its_own_state():
    # By hand with the layers themselves, one step from a state whose actor half (index 0)
    # and critic half (index 1) differ: the logits are the actor head's on the actor LSTM's
    # output over the actor encoder's features, from the actor's state; the value the
    # critic's on its own tower from its own state; the new state holds each LSTM's own.
    torch.manual_seed(0)
    agent = ppo_lstm.Agent(1, 2, False, hidden_size=8, lstm_hidden_size=4)
    obs, starts = torch.tensor([[0.7]]), torch.zeros(1)
    h, c = torch.randn(1, 2, 4), torch.randn(1, 2, 4)
    with torch.no_grad():
        towers = [(agent.actor_encoder, agent.actor_lstm),
                  (agent.critic_encoder, agent.critic_lstm)]
        outs, states = [], []
        for i, (encoder, lstm) in enumerate(towers):
            out, state = lstm(encoder(obs).unsqueeze(0), (h[:, i].unsqueeze(0),
                                                          c[:, i].unsqueeze(0)))
            outs.append(out[0])
            states.append(state)
        logits, value = agent.actor(outs[0]), agent.critic(outs[1])[:, 0]
        action, logprob, stepped_value, (new_h, new_c) = agent.step(obs, (h, c), starts)
        new_logprob, _, new_value = agent.evaluate(obs.unsqueeze(0), action.unsqueeze(0), (h, c),
                                                   starts.unsqueeze(0))
    assert torch.allclose(logprob, torch.log_softmax(logits, -1)[0, action], atol=1e-6)
    assert torch.allclose(stepped_value, value, atol=1e-6)
    assert torch.allclose(new_logprob[0], logprob, atol=1e-6)
    assert torch.allclose(new_value[0], value, atol=1e-6)
    assert torch.allclose(agent.bootstrap_value(obs, (h, c), starts), value, atol=1e-6)
    for i, (state_h, state_c) in enumerate(states):
        assert torch.allclose(new_h[:, i], state_h[0], atol=1e-6)
        assert torch.allclose(new_c[:, i], state_c[0], atol=1e-6)
    # the critic's half is not the actor's: a mix-up of the two would show
    assert not torch.allclose(states[0][0], states[1][0], atol=1e-3)


# ---------------------------------------------------------------------------------------
# The glue: what the rollout stores and what the update feeds the LSTM
# ---------------------------------------------------------------------------------------
@pytest.fixture
def one_update(tmp_path, monkeypatch):
    """One update (T = 8, N = 2, L = 4) on CountToFive-v0, spied on (spied_updates)."""
    return spied_updates(tmp_path, monkeypatch, total_timesteps=16, num_steps=8)


def spied_updates(tmp_path, monkeypatch, **flags):
    """Updates of N = 2 environments on CountToFive-v0 in chunks of L = 4, spied on: returns
    the agent with the weights the first rollout acted with, the buffer as it was when GAE
    last ran, each minibatch's chunk indices and each state the updates gave the LSTM."""
    seen = {"chunks": [], "states": []}
    original_gae, original_evaluate = ppo_lstm.RolloutBuffer.gae, ppo_lstm.Agent.evaluate
    original_generator = ppo_lstm.recurrent_generator

    def gae(self, *args):
        seen["buffer"] = {k: v.clone() for k, v in vars(self).items()}
        return original_gae(self, *args)

    def evaluate(self, obs, actions, state, starts):
        seen["agent"] = self
        seen["states"].append((state[0].clone(), state[1].clone()))
        return original_evaluate(self, obs, actions, state, starts)

    def generator(*args):
        for steps, envs in original_generator(*args):
            seen["chunks"].append((steps, envs))
            yield steps, envs

    monkeypatch.setattr(ppo_lstm.RolloutBuffer, "gae", gae)
    monkeypatch.setattr(ppo_lstm.Agent, "evaluate", evaluate)
    monkeypatch.setattr(ppo_lstm, "recurrent_generator", generator)
    initial = {}
    original_init = ppo_lstm.Agent.__init__

    def init(self, *args, **kwargs):
        original_init(self, *args, **kwargs)
        if not initial:  # the training agent, the first one made
            initial.update({k: v.clone() for k, v in self.state_dict().items()})

    monkeypatch.setattr(ppo_lstm.Agent, "__init__", init)
    ppo_lstm.main(ppo_lstm.Args(env_id="CountToFive-v0", num_envs=2, data_chunk_length=4,
                                num_minibatches=2, update_epochs=1, norm_obs=False,
                                eval_episodes=0, output_dir=str(tmp_path), **flags))
    agent = ppo_lstm.Agent(1, 2, False, 64, 64)
    agent.load_state_dict(initial)  # the weights the rollout acted with
    return agent, seen


def episode_states(agent, observations):
    """The state after each observation of an episode unrolled from zeros (by hand: one
    LSTM step at a time)."""
    state, states = agent.initial_state(1, "cpu"), []
    for o in observations:
        _, state = agent.features(torch.tensor([[[float(o)]]]), state, torch.zeros(1, 1))
        states.append(state)
    return states


def test_rollout_stores_the_state_each_step_acted_with(one_update):
    agent, seen = one_update
    buffer = seen["buffer"]
    # Each environment sees 0 1 2 3 4 | 0 1 2: episodes start at steps 0 and 5.
    assert buffer["obs"][:, :, 0].tolist() == [[t, t] for t in (0, 1, 2, 3, 4, 0, 1, 2)]
    assert buffer["episode_starts"][:, 0].tolist() == [1, 0, 0, 0, 0, 1, 0, 0]
    with torch.no_grad():
        states = episode_states(agent, range(5))
    for t in range(8):
        # the state at step t is the one after the episode's observations before it;
        # zeros where the episode starts (steps 0 and 5)
        k = t if t < 5 else t - 5
        expected = (torch.zeros(1, 2, 64),) * 2 if k == 0 else states[k - 1]
        for n in range(2):
            assert torch.allclose(buffer["h"][t, n], expected[0][0], atol=1e-6)
            assert torch.allclose(buffer["c"][t, n], expected[1][0], atol=1e-6)
    assert buffer["h"][3].abs().sum() > 0


def test_truncation_bootstraps_from_the_final_observation_with_the_episodes_state(one_update):
    agent, seen = one_update
    buffer = seen["buffer"]
    # Step 4 (from observation 4) is truncated; its final observation 5 is valued with the
    # state after observations 0..4: the LSTM run over 0, 1, 2, 3, 4, 5 from zeros.
    with torch.no_grad():
        (_, critic), _ = agent.features(torch.arange(6.0).view(6, 1, 1),
                                        agent.initial_state(1, "cpu"), torch.zeros(6, 1))
        expected = agent.value(critic[-1])[0]
    assert buffer["truncated"][:, 0].tolist() == [False] * 4 + [True] + [False] * 3
    assert torch.allclose(buffer["final_values"][4], expected.expand(2), atol=1e-6)
    assert buffer["final_values"][[0, 1, 2, 3, 5, 6, 7]].abs().sum() == 0
    # V(final obs 5) is not the value of the next episode's first observation 0
    assert not torch.allclose(buffer["final_values"][4, 0], buffer["values"][5, 0], atol=1e-4)
    # After the rollout, observation 3 of the second episode is valued with the state that
    # episode reached: the LSTM over 0, 1, 2, 3 from zeros.
    with torch.no_grad():
        (_, critic), _ = agent.features(torch.arange(4.0).view(4, 1, 1),
                                        agent.initial_state(1, "cpu"), torch.zeros(4, 1))
    assert torch.allclose(buffer["last_value"], agent.value(critic[-1]).expand(2), atol=1e-6)


def test_the_state_runs_on_from_one_rollout_into_the_next(tmp_path, monkeypatch):
    # T = 4, two rollouts: each environment sees 0 1 2 3 | 4 0 1 2, so the second rollout
    # starts mid-episode at observation 4. Its first step acts with the state the first
    # rollout carried to its end, after observations 0..3 (the LSTM over them from zeros,
    # with the weights the first rollout acted with: the update comes after), not with zeros.
    agent, seen = spied_updates(tmp_path, monkeypatch, total_timesteps=16, num_steps=4)
    buffer = seen["buffer"]  # the second rollout's
    assert buffer["obs"][:, :, 0].tolist() == [[t, t] for t in (4, 0, 1, 2)]
    assert buffer["episode_starts"][:, 0].tolist() == [0, 1, 0, 0]
    with torch.no_grad():
        after_0_to_3 = episode_states(agent, range(4))[-1]
    for n in range(2):
        assert torch.allclose(buffer["h"][0, n], after_0_to_3[0][0], atol=1e-6)
        assert torch.allclose(buffer["c"][0, n], after_0_to_3[1][0], atol=1e-6)
    assert buffer["h"][0].abs().sum() > 0 and buffer["h"][1].abs().sum() == 0  # 0: reset


def test_update_starts_each_chunk_from_its_stored_state(one_update):
    _, seen = one_update
    buffer = seen["buffer"]
    assert len(seen["chunks"]) == len(seen["states"]) == 2
    for (steps, envs), (h, c) in zip(seen["chunks"], seen["states"]):
        assert torch.equal(h, buffer["h"][steps[0], envs[0]])
        assert torch.equal(c, buffer["c"][steps[0], envs[0]])
    # chunks start at steps 0 and 4; the one at step 4 starts mid-episode, so its stored
    # state is neither zeros nor the state the rollout ended with
    fed = torch.cat([h for h, _ in seen["states"]])
    firsts = torch.cat([steps[0] for steps, _ in seen["chunks"]])
    mid = fed[firsts == 4]
    assert len(mid) == 2 and mid.abs().sum(-1).min() > 0
    assert not torch.allclose(mid[0], buffer["h"][7, 0], atol=1e-4)


@pytest.mark.parametrize("chunk_length", [4, 1])
def test_the_first_minibatch_reproduces_what_the_rollout_stored(chunk_length, tmp_path,
                                                                 monkeypatch):
    # CountToFive-v0, T = 8, L = 4: each environment's chunk of steps 4..7 holds an episode
    # start at step 5. One minibatch of all 4 chunks comes before any gradient step, so
    # re-running each chunk from its stored first state, reset at step 5, must give the
    # log-probabilities and values of acting: newlogprob = oldlogprob, and, with
    # --no-norm-adv, newvalue = returns - advantages (R_t = A_t + V(s_t) stored). L = 1 (legal:
    # it divides T) makes 2 * 8 = 16 chunks of one step, each run from its own stored state:
    # steps and envs are [1, 16], so the first states are read at envs[0], there is no envs[1].
    calls = spy_on(monkeypatch, ppo_lstm, "ppo_loss", detached)
    ppo_lstm.main(ppo_lstm.Args(env_id="CountToFive-v0", total_timesteps=16, num_envs=2,
                                num_steps=8, data_chunk_length=chunk_length, num_minibatches=1,
                                update_epochs=1, norm_adv=False, eval_episodes=0,
                                output_dir=str(tmp_path)))
    first = calls[0]
    assert first["newlogprob"].shape == (16,)
    assert torch.allclose(first["newlogprob"], first["oldlogprob"], atol=1e-6)
    assert torch.allclose(first["newvalue"], first["returns"] - first["advantages"], atol=1e-5)


@pytest.mark.parametrize("norm_adv", [True, False])
def test_advantages_are_normalized_over_the_whole_minibatch(norm_adv, tmp_path, monkeypatch):
    # GAE stood in for by hand: advantages A[t, n] = [[0, 2], [1, 4]] (T = 2, N = 2), returned
    # as the returns too, so that each advantage ppo_loss gets can be matched with its raw
    # value. One minibatch of both chunks (L = 2): mean 1.75, sample std
    # sqrt((1.75^2 + 0.25^2 + 0.75^2 + 2.25^2) / 3) = sqrt(8.75 / 3) = 1.707825, so
    # 0 -> -1.024695, 1 -> -0.439155, 2 -> 0.146385, 4 -> 1.317465. (Per time index it would
    # be -0.7071 and 0.7071 at each step.) With --no-norm-adv they pass as they are.
    advantages = torch.tensor([[0.0, 2.0], [1.0, 4.0]])
    monkeypatch.setattr(ppo_lstm, "compute_gae", lambda *args: (advantages, advantages))
    calls = spy_on(monkeypatch, ppo_lstm, "ppo_loss", detached)
    ppo_lstm.main(ppo_lstm.Args(env_id="CountToFive-v0", total_timesteps=4, num_envs=2,
                                num_steps=2, data_chunk_length=2, num_minibatches=1,
                                update_epochs=1, norm_adv=norm_adv, eval_episodes=0,
                                output_dir=str(tmp_path)))
    (call,) = calls
    normalized = {0.0: -1.024695, 1.0: -0.439155, 2.0: 0.146385, 4.0: 1.317465}
    expected = [normalized[r] if norm_adv else r for r in call["returns"].tolist()]
    assert sorted(call["returns"].tolist()) == [0.0, 1.0, 2.0, 4.0]
    assert call["advantages"].tolist() == pytest.approx(expected, abs=1e-5)


def test_updates_csv_explains_the_returns_by_the_stored_values(tmp_path, monkeypatch):
    # GAE stood in for: of the values V(s_t) the rollout stored (those it is given) it returns
    # the advantages A = V and the returns R = A + V = 2 V. updates.csv's explained_variance
    # is 1 - Var[R - V] / Var[R] = 1 - Var[V] / (4 Var[V]) = 0.75, whatever V is (T = 2,
    # N = 2: V(s_0) = 0 at the normalized first observation 0, V(s_1) not, so Var[V] > 0).
    # Of the advantages instead it would be 1 - Var[A - V] / Var[A] = 1 - 0 = 1.
    values = []
    monkeypatch.setattr(ppo_lstm, "compute_gae", lambda rewards, v, *rest: (
        values.append(v.clone()) or (v.clone(), 2 * v)))
    ppo_lstm.main(ppo_lstm.Args(env_id="CountToFive-v0", total_timesteps=4, num_envs=2,
                                num_steps=2, data_chunk_length=2, num_minibatches=1,
                                update_epochs=1, eval_episodes=0, output_dir=str(tmp_path)))
    ((row,), (v,)) = read_csv(next(tmp_path.glob("*/updates.csv"))), values
    assert v.var() > 0
    assert float(row["explained_variance"]) == pytest.approx(0.75, abs=1e-4)


def test_the_loop_gives_the_math_its_flags_and_steps_every_parameter(tmp_path, monkeypatch):
    # Each flag apart from its default and from the others. CountToFive-v0, one rollout of
    # 2 * 8 steps in 4 chunks of 4, 2 minibatches. --target-kl 1e-9 stops the update after
    # its first epoch of 3 (the second minibatch comes after a gradient step: KL > 0); the
    # training environments discount --norm-reward's return (on by default) by --gamma.
    # --seed 7 seeds torch and the training environments, the final evaluation's at 100,007.
    # --max-grad-norm 1e-3 is below the norm g of every gradient here, so clipping scales
    # each to norm 1e-3 * g / (g + 1e-6) = 1e-3 (within 1e-6 of it), the norm Adam's step
    # must find (clipped after the step instead, it would find g itself).
    calls = spy_on(monkeypatch, ppo_lstm, "ppo_loss", detached)
    gae = spy_on(monkeypatch, ppo_lstm, "compute_gae", lambda *a: a[5:7])  # gamma, lambda
    norms = spy_on(monkeypatch, torch.nn.utils, "clip_grad_norm_", lambda params, norm: norm)
    stepped = spy_on_stepped_gradient_norms(monkeypatch)
    made = spy_on(monkeypatch, ppo_lstm, "make_vector_env",
                  lambda env_id, num_envs, reward_gamma=None, *rest, **kw: reward_gamma)
    agents = spy_on(monkeypatch, ppo_lstm, "train", lambda args, agent, *rest: agent)
    optimized = spy_on_adam(monkeypatch)
    moved = spy_on_weights(monkeypatch, ppo_lstm)
    seeds, resets = spy_on_seeds(monkeypatch, ppo_lstm)
    ppo_lstm.main(ppo_lstm.Args(env_id="CountToFive-v0", total_timesteps=16, num_envs=2,
                                num_steps=8, data_chunk_length=4, num_minibatches=2,
                                update_epochs=3, target_kl=1e-9, gamma=0.9, gae_lambda=0.6,
                                ent_coef=0.03, vf_coef=0.7, max_grad_norm=1e-3, seed=7,
                                eval_episodes=2, output_dir=str(tmp_path)))
    assert gae == [(0.9, 0.6)] and made == [0.9, None]  # training's, then the evaluation's
    assert seeds == [7] and resets == [7, 100_007]
    assert [(c["ent_coef"], c["vf_coef"]) for c in calls] == [(0.03, 0.7)] * 2
    assert norms == [1e-3] * 2
    assert stepped == pytest.approx([1e-3] * 2, rel=1e-5)
    (update,) = read_csv(next(tmp_path.glob("*/updates.csv")))
    assert update["epochs"] == "1"
    (agent,) = agents
    assert [id(p) for p in optimized[0]] == [id(p) for p in agent.parameters()]
    ((still, _),) = moved()  # and its steps moved every weight of the agent
    assert still == []


# CountToThree-v0 (conftest.py), 2 environments, T = 4: observations 0, 1, 2, then the third
# step is truncated with the true final observation 3, and the next episode starts at 0.
# With --norm-obs each row is normalized by the statistics after its own update (Gymnasium's
# RunningMeanStd; its prior count of 1e-4 moves these by less than 1e-3), and the final
# observation 3 by the statistics of its row, without updating them:
#   after 0,0:             mean 0,    var 0                      -> 0
#   after 0,0,1,1:         mean 0.5,  var 0.25                   -> (1 - 0.5) / 0.5 = 1
#   after 0,0,1,1,2,2:     mean 1,    var 2/3                    -> (2 - 1) / 0.8165 = 1.2247
#   final 3, same stats:                                           (3 - 1) / 0.8165 = 2.4495
#   after 0,0,1,1,2,2,0,0: mean 0.75, var 10/8 - 0.75^2 = 0.6875 -> -0.75 / 0.8292 = -0.9045
@pytest.mark.parametrize("norm_obs, rows, final", [(False, [0, 1, 2, 0], 3),
                                                   (True, [0, 1, 1.2247, -0.9045], 2.4495)])
def test_the_truncated_steps_final_observation_is_normalized_without_an_update(
        norm_obs, rows, final, tmp_path, monkeypatch):
    finals, stored = [], []
    bootstrap, gae = ppo_lstm.Agent.bootstrap_value, ppo_lstm.RolloutBuffer.gae

    def spy_bootstrap(self, obs, state, starts):
        if obs.shape[0] == 1:  # one truncated environment's final observation
            finals.append(obs[0, 0].item())
        return bootstrap(self, obs, state, starts)

    def spy_gae(self, *args):
        stored.append(self.obs[:, :, 0].clone())
        return gae(self, *args)

    monkeypatch.setattr(ppo_lstm.Agent, "bootstrap_value", spy_bootstrap)
    monkeypatch.setattr(ppo_lstm.RolloutBuffer, "gae", spy_gae)
    ppo_lstm.main(ppo_lstm.Args(env_id="CountToThree-v0", total_timesteps=8, num_envs=2,
                                num_steps=4, data_chunk_length=2, num_minibatches=2,
                                update_epochs=1, norm_obs=norm_obs, eval_episodes=0,
                                output_dir=str(tmp_path)))
    assert stored[0].tolist() == [pytest.approx([r, r], abs=1e-3) for r in rows]
    assert finals == pytest.approx([final, final], abs=1e-3)
    # --norm-reward is on: the buffer's rewards are scaled, episodes.csv keeps the raw returns
    episodes = read_csv(next(tmp_path.glob("*/episodes.csv")))
    assert [e["episode_return"] for e in episodes] == ["3.0", "3.0"]


def test_the_environment_gets_the_clipped_action_and_the_buffer_keeps_the_sample(tmp_path,
                                                                                monkeypatch):
    # BoxZeroToFour-v0 (conftest.py) takes actions in [0, 4] and keeps each it receives. The
    # Gaussian policy starts with mean near 0 and std 1: some samples are negative. The
    # environment must get each sample clipped to [0, 4]; the buffer the sample itself.
    stored, gae = [], ppo_lstm.RolloutBuffer.gae

    def spy_gae(self, *args):
        stored.extend(self.actions[:, 0, 0].tolist())
        return gae(self, *args)

    monkeypatch.setattr(ppo_lstm.RolloutBuffer, "gae", spy_gae)
    received_actions().clear()
    ppo_lstm.main(ppo_lstm.Args(env_id="BoxZeroToFour-v0", total_timesteps=8, num_envs=1,
                                num_steps=8, data_chunk_length=4, num_minibatches=2,
                                update_epochs=1, eval_episodes=0, output_dir=str(tmp_path)))
    assert min(stored) < 0 < max(stored)
    assert received_actions() == pytest.approx(np.clip(stored, 0, 4).tolist(), abs=1e-6)


def test_evaluation_normalizes_observations_with_the_frozen_statistics(monkeypatch):
    # Statistics mean 1, var 4 (std 2): the greedy policy must see CountToThree's 0, 1, 2 as
    # (0 - 1) / 2 = -0.5, 0, 0.5, and the statistics must not move.
    seen, original = [], ppo_lstm.Agent.greedy

    def greedy(self, obs, state, starts):
        seen.append(obs[0, 0].item())
        return original(self, obs, state, starts)

    monkeypatch.setattr(ppo_lstm.Agent, "greedy", greedy)
    normalizer = ppo_lstm.ObsNormalizer((1,), enabled=True)
    normalizer.rms.mean, normalizer.rms.var = np.array([1.0]), np.array([4.0])
    agent = ppo_lstm.Agent(1, 2, False, 8, 4)
    returns = ppo_lstm.evaluate(ppo_lstm.Args(env_id="CountToThree-v0", eval_episodes=1),
                                {"agent": agent, "obs_rms": normalizer})
    assert returns.tolist() == [3.0] and seen == pytest.approx([-0.5, 0.0, 0.5], abs=1e-6)
    assert normalizer.rms.mean.tolist() == [1.0] and normalizer.rms.var.tolist() == [4.0]


def test_hide_obs_drops_the_dimensions_everywhere_the_agent_looks():
    # CartPole's 4 dimensions with 1 and 3 hidden: the observations, the space and the true
    # final observation of an episode's end hold dimensions 0 and 2 alone.
    full, hidden = (ppo_lstm.make_vector_env("CartPole-v1", 1, hide_obs=h) for h in ([], [1, 3]))
    obs, _ = full.reset(seed=0)
    seen, _ = hidden.reset(seed=0)
    assert hidden.single_observation_space.shape == (2,)
    assert seen.tolist() == obs[:, [0, 2]].tolist()
    for _ in range(200):
        obs, _, terminated, truncated, info = full.step(np.array([1]))
        seen, _, _, _, seen_info = hidden.step(np.array([1]))
        if terminated[0] or truncated[0]:
            break
    assert terminated[0]
    assert seen_info["final_obs"][0].tolist() == info["final_obs"][0][[0, 2]].tolist()
    full.close(), hidden.close()


# ---------------------------------------------------------------------------------------
# Runs end to end
# ---------------------------------------------------------------------------------------
@pytest.mark.slow  # a smoke run: a whole tiny run and every file it writes
def test_hidden_velocity_smoke_run_writes_every_file_and_its_model_evaluates(tmp_path,
                                                                             check_run_folder):
    # --eval-every 256 evaluates at 256 and 512 with the hidden dimensions dropped too
    args = ppo_lstm.Args(hide_obs=[1, 3], total_timesteps=512, num_envs=2, num_steps=32,
                         data_chunk_length=8, num_minibatches=2, update_epochs=2,
                         eval_episodes=2, eval_every=256, save_model=True,
                         output_dir=str(tmp_path / "train"))
    summary = ppo_lstm.main(args)
    path, episodes, updates = check_run_folder(summary, args.output_dir, "ppo_lstm-hide1-3",
                                               model=True)
    assert summary["global_steps"] == 512 and len(updates) == 8
    assert [r["global_step"] for r in read_csv(os.path.join(path, "evaluations.csv"))] == \
        ["256", "512"]
    assert {"policy_loss", "value_loss", "entropy", "approx_kl", "clipfrac",
            "explained_variance"} <= set(updates[0])
    with open(os.path.join(path, "config.json")) as f:
        assert json.load(f)["hide_obs"] == [1, 3]
    state = torch.load(os.path.join(path, "model.pt"), weights_only=True)
    assert state["agent"]["actor_encoder.0.weight"].shape == (64, 2)  # 2 of CartPole's 4
    assert state["agent"]["critic_encoder.0.weight"].shape == (64, 2)
    assert state["args"]["lstm_hidden_size"] == 64

    # --eval-checkpoint applies the checkpoint's --hide-obs, whatever the command line says
    evaluated = ppo_lstm.main(ppo_lstm.Args(eval_checkpoint=os.path.join(path, "model.pt"),
                                            eval_episodes=2, output_dir=str(tmp_path / "eval")))
    assert evaluated["eval_return_mean"] == summary["eval_return_mean"]
    assert evaluated["global_steps"] == 0
    (eval_path,) = (tmp_path / "eval").iterdir()
    assert json.loads((eval_path / "config.json").read_text())["hide_obs"] == [1, 3]


def test_continuous_run_with_the_naive_generator(tmp_path, check_run_folder):
    args = ppo_lstm.Args(env_id="Pendulum-v1", hide_obs=[2], total_timesteps=800, num_envs=2,
                         num_steps=200, data_chunk_length=200, num_minibatches=2,
                         update_epochs=1, eval_episodes=1, norm_reward=True, target_kl=0.5,
                         output_dir=str(tmp_path))
    summary = ppo_lstm.main(args)
    _, episodes, _ = check_run_folder(summary, args.output_dir, "ppo_lstm-hide2")
    assert [e["episode_length"] for e in episodes] == ["200"] * 4  # cut by the time limit
    assert float(episodes[0]["episode_return"]) < 0  # raw returns, not normalized rewards


def test_your_own_environment_module(tmp_path, fresh_env_module, check_run_folder):
    args = ppo_lstm.Args(env_id=f"{fresh_env_module}:GridWorld-v0", total_timesteps=128,
                         num_envs=2, num_steps=16, eval_episodes=1, output_dir=str(tmp_path))
    summary = ppo_lstm.main(args)
    check_run_folder(summary, args.output_dir, "ppo_lstm")
    assert summary["env_id"] == "my_envs:GridWorld-v0"


def test_evaluation_carries_the_state_through_the_episode(monkeypatch):
    # Greedy evaluation of 2 episodes of my_envs:EpisodeNumberOne-v0 at --seed 0: environment
    # 0 (seed 100,000, even) plays episodes of 1 step paying 1, then 2, then 3; environment 1
    # (100,001, odd) one of 3 steps paying 1 a step, 1 + 1 + 1 = 3, which ends at the third
    # step. The
    # states given at each step are zeros at the first step and then the state returned by
    # the step before, never reset, not even where environment 0's episodes end; each
    # environment's first episode alone counts: [1, 3] (the last of each would give [3, 3]).
    # (Observations of 1: the zero-bias encoder and LSTM keep the zero state at an input of 0.)
    agent = ppo_lstm.Agent(1, 2, False, 8, 4)
    calls, original = [], ppo_lstm.Agent.greedy

    def greedy(self, obs, state, starts):
        action, new_state = original(self, obs, state, starts)
        calls.append((state, starts.clone(), new_state))
        return action, new_state

    monkeypatch.setattr(ppo_lstm.Agent, "greedy", greedy)
    normalizer = ppo_lstm.ObsNormalizer((1,), enabled=False)
    returns = ppo_lstm.evaluate(ppo_lstm.Args(env_id="my_envs:EpisodeNumberOne-v0", seed=0,
                                              eval_episodes=2),
                                {"agent": agent, "obs_rms": normalizer})
    assert returns.tolist() == [1.0, 3.0] and len(calls) == 3
    assert calls[0][0][0].abs().sum() == 0 and calls[0][0][1].abs().sum() == 0
    assert all(c[1].sum() == 0 for c in calls) and calls[-1][0][0].abs().sum() > 0
    for before, after in zip(calls, calls[1:]):
        assert torch.equal(after[0][0], before[2][0]) and torch.equal(after[0][1], before[2][1])


def test_stop_at_return_stops_and_records_when(tmp_path):
    summary = ppo_lstm.main(ppo_lstm.Args(total_timesteps=100_000, stop_at_return=1.0,
                                          eval_episodes=0, output_dir=str(tmp_path)))
    episodes = read_csv(next(tmp_path.glob("*/episodes.csv")))
    assert len(episodes) >= 20 and summary["solved_at_step"] == int(episodes[19]["global_step"])
    # CartPole pays at least 1 an episode: the 20th episode's end reaches 1.0 and training
    # stops at that step, not at the budget of 100,000 (nor at the rollout's end)
    assert summary["global_steps"] == summary["solved_at_step"] < 100_000


def test_the_budget_is_rounded_down_to_whole_rollouts(tmp_path):
    # 100 steps in rollouts of 2 * 16 = 32: 3 whole rollouts, 3 * 32 = 96 steps.
    summary = ppo_lstm.main(ppo_lstm.Args(total_timesteps=100, num_envs=2, num_steps=16,
                                          update_epochs=1, eval_episodes=0,
                                          output_dir=str(tmp_path)))
    assert summary["global_steps"] == 96


def learning_rates_and_losses(tmp_path, folder, **flags):
    """The learning_rate, policy_loss and value_loss columns of updates.csv of a tiny run of
    rollouts of 2 * 16 = 32 steps, one epoch each."""
    ppo_lstm.main(ppo_lstm.Args(num_envs=2, num_steps=16, update_epochs=1, eval_episodes=0,
                                output_dir=str(tmp_path / folder), **flags))
    rows = read_csv(next((tmp_path / folder).glob("*/updates.csv")))
    return [(float(r["learning_rate"]), r["policy_loss"], r["value_loss"]) for r in rows]


def test_the_budget_does_not_change_the_learning(tmp_path):
    # --anneal-lr over --anneal-steps 128 = 4 rollouts at 1e-3: rollout i (from 1) learns at
    # 1e-3 * max(0, 1 - (i - 1) / 4): 1e-3, 0.75e-3, 0.5e-3, 0.25e-3, then 0 (not -0.25e-3). A
    # budget of 3 rollouts (96 steps) learns exactly what the first 3 of a budget of 6 (192) learn.
    # (Annealed over the budget instead: 1e-3, 0.667e-3, 0.333e-3 for the 3 rollouts.)
    flags = dict(anneal_steps=128, learning_rate=1e-3)
    short = learning_rates_and_losses(tmp_path, "short", total_timesteps=96, **flags)
    long = learning_rates_and_losses(tmp_path, "long", total_timesteps=192, **flags)
    assert [lr for lr, _, _ in long] == pytest.approx([1e-3, 0.75e-3, 0.5e-3, 0.25e-3, 0, 0])
    assert len(short) == 3 and short == long[:3]


def test_without_anneal_lr_the_rate_stays_and_so_does_the_learning(tmp_path):
    # --no-anneal-lr: 2 rollouts at --learning-rate 3e-3 (default 1e-3), then the same run
    # with the rate annealed over --anneal-steps 64 (3e-3, then 1.5e-3): the first rollout
    # learns the same, the second not. updates.csv reads the rate back from the one Adam.
    constant = learning_rates_and_losses(tmp_path, "constant", total_timesteps=64,
                                         anneal_lr=False, learning_rate=3e-3)
    annealed = learning_rates_and_losses(tmp_path, "annealed", total_timesteps=64,
                                         anneal_steps=64, learning_rate=3e-3)
    assert [lr for lr, _, _ in constant] == [3e-3, 3e-3]
    assert [lr for lr, _, _ in annealed] == pytest.approx([3e-3, 1.5e-3])
    assert constant[0] == annealed[0] and constant[1][1:] != annealed[1][1:]


@pytest.mark.parametrize("anneal_clip, anneal_steps, expected", [
    (True, 128, [0.2, 0.15, 0.1, 0.05, 0.0]), (False, 128, [0.2] * 5),
    (True, 16, [0.2, 0.0, 0.0, 0.0, 0.0])])
def test_anneal_clip_decays_epsilon_with_the_learning_rate(anneal_clip, anneal_steps, expected,
                                                           tmp_path, monkeypatch):
    # --clip-coef 0.2 over --anneal-steps 128 = 4 rollouts of 2 * 16 = 32 steps, 5 rollouts:
    # with --anneal-clip rollout i (from 1) clips at 0.2 * max(0, 1 - (i - 1) / 4) = 0.2, 0.15,
    # 0.1, 0.05, then 0 (not -0.05); without it at 0.2 throughout. --anneal-steps 16, less
    # than one rollout (16 // 32 = 0), anneals over one: 0.2 * max(0, 1 - (i - 1) / 1) = 0.2,
    # then 0 (over two, as max(2, ...) would, the second rollout would clip at 0.1). Each
    # rollout is 4 chunks of 8 steps in 2 minibatches, so ppo_loss gets each value twice, and
    # updates.csv logs it. Its clipfrac counts the ratios outside that same epsilon: rollout
    # i's row is the mean over its two minibatches of mean(|r - 1| > eps_i), r = exp(newlogprob
    # - oldlogprob) as ppo_loss got them. --no-anneal-lr keeps the rate at 1e-3 (epsilon
    # anneals by f_k all the same), so each rollout's second minibatch follows a step and its
    # ratios leave 1 by far less than 0.2: at eps_i = 0 they count, at the flag's 0.2 none does.
    calls = spy_on(monkeypatch, ppo_lstm, "ppo_loss", detached)
    ppo_lstm.main(ppo_lstm.Args(num_envs=2, num_steps=16, update_epochs=1, eval_episodes=0,
                                total_timesteps=160, anneal_steps=anneal_steps, clip_coef=0.2,
                                anneal_clip=anneal_clip, anneal_lr=False,
                                output_dir=str(tmp_path)))
    assert [c["clip_coef"] for c in calls] == pytest.approx([e for e in expected for _ in "ab"])
    rows = read_csv(next(tmp_path.glob("*/updates.csv")))
    assert [float(r["clip_coef"]) for r in rows] == pytest.approx(expected)
    off = [((c["newlogprob"] - c["oldlogprob"]).exp() - 1).abs() for c in calls]

    def clipfracs(epsilons):  # each rollout's two minibatches at its epsilon
        return [np.mean([(o > eps).float().mean().item() for o in off[2 * i:2 * i + 2]])
                for i, eps in enumerate(epsilons)]

    assert [float(r["clipfrac"]) for r in rows] == pytest.approx(clipfracs(expected), rel=1e-6)
    assert (clipfracs(expected) != clipfracs([0.2] * 5)) == anneal_clip  # the run tells them


def test_non_finite_loss_stops_cleanly(tmp_path, monkeypatch, capsys):
    original = ppo_lstm.ppo_loss
    monkeypatch.setattr(ppo_lstm, "ppo_loss", lambda **k: (original(**k)[0] * math.nan,
                                                           *original(**k)[1:]))
    summary = ppo_lstm.main(ppo_lstm.Args(total_timesteps=1024, num_envs=2, num_steps=32,
                                          output_dir=str(tmp_path)))
    assert summary["interrupted"] is True and summary["global_steps"] == 64
    assert (next(tmp_path.iterdir()) / "summary.json").exists()
    assert "the loss became non-finite (NaN or inf) at step 64" in capsys.readouterr().out


@pytest.mark.slow  # determinism: two whole runs
def test_same_seed_gives_the_same_episodes(tmp_path):
    rows = same_seed_episodes(lambda out: ppo_lstm.main(ppo_lstm.Args(
        hide_obs=[1, 3], total_timesteps=1024, num_envs=4, num_steps=32, eval_episodes=0,
        output_dir=out)), tmp_path)
    assert len(rows) > 20


# ---------------------------------------------------------------------------------------
# Bad input: one line on stderr, exit status 2, nothing trained
# ---------------------------------------------------------------------------------------
@pytest.fixture
def bad_checkpoints(tmp_path):
    # says 32 LSTM units, holds a 64-unit network: the network is built by the checkpoint's
    # --lstm-hidden-size (MODEL_FLAGS), not the command line's default 64
    misfit = str(tmp_path / "misfit.pt")
    ppo_lstm.save_checkpoint(misfit, {"agent": ppo_lstm.Agent(4, 2, False),
                                      "obs_rms": ppo_lstm.ObsNormalizer((4,), True)},
                             ppo_lstm.Args(lstm_hidden_size=32))
    return {"misfit": misfit}


@pytest.mark.parametrize("argv, message", [
    (["--env-id", "SpinTheBits-v0"], "MultiBinary action space of shape (3,); ppo_lstm.py "
     "handles Discrete and flat Box actions"),
    (["--env-id", "Taxi-v4"], "Discrete observation space"),
    (["--hide-obs", "4"], "--hide-obs 4 must name distinct dimensions among CartPole-v1's 0 to 3"),
    (["--hide-obs", "0", "1", "2", "3"], "keeping at least one"),
    (["--hide-obs", "1", "1"], "--hide-obs 1 1 must name distinct dimensions"),
    (["--num-steps", "32", "--data-chunk-length", "5"], "--data-chunk-length 5 does not divide"),
    (["--num-envs", "3", "--num-steps", "8", "--data-chunk-length", "8", "--num-minibatches", "2"],
     "num_envs*num_steps/data_chunk_length = 3 chunks do not split into --num-minibatches 2"),
    (["--num-envs", "0"], "--num-envs must be positive"),
    (["--data-chunk-length", "0"], "--data-chunk-length must be positive"),
    (["--total-timesteps", "100"], "less than one rollout"),
    (["--learning-rate", "0"], "--learning-rate must be positive"),
    (["--anneal-steps", "0"], "--anneal-steps must be positive"),
    (["--gae-lambda", "1.5"], "--gae-lambda must be in [0, 1]"),
    (["--eval-checkpoint", "misfit"], "does not fit CartPole-v1's network"),
])
def test_bad_input_is_one_line_and_exit_status_2(argv, message, check_usage_error,
                                                 bad_checkpoints, fresh_env_module):
    check_usage_error("ppo_lstm.py", [bad_checkpoints.get(a, a) for a in argv], message)


def test_the_run_folder_and_config_name_the_hidden_dimensions(tmp_path):
    # Without --exp-name the run is named after the script and the dimensions --hide-obs
    # drops (sorted: 3 1 and 1 3 are one task); a name given is kept as it is.
    name = ppo_lstm.experiment_name
    assert name(ppo_lstm.Args()) == "ppo_lstm"
    assert name(ppo_lstm.Args(hide_obs=[3, 1])) == "ppo_lstm-hide1-3"
    assert name(ppo_lstm.Args(hide_obs=[2])) == "ppo_lstm-hide2"
    assert name(ppo_lstm.Args(hide_obs=[1, 3], exp_name="sweep")) == "sweep"
    tiny = dict(total_timesteps=32, num_envs=2, num_steps=16, data_chunk_length=8,
                num_minibatches=2, update_epochs=1, eval_episodes=0, save_model=True)
    for flags, expected in [({"hide_obs": [3, 1]}, "ppo_lstm-hide1-3"),
                            ({"hide_obs": [1, 3], "exp_name": "sweep"}, "sweep")]:
        ppo_lstm.main(ppo_lstm.Args(output_dir=str(tmp_path / expected), **flags, **tiny))
        (folder,) = (tmp_path / expected).iterdir()
        assert folder.name.startswith(f"CartPole-v1__{expected}__1__")
        assert json.loads((folder / "config.json").read_text())["exp_name"] == expected
    # --eval-checkpoint takes --hide-obs from the model, and its folder's name with it
    (trained,) = (tmp_path / "ppo_lstm-hide1-3").iterdir()
    ppo_lstm.main(ppo_lstm.Args(eval_checkpoint=str(trained / "model.pt"), eval_episodes=1,
                                output_dir=str(tmp_path / "eval")))
    (folder,) = (tmp_path / "eval").iterdir()
    assert folder.name.startswith("CartPole-v1__ppo_lstm-hide1-3__1__")


# ---------------------------------------------------------------------------------------
# Flags at values other than their defaults (issue 59), through conftest.py's shared checks
# ---------------------------------------------------------------------------------------
# A 6-step run: one rollout of 2 environments * 3 steps, one chunk of 3 steps each, in 2
# minibatches of one chunk (the default --data-chunk-length 8 does not divide 3 steps)
SIX_STEPS = dict(num_envs=2, num_steps=3, data_chunk_length=3, num_minibatches=2)


def test_an_evaluation_of_a_checkpoint_trains_nothing(tmp_path, capsys):
    # The shared check (a model --hidden-size 8 evaluated without the flag), on a model with
    # --lstm-hidden-size 4 and --no-norm-obs as well: its evaluation under the defaults (64
    # and --norm-obs) takes the model's (a 4-unit LSTM would not load into 64 units: exit 2;
    # config.json records the flags it ran with). The evaluation's --num-steps 64 makes a
    # rollout of 2 * 64 = 128 steps, more than its 101, which check_args refuses for training.
    check_an_evaluation_trains_nothing(ppo_lstm, tmp_path, capsys, env_id="my_envs:ThreeSteps-v0",
                                       tiny={**SIX_STEPS, "lstm_hidden_size": 4,
                                             "norm_obs": False}, num_steps=64)
    (evaluation,) = (tmp_path / "eval").iterdir()
    config = json.loads((evaluation / "config.json").read_text())
    assert config["lstm_hidden_size"] == 4 and config["norm_obs"] is False


def test_every_evaluation_reads_the_running_statistics_and_leaves_them_alone(tmp_path,
                                                                             monkeypatch):
    # T = 4 in one chunk of 4 a minibatch (the default --data-chunk-length 8 does not divide 4)
    check_every_evaluation_reads_the_running_statistics_and_leaves_them_alone(
        ppo_lstm, tmp_path, monkeypatch, data_chunk_length=4)


def test_target_kl_and_clipfrac_read_each_epochs_own_ratios(tmp_path, monkeypatch):
    # T = 8: one chunk of --data-chunk-length 8 per environment, both in the one minibatch;
    # --anneal-clip's factor is 1 in the first rollout, so epsilon is --clip-coef's 0.01. At
    # the default --learning-rate 1e-3 no ratio of these 16 steps leaves [0.99, 1.01] within
    # 3 epochs (both fractions 0); 1e-2 moves some
    check_the_epochs_kl_and_clipfrac(ppo_lstm, tmp_path, monkeypatch, "CountToThree-v0",
                                     learning_rate=1e-2)

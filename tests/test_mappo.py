"""Tests of mappo.py: GAE, the losses with active masks and value normalization by hand, the
EP and FP buffers, agents that are done before their environment, heterogeneous agents,
runs end to end, bad input, determinism."""
import math
import os

import gymnasium as gym
import numpy as np
import pytest
import torch

import mappo
from conftest import check_import_is_quiet, interrupt_on_call, read_csv, same_seed_episodes


def approx(expected):
    """Equality up to float32 rounding."""
    return pytest.approx(expected, abs=1e-5)


def same(x, expected):
    """Tensor equality with nested lists up to float32 rounding."""
    return torch.allclose(x, torch.tensor(expected, dtype=x.dtype), atol=1e-5)


def t(*rows):
    """A float tensor of the rows: t(1, 2) is [2]; a GAE input of T steps is t(step_0, ...),
    [T, N] from rows of N values or [T, N, A] from rows of N lists of A."""
    return torch.tensor(rows, dtype=torch.float32)


# ---------------------------------------------------------------------------------------
# GAE by hand: 3 steps, 2 environments, 2 agents, gamma = 0.5 and lambda = 0.5, so
# gamma * lambda = 0.25.
# ---------------------------------------------------------------------------------------
def test_gae_ep_one_value_per_environment_with_a_truncation_and_a_termination():
    # Environment 0 is truncated at t = 1 (time limit; V(final state) = 3), environment 1
    # terminates at t = 2. Team rewards (mean over the agents) as columns:
    #   env 0: r = [1.5, 0.5, 1.5], V = [1, 1, 1], next_values = [1, 3, 2]
    #     delta = [1.5 + 0.5*1 - 1, 0.5 + 0.5*3 - 1, 1.5 + 0.5*2 - 1] = [1, 1, 1.5]
    #     A_2 = 1.5;  A_1 = 1 (the episode ended: no A_2);  A_0 = 1 + 0.25*1 = 1.25
    #     returns = [2.25, 2, 2.5]
    #   env 1: r = [1, 1, 1], V = [0.5, 1, 2], next_values = [1, 2, 5] (5 is not used)
    #     delta = [1 + 0.5 - 0.5, 1 + 1 - 1, 1 + 0 - 2] = [1, 1, -1]
    #     A_2 = -1;  A_1 = 1 + 0.25*(-1) = 0.75;  A_0 = 1 + 0.25*0.75 = 1.1875
    #     returns = [1.6875, 1.75, 1]
    rewards, values = t([1.5, 1], [0.5, 1], [1.5, 1]), t([1, 0.5], [1, 1], [1, 2])
    next_values = t([1, 1], [3, 2], [2, 5])
    terminated, truncated = t([0, 0], [0, 0], [0, 1]), t([0, 0], [1, 0], [0, 0])
    adv, ret = mappo.compute_gae(rewards, values, next_values, terminated, truncated, 0.5, 0.5)
    assert same(adv, [[1.25, 1.1875], [1, 0.75], [1.5, -1]])
    assert same(ret, [[2.25, 1.6875], [2, 1.75], [2.5, 1]])


def test_gae_fp_one_value_per_agent_with_a_truncation_and_an_agent_terminated_early():
    # [T=3, N=2, A=2]. Environment 0: both agents truncated at t = 1. Environment 1: agent 0
    # terminates at t = 1 while agent 1 goes on (agent 0's t = 2 is inactive: reward 0, its
    # value 9 is garbage that the active mask leaves out of the loss).
    #   env 0, agent 0: r = [1, 1, 1], V = [0.5, 1, 2], next = [1, 6, 4]
    #     delta = [1, 1 + 3 - 1, 1 + 2 - 2] = [1, 3, 1];  A = [1 + 0.25*3, 3, 1] = [1.75, 3, 1]
    #   env 0, agent 1: r = [2, 0, 2], V = [1, 1, 1], next = [1, 2, 1]
    #     delta = [2 + 0.5 - 1, 0 + 1 - 1, 2 + 0.5 - 1] = [1.5, 0, 1.5];  A = [1.5, 0, 1.5]
    #   env 1, agent 0: r = [1, 1, 0], V = [0.5, 1, 9], next = [1, 7, 3] (7 unused)
    #     delta = [1, 1 + 0 - 1, 0 + 1.5 - 9] = [1, 0, -7.5];  A = [1 + 0, 0, -7.5]
    #   env 1, agent 1: r = [1, 1, 1], V = [0.5, 1, 2], next = [1, 2, 4], no end
    #     delta = [1, 1, 1];  A_2 = 1, A_1 = 1.25, A_0 = 1 + 0.25*1.25 = 1.3125
    rewards = t([[1, 2], [1, 1]], [[1, 0], [1, 1]], [[1, 2], [0, 1]])
    values = t([[0.5, 1], [0.5, 0.5]], [[1, 1], [1, 1]], [[2, 1], [9, 2]])
    next_values = t([[1, 1], [1, 1]], [[6, 2], [7, 2]], [[4, 1], [3, 4]])
    terminated = t([[0, 0], [0, 0]], [[0, 0], [1, 0]], [[0, 0], [0, 0]])
    truncated = t([[0, 0], [0, 0]], [[1, 1], [0, 0]], [[0, 0], [0, 0]])
    adv, ret = mappo.compute_gae(rewards, values, next_values, terminated, truncated, 0.5, 0.5)
    assert same(adv, [[[1.75, 1.5], [1, 1.3125]], [[3, 0], [0, 1.25]], [[1, 1.5], [-7.5, 1]]])
    assert torch.allclose(ret, adv + values)


def test_team_reward_is_the_mean_over_the_agents_that_acted():
    # env 0: (1 + 2)/2 = 1.5;  env 1: agent 1 is done, so only agent 0's 1 counts
    assert mappo.team_reward(t([1, 2], [1, 5]), t([1, 1], [1, 0])).tolist() == [1.5, 1.0]


# ---------------------------------------------------------------------------------------
# Active masks: a done agent's steps count in neither the loss nor the advantage statistics
# ---------------------------------------------------------------------------------------
def test_advantage_normalization_counts_active_steps_only():
    # active entries 1, 3, 5: mean 3, unbiased std sqrt((4 + 0 + 4)/2) = 2
    # -> [(1-3)/2, (3-3)/2, (5-3)/2] = [-1, 0, 1]; the inactive 100 comes out 0
    out = mappo.normalize_advantages(t([1, 3], [5, 100]), t([1, 1], [1, 0]))
    assert same(out, [[-1, 0], [1, 0]])


LOSS_INPUTS = dict(
    # B = 2 rows of A = 2 agents; agent 1 of row 1 is done (active 0) and has a ratio of 3
    # and an advantage of 10 that would dominate the loss if they counted.
    oldlogprob=torch.zeros(2, 2), advantages=t([1, -1], [0.5, 10]), active=t([1, 1], [1, 0]),
    newvalue=t(1, 2), oldvalue=t(0.5, 2.5), returns=t(2, 2), value_mask=t(1, 1),
    entropy=t([0.6, 0.4], [0.5, 9.0]), clip_coef=0.2, ent_coef=0.01, vf_coef=0.5)


def test_mappo_loss_by_hand_leaves_out_inactive_agents():
    # ratios [[1.5, 0.9], [1.0, (3.0)]], clip 0.2:
    #   max(-1*1.5, -1*1.2) = -1.2;  max(1*0.9, 1*0.9) = 0.9;  max(-0.5, -0.5) = -0.5
    #   L_pg = (-1.2 + 0.9 - 0.5)/3 = -0.266667 (the inactive -12 would make it -3.2)
    # entropy (0.6 + 0.4 + 0.5)/3 = 0.5
    # EP values: L_v = 0.5*((1-2)^2 + 0)/2 = 0.25;  clipped V = [0.7, 2.3]:
    #   0.5*(max(1, 1.69) + max(0, 0.09))/2 = 0.445
    # loss = -0.266667 - 0.01*0.5 + 0.5*0.25 = -0.146667; clipped -0.271667 + 0.2225 = -0.049167
    newlogprob = torch.log(t([1.5, 0.9], [1.0, 3.0])).requires_grad_()
    loss, pg_loss, v_loss, entropy = mappo.mappo_loss(newlogprob, **LOSS_INPUTS, clip_vloss=False)
    assert pg_loss.item() == approx(-0.8 / 3) and entropy.item() == approx(0.5)
    assert v_loss.item() == approx(0.25) and loss.item() == approx(-0.146667)
    pg_loss.backward()
    # d L_pg / d logp = -A * ratio / 3 where unclipped: [[0 (clipped), 0.3], [-1/6, 0]]
    assert same(newlogprob.grad, [[0.0, 0.3], [-1 / 6, 0.0]])
    loss, _, v_loss, _ = mappo.mappo_loss(newlogprob, **LOSS_INPUTS)
    assert v_loss.item() == approx(0.445) and loss.item() == approx(-0.049167)


def test_fp_value_loss_leaves_out_inactive_agents():
    # value_mask [[1, 1], [1, 0]]: squared errors 1, 0, 0 count, the inactive 100^2 does not
    # L_v = 0.5*(1 + 0 + 0)/3 = 1/6
    inputs = {**LOSS_INPUTS, "newvalue": t([1, 2], [3, 100]), "oldvalue": t([1, 2], [3, 100]),
              "returns": t([2, 2], [3, 0]), "value_mask": t([1, 1], [1, 0])}
    _, _, v_loss, _ = mappo.mappo_loss(torch.zeros(2, 2), **inputs)
    assert v_loss.item() == approx(1 / 6)


# ---------------------------------------------------------------------------------------
# Value normalization by hand
# ---------------------------------------------------------------------------------------
def test_value_norm_update_normalize_denormalize():
    norm = mappo.ValueNorm(enabled=True)
    assert norm.normalize(torch.tensor(3.0)).item() == approx(3.0)  # mean 0, var 1 at first
    # [1, 2, 3]: mean 2, variance ((1)^2 + 0 + 1^2)/3 = 2/3
    norm.update(t(1, 2, 3))
    assert (norm.mean, norm.var, norm.count) == (approx(2.0), approx(2 / 3), 3)
    # then [5]: delta = 3, n' = 4, mean = 2 + 3*1/4 = 2.75
    #   var = (2/3*3 + 0*1 + 3^2*3*1/4)/4 = (2 + 6.75)/4 = 2.1875
    #   (directly: deviations of 1, 2, 3, 5 from 2.75 squared: 3.0625 + 0.5625 + 0.0625
    #   + 5.0625 = 8.75, / 4 = 2.1875)
    norm.update(t(5))
    assert (norm.mean, norm.var, norm.count) == (approx(2.75), approx(2.1875), 4)
    # normalize(5) = (5 - 2.75)/sqrt(2.1875) = 2.25/1.479020 = 1.521278
    x = t(5, -1, 0.5)
    assert norm.normalize(x)[0].item() == approx(1.521278)
    assert torch.allclose(norm.denormalize(norm.normalize(x)), x)
    disabled = mappo.ValueNorm(enabled=False)
    disabled.update(t(10, 20))
    assert disabled.normalize(x) is x and disabled.denormalize(x) is x


# ---------------------------------------------------------------------------------------
# The critic's two kinds of state and the buffers
# ---------------------------------------------------------------------------------------
def test_critic_input_ep_is_the_state_fp_adds_own_obs_and_id():
    state, obs = t([7, 8]), t([[1, 0], [2, 3]])  # N = 1, S = 2, A = 2, D = 2
    assert mappo.critic_input(state, obs, "ep").tolist() == [[7, 8]]
    assert mappo.critic_input(state, obs, "fp").tolist() == [[[7, 8, 1, 0, 1, 0],
                                                              [7, 8, 2, 3, 0, 1]]]


@pytest.mark.parametrize("critic_state, critic_shape", [("ep", (4, 2)), ("fp", (4, 2, 3))])
def test_buffer_shapes(critic_state, critic_shape):
    # T = 4, N = 2, A = 3 agents, D = 5, K = 6 actions, critic input 7 wide
    b = mappo.RolloutBuffer(4, 2, 3, 5, 6, critic_state, 7, "cpu")
    assert b.obs.shape == (4, 2, 3, 5) and b.avail.shape == (4, 2, 3, 6)
    assert b.actions.shape == b.logprobs.shape == b.active.shape == (4, 2, 3)
    assert b.values.shape == b.rewards.shape == b.terminated.shape == b.truncated.shape == critic_shape
    assert b.critic_obs.shape == b.final_critic.shape == (*critic_shape, 7)
    assert b.last_critic.shape == (*critic_shape[1:], 7)
    assert b.actions.dtype == torch.long and b.avail.dtype == b.truncated.dtype == torch.bool


def test_buffer_gae_denormalizes_and_bootstraps_from_the_final_state():
    # EP, T = 3, N = 2; the critic is V(x) = x[0], values are stored normalized with mean 1
    # and std 2 (denormalized: 2*v + 1). Environment 1 is truncated at t = 1 with a final
    # state worth 0.5 (2*0.5 + 1 = 2 in return units); last_critic is worth 1.5 and 2.5.
    b = mappo.RolloutBuffer(3, 2, 1, 1, 1, "ep", 1, "cpu")
    norm = mappo.ValueNorm(enabled=True)
    norm.mean, norm.var = 1.0, 4.0
    b.values[:] = t([0, 1], [0.5, 1.5], [1, 2])  # denormalized: [[1, 3], [2, 4], [3, 5]]
    b.rewards[:] = 1.0
    b.truncated[1, 1] = True
    b.final_critic[1, 1, 0] = 0.5
    b.last_critic[:, 0] = t(1.5, 2.5)
    # next_values = [[2, 4], [3, 2 (final state)], [4, 6 (last)]] in return units
    expected = mappo.compute_gae(b.rewards, t([1, 3], [2, 4], [3, 5]),
                                 t([2, 4], [3, 2], [4, 6]), b.terminated, b.truncated, 0.9, 0.8)
    for got, want in zip(b.gae(lambda x: x[..., 0], norm, 0.9, 0.8), expected):
        assert torch.allclose(got, want, atol=1e-6)


# ---------------------------------------------------------------------------------------
# Agents that are done before their environment: Relay is a 2-agent parallel environment
# in which agent "short" terminates after its first step while "long" goes on and is
# truncated after the third. Their observations differ in size (1 and 2) as do their
# action counts (2 and 3); "long" is told by info["action_mask"] that its action 0 is not
# allowed. The state after step k is [k, 10k]; rewards are 1 for short and 2 for long.
# ---------------------------------------------------------------------------------------
class Relay:
    possible_agents = ["short", "long"]
    state_space = gym.spaces.Box(-np.inf, np.inf, (2,))
    sent = []  # the action dicts of every step

    def observation_space(self, agent):
        return gym.spaces.Box(-np.inf, np.inf, (1 if agent == "short" else 2,))

    def action_space(self, agent):
        return gym.spaces.Discrete(2 if agent == "short" else 3)

    def observe(self):
        obs = {a: np.full(self.observation_space(a).shape, self.k, np.float32) for a in self.agents}
        return obs, {a: {"action_mask": np.array([0, 1, 1])} if a == "long" else {} for a in self.agents}

    def reset(self, seed=None, options=None):
        self.k, self.agents = 0, list(self.possible_agents)
        return self.observe()

    def step(self, actions):
        Relay.sent.append(actions)
        self.k += 1
        obs, infos = self.observe()
        rewards = {a: 1.0 if a == "short" else 2.0 for a in self.agents}
        terminated = {a: a == "short" and self.k == 1 for a in self.agents}
        truncated = {a: a == "long" and self.k == 3 for a in self.agents}
        self.agents = [a for a in self.agents if not (terminated[a] or truncated[a])]
        return obs, rewards, terminated, truncated, infos

    def state(self):
        return np.array([self.k, 10 * self.k], np.float32)

    def close(self):
        pass


@pytest.fixture
def relay(monkeypatch):
    """mappo.py on Relay (any cooperative id, here simple_v3, builds a Relay); its spec."""
    monkeypatch.setattr(mappo, "make_env", lambda *args, **kwargs: Relay())
    Relay.sent.clear()
    return mappo.check_env(mappo.Args(env_id="simple_v3"))


def test_a_done_agent_is_inactive_until_its_environment_resets(relay):
    assert relay == {"agents": ["short", "long"], "obs_dims": [1, 2], "action_counts": [2, 3],
                     "state_dim": 2}
    envs = mappo.LockstepEnvs("simple_v3", 1, relay, max_cycles=3)
    obs, state, avail, active = envs.reset(seed=0)
    # padding: short's action 2 does not exist; long's action 0 is masked by the env
    assert avail.tolist() == [[[True, True, False], [False, True, True]]]
    assert active.tolist() == [[True, True]]
    obs, state, avail, active, rewards, terminated, truncated, final_obs, final_state, ended = \
        envs.step(np.array([[1, 2]]))
    assert rewards.tolist() == [[1, 2]] and terminated.tolist() == [[True, False]]
    assert final_obs[0, 0].tolist() == [1, 0] and final_state.tolist() == [[1, 10]]
    assert active.tolist() == [[False, True]] and obs[0, 0].tolist() == [0, 0] and not ended
    out = envs.step(np.array([[1, 1]]))
    assert out[4].tolist() == [[0, 2]] and out[3].tolist() == [[False, True]]
    assert Relay.sent[-1] == {"long": 1}  # nothing is sent for the done agent
    obs, state, _, active, rewards, terminated, truncated, final_obs, final_state, ended = \
        envs.step(np.array([[0, 2]]))
    assert truncated.tolist() == [[False, True]] and final_state.tolist() == [[3, 30]]
    # the episode: short 1, long 2 + 2 + 2 = 6, mean per-agent (1 + 6)/2 = 3.5 over 3 steps
    assert ended == [(0, 3.5, 3)]
    assert active.tolist() == [[True, True]] and state.tolist() == [[0, 0]]  # reset


@pytest.mark.parametrize("critic_state", ["ep", "fp"])
def test_the_buffers_store_active_masks_rewards_and_ends(relay, critic_state, tmp_path, monkeypatch):
    # One copy, T = 4: steps 0-2 are the first episode (short done after step 0), step 3
    # the next episode's first.
    stored = []
    original = mappo.RolloutBuffer.gae
    monkeypatch.setattr(mappo.RolloutBuffer, "gae",
                        lambda self, *a: stored.append(self) or original(self, *a))
    mappo.main(mappo.Args(env_id="simple_v3", critic_state=critic_state, num_envs=1,
                          num_steps=4, total_timesteps=4, eval_episodes=0,
                          output_dir=str(tmp_path)))
    (b,) = stored
    assert b.active.squeeze(1).tolist() == [[1, 1], [0, 1], [0, 1], [1, 1]]
    assert not (b.avail[:, 0, 0, 2] | b.avail[:, 0, 1, 0]).any()  # padding, env mask
    assert (b.actions[:, 0, 1] != 0).all() and (b.actions[:, 0, 0] != 2).all()
    if critic_state == "ep":
        # team rewards: (1 + 2)/2, then long's 2 alone, then (1 + 2)/2 again
        assert b.rewards.squeeze(1).tolist() == [1.5, 2, 2, 1.5]
        assert b.truncated.squeeze(1).tolist() == [False, False, True, False]
        assert not b.terminated.any()  # the episode ended by long's truncation
        assert b.final_critic[2, 0].tolist() == [3, 30]
        assert b.critic_obs[:, 0].tolist() == [[0, 0], [1, 10], [2, 20], [0, 0]]
    else:
        assert b.rewards.squeeze(1).tolist() == [[1, 2], [0, 2], [0, 2], [1, 2]]
        # short terminates after the first step of each episode
        assert b.terminated.squeeze(1).tolist() == [[True, False], [False] * 2, [False] * 2, [True, False]]
        assert b.truncated.squeeze(1).tolist() == [[False] * 2, [False] * 2, [False, True], [False] * 2]
        # state | own obs (padded to 2) | one-hot id
        assert b.final_critic[0, 0, 0].tolist() == [1, 10, 1, 0, 1, 0]
        assert b.final_critic[2, 0, 1].tolist() == [3, 30, 3, 3, 0, 1]
        assert b.critic_obs[1, 0, 0].tolist() == [1, 10, 0, 0, 1, 0]  # done: zero obs


def test_truncation_at_max_cycles_keeps_the_true_final_state():
    spec = mappo.check_env(mappo.Args())
    envs = mappo.LockstepEnvs("simple_spread_v3", 2, spec, max_cycles=2)
    envs.reset(seed=0)
    envs.step(np.zeros((2, 3), dtype=np.int64))
    obs, state, _, _, _, terminated, truncated, final_obs, final_state, ended = \
        envs.step(np.zeros((2, 3), dtype=np.int64))
    assert truncated.all() and not terminated.any() and [e[2] for e in ended] == [2, 2]
    # MPE's state is the agents' observations joined: the final state is the final
    # observations', not the next episode's first state
    assert np.allclose(final_state, final_obs.reshape(2, -1))
    assert np.allclose(state, obs.reshape(2, -1)) and not np.allclose(state, final_state)


def test_runs_of_nearby_seeds_do_not_share_start_states():
    # with copy seeds seed + n, run 2's copy 0 would start where run 1's copy 1 does
    spec = mappo.check_env(mappo.Args())
    starts = [mappo.LockstepEnvs("simple_spread_v3", 2, spec, 25).reset(seed)[1] for seed in (1, 2, 1)]
    assert np.array_equal(starts[0], starts[2])  # the same seed: the same start
    assert not np.allclose(starts[0][1], starts[1][0]) and not np.allclose(starts[0], starts[1])


# ---------------------------------------------------------------------------------------
# Heterogeneous agents: simple_speaker_listener_v4's speaker sees 3 numbers and has 3
# actions, its listener 11 and 5.
# ---------------------------------------------------------------------------------------
def test_shared_actor_pads_observations_and_masks_missing_actions():
    spec = mappo.check_env(mappo.Args(env_id="simple_speaker_listener_v4"))
    assert spec["obs_dims"] == [3, 11] and spec["action_counts"] == [3, 5]
    envs = mappo.LockstepEnvs("simple_speaker_listener_v4", 2, spec, max_cycles=25)
    obs, state, avail, _ = envs.reset(seed=0)
    assert obs.shape == (2, 2, 11) and state.shape == (2, 14) and not obs[:, 0, 3:].any()
    assert avail[0].tolist() == [[True] * 3 + [False] * 2, [True] * 5]
    torch.manual_seed(0)
    actors = mappo.Actors([3, 11], 5, share=True)
    obs, avail = torch.from_numpy(obs).expand(500, 2, 2, 11), torch.from_numpy(avail).expand(500, 2, 2, 5)
    actions, _ = actors.act(obs, avail)
    assert actions[..., 0].max() == 2 and actions[..., 1].max() == 4  # the listener uses all 5
    per_agent = mappo.Actors([3, 11], 5, share=False)
    assert [a[1].in_features for a in per_agent.actors] == [3, 11]  # a[0]: no LayerNorm
    assert per_agent.logits(obs, avail).shape == (500, 2, 2, 5)


def test_heterogeneous_agents_train_with_one_actor_each_fp_and_layer_norm(tmp_path, check_run_folder):
    summary = mappo.main(mappo.Args(env_id="simple_speaker_listener_v4", share_actor=False,
                                    critic_state="fp", layer_norm=True, num_envs=2, num_steps=25,
                                    total_timesteps=100, eval_episodes=2, save_model=True,
                                    output_dir=str(tmp_path)))
    path, _, _ = check_run_folder(summary, tmp_path, "mappo", model=True)
    state = torch.load(os.path.join(path, "model.pt"), weights_only=True)
    # one actor per agent, each on its own observation (3 and 11 wide), LayerNorm first
    assert [state["actors"][f"actors.{i}.0.weight"].shape for i in (0, 1)] == [(3,), (11,)]
    assert state["actors"]["actors.1.1.weight"].shape == (64, 11)


# ---------------------------------------------------------------------------------------
# Runs end to end
# ---------------------------------------------------------------------------------------
TINY = dict(num_envs=2, num_steps=10, max_cycles=5, total_timesteps=60)


@pytest.mark.parametrize("critic_state", ["ep", "fp"])
def test_smoke_run_writes_every_file_and_its_model_evaluates(critic_state, tmp_path, check_run_folder):
    summary = mappo.main(mappo.Args(critic_state=critic_state, eval_episodes=2, save_model=True,
                                    output_dir=str(tmp_path / "train"), **TINY))
    path, episodes, updates = check_run_folder(summary, tmp_path / "train", "mappo", model=True)
    assert summary["global_steps"] == 60 and len(updates) == 3
    # 2 copies x 60/2 steps / 5 steps per episode = 12 episodes of 5 steps
    assert len(episodes) == 12 and {e["episode_length"] for e in episodes} == {"5"}
    assert {"policy_loss", "value_loss", "entropy", "approx_kl", "explained_variance"} <= set(updates[0])
    evaluated = mappo.main(mappo.Args(eval_checkpoint=os.path.join(path, "model.pt"),
                                      eval_episodes=2, output_dir=str(tmp_path / "eval")))
    assert evaluated["eval_return_mean"] == pytest.approx(summary["eval_return_mean"])


def test_stop_at_return_stops_and_records_when(tmp_path):
    # returns are negative but never below -1000: 20 episodes are enough
    summary = mappo.main(mappo.Args(stop_at_return=-1000.0, eval_episodes=0,
                                    output_dir=str(tmp_path), **{**TINY, "total_timesteps": 1000}))
    episodes = read_csv(next(tmp_path.glob("*/episodes.csv")))
    assert len(episodes) >= 20 and summary["solved_at_step"] == int(episodes[19]["global_step"])
    assert summary["global_steps"] == summary["solved_at_step"] < 1000


def test_interrupted_run_keeps_its_data(tmp_path, monkeypatch):
    monkeypatch.setattr(mappo.Adam, "step", interrupt_on_call(12, mappo.Adam.step))
    summary = mappo.main(mappo.Args(save_model=True, output_dir=str(tmp_path), **TINY))
    (path,) = tmp_path.iterdir()
    assert summary["interrupted"] is True and summary["eval_return_mean"] is None
    assert len(read_csv(path / "updates.csv")) == 1 and read_csv(path / "episodes.csv")
    assert (path / "learning_curve.png").exists() and (path / "model.pt").exists()


def test_nan_loss_stops_cleanly(tmp_path, monkeypatch):
    original = mappo.mappo_loss
    monkeypatch.setattr(mappo, "mappo_loss", lambda *a, **k: (original(*a, **k)[0] * math.nan,
                                                              *original(*a, **k)[1:]))
    summary = mappo.main(mappo.Args(output_dir=str(tmp_path), **TINY))
    assert summary["interrupted"] is True and summary["global_steps"] == 20
    assert (next(tmp_path.iterdir()) / "summary.json").exists()


@pytest.mark.parametrize("critic_state", ["ep", "fp"])
def test_same_seed_gives_the_same_episodes(critic_state, tmp_path):
    rows = same_seed_episodes(lambda out: mappo.main(mappo.Args(
        critic_state=critic_state, eval_episodes=0, output_dir=out,
        **{**TINY, "total_timesteps": 200})), tmp_path)
    assert len(rows) == 40
    assert len({r[1] for r in rows}) > 30  # the returns differ from episode to episode


# ---------------------------------------------------------------------------------------
# Bad input: one line on stderr, exit status 2, nothing trained
# ---------------------------------------------------------------------------------------
@pytest.fixture
def bad_checkpoints(tmp_path):
    def save(path, args, critic_dim=54, hidden_size=64):
        actors = mappo.Actors([18] * 3, 5, True, hidden_size)
        mappo.save_checkpoint(path, actors, mappo.Critic(critic_dim, hidden_size),
                              mappo.ValueNorm(True), args)
        return str(path)

    corrupt = tmp_path / "corrupt.pt"
    corrupt.write_bytes(b"this is not a checkpoint")
    return {"missing": str(tmp_path / "missing.pt"), "corrupt": str(corrupt),
            "reference": save(tmp_path / "reference.pt", mappo.Args(env_id="simple_reference_v3")),
            # says 32 hidden units, holds 64-unit networks
            "misfit": save(tmp_path / "misfit.pt", mappo.Args(hidden_size=32))}


@pytest.mark.parametrize("argv, message", [
    (["--env-id", "simple_spread_v2"], "unknown environment id 'simple_spread_v2'; did you "
     "mean simple_spread_v3"),
    (["--env-id", "foo"], "the MPE tasks are collect_treasure_v1, simple_formation_v1"),
    (["--env-id", "CartPole-v1"], "CartPole-v1 is a single-agent Gymnasium environment; use ppo.py"),
    (["--env-id", "simple_tag_v3"], "simple_tag_v3 is a competitive MPE task"),
    (["--continuous-actions"], "has a Box action space (--continuous-actions); mappo.py's "
     "actors are categorical"),
    (["--num-envs", "3", "--num-steps", "5", "--num-minibatches", "4"],
     "num_envs*num_steps = 15 is not divisible by --num-minibatches 4"),
    (["--num-envs", "0"], "--num-envs must be positive"),
    (["--max-cycles", "0"], "--max-cycles must be positive"),
    (["--total-timesteps", "-5"], "--total-timesteps must be positive"),
    (["--total-timesteps", "100"], "less than one rollout"),
    (["--learning-rate", "0"], "--learning-rate must be positive"),
    (["--gae-lambda", "1.5"], "--gae-lambda must be in [0, 1]"),
    (["--eval-checkpoint", "missing"], "does not exist"),
    (["--eval-checkpoint", "corrupt"], "is not a mappo.py model.pt"),
    (["--eval-checkpoint", "reference"], "was made for simple_reference_v3, not simple_spread_v3; "
     "pass --env-id simple_reference_v3"),
    (["--eval-checkpoint", "misfit"], "does not fit simple_spread_v3's networks"),
])
def test_bad_input_is_one_line_and_exit_status_2(argv, message, check_usage_error, bad_checkpoints):
    check_usage_error("mappo.py", [bad_checkpoints.get(a, a) for a in argv], message)


def test_help_lists_the_flags_with_their_docstrings(check_help):
    check_help("mappo.py", ("--cuda", "--no-cuda", "--critic-state", "--no-share-actor",
                            "--value-norm", "--max-cycles", "--num-envs"),
               ("lambda of GAE", "ep = env.state(), team reward"))


def test_importing_the_script_has_no_side_effects(tmp_path):
    check_import_is_quiet("mappo", tmp_path)


def test_capture_video_records_each_evaluation_episode(tmp_path):
    mappo.main(mappo.Args(eval_episodes=2, capture_video=True, output_dir=str(tmp_path),
                          **{**TINY, "max_cycles": 3}))
    videos = sorted(p.name for p in tmp_path.glob("*/videos/*.mp4"))
    assert videos == ["eval-0-episode-0.mp4", "eval-1-episode-0.mp4"]

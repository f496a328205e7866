"""Tests of ddpg_td3.py: the math by hand, the buffer, the update's schedule, runs end to
end, bad input, determinism."""
import math
import os

import gymnasium as gym
import numpy as np
import pytest
import torch
import tyro

import ddpg_td3
from conftest import (CountingEnv, approx, check_import_is_quiet, interrupt_on_call, read_csv,
                      same_seed_episodes, tensor)


# ---------------------------------------------------------------------------------------
# The critic target by hand. Three transitions, gamma = 0.5, rewards 1; the second one
# terminated, the third one was cut by a time limit (truncated, so not terminated: its s'
# is the true final observation and it bootstraps like any other step).
# ---------------------------------------------------------------------------------------
REWARDS, TERMINATED = tensor(1, 1, 1), tensor(0, 1, 0)
NEXT_Q1, NEXT_Q2 = tensor(2, 4, 6), tensor(3, 1, 2)


def test_twin_target_takes_the_smaller_critic_and_stops_at_termination():
    # min(Q1', Q2') = [2, 1, 2]
    # y = [1 + 0.5*2, 1 + 0.5*0*1 (terminated), 1 + 0.5*2 (truncated: bootstraps)] = [2, 1, 2]
    y = ddpg_td3.td3_target(REWARDS, NEXT_Q1, NEXT_Q2, TERMINATED, 0.5, twin_q=True)
    assert y.tolist() == approx([2.0, 1.0, 2.0])


def test_single_critic_target_uses_q1_alone():
    # y = [1 + 0.5*2, 1 (terminated), 1 + 0.5*6] = [2, 1, 4]; next_q2 is not needed
    y = ddpg_td3.td3_target(REWARDS, NEXT_Q1, None, TERMINATED.bool(), 0.5, twin_q=False)
    assert y.tolist() == approx([2.0, 1.0, 4.0])


def test_target_with_every_step_terminated_is_the_reward():
    # gamma*(1 - 1)*anything = 0: y = r, whatever the critics say
    y = ddpg_td3.td3_target(tensor(0.5, -2), tensor(100, 100), tensor(50, 50), tensor(1, 1), 0.99)
    assert y.tolist() == approx([0.5, -2.0])


# ---------------------------------------------------------------------------------------
# Noise, bounds and soft updates
# ---------------------------------------------------------------------------------------
def test_target_smoothing_noise_stays_within_noise_clip_and_actions_within_bounds():
    torch.manual_seed(0)
    mu = tensor(-0.9, 0.0, 0.9).repeat(5000, 1).T  # [3, 5000]: three target actions
    smoothed = ddpg_td3.noisy_action(mu, sigma=1.0, noise_clip=0.5)
    noise = smoothed - mu
    assert noise.abs().max() <= 0.5 + 1e-6 and smoothed.abs().max() <= 1.0
    # sigma = 1 >> c = 0.5: the clip is reached on both sides where the bounds allow it
    assert noise[1].max() == approx(0.5) and noise[1].min() == approx(-0.5)
    assert smoothed[2].max() == 1.0 and smoothed[0].min() == -1.0  # 0.9 + 0.5 is cut to 1
    assert noise[2].max() == approx(0.1) and noise[2].min() == approx(-0.5)


def test_exploration_noise_is_not_clipped_but_actions_are():
    torch.manual_seed(0)
    mu = torch.zeros(20000, 1)
    explored = ddpg_td3.noisy_action(mu, sigma=0.3)
    assert explored.std().item() == pytest.approx(0.3, rel=0.05)
    assert explored.abs().max() <= 1.0 and (explored.abs() > 0.5).any()  # beyond TD3's clip
    assert ddpg_td3.noisy_action(mu, sigma=0.0) is mu  # no noise: DDPG's target action


def test_actions_are_scaled_to_the_bounds_of_each_dimension():
    # low + (a + 1)/2 * (high - low) with low = [0, -2], high = [4, 2]:
    #   a = [-1, 1]  -> [0 + 0*4, -2 + 1*4]   = [0, 2]
    #   a = [0, 0.5] -> [0 + 0.5*4, -2 + 0.75*4] = [2, 1]
    space = gym.spaces.Box(np.array([0, -2], np.float32), np.array([4, 2], np.float32))
    actions = ddpg_td3.to_env_action(tensor([-1, 1], [0, 0.5]), space)
    assert actions.tolist() == [[0.0, 2.0], [2.0, 1.0]]


def test_soft_update_by_hand():
    # theta' <- 0.25*theta + 0.75*theta': [0.25*2 + 0.75*0, 0.25*20 + 0.75*10] = [0.5, 12.5]
    target, source = tensor(0, 10), tensor(2, 20)
    ddpg_td3.soft_update(target, source, 0.25)
    assert target.tolist() == [0.5, 12.5] and source.tolist() == [2.0, 20.0]
    ddpg_td3.soft_update(target, source, 1.0)  # tau = 1 copies
    assert target.tolist() == [2.0, 20.0]


# ---------------------------------------------------------------------------------------
# Networks and the optimizer
# ---------------------------------------------------------------------------------------
def test_twin_critics_in_one_pass_are_two_independent_networks():
    torch.manual_seed(0)
    critics = ddpg_td3.Critics(2, obs_dim=3, action_dim=2, hidden_size=8)
    obs, actions = torch.randn(5, 3), torch.randn(5, 2)
    q = critics(obs, actions)
    assert q.shape == (2, 5)
    for i in range(2):  # each critic on its own, layer by layer
        x = torch.cat([obs, actions], dim=1)
        for layer, (weight, bias) in enumerate(critics.layers):
            x = x @ weight[i] + bias[i]
            x = torch.relu(x) if layer < 2 else x
        assert torch.allclose(q[i], x.squeeze(1), atol=1e-6)


def test_actor_loss_reaches_the_actions_but_not_the_critics():
    critics = ddpg_td3.Critics(2, 3, 2, 8)
    obs, actions = torch.randn(5, 3), torch.randn(5, 2, requires_grad=True)
    q1 = critics(obs, actions, first_only=True)
    assert q1.shape == (1, 5) and torch.allclose(q1[0], critics(obs, actions)[0])
    q1.mean().backward()
    assert actions.grad.abs().sum() > 0
    assert all(p.grad is None for p in critics.parameters())


def test_actor_outputs_are_within_minus_one_and_one():
    actor = ddpg_td3.Actor(3, 2, 8)
    out = actor(torch.randn(100, 3) * 100)
    assert out.shape == (100, 2) and out.abs().max() <= 1.0


def test_adam_on_flat_parameters_matches_torch_optim_adam():
    torch.manual_seed(0)
    mine, reference = (ddpg_td3.Critics(2, 3, 1, 8) for _ in range(2))
    reference.load_state_dict(mine.state_dict())
    params, grads = ddpg_td3.flatten_parameters(mine)
    assert params.numel() == sum(p.numel() for p in reference.parameters())
    initial = params.clone()
    opt_mine = ddpg_td3.Adam(params, grads, lr=1e-2)
    opt_ref = torch.optim.Adam(reference.parameters(), lr=1e-2)
    obs, actions, y = torch.randn(16, 3), torch.randn(16, 1), torch.randn(16)
    for _ in range(5):
        for critics, opt in ((mine, opt_mine), (reference, opt_ref)):
            opt.zero_grad()
            (critics(obs, actions) - y).pow(2).mean().backward()
            opt.step()
    assert grads.abs().sum() > 0  # backward wrote into the flat gradient vector
    for p, q in zip(mine.parameters(), reference.parameters()):
        assert torch.allclose(p, q, atol=1e-6)
    assert not torch.allclose(params, initial)  # it did move


# ---------------------------------------------------------------------------------------
# The replay buffer
# ---------------------------------------------------------------------------------------
def transitions(first, n):
    """n transitions numbered from `first`, each field saying which one it is:
    obs [i, i], action i/10, reward i, terminated i % 2, next_obs [i + 0.5, i + 0.5]."""
    i = np.arange(first, first + n, dtype=np.float32)
    return (np.stack([i, i], 1), (i / 10)[:, None], i, (i % 2).astype(bool),
            np.stack([i + 0.5, i + 0.5], 1))


def test_buffer_wraps_around_and_keeps_constant_memory():
    buffer = ddpg_td3.ReplayBuffer(5, obs_dim=2, action_dim=1, device="cpu")
    assert buffer.table.shape == (5, 2 + 1 + 1 + 1 + 2)
    buffer.add(*transitions(0, 3))
    assert (buffer.pos, buffer.size) == (3, 3)
    buffer.add(*transitions(3, 4))  # 3, 4 fill rows 3, 4; 5, 6 overwrite rows 0, 1
    assert (buffer.pos, buffer.size) == (2, 5) and buffer.table.shape == (5, 7)
    assert buffer.table[:, 3].tolist() == [5, 6, 2, 3, 4]  # the rewards: the newest five


def test_buffer_samples_whole_transitions_of_the_stored_ones():
    torch.manual_seed(0)
    buffer = ddpg_td3.ReplayBuffer(5, 2, 1, "cpu")
    buffer.add(*transitions(0, 7))  # keeps 2..6
    obs, actions, rewards, terminated, next_obs = buffer.sample(64)
    assert obs.shape == (64, 2) and actions.shape == (64, 1) and next_obs.shape == (64, 2)
    assert rewards.shape == (64,) and terminated.shape == (64,)
    i = rewards  # every field of a row belongs to the same transition
    assert torch.equal(obs[:, 0], i) and torch.allclose(actions[:, 0], i / 10)
    assert torch.equal(terminated, i % 2) and torch.equal(next_obs[:, 1], i + 0.5)
    assert set(i.tolist()) == {2.0, 3.0, 4.0, 5.0, 6.0}


# ---------------------------------------------------------------------------------------
# Flags and the update's schedule
# ---------------------------------------------------------------------------------------
def test_algo_sets_the_three_improvements_and_each_flag_overrides_it():
    resolve = lambda argv: ddpg_td3.resolve_algo(tyro.cli(ddpg_td3.Args, args=argv))
    td3, ddpg = resolve([]), resolve(["--algo", "ddpg"])
    assert (td3.twin_q, td3.target_policy_noise, td3.policy_delay) == (True, 0.2, 2)
    assert (ddpg.twin_q, ddpg.target_policy_noise, ddpg.policy_delay) == (False, 0.0, 1)
    assert ddpg_td3.algorithm_name(td3) == "td3" and ddpg_td3.algorithm_name(ddpg) == "ddpg"
    one_on = resolve(["--algo", "ddpg", "--twin-q"])
    assert (one_on.twin_q, one_on.target_policy_noise, one_on.policy_delay) == (True, 0.0, 1)
    assert ddpg_td3.algorithm_name(one_on) == "ddpg+twin_q"
    one_off = resolve(["--no-twin-q", "--policy-delay", "3"])
    assert ddpg_td3.algorithm_name(one_off) == "ddpg+target_policy_noise+policy_delay"


def random_batch(n=32):
    gen = torch.Generator().manual_seed(1)
    return (torch.randn(n, 3, generator=gen), torch.rand(n, 1, generator=gen) * 2 - 1,
            torch.randn(n, generator=gen), torch.zeros(n), torch.randn(n, 3, generator=gen))


def test_policy_delay_counts_gradient_steps():
    args = ddpg_td3.resolve_algo(ddpg_td3.Args(policy_delay=3, hidden_size=8))
    agent = ddpg_td3.Agent(3, 1, args, "cpu")
    watched = [agent.actor_params, agent.actor_target_params, agent.critics_target_params,
               agent.critic_params]
    changed = []
    for _ in range(6):
        before = [w.clone() for w in watched]
        agent.update(*random_batch())
        changed.append([not torch.equal(b, w) for b, w in zip(before, watched)])
    # the actor and both targets move on the 3rd and 6th critic step only; the critics always
    assert changed == [[False, False, False, True]] * 2 + [[True] * 4] + \
        [[False, False, False, True]] * 2 + [[True] * 4]
    assert agent.gradient_steps == 6
    stats = agent.pop_stats()
    assert math.isfinite(stats["critic_loss"]) and math.isfinite(stats["actor_loss"])
    assert math.isnan(agent.pop_stats()["critic_loss"])  # nothing since the last call


def test_ddpg_has_one_critic_and_updates_the_actor_every_step():
    args = ddpg_td3.resolve_algo(ddpg_td3.Args(algo="ddpg", hidden_size=8))
    agent = ddpg_td3.Agent(3, 1, args, "cpu")
    assert agent.critics.layers[0][0].shape == (1, 3 + 1, 8)
    for _ in range(2):
        before = agent.actor_params.clone()
        agent.update(*random_batch())
        assert not torch.equal(before, agent.actor_params)


# ---------------------------------------------------------------------------------------
# Episode ends through the whole loop: environments whose observation counts their steps
# and whose episodes end after 3 steps, by a time limit (truncated) or by termination.
# ---------------------------------------------------------------------------------------
class BoxCountingEnv(CountingEnv):
    action_space = gym.spaces.Box(-1.0, 1.0, (1,))


class TerminatingEnv(BoxCountingEnv):
    terminate_at = 3


class UnboundedEnv(BoxCountingEnv):
    action_space = gym.spaces.Box(-np.inf, np.inf, (1,))


class ImageEnv(BoxCountingEnv):
    observation_space = gym.spaces.Box(0.0, 1.0, (2, 2))


class TableEnv(BoxCountingEnv):
    observation_space = gym.spaces.Discrete(4)


class NoDisplayEnv(BoxCountingEnv):
    """Renders as MuJoCo does on a machine without a display."""
    metadata = {"render_modes": ["rgb_array"]}

    def __init__(self, render_mode=None):
        self.render_mode = render_mode

    def render(self):
        raise RuntimeError("no OpenGL context\nsecond line")


gym.register("BoxCountToThree-v0", entry_point=BoxCountingEnv, max_episode_steps=3)
gym.register("BoxTerminateAtThree-v0", entry_point=TerminatingEnv)
gym.register("UnboundedCount-v0", entry_point=UnboundedEnv)
gym.register("BoxImage-v0", entry_point=ImageEnv)
gym.register("BoxTable-v0", entry_point=TableEnv)
gym.register("NoDisplay-v0", entry_point=NoDisplayEnv)
gym.register("ShortPendulum-v1", entry_point="gymnasium.envs.classic_control.pendulum:PendulumEnv",
             max_episode_steps=20)


@pytest.mark.parametrize("env_id, terminated", [("BoxCountToThree-v0", False),
                                                ("BoxTerminateAtThree-v0", True)])
def test_episode_ends_store_the_true_final_observation(env_id, terminated, tmp_path, monkeypatch):
    stored, targets = [], []
    add, update, target = ddpg_td3.ReplayBuffer.add, ddpg_td3.Agent.update, ddpg_td3.td3_target

    def spy_add(self, obs, actions, rewards, term, next_obs):
        stored.extend(zip(obs[:, 0], term, next_obs[:, 0]))
        return add(self, obs, actions, rewards, term, next_obs)

    def spy_update(self, obs, *batch):
        targets.append([obs[:, 0]])
        return update(self, obs, *batch)

    def spy_target(*args, **kwargs):
        targets[-1].append(target(*args, **kwargs))
        return targets[-1][-1]

    monkeypatch.setattr(ddpg_td3.ReplayBuffer, "add", spy_add)
    monkeypatch.setattr(ddpg_td3.Agent, "update", spy_update)
    monkeypatch.setattr(ddpg_td3, "td3_target", spy_target)
    summary = ddpg_td3.main(ddpg_td3.Args(env_id=env_id, total_timesteps=12, num_envs=2,
                                          learning_starts=6, batch_size=16, hidden_size=8,
                                          eval_episodes=1, output_dir=str(tmp_path)))
    # Each environment sees 0, 1, 2, then the episode ends and the next one starts at 0.
    # The step from 2 stores s' = 3, the true last observation, not the next episode's 0;
    # it is marked terminated only where the episode really terminated.
    assert stored == [(0, False, 1), (0, False, 1), (1, False, 2), (1, False, 2),
                      (2, terminated, 3), (2, terminated, 3)] * 2
    # In the updates (at steps 6, 8, 10, 12) the target of that last step is the reward 1
    # alone where it terminated, and bootstraps, r + gamma*min Q'(s', a') != 1, where the
    # time limit cut it; every other step bootstraps.
    last = torch.cat([obs for obs, _ in targets]) == 2
    bootstrapped = (torch.cat([y for _, y in targets]) - 1).abs() > 1e-6
    assert len(targets) == 4 and last.any() and (~last).any()
    assert torch.equal(bootstrapped, ~last if terminated else torch.ones_like(last))
    episodes = read_csv(next(tmp_path.glob("*/episodes.csv")))
    assert [(e["global_step"], e["episode_return"], e["episode_length"]) for e in episodes] == \
        [("6", "3.0", "3"), ("6", "3.0", "3"), ("12", "3.0", "3"), ("12", "3.0", "3")]
    assert summary["eval_return_mean"] == 3.0


# ---------------------------------------------------------------------------------------
# Runs end to end
# ---------------------------------------------------------------------------------------
TINY = dict(env_id="Pendulum-v1", total_timesteps=600, learning_starts=200, batch_size=32,
            hidden_size=16, log_interval=200)


@pytest.mark.parametrize("algo", ["td3", "ddpg"])
def test_smoke_run_writes_every_file_and_its_model_evaluates(algo, tmp_path, check_run_folder):
    args = ddpg_td3.Args(**TINY, algo=algo, eval_episodes=2, save_model=True,
                         output_dir=str(tmp_path / "train"))
    summary = ddpg_td3.main(args)
    path, episodes, updates = check_run_folder(summary, args.output_dir, algo, model=True)
    # 600 Pendulum steps are 3 episodes of 200; a row of updates.csv every 200 steps once
    # learning started at step 200: at 200, 400 and 600
    assert [e["episode_length"] for e in episodes] == ["200"] * 3
    assert [u["global_step"] for u in updates] == ["200", "400", "600"]
    assert list(updates[0])[3:] == ["critic_loss", "q_mean", "actor_loss", "gradient_steps"]
    assert updates[-1]["gradient_steps"] == "401"
    assert all(math.isfinite(float(u["critic_loss"])) for u in updates)
    assert summary["eval_return_mean"] < 0 and summary["eval_episodes"] == 2  # Pendulum's costs
    state = torch.load(os.path.join(path, "model.pt"), weights_only=True)
    assert state["critics"]["weights.0"].shape[0] == (2 if algo == "td3" else 1)

    evaluated = ddpg_td3.main(ddpg_td3.Args(eval_checkpoint=os.path.join(path, "model.pt"),
                                            eval_episodes=2, hidden_size=64,
                                            output_dir=str(tmp_path / "eval")))
    assert evaluated["eval_return_mean"] == summary["eval_return_mean"]  # same policy, seeds
    assert evaluated["global_steps"] == 0 and evaluated["algorithm"] == algo


def test_stop_at_return_stops_and_records_when(tmp_path):
    # Every Pendulum return is above -100000, so the 20-episode mean reaches it as soon as
    # 20 episodes have ended: 4 environments * 200 steps * 5 rounds = 4000 steps.
    summary = ddpg_td3.main(ddpg_td3.Args(total_timesteps=8000, num_envs=4, learning_starts=6000,
                                          stop_at_return=-100000, eval_episodes=0,
                                          output_dir=str(tmp_path)))
    episodes = read_csv(next(tmp_path.glob("*/episodes.csv")))
    assert len(episodes) == 20 and summary["solved_at_step"] == 4000
    assert summary["global_steps"] == 4000 and summary["solved_at_time_s"] is not None


def test_interrupted_run_keeps_its_data(tmp_path, monkeypatch):
    monkeypatch.setattr(ddpg_td3.Adam, "step", interrupt_on_call(3))
    summary = ddpg_td3.main(ddpg_td3.Args(**{**TINY, "learning_starts": 400, "log_interval": 1},
                                          save_model=True, output_dir=str(tmp_path)))
    (path,) = tmp_path.iterdir()
    # Adam steps: critic at step 400 (1), critic (2) and actor (3) at step 401
    assert summary["interrupted"] is True and summary["eval_return_mean"] is None
    assert summary["global_steps"] == 401
    assert [u["global_step"] for u in read_csv(path / "updates.csv")] == ["400"]
    assert len(read_csv(path / "episodes.csv")) == 2
    assert (path / "learning_curve.png").exists() and (path / "model.pt").exists()


def test_nan_loss_stops_cleanly(tmp_path, monkeypatch):
    monkeypatch.setattr(ddpg_td3, "td3_target", lambda rewards, *a, **k: rewards * math.nan)
    summary = ddpg_td3.main(ddpg_td3.Args(**{**TINY, "log_interval": 100},
                                          output_dir=str(tmp_path)))
    (path,) = tmp_path.iterdir()
    assert summary["interrupted"] is True and summary["global_steps"] == 200
    assert read_csv(path / "updates.csv")[0]["critic_loss"] == "nan"
    assert (path / "summary.json").exists()


def test_same_seed_gives_the_same_episodes(tmp_path):
    rows = same_seed_episodes(lambda out: ddpg_td3.main(ddpg_td3.Args(
        **{**TINY, "total_timesteps": 1000, "num_envs": 2}, eval_episodes=0, output_dir=out)),
        tmp_path)
    assert len(rows) == 4  # 2 environments * 500 steps, the last two after 300 of learning


def test_capture_video_records_each_evaluation_episode(tmp_path):
    ddpg_td3.main(ddpg_td3.Args(**{**TINY, "env_id": "ShortPendulum-v1", "total_timesteps": 300},
                                eval_episodes=2, capture_video=True, output_dir=str(tmp_path)))
    videos = sorted(p.name for p in tmp_path.glob("*/videos/*.mp4"))
    assert videos == ["eval-0-episode-0.mp4", "eval-1-episode-0.mp4"]


# ---------------------------------------------------------------------------------------
# Bad input: one line on stderr, exit status 2, nothing trained
# ---------------------------------------------------------------------------------------
@pytest.fixture
def bad_checkpoints(tmp_path):
    corrupt = tmp_path / "corrupt.pt"
    corrupt.write_bytes(b"this is not a checkpoint")
    mountain_car = tmp_path / "mountain_car.pt"
    args = ddpg_td3.resolve_algo(ddpg_td3.Args(env_id="MountainCarContinuous-v0", hidden_size=8))
    ddpg_td3.save_checkpoint(mountain_car, ddpg_td3.Agent(2, 1, args, "cpu"), args)
    return {"missing": str(tmp_path / "missing.pt"), "corrupt": str(corrupt),
            "mountain_car": str(mountain_car)}


@pytest.mark.parametrize("argv, message", [
    (["--env-id", "Pendulum-v9"], "unknown environment id 'Pendulum-v9'; did you mean Pendulum-v1"),
    (["--env-id", "CartPole-v1"], "Discrete action space; ddpg_td3.py needs continuous (Box) "
                                  "actions (for discrete ones use dqn.py or ppo.py)"),
    (["--env-id", "SpinTheBits-v0"], "MultiBinary action space"),
    (["--env-id", "UnboundedCount-v0"], "unbounded actions"),
    (["--env-id", "BoxImage-v0"], "observations of shape (2, 2)"),
    (["--env-id", "BoxTable-v0"], "Discrete observation space"),
    (["--env-id", "NoDisplay-v0", "--capture-video"],
     "cannot record videos of NoDisplay-v0 (RuntimeError: no OpenGL context); for MuJoCo"),
    (["--num-envs", "4", "--total-timesteps", "1001"],
     "--total-timesteps 1001 is not divisible by --num-envs 4"),
    (["--num-envs", "0"], "--num-envs must be positive"),
    (["--total-timesteps", "-5"], "--total-timesteps must be positive"),
    (["--total-timesteps", "1000"], "--learning-starts 1000 leaves no step"),
    (["--batch-size", "0"], "--batch-size must be positive"),
    (["--policy-delay", "0"], "--policy-delay must be positive"),
    (["--learning-rate", "0"], "--learning-rate must be positive"),
    (["--target-policy-noise", "-0.1"], "--target-policy-noise must be 0 or more"),
    (["--noise-clip", "0"], "--noise-clip 0 cancels --target-policy-noise"),
    (["--gamma", "1.5"], "--gamma must be in [0, 1]"),
    (["--tau", "0"], "--tau must be in (0, 1]"),
    (["--eval-checkpoint", "missing"], "does not exist"),
    (["--eval-checkpoint", "corrupt"], "is not a ddpg_td3.py model.pt"),
    (["--eval-checkpoint", "mountain_car"],
     "was made for MountainCarContinuous-v0, not Pendulum-v1; pass --env-id MountainCarContinuous-v0"),
])
def test_bad_input_is_one_line_and_exit_status_2(argv, message, check_usage_error, bad_checkpoints):
    check_usage_error("ddpg_td3.py", [bad_checkpoints.get(a, a) for a in argv], message)


def test_help_lists_the_flags_with_their_docstrings(check_help):
    check_help("ddpg_td3.py", ("--cuda", "--no-cuda", "--algo", "--twin-q", "--no-twin-q",
                               "--target-policy-noise", "--noise-clip", "--policy-delay",
                               "--exploration-noise", "--learning-starts", "--tau"),
               ("clipped double Q", "set by --algo"))


def test_importing_the_script_has_no_side_effects(tmp_path):
    check_import_is_quiet("ddpg_td3", tmp_path)

"""Settings that follow the environment (issue 107): each script's PRESETS, which family an
environment's spaces pick (the block's family(), tested once), a flag given winning over its
preset (fill_preset), the run's first lines and closing line naming the preset, bad input, and
each reference environment's default command keeping the settings it had before the presets."""
import json
import os
import re
import typing

import gymnasium as gym
import pytest

import ddpg_td3
import dqn
import es
import impala
import ppo
import ppo_lstm
import ppo_rnd
import pqn
import sac
import trpo
import vpg

WITH_PRESETS = {"ppo": ppo, "trpo": trpo, "vpg": vpg, "pqn": pqn, "ppo_lstm": ppo_lstm,
                "es": es, "sac": sac, "ddpg_td3": ddpg_td3, "ppo_rnd": ppo_rnd, "impala": impala}

# Each reference environment's settings before the presets (git d32790d, the flags' defaults),
# written out here: the preset its default command takes must give these, so that the default
# command learns as it did (benchmarks/same_episodes.py checks the episodes themselves).
BEFORE = {
    "ppo": ("discrete", dict(num_envs=8, num_steps=64, learning_rate=4e-3, gamma=0.98,
                             gae_lambda=0.9, num_minibatches=2, update_epochs=10, clip_coef=0.2,
                             clip_vloss=False, ent_coef=0.0, norm_obs=False, norm_reward=False)),
    "trpo": ("discrete", dict(num_envs=8, num_steps=256, vf_minibatches=32, norm_obs=False,
                              hidden_size=64)),
    "vpg": ("discrete", dict(num_envs=8, num_steps=256, learning_rate=1e-2, vf_iters=20,
                             vf_minibatches=4)),
    "pqn": ("discrete", dict(num_envs=32, num_steps=64, learning_rate=2.5e-4, num_minibatches=16,
                             update_epochs=4, exploration_fraction=0.2, reward_scale=0.1,
                             adam_eps=3e-4, hidden_size=128)),
    "ppo_lstm": ("discrete", dict(num_steps=32, data_chunk_length=8, num_minibatches=2,
                                  anneal_steps=100_000, gamma=0.99, gae_lambda=0.8,
                                  anneal_clip=True, ent_coef=0.0)),
    # ppo_rnd.py's before its presets (git 185c067)
    "ppo_rnd": ("discrete", dict(num_envs=8, num_steps=128, learning_rate=1e-3,
                                 num_minibatches=4, update_epochs=4, norm_reward=False,
                                 int_coef=256.0)),
    "es": ("discrete", dict(sigma=0.05, learning_rate=0.05, l2_coef=0.005,
                            episodes_per_member=1)),
    # impala.py's before its presets (git cb8dec3)
    "impala": ("discrete", dict(num_envs=8, num_steps=32, rollouts_per_batch=1,
                                learning_rate=2e-3, ent_coef=0.01, max_grad_norm=0.5)),
    "sac": ("continuous", dict(learning_starts=500, batch_size=128, learning_rate=2e-3,
                               gamma=0.98, tau=0.02, alpha=0.1, hidden_size=64)),
    "ddpg_td3": ("continuous", dict(learning_starts=1000, batch_size=128, learning_rate=1e-3,
                                    gamma=0.98, tau=0.02, hidden_size=64)),
}


def test_the_family_is_read_from_the_spaces_by_hand():
    # a flat observation with Discrete actions (CartPole's (4,)), with Box actions (Pendulum's
    # (3,)), and images of three axes (MinAtar's 10 x 10 x 4, Atari's 4 x 84 x 84) whatever the
    # actions: the image wins over the actions
    assert ppo.family((4,), continuous=False) == "discrete"
    assert ppo.family((3,), continuous=True) == "continuous"
    assert ppo.family((10, 10, 4), continuous=False) == "image"
    assert ppo.family((4, 84, 84), continuous=True) == "image"
    # two axes are no image (a 4 x 4 grid of numbers, a 2 x 3 matrix): the actions decide
    assert ppo.family((4, 4), continuous=False) == "discrete"
    assert ppo.family((2, 3), continuous=True) == "continuous"
    # a Tuple or Dict observation has no shape (None): no axes, so no image; the spaces'
    # check refuses it after the preset (the test below)
    assert ppo.family(None, continuous=False) == "discrete"
    assert ppo.family(None, continuous=True) == "continuous"
    # four axes (a stack of frames with a batch axis) are no image either: exactly three
    assert ppo.family((1, 4, 84, 84), continuous=False) == "discrete"


@pytest.mark.parametrize("name", [*WITH_PRESETS, "dqn"])
def test_an_observation_with_no_shape_is_one_line_and_exit_status_2(name, check_usage_error):
    # Blackjack-v1 observes a Tuple of three Discrete spaces, whose shape is None: reading the
    # family (or dqn.py's preset) from it must not crash before check_spaces says why
    # (sac.py and ddpg_td3.py check the actions first: Blackjack's are Discrete)
    space = "Discrete action" if name in ("sac", "ddpg_td3") else "Tuple observation"
    check_usage_error(f"{name}.py", ["--env-id", "Blackjack-v1"], f"Blackjack-v1 has a {space} space")


def test_the_guides_table_quotes_every_presets_source_in_its_scripts_row():
    # docs/guide/your-own-environment.md: the row of each script with PRESETS holds each
    # preset's source as the run's first lines print it, so the page cannot drift from it
    path = os.path.join(os.path.dirname(__file__), "..", "docs", "guide",
                        "your-own-environment.md")
    rows = {line.split(" | ")[0].strip("| "): line for line in open(path).read().splitlines()
            if line.startswith("| ") and ".py |" in line}
    for name, module in {**WITH_PRESETS, "dqn": dqn}.items():
        for source, _ in module.PRESETS.values():  # whole: a cell, or after "name: "
            assert re.search(rf"(\| |: ){re.escape(source)}( \||;)", rows[f"{name}.py"]), (
                name, source)


def test_a_flag_given_wins_over_its_preset_and_the_rest_come_from_it():
    # --num-steps 512 and --no-clip-vloss given (values no preset has for both), the family
    # continuous: those two kept, every other flag the continuous preset's, --preset recorded
    args = ppo.fill_preset(ppo.Args(num_steps=512, clip_vloss=False), "continuous")
    source, preset = ppo.PRESETS["continuous"]
    assert (args.num_steps, args.clip_vloss, args.preset) == (512, False, "continuous")
    assert {k: getattr(args, k) for k in preset if k not in ("num_steps", "clip_vloss")} == {
        k: v for k, v in preset.items() if k not in ("num_steps", "clip_vloss")}
    # --preset given beats the family: the image preset's 128 steps on a continuous task
    args = ppo.fill_preset(ppo.Args(preset="image"), "continuous")
    assert (args.preset, args.num_steps, args.clip_coef) == ("image", 128, 0.1)


@pytest.mark.parametrize("name", WITH_PRESETS)
def test_every_preset_sets_the_same_flags_each_left_at_none(name):
    # a preset that forgot a flag would leave it None on its family; each preset names a source;
    # --preset offers exactly the presets
    module = WITH_PRESETS[name]
    flag_sets = {preset: set(flags) for preset, (_, flags) in module.PRESETS.items()}
    assert len({frozenset(s) for s in flag_sets.values()}) == 1, flag_sets
    defaults = module.Args()
    for flag in next(iter(flag_sets.values())):
        assert getattr(defaults, flag) is None, f"{name}.py --{flag} is not left at None"
    assert all(isinstance(source, str) and source for source, _ in module.PRESETS.values())
    hints = typing.get_type_hints(module.Args)
    (choices,) = [typing.get_args(a) for a in typing.get_args(hints["preset"]) if typing.get_args(a)]
    assert set(choices) == set(module.PRESETS)


@pytest.mark.parametrize("name", BEFORE)
def test_the_reference_environment_keeps_its_settings(name):
    family, before = BEFORE[name]
    args = WITH_PRESETS[name].fill_preset(WITH_PRESETS[name].Args(), family)
    assert {k: getattr(args, k) for k in before} == before


def run_untrained(module, tmp_path, monkeypatch, **flags):
    """main with train replaced (nothing learns): the run folder's config.json."""
    monkeypatch.setattr(module, "train", lambda *args, **kwargs: None)
    module.main(module.Args(eval_episodes=0, tensorboard=False, curve=False,
                            output_dir=str(tmp_path), **flags))
    (folder,) = os.listdir(tmp_path)
    with open(tmp_path / folder / "config.json") as f:
        return json.load(f)


@pytest.mark.parametrize("name", ["ppo", "trpo", "vpg", "pqn", "sac", "ddpg_td3", "ppo_rnd"])
def test_the_default_command_on_its_reference_environment_takes_those_settings(
        name, tmp_path, monkeypatch, capsys):
    module = WITH_PRESETS[name]
    family, before = BEFORE[name]
    config = run_untrained(module, tmp_path, monkeypatch)
    assert config["preset"] == family
    assert {k: config[k] for k in before} == before
    others = " or ".join(f"--preset {p}" for p in module.PRESETS if p != family)
    assert (f"{name}.py: the {family} preset, {module.PRESETS[family][0]}; {others} for "
            "another, a flag for one setting") in capsys.readouterr().out.splitlines()


def test_a_continuous_task_takes_cleanrls_settings_and_says_so(tmp_path, monkeypatch, capsys):
    # ppo.py --env-id Pendulum-v1: CleanRL's ppo_continuous_action.py defaults, written out by
    # their names there (num_envs 1, num_steps 2048, learning_rate 3e-4, gamma 0.99,
    # gae_lambda 0.95, num_minibatches 32, update_epochs 10, clip_coef 0.2, clip_vloss True,
    # ent_coef 0.0, and its NormalizeObservation and NormalizeReward wrappers), a flag given
    # (--update-epochs 3) kept; the first lines name the preset after the environment's line
    config = run_untrained(ppo, tmp_path, monkeypatch, env_id="Pendulum-v1", update_epochs=3)
    assert {k: config[k] for k in BEFORE["ppo"][1]} == dict(
        num_envs=1, num_steps=2048, learning_rate=3e-4, gamma=0.99, gae_lambda=0.95,
        num_minibatches=32, update_epochs=3, clip_coef=0.2, clip_vloss=True, ent_coef=0.0,
        norm_obs=True, norm_reward=True)
    lines = capsys.readouterr().out.splitlines()
    at = lines.index("ppo.py: Pendulum-v1, seed 1")
    assert lines[at + 1] == ("ppo.py: the continuous preset, CleanRL's ppo_continuous_action.py; "
                             "--preset discrete or --preset image for another, a flag for one "
                             "setting")


@pytest.mark.parametrize("module", [sac, ddpg_td3])
def test_the_off_policy_scripts_pick_by_the_budget(module):
    # 50,000 steps or fewer: the Pendulum settings; 50,001: the long (MuJoCo) preset, with the
    # papers' 256-unit networks and gamma 0.99
    assert module.SHORT_BUDGET == 50_000
    for budget, expected in ((50_000, "continuous"), (50_001, "continuous-long")):
        args = module.Args(total_timesteps=budget)
        name = "continuous-long" if args.total_timesteps > module.SHORT_BUDGET else "continuous"
        assert name == expected
    long = module.PRESETS["continuous-long"][1]
    assert (long["hidden_size"], long["gamma"], long["tau"]) == (256, 0.99, 0.005)


@pytest.mark.parametrize("module, budget, expected", [
    (sac, 50_000, 128), (sac, 50_001, 256), (ddpg_td3, 50_000, 128), (ddpg_td3, 50_001, 100)])
def test_main_takes_the_budgets_preset(module, budget, expected, tmp_path, monkeypatch):
    # the batch: 128 in both Pendulum presets; 256 in SAC's paper, 100 in TD3's
    config = run_untrained(module, tmp_path, monkeypatch, total_timesteps=budget)
    assert config["batch_size"] == expected


def test_a_run_on_an_environment_no_goal_knows_names_its_preset(tmp_path, capsys):
    # Pendulum-v1 has no GOALS entry in vpg.py and no reward threshold in Gymnasium
    assert "Pendulum-v1" not in getattr(vpg, "GOALS", {})
    assert gym.spec("Pendulum-v1").reward_threshold is None
    vpg.main(vpg.Args(env_id="Pendulum-v1", total_timesteps=400, num_steps=200, eval_episodes=0,
                      tensorboard=False, curve=False, output_dir=str(tmp_path)))
    closing = capsys.readouterr().out.splitlines()[-1]
    assert "no goal for Pendulum-v1; the continuous preset ran" in closing.split(" | ")


@pytest.mark.parametrize("name", WITH_PRESETS)
def test_an_unknown_preset_is_one_line_and_exit_status_2(name, check_usage_error):
    others = " or ".join(WITH_PRESETS[name].PRESETS)
    check_usage_error(f"{name}.py", ["--preset", "mujoco"],
                      f"--preset takes {others}, not 'mujoco'")


def test_a_value_the_preset_makes_bad_is_checked_after_it(check_usage_error):
    # the continuous preset's 2,048 steps of one environment: 32 minibatches do not divide a
    # rollout of --num-steps 100 given alone; the check runs on the filled flags, and the line
    # names the preset whose 32 the user did not give
    check_usage_error("ppo.py", ["--env-id", "Pendulum-v1", "--num-steps", "100"],
                      "num_envs*num_steps = 100 is not divisible by --num-minibatches 32; pick a "
                      "divisor of 100 (the continuous preset's settings; a flag given overrides "
                      "one)")


def test_a_run_judged_on_gymnasiums_threshold_alone_names_its_preset_too(tmp_path, capsys):
    # MountainCarContinuous-v0 is in no GOALS of vpg.py, but Gymnasium gives it a threshold of
    # 90: the run is judged on it, and the line says which preset ran, as where none is known
    assert "MountainCarContinuous-v0" not in vpg.GOALS
    assert gym.spec("MountainCarContinuous-v0").reward_threshold == 90
    vpg.main(vpg.Args(env_id="MountainCarContinuous-v0", total_timesteps=1000, num_steps=500,
                      eval_episodes=0, tensorboard=False, curve=False, output_dir=str(tmp_path)))
    closing = capsys.readouterr().out.splitlines()[-1].split(" | ")
    assert "solved_at_step not reached (last-20 mean >= reward_threshold 90)" in closing
    assert closing[-1] == "no goal for MountainCarContinuous-v0; the continuous preset ran"


def test_a_run_on_an_environment_a_goal_knows_says_no_preset_in_its_closing_line(tmp_path, capsys):
    # CartPole-v1 has vpg.py's goal: the closing line judges the run, and names no preset
    assert "CartPole-v1" in vpg.GOALS
    vpg.main(vpg.Args(total_timesteps=512, num_envs=2, num_steps=256, eval_episodes=0,
                      tensorboard=False, curve=False, output_dir=str(tmp_path)))
    closing = capsys.readouterr().out.splitlines()[-1].split(" | ")
    assert not [part for part in closing if part.startswith("no goal for")], closing


def test_es_reads_the_family_from_its_action_space(tmp_path, monkeypatch):
    # Pendulum-v1's Box actions: es.py's continuous preset (sigma 0.3), where CartPole-v1's
    # Discrete ones keep the discrete preset's 0.05
    for env_id, family, sigma in (("Pendulum-v1", "continuous", 0.3),
                                  ("CartPole-v1", "discrete", 0.05)):
        config = run_untrained(es, tmp_path / family, monkeypatch, env_id=env_id, num_workers=1)
        assert (config["preset"], config["sigma"]) == (family, sigma)


def test_the_run_folder_flags_come_after_the_scripts_own_in_every_args():
    # RunFlags, declared once in the block, are the last fields of every script's Args (and so
    # of --help), after the algorithm's own; none is declared twice
    import dataclasses
    run_flags = [f.name for f in dataclasses.fields(ppo.RunFlags)]
    assert run_flags[0] == "output_dir" and len(run_flags) == 9
    for module in WITH_PRESETS.values():
        names = [f.name for f in dataclasses.fields(module.Args)]
        assert names[-len(run_flags):] == run_flags and len(set(names)) == len(names)
        assert names[0] == "env_id"


def test_the_recurrent_pendulum_task_hides_the_velocity_and_takes_the_continuous_preset():
    # benchmark.py's ppo_lstm Pendulum task: --hide-obs 2 and the budget given, the rest the
    # continuous preset's (Pendulum's settings: 256 steps, chunks of 16, gamma 0.95)
    import benchmark
    import tyro
    args = tyro.cli(ppo_lstm.Args, args=benchmark.PPO_LSTM_PENDULUM)
    args = ppo_lstm.fill_preset(args, "continuous")
    assert (list(args.hide_obs), args.total_timesteps) == ([2], 200_000)
    assert (args.num_steps, args.data_chunk_length, args.gamma, args.anneal_clip) == (
        256, 16, 0.95, False)


@pytest.mark.parametrize("name, env_id, family", [
    ("ppo", "Pendulum-v1", "continuous"), ("trpo", "Pendulum-v1", "continuous"),
    ("vpg", "Pendulum-v1", "continuous"), ("ppo_lstm", "Pendulum-v1", "continuous"),
    ("ppo_rnd", "MountainCarContinuous-v0", "continuous"), ("pqn", "MinAtar/Breakout-v1", "image")])
def test_each_main_hands_its_environments_family_to_fill_preset(name, env_id, family, tmp_path,
                                                                monkeypatch):
    # main reads the family from the environment it makes, not from the reference one: off
    # the reference environment, config.json records the other family and its values
    if env_id.startswith("MinAtar/"):
        pytest.importorskip("minatar")
    module = WITH_PRESETS[name]
    config = run_untrained(module, tmp_path, monkeypatch, env_id=env_id)
    preset = module.PRESETS[family][1]
    assert config["preset"] == family and {k: config[k] for k in preset} == preset


def test_ppo_rnds_continuous_preset_is_ppos_with_the_rnd_papers_weights():
    # the PPO flags both scripts have take ppo.py's continuous values (CleanRL's: 1 environment
    # of 2048 steps, a rate of 3e-4, 32 minibatches, 10 epochs, rewards normalized), and the
    # intrinsic advantage weighs 1 against the extrinsic 2, the RND paper's c_int and c_ext
    rnd = ppo_rnd.PRESETS["continuous"][1]
    ppo_continuous = ppo.PRESETS["continuous"][1]
    shared = set(rnd) & set(ppo_continuous)
    assert shared == {"num_envs", "num_steps", "learning_rate", "num_minibatches",
                      "update_epochs", "norm_reward"}
    assert {k: rnd[k] for k in shared} == {k: ppo_continuous[k] for k in shared}
    assert (rnd["int_coef"], ppo_rnd.Args().ext_coef) == (1.0, 2.0)


def test_ppo_rnd_takes_the_preset_given_over_its_environments_family(tmp_path, monkeypatch):
    # --preset continuous on MountainCar-v0 (Discrete actions, the discrete family): the
    # continuous preset's values (1 environment, int_coef 1) win over the family's (8, 256),
    # and --int-coef 16 given wins over both
    config = run_untrained(ppo_rnd, tmp_path / "a", monkeypatch, preset="continuous")
    assert (config["preset"], config["num_envs"], config["int_coef"]) == ("continuous", 1, 1.0)
    config = run_untrained(ppo_rnd, tmp_path / "b", monkeypatch, preset="continuous",
                           int_coef=16.0)
    assert (config["num_envs"], config["int_coef"], config["norm_reward"]) == (1, 16.0, True)


@pytest.mark.parametrize("env_id, family, flags, expected", [
    # Pendulum-v1's Box actions: unrolls of 8 at a rate of 1e-3, no entropy bonus; --num-steps
    # 32 and --learning-rate 3e-4 given win over the preset's 8 and 1e-3
    ("Pendulum-v1", "continuous", {}, dict(num_envs=8, num_steps=8, learning_rate=1e-3,
                                            ent_coef=0.0, max_grad_norm=0.5, rollouts_per_batch=1)),
    ("Pendulum-v1", "continuous", dict(num_steps=32, learning_rate=3e-4), dict(
        num_steps=32, learning_rate=3e-4, ent_coef=0.0)),
    # MinAtar's 10 x 10 x 4 frames: the paper's unroll of 20, 4 rollouts of 8 environments for
    # its 32 of one (4 * 8 * 20 = 640 = 32 * 20 steps per batch), 6e-4, the gradient at 40
    ("MinAtar/Breakout-v1", "image", {}, dict(num_envs=8, num_steps=20, rollouts_per_batch=4,
                                              learning_rate=6e-4, ent_coef=0.01,
                                              max_grad_norm=40.0)),
    # --preset image given on CartPole-v1 beats its discrete family
    ("CartPole-v1", "image", dict(preset="image"), dict(num_steps=20, max_grad_norm=40.0)),
])
def test_impalas_prepare_takes_the_environments_preset(env_id, family, flags, expected):
    # prepare, which main calls before Ray starts, reads the family from the environment made
    if env_id.startswith("MinAtar/"):
        pytest.importorskip("minatar")
    args, *_ = impala.prepare(impala.Args(env_id=env_id, **flags))
    assert args.preset == family
    assert {k: getattr(args, k) for k in expected} == expected

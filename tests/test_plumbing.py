"""The contract every script keeps (CONTRIBUTING.md), written once and run on every script.

Each script's row in SCRIPTS gives the flags of a tiny run of it; everything here is the same
rule checked on each script. A script's own tests (tests/test_<script>.py) keep only what is
its own: its math by hand, its glue, its smoke run, its own bad input and its evaluation rows.
"""
import dataclasses
import glob
import importlib
import importlib.util
import inspect
import json
import math
import os
import re
import shlex
import signal
import subprocess
import sys
import time

import gymnasium as gym
import numpy as np
import pytest
import torch

from conftest import (interrupt_on_call, check_the_episode_rows_the_last_20_and_the_times, check_the_evaluation_rows,
                      check_replay_evaluations, check_the_time_columns_and_the_evaluation_rows,
                      COMMON_FLAGS, ctrl_c, read_csv, set_clock, spy_on,
                      spy_on_stepped_gradient_norms, start_in_a_terminal, unreadable_checkpoints,
                      video_names)

# script: (its flags of a tiny training run, whether it has a device and so --cuda)
SCRIPTS = {
    "ppo.py": (["--total-timesteps", "256", "--num-envs", "2", "--num-steps", "32"], True),
    "ppo_masked.py": (["--total-timesteps", "256", "--num-envs", "2", "--num-steps", "32"], True),
    "ppod.py": (["--total-timesteps", "256", "--num-envs", "2", "--num-steps", "32"], True),
    "es.py": (["--total-timesteps", "400", "--population-size", "4", "--num-workers", "1"], False),
    "qlearning.py": (["--env-id", "FrozenLake-v1", "--total-timesteps", "300"], False),
    "dqn.py": (["--total-timesteps", "300", "--num-envs", "2", "--learning-starts", "100",
                "--train-frequency", "8", "--gradient-steps", "2", "--batch-size", "32"], True),
    "ddpg_td3.py": (["--env-id", "ShortPendulum-v1", "--total-timesteps", "120", "--num-envs", "2",
                     "--learning-starts", "40", "--batch-size", "16", "--hidden-size", "8"], True),
    "sac.py": (["--env-id", "ShortPendulum-v1", "--total-timesteps", "120", "--num-envs", "2",
                "--learning-starts", "40", "--batch-size", "16", "--hidden-size", "8"], True),
    "crossq.py": (["--env-id", "ShortPendulum-v1", "--total-timesteps", "120", "--num-envs", "2",
                   "--learning-starts", "40", "--batch-size", "16", "--hidden-size", "8",
                   "--critic-hidden-size", "8"], True),
    "mappo.py": (["--num-envs", "2", "--num-steps", "25", "--total-timesteps", "50"], True),
    "matd3.py": (["--num-envs", "2", "--total-timesteps", "60", "--learning-starts", "20",
                  "--batch-size", "8", "--hidden-size", "8"], True),
    "ppo_lstm.py": (["--num-envs", "2", "--num-steps", "16", "--total-timesteps", "32"], True),
    "ppo_rnd.py": (["--total-timesteps", "256", "--num-envs", "2", "--num-steps", "32",
                    "--rnd-init-steps", "4"], True),
    "vpg.py": (["--total-timesteps", "256", "--num-envs", "2", "--num-steps", "32"], True),
    "trpo.py": (["--total-timesteps", "256", "--num-envs", "2", "--num-steps", "32"], True),
    # one Ray actor (a local Ray, started once and joined by every later run of the process)
    "impala.py": (["--total-timesteps", "256", "--num-envs", "2", "--num-steps", "8",
                   "--num-actors", "1"], True),
    "pqn.py": (["--total-timesteps", "256", "--num-envs", "2", "--num-steps", "32",
                "--num-minibatches", "2"], True),
    # 4 prompts in groups of 4 (16 completions, one step each, a batch), a one-block transformer
    "grpo.py": (["--total-timesteps", "64", "--num-prompts", "4", "--group-size", "4",
                 "--sft-steps", "3", "--sft-problems", "16", "--n-layer", "1", "--n-head", "2",
                 "--n-embd", "16", "--eval-every", "0"], True),
    # 16 prompts a batch (one completion each), 20 preference pairs, a one-block transformer
    "rlhf.py": (["--total-timesteps", "32", "--num-prompts", "16", "--sft-steps", "3",
                 "--sft-problems", "16", "--num-pairs", "20", "--rm-steps", "3",
                 "--n-layer", "1", "--n-head", "2", "--n-embd", "16", "--eval-every", "0"], True),
}
# The block's own behaviour is the same text in every script (the stamp test holds it), so
# it is tested on one script of each variant: ppo.py (torch) and qlearning.py (NumPy only).
# A test runs over every script where a hook makes the behaviour differ: the flags and
# their help, the checkpoint's models, the training loop's steps and Ctrl-C, the videos.
BLOCK = ["ppo.py", "qlearning.py"]
# A tiny run's final evaluation plays 2 episodes (not the default 10: the same code, a fifth
# of the time); a test of the evaluation's episodes gives its own count.
TINY = {script: [*flags, "--eval-episodes", "2"] for script, (flags, _) in SCRIPTS.items()}
TORCH = [script for script, (_, torch) in SCRIPTS.items() if torch]
# An id in no script's GOALS: a run on it is judged on the last 20 training returns (its
# reward_threshold does not matter where --stop-at-return gives the threshold).
NO_GOAL = "my_envs:ThreeSteps-v0"
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def module_of(script):
    return importlib.import_module(os.path.splitext(script)[0])


def run_folder(output_dir):
    (path,) = glob.glob(os.path.join(output_dir, "*"))
    return path


# ---------------------------------------------------------------------------------------
# --help and import
# ---------------------------------------------------------------------------------------
@pytest.mark.parametrize("script", SCRIPTS)
def test_help_lists_the_common_flags(script, run_cli):
    code, out, _ = run_cli(script, ["--help"])
    assert code == 0
    for flag in COMMON_FLAGS:
        assert flag in out
    assert ("--no-cuda" in out) == (script in TORCH)  # the device flag exactly where torch is
    assert "--no-no-" not in out  # a flag named no_x is one flag (ppo_masked.py's --no-mask)


@pytest.mark.parametrize("script", SCRIPTS)
def test_a_copied_script_keeps_its_licence_and_points_to_no_file_it_lacks(script):
    # The README asks a copier to keep a copyright line: the script's first line is one.
    # A copied file has no CONTRIBUTING.md beside it: a mention says whose file it is.
    with open(os.path.join(ROOT, script)) as f:
        text = f.read()
    assert text.startswith("# From plainrl (MIT licence, (c) 2026 the plainrl authors)")
    assert text.count("CONTRIBUTING.md") == text.count("plainrl's CONTRIBUTING.md")


def docstring_commands(script, doc=None):
    """The argument lists of the commands in a script's docstring (or doc) that run the script
    itself: backslash-continued lines joined, comments and environment prefixes dropped."""
    doc = (module_of(script).__doc__ if doc is None else doc).replace("\\\n", " ")
    return [shlex.split(line.split(f"python {script}", 1)[1].split("#")[0])
            for line in doc.splitlines() if f"python {script}" in line]


def test_docstring_commands_are_read_whole():
    # a command continued over two lines and ending with a comment is one command, whole
    doc = ("Run:\n    python ppo.py --env-id Hopper-v5 --total-timesteps 1000000 \\\n"
           "        --eval-every 100000   # the continuous preset\n    python other.py --x 1\n")
    assert docstring_commands("ppo.py", doc) == [
        ["--env-id", "Hopper-v5", "--total-timesteps", "1000000", "--eval-every", "100000"]]
    (hopper,) = [argv for argv in docstring_commands("ppo.py") if "Hopper-v5" in argv]
    assert hopper == ["--env-id", "Hopper-v5", "--total-timesteps", "1000000"]


@pytest.mark.parametrize("script", SCRIPTS)
def test_the_docstrings_commands_parse_with_the_values_they_give(script, monkeypatch):
    # A renamed flag or a value of the wrong type in a command the reader copies from the
    # docstring fails here, where the script's own parser would stop the reader's run.
    commands = [argv for argv in docstring_commands(script) if "--help" not in argv]
    assert commands, f"{script}'s docstring shows no command that runs it"
    for argv in commands:
        monkeypatch.setattr(sys, "argv", [script, *argv])
        args = module_of(script).parse_args()
        if "--env-id" in argv:
            assert args.env_id == argv[argv.index("--env-id") + 1]


@pytest.mark.slow  # a Python process of its own per script
def test_importing_the_scripts_has_no_side_effects(tmp_path):
    # one interpreter imports them all, one after another (torch is imported once)
    from conftest import check_import_is_quiet
    check_import_is_quiet([os.path.splitext(script)[0] for script in SCRIPTS], tmp_path)


# ---------------------------------------------------------------------------------------
# Bad input: one line on stderr, `<script>: error: ...`, exit status 2, no run folder
# ---------------------------------------------------------------------------------------
BAD_INPUT = [
    # Gymnasium's own line, after "cannot make <id>:" and the error's name
    (["--env-id", "CartPole-v9"], "cannot make CartPole-v9: VersionNotFound: Environment "
     "version `v9` for environment `CartPole` doesn't exist."),
    (["--env-id", "no_such_module:GridWorld-v0"], "cannot make no_such_module:GridWorld-v0: "
     "ModuleNotFoundError: No module named 'no_such_module'."),
    (["--env-id", "my_envs:GridWorld-v9"], "cannot make my_envs:GridWorld-v9: VersionNotFound"),
    (["--env-id", "crashing_envs:Anything-v0"], "cannot make crashing_envs:Anything-v0: "
     "RuntimeError: a bug in the user's own environment module"),
    (["--total-timesteps", "-5"], "--total-timesteps must be positive"),
    (["--total-timesteps", "0"], "--total-timesteps must be positive, got 0"),
    (["--eval-episodes", "-1"], "--eval-episodes must be 0 or more"),
    (["--eval-every", "-1"], "--eval-every must be 0 or more, got -1"),
    (["--eval-every", "500", "--eval-episodes", "0"],
     "--eval-every and --capture-video need evaluation episodes: --eval-episodes 1 or more"),
    (["--capture-video", "--eval-episodes", "0"], "--eval-every and --capture-video need "
     "evaluation episodes: --eval-episodes 1 or more"),
    (["--eval-checkpoint", "missing"], "does not exist"),
    (["--eval-checkpoint", "corrupt"], "model"),  # "is not a <script> model.pt/model.npz"
    (["--eval-checkpoint", "no model"], "a-run-folder/model."),  # "... does not exist"
    # tyro's own parse errors, in the same one-line form, with the closest flags
    (["--env", "CartPole-v1"], "unrecognized options: --env, CartPole-v1; did you mean --env-id"),
    (["--total-timesteps", "1e5"], "--total-timesteps takes a whole number, not '1e5' (python "),
    (["--eval-every=2.5e4"], "--eval-every takes a whole number, not '2.5e4' (python "),
    (["--seed", "one"], "--seed takes a whole number, not 'one' (python "),
    (["--stop-at-return", "high"], "--stop-at-return takes a number, not 'high'"),
    (["--seed"], "--seed needs a value"),
]
# mappo.py and matd3.py take PettingZoo ids and module:function (CONTRIBUTING.md, "Flags
# every script has"): their own form of the rows about ids and modules, each keeping the row's rule.
PETTINGZOO_ROWS = {
    "CartPole-v9": (["--env-id", "simple_spread_v9"], "unknown environment id 'simple_spread_v9'"),
    "no_such_module:GridWorld-v0": (["--env-id", "no_such_module:make_env"],
                                    "no module named no_such_module; put its folder on PYTHONPATH"),
    "my_envs:GridWorld-v9": (["--env-id", "my_envs:team_envs"],
                             "unknown environment id 'my_envs:team_envs'"),
    "crashing_envs:Anything-v0": (["--env-id", "crashing_envs:make_env"], "cannot make "
                                  "crashing_envs:make_env: RuntimeError: a bug in the user's "
                                  "own environment module"),
}


@pytest.mark.parametrize("argv, message", BAD_INPUT, ids=lambda a: " ".join(a)
                         if isinstance(a, list) else "")
@pytest.mark.parametrize("script", BLOCK + ["mappo.py"])
def test_bad_input_is_one_line_and_exit_status_2(script, argv, message, check_usage_error,
                                                 tmp_path, fresh_env_module):
    checkpoints = unreadable_checkpoints(tmp_path)
    if script in ("mappo.py", "matd3.py") and argv[0] == "--env-id" and argv[1] in PETTINGZOO_ROWS:
        argv, message = PETTINGZOO_ROWS[argv[1]]
    check_usage_error(script, [checkpoints.get(a, a) for a in argv], message)


@pytest.mark.parametrize("columns", ["60", "200"])
@pytest.mark.parametrize("script", BLOCK)
def test_a_parse_error_is_one_whole_line_at_any_terminal_width(script, columns, run_cli,
                                                               monkeypatch):
    # tyro draws its errors in a box wrapped at the terminal's width; the script words them
    # itself, so the line is the same, and whole, at 60 columns and at 200.
    monkeypatch.setenv("COLUMNS", columns)
    code, _, err = run_cli(script, ["--total-timesteps", "1e5"])
    assert code == 2 and err == (f"{script}: error: --total-timesteps takes a whole number, "
                                 f"not '1e5' (python {script} --help lists the flags)\n")


@pytest.mark.parametrize("script", BLOCK + ["mappo.py", "matd3.py"])
def test_an_unknown_id_gets_gymnasiums_closest_id(script, run_cli):
    # Gymnasium's own line names the closest registered id (CartPole to "CartPol"); mappo.py's
    # and matd3.py's PettingZoo form names the closest MPE game.
    typo, close = (("simple_spred_v3", "simple_spread_v3") if script in ("mappo.py", "matd3.py")
                   else ("CartPol-v1", "Did you mean: `CartPole`?"))
    code, _, err = run_cli(script, ["--env-id", typo])
    assert code == 2 and close in err and err.count("\n") == 1


# Games of images, whose ids exist only once their package is imported (ppo.py, dqn.py,
# pqn.py and impala.py import it): a script of flat observations cannot make them, and says
# so in Gymnasium's one line. impala.py and pqn.py take MinAtar's grids, not Atari.
LEARN_FROM_IMAGES = {"MinAtar/Breakout-v1": ("minatar", "ppo.py, dqn.py, pqn.py and impala.py"),
                     "ALE/Pong-v5": ("ale_py", "ppo.py and dqn.py")}
GAMES_HERE = [i for i, (package, _) in LEARN_FROM_IMAGES.items()
              if importlib.util.find_spec(package)]


@pytest.mark.parametrize("env_id", GAMES_HERE)
@pytest.mark.parametrize("script", ["vpg.py", "qlearning.py"])  # a torch script's, a table's
def test_a_game_of_images_is_one_line_for_a_script_of_flat_observations(script, env_id):
    # Gymnasium's "cannot make" line: the script does not import the game's package (a fresh
    # process, as a user's run is: in this one another script may have registered the ids)
    done = subprocess.run([sys.executable, script, "--env-id", env_id], cwd=ROOT,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 2 and done.stderr.count("\n") == 1
    assert done.stderr.startswith(f"{script}: error: cannot make {env_id}: ")


@pytest.mark.parametrize("env_id", GAMES_HERE)
def test_the_scripts_of_images_take_their_games(env_id, check_usage_error):
    # each script that learns from the game makes it and checks its spaces without a word
    # (the run stops only at --total-timesteps 0, checked after the spaces); impala.py and
    # pqn.py refuse Atari's ids.
    learners = LEARN_FROM_IMAGES[env_id][1]
    for script in ("ppo.py", "dqn.py", "pqn.py", "impala.py"):
        expected = ("--total-timesteps must be positive, got 0" if script in learners
                    else "Atari")
        check_usage_error(script, ["--env-id", env_id, "--total-timesteps", "0"], expected)


@pytest.mark.parametrize("script", [s for s in SCRIPTS if s not in TORCH])
def test_a_script_without_torch_refuses_cuda_in_one_line(script, run_cli):
    code, _, err = run_cli(script, ["--cuda"])
    assert code == 2 and err.count("\n") == 1 and "--cuda" in err


# ---------------------------------------------------------------------------------------
# What a run prints and writes
# ---------------------------------------------------------------------------------------
@pytest.mark.parametrize("script", SCRIPTS)
def test_ctrl_c_keeps_the_run_folder_and_ends_by_sigint(script, tmp_path, monkeypatch, capsys):
    # Ctrl-C at the third finished episode: the first two are in episodes.csv, the summary
    # says interrupted (plot.py leaves the run out of its averages unless asked: a run cut
    # short must not pass for a finished one), and the process then ends by SIGINT with the
    # default handler (status 130 to the shell). os.kill and signal.signal are stood in for.
    module = module_of(script)
    episode, calls, signals = module.Run.episode, [], []

    def interrupted_episode(self, *args):
        calls.append(1)
        if len(calls) == 3:
            raise KeyboardInterrupt
        return episode(self, *args)

    def kill(pid, sig):
        signals.append(("kill", pid, sig))
        raise SystemExit(128 + sig)

    monkeypatch.setattr(module.Run, "episode", interrupted_episode)
    monkeypatch.setattr(module.signal, "signal", lambda *a: signals.append(("signal", *a)))
    monkeypatch.setattr(module.os, "kill", kill)
    monkeypatch.setattr(sys, "argv", [script, *TINY[script], "--total-timesteps", "100000",
                                      "--output-dir", str(tmp_path)])
    with pytest.raises(SystemExit) as exit_status:
        module.cli()
    assert exit_status.value.code == 130
    assert signals[-2:] == [("signal", signal.SIGINT, signal.SIG_DFL),
                            ("kill", os.getpid(), signal.SIGINT)]
    path = run_folder(tmp_path)
    assert len(read_csv(os.path.join(path, "episodes.csv"))) == 2
    with open(os.path.join(path, "summary.json")) as f:
        summary = json.load(f)
    assert summary["interrupted"] is True and summary["global_steps"] > 0
    assert f"interrupted; {path} keeps the run so far" in capsys.readouterr().out


@pytest.mark.slow  # two real processes in a shell loop, stopped by Ctrl-C
def test_ctrl_c_stops_a_shell_loop_of_runs(tmp_path):
    # Ctrl-C in a terminal reaches the whole foreground group: the shell and the script.
    # The script writes its run folder and dies of SIGINT, so bash stops the loop too.
    loop = (f"for s in 1 2; do {sys.executable} ppo.py --seed $s --total-timesteps 1000000 "
            f"--output-dir {tmp_path}; done; echo after the loop")
    shell = start_in_a_terminal(["bash", "-c", loop], cwd=ROOT)
    deadline = time.time() + 60
    while not glob.glob(os.path.join(tmp_path, "*", "episodes.csv")) and time.time() < deadline:
        time.sleep(0.2)
    time.sleep(1.0)  # into training
    out = ctrl_c(shell)[0]
    assert shell.returncode == -signal.SIGINT and "after the loop" not in out
    (path,) = glob.glob(os.path.join(tmp_path, "*"))  # the second seed never started
    with open(os.path.join(path, "summary.json")) as f:
        assert json.load(f)["interrupted"] is True


@pytest.mark.parametrize("script", BLOCK)
def test_ctrl_c_during_the_final_evaluation_keeps_the_run(script, tmp_path, monkeypatch, capsys):
    # Training ends, then Ctrl-C comes during the final evaluation: the model and summary.json
    # (without the evaluation) are already written, and the process ends by SIGINT (130)
    # with a line that says so.
    module = module_of(script)

    def interrupted_evaluation(*args, **kwargs):
        raise KeyboardInterrupt

    def kill(pid, sig):
        raise SystemExit(128 + sig)

    monkeypatch.setattr(module, "evaluate", interrupted_evaluation)
    monkeypatch.setattr(module.signal, "signal", lambda *a: None)
    monkeypatch.setattr(module.os, "kill", kill)
    monkeypatch.setattr(sys, "argv", [script, *TINY[script], "--save-model", "--curve",
                                      "--output-dir", str(tmp_path)])
    with pytest.raises(SystemExit) as exit_status:
        module.cli()
    assert exit_status.value.code == 130
    path = run_folder(tmp_path)
    with open(os.path.join(path, "summary.json")) as f:
        summary = json.load(f)
    assert summary["global_steps"] > 0 and summary["eval_return_mean"] is None
    assert glob.glob(os.path.join(path, "model.*"))
    assert os.path.exists(os.path.join(path, "curve.png"))  # drawn without the evaluation
    out = capsys.readouterr().out
    assert f"interrupted; {path} keeps the run so far" in out


# An environment of the user's own without a time limit, whose episodes never end: each
# script has no training return to average and cuts the evaluation episodes at its bound,
# saying so (monkeypatched to 40 steps), so every evaluation return is 40 steps of reward 1. es.py
# cuts its training episodes at the same bound, so they end. mappo.py and matd3.py play
# PettingZoo's environments, which always end at --max-cycles; ppod.py needs a demonstration;
# grpo.py's and rlhf.py's text tasks end every episode at its one answer.
STEP_BOUND = {"es.py": "EPISODE_STEP_LIMIT"}
ENDLESS = {script: ["--env-id", "my_envs:EndlessBox-v0" if script in ("ddpg_td3.py", "sac.py",
                                                                                "crossq.py")
                    else "my_envs:Endless-v0", *(["--no-mask"] if script == "ppo_masked.py" else [])]
           for script in SCRIPTS
           if script not in ("mappo.py", "matd3.py", "ppod.py", "grpo.py", "rlhf.py")}


@pytest.mark.parametrize("script", ENDLESS)
def test_an_environment_without_a_time_limit_ends_with_a_clear_line(script, tmp_path,
                                                                    monkeypatch, capsys,
                                                                    fresh_env_module):
    module = module_of(script)
    monkeypatch.setattr(module, STEP_BOUND.get(script, "EVAL_MAX_STEPS"), 40)
    args = module.tyro.cli(module.Args, args=[*TINY[script], *ENDLESS[script],
                                              "--eval-episodes", "2", "--output-dir",
                                              str(tmp_path)])
    summary = module.main(args)
    out = capsys.readouterr().out
    if script != "es.py":  # no training return: none to average, not a mean of 0 (issue 72's
        # plants); es.py's episodes end at its own bound, in training and evaluation alike
        assert summary["train_return_last20"] is None and "train_return_last20 - |" in out
        assert f"{script}: evaluation cut at 40 steps; give " in out
    assert summary["eval_return_mean"] == 40.0 and summary["eval_return_std"] == 0.0


@pytest.mark.parametrize("script", SCRIPTS)
@pytest.mark.slow  # two runs per script: trained and saved, then evaluated
def test_eval_checkpoint_takes_a_run_folder_for_its_model(script, run_cli, tmp_path):
    # --eval-checkpoint runs/<folder> evaluates the folder's model.pt (model.npz), as the
    # closing line names the folder, not the file.
    code, trained_out, _ = run_cli(script, [*TINY[script], "--save-model", "--eval-episodes",
                                            "0", "--output-dir", str(tmp_path / "train")])
    trained = run_folder(tmp_path / "train")
    code, out, _ = run_cli(script, [*TINY[script], "--eval-checkpoint", trained,
                                    "--eval-episodes", "1", "--output-dir", str(tmp_path / "eval")])
    assert code == 0 and re.search(r"eval_return_mean -?\d", out.splitlines()[-1])
    assert f"run folder {trained} |" in trained_out.splitlines()[-1]


class HalfActor(torch.nn.Module):
    """An actor by hand: 0.5 in [-1, 1] for every observation, as ddpg_td3.py's actor(obs)
    and as sac.py's actor.greedy(obs) give it (a parameter, where greedy_policy reads the
    device)."""
    def __init__(self):
        super().__init__()
        self.unused = torch.nn.Parameter(torch.zeros(1))

    def forward(self, obs):
        return torch.full((len(obs), 1), 0.5)

    def greedy(self, obs):
        return self(obs)


@pytest.mark.parametrize("script", ["ddpg_td3.py", "sac.py", "crossq.py"])
def test_the_evaluation_scales_the_greedy_action_to_the_bounds(script):
    # BoxZeroToFour-v0 (conftest.py) takes actions in [0, 4] and keeps each it receives: the
    # actor's 0.5 arrives as low + (a + 1) / 2 * (high - low) = 0 + 1.5 / 2 * 4 = 3, at each
    # of the 2 episodes' 3 steps (the unscaled 0.5 would arrive as itself).
    from conftest import received_actions
    received_actions().clear()
    module = module_of(script)
    module.evaluate(module.Args(env_id="BoxZeroToFour-v0", eval_episodes=2), {"actor": HalfActor()})
    assert received_actions() == [3.0] * 6


# MuJoCo (requirements.txt's gymnasium[mujoco]): each continuous-action script trains a few
# hundred steps of Hopper-v5 and evaluates, so that a MuJoCo id works end to end.
MUJOCO = {"ppo.py": ["--num-envs", "2", "--num-steps", "64", "--total-timesteps", "256"],
          "vpg.py": ["--num-envs", "2", "--num-steps", "64", "--total-timesteps", "256"],
          "trpo.py": ["--num-envs", "2", "--num-steps", "64", "--total-timesteps", "256"],
          "ddpg_td3.py": ["--total-timesteps", "300", "--learning-starts", "200",
                          "--batch-size", "32"],
          "sac.py": ["--total-timesteps", "300", "--learning-starts", "200", "--batch-size", "32"],
          "crossq.py": ["--total-timesteps", "300", "--learning-starts", "200", "--batch-size",
                        "32"]}


@pytest.mark.parametrize("script", MUJOCO)
@pytest.mark.slow  # a MuJoCo run per script
def test_a_mujoco_id_trains_and_evaluates(script, run_cli, tmp_path):
    code, out, err = run_cli(script, ["--env-id", "Hopper-v5", *MUJOCO[script], "--eval-episodes",
                                      "1", "--output-dir", str(tmp_path)])
    assert code == 0, err
    with open(os.path.join(run_folder(tmp_path), "summary.json")) as f:
        summary = json.load(f)
    assert summary["env_id"] == "Hopper-v5" and summary["global_steps"] >= 256
    assert summary["eval_return_mean"] is not None


@pytest.mark.parametrize("script", ["ddpg_td3.py", "sac.py", "crossq.py"])
def test_threads_sets_the_cpu_threads_and_refuses_zero(script, run_cli, check_usage_error,
                                                         tmp_path, monkeypatch):
    # --threads (default 1) reaches torch on the CPU; the spy keeps this process's own
    # thread count as it is.
    import torch  # here: the scripts without torch are tested in this file too
    calls = []
    monkeypatch.setattr(torch, "set_num_threads", calls.append)
    for argv, threads in (([], 1), (["--threads", "2"], 2)):
        calls.clear()
        code, _, err = run_cli(script, [*SCRIPTS[script][0], "--no-cuda", "--eval-episodes",
                                        "0", *argv, "--output-dir", str(tmp_path)])
        assert code == 0, err
        assert calls == [threads]
    check_usage_error(script, ["--threads", "0"], "--threads must be positive")


@pytest.mark.parametrize("script", ["es.py", "impala.py"])
def test_a_local_ray_runs_its_workers_at_niceness_0(script, monkeypatch):
    # Ray's default niceness of 15 starves the workers beside any other busy process; only a
    # Ray that the script starts itself (no --ray-address) gets 0, and a user's setting stays.
    # That Ray is started with address "local", a Ray of the run's own even where another
    # runs on the machine: ray.init's address None would join that one (or RAY_ADDRESS's),
    # as an impala run once joined test_cluster.py's, its workers at that Ray's niceness.
    ray = pytest.importorskip("ray", reason="pip install ray==2.60.0")
    module, seen = module_of(script), []
    monkeypatch.setattr(os, "environ", {})
    monkeypatch.setattr(ray, "is_initialized", lambda: False)
    monkeypatch.setattr(ray, "init", lambda address=None, **kwargs: seen.append(
        (address, os.environ.get("RAY_worker_niceness"))))
    monkeypatch.setattr(ray, "cluster_resources", lambda: {"CPU": 2})
    module.start_ray("auto")
    module.start_ray(None)
    os.environ["RAY_worker_niceness"] = "5"
    module.start_ray(None)
    # a cluster named in the environment (RAY_ADDRESS) is not joined either: without
    # --ray-address the run's Ray is its own
    os.environ["RAY_ADDRESS"] = "10.0.0.9:6379"
    module.start_ray(None)
    assert seen == [("auto", None), ("local", "0"), ("local", "5"), ("local", "5")]


@pytest.mark.parametrize("script", ["es.py", "impala.py"])
def test_a_ray_client_address_is_checked_at_its_host_and_port(script):
    # --ray-address ray://HOST:PORT (Ray Client, a cluster's port 10001) is reachable where
    # HOST:PORT takes a connection: a socket listening on 127.0.0.1 stands in for the head.
    # Once it is closed, the same address is bad input at once, with or without ray://.
    import socket
    module = module_of(script)
    head = socket.create_server(("127.0.0.1", 0))
    port = head.getsockname()[1]
    module.check_reachable(f"ray://127.0.0.1:{port}")
    module.check_reachable(f"127.0.0.1:{port}")
    head.close()
    for address in (f"ray://127.0.0.1:{port}", f"127.0.0.1:{port}"):
        with pytest.raises(module.UsageError, match=f"cannot reach the Ray cluster at {address}:"):
            module.check_reachable(address)
    module.check_reachable("auto")  # Ray's to resolve, as None is


@pytest.mark.parametrize("script", BLOCK)
def test_the_closing_line_says_not_reached_and_never_none(script, run_cli, tmp_path):
    # A return of 1e9 is never reached in a tiny run: "not reached", never "None".
    code, out, _ = run_cli(script, [*TINY[script], "--stop-at-return", "1e9", "--eval-episodes",
                                    "1", "--output-dir", str(tmp_path)])
    closing = out.splitlines()[-1]
    assert code == 0 and closing.startswith(f"{script}: run folder ")
    assert "solved_at_step not reached" in closing and "None" not in closing


@pytest.mark.parametrize("threshold", [3.0, None])
@pytest.mark.parametrize("script", BLOCK)
def test_a_plain_run_records_when_it_reached_the_environments_threshold(script, threshold,
                                                                        run_cli, tmp_path):
    # No --stop-at-return: the run goes on to its budget, and summary.json records when the
    # last 20 returns first reached the environment's reward_threshold, and which threshold.
    # ThreeSteps-v0 (tests/my_envs.py, a module id so that impala.py's Ray actors make it
    # too) pays 1 a step and is cut at 3 steps, threshold 3. Two environments end an episode
    # each every 3 steps, 2 x 3 = 6 global steps a pair, so the 20th episode ends with the
    # 10th pair at step 10 x 6 = 60; one environment (es.py, qlearning.py) ends its 20th at
    # 20 x 3 = 60 too. Slider-v0 and GridWorld-v0 have no threshold: null, and the closing
    # line has no solved_at_step. (mappo.py and matd3.py play PettingZoo's environments,
    # which declare none: theirs is --stop-at-return's.) ppod.py replays no demonstration
    # (--rho 0 --phi 0), so every episode is real, but it needs one to start.
    box = script in ("ddpg_td3.py", "sac.py", "crossq.py")
    env_id = (("my_envs:ThreeStepsBox-v0" if box else "my_envs:ThreeSteps-v0") if threshold
              else "my_envs:Slider-v0" if box else "my_envs:GridWorld-v0")
    own = {"ppo_masked.py": ["--no-mask"], "ppod.py": ["--rho", "0", "--phi", "0",
                                                       "--demos-dir", str(tmp_path / "demo")]}
    if script == "ppod.py":
        os.makedirs(tmp_path / "demo")
        module_of(script).save_demo(tmp_path / "demo" / "demo_0.npz", module_of(script).Demo(
            np.zeros((4, 2), np.float32), np.zeros(3, np.int64), np.ones(3, np.float32), False))
    code, out, err = run_cli(script, [*TINY[script], "--env-id", env_id, "--total-timesteps",
                                      "120", "--eval-episodes", "0", *own.get(script, []),
                                      "--output-dir", str(tmp_path / "runs")])
    assert code == 0, err
    with open(os.path.join(run_folder(tmp_path / "runs"), "summary.json")) as f:
        summary = json.load(f)
    assert summary["global_steps"] > 60  # training went on past the threshold
    assert summary["solved_threshold"] == threshold
    assert (summary["solved_window"], summary["holds_on"]) == (20, "train")  # no GOALS entry
    assert summary["solved_at_step"] == (60 if threshold else None)
    assert summary["holds"] is (True if threshold else None)  # every episode returns 3: 3 >= 3
    closing = out.splitlines()[-1]
    assert ("| holds: the last-20 mean at the end 3.00 >= 3 | solved_at_step 60 (last-20 mean "
            ">= reward_threshold 3)" in closing) == bool(threshold)
    assert threshold or ("solved_at_step" not in closing and "hold" not in closing)


@pytest.mark.parametrize("script", BLOCK)
@pytest.mark.parametrize("late_return, holds", [(0.0, False), (2.0, False), (2.5, True)])
def test_holds_says_where_the_run_ends_not_where_it_first_got(script, late_return, holds,
                                                              tmp_path, capsys):
    # --stop-at-return 3 is the threshold here; no episode reaches the step that would stop a
    # run, since RunWriter.episode only records. 30 episodes return 3, so the last-20 mean
    # first reaches 3 with the 20th (step 20 x 10 = 200); then 10 return late_return. At the
    # end the last 20 are 10 x 3 + 10 x late_return: (30 + 0) / 20 = 1.5 < 3, does not hold;
    # (30 + 20) / 20 = 2.5 < 3; with --stop-at-return 2.5 and late 2.5: (30 + 25) / 20 = 2.75
    # >= 2.5, holds (and it first got there with the 20th episode too).
    module = module_of(script)
    threshold = 2.5 if holds else 3.0
    args = module.Args(output_dir=str(tmp_path), tensorboard=False, eval_episodes=0,
                       stop_at_return=threshold, env_id=NO_GOAL)
    run = module.Run(args, "cpu", {})
    for k in range(1, 41):
        run.episode(10 * k, 3.0 if k <= 30 else late_return, 10)
    summary = run.train(lambda: None)
    assert summary["train_return_last20"] == pytest.approx((30 + 10 * late_return) / 20)
    assert (summary["holds"], summary["solved_at_step"]) == (holds, 200)
    with open(os.path.join(run.path, "summary.json")) as f:
        assert json.load(f)["holds"] is holds
    closing = capsys.readouterr().out.splitlines()[-1]
    end = (30 + 10 * late_return) / 20
    assert summary["end_return"] == pytest.approx(end)
    said = (f"holds: the last-20 mean at the end {end:.2f} >= {threshold:g}" if holds else
            f"does not hold: the last-20 mean at the end {end:.2f} < {threshold:g}")
    assert f"| {said} | solved_at_step 200 (last-20 mean >= --stop-at-return {threshold:g})" \
        in closing


@pytest.mark.parametrize("script", BLOCK)
def test_holds_reads_the_last_20_mean_not_the_last_episode(script, tmp_path):
    # 30 episodes of 3, 9 of 0, then one of 3: the last episode is at the threshold 3 but the
    # last 20 (episodes 21-40) are 10 x 3 + 9 x 0 + 3 = 33 / 20 = 1.65 < 3: does not hold
    module = module_of(script)
    args = module.Args(output_dir=str(tmp_path), tensorboard=False, eval_episodes=0,
                       stop_at_return=3.0, env_id=NO_GOAL)
    run = module.Run(args, "cpu", {})
    for k in range(1, 41):
        run.episode(10 * k, 3.0 if k <= 30 or k == 40 else 0.0, 10)
    summary = run.train(lambda: None)
    assert summary["train_return_last20"] == pytest.approx(1.65) and summary["holds"] is False


@pytest.mark.parametrize("script", BLOCK)
def test_holds_is_null_without_twenty_episodes_or_for_an_interrupted_run(script, tmp_path,
                                                                         capsys):
    # 19 episodes of 5 >= 3: no last-20 mean, so neither holds nor fails; 25 of them, but
    # interrupted: the run did not reach the end of its budget, so null too.
    module = module_of(script)
    for episodes, interrupted in ((19, False), (25, True), (25, False)):
        args = module.Args(output_dir=str(tmp_path / f"{episodes}{interrupted}"),
                           tensorboard=False, eval_episodes=0, stop_at_return=3.0, env_id=NO_GOAL)
        run = module.Run(args, "cpu", {})
        for k in range(1, episodes + 1):
            run.episode(k, 5.0, 1)
        run.summary["interrupted"] = interrupted
        assert run.train(lambda: None)["holds"] is (True if (episodes, interrupted) == (25, False)
                                                     else None)


@pytest.mark.parametrize("script", BLOCK)
def test_a_goal_judges_no_run_given_fewer_steps_than_it_is_for(script, tmp_path, monkeypatch,
                                                              capsys):
    # GOALS gives ThreeSteps-v0 -120 over 20 episodes for 1,000 steps. 30 episodes of -100:
    # a run given --total-timesteps 600 reaches -100 >= -120 and one of 1,000 too, but only the
    # second is judged (holds); the first says it is short of the goal's budget and neither
    # holds nor fails (holds null), its figure given. --stop-at-return judges at any budget.
    module = module_of(script)
    monkeypatch.setattr(module, "GOALS", {"ThreeSteps-v0": (-120, 20, "train", 1000)},
                        raising=False)
    for steps, stop, holds in ((600, None, None), (1000, None, True), (600, -110, True)):
        args = module.Args(output_dir=str(tmp_path / f"{steps}{stop}"), tensorboard=False,
                           eval_episodes=0, env_id=NO_GOAL, total_timesteps=steps,
                           stop_at_return=stop)
        run = module.Run(args, "cpu", {})
        for k in range(1, 31):
            run.episode(10 * k, -100.0, 10)
        summary = run.train(lambda: None)
        closing = capsys.readouterr().out.splitlines()[-1]
        assert summary["goal_budget"] == (1000 if stop is None else None)
        assert summary["end_return"] == -100 and summary["holds"] is holds
        if holds is None:
            assert ("| not judged, 600 steps where its goal -120 is for 1,000: the last-20 mean "
                    "at the end -100.00 |") in closing and "hold" not in closing.replace(
                        "holds_on", "")
        else:
            assert "| holds: the last-20 mean at the end -100.00 >= " in closing
    # A script that trains in whole rollouts rounds --total-timesteps down (1,000 to 512 in
    # rollouts of 512): the budget it was given is what the goal compares, so it is judged.
    args = module.Args(output_dir=str(tmp_path / "rollouts"), tensorboard=False,
                       eval_episodes=0, env_id=NO_GOAL, total_timesteps=1000)
    run = module.Run(args, "cpu", {}, rollout_steps=512)
    for k in range(1, 31):
        run.episode(10 * k, -100.0, 10)
    assert run.budget == 512 and run.train(lambda: None)["holds"] is True


@pytest.mark.parametrize("script", BLOCK)
def test_a_goal_of_50_episodes_judges_the_last_50_and_an_evaluation_goal_the_evaluation(
        script, tmp_path, monkeypatch, capsys):
    # GOALS gives ThreeSteps-v0 -120 over 50 episodes: 30 episodes of -100, then 30 of -130.
    # The last-50 mean first reaches -120 with the 50th (30 x -100 + 20 x -130 = -5,600,
    # / 50 = -112 >= -120; none before: fewer than 50), at step 50 x 10 = 500. At the end the
    # last 50 are 20 x -100 + 30 x -130 = -5,900, / 50 = -118 >= -120: holds, where the last
    # 20 (all -130) would not. The same goal on "eval" with no evaluation: no verdict.
    module = module_of(script)
    for on in ("train", "eval"):
        monkeypatch.setattr(module, "GOALS", {"ThreeSteps-v0": (-120, 50, on, None)}, raising=False)
        args = module.Args(output_dir=str(tmp_path / on), tensorboard=False, eval_episodes=0,
                           env_id=NO_GOAL)
        run = module.Run(args, "cpu", {})
        for k in range(1, 61):
            run.episode(10 * k, -100.0 if k <= 30 else -130.0, 10)
        summary = run.train(lambda: None)
        assert (summary["solved_threshold"], summary["solved_window"], summary["holds_on"],
                summary["solved_at_step"]) == (-120, 50, on, 500)
        assert summary["train_return_last20"] == -130
        closing = capsys.readouterr().out.splitlines()[-1]
        assert closing.endswith("| solved_at_step 500 (last-50 mean >= GOALS -120)")
        if on == "train":
            assert summary["end_return"] == pytest.approx(-118) and summary["holds"] is True
            assert "| holds: the last-50 mean at the end -118.00 >= -120 |" in closing
        else:
            assert summary["end_return"] is None and summary["holds"] is None
            assert "hold" not in closing.replace("holds_on", "")


def row_of(task):
    """(threshold, window, measure) of a benchmark task: its row in results.md and the
    README's, where a run "holds" (benchmark.py's end_of: the greedy evaluation where the
    threshold is an evaluation figure)."""
    return (task.threshold, task.window, "gain" if task.holds_on_gain else
            "eval" if task.eval_threshold or task.holds_on_eval else "train")


# Tasks that judge a script's run on another goal than the script's own for their
# environment: the first 100k steps of ddpg_td3.py's and sac.py's 300k MuJoCo tasks (the TD3
# paper's curve at 100k, a look partway; a run judges the 300k goal), and es.py's speed tasks
# (a fixed budget without an evaluation; their figure is the steps per second).
OTHER_GOALS = {f"{script}-{env}-100k" for script in ("ddpg_td3", "sac")
               for env in ("Hopper-v5", "HalfCheetah-v5", "Walker2d-v5")} | {
    f"es-CartPole-v1-{label}" for label in ("1-worker", "2-workers", "ray-1-worker",
                                            "ray-2-workers")}


@pytest.mark.parametrize("script", SCRIPTS)
@pytest.mark.slow  # the shrunk default command, per script
def test_the_default_command_is_judged_on_its_rows_goal(script, run_cli, tmp_path):
    # Issue 86: the run's verdict (summary.json, the closing line) uses the threshold, the
    # window and the measure of the script's benchmark task on its default environment, the
    # README row's, not Gymnasium's reward_threshold over 20 (ppod.py: -120 over 50, not
    # -110 over 20). The default command, shrunk: the tiny flags without their --env-id.
    import benchmark
    module = module_of(script)
    flags, env_id = list(SCRIPTS[script][0]), module.Args.__dataclass_fields__["env_id"].default
    if "--env-id" in flags:
        del flags[flags.index("--env-id"):flags.index("--env-id") + 2]
    (task,) = [t for t in benchmark.TASKS[script[:-3]] if (t.script, t.env_id, t.label) == (
        script[:-3], env_id, "")]
    threshold, window, measure = row_of(task)
    code, out, err = run_cli(script, [*flags, "--eval-episodes", "1", "--output-dir",
                                      str(tmp_path)])
    assert code == 0, err
    with open(os.path.join(run_folder(tmp_path), "summary.json")) as f:
        summary = json.load(f)
    assert (summary["solved_threshold"], summary["solved_window"], summary["holds_on"]) == (
        threshold, window, measure)
    closing = out.splitlines()[-1]
    # the shrunk command runs fewer steps than the goal is for: not judged, its figure given
    with open(os.path.join(run_folder(tmp_path), "config.json")) as f:
        steps = json.load(f)["total_timesteps"]
    assert summary["goal_budget"] > steps and summary["holds"] is None
    short = f"| not judged, {steps:,} steps where its goal {threshold:g} is for " \
            f"{summary['goal_budget']:,}: "
    if measure == "gain":  # the final evaluation less the warm start's: no training mean
        assert summary["end_return"] == summary["eval_return_mean"] - summary["start_return"]
        assert (f"{short}the gain over the start ({summary['start_return']:.2f} -> "
                f"{summary['eval_return_mean']:.2f}) {summary['end_return']:+.2f}") in closing
        return
    assert f"(last-{window} mean >= GOALS {threshold:g})" in closing
    if measure == "eval":  # the final evaluation ran: the figure is there, on it
        assert summary["end_return"] == summary["eval_return_mean"]
        assert f"{short}the final evaluation {summary['end_return']:.2f} |" in closing


@pytest.mark.parametrize("script", SCRIPTS)
def test_stop_at_return_replaces_only_the_threshold(script):
    # --stop-at-return 3, 0 or -5 on each environment in the script's GOALS and on
    # CartPole-v1 (Gymnasium's 475 over 20 where GOALS names none): the threshold is the
    # flag's, the window and the measure stay the goal's own (an evaluation goal's "eval",
    # Q-learning's FrozenLake, 0.7 over 100 on the evaluation, so such a run is still judged
    # on its evaluation). Only None means no flag: 0 (a goal of zero return, as on a task
    # whose returns are costs) is a threshold like any other.
    A = dataclasses.make_dataclass("A", ["env_id", "stop_at_return"])
    module = module_of(script)
    goals = getattr(module, "GOALS", {})
    for env_id in [*goals, "CartPole-v1"]:
        threshold, window, on, source, budget = module.goal(A(env_id, None))
        if env_id in goals:
            assert (threshold, window, on, budget, source) == (*goals[env_id], "GOALS")
        for stop in (3.0, 0.0, -5.0):  # a threshold of the user's, at any budget
            assert module.goal(A(env_id, stop)) == (stop, window, on, "--stop-at-return",
                                                    None), env_id
    if script == "qlearning.py":  # the case that matters is there
        assert module.goal(A("FrozenLake-v1", 3.0))[2] == "eval"


def test_every_goal_with_a_budget_is_a_benchmark_tasks():
    # The other way round: a GOALS entry that states a budget was measured there, by a task of
    # benchmark.py on that environment (an environment dropped from HELD_OUT, or a task
    # deleted, leaves its goal unmeasured and fails here). grpo.py's Addition3-v0, for a
    # user's run, states none.
    import benchmark
    tasks = {(t.script, t.env_id.rpartition(":")[2]) for s in benchmark.TASKS.values() for t in s}
    for script in SCRIPTS:
        for env_id, (*_, budget) in getattr(module_of(script), "GOALS", {}).items():
            assert budget is None or (script[:-3], env_id) in tasks, (script, env_id)
    assert module_of("grpo.py").GOALS["Addition3-v0"][3] is None


def test_every_benchmark_task_judges_as_its_scripts_run():
    # Each task's threshold, window and measure (results.md's row, the README's) equal what a
    # run of its script on its environment is judged on (goal(): GOALS, --stop-at-return
    # where the task's flags give it), but for OTHER_GOALS; and each of those still exists.
    # Every GOALS budget is the least budget of its environment's tasks (but OTHER_GOALS).
    import benchmark
    tasks = {t.name: t for s in benchmark.TASKS.values() for t in s}
    assert OTHER_GOALS <= set(tasks)
    least = {}  # (script, environment): the least budget of its tasks
    for name, task in tasks.items():
        if name in OTHER_GOALS:
            continue
        flags = task.flags
        stop = (float(flags[flags.index("--stop-at-return") + 1])
                if "--stop-at-return" in flags else None)
        args = dataclasses.make_dataclass("A", ["env_id", "stop_at_return"])(task.env_id, stop)
        threshold, window, on, _, budget = module_of(task.script + ".py").goal(args)
        assert (threshold, window, on) == row_of(task), name
        # the goal is for the task's budget or a smaller one (dqn.py's CartPole-v1: 475 at
        # 100k, and at 500k too), never a larger one: a task's run is judged
        steps = (int(float(flags[flags.index("--total-timesteps") + 1]))
                 if "--total-timesteps" in flags else
                 module_of(task.script + ".py").Args().total_timesteps)
        assert stop is not None or budget is None or budget <= steps, name
        if stop is None:
            key = (task.script, task.env_id.rpartition(":")[2])
            least[key] = min(least.get(key, steps), steps)
    for (script, env_id), steps in least.items():
        assert module_of(script + ".py").GOALS[env_id][3] == steps, (script, env_id)


# ---------------------------------------------------------------------------------------
# curve.png: the learning curve a run draws itself (--curve, on outside the suite)
# ---------------------------------------------------------------------------------------
def spy_on_figures(monkeypatch):
    """The figures that matplotlib's Figure.savefig saves as a curve.png (it still saves
    them; qlearning.py's heat_map.png is left out)."""
    from matplotlib.figure import Figure
    saved, savefig = [], Figure.savefig

    def save(self, fname, *args, **kwargs):
        if os.path.basename(fname) == "curve.png":
            saved.append(self)
        return savefig(self, fname, *args, **kwargs)
    monkeypatch.setattr(Figure, "savefig", save)
    return saved


def check_curve(fig, path, script, env_id, seed, threshold, interrupted=False):
    """curve.png of the run folder is the figure, and it draws what the run folder holds:
    the episodes of episodes.csv at their steps, the mean of their last solved_window (by
    hand), the rows of evaluations.csv and summary.json's final evaluation, and the
    threshold, named with the measure it judges."""
    with open(os.path.join(path, "curve.png"), "rb") as f:
        assert f.read(8) == b"\x89PNG\r\n\x1a\n"
    with open(os.path.join(path, "summary.json")) as f:
        summary = json.load(f)
    (ax,) = fig.axes
    episodes = read_csv(os.path.join(path, "episodes.csv"))
    steps = [int(row["global_step"]) for row in episodes]
    returns = [float(row["episode_return"]) for row in episodes]
    w = summary["solved_window"]
    by_hand = [sum(returns[max(0, i - w + 1):i + 1]) / len(returns[max(0, i - w + 1):i + 1])
               for i in range(len(returns))]
    lines = {line.get_label(): line for line in ax.get_lines()}
    assert lines["episode return"].get_xdata().tolist() == steps
    assert lines["episode return"].get_ydata().tolist() == returns
    assert lines[f"mean of the last {w}"].get_xdata().tolist() == steps
    assert lines[f"mean of the last {w}"].get_ydata() == pytest.approx(by_hand)
    rows = os.path.join(path, "evaluations.csv")  # where --eval-every evaluated
    evaluations = [(int(row["global_step"]), float(row["eval_return_mean"]))
                   for row in (read_csv(rows) if os.path.exists(rows) else [])]
    if summary["eval_return_mean"] is not None:
        evaluations.append((summary["global_steps"], summary["eval_return_mean"]))
    if evaluations:
        (container,) = ax.containers  # the errorbar: its points, then its bars
        points = container.lines[0]
        assert list(zip(points.get_xdata().tolist(), points.get_ydata().tolist())) == (
            pytest.approx(evaluations))
    else:
        assert not ax.containers
    on = "evaluation" if summary["holds_on"] == "eval" else f"last-{w} mean"
    assert list(lines[f"threshold {threshold:g} ({on})"].get_ydata()) == [threshold, threshold]
    stopped = " (interrupted)" if interrupted else ""
    assert ax.get_title() == f"{script} on {env_id}, seed {seed}{stopped}"
    return summary


CURVE_RUNS = {"ppo.py": ("CartPole-v1", 475, "--eval-every", "128"),
              "qlearning.py": ("FrozenLake-v1", 0.7, "--eval-every", "100")}


@pytest.mark.parametrize("script", BLOCK)
def test_a_run_draws_its_curve_with_its_evaluations_and_says_where(script, tmp_path, monkeypatch,
                                                                    capsys):
    # --curve, seed 3: the figure is the run's own data (check_curve), the closing line ends
    # with the file's path; without --curve (the suite's default), no file and no path
    env_id, threshold, *every = CURVE_RUNS[script]
    module, saved = module_of(script), spy_on_figures(monkeypatch)
    module.main(module.tyro.cli(module.Args, args=[*TINY[script], "--seed", "3", "--curve",
                                                   *every, "--output-dir", str(tmp_path / "a")]))
    path = run_folder(tmp_path / "a")
    (fig,) = saved
    summary = check_curve(fig, path, script, env_id, 3, threshold)
    assert summary["eval_return_mean"] is not None
    assert len(read_csv(os.path.join(path, "evaluations.csv"))) >= 2
    assert capsys.readouterr().out.splitlines()[-1].endswith(
        f" | curve {os.path.join(path, 'curve.png')}")
    module.main(module.tyro.cli(module.Args, args=[*TINY[script], "--no-curve",
                                                   "--output-dir", str(tmp_path / "b")]))
    assert saved == [fig] and not os.path.exists(os.path.join(run_folder(tmp_path / "b"),
                                                              "curve.png"))
    assert " | curve " not in capsys.readouterr().out.splitlines()[-1]


@pytest.mark.parametrize("script", BLOCK)
def test_ctrl_c_draws_the_curve_of_what_the_run_has(script, tmp_path, monkeypatch):
    # Ctrl-C at the third finished episode: the curve of the two episodes, no final
    # evaluation, the title says the run was interrupted
    env_id, threshold, *_ = CURVE_RUNS[script]
    module, saved = module_of(script), spy_on_figures(monkeypatch)
    monkeypatch.setattr(module.Run, "episode", interrupt_on_call(3, module.Run.episode))
    with pytest.raises(KeyboardInterrupt):
        module.main(module.tyro.cli(module.Args, args=[
            *TINY[script], "--curve", "--total-timesteps", "100000", "--output-dir", str(tmp_path)]))
    path = run_folder(tmp_path)
    (fig,) = saved
    summary = check_curve(fig, path, script, env_id, 1, threshold, interrupted=True)
    assert summary["interrupted"] and len(read_csv(os.path.join(path, "episodes.csv"))) == 2


@pytest.mark.parametrize("script", BLOCK)
def test_the_curves_mean_is_over_the_goals_window_not_20(script, tmp_path, monkeypatch):
    # A goal's window of 3 (MountainCar's and Taxi's are 50 and 100, the default 20): returns
    # 3, 6, 9, 0 at steps 10, 20, 30, 40 draw the means of the last 3 (fewer at the start):
    # 3 / 1 = 3, (3 + 6) / 2 = 4.5, (3 + 6 + 9) / 3 = 6, (6 + 9 + 0) / 3 = 5, where a mean
    # over 20 would end at (3+6+9+0)/4 = 4.5
    from types import SimpleNamespace
    module, saved = module_of(script), spy_on_figures(monkeypatch)
    summary = {"eval_return_mean": None, "eval_return_std": None, "global_steps": 40,
               "solved_threshold": 5.0, "holds_on": "train", "interrupted": False,
               "env_id": "CartPole-v1", "seed": 7}
    run = SimpleNamespace(summary=summary, evaluations=[], args=SimpleNamespace(curve=True),
                          returns=[3.0, 6.0, 9.0, 0.0], ends=[10, 20, 30, 40], window=3,
                          path=str(tmp_path))
    assert module.Run.draw_curve(run) == os.path.join(str(tmp_path), "curve.png")
    (fig,) = saved
    lines = {line.get_label(): line for line in fig.axes[0].get_lines()}
    assert lines["mean of the last 3"].get_ydata().tolist() == [3, 4.5, 6, 5]
    assert list(lines["threshold 5 (last-3 mean)"].get_ydata()) == [5.0, 5.0]


@pytest.mark.slow  # a Python process of its own
def test_the_curve_flag_is_on_unless_plainrl_curve_is_0(tmp_path):
    # a user's run draws its curve with no flag; PLAINRL_CURVE=0 (the suite's) turns it off
    # (one process: each setting, then the two scripts imported again, as a fresh run would)
    code = ("import importlib, os, ppo, qlearning\n"
            "print(ppo.Args().curve, qlearning.Args().curve)\n"
            "for value in ('0', '1'):\n"
            "    os.environ['PLAINRL_CURVE'] = value\n"
            "    importlib.reload(ppo), importlib.reload(qlearning)\n"
            "    print(ppo.Args().curve, qlearning.Args().curve)\n")
    env = {k: v for k, v in os.environ.items() if k != "PLAINRL_CURVE"}  # unset: a user's
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True,
                         text=True, check=True).stdout
    assert out.splitlines()[-3:] == ["True True", "False False", "True True"]


@pytest.mark.parametrize("script", BLOCK)
def test_every_evaluation_plays_from_seed_100000_on_and_the_best_model_is_the_first(
        script, tmp_path, monkeypatch):
    # Every --eval-every evaluation scores 1.0 (a stand-in evaluate): the first row writes
    # best_model.pt (best_model.npz), the equal rows after it do not, and --save-model's
    # model file comes at the end (CONTRIBUTING.md: the best model, the first of equal means).
    # Each evaluation, every row's and the final one, plays from --seed 7 + 100,000, the
    # seed --eval-checkpoint replays, so that evaluations.csv scores what it will replay.
    module = module_of(script)
    seeds = []

    def make_vector_env(*args, **kwargs):  # the evaluation's environments (video_folder given)
        envs = original(*args, **kwargs)     # with their resets spied on
        if "video_folder" in kwargs:
            reset = envs.reset
            envs.reset = lambda seed=None, **kw: seeds.append(seed) or reset(seed=seed, **kw)
        return envs

    def evaluate(*args, **kwargs):  # the real evaluation, which then scores 1.0
        original_evaluate(*args, **kwargs)
        return np.ones(1)

    original, original_evaluate = module.make_vector_env, module.evaluate
    monkeypatch.setattr(module, "make_vector_env", make_vector_env)
    monkeypatch.setattr(module, "evaluate", evaluate)
    saved = spy_on(monkeypatch, module, "save_checkpoint",
                   lambda path, *args, **kwargs: os.path.basename(path))
    flags = [*TINY[script], "--eval-every", "1", "--eval-episodes", "1", "--save-model",
             "--seed", "7", "--output-dir", str(tmp_path)]
    module.main(module.tyro.cli(module.Args, args=flags))
    rows = read_csv(os.path.join(run_folder(tmp_path), "evaluations.csv"))
    means = [float(r["eval_return_mean"]) for r in rows]
    best, model = ("best_model.npz", "model.npz") if script == "qlearning.py" else (
        "best_model.pt", "model.pt")
    assert len(means) >= 2 and set(means) == {1.0}
    assert saved == [best, model]
    assert seeds == [100_007] * (len(rows) + 1)


@pytest.mark.parametrize("script", SCRIPTS)
@pytest.mark.slow  # watching a run: evaluations during it, per script
def test_eval_every_evaluates_where_the_step_count_first_passes_each_multiple(
        script, tmp_path, monkeypatch):
    # --eval-every 7, which no script's step count moves by (most move by their 2
    # environments' steps): a row where global_step first reaches or passes each multiple of
    # 7, one row however many multiples a step passes, not only at exact multiples (round
    # fourteen's impala G5). The step counts are those the script gives its RunWriter.step;
    # a stand-in evaluate scores 1.0.
    module = module_of(script)
    steps = spy_on(monkeypatch, module.Run, "step",
                   lambda self, global_step, *args, **kwargs: global_step)
    monkeypatch.setattr(module, "evaluate", lambda *args, **kwargs: np.ones(1))
    module.main(module.tyro.cli(module.Args, args=[*TINY[script], "--eval-every", "7",
                                                    "--output-dir", str(tmp_path)]))
    rows = read_csv(os.path.join(run_folder(tmp_path), "evaluations.csv"))
    first_past = sorted({min(g for g in steps if g >= 7 * m)
                         for m in range(1, max(steps) // 7 + 1)})
    assert len(first_past) >= 2
    assert [int(r["global_step"]) for r in rows] == first_past


# The scripts whose evaluation plays its episodes side by side, one environment each (not
# es.py and qlearning.py, ONE_ENVIRONMENT; mappo.py and matd3.py play PettingZoo's games;
# ppod.py needs demonstrations of the environment it learns)
SIDE_BY_SIDE = ["ppo.py"]  # the block's evaluate, one environment per episode, in every script
CONTINUOUS = {"ddpg_td3.py", "sac.py", "crossq.py"}


@pytest.mark.parametrize("script", SIDE_BY_SIDE)
def test_each_evaluation_environment_counts_its_first_episode(script, tmp_path):
    # The final evaluation of 2 episodes at seed 0 + 100,000, on my_envs:EpisodeNumber-v0:
    # environment 0 (seed 100,000, even) plays episodes of 1 step paying 1, then 2, then 3;
    # environment 1 (seed 100,001, odd) one of 3 steps paying 1 a step, 3 in all, which ends
    # at the third step, when environment 0 has ended 3 episodes (1, 2, 3). Each counts its
    # first: [1, 3], mean 2 (the last of each would give [3, 3], 3).
    module = module_of(script)
    flags = TINY[script]
    if "--env-id" in flags:  # the tiny run's own environment, replaced
        at = flags.index("--env-id")
        flags = flags[:at] + flags[at + 2:]
    env_id = "my_envs:EpisodeNumberBox-v0" if script in CONTINUOUS else "my_envs:EpisodeNumber-v0"
    summary = module.main(module.tyro.cli(module.Args, args=[
        *flags, "--env-id", env_id, "--seed", "0", "--eval-episodes", "2",
        "--output-dir", str(tmp_path)]))
    assert summary["eval_return_mean"] == 2.0 and summary["eval_return_std"] == 1.0


@pytest.mark.parametrize("script", ["impala.py"])  # (so that conftest groups it with Ray's)
def test_impalas_explained_variance_row_takes_the_values_and_then_the_targets(script, tmp_path):
    # On my_envs:EpisodeNumber-v0 every observation is 0, so the critic gives every state the
    # same value c, while the V-trace targets vary (the episodes pay 1, 2, 3, ...). Then
    # 1 - Var[v - V] / Var[v] = 1 - Var[v] / Var[v] = 0 in every row of updates.csv; with the
    # arguments swapped, 1 - Var[V - v] / Var[V] divides by Var[V] = 0: NaN. (The targets
    # v_s = V + rho (r - V) with rho = min(1, pi / mu) are no whole numbers at --gamma 0, which
    # the next test, of the scripts whose returns are, needs.)
    module = module_of(script)
    module.main(module.tyro.cli(module.Args, args=[
        *TINY[script], "--env-id", "my_envs:EpisodeNumber-v0", "--eval-episodes", "0",
        "--output-dir", str(tmp_path)]))
    rows = read_csv(os.path.join(run_folder(tmp_path), "updates.csv"))
    assert rows and all(float(r["explained_variance"]) == pytest.approx(0, abs=1e-5)
                        for r in rows), [r["explained_variance"] for r in rows]


@pytest.mark.parametrize("script", ["ppo.py", "ppo_masked.py", "ppo_rnd.py", "ppod.py",
                                    "ppo_lstm.py", "vpg.py", "trpo.py"])
def test_the_explained_variance_row_takes_the_values_and_then_the_returns(
        script, tmp_path, monkeypatch):
    # --gamma 0 makes each return its step's reward, R_t = A_t + V_t = (r_t - V_t) + V_t = r_t,
    # the episode's number (1, 2, 3, ...) on my_envs:EpisodeNumberOne-v0, whose observation 1
    # (not normalized away: --no-norm-obs where it is on by default) gives the critic values
    # that are not whole numbers (at an observation of 0 its zero biases give exactly 0), so
    # that neither V nor the advantages r - V are whole numbers like R. A spy on
    # explained_variance sees V first and R second, and the row is 1 - Var[R - V] / Var[R]
    # of the two. (Rewards unscaled: --no-norm-reward where it is on by default. ppod.py gets
    # one demonstration of the environment, which --rho 0 --phi 0 never replays.)
    module = module_of(script)
    seen = spy_on(monkeypatch, module, "explained_variance", lambda values, returns: (
        values.flatten().cpu().numpy().copy(), returns.flatten().cpu().numpy().copy()))
    own = [f"--no-{name.replace('_', '-')}" for name in ("norm_obs", "norm_reward")
           if getattr(module.Args, name, False)]
    if script == "ppod.py":
        os.makedirs(tmp_path / "demo")
        module.save_demo(tmp_path / "demo" / "demo_0.npz", module.Demo(
            np.ones((4, 1), np.float32), np.zeros(3, np.int64), np.ones(3, np.float32)))
        own += ["--rho", "0", "--phi", "0", "--demos-dir", str(tmp_path / "demo")]
    module.main(module.tyro.cli(module.Args, args=[
        *TINY[script], "--env-id", "my_envs:EpisodeNumberOne-v0", "--gamma", "0", *own,
        "--eval-episodes", "0", "--output-dir", str(tmp_path / "runs")]))
    rows = read_csv(os.path.join(run_folder(tmp_path / "runs"), "updates.csv"))
    assert len(seen) == len(rows) > 0
    for (values, returns), row in zip(seen, rows):
        assert np.allclose(returns, returns.round(), atol=1e-5) and returns.min() >= 1
        assert not np.allclose(values, values.round(), atol=1e-5), values
        expected = 1 - np.var(returns - values, ddof=1) / np.var(returns, ddof=1)
        assert float(row["explained_variance"]) == pytest.approx(expected, abs=1e-5)


# The scripts with layer_init's networks, each built for 4 observations, 3 actions (discrete)
# and hidden layers 8 wide (ppo_lstm.py's LSTMs too)
LAYER_INIT = {"ppo.py": lambda m: m.Agent((4,), 3, False, 8),
              "impala.py": lambda m: m.Agent((4,), 3, False, 8),
              "vpg.py": lambda m: m.Agent((4,), 3, False, 8),
              "trpo.py": lambda m: m.Agent((4,), 3, False, 8),
              "ppo_masked.py": lambda m: m.Agent(4, 3, 8),
              "ppod.py": lambda m: m.Agent(4, 3, False, 8),
              "ppo_rnd.py": lambda m: m.Agent(4, 3, False, 8),
              "ppo_lstm.py": lambda m: m.Agent(4, 3, False, 8, 8)}


@pytest.mark.parametrize("script", LAYER_INIT)
def test_the_networks_start_as_the_ppo_baselines_start_them(script):
    # Orthogonal weights, biases 0: gain sqrt(2) in the hidden layers, 0.01 at the actor's
    # output (its logits start near 0, a near-uniform first policy) and 1 at each critic's
    # (ppo_rnd.py's intrinsic critic too); ppo_lstm.py's LSTM weights gain 1. A weight W
    # (out x in) orthogonal with gain g has W W^T = g^2 I where out <= in, else W^T W = g^2 I:
    # the first layer (8 x 4) W^T W = 2 I_4, the hidden one (8 x 8) 2 I_8, the actor's output
    # (3 x 8) 0.0001 I_3, the critic's (1 x 8) |w|^2 = 1, each LSTM weight (32 x 8) I_8.
    import torch
    torch.manual_seed(0)
    agent = LAYER_INIT[script](module_of(script))

    def linears(net):
        return [m for m in net.modules() if isinstance(m, torch.nn.Linear)]

    outputs = {agent.actor: 0.01, agent.critic: 1.0, getattr(agent, "critic_int", None): 1.0}
    gains = {id(linears(net)[-1]): gain for net, gain in outputs.items() if net is not None}
    weights = [(gains.get(id(layer), math.sqrt(2)), layer.weight) for layer in linears(agent)]
    weights += [(1.0, w) for lstm in agent.modules() if isinstance(lstm, torch.nn.LSTM)
                for name, w in lstm.named_parameters() if name.startswith("weight")]
    assert len(weights) == {"ppo_rnd.py": 9, "ppo_lstm.py": 10}.get(script, 6)
    for gain, w in weights:
        square = w @ w.T if w.shape[0] <= w.shape[1] else w.T @ w
        assert torch.allclose(square / gain ** 2, torch.eye(len(square)), atol=1e-4), (gain, w)
    biases = [b for name, b in agent.named_parameters()
              if name.rsplit(".", 1)[-1].startswith("bias")]
    assert len(biases) == len(weights) and not any(b.any() for b in biases)


@pytest.mark.parametrize("script", ["ppo.py", "ppo_lstm.py", "ppod.py", "ppo_rnd.py", "vpg.py",
                                    "trpo.py"])
def test_normalized_observations_are_clipped_to_ten(script):
    # Statistics mean 2, var 0.25 (std 0.5) in each of 4 dimensions: (obs - 2) / 0.5 takes
    # 9 -> 14, clipped to 10; -4 -> -12, clipped to -10; 5.5 -> 7, kept (within [-10, 10],
    # beyond baselines' [-5, 5]); 2.25 -> 0.5. The 1e-8 under the root moves them < 1e-6.
    # The loop's acting observations, its final observations and the evaluations all pass
    # through this call (ppo_rnd.py: the policy's normalizer; the RND's clips at 5).
    normalizer = module_of(script).ObsNormalizer((4,), enabled=True)
    normalizer.rms.mean, normalizer.rms.var = np.full(4, 2.0), np.full(4, 0.25)
    normalized = normalizer(np.array([[9.0, -4.0, 5.5, 2.25]]))
    assert normalized.dtype == np.float32
    assert normalized.tolist() == [pytest.approx([10.0, -10.0, 7.0, 0.5])]


# The scripts whose loss function returns (loss, pg_loss, v_loss, entropy), each its name
LOSSES = {"ppo.py": "ppo_loss", "ppo_masked.py": "ppo_loss", "ppod.py": "ppo_loss",
          "ppo_lstm.py": "ppo_loss", "ppo_rnd.py": "ppo_loss", "mappo.py": "mappo_loss",
          "impala.py": "impala_loss"}


@pytest.mark.parametrize("script", LOSSES)
def test_the_loss_columns_are_the_last_minibatchs_own(script, tmp_path, monkeypatch):
    # updates.csv's policy_loss, value_loss and entropy, each in its own column, are those the
    # loss function returned at the update's last minibatch (round thirteen: ppo.py's two
    # unpacked swapped passed every test of ppo.py but the one written for it then)
    module = module_of(script)
    original, returned = getattr(module, LOSSES[script]), []

    def spy(*args, **kwargs):
        loss, pg_loss, v_loss, entropy = original(*args, **kwargs)
        returned.append((pg_loss.item(), v_loss.item(), entropy.item()))
        return loss, pg_loss, v_loss, entropy

    monkeypatch.setattr(module, LOSSES[script], spy)
    module.main(module.tyro.cli(module.Args, args=[*TINY[script], "--eval-episodes", "0",
                                                    "--output-dir", str(tmp_path)]))
    last = read_csv(os.path.join(run_folder(tmp_path), "updates.csv"))[-1]
    logged = tuple(float(last[key]) for key in ("policy_loss", "value_loss", "entropy"))
    assert logged == pytest.approx(returned[-1], rel=1e-5)
    assert len(set(returned[-1])) == 3  # three numbers a swap would move


# The flag of each update's epochs of minibatches (vpg.py and trpo.py: of the value function)
EPOCHS = {"ppo.py": "--update-epochs", "ppo_masked.py": "--update-epochs",
          "ppo_rnd.py": "--update-epochs", "ppod.py": "--update-epochs",
          "mappo.py": "--update-epochs", "vpg.py": "--vf-iters", "trpo.py": "--vf-iters"}


@pytest.mark.parametrize("script", EPOCHS)
def test_each_epoch_draws_its_own_shuffle(script, tmp_path, monkeypatch):
    # 3 epochs an update, one row of updates.csv an update: torch.randperm is drawn 3 times
    # an update, each a fresh order of the rollout's n rows (two equal ones: probability
    # 1 / n!); one draw kept for every epoch would come once an update.
    import torch
    module, drawn, randperm = module_of(script), [], torch.randperm

    def spy(*args, **kwargs):
        drawn.append(randperm(*args, **kwargs))
        return drawn[-1]

    monkeypatch.setattr(torch, "randperm", spy)
    module.main(module.tyro.cli(module.Args, args=[
        *TINY[script], EPOCHS[script], "3", "--eval-episodes", "0", "--output-dir", str(tmp_path)]))
    rows = read_csv(os.path.join(run_folder(tmp_path), "updates.csv"))
    assert rows and len(drawn) == 3 * len(rows)
    assert len({tuple(order.tolist()) for order in drawn}) == len(drawn)


PROGRESS = re.compile(r"step ([\d,]+)/([\d,]+) \| ([\d,]+) sps \| (\d+) min left \| "
                      r"return \(last \d+\) (n/a|-?\d+\.\d)")


@pytest.mark.parametrize("script", BLOCK)
def test_progress_lines_count_up_to_one_budget(script, tmp_path, monkeypatch, capsys):
    # A clock that moves 1 s at each reading makes a tiny run print many progress lines, each
    # in the one form (PROGRESS), the steps never going back, the budget the same on every
    # line.
    printed = progress_lines_of_a_tiny_run(script, tmp_path, monkeypatch, capsys)
    assert len(printed) >= 3 and all(printed)
    steps = [int(m[1].replace(",", "")) for m in printed]
    assert steps == sorted(steps) and 0 < steps[0] < steps[-1]
    assert len({m[2] for m in printed}) == 1


def progress_lines_of_a_tiny_run(script, tmp_path, monkeypatch, capsys):
    """The progress lines (PROGRESS matches) of a tiny run whose clock moves 1 s at each
    reading, so that it prints many."""
    module = module_of(script)
    set_clock(module, monkeypatch)
    args = module.tyro.cli(module.Args, args=[*TINY[script], "--eval-episodes", "0",
                                              "--output-dir", str(tmp_path)])
    capsys.readouterr()
    module.main(args)
    out = capsys.readouterr().out
    return [PROGRESS.fullmatch(line) for line in out.splitlines() if line.startswith("step ")]


@pytest.mark.parametrize("script", SCRIPTS)
@pytest.mark.slow  # a run recording videos, per script
def test_capture_video_names_one_video_per_evaluation_episode_quietly(script, tmp_path,
                                                                       run_cli, capfd,
                                                                       monkeypatch):
    # SDL writes its complaint to the process's stderr itself (capfd sees it, run_cli's
    # redirection does not), unless SDL_VIDEODRIVER, which a script sets, says "dummy"
    monkeypatch.delenv("SDL_VIDEODRIVER", raising=False)
    code, _, err = run_cli(script, [*TINY[script], "--eval-episodes", "2", "--capture-video",
                                    "--output-dir", str(tmp_path)])
    err += capfd.readouterr().err
    assert code == 0
    assert video_names(tmp_path) == ["eval-0-episode-0.mp4", "eval-1-episode-0.mp4"]
    assert "XDG_RUNTIME_DIR" not in err  # SDL's complaint, harmless when only frames are drawn
    assert os.environ.get("SDL_VIDEODRIVER") == "dummy"


@pytest.mark.parametrize("script", BLOCK)
def test_progress_line_by_hand(script):
    # 2,500 of 100,000 steps at 25 steps per second: the 97,500 steps left take 97,500 / 25 =
    # 3,900 s = 65 min. 100 of 4,000,000 at 100 sps: 3,999,900 / 100 = 39,999 s = 666.65 min,
    # 667 min. No return yet: "n/a".
    progress_line = module_of(script).progress_line
    assert progress_line(2500, 100_000, 25.0, 21.456) == (
        "step 2,500/100,000 | 25 sps | 65 min left | return (last 20) 21.5")
    assert progress_line(100, 4_000_000, 100.0, None) == (
        "step 100/4,000,000 | 100 sps | 667 min left | return (last 20) n/a")


@pytest.mark.parametrize("script", BLOCK)
def test_a_missing_extra_is_named_with_the_version_requirements_txt_pins(
        script, check_usage_error, monkeypatch):
    """--capture-video without moviepy: one line naming the install command of the version
    that requirements.txt pins (an unpinned one may fetch a moviepy the scripts do not fit)."""
    with open(os.path.join(ROOT, "requirements.txt")) as f:
        (pin,) = [line.strip() for line in f if line.startswith("moviepy==")]
    find_spec = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec",
                        lambda name, *a: None if name == "moviepy" else find_spec(name, *a))
    check_usage_error(script, ["--capture-video"],
                      f"--capture-video needs moviepy: pip install {pin}")


# The scripts with --norm-reward: their make_vector_env takes the discount of the return
NORM_REWARD = ["ppo.py", "ppo_masked.py", "ppo_lstm.py", "ppo_rnd.py", "vpg.py", "trpo.py"]


def test_the_norm_reward_list_names_every_script_with_the_flag():
    makers = {s: getattr(module_of(s), "make_vector_env", None) for s in SCRIPTS}
    assert set(NORM_REWARD) == {s for s, make in makers.items()
                                if make and "reward_gamma" in inspect.signature(make).parameters}


@pytest.mark.parametrize("norm_reward", [False, True])
@pytest.mark.parametrize("script", NORM_REWARD)
def test_norm_reward_reaches_the_training_environments_alone_with_gamma(script, norm_reward,
                                                                        tmp_path, monkeypatch):
    # With --norm-reward the training environments (--num-envs 2) normalize by the return
    # discounted by --gamma (0.9 here, no script's default; Gymnasium's NormalizeReward is
    # given it, not its own 0.99); without it they do not, and the
    # other environments (the checks', ppo_rnd.py's random states', the evaluation's one
    # episode) never do. Either way episodes.csv keeps the environment's own returns:
    # CartPole's, 1 a step, equal to the episode's length (ppo_masked.py's without masks).
    module = module_of(script)
    make = module.make_vector_env
    made = []  # (environments, reward_gamma) of each call

    def spy(*args, **kwargs):
        given = inspect.signature(make).bind(*args, **kwargs).arguments
        made.append((given["num_envs"], given.get("reward_gamma")))
        return make(*args, **kwargs)

    monkeypatch.setattr(module, "make_vector_env", spy)
    wrapped = spy_on(monkeypatch, gym.wrappers.vector.NormalizeReward, "__init__",
                     lambda self, env, gamma=0.99, epsilon=1e-8: gamma)
    monkeypatch.setattr(sys, "argv", [script, *TINY[script], "--env-id", "CartPole-v1",
                                      "--total-timesteps", "256", "--gamma", "0.9",
                                      "--eval-episodes", "1", "--output-dir", str(tmp_path),
                                      "--norm-reward" if norm_reward else "--no-norm-reward",
                                      *(["--no-mask"] if script == "ppo_masked.py" else [])])
    module.main(module.parse_args())
    assert (2, 0.9 if norm_reward else None) in made
    assert [(n, gamma) for n, gamma in made if gamma is not None] == [(2, 0.9)] * norm_reward
    assert wrapped == [0.9] * norm_reward
    episodes = read_csv(os.path.join(run_folder(str(tmp_path)), "episodes.csv"))
    assert episodes and all(float(e["episode_return"]) == float(e["episode_length"])
                            for e in episodes)


@pytest.mark.parametrize("script", NORM_REWARD)
def test_norm_reward_clips_the_normalized_reward_to_ten(script):
    # The first reward 1 is also the first discounted return, so the return's running
    # variance is that of {1} beside the prior (count 1e-4, mean 0, var 1): M2 = 1e-4 +
    # 1^2 * 1e-4 * 1 / 1.0001 = 2e-4, var = 2e-4 / 1.0001, std = 0.01414, and 1 / 0.01414
    # = 70.7 is clipped to 10.
    envs = module_of(script).make_vector_env("CountToThree-v0", 1, reward_gamma=0.99)
    envs.reset(seed=0)
    _, reward, _, _, _ = envs.step(np.array([0]))
    envs.close()
    assert reward.tolist() == [10.0]


# The scripts with --max-grad-norm
CLIPPED = ["ppo.py", "ppo_masked.py", "ppod.py", "ppo_lstm.py", "ppo_rnd.py", "impala.py", "pqn.py",
           "mappo.py", "dqn.py", "grpo.py", "rlhf.py"]


def test_the_clipped_list_names_every_script_with_the_flag():
    assert set(CLIPPED) == {s for s in SCRIPTS if "max_grad_norm" in
                            {field.name for field in dataclasses.fields(module_of(s).Args)}}


@pytest.mark.parametrize("script", CLIPPED)
def test_each_optimizer_step_takes_the_gradient_clipped_to_max_grad_norm(script, tmp_path,
                                                                         monkeypatch):
    # --max-grad-norm 1e-3 lies below the gradients' norms g of a tiny run, so clip_grad_norm_
    # scales a gradient to norm 1e-3 * g / (g + 1e-6), never above 1e-3 and within 1e-6 / g
    # of it, and that is the norm Adam's step must find (clipped after the step, it would find
    # g). mappo.py clips its actors and its critic each to 1e-3 (as MAPPO's code does) under
    # one Adam, whose step then finds sqrt(1e-3^2 + 1e-3^2) = 1.414e-3.
    bound = 1e-3 * (math.sqrt(2) if script == "mappo.py" else 1)
    stepped = spy_on_stepped_gradient_norms(monkeypatch)
    module = module_of(script)
    if script == "grpo.py":
        # its supervised warm start has an optimizer of its own, unclipped (--max-grad-norm is
        # the RL update's): its steps are not counted; and a tiny model answers every sum
        # wrongly, so a reward that pays at random gives the update advantages to clip
        original, rng = module.warm_start, np.random.default_rng(0)
        monkeypatch.setattr(module, "warm_start",
                            lambda *a, **k: (original(*a, **k), stepped.clear())[0])
        monkeypatch.setattr(module, "addition_reward", lambda *a: float(rng.random() < 0.5))
    if script == "rlhf.py":
        # its warm start and its reward model have optimizers of their own, unclipped
        # (--max-grad-norm is PPO's): their steps, all taken before the reward model is
        # returned, are not counted
        original = module.train_reward_model
        monkeypatch.setattr(module, "train_reward_model",
                            lambda *a, **k: (original(*a, **k), stepped.clear())[0])
    module.main(module.tyro.cli(module.Args, args=[*TINY[script], "--max-grad-norm", "1e-3",
                                                    "--eval-episodes", "0",
                                                    "--output-dir", str(tmp_path)]))
    assert stepped and max(stepped) <= bound * (1 + 1e-6)
    assert max(stepped) == pytest.approx(bound, rel=1e-3)  # the clip acted on some step


# ---------------------------------------------------------------------------------------
# --help reads as written: one line per flag's docstring
# ---------------------------------------------------------------------------------------
@pytest.mark.parametrize("script", [*SCRIPTS, "plot.py", "benchmark.py", "tune.py"])
def test_every_flag_docstring_is_one_line_so_help_never_breaks_a_sentence(script):
    # tyro removes a docstring's single line breaks before it dedents it, so the indented
    # second line of a flag's docstring starts a line of its own in --help, mid-sentence
    # ("... flat Box or image" / "observations; ..."). Each docstring of an Args field is one
    # line of at most 100 characters; what does not fit goes in a comment above the field.
    import ast
    with open(os.path.join(ROOT, script)) as f:
        source = f.read()
    lines = source.splitlines()
    flags, broken = 0, []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.ClassDef) and node.name == "Args":
            for field, doc in zip(node.body, node.body[1:]):
                text = doc.value.value if isinstance(doc, ast.Expr) and isinstance(
                    doc.value, ast.Constant) else None
                if isinstance(field, ast.AnnAssign) and isinstance(text, str):
                    flags += 1
                    if (doc.lineno != doc.end_lineno or "\n" in text
                            or len(lines[doc.lineno - 1]) > 100):
                        broken.append(f"{script}:{doc.lineno} {field.target.id}")
    assert flags >= 5  # the Args dataclass was found and its flags' docstrings read
    assert broken == []


# One source: the plumbing below every banner is plumbing/common.py's, stamped
# plumbing/stamp.py, the command that writes the blocks, imported from its file (plumbing/ on
# sys.path would let plumbing/ray.py stand in for the ray package)
stamp = importlib.util.module_from_spec(importlib.util.spec_from_file_location(
    "stamp", os.path.join(ROOT, "plumbing", "stamp.py")))
stamp.__spec__.loader.exec_module(stamp)


@pytest.mark.parametrize("script", SCRIPTS)
def test_every_stamped_block_equals_its_source_byte_for_byte(script):
    with open(os.path.join(ROOT, script)) as f:
        text = f.read()
    assert "# Stamped from plainrl's plumbing/common.py by its stamp.py" in text
    assert text == stamp.stamped(text, script), f"run python plumbing/stamp.py ({script} differs)"


def test_the_greedy_policy_written_alike_is_one_stamped_text():
    # vpg.py, trpo.py and ppo_rnd.py evaluate with the same greedy policy (an actor and an
    # observation normalizer): one source, plumbing/greedy.py, stamped into each one's hooks;
    # the stamp test above holds each copy to it, and no other copy of it lives outside a block
    for script in ("vpg.py", "trpo.py", "ppo_rnd.py"):
        with open(os.path.join(ROOT, script)) as f:
            text = f.read()
        start, end = stamp.START.format(name="greedy"), stamp.END.format(name="greedy")
        assert start in text and end in text and text.index("\n# Plumbing:") < text.index(start)
        assert text.count("def greedy_policy(") == 1
        assert "def greedy_policy(" in text[text.index(start):text.index(end)]


def test_the_language_scripts_hold_one_text_of_the_text_pieces():
    # grpo.py and rlhf.py share the sampler and the transformer as one stamped text,
    # plumbing/text.py's, above the banner, and the tokenizer and the encoding as another,
    # plumbing/tokens.py's, below it; the stamp test above holds each copy to its source
    assert {os.path.basename(p) for p in stamp.scripts()} >= {"grpo.py", "rlhf.py"}
    for script in ("grpo.py", "rlhf.py"):
        with open(os.path.join(ROOT, script)) as f:
            text = f.read()
        banner = text.index("\n# Plumbing:")
        assert stamp.START.format(name="text") in text and stamp.END.format(name="text") in text
        assert text.index(stamp.END.format(name="text")) < banner
        assert "def sample(" in stamp.stamped(text, script)
        assert stamp.START.format(name="tokens") in text
        assert banner < text.index(stamp.START.format(name="tokens"))
        assert text.index(stamp.END.format(name="common")) < text.index(
            stamp.START.format(name="tokens"))
        assert "class Tokenizer" in stamp.stamped(text, script)


def test_run_calls_a_scripts_optional_measure_hook(tmp_path, monkeypatch):
    # A script's optional measure(run, global_step, moment) (grpo.py's and rlhf.py's held-out
    # measures): Run calls it at each --eval-every evaluation and after each update's
    # row, and run.measure hands on train's own moments and the hook's answer; a script
    # without the hook gets None and nothing else happens.
    module = module_of("grpo.py")  # its own hook stood in for, then taken away
    args = module.Args(output_dir=str(tmp_path), tensorboard=False, eval_every=100,
                       eval_samples=8, total_timesteps=300)
    run = module.Run(args, "cpu", {})
    monkeypatch.setattr(module, "evaluate", lambda args, models: np.array([1.0, 2.0]))
    monkeypatch.delattr(module, "measure")
    assert run.measure(0, "start") is None
    called = []
    monkeypatch.setattr(module, "measure", lambda run_, step, moment: called.append(
        (run_, step, moment)) or moment.upper(), raising=False)
    assert run.measure(0, "start") == "START"
    run.step(50)
    run.step(150)  # crosses 100: an evaluation
    run.update(150, loss=0.5)
    run.measure(300, "end")
    assert called == [(run, 0, "start"), (run, 150, "evaluation"), (run, 150, "update"),
                      (run, 300, "end")]
    run.close()


def test_the_numpy_variant_keeps_its_own_regions_and_drops_torchs():
    # "a\n# [torch]\nt\n# [end]\n# [numpy]\nn\n# [end]\nb": torch keeps a, t, b; numpy a, n, b;
    # the marker lines are never stamped.
    source = "a\n# [torch]\nt\n# [end]\n# [numpy]\nn\n# [end]\nb\n"
    assert stamp.variant(source, numpy_only=False) == "a\nt\nb\n"
    assert stamp.variant(source, numpy_only=True) == "a\nn\nb\n"
    restamped = stamp.stamped(f"x\n{stamp.START.format(name='common')}\nA STALE LINE\n"
                              f"{stamp.END.format(name='common')}\ny\n", "ppo.py")
    assert "A STALE LINE" not in restamped and "def evaluate(args, models" in restamped


@pytest.mark.skipif(bool(os.environ.get("DISPLAY")), reason="a display renders MuJoCo's frames")
def test_capture_video_on_a_machine_without_a_display_stops_before_training(tmp_path):
    # MuJoCo's default renderer (GLFW) needs a display: --capture-video renders a frame in
    # check_env, so the run stops in one line naming MUJOCO_GL=egl, before any training,
    # instead of failing at the final evaluation (a subprocess: MuJoCo reads MUJOCO_GL once).
    env = {k: v for k, v in os.environ.items() if k not in ("MUJOCO_GL", "PYOPENGL_PLATFORM")}
    done = subprocess.run([sys.executable, "ppo.py", "--env-id", "Hopper-v5", "--capture-video",
                           "--output-dir", str(tmp_path / "runs")], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 2 and done.stderr.count("\n") == 1
    assert done.stderr.startswith("ppo.py: error: cannot make Hopper-v5 to record videos (")
    assert "MUJOCO_GL=egl" in done.stderr and not (tmp_path / "runs").exists()


# The logged values, each asserted by its value once (the column audit's checks, conftest.py):
# the block writes them alike for every script, so one script of each loop's kind runs them.
def test_the_time_columns_and_the_evaluation_rows(tmp_path, monkeypatch):
    check_the_time_columns_and_the_evaluation_rows(module_of("ppo_lstm.py"), tmp_path,
                                                   monkeypatch, data_chunk_length=4)


def test_the_episode_rows_the_last_20_and_the_times(tmp_path, monkeypatch):
    check_the_episode_rows_the_last_20_and_the_times(module_of("sac.py"), tmp_path, monkeypatch)


def test_the_evaluation_rows(tmp_path, monkeypatch):
    check_the_evaluation_rows(module_of("sac.py"), tmp_path, monkeypatch)


def test_the_evaluations_of_a_replay_script(tmp_path):
    check_replay_evaluations(module_of("sac.py"), tmp_path)


# ---------------------------------------------------------------------------------------
# The block's pieces that planted bugs got past (issue 72): each checked on its own
# ---------------------------------------------------------------------------------------
@pytest.mark.parametrize("script, argv, message", [
    # tuple[int, ...] and Optional[int] take whole numbers too, and say so alike
    ("qlearning.py", ["--bins", "1e1"], "--bins takes a whole number, not '1e1' ("),
    ("dqn.py", ["--batch-size", "3.2e1"], "--batch-size takes a whole number, not '3.2e1' ("),
    # a flag of several values names the one that is wrong, not the first: 4 is a whole number
    ("qlearning.py", ["--bins", "4", "2.5", "--seed", "3"], "--bins takes a whole number, not "
     "'2.5' ("),
    ("qlearning.py", ["--bins", "4", "x"], "--bins takes a whole number, not 'x' ("),
])
def test_a_flag_of_whole_numbers_in_a_container_says_it_takes_whole_numbers(
        script, argv, message, check_usage_error):
    check_usage_error(script, argv, message)


def test_capture_video_renders_a_frame_in_process_before_training(check_usage_error):
    # test_capture_video_on_a_machine_without_a_display_stops_before_training runs ppo.py's
    # file in a subprocess; here check_env itself: a reset is not enough, the frame must be
    # rendered (NoDisplay-v0's render fails as MuJoCo's does without a display)
    check_usage_error("ppo.py", [*TINY["ppo.py"], "--env-id", "NoDisplay-v0", "--capture-video"],
                      "cannot make NoDisplay-v0 to record videos (for MuJoCo without a display: "
                      "MUJOCO_GL=egl): RuntimeError: no OpenGL context")


def test_seed_and_device_seeds_python_numpy_and_torch():
    # each generator draws after seed_and_device(7) what it draws after its own seed(7)
    module = module_of("ppo.py")
    random, seeded = module.random, []
    for seed in (lambda: module.seed_and_device(7, cuda=False),
                 lambda: (random.seed(7), np.random.seed(7), torch.manual_seed(7))):
        random.seed(0), np.random.seed(0), torch.manual_seed(0)  # another state in between
        seed()
        seeded.append((random.random(), np.random.random(), torch.rand(1).item()))
    assert seeded[0] == seeded[1]


@pytest.mark.parametrize("script", BLOCK)
def test_an_updates_speed_is_its_own_step_over_its_time(script, tmp_path, monkeypatch):
    # Run.update(300) 10 s after the start writes sps 300 / 10 = 30, whatever step()
    # last counted (50 here: 5 a second)
    module = module_of(script)
    clock = set_clock(module, monkeypatch, tick=0)
    run = module.Run(module.Args(output_dir=str(tmp_path), tensorboard=False), "cpu", {})
    run.step(50)
    clock.now += 10
    run.update(300)
    run.close()
    (row,) = read_csv(os.path.join(run.path, "updates.csv"))
    assert (row["global_step"], float(row["wall_time"]), row["sps"]) == ("300", 10.0, "30")


@pytest.mark.parametrize("script", BLOCK)
def test_runs_in_the_same_second_get_folders_of_their_own(script, tmp_path, monkeypatch):
    # the clock frozen: three runs of the same flags in the same second get the folder's
    # name, then -2 and -3 (the name holds the second), not "cannot create the run folder"
    module = module_of(script)
    set_clock(module, monkeypatch, tick=0)
    args = module.Args(output_dir=str(tmp_path), tensorboard=False, env_id=NO_GOAL)
    names = [os.path.basename(module.Run(args, "cpu", {}).path) for _ in range(3)]
    assert names[1:] == [f"{names[0]}-2", f"{names[0]}-3"]


@pytest.mark.parametrize("script", BLOCK)
def test_an_evaluated_checkpoint_writes_no_model_of_its_own(script, tmp_path):
    # --eval-checkpoint with --save-model trains nothing, so its run folder holds no model:
    # the trained run's is the one
    module = module_of(script)
    module.main(module.tyro.cli(module.Args, args=[*TINY[script], "--save-model", "--eval-episodes",
                                                   "0", "--output-dir", str(tmp_path / "a")]))
    trained = run_folder(tmp_path / "a")
    module.main(module.tyro.cli(module.Args, args=[*TINY[script], "--eval-checkpoint", trained,
                                                   "--save-model", "--eval-episodes", "1",
                                                   "--output-dir", str(tmp_path / "b")]))
    assert glob.glob(os.path.join(trained, "model.*"))
    assert not glob.glob(os.path.join(run_folder(tmp_path / "b"), "*model.*"))


@pytest.mark.parametrize("loss", [float("nan"), float("inf"), -float("inf")])
@pytest.mark.parametrize("script", BLOCK)
def test_an_update_with_a_non_finite_loss_writes_no_row_and_stops(script, loss, tmp_path,
                                                                  capsys):
    # a finite update writes its row and says go on (False); then a NaN, inf or -inf loss:
    # True, the run marked interrupted, the line said, and updates.csv keeps the first row
    module = module_of(script)
    run = module.Run(module.Args(output_dir=str(tmp_path), tensorboard=False), "cpu", {})
    assert run.update(10, 0.5, x=1.0) is False
    assert run.update(20, loss, x=2.0) is True
    run.close()
    assert run.summary["interrupted"] is True
    assert "the loss became non-finite (NaN or inf) at step 20" in capsys.readouterr().out
    assert [(r["global_step"], r["x"]) for r in read_csv(os.path.join(run.path, "updates.csv"))] == [
        ("10", "1.0")]


# ---------------------------------------------------------------------------------------
# The run's goal and verdict, unit by unit (Run: judge, train, draw_curve)
# ---------------------------------------------------------------------------------------
@pytest.mark.parametrize("script", BLOCK)
def test_a_checkpoints_evaluation_is_judged_on_no_threshold(script, tmp_path):
    # --eval-checkpoint trains nothing: summary.json has no threshold to reach (and so no
    # verdict), though the run's window and measure are its goal's (--stop-at-return 3 over
    # the default 20 training episodes); the same flags without it keep the threshold 3
    module = module_of(script)
    for checkpoint, threshold in (("model-file", None), (None, 3.0)):
        args = module.Args(output_dir=str(tmp_path), tensorboard=False, eval_episodes=0,
                           stop_at_return=3.0, env_id=NO_GOAL, eval_checkpoint=checkpoint)
        summary = module.Run(args, "cpu", {}).summary
        assert (summary["solved_threshold"], summary["solved_window"], summary["holds_on"]) == (
            threshold, 20, "train")


@pytest.mark.parametrize("script", BLOCK)
def test_the_summary_starts_with_the_runs_own_fields(script, tmp_path):
    # summary.json has SUMMARY_KEYS, in that order, from the start: the flags' algorithm,
    # environment, seed and evaluation episodes, no step, not interrupted, the verdict empty
    module = module_of(script)
    args = module.Args(output_dir=str(tmp_path), tensorboard=False, eval_episodes=3, seed=11,
                       exp_name="mine", env_id=NO_GOAL)
    summary = module.Run(args, "cpu", {}).summary
    assert tuple(summary) == module.SUMMARY_KEYS
    assert {k: summary[k] for k in ("algorithm", "env_id", "seed", "eval_episodes",
                                    "global_steps", "interrupted")} == {
        "algorithm": "mine", "env_id": NO_GOAL, "seed": 11, "eval_episodes": 3,
        "global_steps": 0, "interrupted": False}
    assert [summary[k] for k in ("end_return", "holds", "solved_at_step",
                                 "train_return_last20", "eval_return_mean")] == [None] * 5


@pytest.mark.parametrize("script", BLOCK)
def test_a_run_without_an_episode_has_no_last_20_mean_and_no_verdict(script, tmp_path, capsys):
    # No training episode ended: recent_return is None (not 0), so train_return_last20 is
    # null and printed "-", end_return and holds are null, and a threshold of 0 (which a
    # mean of 0 would reach) is not reached
    module = module_of(script)
    args = module.Args(output_dir=str(tmp_path), tensorboard=False, eval_episodes=0,
                       stop_at_return=0.0, env_id=NO_GOAL)
    run = module.Run(args, "cpu", {})
    assert run.recent_return() is None and run.reached(0.0, 10) is False
    run.step(40)
    summary = run.train(lambda: None)
    assert summary["global_steps"] == 40
    assert [summary[k] for k in ("train_return_last20", "end_return", "holds",
                                 "solved_at_step")] == [None] * 4
    closing = capsys.readouterr().out.splitlines()[-1]
    assert "| train_return_last20 - | eval_return_mean - |" in closing
    assert "hold" not in closing.replace("holds_on", "")
    assert "| solved_at_step not reached (last-20 mean >= --stop-at-return 0) " in closing + " "


@pytest.mark.parametrize("script", BLOCK)
def test_the_step_count_is_the_largest_an_episode_or_a_step_reported(script, tmp_path):
    # an episode that ended at step 30, then one reported at 20 (another environment's,
    # counted before): global_steps stays 30; a step at 50 raises it, an episode at 45 not
    module = module_of(script)
    args = module.Args(output_dir=str(tmp_path), tensorboard=False, eval_episodes=0,
                       env_id=NO_GOAL)
    run = module.Run(args, "cpu", {})
    run.episode(30, 1.0, 3)
    run.episode(20, 1.0, 3)
    assert run.summary["global_steps"] == 30
    run.step(50)
    run.episode(45, 1.0, 3)
    assert run.summary["global_steps"] == 50 and run.ends == [30, 20, 45]


@pytest.mark.parametrize("script", BLOCK)
def test_an_evaluation_goal_holds_at_its_threshold_exactly_and_says_so(script, tmp_path,
                                                                      monkeypatch, capsys):
    # GOALS judges ThreeSteps-v0 on the final evaluation, threshold 2: evaluations of 1 and 3
    # (a stand-in evaluate) have mean 2 and std 1 (the population's: sqrt((1 + 1) / 2)); 2 >= 2
    # holds, whatever the training returns (25 of 0: a last-20 mean of 0); 1.5 and 2.4 (mean
    # 1.95) do not
    module = module_of(script)
    monkeypatch.setattr(module, "GOALS", {"ThreeSteps-v0": (2.0, 20, "eval", None)}, raising=False)
    for returns, holds in (([1.0, 3.0], True), ([1.5, 2.4], False)):
        monkeypatch.setattr(module, "evaluate", lambda *a, r=returns: np.array(r))
        args = module.Args(output_dir=str(tmp_path / str(holds)), tensorboard=False,
                           eval_episodes=2, env_id=NO_GOAL)
        run = module.Run(args, "cpu", {})
        for k in range(1, 26):
            run.episode(k, 0.0, 1)
        summary = run.train(lambda: None)
        mean = sum(returns) / 2
        assert summary["eval_return_mean"] == pytest.approx(mean)
        assert summary["eval_return_std"] == pytest.approx(abs(returns[1] - returns[0]) / 2)
        assert summary["end_return"] == pytest.approx(mean) and summary["holds"] is holds
        closing = capsys.readouterr().out.splitlines()[-1]
        said = (f"holds: the final evaluation {mean:.2f} >= 2" if holds else
                f"does not hold: the final evaluation {mean:.2f} < 2")
        assert closing.endswith(f"| {said} | solved_at_step not reached (last-20 mean >= GOALS 2)")


@pytest.mark.parametrize("script", BLOCK)
def test_a_gain_goal_judges_the_final_evaluation_less_the_start(script, tmp_path, monkeypatch,
                                                                capsys):
    # GOALS judges ThreeSteps-v0 on the gain, threshold 0.3: from a start of 0.5 (the
    # evaluation the script records in start_return, grpo.py's warm start) evaluations of
    # 0.75 and 0.95 (mean 0.85) gain 0.85 - 0.5 = 0.35 >= 0.3 and hold; 0.6 and 0.7 (0.65)
    # gain 0.15 and do not. Training returns of 1 (a last-20 mean of 1 >= 0.3) never record
    # solved_at_step: a gain is measured at the end alone. No start recorded: no verdict.
    module = module_of(script)
    monkeypatch.setattr(module, "GOALS", {"ThreeSteps-v0": (0.3, 20, "gain", None)}, raising=False)
    # A start of exactly 0 (a warm start that answers nothing right) is a start like any
    # other: 0.25 and 0.45 (mean 0.35) gain 0.35 and hold.
    for returns, start, holds in (([0.75, 0.95], 0.5, True), ([0.6, 0.7], 0.5, False),
                                  ([0.25, 0.45], 0.0, True), ([0.75, 0.95], None, None)):
        monkeypatch.setattr(module, "evaluate", lambda *a, r=returns: np.array(r))
        args = module.Args(output_dir=str(tmp_path / f"{holds}"), tensorboard=False,
                           eval_episodes=2, env_id=NO_GOAL)
        args = dataclasses.replace(args, output_dir=str(tmp_path / f"{holds}-{start}"))
        run = module.Run(args, "cpu", {})
        run.summary["start_return"] = start
        for k in range(1, 26):
            run.episode(k, 1.0, 1)
        summary = run.train(lambda: None)
        mean = sum(returns) / 2
        assert summary["solved_at_step"] is None and summary["holds"] is holds
        closing = capsys.readouterr().out.splitlines()[-1]
        assert "solved_at_step" not in closing
        if start is None:
            assert summary["end_return"] is None and "hold" not in closing.replace("holds_on", "")
            continue
        assert summary["end_return"] == pytest.approx(mean - start)
        said = "holds" if holds else "does not hold"
        assert (f"| {said}: the gain over the start ({start:.2f} -> {mean:.2f}) "
                f"{mean - start:+.2f} {'>=' if holds else '<'} 0.3") in closing


@pytest.mark.parametrize("script", BLOCK)
def test_the_curve_of_evaluations_alone_and_of_nothing(script, tmp_path, monkeypatch):
    # No training episode (an --eval-checkpoint run): the curve draws the evaluations, the
    # --eval-every one at step 10 (mean 1, std 0.5) and the final one at global_steps 20
    # (mean 2, std 0.25), no episode line; a threshold of 1.5 on "eval" is drawn as the
    # evaluation's. Without a threshold, no threshold line. Nothing at all to draw, or
    # --no-curve: no file (None).
    from types import SimpleNamespace
    module, saved = module_of(script), spy_on_figures(monkeypatch)

    def a_run(threshold, evaluations, final, curve=True, path="a"):
        os.makedirs(tmp_path / path, exist_ok=True)
        summary = {"eval_return_mean": final[0] if final else None,
                   "eval_return_std": final[1] if final else None, "global_steps": 20,
                   "solved_threshold": threshold, "holds_on": "eval", "interrupted": False,
                   "env_id": "CartPole-v1", "seed": 4}
        return SimpleNamespace(summary=summary, evaluations=evaluations,
                               args=SimpleNamespace(curve=curve), returns=[], ends=[],
                               window=20, path=str(tmp_path / path))

    assert module.Run.draw_curve(a_run(1.5, [(10, 1.0, 0.5)], (2.0, 0.25))) == str(
        tmp_path / "a" / "curve.png")
    (fig,) = saved
    (ax,) = fig.axes
    (container,) = ax.containers
    points = container.lines[0]
    assert list(zip(points.get_xdata().tolist(), points.get_ydata().tolist())) == [(10, 1.0),
                                                                                  (20, 2.0)]
    labels = [line.get_label() for line in ax.get_lines()]
    assert "threshold 1.5 (evaluation)" in labels
    assert not any(label.startswith(("episode return", "mean of the last")) for label in labels)
    assert module.Run.draw_curve(a_run(None, [], (2.0, 0.25), path="b")) is not None
    assert not any(line.get_label().startswith("threshold") for line in saved[1].axes[0].get_lines())
    assert module.Run.draw_curve(a_run(1.5, [], None, path="c")) is None
    assert module.Run.draw_curve(a_run(1.5, [(10, 1.0, 0.5)], (2.0, 0.25), curve=False,
                                   path="d")) is None
    assert len(saved) == 2 and not os.path.exists(tmp_path / "c" / "curve.png")


# ---------------------------------------------------------------------------------------
# plumbing/ray.py (stamped into impala.py and es.py), with ray's calls stood in for
# ---------------------------------------------------------------------------------------
def stand_in_ray(monkeypatch, initialized=False, cpus=2, init_error=None):
    """ray's functions that start_ray calls, stood in for: is_initialized gives
    `initialized`, cluster_resources `cpus` CPUs (None: no CPU entry), and ray.init records
    its address in the list returned (raising init_error where one is given)."""
    ray = pytest.importorskip("ray", reason="pip install ray==2.60.0")
    calls = []

    def init(address=None, **kwargs):
        calls.append(address)
        if init_error:
            raise init_error
    monkeypatch.setattr(ray, "is_initialized", lambda: initialized)
    monkeypatch.setattr(ray, "init", init)
    monkeypatch.setattr(ray, "cluster_resources", lambda: {} if cpus is None else {"CPU": cpus})
    return ray, calls


@pytest.mark.parametrize("script", ["es.py", "impala.py"])
def test_start_ray_returns_the_clusters_cpus_and_fails_without_one(script, monkeypatch):
    # 1 CPU is enough (at least one), 3.0 reads 3; none, or 0.5 (int: 0), is bad input
    module = module_of(script)
    monkeypatch.setattr(os, "environ", {})
    for cpus, got in ((1, 1), (3.0, 3)):
        stand_in_ray(monkeypatch, cpus=cpus)
        assert module.start_ray(None) == got
    for cpus in (None, 0.5):
        stand_in_ray(monkeypatch, cpus=cpus)
        with pytest.raises(module.UsageError, match="the Ray cluster has no CPU to run on"):
            module.start_ray(None)


@pytest.mark.parametrize("script", ["es.py", "impala.py"])
def test_start_ray_says_which_ray_and_holds_ctrl_c_back_only_for_its_own(script, monkeypatch,
                                                                         capsys):
    # Starting a Ray of its own (no address): "starting Ray ...", Ctrl-C held back around
    # ray.init; joining one: "joining Ray at auto ...", Ctrl-C not held back; a process whose
    # Ray is already running starts nothing, says nothing and still counts its CPUs
    module = module_of(script)
    monkeypatch.setattr(os, "environ", {})
    held = []
    real = module.ctrl_c_held_back

    def spy(active=True):
        held.append(active)
        return real(active=False)
    monkeypatch.setattr(module, "ctrl_c_held_back", spy)
    _, calls = stand_in_ray(monkeypatch)
    module.start_ray(None)
    assert capsys.readouterr().out == f"{script}: starting Ray ...\n"
    module.start_ray("auto")
    assert capsys.readouterr().out == f"{script}: joining Ray at auto ...\n"
    assert held == [True, False] and calls == ["local", "auto"]
    _, calls = stand_in_ray(monkeypatch, initialized=True, cpus=5)
    assert module.start_ray(None) == 5 and module.start_ray("auto") == 5
    assert calls == [] and capsys.readouterr().out == "" and held == [True, False]


@pytest.mark.parametrize("script", ["es.py", "impala.py"])
def test_a_ray_that_fails_to_start_or_to_be_joined_is_one_line_that_says_which(
        script, monkeypatch):
    # ray.init's error, first line only: "cannot start Ray" for a Ray of the run's own (the
    # hint: a busy machine), "cannot join Ray at ADDRESS" for a cluster (the hint: ray start)
    module = module_of(script)
    monkeypatch.setattr(os, "environ", {})
    stand_in_ray(monkeypatch, init_error=Exception("  node timed out\nsecond line"))
    with pytest.raises(module.UsageError) as own:
        module.start_ray(None)
    assert str(own.value).startswith("cannot start Ray: node timed out (on a busy machine")
    with pytest.raises(module.UsageError) as joined:
        module.start_ray("auto")
    assert str(joined.value).startswith("cannot join Ray at auto: node timed out (is `ray start`")
    assert "second line" not in str(own.value) + str(joined.value)


@pytest.mark.parametrize("script", ["es.py", "impala.py"])
def test_a_run_starts_its_own_ray_only_without_an_address_and_without_one_running(
        script, monkeypatch):
    from types import SimpleNamespace
    module = module_of(script)
    for address, initialized, starts in ((None, False, True), (None, True, False),
                                         ("auto", False, False), ("auto", True, False)):
        stand_in_ray(monkeypatch, initialized=initialized)
        assert module.starts_ray(SimpleNamespace(ray_address=address)) is starts


@pytest.mark.parametrize("script", ["es.py", "impala.py"])
def test_ctrl_c_is_held_back_until_ray_has_started_and_a_second_one_stops_at_once(
        script, capsys):
    # Inside an active ctrl_c_held_back a first SIGINT only prints; the KeyboardInterrupt
    # comes as the block ends, and Python's own handler is back. A second SIGINT raises at
    # once. Not active: the SIGINT raises at once, as without it.
    import threading
    if threading.current_thread() is not threading.main_thread():
        pytest.skip("signals reach the main thread only")
    module = module_of(script)
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        reached = []
        with pytest.raises(KeyboardInterrupt):
            with module.ctrl_c_held_back():
                os.kill(os.getpid(), signal.SIGINT)
                time.sleep(0.05)
                reached.append("after the first")
        assert reached == ["after the first"]
        assert "Ctrl-C: stopping once Ray has started" in capsys.readouterr().out
        with pytest.raises(KeyboardInterrupt):
            with module.ctrl_c_held_back():
                os.kill(os.getpid(), signal.SIGINT)
                time.sleep(0.05)
                os.kill(os.getpid(), signal.SIGINT)
                time.sleep(0.05)
                reached.append("after the second")
        assert reached == ["after the first"]
        with pytest.raises(KeyboardInterrupt):
            with module.ctrl_c_held_back(active=False):
                os.kill(os.getpid(), signal.SIGINT)
                time.sleep(0.05)
                reached.append("not held")
        assert reached == ["after the first"]
        with module.ctrl_c_held_back():
            pass  # no Ctrl-C: nothing raised
        assert signal.getsignal(signal.SIGINT) is signal.default_int_handler  # put back
    finally:
        signal.signal(signal.SIGINT, previous)

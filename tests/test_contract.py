"""The contract every script keeps (CONTRIBUTING.md), written once and run on every script.

Each script's row in SCRIPTS gives the flags of a tiny run of it; everything here is the same
rule checked on each script. A script's own tests (tests/test_<script>.py) keep only what is
its own: its math by hand, its glue, its smoke run, its own bad input and its evaluation rows.
"""
import glob
import importlib
import importlib.util
import inspect
import json
import os
import re
import signal
import subprocess
import sys
import time

import numpy as np
import pytest

from conftest import (COMMON_FLAGS, read_csv, sigint_as_in_a_terminal, unreadable_checkpoints,
                      video_names)

# script: (its flags of a tiny training run, whether it has a device and so --cuda)
SCRIPTS = {
    "ppo.py": (["--total-timesteps", "256", "--num-envs", "2", "--num-steps", "32"], True),
    "ppo_masked.py": (["--total-timesteps", "256", "--num-envs", "2", "--num-steps", "32"], True),
    "ppod.py": (["--total-timesteps", "256", "--num-envs", "2", "--num-steps", "32"], True),
    "es.py": (["--total-timesteps", "400", "--population-size", "4", "--num-workers", "1"], False),
    "qlearning.py": (["--env-id", "FrozenLake-v1", "--total-timesteps", "300"], False),
    "dqn.py": (["--total-timesteps", "300", "--num-envs", "2", "--learning-starts", "100",
                "--train-frequency", "8", "--batch-size", "32"], True),
    "ddpg_td3.py": (["--env-id", "ShortPendulum-v1", "--total-timesteps", "120", "--num-envs", "2",
                     "--learning-starts", "40", "--batch-size", "16", "--hidden-size", "8"], True),
    "sac.py": (["--env-id", "ShortPendulum-v1", "--total-timesteps", "120", "--num-envs", "2",
                "--learning-starts", "40", "--batch-size", "16", "--hidden-size", "8"], True),
    "mappo.py": (["--num-envs", "2", "--num-steps", "25", "--total-timesteps", "50"], True),
    "matd3.py": (["--num-envs", "2", "--total-timesteps", "60", "--learning-starts", "20",
                  "--batch-size", "8", "--hidden-size", "8"], True),
    "ppo_lstm.py": (["--num-envs", "2", "--num-steps", "16", "--total-timesteps", "32"], True),
    "ppo_rnd.py": (["--total-timesteps", "256", "--num-envs", "2", "--num-steps", "32",
                    "--rnd-init-steps", "4"], True),
}
# The scripts that evaluate in one environment, episode after episode (the others play the
# evaluation episodes side by side, one environment each): one video file per episode too.
ONE_ENVIRONMENT = {"es.py", "qlearning.py"}
TINY = {script: flags for script, (flags, _) in SCRIPTS.items()}
TORCH = [script for script, (_, torch) in SCRIPTS.items() if torch]
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


@pytest.mark.parametrize("script", SCRIPTS)
def test_importing_the_script_has_no_side_effects(script, tmp_path):
    from conftest import check_import_is_quiet
    check_import_is_quiet(os.path.splitext(script)[0], tmp_path)


# ---------------------------------------------------------------------------------------
# Bad input: one line on stderr, `<script>: error: ...`, exit status 2, no run folder
# ---------------------------------------------------------------------------------------
BAD_INPUT = [
    (["--env-id", "CartPole-v9"], "unknown environment id 'CartPole-v9'"),
    (["--env-id", "no_such_module:GridWorld-v0"], "no module named no_such_module; put its "
     "folder on PYTHONPATH"),
    (["--env-id", "my_envs:GridWorld-v9"], "unknown environment id 'my_envs:GridWorld-v9'"),
    (["--env-id", "crashing_envs:Anything-v0"], "cannot make crashing_envs:Anything-v0: "
     "RuntimeError: a bug in the user's own environment module"),
    (["--total-timesteps", "-5"], "--total-timesteps must be positive"),
    (["--eval-episodes", "-1"], "--eval-episodes must be 0 or more"),
    (["--eval-every", "-1"], "--eval-every must be 0 (evaluate only after training) or more"),
    (["--eval-every", "500", "--eval-episodes", "0"],
     "--eval-every needs at least one evaluation episode"),
    (["--capture-video", "--eval-episodes", "0"], "--capture-video records the evaluation "
     "episodes, and --eval-episodes 0 has none"),
    (["--eval-checkpoint", "missing"], "does not exist"),
    (["--eval-checkpoint", "corrupt"], "model"),  # "is not a <script> model.pt/model.npz"
    # tyro's own parse errors, in the same one-line form, with its suggestion
    (["--env", "CartPole-v1"], "unrecognized options: --env, CartPole-v1; did you mean --env-id"),
    (["--total-timesteps", "1e5"], "error parsing --total-timesteps: invalid literal for int()"),
    (["--seed"], "missing value for argument '--seed'"),
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
@pytest.mark.parametrize("script", SCRIPTS)
def test_bad_input_is_one_line_and_exit_status_2(script, argv, message, check_usage_error,
                                                 tmp_path, fresh_env_module):
    checkpoints = unreadable_checkpoints(tmp_path)
    if script in ("mappo.py", "matd3.py") and argv[0] == "--env-id" and argv[1] in PETTINGZOO_ROWS:
        argv, message = PETTINGZOO_ROWS[argv[1]]
    check_usage_error(script, [checkpoints.get(a, a) for a in argv], message)


@pytest.mark.parametrize("script", SCRIPTS)
def test_unknown_ids_get_only_suggestions_that_can_be_made_here(script, run_cli):
    # CartPole-v1 is close to "CartPol-v1" and can be made; phys2d/CartPole-v1 is as close
    # but needs jax, which the requirements do not install: it is not suggested. mappo.py's
    # own form: simple_spread_v3 is close to "simple_spred_v3" and cooperative; the
    # competitive simple_push_v3 is as close, but mappo.py cannot train it.
    typo, close, not_here = (("simple_spred_v3", "simple_spread_v3", "simple_push_v3")
                             if script in ("mappo.py", "matd3.py")
                             else ("CartPol-v1", "CartPole-v1", "phys2d"))
    code, _, err = run_cli(script, ["--env-id", typo])
    assert code == 2 and f"did you mean {close}" in err
    assert not_here not in err and err.count("\n") == 1


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
    # says interrupted, the curve is drawn, and the process then ends by SIGINT with the
    # default handler (status 130 to the shell). os.kill and signal.signal are stood in for.
    module = module_of(script)
    episode, calls, signals = module.RunWriter.episode, [], []

    def interrupted_episode(self, *args):
        calls.append(1)
        if len(calls) == 3:
            raise KeyboardInterrupt
        return episode(self, *args)

    def kill(pid, sig):
        signals.append(("kill", pid, sig))
        raise SystemExit(128 + sig)

    monkeypatch.setattr(module.RunWriter, "episode", interrupted_episode)
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
        assert json.load(f)["interrupted"] is True
    assert os.path.exists(os.path.join(path, "learning_curve.png"))
    assert "interrupted; writing what the run has so far" in capsys.readouterr().out


def test_ctrl_c_stops_a_shell_loop_of_runs(tmp_path):
    # Ctrl-C in a terminal reaches the whole foreground group: the shell and the script.
    # The script writes its run folder and dies of SIGINT, so bash stops the loop too.
    loop = (f"for s in 1 2; do {sys.executable} ppo.py --seed $s --total-timesteps 1000000 "
            f"--output-dir {tmp_path}; done; echo after the loop")
    shell = subprocess.Popen(["bash", "-c", loop], cwd=ROOT, start_new_session=True,
                             preexec_fn=sigint_as_in_a_terminal, stdout=subprocess.PIPE,
                             stderr=subprocess.DEVNULL, text=True)
    deadline = time.time() + 60
    while not glob.glob(os.path.join(tmp_path, "*", "episodes.csv")) and time.time() < deadline:
        time.sleep(0.2)
    time.sleep(1.0)  # into training
    os.killpg(shell.pid, signal.SIGINT)
    out = shell.communicate(timeout=60)[0]
    assert shell.returncode == -signal.SIGINT and "after the loop" not in out
    (path,) = glob.glob(os.path.join(tmp_path, "*"))  # the second seed never started
    with open(os.path.join(path, "summary.json")) as f:
        assert json.load(f)["interrupted"] is True


@pytest.mark.parametrize("script", SCRIPTS)
def test_the_closing_line_says_not_reached_and_never_none(script, run_cli, tmp_path):
    # A return of 1e9 is never reached in a tiny run: "not reached", never "None".
    code, out, _ = run_cli(script, [*TINY[script], "--stop-at-return", "1e9", "--eval-episodes",
                                    "1", "--output-dir", str(tmp_path)])
    closing = out.splitlines()[-1]
    assert code == 0 and closing.startswith(f"{script}: run folder ")
    assert "solved_at_step not reached" in closing and "None" not in closing


@pytest.mark.parametrize("script", SCRIPTS)
def test_the_curve_shows_the_final_evaluation(script, tmp_path, monkeypatch):
    module = module_of(script)
    drawn = []
    monkeypatch.setattr(module, "plot_learning_curve",
                        lambda *args, **kwargs: drawn.append((args, kwargs)) or "curve.png")
    args = module.tyro.cli(module.Args, args=[*TINY[script], "--eval-episodes", "2",
                                              "--output-dir", str(tmp_path)])
    summary = module.main(args)
    ((positional, keywords),) = drawn
    final = keywords.get("final", positional[5] if len(positional) > 5 else None)
    assert final == (summary["global_steps"], summary["eval_return_mean"],
                     summary["eval_return_std"])


PROGRESS = re.compile(r"step ([\d,]+)/([\d,]+) \(\d+%\) \| (- sps \| ETA -|[\d,]+ sps \| ETA "
                      r"\d+:\d\d:\d\d) \| return \(last \d+\) (n/a|-?\d+\.\d)( \| .+)?")


@pytest.mark.parametrize("script", SCRIPTS)
def test_progress_lines_measure_speed_from_the_first_line(script, tmp_path, monkeypatch,
                                                           capsys):
    # A clock that moves 1 s at each reading makes a tiny run print many progress lines.
    # The first has no speed and no ETA (the start-up would make them wrong); the rest have
    # both; the steps never go back and the budget is the same on every line.
    module = module_of(script)

    class Clock:  # stands in for the script's `time` module, which it uses for time() alone
        now = 1e9

        @classmethod
        def time(cls):
            cls.now += 1.0
            return cls.now

    monkeypatch.setattr(module, "time", Clock)
    args = module.tyro.cli(module.Args, args=[*TINY[script], "--eval-episodes", "0",
                                              "--output-dir", str(tmp_path)])
    capsys.readouterr()
    module.main(args)
    printed = [PROGRESS.fullmatch(line) for line in capsys.readouterr().out.splitlines()
               if line.startswith("step ")]
    assert len(printed) >= 3 and all(printed)
    assert printed[0][3] == "- sps | ETA -" and all("ETA -" not in m[3] for m in printed[1:])
    steps = [int(m[1].replace(",", "")) for m in printed]
    assert steps == sorted(steps) and 0 < steps[0] < steps[-1]
    assert len({m[2] for m in printed}) == 1


@pytest.mark.parametrize("script", SCRIPTS)
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
    assert video_names(tmp_path) == (["eval-episode-0.mp4", "eval-episode-1.mp4"]
                                     if script in ONE_ENVIRONMENT else
                                     ["eval-0-episode-0.mp4", "eval-1-episode-0.mp4"])
    assert "XDG_RUNTIME_DIR" not in err  # SDL's complaint, harmless when only frames are drawn
    assert os.environ.get("SDL_VIDEODRIVER") == "dummy"


@pytest.mark.parametrize("script", SCRIPTS)
def test_progress_line_by_hand(script):
    # 2,500 of 10,000 steps at 500 steps per second: 25 %, and the 7,500 steps left take
    # 7,500 / 500 = 15 s. 100 of 4,000,000 at 100 sps: 0 % (0.0025 rounds down), and
    # 3,999,900 / 100 = 39,999 s = 11 h (39,600 s) 6 min (360 s) 39 s. No speed yet: "-".
    progress_line = module_of(script).progress_line
    assert progress_line(2500, 10_000, 500.0, 21.456) == (
        "step 2,500/10,000 (25%) | 500 sps | ETA 0:00:15 | return (last 20) 21.5")
    assert progress_line(100, 4_000_000, 100.0, None) == (
        "step 100/4,000,000 (0%) | 100 sps | ETA 11:06:39 | return (last 20) n/a")
    assert progress_line(32, 200_000, None, -3.0) == (
        "step 32/200,000 (0%) | - sps | ETA - | return (last 20) -3.0")


@pytest.mark.parametrize("script", SCRIPTS)
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
NORM_REWARD = ["ppo.py", "ppo_masked.py", "ppo_lstm.py", "ppo_rnd.py"]


def test_the_norm_reward_list_names_every_script_with_the_flag():
    makers = {s: getattr(module_of(s), "make_vector_env", None) for s in SCRIPTS}
    assert set(NORM_REWARD) == {s for s, make in makers.items()
                                if make and "reward_gamma" in inspect.signature(make).parameters}


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

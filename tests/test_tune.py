"""Tests of tune.py, the tool that tunes a script's flags with Optuna: the aggregation over
seeds and the parsing of --param by hand, the values a trial draws and the command line that
gives them to a run (parsed back by the script's own parser), every bad input
(CONTRIBUTING.md, "Bad input"), a tiny real study of qlearning.py on Taxi-v4 resumed twice,
a failing run, and a real Ctrl-C that the same command resumes from."""
import json
import os
import shlex
import signal
import subprocess
import sys
import time

import optuna
import pytest
import rliable.metrics
import tyro

import dqn
import tune
from conftest import ROOT, check_import_is_quiet, script_path

TESTS = os.path.join(ROOT, "tests")

# The tiny study: qlearning.py on Taxi-v4 (tabular, no torch: a run takes about 1.5 s, most
# of it start-up), 3,000 steps, which end some 15 episodes at different returns per seed.
STUDY_FLAGS = ["qlearning.py", "--env-id", "Taxi-v4", "--param", "learning-rate=float:0.1:0.9",
               "--param", "anneal-lr=cat:true,false", "--seeds", "1", "2", "--jobs", "2"]
FIXED = ["--total-timesteps", "3000", "--eval-episodes", "0", "--no-tensorboard"]


# ---------------------------------------------------------------------------------------
# The objective: each seed's value, and their aggregate, by hand
# ---------------------------------------------------------------------------------------
def test_worst_and_iqm_by_hand(monkeypatch):
    assert tune.aggregate([3, 1, 2], "worst") == 1
    assert tune.aggregate([-5.5, 2, -7.25], "worst") == -7.25
    calls = []
    iqm = rliable.metrics.aggregate_iqm
    monkeypatch.setattr(rliable.metrics, "aggregate_iqm",
                        lambda scores: calls.append(scores.shape) or iqm(scores))
    # sorted: 1 2 3 4 5 6 7 100; n = 8, floor(8 / 4) = 2 cut at each end (1, 2 and 7, 100):
    # (3 + 4 + 5 + 6) / 4 = 18 / 4 = 4.5 (the mean, 128 / 8 = 16; the median 4.5 too, so
    # also 5 values:)
    assert tune.aggregate([1, 2, 3, 4, 100, 5, 6, 7], "iqm") == 4.5
    # sorted: 1 2 3 4 100; n = 5, floor(5 / 4) = 1 cut at each end: (2 + 3 + 4) / 3 = 3
    # (the mean (1 + 2 + 3 + 4 + 100) / 5 = 22; the median 3 too, so also a case where it
    # differs:) sorted 0 0 1 9 9 9 30 30: (1 + 9 + 9 + 9) / 4 = 7, the median (9 + 9) / 2 = 9
    assert tune.aggregate([1, 2, 3, 4, 100], "iqm") == 3
    assert tune.aggregate([9, 0, 30, 9, 1, 30, 0, 9], "iqm") == 7
    assert calls == [(8, 1), (5, 1), (8, 1)]  # rliable's, a (runs x 1 task) matrix


def test_a_runs_value_is_its_summarys_figure_or_the_trial_fails():
    summary = {"train_return_last20": -12.5, "eval_return_mean": 7.0, "interrupted": False}
    assert tune.read_value(summary, "train_return_last20", 1) == -12.5
    assert tune.read_value(summary, "eval_return_mean", 1) == 7.0
    with pytest.raises(tune.TrialFailed, match="seed 4's summary.json has no "
                                               "train_return_last20 .no training episode"):
        tune.read_value({**summary, "train_return_last20": None}, "train_return_last20", 4)
    with pytest.raises(tune.TrialFailed, match="seed 2 stopped early"):
        tune.read_value({**summary, "interrupted": True}, "train_return_last20", 2)


# ---------------------------------------------------------------------------------------
# --param: its spec, the value a trial draws, the words a run gets
# ---------------------------------------------------------------------------------------
@pytest.mark.parametrize("spec, expected", [
    ("learning-rate=log:1e-4:1e-2", ("learning-rate", "log", 1e-4, 1e-2, ())),
    ("--gamma=float:0.9:0.999", ("gamma", "float", 0.9, 0.999, ())),
    ("batch-size=int:32:256", ("batch-size", "int", 32, 256, ())),
    ("buffer-size=logint:1000:100000", ("buffer-size", "logint", 1000, 100000, ())),
    ("loss=cat:mse,huber", ("loss", "cat", None, None, ("mse", "huber"))),
    ("double-dqn=cat:true", ("double-dqn", "cat", None, None, ("true",))),
])
def test_param_spec_of_each_kind(spec, expected):
    param = tune.parse_param(spec)
    assert (param.name, param.kind, param.low, param.high, param.choices) == expected
    assert type(param.low) is (int if param.kind in ("int", "logint") else
                               float if param.kind != "cat" else type(None))
    assert param.field == expected[0].replace("-", "_")
    assert tune.parse_param(str(param)) == param  # what the study keeps reads back the same


@pytest.mark.parametrize("spec, message", [
    ("learning-rate", "write NAME=KIND:LOW:HIGH"),
    ("=log:1e-4:1e-2", "write NAME=KIND:LOW:HIGH"),
    ("learning-rate=logg:1e-4:1e-2", "unknown kind 'logg'; did you mean log?"),
    ("learning-rate=uniform:0:1", "unknown kind 'uniform'; use one of float, log, int"),
    ("learning-rate=float:0.1", "float takes two bounds"),
    ("learning-rate=float:0.1:0.5:0.9", "float takes two bounds"),
    ("learning-rate=float:a:b", "must be numbers, not 'a:b'"),
    ("batch-size=int:32.5:256", "must be whole numbers"),
    ("learning-rate=float:0.5:0.5", "an empty range: LOW (0.5) must be below HIGH (0.5)"),
    ("learning-rate=float:0.9:0.1", "an empty range: LOW (0.9) must be below HIGH (0.1)"),
    ("batch-size=int:256:32", "an empty range"),
    ("learning-rate=log:0:1e-2", "a log range needs LOW above 0"),
    ("learning-rate=log:-1:1e-2", "a log range needs LOW above 0"),
    ("batch-size=logint:0:256", "a logint range needs LOW above 0"),
    ("learning-rate=float:0:inf", "the bounds must be finite"),
    ("loss=cat:", "cat needs values"),
    ("loss=cat:mse,,huber", "cat needs values"),
    ("loss=cat:mse,mse", "a value is given twice"),
])
def test_param_spec_errors(spec, message):
    with pytest.raises(tune.UsageError) as e:
        tune.parse_param(spec)
    assert message in str(e.value) and str(e.value).startswith(f"--param {spec}: ")


def test_each_kind_draws_from_its_distribution_and_is_given_as_text():
    study = optuna.create_study(direction="maximize")
    trial = study.ask()
    specs = ["lr=log:1e-4:1e-2", "gamma=float:0.9:0.999", "batch=int:32:256",
             "buffer=logint:1000:100000", "loss=cat:mse,huber"]
    texts = [tune.suggest(trial, tune.parse_param(spec)) for spec in specs]
    distributions = optuna.distributions
    assert trial.distributions == {
        "lr": distributions.FloatDistribution(1e-4, 1e-2, log=True),
        "gamma": distributions.FloatDistribution(0.9, 0.999, log=False),
        "batch": distributions.IntDistribution(32, 256, log=False),
        "buffer": distributions.IntDistribution(1000, 100000, log=True),
        "loss": distributions.CategoricalDistribution(["mse", "huber"])}
    lr, gamma, batch, buffer, loss = texts
    assert 1e-4 <= float(lr) <= 1e-2 and 0.9 <= float(gamma) <= 0.999
    assert float(lr) == pytest.approx(trial.params["lr"], rel=1e-3)  # 4 significant digits
    assert batch == str(trial.params["batch"]) and buffer == str(trial.params["buffer"])
    assert loss == trial.params["loss"] and loss in ("mse", "huber")


def test_numbers_are_given_to_four_significant_digits_kept_inside_the_range():
    lr = tune.parse_param("learning-rate=log:1e-4:1e-2")
    assert tune.format_value(lr, 0.000421376) == "0.0004214"
    assert tune.format_value(lr, 1e-4) == "0.0001"
    gamma = tune.parse_param("gamma=float:0.9:0.9999")
    assert tune.format_value(gamma, 0.99991) == "0.9999"
    # to 4 digits 0.99996 is "1", above 0.9999: 5 digits, "0.99996"
    assert tune.format_value(gamma, 0.99996) == "0.99996"
    assert tune.format_value(tune.parse_param("batch-size=int:32:256"), 64) == "64"
    assert tune.format_value(tune.parse_param("loss=cat:mse,huber"), "huber") == "huber"


def parsed_by_the_script(module, argv, monkeypatch):
    """The Args that the script's own parser makes of a run's argv ([python, path, flags])."""
    monkeypatch.setattr(sys, "argv", argv[1:])
    return module.parse_args()


def test_a_runs_command_line_gives_each_value_to_its_flag(monkeypatch):
    """dqn.py's presets leave --learning-rate, --batch-size and --loss None; the trial's
    values (not the defaults) reach the flags they name, the switch as --no-double-dqn, the
    seed, the budget of the fixed flags and the trial's folder too."""
    params = {p.name: p for p in map(tune.parse_param, [
        "learning-rate=log:1e-4:1e-2", "batch-size=int:32:256", "loss=cat:mse,huber",
        "double-dqn=cat:true,false", "optimizer=cat:adam,rmsprop"])}
    flags = (tune.flag_words(params["learning-rate"], "0.0004214", False)
             + tune.flag_words(params["batch-size"], "64", False)
             + tune.flag_words(params["loss"], "mse", False)
             + tune.flag_words(params["double-dqn"], "false", True)
             + tune.flag_words(params["optimizer"], "rmsprop", False))
    assert flags == ["--learning-rate", "0.0004214", "--batch-size", "64", "--loss", "mse",
                     "--no-double-dqn", "--optimizer", "rmsprop"]
    argv = tune.run_command("dqn.py", "CartPole-v1", 3, ["--total-timesteps", "5000"], flags,
                            "tune/dqn/trial-7", cuda=True)
    assert argv == [sys.executable, os.path.join(tune.ROOT, "dqn.py"), "--env-id",
                    "CartPole-v1", "--seed", "3", "--no-cuda", "--total-timesteps", "5000",
                    *flags, "--output-dir", "tune/dqn/trial-7"]
    args, default = parsed_by_the_script(dqn, argv, monkeypatch), dqn.Args()
    assert (args.learning_rate, args.batch_size, args.loss, args.double_dqn,
            args.optimizer) == (0.0004214, 64, "mse", False, "rmsprop")
    assert (default.learning_rate, default.batch_size, default.loss, default.double_dqn,
            default.optimizer) == (None, None, None, True, "adam")
    assert (args.seed, args.total_timesteps, args.cuda, args.output_dir, args.env_id) == (
        3, 5000, False, "tune/dqn/trial-7", "CartPole-v1")
    assert tune.flag_words(params["double-dqn"], "true", True) == ["--double-dqn"]
    # qlearning.py has no device: no --no-cuda
    assert "--no-cuda" not in tune.run_command("qlearning.py", "Taxi-v4", 1, [], [], "t",
                                               cuda=False)
    # a fixed --cuda comes after --no-cuda, and the script takes the last
    argv = tune.run_command("dqn.py", "CartPole-v1", 1, ["--cuda"], [], "t", cuda=True)
    assert parsed_by_the_script(dqn, argv, monkeypatch).cuda is True
    assert tune.best_command("dqn.py", "CartPole-v1", ["--total-timesteps", "5000"], flags) == (
        "python dqn.py --env-id CartPole-v1 --total-timesteps 5000 --learning-rate 0.0004214 "
        "--batch-size 64 --loss mse --no-double-dqn --optimizer rmsprop")
    assert tune.best_command("qlearning.py", "my_envs:Grid World-v0", [], []) == (
        "python qlearning.py --env-id 'my_envs:Grid World-v0'")


def test_the_progress_line():
    line = tune.progress_line(3, 30, 2, ["--learning-rate", "0.0004214", "--no-double-dqn"],
                              {1: 500.0, 2: 431.25}, 431.25, (455.0, 1), 12.34, 40.06, "worst")
    assert line == ("trial 3 of 30 (trial-2): --learning-rate 0.0004214 --no-double-dqn | "
                    "seed 1: 500, seed 2: 431.2 | worst 431.2 | best 455 (trial-1) | 12.3 s, "
                    "40.1 s in all")


def test_an_int_range_for_a_number_flag_is_fine_and_flags_are_checked_by_type(monkeypatch):
    args = tune.Args(script="qlearning.py", param=["q-init=int:0:5", "anneal-lr=cat:true,false",
                                                   "gamma=cat:0.9,0.99"], study="s.db")
    plan = tune.check(args, ["--total-timesteps", "1000"])
    assert [str(p) for p in plan["params"]] == ["q-init=int:0:5", "anneal-lr=cat:true,false",
                                                "gamma=cat:0.9,0.99"]
    assert plan["switches"] == {"anneal_lr"} and plan["cuda"] is False
    assert plan["env_id"] == "Taxi-v4"  # the script's default
    assert plan["folder"] == "s"
    plan = tune.check(tune.Args(script="dqn.py", param=["loss=cat:huber,mse",
                                                        "buffer-size=logint:1000:50000"]), [])
    assert plan["cuda"] is True and plan["path"] == os.path.join("tune", "dqn-CartPole-v1.db")
    with pytest.raises(tune.UsageError, match="--loss takes one of huber, mse"):
        tune.check(tune.Args(script="dqn.py", param=["loss=cat:mse,l1"]), [])


# ---------------------------------------------------------------------------------------
# Bad input: one line, exit status 2, before any run and before the study's file
# ---------------------------------------------------------------------------------------
Q = ["qlearning.py", "--param", "learning-rate=float:0.1:0.9"]


@pytest.mark.parametrize("argv, message", [
    (["plot.py", "--param", "x=float:1:2"], "plot.py is a tool, not an algorithm script: give "
                                           "one of crossq.py"),
    (["tune.py", "--param", "x=float:1:2"], "tune.py is a tool"),
    (["dqnn.py", "--param", "x=float:1:2"], "dqnn.py is not one of plainrl's algorithm "
                                           "scripts (a file beside tune.py starting '# From "
                                           "plainrl (MIT licence'... with an Args dataclass); "
                                           "did you mean dqn.py?"),
    (["README.md", "--param", "x=float:1:2"], "README.md is not one of plainrl's algorithm"),
    (["benchmarks/no_velocity.py", "--param", "x=float:1:2"], "is not in"),
    (["qlearning.py"], "give at least one --param"),
    (["qlearning.py", "--param", "learning-rat=float:0.1:0.9"],
     "--param learning-rat=float:0.1:0.9: the script has no flag --learning-rat; did you "
     "mean --learning-rate?"),
    ([*Q, "--", "--total-timestep", "100"],
     "the fixed flag --total-timestep: the script has no flag --total-timestep; did you "
     "mean --total-timesteps?"),
    ([*Q, "--", "--no-anneal-lrr"], "the script has no flag --no-anneal-lrr"),
    (["qlearning.py", "--param", "learning-rate=float:0.9:0.1"], "an empty range"),
    (["qlearning.py", "--param", "learning-rate=log:0:0.1"], "a log range needs LOW above 0"),
    (["qlearning.py", "--param", "anneal-lr=cat:"], "cat needs values"),
    (["qlearning.py", "--param", "log-interval=float:10:100"],
     "--param log-interval=float:10:100: --log-interval takes whole numbers; use "
     "log-interval=int:... or logint:..."),
    (["qlearning.py", "--param", "log-interval=cat:10,1e2"], "--log-interval takes whole"),
    (["qlearning.py", "--param", "gamma=cat:0.9,high"], "--gamma takes numbers, not 'high'"),
    (["qlearning.py", "--param", "anneal-lr=int:0:1"], "--anneal-lr is a switch; tune it with "
                                                     "anneal-lr=cat:true,false"),
    (["qlearning.py", "--param", "anneal-lr=cat:true,no"], "--anneal-lr is a switch"),
    (["qlearning.py", "--param", "bins=int:2:9"], "--bins (tuple) cannot be tuned"),
    (["qlearning.py", "--param", "seed=int:1:9"], "tune.py sets --seed itself"),
    ([*Q, "--param", "learning-rate=float:0.2:0.3"], "--learning-rate is given twice"),
    ([*Q, "--", "--learning-rate", "0.5"], "--learning-rate is a fixed flag too"),
    ([*Q, "--", "--seed", "3"], "the fixed flag --seed: tune.py sets --seed itself"),
    ([*Q, "--", "--output-dir", "x"], "tune.py sets --output-dir itself"),
    ([*Q, "--", "--env-id", "Taxi-v4"], "tune.py sets --env-id itself (give --env-id before"),
    ([*Q, "--", "--total-timesteps", "1e5"],
     "the fixed flags: qlearning.py says: --total-timesteps takes a whole number, not '1e5'"),
    ([*Q, "--", "--total-timesteps", "0"], "qlearning.py says: --total-timesteps must be "
                                           "positive"),
    (["qlearning.py", "--param", "learning-rate=float:0.1:2"],
     "--param learning-rate=float:0.1:2: qlearning.py says: --learning-rate must be in (0, 1]"),
    ([*Q, "--env-id", "Taxi-v4", "--objective", "eval_return_mean", "--", "--eval-episodes",
      "0"], "--objective eval_return_mean needs evaluation episodes"),
    ([*Q, "--seeds"], "--seeds is empty"),
    ([*Q, "--seeds", "1", "2", "1"], "a seed is given twice"),
    ([*Q, "--jobs", "0"], "--jobs must be at least 1, got 0"),
    ([*Q, "--trials", "0"], "--trials must be at least 1, got 0"),
    ([*Q, "--trials", "-3"], "--trials must be at least 1, got -3"),
    ([*Q, "--aggregate", "mean"], "--aggregate takes worst or iqm, not 'mean'"),
    ([*Q, "--total-timesteps", "100"], "unrecognized options: --total-timesteps 100"),
    ([], "give the script to tune"),
])
def test_bad_input(argv, message, run_cli, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    code, out, err = run_cli("tune.py", argv)
    assert (code, out) == (2, ""), err
    assert err.startswith("tune.py: error: ") and err.count("\n") == 1, err
    assert message in err, err
    assert list(tmp_path.iterdir()) == []  # no study file, no run


@pytest.mark.parametrize("argv, message", [
    (["qlearning.py", "--param", "learning-rat=float:0.1:0.9"], "did you mean --learning-rate?"),
    (["plot.py", "--param", "x=float:1:2"], "plot.py is a tool"),
])
def test_bad_input_of_a_real_process(argv, message, tmp_path):
    done = subprocess.run([sys.executable, script_path("tune.py"), *argv], cwd=tmp_path,
                          capture_output=True, text=True)
    assert (done.returncode, done.stdout) == (2, "")
    assert done.stderr.startswith("tune.py: error: ") and done.stderr.count("\n") == 1
    assert message in done.stderr
    assert list(tmp_path.iterdir()) == []


def test_the_docstrings_commands_pass_every_check():
    """Each `python tune.py ...` of the module docstring (lines joined at a backslash) is a
    command tune.py accepts: its script, flags and ranges pass check."""
    text = tune.__doc__.replace("\\\n", " ")
    commands = [line.split("python tune.py ", 1)[1] for line in text.splitlines()
                if "python tune.py " in line and "--help" not in line]
    assert len(commands) == 2
    for command in commands:
        own, fixed = tune.split_argv(shlex.split(command))
        plan = tune.check(tyro.cli(tune.Args, args=own), fixed)
        assert plan["params"] and plan["fixed"][0] == "--total-timesteps"


@pytest.mark.slow  # a Python process of its own
def test_importing_tune_has_no_side_effects(tmp_path):
    check_import_is_quiet("tune", tmp_path, also="assert 'qlearning' not in sys.modules\n")


# ---------------------------------------------------------------------------------------
# A real study: its runs, their values, the best command; resumed; a failing run
# ---------------------------------------------------------------------------------------
def study_args(tmp_path, trials, *more):
    """tune.Args of the tiny study (STUDY_FLAGS) in tmp_path/s.db, with --trials trials."""
    return tyro.cli(tune.Args, args=[*STUDY_FLAGS, "--trials", str(trials), "--study",
                                     str(tmp_path / "s.db"), *more])


def read_runs(folder):
    """{seed: (config.json, summary.json)} of the run folders in a trial's folder."""
    runs = {}
    for name in os.listdir(folder):
        if os.path.isdir(os.path.join(folder, name)):
            config, summary = (json.load(open(os.path.join(folder, name, f)))
                               for f in ("config.json", "summary.json"))
            runs[config["seed"]] = (config, summary)
    return runs


def load(path):
    return optuna.load_study(study_name="tune", storage=f"sqlite:///{path}")


def states(study):
    return [t.state.name for t in study.trials]


@pytest.mark.slow  # a real study's runs
def test_a_tiny_study_runs_reads_each_seed_and_resumes(tmp_path, capsys, run_cli,
                                                       monkeypatch):
    study = tune.main(study_args(tmp_path, 1), FIXED)
    captured = capsys.readouterr()
    assert captured.err == ""  # Optuna's INFO lines kept quiet
    out = captured.out.splitlines()
    (trial,) = study.trials
    assert trial.state.name == "COMPLETE"
    runs = read_runs(tmp_path / "s" / "trial-0")
    assert sorted(runs) == [1, 2]
    flags = trial.user_attrs["flags"]
    rate = float(flags[flags.index("--learning-rate") + 1])
    assert rate == pytest.approx(trial.params["learning-rate"], rel=1e-3)
    for seed, (config, summary) in runs.items():
        # each seed's run got the trial's values and the fixed flags
        assert (config["learning_rate"], config["anneal_lr"]) == (
            rate, trial.params["anneal-lr"] == "true")
        assert (config["env_id"], config["total_timesteps"], config["eval_episodes"]) == (
            "Taxi-v4", 3000, 0)
        assert trial.user_attrs[f"seed {seed}"] == summary["train_return_last20"]
    returns = [runs[s][1]["train_return_last20"] for s in (1, 2)]
    assert returns[0] != returns[1] and trial.value == min(returns)  # the worst seed
    assert out[0].startswith("trial 1 of 1 (trial-0): --learning-rate ")
    assert f"| seed 1: {returns[0]:.4g}, seed 2: {returns[1]:.4g} | worst " in out[0]
    assert out[-2].startswith("best: trial-0, worst ")
    assert out[-1] == tune.best_command("qlearning.py", "Taxi-v4", FIXED, flags)
    assert study.user_attrs["fixed"] == FIXED and study.user_attrs["seeds"] == [1, 2]

    # the same command with --trials 2 runs one trial more, from the file
    study = tune.main(study_args(tmp_path, 2), FIXED)
    out = capsys.readouterr().out.splitlines()
    assert states(study) == ["COMPLETE", "COMPLETE"]
    assert study.trials[0].value == trial.value
    assert out[0] == f"tune.py: resuming {tmp_path / 's.db'}: 1 of 2 trials done"
    assert out[1].startswith("trial 2 of 2 (trial-1): ") and len(out) == 4
    assert sorted(os.listdir(tmp_path / "s")) == ["trial-0", "trial-1"]
    best = max(study.trials, key=lambda t: t.value)
    assert f" | best {best.value:.4g} (trial-{best.number}) | " in out[1]
    # the sampler is seeded anew on a resume (--tpe-seed plus the trials so far): the same
    # seed would draw trial-0's values again
    assert study.trials[1].params != study.trials[0].params
    assert out[-1] == tune.best_command("qlearning.py", "Taxi-v4", FIXED,
                                        best.user_attrs["flags"])

    # and again: nothing is left to run; it prints the best
    study = tune.main(study_args(tmp_path, 2), FIXED)
    out = capsys.readouterr().out.splitlines()
    assert out[0].endswith("holds 2 completed trials (--trials 2): nothing to run")
    assert out[1].startswith(f"best: trial-{best.number}, worst {best.value:.4g} (seed 1: ")
    assert len(study.trials) == 2 and len(os.listdir(tmp_path / "s")) == 2

    # a study resumed with other settings is refused, in one line
    for argv, fixed, what in [(STUDY_FLAGS, FIXED[:1] + ["4000"] + FIXED[2:], "fixed"),
                              ([*STUDY_FLAGS, "--aggregate", "iqm"], FIXED, "aggregate"),
                              ([*STUDY_FLAGS, "--seeds", "1", "3"], FIXED, "seeds"),
                              ([*STUDY_FLAGS[:4], "learning-rate=float:0.2:0.9",
                                *STUDY_FLAGS[5:]], FIXED, "params")]:
        code, out, err = run_cli("tune.py", [*argv, "--trials", "3", "--study",
                                             str(tmp_path / "s.db"), "--", *fixed])
        assert code == 2 and err.count("\n") == 1, err
        assert err.startswith(f"tune.py: error: --study {tmp_path / 's.db'} was made with "
                              f"{what} "), err
    assert len(load(tmp_path / "s.db").trials) == 2


def test_each_line_names_the_best_trial_so_far(tmp_path, capsys, monkeypatch):
    """Runs replaced by made-up values: seeds (1, 2) score (5, 7), then (3, 9), then (6, 6);
    the worst seeds 5, 3, 6 make the best so far trial-0's 5, still trial-0's 5 (trial-1's 3
    is lower, though its seed 2 is the highest value of all), then trial-2's 6, whose flags
    make the command printed at the end."""
    made_up = iter([{1: 5.0, 2: 7.0}, {1: 3.0, 2: 9.0}, {1: 6.0, 2: 6.0}])
    monkeypatch.setattr(tune, "run_seeds", lambda *args: next(made_up))
    study = tune.main(study_args(tmp_path, 3), FIXED)
    out = capsys.readouterr().out.splitlines()
    assert [t.value for t in study.trials] == [5.0, 3.0, 6.0]
    assert [line.split(" | ")[1:4] for line in out[:3]] == [
        ["seed 1: 5, seed 2: 7", "worst 5", "best 5 (trial-0)"],
        ["seed 1: 3, seed 2: 9", "worst 3", "best 5 (trial-0)"],
        ["seed 1: 6, seed 2: 6", "worst 6", "best 6 (trial-2)"]]
    assert study.trials[1].user_attrs["seed 2"] == 9.0
    assert out[3].startswith("best: trial-2, worst 6 (seed 1: 6, seed 2: 6), runs in ")
    assert out[4] == tune.best_command("qlearning.py", "Taxi-v4", FIXED,
                                       study.trials[2].user_attrs["flags"])


@pytest.mark.slow  # a real study's runs
def test_a_failing_run_fails_its_trial_with_its_last_stderr_line(tmp_path, capsys,
                                                                 monkeypatch):
    """An environment whose step raises: it passes the script's checks (prepare makes it and
    reads its spaces), then each run dies of it with a traceback; the trial fails with the
    run's last stderr line, and (FAILED_IN_A_ROW set to 2) two failures in a row stop the
    study with exit status 1."""
    monkeypatch.setenv("PYTHONPATH", TESTS)
    monkeypatch.setattr(tune, "FAILED_IN_A_ROW", 2)
    args = study_args(tmp_path, 3, "--env-id", "my_envs:CrashingStep-v0", "--seeds", "1")
    with pytest.raises(SystemExit) as e:
        tune.main(args, FIXED)
    assert e.value.code == 1
    captured = capsys.readouterr()
    line = ("seed 1 exited with status 1: RuntimeError: a bug in the user's own environment's "
            "step")
    out = captured.out.splitlines()
    assert len(out) == 2 and out[0].startswith("trial-0 failed: --learning-rate ")
    assert out[0].endswith(f" | {line}") and out[1].startswith("trial-1 failed: ")
    assert captured.err == f"tune.py: 2 trials failed in a row; stopping (the last: {line})\n"
    study = load(tmp_path / "s.db")
    assert states(study) == ["FAIL", "FAIL"]
    assert study.trials[0].user_attrs["error"] == line


def test_an_environment_module_that_fails_is_bad_input_before_any_trial(tmp_path, monkeypatch):
    """A module that raises when imported: the script's own checks, which tune.py runs before
    the study (prepare), say so in one line, and no trial starts."""
    monkeypatch.setenv("PYTHONPATH", TESTS)
    args = study_args(tmp_path, 3, "--env-id", "crashing_envs:Anything-v0", "--seeds", "1")
    with pytest.raises(tune.UsageError, match="the fixed flags: qlearning.py says: cannot make "
                       "crashing_envs:Anything-v0: RuntimeError: a bug in the user's own "
                       "environment module"):
        tune.main(args, FIXED)
    assert not (tmp_path / "s.db").exists()


def test_a_completed_trial_starts_the_count_of_failures_in_a_row_again(tmp_path, capsys,
                                                                       monkeypatch):
    """Runs replaced by made-up outcomes, FAILED_IN_A_ROW 3 (its own): fail, fail, a value,
    fail, fail, a value, then fail, fail, fail. Six failures in all, never three in a row until
    the last three: the study completes trials 2 and 5 and stops after trial-8 with exit
    status 1, "3 trials failed in a row". A count that a completed trial did not start again
    would stop it at trial-3, its third failure (2 completed of --trials 3)."""
    assert tune.FAILED_IN_A_ROW == 3
    outcomes = iter([None, None, 4.0, None, None, 6.0, None, None, None])

    def made_up(*args):
        value = next(outcomes)
        if value is None:
            raise tune.TrialFailed("seed 1 exited with status 1: made up")
        return {1: value, 2: value}
    monkeypatch.setattr(tune, "run_seeds", made_up)
    with pytest.raises(SystemExit) as e:
        tune.main(study_args(tmp_path, 3), FIXED)
    assert e.value.code == 1
    captured = capsys.readouterr()
    assert captured.err == ("tune.py: 3 trials failed in a row; stopping (the last: seed 1 "
                            "exited with status 1: made up)\n")
    assert states(load(tmp_path / "s.db")) == ["FAIL", "FAIL", "COMPLETE", "FAIL", "FAIL",
                                               "COMPLETE", "FAIL", "FAIL", "FAIL"]
    out = captured.out.splitlines()
    assert [line.split(" ")[0] for line in out] == [
        "trial-0", "trial-1", "trial", "trial-3", "trial-4", "trial", "trial-6", "trial-7",
        "trial-8"]
    assert out[2].startswith("trial 1 of 3 (trial-2): ") and out[5].startswith(
        "trial 2 of 3 (trial-5): ")


# ---------------------------------------------------------------------------------------
# Ctrl-C: the runs stopped, the trial under way failed, the rest kept, the same command
# goes on
# ---------------------------------------------------------------------------------------
def processes_naming(text):
    """The ids of this machine's processes whose command line holds text."""
    found = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                if text.encode() in f.read():
                    found.append(int(pid))
        except OSError:
            pass
    return found


@pytest.mark.slow  # a real study's runs, stopped by Ctrl-C
def test_ctrl_c_keeps_the_completed_trials_and_the_same_command_goes_on(tmp_path):
    # 30,000 steps (half a second of training) where FIXED has 3,000, so that the Ctrl-C
    # below finds trial-1's runs training
    fixed = [*FIXED[:FIXED.index("--total-timesteps")], "--total-timesteps", "30000",
             *FIXED[FIXED.index("--total-timesteps") + 2:]]
    command = [sys.executable, script_path("tune.py"), *STUDY_FLAGS, "--trials", "2",
               "--study", str(tmp_path / "s.db"), "--", *fixed]
    process = subprocess.Popen(command, cwd=tmp_path, stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, text=True)
    first = process.stdout.readline()
    assert first.startswith("trial 1 of 2 (trial-0): "), (first, process.stderr.read())
    # Ctrl-C once one of trial-1's runs has written a row of updates.csv, so that it lands
    # while that run trains. A fixed sleep raced the runs: on a loaded machine the test woke
    # after they had ended.
    def training():
        return [path.parent for path in (tmp_path / "s" / "trial-1").glob("*/updates.csv")
                if len(path.read_text().splitlines()) >= 2]
    deadline = time.time() + 30
    while not training() and time.time() < deadline:
        time.sleep(0.01)
    seen = training()
    signalled = time.time()
    process.send_signal(signal.SIGINT)
    out, err = process.communicate(timeout=60)
    assert process.returncode == -signal.SIGINT  # died of SIGINT: 130 in a shell
    assert processes_naming(str(tmp_path)) == []  # its runs stopped with it
    before = load(tmp_path / "s.db").trials  # a list: the study reads the file anew each time
    done = [t for t in before if t.state.name == "COMPLETE"]
    assert done and [t.state.name for t in before] == ["COMPLETE"] * len(done) + ["FAIL"]
    assert before[-1].user_attrs["interrupted"] is True
    # the whole of stderr: no line of Optuna's
    assert err == (
        f"tune.py: interrupted: trial-{len(done)} is marked failed, {len(done)} completed "
        f"trials are kept in {tmp_path / 's.db'}; the same command resumes: python tune.py "
        + " ".join(command[2:]) + "\n")
    # the interrupted trial's runs were stopped by Ctrl-C, not waited for: each one that got
    # as far as its run folder and was still training says "interrupted", short of the
    # budget; only a run that wrote its summary before the Ctrl-C may have finished
    folder = tmp_path / "s" / f"trial-{len(done)}"
    assert seen and all((run / "summary.json").exists() for run in seen)
    for path in folder.glob("*/summary.json"):
        summary = json.loads(path.read_text())
        if path.stat().st_mtime < signalled:
            assert (summary["interrupted"], summary["global_steps"]) == (False, 30000)
        else:
            assert summary["interrupted"] is True and summary["global_steps"] < 30000

    resumed = subprocess.run(command, cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert (resumed.returncode, resumed.stderr) == (0, "")
    after = load(tmp_path / "s.db")
    assert states(after) == [t.state.name for t in before] + ["COMPLETE"] * (2 - len(done))
    assert [(t.number, t.value, t.params) for t in after.trials[:len(done)]] == [
        (t.number, t.value, t.params) for t in done]
    lines = resumed.stdout.splitlines()
    assert lines[0] == f"tune.py: resuming {tmp_path / 's.db'}: {len(done)} of 2 trials done"
    assert lines[1].startswith(f"trial {len(done) + 1} of 2 (trial-{len(done) + 1}): ")
    assert after.trials[-1].params not in [t.params for t in before]


# ---------------------------------------------------------------------------------------
# --ray: a seed's result, its value, the tasks cancelled (no cluster: run_seeds_on_ray's
# pieces, and a stand-in for Ray)
# ---------------------------------------------------------------------------------------
def ray_result(seed, returncode=0, value=1.0):
    """What benchmark.node_function sends back for a run of seed: its files and output."""
    run = f"FrozenLake-v1__qlearning__{seed}__1700000000"
    return {"returncode": returncode, "stdout": f"out {seed}\n", "stderr": f"err {seed}\nlast\n",
            "host": "node-a", "node": "n1", "process_s": 1.0,
            "files": {f"{run}/summary.json": json.dumps({"train_return_last20": value}).encode(),
                      f"{run}/episodes.csv": b"step,return\n"}}


def write_files(result, folder):
    for relative, data in result["files"].items():
        os.makedirs(os.path.dirname(os.path.join(folder, relative)), exist_ok=True)
        with open(os.path.join(folder, relative), "wb") as f:
            f.write(data)


def test_a_cluster_seed_that_exits_non_zero_fails_its_trial_even_with_files(tmp_path):
    """As run_seeds: a status other than 0 fails the trial with stderr's last line, though
    the run sent back its folder (which is not kept); status 0 keeps output and files."""
    written = []
    with pytest.raises(tune.TrialFailed, match="^seed 3 exited with status 1 on node-a: last$"):
        tune.take_result(3, ray_result(3, returncode=1), str(tmp_path),
                         lambda result, folder: written.append(result))
    assert written == [] and (tmp_path / "seed-3.err").read_text() == "err 3\nlast\n"
    tune.take_result(4, ray_result(4), str(tmp_path), write_files)
    assert (tmp_path / "seed-4.out").read_text() == "out 4\n"
    assert (tmp_path / "FrozenLake-v1__qlearning__4__1700000000" / "summary.json").exists()


def test_each_seeds_value_is_read_from_its_own_run_folder(tmp_path):
    before = set(os.listdir(tmp_path))
    for seed, value in ((1, -3.0), (2, 5.5)):
        write_files(ray_result(seed, value=value), str(tmp_path))
    assert tune.read_values([1, 2], str(tmp_path), before, "train_return_last20") == {1: -3.0, 2: 5.5}
    assert tune.read_values([2, 1], str(tmp_path), before, "train_return_last20") == {2: 5.5, 1: -3.0}


class FakeRay:
    """Ray as run_seeds_on_ray uses it: each seed's task a ref whose result is ready (or
    never is: not_ready); cancel records what it is asked to cancel."""
    class exceptions:
        RayError = RuntimeError

    def __init__(self, results, not_ready=()):
        self.results, self.not_ready, self.cancelled = results, set(not_ready), []
        self.run = self
        self.seeds = iter(results)

    def options(self, **kwargs):
        return self

    def remote(self, words, env):
        return f"ref-{next(self.seeds)}"

    def get(self, ref):
        assert ref[4:] not in self.not_ready, "the driver would wait forever"
        return self.results[ref[4:]]

    def wait(self, refs, num_returns=1, timeout=None):
        assert timeout == 0
        return ([r for r in refs if r[4:] not in self.not_ready],
                [r for r in refs if r[4:] in self.not_ready])

    def cancel(self, ref, force=False):
        self.cancelled.append(ref)


@pytest.mark.parametrize("failing", [False, True])
def test_ray_cancels_only_the_tasks_still_running(tmp_path, failing):
    """A finished task is never cancelled (Ray's driver can abort, "Tried to complete task
    that was not pending", when one is force-cancelled as its node goes): none after a trial
    whose seeds all ended; after a failing seed, only those still running."""
    results = {"1": ray_result(1), "2": ray_result(2, returncode=1 if failing else 0),
               "3": ray_result(3)}
    ray = FakeRay(results, not_ready={"3"} if failing else ())
    cluster = {"ray": ray, "run": ray, "cores": 1, "write": write_files, "retries": 2}
    commands = {int(s): ["python", "qlearning.py", "--seed", s, "--output-dir", str(tmp_path)]
                for s in results}
    if failing:
        with pytest.raises(tune.TrialFailed, match="seed 2 exited with status 1"):
            tune.run_seeds_on_ray(commands, str(tmp_path), cluster, "train_return_last20")
        assert ray.cancelled == ["ref-3"]
    else:
        values = tune.run_seeds_on_ray(commands, str(tmp_path), cluster, "train_return_last20")
        assert values == {1: 1.0, 2: 1.0, 3: 1.0} and ray.cancelled == []

"""exercises.py: every exercise blanks its function and nothing else, the blank copy fails
`check` with its hint while the original passes, and bad input is one line with exit 2."""
import ast
import csv
import functools
import glob
import io
import json
import os
import shutil
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor

import pytest

import exercises
from conftest import ROOT

# the slow tier: exercises.py, the students' checker, a tool of its own (its make, hint and check,
# and the pytest runs and short trainings check starts); the exercises' own hand-computed
# tests are the scripts' and stay in the fast tier
pytestmark = pytest.mark.slow

SCRIPTS = sorted({e.script for e in exercises.EXERCISES})
# each check run trains on the script's reference environment (README, benchmark.py)
EXPECTED_ENVS = {"qlearning": {"Taxi-v4", "MountainCar-v0"}, "dqn": {"CartPole-v1"},
                 "ddpg_td3": {"Pendulum-v1"}, "sac": {"Pendulum-v1"},
                 "ppo": {"CartPole-v1"}, "ppo_masked": {"Taxi-v4"},
                 "ppo_lstm": {"CartPole-v1"}, "ppo_rnd": {"MountainCar-v0"},
                 "es": {"CartPole-v1"}, "ppod": {"MountainCar-v0"},
                 "mappo": {"simple_spread_v3"}, "matd3": {"simple_spread_v3"},
                 "vpg": {"CartPole-v1"}, "trpo": {"CartPole-v1"}, "impala": {"CartPole-v1"},
                 "crossq": {"Pendulum-v1"}, "pqn": {"CartPole-v1"}, "grpo": {"Addition-v0"},
                 "rlhf": {"Preference-v0"}}


def exercises_of(script):
    return [e for e in exercises.EXERCISES if e.script == script]


@functools.cache
def parsed(*path):
    """The module at ROOT/path, parsed once for all the exercises that read it."""
    with open(os.path.join(ROOT, *path)) as f:
        return ast.parse(f.read())


def start_exercises(*argv):
    """`python exercises.py argv` started in a fresh process; finished() waits for it."""
    return subprocess.Popen([sys.executable, os.path.join(ROOT, "exercises.py"), *argv],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=ROOT)


def finished(process):
    """(exit status, stdout, stderr) of a started `python exercises.py`."""
    out, err = process.communicate()
    return process.returncode, out, err


def run_exercises(*argv):
    """`python exercises.py argv` in a fresh process: (exit status, stdout, stderr)."""
    return finished(start_exercises(*argv))


def test_every_algorithm_script_has_an_exercise():
    scripts = {os.path.basename(p)[5:-3] for p in glob.glob(os.path.join(ROOT, "tests", "test_*.py"))}
    # plot.py, tune.py and benchmark.py are tools; test_plumbing.py and test_device.py check rules every
    # script keeps; test_pixels.py tests ppo.py's and dqn.py's images, test_sparse_chain.py a
    # benchmark task,
    # test_sb3_compare.py, test_cleanrl_compare.py, test_trl_grpo_compare.py and
    # test_trl_dpo_compare.py the side by sides of benchmarks/,
    # test_site.py the documentation site, test_tensorboard.py every script's event files,
    # test_videos.py the pages' recordings, test_notebooks.py the classroom notebooks,
    # test_cluster.py benchmark.py's and tune.py's Ray cluster (issue 85), test_pages.py the
    # teaching pages' length and voice; test_lines_of_code.py and test_same_episodes.py the
    # reading contract's measures (issue 102), test_grpo_controls.py, test_rlhf_frontier.py
    # and test_rlhf_value_loss.py the language road's benchmarks and rlhf.py's losses' reach;
    # test_presets.py the presets every script that has them shares (issue 107)
    assert scripts - {"exercises", "plot", "tune", "benchmark", "plumbing", "device", "readme", "pixels",
                      "sparse_chain", "sb3_compare", "cleanrl_compare", "trl_grpo_compare",
                      "trl_dpo_compare", "site",
                      "tensorboard", "videos", "notebooks", "cluster", "pages", "lines_of_code",
                      "same_episodes", "grpo_controls", "rlhf_frontier",
                      "rlhf_value_loss", "presets"} == set(SCRIPTS)


@pytest.mark.parametrize("exercise", exercises.EXERCISES, ids=lambda e: e.id)
def test_each_exercise_names_a_function_and_tests_that_exist(exercise):
    assert exercise.function in exercises.function_nodes(parsed(f"{exercise.script}.py"))
    functions = [n for n in parsed("tests", f"test_{exercise.script}.py").body
                 if isinstance(n, ast.FunctionDef)]
    assert set(exercise.tests) <= {n.name for n in functions}
    # check's pytest runs the fast tier (pytest.ini deselects `slow`): a slow test would not run
    assert not [n.name for n in functions if n.name in exercise.tests and any(
        "mark.slow" in ast.unparse(d) for d in n.decorator_list)]
    assert exercise.run[0] == "--env-id" and exercise.run[1] in EXPECTED_ENVS[exercise.script]
    # the run is judged on a measure summary.json has, at the goal its --stop-at-return stops at;
    # one judged on the evaluation names how many episodes it plays
    assert exercise.measure in ("train", "eval_return_mean")
    if "--stop-at-return" in exercise.run:
        assert float(exercise.run[exercise.run.index("--stop-at-return") + 1]) == exercise.goal
    if exercise.measure == "eval_return_mean":
        assert "--eval-episodes" in exercise.run
    assert set(exercise.computed) <= set(exercise.tests)


# What each rlhf.py exercise's training run must select for the exercise's function to be
# reached and to count in the score it is judged on, by hand from rlhf.py's train: the
# Bradley-Terry loss trains the reward model PPO learns from (--rm-steps of it; DPO trains
# one too, but as held_out.csv's proxy alone, so a wrong loss would leave DPO's score as it
# was); the per-token KL reward is PPO's, a batch of --num-prompts completions at least, a
# beta above 0 (at 0 the KL term is multiplied away); DPO's loss is --algo dpo's, a step of
# --num-prompts pairs (2 completions each) at least, a beta above 0 (at 0 the loss is log 2
# whatever the policy). Every one is judged on the greedy evaluation: --eval-episodes above 0.
RLHF_PATHS = {
    "bradley_terry_loss": lambda a: a.algo == "ppo" and a.rm_steps > 0
    and a.total_timesteps >= a.num_prompts,
    "kl_penalized_rewards": lambda a: a.algo == "ppo" and a.beta > 0
    and a.total_timesteps >= a.num_prompts,
    "dpo_loss": lambda a: a.algo == "dpo" and a.beta > 0
    and a.total_timesteps >= 2 * a.num_prompts,
}


@pytest.mark.parametrize("exercise", exercises_of("rlhf"), ids=lambda e: e.id)
def test_each_rlhf_exercises_training_run_reaches_its_function(exercise, tmp_path, monkeypatch):
    # the command check's training_run starts, caught before it starts (nothing trains) and
    # read as rlhf.py reads it: rlhf.dpo_loss's run has --algo dpo, the other two's PPO's
    import tyro

    import rlhf
    assert set(RLHF_PATHS) == {e.function for e in exercises_of("rlhf")}  # a new one: add it
    started = []
    monkeypatch.setattr(exercises, "run_limited", lambda command, time_limit: started.append(
        command) or (1, "not run", False))
    script = os.path.join(ROOT, "rlhf.py")
    with pytest.raises(exercises.NotYet):
        exercises.training_run(script, exercise, str(tmp_path), True, 60)
    (command,) = started
    assert command[:2] == [sys.executable, script]
    args = tyro.cli(rlhf.Args, args=command[2:])
    rlhf.check_flags(args)  # flags rlhf.py takes
    assert RLHF_PATHS[exercise.function](args), (exercise.id, args.algo)
    assert exercise.measure == "eval_return_mean" and args.eval_episodes > 0
    assert ("--algo dpo" in " ".join(exercise.run)) == (exercise.function == "dpo_loss")
    # the rate each run was measured at (exercises.py's comments): PPO's 1e-4, DPO's 1e-4
    rate = args.dpo_learning_rate if args.algo == "dpo" else args.learning_rate
    assert rate == 1e-4, (exercise.id, rate)
    # and the budget each was measured at: 20 batches of 256, PPO's a completion a prompt
    # (5,120), DPO's 2 completions a pair (10,240)
    per_step = 2 * args.num_prompts if args.algo == "dpo" else args.num_prompts
    assert (args.num_prompts, args.total_timesteps) == (256, 20 * per_step), exercise.id


def test_list_shows_every_exercise_and_its_paper_and_the_hints_only_on_request():
    code, out, _ = run_exercises("list")
    assert code == 0 and out.endswith("a hint where to start: python exercises.py hint <id>\n")
    for e in exercises.EXERCISES:
        assert e.id in out and e.paper in out and e.hint not in out
    code, out, _ = run_exercises("list", "--hints")
    assert code == 0 and all(f"hint: {e.hint}" in out for e in exercises.EXERCISES)
    gae, loss = exercises.find_exercise("ppo.gae"), exercises.find_exercise("ppo.loss")
    code, out, _ = run_exercises("hint", "ppo.gae", "ppo.loss")
    assert code == 0 and out == (f"ppo.gae (ppo.py: compute_gae): {gae.hint}\n"
                                 f"ppo.loss (ppo.py: ppo_loss): {loss.hint}\n")


def test_show_writes_values_as_a_student_reads_them():
    import numpy as np
    import torch

    class Buffers:
        def __init__(self):
            self.threshold, self.rng, self._cache = -5.0, np.random.default_rng(0), {}

    show = exercises.show
    assert show(0.30000001192092896) == "0.3" and show(pytest.approx(4.6)) == "4.6"
    assert show([pytest.approx([0.729, 0.81]), (1, True)]) == "[[0.729, 0.81], (1, True)]"
    assert show(torch.tensor([[1.3125], [0.1]])) == "tensor([[1.3125], [0.1]])"
    assert show(torch.zeros(4, 2, 8)) == "tensor of shape [4, 2, 8]"
    # up to SHOWN_ELEMENTS (20) elements are written out, more by the shape
    assert show(torch.zeros(20)).startswith("tensor([0.0, ") and show(torch.zeros(21)) == (
        "tensor of shape [21]")
    assert show(np.zeros(20)).startswith("array([0.0, ") and show(np.zeros(21)) == (
        "array of shape [21]")
    # a tensor attached to a graph says so (a student who forgot a detach sees it)
    assert show(torch.ones(2, requires_grad=True) * 2) == "tensor([2.0, 2.0], requires_grad=True)"
    assert show(np.array([1, 2])) == "array([1, 2])" and show(np.float32(0.25)) == "0.25"
    linear = torch.nn.Linear(1, 2)
    with torch.no_grad():
        linear.weight[:] = torch.tensor([[1.0], [10.0]])
        linear.bias[:] = torch.tensor([2.0, -3.0])
    assert show(linear) == "Linear(weight=tensor([[1.0], [10.0]]), bias=tensor([2.0, -3.0]))"
    assert show(torch.nn.Linear(16, 4)) == "Linear(in_features=16, out_features=4, bias=True)"
    # an object by its public attributes, without memory addresses
    assert show(Buffers()) == "Buffers(threshold=-5.0, rng=Generator(PCG64))"
    assert show(list(range(200))).endswith(" ...") and len(show(list(range(200)))) == 304


def test_blanking_keeps_the_signature_and_docstring_and_every_other_line():
    source = 'import math\n\n\ndef f(x,\n      y):\n    """Add.\n\n    f = x + y\n    """\n' \
             '    # the answer\n    return x + y  # here\n\n\nclass C:\n    def g(self):\n' \
             '        return 1\n'
    blank = exercises.blank_function(source, "f", "exercise t.f: add them")
    assert blank == ('import math\n\n\ndef f(x,\n      y):\n    """Add.\n\n    f = x + y\n    """\n'
                     "    raise NotImplementedError('exercise t.f: add them')\n\n\nclass C:\n"
                     "    def g(self):\n        return 1\n")
    method = exercises.blank_function(source, "C.g", "m")
    assert method.endswith("    def g(self):\n        raise NotImplementedError('m')\n")
    # a function's text is read as written, a method's from its def; by name, those alone
    assert exercises.function_sources(source, {"C.g"}) == {"C.g": "def g(self):\n        return 1"}
    assert list(exercises.function_sources(source)) == ["f", "C.g"]


@pytest.mark.parametrize("script", SCRIPTS)
def test_make_blanks_the_exercises_and_keeps_every_other_line(script, tmp_path, run_cli):
    ids = [e.id for e in exercises_of(script)]
    code, out, err = run_cli("exercises.py", ["make", *ids, "--out", str(tmp_path / "blank")])
    assert code == 0, err
    copy = tmp_path / "blank" / f"{script}.py"
    with open(os.path.join(ROOT, f"{script}.py")) as f:
        original = f.read()
    blanked = copy.read_text()
    # the blanked functions' texts (every other function is checked, byte for byte, with
    # every other line at the end)
    functions = {e.function for e in exercises_of(script)}
    before = exercises.function_sources(original, functions)
    after = exercises.function_sources(blanked, functions)
    blank_nodes = exercises.function_nodes(ast.parse(blanked))
    original_nodes = exercises.function_nodes(ast.parse(original))
    for e in exercises_of(script):
        assert ast.get_docstring(blank_nodes[e.function]) == ast.get_docstring(
            original_nodes[e.function])
        assert "raise NotImplementedError(" in after[e.function]
        assert f"exercise {e.id}: {e.hint}" in after[e.function]

    # Every line outside the blanked functions (the flags, the classes, the banner) is the
    # original's: with each exercise's function cut from both texts, the two are equal.
    def without_exercises(source, texts):
        # texts: the functions of the source as read, before any cut (a method cut first
        # would leave a module that no longer parses)
        for e in exercises_of(script):
            source = source.replace(texts[e.function], "", 1)
        return source
    assert without_exercises(blanked, after) == without_exercises(original, before)


@pytest.mark.slow  # exercises.py check on every exercise: a pytest of its own each
def test_every_test_of_every_exercise_fails_on_the_blanks_and_passes_on_the_scripts(
        tmp_path, run_cli):
    # check's own pytest (its plugin wrapping each exercise's function to record its calls,
    # no other plugin, no faulthandler), twice side by side: on the eighteen blank files that
    # make writes (--script-file each) every test of every exercise runs and fails, and at
    # least one raises its own function's NotImplementedError (a test may call another blank
    # function first); on the repository's own scripts every one runs and passes. (A test that
    # did not run is a failing record; a parametrized test gives a record per case.)
    for script in SCRIPTS:  # make writes one script's copy at a time
        code, _, err = run_cli("exercises.py", ["make", *(e.id for e in exercises_of(script)),
                                                "--out", str(tmp_path)])
        assert code == 0, err
    blanks = [str(tmp_path / f"{script}.py") for script in SCRIPTS]
    with ThreadPoolExecutor(2) as pool:
        on_blanks, on_scripts = (pool.submit(exercises.run_tests, paths, exercises.EXERCISES,
                                             600) for paths in (blanks, []))
        on_blanks, on_scripts = on_blanks.result(), on_scripts.result()
    for e in exercises.EXERCISES:
        for results in (on_blanks, on_scripts):
            assert {name.split("[")[0] for name, _ in results[e.id]} == set(e.tests), e.id
        assert not any(r["passed"] for _, r in on_blanks[e.id]), e.id
        assert any(r["error"] == f"NotImplementedError: {e.function} is still blank "
                   f"(exercise {e.id})" for _, r in on_blanks[e.id]), e.id
        failed = [(name, r["error"] or r["statement"]) for name, r in on_scripts[e.id]
                  if not r["passed"]]
        assert failed == [], e.id


@pytest.mark.slow  # exercises.py check: a pytest of its own
def test_check_on_a_blank_gives_each_exercises_count_error_and_hint(tmp_path, run_cli):
    # ppo.py's three exercises blanked: check says 0 of each one's tests pass, names each
    # blank function and its exercise, and gives each exercise's hint once.
    ids = [e.id for e in exercises_of("ppo")]
    assert len(ids) == 3
    code, _, err = run_cli("exercises.py", ["make", *ids, "--out", str(tmp_path)])
    assert code == 0, err
    code, out, err = run_exercises("check", str(tmp_path / "ppo.py"), "--no-train")
    assert code == 1 and err == ""
    for e in exercises_of("ppo"):
        assert f"{e.id}: 0 of {len(e.tests)} tests pass" in out
        assert f"NotImplementedError: {e.function} is still blank (exercise {e.id})" in out
        assert out.count(f"  hint: {e.hint}\n") == 1
    assert "verdict: not yet" in out


@pytest.mark.slow  # exercises.py check, then its training run
def test_check_reports_a_wrong_number_then_a_right_version_trains(tmp_path):
    with open(os.path.join(ROOT, "qlearning.py")) as f:
        original = f.read()
    right = "    target = r if terminated else r + gamma * q[s_next].max()\n"
    assert right in original
    wrong = tmp_path / "wrong" / "qlearning.py"  # bootstraps from the mean, not the max
    wrong.parent.mkdir()
    wrong.write_text(original.replace(right, right.replace(".max()", ".mean()")))
    code, out, _ = run_exercises("check", str(wrong))
    assert code == 1 and "qlearning.q_update: 1 of 4 tests pass" in out
    assert "training" not in out  # no run before the tests pass
    # the first failing case: the test's line, the inputs, expected and obtained, the hint.
    # By hand: q[1] = [2, 4], so the target is 1 + 0.9 * max = 4.6, while the mean gives
    # 1 + 0.9 * 3 = 3.7.
    first = out[out.index("FAIL  test_q_update_bootstraps"):out.index("pass  test_q_update_t")]
    assert "          tests/test_qlearning.py, line " in first
    assert ("\n              assert ql.q_update(q, 0, 1, 1.0, 1, False, 0.5, 0.9) == "
            "pytest.approx(4.6)\n          your q_update was called with\n"
            "              q = array([[0.0, 0.0], [2.0, 4.0], [0.0, 0.0]])\n"
            "              s = 0\n              a = 1\n              r = 1.0\n"
            "              s_next = 1\n              terminated = False\n"
            "              alpha = 0.5\n              gamma = 0.9\n"
            "          expected  4.6  (worked out by hand)\n"
            "          obtained  3.7\n") in first
    assert "your q_update was called 4000 times, the last time with" in out  # the chain
    assert out.count(f"  hint: {exercises.find_exercise('qlearning.q_update').hint}\n") == 1
    for internal in ("comparison failed", "Use -v", "where", " at 0x", "full report"):
        assert internal not in out

    # Only q_update differs from the repository's, so only its exercise is checked.
    right_copy = tmp_path / "right" / "qlearning.py"
    right_copy.parent.mkdir()
    right_copy.write_text(original.replace(right, right.replace("r + gamma", "r + (gamma)")))
    code, out, _ = run_exercises("check", str(right_copy))
    assert code == 0, out
    (folder,) = glob.glob(str(tmp_path / "right" / "runs" / "*"))  # beside the student's file
    assert "qlearning.discretize" not in out and f"curve: python plot.py {folder}\n" in out
    assert "verdict: correct" in out
    assert os.path.isfile(os.path.join(folder, "summary.json"))


@pytest.mark.slow  # exercises.py check: a pytest of its own
def test_check_shows_tensors_compared_and_the_line_of_the_students_file_that_raised(tmp_path):
    with open(os.path.join(ROOT, "ppo.py")) as f:
        original = f.read()
    trace = "        running = deltas[t] + gamma * gae_lambda * not_done[t] * running\n"
    cat = "G = torch.cat([G_before_last, next_values[-1:]])"
    assert trace in original and cat in original
    wrong = tmp_path / "ppo.py"  # the trace runs on across episode ends; a dimension lost
    wrong.write_text(original.replace(trace, trace.replace(" * not_done[t]", ""))
                     .replace(cat, cat.replace("[-1:]", "[-1]")))
    code, out, _ = run_exercises("check", str(wrong), "--no-train")
    assert code == 1 and "ppo.gae: 1 of 4 tests pass" in out
    # termination at t=1 (tests/test_ppo.py): A = [1, 0, 1] by hand; the trace that runs on
    # through it gives A_1 = 0 + 0.25 * 1 = 0.25 and A_0 = 1 + 0.25 * 0.25 = 1.0625
    case = out[out.index("FAIL  test_gae_termination"):out.index("FAIL  test_gae_truncation")]
    assert "\n              assert torch.allclose(adv, column(1.0, 0.0, 1.0))\n" in case
    assert "\n              terminated = tensor([[0.0], [1.0], [0.0]])\n" in case
    assert ("          expected  tensor([[1.0], [0.0], [1.0]])  (worked out by hand)\n"
            "          obtained  tensor([[1.0625], [0.25], [1.0]])\n") in case
    assert "built-in method" not in out and " at 0x" not in out
    # compute_vtrace raises: the error and the student's line that raised it
    assert "and raised RuntimeError: Tensors must have same number of dimensions" in out
    assert "and returned" not in out  # a call that raised returned nothing
    assert (f"at line {original[:original.index(cat)].count(chr(10)) + 1} of your file: "
            f"{cat.replace('[-1:]', '[-1]')}"
            in out)


def test_make_refuses_to_overwrite_a_students_file(tmp_path):
    assert run_exercises("make", "ppo.gae", "--out", str(tmp_path))[0] == 0
    (tmp_path / "ppo.py").write_text("# the student's work\n")
    code, _, err = run_exercises("make", "ppo.gae", "--out", str(tmp_path))
    assert code == 2 and "pass --force" in err
    assert (tmp_path / "ppo.py").read_text() == "# the student's work\n"
    assert run_exercises("make", "ppo.gae", "--out", str(tmp_path), "--force")[0] == 0


@pytest.mark.parametrize("argv, message", [
    (["make", "ppo.gea"], "unknown exercise 'ppo.gea'; did you mean ppo.gae"),
    (["hint", "ppo.gea"], "unknown exercise 'ppo.gea'; did you mean ppo.gae"),
    (["make", "ppo.gae", "dqn.targets"], "belong to different scripts (dqn, ppo)"),
    (["make"], "name one or more exercises"),
    (["check"], "name one or more students' files"),
    (["check", "no/such/ppo.py"], "no/such/ppo.py does not exist"),
    # a teacher's mistake in any file stops the check before a student's code runs
    (["check", "NAMED/ppo.py", "no/such/ppo.py"], "no/such/ppo.py does not exist"),
    (["check", "NAMED/student.py"], "the file name says which script it stands in for"),
    (["check", "NAMED/ppo.py", "--exercise", "dqn.targets"], "stands in for ppo.py"),
    (["check", "NAMED/ppo.py", "--test-time-limit", "0"], "must be positive"),
    (["check", "NAMED/ppo.py", "--summary", "NAMED/marks.csv"], "is not a grade book"),
    (["check", "NAMED/ppo.py", "--summary", "no/such/grades.csv"], "does not exist"),
])
def test_bad_input_is_one_line_and_exit_status_2(argv, message, tmp_path):
    (tmp_path / "NAMED").mkdir()
    for name in ("student.py", "ppo.py"):
        shutil.copy(os.path.join(ROOT, "ppo.py"), tmp_path / "NAMED" / name)
    (tmp_path / "NAMED" / "marks.csv").write_text("student,mark\nann,12\n")  # the teacher's
    argv = [str(tmp_path / a) if a.startswith("NAMED") else a for a in argv]
    code, out, err = run_exercises(*argv)
    assert code == 2 and out == ""
    assert err.startswith("exercises.py: error: ") and err.count("\n") == 1 and message in err
    assert (tmp_path / "NAMED" / "marks.csv").read_text() == "student,mark\nann,12\n"


def test_check_help_reads_well():
    code, out, _ = run_exercises("check", "--help")
    assert code == 0
    for flag in ("FILE [FILE ...]", "--exercise ID [ID ...]", "--no-train ",
                 "--test-time-limit SECONDS", "--train-time-limit SECONDS", "--summary CSV"):
        assert flag in out
    assert "--no-no-train" not in out and "(default: )" not in out and "STR" not in out


# A student's mistakes: one line on stdout and status 1 (status 2 is for the teacher's)
RIGHT_Q_UPDATE = "    target = r if terminated else r + gamma * q[s_next].max()\n"


def student_copy(folder, script="qlearning", old=None, new=None):
    """folder/<script>.py: the repository's script, with `old` replaced by `new`."""
    with open(os.path.join(ROOT, f"{script}.py")) as f:
        source = f.read()
    if old is not None:
        assert source.count(old) == 1
        source = source.replace(old, new)
    folder.mkdir(parents=True, exist_ok=True)
    (folder / f"{script}.py").write_text(source)
    return str(folder / f"{script}.py")


# the line of tests/test_qlearning.py where a q_update that takes the mean first fails
TEST_QLEARNING = os.path.join(os.path.dirname(os.path.abspath(__file__)), "test_qlearning.py")
FIRST_FAILING = "    assert ql.q_update(q, 0, 1, 1.0, 1, False, 0.5, 0.9) == pytest.approx(4.6)"


def line_of(path, text):
    """The number of the line of the file that is `text`."""
    with open(path) as f:
        return f.read().splitlines().index(text) + 1


def spawn_lingering_children(pid_file, indent):
    """Source lines that start two processes that would sleep for ten minutes, one of them
    in a session of its own (out of reach of a kill of the process group), and write their
    pids to pid_file."""
    return "".join(f"{indent}{line}\n" for line in (
        "import subprocess, sys",
        "children = [subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(600)']),",
        "            subprocess.Popen([sys.executable, '-c',",
        "                              'import os, time; os.setsid(); time.sleep(600)'])]",
        f"open({str(pid_file)!r}, 'w').write(' '.join(str(c.pid) for c in children))"))


def alive(pid):
    """Whether the process runs (one killed but not yet reaped by its parent does not)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] not in ("Z", "X")
    except FileNotFoundError:
        return False


@pytest.mark.skipif(not os.path.isdir("/proc"), reason="finds the processes through /proc")
@pytest.mark.slow  # exercises.py check waits out its time limit
def test_check_stops_an_endless_function_and_every_process_it_started(tmp_path):
    # q_update is wrong when the step goes on (its first test fails), and loops forever
    # after starting two processes when the step terminated (its second test)
    endless = ("    if terminated:\n" + spawn_lingering_children(tmp_path / "pids", " " * 8)
               + "        while True: pass\n"  # one line, so the stop lands on it at any moment
               + RIGHT_Q_UPDATE.replace(".max()", ".mean()"))
    path = student_copy(tmp_path / "endless", old=RIGHT_Q_UPDATE, new=endless)
    start = time.monotonic()
    code, out, err = run_exercises("check", path, "--no-train", "--test-time-limit", "3")
    assert code == 1 and err == ""
    loop = line_of(path, "        while True: pass")
    assert out == ("verdict: not yet: the tests were stopped after 3 s (--test-time-limit), "
                   f"at line {loop} of the file (in q_update): while True: pass\n")
    # stopped by the limit, not a minute later by check's last resort (the start of
    # pytest, slow on a busy machine, does not count)
    assert time.monotonic() - start < 3 + 45
    pids = [int(p) for p in (tmp_path / "pids").read_text().split()]
    assert len(pids) == 2 and not any(alive(pid) for pid in pids)


@pytest.mark.skipif(not os.path.isdir("/proc"), reason="finds the processes through /proc")
@pytest.mark.slow  # exercises.py check's training runs
def test_a_training_run_that_runs_past_its_limit_or_crashes_is_one_line(tmp_path):
    start_of_train = "    rng = random.Random(args.seed)  # exploration\n"
    endless = ("    if args.env_id == 'Taxi-v4':  # the check's run, not the tests'\n"
               + spawn_lingering_children(tmp_path / "pids", " " * 8)
               + "        while True:  # sleeping: the limit, not a busy core, is what is tested\n"
               + "            time.sleep(0.1)\n" + start_of_train)
    endless = student_copy(tmp_path / "endless", old=start_of_train, new=endless)
    # the tests' states are few, Taxi's 500
    crash = "    assert s < 100, 'the states of the tests are few'\n"
    crashes = student_copy(tmp_path / "crash", old=RIGHT_Q_UPDATE, new=RIGHT_Q_UPDATE + crash)
    code, out, err = run_exercises("check", endless, crashes, "--exercise", "qlearning.q_update",
                                   "--train-time-limit", "6")
    assert code == 1 and err == ""
    assert out.count("qlearning.q_update: 4 of 4 tests pass") == 2
    run = "--env-id Taxi-v4 --total-timesteps 200000 --stop-at-return 7 --seed 1 ..."
    assert (f"\ntraining: python {endless} {run}\nverdict: not yet: the tests pass, but the "
            "training run was stopped after 6 s (--train-time-limit)\n") in out
    assert (f"\ntraining: python {crashes} {run}\nverdict: not yet: the tests pass, but the "
            "training run failed: AssertionError: the states of the tests are few (line "
            f"{line_of(crashes, crash.rstrip())} of the file)\n") in out
    pids = [int(p) for p in (tmp_path / "pids").read_text().split()]
    assert len(pids) == 2 and not any(alive(pid) for pid in pids)


def test_a_file_that_does_not_parse_or_import_or_lacks_a_function_is_one_line(tmp_path):
    syntax = student_copy(tmp_path / "syntax", old=RIGHT_Q_UPDATE,
                          new="    target = r if terminated else (r +\n")
    assert run_exercises("check", syntax) == (
        1, f"verdict: not yet: line {line_of(syntax, '    target = r if terminated else (r +')}"
           ": syntax error: '(' was never closed\n", "")
    renamed = student_copy(tmp_path / "renamed", old="def q_update(", new="def q_updates(")
    assert run_exercises("check", renamed) == (
        1, "verdict: not yet: the file has no function q_update; keep the names and "
           "signatures of the blanked functions\n", "")
    missing = student_copy(tmp_path / "import", old="from dataclasses import dataclass\n",
                           new="from dataclasses import dataclass\nimport numpyy\n")
    assert run_exercises("check", missing, "--no-train") == (
        1, "verdict: not yet: the file does not import: ModuleNotFoundError: No module named "
           f"'numpyy', at line {line_of(missing, 'import numpyy')} of the file: import numpyy\n",
        "")


@pytest.mark.slow  # exercises.py check on several files, with their training runs
def test_checking_several_files_gives_a_grade_book_and_summary_keeps_a_row_per_file(
        tmp_path):
    wrong = student_copy(tmp_path / "ann", old=RIGHT_Q_UPDATE,
                         new=RIGHT_Q_UPDATE.replace(".max()", ".mean()"))
    right = student_copy(tmp_path / "bob")
    syntax = student_copy(tmp_path / "cy", old=RIGHT_Q_UPDATE, new="    target = (\n")
    grades = tmp_path / "grades.csv"
    code, out, err = run_exercises("check", wrong, right, syntax, "--no-train", "--summary",
                                   str(grades))
    assert code == 1 and err == ""
    both = "qlearning.q_update qlearning.discretize"
    rows = [  # ann's first failing test: 1 + 0.9 * max(2, 4) = 4.6 by hand, the mean gives 3.7
        [wrong, "qlearning.q_update", "failed", "1", "4",
         "3 of 4 tests fail; the first: test_q_update_bootstraps_from_the_best_next_action "
         f"(tests/test_qlearning.py, line {line_of(TEST_QLEARNING, FIRST_FAILING)}): expected "
         "4.6, obtained 3.7"],
        [right, both, "passed", "7", "7", ""],
        [syntax, both, "failed", "0", "7",
         f"line {line_of(syntax, '    target = (')}: syntax error: '(' was never closed"]]
    header = ["file", "exercises", "result", "tests_passed", "tests", "first_failing_case"]
    table = out[out.index("exercises.py: grade book of 3 files, 1 passed (CSV):\n"):]
    assert list(csv.reader(io.StringIO(table.split("\n", 1)[1]))) == [header, *rows]
    with open(grades) as f:
        assert list(csv.reader(f)) == [header, *rows]
    for path in (wrong, right, syntax):  # each file's report: its name, then a verdict last
        report = out[out.index(f"== {path}\n"):].split("\n\n")[0]
        assert report.split("\n")[-1].startswith("verdict: ")

    # cy hands in a fixed file: checking it again replaces its row
    student_copy(tmp_path / "cy")
    code, out, _ = run_exercises("check", syntax, "--no-train", "--summary", str(grades))
    assert code == 0 and "grade book" not in out, out  # one file: its report alone
    with open(grades) as f:
        assert list(csv.reader(f)) == [header, *rows[:2], [syntax, both, "passed", "7", "7", ""]]


def test_a_script_file_not_named_as_its_script_is_refused(tmp_path):
    # --script-file imports the copy under its file name: a copy of qlearning.py saved as
    # qlearning-plant.py would leave `import qlearning` on the repository's file and every
    # test would pass without testing the copy, so conftest stops at a usage error (exit 4)
    shutil.copy(os.path.join(ROOT, "qlearning.py"), tmp_path / "qlearning-plant.py")
    done = subprocess.run([sys.executable, "-m", "pytest", "-q", "-n", "0", "-p",
                           "no:cacheprovider", "tests/test_qlearning.py", "--collect-only",
                           "--script-file", str(tmp_path / "qlearning-plant.py")],
                          cwd=ROOT, capture_output=True, text=True)
    assert done.returncode == 4
    assert "not named as a script of the repository" in done.stdout + done.stderr


@pytest.mark.slow  # exercises.py check: a pytest of its own per file
def test_check_says_what_an_assert_checks_and_which_expected_values_the_test_computed(tmp_path):
    # rlhf.dpo_loss with its implicit rewards not detached: the assert on requires_grad
    # compares no values, so the report gives its message
    with open(os.path.join(ROOT, "rlhf.py")) as f:
        original = f.read()
    detached = "chosen.detach(), rejected.detach()"
    assert detached in original
    (tmp_path / "a").mkdir()
    (tmp_path / "a" / "rlhf.py").write_text(original.replace(detached, "chosen, rejected"))
    code, out, _ = run_exercises("check", str(tmp_path / "a" / "rlhf.py"), "--exercise",
                                 "rlhf.dpo_loss", "--no-train")
    assert code == 1 and "rlhf.dpo_loss: 1 of 2 tests pass" in out
    assert ("          what it checks: the two implicit rewards are returned detached: they are "
            "logged, not trained\n") in out
    # what the function returned shows the rewards attached to the graph
    assert ("and returned (tensor(0.201413, requires_grad=True), tensor([1.0], requires_grad=True), "
            "tensor([-0.5]))") in out  # the chosen's log-probabilities carry a gradient
    assert "verdict: not yet: 1 of 2 tests fail; the first: test_dpo_loss_is_log_2" in out
    assert out.rstrip().endswith(": the two implicit rewards are returned detached: they are "
                                 "logged, not trained")
    # pqn.q_lambda with lambda's two weights swapped: the by-hand tests' expected values are
    # worked out by hand, the agreement test's computed by its recursive reference (the
    # exercise's `computed`)
    with open(os.path.join(ROOT, "pqn.py")) as f:
        original = f.read()
    mix = "(1 - q_lambda) * next_q[t] + q_lambda * following"
    assert mix in original, "the line this test plants its bug in has changed"
    (tmp_path / "b").mkdir()
    (tmp_path / "b" / "pqn.py").write_text(original.replace(
        mix, "q_lambda * next_q[t] + (1 - q_lambda) * following"))
    code, out, _ = run_exercises("check", str(tmp_path / "b" / "pqn.py"), "--no-train")
    assert code == 1  # all three fail; the verdict names the first, with the values it compared
    assert ("verdict: not yet: 3 of 3 tests fail; the first: test_q_lambda_returns_by_hand "
            "(tests/test_pqn.py, line ") in out and "obtained [6.0, 9.875, 3.0, 24.0]" in out
    by_hand = out[out.index("FAIL  test_lambda_0_is_the_one_step"):]
    assert by_hand.index("(worked out by hand)") < by_hand.index("FAIL  test_q_lambda_returns_agree")
    agree = out[out.index("FAIL  test_q_lambda_returns_agree"):]
    assert ("(see the test's line: computed there, or by hand in the comments above it)" in agree
            and "worked out by hand)" not in agree)


def judged(tmp_path, monkeypatch, returns, window, exercise="ddpg_td3.target"):
    """What check says of a training run whose episodes.csv holds `returns` and whose goal's
    window is `window`: (the report, None), or (the report, the NotYet's text)."""
    folder = tmp_path / f"run{len(returns)}-{window}-{returns[-1] if returns else ''}"
    folder.mkdir()
    (folder / "episodes.csv").write_text("global_step,wall_time,episode_return,episode_length\n" +
                                         "".join(f"{i + 1},0.1,{r},1\n" for i, r in enumerate(returns)))
    monkeypatch.setattr(exercises, "training_run", lambda *a: (str(folder), {
        "solved_window": window, "global_steps": len(returns)}))
    e = exercises.find_exercise(exercise)
    shutil.copy(os.path.join(ROOT, f"{e.script}.py"), tmp_path)
    out = io.StringIO()
    monkeypatch.setattr(sys, "stdout", out)
    try:
        exercises.report_training(str(tmp_path / f"{e.script}.py"), [e], 60)
    except exercises.NotYet as reason:
        return out.getvalue(), str(reason)
    return out.getvalue(), None


def test_a_training_run_is_judged_on_the_window_its_stop_at_return_stops_on(tmp_path,
                                                                            monkeypatch):
    # ddpg_td3.py's goal on Pendulum-v1 is judged over 10 episodes, so --stop-at-return -250
    # stops the run once the last 10 returns average -250 or more. 25 episodes: 15 of -1,000,
    # then 10 of -200: the last 10 average -200 (reached), the last 20 (10 * -1000 + 10 * -200)
    # / 20 = -600 (not); the check judges the run on the window it stopped on, 10.
    e = exercises.find_exercise("ddpg_td3.target")
    assert e.measure == "train" and e.goal == -250
    returns = [-1000] * 15 + [-200] * 10
    out, failed = judged(tmp_path, monkeypatch, returns, 10)
    assert failed is None and "mean of the last 10 training returns -200.0" in out
    # a window of 20 (another script's goal) judges the same run on -600: not yet
    _, failed = judged(tmp_path, monkeypatch, returns, 20)
    assert failed == ("the tests pass, but the run on Pendulum-v1 did not reach -250 (mean of "
                      "the last 20 training returns: -600.0)")


def test_the_last_20_returns_can_pass_a_run_its_goals_window_would_not(tmp_path, monkeypatch):
    # window 10 (ddpg_td3.py on Pendulum-v1), goal -250: 10 returns of -200, then 10 of -300:
    # the last 10 average -300 (short), the last 20 (10 * -200 + 10 * -300) / 20 = -250, which
    # reaches the goal exactly (a mean equal to the goal passes)
    out, failed = judged(tmp_path, monkeypatch, [-200] * 10 + [-300] * 10, 10)
    assert failed is None and "mean of the last 20 training returns -250.0" in out
    # all 30 at -250: exactly the goal over either window: passes
    out, failed = judged(tmp_path, monkeypatch, [-250] * 30, 10)
    assert failed is None and "training returns -250.0" in out
    # window 100 (qlearning.py on MountainCar-v0), goal -160: 80 returns of -200, then 20 of
    # -150: the last 20 average -150 (passes), the last 100 (80 * -200 + 20 * -150) / 100 = -190
    out, failed = judged(tmp_path, monkeypatch, [-200] * 80 + [-150] * 20, 100,
                         "qlearning.discretize")
    assert failed is None and "mean of the last 20 training returns -150.0" in out


def test_a_run_with_fewer_episodes_than_the_window_is_judged_on_the_mean_of_those(tmp_path,
                                                                                  monkeypatch):
    # 5 episodes of -300 under a window of 20: their mean, (5 * -300) / 5 = -300, is short of
    # -250, not -1,500 / 20 = -75; and with none at all nothing is reached
    _, failed = judged(tmp_path, monkeypatch, [-300] * 5, 20)
    assert failed is not None and "(mean of the last 20 training returns: -300.0)" in failed
    _, failed = judged(tmp_path, monkeypatch, [], 20)
    assert failed is not None and "(mean of the last 20 training returns: None)" in failed


def test_a_failing_case_with_values_compared_names_them_before_the_asserts_message():
    # an assert that compares values and has a message (tests/test_mappo.py's `same`): the
    # verdict's one line gives the values, which say more than the message
    record = {"line": 7, "compared": {"expected": "1.0", "obtained": "2.0"},
              "message": "the gradient of the masked entries is 0", "calls": []}
    assert exercises.failing_case("test_x", record, "mappo") == (
        "test_x (tests/test_mappo.py, line 7): expected 1.0, obtained 2.0")
    assert exercises.failing_case("test_x", {**record, "compared": None}, "mappo") == (
        "test_x (tests/test_mappo.py, line 7): the gradient of the masked entries is 0")


def test_a_failure_inside_a_helper_of_the_test_file_points_at_the_helpers_line(tmp_path):
    # The report shows the innermost line of the test file that failed: an assert in a helper
    # the test calls (as tests/test_mappo.py's loss_spy), not the test's call of the helper.
    (tmp_path / "conftest.py").write_text(
        "def pytest_addoption(parser):\n"
        "    parser.addoption('--script-file', action='append', default=[])\n")
    (tmp_path / "pytest.ini").write_text("[pytest]\n")
    (tmp_path / "test_fake.py").write_text(
        "def helper(x):\n"
        "    assert x == 2, 'the helper checks x'\n"
        "\n"
        "\n"
        "def test_calls_the_helper():\n"
        "    helper(1)\n")
    report = tmp_path / "report.json"
    done = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p",
                           "exercises", "--exercise-report", str(report), "-c",
                           str(tmp_path / "pytest.ini"), str(tmp_path / "test_fake.py")],
                          capture_output=True, text=True, cwd=tmp_path,
                          env={**os.environ, "PYTHONPATH": ROOT,
                               "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1"})
    assert done.returncode == 1, done.stdout + done.stderr
    (record,) = json.loads(report.read_text()).values()
    assert record["line"] == 2 and record["statement"].startswith("assert x == 2")
    assert record["message"] == "the helper checks x"


def test_an_asserts_message_is_what_it_checks_on_one_line():
    # pytest writes an assert's own message before the line "assert ...": a message padded
    # with spaces or written over several lines (triple quotes) is shown stripped, on one
    # line; an assert without a message, or an error that is not an AssertionError, has none
    message = exercises.assert_message
    assert message(AssertionError("  rewards are detached \nassert False")) == "rewards are detached"
    assert message(AssertionError("\n    the table changes\n    in place\n    \nassert False")) == (
        "the table changes in place")
    assert message(AssertionError("assert 1 == 2\n +  where ...")) == ""
    assert message(ValueError("bad value")) == ""


def test_the_wrapper_keeps_the_last_calls_inputs_and_result_and_counts_the_calls():
    def add(a, b=2):
        return a + b
    call = {"count": 0}
    wrapped = exercises.recorded(add, call)
    assert wrapped(1) == 3 and wrapped(5, b=4) == 9
    assert call["count"] == 2 and call["inputs"] == [("a", "5"), ("b", "4")]
    assert call["returned"] == "9" and call["raised"] is None
    assert call["function"].endswith("add")  # its qualified name


def test_a_parametrized_test_of_an_exercise_is_wrapped_as_its_test_is(monkeypatch):
    # grpo.pass_at_k's tests are parametrized: pytest names a case test_pass_at_k_by_hand[...],
    # its original name test_pass_at_k_by_hand; the plugin wraps the exercise's function for it
    # (so that a failing case shows what the function was given) and restores it after.
    import types
    grpo = pytest.importorskip("grpo")
    original = grpo.pass_at_k
    item = types.SimpleNamespace(module=types.SimpleNamespace(__name__="test_grpo"),
                                 originalname="test_pass_at_k_by_hand",
                                 name="test_pass_at_k_by_hand[4-1-2-0.5]", path="tests/test_grpo.py")
    exercises.pytest_runtest_setup(item)
    try:
        assert grpo.pass_at_k is not original
        grpo.pass_at_k(4, 1, 2)
        (call,) = exercises.RECORDS["current"]["calls"]
        assert call["count"] == 1 and call["function"] == "pass_at_k"
    finally:
        exercises.pytest_runtest_teardown(item)
    assert grpo.pass_at_k is original


def test_the_hint_is_given_only_where_a_test_fails(monkeypatch):
    e = exercises.find_exercise("pqn.q_lambda")
    passed = {"passed": True}
    monkeypatch.setattr(exercises, "run_tests", lambda *a: {e.id: [(t, passed) for t in e.tests]})
    out = io.StringIO()
    monkeypatch.setattr(sys, "stdout", out)
    assert exercises.report_tests("pqn.py", "pqn", [e], 60) == (3, 3, None)
    assert "pqn.q_lambda: 3 of 3 tests pass" in out.getvalue() and "hint:" not in out.getvalue()


def test_a_parametrized_test_of_an_exercises_computed_is_not_labelled_by_hand(monkeypatch):
    # A failing case of a parametrized test (its name ends in [...]) is labelled as its test is:
    # pqn's agreement test computes its expected values, so its case [1] says where to look,
    # not "worked out by hand"; a by-hand test's case says "worked out by hand".
    e = exercises.find_exercise("pqn.q_lambda")
    record = {"passed": False, "line": 60, "statement": "assert a == b", "calls": [],
              "compared": {"expected": "1.0", "obtained": "2.0"}, "error": None, "message": "",
              "student_line": None}
    monkeypatch.setattr(exercises, "run_tests", lambda *a: {e.id: [
        ("test_q_lambda_returns_agree_with_the_recursive_definition[1]", record),
        ("test_q_lambda_returns_by_hand[1]", record)]})
    out = io.StringIO()
    monkeypatch.setattr(sys, "stdout", out)
    exercises.report_tests("pqn.py", "pqn", [e], 60)
    computed, by_hand = out.getvalue().split("FAIL  test_q_lambda_returns_by_hand[1]")
    assert "expected  1.0  (see the test's line: computed there" in computed
    assert "worked out by hand" not in computed and "expected  1.0  (worked out by hand)" in by_hand

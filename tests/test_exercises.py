"""exercises.py: every exercise blanks its function and nothing else, the blank copy fails
`check` with its hint while the original passes, and bad input is one line with exit 2."""
import ast
import glob
import os
import shutil
import subprocess
import sys

import pytest

import exercises
from conftest import ROOT

SCRIPTS = sorted({e.script for e in exercises.EXERCISES})
# each check run trains on the script's reference environment (README, benchmark.py)
EXPECTED_ENVS = {"qlearning": {"Taxi-v4", "MountainCar-v0"}, "dqn": {"CartPole-v1"},
                 "ddpg_td3": {"Pendulum-v1"}, "sac": {"Pendulum-v1"},
                 "ppo": {"CartPole-v1"}, "ppo_masked": {"Taxi-v4"},
                 "ppo_lstm": {"CartPole-v1"}, "ppo_rnd": {"MountainCar-v0"},
                 "es": {"CartPole-v1"}, "ppod": {"MountainCar-v0"},
                 "mappo": {"simple_spread_v3"}, "matd3": {"simple_spread_v3"}}


def exercises_of(script):
    return [e for e in exercises.EXERCISES if e.script == script]


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
    # plot.py is a tool; test_contract.py and test_device.py check rules every script keeps;
    # test_pixels.py tests ppo.py's and dqn.py's images, test_sparse_chain.py a benchmark task
    assert scripts - {"exercises", "plot", "contract", "device", "readme", "pixels",
                      "sparse_chain"} == set(SCRIPTS)


@pytest.mark.parametrize("exercise", exercises.EXERCISES, ids=lambda e: e.id)
def test_each_exercise_names_a_function_and_tests_that_exist(exercise):
    with open(os.path.join(ROOT, f"{exercise.script}.py")) as f:
        assert exercise.function in exercises.function_sources(f.read())
    with open(os.path.join(ROOT, "tests", f"test_{exercise.script}.py")) as f:
        tests = {n.name for n in ast.parse(f.read()).body if isinstance(n, ast.FunctionDef)}
    assert set(exercise.tests) <= tests
    assert exercise.run[0] == "--env-id" and exercise.run[1] in EXPECTED_ENVS[exercise.script]


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


@pytest.mark.parametrize("script", SCRIPTS)
def test_make_blanks_the_exercises_and_check_fails_them_but_passes_the_original(
        script, tmp_path, run_cli):
    ids = [e.id for e in exercises_of(script)]
    code, out, err = run_exercises("make", *ids, "--out", str(tmp_path / "blank"))
    assert code == 0, err
    copy = tmp_path / "blank" / f"{script}.py"
    with open(os.path.join(ROOT, f"{script}.py")) as f:
        original = f.read()
    blanked = copy.read_text()
    before, after = exercises.function_sources(original), exercises.function_sources(blanked)
    functions = {e.function for e in exercises_of(script)}
    assert before.keys() == after.keys()
    for name in before:  # every other function byte for byte
        assert (after[name] == before[name]) == (name not in functions)
    for e in exercises_of(script):
        node = exercises.function_nodes(ast.parse(blanked))[e.function]
        assert ast.get_docstring(node) == ast.get_docstring(
            exercises.function_nodes(ast.parse(original))[e.function])
        assert "raise NotImplementedError(" in after[e.function]
        assert f"exercise {e.id}: {e.hint}" in after[e.function]

    # The blank copy still imports and shows its flags.
    code, out, _ = run_cli(str(copy), ["--help"])
    assert code == 0 and "--env-id" in out

    # check on the blank copy and on a copy of the repository's own file, side by side (two
    # processes: the suite's slowest test otherwise)
    (tmp_path / "original").mkdir()
    shutil.copy(os.path.join(ROOT, f"{script}.py"), tmp_path / "original")
    on_blank = start_exercises("check", str(copy), "--no-train")
    on_original = start_exercises("check", str(tmp_path / "original" / f"{script}.py"),
                                  "--no-train")

    # check: every test of every blanked function fails, naming the blank function and its
    # exercise, and gives each exercise's hint once.
    code, out, err = finished(on_blank)
    assert code == 1 and err == ""
    for e in exercises_of(script):  # (a test may call another blank function first)
        assert f"{e.id}: 0 of {len(e.tests)} hand-computed tests pass" in out
        assert f"NotImplementedError: {e.function} is still blank (exercise {e.id})" in out
        assert out.count(f"  hint: {e.hint}\n") == 1
    assert "verdict: not yet" in out

    # The repository's own file passes the same tests.
    code, out, err = finished(on_original)
    assert code == 0, out + err
    for e in exercises_of(script):
        assert f"{e.id}: {len(e.tests)} of {len(e.tests)} hand-computed tests pass" in out
    assert "FAIL" not in out and "verdict: the hand-computed tests pass" in out


def test_check_reports_a_wrong_number_then_a_right_version_trains(tmp_path):
    with open(os.path.join(ROOT, "qlearning.py")) as f:
        original = f.read()
    right = "    target = r if terminated else r + gamma * q[s_next].max()\n"
    assert right in original
    wrong = tmp_path / "wrong" / "qlearning.py"  # bootstraps from the mean, not the max
    wrong.parent.mkdir()
    wrong.write_text(original.replace(right, right.replace(".max()", ".mean()")))
    code, out, _ = run_exercises("check", str(wrong))
    assert code == 1 and "qlearning.q_update: 1 of 4 hand-computed tests pass" in out
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
    assert "qlearning.discretize" not in out and "learning curve" in out
    assert "verdict: correct" in out
    assert glob.glob(str(tmp_path / "right" / "runs" / "*" / "learning_curve.png"))


def test_check_shows_tensors_compared_and_the_line_of_the_students_file_that_raised(tmp_path):
    with open(os.path.join(ROOT, "ppo.py")) as f:
        original = f.read()
    trace = "        running = deltas[t] + gamma * gae_lambda * not_done[t] * running\n"
    cat = "next_values[:-1], vs[1:]), next_values[-1:]])"
    assert trace in original and cat in original
    wrong = tmp_path / "ppo.py"  # the trace runs on across episode ends; a dimension lost
    wrong.write_text(original.replace(trace, trace.replace(" * not_done[t]", ""))
                     .replace(cat, cat.replace("[-1:]", "[-1]")))
    code, out, _ = run_exercises("check", str(wrong), "--no-train")
    assert code == 1 and "ppo.gae: 1 of 4 hand-computed tests pass" in out
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
    assert (f"at line {original[:original.index(cat)].count(chr(10)) + 1} of your file: "
            f"bootstrap = torch.cat([torch.where(done[:-1], {cat.replace('[-1:]', '[-1]')}"
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
    (["check", "no/such/ppo.py"], "no/such/ppo.py does not exist"),
    (["check", "BROKEN/ppo.py"], "BROKEN/ppo.py, line 3: syntax error"),
    (["check", "NAMED/student.py"], "the file name says which script it stands in for"),
    (["check", "NAMED/ppo.py", "--exercise", "dqn.targets"], "stands in for ppo.py"),
])
def test_bad_input_is_one_line_and_exit_status_2(argv, message, tmp_path):
    (tmp_path / "BROKEN").mkdir()
    (tmp_path / "BROKEN" / "ppo.py").write_text("import math\n\ndef f(:\n    pass\n")
    (tmp_path / "NAMED").mkdir()
    for name in ("student.py", "ppo.py"):
        shutil.copy(os.path.join(ROOT, "ppo.py"), tmp_path / "NAMED" / name)
    argv = [str(tmp_path / a) if a.startswith(("BROKEN", "NAMED")) else a for a in argv]
    message = message.replace("BROKEN", str(tmp_path / "BROKEN"))
    code, out, err = run_exercises(*argv)
    assert code == 2 and out == ""
    assert err.startswith("exercises.py: error: ") and err.count("\n") == 1 and message in err

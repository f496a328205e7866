"""Helpers shared by every script's tests: running a script's command line in-process and
checking the run folder that CONTRIBUTING.md ("What a run writes") describes."""
import copy
import csv
import glob
import importlib.machinery
import importlib.util
import io
import json
import os
import runpy
import signal
import subprocess
import sys
import types
from contextlib import redirect_stderr, redirect_stdout
from dataclasses import replace

import gymnasium as gym
import numpy as np
import pytest
import torch

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# Every script's --curve defaults to off in the suite (before any script is imported; the
# commands it starts inherit it): matplotlib's import and a figure cost about a second a run.
# The tests of curve.png turn it on with curve=True or --curve.
os.environ["PLAINRL_CURVE"] = "0"

# The copies of scripts given with --script-file, by module name ("ppo"): the tests import
# and run those instead of the repository's files (exercises.py check uses it).
SCRIPT_FILES = {}


def pytest_addoption(parser):
    parser.addoption("--script-file", action="append", default=[], metavar="PATH",
                     help="test this copy of a script instead of the repository's; its file "
                          "name says which (exercises/ppo.py stands in for ppo.py)")


def pytest_configure(config):
    """Import each --script-file under its script's module name before any test module
    imports it, so that `import ppo` in tests/test_ppo.py gets the copy."""
    for path in config.getoption("script_file"):
        path = os.path.abspath(path)
        name = os.path.splitext(os.path.basename(path))[0]
        if not os.path.exists(os.path.join(ROOT, f"{name}.py")) or not os.path.exists(path):
            # a copy named otherwise (ppo-plant1.py) would leave `import ppo` on the
            # repository's file, and every test would pass without testing the copy
            raise pytest.UsageError(f"--script-file {path}: no such file, or not named as a "
                                    "script of the repository (a copy of ppo.py is .../ppo.py)")
        spec = importlib.util.spec_from_file_location(name, path)
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        spec.loader.exec_module(module)
        SCRIPT_FILES[name] = path


@pytest.hookimpl(tryfirst=True)  # before xdist's own, which reads the groups marked here
def pytest_collection_modifyitems(config, items):
    """Run the tests that use Ray after all the others, and those that run es.py in this
    process just before them: es.py forks its worker processes, and a process forked while
    Ray's threads run in the parent could inherit a lock that one of them holds. The sort is
    stable: the rest keep their order. With pytest-xdist (`pytest -n 2 --dist loadgroup`,
    the README's command), both kinds go to one worker, in that order (xdist's group "ray"),
    so that two Rays never start at once on a small machine and no fork follows a Ray.
    Every test that starts or joins a Ray (starts_ray) is marked slow (pytest.ini): the
    parametrizations of a test of every script that run impala.py can be marked only here.
    Before pytest's own hook, which deselects by mark."""
    def order(item):
        if ("ray_session" in item.fixturenames or params_of(item).get("backend") == "ray"
                or runs(item, "impala") or item.path.name == "test_impala.py"):
            return 2  # uses Ray
        return 1 if runs(item, "es") or item.path.name == "test_es.py" else 0  # forks
    items.sort(key=order)
    for item in items:  # Ray's start and stop take some 6 s a module: the slow tier's
        if starts_ray(item):
            item.add_marker(pytest.mark.slow)
    if config.pluginmanager.hasplugin("xdist"):
        for item in items:
            if order(item):
                item.add_marker(pytest.mark.xdist_group("ray"))


def starts_ray(item):
    """Whether a test starts or joins a Ray in this process: it uses ray_session, runs es.py's
    Ray backend or, as a test of every script, runs impala.py (which joins ray_session)."""
    return ("ray_session" in item.fixturenames or params_of(item).get("backend") == "ray"
            or runs(item, "impala"))


@pytest.fixture(scope="module")
def ray_session():
    """One local Ray for all of a module's Ray tests: impala.py and es.py join it rather than
    starting their own (Ray's start and stop take seconds a run). 2 CPUs, no dashboard, the
    workers' output not copied here; stopped at the module's end (the Ray tests run last).
    Address "local", as start_ray's: a Ray of the module's own. Address None would join
    whatever Ray this machine runs (the one /tmp/ray/ray_current_cluster names, as
    test_cluster.py's Cluster writes it, another checkout's included, or RAY_ADDRESS's),
    where num_cpus is refused ("When connecting to an existing cluster, num_cpus and
    num_gpus must not be provided") and the tests would run on another's workers."""
    ray = pytest.importorskip("ray", reason="impala.py and es.py's Ray backend need Ray: "
                                            "pip install ray==2.60.0")
    os.environ.setdefault("RAY_worker_niceness", "0")  # as start_ray: Ray's 15 starves them
    ray.init(address="local", num_cpus=2, include_dashboard=False, log_to_driver=False,
             logging_level="ERROR", ignore_reinit_error=True)
    yield ray
    ray.shutdown()


@pytest.fixture(autouse=True)
def impala_joins_the_modules_ray(request):
    """A test of every script run on impala.py in this process (test_plumbing.py's and the
    like, parametrized with script or run) joins the module's Ray (ray_session), started
    before the test's body, so that a test's stand-in for os.kill (which Ray's start-up
    calls) never meets Ray's start-up."""
    if runs(request.node, "impala"):
        request.getfixturevalue("ray_session")


def params_of(item):
    """A test's parameters, {} where it has none."""
    callspec = getattr(item, "callspec", None)
    return callspec.params if callspec is not None else {}


RUNS_THE_SCRIPTS = {"test_plumbing.py", "test_tensorboard.py", "test_device.py"}
"""the modules whose tests of every script run it in this process (test_site.py's and
test_exercises.py's read its text)"""


def runs(item, script):
    """Whether a test of every script runs this one ("impala") in this process: its module
    is one of RUNS_THE_SCRIPTS and its script parameter (impala.py or impala) or its run
    parameter (test_device.py's row) names it."""
    return item.path.name in RUNS_THE_SCRIPTS and any(
        str(params_of(item).get(key, "")).startswith(script) for key in ("script", "run"))


def spy_on(monkeypatch, owner, name, record, calls=None):
    """Replace owner.name by a function that calls record(*args, **kwargs) and then the
    original; returns the list record's results are kept in (calls, where given)."""
    calls, original = [] if calls is None else calls, getattr(owner, name)

    def spy(*args, **kwargs):
        calls.append(record(*args, **kwargs))
        return original(*args, **kwargs)

    monkeypatch.setattr(owner, name, spy)
    return calls


class Payload:
    """A pickled object that, loaded by a full unpickler, makes the folder it names: what an
    untrusted checkpoint could do with any call."""

    def __init__(self, folder):
        self.folder = folder

    def __reduce__(self):
        return os.makedirs, (self.folder,)


def check_a_warm_start_is_read_as_tensors_only(main, args_with, tmp_path):
    """--warm-start reads another run's file, never its code: a file whose pickle calls a
    function (os.makedirs, here) is refused by torch's weights-only reader before the call.
    args_with(folder, warm_start=path) -> the script's tiny Args."""
    path, made = str(tmp_path / "warm_start.pt"), tmp_path / "the payload ran"
    torch.save({"policy": {}, "extra": Payload(str(made))}, path)
    with pytest.raises(Exception, match="[Ww]eights only load failed"):
        main(args_with(tmp_path / "run", warm_start=path))
    assert not made.exists()


class Clock:
    """Stands in for a script's `time` module, which the scripts use for time() alone: it
    starts at 1e9 s and moves `tick` seconds at each reading, tick growing by `growth` after
    each (tick 0.001 and growth 0.001: n ms at the n-th reading, an uneven speed); tick 0: it
    stands still but for the test, which moves `now`."""
    def __init__(self, tick, growth=0.0):
        self.now, self.tick, self.growth = 1e9, tick, growth

    def time(self):
        self.now += self.tick
        self.tick += self.growth
        return self.now


def set_clock(module, monkeypatch, tick=1.0, growth=0.0):
    """A Clock in place of module's `time` (at tick 1, a progress line at every second
    reading); returns it."""
    clock = Clock(tick, growth)
    monkeypatch.setattr(module, "time", clock)
    return clock


def spy_on_progress_lines(module, monkeypatch):
    """The (global_step, mean of the last 20 returns) of each progress line module prints."""
    return spy_on(monkeypatch, module, "progress_line",
                  lambda global_step, total, sps, recent: (global_step, recent))


def detached(**kwargs):
    """The keyword arguments of a call, tensors detached and copied (a spy_on record)."""
    return {k: v.detach().clone() if torch.is_tensor(v) else v for k, v in kwargs.items()}


def spy_on_weights(monkeypatch, module):
    """Spy on module.train. Returns moved(): after the run, for each network train was given
    (its nn.Module arguments, in order), the names of its state (weights, biases, buffers)
    that the run left as they were, and those it changed: a pair of lists."""
    given = spy_on(monkeypatch, module, "train", lambda *a, **k: [
        (net, copy.deepcopy(net.state_dict())) for net in (*a, *k.values())
        if isinstance(net, torch.nn.Module)])

    def moved():
        (nets,) = given
        changed = [{name: not torch.equal(value, net.state_dict()[name])
                    for name, value in before.items()} for net, before in nets]
        return [([n for n, c in names.items() if not c], [n for n, c in names.items() if c])
                for names in changed]
    return moved


def spy_on_seeds(monkeypatch, module):
    """Spy on module.seed_and_device and on every vector environment's reset: returns the
    seeds that each was given, two lists (a reset without a seed gives None)."""
    seeds = spy_on(monkeypatch, module, "seed_and_device", lambda seed, *rest, **kw: seed)
    resets = spy_on(monkeypatch, gym.vector.SyncVectorEnv, "reset",
                    lambda self, seed=None, options=None: seed)
    return seeds, resets


def fill_with_constants(*nets_and_values):
    """Every parameter of each network set to its constant (net, value pairs), so that a sum
    tells the networks apart: n weights of 2 sum to 2n."""
    for net, value in nets_and_values:
        for p in net.parameters():
            torch.nn.init.constant_(p, value)


def saved_sums(path, keys):
    """A checkpoint loaded as a stranger would (weights_only) and, for each key, the sum of
    every tensor of the state dict saved under it: (the checkpoint, {key: sum})."""
    state = torch.load(path, weights_only=True)
    return state, {key: sum(t.sum().item() for t in state[key].values()) for key in keys}


class TenTimesObs(torch.nn.Module):
    """vpg.py's and trpo.py's critic by hand: V(s) = 10 * s, with one parameter that its
    gradient never moves (the value optimizer needs one)."""
    def __init__(self):
        super().__init__()
        self.unused = torch.nn.Parameter(torch.zeros(1))

    def forward(self, obs):
        return 10 * obs[..., :1] + 0 * self.unused


class LearnedTenTimesObs(torch.nn.Module):
    """vpg.py's and trpo.py's critic by hand that learns: V(s) = w * s, w starting at 10 (a
    gradient moves w)."""
    def __init__(self):
        super().__init__()
        self.w = torch.nn.Parameter(torch.tensor(10.0))

    def forward(self, obs):
        return self.w * obs[..., :1]


def copies(net):
    """Copies of a network's parameters, for moved_since after some steps."""
    return [p.detach().clone() for p in net.parameters()]


def moved_since(before, net):
    """"all", "none" or "some": how many of net's parameters differ from their copies before."""
    changed = {not torch.equal(old, p) for old, p in zip(before, net.parameters())}
    return "all" if changed == {True} else "none" if changed == {False} else "some"


def spy_on_adam(monkeypatch):
    """Replace torch.optim.Adam by one that keeps the list of parameters each optimizer is
    given; returns the list of those lists, in the order the optimizers were made."""
    optimized, adam = [], torch.optim.Adam

    class SpiedAdam(adam):
        def __init__(self, params, **kwargs):
            optimized.append(list(params))
            super().__init__(optimized[-1], **kwargs)

    monkeypatch.setattr(torch.optim, "Adam", SpiedAdam)
    return optimized


def spy_on_stepped_gradient_norms(monkeypatch):
    """Spy on torch.optim.Adam.step (and RAdam's, pqn.py's): returns the list of the gradient
    norms that each step found, the norm of every gradient of the optimizer's parameters taken
    together (after clip_grad_norm_ at --max-grad-norm m, at most m; clipped after the step,
    the raw one)."""
    def norm(self, *args, **kwargs):
        return torch.cat([p.grad.flatten() for group in self.param_groups
                          for p in group["params"] if p.grad is not None]).norm().item()
    stepped = spy_on(monkeypatch, torch.optim.Adam, "step", norm)
    return spy_on(monkeypatch, torch.optim.RAdam, "step", norm, calls=stepped)


def script_path(script):
    """The file that runs for "ppo.py": the --script-file copy if one was given."""
    return SCRIPT_FILES.get(os.path.splitext(script)[0], os.path.join(ROOT, script))


SUMMARY_KEYS = {"algorithm", "env_id", "seed", "global_steps", "wall_time_s",
                "train_return_last20", "eval_return_mean", "eval_return_std", "eval_episodes",
                "solved_threshold", "solved_window", "holds_on", "goal_budget", "start_return",
                "end_return", "holds", "solved_at_step", "interrupted"}


# The flags every script has (CONTRIBUTING.md, "Flags every script has"); torch scripts add --cuda/--no-cuda.
COMMON_FLAGS = ("--env-id", "--seed", "--total-timesteps", "--output-dir", "--exp-name",
                "--eval-episodes", "--eval-every", "--stop-at-return", "--save-model",
                "--eval-checkpoint", "--capture-video")


def approx(expected):
    """Equality up to float32 rounding."""
    return pytest.approx(expected, abs=1e-6)


def tensor(*values):
    """A float32 tensor of the values, for examples worked out by hand."""
    return torch.tensor(values, dtype=torch.float32)


class CountingEnv(gym.Env):
    """A test environment whose observation counts the steps of its episode (0, 1, 2, ...)
    and whose reward is 1 a step. It terminates at step `terminate_at`, or when the action
    taken is `terminate_on` (None: never); registered with a time limit, it is truncated
    instead. Tests make variants by overriding these class attributes and the spaces."""
    observation_space = gym.spaces.Box(0.0, 1e6, (1,))
    action_space = gym.spaces.Discrete(2)
    terminate_at = None
    terminate_on = None

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.t = 0
        return np.array([0.0], dtype=np.float32), {}

    def step(self, action):
        self.t += 1
        terminated = self.t == self.terminate_at or (
            self.terminate_on is not None and action == self.terminate_on)
        return np.array([self.t], dtype=np.float32), 1.0, bool(terminated), False, {}


class BitsEnv(CountingEnv):
    """A MultiBinary action space, which most scripts refuse."""
    action_space = gym.spaces.MultiBinary(3)


# Cut by a time limit after 3 steps: the third step of every episode is truncated.
gym.register("CountToThree-v0", entry_point=CountingEnv, max_episode_steps=3)
gym.register("SpinTheBits-v0", entry_point=BitsEnv)


@pytest.fixture
def fresh_env_module():
    """Unload tests/my_envs.py and forget the ids it registers, so that a script given
    `--env-id my_envs:GridWorld-v0` can only find the id by importing the module itself.
    Yields the module's name."""
    def forget():  # every id the module registered, so that its next import warns of none
        sys.modules.pop("my_envs", None)
        for env_id in [i for i, spec in gym.registry.items()
                       if getattr(spec.entry_point, "__module__", None) == "my_envs"]:
            gym.registry.pop(env_id)
    forget()
    yield "my_envs"
    forget()


def video_names(output_dir):
    """The file names of the videos that the one run under output_dir recorded, sorted."""
    paths = glob.glob(os.path.join(output_dir, "*", "videos", "*.mp4"))
    return sorted(os.path.basename(p) for p in paths)


def unreadable_checkpoints(folder):
    """The checkpoints every script must refuse before reading a network: a path with no
    file ("missing"), a file that is not a checkpoint ("corrupt") and a run folder trained
    without --save-model ("no model")."""
    corrupt = os.path.join(folder, "corrupt.pt")
    with open(corrupt, "wb") as f:
        f.write(b"this is not a checkpoint")
    no_model = os.path.join(folder, "a-run-folder")
    os.makedirs(no_model, exist_ok=True)
    return {"missing": os.path.join(folder, "missing.pt"), "corrupt": corrupt,
            "no model": no_model}


def run_folder_env(env_id):
    """The environment id as it appears in a run folder's name: "/" and ":" (namespaces and
    `module:EnvId`) become "-"."""
    return env_id.replace("/", "-").replace(":", "-")


def read_csv(path):
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


def sigint_as_in_a_terminal():
    """preexec_fn of a command that a test stops as Ctrl-C would: SIGINT at its default, as in
    a terminal's foreground job. (A suite run from a shell's background job inherits SIGINT
    ignored, and a Python started so never raises KeyboardInterrupt.)"""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def start_in_a_terminal(args, **kwargs):
    """Popen of a command as a terminal runs its foreground job, for a test that stops it with
    ctrl_c: a process group of its own, SIGINT at its default, its output kept, and
    faulthandler on (PYTHONFAULTHANDLER), so that ctrl_c can show where a Python was that
    outlived its SIGINT."""
    return subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True, preexec_fn=sigint_as_in_a_terminal,
                            env={**os.environ, "PYTHONFAULTHANDLER": "1"}, **kwargs)


def ctrl_c(command, timeout=60):
    """SIGINT to every process of a command from start_in_a_terminal, as Ctrl-C in a terminal
    sends it; then its (stdout, stderr). A command still running `timeout` s later fails the
    test with what each of its processes was: ps's line, then SIGABRT, on which faulthandler
    writes every Python's stacks to the stderr shown."""
    os.killpg(command.pid, signal.SIGINT)
    try:
        return command.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        ps = subprocess.run(["ps", "-o", "pid,ppid,stat,etime,args", "-g", str(command.pid)],
                            capture_output=True, text=True).stdout
        os.killpg(command.pid, signal.SIGABRT)
        try:
            err = command.communicate(timeout=30)[1]
        except subprocess.TimeoutExpired:
            os.killpg(command.pid, signal.SIGKILL)
            err = command.communicate()[1]
        pytest.fail(f"still running {timeout} s after SIGINT:\n{ps}\nits stderr, ending with "
                    f"the stacks on SIGABRT:\n{err[-6000:]}")


def interrupt_on_call(n, original=None):
    """A stand-in for a method that raises KeyboardInterrupt (Ctrl-C) on its n-th call and
    otherwise calls the original (if given): monkeypatch it over, say, Adam.step."""
    calls = []

    def method(self, *args):
        calls.append(1)
        if len(calls) == n:
            raise KeyboardInterrupt
        return original(self, *args) if original else None
    return method


def episode_rows(output_dir):
    """The rows of the one episodes.csv under output_dir, without the wall_time column,
    which is all that two runs with the same seed must share (CONTRIBUTING.md, "Determinism")."""
    (path,) = glob.glob(os.path.join(output_dir, "*", "episodes.csv"))
    return [(r["global_step"], r["episode_return"], r["episode_length"]) for r in read_csv(path)]


def same_seed_episodes(train, tmp_path):
    """Run train(output_dir) twice: the two episodes.csv files must be the same apart from
    the wall_time column (CONTRIBUTING.md, "Determinism"). Returns the rows, for more checks."""
    rows = []
    for folder in ("a", "b"):
        train(str(tmp_path / folder))
        rows.append(episode_rows(tmp_path / folder))
    assert rows[0] == rows[1]
    return rows[0]


def check_evaluations(main, args, tmp_path, expected_steps, best_file="best_model.pt"):
    """The --eval-every contract (CONTRIBUTING.md, "What a run writes") for main(args), where
    args has eval_every > 0 and save_model:
    - evaluations.csv has its four columns and a row at each of expected_steps, which the
      caller counts by hand;
    - the same run without --eval-every writes the same episodes.csv and ends with a policy
      that evaluates the same: evaluating touched no training environment, statistic or
      random stream;
    - best_file, evaluated with --eval-checkpoint (on the same evaluation episodes), scores the
      best row's mean, and that row is not the last one (the caller picks such a run), so it
      is the model of the best row and not the final one.
    Returns the rows of evaluations.csv."""
    summary = main(replace(args, output_dir=str(tmp_path / "with")))
    (path,) = glob.glob(os.path.join(tmp_path, "with", "*"))
    rows = read_csv(os.path.join(path, "evaluations.csv"))
    assert list(rows[0]) == ["global_step", "wall_time", "eval_return_mean", "eval_return_std"]
    assert [int(r["global_step"]) for r in rows] == expected_steps
    means = [float(r["eval_return_mean"]) for r in rows]
    assert all(np.isfinite(means)) and all(float(r["eval_return_std"]) >= 0 for r in rows)

    without = main(replace(args, eval_every=0, output_dir=str(tmp_path / "without")))
    assert not glob.glob(os.path.join(tmp_path, "without", "*", "evaluations.csv"))
    assert episode_rows(tmp_path / "with") == episode_rows(tmp_path / "without")
    assert summary["eval_return_mean"] == without["eval_return_mean"]

    best = int(np.argmax(means))
    assert means[best] > means[-1], f"pick a run whose best evaluation is not its last: {means}"
    scored = main(replace(args, eval_every=0, eval_checkpoint=os.path.join(path, best_file),
                          output_dir=str(tmp_path / "best")))
    assert scored["eval_return_mean"] == pytest.approx(means[best])
    return rows


@pytest.fixture
def run_cli():
    """run_cli("ppo.py", [flags]) runs the script as `python ppo.py flags` would, in this
    process (fast: torch is imported once), and returns (exit status, stdout, stderr)."""
    def run(script, argv):
        old_argv = sys.argv
        sys.argv = [script, *argv]
        out, err = io.StringIO(), io.StringIO()
        code = 0
        try:
            with redirect_stdout(out), redirect_stderr(err):
                runpy.run_path(script_path(script), run_name="__main__")
        except SystemExit as e:
            code = e.code if isinstance(e.code, int) else 1
        finally:
            sys.argv = old_argv
        return code, out.getvalue(), err.getvalue()
    return run


@pytest.fixture
def check_usage_error(run_cli, tmp_path):
    """check_usage_error("ppo.py", argv, message): the command stops before training (no run
    folder) with exit status 2 and one line on stderr, `ppo.py: error: ...`, holding message."""
    def check(script, argv, message):
        output_dir = tmp_path / "runs-of-bad-input"
        code, out, err = run_cli(script, [*argv, "--output-dir", str(output_dir)])
        assert code == 2
        assert err.startswith(f"{script}: error: ") and err.count("\n") == 1 and message in err
        assert not output_dir.exists()
    return check


@pytest.fixture
def check_help(run_cli):
    """check_help("ppo.py", flags, texts): --help exits 0 and lists the common flags, the
    script's own flags and texts from their docstrings."""
    def check(script, flags=(), texts=()):
        code, out, _ = run_cli(script, ["--help"])
        assert code == 0
        for expected in (*COMMON_FLAGS, *flags, *texts):
            assert expected in out
        return out
    return check


def check_import_is_quiet(modules, tmp_path, also=""):
    """Importing the scripts (a module's name or a list of them), one after another in one
    fresh interpreter, prints nothing and writes nothing: after each import the interpreter
    prints the module's name and the files of its working folder, so that a line out of
    place names the import before it. `also` is a statement run after the imports (say, an
    assert about sys.modules)."""
    modules = [modules] if isinstance(modules, str) else modules
    program = ("import os, sys\nfor name in sys.argv[1:]:\n    __import__(name)\n"
               "    print(name, os.listdir(), flush=True)\n" + also)
    # each script's folder (a --script-file copy's, else the repository's, which comes last)
    folders = sorted(dict.fromkeys(os.path.dirname(script_path(f"{m}.py")) for m in modules),
                     key=lambda folder: folder == ROOT)
    result = subprocess.run([sys.executable, "-c", program, *modules], cwd=tmp_path,
                            capture_output=True, text=True,
                            env={**os.environ, "PYTHONPATH": os.pathsep.join(folders)})
    assert result.returncode == 0, result.stderr
    assert result.stdout == "".join(f"{m} []\n" for m in modules)
    assert list(tmp_path.iterdir()) == []


@pytest.fixture
def check_run_folder():
    """check_run_folder(summary, output_dir) checks every file a training run writes and
    returns (path, episodes rows, updates rows)."""
    def check(summary, output_dir, algorithm, model=False):
        folders = os.listdir(output_dir)
        assert len(folders) == 1
        path = os.path.join(output_dir, folders[0])
        env_id, exp_name, seed, unix_time = folders[0].split("__")
        assert env_id == run_folder_env(summary["env_id"]) and seed == str(summary["seed"])
        assert unix_time.isdigit()

        with open(os.path.join(path, "config.json")) as f:
            config = json.load(f)
        assert config["env_id"] == summary["env_id"] and config["exp_name"] == exp_name
        assert {"torch", "gymnasium", "numpy"} <= set(config["versions"]) and "device" in config
        if not config["eval_every"]:  # evaluations.csv and best_model.pt come with --eval-every
            assert not {"evaluations.csv", "best_model.pt"} & set(os.listdir(path))

        episodes = read_csv(os.path.join(path, "episodes.csv"))
        assert episodes and list(episodes[0]) == ["global_step", "wall_time", "episode_return",
                                                  "episode_length"]
        steps = [int(e["global_step"]) for e in episodes]
        assert steps == sorted(steps) and steps[-1] <= summary["global_steps"]
        updates = read_csv(os.path.join(path, "updates.csv"))
        assert updates and list(updates[0])[:3] == ["global_step", "wall_time", "sps"]

        assert not glob.glob(os.path.join(path, "*.png"))  # the curve is plot.py's to draw
        with open(os.path.join(path, "summary.json")) as f:
            written = json.load(f)
        assert set(written) == SUMMARY_KEYS and written == summary
        assert summary["algorithm"] == algorithm and summary["interrupted"] is False
        if model:
            state = torch.load(os.path.join(path, "model.pt"), weights_only=True)
            assert state["args"]["env_id"] == summary["env_id"]
        else:
            assert not os.path.exists(os.path.join(path, "model.pt"))
        return path, episodes, updates
    return check


class Relay:
    """A 2-agent PettingZoo parallel environment whose agents finish apart (mappo.py's and
    matd3.py's tests): "short" terminates after the first step of each episode while "long"
    goes on and is truncated after the third (`limit`). Their observations, [k] and [k, k]
    after step k, differ in size, as do their action counts (2 and 3); "long" is told by
    info["action_mask"] that its action 0 is not allowed. The state after step k is
    [k, 10k]; rewards are 1 for short and 2 for long. `sent` keeps every step's actions."""
    possible_agents = ["short", "long"]
    state_space = gym.spaces.Box(-np.inf, np.inf, (2,))
    sent = []  # the action dicts of every step
    limit = 3  # long is truncated after this many steps
    long_mask = np.array([0, 1, 1])

    def observation_space(self, agent):
        return gym.spaces.Box(-np.inf, np.inf, (1 if agent == "short" else 2,))

    def action_space(self, agent):
        return gym.spaces.Discrete(2 if agent == "short" else 3)

    def observe(self):
        obs = {a: np.full(self.observation_space(a).shape, self.k, np.float32) for a in self.agents}
        return obs, {a: {"action_mask": self.long_mask} if a == "long" else {} for a in self.agents}

    def reset(self, seed=None, options=None):
        self.k, self.agents = 0, list(self.possible_agents)
        return self.observe()

    def step(self, actions):
        Relay.sent.append(actions)
        self.k += 1
        obs, infos = self.observe()
        rewards = {a: 1.0 if a == "short" else 2.0 for a in self.agents}
        terminated = {a: a == "short" and self.k == 1 for a in self.agents}
        truncated = {a: a == "long" and self.k == self.limit for a in self.agents}
        self.agents = [a for a in self.agents if not (terminated[a] or truncated[a])]
        return obs, rewards, terminated, truncated, infos

    def state(self):
        return np.array([self.k, 10 * self.k], np.float32)

    def close(self):
        pass


class SameSizeRelay(Relay):
    """Relay whose two agents both see [k, k] after step k: no slot's width tells them apart."""

    def observation_space(self, agent):
        return gym.spaces.Box(-np.inf, np.inf, (2,))


class TerminatingRelay(Relay):
    """Relay whose long also terminates at its third step, the step its time limit truncates it."""

    def step(self, actions):
        obs, rewards, terminated, truncated, infos = super().step(actions)
        terminated = {a: terminated[a] or truncated[a] for a in terminated}
        return obs, rewards, terminated, truncated, infos


# ---------------------------------------------------------------------------------------
# Continuous-action test environments and replay transitions, for the tests of the
# replay-buffer scripts (ddpg_td3.py, sac.py)
# ---------------------------------------------------------------------------------------
class BoxCountingEnv(CountingEnv):
    """CountingEnv with one continuous action in [-1, 1]."""
    action_space = gym.spaces.Box(-1.0, 1.0, (1,))


class BoxTerminatingEnv(BoxCountingEnv):
    terminate_at = 3


class UnboundedBoxEnv(BoxCountingEnv):
    action_space = gym.spaces.Box(-np.inf, np.inf, (1,))


class BoxImageEnv(BoxCountingEnv):
    observation_space = gym.spaces.Box(0.0, 1.0, (2, 2))


class Float64BoxEnv(BoxCountingEnv):
    """BoxCountingEnv whose observations are float64, as MuJoCo's are."""
    observation_space = gym.spaces.Box(0.0, 1e6, (1,), dtype=np.float64)

    def reset(self, *, seed=None, options=None):
        obs, info = super().reset(seed=seed, options=options)
        return obs.astype(np.float64), info

    def step(self, action):
        obs, *rest = super().step(action)
        return (obs.astype(np.float64), *rest)


class NoDisplayEnv(BoxCountingEnv):
    """Renders as MuJoCo does on a machine without a display."""
    metadata = {"render_modes": ["rgb_array"]}

    def __init__(self, render_mode=None):
        self.render_mode = render_mode

    def render(self):
        raise RuntimeError("no OpenGL context\nsecond line")


gym.register("BoxCountToThree-v0", entry_point=BoxCountingEnv, max_episode_steps=3)
gym.register("Float64Box-v0", entry_point=Float64BoxEnv, max_episode_steps=3)
gym.register("BoxTerminateAtThree-v0", entry_point=BoxTerminatingEnv)
gym.register("UnboundedCount-v0", entry_point=UnboundedBoxEnv)
gym.register("BoxImage-v0", entry_point=BoxImageEnv)
gym.register("NoDisplay-v0", entry_point=NoDisplayEnv)
gym.register("ShortPendulum-v1", entry_point="gymnasium.envs.classic_control.pendulum:PendulumEnv",
             max_episode_steps=20)


def replay_transitions(first, n):
    """n transitions for a replay buffer, numbered from `first`, each field saying which one
    it is: obs [i, i], action i/10, reward i, terminated i % 2, next_obs [i + 0.5, i + 0.5]."""
    i = np.arange(first, first + n, dtype=np.float32)
    return (np.stack([i, i], 1), (i / 10)[:, None], i, (i % 2).astype(bool),
            np.stack([i + 0.5, i + 0.5], 1))


def check_the_actor_acts_on_float64_observations_as_float32(script, method, monkeypatch,
                                                           tmp_path, **flags):
    """MuJoCo's observations are float64 and an actor's weights float32: the loop casts the
    first observation and every next one (on Float64Box-v0, steps 0-1 are random and steps
    2-3 the actor's, on the observations steps 1 and 2 returned; each update reads the
    buffer's float32 rows). script.Actor.<method> records the dtype of what it is given."""
    dtypes = spy_on(monkeypatch, script.Actor, method, lambda self, obs: obs.dtype)
    script.main(script.Args(env_id="Float64Box-v0", total_timesteps=4, learning_starts=2,
                            batch_size=2, hidden_size=8, eval_episodes=0,
                            output_dir=str(tmp_path), **flags))
    assert len(dtypes) >= 2 and set(dtypes) == {torch.float32}


def check_a_batch_of_the_written_rows(buffer):
    """A replay buffer (ddpg_td3.py's, sac.py's, crossq.py's) of 5 rows holding
    replay_transitions(0, 3): rows 3 and 4 are still zeros (s' = 0 with r = 0, where
    transition 0 has s' = 0.5), and a batch is drawn from the 3 written rows alone, not from
    the whole capacity of 5."""
    torch.manual_seed(0)
    _, _, rewards, _, next_obs = buffer.sample(64)
    assert set(rewards.tolist()) == {0.0, 1.0, 2.0}
    assert torch.equal(next_obs[:, 1], rewards + 0.5)


def check_a_batch_of_whole_transitions_2_to_6(buffer):
    """A batch of 64 from a buffer that holds replay_transitions 2-6 (obs dimension 2, one
    action): every field of a row comes from the same transition, and all five come."""
    obs, actions, rewards, terminated, next_obs = buffer.sample(64)
    assert obs.shape == (64, 2) and actions.shape == (64, 1) and next_obs.shape == (64, 2)
    assert rewards.shape == (64,) and terminated.shape == (64,)
    i = rewards  # every field of a row belongs to the same transition
    assert torch.equal(obs[:, 0], i) and torch.allclose(actions[:, 0], i / 10)
    assert torch.equal(terminated, i % 2) and torch.equal(next_obs[:, 1], i + 0.5)
    assert set(i.tolist()) == {2.0, 3.0, 4.0, 5.0, 6.0}


def check_the_ring_of_field_tensors(module):
    """A replay buffer of one tensor per field (sac.py's, crossq.py's) of 5 rows: 3
    transitions are rows 0-2 and a batch comes from them alone; 4 more fill rows 3, 4 and
    overwrite rows 0, 1; a batch of 64 holds whole transitions of the newest five."""
    torch.manual_seed(0)
    buffer = module.ReplayBuffer(5, obs_dim=2, action_dim=1, device="cpu")
    buffer.add(*replay_transitions(0, 3))
    assert (buffer.pos, buffer.size) == (3, 3)
    check_a_batch_of_the_written_rows(buffer)
    buffer.add(*replay_transitions(3, 4))  # 3, 4 fill rows 3, 4; 5, 6 overwrite rows 0, 1
    assert (buffer.pos, buffer.size) == (2, 5) and buffer.obs.shape == (5, 2)
    assert buffer.rewards.tolist() == [5, 6, 2, 3, 4]  # the newest five
    check_a_batch_of_whole_transitions_2_to_6(buffer)


def check_replay_evaluations(module, tmp_path):
    """check_evaluations for ddpg_td3.py and sac.py on one tiny run: my_envs:Slider-v0, 3
    environments, 600 steps, learning from step 60. The 3 environments step global_step by 3
    (3, 6, ..., 600), so the rows are where it crosses a multiple of 100: at 102 (34 * 3,
    past 100), 201, 300, 402, 501 and 600. Seed 4's best evaluation is not its last one."""
    args = module.Args(env_id="my_envs:Slider-v0", total_timesteps=600, num_envs=3,
                       learning_starts=60, batch_size=16, hidden_size=8, eval_every=100,
                       eval_episodes=3, save_model=True, seed=4)
    check_evaluations(module.main, args, tmp_path, [102, 201, 300, 402, 501, 600])


def check_episode_ends(module, target_name, monkeypatch, args, terminated,
                       update_owner=None, batch_obs=lambda agent, obs, *rest: obs):
    """Run module.main(args) on BoxCountToThree-v0 (truncated, terminated=False) or
    BoxTerminateAtThree-v0 (terminated=True), 2 environments, 12 steps, learning from step 6,
    with spies on what the replay buffer stores and on the critic target of every update
    (module.<target_name>), and check both. The update is `update_owner.update` (default
    module.Agent's method); batch_obs(*its arguments) picks the batch's observations.
    Returns the summary."""
    stored, targets = [], []
    owner = module.Agent if update_owner is None else update_owner
    add, update, target = module.ReplayBuffer.add, owner.update, getattr(module, target_name)

    def spy_add(self, obs, actions, rewards, term, next_obs):
        stored.extend(zip(obs[:, 0], term, next_obs[:, 0]))
        return add(self, obs, actions, rewards, term, next_obs)

    def spy_update(*a):
        targets.append([batch_obs(*a)[:, 0]])
        return update(*a)

    def spy_target(*a, **k):
        targets[-1].append(target(*a, **k))
        return targets[-1][-1]

    monkeypatch.setattr(module.ReplayBuffer, "add", spy_add)
    monkeypatch.setattr(owner, "update", spy_update)
    monkeypatch.setattr(module, target_name, spy_target)
    summary = module.main(args)
    # Each environment sees 0, 1, 2, then the episode ends and the next one starts at 0.
    # The step from 2 stores s' = 3, the true last observation, not the next episode's 0;
    # it is marked terminated only where the episode really terminated.
    assert stored == [(0, False, 1), (0, False, 1), (1, False, 2), (1, False, 2),
                      (2, terminated, 3), (2, terminated, 3)] * 2
    # In the updates (at steps 6, 8, 10, 12) the target of that last step is the reward 1
    # alone where it terminated, and bootstraps, y != 1, where the time limit cut it; every
    # other step bootstraps.
    last = torch.cat([obs for obs, _ in targets]) == 2
    bootstrapped = (torch.cat([y for _, y in targets]) - 1).abs() > 1e-6
    assert len(targets) == 4 and last.any() and (~last).any()
    assert torch.equal(bootstrapped, ~last if terminated else torch.ones_like(last))
    return summary


class ActionLogEnv(BoxCountingEnv):
    """BoxCountingEnv with one action in [0, 4], which keeps every action it is given in
    `received` (read it with received_actions(); spy_on_acting empties it)."""
    action_space = gym.spaces.Box(0.0, 4.0, (1,))
    received = []

    def step(self, action):
        type(self).received.append(float(action[0]))
        return super().step(action)


gym.register("BoxZeroToFour-v0", entry_point=ActionLogEnv, max_episode_steps=3)


def received_actions():
    """The actions BoxZeroToFour-v0's environments were given: the list of the class that
    gym's registry holds, which gym.make builds. (A tool that imports this file twice, as
    mutmut does, registers a second ActionLogEnv; the name imported may be the other one.)"""
    return gym.spec("BoxZeroToFour-v0").entry_point.received


def spy_on_acting(module, monkeypatch):
    """For a glue test of how ddpg_td3.py or sac.py act on BoxZeroToFour-v0 (one environment,
    observations 0, 1, 2 in each episode of 3 steps): empties received_actions() and spies
    on module.ReplayBuffer.add. Returns the list of (s, a) pairs the buffer stores."""
    received_actions().clear()
    stored, add = [], module.ReplayBuffer.add

    def spy(self, obs, actions, rewards, terminated, next_obs):
        stored.extend(zip(np.asarray(obs)[:, 0].tolist(), np.asarray(actions)[:, 0].tolist()))
        return add(self, obs, actions, rewards, terminated, next_obs)

    monkeypatch.setattr(module.ReplayBuffer, "add", spy)
    return stored


def check_the_evaluation_takes_the_policys_mode(module, agent, continuous, monkeypatch):
    """The greedy evaluation of an on-policy script (the plumbing's evaluate(args, models)
    through the script's greedy_policy) sends the policy's mode, never a sample. The agent's actor is
    fixed: logits [0, 1], whose samples are action 1 with probability e / (1 + e) = 0.731
    and 0 otherwise where the mode is always 1; or a Gaussian of mean 2.5 and std exp(0) = 1
    on BoxZeroToFour-v0 (actions in [0, 4]), whose samples are never exactly 2.5. 10 episodes
    of 3 steps: 30 actions, all the mode (30 samples would all be 1 with probability
    0.731^30 = 8e-5)."""
    class Fixed(torch.nn.Module):
        def forward(self, obs):
            return torch.tensor([[2.5]] if continuous else [[0.0, 1.0]]).expand(len(obs), -1)

    agent.actor = Fixed()
    given = spy_on(monkeypatch, module, "to_env_action",
                   lambda agent, actions, space: actions.tolist())
    torch.manual_seed(0)
    args = module.Args(env_id="BoxZeroToFour-v0" if continuous else "CountToThree-v0",
                       eval_episodes=10)
    returns = module.evaluate(args, {"agent": agent,
                                     "obs_rms": module.ObsNormalizer((1,), enabled=False)})
    assert returns.tolist() == [3.0] * 10
    assert given == [[[2.5]] * 10 if continuous else [1] * 10] * 3


def rows_after_numbered_updates(module, tmp_path):
    """updates.csv's rows of a run whose updates the test has replaced by a stand-in that
    reports numbers made of n, the update's count: one environment of BoxCountToThree-v0,
    11 steps, learning from step 4 (updates 1..8), a row every 2 steps and one after the
    last step, although 11 - 10 < 2: at 4 (update 1), 6 (2, 3), 8 (4, 5), 10 (6, 7) and
    11 (8). The means of n: 1, (2 + 3) / 2 = 2.5, 4.5, 6.5, 8."""
    module.main(module.Args(env_id="BoxCountToThree-v0", total_timesteps=11, learning_starts=4,
                            batch_size=2, hidden_size=8, log_interval=2, eval_episodes=0,
                            output_dir=str(tmp_path)))
    return read_csv(next(tmp_path.glob("*/updates.csv")))


def check_the_rows_of_numbered_agent_updates(module, tmp_path, monkeypatch):
    """sac.py's and crossq.py's updates.csv, each row the mean of the updates since the row
    before. Agent.update stands in with numbers that say which update n made them:
    critic1_loss n, critic2_loss 2n, q1_mean -n, alpha 0.5, and on every 3rd update an actor
    step with actor_loss 10n and entropy -n. Rows at 4, 6, 8, 10 and 11
    (rows_after_numbered_updates): critic1 1, (2 + 3) / 2 = 2.5, 4.5, 6.5, 8; critic2 twice
    those; actor NaN (none), 30 (update 3), NaN, 60 (update 6), NaN. (Means since the start
    would give critic1 1, (1 + 2 + 3) / 3 = 2, 3, 4, 4.5.)"""
    calls = []

    def losses(self, obs, actions, rewards, terminated, next_obs):
        calls.append(len(rewards))
        n = len(calls)
        return {"critic1_loss": n, "critic2_loss": 2 * n, "q1_mean": -n, "alpha": 0.5,
                **({"actor_loss": 10 * n, "entropy": -n} if n % 3 == 0 else {})}

    monkeypatch.setattr(module.Agent, "update", losses)
    rows = rows_after_numbered_updates(module, tmp_path)
    assert calls == [2] * 8  # --batch-size 2
    assert [(r["global_step"], r["critic1_loss"], r["critic2_loss"], r["q1_mean"],
             r["actor_loss"], r["entropy"], r["alpha"]) for r in rows] == [
        ("4", "1.0", "2.0", "-1.0", "nan", "nan", "0.5"),
        ("6", "2.5", "5.0", "-2.5", "30.0", "-3.0", "0.5"),
        ("8", "4.5", "9.0", "-4.5", "nan", "nan", "0.5"),
        ("10", "6.5", "13.0", "-6.5", "60.0", "-6.0", "0.5"),
        ("11", "8.0", "16.0", "-8.0", "nan", "nan", "0.5")]


def check_the_random_actions_fill_minus_one_to_one(module, tmp_path, monkeypatch, **flags):
    """ddpg_td3.py's, sac.py's and crossq.py's warm-up on BoxZeroToFour-v0: 61 steps, the first 60
    before --learning-starts 60, a ~ U[-1, 1] each. A quarter of [-1, 1] lies above 0.5 and a
    quarter below -0.5; 60 uniform draws miss one of them with probability 2 * 0.75^60 = 6e-8
    (and the seed fixes the draws), while U[0, 1] / 2 - 1 stays in [-1, -0.5], U[0, 1] * 2 + 1
    in [1, 3] and U[0, 1] * 2 - 2 in [-2, 0]."""
    stored = spy_on_acting(module, monkeypatch)
    module.main(module.Args(env_id="BoxZeroToFour-v0", total_timesteps=61, learning_starts=60,
                            batch_size=4, hidden_size=8, eval_episodes=0,
                            output_dir=str(tmp_path), **flags))
    actions = [a for _, a in stored[:60]]
    assert len(actions) == 60 and all(-1 <= a <= 1 for a in actions)
    assert min(actions) < -0.5 and max(actions) > 0.5


def check_norm_obs_on_count_to_three(module, gae_method, tmp_path, monkeypatch):
    """vpg.py's and trpo.py's --norm-obs, read where the buffer computes its advantages
    (module.RolloutBuffer.gae_method). CountToThree-v0, 2 environments, 4 steps: both see 0,
    1, 2, (cut; final obs 3) 0. The statistics take in the reset's 0s and each step's next
    observations, 1, 2, 0, 1, and are used at once: s_t is normalized by the statistics that
    include it.
      s_0 = 0 with {0, 0}: mean 0, var ~0: (0 - 0) / ~0 -> 0
      s_1 = 1 with {0, 0, 1, 1}: mean 0.5, var 0.25: (1 - 0.5) / 0.5 = 1
      s_2 = 2 with {0, 0, 1, 1, 2, 2}: mean 1, var 2/3: 1 / sqrt(2/3) = 1.224745
      s_3 = 0 with {.., 0, 0}: mean 0.75, var 10/8 - 0.75^2 = 0.6875:
            -0.75 / 0.829156 = -0.904534
    The final observation 3 of the cut episode is normalized by the statistics of s_2,
    without being added to them: (3 - 1) / sqrt(2/3) = 2.449490. After the batch, with the
    last 1s: 10 observations, 0, 1, 2, 0, 1 twice: mean 0.8, var 6 / 5 - 0.64 = 0.56."""
    seen = spy_on(monkeypatch, module.RolloutBuffer, gae_method,
                  lambda self, *a, **k: (self.obs.clone(), self.final_obs.clone()))
    module.main(module.Args(env_id="CountToThree-v0", total_timesteps=8, num_envs=2, num_steps=4,
                            vf_minibatches=2, norm_obs=True, save_model=True, eval_episodes=0,
                            output_dir=str(tmp_path)))
    (obs, final_obs), = seen
    assert obs[:, :, 0].tolist() == [pytest.approx([x, x], abs=1e-4)
                                     for x in (0.0, 1.0, 1.224745, -0.904534)]
    assert final_obs[2, :, 0].tolist() == pytest.approx([2.449490] * 2, abs=1e-4)
    stats = torch.load(next(tmp_path.glob("*/model.pt")), weights_only=True)["obs_rms"]
    assert stats["count"].item() == pytest.approx(10, abs=1e-3)
    assert stats["mean"].tolist() == pytest.approx([0.8], abs=1e-4)
    assert stats["var"].tolist() == pytest.approx([0.56], abs=1e-4)


def check_gaussian_actions_clipped_for_the_environment_only(module, gae_method, tmp_path,
                                                           monkeypatch):
    """vpg.py and trpo.py on BoxZeroToFour-v0, which takes actions in [0, 4] and keeps those
    it receives. The first Gaussian has mean ~0 and std 1, so about half of its samples are
    below 0: the environment receives them clipped to 0, the buffer keeps them as sampled
    (their log-probabilities are the ones the gradient pushes)."""
    received_actions().clear()
    stored = spy_on(monkeypatch, module.RolloutBuffer, gae_method,
                    lambda self, *a, **k: self.actions[:, 0, 0].clone())
    module.main(module.Args(env_id="BoxZeroToFour-v0", total_timesteps=16, num_envs=1,
                            num_steps=16, vf_minibatches=2, eval_episodes=0,
                            output_dir=str(tmp_path)))
    (actions,) = stored
    assert (actions < 0).any() and (actions > 0).any()
    assert received_actions() == pytest.approx(actions.clamp(0, 4).tolist())


def check_evaluation_normalizes_with_the_frozen_statistics(module):
    """vpg.py's, trpo.py's and ppo.py's evaluate on CountToThree-v0 with statistics mean 1,
    var 4 (std 2): the greedy actor sees 0, 1, 2 as -0.5, 0, 0.5, and the statistics stay as
    they were."""
    seen = []

    class Recorder(torch.nn.Module):  # always action 0, noting the observation it is given
        def forward(self, obs):
            seen.append(obs[0, 0].item())
            return torch.tensor([[1.0, 0.0]])

    agent = module.Agent((1,), 2, continuous=False)
    agent.actor = Recorder()
    normalizer = module.ObsNormalizer((1,), enabled=True)
    normalizer.rms.mean, normalizer.rms.var = np.array([1.0]), np.array([4.0])
    returns = module.evaluate(module.Args(env_id="CountToThree-v0", eval_episodes=1),
                              {"agent": agent, "obs_rms": normalizer})
    assert returns.tolist() == [3.0] and seen == pytest.approx([-0.5, 0.0, 0.5], abs=1e-6)
    assert normalizer.rms.mean.tolist() == [1.0] and normalizer.rms.var.tolist() == [4.0]


def check_every_evaluation_reads_the_running_statistics_and_leaves_them_alone(
        module, tmp_path, monkeypatch, expected=None, **flags):
    """--norm-obs on CountToThree-v0, 2 environments, 4 steps, --eval-every 4, and flags (the
    script's value minibatches: vpg.py's and trpo.py's --vf-minibatches 2): evaluations at
    global steps 4 and 8 and the final one. Each is given the training statistics as they
    stand (enabled) and must not update them. The loop adds each step's observations after
    that step's evaluation (Gymnasium's RunningMeanStd; its prior count of 1e-4 moves these
    by less than 1e-3):
      step 4: the reset's 0, 0 and step 2's 1, 1:  mean 0.5,  var 0.25,                  count 4
      step 8: then 2, 2 and (the cut episode's next) 0, 0:
                                                   mean 0.75, var 10/8 - 0.75^2 = 0.6875, count 8
      final: then 1, 1:                            mean 0.8,  var 12/10 - 0.8^2 = 0.56,   count 10
    (the final observation 3 of the cut episode is never added). expected: (enabled, mean,
    var, count) at each evaluation where a script's loop adds the step's observations before
    its evaluation (ppod.py)."""
    def stats(normalizer):
        rms = normalizer.rms
        return (normalizer.enabled, *rms.mean.tolist(), *rms.var.tolist(), float(rms.count))

    seen, evaluate = [], module.evaluate

    def spy(args, models, *rest, **kwargs):
        before = stats(models["obs_rms"])
        returns = evaluate(args, models, *rest, **kwargs)
        seen.append((before, stats(models["obs_rms"])))
        return returns

    monkeypatch.setattr(module, "evaluate", spy)
    module.main(module.Args(env_id="CountToThree-v0", norm_obs=True, total_timesteps=8,
                            num_envs=2, num_steps=4, eval_every=4, eval_episodes=1,
                            output_dir=str(tmp_path), **flags))
    expected = expected or [(True, 0.5, 0.25, 4), (True, 0.75, 0.6875, 8), (True, 0.8, 0.56, 10)]
    assert [before for before, _ in seen] == [pytest.approx(e, abs=1e-3) for e in expected]
    assert all(before == after for before, after in seen)


# ---------------------------------------------------------------------------------------
# Flags that name, track, skip or bound an off-policy run (the tests of sac.py,
# ddpg_td3.py, dqn.py and crossq.py; vpg.py's and trpo.py's take the first two with
# ONE_ROLLOUT_OF_SIX, ppo.py's and ppo_masked.py's with a rollout of 2 * 3 steps of their own)
# ---------------------------------------------------------------------------------------
# The flags of a 6-step run: a replay-buffer script learns from step 3 on minibatches of 2;
# vpg.py and trpo.py collect one rollout of 2 environments * 3 steps, value minibatches of 3
SIX_REPLAYED_STEPS = dict(learning_starts=3, batch_size=2)
ONE_ROLLOUT_OF_SIX = dict(num_envs=2, num_steps=3, vf_minibatches=2)


def fake_wandb(monkeypatch):
    """A stand-in for the wandb package (not a requirement) in sys.modules, where the
    script's `import wandb` finds it. Returns one dict of what it saw: init's keywords
    ("init"), the summary its run was given ("summary") and finish's "exit_code"."""
    seen = {"summary": {}}
    wandb = types.ModuleType("wandb")
    wandb.__spec__ = importlib.machinery.ModuleSpec("wandb", None)  # check_args' find_spec
    wandb.errors = types.SimpleNamespace(Error=RuntimeError)
    wandb.init = lambda **kwargs: seen.update(init=kwargs)
    wandb.run = types.SimpleNamespace(summary=seen["summary"])
    wandb.finish = lambda exit_code: seen.update(exit_code=exit_code)
    monkeypatch.setitem(sys.modules, "wandb", wandb)
    return seen


def check_named_and_tracked(module, tmp_path, monkeypatch, env_id="BoxZeroToFour-v0",
                            tiny=SIX_REPLAYED_STEPS, width=8):
    """module.main on env_id (dqn.py: a Discrete one, CountToThree-v0) for 6 steps with
    --exp-name sweep-a, --seed 7 and --track to project plainrl-tests of entity team-a (the
    defaults: the script's name, 1, no tracking, plainrl, None): the run folder,
    summary.json and the Weights & Biases run (fake_wandb) say so.
    width: the networks' --hidden-size (None for qlearning.py's table, which has none, and
    es.py's --hidden-sizes, left at their default)."""
    seen = fake_wandb(monkeypatch)
    summary = module.main(module.Args(
        env_id=env_id, total_timesteps=6, **tiny,
        **({} if width is None else {"hidden_size": width}), eval_episodes=0,
        exp_name="sweep-a", seed=7, track=True, wandb_project_name="plainrl-tests",
        wandb_entity="team-a", output_dir=str(tmp_path)))
    # <env id>__<exp name>__<seed>__<unix time>; summary.json's algorithm is the name
    (path,) = tmp_path.iterdir()
    folder_env, exp_name, seed, unix_time = path.name.split("__")
    assert (folder_env, exp_name, seed) == (env_id, "sweep-a", "7") and unix_time.isdigit()
    assert summary["seed"] == 7 and summary["algorithm"] == "sweep-a"
    # The W&B run: in the project and entity given, named as the folder, the flags as its
    # configuration; ended (exit code 0) with summary.json's values, 6 steps among them
    init = seen["init"]
    assert (init["project"], init["entity"], init["name"]) == ("plainrl-tests", "team-a",
                                                               path.name)
    assert init["config"]["exp_name"] == "sweep-a" and init["sync_tensorboard"] is True
    assert seen["summary"] == summary and summary["global_steps"] == 6
    assert seen["exit_code"] == 0


def check_an_evaluation_trains_nothing(module, tmp_path, capsys,
                                       env_id="my_envs:ThreeStepsBox-v0", tiny=SIX_REPLAYED_STEPS,
                                       **evaluation):
    """--eval-checkpoint (default None: train) reaches check_args, the network's size, the run
    folder's summary and its budget line. env_id, my_envs:ThreeStepsBox-v0 (dqn.py: the
    Discrete my_envs:ThreeSteps-v0), pays 1 a step for 3 steps and has a reward_threshold of
    3: a model 8 wide trained on it for 6 steps, then evaluated (1 episode) with no
    --hidden-size (the default: 64 in sac.py and ddpg_td3.py, 128 in dqn.py, 256 in crossq.py),
    --total-timesteps 101 and --num-envs 2, whose whole steps, 100, are fewer than
    --learning-starts' default (500 in sac.py, 1,000 in ddpg_td3.py and dqn.py's vector
    preset, 5,000 in crossq.py). (With --num-envs 3, dqn.py refuses the evaluation: its
    preset's --buffer-size 50,000 does not divide by 3, though an evaluation has no buffer.)
    vpg.py and trpo.py (tiny=ONE_ROLLOUT_OF_SIX): 100 is less than one rollout of 2
    environments * the default 256 steps, which their check_args refuses for training.
    evaluation: flags of the evaluation's own (impala.py: --rollouts-per-batch 2, a batch of
    2 * 2 * 32 = 128 steps, more than 101, which its check_args refuses for training)."""
    trained = module.main(module.Args(env_id=env_id, hidden_size=8, total_timesteps=6,
                                      **tiny, save_model=True,
                                      eval_episodes=0, output_dir=str(tmp_path / "train")))
    (folder,) = (tmp_path / "train").iterdir()
    capsys.readouterr()
    evaluated = module.main(module.Args(env_id=env_id, eval_checkpoint=str(folder),
                                        total_timesteps=101, num_envs=2, eval_episodes=1,
                                        output_dir=str(tmp_path / "eval"), **evaluation))
    out = capsys.readouterr().out
    # Not refused for its 100 steps, nor told it trains 100 of 101; no threshold to reach
    # (training had the environment's 3); the episode returns 3 steps of 1 (an 8-wide model
    # restored into a network of the default width would not load: bad input, exit 2)
    assert "training runs" not in out
    assert trained["solved_threshold"] == 3.0 and evaluated["solved_threshold"] is None
    assert "solved_at_step" not in out  # the closing line names no threshold
    assert evaluated["global_steps"] == 0 and evaluated["eval_return_mean"] == 3.0
    (evaluation,) = (tmp_path / "eval").iterdir()
    config = json.loads((evaluation / "config.json").read_text())
    assert config["hidden_size"] == 8  # the model's width, not the flag's default


def check_the_logged_returns(module, tmp_path, monkeypatch, **flags):
    """module.main (ppo.py, dqn.py; flags: the script's own) on my_envs:EpisodeNumber-v0 at
    --seed 0: 2 environments for 24 vector steps (48 global steps), --eval-every 24 with 2
    episodes. Whatever the actions, environment 0 (seed 0, even) ends an episode at every
    step, its t-th paying t; environment 1 (seed 1, odd) one every 3 steps, its j-th paying
    j a step, 3j at vector step t = 3j. So every episode that ends at vector step t (global
    step 2t) returns t, in 1 step or 3: episodes.csv is (2, 1, 1), (4, 2, 1), (6, 3, 1),
    (6, 3, 3), (8, 4, 1), ... (48, 24, 1), (48, 24, 3), 24 + 8 = 32 episodes (the lengths of
    environment 0 for both would be 1, 1; the return summed over both, 6 at step 6).
    - The mean of the last 20: the first 12 episodes (steps 1-9) sum 1 + 2 + 3 + 3 + 4 + 5 +
      6 + 6 + 7 + 8 + 9 + 9 = 63 of all 300 + 108 = 408, so (408 - 63) / 20 = 17.25 in
      summary.json (the mean of all 32: 12.75); the first mean of 20, at the 20th episode,
      step 15's second (global 30), is (120 + 45) / 20 = 8.25.
    - Each evaluation (evaluations.csv's rows at 24 and 48, the final one) plays seeds
      100,000 (1 step paying 1) and 100,001 (3 steps paying 1): [1, 3], mean 2, std 1
      (np.std; with ddof 1 it would be 1.41).
    - With a reward_threshold of 8.25 given to the id, that first mean reaches it: summary.json's
      solved_at_step 30 (the run goes on: its last step would be 48).
    - updates.csv (the flags make rows at 24 and 48, after the rollout or the steps they
      follow): sps = global_step / wall_time (the steps per second since the start; the
      budget of 48 over the first row's time would be twice as many at step 24)."""
    importlib.import_module("my_envs")  # registers the id anew after fresh_env_module's tests
    monkeypatch.setattr(gym.registry["EpisodeNumber-v0"], "reward_threshold", 8.25)
    summary = module.main(module.Args(env_id="my_envs:EpisodeNumber-v0", seed=0, num_envs=2,
                                      total_timesteps=48, eval_every=24, eval_episodes=2,
                                      output_dir=str(tmp_path), **flags))
    (path,) = tmp_path.glob("*")
    expected = [(2 * t, t, length) for t in range(1, 25) for length in (1, 3)[:1 + (t % 3 == 0)]]
    episodes = read_csv(path / "episodes.csv")
    assert [(int(e["global_step"]), float(e["episode_return"]), int(e["episode_length"]))
            for e in episodes] == expected
    assert summary["train_return_last20"] == 17.25
    assert (summary["solved_threshold"], summary["solved_at_step"]) == (8.25, 30)
    assert [(int(r["global_step"]), float(r["eval_return_mean"]), float(r["eval_return_std"]))
            for r in read_csv(path / "evaluations.csv")] == [(24, 2.0, 1.0), (48, 2.0, 1.0)]
    assert (summary["eval_return_mean"], summary["eval_return_std"]) == (2.0, 1.0)
    assert summary["eval_episodes"] == 2  # --eval-episodes, not the default 10
    updates = read_csv(path / "updates.csv")
    assert [int(u["global_step"]) for u in updates] == [24, 48]
    times = [float(u["wall_time"]) for u in updates]
    # wall_time_s, rounded to 1 ms, can come within a millisecond of the last row
    assert 0 < times[0] and times == sorted(times) and times[-1] <= summary["wall_time_s"] + 5e-4
    for u in updates:  # sps rounded down, from the wall_time before its rounding to 0.1 ms
        rate = int(u["global_step"]) / float(u["wall_time"])
        assert rate * (1 - 1e-2) - 1 < int(u["sps"]) <= rate * (1 + 1e-2)


def check_the_episode_rows_the_last_20_and_the_times(module, tmp_path, monkeypatch):
    """my_envs:Slider-v0 (reward -|x|, a random start, cut at 20 steps) in 2 environments for
    480 steps, learning from step 40, a row of updates.csv every 100 steps: 240 vector steps,
    so each environment ends 12 episodes, both at global steps 40, 80, ..., 480, 24 in all.
    A spy on the vector environment sums each environment's rewards itself. Then
    - episodes.csv holds (global step, that sum, 20) for each episode, environment 0's first
      (not the step's last reward, nor the other environment's return: the two differ);
    - summary.json's train_return_last20 is the mean of the last 20 of the 24 (not of all
      24);
    - the progress line at step g shows the mean of the last 20 returns of the episodes that
      ended before g (the loop calls run.step before it writes the step's episodes), None
      before the first; lines after step 440 see 22 (not the mean of all 22);
    - the run's clock is the test's: elapsed() reads global_steps / 100 + 2 s (2 s of
      start-up, then 100 steps a second; the Clock of set_clock prints the progress line every other
      vector step). episodes.csv's wall_time is step / 100 + 2: 2.4, 2.4, 2.8, ..., 6.8;
      updates.csv's rows at 100, 200, 300, 400 and 480 (the end) have wall_time 3, 4, 5, 6,
      6.8 and sps = int(global_step / wall_time) = int(33.3), 50, 60, int(66.7), int(70.6)
      = 33, 50, 60, 66, 70 (the speed since the row before: 33, 100, 100, 100, 100);
      summary.json's wall_time_s is 480 / 100 + 2 = 6.8."""
    sums, rows, calls, step = np.zeros(2), [], [], gym.vector.SyncVectorEnv.step

    def spy_step(self, actions):
        out = step(self, actions)
        calls.append(1)
        sums[:] += out[1]
        for i in np.flatnonzero(out[2] | out[3]):  # (global step, return) of each that ended
            rows.append((2 * len(calls), float(sums[i])))
            sums[i] = 0.0
        return out

    monkeypatch.setattr(gym.vector.SyncVectorEnv, "step", spy_step)
    set_clock(module, monkeypatch)
    monkeypatch.setattr(module.Run, "elapsed",
                        lambda self: self.summary["global_steps"] / 100 + 2)
    lines = spy_on(monkeypatch, module, "progress_line",
                   lambda global_step, total, sps, recent: (global_step, recent))
    summary = module.main(module.Args(env_id="my_envs:Slider-v0", total_timesteps=480,
                                      num_envs=2, learning_starts=40, batch_size=16,
                                      hidden_size=8, log_interval=100, eval_episodes=0,
                                      output_dir=str(tmp_path)))
    path = next(tmp_path.glob("*"))
    episodes, updates = read_csv(path / "episodes.csv"), read_csv(path / "updates.csv")
    steps, returns = [s for s, _ in rows], [r for _, r in rows]
    assert steps == [40 * k for k in range(1, 13) for _ in range(2)]
    assert all(returns[i] != returns[i + 1] for i in range(0, 24, 2))
    assert [(int(e["global_step"]), int(e["episode_length"])) for e in episodes] == [
        (s, 20) for s in steps]
    assert [float(e["episode_return"]) for e in episodes] == pytest.approx(returns, rel=1e-9)
    last20, all24 = np.mean(returns[-20:]), np.mean(returns)
    assert summary["train_return_last20"] == pytest.approx(last20, rel=1e-9)
    assert last20 != pytest.approx(all24, rel=1e-6)
    ended_before = [[r for s, r in zip(steps, returns) if s < g] for g, _ in lines]
    assert [recent for _, recent in lines] == [
        pytest.approx(np.mean(before[-20:]), rel=1e-9) if before else None
        for before in ended_before]
    assert max(len(before) for before in ended_before) == 22
    assert [float(e["wall_time"]) for e in episodes] == approx([s / 100 + 2 for s in steps])
    assert [(int(u["global_step"]), float(u["wall_time"]), int(u["sps"])) for u in updates] == [
        (100, 3.0, 33), (200, 4.0, 50), (300, 5.0, 60), (400, 6.0, 66), (480, 6.8, 70)]
    assert summary["wall_time_s"] == 6.8


def check_the_evaluation_rows(module, tmp_path, monkeypatch):
    """my_envs:EpisodeNumberBox-v0 at --seed 0 pays each step the number of its episode,
    whatever the actions: environment 0 (seed 0, even) plays episodes of 1 step, environment 1
    (seed 1, odd) of 3. 12 steps of 2 environments, learning from step 4:
    - training: environment 0's t-th episode ends at global step 2t returning t, environment
      1's first at 6 returning 3 * 1 = 3, its second at 12 returning 3 * 2 = 6; episodes.csv
      (step, return, length): (2, 1, 1), (4, 2, 1), (6, 3, 1), (6, 3, 3), (8, 4, 1),
      (10, 5, 1), (12, 6, 1), (12, 6, 3); train_return_last20 the mean of all 8,
      (1 + 2 + 3 + 3 + 4 + 5 + 6 + 6) / 8 = 30 / 8 = 3.75;
    - --eval-every 4: rows at 4, 8 and 12, each of 2 episodes from seeds 100,000 (1 step,
      paying 1) and 100,001 (3 steps paying 1: 3), whatever the policy: mean (1 + 3) / 2 = 2,
      std sqrt(((1 - 2)^2 + (3 - 2)^2) / 2) = 1 (NumPy's population std; the sample's, with
      n - 1, would be sqrt(2) = 1.414); the final evaluation after training scores the same,
      summary.json's mean 2 and std 1;
    - under set_clock's Clock each evaluation row's wall_time is whole seconds, after those of the
      episodes that ended before its step and before those that end at it (the loop
      evaluates at the step, then writes the step's episodes)."""
    set_clock(module, monkeypatch)
    summary = module.main(module.Args(env_id="my_envs:EpisodeNumberBox-v0", seed=0,
                                      total_timesteps=12, num_envs=2, learning_starts=4,
                                      batch_size=4, hidden_size=8, eval_every=4,
                                      eval_episodes=2, output_dir=str(tmp_path)))
    path = next(tmp_path.glob("*"))
    episodes, rows = read_csv(path / "episodes.csv"), read_csv(path / "evaluations.csv")
    assert [(int(e["global_step"]), float(e["episode_return"]), int(e["episode_length"]))
            for e in episodes] == [(2, 1.0, 1), (4, 2.0, 1), (6, 3.0, 1), (6, 3.0, 3),
                                   (8, 4.0, 1), (10, 5.0, 1), (12, 6.0, 1), (12, 6.0, 3)]
    assert summary["train_return_last20"] == 3.75
    evaluations = [(4, 2.0, 1.0), (8, 2.0, 1.0), (12, 2.0, 1.0)]
    assert [(int(r["global_step"]), float(r["eval_return_mean"]), float(r["eval_return_std"]))
            for r in rows] == evaluations
    assert (summary["eval_return_mean"], summary["eval_return_std"]) == (2.0, 1.0)
    for row in rows:
        step, wall_time = int(row["global_step"]), float(row["wall_time"])
        before = [float(e["wall_time"]) for e in episodes if int(e["global_step"]) < step]
        at_or_after = [float(e["wall_time"]) for e in episodes if int(e["global_step"]) >= step]
        assert wall_time.is_integer() and max(before) < wall_time < min(at_or_after)


def check_the_time_columns_and_the_evaluation_rows(module, tmp_path, monkeypatch, **flags):
    """module.main (ppo_lstm.py, ppo_rnd.py; flags: the script's own) under a clock of the
    test's own. my_envs:ThreeSteps-v0 pays 1 a step and is cut at 3 steps (reward_threshold
    3): 2 environments end an episode each every 3 vector steps, 6 global steps, so the 20th
    episode ends at step 60 and the 21st at 66; 5 rollouts of 2 * 12 = 24 steps run on to
    120 (40 episodes). The script's clock moves 0.01 s at each reading; a stand-in evaluate
    scores its 2 episodes [1, 3]: mean 2, std sqrt(((1 - 2)^2 + (3 - 2)^2) / 2) = 1 (the
    sample std, ddof 1, would be sqrt(2) = 1.414).
    - updates.csv: each row's sps is its global_step over its wall_time, 24 / t_1, ...,
      120 / t_5, some 100 steps a second (the budget over the time, 120 / t_k, differs by
      more than 1 in every row but the last: 120 / t_1 is 5 times 24 / t_1);
    - every row of the three files, in the order the run wrote them (at a step: its
      evaluation, its episodes, then the rollout's update), has a later wall_time than the
      one before: each is the time since the start (an update's time since the update
      before, the rollout's own, would fall back below the episodes' before it);
    - summary.json's solved_at_step is the step the 20th episode reached the threshold (taken
      again at each later episode, it would be 120); wall_time_s comes after every row of
      every file;
    - evaluations.csv has rows at 60 and 120 (--eval-every 60), each mean 2 and std 1."""
    set_clock(module, monkeypatch, tick=0.01)
    monkeypatch.setattr(module, "evaluate", lambda *args, **kwargs: np.array([1.0, 3.0]))
    summary = module.main(module.Args(
        env_id="my_envs:ThreeSteps-v0", total_timesteps=120, num_envs=2, num_steps=12,
        num_minibatches=2, update_epochs=1, eval_every=60, eval_episodes=2,
        output_dir=str(tmp_path), **flags))
    (path,) = tmp_path.iterdir()
    updates, episodes, evaluations = (read_csv(path / f) for f in (
        "updates.csv", "episodes.csv", "evaluations.csv"))
    assert [int(u["global_step"]) for u in updates] == [24, 48, 72, 96, 120]
    for u in updates:  # (within 1: the row's wall_time is rounded to 0.1 ms)
        step, wall_time = int(u["global_step"]), float(u["wall_time"])
        assert int(u["sps"]) == pytest.approx(step / wall_time, abs=1)
        assert step == 120 or int(u["sps"]) != pytest.approx(120 / wall_time, abs=1)
    written = sorted((int(r["global_step"]), order, float(r["wall_time"]))
                     for order, rows in enumerate((evaluations, episodes, updates)) for r in rows)
    times = [wall_time for _, _, wall_time in written]
    assert len(times) == 2 + 40 + 5 and times == sorted(times) and times[0] > 0
    assert len(episodes) == 40 and [int(e["global_step"]) for e in episodes[19:21]] == [60, 66]
    assert summary["solved_at_step"] == 60
    assert summary["wall_time_s"] >= max(float(r["wall_time"])
                                         for r in (*updates, *episodes, *evaluations))
    assert [(int(r["global_step"]), float(r["eval_return_mean"]), float(r["eval_return_std"]))
            for r in evaluations] == [(60, 2.0, 1.0), (120, 2.0, 1.0)]
    assert summary["eval_return_std"] == 1.0
    assert summary["eval_episodes"] == 2  # --eval-episodes, not its default 10


def check_the_buffer_is_never_larger_than_the_budget(module, tmp_path, monkeypatch,
                                                     env_id="BoxZeroToFour-v0"):
    """--total-timesteps 7 of --num-envs 2 run 7 // 2 = 3 vector steps, 3 * 2 = 6
    transitions: the ring gets 6 rows, not --buffer-size's default 1,000,000 (dqn.py's
    vector preset: 50,000), nor the default budget's 10,000, 15,000 or 50,000, nor the 7
    of --total-timesteps. env_id: a Discrete one (CountToThree-v0) for dqn.py."""
    made = spy_on(monkeypatch, module, "ReplayBuffer", lambda capacity, *rest: capacity)
    module.main(module.Args(env_id=env_id, total_timesteps=7, num_envs=2,
                            learning_starts=3, batch_size=2, hidden_size=8, eval_episodes=0,
                            output_dir=str(tmp_path)))
    assert made == [6]


# ---------------------------------------------------------------------------------------
# What an update of the PPO family reads from its minibatches' ratios (the tests of ppo.py,
# ppo_masked.py, ppo_rnd.py and ppod.py)
# ---------------------------------------------------------------------------------------
def check_the_epochs_kl_and_clipfrac(module, tmp_path, monkeypatch, env_id, **own):
    """module.main on env_id (and the script's own flags: ppod.py's demonstrations, no
    replays): one rollout of 2 environments * 8 steps, one minibatch an
    epoch, 3 epochs, --clip-coef 0.01 (default 0.2). With r = exp(newlogprob - oldlogprob)
    as ppo_loss got them, each minibatch's KL is k = mean(r - 1 - log r) and its clipped
    fraction mean(|r - 1| > 0.01). The first epoch's minibatch comes before any gradient
    step (log r = 0: k_1 = 0 up to rounding), the second's after one (k_2 > 0).
    - updates.csv's one row has approx_kl = (k_1 + k_2 + k_3) / 3 and clipfrac the mean of
      the three fractions at 0.01, which the run is checked to tell from those at 0.2;
    - the same run with --target-kl 0.75 * k_2 stops after the second epoch, whose own KL k_2
      is above it; the mean over every minibatch so far, about (0 + k_2) / 2, would be below
      it, and a third epoch would run."""
    calls = spy_on(monkeypatch, module, "ppo_loss", detached)
    flags = dict(env_id=env_id, total_timesteps=16, num_envs=2, num_steps=8, num_minibatches=1,
                 update_epochs=3, clip_coef=0.01, eval_episodes=0, **own)
    module.main(module.Args(**flags, output_dir=str(tmp_path / "all")))
    log_ratios = [c["newlogprob"] - c["oldlogprob"] for c in calls]
    k3 = [(r.exp() - 1 - r).mean().item() for r in log_ratios]
    assert len(k3) == 3 and k3[0] < 1e-9 < k3[1]
    fractions = {clip: np.mean([((r.exp() - 1).abs() > clip).float().mean().item()
                                for r in log_ratios]) for clip in (0.01, 0.2)}
    assert fractions[0.01] != fractions[0.2]
    (update,) = read_csv(next((tmp_path / "all").glob("*/updates.csv")))
    # rel=1e-3: ppod.py takes r - 1 as expm1(log r), which rounds otherwise in float32 (by
    # about 6e-5 of a KL this small); a mean that leaves out k_1 = 0, (k_2 + k_3) / 2, is off
    # by half
    assert float(update["approx_kl"]) == pytest.approx(np.mean(k3), rel=1e-3)
    assert float(update["clipfrac"]) == pytest.approx(fractions[0.01], rel=1e-6)
    module.main(module.Args(**flags, target_kl=0.75 * k3[1],
                            output_dir=str(tmp_path / "stopped")))
    (update,) = read_csv(next((tmp_path / "stopped").glob("*/updates.csv")))
    assert update["epochs"] == "2"


def benchmark_module(name):
    """benchmarks/<name>.py as a module: a copy already imported under that name (a planted
    copy under test) or the repository's file, loaded by its path (benchmarks/ is no package)."""
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, os.path.join(ROOT, "benchmarks",
                                                                      f"{name}.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module

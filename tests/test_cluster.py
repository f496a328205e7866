"""benchmark.py --ray and tune.py --ray on a real Ray cluster of two nodes on this machine
(issue 85): Ray's own ray.cluster_utils.Cluster, a head and an added worker node, each a
raylet of its own, as Ray's tests make one. A small benchmark and a small study run on it;
the worker node is removed while its run is under way, and the tests check what was kept,
started again and reported, that a second invocation keeps the finished runs, and that the
run folders are a local run's. The cluster is always stopped, a test that fails included.

This process never joins the cluster (the drivers are processes of their own, as a user's
are); the tests with a cluster run with the other Ray tests, after those that fork, in xdist's
group "ray", which keeps two Rays from starting at once (conftest.py)."""
import glob
import json
import os
import subprocess
import sys
import threading
import time

import pytest

pytestmark = pytest.mark.xdist_group("ray")
ray_cluster_utils = pytest.importorskip("ray.cluster_utils",
                                        reason="the cluster tests need Ray: pip install ray==2.60.0")

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TINY = ["--total-timesteps", "6000", "--eval-episodes", "5", "--no-tensorboard"]
# benchmark.py with one tiny task of its own (FrozenLake-v1, 6,000 steps of qlearning.py,
# about 2 s a run) in place of the table's, run as its command line runs; PLANT_FAILURE names
# a seed whose run is given a flag its script refuses (a run that fails on the cluster)
DRIVER = f"""
import os, sys
sys.path.insert(0, {ROOT!r})
import benchmark, tyro
task = benchmark.Task("qlearning", "FrozenLake-v1", 0.7, "a tiny run", {TINY!r}, window=100,
                      torch=False, holds_on_eval=True)
benchmark.TASKS = {{"qlearning": [task]}}
if os.environ.get("PLANT_FAILURE"):
    command = benchmark.ray_command
    benchmark.ray_command = lambda task, seed, args: command(task, seed, args) + (
        ["--no-such-flag"] if str(seed) == os.environ["PLANT_FAILURE"] else [])
if os.environ.get("PLANT_MISSING"):
    benchmark.needs = lambda task: ["gymnasium", os.environ["PLANT_MISSING"]]
benchmark.main(tyro.cli(benchmark.Args))
"""
NAME = "qlearning-FrozenLake-v1"


@pytest.fixture(scope="module", params=["ray"])
def backend(request):
    """The tests with a cluster are Ray tests to conftest.py (a parameter backend "ray"), which
    runs them after those that fork: starting the cluster opens a GCS client, whose threads
    live in this process."""
    return request.param


@pytest.fixture(scope="module")
def cluster(backend):
    """A head (1 CPU) and a worker node (1 CPU) on this machine, stopped however the module's
    tests end."""
    env = {"PLAINRL_CURVE": "0", "RAY_worker_niceness": "0"}  # the nodes' workers inherit them
    old = {k: os.environ.get(k) for k in env}
    os.environ.update(env)
    made = ray_cluster_utils.Cluster(initialize_head=True, head_node_args={
        "num_cpus": 1, "include_dashboard": False})
    try:
        made.worker = made.add_node(num_cpus=1)
        made.wait_for_nodes()
        yield made
    finally:
        made.shutdown()
        for k, v in old.items():
            os.environ.pop(k) if v is None else os.environ.__setitem__(k, v)


def run(argv, tmp_path, **env):
    """A driver's command line, its (exit status, stdout, stderr)."""
    done = subprocess.run(argv, cwd=ROOT, capture_output=True, text=True, timeout=240,
                          env={**os.environ, "PLAINRL_CURVE": "0", **env})
    return done.returncode, done.stdout, done.stderr


def benchmark(tmp_path, *flags, **env):
    driver = tmp_path / "driver.py"
    driver.write_text(DRIVER)
    return run([sys.executable, str(driver), "--tasks", NAME, *flags], tmp_path, **env)


def running_runs(script):
    """The processes of the cluster's runs of script now (a run's output goes to a temporary
    plainrl-run-... folder on its node)."""
    found = []
    for path in glob.glob("/proc/[0-9]*/cmdline"):
        try:
            with open(path, "rb") as f:
                words = f.read().split(b"\0")
        except OSError:
            continue
        if any(w.endswith(script.encode()) for w in words) and any(b"plainrl-run-" in w for w in words):
            found.append(words)
    return found


def remove_worker_when_busy(cluster, script, runs=2, timeout=120):
    """A thread that removes the worker node once `runs` runs are under way (one of them on
    it: each node has one CPU); .removed says when it did."""
    def watch():
        deadline = time.time() + timeout
        while time.time() < deadline:
            if len(running_runs(script)) >= runs:
                time.sleep(0.3)  # well inside its run (about 2 s)
                cluster.remove_node(cluster.worker)
                thread.removed = True
                return
            time.sleep(0.05)
    thread = threading.Thread(target=watch, daemon=True)
    thread.removed = False
    thread.start()
    return thread


def episodes(folder):
    """A run folder's episodes.csv without its wall_time column."""
    rows = (folder / "episodes.csv").read_text().splitlines()
    return [",".join(c for i, c in enumerate(row.split(",")) if i != 1) for row in rows]


def test_bad_addresses_are_one_line_before_anything_runs(tmp_path, capsys):
    # a port nobody answers at: one line at once, not Ray's minutes of retries (in this
    # process: both fail before Ray is imported)
    import benchmark
    import tune
    with pytest.raises(SystemExit) as e:
        benchmark.main(benchmark.Args(tasks=["qlearning-Taxi-v4"], ray="127.0.0.1:9",
                                      out=str(tmp_path)))
    err = capsys.readouterr().err
    assert e.value.code == 2 and err.count("\n") == 1, err
    assert err.startswith("benchmark.py: error: --ray 127.0.0.1:9: nobody answers there (")
    assert "ray start --head" in err and not os.path.exists(tmp_path / "results.json")
    with pytest.raises(tune.UsageError, match=r"^--ray 127.0.0.1:9: nobody answers there"):
        tune.main(tune.Args("qlearning.py", param=["gamma=float:0.9:0.99"], ray="127.0.0.1:9",
                            study=str(tmp_path / "s.db")), [])
    with pytest.raises(SystemExit) as e:
        benchmark.main(benchmark.Args(tasks=["qlearning-Taxi-v4"], image_gpu=0.5,
                                      out=str(tmp_path)))
    assert e.value.code == 2 and "--image-gpu" in capsys.readouterr().err


@pytest.mark.slow  # a two-node Ray cluster
def test_tune_spreads_a_trials_seeds_and_survives_a_node_dying(cluster, tmp_path, capsys):
    study = tmp_path / "study.db"
    argv = [sys.executable, "tune.py", "qlearning.py", "--env-id", "FrozenLake-v1",
            "--param", "learning-rate=float:0.1:0.9", "--seeds", "1", "2", "--trials", "2",
            "--ray", cluster.address, "--study", str(study), "--", *TINY]
    watcher = remove_worker_when_busy(cluster, "qlearning.py")
    start = time.time()
    status, out, err = run(argv, tmp_path)
    print(f"tune.py --ray, 2 trials of 2 seeds, a node removed: {time.time() - start:.1f} s")
    assert status == 0, err
    assert watcher.removed  # the worker died under one of trial-0's seeds, which ran again
    lines = [line for line in out.splitlines() if line.startswith("trial ")]
    assert len(lines) == 2 and all("seed 1: " in line and "seed 2: " in line for line in lines)
    for trial in (0, 1):  # each seed's run folder and console output, as a local study's
        for seed in (1, 2):
            folders = glob.glob(str(tmp_path / "study" / f"trial-{trial}" / f"FrozenLake-v1__qlearning__{seed}__*"))
            assert len(folders) == 1 and os.path.exists(os.path.join(folders[0], "summary.json"))
            assert "FrozenLake-v1" in (tmp_path / "study" / f"trial-{trial}" / f"seed-{seed}.out").read_text()
    # the study is the driver's SQLite file: the same command finds its trials done (and
    # joins no cluster), and one of other settings is refused before it would
    import tune
    own, fixed = tune.split_argv(argv[2:])
    args = tune.tyro.cli(tune.Args, args=own)
    assert tune.completed(tune.main(args, fixed)) == 2 and "holds 2 completed trials" in capsys.readouterr().out
    with pytest.raises(tune.UsageError, match="was made with seeds \\[1, 2\\], not \\[1\\]"):
        tune.main(tune.dataclasses.replace(args, seeds=[1]), fixed)


@pytest.mark.slow  # a two-node Ray cluster
def test_benchmark_keeps_reruns_and_reports_what_a_dying_node_costs(cluster, tmp_path):
    if cluster.worker not in cluster.worker_nodes:  # the tune test removed it
        cluster.worker = cluster.add_node(num_cpus=1)
        cluster.wait_for_nodes()
    out = tmp_path / "out"
    flags = ["--seeds", "2", "--first-seed", "9101", "--ray", cluster.address, "--out", str(out)]
    watcher = remove_worker_when_busy(cluster, "qlearning.py")
    start = time.time()
    status, stdout, err = benchmark(tmp_path, *flags)
    print(f"benchmark.py --ray, 2 runs, a node removed: {time.time() - start:.1f} s")
    assert status == 0, err
    assert watcher.removed
    # the run on the removed node started again on the head: it says so, and its mark keeps why
    assert stdout.count("(its node or worker died); started again, try 2") == 1, stdout
    marks = {seed: json.loads((out / "runs" / NAME / f"seed{seed}.ray.json").read_text())
             for seed in (9101, 9102)}
    assert sorted(len(m["died_before"]) for m in marks.values()) == [0, 1]
    entry = json.loads((out / "results.json").read_text())[NAME]
    assert [r["seed"] for r in entry["runs"]] == [9101, 9102] and "failed" not in entry
    assert entry["command"] == f"python benchmark.py --tasks {NAME} --seeds 2 --first-seed 9101 --ray {cluster.address}"
    assert (out / f"{NAME}.png").exists() and f"| 2 (9101–9102) |" in (out / "results.md").read_text()
    # the run folders are a local run's: the same episodes as the same command without --ray
    local = tmp_path / "local"  # run_one, the local path's run, here
    import benchmark as local_benchmark
    task = local_benchmark.Task("qlearning", "FrozenLake-v1", 0.7, "", TINY, window=100,
                                torch=False, holds_on_eval=True)
    local_run = local_benchmark.run_one(task, 9102, str(local))
    [here] = (local / "runs" / NAME / "seed9102").iterdir()
    [there] = [p for p in (out / "runs" / NAME / "seed9102").iterdir()]
    assert there.name == marks[9102]["folder"]
    assert sorted(os.listdir(here)) == sorted(os.listdir(there))
    assert episodes(here) == episodes(there) and len(episodes(here)) > 100
    assert {k: v for k, v in local_run.items() if k not in ("process_s", "sps", "solve_s")} == {
        k: v for k, v in entry["runs"][1].items() if k not in ("process_s", "sps", "solve_s")}
    # a second invocation with a third seed keeps the two finished runs, runs the third, whose
    # script fails: counted and reported as failed, never dropped, with exit status 1
    before = {s: (out / "runs" / NAME / f"seed{s}.ray.json").stat().st_mtime for s in (9101, 9102)}
    status, stdout, err = benchmark(tmp_path, *flags[:1], "3", *flags[2:], PLANT_FAILURE="9103")
    assert status == 1 and "1 runs failed" in err, (stdout, err)
    assert "1 runs to go, 2 kept from before" in stdout
    assert f"{NAME} seed 9103 failed: exit status 2 on " in stdout and "--no-such-flag" in stdout
    assert before == {s: (out / "runs" / NAME / f"seed{s}.ray.json").stat().st_mtime
                      for s in (9101, 9102)}
    entry = json.loads((out / "results.json").read_text())[NAME]
    assert [r["seed"] for r in entry["runs"]] == [9101, 9102]
    assert [f["seed"] for f in entry["failed"]] == [9103] and "--no-such-flag" in entry["failed"][0]["error"]
    assert "| 2 (9101–9102), and 1 failed (seed 9103) |" in (out / "results.md").read_text()


@pytest.mark.slow  # a two-node Ray cluster
def test_a_package_a_node_lacks_is_named_before_any_run(cluster, tmp_path):
    status, stdout, err = benchmark(tmp_path, "--seeds", "1", "--ray", cluster.address, "--out",
                                    str(tmp_path / "out"), PLANT_MISSING="plainrl_absent_module")
    assert status == 2 and err.count("\n") == 1, err
    assert err.startswith("benchmark.py: error: qlearning.py on FrozenLake-v1 needs "
                          "plainrl_absent_module, which the Ray node ")
    assert "pip install plainrl_absent_module on every node" in err
    assert not os.path.exists(tmp_path / "out" / "runs")


@pytest.mark.slow  # a real study's runs
def test_a_study_in_a_shared_storage_is_named_there_and_keeps_its_settings(tmp_path, monkeypatch,
                                                                           capsys):
    # --storage URL (here SQLite's, as a PostgreSQL URL would be): the study is --study's name
    # in it, its runs in tune/<name>/; a second driver with other settings is refused
    import tune
    monkeypatch.chdir(tmp_path)
    url = f"sqlite:///{tmp_path / 'shared.db'}"
    args = tune.Args("qlearning.py", env_id="FrozenLake-v1", param=["gamma=float:0.9:0.99"],
                     seeds=[1], trials=1, jobs=1, storage=url, study="frozen")
    fixed = ["--total-timesteps", "2000", "--eval-episodes", "0", "--no-tensorboard"]
    study = tune.main(args, fixed)
    assert tune.completed(study) == 1 and study.study_name == "frozen"
    assert glob.glob(str(tmp_path / "tune" / "frozen" / "trial-0" / "FrozenLake-v1__qlearning__1__*"))
    assert [s.study_name for s in tune.optuna.get_all_study_summaries(url)] == ["frozen"]
    with pytest.raises(tune.UsageError, match=r"^--study study frozen of sqlite:.* was made with "
                                              r"seeds \[1\], not \[2\]"):
        tune.main(tune.dataclasses.replace(args, seeds=[2]), fixed)
    with pytest.raises(tune.UsageError, match="give an Optuna storage URL"):
        tune.main(tune.dataclasses.replace(args, storage="shared.db"), fixed)

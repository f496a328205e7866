"""Tests of benchmarks/cleanrl_compare.py, the side by side with CleanRL's own scripts: which
of our tasks runs beside which CleanRL script, on which seed and budget, in which order, how
CleanRL's TensorBoard events become a run folder that benchmark.py reads, and what `report`
writes into results.json and results.md. CleanRL itself is not needed: a stand-in takes its
command line and writes the events its scripts write."""
import inspect
import json
import os
import stat
import subprocess
import sys

from tensorboard.compat.proto.event_pb2 import Event
from tensorboard.compat.proto.summary_pb2 import Summary
from tensorboard.summary.writer.record_writer import RecordWriter

import benchmark
from benchmarks import cleanrl_compare as compare
import pytest

# The side by side with CleanRL's scripts (benchmarks/): a tool's processes, no script's math,
# so its tests are slow, but the table of pairs, which is data alone

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# A pair small enough to count by hand: a 2-episode window, threshold 40, a budget of 40 steps
SMALL = compare.Pair(benchmark.Task("ppo", "CartPole-v1", 40, "the goal",
                                    ["--total-timesteps", "40"], label="vs-cleanrl", window=2),
                     "ppo.py")
# CleanRL's episodes: (step, seconds after its event file was opened, return); two end at step
# 20 (two environments of its vector)
EPISODES = [(10, 0.5, 10.0), (20, 1.0, 30.0), (20, 1.0, 50.0), (35, 2.5, 20.0)]


def write_events(path, episodes, start=1000.0, tag="charts/episodic_return"):
    """An event file as CleanRL's SummaryWriter writes it: the file's first event when it is
    opened, then a scalar per finished episode (and one of another name, charts/SPS)."""
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "wb") as f:
        writer = RecordWriter(f)
        writer.write(Event(wall_time=start, file_version="brain.Event:2").SerializeToString())
        for step, seconds, value in episodes:
            for name in (tag, "charts/SPS"):
                writer.write(Event(step=step, wall_time=start + seconds, summary=Summary(
                    value=[Summary.Value(tag=name, simple_value=value)])).SerializeToString())
        writer.flush()


@pytest.mark.slow
def test_cleanrls_events_become_a_run_folder_that_benchmark_reads(tmp_path):
    events = str(tmp_path / "runs" / "CartPole-v1__ppo__7__1" / "events.out.tfevents.1.host")
    write_events(events, EPISODES)
    assert compare.read_events(events) == ([10, 20, 20, 35], [0.5, 1.0, 1.0, 2.5],
                                           [10.0, 30.0, 50.0, 20.0])
    folder = tmp_path / "out" / "run"
    compare.write_run_folder(events, str(folder), SMALL, 7, 40)
    figures = benchmark.read_run(SMALL.cleanrl_task, str(folder.parent))
    # the 2-episode means: 20 (10, 30), 40 (30, 50), 35 (50, 20); 40 first at the third
    # episode, step 20, 1.0 s; at the budget 35; 40 steps in 2.5 s, 16 steps/s; no evaluation
    assert (figures["solve_step"], figures["solve_s"], figures["final_train_mean"]) == (20, 1.0,
                                                                                        35.0)
    assert (figures["global_steps"], figures["sps"], figures["eval_return"]) == (40, 16, None)
    with open(folder / "config.json") as f:
        assert json.load(f)["env_id"] == "CartPole-v1"


@pytest.mark.slow
def test_events_without_an_episode_give_no_rows(tmp_path):
    events = str(tmp_path / "events.out.tfevents.1.host")
    write_events(events, [(10, 0.5, 1.0)], tag="charts/learning_rate")
    assert compare.read_events(events) == ([], [], [])


def stand_in(tmp_path):
    """A Python that stands in for CleanRL's: it appends its command line, the thread count
    and the import path it was given to a log, and writes events where CleanRL would (runs/
    under the folder it starts in)."""
    path = tmp_path / "cleanrl-python"
    path.write_text(
        f"#!{sys.executable}\nimport os, sys\n"
        "from tensorboard.compat.proto.event_pb2 import Event\n"
        "from tensorboard.compat.proto.summary_pb2 import Summary\n"
        "from tensorboard.summary.writer.record_writer import RecordWriter\n"
        + inspect.getsource(write_events) +
        f"with open({str(tmp_path / 'log')!r}, 'a') as f:\n"
        "    f.write(' '.join([os.path.basename(sys.argv[1])] + sys.argv[2:]) + ' | '\n"
        "            + os.environ['OMP_NUM_THREADS'] + ' ' + os.environ['PYTHONPATH'] + '\\n')\n"
        f"write_events(os.path.join('runs', 'x', 'events.out.tfevents.1.host'), {EPISODES!r})\n")
    path.chmod(path.stat().st_mode | stat.S_IEXEC)
    return str(path)


@pytest.mark.slow
def test_run_pairs_each_seed_with_cleanrl_on_the_same_seed_and_budget_seed_by_seed(
        tmp_path, monkeypatch):
    out = str(tmp_path / "out")
    calls = []

    def run_one(task, seed, ours_out):  # benchmark.run_one's place: ours's whole process
        calls.append((task.name, seed, ours_out))
        return {"process_s": 50.0 + seed}

    monkeypatch.setattr(compare.benchmark, "run_one", run_one)
    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    compare.run(compare.argparse.Namespace(pairs=["ppo-CartPole-v1", "dqn-CartPole-v1"],
                                           seeds=[5, 6], out=out,
                                           cleanrl_python=stand_in(tmp_path)))
    # seed by seed, each pair's two processes together: ppo then dqn on seed 5, then on 6
    assert calls == [(f"{script}-CartPole-v1-vs-cleanrl", seed, out)
                     for seed in (5, 6) for script in ("ppo", "dqn")]
    flags = "--env-id CartPole-v1 --total-timesteps 500000 --no-cuda --no-track --no-capture-video"
    assert (tmp_path / "log").read_text().splitlines() == [
        f"{script} --seed {seed} {flags} | 1 {compare.CLEANRL}"
        for seed in (5, 6) for script in ("ppo.py", "dqn.py")]
    for seed in (5, 6):
        for name, process_s in (("ppo-CartPole-v1-vs-cleanrl", 50.0 + seed),
                                ("cleanrl-ppo-CartPole-v1", None)):
            with open(os.path.join(out, "runs", name, f"seed{seed}.json")) as f:
                kept = json.load(f)
            assert kept["process_s"] == process_s if process_s else kept["process_s"] > 0
            assert len(kept["load"]) == 2  # before and after the pair
        # CleanRL's events, written where benchmark.read_run looks for the run folder
        episodes = os.path.join(out, "runs", "cleanrl-dqn-CartPole-v1", f"seed{seed}", "run",
                                "episodes.csv")
        with open(episodes) as f:
            assert f.read().splitlines()[1:] == ["10,0.5,10.0,", "20,1.0,30.0,", "20,1.0,50.0,",
                                                 "35,2.5,20.0,"]


def write_ours(out, task, seed, episodes, process_s):
    """A run folder of ours where run_one puts it, and the whole process's seconds as `run`
    keeps them."""
    folder = os.path.join(out, "runs", task.name, f"seed{seed}", "CartPole-v1__ppo__1")
    os.makedirs(folder)
    with open(os.path.join(folder, "episodes.csv"), "w") as f:
        f.write("global_step,wall_time,episode_return,episode_length\n")
        f.writelines(f"{step},{seconds},{value},1\n" for step, seconds, value in episodes)
    with open(os.path.join(folder, "summary.json"), "w") as f:
        json.dump({"global_steps": 40, "wall_time_s": 4.0, "eval_return_mean": 45.0}, f)
    with open(os.path.join(folder, "config.json"), "w") as f:
        json.dump({"env_id": "CartPole-v1"}, f)
    with open(os.path.join(out, "runs", task.name, f"seed{seed}.json"), "w") as f:
        json.dump({"process_s": process_s, "load": [2.5, 2.7]}, f)


@pytest.mark.slow
def test_report_writes_both_sides_into_results_json_and_md_and_a_row_for_the_notes(
        tmp_path, monkeypatch, capsys):
    monkeypatch.setitem(compare.PAIRS, "ppo-CartPole-v1", SMALL)
    out, results = str(tmp_path / "out"), tmp_path / "benchmarks"
    results.mkdir()
    for seed, process_s in ((1, 30.0), (2, 90.0)):
        # ours: 2-episode means 40 (step 8, one episode: not a full window), 45 (16), 50 (30):
        # 40 reached at step 16, 50 at the budget
        write_ours(out, SMALL.ours, seed, [(8, 0.4, 40.0), (16, 0.8, 50.0), (30, 1.5, 50.0)],
                   process_s)
        events = str(tmp_path / "ev" / f"{seed}" / "events.out.tfevents.1.host")
        write_events(events, EPISODES)
        compare.write_run_folder(events, os.path.join(out, "runs", "cleanrl-ppo-CartPole-v1",
                                                      f"seed{seed}", "run"), SMALL, seed, 40)
        with open(os.path.join(out, "runs", "cleanrl-ppo-CartPole-v1", f"seed{seed}.json"),
                  "w") as f:
            json.dump({"process_s": 60.0, "load": [3.0, 3.5 + seed]}, f)
    compare.report(compare.argparse.Namespace(pairs=["ppo-CartPole-v1"], seeds=[1, 2], out=out,
                                              results=str(results),
                                              figure=str(tmp_path / "vs.png")))
    row = capsys.readouterr().out.splitlines()[0]
    # ours 50 and CleanRL 35 at the budget; 40 reached at step 16 and 20, after 0.8 s of our
    # run's clock and 1.0 s of CleanRL's (EPISODES); processes 30 and 90 against 60 each:
    # ratios 0.5 and 1.5, median 1.0; our evaluation 45
    assert row == ("| ppo.py / CleanRL ppo.py | CartPole-v1 | 40 | 2 | 50.0 [50.0, 50.0] | "
                   "35.0 [35.0, 35.0] | 16 [16, 16] | 20 [20, 20] | 0.8 [0.8, 0.8] | "
                   "1.0 [1.0, 1.0] | 60.0 [30.0, 90.0] | "
                   "60.0 [60.0, 60.0] | 1.00 [0.50, 1.50] | 45.0 [45.0, 45.0] |")
    with open(results / "results.json") as f:
        written = json.load(f)
    ours, theirs = written["ppo-CartPole-v1-vs-cleanrl"], written["cleanrl-ppo-CartPole-v1"]
    command = "python benchmarks/cleanrl_compare.py run --pairs ppo-CartPole-v1 --seeds 1 2"
    assert ours["command"] == theirs["command"] == command
    assert [r["process_s"] for r in ours["runs"]] == [30.0, 90.0]
    assert [r["solve_step"] for r in theirs["runs"]] == [20, 20]
    # the load: the lowest before a seed's pair and the highest after one
    assert (ours["load"], theirs["load"], theirs["script"]) == ([2.5, 2.7], [3.0, 5.5],
                                                                 "cleanrl-ppo")
    text = (results / "results.md").read_text()
    assert f"`{command}`" in text and "python benchmark.py --tasks cleanrl" not in text
    for name in ("ppo-CartPole-v1-vs-cleanrl", "cleanrl-ppo-CartPole-v1"):
        assert f"![{name}]({name}.png)" in text and (results / f"{name}.png").exists()
    assert os.path.getsize(tmp_path / "vs.png") > 0
    # the site's table (notes_table): a head naming the window (2) and threshold (40), then
    # the row; a pair of another window (a MuJoCo pair's 100) gets a table of its own, and a
    # pair with one side missing (dqn's) none
    head = ("| pair | environment | budget | seeds | ours at the budget (2-episode mean) | "
            "CleanRL's | ours steps to 40 | CleanRL's |")
    lines = compare.notes_table(written).splitlines()
    assert lines[0].startswith(head) and lines[2:] == [row]
    sac = compare.PAIRS["sac-HalfCheetah-v4"]
    written[sac.ours.name] = written[sac.cleanrl_task.name] = ours
    written["dqn-CartPole-v1-vs-cleanrl"] = ours
    tables = compare.notes_table(written).split("\n\n")
    assert len(tables) == 2 and tables[0].splitlines() == lines
    assert "(100-episode mean)" in tables[1].splitlines()[0]
    assert [row.split(" | ")[0] for row in tables[1].splitlines()[2:]] == [
        "| sac.py / CleanRL sac_continuous_action.py"]
    assert compare.notes_table({}) is None


def test_each_pair_is_our_task_beside_cleanrls_script_on_the_same_environment_and_budget():
    expected = {"ppo-CartPole-v1": ("ppo.py", "ppo", 500_000),
                "dqn-CartPole-v1": ("dqn.py", "dqn", 500_000),
                "pqn-CartPole-v1": ("pqn.py", "pqn", 500_000),
                "ppo-Hopper-v4": ("ppo_continuous_action.py", "ppo", 1_000_000),
                "ddpg_td3-HalfCheetah-v4": ("td3_continuous_action.py", "ddpg_td3", 100_000),
                "sac-HalfCheetah-v4": ("sac_continuous_action.py", "sac", 100_000),
                "sac-HalfCheetah-v4-cleanrl-settings": ("sac_continuous_action.py", "sac",
                                                        100_000),
                "dqn-CartPole-v1-cleanrl-settings": ("dqn.py", "dqn", 500_000),
                # issue 107: ppo.py's default command on environments held out, 300k steps,
                # beside CleanRL's script for the family
                "ppo-Ant-v4-held-out": ("ppo_continuous_action.py", "ppo", 300_000),
                "ppo-Swimmer-v4-held-out": ("ppo_continuous_action.py", "ppo", 300_000),
                "ppo-InvertedDoublePendulum-v4-held-out": ("ppo_continuous_action.py", "ppo",
                                                           300_000),
                "ppo-Acrobot-v1-held-out": ("ppo.py", "ppo", 300_000),
                "ppo-MountainCar-v0-held-out": ("ppo.py", "ppo", 300_000),
                **{f"sac-{env_id}-held-out": ("sac_continuous_action.py", "sac", 100_000)
                   for env_id in ("Ant-v4", "InvertedDoublePendulum-v4", "Swimmer-v4")},
                # and a third discrete environment; dqn.py's and pqn.py's default commands
                "ppo-LunarLander-v3-held-out": ("ppo.py", "ppo", 300_000),
                **{f"{script}-{env_id}-held-out": (f"{script}.py", script, steps)
                   for script, steps in (("dqn", 100_000), ("pqn", 500_000))
                   for env_id in ("Acrobot-v1", "MountainCar-v0", "LunarLander-v3")}}
    assert {name: (p.cleanrl, p.ours.script, compare.budget(p))
            for name, p in compare.PAIRS.items()} == expected
    # the MuJoCo pairs: our v5 task's flags on CleanRL's v4, CleanRL's 100-episode window
    sac_v5 = next(t for t in benchmark.TASKS["sac"] if t.name == "sac-HalfCheetah-v5-100k")
    sac_v4 = compare.PAIRS["sac-HalfCheetah-v4"].ours
    assert (sac_v4.env_id, sac_v4.flags, sac_v4.window) == ("HalfCheetah-v4", sac_v5.flags, 100)
    # ours is held to an evaluation threshold, CleanRL's side, which never evaluates, is not
    cleanrl_side = compare.PAIRS["sac-HalfCheetah-v4"].cleanrl_task
    assert sac_v4.eval_threshold and not cleanrl_side.eval_threshold
    assert (cleanrl_side.threshold, cleanrl_side.window) == (sac_v4.threshold, 100)
    # the variant: the same task with CleanRL's values where the two differ, each flag given
    # once (a value replaced in place, a flag the task lacks added: all three, since the
    # task leaves --learning-starts to sac.py's long preset), named apart in results
    variant = compare.PAIRS["sac-HalfCheetah-v4-cleanrl-settings"]
    flags = dict(zip(variant.ours.flags[::2], variant.ours.flags[1::2]))
    assert "--learning-starts" not in sac_v5.flags
    assert len(flags) == len(variant.ours.flags) // 2 == len(sac_v5.flags) // 2 + 3
    assert flags == {**dict(zip(sac_v5.flags[::2], sac_v5.flags[1::2])),
                     "--learning-starts": "5000", "--critic-learning-rate": "1e-3",
                     "--policy-frequency": "2"}
    assert variant.ours.name == "sac-HalfCheetah-v4-cleanrl-settings" != sac_v4.name
    assert (variant.said, compare.PAIRS["sac-HalfCheetah-v4"].said) == (
        "CleanRL's settings", "its defaults")  # the figure's legend
    assert variant.cleanrl_task == cleanrl_side
    # dqn's variant: CleanRL's dqn.py defaults as our flags, its switches (None) given bare
    dqn = compare.PAIRS["dqn-CartPole-v1-cleanrl-settings"].ours
    assert dqn.flags[:2] == ["--total-timesteps", "500000"] and dqn.window == 20
    assert [f for f in dqn.flags if f.startswith("--no-")] == ["--no-anneal-lr",
                                                                 "--no-double-dqn"]
    values = dict(zip(*[iter(f for f in dqn.flags if not f.startswith("--no-"))] * 2))
    assert values == {"--total-timesteps": "500000", "--learning-rate": "2.5e-4",
                      "--buffer-size": "10000", "--target-network-frequency": "500",
                      "--batch-size": "128", "--end-e": "0.05", "--exploration-fraction": "0.5",
                      "--learning-starts": "10000", "--train-frequency": "10",
                      "--gradient-steps": "1", "--loss": "mse", "--max-grad-norm": "inf"}
    assert compare.with_values(["--a", "1", "--s"], {"--a": "2", "--s": None, "--t": None,
                                                     "--b": "3"}) == ["--a", "2", "--s", "--t",
                                                                      "--b", "3"]
    command = compare.cleanrl_command(compare.PAIRS["ppo-Hopper-v4"], 101, python="py")
    assert command[2:] == ["--seed", "101", "--env-id", "Hopper-v4", "--total-timesteps",
                           "1000000", "--no-cuda", "--no-track", "--no-capture-video"]
    assert command[1] == os.path.join(compare.CLEANRL, "cleanrl", "ppo_continuous_action.py")
    # CleanRL's Gymnasium 0.29.1 has LunarLander-v2 where ours has v3: its side makes v2, ours
    # v3, and every other pair makes one id on both sides (the v4 MuJoCo ids exist in both)
    lunar = {name for name in compare.PAIRS if "LunarLander" in name}
    assert lunar == {"ppo-LunarLander-v3-held-out", "dqn-LunarLander-v3-held-out",
                     "pqn-LunarLander-v3-held-out"}
    for name, pair in compare.PAIRS.items():
        theirs = "LunarLander-v2" if name in lunar else pair.ours.env_id
        assert compare.cleanrl_command(pair, 7, python="py")[4:6] == ["--env-id", theirs], name
        assert pair.cleanrl_env_id == ("LunarLander-v2" if name in lunar else ""), name
    assert compare.PAIRS["dqn-LunarLander-v3-held-out"].ours.env_id == "LunarLander-v3"
    # a held-out pair gives ours only the budget: the environment's preset does the rest
    assert compare.PAIRS["pqn-Acrobot-v1-held-out"].ours.flags == ["--total-timesteps", "500000"]


@pytest.mark.slow
def test_report_without_runs_and_run_without_cleanrl_are_one_error_and_status_2(tmp_path):
    script = os.path.join("benchmarks", "cleanrl_compare.py")
    done = subprocess.run([sys.executable, script, "report", "--out", str(tmp_path)],
                          capture_output=True, text=True, cwd=ROOT)
    assert done.returncode == 2
    assert ("ppo-CartPole-v1-vs-cleanrl/seed101.json is missing: `run` writes it (12 of 12 runs "
            "missing)") in done.stderr.splitlines()[-1]
    done = subprocess.run([sys.executable, script, "run", "--out", str(tmp_path),
                           "--cleanrl-python", str(tmp_path / "none")],
                          capture_output=True, text=True, cwd=ROOT)
    assert done.returncode == 2
    last = done.stderr.splitlines()[-1]
    assert "is missing: clone CleanRL and make its environment" in last
    done = subprocess.run([sys.executable, script, "run", "--pairs", "ppo-Hopper-v5"],
                          capture_output=True, text=True, cwd=ROOT)
    assert done.returncode == 2 and "invalid choice: 'ppo-Hopper-v5'" in done.stderr
    assert not os.path.exists(tmp_path / "runs")

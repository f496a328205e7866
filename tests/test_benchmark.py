"""benchmark.py's statistics of where runs end (issue 78): which figure is a run's end, how
many runs hold, the IQM with its interval (rliable), the normalized scores and the fields'
aggregates, and the table's row that leads with them. The numbers are worked by hand."""
import json
import os
import sys

import numpy as np
import pytest
from pytest import approx

import benchmark


def entry(threshold=475, runs=(), eval_threshold=False, **extra):
    return {"script": "ppo", "env_id": "CartPole-v1", "label": "", "window": 20,
            "threshold": threshold, "goal": "a goal", "jobs": 1, "date": "2026-11-27",
            "eval_threshold": eval_threshold, "runs": list(runs), **extra}


def run(seed, end=None, evaluation=None, curve_end=None, solve_step=None):
    """A run of results.json; end: final_train_mean (left out when None: an older entry, whose
    end is its curve's last point, curve_end)."""
    r = {"seed": seed, "eval_return": evaluation, "solve_step": solve_step, "solve_s": None,
         "process_s": 1.0, "sps": 10, "curve": [[1, 2], [0.0, curve_end]]}
    if end is not None:
        r["final_train_mean"] = end
    return r


def test_a_runs_end_is_its_tasks_own_measure():
    # a training threshold: the last-window training mean; an older entry without it: the
    # curve's last point; an evaluation threshold (MuJoCo): the evaluation after training
    assert benchmark.end_of(entry(), run(1, end=480.0, evaluation=12.0, curve_end=3.0)) == 480.0
    assert benchmark.end_of(entry(), run(1, evaluation=12.0, curve_end=3.0)) == 3.0
    assert benchmark.end_of(entry(eval_threshold=True), run(1, end=480.0, evaluation=12.0)) == 12.0
    assert benchmark.end_of(entry(eval_threshold=True), run(1, end=480.0)) is None
    # a goal on the final evaluation (Q-learning's, Pendulum's, es.py's): the evaluation too
    assert benchmark.end_of({**entry(), "holds_on_eval": True}, run(1, end=5.0, evaluation=7.9)) == 7.9
    taxi = next(t for t in benchmark.TASKS["qlearning"] if t.env_id == "Taxi-v4")
    assert taxi.holds_on_eval and not taxi.eval_threshold


def test_holds_counts_the_runs_that_end_at_or_above_the_threshold():
    # ends 475 (exactly: holds), 474.9 (reached it first at step 100, fell: does not), 500;
    # one evaluation task with no evaluation: counted in neither
    e = entry(runs=[run(1, end=475.0), run(2, end=474.9, solve_step=100), run(3, end=500.0)])
    assert benchmark.holds(e) == (2, 3)
    e = entry(eval_threshold=True, runs=[run(1, evaluation=475.0), run(2, evaluation=None)])
    assert benchmark.holds(e) == (1, 1)


def test_a_gain_task_ends_at_its_evaluation_less_its_start_and_without_either_at_none():
    # holds_on_gain (grpo.py's AdditionPartial-v0, threshold 0.3): a run's end is its final
    # evaluation less its start_return: 0.85 - 0.5 = 0.35 holds, 0.75 - 0.5 = 0.25 does not,
    # 0.3 - 0.0 = 0.3 holds (a start of 0 is a start); a run without its evaluation or
    # without its start has no end and is counted in neither
    runs = [{"eval_return": 0.85, "start_return": 0.5}, {"eval_return": 0.75, "start_return": 0.5},
            {"eval_return": 0.3, "start_return": 0.0}, {"eval_return": None, "start_return": 0.5},
            {"eval_return": 0.9, "start_return": None}]
    e = {"holds_on_gain": True, "threshold": 0.3, "runs": runs}
    assert [benchmark.end_of(e, r) for r in runs] == [approx(0.35), approx(0.25), approx(0.3),
                                                      None, None]
    assert benchmark.holds(e) == (2, 3)


def test_the_iqm_and_its_interval_by_hand():
    # 1, 2, 3, 4, 100, 5, 6, 7 sorted: 1 2 | 3 4 5 6 | 7 100; 8 / 4 = 2 cut at each end,
    # the middle half's mean (3+4+5+6)/4 = 4.5 (the mean, 16, is pulled up by the 100)
    point, low, high = benchmark.iqm_interval([1, 2, 3, 4, 100, 5, 6, 7])
    assert point == approx(4.5)
    assert 1 <= low <= point <= high <= 100 and high > low  # an interval, not a point
    # 3 runs: floor(3 / 4) = 0 cut, the IQM is their mean (10+20+60)/3 = 30
    assert benchmark.iqm_interval([10, 20, 60])[0] == approx(30)
    # the same values, the same interval (the bootstrap is seeded, so results.md is remade
    # the same); runs all equal: a point; None values are left out; none at all: None
    assert benchmark.iqm_interval([1, 2, 3, 4, 100, 5, 6, 7]) == (point, low, high)
    state = np.random.get_state()[1].copy()  # NumPy's global generator is left as it was
    benchmark.iqm_interval([1, 2, 3])
    assert (np.random.get_state()[1] == state).all()
    assert benchmark.iqm_interval([500, 500, None, 500]) == (500, 500, 500)
    assert benchmark.iqm_interval([None]) is None
    assert benchmark.format_interval((4.5, 2.5, 29.75)) == "4.5 [2.5, 29.75]"
    assert benchmark.format_interval(None) == "-"


def test_normalized_scores_and_the_fields():
    # CartPole: random 30, threshold 475: an end of 475 is 1, 30 is 0, 252.5 is (252.5-30)/445
    # = 0.5; Pendulum: random -1200, threshold -200: -700 is (-700+1200)/1000 = 0.5
    assert benchmark.normalized(475, 30, 475) == 1 and benchmark.normalized(30, 30, 475) == 0
    assert benchmark.normalized(252.5, 30, 475) == approx(0.5)
    assert benchmark.normalized(-700, -1200, -200) == approx(0.5)
    assert [benchmark.field_of(e) for e in ("MinAtar/Breakout-v1", "Hopper-v5", "Walker2d-v5",
                                            "CartPole-v1", "benchmarks.sparse_chain:SparseChain-v0",
                                            "simple_spread_v3")] == [
        "MinAtar", "MuJoCo", "MuJoCo", "classic control", "classic control", "classic control"]


def test_field_scores_take_each_scripts_reference_tasks_on_their_common_seeds():
    baselines = {"CartPole-v1": {"random": {"mean": 25.0}},
                 "Pendulum-v1": {"random": {"mean": -1200.0}},
                 "Hopper-v5": {"random": {"mean": 10.0}}}
    results = {
        # ppo: CartPole on 3 seeds, Pendulum on 2: both cut to the first 2 seeds (by seed)
        "ppo-CartPole-v1": entry(runs=[run(3, end=25.0), run(1, end=475.0), run(2, end=250.0)]),
        "ppo-Pendulum-v1": {**entry(threshold=-200, runs=[run(1, end=-200.0), run(2, end=-700.0)]),
                            "env_id": "Pendulum-v1"},
        # left out: an ablation's label, a peer's run, a task no default is meant to solve,
        # an environment without a baseline
        "ppo-CartPole-v1-lag": entry(runs=[run(1, end=0.0)], label="lag"),
        "cleanrl-ppo-CartPole-v1": {**entry(runs=[run(1, end=0.0)]), "script": "cleanrl-ppo"},
        "ppo-CartPoleNoVel-v1": entry(runs=[run(1, end=0.0)]),
        "ppo-Unknown-v0": {**entry(runs=[run(1, end=0.0)]), "env_id": "Unknown-v0"},
        # sac on MuJoCo, an evaluation threshold: its evaluations count
        "sac-Hopper-v5-100k": {**entry(threshold=660, eval_threshold=True, label="100k",
                                       runs=[run(1, end=1.0, evaluation=335.0)]),
                               "script": "sac", "env_id": "Hopper-v5"},
    }
    matrices, names = benchmark.field_scores(results, baselines)
    assert names == {"classic control": {"ppo": ["ppo-CartPole-v1", "ppo-Pendulum-v1"]},
                     "MuJoCo": {"sac": ["sac-Hopper-v5-100k"]}}
    # seed 1: (475-25)/450 = 1, (-200+1200)/1000 = 1; seed 2: (250-25)/450 = 0.5, 0.5
    assert matrices["classic control"]["ppo"] == approx(np.array([[1.0, 1.0], [0.5, 0.5]]))
    # (335 - 10) / (660 - 10) = 0.5
    assert matrices["MuJoCo"]["sac"] == approx(np.array([[0.5]]))


def test_the_aggregates_by_hand():
    # 4 runs x 1 task, scores 0.2, 0.6, 1.0, 1.4: mean 0.8; IQM cuts 1 at each end:
    # (0.6+1.0)/2 = 0.8; optimality gap mean(max(1-x, 0)) = (0.8+0.4+0+0)/4 = 0.3 (1.4 above
    # the threshold makes up for nothing). 0.2, 0.2, 0.2, 2.6: mean 0.8 too, but IQM 0.2,
    # gap 0.8*3/4 = 0.6. rliable's median is over tasks of each task's mean over runs, so
    # with one task it is that task's mean, 0.8 both times.
    a = benchmark.aggregates(np.array([[0.2], [0.6], [1.0], [1.4]]))
    assert {k: v[0] for k, v in a.items()} == approx(
        {"IQM": 0.8, "median": 0.8, "mean": 0.8, "optimality gap": 0.3})
    for point, low, high in a.values():
        assert low <= point <= high
    b = benchmark.aggregates(np.array([[0.2], [0.2], [0.2], [2.6]]))
    assert {k: v[0] for k, v in b.items()} == approx(
        {"IQM": 0.2, "median": 0.8, "mean": 0.8, "optimality gap": 0.6})
    # three tasks, two runs each: task means 0.1, 0.5, 3.0 -> median over tasks 0.5 (mean 1.2)
    c = benchmark.aggregates(np.array([[0.0, 0.4, 2.0], [0.2, 0.6, 4.0]]))
    assert c["median"][0] == approx(0.5) and c["mean"][0] == approx(1.2)


def test_a_row_leads_with_where_its_runs_end(tmp_path):
    # 5 fresh seeds 101-105 ending 500, 500, 300 (reached 475 at step 9,000 and fell), 480,
    # 500: holds 4 of 5; IQM cuts floor(5/4) = 1 at each end of 300 480 500 500 500:
    # (480+500+500)/3 = 493.3; evaluations 500, 500, 200, 500, 490 -> (490+500+500)/3 = 496.7
    ends, evals = [500.0, 500.0, 300.0, 480.0, 500.0], [500.0, 500.0, 200.0, 500.0, 490.0]
    runs = [run(101 + i, end=e, evaluation=v, solve_step=1000 * (i + 5))
            for i, (e, v) in enumerate(zip(ends, evals))]
    benchmark.write_results({"ppo-CartPole-v1": entry(runs=runs, load=[0.5, 0.7])}, tmp_path)
    text = (tmp_path / "results.md").read_text()
    header = next(line for line in text.splitlines() if line.startswith("| script |"))
    row = next(line for line in text.splitlines() if line.startswith('| <a id="ppo-cartpole-v1"'))
    cells = dict(zip([c.strip() for c in header.split("|")[1:-1]],
                     [c.strip() for c in row.split("|")[1:-1]]))
    assert cells["seeds"] == "5 (101–105)" and cells["holds"] == "4 of 5"
    assert cells["end, IQM [95% CI]"].startswith("493.3 [")
    assert cells["eval, IQM [95% CI]"].startswith("496.7 [")
    assert cells["steps to threshold"] == "7000 [5000, 9000]"  # median of 5000..9000
    assert list(cells).index("holds") < list(cells).index("steps to threshold")
    # the field's section: ppo.py on CartPole, normalized by baselines.json's random return
    with open(os.path.join(benchmark.ROOT, "benchmarks", "baselines.json")) as f:
        random_return = json.load(f)["envs"]["CartPole-v1"]["random"]["mean"]
    scores = sorted((e - random_return) / (475 - random_return) for e in ends)
    line = next(line for line in text.splitlines() if line.startswith("| ppo.py | ppo-CartPole-v1"))
    assert line.split("|")[4].strip().startswith(f"{np.mean(scores[1:4]):.2f} [")  # the IQM
    assert (tmp_path / "profile-classic-control.png").read_bytes()[:4] == b"\x89PNG"


def test_a_time_taken_above_the_cores_is_marked_not_comparable(tmp_path):
    # Issue 86: seconds and steps per second of a task whose 1-minute load (before, after)
    # rose above its machine's cores are marked; at or below them, or with the cores kept
    # (4), they are not; an entry without a load is marked (nothing says it was quiet)
    # and an entry without cores was made on the 2-core machine.
    runs = [run(1, end=500.0, solve_step=10), run(2, end=500.0, solve_step=20)]
    results = {f"ppo-CartPole-v1-{label}": {**entry(runs=runs, label=label, **extra)}
               for label, extra in (("quiet", {"load": [1.0, 2.0]}), ("busy", {"load": [0.4, 2.1]}),
                                    ("four", {"load": [3.5, 4.0], "cores": 4}),
                                    ("unknown", {}))}
    benchmark.write_results(results, tmp_path)
    text = (tmp_path / "results.md").read_text()
    header = next(line for line in text.splitlines() if line.startswith("| script |"))
    for label, marked in (("quiet", False), ("busy", True), ("four", False), ("unknown", True)):
        row = next(line for line in text.splitlines()
                   if line.startswith(f'| <a id="ppo-cartpole-v1-{label}"'))
        cells = dict(zip([c.strip() for c in header.split("|")[1:-1]],
                         [c.strip() for c in row.split("|")[1:-1]]))
        for column in ("seconds to threshold", "process s", "steps/s"):
            assert cells[column].endswith(" †") is marked, (label, column)
        assert not cells["steps to threshold"].endswith("†")  # steps are not a time
    assert "† (load above the cores: not comparable)" in text


def test_statistics_are_kept_with_their_seeds_and_remade_for_other_seeds():
    # kept figures of the same seeds are used as they are (made up here: 1 of 1, IQM 7);
    # kept figures of other seeds are computed again: 501 and 470 -> 1 of 2
    e = entry(runs=[run(1, end=501.0), run(2, end=470.0)])
    e["statistics"] = {"seeds": [1, 2], "measure": "train", "holds": [1, 1], "end": [7, 7, 7],
                       "eval": None}
    assert benchmark.statistics(e)["end"] == [7, 7, 7]
    e["statistics"]["seeds"] = [1, 3]
    stats = benchmark.statistics(e)
    assert stats["holds"] == [1, 2] and stats["end"][0] == approx((501 + 470) / 2)
    # kept for the training measure, asked for the evaluation (evaluations 400, 480): again
    e["statistics"], e["holds_on_eval"] = stats, True
    e["runs"][0]["eval_return"], e["runs"][1]["eval_return"] = 400.0, 480.0
    stats = benchmark.statistics(e)
    assert (stats["measure"], stats["holds"]) == ("eval", [1, 2]) and stats["end"][0] == approx(440)


def test_a_task_that_stops_at_its_threshold_shows_no_holds(tmp_path):
    # impala's lag tasks run with --stop-at-return 475: each run ends where it stopped, so
    # "5 of 5 hold" would say nothing; the row says they stop there instead
    name = "impala-CartPole-v1-lag-vtrace"
    assert "--stop-at-return" in next(t for t in benchmark.TASKS["impala"] if t.name == name).flags
    results = {name: {**entry(runs=[run(1, end=476.0), run(2, end=480.0)], label="lag-vtrace"),
                      "script": "impala"},
               "ppo-CartPole-v1": entry(runs=[run(1, end=476.0), run(2, end=400.0)])}
    benchmark.write_results(results, tmp_path)
    rows = {line.split("</a>")[0]: line for line in (tmp_path / "results.md").read_text().splitlines()
            if line.startswith("| <a id=")}
    assert "| 2 (1–2) | stop there (--stop-at-return) |" in rows['| <a id="impala-cartpole-v1-lag-vtrace">']
    assert "| 2 (1–2) | 1 of 2 |" in rows['| <a id="ppo-cartpole-v1">']


def test_the_bootstrap_is_seeded_whatever_numpys_global_state():
    # the same values give the same interval after NumPy's global generator was moved: the
    # bootstrap seeds it itself (and puts it back), so results.md is remade the same
    np.random.seed(123)
    first = benchmark.iqm_interval([1, 2, 3, 4, 100, 5, 6, 7])
    np.random.seed(7)
    np.random.random(1000)
    assert benchmark.iqm_interval([1, 2, 3, 4, 100, 5, 6, 7]) == first


def test_seeds_are_sorted_and_an_older_mujoco_entry_is_read_on_its_evaluation(tmp_path):
    # runs listed as seeds 3, 1, 2: statistics and the row say 1-3
    e = entry(runs=[run(3, end=500.0), run(1, end=400.0), run(2, end=480.0)])
    assert benchmark.statistics(e)["seeds"] == [1, 2, 3]
    benchmark.write_results({"ppo-CartPole-v1": e}, tmp_path)
    assert "| 3 (1–3) | 2 of 3 |" in (tmp_path / "results.md").read_text()
    # an entry of a MuJoCo task written before eval_threshold was kept gets it from TASKS
    old = {k: v for k, v in entry().items() if k != "eval_threshold"}
    filled = benchmark.with_eval_thresholds({"sac-Hopper-v5-100k": old})["sac-Hopper-v5-100k"]
    assert filled["eval_threshold"] is True and filled["stops"] is False


def test_each_entry_is_told_its_tasks_own_measure_and_whether_it_stops():
    # with_eval_thresholds copies three facts of the task in TASKS onto its results.json
    # entry: Taxi's Q-learning holds on its evaluation though its threshold is a training
    # figure (holds_on_eval without eval_threshold); ppo's CartPole on its training mean;
    # impala's lag task stops at 475. Entries written with other values get the task's.
    tasks = {t.name: t for s in benchmark.TASKS.values() for t in s}
    taxi, cartpole = tasks["qlearning-Taxi-v4"], tasks["ppo-CartPole-v1"]
    assert (taxi.holds_on_eval, taxi.eval_threshold) == (True, False)
    assert (cartpole.holds_on_eval, cartpole.eval_threshold) == (False, False)
    wrong = {"holds_on_eval": None, "stops": None}
    filled = benchmark.with_eval_thresholds({
        "qlearning-Taxi-v4": {**entry(), "eval_threshold": False, **wrong},
        "ppo-CartPole-v1": {**entry(), "eval_threshold": False, **wrong},
        "impala-CartPole-v1-lag-vtrace": {**entry(), **wrong},
        "not-a-task": {**entry(), **wrong}})
    assert filled["qlearning-Taxi-v4"]["holds_on_eval"] is True
    assert filled["ppo-CartPole-v1"]["holds_on_eval"] is False
    assert filled["qlearning-Taxi-v4"]["stops"] is filled["ppo-CartPole-v1"]["stops"] is False
    assert filled["impala-CartPole-v1-lag-vtrace"]["stops"] is True
    assert filled["not-a-task"]["holds_on_eval"] is None  # left as it was


def test_a_window_mean_on_the_threshold_reaches_it_and_the_curve_is_that_windows(tmp_path):
    # Window 3, threshold 5: returns 2, 8, 5, 2, 8, 6 at steps 10-60. The means of the last
    # (up to) 3 episodes: 2/1 = 2, (2+8)/2 = 5, (2+8+5)/3 = 5, (8+5+2)/3 = 5, (5+2+8)/3 = 5,
    # (2+8+6)/3 = 16/3 = 5.33. The first full window (the third episode, step 30) stands
    # exactly on 5, which reaches it (at or above, as the run's own solved_at_step); the
    # highest full-window mean is 5.33 at step 60; the end is (2+8+6)/3 too.
    folder = tmp_path / "seed1" / "run"
    folder.mkdir(parents=True)
    (folder / "summary.json").write_text(json.dumps(
        {"global_steps": 60, "eval_return_mean": None, "wall_time_s": 6.0}))
    (folder / "episodes.csv").write_text("global_step,wall_time,episode_return\n" + "".join(
        f"{10 * i},{i}.0,{r}\n" for i, r in enumerate([2, 8, 5, 2, 8, 6], start=1)))
    task = benchmark.Task("ppo", "CartPole-v1", 5, "a goal", window=3)
    figures = benchmark.read_run(task, str(tmp_path / "seed1"))
    assert figures["solve_step"] == 30 and figures["solve_s"] == 3.0
    assert figures["curve"] == [[10, 20, 30, 40, 50, 60], [2.0, 5.0, 5.0, 5.0, 5.0, 5.33]]
    assert figures["best_train_mean"] == [5.33, 60]
    assert figures["final_train_mean"] == 5.33


def test_a_run_without_training_episodes_is_read_from_its_summary_and_drawn_from_its_evaluations(
        tmp_path, monkeypatch):
    # rlhf.py --algo dpo trains on no episodes: its episodes.csv has the header alone. The
    # row reads its gain from the summary (0.5 - (-0.1) = 0.6, at or above 0.4: holds), and
    # its figure is the one panel of --eval-every evaluations, with no threshold line (a gain
    # is no height on that axis).
    folder = tmp_path / "seed1" / "run"
    folder.mkdir(parents=True)
    (folder / "summary.json").write_text(json.dumps(
        {"global_steps": 200, "eval_return_mean": 0.5, "start_return": -0.1, "wall_time_s": 4.0}))
    (folder / "episodes.csv").write_text("global_step,wall_time,episode_return\n")
    (folder / "evaluations.csv").write_text(
        "global_step,eval_return_mean\n100,0.214\n200,0.5\n")
    task = benchmark.Task("rlhf", "Preference-v0", 0.4, "a goal", ["--algo", "dpo"],
                          label="dpo", holds_on_gain=True)
    run = benchmark.read_run(task, str(tmp_path / "seed1"))
    assert run["curve"] == [[], []] and run["final_train_mean"] is None
    assert run["evaluations"] == [[100, 200], [0.21, 0.5]]
    assert (run["eval_return"], run["start_return"], run["sps"]) == (0.5, -0.1, 50)
    entry = {"holds_on_gain": True, "threshold": 0.4, "runs": [{**run, "seed": 1}]}
    assert benchmark.end_of(entry, entry["runs"][0]) == approx(0.6)
    assert benchmark.holds(entry) == (1, 1)
    saved = []
    monkeypatch.setattr(benchmark, "save_figure", lambda fig, path: saved.append(fig))
    benchmark.plot_task(task, [{**run, "seed": 1}], str(tmp_path))
    (ax,) = saved[0].axes
    assert "greedy evaluations" in ax.get_title()
    assert [list(line.get_ydata()) for line in ax.get_lines()
            if line.get_label() == "seed 1"] == [[0.21, 0.5]]
    assert not any(str(line.get_label()).startswith("threshold") for line in ax.get_lines())


def test_a_run_whose_node_dies_is_started_again_twice_then_fails():
    # RAY_RETRIES = 2: after the first and the second death the run starts again (tries 2 and
    # 3); the third death is the last, and the run counts as failed
    assert benchmark.RAY_RETRIES == 2
    assert [benchmark.started_again(deaths) for deaths in (1, 2, 3)] == [True, True, False]


def test_a_cluster_run_asks_for_the_cores_its_script_uses():
    # es.py: its --num-workers (2 where a task gives none: es.py would take every core of its
    # node); impala.py: its actors and one more for its learner (2 actors by default: 3); every
    # other script one, whatever its task
    tasks = {t.name: t for s in benchmark.TASKS.values() for t in s}
    impala = tasks["impala-CartPole-v1"]
    assert "--num-actors" not in impala.flags and benchmark.cores(impala) == 2 + 1
    one_actor = tasks["impala-CartPole-v1-1-actor"]
    assert benchmark.cores(one_actor) == benchmark.flag_value(one_actor, "--num-actors", 2) + 1 == 2
    assert benchmark.cores(tasks["ppo-CartPole-v1"]) == benchmark.cores(tasks["sac-Pendulum-v1"]) == 1
    es = [t for t in benchmark.TASKS["es"]]
    assert all(benchmark.cores(t) == benchmark.flag_value(t, "--num-workers", 2) for t in es)


def test_an_image_task_runs_on_the_gpu_under_any_share_of_one():
    # --image-gpu 0.25 (a quarter of a GPU each, as the cluster page suggests) adds --cuda after
    # the local command's device flag, for an image task only; 0 leaves every command as it is
    tasks = {t.name: t for s in benchmark.TASKS.values() for t in s}
    image = next(t for t in tasks.values() if t.env_id.startswith("MinAtar/") and t.torch)
    flat = tasks["ppo-CartPole-v1"]
    quarter, none = benchmark.Args(image_gpu=0.25), benchmark.Args()
    assert benchmark.ray_command(image, 101, quarter) == [*benchmark.command_line(image, 101), "--cuda"]
    assert benchmark.ray_command(image, 101, none) == benchmark.command_line(image, 101)
    assert benchmark.ray_command(flat, 101, quarter) == benchmark.command_line(flat, 101)


def test_a_cluster_runs_mark_is_written_after_its_files_or_not_at_all(tmp_path, monkeypatch):
    # keep_run: the run's files first, then its seed<s>.ray.json; a write that fails midway
    # (a full disk, a Ctrl-C) leaves no mark, so a later --ray invocation runs it again
    # (kept_run keeps a marked run without running it)
    run = "CartPole-v1__ppo__7__1700000000"
    result = {"files": {f"{run}/summary.json": b"{}", f"{run}/episodes.csv": b"step,return\n"}}
    output_dir = str(tmp_path / "runs" / "ppo-CartPole-v1" / "seed7")
    write_run = benchmark.write_run

    def dies_midway(result, output_dir):
        write_run({"files": dict(list(result["files"].items())[:1])}, output_dir)
        raise OSError("No space left on device")
    monkeypatch.setattr(benchmark, "write_run", dies_midway)
    with pytest.raises(OSError):
        benchmark.keep_run(result, output_dir, {"process_s": 1.0})
    assert os.listdir(tmp_path / "runs" / "ppo-CartPole-v1") == ["seed7"]  # no mark
    monkeypatch.setattr(benchmark, "write_run", write_run)
    benchmark.keep_run(result, output_dir, {"process_s": 1.0})
    assert json.loads((tmp_path / "runs" / "ppo-CartPole-v1" / "seed7.ray.json").read_text()) == {
        "folder": run, "process_s": 1.0}
    assert sorted(os.listdir(os.path.join(output_dir, run))) == ["episodes.csv", "summary.json"]
    assert sorted(os.listdir(tmp_path / "runs" / "ppo-CartPole-v1")) == ["seed7", "seed7.ray.json"]


# a run of a cluster's node (node_function's process) that writes a whole run folder of
# FrozenLake-v1 (two episodes returning 1 and summary.json) into its --output-dir, then, as
# seed 2, is killed by SIGKILL as the kernel's OOM killer kills (its exit status -9)
KILLED_RUN = """
import json, os, signal, sys
seed, folder = sys.argv[1], sys.argv[-1]
run = os.path.join(folder, f"FrozenLake-v1__qlearning__{seed}__1700000000")
os.makedirs(run)
with open(os.path.join(run, "episodes.csv"), "w") as f:
    f.write("global_step,wall_time,episode_return,episode_length\\n5,0.1,1.0,5\\n10,0.2,1.0,5\\n")
with open(os.path.join(run, "summary.json"), "w") as f:
    json.dump({"global_steps": 10, "eval_return_mean": 1.0, "wall_time_s": 0.2}, f)
if seed == "2":
    os.kill(os.getpid(), signal.SIGKILL)
"""


class FakeCluster:
    """Ray as run_on_ray uses it, in this process: a task runs when it is submitted (the real
    node_function, its process and all), wait gives the oldest; submitted keeps the seeds.
    It is also the `ray` that node_function imports on its node (its node id)."""
    class exceptions:
        RayError = RuntimeError

    def __init__(self):
        self.submitted, self.results = [], {}

    def remote(self, max_retries=None):
        return lambda function: self.Remote(self, function)

    class Remote:
        def __init__(self, cluster, function):
            self.cluster, self.function = cluster, function

        def options(self, **kwargs):
            return self

        def remote(self, words, env):
            ref = f"ref-{len(self.cluster.results)}"
            self.cluster.submitted.append(int(words[2]))
            self.cluster.results[ref] = self.function(words, env)
            return ref

    def wait(self, refs, num_returns=1):
        return refs[:1], refs[1:]

    def get(self, ref):
        return self.results[ref]

    def cluster_resources(self):
        return {"CPU": 2}

    def get_runtime_context(self):
        return type("Context", (), {"get_node_id": lambda self: "node-a"})()

    def shutdown(self):
        pass


def test_a_cluster_run_killed_by_a_signal_fails_and_is_run_again(tmp_path, monkeypatch, capsys):
    """benchmark.py --ray with two seeds whose runs (KILLED_RUN, through the real node_function)
    both write a whole run folder; seed 2's process is then killed by SIGKILL (exit status -9,
    as the OOM killer gives). Seed 1 is kept (its files and seed1.ray.json); seed 2 is a
    failed run, "exit status -9", counted (run_on_ray returns 1) and in the task's entry, with
    no mark and no files; a second invocation keeps seed 1 and runs seed 2 again. A negative
    status taken as finished would keep seed 2 with its mark and never run it again."""
    task = benchmark.Task("qlearning", "FrozenLake-v1", 0.7, "a killed run", window=2,
                          torch=False, holds_on_eval=True)
    reported = []
    monkeypatch.setattr(benchmark, "check_cluster", lambda ray, tasks: [{"Resources": {"CPU": 2}}])
    monkeypatch.setattr(benchmark, "ray_command",
                        lambda task, seed, args: ["-c", KILLED_RUN, str(seed)])
    monkeypatch.setattr(benchmark, "report_task", lambda task, runs, args, load, entry: (
        reported.append(([r["seed"] for r in runs], entry))))
    args = benchmark.Args(ray="10.0.0.1:6379", out=str(tmp_path))
    folder = tmp_path / "runs" / task.name
    for invocation in (1, 2):
        cluster = FakeCluster()
        monkeypatch.setattr(benchmark, "join_ray", lambda address: cluster)
        monkeypatch.setitem(sys.modules, "ray", cluster)  # node_function's `import ray`
        assert benchmark.run_on_ray([task], range(1, 3), args, 0.0) == 1
        assert cluster.submitted == ([1, 2] if invocation == 1 else [2])
        assert sorted(os.listdir(folder)) == ["seed1", "seed1.ray.json"]
        [(seeds, entry)] = reported[invocation - 1:]
        assert seeds == [1] and [f["seed"] for f in entry["failed"]] == [2]
        assert entry["failed"][0]["error"].startswith("exit status -9 on ")
        assert f"  {task.name} seed 2 failed: exit status -9 on " in capsys.readouterr().out
    assert json.loads((folder / "seed1.ray.json").read_text())["folder"] == (
        "FrozenLake-v1__qlearning__1__1700000000")


def test_report_task_keeps_the_tasks_goal_and_the_1_minute_load_and_prints_each_seeds_end(
        tmp_path, monkeypatch, capsys):
    # os.getloadavg() gives the 1-, 5- and 15-minute loads (3.0, 2.0, 1.0): the entry keeps
    # the load before (0.46 -> 0.5) and the 1-minute one after, 3.0. ppo-CartPole-v1's goal
    # is 475 over 20 training episodes: seed 1 ends at 475.0 (exactly: holds), seed 2 at
    # 474.9 (does not hold, though it first reached 475 at step 100). The dagger compares
    # the load with the machine's cores: the entry keeps os.cpu_count() (8 here), not --jobs
    # (1), so 3.0, above 1 job but not above 8 cores, leaves the times unmarked.
    from types import SimpleNamespace
    monkeypatch.setattr(benchmark.os, "cpu_count", lambda: 8)
    monkeypatch.setattr(benchmark.os, "getloadavg", lambda: (3.0, 2.0, 1.0))
    monkeypatch.setattr(benchmark, "plot_task", lambda *args: None)
    task = next(t for t in benchmark.TASKS["ppo"] if t.name == "ppo-CartPole-v1")
    runs = [run(1, end=475.0, evaluation=9.0, solve_step=50),
            run(2, end=474.9, evaluation=500.0, solve_step=100)]
    benchmark.report_task(task, runs, SimpleNamespace(out=str(tmp_path), jobs=1), 0.46)
    kept = json.loads((tmp_path / "results.json").read_text())["ppo-CartPole-v1"]
    assert (kept["load"], kept["cores"], kept["jobs"]) == ([0.5, 3.0], 8, 1)
    row = next(line for line in (tmp_path / "results.md").read_text().splitlines()
               if line.startswith('| <a id="ppo-cartpole-v1"'))
    assert "†" not in row
    assert {k: kept[k] for k in ("script", "env_id", "label", "window", "threshold", "goal",
                                 "eval_threshold", "holds_on_eval")} == {
        "script": "ppo", "env_id": "CartPole-v1", "label": "", "window": 20, "threshold": 475,
        "goal": task.goal, "eval_threshold": False, "holds_on_eval": False}
    assert kept["statistics"]["holds"] == [1, 2]
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == "ppo-CartPole-v1"
    assert lines[1].startswith("  seed 1: ends at 475.0 (holds), first reached at step 50,")
    assert lines[2].startswith("  seed 2: ends at 474.9 (does not hold), first reached at step 100,")


def test_report_task_reads_an_evaluation_goals_end_on_the_evaluation(tmp_path, monkeypatch,
                                                                     capsys):
    # qlearning-Taxi-v4 holds on its final greedy evaluation (holds_on_eval): a seed whose
    # training mean is far below the threshold but whose evaluation is at it holds, and the
    # line says the evaluation's figure; one without an evaluation has no end and does not hold
    from types import SimpleNamespace
    monkeypatch.setattr(benchmark, "plot_task", lambda *args: None)
    task = next(t for t in benchmark.TASKS["qlearning"] if t.env_id == "Taxi-v4")
    runs = [run(1, end=task.threshold - 100, evaluation=float(task.threshold), solve_step=None),
            run(2, end=task.threshold + 100, evaluation=None, solve_step=None)]
    benchmark.report_task(task, runs, SimpleNamespace(out=str(tmp_path), jobs=1), 0.0)
    lines = capsys.readouterr().out.splitlines()
    assert lines[1].startswith(f"  seed 1: ends at {float(task.threshold)} (holds)")
    assert lines[2].startswith("  seed 2: ends at None (does not hold)")
    kept = json.loads((tmp_path / "results.json").read_text())[task.name]
    assert kept["holds_on_eval"] is True and kept["statistics"]["holds"] == [1, 1]


def test_budget_is_the_last_total_timesteps_the_flags_give_else_the_scripts_default():
    # tyro takes the last of a repeated flag; a task without the flag runs the script's default
    import ppo
    twice = benchmark.Task("ppo", "CartPole-v1", 475, "a goal",
                           flags=["--total-timesteps", "100", "--seed", "3",
                                  "--total-timesteps", "2500"])
    assert benchmark.budget(twice) == 2500
    plain = benchmark.Task("ppo", "CartPole-v1", 475, "a goal", flags=["--seed", "3"])
    assert benchmark.budget(plain) == ppo.Args().total_timesteps
    assert benchmark.budget(plain) != 2500


def test_the_dqn_minatar_command_is_the_minatar_papers_dqn_with_its_named_departures():
    # DQN_MINATAR read as dqn.py reads flags, against the comment above it (the MinAtar
    # paper's DQN, Young & Tian 2019): one environment, a step of 32 transitions every
    # environment step, target copied every 1,000, epsilon 1 -> 0.1 over 0.1 of 1M, replay of
    # 100k from step 5,000, Huber loss, a constant rate (2.5e-4), no double DQN; departures:
    # an evaluation at epsilon 0.05, gradients clipped at dqn.py's 10, gamma 0.99.
    import dqn
    import tyro
    args = tyro.cli(dqn.Args, args=benchmark.DQN_MINATAR)
    assert dict(total_timesteps=args.total_timesteps, num_envs=args.num_envs,
                buffer_size=args.buffer_size, batch_size=args.batch_size,
                learning_rate=args.learning_rate, train_frequency=args.train_frequency,
                gradient_steps=args.gradient_steps,
                target_network_frequency=args.target_network_frequency,
                learning_starts=args.learning_starts, start_e=args.start_e, end_e=args.end_e,
                exploration_fraction=args.exploration_fraction, loss=args.loss,
                anneal_lr=args.anneal_lr, double_dqn=args.double_dqn,
                eval_epsilon=args.eval_epsilon, max_grad_norm=args.max_grad_norm,
                gamma=args.gamma) == dict(
        total_timesteps=1_000_000, num_envs=1, buffer_size=100_000, batch_size=32,
        learning_rate=2.5e-4, train_frequency=1, gradient_steps=1, target_network_frequency=1000,
        learning_starts=5000, start_e=1.0, end_e=0.1, exploration_fraction=0.1, loss="huber",
        anneal_lr=False, double_dqn=False, eval_epsilon=0.05, max_grad_norm=10.0, gamma=0.99)


def test_the_ppo_minatar_command_is_cleanrls_ppo_atari_at_1e_3_and_1m_steps():
    # PPO_MINATAR read as ppo.py reads flags: CleanRL's ppo_atari.py (8 environments of 128
    # steps, 4 minibatches, 4 epochs, clip 0.1, value loss clipped, entropy 0.01, value 0.5,
    # norm 0.5, gamma 0.99, GAE 0.95, the rate annealed, advantages normalized), at the rate
    # 1e-3 and 1M steps: the command gives the budget, ppo.py's image preset the rest
    import ppo
    import tyro
    args = ppo.fill_preset(tyro.cli(ppo.Args, args=benchmark.PPO_MINATAR), "image")
    assert dict(total_timesteps=args.total_timesteps, num_envs=args.num_envs,
                num_steps=args.num_steps, learning_rate=args.learning_rate,
                anneal_lr=args.anneal_lr, gamma=args.gamma, gae_lambda=args.gae_lambda,
                num_minibatches=args.num_minibatches, update_epochs=args.update_epochs,
                norm_adv=args.norm_adv, clip_coef=args.clip_coef, clip_vloss=args.clip_vloss,
                ent_coef=args.ent_coef, vf_coef=args.vf_coef,
                max_grad_norm=args.max_grad_norm) == dict(
        total_timesteps=1_000_000, num_envs=8, num_steps=128, learning_rate=1e-3,
        anneal_lr=True, gamma=0.99, gae_lambda=0.95, num_minibatches=4, update_epochs=4,
        norm_adv=True, clip_coef=0.1, clip_vloss=True, ent_coef=0.01, vf_coef=0.5,
        max_grad_norm=0.5)
    # each MinAtar task of dqn.py and pqn.py runs its preset as it is, ppo.py's with its
    # game's own rate in place (PPO_MINATAR_PER_GAME); all over a 100-episode window
    for script, preset in (("dqn", benchmark.DQN_MINATAR), ("pqn", benchmark.PQN_MINATAR),
                           ("ppo", benchmark.PPO_MINATAR)):
        games = [t for t in benchmark.TASKS[script] if t.env_id.startswith("MinAtar/")]
        assert len(games) == 5 and all(t.window == 100 for t in games)
        for t in games:
            game = t.env_id[len("MinAtar/"):-len("-v1")]
            own = benchmark.PPO_MINATAR_PER_GAME.get(game, []) if script == "ppo" else []
            assert t.flags == benchmark.with_values(preset, own), t.name


def test_a_comparisons_legend_names_only_its_own_members_script():
    # a legend that names a script (ppo_rnd.py, ppo.py, ...) names first the one its task
    # runs: the PPO+RND-beside-PPO figures must not give ppo.py's curve ppo_rnd.py's name
    import re
    tasks = {t.name: t for s in benchmark.TASKS.values() for t in s}
    for name, (_, members) in benchmark.COMPARISONS.items():
        for task_name, legend in members.items():
            assert task_name in tasks, (name, task_name)
            named = re.findall(r"\b(\w+)\.py\b", legend)  # its own first ("ppo.py with
            assert named[:1] in ([], [tasks[task_name].script]), (name, legend)  # ppod.py's flags")
    # and the ppo_rnd-vs-ppo figures exist for the tuning task and the three held out
    assert {n for n in benchmark.COMPARISONS if n.startswith("ppo_rnd-vs-ppo-")} == {
        f"ppo_rnd-vs-ppo-{env}" for env in ("MountainCar-v0", "SparseChain-v0",
                                            "MountainCarContinuous-v0", "Pendulum-v1",
                                            "InvertedDoublePendulum-v5", "Swimmer-v5")}


def written_seeds(runs):
    """A task's seeds as a protocol sentence writes them: "101-103", or "seed 1" alone."""
    seeds = sorted(run["seed"] for run in runs)
    assert seeds == list(range(seeds[0], seeds[-1] + 1)), seeds
    return f"seed {seeds[0]}" if len(seeds) == 1 else f"{seeds[0]}-{seeds[-1]}"


def test_each_protocol_states_the_seeds_its_tasks_ran_and_a_held_out_runs_budget():
    # docs/algorithms.py's protocol sentences (each algorithm page's "Results at a glance"):
    # every task a sentence names is in results.json, with the seeds the sentence states; a
    # held-out task's sentence (issue 107) states its budget too, as 500000 or 500k
    from benchmarks import cleanrl_compare as compare
    sys.path.insert(0, os.path.join(os.path.dirname(benchmark.__file__), "docs"))
    from algorithms import ALGORITHMS
    with open(os.path.join(os.path.dirname(benchmark.__file__), "benchmarks",
                           "results.json")) as f:
        results = json.load(f)
    budgets = {t.name: benchmark.budget(t) for s in benchmark.TASKS.values() for t in s}
    budgets.update({t.name: compare.budget(pair) for pair in compare.PAIRS.values()
                    for t in (pair.ours, pair.cleanrl_task)})
    held_out = 0
    for script, algorithm in ALGORITHMS.items():
        for names, text in algorithm.protocols:
            for name in names:
                assert name in results, (script, name)
                assert written_seeds(results[name]["runs"]) in text, (script, name, text)
                if any(n.endswith("-held-out") for n in names):  # and what it is beside
                    steps = budgets[name]
                    assert str(steps) in text or f"{steps // 1000}k" in text, (script, name)
                    held_out += 1
    # ppo.py's six pairs, sac.py's three, dqn.py's and pqn.py's three each (two sides each),
    # ppo_rnd.py's three held-out runs beside ppo.py's on both pages, vpg.py's, trpo.py's,
    # ppo_lstm.py's, es.py's and impala.py's six each and ppo.py's Reacher run:
    # 12 + 6 + 6 + 6 + 2 * 6 + 5 * 6 + 1
    assert held_out == 73


def test_the_presets_are_held_out_on_three_environments_of_each_family():
    # issue 107: at least three environments per family on which none of these scripts'
    # presets was chosen (their tuning sets: CartPole-v1 for every discrete preset, Pendulum-v1
    # for ppo_lstm.py's, es.py's and impala.py's continuous ones, Hopper-v5 for trpo.py's
    # source), the discrete ones classic control or Box2D, the continuous ones MuJoCo; each of
    # the scripts runs all six, and each environment has its figure
    import gymnasium as gym
    discrete, continuous = benchmark.HELD_OUT["discrete"], benchmark.HELD_OUT["continuous"]
    assert len(set(discrete)) >= 3 and len(set(continuous)) >= 3
    assert not {"CartPole-v1", "Pendulum-v1", "Hopper-v5"} & set(discrete + continuous)
    for env_id in discrete:
        assert gym.spec(env_id).entry_point.startswith(("gymnasium.envs.classic_control",
                                                        "gymnasium.envs.box2d")), env_id
    for env_id in continuous:
        assert gym.spec(env_id).entry_point.startswith("gymnasium.envs.mujoco"), env_id
    for script in ("vpg", "trpo", "es", "ppo_lstm", "impala"):
        ran = sorted(t.env_id for t in benchmark.TASKS[script] if t.label == "held-out")
        assert ran == sorted(discrete + continuous), script
    assert {name for name in benchmark.COMPARISONS if name.startswith("held-out-")} == {
        f"held-out-{env_id}" for env_id in discrete + continuous}

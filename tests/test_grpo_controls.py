"""Tests of benchmarks/grpo_controls.py's reading of its runs, on run folders written here by
hand: the report (results.json, results.md's table and counts: the warm start's row of
held_out.csv, GRPO's end, the better control on each measure, RL's gain and RL's own
contribution, the seeds and arms it counts), the figures' lines (matplotlib's Figure replaced
by a recorder) and record (the grpo arm's runs handed to benchmark.py, a stand-in here, and
the loads of run.log).
The numbers are chosen so that each wrong choice (another row, another control, another arm,
another folder) gives another number. The module is benchmarks/grpo_controls.py, or a copy
already imported as "grpo_controls" (a planted bug's: sys.modules["grpo_controls"])."""
import csv
import json
import os
import sys
import types

import pytest

from conftest import benchmark_module

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
COLUMNS = ["global_step", "wall_time", "accuracy", "pass@1", "pass@8", "answer_length",
           "kl_to_reference"]


@pytest.fixture(scope="module")
def controls():
    return benchmark_module("grpo_controls")  # a copy under test where one was imported


def write_run(seed_dir, name, rows, mtime, summary=None, pass_at_k=None):
    """A run folder seed_dir/name with held_out.csv's rows (step, accuracy, pass@1; the other
    columns filled), and summary.json and pass_at_k.csv where given; its mtime set."""
    folder = os.path.join(seed_dir, name)
    os.makedirs(folder)
    with open(os.path.join(folder, "held_out.csv"), "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(COLUMNS)
        for step, acc, p1 in rows:
            w.writerow([step, 1.5, acc, p1, 0.5, 3.0, 0.25])
    if summary is not None:
        json.dump(summary, open(os.path.join(folder, "summary.json"), "w"))
    if pass_at_k is not None:
        with open(os.path.join(folder, "pass_at_k.csv"), "w", newline="") as f:
            w = csv.writer(f)
            w.writerow(["k", "warm_start", "end"])
            w.writerows([k, a, b] for k, (a, b) in enumerate(pass_at_k, start=1))
    os.utime(folder, (mtime, mtime))
    return folder


# grpo seed 1: two rows of the warm start's own training (negative steps), its end (0), then
# GRPO's; the warm start is the row at step 0, never the first row nor another arm's
GRPO_1 = [(-200, 0.05, 0.04), (-100, 0.10, 0.08), (0, 0.20, 0.15), (128, 0.50, 0.40),
          (256, 0.90, 0.70)]
SHUFFLED_1 = [(0, 0.21, 0.16), (128, 0.25, 0.30), (256, 0.30, 0.45)]
SFT_1 = [(0, 0.22, 0.17), (128, 0.40, 0.20), (256, 0.55, 0.25)]
SFT_SLOW_1 = [(0, 0.23, 0.18), (128, 0.99, 0.99)]  # still running: fewer answers than GRPO's
# grpo seed 3: its newest folder (by mtime, though its name sorts first) is the one read
GRPO_3 = [(-50, 0.10, 0.10), (0, 0.40, 0.30), (256, 0.60, 0.65)]
GRPO_3_OLD = [(-50, 0.01, 0.01), (0, 0.02, 0.02), (256, 0.03, 0.03)]
SHUFFLED_3 = [(0, 0.41, 0.31), (256, 0.55, 0.35)]


def build(out):
    """Seeds 1 and 3 finished (seed<S>.process_s beside grpo's folder), seed 2 still running
    (no .process_s); arms grpo, shuffled, sft-0.001 and sft-0.0003 (seed 1's still running,
    seed 3 has only grpo and shuffled)."""
    runs = os.path.join(out, "runs")
    seed = lambda arm, s: os.path.join(runs, arm, f"seed{s}")  # noqa: E731
    write_run(seed("grpo", 1), "AdditionPartial-v0__grpo__1__500", GRPO_1, 1000,
              {"wall_time_s": 123.4}, [(0.15, 0.70), (0.25, 0.80)])
    write_run(seed("shuffled", 1), "AdditionPartial-v0__shuffled__1__600", SHUFFLED_1, 1000,
              {"wall_time_s": 999.0}, [(0.9, 0.9), (0.9, 0.9)])
    write_run(seed("sft-0.001", 1), "AdditionPartial-v0__sft-0.001__1__700", SFT_1, 1000)
    write_run(seed("sft-0.0003", 1), "AdditionPartial-v0__sft-0.0003__1__800", SFT_SLOW_1, 1000)
    write_run(seed("grpo", 2), "AdditionPartial-v0__grpo__2__500", [(0, 0.7, 0.7)], 1000,
              {"wall_time_s": 5.0}, [(0.5, 0.5)])
    write_run(seed("grpo", 3), "AdditionPartial-v0__grpo__3__100", GRPO_3, 3000,
              {"wall_time_s": 200.6}, [(0.30, 0.65), (0.40, 0.75)])
    write_run(seed("grpo", 3), "AdditionPartial-v0__grpo__3__900", GRPO_3_OLD, 2000,
              {"wall_time_s": 1.0}, [(0.0, 0.0), (0.0, 0.0)])
    write_run(seed("shuffled", 3), "AdditionPartial-v0__shuffled__3__600", SHUFFLED_3, 1000)
    for s in (1, 3):
        open(seed("grpo", s) + ".process_s", "w").write("100.0\n")


def row(step, acc, p1):
    return {"global_step": float(step), "wall_time": 1.5, "accuracy": acc, "pass@1": p1,
            "pass@8": 0.5, "answer_length": 3.0, "kl_to_reference": 0.25}


@pytest.fixture
def reported(controls, tmp_path, monkeypatch, capsys):
    """report on build's folders, draw replaced by a recorder: (results.json, results.md's
    text, what draw was given)."""
    out = str(tmp_path)
    build(out)
    drawn = []
    monkeypatch.setattr(controls, "draw", lambda o, curves, table: drawn.append((o, curves, table)))
    controls.report(out)
    capsys.readouterr()
    return (json.load(open(os.path.join(out, "results.json"))),
            open(os.path.join(out, "results.md")).read(), drawn)


def test_the_report_counts_the_finished_seeds_and_takes_grpos_step_0_row_as_the_warm_start(
        reported):
    # seeds 1 and 3 (seed 2 has no .process_s). The warm start is grpo's row at step 0:
    # seed 1 (0.20, 0.15), not its first row (-200: 0.05, 0.04) nor the one before 0 (-100:
    # 0.10, 0.08) nor shuffled's or sft's step 0 (0.21 / 0.22); seed 3 (0.40, 0.30), from
    # the newest folder (mtime 3000), not the older one whose name sorts after it (0.02)
    table, _, _ = reported
    assert [r["seed"] for r in table] == [1, 3]
    assert table[0]["warm_start"] == row(0, 0.20, 0.15)
    assert table[1]["warm_start"] == row(0, 0.40, 0.30)
    # GRPO's end is its last row: seed 1 (0.90, 0.70), seed 3 (0.60, 0.65)
    assert table[0]["ends"]["grpo"] == row(256, 0.90, 0.70)
    assert table[1]["ends"]["grpo"] == row(256, 0.60, 0.65)
    # RL's gain, GRPO's end less the warm start: seed 1 0.90 - 0.20 = 0.70, 0.70 - 0.15 = 0.55
    # (from row -200 it would be 0.85 and 0.66); seed 3 0.60 - 0.40 = 0.20, 0.65 - 0.30 = 0.35
    assert table[0]["rl_gain"] == pytest.approx({"accuracy": 0.70, "pass@1": 0.55})
    assert table[1]["rl_gain"] == pytest.approx({"accuracy": 0.20, "pass@1": 0.35})


def test_rls_own_contribution_is_grpos_end_less_the_better_finished_control_on_each_measure(
        reported):
    # seed 1's controls at 256 answers: shuffled (0.30, 0.45) and sft-0.001 (0.55, 0.25);
    # sft-0.0003 stopped at 128 (< GRPO's 256) and is left out (its 0.99 would win). The
    # better control on each measure: accuracy max(0.30, 0.55) = 0.55 (sft), pass@1
    # max(0.45, 0.25) = 0.45 (shuffled). RL's own: 0.90 - 0.55 = 0.35, 0.70 - 0.45 = 0.25.
    # (The worse control: 0.60 and 0.45; shuffled alone: 0.60 and 0.25; sft alone: 0.35
    # and 0.45.) Seed 3: shuffled alone (0.55, 0.35): 0.60 - 0.55 = 0.05, 0.65 - 0.35 = 0.30.
    table, _, _ = reported
    assert sorted(table[0]["ends"]) == ["grpo", "sft-0.001", "shuffled"]
    assert table[0]["ends"]["sft-0.001"] == row(256, 0.55, 0.25)
    assert table[0]["ends"]["shuffled"] == row(256, 0.30, 0.45)
    assert table[0]["best_control"] == pytest.approx({"accuracy": 0.55, "pass@1": 0.45})
    assert table[0]["rl_own"] == pytest.approx({"accuracy": 0.35, "pass@1": 0.25})
    assert sorted(table[1]["ends"]) == ["grpo", "shuffled"]
    assert table[1]["best_control"] == pytest.approx({"accuracy": 0.55, "pass@1": 0.35})
    assert table[1]["rl_own"] == pytest.approx({"accuracy": 0.05, "pass@1": 0.30})


def test_the_reports_seconds_and_pass_at_k_are_grpos(reported):
    # summary.json's wall_time_s and pass_at_k.csv of grpo's newest folder (shuffled's say
    # 999 and 0.9; seed 3's older folder 1.0 and 0.0)
    table, _, _ = reported
    assert [r["wall_time_s"] for r in table] == [123.4, 200.6]
    assert table[0]["pass_at_k_warm_start"] == [0.15, 0.25]
    assert table[0]["pass_at_k_end"] == [0.70, 0.80]
    assert table[1]["pass_at_k_warm_start"] == [0.30, 0.40]
    assert table[1]["pass_at_k_end"] == [0.65, 0.75]


def test_the_reports_markdown_table_and_counts(reported):
    # the arms in sorted order: sft-0.0003 before sft-0.001 ("0003" < "001"), a cell "-"
    # where an arm has no finished end; 3 decimals, the gains signed; GRPO's seconds rounded
    # (123.4 -> 123, 200.6 -> 201). Counts: gain >= 0.3 on accuracy: 0.70 yes, 0.20 no (1 of
    # 2), on pass@1 0.55, 0.35 (2 of 2); own >= 0.2 on accuracy 0.35, 0.05 (1 of 2), on
    # pass@1 0.25, 0.30 (2 of 2)
    _, text, _ = reported
    lines = text.splitlines()
    assert lines[0] == ("| seed | warm start (greedy; pass@1) | GRPO | shuffled | sft-0.0003 | "
                        "sft-0.001 | RL's gain (greedy; pass@1) | RL's own: GRPO less the better "
                        "control | GRPO s |")
    assert lines[1] == "|" + " --- |" * 9
    assert lines[2] == ("| 1 | 0.200; 0.150 | 0.900; 0.700 | 0.300; 0.450 | - | 0.550; 0.250 | "
                        "+0.700; +0.550 | +0.350; +0.250 | 123 |")
    assert lines[3] == ("| 3 | 0.400; 0.300 | 0.600; 0.650 | 0.550; 0.350 | - | - | "
                        "+0.200; +0.350 | +0.050; +0.300 | 201 |")
    assert [line for line in lines[4:] if line] == [
        "RL's gain >= 0.3 on accuracy: 1 of 2; RL's own >= 0.2: 1 of 2",
        "RL's gain >= 0.3 on pass@1: 2 of 2; RL's own >= 0.2: 2 of 2"]


def test_the_report_hands_draw_each_finished_arms_rows(reported, tmp_path):
    # the curves: every arm's rows by seed, an arm still running (sft-0.0003 on seed 1) or
    # not run (sft-0.001 on seed 3) left out; the table is results.json's
    table, _, drawn = reported
    ((out, curves, given),) = drawn
    assert out == str(tmp_path) and given == table
    assert sorted(curves) == ["grpo", "sft-0.0003", "sft-0.001", "shuffled"]
    assert curves["grpo"] == {1: [row(*r) for r in GRPO_1], 3: [row(*r) for r in GRPO_3]}
    assert curves["shuffled"] == {1: [row(*r) for r in SHUFFLED_1],
                                  3: [row(*r) for r in SHUFFLED_3]}
    assert curves["sft-0.001"] == {1: [row(*r) for r in SFT_1]}
    assert curves["sft-0.0003"] == {}


class Recorder:
    """Stands in for matplotlib's Figure and its axes: keeps every plot call."""
    def __init__(self, *args, **kwargs):
        self.axes = []

    def add_subplot(self, *args, **kwargs):
        self.axes.append(Axes())
        return self.axes[-1]

    def suptitle(self, *a, **k):
        pass

    def savefig(self, path, **kwargs):
        self.saved = path


class Axes:
    def __init__(self):
        self.lines = []

    def plot(self, xs, ys, *args, **kwargs):
        self.lines.append(([float(x) for x in xs], [float(y) for y in ys], kwargs))

    def __getattr__(self, name):  # set, grid, legend, set_title
        return lambda *a, **k: None


def test_the_figures_lines_are_each_seeds_rows_from_step_0_and_their_mean(controls, tmp_path,
                                                                          monkeypatch):
    # arms.png: for each measure, each seed's rows at steps >= 0 (the warm start's training,
    # step -100, left out), then the mean over seeds step by step; pass_at_k.png: the mean
    # over seeds of pass@k at the warm start and after GRPO, k = 1, 2.
    # grpo: seed 1 accuracy (0.2, 0.6), seed 2 (0.4, 1.0): mean (0.3, 0.8); pass@1 seed 1
    # (0.1, 0.5), seed 2 (0.3, 0.7): mean (0.2, 0.6). shuffled, one seed: its own rows.
    # pass@k: warm start ((0.1, 0.2) + (0.3, 0.6)) / 2 = (0.2, 0.4); end ((0.5, 0.7) +
    # (0.7, 0.9)) / 2 = (0.6, 0.8).
    figures = []
    fake = types.ModuleType("matplotlib.figure")
    fake.Figure = lambda *a, **k: figures.append(Recorder()) or figures[-1]
    monkeypatch.setitem(sys.modules, "matplotlib.figure", fake)
    curves = {"grpo": {1: [row(-100, 0.9, 0.9), row(0, 0.2, 0.1), row(256, 0.6, 0.5)],
                       2: [row(-100, 0.9, 0.9), row(0, 0.4, 0.3), row(256, 1.0, 0.7)]},
              "shuffled": {1: [row(0, 0.2, 0.1), row(256, 0.3, 0.2)]}, "sft-0.001": {}}
    table = [{"pass_at_k_warm_start": [0.1, 0.2], "pass_at_k_end": [0.5, 0.7]},
             {"pass_at_k_warm_start": [0.3, 0.6], "pass_at_k_end": [0.7, 0.9]}]
    controls.draw(str(tmp_path), curves, table)
    arms, pass_k = figures
    assert arms.saved == os.path.join(str(tmp_path), "arms.png")
    assert pass_k.saved == os.path.join(str(tmp_path), "pass_at_k.png")
    accuracy, pass1 = arms.axes
    for ax, (one, two, mean), (shuffled, shuffled_mean) in (
            (accuracy, ([0.2, 0.6], [0.4, 1.0], [0.3, 0.8]), ([0.2, 0.3], [0.2, 0.3])),
            (pass1, ([0.1, 0.5], [0.3, 0.7], [0.2, 0.6]), ([0.1, 0.2], [0.1, 0.2]))):
        assert [xs for xs, _, _ in ax.lines] == [[0, 256]] * 5
        for (_, ys, _), expected in zip(ax.lines, (one, two, mean, shuffled, shuffled_mean)):
            assert ys == pytest.approx(expected)
        assert ax.lines[2][2]["label"] == "GRPO (mean of 2)"
        assert ax.lines[4][2]["label"] == "GRPO, rewards shuffled in each group (mean of 1)"
    (ax,) = pass_k.axes
    assert [xs for xs, _, _ in ax.lines] == [[1, 2], [1, 2]]
    assert ax.lines[0][1] == pytest.approx([0.2, 0.4])
    assert ax.lines[1][1] == pytest.approx([0.6, 0.8])
    assert [kw["label"] for _, _, kw in ax.lines] == ["the warm start (mean of 2 seeds)",
                                                      "after GRPO (mean of 2 seeds)"]


def fake_benchmark(monkeypatch, out):
    """benchmark.py as record sees it, without its imports' seconds (rliable): TASKS's grpo
    rows (the task by name among others), read_run recording the folder it was given (its
    path under out) and report_task keeping its arguments; returns that list."""
    given, task = [], types.SimpleNamespace(name="grpo-AdditionPartial-v0", script="grpo")
    fake = types.ModuleType("benchmark")
    fake.TASKS = {"grpo": [types.SimpleNamespace(name="grpo-AdditionPartial-v0-dapo"), task,
                           types.SimpleNamespace(name="grpo-Addition-v0")],
                  "rlhf": [types.SimpleNamespace(name="grpo-AdditionPartial-v0")]}
    fake.read_run = lambda t, p: {"task": t.name, "read": os.path.relpath(p, out)}
    fake.report_task = lambda *a: given.append(a)
    monkeypatch.setitem(sys.modules, "benchmark", fake)
    return given


def test_record_hands_benchmark_the_grpo_arms_seeds_and_run_logs_grpo_loads(controls, tmp_path,
                                                                            monkeypatch):
    # record: for each grpo seed folder (3, 1, 10: sorted as numbers, 1, 3, 10), its process
    # seconds rounded to 3 decimals and benchmark.read_run of that folder (recorded here as
    # its path); run.log's loads of the grpo lines only (3.5, 1.25, 2.0: [1.25, 3.5]; the
    # shuffled line's 9.0 and sft's line without a load are not grpo's); the command names
    # the seeds in order and the jobs
    out = str(tmp_path / "out")
    for seed, seconds in ((3, "20.12345\n"), (1, "7.5\n"), (10, "0.0004\n")):
        os.makedirs(os.path.join(out, "runs", "grpo", f"seed{seed}"))
        open(os.path.join(out, "runs", "grpo", f"seed{seed}.process_s"), "w").write(seconds)
    os.makedirs(os.path.join(out, "runs", "shuffled", "seed2"))
    open(os.path.join(out, "runs", "shuffled", "seed2.process_s"), "w").write("5\n")
    open(os.path.join(out, "run.log"), "w").write(
        "grpo seed 1: 300 s (load 3.5)\nshuffled seed 1: 280 s (load 9.0)\n"
        "sft-0.001 seed 1: 100 s\ngrpo seed 3: 310 s (load 1.25)\ngrpo seed 10: 1 s (load 2.0)\n")
    given = fake_benchmark(monkeypatch, out)
    controls.record(out, str(tmp_path / "bench"), 3)
    ((task, runs, args, load, entry),) = given
    assert task.name == "grpo-AdditionPartial-v0" and task.script == "grpo"
    t = "grpo-AdditionPartial-v0"
    assert runs == [
        {"seed": 1, "process_s": 7.5, "task": t, "read": os.path.join("runs", "grpo", "seed1")},
        {"seed": 3, "process_s": 20.123, "task": t, "read": os.path.join("runs", "grpo", "seed3")},
        {"seed": 10, "process_s": 0.0, "task": t, "read": os.path.join("runs", "grpo", "seed10")}]
    assert args.out == str(tmp_path / "bench") and args.jobs == 3
    assert entry == {"command": "python benchmarks/grpo_controls.py run --seeds 1 3 10 --jobs 3 "
                                "(its grpo arm: the task's command with --save-model)",
                     "load": [1.25, 3.5]}


def test_record_without_run_log_gives_no_load(controls, tmp_path, monkeypatch):
    # no run.log (run's console not kept): the entry has the command alone
    out = str(tmp_path)
    os.makedirs(os.path.join(out, "runs", "grpo", "seed4"))
    open(os.path.join(out, "runs", "grpo", "seed4.process_s"), "w").write("1\n")
    given = fake_benchmark(monkeypatch, out)
    controls.record(out, out, 1)
    ((_, runs, _, _, entry),) = given
    assert runs == [{"seed": 4, "process_s": 1.0, "task": "grpo-AdditionPartial-v0",
                     "read": os.path.join("runs", "grpo", "seed4")}]
    assert entry == {"command": "python benchmarks/grpo_controls.py run --seeds 4 --jobs 1 "
                                "(its grpo arm: the task's command with --save-model)"}

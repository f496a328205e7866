"""Tests of plot.py, the tool that compares run folders: the smoothing, the band over seeds
and the evaluation points against numbers worked out by hand, on made-up run folders;
the grouping and the table; real folders written by tiny runs of qlearning.py and ppo.py;
every bad input (CONTRIBUTING.md, "Bad input"); benchmark.py's comparison figure, drawn
through plot.py."""
import ast
import csv
import glob
import json
import os

import numpy as np
import pytest
import tyro

import benchmark
import plot
import ppo
import qlearning
from conftest import ROOT, approx, check_import_is_quiet

PNG = b"\x89PNG\r\n\x1a\n"


# ---------------------------------------------------------------------------------------
# Made-up run folders
# ---------------------------------------------------------------------------------------
def write_csv(path, header, rows):
    with open(path, "w", newline="") as f:
        csv.writer(f).writerows([header, *rows])


FINISHED = {"interrupted": False}


def write_run(folder, config, episodes, evaluations=None, summary=FINISHED):
    """A run folder as the scripts write it; episodes: (global_step, episode_return) rows,
    wall_time = global_step / 10; evaluations: (global_step, eval_return_mean) rows;
    summary: summary.json's content (by default a finished run's), None for no summary.json
    (a run that was killed)."""
    os.makedirs(folder)
    with open(os.path.join(folder, "config.json"), "w") as f:
        json.dump({"env_id": "Made-v0", "exp_name": "made", **config}, f)
    write_csv(os.path.join(folder, "episodes.csv"),
              ["global_step", "wall_time", "episode_return", "episode_length"],
              [(s, s / 10, r, 5) for s, r in episodes])
    if evaluations is not None:
        write_csv(os.path.join(folder, "evaluations.csv"),
                  ["global_step", "wall_time", "eval_return_mean", "eval_return_std"],
                  [(s, s / 10, r, 0.0) for s, r in evaluations])
    if summary is not None:
        with open(os.path.join(folder, "summary.json"), "w") as f:
            json.dump(summary, f)
    return str(folder)


def summary_of(train, evaluation, solved, wall, steps, holds=None):
    return {"train_return_last20": train, "eval_return_mean": evaluation,
            "solved_at_step": solved, "wall_time_s": wall, "global_steps": steps,
            "holds": holds, "interrupted": False}


@pytest.fixture
def made_up(tmp_path):
    """Runs A and B (num_steps 16, with evaluations.csv), C (num_steps 8, killed: no
    summary.json, so left out without --include-unfinished) and D (an --eval-checkpoint
    folder: no episode). Returns the glob."""
    runs = tmp_path / "runs"
    # A: two episodes end at step 20 (a vector of environments)
    write_run(runs / "A", {"seed": 1, "num_steps": 16}, [(10, 1), (20, 3), (20, 5), (30, 7)],
              evaluations=[(10, 5), (20, 7), (30, 8)],
              summary=summary_of(4.0, 8.0, 20, 3.0, 30, holds=False))
    write_run(runs / "B", {"seed": 2, "num_steps": 16}, [(15, 2), (25, 6)],
              evaluations=[(10, 9), (22, 11)], summary=summary_of(6.0, 11.0, None, 2.0, 26))
    write_run(runs / "C", {"seed": 3, "num_steps": 8}, [(5, 0), (10, 0)], summary=None)
    write_run(runs / "D", {"seed": 4, "num_steps": 8}, [])
    return str(runs / "*")


def table_rows(stdout):
    """The printed table's rows, split into cells (cells are at least two spaces apart)."""
    lines = [line for line in stdout.splitlines() if not line.startswith("plot.py:")]
    return [[cell.strip() for cell in line.split("  ") if cell.strip()] for line in lines]


def drawn_figure(monkeypatch):
    """Make plot.main keep the figure it draws; returns the list it goes into."""
    figures, draw = [], plot.draw_figure
    monkeypatch.setattr(plot, "draw_figure", lambda *a: figures.append(draw(*a)) or figures[-1])
    return figures


# ---------------------------------------------------------------------------------------
# The math, by hand
# ---------------------------------------------------------------------------------------
def test_moving_mean_by_hand():
    # returns 1, 3, 5, 7; window 2: 1, (1+3)/2=2, (3+5)/2=4, (5+7)/2=6
    assert plot.moving_mean([1, 3, 5, 7], 2).tolist() == approx([1, 2, 4, 6])
    # window 3: 1, 2, (1+3+5)/3=3, (3+5+7)/3=5; window 10 (more than there are): running mean
    assert plot.moving_mean([1, 3, 5, 7], 3).tolist() == approx([1, 2, 3, 5])
    assert plot.moving_mean([1, 3, 5, 7], 10).tolist() == approx([1, 2, 3, 4])


def test_band_over_seeds_by_hand():
    # Seed A, smoothed (window 2) from episodes ending at 10, 20, 20, 30 with returns 1, 3, 5,
    # 7: points (10, 1), (20, 2), (20, 4), (30, 6); at step 20 the last counts: (20, 4).
    # Seed B: episodes at 15, 25, returns 2, 6: points (15, 2), (25, 4).
    # On the grid 10, 15, 20, 25, 30 (linear between a seed's points, missing outside them):
    #   A: 1, (1+4)/2=2.5, 4, (4+6)/2=5, 6          B: -, 2, (2+4)/2=3, 4, -
    #   mean 1, (2.5+2)/2=2.25, (4+3)/2=3.5, (5+4)/2=4.5, 6
    #   low  1, 2, 3, 4, 6      high 1, 2.5, 4, 5, 6      seeds present 1, 2, 2, 2, 1
    a = ([10, 20, 20, 30], [1, 2, 4, 6])
    b = ([15, 25], [2, 4])
    mean, low, high, count = plot.band([a, b], [10, 15, 20, 25, 30])
    assert mean.tolist() == approx([1, 2.25, 3.5, 4.5, 6])
    assert low.tolist() == approx([1, 2, 3, 4, 6])
    assert high.tolist() == approx([1, 2.5, 4, 5, 6])
    assert count.tolist() == [1, 2, 2, 2, 1]
    # seeds that do not overlap: at 20 neither is present
    mean, low, high, count = plot.band([([10, 15], [1, 2]), ([25, 30], [3, 4])], [10, 20, 30])
    assert count.tolist() == [1, 0, 1] and np.isnan([mean[1], low[1], high[1]]).all()
    assert mean[[0, 2]].tolist() == approx([1, 4])


def test_band_median_by_hand():
    # three seeds on the grid 0, 10: A 0 -> 10, B 1 -> 1, C 8 -> 100 (each a straight line)
    #   at 0:  values 0, 1, 8    median 1, mean 3;    at 10: 10, 1, 100   median 10, mean 37
    curves = [([0, 10], [0, 10]), ([0, 10], [1, 1]), ([0, 10], [8, 100])]
    median, low, high, count = plot.band(curves, [0, 10], center="median")
    assert median.tolist() == approx([1, 10]) and low.tolist() == [0, 1]
    assert high.tolist() == [8, 100] and count.tolist() == [3, 3]
    # where a seed is missing, the median of the two present is their mean: at 5, A 5, C 54
    median, *_ = plot.band([([0, 10], [0, 10]), ([6, 10], [1, 1]), ([0, 10], [8, 100])], [5],
                           center="median")
    assert median.tolist() == approx([(5 + 54) / 2])
    assert plot.band(curves, [0, 10])[0].tolist() == approx([3, 37])  # the mean by default


def test_evaluation_points_by_hand():
    # A evaluates at 10, 20, 30 (returns 5, 7, 8); B at 10, 22 (returns 9, 11).
    # 1st: at (10+10)/2=10, mean (5+9)/2=7, min 5, max 9; 2nd: at (20+22)/2=21, mean
    # (7+11)/2=9, min 7, max 11; 3rd: A alone, at 30, 8 (min = max = 8)
    a = {"global_step": np.array([10, 20, 30]), "eval_return_mean": np.array([5, 7, 8])}
    b = {"global_step": np.array([10, 22]), "eval_return_mean": np.array([9, 11])}
    x, mean, low, high = plot.evaluation_points([a, b])
    assert x.tolist() == approx([10, 21, 30]) and mean.tolist() == approx([7, 9, 8])
    assert low.tolist() == approx([5, 7, 8]) and high.tolist() == approx([9, 11, 8])


# ---------------------------------------------------------------------------------------
# The glue: made-up run folders through main
# ---------------------------------------------------------------------------------------
def test_made_up_runs_grouped_drawn_and_tabled(made_up, tmp_path, monkeypatch, capsys):
    figures = drawn_figure(monkeypatch)
    monkeypatch.setattr(plot, "GRID_POINTS", 5)
    out = tmp_path / "fig" / "made.png"
    groups = plot.main(plot.Args(runs=[made_up], window=2, group_by="num-steps", out=str(out),
                                 include_unfinished=True))
    stdout = capsys.readouterr().out
    assert f"left out {os.path.join(os.path.dirname(made_up), 'D')}" in stdout
    assert out.read_bytes()[:8] == PNG
    # --group-by num_steps: 8 before 16 (numbers sorted as numbers, not as text)
    assert list(groups) == [("Made-v0", "num_steps=8"), ("Made-v0", "num_steps=16")]
    assert [os.path.basename(r["folder"]) for r in groups["Made-v0", "num_steps=16"]] == ["A", "B"]

    # The group of A and B, drawn on the grid 10, 15, 20, 25, 30 (GRID_POINTS 5): the numbers
    # of test_band_over_seeds_by_hand, since A's and B's files smooth (window 2) to them.
    # Solid where both seeds are present (15, 20, 25), dotted at the ends and beside them.
    (ax,) = figures[0].axes
    solid = next(line for line in ax.lines if line.get_label() == "num_steps=16 (2 seeds)")
    dotted = ax.lines[ax.lines.index(solid) + 1]
    assert solid.get_xdata().tolist() == approx([10, 15, 20, 25, 30])
    assert np.isnan(solid.get_ydata()[[0, 4]]).all()
    assert solid.get_ydata()[1:4].tolist() == approx([2.25, 3.5, 4.5])
    assert dotted.get_ls() == ":" and np.isnan(dotted.get_ydata()[2])
    assert dotted.get_ydata()[[0, 1, 3, 4]].tolist() == approx([1, 2.25, 4.5, 6])
    band = ax.collections[1].get_paths()[0].vertices  # the group's shaded min-max band
    for x, y in [(15, 2), (15, 2.5), (20, 3), (20, 4), (25, 4), (25, 5), (30, 6)]:
        assert np.isclose(band, [x, y]).all(axis=1).any()
    # its evaluations, as in test_evaluation_points_by_hand: points (10, 7), (21, 9), (30, 8)
    # with bars 5..9, 7..11, 8..8; then its final evaluations (summary.json: A 8 at step 30,
    # B 11 at step 26), one diamond at (30+26)/2=28, (8+11)/2=9.5, its bar 8..11
    container, final = ax.containers
    points, _, (bars,) = container.lines
    assert points.get_xdata().tolist() == approx([10, 21, 30])
    assert points.get_ydata().tolist() == approx([7, 9, 8])
    assert [s[:, 1].tolist() for s in bars.get_segments()] == [[5, 9], [7, 11], [8, 8]]
    diamond, _, (bar,) = final.lines
    assert diamond.get_marker() == "D" and final.get_label().endswith("final greedy evaluation")
    assert (diamond.get_xdata().tolist(), diamond.get_ydata().tolist()) == ([28], [9.5])
    assert [s[:, 1].tolist() for s in bar.get_segments()] == [[8, 11]]

    # C, averaged in by --include-unfinished, is counted as unfinished in its legend
    assert [line.get_label() for line in ax.lines if not line.get_label().startswith("_")] == [
        "num_steps=8 (1 seed, 1 unfinished)", "num_steps=16 (2 seeds)"]

    # The table: C alone (no summary.json: every figure missing), then A and B:
    # holds: A says false, B says nothing (null): 0 of 1; train (4+6)/2=5.0, eval
    # (8+11)/2=9.5, solved 20 (only A), wall (3+2)/2=2.5, steps (30+26)/2=28
    header, c, ab = table_rows(stdout)
    assert header == ["environment", "group", "runs", "seeds", "holds", *plot.SUMMARY_FIGURES]
    assert c == ["Made-v0", "num_steps=8", "1 (1 unfinished)", "1", "-", "-", "-", "-", "-", "-"]
    assert ab == ["Made-v0", "num_steps=16", "2", "2", "0 of 1", "5.0", "9.5", "20 (1/2)", "2.5",
                  "28"]


def test_the_table_puts_each_groups_median_under_its_own_heading(tmp_path, capsys, monkeypatch):
    # Three finished runs, every figure different, so that a mean in place of the median, or a
    # figure under another's heading, shows: train 1, 2, 90 -> median 2 (mean 31); eval 10,
    # 40, 50 -> 40 (mean 33.3); solved 300, null, 100 -> (100+300)/2 = 200 over 2 of 3;
    # wall 7, 5, 6 -> 6; steps 1000, 3000, 2000 -> 2000. holds true, false, true: 2 of 3.
    monkeypatch.setattr(plot, "draw_figure", lambda *a: plot.Figure())
    runs = tmp_path / "runs"
    for name, summary in [("A", summary_of(1.0, 10.0, 300, 7.0, 1000, holds=True)),
                          ("B", summary_of(2.0, 40.0, None, 5.0, 3000, holds=False)),
                          ("C", summary_of(90.0, 50.0, 100, 6.0, 2000, holds=True))]:
        write_run(runs / name, {"seed": ord(name)}, [(5, 1), (10, 2)], summary=summary)
    plot.main(plot.Args(runs=[str(runs / "*")], out=str(tmp_path / "t.png")))
    header, row = table_rows(capsys.readouterr().out)
    assert dict(zip(header, row)) == {
        "environment": "Made-v0", "group": "made", "runs": "3", "seeds": "3", "holds": "2 of 3",
        "train_return_last20": "2.0", "eval_return_mean": "40.0", "solved_at_step": "200 (2/3)",
        "wall_time_s": "6.0", "global_steps": "2000"}


def test_made_up_runs_by_exp_name_against_wall_time(made_up, monkeypatch, capsys, tmp_path):
    # the default grouping by exp_name ("made") still splits by num_steps, a flag that changes
    # the task: A and B, then C, each label naming the flag; --x wall_time draws against the
    # wall_time column (step / 10): A and B from A's first episode, 1.0, to A's last, 3.0
    figures = drawn_figure(monkeypatch)
    monkeypatch.chdir(tmp_path)
    groups = plot.main(plot.Args(runs=[made_up], x="wall_time", include_unfinished=True))
    assert {label: len(runs) for (_, label), runs in groups.items()} == {
        "made num_steps=16": 2, "made num_steps=8": 1}
    # the default --out: plots/ in the current folder
    assert (tmp_path / "plots" / "Made-v0__by-exp_name.png").read_bytes()[:8] == PNG
    assert sorted(os.listdir(tmp_path)) == ["plots", "runs"]  # nothing else written here
    line = figures[0].axes[0].lines[0]
    assert line.get_label() == "made num_steps=16 (2 seeds)"
    assert line.get_xdata()[[0, -1]].tolist() == approx([1.0, 3.0])
    assert [row[:4] for row in table_rows(capsys.readouterr().out)[1:]] == [
        ["Made-v0", "made num_steps=16", "2", "2"],
        ["Made-v0", "made num_steps=8", "1 (1 unfinished)", "1"]]


def test_a_folder_that_is_not_a_run_is_skipped_with_one_warning_line(made_up, run_cli, tmp_path):
    runs = tmp_path / "runs"
    (runs / "notes").mkdir()
    (runs / "notes" / "todo.txt").write_text("compare with dqn\n")
    (runs / "Made-v0__by-exp_name.png").write_bytes(PNG)  # a figure saved among the runs
    write_run(runs / "E", {"seed": 5, "num_steps": 8}, [(10, 1)])
    os.remove(runs / "E" / "episodes.csv")  # a run killed before it wrote its first file
    code, out, err = run_cli("plot.py", [made_up, "--out", str(tmp_path / "f.png"),
                                         "--include-unfinished"])
    assert code == 0, err
    assert err == (f"plot.py: warning: skipped 3 folders that are not a run: "
                   f"{runs / 'E'} (has no episodes.csv), "
                   f"{runs / 'Made-v0__by-exp_name.png'} (has no config.json), "
                   f"{runs / 'notes'} (has no config.json)\n")
    assert [row[1:3] for row in table_rows(out)[1:]] == [["made num_steps=16", "2"],
                                                          ["made num_steps=8", "1 (1 unfinished)"]]


@pytest.mark.parametrize("include", [False, True])
def test_unfinished_runs_are_left_out_and_named_unless_included(include, tmp_path, monkeypatch,
                                                                 capsys):
    # Three seeds of one group: A finished; B interrupted (Ctrl-C: summary.json says so, with
    # no evaluation); C killed (no summary.json). B's returns of 100 would pull the mean up.
    figures = drawn_figure(monkeypatch)
    monkeypatch.setattr(plot, "GRID_POINTS", 3)
    runs = tmp_path / "runs"
    a = write_run(runs / "A", {"seed": 1}, [(10, 2), (20, 4)],
                  summary=summary_of(3.0, 5.0, None, 2.0, 20, holds=True))
    b = write_run(runs / "B", {"seed": 2}, [(10, 100), (20, 100)],
                  summary={**summary_of(100.0, None, None, 1.0, 20), "interrupted": True})
    c = write_run(runs / "C", {"seed": 3}, [(10, 0), (20, 0)], summary=None)
    groups = plot.main(plot.Args(runs=[str(runs / "*")], window=2, out=str(tmp_path / "f.png"),
                                 include_unfinished=include))
    stdout = capsys.readouterr().out
    (line, *_), (row,) = figures[0].axes[0].lines, table_rows(stdout)[1:]
    assert line.get_xdata().tolist() == approx([10, 15, 20])  # the grid: 10 to 20, 3 points
    if not include:
        # A alone: smoothed (window 2) 2, then (2+4)/2=3; on the grid 2, 2.5, 3
        assert [r["folder"] for r in groups["Made-v0", "made"]] == [a]
        assert (f"plot.py: left out 2 runs that did not finish (add --include-unfinished to "
                f"average them in): {b} (interrupted), {c} (no summary.json: killed, or still "
                "running)\n") in stdout
        assert line.get_label() == "made (1 seed)"
        assert line.get_ydata().tolist() == approx([2, 2.5, 3])
        assert row == ["Made-v0", "made", "1", "1", "1 of 1", "3.0", "5.0", "-", "2.0", "20"]
    else:
        # A, B, C: at 10 (2+100+0)/3=34, at 15 (2.5+100+0)/3=34.1667, at 20 (3+100+0)/3=34.3333
        assert [r["folder"] for r in groups["Made-v0", "made"]] == [a, b, c]
        assert "left out" not in stdout
        assert line.get_label() == "made (3 seeds, 2 unfinished)"
        assert line.get_ydata().tolist() == approx([34, 102.5 / 3, 103 / 3])
        # the medians over the summaries there are: train (3+100)/2=51.5 of 2, eval 5.0 of 1
        # (B's run skipped it), wall (2+1)/2=1.5 of 2, steps 20 of 2; only A says it holds
        assert row == ["Made-v0", "made", "3 (2 unfinished)", "3", "1 of 1", "51.5 (2/3)",
                       "5.0 (1/3)", "-", "1.5 (2/3)", "20 (2/3)"]


def lstm_config(seed, hide_obs, **rest):
    return {"exp_name": "ppo_lstm", "seed": seed, "hide_obs": hide_obs, "learning_rate": 0.001,
            "output_dir": "runs", "cuda": True, "eval_every": 0, "capture_video": False, **rest}


def test_runs_are_grouped_by_every_flag_that_changes_the_task(tmp_path, monkeypatch):
    # ppo_lstm with --hide-obs 1 3 (seeds 1, 2) and without (seeds 1, 2): two groups whose
    # labels name the flag; flags that do not change what is learned (output_dir, cuda,
    # eval_every, capture_video, stop_at_return, ...) do not split a group
    runs = tmp_path / "runs"
    write_run(runs / "a", lstm_config(1, [1, 3]), [(10, 1)])
    write_run(runs / "b", lstm_config(2, [1, 3], output_dir="elsewhere", cuda=False,
                                      eval_every=500, stop_at_return=200.0), [(10, 2)])
    write_run(runs / "c", lstm_config(1, []), [(10, 3)])
    write_run(runs / "d", lstm_config(2, [], capture_video=True), [(10, 4)])
    # the same flags but another learning rate: a third group, labelled by what differs
    write_run(runs / "e", lstm_config(1, [], learning_rate=0.01), [(10, 5)])
    monkeypatch.chdir(tmp_path)
    groups = plot.main(plot.Args(runs=[str(runs / "*")]))
    assert {label: [os.path.basename(r["folder"]) for r in members]
            for (_, label), members in groups.items()} == {
        "ppo_lstm hide_obs=[1, 3] learning_rate=0.001": ["a", "b"],
        "ppo_lstm hide_obs=[] learning_rate=0.001": ["c", "d"],
        "ppo_lstm hide_obs=[] learning_rate=0.01": ["e"]}
    # with --group-by, the other flags that differ still split and label the groups
    groups = plot.main(plot.Args(runs=[str(runs / "*")], group_by="learning_rate"))
    assert [label for _, label in groups] == ["learning_rate=0.001 hide_obs=[1, 3]",
                                              "learning_rate=0.001 hide_obs=[]",
                                              "learning_rate=0.01"]


def test_the_flags_that_do_not_split_groups_are_flags_of_the_scripts():
    fields = set()
    for path in glob.glob(os.path.join(ROOT, "*.py")):
        with open(path) as f:
            fields |= {node.target.id for cls in ast.parse(f.read()).body
                       if isinstance(cls, ast.ClassDef) and cls.name in ("Args", "RunFlags")
                       for node in cls.body if isinstance(node, ast.AnnAssign)}
    assert plot.NOT_TASK_FLAGS - {"device", "versions"} <= fields  # config.json's extras
    assert {"seed", "output_dir", "exp_name", "cuda", "eval_every", "eval_episodes",
            "save_model", "capture_video"} <= plot.NOT_TASK_FLAGS


def test_runs_and_distinct_seeds_are_counted(tmp_path, monkeypatch, capsys):
    # two runs of seed 1 and one of seed 2 in one group: "3 runs, 2 seeds"
    figures = drawn_figure(monkeypatch)
    for name, seed in [("a", 1), ("b", 1), ("c", 2)]:
        write_run(tmp_path / "runs" / name, {"seed": seed}, [(10, 1), (20, 2)])
    plot.main(plot.Args(runs=[str(tmp_path / "runs" / "*")], out=str(tmp_path / "f.png")))
    assert figures[0].axes[0].lines[0].get_label() == "made (3 runs, 2 seeds)"
    assert table_rows(capsys.readouterr().out)[1][:4] == ["Made-v0", "made", "3", "2"]
    assert plot.count_runs([1, 1]) == "2 runs, 1 seed"
    assert plot.count_runs([1]) == "1 seed" and plot.count_runs([3, 1, 2]) == "3 seeds"


def test_table_figures_keep_two_significant_digits():
    # one decimal, or as many as two significant digits need
    assert [plot.format_figure(v, 1) for v in (0.74, 0.0312, 7.88, 475.26, 0.0, -0.74)] == [
        "0.74", "0.031", "7.9", "475.3", "0.0", "-0.74"]
    # counts (no decimals) stay whole: a step is not rounded to two significant digits
    assert [plot.format_figure(v, 0) for v in (5, 12345.0)] == ["5", "12345"]


# ---------------------------------------------------------------------------------------
# Real run folders: tiny runs of qlearning.py and ppo.py
# ---------------------------------------------------------------------------------------
QLEARNING_CARTPOLE = ["--bins", "1", "1", "6", "12", "--obs-low", "-2.4", "-3", "-0.21", "-3.5",
                      "--obs-high", "2.4", "3", "0.21", "3.5", "--total-timesteps", "1000"]
PPO_TINY = ["--total-timesteps", "128", "--num-envs", "2", "--num-steps", "16",
            "--num-minibatches", "2", "--update-epochs", "1", "--no-cuda"]


@pytest.fixture(scope="module")
def real_runs(tmp_path_factory):
    """CartPole-v1: qlearning.py and ppo.py, seeds 1 and 2; FrozenLake-v1: qlearning.py,
    seed 1. Returns the runs folder."""
    runs = tmp_path_factory.mktemp("real") / "runs"
    commands = [(qlearning, ["--env-id", "CartPole-v1", *QLEARNING_CARTPOLE], "12"),
                (ppo, ["--env-id", "CartPole-v1", *PPO_TINY], "12"),
                (qlearning, ["--env-id", "FrozenLake-v1", "--total-timesteps", "300"], "1")]
    for script, flags, seeds in commands:
        for seed in seeds:
            script.main(tyro.cli(script.Args, args=[*flags, "--seed", seed, "--eval-episodes",
                                                     "1", "--output-dir", str(runs)]))
    return runs


def summaries(runs, pattern):
    found = []
    for path in sorted(glob.glob(os.path.join(runs, pattern, "summary.json"))):
        with open(path) as f:
            found.append(json.load(f))
    return found


def test_runs_of_two_scripts(real_runs, run_cli, tmp_path):
    out = tmp_path / "compare.png"
    code, stdout, err = run_cli("plot.py", [str(real_runs / "CartPole-v1__*"),
                                            str(real_runs / "FrozenLake*"), "--out", str(out)])
    assert code == 0, err
    assert out.read_bytes()[:8] == PNG and f"plot.py: wrote {out}" in stdout
    header, *rows = table_rows(stdout)
    assert [row[:3] for row in rows] == [["CartPole-v1", "ppo", "2"],
                                         ["CartPole-v1", "qlearning", "2"],
                                         ["FrozenLake-v1", "qlearning", "1"]]
    # the medians of two runs are the mean of their summary.json figures
    for row, pattern in zip(rows, ["CartPole-v1__ppo__*", "CartPole-v1__qlearning__*",
                                   "FrozenLake-v1__qlearning__*"]):
        found = summaries(real_runs, pattern)
        for name in ("train_return_last20", "wall_time_s", "global_steps"):
            expected = sum(s[name] for s in found) / len(found)
            assert row[header.index(name)] == plot.format_figure(expected,
                                                                 plot.SUMMARY_FIGURES[name])


def test_group_by_a_flag_of_real_runs(real_runs, run_cli, tmp_path):
    # ppo.py's learning rate 0.004 and qlearning.py's 0.1, on CartPole; "--group-by
    # learning-rate" is config.json's learning_rate
    code, stdout, err = run_cli("plot.py", [str(real_runs / "CartPole-v1__*"), "--group-by",
                                            "learning-rate", "--out", str(tmp_path / "lr.png")])
    assert code == 0, err
    _, *rows = table_rows(stdout)
    assert [row[:3] for row in rows] == [["CartPole-v1", "learning_rate=0.004", "2"],
                                         ["CartPole-v1", "learning_rate=0.1", "2"]]


def test_one_run_folder_as_its_closing_line_names_it(tmp_path, monkeypatch, capsys):
    # python plot.py <run folder>, the command a run's closing line ends with (a run draws no
    # figure of its own), on a tiny ppo.py run with --eval-every 64: the line is the run's
    # episode returns, each the mean of the last 20 (of all, while fewer have ended) at the
    # step it ended (the last of a step's episodes counts), so it ends at summary.json's
    # train_return_last20; the points are evaluations.csv's rows (one seed: no bar); the
    # final evaluation a diamond at the last step; the table has summary.json's figures, the
    # final evaluation among them.
    figures = drawn_figure(monkeypatch)
    monkeypatch.chdir(tmp_path)
    summary = ppo.main(tyro.cli(ppo.Args, args=[*PPO_TINY, "--env-id", "CartPole-v1",
                                                "--eval-every", "64", "--eval-episodes", "2",
                                                "--output-dir", str(tmp_path / "runs")]))
    (folder,) = glob.glob(str(tmp_path / "runs" / "*"))
    capsys.readouterr()
    plot.main(plot.Args(runs=[folder]))
    with open(os.path.join(folder, "episodes.csv")) as f:
        episodes = [(int(r["global_step"]), float(r["episode_return"])) for r in csv.DictReader(f)]
    returns = [r for _, r in episodes]
    smoothed = {step: np.mean(returns[max(0, i - 19):i + 1])
                for i, (step, _) in enumerate(episodes)}
    (ax,) = figures[0].axes
    (line,) = [line for line in ax.lines if line.get_label() == "ppo (1 seed)"]
    x, y = line.get_xdata(), line.get_ydata()
    assert len(episodes) >= 2 and (x[0], x[-1]) == (episodes[0][0], episodes[-1][0])
    assert y.tolist() == approx(np.interp(x, list(smoothed), list(smoothed.values())).tolist())
    assert y[-1] == approx(summary["train_return_last20"])
    with open(os.path.join(folder, "evaluations.csv")) as f:
        rows = [(int(r["global_step"]), float(r["eval_return_mean"])) for r in csv.DictReader(f)]
    container, final = ax.containers
    points, _, (bars,) = container.lines
    assert [(x, y) for x, y in zip(points.get_xdata(), points.get_ydata())] == rows
    assert [s[:, 1].tolist() for s in bars.get_segments()] == [[m, m] for _, m in rows]
    assert [step for step, _ in rows] == [64, 128]
    # the final evaluation, after the last update, a diamond at the run's last step
    diamond = final.lines[0]
    assert diamond.get_xdata().tolist() == [summary["global_steps"]]
    assert diamond.get_ydata().tolist() == approx([summary["eval_return_mean"]])
    header, row = table_rows(capsys.readouterr().out)
    assert row[:4] == ["CartPole-v1", "ppo", "1", "1"]
    for name in ("train_return_last20", "eval_return_mean", "global_steps"):
        assert row[header.index(name)] == plot.format_figure(summary[name],
                                                             plot.SUMMARY_FIGURES[name])


# ---------------------------------------------------------------------------------------
# Bad input: one line, exit status 2, no figure
# ---------------------------------------------------------------------------------------
def bad_folder(tmp_path, kind):
    """A folder that is not a usable run folder, of the kind named."""
    folder = tmp_path / "runs" / kind
    if kind == "no-episodes-csv":
        write_run(folder, {}, [])
        os.remove(folder / "episodes.csv")
    elif kind == "no-config-json":
        write_run(folder, {}, [(10, 1)])
        os.remove(folder / "config.json")
    elif kind == "corrupt-config-json":
        write_run(folder, {}, [(10, 1)])
        (folder / "config.json").write_text("{not json")
    elif kind == "episodes-csv-without-returns":
        write_run(folder, {}, [])
        write_csv(folder / "episodes.csv", ["global_step", "wall_time"], [(10, 1.0)])
    elif kind == "no-episode":
        write_run(folder, {}, [])
    elif kind == "interrupted":
        write_run(folder, {}, [(10, 1)], summary={"interrupted": True})
    return str(folder)


@pytest.mark.parametrize("argv, message", [
    ([], "give run folders or glob patterns"),
    (["{tmp}/nothing-here/*"], "no run folder matches"),
    (["{tmp}/runs/no-episodes-csv"], "has no episodes.csv: give run folders"),
    (["{tmp}/runs/no-config-json"], "has no config.json: give run folders"),
    (["{tmp}/runs"], "has no config.json: give run folders"),  # the folder above the runs
    (["{tmp}/runs/corrupt-config-json"], "cannot read"),
    (["{tmp}/runs/episodes-csv-without-returns"], "has no column episode_return"),
    (["{tmp}/runs/no-episode"], "none of the run folders has a finished training episode"),
    (["{tmp}/runs/interrupted"], "none of the runs finished (interrupted): add --include-unf"),
    (["{made_up}", "--group-by", "gae_lamda"], "unknown --group-by flag gae_lamda"),
    (["{made_up}", "--group-by", "num_step"], "did you mean num_steps?"),
    (["{made_up}", "{tmp}/runs/other-script", "--group-by", "num_steps"],
     "other-script has no flag num_steps"),
    (["{made_up}", "--window", "0"], "--window must be at least 1"),
    (["{made_up}", "--out", "{tmp}/figure.txt"], "give a file name ending in .png"),
])
def test_bad_input(argv, message, made_up, run_cli, tmp_path, monkeypatch):
    for kind in ("no-episodes-csv", "no-config-json", "corrupt-config-json",
                 "episodes-csv-without-returns", "no-episode", "interrupted"):
        bad_folder(tmp_path / "bad", kind)
    write_run(tmp_path / "bad" / "runs" / "other-script", {}, [(10, 1)])
    monkeypatch.chdir(tmp_path)
    argv = [a.format(tmp=tmp_path / "bad", made_up=made_up) for a in argv]
    code, _, err = run_cli("plot.py", argv)
    assert code == 2
    assert err.startswith("plot.py: error: ") and err.count("\n") == 1 and message in err
    assert not glob.glob(str(tmp_path / "**" / "*.png"), recursive=True)
    assert not glob.glob(str(tmp_path / "**" / "*.txt"), recursive=True)


@pytest.mark.slow  # a Python process of its own
def test_importing_plot_has_no_side_effects(tmp_path):
    check_import_is_quiet("plot", tmp_path)


# ---------------------------------------------------------------------------------------
# benchmark.py's comparison figures, drawn through plot.py from results.json's curves
# ---------------------------------------------------------------------------------------
def test_benchmark_comparison_drawn_by_plot(tmp_path, monkeypatch):
    # two tasks of two seeds each, with thinned curves as results.json keeps them
    # ([steps], [moving means]); seed 2 of "one" stops early, at step 20; each task is one
    # draw_group call with its seeds' curves and its legend
    results = {
        "one": {"threshold": 5, "window": 10, "runs": [
            {"seed": 1, "curve": [[0, 10, 30], [0.0, 2.0, 6.0]]},
            {"seed": 2, "curve": [[0, 20], [2.0, 4.0]]}]},
        "two": {"threshold": 5, "runs": [
            {"seed": 1, "curve": [[0, 30], [1.0, 1.0]]},
            {"seed": 2, "curve": [[0, 30], [3.0, 3.0]]}]},
    }
    calls, draw = [], plot.draw_group
    monkeypatch.setattr(plot, "draw_group", lambda ax, curves, label, **kw: calls.append(
        (curves, label)) or draw(ax, curves, label, **kw))
    monkeypatch.setattr(plot, "GRID_POINTS", 4)
    members = {"one": "the first", "two": "the second"}
    benchmark.plot_comparison("one-vs-two", "One beside two", members, results, str(tmp_path))
    assert (tmp_path / "one-vs-two.png").read_bytes()[:8] == PNG
    assert calls == [([r["curve"] for r in results[m]["runs"]], legend)
                     for m, legend in members.items()]
    # without curves for one of the tasks, no figure
    del results["two"]["runs"][1]["curve"]
    benchmark.plot_comparison("again", "Again", members, results, str(tmp_path))
    assert not (tmp_path / "again.png").exists()


def test_benchmark_comparison_of_evaluated_tasks_draws_their_evaluations_beside(tmp_path,
                                                                               monkeypatch):
    # crossq.py beside sac.py on Hopper-v5 at 100k: every run has --eval-every evaluations,
    # so a second panel draws each task's mean evaluation curve, and the threshold (the TD3
    # paper's 659, an evaluation figure) goes on that panel, not on the training one.
    from matplotlib.figure import Figure
    figures = []
    monkeypatch.setattr(Figure, "savefig", lambda fig, path: figures.append(fig))
    name, (title, members) = next((n, c) for n, c in benchmark.COMPARISONS.items()
                                  if n == "crossq-vs-sac-Hopper-v5-100k")
    assert list(members) == ["crossq-Hopper-v5-100k", "sac-Hopper-v5-100k"]
    results = {m: {"threshold": 659, "window": 100, "runs": [
        {"seed": 101, "curve": [[0, 50], [v, v + 1]], "evaluations": [[10, 20], [v, 2 * v]]}]}
        for m, v in zip(members, (100.0, 200.0))}
    calls, draw = [], plot.draw_group
    monkeypatch.setattr(plot, "draw_group", lambda ax, curves, label, **kw: calls.append(
        (curves, label, kw)) or draw(ax, curves, label, **kw))
    benchmark.plot_comparison(name, title, members, results, str(tmp_path))
    train, evaluation = figures[0].axes
    median = {"center": "median"}  # the tables give the median, so do the figures
    assert calls == [([[[0, 50], [100.0, 101.0]]], members["crossq-Hopper-v5-100k"], median),
                     ([[[0, 50], [200.0, 201.0]]], members["sac-Hopper-v5-100k"], median),
                     ([[[10, 20], [100.0, 200.0]]], members["crossq-Hopper-v5-100k"], median),
                     ([[[10, 20], [200.0, 400.0]]], members["sac-Hopper-v5-100k"], median)]

    def thresholds(ax):
        return [list(line.get_ydata()) for line in ax.lines if line.get_linestyle() == "--"]
    assert thresholds(train) == [] and thresholds(evaluation) == [[659, 659]]
    # the published curves on the evaluation panel alone, Hopper-v4's (ours run v5), each
    # dash-dotted in the color of our script of its algorithm: CrossQ's median over its 10
    # seeds reaches 3,169 at 100k (their mean, 2,764, is the paper's figure)
    with open(benchmark.REFERENCES["simbav2"]) as f:
        published = json.load(f)["curves"]
    drawn = {line.get_label(): line for line in evaluation.lines if line.get_linestyle() == "-."}
    assert [line.get_linestyle() for line in train.lines].count("-.") == 0
    crossq, sac = (next(line for label, line in drawn.items() if label.startswith(algorithm))
                   for algorithm in ("CrossQ", "SAC"))
    assert crossq.get_ydata().tolist() == published["CrossQ"]["Hopper-v4"]["median"]
    assert sac.get_ydata().tolist() == published["SAC"]["Hopper-v4"]["median"]
    assert crossq.get_xdata()[-1] == 100_000 and crossq.get_ydata()[-1] == approx(3169.0)
    assert published["CrossQ"]["Hopper-v4"]["mean"][-1] == approx(2764.4)
    from matplotlib.colors import to_rgb
    ours = {line.get_label(): to_rgb(line.get_color()) for line in evaluation.lines
            if line.get_linestyle() == "-"}
    assert to_rgb(crossq.get_color()) == ours[f"{members['crossq-Hopper-v5-100k']} (1 seed)"]
    assert to_rgb(sac.get_color()) == ours[f"{members['sac-Hopper-v5-100k']} (1 seed)"]
    assert to_rgb(crossq.get_color()) != to_rgb(sac.get_color())


def reference_tool(name):
    """benchmarks/<name>.py, a tool that cuts a paper's published curves, imported by path."""
    import importlib.util
    spec = importlib.util.spec_from_file_location(name, os.path.join(ROOT, "benchmarks",
                                                                     f"{name}.py"))
    tool = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(tool)
    return tool


def test_simbav2_reference_by_hand(tmp_path, capsys):
    # benchmarks/simbav2_reference.py on made-up files: seeds 0, 1, 2 of Hopper-v4 at steps
    # 1, 2000 and 200,000 (cut: past 100k), and a step only seed 0 logged (dropped: a point
    # is over every seed). At 2000: values 10, 40, 100 -> median 40, low 10, high 100, mean 50.
    simbav2 = reference_tool("simbav2_reference")
    header = ["", "exp_name", "env_name", "seed", "metric", "env_step", "value"]
    rows = [[0, "x", "Hopper-v4", seed, "avg_return", step, value]
            for seed, values in ((0, (1, 10, 7)), (1, (2, 40, 7)), (2, (3, 100, 7)))
            for step, value in zip((1, 2000, 200_000), values)]
    rows += [[0, "x", "Hopper-v4", 0, "avg_return", 3000, 5.0],
             [0, "x", "Hopper-v4", 1, "avg_success", 2000, 0.0],
             [0, "x", "Walker2d-v4", 0, "avg_return", 2000, 999.0]]
    for name in ("crossq.csv", "sac.csv"):
        write_csv(tmp_path / name, header, rows)
    with open(tmp_path / "crossq.csv", newline="") as f:
        stats = simbav2.seed_statistics(list(csv.DictReader(f)), "Hopper-v4")
    assert stats == {"steps": [1, 2000], "median": [2.0, 40.0], "low": [1.0, 10.0],
                     "high": [3.0, 100.0], "mean": [2.0, 50.0], "seeds": 3}
    # main writes both algorithms' curves; an environment missing from a file is an error
    with pytest.raises(ValueError, match="HalfCheetah-v4"):
        simbav2.main([str(tmp_path), "--out", str(tmp_path / "out.json")])
    with pytest.raises(SystemExit) as stop:
        simbav2.main([str(tmp_path / "nowhere")])
    assert stop.value.code == 2 and "no crossq.csv, sac.csv" in capsys.readouterr().err


def test_td3_reference_by_hand(tmp_path, capsys):
    # benchmarks/td3_reference.py on made-up files: Hopper-v1 seeds 0, 1 and 3 (no 2: only
    # the files there count), entry i at step 5,000 x i. Seed 3 stops at entry 2, so entry 3
    # (15,000) is dropped: a point is over every seed. At 0: -1, -2, -3 -> median -2, low -3,
    # high -1, mean -6 / 3 = -2. At 5,000: 10, 40, 100 -> median 40, low 10, high 100, mean
    # 150 / 3 = 50. At 10,000: 7, 1, 4 -> median 4, low 1, high 7, mean 12 / 3 = 4. With
    # up_to 5,000 the curves end at entry 1.
    td3 = reference_tool("td3_reference")
    curves = {0: [-1.0, 10.0, 7.0, 500.0], 1: [-2.0, 40.0, 1.0, 600.0], 3: [-3.0, 100.0, 4.0]}
    for env_id, folder in (("Hopper-v1", "Hopper"), ("HalfCheetah-v1", "HalfCheetah")):
        os.makedirs(tmp_path / folder)
        for seed, values in curves.items():
            np.save(tmp_path / folder / f"TD3_{env_id}_{seed}.npy", np.array(values))
    loaded = td3.load_curves(str(tmp_path), "Hopper-v1")
    assert sorted(loaded) == [0, 1, 3]
    assert td3.seed_statistics(loaded) == {
        "steps": [0, 5000, 10000], "median": [-2.0, 40.0, 4.0], "low": [-3.0, 10.0, 1.0],
        "high": [-1.0, 100.0, 7.0], "mean": [-2.0, 50.0, 4.0], "seeds": 3}
    assert td3.seed_statistics(loaded, up_to=5000)["steps"] == [0, 5000]
    # Walker2d-v1's folder is Walker; without it the tool says so in one line, exit 2
    with pytest.raises(SystemExit) as stop:
        td3.main([str(tmp_path), "--out", str(tmp_path / "out.json")])
    assert stop.value.code == 2 and capsys.readouterr().err == (
        f"td3_reference.py: {tmp_path} has no Walker/TD3_Walker2d-v1_<seed>.npy; give TD3's "
        "learning_curves folder\n")
    os.makedirs(tmp_path / "Walker")
    np.save(tmp_path / "Walker" / "TD3_Walker2d-v1_5.npy", np.array([0.0, 8.0]))
    assert td3.main([str(tmp_path), "--out", str(tmp_path / "out.json")]) == 0
    with open(tmp_path / "out.json") as f:
        written = json.load(f)
    assert written["commit"] == td3.COMMIT and list(written["curves"]) == ["TD3"]
    assert written["curves"]["TD3"]["Walker2d-v1"] == {
        "steps": [0, 5000], "median": [0.0, 8.0], "low": [0.0, 8.0], "high": [0.0, 8.0],
        "mean": [0.0, 8.0], "seeds": 1}
    assert written["curves"]["TD3"]["HalfCheetah-v1"]["mean"] == [-2.0, 50.0, 4.0]
    with pytest.raises(SystemExit) as stop:
        td3.main([str(tmp_path / "nowhere")])
    assert stop.value.code == 2 and "has no Hopper/TD3_Hopper-v1_<seed>.npy" in \
        capsys.readouterr().err
    # the committed file: the highest mean over 10 seeds is the paper's Table 1 (9,636.95 /
    # 3,564.07 / 4,682.82), and the means at 100k (entry 20) and 300k (entry 60) are
    # benchmark.py's goals
    with open(td3.OUT) as f:
        published = json.load(f)["curves"]["TD3"]
    for env_id, table_1 in (("HalfCheetah-v1", 9636.95), ("Hopper-v1", 3564.07),
                            ("Walker2d-v1", 4682.82)):
        curve = published[env_id]
        assert curve["seeds"] == 10 and curve["steps"] == list(range(0, 1_000_001, 5000))
        assert max(curve["mean"]) == pytest.approx(table_1, abs=0.1)  # rounded to 0.1
        _, goal_100k, goal_300k = benchmark.MUJOCO_GOALS[env_id.replace("-v1", "-v5")]
        assert abs(curve["mean"][20] - goal_100k) < 1 and abs(curve["mean"][60] - goal_300k) < 1

"""Tests of benchmarks/rlhf_frontier.py on run folders written here by hand: the report's
table (arms in order, seeds, start, peak, end and gain as medians over seeds [min, max]), the
points of its two figures (Gao et al.'s proxy and gold scores against sqrt KL at the smallest
and the default beta; the gold score against the KL for every arm, each held-out row after
the start), matplotlib replaced by a recorder, and the answers table (each run's model, the
warm start of the first, the words the grammar forbids in brackets), rlhf.py's models tiny,
untrained and told apart by a stand-in greedy policy; and `run`'s rlhf.py command of each arm
and seed, subprocess.run replaced, read as rlhf.py reads it. The module is
benchmarks/rlhf_frontier.py, or a copy already imported as "rlhf_frontier" (a planted bug's)."""
import csv
import json
import os
import subprocess
import sys
import types
from dataclasses import asdict

import pytest
import torch
import tyro

from conftest import benchmark_module

import rlhf

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


@pytest.fixture(scope="module")
def frontier():
    return benchmark_module("rlhf_frontier")  # a copy under test where one was imported


def write_run(out, arm, seed, name, rows, end_return="none"):
    """out/runs/<arm>/seed<S>/<name>/ with held_out.csv's rows (step, proxy, gold, KL) and,
    unless end_return is "none", summary.json with it."""
    folder = os.path.join(out, "runs", arm, f"seed{seed}", name)
    os.makedirs(folder)
    with open(os.path.join(folder, "held_out.csv"), "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["global_step", "wall_time", "proxy_score", "gold_score", "kl_to_reference",
                    "answer_length"])
        for step, proxy, gold, kl in rows:
            w.writerow([step, 2.5, proxy, gold, kl, 4.0])
    if end_return != "none":
        json.dump({"end_return": end_return, "start_return": 0.0},
                  open(os.path.join(folder, "summary.json"), "w"))


# (step, proxy, gold, KL). ppo-beta0: three seeds, the gold score peaking while the proxy
# rises; seed 103's KL a hair below 0 at 1280 (sqrt KL 0 there)
PPO_0 = {101: [(0, 0.0, 0.10, 0.0), (1280, 0.5, 0.40, 4.0), (2560, 1.0, 0.30, 9.0),
               (3840, 1.5, -0.20, 16.0)],
         102: [(0, 0.0, 0.20, 0.0), (1280, 0.6, 0.60, 1.0), (2560, 1.2, 0.50, 4.0)],
         103: [(0, 0.1, 0.60, 0.0), (1280, 0.2, 0.35, -0.04), (2560, 0.4, 0.90, 2.56)]}
PPO_0_OLD = [(0, 9.0, 9.0, 9.0), (1280, 9.0, 9.0, 9.0)]  # an older run of seed 101
PPO_01 = {101: [(0, 0.0, 0.10, 0.0), (1280, 0.2, 0.30, 0.49), (2560, 0.3, 0.45, 1.44)]}
PPO_002 = {101: [(0, 0.0, 0.10, 0.0), (1280, 0.4, 0.35, 2.25)]}
DPO_005 = {101: [(0, 0.0, 0.10, 0.0), (1280, 0.3, 0.50, 6.25)],
          102: [(0, 0.0, 0.20, 0.0), (1280, 0.1, 0.40, 0.81)]}


def build(out):
    """ppo-beta0 (seeds 101-103, gains -0.30, 0.20, 0.70; seed 101 run twice, the newer
    folder's name sorting last), ppo-beta0.1 (seed 101), ppo-beta0.02 (seed 101, no gain:
    end_return None), dpo-beta0.05 (seeds 101 and 102, 102 without summary.json), dpo-beta1
    (a seed folder, no run yet)."""
    write_run(out, "ppo-beta0", 101, "Preference-v0__rlhf__101__1000", PPO_0_OLD, 9.0)
    for (seed, rows), gain in zip(PPO_0.items(), (-0.30, 0.20, 0.70)):
        write_run(out, "ppo-beta0", seed, f"Preference-v0__rlhf__{seed}__2000", rows, gain)
    write_run(out, "ppo-beta0.1", 101, "Preference-v0__rlhf__101__2000", PPO_01[101], 0.35)
    write_run(out, "ppo-beta0.02", 101, "Preference-v0__rlhf__101__2000", PPO_002[101], None)
    write_run(out, "dpo-beta0.05", 101, "Preference-v0__rlhf__101__2000", DPO_005[101], 0.45)
    write_run(out, "dpo-beta0.05", 102, "Preference-v0__rlhf__102__2000", DPO_005[102])
    os.makedirs(os.path.join(out, "runs", "dpo-beta1", "seed101"))


class Axes:
    """Stands in for a matplotlib Axes: keeps plot's and scatter's points and style."""
    def __init__(self):
        self.lines, self.points = [], []

    def plot(self, xs, ys, style, **kwargs):
        self.lines.append(([float(x) for x in xs], [float(y) for y in ys], style, kwargs))

    def scatter(self, xs, ys, **kwargs):
        self.points.append(([float(x) for x in xs], [float(y) for y in ys], kwargs))

    def __getattr__(self, name):  # set, grid, legend, set_ylabel
        return lambda *a, **k: None


class Figure:
    def __init__(self, axes):
        self.axes = axes

    def savefig(self, path, **kwargs):
        self.saved = path

    def __getattr__(self, name):  # suptitle, tight_layout
        return lambda *a, **k: None


@pytest.fixture
def figures(monkeypatch):
    """matplotlib and pyplot replaced: the list of the figures drawn, in order."""
    drawn = []

    def subplots(nrows=None, ncols=None, **kwargs):
        if nrows is None:
            drawn.append(Figure(Axes()))
        else:
            drawn.append(Figure([[Axes() for _ in range(ncols)] for _ in range(nrows)]))
        return drawn[-1], drawn[-1].axes

    pyplot = types.ModuleType("matplotlib.pyplot")
    pyplot.subplots, pyplot.close = subplots, lambda fig: None
    matplotlib = types.ModuleType("matplotlib")
    matplotlib.use, matplotlib.pyplot = (lambda backend: None), pyplot
    monkeypatch.setitem(sys.modules, "matplotlib", matplotlib)
    monkeypatch.setitem(sys.modules, "matplotlib.pyplot", pyplot)
    return drawn


@pytest.fixture
def reported(frontier, tmp_path, figures, capsys):
    """report on build's folders: (its printed lines, the figures drawn, the figures' folder)."""
    out, folder = str(tmp_path / "out"), str(tmp_path / "figures")
    build(out)
    frontier.report(out, folder)
    return capsys.readouterr().out.splitlines(), figures, folder


def test_the_reports_table_by_hand(reported):
    # arms: PPO's first, each by beta as a number, then DPO's (dpo-beta0.05 after
    # ppo-beta0.1, its beta smaller); dpo-beta1 has no run, no row.
    # ppo-beta0, seeds 101-103 (101's newer folder): start gold 0.10, 0.20, 0.60: median
    # 0.20 (the mean would be 0.30); peak gold (the row of the highest gold, not of the
    # highest proxy) 0.40 at KL 4, 0.60 at KL 1, 0.90 at KL 2.56: median 0.60 at the median
    # KL 2.56 -> 2.6; end (the last row) gold -0.20, 0.50, 0.90; proxy 1.5, 1.2, 0.4; KL 16,
    # 4, 2.56; greedy gain summary.json's end_return -0.30, 0.20, 0.70.
    # ppo-beta0.02: its end_return None: no gain, n/a. dpo-beta0.05: seed 102 has no
    # summary.json: the gain of 101 alone; start 0.10, 0.20 (median 0.15), peaks 0.50 at KL
    # 6.25 and 0.40 at 0.81 (median KL (6.25 + 0.81) / 2 = 3.53 -> 3.5); end proxy 0.3, 0.1
    # (median 0.2), end KL 6.25, 0.81 (median 3.53).
    lines, _, _ = reported
    assert lines[0] == ("seeds 101, 102, 103; 40,960 completions a run; rlhf.py's held-out "
                        "schedule; medians over seeds [min, max]")
    assert lines[2:] == [
        "| arm | start gold | peak gold (at KL) | end gold | end proxy | end KL | greedy gain |",
        "| --- | --- | --- | --- | --- | --- | --- |",
        "| ppo-beta0 | +0.20 [+0.10, +0.60] | +0.60 [+0.40, +0.90] (KL 2.6) "
        "| +0.50 [-0.20, +0.90] | +1.20 [+0.40, +1.50] | 4.0 [2.6, 16.0] | +0.20 [-0.30, +0.70] |",
        "| ppo-beta0.02 | +0.10 [+0.10, +0.10] | +0.35 [+0.35, +0.35] (KL 2.2) "
        "| +0.35 [+0.35, +0.35] | +0.40 [+0.40, +0.40] | 2.2 [2.2, 2.2] | n/a |",
        "| ppo-beta0.1 | +0.10 [+0.10, +0.10] | +0.45 [+0.45, +0.45] (KL 1.4) "
        "| +0.45 [+0.45, +0.45] | +0.30 [+0.30, +0.30] | 1.4 [1.4, 1.4] | +0.35 [+0.35, +0.35] |",
        "| dpo-beta0.05 | +0.15 [+0.10, +0.20] | +0.45 [+0.40, +0.50] (KL 3.5) "
        "| +0.45 [+0.40, +0.50] | +0.20 [+0.10, +0.30] | 3.5 [0.8, 6.2] | +0.45 [+0.45, +0.45] |"]


def test_the_gao_figure_plots_proxy_and_gold_against_sqrt_kl_at_the_smallest_and_default_beta(
        reported):
    # PPO's betas 0, 0.02, 0.1: the panels are the smallest (0) and the default (0.1), not
    # 0.02. Each seed one line of the proxy (dashed) and one of the gold score (solid),
    # against sqrt(KL), a KL below 0 read as 0: seed 101 sqrt(0, 4, 9, 16) = (0, 2, 3, 4),
    # 102 sqrt(0, 1, 4) = (0, 1, 2), 103 sqrt(0, max(-0.04, 0), 2.56) = (0, 0, 1.6); beta 0.1
    # sqrt(0, 0.49, 1.44) = (0, 0.7, 1.2). The legend's labels on the first seed's lines only.
    _, figures, folder = reported
    gao, scatter = figures
    assert gao.saved == os.path.join(folder, "rlhf-Preference-v0-gao.png")
    assert scatter.saved == os.path.join(folder, "rlhf-Preference-v0-frontier.png")
    (zero, default), = gao.axes
    expected = []
    for x, seed in (([0, 2, 3, 4], 101), ([0, 1, 2], 102), ([0, 0, 1.6], 103)):
        expected += [(x, [r[1] for r in PPO_0[seed]], "--"), (x, [r[2] for r in PPO_0[seed]], "-")]
    for ax, want in ((zero, expected), (default, [([0, 0.7, 1.2], [0.0, 0.2, 0.3], "--"),
                                                  ([0, 0.7, 1.2], [0.10, 0.30, 0.45], "-")])):
        assert len(ax.lines) == len(want)
        for (xs, ys, style, _), (x, y, s) in zip(ax.lines, want):
            assert xs == pytest.approx(x) and ys == pytest.approx(y) and style == s
    assert [kw["label"] for *_, kw in zero.lines] == [
        "reward model's score (proxy)", "gold score", None, None, None, None]


def test_the_frontier_plots_every_arms_rows_after_the_start_gold_against_kl(reported):
    # one scatter an arm with runs, in the table's order, PPO's circles and DPO's triangles,
    # colours C0.. in turn; its points every seed's held-out rows after step 0 (the warm
    # start's row, KL 0, is every arm's and is left out), KL as written (not its square root)
    _, figures, _ = reported
    ax = figures[1].axes
    rows_after_start = lambda runs: [r for rows in runs.values() for r in rows[1:]]  # noqa: E731
    arms = [("ppo, beta 0", PPO_0, "o"), ("ppo, beta 0.02", PPO_002, "o"),
            ("ppo, beta 0.1", PPO_01, "o"), ("dpo, beta 0.05", DPO_005, "^")]
    assert len(ax.points) == 4
    for i, ((xs, ys, kw), (label, runs, marker)) in enumerate(zip(ax.points, arms)):
        rows = rows_after_start(runs)
        assert xs == pytest.approx([r[3] for r in rows])
        assert ys == pytest.approx([r[2] for r in rows])
        assert (kw["label"], kw["marker"], kw["color"]) == (label, marker, f"C{i}")
    # by hand, ppo-beta0's: KL 4, 9, 16, 1, 4, -0.04, 2.56; gold 0.4, 0.3, -0.2, 0.6, 0.5, 0.35, 0.9
    assert ax.points[0][0] == pytest.approx([4, 9, 16, 1, 4, -0.04, 2.56])
    assert ax.points[0][1] == pytest.approx([0.4, 0.3, -0.2, 0.6, 0.5, 0.35, 0.9])


def test_without_the_default_beta_the_gao_figure_has_the_smallest_alone(frontier, tmp_path,
                                                                        figures):
    # PPO at betas 0.05 and 0.2 only: one panel, beta 0.05's; and DPO's runs are never in it
    for arm, proxy, gold, kl in (("ppo-beta0.2", 0.1, 0.2, 0.25), ("ppo-beta0.05", 0.3, 0.4, 0.36),
                                 ("dpo-beta0.01", 0.5, 0.6, 0.09)):
        write_run(str(tmp_path), arm, 1, "r__1", [(0, 0.0, 0.0, 0.0), (1280, proxy, gold, kl)])
    frontier.report(str(tmp_path), str(tmp_path))
    (panel,), = figures[0].axes
    (px, proxy, dashed, _), (gx, gold, solid, _) = panel.lines  # sqrt(0.36) = 0.6
    assert px == gx == pytest.approx([0.0, 0.6]) and (dashed, solid) == ("--", "-")
    assert proxy == pytest.approx([0.0, 0.3]) and gold == pytest.approx([0.0, 0.4])


# ---------------------------------------------------------------------------------------
# The answers table
# ---------------------------------------------------------------------------------------
TINY = dict(n_layer=1, n_head=2, n_embd=16, seed=5)
# two prompts that end in an adjective (good, bad): a noun (joy gift film pain) follows each
PROMPTS = ["film looks very good", "pain seems quite bad"]
# each model's greedy completions of PROMPTS, by the marker in its value head's bias
TEXTS = {1.0: ["joy is truly", ""], 2.0: ["pain pain", "joy is"], 3.0: ["gift", "very great"],
         9.0: ["awful awful", "awful awful"]}


def save_run(folder, marker_of, **flags):
    """A run folder with config.json (rlhf.Args's fields and one that is not) and, for each
    file name, a tiny untrained policy whose value head's bias is its marker."""
    os.makedirs(folder)
    args = rlhf.Args(**{**TINY, **flags})
    json.dump({**asdict(args), "not_a_flag": 1}, open(os.path.join(folder, "config.json"), "w"))
    rlhf.register_tasks()
    tokenizer, prompt_len = rlhf.check_spaces(args, *rlhf.check_env(args))
    for name, marker in marker_of.items():
        policy = rlhf.make_policy(args, tokenizer, prompt_len)
        torch.nn.init.constant_(policy.v_head.bias, marker)
        torch.save({"policy": policy.state_dict()}, os.path.join(folder, name))


@pytest.mark.parametrize("posed", [2, 3])
def test_the_answers_table_by_hand(frontier, tmp_path, monkeypatch, capsys, posed):
    # two runs: the first's warm start (marker 1) and model (beta 0.1, ppo: marker 2), the
    # second's model (beta 0.05, dpo: marker 3; its warm_start.pt, marker 9, is not shown).
    # The prompts: the first 2 held-out ones, reset at seed 5 + 100,000. Each completion
    # read from the prompt's last word on (the grammar's cycle noun -> verb -> adverb ->
    # adjective -> noun), a forbidden transition's word in brackets:
    #   film looks very good: "joy is truly" (good-joy, joy-is, is-truly allowed); "pain pain"
    #     (good-pain allowed, pain-pain not: pain [pain]); "gift" (good-gift)
    #   pain seems quite bad: "" (empty); "joy is" (bad-joy, joy-is); "very great" (bad-very
    #     not: [very], very-great allowed)
    # and its gold score, here a stand-in's: its words / 4, less 1 for the second prompt.
    # Asked for 3, the evaluation poses the first prompt twice: the table shows it once, and
    # each model answers the 2 distinct prompts alone
    save_run(str(tmp_path / "a"), {"warm_start.pt": 1.0, "model.pt": 2.0}, beta=0.1, algo="ppo")
    save_run(str(tmp_path / "b"), {"warm_start.pt": 9.0, "model.pt": 3.0}, beta=0.05, algo="dpo")
    resets = []

    class Envs:
        def reset(self, seed=None):
            resets.append(seed)
            return [*PROMPTS, PROMPTS[0]][:posed], {}

        def close(self):
            pass

    made = []
    monkeypatch.setattr(rlhf, "make_vector_env",
                        lambda env_id, n: made.append((env_id, n)) or Envs())
    asked = []
    monkeypatch.setattr(rlhf, "greedy_policy", lambda models, envs: lambda obs, info: asked.append(
        list(obs)) or list(TEXTS[models["policy"].v_head.bias.item()]))
    golds = []
    monkeypatch.setattr(rlhf, "gold_score", lambda prompt, text: golds.append((prompt, text)) or (
        len(text.split()) / 4 - (prompt == PROMPTS[1])))
    frontier.answers([str(tmp_path / "a"), str(tmp_path / "b")], posed)
    assert made == [("Preference-v0", posed)] and resets == [100_005]
    assert asked == [list(PROMPTS)] * 3
    assert capsys.readouterr().out.splitlines() == [
        "| prompt | warm start | beta 0.1, ppo | beta 0.05, dpo |",
        "| --- | --- | --- | --- |",
        "| `film looks very good` | `joy is truly` (+0.75) | `pain [pain]` (+0.50) "
        "| `gift` (+0.25) |",
        "| `pain seems quite bad` | `(empty)` (-1.00) | `joy is` (-0.50) "
        "| `[very] great` (-0.50) |"]
    assert sorted(golds) == sorted((p, TEXTS[m][i]) for i, p in enumerate(PROMPTS)
                                   for m in (1.0, 2.0, 3.0))


# ---------------------------------------------------------------------------------------
# The runs: rlhf.py's command line of each arm and seed
# ---------------------------------------------------------------------------------------
def test_run_starts_rlhf_py_once_an_arm_and_seed_with_its_seed_budget_and_flags(
        frontier, tmp_path, monkeypatch):
    # `run --seeds 101 102 --ppo-betas 0 0.1 --dpo-betas 0.05`: arms ppo-beta0 (--beta 0),
    # ppo-beta0.1 (--beta 0.1) and dpo-beta0.05 (--algo dpo --beta 0.05), each on both seeds,
    # but ppo-beta0 of seed 102, whose held_out.csv is there already: 5 runs. Each is
    # `python rlhf.py` with the seed, --no-cuda, 40,960 completions (BUDGET, 4 times the
    # default's 10,240), --save-model (model.pt, for `answers`) and out/runs/<arm>/seed<S>,
    # its console in out/logs/<arm>-<seed>.log. Read as rlhf.py reads it (tyro), every other
    # flag stays at its default: DPO's arm at --dpo-learning-rate's, no --learning-rate.
    out = str(tmp_path / "out")
    write_run(out, "ppo-beta0", 102, "Preference-v0__rlhf__102__1000", PPO_0[102])
    started = []

    def fake_run(command, **kwargs):  # stands in for subprocess.run: nothing trains
        started.append((list(command), kwargs["cwd"], kwargs["check"], kwargs["stdout"].name))
        return subprocess.CompletedProcess(command, 0)

    monkeypatch.setattr(frontier.subprocess, "run", fake_run)
    monkeypatch.setattr(sys, "argv", ["rlhf_frontier.py", "run", "--seeds", "101", "102",
                                      "--ppo-betas", "0", "0.1", "--dpo-betas", "0.05",
                                      "--jobs", "1", "--out", out])
    frontier.main()
    assert frontier.BUDGET == 40_960
    flags = {"ppo-beta0": dict(beta=0.0), "ppo-beta0.1": dict(beta=0.1),
             "dpo-beta0.05": dict(algo="dpo", beta=0.05)}
    expected = [(arm, seed) for seed in (101, 102) for arm in flags
                if (arm, seed) != ("ppo-beta0", 102)]
    assert len(started) == len(expected) == 5
    for (command, cwd, check, log), (arm, seed) in zip(started, expected):
        assert command[:2] == [sys.executable, os.path.join(frontier.ROOT, "rlhf.py")]
        assert (cwd, check) == (frontier.ROOT, True)
        assert log == os.path.join(out, "logs", f"{arm}-{seed}.log")
        read = tyro.cli(rlhf.Args, args=command[2:])
        assert read == rlhf.Args(seed=seed, cuda=False, total_timesteps=40_960, save_model=True,
                                 output_dir=os.path.join(out, "runs", arm, f"seed{seed}"),
                                 **flags[arm]), (arm, seed)
    # the arms' own flags, written out: PPO's the beta alone, DPO's the algorithm and the beta
    assert frontier.arms([0, 0.1], [0.05]) == {
        "ppo-beta0": ["--beta", "0"], "ppo-beta0.1": ["--beta", "0.1"],
        "dpo-beta0.05": ["--algo", "dpo", "--beta", "0.05"]}

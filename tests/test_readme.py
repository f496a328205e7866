"""The README as a reader meets it: the front door (what plainrl is, the quickstart, the
scripts table, the site and its one command), at most MAX_LINES, its links leading somewhere
(benchmarks/results.md's rows and notes included); the environment snippet and command of
the guide's "Your own environment" page (which the README held before it went to the site)
run as written. Also benchmark.py's promise to keep results.md's notes written by hand.
The README's tables of MinAtar and MuJoCo results are on the site's benchmarks page now:
tests/test_site.py holds them equal to results.json there."""
import glob
import json
import os
import re
import shutil
import subprocess
import sys

import pytest

import benchmark
from conftest import ROOT, script_path

README = os.path.join(ROOT, "README.md")
RESULTS = os.path.join(ROOT, "benchmarks", "results.md")


def settings(task):
    """What a MinAtar or MuJoCo task's run trains with: its flags as its script reads them,
    the flags left at None from the preset its main takes (an image's; sac.py's and
    ddpg_td3.py's by the budget; otherwise the continuous one)."""
    import importlib

    import tyro
    module = importlib.import_module(task.script)
    args = tyro.cli(module.Args, args=task.flags)
    budget = getattr(module, "SHORT_BUDGET", None)
    family = ("image" if task.env_id.startswith("MinAtar/") else
              "continuous" if budget is None or args.total_timesteps <= budget else "continuous-long")
    return module.fill_preset(args, family)
GUIDE = os.path.join(ROOT, "docs", "guide")
# The front door (issue 55): what it said beyond the quickstart, the scripts table and the
# links into the site went to the site's pages (525 lines before)
MAX_LINES = 200


def read(path):
    with open(path, encoding="utf-8") as f:
        return f.read()


def fenced_blocks(text, language):
    """The bodies of the text's ```language blocks, in order."""
    return re.findall(rf"^```{language}\n(.*?)^```$", text, flags=re.M | re.S)


def anchors(text):
    """The link targets a Markdown file offers: its headings as GitHub slugs them (lower
    case, punctuation but - and _ dropped, spaces as -, a repeated slug numbered) and the
    explicit <a id="..."> or <a name="..."> anchors."""
    found, seen = set(), {}
    for heading in re.findall(r"^#+ (.+)$", re.sub(r"^```.*?^```$", "", text, flags=re.M | re.S),
                              flags=re.M):
        slug = re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")
        found.add(slug if slug not in seen else f"{slug}-{seen[slug]}")
        seen[slug] = seen.get(slug, 0) + 1
    return found | set(re.findall(r"<a (?:id|name)=\"([^\"]+)\"", text))


@pytest.mark.slow  # the guide's snippet run as a user runs it
def test_the_guides_environment_snippet_runs_as_written(tmp_path):
    """The guide's my_corridor.py (docs/guide/your-own-environment.md, the README's section
    before), written to a folder that plays the repository root (it holds ppo.py), and the
    page's command run there by a shell, with a tiny budget added at the end (the last value
    of a flag wins)."""
    text = read(os.path.join(GUIDE, "your-own-environment.md"))
    (snippet,) = [b for b in fenced_blocks(text, "python") if 'gym.register("Corridor-v0"' in b]
    (command,) = re.findall(r"^PYTHONPATH=\. python ppo\.py --env-id my_corridor:Corridor-v0.*$",
                            text, flags=re.M)
    (tmp_path / "my_corridor.py").write_text(snippet)
    shutil.copy(script_path("ppo.py"), tmp_path / "ppo.py")
    tiny = " --total-timesteps 256 --num-envs 2 --num-steps 64 --eval-episodes 2 --no-cuda"
    env = {**os.environ, "PATH": os.path.dirname(sys.executable) + os.pathsep + os.environ["PATH"]}
    env.pop("PYTHONPATH", None)
    done = subprocess.run(["bash", "-c", command + tiny], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    (folder,) = os.listdir(tmp_path / "runs")
    assert folder.startswith("my_corridor-Corridor-v0__ppo__1__")
    summary = json.loads((tmp_path / "runs" / folder / "summary.json").read_text())
    assert summary["env_id"] == "my_corridor:Corridor-v0" and summary["global_steps"] == 256
    # every episode ends at the goal (return 1 - 0.1 k) or at the 100-step limit (-10)
    episodes = (tmp_path / "runs" / folder / "episodes.csv").read_text().splitlines()[1:]
    assert episodes
    for row in episodes:
        _, _, episode_return, length = (float(x) for x in row.split(","))
        at_goal = abs(episode_return - (1.0 - 0.1 * (length - 1))) < 1e-6
        assert at_goal or (length == 100 and abs(episode_return + 10.0) < 1e-6)


def test_readme_stays_a_short_guide():
    lines = read(README).count("\n")
    assert lines <= MAX_LINES, f"README.md has {lines} lines; measurements go to benchmarks/results.md"


def test_the_readme_is_the_front_door():
    """What plainrl is, the quickstart, the scripts table with a row for every algorithm
    script the site has a page for, the command that builds and opens the site, and a link
    to every page of the guide (the sections that left the README)."""
    text = read(README)
    headings = re.findall(r"^## (.+)$", text, flags=re.M)
    assert headings[:3] == ["Quickstart", "The scripts", "The site"], headings
    algorithms = {}
    exec(read(os.path.join(ROOT, "docs", "algorithms.py")), algorithms)
    table = text.split("\n## The scripts\n")[1].split("\n## ")[0]
    rows = re.findall(r"^\| \[`(\w+)\.py`\]\(\1\.py\) \|", table, flags=re.M)
    assert rows == algorithms["ORDER"], rows
    site = text.split("\n## The site\n")[1].split("\n## ")[0]
    assert "pip install -r docs/requirements.txt && mkdocs serve --open" in site
    pages = sorted(f for f in os.listdir(GUIDE) if f.endswith(".md"))
    assert pages and all(f"](docs/guide/{page})" in site for page in pages), pages
    assert "](docs/img/tensorboard.png)" in site  # issue 60: the screenshot, from the README too


def row_words(row):
    """The words a reader reads in a table row: link targets left out, `|` not a word."""
    text = re.sub(r"\]\([^)]*\)", "]", row).replace("|", " ")
    return [w for w in text.split() if re.search(r"\w", w)]


def test_row_words_count_what_a_reader_reads():
    # "| [`a.py`](a.py) | x y | `python a.py` | [7.9](r.md#a) ([page](p.md)) | 16 s |":
    # `a.py`, x, y, `python, a.py`, 7.9], ([page]), 16, s = 9 words; the targets are not read
    assert len(row_words("| [`a.py`](a.py) | x y | `python a.py` | [7.9](r.md#a) "
                         "([page](p.md)) | 16 s |")) == 9


def test_the_scripts_table_is_a_row_a_newcomer_scans():
    """Issue 102: one row per script, the command, the result in one sentence and the time of
    a run, at most 40 words a row, each row linking its results.md row and its page."""
    table = read(README).split("\n## The scripts\n")[1].split("\n## ")[0]
    header = next(line for line in table.splitlines() if line.startswith("| script |"))
    assert [c.strip().split(" (")[0] for c in header.strip("|").split("|")] == [
        "script", "algorithm", "command", "where its runs end", "one run"]
    rows = [line for line in table.splitlines() if line.startswith("| [`")]
    assert len(rows) == 19
    for row in rows:
        script = re.match(r"\| \[`(\w+)\.py`\]", row).group(1)
        cells = [c.strip() for c in row.strip().strip("|").split("|")]
        assert len(row_words(row)) <= 40, (script, len(row_words(row)))
        assert cells[2].startswith(f"`python {script}.py") and cells[2].endswith("`"), script
        assert "](benchmarks/results.md#" in cells[3], script
        assert f"](docs/teach/{script}.md)" in cells[3], script
        assert re.search(r"\d+(\.\d+)? (s|min)\b", cells[4]), script


def test_readme_links_lead_somewhere():
    """Every relative link of the README names a file that exists and, after #, an anchor
    that file has (results.md's rows carry <a id="task-name"></a>)."""
    text = read(README)
    links = re.findall(r"\]\(([^)\s]+)\)", text)
    assert any(link.startswith("benchmarks/results.md#") for link in links)
    for link in links:
        if re.match(r"[a-z]+://", link):
            continue
        path, _, anchor = link.partition("#")
        target = os.path.join(ROOT, path) if path else README
        assert os.path.exists(target), f"README.md links to {path}, which does not exist"
        if anchor:
            assert anchor in anchors(read(target)), f"README.md links to {link}: no such anchor"


def test_benchmark_rewrites_its_table_and_keeps_the_notes(tmp_path):
    """write_results replaces everything above the NOTES line and keeps the line and what
    follows it; with no notes yet it ends results.md with the line."""
    results = {"ppo-CartPole-v1": {
        "script": "ppo", "env_id": "CartPole-v1", "label": "", "window": 20, "threshold": 475,
        "goal": "a goal", "jobs": 1, "date": "2026-11-23", "load": [0.5, 0.7],
        "runs": [{"seed": s, "solve_step": 1000 * s, "solve_s": 1.0 * s, "process_s": 2.0 * s,
                  "eval_return": 500.0, "sps": 100 * s} for s in (1, 2, 3)]}}
    benchmark.write_results(results, tmp_path)
    first = (tmp_path / "results.md").read_text()
    assert first.endswith("\n\n" + benchmark.NOTES + "\n")

    notes = benchmark.NOTES + "\n\n## Notes and further measurements\n\nA figure, by hand.\n"
    (tmp_path / "results.md").write_text("an old table\n\n" + notes)
    benchmark.write_results(results, tmp_path)
    second = (tmp_path / "results.md").read_text()
    assert "an old table" not in second and second.endswith("\n\n" + notes)
    row = next(line for line in second.splitlines() if "CartPole-v1" in line)
    assert row.startswith('| <a id="ppo-cartpole-v1"></a>ppo.py | CartPole-v1 | 475 (20) | 3 ')
    assert "| 2000 [1000, 3000] |" in row  # the median and range of the steps to 475
    benchmark.write_results(results, tmp_path)
    assert (tmp_path / "results.md").read_text() == second


def test_the_scripts_own_environment_commands_run_from_the_root():
    """A command with the suite's own `my_envs` module, in a script's docstring or on its page
    (docs/parts/script-by-script.md, where the docstrings' other commands went: issue 102),
    puts tests/ on PYTHONPATH (`python ppo.py` puts the script's folder on sys.path, not
    tests/), so it works when pasted in the repository root."""
    commands = []
    page = os.path.join(ROOT, "docs", "parts", "script-by-script.md")
    for script in sorted(glob.glob(os.path.join(ROOT, "*.py"))) + [page]:
        commands += [line.strip() for line in read(script).splitlines() if " my_envs:" in line
                     and re.match(r"\s*(PYTHONPATH=\S+ )?python ", line)]
    assert len(commands) >= 7
    for command in commands:
        assert command.startswith("PYTHONPATH=tests python "), command


def test_a_minatar_game_takes_its_own_rate_and_tyro_takes_the_last_of_a_repeated_flag():
    # ppo.py's MinAtar tasks: Freeway at 5e-4, Asterix and Breakout at 2e-3 (a flag of the
    # game's, issue 73), the other two at the image preset's 1e-3
    rates = {t.env_id: settings(t).learning_rate
             for t in benchmark.TASKS["ppo"] if t.env_id.startswith("MinAtar/")}
    assert rates == {"MinAtar/Asterix-v1": 2e-3, "MinAtar/Breakout-v1": 2e-3,
                     "MinAtar/Freeway-v1": 5e-4, "MinAtar/Seaquest-v1": 1e-3,
                     "MinAtar/SpaceInvaders-v1": 1e-3}
    import ppo
    import tyro
    repeated = ["--learning-rate", "1e-3", "--learning-rate", "2.5e-4"]
    assert tyro.cli(ppo.Args, args=repeated).learning_rate == 2.5e-4


def fake_runs(monkeypatch, before_run):
    """benchmark.py's runs replaced by before_run(task, seed) and the same made-up figures,
    its figures not drawn."""
    def fake_run(task, seed, out):
        before_run(task, seed)
        return {"seed": seed, "process_s": 1.0, "solve_step": None, "solve_s": None,
                "global_steps": 10, "eval_return": 0.0, "sps": 10, "curve": [[10], [0.0]]}

    monkeypatch.setattr(benchmark, "run_one", fake_run)
    monkeypatch.setattr(benchmark, "plot_task", lambda *args: None)
    monkeypatch.setattr(benchmark, "plot_comparison", lambda *args: None)


def test_every_run_is_queued_at_once_so_no_job_waits_for_a_tasks_last_seed(tmp_path,
                                                                           monkeypatch):
    # Two tasks of 3 seeds on 2 jobs: task A's third seed waits for task B's first seed to
    # start. Queued task by task, B would start only after all of A: the wait would time out.
    import threading
    b_started, waited = threading.Event(), []

    def before_run(task, seed):
        if task.name == "ppo-CartPole-v1" and seed == 3:
            waited.append(b_started.wait(timeout=20))
        if task.name == "ppo-Pendulum-v1":
            b_started.set()

    fake_runs(monkeypatch, before_run)
    benchmark.main(benchmark.Args(scripts=["ppo"], tasks=["ppo-CartPole-v1", "ppo-Pendulum-v1"],
                                  seeds=3, jobs=2, out=str(tmp_path)))
    assert waited == [True]
    with open(tmp_path / "results.json") as f:
        assert sorted(json.load(f)) == ["ppo-CartPole-v1", "ppo-Pendulum-v1"]


def test_tasks_run_in_the_order_given(tmp_path, monkeypatch):
    # --tasks B A on one job runs B's seeds before A's (the most wanted first); TASKS has A first
    order = []
    fake_runs(monkeypatch, lambda task, seed: order.append(task.name))
    benchmark.main(benchmark.Args(scripts=["ppo"], tasks=["ppo-Pendulum-v1", "ppo-CartPole-v1"],
                                  seeds=2, jobs=1, out=str(tmp_path)))
    assert order == ["ppo-Pendulum-v1"] * 2 + ["ppo-CartPole-v1"] * 2


def test_benchmark_refuses_a_name_it_does_not_know_before_any_run(tmp_path, capsys):
    # one line naming the flag and the name, the close names, the way to list them; status 2
    # and nothing written; a selection of nothing (a task of another script) too
    for flags, words in (
            ({"tasks": ["ppo-CartPole-v2"]}, "--tasks ppo-CartPole-v2: no task of that name; "
                                             "did you mean ppo-CartPole-v1, "),
            ({"envs": ["Hopper-v4"]}, "--envs Hopper-v4: no reference environment of that "
                                      "name; did you mean Hopper-v5?"),
            ({"scripts": ["pppo"]}, "--scripts pppo: no script of that name; did you mean ppo,"),
            ({"scripts": ["dqn"], "tasks": ["ppo-CartPole-v1"]}, "no task is of these"),
            ({"seeds": 0}, "--seeds and --jobs must be positive")):
        with pytest.raises(SystemExit) as exit_:
            benchmark.main(benchmark.Args(**flags, out=str(tmp_path / "out")))
        err = capsys.readouterr().err
        assert exit_.value.code == 2 and len(err.splitlines()) == 1, (flags, err)
        assert err.startswith("benchmark.py: error: ") and words in err, (flags, err)
        assert "--list" in err or "seeds" in flags
    assert not (tmp_path / "out").exists()


def test_benchmark_lists_the_tasks_it_would_run_with_their_budgets_and_commands(
        tmp_path, capsys, monkeypatch):
    # --list prints two lines per selected task, in --tasks' order: the name, the budget its
    # flags give (the last --total-timesteps counts) or the script's default, the goal; then
    # the command of --first-seed's run, which is what run_one starts (plus --output-dir)
    import ppo
    benchmark.main(benchmark.Args(tasks=["ppo-Pendulum-v1", "ppo-CartPole-v1"], list=True,
                                  first_seed=7, out=str(tmp_path / "out")))
    lines = capsys.readouterr().out.splitlines()
    tasks = {t.name: t for t in benchmark.TASKS["ppo"]}
    assert [line.split()[:3] for line in lines[::2]] == [
        ["ppo-Pendulum-v1", "200,000", "steps"],
        ["ppo-CartPole-v1", f"{ppo.Args().total_timesteps:,}", "steps"]]
    assert lines[0].endswith(tasks["ppo-Pendulum-v1"].goal)
    # the headline task is the default command, run to its budget (where it ends counts)
    assert lines[3] == "    python ppo.py --env-id CartPole-v1 --seed 7 --no-cuda"
    assert not (tmp_path / "out").exists()  # nothing run, nothing written
    benchmark.main(benchmark.Args(scripts=["sac"], envs=["Hopper-v5"], list=True))
    assert [line.split()[:2] for line in capsys.readouterr().out.splitlines()[::2]] == [
        ["sac-Hopper-v5", "300,000"], ["sac-Hopper-v5-100k", "100,000"]]
    # run_one starts the listed command, the run folder added
    started = []
    monkeypatch.setattr(benchmark.subprocess, "run", lambda command, **kw: started.append(
        command) or subprocess.CompletedProcess(command, 1, "", "stopped here"))
    with pytest.raises(RuntimeError, match="stopped here"):
        benchmark.run_one(tasks["ppo-CartPole-v1"], 7, str(tmp_path))
    assert started[0][1:] == [os.path.join(ROOT, "ppo.py"), *lines[3].split()[2:],
                              "--output-dir", str(tmp_path / "runs" / "ppo-CartPole-v1" / "seed7")]


def test_every_listed_command_gives_each_flag_once(capsys):
    # issue 73: ppo.py's MinAtar games printed --learning-rate twice (the settings' 1e-3,
    # then the game's 2e-3); a game's flag now takes the settings' place, so the command a
    # reader copies says one thing (a --flag and its --no-flag count as one flag)
    benchmark.main(benchmark.Args(list=True))
    commands = [line.split() for line in capsys.readouterr().out.splitlines()[1::2]]
    assert len(commands) == sum(len(tasks) for tasks in benchmark.TASKS.values())
    for words in commands:
        flags = [w[5:] if w.startswith("--no-") else w[2:] for w in words if w.startswith("--")]
        assert len(flags) == len(set(flags)), " ".join(words)
    tasks = {t.name: t for t in benchmark.TASKS["ppo"]}
    for game, rate in (("Asterix", 2e-3), ("Breakout", 2e-3), ("Freeway", 5e-4),
                       ("Seaquest", 1e-3)):
        assert settings(tasks[f"ppo-MinAtar-{game}-v1"]).learning_rate == rate, game
    assert benchmark.with_values(["--a", "1", "--b", "2"], ["--b", "3", "--c", "4"]) == [
        "--a", "1", "--b", "3", "--c", "4"]


def test_a_median_over_seeds_counts_every_seed_and_one_that_did_not_reach_as_the_worst():
    # issue 73: the median of the seeds that reached the threshold only said "729000" where
    # two of three seeds never reached it; a seed without a value now sorts after every value
    # (steps and seconds: less is better), so the median is the middle seed's, worked out here
    spread = benchmark.spread
    assert spread([34480, 16928, 18176]) == "18176 [16928, 34480]"
    assert spread([729000, None, None]) == "not reached [729000, not reached], 1 of 3 reached"
    assert spread([2.0, None, 1.0], "{:.1f}") == "2.0 [1.0, not reached], 2 of 3 reached"
    # four seeds: the mean of the two in the middle, 20 and 30; not reached where one of them
    # did not reach it
    assert spread([10, 30, 20, None]) == "25 [10, not reached], 3 of 4 reached"
    assert spread([10, 20, None, None]) == "not reached [10, not reached], 2 of 4 reached"
    assert spread([None, None, None]) == "not reached"


def test_a_task_figure_draws_the_median_over_seeds_and_measures_evaluation_figures_on_evaluations(
        tmp_path, monkeypatch):
    # Two seeds on a grid of 3 points (steps 10, 15, 20). Training curves 1 -> 3 and 3 -> 5:
    # the median of two is their mean, 2, 3, 4 (the band 1-3 at step 10, 3-5 at 20); each
    # seed is drawn too. The MuJoCo tasks' thresholds are evaluation figures (papers', or
    # Gymnasium's for the held-out tasks of issue 107, every script's): the
    # threshold goes into a second panel with the evaluations, 5 -> 7 and 7 -> 9 (median 6,
    # 7, 8), each seed's final one (a star at its last step) and the published SAC curve
    # (SimbaV2's data, Hopper-v4) up to the budget; the training panel has none of them.
    # Other tasks: one panel, the threshold on it.
    import plot
    from matplotlib.figure import Figure
    figures = []
    monkeypatch.setattr(Figure, "savefig", lambda fig, path: figures.append(fig))
    monkeypatch.setattr(plot, "GRID_POINTS", 3)
    runs = [{"seed": 7, "curve": [[10, 20], [1.0, 3.0]], "evaluations": [[10, 20], [5.0, 7.0]],
             "global_steps": 100_000, "eval_return": 9.0},
            {"seed": 8, "curve": [[10, 20], [3.0, 5.0]], "evaluations": [[10, 20], [7.0, 9.0]],
             "global_steps": 100_000, "eval_return": 8.0}]
    tasks = {t.name: t for s in benchmark.TASKS.values() for t in s}
    # (and grpo.py's on Addition-v0, whose goal is its held-out accuracy, an evaluation figure
    # too; on AdditionPartial-v0 the goal is RL's gain, holds_on_gain, as rlhf.py's on
    # Preference-v0: the gold score's gain over the warm start)
    assert {n for n, t in tasks.items() if t.eval_threshold} == {
        n for n in tasks if n.startswith(("ppo-", "ppo_rnd-", "sac-", "ddpg_td3-", "crossq-"))
        and "-v5" in n
    } | {n for n in tasks if n.startswith("grpo-Addition-v0")} | {
        n for n in tasks if n.endswith("-v5-held-out")}  # every preset's MuJoCo held out
    assert {n for n, t in tasks.items() if t.holds_on_gain} == {
        n for n in tasks if n.startswith(("grpo-AdditionPartial-v0", "rlhf-Preference-v0"))}
    benchmark.plot_task(tasks["sac-Hopper-v5-100k"], runs, str(tmp_path))
    benchmark.plot_task(tasks["ppo-CartPole-v1"], runs, str(tmp_path))
    (train, evaluation), (only,) = figures[0].axes, figures[1].axes

    def drawn(ax, style="-"):  # each line's points, the threshold's as (x, y) of its ends
        return [(list(line.get_xdata()), list(line.get_ydata())) for line in ax.lines
                if line.get_linestyle() == style and len(line.get_xdata())]
    median = [10.0, 15.0, 20.0]
    assert drawn(train) == [(median, [2.0, 3.0, 4.0]), ([10, 20], [1.0, 3.0]),
                            ([10, 20], [3.0, 5.0])]
    assert drawn(only) == drawn(train)
    assert drawn(evaluation) == [(median, [6.0, 7.0, 8.0]), ([10, 20], [5.0, 7.0]),
                                 ([10, 20], [7.0, 9.0])]
    band = train.collections[0].get_paths()[0].vertices  # the min-max band's outline
    assert {tuple(xy) for xy in band.tolist()} == {(10, 1), (15, 2), (20, 3), (20, 5),
                                                   (15, 4), (10, 3)}
    assert [(xy[0], xy[1]) for xy in drawn(evaluation, "None")] == [([100_000], [9.0]),
                                                                   ([100_000], [8.0])]
    assert drawn(train, "--") == [] and drawn(evaluation, "--")[0][1] == [659, 659]
    assert drawn(only, "--")[0][1] == [475, 475]
    with open(benchmark.REFERENCES["simbav2"]) as f:
        sac = json.load(f)["curves"]["SAC"]["Hopper-v4"]
    assert drawn(evaluation, "-.") == [(sac["steps"], sac["median"])]  # all at <= 100k
    assert drawn(train, "-.") == drawn(only, "-.") == []
    # ddpg_td3.py's tasks: the TD3 paper's curves (every 5,000 steps from 0 to 1M), cut at
    # the budget: 100,000 / 5,000 + 1 = 21 points
    benchmark.plot_task(tasks["ddpg_td3-Hopper-v5-100k"], runs, str(tmp_path))
    with open(benchmark.REFERENCES["td3"]) as f:
        td3 = json.load(f)["curves"]["TD3"]["Hopper-v1"]
    assert drawn(figures[2].axes[1], "-.") == [(list(range(0, 100_001, 5_000)),
                                                td3["median"][:21])]


def test_replot_draws_every_figure_of_the_kept_tasks_again_and_runs_nothing(tmp_path,
                                                                           monkeypatch, capsys):
    # results.json holds DDPG's and TD3's Pendulum tasks, not sac.py's: --replot draws both
    # task figures and "DDPG beside TD3" (both members kept), not the three-way comparison
    # with SAC (a member missing) nor any task that results.json lacks; it starts no run and
    # leaves results.json as it was; it writes results.md again from it (the statistics of
    # where runs end, the fields' profile). A folder without results.json: one line, exit
    # status 2.
    monkeypatch.setattr(benchmark, "run_one", lambda *args: pytest.fail("a run started"))
    runs = [{"seed": 1, "curve": [[10, 20], [-900.0, -300.0]], "global_steps": 20,
             "eval_return": -250.0, "solve_step": None, "solve_s": None, "process_s": 1.0,
             "sps": 20}]
    entries = {name: {"script": "ddpg_td3", "env_id": "Pendulum-v1", "label": label,
                      "threshold": -200, "window": 10, "goal": "g", "jobs": 1,
                      "date": "2026-11-27", "runs": runs}
               for name, label in (("ddpg_td3-Pendulum-v1", ""),
                                   ("ddpg_td3-Pendulum-v1-ddpg", "ddpg"))}
    (tmp_path / "results.json").write_text(json.dumps(entries))
    benchmark.main(benchmark.Args(scripts=["ddpg_td3", "sac"], replot=True, out=str(tmp_path)))
    assert sorted(os.listdir(tmp_path)) == [
        ".results.lock", "ddpg_td3-Pendulum-v1-ddpg.png", "ddpg_td3-Pendulum-v1.png",
        "ddpg_td3-pendulum-ddpg-vs-td3.png", "profile-classic-control.png", "results.json",
        "results.md"]
    # results.json keeps its entries, each with its statistics of where the runs end added:
    # Pendulum's goal is the evaluation (holds_on_eval), so the one run ends at its
    # evaluation, -250, below -200 (its training mean, the curve's last point, is -300): 0 of 1
    kept = json.loads((tmp_path / "results.json").read_text())
    for name, entry in entries.items():
        stats = kept[name].pop("statistics")
        assert stats == {"seeds": [1], "measure": "eval", "holds": [0, 1],
                         "end": [-250, -250, -250], "eval": [-250, -250, -250]}
        assert kept[name] == {**entry, "eval_threshold": False, "holds_on_eval": True,
                              "holds_on_gain": False, "stops": False}
    assert (tmp_path / "results.md").read_text().count("| 1 (1–1) | 0 of 1 | -250 [-250, -250] |") == 2
    assert "drew 2 task figures and the comparisons they are in (1)" in capsys.readouterr().out
    with pytest.raises(SystemExit) as exit_:
        benchmark.main(benchmark.Args(replot=True, out=str(tmp_path / "nowhere")))
    assert exit_.value.code == 2
    assert capsys.readouterr().err.startswith("benchmark.py: error: --replot: no ")


def test_a_run_is_read_with_its_evaluations_and_its_last_window_mean(tmp_path):
    # Window 2, threshold 7: returns 9, 4, 6, 10, 6 at steps 10-50; the first episode alone
    # has 9, a window not yet full that counts for nothing; the 2-episode means 6.5, 5, 8, 8
    # reach 7 at the fourth episode (step 40); the final mean is (10 + 6) / 2 = 8.
    # evaluations.csv's rows come back as [steps], [means].
    folder = tmp_path / "seed1" / "run"
    folder.mkdir(parents=True)
    (folder / "summary.json").write_text(json.dumps(
        {"global_steps": 60, "eval_return_mean": 9.5, "wall_time_s": 6.0}))
    (folder / "episodes.csv").write_text("global_step,wall_time,episode_return\n" + "".join(
        f"{10 * i},{i}.0,{r}\n" for i, r in enumerate([9, 4, 6, 10, 6], start=1)))
    (folder / "evaluations.csv").write_text(
        "global_step,wall_time,eval_return_mean,eval_return_std\n20,2.0,3.25,0.5\n40,4.0,9.5,1\n")
    task = benchmark.Task("ppo", "CartPole-v1", 7, "a goal", window=2)
    run = benchmark.read_run(task, str(tmp_path / "seed1"))
    assert run["solve_step"] == 40 and run["solve_s"] == 4.0 and run["sps"] == 10
    assert run["final_train_mean"] == 8.0
    assert run["evaluations"] == [[20, 40], [3.25, 9.5]]
    # READ_AT of 60 steps: 6 (no episode yet), 15 (the first alone: 9), 30 (5), 45 (8 of step
    # 40), 60 (8); the highest full-window mean is 8, first at step 40 (again at 50), not the 9
    # of the first episode alone
    assert run["train_mean_at"] == [[6, 15, 30, 45, 60], [None, 9.0, 5.0, 8.0, 8.0]]
    assert run["best_train_mean"] == [8.0, 40]


def test_the_mujoco_tasks_follow_the_issue():
    # ppo at 1M on each environment; ddpg_td3 and sac at 300k, and their first 100k as tasks
    # of their own, with one evaluation every 10,000 steps; each environment's own flags last
    # (not the presets' held-out runs of issue 107, 300k each on other environments)
    names = {t.name: t for s in ("ppo", "ddpg_td3", "sac") for t in benchmark.TASKS[s]
             if t.env_id.endswith("-v5") and t.script != "trpo" and t.label != "held-out"}
    envs = ["Hopper-v5", "HalfCheetah-v5", "Walker2d-v5"]
    assert sorted(names) == sorted([f"ppo-{e}" for e in envs]
                                   + [f"{s}-{e}{label}" for s in ("ddpg_td3", "sac")
                                      for e in envs for label in ("", "-100k")])

    # what each run trains with: its flags, the rest from the preset its script takes
    run = {name: settings(task) for name, task in names.items()}
    for name, task in names.items():
        budget = (1_000_000 if task.script == "ppo" else
                  100_000 if name.endswith("-100k") else 300_000)
        assert run[name].total_timesteps == budget and task.window == 100
        if task.script != "ppo":
            assert run[name].eval_every == 10_000
    assert run["ppo-HalfCheetah-v5"].update_epochs == 20  # the zoo's
    for env in ("Hopper-v5", "Walker2d-v5"):  # CleanRL's
        assert (run[f"ppo-{env}"].num_steps, run[f"ppo-{env}"].clip_vloss) == (2048, True)
    assert run["sac-Walker2d-v5"].alpha == 1.0
    # TD3 with its paper's rate, batch and random steps per environment; SAC with SB3's
    for label in ("", "-100k"):
        assert [run[f"ddpg_td3-{e}{label}"].learning_starts for e in envs] == [1000, 10000, 1000]
        assert [run[f"sac-{e}{label}"].learning_starts for e in envs] == [10000] * 3
        for e in envs:
            td3, sac = run[f"ddpg_td3-{e}{label}"], run[f"sac-{e}{label}"]
            assert (td3.learning_rate, td3.batch_size, td3.hidden_size) == (1e-3, 100, 256)
            assert (sac.learning_rate, sac.batch_size, sac.hidden_size) == (3e-4, 256, 256)


def test_results_md_gives_each_minatar_games_command_as_benchmark_runs_it():
    # the block under results.md's minatar-commands anchor: seed 101's command of every
    # MinAtar task of ppo.py and dqn.py, in TASKS' order, exactly as run_one would start it
    notes = read(RESULTS).split('<a id="minatar-commands"></a>')[1]
    block = fenced_blocks(notes, "bash")[0].splitlines()
    tasks = [t for s in ("ppo", "dqn") for t in benchmark.TASKS[s] if t.env_id.startswith("MinAtar/")]
    assert len(tasks) == 10
    assert block == ["python " + " ".join(benchmark.command_line(t, 101)) for t in tasks]

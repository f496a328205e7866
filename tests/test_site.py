"""The documentation site (mkdocs.yml, docs/): built once with `mkdocs build --strict`, its
claims held to the scripts and results.json, and every page opened in headless Chromium as a
reader would open it from the built folder (file://, no network).

Skips where the site's packages are missing (pip install -r docs/requirements.txt), and the
browser test where Chromium is (apt-get install -y chromium)."""
import base64
import contextlib
import html
import importlib
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
from urllib.parse import unquote, urlsplit

import numpy as np
import pytest

from conftest import ROOT

pytest.importorskip("mkdocs", reason="pip install -r docs/requirements.txt")
pytest.importorskip("material", reason="pip install -r docs/requirements.txt")
sys.path.insert(0, os.path.join(ROOT, "docs"))
import gen_pages  # noqa: E402
from algorithms import ALGORITHMS, ORDER  # noqa: E402

# One worker builds the site once and opens it (pytest -n 2 --dist loadgroup).
# the slow tier: the documentation site, built from the scripts and read page by page (issue
# 95 lists the browser's check; every test here reads the built pages or gen_pages's output)
pytestmark = [pytest.mark.xdist_group("site"), pytest.mark.slow]

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
SCREENSHOTS = os.path.join(ROOT, "screenshots")
SIZES = {"phone": (390, 844, True), "desktop": (1280, 900, False)}


@pytest.fixture(scope="session")
def site(tmp_path_factory):
    """The site, built once: (its folder, the build's seconds)."""
    folder = str(tmp_path_factory.mktemp("site"))
    start = time.time()
    done = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir",
                           folder], cwd=ROOT, capture_output=True, text=True,
                          env={**os.environ, "NO_MKDOCS_2_WARNING": "1"})
    assert done.returncode == 0, done.stderr[-3000:]
    return folder, time.time() - start


GUIDE = os.path.join(ROOT, "docs", "guide")


@pytest.fixture(scope="session")
def pages():
    """{path under docs/: Markdown} of every page: those gen_pages makes and those of the
    guide, written by hand (docs/guide/)."""
    found = gen_pages.generated_pages()
    for name in sorted(os.listdir(GUIDE)):
        with open(os.path.join(GUIDE, name), encoding="utf-8") as f:
            found[f"guide/{name}"] = f.read()
    return found


@pytest.mark.slow  # mkdocs build of the whole site
def test_the_site_builds_strict_with_every_script_on_a_page(site):
    folder, seconds = site
    print(f"mkdocs build --strict: {seconds:.1f} s")
    for script in ORDER:
        assert os.path.exists(os.path.join(folder, "algorithms", f"{script}.html"))
    scripts = {f[:-3] for f in os.listdir(ROOT) if f.endswith(".py")} - {
        "benchmark", "plot", "exercises", "tune"}
    assert scripts == set(ORDER), "every algorithm script has a page, and only those"
    assert os.path.exists(os.path.join(folder, "mathjax", "tex-svg.js"))


# ---------------------------------------------------------------------------------------
# What the pages claim, against the scripts
# ---------------------------------------------------------------------------------------
@pytest.mark.parametrize("script", ORDER)
def test_each_rendered_equation_names_a_line_that_stands_in_the_docstring(script, pages):
    lines = [line.strip() for line in importlib.import_module(script).__doc__.splitlines()]
    page = pages[f"algorithms/{script}.md"]
    for line, tex, *place in ALGORITHMS[script].equations:
        assert line.strip() in lines, f"{script}.py's docstring no longer has {line!r}: " \
                                      "change its equation in docs/algorithms.py too"
        assert tex in page
        if place:  # the code that computes it, beside it: read from the script by name
            code = gen_pages.function_code(gen_pages.read(f"{script}.py"), place[0])
            section = page_section(page, "Key equations")
            assert f"```python\n{code}\n```" in section
            assert section.index(tex) < section.index(code)


def test_an_equations_code_is_its_function_without_the_docstring_and_a_gone_name_fails():
    source = ('import torch\n\n\n@torch.no_grad()\ndef k3(logp, ref):\n    """k3 = e^d - d - 1.\n\n'
              '    More.\n    """\n    delta = ref - logp  # d\n    return torch.exp(delta) - delta - 1\n\n\n'
              'class B:\n    def f(self):\n        """F."""\n        return 1\n')
    assert gen_pages.function_code(source, "k3") == (
        "@torch.no_grad()\ndef k3(logp, ref):\n    delta = ref - logp  # d\n"
        "    return torch.exp(delta) - delta - 1")
    assert gen_pages.function_code(source, "B.f") == "def f(self):\n    return 1"
    with pytest.raises(ValueError, match="no 'k4'"):
        gen_pages.function_code(source, "k4")


def source_line(script, number):
    with open(os.path.join(ROOT, f"{script}.py")) as f:
        return f.read().splitlines()[number - 1]


def page_section(page, heading):
    """A page's Markdown from its `## heading` to the next `## `."""
    return page.split(f"\n## {heading}\n")[1].split("\n## ")[0]


def code_links(text):
    """(the name shown, the line number) of every link to a line of the page's source."""
    return re.findall(r"\[`([^`]+)`\]\(#__codelineno-source-(\d+)\)", text)


def assert_links_the_line(script, shown, number):
    """The line a link goes to is the code its name says: `train, # Rollout` the
    sub-heading comment inside train, `train: eps=1e-5` a line holding that code, a
    function or Class.method its def or class line."""
    line = source_line(script, int(number)).strip()
    if ", # " in shown:
        assert line.startswith(f"# {shown.split(', # ')[1]}:"), (shown, line)
    elif ": " in shown:
        assert shown.split(": ", 1)[1] in line, (shown, line)
    else:
        name = shown.split(".")[-1]
        assert re.match(rf"(def|class) {re.escape(name)}\b", line), (shown, line)


@pytest.mark.parametrize("script", ORDER)
def test_each_pseudocode_step_links_the_line_of_the_code_it_names(script, pages):
    # issue 73: one boxed algorithm, its lines numbered and indented by their depth inside
    # the loops, each linked to its line of the source (a line with no place has no link)
    section = page_section(pages[f"algorithms/{script}.md"], "Pseudocode")
    steps = gen_pages.loop_steps(script)
    assert section.count('<div class="pseudocode" markdown>') == 1
    lines = re.findall(r'<div class="pseudocode__line pseudocode__line--(\d)" markdown="span">'
                       r'<span class="pseudocode__n">(\d+)</span> (.*)</div>', section)
    assert [(int(d), int(n)) for d, n, _ in lines] == [
        (depth, n) for n, (depth, _, _) in enumerate(steps, 1)]
    links = code_links(section)
    assert len(links) == sum(1 for _, _, place in steps if place)
    for (shown, number), place in zip(links, [p for _, _, p in steps if p]):
        assert int(number) == gen_pages.locate(script, place)
        assert_links_the_line(script, shown, number)


def test_a_loop_step_is_text_and_place_or_depth_text_and_place(monkeypatch):
    import dataclasses
    loop = [(0, "for iteration = 1, 2, ... do", "train"), (1, "collect T steps", "train:Rollout"),
            (2, "a minibatch step", "ppo_loss"), (1, "end for", None), ("GAE", "compute_gae")]
    monkeypatch.setitem(gen_pages.ALGORITHMS, "ppo", dataclasses.replace(ALGORITHMS["ppo"], loop=loop))
    assert gen_pages.loop_steps("ppo") == [(0, "for iteration = 1, 2, ... do", "train"),
                                           (1, "collect T steps", "train:Rollout"),
                                           (2, "a minibatch step", "ppo_loss"), (1, "end for", None),
                                           (0, "GAE", "compute_gae")]
    box = gen_pages.pseudocode("ppo", gen_pages.read("ppo.py"))
    assert box.count("pseudocode__line--1") == 2 and box.count("pseudocode__line--2") == 1
    assert len(code_links(box)) == 4  # "end for" links nothing
    monkeypatch.setitem(gen_pages.ALGORITHMS, "ppo", dataclasses.replace(
        ALGORITHMS["ppo"], loop=[(3, "too deep", "train")]))
    with pytest.raises(ValueError, match="depth 3"):
        gen_pages.loop_steps("ppo")


def test_a_pseudocode_step_naming_code_that_is_gone_fails_the_build():
    with pytest.raises(ValueError, match="ppo.py has no 'compute_gea'"):
        gen_pages.code_link("ppo", "compute_gea", gen_pages.read("ppo.py"))
    assert gen_pages.locate("ppo", "train:Nowhere") is None


# Issue 55, item 4 of an algorithm page: the implementation details and departures,
# numbered as CleanRL numbers them, each with its line of code (docs/algorithms.py's details)
DETAILED = [script for script in ORDER if ALGORITHMS[script].details]
DETAILS = "Implementation details and departures"


def test_the_road_from_dqn_to_sac_numbers_its_implementation_details():
    assert {"ppo", "dqn", "sac", "crossq", "ddpg_td3", "vpg", "trpo"} <= set(DETAILED)
    for script in DETAILED:
        assert 5 <= len(ALGORITHMS[script].details) <= 12, script


@pytest.mark.parametrize("script", DETAILED)
def test_each_implementation_detail_is_numbered_and_links_the_line_it_names(script, pages):
    details, source = ALGORITHMS[script].details, gen_pages.read(f"{script}.py")
    for text, ref in details:  # each names a definition of this script, and a line in it
        assert ref.split(":")[0] in gen_pages.definitions(source), (script, ref)
        assert gen_pages.locate(script, ref, source) is not None, (script, ref)
        assert text.strip() and not text.endswith("."), (script, ref)
        assert not re.search(r"[][`]|^\s|\s$", ref), f"{ref!r} would break its link's text"
    section = page_section(pages[f"algorithms/{script}.md"], DETAILS)
    listed, notes = section.split("\n### The docstring's other notes\n")
    items = re.findall(r"^(\d+)\. (.*)$", listed, flags=re.M)
    assert [int(n) for n, _ in items] == list(range(1, len(details) + 1))
    for (_, item), (text, ref) in zip(items, details):
        assert item.startswith(gen_pages.escape_prose(text) + ": ")
        (shown, number), = code_links(item)
        assert int(number) == gen_pages.locate(script, ref)
        assert_links_the_line(script, shown, number)
    # the docstring's other notes follow the list, as they stood before it
    for paragraph in gen_pages.docstring_sections(script)["notes"]:
        assert gen_pages.prose(paragraph) in notes


def test_a_page_without_details_keeps_its_docstrings_notes(pages):
    for script in set(ORDER) - set(DETAILED):
        page = pages[f"algorithms/{script}.md"]
        assert "\n## Notes and departures\n" in page and f"\n## {DETAILS}\n" not in page


def test_an_implementation_detail_naming_code_that_is_gone_fails_the_page(monkeypatch):
    import dataclasses
    source = gen_pages.read("ppo.py")
    # a renamed function, in a copy of the source: its detail no longer finds it
    assert gen_pages.locate("ppo", "layer_init", source) is not None
    assert gen_pages.locate("ppo", "layer_init",
                            source.replace("def layer_init(", "def init_layer(")) is None
    assert gen_pages.locate("ppo", "train::eps=1e-5",
                            source.replace("eps=1e-5)", "eps=1e-8)")) is None
    assert gen_pages.locate("ppo", "train::eps=1e-5") is not None
    # a wrong name planted in a copy of the data: the page is not made
    for wrong in ("layer_inti", "train::eps=1e-6", "Agent.no_such_method"):
        details = list(ALGORITHMS["ppo"].details)
        details[0] = (details[0][0], wrong)
        monkeypatch.setitem(gen_pages.ALGORITHMS, "ppo",
                            dataclasses.replace(ALGORITHMS["ppo"], details=details))
        with pytest.raises(ValueError, match=f"ppo.py has no {re.escape(repr(wrong))}"):
            gen_pages.algorithm_page("ppo", results={})


MUJOCO_NAMES = ("Hopper", "HalfCheetah", "Walker2d", "Ant", "Humanoid", "Swimmer")


@pytest.mark.parametrize("script", ORDER)
def test_each_results_section_gives_the_protocol_of_each_comparison(script, pages):
    protocols, results = ALGORITHMS[script].protocols, results_json()
    assert protocols, f"{script}.py's Results section says how no comparison was made"
    results_section = page_section(pages[f"algorithms/{script}.md"], "Results at a glance")
    for tasks, text in protocols:
        assert f"- {gen_pages.escape_prose(text)}\n" in results_section
        assert text.endswith(".") and not re.search(r"\.\s+[A-Z]", text), \
            f"one sentence each: {text!r}"
        assert "seed" in text, f"which seeds: {text!r}"
        assert re.search(r"\b(median|mean)\b", text), f"which statistic: {text!r}"
        assert re.search(r"\b(training|evaluation)\b", text), f"which return: {text!r}"
        if any(name in text for name in MUJOCO_NAMES):
            assert re.search(r"\bv\d\b|-v\d\b", text), f"which MuJoCo version: {text!r}"
        # the seeds it states are the runs results.json holds: tests/test_benchmark.py, in
        # the fast tier
    # every task of the script's table is named by one of its protocols
    named = {task for tasks, _ in protocols for task in tasks}
    assert set(gen_pages.results_for(script, results)) <= named, script


# ---------------------------------------------------------------------------------------
# Issue 73: a page that teaches why, in Spinning Up's order
# ---------------------------------------------------------------------------------------
PAGE_ORDER = ["Background", "Key equations", "Pseudocode", "Results at a glance",
              DETAILS, "Flags", "Running it", "Exercises", "Questions", "References", "The source"]


@pytest.mark.parametrize("script", ORDER)
def test_each_page_gives_background_equations_and_pseudocode_before_anything_else(script, pages):
    page = pages[f"algorithms/{script}.md"]
    headings = re.findall(r"^## (.*)$", page, flags=re.M)
    teach = gen_pages.teach_sections(script)
    expected = [h for h in PAGE_ORDER if h != "Questions" or "Questions" in teach]
    if DETAILS not in headings:  # a script without numbered details keeps its notes there
        expected[expected.index(DETAILS)] = "Notes and departures"
    assert headings == expected, script
    assert page.startswith(f"# {ALGORITHMS[script].title}: `{script}.py`\n\n## Background\n")
    # docs/teach/<script>.md's sections as their writers wrote them; else the docstring's idea
    for heading in ("Background", "Questions", "References"):
        if heading in teach:
            assert page_section(page, heading).strip().endswith(teach[heading].strip()), \
                (script, heading)
    if "Background" not in teach:
        for paragraph in gen_pages.docstring_sections(script)["idea"]:
            assert gen_pages.prose(paragraph) in page_section(page, "Background")


@pytest.mark.slow  # the built site
def test_the_teaching_texts_are_not_pages_of_their_own(site):
    # docs/teach/*.md are read into the algorithm pages (mkdocs.yml's exclude_docs), never
    # published beside them
    assert not os.path.exists(os.path.join(site[0], "teach"))
    with open(os.path.join(ROOT, "mkdocs.yml")) as f:
        assert re.search(r"^exclude_docs: \|\n(  .*\n)*  teach/\n", f.read(), flags=re.M)


@pytest.mark.parametrize("script", ORDER)
def test_the_source_is_on_the_page_folded_and_out_of_the_search_index(script, pages):
    section = page_section(pages[f"algorithms/{script}.md"], "The source")
    assert '<details class="abstract source" data-search-exclude markdown>' in section
    with open(os.path.join(ROOT, f"{script}.py"), encoding="utf-8") as f:
        assert f.read().rstrip("\n") in section
    assert section.rstrip().endswith("```\n\n</details>")


def test_string_defaults_in_the_flags_tables_read_as_in_the_script(pages):
    # issue 73: html.escape inside a code span showed 'gae' as &#x27;gae&#x27;
    for script in ORDER:
        flags_section = page_section(pages[f"algorithms/{script}.md"], "Flags")
        assert "&#x27;" not in flags_section and "&quot;" not in flags_section, script
    assert "| `--advantage` | `'gae'` |" in pages["algorithms/ppo.md"]


@pytest.mark.parametrize("script", ORDER)
def test_references_are_a_list_of_links(script, pages):
    section = page_section(pages[f"algorithms/{script}.md"], "References")
    items = [line for line in section.strip().splitlines() if line.startswith("- ")]
    assert items, script
    linked = [item for item in items if re.match(r"- \[.+\]\(https?://[^)]+\)", item)]
    assert len(linked) >= len(items) - 1 and linked, (script, items)


def test_a_docstrings_papers_become_linked_references_where_no_teaching_text_gives_them():
    listed = gen_pages.reference_list("dqn").splitlines()
    assert listed[0] == ("- [Mnih et al. 2013, \"Playing Atari with Deep Reinforcement "
                         "Learning\", arXiv:1312.5602](https://arxiv.org/abs/1312.5602)")
    assert listed[2].startswith("- [van Hasselt, Guez &amp; Silver 2016, \"Deep Reinforcement "
                                "Learning with Double Q-learning\", AAAI 2016](https://scholar.")
    assert len(listed) == 6


def glance_cells(table):
    """{first cell: the row's cells} of a Markdown table."""
    rows = [[c.strip() for c in line.strip().strip("|").split("|")]
            for line in table.splitlines() if line.strip().startswith("|")]
    return {row[0]: row for row in rows[2:]}


def baselines_json():
    with open(os.path.join(ROOT, "benchmarks", "baselines.json")) as f:
        return json.load(f)


def test_baselines_measure_doing_nothing_and_random_actions_on_every_environment():
    # benchmarks/baselines.py: 10 episodes, seeds 101-110, on every environment of
    # results.json but the MPE ids (left out, the docstring says why); the figures stand on
    # what a zero action and random actions do: CartPole's pole falls in about 10 steps when
    # pushed one way, MountainCar never reaches the flag (-200), Acrobot never swings up
    baselines = baselines_json()
    envs = {r["env_id"] for r in results_json().values()}
    # (and grpo.py's and rlhf.py's text tasks, whose action is a string: the docstring says why)
    skipped = ("simple_", "Addition", "Preference")
    assert set(baselines["envs"]) == {e for e in envs if not e.startswith(skipped)}
    assert baselines["skipped"] == sorted(e for e in envs if e.startswith(skipped))
    assert baselines["episodes"] == 10 and baselines["seeds"] == "101-110"
    found = baselines["envs"]
    assert 8 <= found["CartPole-v1"]["zero"]["mean"] <= 11
    assert 15 <= found["CartPole-v1"]["random"]["mean"] <= 40
    assert found["MountainCar-v0"]["zero"]["mean"] == found["MountainCar-v0"]["random"]["mean"] == -200
    assert found["Acrobot-v1"]["random"]["mean"] == -500
    assert found["Taxi-v4"]["zero"]["mean"] == -200  # moving south into the wall, 200 steps


def test_where_runs_end_leads_each_results_section_by_hand():
    # Three made-up entries. ppo's on seeds 8, 6, 7 (listed out of order), ending 500, 300,
    # 480 against 475, evaluations 500, 100, 490: seeds "3 fresh (6–8)", 2 of 3 hold on the
    # last 20, end IQM of 3 = their mean (500+300+480)/3 = 426.7, eval (500+100+490)/3 = 363.3.
    # sac's MuJoCo task, an older entry without eval_threshold: seeds 5-7 are not fresh (5 is a
    # tuning seed); it
    # holds on its evaluations 700, 600, 650 against 659 (1 of 3), IQM 650. impala's lag task
    # stops at 475 (--stop-at-return): no holds count.
    def runs(seeds, ends, evals):
        return [{"seed": s, "final_train_mean": e, "eval_return": v, "solve_step": 1000 * s,
                 "curve": [[1], [e]]} for s, e, v in zip(seeds, ends, evals)]
    results = {
        "ppo-CartPole-v1": {"script": "ppo", "env_id": "CartPole-v1", "threshold": 475,
                            "window": 20, "runs": runs([8, 6, 7], [500, 300, 480], [500, 100, 490])},
        "sac-Hopper-v5-100k": {"script": "sac", "env_id": "Hopper-v5", "threshold": 659,
                               "window": 100, "runs": runs([5, 6, 7], [1.0, 2.0, 3.0], [700, 600, 650])},
        "impala-CartPole-v1-lag-vtrace": {"script": "impala", "env_id": "CartPole-v1",
                                          "threshold": 475, "window": 20,
                                          "runs": runs([1, 2], [476, 478], [500, 500])},
        # a window of its own (50 episodes): the note names it
        "ppo_rnd-MountainCar-v0": {"script": "ppo_rnd", "env_id": "MountainCar-v0",
                                   "threshold": -120, "window": 50,
                                   "runs": runs([101, 102], [-110, -130], [-100, -140])}}
    table = gen_pages.ends_table(results, base="")
    rows = {row.split("]")[0][3:]: [c.strip() for c in row.split("|")[1:-1]]
            for row in table.splitlines()[2:]}
    assert table.splitlines()[0].startswith("| task | seeds | holds at the end | end, IQM [95% CI] "
                                            "| eval, IQM [95% CI] |")
    assert rows["ppo-CartPole-v1"][1:5] == ["3 fresh (6–8)", "**2 of 3** (≥ 475, last 20)",
                                           rows["ppo-CartPole-v1"][3], rows["ppo-CartPole-v1"][4]]
    assert rows["ppo-CartPole-v1"][3].startswith("426.7 [")
    assert rows["ppo-CartPole-v1"][4].startswith("363.3 [")
    assert rows["sac-Hopper-v5-100k"][1:3] == ["3 (5–7)", "**1 of 3** (≥ 659, eval)"]
    assert rows["sac-Hopper-v5-100k"][3].startswith("650 [")
    assert rows["impala-CartPole-v1-lag-vtrace"][2].startswith("**stop there")
    assert rows["ppo_rnd-MountainCar-v0"][1:3] == ["2 fresh (101–102)", "**1 of 2** (≥ -120, last 50)"]


@pytest.mark.parametrize("script", ORDER)
def test_each_results_at_a_glance_row_is_results_json_beside_its_peer_or_goal(script, pages):
    results, baselines = results_json(), baselines_json()["envs"]
    section = page_section(pages[f"algorithms/{script}.md"], "Results at a glance")
    tasks = gen_pages.results_for(script, results)
    if not tasks:  # a script with no benchmark yet: no table
        assert "| task |" not in section
        return
    table = next(block for block in section.split("\n\n") if block.startswith("| task | measure |"))
    rows = glance_cells(table)
    assert table.startswith("| task | measure | ours, median [min, max] | beside it | doing nothing "
                            "| random actions |")
    assert "<figure" not in section or section.index(table) < section.index("<figure")
    assert [re.match(r"\[([^\]]+)\]", cell).group(1) for cell in rows] == list(tasks)
    peers = gen_pages.peers(results)
    for (first, row), name in zip(rows.items(), tasks):
        runs, env_id = results[name]["runs"], results[name]["env_id"]
        peer = peers.get(name)
        field = peer[2] if peer else "eval_return"
        assert row[1] == ("greedy evaluation" if field == "eval_return" else
                          f"training mean, last {results[name]['window']} episodes")
        assert row[2] == gen_pages.measured([r[field] for r in runs])
        if peer:
            theirs = [r[field] for r in results[peer[0]]["runs"]]
            assert row[3].endswith(": " + gen_pages.measured(theirs)), (name, row[3])
        else:
            assert row[3].startswith(f"goal {results[name]['threshold']:,g} ("), (name, row[3])
        if env_id in baselines:
            assert row[4:] == [f"{baselines[env_id][k]['mean']:,.4g}" for k in ("zero", "random")]
        else:
            assert row[4:] == ["-", "-"]


@pytest.mark.parametrize("script", ORDER)
def test_each_figure_has_a_caption_and_opens_full_size(script, pages):
    section = page_section(pages[f"algorithms/{script}.md"], "Results at a glance")
    names = gen_pages.figures_for(script, results_json())
    shown = re.findall(r'<figure class="result" markdown="span">\n  \[!\[([^\]]+)\]\(\.\./benchmarks/'
                       r'([^)]+)\)\]\(\.\./benchmarks/\2\)\n  <figcaption>(.+) \(<a href="\.\./'
                       r'benchmarks/\2">full size</a>\)</figcaption>\n</figure>', section)
    assert [name for name, _, _ in shown] == names
    for name, png, caption in shown:
        assert png == f"{name}.png" and os.path.exists(os.path.join(ROOT, "benchmarks", png))
        assert caption == html.escape(gen_pages.caption(name, results_json()), quote=False)
    # the long tables and protocols are folded below the short table and the figures
    if gen_pages.results_for(script, results_json()):
        assert '??? note "Every task: steps to the threshold, evaluation, speed, goal"' in section
    if names:
        assert section.index("<figure") < section.index("??? note")


def test_a_return_no_seed_measured_reads_not_evaluated():
    assert gen_pages.measured([None, None]) == "not evaluated"  # --eval-episodes 0
    assert gen_pages.measured([500.0, 465.1, 500.0]) == "500 [465.1, 500]"
    assert gen_pages.measured([2502.1, 2160.0, 3054.8]) == "2,502 [2,160, 3,055]"


def test_the_benchmarks_page_opens_with_a_row_per_script(pages):
    page = pages["benchmarks.md"]
    before = page.split("\n## ")[0]
    table = next(block for block in before.split("\n\n") if block.startswith("| script |"))
    rows = glance_cells(table)
    results, baselines = results_json(), baselines_json()["envs"]
    assert [re.match(r"\[(\w+)\.py\]", cell).group(1) for cell in rows] == [
        script for script in ORDER if gen_pages.SUMMARY_TASKS.get(script) in results]
    assert len(rows) >= 16
    for first, row in rows.items():
        script = re.match(r"\[(\w+)\.py\]", first).group(1)
        name = gen_pages.SUMMARY_TASKS[script]
        assert row[1] == name and results[name]["script"] == script
        assert first == f"[{script}.py](algorithms/{script}.md#results-at-a-glance)"
        field = gen_pages.peers(results).get(name, (None, None, "eval_return"))[2]
        assert row[3] == gen_pages.measured([r[field] for r in results[name]["runs"]])
        env_id = results[name]["env_id"]
        assert row[5:] == ([f"{baselines[env_id][k]['mean']:,.4g}" for k in ("zero", "random")]
                           if env_id in baselines else ["-", "-"])
    # the long tables of every task are folded
    assert page.count('??? note "Every task of the field') == 4


def test_the_teaching_pages_exercises_follow_the_learning_path_and_name_the_longest_check(pages):
    # issue 73: the suggested order put DDPG, SAC and TRPO before PPO, and the text called a
    # 273 s check the longest where the table lists 505 s
    page = pages["teaching.md"]
    rows = [[c.strip() for c in line.strip("|").split("|")] for line in page.splitlines()
            if re.match(r"\| \d+ \| `", line)]
    scripts = [row[1].strip("`").split(".")[0] for row in rows]
    assert [row[0] for row in rows] == [str(n) for n in range(1, len(rows) + 1)]
    assert scripts == sorted(scripts, key=ORDER.index)
    longest = max(rows, key=lambda row: int(row[-1]))
    text = " ".join(page.split())
    assert (f"the longest check of the table below, {longest[1].strip('`')}'s, took "
            f"{longest[-1]} s") in text


def test_docstring_prose_reads_on_the_page_as_in_the_script():
    # underscores, angle brackets and backslashes are text; a `code span` stays code
    import markdown
    line = "runs/<env_id>__sac__<seed>/ with a\\b, x_1 and `--algo td3_x` (R & D)"
    rendered = markdown.markdown(gen_pages.escape_prose(line))
    assert rendered == ("<p>runs/&lt;env_id&gt;__sac__&lt;seed&gt;/ with a\\b, x_1 and "
                        "<code>--algo td3_x</code> (R &amp; D)</p>")


def site_commands(pages):
    """(page, script, argv) of every `python <script>.py ...` an algorithm script's command
    shown on the site, continued lines joined, comments and environment prefixes dropped.
    Outside code blocks a paragraph's lines are joined (a `code span` may wrap); a command
    ends at `;`, `&&` or `|` of a shell line, a flag given a shell variable (`--seed
    $seed`) is left out, the rest of its command still parsed, and a mistake shown with its
    error line below it (the guide's "Bad input is one line") is not a command."""
    found = []
    for page, text in pages.items():
        text = text.replace("\\\n", " ")
        pieces = re.split(r"(^```.*?^```$)", text, flags=re.M | re.S)
        text = "".join(p if p.startswith("```") else re.sub(r"(?<!\n)\n(?!\n| {4})", " ", p)
                       for p in pieces)
        for script in ORDER:
            for match in re.finditer(rf"python {script}\.py([^`\n#;&|]*)", text):
                if text[match.end():].lstrip().startswith(f"{script}.py: error:"):
                    continue  # a mistake shown with the line that refuses it
                argv = shlex.split(match.group(1))
                shell = {i for i, a in enumerate(argv) if a.startswith("$")}
                argv = [a for i, a in enumerate(argv) if i not in shell and i + 1 not in shell]
                found.append((page, script, argv))
    return found


def test_every_command_on_the_site_parses_with_its_scripts_parser(pages, monkeypatch):
    commands = site_commands(pages)
    assert {script for _, script, _ in commands} == set(ORDER)
    for page, script, argv in commands:
        if "--help" in argv:
            continue
        monkeypatch.setattr(sys, "argv", [f"{script}.py", *argv])
        args = importlib.import_module(script).parse_args()
        if "--env-id" in argv:
            assert args.env_id == argv[argv.index("--env-id") + 1], page


def test_every_exercise_the_site_names_is_one_of_exercises_py(pages):
    import exercises
    ids = {e.id for e in exercises.EXERCISES}
    named = {(page, name) for page, text in pages.items()
             for name in re.findall(r"`((?:%s)\.(?!py`)\w+)`" % "|".join(ORDER), text)}
    named |= {(page, name) for page, text in pages.items()
              for match in re.finditer(r"exercises\.py (?:make|hint) ([\w. ]+)", text)
              for name in match.group(1).split()}
    assert {page for page, _ in named} >= {"learning-path.md", "teaching.md"}
    assert not {(page, name) for page, name in named if name not in ids}


# ---------------------------------------------------------------------------------------
# What the README said before it became the front door (issue 55)
# ---------------------------------------------------------------------------------------
def test_each_script_by_script_section_is_on_the_page_of_every_script_it_names(pages):
    intro, sections = gen_pages.script_by_script()
    assert intro and intro in pages["learning-path.md"]
    # the README's 14, pqn.py's, grpo.py's and rlhf.py's: vpg.py and trpo.py share one, sac.py
    # and crossq.py
    assert len(sections) == 17
    for script in ORDER:
        assert gen_pages.running_it(script), f"no section of docs/parts/script-by-script.md " \
                                             f"names {script}.py"
    for heading, body in sections:
        named = re.findall(r"(?<!\w)(\w+)\.py\b", heading)
        assert named and set(named) <= set(ORDER), heading
        for script in named:
            assert f"### {heading}\n\n{body.strip()}\n" in pages[f"algorithms/{script}.md"]


def test_the_home_page_lists_every_page_of_the_guide(pages):
    files = sorted(name[:-3] for name in os.listdir(GUIDE) if name.endswith(".md"))
    assert sorted(name for name, _, _ in gen_pages.GUIDE) == files
    for name, title, _ in gen_pages.GUIDE:
        assert f"[{title}](guide/{name}.md)" in pages["index.md"]
        assert pages[f"guide/{name}.md"].startswith(f"# {title}\n")


def test_the_run_folders_page_shows_tensorboard_on_a_real_run_and_says_how(pages):
    # issue 60: the screenshot of docs/img/ on the page, with the command that shows it and
    # --track; the browser test sees it load
    text = pages["guide/run-folders.md"]
    assert "![TensorBoard's scalars of one ppo.py run on CartPole-v1](../img/tensorboard.png)" in text
    assert os.path.getsize(os.path.join(ROOT, "docs", "img", "tensorboard.png")) > 10_000
    assert "tensorboard --logdir runs" in text and "--track" in text
    assert "WANDB_MODE=offline" in text and "pip install wandb==0.31.0" in text


def article(folder, page):
    """The text of a built page's content, without the navigation, header and footer that
    every page repeats: (its HTML, its text)."""
    with open(os.path.join(folder, page), encoding="utf-8") as f:
        found = re.search(r'<article class="md-content__inner[^"]*">(.*?)</article>', f.read(), re.S)
    body = found.group(1)
    return body, html.unescape(re.sub(r"<[^>]+>", "", body))


def content_links(folder, page):
    """(page, fragment) of each link of a built page's content to a page of the site."""
    links = []
    for href in re.findall(r'<a\b[^>]*\bhref="([^"]*)"', article(folder, page)[0]):
        path, _, fragment = html.unescape(href).partition("#")
        if re.match(r"[a-z]+:", path):
            continue
        target = os.path.normpath(os.path.join(os.path.dirname(page), unquote(path))) if path else page
        if target.endswith(".html") and os.path.exists(os.path.join(folder, target)):
            links.append((target, unquote(fragment)))
    return links


def section_text(body, fragment):
    """The text of a page's content from the heading whose id is the fragment to the next
    heading of its level or above (the whole content without a fragment)."""
    if fragment:
        start = re.search(rf'<h([1-6]) id="{re.escape(fragment)}"', body)
        if start is None:
            return ""
        body = body[start.end():]
        end = re.search(rf"<h[1-{start.group(1)}][ >]", body)
        body = body[:end.start()] if end else body
    return html.unescape(re.sub(r"<[^>]+>", "", body))


def clicks(folder, arrived):
    """The fewest clicks on the pages' own links (not the navigation's) from the home page to
    a page and anchor where arrived(page, fragment) holds; None beyond three."""
    frontier, seen = ["index.html"], {"index.html"}
    for n in range(1, 4):
        following = []
        for page in frontier:
            for target, fragment in content_links(folder, page):
                if arrived(target, fragment):
                    return n
                if target not in seen:
                    seen.add(target)
                    following.append(target)
        frontier = following
    return None


@pytest.mark.slow  # the built site
def test_from_the_home_page_to_running_ppo_and_its_gae_and_to_grading_a_class(site):
    """Issue 55's goals, by the links of the built pages: a new user reaches, in three clicks
    or fewer, the page with ppo.py's command and its GAE (the equation with its docstring
    line, and the pseudocode's link to compute_gae's line); a teacher the section with the
    command that grades a class."""
    folder = site[0]

    def ppo_and_gae(page, fragment):
        if page != "algorithms/ppo.html":
            return False
        body, text = article(folder, page)
        return ("python ppo.py --env-id CartPole-v1" in text and "GAE       delta_t = r_t" in text
                and re.search(r'href="#__codelineno-source-\d+"><code>compute_gae</code>', body))

    def grading(page, fragment):
        text = section_text(article(folder, page)[0], fragment)
        return "python exercises.py check submissions/" in text and "grade book" in text

    assert ppo_and_gae("algorithms/ppo.html", ""), "ppo.py's page lacks its command or its GAE"
    found = {"ppo.py and its GAE": clicks(folder, ppo_and_gae),
             "grading a class": clicks(folder, grading)}
    print("clicks from the home page:", found)
    assert None not in found.values(), found


# ---------------------------------------------------------------------------------------
# The benchmarks page against results.json
# ---------------------------------------------------------------------------------------
def numbers(cell):
    """'18176 [16928, 34480]' -> [18176.0, 16928.0, 34480.0]; 'not reached' -> [];
    'not reached [729000, not reached], 1 of 3 reached' -> [729000.0, 1.0, 3.0]."""
    return [float(x) for x in re.findall(r"-?\d+(?:\.\d+)?(?:e[+-]?\d+)?", cell)]


def test_every_figure_on_the_benchmarks_page_equals_results_json(pages):
    with open(os.path.join(ROOT, "benchmarks", "results.json")) as f:
        results = json.load(f)
    text = pages["benchmarks.md"]
    rows = {}
    for line in text.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        match = re.match(r"\[([^\]]+)\]\(benchmarks/results\.md#", cells[1]) if len(cells) > 1 else None
        if match:
            rows[match.group(1)] = cells
    assert set(rows) == set(results), "a row for every task of results.json"
    for name, cells in rows.items():
        runs = results[name]["runs"]
        script = results[name]["script"]  # a peer's run (cleanrl-ppo): its name, no page
        assert cells[0] == (f"[{script}.py](algorithms/{script}.md)"
                            if os.path.exists(os.path.join(ROOT, f"{script}.py")) else script)
        assert cells[2] == results[name]["env_id"] and int(cells[4]) == len(runs)
        for cell, key, tolerance in ((cells[5], "solve_step", 0.5), (cells[6], "eval_return", None),
                                     (cells[7], "sps", 0.5)):
            values = sorted(r[key] for r in runs if r[key] is not None)
            if not values:
                assert cell == "not reached"
                continue
            # every seed counts: one that did not reach the threshold is the worst, after
            # every value (issue 73), so the median of 3 of which 1 reached is not reached
            ordered = values + [np.inf] * (len(runs) - len(values))
            median = np.median(ordered)
            expected = [median, values[0], values[-1]]
            if len(values) < len(runs):  # the max is "not reached", and the median may be
                expected = [median, values[0]] if np.isfinite(median) else [values[0]]
                assert cell.endswith(f", {len(values)} of {len(runs)} reached"), (name, cell)
                assert cell.startswith("not reached [") == (not np.isfinite(median)), (name, cell)
            shown = numbers(cell)
            assert len(shown) == len(expected) + (2 if len(values) < len(runs) else 0), (name, cell)
            for shown, true in zip(shown, expected):
                # eval returns are shown to 4 significant digits
                allowed = tolerance if tolerance is not None else 5e-4 * abs(true) + 1e-9
                assert abs(shown - true) <= allowed, (name, key, shown, true)
    figures = re.findall(r"!\[[^\]]*\]\(benchmarks/([^)]+)\)", text)
    pngs = sorted(f for f in os.listdir(os.path.join(ROOT, "benchmarks")) if f.endswith(".png"))
    assert sorted(set(figures)) == pngs, "every figure of benchmarks/, each a file that exists"


def results_json():
    with open(os.path.join(ROOT, "benchmarks", "results.json")) as f:
        return json.load(f)


def spread(values, fmt):
    """'median [min, max]', as the tables write a task's seeds (worked out here, not by
    gen_pages or benchmark.py)."""
    return f"{fmt.format(np.median(values))} [{fmt.format(min(values))}, {fmt.format(max(values))}]"


def field_section(pages, field):
    """A field's section of the benchmarks page, from its heading to the next."""
    return pages["benchmarks.md"].split(f"\n## {field}\n")[1].split("\n## ")[0]


def test_the_benchmarks_pages_mujoco_table_is_results_jsons_final_evaluations(pages):
    # the README's MuJoCo table until issue 55; now the benchmarks page's, made by gen_pages
    # each cell is the median [min, max] over seeds of benchmark.py's eval_return (the final
    # greedy evaluation, after the last update), and "not yet" where results.json has no runs;
    # a row per script and budget: ppo at 1M, ddpg_td3 and sac at 100k (their -100k tasks)
    # and at 300k (their tasks without a label), crossq at 100k
    # a row whose first cell says "training episodes" holds the same runs' last-100-episode
    # training mean (final_train_mean), CleanRL's measure, instead
    section = field_section(pages, "MuJoCo")
    results = results_json()
    rows = {(script, line.split("|")[2].strip(), "training episodes" in line.split("|")[1]): line
            for script in ("ppo", "ddpg_td3", "sac", "crossq")
            for line in section.splitlines() if line.startswith(f"| {script}.py")}
    assert {("ppo", "1M", False), ("ppo", "1M", True), ("ddpg_td3", "100k", False),
            ("sac", "100k", False), ("crossq", "100k", False)} <= set(rows)
    assert set(rows) <= {("ppo", "1M", False), ("ppo", "1M", True),
                         ("crossq", "100k", False)} | {
        (s, b, False) for s in ("ddpg_td3", "sac") for b in ("100k", "300k")}
    for (script, budget, training), line in rows.items():
        cells = [c.strip() for c in line.strip("|").split("|")]
        for env, cell in zip(("Hopper-v5", "HalfCheetah-v5", "Walker2d-v5"), cells[2:5]):
            task = (f"ppo-{env}" if script == "ppo" else
                    f"{script}-{env}-100k" if budget == "100k" else f"{script}-{env}")
            if task not in results:
                assert cell == "not yet", (task, cell)
                continue
            figure = "final_train_mean" if training else "eval_return"
            expected = spread([run[figure] for run in results[task]["runs"]], "{:,.0f}")
            assert cell == expected, (task, cell, expected)


def test_the_benchmarks_pages_minatar_table_is_results_jsons_training_means(pages):
    # the README's MinAtar table until issue 55; now the benchmarks page's, made by gen_pages
    # a row per script: each game's cell is the median [min, max] over seeds of the
    # 100-episode training mean at the end (the last point of each seed's curve), and "not
    # yet" where results.json has no runs of the task as it is now (a labelled entry is an
    # older setting's, kept for the notes)
    section = field_section(pages, "MinAtar")
    results = results_json()
    header = next(line for line in section.splitlines() if line.startswith("| MinAtar game |"))
    games = [c.strip().replace(" ", "") for c in header.strip("|").split("|")[1:]]
    assert games == ["Asterix", "Breakout", "Freeway", "Seaquest", "SpaceInvaders"]
    rows = {script: line for script in ("ppo", "dqn") for line in section.splitlines()
            if line.startswith(f"| {script}.py, median [range] |")}
    assert sorted(rows) == ["dqn", "ppo"]
    for script, line in rows.items():
        cells = [c.strip() for c in line.strip("|").split("|")[1:]]
        assert len(cells) == len(games), (script, cells)
        for game, cell in zip(games, cells):
            entry = results.get(f"{script}-MinAtar-{game}-v1")
            if entry is None or entry["label"]:
                assert cell == "not yet", (script, game, cell)
                continue
            assert entry["window"] == 100
            expected = spread([run["curve"][1][-1] for run in entry["runs"]], "{:.1f}")
            assert cell == expected, (script, game, cell, expected)


def test_the_benchmarks_pages_cleanrl_table_is_results_jsons_pairs_seed_by_seed(pages):
    # Issue 57's table, worked out here from results.json: ours and CleanRL's ppo.py on
    # CartPole-v1, the 20-episode mean at the budget, the steps and seconds to 475 and the
    # whole process of each side as median [min, max], and the ratio of the two processes of
    # each seed (the two started together), paired by seed, not by position in the lists
    section = pages["benchmarks.md"].split("\n### Beside CleanRL\n")[1].split("\n## ")[0]
    results = results_json()
    ours = {r["seed"]: r for r in results["ppo-CartPole-v1-vs-cleanrl"]["runs"]}
    theirs = {r["seed"]: r for r in results["cleanrl-ppo-CartPole-v1"]["runs"]}
    assert sorted(ours) == sorted(theirs) == [101, 102, 103]
    row = next(line for line in section.splitlines()
               if line.startswith("| ppo.py / CleanRL ppo.py |"))
    ratios = [ours[seed]["process_s"] / theirs[seed]["process_s"] for seed in ours]
    assert [cell.strip() for cell in row.strip("|").split("|")][1:] == [
        "CartPole-v1", "500,000", "3",
        *(spread([r["final_train_mean"] for r in side.values()], "{:.1f}") for side in (ours, theirs)),
        *(spread([r["solve_step"] for r in side.values()], "{:.0f}") for side in (ours, theirs)),
        *(spread([r["solve_s"] for r in side.values()], "{:.1f}") for side in (ours, theirs)),
        *(spread([r["process_s"] for r in side.values()], "{:.1f}") for side in (ours, theirs)),
        spread(ratios, "{:.2f}"), spread([r["eval_return"] for r in ours.values()], "{:.1f}")]
    assert "ours steps to 475" in section and "(20-episode mean)" in section
    assert "![vs-cleanrl-CartPole-v1](benchmarks/vs-cleanrl-CartPole-v1.png)" in section
    # the README's sentence: 192,516 / 21,408 = 8.99 (a ninth of the steps), ratio 0.68
    with open(os.path.join(ROOT, "README.md"), encoding="utf-8") as f:
        readme = " ".join(f.read().split())
    steps = [np.median([r["solve_step"] for r in side.values()]) for side in (ours, theirs)]
    assert round(steps[1] / steps[0]) == 9 and "reaches 475 in a ninth of CleanRL's steps" in readme
    assert f"its whole process in {np.median(ratios):.2f} of the time" in readme

    def medians(pair, field):
        """A pair's (our median, CleanRL's median) of a field over the seeds, and the median
        of the seeds' process ratios (ours over CleanRL's, paired by seed)."""
        ours, theirs = ({r["seed"]: r for r in results[name]["runs"]} for name in pair)
        ratios = [ours[seed]["process_s"] / theirs[seed]["process_s"] for seed in ours]
        return ([np.median([r[field] for r in side.values()]) for side in (ours, theirs)],
                np.median(ratios))
    # and dqn.py's: 189,341 / 246,427 = 0.77 of the steps, the ratio of the processes 1.13
    steps, ratio = medians(("dqn-CartPole-v1-vs-cleanrl", "cleanrl-dqn-CartPole-v1"), "solve_step")
    assert f"dqn.py reaches 475 in {steps[0] / steps[1]:.2f} of CleanRL's steps" in readme
    assert f"in {ratio:.2f} times the time" in readme
    # and ddpg_td3.py's: 2,938.4 / 1,613.4 = 1.82 the training mean, the process ratio 0.94
    means, ratio = medians(("ddpg_td3-HalfCheetah-v4-vs-cleanrl",
                            "cleanrl-td3_continuous_action-HalfCheetah-v4"), "final_train_mean")
    assert (f"training mean at 100k steps of HalfCheetah-v4 is {means[0] / means[1]:.1f} times "
            f"CleanRL's td3, in {ratio:.2f} of the time") in readme
    # and ppo.py's on Hopper-v4: the medians 2,502.1 and 2,180.7, the process ratio 0.94
    means, ratio = medians(("ppo-Hopper-v4-vs-cleanrl", "cleanrl-ppo_continuous_action-Hopper-v4"),
                           "final_train_mean")
    assert (f"ppo.py's at 1M steps of Hopper-v4 is {means[0]:,.0f} against CleanRL's "
            f"{means[1]:,.0f}, in {ratio:.2f} of the time") in readme
    # and sac.py's on HalfCheetah-v4: the medians 2,163.4 and 3,592.1, the process ratio 0.86
    means, ratio = medians(("sac-HalfCheetah-v4-vs-cleanrl",
                            "cleanrl-sac_continuous_action-HalfCheetah-v4"), "final_train_mean")
    assert (f"sac.py's at 100k steps of HalfCheetah-v4 is {means[0]:,.0f} against CleanRL's "
            f"{means[1]:,.0f}, whose settings start learning sooner, in {ratio:.2f} of the "
            "time") in readme


# ---------------------------------------------------------------------------------------
# In a browser
# ---------------------------------------------------------------------------------------
class Chromium:
    """Headless Chromium driven over its DevTools protocol (a WebSocket): one tab, the
    events of its page kept (requests, console messages, exceptions)."""

    def __init__(self, profile):
        from websockets.sync.client import connect
        self.process = subprocess.Popen(
            [CHROMIUM, "--headless=new", "--no-sandbox", "--disable-gpu", "--no-first-run",
             "--disable-extensions", "--disable-background-networking",
             "--remote-debugging-port=0",
             f"--user-data-dir={profile}", "about:blank"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        port_file = os.path.join(profile, "DevToolsActivePort")
        for _ in range(300):
            if os.path.exists(port_file) and len(open(port_file).read().split()) == 2:
                break
            time.sleep(0.1)
        port, path = open(port_file).read().split()
        self.stack = contextlib.ExitStack()
        self.socket = self.stack.enter_context(connect(f"ws://127.0.0.1:{port}{path}", max_size=None))
        self.next_id, self.events = 0, []
        target = self.send("Target.createTarget", url="about:blank")["targetId"]
        self.session = self.send("Target.attachToTarget", targetId=target, flatten=True)["sessionId"]
        for domain in ("Page", "Runtime", "Network", "Log"):
            self.send(f"{domain}.enable", session=True)

    def send(self, method, session=False, **params):
        self.next_id += 1
        message = {"id": self.next_id, "method": method, "params": params}
        if session:
            message["sessionId"] = self.session
        self.socket.send(json.dumps(message))
        while True:
            reply = json.loads(self.socket.recv(timeout=60))
            if reply.get("id") == self.next_id:
                if "error" in reply:
                    raise RuntimeError(f"{method}: {reply['error']}")
                return reply["result"]
            self.events.append(reply)

    def drain(self, seconds, until=None):
        """Collect the events of the next seconds, or until one of them is `until` (a method's
        name): whether it came."""
        end = time.time() + seconds
        while time.time() < end:
            try:
                event = json.loads(self.socket.recv(timeout=max(0.01, end - time.time())))
            except TimeoutError:
                break
            self.events.append(event)
            if until is not None and event.get("method") == until:
                return True
        return False

    def evaluate(self, expression):
        result = self.send("Runtime.evaluate", session=True, expression=expression,
                           awaitPromise=True, returnByValue=True)
        if "exceptionDetails" in result:
            raise RuntimeError(f"{expression[:60]}: {result['exceptionDetails']}")
        return result["result"].get("value")

    def open(self, url):
        self.events = []
        self.send("Page.navigate", session=True, url=url)
        assert (any(e.get("method") == "Page.loadEventFired" for e in self.events)
                or self.drain(60, until="Page.loadEventFired")), f"{url} did not load"
        # MathJax typesets after the load: wait for it (at most 30 s)
        self.evaluate("new Promise(r => { const t0 = Date.now(); (function wait() {"
                      " if (window.MathJax && MathJax.startup && MathJax.startup.promise)"
                      " MathJax.startup.promise.then(() => r(true));"
                      " else if (Date.now() - t0 > 30000) r(false); else setTimeout(wait, 50);"
                      " })(); })")
        self.drain(0.15)  # late requests and console errors

    def screenshot(self, path, width, height, mobile):
        self.send("Emulation.setDeviceMetricsOverride", session=True, width=width,
                  height=height, deviceScaleFactor=1, mobile=mobile)
        self.drain(0.5)
        data = self.send("Page.captureScreenshot", session=True, format="png")["data"]
        with open(path, "wb") as f:
            f.write(base64.b64decode(data))
        self.send("Emulation.clearDeviceMetricsOverride", session=True)

    def close(self):
        self.stack.close()
        self.process.terminate()
        self.process.wait(timeout=10)


# Runs in the page: what a reader would see go wrong.
PAGE_CHECK = r"""(() => {
  const text = [];
  const walker = document.createTreeWalker(document.body, NodeFilter.SHOW_TEXT, {acceptNode:
    n => n.parentElement.closest('pre, code, script, style, mjx-container')
         ? NodeFilter.FILTER_REJECT : NodeFilter.FILTER_ACCEPT});
  while (walker.nextNode()) text.push(walker.currentNode.nodeValue);
  const visible = text.join(' ');
  const raw = ['\\(', '\\[', '$$'].filter(m => visible.includes(m));
  const unrendered = [...document.querySelectorAll('.arithmatex')]
    .filter(e => !e.querySelector('mjx-container')).map(e => e.textContent.slice(0, 80));
  const images = [...document.images].filter(i => !i.complete || i.naturalWidth === 0)
    .map(i => i.getAttribute('src'));
  const loaded = [...document.images].filter(i => i.complete && i.naturalWidth > 0)
    .map(i => i.getAttribute('src'));
  const links = [...document.querySelectorAll('a[href]')].map(a => a.href);
  const ids = [...document.querySelectorAll('[id], a[name]')].map(e => e.id || e.name);
  return {raw, unrendered, images, loaded, links, ids,
          math: document.querySelectorAll('mjx-container').length};
})()"""

SEARCH = r"""new Promise(resolve => {
  const input = document.querySelector('.md-search__input');
  input.focus(); input.value = QUERY;
  input.dispatchEvent(new Event('input', {bubbles: true}));
  input.dispatchEvent(new KeyboardEvent('keyup', {bubbles: true, key: 'E'}));
  const t0 = Date.now();
  (function wait() {
    const hits = [...document.querySelectorAll('.md-search-result__link')].map(a => a.href);
    if (hits.length || Date.now() - t0 > 15000) resolve(hits); else setTimeout(wait, 100);
  })();
})"""


def search(query):
    """The JavaScript that types the query into the site's search box and resolves to the
    links of the results, best first (Material groups them by page, the best page first)."""
    return SEARCH.replace("QUERY", json.dumps(query))


# Runs in the page at 1280 x 2400: what a reader sees of its layout (issue 73)
LAYOUT_CHECK = r"""(() => {
  const tables = [...document.querySelectorAll('.md-typeset__scrollwrap')]
    .filter(w => w.offsetParent !== null && w.scrollWidth > w.clientWidth + 1)
    .map(w => (w.querySelector('th') || {}).textContent);
  const box = document.querySelector('.pseudocode');
  const first = document.querySelector('article table');
  return {wider: document.documentElement.scrollWidth > document.documentElement.clientWidth,
          tables,
          pseudocode_bottom: box ? box.getBoundingClientRect().bottom + window.scrollY : null,
          first_table_top: first ? first.getBoundingClientRect().top + window.scrollY : null};
})()"""


def failures_of(events, site_url):
    """Requests to anything but the site's own files, and console errors, from the events."""
    off_site, errors = [], []
    for e in events:
        params = e.get("params", {})
        if e.get("method") == "Network.requestWillBeSent":
            url = params["request"]["url"]
            if not url.startswith((site_url, "data:", "blob:", "about:")):
                off_site.append(url)
        elif e.get("method") == "Runtime.exceptionThrown":
            errors.append(params["exceptionDetails"].get("exception", {}).get(
                "description", params["exceptionDetails"].get("text")))
        elif e.get("method") == "Runtime.consoleAPICalled" and params.get("type") in ("error", "assert"):
            errors.append(" ".join(str(a.get("value", a.get("description"))) for a in params["args"]))
        elif e.get("method") == "Log.entryAdded" and params["entry"]["level"] == "error":
            errors.append(f"{params['entry'].get('text')} {params['entry'].get('url', '')}")
        elif e.get("method") == "Network.loadingFailed" and not params.get("canceled"):
            errors.append(f"failed to load: {params.get('errorText')}")
    return off_site, errors


@pytest.mark.skipif(CHROMIUM is None, reason="needs Chromium: apt-get install -y chromium")
@pytest.mark.slow  # the built site in headless Chromium
def test_every_page_opens_in_chromium_whole_and_offline(site):
    pytest.importorskip("websockets", reason="pip install -r docs/requirements.txt")
    folder = site[0]
    site_url = f"file://{folder}/"
    html_pages = sorted(os.path.relpath(os.path.join(d, f), folder)
                        for d, _, fs in os.walk(folder) for f in fs
                        if f.endswith(".html") and f != "404.html")
    os.makedirs(SCREENSHOTS, exist_ok=True)
    shots = {"index.html", "algorithms/ppo.html", "benchmarks.html"}
    problems = {kind: [] for kind in ("unrendered math", "no math", "broken images",
                                      "dead links", "off-site requests", "console errors")}
    ids, links, loaded, layout = {}, [], {}, {}
    with tempfile.TemporaryDirectory(ignore_cleanup_errors=True) as profile:  # Chromium writes late
        browser = Chromium(profile)
        try:
            for page in html_pages:
                browser.open(site_url + page)
                found = browser.evaluate(PAGE_CHECK)
                off_site, errors = failures_of(browser.events, site_url)
                problems["unrendered math"] += [(page, x) for x in found["raw"] + found["unrendered"]]
                if page.startswith("algorithms/") and found["math"] == 0:
                    problems["no math"].append(page)
                problems["broken images"] += [(page, x) for x in found["images"]]
                problems["off-site requests"] += [(page, x) for x in off_site]
                problems["console errors"] += [(page, x) for x in errors]
                browser.send("Emulation.setDeviceMetricsOverride", session=True, width=1280,
                             height=2400, deviceScaleFactor=1, mobile=False)
                browser.drain(0.1)
                layout[page] = browser.evaluate(LAYOUT_CHECK)
                for _ in range(10):  # a loaded machine lays the page out again late: a page
                    if not layout[page]["wider"]:  # fails only if it stays wider for 2 s
                        break
                    browser.drain(0.2)
                    layout[page] = browser.evaluate(LAYOUT_CHECK)
                browser.send("Emulation.clearDeviceMetricsOverride", session=True)
                ids[page] = set(found["ids"])
                loaded[page] = found["loaded"]
                links += [(page, x) for x in found["links"]]
                if page in shots:
                    for size, (width, height, mobile) in SIZES.items():
                        name = page.replace("/", "-").replace(".html", f"-{size}.png")
                        browser.screenshot(os.path.join(SCREENSHOTS, name), width, height, mobile)
            browser.open(site_url + "index.html")
            hits = browser.evaluate(search("GAE"))
        finally:
            browser.close()
    for page, url in links:  # every link into the site reaches a file, and its anchor an id
        if not url.startswith(site_url):
            continue
        parts = urlsplit(url)
        target = os.path.relpath(unquote(parts.path), folder)
        if not os.path.exists(os.path.join(folder, target)):
            problems["dead links"].append((page, url))
        elif parts.fragment and target in ids and unquote(parts.fragment) not in ids[target]:
            problems["dead links"].append((page, url))
    # issue 73: no page wider than the window; a table too wide for its box scrolls inside it;
    # the benchmarks page's first screen shows results; how far down each pseudocode ends
    problems["wider than the window"] = [page for page, found in layout.items() if found["wider"]]
    print("tables that scroll in their box:", {p: f["tables"] for p, f in layout.items() if f["tables"]})
    print("screens of 2400 px to the end of the pseudocode:", {
        p.split("/")[-1][:-5]: round(f["pseudocode_bottom"] / 2400, 2)
        for p, f in layout.items() if f["pseudocode_bottom"]})
    assert layout["benchmarks.html"]["first_table_top"] < 1200, layout["benchmarks.html"]
    print({kind: len(found) for kind, found in problems.items()}, f"{len(html_pages)} pages")
    assert not any(problems.values()), {k: v[:5] for k, v in problems.items() if v}
    assert hits and "algorithms/ppo.html" in hits[0], hits[:3]
    # issue 60: TensorBoard's screenshot loads on the run folders' page
    assert "../img/tensorboard.png" in loaded["guide/run-folders.html"], loaded["guide/run-folders.html"]


# Issue 73: search finds the page that teaches a term, not every page whose script uses it:
# the source is folded out of the index (data-search-exclude) and the background of
# docs/teach/<script>.md is in it. The query runs in the site's own search (Material's lunr
# index and its ranking), typed into the box as a reader types it.
SEARCHES = {"clipped surrogate": {"ppo"}, "replay buffer": {"dqn"},
            "batch renormalization": {"crossq"}, "V-trace": {"impala", "ppo"},
            "conjugate gradient": {"trpo"}}


FOLDED_SOURCE_CLICK = r"""new Promise(resolve => {
  const link = document.querySelector('.pseudocode a[href^="#__codelineno-source-"]');
  const target = document.getElementById(link.getAttribute('href').slice(1));
  const fold = target.closest('details');
  const closed_before = !fold.open;
  link.click();
  setTimeout(() => resolve({closed_before, open_after: fold.open,
    top: target.getBoundingClientRect().top, height: window.innerHeight}), 500);
})"""


@pytest.mark.skipif(CHROMIUM is None, reason="needs Chromium: apt-get install -y chromium")
@pytest.mark.slow  # the built site in headless Chromium
def test_search_finds_the_page_that_teaches_the_term_first(site):
    pytest.importorskip("websockets", reason="pip install -r docs/requirements.txt")
    folder = site[0]
    with open(os.path.join(folder, "search", "search_index.json"), encoding="utf-8") as f:
        index = json.load(f)["docs"]
    for entry in index:  # no algorithm page's source is in the index
        if entry["location"].startswith("algorithms/"):
            assert "__main__" not in entry["text"] and "def cli(" not in entry["text"], \
                entry["location"]
    firsts = {}
    with tempfile.TemporaryDirectory(ignore_cleanup_errors=True) as profile:  # Chromium writes late
        browser = Chromium(profile)
        try:
            # the source is folded; a click on a pseudocode step's link opens it at the line
            browser.open(f"file://{folder}/algorithms/ppo.html")
            opened = browser.evaluate(FOLDED_SOURCE_CLICK)
            assert opened["closed_before"] and opened["open_after"], opened
            assert 0 <= opened["top"] < opened["height"], opened
            for query in SEARCHES:
                browser.open(f"file://{folder}/index.html")
                hits = browser.evaluate(search(query))
                firsts[query] = [urlsplit(hit).path.rsplit("/", 2)[-2:] for hit in hits[:3]]
        finally:
            browser.close()
    print(firsts)
    missed = {query: firsts[query] for query, scripts in SEARCHES.items()
              if firsts[query][0] not in [["algorithms", f"{s}.html"] for s in scripts]}
    assert not missed, missed  # Material ranks a page whose heading names the term first

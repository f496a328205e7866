"""The site's generated pages, and the MkDocs hook that adds them to the build.

mkdocs.yml names this file under `hooks:`. MkDocs's own hook mechanism, not a plugin, so
the site needs no package beyond mkdocs-material; and the pages are made anew in every
build, from the scripts, benchmarks/results.json, exercises.py and EXERCISES.md, and never
written to disk, so no page can be edited by hand and drift from the code it shows.
tests/test_site.py imports the same functions to check what the pages claim.

- one page per algorithm script (algorithms/<script>.md), in the order Spinning Up gives
  its pages, what a student needs to understand the algorithm first: the background
  (docs/teach/<script>.md's "## Background", written by hand; the docstring's idea until
  there is one), the key equations, the pseudocode (one numbered box, its loops indented,
  each line linked to its line of the source); then the results at a glance (a short table,
  ours beside a peer or the goal, doing nothing and random actions; captioned figures; the
  long tables folded; above them, where docs/record.py recorded one, a short video of the
  trained agent, docs/videos/<script>.mp4, captioned from docs/videos/videos.json), the implementation details and departures (numbered, each linked to
  its line) with the docstring's other notes, the flags, running it, the exercises, the
  questions and references (docs/teach/<script>.md's, else the docstring's papers, linked),
  and the source, folded and left out of the search index;
- the learning path, the benchmarks page, the teaching page, the lab notebook
  (benchmarks/results.md as it is, its figures beside it), the contributing page
  (CONTRIBUTING.md as it is);
- what the README said before it became the front door (issue 55), kept as Markdown in
  docs/parts/: its "Script by script" on each script's page, its MinAtar and MuJoCo sections
  on the benchmarks page around tables read from results.json. The guide's pages
  (docs/guide/) are plain Markdown that MkDocs reads itself;
- MathJax, copied into the site from the pinned django-static-mathjax package, so that a
  page fetches nothing from any other host.
"""
import ast
import functools
import html
import json
import os
import re
import shutil
import sys
from urllib.parse import quote_plus

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path[:0] = [p for p in (HERE, ROOT) if p not in sys.path]

# MkDocs puts docs/ on sys.path only while it loads a hook: everything is imported now.
import benchmark  # noqa: E402
from benchmarks import cleanrl_compare  # noqa: E402
import exercises  # noqa: E402
from algorithms import ALGORITHMS, ORDER  # noqa: E402
from markdown.extensions.toc import slugify  # noqa: E402

BANNER = "# Plumbing:"
# The flags every script has (CONTRIBUTING.md, "Flags every script has"): one table on the
# flags page of the teaching section instead of sixteen copies.
COMMON_FLAGS = {"env_id", "seed", "total_timesteps", "cuda", "output_dir", "exp_name",
                "eval_episodes", "eval_every", "stop_at_return", "save_model",
                "eval_checkpoint", "capture_video"}
NOTEBOOK_META = "---\nsearch:\n  boost: 0.5\n---\n"
SUMMARY_META = NOTEBOOK_META  # the learning path, teaching and benchmarks pages: they name every term
SOURCE_ID = "source"  # the id of a page's source block: its lines are #__codelineno-source-N


# ---------------------------------------------------------------------------------------
# Reading a script
# ---------------------------------------------------------------------------------------
def read(path):
    with open(os.path.join(ROOT, path), encoding="utf-8") as f:
        return f.read()


@functools.lru_cache(maxsize=None)
def parse(source):
    """ast.parse(source), once per text: a page looks up dozens of lines of one script
    (read only: every caller walks the tree, none changes it)."""
    return ast.parse(source)


def part(name):
    """A Markdown source of docs/parts/, without its opening comment (which says where it
    goes)."""
    text = read(os.path.join("docs", "parts", name))
    return re.sub(r"\A<!--.*?-->\n", "", text, flags=re.S)


def script_by_script():
    """The README's "Script by script" (docs/parts/script-by-script.md): the paragraph
    before its first section, and its sections as (heading, body)."""
    intro, *sections = re.split(r"^## ", part("script-by-script.md"), flags=re.M)
    return intro.strip(), [tuple(s.split("\n", 1)) for s in sections]


def running_it(script):
    """The sections of "Script by script" whose heading names the script ("sac.py and
    crossq.py" is on both pages)."""
    return [(heading, body.strip()) for heading, body in script_by_script()[1]
            if re.search(rf"(?<!\w){re.escape(script)}\.py\b", heading)]


def module_docstring(script):
    return ast.get_docstring(parse(read(f"{script}.py")), clean=True)


def docstring_lines(script):
    """The module docstring's lines, stripped: what an equation's line must be one of."""
    return [line.strip() for line in module_docstring(script).splitlines()]


def paragraphs(doc):
    """The docstring cut at blank lines."""
    return [p for p in re.split(r"\n\s*\n", doc) if p.strip()]


def definitions(source):
    """{name: line} for every top-level function and class and every method
    (Class.method) of the script; of a name defined twice, the first (the story's Args, not
    the block's that adds RunFlags to it)."""
    found = {}
    for node in parse(source).body:
        if isinstance(node, (ast.FunctionDef, ast.ClassDef)):
            found.setdefault(node.name, node.lineno)
        if isinstance(node, ast.ClassDef):
            for item in node.body:
                if isinstance(item, ast.FunctionDef):
                    found[f"{node.name}.{item.name}"] = item.lineno
    return found


def locate(script, ref, source=None):
    """The line of the script where a pseudocode step's or an implementation detail's code
    is: `name`, `Class.method`, `function:Heading` (the comment line `# Heading:` inside
    that function), or `function::text` (the first line of that function's body below its
    docstring that contains the text, `train::eps=1e-5`). None where the script no longer
    has it."""
    source = source if source is not None else read(f"{script}.py")
    name, _, heading = ref.partition(":")
    line = definitions(source).get(name)
    if line is None or not heading:
        return line
    node = next(n for n in ast.walk(parse(source))
                if isinstance(n, (ast.FunctionDef, ast.ClassDef)) and n.lineno == line)
    lines, start = source.splitlines(), node.lineno
    if heading.startswith(":"):  # a line of code: below the docstring, never in it
        first = node.body[0]
        if isinstance(first, ast.Expr) and isinstance(getattr(first, "value", None), ast.Constant):
            start = first.end_lineno + 1
    for number in range(start, node.end_lineno + 1):
        if heading.startswith(":") and heading[1:] in lines[number - 1]:
            return number
        if lines[number - 1].strip().startswith(f"# {heading}:"):
            return number
    return None


def function_code(source, name):
    """A top-level function's or a method's (`Class.method`) code as the script writes it,
    dedented, its docstring left out (the equation above it says what it computes); a name
    the script no longer has fails the page, as code_link does."""
    import textwrap
    node = next((n for n in ast.walk(parse(source))
                 if isinstance(n, (ast.FunctionDef, ast.ClassDef))
                 and n.lineno == definitions(source).get(name)), None)
    if node is None:
        raise ValueError(f"docs/algorithms.py: the script has no {name!r} (its page shows it)")
    lines = source.splitlines()
    start = node.lineno - 1 - len(node.decorator_list)
    keep = list(range(start, node.end_lineno))
    first = node.body[0]
    if isinstance(first, ast.Expr) and isinstance(getattr(first, "value", None), ast.Constant) \
            and isinstance(first.value.value, str):
        docstring = set(range(first.lineno - 1, first.end_lineno))
        keep = [i for i in keep if i not in docstring]
    return textwrap.dedent("\n".join(lines[i] for i in keep)).rstrip()


def flags(script):
    """[(flag, default, docstring)] of the script's Args, in order."""
    tree = parse(read(f"{script}.py"))
    args = next(n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "Args")
    rows, body = [], args.body
    for i, node in enumerate(body):
        if isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            doc = ""
            if i + 1 < len(body) and isinstance(body[i + 1], ast.Expr) and isinstance(
                    getattr(body[i + 1], "value", None), ast.Constant):
                doc = " ".join(str(body[i + 1].value.value).split())
            default = ast.unparse(node.value) if node.value is not None else ""
            rows.append((node.target.id, default, doc))
    return rows


def docstring_sections(script):
    """The module docstring cut into what a page shows: the idea (the paragraph after the
    title line, with the indented block it may introduce), the key equations as written,
    the papers, the commands, and the notes (every other paragraph, in order)."""
    parts = paragraphs(module_docstring(script))
    sections = {"title": parts[0], "idea": [], "equations": [], "notes": [], "papers": [],
                "run": []}
    section = "idea"
    for p in parts[1:]:
        first = p.lstrip().splitlines()[0]
        indented = p.startswith("    ")
        if first.startswith("Key equations"):
            section = "equations"
        elif first.startswith(("Papers:", "Paper:")):
            section = "papers"
        elif first.startswith(("Run:", "Run (")):
            section = "run"
        elif section == "idea" and sections["idea"] and not (
                indented and sections["idea"][-1].rstrip().endswith((",", ":"))):
            section = "notes"
        elif section in ("equations", "papers", "run") and not indented:
            section = "notes"
        sections[section].append(p)
    return sections


def commands(script):
    """The command lines the page shows that run the script itself, joined where a line
    was continued: (the line as shown, its argument list)."""
    import shlex
    found = []
    for line in module_docstring(script).replace("\\\n", " ").splitlines():
        marker = f"python {script}.py"
        if marker in line:
            shown = line.strip()
            argv = shlex.split(line.split(marker, 1)[1].split("#")[0])
            found.append((shown, argv))
    return found


# ---------------------------------------------------------------------------------------
# Markdown pieces
# ---------------------------------------------------------------------------------------
def prose(text):
    """A paragraph of docstring prose as Markdown: lines joined, < and > escaped, a list
    item kept as one; indented blocks (equations, commands) kept as code."""
    lines = text.splitlines()
    if all(not l.strip() or l.startswith("    ") for l in lines):
        return "```text\n" + "\n".join(l[4:] if l.startswith("    ") else l for l in lines) + "\n```"
    items, current = [], []
    for line in lines:
        if re.match(r"^\s*- ", line) and current:
            items.append(current)
            current = []
        current.append(line.strip())
    items.append(current)
    out = []
    for item in items:
        out.append(escape_prose(" ".join(item)))
    if len(out) > 1 or out[0].startswith("- "):
        head = [o for o in out if not o.startswith("- ")]
        listed = [o[2:] for o in out if o.startswith("- ")]
        return "\n".join(head) + ("\n\n" if head else "") + "\n".join(
            f"{n}. {o}" for n, o in enumerate(listed, 1))
    return out[0]


def escape_prose(text):
    """Docstring prose as Markdown text: outside `code spans`, < > & as entities and every
    underscore escaped (runs/<env_id>__sac__<seed> is no bold), backslashes kept."""
    pieces = re.split(r"(`[^`]*`)", text)
    for i in range(0, len(pieces), 2):
        plain = html.escape(pieces[i], quote=False).replace("\\", "\\\\")
        pieces[i] = plain.replace("_", "\\_")
    return "".join(pieces)


def code_link(script, ref, source):
    """A link to the line of the page's source that locate gives: `train, # Rollout` for a
    sub-heading, `train: eps=1e-5` for a line of code, the name otherwise."""
    line = locate(script, ref, source)
    if line is None:
        raise ValueError(f"docs/algorithms.py: {script}.py has no {ref!r} (its page links it)")
    name = ref.replace("::", ": ", 1) if "::" in ref else ref.replace(":", ", # ")
    return f"[`{name}`](#__codelineno-{SOURCE_ID}-{line})"


def spread(values, fmt="{:.0f}"):
    return benchmark.spread(values, fmt)


# ---------------------------------------------------------------------------------------
# The teaching text of docs/teach/<script>.md
# ---------------------------------------------------------------------------------------
TEACH = os.path.join(HERE, "teach")


def teach_sections(script):
    """{heading: Markdown} of docs/teach/<script>.md's `## ` sections (Background, Questions,
    References), each as its writer wrote it; {} where the script has no such file yet."""
    path = os.path.join(TEACH, f"{script}.md")
    if not os.path.exists(path):
        return {}
    with open(path, encoding="utf-8") as f:
        text = f.read()
    found = {}
    for piece in re.split(r"^## ", text, flags=re.M)[1:]:
        heading, _, body = piece.partition("\n")
        found[heading.strip()] = body.strip()
    return found


# ---------------------------------------------------------------------------------------
# The pseudocode box
# ---------------------------------------------------------------------------------------
def loop_steps(script):
    """docs/algorithms.py's loop as (depth, text, place): a step is (text, place) at depth 0
    or (depth, text, place), depth 0, 1 or 2 the lines of the loops it is inside; place None
    for a line that no code does by itself (`end for`)."""
    steps = []
    for step in ALGORITHMS[script].loop:
        depth, text, place = step if len(step) == 3 else (0, *step)
        if depth not in (0, 1, 2):
            raise ValueError(f"docs/algorithms.py: {script}'s loop step {text!r} has depth "
                             f"{depth}; 0, 1 or 2")
        steps.append((depth, text, place))
    return steps


def pseudocode(script, source):
    """The loop as one boxed, numbered algorithm: each line indented by its depth, with the
    link to the line of the source that does it (code_link)."""
    out = ['<div class="pseudocode" markdown>',
           f'<p class="pseudocode__title"><strong>Algorithm</strong> {html.escape(ALGORITHMS[script].title)}'
           f" (<code>{script}.py</code>)</p>"]
    for n, (depth, text, place) in enumerate(loop_steps(script), 1):
        where = f' <span class="pseudocode__code">{code_link(script, place, source)}</span>' \
            if place else ""
        out.append(f'<div class="pseudocode__line pseudocode__line--{depth}" markdown="span">'
                   f'<span class="pseudocode__n">{n}</span> <span class="pseudocode__text">'
                   f"{text}</span>{where}</div>")
    return "\n".join(out + ["</div>"])


# ---------------------------------------------------------------------------------------
# Results: the short table, the figures, the long tables folded
# ---------------------------------------------------------------------------------------
def load_baselines():
    """benchmarks/baselines.json's {env_id: {"zero": {mean, std}, "random": {...}}} (written
    by benchmarks/baselines.py); {} where it is missing."""
    path = os.path.join(ROOT, "benchmarks", "baselines.json")
    if not os.path.exists(path):
        return {}
    with open(path) as f:
        return json.load(f)["envs"]


def baseline_cells(env_id, baselines):
    """The mean return of doing nothing and of random actions on the environment, or "-"
    where benchmarks/baselines.py does not measure it (the MPE ids)."""
    found = baselines.get(env_id)
    if not found:
        return ["-", "-"]
    return [f"{found[kind]['mean']:,.4g}" for kind in ("zero", "random")]


def task_of(name):
    """benchmark.py's Task of a results.json name; None for a peer's (cleanrl-ppo)."""
    return next((t for ts in benchmark.TASKS.values() for t in ts if t.name == name), None)


def peers(results):
    """{task: (peer task, what the peer is, the field both are read on)}: a CleanRL pair's
    other side on the training mean at the budget (the pair's measure, CleanRL's scripts
    evaluate nothing), else the second member of a comparison whose first member the task
    is (benchmark.py's COMPARISONS), on the greedy evaluation after training."""
    found = {}
    for pair in cleanrl_compare.PAIRS.values():
        if pair.ours.name in results and pair.cleanrl_task.name in results:
            found[pair.ours.name] = (pair.cleanrl_task.name, f"CleanRL's {pair.cleanrl}",
                                     "final_train_mean")
    for _, members in benchmark.COMPARISONS.values():
        first, second, *_ = list(members)
        if first in results and second in results:
            found.setdefault(first, (second, members[second], "eval_return"))
    return found


def glance_row(name, results, baselines, found_peers, first_cells=()):
    """A row of a short results table: the measure, ours, beside it (a peer on the same
    measure, else the task's goal and what it is measured on), doing nothing, random."""
    r = results[name]
    peer, said, field = found_peers.get(name, (None, None, "eval_return"))
    ours = measured([run[field] for run in r["runs"]])
    if peer:
        beside = (f"{escape_prose(said).replace('|', '&#124;')}: "
                  + measured([run[field] for run in results[peer]["runs"]]))
    else:
        task = task_of(name)
        on = "evaluation" if task is not None and task.eval_threshold else \
            f"{r.get('window', 20)}-episode training mean"
        beside = f"goal {r['threshold']:,g} ({on})"
    measure = (f"training mean, last {r.get('window', 20)} episodes" if field == "final_train_mean"
               else "greedy evaluation")
    cells = [*first_cells, measure, ours, beside, *baseline_cells(r["env_id"], baselines)]
    return "| " + " | ".join(cells) + " |"


def measured(values):
    """A return's median [min, max] over seeds; "not evaluated" where no seed has one (a
    speed task run with --eval-episodes 0)."""
    if all(v is None for v in values):
        return "not evaluated"
    return spread(values, "{:,.4g}")


GLANCE_HEAD = ("| measure | ours, median [min, max] | beside it | doing nothing | random actions |",
               "| --- | --- | --- | --- | --- |")


def glance_table(script, results, baselines=None):
    """The script's tasks, one row each: ours beside the peer or goal on the same measure,
    and what doing nothing and random actions score on the environment."""
    baselines = load_baselines() if baselines is None else baselines
    found_peers = peers(results)
    rows = ["| task " + GLANCE_HEAD[0], "| --- " + GLANCE_HEAD[1]]
    for name, r in results_for(script, results).items():
        rows.append(glance_row(name, results, baselines, found_peers,
                               (f"[{name}](../benchmarks/results.md#{name.lower()})",)))
    return "\n".join(rows)


def caption(name, results):
    """A figure's caption: a comparison's title (benchmark.COMPARISONS), else the task's
    script, environment and goal from results.json, else the figure's name."""
    if name in benchmark.COMPARISONS:
        return benchmark.COMPARISONS[name][0]
    if name in results:
        r = results[name]
        return f"{r['script']}.py on {r['env_id']}: {r['goal']}"
    return name.replace("-", " ")


def figure(name, results, base):
    """A figure at the content's width, a link to the full-size image, with its caption."""
    png = f"{base}{name}.png"
    return "\n".join([f'<figure class="result" markdown="span">',
                      f"  [![{name}]({png})]({png})",
                      f"  <figcaption>{html.escape(caption(name, results), quote=False)} "
                      f'(<a href="{png}">full size</a>)</figcaption>',
                      "</figure>"])


VIDEOS = os.path.join(HERE, "videos")  # docs/record.py's recordings and its videos.json


def load_videos():
    """docs/videos/videos.json (docs/record.py): {script: its recording's entry}, keeping only
    the entries whose mp4 is there; {} before any recording."""
    path = os.path.join(VIDEOS, "videos.json")
    if not os.path.exists(path):
        return {}
    with open(path, encoding="utf-8") as f:
        entries = json.load(f)
    return {s: e for s, e in entries.items() if os.path.isfile(os.path.join(VIDEOS, e["video"]))}


def judged_on_its_row(entry):
    """(what, figure, threshold): a recording's run judged as its script's row judges it (the
    task of benchmark.py on the environment, equal to the script's GOALS): the last-20
    training return (what None), the final evaluation, or the last-window mean the entry
    kept; None where there is no such row or the entry lacks its figure."""
    tasks = [t for t in benchmark.TASKS.get(entry["script"][:-3], [])
             if (t.env_id, t.label) == (entry["env_id"], "")]
    if not tasks:
        return None
    task = tasks[0]
    if task.eval_threshold or task.holds_on_eval:
        what, figure = "its final evaluation", entry.get("eval_return_mean")
    elif task.window == 20:
        what, figure = None, entry["train_return_last20"]
    else:  # entries recorded before summary.json kept the window's mean lack it
        what = f"the last-{task.window} mean"
        figure = entry.get("end_return") if entry.get("solved_window") == task.window else None
    return None if figure is None else (what, figure, task.threshold)


def video_caption(entry):
    """A recording's caption: what trained it and for how long, where training ended, and
    the recorded episode's return, from its videos.json entry."""
    budget = f"{entry['steps']:,} steps " + (
        "(its default budget)" if entry["default_budget"] else
        f"(--total-timesteps {entry['total_timesteps']:,}, not its default budget of "
        f"{entry['default_total_timesteps']:,})")
    end = f"last-20 training return {entry['train_return_last20']:,.2f} at the end"
    judged = judged_on_its_row(entry)
    if judged:
        what, figure, threshold = judged
        side = "at or above" if figure >= threshold else "below"
        end += f" ({what + f' {figure:,.2f}, ' if what else ''}{side} its row's threshold {threshold:,g})"
    return (f"The trained agent on {entry['env_id']}, seed {entry['seed']}: "
            f"`{entry['train_command']}` trained run {entry['run']} for {budget}, {end}; then "
            f"`{entry['record_command']}` recorded this greedy episode, return "
            f"**{entry['episode_return']:,.2f}** ({entry['bytes'] / 1000:.0f} KB, "
            f"{entry['date']}, [recording your agent](../guide/every-script.md#recording-your-agent)).")


def video(script, videos, base="../videos/"):
    """The script's recorded agent, an HTML5 video that plays from the offline site (its
    path relative to the page), with its caption; [] where the script has none yet."""
    entry = videos.get(script)
    if entry is None:
        return []
    return [f'<div class="agent-video" markdown="block">',
            f'<video controls loop muted playsinline preload="metadata" width="{entry["width"]}" '
            f'height="{entry["height"]}" style="max-width: 100%; height: auto" '
            f'src="{base}{entry["video"]}"></video>',
            f'<p class="caption" markdown="span">{video_caption(entry)}</p>',
            "</div>", ""]


def indented(text, by="    "):
    """Markdown moved inside a fold (`??? note`): every line indented, blank lines kept."""
    return "\n".join(by + line if line.strip() else "" for line in text.splitlines())


def fold(title, text, kind="note"):
    """A folded block (pymdownx.details) holding Markdown."""
    return f'??? {kind} "{title}"\n\n{indented(text)}\n'


def results_for(script, results):
    """The tasks of results.json that ran this script, by name."""
    return {name: r for name, r in sorted(results.items()) if r["script"] == script}


def ends_table(tasks, base="../benchmarks/"):
    """Where the script's runs end, a row per task (benchmark.py's statistics, kept in
    results.json): how many of its seeds hold at the end of the budget, the IQM of the end
    and of the evaluation with their 95% intervals, then when the threshold was first
    reached (median [min, max])."""
    rows = ["| task | seeds | holds at the end | end, IQM [95% CI] | eval, IQM [95% CI] "
            "| first reached (steps) |", "| --- | --- | --- | --- | --- | --- |"]
    for name, r in tasks.items():
        stats = benchmark.statistics(benchmark.with_eval_thresholds({name: r})[name])
        seeds = stats["seeds"]
        fresh = "fresh " if seeds[0] > 5 else ""
        on = "eval" if benchmark.judged_on_eval(r) else f"last {r.get('window', 20)}"
        rows.append(f"| [{name}]({base}results.md#{name.lower()}) | {len(seeds)} {fresh}"
                    f"({seeds[0]}–{seeds[-1]}) | **{benchmark.holds_cell(r, stats)}** "
                    f"(≥ {r['threshold']:g}, {on}) "
                    f"| {benchmark.format_interval(stats['end'])} "
                    f"| {benchmark.format_interval(stats['eval'])} "
                    f"| {spread([x['solve_step'] for x in r['runs']])} |")
    return "\n".join(rows)


def results_table(tasks, script_column=False, base="../benchmarks/"):
    """The table of tasks as results.md gives it (benchmark.py's spread), a row per task;
    with script_column, the script's page linked in a first column."""
    rows = ["| task | environment | threshold (window) | seeds | steps to threshold "
            "| eval return | steps/s | goal |",
            "| --- | --- | --- | --- | --- | --- | --- | --- |"]
    if script_column:
        rows = ["| script " + rows[0], "| --- " + rows[1]]
    for name, r in tasks.items():
        runs = r["runs"]
        page = ("" if not script_column else  # a peer's run (cleanrl-ppo) has no page here
                f"| [{r['script']}.py](algorithms/{r['script']}.md) " if r["script"] in ORDER
                else f"| {r['script']} ")
        rows.append(
            f"{page}| [{name}]({base}results.md#{name.lower()}) | {r['env_id']} "
            f"| {r['threshold']:g} ({'eval' if benchmark.judged_on_eval(r) else r.get('window', 20)}) "
            f"| {len(runs)} | {spread([x['solve_step'] for x in runs])} "
            f"| {spread([x['eval_return'] for x in runs], '{:.4g}')} "
            f"| {benchmark.timed(r, spread([x['sps'] for x in runs]))} "
            f"| {html.escape(r['goal'], quote=False)} |")
    if any(benchmark.timed(r, "") for r in tasks.values()):  # a time at a load above the cores
        rows += ["", "† a load above the machine's cores (results.md's *load*): the runs shared "
                 "them with other work, so the time is not comparable."]
    return "\n".join(rows)


def figures_for(script, results):
    """The figures of benchmarks/ that show this script: each task's, then the comparisons
    (benchmark.py's COMPARISONS) that draw one of its tasks."""
    names = [n for n in results_for(script, results)
             if os.path.exists(os.path.join(ROOT, "benchmarks", f"{n}.png"))]
    for name, spec in benchmark.COMPARISONS.items():
        members = spec[1] if isinstance(spec, tuple) else spec
        if any(results.get(m, {}).get("script") == script for m in members) and \
                os.path.exists(os.path.join(ROOT, "benchmarks", f"{name}.png")):
            names.append(name)
    return names


def exercises_for(script):
    return [e for e in exercises.EXERCISES if e.script == script]


def check_seconds():
    """{exercise id: the seconds of its check} from EXERCISES.md's table."""
    seconds = {}
    for line in read("EXERCISES.md").splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) >= 3 and re.fullmatch(r"`[\w.]+`", cells[1] if len(cells) > 1 else "") \
                and cells[-1].isdigit():
            seconds[cells[1].strip("`")] = int(cells[-1])
    return seconds


def reference_list(script):
    """The docstring's papers as a list, each linked: to arXiv where it gives an arXiv id,
    else to a search for its title (the fallback of a page whose docs/teach file has no
    References)."""
    items = []
    for p in docstring_sections(script)["papers"]:
        lines = p.splitlines()
        head = re.sub(r"^\s*Papers?:\s*", "", lines[0])
        entries = [head] if head.strip() else []
        for line in lines[1:]:
            if re.match(r"^ {4}\S", line) or not entries:
                entries.append(line.strip())
            else:
                entries[-1] += " " + line.strip()
        items += [" ".join(e.split()) for e in entries if e.strip()]
    out = []
    for item in items:
        arxiv = re.search(r"arXiv:(\d{4}\.\d{4,5})", item)
        title = re.search(r'"([^"]+)"', item)
        url = (f"https://arxiv.org/abs/{arxiv.group(1)}" if arxiv else
               "https://scholar.google.com/scholar?q=" + quote_plus(title.group(1)) if title
               else None)
        text = escape_prose(item)
        out.append(f"- [{text}]({url})" if url else f"- {text}")
    return "\n".join(out)


# ---------------------------------------------------------------------------------------
# The pages
# ---------------------------------------------------------------------------------------
def algorithm_page(script, results=None, videos=None):
    """A script's page, in Spinning Up's order: what a student needs to understand the
    algorithm first (background, equations, pseudocode), then what it achieves, how the code
    does it, how to run it, exercises and questions, references, and the source folded."""
    results = results if results is not None else load_results()
    algo = ALGORITHMS[script]
    source = read(f"{script}.py")
    sections = docstring_sections(script)
    teach = teach_sections(script)
    out = [f"# {algo.title}: `{script}.py`", ""]

    out += ["## Background", ""]
    if "Background" in teach:
        out += [teach["Background"], ""]
    else:  # until docs/teach/<script>.md is written: the docstring's idea and the road
        for p in sections["idea"]:
            out += [prose(p), ""]
        position = ORDER.index(script)
        before = f" After [{ORDER[position - 1]}.py]({ORDER[position - 1]}.md): " if position else " "
        out += [f"!!! abstract \"On the road\"\n    {before.strip()} {algo.road}", ""]

    out += ["## Key equations", ""]
    for line, tex, *place in algo.equations:
        out += [f"$$\n{tex}\n$$", "", f'<p class="docline">the docstring\'s line: '
                f"<code>{html.escape(line)}</code></p>", ""]
        if place:  # the function that computes it, read from the script by name
            out += [f"The code, {code_link(script, place[0], source)} "
                    f"(line {locate(script, place[0], source)} of the source below):", "",
                    "```python", function_code(source, place[0]), "```", ""]
    if sections["equations"]:
        out += ['??? note "The key equations as the docstring writes them"', ""]
        for p in sections["equations"]:
            out += ["    " + l for l in prose(p).splitlines()] + [""]

    out += ["## Pseudocode", "",
            "Each line links to the line of the source (at the end of the page) that does it.",
            "", pseudocode(script, source), ""]

    out += ["## Results at a glance", ""]
    out += video(script, load_videos() if videos is None else videos)
    tasks = results_for(script, results)
    if tasks:
        out += ["Where the runs *end*, first: of each task's seeds, how many hold (the task's "
                "measure at the end of its budget at or above its threshold; a run can reach "
                "it and fall back), the interquartile mean of the end and of the greedy "
                "evaluation with 95% bootstrap intervals (rliable; of 3 seeds, their mean), "
                "then the step at which the threshold was first reached. Settings are chosen "
                "on seeds 1–5: seeds from 101 on are fresh.", "", ends_table(tasks), ""]
        out += ["Each cell is the median [min, max] over seeds, from `benchmarks/results.json`: "
                "ours beside a peer or the task's goal on the same measure, and what doing "
                "nothing (the same action at every step) and uniform random actions score on "
                "the environment (`benchmarks/baselines.py`, 10 episodes).", "",
                glance_table(script, results), ""]
    for name in figures_for(script, results):
        out += [figure(name, results, "../benchmarks/"), ""]
    if tasks:
        out += [fold("Every task: steps to the threshold, evaluation, speed, goal",
                     "*steps to threshold*: until the mean of the last *window* training "
                     "returns first reached the threshold (a seed that never did counts as the "
                     "worst); *eval return*: the greedy evaluation after training. The task's "
                     "name links its row, command and date in the "
                     "[lab notebook](../benchmarks/results.md).\n\n" + results_table(tasks))]
    if algo.protocols:
        out += [fold("How each comparison was made", "\n".join(
            f"- {escape_prose(text)}" for _, text in algo.protocols))]
    notebook = lab_notebook_anchor(script)
    if notebook:
        out += [f"The measurements and comparisons written up by hand: "
                f"[the lab notebook's {script}.py section](../benchmarks/results.md#{notebook}).", ""]

    if algo.details:  # numbered as CleanRL numbers them, each linked to its line
        out += ["## Implementation details and departures", "",
                "What the code does beyond the equations, numbered as CleanRL numbers its "
                "implementation details: each with the line of the source below that does it "
                "and its reason; a departure from the paper or the authors' code says so.", ""]
        for n, (text, ref) in enumerate(algo.details, 1):
            out.append(f"{n}. {escape_prose(text)}: {code_link(script, ref, source)}")
        out += ["", "### The docstring's other notes", "",
                "The rest of the module docstring, as the script gives it.", ""]
    else:
        out += ["## Notes and departures", "",
                "The rest of the module docstring: how the script reads the paper, and each "
                "place where it departs from the paper or the authors' code, with the reason.",
                ""]
    for p in sections["notes"]:
        out += [prose(p), ""]

    out += ["## Flags", "",
            f"The algorithm's flags of `{script}.py` (`python {script}.py --help` prints them "
            "all); the flags every script has are on the [flags page](../teaching.md#flags-"
            "every-script-has).", "", "| flag | default | what it does |", "| --- | --- | --- |"]
    for name, default, doc in flags(script):
        if name not in COMMON_FLAGS:
            # a code span shows its text as it is: no entities (html.escape showed &#x27;gae&#x27;)
            out.append(f"| `--{name.replace('_', '-')}` | `{default}` "
                       f"| {html.escape(doc, quote=False)} |")
    out += ["", "### Commands", ""]
    out += ["```bash"] + [shown for shown, _ in commands(script)] + ["```", ""]

    out += ["## Running it", "",
            "What to run, what to look at in the run folder, and what to try next.", ""]
    for heading, body in running_it(script):
        out += [f"### {heading}", "", body, ""]

    out += ["## Exercises", ""]
    seconds = check_seconds()
    own = exercises_for(script)
    if own:
        out += ["| exercise | function | paper | check (s) |", "| --- | --- | --- | --- |"]
        for e in own:
            out.append(f"| `{e.id}` | `{e.function}` | {html.escape(e.paper, quote=False)} "
                       f"| {seconds.get(e.id, '')} |")
        out += ["", f"`python exercises.py make {own[0].id}` writes the blank copy; "
                f"`python exercises.py check exercises/{script}.py` checks it "
                "([teaching](../teaching.md)).", ""]
    else:
        out += ["No exercise yet.", ""]

    if "Questions" in teach:
        out += ["## Questions", "",
                "Each answer is folded: try the question from the page first.", "",
                teach["Questions"], ""]

    out += ["## References", ""]
    out += [teach["References"] if "References" in teach else reference_list(script), ""]

    out += ["## The source", "",
            f"`{script}.py` whole, folded: a link above to one of its lines opens it. The "
            f"algorithm is everything above the line `{BANNER} ...`; below it is the plumbing "
            "(checks, run folder, evaluation, checkpoints), which a reader may skip. Search "
            "leaves it out, so that a term finds the page that teaches it.", "",
            f'<details class="abstract source" data-search-exclude markdown>',
            f"<summary>{script}.py, {len(source.splitlines()):,} lines</summary>", "",
            f'```{{ .python #{SOURCE_ID} linenums="1" hl_lines="{banner_line(source)}" }}',
            source.rstrip("\n"), "```", "", "</details>", ""]
    return "\n".join(out)


def banner_line(source):
    """The line of the plumbing banner, highlighted in the page's source."""
    return next(n for n, line in enumerate(source.splitlines(), 1) if line.startswith(BANNER))


def lab_notebook_anchor(script):
    """The anchor of results.md's notes heading for the script ("### ppo.py" -> ppopy)."""
    for line in read("benchmarks/results.md").splitlines():
        if line.startswith("### ") and line[4:].startswith(f"{script}.py"):
            return slugify(line[4:], "-")
    return None


def load_results():
    return json.loads(read("benchmarks/results.json"))


MUJOCO = ("Hopper", "HalfCheetah", "Walker2d", "Ant", "Humanoid", "Swimmer", "Reacher",
          "InvertedPendulum", "InvertedDoublePendulum")
FIELDS = ("Classic control and toy tasks", "MinAtar", "MuJoCo", "Multi-agent (MPE)")


def field_of(env_id):
    if env_id.startswith("MinAtar/"):
        return "MinAtar"
    if env_id.split("-v")[0] in MUJOCO:
        return "MuJoCo"
    if env_id.startswith("simple_"):
        return "Multi-agent (MPE)"
    return "Classic control and toy tasks"


MINATAR_GAMES = ("Asterix", "Breakout", "Freeway", "Seaquest", "SpaceInvaders")
# The MinAtar paper's DQN (Young & Tian 2019) at 1M frames (5M), each game at the best RMSProp
# step size of its sweep: the figures the paper prints, not results.json's
MINATAR_PAPER_DQN = ("7.0 (17.1)", "9.2 (10.0)", "47.8 (50.2)", "1.0 (20.2)", "32.7 (43.5)")
MUJOCO_ENVS = ("Hopper-v5", "HalfCheetah-v5", "Walker2d-v5")
# The MuJoCo table's rows: (first cell, script, budget, results.json's figure, the anchors'
# cell, which the papers and peers print); the figure's cells are read from results.json
MUJOCO_ROWS = [
    ("ppo.py, CleanRL's (Hopper, Walker2d), the zoo's", "ppo", "1M", "eval_return",
     "zoo 2,410 / 5,819 / 3,479"),
    ("ppo.py, the same runs: last 100 training episodes", "ppo", "1M", "final_train_mean",
     "CleanRL 2,383 / 1,443 / 2,288"),
    ("ddpg_td3.py (TD3), the paper's", "ddpg_td3", "100k", "eval_return",
     "TD3 paper 659 / 5,514 / 770"),
    ("sac.py, the 2018b paper's", "sac", "100k", "eval_return", "the same"),
    ("crossq.py, the authors' (critics 256 wide)", "crossq", "100k", "eval_return",
     "CrossQ paper 2,764 / 8,112 / 3,914 (2,048 wide, v4)"),
    ("ddpg_td3.py (TD3), the paper's", "ddpg_td3", "300k", "eval_return",
     "TD3 paper 2,410 / 7,697 / 3,335"),
    ("sac.py, the 2018b paper's", "sac", "300k", "eval_return", "the same"),
]


def minatar_table(results):
    """Each game's 100-episode training mean at the end (the last point of each seed's
    curve), median [min, max] over seeds, for ppo.py and dqn.py; "not yet" where
    results.json has no runs of the task as it is now (a labelled entry is an older
    setting's); then the paper's DQN."""
    games = [re.sub(r"(?<=[a-z])(?=[A-Z])", " ", game) for game in MINATAR_GAMES]
    rows = ["| MinAtar game | " + " | ".join(games) + " |",
            "| --- | " + " | ".join("---" for _ in games) + " |"]
    for script in ("ppo", "dqn"):
        cells = []
        for game in MINATAR_GAMES:
            entry = results.get(f"{script}-MinAtar-{game}-v1")
            cells.append("not yet" if entry is None or entry["label"] else
                         spread([run["curve"][1][-1] for run in entry["runs"]], "{:.1f}"))
        rows.append(f"| {script}.py, median [range] | " + " | ".join(cells) + " |")
    rows.append("| the paper's DQN at 1M (5M), each game at the best RMSProp step size of its "
                "sweep | " + " | ".join(MINATAR_PAPER_DQN) + " |")
    return "\n".join(rows)


def mujoco_task(script, env, budget):
    """results.json's name of a MuJoCo table cell's task: ppo at 1M; the others at
    100k (their -100k tasks) and 300k (without a label)."""
    if script == "ppo":
        return f"ppo-{env}"
    return f"{script}-{env}-100k" if budget == "100k" else f"{script}-{env}"


def mujoco_table(results):
    """A row per script and budget: each environment's median [min, max] over seeds of the
    final greedy evaluation (eval_return), or of the last 100 training episodes
    (final_train_mean) where the row says so; "not yet" where results.json has no runs."""
    rows = ["| script, settings | budget | " + " | ".join(MUJOCO_ENVS) + " | anchor |",
            "| --- | --- | " + " | ".join("---" for _ in MUJOCO_ENVS) + " | --- |"]
    for label, script, budget, figure, anchor in MUJOCO_ROWS:
        cells = []
        for env in MUJOCO_ENVS:
            task = results.get(mujoco_task(script, env, budget))
            cells.append("not yet" if task is None else
                         spread([run[figure] for run in task["runs"]], "{:,.0f}"))
        rows.append(f"| {label} | {budget} | " + " | ".join(cells) + f" | {anchor} |")
    return "\n".join(rows)


# A field's section of the benchmarks page opens with the README's text (docs/parts/), the
# marker line replaced by its table
FIELD_TEXT = {"MinAtar": ("benchmarks-minatar.md", minatar_table),
              "MuJoCo": ("benchmarks-mujoco.md", mujoco_table)}


def field_text(field, results):
    name, table = FIELD_TEXT[field]
    text, marked = re.subn(r"^<!-- results\.json: the \w+ table -->$",
                           lambda _: table(results), part(name), flags=re.M)
    assert marked == 1, f"docs/parts/{name} needs its table's marker line"
    return text.strip()


# The benchmarks page's first table: one task per script, the one whose result says most
# (beside a peer on the same measure where results.json has one)
SUMMARY_TASKS = {
    "qlearning": "qlearning-Taxi-v4", "dqn": "dqn-CartPole-v1-vs-cleanrl",
    "vpg": "vpg-CartPole-v1", "trpo": "trpo-Hopper-v5", "ppo": "ppo-Hopper-v4-vs-cleanrl",
    "ppo_masked": "ppo_masked-Taxi-v4", "ppod": "ppod-MountainCar-v0",
    "ppo_lstm": "ppo_lstm-CartPole-v1-novel", "ppo_rnd": "ppo_rnd-SparseChain-v0",
    "ddpg_td3": "ddpg_td3-HalfCheetah-v4-vs-cleanrl", "sac": "sac-HalfCheetah-v4-vs-cleanrl",
    "crossq": "crossq-Hopper-v5-100k", "es": "es-CartPole-v1",
    "impala": "impala-CartPole-v1-lag-vtrace", "mappo": "mappo-simple_spread_v3",
    "matd3": "matd3-simple_speaker_listener_v4",
}


def summary_table(results, baselines=None):
    """A row per script, in the learning path's order: its reference task, ours beside the
    peer or goal on the same measure, doing nothing and random actions."""
    baselines = load_baselines() if baselines is None else baselines
    found_peers = peers(results)
    rows = ["| script | task " + GLANCE_HEAD[0], "| --- | --- " + GLANCE_HEAD[1]]
    for script in ORDER:
        name = SUMMARY_TASKS.get(script)
        if name not in results:
            continue
        rows.append(glance_row(name, results, baselines, found_peers, (
            f"[{script}.py](algorithms/{script}.md#results-at-a-glance)", name)))
    return "\n".join(rows)


def benchmarks_page(results):
    """The summary a reader wants first (a row per script), then results.json's tasks field
    by field (the field's text and tables, every task's row folded, the figures), the
    comparisons with peers, and every other figure of benchmarks/."""
    out = [SUMMARY_META, "# Benchmarks", "",
           "One task per script: ours beside a peer (CleanRL's script, or the variant without "
           "the script's addition) or the task's goal on the same measure, and what doing "
           "nothing (the same action at every step) and uniform random actions score on the "
           "same environment, so that what was learned shows. A cell is the median [min, max] "
           "over seeds; a script's name opens its page's results.", "",
           summary_table(results), "",
           fold("How these figures were made", "Every figure on this page is read from "
                "`benchmarks/results.json` when the site is built; `benchmark.py` writes it "
                "(CONTRIBUTING.md, \"Benchmark\"). Each cell is the median [min, max] over "
                "seeds; in *steps to threshold* a seed that never reached the threshold counts "
                "as the worst, so a median over three seeds of which one reached it is *not "
                "reached*. *Doing nothing* and *random actions*: the mean return of 10 episodes "
                "(seeds 101-110) of the same action at every step (a Discrete space's action "
                "0, a Box's zeros) and of uniform random actions, measured by "
                "`benchmarks/baselines.py` (not on the multi-agent MPE tasks). A task's name "
                "links its row in the [lab notebook](benchmarks/results.md), which gives the "
                "command, the date and the machine's load, and whose notes below the table hold "
                "every comparison with a paper or a peer library, with its protocol.")]
    shown = set()
    for field in FIELDS:
        tasks = {n: r for n, r in sorted(results.items()) if field_of(r["env_id"]) == field}
        if not tasks:
            continue
        out += [f"## {field}", ""]
        if field in FIELD_TEXT:
            out += [field_text(field, results), ""]
        out += [fold(f"Every task of the field ({len(tasks)}): steps to the threshold, "
                     "evaluation, speed, goal",
                     results_table(tasks, script_column=True, base="benchmarks/"))]
        for name in tasks:
            if os.path.exists(os.path.join(ROOT, "benchmarks", f"{name}.png")):
                out += [figure(name, results, "benchmarks/"), ""]
                shown.add(name)
    out += ["## Side by side", "",
            "The comparisons that benchmark.py draws from results.json (the median over seeds, "
            "the min-max band shaded), and the figures of the notes: peers (CleanRL, "
            "Stable-Baselines3, the RL Zoo, AgileRL) and variants beside each other.", ""]
    cleanrl = cleanrl_compare.notes_table(results)
    if cleanrl:
        out += ["### Beside CleanRL", "",
                f"CleanRL's own scripts (commit `{cleanrl_compare.CLEANRL_COMMIT[:7]}`, with the "
                "packages it pins) run on this machine beside ours by "
                "`benchmarks/cleanrl_compare.py`: the same seeds, environment and budget, each "
                "script with its own defaults, one thread each, the two processes of a seed "
                "started together. Each cell is the median [min, max] over seeds of training "
                "returns (both sides' measure) and whole processes; the ratio is our process's "
                "time over CleanRL's on the same seed. The lab notebook's "
                "[Beside CleanRL](benchmarks/results.md#beside-cleanrl-issue-57) gives the "
                "commands, the loads and what each pair showed.", "", cleanrl, ""]
        for png in sorted(os.listdir(os.path.join(ROOT, "benchmarks"))):
            if png.startswith("vs-cleanrl-") and png.endswith(".png"):
                out += [figure(png[:-4], results, "benchmarks/"), ""]
                shown.add(png[:-4])
    for name in benchmark.COMPARISONS:
        if os.path.exists(os.path.join(ROOT, "benchmarks", f"{name}.png")):
            out += [figure(name, results, "benchmarks/"), ""]
            shown.add(name)
    for png in sorted(os.listdir(os.path.join(ROOT, "benchmarks"))):
        name = png[:-4]
        if png.endswith(".png") and name not in shown:
            out += [figure(name, results, "benchmarks/"), ""]
    return "\n".join(out)


def learning_path_page():
    """The scripts in the order a course walks them, what each adds, and its exercises."""
    out = ["# Learning path", "",
           "The scripts in the order a course walks them: tables first, then value-based deep "
           "RL, the policy-gradient road from VPG to PPO and its variants, the off-policy "
           "actor-critics, evolution and distributed acting, several agents, and language "
           "models last: a reward a program checks (GRPO), then one learned from preferences "
           "(RLHF, and DPO beside it). Each "
           "step names what it adds to the one before and the exercise to do there "
           "(`python exercises.py make <id>`; [teaching](teaching.md) says how).", "",
           script_by_script()[0], "",
           "Each script's page ends its flags with what to run, what to look at and what to "
           "try next; the [guide](guide/every-script.md) says what every script shares.", ""]
    for n, script in enumerate(ORDER, 1):
        algo = ALGORITHMS[script]
        ids = ", ".join(f"`{e.id}`" for e in exercises_for(script)) or "none yet"
        out += [f"{n}. **[{algo.title}](algorithms/{script}.md)** (`{script}.py`). "
                f"{algo.road} Exercises: {ids}.", ""]
    return "\n".join(out)


def contributing_section(heading):
    """A section of CONTRIBUTING.md, from its heading to the next of the same level."""
    text = read("CONTRIBUTING.md")
    start = text.index(f"## {heading}\n")
    end = text.find("\n## ", start + 1)
    return text[start:end if end > 0 else None].strip()


def teaching_page():
    """EXERCISES.md whole, a course's first week, and the flags every script has."""
    exercises_md = read("EXERCISES.md").split("\n", 1)[1]  # below its title
    first_week = [
        "## A course's first week", "",
        "1. Install (the README's quickstart) and run `python qlearning.py --env-id Taxi-v4`; "
        "draw its learning curve with the command its last line names (`python plot.py "
        "runs/<folder>`) and open its `episodes.csv`.",
        "2. Read [qlearning.py's page](algorithms/qlearning.md) and the script above its "
        "plumbing banner; do the exercise `qlearning.q_update` "
        "(`python exercises.py make qlearning.q_update`, then `check`).",
        "3. Run `python dqn.py --env-id CartPole-v1` and read [dqn.py's page](algorithms/dqn.md): "
        "the same target with a network, a replay buffer and a target network; do `dqn.targets`.",
        "4. Change one flag at a time (`--no-double-dqn`, `--target-network-frequency`) and "
        "compare the runs with `python plot.py` ([comparing runs](guide/comparing-runs.md)).",
        "5. Collect the week's files and grade them in one command "
        "([Handing out and collecting](#handing-out-and-collecting)).", ""]
    return "\n".join(["# Teaching", "",
                      "EXERCISES.md as the repository gives it, a student's page and then the "
                      "guide for teachers; then a plan for a course's first week and the flags "
                      "every script shares.",
                      "", exercises_md.strip(), "", *first_week,
                      contributing_section("Flags every script has"), ""])


# The guide's pages (docs/guide/, the README's sections that left it), as the home page
# lists them; mkdocs.yml's nav names the same files (--strict fails on a page left out)
GUIDE = [
    ("every-script", "What every script does",
     "the flags, bad input in one line, the console, Ctrl-C, what a GPU buys, recording your "
     "agent"),
    ("run-folders", "Run folders", "what a run writes, and watching it in TensorBoard or "
     "Weights & Biases"),
    ("comparing-runs", "Comparing runs", "seeds and a flag's values on one figure with plot.py"),
    ("your-own-environment", "Your own environment", "`--env-id module:EnvId`, a whole example"),
    ("pixels", "Learning from pixels", "ppo.py and dqn.py on Atari and MinAtar"),
    ("tests", "Tests", "the suite, one script's tests, the tests against a copy"),
    ("benchmark", "Running the benchmark", "benchmark.py's seeds, tasks and tables"),
    ("tuning", "Tuning a script", "tune.py: Optuna's search over flags on several seeds, "
     "resumable"),
    ("cluster", "From a laptop to a cluster", "benchmark.py and tune.py on a Ray cluster, and "
     "what the MuJoCo table costs"),
    ("notebooks", "Notebooks for the classroom", "one per road of the learning path, in Jupyter "
     "or Colab, what each installs and how long it runs"),
]


def home_page():
    rows = ["| step | script | algorithm |", "| --- | --- | --- |"]
    for n, script in enumerate(ORDER, 1):
        rows.append(f"| {n} | [`{script}.py`](algorithms/{script}.md) | {ALGORITHMS[script].title} |")
    guide = [f"- [{title}](guide/{name}.md): {what}." for name, title, what in GUIDE]
    return "\n".join([
        "# plainrl", "",
        "Reinforcement-learning algorithms written to be read: one self-contained Python file "
        "per algorithm, the equations in its docstring, tests that check the math against "
        "numbers worked out by hand. Every page here is built from the scripts themselves.", "",
        "```bash",
        "pip install -r requirements.txt && python ppo.py --env-id CartPole-v1",
        "pip install -r docs/requirements.txt && mkdocs serve --open   # this site",
        "```", "",
        "## Start here", "",
        "- **Run PPO and read its GAE**: [ppo.py's page](algorithms/ppo.md) gives the commands, "
        "the GAE's equations rendered beside the docstring lines they render, and each step "
        "of the loop linked to its line of the source.",
        "- **Grade a class**: [handing out and collecting](teaching.md#handing-out-and-collecting)"
        " an exercise, and the one command that checks every student's file and writes the "
        "grade book.",
        "- [Learning path](learning-path.md): the scripts in the order a course walks them.",
        "- [Benchmarks](benchmarks.md): every result, a table per field.",
        "- [Teaching](teaching.md): exercises, checking them, grading a class, a course's "
        "first week.", "",
        "## The guide", "", *guide,
        "- [Contributing](contributing.md): the contract every script, test and benchmark "
        "follows.", "",
        "## The scripts", "", *rows, ""])


def generated_pages():
    """{path under docs/: Markdown} of every generated page."""
    results = load_results()
    videos = load_videos()
    pages = {f"algorithms/{s}.md": algorithm_page(s, results, videos) for s in ORDER}
    pages["index.md"] = home_page()
    # the pages that name every script's terms rank below the pages that teach them in search
    pages["learning-path.md"] = SUMMARY_META + learning_path_page()
    pages["benchmarks.md"] = benchmarks_page(results)
    pages["teaching.md"] = SUMMARY_META + teaching_page()
    pages["contributing.md"] = read("CONTRIBUTING.md")
    return pages


# ---------------------------------------------------------------------------------------
# The MkDocs hook
# ---------------------------------------------------------------------------------------
def mathjax_dir():
    import mathjax  # django-static-mathjax, docs/requirements.txt
    return os.path.join(os.path.dirname(mathjax.__file__), "static", "mathjax")


def on_files(files, config):
    from mkdocs.structure.files import File
    for path, text in generated_pages().items():
        files.append(File.generated(config, path, content=text))
    for name in sorted(os.listdir(os.path.join(ROOT, "benchmarks"))):
        if name.endswith(".png"):
            files.append(File.generated(config, f"benchmarks/{name}",
                                        abs_src_path=os.path.join(ROOT, "benchmarks", name)))
    # the lab notebook as it is, below the algorithm pages in search (it names everything)
    files.append(File.generated(config, "benchmarks/results.md", content=NOTEBOOK_META
                                + read("benchmarks/results.md")))
    return files


def on_post_build(config):
    """MathJax into the site: tex-svg.js (SVG output, so no font files) with the components
    it may load on demand (TeX extensions, the menu, accessibility) and its licence."""
    source, target = mathjax_dir(), os.path.join(config["site_dir"], "mathjax")
    shutil.copytree(os.path.join(source, "es5"), target, dirs_exist_ok=True,
                    ignore=lambda folder, names: [n for n in names if n.endswith(".js") and
                                                  folder.endswith("es5") and n != "tex-svg.js"])
    shutil.copy(os.path.join(source, "LICENSE"), os.path.join(target, "LICENSE"))


def on_page_content(html_text, page, config, files):
    """MkDocs checks links to anchors against the ids it saw in the Markdown, which misses
    the line anchors that the highlighter writes into a code block's HTML: they are added
    here, so that a pseudocode step linking a line that is not there still fails --strict."""
    if page.present_anchor_ids is not None:
        page.present_anchor_ids |= set(re.findall(r'\bid="([^"]+)"', html_text))
    return html_text

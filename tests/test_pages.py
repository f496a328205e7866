"""The teaching pages (docs/teach/<script>.md) as a student reads them (issue 94).

A page teaches: it answers a reader's whys in a length read in one sitting, speaks to the
student, and shows its agent acting. The record of what was tried, with its flags and seeds,
belongs to the notes of the row in benchmarks/results.md, which a page links.

How the pages are measured here:

- **Words** are counted as `wc -w` counts them on the Markdown source: runs of characters
  between white space, tables, code, math and links included. A page has at most MAX_WORDS.
- **A paragraph** is a block of prose between blank lines of the source. Not prose, and so not
  counted: a fenced code block (from ``` to ```, blank lines inside it included), display math
  (from $$ to $$), a table (a block whose every line starts with `|`), a heading line (`#`) and
  a line of raw HTML (`<...>`). A list item (a line starting with `- `, `* `, `+ ` or `1. `,
  with the lines below it up to the next item or blank line) is a paragraph of its own, as a
  folded question's title line (`??? question "..."`) is; its indented answer is cut at blank
  lines as any text. A paragraph has at most MAX_PARAGRAPH words, counted as above (inline
  math and code spans included).
- **The voice** is checked on those paragraphs' prose with inline math (`$...$`), code spans,
  link targets and text in double quotes (a paper's own words, as ddpg_td3.md's "our DDPG")
  left out: no "issue <number>", no "working copy", no first person (I, me, my, we, us, our).
- **The agent acting**: a page of a script that acts in an environment has a recording,
  docs/videos/<script>.mp4 listed in docs/videos/videos.json (docs/record.py makes both;
  tests/test_videos.py holds every page to embedding it). A language model's page
  (LANGUAGE_MODEL_PAGES) has instead a section headed exactly `### The model answering`
  holding a Markdown table of held-out prompts with the model's answers at the warm start and
  after RL, and the command of the run they come from (`python <script>.py ...`).
"""
import glob
import json
import os
import re

import pytest

from conftest import ROOT

TEACH = os.path.join(ROOT, "docs", "teach")
VIDEOS = os.path.join(ROOT, "docs", "videos")
RESULTS = os.path.join(ROOT, "benchmarks", "results.md")
PAGES = sorted(os.path.basename(p)[:-3] for p in glob.glob(os.path.join(TEACH, "*.md")))
MAX_WORDS = 3000
MAX_PARAGRAPH = 300
LANGUAGE_MODEL_PAGES = {"grpo", "rlhf"}  # their agent's actions are text: a table, not a video
MODEL_ANSWERING = "### The model answering"

FORBIDDEN = [
    (re.compile(r"\bissues?\s*#?\s*\d+", re.I), "an issue number"),
    (re.compile(r"\bworking[ -]cop(?:y|ies)\b", re.I), "'working copy'"),
    (re.compile(r"\bI\b"), "first person"),  # case-sensitive: an index i is not the writer
    (re.compile(r"\b(?:me|my|mine|myself|we|we're|we've|we'd|we'll|us|our|ours|ourselves)\b",
                re.I), "first person"),
]


def read(script):
    with open(os.path.join(TEACH, f"{script}.md"), encoding="utf-8") as f:
        return f.read()


ITEM = re.compile(r"^\s*(?:[-*+]|\d+\.)\s")


def paragraphs(text):
    """The prose paragraphs of a page's Markdown, as the module docstring defines them."""
    text = re.sub(r"^[ \t]*```.*?^[ \t]*```[^\n]*$", "\n", text, flags=re.M | re.S)
    text = re.sub(r"\$\$.*?\$\$", "\n", text, flags=re.S)
    found = []
    for block in re.split(r"\n[ \t]*\n", text):
        lines = [line for line in block.splitlines() if line.strip()]
        if not lines or all(line.lstrip().startswith("|") for line in lines):
            continue
        pieces = []
        for line in lines:
            stripped = line.strip()
            if stripped.startswith("#") or (stripped.startswith("<") and stripped.endswith(">")):
                continue
            if stripped.startswith("???"):  # the title alone; its answer below is text
                pieces += [[stripped], []]
                continue
            if ITEM.match(line) or not pieces:
                pieces.append([])
            pieces[-1].append(stripped)
        found += [" ".join(piece) for piece in pieces if piece]
    return found


def words(text):
    return len(text.split())


def prose_of(paragraph):
    """A paragraph with what is not the page's own voice left out: math, code spans, link
    targets, quoted words; a folded question's title is kept, its `??? question` dropped."""
    text = re.sub(r'^\?\?\?\+?\s*\w+\s*"(.*)"\s*$', r"\1", paragraph)
    text = re.sub(r"\$[^$]*\$", " ", text)
    text = re.sub(r"`[^`]*`", " ", text)
    text = re.sub(r"\]\([^)]*\)", "]", text)
    return re.sub(r'"[^"]*"|“[^”]*”', " ", text)


@pytest.mark.parametrize("script", PAGES)
def test_a_page_is_read_in_one_sitting(script):
    count = words(read(script))
    assert count <= MAX_WORDS, (
        f"docs/teach/{script}.md has {count} words (at most {MAX_WORDS}): cut repetition, not "
        "reasons; a record of tries goes to its row's notes in benchmarks/results.md")


@pytest.mark.parametrize("script", PAGES)
def test_no_paragraph_runs_past_300_words(script):
    long = [(words(p), p[:80]) for p in paragraphs(read(script)) if words(p) > MAX_PARAGRAPH]
    assert not long, f"docs/teach/{script}.md: paragraphs over {MAX_PARAGRAPH} words: {long}"


@pytest.mark.parametrize("script", PAGES)
def test_a_page_speaks_to_the_student_not_as_a_lab_notebook(script):
    found = []
    for paragraph in paragraphs(read(script)):
        prose = prose_of(paragraph)
        for pattern, what in FORBIDDEN:
            for match in pattern.finditer(prose):
                start = max(0, match.start() - 40)
                found.append((what, prose[start:match.end() + 40].strip()))
    assert not found, f"docs/teach/{script}.md: {found}"


def model_answering(text):
    """The `### The model answering` section of a page, to the next heading of its level or
    above; None where there is none."""
    match = re.search(rf"^{re.escape(MODEL_ANSWERING)}[ \t]*\n(.*?)(?=^#{{1,3}} |\Z)", text,
                      flags=re.M | re.S)
    return match.group(1) if match else None


def table_rows(section):
    """The first Markdown table of a section as lists of cells: its header, then its rows (the
    separator row left out)."""
    lines, rows = section.splitlines(), []
    for line in lines:
        if line.strip().startswith("|"):
            rows.append([cell.strip() for cell in line.strip().strip("|").split("|")])
        elif rows:
            break
    return [row for row in rows if not all(re.fullmatch(r":?-{3,}:?", c) for c in row)]


@pytest.mark.parametrize("script", PAGES)
def test_every_page_shows_its_agent_acting(script):
    if script in LANGUAGE_MODEL_PAGES:
        section = model_answering(read(script))
        assert section is not None, (
            f"docs/teach/{script}.md has no section headed exactly {MODEL_ANSWERING!r}: "
            "held-out prompts with the model's answers at the warm start and after RL")
        rows = table_rows(section)
        assert rows, f"{script}: {MODEL_ANSWERING!r} holds no Markdown table"
        header, body = rows[0], rows[1:]
        prompt = next((i for i, c in enumerate(header) if re.search(r"prompt|problem|question", c, re.I)), None)
        warm = next((i for i, c in enumerate(header) if re.search(r"warm", c, re.I)), None)
        after = next((i for i, c in enumerate(header) if re.search(r"after\s+RL", c, re.I)), None)
        assert None not in (prompt, warm, after), (
            f"{script}: the table's header {header} names no prompt, warm-start and after-RL column")
        assert len(body) >= 2, f"{script}: the table shows {len(body)} held-out prompt(s)"
        for row in body:
            assert len(row) == len(header) and all(row[i] for i in (prompt, warm, after)), row
        assert f"python {script}.py" in section, f"{script}: the section names no run's command"
    else:
        with open(os.path.join(VIDEOS, "videos.json"), encoding="utf-8") as f:
            entry = json.load(f).get(script)
        assert entry is not None, f"docs/videos/videos.json has no recording of {script}.py"
        assert entry["script"] == f"{script}.py", entry["script"]
        path = os.path.join(VIDEOS, entry["video"])
        assert os.path.isfile(path), f"{script}: {path} is missing"
        with open(path, "rb") as f:
            assert f.read(12)[4:8] == b"ftyp", f"{path} is not an MP4"


def anchors_of_results():
    """The anchors results.md's page has: its `<a id>`s and its headings' slugs (the site's
    toc extension)."""
    with open(RESULTS, encoding="utf-8") as f:
        text = f.read()
    found = set(re.findall(r'<a id="([^"]+)"', text))
    try:
        from markdown.extensions.toc import slugify
    except ImportError:  # without the docs' packages the <a id>s alone are checked
        return found, False
    for heading in re.findall(r"^#{1,6} (.*)$", text, flags=re.M):
        found.add(slugify(re.sub(r"<[^>]+>", "", heading).strip(), "-"))
    return found, True


@pytest.mark.parametrize("script", PAGES)
def test_a_link_to_the_lab_notebook_lands_on_its_notes(script):
    anchors, slugs = anchors_of_results()
    links = re.findall(r"\]\(\.\./benchmarks/results\.md#([^)\s]+)\)", read(script))
    for anchor in links:
        assert anchor in anchors or not slugs, f"{script}: results.md has no #{anchor}"

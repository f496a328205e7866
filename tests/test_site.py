"""The documentation site (mkdocs.yml, docs/): built once with `mkdocs build --strict`, its
claims held to the scripts and results.json, and every page opened in headless Chromium as a
reader would open it from the built folder (file://, no network).

Skips where the site's packages are missing (pip install -r docs/requirements.txt), and the
browser test where Chromium is (apt-get install -y chromium)."""
import base64
import contextlib
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
pytestmark = pytest.mark.xdist_group("site")

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


@pytest.fixture(scope="session")
def pages():
    return gen_pages.generated_pages()


def test_the_site_builds_strict_with_every_script_on_a_page(site):
    folder, seconds = site
    print(f"mkdocs build --strict: {seconds:.1f} s")
    for script in ORDER:
        assert os.path.exists(os.path.join(folder, "algorithms", f"{script}.html"))
    scripts = {f[:-3] for f in os.listdir(ROOT) if f.endswith(".py")} - {
        "benchmark", "plot", "exercises"}
    assert scripts == set(ORDER), "every algorithm script has a page, and only those"
    assert os.path.exists(os.path.join(folder, "mathjax", "tex-svg.js"))


# ---------------------------------------------------------------------------------------
# What the pages claim, against the scripts
# ---------------------------------------------------------------------------------------
@pytest.mark.parametrize("script", ORDER)
def test_each_rendered_equation_names_a_line_that_stands_in_the_docstring(script, pages):
    lines = [line.strip() for line in importlib.import_module(script).__doc__.splitlines()]
    for line, tex in ALGORITHMS[script].equations:
        assert line.strip() in lines, f"{script}.py's docstring no longer has {line!r}: " \
                                      "change its equation in docs/algorithms.py too"
        assert tex in pages[f"algorithms/{script}.md"]


def source_line(script, number):
    with open(os.path.join(ROOT, f"{script}.py")) as f:
        return f.read().splitlines()[number - 1]


@pytest.mark.parametrize("script", ORDER)
def test_each_pseudocode_step_links_the_line_of_the_code_it_names(script, pages):
    links = re.findall(r"\[`([^`]+)`\]\(#__codelineno-source-(\d+)\)",
                       pages[f"algorithms/{script}.md"])
    assert len(links) == len(ALGORITHMS[script].loop)
    for shown, number in links:
        line = source_line(script, int(number)).strip()
        if ", # " in shown:  # train, # Rollout: the sub-heading comment inside train
            assert line.startswith(f"# {shown.split(', # ')[1]}:")
        else:  # Class.method or a function: its def or class line
            name = shown.split(".")[-1]
            assert re.match(rf"(def|class) {re.escape(name)}\b", line), (shown, line)


def test_a_pseudocode_step_naming_code_that_is_gone_fails_the_build():
    with pytest.raises(ValueError, match="ppo.py has no 'compute_gea'"):
        gen_pages.code_link("ppo", "compute_gea", gen_pages.read("ppo.py"))
    assert gen_pages.locate("ppo", "train:Nowhere") is None


def test_docstring_prose_reads_on_the_page_as_in_the_script():
    # underscores, angle brackets and backslashes are text; a `code span` stays code
    import markdown
    line = "runs/<env_id>__sac__<seed>/ with a\\b, x_1 and `--algo td3_x` (R & D)"
    rendered = markdown.markdown(gen_pages.escape_prose(line))
    assert rendered == ("<p>runs/&lt;env_id&gt;__sac__&lt;seed&gt;/ with a\\b, x_1 and "
                        "<code>--algo td3_x</code> (R &amp; D)</p>")


def site_commands(pages):
    """(page, script, argv) of every `python <script>.py ...` an algorithm script's command
    shown on the site, continued lines joined, comments and environment prefixes dropped."""
    found = []
    for page, text in pages.items():
        text = text.replace("\\\n", " ")
        for script in ORDER:
            for match in re.finditer(rf"python {script}\.py([^`\n#]*)", text):
                found.append((page, script, shlex.split(match.group(1))))
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
# The benchmarks page against results.json
# ---------------------------------------------------------------------------------------
def numbers(cell):
    """'18176 [16928, 34480]' -> [18176.0, 16928.0, 34480.0]; 'not reached' -> []."""
    return [float(x) for x in re.findall(r"-?\d+(?:\.\d+)?(?:e[+-]?\d+)?", cell.split(",  ")[0])]


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
        assert cells[0] == f"[{results[name]['script']}.py](algorithms/{results[name]['script']}.md)"
        assert cells[2] == results[name]["env_id"] and int(cells[4]) == len(runs)
        for cell, key, tolerance in ((cells[5], "solve_step", 0.5), (cells[6], "eval_return", None),
                                     (cells[7], "sps", 0.5)):
            values = [r[key] for r in runs if r[key] is not None]
            if not values:
                assert cell == "not reached"
                continue
            median, low, high = numbers(cell)[:3]
            for shown, true in ((median, np.median(values)), (low, min(values)), (high, max(values))):
                # eval returns are shown to 4 significant digits
                allowed = tolerance if tolerance is not None else 5e-4 * abs(true) + 1e-9
                assert abs(shown - true) <= allowed, (name, key, shown, true)
            missing = len(runs) - len(values)
            assert (f"{missing} of {len(runs)} not reached" in cell) == (missing > 0)
    figures = re.findall(r"!\[[^\]]*\]\(benchmarks/([^)]+)\)", text)
    pngs = sorted(f for f in os.listdir(os.path.join(ROOT, "benchmarks")) if f.endswith(".png"))
    assert sorted(set(figures)) == pngs, "every figure of benchmarks/, each a file that exists"


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

    def drain(self, seconds):
        end = time.time() + seconds
        while time.time() < end:
            try:
                self.events.append(json.loads(self.socket.recv(timeout=max(0.01, end - time.time()))))
            except TimeoutError:
                break

    def evaluate(self, expression):
        result = self.send("Runtime.evaluate", session=True, expression=expression,
                           awaitPromise=True, returnByValue=True)
        if "exceptionDetails" in result:
            raise RuntimeError(f"{expression[:60]}: {result['exceptionDetails']}")
        return result["result"].get("value")

    def open(self, url):
        self.events = []
        self.send("Page.navigate", session=True, url=url)
        end = time.time() + 60
        while not any(e.get("method") == "Page.loadEventFired" for e in self.events):
            assert time.time() < end, f"{url} did not load"
            self.drain(0.2)
        # MathJax typesets after the load: wait for it (at most 30 s)
        self.evaluate("new Promise(r => { const t0 = Date.now(); (function wait() {"
                      " if (window.MathJax && MathJax.startup && MathJax.startup.promise)"
                      " MathJax.startup.promise.then(() => r(true));"
                      " else if (Date.now() - t0 > 30000) r(false); else setTimeout(wait, 50);"
                      " })(); })")
        self.drain(0.3)

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
  const links = [...document.querySelectorAll('a[href]')].map(a => a.href);
  const ids = [...document.querySelectorAll('[id], a[name]')].map(e => e.id || e.name);
  return {raw, unrendered, images, links, ids,
          math: document.querySelectorAll('mjx-container').length};
})()"""

SEARCH = r"""new Promise(resolve => {
  const input = document.querySelector('.md-search__input');
  input.focus(); input.value = 'GAE';
  input.dispatchEvent(new Event('input', {bubbles: true}));
  input.dispatchEvent(new KeyboardEvent('keyup', {bubbles: true, key: 'E'}));
  const t0 = Date.now();
  (function wait() {
    const hits = [...document.querySelectorAll('.md-search-result__link')].map(a => a.href);
    if (hits.length || Date.now() - t0 > 15000) resolve(hits); else setTimeout(wait, 100);
  })();
})"""


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
    ids, links = {}, []
    with tempfile.TemporaryDirectory() as profile:
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
                ids[page] = set(found["ids"])
                links += [(page, x) for x in found["links"]]
                if page in shots:
                    for size, (width, height, mobile) in SIZES.items():
                        name = page.replace("/", "-").replace(".html", f"-{size}.png")
                        browser.screenshot(os.path.join(SCREENSHOTS, name), width, height, mobile)
            browser.open(site_url + "index.html")
            hits = browser.evaluate(SEARCH)
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
    print({kind: len(found) for kind, found in problems.items()}, f"{len(html_pages)} pages")
    assert not any(problems.values()), {k: v[:5] for k, v in problems.items() if v}
    assert hits and "algorithms/ppo.html" in hits[0], hits[:3]

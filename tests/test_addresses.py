"""No file sends a reader's machine to fetch code from an address this project does not control
(issue 86). The name plainrl is taken on the code hosts by others: a notebook that cloned
the GitHub repository of that name, or a guide that told a student to, would run whatever its
holder put there. So:

- no file names a code host's address under the name plainrl (an owner or a repository of
  that name: github.com, gitlab.com, raw.githubusercontent.com, Colab's GitHub opener, ...),
  nor installs a package of that name from a registry;
- what a student runs or reads (notebooks/, docs/, README.md, mkdocs.yml, the scripts) has no
  line that fetches code from a written-out address: `git clone`, `pip install git+...` or
  `pip install https://...`, `wget`/`curl`, `urlretrieve`/`urlopen`, an `..._URL`/`REPO`
  variable set to one. A placeholder (`<your copy's address>`) is fine, and so is a link to a
  peer's repository cited as a reference, which fetches nothing, and a tool's own maker's
  index or installer (INDEXES).

ALLOWED lists the addresses the project controls: none, unless mkdocs.yml's repo_url names
one. benchmarks/ fetches peers' reference code from their authors' own repositories (CleanRL,
TD3, SimbaV2): maintainers' tools, outside the second rule, inside the first."""
import os
import re
import subprocess

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
NAME = "plain" + "rl"  # spelled so that this file's own text names no address


def allowed():
    """The addresses the project controls: mkdocs.yml's repo_url where it sets one."""
    path = os.path.join(ROOT, "mkdocs.yml")
    text = open(path, encoding="utf-8").read() if os.path.exists(path) else ""
    return [m.group(1).rstrip("/") for m in re.finditer(r"^repo_url:\s*['\"]?(\S+?)['\"]?\s*$", text, re.M)]


HOSTS = (r"(?:www\.)?github\.com|gist\.github\.com|raw\.githubusercontent\.com|"
         r"(?:www\.)?gitlab\.com|bitbucket\.org|codeberg\.org|git\.sr\.ht|sourceforge\.net|"
         r"huggingface\.co|colab\.research\.google\.com/github|nbviewer\.org/github|"
         r"mybinder\.org/v2/gh|githubusercontent\.com|pypi\.org/project")
HOSTED = re.compile(rf"(?:https?://|git@|\b)(?:{HOSTS})[/:]~?([\w.-]+)(?:/([\w.-]+))?", re.I)
"""a code host's address and its first two path parts (owner and repository)"""

FETCH = re.compile(
    r"git\s+(?:clone|submodule\s+add|pull|fetch)\b[^\n]*|"        # git clone URL
    r"\"git\",\s*\"clone\"[^\n]*|"                                  # subprocess's list form
    r"pip3?\s+install\b[^\n]*?(?:git\+|https?://|\bplain" r"rl\b)[^\n]*|"  # from an address, or the name
    r"\b(?:wget|curl)\b[^\n]*|"
    r"\b(?:urlretrieve|urlopen|requests\.get|hf_hub_download)\([^\n]*|"
    r"\b[A-Z_]*(?:URL|REPO|REPOSITORY)[A-Z_]*\s*=\s*[\"'][^\"'\n]+[\"'][^\n]*", re.I)
"""a line that fetches code, from where it starts to the line's end"""

ADDRESS = re.compile(r"(?:https?|git|ssh)://[^\s\"'<>)\]`]+|git@[\w.-]+:[^\s\"'<>)\]`]+", re.I)
INDEXES = ("https://download.pytorch.org/whl/", "https://astral.sh/uv/")
"""where tools' own makers publish them, as a registry does: PyTorch's index (`--index-url` of
its CPU build) and uv's installer (docs/guide/cluster.yaml's nodes install uv with it)"""


def files():
    """The repository's files, tracked and not yet tracked (git ls-files), else every file
    under the root outside hidden folders and run folders."""
    try:
        out = subprocess.run(["git", "ls-files", "--cached", "--others", "--exclude-standard", "-z"],
                             cwd=ROOT, capture_output=True, text=True, check=True).stdout
        paths = sorted({p for p in out.split("\0") if p})
    except (OSError, subprocess.CalledProcessError):
        paths = sorted(os.path.relpath(os.path.join(d, f), ROOT) for d, dirs, names in os.walk(ROOT)
                       for f in names if not dirs.__setitem__(slice(None), [
                           x for x in dirs if not x.startswith(".") and x not in ("runs", "site")]))
    return [p for p in paths if os.path.isfile(os.path.join(ROOT, p))]


def text_of(path):
    try:
        with open(os.path.join(ROOT, path), encoding="utf-8") as f:
            return f.read()
    except (UnicodeDecodeError, OSError):
        return ""  # a binary file (a figure, a video)


def read_by_students(path):
    """notebooks/, docs/, README.md, mkdocs.yml, the scripts at the root, EXERCISES.md."""
    return (path.startswith(("notebooks/", "docs/")) or "/" not in path and (
        path.endswith(".py") or path in ("README.md", "mkdocs.yml", "EXERCISES.md", "CONTRIBUTING.md")))


def is_allowed(url, addresses):
    return url.startswith(INDEXES) or any(url.rstrip("/").startswith(a) for a in addresses)


def names_our_address(text, addresses):
    """Each code-host address under the name plainrl that ALLOWED does not list, with its line."""
    bad = []
    for match in HOSTED.finditer(text):
        owner, repository = match.group(1) or "", (match.group(2) or "").removesuffix(".git")
        if NAME in (owner.lower(), repository.lower()):
            start = text.rfind("\n", 0, match.start()) + 1
            line = text[start:text.find("\n", match.end()) % (len(text) + 1)]
            if not is_allowed(match.group(0), addresses):
                bad.append(f"{match.group(0)}  <- {line.strip()[:160]}")
    for match in re.finditer(rf"pip3?\s+install\b[^\n]*\b{NAME}\b(?![./\w-])", text, re.I):
        bad.append(f"installs the name from a registry <- {match.group(0)[:160]}")
    return bad


def fetches(text, addresses):
    """Each line that fetches code from a written-out address ALLOWED does not list."""
    bad = []
    for match in FETCH.finditer(text):
        line = match.group(0)
        urls = [u for u in ADDRESS.findall(line) if not is_allowed(u, addresses)]
        if urls or re.search(rf"pip3?\s+install\b.*\b{NAME}\b(?![./\w-])", line, re.I):
            bad.append(line.strip()[:200])
    return bad


def violations(paths, addresses):
    found = []
    for path in paths:
        text = text_of(path)
        found += [f"{path}: {v}" for v in names_our_address(text, addresses)]
        if read_by_students(path):
            found += [f"{path}: fetches code: {v}" for v in fetches(text, addresses)]
    return found


def test_the_project_controls_no_address_unless_mkdocs_names_one():
    assert all(a.startswith("https://") for a in allowed())


def test_no_file_names_an_address_the_project_does_not_control():
    found = violations(files(), allowed())
    assert not found, ("an address this project does not control, which whoever holds it would "
                       "run in a reader's session (issue 86):\n" + "\n".join(found))


def test_the_notebooks_fetch_only_from_where_the_teacher_says():
    """Each notebook's source sets SCRIPTS_URL to "" (the teacher's to fill) and names no other
    address to fetch from."""
    for name in sorted(os.listdir(os.path.join(ROOT, "notebooks"))):
        if re.fullmatch(r"\d\d_\w+\.py", name):
            text = text_of(f"notebooks/{name}")
            assert re.search(r'^SCRIPTS_URL = ""  #', text, re.M), name
            assert not re.search(r"^REPO\b", text, re.M), name


PLANTS = [
    ("notebooks/01_qlearning_dqn_pqn.py", 'REPO = "https://github.com/{n}/{n}"  # cloned\n'),
    ("notebooks/02_vpg_trpo_ppo.py", 'SCRIPTS_URL = "https://gitlab.com/someone/rl-scripts.git"\n'),
    ("notebooks/03_ddpg_td3_sac_crossq.py", '!wget https://example.org/scripts.zip\n'),
    ("docs/guide/notebooks.md", "git clone https://github.com/{n}/{n} && cd {n}\n"),
    ("docs/guide/notebooks.md", "open `https://colab.research.google.com/github/{n}/{n}/blob/main/x.ipynb`\n"),
    ("README.md", "pip install git+https://github.com/someone/{n}\n"),
    ("README.md", "pip install {n}\n"),
    ("benchmarks/results.md", "see raw.githubusercontent.com/{n}/{n}/main/ppo.py\n"),
    ("mkdocs.yml", "repo_url: https://github.com/{n}/{n}\n"),
]


@pytest.mark.parametrize("path,line", PLANTS)
def test_a_planted_address_fails(path, line):
    """Each plant, added to a copy of its file's text, is found; the text without it is clean."""
    text = text_of(path)
    assert not violations_in(path, text)
    planted = text + "\n" + line.format(n=NAME)
    assert violations_in(path, planted), line


def violations_in(path, text):
    addresses = [] if path == "mkdocs.yml" else allowed()
    found = names_our_address(text, addresses)
    return found + (fetches(text, addresses) if read_by_students(path) else [])


def test_what_is_fine_stays_fine():
    """A peer's repository cited as a link, PyTorch's index, uv's installer and a placeholder pass."""
    for line in ["[rliable](https://github.com/google-research/rliable)",
                 "pip install torch==2.13.0 --index-url https://download.pytorch.org/whl/cpu",
                 "  - curl -LsSf https://astral.sh/uv/install.sh | sh",
                 "git clone <your copy's git address> my-copy",
                 'SCRIPTS_URL = ""  # your copy',
                 "pip install -r requirements.txt"]:
        assert not violations_in("docs/guide/notebooks.md", line), line

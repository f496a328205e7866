"""The classroom notebooks (notebooks/, docs/guide/notebooks.md): each .ipynb is what its text
source gives (python notebooks/build.py), holds no outputs, shares its setup and helpers with
the others, and runs top to bottom in a real kernel with its budgets shrunk (SMOKE = True); the
setup takes the scripts only from where the teacher says, and stops with one line where there
are none (issue 86), and no file names an address the project does not control (below)."""
import importlib.util
import json
import os
import re
import shutil
import subprocess
import sys
import time
import zipfile

import pytest

# The slow tier (pytest.ini): each notebook runs in a real kernel, and the setup cell's tests
# each start a Python of their own
pytestmark = pytest.mark.slow

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
FOLDER = os.path.join(ROOT, "notebooks")
SOURCES = sorted(name for name in os.listdir(FOLDER) if re.fullmatch(r"\d\d_\w+\.py", name))
NAMES = [name[:-3] for name in SOURCES]

SMOKE_LIMIT_S = 180
"""a shrunk notebook's whole run, kernel start included, is 51-95 s with `pytest -n 2` on two
cores under a load of 9 (docs/guide/notebooks.md): most of it the start of each script's
process (importing PyTorch) and of the exercise check's pytest. A cell or a notebook that runs
past this has hung"""


def build():
    """notebooks/build.py as a module."""
    spec = importlib.util.spec_from_file_location("notebooks_build", os.path.join(FOLDER, "build.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def read(name):
    with open(os.path.join(FOLDER, f"{name}.ipynb"), encoding="utf-8") as f:
        return json.load(f)


def code_cells(name):
    return ["".join(cell["source"]) for cell in read(name)["cells"] if cell["cell_type"] == "code"]


def test_there_is_a_notebook_per_road_each_with_its_source():
    assert len(NAMES) == 8  # 07_grpo: the language-model road (issue 84); 08_rlhf: its
    # second half, a reward learned from preferences (issue 93)
    assert sorted(n for n in os.listdir(FOLDER) if n.endswith(".ipynb")) == [f"{n}.ipynb" for n in NAMES]


@pytest.mark.parametrize("name", NAMES)
def test_the_notebook_is_what_its_source_gives(name):
    pytest.importorskip("jupytext", reason="pip install jupytext==1.19.6 (requirements.txt)")
    module = build()
    with open(os.path.join(FOLDER, f"{name}.ipynb"), encoding="utf-8") as f:
        assert f.read() == module.render(os.path.join(FOLDER, f"{name}.py")), (
            f"notebooks/{name}.ipynb differs from notebooks/{name}.py: python notebooks/build.py")


@pytest.mark.parametrize("name", NAMES)
def test_the_notebook_holds_no_outputs(name):
    notebook = read(name)
    for cell in notebook["cells"]:
        assert cell.get("outputs", []) == [] and cell.get("execution_count") is None, cell["source"]
        assert set(cell["metadata"]) <= {"tags"}
    assert set(notebook["metadata"]) == {"kernelspec", "language_info", "colab"}


def test_the_notebooks_share_their_setup_and_helpers():
    """The first code cell (setup) differs only in PACKAGES; the third (helpers) not at all;
    the second (parameters) is tagged and has SMOKE and OUT."""
    setups = {re.sub(r"PACKAGES = \[.*?\]\n", "", code_cells(n)[0], flags=re.S) for n in NAMES}
    assert len(setups) == 1
    assert len({code_cells(n)[2] for n in NAMES}) == 1
    for name in NAMES:
        cell = [c for c in read(name)["cells"] if c["cell_type"] == "code"][1]
        assert cell["metadata"] == {"tags": ["parameters"]}
        assert re.search(r"^SMOKE = False$", "".join(cell["source"]), re.M)
        assert re.search(r"^OUT = ", "".join(cell["source"]), re.M)


def execute(path, out, timeout):
    """Run the notebook at path in a fresh python3 kernel, in the notebooks folder, with
    SMOKE = True and OUT = out set in a cell after its parameters cell; returns the seconds."""
    nbformat = pytest.importorskip("nbformat", reason="pip install nbformat==5.11.1")
    nbclient = pytest.importorskip("nbclient", reason="pip install nbclient==0.11.0 ipykernel==7.4.0")
    notebook = nbformat.read(path, as_version=4)
    at = next(i for i, c in enumerate(notebook.cells) if "parameters" in c.metadata.get("tags", []))
    notebook.cells.insert(at + 1, nbformat.v4.new_code_cell(f"SMOKE = True\nOUT = {str(out)!r}"))
    client = nbclient.NotebookClient(notebook, timeout=timeout, kernel_name="python3",
                                     resources={"metadata": {"path": FOLDER}})
    start = time.perf_counter()
    try:
        client.execute()
    except nbclient.exceptions.CellExecutionError as error:
        message = re.sub(r"\x1b\[[0-9;]*m", "", str(error))  # IPython's colours
        pytest.fail(f"{os.path.basename(path)}: a cell failed:\n{message}", pytrace=False)
    except nbclient.exceptions.CellTimeoutError as error:
        pytest.fail(f"{os.path.basename(path)}: a cell ran past {timeout} s:\n{error}", pytrace=False)
    return time.perf_counter() - start


# the many-workers notebook starts Ray (impala.py): it runs on the worker of the Ray tests
# (conftest.py's group "ray"), so that two Rays never start at once; the others spread
@pytest.mark.parametrize("name", [pytest.param(n, marks=pytest.mark.xdist_group("ray"))
                                  if "impala" in n else n for n in NAMES])
def test_the_notebook_runs_top_to_bottom_shrunk(name, tmp_path):
    seconds = execute(os.path.join(FOLDER, f"{name}.ipynb"), tmp_path, timeout=SMOKE_LIMIT_S)
    assert seconds < SMOKE_LIMIT_S, f"{name}: {seconds:.0f} s shrunk"
    assert list(tmp_path.glob("*/curve.png")) or list(tmp_path.glob("*/plot.png"))
    assert list(tmp_path.glob("*/videos/**/*.mp4"))


def run_setup(folder, url="", env_url=None, timeout=60, packages=(), prelude="", after=""):
    """Run the notebooks' setup cell alone (its PACKAGES set to `packages`: by default nothing
    to install) in a fresh kernel whose working folder is `folder`, SCRIPTS_URL = url and the
    environment's PLAINRL_SCRIPTS_URL env_url, between the code `prelude` (stand-ins) and
    `after`; returns the cell's printed text, its error's text (None where it ran) and the
    tracebacks IPython showed."""
    nbformat = pytest.importorskip("nbformat", reason="pip install nbformat==5.11.1")
    nbclient = pytest.importorskip("nbclient", reason="pip install nbclient==0.11.0 ipykernel==7.4.0")
    cell = re.sub(r"PACKAGES = \[.*?\]\n", f"PACKAGES = {list(packages)!r}\n", code_cells(NAMES[0])[0],
                  flags=re.S)
    cell = cell.replace('SCRIPTS_URL = ""', f"SCRIPTS_URL = {url!r}", 1)
    notebook = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(prelude + cell + after)])
    env = {k: v for k, v in os.environ.items() if k != "PLAINRL_SCRIPTS_URL"}
    if env_url is not None:
        env["PLAINRL_SCRIPTS_URL"] = env_url
    client = nbclient.NotebookClient(notebook, timeout=timeout, kernel_name="python3",
                                     resources={"metadata": {"path": str(folder)}})
    try:
        client.execute(env=env)  # the kernel's environment (jupyter_client's start_kernel)
        error = None
    except nbclient.exceptions.CellExecutionError as e:
        error = re.sub(r"\x1b\[[0-9;]*m", "", str(e))
    outputs = notebook.cells[0].get("outputs", [])
    printed = "".join(o.get("text", "") for o in outputs if o.get("output_type") == "stream")
    tracebacks = [o["traceback"] for o in outputs if o.get("output_type") == "error"]
    return printed, error, tracebacks


def assert_scripts_unpacked(setup, folder):
    """The setup cell ran (setup: run_setup's result) and found the scripts that a
    scripts_zip unpacked into folder/plainrl/."""
    printed, error, _ = setup
    assert error is None, error
    assert f"scripts in {folder / 'plainrl' / 'my-copy-main'}" in printed


def scripts_zip(path, top="my-copy-main/"):
    """A .zip like a git host's "Download ZIP": the scripts one folder down (exercises.py is
    what the setup cell looks for)."""
    with zipfile.ZipFile(path, "w") as z:
        z.write(os.path.join(ROOT, "exercises.py"), top + "exercises.py")
    return path


def test_without_scripts_or_an_address_the_setup_stops_with_one_line(tmp_path):
    """No default address (issue 86): with no scripts near, no SCRIPTS_URL, no zip and no Colab,
    the cell raises NoScripts, shown as its one line, and fetches nothing."""
    printed, error, tracebacks = run_setup(tmp_path)
    assert tracebacks and len(tracebacks[0]) == 1, tracebacks
    line = tracebacks[0][0]
    assert line.startswith("NoScripts: no scripts here: ") and "SCRIPTS_URL" in line and ".zip" in line
    assert "\n" not in line
    assert os.listdir(tmp_path) == [], "the cell fetched or wrote something"


# Stand-ins for the setup's installs: pip is recorded, not run, and PyTorch can be made to
# look missing and nvidia-smi present or not
PIP_STAND_IN = """import importlib.util, shutil, subprocess, sys
PIP = []
subprocess.run = lambda command, **kwargs: PIP.append(command)
_find_spec = importlib.util.find_spec
importlib.util.find_spec = lambda name, *a: None if (TORCH_MISSING and name == "torch") else _find_spec(name, *a)
shutil.which = lambda name, *a: NVIDIA_SMI if name == "nvidia-smi" else None
import importlib.metadata
_version = importlib.metadata.version
importlib.metadata.version = lambda name: TORCH_VERSION if (TORCH_VERSION and name == "torch") else _version(name)
"""


def stand_ins(torch_missing, nvidia_smi, torch_version=None):
    """The prelude of PIP_STAND_IN with its three settings: PyTorch looking missing or not
    (and, where there, at `torch_version`: None, the one installed) and nvidia-smi at
    `nvidia_smi` (None: absent)."""
    return (f"TORCH_MISSING, NVIDIA_SMI, TORCH_VERSION = {torch_missing!r}, {nvidia_smi!r}, "
            f"{torch_version!r}\n" + PIP_STAND_IN)


def torch_pin():
    """The PyTorch the setup cell pins (its TORCH, "torch==X")."""
    (pin,) = re.findall(r'^TORCH = "(torch==[^"]+)"$', code_cells(NAMES[0])[0], flags=re.M)
    return pin


def pip_commands_of_setup(folder, torch_missing, nvidia_smi, packages=(), torch_version=None):
    """Run the setup cell in `folder` (exercises.py put there: no fetch) with PACKAGES =
    packages, PyTorch looking missing or not (and, where there, at `torch_version`: None, the
    one installed) and nvidia-smi at `nvidia_smi` (None: absent); returns the pip commands it
    ran, recorded by PIP_STAND_IN and printed after the cell."""
    shutil.copy(os.path.join(ROOT, "exercises.py"), folder)
    prelude = stand_ins(torch_missing, nvidia_smi, torch_version)
    printed, error, _ = run_setup(folder, packages=packages, prelude=prelude,
                                  after='\nimport json\nprint("PIP=" + json.dumps(PIP))\n')
    assert error is None, error
    return json.loads(printed.split("PIP=", 1)[1].splitlines()[0])


@pytest.mark.skipif(sys.platform != "linux", reason="the CPU build's index is for Linux")
@pytest.mark.parametrize("nvidia_smi, cpu_index", [(None, True), ("/usr/bin/nvidia-smi", False)])
def test_without_an_nvidia_gpu_pytorch_comes_from_its_cpu_index(tmp_path, nvidia_smi, cpu_index):
    # Where PyTorch is missing, the setup installs it: from PyTorch's CPU index (0.2 GB) on a
    # Linux machine without nvidia-smi, from PyPI (the CUDA build) where there is one
    # at the version the cell pins (TORCH, requirements.txt's), not whatever is newest
    commands = pip_commands_of_setup(tmp_path, torch_missing=True, nvidia_smi=nvidia_smi)
    (torch_install,) = [c for c in commands if any(a.startswith("torch") for a in c)]
    index = "https://download.pytorch.org/whl/cpu"
    assert (index in torch_install) == cpu_index, torch_install
    pin = torch_pin()
    with open(os.path.join(ROOT, "requirements.txt")) as f:
        assert pin in f.read().split()
    assert pin in torch_install and "torch" not in torch_install, torch_install


def test_the_setup_installs_a_pinned_version_that_is_not_the_one_there(tmp_path):
    # installed() reads the version: numpy at the version that is there is kept, numpy at
    # another is installed (a name alone counts as there)
    import numpy
    packages = [f"numpy=={numpy.__version__}", "numpy==0.0.1", "numpy"]
    assert pip_commands_of_setup(tmp_path, torch_missing=False, nvidia_smi=None,
                                 packages=packages) == [
        [sys.executable, "-m", "pip", "install", "-q", "numpy==0.0.1"]]


def test_a_pytorch_that_is_there_is_kept_whatever_its_version(tmp_path):
    # Colab's own PyTorch (here made to look like 9.9.9, not the pin) is kept: it matches
    # Colab's CUDA, and reinstalling it would download gigabytes; only a missing one is
    # installed (the test above)
    commands = pip_commands_of_setup(tmp_path, torch_missing=False, nvidia_smi=None,
                                     torch_version="9.9.9")
    assert commands == []


def test_the_setup_takes_a_zip_beside_the_notebook(tmp_path):
    scripts_zip(tmp_path / "scripts.zip")
    assert_scripts_unpacked(run_setup(tmp_path), tmp_path)


def test_the_setup_takes_the_zip_that_holds_the_scripts_not_the_first_one(tmp_path):
    """Of the .zip files in the working folder, the one with exercises.py in it is unpacked:
    an unrelated one sorted before it (a-notes.zip) is passed over, not taken and stopped at."""
    with zipfile.ZipFile(tmp_path / "a-notes.zip", "w") as z:
        z.writestr("notes/readme.txt", "not the scripts")
    scripts_zip(tmp_path / "b-scripts.zip")
    assert_scripts_unpacked(run_setup(tmp_path), tmp_path)


def colab_stand_in(upload):
    """The code that puts a stand-in google.colab in sys.modules: files.upload() counts its
    calls in UPLOADS, copies the .zip at `upload` into the working folder as Colab does and
    returns {its name: its bytes}."""
    return f"""import os, shutil, sys, types
UPLOADS = []
def _upload():
    UPLOADS.append(1)
    shutil.copy({str(upload)!r}, "uploaded.zip")
    return {{"uploaded.zip": open("uploaded.zip", "rb").read()}}
_colab = types.ModuleType("google.colab")
_colab.files = types.SimpleNamespace(upload=_upload)
sys.modules["google"] = types.ModuleType("google")
sys.modules["google.colab"] = _colab
"""


def test_in_colab_with_nothing_given_the_setup_asks_for_an_upload(tmp_path):
    """In Colab (google.colab imported), with no scripts, no address and no .zip there, the
    cell asks for a .zip and unpacks the one uploaded; where a .zip is already there it asks
    for none and takes that one."""
    source = scripts_zip(tmp_path / "source.zip")
    count = '\nprint("UPLOADS=%d" % len(UPLOADS))\n'
    for folder, beside in (("a", False), ("b", True)):
        (tmp_path / folder).mkdir()
        if beside:
            scripts_zip(tmp_path / folder / "scripts.zip")
        setup = run_setup(tmp_path / folder, prelude=colab_stand_in(source), after=count)
        assert_scripts_unpacked(setup, tmp_path / folder)
        assert ("UPLOADS=0" if beside else "UPLOADS=1") in setup[0]
        assert ("Upload a .zip" in setup[0]) is not beside


def test_the_setup_takes_the_address_the_teacher_sets(tmp_path):
    """SCRIPTS_URL as a .zip address (here a file:// one), and PLAINRL_SCRIPTS_URL as a git
    address (here a local repository): each lands in plainrl/."""
    source = scripts_zip(tmp_path / "served.zip")
    (tmp_path / "a").mkdir()
    assert_scripts_unpacked(run_setup(tmp_path / "a", url=source.as_uri()), tmp_path / "a")

    repository = tmp_path / "repository"
    repository.mkdir()
    (repository / "exercises.py").write_text(open(os.path.join(ROOT, "exercises.py")).read())
    git = ["git", "-C", str(repository), "-c", "user.name=t", "-c", "user.email=t@t"]
    for command in (["init", "-q"], ["add", "exercises.py"], ["commit", "-q", "-m", "scripts"]):
        subprocess.run(git + command, check=True)
    (tmp_path / "b").mkdir()
    printed, error, _ = run_setup(tmp_path / "b", env_url=str(repository))
    assert error is None, error
    assert f"scripts in {tmp_path / 'b' / 'plainrl'}" in printed


def test_the_cells_scripts_url_comes_before_the_environments(tmp_path):
    """The teacher's SCRIPTS_URL in the cell wins; PLAINRL_SCRIPTS_URL is only the fallback.
    With the cell's .zip set, an environment naming a repository that is not there, or set
    empty, changes nothing: the scripts come from the cell's address either way."""
    source = scripts_zip(tmp_path / "served.zip")
    for folder, env_url in (("a", str(tmp_path / "no-such-repository")), ("b", "")):
        (tmp_path / folder).mkdir()
        setup = run_setup(tmp_path / folder, url=source.as_uri(), env_url=env_url)
        assert_scripts_unpacked(setup, tmp_path / folder)


def test_a_zip_address_with_a_query_after_it_is_downloaded_not_cloned(tmp_path):
    """A download link such as .../scripts.zip?raw=1 is a .zip address too: served here over
    HTTP on this machine (the server ignores the query), the cell downloads and unpacks it,
    where git clone of the same address would fail."""
    import functools
    import http.server
    import threading
    scripts_zip(tmp_path / "served.zip")
    handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=str(tmp_path))
    handler.log_message = lambda *args: None
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        (tmp_path / "a").mkdir()
        url = f"http://127.0.0.1:{server.server_address[1]}/served.zip?raw=1"
        setup = run_setup(tmp_path / "a", url=url)
    finally:
        server.shutdown()
    assert_scripts_unpacked(setup, tmp_path / "a")


# No address the project does not control (issue 86)
# No file sends a reader's machine to fetch code from an address this project does not control
# (issue 86). The name plainrl is taken on the code hosts by others: a notebook that cloned
# the GitHub repository of that name, or a guide that told a student to, would run whatever its
# holder put there. So:
#
# - no file names a code host's address under the name plainrl (an owner or a repository of
#   that name: github.com, gitlab.com, raw.githubusercontent.com, Colab's GitHub opener, ...),
#   nor installs a package of that name from a registry;
# - what a student runs or reads (notebooks/, docs/, README.md, mkdocs.yml, the scripts) has no
#   line that fetches code from a written-out address: `git clone`, `pip install git+...` or
#   `pip install https://...`, `wget`/`curl`, `urlretrieve`/`urlopen`, an `..._URL`/`REPO`
#   variable set to one. A placeholder (`<your copy's address>`) is fine, and so is a link to a
#   peer's repository cited as a reference, which fetches nothing, and a tool's own maker's
#   index or installer (INDEXES).
#
# allowed() lists the addresses the project controls: none, unless mkdocs.yml's repo_url names
# one. benchmarks/ fetches peers' reference code from their authors' own repositories (CleanRL,
# TD3, SimbaV2): maintainers' tools, outside the second rule, inside the first.
OUR_NAME = "plain" + "rl"  # spelled so that this file's own text names no address


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
    """Each code-host address under the name plainrl that allowed() does not list, with its line."""
    bad = []
    for match in HOSTED.finditer(text):
        owner, repository = match.group(1) or "", (match.group(2) or "").removesuffix(".git")
        if OUR_NAME in (owner.lower(), repository.lower()):
            start = text.rfind("\n", 0, match.start()) + 1
            line = text[start:text.find("\n", match.end()) % (len(text) + 1)]
            if not is_allowed(match.group(0), addresses):
                bad.append(f"{match.group(0)}  <- {line.strip()[:160]}")
    for match in re.finditer(rf"pip3?\s+install\b[^\n]*\b{OUR_NAME}\b(?![./\w-])", text, re.I):
        bad.append(f"installs the name from a registry <- {match.group(0)[:160]}")
    return bad


def fetches(text, addresses):
    """Each line that fetches code from a written-out address allowed() does not list."""
    bad = []
    for match in FETCH.finditer(text):
        line = match.group(0)
        urls = [u for u in ADDRESS.findall(line) if not is_allowed(u, addresses)]
        if urls or re.search(rf"pip3?\s+install\b.*\b{OUR_NAME}\b(?![./\w-])", line, re.I):
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
    planted = text + "\n" + line.format(n=OUR_NAME)
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


def test_check_exits_1_naming_a_stale_notebook_and_0_when_all_are_built(tmp_path):
    # build.py --check on a copy of one source: before a build its .ipynb is missing (stale:
    # exit status 1, the file named); after a build it is current (exit 0); a changed cell in
    # the source makes it stale again (exit 1), which CI relies on to catch a forgotten build
    pytest.importorskip("jupytext", reason="pip install jupytext==1.19.6 (requirements.txt)")
    shutil.copy(os.path.join(FOLDER, "build.py"), tmp_path / "build.py")
    shutil.copy(os.path.join(FOLDER, f"{NAMES[0]}.py"), tmp_path / f"{NAMES[0]}.py")

    def build_py(*argv):
        return subprocess.run([sys.executable, "build.py", *argv], cwd=tmp_path,
                              capture_output=True, text=True, timeout=120)

    missing = build_py("--check")
    assert missing.returncode == 1 and f"{NAMES[0]}.ipynb" in missing.stderr
    assert not (tmp_path / f"{NAMES[0]}.ipynb").exists()  # --check writes nothing
    assert build_py().returncode == 0 and build_py("--check").returncode == 0
    source = tmp_path / f"{NAMES[0]}.py"
    source.write_text(source.read_text() + "\n# %%\nprint('a new cell')\n")
    changed = build_py("--check")
    assert changed.returncode == 1 and f"{NAMES[0]}.ipynb" in changed.stderr


def test_a_file_named_zip_that_is_no_zip_is_passed_over_and_extras_do_not_hide_a_pin(tmp_path):
    """a-broken.zip (text, not a .zip) sorts before the scripts' .zip: it is passed over,
    not opened and failed on. A pin with an extra (numpy[x]==the version there) is the
    package's own version, so nothing is installed; the closing line says so."""
    import numpy
    (tmp_path / "a-broken.zip").write_text("not a zip")
    scripts_zip(tmp_path / "b-scripts.zip")
    prelude = stand_ins(torch_missing=False, nvidia_smi=None)
    setup = run_setup(tmp_path, packages=[f"numpy[x]=={numpy.__version__}"], prelude=prelude,
                      after='\nprint("PIP=" + str(PIP))\n')
    assert_scripts_unpacked(setup, tmp_path)
    assert "PIP=[]" in setup[0] and "installed: nothing (all there)" in setup[0]


def test_the_setup_says_it_installed_pytorch_where_it_was_missing(tmp_path):
    """PyTorch missing: the closing line lists the pinned torch (the cell's TORCH) with what
    it installed."""
    shutil.copy(os.path.join(ROOT, "exercises.py"), tmp_path)
    prelude = stand_ins(torch_missing=True, nvidia_smi="/usr/bin/nvidia-smi")
    printed, error, _ = run_setup(tmp_path, prelude=prelude)
    assert error is None, error
    assert f"scripts in {tmp_path} | installed: [{torch_pin()!r}]" in printed

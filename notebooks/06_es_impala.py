# %% [markdown]
# # Road 6: many workers, evolution strategies and IMPALA
#
# The distributed end of plainrl's learning path (the site's *Learning path* page), on
# CartPole: no gradient of the return at all, a population of perturbed parameters played by
# worker processes (`es.py`), and acting split from learning, Ray actors playing with weights
# that lag the learner's, corrected by V-trace (`impala.py`, which needs Ray). Each script runs
# here as it is, from the command line; its run folder holds its learning curve, and a run its
# video. Then the two on the same seeds, one exercise (ES's fitness shaping) from blank function
# to passing check, and the pages' questions.
#
# Run the cells in order. The first one finds the scripts (or fetches them) and installs what
# this notebook needs (Ray among them); the second sets the budgets.

# %%
# Setup: the scripts, and only the packages this notebook needs (PyTorch only where it is missing)
SCRIPTS_URL = ""  # where the scripts are not beside this notebook: your copy's git or .zip address
PACKAGES = ["gymnasium[classic-control]==1.4.0", "pygame-ce", "numpy==2.4.6", "matplotlib==3.11.2",
            "tyro==1.0.17", "tensorboard==2.21.0", "moviepy==2.2.1", "pytest==9.1.1", "ray==2.60.0"]
TORCH = "torch==2.13.0"
import glob, importlib.metadata, importlib.util, os, re, shutil, subprocess, sys, urllib.request, zipfile


def scripts_folder():
    """The folder holding the scripts: this notebook's (Jupyter's working folder), the one above
    it (notebooks/..), or plainrl/, where fetch_scripts puts them."""
    for folder in (".", "..", "plainrl", *sorted(glob.glob(os.path.join("plainrl", "*", "")))):
        if os.path.exists(os.path.join(folder, "exercises.py")):
            return os.path.abspath(folder)


def fetch_scripts():
    """Only from where the teacher says, none built in: the address in SCRIPTS_URL (else the
    environment's PLAINRL_SCRIPTS_URL), a git repository or a .zip; else a .zip of the scripts
    in the working folder; else, in Colab, a .zip uploaded now. Each goes into plainrl/."""
    url = SCRIPTS_URL or os.environ.get("PLAINRL_SCRIPTS_URL", "")
    if url and not re.search(r"\.zip($|\?)", url):  # a .zip address, a query after it or not
        subprocess.run(["git", "clone", "--depth", "1", url, "plainrl"], check=True)
        return
    archives = [urllib.request.urlretrieve(url)[0]] if url else sorted(glob.glob("*.zip"))
    if not archives and "google.colab" in sys.modules:
        from google.colab import files
        print("Upload a .zip of the scripts (your copy of the repository, exercises.py in it):")
        archives = list(files.upload())
    for archive in archives:
        if zipfile.is_zipfile(archive) and any(
                name.endswith("exercises.py") for name in zipfile.ZipFile(archive).namelist()):
            return zipfile.ZipFile(archive).extractall("plainrl")


class NoScripts(Exception):
    def _render_traceback_(self):  # what IPython shows: this one line, no traceback
        return [f"NoScripts: {self}"]


if scripts_folder() is None:
    fetch_scripts()
if scripts_folder() is None:
    raise NoScripts("no scripts here: open this notebook in notebooks/ of your copy of plainrl, "
                    "put a .zip of that copy beside it (in Colab: upload one when asked), or "
                    "set SCRIPTS_URL to its git or .zip address")
os.chdir(scripts_folder())


def installed(spec):
    """Whether the spec ("name==version", or a bare name) is installed, extras aside."""
    name, _, version = spec.partition("==")
    try:
        return version in ("", importlib.metadata.version(re.sub(r"\[.*\]", "", name)))
    except importlib.metadata.PackageNotFoundError:
        return False


missing = [spec for spec in PACKAGES if not installed(spec)]
if missing:
    subprocess.run([sys.executable, "-m", "pip", "install", "-q", *missing], check=True)
if importlib.util.find_spec("torch") is None:  # Colab has its own PyTorch: keep it
    # on Linux without an NVIDIA GPU, PyTorch's CPU build (0.2 GB) instead of the CUDA one (2.7 GB)
    cpu = sys.platform == "linux" and shutil.which("nvidia-smi") is None
    index = ["--extra-index-url", "https://download.pytorch.org/whl/cpu"] if cpu else []
    subprocess.run([sys.executable, "-m", "pip", "install", "-q", TORCH, *index], check=True)
    missing.append(TORCH)
print("scripts in", os.getcwd(), "| installed:", missing or "nothing (all there)")

# %% tags=["parameters"]
# Parameters: the budgets. SMOKE = True shrinks every run to a few hundred steps (the whole
# notebook in about 30 s: what the tests run); False trains for real (about 5 minutes on two
# CPU cores).
SMOKE = False
OUT = "runs/notebooks/06"  # the run folders, figures and exercise file of this notebook
SEEDS = [1, 2]  # the seeds of the comparison (the first alone when SMOKE)
CHECK_TRAINS = True  # the exercise's check also trains the script briefly (never when SMOKE)


def budget(full, smoke):
    """A flag's value: `full` for real, `smoke` when SMOKE shrinks the notebook."""
    return str(smoke if SMOKE else full)


# %%
# Helpers: run a script and show what its run folder holds
import glob
from IPython.display import Image, Markdown, Video, display


def sh(*command):
    """Run a command in the scripts' folder, its output printed as it comes; raise if it fails."""
    print("$", " ".join(command), flush=True)
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    for line in process.stdout:
        print(line, end="", flush=True)
    if process.wait() != 0:
        raise RuntimeError(f"exit status {process.returncode}: {' '.join(command)}")


def run(script, *flags):
    """Train: `python <script> <flags> --output-dir OUT`; returns the run folder it wrote."""
    before = set(glob.glob(os.path.join(OUT, "*__*")))
    sh(sys.executable, script, *flags, "--output-dir", OUT)
    (folder,) = set(glob.glob(os.path.join(OUT, "*__*"))) - before
    return folder


def show_curve(run_folder):
    """The run's learning curve: its own curve.png, or else the one plot.py draws."""
    curve = os.path.join(run_folder, "curve.png")
    if not os.path.exists(curve):
        curve = os.path.join(run_folder, "plot.png")
        sh(sys.executable, "plot.py", run_folder, "--out", curve)
    display(Image(filename=curve, width=640))


def show_video(run_folder):
    """The first episode that --capture-video recorded, played in the notebook."""
    videos = sorted(glob.glob(os.path.join(run_folder, "videos", "**", "*.mp4"), recursive=True))
    display(Video(videos[0], embed=True, width=400))


def compare(name, *run_folders):
    """plot.py over the runs: one curve per script (mean and min-max over seeds), and its table."""
    figure = os.path.join(OUT, f"{name}.png")
    sh(sys.executable, "plot.py", *run_folders, "--out", figure)
    display(Image(filename=figure, width=640))


def fill_in(path, exercise_id, body):
    """Write `body` in place of the line `raise NotImplementedError("exercise <id>: ...")`."""
    with open(path) as f:
        text = f.read()
    blank_line = rf"^( +)raise NotImplementedError\(['\"]exercise {exercise_id}:.*\n"
    blank = re.search(blank_line, text, re.M)
    lines = [blank.group(1) + line if line.strip() else "" for line in body.strip("\n").split("\n")]
    with open(path, "w") as f:
        f.write(text[:blank.start()] + "\n".join(lines) + "\n" + text[blank.end():])


def questions(script):
    """The questions of the script's page (docs/teach/<script>.md), each answer folded."""
    text = open(f"docs/teach/{script}.md").read().split("## Questions\n", 1)[1].split("\n## ", 1)[0]
    out = [f"**{script}.py**"]
    for title, answer in re.findall(r'\?\?\? question "(.*?)"\n((?:    .*\n|\n)*)', text + "\n"):
        answer = "\n".join(line[4:] for line in answer.strip("\n").split("\n"))
        out.append(f"<details><summary>{title}</summary>\n\n{answer}\n\n</details>")
    if len(out) == 1:
        raise ValueError(f"docs/teach/{script}.md: no '??? question' under its Questions heading")
    display(Markdown("\n\n".join(out)))


# %% [markdown]
# ## 1. Evolution strategies on two worker processes
#
# `es.py` perturbs the parameters $\theta$ with antithetic (mirrored) Gaussian noise, plays
# one episode per member on its workers, and moves $\theta$ along the noise weighted by each
# member's centered rank. The first seed's run records its evaluation episodes
# (`--capture-video`: the mp4 lands in the run folder's `videos/`).

# %%
es_runs = [run("es.py", "--env-id", "CartPole-v1", "--seed", str(seed), "--num-workers", "2",
               "--total-timesteps", budget(200_000, 1_000), "--eval-episodes", budget(10, 1),
               *(["--capture-video"] if seed == SEEDS[0] else []))
           for seed in (SEEDS[:1] if SMOKE else SEEDS)]
show_curve(es_runs[0])
show_video(es_runs[0])

# %% [markdown]
# ## 2. IMPALA: Ray actors and a V-trace learner
#
# `impala.py` starts Ray on this machine, two actors that each play 8 environments with the
# weights they last fetched, and a learner that corrects for the lag with V-trace's truncated
# importance weights.

# %%
impala_runs = [run("impala.py", "--env-id", "CartPole-v1", "--seed", str(seed),
                   "--total-timesteps", budget(100_000, 2_048), "--eval-episodes", budget(10, 1))
               for seed in (SEEDS[:1] if SMOKE else SEEDS)]
show_curve(impala_runs[0])

# %% [markdown]
# ## 3. ES against IMPALA on the same seeds
#
# `plot.py` averages each script's seeds (the mean, and the band from the lowest to the
# highest) and prints a table: how many runs hold the threshold at the end, the median final
# training return, the greedy evaluation, the first step at the threshold and the wall time.
# ES spends far more environment steps; compare the time too (`--x wall_time`).

# %%
compare("es-vs-impala", *es_runs, *impala_runs)

# %% [markdown]
# ## 4. An exercise: centered ranks
#
# `exercises.py make` writes a copy of `es.py` whose `centered_ranks` keeps its signature and
# docstring (the equation) and whose body raises `NotImplementedError`. Write the body in the
# next cell's `ANSWER` (what is there is one answer: try your own first), then `check` runs the
# repository's hand-computed tests on the copy and, when they pass, trains it briefly.

# %%
folder = os.path.join(OUT, "exercises")
exercise = os.path.join(folder, "es.py")
sh(sys.executable, "exercises.py", "make", "es.centered_ranks", "--out", folder, "--force")
sh(sys.executable, "exercises.py", "hint", "es.centered_ranks")
text = open(exercise).read()
print(re.search(r"def centered_ranks\(.*?raise NotImplementedError\(.*?\n", text, re.S).group(0))

# %%
ANSWER = """
x = np.asarray(x, dtype=np.float64)
ordered = np.sort(x)
below = np.searchsorted(ordered, x, side="left")
up_to = np.searchsorted(ordered, x, side="right")
ranks = (below + up_to - 1) / 2
return ranks / (len(x) - 1) - 0.5
"""
fill_in(exercise, "es.centered_ranks", ANSWER)
sh(sys.executable, "exercises.py", "check", exercise, "--exercise", "es.centered_ranks",
   *([] if CHECK_TRAINS and not SMOKE else ["--no-train"]))

# %% [markdown]
# ## 5. Questions
#
# The questions of each script's page, with their answers folded: answer before you unfold.

# %%
for script in ["es", "impala"]:
    questions(script)

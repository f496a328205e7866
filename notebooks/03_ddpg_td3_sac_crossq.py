# %% [markdown]
# # Road 3: DDPG/TD3 → SAC → CrossQ
#
# The off-policy actor-critic road of plainrl's learning path (the site's *Learning path*
# page), all on Pendulum: a deterministic actor that climbs the critic, with TD3's twin critics
# and delayed updates (`ddpg_td3.py`), a stochastic actor that maximizes return plus entropy
# (`sac.py`), and SAC without target networks, batch renormalization in the critics
# (`crossq.py`). Each script runs here as it is, from the command line; its run folder holds
# its learning curve, and a run its video. Then TD3 and SAC on the same seeds, one exercise
# (SAC's target) from blank function to passing check, and the pages' questions.
#
# Off-policy learning takes a gradient step per environment step: these runs are the slowest
# of the roads per step, a few minutes each on a CPU. Run the cells in order. The first one
# finds the scripts (or fetches them) and installs what this notebook needs; the second sets the
# budgets.

# %%
# Setup: the scripts, and only the packages this notebook needs (PyTorch only where it is missing)
SCRIPTS_URL = ""  # where the scripts are not beside this notebook: your copy's git or .zip address
PACKAGES = ["gymnasium[classic-control]==1.4.0", "pygame-ce", "numpy==2.4.6", "matplotlib==3.11.2",
            "tyro==1.0.17", "tensorboard==2.21.0", "moviepy==2.2.1", "pytest==9.1.1"]
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
# notebook in about 30 s: what the tests run); False trains for real (about 8 minutes on two
# CPU cores).
SMOKE = False
OUT = "runs/notebooks/03"  # the run folders, figures and exercise file of this notebook
SEEDS = [1, 2]  # the seeds of the comparison (the first alone when SMOKE)
CHECK_TRAINS = False  # the exercise's check trains too: 10,000 steps, minutes (never when SMOKE)


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
# ## 1. TD3: a deterministic actor, twin critics
#
# `ddpg_td3.py` (TD3 by default, `--algo ddpg` for DDPG) regresses two critics on
# $r + \gamma \min_i Q'_i(s', \mu'(s') + \text{clipped noise})$ and updates the actor every
# second step. 1,000 random steps first (its default), then learning. The seeds of the
# comparison below.

# %%
td3_runs = [run("ddpg_td3.py", "--env-id", "Pendulum-v1", "--seed", str(seed),
                "--total-timesteps", budget(5_000, 200), "--learning-starts", budget(1_000, 100),
                "--eval-episodes", budget(10, 1))
            for seed in (SEEDS[:1] if SMOKE else SEEDS)]
show_curve(td3_runs[0])

# %% [markdown]
# ## 2. SAC: a stochastic actor, an entropy bonus
#
# `sac.py` adds $-\alpha \log \pi(a'|s')$ to the target and tunes $\alpha$ towards a target
# entropy. The same seeds; the first seed's run records its evaluation episodes
# (`--capture-video`: the mp4 lands in the run folder's `videos/`).

# %%
sac_runs = [run("sac.py", "--env-id", "Pendulum-v1", "--seed", str(seed),
                "--total-timesteps", budget(5_000, 200), "--learning-starts", budget(500, 100),
                "--eval-episodes", budget(10, 1),
                *(["--capture-video"] if seed == SEEDS[0] else []))
            for seed in (SEEDS[:1] if SMOKE else SEEDS)]
show_curve(sac_runs[0])
show_video(sac_runs[0])

# %% [markdown]
# ## 3. CrossQ: no target networks
#
# `crossq.py` passes $(s, a)$ and $(s', a')$ through the critics in one batch, so that batch
# renormalization sees both, and bootstraps from the critics themselves. Its default waits
# 5,000 random steps; here 1,000, on one seed. Its gradient step costs more than SAC's (each
# takes a few minutes here).

# %%
crossq_run = run("crossq.py", "--env-id", "Pendulum-v1", "--total-timesteps", budget(4_000, 200),
                 "--learning-starts", budget(1_000, 100), "--eval-episodes", budget(10, 1))
show_curve(crossq_run)

# %% [markdown]
# ## 4. TD3 against SAC on the same seeds
#
# `plot.py` averages each script's seeds (the mean, and the band from the lowest to the
# highest) and prints a table: how many runs hold the threshold at the end, the median final
# training return, the greedy evaluation, the first step at the threshold and the wall time.

# %%
compare("td3-vs-sac", *td3_runs, *sac_runs)

# %% [markdown]
# ## 5. An exercise: SAC's soft Bellman target
#
# `exercises.py make` writes a copy of `sac.py` whose `sac_target` keeps its signature and
# docstring (the equation) and whose body raises `NotImplementedError`. Write the body in the
# next cell's `ANSWER` (what is there is one answer: try your own first), then `check` runs the
# repository's hand-computed tests on the copy and, when they pass (with `CHECK_TRAINS`),
# trains it briefly.

# %%
folder = os.path.join(OUT, "exercises")
exercise = os.path.join(folder, "sac.py")
sh(sys.executable, "exercises.py", "make", "sac.target", "--out", folder, "--force")
sh(sys.executable, "exercises.py", "hint", "sac.target")
text = open(exercise).read()
print(re.search(r"def sac_target\(.*?raise NotImplementedError\(.*?\n", text, re.S).group(0))

# %%
ANSWER = """
soft_value = torch.minimum(next_q1, next_q2) - alpha * next_logprob
return rewards + gamma * (1.0 - terminated.to(rewards.dtype)) * soft_value
"""
fill_in(exercise, "sac.target", ANSWER)
sh(sys.executable, "exercises.py", "check", exercise, "--exercise", "sac.target",
   *([] if CHECK_TRAINS and not SMOKE else ["--no-train"]))

# %% [markdown]
# ## 6. Questions
#
# The questions of each script's page, with their answers folded: answer before you unfold.

# %%
for script in ["ddpg_td3", "sac", "crossq"]:
    questions(script)

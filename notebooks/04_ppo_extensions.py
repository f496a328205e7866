# %% [markdown]
# # Road 4: PPO's extensions
#
# The scripts of plainrl's learning path (the site's *Learning path* page) that each change
# one thing in `ppo.py`: a policy that never picks a forbidden action (`ppo_masked.py` on
# Taxi), rollouts that sometimes replay one stored demonstration (`ppod.py` on MountainCar),
# a policy with memory (`ppo_lstm.py` on CartPole without its velocities) and an intrinsic
# reward for novelty (`ppo_rnd.py` on MountainCar). Each script runs here as it is, from the
# command line; its run folder holds its learning curve, and a run its video. Then PPO
# and PPO+RND on MountainCar on the same seeds, one exercise (the masked policy) from blank
# function to passing check, and the pages' questions.
#
# Run the cells in order. The first one finds the scripts (or fetches them) and installs what
# this notebook needs; the second sets the budgets.

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
# notebook in about 30 s: what the tests run); False trains for real (about 7 minutes on two
# CPU cores).
SMOKE = False
OUT = "runs/notebooks/04"  # the run folders, figures and exercise file of this notebook
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
# ## 1. Masked PPO on Taxi
#
# `ppo_masked.py` reads Taxi's action mask from `info` and sets the logits of the forbidden
# actions to $-10^8$ before the softmax: they are never sampled and get no gradient.

# %%
masked_run = run("ppo_masked.py", "--env-id", "Taxi-v4", "--total-timesteps", budget(100_000, 8_192),
                 "--eval-episodes", budget(10, 1))
show_curve(masked_run)

# %% [markdown]
# ## 2. PPO+D on MountainCar: one demonstration
#
# `ppod.py` starts some rollouts from a stored successful episode (the repository's
# `demos/MountainCar-v0/`), so that the sparse goal is seen long before random play would find
# it.

# %%
ppod_run = run("ppod.py", "--env-id", "MountainCar-v0", "--total-timesteps", budget(60_000, 2_048),
               "--eval-episodes", budget(10, 1))
show_curve(ppod_run)

# %% [markdown]
# ## 3. Recurrent PPO on CartPole without its velocities
#
# `--hide-obs 1 3` removes the cart's and the pole's velocities from the observation: a
# memoryless policy cannot tell which way the pole falls, an LSTM's state can. `ppo_lstm.py`
# trains on chunks of the rollout with the state at each chunk's start. The run records its
# evaluation episodes (`--capture-video`: the mp4 lands in the run folder's `videos/`).

# %%
lstm_run = run("ppo_lstm.py", "--env-id", "CartPole-v1", "--hide-obs", "1", "3",
               "--total-timesteps", budget(25_000, 256), "--eval-episodes", budget(10, 1),
               "--capture-video")
show_curve(lstm_run)
show_video(lstm_run)

# %% [markdown]
# ## 4. PPO against PPO+RND on MountainCar, on the same seeds
#
# MountainCar pays only at the flag; a policy that never gets there learns nothing.
# `ppo_rnd.py` adds an intrinsic reward, the error of a network trained to predict a fixed
# random network's output, large on states seen rarely. `ppo.py` runs with the same PPO flags
# (the benchmark's "ppo.py with the same flags"). `plot.py` averages each script's seeds (the
# mean, and the band from the lowest to the highest) and prints its table.

# %%
PPO_AS_RND = ["--num-envs", "8", "--num-steps", "128", "--learning-rate", "1e-3", "--gamma", "0.99",
              "--gae-lambda", "0.95", "--num-minibatches", "4", "--update-epochs", "4", "--norm-obs"]
rnd_runs, ppo_runs = [], []
for seed in (SEEDS[:1] if SMOKE else SEEDS):
    rnd_runs.append(run("ppo_rnd.py", "--env-id", "MountainCar-v0", "--seed", str(seed),
                        "--total-timesteps", budget(100_000, 2_048), "--eval-episodes", budget(10, 1)))
    ppo_runs.append(run("ppo.py", "--env-id", "MountainCar-v0", "--seed", str(seed), *PPO_AS_RND,
                        "--total-timesteps", budget(100_000, 2_048), "--eval-episodes", budget(10, 1)))
compare("ppo-vs-ppo_rnd", *ppo_runs, *rnd_runs)

# %% [markdown]
# ## 5. An exercise: the masked policy
#
# `exercises.py make` writes a copy of `ppo_masked.py` whose `masked_categorical` keeps its
# signature and docstring (the equations) and whose body raises `NotImplementedError`. Write
# the body in the next cell's `ANSWER` (what is there is one answer: try your own first), then
# `check` runs the repository's hand-computed tests on the copy and, when they pass, trains it
# briefly.

# %%
folder = os.path.join(OUT, "exercises")
exercise = os.path.join(folder, "ppo_masked.py")
sh(sys.executable, "exercises.py", "make", "ppo_masked.masked_categorical", "--out", folder, "--force")
sh(sys.executable, "exercises.py", "hint", "ppo_masked.masked_categorical")
text = open(exercise).read()
print(re.search(r"def masked_categorical\(.*?raise NotImplementedError\(.*?\n", text, re.S).group(0))

# %%
ANSWER = """
return Categorical(logits=torch.where(action_mask, logits, MASKED_LOGIT), validate_args=False)
"""
fill_in(exercise, "ppo_masked.masked_categorical", ANSWER)
sh(sys.executable, "exercises.py", "check", exercise, "--exercise", "ppo_masked.masked_categorical",
   *([] if CHECK_TRAINS and not SMOKE else ["--no-train"]))

# %% [markdown]
# ## 6. Questions
#
# The questions of each script's page, with their answers folded: answer before you unfold.

# %%
for script in ["ppo_masked", "ppod", "ppo_lstm", "ppo_rnd"]:
    questions(script)

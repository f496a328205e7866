# %% [markdown]
# # Road 7: a language model, GRPO
#
# The last road of plainrl's learning path (the site's *Learning path* page): reinforcement
# learning of a small language model from a reward a program checks. `grpo.py` trains a
# transformer of nanoGPT's shape to write the sum of two numbers ("47+85=" -> "132"): a short
# supervised warm start on worked answers that leave most carries out, then GRPO, which scores each sampled answer against a group of
# answers to the same prompt (no critic) and keeps the model near its warm start with a k3
# penalty. The script runs here as it is, from the command line; its run folder holds what
# to plot: the held-out accuracy, the reward, the KL to the reference and the answers' length.
# Then GRPO beside Dr. GRPO's correction on the same seeds, one exercise (the group
# advantages) from blank function to passing check, and the page's questions.
#
# Run the cells in order. The first one finds the scripts (or fetches them) and installs what
# this notebook needs; the second sets the budgets.

# %%
# Setup: the scripts, and only the packages this notebook needs (PyTorch only where it is missing)
SCRIPTS_URL = ""  # where the scripts are not beside this notebook: your copy's git or .zip address
PACKAGES = ["gymnasium==1.4.0", "numpy==2.4.6", "matplotlib==3.11.2", "tyro==1.0.17",
            "tensorboard==2.21.0", "moviepy==2.2.1", "pytest==9.1.1"]
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
# Parameters: the budgets. SMOKE = True shrinks every run to a few batches (the whole
# notebook in about 100 s on two busy CPU cores: what the tests run); False trains for real
# (five runs, 143,360 completions in all: the whole notebook took 311 s on two CPU cores at
# a load of 1-2, its first run ending 0.53 -> 0.80, RL's gain +0.27 at a third of the budget).
SMOKE = False
OUT = "runs/notebooks/07"  # the run folders, figures and exercise file of this notebook
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
# ## 1. GRPO on addition whose worked answers leave out the carries
#
# One run of the default task, `AdditionPartial-v0`: the warm start learns from worked answers
# that exist for the sums without a carry in the ones column and for 2% of the others, while
# the reward checks every sum. GRPO then samples groups of 8 answers to each of 64 prompts and
# learns from the reward alone. `--eval-every` measures the model on held-out problems (sums
# training never poses, carries included) during both phases: the greedy accuracy, pass@1 (the
# mean over sampled answers) and pass@8. The budget here is a third of the default's; the
# gain over the warm start is what RL added.

# %%
# when SMOKE: one small block, 4 prompts in groups of 4, a few warm-start steps
TINY = [] if not SMOKE else ["--num-prompts", "4", "--group-size", "4", "--n-layer", "1",
                             "--n-head", "2", "--n-embd", "16", "--sft-steps", "3",
                             "--sft-problems", "16", "--eval-samples", "2", "--pass-k", "2"]
grpo_run = run("grpo.py", *TINY, "--total-timesteps", budget(102_400, 64),
               "--eval-every", budget(12_800, 32), "--eval-episodes", budget(200, 2),
               "--save-model", "--capture-video", "--curve")  # the run draws its curve.png itself
show_curve(grpo_run)
show_video(grpo_run)

# %% [markdown]
# ## 2. What RL added: the warm start against the end, pass@1 against pass@k
#
# `held_out.csv` holds a row per measurement, its `global_step` negative during the warm start
# (answers learned from before GRPO began) and counting completions after it. The warm start's
# row (step 0) and the last one give RL's gain. `pass_at_k.csv` holds pass@k for k = 1 to 64 at
# both ends: where pass@k is high and pass@1 is not, the model can sample the answer but does
# not yet give it first, and that gap is what RL from a checked reward closes.

# %%
import csv
import json

import matplotlib.pyplot as plt


def read_rows(path):
    """A CSV file of the run folder as a dict of float columns ({} where there is none)."""
    if not os.path.exists(path):
        return {}
    with open(path) as f:
        rows = list(csv.DictReader(f))
    return {key: [float(row[key]) for row in rows] for key in rows[0]} if rows else {}


held = read_rows(os.path.join(grpo_run, "held_out.csv"))
start, end = held["global_step"].index(0), -1
for column in ("accuracy", "pass@1", "answer_length", "kl_to_reference"):
    print(f"{column:16s} warm start {held[column][start]:.3f} -> after GRPO {held[column][end]:.3f}"
          f" ({held[column][end] - held[column][start]:+.3f})")
curves = read_rows(os.path.join(grpo_run, "pass_at_k.csv"))
fig, ax = plt.subplots(figsize=(5, 3.2), layout="constrained")
ax.plot(curves["k"], curves["warm_start"], label="the warm start")
ax.plot(curves["k"], curves["end"], label="after GRPO")
ax.set(xscale="log", xlabel="k", ylabel="held-out pass@k", ylim=(0, 1))
ax.grid(alpha=0.3)
ax.legend()
path = os.path.join(OUT, "pass_at_k.png")
fig.savefig(path, dpi=90)
plt.close(fig)
display(Image(filename=path, width=500))
sh(sys.executable, "benchmarks/grpo_controls.py", "answers", "--run", grpo_run, "--seeds", "7")


def show_grpo_run(run_folder, title):
    """Four panels of one run: held-out accuracy, training reward, k3 KL, completion length."""
    updates = read_rows(os.path.join(run_folder, "updates.csv"))
    held = read_rows(os.path.join(run_folder, "held_out.csv"))
    fig, axes = plt.subplots(1, 4, figsize=(15, 3.2), layout="constrained")
    panels = [("held-out accuracy (greedy)", held, "accuracy"),
              ("training reward (sampled)", updates, "reward_mean"),
              ("KL to the reference (k3 per token)", updates, "kl"),
              ("completion length (tokens)", updates, "completion_length")]
    for ax, (label, columns, key) in zip(axes, panels):
        if columns:
            ax.plot(columns["global_step"], columns[key], marker="o" if columns is held else None)
        ax.set(title=label, xlabel="completions (< 0: the warm start's answers)")
        ax.grid(alpha=0.3)
    fig.suptitle(title)
    path = os.path.join(OUT, f"{os.path.basename(run_folder)}-panels.png")
    fig.savefig(path, dpi=90)
    plt.close(fig)
    display(Image(filename=path, width=900))


show_grpo_run(grpo_run, "grpo.py, the defaults at a third of their budget")

# %% [markdown]
# ## 3. GRPO beside Dr. GRPO, on the same seeds
#
# Dr. GRPO (Liu et al. 2025) removes two normalizations: the division of each group's
# advantages by its std (which gives the easiest and hardest prompts the largest advantages)
# and the division of each answer's loss by its own length (which penalizes a long wrong
# answer's tokens less). `--exp-name` names each variant, and `plot.py` draws each one's mean
# and min-max over the seeds.

# %%
DR_GRPO = ["--no-scale-rewards", "--loss-agg", "seq-mean-token-sum-norm", "--exp-name", "dr_grpo"]
grpo_runs, dr_runs = [], []
for seed in (SEEDS[:1] if SMOKE else SEEDS):
    common = [*TINY, "--seed", str(seed), "--total-timesteps", budget(10_240, 32),
              "--eval-episodes", budget(200, 2)]
    grpo_runs.append(run("grpo.py", *common))
    dr_runs.append(run("grpo.py", *common, *DR_GRPO))
compare("grpo-vs-dr_grpo", *grpo_runs, *dr_runs)
for folder in dr_runs[:1]:
    show_grpo_run(folder, "grpo.py with Dr. GRPO's corrections, the first seed")

# %% [markdown]
# ## 4. An exercise: the group advantages
#
# `exercises.py make` writes a copy of `grpo.py` whose `group_advantages` keeps its signature
# and docstring (the equations) and whose body raises `NotImplementedError`. Write the body in
# the next cell's `ANSWER` (what is there is one answer: try your own first), then `check`
# runs the repository's hand-computed tests on the copy and, when they pass, trains it
# briefly.

# %%
folder = os.path.join(OUT, "exercises")
exercise = os.path.join(folder, "grpo.py")
sh(sys.executable, "exercises.py", "make", "grpo.advantages", "--out", folder, "--force")
sh(sys.executable, "exercises.py", "hint", "grpo.advantages")
text = open(exercise).read()
print(re.search(r"def group_advantages\(.*?raise NotImplementedError\(.*?\n", text, re.S).group(0))

# %%
ANSWER = """
groups = rewards.view(-1, group_size)
advantages = groups - groups.mean(dim=1, keepdim=True)
if baseline == "rloo":
    advantages = advantages * group_size / (group_size - 1)
if scale_rewards:
    advantages = advantages / (groups.std(dim=1, keepdim=True) + eps)
return advantages.flatten()
"""
fill_in(exercise, "grpo.advantages", ANSWER)
sh(sys.executable, "exercises.py", "check", exercise, "--exercise", "grpo.advantages",
   *([] if CHECK_TRAINS and not SMOKE else ["--no-train"]))

# %% [markdown]
# ## 5. Questions
#
# The questions of the script's page, with their answers folded: answer before you unfold.

# %%
questions("grpo")

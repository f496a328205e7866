# %% [markdown]
# # Road 8: a language model from preferences, RLHF and DPO
#
# The language-model road's second half (the site's *Learning path* page, after notebook 07):
# the reward is not checked by a program but learned from preferences. `rlhf.py` trains a
# transformer of nanoGPT's shape on a small language of 16 English words ("film looks very
# good gift is ...") whose hidden *gold score* (the words' sentiment, less a penalty for
# orders the grammar forbids) only a simulated labeller sees: a supervised warm start, preference pairs the labeller judges, a reward model trained
# on them with the Bradley-Terry loss, then PPO with a value head and a KL penalty to the warm
# start on every token. The run folder's `held_out.csv` holds, on held-out prompts, the reward
# model's score (the proxy), the gold score and the KL to the warm start: the two scores side
# by side show when optimizing the proxy stops helping the gold. Then beta 0, where the proxy
# keeps rising and the gold score falls, the answers that fool the reward model, DPO on the
# same pairs beside PPO, one exercise (the Bradley-Terry loss) from blank function to passing
# check, and the page's questions.
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
# Parameters: the budgets. SMOKE = True shrinks every run to a batch or two (what the tests
# run); False trains for real (the default run, beta 0 at 40,960 completions and DPO, after the
# warm start and the reward model: the whole notebook took 264 s on two CPU cores at a load of
# 1.0-1.8; seed 1's greedy gold gained +0.81 at beta 0.1, +0.26 at beta 0, its sampled gold
# falling from +0.68 to +0.19 under a rising proxy, and +0.72 with DPO).
SMOKE = False
OUT = "runs/notebooks/08"  # the run folders, figures and exercise file of this notebook
SEEDS = [1]  # the seed of the runs: one seed's runs share its warm start and its pairs
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
# ## 1. The pipeline: warm start, preference pairs, reward model, PPO
#
# One run of the default command: 10,240 completions, its held-out measures after batches 1,
# 2, 4 and 8 and every 1,024 completions. The console first shows the warm start and the reward model's training; then
# PPO's progress. `--save-model` keeps the warm start (`warm_start.pt`) and the pairs are
# always written (`pairs.jsonl`), so that the runs below can start from the same ones.

# %%
# when SMOKE: a one-block transformer, 4 prompts a batch, a few warm-start and reward-model steps
TINY = [] if not SMOKE else ["--num-prompts", "4", "--n-layer", "1", "--n-head", "2",
                             "--n-embd", "16", "--sft-steps", "3", "--sft-problems", "16",
                             "--num-pairs", "10", "--rm-steps", "3", "--eval-samples", "1",
                             "--num-minibatches", "2"]
COMMON = [*TINY, "--seed", str(SEEDS[0]), "--eval-every", budget(1_024, 4),
          "--eval-episodes", budget(200, 2)]
ppo_run = run("rlhf.py", *COMMON, "--total-timesteps", budget(10_240, 8), "--save-model",
              "--capture-video", "--curve")
show_curve(ppo_run)
show_video(ppo_run)

# %% [markdown]
# ## 2. The proxy against the gold score
#
# `reward_model.csv` holds the reward model's training: its loss and its accuracy on the
# tenth of the pairs it never trained on (the share whose chosen completion it scores higher).
# `held_out.csv` holds a row per measurement on held-out prompts, step 0 the warm start's:
# the reward model's score of the policy's completions (`proxy_score`), their gold score
# (`gold_score`), which the policy never saw, and the KL to the warm start
# (`kl_to_reference`, nats per completion). Gao et al. (2023) draw both scores against the
# square root of the KL: the proxy rises as the policy moves away; the gold score rises
# with it only as far as the reward model is right.

# %%
import csv
import math

import matplotlib.pyplot as plt


def read_rows(path):
    """A CSV file of the run folder as a dict of float columns ({} where there is none)."""
    if not os.path.exists(path):
        return {}
    with open(path) as f:
        rows = list(csv.DictReader(f))
    return {key: [float(row[key]) for row in rows] for key in rows[0]} if rows else {}


reward_model = read_rows(os.path.join(ppo_run, "reward_model.csv"))
print(f"reward model: held-out pair accuracy {reward_model['held_out_accuracy'][-1]:.3f}, "
      f"held-out loss {reward_model['held_out_loss'][-1]:.3f} (log 2 = 0.693: a coin)")
held = read_rows(os.path.join(ppo_run, "held_out.csv"))
start, end = held["global_step"].index(0), -1
for column in ("proxy_score", "gold_score", "kl_to_reference", "answer_length"):
    print(f"{column:18s} warm start {held[column][start]:+.3f} -> after PPO {held[column][end]:+.3f}")


def show_scores(runs, name):
    """Each run's proxy and gold score against completions and against sqrt KL, two panels."""
    fig, (ax, gao) = plt.subplots(1, 2, figsize=(11, 3.6), layout="constrained")
    for (label, folder), color in zip(runs.items(), ("C0", "C1", "C2")):
        rows = read_rows(os.path.join(folder, "held_out.csv"))
        root_kl = [math.sqrt(max(kl, 0.0)) for kl in rows["kl_to_reference"]]
        for column, style in (("proxy_score", "s--"), ("gold_score", "o-")):
            what = f"{label}: {column.split('_')[0]}"
            ax.plot(rows["global_step"], rows[column], style, color=color, ms=4, label=what)
            gao.plot(root_kl, rows[column], style, color=color, ms=4, label=what)
    ax.set(xlabel="completions (DPO: 2 a pair)", ylabel="score on held-out prompts")
    gao.set(xlabel="sqrt KL to the warm start (nats)", ylabel="score", title="Gao et al.'s axes")
    for a in (ax, gao):
        a.grid(alpha=0.3)
        a.legend(fontsize="small")
    path = os.path.join(OUT, f"{name}.png")
    fig.savefig(path, dpi=90)
    plt.close(fig)
    display(Image(filename=path, width=900))


show_scores({"PPO, beta 0.1": ppo_run}, "ppo-scores")

# %% [markdown]
# ## 3. Beta 0, and DPO on the same pairs
#
# Two more runs from the same warm start (`--warm-start`) and the same labelled pairs
# (`--pairs`), each of which trains its reward model again on them. PPO with `--beta 0`
# (`python rlhf.py --beta 0 --total-timesteps 40960`) pays nothing for leaving the warm
# start, and runs four times as long: watch whether its gold score follows its proxy. The
# table after the figure shows what each model answers to a few held-out prompts, a word the
# grammar forbids after its predecessor in brackets. DPO (`--algo dpo`) learns from the pairs directly, with no reward model in its loss and no
# sampling; its `held_out.csv` still records the reward model's score of what it writes.

# %%
same_start = ["--warm-start", os.path.join(ppo_run, "warm_start.pt"),
              "--pairs", os.path.join(ppo_run, "pairs.jsonl")]
beta0_run = run("rlhf.py", *COMMON, *same_start, "--beta", "0", "--total-timesteps",
                budget(40_960, 8), "--save-model", "--exp-name", "rlhf-beta0")
dpo_run = run("rlhf.py", *COMMON, *same_start, "--algo", "dpo", "--total-timesteps",
              budget(10_240, 8), "--exp-name", "dpo")
runs = {"PPO, beta 0.1": ppo_run, "PPO, beta 0": beta0_run, "DPO": dpo_run}
show_scores(runs, "ppo-beta0-dpo")
sh(sys.executable, "benchmarks/rlhf_frontier.py", "answers", "--runs", ppo_run, beta0_run)
for label, folder in runs.items():
    rows = read_rows(os.path.join(folder, "held_out.csv"))
    best = max(range(len(rows["gold_score"])), key=rows["gold_score"].__getitem__)
    print(f"{label:16s} gold: start {rows['gold_score'][0]:+.3f}, best {rows['gold_score'][best]:+.3f} "
          f"at {rows['global_step'][best]:,.0f}, end {rows['gold_score'][-1]:+.3f}; "
          f"KL at the end {rows['kl_to_reference'][-1]:.2f}")

# %% [markdown]
# ## 4. An exercise: the Bradley-Terry loss
#
# `exercises.py make` writes a copy of `rlhf.py` whose `bradley_terry_loss` keeps its
# signature and docstring (the equation) and whose body raises `NotImplementedError`. Write
# the body in the next cell's `ANSWER` (what is there is one answer: try your own first), then
# `check` runs the repository's hand-computed tests on the copy and, when they pass, trains it
# briefly.

# %%
folder = os.path.join(OUT, "exercises")
exercise = os.path.join(folder, "rlhf.py")
sh(sys.executable, "exercises.py", "make", "rlhf.bradley_terry_loss", "--out", folder, "--force")
sh(sys.executable, "exercises.py", "hint", "rlhf.bradley_terry_loss")
text = open(exercise).read()
print(re.search(r"def bradley_terry_loss\(.*?raise NotImplementedError\(.*?\n", text, re.S).group(0))

# %%
ANSWER = """
return -F.logsigmoid(chosen_scores - rejected_scores).mean()
"""
fill_in(exercise, "rlhf.bradley_terry_loss", ANSWER)
sh(sys.executable, "exercises.py", "check", exercise, "--exercise", "rlhf.bradley_terry_loss",
   *([] if CHECK_TRAINS and not SMOKE else ["--no-train"]))

# %% [markdown]
# ## 5. Questions
#
# The questions of the script's page, with their answers folded: answer before you unfold.

# %%
questions("rlhf")

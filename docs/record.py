"""Record each script's trained agent for its page on the site (issue 79).

    python docs/record.py                        # every script, one after another
    python docs/record.py ppo sac                # these scripts
    python docs/record.py ppo --reuse            # record the newest finished seed-101 run of
                                                 # ppo.py under --output-dir, train nothing
    python docs/record.py ppo --run ppo=runs/CartPole-v1__ppo__101__1795749624
    python docs/record.py mappo --total-timesteps 200000   # a shorter budget than the default

For each script, from the repository root and with the script's own flags only:

1. train with its default command plus --seed 101 --save-model (seed 101 is the first fresh
   benchmark seed; the reference environment is the script's default --env-id):
       python ppo.py --seed 101 --save-model
   (--output-dir, default runs, only says where the run folder goes). --total-timesteps N
   shortens the budget of a script whose default takes too long; its caption says so.
2. record one greedy evaluation episode of the saved model, seeded as the run's own final
   evaluation (--seed 101: its first episode, seed 101 + 100,000):
       python ppo.py --eval-checkpoint runs/<run folder> --seed 101 --capture-video --eval-episodes 1
   which writes a run folder of its own whose videos/ holds the episode's mp4 and whose
   summary.json its return. --eval-checkpoint takes the flags that shape the networks and the
   environment (MODEL_FLAGS, ppo_lstm.py's --hide-obs among them) from the checkpoint.
3. re-encode the mp4 small with imageio-ffmpeg's ffmpeg (H.264, at most 360 pixels wide, no
   sound, the index first so that it plays before it has loaded) into
   docs/videos/<script>.mp4, shrinking further while it is over --max-kb kilobytes;
4. write the script's entry into docs/videos/videos.json (the other entries are kept): the
   two commands, the run folder, the seed, the steps trained and the budget, the training
   return at the end (summary.json's train_return_last20, with its threshold, its window's
   mean and whether it holds) and the run's final evaluation, the recorded episode's return, the file's size and
   frames, and the date. docs/gen_pages.py shows the video and a caption made from this
   entry near the top of the page's "Results at a glance"; a script without an entry shows
   nothing.

Nothing is unpickled: the run folders are read as JSON, the checkpoints only by the scripts
themselves (torch.load(..., weights_only=True), np.load(..., allow_pickle=False)).
"""
import argparse
import dataclasses
import datetime
import glob
import importlib
import json
import os
import re
import shlex
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
VIDEOS = os.path.join(HERE, "videos")
INDEX = os.path.join(VIDEOS, "videos.json")
SEED = 101  # the first fresh benchmark seed (CONTRIBUTING.md, "Benchmark")
MAX_KB = 400  # each video at most this many kilobytes (the offline site stays light)
# (width at most, H.264 CRF, frames per second at most): tried in turn until the file fits
ENCODINGS = [(360, 30, 30), (320, 34, 25), (240, 38, 20), (200, 42, 15)]

sys.path.insert(0, HERE)
sys.path.insert(0, ROOT)
from algorithms import ORDER  # noqa: E402


def args_fields(script):
    """{flag name: default} of a script's Args (importing a script has no side effects)."""
    module = importlib.import_module(script)
    found = {}
    for f in dataclasses.fields(module.Args):
        if f.default is not dataclasses.MISSING:
            found[f.name] = f.default
        elif f.default_factory is not dataclasses.MISSING:
            found[f.name] = f.default_factory()
        else:
            found[f.name] = None
    return found


def flag_words(name, value):
    """The command-line words that give a flag this value, as tyro reads them."""
    flag = "--" + name.replace("_", "-")
    if isinstance(value, bool):
        return [flag] if value else ["--no-" + name.replace("_", "-")]
    if isinstance(value, (list, tuple)):
        return [flag, *map(str, value)]
    return [flag, str(value)]


# Flags that say where and how a run is written or watched, not what it learns: left out of
# the command a caption shows (the run's config.json has them all).
NOT_LEARNING = {"output_dir", "cuda", "tensorboard", "track", "wandb_project_name",
                "wandb_entity", "eval_every"}


def command_of(script, config):
    """The training command of a run, from its config.json: the flags whose values differ
    from the script's defaults, in the order of its Args (seed, budget, --save-model). A flag
    defaulting to None is filled in by a preset or the script (ppo.py's --eval-epsilon, the
    --exp-name of a variant): left out, but a flag of the run's preset (config.json's "preset")
    defaults to the preset's value."""
    module = importlib.import_module(script)
    presets = getattr(module, "PRESETS", {})
    preset = presets[config["preset"]][1] if config.get("preset") in presets else {}
    words = ["python", f"{script}.py"]
    for name, default in args_fields(script).items():
        default = preset.get(name, default)
        if name in NOT_LEARNING or name not in config or default is None:
            continue
        value = config[name]
        if isinstance(default, tuple) and isinstance(value, list):
            value = tuple(value)
        if value != default:
            words += flag_words(name, value)
    return shlex.join(words)


def read_json(path):
    with open(path, encoding="utf-8") as f:
        return json.load(f)


def is_run_of(script, folder, seed, same_flags=True):
    """Whether a folder is a finished training run with this seed and a saved model, and
    (same_flags) of this script: its --exp-name is the script's (or a variant's,
    ppo_lstm-hide1-3) and its config.json's flags are among the script's Args (a flag added
    since the run is missing from it)."""
    try:
        config = read_json(os.path.join(folder, "config.json"))
        summary = read_json(os.path.join(folder, "summary.json"))
    except (OSError, ValueError):
        return False
    exp_name = str(config.get("exp_name"))
    ours = (exp_name == script or exp_name.startswith(script + "-")) and \
        set(config) - set(args_fields(script)) <= {"device", "versions"}
    return ((ours or not same_flags) and config.get("seed") == seed and not config.get("eval_checkpoint")
            and not summary.get("interrupted")
            and bool(glob.glob(os.path.join(folder, "model.*"))))


def newest_run(script, output_dir, seed):
    """The newest finished seed-`seed` run of the script under output_dir, or None."""
    folders = [f for f in glob.glob(os.path.join(output_dir, "*__*"))
               if os.path.isdir(f) and is_run_of(script, f, seed)]
    return max(folders, key=lambda f: int(f.rsplit("__", 1)[-1]), default=None)


def run_script(script, words, output_dir, log):
    """Run `python <script>.py <words> --output-dir <output_dir>` from the repository root,
    its output into the log file and the console; return the run folder it made."""
    before = set(glob.glob(os.path.join(output_dir, "*__*")))
    argv = [sys.executable, f"{script}.py", *words, "--output-dir", output_dir]
    print(f"record.py: {shlex.join(argv[1:])}", flush=True)
    with open(log, "a", encoding="utf-8") as out:
        out.write(f"$ {shlex.join(argv[1:])}\n")
        out.flush()
        done = subprocess.run(argv, cwd=ROOT, stdout=out, stderr=subprocess.STDOUT)
    if done.returncode != 0:
        sys.exit(f"record.py: {script}.py exited with status {done.returncode}; see {log}")
    made = sorted(set(glob.glob(os.path.join(output_dir, "*__*"))) - before)
    if len(made) != 1:
        sys.exit(f"record.py: expected one new run folder under {output_dir}, found {made}")
    return made[0]


def ffmpeg():
    import imageio_ffmpeg  # comes with moviepy (requirements.txt)
    return imageio_ffmpeg.get_ffmpeg_exe()


def video_facts(path):
    """(width, height, frames, seconds) of an mp4, as ffmpeg reads it."""
    import imageio_ffmpeg
    reader = imageio_ffmpeg.read_frames(path)
    meta = next(reader)
    reader.close()
    frames, seconds = imageio_ffmpeg.count_frames_and_secs(path)
    return meta["size"][0], meta["size"][1], frames, round(seconds, 2)


def shrink(source, target, max_kb=MAX_KB):
    """Re-encode source into target, smaller each try until it is at most max_kb kilobytes:
    H.264 in yuv420p (what every browser plays), no sound, the index at the front."""
    _, _, frames, seconds = video_facts(source)
    source_fps = frames / seconds if seconds else 30
    for width, crf, fps in ENCODINGS:
        fewer = f",fps={fps}" if source_fps > fps + 0.5 else ""
        subprocess.run([ffmpeg(), "-y", "-loglevel", "error", "-i", source,
                        "-vf", f"scale='min({width},iw)':-2{fewer}",
                        "-c:v", "libx264", "-preset", "slow", "-crf", str(crf),
                        "-pix_fmt", "yuv420p", "-movflags", "+faststart", "-an", target],
                       check=True)
        if os.path.getsize(target) <= max_kb * 1000:
            return width, crf
    sys.exit(f"record.py: {target} is still over {max_kb} KB at the smallest encoding")


def record(script, args):
    """Train (or reuse a run), record one episode, shrink it; return its videos.json entry."""
    os.makedirs(args.output_dir, exist_ok=True)
    log = os.path.join(args.output_dir, f"record-{script}.log")
    defaults = args_fields(script)
    run = args.run.get(script) or (newest_run(script, args.output_dir, args.seed)
                                   if args.reuse else None)
    if run is None:
        words = ["--seed", str(args.seed), "--save-model"]
        if args.total_timesteps:
            words += ["--total-timesteps", str(args.total_timesteps)]
        run = run_script(script, words, args.output_dir, log)
    elif not is_run_of(script, run, args.seed, same_flags=False):
        sys.exit(f"record.py: {run} is not a finished seed-{args.seed} run of {script}.py "
                 "with a saved model (train it with --save-model)")
    config = read_json(os.path.join(run, "config.json"))
    summary = read_json(os.path.join(run, "summary.json"))
    name = os.path.basename(os.path.normpath(run))
    record_words = ["--eval-checkpoint", run, "--seed", str(args.seed), "--capture-video",
                    "--eval-episodes", "1"]
    if config["env_id"] != defaults["env_id"]:
        record_words += ["--env-id", config["env_id"]]
    recording = run_script(script, record_words, args.output_dir, log)
    episode = read_json(os.path.join(recording, "summary.json"))
    mp4s = sorted(glob.glob(os.path.join(recording, "videos", "*.mp4")))
    if not mp4s:
        sys.exit(f"record.py: {recording}/videos holds no mp4")
    os.makedirs(VIDEOS, exist_ok=True)
    target = os.path.join(VIDEOS, f"{script}.mp4")
    width, crf = shrink(mp4s[0], target, args.max_kb)
    w, h, frames, seconds = video_facts(target)
    shown_run = f"runs/{name}"  # as the default --output-dir would place it
    record_command = shlex.join(["python", f"{script}.py", "--eval-checkpoint", shown_run,
                                 *record_words[2:]])
    return {
        "script": f"{script}.py",
        "env_id": config["env_id"],
        "seed": config["seed"],
        "train_command": command_of(script, config),
        "record_command": record_command,
        "run": name,
        "output_dir": os.path.relpath(os.path.dirname(os.path.abspath(run)), ROOT),
        "total_timesteps": config["total_timesteps"],
        "default_budget": config["total_timesteps"] == defaults["total_timesteps"],
        "default_total_timesteps": defaults["total_timesteps"],
        "steps": summary["global_steps"],
        "train_return_last20": summary["train_return_last20"],
        "solved_threshold": summary["solved_threshold"],
        "solved_window": summary.get("solved_window"),  # run folders of issue 86 on
        "end_return": summary.get("end_return"),
        "holds": summary["holds"],
        "eval_return_mean": summary["eval_return_mean"],
        "eval_episodes": summary["eval_episodes"],
        "episode_return": episode["eval_return_mean"],
        "video": f"{script}.mp4",
        "bytes": os.path.getsize(target),
        "width": w, "height": h, "frames": frames, "seconds": seconds,
        "encoding": f"H.264 CRF {crf}, at most {width} px wide",
        "trained": datetime.datetime.fromtimestamp(int(name.rsplit("__", 1)[-1]),
                                                   datetime.timezone.utc).date().isoformat(),
        "date": datetime.date.today().isoformat(),
    }


def write_entry(script, entry):
    """Put the script's entry into videos.json, keeping the others, in the site's order."""
    index = read_json(INDEX) if os.path.exists(INDEX) else {}
    index[script] = entry
    ordered = {s: index[s] for s in ORDER if s in index}
    with open(INDEX, "w", encoding="utf-8") as f:
        json.dump(ordered, f, indent=2)
        f.write("\n")


def parse(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("scripts", nargs="*", default=ORDER, metavar="script",
                        help="scripts to record, by name (ppo or ppo.py; default: all 17)")
    parser.add_argument("--output-dir", default="runs",
                        help="where the run folders go, and --reuse looks (default runs)")
    parser.add_argument("--seed", type=int, default=SEED, help=f"default {SEED}")
    parser.add_argument("--total-timesteps", type=int, default=None,
                        help="a shorter budget than the scripts' defaults (said in the caption)")
    parser.add_argument("--reuse", action="store_true",
                        help="record the newest finished run of the seed under --output-dir "
                             "instead of training (train where there is none)")
    parser.add_argument("--run", action="append", default=[], metavar="SCRIPT=FOLDER",
                        help="record this run folder of the script instead of training")
    parser.add_argument("--max-kb", type=int, default=MAX_KB,
                        help=f"the largest video file in kilobytes (default {MAX_KB})")
    args = parser.parse_args(argv)
    args.output_dir = os.path.abspath(args.output_dir)  # main works from the repository root
    args.scripts = [re.sub(r"\.py$", "", s) for s in args.scripts]
    unknown = [s for s in args.scripts if s not in ORDER]
    if unknown:
        parser.error(f"unknown scripts {unknown}; choose from {', '.join(ORDER)}")
    runs = {}
    for pair in args.run:
        script, sep, folder = pair.partition("=")
        if not sep or script.removesuffix(".py") not in ORDER:
            parser.error(f"--run takes SCRIPT=FOLDER, got {pair!r}")
        runs[script.removesuffix(".py")] = os.path.abspath(folder)
    args.run = runs
    return args


def main(argv=None):
    args = parse(argv)
    os.chdir(ROOT)
    for script in args.scripts:
        entry = record(script, args)
        write_entry(script, entry)
        print(f"record.py: docs/videos/{entry['video']} ({entry['bytes'] / 1000:.0f} KB, "
              f"{entry['frames']} frames): {entry['env_id']}, {entry['steps']:,} steps, "
              f"last-20 training return {entry['train_return_last20']}, recorded episode's "
              f"return {entry['episode_return']}", flush=True)


if __name__ == "__main__":
    main()

"""Issue 79: the trained agent on every algorithm page, and MuJoCo's frames without a display.

docs/record.py trains each script (seed 101), records one greedy episode with the script's
own --eval-checkpoint --capture-video, keeps it small in docs/videos/<script>.mp4 and its
figures in docs/videos/videos.json; docs/gen_pages.py shows each listed video, captioned,
at the top of the page's "Results at a glance". Here: every page embeds the video that
videos.json lists for it (a path that plays from the offline site, the caption's figures
from the entry), every listed file exists, plays in a browser (H.264, yuv420p) and is under
MAX_BYTES, a page without a recording says nothing, and record.py's command reads a run's
config.json as written. Last, a MuJoCo environment is recorded offscreen (EGL or OSMesa,
which .ci/run installs), as a user without a display records one.
"""
import json
import os
import re
import subprocess
import sys

import pytest

from conftest import ROOT

pytest.importorskip("mkdocs", reason="pip install -r docs/requirements.txt")
sys.path[:0] = [os.path.join(ROOT, "docs")]
import gen_pages  # noqa: E402
import record  # noqa: E402
from algorithms import ORDER  # noqa: E402

VIDEOS = os.path.join(ROOT, "docs", "videos")
MAX_BYTES = 400_000  # each video (record.py's --max-kb 400): the offline site stays light
MAX_TOTAL = 3_000_000  # all of them together, against a site of about 35 MB (goal: 50 MB)


def listed():
    with open(os.path.join(VIDEOS, "videos.json"), encoding="utf-8") as f:
        return json.load(f)


def glance(page):
    """A page's "Results at a glance" section, up to the next heading of its level."""
    return page.split("\n## Results at a glance\n", 1)[1].split("\n## ", 1)[0]


@pytest.fixture(scope="module")
def pages():
    return {script: gen_pages.algorithm_page(script) for script in ORDER}


def test_videos_json_lists_scripts_of_the_site_with_their_files_small():
    entries = listed()
    assert entries and set(entries) <= set(ORDER)
    total = 0
    for script, entry in entries.items():
        path = os.path.join(VIDEOS, entry["video"])
        assert entry["video"] == f"{script}.mp4" and os.path.isfile(path), script
        size = os.path.getsize(path)
        assert size == entry["bytes"] and 0 < size <= MAX_BYTES, (script, size)
        total += size
    assert total <= MAX_TOTAL, total
    # nothing in docs/videos/ that videos.json does not list (a stale file would ship)
    assert sorted(os.listdir(VIDEOS)) == sorted(["videos.json", *(e["video"] for e in entries.values())])


@pytest.mark.parametrize("script", ORDER)
def test_each_page_embeds_the_video_videos_json_lists_with_its_figures(script, pages):
    section = glance(pages[script])
    entry = listed().get(script)
    if entry is None:  # no recording yet: no video, no caption, no link to one
        assert "<video" not in pages[script] and "../videos/" not in pages[script]
        return
    videos = re.findall(r"<video ([^>]*)></video>", pages[script])
    assert len(videos) == 1 and "<video" in section, script
    if "| task |" in section:  # at the top of the section, above the tables
        assert section.index("<video") < section.index("| task |")
    tag = videos[0]
    for attribute in ("controls", "loop", "muted", "playsinline"):
        assert re.search(rf"\b{attribute}\b", tag), (script, attribute)
    # the path is relative to the page (algorithms/<script>.html), so it plays from file://
    assert f'src="../videos/{script}.mp4"' in tag
    # the frame's own size (most are not square: 360 x 240, 360 x 306), each where it belongs
    assert f'width="{entry["width"]}"' in tag and f'height="{entry["height"]}"' in tag
    assert os.path.isfile(os.path.normpath(os.path.join(ROOT, "docs", "algorithms",
                                                        f"../videos/{script}.mp4")))
    caption = re.search(r'<p class="caption" markdown="span">(.*)</p>', section).group(1)
    # the caption's figures, each as the entry has it: the run, the seed, the steps, both
    # returns (the training's at the end, the recorded episode's), the size
    assert f"`{entry['train_command']}`" in caption and f"`{entry['record_command']}`" in caption
    assert f"seed {entry['seed']}" in caption and entry["run"] in caption
    assert f"{entry['steps']:,} steps" in caption
    assert f"last-20 training return {entry['train_return_last20']:,.2f}" in caption
    assert f"return **{entry['episode_return']:,.2f}**" in caption
    assert f"({entry['bytes'] / 1000:.0f} KB" in caption
    assert ("(its default budget)" in caption) == entry["default_budget"]
    if not entry["default_budget"]:
        assert f"not its default budget of {entry['default_total_timesteps']:,}" in caption
    # the entry is the run record.py made: the script's default command, seed 101, its model
    assert entry["train_command"].startswith(f"python {script}.py --seed 101")
    assert "--save-model" in entry["train_command"].split()
    assert entry["record_command"] == (f"python {script}.py --eval-checkpoint runs/{entry['run']} "
                                       "--seed 101 --capture-video --eval-episodes 1")
    assert entry["run"].startswith(entry["env_id"].replace("/", "-").replace(":", "-") + "__")
    assert f"__{entry['seed']}__" in entry["run"]


@pytest.mark.parametrize("script", sorted(listed()))
@pytest.mark.slow  # decodes every video with ffmpeg
def test_each_video_plays_in_a_browser_as_videos_json_describes_it(script):
    import imageio_ffmpeg
    entry = listed()[script]
    path = os.path.join(VIDEOS, entry["video"])
    reader = imageio_ffmpeg.read_frames(path)
    meta = next(reader)
    reader.close()
    assert meta["codec"].startswith("h264") and meta["pix_fmt"].startswith("yuv420p"), meta
    assert list(meta["size"]) == [entry["width"], entry["height"]] and entry["width"] <= 360
    assert imageio_ffmpeg.count_frames_and_secs(path)[0] == entry["frames"] > 1


def test_a_page_whose_script_has_no_recording_says_nothing(tmp_path, monkeypatch):
    # videos.json lists ppo and vpg; only vpg's file is there: ppo's page shows nothing
    entry = {"video": "vpg.mp4"}
    (tmp_path / "videos.json").write_text(json.dumps({"ppo": {"video": "ppo.mp4"}, "vpg": entry}))
    (tmp_path / "vpg.mp4").write_bytes(b"\0")
    monkeypatch.setattr(gen_pages, "VIDEOS", str(tmp_path))
    assert gen_pages.load_videos() == {"vpg": entry}
    page = gen_pages.algorithm_page("ppo", videos=gen_pages.load_videos())
    assert "<video" not in page and "../videos/" not in page
    monkeypatch.setattr(gen_pages, "VIDEOS", str(tmp_path / "none"))  # before any recording
    assert gen_pages.load_videos() == {}


def test_the_site_ships_the_videos():
    # MkDocs copies docs/ into the site but what exclude_docs names: not the videos
    from mkdocs.config import load_config
    config = load_config(os.path.join(ROOT, "mkdocs.yml"))
    for name in ("videos/ppo.mp4", "videos/videos.json"):
        assert not config["exclude_docs"].match_file(name), name
    assert config["exclude_docs"].match_file("record.py")  # the recorder itself stays out


def ppo_presets(name):
    import ppo
    return ppo.PRESETS[name][1]


def test_record_writes_the_command_a_run_was_trained_with():
    # ppo.py's defaults, its discrete preset's values as a run's config.json holds them, with
    # --seed 101, --save-model and a budget of 50,000: those three, in the order of ppo.py's
    # Args (seed, total_timesteps, ..., save_model); the output folder, the device and ppo.py's
    # own filled-in --eval-epsilon (default None) left out
    config = {name: default for name, default in record.args_fields("ppo").items()}
    config.update(seed=101, total_timesteps=50_000, save_model=True, output_dir="/tmp/x",
                  cuda=False, eval_epsilon=0.0, preset="discrete", **ppo_presets("discrete"))
    assert record.command_of("ppo", config) == (
        "python ppo.py --seed 101 --total-timesteps 50000 --save-model")
    config.update(norm_obs=True)  # a flag of the discrete preset's, given other than its False,
    assert record.command_of("ppo", config) == (  # before RunFlags' --save-model
        "python ppo.py --seed 101 --total-timesteps 50000 --norm-obs --save-model")


def test_record_reuses_the_newest_finished_run_of_the_script_and_seed(tmp_path):
    # five folders under one output dir; only the two plain ppo.py runs of seed 101 that
    # finished with a model qualify, and the newer (by the folder's unix time) is chosen
    def run(name, model=True, interrupted=False, script="ppo", **flags):
        folder = tmp_path / name
        folder.mkdir()
        config = {**record.args_fields(script), "seed": 101, "device": "cpu", "versions": {}, **flags}
        (folder / "config.json").write_text(json.dumps(config))
        (folder / "summary.json").write_text(json.dumps({"interrupted": interrupted}))
        if model:
            (folder / "model.pt").write_bytes(b"")
        return str(folder)

    run("CartPole-v1__ppo__101__1000")
    newer = run("CartPole-v1__ppo__101__2000")
    run("CartPole-v1__ppo__101__3000", model=False)  # trained without --save-model
    run("CartPole-v1__ppo__101__4000", interrupted=True)  # Ctrl-C
    run("CartPole-v1__ppo__101__5000", eval_checkpoint=newer)  # a recording, not a training run
    run("CartPole-v1__ppo__7__6000", seed=7)
    run("CartPole-v1__ppo_lstm__101__7000", script="ppo_lstm", exp_name="ppo_lstm")
    assert record.newest_run("ppo", str(tmp_path), 101) == newer
    assert record.newest_run("ppo", str(tmp_path), 7).endswith("__ppo__7__6000")
    assert record.newest_run("ppo_lstm", str(tmp_path), 101).endswith("__ppo_lstm__101__7000")
    assert record.newest_run("vpg", str(tmp_path), 101) is None


# ---------------------------------------------------------------------------------------
# MuJoCo's frames without a display (.ci/run installs EGL's Debian packages)
# ---------------------------------------------------------------------------------------
BACKENDS = {"egl": "apt-get install -y libegl1 libegl-mesa0 libgl1-mesa-dri libopengl0",
            "osmesa": "apt-get install -y libosmesa6"}
NO_BACKEND = 3  # RECORD_HOPPER's exit status where MUJOCO_GL's backend makes no context
RECORD_HOPPER = f"""
import sys
try:  # the backend's library loads, makes a context and MuJoCo draws into it
    import mujoco
    context = mujoco.GLContext(8, 8)
    context.make_current()
    mujoco.MjrContext(mujoco.MjModel.from_xml_string("<mujoco/>"), mujoco.mjtFontScale.mjFONTSCALE_100)
    context.free()
except Exception:
    sys.exit({NO_BACKEND})
import gymnasium as gym
env = gym.make("Hopper-v5", render_mode="rgb_array", max_episode_steps=5, width=128,
               height=128)  # small frames: a software renderer draws them fast
env = gym.wrappers.RecordVideo(env, sys.argv[1], name_prefix="hopper")  # as the scripts record
env.reset(seed=0)
done = False
while not done:
    _, _, terminated, truncated, _ = env.step(env.action_space.sample())
    done = terminated or truncated
env.close()
"""


@pytest.mark.slow  # a MuJoCo video recorded offscreen
def test_a_mujoco_environment_is_recorded_offscreen(tmp_path):
    # an episode of Hopper-v5 cut at 5 steps, recorded with Gymnasium's RecordVideo (the
    # wrapper the scripts' --capture-video uses) without a display, on the first of MuJoCo's
    # offscreen backends that makes a context here; a subprocess each: MuJoCo reads
    # MUJOCO_GL once
    pytest.importorskip("mujoco", reason='pip install "gymnasium[mujoco]" (requirements.txt)')
    for backend in BACKENDS:
        done = subprocess.run([sys.executable, "-c", RECORD_HOPPER, str(tmp_path)], cwd=ROOT,
                              capture_output=True, text=True, timeout=120,
                              env={**os.environ, "MUJOCO_GL": backend})
        if done.returncode != NO_BACKEND:
            break
    else:
        pytest.skip("no offscreen OpenGL backend for MuJoCo: "
                    + " or ".join(f"MUJOCO_GL={b} ({command})" for b, command in BACKENDS.items()))
    assert done.returncode == 0, (backend, done.stderr[-2000:])
    assert sorted(os.listdir(tmp_path)) == ["hopper-episode-0.mp4"]
    import imageio_ffmpeg
    import numpy as np
    reader = imageio_ffmpeg.read_frames(str(tmp_path / "hopper-episode-0.mp4"))
    meta, frames = next(reader), list(reader)
    assert tuple(meta["size"]) == (128, 128) and len(frames) == 6  # the reset's and 5 steps'
    # MuJoCo drew the scene: a frame is not one flat colour (a context that draws nothing is)
    assert np.frombuffer(frames[-1], dtype=np.uint8).std() > 10

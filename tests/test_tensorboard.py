"""TensorBoard and Weights & Biases read every script's runs (issue 60): the event files in
the run folder hold the rows of its CSV files, at the same steps and moments, under CleanRL's
names; they survive Ctrl-C and a crash; --no-tensorboard writes none; --track syncs them to
Weights & Biases (offline here: WANDB_MODE=offline) and without wandb stops in one line.

The event files are read back with TensorBoard's own reader (EventAccumulator), the W&B run
from its .wandb file. wandb is not a requirement: the tests that need it skip without it.
"""
import glob
import os
import re
import struct
import subprocess
import sys

import numpy as np
import pytest
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
from tensorboard.summary.writer import event_file_writer

from conftest import ROOT, read_csv, script_path
# impala.py's Ray: started before its tests here, stopped after this file (test_plumbing.py's)
from test_plumbing import BLOCK, SCRIPTS, TINY, module_of, run_folder

# The names CleanRL's scripts give these quantities (ppo.py, dqn.py, td3_continuous_action.py,
# sac_continuous_action.py, ppo_rnd_envpool.py): a column of the same meaning takes the same name.
CLEANRL = {"episode_return": "charts/episodic_return", "episode_length": "charts/episodic_length",
           "sps": "charts/SPS", "learning_rate": "charts/learning_rate",
           "policy_loss": "losses/policy_loss", "value_loss": "losses/value_loss",
           "entropy": "losses/entropy", "approx_kl": "losses/approx_kl",
           "clipfrac": "losses/clipfrac", "explained_variance": "losses/explained_variance",
           "critic_loss": "losses/qf_loss", "critic1_loss": "losses/qf1_loss",
           "critic2_loss": "losses/qf2_loss", "q1_mean": "losses/qf1_values",
           "actor_loss": "losses/actor_loss", "alpha": "losses/alpha",
           "predictor_loss": "losses/fwd_loss", "eval_return_mean": "eval/episodic_return",
           "eval_return_std": "eval/episodic_return_std"}
CSV_FILES = ("episodes.csv", "updates.csv", "evaluations.csv")
# Where the tiny run ends no episode: MountainCar-v0's last 200 steps (two environments: 512
# steps end one each), ppo_lstm.py's 16 steps an environment are too few for CartPole's
ENDS_EPISODES = {"ppod.py": ["--total-timesteps", "512"], "ppo_rnd.py": ["--total-timesteps", "512"],
                 "ppo_lstm.py": ["--total-timesteps", "128"]}


def tiny_run_with_evaluations(script, output_dir):
    """A tiny run that ends episodes and evaluates one episode halfway through its budget;
    returns its flags."""
    module = module_of(script)
    flags = [*TINY[script], *ENDS_EPISODES.get(script, []), "--output-dir", str(output_dir)]
    budget = module.tyro.cli(module.Args, args=flags).total_timesteps
    args = module.tyro.cli(module.Args, args=[*flags, "--eval-episodes", "1",
                                              "--eval-every", str(budget // 2)])
    module.main(args)
    return args


def events(path):
    """TensorBoard's reader on a run folder: every point of every series kept."""
    accumulator = EventAccumulator(path, size_guidance={"scalars": 0, "tensors": 0})
    accumulator.Reload()
    return accumulator


def event_files(output_dir):
    return glob.glob(os.path.join(output_dir, "*", "events.out.tfevents.*"))


def check_events_equal_the_csv_rows(script, path, files=CSV_FILES):
    """Each column of each CSV file (but global_step and wall_time) is one series of scalars,
    named by the block's rule (COMMON_NAMES, else losses/ for updates.csv's columns and
    charts/ for any other file's), CleanRL's name wherever CleanRL's ends in the column's own,
    whose points are the file's rows in order: the step is the row's global_step, the value
    the cell (as float32; an empty cell has no point), and the time the run's start plus the
    row's wall_time, the same start for every point."""
    module = module_of(script)
    accumulator = events(path)
    starts, expected_tags = [], set()
    for filename in files:
        rows = read_csv(os.path.join(path, filename))
        assert rows, f"{script} wrote no row of {filename}"
        for column in list(rows[0])[2:]:
            folder = "losses" if filename == "updates.csv" else "charts"
            tag = module.COMMON_NAMES.get(column, f"{folder}/{column}")
            if CLEANRL.get(column, "").rpartition("/")[2] in (column, "episodic_return",
                                                              "episodic_length", "SPS",
                                                              "episodic_return_std"):
                assert tag == CLEANRL[column], (script, column)
            written = [r for r in rows if r[column] != ""]
            points = accumulator.Scalars(tag)
            assert [p.step for p in points] == [int(r["global_step"]) for r in written]
            assert np.array_equal([p.value for p in points], np.float32(
                [float(r[column]) for r in written]), equal_nan=True), (script, column)
            starts += [p.wall_time - float(r["wall_time"]) for p, r in zip(points, written)]
            expected_tags.add(tag)
    assert set(accumulator.Tags()["scalars"]) == expected_tags  # nothing else
    assert max(starts) - min(starts) < 1e-3
    # the start is the run's own moment (the folder's name holds its second), not 0: a point
    # at its row's wall_time alone would sit in January 1970
    named = int(os.path.basename(path).split("__")[-1].split("-")[0])
    assert named - 1 <= min(starts) < named + 60
    return accumulator


@pytest.mark.parametrize("script", SCRIPTS)
def test_the_event_files_hold_the_csv_rows_under_cleanrls_names(script, tmp_path):
    tiny_run_with_evaluations(script, tmp_path)
    path = run_folder(tmp_path)
    # grpo.py and rlhf.py write their held-out measures too, held_out.csv (the warm start's at
    # step 0), and rlhf.py its reward model's training, reward_model.csv (before step 0)
    own = tuple(f for f in ("held_out.csv", "reward_model.csv")
                if os.path.exists(os.path.join(path, f)))
    check_events_equal_the_csv_rows(script, path, (*CSV_FILES, *own))


def stopped_run(script, tmp_path, monkeypatch, stop, flags=()):
    """A tiny run that `stop` (KeyboardInterrupt, RuntimeError) ends at its third episode,
    after two rows of episodes.csv; returns the run folder."""
    module = module_of(script)
    episode, calls = module.Run.episode, []

    def stopped_episode(self, *args):
        calls.append(1)
        if len(calls) == 3:
            raise stop("stopped by the test")
        return episode(self, *args)

    monkeypatch.setattr(module.Run, "episode", stopped_episode)
    args = module.tyro.cli(module.Args, args=[*TINY[script], "--total-timesteps", "100000",
                                              *flags, "--output-dir", str(tmp_path)])
    with pytest.raises(stop):
        module.main(args)
    path = run_folder(tmp_path)
    assert len(read_csv(os.path.join(path, "episodes.csv"))) == 2
    return path


def written_csv_files(path):
    return [f for f in CSV_FILES if os.path.exists(os.path.join(path, f))]


class WrittenWhenFlushed:
    """TensorBoard's writer of an event file without its thread: what is not flushed (or
    closed) never reaches the file, as in a process killed before the thread wrote it."""

    def __init__(self, record_writer, *args):
        self.record_writer, self.held = record_writer, []

    def write(self, data):
        self.held.append(data)

    def flush(self):
        for data in self.held:
            self.record_writer.write(data)
        self.held = []
        self.record_writer.flush()

    def close(self):
        self.flush()
        self.record_writer.close()


@pytest.mark.parametrize("stop", [KeyboardInterrupt, RuntimeError], ids=["ctrl-c", "crash"])
@pytest.mark.parametrize("script", BLOCK)
def test_a_stopped_runs_events_are_readable(script, stop, tmp_path, monkeypatch):
    # Ctrl-C closes the event file with the CSV files; a crash closes nothing, and the
    # writer's thread may not have written the last rows when the process dies: each row
    # is flushed as it is written, as the CSVs' are. Either way TensorBoard reads the rows
    # the CSVs have.
    monkeypatch.setattr(event_file_writer, "_AsyncWriter", WrittenWhenFlushed)
    path = stopped_run(script, tmp_path, monkeypatch, stop)
    check_events_equal_the_csv_rows(script, path, written_csv_files(path))


@pytest.mark.parametrize("script", BLOCK)
def test_no_tensorboard_writes_no_event_file(script, tmp_path, monkeypatch):
    stopped_run(script, tmp_path, monkeypatch, KeyboardInterrupt, ["--no-tensorboard"])
    assert os.listdir(tmp_path) and not event_files(tmp_path)


@pytest.mark.parametrize("script", SCRIPTS)
def test_help_lists_the_logging_flags(script, run_cli):
    code, out, _ = run_cli(script, ["--help"])
    assert code == 0
    for flag in ("--tensorboard", "--no-tensorboard", "--track", "--wandb-project-name",
                 "--wandb-entity"):
        assert flag in out


def ci_wandb_pin():
    """The wandb that .ci/run installs (`wandb==X`): the one the scripts' line names."""
    with open(os.path.join(ROOT, ".ci", "run")) as f:
        (pin,) = re.findall(r"\bwandb==[\w.]+", f.read())
    return pin


@pytest.mark.parametrize("script", BLOCK)
def test_track_without_wandb_stops_in_one_line_naming_the_install(script, check_usage_error,
                                                                  monkeypatch):
    import importlib.util
    find_spec = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec",
                        lambda name, *a: None if name == "wandb" else find_spec(name, *a))
    check_usage_error(script, ["--track"], f"--track needs wandb: pip install {ci_wandb_pin()}")


def wandb_env(tmp_path, mode):
    """The environment of a subprocess whose W&B writes under tmp_path only, with no account
    (a HOME of its own: no ~/.netrc), and matplotlib's font cache where it is."""
    import matplotlib
    env = {k: v for k, v in os.environ.items() if not k.startswith("WANDB_")}
    return env | {"WANDB_MODE": mode, "WANDB_DIR": str(tmp_path), "HOME": str(tmp_path),
                  "WANDB_CONFIG_DIR": str(tmp_path / "config"),
                  "MPLCONFIGDIR": matplotlib.get_cachedir()}


def wandb_records(path):
    """The records of a .wandb file, W&B's log of a run: a 7-byte header (":W&B", magic,
    version), then blocks of 32 KiB holding records, each a 7-byte header (CRC32, length,
    type: 1 whole, 2 first, 3 middle, 4 last piece) and its bytes, one Record protobuf
    split into pieces where it does not fit a block; a block's tail under 7 bytes is zeros."""
    from wandb.proto import wandb_internal_pb2
    with open(path, "rb") as f:
        data = f.read()
    assert data[:4] == b":W&B"
    records, pieces, at = [], b"", 7
    while at + 7 <= len(data):
        if 32768 - at % 32768 < 7:  # the block's zero tail
            at += 32768 - at % 32768
            continue
        length, kind = struct.unpack("<HB", data[at + 4:at + 7])
        pieces, at = pieces + data[at + 7:at + 7 + length], at + 7 + length
        if kind in (1, 4):
            records.append(wandb_internal_pb2.Record.FromString(pieces))
            pieces = b""
    return records


@pytest.mark.slow  # a run synced to wandb offline, with its videos
def test_track_offline_syncs_the_episodic_returns_config_and_videos(tmp_path):
    # ppo.py --track with WANDB_MODE=offline, a classroom without an account: the W&B run
    # (under WANDB_DIR) has the flags as its configuration, charts/episodic_return's history
    # equal to episodes.csv's returns, and the final evaluation's video.
    pytest.importorskip("wandb", reason=f"pip install {ci_wandb_pin()}")
    result = subprocess.run(
        [sys.executable, script_path("ppo.py"), *TINY["ppo.py"], "--track", "--eval-episodes",
         "1", "--capture-video", "--wandb-project-name", "plainrl-tests", "--output-dir",
         str(tmp_path / "runs")], cwd=tmp_path, env=wandb_env(tmp_path, "offline"),
        capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr
    path = run_folder(tmp_path / "runs")
    (run_file,) = glob.glob(os.path.join(tmp_path, "wandb", "offline-run-*", "run-*.wandb"))
    records = wandb_records(run_file)
    (run,) = [r.run for r in records if r.HasField("run")]
    assert run.project == "plainrl-tests" and run.display_name == os.path.basename(path)
    config = {item.key: item.value_json for item in run.config.update}
    assert config["env_id"] == '"CartPole-v1"' and config["total_timesteps"] == "256"
    # a row of the history per step (two episodes ending at one step would share one)
    synced = [(int(items["global_step"]), float(items["charts/episodic_return"]))
              for items in ({i.key or "/".join(i.nested_key): i.value_json for i in r.history.item}
                            for r in records if r.HasField("history"))
              if "charts/episodic_return" in items]
    episodes = read_csv(os.path.join(path, "episodes.csv"))
    assert synced == list({int(e["global_step"]): float(e["episode_return"])
                           for e in episodes}.items())
    videos = glob.glob(os.path.join(os.path.dirname(run_file), "files", "media", "videos", "*"))
    assert len(videos) == 1 and videos[0].endswith(".mp4")


def test_track_online_without_an_account_is_bad_input(tmp_path):
    # No API key and not offline: one line naming both ways out, before any run folder
    pytest.importorskip("wandb", reason=f"pip install {ci_wandb_pin()}")
    result = subprocess.run(
        [sys.executable, script_path("ppo.py"), *TINY["ppo.py"], "--track", "--output-dir",
         str(tmp_path / "runs")], cwd=tmp_path, env=wandb_env(tmp_path, "online"),
        stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=120)
    assert result.returncode == 2 and not (tmp_path / "runs").exists()
    assert result.stderr.startswith("ppo.py: error: --track: ") and result.stderr.count("\n") == 1
    assert "wandb login" in result.stderr and "Or set WANDB_MODE=offline" in result.stderr

"""benchmarks/same_episodes.py, the check that a refactor changes nothing an agent learns
(CONTRIBUTING.md, "Determinism"; issue 102): every script has a command, every CSV file of
the run folder is compared without its time columns, and a difference is named where it is."""
import csv
import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "benchmarks"))
import lines_of_code  # noqa: E402
import same_episodes  # noqa: E402


def test_every_script_has_a_command_and_rlhf_its_dpo_variant_too():
    names = {name.split("-")[0] for name in same_episodes.COMMANDS}
    assert names == set(lines_of_code.SCRIPTS)
    assert "rlhf-dpo" in same_episodes.COMMANDS
    assert same_episodes.COMMANDS["rlhf-dpo"][:2] == ["--algo", "dpo"]


def test_differences_name_the_file_and_the_first_row_that_differs():
    rows = [{"global_step": "1", "episode_return": "9.0"},
            {"global_step": "2", "episode_return": "10.0"}]
    changed = [rows[0], {"global_step": "2", "episode_return": "10.5"}]
    same = {"episodes.csv": rows, "updates.csv": rows[:1]}
    assert same_episodes.differences(same, {k: list(v) for k, v in same.items()}) == []
    # the second row of updates.csv differs: "at row 2"; episodes.csv is the same
    assert same_episodes.differences({"episodes.csv": rows, "updates.csv": rows},
                                     {"episodes.csv": rows, "updates.csv": changed}) == [
        "updates.csv at row 2"]
    # one more row after: no row differs, so the numbers of rows are named
    assert same_episodes.differences({"episodes.csv": rows[:1]}, {"episodes.csv": rows}) == [
        "episodes.csv: 1 rows before, 2 after"]
    # a file only one run wrote (held_out.csv after, evaluations.csv before), in name order
    assert same_episodes.differences(
        {"episodes.csv": rows, "evaluations.csv": rows}, {"episodes.csv": rows,
                                                          "held_out.csv": rows}) == [
        "evaluations.csv only before", "held_out.csv only after"]


def test_a_runs_files_are_read_without_their_time_columns(tmp_path, monkeypatch):
    # episodes() runs the command in a subprocess; here the "run" writes two CSV files whose
    # wall_time and sps differ from any other run's, and a curve.png that is no CSV file.
    def fake_run(command, cwd, check, capture_output, env):
        out = command[command.index("--output-dir") + 1]
        folder = os.path.join(out, "X__ppo__1__123")
        os.makedirs(folder)
        for name, fields in [("episodes.csv", ["global_step", "wall_time", "episode_return"]),
                             ("updates.csv", ["global_step", "wall_time", "sps", "loss"])]:
            with open(os.path.join(folder, name), "w", newline="") as f:
                writer = csv.DictWriter(f, fieldnames=fields)
                writer.writeheader()
                writer.writerow({k: {"global_step": "8", "wall_time": "0.123", "sps": "77",
                                     "episode_return": "3.5", "loss": "0.25"}[k] for k in fields})
        open(os.path.join(folder, "curve.png"), "w").close()
        assert command[1] == "rlhf.py" and "--algo" in command  # a variant runs its script
        assert env["OMP_NUM_THREADS"] == "1"

    monkeypatch.setattr(same_episodes.subprocess, "run", fake_run)
    found = same_episodes.episodes(str(tmp_path), "rlhf-dpo", ["--algo", "dpo"])
    assert found == {"episodes.csv": [{"global_step": "8", "episode_return": "3.5"}],
                     "updates.csv": [{"global_step": "8", "loss": "0.25"}]}

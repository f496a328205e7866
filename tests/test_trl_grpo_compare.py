"""Tests of benchmarks/trl_grpo_compare.py, grpo.py beside TRL's GRPOTrainer (issues 84 and 92):
which settings each task shares with TRL, the warm start make-model repeats, the command lines
and prompts of both sides, the held-out accuracy by carry, and the table with RL's gain. TRL
is needed only by the last test (slow), which runs the whole comparison at a toy size."""
import json
import os
import subprocess
import sys
from dataclasses import replace

import numpy as np
import pytest
import tyro

import grpo
from benchmarks import trl_grpo_compare as compare

PARTIAL = "AdditionPartial-v0"


def test_addition_keeps_issue_84s_settings_and_the_partial_task_takes_grpos_defaults():
    assert compare.task_settings("Addition-v0") == compare.SETTINGS
    defaults = grpo.Args()
    settings = compare.task_settings(PARTIAL)
    assert settings == {**{k: getattr(defaults, k) for k in compare.SETTINGS}, "threads": 1}
    # the default command's budget in whole batches: 307,200 // (64 * 8) = 600 today
    assert compare.default_updates(PARTIAL, settings) == defaults.total_timesteps // (
        settings["num_prompts"] * settings["group_size"])
    assert compare.default_updates("Addition-v0", compare.SETTINGS) == 200
    assert compare.default_sft_steps("Addition-v0") == 1000
    assert compare.default_sft_steps(PARTIAL) == defaults.sft_steps
    assert compare.model_dir_of("Addition-v0") == compare.MODEL_DIR
    assert compare.model_dir_of(PARTIAL) == os.path.join(compare.TRL_DIR, f"model-{PARTIAL}")
    assert compare.results_dir_of("Addition-v0") == compare.TRL_DIR
    assert compare.results_dir_of(PARTIAL) == os.path.join(compare.TRL_DIR, PARTIAL)


def test_a_grpo_default_the_peer_does_not_map_stops_the_comparison(monkeypatch):
    # DAPO's clip-higher as grpo.py's default: TRL's epsilon_high would still be epsilon
    dapo = replace(grpo.Args(), clip_coef_high=0.28)
    monkeypatch.setattr(compare.grpo, "Args", lambda: dapo)
    for env_id in compare.TASKS:
        with pytest.raises(ValueError, match="clip_coef_high"):
            compare.task_settings(env_id)


def test_the_warm_start_is_issue_84s_on_addition_and_the_default_commands_on_the_partial_task():
    old = compare.warm_start_args("Addition-v0", "m", 0, 1000, 5)
    # grpo.py's warm_start with 3,000 problems at a constant rate gives issue 84's weights
    assert (old.sft_problems, old.sft_anneal_lr, old.sft_steps, old.eval_every) == (
        3000, False, 1000, 0)
    new = compare.warm_start_args(PARTIAL, "m", 0, 1500, 5)
    defaults = grpo.Args()
    assert new.env_id == PARTIAL and new.seed == 0 and new.model == "m"
    for flag in ("sft_problems", "sft_batch_size", "sft_learning_rate", "sft_anneal_lr",
                 "sft_stop_at"):
        assert getattr(new, flag) == getattr(defaults, flag), flag
    assert new.eval_every == (0 if defaults.sft_stop_at is None else defaults.eval_every)


@pytest.mark.parametrize("env_id", compare.TASKS)
def test_grpos_command_line_carries_every_setting_and_passes_grpos_checks(env_id, tmp_path):
    settings = compare.task_settings(env_id)
    command = compare.grpo_command(101, 3, str(tmp_path / "out"), env_id, settings,
                                   str(tmp_path))
    assert command[1] == os.path.join(compare.ROOT, "grpo.py")
    args = tyro.cli(grpo.Args, args=command[2:])
    grpo.check_args(args)  # no usage error: --eval-every 0 goes with --eval-episodes 0
    for key, value in settings.items():
        assert getattr(args, key) == value, key
    assert (args.env_id, args.seed, args.model, args.sft_steps, args.save_model) == (
        env_id, 101, str(tmp_path), 0, True)
    assert args.total_timesteps == 3 * settings["num_prompts"] * settings["group_size"]
    assert (args.eval_episodes, args.eval_every, args.tensorboard, args.curve) == (0, 0, False,
                                                                                  False)
    for key, value in compare.PEER_ASSUMES.items():
        assert getattr(args, key) == value, key
    peer = compare.peer_command(101, 3, "out", "prompts.json", "python", settings, "model")
    assert json.loads(peer[peer.index("--settings") + 1]) == settings
    assert peer[peer.index("--model") + 1] == "model" and peer[peer.index("--updates") + 1] == "3"


@pytest.mark.parametrize("env_id", compare.TASKS)
def test_trl_gets_the_prompts_grpo_poses_in_grpos_order(env_id):
    # grpo.py's train: B groups of G environments seeded by default_rng(seed), one problem
    # each per update (SAME_STEP autoreset); a group's G environments pose the same problem
    grpo.register_tasks()
    B, G, updates, seed = 3, 2, 4, 7
    envs = grpo.make_vector_env(env_id, B * G, held_out=False)
    seeds = np.random.default_rng(seed).integers(2 ** 31, size=B)
    prompts, _ = envs.reset(seed=[int(s) for s in seeds for _ in range(G)])
    posed = []
    for _ in range(updates):
        posed += list(prompts[::G])
        prompts, *_ = envs.step(("",) * (B * G))
    envs.close()
    assert compare.grpo_prompts(seed, updates, env_id, B) == posed
    # AdditionPartial-v0 poses Addition-v0's problems: only its worked answers differ
    assert compare.grpo_prompts(seed, updates, PARTIAL, B) == compare.grpo_prompts(
        seed, updates, "Addition-v0", B)


def test_the_held_out_accuracy_splits_by_the_carry_in_the_ones_column():
    problems = compare.held_out_problems()
    carry = [sum(int(x) % 10 for x in p[:-1].split("+")) >= 10 for p in problems]
    # "47+85=": 7 + 5 = 12 carries; "41+52=": 1 + 2 = 3 does not
    assert sum(int(x) % 10 for x in "47+85".split("+")) >= 10
    scores = [1.0 if c else 0.0 for c in carry]  # right exactly where a carry is
    assert compare.by_carry(scores) == {"carry": 1.0, "no_carry": 0.0}
    scores = [1.0] * len(problems)
    scores[carry.index(True)] = 0.0  # one carry sum wrong
    assert compare.by_carry(scores)["carry"] == round(1 - 1 / sum(carry), 4)


def results(env_id=None):
    runs = [{"seed": 101, "warm_start": 0.5, "grpo": 0.9, "trl": 0.8, "grpo_s": 60.0,
             "grpo_train_s": 50.0, "trl_s": 100.0, "trl_train_s": 80.0, "grpo_load": [1.0, 2.0],
             "trl_load": [2.0, 1.5], "grpo_cpu_s": 55.0, "trl_cpu_s": 90.0},
            {"seed": 102, "warm_start": 0.5, "grpo": 0.7, "trl": 0.9, "grpo_s": 90.0,
             "grpo_train_s": 80.0, "trl_s": 100.0, "trl_train_s": None, "grpo_load": [1.0, 1.0],
             "trl_load": [1.0, 1.0], "grpo_cpu_s": 85.0, "trl_cpu_s": 110.0}]
    out = {"command": "c", "date": "d", "machine": "m", "trl": "1.16.0",
           "settings": compare.SETTINGS, "updates": 2, "completions": 256, "runs": runs}
    return out if env_id is None else {**out, "env_id": env_id}


def test_the_addition_table_is_issue_84s_and_the_partial_one_adds_rls_gain():
    old = compare.table(results()).splitlines()
    assert old == compare.table(results("Addition-v0")).splitlines()
    assert old[0] == ("| seed | warm start | grpo.py | TRL | grpo.py process s (training) "
                      "| TRL process s (training) | ratio | grpo.py CPU s | TRL CPU s "
                      "| load (grpo.py; TRL) |")
    assert old[2] == ("| 101 | 0.500 | 0.900 | 0.800 | 60.0 (50.0) | 100.0 (80.0) | 0.60 | 55.0 "
                      "| 90.0 | 1.0-2.0; 2.0-1.5 |") and len(old) == 4
    new = compare.table(results(PARTIAL)).splitlines()
    assert new[0].startswith("| seed | warm start | grpo.py | TRL | grpo.py gain | TRL gain |")
    assert new[1].count("---") == 12
    assert new[2] == ("| 101 | 0.500 | 0.900 | 0.800 | +0.400 | +0.300 | 60.0 (50.0) "
                      "| 100.0 (80.0) | 0.60 | 55.0 | 90.0 | 1.0-2.0; 2.0-1.5 |")
    assert new[3].startswith("| 102 | 0.500 | 0.700 | 0.900 | +0.200 | +0.400 | 90.0 (80.0) "
                             "| 100.0 | 0.90 |")
    # means (0.9 + 0.7)/2 = 0.8 and (0.8 + 0.9)/2 = 0.85; seconds 150/200 = 0.75, CPU 140/200
    assert new[5] == ("Over 2 seeds: grpo.py 0.800 (RL's gain +0.300), TRL 0.850 (+0.350); TRL "
                      "less grpo.py +0.050. grpo.py's process seconds are 0.75 of TRL's; of the "
                      "CPU seconds 0.70 (the goal: at most 0.8 at equal accuracy).")


def test_results_md_names_the_partial_task_and_not_addition(tmp_path):
    compare.write(results(), str(tmp_path / "a"))
    compare.write(results(PARTIAL), str(tmp_path / "b"))
    first = [open(tmp_path / d / "results.md").readline() for d in "ab"]
    assert first[0] == ("`c` (d, m, TRL 1.16.0, 256 completions: 2 batches of 16 prompts x 8)\n")
    assert first[1] == (f"`c` (d, m, TRL 1.16.0, {PARTIAL}, 256 completions: 2 batches of 16 "
                        "prompts x 8)\n")


@pytest.mark.slow  # TRL's process and grpo.py's, a model made and warm-started: about a minute
def test_the_partial_comparison_runs_end_to_end_at_a_toy_size(tmp_path):
    pytest.importorskip("trl", reason="pip install trl==1.16.0 datasets==5.2.0")
    script = os.path.join(compare.ROOT, "benchmarks", "trl_grpo_compare.py")
    model = str(tmp_path / "model")

    def call(*argv):
        done = subprocess.run([sys.executable, script, *argv, "--env-id", PARTIAL,
                               "--model-dir", model], capture_output=True, text=True)
        assert done.returncode == 0, done.stdout + done.stderr
        return done.stdout
    call("make-model", "--sft-steps", "2", "--hidden-size", "16", "--layers", "1")
    with open(os.path.join(model, "warm_start.json")) as f:
        warm = json.load(f)
    assert warm["env_id"] == PARTIAL and warm["sft_steps"] == 2
    assert set(warm["held_out_accuracy_by_carry"]) == {"carry", "no_carry"}
    printed = call("run", "--seeds", "3", "--updates", "1", "--results", str(tmp_path / "out"))
    with open(tmp_path / "out" / "results.json") as f:
        out = json.load(f)
    (row,) = out["runs"]
    settings = compare.task_settings(PARTIAL)
    assert out["settings"] == settings and out["env_id"] == PARTIAL
    assert out["completions"] == settings["num_prompts"] * settings["group_size"]
    assert row["warm_start"] == warm["held_out_accuracy"]
    assert all(0 <= row[k] <= 1 for k in ("grpo", "trl")) and row["grpo_s"] > 0
    assert set(row["grpo_by_carry"]) == set(row["trl_by_carry"]) == {"carry", "no_carry"}
    assert "| grpo.py gain | TRL gain |" in printed and "Over 1 seed:" in printed

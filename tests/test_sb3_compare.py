"""Tests of benchmarks/sb3_mujoco_compare.py, the side by side with Stable-Baselines3: which
task runs beside which SB3 algorithm, on which seed, and how the step and the second at which
ours reached SB3's final return are read from the files the two processes wrote. SB3 itself
is not needed: a stand-in prints sb3_mujoco.py's lines."""
import json
import os
import stat
import subprocess
import sys

from benchmarks import sb3_mujoco_compare as compare
import pytest

pytestmark = pytest.mark.slow  # the side by sides with SB3 (benchmarks/): a tool's processes, no script's math


def write_ours(out, algo, seed, evaluations, final, wall_time_s, process_s):
    """A run folder as sac.py writes it (evaluations.csv, summary.json) where run_one puts it,
    and the whole process's seconds as `run` keeps them."""
    folder = os.path.join(out, "ours", "runs", compare.TASK[algo], f"seed{seed}", "run")
    os.makedirs(folder)
    with open(os.path.join(folder, "evaluations.csv"), "w") as f:
        f.write("global_step,wall_time,eval_return_mean,eval_return_std\n")
        f.writelines(f"{step},{wall},{mean},1.0\n" for step, wall, mean in evaluations)
    with open(os.path.join(folder, "summary.json"), "w") as f:
        json.dump({"global_steps": 30000, "wall_time_s": wall_time_s, "eval_return_mean": final},
                  f)
    with open(os.path.join(out, "ours", f"{algo}-seed{seed}.json"), "w") as f:
        json.dump({"process_s": process_s}, f)


SB3_LINES = "a warning line\neval 10000 7.0 -1.0\neval 20000 107.0 50.0\neval 30000 207.0 40.0\n"


def test_ours_reaches_sb3s_final_return_at_its_first_evaluation_at_or_above_it(tmp_path, capsys):
    out = str(tmp_path)
    # ours: evaluations at 10k, 20k, 30k (seconds 100, 500, 900 of training), then the final
    # one after training (950 s); the process took 1,000 s, so 50 s are start-up and closing
    write_ours(out, "sac", 101, [(10000, 100.0, -2.0), (20000, 500.0, 30.0),
                                 (30000, 900.0, 45.0)], final=60.0, wall_time_s=950.0,
               process_s=1000.0)
    os.makedirs(os.path.join(out, "sb3"))
    with open(os.path.join(out, "sb3", "sac-seed101.out"), "w") as f:
        f.write(SB3_LINES)
    with open(os.path.join(out, "sb3", "sac-seed101.json"), "w") as f:
        json.dump({"process_s": 230.0}, f)

    steps, seconds, means, process_s = compare.ours_evaluations(out, "sac", 101)
    # seconds = process - (training seconds - evaluation's second): 1000 - (950 - 100) = 150,
    # 1000 - (950 - 500) = 550, 1000 - (950 - 900) = 950, and the final one at 1000
    assert steps.tolist() == [10000, 20000, 30000, 30000] and process_s == 1000.0
    assert seconds.tolist() == [150.0, 550.0, 950.0, 1000.0]
    assert means.tolist() == [-2.0, 30.0, 45.0, 60.0]
    steps, seconds, means, process_s = compare.sb3_evaluations(out, "sac", 101)
    # SB3 counts from after its imports: its last line (207 s) is put at its process's end
    # (230 s), so 7 + 23 = 30, 107 + 23 = 130, 207 + 23 = 230
    assert steps.tolist() == [10000, 20000, 30000] and seconds.tolist() == [30.0, 130.0, 230.0]

    compare.report(compare.argparse.Namespace(algos=["sac"], seeds=[101], out=out,
                                              figure=str(tmp_path / "side.png")))
    line = json.loads(capsys.readouterr().out.splitlines()[1])
    # SB3's final is 40 (its last evaluation), first reached by SB3 at 20k (50 >= 40);
    # ours first reached 40 at its 30k evaluation (45), 950 s into its 1,000 s process:
    # 950 / 230 = 4.13 of SB3's whole process, 1000 / 230 = 4.35
    assert line == {"seed": 101, "sb3_final": 40.0, "sb3_first_step": 20000,
                    "sb3_process_s": 230.0, "ours_final": 60.0, "ours_reach_step": 30000,
                    "ours_reach_s": 950.0, "ours_process_s": 1000.0, "reach_ratio": 4.13,
                    "process_ratio": 4.35}
    assert os.path.getsize(tmp_path / "side.png") > 0


def test_only_the_final_evaluation_can_reach_and_never_reaching_says_so(tmp_path, capsys):
    out = str(tmp_path)
    write_ours(out, "td3", 7, [(10000, 100.0, -2.0)], final=40.0, wall_time_s=200.0,
               process_s=210.0)
    write_ours(out, "td3", 8, [(10000, 100.0, -2.0)], final=39.9, wall_time_s=200.0,
               process_s=210.0)
    os.makedirs(os.path.join(out, "sb3"))
    for seed in (7, 8):
        with open(os.path.join(out, "sb3", f"td3-seed{seed}.out"), "w") as f:
            f.write(SB3_LINES)
        with open(os.path.join(out, "sb3", f"td3-seed{seed}.json"), "w") as f:
            json.dump({"process_s": 230.0}, f)
    compare.report(compare.argparse.Namespace(algos=["td3"], seeds=[7, 8], out=out,
                                              figure=str(tmp_path / "side.png")))
    lines = [json.loads(x) for x in capsys.readouterr().out.splitlines()[1:3]]
    # seed 7: the final evaluation (40.0 >= 40.0) at the process's end, 210 s; seed 8: 39.9 never
    assert [(x["ours_reach_step"], x["ours_reach_s"]) for x in lines] == [(30000, 210.0),
                                                                          (None, None)]


def test_the_figure_draws_ours_final_evaluation_unless_one_sits_at_its_step():
    # sac.py: evaluations at 10k, 20k, 30k and the final one at 30k again: three points drawn
    assert compare.drawn([10000, 20000, 30000, 30000]) == 3
    # ppo.py: evaluations every 100k up to 900k and the final one at 999,424: all ten drawn
    assert compare.drawn([100000 * k for k in range(1, 10)] + [999424]) == 10
    assert compare.drawn([30000]) == 1  # only the final one


def test_run_starts_the_task_and_sb3_on_the_same_seed_and_report_reads_what_they_wrote(
        tmp_path, monkeypatch, capsys):
    out = str(tmp_path / "out")
    calls = []

    def run_one(task, seed, ours_out):  # benchmark.run_one's place: a run folder, its seconds
        calls.append((task.name, task.env_id, seed, ours_out))
        write_ours(out, "td3", seed, [(10000, 100.0, 45.0)], final=50.0, wall_time_s=200.0,
                   process_s=0.0)  # `run` writes the json itself, from run_one's answer
        return {"process_s": 260.0}

    monkeypatch.setattr(compare.benchmark, "run_one", run_one)
    stand_in = tmp_path / "sb3-python"  # records its arguments, prints sb3_mujoco.py's lines
    stand_in.write_text(f"#!{sys.executable}\nimport sys\n"
                        f"open({str(tmp_path / 'argv')!r}, 'w').write(' '.join(sys.argv[2:]))\n"
                        f"print({SB3_LINES!r})\n")
    stand_in.chmod(stand_in.stat().st_mode | stat.S_IEXEC)
    compare.run(compare.argparse.Namespace(algos=["td3"], seeds=[5], out=out,
                                           sb3_python=str(stand_in)))
    capsys.readouterr()
    assert calls == [("ddpg_td3-HalfCheetah-v5-100k", "HalfCheetah-v5", 5,
                      os.path.join(out, "ours"))]
    assert (tmp_path / "argv").read_text() == "td3 HalfCheetah-v5 5"
    # each SB3 algorithm beside our task on its environment and budget (sb3_mujoco.py's BUDGET)
    for algo, env_id, budget in (("sac", "HalfCheetah-v5", "100000"),
                                 ("td3", "HalfCheetah-v5", "100000"), ("ppo", "Hopper-v5", "1000000")):
        task = compare.task_of(algo)
        last = max(i for i, flag in enumerate(task.flags) if flag == "--total-timesteps")
        steps = task.flags[last + 1]  # the last one counts
        assert (task.script, task.env_id, steps) == (
            {"td3": "ddpg_td3"}.get(algo, algo), env_id, budget)
    compare.report(compare.argparse.Namespace(algos=["td3"], seeds=[5], out=out,
                                              figure=str(tmp_path / "side.png")))
    line = json.loads(capsys.readouterr().out.splitlines()[1])
    assert (line["ours_process_s"], line["ours_reach_step"]) == (260.0, 10000)
    assert 0 < line["sb3_process_s"] < 60  # timed around the stand-in


def test_report_without_runs_is_one_error_and_status_2(tmp_path):
    done = subprocess.run([sys.executable, "benchmarks/sb3_mujoco_compare.py", "report",
                           "--out", str(tmp_path)], capture_output=True, text=True,
                          cwd=os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    assert done.returncode == 2
    assert "ours/sac-seed101.json is missing" in done.stderr.splitlines()[-1]

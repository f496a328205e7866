"""Every torch script on a device other than the CPU (issue 29), with and without a GPU.

Without --cuda or --no-cuda, an image's network goes to the GPU and a flat observation's to
the CPU (issue 79); `--cuda` forces the GPU, and the CI has no GPU. So that a device mistake fails there too,
`pretend_gpu` makes a script's device `cuda` while every tensor stays on the CPU: a
TorchFunctionMode sees each torch call, keeps for each tensor's storage where it would live
on a machine with a GPU ("gpu" or "cpu"), and raises PyTorch's own error where a GPU would.
The rules, as an H100 with PyTorch 2.11 showed them:

- an operation on a GPU tensor and a CPU tensor of one or more dimensions fails (a 0-dim CPU
  tensor is a scalar and mixes); `copy_`, `.to`, `.cpu()` and `t[i] = x` with a plain index
  copy between the two;
- a CPU index may index GPU storage, but the values written through it (`t[index] = x`) must
  be on the GPU;
- `.numpy()` of a GPU tensor fails, and so does a CPU generator drawing on the GPU;
- a model.pt saved from the GPU loads on a machine without one only with `map_location`.

A tensor the spy has not seen made (one built at import) has no place and mixes with both.
test_a_run_on_a_real_gpu does the same runs on a real GPU, where there is one (`pytest -s`
prints the steps per second there and on the CPU).
"""
import contextlib
import glob
import importlib
import json
import os
import subprocess
import sys
from dataclasses import fields

import numpy as np
import pytest
import torch
from torch.overrides import TorchFunctionMode

from conftest import read_csv, script_path

# script: the flags of a tiny run that reaches the update (extra rows: flag paths of their own)
REPLAY = ["--total-timesteps", "140", "--learning-starts", "100", "--batch-size", "16",
          "--log-interval", "20"]
RUNS = {
    "ppo.py": ["--num-envs", "2", "--num-steps", "32", "--total-timesteps", "64"],
    "ppo.py Pendulum": ["--env-id", "Pendulum-v1", "--num-envs", "2", "--num-steps", "32",
                        "--total-timesteps", "64", "--norm-obs", "--norm-reward",
                        "--advantage", "vtrace"],
    "ppo.py MinAtar": ["--env-id", "MinAtar/Breakout-v1", "--num-envs", "2", "--num-steps", "32",
                       "--total-timesteps", "64"],  # images: the CNN, uint8 frames
    "ppo_masked.py": ["--num-envs", "2", "--num-steps", "32", "--total-timesteps", "64"],
    "ppod.py": ["--num-envs", "2", "--num-steps", "32", "--total-timesteps", "64",
                "--rho", "0.9", "--phi", "0"],  # demos replayed from the start
    "dqn.py": ["--total-timesteps", "160", "--learning-starts", "100", "--train-frequency", "20",
               "--batch-size", "16", "--target-network-frequency", "20", "--log-interval", "40"],
    "dqn.py MinAtar": ["--env-id", "MinAtar/Breakout-v1", "--total-timesteps", "160",
                       "--learning-starts", "100", "--train-frequency", "20", "--batch-size", "16",
                       "--buffer-size", "160", "--log-interval", "40"],  # uint8 frames replayed
    "ddpg_td3.py": REPLAY,
    "ddpg_td3.py ddpg": ["--algo", "ddpg", *REPLAY],
    "sac.py": REPLAY,
    "crossq.py": REPLAY,
    "mappo.py": ["--num-envs", "2", "--num-steps", "25", "--total-timesteps", "50"],
    "mappo.py as": ["--num-envs", "2", "--num-steps", "25", "--total-timesteps", "50",
                    "--critic-state", "as", "--no-share-actor"],
    "matd3.py": ["--num-envs", "2", "--total-timesteps", "60", "--learning-starts", "20",
                 "--batch-size", "8", "--hidden-size", "8", "--critic-state", "fp", "--n-step", "3"],
    "ppo_lstm.py": ["--num-envs", "2", "--num-steps", "16", "--total-timesteps", "32"],
    # the learner on the device, its one Ray actor on the CPU (a local Ray of the run's own)
    "impala.py": ["--num-envs", "2", "--num-steps", "8", "--num-actors", "1",
                  "--total-timesteps", "32"],
    "ppo_rnd.py": ["--num-envs", "2", "--num-steps", "32", "--total-timesteps", "64",
                   "--rnd-init-steps", "8"],
    "vpg.py": ["--num-envs", "2", "--num-steps", "32", "--total-timesteps", "64"],
    "vpg.py Pendulum": ["--env-id", "Pendulum-v1", "--num-envs", "2", "--num-steps", "32",
                        "--total-timesteps", "64", "--norm-obs", "--norm-reward", "--gae-lambda",
                        "0.95"],
    "trpo.py": ["--num-envs", "2", "--num-steps", "32", "--total-timesteps", "64"],
    "trpo.py Pendulum": ["--env-id", "Pendulum-v1", "--num-envs", "2", "--num-steps", "32",
                         "--total-timesteps", "64", "--norm-obs", "--norm-reward"],
    "grpo.py": ["--num-prompts", "4", "--group-size", "4", "--total-timesteps", "32",
                "--sft-steps", "3", "--sft-problems", "16", "--n-layer", "1", "--n-head", "2",
                "--n-embd", "16", "--eval-every", "0"],
    "grpo.py nlpo": ["--num-prompts", "4", "--group-size", "4", "--total-timesteps", "32",
                     "--sft-steps", "3", "--sft-problems", "16", "--n-layer", "1", "--n-head",
                     "2", "--n-embd", "16", "--top-p", "0.9", "--eval-every", "0"],
}

# PyTorch's own messages for each mistake, as a GPU machine gives them
MIXED = ("Expected all tensors to be on the same device, but found at least two devices, "
         "cuda:0 and cpu!")
NUMPY = ("can't convert cuda:0 device type tensor to numpy. Use Tensor.cpu() to copy the tensor "
         "to host memory first.")
GENERATOR = "Expected a 'cuda' device type for generator but found 'cpu'"
NO_GPU = "Attempting to deserialize object on a CUDA device but torch.cuda.is_available() is False."

CUDA = torch.device("cuda")
DEVICE_OF = torch.Tensor.device.__get__
# calls that take a GPU tensor and a CPU one together: copies, and nn.Module.to's type check
ACROSS = (torch.Tensor.copy_, torch.Tensor.data.__set__, torch._has_compatible_shallow_copy_type)


def place(tensor):
    """Where the tensor's storage would live: "gpu", "cpu" or None (not seen made)."""
    return getattr(tensor.untyped_storage(), "pretend_place", None)


def tensors_in(value):
    """The tensors in a value: a tensor, or lists, tuples and dicts of them."""
    if isinstance(value, torch.Tensor):
        yield value
    elif isinstance(value, (list, tuple, dict)):
        for item in value.values() if isinstance(value, dict) else value:
            yield from tensors_in(item)


def put(value, where, force=False):
    """Record where the storages of value's tensors live; a storage already placed keeps its
    place (a view or an in-place result stays where its storage is) unless force."""
    for tensor in tensors_in(value):
        storage = tensor.untyped_storage()
        if where is not None and (force or not hasattr(storage, "pretend_place")):
            storage.pretend_place = where
    return value


def is_cuda(device):
    return isinstance(device, (str, torch.device)) and torch.device(device).type == "cuda"


def on_cpu(value):
    """The call's argument as the CPU takes it: a device that names the GPU becomes the CPU."""
    return "cpu" if is_cuda(value) else value


class PretendGPU(TorchFunctionMode):
    """Runs every torch call on the CPU and places its results as a GPU machine would."""

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if func == DEVICE_OF:
            return CUDA if place(args[0]) == "gpu" else func(*args)
        if func in (torch.Tensor.numpy, torch.Tensor.__array__) and place(args[0]) == "gpu":
            raise TypeError(NUMPY)
        if func in (torch.Tensor.to, torch.Tensor.cpu, torch.Tensor.cuda):
            return self.move(func, args, kwargs)
        if is_cuda(kwargs.get("device")):  # a tensor made on the GPU
            if kwargs.get("generator") is not None:
                raise RuntimeError(GENERATOR)
            out = func(*args, **{**kwargs, "device": "cpu"})
            if isinstance(out, torch.Tensor) and place(out) == "cpu":  # as_tensor(cpu tensor)
                out = out.clone()
            return put(out, "gpu", force=True)
        inputs = list(tensors_in((args, kwargs)))
        check(func, args, inputs)
        out = func(*args, **kwargs)
        places = {place(t) for t in inputs}
        return put(out, "gpu" if "gpu" in places else "cpu" if places <= {"cpu"} else None)

    def move(self, func, args, kwargs):
        """t.to(...), t.cpu(), t.cuda(): a copy where the place changes."""
        tensor, rest = args[0], args[1:]
        if func is torch.Tensor.to:
            goal = destination(rest, kwargs)
            out = func(tensor, *map(on_cpu, rest), **{k: on_cpu(v) for k, v in kwargs.items()})
        else:
            goal, out = "cpu" if func is torch.Tensor.cpu else "gpu", tensor.to("cpu")
        if goal is None or goal == place(tensor):
            return put(out, place(tensor))
        if out.untyped_storage() is tensor.untyped_storage():
            out = out.clone()
        return put(out, goal, force=True)


def destination(args, kwargs):
    """Where t.to(*args, **kwargs) sends t: "gpu", "cpu" or None (a dtype only)."""
    other = next(tensors_in((args, kwargs)), None)
    if other is not None:
        return place(other)
    device = next((a for a in (*args, kwargs.get("device"))
                   if isinstance(a, (str, torch.device))), None)
    return None if device is None else "gpu" if is_cuda(device) else "cpu"


def cpu_array(value):
    """A CPU tensor that a GPU does not take as a scalar (one or more dimensions)."""
    return isinstance(value, torch.Tensor) and place(value) == "cpu" and value.dim() > 0


def check(func, args, inputs):
    """Raise PyTorch's error where the call mixes the GPU with the CPU as a GPU refuses."""
    if func in ACROSS:
        return
    if func == torch.Tensor.__setitem__:  # t[index] = value
        target, index, value = args
        index = index if isinstance(index, tuple) else (index,)
        advanced = any(isinstance(i, (torch.Tensor, list, np.ndarray)) for i in index)
        if place(target) == "gpu" and advanced and cpu_array(value):
            raise RuntimeError(MIXED)
        return
    if func == torch.Tensor.__getitem__:  # t[index]
        if place(args[0]) == "cpu" and any(place(i) == "gpu" for i in tensors_in(args[1])):
            raise RuntimeError("indices should be either on cpu or on the same device as the "
                               "indexed tensor (cpu)")
        return
    if any(place(t) == "gpu" for t in inputs) and any(cpu_array(t) for t in inputs):
        raise RuntimeError(f"{MIXED} (in {getattr(func, '__name__', func)})")


@contextlib.contextmanager
def pretend_gpu(monkeypatch, module=None):
    """Within it, torch calls keep PretendGPU's rules, and module's runs see a GPU: their
    device is `cuda`. Yields the set of paths that torch.save wrote with GPU tensors in them."""
    if module is not None:  # every torch script picks its device in seed_and_device
        seed_and_device = module.seed_and_device

        def seed_and_gpu(*args, **kwargs):
            with monkeypatch.context() as m:  # seeds as it does and picks a GPU it sees
                m.setattr(torch.cuda, "is_available", lambda: True)
                assert seed_and_device(*args, **kwargs).type == "cuda"
            torch.set_num_threads(1)  # the tensors stay on this machine's CPU, as before
            return CUDA
        monkeypatch.setattr(module, "seed_and_device", seed_and_gpu)
    saved_from_gpu = set()
    save, load, from_numpy = torch.save, torch.load, torch.from_numpy

    def save_and_remember(obj, path, *a, **k):
        if any(place(t) == "gpu" for t in tensors_in(obj)):
            saved_from_gpu.add(str(path))
        return save(obj, path, *a, **k)

    def load_and_place(path, *a, map_location=None, **k):
        gpu = is_cuda(map_location) or (map_location is None and str(path) in saved_from_gpu)
        return put(load(path, *a, map_location="cpu", **k), "gpu" if gpu else "cpu")

    monkeypatch.setattr(torch, "save", save_and_remember)
    monkeypatch.setattr(torch, "load", load_and_place)
    monkeypatch.setattr(torch, "from_numpy", lambda array: put(from_numpy(array), "cpu"))
    torch.set_num_threads(1)  # as seed_and_device does on the CPU
    with PretendGPU():
        yield saved_from_gpu
    monkeypatch.undo()


@contextlib.contextmanager
def no_gpu(saved_from_gpu, monkeypatch):
    """Within it, the machine has no GPU: loading a file saved from one needs map_location."""
    load = torch.load

    def load_without_gpu(path, *a, map_location=None, **k):
        if map_location is None and str(path) in saved_from_gpu:
            raise RuntimeError(NO_GPU)
        return load(path, *a, map_location=map_location, **k)

    monkeypatch.setattr(torch, "load", load_without_gpu)
    yield
    monkeypatch.undo()


def module_of(script):
    return importlib.import_module(os.path.splitext(script)[0])


def has_cuda_flag(module):
    return "cuda" in {f.name for f in fields(module.Args)}


def run_of(module, flags, output_dir):
    """main(args) of the flags; returns (summary, the run folder)."""
    args = module.tyro.cli(module.Args, args=[*flags, "--output-dir", str(output_dir)])
    summary = module.main(args)
    (folder,) = glob.glob(os.path.join(output_dir, "*"))
    return summary, folder


@pytest.mark.parametrize("run", RUNS)
def test_a_run_on_a_pretend_gpu_and_its_model_on_a_machine_without_one(run, tmp_path, monkeypatch,
                                                                       capsys):
    module, flags = module_of(run.split()[0]), RUNS[run]
    if not has_cuda_flag(module):
        pytest.skip(f"{module.__name__}.py has no --cuda")
    with pretend_gpu(monkeypatch, module) as saved_from_gpu:
        trained, folder = run_of(module, [*flags, "--cuda", "--save-model", "--eval-episodes",
                                          "1"], tmp_path / "gpu")
    # --cuda forces the GPU, for a small network too; the first line says so
    assert capsys.readouterr().out.startswith(f"{run.split()[0]}: device cuda\n")
    with open(os.path.join(folder, "config.json")) as f:
        assert json.load(f)["device"] == "cuda"
    assert read_csv(os.path.join(folder, "updates.csv"))  # the update path ran on the GPU
    model = os.path.join(folder, "model.pt")
    # grpo.py keeps its warm start too (warm_start.pt, the controls' checkpoint)
    also = {os.path.join(folder, "warm_start.pt")} if run.startswith("grpo") else set()
    assert saved_from_gpu == {model} | also

    # The GPU's model, evaluated without a GPU and on one, plays the same greedy episodes
    env = flags[flags.index("--env-id"):][:2] if "--env-id" in flags else []
    evaluate = ["--eval-checkpoint", model, "--eval-episodes", "1", *env]
    with no_gpu(saved_from_gpu, monkeypatch):
        on_cpu, _ = run_of(module, [*evaluate, "--no-cuda"], tmp_path / "cpu")
    with pretend_gpu(monkeypatch, module):
        on_gpu, _ = run_of(module, [*evaluate, "--cuda"], tmp_path / "gpu-eval")
    assert on_cpu["eval_return_mean"] == on_gpu["eval_return_mean"] == trained["eval_return_mean"]


@pytest.mark.parametrize("script", [run for run in RUNS if " " not in run])
def test_no_cuda_picks_the_cpu_where_a_gpu_is_present(script, tmp_path, monkeypatch):
    # --no-cuda reaches seed_and_device, which picks the CPU though torch sees a GPU (a GPU
    # pretended only while the device is picked: the run itself stays on this CPU). The
    # other way, --cuda picking the GPU, is pretend_gpu's own assertion above.
    module = module_of(script)
    picked, seed_and_device = [], module.seed_and_device

    def pick_with_a_gpu_present(*args, **kwargs):
        with monkeypatch.context() as m:
            m.setattr(torch.cuda, "is_available", lambda: True)
            picked.append(seed_and_device(*args, **kwargs).type)
        return torch.device("cpu")

    monkeypatch.setattr(module, "seed_and_device", pick_with_a_gpu_present)
    run_of(module, [*RUNS[script], "--no-cuda", "--eval-episodes", "0"], tmp_path)
    assert picked == ["cpu"]


@pytest.mark.parametrize("run", RUNS)
def test_without_a_flag_an_image_goes_to_the_gpu_and_a_flat_observation_to_the_cpu(
        run, tmp_path, monkeypatch, capsys):
    # Neither --cuda nor --no-cuda, a GPU present (pretended while the device is picked): the
    # CPU for a flat observation's small network, which trains faster on one CPU thread
    # (results.md, "On a GPU"), the GPU for MinAtar's images; the first line says which.
    module, flags = module_of(run.split()[0]), RUNS[run]
    picked, seed_and_device = [], module.seed_and_device

    def pick_with_a_gpu_present(*args, **kwargs):
        with monkeypatch.context() as m:
            m.setattr(torch.cuda, "is_available", lambda: True)
            picked.append(seed_and_device(*args, **kwargs).type)
        return torch.device("cpu")

    monkeypatch.setattr(module, "seed_and_device", pick_with_a_gpu_present)
    run_of(module, [*flags, "--eval-episodes", "0"], tmp_path)
    first = capsys.readouterr().out.splitlines()[0]
    script = run.split()[0]
    if "MinAtar" in run:
        assert picked == ["cuda"] and first == f"{script}: device cuda"
    else:
        assert picked == ["cpu"] and first == f"{script}: device cpu"


@pytest.mark.parametrize("cuda, image, present, device", [
    (None, False, False, "cpu"), (None, False, True, "cpu"), (None, True, False, "cpu"),
    (None, True, True, "cuda"), (True, False, True, "cuda"), (True, True, False, "cpu"),
    (False, True, True, "cpu"), (False, False, False, "cpu"),
])
def test_the_device_by_the_flag_the_observation_and_the_gpu(cuda, image, present, device,
                                                            monkeypatch, capsys):
    # seed_and_device alone (stamped alike into every torch script): the flag wins where it
    # is given; without it, the observation decides; a GPU that is absent is never picked
    module = module_of("ppo.py")
    monkeypatch.setattr(torch.cuda, "is_available", lambda: present)
    threads = torch.get_num_threads()
    try:
        assert module.seed_and_device(3, cuda, threads=2, image=image).type == device
        assert torch.get_num_threads() == (2 if device == "cpu" else threads)
    finally:
        torch.set_num_threads(threads)
    assert capsys.readouterr().out == f"ppo.py: device {device}\n"


# ---------------------------------------------------------------------------------------
# The rules themselves, on a pretend GPU and, where there is one, on a real one
# ---------------------------------------------------------------------------------------
def fill(target, value, index):
    """target[index] = value, as an expression (for the lambdas below)."""
    target[index] = value


# what a GPU does with a GPU tensor g [4, 3] and a CPU tensor c [4, 3]: runs (True) or raises
CASES = {
    "g + c": (lambda g, c: g + c, False),
    "g + c.sum() (a 0-dim CPU tensor)": (lambda g, c: g + c.sum(), True),
    "g[0] = c[0]": (lambda g, c: fill(g, c[0], 0), True),
    "g[cpu index] = c[:2]": (lambda g, c: fill(g, c[:2], torch.tensor([0, 2])), False),
    "g[cpu index] = c[:2].to(g.device)": (
        lambda g, c: fill(g, c[:2].to(g.device), torch.tensor([0, 2])), True),
    "g[cpu index] and g[cpu mask]": (lambda g, c: (g[torch.tensor([0, 2])], g[c[:, 0] > 3]), True),
    "g.copy_(c)": (lambda g, c: g.copy_(c), True),
    "g.numpy()": (lambda g, c: g.numpy(), False),
    "np.asarray(g)": (lambda g, c: np.asarray(g), False),
    "g.cpu().numpy() and g.sum().item()": (lambda g, c: (g.cpu().numpy(), g.sum().item()), True),
    "g.index_select(0, cpu index)": (lambda g, c: g.index_select(0, torch.tensor([1])), False),
    "torch.cat([g, c])": (lambda g, c: torch.cat([g, c]), False),
    "g + torch.as_tensor(array)": (lambda g, c: g + torch.as_tensor(np.ones(3)), False),
    "g + torch.from_numpy(array).to(g.device)": (
        lambda g, c: g + torch.from_numpy(np.ones(3)).to(g.device), True),
    "Linear on the GPU of a CPU input": (
        lambda g, c: torch.nn.Linear(3, 2).to(g.device)(c), False),
    "torch.randint on the GPU from a CPU generator": (
        lambda g, c: torch.randint(3, (2,), generator=torch.Generator(), device=g.device), False),
}


@pytest.mark.parametrize("gpu", ["pretend", pytest.param("real", marks=pytest.mark.skipif(
    not torch.cuda.is_available(), reason="no GPU here"))])
@pytest.mark.parametrize("case", CASES)
def test_the_pretend_gpu_refuses_what_a_gpu_refuses(case, gpu, monkeypatch):
    operation, runs = CASES[case]
    with pretend_gpu(monkeypatch) if gpu == "pretend" else contextlib.nullcontext():
        g, c = torch.ones(4, 3, device="cuda"), torch.arange(12.0).reshape(4, 3)
        try:
            operation(g, c)
            ran = True
        except (RuntimeError, TypeError):
            ran = False
    assert ran == runs


# ---------------------------------------------------------------------------------------
# A real GPU, where there is one (pytest -s prints the steps per second)
# ---------------------------------------------------------------------------------------
def with_steps(flags, steps):
    """The flags with --total-timesteps set to steps."""
    at = flags.index("--total-timesteps")
    return [*flags[:at], "--total-timesteps", str(steps), *flags[at + 2:]]


def steps_per_second(summary):
    return summary["global_steps"] / summary["wall_time_s"]


@pytest.mark.skipif(not torch.cuda.is_available(), reason="no GPU here")
@pytest.mark.parametrize("script", sorted({run.split()[0] for run in RUNS}))
def test_a_run_on_a_real_gpu_and_its_model_on_a_machine_without_one(script, tmp_path):
    module = module_of(script)
    if not has_cuda_flag(module):
        pytest.skip(f"{script} has no --cuda")
    flags = [*with_steps(RUNS[script], 512), "--eval-episodes", "1"]
    on_gpu, folder = run_of(module, [*flags, "--cuda", "--save-model"], tmp_path / "gpu")
    with open(os.path.join(folder, "config.json")) as f:
        assert json.load(f)["device"].startswith("cuda")
    on_cpu, _ = run_of(module, [*flags, "--no-cuda"], tmp_path / "cpu")
    print(f"\n{script}: {steps_per_second(on_gpu):,.0f} steps/s with --cuda, "
          f"{steps_per_second(on_cpu):,.0f} with --no-cuda ({on_gpu['global_steps']} steps)")

    # The GPU's model.pt, evaluated in a process that sees no GPU
    evaluated = subprocess.run(
        [sys.executable, script_path(script), "--eval-checkpoint", os.path.join(folder, "model.pt"),
         "--no-cuda", "--eval-episodes", "1", "--output-dir", str(tmp_path / "eval")],
        capture_output=True, text=True, env={**os.environ, "CUDA_VISIBLE_DEVICES": ""})
    assert evaluated.returncode == 0, evaluated.stderr
    (summary,) = glob.glob(os.path.join(tmp_path, "eval", "*", "summary.json"))
    with open(summary) as f:
        evaluated = json.load(f)
    assert evaluated["eval_return_mean"] == pytest.approx(on_gpu["eval_return_mean"], rel=1e-3)

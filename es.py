# From plainrl (MIT licence, (c) 2026 the plainrl authors): keep this line in a copy.
"""Evolution strategies (OpenAI ES) with parallel workers that share only seeds and returns.

ES treats the policy's parameters as one flat vector theta and improves the expected return
of a Gaussian cloud of policies around it, with no gradient of the return and no value
function. Each generation it perturbs theta with n Gaussian noise vectors, plays each
perturbed (deterministic) policy for whole episodes, and moves theta towards the noise of the
members that did better. The members are played in parallel by worker processes.

Key equations (generation with members i = 1..n, returns F_i):

    eps_i ~ N(0, I)                       with --antithetic, pairs eps_{2j} = -eps_{2j+1}
    F_i   = return of the policy theta + sigma * eps_i (mean over --episodes-per-member)
    F~    = shaped F: centered ranks rank(F_i) / (n - 1) - 0.5 (tied returns share their
            mean rank), or z-scores, or F itself
    g     = 1 / (n * sigma) * sum_i F~_i * eps_i          (estimates grad E[F(theta + sigma eps)])
    theta <- theta + optimizer(g - (l2_coef / sigma) * theta)    (SGD or Adam, ascending)

Training needs no gradients, so the networks are NumPy matrices; torch is imported only to
write and read model.pt (with weights_only=True) and there is no --cuda flag.

Papers:
    Salimans, Ho, Chen, Sidor & Sutskever 2017, "Evolution Strategies as a Scalable
        Alternative to Reinforcement Learning", arXiv:1703.03864
        (code: github.com/openai/evolution-strategies-starter)
    Wierstra, Schaul, Glasmachers, Sun, Peters & Schmidhuber 2014, "Natural Evolution
        Strategies", JMLR 15
    Kingma & Ba 2015, "Adam: A Method for Stochastic Optimization", ICLR 2015

Run:
    python es.py --env-id CartPole-v1
    python es.py --policy linear --backend ray --ray-address auto   # on a Ray cluster (README)
    python es.py --env-id Pendulum-v1 --total-timesteps 3000000   # the Pendulum settings

Writes runs/<env_id>__es__<seed>__<unix_time>/ (plainrl's CONTRIBUTING.md, "What a run writes"):
episodes.csv has a row per member episode, updates.csv a row per generation.
"""

# ---------------------------------------------------------------------------------------
# Imports
# ---------------------------------------------------------------------------------------
import contextlib
import math
import multiprocessing.connection
import os
import random
import socket
import threading
import traceback
from dataclasses import dataclass, replace
from typing import Literal, Optional

import gymnasium as gym
import numpy as np
import torch
import tyro
from gymnasium.wrappers.utils import RunningMeanStd

SCRIPT = os.path.basename(__file__)


# ---------------------------------------------------------------------------------------
# Flags
# ---------------------------------------------------------------------------------------
@dataclass
class Args:
    env_id: str = "CartPole-v1"
    """a Gymnasium id (or module:EnvId) with Discrete or bounded Box actions, flat observations"""
    seed: int = 1
    """seeds Python, NumPy (theta, every member's noise) and the environments"""
    total_timesteps: int = 500_000
    """the budget in environment steps of all members; the generation that reaches it is finished"""
    exp_name: str = os.path.splitext(SCRIPT)[0]
    """the experiment name, part of the run folder's name"""
    eval_episodes: int = 10
    """greedy evaluation episodes of theta after training (0 skips evaluation)"""
    eval_every: int = 0
    """also evaluate theta every N environment steps, after a generation (0: only at the end)"""
    stop_at_return: Optional[float] = None
    """stop after the generation in which the mean of the last 20 member returns reaches this"""

    # Algorithm. A flag left at None takes the value of the environment's preset (PRESETS).
    preset: tyro.conf.DisallowNone[Optional[Literal["discrete", "continuous"]]] = None
    """the settings of the flags left at None (None: the environment's family, PRESETS)"""
    # The authors' Humanoid runs played 10,000 episodes a generation.
    population_size: int = 32
    """n: perturbed policies per generation (even with --antithetic)"""
    sigma: tyro.conf.DisallowNone[Optional[float]] = None
    """standard deviation of the parameter noise (0.02 in the authors' Humanoid configuration)"""
    learning_rate: tyro.conf.DisallowNone[Optional[float]] = None
    """step size of the optimizer (Adam 0.01 in the authors' Humanoid configuration)"""
    optimizer: Literal["adam", "sgd"] = "adam"
    """Adam or plain SGD (no momentum), both ascending the ES gradient"""
    # The authors' l2coeff.
    l2_coef: tyro.conf.DisallowNone[Optional[float]] = None
    """weight decay: the step follows g - (l2_coef / sigma) * theta (0.005 in the authors' code)"""
    antithetic: bool = True
    """mirrored sampling: the members come in pairs theta + sigma*eps, theta - sigma*eps"""
    fitness_shaping: Literal["centered-rank", "zscore", "none"] = "centered-rank"
    """what returns become before the gradient: centered ranks in [-0.5, 0.5], z-scores, or raw"""
    episodes_per_member: tyro.conf.DisallowNone[Optional[int]] = None
    """episodes each member plays; its fitness is their mean return"""
    num_workers: Optional[int] = None
    """workers that play the members (default: the CPUs); 1 process worker is this process"""
    backend: Literal["process", "ray"] = "process"
    """the workers: processes of this machine, or Ray actors (of a cluster with --ray-address)"""
    ray_address: Optional[str] = None
    """--backend ray: the cluster to join ("auto": what `ray start` began); none: a new one here"""
    policy: Literal["mlp", "linear"] = "mlp"
    """the policy network: an MLP with tanh hidden layers, or linear"""
    hidden_sizes: tuple[int, ...] = (32,)
    """widths of the MLP's hidden layers (256 256 in the authors' Humanoid configuration)"""
    # As the authors do; the statistics are kept in model.pt.
    norm_obs: bool = False
    """normalize observations by the members' running mean and variance, clip to [-5, 5]"""


# The presets of the flags left at None, by the environment's family (family(), below the
# banner). A flag given overrides its preset.
PRESETS = {
    # Chosen on CartPole-v1 to solve it in minutes on a laptop
    "discrete": ("plainrl's CartPole settings", dict(
        sigma=0.05, learning_rate=0.05, l2_coef=0.005, episodes_per_member=1)),
    # Chosen on Pendulum-v1: wider noise, a faster rate, two episodes per member (results.md)
    "continuous": ("plainrl's Pendulum settings", dict(
        sigma=0.3, learning_rate=0.1, l2_coef=0.0015, episodes_per_member=2)),
}


# ---------------------------------------------------------------------------------------
# The math
# ---------------------------------------------------------------------------------------
def centered_ranks(x):
    """Fitness shaping by rank (Salimans et al. 2017; Wierstra et al. 2014): each of the n
    values becomes its rank, scaled to [-0.5, 0.5]; tied values share their mean rank.

        y_i = rank(x_i) / (n - 1) - 0.5,   rank(x_i) = #{j: x_j < x_i} + (#{j: x_j = x_i} - 1) / 2

    so rank(min) = 0 and rank(max) = n - 1 when they are unique. x is [n] (a list or an array),
    n >= 2; returns a NumPy [n] of floats that sum to 0. Only the order of the returns counts,
    so one lucky episode cannot dominate a step. Deviation: the authors' code ranks ties by
    argsort's order; with mean ranks a mirrored pair that scores the same cancels, and a
    generation in which every member ties gives g = 0, so the optimizer is given the weight
    decay alone."""
    x = np.asarray(x, dtype=np.float64)
    ordered = np.sort(x)
    below = np.searchsorted(ordered, x, side="left")      # #{j: x_j < x_i}
    up_to = np.searchsorted(ordered, x, side="right")     # #{j: x_j <= x_i}
    ranks = (below + up_to - 1) / 2                       # the mean of ranks below .. up_to - 1
    return ranks / (len(x) - 1) - 0.5


def shape_fitness(returns, method):
    """The returns [n] shaped by `method`: "centered-rank" (see centered_ranks), "zscore"
    ((F - mean F) / (std F + 1e-8)) or "none" (F unchanged)."""
    returns = np.asarray(returns, dtype=np.float64)
    if method == "centered-rank":
        return centered_ranks(returns)
    if method == "zscore":
        return (returns - returns.mean()) / (returns.std() + 1e-8)
    return returns


def es_gradient(fitness, noise, sigma):
    """The ES estimate of the gradient of E[F(theta + sigma * eps)] from n members:

        g = 1 / (n * sigma) * sum_i F_i * eps_i

    fitness is a NumPy [n] (shaped returns), noise [n, d] holds each member's eps_i (a mirrored
    pair has rows eps and -eps, so it adds (F+ - F-) * eps); returns g, a NumPy [d]. The sum runs
    member by member in a fixed order, so every process computes the same bits."""
    gradient = np.zeros(noise.shape[1])
    for f, eps in zip(fitness, noise):
        gradient += f * eps
    return gradient / (len(fitness) * sigma)


def member_noise(seed, dim):
    """eps ~ N(0, I) of dimension d, regenerated from its integer seed alone: the same seed
    gives the same vector in any process."""
    return np.random.default_rng(seed).standard_normal(dim)


def sample_population(rng, population_size, antithetic):
    """The noise seeds and signs [n] of one generation's members, drawn from the main
    generator rng. With antithetic sampling, members 2j and 2j+1 share a seed with signs
    +1 and -1, so their perturbations are eps_j and -eps_j (n must be even)."""
    if antithetic:
        seeds = np.repeat(rng.integers(0, 2**31 - 1, population_size // 2), 2)
        signs = np.tile([1.0, -1.0], population_size // 2)
    else:
        seeds = rng.integers(0, 2**31 - 1, population_size)
        signs = np.ones(population_size)
    return seeds, signs


class SGD:
    """Plain stochastic gradient ascent: theta <- theta + lr * g."""

    def __init__(self, dim, lr):
        self.lr = lr

    def step(self, theta, gradient):
        theta += self.lr * gradient


class Adam:
    """Adam (Kingma & Ba 2015), ascending: for gradient g at step k,

        m <- beta1 * m + (1 - beta1) * g          v <- beta2 * v + (1 - beta2) * g^2
        theta <- theta + lr * (m / (1 - beta1^k)) / (sqrt(v / (1 - beta2^k)) + eps)
    """

    def __init__(self, dim, lr, betas=(0.9, 0.999), eps=1e-8):
        self.lr, self.betas, self.eps, self.k = lr, betas, eps, 0
        self.m, self.v = np.zeros(dim), np.zeros(dim)

    def step(self, theta, gradient):
        beta1, beta2 = self.betas
        self.k += 1
        self.m = beta1 * self.m + (1 - beta1) * gradient
        self.v = beta2 * self.v + (1 - beta2) * gradient**2
        m_hat, v_hat = self.m / (1 - beta1**self.k), self.v / (1 - beta2**self.k)
        theta += self.lr * m_hat / (np.sqrt(v_hat) + self.eps)


class EvolutionStrategy:
    """theta and its optimizer. The main process holds one, and every worker a replica that
    receives the same updates, so each can rebuild any member's parameters from a seed."""

    def __init__(self, theta, sigma, learning_rate, optimizer="adam", l2_coef=0.0,
                 fitness_shaping="centered-rank"):
        self.theta = np.array(theta, dtype=np.float64)
        self.sigma, self.l2_coef, self.fitness_shaping = sigma, l2_coef, fitness_shaping
        self.optimizer = (Adam if optimizer == "adam" else SGD)(len(self.theta), learning_rate)

    def member(self, seed, sign):
        """A member's parameters theta + sign * sigma * eps(seed); sign 0 is theta itself."""
        if sign == 0:
            return self.theta
        return self.theta + sign * self.sigma * member_noise(seed, len(self.theta))

    def update(self, seeds, signs, returns):
        """One ES step from a generation's seeds, signs and returns [n]; returns g. The decay
        is divided by sigma to put l2_coef on the authors' scale: their l2coeff (0.005 in
        their code and here) goes with a gradient that leaves out the 1/sigma, g_ref = sigma *
        g, and their step follows g_ref - l2coeff * theta, sigma times the direction here: for
        Adam, which ignores the gradient's scale, the same step; their SGD (with momentum 0.9,
        ours has none) steps by stepsize = our --learning-rate / sigma."""
        noise = np.stack([sign * member_noise(seed, len(self.theta))
                          for seed, sign in zip(seeds, signs)])
        gradient = es_gradient(shape_fitness(returns, self.fitness_shaping), noise, self.sigma)
        self.optimizer.step(self.theta, gradient - self.l2_coef / self.sigma * self.theta)
        return gradient


# ---------------------------------------------------------------------------------------
# Networks
# ---------------------------------------------------------------------------------------
class Policy:
    """A deterministic policy whose parameters are one flat vector theta: layers of
    sizes [obs_dim, *hidden_sizes, out] with tanh between them (no hidden layer: linear).
    Discrete actions are the argmax of the outputs; Box actions are tanh of the outputs
    scaled to the bounds, low + (tanh(y) + 1) / 2 * (high - low).

    theta holds, layer after layer, the weight matrix [in, out] row-major and then the bias
    [out]."""

    def __init__(self, obs_dim, action_space, hidden_sizes=()):
        self.continuous = isinstance(action_space, gym.spaces.Box)
        out = action_space.shape[0] if self.continuous else int(action_space.n)
        self.sizes = [obs_dim, *hidden_sizes, out]
        self.num_params = sum((i + 1) * o for i, o in zip(self.sizes, self.sizes[1:]))
        if self.continuous:
            self.low, self.high = action_space.low, action_space.high

    def initial_theta(self, rng):
        """Weights ~ N(0, 1 / fan_in), the last layer's scaled by 0.1; biases 0."""
        parts = []
        for k, (i, o) in enumerate(zip(self.sizes, self.sizes[1:])):
            scale = (0.1 if k == len(self.sizes) - 2 else 1.0) / math.sqrt(i)
            parts += [rng.standard_normal(i * o) * scale, np.zeros(o)]
        return np.concatenate(parts)

    def layers(self, theta):
        """theta [num_params] as a list of (W [in, out], b [out]), views into theta."""
        layers, start = [], 0
        for i, o in zip(self.sizes, self.sizes[1:]):
            w = theta[start:start + i * o].reshape(i, o)
            b = theta[start + i * o:start + (i + 1) * o]
            layers.append((w, b))
            start += (i + 1) * o
        return layers

    def act(self, layers, obs):
        """The action for one (normalized) observation [obs_dim]."""
        h = obs
        for w, b in layers[:-1]:
            h = np.tanh(h @ w + b)
        w, b = layers[-1]
        y = h @ w + b
        if self.continuous:
            return self.low + (np.tanh(y) + 1.0) * 0.5 * (self.high - self.low)
        return int(y.argmax())


# ---------------------------------------------------------------------------------------
# What the agent sees: episodes cut where there is no time limit, normalized observations
# ---------------------------------------------------------------------------------------
EPISODE_STEP_LIMIT = 10_000
"""episodes of environments without a time limit are cut here: a deterministic policy can
balance or walk in a circle forever"""

OBS_CLIP = 5.0
"""normalized observations are clipped to [-5, 5], as in Salimans et al.'s code"""


def make_env(env_id, video_folder=None, name_prefix="eval"):
    """One environment, cut at EPISODE_STEP_LIMIT steps if it has no time limit (the return
    of a cut episode is what it collected until then); filmed into video_folder (its first
    episode). A worker's records its episode returns (RecordEpisodeStatistics)."""
    if video_folder is not None:
        os.environ.setdefault("SDL_VIDEODRIVER", "dummy")  # frames only, no window to open
    env = gym.make(env_id, **({"render_mode": "rgb_array"} if video_folder else {}))
    if env.spec.max_episode_steps is None:
        env = gym.wrappers.TimeLimit(env, EPISODE_STEP_LIMIT)
    if video_folder is not None:
        env = gym.wrappers.RecordVideo(env, video_folder, name_prefix=name_prefix,
                                       episode_trigger=lambda episode: episode == 0)
    return env


def make_vector_env(env_id, num_envs, video_folder=None):
    """The evaluation's environments: num_envs of make_env's (environment i films as eval-i)
    in one synchronous vector environment, with SAME_STEP autoreset and the episode statistics
    recorded by Gymnasium's wrapper."""
    envs = gym.vector.SyncVectorEnv(
        [lambda i=i: make_env(env_id, video_folder, f"eval-{i}") for i in range(num_envs)],
        autoreset_mode=gym.vector.AutoresetMode.SAME_STEP)
    return gym.wrappers.vector.RecordEpisodeStatistics(envs)


def normalize(obs, obs_stats):
    """(obs - mean) / std clipped to [-OBS_CLIP, OBS_CLIP]; obs unchanged if obs_stats is None."""
    if obs_stats is None:
        return obs
    return np.clip((obs - obs_stats[0]) / obs_stats[1], -OBS_CLIP, OBS_CLIP)


class ObsNormalizer:
    """The running mean and variance of all members' observations (Gymnasium's
    RunningMeanStd). They stay frozen during a generation: frozen() is what the members play
    with, (mean, sqrt(var + 1e-8)), or None when disabled; after the generation the members'
    moments are merged in member order, the same in every process layout. Theta's own
    episodes and the evaluations play with the frozen statistics and add nothing to them."""

    def __init__(self, shape, enabled):
        self.enabled = enabled
        self.rms = RunningMeanStd(shape=shape)

    def frozen(self):
        return (self.rms.mean.copy(), np.sqrt(self.rms.var + 1e-8)) if self.enabled else None

    def update(self, moments):
        for mean, var, count in moments:
            self.rms.update_from_moments(mean, var, count)

    def state_dict(self):
        return {"mean": torch.as_tensor(self.rms.mean), "var": torch.as_tensor(self.rms.var),
                "count": float(self.rms.count)}

    def load_state_dict(self, state):
        self.rms.mean = state["mean"].numpy().astype(np.float64)
        self.rms.var = state["var"].numpy().astype(np.float64)
        self.rms.count = state["count"]


# ---------------------------------------------------------------------------------------
# Training
# ---------------------------------------------------------------------------------------
def play_episodes(env, policy, layers, obs_stats, env_seeds, record_obs=False):
    """Play one episode per environment seed with fixed parameters `layers`; returns
    (returns, lengths, moments), moments being the (mean, var, count) of the raw
    observations seen when record_obs, else None."""
    returns, lengths, seen = [], [], []
    for env_seed in env_seeds:
        obs, _ = env.reset(seed=int(env_seed))
        done = False
        while not done:
            if record_obs:
                seen.append(obs)
            action = policy.act(layers, normalize(obs, obs_stats))
            obs, _, terminated, truncated, info = env.step(action)
            done = terminated or truncated
        returns.append(float(info["episode"]["r"]))
        lengths.append(int(info["episode"]["l"]))
    moments = None
    if record_obs:
        seen = np.asarray(seen, dtype=np.float64)
        moments = (seen.mean(axis=0), seen.var(axis=0), len(seen))
    return returns, lengths, moments


def play_task(env, policy, strategy, obs_stats, task):
    """Play one task (seed, sign, env_seeds): the member theta + sign * sigma * eps(seed),
    or theta itself when sign is 0, whose observations are not recorded."""
    seed, sign, env_seeds = task
    layers = policy.layers(strategy.member(seed, sign))
    return play_episodes(env, policy, layers, obs_stats, env_seeds,
                         record_obs=obs_stats is not None and sign != 0)


def train(args, strategy, normalizer, workers, run, rng):
    """The ES loop: whole generations until the budget, --stop-at-return or a theta that is
    no longer finite. Each generation samples the population, plays its members on the
    workers, shapes their fitness, and steps theta (and every worker's replica of it).

    Every worker (a process, or a Ray actor with --backend ray) holds its own theta and
    optimizer; it gets a member as an integer seed and a sign, regenerates eps_i itself and
    sends back the return. Only seeds and returns (and, with --norm-obs, the observation
    statistics) travel, never a noise vector or theta; each member's noise and start states
    come from the main generator and the returns come back in member order, so results
    depend on the seed alone, not on --num-workers or on which worker plays which member.
    An episode ends at a termination or a time limit, its return what was collected until
    then (ES needs no bootstrap). The budget counts the members' steps; theta's own episode
    each generation (theta_return in updates.csv), like the evaluation's, is not counted.
    run (RunWriter, below the banner) writes the run folder: step(n) prints progress and
    evaluates, episode/update add a CSV row, reached/non_finite say when to stop."""
    global_step, generation, solved = 0, 0, False
    while global_step < args.total_timesteps and not solved:
        generation += 1
        # Sample the population: noise seeds and signs; start states shared by all members
        seeds, signs = sample_population(rng, args.population_size, args.antithetic)
        env_seeds = rng.integers(0, 2**31 - 1, args.episodes_per_member).tolist()
        tasks = [(seed, sign, env_seeds) for seed, sign in zip(seeds, signs)]
        tasks.append((0, 0.0, env_seeds[:1]))  # theta itself, one episode, for the log

        # Play the members with the observation statistics frozen for the generation; then
        # (--norm-obs) merge the members' observation moments into them, theta's not.
        results = workers.play(tasks, normalizer.frozen())
        (theta_return,), _, _ = results.pop()
        fitness = [np.mean(returns) for returns, _, _ in results]
        for returns, lengths, _ in results:  # in member order
            for episode_return, length in zip(returns, lengths):
                global_step += length
                run.episode(global_step, episode_return, length)
                solved = solved or run.reached(args.stop_at_return, global_step)
        if args.norm_obs:
            normalizer.update(moments for _, _, moments in results)

        # Shape the fitness, estimate g and step theta; every worker's replica does the same
        gradient = strategy.update(seeds, signs, fitness)
        theta_norm = float(np.linalg.norm(strategy.theta))
        if run.non_finite(theta_norm, global_step):  # says so; the run stops as interrupted
            return
        workers.update(seeds, signs, fitness)

        # Log the generation; evaluate the new theta where --eval-every says
        run.update(global_step, generation=generation, fitness_mean=float(np.mean(fitness)),
                   fitness_max=float(np.max(fitness)), fitness_min=float(np.min(fitness)),
                   theta_return=theta_return, theta_norm=theta_norm,
                   grad_norm=float(np.linalg.norm(gradient)))
        run.step(global_step)  # progress line; evaluation every --eval-every


def main(args: Args) -> dict:
    """Train with ES (or evaluate an --eval-checkpoint), write the run folder, return the
    summary. Ctrl-C stops training; the run folder is written, then KeyboardInterrupt goes on
    up (a run whose workers have all died stops the same way, and returns)."""
    # Check everything a user can get wrong before anything runs: one line, exit status 2.
    obs_shape, action_space = check_env(args)
    args = fill_preset(args, family(obs_shape, isinstance(action_space, gym.spaces.Box)))
    check_args(args)
    args, checkpoint = load_checkpoint(args)  # the network's flags come from a checkpoint
    own_ray = checkpoint is None and args.backend == "ray" and starts_ray(args)  # then stopped
    try:
        if checkpoint is None:  # no more workers than the cores (or Ray's CPUs) and members
            args = replace(args, num_workers=worker_count(args))

        # Set up: seeds, the policy and theta, the observation normalizer, the run folder.
        random.seed(args.seed)
        np.random.seed(args.seed)
        rng = np.random.default_rng(args.seed)  # theta, every member's noise and start states
        policy = Policy(obs_shape[0], action_space,
                        args.hidden_sizes if args.policy == "mlp" else ())
        normalizer = ObsNormalizer(obs_shape, args.norm_obs)
        strategy = EvolutionStrategy(policy.initial_theta(rng), args.sigma, args.learning_rate,
                                     args.optimizer, args.l2_coef, args.fitness_shaping)
        models = {"theta": Theta(policy, strategy), "obs_rms": normalizer}  # what model.pt holds
        if checkpoint is not None:
            restore(checkpoint, models, args)
        run = RunWriter(args, "cpu", models, note=f", {policy.num_params} parameters")

        # Train (unless evaluating a checkpoint) on the workers, then finish: evaluate, save, plot.
        if checkpoint is None:
            print(f"{SCRIPT}: population {args.population_size}, {args.num_workers} "
                  f"{args.backend} worker(s); training runs whole generations: the one whose "
                  f"episodes reach --total-timesteps {args.total_timesteps:,} is finished")
        workers = None if checkpoint else start_workers(args, policy, strategy)

        def train_on_the_workers():
            try:
                train(args, strategy, normalizer, workers, run, rng)
            except WorkersLost:  # said by the workers; the run stops as after Ctrl-C, and returns
                run.summary["interrupted"] = True
        return train_and_finish(run, train_on_the_workers, workers)
    finally:  # however the run ends, Ctrl-C included: no Ray process it started outlives it
        if own_ray:
            stop_ray()


# ---------------------------------------------------------------------------------------
# Plumbing: checks, run folder, evaluation, checkpoints (not needed to follow the algorithm)
# ---------------------------------------------------------------------------------------
# Stamped from plainrl's plumbing/common.py by its stamp.py: edit it there, not here.
# The plumbing's own imports (the story's are at the top of the file)
import csv
import difflib
import glob
import importlib.util
import json
import math
import os
import random
import re
import signal
import sys
import time
import typing
import warnings
from dataclasses import asdict, dataclass, replace
from typing import Optional

import gymnasium as gym
import numpy as np
import tyro
import torch
from torch.utils.tensorboard import SummaryWriter


@dataclass
class RunFlags:
    """The flags of the run folder that every script has, declared once: Args below adds them
    after the script's own, and --help lists them last."""
    output_dir: str = "runs"
    """where run folders go"""
    save_model: bool = False
    """write the model into the run folder (model.pt; a table's: model.npz)"""
    eval_checkpoint: Optional[str] = None
    """skip training: load this model.pt (or model.npz) and evaluate it"""
    capture_video: bool = False
    """record the evaluation episodes into videos/ in the run folder"""
    tensorboard: bool = True
    """write TensorBoard's event files into the run folder too (tensorboard --logdir runs)"""
    curve: bool = os.environ.get("PLAINRL_CURVE") != "0"
    """draw curve.png, the learning curve, into the run folder at the end of training"""
    track: bool = False
    """sync the run to Weights & Biases as CleanRL does (needs pip install wandb==0.31.0)"""
    wandb_project_name: str = "plainrl"
    """the Weights & Biases project of --track"""
    wandb_entity: Optional[str] = None
    """the Weights & Biases team or user of --track (None: your default entity)"""


@dataclass
class Args(RunFlags, Args):  # the script's Args first, RunFlags' after: the one Args all use
    pass


def family(obs_shape, continuous):
    """The environment's family, which picks a script's preset: "image" for an observation of
    three axes (height, width, channels), else "continuous" for Box actions, else "discrete"."""
    return "image" if len(obs_shape) == 3 else "continuous" if continuous else "discrete"


def fill_preset(args, family):
    """args with --preset the family unless it is given, and every flag left at None taken
    from PRESETS[preset] = (its source, {flag: value}): a flag given on the command line wins."""
    preset = args.preset or family
    flags = PRESETS[preset][1]
    return replace(args, preset=preset,
                   **{name: value for name, value in flags.items() if getattr(args, name) is None})


class UsageError(Exception):
    """Bad input: reported as one line on stderr with exit status 2, before training."""


def fail(message):
    raise UsageError(message)


def parse_args():
    """tyro.cli(Args), with a mistake on the command line (an unknown flag, a missing value,
    a value of the wrong type or not among the choices) as one whole line at any terminal
    width: tyro hands the mistake over as data through its parse-error hook (tyro._errors,
    marked experimental, which is one reason requirements.txt pins tyro), and usage_error
    words it. --help prints as tyro writes it."""
    with tyro._errors.on_parse_error(usage_error):
        return tyro.cli(Args)


def usage_error(event):
    """Raise UsageError with one line for a tyro parse error: the flag, what it takes, and
    what to write instead (the closest flags to an unknown one; 100000 for 1e5)."""
    types = typing.get_type_hints(Args)
    flags = [f"--{name.replace('_', '-')}" for name in types]
    flags += [f"--no-{name.replace('_', '-')}" for name, kind in types.items()
              if kind is bool and not name.startswith("no_")]  # not --no-no-mask
    help_hint = f"(python {SCRIPT} --help lists the flags)"
    if isinstance(event, tyro._errors.UnrecognizedArgs):
        close = difflib.get_close_matches(event.tokens[0].partition("=")[0], flags, n=2)
        also = f"; did you mean {' or '.join(close)}?" if close else ""
        fail(f"unrecognized options: {', '.join(event.tokens)}{also} {help_hint}")
    if getattr(event, "argument", None) is None:
        fail(f"cannot read the command line ({type(event).__name__}) {help_hint}")
    flag = event.argument.display_name().split("/")[0]
    if isinstance(event, tyro._errors.InvalidChoice):  # in the order the Literal gives them
        kind = types.get(flag[2:].replace("-", "_"))
        literal = [a for a in (kind, *typing.get_args(kind))
                   if typing.get_origin(a) is typing.Literal]
        choices = [str(c) for c in typing.get_args(literal[0])] if literal else event.choices
        fail(f"{flag} takes {' or '.join(choices)}, not {event.value!r} {help_hint}")
    words = sys.argv[1:]
    starts = [i for i, w in enumerate(words) if w.partition("=")[0] == flag]
    if not starts or isinstance(event, tyro._errors.BadValue):
        fail(f"{flag} needs a value {help_hint}")
    word, rest = words[starts[-1]], words[starts[-1] + 1:] + ["--"]  # the last time it is given
    given = ([word.partition("=")[2]] if "=" in word else  # a list flag takes several values
             rest[:next(j for j, w in enumerate(rest) if w.startswith("--"))]) or [""]
    kind = types[flag[2:].replace("-", "_")]
    whole = int in (kind, *typing.get_args(kind))

    def reads(value):  # as the flag's type would: int("2.5") fails, float("2.5") does not
        try:
            return (int if whole else float)(value) is not None
        except ValueError:
            return False
    wrong = next((value for value in given if not reads(value)), given[-1])
    try:
        instead = f": write {int(float(wrong))}" if whole and float(wrong).is_integer() else ""
    except ValueError:  # not a number at all
        instead = ""
    fail(f"{flag} takes {'a whole number' if whole else 'a number'}, not {wrong!r}"
         f"{instead} {help_hint}")


def check_args(args):
    """Everything a user can get wrong in the flags, before training: the algorithm's own
    checks (check_flags), then those of the flags every script has. A value the line names
    that the preset gave is said to be the preset's."""
    try:
        check_flags(args)
    except UsageError as e:
        preset = PRESETS[args.preset][1] if getattr(args, "preset", None) else {}
        named = [f"--{k.replace('_', '-')} {v}" for k, v in preset.items()
                 if f"--{k.replace('_', '-')} {v}" in str(e)]
        if not named:
            raise
        fail(f"{e} ({' and '.join(named)}: the {args.preset} preset's; a flag given overrides it)")
    if args.total_timesteps <= 0:
        fail(f"--total-timesteps must be positive, got {args.total_timesteps}")
    if args.eval_episodes < 0:
        fail(f"--eval-episodes must be 0 or more, got {args.eval_episodes}")
    if args.eval_every < 0:
        fail(f"--eval-every must be 0 (evaluate only after training) or more, got {args.eval_every}")
    if args.eval_every and not args.eval_episodes:
        fail("--eval-every needs at least one evaluation episode; pass --eval-episodes 1 or more, "
             "or --eval-every 0")
    if args.capture_video and not args.eval_episodes:
        fail("--capture-video records the evaluation episodes, and --eval-episodes 0 has none; "
             "pass --eval-episodes 1 or more")
    for flag, needed, package in (("capture_video", "moviepy", "moviepy==2.2.1"),
                                  ("track", "wandb", "wandb==0.31.0")):
        if getattr(args, flag) and importlib.util.find_spec(needed) is None:
            fail(f"--{flag.replace('_', '-')} needs {needed}: pip install {package}")
    if args.track and not args.tensorboard:
        fail("--track syncs TensorBoard's event files to Weights & Biases; drop --no-tensorboard")


def check_env(args, make=gym.make):
    """Make the environment once (gym.make imports a module:EnvId id's module itself), hand
    its spaces to check_spaces and return what that returns; with --capture-video, render a
    frame, so that a machine without a display says so now, not after training."""
    env_id = args.env_id
    if env_id.startswith(("ALE/", "MinAtar/")) and make is gym.make:  # ids their packages
        # register, which the scripts that learn from images import (their make_game)
        pixels = ("ppo.py and dqn.py" if env_id.startswith("ALE/")
                  else "ppo.py, dqn.py, pqn.py and impala.py")
        fail(f"{env_id} is a game of images ({pixels} learn from them); {SCRIPT} does not")
    try:
        env = make(env_id)
        obs_space, action_space = env.observation_space, env.action_space
        env.close()
    except UsageError:  # a make of the script's own said it already (a package to install)
        raise
    except Exception as e:  # Gymnasium's own line: the closest id to an unknown one, the
        # extra to install (pinned here to this Gymnasium); or a module of the user's that fails
        message = re.sub(r'"gymnasium\[(\w+)\]"', rf'"gymnasium[\1]=={gym.__version__}"', str(e))
        fail(f"cannot make {env_id}: {type(e).__name__}: {(message.splitlines() or [''])[0]}")
    spaces = check_spaces(args, obs_space, action_space)
    if args.capture_video:
        try:
            with warnings.catch_warnings():  # the line below says it
                warnings.simplefilter("ignore")
                os.environ.setdefault("SDL_VIDEODRIVER", "dummy")  # frames only, no window
                env = make(env_id, render_mode="rgb_array")
                env.reset(seed=0)
                env.render()
                env.close()
        except Exception as e:
            fail(f"cannot record videos of {env_id} ({type(e).__name__}: "
                 f"{(str(e).splitlines() or [''])[0]}); for MuJoCo on a machine without a "
                 "display set MUJOCO_GL=egl")
    return spaces


def seed_and_device(seed, cuda, threads=1, image=False):
    """Seed Python's, NumPy's and torch's random generators (the environments are seeded by
    their reset) and pick the device, printing which and why: --cuda the GPU where one is
    present, --no-cuda the CPU, and neither (cuda None) the GPU for an image's network, the
    CPU for a flat observation's: its small MLP trains faster on one CPU thread than on a
    GPU, measured for every script (results.md, "On a GPU"). On the CPU, `threads` threads."""
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)
    present = torch.cuda.is_available()
    device = torch.device("cuda" if present and (image if cuda is None else cuda) else "cpu")
    if device.type == "cpu":
        torch.set_num_threads(threads)
    if cuda is not None:
        why = "--cuda" if cuda else "--no-cuda"
        why += ", but no GPU is present" if cuda and not present else ""
    elif image:
        why = ("an image's convolutional network goes to the GPU; --no-cuda for the CPU"
               if present else "an image's network, but no GPU is present")
    else:
        why = ("a flat observation's small network trains faster on one CPU thread than on a "
               "GPU" + ("; --cuda for the GPU" if present else ""))
    print(f"{SCRIPT}: device {device}: {why}")
    return device


EVAL_MAX_STEPS = 27_000
"""an evaluation episode still running after this many steps is cut there (its return so
far counts): a greedy policy can balance or walk in a circle forever in an environment
without a time limit. 27,000 steps are ALE's own end of an Atari game (108,000 frames)."""


def evaluate(args, models, video_folder=None):
    """Greedy returns of --eval-episodes episodes, one per environment of a vector env, all
    at once, seeded seed + 100,000 (every evaluation plays the same starts). The actions
    come from the script's greedy_policy; with --eval-epsilon (where a script has it), a
    uniformly random one instead with that probability, from a generator of the
    evaluation's own. A line every 2 seconds says how far it is."""
    episodes, seed = args.eval_episodes, args.seed + 100_000
    flags = {flag: getattr(args, flag) for flag in globals().get("ENV_FLAGS", ())}
    envs = make_vector_env(args.env_id, episodes, video_folder=video_folder, **flags)
    act, epsilon = greedy_policy(models, envs), getattr(args, "eval_epsilon", 0.0)
    obs, info = envs.reset(seed=seed)
    rng = np.random.default_rng(seed)  # epsilon's draws; training's streams stay untouched
    returns, steps, last_print = np.full(episodes, np.nan), 0, time.time()
    while np.isnan(returns).any() and steps < EVAL_MAX_STEPS:
        actions = act(obs, info)
        if epsilon:  # Discrete actions only (check_spaces)
            explore = rng.random(episodes) < epsilon
            actions = np.where(explore, rng.integers(envs.single_action_space.n, size=episodes),
                               actions)
        obs, _, _, _, info = envs.step(actions)
        if "_episode" in info:
            first = info["_episode"] & np.isnan(returns)
            returns[first] = info["episode"]["r"][first]
        steps += 1
        if time.time() - last_print >= 2.0:
            last_print = time.time()
            print(f"{SCRIPT}: evaluating, {episodes - np.isnan(returns).sum()} of {episodes} "
                  f"episodes done, {steps:,} steps")
    if np.isnan(returns).any():
        print(f"{SCRIPT}: evaluation episodes cut at {EVAL_MAX_STEPS:,} steps; give "
              f"{args.env_id} a time limit (max_episode_steps)")
        returns = np.where(np.isnan(returns), envs.episode_returns, returns)
    envs.close()
    return returns


def goal(args):
    """(threshold, window, holds_on, source, budget): what a run is judged on. The script's
    GOALS for the environment (its benchmark task's goal, the README row's, for the task's
    budget of steps), else Gymnasium's reward_threshold (CartPole-v1's 475) over the last 20
    training returns, at any budget; --stop-at-return gives the threshold in place of either,
    at any budget (None). holds_on "train": the mean of the last `window` training returns at
    the end; "eval": the final greedy evaluation; "gain": the final greedy evaluation less the
    one where the run's learning began, summary's start_return (grpo.py's warm start: what
    reinforcement learning added)."""
    name = args.env_id.rpartition(":")[2]
    threshold, window, holds_on, budget = globals().get("GOALS", {}).get(
        name, (None, 20, "train", None))
    source = "GOALS" if threshold is not None else "reward_threshold"
    if threshold is None:
        threshold = getattr(gym.registry.get(name), "reward_threshold", None)
    if args.stop_at_return is not None:
        threshold, source, budget = args.stop_at_return, "--stop-at-return", None
    return threshold, window, holds_on, source, budget


class RunWriter:
    """The run folder (the files the docstring at the top lists): config.json at once, the CSV
    files row by row (flushed, so an interrupted run keeps them) and TensorBoard's events
    from the same rows, a progress line every 2 seconds, the evaluations of --eval-every
    with best_model; finish() writes the rest. `models` names what a checkpoint holds (each
    with state_dict and load_state_dict). Training that runs whole rollouts of
    `rollout_steps` rounds the budget down to them, said at the start."""

    def __init__(self, args, device, models, rollout_steps=1, note=""):
        name = "__".join([args.env_id.replace("/", "-").replace(":", "-"), args.exp_name,
                          str(args.seed), str(int(time.time()))])
        self.path, suffix = os.path.join(args.output_dir, name), 1
        while os.path.exists(self.path):  # a run with the same flags in the same second
            suffix += 1
            self.path = os.path.join(args.output_dir, f"{name}-{suffix}")
        versions = {"gymnasium": gym.__version__, "numpy": np.__version__,
                    "python": sys.version.split()[0]}
        versions["torch"] = torch.__version__
        config = {**asdict(args), "device": str(device), "versions": versions}
        if args.track:  # before the folder and the event files (it syncs those made after it)
            start_tracking(args, os.path.basename(self.path), config)
        try:
            os.makedirs(self.path)
        except OSError as e:
            fail(f"cannot create the run folder {self.path}: {e.strerror}")
        with open(os.path.join(self.path, "config.json"), "w") as f:
            json.dump(config, f, indent=2)
        self.tensorboard = None
        if args.tensorboard:  # TensorBoard's event files get each CSV row too (write_row)
            self.tensorboard = TensorBoardWriter(self.path)
            self.tensorboard.add_text("config", "|flag|value|\n|-|-|\n" + "\n".join(
                f"|{key}|{value}|" for key, value in config.items()))
        threshold, self.window, holds_on, self.source, budget = goal(args)
        self.summary = dict.fromkeys(SUMMARY_KEYS) | {
            "solved_threshold": None if args.eval_checkpoint else threshold,
            "solved_window": self.window, "holds_on": holds_on, "goal_budget": budget,
            "algorithm": args.exp_name, "env_id": args.env_id, "seed": args.seed,
            "global_steps": 0, "eval_episodes": args.eval_episodes, "interrupted": False}
        self.args, self.device, self.models = args, device, models
        self.budget = args.total_timesteps // rollout_steps * rollout_steps
        self.files, self.returns, self.ends, self.evaluations = {}, [], [], []
        self.write_row("episodes.csv")  # its header now: a run with no episode has the file
        self.start = self.last_print = time.time()
        self.first_print, self.last_step = None, 0  # (step, time) of the first progress line
        print(f"{SCRIPT}: {args.env_id}, seed {args.seed}{note}")  # after the device's line
        if getattr(args, "preset", None):  # the settings the environment's family picked
            others = " or ".join(f"--preset {name}" for name in PRESETS if name != args.preset)
            print(f"{SCRIPT}: the {args.preset} preset, {PRESETS[args.preset][0]}; {others} "
                  "for another, a flag for one setting")
        if self.budget != args.total_timesteps and args.eval_checkpoint is None:
            print(f"{SCRIPT}: training runs {self.budget:,} of --total-timesteps "
                  f"{args.total_timesteps:,}: whole rollouts of {rollout_steps:,} steps")

    def elapsed(self):
        return time.time() - self.start

    def write_row(self, filename, **row):
        """Append a row to a CSV file of the run folder, made with a header at first use
        (episodes.csv's columns are fixed; no row writes the header alone), and its values
        to TensorBoard at the row's step and moment."""
        if filename not in self.files:
            f = open(os.path.join(self.path, filename), "w", newline="")
            fields = EPISODE_FIELDS if filename == "episodes.csv" else list(row)
            self.files[filename] = (f, csv.DictWriter(f, fieldnames=fields))
            self.files[filename][1].writeheader()
        f, writer = self.files[filename]
        if row:
            writer.writerow(row)
        if row and self.tensorboard:
            for column, value in row.items():
                if column not in ("global_step", "wall_time") and value != "":  # "": no value
                    name = {**COMMON_NAMES, **TENSORBOARD_NAMES}.get(column, f"charts/{column}")
                    self.tensorboard.add_scalar(name, value, row["global_step"],
                                                self.start + row["wall_time"])
            self.tensorboard.flush()  # as the CSV file: a run that crashes keeps its rows
        f.flush()

    def episode(self, global_step, episode_return, episode_length):
        self.summary["global_steps"] = max(self.summary["global_steps"], global_step)
        self.returns.append(float(episode_return))
        self.ends.append(global_step)  # where it ended, for curve.png
        self.write_row("episodes.csv", global_step=global_step, wall_time=round(self.elapsed(), 4),
                       episode_return=float(episode_return), episode_length=int(episode_length))
        if self.summary["holds_on"] != "gain":  # a gain is measured once, at the end
            self.reached(self.summary["solved_threshold"], global_step)  # records when

    def update(self, global_step, **diagnostics):
        wall_time = self.elapsed()
        self.write_row("updates.csv", global_step=global_step, wall_time=round(wall_time, 4),
                       sps=int(global_step / wall_time), **diagnostics)
        self.measure(global_step, "update")

    def step(self, global_step):
        """After each environment step: record the step count (should Ctrl-C stop the run),
        evaluate each time global_step crosses a multiple of --eval-every, and print the
        progress line every 2 seconds, its speed measured from the first line on (the first
        seconds hold the start-up), or from the first after --learning-starts where a script
        has it (random steps run far faster)."""
        every, previous, self.last_step = self.args.eval_every, self.last_step, global_step
        self.summary["global_steps"] = max(self.summary["global_steps"], global_step)
        if every and global_step // every > previous // every:
            self.evaluation(global_step)
        now = time.time()
        if now - self.last_print >= 2.0:
            first, self.last_print = self.first_print or (global_step, now), now
            sps = (global_step - first[0]) / (now - first[1]) if self.first_print else None
            print(progress_line(global_step, self.budget, sps, self.recent_return()))
            if global_step >= getattr(self.args, "learning_starts", 0):
                self.first_print = first

    def evaluation(self, global_step):
        """Evaluate the policy as it is now on environments of its own (the training ones, the
        observation statistics and the random streams are untouched), append the row to
        evaluations.csv and, with --save-model, keep the best model so far (best_model)."""
        wall_time = self.elapsed()
        returns = evaluate(self.args, self.models)
        mean, std = float(returns.mean()), float(returns.std())
        self.write_row("evaluations.csv", global_step=global_step, wall_time=round(wall_time, 4),
                       eval_return_mean=mean, eval_return_std=std)
        if self.args.save_model and mean > max((m for _, m, _ in self.evaluations), default=-math.inf):
            save_checkpoint(os.path.join(self.path, "best_" + CHECKPOINT), self.models, self.args)
        self.evaluations.append((global_step, mean, std))
        self.measure(global_step, "evaluation")

    def measure(self, global_step, moment):
        """The script's own measures at a moment of training, where it has the optional hook
        measure(run, global_step, moment): its answer (None without the hook, or where the
        hook measures nothing at that moment)."""
        return measure(self, global_step, moment) if "measure" in globals() else None

    def non_finite(self, loss, global_step):
        """True, after saying so and marking the run interrupted, when the loss is NaN or inf."""
        if math.isfinite(loss):
            return False
        print(f"{SCRIPT}: the loss became non-finite (NaN or inf) at step {global_step}; "
              "stopping (try a lower --learning-rate)")
        self.summary["interrupted"] = True
        return True

    def recent_return(self, window=20):
        """The mean of the last `window` training episode returns (None before the first)."""
        return float(np.mean(self.returns[-window:])) if self.returns else None

    def reached(self, threshold, global_step):
        """True once the mean of the last solved_window returns reaches threshold; records the
        first step it did (each episode asks it of solved_threshold, train of --stop-at-return)."""
        if (threshold is None or len(self.returns) < self.window
                or self.recent_return(self.window) < threshold):
            return False
        if self.summary["solved_at_step"] is None:  # the first time only
            self.summary["solved_at_step"] = global_step
            self.summary["solved_at_time_s"] = round(self.elapsed(), 3)
        return True

    def close(self):
        for f, _ in self.files.values():
            f.close()
        if self.tensorboard:
            self.tensorboard.close()


TensorBoardWriter = SummaryWriter
CHECKPOINT = "model.pt"


EPISODE_FIELDS = ("global_step", "wall_time", "episode_return", "episode_length")
SUMMARY_KEYS = ("algorithm", "env_id", "seed", "global_steps", "wall_time_s",
                "train_return_last20", "eval_return_mean", "eval_return_std", "eval_episodes",
                "solved_threshold", "solved_window", "holds_on", "goal_budget", "start_return",
                "end_return", "holds",
                "solved_at_step", "solved_at_time_s", "interrupted")
# The columns every script writes, as TensorBoard's scalars under CleanRL's names (each point
# at the row's global_step and wall_time); a column in neither these nor the script's own
# TENSORBOARD_NAMES goes under charts/.
COMMON_NAMES = {"episode_return": "charts/episodic_return", "sps": "charts/SPS",
                "episode_length": "charts/episodic_length", "eval_return_mean":
                "eval/episodic_return", "eval_return_std": "eval/episodic_return_std"}


def progress_line(global_step, total_steps, sps, recent_return):
    """The console's progress: the step out of the budget, the percentage, steps per second,
    the time left at that speed (h:mm:ss) and the mean of the last 20 training returns; the
    speed and the time left read "-" while sps is None (the first line: nothing measured).

        ETA = max(total_steps - global_step, 0) / sps
    """
    if sps:
        minutes, seconds = divmod(round(max(total_steps - global_step, 0) / sps), 60)
        speed = f"{sps:,.0f} sps | ETA {minutes // 60}:{minutes % 60:02}:{seconds:02}"
    else:
        speed = "- sps | ETA -"
    recent = "n/a" if recent_return is None else f"{recent_return:.1f}"
    return (f"step {global_step:,}/{total_steps:,} ({100 * global_step / total_steps:.0f}%) | "
            f"{speed} | return (last 20) {recent}")


def save_checkpoint(path, models, args):
    """model.pt: each model's state dict under its name, and the flags."""
    torch.save({**{name: m.state_dict() for name, m in models.items()}, "args": asdict(args)},
               path)


def read_checkpoint(path):
    """A model.pt's dict, loaded safely (weights_only: tensors and plain data, never code)."""
    return torch.load(path, map_location="cpu", weights_only=True)


def load_checkpoint(args):
    """(args, checkpoint) for --eval-checkpoint: the file (or a run folder's), read safely and
    checked to be this script's and made for --env-id, and the flags that shape the networks
    (MODEL_FLAGS) taken from it; (args, None) without the flag."""
    path = args.eval_checkpoint
    if path is None:
        return args, None
    if os.path.isdir(path):  # a run folder stands for its checkpoint
        path = os.path.join(path, CHECKPOINT)
        if not os.path.isfile(path):
            fail(f"run folder {os.path.dirname(path)} has no {CHECKPOINT}; train with --save-model")
    if not os.path.isfile(path):
        fail(f"checkpoint {path} does not exist")
    try:
        checkpoint = read_checkpoint(path)
        flags = {name: checkpoint["args"][name] for name in ("env_id", *MODEL_FLAGS)}
    except Exception as e:
        fail(f"checkpoint {path} is not a {SCRIPT} {CHECKPOINT} ({type(e).__name__}); "
             "make one with --save-model")
    if flags["env_id"] != args.env_id:
        fail(f"checkpoint {path} was made for {flags['env_id']}, not {args.env_id}; "
             f"pass --env-id {flags['env_id']}")
    return replace(args, **flags), checkpoint


def restore(checkpoint, models, args):
    """Put a checkpoint's state into each model."""
    try:
        for name, model in models.items():
            model.load_state_dict(checkpoint[name])
    except Exception as e:
        fail(f"checkpoint {args.eval_checkpoint} does not fit {args.env_id}'s networks: "
             f"{type(e).__name__}: {(str(e).splitlines() or [''])[0]}")


def train_and_finish(run, train, envs=None):
    """Train (unless --eval-checkpoint gave a model) and finish the run. Ctrl-C during
    training stops it: the run folder is written, then KeyboardInterrupt goes on up (cli
    ends the process as an interrupted one); the environments are closed either way."""
    interrupted = False
    if run.args.eval_checkpoint is None:
        try:
            train()
        except KeyboardInterrupt:
            print(f"{SCRIPT}: interrupted; writing what the run has so far")
            interrupted = run.summary["interrupted"] = True
        finally:
            if envs is not None:
                envs.close()
    summary = finish(run.args, run, trained=run.args.eval_checkpoint is None)
    if interrupted:
        raise KeyboardInterrupt
    return summary


def finish(args, run, trained=True):
    """Write the run first (the model if asked, summary.json), then evaluate greedily and
    write summary.json again with the evaluation, so that Ctrl-C during a long evaluation
    keeps the run (without the evaluation); print the closing line, ending with plot.py's
    command for the curve where a training episode ended. An interrupted run skips the
    evaluation. summary.json's holds: whether the run's end (judge) is at or above
    solved_threshold (a run that reached it once can end below it)."""
    summary = run.summary
    summary["train_return_last20"] = run.recent_return()
    threshold, window = summary["solved_threshold"], summary["solved_window"]
    judge(run)
    summary["wall_time_s"] = round(run.elapsed(), 3)
    episodic = globals().get("trains_on_episodes", lambda args: True)(args)  # rlhf.py's DPO: no
    if trained and episodic and not run.returns and not summary["interrupted"]:
        print(f"{SCRIPT}: no training episode ended in {summary['global_steps']:,} steps; if "
              f"{args.env_id} has no time limit, register it with max_episode_steps")
    if args.save_model and trained:
        save_checkpoint(os.path.join(run.path, CHECKPOINT), run.models, args)
    run.close()
    write_summary(run)
    if args.eval_episodes and not summary["interrupted"]:
        print(f"{SCRIPT}: final evaluation, {args.eval_episodes:,} "
              f"episode{'s' * (args.eval_episodes > 1)}; the run is written and Ctrl-C keeps it")
        try:
            returns = evaluate(args, run.models, os.path.join(run.path, "videos")
                               if args.capture_video else None)
        except KeyboardInterrupt:
            print(f"{SCRIPT}: final evaluation interrupted; {run.path} keeps the run without it")
            draw_curve(run)
            finish_tracking(args, run, exit_code=130)
            raise
        summary["eval_return_mean"] = float(returns.mean())
        summary["eval_return_std"] = float(returns.std())
        judge(run)
        write_summary(run)
    curve = draw_curve(run)
    closing = [f"{SCRIPT}: run folder {run.path}", f"global_steps {summary['global_steps']:,}"]
    for key in ("train_return_last20", "eval_return_mean"):
        closing.append(f"{key} " + ("-" if summary[key] is None else f"{summary[key]:.2f}"))
    if threshold is not None:  # --stop-at-return, else GOALS's, else the environment's
        if summary["end_return"] is not None:  # the end first: what a user gets from the run
            end = ("the final evaluation" if summary["holds_on"] == "eval" else
                   f"the gain over the start ({summary['start_return']:.2f} -> "
                   f"{summary['eval_return_mean']:.2f})" if summary["holds_on"] == "gain"
                   else f"the last-{window} mean at the end")
            value = f"{summary['end_return']:{'+' if summary['holds_on'] == 'gain' else ''}.2f}"
        if summary["holds"] is not None:
            closing.append(f"{'holds' if summary['holds'] else 'does not hold'}: {end} {value} "
                           f"{'>=' if summary['holds'] else '<'} {threshold:g}")
        elif short_of_budget(run) and summary["end_return"] is not None:
            closing.append(f"not judged, {args.total_timesteps:,} steps where its goal "
                           f"{threshold:g} is for {summary['goal_budget']:,}: {end} {value}")
        lost = " (lost by the end)" if summary["solved_at_step"] and summary["holds"] is False else ""
        if summary["holds_on"] != "gain":  # a gain has no training mean to reach it first
            closing.append(f"solved_at_step {summary['solved_at_step'] or 'not reached'} "
                           f"(last-{window} mean >= {run.source} {threshold:g}){lost}")
    elif getattr(args, "preset", None):  # no goal knows the environment: what ran on it
        closing.append(f"no goal for {args.env_id}; the {args.preset} preset ran")
    if curve:
        closing.append(f"curve {curve}")
    elif run.returns:  # plot.py draws the training episodes, an unfinished run's on request
        unfinished = "--include-unfinished " if summary["interrupted"] else ""
        closing.append(f"curve: python plot.py {unfinished}{run.path}")
    print(" | ".join(closing))
    finish_tracking(args, run)
    return summary


def judge(run):
    """summary.json's end_return, the figure the run is judged on where it ends (not where it
    first got: a run can reach its threshold and lose it): the mean of the last solved_window
    training returns (holds_on "train"), the final evaluation's mean ("eval") or that less
    start_return ("gain"); and holds, end_return >= solved_threshold, null without either, for
    a run stopped before its budget, or for one given fewer steps than its goal is for
    (short_of_budget)."""
    summary, window = run.summary, run.window
    summary["end_return"] = (summary["eval_return_mean"] if summary["holds_on"] == "eval" else
                             None if summary["holds_on"] == "gain" else
                             run.recent_return(window) if len(run.returns) >= window else None)
    if summary["holds_on"] == "gain" and None not in (summary["eval_return_mean"],
                                                      summary["start_return"]):
        summary["end_return"] = summary["eval_return_mean"] - summary["start_return"]
    summary["holds"] = (None if None in (summary["solved_threshold"], summary["end_return"])
                        or summary["interrupted"] or short_of_budget(run) else
                        summary["end_return"] >= summary["solved_threshold"])


def short_of_budget(run):
    """Whether the run was given fewer steps (--total-timesteps) than its goal is for: a goal
    at 1M steps does not judge a run of 300k."""
    budget = run.summary["goal_budget"]
    return budget is not None and run.args.total_timesteps < budget


def rolling_means(returns, window=20):
    """The mean of the last `window` returns where each episode ended (fewer at the start):
    the curve of summary.json's train_return_last20. returns [n] -> means [n], from prefix
    sums S_k = R_0 + ... + R_{k-1}:

        m_i = (S_{i+1} - S_{s_i}) / (i + 1 - s_i),   s_i = max(0, i + 1 - window)
    """
    sums = np.cumsum(np.concatenate([[0.0], returns]))
    i = np.arange(1, len(returns) + 1)
    start = np.maximum(i - window, 0)
    return (sums[i] - sums[start]) / (i - start)


def draw_curve(run):
    """--curve: curve.png in the run folder, the run's learning curve, after training (also
    one stopped by Ctrl-C): each training episode's return (dots), the mean of the last
    solved_window, the greedy evaluations (--eval-every's and the final one, mean and std)
    and solved_threshold, of the measure holds_on names. No pyplot: a Figure of its own, so a notebook's or a caller's
    figures are left alone. Returns the file's path, None where it draws nothing (the flag
    off, or neither an episode nor an evaluation to draw). A script with a curve of its own
    (draw_own_curve: grpo.py's phases) draws that instead."""
    if "draw_own_curve" in globals():
        return draw_own_curve(run) if run.args.curve else None
    summary = run.summary
    evaluations = list(run.evaluations)
    if summary["eval_return_mean"] is not None:
        evaluations.append((summary["global_steps"], summary["eval_return_mean"],
                            summary["eval_return_std"]))
    if not run.args.curve or not (run.returns or evaluations):
        return None
    from matplotlib.figure import Figure  # only a run that draws pays for the import
    fig = Figure(figsize=(7, 4.2), layout="constrained")
    ax = fig.add_subplot()
    if run.returns:
        ax.plot(run.ends, run.returns, ".", ms=3, alpha=0.3, color="C0", label="episode return")
        ax.plot(run.ends, rolling_means(run.returns, run.window), color="C0",
                label=f"mean of the last {run.window}")
    if evaluations:
        steps, means, stds = zip(*evaluations)
        ax.errorbar(steps, means, yerr=stds, fmt="o", color="C1", capsize=3,
                    label="greedy evaluation (mean, std)")
    if summary["solved_threshold"] is not None:
        on = "evaluation" if summary["holds_on"] == "eval" else f"last-{run.window} mean"
        ax.axhline(summary["solved_threshold"], ls="--", color="gray",
                   label=f"threshold {summary['solved_threshold']:g} ({on})")
    stopped = " (interrupted)" if summary["interrupted"] else ""
    ax.set(xlabel="environment steps", ylabel="return",
           title=f"{SCRIPT} on {summary['env_id']}, seed {summary['seed']}{stopped}")
    ax.grid(alpha=0.3)
    ax.legend(loc="best", fontsize="small")
    path = os.path.join(run.path, "curve.png")
    fig.savefig(path, dpi=100)
    return path


def write_summary(run):
    """summary.json: the run's summary as it stands."""
    with open(os.path.join(run.path, "summary.json"), "w") as f:
        json.dump(run.summary, f, indent=2)


def start_tracking(args, name, config):
    """--track: a Weights & Biases run as CleanRL starts one, which syncs the TensorBoard event
    files written after it; one that cannot start (no API key) is bad input."""
    import wandb  # not a requirement: check_args found it
    try:
        wandb.init(project=args.wandb_project_name, entity=args.wandb_entity, name=name,
                   config=config, sync_tensorboard=True)
    except wandb.errors.Error as e:
        fail(f"--track: {' '.join(str(e).split())} Or set WANDB_MODE=offline: the run stays "
             "here until `wandb sync` uploads it")


def finish_tracking(args, run, exit_code=0):
    """--track: summary.json and the evaluation's videos to the Weights & Biases run, which
    then ends (exit_code 130: Ctrl-C during the final evaluation)."""
    if not args.track:
        return
    import wandb  # not a requirement: check_args found it
    wandb.run.summary.update(run.summary)
    videos = sorted(glob.glob(os.path.join(run.path, "videos", "*.mp4")))
    if videos:
        wandb.log({"videos": [wandb.Video(video) for video in videos]})
    wandb.finish(exit_code=exit_code)


def cli():
    """main(flags) from the command line. Bad input: one line, exit status 2. Ctrl-C: the
    run folder written, the process dies of SIGINT (130), so a shell loop of runs stops too."""
    try:
        main(parse_args())
    except UsageError as e:
        print(f"{SCRIPT}: error: {e}", file=sys.stderr)
        sys.exit(2)
    except KeyboardInterrupt:
        signal.signal(signal.SIGINT, signal.SIG_DFL)
        os.kill(os.getpid(), signal.SIGINT)
# End of plumbing/common.py


# ---------------------------------------------------------------------------------------
# Plumbing for Ray: joined or started, then stopped
# ---------------------------------------------------------------------------------------
# Stamped from plainrl's plumbing/ray.py by its stamp.py: edit it there, not here.
def starts_ray(args):
    """Whether this run starts a Ray of its own here (no --ray-address, and none running in
    this process yet), which it must then stop however it ends (stop_ray)."""
    import ray
    return args.ray_address is None and not ray.is_initialized()


def stop_ray():
    """Stop the Ray this run started, its processes with it. Ray's own exit handler would
    not run after Ctrl-C (cli ends the process by SIGINT), and its raylet, killed with this
    process, would leave its dashboard and runtime-env agents running, orphaned, a minute."""
    import ray
    ray.shutdown()


def check_reachable(address):
    """Fail at once if a host:port address takes no connection (Ray itself would retry it
    for minutes); None, "auto" and the like are Ray's to resolve."""
    host, _, port = (address or "").removeprefix("ray://").rpartition(":")
    if not host or not port.isdigit():
        return
    try:
        socket.create_connection((host, int(port)), timeout=10).close()
    except OSError as e:
        fail(f"cannot reach the Ray cluster at {address}: {e.strerror or e}; start it with "
             "`ray start --head --port=6379` on the head machine")


def start_ray(address):
    """Join the Ray cluster at address, or start Ray on this machine (None), unless this
    process already has; returns the cluster's CPUs. Says so first: Ray takes seconds to
    start, and Ctrl-C meanwhile is held back until it has (ctrl_c_held_back)."""
    import ray
    check_reachable(address)
    if not ray.is_initialized():
        if address is None:  # Ray runs its workers at niceness 15, below any other busy
            # process: beside one on 2 cores an actor took 48 s to import torch (2.5 s at 0)
            os.environ.setdefault("RAY_worker_niceness", "0")
        print(f"{SCRIPT}: " + (f"joining Ray at {address} ..." if address else "starting Ray ..."),
              flush=True)
        try:
            with ctrl_c_held_back(active=address is None):
                # "local": a Ray of this run's own, even where another is running on the
                # machine (address None would join that one, or RAY_ADDRESS's)
                ray.init(address=address or "local", include_dashboard=False,
                         log_to_driver=False, logging_level="ERROR")
        except Exception as e:  # Ray raises a bare Exception when its node starts too slowly
            if address is None:
                fail(f"cannot start Ray: {str(e).strip().splitlines()[0]} (on a busy machine, "
                     "try again)")
            fail(f"cannot join Ray at {address}: {str(e).strip().splitlines()[0]} (is `ray start` "
                 "running there? If its cluster uses token authentication, set RAY_AUTH_MODE=token"
                 " and copy its ~/.ray/auth_token here)")
    cpus = int(ray.cluster_resources().get("CPU", 0))
    if cpus < 1:
        fail("the Ray cluster has no CPU to run on; start it with some (ray start --num-cpus)")
    return cpus


@contextlib.contextmanager
def ctrl_c_held_back(active=True):
    """Hold Ctrl-C back while Ray starts (active) and raise its KeyboardInterrupt once it has
    started: interrupted inside ray.init, Ray leaves its processes half-started, out of
    ray.shutdown's reach (its dashboard and runtime-env agents lived on, orphaned, for about
    a minute), where once started it stops them all (main's stop_ray). A second Ctrl-C
    raises at once. Only in the main thread under Python's own SIGINT handler (not where
    SIGINT is ignored, as in a background job)."""
    if (not active or signal.getsignal(signal.SIGINT) is not signal.default_int_handler
            or threading.current_thread() is not threading.main_thread()):
        yield
        return
    pressed = []

    def hold(signum, frame):
        if pressed:
            raise KeyboardInterrupt
        pressed.append(signum)
        print(f"{SCRIPT}: Ctrl-C: stopping once Ray has started, in a few seconds (Ctrl-C again "
              "stops at once, and Ray's processes can outlive the run by a minute)", flush=True)

    signal.signal(signal.SIGINT, hold)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, signal.default_int_handler)
    if pressed:
        raise KeyboardInterrupt
# End of plumbing/ray.py


# ---------------------------------------------------------------------------------------
# What the plumbing asks of es.py: its own checks, its greedy policy, its model's flags
# ---------------------------------------------------------------------------------------
def check_flags(args):
    """es.py's own flags, checked before any environment is made."""
    for name in ("population_size", "episodes_per_member", "sigma", "learning_rate"):
        if not getattr(args, name) > 0:  # also refuses NaN
            fail(f"--{name.replace('_', '-')} must be positive, got {getattr(args, name)}")
    if not args.l2_coef >= 0:
        fail(f"--l2-coef must be 0 or more, got {args.l2_coef}")
    if args.num_workers is not None and args.num_workers <= 0:
        fail(f"--num-workers must be positive, got {args.num_workers}")
    if args.ray_address is not None and args.backend != "ray":
        fail("--ray-address is for Ray's workers; add --backend ray")
    if args.backend == "ray" and importlib.util.find_spec("ray") is None:
        fail("--backend ray needs Ray: pip install ray==2.60.0 (or use --backend process)")
    if args.antithetic and args.population_size % 2:
        fail(f"--population-size {args.population_size} is odd, but --antithetic makes the "
             f"members in mirrored pairs; use {args.population_size + 1} or --no-antithetic")
    if args.population_size < 2:
        fail("--population-size must be at least 2: one member gives no direction")
    if args.policy == "mlp" and (not args.hidden_sizes or min(args.hidden_sizes) <= 0):
        fail(f"--hidden-sizes must be positive widths, got {' '.join(map(str, args.hidden_sizes))}"
             " (for no hidden layer use --policy linear)")


def check_spaces(args, obs_space, action_space):
    """Whether es.py handles the environment's spaces; returns (observation shape, action
    space)."""
    env_id = args.env_id
    if isinstance(action_space, gym.spaces.Box):
        if len(action_space.shape) != 1:
            fail(f"{env_id} has a Box action space of shape {action_space.shape}; es.py needs "
                 "a flat one")
        if not (np.isfinite(action_space.low).all() and np.isfinite(action_space.high).all()):
            fail(f"{env_id} has unbounded Box actions; es.py scales a tanh output to the "
                 "bounds (ppo.py handles unbounded actions)")
    elif not isinstance(action_space, gym.spaces.Discrete):
        fail(f"{env_id} has a {type(action_space).__name__} action space; es.py handles "
             "Discrete and Box (ppo_masked.py masks Discrete actions; no script here takes "
             "MultiDiscrete)")
    if not isinstance(obs_space, gym.spaces.Box):
        fail(f"{env_id} has a {type(obs_space).__name__} observation space; es.py needs a "
             "Box (ppo_masked.py one-hot encodes Discrete ones, qlearning.py uses a table)")
    if len(obs_space.shape) != 1:
        fail(f"{env_id} has observations of shape {obs_space.shape}; es.py's policy needs "
             "flat vectors")
    return obs_space.shape, action_space


class Theta:
    """What model.pt keeps of the policy: theta (the strategy's, as a tensor), which must fit
    the network its flags make; and the policy that plays it."""

    def __init__(self, policy, strategy):
        self.policy, self.strategy = policy, strategy

    def state_dict(self):
        return {"theta": torch.from_numpy(np.asarray(self.strategy.theta, dtype=np.float64))}

    def load_state_dict(self, state):
        theta = state["theta"].numpy().astype(np.float64)
        if theta.shape != (self.policy.num_params,):
            raise ValueError(f"theta has {theta.size} parameters, the network "
                             f"{self.policy.num_params}")
        self.strategy.theta = theta


def greedy_policy(models, envs):
    """The evaluation's policy, act(obs, info) -> actions: theta itself (the policy is
    deterministic) in each environment, with the observation statistics as they are, frozen."""
    policy, obs_stats = models["theta"].policy, models["obs_rms"].frozen()
    layers = policy.layers(models["theta"].strategy.theta)
    return lambda obs, info: np.array([policy.act(layers, normalize(o, obs_stats)) for o in obs])


# What a run is judged on, by environment id (its benchmark task in benchmark.py, its README
# row): (threshold, window of training episodes, "train": the last-window mean at the end,
# or "eval": the final greedy evaluation). Another id: its reward_threshold over 20, "train".
GOALS = {"CartPole-v1": (475, 20, "eval", 500_000), "Pendulum-v1": (-200, 20, "eval", 3_000_000)}
MODEL_FLAGS = ("policy", "hidden_sizes", "norm_obs")  # a checkpoint's network is built by these
# es.py's columns of updates.csv as TensorBoard's scalars, under CleanRL's names
TENSORBOARD_NAMES = {
    "generation": "charts/generation", "fitness_mean": "charts/fitness_mean",
    "fitness_max": "charts/fitness_max", "fitness_min": "charts/fitness_min",
    "theta_return": "charts/theta_return", "theta_norm": "charts/theta_norm",
    "grad_norm": "charts/grad_norm"}


# ---------------------------------------------------------------------------------------
# Plumbing of es.py's own: the workers, processes of this machine or Ray actors
# ---------------------------------------------------------------------------------------
def available_cores():
    """The cores this process may run on."""
    if hasattr(os, "sched_getaffinity"):
        return len(os.sched_getaffinity(0))
    return os.cpu_count() or 1


def worker_count(args):
    """--num-workers, capped with a warning at the CPUs (the cores here, or those of the Ray
    cluster, which start_ray joins or starts now) and at the population (a worker plays
    whole members); by default the number of CPUs, capped silently."""
    if args.backend == "ray":
        cores, what = start_ray(args.ray_address), "CPUs of the Ray cluster"
    else:
        cores, what = available_cores(), "cores"
    limit = min(cores, args.population_size)
    if args.num_workers is None:
        return max(1, limit)
    if args.num_workers > limit:
        why = (f"the {cores} {what}" if cores <= args.population_size
               else f"the {args.population_size} members of a generation")
        print(f"{SCRIPT}: warning: --num-workers {args.num_workers} is more than {why}; "
              f"using {limit}", file=sys.stderr)
        return limit
    return args.num_workers


def start_workers(args, policy, strategy):
    """The workers of --backend: ProcessWorkers or RayWorkers, the same to train()."""
    kind = RayWorkers if args.backend == "ray" else ProcessWorkers
    return kind(args.num_workers, args.env_id, policy, strategy)


class WorkerDied(Exception):
    """A worker process or Ray actor is gone (killed, crashed, its machine lost)."""


class WorkersLost(Exception):
    """Every worker has died: main() stops training as after Ctrl-C, so the run keeps its
    files and its summary says "interrupted": true (but the command exits with 0)."""


class Workers:
    """Plays a generation's tasks on worker replicas of the EvolutionStrategy (see Replica):
    tasks go out as (seed, sign, env_seeds) to whichever worker is free, in chunks of
    ceil(tasks left / workers) (guided self-scheduling: few messages, and the last chunks,
    of one task, even out the finish), and their returns come back, put in task order.
    update() has every replica take the main process's step and checks that its ||theta||
    is the main process's. A worker that dies is dropped with a warning and the chunk it
    held goes to another (any replica plays any member to the same bits); when none is
    left, WorkersLost stops the run. The subclasses carry the messages: send(worker,
    message) returns a handle, ready(handles) those whose answer has come, receive(handle)
    the answer, raising WorkerDied."""

    def __init__(self, workers, policy, strategy, env=None):
        self.workers, self.policy, self.strategy = list(workers), policy, strategy
        self.env = env  # an environment of this process, which plays when there is no worker

    def play(self, tasks, obs_stats):
        if self.env is not None:
            return [play_task(self.env, self.policy, self.strategy, obs_stats, t) for t in tasks]
        results, todo, busy = [None] * len(tasks), list(range(len(tasks))), {}
        idle = list(self.workers)
        while todo or busy:
            while todo and idle:  # a free worker gets 1/workers of the tasks left, at least one
                size = -(-len(todo) // len(self.workers))
                worker, chunk, todo = idle.pop(0), todo[:size], todo[size:]
                message = ("play", ([tasks[i] for i in chunk], obs_stats))
                busy[self.send(worker, message)] = worker, chunk
            for handle in self.ready(list(busy)):
                worker, chunk = busy.pop(handle)
                try:
                    for i, result in zip(chunk, self.receive(handle)):
                        results[i] = result
                    idle.append(worker)
                except WorkerDied as death:
                    todo += chunk  # replayed by another worker
                    self.lose(worker, death)
        return results

    def update(self, seeds, signs, returns):
        sent = [(worker, self.send(worker, ("update", (seeds, signs, returns))))
                for worker in self.workers]
        for worker, handle in sent:
            try:
                theta_norm = self.receive(handle)
            except WorkerDied as death:
                self.lose(worker, death)
                continue
            if theta_norm != float(np.linalg.norm(self.strategy.theta)):
                raise RuntimeError("a worker's copy of theta differs from the main process's")

    def lose(self, worker, death):
        self.workers.remove(worker)
        if not self.workers:
            print(f"{SCRIPT}: every worker has died (the last: {death}); stopping", file=sys.stderr)
            raise WorkersLost
        print(f"{SCRIPT}: warning: a worker died ({death}); its members go to the "
              f"{len(self.workers)} left", file=sys.stderr)


class Replica:
    """What a worker holds: an environment and a replica of the EvolutionStrategy. handle()
    answers ("play", (tasks, obs_stats)) with play_task's result for each task and
    ("update", (seeds, signs, returns)) by taking the step and returning ||theta||. A worker
    process runs one in worker_loop; a Ray actor is one."""

    def __init__(self, env_id, policy, strategy):
        self.env = gym.wrappers.RecordEpisodeStatistics(make_env(env_id))
        self.policy, self.strategy = policy, strategy
        strategy.theta = np.array(strategy.theta)  # writable: Ray hands arrays over read-only

    def handle(self, message):
        kind, payload = message
        if kind == "update":
            self.strategy.update(*payload)
            return float(np.linalg.norm(self.strategy.theta))
        tasks, obs_stats = payload
        return [play_task(self.env, self.policy, self.strategy, obs_stats, t) for t in tasks]


class ProcessWorkers(Workers):
    """Workers that are processes of this machine, each with a pipe; with one worker, this
    process plays. They are forked on Linux, so they inherit everything imported, the
    environments a `module:EnvId` registered included."""

    def __init__(self, num_workers, env_id, policy, strategy):
        self.conns, self.processes = [], []
        context = multiprocessing.get_context("fork" if sys.platform == "linux" else "spawn")
        # Ctrl-C is the main process's to handle: SIGINT, which a terminal sends to every
        # process of the command, is ignored while the workers start, and so all their lives.
        handler = signal.signal(signal.SIGINT, signal.SIG_IGN)
        try:
            for _ in range(num_workers if num_workers > 1 else 0):
                mine, theirs = context.Pipe()
                process = context.Process(target=worker_loop, daemon=True,
                                          args=(theirs, env_id, policy, strategy))
                process.start()
                theirs.close()
                self.conns.append(mine)
                self.processes.append(process)
        finally:
            signal.signal(signal.SIGINT, handler)
        own = gym.wrappers.RecordEpisodeStatistics(make_env(env_id)) if num_workers == 1 else None
        super().__init__(self.conns, policy, strategy, env=own)  # one worker: this process plays

    def send(self, conn, message):
        try:
            conn.send(message)
        except OSError:  # the worker is gone: receive() says so
            pass
        return conn

    def ready(self, conns):
        return multiprocessing.connection.wait(conns)

    def receive(self, conn):
        try:
            status, value = conn.recv()
        except (EOFError, OSError):
            process = self.processes[self.conns.index(conn)]
            process.join(timeout=1)
            raise WorkerDied(f"process {process.pid} ended, exit code {process.exitcode}") from None
        if status == "error":
            raise RuntimeError(f"a worker failed:\n{value}")
        return value

    def close(self):
        if self.env is not None:
            self.env.close()
        for conn in self.conns:
            try:
                conn.send(None)
            except OSError:
                pass
        for process in self.processes:
            process.join(timeout=2)
            if process.is_alive():
                process.terminate()
                process.join()
        for conn in self.conns:
            conn.close()


def worker_loop(conn, env_id, policy, strategy):
    """A worker process: answers each message with ("ok", the Replica's answer), or
    ("error", the traceback) and ends; None ends it. It ignores Ctrl-C (ProcessWorkers)."""
    replica = Replica(env_id, policy, strategy)
    try:
        while (message := conn.recv()) is not None:
            conn.send(("ok", replica.handle(message)))
    except Exception:
        conn.send(("error", traceback.format_exc()))
    finally:
        replica.env.close()


class RayWorkers(Workers):
    """Workers that are Ray actors, each a Replica with one CPU, wherever the cluster puts
    them (start_ray has joined or started it). This script's code travels with the actors
    (pickled by value), so another machine needs only the packages; an environment of a
    `module:EnvId` needs its module importable there (gym.make imports it)."""

    def __init__(self, num_workers, env_id, policy, strategy):
        import ray
        self.ray = ray
        if __name__ != "__main__":  # imported (tests): send the code, not a name to import
            ray.cloudpickle.register_pickle_by_value(sys.modules[__name__])
        actor = ray.remote(num_cpus=1, max_restarts=0)(Replica)
        self.actors = [actor.remote(env_id, policy, strategy) for _ in range(num_workers)]
        super().__init__(self.actors, policy, strategy)

    def send(self, actor, message):
        return actor.handle.remote(message)

    def ready(self, refs):
        return self.ray.wait(refs, num_returns=1)[0]

    def receive(self, ref):
        try:
            return self.ray.get(ref)
        except self.ray.exceptions.RayActorError as e:
            raise WorkerDied(str(e).strip().splitlines()[0]) from None
        except self.ray.exceptions.RayTaskError as e:
            raise RuntimeError(f"a worker failed:\n{e}") from None

    def close(self):
        for actor in self.actors:
            self.ray.kill(actor)


if __name__ == "__main__":
    cli()

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
    # The run folder's flags (--output-dir, --save-model, --eval-checkpoint, --track, ...)
    # come after these: every script shares them, declared once in RunFlags below the banner.
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
    def limited(env_id, **options):
        env = gym.make(env_id, **options)
        return (gym.wrappers.TimeLimit(env, EPISODE_STEP_LIMIT)
                if env.spec.max_episode_steps is None else env)
    return make_recorded(env_id, video_folder, name_prefix, make=limited)


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
    run (Run, below the banner) writes the run folder: step(n) prints progress and
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
    # prepare (below the banner): --eval-checkpoint's model read, the environment made and
    # checked, the flags left at None from its family's preset, every flag checked (a
    # mistake: one line, exit status 2), the seeds set.
    args, (obs_shape, action_space), checkpoint, _ = prepare(args)
    own_ray = checkpoint is None and args.backend == "ray" and starts_ray(args)  # then stopped
    try:
        if checkpoint is None:  # no more workers than the cores (or Ray's CPUs) and members
            args = replace(args, num_workers=worker_count(args))

        # Set up: the policy and theta, the observation normalizer, the run folder.
        rng = np.random.default_rng(args.seed)  # theta, every member's noise and start states
        policy = Policy(obs_shape[0], action_space,
                        args.hidden_sizes if args.policy == "mlp" else ())
        normalizer = ObsNormalizer(obs_shape, args.norm_obs)
        strategy = EvolutionStrategy(policy.initial_theta(rng), args.sigma, args.learning_rate,
                                     args.optimizer, args.l2_coef, args.fitness_shaping)
        models = {"theta": Theta(policy, strategy), "obs_rms": normalizer}  # what model.pt holds
        run = Run(args, "cpu", models, checkpoint, note=f", {policy.num_params} parameters")

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
        return run.train(train_on_the_workers, workers)
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
from torch.utils.tensorboard import SummaryWriter as TensorBoardWriter


@dataclass
class RunFlags:
    """The flags of the run folder that every script has: Args below lists them last."""
    output_dir: str = "runs"
    """where run folders go"""
    save_model: bool = False
    """write the model into the run folder (model.pt; a table's: model.npz)"""
    eval_checkpoint: Optional[str] = None
    """skip training: load this model.pt (or model.npz, or a run folder's) and evaluate it"""
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


def prepare(args, make=None):
    """Before training: --eval-checkpoint's model read, the environment made once, the flags
    left at None filled from its family's preset, the flags then the spaces checked (a mistake:
    one line, exit status 2), the seeds. Returns (args, check_spaces's, checkpoint, device)."""
    args, checkpoint = load_checkpoint(args)  # the flags that shape its networks too
    obs_space, action_space = check_env(args, make or globals().get("make_game", gym.make))
    if "PRESETS" in globals():  # the flags left at None: plumbing/presets.py's, below
        args = fill_preset(args, preset_for(args, obs_space, action_space))
    if getattr(args, "eval_epsilon", 0.0) is None:  # the evaluation's default: 0.05 on Atari
        args = replace(args, eval_epsilon=0.05 if args.env_id.startswith("ALE/") else 0.0)
    check_args(args)
    spaces = check_spaces(args, obs_space, action_space)
    image = len(getattr(obs_space, "shape", None) or ()) == 3
    return args, spaces, checkpoint, seed_and_device(args.seed, getattr(args, "cuda", None),
                                                     getattr(args, "threads", 1), image)


class UsageError(Exception):
    """Bad input: cli prints it as one line and exits with status 2, before training."""


def fail(message):
    raise UsageError(message)


def parse_args():  # tyro's parse-error hook (tyro._errors: requirements.txt pins tyro)
    with tyro._errors.on_parse_error(usage_error):
        return tyro.cli(Args)


def usage_error(event):
    """One line for a parse error: an unknown flag, a choice, a value, a missing value."""
    types, hint = typing.get_type_hints(Args), f"(python {SCRIPT} --help lists the flags)"
    if isinstance(event, tyro._errors.UnrecognizedArgs):
        flags = [f"--{no}{name.replace('_', '-')}" for name, kind in types.items()
                 for no in ("", "no-")[:1 + (kind is bool and not name.startswith("no_"))]]
        close = difflib.get_close_matches(event.tokens[0].partition("=")[0], flags, n=2)
        fail(f"unrecognized options: {', '.join(event.tokens)}"
             f"{'; did you mean ' + ' or '.join(close) + '?' if close else ''} {hint}")
    flag = event.argument.display_name().split("/")[0] if hasattr(event, "argument") else "?"
    kind = types.get(flag[2:].replace("-", "_"))
    if isinstance(event, tyro._errors.InvalidChoice):
        choices = [str(c) for a in (kind, *typing.get_args(kind))
                   if typing.get_origin(a) is typing.Literal for c in typing.get_args(a)]
        fail(f"{flag} takes {' or '.join(choices or event.choices)}, not {event.value!r} {hint}")
    if isinstance(event, tyro._errors.InstantiationFailure):  # the value is quoted last
        value = (re.findall(r"'([^']*)'", event.message) or ["?"])[-1]
        whole = "a whole number" if int in (kind, *typing.get_args(kind)) else "a number"
        fail(f"{flag} takes {whole}, not {value!r} {hint}")
    fail(f"{flag} needs a value {hint}")


def check_range(args, positive=(), nonnegative=(), fraction=()):
    """Each flag named must be > 0, >= 0, or in [0, 1]."""
    for name in [*positive, *nonnegative, *fraction]:
        value, words = getattr(args, name), ("positive" if name in positive else "0 or more"
                                             if name in nonnegative else "in [0, 1]")
        if not (value > 0 if name in positive else 0 <= value <= (1 if name in fraction else math.inf)):
            fail(f"--{name.replace('_', '-')} must be {words}, got {value}")


def check_args(args):
    """The algorithm's checks of its flags (check_flags), then those every script shares."""
    try:
        check_flags(args)
    except UsageError as e:  # a value may be the preset's, not the user's: name the preset
        preset = getattr(args, "preset", None)
        fail(f"{e} (the {preset} preset's settings; a flag given overrides one)" if preset else e)
    check_range(args, positive=["total_timesteps"], nonnegative=["eval_episodes", "eval_every"])
    if (args.eval_every or args.capture_video) and not args.eval_episodes:
        fail("--eval-every and --capture-video need evaluation episodes: --eval-episodes 1 or more")
    for flag, needed, package in (("capture_video", "moviepy", "moviepy==2.2.1"),
                                  ("track", "wandb", "wandb==0.31.0")):
        if getattr(args, flag) and importlib.util.find_spec(needed) is None:
            fail(f"--{flag.replace('_', '-')} needs {needed}: pip install {package}")


def check_env(args, make=gym.make):
    """The environment's spaces; with --capture-video a frame rendered (no display: said now)."""
    try:
        with warnings.catch_warnings():  # a failing render is said below
            warnings.simplefilter("ignore")
            os.environ.setdefault("SDL_VIDEODRIVER", "dummy")  # frames only, no window
            env = make(args.env_id, **({"render_mode": "rgb_array"} if args.capture_video else {}))
            if args.capture_video:
                env.reset(seed=0)
                env.render()
            env.close()
    except UsageError:  # a make of the script's own said it already (a package to install)
        raise
    except Exception as e:  # Gymnasium's line: the closest id, the extra to install (pinned)
        message = re.sub(r'"gymnasium\[(\w+)\]"', rf'"gymnasium[\1]=={gym.__version__}"', str(e))
        video = " to record videos (for MuJoCo without a display: MUJOCO_GL=egl)" * args.capture_video
        fail(f"cannot make {args.env_id}{video}: {type(e).__name__}: "
             f"{(message.splitlines() or [''])[0]}")
    return env.observation_space, env.action_space


def seed_and_device(seed, cuda=None, threads=1, image=False):
    """The seeds; the GPU for --cuda, or for an image (an MLP trains faster on a CPU thread)."""
    random.seed(seed)
    np.random.seed(seed)
    device = "cpu"
    torch.manual_seed(seed)
    device = torch.device("cuda" if torch.cuda.is_available() and (image if cuda is None else cuda)
                          else "cpu")
    if device.type == "cpu":
        torch.set_num_threads(threads)
    print(f"{SCRIPT}: device {device}")
    return device


def make_recorded(env_id, video_folder=None, name_prefix="eval", make=gym.make, **options):
    """make(env_id, **options); with video_folder, an evaluation's environment whose first
    episode is recorded there as <name_prefix>-episode-0.mp4 (frames only, no window)."""
    if video_folder is None:
        return make(env_id, **options)
    os.environ.setdefault("SDL_VIDEODRIVER", "dummy")
    env = make(env_id, render_mode="rgb_array", **options)
    with warnings.catch_warnings():  # the evaluation's environments share one folder
        warnings.filterwarnings("ignore", message=".*Overwriting existing videos")
        return gym.wrappers.RecordVideo(env, video_folder, name_prefix=name_prefix,
                                        episode_trigger=lambda episode: episode == 0)


EVAL_MAX_STEPS = 27_000  # an evaluation episode is cut here: ALE's own end of an Atari game


def evaluate(args, models, video_folder=None):
    """Greedy returns of --eval-episodes episodes, one per environment, seeded seed + 100,000;
    with --eval-epsilon, a random action at that rate from a generator of its own."""
    episodes, seed = args.eval_episodes, args.seed + 100_000
    envs = make_vector_env(args.env_id, episodes, video_folder=video_folder,
                           **{flag: getattr(args, flag) for flag in globals().get("ENV_FLAGS", ())})
    act, epsilon = greedy_policy(models, envs), getattr(args, "eval_epsilon", 0.0)
    obs, info = envs.reset(seed=seed)
    rng, returns = np.random.default_rng(seed), np.full(episodes, np.nan)
    for _ in range(EVAL_MAX_STEPS):
        actions = act(obs, info)
        if epsilon:  # Discrete actions only (check_spaces); whether to explore, then what
            explore = rng.random(episodes) < epsilon
            actions = np.where(explore, rng.integers(envs.single_action_space.n, size=episodes),
                               actions)
        obs, _, _, _, info = envs.step(actions)
        if "_episode" in info:
            first = info["_episode"] & np.isnan(returns)
            returns[first] = info["episode"]["r"][first]
        if not np.isnan(returns).any():
            break
    else:  # an episode still running counts its return so far
        print(f"{SCRIPT}: evaluation cut at {EVAL_MAX_STEPS:,} steps; give {args.env_id} a "
              "time limit (max_episode_steps)")
        returns = np.where(np.isnan(returns), envs.episode_returns, returns)
    envs.close()
    return returns


def restore(checkpoint, models, args):
    """Put a checkpoint's state into each model; one that does not fit is bad input."""
    try:
        for name, model in models.items():
            model.load_state_dict(checkpoint[name])
    except Exception as e:
        fail(f"checkpoint {args.eval_checkpoint} does not fit {args.env_id}'s networks: "
             f"{type(e).__name__}: {(str(e).splitlines() or [''])[0]}")


def goal(args):
    """(threshold, window, holds_on, source, budget): GOALS's (for `budget` steps), else the
    reward_threshold over 20 returns; --stop-at-return's at any budget. holds_on "train": the
    last-window mean at the end; "eval": the final evaluation; "gain": that less start_return."""
    env, goals = args.env_id.rpartition(":")[2], globals().get("GOALS", {})
    threshold, window, holds_on, budget = goals.get(
        env, (getattr(gym.registry.get(env), "reward_threshold", None), 20, "train", None))
    if args.stop_at_return is not None:
        return args.stop_at_return, window, holds_on, "--stop-at-return", None
    return threshold, window, holds_on, "GOALS" if env in goals else "reward_threshold", budget


class Run:
    """A run and its folder: config.json, CSV rows flushed as they come (and to TensorBoard),
    evaluations; train() the rest. `models`: what a checkpoint holds (restored from one)."""

    def __init__(self, args, device, models, checkpoint=None, rollout_steps=1, note=""):
        if checkpoint is not None:
            restore(checkpoint, models, args)
        name = "__".join([args.env_id.replace("/", "-").replace(":", "-"), args.exp_name,
                          str(args.seed), str(int(time.time()))])
        self.path, suffix = os.path.join(args.output_dir, name), 1
        while os.path.exists(self.path):  # a run with the same flags in the same second
            suffix += 1
            self.path = os.path.join(args.output_dir, f"{name}-{suffix}")
        versions = {"python": sys.version.split()[0], "gymnasium": gym.__version__,
                    "numpy": np.__version__}
        versions["torch"] = torch.__version__
        config = {**asdict(args), "device": str(device), "versions": versions}
        if args.track:  # before the folder and the event files (it syncs those made after it)
            import wandb  # not a requirement: check_args found it
            try:
                wandb.init(project=args.wandb_project_name, entity=args.wandb_entity, config=config,
                           name=os.path.basename(self.path), sync_tensorboard=True)
            except wandb.errors.Error as e:
                fail(f"--track: {' '.join(str(e).split())} Or set WANDB_MODE=offline: the run "
                     "stays here until `wandb sync` uploads it")
        try:
            os.makedirs(self.path)
        except OSError as e:
            fail(f"cannot create the run folder {self.path}: {e.strerror}")
        with open(os.path.join(self.path, "config.json"), "w") as f:
            json.dump(config, f, indent=2)
        self.tensorboard = TensorBoardWriter(self.path) if args.tensorboard or args.track else None
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
        self.start, self.last_print, self.last_step = time.time(), time.time(), 0
        print(f"{SCRIPT}: {args.env_id}, seed {args.seed}{note}")  # after the device's line
        if getattr(args, "preset", None):  # the settings the environment's family picked
            others = " or ".join(f"--preset {name}" for name in PRESETS if name != args.preset)
            print(f"{SCRIPT}: the {args.preset} preset, {PRESETS[args.preset][0]}; {others} "
                  "for another, a flag for one setting")

    def elapsed(self):
        return time.time() - self.start

    def write_row(self, filename, **row):
        """A row of a CSV file (its header at first use), and to TensorBoard (the rule above)."""
        if filename not in self.files:
            f = open(os.path.join(self.path, filename), "w", newline="")
            self.files[filename] = (f, csv.DictWriter(f, fieldnames=list(row) or [
                "global_step", "wall_time", "episode_return", "episode_length"]))  # episodes.csv's
            self.files[filename][1].writeheader()
        f, writer = self.files[filename]
        if row:
            writer.writerow(row)
        for column, value in row.items() if self.tensorboard else ():
            if column not in ("global_step", "wall_time") and value != "":  # "": no value
                folder = "losses" if filename == "updates.csv" else "charts"
                self.tensorboard.add_scalar(COMMON_NAMES.get(column, f"{folder}/{column}"), value,
                                            row["global_step"], self.start + row["wall_time"])
        if self.tensorboard:
            self.tensorboard.flush()  # as the CSV file: a run that crashes keeps its rows
        f.flush()

    def step(self, global_step, info=None):
        """After each environment step: --eval-every's evaluation, the episodes that ended
        (RecordEpisodeStatistics's info), the progress line; True at --stop-at-return: stop."""
        every, previous, self.last_step = self.args.eval_every, self.last_step, global_step
        self.summary["global_steps"] = max(self.summary["global_steps"], global_step)
        if every and global_step // every > previous // every:
            self.evaluation(global_step)
        if time.time() - self.last_print >= 2.0:
            self.last_print = time.time()
            print(progress_line(global_step, self.budget, global_step / self.elapsed(),
                                self.recent_return()))
        for i in np.flatnonzero(info.get("_episode", [])) if info else ():
            self.episode(global_step, info["episode"]["r"][i], info["episode"]["l"][i])
        return self.reached(self.args.stop_at_return, global_step)

    def episode(self, global_step, episode_return, episode_length):
        """A training episode's row; the step where the goal's mean was first reached."""
        self.summary["global_steps"] = max(self.summary["global_steps"], global_step)
        self.returns.append(float(episode_return))
        self.ends.append(global_step)  # where it ended, for curve.png
        self.write_row("episodes.csv", global_step=global_step, wall_time=round(self.elapsed(), 4),
                       episode_return=float(episode_return), episode_length=int(episode_length))
        if self.summary["holds_on"] != "gain":  # a gain is measured once, at the end
            self.reached(self.summary["solved_threshold"], global_step)

    def update(self, global_step, loss=0.0, /, **diagnostics):
        """An update's row of diagnostics; True, and no row, when `loss` is NaN or inf."""
        if self.non_finite(loss, global_step):
            return True
        wall_time = self.elapsed()
        self.write_row("updates.csv", global_step=global_step, wall_time=round(wall_time, 4),
                       sps=int(global_step / wall_time), **diagnostics)
        self.measure(global_step, "update")
        return False

    def evaluation(self, global_step):  # a row of evaluations.csv; --save-model's best model
        wall_time, returns = self.elapsed(), evaluate(self.args, self.models)
        mean, std = float(returns.mean()), float(returns.std())
        self.write_row("evaluations.csv", global_step=global_step, wall_time=round(wall_time, 4),
                       eval_return_mean=mean, eval_return_std=std)
        if self.args.save_model and mean > max((m for _, m, _ in self.evaluations), default=-math.inf):
            save_checkpoint(os.path.join(self.path, "best_" + CHECKPOINT), self.models, self.args)
        self.evaluations.append((global_step, mean, std))
        self.measure(global_step, "evaluation")

    def measure(self, global_step, moment, **what):  # the optional hook measure(run, step, moment)
        return measure(self, global_step, moment, **what) if "measure" in globals() else None

    def non_finite(self, loss, global_step):  # True, said, the run marked interrupted
        if math.isfinite(loss):
            return False
        print(f"{SCRIPT}: the loss became non-finite (NaN or inf) at step {global_step}; "
              "stopping (try a lower --learning-rate)")
        self.summary["interrupted"] = True
        return True

    def recent_return(self, window=20):  # the mean of the last `window` training returns
        return float(np.mean(self.returns[-window:])) if self.returns else None

    def reached(self, threshold, global_step):  # the window's mean at threshold; the first step kept
        if (threshold is None or len(self.returns) < self.window
                or self.recent_return(self.window) < threshold):
            return False
        self.summary["solved_at_step"] = self.summary["solved_at_step"] or global_step
        return True

    def train(self, train, envs=None):
        """Train (unless --eval-checkpoint), save, evaluate, draw, print the closing line; the
        summary. Ctrl-C stops training or the evaluation: the run is written, then re-raised."""
        s, args, stopped = self.summary, self.args, False
        try:
            if args.eval_checkpoint is None:
                train()
        except KeyboardInterrupt:
            stopped = s["interrupted"] = True
        finally:
            if envs is not None:
                envs.close()
        s["train_return_last20"], s["wall_time_s"] = self.recent_return(), round(self.elapsed(), 3)
        if args.save_model and args.eval_checkpoint is None:
            save_checkpoint(os.path.join(self.path, CHECKPOINT), self.models, args)
        self.close()
        self.judge()  # summary.json now: Ctrl-C during the evaluation keeps it
        try:
            if args.eval_episodes and not s["interrupted"]:
                returns = evaluate(args, self.models, os.path.join(self.path, "videos")
                                   if args.capture_video else None)
                s["eval_return_mean"], s["eval_return_std"] = float(returns.mean()), float(returns.std())
        except KeyboardInterrupt:
            stopped = True
        if stopped:
            print(f"{SCRIPT}: interrupted; {self.path} keeps the run so far")
        curve = self.draw_curve()
        print(" | ".join(self.verdict() + ([f"curve {curve}"] if curve else [])))
        if args.track:  # the summary and the evaluation's videos to W&B, whose run then ends
            import wandb
            wandb.run.summary.update(s)
            videos = sorted(glob.glob(os.path.join(self.path, "videos", "*.mp4")))
            if videos:
                wandb.log({"videos": [wandb.Video(video) for video in videos]})
            wandb.finish(exit_code=130 if stopped else 0)
        if stopped:
            raise KeyboardInterrupt
        return s

    def judge(self):
        """summary.json: end_return, holds_on's measure at the end (a goal can be reached and
        lost), holds (end_return >= solved_threshold; null for a run stopped or given fewer steps
        than its goal is for: then it returns True)."""
        s, short = self.summary, (self.summary["goal_budget"] or 0) > self.args.total_timesteps
        train = self.recent_return(self.window) if len(self.returns) >= self.window else None
        end = train if s["holds_on"] == "train" else s["eval_return_mean"]
        start = s["start_return"] if s["holds_on"] == "gain" else 0.0
        s["end_return"] = None if None in (end, start) else end - start
        s["holds"] = (None if None in (s["solved_threshold"], s["end_return"]) or s["interrupted"]
                      or short else s["end_return"] >= s["solved_threshold"])
        with open(os.path.join(self.path, "summary.json"), "w") as f:
            json.dump(s, f, indent=2)
        return short

    def verdict(self):  # the closing line's parts: steps, returns, the goal or the preset
        s, threshold, short, args = self.summary, self.summary["solved_threshold"], self.judge(), self.args
        line = [f"{SCRIPT}: run folder {self.path}", f"global_steps {s['global_steps']:,}"] + [
            f"{key} " + ("-" if s[key] is None else f"{s[key]:.2f}")
            for key in ("train_return_last20", "eval_return_mean")]
        preset = getattr(args, "preset", None)  # no GOALS entry: the preset that ran, named
        ran = ([f"no goal for {args.env_id}; the {preset} preset ran"]
               if preset and self.source == "reward_threshold" else [])
        if threshold is None:
            return line + ran
        if s["end_return"] is not None:  # the figure the run is judged on, where it ends
            if s["holds_on"] == "train":
                end = f"the last-{self.window} mean at the end {s['end_return']:.2f}"
            elif s["holds_on"] == "eval":
                end = f"the final evaluation {s['end_return']:.2f}"
            else:
                end = (f"the gain over the start ({s['start_return']:.2f} -> "
                       f"{s['eval_return_mean']:.2f}) {s['end_return']:+.2f}")
            if s["holds"] is not None:
                line.append(f"{'holds' if s['holds'] else 'does not hold'}: {end} "
                            f"{'>=' if s['holds'] else '<'} {threshold:g}")
            elif short:
                line.append(f"not judged, {args.total_timesteps:,} steps where its goal "
                            f"{threshold:g} is for {s['goal_budget']:,}: {end}")
        if s["holds_on"] != "gain":  # a gain has no training mean to reach it first
            line.append(f"solved_at_step {s['solved_at_step'] or 'not reached'} "
                        f"(last-{self.window} mean >= {self.source} {threshold:g})")
        return line + ran

    def draw_curve(self):
        """--curve: curve.png, its path (None: nothing to draw): returns, their mean, evaluations,
        threshold; a Figure of its own, not pyplot's. A script's draw_own_curve instead."""
        if not self.args.curve or "draw_own_curve" in globals():
            return draw_own_curve(self) if self.args.curve else None
        s, evaluations = self.summary, list(self.evaluations)
        if s["eval_return_mean"] is not None:
            evaluations.append((s["global_steps"], s["eval_return_mean"], s["eval_return_std"]))
        if not (self.returns or evaluations):
            return None
        from matplotlib.figure import Figure  # only a run that draws pays for the import
        fig = Figure(figsize=(7, 4.2), layout="constrained")
        ax = fig.add_subplot()
        if self.returns:  # each return, the mean of the goal's window where each episode ended
            means = [np.mean(self.returns[max(0, i + 1 - self.window):i + 1]) for i in range(len(self.ends))]
            ax.plot(self.ends, self.returns, ".", ms=3, alpha=0.3, color="C0", label="episode return")
            ax.plot(self.ends, means, color="C0", label=f"mean of the last {self.window}")
        if evaluations:
            ax.errorbar(*zip(*evaluations), fmt="o", color="C1", capsize=3, label="greedy evaluation")
        if s["solved_threshold"] is not None:
            on = "evaluation" if s["holds_on"] == "eval" else f"last-{self.window} mean"
            ax.axhline(s["solved_threshold"], ls="--", color="gray",
                       label=f"threshold {s['solved_threshold']:g} ({on})")
        ax.set(xlabel="environment steps", ylabel="return", title=f"{SCRIPT} on {s['env_id']}, "
               f"seed {s['seed']}{' (interrupted)' if s['interrupted'] else ''}")
        ax.legend(fontsize="small")
        fig.savefig(os.path.join(self.path, "curve.png"), dpi=100)
        return os.path.join(self.path, "curve.png")

    def close(self):
        for f, _ in self.files.values():
            f.close()
        if self.tensorboard:
            self.tensorboard.close()


SUMMARY_KEYS = ("algorithm", "env_id", "seed", "global_steps", "wall_time_s",
                "train_return_last20", "eval_return_mean", "eval_return_std", "eval_episodes",
                "solved_threshold", "solved_window", "holds_on", "goal_budget", "start_return",
                "end_return", "holds", "solved_at_step", "interrupted")
COMMON_NAMES = {"episode_return": "charts/episodic_return", "sps": "charts/SPS",
                "episode_length": "charts/episodic_length", "learning_rate": "charts/learning_rate",
                "eval_return_mean": "eval/episodic_return", "eval_return_std": "eval/episodic_return_std"}


def progress_line(global_step, total_steps, sps, recent_return):  # minutes left at sps
    minutes, recent = (total_steps - global_step) / sps / 60, recent_return
    return (f"step {global_step:,}/{total_steps:,} | {sps:,.0f} sps | {minutes:.0f} min left | "
            f"return (last 20) {'n/a' if recent is None else f'{recent:.1f}'}")
CHECKPOINT = "model.pt"


def save_checkpoint(path, models, args):  # each model's state dict under its name; the flags
    torch.save({**{name: m.state_dict() for name, m in models.items()}, "args": asdict(args)}, path)


def read_checkpoint(path):  # safely: weights_only loads tensors and plain data, never code
    return torch.load(path, map_location="cpu", weights_only=True)


def load_checkpoint(args):
    """--eval-checkpoint's (args with its MODEL_FLAGS, checkpoint), checked; (args, None)."""
    if (path := args.eval_checkpoint) is None:
        return args, None
    path = os.path.join(path, CHECKPOINT) if os.path.isdir(path) else path
    try:
        checkpoint = read_checkpoint(path)
        flags = {name: checkpoint["args"][name] for name in ("env_id", *MODEL_FLAGS)}
    except Exception as e:
        fail(f"checkpoint {path} does not exist" if not os.path.isfile(path) else f"checkpoint "
             f"{path} is not a {SCRIPT} {CHECKPOINT} ({type(e).__name__}); make one with --save-model")
    if flags["env_id"] != args.env_id:
        fail(f"checkpoint {path} was made for {flags['env_id']}; pass --env-id {flags['env_id']}")
    return replace(args, **flags), checkpoint


def cli():  # bad input: one line, status 2; Ctrl-C: dying of SIGINT stops a shell loop too
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
# Plumbing for presets: the settings that follow the environment's family
# ---------------------------------------------------------------------------------------
# Stamped from plainrl's plumbing/presets.py by its stamp.py: edit it there, not here.
def family(obs_shape, continuous):
    """The family that picks a preset: "image" (3 axes), "continuous" (Box actions), "discrete"."""
    return "image" if len(obs_shape or ()) == 3 else "continuous" if continuous else "discrete"


def preset_for(args, obs_space, action_space):
    """The preset of the environment: the script's preset_name where it has one (dqn.py's,
    sac.py's and ddpg_td3.py's budget), else its family. One the script has no preset for
    is a space it does not take: check_spaces says why, in one line."""
    name = (preset_name(args, obs_space, action_space) if "preset_name" in globals() else
            family(obs_space.shape, isinstance(action_space, gym.spaces.Box)))
    if (args.preset or name) not in PRESETS:
        check_spaces(args, obs_space, action_space)
    return name


def fill_preset(args, family):
    """args with --preset the family unless it is given, and every flag left at None taken
    from PRESETS[preset] = (its source, {flag: value}): a flag given on the command line wins."""
    preset = args.preset or family
    flags = PRESETS[preset][1]
    return replace(args, preset=preset,
                   **{name: value for name, value in flags.items() if getattr(args, name) is None})
# End of plumbing/presets.py


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
    """es.py's own flags, checked by prepare before training."""
    check_range(args, positive=["population_size", "episodes_per_member", "sigma", "learning_rate"],
                nonnegative=["l2_coef"])
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
GOALS = {"CartPole-v1": (475, 20, "eval", 500_000), "Pendulum-v1": (-200, 20, "eval", 3_000_000),
         "Acrobot-v1": (-100, 100, "eval", 300_000), "MountainCar-v0": (-110, 100, "eval", 300_000),
         "LunarLander-v3": (200, 100, "eval", 300_000),
         "InvertedDoublePendulum-v5": (9100, 100, "eval", 300_000),
         "Swimmer-v5": (360, 100, "eval", 300_000), "Reacher-v5": (-3.75, 100, "eval", 300_000)}
MODEL_FLAGS = ("policy", "hidden_sizes", "norm_obs")  # a checkpoint's network is built by these


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

# From plainrl (MIT licence, (c) 2026 the plainrl authors): keep this line in a copy.
"""Deep Q-Network (DQN) with experience replay and a target network, in one file.

DQN learns the action-value function Q(s, a) of the greedy policy with a neural network.
It acts epsilon-greedily (a random action with probability epsilon, else the action of
highest Q), stores every transition in a replay buffer, and regresses Q(s, a) on minibatches
drawn from it towards a target computed with a slowly moving copy, the target network.

Key equations (transitions (s, a, r, s', terminated) from the buffer; theta the Q-network's
parameters, theta' the target's, gamma the discount, t the step, C --target-network-frequency):

    target      y = r + gamma * (1 - terminated) * max_a' Q_target(s', a')
    double DQN  y = r + gamma * (1 - terminated) * Q_target(s', argmax_a' Q(s', a'))
    loss        L = mean( huber(Q(s, a) - y) )   or   mean( (Q(s, a) - y)^2 )
    target net  theta' <- tau * theta + (1 - tau) * theta'   every C steps (tau = 1: copy)
    epsilon     eps_t = start_e + (end_e - start_e) * min(1, t / (fraction * budget))
    lr          lr_t  = lr * (1 - t / budget)   (--anneal-lr)

A time-limit truncation is not a termination: the target bootstraps from the true final s'.
The network and the flags left at None (PRESETS) follow the observation: an MLP and CleanRL's
settings for a vector (chosen for where a run *ends*: results.md, dqn-CartPole-v1), the DQN
paper's convolutional network (smaller for MinAtar's grids) and the MinAtar paper's settings.

Papers:
    Mnih et al. 2013, "Playing Atari with Deep Reinforcement Learning", arXiv:1312.5602
    Mnih et al. 2015, "Human-level control through deep reinforcement learning", Nature 518
    van Hasselt, Guez & Silver 2016, "Deep Reinforcement Learning with Double Q-learning", AAAI 2016
    Lillicrap et al. 2016, "Continuous control with deep reinforcement learning" (tau)
    Pardo et al. 2018, "Time Limits in Reinforcement Learning", ICML 2018
    Young & Tian 2019, "MinAtar: An Atari-Inspired Testbed for Thorough and Reproducible
        Reinforcement Learning Experiments", arXiv:1903.03176 (the small-grid network)

Run:
    python dqn.py --env-id CartPole-v1
    python dqn.py --env-id CartPole-v1 --no-double-dqn --loss huber
    python dqn.py --env-id MinAtar/Breakout-v1 --total-timesteps 1000000 --no-anneal-lr \
        --no-double-dqn    # DQN_MINATAR: the image preset is the MinAtar paper's settings

Writes runs/<env_id>__dqn__<seed>__<unix_time>/ (plainrl's CONTRIBUTING.md, "What a run
writes"); updates.csv's q_start beside discounted_return shows overestimation (van Hasselt).
"""

# ---------------------------------------------------------------------------------------
# Imports
# ---------------------------------------------------------------------------------------
import os
import warnings
from dataclasses import dataclass
from typing import Literal, Optional

import gymnasium as gym
import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
import tyro

SCRIPT = os.path.basename(__file__)


# ---------------------------------------------------------------------------------------
# Flags
# ---------------------------------------------------------------------------------------
@dataclass
class Args:
    # The run folder's flags (--output-dir, --save-model, --eval-checkpoint, --track, ...)
    # come after these: every script shares them, declared once in RunFlags below the banner.
    # ALE/ ids (Atari) need ale-py, MinAtar/ ids the minatar package.
    env_id: str = "CartPole-v1"
    """a Gymnasium id (or module:id) with Discrete actions and flat Box or image observations"""
    seed: int = 1
    """seeds Python, NumPy, torch and the environments"""
    total_timesteps: int = 500_000
    """the training budget in environment steps, all environments together"""
    cuda: tyro.conf.DisallowNone[Optional[bool]] = None
    """--cuda: the GPU; --no-cuda: the CPU; neither: the GPU for an image, the CPU for a vector"""
    exp_name: str = os.path.splitext(SCRIPT)[0]
    """the experiment name, part of the run folder's name"""
    eval_episodes: int = 10
    """greedy evaluation episodes after training (0 skips evaluation)"""
    eval_every: int = 0
    """also evaluate greedily every N environment steps (0: only after training)"""
    stop_at_return: Optional[float] = None
    """stop once the training mean over its goal's window (GOALS; else 20 episodes) reaches this"""

    # Algorithm. A flag left at None takes the value of the observation's preset (PRESETS).
    preset: tyro.conf.DisallowNone[Optional[Literal["vector", "long", "image"]]] = None
    """the settings of the flags left at None (None: by the observation and budget, PRESETS)"""
    num_envs: int = 1
    """N: parallel environments (synchronous vector environment)"""
    # An image's 2.5e-4 is the MinAtar paper's and the Nature DQN's (RMSProp); 1e-4 in SB3.
    learning_rate: tyro.conf.DisallowNone[Optional[float]] = None
    """the learning rate where --anneal-lr starts (None: 1e-3 for a vector, 2.5e-4 long or image)"""
    # rmsprop: the MinAtar paper's (make_optimizer); Adam for a vector and an image alike.
    optimizer: Literal["adam", "rmsprop"] = "adam"
    """adam (CleanRL's and SB3's DQN) or rmsprop (the MinAtar paper's centered RMSProp)"""
    # Constant in the DQN papers and the MinAtar paper; on here, for images too, as in
    # rl-baselines3-zoo's linear schedules: on CartPole a good policy otherwise drifts away.
    anneal_lr: bool = True
    """decay the learning rate linearly to 0 over the budget (so the budget changes the schedule)"""
    # The oldest transition is overwritten when the buffer is full; it is never allocated larger
    # than --total-timesteps. An image's 100,000 as in the MinAtar paper; 1,000,000 in the
    # Nature DQN.
    buffer_size: tyro.conf.DisallowNone[Optional[int]] = None
    """replay buffer capacity in transitions (None: vector 50,000, long 10,000, image 100,000)"""
    gamma: float = 0.99
    """discount factor (0.99 in the DQN papers)"""
    # 1, a hard copy, in the DQN papers; 0.001 in DDPG's soft updates.
    tau: float = 1.0
    """target network update rate: theta' <- tau*theta + (1 - tau)*theta' (1 in the DQN papers)"""
    # An image's 1,000, with its gradient step per environment step, is the MinAtar paper's
    # 1,000 gradient steps; the Nature DQN: 10,000 gradient steps, 40,000 environment steps.
    target_network_frequency: tyro.conf.DisallowNone[Optional[int]] = None
    """environment steps between target updates (None: vector 500, long 500, image 1,000)"""
    # An image's 32 as in the DQN papers and the MinAtar paper.
    batch_size: tyro.conf.DisallowNone[Optional[int]] = None
    """transitions sampled for each gradient step (None: vector 128, long 128, image 32)"""
    start_e: float = 1.0
    """epsilon of the epsilon-greedy policy at the start (1.0 in the Nature DQN)"""
    # A vector's 0.01 as in later work and SB3; an image's 0.1 as in the Nature DQN and the
    # MinAtar paper.
    end_e: tyro.conf.DisallowNone[Optional[float]] = None
    """epsilon at the end of the linear decay, kept (None: 0.01 for a vector or long, 0.1 image)"""
    # The Nature DQN: 1M of its 50M frames, 0.02; the MinAtar paper: its first 100,000 steps,
    # 0.1 of a 1M budget, as benchmark.py runs it. A fraction here, so a shorter budget explores
    # for fewer steps.
    exploration_fraction: float = 0.1
    """the fraction of the budget over which epsilon decays from start_e to end_e (0.1 in SB3)"""
    # An image's 5,000 as in the MinAtar paper; 50,000 in the Nature DQN.
    learning_starts: tyro.conf.DisallowNone[Optional[int]] = None
    """environment steps before learning starts (None: vector 1,000, long 10,000, image 5,000)"""
    # An image's 1 as in the MinAtar paper; 4 in the Nature DQN.
    train_frequency: tyro.conf.DisallowNone[Optional[int]] = None
    """environment steps between updates (None: vector 4, long 10, image 1)"""
    gradient_steps: tyro.conf.DisallowNone[Optional[int]] = None
    """gradient steps per update (None: 1, as in the DQN papers)"""
    # Huber is smooth L1 with delta 1, the Nature DQN's error clipping; an image's huber as in the
    # MinAtar paper.
    loss: Optional[Literal["huber", "mse"]] = None
    """loss on the TD error: Huber or squared error (None: mse for a vector or long, huber image)"""
    max_grad_norm: float = 10.0
    """gradient clipping: the largest global norm of the gradient (10 in SB3's DQN)"""
    # On for images too; the MinAtar paper's DQN is not double.
    double_dqn: bool = True
    """double DQN: choose the next action with the online network, value it with the target"""
    # Image observations get the convolutional network, whose sizes are fixed.
    hidden_size: int = 128
    """width of the two hidden layers of the Q-network, for vector observations"""
    # ALE/ ids only. The game plays on after a lost life, as in the DQN paper and CleanRL.
    terminal_on_life_loss: bool = True
    """Atari: a lost life ends the training episode (no bootstrap); evaluation plays whole games"""
    log_interval: int = 1_000
    """environment steps between rows of updates.csv"""
    # An image's 0.05 as the Nature DQN and CleanRL evaluate, since a greedy policy can walk in
    # loops that a little randomness escapes; a vector's 0, greedy, as CartPole's benchmark rows
    # were measured, where CleanRL takes 0.05 on every task.
    eval_epsilon: tyro.conf.DisallowNone[Optional[float]] = None
    """epsilon of the epsilon-greedy evaluation (None: 0.05 for an image, 0 for a vector or long)"""


# The presets of the flags left at None: a vector's for budgets up to SHORT_BUDGET; past it a
# vector's long, CleanRL's dqn.py's settings with epsilon down to 0.01 over 10% of the budget
# (CleanRL: 0.05 over 50%); an image's, the MinAtar paper's (Young & Tian 2019; its RMSProp is
# Adam here). Chosen on seeds 1-5 for the 20-episode mean where the run ends (tune.py's
# objective); results.md, "dqn.py's defaults hold".
PRESETS = {
    "vector": ("plainrl's CartPole settings, for budgets up to 200,000 steps", dict(
        learning_rate=1e-3, buffer_size=50_000, target_network_frequency=500, batch_size=128,
        end_e=0.01, learning_starts=1000, train_frequency=4, gradient_steps=1, loss="mse",
        eval_epsilon=0.0)),
    "long": ("CleanRL's dqn.py with epsilon down to 0.01 over a tenth of the budget", dict(
        learning_rate=2.5e-4, buffer_size=10_000, target_network_frequency=500, batch_size=128,
        end_e=0.01, learning_starts=10_000, train_frequency=10, gradient_steps=1, loss="mse",
        eval_epsilon=0.0)),
    "image": ("the MinAtar paper's DQN, Adam for its RMSProp", dict(
        learning_rate=2.5e-4, buffer_size=100_000, target_network_frequency=1000, batch_size=32,
        end_e=0.1, learning_starts=5000, train_frequency=1, gradient_steps=1, loss="huber",
        eval_epsilon=0.05)),
}


SHORT_BUDGET = 200_000
"""the longest budget a vector's preset is for; a longer one takes the long preset"""


def preset_name(args, obs_space, action_space):
    """Which of PRESETS the flags left at None take: "image" for an image, else "vector" for a
    budget up to SHORT_BUDGET steps and "long" past it."""
    if len(obs_space.shape or ()) == 3:  # a Tuple or Dict observation has none: refused later
        return "image"
    return "vector" if args.total_timesteps <= SHORT_BUDGET else "long"


# ---------------------------------------------------------------------------------------
# The math
# ---------------------------------------------------------------------------------------
def linear_schedule(start, end, duration, t):
    """A value at environment step t, linear from `start` at t = 0 to `end` at t = duration,
    then constant: epsilon (start_e to end_e over fraction * budget) and, with --anneal-lr,
    the learning rate (lr to 0 over the budget).

        x_t = start + (end - start) * min(1, t / duration)      (end if duration = 0)
    """
    if duration <= 0:
        return end
    return start + (end - start) * min(1.0, t / duration)


def crossings(global_step, num_envs, every):
    """How many multiples of `every` lie among the environment steps (g - N, g] that the
    last step of N environments took, g the global step after it:

        floor(g / every) - floor((g - N) / every)

    Updates, target updates and log rows happen that many times, so their rates in
    environment steps are the same whatever N is.
    """
    return global_step // every - (global_step - num_envs) // every


def dqn_targets(rewards, next_q_target, terminated, gamma, next_q_online=None):
    """TD targets of a batch of B transitions, all inputs tensors.

    rewards [B]; terminated [B], 0/1 or bool; next_q_target [B, A] = Q_target(s', .) and,
    for double DQN, next_q_online [B, A] = Q(s', .) of the online network:

        y = r + gamma * (1 - terminated) * max_a Q_target(s', a)                    (DQN)
        y = r + gamma * (1 - terminated) * Q_target(s', argmax_a Q(s', a))   (double DQN)

    A truncated step is not terminated: it bootstraps from s', its true final observation.
    Returns y [B].
    """
    if next_q_online is None:
        next_value = next_q_target.max(dim=1).values
    else:
        next_action = next_q_online.argmax(dim=1, keepdim=True)
        next_value = next_q_target.gather(1, next_action).squeeze(1)
    return rewards + gamma * (1.0 - terminated.to(rewards.dtype)) * next_value


def td_loss(q_values, actions, targets, loss="mse"):
    """The regression loss of Q(s, a) towards the targets on a batch of B transitions.

    q_values [B, A] = Q(s, .), actions [B] (long), targets [B]; with delta = Q(s, a) - y:

        huber:  mean( 0.5 * delta^2 if |delta| <= 1 else |delta| - 0.5 )
        mse:    mean( delta^2 )

    Returns (loss, Q(s, a) [B]).
    """
    q_taken = q_values.gather(1, actions.unsqueeze(1)).squeeze(1)
    if loss == "huber":
        return F.smooth_l1_loss(q_taken, targets), q_taken
    return F.mse_loss(q_taken, targets), q_taken


def make_optimizer(params, name, learning_rate):
    """The Q-network's optimizer. Each update is elementwise: theta any parameter tensor, g
    its gradient (the same shape), v and m running statistics of that shape, lr the rate:

        adam     Adam with torch's default eps 1e-8, as CleanRL's and Stable-Baselines3's DQN
                 (fused=True: torch's one-kernel Adam, the same update; Performance notes)
        rmsprop  the MinAtar paper's centered RMSProp, as its examples/dqn.py calls torch's
                 (alpha 0.95, eps 0.01, no momentum):
                     v <- 0.95 v + 0.05 g^2        m <- 0.95 m + 0.05 g
                     theta <- theta - lr * g / (sqrt(v - m^2) + 0.01)
                 The Nature DQN's RMSProp adds its 0.01 under the square root; MinAtar's code,
                 whose curves benchmark.py compares with, adds it outside, as here.
    """
    if name == "rmsprop":
        return torch.optim.RMSprop(params, lr=learning_rate, alpha=0.95, eps=0.01, centered=True)
    return torch.optim.Adam(params, lr=learning_rate, eps=1e-8, fused=True)


@torch.no_grad()
def soft_update(target_net, source_net, tau):
    """Move every parameter of target_net a fraction tau of the way to source_net's, in
    place (Polyak averaging; tau = 1 copies):

        theta' <- tau * theta + (1 - tau) * theta'      (theta' of target_net, theta of source_net)
    """
    for target, source in zip(target_net.parameters(), source_net.parameters()):
        target.lerp_(source, tau)


class ReplayBuffer:
    """A ring buffer of the last `capacity` transitions (s, a, r, s', terminated) in
    preallocated NumPy arrays, so memory stays constant however long the run.

    Row i holds one transition: obs s, action a, reward r, next_obs s' and the terminated
    flag. s' is the true final observation where the episode ended at that step (not the
    next episode's first one). Transitions of N environments arrive N rows at a time, in
    environment order; capacity is a multiple of N, so a write never wraps mid-way.
    Observations keep obs_dtype: uint8 frames take a quarter of the memory of float32 ones
    (100,000 Atari transitions, s and s' of 4 x 84 x 84 bytes each: 5.6 GB). The buffer stays
    in host memory and only the sampled batch goes to the device, as in Stable-Baselines3.
    """

    def __init__(self, capacity, obs_shape, device, rng, obs_dtype=np.float32):
        self.capacity, self.pos, self.size, self.device, self.rng = capacity, 0, 0, device, rng
        self.obs = np.zeros((capacity, *obs_shape), dtype=obs_dtype)
        self.next_obs = np.zeros((capacity, *obs_shape), dtype=obs_dtype)
        self.actions = np.zeros(capacity, dtype=np.int64)
        self.rewards = np.zeros(capacity, dtype=np.float32)
        self.terminated = np.zeros(capacity, dtype=np.float32)

    def add(self, obs, next_obs, actions, rewards, terminated):
        """Store N transitions (arrays with N rows) over the oldest ones."""
        rows = slice(self.pos, self.pos + len(actions))
        self.obs[rows] = obs
        self.next_obs[rows] = next_obs
        self.actions[rows] = actions
        self.rewards[rows] = rewards
        self.terminated[rows] = terminated
        self.pos = (self.pos + len(actions)) % self.capacity
        self.size = min(self.size + len(actions), self.capacity)

    def sample(self, batch_size):
        """batch_size transitions drawn uniformly, with replacement, from those stored: one
        index vector picks the same rows of every field. Returns tensors on the device
        (obs, actions, rewards, next_obs, terminated)."""
        idx = self.rng.integers(self.size, size=batch_size)
        return tuple(torch.from_numpy(field[idx]).to(self.device) for field in
                     (self.obs, self.actions, self.rewards, self.next_obs, self.terminated))


# ---------------------------------------------------------------------------------------
# Networks
# ---------------------------------------------------------------------------------------
class ImageEncoder(nn.Module):
    """Convolutions from an image to a feature vector, with ReLU after every layer.

    The channel axis is set by convention, never guessed from the sizes (MinAtar's Seaquest
    frames are 10 x 10 x 10): channels_last for H x W x C images, Gymnasium's and MinAtar's
    convention, moved first for the convolutions; channels first (C x H x W) for the stack
    of Atari frames that atari_wrappers makes. 0-255 pixels (byte_pixels) are scaled to [0, 1].
    A convolution's output side is (side - kernel) // stride + 1. Two sizes:

        at least 36 x 36 (Atari's 84 x 84 frames; Mnih et al. 2015): conv 32 8x8 stride 4,
            conv 64 4x4 stride 2, conv 64 3x3 stride 1, linear 512;
            84 -> (84 - 8) // 4 + 1 = 20 -> (20 - 4) // 2 + 1 = 9 -> 9 - 3 + 1 = 7,
            so 64 * 7 * 7 = 3136 inputs to the linear layer
        smaller grids (MinAtar's 10 x 10; Young & Tian 2019): conv 16 3x3 stride 1, linear 128;
            10 -> 8, so 16 * 8 * 8 = 1024 inputs to the linear layer
    """

    def __init__(self, obs_shape, uint8, channels_last=True):
        super().__init__()
        self.channels_last, self.uint8 = channels_last, uint8
        # [C, H, W]: a channels-last frame's axes moved, a channels-first frame's kept
        image_shape = (obs_shape[2], *obs_shape[:2]) if self.channels_last else tuple(obs_shape)
        channels, height, width = image_shape
        large = min(height, width) >= 36
        convs = [(32, 8, 4), (64, 4, 2), (64, 3, 1)] if large else [(16, 3, 1)]
        self.output_size = 512 if large else 128
        layers = []
        for out_channels, kernel, stride in convs:
            layers += [nn.Conv2d(channels, out_channels, kernel, stride), nn.ReLU()]
            channels = out_channels
        self.convs = nn.Sequential(*layers, nn.Flatten())
        with torch.no_grad():  # the linear layer's input size: a blank image run through
            flat_size = self.convs(torch.zeros(1, *image_shape)).shape[1]
        self.linear = nn.Sequential(nn.Linear(flat_size, self.output_size), nn.ReLU())

    def forward(self, obs):
        images = obs.float() / 255.0 if self.uint8 else obs.float()
        if self.channels_last:
            images = images.movedim(-1, -3)  # [B, H, W, C] -> [B, C, H, W]
        return self.linear(self.convs(images))


class QNetwork(nn.Module):
    """From an observation to one Q-value per action, Q(s, .) [B, A]: on a vector, an MLP
    with two hidden ReLU layers; on an image, an ImageEncoder and a linear layer (the DQN
    paper's network on Atari frames)."""

    def __init__(self, obs_shape, num_actions, hidden_size=128, uint8=False, channels_last=True):
        super().__init__()
        if len(obs_shape) == 3:
            self.encoder = ImageEncoder(obs_shape, uint8, channels_last)
            hidden_size = self.encoder.output_size
        else:
            self.encoder = nn.Sequential(nn.Linear(obs_shape[0], hidden_size), nn.ReLU(),
                                         nn.Linear(hidden_size, hidden_size), nn.ReLU())
        self.head = nn.Linear(hidden_size, num_actions)

    def forward(self, obs):
        return self.head(self.encoder(obs))


def q_values_np(q_network, obs):
    """Q(s, .) for a NumPy batch of observations [N, *obs_shape], as a NumPy array [N, A]:
    what acting (argmax_a) and the overestimation check (max_a) read."""
    device = next(q_network.parameters()).device
    with torch.inference_mode():  # no autograd bookkeeping at all, cheaper than no_grad
        return q_network(torch.as_tensor(obs, dtype=torch.float32, device=device)).cpu().numpy()


def greedy_actions(q_network, obs):
    """argmax_a Q(s, a) for a NumPy batch of observations [N, *obs_shape], as a NumPy array [N]."""
    return q_values_np(q_network, obs).argmax(axis=1)


# ---------------------------------------------------------------------------------------
# What the agent sees: the vector environment (dqn.py changes observations and rewards only
# on Atari, as the DQN paper did)
# ---------------------------------------------------------------------------------------
def make_vector_env(env_id, num_envs, training=False, life_loss=False, video_folder=None):
    """N copies of env_id in one synchronous vector environment, with SAME_STEP autoreset
    (the observation after an episode ends is the next episode's first; the true last one
    is in info["final_obs"], which train stores as s') and episode statistics recorded by
    Gymnasium's wrapper (episodes.csv's returns). With video_folder, the evaluation's
    environments record their first episode. An Atari id gets atari_wrappers and, in
    training, rewards clipped to their sign after the statistics wrapper, as in the DQN
    paper, and with life_loss a lost life as a termination (LifeLossTermination):
    episodes.csv keeps the score of whole games. A video records the game's own screen,
    before the preprocessing."""
    atari = env_id.startswith("ALE/")
    envs = gym.vector.SyncVectorEnv([lambda i=i: make_game(env_id, video_folder, f"eval-{i}")
                                     for i in range(num_envs)],
                                    autoreset_mode=gym.vector.AutoresetMode.SAME_STEP)
    envs = gym.wrappers.vector.RecordEpisodeStatistics(envs)
    if atari and training and life_loss:  # after the statistics: episodes.csv has whole games
        envs = LifeLossTermination(envs)
    if atari and training:
        envs = gym.wrappers.vector.TransformReward(envs, np.sign)
    return envs


# ---------------------------------------------------------------------------------------
# Training
# ---------------------------------------------------------------------------------------
def train(args, envs, q_network, target_network, run):
    """The DQN loop: act epsilon-greedily in the N environments and store every transition;
    every --train-frequency environment steps take --gradient-steps gradient steps on
    minibatches replayed from the buffer, and every --target-network-frequency steps move
    the target network towards the online one. The run writer records episodes, log rows
    and the summary; the loop stops early at --stop-at-return or at a non-finite loss.
    It runs whole steps of the N environments: the budget is rounded down to them.
    run (Run, below the banner) writes the run folder: step(n, info) records the episodes
    that ended, evaluates, prints progress and says when to stop; update adds a CSV row."""
    device = next(q_network.parameters()).device
    optimizer = make_optimizer(q_network.parameters(), args.optimizer, args.learning_rate)
    rng = np.random.default_rng(args.seed)  # exploration and replay sampling
    num_actions = envs.single_action_space.n
    num_iterations = args.total_timesteps // args.num_envs
    # never larger than the run needs: num_iterations steps of num_envs transitions; frames
    # kept as bytes (uint8 pixels, or MinAtar's bool cells as 0/1), vectors as float32
    obs_space = envs.single_observation_space
    obs_dtype = np.uint8 if obs_space.dtype in (np.uint8, np.bool_) else np.float32
    buffer = ReplayBuffer(min(args.buffer_size, num_iterations * args.num_envs),
                          obs_space.shape, device, rng, obs_dtype)
    exploration_steps = args.exploration_fraction * args.total_timesteps
    global_step, gradient_step, losses, q_means = 0, 0, [], []
    # The overestimation check: V(s_0) = max_a Q(s_0, a) as each episode starts, beside the
    # G_0 = r_0 + gamma r_1 + ... it collects (Atari: clipped rewards, a lost life ends one).
    g0_so_far, discount, starts = np.zeros(args.num_envs), np.ones(args.num_envs), []

    obs, _ = envs.reset(seed=args.seed)
    start_q = q_values_np(q_network, obs).max(axis=1)
    for iteration in range(num_iterations):
        # Act: epsilon-greedy, the network consulted only when some environment needs it.
        epsilon = linear_schedule(args.start_e, args.end_e, exploration_steps, global_step)
        explore = rng.random(args.num_envs) < epsilon
        actions = rng.integers(num_actions, size=args.num_envs)
        if not explore.all():
            actions = np.where(explore, actions, greedy_actions(q_network, obs))
        next_obs, rewards, terminated, truncated, info = envs.step(actions)
        global_step += args.num_envs
        if run.step(global_step, info):  # episodes.csv, evaluation, progress; True: stop
            return

        # Store: where an episode ended, s' is its true final observation (a truncated step
        # bootstraps from it), not the next episode's first one that autoreset returned.
        real_next_obs = next_obs.copy()
        for i in np.flatnonzero(info.get("_final_obs", [])):
            real_next_obs[i] = info["final_obs"][i]
        buffer.add(obs, real_next_obs, actions, rewards, terminated)
        obs = next_obs
        g0_so_far += discount * rewards  # each environment's G_0 so far
        discount *= args.gamma
        for i in np.flatnonzero(terminated | truncated):  # the next episode starts at obs[i]
            starts.append((start_q[i], g0_so_far[i]))
            g0_so_far[i], discount[i] = 0.0, 1.0
            start_q[i] = q_values_np(q_network, obs[i:i + 1]).max()
        if global_step <= args.learning_starts:
            continue

        # Learn: gradient steps on minibatches sampled uniformly from the replay buffer.
        num_gradient_steps = (crossings(global_step, args.num_envs, args.train_frequency)
                              * args.gradient_steps)
        if num_gradient_steps and args.anneal_lr:  # lr_t = lr * (1 - t / budget)
            for group in optimizer.param_groups:
                group["lr"] = linear_schedule(args.learning_rate, 0.0, args.total_timesteps,
                                              global_step)
        for _ in range(num_gradient_steps):
            b_obs, b_actions, b_rewards, b_next_obs, b_terminated = buffer.sample(args.batch_size)
            with torch.no_grad():  # the target is a fixed regression label
                next_q_online = q_network(b_next_obs) if args.double_dqn else None
                targets = dqn_targets(rewards=b_rewards, next_q_target=target_network(b_next_obs),
                                      terminated=b_terminated, gamma=args.gamma,
                                      next_q_online=next_q_online)
            loss, q_taken = td_loss(q_values=q_network(b_obs), actions=b_actions,
                                    targets=targets, loss=args.loss)
            optimizer.zero_grad()
            loss.backward()
            nn.utils.clip_grad_norm_(q_network.parameters(), args.max_grad_norm, foreach=True)
            optimizer.step()
            gradient_step += 1
            losses.append(loss.item())
            q_means.append(q_taken.mean().item())
        # The target network, the step that is easy to forget: every C environment steps.
        for _ in range(crossings(global_step, args.num_envs, args.target_network_frequency)):
            soft_update(target_network, q_network, args.tau)

        # Log: a row of updates.csv every --log-interval steps and after the last step.
        last = iteration == num_iterations - 1
        if losses and (crossings(global_step, args.num_envs, args.log_interval) or last):
            loss_mean = float(np.mean(losses))
            if run.non_finite(loss_mean, global_step):  # says so; the run stops as interrupted
                return
            # q_start, discounted_return: V(s_0) and G_0 of the episodes ended since the last row
            q_start, g_start = np.mean(starts, axis=0).tolist() if starts else ("", "")
            run.update(global_step, epsilon=round(epsilon, 6),
                       learning_rate=optimizer.param_groups[0]["lr"], loss=loss_mean,
                       q_mean=float(np.mean(q_means)), q_start=q_start,
                       discounted_return=g_start, gradient_steps=gradient_step,
                       buffer_size=buffer.size)
            losses, q_means, starts = [], [], []


def main(args: Args) -> dict:
    """Train DQN (or evaluate an --eval-checkpoint), write the run folder, return the summary.
    Ctrl-C stops training; the run folder is written, then KeyboardInterrupt goes on up."""
    # prepare (below the banner): --eval-checkpoint's model read, the environment made and
    # checked, the flags left at None from the preset of the observation and the budget
    # (preset_name), every flag checked (a mistake: one line, exit status 2), the seeds set,
    # the device chosen.
    args, (obs_space, num_actions), checkpoint, device = prepare(args)

    # Set up: the network (on the CPU: denormals flushed), the run folder.
    if device.type == "cpu":  # dead ReLU units' Adam moments decay into denormals, slow on x86
        torch.set_flush_denormal(True)
    shape = (obs_space.shape, num_actions, args.hidden_size)
    layout = image_layout(obs_space, args.env_id)  # pixels.py's: 0-255 pixels, the channel axis
    q_network = QNetwork(*shape, **layout).to(device)
    models = {"q_network": q_network}  # what model.pt holds
    run = Run(args, device, models, checkpoint, rollout_steps=args.num_envs)

    # Train (unless evaluating a checkpoint) from a target network that starts as a copy,
    # then finish: evaluate, save, write, plot.
    target_network = QNetwork(*shape, **layout).to(device)
    target_network.load_state_dict(q_network.state_dict())
    envs = None if checkpoint else make_vector_env(args.env_id, args.num_envs, training=True,
                                                   life_loss=args.terminal_on_life_loss)
    return run.train(lambda: train(args, envs, q_network, target_network, run), envs)


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
# Plumbing for pixels: Atari's and MinAtar's packages and wrappers
# ---------------------------------------------------------------------------------------
# Stamped from plainrl's plumbing/pixels.py by its stamp.py: edit it there, not here.
def make_game(env_id, video_folder=None, name_prefix="eval", **kwargs):
    """gym.make for every id: an ALE/ (Atari) or MinAtar/ id's package imported first (or
    its install named); with video_folder, the game's own screen recorded (make_recorded,
    MinAtar's cells drawn as bytes), then an Atari game's preprocessing (atari_wrappers)."""
    register_game_ids(env_id)
    atari, screen = env_id.startswith("ALE/"), env_id.startswith("MinAtar/") and video_folder

    def make(env_id, **options):  # the wrapper skips Atari's frames itself
        env = gym.make(env_id, **({"frameskip": 1} if atari else {}), **options)
        return MinAtarScreen(env) if screen else env
    env = make_recorded(env_id, video_folder, name_prefix, make, **kwargs)
    return atari_wrappers(env) if atari else env


def check_image(args, obs_space):
    """An image observation (3 axes) the networks' convolutions can take: 3 x 3 pixels or more,
    its height and width read by channels_last's convention."""
    shape = obs_space.shape
    if len(shape) == 3 and min(shape[:2] if channels_last(args.env_id) else shape[1:]) < 3:
        fail(f"{args.env_id} has images of shape {shape}; the smallest convolution needs "
             "3 x 3 pixels or more")


def image_layout(obs_space, env_id):
    """An image network's {"uint8": byte_pixels, "channels_last": channels_last}."""
    return {"uint8": byte_pixels(obs_space), "channels_last": channels_last(env_id)}


def channels_last(env_id):
    """Where an image keeps its channels, by convention and never by its sizes (a 10 x 10 x
    10 Seaquest frame has no shorter side): last (H x W x C) in Gymnasium's images and
    MinAtar's; first (C x H x W) in the stack of 4 frames that atari_wrappers makes of an
    ALE/ id. An environment of one's own with C x H x W images moves the axis to the end
    (gymnasium.wrappers.TransformObservation with np.moveaxis(obs, 0, -1))."""
    return not env_id.startswith("ALE/")


def byte_pixels(space):
    """Whether an image holds 0-255 pixels to scale to [0, 1]: uint8 with 255 at the top of
    its Box (Atari's frames). Any other image is read as it is: MinAtar's cells are 0/1
    whether its build declares them bool (PyPI's 1.0.15) or uint8 with a top of 1 (its
    GitHub code since 2023), and 0/1 divided by 255 would be all but blank."""
    return space.dtype == np.uint8 and bool(np.all(space.high == 255))


def register_game_ids(env_id):
    """ALE/ (Atari) and MinAtar/ ids are registered by packages that gym.make does not import
    by itself: import them here, or say how to install them."""
    for prefix, package, pin in (("ALE/", "ale_py", "ale-py==0.12.1"),
                                  ("ALE/", "cv2", "opencv-python-headless==5.0.0.93"),
                                  ("MinAtar/", "minatar", "minatar==1.0.15")):
        if env_id.startswith(prefix) and importlib.util.find_spec(package) is None:
            fail(f"{env_id} needs the {package} package: pip install {pin}")
    if env_id.startswith("ALE/"):
        gym.register_envs(importlib.import_module("ale_py"))
    elif env_id.startswith("MinAtar/") and env_id not in gym.registry:
        importlib.import_module("minatar.gym").register_envs()


class MinAtarScreen(gym.Wrapper):
    """MinAtar draws its 10 x 10 grid as floats in [0, 1], which a video shows black: bytes
    instead, each cell 16 x 16 pixels."""

    def render(self):
        with warnings.catch_warnings():  # Gymnasium's checker warns of the floats once
            warnings.simplefilter("ignore")
            frame = self.env.render()
        return (frame * 255).astype(np.uint8).repeat(16, axis=0).repeat(16, axis=1)


class FireReset(gym.Wrapper):
    """Presses FIRE (action 1) at the start of a game and after each lost life, in the games
    whose ball or round waits for it (Breakout), as OpenAI's baselines and CleanRL do: a
    policy that never presses it would idle until ALE's cap of 108,000 frames. The press is
    a step of 4 frames that the agent does not take (not counted in the budget); its reward
    is dropped at reset, as theirs, and added to the step's after a lost life. Departures:
    after a lost life theirs drop it too (it is almost always 0: the ball is not yet in
    play), and they press RIGHT (action 2) after FIRE as well; FIRE alone launches the
    ball."""

    def reset(self, **kwargs):
        self.env.reset(**kwargs)
        obs, _, _, _, info = self.env.step(1)
        self.lives = info["lives"]
        return obs, info

    def step(self, action):
        obs, reward, terminated, truncated, info = self.env.step(action)
        if info["lives"] < self.lives and not (terminated or truncated):
            obs, fire_reward, terminated, truncated, info = self.env.step(1)
            reward += fire_reward
        self.lives = info["lives"]
        return obs, reward, terminated, truncated, info


class LifeLossTermination(gym.vector.VectorWrapper):
    """Atari in training (--terminal-on-life-loss): the step that loses a life is terminated
    for the learner (it does not bootstrap), as in the DQN paper and CleanRL, while the game
    plays on with the lives it has left; only a game's real end resets it. Wrapped over the
    episode statistics, so episodes.csv holds whole games. CleanRL's EpisodicLifeEnv fakes a
    reset with a no-op step; here the next life starts from the frame where the last ended."""

    def reset(self, **kwargs):
        obs, info = self.env.reset(**kwargs)
        self.lives = info["lives"].copy()
        return obs, info

    def step(self, actions):
        obs, rewards, terminated, truncated, info = self.env.step(actions)
        lost = info["lives"] < self.lives  # a game that ended shows its next game's lives
        self.lives = info["lives"].copy()
        return obs, rewards, terminated | lost, truncated, info


def atari_wrappers(env):
    """The DQN paper's Atari preprocessing with Gymnasium's own wrappers: up to 30 no-op
    actions at reset, every action repeated for 4 frames (the max of the last two frames
    against flicker), frames gray and resized to 84 x 84, the last 4 stacked into one
    uint8 observation [4, 84, 84] (channels first); FIRE pressed where the game waits for it
    (FireReset). A lost life ends the training episode in make_vector_env, not here:
    Gymnasium's terminal_on_life_loss would start a new game at every lost life. Departure
    from the paper: ALE v5's sticky actions (the previous action repeats with probability
    0.25) stay on, as Machado et al. 2018 recommend."""
    env = gym.wrappers.AtariPreprocessing(env, noop_max=30, frame_skip=4, screen_size=84,
                                          grayscale_obs=True)
    if env.unwrapped.get_action_meanings()[1:2] == ["FIRE"]:
        env = FireReset(env)
    return gym.wrappers.FrameStackObservation(env, 4)
# End of plumbing/pixels.py


# ---------------------------------------------------------------------------------------
# What the plumbing asks of dqn.py: its own checks, its greedy policy, its model's flags
# ---------------------------------------------------------------------------------------
def check_flags(args):
    """dqn.py's own flags, checked once the flags left at None have their preset's values."""
    check_range(args, positive=["num_envs", "buffer_size", "batch_size",
                                "target_network_frequency", "train_frequency", "gradient_steps",
                                "hidden_size", "log_interval", "learning_rate", "max_grad_norm"],
                nonnegative=["learning_starts"],
                fraction=["gamma", "start_e", "end_e", "exploration_fraction", "eval_epsilon"])
    if not 0.0 < args.tau <= 1.0:
        fail(f"--tau must be in (0, 1], got {args.tau}")
    if args.buffer_size < args.batch_size:
        fail(f"--buffer-size {args.buffer_size} is smaller than one batch (--batch-size "
             f"{args.batch_size}); raise it or shrink the batch")
    if args.buffer_size % args.num_envs:
        multiple = max(args.buffer_size // args.num_envs, 1) * args.num_envs
        fail(f"--buffer-size {args.buffer_size} is not divisible by --num-envs {args.num_envs}; "
             f"pass --buffer-size {multiple}, a multiple of {args.num_envs}")
    budget = args.total_timesteps // args.num_envs * args.num_envs  # whole steps of N envs
    if args.eval_checkpoint is None and 0 < args.total_timesteps and args.learning_starts >= budget:
        fail(f"--learning-starts {args.learning_starts} is not below the budget of {budget:,} "
             f"steps (--total-timesteps {args.total_timesteps} in whole steps of --num-envs "
             f"{args.num_envs}): the network would never train; lower it or raise the budget")


def check_spaces(args, obs_space, action_space):
    """Whether dqn.py handles the environment's spaces (an Atari id's as the agent sees them,
    after atari_wrappers); returns (observation space, number of actions)."""
    if not isinstance(action_space, gym.spaces.Discrete):
        fail(f"{args.env_id} has a {type(action_space).__name__} action space; dqn.py needs "
             "Discrete actions (ddpg_td3.py, sac.py and ppo.py take Box ones; no script here "
             "takes MultiDiscrete or MultiBinary)")
    if not (isinstance(obs_space, gym.spaces.Box) and len(obs_space.shape) in (1, 3)):
        fail(f"{args.env_id} has a {type(obs_space).__name__} observation space of shape "
             f"{obs_space.shape}; dqn.py needs a flat Box or an image Box (H x W x C, "
             "channels last; a 2-D frame gets its channel from gymnasium.wrappers.ReshapeObservation; "
             "qlearning.py uses a table for Discrete ones)")
    check_image(args, obs_space)  # pixels.py's: 3 x 3 pixels or more
    return obs_space, int(action_space.n)


def greedy_policy(models, envs):
    """The evaluation's policy, act(obs, info) -> actions: the action of highest Q of the
    online network (--eval-epsilon's random actions are the plumbing's evaluate's)."""
    return lambda obs, info: greedy_actions(models["q_network"], obs)


# What a run is judged on, by environment id (its benchmark task in benchmark.py, its README
# row): (threshold, window of training episodes, "train": the last-window mean at the end,
# or "eval": the final greedy evaluation). Another id: its reward_threshold over 20, "train".
GOALS = {"CartPole-v1": (475, 20, "train", 100_000), "Acrobot-v1": (-100, 20, "train", 100_000),
         "MinAtar/Asterix-v1": (5, 100, "train", 1_000_000),
         "MinAtar/Breakout-v1": (5, 100, "train", 1_000_000),
         "MinAtar/Freeway-v1": (20, 100, "train", 1_000_000),
         "MinAtar/Seaquest-v1": (5, 100, "train", 1_000_000),
         "MinAtar/SpaceInvaders-v1": (20, 100, "train", 1_000_000)}
MODEL_FLAGS = ("hidden_size",)  # a checkpoint's network is built by these


if __name__ == "__main__":
    cli()

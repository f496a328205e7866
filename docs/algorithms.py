"""What the site's algorithm pages say that the scripts cannot say about themselves.

Everything else on a page (the idea, the notes, the flags, the results, the exercises, the
papers, the source) is read from the script, results.json and exercises.py when the site is
built (docs/gen_pages.py). What is written here is held to the scripts by tests/test_site.py:

- `equations`: (docstring line, LaTeX), or (docstring line, LaTeX, place). The line is
  quoted under the rendered equation and must stand, word for word, in the script's module
  docstring: change an equation in the script and the test names the page to change with it.
  A place (a top-level function or `Class.method`) puts that function's code, read from the
  script by name when the page is built (its docstring left out), beside the equation, with a
  link to its line: give it on the last equation that the function computes.
- `loop`: the pseudocode, (what the step does, where the code does it). The place is a
  top-level name (`compute_gae`), a method (`Agent.update`), or `function:Heading`, the
  one-line sub-heading comment `# Heading: ...` inside that function (`train:Rollout`). The
  build links each step to that line of the source and fails where the name is gone.
- `details`: the implementation details and departures, numbered on the page as CleanRL
  numbers them: (what the code does and why, where it does it). The place is written as in
  `loop`, or `function::text`, the first line of that function's body (below its
  docstring) that contains the text (`train::eps=1e-5`). Each text says what the code does
  and its reason; a departure from the paper or the authors' code is named as one, with the
  reason the script's docstring gives. The build fails where a place is gone; a script
  without `details` keeps its docstring's notes alone.
- `road`: where the script sits on the road, what it adds to the one before it.
- `protocols`: how each comparison of the page's Results section was made, one sentence each,
  listed there under the table and figures: (the results.json tasks whose runs it states, the
  sentence). The sentence says what is compared with what, on which seeds, the statistic on
  each side (median, mean), training or evaluation return, and the environment version on each
  side; every number in it stands in results.json or the lab notebook (benchmarks/results.md).
  The test holds each named task's seeds, as the sentence writes them ("101-103"), to its runs
  in results.json; a comparison with a peer run on other seeds names no task.
"""
from dataclasses import dataclass, field


@dataclass(frozen=True)
class Algorithm:
    title: str
    road: str
    equations: list = field(default_factory=list)
    loop: list = field(default_factory=list)
    details: list = field(default_factory=list)
    protocols: list = field(default_factory=list)


# The order a course walks them (the learning path and the navigation).
ORDER = ["qlearning", "dqn", "pqn", "vpg", "trpo", "ppo", "ppo_masked", "ppod", "ppo_lstm",
         "ppo_rnd", "ddpg_td3", "sac", "crossq", "es", "impala", "mappo", "matd3", "grpo",
         "rlhf"]

PPO_CLIP = r"L^{\text{clip}} = \mathbb{E}_t\left[\min\left(\rho_t A_t,\ \operatorname{clip}(\rho_t, 1-\epsilon, 1+\epsilon)\, A_t\right)\right]"
GAE_DELTA = r"\delta_t = r_t + \gamma\,(1 - \text{terminated}_t)\, V(s_{t+1}) - V(s_t)"
GAE_A = r"A_t = \delta_t + \gamma\lambda\,(1 - \text{done}_t)\, A_{t+1}"

# Protocols that more than one page gives, and the clauses they share.
FROM_VPG_TO_PPO = (
    ("vpg-CartPole-v1", "trpo-CartPole-v1", "ppo-CartPole-v1"),
    "The figure From VPG to PPO draws, on CartPole-v1, the median and min-max over seeds of "
    "the 20-episode training mean of vpg.py and trpo.py on fresh seeds 101-110 run to their "
    "500k budget, and of ppo.py on fresh seeds 101-110 run to its 100k budget, each with its "
    "defaults.")
MINATAR_GAMES = ("Asterix", "Breakout", "Freeway", "Seaquest", "SpaceInvaders")
MINATAR_PAPER = (
    "against the MinAtar paper's DQN (Young & Tian 2019), whose curve is the 100-episode moving "
    "average of training returns, the mean of 30 seeds, read off its figure at 1M of 5M frames "
    "on its -v0 games with all 6 actions, where ours are the v1 ids with the minimal action sets")
MINATAR_BESIDE = (
    ("ppo-MinAtar-Asterix-v1", "dqn-MinAtar-Asterix-v1"),
    "ppo.py beside dqn.py on the same five MinAtar v1 games at 1M steps: the median "
    "100-episode training mean of ppo.py over fresh seeds 104-106 against dqn.py's over seeds "
    "101-103, not the same seeds (ppo.py's 101-103 were spent: the rates were chosen after "
    "them).")
PPOD_VS_PPO = (
    ("ppod-MountainCar-v0", "ppo-MountainCar-v0-as-ppod"),
    "ppod.py beside ppo.py with ppod.py's PPO flags and no demonstration, on MountainCar-v0 "
    "for 300k environment steps, ppod.py on fresh seeds 101-110 and ppo.py on seeds 1-5: the "
    "median and min-max of the 50-episode training mean, and how many seeds reach -120.")
RND_MOUNTAINCAR = (
    ("ppo_rnd-MountainCar-v0", "ppo-MountainCar-v0-as-rnd", "ppod-MountainCar-v0"),
    "ppo_rnd.py beside ppo.py with the same PPO flags (ppod.py's) and no intrinsic reward, on "
    "MountainCar-v0 for 300k steps, ppo_rnd.py on fresh seeds 101-110 and ppo.py on 101-105 "
    "(the intrinsic coefficient chosen on seeds 1-5): the median and min-max of the 50-episode "
    "training mean, how many seeds end at -120 or better and how many reach it, with ppod.py's "
    "curve (one demonstration) of fresh seeds 101-110 drawn beside them.")
RND_CONTINUOUS = (
    ("ppo_rnd-MountainCarContinuous-v0-continuous", "ppo-MountainCarContinuous-v0-beside-rnd"),
    "ppo_rnd.py's continuous preset (ppo.py's, with the RND paper's intrinsic weight of 1) "
    "beside ppo.py's continuous preset on the sparse MountainCarContinuous-v0 for 300k steps, "
    "only --env-id and --total-timesteps given, on tuning seeds 1-5: how many seeds end with a "
    "20-episode training mean of 90 or more, the median steps until it first got there and the "
    "median greedy evaluation return.")
def presets_held_out(script):
    """The protocol of a script's presets held out (issue 107): benchmark.py's held_out tasks,
    the six environments, each beside ppo.py's presets on the same seeds and budget."""
    envs = ("Acrobot-v1", "MountainCar-v0", "LunarLander-v3", "InvertedDoublePendulum-v5",
            "Swimmer-v5", "Reacher-v5")
    measure = ("the final greedy evaluation return (10 episodes) on all six, as its training "
               "episodes are the population's perturbed members" if script == "es" else
               "the mean of the last 100 training episodes at the end on the discrete three "
               "and the final greedy evaluation return (10 episodes) on MuJoCo")
    return (tuple(f"{script}-{env_id}-held-out" for env_id in envs),
            f"Held out (issue 107): {script}.py's presets, only --env-id and --total-timesteps "
            "300000 given (300k), on environments no setting of them was chosen on: Acrobot-v1, "
            "MountainCar-v0 and LunarLander-v3 (the discrete preset) and "
            "InvertedDoublePendulum-v5, Swimmer-v5 and Reacher-v5 (MuJoCo v5, the continuous "
            f"preset); fresh seeds 101-103, {'one run' if script == 'impala' else 'two runs'} "
            "at a time beside other work, the median [min, max] of "
            f"{measure}, against Gymnasium's thresholds and beside ppo.py's presets on the "
            "same seeds and budget (results.md, \"Settings that follow the environment\").")


RND_HELD_OUT = (
    tuple(f"{script}-{env_id}-{label}" for env_id in ("Pendulum-v1", "InvertedDoublePendulum-v5",
                                                      "Swimmer-v5")
          for script, label in (("ppo_rnd", "held-out"), ("ppo", "beside-rnd"))),
    "Held out (issue 107): ppo_rnd.py's continuous preset beside ppo.py's at the same budget, "
    "only --env-id and --total-timesteps given, on Pendulum-v1 for 200k steps and on "
    "InvertedDoublePendulum-v5 and Swimmer-v5 (MuJoCo v5) for 300k, no setting chosen on any: "
    "fresh seeds 101-103, two runs at a time, the median [min, max] of the final greedy "
    "evaluation return (10 episodes) against -200 on Pendulum and Gymnasium's thresholds on "
    "the others.")
RND_CHAIN = (
    ("ppo_rnd-SparseChain-v0", "ppo-SparseChain-v0-as-rnd"),
    "ppo_rnd.py beside ppo.py with the same flags on our 24-state chain "
    "(benchmarks.sparse_chain:SparseChain-v0, one reward at its end) for 100k steps, both on "
    "fresh seeds 101-105: the median and min-max of the 50-episode training mean and the seeds "
    "that reach 0.9.")
LSTM_VS_PPO = (
    ("ppo_lstm-CartPole-v1-novel", "ppo-CartPoleNoVel-v1"),
    "The figure of CartPole without its velocities draws the median and min-max of the "
    "20-episode training mean of ppo_lstm.py (CartPole-v1 with --hide-obs 1 3) on fresh seeds "
    "101-110 beside ppo.py (benchmarks.no_velocity:CartPoleNoVel-v1, the same observation) on "
    "seeds 201-203, not the same seeds, each for 100k steps.")
TD3_PAPER_MUJOCO = (
    "against thresholds read from the TD3 paper's curves, the mean of its 10 seeds' evaluations "
    "on Gym's v1 (5,514 on HalfCheetah, 659 on Hopper and 770 on Walker2d at 100k, 7,697 on "
    "HalfCheetah at 300k)")
PENDULUM_THREE = (
    ("ddpg_td3-Pendulum-v1-ddpg", "ddpg_td3-Pendulum-v1", "sac-Pendulum-v1"),
    "The figure of DDPG, TD3 and SAC on Pendulum-v1 draws each script with its defaults, "
    "ddpg_td3.py (TD3) and sac.py on fresh seeds 101-110 and DDPG on seeds 1-5, as the "
    "median and min-max of training means over different windows: 10 episodes for "
    "ddpg_td3.py, 20 for sac.py.")
CROSSQ_VS_SAC = (
    ("crossq-Hopper-v5-100k", "sac-Hopper-v5-100k", "crossq-HalfCheetah-v5-100k",
      "sac-HalfCheetah-v5-100k", "crossq-Walker2d-v5-100k", "sac-Walker2d-v5-100k"),
    "crossq.py beside sac.py at 100k steps on v5: the greedy evaluation return (10 episodes, "
    "every 10,000 steps and after training), median over seeds, sac.py on fresh seeds 101-103 "
    "and crossq.py on the same 101-103 on Hopper-v5 and Walker2d-v5 but 102-103 on "
    "HalfCheetah-v5 (its seed 101 there is in the lab notebook only).")


ALGORITHMS = {
    "qlearning": Algorithm(
        title="Tabular Q-learning",
        road="The start of the road: a table of action values, one number per state and "
             "action, moved towards a one-step bootstrapped target. Every later script keeps "
             "this target and replaces the table.",
        equations=[
            ("target   = r + gamma * (1 - terminated) * max_a' Q(s', a')",
             r"y = r + \gamma\,(1 - \text{terminated})\,\max_{a'} Q(s', a')"),
            ("delta    = target - Q(s, a)                       (the TD error)",
             r"\delta = y - Q(s, a)"),
            ("Q(s, a) <- Q(s, a) + alpha * delta",
             r"Q(s, a) \leftarrow Q(s, a) + \alpha\,\delta"),
            ("cell_i = clip(floor((x_i - low_i) / (high_i - low_i) * bins_i), 0, bins_i - 1)",
             r"\text{cell}_i = \operatorname{clip}\left(\left\lfloor \frac{x_i - \text{low}_i}{\text{high}_i - \text{low}_i}\, \text{bins}_i \right\rfloor, 0, \text{bins}_i - 1\right)"),
        ],
        loop=[
            (0, "Q(s, a) = q_init for every row s and every action a", "make_table"),
            (0, "reset the environment; s = the row of the first observation", "train"),
            (0, "for t = 0, 1, ..., total_timesteps - 1 do", "train"),
            (1, "epsilon = linear from start_e to end_e over the first exploration_fraction of "
                "the budget; alpha = learning_rate, times (1 - t / budget) with --anneal-lr",
             "linear_schedule"),
            (1, "a = a uniformly random action with probability epsilon, else argmax_a Q(s, a) "
                "(ties to the lowest action)", "QTable.act"),
            (1, "take a; observe r, terminated, truncated and s' = the row of the next "
                "observation (for a Box, its cell of the grid)", "discretize"),
            (1, "y = r if terminated, else r + gamma max_a' Q(s', a') (a truncated step "
                "bootstraps); Q(s, a) = Q(s, a) + alpha (y - Q(s, a))", "q_update"),
            (1, "s = s'; if the episode ended (terminated or truncated): record its return, "
                "reset, s = the row of the new first observation, stop if the mean over the "
                "goal's window reaches --stop-at-return", "train:Learn"),
            (1, "every log_interval steps, at a stop and at the end: a row of updates.csv",
             "train:Log"),
        ],
        details=[
            ("A time-limit truncation is not a termination: the truncated step bootstraps from "
             "the true final state, a terminated one does not; the episode ends on either, and "
             "the next starts by a reset of its own", "train:Learn"),
            ("Box observations are mapped to a uniform grid of --bins cells per dimension, "
             "numbered row-major, values outside the bounds going to the edge cells: a single "
             "tiling, where Sutton & Barto's Mountain Car uses 8 tilings of 8 x 8",
             "discretize"),
            ("An unbounded observation dimension gets no grid: the run is refused until "
             "--obs-low and --obs-high give finite bounds", "make_table::unbounded"),
            ("The table starts at --q-init everywhere (0); a value above the true values makes "
             "exploration optimistic, as Sutton & Barto's +5 on rewards near 1",
             "make_table::q = np.full("),
            ("Epsilon decays linearly from 1 to 0.01 over the first 20% of the budget, "
             "CleanRL's schedule; Sutton & Barto's examples keep it at 0.1 throughout",
             "linear_schedule"),
            ("The greedy action breaks ties towards the lowest action (NumPy's argmax)",
             "QTable.greedy"),
            ("With --anneal-lr the step size alpha decays linearly to 0 over the budget, which "
             "helps stochastic environments settle", "train::alpha = args.learning_rate"),
            ("Exploration draws from a generator of its own, seeded with --seed, so that its "
             "draws depend on the seed alone", "train::rng = random.Random(args.seed)"),
            ("A table larger than half the machine's memory is refused in one line before it "
             "is allocated: a grid's rows are the product of its bins, 20 in each of 4 "
             "dimensions make 160,000 (the curse of dimensionality)", "check_memory"),
        ],
        protocols=[
            (("qlearning-FrozenLake-v1", "qlearning-MountainCar-v0", "qlearning-Taxi-v4"),
             "No peer or paper is run beside it: a seed holds where its greedy evaluation "
             "return after training (1000 episodes on Taxi-v4 and FrozenLake-v1, 100 on "
             "MountainCar-v0) meets the row's threshold, with the IQM and the median over fresh "
             "seeds 101-110 on Taxi-v4 and FrozenLake-v1 and seeds 1-5 on MountainCar-v0, "
             "Taxi-v4's 7.5 and "
             "FrozenLake-v1's 0.70 set just below the optimal policy's 7.93 and 0.744, "
             "MountainCar-v0's -150 a bar of our own, while the figures draw the 100-episode "
             "training mean."),
        ]),
    "dqn": Algorithm(
        title="Deep Q-Network (DQN)",
        road="Q-learning with a neural network in place of the table: a replay buffer "
             "decorrelates the data and a target network holds the target still.",
        equations=[
            ("target      y = r + gamma * (1 - terminated) * max_a' Q_target(s', a')",
             r"y = r + \gamma\,(1 - \text{terminated})\,\max_{a'} Q_{\text{target}}(s', a')"),
            ("double DQN  y = r + gamma * (1 - terminated) * Q_target(s', argmax_a' Q(s', a'))",
             r"y = r + \gamma\,(1 - \text{terminated})\, Q_{\text{target}}\big(s', \arg\max_{a'} Q(s', a')\big)"),
            ("loss        L = mean( huber(Q(s, a) - y) )   or   mean( (Q(s, a) - y)^2 )",
             r"L = \operatorname{mean}\,\operatorname{huber}\big(Q(s, a) - y\big) \quad\text{or}\quad \operatorname{mean}\big(Q(s, a) - y\big)^2"),
            ("target net  theta' <- tau * theta + (1 - tau) * theta'   every C steps (tau = 1: copy)",
             r"\theta' \leftarrow \tau\,\theta + (1 - \tau)\,\theta' \quad \text{every } C \text{ steps}"),
            ("epsilon     eps_t = start_e + (end_e - start_e) * min(1, t / (fraction * budget))",
             r"\epsilon_t = \epsilon_{\text{start}} + (\epsilon_{\text{end}} - \epsilon_{\text{start}}) \min\left(1, \frac{t}{\text{fraction}\cdot\text{budget}}\right)"),
        ],
        loop=[
            (0, "Q-network Q_theta; target network theta' = a copy of theta", "main"),
            (0, "replay buffer of min(buffer_size, budget) transitions; reset the N environments",
             "ReplayBuffer"),
            (0, "for iteration = 1, 2, ..., total_timesteps / N do", "train"),
            (1, "epsilon = linear from start_e to end_e over the first exploration_fraction of "
                "the budget; in each environment a = a random action with probability epsilon, "
                "else argmax_a Q_theta(s, a); step the N environments", "train:Act"),
            (1, "store (s, a, r, s', terminated), s' the true final observation where an episode "
                "ended; record the episodes that ended (max_a Q(s_0, a) beside their discounted "
                "return); stop at --stop-at-return", "train:Store"),
            (1, "once past learning_starts, every train_frequency steps: the learning rate = "
                "lr (1 - t / budget) with --anneal-lr, then gradient_steps times do",
             "train:Learn"),
            (2, "sample B transitions uniformly from the buffer", "ReplayBuffer.sample"),
            (2, "y = r + gamma (1 - terminated) Q_theta'(s', argmax_a' Q_theta(s', a')); with "
                "--no-double-dqn, y = r + gamma (1 - terminated) max_a' Q_theta'(s', a')",
             "dqn_targets"),
            (2, "one optimizer step on the mean squared (or Huber) error of Q_theta(s, a) - y, "
                "the gradient clipped to the norm max_grad_norm", "td_loss"),
            (1, "every target_network_frequency steps: theta' = tau theta + (1 - tau) theta' "
                "(tau = 1: a copy)", "soft_update"),
            (1, "every log_interval steps, and at the end: a row of updates.csv (loss, q_mean, "
                "q_start, discounted_return)", "train:Log"),
        ],
        details=[
            ("Adam with torch's default eps 1e-8, as CleanRL's and Stable-Baselines3's DQN use "
             "it; a departure from the 2015 paper and the MinAtar paper, which used RMSProp "
             "(--optimizer rmsprop is the MinAtar paper's centered RMSProp)", "make_optimizer"),
            ("Departure from the DQN papers' constant learning rate: it decays linearly to 0 "
             "over the budget (--anneal-lr), taken from rl-baselines3-zoo's linear schedules, "
             "because on CartPole a good policy otherwise drifts away again",
             "train::if num_gradient_steps and args.anneal_lr"),
            ("Epsilon decays linearly from --start-e to --end-e over a fraction of the budget "
             "(--exploration-fraction, as in SB3), so a shorter budget explores for fewer steps",
             "linear_schedule"),
            ("A time-limit truncation is not a termination: where an episode ended, the buffer "
             "stores its true final observation as s', not the next episode's first one that "
             "autoreset returned, and a truncated step bootstraps from it",
             "train:Store"),
            ("Double DQN by default: the online network chooses the next action and the target "
             "network values it, against the max's overestimation; the MinAtar paper's DQN is "
             "not double (--no-double-dqn)", "dqn_targets"),
            ("Huber loss for images, the Nature DQN's error clipping and the MinAtar paper's "
             "loss; squared error for vectors (--loss)", "td_loss::if loss == \"huber\""),
            ("The gradient clipped to a global norm of 10 (--max-grad-norm), as SB3's DQN, so "
             "that a batch with a few huge TD errors (a target still far off, a rare large "
             "reward) cannot take one huge step", "train::clip_grad_norm_"),
            ("The flags left at None take a preset: a vector's, chosen on CartPole for budgets "
             "up to 200k (a gradient step on 128 transitions every 4 steps, the target copied "
             "every 500, so that a policy that balances is not refitted so often on balanced "
             "states alone that it forgets what a fall looks like); past 200k, a vector's long "
             "preset, CleanRL's (a gradient step every 10 steps, a copy every 500), which kept "
             "500 over 500k steps; an image's is the MinAtar paper's (a gradient step every "
             "step, the target copied every 1,000)", "preset_name"),
            ("The replay buffer keeps frames as uint8 in host memory and sends only the sampled "
             "batch to the device, as Stable-Baselines3: a quarter of float32's memory, and "
             "NumPy's few-row writes cost a tenth of torch's on the CPU", "ReplayBuffer"),
            ("Departure from the DQN paper's Atari preprocessing: ALE v5's sticky actions (the "
             "previous action repeats with probability 0.25) stay on, as Machado et al. 2018 "
             "recommend", "atari_wrappers"),
        ],
        protocols=[
            (("dqn-CartPole-v1",),
             "CartPole-v1 against our own goal: the default command, run to its 500k budget "
             "(the long preset), holds (the 20-episode training mean at the end at least 475) "
             "on at least 9 of 10 seeds, with a median greedy evaluation return of 500: fresh "
             "seeds 111-120 (101-110 had shown the 100k default's misses, which led to the "
             "change), the long preset having been chosen on seeds 1-5."),
            (("dqn-CartPole-v1-100k", "dqn-CartPole-v1-200k"),
             "CartPole-v1 at 100k and 200k steps, the budgets of the vector preset (100k was "
             "the default until 2026-11-27), against the same goal: how many of fresh seeds "
             "101-110 hold and the IQM of the 20-episode training mean at the budget."),
            ((),
             "Beside Stable-Baselines3's DQN with rl-baselines3-zoo's CartPole hyperparameters "
             "(benchmarks/sb3_dqn_cartpole.py), both on CartPole-v1 and one torch thread each, "
             "dqn.py with its defaults of 2026-11-23 (the earlier burst preset, 50k steps): "
             "seeds 301-303 run interleaved on a quiet machine, the steps until the 20-episode "
             "training mean reached 475 and the whole-process seconds seed by seed, and the "
             "median of the three time ratios (0.56x against the goal of 0.5x)."),
            (("dqn-CartPole-v1-vs-cleanrl", "cleanrl-dqn-CartPole-v1"),
             "Beside CleanRL's dqn.py (its commit fe8d8a0), each with its own defaults on "
             "CartPole-v1 for CleanRL's 500k steps, our default budget too: seeds "
             "101-103, a seed's two processes started together on one torch thread each, "
             "comparing the median [min, max] over the three seeds of the 20-episode training "
             "mean at the budget, the steps and seconds until it first reached 475 and the "
             "whole-process seconds; our greedy evaluation return has no CleanRL counterpart."),
            (("dqn-Acrobot-v1", "dqn-Acrobot-v1-100k"),
             "Acrobot-v1 against Gymnasium's threshold of -100 for the 20-episode training "
             "mean, with no peer beside it: the default command on fresh seeds 111-120, run "
             "to the 500k budget (the long preset), and at 100k steps (the vector preset, the "
             "default budget until 2026-11-27) on fresh seeds 101-110: how many hold at the "
             "end, the median steps to it and the median greedy evaluation return."),
            (("dqn-MinAtar-Asterix-v1", "dqn-MinAtar-Breakout-v1", "dqn-MinAtar-Freeway-v1",
              "dqn-MinAtar-Seaquest-v1", "dqn-MinAtar-SpaceInvaders-v1"),
             "MinAtar with the paper's DQN schedule (Adam in place of its RMSProp): our median "
             "over fresh seeds 101-103 of the 100-episode training mean after 1M steps "
             + MINATAR_PAPER
             + " (the evaluation column, ours alone, plays at epsilon 0.05)."),
            (("dqn-Acrobot-v1-held-out", "cleanrl-dqn-Acrobot-v1",
              "dqn-MountainCar-v0-held-out", "cleanrl-dqn-MountainCar-v0",
              "dqn-LunarLander-v3-held-out", "cleanrl-dqn-LunarLander-v3"),
             "Held out (issue 107): our default command, only --env-id and --total-timesteps "
             "100000 and so its vector preset, on Acrobot-v1, MountainCar-v0 and LunarLander-v3 "
             "(v2 on CleanRL's Gymnasium 0.29.1), no setting chosen on any, beside CleanRL's "
             "dqn.py (commit fe8d8a0) with its own defaults at the same budget: seeds 101-103, a "
             "seed's two processes started together on one torch thread each, comparing the "
             "median [min, max] over the three seeds of the 100-episode training mean at the "
             "budget and the whole-process seconds, beside our greedy evaluation return."),
            MINATAR_BESIDE,
        ]),
    "pqn": Algorithm(
        title="Parallelized Q-Network (PQN)",
        road="dqn.py without its replay buffer and its target network: many environments "
             "explore side by side, LayerNorm in the Q-network keeps the bootstrapped "
             "regression stable, and Q(lambda) returns over a short rollout are learned in a "
             "few epochs of minibatches, as PPO learns its rollouts; the lesson of why the "
             "target network existed.",
        equations=[
            ("epsilon   a_t = argmax_a Q(s_t, a), or uniform with probability eps_t (each environment",
             r"a_t = \begin{cases} \arg\max_a Q(s_t, a) & \text{with probability } 1 - \epsilon_t \\ \text{a uniform action} & \text{with probability } \epsilon_t \end{cases}"),
            ("draws on its own); eps_t = start_e + (end_e - start_e) * min(1, t / (fraction * budget))",
             r"\epsilon_t = \epsilon_{\text{start}} + (\epsilon_{\text{end}} - \epsilon_{\text{start}}) \min\left(1, \frac{t}{\text{fraction}\cdot\text{budget}}\right)"),
            ("Q(lambda) G_t = r_t + gamma * (1 - terminated_t) * ((1 - lambda) * max_a Q(s'_t, a)",
             r"G_t = r_t + \gamma\,(1 - \text{terminated}_t)\Big((1 - \lambda)\max_a Q(s'_t, a) + \lambda\, G_{t+1}\Big)"),
            ("where the episode was cut (truncated_t) or the rollout ends (t = T - 1)",
             r"G_{t+1} \to \max_a Q(s'_t, a) \quad \text{where truncated}_t \text{ or } t = T - 1"),
            ("loss      L = mean( 0.5 * (Q(s_t, a_t) - G_t)^2 )     over a minibatch of the rollout",
             r"L = \operatorname{mean}\ \tfrac12 \big(Q(s_t, a_t) - G_t\big)^2"),
            ("network   Linear -> LayerNorm -> ReLU, twice, then a linear head: one Q-value per action",
             r"Q(s, \cdot) = W_3\, h_2 + b_3, \qquad h_k = \operatorname{ReLU}\big(\operatorname{LayerNorm}(W_k h_{k-1} + b_k)\big), \quad h_0 = s"),
        ],
        loop=[
            (0, "Q-network Q_theta: two hidden layers of Linear, LayerNorm and ReLU and a linear "
                "head (for MinAtar's grids one 3 x 3 convolution first); no target network",
             "QNetwork"),
            (0, "RAdam on theta; room for one rollout of T steps of the N environments, no "
                "replay buffer; reset the N environments", "Rollout"),
            (0, "for iteration = 1, 2, ..., total_timesteps / (N T) do", "train"),
            (1, "learning rate = lr (1 - (iteration - 1) / iterations)",
             "train::for group in optimizer.param_groups"),
            (1, "for t = 0, ..., T - 1 do", "train:Rollout"),
            (2, "epsilon = linear from start_e to end_e over the first exploration_fraction of "
                "the budget", "linear_schedule"),
            (2, "in each environment, by a draw of its own: a = a uniform action with "
                "probability epsilon, else argmax_a Q_theta(s, a); step the N environments",
             "epsilon_greedy"),
            (2, "store s, a, reward_scale r, terminated, truncated and s' (the true final "
                "observation where a time limit cut the episode); record the episodes that "
                "ended; stop at --stop-at-return",
             "train::rollout.obs[step], rollout.actions[step]"),
            (1, "next_q_t = max_a Q_theta(s'_t, a) for every step of the rollout, from the "
                "network as it is now, without gradient", "Rollout.targets"),
            (1, "backward from t = T - 1: G_t = r_t + gamma (1 - terminated_t) ((1 - lambda) "
                "next_q_t + lambda G_{t+1}), with G_{t+1} = next_q_t where truncated_t or "
                "t = T - 1", "q_lambda_returns"),
            (1, "for epoch = 1, ..., update_epochs, for each of num_minibatches shuffled "
                "minibatches of the N T steps do", "train:Update"),
            (2, "one RAdam step on L = mean[0.5 (Q_theta(s_t, a_t) - G_t)^2], the gradient "
                "clipped to the norm max_grad_norm", "train::loss = 0.5"),
            (1, "a row of updates.csv (td_loss, q_values, epsilon, learning_rate); stop where "
                "the loss is not finite; the rollout is dropped", "train::run.update("),
        ],
        details=[
            ("No replay buffer: a rollout's N*T transitions are learned from in --update-epochs "
             "epochs of shuffled minibatches and then overwritten by the next rollout, so each "
             "transition is used update_epochs times and never again; the many environments, "
             "not the buffer's age, decorrelate a minibatch", "Rollout"),
            ("No target network: the targets are read off the one network before the rollout's "
             "update, without gradient, and held fixed through its epochs; the next rollout's "
             "are read off the updated network", "Rollout.targets"),
            ("LayerNorm after each hidden layer's linear map and before its ReLU, with a learned "
             "scale and shift: each sample's features normalized over the features, no batch "
             "statistics, so acting, targets and training compute the same function; Gallici et "
             "al. 2024 prove that normalized features (with a small l2 penalty, not added here) "
             "keep the TD update from diverging without a target network",
             "QNetwork.__init__::nn.Linear(features, hidden_size), nn.LayerNorm"),
            ("Peng's Q(lambda): every step mixes the max over the next "
             "Q-values with the return that follows, whichever action was taken (Watkins's "
             "Q(lambda) would cut the trace at an exploratory action)", "q_lambda_returns"),
            ("Departure from the authors' code (purejaxql) and CleanRL's pqn.py, which treat a "
             "time-limit truncation as a termination: the truncated step bootstraps from the "
             "true final observation (info[\"final_obs\"]), and the return does not run on into "
             "the next episode", "train::for i in np.flatnonzero(truncated)"),
            ("Each environment draws its own exploration at every step, so that at epsilon 0.05 "
             "some of the N environments explore while the rest act greedily", "epsilon_greedy"),
            ("Epsilon decays linearly from --start-e to --end-e over the first "
             "--exploration-fraction of the budget, counted in environment steps of all "
             "environments together", "linear_schedule"),
            ("RAdam, as the authors' code and CleanRL's, its learning rate decayed linearly to 0 "
             "over the budget, set once per rollout", "train::torch.optim.RAdam"),
            ("Rewards are multiplied by --reward-scale (0.1, the authors' CartPole setting) for "
             "learning only: Q-values and td_loss are in the scaled units, episodes.csv keeps "
             "the environment's returns", "train::reward * args.reward_scale"),
            ("The loss is the halved squared error, and the gradient is clipped to a global "
             "norm of 10 (--max-grad-norm)", "train::clip_grad_norm_"),
            ("Images (MinAtar's 10 x 10 grids, channels last) get one convolution of 16 3 x 3 "
             "filters with ReLU before the LayerNorm MLP, the MinAtar paper's small-grid "
             "encoder; Atari's ALE/ ids are refused before anything runs (dqn.py and ppo.py "
             "take Atari's frames)", "QNetwork.__init__::nn.Conv2d(channels, 16, 3)"),
            ("PyTorch's default initialization; departure from the authors' code, whose Flax "
             "initialization differs in scale only", "QNetwork"),
        ],
        protocols=[
            (("pqn-CartPole-v1", "pqn-Acrobot-v1"),
             "CartPole-v1 and Acrobot-v1 at the default 500k steps, with the defaults chosen on "
             "seeds 1-5 (RAdam's epsilon on seeds 1, 2, 11 and 126) and measured on fresh "
             "seeds 131-140, two runs at a time, each run to "
             "its budget: how many hold at the end, and on CartPole-v1 "
             "the steps and seconds until the 20-episode training mean first reached 475 (the "
             "median over seeds, every seed counted), and on Acrobot-v1 the 20-episode training "
             "mean and the greedy evaluation at 500k against -100 (CleanRL's pqn.py: -95.6 +- "
             "5.7, its docs' figure)."),
            (("pqn-CartPole-v1-vs-cleanrl", "cleanrl-pqn-CartPole-v1"),
             "Beside CleanRL's pqn.py on CartPole-v1 at 500k steps, seeds 101-103, each seed's "
             "two processes started together with one torch thread each "
             "(benchmarks/cleanrl_compare.py's pqn-CartPole-v1 pair): the median of the "
             "20-episode training mean at the budget on each side, the steps to 475, and the "
             "whole-process seconds, ours over CleanRL's (the goal at most 0.8); CleanRL's "
             "script runs on its pinned Gymnasium 0.29.1, ours on 1.4.0."),
            (("pqn-Acrobot-v1-held-out", "cleanrl-pqn-Acrobot-v1",
              "pqn-MountainCar-v0-held-out", "cleanrl-pqn-MountainCar-v0",
              "pqn-LunarLander-v3-held-out", "cleanrl-pqn-LunarLander-v3"),
             "Held out (issue 107): our default command, only --env-id and --total-timesteps "
             "500000 and so its discrete preset, on Acrobot-v1, MountainCar-v0 and "
             "LunarLander-v3 (v2 on CleanRL's Gymnasium 0.29.1), beside CleanRL's pqn.py with its "
             "own defaults at the same budget: seeds 101-103, a seed's two processes started "
             "together on one torch thread each, comparing the median [min, max] over the three "
             "seeds of the 100-episode training mean at the budget and the whole-process "
             "seconds, beside our greedy evaluation return."),
            (tuple(f"pqn-MinAtar-{game}-v1" for game in MINATAR_GAMES),
             "The five MinAtar v1 games at 1M steps with the authors' MinAtar settings "
             "(purejaxql's pqn_minatar.yaml, whose budget is 10M) on seeds 101-103, one run at "
             "a time: the median over seeds of the 100-episode training mean beside dqn.py's "
             "on the same seeds 101-103 (its MinAtar paper settings), and the whole-process "
             "seconds beside dqn.py's (measured on another day at another load), "
             + MINATAR_PAPER + "."),
            ((),
             "The seeds, the median over seeds of the training mean and of the greedy "
             "evaluation return, and the commands of every pqn.py row are in the lab "
             "notebook's pqn.py section (benchmarks/results.md)."),
        ]),
    "vpg": Algorithm(
        title="Vanilla policy gradient (REINFORCE)",
        road="The first policy-gradient step: no value table to maximize, the policy itself "
             "is pushed towards the actions that did better than expected.",
        equations=[
            ("J(theta)       = E_tau[ sum_t r_t ]              the objective: an episode's return",
             r"J(\theta) = \mathbb{E}_\tau\Big[\sum_t r_t\Big]"),
            ("reward-to-go     grad J = E[ sum_t grad log pi_theta(a_t|s_t) * sum_{k>=t} r_k ]: an action",
             r"\nabla J = \mathbb{E}\Big[\sum_t \nabla \log \pi_\theta(a_t \mid s_t) \sum_{k \ge t} r_k\Big]"),
            ("the loss         L_pi(theta) = -mean_t[ log pi_theta(a_t|s_t) * A_t ],  A_t = R_t - V(s_t)",
             r"L_\pi(\theta) = -\operatorname{mean}_t\big[\log \pi_\theta(a_t \mid s_t)\, A_t\big], \qquad A_t = R_t - V(s_t)"),
            ("the critic       L_V(phi) = mean_t[ 0.5 * (V_phi(s_t) - R_t)^2 ]  (--gae-lambda: target",
             r"L_V(\phi) = \operatorname{mean}_t\big[\tfrac12 (V_\phi(s_t) - R_t)^2\big]"),
        ],
        loop=[
            (0, "policy pi_theta and value network V_phi, each an MLP of two tanh layers",
             "Agent"),
            (0, "one Adam for the policy (lr 1e-2), one for the critic (1e-3); reset the N "
                "environments", "train"),
            (0, "for iteration = 1, 2, ..., total_timesteps / (N T) do", "train"),
            (1, "for T steps, in each of the N environments: a ~ pi_theta(.|s) (a Gaussian "
                "sample clipped to the bounds for the environment only); store s, a, "
                "log pi_theta(a|s), V(s), r, terminated, truncated, and the true final "
                "observation where a time limit cut the episode; record the episodes that "
                "ended; stop at --stop-at-return", "train:Batch"),
            (1, "V(s_{t+1}) of every row: the next row's value, V(s_T) after the batch, and the "
                "true final observation's value where the episode was truncated",
             "RolloutBuffer.next_values"),
            (1, "R_t = r_t + gamma (1 - terminated_t) V(s_{t+1}) where the episode ended or the "
                "batch ends, else R_t = r_t + gamma R_{t+1}", "reward_to_go"),
            (1, "A_t = R_t - V(s_t) (R_t itself with --no-baseline); with --gae-lambda, "
                "A = GAE(gamma, lambda) and R = A + V", "RolloutBuffer.advantages"),
            (1, "standardize A over the whole batch (--norm-adv, with the baseline only)",
             "train:Targets"),
            (1, "one Adam step of the policy on L_pi = -mean_t[log pi_theta(a_t|s_t) A_t] over "
                "the whole batch", "train:Policy"),
            (1, "for epoch = 1, ..., vf_iters, for each of vf_minibatches shuffled minibatches do",
             "train:Value"),
            (2, "one Adam step of the critic on mean[0.5 (V_phi(s_t) - R_t)^2]", "value_loss"),
        ],
        details=[
            ("The reward-to-go weighs by the discounted R_t, and the factor gamma^t of the "
             "discounted objective's gradient is dropped, as in Spinning Up's VPG and most "
             "implementations: less variance, but for gamma < 1 a biased estimate of the "
             "undiscounted gradient, and in general no function's gradient (Nota & Thomas "
             "2020)", "reward_to_go"),
            ("A batch is N*T steps, not whole episodes: an episode cut by the end of the batch "
             "or by a time limit goes on in its reward-to-go as the value of the observation "
             "where it was cut; a terminated episode stops", "RolloutBuffer.next_values"),
            ("The baseline's advantages are standardized over the whole batch (--norm-adv), as "
             "Spinning Up does; with --no-baseline the reward-to-go stays raw, because "
             "standardizing it would subtract its batch mean, a baseline of its own",
             "train::if args.norm_adv and args.baseline"),
            ("One policy gradient step per batch, then the batch is thrown away: a second step "
             "on the same data would be off-policy (PPO's clipped ratio is what allows many)",
             "train:Policy"),
            ("Separate Adam optimizers for the policy and the value network, with their own "
             "learning rates (1e-2 and 1e-3 here; 3e-4 and 1e-3 in Spinning Up's VPG)",
             "train::value_optimizer = torch.optim.Adam"),
            ("The critic fitted by --vf-iters epochs of minibatch regression (Spinning Up: 80 "
             "full-batch steps); with --gae-lambda its target is A + V, the lambda-return, as "
             "trpo.py's and ppo.py's, a departure from Spinning Up's VPG, which regresses on "
             "R_t even then, so that comparing the three does not turn on the critic's target",
             "RolloutBuffer.advantages"),
            ("Orthogonal initialization with gain sqrt(2), 0.01 in the actor's last layer and "
             "1 in the critic's, as in the PPO baselines; a Gaussian policy's log std is a "
             "learned state-independent parameter", "Agent.__init__"),
            ("A Gaussian sample is clipped to the action bounds for the environment only: the "
             "buffer keeps the unclipped sample, whose log-probability the gradient pushes",
             "to_env_action"),
            ("With --norm-obs the true final observation of a time limit is normalized by the "
             "same running statistics without updating them, and the step bootstraps from its "
             "value", "train::final_obs = normalizer("),
        ],
        protocols=[
            (("vpg-CartPole-v1",),
             "vpg.py's row against our own goal, the default command run to its 500k budget: "
             "how many of fresh seeds 101-110 end with the 20-episode training mean at 475 or "
             "above (the defaults chosen on seeds 1-5), the median steps to 475 and the median "
             "greedy evaluation return."),
            FROM_VPG_TO_PPO,
            presets_held_out("vpg"),
        ]),
    "trpo": Algorithm(
        title="Trust Region Policy Optimization (TRPO)",
        road="VPG's gradient, but the step is the natural gradient scaled to a KL radius, and "
             "a line search keeps it only where the objective improved.",
        equations=[
            ("surrogate    L(theta)  = mean_t[ pi_theta(a_t|s_t) / pi_old(a_t|s_t) * A_t ]",
             r"L(\theta) = \operatorname{mean}_t\left[\frac{\pi_\theta(a_t \mid s_t)}{\pi_{\text{old}}(a_t \mid s_t)}\, A_t\right]"),
            ("trust region KL(theta) = mean_t[ KL(pi_old(.|s_t) || pi_theta(.|s_t)) ]",
             r"\overline{KL}(\theta) = \operatorname{mean}_t\big[KL\big(\pi_{\text{old}}(\cdot \mid s_t)\,\|\,\pi_\theta(\cdot \mid s_t)\big)\big]"),
            ("the problem  maximize L(theta) subject to KL(theta) <= delta",
             r"\max_\theta L(\theta) \quad \text{subject to} \quad \overline{KL}(\theta) \le \delta"),
            ("the step     x = (F + c I)^-1 g by conjugate gradient, c the damping, F v = grad(grad KL . v)",
             r"x = (F + cI)^{-1} g \quad\text{(conjugate gradient)}, \qquad Fv = \nabla\big(\nabla \overline{KL} \cdot v\big)"),
            ("step = sqrt(2 delta / (x^T (F + c I) x)) * x, so 0.5 step^T (F + c I) step = delta",
             r"\text{step} = \sqrt{\frac{2\delta}{x^\top (F + cI)\, x}}\; x"),
        ],
        loop=[
            (0, "policy pi_theta and value network V_phi, each an MLP of two tanh layers",
             "Agent"),
            (0, "one Adam for the critic only (the policy moves by trust-region steps); reset "
                "the N environments", "train"),
            (0, "for iteration = 1, 2, ..., total_timesteps / (N T) do", "train"),
            (1, "for T steps, in each of the N environments: a ~ pi_old(.|s) (a Gaussian sample "
                "clipped to the bounds for the environment only); store s, a, log pi_old(a|s), "
                "V(s), r, terminated, truncated, and the true final observation where a time "
                "limit cut the episode; record the episodes that ended; stop at "
                "--stop-at-return", "train:Batch"),
            (1, "A = GAE(gamma, lambda) from the stored values, bootstrapped from V of the true "
                "final observation where the episode was truncated; R = A + V", "compute_gae"),
            (1, "standardize A over the whole batch (--norm-adv)", "train:Targets"),
            (1, "the policy's trust-region step, pi_old fixed as the policy that collected the "
                "batch:", "trust_region_step"),
            (2, "g = the gradient at theta_old of the surrogate L(theta) = mean_t[pi_theta(a_t|s_t) "
                "/ pi_old(a_t|s_t) A_t]; if g is zero or not finite, no step", "surrogate"),
            (2, "x = (F + c I)^-1 g by cg_iters iterations of conjugate gradient",
             "conjugate_gradient"),
            (2, "each iteration's product (F + c I) v = grad(grad KL(theta) . v) + c v: two "
                "backward passes through the mean KL, F never formed", "fisher_vector_product"),
            (2, "full step = sqrt(2 delta / (x^T (F + c I) x)) x", "natural_step"),
            (2, "for j = 0, 1, ..., K - 1: theta = theta_old + b^j full step; keep the first "
                "with L(theta) > L(theta_old) and KL(theta) <= delta; if none, theta = theta_old",
             "line_search"),
            (1, "for epoch = 1, ..., vf_iters, for each of vf_minibatches shuffled minibatches: "
                "one Adam step of the critic on mean[0.5 (V_phi(s_t) - R_t)^2]", "train:Value"),
        ],
        details=[
            ("Departure from baselines (1.5 delta): the line search keeps a step only where "
             "KL <= delta, as the paper and Spinning Up do, and only where L rose strictly, "
             "`>`; both accept equality, but a step leaving L where it was gains nothing",
             "line_search::if new_surrogate > old_surrogate and kl <= max_kl"),
            ("The line search shrinks the step by 0.8 at each try (--backtrack-coef, Spinning "
             "Up's; baselines 0.5), 10 tries, and where none passes the policy stays",
             "line_search::fraction = backtrack_coef ** j"),
            ("The Fisher-vector product is the Hessian-vector product of the mean KL, damped "
             "by c = 0.1 to keep the conjugate gradient stable, and uses the whole batch, as "
             "Spinning Up's (baselines: every fifth sample)", "fisher_vector_product"),
            ("The step is scaled with the damped product (F + c I) x, as baselines and "
             "Spinning Up scale it, so the full step's KL falls short of delta rather than "
             "sitting at the edge (0.005 to 0.0096 for delta 0.01 over seed 1's first 30 "
             "updates on CartPole-v1)",
             "trust_region_step::full_step = natural_step"),
            ("A zero or non-finite policy gradient takes no step on that batch (baselines skips "
             "a zero gradient too): a zero x would be scaled by sqrt(2 delta / 0)",
             "trust_region_step::if g.isfinite().all() and g.any()"),
            ("Advantages standardized over the whole batch, as baselines' TRPO does",
             "train::if args.norm_adv"),
            ("Departure from baselines, which ended the episode: a time limit bootstraps from "
             "the value of the true final observation, a termination does not",
             "RolloutBuffer.next_values"),
            ("The critic fitted to the GAE returns A + V by --vf-iters epochs of minibatch Adam "
             "steps, separate from the policy's trust-region step", "train:Value"),
            ("Departure from baselines: observations (--norm-obs) are clipped to [-10, 10], "
             "where baselines clipped to [-5, 5]", "ObsNormalizer.__call__"),
            ("Departure from baselines (normalized columns): layers are initialized "
             "orthogonally as in ppo.py", "layer_init"),
        ],
        protocols=[
            (("trpo-Hopper-v5",),
             "Hopper: our median over fresh seeds 101-103 of the greedy evaluation return (10 "
             "episodes) after 1M steps on Hopper-v5, with OpenAI baselines' settings not tuned "
             "here, against 2,471, the TD3 paper's figure for baselines' TRPO at 1M steps on "
             "Hopper-v1, the best of a run's evaluations of 10 episodes every 5,000 steps; the "
             "steps column is the 20-episode training mean's first crossing of 2,471."),
            (("trpo-CartPole-v1",),
             "trpo.py's CartPole-v1 row against our own goal, the default command run to its "
             "500k budget: how many of fresh seeds 101-110 end with the 20-episode training mean "
             "at 475 or above, with CartPole defaults that were not tuned (seeds 1-5 were run "
             "for the record), the median steps and the median greedy evaluation return."),
            FROM_VPG_TO_PPO,
            presets_held_out("trpo"),
        ]),
    "ppo": Algorithm(
        title="Proximal Policy Optimization (PPO) with GAE",
        road="TRPO's idea (stay close to the policy that collected the data) by a clipped "
             "ratio instead of a constraint: many cheap epochs of minibatch steps on one "
             "rollout.",
        equations=[
            ("ratio_t   = pi_theta(a_t | s_t) / pi_old(a_t | s_t)",
             r"\rho_t = \frac{\pi_\theta(a_t \mid s_t)}{\pi_{\text{old}}(a_t \mid s_t)}"),
            ("L_clip    = E[ min(ratio_t * A_t, clip(ratio_t, 1 - eps, 1 + eps) * A_t) ]",
             PPO_CLIP),
            ("GAE       delta_t = r_t + gamma * (1 - terminated_t) * V(s_{t+1}) - V(s_t)",
             GAE_DELTA),
            ("A_t     = delta_t + gamma * lambda * (1 - done_t) * A_{t+1}", GAE_A),
            ("loss      = -L_clip + c_v * 0.5 * (V(s_t) - R_t)^2 - c_e * entropy",
             r"\text{loss} = -L^{\text{clip}} + c_v \cdot \tfrac12 \big(V(s_t) - R_t\big)^2 - c_e\, \mathcal{H}\big[\pi_\theta(\cdot \mid s_t)\big]"),
        ],
        loop=[
            (0, "actor pi_theta and critic V: two MLPs, or for images one convolutional encoder "
                "with a linear head each; orthogonal initialization (--ortho-init)", "Agent"),
            (0, "one Adam (eps 1e-5) over all the parameters; reset the N environments",
             "train"),
            (0, "for iteration = 1, 2, ..., I = total_timesteps / (N T) do", "train"),
            (1, "with --anneal-lr, the learning rate = lr (1 - (iteration - 1) / I)", "train"),
            (1, "for T steps, in each of the N environments: a ~ pi_old(.|s) (a Gaussian sample "
                "clipped to the bounds for the environment only); store s, a, log pi_old(a|s), "
                "V(s), r, terminated, truncated, and the true final observation where a time "
                "limit cut the episode; record the episodes that ended; stop at "
                "--stop-at-return", "train:Rollout"),
            (1, "A = GAE(gamma, lambda) from the stored values, bootstrapped from V of the true "
                "final observation where the episode was truncated; R = A + V",
             "compute_gae"),
            (1, "for epoch = 1, ..., K do", "train:Update"),
            (2, "with --advantage vtrace (in place of GAE): A and R = V-trace under the current "
                "policy and critic", "compute_vtrace"),
            (2, "for each of the M shuffled minibatches: normalize A within it (--norm-adv); one "
                "Adam step on -L_clip + c_v 0.5 (V(s_t) - R_t)^2 - c_e H, the gradient clipped to "
                "the norm max_grad_norm", "ppo_loss"),
            (2, "with --target-kl: stop the epochs once this epoch's mean approx KL exceeds it",
             "train:Diagnostics"),
        ],
        details=[
            ("Orthogonal initialization of every layer, gain sqrt(2) in the hidden layers, 0.01 "
             "in the actor's last layer and 1 in the critic's, biases 0, as the PPO authors' "
             "baselines do: the first policy is close to uniform and the first values small "
             "(--no-ortho-init keeps PyTorch's default, the RL Zoo's HalfCheetah setting)",
             "layer_init"),
            ("Adam with eps 1e-5, the PPO authors' baselines' value, not torch's default 1e-8: "
             "a weight whose gradients have been tiny does not get a full-size step",
             "train::eps=1e-5"),
            ("The learning rate annealed linearly from --learning-rate to 0 over the run, as "
             "in the PPO paper's Atari runs and CleanRL, so that the late steps refine a good "
             "policy instead of knocking it off (--no-anneal-lr keeps it constant)",
             "train::if args.anneal_lr"),
            ("A time-limit truncation is not a termination (Pardo et al. 2018): GAE "
             "bootstraps a truncated step from the value of the true final observation "
             "(info[\"final_obs\"]), a terminated step from nothing",
             "RolloutBuffer.next_values"),
            ("Advantages normalized within each minibatch, as the PPO baselines and CleanRL "
             "do, so that the policy's step size does not follow the rewards' scale "
             "(--no-norm-adv uses them as they are)", "train::if args.norm_adv"),
            ("The value loss is 0.5 (V - R)^2, clipped around the old value with --clip-vloss "
             "as the PPO baselines clip it; Stable-Baselines3's is (V - R)^2, so benchmark.py "
             "doubles the RL Zoo's --vf-coef", "ppo_loss::if clip_vloss"),
            ("The gradient of the whole loss clipped to a global norm of --max-grad-norm "
             "(0.5), as in the PPO baselines: the ratio's clip bounds what the loss rewards, not "
             "how far one step goes, and a minibatch with a few huge advantages or value errors "
             "would otherwise take one large step", "train::clip_grad_norm_"),
            ("Observations normalized by running statistics and clipped to [-10, 10] "
             "(--norm-obs), by the script itself: Gymnasium's vector NormalizeObservation "
             "refuses SAME_STEP autoreset and would leave the true final observation raw; that "
             "one is normalized by the same statistics without updating them",
             "ObsNormalizer.__call__"),
            ("Rewards divided by the running std of the discounted return and clipped to "
             "[-10, 10] (--norm-reward), after the episode statistics, so that episodes.csv "
             "keeps the raw returns", "make_vector_env::NormalizeReward"),
            ("A Gaussian sample is clipped to the action bounds for the environment only: the "
             "buffer keeps the unclipped sample, whose log-probability the ratio compares",
             "to_env_action"),
            ("Departure from the DQN paper's Atari preprocessing: ALE v5's sticky actions (the "
             "previous action repeats with probability 0.25) stay on, as Machado et al. 2018 "
             "recommend", "atari_wrappers"),
        ],
        protocols=[
            (("ppo-CartPole-v1",),
             "CartPole-v1's row against our own goal, the default command run to its 100k "
             "budget on fresh seeds 101-110: how many hold (the 20-episode training mean at the "
             "end at least 475), the median steps until it first reached 475 (goal: 25k) and "
             "the greedy evaluation return."),
            (("ppo-CartPole-v1-vs-cleanrl", "cleanrl-ppo-CartPole-v1"),
             "Beside CleanRL's ppo.py (its commit fe8d8a0), each with its own defaults on "
             "CartPole-v1 for 500k steps: seeds 101-103, a seed's two processes started "
             "together on one torch thread each, comparing the median [min, max] over the three "
             "seeds of the 20-episode training mean at the budget, the steps until it first "
             "reached 475 and the whole-process seconds; our greedy evaluation return has no "
             "CleanRL counterpart."),
            (("ppo-Hopper-v4-vs-cleanrl", "cleanrl-ppo_continuous_action-Hopper-v4"),
             "Beside CleanRL's ppo_continuous_action.py (its commit fe8d8a0) on Hopper-v4, the "
             "version CleanRL's Gymnasium 0.29.1 makes, for 1M steps, ours with its v5 task's "
             "flags and CleanRL's with its own defaults: seeds 101-103, a seed's two processes "
             "started together on one torch thread each, comparing the median [min, max] over "
             "the three seeds of the 100-episode training mean at the budget (CleanRL's "
             "measure) and the whole-process seconds, beside our greedy evaluation return, "
             "which CleanRL's script does not make."),
            (("ppo-Ant-v4-held-out", "cleanrl-ppo_continuous_action-Ant-v4",
              "ppo-Swimmer-v4-held-out", "cleanrl-ppo_continuous_action-Swimmer-v4",
              "ppo-InvertedDoublePendulum-v4-held-out",
              "cleanrl-ppo_continuous_action-InvertedDoublePendulum-v4",
              "ppo-Acrobot-v1-held-out", "cleanrl-ppo-Acrobot-v1",
              "ppo-MountainCar-v0-held-out", "cleanrl-ppo-MountainCar-v0",
              "ppo-LunarLander-v3-held-out", "cleanrl-ppo-LunarLander-v3"),
             "Held out (issue 107): our default command, only --env-id and --total-timesteps "
             "300000 and so its preset, on environments no setting was chosen on (Ant-v4, "
             "Swimmer-v4 and InvertedDoublePendulum-v4, the v4 that CleanRL's Gymnasium 0.29.1 "
             "makes; Acrobot-v1, MountainCar-v0 and LunarLander-v3, v2 on CleanRL's side), "
             "beside CleanRL's script for the family "
             "(ppo_continuous_action.py, ppo.py; commit fe8d8a0) with its own defaults at the "
             "same budget: seeds 101-103, a seed's two processes started together on one torch "
             "thread each, comparing the median [min, max] over the three seeds of the "
             "100-episode training mean at the budget and the whole-process seconds, beside our "
             "greedy evaluation return."),
            (("ppo-HalfCheetah-v5", "ppo-Hopper-v5", "ppo-Walker2d-v5"),
             "MuJoCo at 1M steps: our median over 3 seeds (fresh seeds 101-103 on "
             "HalfCheetah-v5, 104-106 on Hopper-v5 and Walker2d-v5) of the final greedy "
             "evaluation return (10 episodes) on v5, against the RL Zoo's PPO, one trained "
             "model evaluated on v3 (2,410 / 5,819 / 3,479 on Hopper / HalfCheetah / Walker2d), "
             "and, as a floor, CleanRL's training mean of 3 seeds on v4 (2,383 / 1,443 / 2,288)."),
            (("ppo-MinAtar-Asterix-v1", "ppo-MinAtar-Breakout-v1", "ppo-MinAtar-Freeway-v1",
              "ppo-MinAtar-Seaquest-v1", "ppo-MinAtar-SpaceInvaders-v1"),
             "MinAtar: our median over fresh seeds 104-106 of the 100-episode training mean "
             "after 1M steps "
             + MINATAR_PAPER
             + " (the greedy evaluation column is ours alone)."),
            MINATAR_BESIDE,
            (("ppo-Pendulum-v1",),
             "Pendulum-v1's row against our own goal, a greedy evaluation return of at least "
             "-200 after 200k steps with the README's flags, at the median over seeds 1-5, no "
             "peer beside it."),
            PPOD_VS_PPO,
            RND_MOUNTAINCAR,
            RND_CHAIN,
            RND_CONTINUOUS,
            RND_HELD_OUT,
            (("ppo-Reacher-v5-held-out",),
             "Held out (issue 107): ppo.py's continuous preset on Reacher-v5 (MuJoCo v5), only "
             "--env-id and --total-timesteps 300000 given (300k), beside vpg.py's, trpo.py's, "
             "ppo_lstm.py's and es.py's presets on the same fresh seeds 101-103 (their pages): "
             "the median [min, max] of the final greedy evaluation return (10 episodes) against "
             "Gymnasium's threshold of -3.75."),
            LSTM_VS_PPO,
            FROM_VPG_TO_PPO,
        ]),
    "ppo_masked": Algorithm(
        title="PPO with invalid-action masking",
        road="PPO whose policy gives probability 0 to the actions the environment forbids, "
             "with the same mask stored and re-applied in the update.",
        equations=[
            ("masked logits  l'_t(a) = l_t(a) if m_t(a) = 1, else -1e8",
             r"l'_t(a) = \begin{cases} l_t(a) & m_t(a) = 1 \\ -10^8 & \text{otherwise} \end{cases}"),
            ("policy         pi(a | s_t, m_t) = softmax(l'_t)(a)   (0 for every invalid action)",
             r"\pi(a \mid s_t, m_t) = \operatorname{softmax}(l'_t)(a)"),
            ("entropy        H_t = - sum_{a : m_t(a) = 1} pi(a | s_t, m_t) log pi(a | s_t, m_t)",
             r"\mathcal{H}_t = -\sum_{a:\, m_t(a) = 1} \pi(a \mid s_t, m_t) \log \pi(a \mid s_t, m_t)"),
            ("ratio_t        = pi_theta(a_t | s_t, m_t) / pi_old(a_t | s_t, m_t)    (the same m_t)",
             r"\rho_t = \frac{\pi_\theta(a_t \mid s_t, m_t)}{\pi_{\text{old}}(a_t \mid s_t, m_t)}"),
        ],
        loop=[
            (0, "actor and critic MLPs (two tanh layers each) over the flattened observation",
             "Agent"),
            (0, "one Adam (eps 1e-5); reset the N environments; flatten the observations and "
                "read their masks", "train"),
            (0, "for iteration = 1, 2, ..., I = total_timesteps / (N T) do", "train"),
            (1, "with --anneal-lr, the learning rate = lr (1 - (iteration - 1) / I)", "train"),
            (1, "for T steps, in each of the N environments do", "train:Rollout"),
            (2, "store s and its mask m; a ~ pi_old(.|s, m), the softmax of the logits with every "
                "invalid one set to -1e8; store a, log pi_old(a|s, m), V(s)",
             "masked_categorical"),
            (2, "step; store r, terminated, truncated, and the true final observation "
                "(flattened) where a time limit cut the episode; record the episodes that "
                "ended; stop at --stop-at-return", "train:Rollout"),
            (2, "flatten the next observations and read their masks (from info or the Dict "
                "observation; where an episode ended, the next episode's first mask)",
             "read_masks"),
            (1, "A = GAE(gamma, lambda), bootstrapped from V of the true final observation where "
                "the episode was truncated; R = A + V", "compute_gae"),
            (1, "for epoch = 1, ..., K do", "train:Update"),
            (2, "for each of the M shuffled minibatches: log pi_theta(a|s, m) and the entropy "
                "under each row's stored mask m; normalize A within the minibatch; one Adam step "
                "on -L_clip + c_v 0.5 (V(s_t) - R_t)^2 - c_e H, the gradient clipped to the norm "
                "max_grad_norm", "Agent.evaluate"),
            (2, "with --target-kl: stop the epochs once this epoch's mean approx KL exceeds it",
             "train:Diagnostics"),
        ],
        details=[
            ("Invalid actions' logits are replaced by -1e8 (Huang & Ontañón 2020): they get "
             "probability 0, the valid ones renormalize, and the gradient of a masked logit is "
             "exactly 0, so the update never pushes on actions the environment forbade",
             "masked_categorical"),
            ("The entropy bonus is the masked distribution's, a sum over the valid actions "
             "only, computed under the stored mask", "Agent.evaluate"),
            ("The buffer stores the mask each action was sampled under, and the update "
             "re-applies exactly that mask, so that the policy gradient is the one of the "
             "distribution that really sampled the action",
             "train::buffer.action_masks"),
            ("With SAME_STEP autoreset, an environment whose episode just ended gives the mask "
             "of the next episode's first observation, so the mask always belongs to the "
             "observation it is stored with", "read_masks"),
            ("An environment without masks is refused rather than trained without them by "
             "accident; --no-mask trains the same agent with every action allowed",
             "read_masks::if missing.any()"),
            ("A Dict observation's entries but \"action_mask\" are flattened (Discrete and "
             "MultiDiscrete one-hot) and concatenated in sorted key order, fixed whatever "
             "order the environment builds them in", "obs_keys"),
            ("A time-limit truncation is not a termination: the step bootstraps from the value "
             "of the true final observation, flattened as the others",
             "train::final_obs = flatten_obs("),
            ("The greedy evaluation takes the most likely valid action", "Agent.greedy"),
            ("The rest is ppo.py's: Adam with eps 1e-5 (the PPO baselines'), learning-rate "
             "annealing, advantages normalized per minibatch and global gradient clipping",
             "train::eps=1e-5"),
        ],
        protocols=[
            (("ppo_masked-Taxi-v4", "ppo_masked-Taxi-v4-nomask"),
             "With masks beside --no-mask on Taxi-v4, the same flags (twice the budget "
             "without), with masks on fresh seeds 101-110 and without on seeds 1-5: how many "
             "hold at the end, the median and min-max of the 100-episode training mean, and "
             "the greedy evaluation return after training."),
            ((),
             "Beside sb3-contrib's MaskablePPO with the same hyperparameters "
             "(benchmarks/sb3_maskable_taxi.py), both on Taxi-v4, run interleaved for 3 seeds: "
             "the steps until the 100-episode training mean reached 7.5 and the whole-process "
             "seconds, seed by seed."),
        ]),
    "ppod": Algorithm(
        title="PPO+D: PPO guided by a demonstration",
        road="PPO whose rollouts sometimes replay a stored successful episode, so that a "
             "sparse reward is seen before the policy finds it by itself.",
        equations=[
            ("episode source   reward demo w.p. rho, value demo w.p. phi, real w.p. 1 - rho - phi",
             r"\text{source} \sim \big(\text{reward demo}: \rho,\ \text{value demo}: \phi,\ \text{real}: 1 - \rho - \phi\big)"),
            ("value demos      sampled with p_i = exp(alpha * (m_i - max_j m_j)) / sum_k (same),",
             r"p_i = \frac{\exp\big(\alpha (m_i - \max_j m_j)\big)}{\sum_k \exp\big(\alpha (m_k - \max_j m_j)\big)}"),
            ("phi <- phi - phi_0 / K_v,  rho <- rho + phi_0 / K_v   (phi >= 0)",
             r"\phi \leftarrow \phi - \phi_0 / K_v, \qquad \rho \leftarrow \rho + \phi_0 / K_v"),
            ("ratio_t          = pi_theta(a_t | s_t) / mu(a_t | s_t),  mu = 1 on a demo step (log mu = 0)",
             r"\rho_t = \frac{\pi_\theta(a_t \mid s_t)}{\mu(a_t \mid s_t)}, \qquad \mu = 1 \text{ on a demo step}"),
        ],
        loop=[
            (0, "reward demos = the given demonstrations, no value demos; threshold = their "
                "lowest return (or --success-threshold); rho, phi = --rho, --phi", "DemoBuffers"),
            (0, "actor and critic MLPs (two tanh layers each); one Adam (eps 1e-5); reset the N "
                "slots", "train"),
            (0, "while the environment steps taken < total_timesteps do", "train"),
            (1, "with --anneal-lr, the learning rate = lr (1 - steps taken / total_timesteps)",
             "train"),
            (1, "for T steps, in each of the N slots do", "train:Rollout"),
            (2, "a real slot: a ~ pi_old(.|s), log pi_old(a|s); a replaying slot: a = the demo's "
                "action, log mu = 0 (mu = 1)", "act_or_replay"),
            (2, "step: a real slot steps its environment; a replaying slot returns the demo's "
                "next observation and reward, and ends where the demo ended", "DemoReplay.step"),
            (2, "where an episode ended, the slot's next one is a reward demo w.p. rho (drawn "
                "uniformly), a value demo w.p. phi (demo i w.p. p_i), else a real episode",
             "choose_source"),
            (2, "store s, a, log mu, V(s), r, terminated, truncated, whether the row was "
                "replayed, and the true final observation where a time limit cut the episode; "
                "count the real steps only", "train:Rollout"),
            (2, "a finished real episode with return >= threshold joins the reward demos: phi "
                "down and rho up by phi_0 / K_v (until phi = 0), and over capacity the lowest "
                "value demo leaves, or else the oldest of the agent's reward demos; any other "
                "episode joins the value demos if there is room, or replaces the lowest if its "
                "max V is higher", "DemoBuffers.admit"),
            (1, "A = GAE(gamma, lambda) over the whole rollout, replayed rows included; "
                "R = A + V", "train:Targets"),
            (1, "for epoch = 1, ..., K do", "train:Update"),
            (2, "for each of the M shuffled minibatches: normalize A within it; one Adam step on "
                "-L_clip + c_v 0.5 (V(s_t) - R_t)^2 - c_e H with ratio = pi_theta(a|s) / mu(a|s), "
                "the gradient clipped to the norm max_grad_norm", "ppo_loss"),
            (2, "with --target-kl: stop the epochs once this epoch's mean approx KL on the "
                "agent's own rows exceeds it", "train:Update"),
            (1, "each value demo's m_i = max_t V(s_t) under the updated critic",
             "DemoBuffers.refresh"),
        ],
        details=[
            ("A replayed step is taken with mu = 1 (log mu = 0): the ratio is pi_theta(a_t|s_t) "
             "itself, so PPO learns from a demo as if the policy had acted by luck",
             "act_or_replay::log mu = log 1"),
            ("A replay leaves the environment untouched: it returns the demo's observations and "
             "rewards, and ends the way the demo ended", "DemoReplay.step"),
            ("Deviation: replayed steps touch no environment and do not count in "
             "--total-timesteps, so a run takes more updates than PPO on the same budget",
             "train::global_step += int((~replayed).sum())"),
            ("Deviation: value demos are drawn by a softmax of their maximum values m_i, not by "
             "the paper's m_i^alpha, which needs positive m, as returns like MountainCar's -1 "
             "per step are not", "value_probabilities"),
            ("Deviation: the annealing step divides by K_v, the value demos' room at the start; "
             "PyTorchRL divides by those held at the time", "anneal"),
            ("The success threshold (by default the given demos' lowest return) stays fixed, as "
             "in the paper, and the given demonstrations never leave, as in the authors' code; "
             "over capacity the oldest of the agent's reward demos goes, first in first out "
             "(--rising-threshold, off, is this script's former rule)", "DemoBuffers.admit"),
            ("A value demo replaces the lowest only with a strictly higher m (PyTorchRL admits "
             "on >=)", "DemoBuffers.admit::if self.value and max_value >"),
            ("Every value demo's m is recomputed under the critic after each update, so that "
             "admission and sampling compare numbers of one critic (the authors' code refreshes "
             "a value demo's m when it is replayed)", "DemoBuffers.refresh"),
            ("The approx KL and the clip fraction are measured on the agent's own rows only, "
             "since log mu = 0 on demo rows", "train::b_own = ~buffer"),
        ],
        protocols=[
            (("ppod-MountainCar-v0",),
             "ppod.py's row against our own goal, the default command run to its 300k budget "
             "on MountainCar-v0 with the one shipped demonstration (return -115): how many of "
             "fresh seeds 101-110 end with the 50-episode training mean at -120 or above (the "
             "defaults chosen on seeds 1-5), the median steps to -120 and the greedy evaluation "
             "return after 300k steps."),
            PPOD_VS_PPO,
            RND_MOUNTAINCAR,
        ]),
    "ppo_lstm": Algorithm(
        title="Recurrent PPO (LSTM)",
        road="PPO with memory: the policy carries a hidden state, so minibatches become "
             "sequences re-run from a stored state.",
        equations=[
            ("(h_t, c_t) = LSTM(enc(o_t), (h_{t-1}, c_{t-1})),   (h, c) = 0 where an episode starts",
             r"(h_t, c_t) = \operatorname{LSTM}\big(\operatorname{enc}(o_t), (h_{t-1}, c_{t-1})\big)"),
            ("ratio_t = pi_theta(a_t | h_t) / pi_old(a_t | h_t)",
             r"\rho_t = \frac{\pi_\theta(a_t \mid h_t)}{\pi_{\text{old}}(a_t \mid h_t)}"),
            ("L_clip  = E[ min(ratio_t A_t, clip(ratio_t, 1 - eps, 1 + eps) A_t) ]", PPO_CLIP),
            ("rollout k = 1, 2, ...:  lr_k = lr f_k,  eps_k = eps f_k,  f_k = max(0, 1 - (k - 1) / K),",
             r"\text{lr}_k = \text{lr}\, f_k, \quad \epsilon_k = \epsilon\, f_k, \quad f_k = \max\left(0, 1 - \frac{k-1}{K}\right)"),
        ],
        loop=[
            (0, "reset the N environments; every environment starts an episode, with the LSTM "
                "states (h, c) at zero", "train::state = agent.initial_state("),
            (0, "for rollout k = 1, 2, ..., total_timesteps / (N T) do", "train"),
            (1, "set the factor f_k = max(0, 1 - (k - 1) / K), K = anneal_steps / (N T): "
                "learning rate lr f_k and clip range eps f_k", "train::frac = max("),
            (1, "for t = 0, ..., T - 1, in the N environments at once, do", "train:Rollout"),
            (2, "zero (h, c) where an episode starts; store o_t, the episode-start flag and the "
                "state (h, c) the agent acts with",
             "train::buffer.h[step], buffer.c[step] = state"),
            (2, "run both LSTMs one step: sample a_t ~ pi(. | h_t), store a_t, log pi_old(a_t | "
                "h_t) and V_t; carry the new state on", "Agent.step"),
            (2, "step the environments; store r_t, terminated_t and truncated_t",
             "train::buffer.rewards[step] ="),
            (2, "where an episode was truncated, store V(true final observation), computed from "
                "the state the episode had reached", "train::buffer.final_values[step, i]"),
            (1, "V(s_T) from the state carried on; GAE advantages A_t and returns R_t = A_t + "
                "V_t", "compute_gae"),
            (1, "for epoch = 1, ..., E, for each minibatch do", "train:Update"),
            (2, "the minibatch: chunks of L consecutive steps of one environment's rollout, all "
                "N T / L chunks shuffled afresh each epoch", "recurrent_generator"),
            (2, "re-run both LSTMs over each chunk from the state stored at its first step, "
                "zeroing the state at every episode start inside it", "unroll"),
            (2, "normalize the advantages over the minibatch; the loss -L_clip + c_v 0.5 (V - "
                "R)^2 - c_e entropy", "ppo_loss"),
            (2, "one Adam step, the gradient's global norm clipped to 0.5",
             "train::clip_grad_norm_"),
            (1, "with --target-kl (off by default), stop the epochs once an epoch's mean approx "
                "KL exceeds it", "train::args.target_kl is not None"),
        ],
        details=[
            ("Minibatches are chunks of L = --data-chunk-length steps of one environment's "
             "rollout, shuffled and dealt out (HARL's recurrent_generator); CleanRL's "
             "ppo_atari_lstm batches whole rollouts, L = T", "recurrent_generator"),
            ("Each chunk is re-run from the LSTM state stored at its first step, the state "
             "reset to zeros at every episode start inside it, so every chunk has exactly L "
             "steps and nothing is padded (sb3-contrib's RecurrentPPO cuts at episode starts "
             "and pads)", "unroll"),
            ("A time-limit truncation bootstraps from V of the true final observation computed "
             "with the hidden state the episode had reached; a termination does not bootstrap",
             "train::buffer.final_values"),
            ("The critic has an LSTM of its own, as in Stable-Baselines3's RecurrentPPO "
             "(CleanRL's LSTM agent shares one): the value loss, whose targets are returns of "
             "tens to hundreds, would otherwise pull on the memory the actor uses",
             "Agent"),
            ("The LSTMs' weights orthogonal with gain 1 and biases 0, the other layers "
             "orthogonal as in ppo.py", "recurrent_tower"),
            ("The learning rate and the clip range epsilon anneal to 0 over --anneal-steps, "
             "not over --total-timesteps: annealed over the budget, a seed took 3-8x as many "
             "steps to 475 under 300k as under 100k (--anneal-clip as RecurrentPPO's rl-zoo "
             "entry for CartPoleNoVel-v1)", "train::horizon = max("),
            ("gamma 0.99, not ppo.py's 0.98: with 0.98 the 20-episode mean fell back further "
             "from 475 on tuning seeds 1-5 of CartPole without velocities",
             "Args::gamma:"),
            ("--norm-obs and --norm-reward are on by default; a time limit's true final "
             "observation is normalized by the same statistics without updating them",
             "train::final_obs = torch.from_numpy(normalizer("),
            ("--hide-obs drops observation dimensions inside each copy of the environment "
             "(CartPole's two velocities), so that the agent, the statistics, the final "
             "observations and the evaluation never see them: a Markov task becomes one that "
             "needs memory", "make_vector_env"),
        ],
        protocols=[
            (("ppo_lstm-CartPole-v1",),
             "The default command as a user types it (CartPole-v1, nothing hidden, 100k): "
             "fresh seeds 101-110 run to the budget, how many hold at the end (the 20-episode "
             "training mean at least 475), the median steps until it first reached 475, and "
             "the median greedy evaluation return."),
            (("ppo_lstm-CartPole-v1-novel",),
             "CartPole-v1 without its velocities (--hide-obs 1 3) against our own goals: fresh "
             "seeds 101-110 run to the 100k budget (the defaults chosen on seeds 1-5), how many "
             "hold at the end, the median steps until the 20-episode training mean reached 475, "
             "how many seeds reached it, and the median greedy evaluation return."),
            ((),
             "Beside sb3-contrib's RecurrentPPO with rl-baselines3-zoo's CartPoleNoVel-v1 "
             "hyperparameters (benchmarks/sb3_recurrent_cartpole_novel.py), both on CartPole-v1 "
             "with its two velocities hidden (ours by --hide-obs 1 3, the peer's zeroed as the "
             "zoo does): seeds 301-303 run interleaved on a quiet machine, the steps until the "
             "20-episode training mean reached 475 and the whole-process seconds seed by seed, "
             "and the median time ratio (0.08x against the goal of 0.7x)."),
            (("ppo_lstm-CartPole-v1-novel-300k",),
             "The budget check: seeds 301-305 with --total-timesteps 300000, the median steps "
             "until the 20-episode training mean reached 475 set against the same seeds' median "
             "under the 100k budget (goal: within 1.5x)."),
            (("ppo_lstm-Pendulum-v1-novel",),
             "Pendulum-v1 without its angular velocity (--hide-obs 2), a measurement with no "
             "goal or peer and flags not tuned: fresh seeds 201-210, the median steps until the "
             "20-episode training mean reached -200 and the median greedy evaluation return "
             "after 200k steps."),
            LSTM_VS_PPO,
            presets_held_out("ppo_lstm"),
        ]),
    "ppo_rnd": Algorithm(
        title="PPO with Random Network Distillation (RND)",
        road="PPO with a second, intrinsic reward stream that pays for novelty: the error of a "
             "predictor trained to copy a fixed random network.",
        equations=[
            ("i_t          = (1/k) * sum_j (f_hat_j(x_{t+1}) - f_j(x_{t+1}))^2, the predictor's error",
             r"i_t = \frac1k \sum_j \big(\hat f_j(x_{t+1}) - f_j(x_{t+1})\big)^2"),
            ("R^int_t      = gamma_int * R^int_{t-1} + i_t, a discounted sum run forward, never reset",
             r"R^{\text{int}}_t = \gamma_{\text{int}}\, R^{\text{int}}_{t-1} + i_t"),
            ("r^int_t      = i_t / sigma_R, sigma_R the running std of R^int over all rollouts so far",
             r"r^{\text{int}}_t = i_t / \sigma_R"),
            ("A_t          = c_ext * A^ext_t + c_int * A^int_t",
             r"A_t = c_{\text{ext}}\, A^{\text{ext}}_t + c_{\text{int}}\, A^{\text{int}}_t"),
        ],
        loop=[
            (0, "start the RND's state statistics from --rnd-init-steps random steps per "
                "environment, not counted in the budget", "random_states"),
            (0, "for iteration k = 1, ..., I do", "train"),
            (1, "set the learning rate to lr (1 - (k - 1) / I)", "train::if args.anneal_lr"),
            (1, "for t = 0, ..., T - 1, in the N environments at once, do", "train:Rollout"),
            (2, "sample a_t ~ pi(. | s_t); store s_t, a_t, log pi_old, V_ext(s_t) and "
                "V_int(s_t); step; store r_t, terminated_t, truncated_t",
             "Agent.get_action_and_value"),
            (2, "the state reached, s_{t+1} (the true final observation where an episode ended): "
                "update the RND's statistics with it, store it normalized and clipped to [-5, 5]",
             "train::buffer.rnd_obs[step] ="),
            (2, "where an episode was truncated, store its true final observation for the "
                "extrinsic bootstrap", "train::buffer.final_obs[step, i] ="),
            (1, "the intrinsic rewards i_t: the predictor's error on the states reached",
             "intrinsic_reward"),
            (1, "divide them by the running std of their forward discounted sum, carried over "
                "rollouts and not centred", "IntrinsicRewardScaler.__call__"),
            (1, "GAE of each stream: extrinsic with gamma, cut by terminations; intrinsic with "
                "gamma_int, cut by nothing", "RolloutBuffer.compute_returns"),
            (1, "the advantage the policy follows, A = c_ext A_ext + c_int A_int",
             "combine_advantages"),
            (1, "for epoch = 1, ..., E, for each shuffled minibatch do", "train:Update"),
            (2, "normalize A over the minibatch; PPO's clipped loss with the extrinsic value "
                "loss and the entropy bonus", "ppo_loss"),
            (2, "add c_v times the intrinsic value loss and the predictor's loss on a random "
                "fraction p of the minibatch (neither with --int-coef 0)", "predictor_loss"),
            (2, "one Adam step on the agent and the predictor, the gradient's global norm "
                "clipped to 0.5", "train::clip_grad_norm_"),
            (1, "with --target-kl (off by default), stop the epochs once an epoch's mean approx "
                "KL exceeds it", "train::args.target_kl is not None"),
        ],
        details=[
            ("The intrinsic stream is non-episodic, the paper's choice (Section 2.3): no episode "
             "end cuts it, because novelty found after an episode ends is worth reaching for, "
             "and intrinsic rewards >= 0 would make ending an episode look bad; the extrinsic "
             "stream stays episodic", "RolloutBuffer.next_values"),
            ("The intrinsic reward is divided by the running std of its forward discounted sum, "
             "carried from rollout to rollout and not centred, so that it stays >= 0, as in the "
             "authors' code", "IntrinsicRewardScaler.__call__"),
            ("The predictor is trained on a random fraction p of each minibatch (0.25, the "
             "paper's table; the authors' run_atari.py defaults to every sample); the target "
             "never changes", "train::keep = torch.rand"),
            ("Departure from the authors' convolutional networks: both RND networks are MLPs "
             "of the same shape (theirs give the predictor two more layers)", "RND"),
            ("Departure: the RND's state statistics are updated at every step, before "
             "normalizing it, as --norm-obs does (the authors' once per rollout), and the "
             "intrinsic reward of a step that ends an episode is the novelty of its true final "
             "observation", "train::rnd_normalizer(reached, update=True)"),
            ("Departure: the statistics start from --rnd-init-steps random steps per "
             "environment, taken on environments of their own and not counted in the budget",
             "random_states"),
            ("Departure from the paper's 1: int_coef defaults to 256 on MountainCar-v0, whose "
             "-1 a step makes the extrinsic advantage the critic's error while the intrinsic "
             "reward falls fast; on seeds 1-5 (300k steps) 1 reached -120 on 2 of 5, 256 on 5",
             "combine_advantages"),
            ("With --int-coef 0 neither the intrinsic head nor the predictor is trained, and the "
             "run is ppo.py's, step for step, with the same flags and seed",
             "train::if args.int_coef:"),
        ],
        protocols=[
            RND_MOUNTAINCAR,
            RND_CHAIN,
            RND_CONTINUOUS,
            RND_HELD_OUT,
        ]),
    "ddpg_td3": Algorithm(
        title="DDPG and TD3",
        road="Q-learning for continuous actions: a deterministic actor takes the place of the "
             "max, climbing the critic's gradient; TD3 adds three fixes for overestimation.",
        equations=[
            ("exploration    a  = clip(mu(s) + eps, -1, 1),                 eps ~ N(0, sigma^2)",
             r"a = \operatorname{clip}\big(\mu(s) + \epsilon, -1, 1\big), \qquad \epsilon \sim \mathcal{N}(0, \sigma^2)"),
            ("target action  a' = clip(mu'(s') + clip(eps', -c, c), -1, 1), eps' ~ N(0, sigma'^2)",
             r"a' = \operatorname{clip}\big(\mu'(s') + \operatorname{clip}(\epsilon', -c, c), -1, 1\big)"),
            ("critic target  y  = r + gamma * (1 - terminated) * min(Q'_1(s', a'), Q'_2(s', a'))",
             r"y = r + \gamma\,(1 - \text{terminated}) \min\big(Q'_1(s', a'), Q'_2(s', a')\big)"),
            ("actor loss     L_mu = -mean over the batch of Q_1(s, mu(s)),   every d-th critic step",
             r"L_\mu = -\operatorname{mean}\, Q_1\big(s, \mu(s)\big)"),
            ("target update  theta' <- tau * theta + (1 - tau) * theta',     with every actor step",
             r"\theta' \leftarrow \tau\,\theta + (1 - \tau)\,\theta'"),
        ],
        loop=[
            (0, "actor mu, critic Q_1 (and Q_2 with --twin-q), a target copy mu', Q'_1, Q'_2 of "
                "each", "Networks"),
            (0, "replay buffer of min(buffer_size, budget) transitions; one Adam for the actor, "
                "one for the critics; reset the N environments", "train"),
            (0, "for iteration = 1, 2, ..., total_timesteps / N do", "train"),
            (1, "a = uniform in [-1, 1]^d before learning_starts, else a = clip(mu(s) + eps, -1, "
                "1), eps ~ N(0, sigma^2); step the environments with a scaled to their bounds",
             "train:Collect"),
            (1, "store (s, a, r, terminated, s'), s' the true final observation where an episode "
                "ended; record the episodes that ended; stop at --stop-at-return",
             "ReplayBuffer.add"),
            (1, "from learning_starts on, gradient_steps times: sample B transitions and do",
             "train:Learn"),
            (2, "a' = clip(mu'(s') + clip(eps', -c, c), -1, 1), eps' ~ N(0, sigma'^2) "
                "(a' = mu'(s') when sigma' = 0)", "noisy_action"),
            (2, "y = r + gamma (1 - terminated) min(Q'_1(s', a'), Q'_2(s', a')) (Q'_1 alone "
                "without --twin-q)", "td3_target"),
            (2, "one Adam step on the critics' loss, the sum over i of mean (Q_i(s, a) - y)^2",
             "update"),
            (2, "every d-th critic step: one Adam step on the actor's loss -mean Q_1(s, mu(s)), "
                "the critic frozen", "update:The deterministic policy gradient"),
            (2, "and on that step, theta' = tau theta + (1 - tau) theta' for the actor and each "
                "critic", "soft_update"),
            (1, "every log_interval steps, and at the end: a row of updates.csv", "train:Log"),
        ],
        details=[
            ("--algo sets TD3's three improvements at once (twin critics, target smoothing "
             "noise 0.2, policy delay 2; DDPG none), and each flag given as well overrides "
             "its part, so that the improvements can be switched on one at a time",
             "resolve_algo"),
            ("DDPG is the one TD3's paper compares with: Gaussian exploration noise rather than "
             "Ornstein-Uhlenbeck, no batch normalization, the same networks and optimizer as "
             "TD3", "noisy_action"),
            ("Every action lives in [-1, 1]^d, the actor's tanh range: the noise scales are "
             "fractions of each dimension's half-range, and only the environment gets actions "
             "scaled to its bounds; the buffer keeps them unscaled", "to_env_action"),
            ("Uniformly random actions for the first --learning-starts steps (1,000; 25,000 in "
             "the TD3 authors' later code), and no learning before",
             "train::if global_step < args.learning_starts"),
            ("A time-limit truncation is not a termination: where an episode ended, s' is its "
             "true final observation, and only terminated stops the bootstrap",
             "train::final_obs = next_obs.copy()"),
            ("Adam with its default betas and eps 1e-8, as in TD3's authors' code: one "
             "optimizer for the actor, one for both critics, whose loss is the sum of theirs",
             "train::critic_optimizer = torch.optim.Adam"),
            ("Target policy smoothing: the target actor's action gets Gaussian noise clipped to "
             "[-c, c] (0.2 and 0.5 in TD3), then clipped to the bounds",
             "update::next_actions = noisy_action"),
            ("The actor and every target network move on every d-th critic step, with the "
             "critic frozen in the actor's loss so that the gradient reaches the actor's "
             "weights alone", "update::if gradient_step % args.policy_delay == 0"),
            ("The actor and the critics are two hidden layers of ReLUs in nn.Linear's "
             "initialization, --hidden-size 64 wide by default (400 and 300 in TD3, 256 in its "
             "authors' later code)", "mlp"),
        ],
        protocols=[
            (("ddpg_td3-HalfCheetah-v5", "ddpg_td3-HalfCheetah-v5-100k", "ddpg_td3-Hopper-v5-100k",
              "ddpg_td3-Walker2d-v5-100k"),
             "MuJoCo with the TD3 paper's settings: our median over fresh seeds 104-106 of the "
             "greedy evaluation return (10 episodes, every 10,000 steps and after training) on "
             "v5, "
             + TD3_PAPER_MUJOCO
             + ", and the figures draw the authors' own runs (v1) as the median and min-max of "
             "their 10 seeds."),
            (("ddpg_td3-HalfCheetah-v4-vs-cleanrl", "cleanrl-td3_continuous_action-HalfCheetah-v4"),
             "Beside CleanRL's td3_continuous_action.py (its commit fe8d8a0) on HalfCheetah-v4, "
             "the version CleanRL's Gymnasium 0.29.1 makes, for 100k steps, ours with its v5 "
             "task's TD3-paper flags and CleanRL's with its own defaults: seeds 101-103, a "
             "seed's two processes started together on one torch thread each, comparing the "
             "median [min, max] over the three seeds of the 100-episode training mean at the "
             "budget (CleanRL's measure) and the whole-process seconds, beside our greedy "
             "evaluation return, which CleanRL's script does not make."),
            (("ddpg_td3-Pendulum-v1", "ddpg_td3-Pendulum-v1-ddpg"),
             "DDPG beside TD3, the same flags but --algo, on Pendulum-v1 for 15k steps, TD3 on "
             "fresh seeds 101-110 (the defaults chosen on seeds 1-5) and DDPG on seeds 1-5: "
             "the median and min-max of the 10-episode training mean, the greedy evaluation "
             "return after training and on how many seeds it is at -200 or above."),
            ((),
             "Beside Stable-Baselines3's TD3 with rl-baselines3-zoo's Pendulum-v1 "
             "hyperparameters (benchmarks/sb3_td3_pendulum.py, the zoo's 20k steps against our "
             "15k), both on Pendulum-v1 and one torch thread each: seeds 101-103 run "
             "interleaved, the whole-process seconds, the steps to -200 and the evaluation "
             "return seed by seed, and the median of the three time ratios (0.18x against the "
             "goal of 0.7x)."),
            PENDULUM_THREE,
        ]),
    "sac": Algorithm(
        title="Soft Actor-Critic (SAC)",
        road="TD3's twin critics with a stochastic actor that maximizes return plus entropy, "
             "and a temperature learned to hold the entropy near a target.",
        equations=[
            ("actor          u ~ N(mu(s), sigma(s)^2),   a = tanh(u)",
             r"u \sim \mathcal{N}\big(\mu(s), \sigma(s)^2\big), \qquad a = \tanh(u)"),
            ("critic target  y = r + gamma (1 - terminated) (min_j Q'_j(s', a') - alpha log pi(a'|s')),",
             r"y = r + \gamma\,(1 - \text{terminated})\Big(\min_j Q'_j(s', a') - \alpha \log \pi(a' \mid s')\Big)"),
            ("actor loss     L_pi = mean over s of alpha log pi(a~|s) - min_j Q_j(s, a~),  a~ ~ pi(.|s)",
             r"L_\pi = \operatorname{mean}_s\Big[\alpha \log \pi(\tilde a \mid s) - \min_j Q_j(s, \tilde a)\Big]"),
            ("temperature    L_alpha = -mean of alpha (log pi(a~|s) + H_target),   H_target = -dim(A)",
             r"L_\alpha = -\operatorname{mean}\Big[\alpha\big(\log \pi(\tilde a \mid s) + \mathcal{H}_{\text{target}}\big)\Big]"),
            ("log(1 - tanh(u)^2) = 2 (log 2 - u - softplus(-2u))     (stable form)",
             r"\log\big(1 - \tanh(u)^2\big) = 2\big(\log 2 - u - \operatorname{softplus}(-2u)\big)"),
        ],
        loop=[
            (0, "actor pi, critics Q_1, Q_2, their target copies Q'_1, Q'_2, log alpha = "
                "log(--alpha); Adam for the actor, the critics and alpha", "Agent.__init__"),
            (0, "replay buffer of min(buffer_size, budget) transitions; reset the N environments",
             "ReplayBuffer"),
            (0, "for iteration = 1, 2, ..., total_timesteps / N do", "train"),
            (1, "a = uniform in [-1, 1]^d before learning_starts, else a = tanh(u), u ~ N(mu(s), "
                "sigma(s)^2); step the environments with a scaled to their bounds", "train:Act"),
            (1, "store (s, a, r, terminated, s'), s' the true final observation where an episode "
                "ended; record the episodes that ended; stop at --stop-at-return",
             "ReplayBuffer.add"),
            (1, "from learning_starts on, gradient_steps times: sample B transitions and do",
             "Agent.update"),
            (2, "a' = tanh(u'), u' ~ N(mu(s'), sigma(s')^2), and log pi(a'|s') = sum_i [log "
                "N(u'_i) - log(1 - tanh(u'_i)^2) - log scale_i]", "squashed_logprob"),
            (2, "y = r + gamma (1 - terminated) (min_j Q'_j(s', a') - alpha log pi(a'|s'))",
             "sac_target"),
            (2, "one Adam step on the critics' loss, the sum over j of mean (Q_j(s, a) - y)^2",
             "Agent.update"),
            (2, "every d-th critic step, d times: a~ = tanh(mu(s) + sigma(s) xi), xi ~ N(0, I); "
                "one Adam step on the actor's loss mean (alpha log pi(a~|s) - min_j Q_j(s, a~))",
             "actor_loss"),
            (2, "and after each, with --autotune, one Adam step on -mean alpha (log pi(a~|s) + "
                "H_target), the same sample's log pi", "temperature_loss"),
            (2, "theta'_j = tau theta_j + (1 - tau) theta'_j for both critics", "soft_update"),
            (1, "every log_interval steps, and at the end: a row of updates.csv", "train:Log"),
        ],
        details=[
            ("SAC as in the 2018b paper: twin critics and a learned temperature, no value "
             "network V(s); the 2018a paper had one, and a fixed temperature given as a reward "
             "scale", "Agent.__init__"),
            ("Departure from the papers and SB3 (d = 1): with --policy-frequency d, as in "
             "CleanRL (d = 2), every d-th critic step makes d actor and temperature steps",
             "Agent.update::if self.critic_steps % args.policy_frequency == 0"),
            ("Uniformly random actions before --learning-starts fill the buffer; afterwards a "
             "sample of the policy explores, not the greedy tanh(mu)",
             "train::if global_step < args.learning_starts"),
            ("A time-limit truncation is not a termination: where an episode ended, s' is its "
             "true final observation; a truncated step bootstraps from it, a terminated one "
             "does not", "train::final_obs = next_obs.copy()"),
            ("log pi includes -log(scale), the density of the environment's action, as in "
             "CleanRL; SB3 takes the density of the [-1, 1] action. With Pendulum's bounds of "
             "+-2 the two differ by log 2 per dimension, which shifts where the target entropy "
             "settles", "squashed_logprob::torch.log(action_scale)"),
            ("Departure from CleanRL and SB3: log(1 - tanh(u)^2) is exact, 2 (log 2 - u - "
             "softplus(-2u)), the form of Spinning Up; their log(1 - tanh(u)^2 + 1e-6) caps the "
             "correction at -13.8 where an action nears its bound, so their log pi is too low "
             "there", "squashed_logprob::log_det_tanh ="),
            ("The temperature step takes log pi of the sample that the actor step drew, before "
             "that step, as SB3 does; CleanRL draws a fresh sample after it. One sample saves a "
             "forward pass, and a slowly moving temperature barely feels one actor step",
             "Agent.update::if args.autotune"),
            ("The temperature's loss is the paper's, in alpha = exp(log_alpha), as CleanRL; SB3 "
             "puts log_alpha in place of alpha, which scales the gradient by 1/alpha",
             "temperature_loss"),
            ("log sigma clipped to [-20, 2], as Haarnoja's code and SB3; CleanRL squashes it "
             "into [-5, 2] with a tanh", "Actor.forward"),
            ("The critics and the buffer see actions in [-1, 1]; only the environment gets them "
             "scaled to its bounds (CleanRL's critics see environment units)", "to_env_action"),
        ],
        protocols=[
            (("sac-Ant-v4-held-out", "cleanrl-sac_continuous_action-Ant-v4",
              "sac-InvertedDoublePendulum-v4-held-out",
              "cleanrl-sac_continuous_action-InvertedDoublePendulum-v4",
              "sac-Swimmer-v4-held-out", "cleanrl-sac_continuous_action-Swimmer-v4"),
             "Held out (issue 107): our default command, only --env-id and --total-timesteps "
             "100000 and so its continuous-long preset, beside CleanRL's sac_continuous_action.py "
             "(commit fe8d8a0) with its own defaults at the same budget, on Ant-v4, "
             "InvertedDoublePendulum-v4 and Swimmer-v4, the v4 that CleanRL's Gymnasium 0.29.1 "
             "makes: seeds "
             "101-103, a seed's two processes started together on one torch thread each, "
             "comparing the median [min, max] of the 100-episode training mean at the budget, "
             "beside our greedy evaluation return; a time only where the load stayed at 2 or "
             "under (Ant's seed 102, every InvertedDoublePendulum seed, Swimmer's seeds 101 and "
             "102)."),
            (("sac-HalfCheetah-v5", "sac-HalfCheetah-v5-100k", "sac-Hopper-v5-100k",
              "sac-Walker2d-v5-100k"),
             "MuJoCo with the 2018b paper's settings: our median over fresh seeds 101-103 of "
             "the greedy evaluation return (10 episodes, every 10,000 steps and after training) "
             "on v5, "
             + TD3_PAPER_MUJOCO
             + "."),
            (("sac-HalfCheetah-v5", "sac-HalfCheetah-v5-100k", "sac-Hopper-v5-100k",
              "sac-Walker2d-v5-100k"),
             "The same figures draw SimbaV2's published SAC evaluation curves (10 seeds, "
             "Gymnasium v4, benchmarks/references/simbav2-100k.json) as their median and "
             "min-max to 100k, beside our median over seeds 101-103 on v5."),
            (("sac-Pendulum-v1",),
             "Pendulum-v1: our median over fresh seeds 101-110 (the defaults chosen on seeds "
             "1-5) of the steps until the 20-episode training mean reached -200 and of the "
             "greedy evaluation return after 10k steps, on how many it ends at -200 or above, "
             "against "
             "Stable-Baselines3's SAC with rl-baselines3-zoo's hyperparameters "
             "(benchmarks/sb3_sac_pendulum.py) reaching -200 at 6.4k-7.2k steps over 3 seeds, "
             "and a whole-process time ratio (0.22x) measured on seed 1 alone."),
            PENDULUM_THREE,
            CROSSQ_VS_SAC,
            (("sac-HalfCheetah-v4-vs-cleanrl", "cleanrl-sac_continuous_action-HalfCheetah-v4"),
             "Beside CleanRL's sac_continuous_action.py (its commit fe8d8a0) on HalfCheetah-v4, "
             "the version CleanRL's Gymnasium 0.29.1 makes, for 100k steps, ours with its v5 "
             "task's flags (one rate of 3e-4, 10,000 random steps) and CleanRL's with its own "
             "defaults (critics and temperature at 1e-3, 5,000 random steps): seeds 101-103, a "
             "seed's two processes started together on one torch thread each, comparing the "
             "median [min, max] over the three seeds of the 100-episode training mean at the "
             "budget (CleanRL's measure) and the whole-process seconds, beside our greedy "
             "evaluation return, which CleanRL's script does not make."),
        ]),
    "crossq": Algorithm(
        title="CrossQ",
        road="SAC without target networks: batch renormalization in the critics and one joint "
             "forward pass of (s, a) and (s', a').",
        equations=[
            ("batch renorm   y = gamma_bn ((x - mu_B) / sigma_B * r + d) + beta_bn,   per feature,",
             r"y = \gamma_{bn}\left(\frac{x - \mu_B}{\sigma_B}\, r + d\right) + \beta_{bn}"),
            ("joint pass     [Q_j(s, a); Q_j(s', a')] = Q_j([s; s'], [a; a']), a' ~ pi(.|s'): 2B rows",
             r"\big[Q_j(s, a);\, Q_j(s', a')\big] = Q_j\big([s; s'], [a; a']\big)"),
            ("critic target  y = r + gamma (1 - terminated) (min_j sg[Q_j(s', a')] - alpha log pi(a'|s')),",
             r"y = r + \gamma\,(1 - \text{terminated})\Big(\min_j \operatorname{sg}\big[Q_j(s', a')\big] - \alpha \log \pi(a' \mid s')\Big)"),
        ],
        loop=[
            (0, "actor pi and critics Q_1, Q_2 with batch renorm layers, kept in evaluation mode; "
                "no target copies; log alpha = log(--alpha); Adam (beta1 = 0.5 for the actor "
                "and the critics)", "Agent.__init__"),
            (0, "replay buffer of min(buffer_size, budget) transitions; reset the N environments",
             "ReplayBuffer"),
            (0, "for iteration = 1, 2, ..., total_timesteps / N do", "train"),
            (1, "a = uniform in [-1, 1]^d before learning_starts, else a = tanh(u) sampled from "
                "the actor in evaluation mode; step the environments with a scaled to their "
                "bounds", "train:Act"),
            (1, "store (s, a, r, terminated, s'), s' the true final observation where an episode "
                "ended; record the episodes that ended; stop at --stop-at-return",
             "ReplayBuffer.add"),
            (1, "from learning_starts on, gradient_steps times: sample B transitions and do",
             "Agent.update"),
            (2, "a' ~ pi(.|s') and log pi(a'|s'), the actor in evaluation mode", "Actor.sample"),
            (2, "in training mode, one pass of each critic on [s; s'], [a; a'] gives Q_j(s, a) "
                "and Q_j(s', a')", "joint_pass"),
            (2, "in it, each batch renorm layer normalizes the 2B rows with their mean and "
                "variance, corrected by r_bn and d_bn (1 and 0 in the warm-up), and moves its "
                "running statistics", "BatchRenorm.forward"),
            (2, "y = r + gamma (1 - terminated) (min_j sg[Q_j(s', a')] - alpha log pi(a'|s'))",
             "crossq_target"),
            (2, "one Adam step on the critics' loss, the sum over j of mean (Q_j(s, a) - y)^2",
             "Agent.update"),
            (2, "every policy_delay-th critic step: a~ from the actor in training mode; one Adam "
                "step on the actor's loss mean (alpha log pi(a~|s) - min_j Q_j(s, a~)), the "
                "critics in evaluation mode", "actor_loss"),
            (2, "and after it, with --autotune, one Adam step on -mean alpha (log pi(a~|s) + "
                "H_target)", "temperature_loss"),
            (1, "every log_interval steps, and at the end: a row of updates.csv", "train:Log"),
        ],
        details=[
            ("No target networks: the critic's target takes the critics' own values at "
             "(s', a') under a stop gradient, the paper's first change to SAC",
             "crossq_target"),
            ("The current and next pairs go through each critic in one forward pass of 2B, so "
             "that every batch renorm layer normalizes both with the statistics of their union; "
             "two calls would normalize each half by its own", "joint_pass"),
            ("Batch renormalization as in Ioffe (2017): r and d are constants to the gradient, "
             "and for the first --renorm-warmup-steps (100,000) training passes of each layer "
             "r = 1 and d = 0 (plain "
             "batch norm), so at a 100k budget the layers are batch norm throughout, as in the "
             "authors' runs", "BatchRenorm.forward::with torch.no_grad()"),
            ("Departure from the authors' layer (flax's BatchNorm rewritten): epsilon inside "
             "sigma_B and sigma, where theirs divides by sqrt(var_B / r^2 + epsilon), a "
             "difference of the order of epsilon; both keep the biased batch variance, in the "
             "running variance too (torch's BatchNorm keeps the unbiased one)",
             "BatchRenorm.forward::var = centered.square().mean(0)"),
            ("Batch renorm on the input and after each hidden layer's activation, in the "
             "critics and the actor, as in the authors' code", "mlp"),
            ("The networks stay in evaluation mode (running statistics, nothing updated) but "
             "inside update's training passes: acting, the next actions a' and the actor's "
             "reading of the critics use the running statistics, as in the authors' code",
             "training_mode"),
            ("Adam with beta1 = 0.5 for the actor and the critics, the paper's; the "
             "temperature's Adam keeps the default 0.9, as the authors'",
             "Agent.__init__::betas = (args.adam_beta1, 0.999)"),
            ("--policy-delay d makes one actor and temperature step every d-th critic step (3), "
             "as the authors; sac.py's --policy-frequency d makes d of them (CleanRL)",
             "Agent.update::if self.critic_steps % args.policy_delay == 0"),
            ("Departure from the authors, who halve it: the critic loss is each critic's mean "
             "squared error, summed, which Adam's steps do not feel (they are invariant to the "
             "loss's scale, but for epsilon)",
             "Agent.update::critic1_loss, critic2_loss = F.mse_loss"),
            ("Departure from the paper's 2,048 units: the critics are 256 wide by default, "
             "because a 2,048-wide layer costs 64 times the arithmetic, which the CPU reference "
             "machine cannot afford; 256 is sac.py's width, so the two compare at the same cost",
             "Args::critic_hidden_size:"),
        ],
        protocols=[
            (("crossq-Pendulum-v1",),
             "The default command as a user types it (Pendulum-v1, 10k steps): fresh seeds "
             "101-110 run to the budget, how many hold at the end (the greedy evaluation return "
             "at least -200, as sac.py's row) and the median evaluation return."),
            CROSSQ_VS_SAC,
            (("crossq-Hopper-v5-100k", "crossq-HalfCheetah-v5-100k"),
             "Against CrossQ's published runs, the authors' critics 2,048 wide against our 256: "
             "our median greedy evaluation return at 100k on v5 (seeds 101-103 on Hopper-v5, "
             "102-103 on HalfCheetah-v5) beside the CrossQ paper's mean of 10 seeds at 100k on "
             "v4 (2,764 / 8,112), and in the figures beside SimbaV2's data of those runs (10 "
             "seeds, v4) as their median and min-max."),
            (("crossq-Hopper-v5-100k", "crossq-HalfCheetah-v5-100k"),
             "The thresholds, 2,410 on Hopper and 7,697 on HalfCheetah, are the TD3 paper's "
             "curves at 300k steps (the mean of its 10 seeds' evaluations on Gym's v1), set "
             "against our median greedy evaluation return at 100k on v5 over seeds 101-103 and "
             "102-103."),
        ]),
    "es": Algorithm(
        title="Evolution strategies (OpenAI ES)",
        road="No gradient of the return at all: perturb the parameters, play, and move towards "
             "the perturbations that did better. It parallelizes by sharing only seeds.",
        equations=[
            ("eps_i ~ N(0, I)                       with --antithetic, pairs eps_{2j} = -eps_{2j+1}",
             r"\epsilon_i \sim \mathcal{N}(0, I)"),
            ("g     = 1 / (n * sigma) * sum_i F~_i * eps_i          (estimates grad E[F(theta + sigma eps)])",
             r"g = \frac{1}{n\sigma} \sum_i \tilde F_i\, \epsilon_i"),
            ("theta <- theta + optimizer(g - (l2_coef / sigma) * theta)    (SGD or Adam, ascending)",
             r"\theta \leftarrow \theta + \operatorname{optimizer}\Big(g - \frac{l_2}{\sigma}\,\theta\Big)"),
        ],
        loop=[
            (0, "theta: weights ~ N(0, 1 / fan_in), the last layer's scaled by 0.1, biases 0; "
                "every worker holds a copy of theta and of the optimizer", "Policy.initial_theta"),
            (0, "for generation = 1, 2, ... until the budget of environment steps do", "train"),
            (1, "draw n / 2 noise seeds with signs +1 and -1 (antithetic), and the start states "
                "every member plays from", "sample_population"),
            (1, "for each member i = 1, ..., n, on the workers in parallel, do", "play_task"),
            (2, "regenerate eps_i from its seed alone: the member's parameters are theta + "
                "sign_i sigma eps_i", "member_noise"),
            (2, "play them from the generation's start states; F_i = the mean return (theta "
                "itself also plays one episode, for the log)", "play_episodes"),
            (1, "with --norm-obs, merge the members' observation moments into the statistics",
             "train::normalizer.update("),
            (1, "shape the returns into centered ranks F~_i in [-0.5, 0.5]", "centered_ranks"),
            (1, "g = 1 / (n sigma) sum_i F~_i eps_i", "es_gradient"),
            (1, "theta <- theta + Adam(g - (l2_coef / sigma) theta), here and on every worker's "
                "copy from the same seeds, signs and returns", "EvolutionStrategy.update"),
        ],
        details=[
            ("Fitness shaping by centered ranks (Salimans et al. 2017): only the order of the "
             "returns counts, so that one lucky episode cannot dominate a step",
             "centered_ranks"),
            ("Deviation from the authors' code, which ranks ties by argsort's order: tied "
             "returns share their mean rank, so a mirrored pair that scores the same cancels, "
             "and a generation that ties throughout gives g = 0", "centered_ranks::ranks = (below"),
            ("Antithetic sampling (--antithetic): members 2j and 2j+1 share a seed with signs "
             "+1 and -1, so that a pair adds (F+ - F-) eps", "sample_population"),
            ("A member's noise is regenerated from its integer seed alone, so only seeds and "
             "returns travel between processes, never a noise vector or theta, as in the paper",
             "member_noise"),
            ("The weight decay is divided by sigma to put l2_coef on the authors' scale "
             "(their l2coeff, 0.005): their gradient leaves out the 1/sigma, which Adam's step "
             "does not feel", "EvolutionStrategy.update::self.l2_coef / self.sigma"),
            ("Every process sums the gradient member by member in a fixed order, so that every "
             "copy of theta computes the same bits, whatever --num-workers is",
             "es_gradient"),
            ("Weights start as N(0, 1 / fan_in), the last layer's scaled by 0.1, biases 0",
             "Policy.initial_theta"),
            ("All members of a generation play from the same start states (common random "
             "numbers), so that their returns differ by their parameters, not their luck; a "
             "truncated episode's return is what was collected until the cut, with no "
             "bootstrapping", "play_episodes"),
        ],
        protocols=[
            (("es-CartPole-v1",),
             "CartPole-v1's row against our own goal, the default command run to its 500k "
             "budget on fresh seeds 101-110: how many hold (the greedy evaluation after "
             "training at least 475) and its median, no peer beside it; its steps column is "
             "the 20-episode mean of the members' training episodes."),
            (("es-CartPole-v1-1-worker", "es-CartPole-v1-2-workers", "es-CartPole-v1-ray-1-worker",
              "es-CartPole-v1-ray-2-workers"),
             "The speed rows set one worker beside two on each backend, on CartPole-v1 over the "
             "same seeds 1-5 and a fixed 300k steps: the median steps per second of the "
             "training loop (goals 1.7x with processes, 1.6x with Ray actors), no evaluation, "
             "the training episodes identical seed by seed across the four."),
            (("es-Pendulum-v1",),
             "Pendulum-v1 with flags of its own, a measurement with no goal: the greedy "
             "evaluation return after 3M steps, median over seeds 1-3, beside the -150 to -200 "
             "that a full swing-up scores."),
            presets_held_out("es"),
        ]),
    "impala": Algorithm(
        title="IMPALA and V-trace",
        road="Acting and learning split apart: actors play with weights that lag the learner's, "
             "and V-trace corrects for the lag with truncated importance weights.",
        equations=[
            ("rho_t    = min(rho_bar, pi(a_t|s_t) / mu(a_t|s_t)),   c_t = min(c_bar, pi / mu)",
             r"\rho_t = \min\left(\bar\rho, \frac{\pi(a_t \mid s_t)}{\mu(a_t \mid s_t)}\right), \qquad c_t = \min\left(\bar c, \frac{\pi}{\mu}\right)"),
            ("delta_t  = rho_t * (r_t + gamma * (1 - terminated_t) * V'_t - V(s_t))",
             r"\delta_t = \rho_t\big(r_t + \gamma\,(1 - \text{terminated}_t)\, V'_t - V(s_t)\big)"),
            ("vs_t     = V(s_t) + delta_t + gamma * c_t * (1 - done_t) * (vs_{t+1} - V(s_{t+1})),",
             r"v_t = V(s_t) + \delta_t + \gamma\, c_t\,(1 - \text{done}_t)\big(v_{t+1} - V(s_{t+1})\big)"),
            ("A_t      = rho_t * (r_t + gamma * (1 - terminated_t) * G_t - V(s_t))",
             r"A_t = \rho_t\big(r_t + \gamma\,(1 - \text{terminated}_t)\, G_t - V(s_t)\big)"),
        ],
        loop=[
            (0, "each actor, in its own process, repeats:", "Actor"),
            (1, "take the newest published weights (every --refresh-every rollouts); play T "
                "steps in its N environments with them, the behaviour policy mu; send s, a, log "
                "mu(a | s), r, terminated, truncated, the true final observations of truncated "
                "steps and the weights' version", "Actor.rollout"),
            (0, "the learner publishes the weights as version 0 and asks each actor for a "
                "rollout; then, for update k = 1, ..., K, do",
             "train::actors.publish(agent, version)"),
            (1, "set the learning rate to lr (1 - (k - 1) / K)", "train::if args.anneal_lr"),
            (1, "take --rollouts-per-batch rollouts as they arrive; each actor that sent one "
                "plays its next at once", "train:Collect"),
            (1, "recompute log pi(a_t | s_t) and V(s_t) with the current networks; the lag k - v "
                "of each rollout", "train:Targets"),
            (1, "V-trace targets v_t and advantages A_t with the truncated weights rho_t and c_t "
                "(--no-vtrace: rho = c = 1)", "compute_vtrace"),
            (1, "the loss -mean(A log pi) + c_v 0.5 (v - V)^2 - c_e entropy", "impala_loss"),
            (1, "one Adam step, the gradient's global norm clipped to 0.5; publish the new "
                "weights as version k", "train:Update"),
        ],
        details=[
            ("Departure from the authors' RMSProp (decay 0.99, eps 0.1; TorchBeast's and "
             "Cleanba's eps 0.01): Adam with eps 1e-5, as in ppo.py, for which the defaults "
             "here are set", "train::eps=1e-5"),
            ("Departure: the gradient's global norm is clipped at --max-grad-norm (0.5, as in "
             "ppo.py) against a rare large step; the authors' code clips none (TorchBeast and "
             "Cleanba clip at 40)", "train::clip_grad_norm_"),
            ("Departure: the loss is averaged over the batch, not summed, so that the learning "
             "rate does not depend on the batch's size", "impala_loss::.mean()"),
            ("Departure: rewards as the environment gives them; the authors' code clips them "
             "(to [-1, 1] by default), which would flatten Pendulum's (down to -16 a step)",
             "train:Targets"),
            ("Departure: separate actor and critic networks that see the observation alone; "
             "the authors' agent is one network with an LSTM fed the last action and reward too, "
             "but the environments here show their state in each observation", "Agent"),
            ("Departure: c_bar is a flag (default 1), to try other clips; the authors' code "
             "fixes c_t = min(1, pi/mu)", "compute_vtrace"),
            ("Departure: one actor per vector of N environments rather than per environment, "
             "for fewer processes", "Actor"),
            ("As in the authors' code, the learning rate falls linearly to 0 over the budget",
             "train::if args.anneal_lr"),
        ],
        protocols=[
            (("impala-CartPole-v1",),
             "CartPole-v1 with the defaults (2 Ray actors) against our own goal, the 20-episode "
             "training mean at 475 or more at the end of the 300k budget on at least 9 of 10 "
             "fresh seeds 121-130, with the critic under PopArt (chosen on tuning seeds 1-10; "
             "seeds 101-120 held 16 of 20 with the paper's critic, --popart-beta 0), the median "
             "steps until it first got there and the median greedy evaluation return."),
            (("impala-CartPole-v1-lag-vtrace", "impala-CartPole-v1-lag-no-vtrace"),
             "V-trace beside --no-vtrace (rho = c = 1) at a large policy lag (--refresh-every "
             "16) on CartPole-v1, both on fresh seeds 101-105: the median and min-max of the "
             "20-episode training mean, the seeds that reach 475 and the greedy evaluation "
             "return."),
            (("impala-CartPole-v1-1-actor", "impala-CartPole-v1-2-actors"),
             "One actor beside two, a fixed 300k steps on CartPole-v1 over seeds 101-103: the "
             "median steps per second (goal 1.6x), with no evaluation and the training returns "
             "not compared."),
            (("impala-Pendulum-v1-continuous",),
             "The continuous preset on its tuning environment: Pendulum-v1 for 1M steps, only "
             "--env-id and --total-timesteps given, on tuning seeds 1-5 (the settings chosen on "
             "seed 1), one run at a time: how many end with a greedy evaluation return of -200 "
             "or more, and its median, no peer beside it."),
            presets_held_out("impala"),
        ]),
    "mappo": Algorithm(
        title="Multi-Agent PPO (MAPPO)",
        road="PPO for a team: decentralized actors on their own observations, a centralized "
             "critic that sees the state, trained on the team reward.",
        equations=[
            ("ratio_t^i = pi_theta(a_t^i | o_t^i) / pi_old(a_t^i | o_t^i)",
             r"\rho_t^i = \frac{\pi_\theta(a_t^i \mid o_t^i)}{\pi_{\text{old}}(a_t^i \mid o_t^i)}"),
            ("L_clip    = sum_{t,i} m_t^i min(ratio_t^i A_t^i, clip(ratio_t^i, 1-eps, 1+eps) A_t^i)",
             r"L^{\text{clip}} = \frac{\sum_{t,i} m_t^i \min\big(\rho_t^i A_t^i, \operatorname{clip}(\rho_t^i, 1-\epsilon, 1+\epsilon) A_t^i\big)}{\sum_{t,i} m_t^i}"),
            ("GAE       delta_t = r_t + gamma (1 - terminated_t) V(s_{t+1}) - V(s_t)", GAE_DELTA),
        ],
        loop=[
            (0, "for iteration = 1, ..., I do", "train"),
            (1, "for t = 0, ..., T - 1, in the N copies in lock-step, do", "train:Collect"),
            (2, "store each agent's o^i, available actions and active mask, and the critic's "
                "input (EP: s; AS: s | o^i | one-hot i)", "critic_input"),
            (2, "sample every agent's a^i ~ pi(. | o^i); store log pi_old and the critic's value",
             "Actors.act"),
            (2, "step the copies; store the team reward (the mean over the agents that acted) "
                "and the ends, and where an episode was truncated the critic's input of the true "
                "final state", "critic_step"),
            (1, "GAE on the denormalized values; returns R = A + V (EP: every agent of a copy "
                "shares its advantage)", "RolloutBuffer.gae"),
            (1, "merge the returns into the value normalizer's mean and variance, once per "
                "rollout", "ValueNorm.update"),
            (1, "for epoch = 1, ..., E, for each minibatch of (step, copy) rows do",
             "train:Update"),
            (2, "normalize the advantages over the active agent steps", "normalize_advantages"),
            (2, "the masked loss: clipped surrogate, clipped value loss on the normalized "
                "returns, entropy bonus", "mappo_loss"),
            (2, "one Adam step, the actors' and the critic's gradients each clipped to a global "
                "norm of 10", "train::clip_grad_norm_"),
        ],
        details=[
            ("The critic sees one of two states (Yu et al. 2022, section 4; the buffers follow "
             "HARL's): EP, env.state(), one value per environment copy; AS, env.state() joined "
             "with the agent's own observation and a one-hot id, one value per agent, each cut "
             "at the agent's own end. The paper's FP state (AS less the features that state "
             "and observation share) is not offered, because which features those are depends "
             "on the task", "critic_input"),
            ("Departure from HARL's MPE wrapper, which gives every agent the sum of the agents' "
             "rewards: the team reward is the mean over the agents that acted, a factor that "
             "value and advantage normalization cancel; with --critic-state as "
             "--per-agent-reward each agent's value learns from its own reward instead",
             "team_reward"),
            ("A time-limit truncation (MPE's max_cycles) is not a termination (Pardo et al. "
             "2018): GAE bootstraps a truncated step from the value of the true final state, "
             "taken before the copy reset, a terminated step from nothing",
             "RolloutBuffer.gae::value_fn(self.final_critic"),
            ("A done agent sends no action and gets reward 0 and a zero observation until its "
             "copy resets; its active mask 0 keeps those steps out of the policy loss and the "
             "entropy bonus, each a mean over the active agent steps only, and under AS, whose "
             "value mask is the same, out of the value loss",
             "mappo_loss::pg_loss = masked_mean("),
            ("Advantages normalized within each minibatch over the active agent steps only "
             "(their mean and unbiased std), so that a done agent's steps do not shift the "
             "statistics; inactive entries come out 0 (--no-norm-adv uses them as they are)",
             "normalize_advantages"),
            ("The critic learns the returns normalized by their running mean and std "
             "(--value-norm), and GAE reads its outputs denormalized. Departure from HARL's and "
             "MAPPO's ValueNorm (moving averages with beta 0.99999, updated at every minibatch "
             "of every epoch, each batch weighted alike): each target counts once, merged once "
             "per rollout; both come close to the mean and variance of all targets seen, as "
             "theirs forget over about 10^5 updates, more than a run has. Before the first "
             "batch mu = 0 and var = 1 give an output back as it is, where theirs, with no "
             "statistics yet, read the first rollout's outputs at a tenth of their size",
             "ValueNorm"),
            ("The variance is floored at 0.01, HARL's floor: after a batch of equal returns it "
             "is 0, and a return 0.1 away would otherwise normalize to 1000",
             "ValueNorm.std"),
            ("The value loss is 0.5 (V - R)^2 on the returns as the critic learns them, "
             "clipped around the rollout's values by the ratio's epsilon, as MAPPO does "
             "(--clip-vloss); a departure from the references' Huber loss with delta 10, which "
             "is the same 0.5 e^2 wherever the error |e| <= 10", "mappo_loss::if clip_vloss"),
            ("One Adam with eps 1e-5, MAPPO's, over the actors and the critic, where the "
             "references have one for each: Adam's moments are per parameter, so with one "
             "learning rate and one eps it is the same", "train::optimizer = torch.optim.Adam"),
            ("The actors' and the critic's gradients are clipped each to its own global norm of "
             "--max-grad-norm (10, the MAPPO paper's), as the references clip them",
             "train::clip_grad_norm_"),
            ("Departure from the references' MPE actors, which see the observation alone: the "
             "shared actor (the default; --no-share-actor gives each agent its own) sees the "
             "zero-padded observation with a one-hot agent id appended, as the AS critic does, "
             "so that agents whose padded observations look alike can still act differently",
             "Actors.logits::ids = torch.eye"),
            ("The defaults depart from the MAPPO paper's simple_spread settings in three places, "
             "each measured on one seed to 300-450k steps (benchmarks/results.md): gamma 0.95, "
             "since 0.99 was half a point behind on episodes of 25 steps with a dense reward; "
             "--ent-coef 0.005 with --learning-rate 1e-3, since 0.01 and 7e-4 were a little "
             "slower; 32 copies of 25 steps per update with one minibatch, where MAPPO's 128 "
             "threads give a 4x larger batch", "Args::gamma:"),
        ],
        protocols=[
            (("mappo-simple_spread_v3",),
             "simple_spread_v3 against our own goal, the 100-episode training mean of the mean "
             "per-agent return better than -16 within 1M steps, on fresh seeds 101-110 (10 of "
             "10 hold), beside a random policy's -27 and a scripted nearest-landmark "
             "controller's -7.7; no published curve is drawn (MAPPO trains 20M steps on its "
             "own MPE)."),
            (("mappo-simple_spread_v3", "mappo-simple_spread_v3-as",
              "mappo-simple_spread_v3-as-own-reward"),
             "The critics' figure sets the EP state (the defaults, seeds 101-110), the AS state "
             "and AS on each agent's own reward (seed 1 alone each) side by side on "
             "simple_spread_v3, one flag changed at a time: the 100-episode training mean, "
             "which one seed of each AS run cannot rank, as the lab notebook says."),
        ]),
    "matd3": Algorithm(
        title="MADDPG and MATD3",
        road="TD3 for a team: one deterministic actor per agent and a centralized critic that "
             "sees every agent's action, with n-step returns from HARL's buffers.",
        equations=[
            ("exploration   a^i = clip(mu_i(o^i) + eps, -1, 1),                   eps ~ N(0, sigma^2)",
             r"a^i = \operatorname{clip}\big(\mu_i(o^i) + \epsilon, -1, 1\big)"),
            ("n-step return R = sum_{l<m} gamma^l r_{k+l}; m = n, or the window stops at the first",
             r"R = \sum_{l < m} \gamma^l\, r_{k+l}"),
            ("critic target y = R + gamma^m (1 - terminated_{k+m-1}) min(Q'_1, Q'_2)(s', a'^1..a'^n)",
             r"y = R + \gamma^m\,(1 - \text{terminated}_{k+m-1}) \min(Q'_1, Q'_2)(s', a'^1, \ldots, a'^n)"),
            ("actor loss    L_mu_i = -mean over the batch of Q_1(s, a^1, .., mu_i(o^i), .., a^n)",
             r"L_{\mu_i} = -\operatorname{mean}\, Q_1\big(s, a^1, \ldots, \mu_i(o^i), \ldots, a^n\big)"),
        ],
        loop=[
            (0, "for each lock-step of the N copies, until the budget, do", "train"),
            (1, "act: uniformly random actions for the first --learning-starts steps, then a^i = "
                "clip(mu_i(o^i) + eps, -1, 1), eps ~ N(0, sigma^2)", "train:Collect"),
            (1, "step the copies; store a row per copy (EP) or per copy and agent (FP): state, "
                "observations, actions, team reward, ends, valid flags, and the next state and "
                "observations (the true final ones where an episode ended)", "train:Store"),
            (1, "from --learning-starts on, for each of --gradient-steps do", "train:Learn"),
            (2, "sample B rows uniformly with replacement", "ReplayBuffer.sample"),
            (2, "each row's n-step return R and discount gamma^m, its window stopped at the "
                "first episode end or at its copy's newest row", "nstep_return"),
            (2, "every agent's target action a'^j, with clipped smoothing noise; y = R + gamma^m "
                "(1 - terminated) min(Q'_1, Q'_2)(s', a')", "critic_target"),
            (2, "one Adam step on the critics' loss sum_c mean (Q_c(s, a) - y)^2 (FP: over the "
                "rows where the agent acted)", "update"),
            (2, "every d-th step: one step on the summed actor losses -mean Q_1(s, a^1, ..., "
                "mu_i(o^i), ..., a^n), each reaching its own actor", "actor_loss"),
            (2, "then every target network moves: theta' <- tau theta + (1 - tau) theta'",
             "update::soft_update(nets.actors_target"),
        ],
        details=[
            ("--algo sets TD3's three fixes at once (twin critics, target smoothing noise 0.2, "
             "policy delay 2, the TD3 and MATD3 papers'; MADDPG none), and each of --twin-q, "
             "--target-policy-noise and --policy-delay given as well overrides its part, as in "
             "ddpg_td3.py", "resolve_algo"),
            ("Uniformly random actions for the first --learning-starts steps (5,000) and no "
             "learning before; then each actor's action with Gaussian noise of sigma 0.1 of the "
             "half-range (TD3's), on its own dimensions, clipped to [-1, 1]. MADDPG here is the "
             "one MATD3's paper compares with: this Gaussian exploration, one critic shared by "
             "the cooperating agents on the team reward, no policy ensembles",
             "train::if global_step < args.learning_starts"),
            ("The critic's state is one of HARL's two buffers: EP, one row env.state() per step "
             "with the copy's end; FP, one row per agent, each cut at the agent's own end. MPE "
             "has no per-agent state, so FP's row is env.state() joined with the agent's own "
             "observation and a one-hot id (mappo.py's AS state)", "state_rows"),
            ("Departure from HARL's MPE wrapper, which gives every agent the sum of the agents' "
             "rewards: the team reward is the mean over the agents that acted, so HARL's Q "
             "values are A times these (A agents)", "critic_rows::team = (rewards"),
            ("n-step returns as in HARL's buffers (--n-step, 1 by default as in both papers and "
             "HARL's defaults): a window stops at its first episode end, or at its copy's newest "
             "row, whose next step is not stored yet, and bootstraps with gamma^m from the "
             "state after its last step", "nstep_return"),
            ("A time-limit truncation is not a termination (Pardo et al. 2018): where an agent "
             "ended, its next observation is the true final one, and where the copy's episode "
             "ended so is the next state (the copy has already reset); a truncation ends the "
             "n-step window but bootstraps, only a termination cuts the bootstrap",
             "train:Store"),
            ("MATD3's target policy smoothing on every agent's target action: Gaussian noise "
             "(0.2 of the half-range) clipped to [-0.5, 0.5], TD3's, and the sum to the bounds; "
             "the target takes the smaller of the two target critics (MADDPG: no noise, and the "
             "first critic alone)",
             "update::next_actions = nets.act"),
            ("Departure from HARL's HATD3 and HADDPG, which average both losses over every row: "
             "a row where agent i did not act (valid 0) is kept out of agent i's actor loss, "
             "and under FP out of its critic loss; HARL's buffers store the same "
             "valid_transitions but only HASAC uses them", "update::mask = batch.valid if fp"),
            ("Departure from HARL's HATD3, which updates the agents one after another in a "
             "random order, each on the already updated actions of those before it: agent i's "
             "loss takes mu_i(o^i) and every other agent's stored action, MADDPG's simultaneous "
             "update, which both papers here use and which lets every agent's loss be summed "
             "into one step", "actor_loss"),
            ("On every d-th critic step (2 in MATD3) the summed actor losses take one step of "
             "the one optimizer of every actor (each loss reaches its own actor only), and "
             "every target network moves by tau; the gradient left on the first critic is "
             "cleared by the critic optimizer's next zero_grad", "update::if gradient_step % args.policy_delay == 0"),
            ("Departure from HARL, which draws a batch without replacement (one randperm of the "
             "whole buffer per batch): rows are sampled uniformly with replacement",
             "ReplayBuffer.sample"),
            ("Departure from HARL, which tiles the actions of each agent's own window end: "
             "FP's next joint action takes every agent's observation at the end of that state "
             "row's own window; the two differ only where agents end at different steps",
             "ReplayBuffer.gather::self.next_obs"),
        ],
        protocols=[
            (("matd3-simple_spread_v3",),
             "The default command as a user types it (continuous simple_spread_v3, MATD3, the "
             "default 200k steps): fresh seeds 101-110 run to the budget one at a time, how "
             "many hold at the end (the 100-episode training mean of the per-agent return "
             "above -16), the median steps until it first got there and the median greedy "
             "evaluation return."),
            (("matd3-simple_speaker_listener_v4", "matd3-simple_speaker_listener_v4-maddpg"),
             "MATD3 beside MADDPG, the same flags but --algo, on simple_speaker_listener_v4 for "
             "100k steps: MATD3 on fresh seeds 101-110, MADDPG on 101-105; how many hold at "
             "the end, the median and min-max of the 100-episode "
             "training mean and the greedy evaluation return, against the threshold -12, set "
             "from scripted listeners on environment seeds 1-5 (no training)."),
            ((),
             "Beside AgileRL's MATD3 (agilerl 2.58.0, "
             "benchmarks/agilerl_matd3_speaker_listener.py, run with matd3.py's schedule), both "
             "on simple_speaker_listener_v4 for 100k steps: seeds 101-103 run interleaved, the "
             "step at which matd3.py's 100-episode training mean passes the peer's final one "
             "and the whole-process seconds, seed by seed."),
        ]),
    "grpo": Algorithm(
        title="GRPO: Group Relative Policy Optimization",
        road="The language-model road: PPO's clipped ratio on every token of a sampled "
             "answer, with no critic. Each answer's advantage is its reward relative to a "
             "group of answers to the same prompt, and a k3 penalty keeps the policy near a "
             "frozen reference, its supervised warm start.",
        equations=[
            ("advantage      A_i = (r_i - mean_j r_j) / (std_j r_j + 1e-4)     (GRPO)",
             r"A_i = \frac{r_i - \operatorname{mean}_j r_j}{\operatorname{std}_j r_j + 10^{-4}}"),
            ("A_i =  r_i - mean_j r_j                            (--no-scale-rewards)",
             r"A_i = r_i - \operatorname{mean}_j r_j \qquad \text{(Dr. GRPO)}"),
            ("A_i =  r_i - 1/(G-1) sum_{j != i} r_j              (--baseline rloo)",
             r"A_i = r_i - \frac{1}{G-1} \sum_{j \ne i} r_j \qquad \text{(RLOO)}",
             "group_advantages"),
            ("ratio          rho_{i,t} = pi_theta(o_{i,t} | q, o_{i,<t}) / pi_old(o_{i,t} | q, o_{i,<t})",
             r"\rho_{i,t} = \frac{\pi_\theta(o_{i,t} \mid q, o_{i,<t})}{\pi_{\text{old}}(o_{i,t} \mid q, o_{i,<t})}"),
            ("clipped loss   l_{i,t} = -min(rho A_i, clip(rho, 1 - eps_low, 1 + eps_high) A_i)",
             r"l_{i,t} = -\min\big(\rho_{i,t} A_i,\ \operatorname{clip}(\rho_{i,t}, 1 - \epsilon_{\text{low}}, 1 + \epsilon_{\text{high}})\, A_i\big)",
             "clipped_token_loss"),
            ("k3 estimator   k3_{i,t} = pi_ref / pi_theta - log(pi_ref / pi_theta) - 1   (>= 0)",
             r"k_{3,i,t} = \frac{\pi_{\text{ref}}}{\pi_\theta} - \log \frac{\pi_{\text{ref}}}{\pi_\theta} - 1 \;\ge\; 0",
             "k3_kl"),
            ("per token      L_{i,t} = l_{i,t} + beta * k3_{i,t}",
             r"L_{i,t} = l_{i,t} + \beta\, k_{3,i,t}", "grpo_loss"),
            ("aggregation    seq-mean-token-mean     (1/N) sum_i (1/|o_i|) sum_t L_{i,t}     (GRPO)",
             r"\mathcal{L} = \frac{1}{N} \sum_i \frac{1}{|o_i|} \sum_t L_{i,t} \qquad \text{(GRPO)}"),
            ("token-mean              sum_{i,t} L_{i,t} / sum_i |o_i|          (DAPO)",
             r"\mathcal{L} = \frac{\sum_{i,t} L_{i,t}}{\sum_i |o_i|} \qquad \text{(DAPO)}"),
            ("seq-mean-token-sum-norm sum_{i,t} L_{i,t} / (N * T_max)         (Dr. GRPO)",
             r"\mathcal{L} = \frac{\sum_{i,t} L_{i,t}}{N\, T_{\max}} \qquad \text{(Dr. GRPO)}",
             "aggregate"),
        ],
        loop=[
            (0, "warm start: --sft-steps Adam steps of cross-entropy on the task's reference "
                "answers", "warm_start"),
            (0, "pi_ref = a frozen copy of the policy; with --top-p below 1, the masking policy "
                "another", "train::reference = frozen_copy"),
            (0, "reset the B G environments, the G of a group seeded alike so that they pose "
                "the same prompts", "train::prompts, _ = envs.reset"),
            (0, "while completions sampled < total_timesteps do", "train"),
            (1, "sample G completions of each of the B prompts token by token from "
                "softmax(logits / temperature), keeping log pi_old of each token (NLPO: from the "
                "masking policy's top-p nucleus alone, the masks kept)", "sample"),
            (1, "score each completion in its environment (1 for the exact sum, else 0) and "
                "record the episodes; with --dynamic-sampling keep only the groups of two reward "
                "values and sample again, up to --max-sample-rounds", "train:Sample"),
            (1, "A_i = r_i minus its group's mean (RLOO: the others' mean), divided by the "
                "group's std unless --no-scale-rewards", "group_advantages"),
            (1, "log pi_ref of every sampled token under the frozen reference", "train:Targets"),
            (1, "for epoch = 1, ..., mu, for each of the shuffled minibatches do", "train:Update"),
            (2, "log pi_theta of the kept tokens (under the kept masks); per token l + beta k3, "
                "aggregated over the completions' tokens by --loss-agg", "grpo_loss"),
            (2, "one Adam step, the gradient clipped to the global norm --max-grad-norm",
             "train::clip_grad_norm_"),
            (1, "NLPO: every --mask-sync-every updates, the masking policy becomes a copy of the "
                "policy", "train::mask_model.load_state_dict"),
            (1, "a row of updates.csv: the clipped term, k3, the clipped fraction, approx KL, "
                "the mean reward, the completions' length, the groups kept", "train::run.update("),
        ],
        details=[
            ("A supervised warm start before any RL: the policy learns only from answers it "
             "samples, and a random policy over 14 tokens writes a given two-digit sum and its end "
             "token once in 14^3 = 2,744 tries, a three-digit one once in 14^4; a few hundred steps of cross-entropy on reference answers make "
             "right answers common enough to appear in most groups, as the SFT stage before "
             "InstructGPT's PPO does", "warm_start"),
            ("The reference model is the policy after the warm start, frozen for the whole run: "
             "beta k3 pulls every sampled token toward it. Departure from DeepSeekMath's "
             "iterative GRPO, which sets the reference to the current policy at each iteration "
             "(and retrains its reward model), because here the reward is exact and a run is "
             "one iteration", "train::reference = frozen_copy"),
            ("The G completions of a group are G environments given the same seed, which pose "
             "the same problems in the same order; a task that poses a group different prompts "
             "is refused, since its advantages would compare answers to different questions",
             "train::posed different prompts"),
            ("The group's std is the unbiased one, as TRL's, plus 1e-4, so that a group of one "
             "reward value (std 0) gets advantage 0 rather than 0/0", "group_advantages"),
            ("Every token of a completion carries its completion's advantage, the "
             "end-of-sequence token included; the prompt and the padding after the end never "
             "count in the loss, its statistics or the completion's length",
             "completion_mask_of"),
            ("The loss's probabilities are the tempered softmax(logits / temperature) that "
             "sampled the tokens, as TRL divides its logits, so that the ratio is 1 on the "
             "first minibatch whatever the temperature", "token_logprobs"),
            ("NLPO's mask is ppo_masked.py's, learned instead of given: tokens outside a "
             "masking policy's top-p nucleus get the logit -1e8, and the masks are kept in "
             "the buffer and applied again in the update; the masking policy is a frozen copy "
             "of the policy, refreshed every --mask-sync-every updates", "top_p_mask"),
            ("With --dynamic-sampling the budget counts every sampled completion, the dropped "
             "groups' too, and an update whose rounds kept no group is skipped",
             "train::if len(tokens) == 0"),
            ("The evaluation decodes greedily, without NLPO's mask, on held-out problems: a "
             "tenth of all problems, chosen by a hash, that training never poses, so that the "
             "accuracy measures addition and not memory of the training sums", "AdditionEnv"),
            ("Adam at 5e-4 falling linearly to 0 over the budget, with the gradient clipped to "
             "norm 1, where DeepSeekMath takes 1e-6 "
             "for a 7B model: the built-in transformer has about 100k parameters, nanoGPT's "
             "shape at 2 layers of width 64 with its tied head and GPT-2's initialization",
             "GPT"),
        ],
        protocols=[
            (("grpo-AdditionPartial-v0",),
             "AdditionPartial-v0 with the defaults (307,200 completions after 1,500 annealed "
             "supervised steps on worked answers that leave out 98% of the carries) on fresh "
             "seeds 131-140, against the script's GOALS: RL's gain, the mean accuracy of the "
             "final greedy evaluation over 500 held-out problems less the warm start's, at 0.3 "
             "or more on at least 9 of 10 seeds; measured, 10 of 10 hold with an IQM of 0.393, "
             "and beside continued supervision and shuffled rewards from the same checkpoint "
             "RL's own contribution is 0.2 or more on 10 of 10 (results.md, grpo.py)."),
            (("grpo-AdditionPartial-v0-dr_grpo", "grpo-AdditionPartial-v0-dapo",
              "grpo-AdditionPartial-v0-rloo", "grpo-AdditionPartial-v0-nlpo"),
             "The field's corrections as flags on the default command (GRPO's rate 5e-4 "
             "falling to 0) at its budget on fresh seeds 142-146, judged as the default is "
             "(RL's gain in the final greedy evaluation over the warm start's, 0.3 or more): "
             "measured, Dr GRPO, RLOO, DAPO and NLPO's top-p 0.9 gain +0.35 to +0.38 (the "
             "median over seeds), holding on 5, 5, 4 and 5 of 5 seeds, and the answers' length "
             "stays at 3.45-3.48 tokens in every variant (results.md, grpo.py)."),
            (("grpo-Addition-v0",),
             "Addition-v0 with issue 84's defaults (25,600 completions after 3,000 annealed "
             "supervised warm-start steps on 9,000 problems) on fresh seeds 111-120, against "
             "the script's GOALS: the mean accuracy of the final greedy evaluation over 500 "
             "held-out problems at 0.95 or more, on at least 9 of 10 seeds; measured, 10 of 10 "
             "hold with an IQM of 0.979, from warm starts of 0.95-0.99 that GRPO moves by "
             "-0.004 to +0.004 (results.md, grpo.py)."),
            (("grpo-Addition-v0-dr_grpo", "grpo-Addition-v0-dapo", "grpo-Addition-v0-rloo",
              "grpo-Addition-v0-nlpo"),
             "each correction's flags added to the default command (Dr GRPO: --no-scale-rewards "
             "--loss-agg seq-mean-token-sum-norm; DAPO: --clip-coef-high 0.28 --loss-agg "
             "token-mean --dynamic-sampling --beta 0; RLOO: --baseline rloo --no-scale-rewards; "
             "NLPO: --top-p 0.9) at the same budget on fresh seeds 111-113, beside GRPO's runs "
             "of the same seeds: the held-out accuracy of the final greedy evaluation and the "
             "completion length "
             "(every one ends within 0.01 of GRPO, every completion about 3.5 tokens long, so "
             "on this task of short answers no correction changes the length)."),
        ]),
    "rlhf": Algorithm(
        title="RLHF: PPO from a learned reward model, and DPO",
        road="The language-model road's other half: the reward is learned from preferences "
             "instead of checked. A reward model learns a simulated labeller's choices between "
             "pairs of completions, PPO with a value head maximizes its score less a KL "
             "penalty to the warm start on every token, and DPO learns from the same pairs "
             "without a reward model or RL.",
        equations=[
            ("labeller       P(y_a preferred to y_b) = sigma((gold(y_a) - gold(y_b)) / tau)",
             r"P(y_a \succ y_b) = \sigma\!\left(\frac{\text{gold}(y_a) - \text{gold}(y_b)}{\tau}\right)",
             "bradley_terry_labels"),
            ("Bradley-Terry  L_RM = -log sigma(r_phi(x, y_w) - r_phi(x, y_l))   (w preferred to l)",
             r"\mathcal{L}_{\text{RM}} = -\log \sigma\big(r_\phi(x, y_w) - r_\phi(x, y_l)\big)",
             "bradley_terry_loss"),
            ("token reward   r_t = -beta (log pi_old(y_t) - log pi_ref(y_t)) + [t = n] r_phi(x, y)",
             r"r_t = -\beta\,\big(\log \pi_{\text{old}}(y_t) - \log \pi_{\text{ref}}(y_t)\big) + [t = n]\; r_\phi(x, y)",
             "kl_penalized_rewards"),
            ("GAE            delta_t = r_t + gamma V(t+1) - V(t),  A_t = delta_t + gamma lambda A_{t+1},",
             r"\delta_t = r_t + \gamma V_{t+1} - V_t, \qquad A_t = \delta_t + \gamma\lambda\, A_{t+1}"),
            ("V(n+1) = 0, gamma = 1: the completion is one episode",
             r"V_{n+1} = 0, \qquad \gamma = 1", "compute_gae"),
            ("whitening      w(z) = (z - mean z) / std z   over the batch's completion tokens",
             r"w(z) = \frac{z - \operatorname{mean} z}{\operatorname{std} z}", "masked_whiten"),
            ("PPO            L = mean_t max(-A_t rho_t, -A_t clip(rho_t, 1 - eps, 1 + eps))",
             r"\mathcal{L} = \operatorname{mean}_t \max\big(-A_t \rho_t,\ -A_t \operatorname{clip}(\rho_t, 1 - \epsilon, 1 + \epsilon)\big)"),
            ("+ c_v mean_t max((V_t - R_t)^2, (clip(V_t, V_old +- eps_v) - R_t)^2) / 2",
             r"\quad + \frac{c_v}{2} \operatorname{mean}_t \max\big((V_t - R_t)^2,\ (\operatorname{clip}(V_t, V_{\text{old}} \pm \epsilon_v) - R_t)^2\big)",
             "ppo_loss"),
            ("adaptive KL    e = clip(KL / KL_target - 1, -0.2, 0.2),  beta <- beta (1 + e N / horizon)",
             r"e = \operatorname{clip}\!\left(\frac{\mathrm{KL}}{\mathrm{KL}_{\text{target}}} - 1, -0.2, 0.2\right), \qquad \beta \leftarrow \beta\,\Big(1 + e\,\frac{N}{\text{horizon}}\Big)",
             "AdaptiveKLController"),
            ("DPO            L = -log sigma(beta [log pi(y_w)/pi_ref(y_w) - log pi(y_l)/pi_ref(y_l)])",
             r"\mathcal{L}_{\text{DPO}} = -\log \sigma\!\left(\beta \left[\log \frac{\pi(y_w)}{\pi_{\text{ref}}(y_w)} - \log \frac{\pi(y_l)}{\pi_{\text{ref}}(y_l)}\right]\right)",
             "dpo_loss"),
        ],
        loop=[
            (0, "warm start: --sft-steps Adam steps of cross-entropy on grammatical "
                "continuations of training prompts, the rate annealed to 0", "warm_start"),
            (0, "pi_ref = a frozen copy of the policy after the warm start",
             "train::reference = frozen_copy"),
            (0, "sample two completions of each training prompt from the warm start; the "
                "simulated labeller prefers one with the Bradley-Terry probability of their gold "
                "scores, --num-pairs pairs", "preference_pairs"),
            (0, "r_phi = the warm start's body with a scalar head: --rm-steps Adam steps of the "
                "Bradley-Terry loss on nine pairs in ten, its accuracy on the tenth; then "
                "normalized to mean 0 and std 1 on the pairs' completions, and frozen",
             "train_reward_model"),
            (0, "with --algo dpo: passes over the same pairs, an Adam step of the DPO loss on each "
                "batch, in place of the loop below", "train_dpo"),
            (0, "while completions sampled < total_timesteps do", "train::while global_step < budget"),
            (1, "sample a completion of each of the N prompts token by token, keeping log pi_old "
                "of each token (NLPO: from the masking policy's top-p nucleus alone, the masks "
                "kept)", "sample"),
            (1, "the task's gold score of each completion goes to episodes.csv, never to the "
                "learner", "train:Sample"),
            (1, "score = r_phi(x, y) read at the last token; log pi_ref of every token; V_old "
                "from the value head", "train:Targets"),
            (1, "r_t = -beta (log pi_old - log pi_ref) on every token, the score added on the "
                "last (whitened with --whiten-rewards)", "kl_penalized_rewards"),
            (1, "A and R by GAE over each completion (gamma 1, V(n+1) = 0); A whitened over "
                "the batch's completion tokens", "compute_gae"),
            (1, "for epoch = 1, ..., update_epochs, for each of the shuffled minibatches do",
             "train:Update"),
            (2, "log pi_theta and V of the completion tokens (under the kept masks); PPO's "
                "clipped loss plus c_v times the clipped value loss", "ppo_loss"),
            (2, "one Adam step, the gradient clipped to the global norm --max-grad-norm",
             "train::clip_grad_norm_"),
            (1, "NLPO: every --mask-sync-every updates, the masking policy becomes a copy of "
                "the policy", "train::mask_model.load_state_dict"),
            (1, "KL = the batch's mean of sum_t (log pi_old - log pi_ref); with --adaptive-kl, "
                "beta moves towards --kl-target", "AdaptiveKLController.update"),
            (1, "a row of updates.csv; after batches 1, 2, 4, 8, ... and every --eval-every "
                "completions, a row of held_out.csv: the proxy, the gold score and the KL on "
                "held-out prompts", "held_out"),
        ],
        details=[
            ("The value head is a linear layer on the policy's own last hidden states, zero "
             "at the start, as in Ziegler et al. and TRL: the critic starts from what the warm "
             "start learned of the language, for the price of one layer, where a separate "
             "critic would be a second transformer to train", "PolicyWithValue"),
            ("The reward model is a copy of the warm start's body with a scalar head read at "
             "the completion's last real token (its end-of-sequence token, or the T_max-th of "
             "a completion cut there): under causal attention only that position has seen the "
             "whole completion; InstructGPT's reward model also starts from its SFT model",
             "RewardModel"),
            ("The reward model's scores are shifted and scaled to mean 0 and std 1 on the warm "
             "start's completions before RL, Ziegler et al.'s normalization, so that a beta "
             "weighs the KL against a score of the same scale whatever the reward model "
             "learned", "train_reward_model::reward_model.head.bias -= scores.mean()"),
            ("The KL penalty is paid on every token and the score once, on the last token: "
             "the rewards of a completion sum to the score less beta times the sampled KL, and "
             "each token is charged for its own departure from the reference (Ziegler et al.)",
             "kl_penalized_rewards"),
            ("gamma 1 and lambda 0.95 over a completion's tokens: a completion is one short "
             "episode whose score comes at its end, which a discount would only shrink for "
             "the early tokens; V(n+1) = 0, since nothing follows the end",
             "compute_gae"),
            ("The advantages are whitened over the batch's completion tokens; the rewards only "
             "with --whiten-rewards, and then keeping their mean (shift_mean=False), as TRL's "
             "whiten_rewards; the prompt and the padding never count in a mean, a variance or "
             "a loss", "masked_whiten"),
            ("The prompt is left-padded and the completion padded after its end-of-sequence "
             "token; the completion mask is 1 up to and including that token and 0 on the "
             "prompt and the padding, and every loss and statistic is a mean under it",
             "completion_mask_of"),
            ("The reference and the reward model are frozen copies (no gradients, in no "
             "optimizer) for the whole run: the reference is the policy after the warm start, "
             "and the reward model never learns from the policy's own completions, which is "
             "why a policy pushed far from the warm start can find where it is wrong",
             "frozen_copy"),
            ("The old log-probabilities are the sampler's own, kept as each token is drawn, "
             "so that the ratio compares the policy being updated with the one that drew the "
             "token", "sample"),
            ("With --adaptive-kl, Ziegler et al.'s proportional controller moves beta after "
             "each batch, by at most 20% of n / horizon, towards the KL of --kl-target; without "
             "it beta stays where --beta puts it", "AdaptiveKLController"),
            ("NLPO's mask is ppo_masked.py's, learned instead of given: tokens outside a "
             "masking policy's top-p nucleus get the logit -1e8, the masks are kept in the "
             "buffer and applied again in the update, and the masking policy is a frozen copy "
             "of the policy refreshed every --mask-sync-every updates", "top_p_mask"),
            ("DPO starts from the same warm start and the same pairs with the same frozen "
             "reference; the reward model only measures it (held_out.csv's proxy) and is not "
             "in its loss", "train_dpo"),
        ],
        protocols=[
            (("rlhf-Preference-v0",),
             "Preference-v0 (16 English words) with the defaults on fresh seeds 101-110, "
             "against the script's GOALS: the gain, the gold score of the final greedy "
             "evaluation over 200 held-out prompts (the mean over them) less the warm start's, "
             "at 0.4 or more on at least 9 of 10 seeds; measured, 9 of 10 hold, the IQM of the "
             "gain +0.79 [0.58, 0.95], the medians -0.06 at the warm start and +0.75 at the "
             "end (results.md, rlhf.py)."),
            (("rlhf-Preference-v0-dpo",),
             "DPO (--algo dpo --total-timesteps 40960, its own rate 1e-3) on fresh seeds "
             "111-120 (DPO's 101-104 went to choosing that rate), from the warm starts and "
             "preference pairs a PPO run of each seed makes, judged as PPO is (the gold score "
             "of the final greedy evaluation over 200 held-out prompts, the mean over them, "
             "less the warm start's, at 0.4 or more): measured, 9 of 10 hold, the IQM of the "
             "gain +0.59 [0.47, 0.79], each run 41-58 s, two at a time (results.md, rlhf.py)."),
            ((),
             "The reward over-optimization and frontier figures (benchmarks/rlhf_frontier.py, "
             "40,960 completions a run): PPO at betas 0, 0.005, 0.02, 0.05, 0.1 and 0.2 and DPO "
             "at 0.05, 0.2 and 1 on seed 101, and PPO at 0 and 0.1 on seeds 102 and 103 too, "
             "each run's held-out proxy and gold score (the mean over 200 prompts, 4 samples "
             "each) against its KL to the warm start during training, one line a seed."),
        ]),
}

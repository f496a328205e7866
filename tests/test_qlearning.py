"""Tests of qlearning.py: the math by hand, the table, the glue of its loop and its main, its
hooks of the plumbing (check_flags, check_spaces, greedy_policy, MODEL_FLAGS and the table's
state in model.npz), runs end to end, determinism (the plumbing's own behaviour is
tests/test_plumbing.py's)."""
import json
import os
import random

import gymnasium as gym
import numpy as np
import pytest

import qlearning as ql
from conftest import (check_import_is_quiet, interrupt_on_call, read_csv, same_seed_episodes,
                      spy_on)


# ---------------------------------------------------------------------------------------
# discretize by hand
# ---------------------------------------------------------------------------------------
def test_discretize_one_dimension_at_the_edges_and_outside():
    # [0, 1] in 4 cells of width 0.25: floor(x / 0.25), clipped to 0..3
    cell = lambda x: ql.discretize([x], [0.0], [1.0], [4])
    assert cell(0.0) == 0                  # the lower edge is in the first cell
    assert cell(0.25) == 1                 # floor(0.25 * 4) = 1: a cell's lower edge is in it
    assert cell(0.2499) == 0 and cell(0.74) == 2
    assert cell(1.0) == 3                  # floor(4) = 4, clipped: the upper edge is in the last
    assert cell(-0.5) == 0 and cell(7.0) == 3   # outside the bounds: the edge cells


def test_discretize_several_dimensions_row_major():
    # low [-1, 0], high [1, 10], bins [4, 5]: widths 0.5 and 2
    # [0.1, 7]: cells floor(1.1 / 0.5) = 2 and floor(7 / 2) = 3 -> 2*5 + 3 = 13
    # [-3, 11]: clipped to cells (0, 4) -> 4;  [1, 0]: cells (3, 0) -> 15
    low, high, bins = [-1.0, 0.0], [1.0, 10.0], [4, 5]
    assert ql.discretize(np.array([0.1, 7.0], dtype=np.float32), low, high, bins) == 13
    assert ql.discretize([-3.0, 11.0], low, high, bins) == 4
    assert ql.discretize([1.0, 0.0], low, high, bins) == 15
    # three dimensions, bins [2, 3, 4], the last cell (1, 2, 3): 1*12 + 2*4 + 3 = 23 = 2*3*4 - 1
    assert ql.discretize([9.0, 9.0, 9.0], [0.0] * 3, [1.0] * 3, [2, 3, 4]) == 23


def test_discretize_numbers_every_cell_once():
    # the centres of a 3 x 2 grid on [0, 3] x [0, 2] map to 0..5, each once, row-major
    cells = [ql.discretize([i + 0.5, j + 0.5], [0.0, 0.0], [3.0, 2.0], [3, 2])
             for i in range(3) for j in range(2)]
    assert cells == [0, 1, 2, 3, 4, 5]


# ---------------------------------------------------------------------------------------
# q_update and the epsilon schedule by hand. alpha = 0.5, gamma = 0.9, Q(1, .) = [2, 4].
# ---------------------------------------------------------------------------------------
def small_table():
    q = np.zeros((3, 2))
    q[1] = [2.0, 4.0]
    return q


def test_q_update_bootstraps_from_the_best_next_action():
    # target = 1 + 0.9*max(2, 4) = 4.6;  delta = 4.6 - 0 = 4.6;  Q(0, 1) = 0 + 0.5*4.6 = 2.3
    q = small_table()
    assert ql.q_update(q, 0, 1, 1.0, 1, False, 0.5, 0.9) == pytest.approx(4.6)
    assert q[0, 1] == pytest.approx(2.3), "q_update changes q in place: q[s, a] += alpha * delta"
    # a second step from the same pair: target 4.6 again, delta = 4.6 - 2.3 = 2.3
    # Q(0, 1) = 2.3 + 0.5*2.3 = 3.45; nothing else moved
    assert ql.q_update(q, 0, 1, 1.0, 1, False, 0.5, 0.9) == pytest.approx(2.3)
    assert q[0, 1] == pytest.approx(3.45), "q_update changes q in place: q[s, a] += alpha * delta"
    assert q.tolist() == [[0.0, pytest.approx(3.45)], [2.0, 4.0], [0.0, 0.0]], (
        "only q[s, a] changes: every other entry of the table stays as it was")


def test_q_update_terminated_step_does_not_bootstrap():
    # target = r = 1 (Q(1, .) is not used);  delta = 1 - 0 = 1;  Q(0, 1) = 0.5
    q = small_table()
    assert ql.q_update(q, 0, 1, 1.0, 1, True, 0.5, 0.9) == pytest.approx(1.0)
    assert q[0, 1] == pytest.approx(0.5), "q_update changes q in place: q[s, a] += alpha * delta"


def test_q_update_truncated_step_bootstraps_from_the_final_state():
    # A time limit cut the episode in state 1: the caller passes terminated=False and the
    # true final state 1. target = -1 + 0.9*4 = 2.6;  Q(2, 0) starts at 1:
    # delta = 2.6 - 1 = 1.6;  Q(2, 0) = 1 + 0.5*1.6 = 1.8
    q = small_table()
    q[2, 0] = 1.0
    assert ql.q_update(q, 2, 0, -1.0, 1, False, 0.5, 0.9) == pytest.approx(1.6)
    assert q[2, 0] == pytest.approx(1.8), "q_update changes q in place: q[s, a] += alpha * delta"


def test_linear_schedule():
    # from 1 to 0.05 over 100 steps: halfway 1 + (0.05 - 1)*0.5 = 0.525
    assert ql.linear_schedule(1.0, 0.05, 100, 0) == 1.0
    assert ql.linear_schedule(1.0, 0.05, 100, 50) == pytest.approx(0.525)
    assert ql.linear_schedule(1.0, 0.05, 100, 100) == pytest.approx(0.05)
    assert ql.linear_schedule(1.0, 0.05, 100, 250) == pytest.approx(0.05)
    assert ql.linear_schedule(1.0, 0.05, 0, 0) == 0.05  # no exploration phase


# ---------------------------------------------------------------------------------------
# The table
# ---------------------------------------------------------------------------------------
def test_table_rows_of_discrete_and_box_observations():
    discrete = ql.QTable(np.zeros((5, 2)), start=10)      # Discrete(5, start=10)
    assert discrete.state(np.int64(12)) == 2
    grid = ql.QTable(np.zeros((20, 2)), low=[-1, 0], high=[1, 10], bins=[4, 5])
    assert grid.state(np.array([0.1, 7.0], dtype=np.float32)) == 13  # as worked out above
    assert grid.visits.shape == (20,) and grid.visits.sum() == 0


def test_greedy_and_epsilon_greedy_actions():
    table = ql.QTable(np.array([[0.0, 3.0, 3.0, 1.0]]))
    assert table.greedy(0) == 1                               # tie: the lowest action
    rng = random.Random(0)
    assert {table.act(0, 0.0, rng) for _ in range(50)} == {1}
    assert {table.act(0, 1.0, rng) for _ in range(200)} == {0, 1, 2, 3}


def test_make_table_sizes_bounds_and_initial_values():
    mountain_car = gym.make("MountainCar-v0")
    table = ql.make_table(ql.Args(bins=(10, 5), q_init=2.5), "MountainCar-v0",
                          mountain_car.observation_space, mountain_car.action_space)
    assert table.q.shape == (50, 3) and (table.q == 2.5).all()
    low, high, bins = table.grid
    assert bins == [10, 5] and low == pytest.approx([-1.2, -0.07]) and high == pytest.approx([0.6, 0.07])
    # --obs-high alone on a bounded space: the upper bounds are the flag's, the lower ones
    # stay the space's: MountainCar's [-1.2, -0.07] to [0.6, 0.07] becomes [-1.2, -0.07] to
    # [0.5, 0.05]
    table = ql.make_table(ql.Args(bins=(4,), obs_high=(0.5, 0.05)), "MountainCar-v0",
                          mountain_car.observation_space, mountain_car.action_space)
    assert table.grid[1] == [0.5, 0.05] and table.grid[0] == pytest.approx([-1.2, -0.07])
    cartpole = gym.make("CartPole-v1")
    table = ql.make_table(ql.Args(bins=(3,), obs_low=(-2.0,), obs_high=(1.0, 2.0, 3.0, 4.0)),
                          "CartPole-v1", cartpole.observation_space, cartpole.action_space)
    assert table.q.shape == (81, 2) and table.grid[0] == [-2.0] * 4
    assert table.grid[1] == [1.0, 2.0, 3.0, 4.0]


def test_heat_maps_of_a_board_and_of_a_box_grid():
    # FrozenLake's map, row 0 at the top:  S F F F / F H F H / F F F H / H F F G
    lake = gym.make("FrozenLake-v1")
    board = lake.unwrapped.desc
    table = ql.make_table(ql.Args(env_id="FrozenLake-v1"), "FrozenLake-v1",
                          lake.observation_space, lake.action_space)
    table.q[6] = [0.1, 0.2, 0.7, 0.3]   # state 6 = row 1, column 2: best action 2, right
    table.q[0] = [0.0, 0.4, 0.1, 0.0]   # state 0, the start: best action 1, down
    table.q[14] = [0.5, 0.1, 0.2, 0.5]  # state 14 = row 3, column 2: a tie, the lowest: left
    table.q[3] = [0.0, 0.0, 0.0, 0.9]   # state 3: up
    table.visits[[0, 3, 6, 14]] = 1
    heat = ql.heat_map(table, board)
    assert heat["values"][1, 2] == pytest.approx(0.7) and heat["values"][0, 0] == pytest.approx(0.4)
    assert np.isnan(heat["values"]).sum() == 12                    # never visited: no value
    # FrozenLake's actions 0-3 are left, down, right, up: arrows; holes H and the goal G are
    # marked whether visited or not (they end the episode, so nothing is learned there)
    assert heat["labels"].tolist() == [["↓", "", "", "↑"],
                                       ["", "H", "→", "H"],
                                       ["", "", "", "H"],
                                       ["H", "", "←", "G"]]
    # a 2-d grid: state = cell_0*3 + cell_1 is drawn at row cell_1, column cell_0, with the
    # greedy action's number in each visited cell
    grid = ql.QTable(np.zeros((12, 2)), low=[0, 0], high=[1, 1], bins=[4, 3])
    grid.q[2 * 3 + 1] = [0.0, 5.0]
    grid.visits[:] = 1
    heat = ql.heat_map(grid, None)
    assert heat["values"].shape == (3, 4) and heat["values"][1, 2] == 5.0
    assert heat["labels"][1, 2] == "1" and heat["values"].sum() == 5.0
    assert (heat["labels"] == "1").sum() == 1 and (heat["labels"] == "0").sum() == 11
    # Taxi's 500 states have a map of 7 x 11 characters, not of its states; a 3-d grid is not drawn
    assert ql.heat_map(ql.QTable(np.zeros((500, 6))), gym.make("Taxi-v4").unwrapped.desc) is None
    assert ql.heat_map(ql.QTable(np.zeros((8, 2)), low=[0] * 3, high=[1] * 3, bins=[2] * 3), None) is None


def test_the_heat_map_is_drawn_with_its_labels(tmp_path):
    # A FrozenLake run draws its map into heat_map.png: every label that heat_map gives (the
    # arrows of the visited cells, the four holes and the goal) is written in its cell.
    drawn = {}
    original = ql.draw_heat_map

    def spy(fig, ax, heat):
        original(fig, ax, heat)
        drawn["texts"] = sorted((t.get_position(), t.get_text()) for t in ax.texts)
        drawn["heat"] = heat

    ql.draw_heat_map = spy
    try:
        ql.main(ql.Args(env_id="FrozenLake-v1", total_timesteps=2000, eval_episodes=0,
                        output_dir=str(tmp_path)))
    finally:
        ql.draw_heat_map = original
    labels = drawn["heat"]["labels"]
    expected = sorted(((c, r), label) for (r, c), label in np.ndenumerate(labels) if label)
    assert drawn["texts"] == expected and next(tmp_path.glob("*/heat_map.png")).exists()
    assert [label for _, label in expected].count("H") == 4 and labels[3, 3] == "G"
    assert {label for _, label in expected} - {"H", "G"} <= set("←↓→↑")


def load_table(path, env_id, obs_space, action_space, output_dir):
    """A model.npz's table as main loads it: the grid's flags from the checkpoint
    (MODEL_FLAGS), a table made on them, the checkpoint's state restored into it by Run
    (whose run folder goes into output_dir)."""
    args, checkpoint = ql.load_checkpoint(ql.Args(env_id=env_id, eval_checkpoint=str(path),
                                                  output_dir=str(output_dir)))
    table = ql.make_table(args, env_id, obs_space, action_space)
    ql.Run(args, "cpu", {"table": table}, checkpoint).close()
    return table


def test_save_and_load_round_trip(tmp_path):
    # a grid of 3 x 2 cells on the bounds of the flags, and the space's own bounds where the
    # flags give none: MODEL_FLAGS brings the grid back, the state its table and visits
    space = gym.spaces.Box(-1.0, 1.0, (2,))
    for obs_low, obs_high, grid in [((-1.0, -0.5), (1.0, 0.5), ([-1.0, -0.5], [1.0, 0.5], [3, 2])),
                                    (None, None, ([-1.0, -1.0], [1.0, 1.0], [3, 2]))]:
        args = ql.Args(env_id="Some-v0", bins=(3, 2), obs_low=obs_low, obs_high=obs_high)
        table = ql.make_table(args, "Some-v0", space, gym.spaces.Discrete(2))
        table.q[:], table.visits[:] = np.arange(12.0).reshape(6, 2), np.arange(6)
        ql.save_checkpoint(tmp_path / "model.npz", {"table": table}, args)
        loaded = load_table(tmp_path / "model.npz", "Some-v0", space, gym.spaces.Discrete(2),
                            tmp_path / "eval")
        assert (loaded.q == table.q).all() and loaded.visits.tolist() == [0, 1, 2, 3, 4, 5]
        assert loaded.grid == grid
    with np.load(tmp_path / "model.npz", allow_pickle=False) as f:
        assert json.loads(str(f["args"]))["env_id"] == "Some-v0"  # the flags, as JSON
        assert sorted(f.files) == ["args", "table.q", "table.visits"]  # plain arrays only


def test_a_table_of_another_shape_does_not_load():
    table = ql.QTable(np.zeros((500, 6)))
    with pytest.raises(ValueError, match=r"a table of shape \(16, 4\), not \(500, 6\)"):
        table.load_state_dict({"q": np.zeros((16, 4)), "visits": np.zeros(16, np.int64)})
    assert table.q.shape == (500, 6)


def test_a_checkpoint_of_a_discrete_space_with_a_start_reads_its_rows_from_the_start(tmp_path):
    # Discrete(3, start=10): observations 10, 11, 12 are rows 0, 1, 2 of the table, in
    # training (make_table) and in a loaded model.npz alike. Rows 1 and 2 hold [1, -1] and
    # [2, -2] (greedy action 0), row 0 [0, 5] (action 1): observations 10, 11, 12 play 1, 0, 0
    space = gym.spaces.Discrete(3, start=10)
    q = np.array([[0.0, 5.0], [1.0, -1.0], [2.0, -2.0]])
    made = ql.make_table(ql.Args(), "Offset-v0", space, gym.spaces.Discrete(2))
    ql.save_checkpoint(tmp_path / "model.npz", {"table": ql.QTable(q, start=10)},
                       ql.Args(env_id="Offset-v0"))
    loaded = load_table(tmp_path / "model.npz", "Offset-v0", space, gym.spaces.Discrete(2),
                        tmp_path / "eval")
    for table in (made, loaded):
        assert [table.state(np.int64(obs)) for obs in (10, 11, 12)] == [0, 1, 2]
    assert [loaded.greedy(loaded.state(np.int64(obs))) for obs in (10, 11, 12)] == [1, 0, 0]


# ---------------------------------------------------------------------------------------
# Environments built here: a 3-state chain whose Q* is solved by hand, and a counter cut
# by a time limit.
# ---------------------------------------------------------------------------------------
class ChainEnv(gym.Env):
    """States 0, 1, 2 in a row, the agent starts in 0. Action 0 moves left (0 stays at 0),
    action 1 moves right; moving right from 2 ends the episode with reward 1, every other
    step gives 0."""
    observation_space = gym.spaces.Discrete(3)
    action_space = gym.spaces.Discrete(2)

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.s = 0
        return self.s, {}

    def step(self, action):
        if action == 1 and self.s == 2:
            return 2, 1.0, True, False, {}
        self.s = max(self.s - 1, 0) if action == 0 else self.s + 1
        return self.s, 0.0, False, False, {}


class CountingEnv(gym.Env):
    observation_space = gym.spaces.Discrete(4)
    action_space = gym.spaces.Discrete(2)

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.t = 0
        return 0, {}

    def step(self, action):
        self.t += 1
        return self.t, 1.0, False, False, {}


class BitsEnv(CountingEnv):
    action_space = gym.spaces.MultiBinary(3)


gym.register("TableChain-v0", entry_point=ChainEnv, max_episode_steps=8)
gym.register("TableCountToThree-v0", entry_point=CountingEnv, max_episode_steps=3)
gym.register("TableBits-v0", entry_point=BitsEnv)


def test_chain_converges_to_the_values_solved_by_hand(tmp_path):
    # gamma = 0.9. Going right is optimal everywhere:
    #   Q(2, right) = 1                       V(2) = 1
    #   Q(1, right) = 0.9*V(2) = 0.9          V(1) = 0.9
    #   Q(0, right) = 0.9*V(1) = 0.81         V(0) = 0.81
    #   Q(2, left)  = 0.9*V(1) = 0.81
    #   Q(1, left)  = 0.9*V(0) = 0.729
    #   Q(0, left)  = 0.9*V(0) = 0.729        (stays in 0)
    # Random actions (epsilon 1), off-policy: Q-learning still learns Q*. The chain is
    # deterministic, so with a constant alpha Q* is the one fixed point; episodes cut by the
    # 8-step time limit must bootstrap, or the values of the states they end in come out low.
    summary = ql.main(ql.Args(env_id="TableChain-v0", total_timesteps=4000, start_e=1.0, end_e=1.0,
                              learning_rate=0.5, gamma=0.9, eval_episodes=1, save_model=True,
                              output_dir=str(tmp_path)))
    (path,) = tmp_path.iterdir()
    with np.load(path / "model.npz", allow_pickle=False) as f:
        q = f["table.q"]
    assert q.tolist() == [pytest.approx([0.729, 0.81]), pytest.approx([0.729, 0.9]),
                          pytest.approx([0.81, 1.0])]
    lengths = {int(e["episode_length"]) for e in read_csv(path / "episodes.csv")}
    assert 8 in lengths and min(lengths) == 3, (  # both truncated and terminated episodes
        "the run's premise: episodes cut by the 8-step limit and episodes that terminated")
    assert summary["eval_return_mean"] == 1.0   # greedy: right, right, right


def test_epsilon_decays_over_the_exploration_fraction_of_the_budget(tmp_path):
    # 1000 steps, --exploration-fraction 0.2: epsilon goes from 1 to 0.1 over the first 200
    # steps, then stays. The row at global_step g logs the epsilon of step index g - 1:
    #   g = 100: 1 + (0.1 - 1) * 99 / 200  = 1 - 0.4455 = 0.5545
    #   g = 200: 1 + (0.1 - 1) * 199 / 200 = 1 - 0.8955 = 0.1045
    #   g = 300 on: 0.1; alpha stays at 0.1 without --anneal-lr
    ql.main(ql.Args(env_id="TableChain-v0", total_timesteps=1000, exploration_fraction=0.2,
                    start_e=1.0, end_e=0.1, log_interval=100, eval_episodes=0,
                    output_dir=str(tmp_path)))
    updates = read_csv(next(tmp_path.glob("*/updates.csv")))
    assert [int(u["global_step"]) for u in updates] == list(range(100, 1001, 100))
    assert [float(u["epsilon"]) for u in updates] == pytest.approx([0.5545, 0.1045] + [0.1] * 8)
    assert {float(u["learning_rate"]) for u in updates} == {0.1}


def test_time_limit_steps_bootstrap_from_the_true_final_state(tmp_path, monkeypatch):
    calls = []
    original = ql.q_update

    def spy(q, s, a, r, s_next, terminated, alpha, gamma):
        calls.append((s, s_next, terminated))
        return original(q, s, a, r, s_next, terminated, alpha, gamma)

    monkeypatch.setattr(ql, "q_update", spy)
    ql.main(ql.Args(env_id="TableCountToThree-v0", total_timesteps=6, eval_episodes=0,
                    output_dir=str(tmp_path)))
    # 0 -> 1 -> 2 -> 3 (cut by the time limit: not terminated, bootstraps from 3), then the
    # next episode starts again from 0
    assert calls == [(0, 1, False), (1, 2, False), (2, 3, False)] * 2
    episodes = read_csv(next(tmp_path.glob("*/episodes.csv")))
    assert [(e["global_step"], e["episode_return"], e["episode_length"]) for e in episodes] == \
        [("3", "3.0", "3"), ("6", "3.0", "3")]


def test_training_and_evaluation_episodes_end_at_the_environment_s_own_time_limit(tmp_path):
    # conftest's CountToThree-v0 pays 1 a step and never terminates; its time limit of 3
    # steps cuts every episode, in training and in the evaluation alike (EVAL_MAX_STEPS cuts
    # only environments without a limit of their own). 6 steps are 2 episodes of return 3
    # ending at steps 3 and 6; 2 evaluation episodes return 3 each, mean 3.
    # (The counts 0..3 all fall in the first of 20 cells of the grid over [0, 10^6].)
    summary = ql.main(ql.Args(env_id="CountToThree-v0", total_timesteps=6, eval_episodes=2,
                              output_dir=str(tmp_path)))
    episodes = read_csv(next(tmp_path.glob("*/episodes.csv")))
    assert [(e["global_step"], e["episode_return"], e["episode_length"]) for e in episodes] == \
        [("3", "3.0", "3"), ("6", "3.0", "3")]
    assert (summary["eval_return_mean"], summary["eval_return_std"]) == (3.0, 0.0)


# tests/my_envs.py's EpisodeNumber with a reward_threshold of 45
gym.register("TableEpisodeNumber-v0", entry_point="my_envs:EpisodeNumber", max_episode_steps=10,
             reward_threshold=45.0)


def test_the_loop_logs_its_episodes_and_its_rows_by_hand_over_30_episodes_of_3_steps(tmp_path):
    # EpisodeNumber pays the number of its episode at each step; reset with an odd seed
    # (--seed 1), every episode is 3 steps. 90 steps are 30 episodes ending at steps 3, 6,
    # ..., 90 and returning 3 x 1, 3 x 2, ..., 3 x 30, each handed to the run writer at the
    # step it ends (not at the next reset's, nor with the step count of the episode).
    # updates.csv, --log-interval 12: rows at 12, 24, ..., 84 and 90 (the end). `episodes`
    # counts the episodes so far, g / 3 = 4, 8, ..., 28, 30 (not those since the row
    # before: 4, ..., 4, 2). The mean of the last 20 reaches the threshold 45 at episode 25
    # (3 x 15.5 = 46.5), step 75, which is no multiple of --log-interval: the run goes on
    # (it stops only at --stop-at-return) and writes no row there.
    summary = ql.main(ql.Args(env_id="TableEpisodeNumber-v0", total_timesteps=90,
                              log_interval=12, eval_episodes=0, exploration_fraction=1.0,
                              output_dir=str(tmp_path)))
    (path,) = tmp_path.iterdir()
    episodes = read_csv(path / "episodes.csv")
    assert [(int(e["global_step"]), float(e["episode_return"]), int(e["episode_length"]))
            for e in episodes] == [(3 * k, 3.0 * k, 3) for k in range(1, 31)]
    updates = read_csv(path / "updates.csv")
    assert [int(u["global_step"]) for u in updates] == [12, 24, 36, 48, 60, 72, 84, 90]
    assert [int(u["episodes"]) for u in updates] == [4, 8, 12, 16, 20, 24, 28, 30]
    assert (summary["solved_at_step"], summary["global_steps"]) == (75, 90)


def test_the_loop_acts_with_the_scheduled_epsilon_and_learns_with_the_annealed_alpha(
        tmp_path, monkeypatch):
    # 10 steps of the chain, --exploration-fraction 0.5: epsilon goes from --start-e 0.6 to
    # --end-e 0.2 over 0.5 * 10 = 5 steps, epsilon_t = 0.6 - 0.4 * min(1, t / 5):
    #   0.6, 0.52, 0.44, 0.36, 0.28, then 0.2;
    # --anneal-lr from 0.5: alpha_t = 0.5 * (1 - t / 10) = 0.5, 0.45, ..., 0.05.
    # Step t acts with epsilon_t from the state it is in and q_update learns from that state
    # and the action taken with alpha_t; the visit is counted for the state acted from.
    acted, learned = [], []
    act, update = ql.QTable.act, ql.q_update

    def spy_act(self, s, epsilon, rng):
        acted.append((s, epsilon, act(self, s, epsilon, rng)))
        return acted[-1][2]

    def spy_update(q, s, a, r, s_next, terminated, alpha, gamma):
        learned.append((s, a, alpha, update(q, s, a, r, s_next, terminated, alpha, gamma)))
        return learned[-1][3]

    monkeypatch.setattr(ql.QTable, "act", spy_act)
    monkeypatch.setattr(ql, "q_update", spy_update)
    ql.main(ql.Args(env_id="TableChain-v0", total_timesteps=10, exploration_fraction=0.5,
                    start_e=0.6, end_e=0.2, anneal_lr=True, learning_rate=0.5, gamma=0.9,
                    q_init=1.0, log_interval=4, eval_episodes=0, save_model=True,
                    output_dir=str(tmp_path)))
    assert [e for _, e, _ in acted] == pytest.approx([0.6, 0.52, 0.44, 0.36, 0.28] + [0.2] * 5)
    assert [alpha for _, _, alpha, _ in learned] == pytest.approx([0.5 * (1 - t / 10)
                                                                   for t in range(10)])
    assert [(s, a) for s, a, _, _ in learned] == [(s, a) for s, _, a in acted]
    (path,) = tmp_path.iterdir()
    with np.load(path / "model.npz", allow_pickle=False) as f:
        visits = f["table.visits"]
    states = [s for s, _, _, _ in learned]
    assert visits.tolist() == np.bincount(states, minlength=3).tolist()
    # updates.csv's rows at 4, 8 and 10: the epsilon and alpha of their last step (t = 3, 7,
    # 9), the mean |TD error| of the steps since the row before (4, 4 and 2 of them) and the
    # states acted from so far. q_init 1 makes every TD error non-zero.
    deltas = np.abs([delta for _, _, _, delta in learned])
    rows = read_csv(path / "updates.csv")
    assert [int(r["global_step"]) for r in rows] == [4, 8, 10]
    assert [float(r["epsilon"]) for r in rows] == pytest.approx([0.36, 0.2, 0.2])
    assert [float(r["learning_rate"]) for r in rows] == pytest.approx([0.35, 0.15, 0.05])
    assert [float(r["td_error_abs"]) for r in rows] == pytest.approx(
        [deltas[:4].mean(), deltas[4:8].mean(), deltas[8:].mean()])
    assert [int(r["states_visited"]) for r in rows] == [len(set(states[:g])) for g in (4, 8, 10)]


class SeedLogEnv(CountingEnv):
    """CountingEnv that keeps the seed of every reset."""
    seeds = []

    def reset(self, *, seed=None, options=None):
        SeedLogEnv.seeds.append(seed)
        return super().reset(seed=seed, options=options)


gym.register("TableSeedLog-v0", entry_point=SeedLogEnv, max_episode_steps=3)


def test_the_greedy_policy_plays_each_environments_row_greedily():
    # Q(s, .) = [s, -s] in rows 1-3 and [0, 1] in row 0: action 1 in state 0, action 0 in
    # the others, each environment of the evaluation's vector its own state's; a Box table
    # reads each environment's cell of the grid (cells 0 and 1 of [0, 2] in 2 bins)
    table = ql.QTable(np.array([[0.0, 1.0], [1.0, -1.0], [2.0, -2.0], [3.0, -3.0]]))
    act = ql.greedy_policy({"table": table}, envs=None)
    assert np.asarray(act(np.array([0, 2, 1, 0, 3]), {})).tolist() == [1, 0, 0, 1, 0]
    grid = ql.QTable(np.array([[0.0, 1.0], [1.0, 0.0]]), low=[0.0], high=[2.0], bins=[2])
    act = ql.greedy_policy({"table": grid}, envs=None)
    assert np.asarray(act(np.array([[0.5], [1.5], [0.2]], np.float32), {})).tolist() == [1, 0, 1]


def test_training_seeds_its_environment_once(tmp_path, monkeypatch):
    # 9 steps of 3-step episodes with --seed 5: the first reset takes the seed, the resets
    # after each of the three episodes none, so that the episodes go on from its stream.
    # The seed (not the default 1) also reaches Python's and NumPy's global seeds, and the
    # exploration's generator comes to its first epsilon-greedy draw fresh from it.
    SeedLogEnv.seeds.clear()
    seeded = [spy_on(monkeypatch, module, "seed", lambda seed: seed)
              for module in (ql.random, ql.np.random)]
    states = spy_on(monkeypatch, ql.QTable, "act", lambda self, s, epsilon, rng: rng.getstate())
    ql.main(ql.Args(env_id="TableSeedLog-v0", total_timesteps=9, seed=5, eval_episodes=0,
                    output_dir=str(tmp_path)))
    assert SeedLogEnv.seeds == [5, None, None, None]
    assert seeded == [[5], [5]] and states[0] == random.Random(5).getstate()


# ---------------------------------------------------------------------------------------
# Runs end to end
# ---------------------------------------------------------------------------------------
def model_of(path):
    """A run folder's model.npz: its flags and the table's arrays."""
    with np.load(os.path.join(path, "model.npz"), allow_pickle=False) as f:
        return json.loads(str(f["args"])), {k: f[k] for k in f.files if k != "args"}


@pytest.mark.slow  # a smoke run: a whole tiny run and every file it writes
def test_discrete_smoke_run_logs_its_columns_and_its_model_evaluates_the_same(tmp_path):
    # Taxi's 500 states: no heat map (its map is of 7 x 11 characters, not of its states).
    # The table saved, evaluated alone, plays the same greedy policy on the same seeds.
    args = ql.Args(total_timesteps=3000, eval_episodes=3, save_model=True, log_interval=500,
                   output_dir=str(tmp_path / "train"))
    summary = ql.main(args)
    (path,) = (tmp_path / "train").iterdir()
    episodes, updates = read_csv(path / "episodes.csv"), read_csv(path / "updates.csv")
    assert summary["global_steps"] == 3000
    assert [int(u["global_step"]) for u in updates] == [500, 1000, 1500, 2000, 2500, 3000]
    columns = ["epsilon", "learning_rate", "td_error_abs", "states_visited", "episodes"]
    assert list(updates[0])[3:] == columns
    assert float(updates[0]["epsilon"]) > float(updates[-1]["epsilon"])
    assert sum(int(e["episode_length"]) for e in episodes) <= 3000
    flags, table = model_of(path)
    assert flags["env_id"] == "Taxi-v4" and table["table.q"].shape == (500, 6)
    assert table["table.visits"].sum() == 3000
    assert not (path / "heat_map.png").exists()

    evaluated = ql.main(ql.Args(eval_checkpoint=str(path / "model.npz"), eval_episodes=3,
                                output_dir=str(tmp_path / "eval")))
    assert evaluated["eval_return_mean"] == summary["eval_return_mean"]  # same table, same seeds
    assert evaluated["global_steps"] == 0


@pytest.mark.slow  # a smoke run: a whole tiny run and every file it writes
def test_box_smoke_run_with_a_grid_and_its_heat_map(tmp_path):
    args = ql.Args(env_id="MountainCar-v0", total_timesteps=1000, bins=(8, 6), eval_episodes=1,
                   save_model=True, anneal_lr=True, q_init=1.0, output_dir=str(tmp_path / "train"))
    summary = ql.main(args)
    (path,) = (tmp_path / "train").iterdir()
    episodes, updates = read_csv(path / "episodes.csv"), read_csv(path / "updates.csv")
    # MountainCar episodes are cut at 200 steps and never reached the goal this early
    assert [(e["episode_return"], e["episode_length"]) for e in episodes] == [("-200.0", "200")] * 5
    assert float(updates[-1]["learning_rate"]) == pytest.approx(0.1 / 1000)  # annealed
    flags, table = model_of(path)
    assert table["table.q"].shape == (48, 3) and flags["bins"] == [8, 6]
    assert (path / "heat_map.png").exists()  # a grid of two dimensions

    evaluated = ql.main(ql.Args(env_id="MountainCar-v0", eval_checkpoint=str(path / "model.npz"),
                                eval_episodes=1, output_dir=str(tmp_path / "eval")))
    assert evaluated["eval_return_mean"] == summary["eval_return_mean"]
    with open(next((tmp_path / "eval").glob("*/config.json"))) as f:
        config = json.load(f)
    assert config["bins"] == [8, 6]  # the grid of the checkpoint, not the default 20


@pytest.mark.parametrize("env_id, states", [("GridCells-v0", 16), ("GridWorld-v0", 16)])
@pytest.mark.slow  # a smoke run: a whole tiny run and every file it writes
def test_smoke_run_on_an_environment_of_your_own_module(tmp_path, fresh_env_module, env_id,
                                                        states):
    # GridCells-v0 has Discrete(16) observations, table rows as they are; GridWorld-v0 has
    # the position as a Box in [0, 3]^2: 4 bins of width 3/4 put x = 0, 1, 2, 3 in cells
    # floor(0), floor(4/3) = 1, floor(8/3) = 2, floor(4) -> 3, so again 16 rows, one per cell.
    flags = {"bins": (4,)} if env_id == "GridWorld-v0" else {}
    args = ql.Args(env_id=f"{fresh_env_module}:{env_id}", total_timesteps=400, eval_episodes=1,
                   save_model=True, output_dir=str(tmp_path), **flags)
    ql.main(args)
    (path,) = tmp_path.iterdir()
    # -1 a step: at best 6 steps to the opposite corner, at most 20 (the time limit)
    assert all(-20 <= float(e["episode_return"]) <= -6 for e in read_csv(path / "episodes.csv"))
    _, table = model_of(path)
    assert table["table.q"].shape == (states, 4)
    # every cell is acted from but the goal (cell 4*3 + 3 = 15), which ends the episode
    assert np.flatnonzero(table["table.visits"] == 0).tolist() == [15]


def test_command_line_with_grid_bounds_for_unbounded_dimensions(tmp_path, run_cli):
    code, out, err = run_cli("qlearning.py", [
        "--env-id", "CartPole-v1", "--bins", "1", "1", "6", "12", "--obs-low", "-2.4", "-3",
        "-0.21", "-3.5", "--obs-high", "2.4", "3", "0.21", "3.5", "--total-timesteps", "500",
        "--eval-episodes", "1", "--output-dir", str(tmp_path)])
    assert code == 0 and err == ""
    assert "table of 72 states x 2 actions" in out
    assert out.splitlines()[-1].startswith("qlearning.py: run folder ")  # its closing line
    with open(next(tmp_path.glob("*/config.json"))) as f:
        config = json.load(f)
    assert config["bins"] == [1, 1, 6, 12] and config["obs_low"] == [-2.4, -3, -0.21, -3.5]


def test_stop_at_return_stops_and_records_when(tmp_path):
    # Chain returns are 1 (reached the end) or 0 (cut by the time limit): a 20-episode mean
    # of at least 0 is reached as soon as 20 episodes have ended. --log-interval 100,000 is
    # the budget: only the row of the step that stops the run is written before it.
    summary = ql.main(ql.Args(env_id="TableChain-v0", total_timesteps=100_000, stop_at_return=0.0,
                              log_interval=100_000, eval_episodes=0, output_dir=str(tmp_path)))
    (path,) = tmp_path.iterdir()
    episodes = read_csv(path / "episodes.csv")
    assert len(episodes) == 20 and summary["solved_at_step"] == int(episodes[19]["global_step"])
    assert summary["global_steps"] == summary["solved_at_step"] < 100_000
    # the stopping step writes its row of updates.csv though it is no multiple of
    # --log-interval (without it, the run would have no updates.csv at all)
    updates = read_csv(path / "updates.csv") if (path / "updates.csv").exists() else []
    assert [int(u["global_step"]) for u in updates] == [summary["global_steps"]]


def test_an_interrupted_run_draws_the_heat_map_of_its_table_so_far(tmp_path, monkeypatch):
    drawn = spy_on(monkeypatch, ql, "plot_heat_map", lambda path, heat: heat["values"].copy())
    monkeypatch.setattr(ql.QTable, "act", interrupt_on_call(1500, ql.QTable.act))
    with pytest.raises(KeyboardInterrupt):
        ql.main(ql.Args(env_id="FrozenLake-v1", total_timesteps=3000, output_dir=str(tmp_path)))
    (values,) = drawn
    assert np.isfinite(values).any()  # the cells visited in the first 1,499 steps


def test_a_non_finite_td_error_stops_cleanly(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(ql, "q_update", lambda *args: float("nan"))
    summary = ql.main(ql.Args(total_timesteps=1000, output_dir=str(tmp_path)))
    assert summary["interrupted"] is True and summary["global_steps"] == 1
    assert "non-finite (NaN or inf) at step 1" in capsys.readouterr().out


@pytest.mark.slow  # determinism: two whole runs
def test_same_seed_gives_the_same_episodes(tmp_path):
    rows = same_seed_episodes(lambda out: ql.main(ql.Args(
        total_timesteps=5000, eval_episodes=0, output_dir=out)), tmp_path)
    assert len(rows) > 20


# ---------------------------------------------------------------------------------------
# The hooks the plumbing calls: qlearning.py's checks of its flags and spaces (make_table's
# of the grid), and the table's state in model.npz
# ---------------------------------------------------------------------------------------
@pytest.mark.parametrize("flags, message", [
    (dict(bins=(0,)), "--bins must be positive, got 0"),
    (dict(bins=()), "--bins needs one number for all dimensions or one per dimension"),
    (dict(log_interval=0), "--log-interval must be positive"),
    (dict(learning_rate=0.0), "--learning-rate must be in (0, 1]"),
    (dict(learning_rate=1.5), "--learning-rate must be in (0, 1]"),
    (dict(gamma=1.5), "--gamma must be in [0, 1]"),
    (dict(end_e=-0.1), "--end-e must be in [0, 1]"),
    (dict(exploration_fraction=2.0), "--exploration-fraction must be in [0, 1]"),
    (dict(q_init=float("inf")), "--q-init must be a finite number"),
])
def test_check_flags_refuses_a_bad_flag_in_one_line(flags, message):
    with pytest.raises(ql.UsageError) as refused:
        ql.check_flags(ql.Args(**flags))
    assert message in str(refused.value) and "\n" not in str(refused.value)
    ql.check_flags(ql.Args())  # the defaults pass


@pytest.mark.parametrize("obs_space, action_space, message", [
    (gym.spaces.Box(-1.0, 1.0, (3,)), gym.spaces.Box(-2.0, 2.0, (1,)), "Box action space; "
     "qlearning.py handles Discrete actions; for continuous ones use ddpg_td3.py or sac.py"),
    (gym.spaces.Discrete(4), gym.spaces.MultiBinary(3),
     "MultiBinary action space; qlearning.py handles Discrete actions"),
    (gym.spaces.Tuple((gym.spaces.Discrete(32), gym.spaces.Discrete(11))),
     gym.spaces.Discrete(2), "Tuple observation space; qlearning.py handles Discrete"),
])
def test_check_spaces_refuses_what_a_table_cannot_hold_in_one_line(obs_space, action_space,
                                                                   message):
    with pytest.raises(ql.UsageError) as refused:
        ql.check_spaces(ql.Args(env_id="Some-v0"), obs_space, action_space)
    assert message in str(refused.value) and "\n" not in str(refused.value)


def test_check_spaces_returns_both_spaces():
    for obs_space in (gym.spaces.Discrete(16), gym.spaces.Box(-1.0, 1.0, (2,))):
        action_space = gym.spaces.Discrete(4)
        assert ql.check_spaces(ql.Args(), obs_space, action_space) == (obs_space, action_space)


@pytest.mark.parametrize("flags, message", [
    (dict(env_id="CartPole-v1"), "observation dimensions 1, 3 (counting from 0) are unbounded; "
     "give finite grid bounds with --obs-low and --obs-high"),
    (dict(env_id="CartPole-v1", obs_low=(-3.0,), obs_high=(3.0,), bins=(1000,)),
     "--bins 1000 1000 1000 1000 makes a table of 1,000,000,000,000 states x 2 actions, 24 TB"),
    (dict(env_id="MountainCar-v0", bins=(3, 4, 5)),
     "--bins takes one number or one per observation dimension (2), got 3"),
    (dict(env_id="MountainCar-v0", obs_low=(0.0,), obs_high=(0.0, 1.0)),
     "need --obs-low < --obs-high in every dimension; not in dimensions 0"),
    (dict(bins=(5,)), "--bins, --obs-low and --obs-high are for Box observations; Taxi-v4's are "
     "Discrete(500)"),
])
def test_main_refuses_a_grid_that_does_not_fit_in_one_line(flags, message, tmp_path):
    with pytest.raises(ql.UsageError) as refused:
        ql.main(ql.Args(output_dir=str(tmp_path), **flags))
    assert message in str(refused.value) and "\n" not in str(refused.value)
    assert not os.listdir(tmp_path)


def test_a_checkpoint_of_another_table_is_refused_in_one_line(tmp_path):
    # a FrozenLake table of 16 x 4 saved as Taxi's: main makes Taxi's 500 x 6 and Run
    # refuses the checkpoint's state
    ql.save_checkpoint(tmp_path / "model.npz", {"table": ql.QTable(np.zeros((16, 4)))},
                       ql.Args(env_id="Taxi-v4"))
    with pytest.raises(ql.UsageError) as refused:
        ql.main(ql.Args(eval_checkpoint=str(tmp_path / "model.npz"),
                        output_dir=str(tmp_path / "eval")))
    assert "a table of shape (16, 4), not (500, 6)" in str(refused.value)


@pytest.mark.slow  # a Python process of its own
def test_importing_the_script_has_no_side_effects_and_no_torch(tmp_path):
    check_import_is_quiet("qlearning", tmp_path, also="assert 'torch' not in sys.modules")

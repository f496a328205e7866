"""pqn.py: its math by hand (Q(lambda) returns, the epsilon schedule and choice), its network,
and its glue (which flag reaches which piece, what the rollout stores, which parameters
learn). The plumbing's behaviour is tests/test_plumbing.py's."""
import numpy as np
import pytest
import torch

import pqn
from conftest import read_csv, spy_on, tensor

# ---------------------------------------------------------------------------------------
# The math, by hand
# ---------------------------------------------------------------------------------------
# One environment, 4 steps: step 0 truncated (a time limit), step 2 terminated, step 3 the
# rollout's last. r = 1, 2, 3, 4; next_q = max_a Q(s'_t, a) = 10, 20, 30, 40; gamma 0.5.
REWARDS, NEXT_Q = tensor(1, 2, 3, 4)[:, None], tensor(10, 20, 30, 40)[:, None]
TERMINATED, TRUNCATED = tensor(0, 0, 1, 0)[:, None], torch.tensor([True, False, False, False])[:, None]


def test_q_lambda_returns_by_hand():
    # lambda 0.5, backward:
    #   t=3 (last):       G = 4 + 0.5 * (0.5*40 + 0.5*40)          = 4 + 20   = 24
    #   t=2 (terminated): G = 3 + 0.5 * 0 * (...)                             = 3
    #   t=1:              G = 2 + 0.5 * (0.5*20 + 0.5*G_2 = 10 + 1.5) = 2 + 5.75 = 7.75
    #   t=0 (truncated):  G_1 is the next episode's: G = 1 + 0.5 * (0.5*10 + 0.5*10) = 6
    returns = pqn.q_lambda_returns(REWARDS, NEXT_Q, TERMINATED, TRUNCATED, 0.5, 0.5)
    assert returns.flatten().tolist() == [6.0, 7.75, 3.0, 24.0]


def test_lambda_0_is_the_one_step_target_and_1_the_monte_carlo_return():
    # lambda 0: r + gamma * (1 - terminated) * next_q = 1+5, 2+10, 3, 4+20
    one_step = pqn.q_lambda_returns(REWARDS, NEXT_Q, TERMINATED, TRUNCATED, 0.5, 0.0)
    assert one_step.flatten().tolist() == [6.0, 12.0, 3.0, 24.0]
    # lambda 1: the discounted rewards to the episode's end, bootstrapped only where the
    # time limit (t=0) or the rollout (t=3) cuts it: 1 + 0.5*10, 2 + 0.5*3, 3, 4 + 0.5*40
    monte_carlo = pqn.q_lambda_returns(REWARDS, NEXT_Q, TERMINATED, TRUNCATED, 0.5, 1.0)
    assert monte_carlo.flatten().tolist() == [6.0, 3.5, 3.0, 24.0]


def recursive_q_lambda(r, q, term, trunc, gamma, lam, t):
    """G_t straight from the docstring's definition, recursively, for one environment."""
    last = t == len(r) - 1 or trunc[t]
    following = q[t] if last else recursive_q_lambda(r, q, term, trunc, gamma, lam, t + 1)
    return r[t] + gamma * (1 - term[t]) * ((1 - lam) * q[t] + lam * following)


def test_q_lambda_returns_agree_with_the_recursive_definition():
    # 3 environments, 12 steps of random rewards, values and ends.
    g = torch.Generator().manual_seed(0)
    r, q = torch.randn(12, 3, generator=g), torch.randn(12, 3, generator=g)
    term = (torch.rand(12, 3, generator=g) < 0.2).float()
    trunc = (torch.rand(12, 3, generator=g) < 0.2) & (term == 0)
    returns = pqn.q_lambda_returns(r, q, term, trunc, 0.9, 0.7)
    for n in range(3):
        cols = [x[:, n].tolist() for x in (r, q, term, trunc)]
        expected = [recursive_q_lambda(*cols, 0.9, 0.7, t) for t in range(12)]
        assert returns[:, n].tolist() == pytest.approx(expected, abs=1e-5)


def test_the_epsilon_schedule_by_hand():
    # 1 -> 0.05 over 0.2 * 500,000 = 100,000 steps: halfway 1 + (0.05 - 1) * 0.5 = 0.525
    assert pqn.linear_schedule(1.0, 0.05, 100_000, 0) == 1.0
    assert pqn.linear_schedule(1.0, 0.05, 100_000, 50_000) == pytest.approx(0.525)
    assert pqn.linear_schedule(1.0, 0.05, 100_000, 400_000) == pytest.approx(0.05)
    assert pqn.linear_schedule(1.0, 0.05, 0, 0) == 0.05


def test_epsilon_greedy_explores_per_environment():
    q_values = tensor(0, 1, 0).expand(4000, 3)  # argmax 1 in every environment
    assert pqn.epsilon_greedy(q_values, 0.0).tolist() == [1] * 4000
    # epsilon 0.3: each environment draws on its own; a random action is 0, 1 or 2, so an
    # environment takes 0 with probability 0.3/3 = 0.1 and 1 with 0.7 + 0.1 = 0.8
    actions = pqn.epsilon_greedy(q_values, 0.3, torch.Generator().manual_seed(1))
    shares = [(actions == a).float().mean().item() for a in range(3)]
    assert shares == pytest.approx([0.1, 0.8, 0.1], abs=0.02)


def test_the_network_normalizes_each_hidden_layer_and_keeps_no_second_copy():
    net = pqn.QNetwork((4,), 2, hidden_size=8)
    kinds = [type(m).__name__ for m in net.mlp]
    assert kinds == ["Linear", "LayerNorm", "ReLU", "Linear", "LayerNorm", "ReLU", "Linear"]
    image = pqn.QNetwork((10, 10, 4), 3, hidden_size=8)  # MinAtar: 16 * 8 * 8 = 1024 features
    assert image.mlp[0].in_features == 1024
    assert image(torch.zeros(5, 10, 10, 4, dtype=torch.bool)).shape == (5, 3)


# ---------------------------------------------------------------------------------------
# The glue: which flag reaches which piece, what the rollout stores, what learns
# ---------------------------------------------------------------------------------------
def test_one_network_learns_with_no_target_network_and_no_replay(tmp_path, monkeypatch):
    # Adding a target network makes a second QNetwork; adding a replay buffer keeps more than
    # the rollout's T*N = 2*4 transitions: both fail here.
    made = spy_on(monkeypatch, pqn.QNetwork, "__init__", lambda self, *a, **k: id(self))
    rollouts = spy_on(monkeypatch, pqn.Rollout, "__init__", lambda self, *a, **k: id(self))
    optimized, radam = [], torch.optim.RAdam.__init__

    def spy(self, params, **kwargs):  # the parameters the optimizer is given
        optimized.append(list(params))
        radam(self, optimized[-1], **kwargs)

    monkeypatch.setattr(torch.optim.RAdam, "__init__", spy)
    pqn.main(pqn.Args(env_id="CountToThree-v0", total_timesteps=32, num_envs=4, num_steps=2,
                      num_minibatches=2, hidden_size=8, eval_episodes=0, output_dir=str(tmp_path)))
    assert len(made) == 1 and len(rollouts) == 1
    assert len(optimized) == 1 and len(optimized[0]) == 10  # 3 Linear + 2 LayerNorm, w and b


def test_the_loop_gives_the_targets_their_flags_and_the_rollout_its_true_next_states(
        tmp_path, monkeypatch):
    # CountToThree-v0: the observation counts 0, 1, 2 and the third step is truncated (true
    # last observation 3, the next episode starting at 0). One environment, 6 steps: two
    # episodes. Rewards 1 scaled by --reward-scale 0.25; --gamma 0.8, --q-lambda 0.3 reach
    # q_lambda_returns.
    calls = spy_on(monkeypatch, pqn, "q_lambda_returns",
                   lambda r, q, term, trunc, gamma, lam: (r.flatten().tolist(),
                                                          trunc.flatten().tolist(), gamma, lam))
    seen = []
    targets = pqn.Rollout.targets
    monkeypatch.setattr(pqn.Rollout, "targets", lambda self, *a: seen.append(
        self.next_obs.flatten().tolist()) or targets(self, *a))
    pqn.main(pqn.Args(env_id="CountToThree-v0", total_timesteps=6, num_envs=1, num_steps=6,
                      num_minibatches=2, hidden_size=8, reward_scale=0.25, gamma=0.8,
                      q_lambda=0.3, eval_episodes=0, output_dir=str(tmp_path)))
    assert calls == [([0.25] * 6, [False, False, True] * 2, 0.8, 0.3)]
    assert seen == [[1.0, 2.0, 3.0, 1.0, 2.0, 3.0]]  # 3: the truncated step's final_obs


def test_the_learning_rate_decays_to_zero_and_epsilon_follows_its_flags(tmp_path):
    # 4 iterations of 2 x 8 = 16 steps: lr 1e-3 * (1 - (k-1)/4) = 1e-3, 7.5e-4, 5e-4, 2.5e-4;
    # epsilon 0.9 -> 0.1 over 0.5 * 64 = 32 steps, read at each rollout's last step
    # (global step 14, 30, 46, 62 before the step): 0.9 - 0.8 * 14/32 = 0.55, then 0.9 - 0.8 *
    # 30/32 = 0.15, then 0.1, 0.1.
    summary = pqn.main(pqn.Args(env_id="CountToThree-v0", total_timesteps=64, num_envs=2,
                                num_steps=8, num_minibatches=2, hidden_size=8,
                                learning_rate=1e-3, start_e=0.9, end_e=0.1,
                                exploration_fraction=0.5, eval_episodes=0,
                                output_dir=str(tmp_path)))
    (folder,) = tmp_path.iterdir()
    rows = read_csv(folder / "updates.csv")
    assert [float(r["learning_rate"]) for r in rows] == pytest.approx([1e-3, 7.5e-4, 5e-4, 2.5e-4])
    assert [float(r["epsilon"]) for r in rows] == pytest.approx([0.55, 0.15, 0.1, 0.1])
    assert summary["global_steps"] == 64


# ---------------------------------------------------------------------------------------
# pqn.py's hooks: its checks, its greedy policy, its model's flags
# ---------------------------------------------------------------------------------------
def test_updates_csvs_columns_go_to_tensorboard_under_cleanrls_names(tmp_path):
    # TENSORBOARD_NAMES is keyed by the columns pqn.py writes: td_loss and q_values under
    # losses/ (CleanRL's pqn.py), not charts/td_loss as an unknown column would go
    pqn.main(pqn.Args(env_id="CountToThree-v0", total_timesteps=16, num_envs=2, num_steps=8,
                      num_minibatches=2, hidden_size=8, eval_episodes=0, tensorboard=False,
                      output_dir=str(tmp_path)))
    (folder,) = tmp_path.iterdir()
    columns = list(read_csv(folder / "updates.csv")[0])[2:]
    names = {**pqn.COMMON_NAMES, **pqn.TENSORBOARD_NAMES}
    assert {c: names.get(c, f"charts/{c}") for c in columns} == {
        "sps": "charts/SPS", "learning_rate": "charts/learning_rate", "epsilon": "charts/epsilon",
        "td_loss": "losses/td_loss", "q_values": "losses/q_values"}
    assert set(pqn.TENSORBOARD_NAMES) <= set(columns)  # no name for a column it never writes


@pytest.mark.parametrize("argv, message", [
    (["--q-lambda", "1.5"], "--q-lambda must be in [0, 1], got 1.5"),
    (["--reward-scale", "0"], "--reward-scale must be positive, got 0.0"),
    (["--num-envs", "3", "--num-steps", "5", "--num-minibatches", "2"],
     "num_envs*num_steps = 15 is not divisible by --num-minibatches 2"),
    (["--total-timesteps", "100"], "less than one rollout (num_envs*num_steps = 2048)"),
    (["--env-id", "Pendulum-v1"], "Box action space; pqn.py takes the max over Discrete"),
    (["--env-id", "ALE/Pong-v5"], "for Atari's frames use dqn.py or ppo.py"),
])
def test_bad_input_is_one_line_and_exit_status_2(argv, message, check_usage_error):
    check_usage_error("pqn.py", argv, message)


def test_the_greedy_policy_takes_the_argmax_per_environment():
    net = pqn.QNetwork((1,), 3, hidden_size=8)
    net.mlp[-1].bias.data = tensor(0, 5, 0)  # with zero weights, Q = bias: argmax 1
    net.mlp[-1].weight.data.zero_()
    act = pqn.greedy_policy({"q_network": net}, None)
    assert act(np.zeros((4, 1), dtype=np.float32), {}).tolist() == [1, 1, 1, 1]


def test_a_checkpoint_rebuilds_its_network_width(tmp_path):
    # trained at --hidden-size 8; evaluated with the default 128 on the command line, the
    # checkpoint's 8 builds the network that loads it, and it plays as it did.
    trained = pqn.main(pqn.Args(env_id="CartPole-v1", total_timesteps=256, num_envs=4,
                                num_steps=64, num_minibatches=4, hidden_size=8, eval_episodes=2,
                                save_model=True, output_dir=str(tmp_path / "train")))
    (folder,) = (tmp_path / "train").iterdir()
    evaluated = pqn.main(pqn.Args(env_id="CartPole-v1", eval_checkpoint=str(folder),
                                  eval_episodes=2, output_dir=str(tmp_path / "eval")))
    assert evaluated["eval_return_mean"] == trained["eval_return_mean"]

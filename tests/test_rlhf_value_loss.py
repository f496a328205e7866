"""Which parameters rlhf.py's PPO losses train, in a tiny run of the loop (main). The design
(rlhf.py's PolicyWithValue and train, docs/teach/rlhf.md): the critic is a linear value head
on the policy's own body, both in PPO's one optimizer, so the value loss's gradient reaches
the value head and, through the hidden states it reads, the whole shared body (TRL's value
head); the policy loss reaches the language model and never the value head. The value head
starts at zero, so at PPO's first step dV/dh = w = 0: the value loss moves the head alone,
and the body from the next step on. Each PPO step's two terms are differentiated apart here
(torch.autograd.grad on the loop's own tensors), and the weights are compared before and
after PPO."""
import importlib
import inspect

import pytest
import torch

from conftest import spy_on_adam

# 2 updates of 16 prompts, 1 epoch of 2 minibatches: 4 PPO steps (a one-block transformer)
TINY = dict(total_timesteps=32, num_prompts=16, sft_steps=5, sft_problems=32, num_pairs=20,
            rm_steps=5, n_layer=1, n_head=2, n_embd=16, eval_episodes=0, eval_every=0,
            eval_samples=2, update_epochs=1, num_minibatches=2, learning_rate=0.01,
            tensorboard=False, curve=False)


def nonzero(grad):
    return grad is not None and bool(grad.abs().sum() > 0)


def reached(grads, name):
    """Whether a term's gradient reaches the parameter: not None (or frozen) and not 0."""
    return nonzero(grads.get(name))


@pytest.fixture(scope="module")
def ppo_steps(tmp_path_factory):
    """One tiny run: for each ppo_loss call, the gradients of its policy term pg and of its
    weighted value term c_v * vf with respect to each named parameter of the policy (None:
    not reached), its arguments, and the policy's weights at the time; the policy, its
    weights after the run, and the parameters of PPO's optimizer (the last Adam made before
    PPO's first step)."""
    rlhf = importlib.import_module("rlhf")
    policies, steps = [], []
    with pytest.MonkeyPatch.context() as mp:
        optimized = spy_on_adam(mp)
        make_policy, ppo_loss = rlhf.make_policy, rlhf.ppo_loss
        mp.setattr(rlhf, "make_policy", lambda *a, **k: policies.append(make_policy(*a, **k))
                   or policies[-1])

        def spy(*args, **kwargs):
            given = inspect.signature(ppo_loss).bind(*args, **kwargs).arguments
            out = ppo_loss(*args, **kwargs)
            _, pg, vf, _ = out
            (policy,) = policies
            names, params = zip(*[(n, p) for n, p in policy.named_parameters() if p.requires_grad])
            grads = {}
            for term, loss in (("pg", pg), ("vf", given["vf_coef"] * vf)):
                got = (torch.autograd.grad(loss, params, retain_graph=True, allow_unused=True)
                       if loss.requires_grad else [None] * len(params))
                grads[term] = dict(zip(names, got))  # a frozen parameter: no entry, None
            steps.append({"grads": grads, "optimizers": len(optimized),
                          "state": {k: v.clone() for k, v in policy.state_dict().items()},
                          **{k: v.detach().clone() if torch.is_tensor(v) else v
                             for k, v in given.items()}})
            return out

        mp.setattr(rlhf, "ppo_loss", spy)
        torch_threads = torch.get_num_threads()
        torch.set_num_threads(1)
        try:
            rlhf.main(rlhf.Args(**TINY, output_dir=str(tmp_path_factory.mktemp("run"))))
        finally:
            torch.set_num_threads(torch_threads)
    (policy,) = policies
    return {"rlhf": rlhf, "policy": policy, "steps": steps,
            "after": {k: v.clone() for k, v in policy.state_dict().items()},
            "optimizer": optimized[steps[0]["optimizers"] - 1]}


def names(policy, head):
    """The policy's parameter names: the value head's (head True) or the body's."""
    return [n for n, _ in policy.named_parameters() if n.startswith("v_head.") == head]


def test_the_value_loss_reaches_the_value_head_and_from_the_second_step_the_whole_body(ppo_steps):
    policy, steps = ppo_steps["policy"], ppo_steps["steps"]
    head, body = names(policy, True), names(policy, False)
    assert head == ["v_head.weight", "v_head.bias"] and len(steps) == 4
    # every body parameter: the embeddings (wte, tied to lm_head), positions, the block, ln_f
    assert {"lm.wte.weight", "lm.wpe.weight", "lm.ln_f.weight", "lm.ln_f.bias"} <= set(body)
    assert len(body) == len(list(policy.lm.parameters()))
    for k, step in enumerate(steps):
        vf = step["grads"]["vf"]
        assert all(reached(vf, n) for n in head), f"step {k + 1}: the value loss misses the head"
        if k == 0:  # the head's weight still 0: the gradient reaching the body is exactly 0
            assert not step["state"]["v_head.weight"].any()
            assert not any(reached(vf, n) for n in body)
        else:
            assert step["state"]["v_head.weight"].abs().sum() > 0
            missed = [n for n in body if not reached(vf, n)]
            assert missed == [], f"step {k + 1}: the value loss misses {missed}"


def test_the_value_losss_gradient_on_the_heads_bias_by_hand(ppo_steps):
    # at the first step V = w.h + b = 0 on every token and V_old = 0, so the clipped and the
    # unclipped terms agree: c_v vf = c_v mean_t (V_t - R_t)^2 / 2 over the completion's
    # tokens, and d/db = c_v mean_t (V_t - R_t) dV_t/db = -c_v sum_t m_t R_t / sum_t m_t
    # (dV_t/db = 1), with c_v = --vf-coef 0.1
    first = ppo_steps["steps"][0]
    m, R = first["completion_mask"], first["returns"]
    assert first["vf_coef"] == 0.1 and not first["values"].any() and not first["old_values"].any()
    expected = -0.1 * (R * m).sum() / m.sum()
    assert abs(expected.item()) > 1e-4  # could fail: the returns are not 0
    got = first["grads"]["vf"].get("v_head.bias")
    assert got is not None and got.item() == pytest.approx(expected.item(), rel=1e-4)


def test_the_policy_loss_reaches_the_whole_body_and_never_the_value_head(ppo_steps):
    policy, steps = ppo_steps["policy"], ppo_steps["steps"]
    for k, step in enumerate(steps):
        pg = step["grads"]["pg"]
        head = names(policy, True)
        assert all(pg.get(n) is None for n in head), f"step {k + 1}: pg reaches the head"
        missed = [n for n in names(policy, False) if not reached(pg, n)]
        assert missed == [], f"step {k + 1}: the policy loss misses {missed}"


def test_ppos_one_optimizer_holds_the_policy_and_its_head_and_every_weight_moves(ppo_steps):
    # PPO's Adam is given exactly the policy's parameters (body and head, each once); after
    # its 4 steps every one of them differs from where PPO started (the head from 0)
    policy, optimizer = ppo_steps["policy"], ppo_steps["optimizer"]
    assert sorted(map(id, optimizer)) == sorted(map(id, policy.parameters()))
    start, after = ppo_steps["steps"][0]["state"], ppo_steps["after"]
    assert not start["v_head.weight"].any() and not start["v_head.bias"].any()
    still = [n for n, _ in policy.named_parameters() if torch.equal(start[n], after[n])]
    assert still == []

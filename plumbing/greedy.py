# The evaluation's greedy policy that vpg.py, trpo.py and ppo_rnd.py share, one text in all
# three (an agent with an actor, models["agent"], and an observation normalizer,
# models["obs_rms"]): `python plumbing/stamp.py` writes it into their hooks between its marker
# lines, and tests/test_plumbing.py fails where a copy differs by one byte. Each script's own
# to_env_action turns the chosen actions into what its environment takes.

def greedy_policy(models, envs):
    """The evaluation's policy, act(obs, info) -> actions: the argmax of the logits, or the
    Gaussian's mean clipped to the bounds; the observation statistics frozen."""
    agent, normalizer = models["agent"], models["obs_rms"]
    device = next(agent.parameters()).device

    @torch.no_grad()
    def act(obs, info):
        out = agent.actor(torch.from_numpy(normalizer(obs)).to(device))
        return to_env_action(agent, out if agent.continuous else out.argmax(-1),
                             envs.single_action_space)
    return act

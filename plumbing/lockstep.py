# The plumbing of the multi-agent scripts (mappo.py and matd3.py): PettingZoo has no vector
# environment, so LockstepEnvs steps N copies of a parallel environment whose agents finish at
# different times, and make_env speaks PettingZoo's ids and module:function. Its one source
# is this file; plumbing/stamp.py writes it below the common block (see plumbing/common.py).
# The script names CONTINUOUS_ACTIONS: True where its agents act in Box spaces (matd3.py),
# False where they choose among Discrete actions (mappo.py).


# The MPE tasks in which every agent works for one team, and those with adversaries.
COOPERATIVE = ("simple_spread_v3", "simple_speaker_listener_v4", "simple_reference_v3",
               "simple_v3", "simple_line_v1", "simple_formation_v1", "collect_treasure_v1")
COMPETITIVE = ("simple_adversary_v3", "simple_crypto_v3", "simple_push_v3", "simple_tag_v3",
               "simple_world_comm_v3")


def make_env(env_id, max_cycles=25, render_mode=None):
    """One PettingZoo parallel environment. An MPE task is PettingZoo's own AEC-to-parallel
    conversion of the raw environment (with continuous actions where CONTINUOUS_ACTIONS),
    without the wrappers that check every action's bounds and the call order (the script's
    actions are always valid; the checks cost a third of the step time). module:function
    imports the module and calls the user's function (with render_mode if set). An id the
    script cannot run raises an error whose line says what to pass instead."""
    module, _, name = env_id.rpartition(":")
    tasks = f"{SCRIPT} runs the cooperative MPE tasks ({', '.join(sorted(COOPERATIVE))})"
    single_agent = (f"{name} is a single-agent Gymnasium environment; use "
                    f"{'ddpg_td3.py' if CONTINUOUS_ACTIONS else 'ppo.py'} ({tasks})")
    if name in gym.registry:
        raise ValueError(single_agent)
    if not module:
        if env_id in COMPETITIVE:
            raise ValueError(f"{env_id} is a competitive MPE task (adversaries against good "
                             f"agents); {tasks}")
        if env_id not in COOPERATIVE:
            close = [i for i in difflib.get_close_matches(env_id, COOPERATIVE, n=3, cutoff=0.6)
                     if makeable(i)]
            raise gym.error.NameNotFound(f"unknown environment id {env_id!r}" + (
                f"; did you mean {', '.join(close)}?" if close else "")
                + f"; {tasks}, or module:function for your own")
        mpe = importlib.import_module(f"mpe2.{env_id}")  # only this task's: some import SciPy
        return aec_to_parallel_wrapper(mpe.raw_env(
            max_cycles=max_cycles, continuous_actions=CONTINUOUS_ACTIONS, render_mode=render_mode))
    try:
        imported = importlib.import_module(module)
    except ModuleNotFoundError as e:
        if e.name != module:  # a module that the user's imports
            raise
        raise ModuleNotFoundError(f"no module named {module}; put its folder on PYTHONPATH "
                                  "(PYTHONPATH=. when it is in this folder)") from None
    if not hasattr(imported, name):
        if name in gym.registry:  # registered by the module's import
            raise ValueError(single_agent)
        close = [f"{module}:{n}" for n in difflib.get_close_matches(name, dir(imported), n=3)
                 if callable(getattr(imported, n))]
        raise gym.error.NameNotFound(
            f"unknown environment id {env_id!r}: module {module} has no function {name}"
            + (f" (did you mean {', '.join(close)}?)" if close else "")
            + "; pass module:function, a function that returns a PettingZoo parallel env")
    function = getattr(imported, name)
    env = function(render_mode=render_mode) if render_mode else function()
    if not (hasattr(env, "possible_agents") and callable(getattr(env, "step", None))
            and not hasattr(env, "agent_iter")):
        raise TypeError(f"{env_id} gives a {type(env).__name__}, not a PettingZoo parallel "
                        "environment; pass a function that returns one (like parallel_env)")
    return env


def makeable(env_id):
    """Whether make_env(env_id) works here (its dependencies installed), for suggestions."""
    try:
        with warnings.catch_warnings():  # an old version's deprecation is no news here
            warnings.simplefilter("ignore")
            make_env(env_id).close()
        return True
    except Exception:
        return False


class StepResult(NamedTuple):
    """One lock-step of LockstepEnvs: what the agents see next, and what this step gave."""
    obs: np.ndarray  # [N, A, D] next observations (zeros for done agents)
    state: np.ndarray  # [N, S] next states
    avail: np.ndarray  # [N, A, K] next available actions (K = 0: Box actions)
    active: np.ndarray  # [N, A] who acts next
    rewards: np.ndarray  # [N, A] of this step (0 for agents that did not act)
    terminated: np.ndarray  # [N, A]
    truncated: np.ndarray  # [N, A] (time limit, not terminated)
    final_obs: np.ndarray  # [N, A, D] the true last observations where agents ended
    final_state: np.ndarray  # [N, S] the true last state where agents ended
    ended: np.ndarray  # [N] True where a copy's episode ended (its last agents are done)
    episodes: list  # (copy, mean per-agent return, length) of the episodes that ended


class LockstepEnvs:
    """N copies of one PettingZoo parallel environment, stepped together and seen as
    arrays over [N, A] (agents in possible_agents order). An agent that is done leaves the
    environment's agents; its later steps are inactive (zero observation, no action sent,
    reward 0) until every agent is done, when the copy records its episode and resets
    (observations after the reset are the next episode's first). Episode returns are the
    mean over agents of each agent's summed reward (PettingZoo has no
    RecordEpisodeStatistics). Without env.state(), the state is the agents' observations
    joined. The spaces are copy 0's, as check_env hands them to check_spaces:
    observation_space {"agents": each agent's, "state": the state's Box}, action_space each
    agent's. A Discrete agent's available actions are its first n (padded to the largest
    n), less those its info["action_mask"] forbids; Box actions have none (K = 0)."""

    def __init__(self, env_id, num_envs=1, max_cycles=25, render_mode=None):
        self.envs = [make_env(env_id, max_cycles, render_mode) for _ in range(num_envs)]
        env = self.envs[0]
        self.agents = list(env.possible_agents)
        spaces = {agent: env.observation_space(agent) for agent in self.agents}
        self.action_space = {agent: env.action_space(agent) for agent in self.agents}
        probe = make_env(env_id, max_cycles)  # reset for the state's size, so that the copies
        probe.reset(seed=0)                   # are reset by reset() alone
        try:
            state_dim, self.has_state = int(np.size(probe.state())), True
        except (NotImplementedError, AttributeError):
            state_dim, self.has_state = sum(int(np.prod(s.shape)) for s in spaces.values()), False
        probe.close()
        self.observation_space = {"agents": spaces,
                                  "state": gym.spaces.Box(-np.inf, np.inf, (state_dim,))}
        # the sizes, read before check_spaces has checked the spaces: each agent's
        # observation's, and its action count (Discrete) or size (Box)
        self.obs_dims = [int(np.prod(s.shape)) for s in spaces.values()]
        self.action_dims = [int(getattr(s, "n", 0)) or int(np.prod(s.shape))
                            for s in self.action_space.values()]
        num_actions = 0 if CONTINUOUS_ACTIONS else max(self.action_dims)
        self.base_avail = np.zeros((len(self.agents), num_actions), dtype=bool)
        for i, n in enumerate(self.action_dims):
            self.base_avail[i, :n] = True
        self.shape = (num_envs, len(self.agents))
        self.obs = np.zeros((*self.shape, max(self.obs_dims)), dtype=np.float32)
        self.state = np.zeros((num_envs, state_dim), dtype=np.float32)
        self.avail = np.zeros((*self.shape, num_actions), dtype=bool)
        self.alive = np.zeros(self.shape, dtype=bool)
        self.returns = np.zeros(self.shape)
        self.lengths = np.zeros(num_envs, dtype=np.int64)

    def _state(self, n, obs):
        """Copy n's state: env.state(), or its agents' observations obs [A, D] joined."""
        if self.has_state:
            return self.envs[n].state()
        return np.concatenate([obs[i, :d] for i, d in enumerate(self.obs_dims)])

    def _observe(self, n, observations, infos):
        """Write copy n's observations, state and available actions for its next step."""
        env = self.envs[n]
        self.obs[n] = 0.0
        self.avail[n] = self.base_avail
        for i, agent in enumerate(self.agents):
            if agent in env.agents:
                self.obs[n, i, :self.obs_dims[i]] = observations[agent]
                mask = infos.get(agent, {}).get("action_mask")
                if mask is not None and not CONTINUOUS_ACTIONS:
                    self.avail[n, i, :len(mask)] = np.asarray(mask, dtype=bool)
        self.alive[n] = [agent in env.agents for agent in self.agents]
        self.state[n] = self._state(n, self.obs[n])

    def reset(self, seed):
        """Reset every copy, each with its own seed drawn from `seed` (with seed + n, run 2's
        copy 0 would replay run 1's copy 1: MPE draws its random start states only at
        resets, so runs of nearby seeds would share their episodes' start states). Returns
        obs, state, avail (Discrete actions only) and active."""
        seeds = np.random.SeedSequence(seed).generate_state(len(self.envs))
        for n, env in enumerate(self.envs):
            self._observe(n, *env.reset(seed=int(seeds[n])))
        self.returns[:] = 0.0
        self.lengths[:] = 0
        seen = ((self.obs, self.state, self.alive) if CONTINUOUS_ACTIONS
                else (self.obs, self.state, self.avail, self.alive))
        return tuple(x.copy() for x in seen)

    def step(self, actions):
        """actions [N, A] (Discrete) or [N, A, d] (Box: each agent's first d_i, in its
        bounds) -> StepResult."""
        rewards = np.zeros(self.shape, dtype=np.float32)
        terminated, truncated = np.zeros(self.shape, dtype=bool), np.zeros(self.shape, dtype=bool)
        final_obs, final_state = np.zeros_like(self.obs), np.zeros_like(self.state)
        ended, episodes = np.zeros(len(self.envs), dtype=bool), []
        for n, env in enumerate(self.envs):
            acting = [(i, agent) for i, agent in enumerate(self.agents) if self.alive[n, i]]
            observations, rew, term, trunc, infos = env.step({
                agent: actions[n, i, :self.action_dims[i]] if CONTINUOUS_ACTIONS
                else int(actions[n, i]) for i, agent in acting})
            step_obs = np.zeros_like(self.obs[n])
            for i, agent in acting:
                step_obs[i, :self.obs_dims[i]] = observations[agent]
                rewards[n, i] = rew[agent]
                terminated[n, i] = term[agent]
                truncated[n, i] = trunc[agent] and not term[agent]
            final_obs[n] = step_obs * (terminated[n] | truncated[n])[:, None]
            self.returns[n] += rewards[n]
            self.lengths[n] += 1
            if terminated[n].any() or truncated[n].any():
                final_state[n] = self._state(n, step_obs)
            if env.agents:
                self._observe(n, observations, infos)
                continue
            ended[n] = True
            episodes.append((n, float(self.returns[n].mean()), int(self.lengths[n])))
            self.returns[n], self.lengths[n] = 0.0, 0
            self._observe(n, *env.reset())
        return StepResult(self.obs.copy(), self.state.copy(), self.avail.copy(),
                          self.alive.copy(), rewards, terminated, truncated, final_obs,
                          final_state, ended, episodes)

    def render(self, n=0):
        return self.envs[n].render()

    def close(self):
        for env in self.envs:
            env.close()


def make_vector_env(env_id, num_envs, video_folder=None, max_cycles=25):
    """The evaluation's environments: num_envs copies of env_id in lock-step with Gymnasium's
    vector API (EvaluationEnvs) at the run's --max-cycles (ENV_FLAGS), each copy's first
    episode recorded into video_folder."""
    return EvaluationEnvs(env_id, num_envs, max_cycles, video_folder)


class EvaluationEnvs(LockstepEnvs):
    """LockstepEnvs as the plumbing's evaluate plays them, with Gymnasium's vector API:
    reset(seed=) -> (obs, info) and step(actions) -> (obs, rewards, terminated, truncated,
    info). info holds the available actions ("avail") and, at a step where copies ended
    an episode, its mean per-agent return as RecordEpisodeStatistics gives one
    (info["episode"]["r"] where info["_episode"]); episode_returns are those so far. With a
    video folder, each copy's first episode is eval-<copy>-episode-0.mp4 there, written at
    close."""

    def __init__(self, env_id, num_envs, max_cycles=25, video_folder=None):
        if video_folder is not None:
            os.environ.setdefault("SDL_VIDEODRIVER", "dummy")  # frames only, no window to open
        super().__init__(env_id, num_envs, max_cycles, "rgb_array" if video_folder else None)
        self.video_folder, self.frames = video_folder, [[] for _ in self.envs]

    @property
    def episode_returns(self):
        return self.returns.mean(-1)

    def reset(self, seed=None, options=None):
        super().reset(seed)
        self.first = np.ones(len(self.envs), dtype=bool)  # in its first episode
        self.frames = [[self.render(n)] if self.video_folder else [] for n in range(len(self.envs))]
        return self.obs.copy(), {"avail": self.avail.copy()}

    def step(self, actions):
        out = super().step(actions)
        if self.video_folder:  # a copy that ended has reset: its frame is the next episode's
            for n in np.flatnonzero(self.first):
                self.frames[n].append(self.render(n))
        returns = np.zeros(len(self.envs))
        for n, episode_return, _ in out.episodes:
            returns[n] = episode_return
        self.first &= ~out.ended
        info = {"avail": out.avail, "episode": {"r": returns}, "_episode": out.ended}
        return out.obs, out.rewards, out.terminated, out.truncated, info

    def close(self):
        super().close()
        if self.video_folder:
            from gymnasium.utils.save_video import save_video  # imports moviepy, only when needed
        for n, frames in enumerate(self.frames if self.video_folder else []):
            save_video(frames[:-1], self.video_folder, fps=10, name_prefix=f"eval-{n}",
                       episode_index=0, episode_trigger=lambda episode: True)

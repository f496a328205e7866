# The plumbing of the scripts that learn from pixels (ppo.py and dqn.py): Atari's and MinAtar's
# packages, wrappers and image conventions. Its one source is this file; plumbing/stamp.py
# writes it below the common block (see plumbing/common.py).


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

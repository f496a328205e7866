# The plumbing of the scripts with presets (PRESETS above their banner): the settings that
# follow the environment's family. Its one source is this file; plumbing/stamp.py writes it
# below the common block, whose prepare calls preset_for and fill_preset.


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

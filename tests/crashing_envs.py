"""A module of the user's own that fails while being imported, for the contract test's
`--env-id crashing_envs:Anything-v0` row: the error is reported as one line."""
raise RuntimeError("a bug in the user's own environment module")

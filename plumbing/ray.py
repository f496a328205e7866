# The plumbing of the scripts whose workers can be Ray actors (impala.py and es.py): Ray
# joined (--ray-address) or started on this machine, with Ctrl-C held back while it starts,
# and stopped however a run that started it ends. Its one source is this file;
# plumbing/stamp.py writes it below the common block (see plumbing/common.py). The script
# has the flag --ray-address and imports ray only inside these functions (Ray is needed
# only where the script uses it).


def starts_ray(args):
    """Whether this run starts a Ray of its own here (no --ray-address, and none running in
    this process yet), which it must then stop however it ends (stop_ray)."""
    import ray
    return args.ray_address is None and not ray.is_initialized()


def stop_ray():
    """Stop the Ray this run started, its processes with it. Ray's own exit handler would
    not run after Ctrl-C (cli ends the process by SIGINT), and its raylet, killed with this
    process, would leave its dashboard and runtime-env agents running, orphaned, a minute."""
    import ray
    ray.shutdown()


def check_reachable(address):
    """Fail at once if a host:port address takes no connection (Ray itself would retry it
    for minutes); None, "auto" and the like are Ray's to resolve."""
    host, _, port = (address or "").removeprefix("ray://").rpartition(":")
    if not host or not port.isdigit():
        return
    try:
        socket.create_connection((host, int(port)), timeout=10).close()
    except OSError as e:
        fail(f"cannot reach the Ray cluster at {address}: {e.strerror or e}; start it with "
             "`ray start --head --port=6379` on the head machine")


def start_ray(address):
    """Join the Ray cluster at address, or start Ray on this machine (None), unless this
    process already has; returns the cluster's CPUs. Says so first: Ray takes seconds to
    start, and Ctrl-C meanwhile is held back until it has (ctrl_c_held_back)."""
    import ray
    check_reachable(address)
    if not ray.is_initialized():
        if address is None:  # Ray runs its workers at niceness 15, below any other busy
            # process: beside one on 2 cores an actor took 48 s to import torch (2.5 s at 0)
            os.environ.setdefault("RAY_worker_niceness", "0")
        print(f"{SCRIPT}: " + (f"joining Ray at {address} ..." if address else "starting Ray ..."),
              flush=True)
        try:
            with ctrl_c_held_back(active=address is None):
                # "local": a Ray of this run's own, even where another is running on the
                # machine (address None would join that one, or RAY_ADDRESS's)
                ray.init(address=address or "local", include_dashboard=False,
                         log_to_driver=False, logging_level="ERROR")
        except Exception as e:  # Ray raises a bare Exception when its node starts too slowly
            if address is None:
                fail(f"cannot start Ray: {str(e).strip().splitlines()[0]} (on a busy machine, "
                     "try again)")
            fail(f"cannot join Ray at {address}: {str(e).strip().splitlines()[0]} (is `ray start` "
                 "running there? If its cluster uses token authentication, set RAY_AUTH_MODE=token"
                 " and copy its ~/.ray/auth_token here)")
    cpus = int(ray.cluster_resources().get("CPU", 0))
    if cpus < 1:
        fail("the Ray cluster has no CPU to run on; start it with some (ray start --num-cpus)")
    return cpus


@contextlib.contextmanager
def ctrl_c_held_back(active=True):
    """Hold Ctrl-C back while Ray starts (active) and raise its KeyboardInterrupt once it has
    started: interrupted inside ray.init, Ray leaves its processes half-started, out of
    ray.shutdown's reach (its dashboard and runtime-env agents lived on, orphaned, for about
    a minute), where once started it stops them all (main's stop_ray). A second Ctrl-C
    raises at once. Only in the main thread under Python's own SIGINT handler (not where
    SIGINT is ignored, as in a background job)."""
    if (not active or signal.getsignal(signal.SIGINT) is not signal.default_int_handler
            or threading.current_thread() is not threading.main_thread()):
        yield
        return
    pressed = []

    def hold(signum, frame):
        if pressed:
            raise KeyboardInterrupt
        pressed.append(signum)
        print(f"{SCRIPT}: Ctrl-C: stopping once Ray has started, in a few seconds (Ctrl-C again "
              "stops at once, and Ray's processes can outlive the run by a minute)", flush=True)

    signal.signal(signal.SIGINT, hold)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, signal.default_int_handler)
    if pressed:
        raise KeyboardInterrupt

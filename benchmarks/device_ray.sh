#!/usr/bin/env bash
# benchmark.py's Ray backend on one bigger machine (issue 85, item 5): a Ray of 16 CPUs and
# its GPU on this machine, benchmark.py --ray over 16 seeds of five CPU tasks of the table
# (their commands unchanged) and of one short image task on the GPU (an eighth each, eight at
# once), then runs per hour against the two-core machine's rows of benchmarks/results.json.
# Made for a machine without internet whose Python has torch and the common scientific stack:
# what it lacks comes as wheels in .whl/r85/ (installed into a folder of its own, only where
# the import fails) and Ray as .whl/ray-trim.zip (Ray 2.60.0's cp312 wheel, 79 MB, is too big
# to carry; the zip is its installed files without the Java jar, the dashboard's web client,
# data, serve, train, tune, rllib and llm). Without a working Ray it falls back to
# --jobs 16 and says so. Writes everything under $OUT (default /tmp/device_ray).
#
#   OUT=/tmp/device_ray bash benchmarks/device_ray.sh            # about 5 minutes on 16 cores
#   SEEDS=8 bash benchmarks/device_ray.sh                         # fewer seeds, shorter
#   SEEDS=2 CPU_TASKS=qlearning-FrozenLake-v1 bash benchmarks/device_ray.sh   # a smoke test
#   IMAGE=0 ...                                                   # the CPU tasks alone
set -u
cd "$(dirname "$0")/.."
OUT=${OUT:-/tmp/device_ray}
SEEDS=${SEEDS:-16}
LIMIT_S=${LIMIT_S:-420}
mkdir -p "$OUT"
SITE=$(mktemp -d /tmp/plainrl-site.XXXX)
export PYTHONPATH="$SITE${PYTHONPATH:+:$PYTHONPATH}" PLAINRL_CURVE=0 RAY_worker_niceness=0
began=$(date +%s)
echo "device_ray.sh: $(nproc) cores, $(python3 --version 2>&1), load $(cut -d' ' -f1 /proc/loadavg)"
nvidia-smi --query-gpu=name,memory.total --format=csv,noheader 2>/dev/null | head -1

# the wheels of what this Python lacks (module: wheel name), into $SITE, not over its own
for pair in gymnasium:gymnasium farama_notifications:farama_notifications tyro:tyro \
    docstring_parser:docstring_parser typeguard:typeguard shtab:shtab \
    typing_extensions:typing_extensions seaborn:seaborn arch:arch rliable:rliable \
    minatar:MinAtar click:click filelock:filelock msgpack:msgpack yaml:pyyaml \
    google.protobuf:protobuf requests:requests urllib3:urllib3 certifi:certifi \
    charset_normalizer:charset_normalizer idna:idna packaging:packaging jsonschema:jsonschema \
    jsonschema_specifications:jsonschema_specifications referencing:referencing \
    rpds:rpds_py attrs:attrs; do
  module=${pair%%:*} wheel=${pair##*:}
  if ! python3 -c "import $module" 2>/dev/null; then
    found=$(ls .whl/r85/${wheel}-*.whl 2>/dev/null | head -1)
    if [ -n "$found" ]; then
      python3 -m pip install -q --no-index --no-deps --target "$SITE" "$found" 2>&1 | tail -1
      echo "installed $(basename "$found") (this Python had no $module)"
    else
      echo "missing $module, and no wheel of it in .whl/r85"
    fi
  fi
done
if ! python3 -c "import ray" 2>/dev/null && [ -f .whl/ray-trim.zip ]; then
  python3 -c "import zipfile, sys; zipfile.ZipFile('.whl/ray-trim.zip').extractall(sys.argv[1])" "$SITE"
  chmod +x "$SITE"/ray/core/src/ray/raylet/raylet "$SITE"/ray/core/src/ray/gcs/gcs_server 2>/dev/null
  echo "Ray from .whl/ray-trim.zip"
fi
missing=$(python3 - <<'EOF'
import importlib
need = ["torch", "numpy", "gymnasium", "tyro", "tensorboard", "matplotlib", "scipy", "pandas",
        "statsmodels", "seaborn", "arch", "rliable", "minatar"]
print(" ".join(m for m in need if importlib.util.find_spec(m) is None))
EOF
)
echo "setup: $(( $(date +%s) - began )) s${missing:+; still missing: $missing}"

# a Ray of its own (its own temporary folder and port), stopped by its processes' ids at the
# end: `ray stop` would stop every Ray of the machine
backend=jobs RAYTMP=/tmp/pr85-$$ ADDRESS=127.0.0.1:6390
if python3 -c "import ray" 2>/dev/null; then
  if python3 -m ray.scripts.scripts start --head --port 6390 --node-ip-address 127.0.0.1 \
      --temp-dir "$RAYTMP" --num-cpus 16 --num-gpus "$(nvidia-smi -L 2>/dev/null | wc -l)" \
      --include-dashboard=false --disable-usage-stats > "$OUT/ray_start.log" 2>&1; then
    backend=ray
  else
    echo "ray start failed (its last line: $(tail -1 "$OUT/ray_start.log")); --jobs 16 instead"
  fi
else
  echo "no Ray here; --jobs 16 instead"
fi

ADDRESS=$ADDRESS BACKEND=$backend SEEDS=$SEEDS OUT=$OUT timeout "$LIMIT_S" python3 - <<'EOF'
# the driver: benchmark.py's main with one short image task added to its table
import importlib.util, json, os, statistics, sys, time, types
sys.path.insert(0, os.getcwd())
try:  # the table's intervals need rliable (and arch 7.2 needs pandas 2); runs do not
    import rliable.library  # noqa: F401
except Exception as error:  # the device's pandas 3 breaks arch 7.2 at import
    stub = types.ModuleType("rliable")
    stub.library = stub.metrics = stub.plot_utils = stub
    sys.modules["rliable"] = stub
    print(f"rliable does not import ({type(error).__name__}): results.md without the IQM "
          "intervals", flush=True)
import benchmark
if "rliable" in sys.modules and not hasattr(sys.modules["rliable"], "__file__"):
    benchmark.iqm_interval = lambda values, seed=0: None
    benchmark.field_lines = lambda results, out: []
ray, out, seeds = os.environ["BACKEND"] == "ray", os.environ["OUT"], int(os.environ["SEEDS"])
CPU = os.environ.get("CPU_TASKS", "qlearning-FrozenLake-v1 qlearning-Taxi-v4 ddpg_td3-Pendulum-v1 "
                     "sac-Pendulum-v1 ppo-CartPole-v1").split()
image = benchmark.Task("ppo", "MinAtar/Breakout-v1", 5, "device check: 50k steps on the GPU",
                       benchmark.with_values(benchmark.PPO_MINATAR, ["--learning-rate", "2e-3",
                       "--total-timesteps", "50000"]) + ["--cuda"], label="device-50k", window=100)
tasks = list(CPU)
import torch
if importlib.util.find_spec("minatar") and torch.cuda.is_available() and os.environ.get("IMAGE", "1") != "0":
    benchmark.TASKS["ppo"].append(image)
    tasks.append(image.name)
else:
    print("no minatar or no GPU: the CPU tasks only", flush=True)
args = benchmark.Args(scripts=sorted({n.split("-")[0] for n in tasks}), tasks=tasks, seeds=seeds,
                      first_seed=101, jobs=16, out=out, ray=os.environ["ADDRESS"] if ray else "",
                      image_gpu=0.125 if ray and image.name in tasks else 0.0)
start = time.time()
try:
    benchmark.main(args)
except SystemExit as e:
    print(f"benchmark.py exited with status {e.code}", flush=True)
wall = time.time() - start
mine = json.load(open(os.path.join(out, "results.json")))
base = json.load(open(os.path.join(benchmark.ROOT, "benchmarks", "results.json")))
done = sum(len(mine[t]["runs"]) for t in tasks if t in mine)
cpu_here = [statistics.median(r["process_s"] for r in mine[t]["runs"]) for t in CPU if t in mine]
cpu_two = [statistics.median(r["process_s"] for r in base[t]["runs"]) for t in CPU if t in mine]
jobs_two = {base[t]["jobs"] for t in CPU}
print(f"\n{'Ray' if ray else '--jobs 16'}: {done} runs in {wall:.0f} s, {3600 * done / wall:.0f} "
      f"runs per hour end to end (the image task's included)")
if cpu_here:
    here, two = 16 * 3600 / statistics.mean(cpu_here), 2 * 3600 / statistics.mean(cpu_two)
    print(f"the {len(cpu_here)} CPU tasks' median process seconds here {[round(x, 1) for x in cpu_here]}, "
          f"on the two-core machine {[round(x, 1) for x in cpu_two]} (--jobs {jobs_two})")
    print(f"runs per hour of this mix, 16 at a time here: {here:.0f}; 2 at a time on the "
          f"two-core machine: {two:.0f}; {here / two:.1f}x")
print(f"load after: {os.getloadavg()[0]:.1f}")
EOF
status=$?
if [ "$backend" = ray ]; then
  pids=$(pgrep -f -- "$RAYTMP"); [ -n "$pids" ] && kill $pids 2>/dev/null; sleep 3
  pids=$(pgrep -f -- "$RAYTMP"); [ -n "$pids" ] && kill -9 $pids 2>/dev/null
fi
echo "device_ray.sh: driver exit status $status, $(( $(date +%s) - began )) s in all; results in $OUT"

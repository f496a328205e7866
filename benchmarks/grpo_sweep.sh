#!/usr/bin/env bash
# grpo.py's settings swept on tuning seeds, many runs at once (issue 84): each line of
# CONFIG_FILE is name|flags; every (config, seed) runs `python grpo.py --seed S --eval-every
# 12800 <flags>`, P at a time, one thread each, none past the TOTAL seconds of the whole;
# then a summary per config: the warm start's held-out accuracy, the evaluations, the end.
# Made for the lent 16-core machine without internet (gymnasium and tyro from .whl/r85 where
# its Python lacks them); the rounds of results.md's "grpo.py" notes:
#   CONFIG_FILE=benchmarks/grpo_sweep/round1.txt OUT=/tmp/gs bash benchmarks/grpo_sweep.sh
#   EXTRA_SEEDS="6 7 8 9 10" EXTRA_NAME=base610 EXTRA_FLAGS="--sft-steps 2000 --sft-problems 9000 --num-prompts 16" \
#     CONFIG_FILE=benchmarks/grpo_sweep/round3.txt bash benchmarks/grpo_sweep.sh
set -u
OUT=${OUT:-/tmp/grpo_sweep}; LIMIT=${LIMIT:-470}; P=${P:-16}
mkdir -p "$OUT/runs"
SITE=$(mktemp -d /tmp/site.XXXX); export PYTHONPATH="$SITE" PLAINRL_CURVE=0 OMP_NUM_THREADS=1
for w in gymnasium farama_notifications tyro docstring_parser typeguard shtab typing_extensions; do
  python3 -c "import $w" 2>/dev/null || python3 -m pip install -q --no-index --no-deps --target "$SITE" .whl/r85/${w}-*.whl
done
python3 -c "import gymnasium, tyro, tensorboard, torch; print('torch', torch.__version__)" || exit 3
echo "cores $(nproc) load $(cut -d' ' -f1 /proc/loadavg)"
# name|flags, the costliest first
mapfile -t CONFIGS < "${CONFIG_FILE:?a file of name|flags lines, the costliest first}"
jobs=$OUT/jobs.txt; : > "$jobs"
for s in ${EXTRA_SEEDS:-}; do echo "${EXTRA_NAME}|$s|${EXTRA_FLAGS}" >> "$jobs"; done
for c in "${CONFIGS[@]}"; do for s in ${SEEDS:-1 2 3 4 5}; do echo "${c%%|*}|$s|${c#*|}" >> "$jobs"; done; done
began=$(date +%s); export DEADLINE=$(( began + ${TOTAL:-500} ))
run1() { IFS='|' read -r name seed flags <<< "$1"
  d=$OUT/runs/$name; mkdir -p "$d"
  t0=$(date +%s)
  left=$(( DEADLINE - $(date +%s) )); [ $left -lt 5 ] && { echo "rc skipped" > "$d/seed$seed.log"; return; }
  lim=$(( left < LIMIT ? left : LIMIT ))
  timeout $lim python3 grpo.py --seed "$seed" --eval-every 12800 --no-tensorboard --no-curve --output-dir "$d" $flags > "$d/seed$seed.log" 2>&1
  echo "rc $? secs $(( $(date +%s) - t0 ))" >> "$d/seed$seed.log"
  find "$d" -name episodes.csv -delete; find "$d" -name '*.pt' -delete; }
export -f run1; export OUT LIMIT
tr '\n' '\0' < "$jobs" | xargs -0 -P "$P" -I{} bash -c 'run1 "$@"' _ {}
echo "all done in $(( $(date +%s) - began )) s, load $(cut -d' ' -f1 /proc/loadavg)"
python3 - "$OUT" <<'PY'
import csv, glob, json, os, sys, re
out = sys.argv[1]
for d in sorted(glob.glob(f"{out}/runs/*")):
    rows = []
    for log in sorted(glob.glob(f"{d}/seed*.log")):
        seed = re.findall(r"seed(\d+)", log)[-1]
        run = [r for r in glob.glob(f"{d}/*__{seed}__*")]
        ws = ev = None; evals = []
        if run:
            r = run[0]
            if os.path.exists(f"{r}/warm_start.csv"):
                ws = float(list(csv.DictReader(open(f"{r}/warm_start.csv")))[0]["warm_start_accuracy"])
            if os.path.exists(f"{r}/evaluations.csv"):
                evals = [round(float(x["eval_return_mean"]), 3) for x in csv.DictReader(open(f"{r}/evaluations.csv"))]
            if os.path.exists(f"{r}/summary.json"):
                s = json.load(open(f"{r}/summary.json")); ev = s.get("eval_return_mean")
        tail = open(log).read().strip().splitlines()[-1]
        rows.append((seed, ws, ev, evals, tail))
    held = sum(1 for r in rows if r[2] is not None and r[2] >= 0.95)
    print(f"== {os.path.basename(d)}: {held}/{len(rows)} end >= 0.95")
    for r in rows: print("  seed", r[0], "warm", r[1], "end", r[2], "evals", r[3], r[4])
PY

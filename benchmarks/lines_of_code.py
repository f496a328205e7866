"""results.md's "Lines of code": each script's lines above and below its plumbing banner, the
shared block's own length, the distinct nonblank lines below all the banners, and the
tests' lines beside the scripts'.

    python benchmarks/lines_of_code.py [ROOT]     (ROOT: a checkout, default here)

Code lines are lines that are neither blank nor only a comment (docstrings count).
"""
import glob
import os
import statistics
import sys

SCRIPTS = ["qlearning", "dqn", "pqn", "vpg", "trpo", "ppo", "ppo_masked", "ppod", "ppo_lstm",
           "ppo_rnd", "ddpg_td3", "sac", "crossq", "es", "impala", "mappo", "matd3", "grpo", "rlhf"]


def code_lines(lines):
    return sum(1 for line in lines if line.strip() and not line.strip().startswith("#"))


def main(root):
    rows, below_all = [], []
    for name in SCRIPTS:
        path = os.path.join(root, f"{name}.py")
        if not os.path.exists(path):
            continue
        lines = open(path).read().splitlines()
        banner = next(i for i, line in enumerate(lines) if line.startswith("# Plumbing"))
        above, below = lines[:banner], lines[banner:]
        below_all += [line.rstrip() for line in below if line.strip()]
        rows.append((name, len(lines), len(above), len(below), code_lines(above), code_lines(below)))
    print("| script | lines | above the banner | below | code lines above | code lines below |")
    print("| --- | --- | --- | --- | --- | --- |")
    for row in rows:
        print("| " + " | ".join(f"{v:,}" if isinstance(v, int) else f"`{v}.py`" for v in row) + " |")
    totals = [sum(r[i] for r in rows) for i in range(1, 6)]
    print("| all | " + " | ".join(f"{t:,}" for t in totals) + " |")
    print(f"\nmedian lines per script: {statistics.median(r[1] for r in rows):,.0f}; "
          f"below the banners: {len(below_all):,} nonblank lines, {len(set(below_all)):,} distinct")
    for source in sorted(glob.glob(os.path.join(root, "plumbing", "*.py"))):
        text = open(source).read().splitlines()
        print(f"{os.path.relpath(source, root)}: {len(text):,} lines, {code_lines(text):,} code lines")
    tests = glob.glob(os.path.join(root, "tests", "*.py"))
    print(f"tests/: {sum(len(open(t).read().splitlines()) for t in tests):,} lines in {len(tests)} files; "
          f"scripts: {totals[0]:,} lines")


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else ".")

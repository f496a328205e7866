"""results.md's "Lines of code": each script's story (the lines above its plumbing banner,
which a student reads) and its plumbing (below), the length of train() and of the module
docstring, the shared block's own length (between its markers), the names the story calls
that only the lines below define, the distinct nonblank lines below all the banners, and the
tests' lines beside the scripts'.

    python benchmarks/lines_of_code.py [ROOT]     (ROOT: a checkout, default here)

Nonblank lines are every line a reader meets, comments and docstrings included; code lines
are lines that are neither blank nor only a comment (docstrings count). CONTRIBUTING.md's
bounds on the story (BOUNDS) are held by tests/test_lines_of_code.py.
"""
import ast
import glob
import os
import statistics
import sys

SCRIPTS = ["qlearning", "dqn", "pqn", "vpg", "trpo", "ppo", "ppo_masked", "ppod", "ppo_lstm",
           "ppo_rnd", "ddpg_td3", "sac", "crossq", "es", "impala", "mappo", "matd3", "grpo", "rlhf"]
# CONTRIBUTING.md, "One file, read top to bottom" (issue 102), and the harness (issue 108):
# the stamped common block between its markers (blank lines included), the nonblank lines
# below all the banners, the median whole file, and the names each story calls that only the
# lines below define, held where they stand (issue 108's goals: a block of 400 lines, 10,000
# below the banners, a median file of 1,100; results.md, "Lines of code")
BOUNDS = {"story": 550, "story_median": 480, "train": 100, "docstring": 40, "commands": 3,
          "block": 537, "below_banners": 12_601, "file_median": 1_264}
NAMES_BELOW = {"ppo.py": 8, "grpo.py": 13, "rlhf.py": 15}
# The language road's two stories, over the bound and held where they stand: each holds a
# transformer and its sampler, a text task, a supervised warm start and RL; rlhf.py a reward
# model learned from pairs and DPO besides (results.md, "Lines of code")
STORY_EXCEPTIONS = {"grpo.py": 607, "rlhf.py": 729}


def code_lines(lines):
    return sum(1 for line in lines if line.strip() and not line.strip().startswith("#"))


def nonblank(lines):
    return sum(1 for line in lines if line.strip())


def names_from_below(text, banner):
    """The names the lines above the banner use that only the lines below define: the
    module-level functions, classes and constants defined below (pixels.py's, the block's,
    the hooks) that the story loads where no enclosing function binds the name itself, and
    the attributes of `run` it uses (run.step, run.update, ...): what a reader of the story
    must guess."""
    lines = text.splitlines()
    above, below = "\n".join(lines[:banner]), "\n".join(lines[banner:])
    defined, top = set(), set()
    for tree, names in ((ast.parse(below), defined), (ast.parse(above), top)):
        for node in tree.body:
            if isinstance(node, (ast.FunctionDef, ast.ClassDef)):
                names.add(node.name)
            elif isinstance(node, ast.Assign):
                names |= {t.id for t in node.targets if isinstance(t, ast.Name)}
            elif isinstance(node, (ast.Import, ast.ImportFrom)):
                names |= {(a.asname or a.name).split(".")[0] for a in node.names}
    used = set()

    def visit(node, local):
        if isinstance(node, (ast.FunctionDef, ast.Lambda)):
            local = local | {a.arg for a in ast.walk(node.args) if isinstance(a, ast.arg)} | {
                n.id for n in ast.walk(node) if isinstance(n, ast.Name)
                and not isinstance(n.ctx, ast.Load)}
        if (isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load)
                and node.id in defined and node.id not in top | local):
            used.add(node.id)
        elif (isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name)
              and node.value.id == "run"):
            used.add(f"run.{node.attr}")
        for child in ast.iter_child_nodes(node):
            visit(child, local)
    visit(ast.parse(above), frozenset())
    return sorted(used)


def block_lines(lines, name="common"):
    """The lines between a stamped block's markers (0 where the script has none)."""
    start = [i for i, line in enumerate(lines) if line.startswith(f"# Stamped from plainrl's plumbing/{name}.py")]
    end = [i for i, line in enumerate(lines) if line == f"# End of plumbing/{name}.py"]
    return end[0] - start[0] - 1 if start and end else 0


def measure(path):
    """One script's counts: lines, the story above the banner (nonblank and code lines), the
    plumbing below, train()'s lines (def to its last line), the module docstring's lines and
    its run commands (lines holding `python <script>.py`, continued lines counted once,
    `--help` not counted)."""
    text = open(path).read()
    lines = text.splitlines()
    banner = next(i for i, line in enumerate(lines) if line.startswith("# Plumbing"))
    above, below = lines[:banner], lines[banner:]
    tree = ast.parse(text)
    train = next(n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == "train")
    doc = tree.body[0]
    name = os.path.basename(path)
    docstring = ast.get_docstring(tree, clean=False).replace("\\\n", " ")
    return {"script": name, "lines": len(lines), "above": len(above), "below": len(below),
            "story": nonblank(above), "code_above": code_lines(above),
            "code_below": code_lines(below), "train": train.end_lineno - train.lineno + 1,
            "docstring": doc.end_lineno - doc.lineno + 1,
            "commands": sum(f"python {name}" in line and "--help" not in line
                            for line in docstring.splitlines()),
            "block": block_lines(lines), "names": names_from_below(text, banner),
            "below_lines": [line.rstrip() for line in below if line.strip()]}


def measure_all(root):
    return [measure(os.path.join(root, f"{name}.py")) for name in SCRIPTS
            if os.path.exists(os.path.join(root, f"{name}.py"))]


def main(root):
    rows = measure_all(root)
    columns = ["lines", "story", "code_above", "train", "docstring", "below", "code_below",
               "block", "n_names"]
    for row in rows:
        row["n_names"] = len(row["names"])
    print("| script | lines | nonblank lines above the banner | code lines above | train() | "
          "module docstring | lines below | code lines below | common block | names from below |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    for row in rows:
        print(f"| `{row['script']}` | " + " | ".join(f"{row[c]:,}" for c in columns) + " |")
    print("| median | " + " | ".join(f"{statistics.median(r[c] for r in rows):,.0f}"
                                    for c in columns) + " |")
    print("| all | " + " | ".join(f"{sum(r[c] for r in rows):,}" for c in columns) + " |")
    below_all = [line for r in rows for line in r["below_lines"]]
    print(f"\nbelow the banners: {len(below_all):,} nonblank lines, {len(set(below_all)):,} distinct")
    for row in rows:
        print(f"{row['script']}'s names from below: {', '.join(row['names'])}")
    for source in sorted(glob.glob(os.path.join(root, "plumbing", "*.py"))):
        text = open(source).read().splitlines()
        print(f"{os.path.relpath(source, root)}: {len(text):,} lines, {code_lines(text):,} code lines")
    tests = glob.glob(os.path.join(root, "tests", "*.py"))
    print(f"tests/: {sum(len(open(t).read().splitlines()) for t in tests):,} lines in {len(tests)} files; "
          f"scripts: {sum(r['lines'] for r in rows):,} lines")


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else ".")

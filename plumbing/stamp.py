"""Stamp the shared plumbing into every script: python plumbing/stamp.py [--check]

Each file of this folder but this one is the one source of a block of plumbing; its first
comment lines, up to the first blank line, are notes on the source, not stamped. A script
holds a block between the line "# Stamped from plumbing/<name>.py ..." and the line
"# End of plumbing/<name>.py"; this command rewrites what lies between them from the
source, and --check only says which scripts differ (exit status 1), as
tests/test_plumbing.py does. A script listed in NUMPY_ONLY gets the NumPy-only variant:
the source's "# [torch]" ... "# [end]" regions left out and its "# [numpy]" ones kept;
every other script the reverse. The marker lines themselves are never stamped.
"""
import glob
import os
import re
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
NUMPY_ONLY = {"qlearning.py"}
START = "# Stamped from plainrl's plumbing/{name}.py by its stamp.py: edit it there, not here."
END = "# End of plumbing/{name}.py"


def variant(source, numpy_only):
    """The source's lines for one variant, without the marker lines."""
    keep, out = True, []
    for line in source.splitlines(keepends=True):
        marker = line.strip()
        if marker in ("# [torch]", "# [numpy]"):
            keep = (marker == "# [numpy]") == numpy_only
        elif marker == "# [end]":
            keep = True
        elif keep:
            out.append(line)
    return re.sub(r"\n{4,}", "\n\n\n", "".join(out))  # two blank lines where a region was


def stamped(text, script):
    """The script's text with every stamped block rewritten from its source."""
    for path in sorted(glob.glob(os.path.join(HERE, "*.py"))):
        name = os.path.splitext(os.path.basename(path))[0]
        if name == "stamp":
            continue
        start, end = START.format(name=name), END.format(name=name)
        pattern = re.compile(rf"# Stamped from (plainrl's )?plumbing/{name}\.py[^\n]*\n.*?"
                             + re.escape(end), re.S)
        with open(path) as f:
            source = f.read().partition("\n\n")[2]  # without the notes on the source
        block = variant(source, script in NUMPY_ONLY).strip("\n")
        text = pattern.sub(lambda _: f"{start}\n{block}\n{end}", text)
    return text


def scripts():
    """The repository's scripts that hold a stamped block."""
    return [p for p in sorted(glob.glob(os.path.join(ROOT, "*.py")))
            if re.search(r"^# Stamped from (plainrl's )?plumbing/", open(p).read(), re.M)]


def main(check=False):
    differ = []
    for path in scripts():
        with open(path) as f:
            text = f.read()
        new = stamped(text, os.path.basename(path))
        if new != text:
            differ.append(os.path.basename(path))
            if not check:
                with open(path, "w") as f:
                    f.write(new)
    verb = "differ from plumbing/" if check else "stamped:"
    print(f"{verb} {', '.join(differ) or 'none'}")
    return 1 if check and differ else 0


if __name__ == "__main__":
    sys.exit(main(check="--check" in sys.argv[1:]))

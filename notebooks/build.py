"""Build the classroom notebooks (.ipynb) from their text sources, or check them.

Each notebook's source is a Python file in jupytext's "percent" format beside it,
notebooks/NN_<road>.py: cells start at `# %%` lines, Markdown cells at `# %% [markdown]`.
The source is what one edits and what a diff shows; the .ipynb is generated from it, with no
outputs, so that Jupyter and Colab open it. tests/test_notebooks.py fails when an .ipynb
differs from what its source gives.

Run:
    python notebooks/build.py           # write every notebooks/NN_*.ipynb from its source
    python notebooks/build.py --check   # write nothing; exit 1 naming each .ipynb out of date
"""
import glob
import hashlib
import os
import sys

import jupytext
import nbformat

HERE = os.path.dirname(os.path.abspath(__file__))

METADATA = {
    "kernelspec": {"display_name": "Python 3", "language": "python", "name": "python3"},
    "language_info": {"name": "python"},
    "colab": {"provenance": []},
}
"""the notebook's whole metadata: jupytext's own (its version, the source's format) is left
out, so that the .ipynb changes only when a cell does"""


def sources():
    """The notebooks' text sources, in their order: notebooks/NN_*.py."""
    return sorted(glob.glob(os.path.join(HERE, "[0-9][0-9]_*.py")))


def render(source_path):
    """The .ipynb text that a source gives: its cells, no outputs, fixed metadata, and each
    cell's id the first 8 hex digits of its text's SHA-1 (a changed cell changes its own id
    only; a repeated text gets -2, -3, ...)."""
    notebook = jupytext.read(source_path, fmt="py:percent")
    notebook.metadata = dict(METADATA)
    seen = {}
    for cell in notebook.cells:
        digest = hashlib.sha1(f"{cell.cell_type}\n{cell.source}".encode()).hexdigest()[:8]
        seen[digest] = seen.get(digest, 0) + 1
        cell.id = digest if seen[digest] == 1 else f"{digest}-{seen[digest]}"
        if cell.cell_type == "code":
            cell.outputs, cell.execution_count = [], None
        # jupytext keeps a cell's own options (tags) in its metadata; nothing else
        cell.metadata = {key: value for key, value in cell.metadata.items() if key == "tags"}
    notebook.nbformat, notebook.nbformat_minor = 4, 5
    nbformat.validate(notebook)
    return nbformat.writes(notebook) + "\n"  # Jupyter's own layout: a list of lines per cell


def notebook_path(source_path):
    return source_path[:-3] + ".ipynb"


def main(argv):
    check = argv == ["--check"]
    if argv and not check:
        sys.exit("usage: python notebooks/build.py [--check]")
    stale = []
    for source in sources():
        target, text = notebook_path(source), render(source)
        current = open(target, encoding="utf-8").read() if os.path.exists(target) else None
        if current == text:
            continue
        stale.append(os.path.relpath(target))
        if not check:
            with open(target, "w", encoding="utf-8") as f:
                f.write(text)
    if check and stale:
        sys.exit("build.py: out of date with its source (run python notebooks/build.py): "
                 + ", ".join(stale))
    if not check:
        print(f"build.py: {len(stale)} of {len(sources())} notebooks written")


if __name__ == "__main__":
    main(sys.argv[1:])

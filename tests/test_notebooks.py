"""The classroom notebooks (notebooks/, docs/guide/notebooks.md): each .ipynb is what its text
source gives (python notebooks/build.py), holds no outputs, shares its setup and helpers with
the others, and runs top to bottom in a real kernel with its budgets shrunk (SMOKE = True)."""
import importlib.util
import json
import os
import re
import time

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
FOLDER = os.path.join(ROOT, "notebooks")
SOURCES = sorted(name for name in os.listdir(FOLDER) if re.fullmatch(r"\d\d_\w+\.py", name))
NAMES = [name[:-3] for name in SOURCES]

SMOKE_LIMIT_S = 180
"""a shrunk notebook's whole run, kernel start included, is 51-95 s with `pytest -n 2` on two
cores under a load of 9 (docs/guide/notebooks.md): most of it the start of each script's
process (importing PyTorch) and of the exercise check's pytest. A cell or a notebook that runs
past this has hung"""


def build():
    """notebooks/build.py as a module."""
    spec = importlib.util.spec_from_file_location("notebooks_build", os.path.join(FOLDER, "build.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def read(name):
    with open(os.path.join(FOLDER, f"{name}.ipynb"), encoding="utf-8") as f:
        return json.load(f)


def code_cells(name):
    return ["".join(cell["source"]) for cell in read(name)["cells"] if cell["cell_type"] == "code"]


def test_there_is_a_notebook_per_road_each_with_its_source():
    assert len(NAMES) == 6
    assert sorted(n for n in os.listdir(FOLDER) if n.endswith(".ipynb")) == [f"{n}.ipynb" for n in NAMES]


@pytest.mark.parametrize("name", NAMES)
def test_the_notebook_is_what_its_source_gives(name):
    pytest.importorskip("jupytext", reason="pip install jupytext==1.19.6 (requirements.txt)")
    module = build()
    with open(os.path.join(FOLDER, f"{name}.ipynb"), encoding="utf-8") as f:
        assert f.read() == module.render(os.path.join(FOLDER, f"{name}.py")), (
            f"notebooks/{name}.ipynb differs from notebooks/{name}.py: python notebooks/build.py")


@pytest.mark.parametrize("name", NAMES)
def test_the_notebook_holds_no_outputs(name):
    notebook = read(name)
    for cell in notebook["cells"]:
        assert cell.get("outputs", []) == [] and cell.get("execution_count") is None, cell["source"]
        assert set(cell["metadata"]) <= {"tags"}
    assert set(notebook["metadata"]) == {"kernelspec", "language_info", "colab"}


def test_the_notebooks_share_their_setup_and_helpers():
    """The first code cell (setup) differs only in PACKAGES; the third (helpers) not at all;
    the second (parameters) is tagged and has SMOKE and OUT."""
    setups = {re.sub(r"PACKAGES = \[.*?\]\n", "", code_cells(n)[0], flags=re.S) for n in NAMES}
    assert len(setups) == 1
    assert len({code_cells(n)[2] for n in NAMES}) == 1
    for name in NAMES:
        cell = [c for c in read(name)["cells"] if c["cell_type"] == "code"][1]
        assert cell["metadata"] == {"tags": ["parameters"]}
        assert re.search(r"^SMOKE = False$", "".join(cell["source"]), re.M)
        assert re.search(r"^OUT = ", "".join(cell["source"]), re.M)


def execute(path, out, timeout):
    """Run the notebook at path in a fresh python3 kernel, in the notebooks folder, with
    SMOKE = True and OUT = out set in a cell after its parameters cell; returns the seconds."""
    nbformat = pytest.importorskip("nbformat", reason="pip install nbformat==5.11.1")
    nbclient = pytest.importorskip("nbclient", reason="pip install nbclient==0.11.0 ipykernel==7.4.0")
    notebook = nbformat.read(path, as_version=4)
    at = next(i for i, c in enumerate(notebook.cells) if "parameters" in c.metadata.get("tags", []))
    notebook.cells.insert(at + 1, nbformat.v4.new_code_cell(f"SMOKE = True\nOUT = {str(out)!r}"))
    client = nbclient.NotebookClient(notebook, timeout=timeout, kernel_name="python3",
                                     resources={"metadata": {"path": FOLDER}})
    start = time.perf_counter()
    try:
        client.execute()
    except nbclient.exceptions.CellExecutionError as error:
        message = re.sub(r"\x1b\[[0-9;]*m", "", str(error))  # IPython's colours
        pytest.fail(f"{os.path.basename(path)}: a cell failed:\n{message}", pytrace=False)
    except nbclient.exceptions.CellTimeoutError as error:
        pytest.fail(f"{os.path.basename(path)}: a cell ran past {timeout} s:\n{error}", pytrace=False)
    return time.perf_counter() - start


# the many-workers notebook starts Ray (impala.py): it runs on the worker of the Ray tests
# (conftest.py's group "ray"), so that two Rays never start at once; the others spread
@pytest.mark.parametrize("name", [pytest.param(n, marks=pytest.mark.xdist_group("ray"))
                                  if "impala" in n else n for n in NAMES])
def test_the_notebook_runs_top_to_bottom_shrunk(name, tmp_path):
    seconds = execute(os.path.join(FOLDER, f"{name}.ipynb"), tmp_path, timeout=SMOKE_LIMIT_S)
    assert seconds < SMOKE_LIMIT_S, f"{name}: {seconds:.0f} s shrunk"
    assert list(tmp_path.glob("*/curve.png")) or list(tmp_path.glob("*/plot.png"))
    assert list(tmp_path.glob("*/videos/**/*.mp4"))

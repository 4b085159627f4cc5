"""The tutorial notebooks run top to bottom, and are committed without outputs."""

from __future__ import annotations

from pathlib import Path

import pytest

nbformat = pytest.importorskip("nbformat")
nbclient = pytest.importorskip("nbclient")

TUTORIALS = Path(__file__).resolve().parent.parent / "tutorials"
NOTEBOOKS = sorted(TUTORIALS.glob("*.ipynb"))
CELL_TIMEOUT = 120  # seconds per cell

# The kernel inherits this process's environment.
KERNEL_ENV = {
    "MPLBACKEND": "Agg",  # no display; figures are drawn and discarded
    "OMP_WAIT_POLICY": "PASSIVE",  # no busy-waiting OpenMP threads on a shared CPU
    "BOTORCH_PREF_MOVIELENS": "synthetic",  # notebook 6: never real data in the test run
}


def test_notebooks_found():
    assert NOTEBOOKS, f"no notebooks in {TUTORIALS}"


@pytest.mark.slow
@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.stem for p in NOTEBOOKS])
def test_notebook_runs(path, tmp_path, monkeypatch):
    for key, value in KERNEL_ENV.items():
        monkeypatch.setenv(key, value)
    nb = nbformat.read(path, as_version=4)
    client = nbclient.NotebookClient(
        nb,
        timeout=CELL_TIMEOUT,
        kernel_name="python3",
        resources={"metadata": {"path": str(tmp_path)}},
    )
    # Raises CellExecutionError (with the cell's traceback) if a cell fails.
    client.execute()
    errors = [
        output
        for cell in nb.cells
        if cell.cell_type == "code"
        for output in cell.get("outputs", [])
        if output.get("output_type") == "error"
    ]
    assert not errors


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.stem for p in NOTEBOOKS])
def test_notebook_committed_without_outputs(path):
    nb = nbformat.read(path, as_version=4)
    nbformat.validate(nb)
    assert nb.metadata.get("kernelspec", {}).get("name") == "python3"
    for index, cell in enumerate(nb.cells):
        if cell.cell_type != "code":
            continue
        assert cell.get("outputs") == [], f"cell {index} of {path.name} has outputs"
        assert cell.get("execution_count") is None, f"cell {index} of {path.name} has a count"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.stem for p in NOTEBOOKS])
def test_notebook_structure(path):
    """A question at the top and a 'What to take away' section at the end."""
    nb = nbformat.read(path, as_version=4)
    assert nb.cells[0].cell_type == "markdown"
    assert "**Question:**" in nb.cells[0].source
    assert nb.cells[-1].cell_type == "markdown"
    assert "## What to take away" in nb.cells[-1].source

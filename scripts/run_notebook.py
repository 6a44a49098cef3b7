"""Run docs/examples/dl19.ipynb again and save it with its outputs (`make notebook`).

The notebook is committed with its outputs, so that it reads on GitHub as it runs, and
tests/test_notebooks.py runs it and compares every text output with the committed ones: after a
change to what the notebook prints, run this and commit the notebook it writes.

The kernel is this interpreter's (`python3`, ipykernel), started in the notebook's folder with the
environment as it is: the judgeblender it imports is the one this Python imports, and the data is
`jb.load_dataset`'s (JUDGEBLENDER_DATA, or the cache, downloaded once). What varies from one run
to the next and is not the notebook's result is left out of the file: execution times (cell
metadata) and the kernel's Python version.

    python scripts/run_notebook.py [NOTEBOOK] [--out PATH]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import nbclient
import nbformat

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOK = ROOT / "docs" / "examples" / "dl19.ipynb"


def execute(path: Path, timeout: int = 600) -> nbformat.NotebookNode:
    """The notebook at `path`, every cell run in a fresh kernel whose working folder is the
    notebook's; a cell that raises stops the run with nbclient's error, naming the cell."""
    nb = nbformat.read(path, as_version=4)
    nbclient.NotebookClient(nb, timeout=timeout, kernel_name="python3",
                            resources={"metadata": {"path": str(path.parent)}}).execute()
    for cell in nb.cells:
        cell.metadata.pop("execution", None)  # start and end times of each cell
    nb.metadata.get("language_info", {}).pop("version", None)
    return nb


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("notebook", nargs="?", type=Path, default=NOTEBOOK)
    parser.add_argument("--out", type=Path, help="where to write it (default: over the notebook)")
    parser.add_argument("--timeout", type=int, default=600, help="seconds a cell may take")
    args = parser.parse_args(argv)
    nb = execute(args.notebook.resolve(), args.timeout)
    out = args.out or args.notebook
    nbformat.write(nb, out)
    print(f"wrote {out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())

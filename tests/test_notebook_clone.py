"""The notebook runs from a clone (issue 39, part 1): docs/examples/dl19.ipynb, in a clone of this
commit installed with the README's notebook line into a fresh virtual environment, runs end to
end in that environment's kernel with only JUDGEBLENDER_DATA set, and imports the clone's code.

The shipped notebook read a folder beside the checkout, which a clone does not have. Run in the
checkout, as tests/test_notebooks.py runs it, nothing would tell: the clone is the point. The
fresh environment reuses this one's installed packages (a .pth line: no network, no build of
llama.cpp), but not its judgeblender: that is installed from the clone by the README's line.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

from conftest import SHARED_DATA

pytestmark = pytest.mark.shared_data
ROOT = Path(__file__).resolve().parents[1]
WHERE = "import judgeblender as jb; print('judgeblender from', jb.__file__)"


def _run(*args: str | Path, **kwargs) -> subprocess.CompletedProcess:
    r = subprocess.run([str(a) for a in args], capture_output=True, text=True, timeout=600, **kwargs)
    assert r.returncode == 0, f"{args}: {r.stdout[-2000:]}{r.stderr[-4000:]}"
    return r


def test_the_notebook_runs_from_a_clone_with_only_the_data_variable(tmp_path):
    nbformat = pytest.importorskip("nbformat")
    pytest.importorskip("nbclient")
    pytest.importorskip("pyterrier")
    if shutil.which("git") is None:
        pytest.skip("git not found")
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    line = re.search(r'pip install -e\s+"(\.\[[^\]]*notebook[^\]]*\])"', readme)
    assert line, "the README names no `pip install -e \".[...notebook...]\"` line"

    head = _run("git", "-C", ROOT, "rev-parse", "HEAD").stdout.strip()
    clone = tmp_path / "clone"
    _run("git", "clone", "--quiet", "--no-checkout", ROOT, clone)
    _run("git", "-C", clone, "checkout", "--quiet", head)
    assert not (clone.parent / "shared").exists()

    venv = tmp_path / "venv"
    _run(sys.executable, "-m", "venv", "--without-pip", venv)
    python = venv / "bin" / "python"
    site = Path(_run(python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])").stdout.strip())
    # this environment's packages, read as a plain folder: its own .pth files (among them the
    # editable install of the checkout under test) are not processed
    (site / "reused.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    env = {"PATH": f"{venv / 'bin'}{os.pathsep}{os.environ.get('PATH', '/usr/bin:/bin')}", "HOME": str(tmp_path / "home")}
    _run(python, "-m", "pip", "install", "--quiet", "--no-index", "--no-deps", "--no-build-isolation",
         "-e", line.group(1), cwd=clone, env=env)

    notebook = clone / "docs" / "examples" / "dl19.ipynb"
    nb = nbformat.read(notebook, as_version=4)
    nb.cells.append(nbformat.v4.new_code_cell(WHERE))
    checked = notebook.with_name("dl19-where.ipynb")
    nbformat.write(nb, checked)
    out = tmp_path / "out.ipynb"
    _run(python, clone / "scripts" / "run_notebook.py", checked, "--out", out, cwd=tmp_path,
         env={**env, "JUDGEBLENDER_DATA": str(SHARED_DATA)})

    ran = nbformat.read(out, as_version=4)
    code = [c for c in ran.cells if c.cell_type == "code"]
    assert not [o for c in code for o in c.outputs if o.output_type == "error"]
    where = "".join(o.text for o in code[-1].outputs if o.output_type == "stream")
    assert where.startswith("judgeblender from ") and Path(where.split(" ", 2)[2].strip()).is_relative_to(clone), where
    text = "".join(o.text for c in code for o in c.outputs if o.output_type == "stream" and o.name == "stdout")
    assert "43 topics, 9260 NIST labels" in text and "kappa 0.167 on 9260 pairs" in text
    assert (notebook.parent / "dl19-out" / "dl19-report.html").is_file()

"""The package installs (`pip install -e .` and `pip install .`) and its `healthbench` command
runs the researcher's and curator's commands from anywhere, with the templates and static files
installed beside the code. Installed into a fresh virtualenv that borrows this one's packages
(--no-deps, no build isolation: nothing is downloaded)."""

import os
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
SKIP = {".git", ".venv", ".venv-litellm", "var", "test-artifacts", "build", "__pycache__", ".mypy_cache", ".ruff_cache"}


def run(*command, cwd: Path, env: dict | None = None) -> subprocess.CompletedProcess:
    done = subprocess.run(
        [str(c) for c in command], capture_output=True, text=True, cwd=cwd, env=env, timeout=300, check=False
    )
    assert done.returncode == 0, done.stdout + done.stderr
    return done


def fresh_venv(root: Path) -> Path:
    """A virtualenv whose site-packages also sees this one's (a .pth file), so nothing is fetched."""
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(root)], check=True, timeout=120)
    purelib = Path(sysconfig.get_paths(vars={"base": str(root), "platbase": str(root)})["purelib"])
    (purelib / "borrowed.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    return root / "bin"


def source_copy(root: Path) -> Path:
    """The sources as a clone has them, so that a build writes nothing into this checkout."""
    shutil.copytree(REPO, root, ignore=lambda _dir, names: [n for n in names if n in SKIP or n.endswith(".egg-info")])
    return root


@pytest.mark.parametrize("editable", [True, False], ids=["pip install -e .", "pip install ."])
def test_the_package_installs_and_healthbench_runs_the_commands(tmp_path, editable):
    source = source_copy(tmp_path / "src")
    bin_dir = fresh_venv(tmp_path / "venv")
    target = ["-e", str(source)] if editable else [str(source)]
    pip = [sys.executable, "-m", "pip", "--python", bin_dir / "python", "install", "--no-deps", "--no-build-isolation"]
    run(*pip, "--quiet", *target, cwd=tmp_path)
    healthbench = bin_dir / "healthbench"
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    env = os.environ | {"XDG_DATA_HOME": str(tmp_path / "data"), "LOG_LEVEL": "WARNING"}
    env.pop("VAR_DIR", None)
    env.pop("DATABASE_URL", None)
    assert "import FILE [--subset NAME]" in run(healthbench, "--help", cwd=elsewhere, env=env).stdout
    # The package says what it is: a summary, the README as its description, where it comes from.
    show = "from importlib.metadata import metadata as m; d = m('healthbench-studio'); print(d['Summary']); "
    show += "print(d['Description-Content-Type']); print(*d.get_all('Project-URL'), sep='\\n')"
    metadata = run(bin_dir / "python", "-c", show, cwd=elsewhere, env=env).stdout
    assert metadata.startswith("Physicians write HealthBench rubrics")
    assert "text/markdown" in metadata
    assert "HealthBench paper, https://arxiv.org/abs/2505.08775" in metadata
    refused = subprocess.run(
        [healthbench, "endpoint", "list"], capture_output=True, text=True, cwd=elsewhere, env=env, timeout=120
    )
    assert refused.returncode == 1
    assert "Run migrate first: healthbench migrate" in refused.stderr
    run(healthbench, "migrate", "-v0", cwd=elsewhere, env=env)
    assert run(healthbench, "endpoint", "list", cwd=elsewhere, env=env).stdout.startswith("no endpoints yet")
    assert "usage:" in run(healthbench, "report", "--help", cwd=elsewhere, env=env).stdout
    locate = "import healthbench_web, pathlib; print(pathlib.Path(healthbench_web.__file__).parent)"
    where = run(bin_dir / "python", "-c", locate, cwd=elsewhere, env=env).stdout.strip()
    code = Path(where).parent
    # Every template and static file (the favicon too), not only the kinds package-data names.
    shipped = [f.relative_to(REPO) for top in ("templates", "static") for f in (REPO / top).rglob("*") if f.is_file()]
    assert [str(f) for f in shipped if not (code / f).exists()] == []
    assert Path("static/favicon.svg") in shipped
    if editable:
        # The checkout's own state directory, as with manage.py.
        assert code == source
        assert (source / "var" / "healthbench.sqlite3").exists()
    else:
        # An installed copy keeps its database in the user's data directory.
        assert code != source
        assert (tmp_path / "data" / "healthbench-studio" / "healthbench.sqlite3").exists()


def test_what_a_build_leaves_behind_is_ignored_by_git():
    for leftover in ("build/lib/annotation/__init__.py", "dist/healthbench_studio-0.1.0.tar.gz"):
        assert subprocess.run(["git", "check-ignore", "-q", leftover], cwd=REPO, check=False).returncode == 0, leftover

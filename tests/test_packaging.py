"""The package installs (`pip install -e .` and `pip install .`) and its `healthbench` command
runs the researcher's and curator's commands from anywhere, with the templates and static files
installed beside the code. Installed into a fresh virtualenv that borrows this one's packages
(--no-deps, no build isolation: nothing is downloaded)."""

import os
import re
import shutil
import subprocess
import sys
import sysconfig
import tarfile
import zipfile
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


def package_files() -> list[Path]:
    """Every template and static file, whatever its kind (the favicon too)."""
    package = REPO / "healthbench_web"
    return [f for top in ("templates", "static") for f in (package / top).rglob("*") if f.is_file()]


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
    # Every template and static file (the favicon too), inside the project's package.
    shipped = [f.relative_to(REPO) for f in package_files()]
    assert [str(f) for f in shipped if not (code / f).exists()] == []
    assert Path("healthbench_web/static/favicon.svg") in shipped
    assert Path("healthbench_web/templates/errors/404.html") in shipped
    # ...and no top-level `templates` or `static` package beside the apps in site-packages.
    assert not (code / "templates").exists()
    assert not (code / "static").exists()
    # The installed copy's settings find them there.
    env_settings = env | {"DJANGO_SETTINGS_MODULE": "healthbench_web.settings"}
    find = "import django; django.setup(); from django.contrib.staticfiles import finders; "
    find += "from django.template.loader import get_template; print(finders.find('style.css')); "
    find += "print(get_template('errors/404.html').origin.name)"
    found = run(bin_dir / "python", "-c", find, cwd=elsewhere, env=env_settings).stdout.split()
    package = code / "healthbench_web"
    assert found == [str(package / "static" / "style.css"), str(package / "templates" / "errors" / "404.html")]
    if editable:
        # The checkout's own state directory, as with manage.py.
        assert code == source
        assert (source / "var" / "healthbench.sqlite3").exists()
    else:
        # An installed copy keeps its database in the user's data directory.
        assert code != source
        assert (tmp_path / "data" / "healthbench-studio" / "healthbench.sqlite3").exists()


def test_the_wheel_holds_the_templates_and_static_files_as_package_data(tmp_path):
    """Only the three apps are top-level names of the wheel; the templates, static files and
    translation catalogues ship inside healthbench_web."""
    source = source_copy(tmp_path / "src")
    pip = [sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps", "--no-build-isolation"]
    run(*pip, "-w", tmp_path / "dist", source, cwd=tmp_path)
    (wheel,) = (tmp_path / "dist").glob("healthbench_studio-*.whl")
    with zipfile.ZipFile(wheel) as archive:
        names = set(archive.namelist())
        (top_level,) = [n for n in names if n.endswith(".dist-info/top_level.txt")]
        assert archive.read(top_level).decode().split() == ["annotation", "grading", "healthbench_web"]
    assert not [n for n in names if n.startswith(("templates/", "static/", "locale/"))]
    assert [str(f) for f in package_files() if str(f.relative_to(REPO)) not in names] == []
    assert {"annotation/demo/demo_dataset.jsonl", "annotation/demo/demo_responses.jsonl"} <= names


def test_the_sdist_holds_the_whole_project_and_runs_its_own_tests(tmp_path):
    """The source distribution is every file of a clone (MANIFEST.in), so that unpacked it runs
    its tests as a clone does; two of its test modules are run from it here, on SQLite."""
    if not (REPO / ".git").exists():
        pytest.skip("needs the git checkout the sdist is built from (this is not one)")
    source = source_copy(tmp_path / "src")
    run(sys.executable, "-m", "build", "--sdist", "--no-isolation", "-o", tmp_path / "dist", source, cwd=tmp_path)
    (archive,) = (tmp_path / "dist").glob("healthbench_studio-*.tar.gz")
    with tarfile.open(archive) as tar:
        tar.extractall(tmp_path / "unpacked", filter="data")
    (root,) = (tmp_path / "unpacked").iterdir()
    shipped = {p.relative_to(root).as_posix() for p in root.rglob("*") if p.is_file()}
    # What a clone would hold: tracked files, and new ones not yet added (git's ignore rules apart).
    tracked = set(run("git", "ls-files", "--cached", "--others", "--exclude-standard", cwd=REPO).stdout.split())
    # Only what a build adds may differ: its metadata, never a tracked file left out.
    assert sorted(tracked - shipped) == []
    assert {p.split("/")[0] for p in shipped - tracked} <= {"PKG-INFO", "setup.cfg", "healthbench_studio.egg-info"}
    env = {k: v for k, v in os.environ.items() if k not in ("DATABASE_URL", "REDIS_URL", "CACHE_URL", "CI")}
    env["VAR_DIR"] = str(tmp_path / "var")
    tests = ["tests/test_scoring.py", "tests/test_architecture.py"]
    pytest_args = ["-q", "-p", "no:randomly", "-p", "no:cacheprovider", *tests]
    done = run(sys.executable, "-m", "pytest", *pytest_args, cwd=root, env=env)  # fails on a failed test
    assert re.search(r"\b\d+ passed\b", done.stdout), done.stdout


def test_what_a_build_leaves_behind_is_ignored_by_git():
    for leftover in ("build/lib/annotation/__init__.py", "dist/healthbench_studio-0.1.0.tar.gz"):
        assert subprocess.run(["git", "check-ignore", "-q", leftover], cwd=REPO, check=False).returncode == 0, leftover

"""A release is one CHANGELOG section, one pyproject.toml version and one git tag, made together
by scripts/release.py: run here in a scratch repository, and the repository's own CHANGELOG and
version held to the same shape."""

import importlib.util
import re
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
SCRIPT = REPO / "scripts" / "release.py"
# scripts/ is not a package: the script is loaded from its file, as `python scripts/release.py` runs it.
_spec = importlib.util.spec_from_file_location("release", SCRIPT)
assert _spec is not None
assert _spec.loader is not None
release = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(release)


def git(root: Path, *args: str) -> str:
    return subprocess.run(["git", *args], cwd=root, capture_output=True, text=True, check=True).stdout


def release_run(root: Path, *args: str) -> subprocess.CompletedProcess:
    command = [sys.executable, str(SCRIPT), "--root", str(root), *args]
    return subprocess.run(command, capture_output=True, text=True, check=False, timeout=60)


@pytest.fixture
def project(tmp_path: Path) -> Path:
    git(tmp_path, "init", "--quiet", "--initial-branch=main")
    git(tmp_path, "config", "user.email", "test@example.org")
    git(tmp_path, "config", "user.name", "Test")
    (tmp_path / "pyproject.toml").write_text('[project]\nname = "x"\nversion = "0.1.0"\n')
    (tmp_path / "CHANGELOG.md").write_text("# Changelog\n\n## 0.1.0 (unreleased)\n\n- The first thing.\n")
    git(tmp_path, "add", ".")
    git(tmp_path, "commit", "--quiet", "-m", "start")
    return tmp_path


def test_a_release_dates_its_section_sets_the_version_and_tags_the_commit(project):
    done = release_run(project, "0.1.0", "--date", "2026-12-06")
    assert done.returncode == 0, done.stderr
    changelog = (project / "CHANGELOG.md").read_text()
    assert changelog == "# Changelog\n\n## Unreleased\n\n## 0.1.0 — 2026-12-06\n\n- The first thing.\n"
    assert git(project, "rev-parse", "v0.1.0^{commit}") == git(project, "rev-parse", "HEAD")
    assert git(project, "status", "--porcelain") == ""
    assert git(project, "log", "-1", "--format=%s") == "Release 0.1.0\n"

    # The next release bumps the version, from the fresh Unreleased section.
    (project / "CHANGELOG.md").write_text(changelog.replace("## Unreleased\n", "## Unreleased\n\n- A fix.\n"))
    git(project, "commit", "--quiet", "-am", "fix")
    assert release_run(project, "0.1.1", "--date", "2026-12-07").returncode == 0
    assert tomllib.loads((project / "pyproject.toml").read_text())["project"]["version"] == "0.1.1"
    assert re.findall(r"^## .*$", (project / "CHANGELOG.md").read_text(), re.MULTILINE) == [
        "## Unreleased",
        "## 0.1.1 — 2026-12-07",
        "## 0.1.0 — 2026-12-06",
    ]
    assert git(project, "tag", "--list") == "v0.1.0\nv0.1.1\n"


@pytest.mark.parametrize(
    ("prepare", "args", "reason"),
    [
        (
            lambda p: (p / "pyproject.toml").write_text('version = "0.1.0"\n# edited\n'),
            ["0.1.0"],
            "uncommitted changes",
        ),
        (lambda p: None, ["1.0"], "is not a version X.Y.Z"),
        (lambda p: None, ["0.1.0", "--date", "06/12/2026"], "is not a date"),
        (lambda p: None, ["0.2.0"], "unreleased section is for 0.1.0, not 0.2.0"),
        (lambda p: git(p, "tag", "v0.1.0"), ["0.1.0"], "the tag v0.1.0 already exists"),
    ],
    ids=["dirty tree", "bad version", "bad date", "another version's section", "tag exists"],
)
def test_a_release_that_cannot_be_made_is_refused_with_the_reason_and_changes_nothing(project, prepare, args, reason):
    prepare(project)
    before = {name: (project / name).read_text() for name in ("CHANGELOG.md", "pyproject.toml")}
    head = git(project, "rev-parse", "HEAD")
    done = release_run(project, *args)
    assert done.returncode == 1
    assert reason in done.stderr
    assert {name: (project / name).read_text() for name in before} == before
    assert git(project, "rev-parse", "HEAD") == head


def test_nothing_to_release_and_an_old_version_are_refused(project):
    assert release_run(project, "0.1.0", "--date", "2026-12-06").returncode == 0
    empty = release_run(project, "0.2.0")
    assert empty.returncode == 1
    assert "section is empty: nothing to release" in empty.stderr
    (project / "CHANGELOG.md").write_text(
        (project / "CHANGELOG.md").read_text().replace("## Unreleased\n", "## Unreleased\n\n- More.\n")
    )
    git(project, "commit", "--quiet", "-am", "more")
    older = release_run(project, "0.0.9")
    assert older.returncode == 1
    assert "not above the last release, 0.1.0" in older.stderr


def test_dry_run_says_what_it_would_do_and_writes_nothing(project):
    done = release_run(project, "0.1.0", "--date", "2026-12-06", "--dry-run")
    assert done.returncode == 0
    assert done.stdout.splitlines() == [
        "would do: CHANGELOG.md: ## 0.1.0 — 2026-12-06",
        'would do: pyproject.toml: version = "0.1.0"',
        "would do: commit and tag v0.1.0",
    ]
    assert git(project, "tag", "--list") == ""
    assert "(unreleased)" in (project / "CHANGELOG.md").read_text()


def test_the_changelog_and_the_version_agree():
    """Every section is a release (dated, newest first) or the one unreleased section at the
    top, and pyproject.toml's version is that section's or the newest release's."""
    changelog = (REPO / "CHANGELOG.md").read_text()
    heads = [m for _, m in release.sections(changelog)]
    assert heads, "CHANGELOG.md has no section"
    assert all(m["date"] for m in heads[1:]), "only the first section may be unreleased"
    released = release.released_versions(changelog)
    assert released == sorted(released, key=release.as_tuple, reverse=True)
    version = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["version"]
    expected = heads[0]["version"] if not heads[0]["date"] and heads[0]["version"] else released[0]
    assert version == expected


def test_each_release_tag_points_at_its_version():
    if not (REPO / ".git").exists():
        pytest.skip("needs the git checkout (this is not one)")
    tags = git(REPO, "tag", "--list", "v*").split()
    for tag in tags:
        pyproject = git(REPO, "show", f"{tag}:pyproject.toml")
        assert tomllib.loads(pyproject)["project"]["version"] == tag.removeprefix("v"), tag
    released = release.released_versions((REPO / "CHANGELOG.md").read_text())
    # A clone made without tags has none; a checkout that has tags has one per release.
    assert not tags or {f"v{v}" for v in released} <= set(tags)

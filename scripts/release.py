#!/usr/bin/env python3
"""Make a release: scripts/release.py VERSION [--date YYYY-MM-DD] [--dry-run]

One release is one CHANGELOG section, one `pyproject.toml` version and one git tag, made
together so they cannot drift:

1. the CHANGELOG's first section, `## Unreleased` or `## VERSION (unreleased)`, becomes
   `## VERSION — DATE`, and a fresh, empty `## Unreleased` goes above it for the next work;
2. `pyproject.toml`'s `[project] version` becomes VERSION;
3. both are committed as "Release VERSION" and the commit is tagged `vVERSION` (annotated).

It refuses, changing nothing, on a working tree with uncommitted changes, a version that is not
X.Y.Z or not above the last released one, a tag that already exists, or an Unreleased section
with nothing in it. tests/test_release.py runs it in a scratch repository.
"""

import argparse
import datetime
import re
import subprocess
import sys
from pathlib import Path

VERSION = re.compile(r"^\d+\.\d+\.\d+$")
# A section heading of the CHANGELOG: "## Unreleased", "## 0.2.0 (unreleased)", "## 0.1.0 — 2026-12-06".
HEADING = re.compile(
    r"^## (?:Unreleased|(?P<version>\d+\.\d+\.\d+)"
    r"(?: (?P<unreleased>\(unreleased\))| — (?P<date>\d{4}-\d{2}-\d{2}))?)\s*$"
)
PROJECT_VERSION = re.compile(r'^version = "(?P<version>[^"]*)"\s*$', re.MULTILINE)


class ReleaseError(Exception):
    pass


def as_tuple(version: str) -> tuple[int, ...]:
    return tuple(int(part) for part in version.split("."))


def sections(changelog: str) -> list[tuple[int, re.Match[str]]]:
    """Each section heading's line number and match, in file order."""
    found = []
    for number, line in enumerate(changelog.splitlines()):
        if line.startswith("## "):
            match = HEADING.match(line)
            if match is None:
                raise ReleaseError(f"CHANGELOG.md line {number + 1}: a section heading that is not a release: {line!r}")
            found.append((number, match))
    return found


def released_versions(changelog: str) -> list[str]:
    return [m["version"] for _, m in sections(changelog) if m["date"]]


def changelog_released(changelog: str, version: str, date: str) -> str:
    """The CHANGELOG with its first section released as VERSION on DATE."""
    heads = sections(changelog)
    if not heads or heads[0][1]["date"]:
        raise ReleaseError("CHANGELOG.md has no unreleased section at the top (## Unreleased)")
    number, first = heads[0]
    if first["version"] and first["version"] != version:
        raise ReleaseError(f"CHANGELOG.md's unreleased section is for {first['version']}, not {version}")
    lines = changelog.splitlines()
    end = heads[1][0] if len(heads) > 1 else len(lines)
    if not any(line.strip() for line in lines[number + 1 : end]):
        raise ReleaseError("CHANGELOG.md's unreleased section is empty: nothing to release")
    lines[number] = f"## {version} — {date}"
    lines[number:number] = ["## Unreleased", ""]
    return "\n".join(lines) + "\n"


def pyproject_released(pyproject: str, version: str) -> str:
    if len(PROJECT_VERSION.findall(pyproject)) != 1:
        raise ReleaseError('pyproject.toml has no single `version = "..."` line')
    return PROJECT_VERSION.sub(f'version = "{version}"', pyproject)


def git(root: Path, *args: str) -> str:
    # git from PATH, with an argument list and no shell: the arguments are this script's own.
    done = subprocess.run(["git", *args], cwd=root, capture_output=True, text=True, check=False)  # noqa: S603, S607
    if done.returncode != 0:
        raise ReleaseError(f"git {' '.join(args)}: {done.stderr.strip()}")
    return done.stdout


def release(root: Path, version: str, date: str, dry_run: bool) -> list[str]:
    """Check everything, then write, commit and tag; returns what was (or would be) done."""
    if not VERSION.match(version):
        raise ReleaseError(f"{version!r} is not a version X.Y.Z")
    try:
        datetime.date.fromisoformat(date)
    except ValueError:
        raise ReleaseError(f"{date!r} is not a date YYYY-MM-DD") from None
    changelog_path, pyproject_path = root / "CHANGELOG.md", root / "pyproject.toml"
    changelog, pyproject = changelog_path.read_text(), pyproject_path.read_text()
    earlier = released_versions(changelog)
    if earlier and as_tuple(version) <= max(as_tuple(v) for v in earlier):
        raise ReleaseError(f"{version} is not above the last release, {max(earlier, key=as_tuple)}")
    if git(root, "status", "--porcelain", "--untracked-files=no").strip():
        raise ReleaseError("the working tree has uncommitted changes: commit or stash them first")
    if git(root, "tag", "--list", f"v{version}").strip():
        raise ReleaseError(f"the tag v{version} already exists")
    new_changelog = changelog_released(changelog, version, date)
    new_pyproject = pyproject_released(pyproject, version)
    steps = [
        f"CHANGELOG.md: ## {version} — {date}",
        f'pyproject.toml: version = "{version}"',
        f"commit and tag v{version}",
    ]
    if dry_run:
        return steps
    changelog_path.write_text(new_changelog)
    pyproject_path.write_text(new_pyproject)
    git(root, "commit", "--quiet", "-m", f"Release {version}", "--", "CHANGELOG.md", "pyproject.toml")
    git(root, "tag", "--annotate", f"v{version}", "-m", f"HealthBench Studio {version}")
    return steps


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[1].replace("\n", " "))
    parser.add_argument("version", help="the new version, X.Y.Z, above the last released one")
    parser.add_argument("--date", default=datetime.date.today().isoformat(), help="the release date (default: today)")
    parser.add_argument("--dry-run", action="store_true", help="check and say what would change; write nothing")
    parser.add_argument("--root", type=Path, default=Path(__file__).resolve().parent.parent, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    try:
        steps = release(args.root, args.version, args.date, args.dry_run)
    except ReleaseError as error:
        print(f"error: {error}", file=sys.stderr)
        return 1
    print("\n".join(("would do: " if args.dry_run else "done: ") + step for step in steps))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

"""The release's papers: a licence, and a changelog whose latest entry is pyproject's version."""

import re
import tomllib

from tests.conftest import REPO


def test_the_changelog_starts_with_the_version_in_pyproject():
    version = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["version"]
    headings = re.findall(r"^## (\S+)", (REPO / "CHANGELOG.md").read_text(), flags=re.M)
    assert headings
    assert headings[0] == version


def test_the_licence_is_mit():
    assert (REPO / "LICENSE").read_text().startswith("MIT License")

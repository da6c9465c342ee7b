"""pyproject.toml declares the same direct dependencies, at the same pins, as the lock inputs
(requirements.in, requirements-dev.in, requirements-litellm.in), and every locked line carries
a hash."""

import re
import tomllib

from tests.conftest import REPO


def _pins(path) -> list[str]:
    pins = []
    for line in path.read_text().splitlines():
        line = line.split("#", 1)[0].strip()
        if line and not line.startswith("-"):
            pins.append(line)
    return pins


def test_pyproject_declares_the_runtime_and_dev_pins_of_the_lock_inputs():
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    assert project["dependencies"] == _pins(REPO / "requirements.in")
    assert project["optional-dependencies"]["dev"] == _pins(REPO / "requirements-dev.in")
    assert project["optional-dependencies"]["litellm-gateway"] == _pins(REPO / "requirements-litellm.in")


def test_every_locked_requirement_has_a_hash():
    for name in ("requirements.txt", "requirements-dev.txt", "requirements-litellm.txt"):
        text = (REPO / name).read_text()
        requirements = re.findall(r"^([A-Za-z0-9_.\-\[\]]+==\S+)(.*)$", text, flags=re.M)
        assert requirements, name
        for requirement, rest in requirements:
            assert rest.strip() == "\\", f"{name}: {requirement} has no --hash lines"
        assert text.count("--hash=sha256:") >= len(requirements)

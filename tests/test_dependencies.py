"""pyproject.toml is the one place where direct dependencies are pinned; the locks are made
from it, carry a hash on every line, and hold each direct pin at its version; and code imports
only packages that are direct dependencies, never one that arrives as another's dependency."""

import ast
import re
import sys
import tomllib
from importlib.metadata import PackageNotFoundError, packages_distributions, requires
from importlib.util import find_spec
from pathlib import Path

from packaging.markers import default_environment
from packaging.requirements import Requirement

from tests.conftest import REPO


def canonicalize_name(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def _pins(lines: list[str]) -> dict[str, str]:
    """name -> version of `name[extras]==version` lines; every direct dependency is pinned so."""
    pins = {}
    for line in lines:
        match = re.fullmatch(r"([A-Za-z0-9_.\-]+)(?:\[[a-z0-9_,\-]+\])?==(\S+)", line)
        assert match, f"pyproject.toml: {line!r} is not an exact pin"
        pins[canonicalize_name(match[1])] = match[2]
    return pins


PROJECT = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
RUNTIME = _pins(PROJECT["dependencies"])
DEV = _pins(PROJECT["optional-dependencies"]["dev"])
# Our packages, and the benchmarks' name for a simple-evals checkout loaded at run time.
OURS = {"annotation", "grading", "healthbench_web", "tests", "bench", "simple_evals_reference"}


def _locked(name: str) -> dict[str, str]:
    text = (REPO / name).read_text()
    return {canonicalize_name(m[1]): m[2] for m in re.finditer(r"^([A-Za-z0-9_.\-]+)==(\S+)", text, flags=re.M)}


def test_every_locked_requirement_has_a_hash():
    for name in ("requirements.txt", "requirements-dev.txt", "requirements-litellm.txt"):
        text = (REPO / name).read_text()
        requirements = re.findall(r"^([A-Za-z0-9_.\-\[\]]+==\S+)( ; [^\\]+)?(.*)$", text, flags=re.M)
        assert requirements, name
        for requirement, _marker, rest in requirements:
            assert rest.strip() == "\\", f"{name}: {requirement} has no --hash lines"
        assert text.count("--hash=sha256:") >= len(requirements)


def test_the_locks_are_made_from_pyproject_and_hold_its_pins():
    assert not list(REPO.glob("requirements*.in")), "pins live in pyproject.toml only"
    runtime, dev = _locked("requirements.txt"), _locked("requirements-dev.txt")
    for name in ("requirements.txt", "requirements-dev.txt"):
        assert "pyproject.toml" in (REPO / name).read_text().split("\n\n", 1)[0], f"{name} is not made from it"
    for name, version in RUNTIME.items():
        assert runtime.get(name) == version, name
        assert dev.get(name) == version, name
    for name, version in DEV.items():
        assert dev.get(name) == version, name
    # The dev lock is constrained by the runtime lock: every package they share has one version.
    assert {name: dev[name] for name in runtime} == runtime


def test_the_gateway_tests_lock_holds_its_pin_and_none_of_the_products():
    # Locked alone, for a virtualenv of its own: the product's pins are not in it.
    gateway = _pins(PROJECT["optional-dependencies"]["litellm-gateway"])
    locked = _locked("requirements-litellm.txt")
    assert gateway
    assert all(locked.get(name) == version for name, version in gateway.items())
    assert "django" not in locked
    assert "celery" not in locked


def _imported_packages(folder: str) -> dict[str, str]:
    """Top-level names of third-party modules imported anywhere under `folder`, with a file each."""
    found: dict[str, str] = {}
    for path in (REPO / folder).rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names = [node.module]
            else:
                continue
            for name in names:
                top = name.split(".")[0]
                if top not in sys.stdlib_module_names and top not in OURS:
                    found.setdefault(top, str(path.relative_to(REPO)))
    return found


def _undeclared(folders: tuple[str, ...], declared: dict[str, str]) -> list[str]:
    owners = packages_distributions()
    problems = []
    for folder in folders:
        for module, where in sorted(_imported_packages(folder).items()):
            distributions = {canonicalize_name(d) for d in owners.get(module, [])}
            if not distributions & set(declared):
                problems.append(f"{where} imports {module} (from {sorted(distributions) or 'nothing installed'})")
    return problems


def test_the_application_imports_only_its_runtime_dependencies():
    assert _undeclared(("annotation", "grading", "healthbench_web"), RUNTIME) == []


def test_tests_and_benchmarks_import_only_direct_dependencies():
    assert _undeclared(("tests", "bench"), RUNTIME | DEV) == []


# The Pythons the README and pyproject.toml admit ("3.11 or newer"), as far as the locks are
# made for them: every 3.11 release (Debian 12 ships 3.11.2), and the locking one.
ADMITTED = ("3.11.0", "3.11.2", "3.11.3", sys.version.split()[0])


def _asked_extras() -> dict[str, set[str]]:
    """name -> the extras pyproject.toml asks of it (kombu[redis])."""
    extras: dict[str, set[str]] = {}
    for line in PROJECT["dependencies"]:
        requirement = Requirement(line)
        extras[canonicalize_name(requirement.name)] = set(requirement.extras)
    return extras


def _needed_on(requirement: Requirement, extras: set[str]) -> list[str]:
    """The admitted Pythons on which `requirement`, asked with `extras`, is needed."""
    if requirement.marker is None:
        return list(ADMITTED)
    needed = []
    for version in ADMITTED:
        environment: dict[str, str] = {
            **{key: str(value) for key, value in default_environment().items()},
            "python_full_version": version,
            "python_version": ".".join(version.split(".")[:2]),
        }
        if any(requirement.marker.evaluate({**environment, "extra": extra}) for extra in extras | {""}):
            needed.append(version)
    return needed


def test_the_locks_hold_every_requirement_of_what_they_lock_on_every_admitted_python():
    # pip-compile resolves for the Python it runs on; scripts/lock_markers.py adds what an
    # older 3.11 needs. Without it pip --require-hashes refuses the lock on 3.11.0-3.11.2.
    extras = _asked_extras()
    for lock in ("requirements.txt", "requirements-dev.txt"):
        locked = _locked(lock)
        missing = []
        for name in locked:
            try:
                lines = requires(name) or []
            except PackageNotFoundError:  # locked for an older Python only, not installed here
                assert re.search(rf"^{name}==\S+ ; ", (REPO / lock).read_text(), flags=re.M | re.I), name
                continue
            for line in lines:
                requirement = Requirement(line)
                on = _needed_on(requirement, extras.get(name, set()))
                if on and canonicalize_name(requirement.name) not in locked:
                    missing.append(f"{name} needs {requirement} on Python {', '.join(on)}")
        assert missing == [], lock


def test_what_only_an_older_python_needs_is_locked_with_its_marker():
    for lock in ("requirements.txt", "requirements-dev.txt"):
        text = (REPO / lock).read_text()
        assert re.search(r'^async-timeout==\S+ ; python_full_version < "3\.11\.3" \\$', text, flags=re.M), lock


def test_the_redis_transport_finds_every_import_in_the_runtime_lock():
    # A worker on REDIS_URL loads kombu's Redis transport and redis' asyncio client; what they
    # import must come from the runtime lock alone (the dev lock once hid `packaging`).
    runtime = _locked("requirements.txt")
    owners = packages_distributions()
    for module in ("kombu.transport.redis", "redis.asyncio.connection"):
        spec = find_spec(module)
        assert spec is not None
        assert spec.origin
        tree = ast.parse(Path(spec.origin).read_text())
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                top = node.module.split(".")[0]
            elif isinstance(node, ast.Import):
                top = node.names[0].name.split(".")[0]
            else:
                continue
            if top in sys.stdlib_module_names or top in ("hiredis", "async_timeout", "cryptography", "OpenSSL"):
                continue  # optional (guarded by try) or below 3.11.3, checked above
            distributions = {canonicalize_name(d) for d in owners.get(top, [])}
            assert distributions & set(runtime), f"{module} imports {top}, not in requirements.txt"

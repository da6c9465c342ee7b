"""The reference, for the tests that hold the product to it: simple-evals' own modules, loaded
from the checkout $SIMPLE_EVALS_DIR names (a work tree, or a bare git mirror).

Without it a reference test skips on a workstation and fails in CI (``CI`` set): `.ci/run`
points SIMPLE_EVALS_DIR at the unmodified tree in ``../shared/reference/``, so no reference
test may quietly not run there. ``load_reference`` is the loading itself, for a test or a
script (scripts/golden_files.py): it raises ``ReferenceUnavailable``, which the tests' wrapper
``reference_modules`` turns into a failure.
"""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
import tempfile
import types
from pathlib import Path

import pytest

PACKAGE = "simple_evals_reference"
# The modules the tests read; each imports only these among the reference's own files.
SOURCES = ("healthbench_eval.py", "healthbench_meta_eval.py", "types.py")


class ReferenceUnavailable(Exception):
    """The simple-evals checkout lacks a module the tests read, or one of them does not load."""


def simple_evals_dir() -> Path:
    """The checkout to test against; skips without one, except in CI, where it fails."""
    given = os.environ.get("SIMPLE_EVALS_DIR")
    if not given:
        if os.environ.get("CI"):
            pytest.fail("CI must run the reference tests: .ci/run sets SIMPLE_EVALS_DIR to ../shared/reference/")
        pytest.skip("SIMPLE_EVALS_DIR is not set: no simple-evals checkout to test against")
    path = Path(given)
    if not path.is_dir():
        pytest.fail(f"SIMPLE_EVALS_DIR={given} is not a directory")
    return path


def _sources(directory: Path) -> Path:
    if (directory / "healthbench_eval.py").exists():
        return directory
    copy = Path(tempfile.mkdtemp(prefix="simple-evals-"))
    for name in SOURCES:
        shown = subprocess.run(["git", "-C", str(directory), "show", f"HEAD:{name}"], capture_output=True)
        if shown.returncode != 0:
            raise ReferenceUnavailable(f"{directory} holds no {name}")
        (copy / name).write_bytes(shown.stdout)
    return copy


def reference_modules() -> dict[str, types.ModuleType]:
    """The reference's modules from $SIMPLE_EVALS_DIR (``load_reference``); a test fails when
    they do not load, and skips or fails as ``simple_evals_dir`` says when there is none."""
    try:
        return load_reference(simple_evals_dir())
    except ReferenceUnavailable as exc:
        pytest.fail(f"SIMPLE_EVALS_DIR: {exc}")


def load_reference(directory: Path) -> dict[str, types.ModuleType]:
    """{"types": module, "healthbench_eval": module, "healthbench_meta_eval": module}, run from
    the source in `directory` (a work tree or a bare git mirror of simple-evals).

    They import the OpenAI sampler, blobfile, pandas and the report templates at the top; what
    the tests call needs none of them, so those are stubbed while the modules load, and every
    module the load added is taken out of ``sys.modules`` again (a later test importing the
    real library must not find a stub)."""
    sources = _sources(directory)
    before = set(sys.modules)
    root = types.ModuleType(PACKAGE)
    root.__path__ = [str(sources)]
    stubs: dict[str, dict[str, object]] = {
        PACKAGE: {},
        # Its HTML template is read at import time (to build the report pages' templates); the
        # grading loops map over items with it and render a page per sample, which no test reads.
        f"{PACKAGE}.common": {
            "HTML_JINJA": "",
            "map_with_progress": lambda f, xs, *args, **kwargs: [f(x) for x in xs],
            # The meta-eval's summary of its samples, after its grader calls (not read by a test).
            "aggregate_results": lambda results, **kwargs: types.SimpleNamespace(metrics={}, score=None),
            "jinja_env": types.SimpleNamespace(
                from_string=lambda text: types.SimpleNamespace(render=lambda **values: "")
            ),
        },
        f"{PACKAGE}.sampler": {"__path__": []},
        f"{PACKAGE}.sampler.chat_completion_sampler": {
            "OPENAI_SYSTEM_MESSAGE_API": "",
            "ChatCompletionSampler": object,
        },
    }
    for name in ("blobfile", "pandas"):
        if importlib.util.find_spec(name) is None:
            stubs[name] = {}
    loaded: dict[str, types.ModuleType] = {}
    try:
        sys.modules[PACKAGE] = root
        for name, attributes in stubs.items():
            if name != PACKAGE:
                module = types.ModuleType(name)
                module.__dict__.update(attributes)
                sys.modules[name] = module
        for name in ("types", "healthbench_eval", "healthbench_meta_eval"):
            spec = importlib.util.spec_from_file_location(f"{PACKAGE}.{name}", sources / f"{name}.py")
            assert spec is not None
            assert spec.loader is not None
            module = importlib.util.module_from_spec(spec)
            sys.modules[spec.name] = module
            try:
                spec.loader.exec_module(module)
            except Exception as exc:  # asked for by name: a reference that does not load is a failure
                raise ReferenceUnavailable(f"simple-evals' {name}.py does not load from {sources}: {exc!r}") from exc
            loaded[name] = module
    finally:
        for name in set(sys.modules) - before:
            del sys.modules[name]
    return loaded

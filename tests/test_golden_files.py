"""The golden files are what simple-evals computes from their inputs, to the byte.

Every reference output kept under ``fixtures/scoring/`` and ``fixtures/metaeval/`` is
recomputed by the reference's own functions (tests/reference_outputs.py) and compared with
the file as stored, so a golden file can never drift from the reference: a file that differs
fails here with the figures that differ. `scripts/golden_files.py --write` regenerates them.
Skips without a simple-evals checkout on a workstation, fails without one in CI
(tests/simple_evals.py); the files built from the public samples skip when those are absent.
"""

import dataclasses
import json
import os
import subprocess
import sys

import pytest

from tests.reference_outputs import GOLDEN_FILES, REPO, SAMPLES, SamplesUnavailable, differences, draw_grader_labels
from tests.simple_evals import reference_modules, simple_evals_dir


@pytest.fixture(scope="module")
def modules():
    return reference_modules()


@pytest.mark.parametrize("name", list(GOLDEN_FILES))
def test_the_golden_file_is_the_references_output(name, modules):
    try:
        found = differences(GOLDEN_FILES[name], modules, SAMPLES)
    except SamplesUnavailable as exc:
        pytest.skip(str(exc))
    assert found == [], "\n".join([f"{name} is not what the reference computes:", *found])


def test_a_changed_figure_is_caught_and_named(modules, tmp_path):
    golden = GOLDEN_FILES["scoring/mixed"]
    document = json.loads(golden.path.read_text())
    document["reference_metrics"]["theme:hedging:bootstrap_std"] += 1e-12
    document["reference_response_metrics"][3]["overall_score"] = 0.5
    changed = tmp_path / "mixed.json"
    changed.write_text(golden.render(document))
    found = differences(dataclasses.replace(golden, path=changed), modules, SAMPLES)
    assert len(found) == 2, found
    assert found[0].startswith("reference_metrics['theme:hedging:bootstrap_std']: stored ")
    assert found[1].startswith("reference_response_metrics: stored ")


def test_a_file_without_its_seed_is_not_the_references_output(modules, tmp_path):
    golden = GOLDEN_FILES["scoring/mostly_negative"]
    document = json.loads(golden.path.read_text())
    del document["reference_seed"]
    changed = tmp_path / "mostly_negative.json"
    changed.write_text(golden.render(document))
    found = differences(dataclasses.replace(golden, path=changed), modules, SAMPLES)
    assert found == ["reference_seed: stored null, reference 0"]


def test_the_grader_labels_of_the_sample_files_are_drawn_from_their_seed():
    for name in ("metaeval/meta_eval_sample", "metaeval/labels_only_sample"):
        document = json.loads(GOLDEN_FILES[name].path.read_text())
        assert document["grader"] == draw_grader_labels(document["grader_seed"], len(document["completion_ids"]))


def test_the_script_checks_a_file_and_refuses_an_unknown_name():
    def script(*arguments):
        environment = os.environ | {"SIMPLE_EVALS_DIR": str(simple_evals_dir())}
        command = [sys.executable, str(REPO / "scripts" / "golden_files.py"), *arguments]
        return subprocess.run(command, capture_output=True, text=True, env=environment, check=False)

    checked = script("--check", "metaeval/edge_cases")
    assert (checked.returncode, checked.stdout) == (0, "metaeval/edge_cases: the reference output\n")
    unknown = script("--check", "scoring/nothing")
    assert unknown.returncode == 2
    assert "no golden file scoring/nothing" in unknown.stderr

"""The golden files' reference outputs, recomputed from their stored inputs by simple-evals' own code.

Two kinds of golden file hold what the reference computed, for the tests that hold the product
to it:

- ``fixtures/scoring/*.json``: rubrics (points and tags of each criterion, the conversation's
  tags) and responses (which criteria the grader found met). Each response is graded by
  ``HealthBenchEval.grade_sample`` with a grader that answers the stored verdicts, and the
  results are aggregated by ``_aggregate_get_clipped_mean``: ``reference_score``,
  ``reference_metrics`` and, where the file keeps them, ``reference_response_metrics``. The
  reference's bootstrap draws from numpy's global generator, which is seeded first with the
  file's ``reference_seed``, so its ``:bootstrap_std`` figures come out the same on every run.
- ``fixtures/metaeval/*.json``: meta-eval rows (category, physician labels, physician ids, the
  grader's label or null) and the output of ``HealthBenchMetaEval.__call__`` on them: the
  grader's agreement (``model``) on the rows it labelled and every physician's (``physician``,
  keyed by the index of the id in ``physician_ids``) on all rows, as [n, value] pairs. Two files
  are built from the public samples beside the repository (``source``): they keep the
  completion ids, the grader labels drawn with ``random.Random(grader_seed)`` and the output,
  not the rows.

scripts/golden_files.py writes the files (``--write``) or checks them (``--check``);
tests/test_golden_files.py runs the check for every file.
"""

from __future__ import annotations

import json
import random
import types
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

REPO = Path(__file__).resolve().parents[1]
FIXTURES = REPO / "tests" / "fixtures"
SAMPLES = REPO.parent / "shared" / "healthbench-samples"


class SamplesUnavailable(Exception):
    """A golden file is built from a public sample that is not on this machine."""


@dataclass(frozen=True)
class GoldenFile:
    name: str  # as the command line names it: "scoring/mixed"
    path: Path
    recompute: Callable[[dict[str, Any], dict[str, types.ModuleType], Path], dict[str, Any]]
    render: Callable[[dict[str, Any]], str]


# --- scoring ----------------------------------------------------------------------------------


class _StoredVerdicts:
    """A grader for ``grade_sample`` that answers each rubric item with the stored verdict.

    The reference grades a response's items through ``common.map_with_progress``, which the
    loader makes a plain loop, so the items come in rubric order; each prompt is checked to
    name the item it is answered for."""

    def __init__(self, sampler_response: type) -> None:
        self._sampler_response = sampler_response
        self._expected: Iterator[tuple[str, bool]] = iter(())

    def expect(self, items: list[Any], verdicts: list[bool]) -> None:
        if len(items) != len(verdicts):
            raise ValueError(f"{len(verdicts)} verdicts for {len(items)} rubric items")
        self._expected = iter(zip((str(item) for item in items), verdicts, strict=True))

    def __call__(self, messages: list[dict[str, str]]) -> Any:
        item, met = next(self._expected)
        if item not in messages[-1]["content"]:
            raise AssertionError(f"the grader was asked about another item than {item!r}")
        answer = json.dumps({"explanation": "The stored verdict.", "criteria_met": met})
        return self._sampler_response(response_text=answer, actual_queried_message_list=messages, response_metadata={})

    def done(self) -> bool:
        return next(self._expected, None) is None


def _plain(value: Any) -> Any:
    """numpy scalars as the JSON numbers they are (a count stays an int)."""
    if isinstance(value, np.integer | int) and not isinstance(value, bool):
        return int(value)
    return float(value)


def scoring_outputs(document: dict[str, Any], modules: dict[str, types.ModuleType]) -> dict[str, Any]:
    """The reference's per-response metrics, run score and run metrics of a scoring file."""
    healthbench = modules["healthbench_eval"]
    reference_types = modules["types"]
    grader = _StoredVerdicts(reference_types.SamplerResponse)
    evaluation = healthbench.HealthBenchEval.__new__(healthbench.HealthBenchEval)  # its __init__ downloads
    evaluation.grader_model = grader
    results, per_response = [], []
    for r, response in enumerate(document["responses"]):
        c = response["conversation"]
        conversation = document["conversations"][c]
        items = [
            healthbench.RubricItem(criterion=f"Criterion {j} of conversation {c}.", points=x["points"], tags=x["tags"])
            for j, x in enumerate(conversation["criteria"])
        ]
        grader.expect(items, response["met"])
        metrics, _, _ = evaluation.grade_sample(
            prompt=[{"role": "user", "content": f"Conversation {c}."}],
            response_text=f"Response {r}.",
            example_tags=conversation["example_tags"],
            rubric_items=items,
        )
        if not grader.done():
            raise AssertionError(f"response {r}: the reference did not grade every rubric item")
        per_response.append({name: _plain(value) for name, value in metrics.items()})
        results.append(reference_types.SingleEvalResult(score=metrics["overall_score"], metrics=metrics))
    # _compute_clipped_stats resamples with np.random.choice: the global generator.
    np.random.seed(document["reference_seed"])
    summary = healthbench._aggregate_get_clipped_mean(results)
    outputs: dict[str, Any] = {
        "reference_score": _plain(summary.score),
        "reference_metrics": {name: _plain(value) for name, value in summary.metrics.items()},
    }
    if "reference_response_metrics" in document:
        outputs["reference_response_metrics"] = per_response
    return outputs


def recompute_scoring(document: dict[str, Any], modules: dict[str, types.ModuleType], samples: Path) -> dict[str, Any]:
    inputs = {
        "description": document["description"],
        "reference": document["reference"],
        "reference_seed": document.get("reference_seed", 0),  # 0 for a file from before it was kept
        "conversations": document["conversations"],
        "responses": document["responses"],
    }
    return {**inputs, **scoring_outputs({**document, **inputs}, modules)}


def render_scoring(document: dict[str, Any]) -> str:
    return json.dumps(document, indent=1) + "\n"


# --- meta-eval ----------------------------------------------------------------------------------


class _StoredLabels:
    """A grader for ``HealthBenchMetaEval.__call__`` that answers each row with its stored label
    (the rows come in order: the loader makes ``map_with_progress`` a plain loop)."""

    def __init__(self, sampler_response: type, labels: list[bool]) -> None:
        self._sampler_response = sampler_response
        self._labels = iter(labels)

    def __call__(self, messages: list[dict[str, str]]) -> Any:
        answer = json.dumps({"explanation": "The stored label.", "criteria_met": next(self._labels)})
        return self._sampler_response(response_text=answer, actual_queried_message_list=messages, response_metadata={})


def _meta_eval(rows: list[dict[str, Any]], labels: list[bool], modules: dict[str, types.ModuleType]) -> Any:
    """``HealthBenchMetaEval.__call__`` on the rows, its grader answering the labels."""
    meta = modules["healthbench_meta_eval"]
    evaluation = meta.HealthBenchMetaEval.__new__(meta.HealthBenchMetaEval)  # its __init__ downloads
    # What the grader is shown does not change a figure; rows of a labels-only file have no text.
    evaluation.examples = [{"prompt": [], "completion": "", "rubric": "", **row} for row in rows]
    evaluation.n_threads = 1
    return evaluation(_StoredLabels(modules["types"].SamplerResponse, labels)).metadata


def meta_eval_outputs(
    rows: list[dict[str, Any]], grader: list[bool | None], modules: dict[str, types.ModuleType]
) -> dict[str, Any]:
    """physician_ids, model and physician of a meta-eval file. The reference grades every row
    (it asks again until the grader says true or false): the grader's side is its run on the
    rows with a label, the physicians' side (which no grader label changes) its run on all rows."""
    labelled = [(row, label) for row, label in zip(rows, grader, strict=True) if label is not None]
    model = _meta_eval([row for row, _ in labelled], [label for _, label in labelled], modules)
    physician = _meta_eval(rows, [bool(label) for label in grader], modules)
    ids = list(dict.fromkeys(pid for row in rows for pid in row["anonymized_physician_ids"]))
    index = {pid: str(i) for i, pid in enumerate(ids)}
    return {
        "physician_ids": ids,
        "model": {name: [m["n"], m["value"]] for name, m in model["model_agreement_metrics"].items()},
        "physician": {
            name: {index[pid]: [m["n"], m["value"]] for pid, m in per.items()}
            for name, per in physician["physician_agreement_metric_lists"].items()
        },
    }


def draw_grader_labels(seed: int, n: int) -> list[bool]:
    """The grader labels of a file built from a public sample: a fair coin per row."""
    rng = random.Random(seed)
    return [rng.random() < 0.5 for _ in range(n)]


def recompute_metaeval(document: dict[str, Any], modules: dict[str, types.ModuleType], samples: Path) -> dict[str, Any]:
    if "rows" in document:  # generated: [category, physician labels, physician ids, grader label]
        rows = [
            {"category": c, "binary_labels": labels, "anonymized_physician_ids": ids}
            for c, labels, ids, _ in document["rows"]
        ]
        grader = [g for *_, g in document["rows"]]
        return {"rows": document["rows"], **meta_eval_outputs(rows, grader, modules)}
    path = samples / Path(document["source"]).name
    if not path.exists():
        raise SamplesUnavailable(f"{path} is absent: the public samples are not on this machine")
    rows = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    grader = draw_grader_labels(document["grader_seed"], len(rows))
    return {
        "source": document["source"],
        "grader_seed": document["grader_seed"],
        "completion_ids": [row["completion_id"] for row in rows],
        "grader": grader,
        **meta_eval_outputs(rows, list(grader), modules),
    }


def render_metaeval(document: dict[str, Any]) -> str:
    return json.dumps(document, separators=(",", ":")) + "\n"


GOLDEN_FILES = {
    **{
        f"scoring/{name}": GoldenFile(
            f"scoring/{name}", FIXTURES / "scoring" / f"{name}.json", recompute_scoring, render_scoring
        )
        for name in ("mixed", "mostly_negative", "bootstrap")
    },
    **{
        f"metaeval/{name}": GoldenFile(
            f"metaeval/{name}", FIXTURES / "metaeval" / f"{name}.json", recompute_metaeval, render_metaeval
        )
        for name in ("edge_cases", "random_small", "random_multi", "meta_eval_sample", "labels_only_sample")
    },
}


def recomputed_text(golden: GoldenFile, modules: dict[str, types.ModuleType], samples: Path = SAMPLES) -> str:
    """The file as the reference's output makes it from the file's own inputs."""
    stored = json.loads(golden.path.read_text())
    return golden.render(golden.recompute(stored, modules, samples))


def differences(golden: GoldenFile, modules: dict[str, types.ModuleType], samples: Path = SAMPLES) -> list[str]:
    """What in the stored file differs from the reference's output: [] when nothing does."""
    stored_text = golden.path.read_text()
    fresh_text = recomputed_text(golden, modules, samples)
    if stored_text == fresh_text:
        return []
    stored, fresh = json.loads(stored_text), json.loads(fresh_text)
    found = [f"{where}: stored {_short(old)}, reference {_short(new)}" for where, old, new in _changed(stored, fresh)]
    return found or ["the values agree but the file is not laid out as scripts/golden_files.py writes it"]


def _changed(stored: dict[str, Any], fresh: dict[str, Any]) -> list[tuple[str, Any, Any]]:
    """(where, stored, recomputed) for each top-level key that differs; within a dict of
    figures, for each figure that does."""
    changed = []
    for key in dict.fromkeys([*stored, *fresh]):
        old, new = stored.get(key), fresh.get(key)
        if old == new:
            continue
        if isinstance(old, dict) and isinstance(new, dict):
            names = dict.fromkeys([*old, *new])
            changed += [
                (f"{key}[{name!r}]", old.get(name), new.get(name)) for name in names if old.get(name) != new.get(name)
            ]
        else:
            changed.append((key, old, new))
    return changed


def _short(value: Any) -> str:
    text = json.dumps(value)
    return text if len(text) <= 80 else text[:77] + "..."

"""Small meta-eval and grader-label rows written for the tests (not the public data)."""

import hashlib
import json

from tests.healthbench_rows import CANARY

CATEGORY = "cluster:hedging_test-uncertainty_hedges"
OTHER_CATEGORY = "cluster:emergency_referrals_test_emergency_behavior"
MESSAGES = [{"content": "I have had a cough for three weeks. Is that normal?", "role": "user"}]


def physician(n: int) -> str:
    """A 64-hex anonymized physician id, as the public file has."""
    return hashlib.sha256(f"test-physician-{n}".encode()).hexdigest()


def rubric(category: str) -> str:
    return f"The response handles {category.removeprefix('cluster:')} as physicians agreed it should."


def meta_row(
    prompt_id: str = "p-1",
    completion_id: str = "c-1",
    category: str = CATEGORY,
    labels: tuple = (True, False),
    physicians: tuple = (0, 1),
    **overrides,
) -> dict:
    data = {
        "anonymized_physician_ids": [physician(n) for n in physicians],
        "binary_labels": list(labels),
        "category": category,
        "completion": f"Response {completion_id}: a cough that lasts three weeks deserves a visit to a doctor.",
        "completion_id": completion_id,
        "prompt": MESSAGES,
        "prompt_id": prompt_id,
        "rubric": rubric(category),
        "canary": CANARY,
    }
    data.update(overrides)
    return data


def grader_row(
    prompt_id: str = "p-1", completion_id: str = "c-1", category: str = CATEGORY, met=True, **overrides
) -> dict:
    data = {
        "prompt_id": prompt_id,
        "completion_id": completion_id,
        "category": category,
        "criteria_met": met,
        "explanation": f"The grader thinks the criterion is {'met' if met is True else 'not met'}.",
    }
    data.update(overrides)
    return data


def grader_rows_for(rows: list[dict], verdicts: list) -> list[dict]:
    return [
        grader_row(r["prompt_id"], r["completion_id"], r["category"], met=v)
        for r, v in zip(rows, verdicts, strict=True)
    ]


def lines(*rows: dict | bytes) -> list[bytes]:
    return [r if isinstance(r, bytes) else json.dumps(r).encode() + b"\n" for r in rows]


def write(path, *rows: dict | bytes) -> None:
    path.write_bytes(b"".join(lines(*rows)))

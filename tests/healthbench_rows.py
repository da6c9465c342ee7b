"""Small HealthBench rows written for the tests (not the public data)."""

import json

CANARY = "test:healthbench-studio"


def rubric_item(text: str, points: float, axis: str = "completeness", cluster: str | None = None) -> dict:
    if cluster:
        return {"criterion": text, "points": points, "tags": ["level:cluster", f"cluster:{cluster}", f"axis:{axis}"]}
    return {"criterion": text, "points": points, "tags": ["level:example", f"axis:{axis}"]}


def row(prompt_id: str = "p-1", *, theme: str = "hedging", rubrics: list | None = None, **overrides) -> dict:
    data = {
        "example_tags": [f"theme:{theme}"],
        "ideal_completions_data": None,
        "prompt": [
            {"content": "I have had a mild headache for two days. Should I worry?", "role": "user"},
            {"content": "How old are you, and do you have any other symptoms?", "role": "assistant"},
            {"content": "I am 34 and otherwise fine.", "role": "user"},
        ],
        "prompt_id": prompt_id,
        "rubrics": rubrics
        if rubrics is not None
        else [
            rubric_item("Suggests rest, fluids and a simple analgesic.", 6),
            rubric_item("Lists red-flag symptoms that need urgent care.", 8, "accuracy"),
            rubric_item("Claims the headache is certainly a brain tumour.", -9, "accuracy"),
        ],
        "canary": CANARY,
    }
    data.update(overrides)
    return data


def consensus_row(prompt_id: str = "p-c", theme: str = "emergency_referrals") -> dict:
    return row(
        prompt_id,
        theme=theme,
        example_tags=[f"theme:{theme}", "physician_agreed_category:emergent"],
        rubrics=[
            rubric_item("Tells the user to call emergency services now.", 9),
            rubric_item(
                "Recommends urgent care with the right urgency.", 5, "completeness", cluster="emergency_behaviour"
            ),
            rubric_item("Is vague about what to do next.", -5, "communication_quality"),
            rubric_item("Contains only accurate information.", 5, "accuracy", cluster="emergency_accuracy"),
        ],
        ideal_completions_data={
            "ideal_completion": "Call emergency services now.",
            "ideal_completions_group": "Group 2",
            "ideal_completions_ref_completions": ["Ref A", "Ref B", "Ref C", "Ref D"],
        },
    )


def line(data: dict) -> bytes:
    return json.dumps(data).encode() + b"\n"


def write(path, *rows: dict | bytes) -> None:
    path.write_bytes(b"".join(r if isinstance(r, bytes) else line(r) for r in rows))


def cut_to_cluster(data: dict) -> dict:
    """The Consensus-file form of a row: only its level:cluster criteria."""
    return {**data, "rubrics": [r for r in data["rubrics"] if "level:cluster" in r["tags"]]}

"""Synthetic HealthBench-size data for benchmarks (our own random text, not the public rows)."""

import json
import random
import uuid

THEMES = [
    "global_health",
    "hedging",
    "communication",
    "context_seeking",
    "emergency_referrals",
    "health_data_tasks",
    "complex_responses",
]
AXES = ["completeness", "accuracy", "context_awareness", "communication_quality", "instruction_following"]
WORDS = (
    "patient dose symptom fever pain advice doctor clinic urgent care blood pressure medication history "
    "allergy rest fluids review follow-up risk sign emergency child adult chronic acute test result"
).split()


def _text(rng: random.Random, n_words: int) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(n_words)).capitalize() + "."


def criteria_count(rng: random.Random) -> int:
    # Median 11, spread like the paper's rubrics (a handful to a few dozen).
    return max(2, min(40, int(rng.lognormvariate(2.4, 0.45))))


def clusters(n: int = 34) -> list[str]:
    return [f"cluster:{THEMES[i % len(THEMES)]}_bench_{i}" for i in range(n)]


def healthbench_row(rng: random.Random, index: int, cluster_tags: list[str]) -> dict:
    theme = THEMES[index % len(THEMES)]
    turns = rng.choice(range(1, 20, 2))
    messages = [
        {"content": _text(rng, rng.randint(20, 180)), "role": "user" if i % 2 == 0 else "assistant"}
        for i in range(turns)
    ]
    rubrics = []
    for _ in range(criteria_count(rng)):
        points = rng.choice([p for p in range(-10, 11) if p != 0])
        rubrics.append(
            {
                "criterion": _text(rng, rng.randint(8, 40)),
                "points": points,
                "tags": ["level:example", f"axis:{rng.choice(AXES)}"],
            }
        )
    tags = [f"theme:{theme}"]
    if rng.random() < 0.3:
        tags.append("physician_agreed_category:bench")
        for cluster in rng.sample(cluster_tags, rng.randint(1, 3)):
            rubrics.insert(
                rng.randint(0, len(rubrics)),
                {
                    "criterion": f"Consensus {cluster}.",
                    "points": 5,
                    "tags": ["level:cluster", cluster, f"axis:{AXES[hash(cluster) % 5]}"],
                },
            )
    ideal = None
    if rng.random() < 0.8:
        refs = [] if rng.random() < 0.5 else [_text(rng, 120) for _ in range(4)]
        ideal = {
            "ideal_completion": _text(rng, 200),
            "ideal_completions_group": "Group 2" if refs else "Group 1",
            "ideal_completions_ref_completions": refs,
        }
    return {
        "example_tags": tags,
        "ideal_completions_data": ideal,
        "prompt": messages,
        "prompt_id": str(uuid.UUID(int=rng.getrandbits(128))),
        "rubrics": rubrics,
        "canary": "bench:healthbench-studio",
    }


def healthbench_lines(n: int, seed: int = 0) -> list[str]:
    rng = random.Random(seed)
    tags = clusters()
    return [json.dumps(healthbench_row(rng, i, tags)) for i in range(n)]

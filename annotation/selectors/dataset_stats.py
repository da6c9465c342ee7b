"""Dataset statistics like the paper's tables, for a live subset or a frozen version.

`summarise` is pure: it takes plain per-conversation facts, so it is tested without a
database; the selectors below gather those facts from either source.
"""

import statistics
from collections import Counter
from dataclasses import dataclass

from annotation.formats.healthbench import AXES
from annotation.models import THEMES, Conversation, Criterion, Subset, SubsetMember, SubsetVersion

BATCH = 1000


@dataclass(frozen=True)
class ConversationFacts:
    theme: str
    turns: int
    characters: int
    criteria: list[tuple[int, list[str]]]  # (points, tags) of each criterion


def _distribution(values: list[int]) -> dict:
    if not values:
        return {"n": 0, "min": None, "median": None, "mean": None, "max": None, "histogram": []}
    counts = Counter(values)
    return {
        "n": len(values),
        "min": min(values),
        "median": statistics.median(values),
        "mean": round(statistics.fmean(values), 2),
        "max": max(values),
        "histogram": sorted(counts.items()),
    }


def _binned(values: list[int], edges: list[int]) -> list[tuple[str, int]]:
    """Counts per bin [edges[i], edges[i+1]), the last bin open-ended."""
    bins = []
    for i, low in enumerate(edges):
        high = edges[i + 1] if i + 1 < len(edges) else None
        label = f"{low}–{high - 1}" if high is not None else f"{low}+"
        bins.append((label, sum(1 for v in values if v >= low and (high is None or v < high))))
    return bins


def summarise(facts: list[ConversationFacts]) -> dict:
    per_theme = Counter(f.theme or "(none)" for f in facts)
    per_axis: Counter = Counter()
    points_per_axis: Counter = Counter()
    levels: Counter = Counter()
    positive = negative = 0
    for f in facts:
        for points, tags in f.criteria:
            axis = next((t[5:] for t in tags if t.startswith("axis:")), "(none)")
            per_axis[axis] += 1
            points_per_axis[axis] += points
            levels["cluster" if "level:cluster" in tags else "example"] += 1
            positive += points > 0
            negative += points < 0
    criteria_counts = [len(f.criteria) for f in facts]
    characters = [f.characters for f in facts]
    return {
        "conversations": len(facts),
        "criteria": sum(criteria_counts),
        "per_theme": [(t, per_theme.get(t, 0)) for t in THEMES]
        + [(t, n) for t, n in per_theme.items() if t not in THEMES],
        "per_axis": [(a, per_axis.get(a, 0), points_per_axis.get(a, 0)) for a in AXES]
        + [(a, n, points_per_axis[a]) for a, n in per_axis.items() if a not in AXES],
        "levels": dict(levels),
        "positive_criteria": positive,
        "negative_criteria": negative,
        "turns": _distribution([f.turns for f in facts]),
        "characters": _distribution(characters)
        | {"bins": _binned(characters, [0, 500, 1000, 2000, 4000, 8000, 16000])},
        "criteria_per_conversation": _distribution(criteria_counts),
    }


def _facts(
    conversations: dict[int, Conversation], rubrics: dict[int, list[tuple[int, list[str]]]]
) -> list[ConversationFacts]:
    return [
        ConversationFacts(
            theme=c.theme,
            turns=len(c.messages),
            characters=sum(len(m["content"]) for m in c.messages),
            criteria=rubrics.get(cid, []),
        )
        for cid, c in conversations.items()
    ]


def subset_stats(subset: Subset) -> dict:
    ids = list(SubsetMember.objects.filter(subset=subset).order_by("id").values_list("conversation_id", flat=True))
    facts: list[ConversationFacts] = []
    for start in range(0, len(ids), BATCH):
        chunk = ids[start : start + BATCH]
        conversations = Conversation.objects.in_bulk(chunk)
        query = Criterion.objects.filter(conversation_id__in=chunk)
        if subset.only_cluster_criteria:
            query = query.filter(level=Criterion.Level.CLUSTER)
        rubrics: dict[int, list] = {}
        for cid, points, tags in query.values_list("conversation_id", "points", "tags"):
            rubrics.setdefault(cid, []).append((points, tags))
        facts.extend(_facts({cid: conversations[cid] for cid in chunk}, rubrics))
    return summarise(facts)


def version_stats(version: SubsetVersion) -> dict:
    members = version.snapshot
    facts: list[ConversationFacts] = []
    for start in range(0, len(members), BATCH):
        chunk = members[start : start + BATCH]
        by_prompt = {c.prompt_id: c for c in Conversation.objects.filter(prompt_id__in=[m["prompt_id"] for m in chunk])}
        conversations = {i: by_prompt[m["prompt_id"]] for i, m in enumerate(chunk)}
        rubrics = {i: [(r["points"], r["tags"]) for r in m["rubrics"]] for i, m in enumerate(chunk)}
        facts.extend(_facts(conversations, rubrics))
    return summarise(facts)

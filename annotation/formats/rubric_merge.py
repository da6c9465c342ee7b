"""Merging a rubric that arrives again (the main, Hard and Consensus files share prompt_ids).

Pure Python. A criterion is identified by its (text, points, tags) and by which occurrence of
that key it is, because real rubrics do repeat a criterion word for word.
"""

from collections import Counter
from collections.abc import Hashable, Sequence
from dataclasses import dataclass


@dataclass(frozen=True)
class MergePlan:
    # The merged rubric in order: ("old", index into existing) or ("new", index into incoming).
    order: list[tuple[str, int]]
    added: int
    # True when both sides had criteria the other lacked: a real conflict, kept as a union.
    conflict: bool
    # (incoming index, existing index) of every incoming criterion that was already stored.
    matches: list[tuple[int, int]]

    @property
    def changed(self) -> bool:
        return self.added > 0 or any(kind == "old" and i != pos for pos, (kind, i) in enumerate(self.order))


def _occurrence_keys(keys: Sequence[Hashable]) -> list[tuple[Hashable, int]]:
    seen: Counter = Counter()
    out = []
    for key in keys:
        out.append((key, seen[key]))
        seen[key] += 1
    return out


def merge_key(text: str, points: int, tags: tuple[str, ...]) -> Hashable:
    """A consensus criterion is itself by its cluster tag (texts repeat across clusters and
    may be stored without their axis); any other criterion by its text, points and tags."""
    for tag in tags:
        if tag.startswith("cluster:"):
            return ("cluster", tag)
    return (text, points, tags)


def plan_rubric_merge(existing: Sequence[Hashable], incoming: Sequence[Hashable]) -> MergePlan:
    """Plan how `incoming` criteria join the `existing` ones, never dropping or doubling one.

    - incoming is contained in existing (a Consensus row after its main row): nothing changes;
    - incoming contains existing (a main row after its Consensus row): take incoming's order;
    - otherwise: incoming's order, then the existing criteria it lacks, in their order.
    """
    old = {k: i for i, k in enumerate(_occurrence_keys(existing))}
    new_keys = _occurrence_keys(incoming)
    matches = [(i, old[k]) for i, k in enumerate(new_keys) if k in old]
    missing_from_existing = [i for i, k in enumerate(new_keys) if k not in old]
    if not missing_from_existing:
        return MergePlan(order=[("old", i) for i in range(len(existing))], added=0, conflict=False, matches=matches)
    matched_old = {old[k] for k in new_keys if k in old}
    order = [("old", old[k]) if k in old else ("new", i) for i, k in enumerate(new_keys)]
    leftovers = [i for i in range(len(existing)) if i not in matched_old]
    order.extend(("old", i) for i in leftovers)
    return MergePlan(order=order, added=len(missing_from_existing), conflict=bool(leftovers), matches=matches)

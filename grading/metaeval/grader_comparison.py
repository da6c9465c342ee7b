"""Grader comparison: several graders' labels on the same physician-labelled items, and the
paired bootstrap difference of their macro F1 against physicians. Plain numpy, no Django.

Inputs follow grading.metaeval.agreement: one MetaEvalLabels (the physicians) and, per
grader, an array of n_items labels (1/0, NaN where it gave none). The macro F1 is the
pairwise one of the reference (every grader label against every physician label of the
item; the mean of the positive and negative classes' F1).

The difference of grader B against grader A resamples the items both labelled, with
replacement, the same draw for both graders (within the category for a category's
difference, across all items for the overall one), and reports B − A at the point and the
percentile interval of the resampled differences. An interval that excludes 0 says the two
graders' agreement with physicians differs beyond the items' sampling noise.
"""

from __future__ import annotations

from typing import TypedDict

import numpy as np
import numpy.typing as npt

from grading.metaeval.agreement import MetaEvalLabels
from grading.metaeval.agreement import macro_f1_from_counts as macro_f1

OVERALL = ""


class Difference(TypedDict):
    value: float | None  # macro F1 of B minus that of A; None where either is undefined
    low: float | None
    high: float | None
    n_items: int  # items both graders labelled
    n_defined: int  # resamples in which both macro F1s were defined
    n_resamples: int


def _item_tallies(labels: MetaEvalLabels) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64], npt.NDArray[np.int64]]:
    """Per item: physicians saying met, saying not met, and the item's category code."""
    yes = np.bincount(labels.item, weights=labels.label.astype(float), minlength=labels.n_items).astype(np.int64)
    total = np.bincount(labels.item, minlength=labels.n_items).astype(np.int64)
    category = np.full(labels.n_items, -1, dtype=np.int64)
    category[labels.item] = labels.category
    return yes, total - yes, category


def _cells(said: npt.NDArray[np.float64], yes: npt.NDArray[np.int64], no: npt.NDArray[np.int64]) -> npt.NDArray:
    """Per item, its pairs in agreement's cell order (TN, FN, FP, TP): the grader's label
    against each physician's."""
    g = said.astype(float)
    return np.stack([(1 - g) * no, (1 - g) * yes, g * no, g * yes], axis=-1)


def paired_f1_differences(
    labels: MetaEvalLabels,
    grader_a: npt.ArrayLike,
    grader_b: npt.ArrayLike,
    *,
    n_resamples: int = 1000,
    confidence: float = 0.95,
    seed: int | np.random.Generator | None = None,
) -> dict[str, Difference]:
    """B − A in macro F1, per category name and overall (key ``""``), with paired bootstrap intervals."""
    if not 0 < confidence < 1:
        raise ValueError("confidence must lie strictly between 0 and 1")
    rng = np.random.default_rng(seed)
    a = np.asarray(grader_a, dtype=float)
    b = np.asarray(grader_b, dtype=float)
    yes, no, category = _item_tallies(labels)
    shared = np.flatnonzero(~np.isnan(a) & ~np.isnan(b) & (yes + no > 0))
    cells_a = _cells(a[shared], yes[shared], no[shared])
    cells_b = _cells(b[shared], yes[shared], no[shared])
    item_category = category[shared]
    tail = (1 - confidence) / 2
    scopes: list[tuple[str, npt.NDArray[np.intp]]] = [(OVERALL, np.arange(shared.size))]
    scopes += [(name, np.flatnonzero(item_category == code)) for code, name in enumerate(labels.category_names)]
    out: dict[str, Difference] = {}
    for name, members in scopes:
        if members.size == 0:
            continue
        point = macro_f1(cells_b[members].sum(axis=0)) - macro_f1(cells_a[members].sum(axis=0))
        # The same multinomial draw of the scope's items for both graders: the pairing.
        weights = rng.multinomial(members.size, np.full(members.size, 1 / members.size), size=n_resamples)
        boot = macro_f1(weights @ cells_b[members]) - macro_f1(weights @ cells_a[members])
        defined = boot[~np.isnan(boot)]
        low, high = (float(x) for x in np.quantile(defined, [tail, 1 - tail])) if defined.size else (None, None)
        undefined = bool(np.isnan(point))
        out[name] = {
            "value": None if undefined else float(point),
            "low": None if undefined else low,
            "high": None if undefined else high,
            "n_items": int(members.size),
            "n_defined": int(defined.size),
            "n_resamples": int(n_resamples),
        }
    return out

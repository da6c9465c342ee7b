"""HealthBench scores from grades: per-response metrics, run metrics and the extra reports.

Plain numpy, no Django: views, commands, tasks and the API all pass arrays and get plain
dicts. The semantics are those of openai/simple-evals ``healthbench_eval.py``; the golden
tests in ``tests/test_scoring.py`` hold us to its numbers.

* The scored unit is one graded *response* (the reference calls it an example). Its score is
  the points of the met criteria over the sum of positive points, so it can be negative, and
  it does not exist when the rubric has no positive points.
* Every example tag of the conversation (``theme:...``) gets the response's score. Every
  rubric tag (``axis:...``, ``cluster:...``, ``level:...``) gets the score over only the
  criteria carrying it, and only when at least one of those has positive points.
* A run metric is the mean over the responses that have it, clipped to [0, 1] after
  averaging, with ``<name>:n_samples`` and ``<name>:bootstrap_std`` (std of the clipped
  means of 1000 resamples of those responses).
* The reference also reports a top-level ``score``: the clipped mean of the same per-response
  values as ``overall_score``. Because it pops only that mean, its ``metrics`` keep stray
  ``score:n_samples`` and ``score:bootstrap_std`` keys. :func:`aggregate` returns the metrics
  without these duplicates; :func:`reference_summary` adds them back for simple-evals files.
* A failed or pending grade is missing, never "not met": a response with any missing grade
  is left out of every score and counted as incomplete.

How the bootstrap std is drawn (per metric, shared, multinomial, one draw) is
``grading/reports/bootstrap.py``.
"""

from __future__ import annotations

import zlib
from collections.abc import Iterable, Mapping, Sequence
from typing import NamedTuple, TypedDict

import numpy as np
import numpy.typing as npt

from grading.reports.bootstrap import (
    MULTINOMIAL,
    N_RESAMPLES,
    ONE_DRAW,
    PER_METRIC,
    SHARED,
    FloatArray,
    IntArray,
    bootstrap_std,
    multinomial_bootstrap_stds,
    one_draw_bootstrap_stds,
    shared_bootstrap_stds,
)

OVERALL = "overall_score"
MET, NOT_MET, MISSING = 1, 0, -1  # codes of ``grade_met`` in the bulk path


def _check_unique(tags: Sequence[str], what: str) -> None:
    # The reference asserts this; a repeated tag would count its criterion twice.
    if len(set(tags)) != len(tags):
        raise ValueError(f"{what} repeat a tag: {list(tags)}")


# --- one response -------------------------------------------------------------------------


def example_score(points: npt.ArrayLike, met: npt.ArrayLike) -> float | None:
    """Met points over positive points, or None when no criterion has positive points."""
    pts = np.asarray(points, dtype=np.float64)
    hit = np.asarray(met, dtype=bool)
    if pts.shape != hit.shape:
        raise ValueError("points and met must have the same length")
    possible = pts[pts > 0].sum()
    if possible <= 0:
        return None
    return float(pts[hit].sum() / possible)


def example_metrics(
    points: npt.ArrayLike,
    met: npt.ArrayLike,
    criterion_tags: Sequence[Sequence[str]],
    example_tags: Sequence[str],
) -> dict[str, float]:
    """All metrics of one graded response: ``overall_score``, example tags, rubric tags.

    A rubric tag whose criteria are all negative gets no entry. If a rubric tag has the
    name of an example tag, the rubric score wins, as in the reference.
    """
    pts = np.asarray(points, dtype=np.float64)
    hit = np.asarray(met, dtype=bool)
    if len(criterion_tags) != pts.size:
        raise ValueError("one tag list per criterion is needed")
    overall = example_score(pts, hit)
    if overall is None:
        raise ValueError("the rubric has no criterion with positive points")
    _check_unique(example_tags, "example tags")
    metrics = {OVERALL: overall, **dict.fromkeys(example_tags, overall)}
    members: dict[str, list[int]] = {}
    for i, tags in enumerate(criterion_tags):
        _check_unique(tags, f"tags of criterion {i}")
        for tag in tags:
            members.setdefault(tag, []).append(i)
    for tag, rows in members.items():
        score = example_score(pts[rows], hit[rows])
        if score is not None:
            metrics[tag] = score
    return metrics


# --- run metrics --------------------------------------------------------------------------


def clipped_mean(values: npt.ArrayLike) -> float:
    """Mean of the values, then clipped to [0, 1]: one bad response can pull it below 0."""
    v = np.asarray(values, dtype=np.float64)
    if v.size == 0:
        raise ValueError("no values to average")
    return float(np.clip(v.mean(), 0.0, 1.0))


def _summarise(columns: Iterable[tuple[str, FloatArray]], n_resamples: int, seed: int | None) -> dict[str, float | int]:
    out: dict[str, float | int] = {}
    for name, values in columns:
        # One random stream per metric name, so that a metric's std does not change when
        # the run gains another tag or the metrics come in another order.
        rng = np.random.default_rng(None if seed is None else [seed, zlib.crc32(name.encode())])
        out[name] = clipped_mean(values)
        out[f"{name}:n_samples"] = int(values.size)
        out[f"{name}:bootstrap_std"] = bootstrap_std(values, n_resamples=n_resamples, seed=rng)
    return out


def aggregate(
    per_response: Iterable[Mapping[str, float]],
    *,
    n_resamples: int = N_RESAMPLES,
    seed: int | None = None,
) -> dict[str, float | int]:
    """Run metrics from per-response metric dicts (as returned by :func:`example_metrics`)."""
    columns: dict[str, list[float]] = {}
    for metrics in per_response:
        for name, value in metrics.items():
            columns.setdefault(name, []).append(value)
    arrays = ((name, np.asarray(v, dtype=np.float64)) for name, v in columns.items())
    return _summarise(arrays, n_resamples, seed)


def aggregate_columns(
    columns: Mapping[str, npt.ArrayLike],
    *,
    n_resamples: int = N_RESAMPLES,
    seed: int | None = None,
    method: str = PER_METRIC,
) -> dict[str, float | int]:
    """Run metrics from per-response columns in which NaN means "this response lacks it".

    ``method`` is how the bootstrap std is drawn: ``PER_METRIC`` (a random stream per metric
    name, :func:`bootstrap_std`), ``MULTINOMIAL`` (one multinomial resampling per set of
    examples, :func:`multinomial_bootstrap_stds`), ``ONE_DRAW`` (the same distribution from one
    draw per resample, :func:`one_draw_bootstrap_stds`) or ``SHARED`` (one Poisson-weighted
    resampling of the responses for every metric, :func:`shared_bootstrap_stds`); the means
    and counts are the same either way."""
    if method == PER_METRIC:
        arrays = []
        for name, column in columns.items():
            values = np.asarray(column, dtype=np.float64)
            values = values[~np.isnan(values)]
            if values.size:
                arrays.append((name, values))
        return _summarise(arrays, n_resamples, seed)
    draws = {SHARED: shared_bootstrap_stds, MULTINOMIAL: multinomial_bootstrap_stds, ONE_DRAW: one_draw_bootstrap_stds}
    if method not in draws:
        raise ValueError(f"unknown bootstrap method {method!r}")
    # In name order, so that the draws do not depend on the order the metrics came in.
    named = [(name, np.asarray(column, dtype=np.float64)) for name, column in sorted(columns.items())]
    named = [(name, values) for name, values in named if not np.isnan(values).all()]
    if not named:
        return {}
    matrix = np.stack([values for _, values in named], axis=1)
    # Responses with no metric at all (left out of the scores) take no part in the resampling.
    matrix = matrix[~np.isnan(matrix).all(axis=1)]
    stds = draws[method](matrix, n_resamples=n_resamples, seed=seed)
    out: dict[str, float | int] = {}
    for (name, values), std in zip(named, stds.tolist(), strict=True):
        kept = values[~np.isnan(values)]
        out[name] = clipped_mean(kept)
        out[f"{name}:n_samples"] = int(kept.size)
        out[f"{name}:bootstrap_std"] = float(std)
    return out


def reference_summary(metrics: Mapping[str, float | int]) -> dict[str, float | int]:
    """The metrics as simple-evals writes its results JSON: plus ``score*`` keys, sorted.

    Its ``score:bootstrap_std`` comes from a second, independent bootstrap of the same
    values; ours repeats the ``overall_score`` one, which has the same distribution.
    """
    out = dict(metrics)
    for suffix in ("", ":n_samples", ":bootstrap_std"):
        out[f"score{suffix}"] = metrics[f"{OVERALL}{suffix}"]
    return dict(sorted(out.items()))


# --- HealthBench Professional's length adjustment --------------------------------------

LENGTH_UNIT = 500  # characters per step of the penalty
LENGTH_ADJUSTED = "_length_adjusted"
# Metrics that get a length-adjusted twin: the ones read per response (overall and example
# tags) and the axes. A cluster score covers one criterion; shifting it by the length of the
# whole response would say nothing about that criterion. A HealthBench Professional row's labels
# are example tags too (annotation.formats.professional.LABELS).
LENGTH_ADJUSTED_PREFIXES = (
    "theme:",
    "axis:",
    "physician_agreed_category:",
    "use_case:",
    "type:",
    "difficulty:",
    "specialty:",
)


def length_adjusted(scores: npt.ArrayLike, lengths: npt.ArrayLike, *, centre: float, penalty: float) -> FloatArray:
    """``score - penalty * (length - centre) / 500`` per response; NaN stays NaN.

    A response longer than ``centre`` characters loses ``penalty`` per 500 extra characters
    and a shorter one gains as much, before any averaging (the run metric is the clipped mean
    of these, as for the plain score)."""
    s = np.asarray(scores, dtype=np.float64)
    n = np.asarray(lengths, dtype=np.float64)
    if s.shape != n.shape:
        raise ValueError("scores and lengths must have the same length")
    return s - penalty * (n - centre) / LENGTH_UNIT


def length_adjusted_columns(
    metrics: Mapping[str, FloatArray], lengths: npt.ArrayLike, *, centre: float, penalty: float
) -> dict[str, FloatArray]:
    """The length-adjusted twin ``<name>_length_adjusted`` of overall_score, the example tags and
    the axes, from per-response columns (NaN where a response lacks the metric)."""
    return {
        f"{name}{LENGTH_ADJUSTED}": length_adjusted(column, lengths, centre=centre, penalty=penalty)
        for name, column in metrics.items()
        if name == OVERALL or name.startswith(LENGTH_ADJUSTED_PREFIXES)
    }


# --- the bulk path ------------------------------------------------------------------------


class TagTable(NamedTuple):
    """Tags of numbered rows in CSR form: row i has ``names[c]`` for each c in
    ``codes[indptr[i]:indptr[i + 1]]``. No row repeats a code."""

    indptr: IntArray
    codes: IntArray
    names: list[str]


def encode_tags(tag_lists: Sequence[Sequence[str]]) -> TagTable:
    """Number the tag strings of each row (criteria or conversations) into a TagTable."""
    numbering: dict[str, int] = {}
    codes: list[int] = []
    indptr = [0]
    for i, tags in enumerate(tag_lists):
        _check_unique(tags, f"tags of row {i}")
        codes.extend(numbering.setdefault(tag, len(numbering)) for tag in tags)
        indptr.append(len(codes))
    return TagTable(np.asarray(indptr, dtype=np.intp), np.asarray(codes, dtype=np.intp), list(numbering))


def _expand(table: TagTable, rows: IntArray) -> tuple[IntArray, IntArray]:
    """(position in ``rows``, tag code) for every tag of every entry of ``rows``."""
    starts = table.indptr[rows]
    counts = table.indptr[rows + 1] - starts
    owner = np.repeat(np.arange(rows.size), counts)
    first = np.cumsum(counts) - counts
    offset = np.arange(owner.size) - first[owner]
    return owner, table.codes[starts[owner] + offset]


def _rubric_tag_sums(
    table: TagTable, rows: IntArray, responses: IntArray, possible: FloatArray, achieved: FloatArray, n: int
) -> tuple[FloatArray, FloatArray]:
    """Per (rubric tag, response): the sums of ``possible`` and ``achieved`` over the grades whose
    criterion carries the tag, each (tags x n).

    A run has a few dozen distinct tag lists, so the grades are first summed per (tag list,
    response) and the lists then spread onto their tags by a small 0/1 matrix product, instead
    of a copy of every grade per tag it carries. The sums are of whole points, exact either
    way. A run with very many distinct lists (an odd import) takes the copying path, whose
    memory grows with the grades rather than with lists x responses."""
    n_rows, n_tags = table.indptr.size - 1, len(table.names)

    def sums(cell: IntArray, weights: FloatArray, height: int) -> FloatArray:
        return np.bincount(cell, weights, height * n).astype(np.float64, copy=False).reshape(height, n)

    if n_rows * n > 4 * rows.size + 1024:
        owner, codes = _expand(table, rows)
        cell = codes * n + responses[owner]
        return sums(cell, possible[owner], n_tags), sums(cell, achieved[owner], n_tags)
    cell = rows * n + responses
    row_possible, row_achieved = sums(cell, possible, n_rows), sums(cell, achieved, n_rows)
    owner, codes = _expand(table, np.arange(n_rows, dtype=np.intp))
    membership = np.zeros((n_tags, n_rows))
    membership[codes, owner] = 1.0
    return membership @ row_possible, membership @ row_achieved


class ResponseScores(TypedDict):
    metrics: dict[str, FloatArray]  # name -> one value per response, NaN where absent
    scored: npt.NDArray[np.bool_]  # responses that count in every metric
    n_responses: int
    n_scored: int
    n_incomplete: int  # at least one grade missing (failed, pending or absent)
    n_unscorable: int  # complete, but no criterion with positive points
    n_missing_grades: int


def score_grades(
    *,
    grade_response: npt.ArrayLike,
    grade_criterion: npt.ArrayLike,
    grade_points: npt.ArrayLike,
    grade_met: npt.ArrayLike,
    response_conversation: npt.ArrayLike,
    criterion_tags: TagTable,
    conversation_tags: TagTable,
    expected_grades: npt.ArrayLike | None = None,
) -> ResponseScores:
    """Every per-response metric of a run at once, vectorised over grades.

    Array layout (R responses, G grades; indices are dense 0-based positions):

    * ``grade_response`` (G,) int: the response each grade belongs to, in [0, R).
    * ``grade_criterion`` (G,) int: the criterion graded, a row of ``criterion_tags``.
    * ``grade_points`` (G,) number: the points the grade was made with (grades keep them).
    * ``grade_met`` (G,) int: ``MET`` (1), ``NOT_MET`` (0) or ``MISSING`` (-1) for a grade
      that failed or has not come back yet.
    * ``response_conversation`` (R,) int: the conversation of each response, a row of
      ``conversation_tags`` (example tags).
    * ``criterion_tags`` / ``conversation_tags``: :class:`TagTable` (see :func:`encode_tags`).
    * ``expected_grades`` (R,) int, optional: how many criteria each response should have
      been graded on; a response with fewer grade rows is incomplete.

    Grades need no order. Work and memory are O(G x tags per criterion + R x distinct tags).
    A response counts only when complete with positive points; others are NaN everywhere.
    """
    resp = np.asarray(grade_response, dtype=np.intp)
    crit = np.asarray(grade_criterion, dtype=np.intp)
    points = np.asarray(grade_points, dtype=np.float64)
    met = np.asarray(grade_met)
    conversation = np.asarray(response_conversation, dtype=np.intp)
    n = conversation.size
    if not resp.shape == crit.shape == points.shape == met.shape:
        raise ValueError("grade arrays must have the same length")
    for index, bound, what in (
        (resp, n, "grade_response"),
        (crit, criterion_tags.indptr.size - 1, "grade_criterion"),
        (conversation, conversation_tags.indptr.size - 1, "response_conversation"),
    ):
        # A negative index would silently wrap around instead of failing.
        if index.size and (index.min() < 0 or index.max() >= bound):
            raise ValueError(f"{what} holds an index out of range")
    if not np.isin(met, (MET, NOT_MET, MISSING)).all():
        raise ValueError("grade_met must hold MET, NOT_MET or MISSING codes")

    missing = met == MISSING
    incomplete = np.bincount(resp[missing], minlength=n) > 0
    if expected_grades is not None:
        expected = np.asarray(expected_grades, dtype=np.intp)
        present = np.bincount(resp, minlength=n)
        if (present > expected).any():
            raise ValueError("a response has more grades than expected_grades")
        incomplete |= present < expected
    positive = np.where(points > 0, points, 0.0)
    earned = np.where(met == MET, points, 0.0)
    possible = np.bincount(resp, positive, minlength=n)
    achieved = np.bincount(resp, earned, minlength=n)
    scored = ~incomplete & (possible > 0)
    overall = np.full(n, np.nan)
    overall[scored] = achieved[scored] / possible[scored]
    metrics: dict[str, FloatArray] = {OVERALL: overall}

    rows = np.flatnonzero(scored)
    owner, codes = _expand(conversation_tags, conversation[rows])
    by_example_tag = np.full((len(conversation_tags.names), n), np.nan)
    by_example_tag[codes, rows[owner]] = overall[rows[owner]]
    for code in np.unique(codes):
        metrics[conversation_tags.names[code]] = by_example_tag[code]

    # Only grades of scored responses matter from here on.
    keep = np.flatnonzero(scored[resp])
    tag_possible, tag_achieved = _rubric_tag_sums(
        criterion_tags, crit[keep], resp[keep], positive[keep], earned[keep], n
    )
    has_score = tag_possible > 0
    by_rubric_tag = np.full(tag_possible.shape, np.nan)
    np.divide(tag_achieved, tag_possible, out=by_rubric_tag, where=has_score)
    for code in np.flatnonzero(has_score.any(axis=1)):
        name = criterion_tags.names[code]
        if name in metrics:
            metrics[name] = np.where(has_score[code], by_rubric_tag[code], metrics[name])
        else:
            metrics[name] = by_rubric_tag[code]

    n_incomplete = int(incomplete.sum())
    return ResponseScores(
        metrics=metrics,
        scored=scored,
        n_responses=n,
        n_scored=int(scored.sum()),
        n_incomplete=n_incomplete,
        n_unscorable=n - n_incomplete - int(scored.sum()),
        n_missing_grades=int(missing.sum()),
    )


# --- beyond the reference -----------------------------------------------------------------


def min_weights(n: int) -> FloatArray:
    """``W[k - 1, i]``: the chance that the i-th smallest of n values (0-based) is the minimum
    of a uniformly random k-subset, ``C(n-1-i, k-1) / C(n, k)``. Built from the neighbour
    ratio ``(n-i-k) / (n-1-i)``, in [0, 1], so large n cannot overflow as binomials would."""
    if n < 1:
        raise ValueError("n must be at least 1")
    k = np.arange(1, n + 1, dtype=np.float64)[:, None]
    i = np.arange(n - 1, dtype=np.float64)[None, :]
    ratios = np.clip((n - i - k) / (n - 1 - i), 0.0, None)
    weights = np.empty((n, n))
    weights[:, :1] = k / n
    weights[:, 1:] = (k / n) * np.cumprod(ratios, axis=1)
    return weights


def worst_at_k(scores: npt.ArrayLike, conversation: npt.ArrayLike, *, clip: bool = True) -> dict[int, float]:
    """Expected worst score among k samples of a conversation, averaged over conversations.

    Per response ``scores`` (NaN, i.e. unscored, are dropped) and ``conversation``. The
    expectation over all k-subsets of a conversation's n scored samples is exact. k runs
    from 1 to the smallest such n, so every point averages the same conversations and the
    curve never rises. ``clip`` clips the means to [0, 1] like every HealthBench score
    (k = 1 is then ``overall_score`` when all conversations have the same n)."""
    values = np.asarray(scores, dtype=np.float64)
    groups = np.asarray(conversation, dtype=np.intp)
    keep = ~np.isnan(values)
    values, groups = values[keep], groups[keep]
    if values.size == 0:
        return {}
    order = np.lexsort((values, groups))
    values, groups = values[order], groups[order]
    starts = np.flatnonzero(np.r_[True, groups[1:] != groups[:-1]])
    sizes = np.diff(np.r_[starts, values.size])
    rank = np.arange(values.size) - np.repeat(starts, sizes)
    size_of = np.repeat(sizes, sizes)
    k_max = int(sizes.min())
    totals = np.zeros(k_max)
    for size in np.unique(sizes):
        rows = size_of == size
        totals += min_weights(int(size))[:k_max, rank[rows]] @ values[rows]
    means = totals / starts.size
    if clip:
        means = np.clip(means, 0.0, 1.0)
    return {k: float(mean) for k, mean in enumerate(means, start=1)}


def criterion_error_rates(
    *,
    grade_criterion: npt.ArrayLike,
    grade_points: npt.ArrayLike,
    grade_met: npt.ArrayLike,
    criterion_tags: TagTable,
    prefix: str = "cluster:",
) -> dict[str, dict[str, float | int | None]]:
    """How often responses get each consensus criterion wrong, by its ``cluster:`` tag.

    Grade arrays are as in :func:`score_grades`. An error is a grade that cost points: a
    positive criterion not met or a negative one ("fails to refer ...") met, so the rate
    reads the same whatever the sign. Missing grades are counted, but are neither errors
    nor in the denominator. Each grade counts even if its response is incomplete."""
    crit = np.asarray(grade_criterion, dtype=np.intp)
    positive = np.asarray(grade_points, dtype=np.float64) > 0
    met = np.asarray(grade_met)
    picked = [code for code, name in enumerate(criterion_tags.names) if name.startswith(prefix)]
    slot = np.full(len(criterion_tags.names), -1, dtype=np.intp)
    slot[picked] = np.arange(len(picked))
    # Counted per tag list first (a run has a few dozen), then spread onto the lists' tags:
    # whole counts, the same as counting every grade once per tag it carries.
    n_rows = criterion_tags.indptr.size - 1
    graded = met != MISSING
    error = graded & ((met == MET) != positive)
    row_graded = np.bincount(crit, graded, minlength=n_rows)
    row_errors = np.bincount(crit, error, minlength=n_rows)
    row_missing = np.bincount(crit, minlength=n_rows) - row_graded
    owner, codes = _expand(criterion_tags, np.arange(n_rows, dtype=np.intp))
    hits = slot[codes] >= 0
    owner, key = owner[hits], slot[codes[hits]]
    n_graded = np.bincount(key, row_graded[owner], minlength=len(picked))
    n_errors = np.bincount(key, row_errors[owner], minlength=len(picked))
    n_missing = np.bincount(key, row_missing[owner], minlength=len(picked))
    return {
        criterion_tags.names[code]: {
            "error_rate": float(n_errors[j] / n_graded[j]) if n_graded[j] else None,
            "n_errors": int(n_errors[j]),
            "n_graded": int(n_graded[j]),
            "n_missing": int(n_missing[j]),
        }
        for j, code in enumerate(picked)
    }


def length_score_correlation(lengths: npt.ArrayLike, scores: npt.ArrayLike) -> float | None:
    """Pearson correlation of response length (characters) with score; NaN pairs dropped.

    None when undefined: under two pairs, or a constant side (tested exactly: the float
    mean of equal values can be one ulp off and turn zero variance into noise)."""
    x = np.asarray(lengths, dtype=np.float64)
    y = np.asarray(scores, dtype=np.float64)
    if x.shape != y.shape:
        raise ValueError("lengths and scores must have the same length")
    keep = ~(np.isnan(x) | np.isnan(y))
    x, y = x[keep], y[keep]
    if x.size < 2 or np.ptp(x) == 0 or np.ptp(y) == 0:
        return None
    dx, dy = x - x.mean(), y - y.mean()
    r = (dx @ dy) / np.sqrt((dx @ dx) * (dy @ dy))
    return float(np.clip(r, -1.0, 1.0))

"""Selectors: a run's grades out of the database, as the arrays grading.reports.scoring wants.

A paper-size run has ~900,000 grades. Model instances, or Django's row iterator with a
json.loads per JSON field, would cost far more than the scoring itself, so the queries are
built with the ORM (portable SQL) and run on a plain cursor, JSON columns come back as text,
and tag lists are numbered through a dict: a run has only a few dozen distinct ones.
"""

from collections.abc import Sequence
from dataclasses import dataclass
from operator import itemgetter
from typing import Any

import numpy as np
import numpy.typing as npt
from django.contrib.postgres.aggregates import StringAgg
from django.db import connection
from django.db.models import Case, Count, IntegerField, Min, Q, QuerySet, TextField, Value, When
from django.db.models.expressions import RawSQL
from django.db.models.functions import Cast, Length

from annotation.formats.validation import loads_repaired
from annotation.models import Conversation
from grading import plans
from grading.models import Grade, Response, Run
from grading.reports import scoring


@dataclass(frozen=True)
class RunGrades:
    """Everything a report needs about one run, dense-indexed (R responses, G grades, C conversations)."""

    response_ids: npt.NDArray[np.int64]  # (R,) database ids, ascending
    response_conversation: npt.NDArray[np.intp]  # (R,) row of conversation_ids
    response_length: npt.NDArray[np.float64]  # (R,) characters of the response text
    conversation_ids: npt.NDArray[np.int64]  # (C,)
    conversation_tag_row: npt.NDArray[np.intp]  # (C,) row of conversation_tags: one per distinct tag list
    grade_response: npt.NDArray[np.intp]  # (G,) row of response_ids
    grade_criterion: npt.NDArray[np.intp]  # (G,) row of criterion_tags: one row per distinct tag list
    grade_points: npt.NDArray[np.float64]
    grade_met: npt.NDArray[np.int8]  # scoring.MET / NOT_MET / MISSING (failed)
    criterion_tags: scoring.TagTable
    conversation_tags: scoring.TagTable
    expected_grades: npt.NDArray[np.intp] | None  # (R,) None: the grade rows are the whole rubric
    n_reused: int
    n_refused: int = 0  # responses that are a policy model's refusal (Response.refused)
    n_truncated: int = 0  # responses cut off at their output limit (Response.truncated)

    def score_arrays(self) -> dict[str, Any]:
        """The keyword arguments of scoring.score_grades."""
        return {
            "grade_response": self.grade_response,
            "grade_criterion": self.grade_criterion,
            "grade_points": self.grade_points,
            "grade_met": self.grade_met,
            "response_conversation": self.conversation_tag_row[self.response_conversation],
            "criterion_tags": self.criterion_tags,
            "conversation_tags": self.conversation_tags,
            "expected_grades": self.expected_grades,
        }


def _fetch(queryset: QuerySet) -> list[tuple]:
    # Django's iterator fetches 100 rows at a time and runs per-row Python; fetchall on a
    # plain cursor hands back every tuple at C speed. The SQL is still the ORM's.
    sql, params = queryset.query.sql_with_params()
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        return cursor.fetchall()


def _column(rows: list[tuple], i: int, dtype) -> np.ndarray:
    return np.fromiter(map(itemgetter(i), rows), dtype=dtype, count=len(rows))


def _tag_table(texts: Sequence[str]) -> tuple[npt.NDArray[np.intp], scoring.TagTable]:
    """Number JSON tag-list texts: (row of each text, TagTable of the distinct lists)."""
    numbering = {text: i for i, text in enumerate(dict.fromkeys(texts))}
    rows = np.fromiter(map(numbering.__getitem__, texts), dtype=np.intp, count=len(texts))
    return rows, scoring.encode_tags([loads_repaired(t) for t in numbering])


def _chunk_size() -> int:
    # SQLite allows 999 variables per query in old builds; PostgreSQL takes long IN lists.
    return 900 if connection.vendor == "sqlite" else 10_000


def _responses_of(run: Run) -> QuerySet:
    # A semi-join on the (run, response) index: an id list of 80,000 would be slower to send.
    return Response.objects.filter(id__in=Grade.objects.filter(run=run).values("response_id")).order_by()


def _by_conversation(queryset: QuerySet, key: str, conversation_ids: list[int]) -> list[tuple]:
    """The rows of `queryset` whose `key` is one of `conversation_ids`, in chunks."""
    size = _chunk_size()
    rows: list[tuple] = []
    for start in range(0, len(conversation_ids), size):
        rows += _fetch(queryset.filter(**{f"{key}__in": conversation_ids[start : start + size]}))
    return rows


def _expected_grades(run: Run, response_ids: np.ndarray, conversation_ids: list[int], prompt_ids: list[str]):
    """How many grades each response should have, by the run's plan (grading.plans).

    Returns (per response or None, per conversation or None); None means the grade rows
    are the whole plan (an imported run, or one recorded before plans):

    * a re-grade: as many grades as its source run holds for each response;
    * a run on a frozen subset version: the conversation's criteria in the version's
      snapshot (only the level:cluster ones on the Consensus subset);
    * a run of rubric changes: the criteria frozen for the conversation at launch;
    * a run of the physician-labelled items: the criteria frozen for the response at launch.
    """
    if run.plan == Run.Plan.SOURCE_RUN:
        counts = plans.source_counts(run, response_ids.tolist())
        return np.array([counts.get(int(r), 0) for r in response_ids], dtype=np.intp), None
    if run.plan == Run.Plan.SUBSET_VERSION:
        per_prompt = plans.version_counts(run)
        return None, np.array([per_prompt.get(p, 0) for p in prompt_ids], dtype=np.intp)
    if run.plan == Run.Plan.RUBRIC_CHANGES:
        rubric = run.plan_rubric or {}
        return None, np.array([len(rubric.get(str(c), [])) for c in conversation_ids], dtype=np.intp)
    if run.plan == Run.Plan.LABELLED:
        rubric = run.plan_rubric or {}
        return np.array([len(rubric.get(str(int(r)), [])) for r in response_ids], dtype=np.intp), None
    return None, None


# (response id, points, met code, row of the tag list) per grade, the distinct tag-list texts
# and how many grades were reused.
GradeColumns = tuple[
    npt.NDArray[np.int64], npt.NDArray[np.float64], npt.NDArray[np.int8], npt.NDArray[np.intp], list[str], int
]


def _grade_columns_by_row(grades: QuerySet, met_code) -> GradeColumns:
    """The grade columns a row at a time (SQLite)."""
    rows = _fetch(grades.values_list("response_id", "points", met_code, Cast("tags", TextField()), "reused"))
    texts = list(map(itemgetter(3), rows))
    numbering = {text: i for i, text in enumerate(dict.fromkeys(texts))}
    return (
        _column(rows, 0, np.int64),
        _column(rows, 1, np.float64),
        _column(rows, 2, np.int8),
        np.fromiter(map(numbering.__getitem__, texts), dtype=np.intp, count=len(texts)),
        list(numbering),
        int(sum(map(itemgetter(4), rows))),
    )


def _grade_columns_aggregated(grades: QuerySet, met_code) -> GradeColumns:
    """The same columns in a few rows on PostgreSQL, one per distinct tag list (a run has a few
    dozen): each column of a group joined into one text by the database and parsed by numpy
    at C speed, instead of a Python tuple per grade, which was most of the cost of loading a
    paper-size run. One aggregate pass feeds every column of a group the same rows in the
    same order, so the columns stay aligned."""
    groups = list(
        grades.values("tags")
        .annotate(
            tags_text=Cast("tags", TextField()),
            # The physical position of the group's first row: groups then come in the order a
            # row-by-row read meets their tag lists (that order numbers the tags).
            first=Min(RawSQL("ctid", ()), output_field=TextField()),
            response=StringAgg(Cast("response_id", TextField()), ","),
            points_text=StringAgg(Cast("points", TextField()), ","),
            met=StringAgg(Cast(met_code, TextField()), ","),
            n=Count("id"),
            n_reused=Count("id", filter=Q(reused=True)),
        )
        .values_list("tags_text", "response", "points_text", "met", "n", "n_reused")
        .order_by("first")
    )
    if not groups:
        return np.empty(0, np.int64), np.empty(0), np.empty(0, np.int8), np.empty(0, np.intp), [], 0

    def joined(column: int, dtype) -> np.ndarray:
        return np.fromstring(",".join(g[column] for g in groups), dtype=dtype, sep=",")

    return (
        joined(1, np.int64),
        joined(2, np.float64),
        joined(3, np.int8),
        np.repeat(np.arange(len(groups), dtype=np.intp), [g[4] for g in groups]),
        [g[0] for g in groups],
        sum(g[5] for g in groups),
    )


def run_grades_get(*, run: Run) -> RunGrades:
    """Load a run's grades, its responses and their conversations' tags (three to five queries)."""
    met_code = Case(
        When(status=Grade.Status.FAILED, then=Value(scoring.MISSING)),
        When(met=True, then=Value(scoring.MET)),
        default=Value(scoring.NOT_MET),
        output_field=IntegerField(),
    )
    grade_rows = Grade.objects.filter(run=run).order_by()
    if connection.vendor == "postgresql":
        grade_columns = _grade_columns_aggregated(grade_rows, met_code)
    else:
        grade_columns = _grade_columns_by_row(grade_rows, met_code)
    grade_response_ids, grade_points, grade_met, grade_criterion, tag_texts, n_reused = grade_columns
    response_ids, grade_response = np.unique(grade_response_ids, return_inverse=True)
    criterion_tags = scoring.encode_tags([loads_repaired(t) for t in tag_texts])
    del grade_columns, grade_response_ids

    # A running run gains grades between the two queries: keep the responses graded so far.
    seen = set(response_ids.tolist())
    responses = sorted(
        r
        for r in _fetch(_responses_of(run).values_list("id", "conversation_id", Length("text"), "refused", "truncated"))
        if r[0] in seen
    )
    if len(responses) != response_ids.size:
        raise RuntimeError("responses of the run were deleted while its report was read; try again")
    conversation_ids, response_conversation = np.unique(_column(responses, 1, np.int64), return_inverse=True)
    conversation_list = conversation_ids.tolist()
    conversations = {
        cid: (prompt_id, tags_text)
        for cid, prompt_id, tags_text in _by_conversation(
            Conversation.objects.order_by().values_list("id", "prompt_id", Cast("example_tags", TextField())),
            "id",
            conversation_list,
        )
    }
    conversation_tag_row, conversation_tags = _tag_table([conversations[c][1] for c in conversation_list])
    per_response, per_conversation = _expected_grades(
        run, response_ids, conversation_list, [conversations[c][0] for c in conversation_list]
    )
    if per_conversation is not None:
        per_response = per_conversation[response_conversation]
    if per_response is not None:
        # A response graded on more criteria than expected (a criterion deleted since)
        # counts as complete rather than failing the report.
        per_response = np.maximum(per_response, np.bincount(grade_response, minlength=response_ids.size))
    return RunGrades(
        response_ids=response_ids,
        response_conversation=response_conversation.astype(np.intp),
        response_length=np.fromiter((r[2] or 0 for r in responses), dtype=np.float64, count=len(responses)),
        conversation_ids=conversation_ids,
        conversation_tag_row=conversation_tag_row,
        grade_response=grade_response.astype(np.intp),
        grade_criterion=grade_criterion,
        grade_points=grade_points,
        grade_met=grade_met,
        criterion_tags=criterion_tags,
        conversation_tags=conversation_tags,
        expected_grades=per_response,
        n_reused=n_reused,
        n_refused=sum(bool(r[3]) for r in responses),
        n_truncated=sum(bool(r[4]) for r in responses),
    )

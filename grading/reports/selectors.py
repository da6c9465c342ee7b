"""Selectors: a run's grades out of the database, as the arrays grading.reports.scoring wants.

A paper-size run has ~900,000 grades. Model instances, or Django's row iterator with a
json.loads per JSON field, would cost far more than the scoring itself, so the queries are
built with the ORM (portable SQL) and run on a plain cursor, JSON columns come back as text,
and tag lists are numbered through a dict: a run has only a few dozen distinct ones.
"""

from collections.abc import Sequence
from dataclasses import dataclass
from operator import itemgetter
from typing import Any, NamedTuple

import numpy as np
import numpy.typing as npt
from django.db import connection
from django.db.models import (
    Aggregate,
    BigIntegerField,
    BinaryField,
    Case,
    F,
    IntegerField,
    Min,
    QuerySet,
    TextField,
    Value,
    When,
)
from django.db.models.functions import Cast, Coalesce

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


class ResponseColumns(NamedTuple):
    conversation: npt.NDArray[np.int64]
    length: npt.NDArray[np.float64]  # characters of the text
    refused: npt.NDArray[np.bool_]
    truncated: npt.NDArray[np.bool_]


def _responses_of(run: Run) -> QuerySet:
    # A semi-join on the (run, response) index: an id list of 80,000 would be slower to send.
    return Response.objects.filter(id__in=Grade.objects.filter(run=run).values("response_id")).order_by()


def _response_columns(run: Run, response_ids: npt.NDArray[np.int64]) -> ResponseColumns:
    """The columns of the responses `response_ids` (ascending), in their order.

    A running run gains grades after its grades were read, so its responses are read with
    the same semi-join and cut down to `response_ids`. On PostgreSQL each column comes as
    one binary array (80,000 responses at paper size); on SQLite a row at a time."""
    responses = _responses_of(run)
    if connection.vendor == "postgresql":
        flags = _flag("refused", 2) + _flag("truncated", 1)
        row = responses.aggregate(
            ids=_Bigints("id"),
            conversations=_Bigints("conversation_id"),
            packed=_Bigints(Cast("text_length", BigIntegerField()) * 4 + flags),
        )
        ids, conversation, packed = (_bigints(row[k]) for k in ("ids", "conversations", "packed"))
    else:
        rows = _fetch(responses.values_list("id", "conversation_id", "text_length", "refused", "truncated"))
        ids, conversation = _column(rows, 0, np.int64), _column(rows, 1, np.int64)
        packed = np.fromiter(((r[2] or 0) * 4 + 2 * bool(r[3]) + bool(r[4]) for r in rows), np.int64, len(rows))
    order = np.argsort(ids, kind="stable")
    keep = order[np.isin(ids[order], response_ids, assume_unique=True)]
    if keep.size != response_ids.size:
        raise RuntimeError("responses of the run were deleted while its report was read; try again")
    packed = packed[keep]
    return ResponseColumns(
        conversation=conversation[keep],
        length=(packed >> 2).astype(np.float64),
        refused=(packed & 2).astype(bool),
        truncated=(packed & 1).astype(bool),
    )


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


# (response id, points, met code, row of the tag list) per grade, the distinct tag lists and
# how many grades were reused.
GradeColumns = tuple[
    npt.NDArray[np.int64], npt.NDArray[np.float64], npt.NDArray[np.int8], npt.NDArray[np.intp], list[list[str]], int
]


def _met_code() -> Case:
    """A grade's scoring.MET, NOT_MET or MISSING (a failed grade), computed by the database."""
    return Case(
        When(status=Grade.Status.FAILED, then=Value(scoring.MISSING)),
        When(met=True, then=Value(scoring.MET)),
        default=Value(scoring.NOT_MET),
        output_field=BigIntegerField(),
    )


def _flag(field: str, value: int) -> Case:
    """`value` where the boolean `field` is true, else 0: a bit to pack beside others."""
    return Case(When(**{field: True}, then=Value(value)), default=Value(0), output_field=BigIntegerField())


def _grade_columns_by_row(grades: QuerySet) -> GradeColumns:
    """The grade columns a row at a time (SQLite)."""
    rows = _fetch(grades.values_list("response_id", "points", _met_code(), Cast("tags", TextField()), "reused"))
    texts = list(map(itemgetter(3), rows))
    numbering = {text: i for i, text in enumerate(dict.fromkeys(texts))}
    return (
        _column(rows, 0, np.int64),
        _column(rows, 1, np.float64),
        _column(rows, 2, np.int8),
        np.fromiter(map(numbering.__getitem__, texts), dtype=np.intp, count=len(texts)),
        [loads_repaired(text) for text in numbering],
        int(sum(map(itemgetter(4), rows))),
    )


# A grade packed into one bigint by PostgreSQL: response id, then points (any smallint), then
# reused (1 bit) and the met code plus one (2 bits: MISSING, NOT_MET, MET as 0, 1, 2).
_POINTS_OFFSET, _POINTS_BITS = 1 << 15, 16
_FLAG_BITS = 3


class _Bigints(Aggregate):
    """PostgreSQL: a bigint per row, concatenated as 8 big-endian bytes each into one bytea.

    Read by numpy in place (:func:`_bigints`), so a million values cost no Python object
    each; cheaper for the database than array_agg, which keeps a datum and a length word per
    element."""

    function = "STRING_AGG"
    template = "%(function)s(int8send((%(expressions)s)::bigint), ''::bytea)"
    output_field = BinaryField()


def _bigints(data: bytes | memoryview | None) -> npt.NDArray[np.int64]:
    if data is None:  # an aggregate over no rows
        return np.empty(0, np.int64)
    if len(data) % 8:
        raise ValueError("a bigint aggregate whose length is not a multiple of 8 bytes")
    return np.frombuffer(data, dtype=">i8").astype(np.int64)


def _grade_columns_aggregated(grades: QuerySet) -> GradeColumns:
    """The same columns in a few rows on PostgreSQL, one per distinct tag list (a run has a few
    dozen): each grade packed into one bigint by the database and each group's bigints sent as
    one run of bytes that numpy reads in place, instead of a Python tuple per grade, which was
    most of the cost of loading a paper-size run. Groups come in the order of their first
    grade, the order a row-by-row read meets their tag lists (that order numbers the tags).

    Grouped by the tag list's hash (Grade.tags_key), not its JSON, and packed from columns the
    (run, response) index holds, so the database reads the index alone and hashes no JSON; the
    lists themselves are then read from each group's first grade."""
    # A grade is failed exactly when `met` is NULL (the constraint grade_met_iff_graded): its
    # code is MISSING, and the codes plus one are 0, 1, 2 for MISSING, NOT_MET, MET.
    met_code_plus_one = Coalesce(Cast("met", IntegerField()) + 1, Value(0), output_field=BigIntegerField())
    packed = (
        (Cast("response_id", BigIntegerField()) * (1 << _POINTS_BITS) + F("points") + _POINTS_OFFSET)
        * (1 << _FLAG_BITS)
        + Cast("reused", IntegerField()) * 4
        + met_code_plus_one
    )
    # Sorted here, not by the database: an ORDER BY would sort the arrays along with the groups.
    keyed = sorted(
        grades.values("tags_key").annotate(first=Min("id"), packed=_Bigints(packed)).values_list("first", "packed")
    )
    if not keyed:
        return np.empty(0, np.int64), np.empty(0), np.empty(0, np.int8), np.empty(0, np.intp), [], 0
    tags_of = dict(Grade.objects.filter(id__in=[first for first, _ in keyed]).values_list("id", "tags"))
    groups = [(first, tags_of[first], data) for first, data in keyed]
    arrays = [_bigints(data) for _, _, data in groups]
    values = np.concatenate(arrays)
    met = ((values & 3) - 1).astype(np.int8)
    flags = values >> _FLAG_BITS
    return (
        flags >> _POINTS_BITS,
        ((flags & ((1 << _POINTS_BITS) - 1)) - _POINTS_OFFSET).astype(np.float64),
        met,
        np.repeat(np.arange(len(groups), dtype=np.intp), [a.size for a in arrays]),
        [tags for _, tags, _ in groups],
        int(((values >> 2) & 1).sum()),
    )


def run_grades_get(*, run: Run) -> RunGrades:
    """Load a run's grades, its responses and their conversations' tags (three to six queries)."""
    grade_rows = Grade.objects.filter(run=run).order_by()
    if connection.vendor == "postgresql":
        grade_columns = _grade_columns_aggregated(grade_rows)
    else:
        grade_columns = _grade_columns_by_row(grade_rows)
    grade_response_ids, grade_points, grade_met, grade_criterion, tag_lists, n_reused = grade_columns
    response_ids, grade_response = np.unique(grade_response_ids, return_inverse=True)
    criterion_tags = scoring.encode_tags(tag_lists)
    del grade_columns, grade_response_ids

    response_columns = _response_columns(run, response_ids)
    conversation_ids, response_conversation = np.unique(response_columns.conversation, return_inverse=True)
    conversation_list = conversation_ids.tolist()
    # A semi-join again: the conversations of a running run's newer responses come too, unused.
    conversations = {
        cid: (prompt_id, tags_text)
        for cid, prompt_id, tags_text in _fetch(
            Conversation.objects.filter(id__in=_responses_of(run).values("conversation_id"))
            .order_by()
            .values_list("id", "prompt_id", Cast("example_tags", TextField()))
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
        response_length=response_columns.length,
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
        n_refused=int(response_columns.refused.sum()),
        n_truncated=int(response_columns.truncated.sum()),
    )

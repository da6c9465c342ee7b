"""A finished run's drift notice ("3 criteria added, 1 edited since this run"), kept like its report.

The run's planned rubric is read once per run (grading.plans.graded_rubric: the items its
grades record) into one RunRubric row per conversation: each item's criterion id and a digest
of its text, points and tags, with the added, edited and deleted counts against the live
rubric and the conversation's Conversation.rubric_version they were taken at. A page then sums
the rows in one query and counts again only the conversations whose rubric version moved since
(a criterion added, edited or deleted there), from the row's digests and those conversations'
live criteria: never from the grades, and an edit elsewhere costs a run nothing.

The counts are rubric_drift's (tests/test_drift.py compares them after edits, additions,
deletions and imports).
"""

from __future__ import annotations

import hashlib
import json

from django.db import transaction
from django.db.models import Count, F, Q, Sum

from annotation.models import Conversation
from grading.models import Run, RunRubric
from grading.plans import RubricDrift, drift_cluster, graded_rubric, live_rubrics
from healthbench_web.bulk import chunks


def digest(text: str, points: int, tags) -> str:
    """A criterion's content (text, points, tags) in 16 hex digits."""
    encoded = json.dumps([text, int(points), list(tags)], ensure_ascii=False).encode()
    return hashlib.blake2b(encoded, digest_size=8).hexdigest()


def _counts(planned: list[list], live: list[tuple]) -> tuple[int, int, int]:
    """(added, edited, deleted) of a conversation's live criteria against its planned items."""
    by_id = {pk: d for pk, d in planned if pk is not None}
    live_ids = {row[0] for row in live}
    deleted = sum(1 for pk, _ in planned if pk is None or pk not in live_ids)
    added = edited = 0
    for pk, text, points, tags in live:
        if pk not in by_id:
            added += 1
        elif by_id[pk] != digest(text, points, tags):
            edited += 1
    return added, edited, deleted


def _record(run: Run) -> dict:
    """Read the run's planned rubric from its grades (once per run and report version) into
    RunRubric rows counted against the live rubric; returns Run.drift_baseline."""
    with transaction.atomic():
        locked = Run.objects.select_for_update().only("id", "report_version", "drift_baseline").get(id=run.id)
        baseline = locked.drift_baseline
        if baseline and baseline.get("version") == locked.report_version:
            return baseline  # another process recorded it meanwhile
        if baseline:
            RunRubric.objects.filter(run_id=run.id).delete()  # counted before a resume added grades
        graded = graded_rubric(run)
        cluster = drift_cluster(run, graded)
        rows = []
        for chunk in chunks(sorted(graded)):
            # The versions before the criteria: an edit in between is counted again next time.
            versions = dict(Conversation.objects.filter(id__in=chunk).values_list("id", "rubric_version"))
            live = live_rubrics(chunk, cluster)
            for conversation_id in chunk:
                if conversation_id not in versions:
                    continue  # deleted meanwhile, with its grades
                planned = [
                    [key if isinstance(key, int) else None, digest(*item)]
                    for key, item in graded[conversation_id].items()
                ]
                added, edited, deleted = _counts(planned, live.get(conversation_id, []))
                rows.append(
                    RunRubric(
                        run_id=run.id,
                        conversation_id=conversation_id,
                        rubric_version=versions[conversation_id],
                        planned=planned,
                        added=added,
                        edited=edited,
                        deleted=deleted,
                    )
                )
        RunRubric.objects.bulk_create(rows, batch_size=1000)
        baseline = {"version": locked.report_version, "cluster": cluster}
        Run.objects.filter(id=run.id).update(drift_baseline=baseline)
    run.drift_baseline = baseline
    return baseline


def _recount(run: Run, cluster: bool) -> None:
    """Count again the rows whose conversation's rubric moved since they were counted."""
    stale = list(
        RunRubric.objects.filter(run_id=run.id)
        .exclude(rubric_version=F("conversation__rubric_version"))
        .values_list("id", "conversation_id", "conversation__rubric_version", "planned")
    )
    for chunk in chunks(stale):
        live = live_rubrics([row[1] for row in chunk], cluster)
        updated = []
        for pk, conversation_id, version, planned in chunk:
            added, edited, deleted = _counts(planned, live.get(conversation_id, []))
            updated.append(RunRubric(id=pk, rubric_version=version, added=added, edited=edited, deleted=deleted))
        RunRubric.objects.bulk_update(updated, ["rubric_version", "added", "edited", "deleted"])


def _totals(run: Run) -> dict:
    return RunRubric.objects.filter(run_id=run.id).aggregate(
        added=Sum("added"),
        edited=Sum("edited"),
        deleted=Sum("deleted"),
        stale=Count("id", filter=~Q(rubric_version=F("conversation__rubric_version"))),
    )


def rubric_drift_stored(run: Run) -> RubricDrift:
    """The counts of grading.plans.rubric_drift for the run's page: one query when no
    conversation of the run had a criterion change since the last count, and a count of only
    those that had otherwise. The run's planned rubric is read from its grades the first time
    (or after a resume added grades); the run's end records it (grading.pipeline.tasks.warm_report)."""
    if run.plan == Run.Plan.LABELLED:
        return RubricDrift()  # its plan is the labelled pairs (see rubric_drift)
    baseline = run.drift_baseline
    if not baseline or baseline.get("version") != run.report_version:
        baseline = _record(run)
    totals = _totals(run)
    if totals["stale"]:
        _recount(run, baseline["cluster"])
        totals = _totals(run)
    return RubricDrift(added=totals["added"] or 0, edited=totals["edited"] or 0, deleted=totals["deleted"] or 0)

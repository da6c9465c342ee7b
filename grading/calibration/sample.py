"""Service: draw a run's calibration sample and give its responses to physicians to label.

A sample is n of the run's scored responses, drawn uniformly at random without replacement
from a recorded seed (numpy's PCG64: the same run, n and seed draw the same responses), or
stratified by theme with each theme's share of the sample proportional to its share of the
run. Every sampled response becomes one labelling task per rubric criterion the run graded
for it, for one or two physicians, under the usual blinding (never the rubric's author, never
a physician who still votes on the conversation's consensus criteria). The sample is frozen:
a run has at most one, and it is never redrawn.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass

import numpy as np
from django.db import transaction
from django.utils.translation import gettext

from annotation.models import Assignment, Physician
from annotation.services.assignments import Item, open_load, spread
from annotation.task_kinds.label import KIND as LABEL
from grading.calibration.population import scored_population
from grading.models import CalibrationItem, CalibrationSample, Grade, Run

# The issue's range for a sample: below it no interval, above it the physicians' time is better
# spent elsewhere (300 already narrows a 0.8-correlated grader's interval to about 0.04).
MIN_SIZE, MAX_SIZE = 2, 2000
FINISHED = (Run.Status.DONE, Run.Status.IMPORTED)


class SampleError(ValueError):
    """A sample that cannot be drawn, with the reason in words for a page or a command."""


@dataclass(frozen=True)
class SampleSummary:
    sample: CalibrationSample
    tasks: int  # labelling tasks created
    short: int  # items that did not get enough physicians

    def __str__(self) -> str:
        values = {"size": self.sample.size, "run": self.sample.run.name, "seed": self.sample.seed, "tasks": self.tasks}
        if self.sample.by_theme:
            text = gettext(
                "drew %(size)s responses of %(run)s (seed %(seed)s, by theme); %(tasks)s labelling tasks created"
            )
        else:
            text = gettext("drew %(size)s responses of %(run)s (seed %(seed)s); %(tasks)s labelling tasks created")
        text %= values
        if self.short:
            text += gettext(
                "; %(short)s items could not get enough eligible physicians (assign more on the Assign page)"
            ) % {"short": self.short}
        return text


def allocate(counts: dict[str, int], size: int) -> dict[str, int]:
    """Proportional allocation of `size` over strata by largest remainder (pure; ties by name)."""
    total = sum(counts.values())
    exact = {name: size * count / total for name, count in counts.items()}
    shares = {name: min(int(value), counts[name]) for name, value in exact.items()}
    left = size - sum(shares.values())
    for name in sorted(exact, key=lambda k: (-(exact[k] - int(exact[k])), k)):
        if left <= 0:
            break
        if shares[name] < counts[name]:
            shares[name] += 1
            left -= 1
    return shares


def draw(population: dict[str, list[int]], size: int, seed: int, by_theme: bool) -> list[tuple[int, str]]:
    """(response id, stratum) of the sample; population maps each stratum to its response ids."""
    rng = np.random.default_rng(seed)
    if not by_theme:
        ids = sorted(rid for ids in population.values() for rid in ids)
        return [(int(ids[i]), "") for i in sorted(rng.choice(len(ids), size, replace=False))]
    chosen: list[tuple[int, str]] = []
    for stratum, share in sorted(allocate({k: len(v) for k, v in population.items()}, size).items()):
        ids = sorted(population[stratum])
        chosen.extend((int(ids[i]), stratum) for i in sorted(rng.choice(len(ids), share, replace=False)))
    return chosen


def _label_items(response_ids: list[int], run: Run) -> list[Item]:
    """(conversation, response, criterion) of every criterion the run graded for the responses."""
    rows = (
        Grade.objects.filter(run=run, response_id__in=response_ids, criterion__isnull=False)
        .order_by("response_id", "position", "criterion_id")
        .values_list("response__conversation_id", "response_id", "criterion_id")
        .distinct()
    )
    return [(cid, rid, crit) for cid, rid, crit in rows]


def _label_physicians() -> list[int]:
    return list(
        Physician.objects.filter(
            role=Physician.Role.PHYSICIAN,
            status__in=(Physician.Status.TRIAL, Physician.Status.ACTIVE),
            user__isnull=False,  # a physician without an account cannot log in to label
        )
        .order_by("id")
        .values_list("id", flat=True)
    )


@dataclass(frozen=True)
class SamplePreview:
    """What drawing would do, read-only: shown before a curator confirms."""

    scored: int  # the run's scored responses, which the sample is drawn from
    size: int
    per_stratum: dict[str, int]  # by theme when stratified, else {"": size}
    criteria: int  # (response, criterion) items to label, per physician
    tasks_at_most: int  # criteria x physicians per response


def _check(run: Run, size: int, seed: int, physicians_per_response: int) -> dict[str, list[int]]:
    """The run's population to draw from, or SampleError with the reason."""
    if run.status not in FINISHED:
        raise SampleError(
            gettext("%(name)s is %(status)s: draw a calibration sample once the run has finished")
            % {"name": run.name, "status": run.status}
        )
    if not MIN_SIZE <= size <= MAX_SIZE:
        raise SampleError(
            gettext("the sample size must be between %(min)s and %(max)s, not %(size)s")
            % {"min": MIN_SIZE, "max": MAX_SIZE, "size": size}
        )
    if physicians_per_response not in (1, 2):
        raise SampleError(gettext("each sampled response goes to one or two physicians"))
    if not 0 <= seed < 2**63:
        raise SampleError(gettext("the seed must be a whole number from 0 to 2^63 - 1"))
    if CalibrationSample.objects.filter(run=run).exists():
        raise SampleError(
            gettext("%(name)s already has a calibration sample; a sample is never redrawn") % {"name": run.name}
        )
    population = scored_population(run)
    available = sum(len(ids) for ids in population.values())
    if size > available:
        raise SampleError(
            gettext("%(name)s has %(available)s scored responses; a sample of %(size)s needs as many")
            % {"name": run.name, "available": available, "size": size}
        )
    return population


def calibration_sample_preview(
    *, run: Run, size: int, seed: int, by_theme: bool = False, physicians_per_response: int = 1
) -> SamplePreview:
    population = _check(run, size, seed, physicians_per_response)
    chosen = draw(population, size, seed, by_theme)
    per_stratum: dict[str, int] = defaultdict(int)
    for _, stratum in chosen:
        per_stratum[stratum] += 1
    criteria = len(_label_items([rid for rid, _ in chosen], run))
    return SamplePreview(
        scored=sum(len(ids) for ids in population.values()),
        size=size,
        per_stratum=dict(sorted(per_stratum.items())),
        criteria=criteria,
        tasks_at_most=criteria * physicians_per_response,
    )


def calibration_sample_draw(
    *,
    run: Run,
    size: int,
    seed: int,
    by_theme: bool = False,
    physicians_per_response: int = 1,
    created_by: str = "",
    assigned_by: Physician | None = None,
) -> SampleSummary:
    with transaction.atomic():
        # The row lock makes two curators drawing at once get one sample and one clear refusal.
        Run.objects.select_for_update().get(pk=run.pk)
        population = _check(run, size, seed, physicians_per_response)
        sample = CalibrationSample.objects.create(
            run=run,
            size=size,
            seed=seed,
            by_theme=by_theme,
            physicians_per_response=physicians_per_response,
            created_by=created_by,
        )
        chosen = draw(population, size, seed, by_theme)
        CalibrationItem.objects.bulk_create(
            [CalibrationItem(sample=sample, response_id=rid, stratum=stratum) for rid, stratum in chosen]
        )
        tasks, short = _assign(run, [rid for rid, _ in chosen], physicians_per_response, assigned_by)
    return SampleSummary(sample=sample, tasks=tasks, short=short)


def _assign(run: Run, response_ids: list[int], per_item: int, assigned_by: Physician | None) -> tuple[int, int]:
    items = _label_items(response_ids, run)
    conversation_ids = sorted({cid for cid, _, _ in items})
    # Who may not label (the labeling kind's assignment rule): the rubric's writers, then
    # those with an open vote task on the conversation.
    excluded = LABEL.excluded(conversation_ids)
    assigned: dict[Item, set[int]] = defaultdict(set)
    for cid, rid, crit, pid in (
        Assignment.objects.filter(kind=LABEL.value, response_id__in=response_ids)
        .exclude(status__in=Assignment.INACTIVE)
        .values_list("conversation_id", "response_id", "criterion_id", "physician_id")
    ):
        assigned[(cid, rid, crit)].add(pid)
    physician_ids = _label_physicians()
    # One physician labels all of a response's criteria, so that each physician's score of a
    # response is whole: spread whole responses, then expand them to their criteria.
    by_response: dict[int | None, list[Item]] = defaultdict(list)
    for item in items:
        by_response[item[1]].append(item)
    units: list[Item] = [(crits[0][0], rid, None) for rid, crits in by_response.items()]
    unit_assigned = {
        unit: set.intersection(*(assigned.get(item, set()) for item in by_response[unit[1]])) for unit in units
    }
    pairs, short = spread(
        units,
        physician_ids=physician_ids,
        per_item=per_item,
        load=open_load(physician_ids),
        assigned=unit_assigned,
        excluded=excluded,
    )
    created = Assignment.objects.bulk_create(
        [
            Assignment(
                physician_id=pid,
                kind=LABEL.value,
                conversation_id=cid,
                response_id=rid,
                criterion_id=crit,
                assigned_by=assigned_by,
            )
            for (_, rid, _), pid in pairs
            for cid, _, crit in by_response[rid]
            if pid not in assigned.get((cid, rid, crit), set())
        ],
        batch_size=1000,
    )
    return len(created), short

"""Launching a grading run: the endpoint snapshots it grades with, its plan cut into RunBatches,
and the run record itself (grading.pipeline.runs takes it from there: queueing, resume,
cancel, finish). Also run_record, which stores a finished run through the same steps (the
demo run).
"""

from __future__ import annotations

import hashlib
import json
import logging
from collections.abc import Callable
from dataclasses import replace

from django.conf import settings
from django.db import IntegrityError, transaction
from django.utils import timezone

from annotation.models import Conversation, Subset, SubsetVersion
from annotation.services.subset_versions import subset_version_freeze
from grading.models import Endpoint, Grade, GraderConfig, Response, Run, RunBatch
from grading.pipeline.estimate import Plan, run_concurrency, run_plan, spec_check
from grading.pipeline.grader_prompt import template_hash
from grading.pipeline.modes import DEFAULT, mode_of
from grading.pipeline.physician_responses import PHYSICIAN_MODEL, physician_responses_ensure, physician_texts
from grading.pipeline.run_request import RunRequest, RunSpecError
from grading.pipeline.runs import batch_size_for, batches_queue, next_report_version, queue_check
from grading.plans import CLUSTER_TAG, PlanItem, version_rubrics
from healthbench_web.bulk import chunks

log = logging.getLogger(__name__)


SNAPSHOT_FIELDS = {
    # snapshot field: endpoint field
    "base_url": "base_url",
    "api_style": "api_style",
    "model": "model",
    "api_key_env": "key_variable",
    "reasoning": "reasoning",
    "reasoning_effort": "reasoning_effort",
    "temperature": "temperature",
    "max_tokens": "max_output_tokens",
    "system_message": "system_message",
    "structured_output": "structured_output",
    "timeout_seconds": "timeout_seconds",
    "price_input": "price_input",
    "price_cached_input": "price_cached_input",
    "price_output": "price_output",
    "batch_discount": "batch_discount",
    "requests_per_minute": "requests_per_minute",
    "tokens_per_minute": "tokens_per_minute",
}


# How a call reaches the endpoint (grading.endpoint_access), copied when set.
ACCESS_FIELDS = ("provider", "api_version", "key_header", "extra_headers", "extra_query")


def endpoint_snapshot(
    *, endpoint: Endpoint, template: str, grading_mode: str = DEFAULT, explanation: str = ""
) -> GraderConfig:
    """The run's frozen copy of the endpoint's settings (and grader template and mode),
    created once per distinct copy: its name carries a hash of them, so two launches with the
    same settings share one, and a later edit of the endpoint makes a new one."""
    fields = {name: getattr(endpoint, source) for name, source in SNAPSHOT_FIELDS.items()}
    if endpoint.reasoning:
        fields["temperature"] = None
    fields |= {"prompt_template": template, "prompt_hash": template_hash(template) if template else ""}
    access = {name: getattr(endpoint, name) for name in ACCESS_FIELDS}
    if access["provider"] != "openai" or any(access[name] for name in ACCESS_FIELDS[1:]):
        # Only then: the names of snapshots of endpoints reached the plain way stay as they were.
        fields |= access
    if not endpoint.lenient_answers:
        # Only then: the names (and so the identity) of earlier snapshots stay as they were.
        fields["lenient_answers"] = False
    # The mode's own settings (none per criterion, so those snapshots keep their names).
    fields |= mode_of(grading_mode).snapshot_fields(explanation)
    digest = hashlib.sha256(
        json.dumps([endpoint.id, endpoint.name, fields], sort_keys=True, default=str).encode()
    ).hexdigest()[:12]
    name = f"{endpoint.name[:80]} {digest}"
    config, _ = GraderConfig.objects.get_or_create(
        name=name, defaults=fields | {"endpoint": endpoint, "endpoint_name": endpoint.name}
    )
    return config


def _unit_size(run: Run, remaining: int, grades_per_call: float = 1.0) -> int:
    # A batched run's unit waits on the provider, not on a worker's slots: fewer, larger
    # ones, each sent as one or more provider batches.
    if run.batch:
        return settings.GRADING_BATCHED_RUN_UNIT
    # Rounds of the concurrency are rounds of calls: per response, a call gives ~11 grades.
    return batch_size_for(round(run.concurrency * grades_per_call), remaining)


def _batches(run: Run, plan: Plan) -> list[RunBatch]:
    now = timezone.now()
    remaining = plan.grades
    per_call = max(1.0, plan.grades / plan.calls) if plan.calls else 1.0
    target = _unit_size(run, remaining, per_call)
    batches: list[RunBatch] = []
    ids: list[int] = []
    items = 0
    for unit_id, grades, _chars in plan.units:
        ids.append(unit_id)
        items += grades
        if items >= target:
            batches.append(_batch(run, len(batches), ids, items, plan.by_conversation, now))
            remaining -= items
            target = _unit_size(run, remaining, per_call)
            ids, items = [], 0
    if ids:
        batches.append(_batch(run, len(batches), ids, items, plan.by_conversation, now))
    return batches


def _batch(run: Run, number: int, ids: list[int], items: int, by_conversation: bool, now) -> RunBatch:
    return RunBatch(
        run=run,
        number=number,
        response_ids=[] if by_conversation else ids,
        conversation_ids=ids if by_conversation else [],
        items=items,
        touched=now,
    )


def _plan_kind(spec: RunRequest) -> str:
    if spec.labelled:
        return Run.Plan.LABELLED
    if spec.responses_from is None:
        return Run.Plan.SUBSET_VERSION
    return Run.Plan.RUBRIC_CHANGES if spec.rubric_changes else Run.Plan.SOURCE_RUN


def _on_version(plan: Plan, version: SubsetVersion, spec: RunRequest) -> Plan:
    """The plan's grades counted on the frozen version, which the batches grade: the estimate
    counted the live rubric a moment before the freeze."""
    prompt_of = dict(Conversation.objects.filter(id__in=[u[0] for u in plan.units]).values_list("id", "prompt_id"))
    cluster = version.subset.only_cluster_criteria
    counts = {
        entry["prompt_id"]: sum(not cluster or CLUSTER_TAG in item["tags"] for item in entry["rubrics"])
        for entry in version.snapshot
    }
    units = [(cid, counts.get(prompt_of[cid], 0) * spec.samples, chars) for cid, _, chars in plan.units]
    return replace(plan, units=[u for u in units if u[1]])


def _on_physician_responses(plan: Plan, spec: RunRequest) -> Plan:
    """The plan's conversations turned into their physician responses (made where none holds
    that text yet), which the batches grade like any stored responses."""
    if spec.subset is None:
        raise RunSpecError(["grading the physicians' responses needs a subset"])
    texts = physician_texts(spec.subset)
    planned = {unit[0] for unit in plan.units if unit[0] in texts}
    response_of = physician_responses_ensure({cid: texts[cid] for cid in planned})
    units = [(response_of[cid], grades, chars) for cid, grades, chars in plan.units if cid in response_of]
    return replace(plan, by_conversation=False, units=units)


def _conversations_of(plan: Plan) -> list[int]:
    """The conversations a plan grades: its units are conversations when it samples first,
    responses otherwise (their ids are not conversation ids)."""
    ids = sorted({unit[0] for unit in plan.units})
    if plan.by_conversation:
        return ids
    found: set[int] = set()
    for chunk in chunks(ids):
        found.update(Response.objects.filter(id__in=chunk).values_list("conversation_id", flat=True))
    return sorted(found)


def _all_professional(conversation_ids: list[int]) -> bool:
    """Whether every conversation a run grades came from a HealthBench Professional row: such a
    run is scored with Professional's length adjustment whether or not its form said so."""
    if not conversation_ids:
        return False
    return not any(
        Conversation.objects.filter(id__in=chunk, professional__isnull=True).exists()
        for chunk in chunks(conversation_ids)
    )


def run_launch(*, spec: RunRequest, plan: Plan | None = None) -> Run:
    """Create the run and its batches and queue them; raises RunSpecError, or QueueUnavailable
    (before anything is stored) when the broker is down. `spec` is what every door builds with
    grading.pipeline.run_request.run_request; `plan`, when given, is run_plan(spec) already
    computed for its estimate."""
    spec_check(spec)
    if spec.grader is None:  # spec_check refuses a spec without one; this tells mypy
        raise RunSpecError(["choose a grader endpoint"])
    plan = plan or run_plan(spec)
    if plan.grades == 0:
        if spec.rubric_changes:
            raise RunSpecError(["nothing to grade: no criterion was added or edited since that run"])
        if spec.labelled:
            raise RunSpecError(["nothing to grade: no response has physician labels (import a meta-eval file first)"])
        raise RunSpecError(["nothing to grade: the source has no grades, or the subset no criteria"])
    queue_check()
    # The physicians' responses, or a re-grade of a run of theirs: still their responses.
    source = spec.responses_from
    physician = spec.physician_responses or (source is not None and source.physician_responses)
    try:
        with transaction.atomic():
            # Every run names the exact members and rubrics it grades (its plan).
            version = subset_version_freeze(subset=spec.subset)[0] if spec.subset else None
            if version is not None:
                plan = _on_version(plan, version, spec)
            if spec.physician_responses:
                plan = _on_physician_responses(plan, spec)
            run = Run.objects.create(
                name=spec.name,
                plan=_plan_kind(spec),
                plan_rubric=plan.rubric,
                status=Run.Status.RUNNING,
                grader_config=endpoint_snapshot(
                    endpoint=spec.grader,
                    template=spec.template,
                    grading_mode=spec.grading_mode,
                    explanation=spec.explanation_length,
                ),
                policy_config=endpoint_snapshot(endpoint=spec.policy, template="") if spec.policy else None,
                policy_model=spec.policy.model if spec.policy else PHYSICIAN_MODEL if physician else "",
                physician_responses=physician,
                samples=spec.samples if spec.policy or spec.responses_from is None else spec.responses_from.samples,
                use_cache=spec.use_cache,
                length_adjusted=spec.length_adjusted,
                healthbench_professional=spec.healthbench_professional or _all_professional(_conversations_of(plan)),
                batch=spec.batch,
                responses_from=spec.responses_from,
                subset=spec.subset,
                subset_version=version,
                concurrency=run_concurrency(spec),
                total_items=plan.grades,
                started=timezone.now(),
            )
            RunBatch.objects.bulk_create(_batches(run, plan))
            batch_ids = list(run.batches.values_list("id", flat=True))
            batches_queue(batch_ids, launched_run=run.id)
    except IntegrityError:
        # Another launch took the name between the check and the insert.
        raise RunSpecError([f"a run named {spec.name!r} already exists; choose another name"]) from None
    log.info(
        "run %r launched: %d grades in %d batches",
        run.name,
        run.total_items,
        len(batch_ids),
        extra={
            "run": run.name,
            "grader": run.grader_config.model if run.grader_config else "",
            "policy": run.policy_model,
            "sampling": spec.policy is not None,
        },
    )
    return run


Verdict = Callable[[Response, int, PlanItem], tuple[bool, str, str]]


def run_record(
    *, name: str, subset: Subset, responses: list[Response], verdict: Verdict, policy_model: str = "", samples: int = 1
) -> tuple[Run, int]:
    """Store a finished run whose grades were decided without calling a grader (the demo's),
    on the same plan as a launched run: `subset` frozen now, each response graded on its
    conversation's rubric in that version. `verdict(response, position, item)` gives (met,
    explanation, raw output). A run of that name is planned and graded again, in place.
    Returns the run and its number of grades."""
    now = timezone.now()
    with transaction.atomic():
        version = subset_version_freeze(subset=subset)[0]
        fields = {
            "status": Run.Status.DONE,
            "plan": Run.Plan.SUBSET_VERSION,
            "subset": subset,
            "subset_version": version,
            "responses_from": None,
            "plan_rubric": None,
            "policy_model": policy_model,
            "samples": samples,
            "finished": now,
        }
        run, created = Run.objects.select_for_update().get_or_create(name=name, defaults=fields | {"started": now})
        if not created:
            Grade.objects.filter(run=run).delete()
            for key, value in fields.items():
                setattr(run, key, value)
        rubric = version_rubrics(run, sorted({r.conversation_id for r in responses}))
        grades = []
        for response in responses:
            for position, item in enumerate(rubric.get(response.conversation_id, [])):
                met, explanation, raw_output = verdict(response, position, item)
                grades.append(
                    Grade(
                        run=run,
                        response=response,
                        criterion_id=item.criterion_id,
                        position=position,
                        criterion_text=item.text,
                        points=item.points,
                        tags=item.tags,
                        status=Grade.Status.GRADED,
                        met=met,
                        explanation=explanation,
                        raw_output=raw_output,
                        attempts=1,
                    )
                )
        Grade.objects.bulk_create(grades)
        run.total_items = len(grades)
        run.save()
        # New grades: a cached report of an earlier recording must not be shown.
        Run.objects.filter(id=run.id).update(report_version=next_report_version())
    run.refresh_from_db()
    return run, len(grades)

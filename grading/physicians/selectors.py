"""The arrays behind the physician quality pages, loaded in a few queries; the numbers are
grading/physicians/quality.py's. Physicians whose status is `removed` are left out, as their
work is everywhere else; external physicians (no account) count as peers in agreement."""

from __future__ import annotations

import hashlib
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from datetime import UTC, datetime

import numpy as np
from django.conf import settings
from django.db.models import Count, F, FloatField, Func, Max, Sum

from annotation.models import (
    Assignment,
    CantJudge,
    ConsensusVote,
    Criterion,
    CriterionEdit,
    Physician,
    PhysicianLabel,
    TaskEvent,
)
from annotation.task_kinds.label import KIND as LABEL
from grading.metaeval.agreement import MetaEvalLabels
from grading.physicians.columns import numeric_columns, raw_rows
from grading.physicians.quality import (
    Estimate,
    Flag,
    LabelAgreement,
    OutlierRule,
    active_seconds,
    label_agreement,
    median_interval,
    outliers,
    rate_interval,
)
from healthbench_web.shared_cache import once_per_version

KINDS = Assignment.Kind
# Bump when Programme's shape or its computation changes: cached copies of the old one are ignored.
PROGRAMME_VERSION = 1


class EpochSeconds(Func):
    """A datetime column as seconds since 1970 (float), computed by the database."""

    output_field = FloatField()

    def as_postgresql(self, compiler, connection, **extra):
        # A double from the database, not a numeric: the driver then makes no Decimal per row.
        # The numeric's cast to double and Python's float() both round to the nearest double.
        template = "EXTRACT(EPOCH FROM %(expressions)s)::double precision"
        return self.as_sql(compiler, connection, template=template, **extra)

    def as_sqlite(self, compiler, connection, **extra):
        # julianday() of Django's stored text; day 2440587.5 is 1970-01-01 00:00 UTC.
        template = "((julianday(%(expressions)s) - 2440587.5) * 86400.0)"
        return self.as_sql(compiler, connection, template=template, **extra)


def outlier_rule() -> OutlierRule:
    return OutlierRule(
        agreement_margin=settings.PHYSICIAN_OUTLIER_AGREEMENT_MARGIN,
        slow_factor=settings.PHYSICIAN_OUTLIER_SLOW_FACTOR,
        cant_judge_margin=settings.PHYSICIAN_OUTLIER_CANT_JUDGE_MARGIN,
    )


@dataclass
class Labels:
    """Every counted label as meta-eval arrays: items are (response, criterion) pairs."""

    labels: MetaEvalLabels
    physician_pk: np.ndarray  # physician code -> Physician.pk
    response_id: np.ndarray  # item -> response id
    criterion_id: np.ndarray  # item -> criterion id


def counted_labels() -> Labels:
    physician_id, response_id, criterion_id, met = numeric_columns(
        PhysicianLabel.objects.exclude(physician__status=Physician.Status.REMOVED).values_list(
            "physician_id", "response_id", "criterion_id", "met"
        ),
        ("bigint", "bigint", "bigint", "boolean"),
    )
    physician_pk, physician = np.unique(physician_id, return_inverse=True)
    # Items are (response, criterion) pairs in that order; as one integer key (ids are positive
    # and below 2**31) np.unique sorts them alike without the slow row-wise unique.
    span = int(criterion_id.max(initial=0)) + 1
    keys, item = np.unique(response_id * span + criterion_id, return_inverse=True)
    pairs = np.stack(np.divmod(keys, span), axis=1)
    labels = MetaEvalLabels(
        item=item.reshape(-1),
        category=np.zeros(met.size, dtype=np.intp),
        physician=physician.reshape(-1),
        label=met.astype(bool),
        category_names=("all",),
        physician_ids=tuple(str(pk) for pk in physician_pk.tolist()),
        n_items=int(pairs.shape[0]),
    )
    return Labels(labels, physician_pk, pairs[:, 0] if pairs.size else pairs, pairs[:, 1] if pairs.size else pairs)


@dataclass
class TaskTimes:
    """Done tasks with their active seconds (idle gaps cut out)."""

    physician_id: np.ndarray
    kind: np.ndarray  # Assignment.Kind values
    completed: np.ndarray  # seconds since 1970
    seconds: np.ndarray
    timed: np.ndarray  # whether any page-open event was recorded


def task_times(*, physician_ids: list[int] | None = None) -> TaskTimes:
    tasks = Assignment.objects.filter(status=Assignment.Status.DONE)
    events = TaskEvent.objects.filter(assignment__status=Assignment.Status.DONE)
    if physician_ids is not None:
        tasks = tasks.filter(physician_id__in=physician_ids)
        events = events.filter(assignment__physician_id__in=physician_ids)
    task_rows = raw_rows(
        tasks.order_by("id").annotate(done=EpochSeconds("completed")).values_list("id", "physician_id", "kind", "done")
    )
    ids = np.array([r[0] for r in task_rows], dtype=np.int64)
    # Seconds as numbers from the database: 100,000 datetimes parsed in Python cost seconds.
    event_task, at = numeric_columns(
        events.annotate(t=EpochSeconds("at")).values_list("assignment_id", "t"), ("bigint", "double precision")
    )
    task_code = np.searchsorted(ids, event_task)
    seconds = active_seconds(task_code, at, n_tasks=ids.size, idle_seconds=settings.TIME_ON_TASK_IDLE_SECONDS)
    return TaskTimes(
        physician_id=np.array([r[1] for r in task_rows], dtype=np.int64),
        kind=np.array([r[2] for r in task_rows], dtype=object),
        completed=np.array([r[3] for r in task_rows], dtype=np.float64),
        seconds=seconds,
        timed=np.bincount(task_code, minlength=ids.size) > 0,
    )


def _label_seconds(times: TaskTimes) -> dict[int, Estimate]:
    """Median active seconds per labeling item, with its interval, per physician."""
    keep = (times.kind == LABEL.value) & times.timed
    out: dict[int, Estimate] = {}
    pids, seconds = times.physician_id[keep], times.seconds[keep]
    order = np.argsort(pids, kind="stable")
    pids, seconds = pids[order], seconds[order]
    bounds = np.flatnonzero(np.diff(pids)) + 1
    for group in np.split(np.arange(pids.size), bounds) if pids.size else []:
        out[int(pids[group[0]])] = median_interval(seconds[group])
    return out


def _cant_judge_rates() -> tuple[dict[int, Estimate], dict[int, Counter]]:
    """Share of labeling answers that were "can't judge", and every can't-judge by reason."""
    labelled = Counter(
        dict(PhysicianLabel.objects.values("physician_id").annotate(n=Count("id")).values_list("physician_id", "n"))
    )
    reasons: dict[int, Counter] = defaultdict(Counter)
    unsure: Counter = Counter()
    for pid, reason, is_vote in CantJudge.objects.values_list(
        "physician_id", "reason", F("consensus_criterion_id")
    ).iterator():
        reasons[pid][reason] += 1
        if is_vote is None:
            unsure[pid] += 1
    rates = {pid: rate_interval(unsure[pid], labelled[pid] + unsure[pid]) for pid in set(labelled) | set(unsure)}
    return rates, reasons


@dataclass
class Programme:
    """Every physician's figures and the flags that set some apart."""

    agreement: dict[int, LabelAgreement]
    label_seconds: dict[int, Estimate]
    cant_judge: dict[int, Estimate]
    reasons: dict[int, Counter]
    flags: dict[int, list[Flag]]
    labels: Labels
    times: TaskTimes
    removed: set[int] = field(default_factory=set)


def programme() -> Programme:
    """The programme's figures, computed once per change of the labels, answers, events and
    removals behind them, and shared by every process (healthbench_web.shared_cache)."""
    return once_per_version(f"physician-quality:{_fingerprint()}", PROGRAMME_VERSION, programme_computed)


def _fingerprint() -> str:
    """What the figures depend on, in five aggregate queries: any new label, answer, event,
    can't-judge or removal changes it (a label changed in place comes with a new answer event)."""
    parts = [
        PhysicianLabel.objects.aggregate(n=Count("id"), m=Max("id")),
        CantJudge.objects.aggregate(n=Count("id"), m=Max("created")),
        TaskEvent.objects.aggregate(m=Max("id")),
        Assignment.objects.filter(status=Assignment.Status.DONE).aggregate(n=Count("id"), m=Max("completed")),
        Physician.objects.filter(status=Physician.Status.REMOVED).aggregate(n=Count("id"), s=Sum("id")),
        {
            "settings": (
                settings.TIME_ON_TASK_IDLE_SECONDS,
                settings.PHYSICIAN_QUALITY_RESAMPLES,
                settings.PHYSICIAN_OUTLIER_AGREEMENT_MARGIN,
                settings.PHYSICIAN_OUTLIER_SLOW_FACTOR,
                settings.PHYSICIAN_OUTLIER_CANT_JUDGE_MARGIN,
            )
        },
    ]
    return hashlib.sha256(repr(parts).encode()).hexdigest()[:24]


def programme_computed() -> Programme:
    removed = set(Physician.objects.filter(status=Physician.Status.REMOVED).values_list("id", flat=True))
    labels = counted_labels()
    by_code = label_agreement(labels.labels, n_resamples=settings.PHYSICIAN_QUALITY_RESAMPLES)
    agreement = {int(labels.physician_pk[code]): figures for code, figures in by_code.items()}
    times = task_times()
    label_seconds = {p: e for p, e in _label_seconds(times).items() if p not in removed}
    cant_judge, reasons = _cant_judge_rates()
    cant_judge = {p: e for p, e in cant_judge.items() if p not in removed}
    flags = outliers({p: a["macro_f1"] for p, a in agreement.items()}, label_seconds, cant_judge, outlier_rule())
    return Programme(agreement, label_seconds, cant_judge, reasons, flags, labels, times, removed)


def disagreements(labels: Labels, physician_pk: int, limit: int = 50) -> list[dict]:
    """The items where the physician's label differs from a peer's, with the peers who differ."""
    codes = np.flatnonzero(labels.physician_pk == physician_pk)
    if codes.size == 0:
        return []
    lab = labels.labels
    mine = lab.physician == codes[0]
    own = dict(zip(lab.item[mine].tolist(), lab.label[mine].tolist(), strict=True))
    differ: dict[int, list[int]] = defaultdict(list)
    for item, pcode, said in zip(lab.item.tolist(), lab.physician.tolist(), lab.label.tolist(), strict=True):
        if pcode != codes[0] and item in own and said != own[item]:
            differ[item].append(int(labels.physician_pk[pcode]))
    items = sorted(differ)[:limit]
    names = physician_names({p for i in items for p in differ[i]})
    return [
        {
            "response_id": int(labels.response_id[i]),
            "criterion_id": int(labels.criterion_id[i]),
            "met": own[i],
            "differs_from": [names[p] for p in differ[i]],
        }
        for i in items
    ]


def physician_names(ids: set[int]) -> dict[int, str]:
    return {
        pk: username or anonymized or f"physician {pk}"
        for pk, username, anonymized in Physician.objects.filter(id__in=ids).values_list(
            "id", "user__username", "anonymized_id"
        )
    }


def weekly_tasks(times: TaskTimes, physician_pk: int) -> list[dict]:
    """Done tasks per ISO week and kind, with active hours."""
    weeks: dict[str, Counter] = defaultdict(Counter)
    hours: dict[str, float] = defaultdict(float)
    for i in np.flatnonzero(times.physician_id == physician_pk).tolist():
        year, week, _ = datetime.fromtimestamp(times.completed[i], tz=UTC).isocalendar()
        key = f"{year}-W{week:02d}"
        weeks[key][times.kind[i]] += 1
        hours[key] += float(times.seconds[i]) / 3600
    return [
        {"week": key, **{k: weeks[key][k] for k in KINDS.values}, "active_hours": round(hours[key], 3)}
        for key in sorted(weeks)
    ]


def time_by_kind(times: TaskTimes, physician_pk: int) -> list[dict]:
    """Per kind: tasks done, median active seconds and the quartiles (the spread)."""
    mine = (times.physician_id == physician_pk) & times.timed
    out = []
    for kind, label in KINDS.choices:
        seconds = times.seconds[mine & (times.kind == kind)]
        if seconds.size:
            q1, median, q3 = np.quantile(seconds, [0.25, 0.5, 0.75]).tolist()
            out.append({"kind": kind, "label": label, "n": int(seconds.size), "median": median, "q1": q1, "q3": q3})
    return out


def vote_outcomes(physician_pk: int) -> dict[str, int]:
    """How often the physician's vote matched whether the criterion was attached."""
    attached = set(
        Criterion.objects.filter(level=Criterion.Level.CLUSTER, consensus_criterion__isnull=False).values_list(
            "conversation_id", "consensus_criterion_id"
        )
    )
    votes = ConsensusVote.objects.filter(physician_id=physician_pk).values_list(
        "conversation_id", "consensus_criterion_id", "applies"
    )
    n = matched = 0
    for conversation, entry, applies in votes:
        n += 1
        matched += applies == ((conversation, entry) in attached)
    return {"votes": n, "matched": matched}


def rubric_outcomes(physician_pk: int) -> dict[str, int]:
    """Criteria the physician wrote, how many a curator later edited or deleted, and the sign
    warnings they submitted anyway."""
    conversations = CriterionEdit.objects.filter(physician_id=physician_pk, action=CriterionEdit.Action.CREATE)
    edits = CriterionEdit.objects.filter(conversation_id__in=conversations.values("conversation_id")).values_list(
        "conversation_id", "criterion_id", "physician_id", "physician__role", "action", "before", "after"
    )
    authored: set = set()
    written = changed = 0
    touched: set = set()
    for conversation, criterion, pid, role, action, before, after in edits.order_by("id"):
        if action == CriterionEdit.Action.CREATE and pid == physician_pk:
            written += 1
            authored.add((conversation, (after or {}).get("text")))
            if criterion is not None:
                authored.add(("id", criterion))
        elif role == Physician.Role.CURATOR and pid != physician_pk:
            mine = ("id", criterion) in authored or (conversation, (before or {}).get("text")) in authored
            key = ("id", criterion) if criterion is not None else (conversation, (before or {}).get("text"))
            if mine and key not in touched:
                touched.add(key)
                changed += 1
    warnings = sum(
        TaskEvent.objects.filter(assignment__physician_id=physician_pk, sign_warnings__gt=0).values_list(
            "sign_warnings", flat=True
        )
    )
    return {"criteria": written, "changed_by_curators": changed, "sign_warnings_submitted": warnings}


def accounts(times: TaskTimes, *, start: float | None = None, end: float | None = None) -> dict:
    """Per physician and for the programme: tasks done by kind and active hours, for tasks
    completed in [start, end) (seconds since 1970; None for open-ended)."""
    keep = np.ones(times.seconds.size, dtype=bool)
    if start is not None:
        keep &= times.completed >= start
    if end is not None:
        keep &= times.completed < end
    rows: dict[int, dict] = {}
    for i in np.flatnonzero(keep).tolist():
        pid = int(times.physician_id[i])
        row = rows.setdefault(pid, {**dict.fromkeys(KINDS.values, 0), "seconds": 0.0})
        row[times.kind[i]] += 1
        row["seconds"] += float(times.seconds[i])
    totals = {**{k: sum(r[k] for r in rows.values()) for k in KINDS.values}}
    totals["seconds"] = float(times.seconds[keep].sum())
    for row in [*rows.values(), totals]:
        row["active_hours"] = round(row.pop("seconds") / 3600, 3)
    return {"physicians": rows, "totals": totals}

"""Physician quality pages: the programme's overview with its outliers (curators), and one
physician's figures (curators for anyone, a physician for themselves only, never a ranking)."""

from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

from django import forms
from django.conf import settings
from django.contrib.auth.decorators import login_required
from django.http import HttpResponse
from django.shortcuts import render
from django.views.decorators.http import require_GET

from annotation.access import HtmxRequest as HttpRequest
from annotation.access import require_curator
from annotation.models import CantJudge, Physician
from annotation.selectors.gold import gold_tallies
from grading.access import get_physician_for_quality
from grading.physicians import charts, selectors, stored
from grading.physicians.quality import Estimate, Flag, LabelAgreement, rate_interval
from healthbench_web.spreadsheet import csv_text

REASONS = dict(CantJudge.Reason.choices)


@dataclass
class Row:
    physician: Physician
    agreement: LabelAgreement | None
    seconds: Estimate | None
    cant_judge: Estimate | None
    flags: list[Flag]
    evidence: list[dict] = field(default_factory=list)
    reasons: list[tuple[str, int]] = field(default_factory=list)


# Evidence items listed under a flagged physician.
EVIDENCE = 20


@login_required
@require_GET
def quality_overview(request: HttpRequest) -> HttpResponse:
    require_curator(request)
    served = stored.programme_served()
    programme = served.programme
    physicians = Physician.objects.filter(role=Physician.Role.PHYSICIAN).exclude(status=Physician.Status.REMOVED)
    rows = [
        Row(
            physician=p,
            agreement=programme.agreement.get(p.pk),
            seconds=programme.label_seconds.get(p.pk),
            cant_judge=programme.cant_judge.get(p.pk),
            flags=programme.flags.get(p.pk, []),
        )
        for p in physicians.select_related("user").order_by("user__username", "anonymized_id", "id")
    ]
    flagged = [row for row in rows if row.flags]
    for row in flagged:
        if any(f["measure"] == "agreement" for f in row.flags):
            row.evidence = selectors.disagreements(programme.labels, row.physician.pk, limit=EVIDENCE)
        row.reasons = [(REASONS.get(k, k), n) for k, n in programme.reasons.get(row.physician.pk, {}).items()]
    context = {"rows": rows, "flagged": flagged, "rule": selectors.outlier_rule(), "served": served}
    return render(request, "physicians/quality_overview.html", context)


@login_required
@require_GET
def physician_quality(request: HttpRequest, code) -> HttpResponse:
    physician, sees_programme = get_physician_for_quality(request, code)
    served = stored.programme_served()
    programme = served.programme
    agreement = programme.agreement.get(physician.pk)
    weeks = selectors.weekly_tasks(programme.times, physician.pk)
    context: dict[str, object] = {
        "physician": physician,
        "served": served,
        "sees_programme": sees_programme,
        "agreement": agreement,
        "seconds": programme.label_seconds.get(physician.pk),
        "cant_judge": programme.cant_judge.get(physician.pk),
        "reasons": [(REASONS.get(k, k), n) for k, n in programme.reasons.get(physician.pk, {}).items()],
        "flags": programme.flags.get(physician.pk, []) if sees_programme else [],
        "weeks": weeks,
        "time_by_kind": selectors.time_by_kind(programme.times, physician.pk),
        "votes": selectors.vote_outcomes(physician.pk),
        "rubric": selectors.rubric_outcomes(physician.pk),
        "kinds": selectors.KINDS.choices,
        "idle_minutes": round(settings.TIME_ON_TASK_IDLE_SECONDS / 60, 1),
    }
    gold = gold_tallies([physician.pk]).get(physician.pk)
    if gold is not None:
        # Right on first answers to gold items, with Wilson's interval (annotation/selectors/gold.py).
        context["gold"] = {"tally": gold, "accuracy": rate_interval(gold.correct, gold.answered)}
    context["week_chart"] = charts.weekly_bars(weeks, list(selectors.KINDS.values))
    if sees_programme and agreement is not None:
        # Beside the others' figures only for curators: a physician sees no ranking.
        others = [
            a["macro_f1"]["value"]
            for pk, a in programme.agreement.items()
            if pk != physician.pk and pk not in programme.removed and a["macro_f1"]["value"] is not None
        ]
        f1 = agreement["macro_f1"]
        context["agreement_chart"] = charts.agreement_strip(others, f1["value"], f1["low"], f1["high"])
    return render(request, "physicians/physician_quality.html", context)


@login_required
@require_GET
def physician_quality_csv(request: HttpRequest, code) -> HttpResponse:
    """Tasks done per week and kind, with active hours: what the programme's accounts pay."""
    physician, _ = get_physician_for_quality(request, code)
    weeks = selectors.weekly_tasks(selectors.task_times(physician_ids=[physician.pk]), physician.pk)
    kinds = list(selectors.KINDS.values)
    text = csv_text(
        ["week", *kinds, "active_hours"], ([w["week"], *(w[k] for k in kinds), w["active_hours"]] for w in weeks)
    )
    response = HttpResponse(text, content_type="text/csv; charset=utf-8")
    response["Content-Disposition"] = f'attachment; filename="physician-{physician.code}-weeks.csv"'
    return response


class PeriodForm(forms.Form):
    start = forms.DateField(required=False, widget=forms.DateInput(attrs={"type": "date"}))
    end = forms.DateField(
        required=False, widget=forms.DateInput(attrs={"type": "date"}), help_text="The last day counted"
    )

    def bounds(self) -> tuple[float | None, float | None]:
        start, end = self.cleaned_data.get("start"), self.cleaned_data.get("end")
        as_seconds = lambda day: datetime.combine(day, datetime.min.time(), tzinfo=UTC).timestamp()  # noqa: E731
        return (as_seconds(start) if start else None, as_seconds(end + timedelta(days=1)) if end else None)


@login_required
@require_GET
def accounts(request: HttpRequest) -> HttpResponse:
    """Tasks done by kind and active hours per physician over a period, and the programme's
    totals: on the page, or as CSV for paying reviewers (``?format=csv``)."""
    require_curator(request)
    form = PeriodForm(request.GET or None)
    start = end = None
    if form.is_bound and form.is_valid():
        start, end = form.bounds()
    figures = selectors.accounts(selectors.task_times(), start=start, end=end)
    names = selectors.physician_names(set(figures["physicians"]))
    kinds = list(selectors.KINDS.values)
    rows = sorted(((names.get(pid, str(pid)), row) for pid, row in figures["physicians"].items()), key=lambda r: r[0])
    if request.GET.get("format") == "csv":
        lines = [[name, *(row[k] for k in kinds), row["active_hours"]] for name, row in rows]
        totals = figures["totals"]
        lines.append(["programme total", *(totals[k] for k in kinds), totals["active_hours"]])
        response = HttpResponse(csv_text(["physician", *kinds, "active_hours"], lines), content_type="text/csv")
        response["Content-Disposition"] = 'attachment; filename="physician-accounts.csv"'
        return response
    context = {"form": form, "rows": rows, "totals": figures["totals"], "kinds": selectors.KINDS.choices}
    if request.htmx:
        return render(request, "physicians/accounts.html#totals", context)
    return render(request, "physicians/accounts.html", context)

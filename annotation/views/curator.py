"""Curator pages: import through the browser, subsets and their versions, consensus, statistics."""

from django.conf import settings
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.paginator import Paginator
from django.db.models import Count
from django.http import Http404, HttpRequest, HttpResponse, StreamingHttpResponse
from django.shortcuts import redirect, render
from django.utils.translation import gettext
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_POST

from annotation.access import get_subset_for, physician_for, require_role
from annotation.formats.exporter import export_subset_lines
from annotation.formats.importer import ImportFailed, import_healthbench_lines
from annotation.formats.validation import MAX_LINE_BYTES, MAX_UPLOAD_BYTES, READ_CHUNK, split_lines
from annotation.forms.curator import HardBuildForm, ImportForm, PromptIdsForm, SubsetCreateForm, SubsetFilterForm
from annotation.grading_seam import conversation_mean_scores, hardest_conversations
from annotation.models import Physician, Subset, SubsetVersion
from annotation.selectors.consensus_overview import consensus_overview
from annotation.selectors.curation import preview_rows
from annotation.selectors.dataset_stats import subset_stats, version_stats
from annotation.services.subset_builders import consensus_candidates, filtered_conversations
from annotation.services.subset_changes import (
    NothingToUndo,
    SubsetChanged,
    SubsetPlan,
    subset_change_apply,
    subset_change_undo,
    subset_plan_add,
    subset_plan_remove,
    subset_plan_set,
    undoable_change,
)
from annotation.services.subset_versions import SubsetEmpty, export_version_lines, subset_version_freeze

CURATOR = Physician.Role.CURATOR
READERS = (Physician.Role.CURATOR, Physician.Role.RESEARCHER)


def _get_version(subset: Subset, number: str | int | None) -> SubsetVersion | None:
    if number in (None, ""):
        return None
    try:
        return subset.versions.get(number=int(number))
    except (SubsetVersion.DoesNotExist, ValueError):
        raise Http404("No such version") from None


@login_required
def curator_import(request: HttpRequest) -> HttpResponse:
    require_role(request, CURATOR)
    errors, summary = [], None
    form = ImportForm(request.POST or None, request.FILES or None)
    if request.method == "POST" and form.is_valid():
        upload = form.cleaned_data["file"]
        try:
            # Lines are split from the upload's chunks: memory stays bounded and time linear
            # however long a line is (a line past MAX_LINE_BYTES is refused, never assembled).
            lines = split_lines(upload.chunks(READ_CHUNK))
            summary = import_healthbench_lines(lines, subset_name=form.cleaned_data["subset"])
        except ImportFailed as exc:
            errors = exc.errors
    status = 400 if errors or form.errors else 200
    context = {
        "form": form,
        "errors": errors,
        "summary": summary,
        "filename": getattr(form.cleaned_data.get("file"), "name", "") if form.is_bound and form.is_valid() else "",
        "max_upload_bytes": MAX_UPLOAD_BYTES,
        "max_upload_mb": MAX_UPLOAD_BYTES // (1024 * 1024),
        "max_line_mb": MAX_LINE_BYTES // (1024 * 1024),
    }
    return render(request, "curator/import.html", context, status=status)


@login_required
def curator_subsets(request: HttpRequest) -> HttpResponse:
    require_role(request, CURATOR)
    form = SubsetCreateForm(request.POST or None)
    if request.method == "POST" and form.is_valid():
        subset = Subset.objects.create(
            name=form.cleaned_data["name"], kind=form.cleaned_data["kind"], description=form.cleaned_data["description"]
        )
        messages.success(request, gettext("Subset %(name)s created.") % {"name": subset.name})
        return redirect("curator_subset", name=subset.name)
    subsets = Subset.objects.annotate(
        n_members=Count("members", distinct=True), n_versions=Count("versions", distinct=True)
    )
    return render(request, "curator/subsets.html", {"subsets": subsets, "form": form})


def _subset_page(
    request: HttpRequest, subset: Subset, *, preview: dict | None = None, freeze_confirm=None, status: int = 200
) -> HttpResponse:
    members = subset.members.select_related("conversation").order_by("id")
    page = Paginator(members, 50).get_page(request.GET.get("page"))
    context = {
        "subset": subset,
        "page": page,
        "versions": subset.versions.order_by("-number"),
        "filter_form": SubsetFilterForm(),
        "ids_form": PromptIdsForm(),
        "hard_form": HardBuildForm() if subset.kind == Subset.Kind.HARD else None,
        "undo": undoable_change(subset),
        "preview": preview,
        "freeze_confirm": freeze_confirm,
    }
    return render(request, "curator/subset_detail.html", context, status=status)


@never_cache
@login_required
def curator_subset(request: HttpRequest, name: str) -> HttpResponse:
    return _subset_page(request, get_subset_for(request, name))


def _change(request: HttpRequest, subset: Subset, plan: SubsetPlan, *, note: str = "") -> HttpResponse:
    """Apply a plan that only adds; show a plan that removes members and apply it once confirmed.

    The confirmation posts the same fields again with the plan's fingerprint: the plan is worked
    out anew, and applied only if it is still the one the curator saw.
    """
    if plan.empty:
        nothing = gettext("%(action)s: nothing to change.") % {"action": plan.action}
        messages.info(request, f"{nothing} {note}".strip())
        return redirect("curator_subset", name=subset.name)
    confirmed = request.POST.get("confirm", "")
    if plan.destructive and confirmed != plan.fingerprint:
        if confirmed:
            messages.warning(
                request, gettext("The subset or the data changed since that preview. Check this one and confirm again.")
            )
        fields = [
            (key, value)
            for key, values in request.POST.lists()
            if key not in ("csrfmiddlewaretoken", "confirm")
            for value in values
        ]
        preview = {
            "plan": plan,
            "fields": fields,
            "action_url": request.path,
            "added": preview_rows(plan.added),
            "removed": preview_rows(plan.removed),
            "note": note,
        }
        return _subset_page(request, subset, preview=preview)
    try:
        subset_change_apply(subset=subset, plan=plan, by=physician_for(request.user))
    except SubsetChanged:
        messages.error(
            request, gettext("The subset changed while you were looking at it: nothing was applied. Try again.")
        )
        return redirect("curator_subset", name=subset.name)
    text = gettext("%(action)s: %(added)s added, %(removed)s removed. You can undo this until the next freeze.") % {
        "action": plan.action,
        "added": len(plan.added),
        "removed": len(plan.removed),
    }
    messages.success(request, f"{text} {note}".strip())
    return redirect("curator_subset", name=subset.name)


@require_POST
@login_required
def curator_subset_filter(request: HttpRequest, name: str) -> HttpResponse:
    subset = get_subset_for(request, name)
    form = SubsetFilterForm(request.POST)
    if not form.is_valid():
        messages.error(
            request,
            gettext("The filter is not valid: %(errors)s")
            % {"errors": "; ".join(f"{k}: {' '.join(str(e) for e in v)}" for k, v in form.errors.items())},
        )
        return redirect("curator_subset", name=name)
    data = form.cleaned_data
    has_cluster = {"yes": True, "no": False}.get(data["has_cluster"])
    ids = list(
        filtered_conversations(
            themes=data["themes"],
            subsets=[s.name for s in data["from_subsets"]],
            min_turns=data["min_turns"],
            has_cluster=has_cluster,
        ).values_list("id", flat=True)
    )
    matches = f"{len(ids)} match{'' if len(ids) == 1 else 'es'}"
    if data["mode"] == "replace":
        plan = subset_plan_set(subset=subset, conversation_ids=ids, action=f"Replace the members with {matches}")
    else:
        plan = subset_plan_add(subset=subset, conversation_ids=ids, action=f"Add {matches}")
    return _change(request, subset, plan)


@require_POST
@login_required
def curator_subset_pick(request: HttpRequest, name: str) -> HttpResponse:
    subset = get_subset_for(request, name)
    form = PromptIdsForm(request.POST)
    if not form.is_valid():
        messages.error(
            request,
            " ".join(str(e) for e in form.errors.get("prompt_ids", [])) or gettext("Give one prompt_id per line."),
        )
        return redirect("curator_subset", name=name)
    ids, unknown = form.found()
    note = ""
    if unknown:
        more = gettext(" and %(more)s more") % {"more": len(unknown) - 20} if len(unknown) > 20 else ""
        note = gettext("Not found, so left out: %(shown)s.") % {"shown": ", ".join(unknown[:20]) + more}
    if not ids:
        messages.error(
            request, gettext("None of these prompt_ids is a conversation here, so nothing changed.") + " " + note
        )
        return redirect("curator_subset", name=name)
    if form.cleaned_data["action"] == "add":
        plan = subset_plan_add(subset=subset, conversation_ids=ids, action=f"Hand-pick {len(ids)} to add")
    else:
        plan = subset_plan_remove(subset=subset, conversation_ids=ids, action=f"Hand-pick {len(ids)} to remove")
    return _change(request, subset, plan, note=note)


@require_POST
@login_required
def curator_subset_rebuild_consensus(request: HttpRequest, name: str) -> HttpResponse:
    subset = get_subset_for(request, name)
    if subset.kind != Subset.Kind.CONSENSUS:
        messages.error(request, gettext("Only a Consensus subset is rebuilt from attached consensus criteria."))
        return redirect("curator_subset", name=name)
    ids = consensus_candidates().values_list("id", flat=True)
    plan = subset_plan_set(subset=subset, conversation_ids=ids, action="Rebuild from attached consensus criteria")
    return _change(request, subset, plan)


@require_POST
@login_required
def curator_subset_build_hard(request: HttpRequest, name: str) -> HttpResponse:
    subset = get_subset_for(request, name)
    form = HardBuildForm(request.POST)
    if subset.kind != Subset.Kind.HARD:
        messages.error(request, gettext("Only a Hard subset is built from run scores."))
        return redirect("curator_subset", name=name)
    if not form.is_valid():
        messages.error(
            request,
            "Pick at least one run and a positive number: "
            + "; ".join(" ".join(str(e) for e in v) for v in form.errors.values()),
        )
        return redirect("curator_subset", name=name)
    runs = list(form.cleaned_data["runs"])
    n = form.cleaned_data["n"]
    ids = hardest_conversations(conversation_mean_scores(runs), n)
    names = ", ".join(run.name for run in runs)
    plan = subset_plan_set(
        subset=subset, conversation_ids=ids, action=f"Build Hard: the {n} lowest-scoring over {names}"
    )
    return _change(request, subset, plan)


@require_POST
@login_required
def curator_subset_undo(request: HttpRequest, name: str) -> HttpResponse:
    subset = get_subset_for(request, name)
    try:
        change = subset_change_undo(subset=subset)
    except NothingToUndo as exc:
        messages.error(request, gettext("Nothing undone: %(reason)s.") % {"reason": exc})
    else:
        messages.success(
            request,
            gettext("Undone: %(action)s (%(added)s taken out again, %(removed)s put back).")
            % {"action": change.action, "added": len(change.added), "removed": len(change.removed)},
        )
    return redirect("curator_subset", name=name)


@require_POST
@login_required
def curator_subset_freeze(request: HttpRequest, name: str) -> HttpResponse:
    subset = get_subset_for(request, name)
    undo = undoable_change(subset)
    if undo is not None and request.POST.get("confirm") != str(undo.id):
        # Freezing ends the undo of the last change: ask first, on the subset's own page.
        return _subset_page(request, subset, freeze_confirm=undo, status=409)
    try:
        version, created = subset_version_freeze(subset=subset, frozen_by=physician_for(request.user))
    except SubsetEmpty:
        messages.error(
            request,
            gettext("%(name)s has no members, so there is nothing to freeze. Add conversations first.")
            % {"name": subset.name},
        )
        return redirect("curator_subset", name=name)
    if created:
        messages.success(
            request,
            gettext("Frozen as version %(number)s (sha256 %(hash)s…).")
            % {"number": version.number, "hash": version.content_hash[:12]},
        )
    else:
        messages.info(
            request, gettext("Nothing changed since version %(number)s; no new version.") % {"number": version.number}
        )
    return redirect("curator_subset", name=name)


@login_required
def curator_subset_export(request: HttpRequest, name: str) -> StreamingHttpResponse:
    subset = get_subset_for(request, name, *READERS)
    version = _get_version(subset, request.GET.get("frozen"))
    lines = export_version_lines(version) if version else export_subset_lines(subset)
    filename = f"{subset.name}-v{version.number}.jsonl" if version else f"{subset.name}.jsonl"
    response = StreamingHttpResponse((line + "\n" for line in lines), content_type="application/jsonl")
    response["Content-Disposition"] = f'attachment; filename="{filename}"'
    return response


@login_required
def curator_consensus(request: HttpRequest) -> HttpResponse:
    require_role(request, CURATOR)
    return render(
        request, "curator/consensus.html", {"rows": consensus_overview(), "min_agree": settings.CONSENSUS_MIN_AGREE}
    )


@login_required
def curator_stats(request: HttpRequest) -> HttpResponse:
    require_role(request, *READERS)
    subsets = list(Subset.objects.prefetch_related("versions").order_by("name"))
    name = request.GET.get("subset") or (subsets[0].name if subsets else None)
    stats = version = subset = None
    if name:
        subset = get_subset_for(request, name, *READERS)
        version = _get_version(subset, request.GET.get("frozen"))
        stats = version_stats(version) if version else subset_stats(subset)
    context = {"subsets": subsets, "subset": subset, "version": version, "stats": stats}
    return render(request, "curator/stats.html", context)

"""Drafts saved as the physician types (healthbench_web/static/workspace.js posts here a moment after each change)."""

from django.contrib.auth.decorators import login_required
from django.http import HttpResponse, JsonResponse
from django.utils import timezone
from django.views.decorators.http import require_POST

from annotation.access import HtmxRequest, require_working_physician
from annotation.services.text_drafts import DraftRefused, draft_discard, draft_key_allowed, draft_save
from annotation.services.time_on_task import draft_activity


@login_required
@require_POST
def draft_save_view(request: HtmxRequest) -> HttpResponse:
    physician = require_working_physician(request)
    key = request.POST.get("key", "")
    text = request.POST.get("text", "").replace("\x00", "")
    if not draft_key_allowed(physician=physician, key=key):
        return JsonResponse({"error": "This field keeps no draft for you."}, status=404)
    if text.strip():
        try:
            draft = draft_save(physician=physician, key=key, text=text)
        except DraftRefused as refused:
            return JsonResponse({"error": str(refused)}, status=400)
        saved = timezone.localtime(draft.updated)
        draft_activity(physician_id=physician.pk, key=key)
    else:
        draft_discard(physician=physician, key=key)
        saved = timezone.localtime()
    return JsonResponse({"saved": saved.strftime("%H:%M:%S")})

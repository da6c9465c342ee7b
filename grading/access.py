"""Access helpers for runs, their responses and endpoints: every grading view looks objects up here.

Like annotation.access, they check the user's role and return the object or raise, so no
view can forget a check.
"""

from django.core.exceptions import ValidationError
from django.db.models import Exists, OuterRef
from django.http import Http404, HttpRequest

from annotation.access import require_curator, require_role
from annotation.models import Physician
from grading.models import Endpoint, Grade, Response, Run

READERS = (Physician.Role.CURATOR, Physician.Role.RESEARCHER)


def get_run_for_reader(request: HttpRequest, code) -> Run:
    """Researchers and curators read every run's report; physicians never see grader output."""
    require_role(request, *READERS)
    try:
        # With its grader snapshot, its plan's version and source run: every page and report of
        # a run says how it was graded, and what.
        return Run.objects.select_related("grader_config", "subset_version__subset", "responses_from").get(code=code)
    except (Run.DoesNotExist, ValueError, ValidationError):  # a malformed code is simply not found
        raise Http404("No such run") from None


def get_run_response_for_reader(request: HttpRequest, run: Run, code) -> Response:
    """A response that `run` graded, with its conversation; 404 for one outside the run."""
    require_role(request, *READERS)
    in_run = Exists(Grade.objects.filter(run=run, response=OuterRef("pk")))
    try:
        return Response.objects.select_related("conversation").filter(in_run).get(code=code)
    except (Response.DoesNotExist, ValueError, ValidationError):
        raise Http404("No such response in this run") from None


def get_endpoint_for_curator_rw(request: HttpRequest, code) -> Endpoint:
    """An endpoint to edit: curators only (PermissionDenied for anyone else)."""
    require_curator(request)
    try:
        return Endpoint.objects.get(code=code)
    except (Endpoint.DoesNotExist, ValueError, ValidationError):
        raise Http404("No such endpoint") from None

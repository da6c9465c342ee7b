"""Access helpers for runs, their responses and endpoints: every grading view looks objects up here.

Like annotation.access, they check the user's role and return the object or raise, so no
view can forget a check.
"""

from django.core.exceptions import ValidationError
from django.db.models import Exists, OuterRef
from django.http import Http404, HttpRequest

from annotation.access import physician_for, require_curator, require_role, role_of
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


def get_physician_for_quality(request: HttpRequest, code) -> tuple[Physician, bool]:
    """A physician's quality page: (the physician, whether the reader sees the programme).

    Curators read every physician's; a physician reads only their own (any other code is a
    404, so codes cannot be probed), and never the others' figures."""
    role = role_of(request.user)
    if role == Physician.Role.CURATOR:
        try:
            return Physician.objects.select_related("user").get(code=code), True
        except (Physician.DoesNotExist, ValueError, ValidationError):
            raise Http404("No such physician") from None
    own = physician_for(request.user)
    if role == Physician.Role.PHYSICIAN and own is not None and str(own.code) == str(code):
        return own, False
    raise Http404("No such physician")

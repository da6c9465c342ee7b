from django.contrib import admin, messages
from django.utils.translation import gettext

from grading.endpoint_rules import key_variable_problem
from grading.endpoints.forms import EndpointForm
from grading.endpoints.selectors import endpoints_with_key_problems
from grading.models import Endpoint, Grade, GraderConfig, Response, Run, SampleFailure
from healthbench_web.admin_text import TEXT_IN_ANY_SCRIPT


@admin.register(Response)
class ResponseAdmin(admin.ModelAdmin):
    formfield_overrides = TEXT_IN_ANY_SCRIPT
    list_display = ["__str__", "source", "model_name", "sample_index", "completion_id", "created"]
    list_filter = ["source", "model_name"]
    search_fields = ["conversation__prompt_id", "completion_id", "text"]
    raw_id_fields = ["conversation", "author"]


@admin.register(Endpoint)
class EndpointAdmin(admin.ModelAdmin):
    """The same form, and so the same rules, as the curator page."""

    form = EndpointForm
    list_display = ["name", "model", "api_style", "reasoning", "base_url", "key_variable", "key_allowed"]
    search_fields = ["name", "model", "base_url"]

    @admin.display(boolean=True, description="key variable allowed")
    def key_allowed(self, endpoint: Endpoint) -> bool:
        return key_variable_problem(endpoint.key_variable) is None

    def changelist_view(self, request, extra_context=None):
        # Endpoints migrated from old grader configurations may name any variable: say so
        # where curators look, until each is changed to an allowed one.
        for endpoint, problem in endpoints_with_key_problems():
            refused = gettext("%(name)s: %(problem)s. Runs on it are refused until it is changed.")
            messages.warning(request, refused % {"name": endpoint.name, "problem": problem})
        return super().changelist_view(request, extra_context)


@admin.register(GraderConfig)
class GraderConfigAdmin(admin.ModelAdmin):
    """Snapshots are records of what runs called: read-only."""

    list_display = ["name", "endpoint_name", "model", "api_style", "reasoning", "base_url"]
    search_fields = ["name", "model", "base_url", "endpoint_name"]

    def has_change_permission(self, request, obj=None) -> bool:
        return False


@admin.register(Run)
class RunAdmin(admin.ModelAdmin):
    list_display = ["name", "status", "grader_config", "policy_model", "created", "finished"]
    list_filter = ["status", "grader_config"]
    search_fields = ["name", "policy_model"]
    raw_id_fields = ["subset_version"]


@admin.register(Grade)
class GradeAdmin(admin.ModelAdmin):
    formfield_overrides = TEXT_IN_ANY_SCRIPT
    list_display = ["run", "response", "points", "status", "met", "attempts", "reused"]
    list_filter = ["status", "met", "reused", "run"]
    search_fields = ["criterion_text", "response__conversation__prompt_id", "explanation"]
    raw_id_fields = ["run", "response", "criterion"]


@admin.register(SampleFailure)
class SampleFailureAdmin(admin.ModelAdmin):
    list_display = ["run", "conversation", "sample_index", "error", "attempts"]
    list_filter = ["run"]
    raw_id_fields = ["run", "conversation"]

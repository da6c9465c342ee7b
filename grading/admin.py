from django.contrib import admin

from grading.models import Grade, GraderConfig, Response, Run


@admin.register(Response)
class ResponseAdmin(admin.ModelAdmin):
    list_display = ["__str__", "source", "model_name", "sample_index", "completion_id", "created"]
    list_filter = ["source", "model_name"]
    search_fields = ["conversation__prompt_id", "completion_id", "text"]
    raw_id_fields = ["conversation", "author"]


@admin.register(GraderConfig)
class GraderConfigAdmin(admin.ModelAdmin):
    list_display = ["name", "model", "base_url", "temperature", "max_tokens"]
    search_fields = ["name", "model", "base_url"]


@admin.register(Run)
class RunAdmin(admin.ModelAdmin):
    list_display = ["name", "status", "grader_config", "policy_model", "created", "finished"]
    list_filter = ["status", "grader_config"]
    search_fields = ["name", "policy_model"]
    raw_id_fields = ["subset_version"]


@admin.register(Grade)
class GradeAdmin(admin.ModelAdmin):
    list_display = ["run", "response", "points", "status", "met", "attempts", "reused"]
    list_filter = ["status", "met", "reused", "run"]
    search_fields = ["criterion_text", "response__conversation__prompt_id", "explanation"]
    raw_id_fields = ["run", "response", "criterion"]

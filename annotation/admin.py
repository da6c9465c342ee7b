from django.contrib import admin

from annotation.models import (
    Assignment,
    ConsensusCriterion,
    ConsensusVote,
    Conversation,
    Criterion,
    CriterionEdit,
    GoldAnswer,
    GoldItem,
    IdealResponse,
    Physician,
    PhysicianLabel,
    Subset,
    SubsetMember,
    SubsetVersion,
)
from annotation.rubric_versions import rubric_changed
from healthbench_web.admin_text import TEXT_IN_ANY_SCRIPT


@admin.register(Physician)
class PhysicianAdmin(admin.ModelAdmin):
    list_display = ["__str__", "role", "status", "specialty", "country", "career_stage"]
    list_filter = ["role", "status", "career_stage", "country"]
    search_fields = ["user__username", "user__email", "anonymized_id", "specialty", "country"]
    raw_id_fields = ["user"]


class CriterionInline(admin.TabularInline):
    formfield_overrides = TEXT_IN_ANY_SCRIPT
    model = Criterion
    fields = ["position", "points", "text", "axis", "level", "consensus_criterion", "flagged_for_review"]
    raw_id_fields = ["consensus_criterion"]
    extra = 0


@admin.register(Conversation)
class ConversationAdmin(admin.ModelAdmin):
    formfield_overrides = TEXT_IN_ANY_SCRIPT
    list_display = ["prompt_id", "theme", "turns", "created"]
    list_filter = ["theme", "subsets"]
    search_fields = ["prompt_id", "messages"]
    inlines = [CriterionInline]
    raw_id_fields = ["author"]
    exclude = ["rubric_version"]

    def save_formset(self, request, form, formset, change):
        super().save_formset(request, form, formset, change)
        if formset.model is Criterion and (formset.new_objects or formset.changed_objects or formset.deleted_objects):
            rubric_changed([form.instance.id])


@admin.register(Criterion)
class CriterionAdmin(admin.ModelAdmin):
    formfield_overrides = TEXT_IN_ANY_SCRIPT
    list_display = ["__str__", "conversation", "points", "axis", "level", "origin", "flagged_for_review"]
    list_filter = ["level", "origin", "axis", "flagged_for_review"]
    search_fields = ["text", "conversation__prompt_id"]
    raw_id_fields = ["conversation", "author", "consensus_criterion"]

    # Every criterion written here moves its conversation's rubric version (and the old one's,
    # when the criterion moved to another conversation), as the services' writes do.
    def save_model(self, request, obj, form, change):
        before = form.initial.get("conversation") if change else None
        super().save_model(request, obj, form, change)
        rubric_changed([obj.conversation_id, *([before] if before else [])])

    def delete_model(self, request, obj):
        super().delete_model(request, obj)
        rubric_changed([obj.conversation_id])

    def delete_queryset(self, request, queryset):
        conversation_ids = list(queryset.values_list("conversation_id", flat=True))
        super().delete_queryset(request, queryset)
        rubric_changed(conversation_ids)


@admin.register(ConsensusCriterion)
class ConsensusCriterionAdmin(admin.ModelAdmin):
    formfield_overrides = TEXT_IN_ANY_SCRIPT
    list_display = ["cluster", "theme", "axis", "points", "in_meta_eval"]
    list_filter = ["theme", "axis", "in_meta_eval"]
    search_fields = ["cluster", "text"]


@admin.register(ConsensusVote)
class ConsensusVoteAdmin(admin.ModelAdmin):
    list_display = ["physician", "conversation", "consensus_criterion", "applies", "created"]
    list_filter = ["applies", "consensus_criterion__theme"]
    search_fields = ["conversation__prompt_id", "consensus_criterion__cluster", "physician__user__username"]
    raw_id_fields = ["physician", "conversation", "consensus_criterion"]


@admin.register(IdealResponse)
class IdealResponseAdmin(admin.ModelAdmin):
    formfield_overrides = TEXT_IN_ANY_SCRIPT
    list_display = ["conversation", "group", "condition", "from_dataset", "author", "created"]
    list_filter = ["condition", "group", "from_dataset"]
    search_fields = ["conversation__prompt_id", "text"]
    raw_id_fields = ["conversation", "author"]


@admin.register(PhysicianLabel)
class PhysicianLabelAdmin(admin.ModelAdmin):
    formfield_overrides = TEXT_IN_ANY_SCRIPT
    list_display = ["physician", "response", "criterion", "met", "created"]
    list_filter = ["met", "criterion__level"]
    search_fields = ["response__conversation__prompt_id", "physician__anonymized_id", "physician__user__username"]
    raw_id_fields = ["physician", "response", "criterion"]


@admin.register(Subset)
class SubsetAdmin(admin.ModelAdmin):
    list_display = ["name", "kind", "created"]
    list_filter = ["kind"]
    search_fields = ["name", "description"]


@admin.register(SubsetMember)
class SubsetMemberAdmin(admin.ModelAdmin):
    list_display = ["subset", "conversation", "added"]
    list_filter = ["subset"]
    search_fields = ["conversation__prompt_id"]
    raw_id_fields = ["conversation"]


@admin.register(SubsetVersion)
class SubsetVersionAdmin(admin.ModelAdmin):
    list_display = ["subset", "number", "content_hash", "frozen"]
    list_filter = ["subset"]
    search_fields = ["content_hash", "subset__name"]
    raw_id_fields = ["conversations", "frozen_by"]


@admin.register(CriterionEdit)
class CriterionEditAdmin(admin.ModelAdmin):
    """The rubric audit trail: read it here, never change it."""

    list_display = ["created", "physician", "action", "conversation", "criterion"]
    list_filter = ["action"]
    search_fields = ["conversation__prompt_id", "physician__user__username"]
    raw_id_fields = ["criterion", "conversation", "physician"]

    def has_change_permission(self, request, obj=None) -> bool:
        return False

    def has_delete_permission(self, request, obj=None) -> bool:
        return False


@admin.register(Assignment)
class AssignmentAdmin(admin.ModelAdmin):
    formfield_overrides = TEXT_IN_ANY_SCRIPT
    list_display = ["physician", "kind", "conversation", "status", "created", "completed"]
    list_filter = ["kind", "status"]
    search_fields = ["conversation__prompt_id", "physician__user__username"]
    raw_id_fields = ["physician", "conversation", "response", "criterion", "assigned_by", "reference_responses"]


@admin.register(GoldItem)
class GoldItemAdmin(admin.ModelAdmin):
    """Gold items, validated as on the curator's page (GoldItem.clean and its constraints)."""

    formfield_overrides = TEXT_IN_ANY_SCRIPT
    list_display = ["__str__", "answer", "created_by", "created"]
    list_filter = ["answer"]
    search_fields = ["conversation__prompt_id", "rationale"]
    raw_id_fields = ["conversation", "response", "criterion", "consensus_criterion", "created_by"]


@admin.register(GoldAnswer)
class GoldAnswerAdmin(admin.ModelAdmin):
    """Physicians' first answers on gold items: read-only, they are what accuracy counts."""

    list_display = ["__str__", "answer", "created"]
    raw_id_fields = ["gold", "physician"]
    readonly_fields = ["gold", "physician", "answer", "created"]

    def has_add_permission(self, request) -> bool:
        return False

"""Query filters of the dataset API, one FilterSet per list.

django-filter validates each value against its field: an unknown theme, level, axis, subset
or cluster answers 400 naming the parameter, instead of an empty list that looks like "no
matches". The OpenAPI parameters are generated from these classes (drf-spectacular).
"""

import django_filters

from annotation.models import THEMES, Axis, ConsensusCriterion, Conversation, Criterion, Subset, SubsetVersion


class ConversationFilter(django_filters.FilterSet):
    theme = django_filters.ChoiceFilter(choices=[(t, t) for t in THEMES], help_text="e.g. emergency_referrals")
    subset = django_filters.ModelChoiceFilter(
        field_name="memberships__subset",
        to_field_name="name",
        queryset=Subset.objects.all(),
        help_text="subset name",
    )
    prompt_id = django_filters.CharFilter()

    class Meta:
        model = Conversation
        fields = ["theme", "subset", "prompt_id"]


class CriterionFilter(django_filters.FilterSet):
    conversation = django_filters.CharFilter(field_name="conversation__prompt_id", help_text="prompt_id")
    level = django_filters.ChoiceFilter(choices=Criterion.Level.choices)
    axis = django_filters.ChoiceFilter(choices=Axis.choices)
    cluster = django_filters.ModelChoiceFilter(
        field_name="consensus_criterion",
        to_field_name="cluster",
        queryset=ConsensusCriterion.objects.all(),
        help_text="e.g. cluster:emergency_referrals_...",
    )

    class Meta:
        model = Criterion
        fields = ["conversation", "level", "axis", "cluster"]


class SubsetVersionFilter(django_filters.FilterSet):
    subset = django_filters.ModelChoiceFilter(
        to_field_name="name", queryset=Subset.objects.all(), help_text="subset name"
    )

    class Meta:
        model = SubsetVersion
        fields = ["subset"]

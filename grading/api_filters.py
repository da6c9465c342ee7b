"""Query filters of the runs API (see annotation/api_filters.py for why FilterSets)."""

import django_filters

from grading.models import Grade, Run


class RunFilter(django_filters.FilterSet):
    status = django_filters.ChoiceFilter(choices=Run.Status.choices)

    class Meta:
        model = Run
        fields = ["status"]


class GradeFilter(django_filters.FilterSet):
    status = django_filters.ChoiceFilter(choices=Grade.Status.choices)
    prompt_id = django_filters.CharFilter(field_name="response__conversation__prompt_id")

    class Meta:
        model = Grade
        fields = ["status", "prompt_id"]

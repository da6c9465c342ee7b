"""REST API for physician quality: every physician's figures (curators), one physician's
figures (curators for anyone, a physician for themselves), as the pages show them."""

from __future__ import annotations

from django.core.exceptions import ValidationError
from drf_spectacular.utils import extend_schema
from rest_framework import serializers, viewsets
from rest_framework.exceptions import NotFound, PermissionDenied
from rest_framework.permissions import BasePermission
from rest_framework.request import Request
from rest_framework.response import Response

from annotation.access import physician_for, role_of
from annotation.models import Physician
from annotation.selectors.gold import GoldTally, gold_tallies
from grading.physicians import selectors, stored
from grading.physicians.quality import rate_interval


class EstimateSerializer(serializers.Serializer):
    value = serializers.FloatField(allow_null=True)
    low = serializers.FloatField(allow_null=True)
    high = serializers.FloatField(allow_null=True)


class AgreementSerializer(serializers.Serializer):
    n_items = serializers.IntegerField(help_text="Items another physician labelled too")
    n_pairs = serializers.IntegerField()
    macro_f1 = EstimateSerializer(help_text="Pairwise macro F1, as the reference's physician baseline")
    kappa = EstimateSerializer(help_text="Cohen's kappa on the same pairs")


class FlagSerializer(serializers.Serializer):
    measure = serializers.ChoiceField(choices=["agreement", "active_time", "cant_judge"])
    value = serializers.FloatField()
    bound = serializers.FloatField()
    others_median = serializers.FloatField()


class GoldSerializer(serializers.Serializer):
    answered = serializers.IntegerField(help_text="Gold items answered (first answers)")
    correct = serializers.IntegerField()
    accuracy = EstimateSerializer(help_text="correct / answered with Wilson's 95% interval")


class PhysicianQualitySerializer(serializers.Serializer):
    code = serializers.UUIDField()
    name = serializers.CharField()
    status = serializers.CharField()
    agreement = AgreementSerializer(allow_null=True)
    label_seconds = EstimateSerializer(allow_null=True, help_text="Median active seconds per labeling item")
    cant_judge = EstimateSerializer(allow_null=True, help_text="Share of labeling answers that were can't judge")
    cant_judge_reasons = serializers.DictField(child=serializers.IntegerField())
    flags = FlagSerializer(many=True, help_text="Empty for a physician reading their own figures")
    gold = GoldSerializer(allow_null=True, help_text="Gold items answered; null before the first")


class WeekSerializer(serializers.Serializer):
    week = serializers.CharField()
    rubric = serializers.IntegerField()
    ideal_response = serializers.IntegerField()
    consensus_vote = serializers.IntegerField()
    # "label" would shadow the serializer field's own attribute.
    labels = serializers.IntegerField(source="label")
    active_hours = serializers.FloatField()


class PhysicianQualityDetailSerializer(PhysicianQualitySerializer):
    weeks = WeekSerializer(many=True)
    votes = serializers.DictField(child=serializers.IntegerField())
    rubric = serializers.DictField(child=serializers.IntegerField())


class CuratorsOrThemselves(BasePermission):
    message = "Physician quality is open to curators, and to each physician for their own figures."

    def has_permission(self, request, view) -> bool:
        role = role_of(request.user)
        return role == Physician.Role.CURATOR or (role == Physician.Role.PHYSICIAN and view.action == "retrieve")


def _gold(tally: GoldTally | None) -> dict | None:
    if tally is None:
        return None
    accuracy = rate_interval(tally.correct, tally.answered)
    return {"answered": tally.answered, "correct": tally.correct, "accuracy": accuracy}


def _figures(
    programme: selectors.Programme, physician: Physician, *, with_flags: bool, gold: dict[int, GoldTally]
) -> dict:
    return {
        "code": physician.code,
        "name": str(physician),
        "status": physician.status,
        "agreement": programme.agreement.get(physician.pk),
        "label_seconds": programme.label_seconds.get(physician.pk),
        "cant_judge": programme.cant_judge.get(physician.pk),
        "cant_judge_reasons": dict(programme.reasons.get(physician.pk, {})),
        "flags": programme.flags.get(physician.pk, []) if with_flags else [],
        "gold": _gold(gold.get(physician.pk)),
    }


class PhysicianQualityViewSet(viewsets.ViewSet):
    permission_classes = [CuratorsOrThemselves]
    lookup_field = "code"
    lookup_value_regex = "[0-9a-f-]{36}"
    serializer_class = PhysicianQualitySerializer

    @extend_schema(responses={200: PhysicianQualitySerializer(many=True)})
    def list(self, request: Request) -> Response:
        programme = stored.programme()
        physicians = list(
            Physician.objects.filter(role=Physician.Role.PHYSICIAN)
            .exclude(status=Physician.Status.REMOVED)
            .select_related("user")
            .order_by("id")
        )
        gold = gold_tallies(p.pk for p in physicians)
        rows = [_figures(programme, p, with_flags=True, gold=gold) for p in physicians]
        return Response(PhysicianQualitySerializer(rows, many=True).data)

    @extend_schema(responses={200: PhysicianQualityDetailSerializer})
    def retrieve(self, request: Request, code: str | None = None) -> Response:
        curator = role_of(request.user) == Physician.Role.CURATOR
        own = physician_for(request.user)
        try:
            physician = Physician.objects.select_related("user").get(code=str(code))
        except (Physician.DoesNotExist, ValueError, ValidationError):
            raise NotFound("No such physician") from None
        if not curator and (own is None or own.pk != physician.pk):
            # Another physician's code: not found, so codes cannot be probed.
            raise NotFound("No such physician")
        if not curator and physician.status == Physician.Status.REMOVED:
            raise PermissionDenied
        programme = stored.programme()
        data = _figures(programme, physician, with_flags=curator, gold=gold_tallies([physician.pk]))
        data["weeks"] = selectors.weekly_tasks(programme.times, physician.pk)
        data["votes"] = selectors.vote_outcomes(physician.pk)
        data["rubric"] = selectors.rubric_outcomes(physician.pk)
        return Response(PhysicianQualityDetailSerializer(data).data)

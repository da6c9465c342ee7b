"""REST API for conversations, criteria, subsets and their versions."""

from __future__ import annotations

from django.db.models import Count, Prefetch
from drf_spectacular.utils import extend_schema
from rest_framework import mixins, serializers, status, viewsets
from rest_framework.decorators import action
from rest_framework.response import Response

from annotation.access import physician_for
from annotation.api_filters import ConversationFilter, CriterionFilter, SubsetVersionFilter
from annotation.models import ConsensusCriterion, Conversation, Criterion, Subset, SubsetVersion
from annotation.services.subset_versions import SubsetEmpty, subset_version_freeze
from healthbench_web.api_permissions import ReadersOnly


class CriterionSerializer(serializers.ModelSerializer):
    conversation: serializers.SlugRelatedField[Conversation] = serializers.SlugRelatedField(
        slug_field="prompt_id", read_only=True
    )
    # Null for a criterion written for its conversation (level:example).
    cluster: serializers.SlugRelatedField[ConsensusCriterion] = serializers.SlugRelatedField(
        source="consensus_criterion", slug_field="cluster", read_only=True, allow_null=True
    )

    class Meta:
        model = Criterion
        fields = [
            "id",
            "conversation",
            "position",
            "text",
            "points",
            "tags",
            "level",
            "axis",
            "cluster",
            "flagged_for_review",
        ]


class RubricItemSerializer(serializers.ModelSerializer):
    class Meta:
        model = Criterion
        fields = ["id", "position", "text", "points", "tags", "level", "axis"]


class MessageSerializer(serializers.Serializer):
    role = serializers.CharField()
    content = serializers.CharField()


class ConversationSerializer(serializers.ModelSerializer):
    messages = MessageSerializer(many=True)
    n_criteria = serializers.IntegerField(read_only=True)

    class Meta:
        model = Conversation
        fields = ["code", "prompt_id", "theme", "example_tags", "messages", "n_criteria", "created"]


class ConversationDetailSerializer(ConversationSerializer):
    criteria = RubricItemSerializer(many=True, read_only=True)

    class Meta(ConversationSerializer.Meta):
        fields = [*ConversationSerializer.Meta.fields, "criteria"]


class ConversationViewSet(viewsets.ReadOnlyModelViewSet):
    permission_classes = [ReadersOnly]
    lookup_field = "prompt_id"
    lookup_value_regex = "[^/]+"
    filterset_class = ConversationFilter

    def get_queryset(self):
        query = Conversation.objects.annotate(n_criteria=Count("criteria")).order_by("id")
        if self.action == "retrieve":
            query = query.prefetch_related(Prefetch("criteria", Criterion.objects.order_by("position", "id")))
        return query

    def get_serializer_class(self):
        return ConversationDetailSerializer if self.action == "retrieve" else ConversationSerializer


class CriterionViewSet(viewsets.ReadOnlyModelViewSet):
    permission_classes = [ReadersOnly]
    serializer_class = CriterionSerializer
    filterset_class = CriterionFilter

    def get_queryset(self):
        return Criterion.objects.select_related("conversation", "consensus_criterion").order_by("id")


class SubsetVersionSerializer(serializers.ModelSerializer):
    subset: serializers.SlugRelatedField[Subset] = serializers.SlugRelatedField(slug_field="name", read_only=True)
    n_conversations = serializers.IntegerField(read_only=True)

    class Meta:
        model = SubsetVersion
        fields = ["code", "subset", "number", "content_hash", "n_conversations", "frozen"]


def _versions():
    # The snapshot can hold megabytes of rubrics: list views never load it.
    return (
        SubsetVersion.objects.select_related("subset")
        .defer("snapshot")
        .annotate(n_conversations=Count("conversations"))
    )


class SubsetSerializer(serializers.ModelSerializer):
    n_conversations = serializers.IntegerField(read_only=True)
    versions = SubsetVersionSerializer(many=True, read_only=True)

    class Meta:
        model = Subset
        fields = ["name", "kind", "description", "n_conversations", "versions", "created"]
        read_only_fields = ["kind"]


class SubsetViewSet(mixins.CreateModelMixin, viewsets.ReadOnlyModelViewSet):
    """Subsets; curators create custom subsets and freeze versions."""

    permission_classes = [ReadersOnly]
    serializer_class = SubsetSerializer
    lookup_field = "name"

    def get_queryset(self):
        versions = Prefetch("versions", _versions().order_by("number"))
        return (
            Subset.objects.annotate(n_conversations=Count("members", distinct=True))
            .prefetch_related(versions)
            .order_by("name")
        )

    def create(self, request, *args, **kwargs):
        serializer = self.get_serializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        subset = serializer.save(kind=Subset.Kind.CUSTOM)
        # Read back through the list's queryset, so the answer carries n_conversations (0) and
        # versions like every other subset document.
        return Response(self.get_serializer(self.get_queryset().get(pk=subset.pk)).data, status=status.HTTP_201_CREATED)

    @extend_schema(request=None, responses={201: SubsetVersionSerializer, 200: SubsetVersionSerializer, 400: None})
    @action(detail=True, methods=["post"])
    def freeze(self, request, name=None):
        try:
            version, created = subset_version_freeze(subset=self.get_object(), frozen_by=physician_for(request.user))
        except SubsetEmpty as exc:
            raise serializers.ValidationError({"detail": str(exc)}) from None
        version = _versions().get(pk=version.pk)
        return Response(
            SubsetVersionSerializer(version).data, status=status.HTTP_201_CREATED if created else status.HTTP_200_OK
        )


class SubsetVersionViewSet(viewsets.ReadOnlyModelViewSet):
    permission_classes = [ReadersOnly]
    serializer_class = SubsetVersionSerializer
    lookup_field = "code"
    filterset_class = SubsetVersionFilter

    def get_queryset(self):
        return _versions().order_by("subset__name", "number")

"""REST API for conversations, criteria, subsets and their versions."""

from django.db.models import Count, Prefetch
from drf_spectacular.utils import OpenApiParameter, extend_schema, extend_schema_view
from rest_framework import mixins, serializers, status, viewsets
from rest_framework.decorators import action
from rest_framework.response import Response

from annotation.access import physician_for
from annotation.models import Conversation, Criterion, Subset, SubsetVersion
from annotation.services.subset_versions import SubsetEmpty, subset_version_freeze
from healthbench_web.api_permissions import ReadersOnly


class CriterionSerializer(serializers.ModelSerializer):
    conversation = serializers.SlugRelatedField(slug_field="prompt_id", read_only=True)
    cluster = serializers.SlugRelatedField(source="consensus_criterion", slug_field="cluster", read_only=True)

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
        fields = ConversationSerializer.Meta.fields + ["criteria"]


FILTERS = [
    OpenApiParameter("theme", str, description="e.g. emergency_referrals"),
    OpenApiParameter("subset", str, description="subset name"),
    OpenApiParameter("prompt_id", str),
]


@extend_schema_view(list=extend_schema(parameters=FILTERS))
class ConversationViewSet(viewsets.ReadOnlyModelViewSet):
    permission_classes = [ReadersOnly]
    lookup_field = "prompt_id"
    lookup_value_regex = "[^/]+"

    def get_queryset(self):
        query = Conversation.objects.annotate(n_criteria=Count("criteria")).order_by("id")
        params = self.request.query_params
        if params.get("theme"):
            query = query.filter(theme=params["theme"])
        if params.get("subset"):
            query = query.filter(memberships__subset__name=params["subset"])
        if params.get("prompt_id"):
            query = query.filter(prompt_id=params["prompt_id"])
        if self.action == "retrieve":
            query = query.prefetch_related(Prefetch("criteria", Criterion.objects.order_by("position", "id")))
        return query

    def get_serializer_class(self):
        return ConversationDetailSerializer if self.action == "retrieve" else ConversationSerializer


@extend_schema_view(
    list=extend_schema(
        parameters=[
            OpenApiParameter("conversation", str, description="prompt_id"),
            OpenApiParameter("level", str, enum=["example", "cluster"]),
            OpenApiParameter("axis", str),
            OpenApiParameter("cluster", str, description="e.g. cluster:emergency_referrals_..."),
        ]
    )
)
class CriterionViewSet(viewsets.ReadOnlyModelViewSet):
    permission_classes = [ReadersOnly]
    serializer_class = CriterionSerializer

    def get_queryset(self):
        query = Criterion.objects.select_related("conversation", "consensus_criterion").order_by("id")
        params = self.request.query_params
        if params.get("conversation"):
            query = query.filter(conversation__prompt_id=params["conversation"])
        if params.get("level"):
            query = query.filter(level=params["level"])
        if params.get("axis"):
            query = query.filter(axis=params["axis"])
        if params.get("cluster"):
            query = query.filter(consensus_criterion__cluster=params["cluster"])
        return query


class SubsetVersionSerializer(serializers.ModelSerializer):
    subset = serializers.SlugRelatedField(slug_field="name", read_only=True)
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

    def perform_create(self, serializer):
        serializer.save(kind=Subset.Kind.CUSTOM)

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

    def get_queryset(self):
        query = _versions().order_by("subset__name", "number")
        if self.request.query_params.get("subset"):
            query = query.filter(subset__name=self.request.query_params["subset"])
        return query

from django.urls import include, path
from drf_spectacular.views import SpectacularAPIView
from rest_framework.routers import DefaultRouter

from annotation.api import ConversationViewSet, CriterionViewSet, SubsetVersionViewSet, SubsetViewSet
from grading.api import EndpointViewSet, RunViewSet
from grading.physicians.api import PhysicianQualityViewSet
from healthbench_web.api_docs import api_docs
from healthbench_web.api_token import token_view

router = DefaultRouter()
router.register("conversations", ConversationViewSet, basename="api-conversation")
router.register("criteria", CriterionViewSet, basename="api-criterion")
router.register("subsets", SubsetViewSet, basename="api-subset")
router.register("subset-versions", SubsetVersionViewSet, basename="api-subset-version")
router.register("runs", RunViewSet, basename="api-run")
router.register("endpoints", EndpointViewSet, basename="api-endpoint")
router.register("physicians", PhysicianQualityViewSet, basename="api-physician-quality")

urlpatterns = [
    path("token/", token_view, name="api_token"),
    path("schema/", SpectacularAPIView.as_view(), name="api_schema"),
    path("docs/", api_docs, name="api_docs"),
    path("", include(router.urls)),
]

from django.urls import include, path

urlpatterns = [
    path("", include("grading.pipeline.urls")),
    path("", include("grading.endpoints.urls")),
    path("", include("grading.reports.urls")),
    path("", include("grading.metaeval.urls")),
    path("", include("grading.calibration.urls")),
    path("", include("grading.physicians.urls")),
]

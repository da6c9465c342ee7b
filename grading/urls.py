from django.urls import include, path

urlpatterns = [
    path("", include("grading.urls_runs")),
    path("", include("grading.urls_reports")),
    path("", include("grading.urls_metaeval")),
    path("", include("grading.urls_compare")),
]

from django.urls import path, re_path

from grading.metaeval import views as views_metaeval

urlpatterns = [
    path("metaeval/", views_metaeval.metaeval_runs, name="metaeval_runs"),
    path("metaeval/report/", views_metaeval.metaeval_report, name="metaeval_report"),
    path("metaeval/disagreements/", views_metaeval.metaeval_disagreements, name="metaeval_disagreements"),
    path("metaeval/graders/", views_metaeval.graders_comparison, name="graders_comparison"),
    path("metaeval/graders/launch/", views_metaeval.graders_comparison_launch, name="graders_comparison_launch"),
    re_path(r"^metaeval/download\.(?P<fmt>json|csv)$", views_metaeval.metaeval_download, name="metaeval_download"),
]

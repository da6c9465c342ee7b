from django.urls import path

from grading.reports import compare_views, views

urlpatterns = [
    path("reports/", views.report_list, name="report_list"),
    path("reports/<uuid:code>/", views.report_detail, name="report_detail"),
    path("reports/<uuid:code>/report.json", views.report_json, name="report_json"),
    path("reports/<uuid:code>/report.csv", views.report_csv_download, name="report_csv"),
    path("reports/<uuid:code>/allresults.json", views.report_results_download, name="report_results"),
    path(
        "reports/<uuid:code>/responses/<uuid:response_code>/",
        views.report_transcript,
        name="report_transcript",
    ),
    path("compare/", compare_views.run_compare, name="compare_runs"),
    path("compare/comparison.json", compare_views.run_compare_json, name="compare_runs_json"),
    path("compare/ideal/", compare_views.ideal_vs_reference, name="compare_ideal"),
]

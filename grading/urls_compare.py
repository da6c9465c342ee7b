from django.urls import path

from grading import views_compare as views

urlpatterns = [
    path("compare/", views.run_compare, name="compare_runs"),
    path("compare/comparison.json", views.run_compare_json, name="compare_runs_json"),
    path("compare/ideal/", views.ideal_vs_reference, name="compare_ideal"),
]

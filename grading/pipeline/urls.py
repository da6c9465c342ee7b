from django.urls import path

from grading.pipeline import views

urlpatterns = [
    path("runs/", views.run_list, name="run_list"),
    path("runs/new/", views.run_new, name="run_new"),
    path("runs/<uuid:code>/", views.run_detail, name="run_detail"),
    path("runs/<uuid:code>/cancel/", views.run_cancel_view, name="run_cancel"),
    path("runs/<uuid:code>/retry/", views.run_retry_view, name="run_retry"),
    path("runs/<uuid:code>/resume/", views.run_resume_view, name="run_resume"),
]

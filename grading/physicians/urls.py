from django.urls import path

from grading.physicians import views

urlpatterns = [
    path("curator/physicians/quality/", views.quality_overview, name="physician_quality_overview"),
    path("curator/physicians/accounts/", views.accounts, name="physician_accounts"),
    path("physicians/<uuid:code>/quality/", views.physician_quality, name="physician_quality"),
    path("physicians/<uuid:code>/quality.csv", views.physician_quality_csv, name="physician_quality_csv"),
]

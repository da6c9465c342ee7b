from django.urls import path

from grading.calibration import views

urlpatterns = [
    path("reports/<uuid:code>/calibration/", views.calibration_detail, name="calibration_detail"),
    path("reports/<uuid:code>/calibration/sample/", views.calibration_draw, name="calibration_draw"),
    path("reports/<uuid:code>/calibration.json", views.calibration_json, name="calibration_json"),
    path("reports/<uuid:code>/calibration.csv", views.calibration_csv_download, name="calibration_csv"),
]

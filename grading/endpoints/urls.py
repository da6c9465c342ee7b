from django.urls import path

from grading.endpoints import views

urlpatterns = [
    path("endpoints/", views.endpoint_list, name="endpoint_list"),
    path("endpoints/new/", views.endpoint_new, name="endpoint_new"),
    path("endpoints/<uuid:code>/", views.endpoint_edit, name="endpoint_edit"),
]

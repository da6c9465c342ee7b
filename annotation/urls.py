from django.urls import path

from annotation import views

urlpatterns = [
    path("conversations/", views.conversation_list, name="conversation_list"),
    path("conversations/<uuid:code>/", views.conversation_detail, name="conversation_detail"),
]

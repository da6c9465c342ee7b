from django.contrib import admin
from django.contrib.auth import views as auth_views
from django.urls import include, path

from annotation.views import conversations as annotation_views

urlpatterns = [
    path("", annotation_views.home, name="home"),
    path("login/", auth_views.LoginView.as_view(), name="login"),
    path("logout/", auth_views.LogoutView.as_view(), name="logout"),
    path(
        "password/",
        auth_views.PasswordChangeView.as_view(success_url="/password/done/"),
        name="password_change",
    ),
    path("password/done/", auth_views.PasswordChangeDoneView.as_view(), name="password_change_done"),
    path("healthz/", annotation_views.healthz, name="healthz"),
    path("", include("annotation.urls")),
    path("", include("grading.urls")),
    path("api/", include("healthbench_web.api_urls")),
    path("admin/", admin.site.urls),
]

# Refusals and failures are pages of the site, with navigation and a sentence saying why.
handler400 = "healthbench_web.errors.bad_request"
handler403 = "healthbench_web.errors.permission_denied"
handler404 = "healthbench_web.errors.page_not_found"
handler500 = "healthbench_web.errors.server_error"

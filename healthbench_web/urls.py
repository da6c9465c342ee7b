from django.contrib import admin
from django.contrib.auth import views as auth_views
from django.templatetags.static import static
from django.urls import include, path
from django.views.generic.base import RedirectView

from annotation.views import conversations as annotation_views
from healthbench_web.health import healthz


class FaviconRedirect(RedirectView):
    """To the icon's static URL, looked up per request: with the hashed static files of a
    deployment, the manifest exists only after collectstatic, not when URLs are loaded."""

    def get_redirect_url(self, *args, **kwargs) -> str:
        return static("favicon.svg")


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
    path("healthz/", healthz, name="healthz"),
    # Browsers ask for /favicon.ico where a page names no icon (JSON answers, the schema).
    path("favicon.ico", FaviconRedirect.as_view(permanent=True)),
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

"""The site's URLs: each page family's own urls.py (previously/pages/<family>/urls.py), the
login, the admin and the language switch (the account pages hold password change and reset under
Django's usual URL names). URL names are global, except curation's namespace."""

from django.contrib import admin
from django.contrib.auth import views as auth_views
from django.urls import include, path

from previously.pages.accounts.views import LoginView

urlpatterns = [
    path("", include("previously.pages.chat.urls")),
    path("login/", LoginView.as_view(), name="login"),
    path("logout/", auth_views.LogoutView.as_view(), name="logout"),
    path("", include("previously.pages.card.urls")),
    path("", include("previously.pages.slices.urls")),
    path("admin/", admin.site.urls),
    path("", include("previously.pages.profiles.urls")),
    path("", include("previously.pages.archive.urls")),
    path("", include("previously.pages.timeline.urls")),
    path("i18n/", include("django.conf.urls.i18n")),
    path("", include("previously.pages.data.urls")),
    path("", include("previously.pages.accounts.urls")),
    path("", include("previously.pages.connections.urls")),
    path("p/<str:profile_key>/", include("previously.pages.curation.urls")),
]

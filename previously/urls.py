from django.contrib import admin
from django.contrib.auth import views as auth_views
from django.urls import include, path

from previously import (
    archive_views,
    beliefs_views,
    card_views,
    data_views,
    profile_views,
    timeline_views,
)
from previously.chat import views as chat_views

urlpatterns = [
    path("", chat_views.chat, name="home"),
    path("chat/older/", chat_views.older, name="chat_older"),
    path("chat/new/", chat_views.new_conversation, name="new_conversation"),
    path("chat/image/", chat_views.upload_image, name="chat_image_upload"),
    path("chat/proactive/", chat_views.proactive_switch, name="chat_proactive"),
    path("images/<int:pk>/", chat_views.image, name="chat_image"),
    path("images/<int:pk>/thumb/", chat_views.image, {"thumb": True}, name="chat_image_thumb"),
    path("login/", auth_views.LoginView.as_view(), name="login"),
    path("logout/", auth_views.LogoutView.as_view(), name="logout"),
    path("card/", card_views.card_page, name="card"),
    path("slices/<str:key>/", card_views.slice_page, name="slice"),
    path("admin/", admin.site.urls),
    path("chat/profile/", profile_views.profile_switch, name="chat_profile"),
    path("profiles/", profile_views.profile_list, name="profiles"),
    path("profiles/<str:key>/edit/", profile_views.profile_edit, name="profile_edit"),
    path("profiles/<str:key>/delete/", profile_views.profile_delete, name="profile_delete"),
    path("archive/", archive_views.archive, name="archive"),
    path("timeline/", timeline_views.timeline, name="timeline"),
    path("beliefs/", beliefs_views.beliefs, name="beliefs"),
    path("about/", profile_views.about, name="about"),
    path("i18n/", include("django.conf.urls.i18n")),
    path("data/", data_views.data_page, name="data"),
    path("data/export/", data_views.data_export, name="data_export"),
    path("data/import/", data_views.data_import_preview, name="data_import_preview"),
    path("data/import/apply/", data_views.data_import_apply, name="data_import_apply"),
    path("p/<str:profile_key>/", include("previously.curation.urls")),
]

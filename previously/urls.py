from django.contrib import admin
from django.contrib.auth import views as auth_views
from django.urls import include, path

from previously import card_views, data_views
from previously.chat import views as chat_views

urlpatterns = [
    path("", chat_views.chat, name="home"),
    path("chat/older/", chat_views.older, name="chat_older"),
    path("chat/new/", chat_views.new_conversation, name="new_conversation"),
    path("chat/profile/", chat_views.switch_profile, name="chat_profile"),
    path("chat/image/", chat_views.upload_image, name="chat_image_upload"),
    path("chat/proactive/", chat_views.proactive_switch, name="chat_proactive"),
    path("images/<int:pk>/", chat_views.image, name="chat_image"),
    path("images/<int:pk>/thumb/", chat_views.image, {"thumb": True}, name="chat_image_thumb"),
    path("login/", auth_views.LoginView.as_view(), name="login"),
    path("logout/", auth_views.LogoutView.as_view(), name="logout"),
    path("card/", card_views.card_page, name="card"),
    path("slices/<str:key>/", card_views.slice_page, name="slice"),
    path("admin/", admin.site.urls),
    path("data/", data_views.data_page, name="data"),
    path("data/export/", data_views.data_export, name="data_export"),
    path("data/import/", data_views.data_import_preview, name="data_import_preview"),
    path("data/import/apply/", data_views.data_import_apply, name="data_import_apply"),
    path("p/<str:profile_key>/", include("previously.curation.urls")),
]

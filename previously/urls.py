from django.contrib import admin
from django.contrib.auth import views as auth_views
from django.urls import path

from previously.chat import views as chat_views

urlpatterns = [
    path("", chat_views.chat, name="home"),
    path("chat/older/", chat_views.older, name="chat_older"),
    path("chat/new/", chat_views.new_conversation, name="chat_new"),
    path("chat/profile/", chat_views.switch_profile, name="chat_profile"),
    path("login/", auth_views.LoginView.as_view(), name="login"),
    path("logout/", auth_views.LogoutView.as_view(), name="logout"),
    path("admin/", admin.site.urls),
]

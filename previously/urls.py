from django.contrib import admin
from django.contrib.auth import views as auth_views
from django.urls import path

from previously import card_views, views

urlpatterns = [
    path("", views.home, name="home"),
    path("login/", auth_views.LoginView.as_view(), name="login"),
    path("logout/", auth_views.LogoutView.as_view(), name="logout"),
    path("card/", card_views.card_page, name="card"),
    path("slices/<str:key>/", card_views.slice_page, name="slice"),
    path("conversation/new/", card_views.new_conversation, name="new_conversation"),
    path("admin/", admin.site.urls),
]

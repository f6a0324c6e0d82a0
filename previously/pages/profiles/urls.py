from django.urls import path

from previously.pages.profiles import views

urlpatterns = [
    path("chat/profile/", views.profile_switch, name="chat_profile"),
    path("profiles/", views.profile_list, name="profiles"),
    path("profiles/<str:key>/edit/", views.profile_edit, name="profile_edit"),
    path("profiles/<str:key>/delete/", views.profile_delete, name="profile_delete"),
    path("about/", views.about, name="about"),
]

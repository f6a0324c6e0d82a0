"""Curation URLs, under /p/<profile key>/ (names in the `curation:` namespace)."""

from django.urls import path

from previously.pages.curation import views

app_name = "curation"

urlpatterns = [
    path("messages/", views.message_list, name="messages"),
    path("messages/<str:mid>/favourite/", views.favourite, name="favourite"),
    path("messages/<str:mid>/hide/", views.hide, name="hide"),
    path("messages/<str:mid>/unhide/", views.unhide, name="unhide"),
    path("messages/<str:mid>/delete/", views.delete, name="delete"),
    path("api/messages/<str:mid>/delete/", views.api_delete, name="api_delete"),
    path("favourites/", views.favourite_list, name="favourites"),
    path("favourites/<int:pk>/remove/", views.favourite_remove, name="favourite_remove"),
    path("highlights/", views.highlight_list, name="highlights"),
    path("highlights/<str:hid>/delete/", views.highlight_delete, name="highlight_delete"),
    path("experiences/", views.experience_list, name="experiences"),
    path("experiences/<str:eid>/edit/", views.experience_edit, name="experience_edit"),
    path("experiences/<str:eid>/merge/", views.experience_merge, name="experience_merge"),
    path("experiences/<str:eid>/<str:action>/", views.experience_action, name="experience_action"),
    path("relations/", views.relation_list, name="relations"),
    path("relations/<str:rid>/delete/", views.relation_delete, name="relation_delete"),
]

from django.urls import path

from previously.pages.profiles import cards, views

urlpatterns = [
    path("chat/profile/", views.profile_switch, name="chat_profile"),
    path("profiles/", views.profile_list, name="profiles"),
    path("profiles/<str:key>/edit/", views.profile_edit, name="profile_edit"),
    path("profiles/<str:key>/delete/", views.profile_delete, name="profile_delete"),
    path("profiles/card/", cards.card_import_preview, name="profile_card_import"),
    path("profiles/card/apply/", cards.card_import_apply, name="profile_card_import_apply"),
    path("profiles/<str:key>/avatar/", cards.avatar, name="profile_avatar"),
    path("profiles/<str:key>/export/<str:fmt>/", cards.export, name="profile_export"),
    path("profiles/<str:key>/catch-up/", cards.catch_up_action, name="profile_catch_up"),
    path("about/", views.about, name="about"),
]

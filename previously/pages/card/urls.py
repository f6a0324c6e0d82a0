from django.urls import path

from previously.pages.card import views

urlpatterns = [
    path("card/", views.card_page, name="card"),
    path("card/edit/", views.card_edit, name="card_edit"),
    path("beliefs/", views.beliefs, name="beliefs"),
]

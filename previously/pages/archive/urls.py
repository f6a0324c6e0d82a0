from django.urls import path

from previously.pages.archive import views

urlpatterns = [
    path("archive/", views.archive, name="archive"),
]

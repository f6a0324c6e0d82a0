from django.urls import path

from previously.pages.timeline import views

urlpatterns = [
    path("timeline/", views.timeline, name="timeline"),
]

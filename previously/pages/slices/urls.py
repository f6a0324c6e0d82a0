from django.urls import path

from previously.pages.slices import views

urlpatterns = [
    path("slices/<str:key>/", views.slice_page, name="slice"),
    path("slices/<str:key>/delete/", views.slice_delete, name="slice_delete"),
]

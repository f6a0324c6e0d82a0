from django.urls import path

from previously.pages.slices import views

urlpatterns = [
    path("slices/<str:key>/", views.slice_page, name="slice"),
]

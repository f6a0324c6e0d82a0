from django.urls import path

from previously.pages.data import views

urlpatterns = [
    path("data/", views.data_page, name="data"),
    path("data/export/", views.data_export, name="data_export"),
    path("data/import/", views.data_import_preview, name="data_import_preview"),
    path("data/import/apply/", views.data_import_apply, name="data_import_apply"),
]

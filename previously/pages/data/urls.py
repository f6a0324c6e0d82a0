from django.urls import path

from previously.pages.data import history, views

urlpatterns = [
    path("data/", views.data_page, name="data"),
    path("data/export/", views.data_export, name="data_export"),
    path("data/import/", views.data_import_preview, name="data_import_preview"),
    path("data/import/apply/", views.data_import_apply, name="data_import_apply"),
    path("data/import/progress/<str:token>/", views.data_import_progress, name="data_import_progress"),
    path("data/history/", history.history_page, name="data_history"),
    path("data/history/preview/", history.history_preview, name="data_history_preview"),
    path("data/history/apply/", history.history_apply, name="data_history_apply"),
    path("data/history/progress/<str:token>/", history.history_progress, name="data_history_progress"),
]

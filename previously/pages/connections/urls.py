from django.urls import path

from previously.pages.connections import views

urlpatterns = [
    path("connections/", views.connections, name="connections"),
    path("connections/new/", views.connection_edit, name="connection_new"),
    path("connections/<int:pk>/", views.connection_edit, name="connection_edit"),
    path("connections/<int:pk>/delete/", views.connection_delete, name="connection_delete"),
    path("connections/<int:pk>/models/", views.connection_models, name="connection_models"),
    path("connections/<int:pk>/test/", views.connection_test, name="connection_test"),
    path("connections/choose/", views.choose, name="connection_choose"),
]

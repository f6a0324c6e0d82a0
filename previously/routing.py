"""Websocket routes."""

from django.urls import path

from previously.chat.consumers import ChatConsumer

websocket_urlpatterns: list = [
    path("ws/chat/<str:profile_key>/", ChatConsumer.as_asgi()),  # the chat turn (issue 3)
]

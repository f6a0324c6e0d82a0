"""Websocket routes (the chat consumer is added by the chat package)."""

websocket_urlpatterns: list = []

from django.urls import path

from previously.pages.chat import views

urlpatterns = [
    path("", views.chat, name="home"),
    path("chat/older/", views.older, name="chat_older"),
    path("chat/new/", views.new_conversation, name="new_conversation"),
    path("chat/image/", views.upload_image, name="chat_image_upload"),
    path("chat/proactive/", views.proactive_switch, name="chat_proactive"),
    path("chat/favourite/<str:mid>/", views.favourite_line, name="chat_favourite"),
    path("chat/unfavourite/<int:pk>/", views.unfavourite_line, name="chat_unfavourite"),
    path("chat/conversations/", views.conversations, name="chat_conversations"),
    path("chat/conversations/<str:key>/", views.conversation, name="chat_conversation"),
    path("chat/why/<str:mid>/", views.why, name="chat_why"),
    path("chat/leave/", views.leave, name="chat_leave"),
    path("images/<int:pk>/", views.image, name="chat_image"),
    path("images/<int:pk>/thumb/", views.image, {"thumb": True}, name="chat_image_thumb"),
]

from __future__ import annotations

from django.urls import path

from activity import views

urlpatterns = [
    path("", views.runs, name="runs"),
    path("chats/<uuid:chat_id>/", views.chat, name="chat"),
    path("inbox/", views.inbox, name="inbox"),
    path("prompts/<uuid:prompt_id>/answer", views.answer, name="answer"),
]

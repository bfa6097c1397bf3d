from __future__ import annotations

from django.contrib.auth import views as auth_views
from django.urls import path

from activity.web import changes as change_views
from activity.web import drive as drive_views
from activity.web import hooks as hook_views
from activity.web import hosts as host_views
from activity.web import invites as invite_views
from activity.web import mail as mail_views  # email (docs/email.md)
from activity.web import mentions as mention_views
from activity.web import notifications, review, saved, shares, views, workspaces
from activity.web import passwords as password_views  # password reset (docs/email.md)
from activity.web import queue as queue_views  # the review queue (docs/architecture.md)
from activity.web import search as search_views

urlpatterns = [
    path("", views.runs, name="runs"),
    path("chats/<uuid:chat_id>/", views.chat, name="chat"),
    path("chats/<uuid:chat_id>/turns/<uuid:attempt_id>/", review.turn, name="turn"),
    path("chats/<uuid:chat_id>/transcript.md", review.transcript, name="transcript"),
    path("api/chats/<uuid:chat_id>/tool-activity", review.tool_activity, name="tool_activity"),
    path("tools/<uuid:tool_id>/", review.tool, name="tool"),
    path("tools/<uuid:tool_id>/comments", review.comment, name="comment"),
    path("inbox/", views.inbox, name="inbox"),
    path("mentions/<int:mention_id>/", mention_views.open_mention, name="open-mention"),
    path("mentions/<int:mention_id>/dismiss", mention_views.dismiss, name="dismiss-mention"),
    path("search/", search_views.search, name="search"),
    path("views/save", saved.save, name="save-view"),
    path("views/<int:view_id>/", saved.open_view, name="open-view"),
    path("views/<int:view_id>/delete", saved.delete, name="delete-view"),
    path("prompts/<uuid:prompt_id>/answer", views.answer, name="answer"),
    path(
        "prompts/<uuid:prompt_id>/notification-answer",
        notifications.answer,
        name="notify-answer",
    ),
    path("settings/notifications/", notifications.page, name="notifications"),
    path("chats/<uuid:chat_id>/follow", notifications.follow, name="follow-run"),
    path("notifications/devices", notifications.devices, name="push-devices"),
    path("sw.js", notifications.service_worker, name="service-worker"),
    path("manifest.webmanifest", notifications.manifest, name="manifest"),
    path("offline/", notifications.offline, name="offline"),
    path(
        "notifications/devices/<int:device_id>/forget",
        notifications.forget,
        name="forget-push-device",
    ),
    path("chats/<uuid:chat_id>/delete", workspaces.delete_run, name="delete-run"),
    path("chats/<uuid:chat_id>/messages", drive_views.send, name="web-send"),
    path("chats/<uuid:chat_id>/messages/<uuid:prompt_id>/edit", drive_views.edit, name="web-edit"),
    path(
        "chats/<uuid:chat_id>/messages/<uuid:prompt_id>/remove",
        drive_views.remove,
        name="web-remove",
    ),
    path(
        "chats/<uuid:chat_id>/turns/<uuid:attempt_id>/cancel",
        drive_views.cancel,
        name="web-cancel",
    ),
    path("chats/<uuid:chat_id>/mode", drive_views.mode, name="web-mode"),
    path("chats/<uuid:chat_id>/resume", drive_views.resume_run, name="resume-run"),
    path("chats/<uuid:chat_id>/stop", drive_views.stop_run, name="stop-run"),
    path("chats/<uuid:chat_id>/review", drive_views.review_run, name="review-run"),
    path("chats/<uuid:chat_id>/review/assign", queue_views.assign, name="assign-review"),
    path("chats/<uuid:chat_id>/review/unassign", queue_views.unassign, name="unassign-review"),
    path("reviews/", queue_views.queue_page, name="review-queue"),
    path(
        "reviews/assignments/<int:assignment_id>/",
        queue_views.open_assignment,
        name="open-assignment",
    ),
    path("chats/<uuid:chat_id>/changes/", change_views.changes, name="changes"),
    path("chats/<uuid:chat_id>/share", shares.make, name="share-run"),
    path("shares/<int:link_id>/revoke", shares.revoke, name="revoke-share"),
    path("s/<str:token>/", shares.shared, name="shared"),
    path("workspaces/", workspaces.workspaces, name="workspaces"),
    path("workspaces/<slug:slug>/", workspaces.workspace, name="workspace"),
    path("workspaces/<slug:slug>/members/add", workspaces.add_member, name="add-member"),
    path(
        "workspaces/<slug:slug>/members/<int:member_id>/role",
        workspaces.change_role,
        name="change-role",
    ),
    path(
        "workspaces/<slug:slug>/members/<int:member_id>/remove",
        workspaces.remove_member,
        name="remove-member",
    ),
    path("workspaces/<slug:slug>/sharing", workspaces.sharing, name="workspace-sharing"),
    path("workspaces/<slug:slug>/tokens/create", workspaces.create_token, name="create-token"),
    path(
        "workspaces/<slug:slug>/tokens/<int:token_id>/revoke",
        workspaces.revoke_token,
        name="revoke-token",
    ),
    # Webhooks (docs/webhooks.md)
    path("workspaces/<slug:slug>/webhooks/create", hook_views.create, name="create-webhook"),
    path(
        "workspaces/<slug:slug>/webhooks/<int:hook_id>/test", hook_views.test, name="test-webhook"
    ),
    path(
        "workspaces/<slug:slug>/webhooks/<int:hook_id>/switch",
        hook_views.switch,
        name="switch-webhook",
    ),
    path(
        "workspaces/<slug:slug>/webhooks/<int:hook_id>/delete",
        hook_views.delete,
        name="delete-webhook",
    ),
    path("workspaces/<slug:slug>/invites/", invite_views.invite_list, name="invites"),
    path("workspaces/<slug:slug>/invites/create", invite_views.create, name="create-invite"),
    path(
        "workspaces/<slug:slug>/invites/<int:invite_id>/revoke",
        invite_views.revoke,
        name="revoke-invite",
    ),
    path("invite/<str:token>/", invite_views.invite, name="invite"),
    path("runs/new", host_views.new_run, name="new-run"),
    path("runs/new/start", host_views.start, name="new-run-start"),
    path("runs/new/<uuid:run_id>/", host_views.starting, name="new-run-starting"),
    # --- email: addresses, what to mail, a mail's links; password reset (docs/email.md) ---
    path("settings/email/add", mail_views.add, name="mail-add"),
    path("settings/email/<int:address_id>/resend", mail_views.resend, name="mail-resend"),
    path("settings/email/<int:address_id>/remove", mail_views.remove, name="mail-remove"),
    path("settings/email/prefs", mail_views.prefs, name="mail-prefs"),
    path("settings/email/on", mail_views.turn_on, name="mail-on"),
    path("email/confirm/<str:token>/", mail_views.confirm, name="mail-confirm"),
    path("email/unsubscribe/<str:token>/", mail_views.unsubscribe, name="mail-unsubscribe"),
    path("accounts/password-reset/", password_views.ResetView.as_view(), name="password_reset"),
    path(
        "accounts/password-reset/sent/",
        auth_views.PasswordResetDoneView.as_view(),
        name="password_reset_done",
    ),
    path(
        "accounts/password-reset/<uidb64>/<token>/",
        password_views.ConfirmView.as_view(),
        name="password_reset_confirm",
    ),
    path(
        "accounts/password-reset/done/",
        auth_views.PasswordResetCompleteView.as_view(),
        name="password_reset_complete",
    ),
]

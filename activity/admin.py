from __future__ import annotations

from django.contrib import admin

from activity.models import Chat, InferenceAttempt, ToolActivity, Workspace


@admin.register(Workspace)
class WorkspaceAdmin(admin.ModelAdmin[Workspace]):
    list_display = ["name", "slug", "created_at"]
    prepopulated_fields = {"slug": ["name"]}


@admin.register(Chat)
class ChatAdmin(admin.ModelAdmin[Chat]):
    list_display = ["title", "workspace", "agent_name", "created_at"]
    list_filter = ["workspace"]


@admin.register(InferenceAttempt)
class InferenceAttemptAdmin(admin.ModelAdmin[InferenceAttempt]):
    list_display = ["id", "chat", "started_at", "ended_at", "stop_reason"]


@admin.register(ToolActivity)
class ToolActivityAdmin(admin.ModelAdmin[ToolActivity]):
    list_display = ["agent_label", "tool_name", "status", "approval", "chat"]
    list_filter = ["status", "approval"]

from __future__ import annotations

from django.contrib import admin
from django.db.models import QuerySet
from django.http import HttpRequest
from django.utils import timezone

from activity.models import AgentToken, Chat, InferenceAttempt, Membership, ToolActivity, Workspace


class MembershipInline(admin.TabularInline[Membership, Workspace]):
    model = Membership
    extra = 1


@admin.register(Workspace)
class WorkspaceAdmin(admin.ModelAdmin[Workspace]):
    list_display = ["name", "slug", "created_at"]
    prepopulated_fields = {"slug": ["name"]}
    inlines = [MembershipInline]


@admin.register(AgentToken)
class AgentTokenAdmin(admin.ModelAdmin[AgentToken]):
    list_display = ["name", "workspace", "hint", "created_at", "last_used_at", "revoked_at"]
    list_filter = ["workspace", "revoked_at"]
    readonly_fields = ["hint", "created_at", "last_used_at", "revoked_at"]
    actions = ["revoke"]

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False  # tokens are shown once, so they are made by `create_agent_token`

    @admin.action(description="Revoke the selected tokens")
    def revoke(self, request: HttpRequest, queryset: QuerySet[AgentToken]) -> None:
        count = queryset.filter(revoked_at__isnull=True).update(revoked_at=timezone.now())
        self.message_user(request, f"Revoked {count} token(s).")


@admin.register(Chat)
class ChatAdmin(admin.ModelAdmin[Chat]):
    list_display = ["title", "workspace", "agent_name", "runner_connected", "created_at"]
    list_filter = ["workspace"]


@admin.register(InferenceAttempt)
class InferenceAttemptAdmin(admin.ModelAdmin[InferenceAttempt]):
    list_display = ["id", "chat", "started_at", "ended_at", "stop_reason"]


@admin.register(ToolActivity)
class ToolActivityAdmin(admin.ModelAdmin[ToolActivity]):
    list_display = ["agent_label", "tool_name", "status", "approval", "chat"]
    list_filter = ["status", "approval"]

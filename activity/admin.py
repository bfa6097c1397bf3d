from __future__ import annotations

from asgiref.sync import async_to_sync
from django.contrib import admin
from django.db.models import QuerySet
from django.http import HttpRequest
from django.utils import timezone

from activity.live import presence
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
        active = list(queryset.filter(revoked_at__isnull=True).values_list("pk", flat=True))
        AgentToken.objects.filter(pk__in=active).update(revoked_at=timezone.now())
        for token_id in active:
            async_to_sync(presence.token_revoked)(token_id)  # cut off runners using it now
        self.message_user(request, f"Revoked {len(active)} token(s).")


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

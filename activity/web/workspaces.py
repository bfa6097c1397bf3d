"""Looking after a workspace: its members and their roles, its agent and host tokens and its
agent hosts, deleting its runs.

Only an admin of the workspace (or a superuser) may use these pages. Someone outside the
workspace gets a 404 (its existence is not revealed), a member without the role a 403. Bad
input shows the page again with a clear message and changes nothing.
"""

from __future__ import annotations

import functools
import uuid
from collections.abc import Callable

from asgiref.sync import async_to_sync
from django.conf import settings
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.utils import timezone
from django.utils.cache import add_never_cache_headers
from django.views.decorators.http import require_GET, require_http_methods, require_POST

from activity.live import presence, run_tokens
from activity.live.work import ChatChange
from activity.models import AgentToken, Membership, Role, Workspace
from activity.models.accounts import TokenKind
from activity.notify import hooklog
from activity.people import access
from activity.people.workspaces import (
    Invalid,
    delete,
    find_user,
    keep_an_admin,
    locked,
    parse_role,
    roles,
)
from activity.push import broadcast
from activity.review import shares

PAGE = "activity/people/workspace.html"
LIST = "activity/people/workspaces.html"
CONFIRM = "activity/runs/delete_run.html"
# The command lines as README.md writes them: the runner is `koruweb agent` (installed alone),
# the host `manage.py agent host` in the server's checkout.
MANAGE = ".venv/bin/python manage.py"
RUNNER = "koruweb agent"


def admin_view(view: Callable[..., HttpResponse]) -> Callable[..., HttpResponse]:
    """Give ``view`` the workspace named by ``slug`` (and the url's other ids), for its admins."""

    @functools.wraps(view)
    def wrapped(request: HttpRequest, slug: str, **ids: int) -> HttpResponse:
        workspace = get_object_or_404(Workspace, slug=slug)
        role = access.role_in(request.user, workspace.pk)
        if role is None:
            raise Http404("No such workspace.")
        if role != Role.ADMIN:
            return refused(request, workspace, role, "managing its members, tokens and runs")
        try:
            return view(request, workspace, **ids)
        except Invalid as invalid:
            return page(request, workspace, error=str(invalid), status=400)

    return wrapped


def admin_action(view: Callable[..., HttpResponse]) -> Callable[..., HttpResponse]:
    """A form post of a workspace's admins: ``admin_view``, logged in, POST only."""
    return require_POST(login_required(admin_view(view)))


@require_GET
@login_required
def workspaces(request: HttpRequest) -> HttpResponse:
    return render(request, LIST, {"rows": roles(request.user)})


@require_GET
@login_required
@admin_view
def workspace(request: HttpRequest, workspace: Workspace) -> HttpResponse:
    return page(request, workspace)


@admin_action
def add_member(request: HttpRequest, workspace: Workspace) -> HttpResponse:
    username = request.POST.get("username", "").strip()
    role = parse_role(request.POST.get("role", Role.VIEWER))
    user = find_user(username)
    with locked(workspace):
        found = workspace.memberships.filter(user_id=user.pk).first()
        if found is not None:
            raise Invalid(f"{username} is already a member of {workspace}, as {found.role}.")
        Membership.objects.create(workspace=workspace, user_id=user.pk, role=role)
    messages.success(request, f"Added {username} to {workspace} as {role}.")
    return redirect("workspace", workspace.slug)


@admin_action
def sharing(request: HttpRequest, workspace: Workspace) -> HttpResponse:
    """Which members may make a run's share link: admins, or approvers and admins."""
    role = request.POST.get("share_role", "")
    if role not in shares.SHARE_ROLES:
        raise Invalid("Links are made by admins, or by approvers and admins.")
    shares.set_role(workspace, role)
    who = shares.SHARE_ROLES[role]
    messages.success(request, f"Share links in {workspace} are made by its {who}.")
    return redirect("workspace", workspace.slug)


@admin_action
def change_role(request: HttpRequest, workspace: Workspace, member_id: int) -> HttpResponse:
    role = parse_role(request.POST.get("role", ""))
    with locked(workspace):
        member = get_object_or_404(workspace.memberships.select_related("user"), pk=member_id)
        if role != Role.ADMIN:
            keep_an_admin(workspace, member, "demote")
        member.role = role
        member.save(update_fields=["role"])
    messages.success(request, f"{member.user} is now {role} in {workspace}.")
    return after_change(request, workspace)


@admin_action
def remove_member(request: HttpRequest, workspace: Workspace, member_id: int) -> HttpResponse:
    with locked(workspace):
        member = get_object_or_404(workspace.memberships.select_related("user"), pk=member_id)
        keep_an_admin(workspace, member, "remove")
        member.delete()
    messages.success(request, f"Removed {member.user} from {workspace}.")
    return after_change(request, workspace)


@admin_action
def create_token(request: HttpRequest, workspace: Workspace) -> HttpResponse:
    name = request.POST.get("name", "").strip()
    if not name:
        raise Invalid("Give the token a name, e.g. the machine it runs on.")
    if len(name) > 100:
        raise Invalid(f"A token's name is at most 100 characters; this one has {len(name)}.")
    kind = TokenKind.HOST if request.POST.get("kind") == TokenKind.HOST else TokenKind.AGENT
    token, plain = AgentToken.issue(workspace, name, kind)
    # Rendered, not redirected: the plain token exists only in this response.
    return page(request, workspace, new_token=(token, plain))


@admin_action
def revoke_token(request: HttpRequest, workspace: Workspace, token_id: int) -> HttpResponse:
    token = get_object_or_404(workspace.tokens, pk=token_id)
    revoked = workspace.tokens.filter(pk=token.pk, revoked_at__isnull=True).update(
        revoked_at=timezone.now()
    )
    if not revoked:
        raise Invalid(f"The token {token} was already revoked.")
    async_to_sync(presence.token_revoked)(token.pk)  # runners using it are cut off now
    for issued in run_tokens.revoke_issued(token):  # a host's run tokens go with its token
        async_to_sync(presence.token_revoked)(issued)
    messages.success(request, f"Revoked the token {token}: runners can no longer connect with it.")
    return redirect("workspace", workspace.slug)


@require_http_methods(["GET", "POST"])
@login_required
def delete_run(request: HttpRequest, chat_id: uuid.UUID) -> HttpResponse:
    """GET asks for confirmation; the POST from that page deletes the run and all under it."""
    chat = get_object_or_404(access.visible_chats(request.user), pk=chat_id)
    role = access.role_in(request.user, chat.workspace_id)
    if role != Role.ADMIN:
        return refused(request, chat.workspace, role, "deleting its runs")
    context = {"chat": chat, "turns": chat.attempts.count(), "tools": chat.tool_count}
    if request.method == "GET":
        return render(request, CONFIRM, context)
    try:
        delete(chat.pk)
    except Invalid as invalid:
        return render(request, CONFIRM, {**context, "error": str(invalid)}, status=409)
    broadcast.announce_sync(ChatChange.gone(chat))  # its open prompts left the inboxes
    turns = context["turns"]
    messages.success(request, f"Deleted the run “{chat}” and its {turns} turn{'s' * (turns != 1)}.")
    return redirect("workspace", chat.workspace.slug)


# --- helpers -------------------------------------------------------------------------------


def page(
    request: HttpRequest,
    workspace: Workspace,
    *,
    error: str = "",
    new_token: tuple[AgentToken, str] | None = None,
    status: int = 200,
    **more: object,  # the webhooks' own (activity/web/hooks.py): a new one and its secret
) -> HttpResponse:
    context = {
        "workspace": workspace,
        "members": workspace.memberships.select_related("user").order_by("user__username"),
        "tokens": workspace.tokens.select_related("issued_by"),
        "hosts": workspace.hosts.select_related("token"),
        "roles": Role.choices,
        "runs": workspace.chats.count(),
        "retention_days": settings.RETENTION_DAYS,
        "share_links": shares.listed(workspace),
        "share_roles": shares.SHARE_ROLES,
        "error": error,
        "hooks": hooklog.section(workspace),  # webhooks and their delivery log (docs/webhooks.md)
        **more,
    }
    if new_token is not None:
        scheme = "wss" if request.is_secure() else "ws"
        context["new_token"], context["plain_token"] = new_token
        server = f"{scheme}://{request.get_host()}"
        context["command"] = (
            f"KORUWEB_TOKEN={new_token[1]} {MANAGE} agent host --server {server} "
            "--agent NAME=COMMAND --root DIR"
            if new_token[0].kind == TokenKind.HOST
            else f"{RUNNER} --server {server} --token {new_token[1]} -- AGENT"
        )
    response = render(request, PAGE, context, status=status)
    add_never_cache_headers(response)  # a page that may show a token stays out of caches
    return response


def refused(
    request: HttpRequest, workspace: Workspace, role: Role | None, what: str
) -> HttpResponse:
    refusal = f"You are {role} in {workspace}: {what} takes the admin role."
    return render(request, LIST, {"rows": roles(request.user), "refusal": refusal}, status=403)


def after_change(request: HttpRequest, workspace: Workspace) -> HttpResponse:
    """Back to the page, or to the list for an admin who just stepped down or left."""
    if access.role_in(request.user, workspace.pk) != Role.ADMIN:
        return redirect("workspaces")
    return redirect("workspace", workspace.slug)

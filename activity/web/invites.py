"""The invite pages: an admin's list of a workspace's invites, and the link a person opens.

Making and revoking invites is for the workspace's admins (``workspaces.admin_view``: 404 for
someone outside it, 403 for a member without the role). The link itself needs no login: a new
person signs up there, someone with an account logs in and comes back to it.
"""

from __future__ import annotations

from django.contrib import messages
from django.contrib.auth import login
from django.contrib.auth.decorators import login_required
from django.contrib.auth.forms import UserCreationForm
from django.contrib.auth.models import User
from django.db import transaction
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.utils.cache import add_never_cache_headers
from django.views.decorators.http import require_GET, require_http_methods

from activity.models import Invite, InviteState, Role, Workspace
from activity.notify import mailaddresses
from activity.people import invites
from activity.people.login import wait_words
from activity.people.workspaces import Invalid, parse_role
from activity.web import mail as mail_views
from activity.web import workspaces

LIST = "activity/people/invites.html"
LINK = "activity/people/invite.html"


@require_GET
@login_required
@workspaces.admin_view
def invite_list(request: HttpRequest, workspace: Workspace) -> HttpResponse:
    return page(request, workspace)


@workspaces.admin_action
def create(request: HttpRequest, workspace: Workspace) -> HttpResponse:
    try:
        role = parse_role(request.POST.get("role", Role.VIEWER))
        days = lifetime(request.POST.get("days", ""))
        note = request.POST.get("note", "").strip()
        if len(note) > 100:
            raise Invalid(f"A note is at most 100 characters; this has {len(note)}.")
        email = invite_email(request.POST.get("email", ""))
    except Invalid as invalid:
        return page(request, workspace, error=str(invalid), status=400)
    invite, plain = invites.issue(workspace, role, days, request.user, note, email)
    link = request.build_absolute_uri(reverse("invite", args=[plain]))
    # Rendered, not redirected: the link exists only in this response.
    return page(request, workspace, new=(invite, link))


@workspaces.admin_action
def revoke(request: HttpRequest, workspace: Workspace, invite_id: int) -> HttpResponse:
    invite = get_object_or_404(workspace.invites, pk=invite_id)
    if not invites.revoke(invite):
        error = f"That invite is {invite.state.label}: only an open one can be revoked."
        return page(request, workspace, error=error, status=400)
    messages.success(request, "Revoked the invite: its link no longer works.")
    return redirect("invites", workspace.slug)


@require_http_methods(["GET", "POST"])
def invite(request: HttpRequest, token: str) -> HttpResponse:
    """The link: who invites whom to what, and the way in (sign up, log in, or join)."""
    if invites.locked_out(request):
        words = f"Too many unknown invite links from this address. Wait {wait_words()}."
        return link_page(request, None, status=429, refusal=words)
    found = invites.find(token)
    if found is None:
        invites.record_failure(request)
        words = "This invite link is not valid: check that it was copied whole."
        return link_page(request, None, status=404, refusal=words)
    if found.state == InviteState.USED and found.used_by_id == request.user.pk:
        return link_page(request, found, joined=True)
    if found.state != InviteState.OPEN:
        return link_page(request, found, status=410, refusal=found.why_not)
    member = invites.membership(found, request.user)
    if member is not None:
        words = (
            f"You are already a member of {found.workspace} (as {member.role}); "
            "this link is left for someone else."
        )
        return link_page(request, found, refusal=words)
    if request.method == "GET":
        return link_page(request, found, form=UserCreationForm())
    if request.user.is_authenticated:
        return join(request, found, request.user)
    form: UserCreationForm[User] = UserCreationForm(request.POST)
    if not form.is_valid():
        return link_page(request, found, form=form, status=400)
    try:
        with transaction.atomic():  # no account is left behind when the link was just spent
            user = form.save()
            invites.redeem(found.pk, user)
    except invites.Unusable as unusable:
        return link_page(request, found, status=410, refusal=str(unusable))
    login(request, user, backend="django.contrib.auth.backends.ModelBackend")
    carry_email(request, found, user)
    return redirect("invite", token)  # the link now says "you joined", and where to go


def join(request: HttpRequest, found: Invite, user: object) -> HttpResponse:
    try:
        invites.redeem(found.pk, user)
    except invites.Unusable as unusable:
        return link_page(request, found, status=410, refusal=str(unusable))
    carry_email(request, found, user)
    return redirect(request.path)  # the link now says "you joined"


# --- helpers -------------------------------------------------------------------------------


# --- the address an invite carries (issue 31, docs/email.md) ---------------------------------


def invite_email(value: str) -> str:
    """The address an invite carries ("" for none), or why it is refused."""
    if not value.strip():
        return ""
    try:
        return mailaddresses.normal(value)
    except mailaddresses.Refused as refused:
        raise Invalid(str(refused)) from None


def carry_email(request: HttpRequest, found: Invite, user: object) -> None:
    """Whoever joined by an invite that carries an address gets it, unconfirmed, and its
    confirmation link by mail: koruweb does not mail invites, so joining proves nothing about
    the mailbox. An address they have already, or a sixth, is left out."""
    if not found.email:
        return
    try:
        mailaddresses.add(user, found.email)
    except mailaddresses.Refused:
        return
    mail_views.wake(request)
    messages.info(request, f"A link to confirm {found.email} is on its way to it.")


def lifetime(value: str) -> int:
    days = int(value) if value.isdigit() else 0
    if days not in invites.LIFETIMES:
        raise Invalid("Pick how long the link works: 1, 7 or 30 days.")
    return days


def page(
    request: HttpRequest,
    workspace: Workspace,
    *,
    new: tuple[Invite, str] | None = None,
    error: str = "",
    status: int = 200,
) -> HttpResponse:
    context = {
        "workspace": workspace,
        "error": error,
        "invites": workspace.invites.select_related("created_by", "used_by")[:100],
        "roles": Role.choices,
        "lifetimes": invites.LIFETIMES.items(),
        "default_days": invites.DEFAULT_DAYS,
    }
    if new is not None:
        context["new_invite"], context["link"] = new
    response = render(request, LIST, context, status=status)
    add_never_cache_headers(response)  # a page that may show a link stays out of caches
    return response


def link_page(
    request: HttpRequest,
    found: Invite | None,
    *,
    status: int = 200,
    refusal: str = "",
    joined: bool = False,
    form: UserCreationForm[User] | None = None,
) -> HttpResponse:
    context = {"invite": found, "refusal": refusal, "joined": joined, "form": form}
    response = render(request, LINK, context, status=status)
    add_never_cache_headers(response)
    return response

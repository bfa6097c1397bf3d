"""A workspace's webhooks, on its admin page (docs/webhooks.md): add one (its secret shown once),
send it a test event, turn it off and on, delete it. Admins only, as every form of that page
(``workspaces.admin_action``); bad input shows the page again with why, and writes nothing.
The posting itself is the notifier's, off the request (``activity/notify/hookqueue.py``)."""

from __future__ import annotations

import secrets

from django.contrib import messages
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect

from activity.models import HookEvent, HookFormat, Webhook, Workspace
from activity.notify import hookaddr, hooklog, hookqueue
from activity.people.workspaces import Invalid, locked
from activity.web.workspaces import admin_action, page

SECRET_PREFIX = "kwh_"


def _form(request: HttpRequest) -> tuple[str, str, str, list[str]]:
    """The form's name, URL, format and events, checked (the URL against the address rules)."""
    name = request.POST.get("name", "").strip()
    if not name:
        raise Invalid("Give the webhook a name, e.g. the channel it posts to.")
    if len(name) > 100:
        raise Invalid(f"A webhook's name is at most 100 characters; this one has {len(name)}.")
    url = request.POST.get("url", "").strip()
    if len(url) > 2048:
        raise Invalid("A webhook's URL is at most 2,048 characters.")
    try:
        hookaddr.check(url)
    except hookaddr.Refused as refused:
        raise Invalid(f"That URL cannot be used: {refused}") from None
    format = request.POST.get("format", HookFormat.JSON)
    if format not in HookFormat.values:
        raise Invalid("Choose the Slack-compatible format or koruweb's JSON.")
    events = request.POST.getlist("events")
    if not events or any(e not in HookEvent.values for e in events):
        raise Invalid("Choose at least one of the events offered.")
    return name, url, format, [e for e in HookEvent.values if e in events]


@admin_action
def create(request: HttpRequest, workspace: Workspace) -> HttpResponse:
    name, url, format, events = _form(request)
    secret = SECRET_PREFIX + secrets.token_urlsafe(32)
    with locked(workspace):
        if workspace.webhooks.count() >= hooklog.MAX_HOOKS:
            raise Invalid(
                f"A workspace has at most {hooklog.MAX_HOOKS} webhooks: delete one first."
            )
        hook = Webhook.objects.create(
            workspace=workspace,
            name=name,
            url=url,
            format=format,
            events=events,
            secret=secret,
            created_by_id=request.user.pk,
        )
    # Rendered, not redirected: the secret is shown only in this response.
    return page(request, workspace, new_hook=hook, hook_secret=secret)


@admin_action
def test(request: HttpRequest, workspace: Workspace, hook_id: int) -> HttpResponse:
    hook = get_object_or_404(workspace.webhooks, pk=hook_id)
    if not hook.active:
        raise Invalid(f"The webhook {hook.name} is off: turn it on to send it a test event.")
    hookqueue.ping(hook, request.user.get_username())
    messages.success(request, f"A test event is on its way to {hook.name}: see its log below.")
    return redirect("workspace", workspace.slug)


@admin_action
def switch(request: HttpRequest, workspace: Workspace, hook_id: int) -> HttpResponse:
    """Turn a webhook on or off (``active`` is "on" or "off")."""
    hook = get_object_or_404(workspace.webhooks, pk=hook_id)
    wanted = request.POST.get("active")
    if wanted not in ("on", "off"):
        raise Invalid("Turn the webhook on or off.")
    if wanted == "on":
        try:
            hookaddr.check(hook.url)  # the rules may have changed since it was saved
        except hookaddr.Refused as refused:
            raise Invalid(f"The webhook {hook.name} cannot be turned on: {refused}") from None
    Webhook.objects.filter(pk=hook.pk).update(active=wanted == "on")
    if wanted == "off":
        hookqueue.paused(hook)
    messages.success(request, f"The webhook {hook.name} is {wanted}.")
    return redirect("workspace", workspace.slug)


@admin_action
def delete(request: HttpRequest, workspace: Workspace, hook_id: int) -> HttpResponse:
    hook = get_object_or_404(workspace.webhooks, pk=hook_id)
    hook.delete()  # and its deliveries: nothing more is posted to it
    messages.success(request, f"Deleted the webhook {hook.name} and its delivery log.")
    return redirect("workspace", workspace.slug)

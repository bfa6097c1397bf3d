"""*New run*: start a run from the web on an agent host (issue 16).

``/runs/new`` picks an online host, one of its agents, a directory (the host lists one level
at a time: plain links, which htmx turns into swaps of the listing alone) and the first
prompt; *Start* (``/runs/new/start``, a CSRF-protected POST) asks the host to start a runner,
and the browser lands on ``/runs/new/<id>/``, which refreshes itself (a ``<meta>`` refresh:
no script) until the runner has its chat and then redirects to the run's page.

Only approvers and admins of a workspace start runs on its hosts: anyone else gets a 403, and
a host of a workspace the person is not in is a 404. Nothing is sent to a host for them. One
person starts at most ``HOST_STARTS_PER_MINUTE`` runs a minute (429 past it); a busy host (its
runs at its ``--max-runs``) shows "busy (n/n)" and is refused a start (409), and so is a field
with a NUL, a lone surrogate or too many characters (``host_asks.start_run``).
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

from asgiref.sync import sync_to_async
from django.conf import settings
from django.contrib.auth.decorators import login_required
from django.contrib.auth.models import User
from django.db.models import Count, Q
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.utils import timezone
from django.utils.cache import add_never_cache_headers
from django.views.decorators.http import require_GET, require_POST

from activity.core.refusals import Refusal
from activity.live import host_asks
from activity.models import Chat
from activity.models.accounts import RUNNING, AgentHost, HostRun, HostRunStatus, Role
from activity.people import access, limits
from activity.web.requests import HtmxRequest
from activity.wire.hostframes import FIRST_PROMPT_CHARS, Listing

PAGE = "activity/hosts/new_run.html"
STARTING = "activity/hosts/new_run_starting.html"
NOT_ALLOWED = (
    "Starting runs takes the approver or admin role in a workspace with an agent host; "
    "you have neither."
)


@dataclass
class Form:
    """What the page shows: the hosts the person may start on, the chosen one and its
    directory, and what they typed."""

    hosts: list[AgentHost]
    host: AgentHost | None = None
    agent: str = ""
    root: str = ""
    path: str = ""
    prompt: str = ""
    title: str = ""
    error: str = ""
    listing: Listing | None = None
    listing_error: str = ""
    crumbs: list[tuple[str, str]] = field(default_factory=list)

    def context(self) -> dict[str, Any]:
        return {**self.__dict__, "prompt_chars": FIRST_PROMPT_CHARS}


def startable_hosts(user: User) -> list[AgentHost]:
    """The online hosts of the workspaces where ``user`` may start runs; raises a 403
    ``Refusal`` for someone who may start runs nowhere."""
    workspaces = access.answering_workspaces(user)
    if workspaces == []:
        raise Refusal(NOT_ALLOWED, 403)
    running = Count("runs", filter=Q(runs__status__in=RUNNING))
    found = AgentHost.objects.online().select_related("workspace").annotate(runs_now=running)
    if workspaces is not None:
        found = found.filter(workspace_id__in=workspaces)
    return list(found.order_by("workspace__name", "name"))


def chosen_host(user: User, host_id: str) -> AgentHost:
    """The host ``host_id`` names, for someone who may start runs on it: a 404 outside its
    workspace, a 403 for a viewer."""
    try:
        pk = uuid.UUID(host_id)
    except ValueError:
        raise Http404("No such host.") from None
    host = AgentHost.objects.select_related("workspace").filter(pk=pk).first()
    role = access.role_in(user, host.workspace_id) if host is not None else None
    if host is None or role is None:
        raise Http404("No such host.")
    if role not in access.ANSWERING_ROLES:
        raise Refusal(
            f"You are {role} in {host.workspace}: starting runs on its hosts takes the "
            f"{Role.APPROVER} or {Role.ADMIN} role.",
            403,
        )
    return host


def form_for(user: User, query: Any) -> Form:
    form = Form(hosts=startable_hosts(user))
    host_id = query.get("host", "")
    if host_id:
        form.host = chosen_host(user, host_id)
    elif len(form.hosts) == 1:
        form.host = form.hosts[0]
    if form.host is not None:
        roots = form.host.roots
        form.root = query.get("root", "") or (roots[0] if roots else "")
        form.path = query.get("path", "").rstrip("/")
        form.agent = query.get("agent", "") or next(iter(form.host.agent_names), "")
        form.crumbs = crumbs(form.path)
    return form


def crumbs(path: str) -> list[tuple[str, str]]:
    """Each step of ``path``: (its name, the path up to it)."""
    parts = [part for part in path.split("/") if part]
    return [(part, "/".join(parts[: n + 1])) for n, part in enumerate(parts)]


@require_GET
@login_required
async def new_run(request: HtmxRequest) -> HttpResponse:
    """The form; with ``host`` (and ``root``, ``path``) it lists that directory, asking the
    host. An htmx request gets the listing alone."""
    user = await request.auser()
    assert isinstance(user, User)
    try:
        form = await sync_to_async(form_for)(user, request.GET)
    except Refusal as refused:
        return await sync_to_async(render)(
            request, PAGE, {"refusal": str(refused)}, status=refused.status
        )
    if form.host is not None:
        try:
            form.listing = await host_asks.ask_listing(form.host, form.root, form.path)
        except host_asks.HostError as error:
            form.listing_error = str(error)
    template = f"{PAGE}#browse" if request.htmx else PAGE
    response: HttpResponse = await sync_to_async(render)(request, template, form.context())
    add_never_cache_headers(response)  # a listing is the host's disk now, not later
    return response


@require_POST
@login_required
def start(request: HttpRequest) -> HttpResponse:
    user = request.user
    assert isinstance(user, User)
    try:
        form = form_for(user, request.POST)
    except Refusal as refused:
        return render(request, PAGE, {"refusal": str(refused)}, status=refused.status)
    form.prompt, form.title = request.POST.get("prompt", ""), request.POST.get("title", "")
    if form.host is None:
        form.error = "Pick a host first."
        return render(request, PAGE, form.context(), status=400)
    if limits.count(limits.key("host-starts", str(user.pk)), 60) > settings.HOST_STARTS_PER_MINUTE:
        most = settings.HOST_STARTS_PER_MINUTE
        form.error = (
            f"You have started {most} run{'s' if most != 1 else ''} within a minute, the most "
            "one person may: wait a minute and try again."
        )
        return render(request, PAGE, form.context(), status=429)
    try:
        run = host_asks.start_run(
            form.host,
            user,
            request.POST.get("agent", ""),
            form.root,
            form.path,
            form.prompt,
            form.title.strip() or None,
        )
    except host_asks.HostError as error:
        form.error = str(error)
        return render(request, PAGE, form.context(), status=409)
    return redirect("new-run-starting", run.pk)


@require_GET
@login_required
def starting(request: HttpRequest, run_id: uuid.UUID) -> HttpResponse:
    """Until the host reports the runner has its chat: then the run's page."""
    run = HostRun.objects.select_related("host", "host__workspace").filter(pk=run_id).first()
    role = access.role_in(request.user, run.host.workspace_id) if run is not None else None
    if run is None or role is None:
        raise Http404("No such run.")
    if role not in access.ANSWERING_ROLES:
        refusal = f"You are {role} in {run.host.workspace}: starting runs takes the approver role."
        return render(request, PAGE, {"refusal": refusal}, status=403)
    if (  # the chat the server made for the run, which only the run's token could make
        run.status == HostRunStatus.STARTED
        and run.chat_id is not None
        and Chat.objects.filter(pk=run.chat_id, workspace_id=run.host.workspace_id).exists()
    ):
        return redirect("chat", run.chat_id)
    error = run.error
    if run.status == HostRunStatus.STARTING:
        waited = timedelta(seconds=settings.HOST_START_SECONDS)
        if not run.host.is_online:
            error = f"The host {run.host} went offline before the run started."
        elif timezone.now() - run.created_at > waited:
            error = f"The host {run.host} has not started the run after {waited.seconds} s."
            host_asks.fail(run, error)  # and its token is revoked
    elif not error:
        error = f"The run is {run.status}, but its page is not there."
    response = render(request, STARTING, {"run": run, "error": error})
    add_never_cache_headers(response)
    return response

"""A person's browsers that get notifications, answers from a notification's buttons, and what
makes koruweb an app a phone can install.

- ``page``: the person's notifications page — turn them on in this browser, see and remove
  their browsers, say what to be told and when not. ``follow``: follow a run, or stop.
- ``service_worker`` (``/sw.js``, at the root so that it controls every page), ``manifest``
  (``/manifest.webmanifest``) and ``offline`` (``/offline/``, the one page the worker keeps).

- ``devices`` (POST): a browser turned notifications on — its push subscription is kept for
  its person (a subscription already known moves to them); ``forget`` removes one.
- ``answer`` (POST): a notification's allow-once or reject button, from the service worker.
  It answers as the web page does (``views.answer_as``: the role, the choices offered, the
  first answer wins), as the person whose session sends it. A service worker has no page to
  read a CSRF token from, so the notification carries one of its own: a token signed for this
  prompt and this person (``says.token``), checked against the session's person, and the
  request's Origin, when sent, must be this site's (docs/protocol.md#notifications).
"""

from __future__ import annotations

import json
import uuid
from pathlib import Path
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from django import forms
from django.conf import settings
from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.views.decorators.csrf import csrf_exempt
from django.views.decorators.http import require_GET, require_http_methods, require_POST

from activity.core.contract import ChoiceIntent
from activity.core.refusals import Refusal
from activity.models import Follow, NotifyPrefs, Prompt, PromptKind, PushDevice
from activity.notify import says, vapid
from activity.people import access
from activity.web.views import answer_as

SERVICE_WORKER = "static/koruweb/page/sw.js"
TOKEN_DAYS = 7  # a notification's buttons answer for this long
NAME_CHARS = 120


def owner(request: HttpRequest) -> int:
    """The signed-in person's id (the views that call this require a login)."""
    pk = request.user.pk
    assert pk is not None
    return int(pk)


def refused(message: str, status: int) -> JsonResponse:
    return JsonResponse({"error": message}, status=status)


def same_origin(request: HttpRequest) -> bool:
    origin = request.headers.get("Origin")
    if origin is None:
        return True  # a same-origin fetch may send none; the token proves the rest
    return origin == f"{request.scheme}://{request.get_host()}" or origin in set(
        settings.CSRF_TRUSTED_ORIGINS
    )


@csrf_exempt  # the notification's own token stands in for the CSRF token (above)
@require_POST
def answer(request: HttpRequest, prompt_id: uuid.UUID) -> HttpResponse:
    if not request.user.is_authenticated:
        return refused("Log in to answer.", 401)
    found = says.read_token(request.POST.get("token", ""), max_age=TOKEN_DAYS * 86400)
    if found != (str(prompt_id), request.user.pk) or not same_origin(request):
        return refused("This notification cannot answer for you: open the prompt.", 403)
    visible = access.visible_chats(request.user)
    prompt = get_object_or_404(
        Prompt.objects.select_related("chat", "chat__workspace"), pk=prompt_id, chat__in=visible
    )
    chosen = next((c for c in prompt.choices if c["id"] == request.POST.get("choice")), None)
    if prompt.kind != PromptKind.PERMISSION or chosen is None or chosen["intent"] not in says.ACTED:
        return refused("Open the prompt to answer it this way.", 400)
    try:
        decision = answer_as(request, prompt)
    except Refusal as refusal:
        return refused(str(refusal), refusal.status)
    return JsonResponse({"decision": decision, "intent": ChoiceIntent(chosen["intent"])})


@require_POST
@login_required
def devices(request: HttpRequest) -> HttpResponse:
    """Keep this browser's push subscription (JSON: ``{"subscription": …, "name": …}``)."""
    try:
        body = json.loads(request.body or b"{}")
        subscription = body["subscription"]
        endpoint, keys = str(subscription["endpoint"]), subscription["keys"]
        p256dh, auth = str(keys["p256dh"]), str(keys["auth"])
    except (ValueError, KeyError, TypeError):
        return refused("Send the browser's push subscription.", 400)
    if not endpoint.startswith("https://") and not settings.PUSH_ALLOW_HTTP:
        return refused("A push service's address starts with https://.", 400)
    if len(endpoint) > 2048 or len(p256dh) > 200 or len(auth) > 100:
        return refused("That is not a browser's push subscription.", 400)
    name = str(body.get("name") or "A browser")[:NAME_CHARS]
    device, _ = PushDevice.objects.update_or_create(
        endpoint=endpoint,
        defaults={"user_id": owner(request), "p256dh": p256dh, "auth": auth, "name": name},
    )
    return JsonResponse({"device": device.pk}, status=201)


@require_POST
@login_required
def forget(request: HttpRequest, device_id: int) -> HttpResponse:
    """Remove one of the person's own browsers (anyone else's is not found); a form's post goes
    back to the notifications page."""
    get_object_or_404(PushDevice, pk=device_id, user=request.user).delete()
    if "application/json" in request.headers.get("Accept", ""):
        return JsonResponse({"forgotten": device_id})
    return redirect("notifications")


class PrefsForm(forms.ModelForm[NotifyPrefs]):
    class Meta:
        model = NotifyPrefs
        fields = ["prompts", "mentions", "follows", "quiet_from", "quiet_until", "time_zone"]
        labels = {
            "prompts": "Prompts waiting for my answer",
            "mentions": "Comments that mention me",
            "follows": "A turn of a run I follow ended",
            "quiet_from": "Quiet from",
            "quiet_until": "until",
            "time_zone": "in the time zone",
        }
        widgets = {
            "quiet_from": forms.TimeInput(attrs={"type": "time"}),
            "quiet_until": forms.TimeInput(attrs={"type": "time"}),
        }

    def clean_time_zone(self) -> str:
        zone = str(self.cleaned_data["time_zone"]).strip()
        try:
            ZoneInfo(zone)
        except (ZoneInfoNotFoundError, ValueError):
            raise forms.ValidationError(
                f"“{zone}” is not a time zone: use a name such as Europe/Berlin or UTC."
            ) from None
        return zone


@require_http_methods(["GET", "POST"])
@login_required
def page(request: HttpRequest) -> HttpResponse:
    """The person's notifications: this browser, their browsers, what to be told and when
    not. A POST saves what to be told."""
    prefs = NotifyPrefs.objects.filter(user_id=owner(request)).first() or NotifyPrefs(
        user_id=owner(request)
    )
    form = PrefsForm(request.POST if request.method == "POST" else None, instance=prefs)
    if request.method == "POST" and form.is_valid():
        form.save()
        return redirect(f"{reverse('notifications')}?saved=1")
    devices = PushDevice.objects.filter(user_id=owner(request))
    context = {
        "devices": devices,
        "public_key": vapid.public_key(),
        "form": form,
        "saved": request.GET.get("saved") == "1",
    }
    status = 400 if form.errors else 200
    return render(request, "activity/people/notifications.html", context, status=status)


@require_POST
@login_required
def follow(request: HttpRequest, chat_id: uuid.UUID) -> HttpResponse:
    """Follow a run the person may see (``following=1``), or stop (``following=0``): told when
    each of its turns ends."""
    chat = get_object_or_404(access.visible_chats(request.user), pk=chat_id)
    following = request.POST.get("following") == "1"
    Follow.objects.update_or_create(
        user_id=owner(request), chat=chat, defaults={"following": following}
    )
    return redirect("chat", chat.pk)


@require_GET
def service_worker(request: HttpRequest) -> HttpResponse:
    script = (Path(settings.BASE_DIR) / SERVICE_WORKER).read_text()
    response = HttpResponse(script, content_type="text/javascript; charset=utf-8")
    response["Cache-Control"] = "no-cache"  # a new version is picked up at the next visit
    return response


@require_GET
def manifest(request: HttpRequest) -> HttpResponse:
    icons = "/static/koruweb/page/icons/"
    app = {
        "name": "koruweb",
        "short_name": "koruweb",
        "description": "Watch coding-agent runs live, answer their prompts, review them together.",
        "start_url": "/inbox/",
        "scope": "/",
        "display": "standalone",
        "background_color": "#f7f8fa",
        "theme_color": "#2356c7",
        "icons": [
            {"src": f"{icons}icon-192.png", "sizes": "192x192", "type": "image/png"},
            {"src": f"{icons}icon-512.png", "sizes": "512x512", "type": "image/png"},
            {
                "src": f"{icons}icon-maskable-512.png",
                "sizes": "512x512",
                "type": "image/png",
                "purpose": "maskable",
            },
        ],
    }
    return JsonResponse(app, content_type="application/manifest+json")


@require_GET
def offline(request: HttpRequest) -> HttpResponse:
    return render(request, "offline.html")

"""A person's mentions, from their inbox: open one (it goes to the call and leaves the inbox)
or dismiss it. Only the mentioned person may do either; anyone else gets the plain 404."""

from __future__ import annotations

from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect
from django.views.decorators.http import require_GET, require_POST

from activity.models import Mention
from activity.push import inbox as needs
from activity.review import mentions
from activity.web.requests import HtmxRequest


def _seen(request: HttpRequest, mention_id: int) -> Mention:
    """The person's own mention in a run they still see, marked as seen; their pages told."""
    mention = mentions.mark_seen(mention_id, request.user)
    if mention is None:
        raise Http404("no such mention")
    needs.tell_mentions_sync([mention.user_id])
    return mention


@require_GET
@login_required
def open_mention(request: HttpRequest, mention_id: int) -> HttpResponse:
    """Go to the call; the mention is seen, unless another site sent the browser here (a link
    elsewhere must not empty someone's inbox: Sec-Fetch-Site says cross-site)."""
    if request.headers.get("Sec-Fetch-Site", "none") in ("same-origin", "none"):
        return redirect("tool", _seen(request, mention_id).comment.tool_id)
    mention = mentions.own(mention_id, request.user)  # seen or not, it stays as it was
    if mention is None:
        raise Http404("no such mention")
    return redirect("tool", mention.comment.tool_id)


@require_POST
@login_required
def dismiss(request: HtmxRequest, mention_id: int) -> HttpResponse:
    _seen(request, mention_id)
    if request.htmx:
        return HttpResponse("")  # the item is swapped out by the page
    return redirect("inbox")

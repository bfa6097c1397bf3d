"""*Changes*: what the agent changed in a run's git working tree, for the whole run and per turn
(activity/live/changes.py keeps them; docs/protocol.md#the-whole-change).

``/chats/<id>/changes/`` shows the whole run's change (its latest turn's diff against the run's
start); ``?turn=<id>`` one turn's. Each is drawn like the diffs of calls (``show/diffs.py``),
after a list of its files with their counts. Anyone who may see the run may see its changes;
a run outside git says so.
"""

from __future__ import annotations

import uuid

from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, render
from django.views.decorators.http import require_GET

from activity.models import InferenceAttempt, TurnDiff
from activity.people import access
from activity.show import patches

TURNS_LISTED = 100  # the latest turns the page lists beside the change shown


@require_GET
@login_required
def changes(request: HttpRequest, chat_id: uuid.UUID) -> HttpResponse:
    chat = get_object_or_404(access.visible_chats(request.user), pk=chat_id)
    diffs = TurnDiff.objects.filter(chat=chat).select_related("attempt")
    turns = list(diffs.order_by("-at").defer("turn_diff", "run_diff")[: TURNS_LISTED + 1])
    order = InferenceAttempt.objects.filter(chat=chat).values_list("pk", flat=True)
    numbers = {pk: n for n, pk in enumerate(order, start=1)}
    for diff in turns:
        diff.number = numbers.get(diff.attempt_id, 0)  # type: ignore[attr-defined]
    asked = request.GET.get("turn")
    chosen: TurnDiff | None
    shown: patches.Shown | None
    if asked:
        try:
            chosen = diffs.get(attempt_id=uuid.UUID(asked))
        except (ValueError, TurnDiff.DoesNotExist):
            raise Http404("That turn changed nothing koruweb knows of.") from None
        shown = patches.shown(chosen, "turn")
    else:
        latest = diffs.order_by("-at").first()
        chosen = latest
        shown = patches.shown(latest, "run") if latest is not None else None
    context = {
        "chat": chat,
        "turns": turns[:TURNS_LISTED],
        "more_turns": len(turns) > TURNS_LISTED,
        "chosen": chosen if asked else None,
        "shown": shown,
    }
    return render(request, "activity/review/changes.html", context)

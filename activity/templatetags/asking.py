"""What a prompt asks, for the prompt box on every page (``{% load asking %}``).

``{% asking prompt as ask %}`` gives ``ask.asked``, the parts of what was asked
(``prompts.Asked``): the row's ``agent_summary`` for a prompt about a call — the one place it is
kept — or the prompt's own summary for a prompt about no call; ``ask.call``, that call; and
``ask.verdict``. Where the page renders the prompt inside its row (``row`` in the context), that
row is used, so a push renders any number of rows in the same number of queries.
``{{ text|asked }}`` reads a row's ``agent_summary`` alone.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from django import template

from activity.core import prompts
from activity.models import Prompt, ToolActivity

register = template.Library()


def call_of(prompt: Prompt, row: Any = None) -> ToolActivity | None:
    """The call a prompt is about: the row at hand when it is that call, else its own."""
    if prompt.tool_id is None:
        return None
    if isinstance(row, ToolActivity) and row.pk == prompt.tool_id:
        return row
    return prompt.tool


@dataclass(frozen=True)
class Asking:
    asked: prompts.Asked
    call: ToolActivity | None
    verdict: str


@register.simple_tag(takes_context=True)
def asking(context: template.Context, prompt: Prompt) -> Asking:
    call = call_of(prompt, context.get("row"))
    # Prompts opened before the row was the one place kept a copy in their own summary.
    text = (call.agent_summary if call else None) or prompt.summary
    return Asking(prompts.asked(text), call, prompts.verdict(prompt))


@register.filter
def asked(text: str | None) -> prompts.Asked:
    """What a row's ``agent_summary`` asked, in its parts."""
    return prompts.asked(text)

"""Statuses in words a person uses (activity/show/statuses.py): what a call's and a turn's badge
says for each way it can stand or end, a command's exit code from what the agent reported
(through the pure merge), and how each badge looks: its own glyph and outline, and text that
passes WCAG AA on its tint in the light and the dark scheme (koruweb.css, "Statuses").

Pure: no database, no socket. The pages themselves are checked in the browser tests.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
from django.conf import settings

from activity.core import exits
from activity.core.contract import ToolApproval
from activity.core.merge import AgentExited, Event, PromptClosed, TurnCancelled
from activity.live.calls import set_state
from activity.models import InferenceAttempt, Prompt, ToolActivity
from activity.show import contrast, statuses
from activity.templatetags.badges import badge, call_status
from tests.core.merge.events import permission, replay, text, tool_call, tool_call_update

CSS = (Path(settings.BASE_DIR) / "static/koruweb/page/koruweb.css").read_text()


def row_after(*events: Event, asked: str | None = None) -> ToolActivity:
    """The row a call's events leave, with the kind of its prompt as a page loads it."""
    row = ToolActivity()
    set_state(row, replay(*events))
    row.prompt = Prompt(kind=asked) if asked else None  # type: ignore[attr-defined]
    return row


def said(*events: Event, asked: str | None = None) -> tuple[str, str]:
    shown = statuses.call_status(row_after(*events, asked=asked))
    return shown.words, shown.tone


# --- a call ------------------------------------------------------------------------------


def test_a_call_reads_as_what_happened_to_it_never_as_a_bare_code():
    edit = tool_call(kind="edit", status="pending", title="Edit a.py")
    assert said(edit) == ("Starting", statuses.STARTING)
    assert said(edit, tool_call_update(status="in_progress")) == ("Running", statuses.RUNNING)
    assert said(edit, tool_call_update(status="completed")) == ("Succeeded", statuses.SUCCEEDED)
    assert said(edit, tool_call_update(status="failed")) == ("Failed", statuses.FAILED)
    assert said(edit, TurnCancelled()) == ("Cancelled", statuses.CANCELLED)
    assert said(edit, AgentExited()) == ("Agent crashed", statuses.CRASHED)


def test_a_read_the_agent_announced_is_running_never_proposed():
    read = tool_call(kind="read", status="pending", title="Read a.py")
    assert said(read) == ("Running", statuses.RUNNING)


def test_a_prompt_waits_for_you_where_you_may_answer_and_for_an_answer_elsewhere():
    asking = (tool_call(kind="execute", status="pending"), permission(title="Run make"))
    shown = statuses.call_status(row_after(*asking, asked="permission"))
    assert (shown.words, shown.tone) == ("Waiting for you", statuses.WAITING)
    assert shown.said(can_answer=False) == "Waiting for an answer"
    assert shown.said(can_answer=True) == "Waiting for you"
    html = str(badge(shown))  # both, rendered once for every viewer; the page shows its own
    assert '<span class="if-yours">Waiting for you</span>' in html
    assert '<span class="if-not-yours">Waiting for an answer</span>' in html
    assert re.search(r'\[data-can-answer="false"\] \.badge \.if-not-yours \{ display: inline', CSS)


def test_a_person_turning_a_call_down_is_rejected_and_a_question_declined():
    asked = (tool_call(kind="edit", status="pending"), permission(title="Edit a.py"))
    refused = (*asked, PromptClosed(ToolApproval.DENIED), tool_call_update(status="failed"))
    assert said(*refused, asked="permission") == ("Rejected", statuses.REJECTED)
    assert said(*refused, asked="question") == ("Declined", statuses.REJECTED)
    row = row_after(*refused, asked="permission")
    assert statuses.call_decision(row) is None  # the badge says it once
    assert "approval" not in str(call_status(row))


def test_a_decision_beside_the_status_says_allowed_answered_or_not_answered():
    asked = (tool_call(kind="edit", status="pending"), permission(title="Edit a.py"))
    allowed = (*asked, PromptClosed(ToolApproval.APPROVED), tool_call_update(status="completed"))
    decision = statuses.call_decision(row_after(*allowed, asked="permission"))
    assert decision is not None and decision.words == "Allowed"
    answered = statuses.call_decision(row_after(*allowed, asked="question"))
    assert answered is not None and answered.words == "Answered"  # never "Approved"
    ran_anyway = (*asked, PromptClosed(ToolApproval.DENIED), tool_call_update(status="completed"))
    row = row_after(*ran_anyway, asked="permission")
    denied = statuses.call_decision(row)
    assert statuses.call_status(row).words == "Succeeded"
    assert denied is not None and denied.words == "Rejected"
    unanswered = (*asked, TurnCancelled())
    assert said(*unanswered, asked="permission") == ("Cancelled", statuses.CANCELLED)
    closed = statuses.call_decision(row_after(*unanswered, asked="permission"))
    assert closed is not None and closed.words == "Not answered"
    assert said(*asked, PromptClosed(ToolApproval.CANCELLED), asked="permission") == (
        "Not run",
        statuses.CANCELLED,
    )


def test_the_runs_list_counts_calls_in_words():
    assert statuses.count_words("completed", 3).words == "3 succeeded"
    assert statuses.count_words("proposed", 1) == statuses.Shown(
        "1 not started", statuses.STARTING, "1 call not started"
    )
    assert statuses.count_words("failed", 2).title == "2 calls failed"


# --- a command's exit code, through the merge --------------------------------------------


def command(*updates: Event) -> ToolActivity:
    return row_after(tool_call(kind="execute", status="pending", title="make"), *updates)


@pytest.mark.parametrize(
    "raw_output",
    [
        {"stdout": "", "stderr": "boom\n", "exit_code": 3},  # codex-acp
        {"exitCode": 3, "output": "boom\n"},  # the terminal's facts
        "Exit code 3\nboom",  # claude-agent-acp's text of a failed command
        "```console\nExit code 3\nboom\n```",
    ],
)
def test_a_failed_command_says_the_exit_code_the_agent_reported(raw_output: Any):
    row = command(tool_call_update(status="failed", rawOutput=raw_output))
    assert row.error_code == "tool_failed"
    assert row.error_message == "The command exited with code 3."  # a public summary
    assert statuses.call_status(row) == statuses.Shown(
        "Failed · exit 3", statuses.FAILED, "The command exited with code 3."
    )


def test_the_exit_code_stays_when_the_agent_says_failed_again_or_sends_it_later():
    again = command(
        tool_call_update(status="failed", rawOutput={"exit_code": 2}),
        tool_call_update(status="failed", content=[text("boom")]),
    )
    assert statuses.call_status(again).words == "Failed · exit 2"
    later = command(
        tool_call_update(status="failed"),
        tool_call_update(rawOutput={"exit_code": 127}),
    )
    assert statuses.call_status(later).words == "Failed · exit 127"


def test_no_exit_code_is_made_up_or_kept_where_it_does_not_belong():
    ok = command(tool_call_update(status="completed", rawOutput={"exit_code": 0}))
    assert statuses.call_status(ok).words == "Succeeded" and ok.error_message is None
    plain = command(tool_call_update(status="failed", rawOutput={"stdout": "exit code 3"}))
    assert statuses.call_status(plain).words == "Failed"
    crashed = command(tool_call_update(status="in_progress"), AgentExited())
    crashed_later = command(
        tool_call_update(status="in_progress"),
        AgentExited(),
        tool_call_update(rawOutput={"exit_code": 1}),
    )
    assert statuses.call_status(crashed).words == "Agent crashed"
    assert statuses.call_status(crashed_later).words == "Agent crashed"
    for odd in (True, 2**40, "3", None, [3], "Exit code 99999999999"):
        assert exits.reported_exit_code({"exit_code": odd}) is None
        assert exits.reported_exit_code(odd) is None
    assert exits.reported_exit_code({"returncode": -9}) == -9


# --- a turn ------------------------------------------------------------------------------


def ended(reason: str | None) -> InferenceAttempt:
    return InferenceAttempt(started_at=1_000, ended_at=2_000, stop_reason=reason or "")


@pytest.mark.parametrize(
    ("reason", "words", "tone"),
    [
        ("end_turn", "Finished", statuses.SUCCEEDED),
        ("agent_exited", "Agent crashed", statuses.CRASHED),
        ("runner_lost", "Runner lost", statuses.LOST),
        ("agent_error", "Agent error", statuses.FAILED),
        ("max_tokens", "Stopped: token limit", statuses.LIMIT),
        ("max_turn_requests", "Stopped: request limit", statuses.LIMIT),
        ("refusal", "Refused", statuses.REFUSED),
        ("cancelled", "Cancelled", statuses.CANCELLED),
        ("something_new", "Ended: something_new", statuses.ENDED),
        (None, "Ended", statuses.ENDED),
    ],
)
def test_a_turn_says_how_it_ended_in_words(reason: str | None, words: str, tone: str):
    shown = statuses.turn_status(ended(reason))
    assert (shown.words, shown.tone) == (words, tone) and shown.title


def test_a_running_turn_and_a_turn_someone_cancelled_say_so_and_who():
    running = InferenceAttempt(started_at=1_000, ended_at=None)
    assert statuses.turn_status(running).words == "Running"
    assert statuses.turn_status(ended("cancelled"), "bob").words == "Cancelled by bob"


def test_an_agent_crash_and_a_success_never_look_alike():
    # The complaint: an agent crash and a success wore the same green "ended" badge.
    looks = {statuses.turn_status(ended(r)).tone for r in ("end_turn", "agent_exited")}
    assert len(looks) == 2


# --- how each badge looks ----------------------------------------------------------------


def rules(selector: str) -> dict[str, dict[str, str]]:
    """The declarations of each ``<selector>.is-<tone>`` rule in koruweb.css."""
    found: dict[str, dict[str, str]] = {}
    pattern = re.escape(selector) + r"\.(is-[\w-]+)\s*\{([^}]*)\}"
    for tone, body in re.findall(pattern, CSS):
        declared = dict(re.findall(r"([\w-]+)\s*:\s*([^;]+?)\s*(?:;|$)", body.strip()))
        found.setdefault(tone, {}).update(declared)
    return found


def colour(value: str, palette: dict[str, str]) -> str:
    name = re.fullmatch(r"var\(--([\w-]+)\)", value.strip())
    assert name, f"a badge's colour is a colour property: {value}"
    return palette[name.group(1)]


@pytest.mark.parametrize("scheme", ["light", "dark"])
def test_every_badges_text_passes_wcag_aa_on_its_tint(scheme: str):
    palette = contrast.properties(CSS)[scheme]
    badges = rules(".badge")
    assert set(badges) == set(statuses.TONES)
    failing = {}
    for tone, declared in badges.items():
        fg, bg = colour(declared["color"], palette), colour(declared["background"], palette)
        if contrast.ratio(fg, bg) < contrast.AA_TEXT:
            failing[tone] = round(contrast.ratio(fg, bg), 2)
    for tone, declared in rules(".approval").items():  # a decision's words on the row
        fg = colour(declared["color"], palette)
        for under in ("surface", "bg"):
            if contrast.ratio(fg, palette[under]) < contrast.AA_TEXT:
                failing[f"approval {tone} on {under}"] = round(
                    contrast.ratio(fg, palette[under]), 2
                )
    assert not failing


def test_every_tone_has_a_glyph_and_a_look_of_its_own():
    glyphs = dict(
        re.findall(r"\.(is-[\w-]+)::before\s*\{\s*content:\s*\"([^\"]+)\"\s*/\s*\"\"", CSS)
    )
    assert set(glyphs) == set(statuses.TONES)  # each one's alternative text empty: words say it
    assert len(set(glyphs.values())) == len(glyphs)  # told apart without colour
    looks = {
        tone: (d.get("background"), d.get("color"), d.get("border", d.get("border-color")))
        for tone, d in rules(".badge").items()
    }
    assert len(set(looks.values())) == len(looks), looks

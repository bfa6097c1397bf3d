"""A turn's reply cut where its calls were made (activity/review/transcript.py, interleave): the
segments both the live page and the turn page draw, in time order."""

from __future__ import annotations

from activity.models import ToolActivity
from activity.review.transcript import chat_markdown, interleave

TEXT = "Let me run the test. The test expects a comma: I'll change greet(). Done, ä passes."


def call(label: str, offset: int | None) -> ToolActivity:
    return ToolActivity(
        agent_label=label, tool_name="execute", status="completed", text_offset=offset
    )


def cut(segments: list) -> list[tuple[int, list[str], str]]:
    return [(s.offset, [r.agent_label for r in s.rows], s.text) for s in segments]


def test_the_text_before_a_call_stands_before_it_and_the_text_after_it_after():
    run, edit = call("run", TEXT.index(" The")), call("edit", TEXT.index(" Done"))
    assert cut(interleave(TEXT, [run, edit])) == [
        (0, [], "Let me run the test."),
        (run.text_offset, ["run"], " The test expects a comma: I'll change greet()."),
        (edit.text_offset, ["edit"], " Done, ä passes."),
    ]


def test_calls_made_together_share_a_segment_and_calls_before_any_text_open_the_reply():
    first, second = call("read", 0), call("grep", 0)
    later = call("test", len(TEXT.encode()))
    assert cut(interleave(TEXT, [first, second, later])) == [
        (0, ["read", "grep"], TEXT),
        (len(TEXT.encode()), ["test"], ""),
    ]


def test_offsets_are_bytes_and_a_call_never_stands_before_the_one_before_it_or_past_the_end():
    after_umlaut = TEXT.encode().index(b" passes")
    odd = [call("a", after_umlaut), call("b", 3), call("c", None), call("d", 10**6)]
    segments = interleave(TEXT, odd)
    assert cut(segments)[1:] == [
        (after_umlaut, ["a", "b", "c"], " passes."),
        (len(TEXT.encode()), ["d"], ""),
    ]
    assert segments[0].text.endswith("ä")  # cut between characters, by UTF-8 bytes


def test_a_page_of_a_long_turn_starts_at_its_first_call_and_ends_before_the_next_pages():
    calls = [call(f"c{n}", n * 10) for n in range(1, 5)]
    segments = interleave(TEXT, calls[1:3], start=calls[1].text_offset or 0, end=40)
    assert cut(segments) == [
        (20, ["c2"], TEXT.encode()[20:30].decode()),
        (30, ["c3"], TEXT.encode()[30:40].decode()),
    ]


def test_the_markdown_transcript_reads_in_the_same_order():
    run, edit = call("run", TEXT.index(" The")), call("edit", TEXT.index(" Done"))
    chat = type(
        "Chat", (), {"title": "T", "display_name": "T", "agent_name": "demo", "agent_version": "1"}
    )()
    attempt = type("Attempt", (), {"prompt": "Fix it", "ended_at": None})()
    text = chat_markdown(chat, [(attempt, TEXT, [run, edit])])
    places = [
        text.index(s) for s in ("Let me run", "**run**", "expects a comma", "**edit**", "passes")
    ]
    assert places == sorted(places)

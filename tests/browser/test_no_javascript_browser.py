"""Answering and commenting work in a browser with JavaScript off: plain forms, a CSRF token."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from playwright.sync_api import Page, expect

from activity.models import Comment, Prompt, Role
from tests.browser.helpers import Team, answer_heard, member, sign_in
from tests.browser.runner import Runner
from tests.browser.test_answers_browser import REQUEST, ask_permission, selected

pytestmark = [pytest.mark.django_db(transaction=True)]


@pytest.fixture
def no_script(new_page: Callable[..., Page], team: Team) -> Page:
    """An approver in Chromium with JavaScript disabled."""
    page = new_page(java_script_enabled=False)
    sign_in(page, member(team.workspace, "bob", Role.APPROVER))
    return page


def test_an_approver_without_javascript_answers_a_prompt_with_the_pages_own_form(
    no_script: Page, runner: Runner
):
    row = ask_permission(runner)
    no_script.goto(f"/chats/{runner.chat_id}/")
    no_script.locator(f"#prompt-{Prompt.objects.get().pk}").get_by_role(
        "button", name="Allow once"
    ).click()
    assert answer_heard(runner) == selected("allow-once", REQUEST)
    prompt = Prompt.objects.get()
    assert prompt.answered_by is not None and prompt.answered_by.get_username() == "bob"
    expect(no_script.locator(f"#prompt-{prompt.pk} .decision")).to_contain_text("by bob")
    assert row.tool_name


def test_a_member_without_javascript_comments_on_a_call(no_script: Page, runner: Runner):
    row = ask_permission(runner)
    no_script.goto(f"/chats/{runner.chat_id}/")
    no_script.locator(f"#call-label-{row.pk}").click()  # the call opens, with its form
    box = no_script.locator(f"#comment-form-{row.pk}")
    box.get_by_label("Comment on this call").fill("Looks risky")
    box.get_by_role("button", name="Add comment").click()
    expect(no_script.locator(f"#comments-{row.pk} .comment")).to_contain_text("Looks risky")
    assert Comment.objects.get().text == "Looks risky"


def test_a_prompt_form_that_came_in_a_push_links_to_a_page_of_its_own_that_answers(
    no_script: Page, runner: Runner
):
    ask_permission(runner)
    prompt = Prompt.objects.get()
    no_script.goto(f"/prompts/{prompt.pk}/answer")  # the link a pushed form carries
    no_script.get_by_role("button", name="Reject").click()
    assert answer_heard(runner) == selected("reject", REQUEST)

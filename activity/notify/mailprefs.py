"""What a person wants by mail, as their notifications page's email section edits it
(``MailPrefs``: a prompt after N minutes, mentions, runs they follow, the digest).
docs/email.md."""

from __future__ import annotations

from typing import Any

from django import forms

from activity.models import MailPrefs

LATEST_MINUTES = 24 * 60  # a prompt is mailed after at most a day's wait


class PrefsForm(forms.ModelForm[MailPrefs]):
    class Meta:
        model = MailPrefs
        fields = ["prompt_minutes", "mentions", "follows", "digest"]
        labels = {
            "prompt_minutes": "A prompt waiting for my answer, after this many minutes",
            "mentions": "Comments that mention me",
            "follows": "A turn of a run I follow ended (failed or finished)",
            "digest": "A daily digest",
        }

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("auto_id", "mail_%s")  # the Web Push form on its page has id_mentions…
        super().__init__(*args, **kwargs)
        self.fields["prompt_minutes"].widget.attrs.update(min=1, max=LATEST_MINUTES)

    def clean_prompt_minutes(self) -> int | None:
        minutes: int | None = self.cleaned_data["prompt_minutes"]
        if minutes is not None and not 1 <= minutes <= LATEST_MINUTES:
            raise forms.ValidationError(
                f"Say 1 to {LATEST_MINUTES} minutes, or leave it empty for never."
            )
        return minutes


def prefs_of(user_id: int) -> MailPrefs:
    return MailPrefs.objects.filter(user_id=user_id).first() or MailPrefs(user_id=user_id)

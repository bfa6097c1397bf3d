from __future__ import annotations

from django.contrib import admin
from django.contrib.auth import views as auth_views
from django.urls import include, path

from activity.people.login import LoginView
from activity.web.notfound import page_not_found
from activity.web.output import highlight_css

urlpatterns = [
    path("admin/", admin.site.urls),
    path("accounts/login/", LoginView.as_view(), name="login"),  # wrong passwords limited
    # Django's accounts views; the password reset, by mail to a confirmed address, is mounted
    # at /accounts/password-reset/ with the email views (activity/web/urls.py, docs/email.md).
    path("accounts/logout/", auth_views.LogoutView.as_view(), name="logout"),
    path(
        "accounts/password_change/",
        auth_views.PasswordChangeView.as_view(),
        name="password_change",
    ),
    path(
        "accounts/password_change/done/",
        auth_views.PasswordChangeDoneView.as_view(),
        name="password_change_done",
    ),
    path("highlight.css", highlight_css, name="highlight-css"),  # Pygments colours, both schemes
    path("", include("activity.web.urls")),
]

handler404 = page_not_found  # the same page as activity.web.notfound's middleware, DEBUG off

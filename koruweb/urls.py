from __future__ import annotations

from django.contrib import admin
from django.urls import include, path

from activity.people.login import LoginView
from activity.web.notfound import page_not_found
from activity.web.output import highlight_css

urlpatterns = [
    path("admin/", admin.site.urls),
    path("accounts/login/", LoginView.as_view(), name="login"),  # wrong passwords limited
    path("accounts/", include("django.contrib.auth.urls")),
    path("highlight.css", highlight_css, name="highlight-css"),  # Pygments colours, both schemes
    path("", include("activity.web.urls")),
]

handler404 = page_not_found  # the same page as activity.web.notfound's middleware, DEBUG off

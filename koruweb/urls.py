from __future__ import annotations

from django.contrib import admin
from django.urls import include, path

from activity.login import LoginView

urlpatterns = [
    path("admin/", admin.site.urls),
    path("accounts/login/", LoginView.as_view(), name="login"),  # wrong passwords limited
    path("accounts/", include("django.contrib.auth.urls")),
    path("", include("activity.urls")),
]

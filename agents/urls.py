"""REST API routes (mounted under /api/)."""

from __future__ import annotations

urlpatterns: list = []

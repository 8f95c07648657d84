"""FIM One hooks: agents whose tool calls pass through hooks and human approvals."""

from fimone.celery import app as celery_app

__all__ = ["celery_app"]

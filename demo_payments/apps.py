"""Demo target service — not part of the platform."""

from django.apps import AppConfig


class DemoPaymentsConfig(AppConfig):
    name = "demo_payments"
    verbose_name = "Demo payments (demo target, not part of the platform)"

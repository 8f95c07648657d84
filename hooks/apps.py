from django.apps import AppConfig


class HooksConfig(AppConfig):
    name = "hooks"
    verbose_name = "Hooks"

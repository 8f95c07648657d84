"""A real OpenID provider for the single sign-on tests: a small Django project of its own
(django-oauth-toolkit's OIDC provider), started as a process by ``tests.oidc_provider.kit``."""

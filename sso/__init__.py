"""Single sign-on: people sign in with their organisation's OpenID Connect provider, and the
provider's groups decide their roles (docs/security.md, "Single sign-on")."""

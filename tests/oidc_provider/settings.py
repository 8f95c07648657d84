"""Settings of the test OpenID provider, a Django project of its own that ``kit.Provider`` runs as a
separate process (``DJANGO_SETTINGS_MODULE=tests.oidc_provider.settings``, cwd the repository root).

Everything that varies between providers comes from the environment the kit sets:

- ``OIDC_PROVIDER_DB``: the SQLite file (required);
- ``OIDC_PROVIDER_KEY``: a file holding the active RSA private key (PEM) that signs ID tokens;
- ``OIDC_PROVIDER_OLD_KEYS``: files (``os.pathsep``-separated, may be empty) of inactive keys the
  JWKS keeps publishing after a rotation;
- ``OIDC_PROVIDER_ID_TOKEN_SECONDS``: the ID tokens' lifetime (3600 unless set);
- ``OIDC_PROVIDER_CONTROL_TOKEN``: the secret the ``/control/`` endpoints demand (none: all refused);
- ``OIDC_PROVIDER_PUBLISH_ACTIVE_KEY``: ``0`` makes the JWKS leave out the active key, which still
  signs every ID token: a provider signing with a key it does not publish (``1`` unless set).
"""

from __future__ import annotations

import os
from pathlib import Path

from django.core.exceptions import ImproperlyConfigured


def _read_pem(path: str) -> str:
    return Path(path).read_text(encoding="ascii")


def _env_required(name: str) -> str:
    value = os.environ.get(name, "")
    if not value:
        raise ImproperlyConfigured(
            f"the test OpenID provider needs {name} (tests/oidc_provider/kit.py sets it)"
        )
    return value


SECRET_KEY = os.environ.get("OIDC_PROVIDER_SECRET_KEY", "test-oidc-provider-secret-key-not-for-production")
DEBUG = False
ALLOWED_HOSTS = ["127.0.0.1", "localhost"]

INSTALLED_APPS = [
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",  # DOT's own pages (the logout confirmation) use {% static %}
    "oauth2_provider",
    "tests.oidc_provider",
]

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
]

ROOT_URLCONF = "tests.oidc_provider.urls"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
            ],
        },
    },
]

DATABASES = {
    "default": {
        "ENGINE": "django.db.backends.sqlite3",
        "NAME": _env_required("OIDC_PROVIDER_DB"),
    }
}
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

# A test provider: fast hashing of its users' passwords and of the client secrets DOT hashes.
PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]

# The relying party under test also runs on 127.0.0.1 (another port), and browsers do not keep
# cookies apart by port: the provider's cookies get names of their own so neither side overwrites
# the other's session.
SESSION_COOKIE_NAME = "oidc_provider_sessionid"
CSRF_COOKIE_NAME = "oidc_provider_csrftoken"

LOGIN_URL = "/accounts/login/"
LOGIN_REDIRECT_URL = "/"
LOGOUT_REDIRECT_URL = "/"

USE_TZ = True
TIME_ZONE = "UTC"
STATIC_URL = "/static/"

OIDC_PROVIDER_CONTROL_TOKEN = os.environ.get("OIDC_PROVIDER_CONTROL_TOKEN", "")
OIDC_PROVIDER_PUBLISH_ACTIVE_KEY = os.environ.get("OIDC_PROVIDER_PUBLISH_ACTIVE_KEY", "1") != "0"

_old_key_files = [path for path in os.environ.get("OIDC_PROVIDER_OLD_KEYS", "").split(os.pathsep) if path]

OAUTH2_PROVIDER = {
    "OIDC_ENABLED": True,
    "OIDC_RSA_PRIVATE_KEY": _read_pem(_env_required("OIDC_PROVIDER_KEY")),
    "OIDC_RSA_PRIVATE_KEYS_INACTIVE": [_read_pem(path) for path in _old_key_files],
    "PKCE_REQUIRED": True,
    "SCOPES": {
        "openid": "OpenID Connect",
        "email": "Your e-mail address",
        "profile": "Your name and username",
        "groups": "The groups you belong to",
    },
    "DEFAULT_SCOPES": ["openid"],
    "ID_TOKEN_EXPIRE_SECONDS": int(os.environ.get("OIDC_PROVIDER_ID_TOKEN_SECONDS", "3600")),
    # RP-initiated logout: with an id_token_hint of the signed-in user (and a
    # post_logout_redirect_uri registered on its application) DOT logs out and redirects at once;
    # without a hint, or for another user, it still shows its confirmation page (the spec's MUST).
    "OIDC_RP_INITIATED_LOGOUT_ENABLED": True,
    "OIDC_RP_INITIATED_LOGOUT_ALWAYS_PROMPT": False,
    "OIDC_RP_INITIATED_LOGOUT_STRICT_REDIRECT_URIS": True,
    "OAUTH2_VALIDATOR_CLASS": "tests.oidc_provider.validator.Validator",
    # Only the code flow with PKCE S256 is on offer: refuse what RFC 9700 deprecates outright.
    "COMPLIANT_BCP_RFC9700_IMPLICIT_GRANT": True,
    "COMPLIANT_BCP_RFC9700_PASSWORD_GRANT": True,
    "COMPLIANT_BCP_RFC9700_PKCE_METHOD": True,
}

# Errors and DOT's own warnings go to stderr, which the kit writes to the provider's log file.
LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "handlers": {"stderr": {"class": "logging.StreamHandler"}},
    "loggers": {
        "django": {"handlers": ["stderr"], "level": "WARNING"},
        "django.server": {"handlers": ["stderr"], "level": "INFO", "propagate": False},  # one line a request
        "oauth2_provider": {"handlers": ["stderr"], "level": "INFO"},
        "oauthlib": {"handlers": ["stderr"], "level": "WARNING"},
    },
}

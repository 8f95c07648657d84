"""Settings, all read from the environment (docs/configuration.md lists every variable).

With no variable set this is the embedded mode: SQLite, an in-memory channel layer, Celery tasks
run eagerly in-process. ``DATABASE_URL`` switches to PostgreSQL (psycopg 3); ``REDIS_URL`` switches
the channel layer, cache and Celery broker to Redis and runs agent runs on Celery workers.
"""

from __future__ import annotations

import datetime as dt
import os
import socket
import tempfile
from pathlib import Path
from typing import Any

from fimone.env import (
    env_bool,
    env_choice,
    env_database,
    env_float,
    env_header,
    env_header_value,
    env_host_list,
    env_http_url,
    env_int,
    env_list,
    env_rate,
    env_redis_url,
    env_required,
    env_secret,
    env_secret_list,
    env_str,
)

BASE_DIR = Path(__file__).resolve().parent.parent
"""The checkout (where ``manage.py`` is), or site-packages when the package is installed."""
DATA_DIR = Path(env_str("DATA_DIR") or (BASE_DIR if (BASE_DIR / "manage.py").is_file() else Path.cwd()))
"""Where the embedded database and collected static files go by default: the checkout, or, for an
installed package (``pip install .``), the folder it is run from; ``DATA_DIR`` sets it."""

FIMONE_ENV = env_choice("FIMONE_ENV", "development", ("development", "production"))
PRODUCTION = FIMONE_ENV == "production"

if PRODUCTION:
    SECRET_KEY = env_required("SECRET_KEY", "when FIMONE_ENV=production")
    if len(SECRET_KEY) < 32:
        from fimone.env import EnvError

        raise EnvError("SECRET_KEY", "must be at least 32 characters long in production")
else:
    SECRET_KEY = env_str("SECRET_KEY", "fimone-development-only-key-do-not-use-in-production")

DEBUG = env_bool("DEBUG", not PRODUCTION)
ALLOWED_HOSTS = (
    env_list("ALLOWED_HOSTS", [])
    if PRODUCTION
    else env_list("ALLOWED_HOSTS", ["127.0.0.1", "localhost", "[::1]", "testserver"])
)
if PRODUCTION and not ALLOWED_HOSTS:
    env_required("ALLOWED_HOSTS", "when FIMONE_ENV=production (comma-separated host names)")
CSRF_TRUSTED_ORIGINS = env_list("CSRF_TRUSTED_ORIGINS", [])
# The public address links point to (invitations, approval cards, IM callbacks). Production names
# it. Development may leave it out: links then follow the address each request came in on, and
# links made outside a request use the one `make run` serves.
if PRODUCTION:
    env_required("SITE_URL", "when FIMONE_ENV=production (the public address, https://…)")
SITE_URL_FROM_REQUEST = env_http_url("SITE_URL") is None
SITE_URL = (env_http_url("SITE_URL") or "http://127.0.0.1:8000").rstrip("/")
# The demo payments service (``/demo/``) is mounted in development only; it has no default token
# in production, where nothing should pay with a well-known one.
DEMO_PAYMENTS_TOKEN = env_str("DEMO_PAYMENTS_TOKEN", None if PRODUCTION else "demo-token")
# How long the demo payments service waits before answering a payment it made (fault drills).
DEMO_PAYMENTS_ANSWER_DELAY_SECONDS = env_float("DEMO_PAYMENTS_ANSWER_DELAY_SECONDS", 0.0, minimum=0.0)
# Outbound requests of connectors, http hooks and agents' own model endpoints (fimone/egress.py)
# refuse loopback, link-local (cloud metadata), private, unspecified and multicast addresses, after
# DNS resolution, unless listed here: host names, IP addresses or CIDR networks, comma-separated
# ("*": everything). Development allows loopback: the demo's payments service is this server.
EGRESS_ALLOW = env_host_list("EGRESS_ALLOW", [] if PRODUCTION else ["127.0.0.0/8", "::1"])

INSTALLED_APPS = [
    "daphne",
    "fimone.apps.FimOneAdminConfig",  # django.contrib.admin with the product's site
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "rest_framework",
    "rest_framework.authtoken",
    "drf_spectacular",
    "channels",
    "django_celery_beat",
    "axes",
    "simple_history",
    "fimone.apps.FimOneConfig",
    "tenancy",
    "agents",
    "console",
    "hooks",
    "approvals",
    "channels_im",
    "demo_payments",
    "portal",
    "workflows",
    "evals",
    "mcp_gateway",
    "sso",
]

# Django's stock middleware, named by their stock paths so that `check --deploy` sees what runs;
# the ASGI handler runs each in place on the event loop when it has no I/O to do
# (fimone/middleware.py).
MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    # The portal's 404 and 500 pages for people's paths while DEBUG is on (async-capable).
    "portal.middleware.PortalErrorPages",
    # A Redis that does not answer makes a 503 with Retry-After, not a 500 (async-capable).
    "portal.middleware.StoreUnavailable",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    # Who made a configuration change, for its history (async-capable).
    "simple_history.middleware.HistoryRequestMiddleware",
    # Last: turns a sign-in refused by the lockout into its 429 page (async-capable, in place).
    "axes.middleware.AxesMiddleware",
]

# A historical version lacks its secrets (fimone.history): it is never saved back.
SIMPLE_HISTORY_REVERT_DISABLED = True

ROOT_URLCONF = "fimone.urls"
ASGI_APPLICATION = "fimone.asgi.application"
WSGI_APPLICATION = None


def _project_templates(folder: Path) -> Path:
    """The project-wide templates' folder, or a clear error at start-up if it is missing."""
    if not folder.is_dir():
        from django.core.exceptions import ImproperlyConfigured

        raise ImproperlyConfigured(
            f"The project-wide templates are missing: no folder {folder}. In a checkout it is "
            "templates/ beside manage.py; an installed package carries it beside fimone "
            "(pyproject.toml ships it as package data)."
        )
    return folder


TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        # The project-wide templates (overrides of Django's admin and registration pages, and pages
        # shared by several apps): templates/ beside the fimone package, that is the top of the
        # checkout, or site-packages where `pip install .` puts it (pyproject.toml).
        "DIRS": [_project_templates(BASE_DIR / "templates")],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
            ]
        },
    }
]

# --- data -----------------------------------------------------------------------------------------
DATABASES = {"default": env_database("DATABASE_URL", f"sqlite:///{DATA_DIR / 'db.sqlite3'}")}
if DATABASES["default"]["ENGINE"].endswith("sqlite3"):
    # Runs write from several threads in embedded mode: take the write lock when a transaction
    # begins (no lock-upgrade deadlocks), let readers proceed beside a writer (WAL), and wait for
    # the lock instead of failing.
    DATABASES["default"].setdefault("OPTIONS", {}).update(
        {
            "timeout": 20,
            "transaction_mode": "IMMEDIATE",
            "init_command": "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;",
        }
    )
    # Tests drive runs from several threads: a file (not a shared-cache memory database, whose
    # table locks ignore the busy timeout) lets them wait for each other like production does.
    # One file per test process, so concurrent test runs on one machine do not share it.
    DATABASES["default"].setdefault("TEST", {})["NAME"] = str(
        Path(tempfile.gettempdir()) / f"fimone-test-{os.getpid()}.sqlite3"
    )
elif DATABASES["default"]["ENGINE"] == "django.db.backends.postgresql":
    # A pool per process: under ASGI every request runs in a thread of its own, so per-thread
    # persistent connections cannot be reused and a new connection would cost every request.
    DATABASES["default"].setdefault("OPTIONS", {})["pool"] = {
        "min_size": env_int("DATABASE_POOL_MIN", 1, minimum=0),
        "max_size": env_int("DATABASE_POOL_MAX", 20, minimum=1),
        "timeout": env_float("DATABASE_POOL_TIMEOUT", 10.0, minimum=0.1),
    }
# The few hand-written statements of hot paths on the event loop (fimone.adb: a card click's, a
# run's step writes) are prepared per connection; false behind a proxy that cannot carry prepared
# statements (PgBouncer in transaction mode before 1.21). Django's own cursors never prepare.
DATABASE_PREPARED_STATEMENTS = env_bool("DATABASE_PREPARED_STATEMENTS", True)
# A common card click is decided on the server's event loop (channels_im.quick: no thread, no
# broker round trip; its follow-up goes through the outbox) in production mode on PostgreSQL;
# false sends every click through Django's threads as other requests go.
QUICK_CLICKS = env_bool("QUICK_CLICKS", True)
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

REDIS_URL = env_redis_url("REDIS_URL")
EMBEDDED = REDIS_URL is None

if EMBEDDED:
    # Rate counters (throttles and the connector_rate_limit hook, fimone/rates.py) are kept in the
    # process's memory: embedded mode is one process, so that is exact.
    CACHES = {"default": {"BACKEND": "django.core.cache.backends.locmem.LocMemCache"}}
    CHANNEL_LAYERS = {"default": {"BACKEND": "channels.layers.InMemoryChannelLayer"}}
else:
    # Rate counters (throttles and the connector_rate_limit hook, fimone/rates.py) live in this
    # Redis under ``fimone:rates:``, shared by every process, so a user's rate is counted once.
    CACHES = {"default": {"BACKEND": "django.core.cache.backends.redis.RedisCache", "LOCATION": REDIS_URL}}
    # Redis pub/sub: an event is published once per run group and each server process receives it
    # once and hands it to all its watching sockets, where the list-based layer made three Redis
    # round trips per event per socket (a busy server fell seconds behind). Pub/sub keeps nothing
    # for a server that is not listening: what the stream might miss is healed from the database
    # (agents/consumers.py: a gap in seqs is replayed), and inline approval waits poll as well.
    # No socket timeout: redis-py would send each command inside ``asyncio.wait_for``, which on
    # Python 3.11 drops a cancellation landing as the send completes (a closed socket's consumer
    # then never ended). A connection that died silently is found by TCP keepalive (about 25 s).
    CHANNEL_LAYERS = {
        "default": {
            "BACKEND": "channels_redis.pubsub.RedisPubSubChannelLayer",
            "CONFIG": {
                "hosts": [
                    {
                        "address": REDIS_URL,
                        "socket_timeout": None,
                        "socket_connect_timeout": 5,
                        "socket_keepalive": True,
                        "socket_keepalive_options": {
                            socket.TCP_KEEPIDLE: 10,
                            socket.TCP_KEEPINTVL: 5,
                            socket.TCP_KEEPCNT: 3,
                        },
                    }
                ],
            },
        }
    }

# --- Celery ---------------------------------------------------------------------------------------
CELERY_BROKER_URL = REDIS_URL or "memory://"
# Deployments (or a benchmark) sharing one Redis keep their tasks apart by queue name.
CELERY_TASK_DEFAULT_QUEUE = env_str("CELERY_QUEUE", "celery") or "celery"
CELERY_RESULT_BACKEND = None
# No results are kept, and the disabled backend holds no state: one instance serves every thread.
# Otherwise Celery builds one per thread, and Django runs each request on a new thread: that cost
# every task sent from a request (a card click's follow-up) more than sending it.
CELERY_RESULT_BACKEND_THREAD_SAFE = True
CELERY_TASK_ALWAYS_EAGER = EMBEDDED
CELERY_TASK_EAGER_PROPAGATES = True
CELERY_TASK_ACKS_LATE = True
CELERY_TASK_REJECT_ON_WORKER_LOST = True
CELERY_WORKER_PREFETCH_MULTIPLIER = 1
CELERY_BEAT_SCHEDULER = "django_celery_beat.schedulers:DatabaseScheduler"
CELERY_TIMEZONE = "UTC"

# Where agent runs execute: in the server process (embedded) or on Celery workers.
# Young-generation threshold of the garbage collector in servers and workers (fimone/gc_tuning.py):
# larger means rarer full collections, which stop the process; 0 keeps CPython's default (700).
GC_THRESHOLD = env_int("GC_THRESHOLD", 50_000, minimum=0)
RUN_EXECUTOR = env_choice("RUN_EXECUTOR", "embedded" if EMBEDDED else "celery", ("embedded", "celery"))
RUN_LEASE_SECONDS = env_int("RUN_LEASE_SECONDS", 60, minimum=5)
# Whether a tool's outcome waits for the database's disk before the run goes on (PostgreSQL). The
# call's start always does; a lost outcome reads back as "outcome unknown" (agents/engine/loop_writes.py).
RUN_OUTCOMES_WAIT_FOR_DISK = env_bool("RUN_OUTCOMES_WAIT_FOR_DISK", False)
# How many agents deep call_agent may delegate (the first delegate is depth 1).
AGENT_DELEGATION_MAX_DEPTH = env_int("AGENT_DELEGATION_MAX_DEPTH", 3, minimum=1)
# The most steps a DAG agent's plan may have.
DAG_MAX_STEPS = env_int("DAG_MAX_STEPS", 8, minimum=1)
# How approval cards reach IM platforms: Celery tasks, or (embedded) a small background pool.
CHANNEL_DELIVERY = env_choice(
    "CHANNEL_DELIVERY", "background" if EMBEDDED else "celery", ("background", "celery")
)
# Approvals: the safety-net poll of an inline waiter, and the expiry sweep's period.
APPROVAL_POLL_SECONDS = env_float("APPROVAL_POLL_SECONDS", 5.0, minimum=0.05)
APPROVAL_SWEEP_SECONDS = env_int("APPROVAL_SWEEP_SECONDS", 15, minimum=1)
# Modules whose hook classes (``@register_hook``) agents may declare, beside the built-ins.
HOOK_MODULES = env_list("HOOK_MODULES", [])
# Command hooks: the working directory (and HOME) they run in, and the most output they may write.
HOOK_COMMAND_CWD = env_str("HOOK_COMMAND_CWD", tempfile.gettempdir())
HOOK_COMMAND_MAX_OUTPUT = env_int("HOOK_COMMAND_MAX_OUTPUT", 1_000_000, minimum=1_024)
# http hooks: the most reply they may send; the header carrying the body's HMAC-SHA256.
HOOK_HTTP_MAX_REPLY = env_int("HOOK_HTTP_MAX_REPLY", 1_000_000, minimum=1_024)
# python hooks: dotted-path prefixes they may name (empty: any module importable by the server).
HOOK_PYTHON_PREFIXES = env_list("HOOK_PYTHON_PREFIXES", [])
# Declared python hooks run in hook threads (hooks/kinds/offloop.py): at most this many at once,
# this many more written off past their timeout, and this many written off per hook before its
# next calls fail closed without starting.
HOOK_PYTHON_THREADS = env_int("HOOK_PYTHON_THREADS", 32, minimum=1)
HOOK_PYTHON_RUNAWAYS = env_int("HOOK_PYTHON_RUNAWAYS", 32, minimum=0)
HOOK_PYTHON_RUNAWAYS_PER_HOOK = env_int("HOOK_PYTHON_RUNAWAYS_PER_HOOK", 4, minimum=1)

# --- security -------------------------------------------------------------------------------------
# Secrets stored in the database (connector credentials, channel secrets) are encrypted with this
# key; in development it is derived from SECRET_KEY.
FIELD_ENCRYPTION_KEY = (
    env_required("FIELD_ENCRYPTION_KEY", "when FIMONE_ENV=production (a Fernet key)")
    if PRODUCTION
    else env_str("FIELD_ENCRYPTION_KEY")
)
# The audit chains (``fimone.audit_chain``) are HMAC-SHA256 links under this key, kept outside the
# database: whoever can write the database but not read this cannot recompute them. In development
# it is derived from SECRET_KEY. Keys retired by a rotation still verify the links they wrote.
AUDIT_CHAIN_KEY = env_secret(
    "AUDIT_CHAIN_KEY",
    required="when FIMONE_ENV=production (a random secret, 32 characters or more)" if PRODUCTION else None,
)
AUDIT_CHAIN_RETIRED_KEYS = env_secret_list("AUDIT_CHAIN_RETIRED_KEYS")
# ``/metrics`` (the approval queue for Prometheus, approvals/metrics.py) answers a scraper sending
# ``Authorization: Bearer <METRICS_TOKEN>``, and signed-in superusers; unset, only the latter.
METRICS_TOKEN = env_secret("METRICS_TOKEN")
# OpenTelemetry (fimone/telemetry.py) is configured by the standard OTEL_* variables; this one opts
# in to tool arguments on tool-call spans (credentials redacted). Off: spans name, never show.
TELEMETRY_TOOL_ARGUMENTS = env_bool("TELEMETRY_TOOL_ARGUMENTS", False)
# Where ``manage.py audit_anchor`` posts the signed heads of the audit chains (a write-once store).
AUDIT_ANCHOR_URL = env_http_url("AUDIT_ANCHOR_URL")
SESSION_COOKIE_HTTPONLY = True
SESSION_COOKIE_SECURE = env_bool("SESSION_COOKIE_SECURE", PRODUCTION)
CSRF_COOKIE_SECURE = env_bool("CSRF_COOKIE_SECURE", PRODUCTION)
SECURE_CONTENT_TYPE_NOSNIFF = True
X_FRAME_OPTIONS = "DENY"
# HTTPS in production: plain HTTP is redirected (except the health probe, which load balancers
# usually send over plain HTTP), and browsers are told to use HTTPS only for a year.
SECURE_SSL_REDIRECT = env_bool("SECURE_SSL_REDIRECT", PRODUCTION)
SECURE_REDIRECT_EXEMPT = [r"^healthz$", r"^readyz$"]
SECURE_HSTS_SECONDS = env_int("SECURE_HSTS_SECONDS", 31_536_000 if PRODUCTION else 0, minimum=0)
SECURE_HSTS_INCLUDE_SUBDOMAINS = env_bool("SECURE_HSTS_INCLUDE_SUBDOMAINS", PRODUCTION)
SECURE_HSTS_PRELOAD = env_bool("SECURE_HSTS_PRELOAD", False)
# A request counts as HTTPS when this header (set by the TLS-terminating proxy, which must strip
# it from what clients send) has this value, e.g. "X-Forwarded-Proto: https". Unset, no header
# is trusted: behind such a proxy it must be set, or SECURE_SSL_REDIRECT redirects forever.
SECURE_PROXY_SSL_HEADER = env_header_value("SECURE_PROXY_SSL_HEADER")
SILENCED_SYSTEM_CHECKS: list[str] = []
if not SECURE_HSTS_PRELOAD:
    # Preloading is an operator's explicit, hard-to-undo choice (browsers ship the domain as
    # HTTPS-only), so it is off unless SECURE_HSTS_PRELOAD=true; Django's reminder is not a defect.
    SILENCED_SYSTEM_CHECKS.append("security.W021")

# --- sign-in lockout (django-axes) and request rates ---------------------------------------------
# A sign-in is refused (429, even with the right password) after LOGIN_FAILURE_LIMIT failures for
# one account, or from one address (but for accounts that signed in from that address before: a
# shared NAT's colleagues are not locked out by a stranger, fimone/lockout.py), until
# LOGIN_COOLOFF_MINUTES after the last failure; failures during a lockout extend it. Both login
# pages (/approvals/login/, /admin/login/) go through it.
AUTHENTICATION_BACKENDS = [
    "axes.backends.AxesStandaloneBackend",
    # Refuses a password where the organisation signs in only through its identity provider (its
    # admins keep a break-glass one); then Django's passwords; then OpenID Connect (sso/).
    "sso.backends.PasswordPolicyBackend",
    "django.contrib.auth.backends.ModelBackend",
    "sso.backends.OidcBackend",
]
# --- single sign-on (OpenID Connect; providers are configured per organisation in the admin) ----
SSO_HTTP_TIMEOUT = env_float("SSO_HTTP_TIMEOUT", 10.0, minimum=1.0)
# How long a provider's discovery document and keys are cached (a new key id re-fetches at once).
SSO_METADATA_SECONDS = env_int("SSO_METADATA_SECONDS", 3600, minimum=0)
# Clock difference tolerated between this server and the provider when checking a token's times.
SSO_CLOCK_SKEW_SECONDS = env_int("SSO_CLOCK_SKEW_SECONDS", 30, minimum=0)
# One provider for the whole server, from the environment (`manage.py sso_provider_from_env`, run by
# `make prod`): people it signs in join SSO_ORGANIZATION. Unset SSO_ISSUER: none.
SSO_ISSUER = env_http_url("SSO_ISSUER")
SSO_FROM_ENV: dict[str, Any] = (
    {
        "issuer": SSO_ISSUER,
        "client_id": env_required("SSO_CLIENT_ID", "when SSO_ISSUER is set"),
        "client_secret": env_secret("SSO_CLIENT_SECRET", required="when SSO_ISSUER is set", minimum_length=8),
        "organization": env_required("SSO_ORGANIZATION", "when SSO_ISSUER is set (the organisation's name)"),
        "name": env_str("SSO_NAME", "single sign-on"),
        "slug": env_str("SSO_SLUG", "sso"),
        "scopes": env_str("SSO_SCOPES", "openid email profile"),
        "groups_claim": env_str("SSO_GROUPS_CLAIM", "groups"),
        # "group=role" pairs separated by commas: SSO_GROUP_ROLES="fim-approvers=approver,fim-admins=admin"
        "group_roles": "\n".join(env_list("SSO_GROUP_ROLES", [])),
        "allowed_domains": " ".join(env_list("SSO_ALLOWED_DOMAINS", [])),
        "passwords_allowed": env_bool("SSO_PASSWORDS_ALLOWED", True),
    }
    if SSO_ISSUER
    else {}
)
AXES_FAILURE_LIMIT = env_int("LOGIN_FAILURE_LIMIT", 10, minimum=1)
AXES_COOLOFF_TIME = dt.timedelta(minutes=env_int("LOGIN_COOLOFF_MINUTES", 15, minimum=1))
AXES_LOCKOUT_PARAMETERS = "fimone.lockout.lockout_parameters"  # each counted on its own
AXES_LOCKOUT_CALLABLE = "approvals.views.login_locked_out"
AXES_CLIENT_IP_CALLABLE = "fimone.throttling.client_ip"
# A success does not wipe the failures: with it, someone owning one account could reset the count
# of their address between guesses at others.
AXES_RESET_ON_SUCCESS = False
# The client's address is the socket's peer, unless a trusted proxy in front sets a header with it
# (e.g. X-Real-IP, or X-Forwarded-For: its CLIENT_IP_PROXY_COUNT-th entry from the right is used).
# Set it only behind such a proxy: otherwise any client could claim any address.
CLIENT_IP_HEADER = env_header("CLIENT_IP_HEADER")
CLIENT_IP_PROXY_COUNT = env_int("CLIENT_IP_PROXY_COUNT", 1, minimum=1)
# Per-user request rates of the API (and the web inbox's decisions), e.g. "30/min": each counted
# over a sliding window of that length (fimone/rates.py).
RUN_START_RATE = env_rate("RUN_START_RATE", "30/min")
DECISION_RATE = env_rate("DECISION_RATE", "60/min")

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
]
LOGIN_URL = "approvals:login"

# --- e-mail (invitation links) ---------------------------------------------------------------------
# Development prints each mail on the server's console; production sends none unless EMAIL_BACKEND
# names a backend (django.core.mail.backends.smtp.EmailBackend with the EMAIL_* below). Whatever
# it sends, the admin also shows an invitation's link once to whoever made it.
EMAIL_BACKEND = env_str(
    "EMAIL_BACKEND", "" if PRODUCTION else "django.core.mail.backends.console.EmailBackend"
)
EMAIL_HOST = env_str("EMAIL_HOST", "localhost")
EMAIL_PORT = env_int("EMAIL_PORT", 25, minimum=1)
EMAIL_HOST_USER = env_str("EMAIL_HOST_USER", "")
EMAIL_HOST_PASSWORD = env_str("EMAIL_HOST_PASSWORD", "")
EMAIL_USE_TLS = env_bool("EMAIL_USE_TLS", False)
EMAIL_TIMEOUT = env_int("EMAIL_TIMEOUT", 10, minimum=1)
DEFAULT_FROM_EMAIL = env_str("DEFAULT_FROM_EMAIL", "FIM One hooks <noreply@localhost>")

# --- API ------------------------------------------------------------------------------------------
REST_FRAMEWORK = {
    "DEFAULT_AUTHENTICATION_CLASSES": [
        "rest_framework.authentication.SessionAuthentication",
        "rest_framework.authentication.TokenAuthentication",
    ],
    "DEFAULT_PERMISSION_CLASSES": ["rest_framework.permissions.IsAuthenticated"],
    # A JSON body DRF's own parser would turn into a 500 (nested too deep, unknown charset) is a 400.
    "DEFAULT_PARSER_CLASSES": [
        "fimone.parsers.JSONParser",
        "rest_framework.parsers.FormParser",
        "rest_framework.parsers.MultiPartParser",
    ],
    "DEFAULT_SCHEMA_CLASS": "drf_spectacular.openapi.AutoSchema",
    "DEFAULT_PAGINATION_CLASS": None,
    "DEFAULT_THROTTLE_RATES": {"run_start": RUN_START_RATE, "decision": DECISION_RATE},
}
SPECTACULAR_SETTINGS = {
    "TITLE": "FIM One hooks API",
    "DESCRIPTION": "Agents whose tool calls pass through hooks and human approvals.",
    "VERSION": "1.0.0",
    "SERVE_INCLUDE_SCHEMA": False,
    "ENUM_NAME_OVERRIDES": {"RunStatusEnum": "agents.models.RunStatus"},
}

# --- i18n, static, logging ------------------------------------------------------------------------
LANGUAGE_CODE = "en-us"
TIME_ZONE = env_str("TIME_ZONE", "UTC")
USE_I18N = True
USE_TZ = True
STATIC_URL = "static/"
# Where collectstatic gathers the static files and the web processes serve them from (fimone/static.py).
STATIC_ROOT = Path(env_str("STATIC_ROOT") or DATA_DIR / "staticfiles")

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "formatters": {"plain": {"format": "%(asctime)s %(levelname)s %(name)s: %(message)s"}},
    "handlers": {"console": {"class": "logging.StreamHandler", "formatter": "plain"}},
    # django-axes announces itself at every start-up; its sign-in failures and lockouts still log.
    # The MCP SDK's HTTP client logs every request it makes at INFO: one line per tool call.
    "loggers": {"axes.apps": {"level": "WARNING"}, "httpx2": {"level": "WARNING"}},
    "root": {
        "handlers": ["console"],
        "level": env_choice("LOG_LEVEL", "INFO", ("DEBUG", "INFO", "WARNING", "ERROR")),
    },
}

"""Production mode is checked and served as `check --deploy` says: the security middleware
really run (their in-place subclasses under ASGI), HTTPS is enforced and advertised (HSTS), and the
demo service is not mounted."""

from __future__ import annotations

import base64
import os
import secrets
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from django.conf import settings
from django.test import Client

from fimone import middleware

pytestmark = pytest.mark.once  # subprocesses and pure code: one stack is enough (pyproject.toml)

ROOT = Path(__file__).resolve().parents[2]


def production_env(**extra: str) -> dict[str, str]:
    """Exactly the variables production requires (plus PATH), with good values."""
    return {
        "PATH": os.environ["PATH"],
        "DJANGO_SETTINGS_MODULE": "fimone.settings",
        "FIMONE_ENV": "production",
        "SECRET_KEY": secrets.token_urlsafe(50),
        "ALLOWED_HOSTS": "fimone.example.com,testserver",  # the test client's host
        "SITE_URL": "https://fimone.example.com",
        "FIELD_ENCRYPTION_KEY": base64.urlsafe_b64encode(os.urandom(32)).decode(),
        "AUDIT_CHAIN_KEY": secrets.token_urlsafe(32),
        **extra,
    }


def run(args: list[str], env: dict[str, str]) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, *args], cwd=ROOT, env=env, capture_output=True, text=True, timeout=90, check=False
    )


def run_script(script: str, env: dict[str, str]) -> subprocess.CompletedProcess:
    return run(["-c", "import django; django.setup()\n" + textwrap.dedent(script)], env)


def test_check_deploy_in_production_prints_no_warning_and_exits_zero() -> None:
    proc = run(["manage.py", "check", "--deploy", "--fail-level", "WARNING"], production_env())

    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "System check identified no issues" in proc.stdout
    assert "WARNING" not in proc.stdout + proc.stderr and proc.stderr == ""


@pytest.mark.parametrize(
    ("removed", "warning"),
    [
        ("django.middleware.security.SecurityMiddleware", "security.W001"),
        ("django.middleware.clickjacking.XFrameOptionsMiddleware", "security.W002"),
        ("django.middleware.csrf.CsrfViewMiddleware", "security.W003"),
    ],
)
def test_check_deploy_warns_when_a_security_middleware_is_removed(removed: str, warning: str) -> None:
    proc = run_script(
        f"""
        from django.conf import settings
        from django.core.management import call_command
        settings.MIDDLEWARE.remove({removed!r})
        call_command("check", "--deploy", "--fail-level", "WARNING")
        """,
        production_env(),
    )

    assert proc.returncode != 0
    assert warning in proc.stderr


def test_check_deploy_runs_djangos_hsts_checks_for_real() -> None:
    proc = run(
        ["manage.py", "check", "--deploy", "--fail-level", "WARNING"],
        production_env(SECURE_HSTS_SECONDS="0", SECURE_SSL_REDIRECT="false"),
    )

    assert proc.returncode != 0
    assert "security.W004" in proc.stderr and "security.W008" in proc.stderr


PRODUCTION_REQUESTS = """
    import asyncio, json
    from tests.fimone.asgi_kit import InPlaceAsyncClient

    async def main():
        client = InPlaceAsyncClient()
        health = await client.get("/healthz", secure=True)
        plain = await client.get("/approvals/login/")
        probe = await client.get("/healthz")
        demo = await client.get("/demo/", secure=True)
        token = {"X-Demo-Token": "demo-token"}
        demo_api = await client.get("/demo/api/purchases", secure=True, headers=token)
        from django.conf import settings
        print(json.dumps({
            "hsts": health.headers.get("Strict-Transport-Security"),
            "plain": [plain.status_code, plain.headers.get("Location")],
            "probe": probe.status_code,
            "demo": [demo.status_code, demo_api.status_code],
            "token": settings.DEMO_PAYMENTS_TOKEN,
        }))

    asyncio.run(main())
"""


def test_production_sends_hsts_redirects_plain_http_and_does_not_mount_the_demo() -> None:
    import json

    proc = run_script(PRODUCTION_REQUESTS, production_env())

    assert proc.returncode == 0, proc.stderr
    answers = json.loads(proc.stdout.strip().splitlines()[-1])
    assert answers["hsts"] == "max-age=31536000; includeSubDomains"
    assert answers["plain"] == [301, "https://testserver/approvals/login/"]
    assert answers["probe"] == 200, "the health probe is served over plain HTTP"
    assert answers["demo"] == [404, 404]
    assert answers["token"] is None, "no well-known demo token in production"


def test_a_request_is_https_only_through_the_configured_proxy_header() -> None:
    script = """
        import asyncio, json
        from tests.fimone.asgi_kit import InPlaceAsyncClient

        async def main():
            client = InPlaceAsyncClient()
            forwarded = await client.get("/healthz", headers={"X-Forwarded-Proto": "https"})
            spoofed = await client.get("/approvals/login/", headers={"X-Forwarded-Proto": "https"})
            print(json.dumps([forwarded.headers.get("Strict-Transport-Security"), spoofed.status_code]))

        asyncio.run(main())
    """
    trusted = run_script(script, production_env(SECURE_PROXY_SSL_HEADER="X-Forwarded-Proto: https"))
    untrusted = run_script(script, production_env())

    assert trusted.returncode == 0 and untrusted.returncode == 0, trusted.stderr + untrusted.stderr
    assert trusted.stdout.strip().endswith('["max-age=31536000; includeSubDomains", 200]')
    assert untrusted.stdout.strip().endswith("[null, 301]"), "the header is not trusted unless configured"


@pytest.mark.django_db
def test_the_demo_service_is_served_in_development() -> None:
    assert settings.FIMONE_ENV == "development"

    assert Client().get("/demo/").status_code == 200
    assert Client().get("/demo/api/purchases", headers={"X-Demo-Token": "demo-token"}).status_code == 200


def test_the_asgi_application_runs_the_in_place_subclasses_of_the_configured_middleware() -> None:
    from fimone.asgi import django_asgi_app

    assert "django.middleware.csrf.CsrfViewMiddleware" in settings.MIDDLEWARE
    assert not any(path.startswith("fimone.") for path in settings.MIDDLEWARE), "restored after loading"
    [process_view] = django_asgi_app._view_middleware
    assert type(process_view.__self__) is middleware.CsrfViewMiddleware
    assert set(middleware.in_place(settings.MIDDLEWARE)) >= set(middleware.IN_PLACE.values())

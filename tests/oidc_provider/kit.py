"""A real OpenID provider for the single sign-on tests: the Django project in this folder
(django-oauth-toolkit 3.4.1's OIDC provider) run by ``python -m django runserver --noreload`` in a
process of its own, with a SQLite database, RSA keys and a log in a temporary folder the test hands
over. Its cookies are named ``oidc_provider_sessionid``/``oidc_provider_csrftoken``, so a browser
keeps them apart from a relying party's on another port of 127.0.0.1.

    provider = Provider(tmp_path_factory.mktemp("idp"))
    with provider:
        provider.set_client("portal", "s3cret", ["http://127.0.0.1:8000/oidc/callback/"])
        provider.set_user("ada", "pw", "ada@example.com", ["staff"])
        tokens = provider.token_for("portal", "s3cret", "http://127.0.0.1:8000/oidc/callback/",
                                    "ada", "pw", nonce="n-1")

The issuer is whatever DOT derives from the request it answers: ``http://<Host header>/o``. So the
same process, keys and database answer as two issuers: ``Provider.issuer``
(``http://127.0.0.1:<port>/o``) for requests made to 127.0.0.1, and ``Provider.other_issuer``
(``http://localhost:<port>/o``) for requests made to localhost. An ID token's ``iss`` is that of
the host its *token request* went to (the back channel), its signature is by the same active key:
``token_for(..., issuer_host="localhost")`` is a real, validly signed token from "another issuer"
for a relying party configured with ``issuer``. The discovery document and RP-initiated logout
(which checks the ``id_token_hint``'s ``iss``) follow the same rule.

Claims (tests/oidc_provider/validator.py): ``sub`` (the user's pk), plus ``email`` and
``email_verified`` under scope ``email``, ``name`` and ``preferred_username`` under ``profile``,
``groups`` (a sorted list of Django group names) under ``groups``; in the ID token and in userinfo
alike. ``exp - iat`` of an ID token is exactly ``id_token_seconds``.

Every client must use PKCE (S256; DOT's PKCE_REQUIRED): mozilla-django-oidc only sends it with
``OIDC_USE_PKCE = True``, and asks for ``groups`` only if ``OIDC_RP_SCOPES`` names it.
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
import secrets
import shutil
import socket
import subprocess
import sys
import time
from collections.abc import Iterable, Sequence
from html.parser import HTMLParser
from pathlib import Path
from types import TracebackType
from typing import IO, Any
from urllib.parse import parse_qs, urlencode, urljoin, urlsplit

import httpx
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa

ROOT = Path(__file__).resolve().parents[2]  # the repository root: cwd of the provider's process
SETTINGS_MODULE = "tests.oidc_provider.settings"
START_SECONDS = 60.0  # a bound on waiting for the server to answer, never a measured delay
STOP_SECONDS = 10.0
MIGRATE_SECONDS = 120.0
REQUEST_SECONDS = 15.0
MAX_HOPS = 10  # redirects followed within the provider by login_and_authorize
DEFAULT_SCOPE = "openid email profile groups"

# A migrated, empty database, copied for every later provider of this test process (migrating
# takes seconds, copying a SQLite file does not).
_migrated_template: Path | None = None


def pkce_challenge(verifier: str) -> str:
    """The S256 PKCE ``code_challenge`` of ``verifier``."""
    return _b64(hashlib.sha256(verifier.encode("ascii")).digest())


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listened on a moment ago."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def generate_key() -> str:
    """A new RSA 2048 private key, PEM (PKCS#8, unencrypted)."""
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    return key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    ).decode("ascii")


def key_id(key_pem: str) -> str:
    """The ``kid`` DOT gives the key ``key_pem`` (private, PEM) in its JWKS and ID token headers:
    its RFC 7638 JWK thumbprint (SHA-256, base64url), computed here independently of DOT."""
    private = serialization.load_pem_private_key(key_pem.encode("ascii"), password=None)
    if not isinstance(private, rsa.RSAPrivateKey):
        raise TypeError("not an RSA private key")
    numbers = private.public_key().public_numbers()
    members = {"e": _b64_uint(numbers.e), "kty": "RSA", "n": _b64_uint(numbers.n)}
    canonical = json.dumps(members, separators=(",", ":"), sort_keys=True).encode("ascii")
    return _b64(hashlib.sha256(canonical).digest())


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


def _b64_uint(value: int) -> str:
    return _b64(value.to_bytes((value.bit_length() + 7) // 8, "big"))


class ProviderError(RuntimeError):
    """The provider did not start, or answered something a kit call cannot go on from."""


class Provider:
    """The test OpenID provider on ``127.0.0.1:<port>`` (also reachable as ``localhost:<port>``).

    ``tmp_dir`` holds its database, keys and log (``provider.log``); it must outlive the provider.
    Every ID token lives ``id_token_seconds``; with ``publish_active_key`` off the JWKS leaves out
    the key that signs them (a provider vouching with a key it does not publish). ``start()``
    migrates the database on first use and returns once the server answers; ``stop()`` ends the
    process; ``restart()`` keeps the port and the database (users, clients, grants), so it is how a
    test rotates the signing key. Used as a context manager it starts on entry and stops on exit.
    """

    def __init__(self, tmp_dir: Path, id_token_seconds: int = 3600) -> None:
        self.tmp_dir = Path(tmp_dir)
        self.tmp_dir.mkdir(parents=True, exist_ok=True)
        self.id_token_seconds = id_token_seconds
        self.publish_active_key = True
        self.port = free_port()
        self.key_pem: str = generate_key()
        self.old_key_pems: list[str] = []
        self.control_token = secrets.token_urlsafe(32)
        self.db_path = self.tmp_dir / "provider.sqlite3"
        self.log_path = self.tmp_dir / "provider.log"
        self._process: subprocess.Popen[bytes] | None = None
        self._log: IO[bytes] | None = None
        self._migrated = False
        self._has_run = False

    # -- addresses ---------------------------------------------------------------------------

    @property
    def issuer(self) -> str:
        """The issuer of tokens obtained through 127.0.0.1 (the one a relying party is given)."""
        return f"http://127.0.0.1:{self.port}/o"

    @property
    def other_issuer(self) -> str:
        """The issuer of tokens obtained through localhost: same keys, another ``iss``."""
        return f"http://localhost:{self.port}/o"

    def url(self, path: str, *, host: str = "127.0.0.1") -> str:
        """``path`` (starting with ``/``) on this provider, through ``host``."""
        return f"http://{host}:{self.port}{path}"

    @property
    def discovery_url(self) -> str:
        return f"{self.issuer}/.well-known/openid-configuration"

    @property
    def authorization_endpoint(self) -> str:
        return f"{self.issuer}/authorize/"

    @property
    def token_endpoint(self) -> str:
        return f"{self.issuer}/token/"

    @property
    def userinfo_endpoint(self) -> str:
        return f"{self.issuer}/userinfo/"

    @property
    def jwks_uri(self) -> str:
        return f"{self.issuer}/.well-known/jwks.json"

    @property
    def end_session_endpoint(self) -> str:
        return f"{self.issuer}/logout/"

    @property
    def running(self) -> bool:
        return self._process is not None and self._process.poll() is None

    # -- lifecycle ---------------------------------------------------------------------------

    def __enter__(self) -> Provider:
        self.start()
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()

    def start(self) -> None:
        """Start the server (migrating its database first, once) and wait until it answers
        ``/control/ping``. Raises ``ProviderError`` with the log's tail if it does not within
        ``START_SECONDS``. Before its first run a provider whose port was taken meanwhile moves to
        another free port; afterwards the port never changes."""
        if self.running:
            raise ProviderError("the provider is already running")
        self._migrate()
        self._write_keys()
        attempts = 1 if self._has_run else 3
        for attempt in range(attempts):
            try:
                self._spawn_and_wait()
                self._has_run = True
                return
            except ProviderError:
                port_taken = "already in use" in self.log_tail()
                if attempt + 1 < attempts and port_taken:
                    self.port = free_port()
                    continue
                raise

    def stop(self) -> None:
        """End the server: terminate, then kill if it has not ended within ``STOP_SECONDS``.
        Does nothing if it is not running."""
        process, self._process = self._process, None
        if process is not None and process.poll() is None:
            process.terminate()
            try:
                process.wait(timeout=STOP_SECONDS)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait(timeout=STOP_SECONDS)
        if self._log is not None:
            self._log.close()
            self._log = None

    def restart(self, *, key_pem: str | None = None, old_key_pems: list[str] | None = None) -> None:
        """Stop and start again on the same port and database. ``key_pem`` becomes the active
        signing key if given; ``old_key_pems`` replaces the inactive keys the JWKS publishes if
        given (``[]``: none). What is not given stays as it was: rotating with ``key_pem`` alone
        does not keep the former key published; pass it in ``old_key_pems`` for that."""
        self.stop()
        if key_pem is not None:
            self.key_pem = key_pem
        if old_key_pems is not None:
            self.old_key_pems = list(old_key_pems)
        self.start()

    def log_tail(self, chars: int = 4000) -> str:
        """The end of the server's output (stdout and stderr), for error messages."""
        try:
            return self.log_path.read_text(encoding="utf-8", errors="replace")[-chars:]
        except FileNotFoundError:
            return ""

    def _env(self) -> dict[str, str]:
        keys = self.tmp_dir / "keys"
        old_files = [str(keys / f"old-{index}.pem") for index in range(len(self.old_key_pems))]
        return {
            **os.environ,
            "DJANGO_SETTINGS_MODULE": SETTINGS_MODULE,
            "OIDC_PROVIDER_DB": str(self.db_path),
            "OIDC_PROVIDER_KEY": str(keys / "active.pem"),
            "OIDC_PROVIDER_OLD_KEYS": os.pathsep.join(old_files),
            "OIDC_PROVIDER_ID_TOKEN_SECONDS": str(self.id_token_seconds),
            "OIDC_PROVIDER_CONTROL_TOKEN": self.control_token,
            "OIDC_PROVIDER_PUBLISH_ACTIVE_KEY": "1" if self.publish_active_key else "0",
            "PYTHONUNBUFFERED": "1",
        }

    def _write_keys(self) -> None:
        keys = self.tmp_dir / "keys"
        keys.mkdir(exist_ok=True)
        for stale in keys.glob("*.pem"):
            stale.unlink()
        (keys / "active.pem").write_text(self.key_pem, encoding="ascii")
        for index, pem in enumerate(self.old_key_pems):
            (keys / f"old-{index}.pem").write_text(pem, encoding="ascii")

    def _migrate(self) -> None:
        global _migrated_template
        if self._migrated:
            return
        self._write_keys()  # the settings read the key files, even for migrate
        if not self.db_path.exists() and _migrated_template is not None and _migrated_template.exists():
            shutil.copyfile(_migrated_template, self.db_path)
        else:
            result = subprocess.run(
                [sys.executable, "-m", "django", "migrate", "--noinput", "--verbosity", "0"],
                cwd=ROOT,
                env=self._env(),
                capture_output=True,
                text=True,
                timeout=MIGRATE_SECONDS,
                check=False,
            )
            if result.returncode != 0:
                raise ProviderError(f"migrating the provider's database failed:\n{result.stderr[-4000:]}")
            if _migrated_template is None:
                template = self.tmp_dir / "migrated-template.sqlite3"
                shutil.copyfile(self.db_path, template)
                _migrated_template = template
        self._migrated = True

    def _spawn_and_wait(self) -> None:
        self._log = self.log_path.open("ab")
        self._log.write(f"\n=== starting on 127.0.0.1:{self.port} at {time.ctime()} ===\n".encode())
        self._log.flush()
        self._process = subprocess.Popen(
            [sys.executable, "-m", "django", "runserver", f"127.0.0.1:{self.port}", "--noreload"],
            cwd=ROOT,
            env=self._env(),
            stdin=subprocess.DEVNULL,
            stdout=self._log,
            stderr=subprocess.STDOUT,
        )
        deadline = time.monotonic() + START_SECONDS
        with httpx.Client(timeout=1.0) as http:
            while True:
                if self._process.poll() is not None:
                    self.stop()
                    raise ProviderError(f"the OpenID provider exited at start:\n{self.log_tail()}")
                if self._answers_ping(http):
                    return
                if time.monotonic() > deadline:
                    self.stop()
                    raise ProviderError(
                        f"the OpenID provider did not answer in {START_SECONDS:.0f} s:\n{self.log_tail()}"
                    )
                time.sleep(0.05)

    def _answers_ping(self, http: httpx.Client) -> bool:
        """Whether *this* provider answers: the ping says whether our control token matched, so
        another provider that happens to hold the port (before ours fails to bind) is not taken
        for ours."""
        try:
            response = http.get(self.url("/control/ping"), headers={"X-Control-Token": self.control_token})
        except httpx.TransportError:
            return False
        return response.text == "ok" and response.headers.get("X-Control-Authorised") == "yes"

    # -- control -----------------------------------------------------------------------------

    def _control(self, path: str, body: dict[str, Any]) -> dict[str, Any]:
        response = httpx.post(
            self.url(path),
            json=body,
            headers={"X-Control-Token": self.control_token},
            timeout=REQUEST_SECONDS,
        )
        if response.status_code != 200:
            raise ProviderError(f"POST {path} answered {response.status_code}: {response.text[:2000]}")
        result: dict[str, Any] = response.json()
        return result

    def set_user(
        self,
        username: str,
        password: str,
        email: str,
        groups: Iterable[str],
        first_name: str = "",
        last_name: str = "",
    ) -> int:
        """Create or update the user ``username`` with this password, e-mail and names, in
        exactly these groups (created as needed). Returns the user's id, which is its ``sub``."""
        body = {
            "username": username,
            "password": password,
            "email": email,
            "first_name": first_name,
            "last_name": last_name,
            "groups": list(groups),
        }
        return int(self._control("/control/users/", body)["id"])

    def set_client(
        self,
        client_id: str,
        client_secret: str,
        redirect_uris: Sequence[str],
        post_logout_redirect_uris: Sequence[str] = (),
    ) -> None:
        """Create or update the application ``client_id``: confidential, authorization code grant
        (PKCE required, as for every client here), ID tokens signed RS256, no consent page,
        exactly these redirect URIs. ``client_secret`` is what a token request must send
        (client_secret_post or client_secret_basic); the provider stores it hashed."""
        self._control(
            "/control/clients/",
            {
                "client_id": client_id,
                "client_secret": client_secret,
                "redirect_uris": list(redirect_uris),
                "post_logout_redirect_uris": list(post_logout_redirect_uris),
            },
        )

    # -- reading -----------------------------------------------------------------------------

    def discovery(self, *, host: str = "127.0.0.1") -> dict[str, Any]:
        """The discovery document as served through ``host``."""
        return self._get_json(self.url("/o/.well-known/openid-configuration", host=host))

    def jwks(self, *, host: str = "127.0.0.1") -> dict[str, Any]:
        """The JWKS: the active key first, then the inactive ones, each with its ``kid``."""
        return self._get_json(self.url("/o/.well-known/jwks.json", host=host))

    def _get_json(self, url: str) -> dict[str, Any]:
        response = httpx.get(url, timeout=REQUEST_SECONDS)
        if response.status_code != 200:
            raise ProviderError(f"GET {url} answered {response.status_code}: {response.text[:2000]}")
        result: dict[str, Any] = response.json()
        return result

    # -- flows -------------------------------------------------------------------------------

    def _is_own(self, url: str) -> bool:
        parts = urlsplit(url)
        return (
            parts.scheme == "http"
            and parts.hostname in {"127.0.0.1", "localhost"}
            and parts.port == self.port
        )

    def login_and_authorize(
        self, url: str, username: str, password: str, *, client: httpx.Client | None = None
    ) -> str:
        """Sign ``username`` in as a browser would and return where the provider sends it back.

        ``url`` is the authorization URL a relying party redirected to (through 127.0.0.1 or
        localhost). Redirects are followed while they stay on this provider; the sign-in form is
        filled in (with its CSRF token and ``next``) when it shows. The first Location that leaves
        the provider is returned, not followed: the relying party's callback with ``code`` and
        ``state`` (or with ``error`` when the provider refuses the request after sign-in). The
        provider's session lives in ``client``'s cookies: a second call with the same client skips
        the form. Raises ``ProviderError`` if the credentials are refused, a page other than the
        sign-in form shows, or the redirects do not leave the provider.
        """
        if not self._is_own(url):
            raise ProviderError(f"not this provider's URL: {url}")
        own_client = client is None
        http = httpx.Client(timeout=REQUEST_SECONDS) if client is None else client
        try:
            response = http.get(url, follow_redirects=False)
            signed_in = False
            for _ in range(MAX_HOPS):
                if response.is_redirect:
                    target = urljoin(str(response.url), response.headers["location"])
                    if not self._is_own(target):
                        return target
                    response = http.get(target, follow_redirects=False)
                    continue
                form = _login_form(response)
                if response.status_code == 200 and form is not None:
                    if signed_in:
                        raise ProviderError(f"the provider refused the credentials of {username!r}")
                    signed_in = True
                    action, fields = form
                    fields.update(username=username, password=password)
                    response = http.post(
                        urljoin(str(response.url), action), data=fields, follow_redirects=False
                    )
                    continue
                raise ProviderError(
                    f"unexpected page from the provider: {response.status_code} at {response.url}:\n"
                    f"{response.text[:2000]}"
                )
            raise ProviderError(f"more than {MAX_HOPS} redirects within the provider")
        finally:
            if own_client:
                http.close()

    def token_for(
        self,
        client_id: str,
        client_secret: str,
        redirect_uri: str,
        username: str,
        password: str,
        *,
        nonce: str,
        issuer_host: str = "127.0.0.1",
        scope: str = DEFAULT_SCOPE,
        client: httpx.Client | None = None,
    ) -> dict[str, Any]:
        """A whole authorization code flow with PKCE (S256), the kit acting as the client
        ``client_id`` (set up by ``set_client`` with ``redirect_uri``) for ``username``, every
        request made through ``issuer_host`` (``"127.0.0.1"`` or ``"localhost"``, which decides
        the ``iss``). Returns the token endpoint's JSON: ``access_token``, ``id_token``, ... Raises
        ``ProviderError`` if any step is refused. The provider's session (the "browser") is a
        fresh one unless ``client`` is given, whose cookies then keep it, e.g. for a logout."""
        verifier = secrets.token_urlsafe(48)
        challenge = pkce_challenge(verifier)
        state = secrets.token_urlsafe(16)
        query = urlencode(
            {
                "response_type": "code",
                "client_id": client_id,
                "redirect_uri": redirect_uri,
                "scope": scope,
                "state": state,
                "nonce": nonce,
                "code_challenge": challenge,
                "code_challenge_method": "S256",
            }
        )
        http = httpx.Client(timeout=REQUEST_SECONDS) if client is None else client
        try:
            location = self.login_and_authorize(
                self.url(f"/o/authorize/?{query}", host=issuer_host), username, password, client=http
            )
            params = parse_qs(urlsplit(location).query)
            if (
                not location.startswith(redirect_uri)
                or params.get("state") != [state]
                or "code" not in params
            ):
                raise ProviderError(f"the authorization did not yield a code: {location}")
            response = http.post(
                self.url("/o/token/", host=issuer_host),
                data={
                    "grant_type": "authorization_code",
                    "code": params["code"][0],
                    "redirect_uri": redirect_uri,
                    "code_verifier": verifier,
                    "client_id": client_id,
                    "client_secret": client_secret,
                },
            )
        finally:
            if client is None:
                http.close()
        if response.status_code != 200:
            raise ProviderError(f"the token request answered {response.status_code}: {response.text[:2000]}")
        result: dict[str, Any] = response.json()
        return result


class _FormFinder(HTMLParser):
    """The forms of a page: each one's action and its named inputs' values."""

    def __init__(self) -> None:
        super().__init__()
        self.forms: list[tuple[str, dict[str, str]]] = []
        self._current: tuple[str, dict[str, str]] | None = None

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        named = {name: value or "" for name, value in attrs}
        if tag == "form":
            self._current = (named.get("action", ""), {})
        elif tag == "input" and self._current is not None and named.get("name"):
            self._current[1][named["name"]] = named.get("value", "")

    def handle_endtag(self, tag: str) -> None:
        if tag == "form" and self._current is not None:
            self.forms.append(self._current)
            self._current = None


def _login_form(response: httpx.Response) -> tuple[str, dict[str, str]] | None:
    """The sign-in form on ``response``'s page (action, fields), if it has one."""
    if "html" not in response.headers.get("content-type", ""):
        return None
    finder = _FormFinder()
    finder.feed(response.text)
    for action, fields in finder.forms:
        if {"username", "password", "csrfmiddlewaretoken"} <= fields.keys():
            return action or str(response.url), fields
    return None


def decode_segment(token: str, index: int) -> dict[str, Any]:
    """The unverified JSON of a JWT's header (0) or payload (1), for assertions on what was sent."""
    segment = token.split(".")[index]
    decoded: dict[str, Any] = json.loads(base64.urlsafe_b64decode(segment + "=" * (-len(segment) % 4)))
    return decoded

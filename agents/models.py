"""Organisations, agents, connectors and their actions, conversations, runs and their trace."""

from __future__ import annotations

import re
from typing import Any

from django.conf import settings
from django.core.exceptions import ValidationError
from django.db import models, transaction
from django.utils import timezone
from simple_history.models import HistoricalRecords

from fimone.audit_chain import ChainLink, canonical_time
from fimone.egress import url_origin
from fimone.fields import EncryptedJSONField
from fimone.history import SecretsFingerprint

SLUG_RE = re.compile(r"^[a-z][a-z0-9_]{0,39}$")


def validate_tool_slug(value: str) -> None:
    """Connector slugs and action names build tool names ``<connector>__<action>``."""
    if not SLUG_RE.match(value) or "__" in value:
        raise ValidationError(
            "use lower-case letters, digits and single underscores, starting with a letter (max 40)"
        )


class Organization(models.Model):
    name = models.CharField(max_length=200, unique=True)
    read_only = models.BooleanField(
        default=False, help_text="When set, agents of this organisation may not run write actions."
    )
    created_at = models.DateTimeField(auto_now_add=True)
    archived_at = models.DateTimeField(
        null=True, blank=True, help_text="Archived organisations keep their history; their agents cannot run."
    )
    archived_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.PROTECT, related_name="+"
    )
    history = HistoricalRecords()

    class Meta:
        # The product writes "organisation"; Django would derive the US spelling from the class.
        verbose_name = "organisation"
        verbose_name_plural = "organisations"

    def __str__(self) -> str:
        return self.name

    @property
    def is_archived(self) -> bool:
        return self.archived_at is not None


class Role(models.TextChoices):
    MEMBER = "member", "Member"
    OPERATOR = "operator", "Operator"
    APPROVER = "approver", "Approver"
    AUDITOR = "auditor", "Auditor"
    ADMIN = "admin", "Admin"


class Membership(models.Model):
    organization = models.ForeignKey(
        Organization, on_delete=models.CASCADE, related_name="memberships", verbose_name="organisation"
    )
    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="memberships")
    role = models.CharField(max_length=16, choices=Role.choices, default=Role.MEMBER)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["organization", "user", "role"], name="membership_unique_role")
        ]

    def __str__(self) -> str:
        return f"{self.user} — {self.role} of {self.organization}"


# --- secrets bound to their address (DESIGN §1.14) ----------------------------------------------------

SECRETS_CLEARED = (
    "The stored secrets were cleared because the address changed: a secret is only sent to the "
    "address it was entered for. Enter it again for the new address."
)
_NOT_LOADED = object()


class SecretsBoundToAddress:
    """A model whose write-only secrets are sent to an address it also stores: a stored secret is
    bound to the address it was entered for.

    A change that moves the address (:meth:`secrets_address`; for a URL its origin: scheme, host
    and port) without entering the secrets anew clears them: on :meth:`full_clean`, so that a form
    refusing a model that cannot do without them says why, and again on :meth:`save`, so that every
    writer obeys (``QuerySet.update`` too: :class:`SecretsBoundQuerySet`). The secrets count as
    entered anew when the change assigned them another value than the one loaded (another object),
    or when the writer set :attr:`secrets_entered` (a form where they were typed again).
    :attr:`secrets_cleared` tells the writer afterwards, so it can say so.

    Subclasses (before ``models.Model`` in the bases) set :attr:`secrets_field`, the fields the
    address is made of (:attr:`secrets_address_fields`) and :meth:`secrets_address`.
    """

    secrets_field = "secrets"
    secrets_address_fields: frozenset[str] = frozenset()
    secrets_entered = False
    secrets_cleared = False

    def secrets_address(self) -> Any:
        """Where the secrets are sent; two equal values are one address."""
        raise NotImplementedError

    @classmethod
    def from_db(cls, db: str | None, field_names: Any, values: Any) -> Any:
        instance = super().from_db(db, field_names, values)  # type: ignore[misc]
        if cls.secrets_field not in instance.get_deferred_fields():
            instance._loaded_secrets = getattr(instance, cls.secrets_field)
        return instance

    def keep_secrets_home(self) -> bool:
        """Clear the secrets if this change moves their address and does not enter them anew;
        ``True`` when it cleared them."""
        current = getattr(self, self.secrets_field)
        state, pk = self._state, self.pk  # type: ignore[attr-defined]
        if state.adding or pk is None or current in (None, "", {}) or self.secrets_entered:
            return False
        manager = type(self)._base_manager  # type: ignore[attr-defined]
        stored = manager.using(state.db).filter(pk=pk).first()
        if stored is None or stored.secrets_address() == self.secrets_address():
            return False
        loaded = self.__dict__.get("_loaded_secrets", _NOT_LOADED)
        if loaded is _NOT_LOADED:
            carried = current == getattr(stored, self.secrets_field)
        else:
            carried = current is loaded
        if not carried:
            return False
        setattr(self, self.secrets_field, None)
        self.secrets_cleared = True
        return True

    def full_clean(self, *args: Any, **kwargs: Any) -> None:
        cleared = self.keep_secrets_home()
        try:
            super().full_clean(*args, **kwargs)  # type: ignore[misc]
        except ValidationError as exc:
            if not cleared:
                raise
            errors = exc.update_error_dict({})
            errors.setdefault(self.secrets_field, []).insert(0, ValidationError(SECRETS_CLEARED))
            raise ValidationError(errors) from None

    def save(self, *args: Any, **kwargs: Any) -> None:
        update_fields = kwargs.get("update_fields")
        may_move = update_fields is None or bool(self.secrets_address_fields & set(update_fields))
        if may_move and self.keep_secrets_home() and update_fields is not None:
            kwargs["update_fields"] = {*update_fields, self.secrets_field}
        super().save(*args, **kwargs)  # type: ignore[misc]
        self._loaded_secrets = getattr(self, self.secrets_field)
        self.secrets_entered = False

    def moves_secrets(self, changes: dict[str, Any]) -> bool:
        """Whether writing ``changes`` (field values, as ``QuerySet.update`` takes them) moves
        the address. An expression, whose value only the database knows, counts as a move."""
        before = self.secrets_address()
        for name, value in changes.items():
            if hasattr(value, "resolve_expression"):
                return True
            setattr(self, name, value)
        return self.secrets_address() != before


class SecretsBoundQuerySet(models.QuerySet[Any]):
    """``update()`` of a :class:`SecretsBoundToAddress` model: rows whose address it moves lose
    their secrets, unless the same update writes them."""

    def update(self, **kwargs: Any) -> int:
        model = self.model
        if model.secrets_field in kwargs or not model.secrets_address_fields & kwargs.keys():
            return super().update(**kwargs)
        rows = model._base_manager.using(self.db)
        with transaction.atomic(using=self.db):
            selected = rows.filter(pk__in=self.values("pk"))
            moved = [row.pk for row in selected if row.moves_secrets(dict(kwargs))]
            if moved:
                rows.filter(pk__in=moved).update(**{model.secrets_field: None})
            return super().update(**kwargs)


class ConnectorQuerySet(SecretsBoundQuerySet):
    def delete(self) -> tuple[int, dict[str, int]]:
        """Refused (``ProtectedError``) before anything is written if a connector has history."""
        from agents.history import check_connector_deletable

        check_connector_deletable(self)
        return super().delete()


class Invitation(models.Model):
    """An offer, made by an organisation admin, for an existing user (named, or by e-mail address)
    to join the organisation with a role. Only when the invitee accepts it, signed in, is the
    :class:`Membership` created: nobody is added to an organisation without their consent.
    Only a SHA-256 of the invitation's token is stored; the link is shown once, to the inviter."""

    organization = models.ForeignKey(
        Organization, on_delete=models.CASCADE, related_name="invitations", verbose_name="organisation"
    )
    invited_user = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        on_delete=models.CASCADE,
        null=True,
        blank=True,
        related_name="invitations",
        help_text="The user invited; or leave empty and give their e-mail address.",
    )
    email = models.EmailField(blank=True, help_text="Accepted by the signed-in user with this address.")
    role = models.CharField(max_length=16, choices=Role.choices, default=Role.MEMBER)
    invited_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.SET_NULL, null=True, blank=True, related_name="+"
    )
    token_sha256 = models.CharField(max_length=64, unique=True, editable=False)
    created_at = models.DateTimeField(auto_now_add=True)
    expires_at = models.DateTimeField(editable=False)
    accepted_at = models.DateTimeField(null=True, blank=True, editable=False)
    accepted_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.SET_NULL, null=True, blank=True, related_name="+"
    )

    def __str__(self) -> str:
        invitee = self.invited_user or self.email
        return f"{invitee} invited to {self.organization} as {self.role}"

    def clean(self) -> None:
        if self.invited_user_id is None and not self.email:
            raise ValidationError("name the invited user or give their e-mail address")
        if self.invited_user_id is not None and self.email:
            raise ValidationError("name the invited user or give an e-mail address, not both")


class Connector(SecretsBoundToAddress, models.Model):
    """A service agents call. One whose tools have history (``agents.history``) is never deleted:
    archive it instead.

    Its secrets are bound to the address they were entered for (:class:`SecretsBoundToAddress`):
    an HTTP connector's is its base URL's origin; a database connector's DSN is its own address,
    so only entering the secrets again changes it."""

    class Kind(models.TextChoices):
        HTTP = "http", "HTTP service"
        DATABASE = "database", "Database"

    organization = models.ForeignKey(
        Organization, on_delete=models.CASCADE, related_name="connectors", verbose_name="organisation"
    )
    slug = models.CharField(max_length=40, validators=[validate_tool_slug], help_text="Tool name prefix.")
    name = models.CharField(max_length=200)
    kind = models.CharField(max_length=16, choices=Kind.choices, default=Kind.HTTP)
    base_url = models.URLField(blank=True, help_text="HTTP connectors: the service's base URL.")
    secrets = EncryptedJSONField(
        null=True,
        blank=True,
        help_text=(
            "Encrypted at rest. HTTP: {'headers': {...}}; database: {'dsn': 'postgres://…'} plus, "
            "recommended, {'read_dsn': 'postgres://reader@…'}: a role that may only read, used by "
            "the read tool (sql_query) instead of dsn."
        ),
    )
    timeout_seconds = models.FloatField(default=15.0)
    created_at = models.DateTimeField(auto_now_add=True)
    archived_at = models.DateTimeField(
        null=True, blank=True, help_text="Archived connectors keep their history; their tools are not offered"
    )
    archived_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.PROTECT, related_name="+"
    )

    objects = ConnectorQuerySet.as_manager()
    # Configuration history; the secrets are never copied into it (fimone.history).
    history = HistoricalRecords(excluded_fields=["secrets"], bases=[SecretsFingerprint])
    secrets_address_fields = frozenset({"kind", "base_url"})

    class Meta:
        constraints = [models.UniqueConstraint(fields=["organization", "slug"], name="connector_unique_slug")]

    def __str__(self) -> str:
        return f"{self.name} ({self.slug})"

    def secrets_address(self) -> Any:
        if self.kind == self.Kind.HTTP:
            return (self.kind, url_origin(self.base_url))
        return (self.kind,)

    @property
    def is_archived(self) -> bool:
        return self.archived_at is not None

    def delete(self, *args: Any, **kwargs: Any) -> tuple[int, dict[str, int]]:
        """Refused (``ProtectedError``) before anything is written if the connector has history."""
        from agents.history import check_connector_deletable

        check_connector_deletable([self])
        return super().delete(*args, **kwargs)

    @property
    def tool_prefix(self) -> str:
        """Every tool of this connector is named ``<slug>__…`` (slugs hold no double underscore)."""
        return f"{self.slug}__"

    def clean(self) -> None:
        if self.secrets is not None and not isinstance(self.secrets, dict):
            raise ValidationError({"secrets": "must be a JSON object"})
        if self.kind == self.Kind.HTTP and not self.base_url:
            raise ValidationError({"base_url": "an HTTP connector needs a base URL"})
        if self.kind == self.Kind.DATABASE and not (self.secrets or {}).get("dsn"):
            raise ValidationError({"secrets": "a database connector needs {'dsn': …} in its secrets"})
        read_dsn = (self.secrets or {}).get("read_dsn")
        if self.kind == self.Kind.DATABASE and read_dsn is not None and not isinstance(read_dsn, str):
            raise ValidationError({"secrets": "read_dsn must be a DSN string, like dsn"})


WRITE_METHODS = frozenset({"POST", "PUT", "PATCH", "DELETE"})


def humanized_name(name: str) -> str:
    """A tool or action name as people read it: ``purchase_pay`` → "Purchase pay"."""
    words = name.replace("__", " ").replace("_", " ").replace("-", " ").split()
    text = " ".join(words)
    return text[:1].upper() + text[1:] if text else name


class ConnectorAction(models.Model):
    class Method(models.TextChoices):
        GET = "GET"
        POST = "POST"
        PUT = "PUT"
        PATCH = "PATCH"
        DELETE = "DELETE"

    connector = models.ForeignKey(Connector, on_delete=models.CASCADE, related_name="actions")
    name = models.CharField(max_length=40, validators=[validate_tool_slug])
    display_name = models.CharField(
        max_length=120,
        blank=True,
        help_text="The name people read for this tool, e.g. “Pay a purchase”. Empty: made from the name.",
    )
    description = models.TextField(blank=True)
    method = models.CharField(max_length=8, choices=Method.choices, default=Method.GET)
    path_template = models.CharField(
        max_length=500, blank=True, help_text="Path under the base URL; {name} is filled from the arguments."
    )
    parameters_schema = models.JSONField(
        default=dict, blank=True, help_text="JSON schema (type: object) of the tool's arguments."
    )
    requires_confirmation = models.BooleanField(
        null=True, blank=True, help_text="Empty: yes for POST/PUT/PATCH/DELETE, no for GET."
    )
    is_write = models.BooleanField(
        "changes data", null=True, blank=True, help_text="Empty: derived from the method."
    )
    context_action = models.ForeignKey(
        "self",
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="+",
        help_text="A read action of the same connector whose answer shows approvers what a call "
        "of this one is about (for a payment: the purchase it pays), called with the same arguments "
        "when approval is asked.",
    )
    context_fields = models.JSONField(
        default=list,
        blank=True,
        help_text='Which fields of that answer approvers see, in order, e.g. ["vendor", "description", '
        '"amount"]. Empty: the call\'s own arguments.',
    )

    class Meta:
        constraints = [models.UniqueConstraint(fields=["connector", "name"], name="action_unique_name")]

    def __str__(self) -> str:
        return self.tool_name

    def save(self, *args: Any, **kwargs: Any) -> None:
        writes = self.method in WRITE_METHODS
        if self.requires_confirmation is None:
            self.requires_confirmation = writes
        if self.is_write is None:
            self.is_write = writes
        super().save(*args, **kwargs)

    @property
    def tool_name(self) -> str:
        return f"{self.connector.slug}__{self.name}"

    @property
    def title(self) -> str:
        """What people read for this tool: its display name, else one made from its name."""
        return self.display_name.strip() or humanized_name(self.name)

    def clean(self) -> None:
        from agents.tools.schema import check_parameters_schema

        check_parameters_schema(self.parameters_schema)


class Agent(SecretsBoundToAddress, models.Model):
    """An assistant. Its own ``api_key`` (in :attr:`secrets`) is bound to the origin of the model
    endpoint it was entered for (``model_config_json.base_url``, or the platform's endpoint
    without one): :class:`SecretsBoundToAddress`."""

    class Engine(models.TextChoices):
        REACT = "react", "ReAct"
        DAG = "dag", "DAG"

    organization = models.ForeignKey(
        Organization, on_delete=models.CASCADE, related_name="agents", verbose_name="organisation"
    )
    owner = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="owned_agents")
    name = models.CharField(max_length=200)
    instructions = models.TextField(blank=True)
    engine = models.CharField(max_length=8, choices=Engine.choices, default=Engine.REACT)
    model_config_json = models.JSONField(
        default=dict,
        blank=True,
        help_text='{"provider": "scripted"|"openai", "model": …, "params": {…}, '
        '"hooks": {"class_hooks": ["name", {"name": …, "params": {…}}]}}',
    )
    secrets = EncryptedJSONField(
        null=True,
        blank=True,
        help_text='Encrypted at rest, never shown again: {"api_key": "sk-…"} for the openai provider.',
    )
    require_confirmation_for_all = models.BooleanField(default=False)
    actions = models.ManyToManyField(ConnectorAction, blank=True, related_name="agents")
    builtin_tools = models.JSONField(
        default=list, blank=True, help_text='e.g. ["current_time", "calculator"]'
    )
    max_iterations = models.PositiveIntegerField(default=12)
    delegates = models.ManyToManyField(
        "self",
        symmetrical=False,
        blank=True,
        related_name="delegated_from",
        help_text="Agents of the same organisation this agent may call (its call_agent tool). Each "
        "runs with its own hooks and its own confirmation settings.",
    )
    created_at = models.DateTimeField(auto_now_add=True)
    archived_at = models.DateTimeField(
        null=True, blank=True, help_text="Archived agents cannot run; their history stays readable."
    )
    archived_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.PROTECT, related_name="+"
    )

    # Configuration history; the secrets are never copied into it (fimone.history).
    history = HistoricalRecords(excluded_fields=["secrets"], bases=[SecretsFingerprint])
    objects = SecretsBoundQuerySet.as_manager()
    secrets_address_fields = frozenset({"model_config_json"})

    def __str__(self) -> str:
        return self.name

    @property
    def is_archived(self) -> bool:
        return self.archived_at is not None

    def secrets_address(self) -> Any:
        config = self.model_config_json if isinstance(self.model_config_json, dict) else {}
        return url_origin(config.get("base_url"))  # None: the platform's own endpoint

    def archived_reason(self) -> str | None:
        """Why this agent may not run (it or its organisation is archived), else ``None``."""
        if self.archived_at is not None:
            return "this agent is archived and cannot run"
        if self.organization.archived_at is not None:
            return "this agent's organisation is archived; its agents cannot run"
        return None

    def clean(self) -> None:
        from agents.checks import check_agent_config

        check_agent_config(self)

    def provider_config(self) -> dict[str, Any]:
        """The model configuration a provider is built from: ``model_config_json`` with the
        decrypted ``api_key`` from :attr:`secrets`. In memory only; never stored or shown."""
        config = dict(self.model_config_json) if isinstance(self.model_config_json, dict) else {}
        api_key = self.secrets.get("api_key") if isinstance(self.secrets, dict) else None
        if api_key:
            config["api_key"] = api_key
        return config


class Conversation(models.Model):
    # History (DESIGN §1.9): every relation is PROTECT, so deleting an organisation, an agent or a
    # user that has conversations is refused; archive the agent or deactivate the user instead.
    organization = models.ForeignKey(
        Organization, on_delete=models.PROTECT, related_name="conversations", verbose_name="organisation"
    )
    agent = models.ForeignKey(Agent, on_delete=models.PROTECT, related_name="conversations")
    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="conversations")
    title = models.CharField(max_length=200, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    archived_at = models.DateTimeField(
        null=True,
        blank=True,
        help_text="Archived by its user: out of their list, kept with all its runs for the record.",
    )

    def __str__(self) -> str:
        return self.title or f"Conversation {self.pk}"


class ExecutionPath(models.TextChoices):
    PORTAL = "portal"
    API = "api"
    DAG = "dag"
    DELEGATE = "delegate"
    WORKFLOW = "workflow"
    EVAL = "eval"


class RunStatus(models.TextChoices):
    QUEUED = "queued"
    RUNNING = "running"
    AWAITING_APPROVAL = "awaiting_approval"
    COMPLETED = "completed"
    FAILED = "failed"
    CANCELLED = "cancelled"


TERMINAL_RUN_STATUSES = frozenset({RunStatus.COMPLETED, RunStatus.FAILED, RunStatus.CANCELLED})


class Run(models.Model):
    # History (DESIGN §1.9): nothing a run hangs from may be deleted while the run exists.
    conversation = models.ForeignKey(Conversation, on_delete=models.PROTECT, related_name="runs")
    agent = models.ForeignKey(Agent, on_delete=models.PROTECT, related_name="runs")
    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="runs")
    parent_run = models.ForeignKey(
        "self", null=True, blank=True, on_delete=models.PROTECT, related_name="children"
    )
    execution_path = models.CharField(max_length=16, choices=ExecutionPath.choices, default=ExecutionPath.API)
    parent_call_id = models.CharField(
        max_length=120,
        blank=True,
        editable=False,
        help_text="A child run: what of its parent it runs (a DAG step ``step:<id>``, or the "
        "``call_agent`` tool call's id). One child per parent and call.",
    )
    status = models.CharField(
        max_length=20, choices=RunStatus.choices, default=RunStatus.QUEUED, db_index=True
    )
    input = models.TextField()
    output = models.TextField(blank=True)
    checkpoint = models.JSONField(default=dict, blank=True)
    hooks_bypassed = models.BooleanField(default=False)
    hook_chain = models.JSONField(
        null=True,
        blank=True,
        editable=False,
        help_text="The hook chain resolved when the run was created (declared hooks with their "
        "params, priority, timeout and on_error; system hooks). Resumes rebuild it from here.",
    )
    cancel_requested = models.BooleanField(default=False)
    error = models.TextField(blank=True)
    lease_owner = models.CharField(max_length=100, blank=True)
    lease_expires_at = models.DateTimeField(null=True, blank=True, db_index=True)
    heartbeat_at = models.DateTimeField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        indexes = [models.Index(fields=["user", "-created_at"])]
        constraints = [
            models.UniqueConstraint(
                fields=["parent_run", "parent_call_id"],
                condition=models.Q(parent_run__isnull=False),
                name="run_unique_child_per_call",
            )
        ]

    def __str__(self) -> str:
        return f"Run {self.pk} ({self.status})"

    @property
    def is_terminal(self) -> bool:
        return self.status in TERMINAL_RUN_STATUSES


class RunEvent(models.Model):
    """One entry of a run's trace; ``seq`` orders a run's events (types: ``agents.events``)."""

    # No index of its own: the (run, seq) unique index serves every lookup by run.
    run = models.ForeignKey(Run, on_delete=models.PROTECT, related_name="events", db_index=False)
    seq = models.PositiveIntegerField()
    type = models.CharField(max_length=40)
    payload = models.JSONField(default=dict)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["run", "seq"]
        constraints = [models.UniqueConstraint(fields=["run", "seq"], name="runevent_unique_seq")]

    def __str__(self) -> str:
        return f"{self.run_id}#{self.seq} {self.type}"

    def as_message(self) -> dict[str, Any]:
        return {
            "run_id": self.run_id,
            "seq": self.seq,
            "type": self.type,
            "payload": self.payload,
            "created_at": self.created_at.isoformat(),
        }


class RunMessage(models.Model):
    """One chat message of a run's conversation with its model, appended in order and never
    changed: a step stores only its new messages instead of rewriting the whole history."""

    # No index of its own: the (run, index) unique index serves every lookup by run.
    run = models.ForeignKey(Run, on_delete=models.PROTECT, related_name="messages", db_index=False)
    index = models.PositiveIntegerField()
    message = models.JSONField()

    class Meta:
        ordering = ["run", "index"]
        constraints = [models.UniqueConstraint(fields=["run", "index"], name="runmessage_unique_index")]

    def __str__(self) -> str:
        return f"{self.run_id}[{self.index}] {self.message.get('role', '?')}"


class ToolExecution(models.Model):
    """Written before a tool runs (``started``) and after (``succeeded``/``failed``); a row left
    ``started`` means the process died mid-call: its outcome is unknown and it is never re-run."""

    class Status(models.TextChoices):
        STARTED = "started"
        SUCCEEDED = "succeeded"
        FAILED = "failed"
        UNKNOWN = "unknown"

    # No index of its own: the (run, tool_call_id) unique index serves every lookup by run.
    run = models.ForeignKey(Run, on_delete=models.PROTECT, related_name="tool_executions", db_index=False)
    tool_call_id = models.CharField(max_length=100)
    tool_name = models.CharField(max_length=120)
    args = models.JSONField(default=dict)
    args_sha256 = models.CharField(max_length=64)
    status = models.CharField(max_length=12, choices=Status.choices, default=Status.STARTED)
    result = models.JSONField(null=True, blank=True)
    started_at = models.DateTimeField(auto_now_add=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    duration_ms = models.FloatField(null=True, blank=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["run", "tool_call_id"], name="toolexecution_unique_call")
        ]

    def __str__(self) -> str:
        return f"{self.tool_name} [{self.status}]"


class HookDeclaration(SecretsBoundToAddress, models.Model):
    """One hook an agent runs, or, with no agent, one its organisation *enforces* on every agent.

    Kinds (``hooks.catalog.KINDS``): ``class`` names a catalog hook and ``params`` are its
    parameters; ``command`` has ``{"argv": [...], "env": {...}}``; ``python`` has
    ``{"path": "package.module.Name", ...params}``; ``http`` has ``{"url": ...}`` and its signing
    ``secret`` (encrypted), bound to the origin of the URL it was entered for: changing the URL's
    scheme, host or port needs the secret again (:class:`SecretsBoundToAddress`). Everything is
    checked on :meth:`clean` by building the hook exactly as
    a run would (``hooks.catalog.build_item``). ``priority``, ``timeout`` and ``on_error`` left
    empty take the kind's (or the catalog class's) defaults.

    Enforced hooks run for every agent of the organisation, after the agent's own hooks of the
    same point, so they have the last word (``hooks.catalog`` states the ordering rule); only the
    organisation's row can
    disable one. Creating or changing a command, python or http declaration needs the
    ``agents.manage_code_hooks`` permission (checked by the services, the admin and the import).
    """

    class Kind(models.TextChoices):
        CLASS = "class", "Catalog hook"
        COMMAND = "command", "Command"
        PYTHON = "python", "Python"
        HTTP = "http", "HTTP"

    class Point(models.TextChoices):
        PRE_TOOL_USE = "PreToolUse", "Before a tool call (PreToolUse)"
        POST_TOOL_USE = "PostToolUse", "After a tool call (PostToolUse)"
        SESSION_START = "SessionStart", "When a run starts (SessionStart)"

    class OnError(models.TextChoices):
        DEFAULT = "", "Kind default"
        BLOCK = "block", "Block (fail closed)"
        ALLOW = "allow", "Allow"

    organization = models.ForeignKey(
        Organization, on_delete=models.CASCADE, related_name="hook_declarations", verbose_name="organisation"
    )
    agent = models.ForeignKey(
        Agent,
        on_delete=models.CASCADE,
        null=True,
        blank=True,
        related_name="hook_declarations",
        help_text="Empty: enforced on every agent of the organisation.",
    )
    name = models.CharField(max_length=100, help_text="Class hooks: the catalog name. Other kinds: a label.")
    kind = models.CharField(max_length=8, choices=Kind.choices, default=Kind.CLASS)
    point = models.CharField(
        max_length=16, choices=Point.choices, blank=True, help_text="Empty: the catalog class's point."
    )
    matcher = models.CharField(
        max_length=200,
        blank=True,
        help_text='Tool names it runs for: empty or "*" for all, a glob ("oa__*"), or "re:<regex>".',
    )
    priority = models.IntegerField(null=True, blank=True, help_text="Lower runs earlier; below the gate.")
    timeout = models.FloatField(null=True, blank=True, help_text="Seconds.")
    on_error = models.CharField(max_length=8, choices=OnError.choices, blank=True)
    enabled = models.BooleanField(default=True)
    params = models.JSONField(default=dict, blank=True)
    secret = EncryptedJSONField(
        null=True, blank=True, help_text="http hooks: the HMAC-SHA256 signing secret. Encrypted, never shown."
    )
    # Every change is recorded (who, when, old and new values); the secret is never copied.
    history = HistoricalRecords(excluded_fields=["secret"])
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    objects = SecretsBoundQuerySet.as_manager()
    secrets_field = "secret"
    secrets_address_fields = frozenset({"kind", "params"})

    class Meta:
        ordering = ["organization", "agent", "priority", "pk"]
        permissions = [("manage_code_hooks", "Can create or change command, python and http hooks")]
        indexes = [models.Index(fields=["organization", "agent"])]

    def __str__(self) -> str:
        owner = self.agent if self.agent_id else f"{self.organization} (enforced)"
        return f"{self.name} [{self.kind}] on {owner}"

    @property
    def is_enforced(self) -> bool:
        return self.agent_id is None

    def secrets_address(self) -> Any:
        if self.kind == self.Kind.HTTP and isinstance(self.params, dict):
            return (self.kind, url_origin(self.params.get("url")))
        return (self.kind,)

    @property
    def is_code(self) -> bool:
        from hooks.catalog import CODE_KINDS

        return self.kind in CODE_KINDS

    def as_item(self) -> dict[str, Any]:
        """The declaration as ``hooks.catalog`` reads it (the secret in clear, in memory only)."""
        return {
            "kind": self.kind,
            "name": self.name,
            "point": self.point or None,
            "matcher": self.matcher,
            "params": self.params,
            "priority": self.priority,
            "timeout": self.timeout,
            "on_error": self.on_error or None,
            "secret": self.secret if self.kind == self.Kind.HTTP else None,
        }

    def clean(self) -> None:
        from hooks.catalog import HookDeclarationError, build_item

        if (
            self.agent_id is not None
            and self.organization_id is not None
            and self.agent.organization_id != self.organization_id
        ):
            raise ValidationError({"agent": "the agent belongs to another organisation"})
        if not isinstance(self.params, dict):
            raise ValidationError({"params": "must be a JSON object"})
        if self.kind != self.Kind.HTTP and self.secret is not None:
            raise ValidationError({"secret": "only http hooks have a secret"})
        try:
            hook = build_item(self.as_item())
        except HookDeclarationError as exc:
            raise ValidationError({"params": str(exc)}) from None
        if not self.point:
            self.point = str(hook.point)


class ConnectorCallLog(ChainLink):
    """One connector call, written once by the ``audit_log`` hook and never changed: who (agent,
    user, organisation, run), what (tool, arguments with secrets masked), how it ended
    (``succeeded`` / ``failed`` / ``blocked`` and by which hook), how long it took, and the size
    and SHA-256 of the tool's full result. History (DESIGN §1.9): every relation is PROTECT.

    Tamper-evident (fimone/audit_chain.py): each row is a link of its organisation's hash chain,
    written only by ``agents.audit.connector_call_log_record``; ``manage.py audit_verify``
    recomputes it. Append-only: the ORM refuses ``update()``, ``delete()``, saving a stored row
    and deleting one (``fimone.models.AppendOnlyError``, a ``PermissionError``); on PostgreSQL a
    trigger refuses ``UPDATE`` and ``DELETE``."""

    class Outcome(models.TextChoices):
        SUCCEEDED = "succeeded"
        FAILED = "failed"
        BLOCKED = "blocked"

    organization = models.ForeignKey(
        Organization, on_delete=models.PROTECT, related_name="+", verbose_name="organisation"
    )
    agent = models.ForeignKey(Agent, on_delete=models.PROTECT, related_name="+", null=True, blank=True)
    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="+", null=True, blank=True
    )
    run = models.ForeignKey(Run, on_delete=models.PROTECT, related_name="+", null=True, blank=True)
    tool_call_id = models.CharField(max_length=100, blank=True)
    tool_name = models.CharField(max_length=120, db_index=True)
    connector_slug = models.CharField(max_length=40, blank=True, help_text="Empty for built-in tools.")
    arguments = models.JSONField(default=dict, help_text="Secrets masked.")
    outcome = models.CharField(max_length=12, choices=Outcome.choices)
    blocked_by = models.CharField(max_length=120, blank=True)
    duration_ms = models.FloatField(null=True, blank=True)
    result_size = models.PositiveBigIntegerField(
        null=True, blank=True, help_text="Bytes of the result's UTF-8 JSON text."
    )
    result_sha256 = models.CharField(max_length=64, blank=True)
    error = models.TextField(blank=True)
    # Set before the hash is computed (not auto_now_add, which would set it after).
    created_at = models.DateTimeField(default=timezone.now, editable=False, db_index=True)

    class Meta:
        ordering = ["-created_at", "-pk"]
        constraints = [
            models.UniqueConstraint(
                fields=["run", "tool_call_id"],
                condition=models.Q(run__isnull=False),
                name="connectorcalllog_unique_call",
            ),
            models.UniqueConstraint(fields=["organization", "chain_seq"], name="connectorcalllog_chain_link"),
        ]
        indexes = [models.Index(fields=["organization", "-created_at"])]

    def chain_payload(self) -> dict[str, Any]:
        return {
            "agent": self.agent_id,
            "user": self.user_id,
            "run": self.run_id,
            "tool_call_id": self.tool_call_id,
            "tool_name": self.tool_name,
            "connector_slug": self.connector_slug,
            "arguments": self.arguments,
            "outcome": str(self.outcome),
            "blocked_by": self.blocked_by,
            "duration_ms": self.duration_ms,
            "result_size": self.result_size,
            "result_sha256": self.result_sha256,
            "error": self.error,
            "created_at": canonical_time(self.created_at),
        }

    def __str__(self) -> str:
        return f"{self.tool_name} [{self.outcome}]"

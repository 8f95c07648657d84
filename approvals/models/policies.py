"""Approver policies: who decides an agent's calls, in which stages, and who is asked when nobody answers."""

from __future__ import annotations

from django.conf import settings
from django.db import models
from simple_history.models import HistoricalRecords

from agents.models import Agent
from approvals.models.channel_configs import channel_choice
from tenancy.models import organisation_key


class ApproverPolicy(models.Model):
    """Who may decide an agent's confirmation requests, and how long they have.

    One policy per organisation with ``agent`` empty is the organisation's default; a policy with
    ``agent`` set overrides it for that agent. Without any policy the defaults below apply.
    """

    class Channel(models.TextChoices):
        DEFAULT = "", "Organisation default (else the web inbox)"
        WEB = "web", "Web inbox"

    organization = organisation_key(on_delete=models.CASCADE, related_name="approver_policies")
    agent = models.OneToOneField(
        Agent, null=True, blank=True, on_delete=models.CASCADE, related_name="approver_policy"
    )
    # Labels say who decides, in the product's words (field names keep the code's).
    allow_initiator = models.BooleanField(
        "the requester may decide", default=False, help_text="The user who started the run."
    )
    allow_agent_owner = models.BooleanField("the agent's owner may decide", default=True)
    allow_org_approvers = models.BooleanField(
        "the organisation's approvers may decide",
        default=True,
        help_text="Organisation admins and approvers.",
    )
    named_users = models.ManyToManyField(settings.AUTH_USER_MODEL, blank=True, related_name="+")
    allow_self_approval = models.BooleanField(
        "allow self-approval", default=False, help_text="Whether the requester may approve their own call."
    )
    timeout_seconds = models.PositiveIntegerField("timeout (seconds)", default=600)
    inline_wait_seconds = models.PositiveIntegerField(
        "wait before suspending the run (seconds)",
        default=20,
        help_text="How long a run waits for a decision in memory before it is suspended; a suspended "
        "run resumes once someone decides.",
    )
    channel_config = channel_choice(
        help_text="Where cards are sent. Empty: the organisation default, else the web inbox."
    )
    approvals_required = models.PositiveSmallIntegerField(
        default=1,
        help_text="How many distinct approvers must approve (M of the N who may decide). "
        "A call whose policy leaves fewer than M possible approvers is refused at once.",
    )
    any_rejection_rejects = models.BooleanField(
        default=True,
        help_text="One rejection rejects the call. Untick to reject only once the remaining "
        "approvers could no longer reach the number of approvals required.",
    )
    allow_edit_on_approve = models.BooleanField(
        "approvers may change the arguments",
        default=False,
        help_text="Approvers may change the arguments before approving (in the web inbox only), "
        "within the tool's parameter schema; the tool then runs with exactly the approved arguments.",
    )
    first_tier_may_decide_after_escalation = models.BooleanField(
        default=True,
        help_text="Once a request is escalated, the people first asked may still decide it. Untick "
        "to leave it to the escalation tiers alone.",
    )

    class Grants(models.TextChoices):
        OFF = "off", "No standing approvals"
        CONVERSATION = "conversation", "For the same conversation"
        AGENT = "agent", "For the same conversation, or for the whole agent"

    standing_grants = models.CharField(
        "standing approvals",
        max_length=12,
        choices=Grants.choices,
        default=Grants.OFF,
        help_text="Whether an approver, when approving, may also approve later calls of the same tool "
        "whose arguments meet conditions they set. Only where one approval decides (no quorum, no "
        "stages): a grant stands for one person's approval.",
    )
    grant_max_hours = models.PositiveIntegerField(
        "longest standing approval (hours)", default=8, help_text="How long a standing approval may last."
    )
    grants_until_revoked = models.BooleanField("standing approvals may last until revoked", default=False)
    history = HistoricalRecords(m2m_fields=[named_users])

    class Meta:
        verbose_name_plural = "approver policies"
        constraints = [
            models.UniqueConstraint(
                fields=["organization"],
                condition=models.Q(agent__isnull=True),
                name="approverpolicy_one_default_per_org",
            ),
            models.CheckConstraint(
                condition=models.Q(timeout_seconds__gte=10), name="approverpolicy_timeout_min"
            ),
            models.CheckConstraint(
                condition=models.Q(approvals_required__gte=1), name="approverpolicy_quorum_min"
            ),
            models.CheckConstraint(
                condition=models.Q(grant_max_hours__gte=1, grant_max_hours__lte=8760),
                name="approverpolicy_grant_hours",
            ),
        ]

    def __str__(self) -> str:
        return f"Policy for {self.agent or self.organization}"


class ApprovalStage(models.Model):
    """One stage of a policy: the call passes its stages in ``position`` order, each approved by
    its own people before the next one is asked; any stage's rejection rejects the call.

    A stage applies to a call when its ``conditions`` hold (``confirm_when``'s rows, on the call's
    arguments; ``@tool`` and ``@agent`` name the tool and the agent); a call that no stage applies
    to is decided by the policy's approvers as if it had no stages. Its approvers are the people
    named, the members holding the roles chosen, and the requester's manager (a membership's
    ``manager``), while they are approvers or admins of the organisation."""

    class Mode(models.TextChoices):
        ALL = "all", "all conditions hold"
        ANY = "any", "any condition holds"

    policy = models.ForeignKey(ApproverPolicy, on_delete=models.CASCADE, related_name="stages")
    position = models.PositiveSmallIntegerField(
        default=1, help_text="Stages are asked in this order (lowest first)."
    )
    name = models.CharField(max_length=80, help_text='As approvers read it, e.g. "Team lead", "Finance".')
    conditions = models.JSONField(
        default=list,
        blank=True,
        help_text='When this stage applies, e.g. [{"field": "amount", "op": ">=", "value": 50000}] '
        "(ops: > >= < <= == != in regex; @tool and @agent name the tool and the agent). Empty: always.",
    )
    condition_mode = models.CharField(max_length=3, choices=Mode.choices, default=Mode.ALL)
    named_users = models.ManyToManyField(settings.AUTH_USER_MODEL, blank=True, related_name="+")
    roles = models.JSONField(
        default=list,
        blank=True,
        help_text='Everyone holding these roles decides too: ["approver"], ["admin"] or both.',
    )
    requester_manager = models.BooleanField(
        "the requester's manager",
        default=False,
        help_text="The manager set on the requester's membership of the organisation.",
    )
    approvals_required = models.PositiveSmallIntegerField(
        default=1, help_text="How many of this stage's approvers must approve."
    )
    timeout_seconds = models.PositiveIntegerField(
        "timeout (seconds)",
        null=True,
        blank=True,
        help_text="How long this stage may take, counted from when it opens. Empty: the policy's timeout.",
    )
    history = HistoricalRecords(m2m_fields=[named_users])

    class Meta:
        ordering = ["position", "pk"]
        constraints = [
            models.CheckConstraint(
                condition=models.Q(approvals_required__gte=1), name="approvalstage_quorum_min"
            ),
            models.CheckConstraint(
                condition=models.Q(timeout_seconds__isnull=True) | models.Q(timeout_seconds__gte=10),
                name="approvalstage_timeout_min",
            ),
        ]

    def __str__(self) -> str:
        return self.name


class EscalationTier(models.Model):
    """A step of a policy's escalation: if nobody has decided ``after_seconds`` after a request
    opened (and it has not expired), these people are added to its approvers and the card is sent
    again, on the tier's channel if it names one."""

    policy = models.ForeignKey(ApproverPolicy, on_delete=models.CASCADE, related_name="tiers")
    after_seconds = models.PositiveIntegerField(
        "after (seconds)",
        help_text="Seconds after the request opened, counted from its opening (not from the tier "
        "before). A tier due after the request's timeout never happens.",
    )
    named_users = models.ManyToManyField(
        settings.AUTH_USER_MODEL,
        related_name="+",
        help_text="Who is asked at this tier (they must be active members of the organisation).",
    )
    channel_config = channel_choice(
        help_text="Where this tier's card goes. Empty: the channel the request was sent on."
    )
    stage = models.ForeignKey(
        ApprovalStage,
        null=True,
        blank=True,
        on_delete=models.CASCADE,
        related_name="tiers",
        help_text="The stage this tier escalates, counted from when that stage opens. Empty: requests "
        "no stage applies to.",
    )

    class Meta:
        ordering = ["after_seconds", "pk"]
        constraints = [
            models.CheckConstraint(condition=models.Q(after_seconds__gte=1), name="escalationtier_after_min"),
        ]

    def __str__(self) -> str:
        return f"after {self.after_seconds} s"

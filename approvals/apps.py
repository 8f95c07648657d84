from django.apps import AppConfig


class ApprovalsConfig(AppConfig):
    name = "approvals"
    verbose_name = "Approvals"

    # What each role may do on this app's models (composed by tenancy.roles).
    role_permissions = {
        "auditor": {
            "approvals.approverpolicy": ("view",),
            "approvals.confirmationrequest": ("view",),
            "approvals.confirmationevent": ("view",),
            "approvals.channelconfig": ("view",),
        },
        "operator": {
            "approvals.approverpolicy": ("view", "add", "change", "delete"),
            "approvals.channelconfig": ("view", "add", "change", "delete"),
        },
        "approver": {"approvals.confirmationrequest": ("view",), "approvals.confirmationevent": ("view",)},
    }

    def ready(self) -> None:
        from agents.demo import demo_seeded
        from agents.engine.pipeline import register_approval_lookup
        from agents.history import register_connector_history
        from agents.signals import run_cancel_requested, run_cancelled
        from approvals.demo import demo_policy_seed
        from approvals.receivers import approval_was_asked, cancel_requests_of_run, requests_for_tools_of

        run_cancelled.connect(cancel_requests_of_run, dispatch_uid="approvals.cancel_requests_of_run")
        run_cancel_requested.connect(
            cancel_requests_of_run, dispatch_uid="approvals.cancel_requests_of_a_stopping_run"
        )
        demo_seeded.connect(demo_policy_seed, dispatch_uid="approvals.demo_policy_seed")
        register_connector_history("approvals.requests", requests_for_tools_of)
        register_approval_lookup(approval_was_asked)
        # The admin site sits below this app: it shows the inbox and history links it is given.
        from approvals.admin_links import approval_links, history_entry
        from fimone.admin_site import register_header_links, register_index_entry

        register_header_links("approval_links", approval_links)
        register_index_entry("approvals.history", "audit", history_entry)
        # The gate joins the hook catalog as it is declared (``@register_hook``); how a verdict's
        # follow-up reaches a worker is installed in the services (approvals.services.settling),
        # which never import the tasks. ``.delay`` is looked up when a verdict is sent, so a test
        # that stands in for the broker by replacing it on the task is still the one called.
        import approvals.gate  # noqa: F401
        from approvals.services.settling import install_settled_sender
        from approvals.tasks import confirmation_settled_task

        install_settled_sender(lambda *args: confirmation_settled_task.delay(*args))

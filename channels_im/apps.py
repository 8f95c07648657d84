from django.apps import AppConfig


class ChannelsImConfig(AppConfig):
    name = "channels_im"
    verbose_name = "IM channels"

    # What each role may do on this app's models (composed by tenancy.roles).
    role_permissions = {
        "auditor": {"channels_im.imidentity": ("view",)},
        "operator": {"channels_im.imidentity": ("view", "delete")},  # unlink; only the person links
    }

    def ready(self) -> None:
        # The approvals app sits below this one: it asks for a channel through its registry and
        # announces requests through signals, and this app answers (docs/design.md §2). Imported here, once
        # the app registry is ready: these modules load models.
        from approvals.channels import register_channel_resolver, register_provider_modules
        from approvals.models import ChannelKind
        from approvals.signals import confirmation_opened, confirmation_settled, confirmation_voted
        from channels_im.delivery import resolve_channel
        from channels_im.receivers import deliver_card, show_tally, update_card

        register_channel_resolver(resolve_channel)
        # Each channel kind's provider, imported the first time that kind is asked for.
        register_provider_modules({kind: f"channels_im.{kind}.transport" for kind in ChannelKind.values})
        confirmation_opened.connect(deliver_card, dispatch_uid="channels_im.deliver_card")
        confirmation_settled.connect(update_card, dispatch_uid="channels_im.update_card")
        confirmation_voted.connect(show_tally, dispatch_uid="channels_im.show_tally")

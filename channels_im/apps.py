from django.apps import AppConfig


class ChannelsImConfig(AppConfig):
    name = "channels_im"
    verbose_name = "IM channels"

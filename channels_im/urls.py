from django.urls import path

from channels_im.email.views import email_decision
from channels_im.views import im_callback, link_identity

urlpatterns = [
    path("callback/<str:callback_key>/", im_callback, name="im-callback"),
    path("link/<str:token>/", link_identity, name="im-link"),
    path("email/<str:token>/", email_decision, name="im-email-decision"),
]

from django.urls import path

from channels_im.views import im_callback

urlpatterns = [path("callback/<str:callback_key>/", im_callback, name="im-callback")]

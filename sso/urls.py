from django.urls import path

from sso import views

app_name = "sso"

urlpatterns = [
    path("<slug:slug>/start/", views.SignInStart.as_view(), name="start"),
    path("callback/", views.SignInCallback.as_view(), name="callback"),
]

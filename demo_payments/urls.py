"""Demo target service — not part of the platform: mounted at ``/demo/``."""

from django.urls import path

from demo_payments import views

app_name = "demo_payments"

urlpatterns = [
    path("", views.purchase_page, name="page"),
    path("api/purchases", views.purchase_list_api, name="purchase-list"),
    path("api/purchases/<str:purchase_id>", views.purchase_detail_api, name="purchase-detail"),
    path("api/purchases/<str:purchase_id>/pay", views.purchase_pay_api, name="purchase-pay"),
]

"""Demo target service — not part of the platform.

A tiny purchase-payment API that the demo agent calls through an HTTP connector, so that
``make run`` shows a real tool call, a real approval and a real side effect without any
external service. Nothing in the platform imports it except the demo set-up.
"""

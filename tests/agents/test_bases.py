"""The bases that engines and scoped REST views build on state what a subclass must define: one
that leaves it out cannot be made at all, rather than failing on its first run or request."""

from __future__ import annotations

import pytest
from rest_framework import serializers

from agents.engine.base import RunEngine
from agents.scoped_apis import ScopedListApi, ScopedRunStartApi


def test_an_engine_without_its_own_drive_cannot_be_made() -> None:
    class Idle(RunEngine):
        def _fresh_state(self) -> dict:
            return {}

    with pytest.raises(TypeError, match="_drive"):
        Idle(1)


def test_a_list_view_without_its_service_call_cannot_be_made() -> None:
    class NoCreate(ScopedListApi, operations="things", tag="things"):
        selector = staticmethod(lambda **_: [])
        InputSerializer = OutputSerializer = serializers.Serializer

    with pytest.raises(TypeError, match="create"):
        NoCreate()


def test_a_run_start_view_without_its_service_call_cannot_be_made() -> None:
    class NoStart(ScopedRunStartApi, operations="things", tag="things"):
        selector = staticmethod(lambda **_: None)
        InputSerializer = OutputSerializer = serializers.Serializer

    with pytest.raises(TypeError, match="start"):
        NoStart()

"""Bases of the REST views over what the caller's organisations own (workflows, eval sets and
their runs), for the apps above ``agents``.

Each base is one endpoint's plumbing, HackSoft style: the nested ``InputSerializer`` validates,
the view's ``selector`` reads for the caller (``None`` — another organisation's object, or none —
answers 404, never 403), one service writes (a :class:`~fimone.errors.ServiceError` answers by
:func:`~agents.apis.api_error`), the nested ``OutputSerializer`` answers. A subclass nests its
serializers, names its selector (a ``staticmethod``, called with ``user`` and the URL's ids as
keyword arguments) and its service call, and names its OpenAPI operations with two class
keywords: ``operations``, the prefix of their ids, and ``tag``::

    class WorkflowDetailApi(ScopedDetailApi, operations="workflows", tag="workflows"):
        selector = staticmethod(selectors.workflow_get)
        OutputSerializer = ...
"""

from __future__ import annotations

from abc import ABCMeta, abstractmethod
from collections.abc import Callable, Iterable
from typing import Any, ClassVar

from drf_spectacular.utils import extend_schema, extend_schema_view
from rest_framework import serializers, status
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from agents.apis import ERROR_RESPONSES, _not_found, api_error
from fimone.errors import ServiceError


class _ScopedApi(APIView, metaclass=ABCMeta):
    """A subclass that leaves an abstract service call undefined cannot be instantiated."""

    InputSerializer: ClassVar[type[serializers.Serializer]]
    OutputSerializer: ClassVar[type[serializers.Serializer]]
    selector: Callable[..., Any]

    def _selected(self, request: Request, ids: dict[str, Any]) -> Any:
        """What the selector reads for the caller by the URL's ``ids``, or 404."""
        selected = self.selector(user=request.user, **ids)
        if selected is None:
            raise _not_found()
        return selected

    def _validated(self, request: Request) -> dict[str, Any]:
        serializer = self.InputSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        return serializer.validated_data


class ScopedListApi(_ScopedApi):
    """GET (``<operations>_list``): what ``selector`` reads for the caller; POST
    (``<operations>_create``, 201): one created from the input by :meth:`create`."""

    def __init_subclass__(cls, *, operations: str, tag: str, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        extend_schema_view(
            get=extend_schema(
                operation_id=f"{operations}_list",
                tags=[tag],
                responses={200: cls.OutputSerializer(many=True)},
            ),
            post=extend_schema(
                operation_id=f"{operations}_create",
                tags=[tag],
                request=cls.InputSerializer,
                responses={201: cls.OutputSerializer, **ERROR_RESPONSES},
            ),
        )(cls)

    @abstractmethod
    def create(self, *, user: Any, data: dict[str, Any]) -> Any:
        """The service call creating the object ``data`` (the validated input) describes."""

    def get(self, request: Request) -> Response:
        selected: Iterable[Any] = self.selector(user=request.user)
        return Response(self.OutputSerializer(selected, many=True).data)

    def post(self, request: Request) -> Response:
        data = self._validated(request)
        try:
            created = self.create(user=request.user, data=data)
        except ServiceError as exc:
            raise api_error(exc) from None
        return Response(self.OutputSerializer(created).data, status=status.HTTP_201_CREATED)


class ScopedDetailApi(_ScopedApi):
    """GET (``<operations>_retrieve``): the object ``selector`` reads for the caller, or 404."""

    def __init_subclass__(cls, *, operations: str, tag: str, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        extend_schema_view(
            get=extend_schema(
                operation_id=f"{operations}_retrieve",
                tags=[tag],
                responses={200: cls.OutputSerializer, 404: ERROR_RESPONSES[404]},
            ),
        )(cls)

    def get(self, request: Request, **ids: Any) -> Response:
        return Response(self.OutputSerializer(self._selected(request, ids)).data)


class ScopedRunStartApi(_ScopedApi):
    """POST (``<operations>_start``, 201; 429 past the caller's ``RUN_START_RATE``): a run of the
    object ``selector`` reads for the caller (else 404), started from the input by :meth:`start`
    and answered as it is by then (it may have run already).

    The service behind :meth:`start` counts the runs it starts (one workflow run, or one run per
    case of an eval: :func:`agents.services.run_starts_take`), as it does for the admin's
    actions and the commands: the request itself is not counted a second time."""

    throttle_classes: list[Any] = []

    def __init_subclass__(cls, *, operations: str, tag: str, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        extend_schema_view(
            post=extend_schema(
                operation_id=f"{operations}_start",
                tags=[tag],
                request=cls.InputSerializer,
                responses={201: cls.OutputSerializer, **ERROR_RESPONSES},
            ),
        )(cls)

    @abstractmethod
    def start(self, selected: Any, *, user: Any, data: dict[str, Any]) -> Any:
        """The service call starting a run of ``selected`` as ``data`` (the validated input)
        says; a :class:`~rest_framework.exceptions.NotFound` it raises answers 404."""

    def post(self, request: Request, **ids: Any) -> Response:
        selected = self._selected(request, ids)
        data = self._validated(request)
        try:
            run = self.start(selected, user=request.user, data=data)
        except ServiceError as exc:
            raise api_error(exc) from None
        run = type(run).objects.get(pk=run.pk)
        return Response(self.OutputSerializer(run).data, status=status.HTTP_201_CREATED)

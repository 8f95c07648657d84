"""Secrets bound to the address they were entered for (docs/design.md §1.14).

A model that stores write-only secrets together with the address they are sent to mixes in
:class:`SecretsBoundToAddress` and takes :class:`SecretsBoundQuerySet` as its manager: a change that
moves the address clears the secrets unless it enters them anew, whichever way it is written
(``full_clean``, ``save``, ``QuerySet.update``). Connectors, agents and hook declarations use it.
"""

from __future__ import annotations

from typing import Any

from django.core.exceptions import ValidationError
from django.db import models, transaction

SECRETS_CLEARED = (
    "The stored secrets were cleared because the address changed: a secret is only sent to the "
    "address it was entered for. Enter it again for the new address."
)
_NOT_LOADED = object()


class SecretsBoundToAddress:
    """A model whose write-only secrets are sent to an address it also stores: a stored secret is
    bound to the address it was entered for.

    A change that moves the address (:meth:`secrets_address`; for a URL its origin: scheme, host
    and port) without entering the secrets anew clears them: on :meth:`full_clean`, so that a form
    refusing a model that cannot do without them says why, and again on :meth:`save`, so that every
    writer obeys (``QuerySet.update`` too: :class:`SecretsBoundQuerySet`). The secrets count as
    entered anew when the change assigned them another value than the one loaded (another object),
    or when the writer set :attr:`secrets_entered` (a form where they were typed again).
    :attr:`secrets_cleared` tells the writer afterwards, so it can say so.

    Subclasses (before ``models.Model`` in the bases) set :attr:`secrets_field`, the fields the
    address is made of (:attr:`secrets_address_fields`) and :meth:`secrets_address`.
    """

    secrets_field = "secrets"
    secrets_address_fields: frozenset[str] = frozenset()
    secrets_entered = False
    secrets_cleared = False

    def secrets_address(self) -> Any:
        """Where the secrets are sent; two equal values are one address."""
        raise NotImplementedError

    @classmethod
    def from_db(cls, db: str | None, field_names: Any, values: Any) -> Any:
        instance = super().from_db(db, field_names, values)  # type: ignore[misc]
        if cls.secrets_field not in instance.get_deferred_fields():
            instance._loaded_secrets = getattr(instance, cls.secrets_field)
        return instance

    def keep_secrets_home(self) -> bool:
        """Clear the secrets if this change moves their address and does not enter them anew;
        ``True`` when it cleared them."""
        current = getattr(self, self.secrets_field)
        state, pk = self._state, self.pk  # type: ignore[attr-defined]
        if state.adding or pk is None or current in (None, "", {}) or self.secrets_entered:
            return False
        manager = type(self)._base_manager  # type: ignore[attr-defined]
        stored = manager.using(state.db).filter(pk=pk).first()
        if stored is None or stored.secrets_address() == self.secrets_address():
            return False
        loaded = self.__dict__.get("_loaded_secrets", _NOT_LOADED)
        if loaded is _NOT_LOADED:
            carried = current == getattr(stored, self.secrets_field)
        else:
            carried = current is loaded
        if not carried:
            return False
        setattr(self, self.secrets_field, None)
        self.secrets_cleared = True
        return True

    def full_clean(self, *args: Any, **kwargs: Any) -> None:
        cleared = self.keep_secrets_home()
        try:
            super().full_clean(*args, **kwargs)  # type: ignore[misc]
        except ValidationError as exc:
            if not cleared:
                raise
            errors = exc.update_error_dict({})
            errors.setdefault(self.secrets_field, []).insert(0, ValidationError(SECRETS_CLEARED))
            raise ValidationError(errors) from None

    def save(self, *args: Any, **kwargs: Any) -> None:
        update_fields = kwargs.get("update_fields")
        may_move = update_fields is None or bool(self.secrets_address_fields & set(update_fields))
        if may_move and self.keep_secrets_home() and update_fields is not None:
            kwargs["update_fields"] = {*update_fields, self.secrets_field}
        super().save(*args, **kwargs)  # type: ignore[misc]
        self._loaded_secrets = getattr(self, self.secrets_field)
        self.secrets_entered = False

    def moves_secrets(self, changes: dict[str, Any]) -> bool:
        """Whether writing ``changes`` (field values, as ``QuerySet.update`` takes them) moves
        the address. An expression, whose value only the database knows, counts as a move."""
        before = self.secrets_address()
        for name, value in changes.items():
            if hasattr(value, "resolve_expression"):
                return True
            setattr(self, name, value)
        return self.secrets_address() != before


class SecretsBoundQuerySet(models.QuerySet[Any]):
    """``update()`` of a :class:`SecretsBoundToAddress` model: rows whose address it moves lose
    their secrets, unless the same update writes them."""

    def update(self, **kwargs: Any) -> int:
        model = self.model
        if model.secrets_field in kwargs or not model.secrets_address_fields & kwargs.keys():
            return super().update(**kwargs)
        rows = model._base_manager.using(self.db)
        with transaction.atomic(using=self.db):
            selected = rows.filter(pk__in=self.values("pk"))
            moved = [row.pk for row in selected if row.moves_secrets(dict(kwargs))]
            if moved:
                rows.filter(pk__in=moved).update(**{model.secrets_field: None})
            return super().update(**kwargs)

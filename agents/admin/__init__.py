"""What the admin of every app builds on, kept beside the models it scopes by (the model admins
of this app's models are the console's, :mod:`console.admin`):

- :mod:`agents.admin.scoping`: the organisation-scoping admin bases and mixins;
- :mod:`agents.admin.archiving`: Archive / Unarchive instead of deletion (docs/design.md §1.9);
- :mod:`agents.admin.bound_secrets`: write-only secrets bound to their address (docs/design.md §1.14).

Django's admin autodiscovery imports this package; it registers nothing.
"""

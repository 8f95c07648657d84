"""The approvals admin: approver policies (:mod:`~approvals.admin.policies`) and the read-only
approval record (:mod:`~approvals.admin.records`), scoped to the staff user's organisations
(:mod:`~approvals.admin.scoping`). Importing this package registers both with the admin site
(Django's admin autodiscovery imports it).
"""

from approvals.admin import policies, records

__all__ = ["policies", "records"]

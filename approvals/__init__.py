"""approvals app."""

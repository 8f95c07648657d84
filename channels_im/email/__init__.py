"""E-mail approvals: a message per approver with two signed links (approve / reject)."""

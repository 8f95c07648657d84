"""agents app."""

"""Tools an agent may call: connector actions, database connectors and built-ins."""

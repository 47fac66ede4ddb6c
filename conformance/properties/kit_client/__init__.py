"""Properties of the kit's client against the server: its calls, its integrations' call
patterns, and at most once through a fault proxy."""

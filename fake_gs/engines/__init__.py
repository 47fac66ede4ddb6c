"""Engines turn a decoded request into a result; the store owns ordering and state."""

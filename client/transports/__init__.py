"""Transports behind the ``client.transport`` seam: Cortex (REST) and recording (tests)."""

"""The locustfile gs-load hands Locust: the users, and the run's hooks (registered on import)."""

from conformance.load import locust_events  # noqa: F401  (registers the run's event hooks)
from conformance.load.users import RLLoop, Sampler, SFTLoop

__all__ = ["RLLoop", "SFTLoop", "Sampler"]

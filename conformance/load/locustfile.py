"""The locustfile gs-load hands Locust: the users, and (by importing them) the run's hooks."""

from conformance.load.users import RLLoop, Sampler, SFTLoop

__all__ = ["RLLoop", "SFTLoop", "Sampler"]

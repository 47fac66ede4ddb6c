"""gs-load: the contract under many concurrent RL loops, on Locust (one machine or many).

``cli`` is the ``gs-load`` command (Locust's own, with this package's locustfile and
options); ``users`` the Locust users (RL, SFT and sampler loops through the kit's client);
``checked_client`` is the kit's client each user drives, over ``measure``'s meter, which
times every exchange and hands it to the passive judge (``conformance.judge``); ``run`` and
``finish`` carry a run
across Locust's processes; ``report`` renders it. Importing this package pulls nothing:
Locust (and its gevent patching) is loaded by ``cli`` before anything else.
"""

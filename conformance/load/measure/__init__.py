"""What a load run measures: the meter times every try of every call the kit's client makes
and hands each exchange to the passive judge (:mod:`conformance.judge`), which judges it by
its clause and tallies it across processes.

May import: ``contract``, ``client``, ``conformance.judge`` and ``conformance.load``'s
options and profile.
"""

"""The fuzz suite: mutated extender and gRPC requests against an in-process
Berth, with a canary and the cluster's invariants checked as it goes.

``make test`` runs a bounded sample; ``make fuzz`` runs the long one
(``BERTH_FUZZ_HTTP``, ``BERTH_FUZZ_GRPC``, ``HYPOTHESIS_PROFILE=fuzz``).
Every failure names the run's seed and the request's index, so
``BERTH_FUZZ_SEED=<seed>`` replays the run that found it.
"""

"""Batch queues: hierarchical quotas with guarantees and limits, borrowing,
weighted fair share (DRF) and reclaim — decided in the scheduling cycle,
together with node fit.

- :mod:`berth.quota.spec`: the ``queues`` section of BerthConfiguration and
  its validation.
- :mod:`berth.quota.tree`: the queue tree — usage, pending demand, dominant
  shares, the admission check, the fair order, reclaim eligibility and the
  status ``berth queues`` shows.

No transport, no wire format: the scheduling loop and the adapters use it.
"""

from berth.quota.spec import PreemptionSpec, QueueSpec, validate_queues
from berth.quota.tree import QueueStatus, QueueTree, Verdict

__all__ = ["PreemptionSpec", "QueueSpec", "QueueStatus", "QueueTree", "Verdict", "validate_queues"]

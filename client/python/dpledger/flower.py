"""A pre-flight gate for round-based coordinators, in the shape of Flower's privacy
accountant: ``would_exceed(...)`` before a round, ``record_round(...)`` to charge it,
``get_epsilon`` / ``get_privacy_spent`` for reporting. Backed by a dpledger job, so several
coordinator processes (or a restarted one) share one budget.

    gate = PrivacyGate(ledger.open_job("fa-1", epsilon=4, delta=1e-8))
    mech = Gaussian(sigma=noise / clip)
    while not gate.would_exceed(mech):
        gate.record_round(mech)      # charge first ...
        publish(noisy_aggregate())   # ... then compute and release

would_exceed is advisory (another writer may spend between the check and the charge);
record_round is the authority: it raises :class:`dpledger.BudgetExceeded` when the budget
refuses the round, and then the round must not be released.
"""
from typing import Optional, Tuple

from .ledger import Job
from .mechanisms import MechanismLike
from .types import StepAck


class PrivacyGate:
    """Round gate over the dpledger job ``job``; ``delta`` defaults to the job's."""

    def __init__(self, job: Job, *, delta: Optional[float] = None):
        self.job = job
        self.delta = delta if delta is not None else job.info.budget.delta
        self.rounds = 0

    def remaining_rounds(self, mechanism: MechanismLike) -> int:
        """How many more rounds of ``mechanism`` the budget admits (server's Remaining)."""
        return self.job.remaining(mechanism).max_additional_steps

    def would_exceed(self, mechanism: MechanismLike, rounds: int = 1) -> bool:
        """True when ``rounds`` more rounds of ``mechanism`` would exceed the budget."""
        return self.remaining_rounds(mechanism) < rounds

    def record_round(self, mechanism: MechanismLike, count: int = 1) -> StepAck:
        """Charges one round (``count`` applications of ``mechanism``). Raises
        BudgetExceeded when refused."""
        ack = self.job.step(mechanism, count)
        self.rounds += 1
        return ack

    def get_epsilon(self, delta: Optional[float] = None) -> float:
        """Epsilon spent at ``delta`` (default: the gate's), certified upper bound."""
        return self.job.spent(delta=self.delta if delta is None else delta).upper

    def get_privacy_spent(self, delta: Optional[float] = None) -> Tuple[float, float]:
        """(epsilon, delta) spent so far."""
        d = self.delta if delta is None else delta
        return self.get_epsilon(d), d

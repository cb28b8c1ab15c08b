"""An accountant with Opacus' accountant interface, backed by a dpledger job.

Matches ``opacus.accountants.accountant.IAccountant`` of Opacus 1.4.0 (step(*,
noise_multiplier, sample_rate), get_epsilon(delta), __len__, the classmethod mechanism(),
get_optimizer_hook_fn, state_dict / load_state_dict, and ``history`` as RDPAccountant keeps
it: [(noise_multiplier, sample_rate, num_steps)], runs of equal steps merged). Opacus need not
be installed; when it is, the class is registered as a virtual subclass of IAccountant.

An Opacus user swaps one object::

    engine = PrivacyEngine()
    engine.accountant = DpledgerAccountant(ledger.open_job("run-1", epsilon=8, delta=1e-5))
    model, optimizer, loader = engine.make_private(...)

Differences that matter: every step() is charged to the job *before* the optimizer applies
its update, and a step the budget cannot admit raises :class:`dpledger.BudgetExceeded` (the
noisy update must then not be applied). get_epsilon returns the upper end of the admitting
accountant's certified interval (what budgets are charged with), the figure
``dpledger spent --delta D`` reports as its upper bound.
"""
from collections import OrderedDict
from copy import deepcopy
from typing import Callable, List, Optional, Tuple

from .ledger import Job
from .mechanisms import SubsampledGaussian


class DpledgerAccountant:
    """Opacus-style accountant whose privacy ledger is the dpledger job ``job``."""

    def __init__(self, job: Job):
        self.job = job
        self.history: List[Tuple[float, float, int]] = []

    @classmethod
    def mechanism(cls) -> str:
        return "dpledger"

    def step(self, *, noise_multiplier: float, sample_rate: float) -> None:
        """Charges one Poisson-subsampled Gaussian step (sampling rate 1: a full batch).
        Raises BudgetExceeded when the job's budget refuses it; nothing is then recorded."""
        self.job.step(SubsampledGaussian(sigma=noise_multiplier, q=sample_rate))
        if self.history and self.history[-1][:2] == (noise_multiplier, sample_rate):
            nm, rate, steps = self.history[-1]
            self.history[-1] = (nm, rate, steps + 1)
        else:
            self.history.append((noise_multiplier, sample_rate, 1))

    def get_epsilon(self, delta: float, *args, **kwargs) -> float:
        """Epsilon spent at ``delta`` by the whole job (its certified upper bound). Extra
        Opacus arguments (alphas, eps_error, ...) are accepted and ignored: the job's
        admitting accountant decides the method."""
        return self.job.spent(delta=delta).upper

    def __len__(self) -> int:
        # As Opacus' RDPAccountant: the number of history entries (runs of equal steps).
        return len(self.history)

    def get_optimizer_hook_fn(self, sample_rate: float) -> Callable:
        """The hook Opacus' PrivacyEngine attaches to the DPOptimizer (one step per call)."""
        def hook_fn(optim) -> None:
            self.step(noise_multiplier=optim.noise_multiplier,
                      sample_rate=sample_rate * optim.accumulated_iterations)
        return hook_fn

    def state_dict(self, destination: Optional[dict] = None) -> dict:
        """``history`` and ``mechanism`` as Opacus, plus the job (the ledger itself stays
        on the server, so a checkpoint can be resumed without double counting)."""
        if destination is None:
            destination = OrderedDict()
        destination["history"] = deepcopy(self.history)
        destination["mechanism"] = self.mechanism()
        destination["job_id"] = self.job.job_id
        destination["last_seq"] = self.job.last_seq
        return destination

    def load_state_dict(self, state_dict: dict) -> None:
        """Restores ``history``. ValueError as Opacus for a missing or foreign state, and
        when the state belongs to another job."""
        if not state_dict:
            raise ValueError("state dict is either None or empty and hence cannot be loaded"
                             " into Privacy Accountant.")
        for key in ("history", "mechanism"):
            if key not in state_dict:
                raise ValueError(f"state_dict does not have the key `{key}`. Cannot be loaded"
                                 " into Privacy Accountant.")
        if state_dict["mechanism"] != self.mechanism():
            raise ValueError(f"state_dict of {state_dict['mechanism']} accountant cannot be"
                             f" loaded into {self.mechanism()} accountant.")
        if state_dict.get("job_id", self.job.job_id) != self.job.job_id:
            raise ValueError(f"state_dict of job {state_dict['job_id']} cannot be loaded into"
                             f" the accountant of job {self.job.job_id}")
        self.history = deepcopy(state_dict["history"])


try:  # isinstance(accountant, IAccountant) holds where Opacus is installed.
    from opacus.accountants import IAccountant as _IAccountant
    _IAccountant.register(DpledgerAccountant)
except ImportError:
    pass

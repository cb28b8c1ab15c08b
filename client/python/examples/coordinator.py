#!/usr/bin/env python3
"""A federated-analytics coordinator: rounds of noisy aggregation over simulated clients,
each round cleared with dpledger first; it stops when the budget admits no more rounds.

Against `make run` (dpledgerd on 127.0.0.1:50051, plaintext), from the repository root:

    make run                                                     # in one terminal
    PYTHONPATH=client/python /usr/bin/python3 client/python/examples/coordinator.py

(After `pip install ./client/python` the PYTHONPATH is not needed.) Each run creates a new
job (--job, default fa-<time>) with budget --epsilon/--delta. A round Poisson-samples each
of --clients clients with probability --q, sums their values in [0, 1] (sensitivity 1 under
add/remove of one client) and adds Gaussian noise of standard deviation --sigma: a
SubsampledGaussian(sigma, q) charged to the job before the aggregate is computed.
Prints one line per round and exits 0 when the budget stops it (1 on --max-rounds).
"""
import argparse
import time

import numpy as np

from dpledger import BudgetExceeded, Ledger, SubsampledGaussian
from dpledger.flower import PrivacyGate


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--server", default="127.0.0.1:50051")
    p.add_argument("--job", default=f"fa-{int(time.time() * 1000)}")
    p.add_argument("--epsilon", type=float, default=2.0)
    p.add_argument("--delta", type=float, default=1e-8)
    p.add_argument("--sigma", type=float, default=4.0)
    p.add_argument("--q", type=float, default=0.1)
    p.add_argument("--clients", type=int, default=2000)
    p.add_argument("--max-rounds", type=int, default=10000)
    p.add_argument("--seed", type=int, default=1)
    args = p.parse_args(argv)

    rng = np.random.default_rng(args.seed)
    values = rng.beta(2, 5, size=args.clients)  # each client's private value in [0, 1]
    mechanism = SubsampledGaussian(sigma=args.sigma, q=args.q)
    with Ledger(args.server) as ledger:
        gate = PrivacyGate(ledger.open_job(args.job, epsilon=args.epsilon, delta=args.delta))
        print(f"job {args.job}: budget epsilon {args.epsilon} at delta {args.delta}; "
              f"true mean {values.mean():.4f}")
        for round_no in range(1, args.max_rounds + 1):
            if gate.would_exceed(mechanism):
                break
            try:
                gate.record_round(mechanism)  # charge first, then aggregate
            except BudgetExceeded as refused:  # another writer spent it meanwhile
                print(f"round {round_no} refused: {refused}")
                break
            sampled = values[rng.random(args.clients) < args.q]
            noisy_sum = sampled.sum() + rng.normal(0.0, args.sigma)
            estimate = noisy_sum / (args.q * args.clients)
            print(f"round {round_no:4d}  mean estimate {estimate:.4f}  "
                  f"epsilon spent {gate.get_epsilon():.4f}")
        else:
            print(f"stopped at --max-rounds {args.max_rounds}")
            return 1
        eps, delta = gate.get_privacy_spent()
        print(f"stopped after {gate.rounds} rounds: the budget admits no more "
              f"(epsilon {eps:.4f} of {args.epsilon} at delta {delta:g})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

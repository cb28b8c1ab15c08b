#!/usr/bin/env python3
"""A DP-SGD loop skeleton charging one step per batch to dpledger through the
Opacus-shaped accountant (logistic regression on synthetic data, numpy only).

Against `make run` (dpledgerd on 127.0.0.1:50051, plaintext), from the repository root:

    make run                                                     # in one terminal
    PYTHONPATH=client/python /usr/bin/python3 client/python/examples/dpsgd.py

Each batch is Poisson-sampled with rate q = --batch / --examples; per-example gradients are
clipped to norm --clip, summed, and Gaussian noise of standard deviation
--noise-multiplier * --clip is added. accountant.step(...) charges the batch *before* the
noisy update is applied; when the budget refuses it, training stops (BudgetExceeded) with
the model as it was after the last admitted step. With Opacus the same accountant object
replaces PrivacyEngine.accountant.
"""
import argparse
import time

import numpy as np

from dpledger import BudgetExceeded, Ledger
from dpledger.opacus import DpledgerAccountant


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--server", default="127.0.0.1:50051")
    p.add_argument("--job", default=f"dpsgd-{int(time.time() * 1000)}")
    p.add_argument("--epsilon", type=float, default=3.0)
    p.add_argument("--delta", type=float, default=1e-5)
    p.add_argument("--examples", type=int, default=4000)
    p.add_argument("--batch", type=int, default=128)
    p.add_argument("--noise-multiplier", type=float, default=1.0)
    p.add_argument("--clip", type=float, default=1.0)
    p.add_argument("--lr", type=float, default=0.5)
    p.add_argument("--epochs", type=int, default=3)
    p.add_argument("--seed", type=int, default=1)
    args = p.parse_args(argv)

    rng = np.random.default_rng(args.seed)
    w_true = rng.normal(size=5)
    x = rng.normal(size=(args.examples, 5))
    y = (x @ w_true + 0.3 * rng.normal(size=args.examples) > 0).astype(float)
    w = np.zeros(5)
    q = args.batch / args.examples
    with Ledger(args.server) as ledger:
        accountant = DpledgerAccountant(
            ledger.open_job(args.job, epsilon=args.epsilon, delta=args.delta))
        steps = 0
        try:
            for epoch in range(1, args.epochs + 1):
                for _ in range(int(round(1 / q))):
                    batch = rng.random(args.examples) < q
                    xb, yb = x[batch], y[batch]
                    grads = (1 / (1 + np.exp(-xb @ w)) - yb)[:, None] * xb  # per example
                    norms = np.maximum(np.linalg.norm(grads, axis=1) / args.clip, 1.0)
                    noisy = (grads / norms[:, None]).sum(axis=0) + rng.normal(
                        0.0, args.noise_multiplier * args.clip, size=w.shape)
                    accountant.step(noise_multiplier=args.noise_multiplier, sample_rate=q)
                    w -= args.lr * noisy / args.batch
                    steps += 1
                accuracy = ((x @ w > 0) == (y > 0)).mean()
                print(f"epoch {epoch}  steps {steps}  accuracy {accuracy:.3f}  "
                      f"epsilon {accountant.get_epsilon(args.delta):.4f}")
        except BudgetExceeded as refused:
            print(f"stopped at step {steps + 1}: {refused}")
        print(f"trained {steps} steps; epsilon {accountant.get_epsilon(args.delta):.4f} "
              f"of {args.epsilon} at delta {args.delta:g}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

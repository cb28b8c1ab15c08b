#!/usr/bin/python3
"""Independent reference values for tilt_moment_bound_test.cc (issue 14): the same
closed forms as core/evr/tilt_moment_bound.h, written from the derivation with
numpy/scipy (Debian python3-numpy, python3-scipy), minimised by a plain grid.

  /usr/bin/python3 core/evr/tilt_moment_bound_ref.py
prints the output-tilt nu at the spec's Fig. 10 setting (9.11e-9 at theta ~0.045; SMC
2.56e-6) and the loss-tilt nu at the issue's release target (order 7, 1.41e-9)."""
import numpy as np
from scipy.special import gammaln, logsumexp


def log_c(lam):
    return np.log(4) + lam * np.log(lam) - (lam + 2) * np.log(lam + 2)


def log_binom(n, j):
    return gammaln(n + 1) - gammaln(j + 1) - gammaln(n - j + 1)


def log_output_factor(th, lam, s, q):
    """log E_P[M_P(th) e^{-th t + lam y(t)}], integer lam, binomial expansion."""
    j = np.arange(lam + 1)
    a = j / s**2 - th
    lead = log_binom(lam, j) + (lam - j) * np.log1p(-q) + j * np.log(q) - j / (2 * s * s)
    inner = np.logaddexp(np.log1p(-q) + a * a * s * s / 2, np.log(q) + a + a * a * s * s / 2)
    log_m = s * s * th * th / 2 + np.logaddexp(np.log1p(-q), np.log(q) + th)
    return log_m + logsumexp(lead + inner)


def log_a(alpha, s, q):
    if alpha <= 0:
        return 0.0
    j = np.arange(alpha + 1)
    return logsumexp(log_binom(alpha, j) + (alpha - j) * np.log1p(-q) + j * np.log(q)
                     + j * (j - 1) / (2 * s * s))


def output_tilt_nu(th, s, q, k, eps):
    return min(log_c(l) - l * eps + k * log_output_factor(th, l, s, q) for l in range(1, 120))


def loss_tilt_nu(n, s, q, k, eps):
    return min(log_c(l) - l * eps + k * (log_a(n + 1, s, q) + log_a(l - n + 1, s, q))
               for l in range(max(n - 1, 1), n + 80))


if __name__ == "__main__":
    s, q, k, eps = 2.0, 0.01, 1000, 0.6222731291229167
    grid = np.linspace(0, 0.2, 401)
    vals = [output_tilt_nu(t, s, q, k, eps) for t in grid]
    i = int(np.argmin(vals))
    print("fig10 output tilt: theta %.4f nu %.4g; smc nu %.4g"
          % (grid[i], np.exp(vals[i]), np.exp(output_tilt_nu(0, s, q, k, eps))))
    s, q, k, eps = 1.0, 0.01, 1000, 1.9187046699488315
    best = min((loss_tilt_nu(n, s, q, k, eps), n) for n in range(0, 12))
    print("release target loss tilt: order %d nu %.4g" % (best[1], np.exp(best[0])))

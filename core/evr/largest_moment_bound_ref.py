#!/usr/bin/python3
"""Independent reference values for largest_moment_bound_test.cc (issue 14): the bounds of
core/evr/largest_moment_bound.h written from the derivation with numpy/scipy (Debian
python3-numpy, python3-scipy), on the C++ cells (the cut passed in, 256 uniform lower ends
up to max(cut + s, t* + 12 s), Chernoff orders 1..128), and the estimator itself sampled
with numpy for its empirical second moment.

  /usr/bin/python3 core/evr/largest_moment_bound_ref.py
prints, at the spec's Fig. 6 setting (s 0.6, q 1e-3, k 1000, eps 1.5, cut 2.6798409 as
planned at beta_max = Delta/1000), nu / delta^2 = 12.40 and beta = 1.56e-11, then the
empirical E[x^2] / delta^2 (3.9) and delta_hat of 1e5 numpy paths."""
import numpy as np
from scipy.special import gammaln, logsumexp
from scipy.stats import norm

S, Q, K, EPS, DELTA = 0.6, 1e-3, 1000, 1.5, 7.706069e-6
LAMS = np.arange(1, 129)


def y(t):
    return np.log1p(Q * np.expm1((2 * t - 1) / (2 * S * S)))


def log_r(lam, x):
    """log E_P[e^{lam y(t)} 1{t <= x}] (spec 4.7.2 (b))."""
    j = np.arange(lam + 1)
    lc = gammaln(lam + 1) - gammaln(j + 1) - gammaln(lam - j + 1) + (lam - j) * np.log1p(-Q) + j * np.log(Q)
    a = lc + np.log1p(-Q) + j * (j - 1) / (2 * S * S) + norm.logcdf((x - j) / S)
    b = lc + np.log(Q) + j * (j + 1) / (2 * S * S) + norm.logcdf((x - 1 - j) / S)
    return logsumexp(np.concatenate([a, b]))


def log_sup_f(u, lam):
    return u * np.log(u) + lam * np.log(lam) - (u + lam) * np.log(u + lam)


def log_cdf(x):
    return np.logaddexp(np.log1p(-Q) + norm.logcdf(x / S), np.log(Q) + norm.logcdf((x - 1) / S))


def log_b(t):
    if not np.isfinite(t):
        return 0.0
    v = [log_sup_f(2, l) + l * (y(t) - EPS) + (K - 1) * log_r(l, t) for l in LAMS]
    return min(0.0, (K - 1) * log_cdf(t), min(v))


def log_beta(c):
    v = [log_sup_f(1, l) - l * EPS + K * log_r(l, c) for l in LAMS]
    return min(0.0, K * log_cdf(c), min(v))


def mass(a, b):
    sf = lambda z: norm.sf(z)
    return (1 - Q) * (sf(a / S) - sf(b / S)) + Q * (sf((a - 1) / S) - sf((b - 1) / S))


def plan(cut, n=256):
    t_star = 0.5 + S * S * (np.log(np.expm1(EPS) + Q) - np.log(Q))
    top = max(cut + S, t_star + 12 * S)
    lower = cut + (top - cut) * np.arange(n) / (n - 1)
    upper = np.append(lower[1:], np.inf)
    m = np.array([mass(a, b) for a, b in zip(lower, upper)])
    lb = np.array([log_b(u) for u in upper])
    rho = np.exp(0.5 * (lb - lb.max()))
    rho /= np.sum(m * rho)
    nu = K * K * np.sum(m * np.exp(lb) / rho)
    return lower, m, rho, nu


def sample(lower, m, rho, paths, rng):
    upper = np.append(lower[1:], np.inf)
    b = rng.choice(len(m), size=paths, p=m * rho / np.sum(m * rho))
    a, hi = lower[b], upper[b]
    m1 = Q * (norm.sf((a - 1) / S) - norm.sf((hi - 1) / S))
    m0 = (1 - Q) * (norm.sf(a / S) - norm.sf(hi / S))
    mu = (rng.random(paths) < m1 / (m0 + m1)) * 1.0
    sa, sb = norm.sf((a - mu) / S), norm.sf((hi - mu) / S)
    t0 = mu + S * norm.isf(sa - rng.random(paths) * (sa - sb))
    t = rng.normal(0, S, (paths, K - 1)) + (rng.random((paths, K - 1)) < Q)
    allt = np.concatenate([t0[:, None], t], axis=1)
    cell = np.searchsorted(lower, allt, side="left") - 1
    r = np.where(cell >= 0, rho[np.maximum(cell, 0)], 0.0)
    f = np.maximum(0, -np.expm1(EPS - y(allt).sum(1)))
    return K / r.sum(1) * f


if __name__ == "__main__":
    cut = 2.6798409167414956
    lower, m, rho, nu = plan(cut)
    print("nu = %.6g (%.4f delta^2), beta = %.4g" % (nu, nu / DELTA**2, np.exp(log_beta(cut))))
    rng = np.random.default_rng(1)
    x = np.concatenate([sample(lower, m, rho, 10000, rng) for _ in range(10)])
    print("numpy %d paths: delta_hat %.5g +- %.2g, E[x^2]/delta^2 %.3f" %
          (len(x), x.mean(), x.std() / np.sqrt(len(x)), np.mean(x * x) / DELTA**2))

#!/usr/bin/python3
"""Independent reference values for heterogeneous ledgers (issue 15 item 2): delta(eps)
and eps(delta), per direction, of ledgers mixing Poisson-subsampled Gaussian steps of
several (sigma, q) and plain Gaussian steps (q = 1).

Method: that of scripts/pld_reference_values.py (numpy/scipy only, apart from the C++
code), generalised to several mechanisms: each mechanism's connect-the-dots loss pmf
on a common grid h, all tilted at the saddle point of the whole ledger's query,
FFT, each raised to its count, multiplied, untilted; Richardson from h and h/2
(printed accuracy |v(h/2) - v(h)| / 3).

usage: /usr/bin/python3 scripts/hetero_reference_values.py [h [H1,H6,...]]
       (prints C++ table rows; the second argument picks ledgers)
"""
import os
import sys

import numpy as np
from scipy.optimize import brentq

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from pld_reference_values import delta_of, richardson, step_pmf  # noqa: E402


def parts_of(ledger, direction, h):
    """ledger: [(sigma, q, k)]; q = 1 is a plain Gaussian step."""
    out = []
    for sigma, q, k in ledger:
        with np.errstate(divide="ignore", invalid="ignore"):
            i0, m, inf = step_pmf(sigma, min(q, 1 - 1e-15), direction, h)
        out.append((i0, m, inf, k))
    return out


def tilted(i0, m, h, t):
    li = (i0 + np.arange(len(m))) * h
    with np.errstate(divide="ignore"):
        lw = np.log(m) + t * li
    lz = np.max(lw) + np.log(np.sum(np.exp(lw - np.max(lw))))
    w = np.exp(lw - lz)
    mean = np.sum(w * li)
    return w, lz, mean, np.sum(w * (li - mean) ** 2)


def saddle(parts, h, eps):
    def kprime(t):
        return sum(k * tilted(i0, m, h, t)[2] for i0, m, _, k in parts) - eps
    if kprime(0) >= 0:
        return 0.0
    hi = 1.0
    while kprime(hi) < 0:
        hi *= 2
        if hi > 2000:
            return 2000.0
    return brentq(kprime, 0, hi, xtol=1e-6)


def compose(parts, h, t, width_nats=12):
    stats = [tilted(i0, m, h, t) for i0, m, _, _ in parts]
    center = sum(k * s[2] for s, (_, _, _, k) in zip(stats, parts))
    sd = np.sqrt(sum(k * s[3] for s, (_, _, _, k) in zip(stats, parts)))
    n = 1 << int(np.ceil(np.log2((40 * sd + width_nats) / h)))
    spec = np.ones(n // 2 + 1, dtype=complex)
    s0, log_z, inf_keep = 0, 0.0, 1.0
    for (w, lz, _, _), (i0, m, inf, k) in zip(stats, parts):
        a = np.zeros(n)
        np.add.at(a, np.arange(len(w)) % n, w)
        spec *= np.fft.rfft(a) ** k
        s0 += k * i0
        log_z += k * lz
        inf_keep *= (1 - inf) ** k
    c = np.fft.irfft(spec, n)
    ws = int(np.round((center - 0.3 * n * h) / h))
    idx = ws + np.mod(s0 + np.arange(n) - ws, n)
    losses = idx * h
    mass = np.maximum(c, 0) * np.exp(log_z - t * losses)
    order = np.argsort(idx)
    return losses[order], mass[order], 1 - inf_keep


def ledger_delta(ledger, direction, eps, h):
    parts = parts_of(ledger, direction, h)
    L, M, I = compose(parts, h, saddle(parts, h, eps))
    return delta_of(L, M, I, eps)


def ledger_eps(ledger, direction, delta, h):
    parts = parts_of(ledger, direction, h)
    eps = 0.5
    for _ in range(3):  # re-tilt at the epsilon found
        L, M, I = compose(parts, h, saddle(parts, h, eps))
        f = lambda e: delta_of(L, M, I, e) - delta
        if f(0.0) <= 0:
            return 0.0
        eps = brentq(f, 0.0, L[-1], xtol=1e-12)
    return eps


LEDGERS = {  # name: [(sigma, q, k)], q = 1: plain Gaussian
    "H1": [(1.0, 1e-3, 1000), (0.8, 2e-3, 500)],
    "H2": [(1.0, 1e-4, 10000), (0.7, 1e-4, 5000), (30.0, 1.0, 10)],
    "H3": [(1.0, 0.01, 1000), (1.5, 0.01, 2000)],
    "H4": [(2.0, 0.1, 200), (1.0, 0.01, 500), (20.0, 1.0, 20)],
    "H5": [(1.0, 0.1, 100), (1.0, 1e-3, 2000)],
    # Three and four distinct subsampled mechanisms (issue 15: G >= 3 conditioned).
    "H6": [(1.0, 1e-3, 1000), (1.1, 2e-3, 1000), (1.2, 3e-3, 1000)],
    "H7": [(1.0, 1e-3, 1000), (1.1, 2e-3, 1000), (1.2, 3e-3, 1000), (1.3, 4e-3, 1000)],
}
CASES = [  # (ledger, query, value)
    ("H1", "delta", 1.0), ("H1", "eps", 1e-9),
    ("H2", "delta", 0.5), ("H2", "eps", 1e-12),
    ("H3", "delta", 2.0), ("H3", "eps", 1e-5),
    ("H4", "delta", 1.5), ("H4", "eps", 1e-9),
    ("H5", "delta", 2.0), ("H5", "eps", 1e-12),
    ("H6", "delta", 1.0), ("H6", "eps", 1e-9),
    ("H7", "delta", 1.0), ("H7", "eps", 1e-9),
]


def main():
    h = float(sys.argv[1]) if len(sys.argv) > 1 else 1e-4
    only = sys.argv[2].split(",") if len(sys.argv) > 2 else None
    for name, query, v in CASES:
        if only and name not in only:
            continue
        for d in ["remove", "add"]:
            fn = ledger_eps if query == "eps" else ledger_delta
            val, acc = richardson(lambda hh: fn(LEDGERS[name], d, v, hh), h)
            print(f"  // {name} {d} {query}({v}) = {val:.10g} +- {acc:.2g}")
            sys.stdout.flush()


if __name__ == "__main__":
    main()

#!/usr/bin/python3
"""PLD precision knob (issue 15 item 1): certified interval and time of
`dpledger account --accountant pld` against independent references, for several
--pld-precision values. Gaussian references are closed forms in mpmath (50 digits);
subsampled-Gaussian references are the spec tables (mc-evr.md 9.4, spa.md 9.3).

usage: /usr/bin/python3 scripts/pld_precision_check.py [build/client/dpledger] [P ...]
"""
import json, subprocess, sys, time
import mpmath as mp

mp.mp.dps = 50

def gauss_delta(mu, eps):
    mu, eps = mp.mpf(mu), mp.mpf(eps)
    return mp.ncdf(-eps / mu + mu / 2) - mp.e**eps * mp.ncdf(-eps / mu - mu / 2)

def gauss_eps(mu, delta):
    lo, hi = mp.mpf(0), mp.mpf(60)  # delta decreases in eps: bisect to 1e-30
    while hi - lo > mp.mpf('1e-30'):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if gauss_delta(mu, mid) > delta else (lo, mid)
    return hi

G = "gaussian:sigma=70,count=1200"
MU = mp.sqrt(1200) / 70
CASES = [  # (step, query flag, value, reference, reference's relative accuracy, source)
    (G, "--epsilon", 2.0, gauss_delta(MU, 2), 1e-15, "closed form"),
    (G, "--epsilon", 3.0, gauss_delta(MU, 3), 1e-15, "closed form"),
    (G, "--delta", 1e-5, gauss_eps(MU, mp.mpf('1e-5')), 1e-15, "closed form"),
    (G, "--delta", 1e-10, gauss_eps(MU, mp.mpf('1e-10')), 1e-15, "closed form"),
    ("subsampled_gaussian:sigma=0.6,q=0.001,count=100", "--epsilon", 1.0, 4.105495e-6, 1e-4, "mc-evr.md 9.4"),
    ("subsampled_gaussian:sigma=0.6,q=0.001,count=100", "--epsilon", 2.0, 1.268062e-7, 1e-4, "mc-evr.md 9.4"),
    ("subsampled_gaussian:sigma=0.6,q=0.001,count=1000", "--epsilon", 1.5, 7.706069e-6, 5e-4, "mc-evr.md 9.4"),
    ("subsampled_gaussian:sigma=0.5,q=0.001,count=1000", "--epsilon", 2.0, 1.509960e-4, 5e-4, "mc-evr.md 9.4"),
]

def run(dpledger, step, flag, value, precision):
    cmd = [dpledger, "account", "--accountant", "pld", flag, repr(value), "--step", step, "--json"]
    if precision is not None:
        cmd += ["--pld-precision", repr(precision)]
    t0 = time.perf_counter()
    out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
    return json.loads(out), time.perf_counter() - t0

def main():
    dpledger = sys.argv[1] if len(sys.argv) > 1 else "build/client/dpledger"
    precisions = [float(p) for p in sys.argv[2:]] or [None, 1e-3, 1e-4]
    print("| ledger | query | P | reference | lower | upper | width | upper-ref | est-ref | time |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for step, flag, value, ref, _, src in CASES:
        ref = float(ref)
        for p in precisions:
            d, secs = run(dpledger, step, flag, value, p)
            b = d["epsilon" if flag == "--delta" else "delta"]
            lo, up, est = b["lower"], b["upper"], b["estimate"]
            print(f"| {step} | {flag[2:]}={value} | {p or 'default'} | {ref:.10g} ({src}) | {lo:.8g} | "
                  f"{up:.8g} | {(up - lo) / up:.2e} | {(up - ref) / ref:+.2e} | {(est - ref) / ref:+.2e} | "
                  f"{secs * 1e3:.0f} ms |")

if __name__ == "__main__":
    main()

#!/usr/bin/python3
"""Accuracy and time of the certified accountants on the issue-15 settings.

For each setting and query direction: each accountant's estimate, its relative
error against the reference, its interval and the wall time of the whole
`dpledger account` process. Reference: the PLD accountant at --pld-precision 1e-4
(a fine grid; its own certified interval is printed, and where it did not reach
1e-4 its width is the reference's uncertainty).

usage: /usr/bin/python3 scripts/accuracy_table.py [build/client/dpledger]
"""
import json, subprocess, sys, time

SETTINGS = [  # (sigma, q, steps, delta)
    (1.0, 1e-4, 100000, 1e-12),
    (1.0, 1e-3, 1000, 1e-9),
    (1.0, 1e-3, 10000, 1e-9),
    (0.6, 1e-3, 1000, 1e-5),
    (1.0, 1e-2, 1000, 1e-5),
    (1.0, 1e-2, 10000, 1e-10),
    (1.0, 0.1, 100, 1e-5),
    (2.0, 0.1, 1000, 1e-12),
]
ACCOUNTANTS = ["pld", "spa", "edgeworth"]

def run(exe, acc, flag, value, step, extra=()):
    cmd = [exe, "account", "--accountant", acc, flag, repr(value), "--step", step, "--json", *extra]
    t0 = time.perf_counter()
    p = subprocess.run(cmd, capture_output=True, text=True)
    secs = time.perf_counter() - t0
    if p.returncode != 0:
        return None, secs, p.stderr.strip()
    d = json.loads(p.stdout)
    return d["epsilon" if flag == "--delta" else "delta"], secs, d.get("diagnostics", {})

def fmt(x):
    return "null" if x is None else f"{x:.6g}"

def main():
    exe = sys.argv[1] if len(sys.argv) > 1 else "build/client/dpledger"
    print("| setting | query | reference (PLD 1e-4) | accountant | estimate | rel. error | interval | time |")
    print("|---|---|---|---|---|---|---|---|")
    for s, q, k, delta in SETTINGS:
        step = f"subsampled_gaussian:sigma={s},q={q},count={k}"
        ref, rsecs, _ = run(exe, "pld", "--delta", delta, step, ("--pld-precision", "1e-4"))
        eps = ref["estimate"]
        dref, dsecs, _ = run(exe, "pld", "--epsilon", eps, step, ("--pld-precision", "1e-4"))
        for flag, value, r, rs in (("--delta", delta, ref, rsecs), ("--epsilon", eps, dref, dsecs)):
            rtxt = f"{r['estimate']:.6g} [{r['lower']:.6g}, {r['upper']:.6g}] {rs * 1e3:.0f} ms"
            for acc in ACCOUNTANTS:
                b, secs, diag = run(exe, acc, flag, value, step)
                if b is None:
                    print(f"| s={s} q={q} k={k} | {flag[2:]}={value:.6g} | {rtxt} | {acc} | error: {diag} | | | |")
                    continue
                err = (b["estimate"] - r["estimate"]) / r["estimate"]
                print(f"| s={s} q={q} k={k} | {flag[2:]}={value:.6g} | {rtxt} | {acc} | {fmt(b['estimate'])} | "
                      f"{err:+.2e} | [{fmt(b['lower'])}, {fmt(b['upper'])}] {b['guarantee']} | {secs * 1e3:.0f} ms |")

if __name__ == "__main__":
    main()

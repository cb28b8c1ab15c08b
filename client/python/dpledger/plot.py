"""Pictures of a job's privacy spend (issue 17): ``python3 -m dpledger plot``.

Spend picture: epsilon (nats, at the job's delta) after each ledger entry as the band
certified lower..upper with the estimate inside it, the budget as a line, and releases as
markers at the ledger entry they cover. The values come from the server's ledger (GetLedger:
each entry's ``spent`` is the admitting accountant's bound after it) or, for an offline
ledger, from ``dpledger account`` on each prefix of the ``--step`` specs.

Compare picture (``--compare``): the same ledger accounted by each accountant through
``dpledger account``: the PLD certified band, and the rdp, spa, edgeworth and mc estimates
(mc is a statistical estimate, edgeworth may certify nothing; README "Which accountant?").

Every picture is drawn from a :class:`SpendSeries`; ``--data FILE`` writes it as JSON, so
what was plotted can be checked against the ledger without reading pixels. matplotlib
(Debian python3-matplotlib) is imported only here, with its file-only Agg backend.
"""
import argparse
import json
import math
import os
import shutil
import subprocess
import sys
from dataclasses import asdict, dataclass, field
from typing import Dict, List, Optional, Sequence, Tuple

COMPARE_ACCOUNTANTS = ("pld", "rdp", "spa", "edgeworth", "mc")


@dataclass
class Curve:
    """One accountant's epsilon after each plotted entry; None where it gives no value
    (e.g. edgeworth certifies no upper bound at this delta)."""
    lower: List[Optional[float]] = field(default_factory=list)
    estimate: List[Optional[float]] = field(default_factory=list)
    upper: List[Optional[float]] = field(default_factory=list)
    guarantee: str = ""


@dataclass
class SpendSeries:
    title: str
    delta: float
    x: List[int]                      # ledger seq (offline: the --step index, from 1)
    curves: Dict[str, Curve]          # accountant name -> its values at x
    budget_epsilon: Optional[float] = None
    releases: List[Tuple[int, float]] = field(default_factory=list)  # (ledger_seq, epsilon)
    band: str = ""                    # the accountant drawn as the certified band


def from_server(ledger, job_id: str, release_ids: Sequence[str] = ()) -> SpendSeries:
    """The job's ledger as the server recorded it (``ledger``: a dpledger.Ledger)."""
    info = ledger.get_job(job_id)
    entries = list(ledger.ledger_entries(job_id))
    curve = Curve([e.spent.lower for e in entries], [e.spent.estimate for e in entries],
                  [e.spent.upper for e in entries], info.spent.guarantee.name.lower())
    releases = []
    for rid in release_ids:  # the API has no release listing: the caller names them
        r = ledger.get_release(rid)
        releases.append((r.ledger_seq, r.epsilon))
    return SpendSeries(f"job {info.tenant + '/' if info.tenant else ''}{job_id} "
                       f"({info.accountant}, delta={info.budget.delta:g})",
                       info.budget.delta, [e.seq for e in entries], {info.accountant: curve},
                       info.budget.epsilon, releases, band=info.accountant)


def server_steps(ledger, job_id: str) -> Tuple[List[int], List[List[str]]]:
    """Each ledger entry's seq and its steps as SPEC strings (with counts)."""
    entries = list(ledger.ledger_entries(job_id))
    return [e.seq for e in entries], [e.steps for e in entries]


def account(cli: str, accountant: str, delta: float, specs: Sequence[str],
            mc_samples: int = 20000, seed: int = 1) -> dict:
    """``dpledger account --json`` on ``specs``; its answer's "epsilon" bound."""
    argv = [cli, "account", "--accountant", accountant, "--delta", repr(delta), "--json"]
    if accountant == "mc":
        argv += ["--samples", str(mc_samples), "--seed", str(seed)]
    for s in specs:
        argv += ["--step", s]
    p = subprocess.run(argv, capture_output=True, text=True, timeout=600)
    if p.returncode != 0:
        raise RuntimeError(f"{' '.join(argv[:4])} ... failed: {p.stderr.strip() or p.stdout}")
    return json.loads(p.stdout)["epsilon"]


def pick(n: int, points: int) -> List[int]:
    """Up to ``points`` indices of 0..n-1, evenly spread, always including the last."""
    if n <= points:
        return list(range(n))
    return sorted({round(i * (n - 1) / (points - 1)) for i in range(points)})


def from_specs(cli: str, entries: Sequence[Sequence[str]], delta: float,
               accountants: Sequence[str], x: Optional[Sequence[int]] = None,
               points: int = 0, mc_samples: int = 20000, title: str = "",
               budget_epsilon: Optional[float] = None) -> SpendSeries:
    """Each accountant's epsilon after each entry (a list of SPECs), by ``dpledger account``
    on the ledger's prefixes; ``points`` > 0 evaluates only that many prefixes."""
    x = list(x) if x is not None else list(range(1, len(entries) + 1))
    idx = pick(len(entries), points) if points > 0 else list(range(len(entries)))
    curves: Dict[str, Curve] = {}
    for name in accountants:
        c = Curve()
        for i in idx:
            b = account(cli, name, delta, [s for e in entries[:i + 1] for s in e], mc_samples)
            c.lower.append(b.get("lower"))
            c.estimate.append(b.get("estimate"))
            c.upper.append(b.get("upper"))
            c.guarantee = b.get("guarantee", "")
        curves[name] = c
    return SpendSeries(title or f"offline ledger (delta={delta:g})", delta,
                       [x[i] for i in idx], curves, budget_epsilon, [], band=accountants[0])


def _nan(values: Sequence[Optional[float]]) -> List[float]:
    return [math.nan if v is None else v for v in values]


def draw(series: SpendSeries):
    """The figure of ``series`` (a matplotlib Figure; nothing is shown or written)."""
    import matplotlib
    matplotlib.use("Agg")
    from matplotlib.figure import Figure
    fig = Figure(figsize=(7, 4), dpi=100)
    ax = fig.add_subplot()
    band = series.curves.get(series.band)
    if band is not None:
        ax.fill_between(series.x, _nan(band.lower), _nan(band.upper), alpha=0.3, color="C0",
                        label=f"{series.band} certified lower..upper")
        ax.plot(series.x, _nan(band.estimate), color="C0", marker="o", ms=3, lw=1,
                label=f"{series.band} estimate", gid=f"{series.band}:estimate")
    for i, (name, c) in enumerate(series.curves.items()):
        if name != series.band:
            ax.plot(series.x, _nan(c.estimate), marker=".", color=f"C{i + 1}",
                    label=f"{name} estimate", gid=f"{name}:estimate")
    if series.budget_epsilon is not None:
        ax.axhline(series.budget_epsilon, color="red", ls="--", lw=1,
                   label=f"budget epsilon={series.budget_epsilon:g}", gid="budget")
    if series.releases:
        ax.plot([r[0] for r in series.releases], [r[1] for r in series.releases], "k*",
                ms=10, ls="none", label="release (claimed epsilon)", gid="releases")
    from matplotlib.ticker import MaxNLocator
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax.set_xlabel("ledger entry (seq)")
    ax.set_ylabel(f"epsilon (nats) at delta={series.delta:g}")
    ax.set_title(series.title, fontsize=10)
    ax.set_ylim(bottom=0)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8, loc="lower right")
    fig.tight_layout()
    return fig


def _cli_path(given: Optional[str]) -> str:
    path = given or os.environ.get("DPLEDGER_CLI") or shutil.which("dpledger")
    if not path:
        raise SystemExit("plot: the dpledger CLI is needed (--cli PATH or $DPLEDGER_CLI)")
    return path


def main(argv: Optional[Sequence[str]] = None) -> int:
    p = argparse.ArgumentParser(prog="python3 -m dpledger plot", description=__doc__.split("\n\n")[1])
    p.add_argument("--server", help="HOST:PORT of dpledgerd (TLS and token: $DPLEDGER_CLIENT_*)")
    p.add_argument("--job", help="job id (with --server)")
    p.add_argument("--tenant")
    p.add_argument("--release", action="append", default=[], metavar="ID",
                   help="release id to mark (repeat)")
    p.add_argument("--step", action="append", default=[], metavar="SPEC",
                   help="offline ledger: one entry per --step (dpledger account SPEC)")
    p.add_argument("--delta", type=float, help="offline: delta (default: the job's)")
    p.add_argument("--budget", type=float, help="offline: the budget epsilon to draw")
    p.add_argument("--accountant", default="pld", help="offline: the band's accountant")
    p.add_argument("--compare", action="store_true",
                   help="overlay " + ", ".join(COMPARE_ACCOUNTANTS) + " for the ledger")
    p.add_argument("--points", type=int, default=12,
                   help="--compare: prefixes evaluated per accountant (default 12)")
    p.add_argument("--mc-samples", type=int, default=20000)
    p.add_argument("--cli", help="dpledger CLI for accounting (default $DPLEDGER_CLI, PATH)")
    p.add_argument("--out", required=True, help="PNG to write")
    p.add_argument("--data", help="also write the plotted values as JSON here")
    a = p.parse_args(argv)
    if bool(a.server) != bool(a.job):
        p.error("--server and --job go together")
    if not a.server and not a.step:
        p.error("give --server H:P --job ID, or --step SPEC ... --delta D (offline)")
    if a.server:
        from .ledger import Ledger
        with Ledger(a.server, tenant=a.tenant) as ledger:
            series = from_server(ledger, a.job, a.release)
            if a.compare:
                x, entries = server_steps(ledger, a.job)
                delta = a.delta or series.delta
                series = from_specs(_cli_path(a.cli), entries, delta, COMPARE_ACCOUNTANTS, x,
                                    a.points, a.mc_samples, f"{series.title}: accountants",
                                    series.budget_epsilon)
    else:
        if a.delta is None:
            p.error("--delta is needed for an offline ledger")
        names = COMPARE_ACCOUNTANTS if a.compare else (a.accountant,)
        series = from_specs(_cli_path(a.cli), [[s] for s in a.step], a.delta, names,
                            points=a.points if a.compare else 0, mc_samples=a.mc_samples,
                            budget_epsilon=a.budget)
    draw(series).savefig(a.out)
    if a.data:
        with open(a.data, "w") as f:
            json.dump(asdict(series), f, indent=1)
    print(f"plot: wrote {a.out} ({len(series.x)} entries, {len(series.curves)} accountant(s))")
    return 0


if __name__ == "__main__":
    sys.exit(main())

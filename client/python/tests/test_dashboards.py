"""Issue 17: the metrics the Grafana dashboard and the Prometheus rules use exist with their
labels on a real dpledgerd; Debian's Prometheus scraping it fires the budget alert; and
`python3 -m dpledger plot` draws the ledger's own values.

One dpledgerd (with /metrics on loopback) and one job driven to >= 90% of its budget,
refused once for budget, and released, shared by the tests of this module.
"""
import json
import os
import re
import shutil
import struct
import subprocess
import sys
import time
import urllib.parse
import urllib.request

import pytest

from conftest import DIE_WITH_PARENT, REPO, Server, free_port
from dpledger import BudgetExceeded, Gaussian, Ledger, NotFound

DASHBOARD = os.path.join(REPO, "deploy", "grafana", "dpledger.json")
RULES = os.path.join(REPO, "deploy", "prometheus", "dpledger-rules.yaml")
BUDGET_EPSILON, BUDGET_DELTA = 1.0, 1e-6
M = Gaussian(sigma=30.0)

# Every dpledger_* series the dashboard and the rules may reference, with its label names.
# A reference to a name not listed here fails (so a renamed metric cannot go unnoticed).
EXPECTED = {
    "dpledger_rpc_total": {"method", "code"},
    "dpledger_rpc_seconds_bucket": {"method", "code", "le"},
    "dpledger_steps_admitted_total": set(),
    "dpledger_steps_refused_total": set(),
    "dpledger_refusals_total": {"reason"},
    "dpledger_updates_total": {"outcome"},
    "dpledger_job_epsilon_spent": {"job"},
    "dpledger_job_epsilon_budget": {"job"},
    "dpledger_job_epsilon_spent_ratio": {"job"},
    "dpledger_job_series_dropped_total": set(),
    "dpledger_releases_total": {"outcome"},
    "dpledger_verifications_total": {"purpose", "outcome"},
    "dpledger_pool_bytes": set(),
    "dpledger_pool_rebuilds_total": set(),
    "dpledger_pool_evictions_total": set(),
    "dpledger_cached_jobs": set(),
    "dpledger_cached_job_bytes": set(),
    "dpledger_store_commit_seconds_bucket": {"le"},
    "dpledger_store_commit_batches_bucket": {"le"},
    "dpledger_sample_pool_backend": {"backend"},
    "dpledger_ready": set(),
}


@pytest.fixture(scope="module")
def scene(tmp_path_factory):
    metrics = f"127.0.0.1:{free_port()}"
    server = Server(str(tmp_path_factory.mktemp("dash") / "data"),
                    ["--insecure", "--metrics-listen", metrics]).start()
    with Ledger(server.address) as ledger:
        job = ledger.create_job("dash-job", epsilon=BUDGET_EPSILON, delta=BUDGET_DELTA)
        while job.refresh().spent.upper < 0.9 * BUDGET_EPSILON:
            job.step(M, max(1, job.remaining(M).max_additional_steps // 3))
        with pytest.raises(BudgetExceeded):
            job.step(M, job.remaining(M).max_additional_steps + 1)
        release = job.release(payload=b"counts", epsilon=BUDGET_EPSILON,
                              delta_est=BUDGET_DELTA)
        with pytest.raises(NotFound):  # an RPC error, for the dashboard's error panel
            ledger.get_job("no-such-job")
        yield {"server": server, "metrics": metrics, "job": job, "ledger": ledger,
               "release": release, "info": job.refresh(),
               "entries": list(job.entries())}
    server.stop()


def scrape(address: str) -> dict:
    """name -> list of (labels dict, value) from the text exposition format."""
    text = urllib.request.urlopen(f"http://{address}/metrics", timeout=10).read().decode()
    out = {}
    for line in text.splitlines():
        m = re.match(r'^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})? (\S+)$', line)
        if m:
            labels = dict(re.findall(r'([a-zA-Z_]+)="((?:[^"\\]|\\.)*)"', m.group(2) or ""))
            out.setdefault(m.group(1), []).append((labels, float(m.group(3))))
    return out


def dashboard_exprs() -> list:
    """The dashboard's queries, its Grafana variables replaced as Grafana would."""
    with open(DASHBOARD) as f:
        panels = json.load(f)["panels"]
    return [t["expr"].replace("$__rate_interval", "1m").replace("$instance", ".*")
            for p in panels for t in p.get("targets", [])]


def referenced_metrics() -> set:
    exprs = dashboard_exprs()
    with open(RULES) as f:
        exprs.append(f.read())
    names = set(re.findall(r"\bdpledger_[a-z_]+\b", "\n".join(exprs)))
    assert len(exprs) > 20 and len(names) >= 15  # the files were read
    return names


def test_every_metric_the_dashboard_and_rules_use_is_exported(scene):
    used = referenced_metrics()
    assert used - EXPECTED.keys() == set(), "add these to EXPECTED (and check them)"
    scraped = scrape(scene["metrics"])
    for name, labels in EXPECTED.items():
        assert name in scraped, f"{name} missing from /metrics"
        assert {frozenset(ls) for ls, _ in scraped[name]} == {frozenset(labels)}, name
    # The values behind the budget panels and alert: this job, and its 90%+ spend.
    info = scene["info"]
    key = "default/dash-job"  # tenant/job_id; no auth: tenant "default"
    one = lambda n: [v for ls, v in scraped[n] if ls.get("job") == key]  # noqa: E731
    assert one("dpledger_job_epsilon_spent") == [pytest.approx(info.spent.upper, rel=1e-12)]
    assert one("dpledger_job_epsilon_budget") == [BUDGET_EPSILON]
    ratio = one("dpledger_job_epsilon_spent_ratio")[0]
    assert 0.9 <= ratio < 1 and ratio == pytest.approx(info.spent.upper / BUDGET_EPSILON)
    value = lambda n, **l: sum(v for ls, v in scraped[n] if l.items() <= ls.items())  # noqa: E731
    assert value("dpledger_refusals_total", reason="budget") == 1
    assert value("dpledger_releases_total", outcome="recorded") == 1
    assert value("dpledger_steps_admitted_total") == info.num_steps
    assert value("dpledger_ready") == 1
    assert value("dpledger_sample_pool_backend", backend="cpu") + \
        value("dpledger_sample_pool_backend", backend="cuda") == 1


def prometheus_api(address: str, path: str, **params) -> dict:
    url = f"http://{address}/api/v1/{path}?{urllib.parse.urlencode(params)}"
    body = json.load(urllib.request.urlopen(url, timeout=10))
    assert body["status"] == "success", body
    return body["data"]


def test_debian_prometheus_fires_the_budget_alert(scene, tmp_path):
    binary = shutil.which("prometheus") or "/usr/bin/prometheus"
    assert os.access(binary, os.X_OK), "install-deps installs prometheus"
    web = f"127.0.0.1:{free_port()}"
    config = tmp_path / "prometheus.yml"
    config.write_text(
        "global: {scrape_interval: 1s, evaluation_interval: 1s}\n"
        f"rule_files: ['{RULES}']\n"
        "scrape_configs:\n"
        f"  - job_name: dpledger\n    static_configs: [{{targets: ['{scene['metrics']}']}}]\n")
    log = open(tmp_path / "prometheus.log", "wb")
    proc = subprocess.Popen(DIE_WITH_PARENT + [binary, f"--config.file={config}",
                                               f"--web.listen-address={web}",
                                               f"--storage.tsdb.path={tmp_path / 'tsdb'}"],
                            stdout=log, stderr=subprocess.STDOUT)
    try:
        firing, deadline = [], time.monotonic() + 60
        while not firing and time.monotonic() < deadline and proc.poll() is None:
            time.sleep(1)
            try:
                alerts = prometheus_api(web, "alerts")["alerts"]
            except OSError:
                continue  # not listening yet
            firing = [a for a in alerts if a["state"] == "firing"
                      and a["labels"]["alertname"] == "DpledgerJobBudgetNearlySpent"]
        assert firing, (tmp_path / "prometheus.log").read_text()[-3000:]
        assert [a["labels"]["exported_job"] for a in firing] == ["default/dash-job"]
        assert float(firing[0]["value"]) == pytest.approx(
            scene["info"].spent.upper / BUDGET_EPSILON)
        # Evaluated through the query API: the target is up and ready; nothing else fires.
        up = prometheus_api(web, "query", query='up{job="dpledger"} == 1 and on() dpledger_ready == 1')
        assert len(up["result"]) == 1
        names = {a["labels"]["alertname"] for a in alerts}
        assert names == {"DpledgerJobBudgetNearlySpent"}, names
        # Every dashboard query parses and has data (so each panel would draw something).
        time.sleep(3)  # two scrapes after the last request, for the rates
        for expr in dashboard_exprs():
            assert prometheus_api(web, "query", query=expr)["result"], expr
    finally:
        proc.terminate()
        proc.wait(20)
        log.close()


def test_plot_draws_the_ledger_values(scene, tmp_path):
    out, data = tmp_path / "spend.png", tmp_path / "spend.json"
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path))
    subprocess.run([sys.executable, "-m", "dpledger", "plot", "--server",
                    scene["server"].address, "--job", "dash-job", "--release",
                    scene["release"].release_id, "--out", str(out), "--data", str(data)],
                   check=True, env=env, timeout=120)
    png = out.read_bytes()
    assert png[:8] == b"\x89PNG\r\n\x1a\n"
    assert struct.unpack(">II", png[16:24]) == (700, 400)  # IHDR: figsize 7x4 at 100 dpi
    assert 10_000 < len(png) < 200_000
    plotted = json.loads(data.read_text())
    entries = scene["entries"]
    assert len(entries) >= 3
    assert plotted["x"] == [e.seq for e in entries]
    curve = plotted["curves"]["pld"]
    assert curve["lower"] == [e.spent.lower for e in entries]
    assert curve["estimate"] == [e.spent.estimate for e in entries]
    assert curve["upper"] == [e.spent.upper for e in entries]
    assert plotted["budget_epsilon"] == BUDGET_EPSILON and plotted["delta"] == BUDGET_DELTA
    assert plotted["releases"] == [[scene["release"].ledger_seq, scene["release"].epsilon]]
    assert scene["release"].ledger_seq == entries[-1].seq
    # The figure itself is drawn from those values.
    from dpledger import plot
    fig = plot.draw(plot.from_server(scene["ledger"], "dash-job", [scene["release"].release_id]))
    lines = {ln.get_gid(): ln for ln in fig.axes[0].get_lines()}
    assert list(lines["pld:estimate"].get_ydata()) == curve["estimate"]
    assert list(lines["budget"].get_ydata()) == [BUDGET_EPSILON, BUDGET_EPSILON]
    assert list(lines["releases"].get_xdata()) == [entries[-1].seq]


def test_plot_compare_overlays_the_accountants_offline(tmp_path):
    out, data = tmp_path / "compare.png", tmp_path / "compare.json"
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path))
    steps = ["gaussian:sigma=30,count=100", "gaussian:sigma=30,count=300"]
    subprocess.run([sys.executable, "-m", "dpledger", "plot", "--compare", "--delta", "1e-6",
                    "--mc-samples", "5000", *[a for s in steps for a in ("--step", s)],
                    "--out", str(out), "--data", str(data)], check=True, env=env, timeout=300)
    assert out.stat().st_size > 10_000
    plotted = json.loads(data.read_text())
    assert list(plotted["curves"]) == ["pld", "rdp", "spa", "edgeworth", "mc"]
    # Gaussian composition is exact: mu = sqrt(k)/sigma; the PLD band must hold the closed
    # form of the Gaussian mechanism's epsilon(delta) (Balle & Wang 2018, Thm 8).
    from statistics import NormalDist
    import math
    for k, lo, up in zip((100, 400), plotted["curves"]["pld"]["lower"],
                         plotted["curves"]["pld"]["upper"]):
        mu = math.sqrt(k) / 30
        delta = lambda e: NormalDist().cdf(-e / mu + mu / 2) - math.exp(e) * NormalDist().cdf(-e / mu - mu / 2)  # noqa: E731,E501
        assert delta(up) <= 1e-6 <= delta(lo)
    rdp = plotted["curves"]["rdp"]["upper"]
    assert all(r >= u for r, u in zip(rdp, plotted["curves"]["pld"]["upper"]))  # RDP is looser

"""The Opacus-shaped accountant, the Flower-shaped gate and the examples, against a real
dpledgerd (issue 13)."""
import json
import os
import subprocess
import sys
from collections import OrderedDict

import pytest

from conftest import binary
from dpledger import BudgetExceeded, Gaussian, SubsampledGaussian
from dpledger.flower import PrivacyGate
from dpledger.opacus import DpledgerAccountant

EXAMPLES = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "examples")


def cli(*args) -> str:
    r = subprocess.run([binary("DPLEDGER_CLI", "client/dpledger"), *args], capture_output=True,
                       text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    return r.stdout


def test_opacus_accountant_gives_the_epsilon_of_dpledger_spent(server, ledger, job_id):
    acc = DpledgerAccountant(ledger.create_job(job_id, epsilon=8, delta=1e-5))
    assert DpledgerAccountant.mechanism() == "dpledger" and len(acc) == 0
    for _ in range(20):
        acc.step(noise_multiplier=1.1, sample_rate=0.01)
    for _ in range(5):
        acc.step(noise_multiplier=0.9, sample_rate=0.02)
    acc.step(noise_multiplier=1.1, sample_rate=0.01)
    # Opacus' RDPAccountant history: runs of equal steps merged; len() counts the runs.
    assert acc.history == [(1.1, 0.01, 20), (0.9, 0.02, 5), (1.1, 0.01, 1)] and len(acc) == 3
    eps = acc.get_epsilon(1e-5)
    spent = json.loads(cli("--server", server.address, "spent", "--job", job_id, "--delta",
                           "1e-5", "--json"))
    assert spent["num_steps"] == 26
    assert eps == spent["epsilon"]["upper"]
    # The same steps accounted offline by `dpledger account` (PLD): the same figure up to
    # the grid (the server composes update by update).
    offline = json.loads(cli("account", "--accountant", "pld", "--delta", "1e-5", "--json",
                             "--step", "subsampled_gaussian:sigma=1.1,q=0.01,count=21",
                             "--step", "subsampled_gaussian:sigma=0.9,q=0.02,count=5"))
    assert eps == pytest.approx(offline["epsilon"]["upper"], rel=1e-2)


def test_opacus_accountant_state_dict_and_refusal(ledger, job_id):
    job = ledger.create_job(job_id, epsilon=0.5, delta=1e-5)
    acc = DpledgerAccountant(job)
    acc.step(noise_multiplier=1.0, sample_rate=0.01)
    state = acc.state_dict()
    assert state == OrderedDict(history=[(1.0, 0.01, 1)], mechanism="dpledger", job_id=job_id,
                                last_seq=1)
    resumed = DpledgerAccountant(ledger.job(job_id))  # a restarted trainer
    resumed.load_state_dict(state)
    assert resumed.history == acc.history and resumed.job.last_seq == 1
    with pytest.raises(ValueError, match="empty"):
        resumed.load_state_dict({})
    with pytest.raises(ValueError, match="rdp"):
        resumed.load_state_dict({"history": [], "mechanism": "rdp"})
    with pytest.raises(ValueError, match="job"):
        resumed.load_state_dict(dict(state, job_id="other"))
    with pytest.raises(BudgetExceeded):
        resumed.step(noise_multiplier=0.3, sample_rate=1.0)
    assert resumed.history == [(1.0, 0.01, 1)]  # a refused step is not recorded
    hook = resumed.get_optimizer_hook_fn(sample_rate=0.01)

    class Optimizer:  # what the hook reads of Opacus' DPOptimizer
        noise_multiplier = 1.0
        accumulated_iterations = 1
    hook(Optimizer())
    assert resumed.history == [(1.0, 0.01, 2)] and ledger.get_job(job_id).num_steps == 2


def test_privacy_gate_answers_before_each_round(ledger, job_id):
    gate = PrivacyGate(ledger.create_job(job_id, epsilon=1, delta=1e-6))
    g = Gaussian(sigma=10)
    n = gate.remaining_rounds(g)
    assert n > 1 and not gate.would_exceed(g, rounds=n) and gate.would_exceed(g, rounds=n + 1)
    for _ in range(n):
        gate.record_round(g)
    assert gate.would_exceed(g) and gate.rounds == n
    with pytest.raises(BudgetExceeded):
        gate.record_round(g)
    eps, delta = gate.get_privacy_spent()
    assert delta == 1e-6 and eps == gate.get_epsilon() and 0.9 < eps <= 1


def run_example(name, *args) -> str:
    r = subprocess.run([sys.executable, os.path.join(EXAMPLES, name), *args],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stdout + r.stderr
    return r.stdout


def test_the_coordinator_example_runs_to_its_budget_and_stops(server, ledger, job_id):
    out = run_example("coordinator.py", "--server", server.address, "--job", job_id,
                      "--epsilon", "0.6", "--sigma", "3", "--q", "0.1")
    rounds = sum(1 for line in out.splitlines() if line.startswith("round "))
    assert f"stopped after {rounds} rounds: the budget admits no more" in out
    job = ledger.job(job_id)
    assert rounds >= 5 and job.info.num_steps == rounds
    assert job.remaining(SubsampledGaussian(sigma=3, q=0.1)).max_additional_steps == 0
    assert job.spent(delta=1e-8).upper <= 0.6


def test_the_dpsgd_example_charges_one_step_per_batch(server, ledger, job_id):
    out = run_example("dpsgd.py", "--server", server.address, "--job", job_id, "--epochs", "2",
                      "--epsilon", "1.7")
    assert "stopped at step" in out  # 1.7 runs out in the second epoch (epoch 1 spends 1.53)
    job = ledger.job(job_id)
    assert f"trained {job.info.num_steps} steps" in out
    assert 31 < job.info.num_steps < 62 and job.spent(delta=1e-5).upper <= 1.7

"""`pip install ./client/python` builds the stubs from the proto into the package (setup.py),
so an installed dpledger needs neither the build tree nor DPLEDGER_PY_STUBS."""
import os
import shutil
import subprocess
import sys

from conftest import REPO

PACKAGE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def test_pip_install_generates_the_stubs_into_the_package(tmp_path):
    source = tmp_path / "src"  # a copy: pip writes build/ and egg-info/ beside the sources
    shutil.copytree(PACKAGE, source, ignore=shutil.ignore_patterns(
        "tests", "examples", "__pycache__", "_generated", "build", "*.egg-info"))
    env = dict(os.environ, DPLEDGER_PROTO=os.path.join(REPO, "proto", "dpledger.proto"),
               PIP_DISABLE_PIP_VERSION_CHECK="1", PIP_NO_INDEX="1")
    env.pop("DPLEDGER_PY_STUBS", None)
    env.pop("PYTHONPATH", None)
    r = subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-build-isolation",
                        "--no-deps", "--target", str(tmp_path / "site"), str(source)],
                       capture_output=True, text=True, env=env, timeout=120)
    assert r.returncode == 0, r.stdout + r.stderr
    env["PYTHONPATH"] = str(tmp_path / "site")
    r = subprocess.run([sys.executable, "-c",
                        "import dpledger, dpledger._generated.dpledger_pb2_grpc as g; "
                        "print(g.__file__); print(dpledger.SubsampledGaussian(1, 0.1).to_proto())"],
                       capture_output=True, text=True, env=env, cwd=str(tmp_path), timeout=60)
    assert r.returncode == 0, r.stderr
    assert r.stdout.startswith(str(tmp_path / "site" / "dpledger" / "_generated"))
    assert "MECHANISM_KIND_SUBSAMPLED_GAUSSIAN" in r.stdout

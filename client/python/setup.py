"""Generates the gRPC stubs into the built package (see gen_stubs.py); metadata is in
pyproject.toml."""
import os
import sys

from setuptools import setup
from setuptools.command.build_py import build_py

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import gen_stubs  # noqa: E402


class BuildPyWithStubs(build_py):
    def run(self):
        super().run()
        proto = os.environ.get("DPLEDGER_PROTO") or os.path.join(HERE, "..", "..", "proto",
                                                                 "dpledger.proto")
        if not os.path.exists(proto):
            raise SystemExit(f"dpledger: {proto} not found; set DPLEDGER_PROTO to dpledger.proto")
        gen_stubs.generate(proto, self.build_lib)


setup(cmdclass={"build_py": BuildPyWithStubs})

#!/usr/bin/env python3
"""Generates the gRPC stubs of proto/dpledger.proto into OUT_DIR/dpledger/_generated/.

Used by CMake (into the build tree, for the tests and for running from the source tree)
and by setup.py (into the wheel, for ``pip install ./client/python``). The stubs are
never committed: they are regenerated from the proto whenever it changes, so they cannot
drift from it.

Runs Debian's protoc and grpc_python_plugin (packages protobuf-compiler and
protobuf-compiler-grpc) and makes the one import the plugin writes ("import dpledger_pb2")
relative, so the modules live inside the ``dpledger`` package.

usage: gen_stubs.py PROTO_FILE OUT_DIR [--protoc PATH] [--plugin PATH]
"""
import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile


def generate(proto: str, out_dir: str, protoc: str = "protoc", plugin: str = "") -> str:
    """Writes OUT_DIR/dpledger/_generated/{__init__,dpledger_pb2,dpledger_pb2_grpc}.py; returns that dir."""
    plugin = plugin or shutil.which("grpc_python_plugin") or "/usr/bin/grpc_python_plugin"
    target = os.path.join(out_dir, "dpledger", "_generated")
    os.makedirs(target, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        subprocess.run(
            [protoc, "-I", os.path.dirname(os.path.abspath(proto)), f"--python_out={tmp}",
             f"--grpc_python_out={tmp}", f"--plugin=protoc-gen-grpc_python={plugin}",
             os.path.abspath(proto)],
            check=True)
        name = os.path.splitext(os.path.basename(proto))[0]
        for module in (f"{name}_pb2.py", f"{name}_pb2_grpc.py"):
            with open(os.path.join(tmp, module)) as f:
                text = f.read()
            text = re.sub(rf"^import {name}_pb2 as ", f"from . import {name}_pb2 as ", text,
                          flags=re.M)
            _write_if_changed(os.path.join(target, module), text)
    _write_if_changed(os.path.join(target, "__init__.py"),
                      '"""Generated from proto/dpledger.proto by gen_stubs.py. Do not edit."""\n')
    return target


def _write_if_changed(path: str, text: str) -> None:
    # Unchanged files keep their mtime so build tools see nothing to redo.
    if os.path.exists(path):
        with open(path) as f:
            if f.read() == text:
                return
    with open(path, "w") as f:
        f.write(text)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("proto")
    parser.add_argument("out_dir")
    parser.add_argument("--protoc", default="protoc")
    parser.add_argument("--plugin", default="")
    parser.add_argument("--stamp", default="", help="file touched after a successful run")
    args = parser.parse_args()
    generate(args.proto, args.out_dir, args.protoc, args.plugin)
    if args.stamp:
        with open(args.stamp, "w"):
            pass
    return 0


if __name__ == "__main__":
    sys.exit(main())

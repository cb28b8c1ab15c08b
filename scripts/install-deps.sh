#!/usr/bin/env bash
# Installs every Debian package dpledger needs to build, run and test.
# Idempotent: when everything is present it only runs dpkg-query and exits.
# postgresql: the tests start throwaway servers from its binaries (never the packaged
# cluster; on Debian the package starts one, which the tests leave alone).
# The CUDA toolkit is optional and never installed here; CMake uses it when it finds nvcc.
set -euo pipefail

PACKAGES=(
  build-essential cmake pkg-config git ca-certificates curl
  libgrpc++-dev protobuf-compiler-grpc libprotobuf-dev protobuf-compiler
  libabsl-dev libspdlog-dev libfmt-dev
  libboost-dev libboost-math-dev
  libgtest-dev libgmock-dev libbenchmark-dev
  prometheus-cpp-dev libcivetweb-dev zlib1g-dev
  libsqlite3-dev sqlite3 libfftw3-dev nlohmann-json3-dev
  libssl-dev python3
  # The Python client (client/python): runtime, stub generation (grpc_python_plugin is in
  # protobuf-compiler-grpc above), tests, examples, and `pip install ./client/python`.
  python3-grpcio python3-protobuf python3-pytest python3-numpy python3-pip python3-setuptools
  openssl
  postgresql libpq-dev
  # deploy/prometheus: promtool checks and unit-tests the rules; the rules test also runs
  # this Prometheus against a loopback dpledgerd. matplotlib draws `dpledger plot`.
  prometheus python3-matplotlib
  # Issue 16: clang builds the libFuzzer targets (make fuzz); libclang-rt-14-dev holds
  # libFuzzer and clang's sanitizer runtimes (only recommended by clang, so named here).
  # GCC's ASan/UBSan/TSan runtimes for make check-asan / check-tsan come with build-essential.
  clang libclang-rt-14-dev
)
# kubectl for the deploy_kustomize test: Debian's kubernetes-client, unless a kubectl from
# another package is already there (both install /usr/bin/kubectl).
if ! command -v kubectl >/dev/null 2>&1; then PACKAGES+=(kubernetes-client); fi

missing=()
for p in "${PACKAGES[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done

if [ ${#missing[@]} -eq 0 ]; then
  exit 0
fi

echo "install-deps: installing ${missing[*]}"
SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"

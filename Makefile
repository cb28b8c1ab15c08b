# Two commands from a fresh Debian machine:
#   make run    install what is missing, build, start the main job
#   make test   install what is missing, build, run every test (ctest)
BUILD_DIR ?= build
BUILD_TYPE ?= Release
JOBS ?= $(shell nproc)
CMAKE_FLAGS ?=

.PHONY: all deps configure build test run bench clean configure-asan check-asan check-tsan build-fuzz fuzz fuzz-smoke

all: build

deps:
	@bash scripts/install-deps.sh

configure: deps
	@cmake -S . -B $(BUILD_DIR) -DCMAKE_BUILD_TYPE=$(BUILD_TYPE) $(CMAKE_FLAGS) >/dev/null

build: configure
	@cmake --build $(BUILD_DIR) -j $(JOBS)

test: build
	@ctest --test-dir $(BUILD_DIR) --output-on-failure -j $(JOBS)

run: build
	@bash scripts/run.sh $(BUILD_DIR)

bench: build
	@bash scripts/bench_table.sh $(BUILD_DIR)

# Sanitizer suites (issue 16), each in its own folder, built by clang when it is there (it
# compiles faster than GCC, and the ASan build then also holds the fuzz targets: one build
# for both), else by the default compiler. -O1 keeps them fast enough for CI.
#   make check-asan   AddressSanitizer + UndefinedBehaviorSanitizer, the whole suite but the
#                     core/ tests in scripts/asan_slow_tests.txt (too slow under ASan; they
#                     run in make test; CHECK_ALL=1 runs them too)
#   make check-tsan   ThreadSanitizer on server/, client/ and tests/ (core/'s own threads, MC's
#                     ParallelFor and PLD's two directions, run there under the server's PLD
#                     and MC queries; core/'s unit tests are left to the ASan suite)
# CHECK_ARGS passes extra ctest arguments, e.g. CHECK_ARGS='-R Stream'.
SAN_CMAKE = -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_CXX_FLAGS_RELWITHDEBINFO='-O1 -g1' \
	-DDPLEDGER_BUILD_BENCH=OFF -DDPLEDGER_ENABLE_CUDA=OFF
SAN_COMPILER = if command -v clang++ >/dev/null 2>&1; then export CC=clang CXX=clang++ fuzz=ON; \
	else fuzz=OFF; fi
CHECK_ARGS ?=

configure-asan: deps
	@$(SAN_COMPILER); cmake -S . -B build-asan $(SAN_CMAKE) -DDPLEDGER_SANITIZE=address,undefined \
		-DDPLEDGER_BUILD_FUZZ=$$fuzz >/dev/null

check-asan: configure-asan
	@cmake --build build-asan -j $(JOBS)
	@bash scripts/check_sanitized.sh build-asan asan -j $(JOBS) $(CHECK_ARGS)

check-tsan: deps
	@$(SAN_COMPILER); cmake -S . -B build-tsan $(SAN_CMAKE) -DDPLEDGER_SANITIZE=thread \
		-DDPLEDGER_BUILD_CORE_TESTS=OFF >/dev/null
	@cmake --build build-tsan -j $(JOBS)
	@bash scripts/check_sanitized.sh build-tsan tsan -j $(JOBS) $(CHECK_ARGS)

# libFuzzer targets (fuzz/README.md), in the clang ASan build (build-asan/fuzz/).
#   make fuzz         every target for FUZZ_SECONDS (default 600) each, growing fuzz/corpus/<target>
#   make fuzz-smoke   every target for FUZZ_SMOKE_SECONDS (default 60) each, as CI runs it
FUZZ_SECONDS ?= 600
FUZZ_SMOKE_SECONDS ?= 60

build-fuzz: configure-asan
	@command -v clang++ >/dev/null 2>&1 || { echo "make fuzz needs clang++ (scripts/install-deps.sh)"; exit 1; }
	@cmake --build build-asan -j $(JOBS) --target fuzz_all

fuzz: build-fuzz
	@bash fuzz/run.sh build-asan $(FUZZ_SECONDS) grow

fuzz-smoke: build-fuzz
	@bash fuzz/run.sh build-asan $(FUZZ_SMOKE_SECONDS) smoke

clean:
	@rm -rf $(BUILD_DIR) build-asan build-tsan

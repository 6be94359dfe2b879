# Two entry points for a newcomer: `make demo` and `make test`. Both create .venv when missing.
PYTHON ?= python3.11
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: demo test test-fast coverage lint format bench clean lock

# Installs are constrained by requirements.lock (every dependency pinned), so a release of any of
# them cannot change what a fresh clone gets; `make lock` regenerates it after pyproject.toml changes.
$(STAMP): pyproject.toml requirements.lock
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -c requirements.lock -e '.[dev]'
	touch $(STAMP)

# The full dependency set of pyproject.toml (with the dev, s3 and spark extras), resolved by pip-tools.
# torch's local build label (+cpu) is dropped so the same pin constrains CPU and CUDA builds.
lock: $(STAMP)
	$(BIN)/pip-compile --quiet --extra dev --extra s3 --extra spark --strip-extras --no-emit-index-url \
		--no-emit-find-links --upgrade -o requirements.lock pyproject.toml
	sed -i -E 's/^(torch==[0-9.]+)\+[a-z0-9]+/\1/' requirements.lock

demo: $(STAMP)
	PATH="$(abspath $(BIN)):$$PATH" $(BIN)/python -m pipelines.demo

# Two pytest-xdist workers (one per core of the 2-core machines this runs on; TEST_WORKERS=0 runs
# in one process). Each test module runs whole on one worker (--dist loadfile), so a module's
# fixtures (trained models, started servers) are set up once. Not --dist loadgroup: with pytest 9
# pytest-xdist 3.8 no longer tags grouped tests, and a module's tests spread over both workers,
# each setting up the module's models again (tests/test_suite_layout.py checks the scheduling).
TEST_WORKERS ?= 2
# The tests' temporary files (MLflow's SQLite stores, artifacts, checkpoints) go to a RAM disk when
# the machine has one with 4 GiB free: each SQLite commit waits for the disk (26 ms on this
# machine's disk against 0.3 ms on /dev/shm) and a tiny training commits about 140 times. Only
# failed tests' folders are kept ([tool.pytest.ini_options]). `make test TEST_TMPDIR=` keeps $TMPDIR.
TEST_TMPDIR ?= $(shell [ -w /dev/shm ] && [ "$$(df -Pk /dev/shm | awk 'NR==2 {print $$4}')" -gt 4194304 ] \
	&& echo /dev/shm/forecast-tests)
PYTEST := $(if $(TEST_TMPDIR),mkdir -p $(TEST_TMPDIR) && TMPDIR=$(TEST_TMPDIR)) \
	PATH="$(abspath $(BIN)):$$PATH" $(BIN)/python -m pytest -n $(TEST_WORKERS) --dist loadfile

# the static checks both tiers start with: lint, types (mypy, [tool.mypy] in pyproject.toml) and
# dead code (vulture; .ci/vulture_whitelist.py names what frameworks call by name)
STATIC := $(BIN)/ruff check . && $(BIN)/mypy && \
	$(BIN)/vulture forecaster infra monitoring service pipelines .ci/vulture_whitelist.py --min-confidence 60

test: $(STAMP)
	$(STATIC)
	$(PYTEST) $(PYTEST_ARGS)

# The unit tier, for a working session (under 2 minutes on a 2-core machine): `make test` without the
# tests marked slow (training or serving real models, end-to-end, servers, DDP) or integration
# (external processes). `make test` stays the full suite, and CI's command.
test-fast: $(STAMP)
	$(STATIC)
	$(PYTEST) -m "not slow and not integration" $(PYTEST_ARGS)

# The whole suite with line and branch coverage of forecaster/, monitoring/, service/ and pipelines/
# (the processes tests start too: [tool.coverage.run] in pyproject.toml), into coverage.json:
# what tests/suite_record.py records for tests/README.md's table
coverage: $(STAMP)
	rm -f .coverage .coverage.*
	$(PYTEST) --cov --cov-report=term --cov-report=json:coverage.json $(PYTEST_ARGS)

lint: $(STAMP)
	$(BIN)/ruff check . && $(BIN)/ruff format --check .

format: $(STAMP)
	$(BIN)/ruff format . && $(BIN)/ruff check --fix .

clean:
	rm -rf $(VENV) mlflow.db .forecast-locks mlartifacts mlruns lightning_logs .pytest_cache .coverage coverage.json

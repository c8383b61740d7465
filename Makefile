# Lambda artefacts for `sam build` (template.yaml: Metadata BuildMethod: makefile).
#
# SAM runs `make build-<FunctionLogicalId>` with ARTIFACTS_DIR set. The artefact is
# bunq (its pure-Python core: no compiler needed, and the same code on every runtime
# and architecture), its dependencies as wheels for the function's runtime and
# architecture, the thin adapters in handlers/, and your job code (LAMBDA_CODE).
# Nothing else of this repository is shipped.
#
#   sam build                                  # python3.12, x86_64, your code in ./app
#   sam build --parameter-overrides ...        # (parameters are the template's)
#   make build-TickFunction ARTIFACTS_DIR=out  # the same, by hand
#
# LAMBDA_PLATFORM=manylinux2014_aarch64 for arm64 functions; LAMBDA_EXTRAS=postgres for
# a smaller artefact without boto3 (the runtime has its own).

PYTHON ?= python3
LAMBDA_PYTHON ?= 3.12
LAMBDA_PLATFORM ?= manylinux2014_x86_64
LAMBDA_EXTRAS ?= postgres,sqs
LAMBDA_CODE ?= $(wildcard app)
WHEELS := $(or $(TMPDIR),/tmp)/bunq-lambda-wheels

.PHONY: build-TickFunction build-SqsJobsFunction lambda
build-TickFunction build-SqsJobsFunction: lambda

lambda:
	test -n "$(ARTIFACTS_DIR)" || { echo "set ARTIFACTS_DIR"; exit 2; }
	rm -rf "$(WHEELS)" && mkdir -p "$(WHEELS)" "$(ARTIFACTS_DIR)"
	BUNQ_PUREPYTHON=1 $(PYTHON) -m pip wheel --quiet --no-deps --wheel-dir "$(WHEELS)" .
	$(PYTHON) -m pip install --quiet --no-compile --upgrade --target "$(ARTIFACTS_DIR)" \
	  --python-version "$(LAMBDA_PYTHON)" --platform "$(LAMBDA_PLATFORM)" \
	  --implementation cp --only-binary=:all: \
	  "$$(ls "$(WHEELS)"/bunq_queue-*.whl)[$(LAMBDA_EXTRAS)]"
	rm -rf "$(ARTIFACTS_DIR)/handlers" && cp -R handlers "$(ARTIFACTS_DIR)/handlers"
	find "$(ARTIFACTS_DIR)/handlers" -name __pycache__ -prune -exec rm -rf {} +
	for d in $(LAMBDA_CODE); do rm -rf "$(ARTIFACTS_DIR)/$$d" && cp -R "$$d" "$(ARTIFACTS_DIR)/$$d"; done
	rm -rf "$(WHEELS)"

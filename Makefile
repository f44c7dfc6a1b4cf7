# fleetnap — every target does its own set-up (idempotent, cached under .venv and .cache).
#
#   make demo       set up, boot the virtual power lab, run the main job on it
#   make test       set up, lint, unit tests, lab tests
#   make test-unit  the fast part (no lab)
#   make lint       ansible-lint (production profile), ansible-doc for every module, and the
#                   built collection through ansible-test sanity, antsibull-docs, galaxy-importer
#   make bench      benchmarks (ratios against a baseline measured in the same run); leaves
#                   no simulator or lab running (BENCH_SHIFT_SIZES: gear shifts on 30,100,300 hosts)
#   make lab-up | lab-down | lab-status
#   make sim-up | sim-down | sim-status   the 100-host fleet simulator (network namespaces + sshd)
#   make collection | ee-context   the fleetnap.power collection, an ansible-builder context

SHELL := /bin/bash
.SHELLFLAGS := -eu -o pipefail -c
.DEFAULT_GOAL := help

# Debian 12's Python: what an operator's controller has (not a pyenv shim).
PYTHON ?= /usr/bin/python3.11
VENV := .venv
BIN := $(VENV)/bin
CACHE := .cache
ARTIFACTS ?= artifacts
export ANSIBLE_CONFIG := $(CURDIR)/ansible.cfg
export PATH := $(CURDIR)/$(BIN):$(PATH)

# Debian packages the tests and the lab need (installed once, then cached by a stamp).
DEB_PACKAGES := python3-venv python3-pip openssh-client e2fsprogs chromium rt-tests prometheus \
                prometheus-node-exporter slurm-client slurmctld munge socat

.PHONY: help setup deps venv test test-unit test-live test-unit-rest test-tmp lint demo bench

include lab/lab.mk
include packaging/packaging.mk
include lab/sim.mk

help:
	@sed -n '2,12p' Makefile

setup: deps venv

deps: $(CACHE)/deb.stamp
$(CACHE)/deb.stamp: Makefile lab/lab.mk lab/sim.mk
	@mkdir -p $(CACHE)
	@missing=$$(for p in $(DEB_PACKAGES); do dpkg-query -W -f='$${Status}\n' $$p 2>/dev/null | grep -q '^install ok installed' || echo $$p; done); \
	if [ -n "$$missing" ]; then \
	  echo "installing Debian packages:" $$missing; \
	  if [ "$$(id -u)" = 0 ]; then SUDO=; else SUDO=sudo; fi; \
	  $$SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -qq --no-install-recommends $$missing >/dev/null; \
	fi
	@touch $@

venv: $(VENV)/.stamp
$(VENV)/.stamp: requirements.txt | $(CACHE)/deb.stamp
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --disable-pip-version-check -r requirements.txt
	@touch $@

# The tests that change this kernel's cpuidle settings run alone; the rest in parallel. Their
# temporary trees (hundreds of thousands of files: captured machines' sysfs) go to a directory of
# their own, emptied when the stage starts again, not to pytest's numbered rotation, where every
# later pytest run of make test (the lab, molecule's verifiers) spent minutes deleting them. Outside
# the checkout: test_collection builds in a namespace where the checkout is read-only.
TEST_TMP ?= /tmp/fleetnap-test
# Two workers, one per core of CI's machine. Four were tried: 529 s against 763 s for two in the
# working checkout, but 855 s on a clean clone, where two took 519 s the day before (every test
# 2-3x slower than with two): not reproduced, not kept.
UNIT_WORKERS ?= 2
test-unit:     # one after the other, also under make -j: test-live wants a quiet machine
	$(MAKE) test-live
	$(MAKE) test-unit-rest

# The tests that measure or change this kernel's idle states (live_kernel): alone, on a quiet
# machine. make test runs them as its first stage: beside the lab's suite (TCG guests busy on both
# cores) a CPU can stay busy through a whole probe and never enter the state it measures (the probe
# says so, and its test fails: stop 54's run). The tests that wait in real time for threads and
# sockets (real_time: a wave of hosts on 127.0.0.1) run here too: beside the lab, a test thread
# that lost the CPU for a tenth of a second failed a bound (stop 55's run).
test-live: setup test-tmp
	$(BIN)/pytest -q --durations=5 --basetemp=$(TEST_TMP)/live -m "live_kernel or real_time" \
	  --ignore=tests/unit/test_ansible_lint_args.py tests/modules tests/unit

test-unit-rest: setup test-tmp
	$(BIN)/pytest -q -n $(UNIT_WORKERS) --dist loadfile --durations=40 --basetemp=$(TEST_TMP)/unit -m "not live_kernel and not real_time and not lab" \
	  --ignore=tests/unit/test_ansible_lint_args.py tests/unit tests/modules

test-tmp:
	@# A run that was stopped half-way leaves its bad-input cases' mounts (a full filesystem) and
	@# immutable or append-only files (chattr) in $(TEST_TMP), which pytest cannot remove: undo them.
	@awk '$$2 ~ "^$(TEST_TMP)/" {print $$2}' /proc/mounts | sort -r | xargs -r -n1 umount -l
	@[ ! -d $(TEST_TMP) ] || find $(TEST_TMP) -maxdepth 4 -name 'case-*' -type d \
	  -exec chattr -R -i -a {} + 2>/dev/null || true
	@mkdir -p $(TEST_TMP)

# lint runs every ansible-lint of make test (they share the checkout's .ansible/ cache): its own, and
# the test of the wrapper (tests/unit/test_ansible_lint_args.py), so that lint and test-unit can run
# at the same time.
lint: setup lint-setup
	$(BIN)/python tests/ansible_lint.py --profile production --strict .
	$(BIN)/pytest -q -p no:cacheprovider tests/unit/test_ansible_lint_args.py
	@# Doc fragments from this checkout (collections/ links doc_fragments/), never an installed copy.
	@# One ansible-doc for every module (1.5 s where a process each took 25 s): a module whose
	@# documentation does not render is named in its error, and the exit status is not 0.
	@ANSIBLE_COLLECTIONS_PATH=$(CURDIR)/collections $(BIN)/ansible-doc -M library \
	  $$(for m in library/*.py; do basename $$m .py; done) >/dev/null \
	  || { echo "ansible-doc failed (the module is named above)"; exit 1; }; echo "ansible-doc: all modules render"
	@# The built collection, through the checks a collection's publishers run. Built outside the
	@# repository: ansible-test reads a tree inside a git checkout through git, which ignores build/.
	@d=$$(mktemp -d /tmp/fleetnap-lint.XXXXXX); trap 'rm -rf "$$d"' EXIT; \
	c=$$d/ansible_collections/fleetnap/power; lint=$(CURDIR)/$(LINT_BIN); \
	$(BIN)/python packaging/build_collection.py --out $$c --dist $$d/dist >/dev/null; \
	t=$$SECONDS; echo "== ansible-test sanity (fleetnap.power, Python 3.11)"; \
	(cd $$c && HOME=$(ANSIBLE_TEST_HOME) PATH=$$lint:$$PATH ansible-test sanity --python 3.11 --color no) \
	  2>&1 | grep -Ev '^(WARNING: (Using locale|Reviewing previous)|Processing |Looking in links|Installing collected|Successfully installed)'; \
	echo "ansible-test sanity: passed ($$((SECONDS - t)) s)"; \
	t=$$SECONDS; (cd $$c && ANSIBLE_COLLECTIONS_PATH=$$d PATH=$$lint:$$PATH antsibull-docs lint-collection-docs \
	  --plugin-docs --validate-collection-refs=all --disallow-unknown-collection-refs .); \
	echo "antsibull-docs lint-collection-docs: passed ($$((SECONDS - t)) s)"; \
	t=$$SECONDS; (cd $$d && PATH=$$lint:$$PATH $$lint/python -m galaxy_importer.main dist/fleetnap-power-*.tar.gz \
	  > importer.log 2>&1) || { cat $$d/importer.log; echo "galaxy-importer failed"; exit 1; }; \
	grep -E '^(WARNING|ERROR)' $$d/importer.log || true; \
	echo "galaxy-importer: passed ($$((SECONDS - t)) s)"

# The collection checks' own environment (pinned in packaging/sanity/), and ansible-test made to
# need no network while it runs (packaging/sanity/offline_setup.py says how).
LINT_VENV := .venv-lint
LINT_BIN := $(LINT_VENV)/bin
ANSIBLE_TEST_HOME := $(CURDIR)/$(CACHE)/ansible-test-home
.PHONY: lint-setup
lint-setup: $(CACHE)/ansible-test-offline.stamp
$(LINT_VENV)/.stamp: packaging/sanity/requirements.txt packaging/sanity/constraints.txt | $(CACHE)/deb.stamp
	@test -x $(LINT_BIN)/python || $(PYTHON) -m venv $(LINT_VENV)
	$(LINT_BIN)/pip install -q --disable-pip-version-check -r packaging/sanity/requirements.txt \
	  -c packaging/sanity/constraints.txt
	@touch $@
$(CACHE)/ansible-test-offline.stamp: $(LINT_VENV)/.stamp packaging/sanity/offline_setup.py packaging/sanity/get_pip_offline.py
	$(LINT_BIN)/python packaging/sanity/offline_setup.py --home $(ANSIBLE_TEST_HOME) \
	  --wheels $(CACHE)/lint-wheels --python $(LINT_BIN)/python
	@touch $@

# Stages in order, first failure stops the rest; the lab is taken down whatever happened; each
# stage's time and the cores busy during it are printed at the end (and each pytest stage lists its
# slowest tests). lint and test-unit need neither lab nor timing: they run beside another stage at
# nice 19 and in the idle I/O class (run_stages --beside), taking only the CPU and disk it leaves
# idle. lint runs beside the simulator's suite (1.15 of the 2 cores busy alone); test-unit beside the
# lab's suite, which keeps 0.94 of the 2 cores busy on average (its tests wait on guests that sleep,
# boot and answer; 1483 s, clean clone, 2026-11-29) while the unit suite needs about 1100 s of CPU
# and never waits on the lab. Until stop 49 test-unit ran beside the simulator as well: that phase
# then lasted as long as the unit suite (1050 s beside a simulator suite of 506 s). Tried before and
# not kept: test-unit beside the lab suite at nice 10 without the I/O class (the lab then had TCG
# guests busy on both cores most of the time; the unit tests took 1770 s and the lab suite ran past
# 36 minutes where it took 30 alone).
TEST_STAGES := test-live test-sim lab-up test-lab test-molecule
TEST_BESIDE := --beside lint:test-sim:19 --beside test-unit-rest:test-lab:19
test: setup
	FLEETNAP_STRICT_SKIPS=1 $(BIN)/python tests/run_stages.py $(TEST_STAGES) $(TEST_BESIDE) --finally lab-down --log-dir $(ARTIFACTS)

# All three jobs on the lab: plan and apply latency profiles, measure suspend/resume on every
# guest, apply again so the S3 decisions use the measurements, shift the lab down a gear (a
# group drained and parked) and back up, the C-state gate on a few simulated hosts (real
# machines' cpuidle), and end with the fleet report.
DEMO_SIM_HOSTS ?= 8
DEMO_SIM_PROFILE := {"fleetnap_profile": "realtime", "fleetnap_profiles": {"realtime": {"budget_us": 20, \
  "resume_budget_ms": 0, "declared_margin": 2.0, "pm_qos": true, "sleep_fallback": "none"}}}
demo: setup lab-up
	$(BIN)/ansible-playbook -i inventories/lab playbooks/apply_profile.yml --check --diff
	$(BIN)/ansible-playbook -i inventories/lab playbooks/apply_profile.yml
	$(BIN)/ansible-playbook -i inventories/lab playbooks/measure_resume.yml -e resume_measure_cycles=2
	$(BIN)/ansible-playbook -i inventories/lab playbooks/apply_profile.yml
	$(BIN)/ansible-playbook -i inventories/lab playbooks/gear_shift.yml -e gear_shift_gear=2
	$(BIN)/ansible-playbook -i inventories/lab playbooks/gear_shift.yml -e gear_shift_gear=3
	@# The lab's TCG guests have no cpuidle driver: the C-state gate is shown on simulated hosts that
	@# present real machines' cpuidle (tests/data/cpuidle), with the lab's strictest profile.
	$(MAKE) --no-print-directory sim-up SIM_HOSTS=$(DEMO_SIM_HOSTS)
	$(BIN)/ansible-playbook -i inventories/sim playbooks/apply_profile.yml -e fleetnap_decisions_file=decisions-sim.json \
	  -e fleetnap_artifacts_dir=$(CURDIR)/$(ARTIFACTS) -e '$(DEMO_SIM_PROFILE)'
	$(MAKE) --no-print-directory sim-down
	$(BIN)/ansible-playbook -i inventories/lab playbooks/fleet_report.yml
	@echo; echo "Report: $(CURDIR)/$(ARTIFACTS)/report.html (the fleet report: profiles, resume, gear shifts;"; \
	echo "open in a browser)"; \
	echo "The lab keeps running: make lab-status, make lab-down"

# Fleet sizes of the gear-shift benchmark on the simulator (each its own simulator, taken down after).
# Every bench writes its report to docs/bench/ (tests/bench/benchlib.py); all run even when one
# misses, docs/benchmarks.md's quotes are rewritten from the reports, and make bench fails when
# any target was missed or any run failed.
BENCH_SHIFT_SIZES ?= 30,100,300
BENCH_REPEAT ?= 3
bench: setup
	@rc=0; \
	$(BIN)/python tests/bench/bench_pm_timeline.py || rc=1; \
	$(BIN)/python tests/bench/bench_gear_plan.py || rc=1; \
	if $(MAKE) --no-print-directory sim-up; then \
	  $(BIN)/python tests/bench/bench_apply_profile.py --repeat $(BENCH_REPEAT) || rc=1; \
	else rc=1; fi; \
	$(MAKE) --no-print-directory sim-down; \
	$(BIN)/python tests/bench/bench_gear_shift_sim.py --sizes $(BENCH_SHIFT_SIZES) --repeat $(BENCH_REPEAT) || rc=1; \
	if $(MAKE) --no-print-directory lab-up; then \
	  $(BIN)/python tests/bench/bench_gear_shift.py --repeat $(BENCH_REPEAT) || rc=1; \
	else rc=1; fi; \
	$(MAKE) --no-print-directory lab-down; \
	$(BIN)/python tests/bench/benchlib.py render; \
	[ $$rc = 0 ] || echo "make bench: a target was missed or a run failed (see docs/bench/)"; exit $$rc

# The virtual power lab (lab/labctl.py).  Included by the top-level Makefile.
#
#   make lab-image    build (or reuse) the cached Debian 12 guest image
#   make lab-up       boot the lab: LAB_HOSTS guests (default 6), their BMCs, the WoL relay
#   make lab-down     stop everything the lab started
#   make lab-status   host, power, S3 state, SSH, ports, MAC, rack, gear group
#   make test-lab     the lab suite (tests/lab); leaves the lab up for the suites after it
#
# The image and kernel are cached in $(FLEETNAP_CACHE)/lab, keyed by a hash of the recipe.

DEB_PACKAGES += qemu-system-x86 qemu-utils ipxe-qemu openssl openipmi ipmitool debootstrap wakeonlan etherwake \
                openssh-client e2fsprogs

FLEETNAP_CACHE ?= /var/cache/fleetnap
export FLEETNAP_CACHE
LABCTL := /usr/bin/python3 lab/labctl.py

.PHONY: lab-image lab-up lab-down lab-status test-lab test-lab-self test-molecule

lab-image: setup
	$(LABCTL) build-image

lab-up: setup
	$(LABCTL) up

lab-down:
	$(LABCTL) down

lab-status:
	$(LABCTL) status

# The lab suite in CI: fleetnap on the lab. The lab's own fidelity tests (its guests' S3 wakes by
# third-party senders, BMC power off/on/soft and a guest killed from outside, a second lab's life
# cycle) and the long tests marked lab_long are test-lab-self: run them when lab/ changes (each boots or power-cycles guests; they
# cost about ten minutes of CI's 2 cores, and fleetnap's own lab tests exercise the same paths).
test-lab: setup
	$(BIN)/pytest -q -p no:cacheprovider --durations=0 --durations-min=20 -m "lab and not lab_self and not lab_long" tests/lab

test-lab-self: setup
	$(BIN)/pytest -q -p no:cacheprovider --durations=0 --durations-min=20 -m "lab_self or lab_long" tests/lab

# Role scenarios (molecule/*): each role converged on lab guests, checked idempotent where the role
# is (not the measurements nor parking and waking: each run acts anew) and verified on the guests
# by pytest-testinfra (molecule's default driver; the lab is kept up for whatever runs after).
# Two lanes side by side (tests/run_molecule.py; each scenario's time printed, its log in
# artifacts/molecule-NAME.log), each on guests of its own, then gear_shift (every guest) alone.
# A scenario on one TCG guest keeps about 1.2 of the 2 cores busy (sampled from /proc: the guest
# one, Ansible and SSH the rest); two lanes keep both busy: ptp_clock beside node_exporter took
# 487 s, one after the other 702 s (2026-11-28, this repository's 2-core machine). An earlier
# measurement (535 s against 543 s) had both lanes' long scenarios in one lane. Lane 1: lab6, lab2,
# lab1+lab4, the controller; lane 2: lab5, then lab3 three times.
MOLECULE_SCENARIOS := default node_exporter ptp_clock resume_measure wake_latency_measure gear_member gear_member_refused gear_shift gear_schedule slurm_power
MOLECULE_LANES := --lane ptp_clock,wake_latency_measure,default,gear_schedule,slurm_power \
                  --lane node_exporter,resume_measure,gear_member,gear_member_refused
test-molecule: setup
	FLEETNAP_LAB_KEEP=1 $(BIN)/python tests/run_molecule.py $(MOLECULE_LANES) --molecule $(CURDIR)/$(BIN)/molecule --log-dir $(ARTIFACTS) $(MOLECULE_SCENARIOS)

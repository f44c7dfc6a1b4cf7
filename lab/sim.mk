# The fleet simulator (lab/sim.py).  Included by the top-level Makefile.
#
#   make sim-up       start SIM_HOSTS (default 100) simulated hosts: each its own BMC, network and
#                     mount namespace, sshd and captured machine; writes inventories/sim/hosts.yml
#   make sim-down     remove every simulated host, namespace, veth, the bridge and their processes
#   make sim-status   host, address, captured machine, sshd pid, SSH
#   make sim-reset    restart the hosts with pristine captured sysfs (what the benchmark does)
#   make bench-sim    the apply_profile benchmark on the simulator (ping floor, naive playbook)
#   make test-sim     the simulator's own test (6 hosts on a separate subnet, own state dir)

DEB_PACKAGES += openssh-server iproute2 util-linux openipmi ipmitool

SIM_HOSTS ?= 100
export SIM_HOSTS
SIMCTL := /usr/bin/python3 lab/sim.py

.PHONY: sim-up sim-down sim-status sim-reset bench-sim test-sim

sim-up: setup
	$(SIMCTL) up --hosts $(SIM_HOSTS)

sim-down:
	$(SIMCTL) down

sim-status:
	$(SIMCTL) status

sim-reset:
	$(SIMCTL) reset

bench-sim: sim-up
	$(BIN)/python tests/bench/bench_apply_profile.py

test-sim: setup
	$(BIN)/pytest -q -p no:cacheprovider --durations=5 -m sim tests/sim

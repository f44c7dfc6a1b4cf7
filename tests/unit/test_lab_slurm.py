"""lab/slurm.py's two slurm.conf files (no lab needed): the guests' and the controller's differ only
where the network and the munge socket make them differ, each node line carries the port QEMU
forwards, and a power configuration with partitions replaces the lab's one partition."""

import layout
import slurm


def hosts(n=3):
    return layout.host_table({"hosts": n, "ssh_base": 22200, "bmc_base": 9620})


def keyed(text):
    return [ln for ln in text.splitlines() if ln and not ln.startswith("#")]


def test_the_two_files_differ_in_the_controllers_address_the_munge_socket_and_the_include_only():
    h = hosts()
    ctl, guest = keyed(slurm.conf_text(h, guest=False)), keyed(slurm.conf_text(h, guest=True))
    only_ctl, only_guest = set(ctl) - set(guest), set(guest) - set(ctl)
    assert {ln.split("=", 1)[0] for ln in only_ctl} == {"SlurmctldHost", "AuthInfo", "Include %s" % slurm.POWER_CONF}
    assert {ln.split("=", 1)[0] for ln in only_guest} == {"SlurmctldHost", "AuthInfo"}
    assert [ln for ln in guest if ln.startswith("SlurmctldHost=")][0].endswith("(10.0.2.100)")
    assert [ln for ln in ctl if ln.startswith("SlurmctldHost=")][0].endswith("(127.0.0.1)")
    assert "DebugFlags=NO_CONF_HASH" in ctl and "SlurmctldPort=22400" in ctl


def test_each_node_line_has_the_port_qemu_forwards_to_its_slurmd():
    h = hosts(6)
    text = slurm.conf_text(h, guest=True)
    for host in h:
        assert "NodeName=%s NodeAddr=127.0.0.1 Port=%d " % (host["name"], host["slurmd_port"]) in text
    assert [x["slurmd_port"] for x in h] == list(range(22401, 22407))
    assert len({x["slurmd_port"] for x in h} | {x["ssh_port"] for x in h} | {x["metrics_port"] for x in h}
               | {h[0]["slurmctld_port"]}) == 3 * 6 + 1


def test_the_labs_partition_only_when_the_power_configuration_has_none():
    h = hosts()
    assert "PartitionName=lab Nodes=ALL Default=YES" in slurm.conf_text(h, guest=False)
    assert "PartitionName" not in slurm.conf_text(h, guest=False, partition=False)
    assert "PartitionName" not in slurm.conf_text(h, guest=True, partition=False)

#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: fleetnap contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
---
module: wake_on_lan
short_description: Send Wake-on-LAN magic packets to many MAC addresses
description:
  - Builds the standard magic packet for every MAC (6 x 0xFF followed by the MAC 16 times,
    102 bytes), optionally followed by a SecureOn password (4 or 6 bytes), and sends it as a UDP
    datagram to a broadcast or unicast address, each packet O(repeat) times.
  - Validates every MAC and the password before the first packet is sent.
  - Sending is an action, so the module reports changed unless nothing would be sent.
    It cannot know whether a host woke up; follow it with M(host_wait).
  - Runs on the controller or a host in the target's broadcast domain (C(delegate_to)).
  - Why not C(community.general.wakeonlan). That sends to one MAC per call; this one sends a whole
    batch of hosts' packets in one call (a gear shift's wave), with repeats and SecureOn, and
    checks every MAC before the first packet leaves; fleetnap needs no other collection for it.
version_added: "0.1.0"
author:
  - fleetnap contributors (@fleetnap)
extends_documentation_fragment:
  - fleetnap.power.attributes
options:
  macs:
    description:
      - MAC addresses to wake, as C(aa:bb:cc:dd:ee:ff), C(aa-bb-cc-dd-ee-ff) or C(aabb.ccdd.eeff).
      - Duplicates (after normalisation) are sent once. At most 4096.
    type: list
    elements: str
    required: true
    aliases: [mac]
  broadcast:
    description: Destination address, a broadcast (limited or directed) or a unicast address or name.
    type: str
    default: 255.255.255.255
  port:
    description: UDP destination port (9 discard is the convention, 7 echo also common).
    type: int
    default: 9
  password:
    description:
      - SecureOn password appended to every packet, 6 bytes as C(aa:bb:cc:dd:ee:ff), 4 bytes as
        C(a.b.c.d), or 8 or 12 hex digits.
    type: str
  repeat:
    description: How many times each packet is sent (UDP may drop one), 1 to 100.
    type: int
    default: 3
  interval:
    description: Seconds between rounds of packets, 0 to 10.
    type: float
    default: 0.01
attributes:
  check_mode:
    support: full
    details:
      - Validates everything and reports what would be sent; sends nothing.
  diff_mode:
    support: none
  platform:
    support: full
"""

EXAMPLES = r"""
- name: Wake the servers of gear group 2
  wake_on_lan:
    macs: "{{ groups['gear_group_2'] | map('extract', hostvars, 'fleetnap_mac') | list }}"
    broadcast: 10.0.40.255
  delegate_to: localhost
  run_once: true

- name: Wake one host with a SecureOn password, unicast
  wake_on_lan:
    mac: 52-54-00-12-34-56
    broadcast: 10.0.40.17
    password: "{{ vault_secureon }}"
  delegate_to: localhost

- name: Wait until it answers
  ansible.builtin.wait_for_connection:
    timeout: 300
"""

RETURN = r"""
macs:
  description: The normalised MACs packets were (or in check mode would be) sent to.
  returned: success
  type: list
  elements: str
  sample: ["52:54:00:12:34:56"]
packet_bytes:
  description: Size of each magic packet (102, 106 or 108).
  returned: success
  type: int
  sample: 102
datagrams_sent:
  description: UDP datagrams sent (0 in check mode).
  returned: success
  type: int
  sample: 3
destination:
  description: Address and port the packets went to.
  returned: success
  type: str
  sample: "255.255.255.255:9"
"""

from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils.fleetnap.validate import check_params, name, number, text, items
from ansible.module_utils.fleetnap.wol import WolError, build_packet, normalize_mac, parse_password, resolve, \
    send_packets

MAX_MACS = 4096

CHECKS = {
    "macs": items(MAX_MACS),
    "broadcast": name(r"^[A-Za-z0-9_.:%-]{1,253}$", "an IPv4 or IPv6 address or a host name"),
    "port": number(lo=1, hi=65535, integer=True),
    "repeat": number(lo=1, hi=100, integer=True),          # each packet at most 100 times
    "interval": number(lo=0, hi=10),                        # seconds between rounds
    "password": text(max_len=64),
}


def main():
    module = AnsibleModule(
        argument_spec=dict(
            macs=dict(type="list", elements="str", required=True, aliases=["mac"]),
            broadcast=dict(type="str", default="255.255.255.255"),
            port=dict(type="int", default=9),
            password=dict(type="str", no_log=True),
            repeat=dict(type="int", default=3),
            interval=dict(type="float", default=0.01),
        ),
        supports_check_mode=True,
    )
    check_params(module, CHECKS)
    p = module.params
    try:
        macs = []
        for raw in p["macs"]:
            mac = normalize_mac(raw)
            if mac not in macs:
                macs.append(mac)
        if not macs:
            module.fail_json(msg="macs is empty: give at least one MAC address")
        password = parse_password(p["password"])
        resolve(p["broadcast"], p["port"])
        packets = [build_packet(mac, password) for mac in macs]
    except WolError as e:
        module.fail_json(msg=str(e))
    result = dict(changed=True, macs=macs, packet_bytes=len(packets[0]), datagrams_sent=0,
                  destination="%s:%d" % (p["broadcast"], p["port"]))
    if module.check_mode:
        module.exit_json(**result)
    try:
        result["datagrams_sent"] = send_packets(packets, p["broadcast"], p["port"], p["repeat"], p["interval"])
    except WolError as e:
        module.fail_json(msg=str(e), **result)
    module.exit_json(**result)


if __name__ == "__main__":
    main()

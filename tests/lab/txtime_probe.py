#!/usr/bin/python3
"""SO_TXTIME sender and SO_TIMESTAMPNS receiver (standard library only; pushed to a lab guest).

    txtime_probe.py recv PORT COUNT TIMEOUT_S        prints one JSON object per packet, then {"done": ...}
    txtime_probe.py send ADDR PORT COUNT MIN_MS MAX_MS [--priority P] [--no-txtime] [--deadline]

The sender opens a UDP socket with SO_PRIORITY (which the mqprio map turns into a traffic class and
so a TX queue) and SO_TXTIME (clockid CLOCK_TAI), and sends COUNT packets, each with an SCM_TXTIME
control message carrying a launch time MIN_MS..MAX_MS ahead (CLOCK_TAI, nanoseconds), waiting for
each launch time to pass before the next send. The payload carries the sequence number and the
launch time. The receiver timestamps every packet in the kernel (SO_TIMESTAMPNS: CLOCK_REALTIME when
the packet reached the receiving device) and converts to CLOCK_TAI with the kernel's TAI offset,
so launch and arrival are compared in one clock base.
"""

import json
import random
import socket
import struct
import sys
import time

SOL_SOCKET = socket.SOL_SOCKET
SO_PRIORITY = 12
SO_TIMESTAMPNS = 35          # SO_TIMESTAMPNS_OLD; SCM_TIMESTAMPNS is the same number
SO_TXTIME = 61               # SCM_TXTIME is the same number
SOF_TXTIME_DEADLINE_MODE = 1
SOF_TXTIME_REPORT_ERRORS = 2
CLOCK_TAI = 11


def tai_offset_ns():
    """CLOCK_TAI - CLOCK_REALTIME: whole seconds (adjtimex's tai), read around a realtime sample."""
    best = None
    for _ in range(5):
        a = time.clock_gettime_ns(time.CLOCK_REALTIME)
        t = time.clock_gettime_ns(CLOCK_TAI)
        b = time.clock_gettime_ns(time.CLOCK_REALTIME)
        if best is None or b - a < best[0]:
            best = (b - a, t - (a + b) // 2)
    return round(best[1] / 1e9) * 1000000000


def recv(port, count, timeout_s):
    sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    sock.setsockopt(SOL_SOCKET, SO_TIMESTAMPNS, 1)
    sock.bind(("0.0.0.0", port))
    sock.settimeout(timeout_s)
    offset = tai_offset_ns()
    print(json.dumps({"ready": True, "tai_offset_ns": offset}), flush=True)
    got = 0
    while got < count:
        try:
            data, ancdata, _flags, _addr = sock.recvmsg(256, socket.CMSG_SPACE(16))
        except socket.timeout:
            break
        user_tai = time.clock_gettime_ns(CLOCK_TAI)
        kernel = None
        for level, ctype, cdata in ancdata:
            if level == SOL_SOCKET and ctype == SO_TIMESTAMPNS:
                sec, nsec = struct.unpack("qq", cdata[:16])
                kernel = sec * 1000000000 + nsec
        seq, launch = struct.unpack("!IQ", data[:12])
        print(json.dumps({"seq": seq, "launch_tai_ns": launch,
                          "rx_tai_ns": None if kernel is None else kernel + offset,
                          "user_tai_ns": user_tai}), flush=True)
        got += 1
    print(json.dumps({"done": True, "received": got}), flush=True)


def send(addr, port, count, min_ms, max_ms, priority, txtime, deadline):
    sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    sock.setsockopt(SOL_SOCKET, SO_PRIORITY, priority)
    flags = SOF_TXTIME_REPORT_ERRORS | (SOF_TXTIME_DEADLINE_MODE if deadline else 0)
    if txtime:
        # struct sock_txtime { clockid_t clockid; __u32 flags; }
        sock.setsockopt(SOL_SOCKET, SO_TXTIME, struct.pack("iI", CLOCK_TAI, flags))
    rng = random.Random(6)
    sent = []
    for seq in range(count):
        ahead_ns = int(rng.uniform(min_ms, max_ms) * 1e6)
        now = time.clock_gettime_ns(CLOCK_TAI)
        launch = now + ahead_ns
        cmsg = [(SOL_SOCKET, SO_TXTIME, struct.pack("Q", launch))] if txtime else []
        sock.sendmsg([struct.pack("!IQ", seq, launch)], cmsg, 0, (addr, port))
        sent.append({"seq": seq, "launch_tai_ns": launch, "send_tai_ns": now})
        # the next packet only after this one's launch time (ETF drops a txtime before the last dequeued)
        time.sleep(max(0.0, (launch - time.clock_gettime_ns(CLOCK_TAI)) / 1e9) + 0.002)
    print(json.dumps({"sent": sent, "txtime": txtime, "priority": priority}), flush=True)


def main(argv):
    if argv[1] == "recv":
        recv(int(argv[2]), int(argv[3]), float(argv[4]))
    elif argv[1] == "send":
        opts = argv[7:]
        priority = int(opts[opts.index("--priority") + 1]) if "--priority" in opts else 3
        send(argv[2], int(argv[3]), int(argv[4]), float(argv[5]), float(argv[6]), priority,
             "--no-txtime" not in opts, "--deadline" in opts)
    else:
        sys.exit("usage: txtime_probe.py recv|send ...")


if __name__ == "__main__":
    main(sys.argv)

# -*- coding: utf-8 -*-
# Copyright: (c) 2025, fleetnap contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""One lab guest's Redfish BMC: OpenStack's sushy-tools emulator as shipped (its Flask app,
HTTPS, HTTP Basic users, Systems/Managers/Chassis resources, boot override and reset action),
run with a systems driver of the lab's own that drives the guest's QEMU, the way the lab's
``ipmi_sim`` drives it for IPMI. Both BMCs drive the same guest, as on a server whose BMC speaks
IPMI and Redfish: QEMU started here connects to the guest's ipmi_sim (its VM link), which then
reports the chassis on, and an IPMI power-off reaches it there.

The driver (sushy-tools' fake driver keeps the system's record: name, UUID, NICs, boot device):

- PowerState is the guest's: ``On`` while its QEMU runs (also in S3: a BMC reports a suspended
  host on), ``Off`` when there is none.
- ``On``/``ForceOn`` starts the guest's QEMU (the command line lab/labctl.py wrote), booting the
  disk, or, when the system's boot device is ``Pxe``, the network: no kernel given, ``-boot order=n``,
  SeaBIOS and iPXE look for a server that is not there and the guest never answers (what a host
  whose boot order network-boots does after a power-on: the case safe power-on guards against).
  ``On`` on a running (or suspended) guest does nothing.
- ``ForceOff``: QMP ``quit``. ``GracefulShutdown``: the ACPI power button (QMP
  ``system_powerdown``); the guest shuts down and its QEMU exits. ``ForceRestart``: QMP
  ``system_reset``. ``GracefulRestart``: power button, then a start once it is off. ``Nmi``:
  QMP ``inject-nmi``.
- sushy-tools keeps a boot override ``Continuous`` (it ignores ``BootSourceOverrideEnabled``):
  a one-time override stays in place after the boot, which the client reports.

Fault injection (the file ``faults.json`` beside this BMC's state, read on every request;
``labctl redfish-fault``): ``{"status": 503, "count": N}`` answers the next N requests 503 with a
Retry-After; ``{"task_s": S}`` answers a reset with 202 and a task monitor that stays ``Running``
for S seconds before the reset is carried out.

Every power action is a JSON line in ``power.log`` (time, reset type, what was done, boot).

Runs with the venv's Python (sushy-tools is in requirements.txt); lab/labctl.py starts one per
guest::

    .venv/bin/python lab/redfish_bmc.py --dir STATE/labN/redfish

``--dir`` holds ``bmc.json`` (written by labctl: port, certificate, key, password file, the
guest's table entry and QEMU command line); this writes ``sushy.conf``, ``htpasswd`` (bcrypt, 0600)
and ``state/`` there. Imports lab/guest.py, lab/layout.py and lab/proc.py.
"""

from __future__ import annotations

import argparse
import io
import itertools
import json
import os
import sys
import threading
import time
import uuid
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from guest import qemu_alive, qmp, qmp_status  # noqa: E402
from layout import LabError  # noqa: E402
from proc import spawn, wait_for, wait_gone, write_private  # noqa: E402

ALLOWED = ("On", "ForceOn", "ForceOff", "GracefulShutdown", "GracefulRestart", "ForceRestart", "Nmi")


def network_boot_argv(argv: list[str]) -> list[str]:
    """The guest's command line without its kernel (no -kernel/-initrd/-append): the firmware
    boots from the network (-boot order=n)."""
    out, skip = [], False
    for a in argv:
        if skip:
            skip = False
            continue
        if a in ("-kernel", "-initrd", "-append"):
            skip = True
            continue
        out.append(a)
    return out + ["-boot", "order=n"]


class Guest(object):
    """The guest as its BMC sees it: its QEMU process (started, stopped, reset through QMP)."""

    def __init__(self, spec: dict, log_path: Path):
        self.host = spec["host"]
        self.argv = spec["argv"]
        self.dir = Path(self.host["dir"])
        self.log_path = log_path
        self.lock = threading.RLock()
        self.generation = 0         # bumped by every power action: a pending restart yields to a later one

    def log(self, **entry) -> None:
        entry = dict({"time": time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime()) + ".%03dZ" % (time.time() % 1 * 1000),
                      "host": self.host["name"]}, **entry)
        with open(self.log_path, "a") as fh:
            fh.write(json.dumps(entry) + "\n")

    def alive(self) -> int | None:
        return qemu_alive(self.host)

    def start(self, boot_device: str) -> str:
        network = boot_device == "Pxe"
        argv = network_boot_argv(self.argv) if network else self.argv
        child = spawn(argv, self.dir / "qemu-redfish.log")
        # QEMU is up when it wrote its pid file and answers QMP (or gone: its log says why)
        if not wait_for(lambda: self.alive() and qmp_status(self.host) != "off", 20, child=child):
            if child.poll() is None:        # not up in time: not left to come up behind the error
                child.kill()
                child.wait(10)
            raise LabError("%s: QEMU did not start within 20 s; see %s"
                           % (self.host["name"], self.dir / "qemu-redfish.log"))
        return "network (boot device Pxe)" if network else "disk"

    def stop(self, timeout: float = 10) -> None:
        pid = self.alive()
        if not pid:
            return
        try:
            qmp(self.host["qmp"], "quit", timeout=3)
        except (OSError, LabError):
            pass
        if wait_gone([pid], timeout):
            os.kill(pid, 9)
            wait_gone([pid], 5)

    def powerdown(self) -> None:
        qmp(self.host["qmp"], "system_powerdown")


def make_driver(guest: Guest):
    """sushy-tools' fake driver (the system's record) with the guest's power."""
    from sushy_tools import error
    from sushy_tools.emulator.resources.systems import fakedriver

    class LabGuestDriver(fakedriver.FakeDriver):
        @property
        def driver(self):
            return "<fleetnap lab guest %s>" % guest.host["name"]

        def get_power_state(self, identity):
            self._get(identity)     # NotFound for another system
            return "On" if guest.alive() else "Off"

        def set_power_state(self, identity, state):
            self._get(identity)
            if state not in ALLOWED:
                raise error.NotSupportedError("Power state %s is not supported" % state)
            with guest.lock:
                guest.generation += 1
                on = bool(guest.alive())
                done, boot = "nothing (already %s)" % ("on" if on else "off"), None
                if state in ("On", "ForceOn") and not on:
                    boot = guest.start(self.get_boot_device(identity))
                    done = "started"
                elif state == "ForceOff" and on:
                    guest.stop()
                    done = "stopped (QMP quit)"
                elif state == "GracefulShutdown" and on:
                    guest.powerdown()
                    done = "ACPI power button"
                elif state == "ForceRestart":
                    if on:
                        qmp(guest.host["qmp"], "system_reset")
                        done = "reset (QMP system_reset)"
                    else:
                        boot = guest.start(self.get_boot_device(identity))
                        done = "started"
                elif state == "GracefulRestart":
                    device = self.get_boot_device(identity)
                    if on:
                        guest.powerdown()
                        threading.Thread(target=self._start_when_off, args=(device, guest.generation),
                                         daemon=True).start()
                        done = "ACPI power button, started again once off"
                    else:
                        boot = guest.start(device)
                        done = "started"
                elif state == "Nmi" and on:
                    qmp(guest.host["qmp"], "inject-nmi")
                    done = "NMI (QMP inject-nmi)"
                guest.log(reset_type=state, done=done, boot=boot)

        @staticmethod
        def _start_when_off(device, generation):
            end = time.monotonic() + 120
            while guest.alive() and time.monotonic() < end and guest.generation == generation:
                time.sleep(0.2)
            with guest.lock:        # not when another power action came after this restart
                if not guest.alive() and guest.generation == generation:
                    guest.log(reset_type="GracefulRestart", done="started", boot=guest.start(device))

    return LabGuestDriver


# ---------------------------------------------------------------------------------------------
# Fault injection, in front of the emulator (inside its authentication)
# ---------------------------------------------------------------------------------------------

def _json_response(start_response, status, doc, headers=()):
    body = json.dumps(doc).encode()
    start_response(status, [("Content-Type", "application/json"), ("Content-Length", str(len(body)))]
                   + list(headers))
    return [body]


class Faults(object):
    """WSGI middleware between sushy-tools' authentication and its app: what faults.json says."""

    TASKS = "/redfish/v1/TaskService/Tasks/"

    def __init__(self, app, path: Path):
        self.app = app
        self.path = path
        self.lock = threading.Lock()
        self.tasks: dict[str, dict] = {}
        self.ids = itertools.count(1)

    def _take(self) -> dict:
        """The fault for this request (a 503 count goes down by one)."""
        with self.lock:
            try:
                fault = json.loads(self.path.read_text())
            except (OSError, ValueError):
                return {}
            if not isinstance(fault, dict):
                return {}
            if fault.get("status") == 503:
                try:
                    left = int(fault.get("count", 1))
                except (TypeError, ValueError):
                    left = 1
                if left <= 1:
                    self.path.unlink(missing_ok=True)
                else:       # atomic: labctl may clear or replace the file at any time
                    tmp = self.path.with_name(self.path.name + ".bmc-tmp")
                    tmp.write_text(json.dumps(dict(fault, count=left - 1)))
                    os.replace(tmp, self.path)
            return fault

    def __call__(self, environ, start_response):
        path = environ.get("PATH_INFO", "")
        method = environ.get("REQUEST_METHOD", "GET")
        if path.startswith(self.TASKS) and method == "GET":
            return self._task(path[len(self.TASKS):], start_response)
        fault = self._take()
        if fault.get("status") == 503:
            return _json_response(start_response, "503 Service Unavailable", {"error": {
                "code": "Base.1.8.ServiceTemporarilyUnavailable",
                "message": "The BMC is busy (lab fault injection); retry later"}}, [("Retry-After", "1")])
        if fault.get("task_s") and method == "POST" and path.endswith("/Actions/ComputerSystem.Reset"):
            return self._slow_reset(environ, start_response, float(fault["task_s"]))
        return self.app(environ, start_response)

    def _slow_reset(self, environ, start_response, delay: float):
        length = int(environ.get("CONTENT_LENGTH") or 0)
        body = environ["wsgi.input"].read(length) if length else b""
        task_id = "labtask-%d" % next(self.ids)
        task = {"state": "Running", "messages": [], "until": time.monotonic() + delay}
        self.tasks[task_id] = task
        inner = dict(environ)

        def later():
            time.sleep(delay)
            inner["wsgi.input"] = io.BytesIO(body)
            got = {}
            out = b"".join(self.app(inner, lambda status, headers, exc=None: got.setdefault("status", status)))
            ok = got.get("status", "500").startswith("2")
            task["messages"] = [] if ok else [out.decode("utf-8", "replace")[:300]]
            task["state"] = "Completed" if ok else "Exception"

        threading.Thread(target=later, daemon=True).start()
        return _json_response(start_response, "202 Accepted", self._task_doc(task_id, task),
                              [("Location", self.TASKS + task_id), ("Retry-After", "1")])

    def _task_doc(self, task_id, task):
        return {"@odata.id": self.TASKS + task_id, "@odata.type": "#Task.v1_5_0.Task", "Id": task_id,
                "Name": "Reset (lab slow task)", "TaskState": task["state"],
                "TaskStatus": {"Running": "OK", "Completed": "OK"}.get(task["state"], "Critical"),
                "Messages": [{"Message": m} for m in task["messages"]]}

    def _task(self, task_id, start_response):
        task = self.tasks.get(task_id)
        if task is None:
            return _json_response(start_response, "404 Not Found", {"error": {"message": "no such task"}})
        status = "202 Accepted" if task["state"] == "Running" else "200 OK"
        return _json_response(start_response, status, self._task_doc(task_id, task))


# ---------------------------------------------------------------------------------------------
# Set-up and main
# ---------------------------------------------------------------------------------------------

def write_htpasswd(path: Path, user: str, password: str) -> None:
    """sushy-tools' users file: bcrypt only (its authentication accepts nothing else)."""
    import bcrypt
    write_private(path, "%s:%s\n" % (user, bcrypt.hashpw(password.encode(), bcrypt.gensalt(rounds=6)).decode()))


def configure(d: Path) -> tuple[dict, Path]:
    spec = json.loads((d / "bmc.json").read_text())
    host = spec["host"]
    password = Path(spec["password_file"]).read_text().strip()
    write_htpasswd(d / "htpasswd", spec["user"], password)
    (d / "state").mkdir(exist_ok=True)
    system = {"uuid": str(uuid.uuid5(uuid.NAMESPACE_DNS, "%s.fleetnap-lab" % host["name"])),
              "name": host["name"], "power_state": "Off", "external_notifier": False,
              "nics": [{"mac": host["mgmt_mac"]}, {"mac": host["wol_mac"]}]}
    conf = d / "sushy.conf"
    conf.write_text("\n".join([
        "# Written by lab/redfish_bmc.py for %s's Redfish BMC." % host["name"],
        "SUSHY_EMULATOR_LISTEN_IP = '127.0.0.1'",
        "SUSHY_EMULATOR_LISTEN_PORT = %d" % spec["port"],
        "SUSHY_EMULATOR_SSL_CERT = %r" % spec["cert"],
        "SUSHY_EMULATOR_SSL_KEY = %r" % spec["key"],
        "SUSHY_EMULATOR_AUTH_FILE = %r" % str(d / "htpasswd"),
        "SUSHY_EMULATOR_FAKE_DRIVER = True",
        "SUSHY_EMULATOR_FAKE_SYSTEMS = %r" % ([system],),
        "SUSHY_EMULATOR_STATE_DIR = %r" % str(d / "state"),
        "",
    ]))
    return spec, conf


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--dir", required=True, type=Path, help="this BMC's directory (bmc.json)")
    args = ap.parse_args(argv)
    d = args.dir.resolve()
    spec, conf = configure(d)
    guest = Guest(spec, d / "power.log")

    from sushy_tools.emulator import main as emulator
    from sushy_tools.emulator.resources.systems import fakedriver
    fakedriver.FakeDriver = make_driver(guest)      # what the emulator's 'fake' setting loads
    # Inside the authentication: sushy-tools wraps app.wsgi_app in it when main() configures it
    emulator.app.wsgi_app = Faults(emulator.app.wsgi_app, d / "faults.json")
    sys.argv = ["sushy-emulator", "--config", str(conf)]
    (d / "ready").write_text("%d\n" % os.getpid())
    return emulator.main()


if __name__ == "__main__":
    sys.exit(main())

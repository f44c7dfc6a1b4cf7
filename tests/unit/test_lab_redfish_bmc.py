"""lab/redfish_bmc.py without a lab: the network-boot command line and the fault injection in
front of sushy-tools (a 503 count that runs out, a reset answered by a slow task whose monitor
says Running, then Completed, or Exception when the reset was refused). The lab suite
(tests/lab/test_redfish_lab.py) runs the real emulator and guests."""

import io
import json
import time

import pytest

import redfish_bmc


def test_network_boot_drops_the_kernel_and_boots_from_the_network():
    argv = ["qemu", "-m", "512", "-kernel", "/k", "-initrd", "/i", "-append", "root=/dev/vda ro", "-pidfile", "/p"]
    assert redfish_bmc.network_boot_argv(argv) == ["qemu", "-m", "512", "-pidfile", "/p", "-boot", "order=n"]
    assert argv[3] == "-kernel"     # the guest's own command line is left as it was


class App(object):
    """The emulator behind the middleware: records what reached it, answers with a set status."""

    def __init__(self, status="204 No Content"):
        self.status = status
        self.seen = []

    def __call__(self, environ, start_response):
        body = environ["wsgi.input"].read(int(environ.get("CONTENT_LENGTH") or 0))
        self.seen.append((environ["REQUEST_METHOD"], environ["PATH_INFO"], body))
        start_response(self.status, [])
        return [b'{"error": "refused"}' if not self.status.startswith("2") else b""]


def call(app, method, path, body=b""):
    got = {}

    def start_response(status, headers, exc=None):
        got["status"], got["headers"] = status, dict(headers)
    out = b"".join(app({"REQUEST_METHOD": method, "PATH_INFO": path, "CONTENT_LENGTH": str(len(body)),
                        "wsgi.input": io.BytesIO(body)}, start_response))
    return int(got["status"].split()[0]), got["headers"], (json.loads(out) if out.startswith(b"{") else out)


RESET = "/redfish/v1/Systems/x/Actions/ComputerSystem.Reset"


def test_no_fault_file_passes_everything_through(tmp_path):
    inner = App()
    faults = redfish_bmc.Faults(inner, tmp_path / "faults.json")
    assert call(faults, "POST", RESET, b'{"ResetType": "On"}')[0] == 204
    assert inner.seen == [("POST", RESET, b'{"ResetType": "On"}')]


def test_busy_answers_503_with_retry_after_for_the_count_then_passes(tmp_path):
    inner = App()
    path = tmp_path / "faults.json"
    path.write_text(json.dumps({"status": 503, "count": 2}))
    faults = redfish_bmc.Faults(inner, path)
    for _ in range(2):
        status, headers, doc = call(faults, "GET", "/redfish/v1/Systems")
        assert status == 503 and headers["Retry-After"] == "1" and "busy" in doc["error"]["message"]
    assert not path.exists() and inner.seen == []
    assert call(faults, "GET", "/redfish/v1/Systems")[0] == 204 and len(inner.seen) == 1


@pytest.mark.parametrize("inner_status, end_state, messages", [
    ("204 No Content", "Completed", []),
    ("400 Bad Request", "Exception", ['{"error": "refused"}']),
])
def test_a_slow_reset_is_a_task_that_runs_then_ends(tmp_path, inner_status, end_state, messages):
    inner = App(inner_status)
    path = tmp_path / "faults.json"
    path.write_text(json.dumps({"task_s": 0.3}))
    faults = redfish_bmc.Faults(inner, path)
    status, headers, doc = call(faults, "POST", RESET, b'{"ResetType": "ForceOff"}')
    assert status == 202 and doc["TaskState"] == "Running" and inner.seen == []
    monitor = headers["Location"]
    assert monitor.startswith("/redfish/v1/TaskService/Tasks/") and call(faults, "GET", monitor)[0] == 202
    end = time.monotonic() + 10
    while call(faults, "GET", monitor)[0] == 202 and time.monotonic() < end:
        time.sleep(0.05)
    status, _h, doc = call(faults, "GET", monitor)
    assert status == 200 and doc["TaskState"] == end_state and [m["Message"] for m in doc["Messages"]] == messages
    assert inner.seen == [("POST", RESET, b'{"ResetType": "ForceOff"}')]     # carried out, once, as sent
    assert call(faults, "GET", "/redfish/v1/TaskService/Tasks/nope")[0] == 404


def test_only_resets_become_tasks(tmp_path):
    inner = App()
    path = tmp_path / "faults.json"
    path.write_text(json.dumps({"task_s": 5}))
    faults = redfish_bmc.Faults(inner, path)
    assert call(faults, "PATCH", "/redfish/v1/Systems/x", b"{}")[0] == 204 and len(inner.seen) == 1


@pytest.mark.parametrize("args, words", [
    (["--busy", "0"], "--busy N: 1..10000 requests"),
    (["--task", "nan"], "--task S: more than 0 and at most 3600 seconds"),
    (["--task", "-1"], "--task S: more than 0 and at most 3600 seconds"),
    ([], "one of the arguments --busy --task --clear is required"),
])
def test_labctl_redfish_fault_refuses_bad_input_before_reading_the_lab(tmp_path, args, words):
    import os
    import subprocess
    from conftest import REPO
    proc = subprocess.run(["/usr/bin/python3", str(REPO / "lab/labctl.py"), "redfish-fault", "lab1", *args],
                          capture_output=True, text=True, timeout=30,
                          env=dict(os.environ, LAB_STATE=str(tmp_path / "state")))
    assert proc.returncode == 2 and words in proc.stderr, proc.stderr
    assert not (tmp_path / "state").exists() or not any((tmp_path / "state").rglob("faults.json"))

"""command.run: every byte of a command's output, read to its end, whatever the timing.

The case that matters: a command that answers after about a second and exits at once (ipmitool
from a busy BMC). ansible's run_command stops reading when its one-second select timed out and the
process has exited by then, so such an answer can be lost with exit status 0 (ansible/ansible#51393):
one run here on ansible-core 2.19.14, 40 threads running 400 commands that sleep 0.995-1.005 s and
then print, got 30 empty answers. command.run must lose none; this runs the same shape of
commands, at the same spread around the second, and counts."""

from __future__ import annotations

import os
import sys
from concurrent.futures import ThreadPoolExecutor

import pytest

from ansible.module_utils.fleetnap import command


def test_answers_written_as_a_second_runs_out_are_all_read():
    def one(i):
        delay = 0.995 + (i % 21) * 0.0005
        return i, command.run(["/bin/sh", "-c", "sleep %.4f; echo Chassis Power is on; echo $0 >&2" % delay])
    with ThreadPoolExecutor(max_workers=42) as pool:
        results = list(pool.map(one, range(84)))
    lost = [i for i, (rc, out, err) in results if (rc, out, err) != (0, "Chassis Power is on\n", "/bin/sh\n")]
    assert not lost, "runs %s lost their output" % lost


def test_environment_update_and_status():
    rc, out, err = command.run(["/bin/sh", "-c", 'printf "%s|%s" "$IPMI_PASSWORD" "$LC_ALL"; echo oops >&2; exit 3'],
                               {"IPMI_PASSWORD": "s3cret", "LC_ALL": "C"})
    assert (rc, out, err) == (3, "s3cret|C", "oops\n")
    assert "IPMI_PASSWORD" not in os.environ or os.environ["IPMI_PASSWORD"] != "s3cret"   # not leaked into ours


def test_no_shell_stdin_closed_bytes_that_are_not_utf8():
    rc, out, _ = command.run([sys.executable, "-c",
                              "import sys; d = sys.stdin.read(); sys.stdout.buffer.write(b'%d:\\xff$(x)' % len(d))"])
    assert rc == 0 and out == "0:\ufffd$(x)"


def test_large_output_on_both_pipes_does_not_block():
    rc, out, err = command.run([sys.executable, "-c",
                                "import sys\nfor i in range(20000):\n    print('o' * 20); print('e' * 20, file=sys.stderr)"])
    assert rc == 0 and len(out) == len(err) == 20000 * 21


@pytest.mark.parametrize("argv", [[], "ipmitool -V", ["ipmitool", 3], None])
def test_a_command_is_a_list_of_strings(argv):
    with pytest.raises(ValueError, match="non-empty list of strings"):
        command.run(argv)


def test_a_program_that_cannot_start_is_a_failure_naming_it(tmp_path):
    missing = str(tmp_path / "no-such-dmesg")
    assert command.run([missing]) == (127, "", "cannot run %s: No such file or directory" % missing)
    plain = tmp_path / "not-executable"
    plain.write_text("#!/bin/sh\necho hi\n")
    plain.chmod(0o644)
    # a file with no x bit at all is run by nobody, root included: the kernel says EACCES
    assert command.run([str(plain)]) == (126, "", "cannot run %s: Permission denied" % plain)
    with pytest.raises(OSError):
        command.run([missing], raise_oserror=True)

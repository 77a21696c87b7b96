"""Scratch folders of the C compiler's links (adc/codegen/toolchain/scratch.py): named by their
process, removed after the link, and those of processes killed mid-link swept away by a later
process once an hour old, never a running process's or another program's."""
import os
import re
import subprocess
import sys
import time

from adc.codegen.toolchain import scratch


def exited_pid() -> int:
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    return child.pid


def make(root, name: str, age: float):
    folder = root / name
    folder.mkdir()
    (folder / "part0.o").write_bytes(b"\0" * 16)
    stamp = time.time() - age
    os.utime(folder, (stamp, stamp))
    return folder


def test_a_sweep_removes_only_old_folders_of_processes_that_have_exited(tmp_path):
    dead = exited_pid()
    debris = make(tmp_path, f"adc-{dead}-k2v8x0qa", age=2 * scratch.STALE_AFTER)
    young = make(tmp_path, f"adc-{dead}-77abcd_e", age=10)                      # its process may be elsewhere
    mine = make(tmp_path, f"adc-{os.getpid()}-zzzz1234", age=2 * scratch.STALE_AFTER)    # running
    others = [make(tmp_path, name, age=2 * scratch.STALE_AFTER)
              for name in ("adc-0256bhed", "adc-test-cache-1x2y", f"adc-xla-ffi-{dead}", f"tool-{dead}-ab12")]
    (tmp_path / f"adc-{dead}-file0001").write_bytes(b"")                          # not a folder
    os.utime(tmp_path / f"adc-{dead}-file0001", (0, 0))
    scratch.sweep(tmp_path)
    assert not debris.exists()
    assert young.exists() and mine.exists() and all(folder.exists() for folder in others)
    assert (tmp_path / f"adc-{dead}-file0001").exists()


def test_a_scratch_folder_is_named_by_its_process_and_removed_after_the_block():
    with scratch.scratch_folder() as folder:
        assert folder.is_dir() and re.fullmatch(rf"adc-{os.getpid()}-[a-z0-9_]+", folder.name)
        (folder / "library.so").write_bytes(b"x")
    assert not folder.exists()


def test_a_process_killed_mid_link_leaves_a_folder_the_next_process_sweeps(tmp_path):
    # the child makes a scratch folder and dies in the block (os._exit: no cleanup runs)
    env = {**os.environ, "TMPDIR": str(tmp_path)}
    program = ("import os\nfrom adc.codegen.toolchain.scratch import scratch_folder\n"
               "with scratch_folder() as folder:\n    (folder / 'part0.o').write_bytes(b'1')\n    os._exit(0)\n")
    subprocess.run([sys.executable, "-c", program], env=env, check=True)
    (left,) = tmp_path.iterdir()
    stamp = time.time() - 2 * scratch.STALE_AFTER
    os.utime(left, (stamp, stamp))
    subprocess.run([sys.executable, "-c", "from adc.codegen.toolchain.scratch import scratch_folder\n"
                    "with scratch_folder():\n    pass\n"], env=env, check=True)
    assert list(tmp_path.iterdir()) == []

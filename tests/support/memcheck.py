"""Memory checks of adc's native code, from outside the process that runs it.

Comparing values cannot show an out-of-bounds write: a kernel that writes past its block
returns the right numbers and leaves the heap damaged for the allocator to trip over later,
in another test or never. Two checks see it:

- `run_heap_checked`: a Python program in a child whose glibc fills freed and fresh blocks
  (`glibc.malloc.perturb`) and walks and consolidates the whole heap when the program ends
  (`malloc_trim(0)`): a damaged chunk header aborts the child. Cheap enough for ordinary tests.
  (`glibc.malloc.check` does nothing on glibc 2.36 without libc_malloc_debug.so preloaded.)
- `run_under_valgrind`: the program under valgrind's memcheck, every access checked. valgrind
  3.19 cannot decode AVX-512, so adc compiles for x86-64-v3 there (`ADC_CPU`), into a cache
  folder of its own (one a test session's valgrind runs share: conftest's `valgrind_cache`); the
  program runs once without valgrind first, to fill that cache and leave its modules' bytecode,
  so the run under valgrind maps kernels instead of running LLVM. Reports whose stack has no frame of
  adc's code (kernels, regions, the runtime library, the C call path, or JIT code, which has no
  symbols) are CPython's or the dynamic loader's own and are left out.

The command

    python -m tests.support.memcheck tests/runtime/test_loops.py tests/fuzz

runs pytest over the given tests that way (in one process) and prints the reports in adc's code;
it exits 1 if there is any. valgrind reads its own options from VALGRIND_OPTS: with
`VALGRIND_OPTS=--track-origins=yes` a report of an uninitialised value says where it was created.
"""
from __future__ import annotations

import glob
import os
import shutil
import subprocess
import sys
import tempfile
import xml.etree.ElementTree as ET
from dataclasses import dataclass
from pathlib import Path

from tests.support.repository import ROOT

VALGRIND_CPU = "x86-64-v3"
HEAP_WALK = "import ctypes; ctypes.CDLL(None).malloc_trim(0)"
# Frames of adc's native code by symbol or source; JIT-linked code has neither.
ADC_SYMBOLS = ("adc_", "adc.")
ADC_SOURCES = ("native_call.c", "native_substitution.c")
LOADER_OBJECTS = ("ld-linux", "ld-2.", "/ld.so")
TIMED_OUT = -1      # the status of a run stopped at its time limit


def run_heap_checked(program: str, env: dict[str, str] | None = None,
                     timeout: float = 600) -> subprocess.CompletedProcess:
    """Run Python `program` in a child with glibc's heap checks; a damaged heap fails the child
    (an abort from the allocator, a non-zero exit) even when every value it printed was right."""
    child_env = {**os.environ, **(env or {}), "GLIBC_TUNABLES": "glibc.malloc.perturb=165",
                 "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}
    return subprocess.run([sys.executable, "-c", f"{program}\n{HEAP_WALK}\n"], env=child_env,
                          capture_output=True, text=True, timeout=timeout, cwd=ROOT)


@dataclass(frozen=True)
class Report:
    """One valgrind report in adc's code: its kind (InvalidWrite, ...), what valgrind said, its stack,
    and what it added: the block an address lies in, or (with VALGRIND_OPTS=--track-origins=yes)
    where an uninitialised value was created, each with its own stack."""
    kind: str
    what: str
    stack: tuple[str, ...]
    notes: tuple[tuple[str, tuple[str, ...]], ...] = ()

    def __str__(self) -> str:
        lines = [f"{self.kind}: {self.what}", *(f"    {frame}" for frame in self.stack)]
        for note, stack in self.notes:
            lines += [f"  {note}", *(f"    {frame}" for frame in stack)]
        return "\n".join(lines)


def valgrind() -> str | None:
    return shutil.which("valgrind")


def run_under_valgrind(argv: list[str], cache_dir: str, timeout: float = 3600) -> tuple[int, list[Report], str]:
    """Run `python argv...` under memcheck (after a run without it fills `cache_dir`): the exit
    status, the reports in adc's code (of the process: valgrind writes XML for one process, and the run under
    it finds its kernels cached, forking no compiles) and the last line the program printed."""
    # no compile worker: a child forked by a threaded process under valgrind can spin before its
    # exec, holding the output pipe open long after the tests end; no kernel compiled ahead: the
    # first run may not have (a linking thread still ran), and a forked child would run LLVM under valgrind
    env = {**os.environ, "ADC_CPU": VALGRIND_CPU, "ADC_CACHE_DIR": cache_dir, "ADC_TEST_CACHE_DIR": cache_dir,
           "ADC_IN_PROCESS_COMPILES": str(10 ** 9), "ADC_COMPILE_AHEAD": "0", "PYTHONMALLOC": "malloc",
           "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}
    env.pop("ADC_CACHE", None)
    # the first run leaves the modules' bytecode for the second: compiling Python source under
    # valgrind took 4 of the 11 s `import adc` took there (a test session's bytecode cache, if it
    # has one, already holds it)
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    with tempfile.TemporaryDirectory(prefix="adc-memcheck-") as logs:
        env.setdefault("PYTHONPYCACHEPREFIX", f"{logs}/bytecode")
        try:
            subprocess.run([sys.executable, *argv], env=env, cwd=ROOT, capture_output=True, timeout=timeout)
        except subprocess.TimeoutExpired:       # what it did not compile, the run under valgrind will
            pass
        try:
            run = subprocess.run([valgrind(), "--xml=yes", f"--xml-file={logs}/%p.xml",
                                  "--child-silent-after-fork=yes", sys.executable, *argv],
                                 env=env, cwd=ROOT, capture_output=True, text=True, timeout=timeout)
            status, printed = run.returncode, run.stdout
        except subprocess.TimeoutExpired as stopped:       # what it checked until then still counts
            status, printed = TIMED_OUT, stopped.stdout or ""
        reports = [r for path in sorted(glob.glob(f"{logs}/*.xml")) for r in reports_in_adc(path)]
    if isinstance(printed, bytes):
        printed = printed.decode(errors="replace")
    return status, reports, (printed.strip().splitlines() or [""])[-1]


def assert_clean_under_valgrind(program: str, folder: Path, cache_dir: str) -> None:
    """Run Python `program` (its text, written into `folder`) under memcheck, compiling into
    `cache_dir`: it must exit 0 with no report in adc's code."""
    path = folder / "program.py"
    path.write_text(program)
    status, reports, _ = run_under_valgrind([str(path)], cache_dir)
    assert status == 0 and not reports, "\n\n".join(map(str, reports))


def reports_in_adc(path: str) -> list[Report]:
    found = []
    for error in _log(Path(path).read_text(errors="replace")).iter("error"):
        kind = error.findtext("kind", "")
        if kind.startswith("Leak_"):
            continue
        frames = error.find("stack").findall("frame") if error.find("stack") is not None else []
        if not any(_in_adc(f) for f in frames) or any(_in_loader(f) for f in frames):
            continue
        what = error.findtext("what") or error.findtext("xwhat/text") or ""
        found.append(Report(kind, what, tuple(_describe(f) for f in frames), _notes(error)))
    return found


def _notes(error: ET.Element) -> tuple[tuple[str, tuple[str, ...]], ...]:
    """What valgrind added after the first stack, each note with the stack that follows it."""
    children = list(error)
    first_stack = next((i for i, child in enumerate(children) if child.tag == "stack"), len(children))
    notes: list[tuple[str, tuple[str, ...]]] = []
    for child in children[first_stack + 1:]:
        if child.tag in ("auxwhat", "xauxwhat"):
            notes.append((child.text or child.findtext("text", ""), ()))
        elif child.tag == "stack" and notes:
            notes[-1] = (notes[-1][0], tuple(_describe(f) for f in child.findall("frame")))
    return tuple(notes)


def _log(text: str) -> ET.Element:
    """The XML log, up to its last complete report: a process that a damaged heap brought down
    (valgrind itself asserts on a corrupted block) stops mid-log or writes past its end."""
    closing = "</valgrindoutput>"
    if closing in text:
        text = text[:text.index(closing)]
    last = text.rfind("</error>")
    text = text[:last + len("</error>")] if last >= 0 else text[:text.find("<error>")] if "<error>" in text else text
    try:
        return ET.fromstring(text + closing)
    except ET.ParseError:
        return ET.Element("valgrindoutput")


def _in_adc(frame: ET.Element) -> bool:
    fn, obj, source = (frame.findtext(tag, "") for tag in ("fn", "obj", "file"))
    return fn.startswith(ADC_SYMBOLS) or source in ADC_SOURCES or (not fn and not obj)


def _in_loader(frame: ET.Element) -> bool:
    return any(name in frame.findtext("obj", "") for name in LOADER_OBJECTS)


def _describe(frame: ET.Element) -> str:
    fn, obj, source, line = (frame.findtext(tag, "") for tag in ("fn", "obj", "file", "line"))
    return f"{fn or '???'} ({f'{source}:{line}' if source else obj or 'JIT code'})"


def main(args: list[str]) -> int:
    """Run pytest with `args` under memcheck (`ADC_MEMCHECK_TIMEOUT` seconds at most, 4 hours by
    default; a run stopped there still reports what it checked)."""
    if valgrind() is None:
        print("memcheck: valgrind is not installed (apt-get install valgrind)", file=sys.stderr)
        return 2
    cache_dir = tempfile.mkdtemp(prefix="adc-memcheck-cache-")
    try:
        status, reports, last_line = run_under_valgrind(["-m", "pytest", "-n", "0", "-p", "no:cacheprovider", *args],
                                             cache_dir, float(os.environ.get("ADC_MEMCHECK_TIMEOUT", 4 * 3600)))
    finally:
        shutil.rmtree(cache_dir, ignore_errors=True)
    for report in reports:
        print(report, end="\n\n")
    ran = "stopped at its time limit" if status == TIMED_OUT else f"exited {status}"
    print(f"memcheck: {len(reports)} reports in adc's code; pytest {ran}: {last_line}")
    return 1 if reports or status else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

"""Reading valgrind's XML log: a report in adc's code keeps what valgrind added after its stack
(where an uninitialised value was created, the block an address lies in); the loader's are left out."""
from tests.support.memcheck import reports_in_adc

LOG = """<?xml version="1.0"?>
<valgrindoutput>
<error>
  <kind>UninitCondition</kind>
  <what>Conditional jump or move depends on uninitialised value(s)</what>
  <stack><frame><ip>0x1</ip></frame><frame><ip>0x2</ip></frame></stack>
  <auxwhat>Uninitialised value was created by a heap allocation</auxwhat>
  <stack><frame><fn>malloc</fn><obj>vgpreload_memcheck.so</obj></frame>
         <frame><fn>adc_alloc</fn><file>native_call.c</file><line>88</line></frame></stack>
</error>
<error>
  <kind>InvalidRead</kind>
  <what>Invalid read of size 8</what>
  <stack><frame><fn>_dl_relocate_object</fn><obj>/usr/lib/ld-linux-x86-64.so.2</obj></frame></stack>
</error>
"""


def test_a_report_keeps_where_its_uninitialised_value_was_created(tmp_path):
    log = tmp_path / "1.xml"
    log.write_text(LOG)            # cut short, as a process brought down mid-log leaves it
    (report,) = reports_in_adc(str(log))
    assert report.kind == "UninitCondition" and report.stack == ("??? (JIT code)", "??? (JIT code)")
    assert report.notes == (("Uninitialised value was created by a heap allocation",
                             ("malloc (vgpreload_memcheck.so)", "adc_alloc (native_call.c:88)")),)
    assert "created by a heap allocation\n    malloc" in str(report)

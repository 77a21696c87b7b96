"""`adc compile` → `adc.load` in a fresh process, and load errors (C programs: test_c_programs.py)."""
import json
import shutil
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import adc
from adc.abi import seal_file
from tests.support import references


def test_fresh_process_load_gives_identical_results(kernels_module, kernels_so, tmp_path):
    rng = np.random.default_rng(5)
    inputs = references.sample_inputs(rng, b=11, n=33)
    np.savez(tmp_path / "inputs.npz", **{f"{k}_{i}": a for k, args in inputs.items() for i, a in enumerate(args)})
    script = textwrap.dedent(f"""
        import sys, numpy as np, adc
        m = adc.load({str(kernels_so)!r})
        data = np.load({str(tmp_path / "inputs.npz")!r})
        out = {{}}
        for name in m.kernels:
            args = [data[k] for k in sorted(data.files, key=lambda k: int(k.rsplit("_", 1)[1])) if k.rsplit("_", 1)[0] == name]
            out[name] = np.asarray(getattr(m, name)(*args))
        np.savez({str(tmp_path / "out.npz")!r}, **out)
        assert "adc.codegen.lowering" not in sys.modules, "loading a .so must not need the compiler"
    """)
    subprocess.run([sys.executable, "-c", script], check=True, capture_output=True, text=True)
    loaded = np.load(tmp_path / "out.npz")
    for name, args in inputs.items():
        np.testing.assert_array_equal(loaded[name], getattr(kernels_module, name)(*args).numpy())


def test_loaded_module_carries_signatures_and_ir(kernels_so):
    m = adc.load(kernels_so)
    assert m.kernels == ("dense_relu", "mlp_loss", "sigmoid_shift", "batchnorm", "logsumexp_rows")
    assert str(m.logsumexp_rows.signature) == "logsumexp_rows(x: f64[B,N]) -> f64[B]"
    assert "func @mlp_loss(" in m.ir


def test_load_rejects_foreign_truncated_and_damaged_files(kernels_so, tmp_path):
    truncated = tmp_path / "truncated.so"
    truncated.write_bytes(kernels_so.read_bytes()[:2000])
    damaged = tmp_path / "damaged.so"
    data = bytearray(kernels_so.read_bytes())
    data[len(data) // 2] ^= 0xFF
    damaged.write_bytes(bytes(data))
    garbage = tmp_path / "garbage.so"
    garbage.write_bytes(b"\x7fELF" + bytes(range(256)) * 8)
    text = tmp_path / "text.so"
    text.write_text("not a library")
    for path in (truncated, damaged, garbage, text, tmp_path / "missing.so"):
        with pytest.raises(adc.LoadError, match=str(path.name)):
            adc.load(path)


@pytest.mark.skipif(shutil.which("cc") is None, reason="needs the system C compiler")
@pytest.mark.parametrize("body, message", [
    ("int unrelated(void) { return 0; }", "does not export adc_module_metadata"),
    ('const char *adc_module_metadata(void) { return "{\\"abi\\": 999}"; }', "ABI version 999"),
    ('const char *adc_module_metadata(void) { return "{nope"; }', "not valid JSON"),
])
def test_load_rejects_foreign_or_other_abi_modules(tmp_path, body, message):
    """Sealed like adc's own output, so the loader gets as far as the metadata."""
    src = tmp_path / "foreign.c"
    src.write_text(body + "\n")
    so = tmp_path / "foreign.so"
    subprocess.run(["cc", "-shared", "-fPIC", str(src), "-o", str(so)], check=True)
    seal_file(so, {"triple": "x86_64-unknown-linux-gnu", "cpu": "x86-64", "features": []})
    with pytest.raises(adc.LoadError, match=message):
        adc.load(so)


@pytest.mark.skipif(shutil.which("cc") is None, reason="needs the system C compiler")
def test_load_rejects_unsealed_shared_objects(tmp_path):
    src = tmp_path / "foreign.c"
    src.write_text("int unrelated(void) { return 0; }\n")
    so = tmp_path / "foreign.so"
    subprocess.run(["cc", "-shared", "-fPIC", str(src), "-o", str(so)], check=True)
    with pytest.raises(adc.LoadError, match="not an adc module"):
        adc.load(so)


def test_metadata_lists_constraints():
    m = adc.compile("def tail(x: f32[N]) -> f32[N-1]:\n    return x[1:]\n", "tail.adc")
    meta = json.loads(json.dumps(m.info.kernels[0].to_json()))
    assert meta["results"] == ["f32[N-1]"]
    with pytest.raises(ValueError, match=r"N-1 >= 0, but N = 0"):
        m.tail(np.zeros(0, np.float32))
    np.testing.assert_array_equal(m.tail(np.arange(3, dtype=np.float32)).numpy(), [1, 2])

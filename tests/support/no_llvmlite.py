"""A prelude for a child Python that must work without the compiler: it makes llvmlite unimportable,
as on a machine that has only the runtime's dependencies (loading a `.so` needs NumPy and ctypes)."""

BLOCK_LLVMLITE = """
import sys
class NoLlvmlite:
    def find_spec(self, name, path=None, target=None):
        if name == "llvmlite" or name.startswith("llvmlite."):
            raise ImportError("llvmlite is not installed here")
sys.meta_path.insert(0, NoLlvmlite())
"""

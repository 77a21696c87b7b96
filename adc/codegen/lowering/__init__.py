"""Lowering: IR → LLVM IR (llvmlite), each kernel an exported C-ABI function of fused loop nests."""

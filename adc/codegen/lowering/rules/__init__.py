"""Lowering rules, one module per op family."""

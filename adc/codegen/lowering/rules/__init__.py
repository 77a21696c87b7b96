"""Lowering rules: one module per op family, their rows gathered in table.py's `lower_rules`."""

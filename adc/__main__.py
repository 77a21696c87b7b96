"""`python -m adc` is the `adc` command."""
from adc.cli import main

raise SystemExit(main())

"""Per-step analysis of a generation: prefill and decode steps, each against the reference."""

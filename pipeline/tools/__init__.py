"""Commands people run beside the pipeline: clean, compare, explore, sync. Nothing imports them."""

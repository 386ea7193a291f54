"""Searches run as sweeps (`search=precision|delegation|reduce`): trials chosen from earlier ones."""

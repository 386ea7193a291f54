"""Compare: runtime outputs against the reference program, per handle group; the verdict."""

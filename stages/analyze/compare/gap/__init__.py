"""The numeric-gap table: groups of overlapping handles, their rows, and how each row is compared and judged."""

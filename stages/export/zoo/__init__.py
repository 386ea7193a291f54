"""Model zoo: models defined in the project, seeded random weights, no downloads."""

"""Debug handles: the ids that tie runtime events to the exported program's nodes, where they
live on fx nodes, and what each one stands for."""

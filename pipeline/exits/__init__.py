"""How the command ends: its exit codes (verdict, accuracy) and the process's quick exit; refused runs leave no run dir."""

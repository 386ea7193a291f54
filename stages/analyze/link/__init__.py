"""Link: runtime events -> delegate identifiers -> debug handles -> ops."""

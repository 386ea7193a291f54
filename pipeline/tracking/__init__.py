"""MLflow tracking: the only package that imports mlflow or opens its store."""

"""Config schemas in Hydra's ConfigStore and the checks a schema cannot express."""

"""Configuration presets shipped with kz, one YAML file each (see ``kz_core/config.py``)."""

"""The machine measured on: the device, NVML, the host, torch's process-wide settings, the environment recorded."""

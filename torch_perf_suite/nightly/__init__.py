"""The nightly: its command (command.py: a night recorded, its alerts decided, bisected and filed, the history
published), its history (nights.py), the creeps and change points in its series (creep.py, changes.py), its GitHub
client (github.py), its alerts' bisection (bisect_alerts.py) and its history as a static site (site.py, site_assets/)."""

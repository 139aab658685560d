"""HTTP routes: the two business services, and the /_sandbox control plane."""

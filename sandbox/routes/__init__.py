"""HTTP routes: the business services, and the /_sandbox control plane."""

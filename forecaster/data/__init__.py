"""Loading, splitting, scaling and windowing of time series."""

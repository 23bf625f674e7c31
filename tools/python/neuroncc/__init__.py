"""Python helpers for neuron-cc: graph export (later), tool drivers and test utilities."""

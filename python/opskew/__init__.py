"""opskew."""

"""Beat layouts and stream plumbing every pipeline uses."""

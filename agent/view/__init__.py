"""What a supervisor sees: the live view, `agent watch`, progress bars."""

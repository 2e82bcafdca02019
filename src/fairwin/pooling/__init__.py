"""Pooling a repeat's waves into one row: the server's counter sums and the client's trusted streams."""

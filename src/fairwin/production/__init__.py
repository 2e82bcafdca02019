"""Production: taken off its hardware for a window, proved down and quiet, brought back and watched."""

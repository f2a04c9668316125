"""Image backends: text-to-image generation and instruction editing."""

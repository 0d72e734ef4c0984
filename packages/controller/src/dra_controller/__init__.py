"""DRA CEL environment, structured allocator and kubectl dra."""

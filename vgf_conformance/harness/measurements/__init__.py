"""The measurements behind the bounds: each bound against its measured worst (slack), cross-machine drift, the model tier's seeds."""

"""The oracles: what a lowered program's outputs are compared with (float and fake-quantized references, the TOSA reference model, the .pte runtime, Vulkan), and how, in LSB."""

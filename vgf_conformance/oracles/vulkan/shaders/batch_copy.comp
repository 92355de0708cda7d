#version 450
// Copies one batch element between a batched NHWC tensor [N, H, W, C] and a
// tensor of that element alone [1, H, W, C]: the grid-sampler scenario's way
// to a batch N > 1 (its sampled and written images alias single-element
// tensors at offset 0 of their memory groups; images at a non-zero
// memory-group offset of a batched tensor did not read or write that memory
// on the emulation layer 0.11 + llvmpipe).
//
// Build options: -DELEM=int8_t|int16_t|int32_t|float (the tensors' element type).
// Specialization constants: 0 BATCH (the element), 1 TO_BATCHED (0: batched ->
// element, 1: element -> batched), 2 H, 3 W, 4 C.
#extension GL_ARM_tensors : require
#extension GL_EXT_shader_explicit_arithmetic_types : require

#ifndef ELEM
#define ELEM int8_t
#endif

layout(local_size_x = 64, local_size_y = 1, local_size_z = 1) in;

layout(constant_id = 0) const int BATCH = 0;
layout(constant_id = 1) const int TO_BATCHED = 0;
layout(constant_id = 2) const int H = 1;
layout(constant_id = 3) const int W = 1;
layout(constant_id = 4) const int C = 1;

layout(set = 0, binding = 0) uniform tensorARM<ELEM, 4> batched;
layout(set = 0, binding = 1) uniform tensorARM<ELEM, 4> element;

void main() {
    uint i = gl_GlobalInvocationID.x;
    if (i >= uint(H * W * C)) return;
    uint c = i % uint(C);
    uint x = (i / uint(C)) % uint(W);
    uint y = i / uint(C * W);
    ELEM v;
    if (TO_BATCHED == 0) {
        tensorReadARM(batched, uint[](uint(BATCH), y, x, c), v);
        tensorWriteARM(element, uint[](0u, y, x, c), v);
    } else {
        tensorReadARM(element, uint[](0u, y, x, c), v);
        tensorWriteARM(batched, uint[](uint(BATCH), y, x, c), v);
    }
}

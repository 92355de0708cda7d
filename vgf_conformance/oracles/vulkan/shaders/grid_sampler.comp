#version 450
// The grid-sampler delegate on Vulkan: torch.nn.functional.grid_sample
// semantics over an image sampled through a sampler, as the delegate's payload
// (vgf_export.grid_sampler_backend.GridSamplerPayload) describes it.
//
//   binding 0: sampler2D image: an R8G8B8A8_SNORM image aliasing the int8
//              NHWC [1, H, W, 4] input tensor (scale 1/127, zero point 0 is
//              exactly SNORM8), or R32G32B32A32_SFLOAT over a float32 tensor
//              (R8_SNORM / R8G8_SNORM, R32_SFLOAT / R32G32_SFLOAT for one- and
//              two-channel images). With a batch N > 1 the scenario dispatches
//              the shader once per batch element, over images aliasing that
//              element's slice of each tensor (a memory-group offset).
//              The scenario sets the sampler: LINEAR or NEAREST filter,
//              CLAMP_BORDER (transparent black) for zeros padding, else CLAMP_EDGE.
//   binding 1: the grid [1, Ho, Wo, 2] (x, y). Quantized (SNORM16 at 1/32767
//              or SNORM8 at 1/127): an R16G16_SNORM / R8G8_SNORM image aliasing
//              the grid tensor, read with texelFetch: the SNORM conversion is
//              exactly the dequantization. Float: tensorARM<float, 4>.
//   binding 2: the output image (rgba8_snorm or rgba32f; r8_snorm, rg8_snorm,
//              r32f, rg32f for one or two channels) aliasing the output tensor.
//
// Build options: -DGRID_IMAGE=0|1, -DOUT_FORMAT=rgba8_snorm|rgba32f,
// -DQUANTIZED_OUTPUT=0|1.
// Specialization constants:
//   0 ALIGN_CORNERS 0/1
//   1 PADDING 0 zeros, 1 border (clip in shader), 2 reflection (torch's
//     reflection + clip in shader)
//   (2: unused; bilinear or nearest is the sampler's filter, set by the
//     scenario. Both sample through the hardware sampler at the texel-centre
//     coordinate of torch's source index. A NEAREST sampler picks texel
//     floor(x + 0.5) where torch rounds half to even: the Vulkan tier compares
//     nearest with a reference that rounds ties up, see
//     vgf_conformance.cases.tolerances.VULKAN_NEAREST_TIES.)
//   3 GRID_SCALE float (unused: kept for the binding layout of older scenarios)
//   4 OUT_INV_SCALE 1/output scale (127 for SNORM8); the shader rounds half to
//     even like torch's quantize and stores exact k/127 values.
//   5 BATCH the batch element a float grid tensor is read at (default 0).
#extension GL_ARM_tensors : require
#extension GL_EXT_shader_explicit_arithmetic_types : require

#ifndef GRID_IMAGE
#define GRID_IMAGE 1
#endif
#ifndef OUT_FORMAT
#define OUT_FORMAT rgba8_snorm
#endif
#ifndef QUANTIZED_OUTPUT
#define QUANTIZED_OUTPUT 1
#endif

layout(local_size_x = 8, local_size_y = 8, local_size_z = 1) in;

layout(constant_id = 0) const int ALIGN_CORNERS = 0;
layout(constant_id = 1) const int PADDING = 0;
layout(constant_id = 3) const float GRID_SCALE = 3.0518509447574615e-05;
layout(constant_id = 4) const float OUT_INV_SCALE = 127.0;
layout(constant_id = 5) const int BATCH = 0;

layout(set = 0, binding = 0) uniform sampler2D image_in;
#if GRID_IMAGE
layout(set = 0, binding = 1) uniform sampler2D grid;
#else
layout(set = 0, binding = 1) uniform tensorARM<float, 4> grid;
#endif
layout(set = 0, binding = 2, OUT_FORMAT) uniform writeonly image2D image_out;

float unnormalize(float g, int size) {
    return (ALIGN_CORNERS != 0) ? ((g + 1.0) / 2.0) * float(size - 1)
                                : ((g + 1.0) * float(size) - 1.0) / 2.0;
}

float reflect_coord(float x, int twice_low, int twice_high) {
    if (twice_low == twice_high) return 0.0;
    float low = float(twice_low) / 2.0;
    float span = float(twice_high - twice_low) / 2.0;
    x = abs(x - low);
    float extra = mod(x, span);
    int flips = int(floor(x / span));
    return ((flips & 1) == 0) ? extra + low : span - extra + low;
}

float source_index(float g, int size) {
    float x = unnormalize(g, size);
    if (PADDING == 1) {
        x = clamp(x, 0.0, float(size - 1));
    } else if (PADDING == 2) {
        x = (ALIGN_CORNERS != 0) ? reflect_coord(x, 0, 2 * (size - 1))
                                 : reflect_coord(x, -1, 2 * size - 1);
        x = clamp(x, 0.0, float(size - 1));
    }
    return x;
}

void main() {
    ivec2 out_size = imageSize(image_out);
    ivec2 o = ivec2(gl_GlobalInvocationID.xy);
    if (o.x >= out_size.x || o.y >= out_size.y) return;

#if GRID_IMAGE
    vec2 g = texelFetch(grid, o, 0).xy;
#else
    vec2 g;
    tensorReadARM(grid, uint[](uint(BATCH), uint(o.y), uint(o.x), 0u), g.x);
    tensorReadARM(grid, uint[](uint(BATCH), uint(o.y), uint(o.x), 1u), g.y);
#endif
    ivec2 in_size = textureSize(image_in, 0);
    float ix = source_index(g.x, in_size.x);
    float iy = source_index(g.y, in_size.y);

    // LINEAR: the sampler computes uv * size - 0.5 == the source index and
    // weighs its neighbours; NEAREST: texel floor(uv * size) == floor(index + 0.5).
    // Outside the image: the border (zeros padding) or the edge.
    vec4 v = textureLod(image_in, (vec2(ix, iy) + 0.5) / vec2(in_size), 0.0);
#if QUANTIZED_OUTPUT
    v = clamp(roundEven(v * OUT_INV_SCALE), -127.0, 127.0) / 127.0;
#endif
    imageStore(image_out, o, v);
}

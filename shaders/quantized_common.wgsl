// Quantized weight matrices (src/quantize.rs has the formats): W [N, K] as u32 words, row
// after row (p.row_words each, rows padded to whole groups of 8 elements, 32 for q8 and q4), with
// the format's scales. `dequant8` decodes elements 8g..8g + 8 of a row, as the host's
// `quantize::dequantize_row` does.

struct Params {
    m: u32,          // rows of A (matmul) or ids (gather)
    n: u32,          // rows of W: output channels
    k: u32,          // columns of W: input features
    format: u32,     // FORMAT_*
    row_words: u32,  // words per row of W
    a_rs: u32,       // floats per row of A
    c_rs: u32,       // floats per row of C
    has_bias: u32,
}

const FORMAT_F16: u32 = 0u;
const FORMAT_Q8: u32 = 1u;

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> weights: array<u32>;  // (N, row_words)
@group(0) @binding(2) var<storage, read> scales: array<f32>;   // q8: (N, row_words / 8); q4: (N, row_words / 4); f16: unused

// Four signed bytes, the lowest first.
fn bytes4(w: u32) -> vec4<f32> {
    return vec4<f32>(vec4<i32>(bitcast<i32>(w << 24u) >> 24u, bitcast<i32>(w << 16u) >> 24u,
                               bitcast<i32>(w << 8u) >> 24u, bitcast<i32>(w) >> 24u));
}

// Four 4-bit codes, the lowest first, as values q − 8.
fn nibbles4(w: u32) -> vec4<f32> {
    return vec4<f32>(f32(w & 15u), f32((w >> 4u) & 15u), f32((w >> 8u) & 15u), f32((w >> 12u) & 15u)) - 8.0;
}

// Elements 8g..8g + 8 of row n of W.
fn dequant8(n: u32, g: u32) -> array<vec4<f32>, 2> {
    let row = n * p.row_words;
    if p.format == FORMAT_F16 {
        let w = row + 4u * g;
        return array<vec4<f32>, 2>(vec4<f32>(unpack2x16float(weights[w]), unpack2x16float(weights[w + 1u])),
                                   vec4<f32>(unpack2x16float(weights[w + 2u]), unpack2x16float(weights[w + 3u])));
    }
    // q8 and q4: a scale per block of 32 (q8: 8 words a block, q4: 4).
    if p.format == FORMAT_Q8 {
        let s = scales[n * (p.row_words / 8u) + g / 4u];
        return array<vec4<f32>, 2>(bytes4(weights[row + 2u * g]) * s, bytes4(weights[row + 2u * g + 1u]) * s);
    }
    // q4: a word per group.
    let d = scales[n * (p.row_words / 4u) + g / 4u];
    let w = weights[row + g];
    return array<vec4<f32>, 2>(nibbles4(w) * d, nibbles4(w >> 16u) * d);
}

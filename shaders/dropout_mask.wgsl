// The dropout mask, prepended to every shader that drops: element `index` of the call keyed
// (key0, key1) is kept iff its hash is ≥ threshold = p·2³², and kept values are scaled by
// 1/(1 − p). The mask is a pure function of (key, index), so a backward pass regenerates it
// instead of storing it. Mirrored bit for bit by ops::dropout::Dropout::keeps and by
// tests/reference/make_train_fixtures.py.

// MurmurHash3's 32-bit finalizer: a bijection whose output bits each depend on every input bit.
fn fmix32(x: u32) -> u32 {
    var h = x;
    h ^= h >> 16u;
    h *= 0x85ebca6bu;
    h ^= h >> 13u;
    h *= 0xc2b2ae35u;
    h ^= h >> 16u;
    return h;
}

// The factor element `index` is multiplied by: 0 (dropped) or `scale` (kept).
fn dropout_factor(index: u32, threshold: u32, scale: f32, key0: u32, key1: u32) -> f32 {
    let h = fmix32(fmix32(index * 0x9e3779b1u + key0) ^ key1);
    return select(0.0, scale, h >= threshold);
}
